#!/usr/bin/env python3
"""The agent check off the critical path (SPEC §27; `make bench`; medians of
interleaved pairs after a warm-up, min and max).

1. A 3-loop task by `agent-runner run` vs bench/bare.sh making the same docker calls,
   the agent from the tools volume: the volume's real codex in the test image
   without a codex (`agent-runner-test-worker:nocodex`, `agent_from: auto` takes the
   volume's), against a fake Responses model on 127.0.0.1 (network host), scripted
   Meta, a test command per loop; the script mounts the same volume read-only and
   runs the same codex with the same options. (The image's own agent: bench.py's
   figure 1.)
2. The real image, start to the first worker run: agent-runner-codex:latest with its
   own codex (`agent_from: auto`; the pinning of its image ID kept on this machine
   after the warm-up), a 1-loop task with scripted Meta, from agent-runner's first
   log line to `worker run 1: the agent … starts` (the debug line right before its
   exec), against the script's `docker run -d` of the same image (its first exec
   follows at once). Target: within 100 ms.
3. The check when the agent WAS swapped: a 2-loop task in the test image whose first
   run rewrites the agent a second after it started; the second run starts from the
   swapped agent and its check fails the task. Figures: that check's own time (one
   `docker diff`, beside the run), and the run's end to the task's end.
BENCH_RUNS sets the pairs (default 7).
"""

import http.server
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from agents import Server  # noqa: E402  (the fake model APIs)

ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
IMAGE = "agent-runner-test-worker:latest"
NOCODEX = "agent-runner-test-worker:nocodex"
REAL_IMAGE = "agent-runner-codex:latest"
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
KEY = "sk-bench-offpath-0123456789"
CODEX = "/agent-runner-tools/codex/package/vendor/x86_64-unknown-linux-musl/bin/codex"
TEST = "test -d ."


def stats(values, unit="s", scale=1):
    if not values:
        return "no figures"
    values = [v * scale for v in values]
    digits = 0 if unit == "ms" else 3
    return (f"median {statistics.median(values):.{digits}f} {unit} "
            f"(min {min(values):.{digits}f}, max {max(values):.{digits}f}, n={len(values)})")


def load():
    return os.getloadavg()[0]


def scripted(work, name, loops, passes_last=True):
    path = os.path.join(work, f"{name}.yaml")
    replies = ["type: plan_task\nacceptance_criteria:\n  - id: AC-1\n    description: x\n"]
    for n in range(loops):
        passed = "AC-1" if passes_last and n + 1 == loops else ""
        replies.append("type: next_action\ndecision: {action: run_worker, reason: go}\n"
                       "worker_call: {worker_type: codex-cli, mode: exec, prompt: \"@say: done\"}\n")
        replies.append(f"type: completion_assessment\nsummary: ok\ndetails: {{passed_criteria: [{passed}]}}\n")
    with open(path, "w") as f:
        for reply in replies:
            f.write("- |\n" + "".join(f"  {line}\n" for line in reply.splitlines()))
    return path


def new_repo(work, name):
    repo = os.path.join(work, name)
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q", repo], check=True)
    subprocess.run(["git", "-C", repo, "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q",
                    "--allow-empty", "-m", "init"], check=True)
    return repo


def task(repo, name, meta, loops, worker, test=TEST):
    return (f"version: 1\ntask:\n  id: {name}\n  repo: {repo}\n  prd: {{text: x}}\n"
            f"  test: {{command: {test!r}}}\n"
            f"runner:\n  max_stalled_loops: 10\n"
            f"  meta: {{kind: scripted, script: {meta}, max_loops: {loops}}}\n"
            f"  worker:\n{worker}")


def clock(line):
    m = re.match(r"(\d\d):(\d\d):(\d\d)\.(\d\d\d) ", line)
    if not m:
        return None
    h, mi, s, ms = (int(g) for g in m.groups())
    return h * 3600 + mi * 60 + s + ms / 1000


def run(yaml, env, ok=(0,)):
    start = time.monotonic()
    proc = subprocess.run([BIN, "run"], input=yaml.encode(), env=env, capture_output=True)
    took = time.monotonic() - start
    if proc.returncode not in ok:
        sys.exit(f"agent-runner run exited {proc.returncode}:\n{proc.stderr.decode()[-3000:]}")
    return took, proc.stderr.decode()


def volume_name():
    out = subprocess.run([BIN, "tools", "install"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"agent-runner tools install failed:\n{out.stderr[-2000:]}")
    return out.stdout.split()[0]


def tools_loops(work, env, url):
    volume = volume_name()
    provider = (f'model_providers.fake={{name="fake",base_url="{url}",wire_api="responses",'
                f'env_key="FAKE_KEY",request_max_retries=0,stream_max_retries=0}}')
    worker = (f"    docker_image: {NOCODEX}\n    network: host\n    model: bench\n"
              f"    extra_args: ['-c', '{provider}', '-c', 'model_provider=fake']\n"
              f"    env: {{FAKE_KEY: {KEY}}}\n")
    bare_env = dict(env, BARE_NETWORK="host", BARE_CODEX=CODEX, FAKE_KEY=KEY,
                    BARE_CODEX_ARGS=f"-m bench -c {provider} -c model_provider=fake",
                    BARE_RUN_ARGS=f"--mount type=volume,source={volume},target=/agent-runner-tools,readonly "
                                  f"-e FAKE_KEY")
    meta = scripted(work, "tools", 3)
    ours, bare, ratios, loads = [], [], [], []
    for n in range(RUNS + 1):
        repo = new_repo(work, f"tools-{n}")
        took, _ = run(task(repo, f"bench-tools-{n}", meta, 3, worker), env)
        repo = new_repo(work, f"bare-{n}")
        start = time.monotonic()
        subprocess.run(["bash", os.path.join(HERE, "bare.sh"), repo, NOCODEX, TEST,
                        "go", "go", "go"], env=bare_env, check=True, capture_output=True)
        script = time.monotonic() - start
        if n > 0:
            ours.append(took)
            bare.append(script)
            ratios.append(took / script)
            loads.append(load())
    return [("3-loop task, the tools volume's codex: agent-runner", stats(ours)),
            ("3-loop task, the tools volume's codex: bare script", stats(bare)),
            ("  ratio (target <= 1.05)", stats(ratios, "x")),
            ("  load average", stats(loads, ""))]


def real_start(work, env):
    if subprocess.run(["docker", "image", "inspect", REAL_IMAGE], capture_output=True).returncode != 0:
        return [("real image, start to the first run", f"left out: {REAL_IMAGE} is not built")]
    env = dict(env, RUST_LOG="agent_runner=debug")
    meta = scripted(work, "real", 1)
    worker = (f"    docker_image: {REAL_IMAGE}\n    network: none\n    max_run_time_sec: 2\n"
              f"    base_url: http://127.0.0.1:1/v1\n    env: {{CODEX_API_KEY: sk-bench-unused}}\n")
    ours, bare, deltas, loads = [], [], [], []
    for n in range(RUNS + 1):
        repo = new_repo(work, f"real-{n}")
        _, log = run(task(repo, f"bench-real-{n}", meta, 1, worker, test="true"), env, ok=(0, 1))
        lines = [line for line in log.splitlines() if clock(line) is not None]
        starts = [line for line in lines if re.search(r"worker run 1: the agent \S+ starts", line)]
        if not lines or not starts:
            sys.exit(f"no agent start in the log:\n{log[-3000:]}")
        took = clock(starts[0]) - clock(lines[0])
        name = f"bench-bare-start-{os.getpid()}-{n}"
        start = time.monotonic()
        subprocess.run(["docker", "run", "-d", "--rm", "--init", "--network", "none", "--name", name,
                        "--label", "agent-runner.task=bench-bare", "--mount",
                        f"type=bind,source={repo},target=/workspace/project", "-w", "/workspace/project",
                        REAL_IMAGE, "sleep", "3600"], check=True, capture_output=True)
        script = time.monotonic() - start
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        if n > 0:
            ours.append(took)
            bare.append(script)
            deltas.append(took - script)
            loads.append(load())
    return [(f"{REAL_IMAGE}: start to the first worker run, agent-runner", stats(ours, "ms", 1000)),
            (f"{REAL_IMAGE}: `docker run -d` of the bare script", stats(bare, "ms", 1000)),
            ("  difference (target <= +100 ms)", stats(deltas, "ms", 1000)),
            ("  load average", stats(loads, ""))]


def swapped(work, env):
    env = dict(env, RUST_LOG="agent_runner=debug")
    path = os.path.join(work, "swap.yaml")
    swap = ("@run: sleep 1; sed 's/usage_out=60/usage_out=0/' /usr/local/bin/codex > /tmp/f "
            "&& cat /tmp/f > /usr/local/bin/codex\n@say: swapped")
    replies = ["type: plan_task\nacceptance_criteria:\n  - id: AC-1\n    description: x\n"]
    for prompt, passed in [(swap, ""), ("@say: spent", "AC-1")]:
        body = "".join(f"      {line}\n" for line in prompt.splitlines())
        replies.append("type: next_action\ndecision: {action: run_worker, reason: go}\n"
                       "worker_call:\n  worker_type: codex-cli\n  mode: exec\n  prompt: |\n" + body)
        replies.append(f"type: completion_assessment\nsummary: ok\ndetails: {{passed_criteria: [{passed}]}}\n")
    with open(path, "w") as f:
        for reply in replies:
            f.write("- |\n" + "".join(f"  {line}\n" for line in reply.splitlines()))
    worker = f"    docker_image: {IMAGE}\n    network: none\n"
    checks, tails, walls = [], [], []
    for n in range(RUNS):
        repo = new_repo(work, f"swap-{n}")
        took, log = run(task(repo, f"bench-swap-{n}", path, 2, worker), env, ok=(1,))
        if "changed during the task" not in log:
            sys.exit(f"the swap was not found:\n{log[-3000:]}")
        found = re.findall(r"checked beside its run in ([\d.]+) (ms|s)", log)
        if found:
            value, unit = found[-1]
            checks.append(float(value) / (1000 if unit == "ms" else 1))
        lines = [line for line in log.splitlines() if clock(line) is not None]
        ended = [line for line in lines if "worker run 2" in line and "the agent" in line]
        if ended:
            tails.append(clock(lines[-1]) - clock(ended[-1]))
        walls.append(took)
    return [("agent swapped: the failing check's own time (beside the run)", stats(checks, "ms", 1000)),
            ("agent swapped: the second run's start to the task's end", stats(tails, "ms", 1000)),
            ("agent swapped: the whole 2-loop task", stats(walls))]


def main():
    env = dict(os.environ, RUST_LOG="info")
    env.pop("OPENAI_API_KEY", None)
    work = tempfile.mkdtemp(prefix="agent-runner-bench-offpath-")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    only = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))
    rows = []
    try:
        if not only or "1" in only:
            rows += tools_loops(work, env, url)
        if not only or "2" in only:
            rows += real_start(work, env)
        if not only or "3" in only:
            rows += swapped(work, env)
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(label) for label, _ in rows)
    print(f"\nagent-runner: the agent check off the critical path ({os.cpu_count()} cores)")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


if __name__ == "__main__":
    main()
