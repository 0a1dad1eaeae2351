#!/usr/bin/env python3
"""A task on the Kubernetes test cluster against a bash script making the same calls
with kubectl (SPEC §25 "Figures", `make bench` when the test cluster is up; target
<= 1.25x).

1. `agent-runner run` with `runner.sandbox.host: k8s://CONTEXT/NAMESPACE` (the test
   cluster of testdata/setup-kubernetes.sh; the tools image of `agent-runner tools
   image --without-agents` loaded into its node outside the clock), `network: none`,
   the test image's fake codex (`agent_from: image`), Meta an OpenAI Chat server on
   127.0.0.1 scripted for 3 loops (bench.py's), a small committed repository: the
   Pod, its lifeline, the repository copied in and the work read out by exec, the
   branch landed.
2. bench/k8s_bare.sh: the same Meta requests (the bodies agent-runner sent, by curl),
   a held Pod, `kubectl attach -i`, the clone in by one `kubectl exec … tar -x`, per
   loop an exec of codex and one of the test, a bundle made and read out by exec and
   fetched, `kubectl delete --wait=false`.
3. Start to the first worker run: agent-runner's first log line to `worker run 1:
   the agent … starts`, against the script's create → Running → attach → copy in
   (bench/k8s_pod.sh times the Pod alone).

Pairs interleaved, the first a warm-up; medians of BENCH_RUNS (default 5).
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

import bench

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
CLUSTER_ENV = "/var/lib/agent-runner-k8s/cluster.env"
NODE = "agent-runner-test-k8s-node"


def cluster_env():
    env = {}
    with open(CLUSTER_ENV) as f:
        for line in f:
            if "=" in line and not line.startswith("#"):
                key, value = line.rstrip("\n").split("=", 1)
                env[key] = value.strip('"')
    return env


def clock(line):
    m = re.match(r"(\d\d):(\d\d):(\d\d)\.(\d\d\d) ", line)
    if not m:
        return None
    h, mi, s, ms = (int(g) for g in m.groups())
    return h * 3600 + mi * 60 + s + ms / 1000


def tools_image(env):
    """The tools image of this build, built and loaded into the node if missing."""
    built = subprocess.run([bench.BIN, "tools", "image", "--without-agents"], env=env,
                           capture_output=True, text=True)
    if built.returncode != 0:
        sys.exit(f"bench/kubernetes.py: agent-runner tools image failed:\n{built.stderr}")
    image = built.stdout.split()[0]
    if subprocess.run(["docker", "exec", NODE, "docker", "image", "inspect", image],
                      capture_output=True).returncode != 0:
        subprocess.run(["sh", "-c", f"docker save {image} | docker exec -i {NODE} docker load"],
                       check=True, capture_output=True)


def repository(work, name):
    repo = os.path.join(work, name)
    os.makedirs(os.path.join(repo, "src"))
    subprocess.run(["git", "init", "-q", repo], check=True)
    for i in range(20):
        with open(os.path.join(repo, "src", f"file-{i}.txt"), "w") as f:
            f.write(f"line {i}\n" * 50)
    subprocess.run(["git", "-C", repo, "add", "-A"], check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@localhost", "-C", repo,
                    "commit", "-qm", "base"], check=True)
    return repo


def main():
    if not os.path.exists(CLUSTER_ENV):
        print("bench/kubernetes.py: left out: the test cluster is not up (make test-cluster)",
              file=sys.stderr)
        return
    if not os.path.exists(bench.BIN):
        sys.exit(f"bench/kubernetes.py: build {bench.BIN} first (cargo build --release)")
    k8s = cluster_env()
    target = f"k8s://{k8s['K8S_CONTEXT']}/{k8s['K8S_NAMESPACE']}"
    env = dict(os.environ, OPENAI_API_KEY=bench.KEY, RUST_LOG="agent_runner=debug",
               AGENT_RUNNER_KUBECTL=k8s["KUBECTL"], KUBECONFIG=k8s["KUBECONFIG"],
               KUBECTL=k8s["KUBECTL"], K8S_CONTEXT=k8s["K8S_CONTEXT"],
               K8S_NAMESPACE=k8s["K8S_NAMESPACE"])
    tools_image(env)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), bench.Meta)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    meta_url = f"http://127.0.0.1:{server.server_port}/v1"
    work = tempfile.mkdtemp(prefix="agent-runner-bench-k8s-")
    ours, script, starts, script_starts = [], [], [], []
    try:
        for n in range(RUNS + 1):
            bench.reset(bench.three_loops())
            repo = repository(work, f"a{n}")
            task_id = f"bench-k8s-{os.getpid()}-{n}"
            yaml = (bench.task_yaml(task_id, repo, meta_url, network="none")
                    .replace("    network: none\n", "    network: none\n    agent_from: image\n")
                    + f"  sandbox:\n    host: {target}\n")
            start = time.time()
            proc = subprocess.run([bench.BIN, "run"], input=yaml.encode(), env=env,
                                  capture_output=True)
            took = time.time() - start
            log = proc.stderr.decode(errors="replace")
            if proc.returncode != 0:
                sys.exit(f"bench/kubernetes.py: agent-runner failed:\n{log[-3000:]}")
            if subprocess.run(["git", "-C", repo, "rev-parse", "-q", "--verify",
                               f"agent-runner/{task_id}"], capture_output=True).returncode != 0:
                sys.exit("bench/kubernetes.py: agent-runner left no branch")
            lines = [line for line in log.splitlines() if clock(line) is not None]
            first = [line for line in lines
                     if re.search(r"worker run 1: the agent \S+ starts", line)]
            if not first:
                sys.exit(f"bench/kubernetes.py: no agent start in the log:\n{log[-3000:]}")
            bodies = os.path.join(work, f"bodies-{n}")
            os.makedirs(bodies)
            for k, body in enumerate(bench.Meta.bodies, 1):
                with open(os.path.join(bodies, f"{k}.json"), "wb") as f:
                    f.write(body)
            requests = len(bench.Meta.bodies)
            bench.reset(bench.three_loops())
            repo_b = repository(work, f"b{n}")
            start_b = time.time()
            bare = subprocess.run(["bash", os.path.join(bench.HERE, "k8s_bare.sh"), repo_b,
                                   bench.IMAGE, bench.TEST] + bench.PROMPTS,
                                  env=dict(env, BARE_META_URL=meta_url, BARE_META_BODIES=bodies),
                                  capture_output=True, text=True)
            took_b = time.time() - start_b
            if bare.returncode != 0:
                sys.exit(f"bench/kubernetes.py: k8s_bare.sh failed:\n{bare.stderr[-3000:]}")
            if len(bench.Meta.arrivals) != requests:
                sys.exit(f"the script made {len(bench.Meta.arrivals)} Meta requests, "
                         f"agent-runner {requests}")
            if subprocess.run(["git", "-C", repo_b, "rev-parse", "-q", "--verify", "bench-bare"],
                              capture_output=True).returncode != 0:
                sys.exit("bench/kubernetes.py: k8s_bare.sh left no branch")
            marks = re.findall(r"bare: first agent at (\d+\.\d+)", bare.stderr)
            if n > 0:
                ours.append(took)
                script.append(took_b)
                starts.append(clock(first[0]) - clock(lines[0]))
                if marks:
                    script_starts.append(float(marks[0]) - start_b)
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    ratios = [a / b for a, b in zip(ours, script)]
    print(f"kubernetes ({os.cpu_count()} cores), a 3-loop task on the test cluster ({target}):")
    print(f"  agent-runner run:                    {bench.stats(ours)}")
    print(f"  bash script with kubectl, same calls: {bench.stats(script)}")
    print(f"  ratio of medians:                    {statistics.median(ours) / statistics.median(script):8.3f} x  (target <= 1.25)")
    print(f"  ratio per pair:                      {bench.stats(ratios, 'x')}")
    print(f"  start to the first worker run:       {bench.stats(starts)}")
    if script_starts:
        print(f"  the script's start to its first codex: {bench.stats(script_starts)}")


if __name__ == "__main__":
    main()
