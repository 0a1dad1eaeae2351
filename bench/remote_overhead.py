#!/usr/bin/env python3
"""A 3-loop task on a tcp:// host against a bash script making the same calls to that
host (SPEC §22, `make bench`; target <= 1.10x).

The host is the test suite's emulated remote host, started as bench/hosts.py starts
them (its own helpers: Docker-in-Docker on `--network host`, the inner dockerd in its
own network namespace behind a relay at tcp://127.0.0.N:2375); the test worker image
and the tools volume are put there by `agent-runner hosts prepare` outside the clock.

1. `agent-runner run` with DOCKER_HOST at that host (the copy transport, `network:
   none`), Meta an OpenAI Chat server on 127.0.0.1 scripted for 3 loops (bench.py's),
   the test image's fake codex, a small committed repository.
2. bench/bare.sh with BARE_TRANSPORT=copy and the same DOCKER_HOST: the same Meta
   requests (the bodies agent-runner sent, by curl, where it sends them), the
   repository cloned and copied into a volume through a created container, one
   container, 3 worker and 3 test execs, then a bundler container with the volume
   read-only whose bundle is read out with `docker cp` and fetched as the branch.

Pairs interleaved, the first a warm-up; medians of BENCH_RUNS (default 3).
Everything made (the host, its volume, the repositories) is removed at the end.
"""

import atexit
import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import hosts

import bench

RUNS = int(os.environ.get("BENCH_RUNS", "3"))


# The copy transport copies the working tree one top-level entry per `docker cp`;
# the script copies it in one. Both layouts: 20 files at the top, and in src/.
LAYOUTS = [("20 files at the top level", ""), ("20 files in src/", "src")]


def repository(work, name, folder):
    repo = os.path.join(work, name)
    os.makedirs(os.path.join(repo, folder), exist_ok=True)
    subprocess.run(["git", "init", "-q", repo], check=True)
    for i in range(20):
        with open(os.path.join(repo, folder, f"file-{i}.txt"), "w") as f:
            f.write(f"line {i}\n" * 50)
    subprocess.run(["git", "-C", repo, "add", "-A"], check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@localhost", "-C", repo,
                    "commit", "-qm", "base"], check=True)
    return repo


def task_yaml(task_id, repo, url):
    return bench.task_yaml(task_id, repo, url, network="none") + "  sandbox:\n    transport: copy\n"


def main():
    if not os.path.exists(bench.BIN):
        sys.exit(f"bench/remote_overhead.py: build {bench.BIN} first (cargo build --release)")
    if subprocess.run(["docker", "image", "inspect", hosts.HOST_IMAGE],
                      check=False, capture_output=True).returncode:
        print(f"bench/remote_overhead.py: left out: {hosts.HOST_IMAGE} is missing (make test-env)",
              file=sys.stderr)
        return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), bench.Meta)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    meta_url = f"http://127.0.0.1:{server.server_port}/v1"
    work = tempfile.mkdtemp(prefix="agent-runner-bench-remote-")
    # The host sees `shared` (hosts.py's way; removed after the host, atexit's order);
    # the repositories are elsewhere, so nothing of them is on the host but copies.
    shared = tempfile.mkdtemp(prefix="agent-runner-bench-remote-host-")
    atexit.register(shutil.rmtree, shared, True)
    try:
        (_, url), = hosts.start_hosts(shared, 1)
        hosts.ready(url)
        prepare = subprocess.run([bench.BIN, "hosts", "prepare", "--image", bench.IMAGE,
                                  "--host", f"h={url}"], check=False, capture_output=True,
                                 text=True)
        if prepare.returncode != 0:
            sys.exit(f"bench/remote_overhead.py: hosts prepare failed:\n{prepare.stderr[-2000:]}")
        env = dict(os.environ, OPENAI_API_KEY=bench.KEY, RUST_LOG="warn", DOCKER_HOST=url)
        print(f"remote overhead ({os.cpu_count()} cores), a 3-loop task on an emulated tcp:// host:")
        for label, folder in LAYOUTS:
            layout(work, url, meta_url, env, label, folder)
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def layout(work, url, meta_url, env, label, folder):
    """One layout's interleaved pairs, the first a warm-up."""
    ours, script = [], []
    for n in range(RUNS + 1):
        bench.reset(bench.three_loops())
        repo = repository(work, f"a-{folder}{n}", folder)
        _, took = bench.run_agent(task_yaml(f"bench-remote-{folder}{n}", repo, meta_url), env)
        branch = subprocess.run(["git", "-C", repo, "rev-parse", "-q", "--verify",
                                 f"agent-runner/bench-remote-{folder}{n}"], check=False,
                                capture_output=True)
        if branch.returncode != 0:
            sys.exit("bench/remote_overhead.py: agent-runner left no branch")
        bodies = os.path.join(work, f"bodies-{folder}{n}")
        os.makedirs(bodies)
        for k, body in enumerate(bench.Meta.bodies, 1):
            with open(os.path.join(bodies, f"{k}.json"), "wb") as f:
                f.write(body)
        requests = len(bench.Meta.bodies)
        bench.reset(bench.three_loops())
        repo_b = repository(work, f"b-{folder}{n}", folder)
        bare_env = dict(env, BARE_META_URL=meta_url, BARE_META_BODIES=bodies,
                        BARE_TRANSPORT="copy")
        start = time.time()
        proc = subprocess.run(["bash", os.path.join(bench.HERE, "bare.sh"), repo_b, bench.IMAGE,
                               bench.TEST] + bench.PROMPTS, check=False, capture_output=True,
                              text=True, env=bare_env)
        took_b = time.time() - start
        if proc.returncode != 0:
            sys.exit(f"bench/remote_overhead.py: bare.sh failed:\n{proc.stderr[-3000:]}")
        if len(bench.Meta.arrivals) != requests:
            sys.exit(f"the script made {len(bench.Meta.arrivals)} Meta requests, "
                     f"agent-runner {requests}")
        if subprocess.run(["git", "-C", repo_b, "rev-parse", "-q", "--verify", "bench-bare"],
                          check=False, capture_output=True).returncode != 0:
            sys.exit("bench/remote_overhead.py: bare.sh left no branch")
        if n > 0:  # the first pair warms caches
            ours.append(took)
            script.append(took_b)
    ratios = [a / b for a, b in zip(ours, script)]
    m_a, m_b = statistics.median(ours), statistics.median(script)
    print(f"  {label}:")
    print(f"    agent-runner run:            {bench.stats(ours)}")
    print(f"    bash script, same calls:     {bench.stats(script)}")
    print(f"    ratio of medians:            {m_a / m_b:8.3f} x  (target <= 1.10)")
    print(f"    ratio per pair:              {bench.stats(ratios, 'x')}")


if __name__ == "__main__":
    main()
