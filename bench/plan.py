#!/usr/bin/env python3
"""Plan benchmarks (`make bench`). Prints median, min and max of each figure.

Meta is a fake OpenAI server on 127.0.0.1 (this script) answering at once, so the
figures are agent-runner's own cost.

p1. `plan` with a 50-task decompose reply (5 phases, chained dependencies) into an
    empty workspace: wall time of the command, and the time to check nothing is
    running and write the tasks and wbs.json (`write_ms` of `--json`).
p2. `plan --patch` on a plan of 200 tasks (titles ~50 characters, dependencies),
    with 10 earlier chat messages of 300 Japanese characters: the first HTTP request
    body (must stay <= 64 KiB) and its request YAML, the wall time, and the write
    time of a 20-operation patch (10 updates, 5 moves, 4 deletes, 1 create).
"""

import json
import re
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))


def stats(values, unit="s", scale=1.0, fmt="8.3f"):
    values = [v * scale for v in values]
    return (f"{statistics.median(values):{fmt}} {unit}  "
            f"(min {min(values):.3f}, max {max(values):.3f}, n={len(values)})")


class FakeMeta:
    """Answers each chat completion with the next reply; records request bodies."""

    def __init__(self):
        self.replies = []
        self.bodies = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                fake.bodies.append(body)
                content = fake.replies.pop(0) if fake.replies else "no reply left"
                out = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                               "finish_reason": "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Workspace:
    def __init__(self, work, name, meta):
        self.dir = os.path.join(work, name)
        self.root = os.path.join(self.dir, "project")
        os.makedirs(self.root)
        self.env = dict(os.environ, AGENT_RUNNER_HOME=os.path.join(self.dir, "home"), RUST_LOG="warn",
                        OPENAI_API_KEY="sk-bench-0123456789")
        defaults = os.path.join(self.dir, "defaults.yaml")
        with open(defaults, "w") as f:
            f.write(f"builder: {{kind: meta, model: bench}}\nrunner:\n  meta: {{base_url: \"{meta.url}\"}}\n")
        out = self.run("workspace", "init", self.root, "--defaults", defaults)
        self.meta = out.split("metadata: ")[1].strip()

    def run(self, *args):
        proc = subprocess.run([BIN] + list(args), env=self.env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"agent-runner {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return proc.stdout

    def plan(self, *args):
        start = time.time()
        out = self.run("plan", "-w", self.root, "--json", *args)
        return time.time() - start, json.loads(out)


def decomposition(n, phases):
    per = n // phases
    out = []
    for p in range(phases):
        tasks = []
        for i in range(p * per, (p + 1) * per):
            deps = [f"temp-{i - 1}"] if i % per else ([f"temp-{i - per}"] if i >= per else [])
            tasks.append({"id": f"temp-{i}", "title": f"Implement part {i} of the product catalogue page",
                          "description": f"Build part {i}: component, state and tests, as the design says.",
                          "acceptance_criteria": [f"Part {i} renders", f"Part {i} is covered by a test"],
                          "dependencies": deps, "wbs_level": 3, "estimated_effort": "medium",
                          "suggested_impl": {"language": "typescript", "file_paths": [f"src/part{i}.ts"]}})
        out.append({"name": f"Phase {p}", "milestone": f"m{p}", "tasks": tasks})
    return json.dumps({"type": "decompose", "understanding": "A catalogue page in parts.", "phases": out})


def patch(ids, phases):
    ops = [{"op": "update", "task_id": ids[i], "title": f"Renamed part {i}",
            "acceptance_criteria": [f"Part {i} works"]} for i in range(10, 20)]
    ops += [{"op": "move", "task_id": ids[i], "parent_id": phases[0], "position": {"index": 0}}
            for i in range(150, 155)]
    ops += [{"op": "delete", "task_id": ids[i], "cascade": False} for i in range(100, 104)]
    ops.append({"op": "create", "temp_id": "new-1", "title": "A new task", "description": "More work.",
                "acceptance_criteria": ["It works"], "dependencies": [ids[0]], "phase_name": "Phase 1"})
    return json.dumps({"type": "plan_patch", "version": 1,
                       "payload": {"understanding": "Rename, move, drop and add.", "operations": ops}})


def main():
    meta = FakeMeta()
    work = tempfile.mkdtemp(prefix="agent-runner-bench-plan-")
    rows = []
    try:
        walls, writes = [], []
        for n in range(RUNS + 1):
            ws = Workspace(work, f"d{n}", meta)
            meta.replies.append(decomposition(50, 5))
            took, doc = ws.plan("a catalogue page")
            if len(doc["steps"]) != 50:
                sys.exit(f"expected 50 tasks, got {doc}")
            if n > 0:
                walls.append(took)
                writes.append(doc["write_ms"])
            shutil.rmtree(ws.dir)
        rows += [("p1. plan, 50-task decompose reply: the command", stats(walls, "ms", 1000)),
                 ("    checking and writing 50 tasks and wbs.json", stats(writes, "ms"))]

        walls, writes, bodies, yamls = [], [], [], []
        for n in range(RUNS + 1):
            ws = Workspace(work, f"p{n}", meta)
            meta.replies.append(decomposition(200, 4))
            _, doc = ws.plan("a big catalogue")
            ids = [s["task_id"] for s in doc["steps"]]
            with open(os.path.join(ws.meta, "wbs.json")) as f:
                phases = json.load(f)["nodes"]["node-root"]["children"]
            with open(os.path.join(ws.meta, "chat.jsonl"), "a") as f:
                for i in range(10):
                    f.write(json.dumps({"at": "2026-01-01T00:00:00.000Z", "role": "user",
                                        "text": f"{i} " + "計画を直して" * 60}) + "\n")
            meta.replies.append(patch(ids, phases))
            meta.bodies.clear()
            took, doc = ws.plan("--patch", "rename, move, drop and add")
            if len(doc["steps"]) != 20:
                sys.exit(f"expected 20 steps, got {doc}")
            body = meta.bodies[0]
            request = json.loads(body)["messages"][1]["content"]
            omitted = re.search(r"\n  nodes_omitted: (\d+)", request)
            sent = (request.count("\n- id: t-"), 205 - (int(omitted.group(1)) if omitted else 0))
            if n > 0:
                walls.append(took)
                writes.append(doc["write_ms"])
                bodies.append(len(body))
                yamls.append(len(request.encode()))
            shutil.rmtree(ws.dir)
        rows += [("p2. plan --patch, 200 tasks: first request body (<= 64 KiB)", stats(bodies, "KiB", 1 / 1024)),
                 ("    its request YAML", stats(yamls, "KiB", 1 / 1024)),
                 ("    tasks and tree nodes it shows (of 200 and 205)", f"{sent[0]} and {sent[1]}"),
                 ("    the command", stats(walls, "ms", 1000)),
                 ("    checking and writing a 20-operation patch", stats(writes, "ms"))]
        if max(bodies) > 64 * 1024:
            rows.append(("    FAILED: a request body is over 64 KiB", f"{max(bodies)} bytes"))
    finally:
        meta.server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(label) for label, _ in rows)
    print(f"\nagent-runner plan benchmarks ({os.cpu_count()} cores)")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


if __name__ == "__main__":
    main()
