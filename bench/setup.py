#!/usr/bin/env python3
"""Setup and caches (`make bench`, SPEC §21). Prints each figure.

A task whose `task.setup` is `pip install` of real packages from the real PyPI
through the egress proxy (`task.setup.allow: pypi.org, files.pythonhosted.org`),
in a Debian image with python3 and pip (no agent-runner tools in it but the fake
codex), with `runner.worker.caches: [/root/.cache/pip]`. The cache volume of the
bench's repository is removed first; then the same task runs twice in that
repository. The second setup finds pip's downloads in the volume.

Figure: the second setup's time as a share of the first (target <= 30 %), per
pair; BENCH_RUNS pairs (default 3), each with a fresh cache. BENCH_PIP sets what
is installed (default: requests and rich, with their dependencies). Two setups:

- `pip install`: pip's own cache (its HTTP cache keeps what the index and the file
  host allow to be cached: nothing where a mirror strips the Cache-Control headers).
- a wheelhouse in the cache: `pip install --no-index --find-links` from the cache,
  and on a miss `pip download` into it first (no network when it hits).
"""

import hashlib
import json
import ipaddress
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
PIP = os.environ.get("BENCH_PIP", "requests==2.32.3 rich==13.9.4")
BASE = "agent-runner-sandbox-base:bookworm"


def image():
    """Debian with python3 and pip, the fake codex as its agent, and this machine's CA
    bundle (where registry traffic goes through a TLS-inspecting proxy, its CA is
    there); built once."""
    with open(os.path.join(ROOT, "testdata/worker-image/codex"), "rb") as f:
        codex = f.read()
    with open("/etc/ssl/certs/ca-certificates.crt", "rb") as f:
        cas = f.read()
    dockerfile = (f"FROM {BASE}\n"
                  "RUN apt-get update -q && apt-get install -y -q --no-install-recommends "
                  "python3 python3-pip && rm -rf /var/lib/apt/lists/*\n"
                  "COPY codex /usr/local/bin/codex\nRUN chmod 755 /usr/local/bin/codex\n"
                  "COPY ca.crt /etc/ssl/certs/ca-certificates.crt\n"
                  "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt\n")
    digest = hashlib.sha256(dockerfile.encode() + codex + cas).hexdigest()[:16]
    tag = "agent-runner-bench-pip:" + digest
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    if subprocess.run(["docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        sys.exit(f"bench/setup.py: {BASE} is missing (make sandbox-image makes it, as root)")
    context = tempfile.mkdtemp(prefix="ar-bench-pip-")
    try:
        with open(os.path.join(context, "Dockerfile"), "w") as f:
            f.write(dockerfile)
        with open(os.path.join(context, "codex"), "wb") as f:
            f.write(codex)
        with open(os.path.join(context, "ca.crt"), "wb") as f:
            f.write(cas)
        subprocess.run(["docker", "build", "-q", "--network", "host", "-t", tag, context],
                       check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, DOCKER_BUILDKIT="0"))
    finally:
        shutil.rmtree(context)
    return tag


def setup_hosts():
    """PyPI's hosts, and the addresses they resolve to here when those are not
    global ones (a machine whose registry traffic goes through a local mirror or
    proxy): the egress proxy refuses those unless they are listed."""
    hosts = ["pypi.org", "files.pythonhosted.org"]
    extra = set()
    for host in hosts:
        try:
            infos = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
        except OSError:
            continue
        for info in infos:
            ip = ipaddress.ip_address(info[4][0])
            if not ip.is_global:
                extra.add(str(ip))
    return hosts + sorted(extra)


def seconds(human):
    """`450 ms`, `12.3 s`, `1 min 3 s` → seconds."""
    m = re.fullmatch(r"(\d+) ms", human)
    if m:
        return int(m.group(1)) / 1000
    m = re.fullmatch(r"([\d.]+) s", human)
    if m:
        return float(m.group(1))
    m = re.fullmatch(r"(\d+) min (\d+) s", human)
    return int(m.group(1)) * 60 + int(m.group(2))


PIP_FLAGS = "-q --no-compile --break-system-packages --disable-pip-version-check"
SETUPS = {
    "pip install (pip's cache)": f"pip install {PIP_FLAGS} --target /tmp/site {PIP}",
    "wheelhouse in the cache": (
        f"W=/root/.cache/pip/wheelhouse; pip install {PIP_FLAGS} --target /tmp/site --no-index "
        f"--find-links $W {PIP} 2>/dev/null || {{ pip download -q --disable-pip-version-check "
        f"-d $W {PIP} && pip install {PIP_FLAGS} --target /tmp/site --no-index --find-links $W {PIP}; }}"),
}


def task(work, repo, image, n, setup):
    """Runs the task once in `repo`; the setup's duration in seconds."""
    task_id = f"bench-setup-{os.getpid()}-{n}"
    script = os.path.join(work, "meta.yaml")
    with open(script, "w") as f:
        f.write("- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: x\n"
                "- type: next_action\n  decision: {action: mark_complete, reason: check}\n"
                "- type: completion_assessment\n  summary: ok\n"
                "  details: {passed_criteria: [AC-1], remaining_risks: []}\n")
    yaml = (f"version: 1\ntask:\n  id: {task_id}\n  repo: {repo}\n  prd: {{text: x}}\n"
            f"  test: {{command: 'true'}}\n"
            f"  setup:\n    command: {json.dumps(setup)}\n    timeout_sec: 600\n"
            f"    allow: [{', '.join(setup_hosts())}]\n"
            f"runner:\n  meta: {{kind: scripted, script: {script}, max_loops: 1}}\n"
            f"  worker:\n    docker_image: {image}\n    caches: [/root/.cache/pip]\n")
    tmp = os.path.join(work, "t")
    os.makedirs(tmp, exist_ok=True)
    env = dict(os.environ, TMPDIR=tmp, HOME=tmp, RUST_LOG="warn")
    out = subprocess.run([BIN, "run"], input=yaml.encode(), capture_output=True, env=env)
    with open(os.path.join(repo, f".agent-runner/task-{task_id}.md")) as f:
        note = f.read()
    m = re.search(r"- Summary: passed in ([^()]+) \(exit 0\)", note)
    if out.returncode != 0 or not m:
        sys.exit(f"bench/setup.py: the task failed:\n{out.stderr.decode()[-2000:]}\n{note[-3000:]}")
    return seconds(m.group(1).strip())


def main():
    img = image()
    work = tempfile.mkdtemp(prefix="ar-bench-setup-")
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    n = 0
    try:
        print(f"setup: pip install {PIP} from PyPI through the egress proxy, {RUNS} pair(s) each")
        for name, setup in SETUPS.items():
            firsts, seconds_, ratios = [], [], []
            for _ in range(RUNS):
                subprocess.run([BIN, "cache", "rm", "--repo", repo], capture_output=True)
                first = task(work, repo, img, n, setup)
                second = task(work, repo, img, n + 1, setup)
                n += 2
                firsts.append(first)
                seconds_.append(second)
                ratios.append(second / first)
            print(f"  {name}:")
            print(f"    first setup (empty cache): median {statistics.median(firsts):.2f} s "
                  f"(min {min(firsts):.2f}, max {max(firsts):.2f})")
            print(f"    second setup (the cache):  median {statistics.median(seconds_):.2f} s "
                  f"(min {min(seconds_):.2f}, max {max(seconds_):.2f})")
            print(f"    second / first:            median {100 * statistics.median(ratios):.0f} % "
                  f"(max {100 * max(ratios):.0f} %; target <= 30 %)")
    finally:
        subprocess.run([BIN, "cache", "rm", "--repo", repo], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
