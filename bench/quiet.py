#!/usr/bin/env python3
"""What PID 1's stop of the others costs (SPEC §9, issue 41): agent-runner asks the
sandbox's main process (the static helper, PID 1) after every command it runs there
to kill every other process, and waits for its answer. This prints the round trip
of that request on `docker run -i`'s stdio, as agent-runner makes it, with nothing to
stop (the usual case) and with 20 sleeping processes to kill. The helper is built
from crates/sandbox/src/backend/helper/bridge.c as build.rs builds it."""

import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
IMAGE = "agent-runner-test-worker:latest"
RUNS = int(os.environ.get("BENCH_RUNS", "200"))


def stats(times):
    times = sorted(times)
    ms = [t * 1000 for t in times]
    return (f"median {statistics.median(ms):.2f} ms (min {ms[0]:.2f}, "
            f"p90 {ms[int(len(ms) * 0.9)]:.2f}, n={len(ms)})")


def main():
    work = tempfile.mkdtemp(prefix="ar-quiet-")
    helper = os.path.join(work, "helper")
    subprocess.run(["cc", "-static", "-Os", "-s", "-o", helper,
                    os.path.join(ROOT, "crates/sandbox/src/backend/helper/bridge.c")], check=True)
    name = f"agent-runner-bench-quiet-{os.getpid()}"
    sandbox = subprocess.Popen(
        ["docker", "run", "-i", "--rm", "--init=false", "--name", name, "--network", "none",
         "--label", "agent-runner.task=bench-quiet", "-v", f"{helper}:/h:ro",
         "--entrypoint", "/h", IMAGE, "0", "-"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        if not sandbox.stdout.readline().startswith("agent-runner-ready 1"):
            sys.exit("the helper is not PID 1")

        def quiet():
            start = time.perf_counter()
            sandbox.stdin.write("quiet\n")
            sandbox.stdin.flush()
            answer = sandbox.stdout.readline()
            took = time.perf_counter() - start
            if not answer.startswith("agent-runner-quiet "):
                sys.exit(f"answer: {answer!r}")
            return took, answer.split()[1:]

        empty = [quiet()[0] for _ in range(RUNS)]
        busy = []
        for _ in range(max(RUNS // 20, 5)):
            subprocess.run(["docker", "exec", "-d", name, "sh", "-c",
                            "for i in $(seq 20); do sleep 600 & done; wait"], check=True)
            time.sleep(0.3)
            took, (found, left) = quiet()
            if left != "0" or int(found) < 20:
                sys.exit(f"found {found}, left {left}")
            busy.append(took)
        print(f"PID 1's stop of the others ({os.cpu_count()} cores)")
        print(f"  nothing to stop:            {stats(empty)}")
        print(f"  21 processes to kill:       {stats(busy)}")
    finally:
        sandbox.stdin.close()
        sandbox.wait()


if __name__ == "__main__":
    main()
