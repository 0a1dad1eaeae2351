#!/usr/bin/env bash
# The image of the emulated remote Docker hosts (SPEC §22 "Tests"),
# agent-runner-test-remote-host:1, built without an image registry: the
# debootstrap base agent-runner-sandbox-base:bookworm (setup-sandbox-image.sh) plus
# this machine's dockerd, containerd, runc, docker-init and socat with their
# libraries. The tests start its containers (crates/cli/tests/support/remote_hosts.rs).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=agent-runner-test-remote-host:1
base=agent-runner-sandbox-base:bookworm

say() { printf 'setup-remote-hosts: %s\n' "$*" >&2; }
die() { printf 'setup-remote-hosts: error: %s\n' "$*" >&2; exit 1; }

recipe=$(cat "$0" "$here/remote-host/entrypoint.sh" | sha256sum | cut -c1-16)
if [ "$(docker image inspect --format '{{index .Config.Labels "agent-runner.recipe"}}' "$image" 2>/dev/null)" = "$recipe" ]; then
  say "$image is up to date"
  exit 0
fi
docker image inspect "$base" >/dev/null 2>&1 \
  || die "$base is missing; \`bash testdata/setup-sandbox-image.sh\` builds it"
if ! command -v socat >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    die "socat is missing (Debian: apt-get install socat)"
  fi
  say "installing socat with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q socat >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q socat >/dev/null; } \
    || die "apt-get install socat failed"
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/root/usr/local/bin"
for program in dockerd containerd containerd-shim-runc-v2 runc docker-init socat; do
  path=$(command -v "$program") || die "$program is missing (Debian: apt-get install docker.io socat)"
  cp -L "$path" "$context/root/usr/local/bin/$program"
  # The libraries it loads, at their paths (ldd exits 1 on a static binary).
  for lib in $(ldd "$path" 2>/dev/null | grep -o '/[^ ]*' || true); do
    mkdir -p "$context/root$(dirname "$lib")"
    [ -e "$context/root$lib" ] || cp -L "$lib" "$context/root$lib"
  done
done
install -m 755 "$here/remote-host/entrypoint.sh" "$context/root/usr/local/bin/remote-host"
cat >"$context/Dockerfile" <<DOCKERFILE
FROM $base
COPY root/ /
LABEL agent-runner.recipe=$recipe
ENTRYPOINT ["/usr/local/bin/remote-host"]
DOCKERFILE
say "building $image"
docker build -q -t "$image" "$context" >/dev/null
say "built $image"
