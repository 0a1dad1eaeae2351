#!/usr/bin/env bash
# `make bench`: prepares the environment and runs bench/bench.py (the runner),
# bench/egress.py (the egress proxy), bench/lifeline.py (egress over the lifeline,
# locally and on an emulated tcp host, vs the socket path), bench/flood.py (logs after a flood of refused
# connections), bench/hardening.py (the cost of the seccomp profile and the agent
# check), bench/offpath.py (the agent check off the critical path, SPEC §27: the
# tools volume's codex in a 3-loop task, the real image's start, a swapped agent),
# bench/quiet.py (PID 1's stop of the others after each command), bench/web.py (the web view), bench/plan.py
# (plans), bench/watch.py (events followed, the state file), bench/agents.py
# (claude-code-cli, Meta through codex-cli; needs the real worker image), bench/tools.py
# (the tools volume: its fill, start to the first worker run with it), bench/setup.py
# (task.setup pip install from PyPI, then again with the pip cache),
# bench/review.py (delivery and notification), bench/tries.py (best of 3 against
# one attempt), bench/copy.py (the copy transport: a 50 MB repository in and its
# commit out on an emulated tcp:// host), bench/compat.py (a task under podman
# and Docker; needs podman), bench/hosts.py (placement over emulated Docker hosts),
# bench/remote_overhead.py (a 3-loop task on an emulated tcp:// host vs bench/bare.sh
# making the same calls there), bench/gvisor.py (runsc against runc, an MCP server's
# start and call; needs runsc), bench/eval.py (an evaluation's overhead per case, 12
# cases with --jobs 3) and bench/pipeline.py (the orchestrator, the TaskStore).
# BENCH_RUNS sets the repetitions (default 7 and 5); BENCH_BUILD=0 skips the
# clean-build timing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash testdata/setup-docker.sh
cargo build --release --locked --quiet
python3 bench/bench.py
python3 bench/egress.py
python3 bench/flood.py
python3 bench/lifeline.py
python3 bench/hardening.py
python3 bench/offpath.py
python3 bench/quiet.py
python3 bench/web.py
python3 bench/plan.py
python3 bench/watch.py
python3 bench/tools.py
python3 bench/setup.py
if docker image inspect agent-runner-codex:latest >/dev/null 2>&1; then
  python3 bench/agents.py
else
  echo "bench: bench/agents.py left out: agent-runner-codex:latest is not built (make sandbox-image)" >&2
fi
python3 bench/review.py
python3 bench/tries.py
python3 bench/copy.py
if command -v podman >/dev/null 2>&1; then
  python3 bench/compat.py
else
  echo "bench: bench/compat.py left out: podman is not installed (testdata/setup-podman.sh)" >&2
fi
python3 bench/hosts.py
python3 bench/remote_overhead.py
if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
  python3 bench/gvisor.py
else
  echo "bench: bench/gvisor.py left out: the daemon has no runtime runsc (testdata/setup-runsc.sh)" >&2
fi
python3 bench/eval.py
exec python3 bench/pipeline.py
