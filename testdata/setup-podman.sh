#!/usr/bin/env bash
# The podman tests (crates/cli/tests/docker/podman.rs, SPEC §24) run agent-runner with
# a `docker` on PATH that is podman: podman and catatonit (its `--init`) are installed
# with apt-get when we are root on Debian, and the test worker image is copied from
# the docker daemon into podman's store (`docker save | podman load`) when podman
# lacks it or has another one. Without them those tests say what is missing.
set -euo pipefail

say() { printf 'setup-podman: %s\n' "$*" >&2; }
IMAGE=agent-runner-test-worker:latest

if ! command -v podman >/dev/null 2>&1 || [ ! -x /usr/libexec/podman/catatonit ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "missing: podman or catatonit (Debian: apt-get install podman catatonit); the podman tests will say so"
    exit 0
  fi
  say "installing podman and catatonit with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q podman catatonit >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q podman catatonit >/dev/null; } \
    || { say "error: apt-get install podman catatonit failed"; exit 1; }
fi
ours=$(docker image inspect --format '{{.Id}}' "$IMAGE")
theirs=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if [ "sha256:$theirs" != "$ours" ] && [ "$theirs" != "$ours" ]; then
  say "copying $IMAGE into podman's store"
  docker save "$IMAGE" | podman load -q >/dev/null
fi
podman --version >&2
