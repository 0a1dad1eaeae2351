#!/usr/bin/env python3
"""Delivery and notification benchmark (SPEC §23; `make bench`). Prints median, min
and max.

One scripted task (a worker run, the pinned test) by `orchestrate --once` in an
isolated git workspace, with `deliver` (a push to a local bare repository, a PR
command printing a URL) and `notify` (a signed webhook POST to a local server
answering 200, and a command reading the JSON) against the same workspace setup
without them. Runs interleaved; the figure is the added wall time per attempt, and
the delivery's own time as the orchestrator logs it.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline  # noqa: E402  (its Workspace, BUILDER, META, BIN)

RUNS = int(os.environ.get("BENCH_RUNS", "5"))


class Hook(http.server.BaseHTTPRequestHandler):
    received = 0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Hook.received += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def defaults_with(ws, extra):
    path = os.path.join(ws.dir, "defaults.yaml")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text + "isolation: clone\nrequire_test: true\n" + extra)
    ws.run("workspace", "set", "-w", ws.root, "--defaults", path)


def one(work, name, extra):
    ws = pipeline.Workspace(work, name, True)
    defaults_with(ws, extra(ws))
    ws.env["RUST_LOG"] = "info"
    (task,) = ws.tasks(1, name)
    ws.run("task", "run", "-w", ws.root, task)
    start = time.monotonic()
    proc = subprocess.run([pipeline.BIN, "orchestrate", "-w", ws.root, "--once"], env=ws.env,
                          capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0 or "succeeded" not in proc.stderr:
        sys.exit(f"{name}: orchestrate failed:\n{proc.stderr[-3000:]}")
    delivered = re.search(r"delivered: \S+ in (\d+(?:\.\d+)?) (ms|s)\b", proc.stderr)
    took = None
    if delivered:
        took = float(delivered.group(1)) / (1000 if delivered.group(2) == "ms" else 1)
    told = [float(v) / (1000 if u == "ms" else 1)
            for v, u in re.findall(r"told `succeeded` in (\d+(?:\.\d+)?) (ms|s)\b", proc.stderr)]
    return wall, took, told, proc.stderr


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    os.environ["BENCH_HOOK_KEY"] = "bench-key"
    work = tempfile.mkdtemp(prefix="bench-review-")
    plain, delivering, delivery, webhook, command = [], [], [], [], []
    try:
        for n in range(RUNS):
            def deliver(ws):
                bare = os.path.join(ws.dir, "remote.git")
                subprocess.run(["git", "init", "-q", "--bare", bare], check=True)
                return (f"deliver: {{push_url: {bare}, pr_command: 'echo https://forge.test/pull/1'}}\n"
                        f"notify:\n  - {{on: [succeeded], url: \"{url}\", secret: \"env:BENCH_HOOK_KEY\"}}\n"
                        "  - {on: [succeeded], command: 'cat > /dev/null'}\n")
            pairs = [("plain", lambda ws: "", plain), ("deliver", deliver, delivering)]
            if n % 2:
                pairs.reverse()
            for name, extra, into in pairs:
                wall, took, told, log = one(work, f"{name}-{n}", extra)
                into.append(wall)
                if name == "deliver":
                    if took is None:
                        sys.exit(f"no delivery in the log:\n{log[-3000:]}")
                    delivery.append(took)
                    if len(told) != 2:
                        sys.exit(f"expected 2 notifications in the log:\n{log[-3000:]}")
                    webhook.append(told[0])
                    command.append(told[1])
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    if Hook.received != RUNS:
        sys.exit(f"the webhook got {Hook.received} POSTs, expected {RUNS}")
    print("SPEC §23 delivery and notification, one isolated attempt (orchestrate --once):")
    print(f"  without deliver/notify:        {pipeline.stats(plain)}")
    print(f"  with deliver + 2 notifications: {pipeline.stats(delivering)}")
    print(f"  added per attempt (medians):    {statistics.median(delivering) - statistics.median(plain):8.3f} s")
    print(f"  delivery (push + PR command), as logged: {pipeline.stats(delivery)}")
    print(f"  signed webhook POST, as logged:          {pipeline.stats(webhook)}")
    print(f"  notify command, as logged:               {pipeline.stats(command)}")


if __name__ == "__main__":
    main()
