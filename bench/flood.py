#!/usr/bin/env python3
"""A worker's flood of refused connections (`make bench`, issue 28): the sizes of
`egress.jsonl` and `events.jsonl` after it, and whether the counts stayed exact.

A task runs with the default network (allowlist) and a worker run that sleeps, so its
proxy stays up; this script opens FLOOD connections (default 20,000) to the proxy's
unix socket, as the bridge in the container does, 8 at a time, each a `CONNECT`
that is not allowed (answered 403): all to 127.0.0.3, then, in a second task, each
to a name of its own (`h<n>.flood.example`). Then it stops the task (SIGTERM) and
reads its logs and its result. AGENT_RUNNER_BIN chooses the binary (an older one for a
before/after figure).
"""

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from held import BIN, holding_task

FLOOD = int(os.environ.get("FLOOD", "20000"))
CLIENTS = 8
TASK = "bench-flood"


def refused(path, client, count, spread, failures):
    for n in range(count):
        target = f"h{client}-{n}.flood.example:443" if spread else "127.0.0.3:9"
        request = f"CONNECT {target} HTTP/1.1\r\n\r\n".encode()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            s.sendall(request)
            answer = s.recv(64)
            if not answer.startswith(b"HTTP/1.1 403"):
                failures.append(answer)
        except OSError as e:
            failures.append(repr(e))
        finally:
            s.close()


def size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def human(n):
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def flood(spread):
    """One task flooded; what its logs and result say."""
    proc, work, tmp, repo = holding_task(TASK, "[]", subprocess.PIPE)
    try:
        deadline = time.time() + 120
        sockets = []
        while not sockets:
            if time.time() > deadline or proc.poll() is not None:
                sys.exit("the task did not start its proxy")
            sockets = glob.glob(os.path.join(tmp, "agent-runner-egress-*", "proxy.sock"))
            time.sleep(0.1)
        # The container too: the worker sleeps in it while the proxy is flooded.
        time.sleep(2)
        failures = []
        started = time.perf_counter()
        threads = [threading.Thread(target=refused,
                                    args=(sockets[0], c, FLOOD // CLIENTS, spread, failures))
                   for c in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - started
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        out = proc.stdout.read()
        logs = os.path.join(repo, ".agent-runner", "logs", TASK)
        egress, events = os.path.join(logs, "egress.jsonl"), os.path.join(logs, "events.jsonl")
        result = json.loads(out.decode().strip().splitlines()[-1])
        lines = sum(1 for _ in open(egress))
        counted = sum(json.loads(line).get("connections", 1) for line in open(egress)
                      if "truncated" not in line)
        egress_size, events_size = size(egress), size(events)
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)

    sent = FLOOD // CLIENTS * CLIENTS
    where = f"{sent} names" if spread else "one destination"
    return [
        (f"{sent} refused, to {where}", f"{took:.1f} s ({sent / took:.0f}/s), "
         f"{len(failures)} not answered 403"),
        ("  egress.jsonl (bound 4 MiB)", f"{human(egress_size)}, {lines} lines, "
         f"{counted} connections in them"),
        ("  events.jsonl (bound 4 MiB + 1 MiB)", human(events_size)),
        ("  result's egress", f"{result.get('egress')} (exact: denied == {sent})"),
    ]


def main():
    rows = flood(False) + flood(True)
    width = max(len(label) for label, _ in rows)
    load = os.getloadavg()[0]
    print(f"\nflood of refused connections ({os.cpu_count()} cores, load {load:.1f}; {BIN})")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


if __name__ == "__main__":
    main()
