# shellcheck shell=sh
# The sandbox container's main process (src/worker/container.rs).
set -e
home="${CODEX_HOME:-$HOME/.codex}"
mkdir -p "$home"
if [ -e /run/agent-runner/auth.json ]; then ln -sf /run/agent-runner/auth.json "$home/auth.json"; fi
echo "agent-runner-ready $$"
exec cat >/dev/null
