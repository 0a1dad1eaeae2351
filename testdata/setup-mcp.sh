#!/usr/bin/env bash
# Test environment: the MCP test image agent-runner-test-mcp:latest for
# crates/cli/tests/image/mcp.rs: the real worker image (agent-runner-codex:latest,
# sandbox/build.sh) with Debian's python3 and the official Python MCP SDK (`mcp` and
# its dependencies, wheels from PyPI by `pip download`), serving
# testdata/mcp-server/server.py. Rebuilt only when its recipe or its base changed.
# Under CI a failure fails `make test-env`; elsewhere it is a warning and the MCP
# tests say what is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=testdata/ci.sh
. "$here/ci.sh"
image=${AGENT_RUNNER_MCP_IMAGE:-agent-runner-test-mcp:latest}
base=${SANDBOX_IMAGE:-agent-runner-codex:latest}
label=agent-runner.test-mcp-image

say() { printf 'setup-mcp: %s\n' "$*" >&2; }
fail() {
  if in_ci; then printf 'setup-mcp: error: %s\n' "$*" >&2; exit 1; fi
  printf 'setup-mcp: warning: %s; the MCP tests will not be run\n' "$*" >&2
  exit 0
}

docker image inspect "$base" >/dev/null 2>&1 || fail "the worker image $base is missing (make sandbox-image)"
base_id=$(docker image inspect -f '{{.Id}}' "$base")
recipe=$(cat "$here/mcp-server/Dockerfile" "$here/mcp-server/server.py" "$0" | sha256sum | cut -c1-16)-${base_id#sha256:}
recipe=${recipe:0:40}
if [ "$(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$image" 2>/dev/null || true)" = "$recipe" ]; then
  exit 0
fi

context=$(mktemp -d "${TMPDIR:-/tmp}/agent-runner-mcp.XXXXXX")
trap 'rm -rf "$context"' EXIT
cp "$here/mcp-server/Dockerfile" "$here/mcp-server/server.py" "$context/"
mkdir "$context/wheels"
# The image's python is Debian's (bookworm: 3.11); the wheels are for it.
py=$(docker run --rm --network none --entrypoint /bin/sh "$base" -c 'cat /etc/debian_version' 2>/dev/null || true)
say "downloading the mcp SDK's wheels from PyPI (image Debian $py)"
python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$context/wheels" mcp >"$context/pip.log" 2>&1 \
  || { tail -n 5 "$context/pip.log" >&2; fail "pip download mcp failed"; }
say "building $image"
DOCKER_BUILDKIT=0 docker build --network host --build-arg "BASE=$base" --label "$label=$recipe" \
    -t "$image" "$context" >"$context/build.log" 2>&1 \
  || { tail -n 20 "$context/build.log" >&2; fail "docker build of $image failed"; }
say "built $image"
