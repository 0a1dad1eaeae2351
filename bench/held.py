"""A task held open for the egress benchmarks (egress.py, flood.py): its worker
sleeps, so its egress proxy stays up for the benchmark to talk to."""

import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
IMAGE = "agent-runner-test-worker:latest"


def holding_task(task_id, allow, stdout):
    """`run` of a task whose worker sleeps (so its proxy stays up), allowing `allow`:
    the process, its scratch directory, the TMPDIR it was given (the proxy's
    directory goes there) and its repository. `stdout`: where its output goes."""
    work = tempfile.mkdtemp(prefix=f"ar-{task_id}-")
    tmp = os.path.join(work, "t")
    repo = os.path.join(work, "repo")
    os.makedirs(tmp)
    os.makedirs(repo)
    script = os.path.join(work, "meta.yaml")
    with open(script, "w") as f:
        f.write("- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: x\n"
                "- type: next_action\n  decision: {action: run_worker, reason: hold}\n"
                "  worker_call: {worker_type: codex-cli, mode: exec, prompt: \"@sleep: 600\"}\n")
    yaml = (f"version: 1\ntask:\n  id: {task_id}\n  repo: {repo}\n  prd: {{text: x}}\n"
            f"runner:\n  meta: {{kind: scripted, script: {script}, max_loops: 1}}\n"
            f"  worker:\n    docker_image: {IMAGE}\n    allow: {allow}\n")
    env = dict(os.environ, TMPDIR=tmp, HOME=tmp, RUST_LOG="warn")
    args = [BIN, "run"] if stdout == subprocess.DEVNULL else [BIN, "run", "--json"]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=stdout,
                            stderr=subprocess.DEVNULL, env=env)
    proc.stdin.write(yaml.encode())
    proc.stdin.close()
    return proc, work, tmp, repo
