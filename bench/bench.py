#!/usr/bin/env python3
"""agent-runner benchmarks (`make bench`). Prints median, min and max of each figure.

1. Overhead: a 3-loop task (test worker image; 1 container, 3 worker runs, 3 test
   runs) done by `agent-runner run` and by bench/bare.sh making only the calls such
   a task needs (one `docker run`, per loop a `docker exec` of the worker and one of
   the test, one `docker rm`; `--network none`), interleaved pairs. Meta: scripted
   (no HTTP; the script makes no requests either), and HTTP on 127.0.0.1 (a local
   server answering at once; the script sends the same request bodies with curl,
   where agent-runner sends them) as `openai-chat` (YAML replies) and as
   `openai-responses` (structured JSON replies); BENCH_META=scripted,http,responses
   picks some. Each with the task's `network: none` (like
   with like) and with the default network, allowlist, where the egress proxy and its
   bridge are part of agent-runner's time and not of the script's. Accounting
   (usage, prices, a budget) is on in every run.
2. Start-up: process start -> first Meta HTTP request (server timestamp); also
   `--version` and `validate` wall times.
3. Teardown: task end (last Meta reply sent) -> container destroyed (docker event).
4. Memory: agent-runner's own peak RSS while the worker prints 1 GiB; the largest Meta
   request body in that run.
5. Release binary size and clean release build time (separate target directory).
6. A hostile Meta reply: 8 MB of `{a: {a: …` (as large as the client takes) is
   refused and asked again; the time from the reply sent to the re-ask received.
   Also an accepted 8 MB reply nested 31 deep, SIGTERM'd while it is parsed:
   signal -> exit.
BENCH_ONLY=1,6 runs only these figures; default all.
"""

import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
IMAGE = "agent-runner-test-worker:latest"
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
ONLY = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))


def wanted(figure):
    return not ONLY or figure in ONLY
KEY = "sk-bench-0123456789"

PROMPTS = [
    "@run: echo one > one.txt\n@say: wrote one.txt",
    "@run: echo two > two.txt\n@say: wrote two.txt",
    "@run: echo three > three.txt\n@say: wrote three.txt",
]
TEST = "test -f one.txt"


def chat(content, prompt_bytes=0):
    # With usage, as the API reports it: the runner records it.
    usage = {"prompt_tokens": prompt_bytes // 4, "completion_tokens": len(content) // 4,
             "prompt_tokens_details": {"cached_tokens": 0}}
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            "usage": usage}


def plan():
    return "type: plan_task\nacceptance_criteria:\n  - id: AC-1\n    description: files exist\n"


def run_worker(prompt):
    body = "".join(f"    {line}\n" for line in prompt.splitlines())
    return ("type: next_action\ndecision:\n  action: run_worker\n  reason: more\n"
            "worker_call:\n  worker_type: codex-cli\n  mode: exec\n  prompt: |\n" + body)


def assess(passed):
    ids = "[AC-1]" if passed else "[]"
    return f"type: completion_assessment\nsummary: ok\ndetails:\n  passed_criteria: {ids}\n"


def three_loops(prompts=PROMPTS):
    replies = [plan()]
    for n, prompt in enumerate(prompts):
        replies += [run_worker(prompt), assess(n == len(prompts) - 1)]
    return replies


def three_loops_json(prompts=PROMPTS):
    """The same replies as structured output sends them: the schema's JSON."""
    replies = [{"type": "plan_task",
                "acceptance_criteria": [{"id": "AC-1", "description": "files exist"}]}]
    for n, prompt in enumerate(prompts):
        replies += [{"type": "next_action", "decision": {"action": "run_worker", "reason": "more"},
                     "worker_call": {"worker_type": "codex-cli", "mode": "exec", "prompt": prompt}},
                    {"type": "completion_assessment", "summary": "ok",
                     "details": {"passed_criteria": ["AC-1"] if n == len(prompts) - 1 else []}}]
    return [json.dumps(r) for r in replies]


def response(text, request_bytes):
    """A Responses API `Response` with `text` as its message, with usage."""
    return {"id": "resp_bench", "object": "response", "created_at": 1767000000,
            "model": "bench", "status": "completed", "error": None, "incomplete_details": None,
            "output": [{"type": "message", "id": "msg_bench", "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": request_bytes // 4,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": len(text) // 4,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": request_bytes // 4 + len(text) // 4}}


class Meta(http.server.BaseHTTPRequestHandler):
    """Fake OpenAI Chat Completions: scripted replies, arrival times and body sizes."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, each response would
    # wait for a delayed ACK (~40 ms) and the benchmark would measure this server.
    disable_nagle_algorithm = True
    replies = []
    arrivals = []
    sizes = []
    sent = []
    bodies = []

    def do_POST(self):
        Meta.arrivals.append(time.time())
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Meta.bodies.append(body)
        content = Meta.replies.pop(0) if Meta.replies else "exhausted"
        if self.path.endswith("/responses"):
            Meta.sizes.append(len(body))
            data = json.dumps(response(content, len(body))).encode()
        else:
            Meta.sizes.append(len(json.loads(body)["messages"][1]["content"]))
            data = json.dumps(chat(content, len(body))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        Meta.sent.append(time.time())

    def log_message(self, *args):
        pass


def mark_complete():
    return "type: next_action\ndecision: {action: mark_complete, reason: nothing to do}\n"


def nested(levels):
    """A plan_task reply of `{a: ` nested `levels` deep, as large as the client takes."""
    return "type: plan_task\nacceptance_criteria: " + "{a: " * levels


def deep_but_accepted():
    """8 MB of criteria nested 31 deep: accepted, and seconds to parse."""
    item = "{a: " * 30 + "x" + "}" * 30 + ", "
    return "type: plan_task\nacceptance_criteria: [" + item * ((8 << 20) // len(item) - 1) + "]\n"


def reset(replies):
    Meta.replies = list(replies)
    Meta.arrivals, Meta.sizes, Meta.sent, Meta.bodies = [], [], [], []


# Accounting on: prices for both models and a budget no task here reaches.
ACCOUNTING = ("  pricing:\n    bench: {input: 1.25, cached_input: 0.125, output: 10}\n"
              "    bench-worker: {input: 1.5, output: 6}\n"
              "  budget: {max_tokens: 100000000, max_cost_usd: 1000, max_duration_sec: 3600}\n")


def task_yaml(task_id, repo, url, test=TEST, network=None, script=None, kind=None):
    test_block = f"  test:\n    command: {json.dumps(test)}\n" if test else ""
    meta = (f"    kind: scripted\n    script: {script}\n" if script
            else f"    base_url: {url}\n    model: bench\n")
    if kind:
        meta += f"    kind: {kind}\n"
    network_line = f"    network: {network}\n" if network else ""
    return (f"version: 1\ntask:\n  id: {task_id}\n  repo: {repo}\n  prd:\n    text: Write the files.\n"
            f"{test_block}runner:\n  meta:\n{meta}"
            f"  worker:\n    docker_image: {IMAGE}\n    model: bench-worker\n{network_line}{ACCOUNTING}")


def script_file(work, replies):
    """A Meta script (runner.meta.script) of these reply texts."""
    path = os.path.join(work, "meta-script.yaml")
    with open(path, "w") as f:
        for reply in replies:
            f.write("- |\n" + "".join(f"  {line}\n" for line in reply.splitlines()))
    return path


def new_repo(work, name):
    repo = os.path.join(work, name)
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q", repo], check=True)
    return repo


def run_agent(yaml, env):
    start = time.time()
    proc = subprocess.run([BIN, "run"], input=yaml.encode(), env=env, capture_output=True)
    took = time.time() - start
    if proc.returncode != 0:
        sys.exit(f"agent-runner failed ({proc.returncode}):\n{proc.stdout.decode()[-2000:]}\n"
                 f"{proc.stderr.decode()[-3000:]}")
    return start, took


def stats(values, unit="s", scale=1.0):
    values = [v * scale for v in values]
    return f"{statistics.median(values):8.3f} {unit}  (min {min(values):.3f}, max {max(values):.3f}, n={len(values)})"


def overhead(work, url, env):
    """1. Overhead ratios, pairs interleaved a, b, a, b..."""
    rows = []
    script = script_file(work, three_loops())
    metas = [m for m in ("scripted", "http", "responses")
             if m in (os.environ.get("BENCH_META") or "scripted,http,responses").split(",")]
    for meta in metas:
        replies = three_loops_json if meta == "responses" else three_loops
        for network in ("none", None):
            agent_times, bare_times = [], []
            for n in range(RUNS + 1):
                reset(replies())
                repo = new_repo(work, f"a-{meta}-{network}-{n}")
                yaml = task_yaml(f"bench-a{n}", repo, url, network=network,
                                 script=script if meta == "scripted" else None,
                                 kind="openai-responses" if meta == "responses" else None)
                _, took = run_agent(yaml, env)
                bare_env = dict(env)
                if meta != "scripted":
                    bodies = os.path.join(work, f"bodies-{meta}-{network}-{n}")
                    os.makedirs(bodies)
                    for k, body in enumerate(Meta.bodies, 1):
                        with open(os.path.join(bodies, f"{k}.json"), "wb") as f:
                            f.write(body)
                    requests = len(Meta.bodies)
                    bare_env.update(BARE_META_URL=url, BARE_META_BODIES=bodies,
                                    BARE_META_PATH="responses" if meta == "responses"
                                    else "chat/completions")
                    reset(replies())
                repo_b = new_repo(work, f"b-{meta}-{network}-{n}")
                start = time.time()
                subprocess.run(["bash", os.path.join(HERE, "bare.sh"), repo_b, IMAGE, TEST] + PROMPTS,
                               check=True, capture_output=True, env=bare_env)
                bare = time.time() - start
                if meta != "scripted" and len(Meta.arrivals) != requests:
                    sys.exit(f"the script made {len(Meta.arrivals)} Meta requests, agent-runner {requests}")
                if n > 0:  # the first pair warms caches
                    agent_times.append(took)
                    bare_times.append(bare)
            ratios = [a / b for a, b in zip(agent_times, bare_times)]
            name = {"http": "HTTP (openai-chat)", "responses": "HTTP (openai-responses)"}
            what = f"{name.get(meta, meta)} Meta, network {network or 'allowlist (default)'}"
            rows += [(f"{what}: agent-runner run", stats(agent_times)),
                     (f"{what}: bare script, same calls", stats(bare_times)),
                     (f"{what}: ratio (target <= 1.05)", stats(ratios, "x"))]
    return rows


def startup(work, url, env):
    """2. Start-up to the first Meta request."""
    rows, firsts = [], []
    for n in range(RUNS):
        reset(three_loops(PROMPTS[:1]))
        repo = new_repo(work, f"s{n}")
        start, _ = run_agent(task_yaml(f"bench-s{n}", repo, url, test=None), env)
        firsts.append(Meta.arrivals[0] - start)
    rows.append(("start -> first Meta request (target <= 10 ms)", stats(firsts, "ms", 1000)))
    for label, args, stdin in [("agent-runner --version", ["--version"], b""),
                               ("agent-runner validate", ["validate"], task_yaml("v", work, url).encode())]:
        times = []
        for _ in range(RUNS * 3):
            start = time.time()
            subprocess.run([BIN] + args, input=stdin, env=env, capture_output=True, check=True)
            times.append(time.time() - start)
        rows.append((label, stats(times, "ms", 1000)))
    return rows


def teardown(work, url, env):
    """3. Teardown: last Meta reply sent -> container destroyed."""
    times = []
    for n in range(RUNS):
        reset(three_loops(PROMPTS[:1]))
        repo = new_repo(work, f"t{n}")
        task_id = f"bench-t{n}"
        events = subprocess.Popen(
            ["docker", "events", "--format", "{{.TimeNano}}", "--filter", "event=destroy",
             "--filter", f"label=agent-runner.task={task_id}"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.2)
        run_agent(task_yaml(task_id, repo, url, test=None), env)
        destroyed = int(events.stdout.readline()) / 1e9
        events.kill()
        events.wait()
        times.append(destroyed - Meta.sent[-1])
    return [("task end -> container gone (target <= 0.3 s)", stats(times))]


def memory(work, url, env):
    """4. Memory while the worker prints 1 GiB."""
    peaks, largest = [], []
    for n in range(3):
        reset(three_loops([f"@spew: {1 << 30}\n@say: spewed"]))
        repo = new_repo(work, f"m{n}")
        proc = subprocess.Popen([BIN, "run"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env)
        proc.stdin.write(task_yaml(f"bench-m{n}", repo, url, test=None).encode())
        proc.stdin.close()
        peak = 0
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak = max(peak, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.005)
        if proc.returncode != 0:
            sys.exit("agent-runner failed in the memory run")
        log = os.path.join(repo, f".agent-runner/logs/bench-m{n}/run-1.log")
        if os.path.getsize(log) < 1 << 30:
            sys.exit("worker log incomplete")
        peaks.append(peak / 1024)
        largest.append(max(Meta.sizes) / 1024)
        shutil.rmtree(repo)
    return [("peak RSS, worker prints 1 GiB (target <= 16 MiB)", stats(peaks, "MiB")),
            ("largest Meta request in that run (<= 32 KiB)", stats(largest, "KiB"))]


def build():
    """5. Binary size and a clean release build."""
    rows = [("release binary size", f"{os.path.getsize(BIN) / 1024 / 1024:8.2f} MiB")]
    if os.environ.get("BENCH_BUILD", "1") == "1":
        target = tempfile.mkdtemp(prefix="agent-runner-build-")
        start = time.time()
        subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=ROOT, check=True,
                       env=dict(os.environ, CARGO_TARGET_DIR=target))
        rows.append(("clean release build (2 cores)", f"{time.time() - start:8.1f} s"))
        shutil.rmtree(target, ignore_errors=True)
    return rows


def hostile_replies(work, url, env):
    """6. A maximal nested reply refused; SIGTERM while an accepted large reply parses."""
    refusals, stops = [], []
    for n in range(RUNS):
        reset([nested(2_000_000), plan(), mark_complete(), assess(True)])
        repo = new_repo(work, f"n{n}")
        run_agent(task_yaml(f"bench-n{n}", repo, url, test=None), env)
        refusals.append(Meta.arrivals[1] - Meta.sent[0])
    for n in range(3):
        reset([deep_but_accepted()])
        repo = new_repo(work, f"p{n}")
        proc = subprocess.Popen([BIN, "run"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env)
        proc.stdin.write(task_yaml(f"bench-p{n}", repo, url, test=None).encode())
        proc.stdin.close()
        while not Meta.sent:
            time.sleep(0.005)
        time.sleep(0.3)  # reading the 8 MB answer, then parsing it
        start = time.time()
        proc.terminate()
        proc.wait()
        stops.append(time.time() - start)
        if proc.returncode != 130:
            sys.exit(f"agent-runner exited {proc.returncode} on SIGTERM while parsing")
    return [("8 MB nested reply sent -> refused, re-ask received", stats(refusals, "ms", 1000)),
            ("SIGTERM while an 8 MB reply parses -> exit (<= 1 s)", stats(stops, "ms", 1000))]


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Meta)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/v1"
    env = dict(os.environ, OPENAI_API_KEY=KEY, RUST_LOG="warn")
    work = tempfile.mkdtemp(prefix="agent-runner-bench-")
    rows = []
    try:
        for figure, run in [("1", overhead), ("2", startup), ("3", teardown), ("4", memory),
                            ("5", lambda *_: build()), ("6", hostile_replies)]:
            if wanted(figure):
                rows += run(work, url, env)
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)

    width = max(len(label) for label, _ in rows)
    print(f"\nagent-runner benchmarks ({os.cpu_count()} cores)")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


if __name__ == "__main__":
    main()
