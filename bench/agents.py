#!/usr/bin/env python3
"""Benchmarks of the worker kinds and Meta providers (SPEC §18); part of `make bench`.
Needs the real worker image agent-runner-codex:latest (`make sandbox-image`). Prints
median, min and max of each figure.

1. claude-code-cli overhead: a 3-loop task (scripted Meta; 1 container, 3 runs of
   the real `claude -p` against a fake Anthropic Messages API on 127.0.0.1 that
   answers each run with a Bash tool call and then a text, 3 test runs) done by
   `agent-runner run` and by bench/bare.sh (BARE_AGENT=claude) making only the calls
   such a task needs, interleaved pairs, both with `--network host` (like with like).
2. Meta through codex-cli vs the Chat API on the same fake model: a 3-loop task
   (7 Meta calls: plan_task, then next_action and completion_assessment per loop;
   the test image's fake codex as the worker) with `runner.meta.kind: openai-chat`
   and with `codex-cli` (the real codex in the real image), both against one fake
   server that answers `/v1/chat/completions` and `/v1/responses` with the same
   replies. Per Meta call: its wall time as the Task Note records it, the first call
   (which starts Meta's container with codex-cli) apart from the others.
BENCH_RUNS sets the repetitions (default 7); BENCH_ONLY=1 or 2 runs one figure.
"""

import http.server
import json
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
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
IMAGE = "agent-runner-codex:latest"
TEST_IMAGE = "agent-runner-test-worker:latest"
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
ONLY = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))
CLAUDE_KEY = "sk-ant-bench-0123456789"
CODEX_KEY = "sk-bench-codex-0123456789"

# What claude is asked to do, one run per line: `RUN: <command>`.
CLAUDE_PROMPTS = ["RUN: echo one > one.txt", "RUN: echo two > two.txt", "RUN: echo three > three.txt"]
TEST = "test -f one.txt"


def stats(values, unit="s"):
    return f"{statistics.median(values):8.3f} {unit}  (min {min(values):.3f}, max {max(values):.3f}, n={len(values)})"


def load():
    return os.getloadavg()[0]


class Server(http.server.BaseHTTPRequestHandler):
    """Fake model APIs. Anthropic Messages (SSE): a request whose last message carries
    a tool result gets a text, any other a Bash tool call running the `RUN:` line of
    the first user message. OpenAI Chat Completions and Responses (SSE): the next of
    `Server.meta` replies, the same text either way."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    meta = []
    lock = threading.Lock()

    def do_GET(self):
        # codex's built-in provider tries a WebSocket first; refused, it uses HTTP.
        self.send(404, "text/plain", b"")

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        path = self.path.split("?")[0]
        if path.endswith("/messages"):
            return self.anthropic(body)
        with Server.lock:
            reply = Server.meta.pop(0) if Server.meta else "no reply left"
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}
        if path.endswith("/chat/completions"):
            data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}],
                               "usage": {"prompt_tokens": 100, "completion_tokens": 10}}).encode()
            return self.send(200, "application/json", data)
        item = {"type": "message", "id": "msg_1", "role": "assistant",
                "content": [{"type": "output_text", "text": reply}]}
        events = [("response.created", {"response": {"id": "resp_1"}}),
                  ("response.output_item.done", {"output_index": 0, "item": item}),
                  ("response.completed", {"response": {"id": "resp_1", "usage": usage}})]
        self.send(200, "text/event-stream", b"".join(sse(k, v) for k, v in events))

    def anthropic(self, body):
        messages = body.get("messages", [])
        last = messages[-1]["content"] if messages else ""
        done = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        model = body.get("model", "claude-bench")
        if done:
            blocks = [{"type": "text", "text": "Done."}]
            stop = "end_turn"
        else:
            match = re.search(r"RUN: ([^\n]*)", text_of(messages[0]["content"]) if messages else "")
            command = match.group(1) if match else "true"
            blocks = [{"type": "tool_use", "id": f"toolu_{time.time_ns()}", "name": "Bash",
                       "input": {"command": command, "description": "Run it"}}]
            stop = "tool_use"
        usage = {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                 "output_tokens": 10}
        message = {"id": f"msg_{time.time_ns()}", "type": "message", "role": "assistant", "model": model,
                   "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return self.send(200, "application/json", json.dumps(message).encode())
        events = [("message_start", {"message": dict(message, content=[], stop_reason=None)})]
        for index, block in enumerate(blocks):
            start = dict(block, input={}) if block["type"] == "tool_use" else dict(block, text="")
            events.append(("content_block_start", {"index": index, "content_block": start}))
            delta = ({"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                     if block["type"] == "tool_use" else {"type": "text_delta", "text": block["text"]})
            events += [("content_block_delta", {"index": index, "delta": delta}),
                       ("content_block_stop", {"index": index})]
        events += [("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 10}}),
                   ("message_stop", {})]
        self.send(200, "text/event-stream", b"".join(sse(k, v) for k, v in events))

    def send(self, status, kind, data):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def log_message(self, *args):
        pass


def sse(kind, fields):
    return f"event: {kind}\ndata: {json.dumps(dict(fields, type=kind))}\n\n".encode()


def text_of(content):
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


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
        sys.exit(f"agent-runner failed ({proc.returncode}):\n{proc.stderr.decode()[-3000:]}")
    return took


def scripted_meta(work, prompts):
    """A Meta script: plan, then per prompt a run_worker and an assessment."""
    path = os.path.join(work, "meta-script.yaml")
    with open(path, "w") as f:
        f.write("- type: plan_task\n  acceptance_criteria: [{id: AC-1, description: files exist}]\n")
        for n, prompt in enumerate(prompts):
            passed = "[AC-1]" if n == len(prompts) - 1 else "[]"
            f.write(f"- type: next_action\n  decision: {{action: run_worker, reason: more}}\n"
                    f"  worker_call: {{worker_type: claude-code-cli, mode: exec, prompt: {json.dumps(prompt)}}}\n"
                    f"- type: completion_assessment\n  summary: ok\n  details: {{passed_criteria: {passed}}}\n")
    return path


def claude_overhead(work, url):
    """1. claude-code-cli: agent-runner vs the bare script, pairs interleaved."""
    script = scripted_meta(work, CLAUDE_PROMPTS)
    base = url.rsplit("/v1", 1)[0]
    env = dict(os.environ, ANTHROPIC_API_KEY=CLAUDE_KEY, RUST_LOG="warn")
    agent_times, bare_times, loads = [], [], []
    for n in range(RUNS + 1):
        repo = new_repo(work, f"claude-a{n}")
        yaml = (f"version: 1\ntask:\n  id: bench-claude-{n}\n  repo: {repo}\n  prd:\n    text: Write the files.\n"
                f"  test:\n    command: {json.dumps(TEST)}\nrunner:\n  meta:\n    kind: scripted\n    script: {script}\n"
                f"  worker:\n    kind: claude-code-cli\n    docker_image: {IMAGE}\n    model: claude-bench\n"
                f"    base_url: {base}\n    network: host\n")
        took = run_agent(yaml, env)
        repo_b = new_repo(work, f"claude-b{n}")
        bare_env = dict(env, BARE_AGENT="claude", BARE_NETWORK="host", ANTHROPIC_BASE_URL=base)
        start = time.time()
        subprocess.run(["bash", os.path.join(HERE, "bare.sh"), repo_b, IMAGE, TEST] + CLAUDE_PROMPTS,
                       check=True, capture_output=True, env=bare_env)
        bare = time.time() - start
        for r in (repo, repo_b):
            if not os.path.exists(os.path.join(r, "three.txt")):
                sys.exit(f"claude did not write {r}/three.txt")
        if n > 0:  # the first pair warms caches
            agent_times.append(took)
            bare_times.append(bare)
            loads.append(load())
    ratios = [a / b for a, b in zip(agent_times, bare_times)]
    what = "claude-code-cli, 3 runs + 3 tests, network host"
    return [(f"{what}: agent-runner run", stats(agent_times)),
            (f"{what}: bare script, same calls", stats(bare_times)),
            (f"{what}: ratio (target <= 1.05)", stats(ratios, "x")),
            (f"{what}: load average during the pairs", stats(loads, ""))]


def meta_replies():
    """The replies of a 3-loop task, as JSON (both providers accept it)."""
    prompts = ["@run: echo one > one.txt\n@say: wrote one.txt", "@run: echo two > two.txt\n@say: two",
               "@run: echo three > three.txt\n@say: three"]
    replies = [{"type": "plan_task", "acceptance_criteria": [{"id": "AC-1", "description": "files exist"}]}]
    for n, prompt in enumerate(prompts):
        replies.append({"type": "next_action", "decision": {"action": "run_worker", "reason": "more"},
                        "worker_call": {"worker_type": "codex-cli", "mode": "exec", "prompt": prompt}})
        replies.append({"type": "completion_assessment", "summary": "ok",
                        "details": {"passed_criteria": ["AC-1"] if n == 2 else [], "remaining_risks": []}})
    return [json.dumps(r) for r in replies]


CALL = re.compile(r"^#### \d+\. (\w+) at \S+ \((\d+(?:\.\d+)?) (ms|s), ", re.M)


def meta_calls(note):
    """The wall time of each Meta call in a Task Note, in seconds."""
    return [float(v) / (1000 if unit == "ms" else 1) for _, v, unit in CALL.findall(note)]


def meta_providers(work, url):
    """2. The same 7 Meta calls through the Chat API and through codex-cli."""
    home = os.path.join(work, "home")
    os.makedirs(os.path.join(home, ".codex"))
    with open(os.path.join(home, ".codex", "auth.json"), "w") as f:
        json.dump({"auth_mode": "apikey", "OPENAI_API_KEY": CODEX_KEY}, f)
    env = dict(os.environ, OPENAI_API_KEY=CODEX_KEY, HOME=home, RUST_LOG="warn")
    env.pop("CODEX_API_KEY", None)
    provider = (f'model_providers.fake={{name="fake",base_url="{url}",wire_api="responses",'
                f'env_key="FAKE_KEY",request_max_retries=0,stream_max_retries=0}}')
    metas = {
        "chat": f"    base_url: {url}\n    model: bench\n",
        "codex-cli": (f"    kind: codex-cli\n    docker_image: {IMAGE}\n    model: bench\n"
                      f"    extra_args: ['-c', '{provider}', '-c', 'model_provider=fake']\n"
                      f"    env: {{FAKE_KEY: {CODEX_KEY}}}\n"),
    }
    firsts = {k: [] for k in metas}
    others = {k: [] for k in metas}
    walls = {k: [] for k in metas}
    loads = []
    for n in range(RUNS + 1):
        for kind, meta in metas.items():
            Server.meta = meta_replies()
            repo = new_repo(work, f"meta-{kind}-{n}")
            task_id = f"bench-meta-{n}"
            yaml = (f"version: 1\ntask:\n  id: {task_id}\n  repo: {repo}\n  prd:\n    text: Write the files.\n"
                    f"  test:\n    command: {json.dumps(TEST)}\nrunner:\n  meta:\n{meta}    max_loops: 3\n"
                    f"  worker:\n    docker_image: {TEST_IMAGE}\n    network: host\n")
            took = run_agent(yaml, env)
            with open(os.path.join(repo, ".agent-runner", f"task-{task_id}.md")) as f:
                calls = meta_calls(f.read())
            if len(calls) != 7:
                sys.exit(f"{kind}: {len(calls)} Meta calls, not 7")
            if n > 0:
                firsts[kind].append(calls[0])
                others[kind] += calls[1:]
                walls[kind].append(took)
        if n > 0:
            loads.append(load())
    rows = []
    for kind in metas:
        rows += [(f"Meta {kind}: first call (codex-cli: starts its container)", stats(firsts[kind])),
                 (f"Meta {kind}: each later call", stats(others[kind])),
                 (f"Meta {kind}: whole 3-loop task", stats(walls[kind]))]
    rows.append(("Meta calls: load average", stats(loads, "")))
    return rows


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/v1"
    work = tempfile.mkdtemp(prefix="agent-runner-bench-agents-")
    rows = []
    try:
        for figure, run in [("1", claude_overhead), ("2", meta_providers)]:
            if not ONLY or figure in ONLY:
                rows += run(work, url)
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(label) for label, _ in rows)
    print(f"\nagent kinds and Meta providers ({os.cpu_count()} cores)")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


if __name__ == "__main__":
    main()
