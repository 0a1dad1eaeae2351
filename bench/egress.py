#!/usr/bin/env python3
"""Egress proxy benchmarks (`make bench`, SPEC §17). Prints median, min and max.

A task runs with the default network (allowlist) and a worker run that sleeps, so its
proxy stays up; this script talks to the proxy's unix socket (found under the TMPDIR
it gives agent-runner) as the bridge in the container does, and to a server on
127.0.0.2 directly, with the same client code.

1. Download: 100 MiB through the proxy (plain HTTP) vs. directly; ratio (target >= 0.8).
   Also from inside the container (busybox wget through the bridge), for information.
2. Connect latency: CONNECT through the proxy until its `200` vs. a direct TCP connect;
   the added median (target <= 5 ms).
3. Memory: agent-runner's RSS (the proxy runs in it) with 50 tunnels open, 64 KiB sent
   through each (target <= 16 MiB).
"""

import glob
import http.server
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

from held import holding_task
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
SIZE = 100 << 20
BODY = b"x" * SIZE


class Big(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(SIZE))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


def holder(port_holder):
    """A TCP server on 127.0.0.2 that accepts and holds connections (tunnels' far end)."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.2", 0))
    srv.listen(256)
    port_holder.append(srv.getsockname()[1])
    held = []

    def loop():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            threading.Thread(target=drain, args=(conn,), daemon=True).start()

    def drain(conn):
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
        conn.close()

    threading.Thread(target=loop, daemon=True).start()
    return srv, held


def read_all(sock):
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    total = 0
    while True:
        n = sock.recv_into(view)
        if n == 0:
            return total
        total += n


def download(connect, request):
    start = time.perf_counter()
    sock = connect()
    sock.sendall(request)
    total = read_all(sock)
    took = time.perf_counter() - start
    sock.close()
    if total < SIZE:
        sys.exit(f"short download: {total} bytes")
    return SIZE / took / (1 << 20)


def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def tcp(host, port):
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def stats(values, unit):
    return f"{statistics.median(values):8.2f} {unit}  (min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"


def main():
    big = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Big)
    threading.Thread(target=big.serve_forever, daemon=True).start()
    big_port = big.server_port
    hold_port = []
    hold_srv, held = holder(hold_port)
    hold_port = hold_port[0]
    allow = f"[\"127.0.0.2:{big_port}\", \"127.0.0.2:{hold_port}\"]"
    proc, work, tmp, _ = holding_task("bench-egress", allow, subprocess.DEVNULL)
    rows = []
    try:
        deadline = time.time() + 120
        sockets = []
        while not sockets or not container(proc):
            if time.time() > deadline or proc.poll() is not None:
                sys.exit("the task did not start its proxy and container")
            sockets = glob.glob(os.path.join(tmp, "agent-runner-egress-*", "proxy.sock"))
            time.sleep(0.1)
        path = sockets[0]

        # 1. Download, interleaved.
        request = f"GET http://127.0.0.2:{big_port}/big HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        direct_request = b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n"
        proxied, direct = [], []
        for n in range(RUNS + 1):
            p = download(lambda: unix(path), request)
            d = download(lambda: tcp("127.0.0.2", big_port), direct_request)
            if n > 0:
                proxied.append(p)
                direct.append(d)
        rows.append(("100 MiB direct from 127.0.0.2", stats(direct, "MiB/s")))
        rows.append(("100 MiB through the proxy", stats(proxied, "MiB/s")))
        rows.append(("download ratio proxy/direct (target >= 0.8)",
                     stats([p / d for p, d in zip(proxied, direct)], "x")))
        inside = in_container(proc, big_port)
        if inside:
            host = busybox_on_host(big_port)
            rows.append(("100 MiB, busybox wget on the host, direct", stats(host, "MiB/s")))
            rows.append(("100 MiB, busybox wget in the container (bridge, proxy)", stats(inside, "MiB/s")))
            rows.append(("ratio container/host (same client)",
                         stats([i / h for i, h in zip(inside, host)], "x")))

        # 2. Connect latency.
        connect_request = f"CONNECT 127.0.0.2:{hold_port} HTTP/1.1\r\n\r\n".encode()
        direct_ms, proxied_ms = [], []
        for _ in range(RUNS * 30):
            start = time.perf_counter()
            s = tcp("127.0.0.2", hold_port)
            direct_ms.append((time.perf_counter() - start) * 1000)
            s.close()
            start = time.perf_counter()
            s = unix(path)
            s.sendall(connect_request)
            answer = s.recv(128)
            proxied_ms.append((time.perf_counter() - start) * 1000)
            # Wait for the proxy to finish with it, so connections do not pile up.
            s.shutdown(socket.SHUT_WR)
            while s.recv(4096):
                pass
            s.close()
            if not answer.startswith(b"HTTP/1.1 200"):
                sys.exit(f"CONNECT refused: {answer!r}")
        rows.append(("direct TCP connect", stats(direct_ms, "ms")))
        rows.append(("CONNECT through the proxy until 200", stats(proxied_ms, "ms")))
        rows.append(("added connect latency, medians (target <= 5 ms)",
                     f"{statistics.median(proxied_ms) - statistics.median(direct_ms):8.2f} ms"))

        # 3. RSS with 50 tunnels open.
        time.sleep(1)
        idle = rss_mib(proc.pid)
        tunnels = []
        for _ in range(50):
            s = unix(path)
            s.sendall(connect_request)
            if not s.recv(128).startswith(b"HTTP/1.1 200"):
                sys.exit("a tunnel was refused")
            s.sendall(b"y" * 65536)
            tunnels.append(s)
        time.sleep(1)
        rows.append(("agent-runner RSS, proxy idle", f"{idle:8.2f} MiB"))
        rows.append(("agent-runner RSS, 50 tunnels open (target <= 16 MiB)",
                     f"{rss_mib(proc.pid):8.2f} MiB"))
        for s in tunnels:
            s.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        big.shutdown()
        hold_srv.close()
        shutil.rmtree(work, ignore_errors=True)

    width = max(len(label) for label, _ in rows)
    load = os.getloadavg()[0]
    print(f"\negress proxy benchmarks ({os.cpu_count()} cores, load {load:.1f})")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


def container(proc):
    out = subprocess.run(["docker", "ps", "--filter", "label=agent-runner.task=bench-egress",
                          "--format", "{{.Names}}"], capture_output=True, text=True).stdout.split()
    return out[0] if out else None


def in_container(proc, port):
    """busybox wget in the task's container, through the bridge: 5 x 100 MiB, timed by /proc/uptime."""
    name = container(proc)
    if not name:
        return []
    cmd = (f"a=$(cut -d' ' -f1 /proc/uptime); for i in 1 2 3 4 5; do wget -q -O /dev/null http://127.0.0.2:{port}/big; done; "
           f"b=$(cut -d' ' -f1 /proc/uptime); echo $a $b")
    rates = []
    for _ in range(RUNS):
        out = subprocess.run(["docker", "exec", "-e", "http_proxy=http://127.0.0.1:3128", name,
                              "sh", "-c", cmd], capture_output=True, text=True)
        a, b = (float(x) for x in out.stdout.split())
        if b > a:
            rates.append(5 * SIZE / (b - a) / (1 << 20))
    return rates


def busybox_on_host(port):
    """The same client and timing as `in_container`, on the host without a proxy."""
    cmd = (f"a=$(cut -d' ' -f1 /proc/uptime); for i in 1 2 3 4 5; do busybox wget -Y off -q -O /dev/null http://127.0.0.2:{port}/big; done; "
           f"b=$(cut -d' ' -f1 /proc/uptime); echo $a $b")
    rates = []
    for _ in range(RUNS):
        out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True)
        a, b = (float(x) for x in out.stdout.split())
        if b > a:
            rates.append(5 * SIZE / (b - a) / (1 << 20))
    return rates


if __name__ == "__main__":
    main()
