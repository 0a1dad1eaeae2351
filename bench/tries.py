#!/usr/bin/env python3
"""Best of N benchmark (SPEC §23; `make bench`). Prints median, min and max.

One scripted task (the Task Builder, a worker run, the pinned test) in a git
workspace, by `orchestrate --once --jobs 3`: once as one attempt (`task run`), once
as best of 3 (`task run --tries 3`: three clones, three runners at once, then the
judgement; the three tries pass alike, so the judge's rules after `verified` decide
with a scripted `judge` reply). Runs interleaved so that neither always goes first
while the machine's load drifts. The figure is the wall time of each, and the ratio
of the medians.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline  # noqa: E402  (its Workspace, BUILDER, META, BIN)

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
JUDGE = "- type: judge\n  winner: 1\n  why: the first is as good as any\n"


def one(work, name, tries):
    ws = pipeline.Workspace(work, name, True)
    with open(os.path.join(ws.dir, "builder.yaml"), "a") as f:
        f.write(JUDGE)
    (task,) = ws.tasks(1, name)
    ws.run("task", "run", "-w", ws.root, task, *(["--tries", str(tries)] if tries > 1 else []))
    start = time.monotonic()
    proc = subprocess.run([pipeline.BIN, "orchestrate", "-w", ws.root, "--once", "--jobs", "3"],
                          env=ws.env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"{name}: orchestrate failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    branch = subprocess.run(["git", "-C", ws.root, "rev-parse", "--verify", "-q", f"refs/heads/agent-runner/{task}"],
                            capture_output=True, text=True)
    if branch.returncode != 0:
        sys.exit(f"{name}: no branch agent-runner/{task}")
    return wall


def main():
    work = tempfile.mkdtemp(prefix="bench-tries-")
    single, best = [], []
    try:
        for n in range(RUNS):
            pairs = [("one", 1, single), ("best3", 3, best)]
            if n % 2:
                pairs.reverse()
            for name, tries, into in pairs:
                into.append(one(work, f"{name}-{n}", tries))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("SPEC §23 best of N, one scripted task, orchestrate --once --jobs 3:")
    print(f"  one attempt:    {pipeline.stats(single)}")
    print(f"  best of 3:      {pipeline.stats(best)}")
    print(f"  ratio (medians): {statistics.median(best) / statistics.median(single):.2f}x")


if __name__ == "__main__":
    main()
