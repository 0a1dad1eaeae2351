#!/usr/bin/env python3
"""SPEC §24 figures: one task under podman (as `docker`, the way podman-docker
installs it) and under Docker, same machine, same task: scripted Meta, one worker
run of the test worker image writing a file, the default network (the egress
proxy). Prints the median wall time of BENCH_RUNS runs each (default 5), and the
README's length. Needs podman, catatonit and the test image in podman's store
(testdata/setup-podman.sh). AGENT_RUNNER_BIN picks the binary (default: release)."""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
BIN = os.environ.get("AGENT_RUNNER_BIN", str(TOP / "target/release/agent-runner"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
IMAGE = "agent-runner-test-worker:latest"
SCRIPT = """- type: plan_task
  acceptance_criteria:
    - {id: AC-1, description: hello.txt says hello}
- type: next_action
  decision: {action: run_worker, reason: start}
  worker_call:
    worker_type: codex-cli
    mode: exec
    prompt: "Write hello.txt.\\n@run: echo hello > hello.txt\\n@say: wrote it"
- type: completion_assessment
  summary: done
  details: {passed_criteria: [AC-1]}
"""
# This machine's nested containers refuse podman's default rlimits.
CONF = '[containers]\ndefault_ulimits = ["nofile=16384:16384", "nproc=20000:20000"]\n'


def one_run(work: Path, path: str, n: int) -> float:
    repo = work / f"repo-{n}"
    repo.mkdir()
    task = f"""version: 1
task:
  id: bench-compat-{n}
  repo: {repo}
  prd: {{text: Write hello.txt.}}
  test: {{command: grep -qx hello hello.txt}}
runner:
  meta: {{kind: scripted, max_loops: 1, script: {work / 'meta.yaml'}}}
  worker: {{docker_image: "{IMAGE}"}}
"""
    env = dict(os.environ, PATH=path, HOME=str(work))
    start = time.monotonic()
    out = subprocess.run([BIN, "run"], input=task, text=True, env=env,
                         capture_output=True, timeout=300)
    took = time.monotonic() - start
    if out.returncode != 0 or "COMPLETE" not in out.stdout:
        sys.exit(f"bench: run failed ({out.returncode}): {out.stdout}\n{out.stderr[-2000:]}")
    return took


def main() -> None:
    if not Path(BIN).exists():
        sys.exit(f"bench: {BIN} not built (cargo build --release)")
    with tempfile.TemporaryDirectory(prefix="agent-runner-bench-compat-") as tmp:
        work = Path(tmp)
        (work / "meta.yaml").write_text(SCRIPT)
        wrapper = work / "podman-bin"
        wrapper.mkdir()
        (work / "containers.conf").write_text(CONF)
        docker = wrapper / "docker"
        docker.write_text(f"#!/bin/sh\nexport CONTAINERS_CONF={work / 'containers.conf'}\nexec podman \"$@\"\n")
        docker.chmod(0o755)
        path = os.environ.get("PATH", "")
        engines = {"docker": path, "podman": f"{wrapper}:{path}"}
        walls: dict[str, list[float]] = {name: [] for name in engines}
        n = 0
        for _ in range(RUNS):  # interleaved, so load changes hit both alike
            for name, p in engines.items():
                n += 1
                walls[name].append(one_run(work, p, n))
        for name, times in walls.items():
            print(f"compat: a task under {name}: median {statistics.median(times):.2f} s "
                  f"(min {min(times):.2f}, max {max(times):.2f}, {len(times)} runs)")
    lines = len((TOP / "README.md").read_text().splitlines())
    print(f"compat: README.md is {lines} lines (limit 400)")


if __name__ == "__main__":
    main()
