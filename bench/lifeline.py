#!/usr/bin/env python3
"""Egress throughput over the sandbox's lifeline (`make bench`, SPEC §22).

100 MiB downloaded by busybox wget inside the sandbox from a server on 127.0.0.2,
through the egress proxy, timed inside the sandbox (/proc/uptime, 10 ms steps):
- socket, local: this build on the local daemon, whose egress carrier is the socket
  (the bridge and the proxy's unix socket mounted from the host);
- lifeline, local: the lifeline on the local daemon, by the binary in
  BENCH_LIFELINE_BIN (a build whose carrier is the lifeline locally as well: in
  worker/docker.rs's open_carrier, `lifeline` without `self.backend.remote()`); left
  out when it is not set;
- lifeline, tcp host: this build against an emulated remote host (DOCKER_HOST=
  tcp://127.0.0.N:2375, Docker-in-Docker as the tests start one; the repository in a
  directory the host shares, so the bind transport's locality proof passes), where
  the carrier is the lifeline.
Prints MB/s (median of BENCH_RUNS, default 3) and each lifeline figure's ratio to the
socket's (target >= 0.5).
"""

import http.server
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
LIFELINE_BIN = os.environ.get("BENCH_LIFELINE_BIN")
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
IMAGE = "agent-runner-test-worker:latest"
HOST_IMAGE = "agent-runner-test-remote-host:2"
SIZE = 100 << 20
BODY = b"x" * SIZE


class Big(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(SIZE))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Big)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"127.0.0.2:{srv.server_address[1]}"


def download(binary, authority, base, docker_host=None):
    """One task whose worker downloads SIZE bytes; seconds the download took."""
    work = tempfile.mkdtemp(prefix="ar-lifeline-", dir=base)
    repo, home = os.path.join(work, "repo"), os.path.join(work, "home")
    os.makedirs(repo)
    os.makedirs(home)
    script = os.path.join(work, "meta.yaml")
    prompt = (f"@run: read a _ </proc/uptime; wget -q -O /dev/null http://{authority}/big; "
              f"echo $? > rc.txt; read b _ </proc/uptime; echo $a $b > t.txt\\n@say: done")
    with open(script, "w") as f:
        f.write("- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: x\n"
                "- type: next_action\n  decision: {action: run_worker, reason: go}\n"
                f"  worker_call: {{worker_type: codex-cli, mode: exec, prompt: \"{prompt}\"}}\n"
                "- type: completion_assessment\n  summary: ok\n"
                "  details: {passed_criteria: [AC-1], remaining_risks: []}\n")
    task_id = "bench-lifeline-" + os.path.basename(work)[-8:].lower().replace("_", "x")
    yaml = (f"version: 1\ntask:\n  id: {task_id}\n  repo: {repo}\n  prd: {{text: x}}\n"
            f"runner:\n  meta: {{kind: scripted, script: {script}, max_loops: 1}}\n"
            f"  worker:\n    docker_image: {IMAGE}\n    allow: ['{authority}']\n")
    if docker_host:
        # The host shares this machine's paths: bind, so rc.txt and t.txt land here
        # (the default there, copy, would bring them back as a branch).
        yaml += "  sandbox: {transport: bind}\n"
    env = dict(os.environ, TMPDIR=home, HOME=home, RUST_LOG="warn")
    if docker_host:
        env["DOCKER_HOST"] = docker_host
    out = subprocess.run([binary, "run"], input=yaml.encode(), env=env, capture_output=True,
                         timeout=600)
    try:
        with open(os.path.join(repo, "rc.txt")) as f:
            rc = f.read().strip()
        with open(os.path.join(repo, "t.txt")) as f:
            a, b = map(float, f.read().split())
    except OSError:
        sys.exit(f"bench/lifeline.py: the task did not download: {out.stderr.decode()[-2000:]}"
                 f"{out.stdout.decode()[-2000:]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if rc != "0":
        sys.exit(f"bench/lifeline.py: wget failed ({rc}): {out.stderr.decode()[-2000:]}")
    return max(b - a, 0.01)


def free_address():
    for n in range(200, 250):
        address = f"127.0.0.{n}"
        probe = socket.socket()
        try:
            probe.bind((address, 2375))
            return address
        except OSError:
            continue
        finally:
            probe.close()
    sys.exit("bench/lifeline.py: no free 127.0.0.N:2375")


def docker(*args, check=True):
    return subprocess.run(["docker", *args], capture_output=True, check=check, timeout=300)


def start_host(shared):
    """An emulated remote host (as crates/cli/tests/support/remote_hosts.rs starts
    them) seeing `shared` at the same path; (container, url)."""
    address = free_address()
    name = f"agent-runner-bench-host-{os.getpid()}"
    docker("volume", "create", name)
    docker("run", "-d", "--mount", f"type=bind,source={shared},target={shared}",
           "--name", name, "--network", "host", "--cgroupns=private", "--cap-add", "ALL",
           "--cap-drop", "SYS_RESOURCE", "--security-opt", "seccomp=unconfined",
           "--security-opt", "apparmor=unconfined", "--tmpfs", "/run",
           "--mount", f"type=volume,source={name},target=/var/lib/docker", HOST_IMAGE, address)
    url = f"tcp://{address}:2375"
    for _ in range(600):
        if docker("-H", url, "version", check=False).returncode == 0:
            break
        threading.Event().wait(0.1)
    else:
        sys.exit(f"bench/lifeline.py: the emulated host at {url} did not answer")
    subprocess.run(f"docker save {IMAGE} | docker -H {url} load -q", shell=True, check=True,
                   capture_output=True, timeout=300)
    return name, url


def figure(label, seconds, base=None):
    mbs = [SIZE / 1e6 / s for s in seconds]
    med = statistics.median(mbs)
    ratio = f"  ({med / base:.2f}x the socket path)" if base else ""
    print(f"  {label:<22} {med:7.1f} MB/s  (min {min(mbs):.1f}, max {max(mbs):.1f}){ratio}")
    return med


def main():
    if docker("image", "inspect", HOST_IMAGE, check=False).returncode != 0:
        sys.exit(f"bench/lifeline.py: {HOST_IMAGE} is missing (bash testdata/setup-remote-hosts.sh)")
    srv, authority = server()
    shared = tempfile.mkdtemp(prefix="ar-bench-shared-")
    host = None
    try:
        print(f"egress throughput, {SIZE >> 20} MiB from 127.0.0.2 to busybox wget in the sandbox, "
              f"median of {RUNS}:")
        base = figure("socket, local", [download(BIN, authority, shared) for _ in range(RUNS)])
        if LIFELINE_BIN:
            figure("lifeline, local", [download(LIFELINE_BIN, authority, shared)
                                       for _ in range(RUNS)], base)
        else:
            print("  lifeline, local        left out: set BENCH_LIFELINE_BIN to a build with "
                  "the lifeline as the local carrier")
        host, url = start_host(shared)
        download(BIN, authority, shared, url)  # fills the host's tools volume
        figure("lifeline, tcp host", [download(BIN, authority, shared, url)
                                      for _ in range(RUNS)], base)
    finally:
        srv.shutdown()
        if host:
            docker("rm", "-f", host, check=False)
            docker("volume", "rm", host, check=False)
        shutil.rmtree(shared, ignore_errors=True)


if __name__ == "__main__":
    main()
