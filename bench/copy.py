#!/usr/bin/env python3
"""The copy transport (SPEC §22; `make bench`; median, min, max).

A 50 MB repository (five 10 MB random files, committed) on an emulated remote
Docker host (a Docker-in-Docker container of agent-runner-test-remote-host:1 at
tcp://127.0.0.N:2375, as the tests start them, with the test worker image loaded):

1. agent-runner: a 1-loop task (scripted Meta, network none) whose worker commits a
   change; from its log, the repository in (clone here, volume filled by one tar
   stream, `docker cp -a -`) and the work out (bundler on the host, read out,
   landed as the branch agent-runner/<id>).
2. By hand, the same host: `docker cp` of the working tree (with .git) into a
   volume through a created container; a container that commits the same change
   and writes `git bundle` into a second volume, read out with `docker cp`.

BENCH_RUNS sets the rounds (default 3, after a warm-up that fills the host's tools
volume).
"""

import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
IMAGE = "agent-runner-test-worker:latest"
HOST_IMAGE = "agent-runner-test-remote-host:1"
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
GIT = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]


def stats(values):
    if not values:
        return "no figures"
    ms = [v * 1000 for v in values]
    return (f"median {statistics.median(ms):.0f} ms, min {min(ms):.0f}, "
            f"max {max(ms):.0f} ({len(ms)} runs)")


def sh(args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def free_address():
    for n in range(230, 254):
        address = f"127.0.0.{n}"
        with socket.socket() as s:
            try:
                s.bind((address, 2375))
                return address
            except OSError:
                continue
    sys.exit("bench/copy.py: no free 127.0.0.N:2375")


def start_host(name, address):
    sh(["docker", "run", "-d", "--name", name, "--network", "host", "--cgroupns=private",
        "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
        "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
        "--tmpfs", "/run", "--mount", f"type=volume,source={name},target=/var/lib/docker",
        HOST_IMAGE, address])
    url = f"tcp://{address}:2375"
    deadline = time.time() + 60
    while subprocess.run(["docker", "-H", url, "version"], capture_output=True).returncode:
        if time.time() > deadline:
            sys.exit(f"bench/copy.py: the host at {url} did not answer")
        time.sleep(0.2)
    subprocess.run(f"docker save {IMAGE} | docker -H {url} load -q", shell=True, check=True,
                   capture_output=True)
    return url


def repository(path):
    os.makedirs(path)
    sh(["git", "init", "-q", path])
    for i in range(5):
        with open(os.path.join(path, f"data-{i}.bin"), "wb") as f:
            f.write(os.urandom(10 << 20))
    with open(os.path.join(path, "out.txt"), "w") as f:
        f.write("wrong\n")
    sh(["git", "-C", path, "add", "-A"])
    sh(GIT + ["-C", path, "commit", "-qm", "base"])


def meta_script(work):
    path = os.path.join(work, "meta.yaml")
    replies = ["type: plan_task\nacceptance_criteria:\n  - id: AC-1\n    description: x\n",
               "type: next_action\ndecision: {action: run_worker, reason: go}\n"
               "worker_call: {worker_type: codex-cli, mode: exec, prompt: \"@run: echo ok > out.txt;"
               " git -c user.name=w -c user.email=w@w commit -qam ok\\n@say: done\"}\n",
               "type: completion_assessment\nsummary: ok\ndetails: {passed_criteria: [AC-1]}\n"]
    with open(path, "w") as f:
        for reply in replies:
            f.write("- |\n" + "".join(f"  {line}\n" for line in reply.splitlines()))
    return path


def seconds(text):
    """A duration as agent-runner's logs write it (`850 ms`, `1.2 s`, `1 min 3 s`)."""
    total = 0.0
    for value, unit in re.findall(r"([\d.]+)\s*(ms|s|min|h)\b", text):
        total += float(value) * {"ms": 0.001, "s": 1, "min": 60, "h": 3600}[unit]
    return total


def agent_runner(work, url, n):
    repo = os.path.join(work, f"repo-{n}")
    repository(repo)
    yaml = (f"version: 1\ntask: {{id: copy-{n}, repo: {repo}, prd: {{text: x}}}}\nrunner:\n"
            f"  meta: {{kind: scripted, script: {meta_script(work)}, max_loops: 1}}\n"
            f"  worker: {{docker_image: \"{IMAGE}\", network: none}}\n")
    env = dict(os.environ, DOCKER_HOST=url, RUST_LOG="info", OPENAI_API_KEY="sk-bench")
    started = time.time()
    out = subprocess.run([BIN, "run"], input=yaml, capture_output=True, text=True, env=env)
    took = time.time() - started
    if out.returncode != 0 or "agent-runner/copy-" not in out.stdout:
        sys.exit(f"bench/copy.py: the task failed:\n{out.stdout}\n{out.stderr[-3000:]}")
    copied = re.search(r"repository copied to the sandbox's host in (.+)", out.stderr)
    back = re.search(r"the work is on the branch \S+ \(\w+\) \(in (.+)\)", out.stderr)
    shutil.rmtree(repo)
    return seconds(copied.group(1)), seconds(back.group(1)), took


def by_hand(work, url, n):
    repo = os.path.join(work, f"hand-{n}")
    repository(repo)
    base = sh(["git", "-C", repo, "rev-parse", "HEAD"]).strip()
    d = ["docker", "-H", url]
    vol, out = f"bench-copy-{n}", f"bench-copy-{n}-out"
    started = time.time()
    sh(d + ["volume", "create", vol])
    sh(d + ["create", "--name", vol, "-v", f"{vol}:/w", IMAGE, "true"])
    sh(d + ["cp", "-a", f"{repo}/.", f"{vol}:/w"])
    sh(d + ["rm", vol])
    copied = time.time() - started
    started = time.time()
    sh(d + ["volume", "create", out])
    script = ("cd /w && echo ok > out.txt && git -c user.name=w -c user.email=w@w commit -qam ok"
              f" && git bundle create -q /out/b.bundle HEAD ^{base}")
    sh(d + ["run", "--rm", "--network", "none", "-v", f"{vol}:/w", "-v", f"{out}:/out",
            IMAGE, "sh", "-c", f"git config --global safe.directory '*'; {script}"])
    sh(d + ["create", "--name", out, "-v", f"{out}:/out", IMAGE, "true"])
    sh(d + ["cp", f"{out}:/out/b.bundle", os.path.join(work, "b.bundle")])
    sh(d + ["rm", out])
    back = time.time() - started
    sh(d + ["volume", "rm", vol, out])
    shutil.rmtree(repo)
    return copied, back


def main():
    if not os.path.exists(BIN):
        sys.exit(f"bench/copy.py: build {BIN} first (cargo build --release)")
    name = f"agent-runner-bench-copy-{os.getpid()}"
    work = tempfile.mkdtemp(prefix="agent-runner-bench-copy-")
    try:
        url = start_host(name, free_address())
        agent_runner(work, url, 0)  # warm-up: the host's tools volume
        ours, hand = [], []
        for n in range(1, RUNS + 1):
            ours.append(agent_runner(work, url, n))
            hand.append(by_hand(work, url, n))
        print("copy transport, a 50 MB repository on an emulated tcp:// host:")
        print(f"  agent-runner, in (clone + docker cp): {stats([r[0] for r in ours])}")
        print(f"  agent-runner, out (bundler + landing): {stats([r[1] for r in ours])}")
        print(f"  agent-runner, whole 1-loop task:      {stats([r[2] for r in ours])}")
        print(f"  by hand, in (docker cp):              {stats([h[0] for h in hand])}")
        print(f"  by hand, out (commit + bundle + cp):  {stats([h[1] for h in hand])}")
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        subprocess.run(["docker", "volume", "rm", "-f", name], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
