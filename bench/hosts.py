#!/usr/bin/env python3
"""Placement over Docker hosts (SPEC §22, `make bench`): 12 tasks whose worker
sleeps 5 s, by `orchestrate --once` over 3 emulated hosts x 2 slots against 1 host
x 2 slots. Wall times (median of BENCH_RUNS, default 3) and their ratio; the ideal
is 1/3 (12 x 5 s over 6 slots against 2).

The hosts are the test suite's emulated remote hosts (agent-runner-test-remote-host:2,
`make test-env`): Docker-in-Docker on `--network host`, each inner dockerd in its own
network namespace behind a socat relay at 127.0.0.N:2375. They all see this script's
directory at the same path (the bind transport's locality proof passes), and the
test worker image is loaded into each. Removed at the end however the script ends.
"""

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import pipeline

BIN = pipeline.BIN
IMAGE = pipeline.IMAGE
HOST_IMAGE = "agent-runner-test-remote-host:2"
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
TASKS = 12

META = pipeline.META.replace("@say: wrote out.txt", "@say: wrote out.txt\n      @sleep: 5")


def docker(*args, check=True):
    proc = subprocess.run(["docker"] + list(args), capture_output=True, text=True)
    if check and proc.returncode != 0:
        sys.exit(f"docker {' '.join(args)} failed: {proc.stderr[-2000:]}")
    return proc.stdout


def free_addresses(n):
    import socket
    found = []
    for last in range(200, 250):
        address = f"127.0.0.{last}"
        s = socket.socket()
        try:
            s.bind((address, 2375))
            found.append(address)
        except OSError:
            pass
        finally:
            s.close()
        if len(found) == n:
            return found
    sys.exit("bench/hosts.py: no free 127.0.0.N:2375")


def start_hosts(shared, n):
    names = []
    for address in free_addresses(n):
        name = f"agent-runner-bench-host-{os.getpid()}-{address.rsplit('.', 1)[1]}"
        names.append(name)
        atexit.register(lambda name=name: (docker("rm", "-f", name, check=False),
                                           docker("volume", "rm", name, check=False)))
        docker("volume", "create", name)
        docker("run", "-d", "--name", name, "--network", "host", "--cgroupns=private",
               "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
               "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
               "--tmpfs", "/run", "--mount", f"type=volume,source={name},target=/var/lib/docker",
               "--mount", f"type=bind,source={shared},target={shared}", HOST_IMAGE, address)
        yield name, f"tcp://{address}:2375"


def ready(url):
    deadline = time.time() + 60
    while subprocess.run(["docker", "-H", url, "version"], capture_output=True).returncode != 0:
        if time.time() > deadline:
            sys.exit(f"bench/hosts.py: {url} did not answer within 60 s")
        time.sleep(0.2)


def one_run(work, n, hosts, label):
    ws = pipeline.Workspace(work, f"{label}-{n}", True, META)
    ids = ws.tasks(TASKS, label)
    ws.run("task", "run", "-w", ws.root, *ids)
    flags = []
    for name, url in hosts:
        flags += ["--host", f"{name}={url}:2"]
    began = time.monotonic()
    ws.run("orchestrate", "-w", ws.root, "--once", *flags)
    return time.monotonic() - began


def main():
    if subprocess.run(["docker", "image", "inspect", HOST_IMAGE], capture_output=True).returncode:
        print(f"bench/hosts.py: left out: {HOST_IMAGE} is missing (make test-env)", file=sys.stderr)
        return
    shared = tempfile.mkdtemp(prefix="agent-runner-bench-hosts-")
    atexit.register(shutil.rmtree, shared, True)
    names = list(start_hosts(shared, 3))
    hosts = [(f"h{i}", url) for i, (_, url) in enumerate(names)]
    for _, url in hosts:
        ready(url)
    # Outside the clock: the image and the tools volume on every host (a fresh
    # host's first sandbox would otherwise fill its tools volume, 510 MB).
    flags = []
    for name, url in hosts:
        flags += ["--host", f"{name}={url}"]
    prepare = subprocess.run([BIN, "hosts", "prepare", "--image", IMAGE] + flags,
                             capture_output=True, text=True)
    if prepare.returncode != 0:
        sys.exit(f"bench/hosts.py: hosts prepare failed:\n{prepare.stderr[-2000:]}")
    three, one = [], []
    for n in range(RUNS):
        three.append(one_run(shared, n, hosts, "three"))
        one.append(one_run(shared, n, hosts[:1], "one"))
    m3, m1 = statistics.median(three), statistics.median(one)
    print(f"hosts: {TASKS} tasks of 5 s, 3 hosts x 2 slots: {m3:6.1f} s  (min {min(three):.1f}, max {max(three):.1f}, n={len(three)})")
    print(f"hosts: {TASKS} tasks of 5 s, 1 host  x 2 slots: {m1:6.1f} s  (min {min(one):.1f}, max {max(one):.1f}, n={len(one)})")
    print(f"hosts: ratio 3 hosts / 1 host: {m3 / m1:.2f} (ideal 0.33)")


if __name__ == "__main__":
    main()
