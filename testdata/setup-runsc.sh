#!/usr/bin/env bash
# Test environment: gVisor's runtime `runsc` (Debian's package) registered with the
# test daemon as the runtime `runsc`, for the tests that run the sandbox under it
# (crates/cli/tests/docker/boundary.rs and egress.rs, `needs!(Runsc)`).
#
# The daemon is not restarted: it may be running other work. The runtime goes into
# its configuration file (/etc/docker/daemon.json, merged, or $AGENT_RUNNER_DOCKERD_CONFIG)
# and dockerd is told to reload it (SIGHUP: `runtimes` is one of the settings it
# reloads), with two flags: `--network=none`, since gVisor refuses to set up its own
# network stack when the container's namespace looks like the host's (it does on this
# kind of machine: "cannot run with network enabled in root network namespace"), and
# the sandbox's own is `--network none` anyway (the egress proxy is reached over a unix
# socket); and `--host-uds=open`, which lets the container connect to that socket, a
# host unix socket in a bind-mounted directory (gVisor refuses it by default). Not
# `--oci-seccomp`: with it this runsc breaks glibc's threads (docs/tools-and-runtimes.md).
# Then a container is run under runsc; when that fails, the reason is printed and
# the runsc tests' prerequisite says it (CI fails, elsewhere a warning).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=testdata/ci.sh
. "$here/ci.sh"
config=${AGENT_RUNNER_DOCKERD_CONFIG:-/etc/docker/daemon.json}
image=${AGENT_RUNNER_TEST_IMAGE:-agent-runner-test-worker:latest}
runtime=runsc

say() { printf 'setup-runsc: %s\n' "$*" >&2; }
fail() {
  if in_ci; then printf 'setup-runsc: error: %s\n' "$*" >&2; exit 1; fi
  printf 'setup-runsc: warning: %s; the tests under runsc will not be run\n' "$*" >&2
  exit 0
}

known() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q "\"$runtime\""; }

if ! command -v runsc >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    fail "runsc is not installed (Debian: apt-get install runsc)"
  fi
  say "installing runsc with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q runsc >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q runsc >/dev/null; } \
    || fail "apt-get install runsc failed"
fi
path=$(command -v runsc)

if ! known; then
  [ "$(id -u)" = 0 ] || fail "the daemon does not know the runtime $runtime, and only root can register it ($config)"
  pid=$(pidof dockerd || true)
  case "$pid" in
    "" | *" "*) fail "cannot tell which dockerd to reload (pidof dockerd: '${pid}')" ;;
  esac
  # A daemon started with --config-file reads that file instead: ours would be ignored.
  if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- '--config-file'; then
    fail "dockerd runs with its own --config-file; add {\"runtimes\": {\"$runtime\": {\"path\": \"$path\"}}} to it and reload it (kill -HUP $pid)"
  fi
  mkdir -p "$(dirname "$config")"
  python3 - "$config" "$runtime" "$path" <<'EOF' || fail "cannot add the runtime to $config"
import json, os, sys
config, name, path = sys.argv[1:]
try:
    with open(config) as f:
        settings = json.load(f)
except FileNotFoundError:
    settings = {}
settings.setdefault("runtimes", {})[name] = {"path": path, "runtimeArgs": ["--network=none", "--host-uds=open"]}
tmp = config + ".agent-runner.tmp"
with open(tmp, "w") as f:
    json.dump(settings, f, indent=2)
    f.write("\n")
os.replace(tmp, config)
EOF
  say "registered $runtime ($path) in $config; reloading dockerd ($pid) with SIGHUP"
  kill -HUP "$pid"
  for _ in $(seq 1 50); do known && break; sleep 0.1; done
  known || fail "dockerd did not take the runtime $runtime after SIGHUP (see its log)"
fi

# Can it run a container here? (gVisor needs a platform the kernel offers it.)
if ! out=$(timeout 60 docker run --rm --runtime "$runtime" --network none \
    --label agent-runner.task=setup-runsc "$image" /bin/sh -c 'echo ok' 2>&1) \
    || [ "$out" != ok ]; then
  fail "runsc cannot run a container on this machine: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
fi
say "runsc runs containers ($(runsc --version 2>/dev/null | head -n 1))"
