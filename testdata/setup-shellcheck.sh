#!/usr/bin/env bash
# `make lint` runs shellcheck on the shell scripts that run in containers
# (crates/*/src/**/*.sh): installed with apt-get when we are root on Debian; otherwise this
# says it is missing, and `make lint` fails naming it.
set -euo pipefail

say() { printf 'setup-shellcheck: %s\n' "$*" >&2; }

if command -v shellcheck >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  say "missing: shellcheck; install it (Debian: apt-get install shellcheck), else make lint fails"
  exit 1
fi
say "installing shellcheck with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q shellcheck >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q shellcheck >/dev/null; } \
  || { say "error: apt-get install shellcheck failed"; exit 1; }
shellcheck --version | sed -n 2p >&2
