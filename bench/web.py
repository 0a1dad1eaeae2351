#!/usr/bin/env python3
"""Web view benchmarks (`make bench`): `agent-runner serve` over a workspace of
1,000 tasks with 5 attempts each (results included), on 127.0.0.1.

For `/api/tasks`, the list page `/` and one task's page: the server's own time per
request (from its debug log: request read to response written) and the round trip
seen by a client on the same machine (connect to last byte); the response size;
the first request of a fresh server (which reads every task file; later ones read
only the files that changed); then the server's RSS after the load, and its peak. Target: median server time
<= 20 ms for `/api/tasks` and `/`.
"""

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import store

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
TASKS = int(os.environ.get("BENCH_WEB_TASKS", "1000"))
REQUESTS = int(os.environ.get("BENCH_WEB_REQUESTS", "60"))


def stats(values, unit):
    return f"{statistics.median(values):8.2f} {unit}  (min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"


def make_workspace(work):
    root = os.path.join(work, "project")
    os.makedirs(root)
    env = dict(os.environ, AGENT_RUNNER_HOME=os.path.join(work, "home"))
    out = subprocess.run([BIN, "workspace", "init", root], env=env, check=True,
                         capture_output=True, text=True).stdout
    meta = re.search(r"metadata: (\S+)", out).group(1)
    size = store.write_tasks(meta, TASKS, lambda t: f"Task number {t}: TODO アプリを作成して <b>{t}</b>", root)
    return root, env, size


def get(addr, path):
    """Round trip in ms and the body."""
    host, port = addr.split(":")
    start = time.perf_counter()
    with socket.create_connection((host, int(port))) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n".encode())
        chunks = []
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    took = (time.perf_counter() - start) * 1000
    answer = b"".join(chunks)
    head, _, body = answer.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit(f"GET {path}: {head[:200]!r}")
    return took, body


def rss(pid):
    status = open(f"/proc/{pid}/status").read()
    field = lambda name: int(re.search(rf"{name}:\s+(\d+) kB", status).group(1)) / 1024
    return field("VmRSS"), field("VmHWM")


def main():
    work = tempfile.mkdtemp(prefix="agent-runner-bench-web-")
    rows = []
    try:
        root, env, size = make_workspace(work)
        # The first request of a fresh server reads and folds every task file.
        firsts = []
        for _ in range(6):
            proc = subprocess.Popen([BIN, "serve", "-w", root, "--addr", "127.0.0.1:0"], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            addr = proc.stdout.readline().strip().removeprefix("http://").rstrip("/")
            firsts.append(get(addr, "/api/tasks")[0])
            proc.terminate()
            proc.wait()
        firsts = firsts[1:]  # the first start warms the page cache
        log = open(os.path.join(work, "serve.log"), "w+")
        env = dict(env, RUST_LOG="debug")
        proc = subprocess.Popen([BIN, "serve", "-w", root, "--addr", "127.0.0.1:0"], env=env,
                                stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            addr = proc.stdout.readline().strip().removeprefix("http://").rstrip("/")
            idle_rss, _ = rss(proc.pid)
            paths = [("/api/tasks", "GET /api/tasks"), ("/", "GET / (list page)"),
                     ("/tasks/t-00000001", "GET /tasks/<id> (5 attempts)")]
            results = {}
            for path, _ in paths:
                for _ in range(5):
                    get(addr, path)  # warm the page cache
                trips, sizes = [], []
                for _ in range(REQUESTS):
                    took, body = get(addr, path)
                    trips.append(took)
                    sizes.append(len(body))
                results[path] = (trips, sizes)
            load_rss, peak_rss = rss(proc.pid)
            _, js = get(addr, "/static/app.js")
            _, css = get(addr, "/static/style.css")
        finally:
            proc.terminate()
            proc.wait()
        log.seek(0)
        server = {}
        for line in log:
            m = re.search(r"GET (\S+): 200 in ([\d.]+)(µs|ms|s)\b", line)
            if m:
                scale = {"µs": 0.001, "ms": 1.0, "s": 1000.0}[m.group(3)]
                server.setdefault(m.group(1), []).append(float(m.group(2)) * scale)
        for path, label in paths:
            trips, sizes = results[path]
            times = server.get(path, [])[-REQUESTS:]  # without the warm-up requests
            target = " (<= 20 ms)" if path in ("/api/tasks", "/") else ""
            rows.append((f"{label}: server time{target}", stats(times, "ms")))
            rows.append((f"{label}: round trip from a client", stats(trips, "ms")))
            rows.append((f"{label}: response", f"{sizes[-1] / 1024:8.1f} KiB"))
        rows.append(("GET /api/tasks, a fresh server's first request: round trip", stats(firsts, "ms")))
        rows.append(("static app.js + style.css", f"{(len(js) + len(css)) / 1024:8.1f} KiB"))
        rows.append(("server RSS: idle / after the load / peak",
                     f"{idle_rss:.1f} / {load_rss:.1f} / {peak_rss:.1f} MiB"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(label) for label, _ in rows)
    print(f"\nagent-runner web view benchmarks: {TASKS} tasks x 5 attempts ({size / 1e6:.1f} MB of JSON Lines), "
          f"{os.cpu_count()} cores")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


if __name__ == "__main__":
    main()
