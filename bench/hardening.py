#!/usr/bin/env python3
"""What the sandbox's protections of issue 28 cost (`make bench`; median, min, max).

1. A worker run with the seccomp profile (no set-id bits) and without it: a 1-loop
   task (test worker image, network none, scripted Meta) whose worker creates and
   chmods 500 files, run by this tree's binary with the profile and with a `docker`
   on PATH that drops `--security-opt seccomp=…` (the daemon's own default profile),
   and, when BENCH_BEFORE_BIN names a binary built before issue 28, by that one too;
   rounds interleaved, the first one a warm-up. Figures: the task's wall time and the
   worker run's own time (its agent exec, from the progress log).
2. The agent check (crates/sandbox/src/worker/agent_files.rs): pinning when the container starts
   (cold the first time an image ID is seen on this machine, then kept) and the check
   beside each run (SPEC §27: one `docker diff`, off the run's path), from the debug log; with the test image (a busybox
   script agent) and, when it is built, the real image agent-runner-codex:latest
   (codex: a 294 MB static binary; /bin/sh: dash with libc), whose codex is given an
   unreachable model and a 2 s limit per run. Each with the container untouched
   (`docker diff` names none of the agent's paths: no copy) and with a file added
   beside the agent by the test command between the runs, as a `pip install` into
   /usr/local/bin would (every file copied and hashed again).
BENCH_RUNS sets the rounds (default 9).
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
BEFORE = os.environ.get("BENCH_BEFORE_BIN")
IMAGE = "agent-runner-test-worker:latest"
REAL_IMAGE = "agent-runner-codex:latest"
RUNS = int(os.environ.get("BENCH_RUNS", "9"))

WORK = "@run: i=0; while [ $i -lt 500 ]; do echo x > f$i; chmod 644 f$i; i=$((i+1)); done\\n@say: done"


def script(work, runs):
    path = os.path.join(work, f"meta-{runs}.yaml")
    replies = ["type: plan_task\nacceptance_criteria:\n  - id: AC-1\n    description: x\n"]
    for n in range(runs):
        replies.append("type: next_action\ndecision: {action: run_worker, reason: go}\n"
                       f"worker_call: {{worker_type: codex-cli, mode: exec, prompt: \"{WORK}\"}}\n")
        passed = "[AC-1]" if n + 1 == runs else "[]"
        replies.append(f"type: completion_assessment\nsummary: ok\ndetails: {{passed_criteria: {passed}}}\n")
    with open(path, "w") as f:
        for reply in replies:
            f.write("- |\n" + "".join(f"  {line}\n" for line in reply.splitlines()))
    return path


def task(work, name, meta, image, worker_extra="", test=None):
    repo = os.path.join(work, name)
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q", repo], check=True)
    test = f", test: {{command: '{test}'}}" if test else ""
    return (f"version: 1\ntask: {{id: {name}, repo: {repo}, prd: {{text: x}}{test}}}\nrunner:\n"
            f"  meta: {{kind: scripted, script: {meta}, max_loops: 5}}\n"
            f"  worker:\n    docker_image: {image}\n    network: none\n{worker_extra}")


def run(binary, yaml, env, ok=(0,)):
    start = time.time()
    proc = subprocess.run([binary, "run"], input=yaml.encode(), env=env, capture_output=True)
    took = time.time() - start
    if proc.returncode not in ok:
        sys.exit(f"{binary} failed ({proc.returncode}):\n{proc.stderr.decode()[-3000:]}")
    return took, proc.stderr.decode()


def seconds(log, pattern):
    """Durations (s) in log lines matching pattern, whose group 1 is '<n> <unit>'."""
    out = []
    for m in re.finditer(pattern, log):
        value, unit = m.group(1).split()
        out.append(float(value) * {"ms": 0.001, "s": 1.0, "µs": 1e-6}[unit])
    return out


def stats(values):
    return (f"{statistics.median(values):7.3f} s  (min {min(values):.3f}, max {max(values):.3f}, "
            f"n={len(values)})")


def without_profile(work):
    """A PATH whose docker drops agent-runner's seccomp profile."""
    real = shutil.which("docker")
    wrapper = os.path.join(work, "no-seccomp")
    os.makedirs(wrapper)
    path = os.path.join(wrapper, "docker")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nn=$#\nwhile [ $n -gt 0 ]; do\n  a=$1; shift; n=$((n - 1))\n"
                "  if [ \"$a\" = --security-opt ] && [ $n -gt 0 ]; then\n"
                "    case $1 in seccomp=*) shift; n=$((n - 1)); continue ;; esac\n  fi\n"
                f"  set -- \"$@\" \"$a\"\ndone\nexec {real} \"$@\"\n")
    os.chmod(path, 0o755)
    return wrapper + ":" + os.environ["PATH"]


def worker_run(work, env):
    meta = script(work, 1)
    variants = [("with the profile", BIN, env),
                ("without it (daemon's default profile)", BIN,
                 dict(env, PATH=without_profile(work)))]
    if BEFORE:
        variants.append(("before issue 28 (BENCH_BEFORE_BIN)", BEFORE, env))
    walls = {label: [] for label, _, _ in variants}
    runs = {label: [] for label, _, _ in variants}
    for n in range(RUNS + 1):
        for k, (label, binary, variant_env) in enumerate(variants):
            took, log = run(binary, task(work, f"hard-{k}-{n}", meta, IMAGE), variant_env)
            worker = seconds(log, r"worker run 1/\d+: completed in ([\d.]+ (?:ms|s))")
            if n > 0:
                walls[label].append(took)
                runs[label] += worker
    rows = []
    for label, _, _ in variants:
        rows.append((f"1-loop task, {label}: wall", stats(walls[label])))
        rows.append((f"1-loop task, {label}: the worker run", stats(runs[label])))
    return rows


def agent_check(work, env):
    rows = []
    env = dict(env, RUST_LOG="agent_runner=debug")
    images = [(IMAGE, "")]
    if subprocess.run(["docker", "image", "inspect", REAL_IMAGE], capture_output=True).returncode == 0:
        images.append((REAL_IMAGE, "    max_run_time_sec: 2\n    base_url: http://127.0.0.1:1/v1\n"
                                   "    env: {CODEX_API_KEY: sk-bench-unused}\n"))
    else:
        print(f"bench: the real image's check left out: {REAL_IMAGE} is not built", file=sys.stderr)
    meta = script(work, 2)
    for k, (image, extra) in enumerate(images):
        for touched, test in [("untouched", None),
                              ("a file added beside it", "touch /usr/local/bin/added-$$")]:
            pins, checks = [], []
            for n in range(RUNS):
                yaml = task(work, f"check-{k}-{len(test or '')}-{n}", meta, image, extra, test)
                _, log = run(BIN, yaml, env, ok=(0, 1))
                pins += seconds(log, r"agent \S+ pinned in ([\d.]+ (?:ms|s))")
                # The second run's check: after the test command.
                checks += seconds(log, r"agent \S+ checked (?:beside its run )?in ([\d.]+ (?:ms|s))")[1:]
            if test is None:
                rows.append((f"agent pinned at the container's start, {image}", stats(pins)))
            rows.append((f"agent checked beside a run, {touched}, {image}", stats(checks)))
    return rows


def main():
    env = dict(os.environ, RUST_LOG="info")
    env.pop("OPENAI_API_KEY", None)
    work = tempfile.mkdtemp(prefix="agent-runner-bench-hardening-")
    try:
        rows = worker_run(work, env) + agent_check(work, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(label) for label, _ in rows)
    print(f"\nagent-runner: the cost of issue 28's protections ({os.cpu_count()} cores)")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


if __name__ == "__main__":
    main()
