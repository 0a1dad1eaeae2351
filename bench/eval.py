#!/usr/bin/env python3
"""Evaluation benchmark (SPEC §26; `make bench`). Prints median, min and max.

The demo suite (testdata/demo-eval/make-suite.sh: real small projects, held-out
graders, the test image's fake codex driven by a scripted Meta):

1. Overhead per case: a one-case suite by `eval run` (a fresh eval workspace each
   time), its whole wall time against the attempt alone (the runner's own
   `duration_ms` in its result: what `agent-runner run` of that task takes). The
   difference is the evaluation's: the workspace, the case's base brought in, the
   orchestrator (clone, bundler, bring-back) and the grading sandbox.
2. A 12-case suite by `eval run --jobs 3`: its wall time against the sum of its
   attempts' runner times (what running them one after the other would take).
BENCH_RUNS sets the repetitions of 1 (default 5).
"""

import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
MAKE_SUITE = os.path.join(ROOT, "testdata/demo-eval/make-suite.sh")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))


def evaluate(work, name, kinds, jobs):
    """`eval run` of a new suite of `kinds`: (wall seconds, [runner seconds per attempt], [grading seconds])."""
    suite = os.path.join(work, name)
    subprocess.run(["sh", MAKE_SUITE, suite, *kinds], check=True, env={**os.environ, "SUFFIX": "-" + name})
    env = {**os.environ, "AGENT_RUNNER_HOME": os.path.join(work, name + "-home")}
    start = time.monotonic()
    proc = subprocess.run([BIN, "eval", "run", os.path.join(suite, "suite.yaml"), "-w", os.path.join(work, name + "-ws"),
                           "--jobs", str(jobs)], env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"{name}: eval run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    runner, grading = [], []
    for results in glob.glob(os.path.join(env["AGENT_RUNNER_HOME"], "workspaces/*/evals/*/results.jsonl")):
        for line in open(results):
            line = json.loads(line)
            if line["outcome"] != "resolved":
                sys.exit(f"{name}: {line['case']} is {line['outcome']}: {line.get('reason')}")
            grading.append(line["grade"]["duration_ms"] / 1000)
    for task in glob.glob(os.path.join(env["AGENT_RUNNER_HOME"], "workspaces/*/tasks/*.jsonl")):
        attempts = [json.loads(l) for l in open(task) if '"type":"attempt"' in l]
        runner.append(attempts[-1]["result"]["duration_ms"] / 1000)
    if len(runner) != len(kinds):
        sys.exit(f"{name}: {len(runner)} attempts for {len(kinds)} cases")
    return wall, runner, grading


def spread(xs):
    return f"median {statistics.median(xs):.2f} s (min {min(xs):.2f}, max {max(xs):.2f})"


def main():
    work = tempfile.mkdtemp(prefix="bench-eval-")
    try:
        walls, alone, grades = [], [], []
        for i in range(RUNS):
            wall, runner, grading = evaluate(work, f"one{i}", ["fixed"], 1)
            walls.append(wall)
            alone.append(runner[0])
            grades.append(grading[0])
        overhead = [w - a for w, a in zip(walls, alone)]
        print(f"eval: one case, `eval run` whole: {spread(walls)}")
        print(f"eval: one case, the attempt alone (runner): {spread(alone)}")
        print(f"eval: one case, overhead (whole - attempt): {spread(overhead)}; of it the grader's run {spread(grades)}")
        wall, runner, _ = evaluate(work, "twelve", ["fixed"] * 12, 3)
        total = sum(runner)
        print(f"eval: 12 cases --jobs 3: {wall:.1f} s wall vs {total:.1f} s for its attempts one after another "
              f"({wall / total:.2f}x; attempts {spread(runner)})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
