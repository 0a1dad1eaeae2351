#!/usr/bin/env python3
"""The sandbox under gVisor and MCP servers (SPEC §28; `make bench`; median, min, max).

1. Start to the first worker run, runsc against runc: a 1-loop task (scripted Meta,
   the test worker image, the default network: the egress proxy), from the
   runner's first log line to the debug line that says the agent starts, right
   before the agent's exec.
2. A 3-loop task, runsc against runc: scripted Meta asks for three worker runs,
   each followed by the test command; the whole `agent-runner run`, wall time.
3. What an MCP server adds (the MCP test image, testdata/setup-mcp.sh): the stdio
   server's start (python3 and the `mcp` SDK imported, `initialize` answered) and
   one `tools/call` round trip, over its stdio in the sandbox image; under runc and
   runsc. (codex starts its servers beside its first model request; the call is
   what each tool call adds to a run.)
Needs the daemon to know `runsc` (testdata/setup-runsc.sh). BENCH_RUNS sets the
rounds (default 5), interleaved, the first a warm-up.
"""

import json
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
MCP_IMAGE = "agent-runner-test-mcp:latest"
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
RUNTIMES = ["runc", "runsc"]


def stats(values, unit="ms", scale=1000):
    if not values:
        return "no figures"
    values = [v * scale for v in values]
    return (f"median {statistics.median(values):.0f} {unit}, min {min(values):.0f}, "
            f"max {max(values):.0f} ({len(values)} runs)")


def script(work, loops):
    path = os.path.join(work, f"meta-{loops}.yaml")
    replies = ["type: plan_task\nacceptance_criteria:\n  - id: AC-1\n    description: x\n"]
    for n in range(loops):
        replies.append("type: next_action\ndecision: {action: run_worker, reason: go}\n"
                       f"worker_call: {{worker_type: codex-cli, mode: exec, prompt: \"@say: run {n}\"}}\n")
        passed = "[AC-1]" if n + 1 == loops else "[]"
        replies.append(f"type: completion_assessment\nsummary: ok\ndetails: {{passed_criteria: {passed}}}\n")
    with open(path, "w") as f:
        for reply in replies:
            f.write("- |\n" + "".join(f"  {line}\n" for line in reply.splitlines()))
    return path


def task(work, name, meta, loops, runtime):
    repo = os.path.join(work, name)
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q", repo], check=True)
    sandbox = "" if runtime == "runc" else f"  sandbox: {{runtime: {runtime}}}\n"
    return (f"version: 1\ntask: {{id: {name}, repo: {repo}, prd: {{text: x}}, test: {{command: 'true'}}}}\n"
            f"runner:\n  max_stalled_loops: 0\n  meta: {{kind: scripted, script: {meta}, max_loops: {loops}}}\n"
            f"  worker:\n    docker_image: {IMAGE}\n    env: {{CODEX_API_KEY: sk-bench-unused}}\n{sandbox}")


def clock(line):
    m = re.match(r"(\d\d):(\d\d):(\d\d)\.(\d\d\d) ", line)
    if not m:
        return None
    h, mi, s, ms = (int(g) for g in m.groups())
    return h * 3600 + mi * 60 + s + ms / 1000


def run(yaml, env):
    started = time.monotonic()
    proc = subprocess.run([BIN, "run"], input=yaml.encode(), env=env, capture_output=True)
    took = time.monotonic() - started
    log = proc.stderr.decode()
    if proc.returncode != 0:
        sys.exit(f"the task failed ({proc.returncode}):\n{log[-3000:]}")
    return took, log


def to_first_run(log):
    lines = [line for line in log.splitlines() if clock(line) is not None]
    # The agent is checked beside its run now: the line that says it starts.
    checked = [line for line in lines
               if re.search(r"agent \S+ checked in|the agent \S+ starts", line)]
    if not lines or not checked:
        sys.exit(f"no agent check in the log:\n{log[-3000:]}")
    return clock(checked[0]) - clock(lines[0])


def tasks(work, env):
    first = {r: [] for r in RUNTIMES}
    three = {r: [] for r in RUNTIMES}
    one_meta, three_meta = script(work, 1), script(work, 3)
    for n in range(RUNS):
        for runtime in RUNTIMES:
            _, log = run(task(work, f"first-{runtime}-{n}", one_meta, 1, runtime),
                         dict(env, RUST_LOG="agent_runner=debug"))
            took, _ = run(task(work, f"three-{runtime}-{n}", three_meta, 3, runtime), env)
            if n:
                first[runtime].append(to_first_run(log))
                three[runtime].append(took)
    rows = []
    for runtime in RUNTIMES:
        rows.append(f"start to first worker run, {runtime}: {stats(first[runtime])}")
    for runtime in RUNTIMES:
        rows.append(f"3-loop task, {runtime}: {stats(three[runtime])}")
    return rows


# A stdio MCP client in the image's python: the server started, initialize, one
# tools/call; prints the two times.
CLIENT = r"""
import json, subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen([sys.executable, "/opt/mcp-test/server.py"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def call(m):
    p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
    return p.stdout.readline() if "id" in m else None
call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
call({"jsonrpc": "2.0", "method": "notifications/initialized"})
t1 = time.monotonic()
calls = []
for n in range(20):
    t = time.monotonic()
    out = call({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call", "params": {"name": "lookup", "arguments": {"topic": "x"}}})
    assert b"MCP-ANSWER" in out, out
    calls.append(time.monotonic() - t)
p.kill()
calls.sort()
print(json.dumps({"start": t1 - t0, "call": calls[len(calls) // 2]}))
"""


def mcp(env):
    if subprocess.run(["docker", "image", "inspect", MCP_IMAGE], capture_output=True).returncode:
        return [f"MCP: left out, {MCP_IMAGE} is not built (testdata/setup-mcp.sh)"]
    start = {r: [] for r in RUNTIMES}
    call = {r: [] for r in RUNTIMES}
    for n in range(RUNS):
        for runtime in RUNTIMES:
            out = subprocess.run(
                ["docker", "run", "--rm", "-i", "--runtime", runtime, "--network", "none",
                 "--label", "agent-runner.task=bench-mcp", "--entrypoint", "python3", MCP_IMAGE, "-c", CLIENT],
                capture_output=True, text=True, env=env)
            if out.returncode:
                sys.exit(f"the MCP client failed under {runtime}: {out.stderr[-2000:]}")
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            if n:
                start[runtime].append(figures["start"])
                call[runtime].append(figures["call"])
    rows = []
    for runtime in RUNTIMES:
        rows.append(f"MCP stdio server start (python3 + mcp SDK, initialize), {runtime}: {stats(start[runtime])}")
    for runtime in RUNTIMES:
        rows.append(f"MCP tools/call round trip, {runtime}: {stats(call[runtime], 'ms', 1000)}")
    return rows


def main():
    runtimes = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"],
                              capture_output=True, text=True).stdout
    if '"runsc"' not in runtimes:
        sys.exit("bench/gvisor.py: the daemon has no runtime runsc (testdata/setup-runsc.sh)")
    env = dict(os.environ, RUST_LOG="info")
    env.pop("OPENAI_API_KEY", None)
    work = tempfile.mkdtemp(prefix="agent-runner-bench-gvisor-")
    try:
        rows = tasks(work, env) + mcp(env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("gVisor and MCP (SPEC §28)")
    for row in rows:
        print("  " + row)


if __name__ == "__main__":
    main()
