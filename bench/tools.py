#!/usr/bin/env python3
"""The tools volume (SPEC §21; `make bench`; median, min, max).

1. Start to the first worker run, with the agent from the image (hash-pinned) and
   from the tools volume (`agent_from: tools`, read-only): a 1-loop task (network
   none, scripted Meta), from the runner's first log line to the debug line that
   says the agent was checked, right before the agent's exec. In the test worker
   image (a busybox script agent) against the volume's real codex, and, when it is
   built, agent-runner-codex:latest (its own real codex, 294 MB) against the
   volume's (the same binary), whose model is unreachable and runs cut at 2 s.
   Target: the volume at most +100 ms.
2. Filling the tools volume on a fresh host: the volume removed (when no container
   uses it), then `agent-runner tools install` timed; its size in the volume.
   BENCH_TOOLS_FILL=0 leaves the volume as it is.
BENCH_RUNS sets the rounds (default 7), interleaved, the first a warm-up.
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
IMAGE = "agent-runner-test-worker:latest"
REAL_IMAGE = "agent-runner-codex:latest"
RUNS = int(os.environ.get("BENCH_RUNS", "7"))


def stats(values, unit="ms", scale=1000):
    if not values:
        return "no figures"
    values = [v * scale for v in values]
    return (f"median {statistics.median(values):.0f} {unit}, min {min(values):.0f}, "
            f"max {max(values):.0f} ({len(values)} runs)")


def script(work):
    path = os.path.join(work, "meta.yaml")
    replies = ["type: plan_task\nacceptance_criteria:\n  - id: AC-1\n    description: x\n",
               "type: next_action\ndecision: {action: run_worker, reason: go}\n"
               "worker_call: {worker_type: codex-cli, mode: exec, prompt: \"@say: done\"}\n",
               "type: completion_assessment\nsummary: ok\ndetails: {passed_criteria: [AC-1]}\n"]
    with open(path, "w") as f:
        for reply in replies:
            f.write("- |\n" + "".join(f"  {line}\n" for line in reply.splitlines()))
    return path


def task(work, name, meta, image, extra):
    repo = os.path.join(work, name)
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q", repo], check=True)
    return (f"version: 1\ntask: {{id: {name}, repo: {repo}, prd: {{text: x}}}}\nrunner:\n"
            f"  meta: {{kind: scripted, script: {meta}, max_loops: 1}}\n"
            f"  worker:\n    docker_image: {image}\n    network: none\n{extra}")


def clock(line):
    m = re.match(r"(\d\d):(\d\d):(\d\d)\.(\d\d\d) ", line)
    if not m:
        return None
    h, mi, s, ms = (int(g) for g in m.groups())
    return h * 3600 + mi * 60 + s + ms / 1000


def to_first_run(yaml, env):
    proc = subprocess.run([BIN, "run"], input=yaml.encode(), env=env, capture_output=True)
    log = proc.stderr.decode()
    lines = [line for line in log.splitlines() if clock(line) is not None]
    checked = [line for line in lines if re.search(r"worker run 1: the agent \S+ starts", line)]
    if not lines or not checked:
        sys.exit(f"no agent check in the log ({proc.returncode}):\n{log[-3000:]}")
    return clock(checked[0]) - clock(lines[0])


def start_to_first_run(work, env):
    env = dict(env, RUST_LOG="agent_runner=debug")
    meta = script(work)
    real = ("    max_run_time_sec: 2\n    base_url: http://127.0.0.1:1/v1\n"
            "    env: {CODEX_API_KEY: sk-bench-unused}\n")
    pairs = [(IMAGE, "")]
    if subprocess.run(["docker", "image", "inspect", REAL_IMAGE], capture_output=True).returncode == 0:
        pairs.append((REAL_IMAGE, real))
    else:
        print(f"bench: {REAL_IMAGE} left out: it is not built (make sandbox-image)", file=sys.stderr)
    rows = []
    for k, (image, extra) in enumerate(pairs):
        variants = [("the image's agent", extra + "    agent_from: image\n"),
                    ("the tools volume's codex", real + "    agent_from: tools\n")]
        took = {label: [] for label, _ in variants}
        for n in range(RUNS + 1):
            for v, (label, more) in enumerate(variants):
                t = to_first_run(task(work, f"start-{k}-{v}-{n}", meta, image, more), env)
                if n > 0:
                    took[label].append(t)
        for label, _ in variants:
            rows.append((f"start to the first worker run, {image}, {label}", stats(took[label])))
        delta = statistics.median(took[variants[1][0]]) - statistics.median(took[variants[0][0]])
        rows.append((f"  the tools volume's cost there (target <= +100 ms)", f"{delta * 1000:+.0f} ms"))
    return rows


def volume_name():
    out = subprocess.run([BIN, "tools", "install"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"agent-runner tools install failed:\n{out.stderr[-2000:]}")
    return out.stdout.split()[0]


def fill(env):
    volume = volume_name()
    if os.environ.get("BENCH_TOOLS_FILL", "1") == "0":
        return [("filling the tools volume", "left out (BENCH_TOOLS_FILL=0)")]
    removed = subprocess.run(["docker", "volume", "rm", volume], capture_output=True, text=True)
    if removed.returncode != 0:
        return [("filling the tools volume", f"left out: {volume} is in use ({removed.stderr.strip()})")]
    start = time.time()
    out = subprocess.run([BIN, "tools", "install"], env=env, capture_output=True, text=True)
    took = time.time() - start
    if out.returncode != 0:
        sys.exit(f"agent-runner tools install failed:\n{out.stderr[-2000:]}")
    size = subprocess.run(["docker", "run", "--rm", "--network", "none", "--mount",
                           f"type=volume,source={volume},target=/v,readonly", IMAGE,
                           "du", "-sk", "/v"], capture_output=True, text=True)
    mb = int(size.stdout.split()[0]) / 1024 if size.returncode == 0 else float("nan")
    downloaded = re.search(r"\((\d+) MB downloaded", out.stdout)
    return [("filling the tools volume on a fresh host",
             f"{took:.1f} s, {downloaded.group(1) if downloaded else '?'} MB downloaded, "
             f"{mb:.0f} MB in the volume")]


def main():
    env = dict(os.environ, RUST_LOG="info")
    env.pop("OPENAI_API_KEY", None)
    work = tempfile.mkdtemp(prefix="agent-runner-bench-tools-")
    try:
        rows = fill(env) + start_to_first_run(work, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(label) for label, _ in rows)
    print(f"\nagent-runner: the tools volume ({os.cpu_count()} cores)")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


if __name__ == "__main__":
    main()
