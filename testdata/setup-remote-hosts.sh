#!/usr/bin/env bash
# The image of the emulated remote Docker hosts (SPEC §22 "Tests"),
# agent-runner-test-remote-host:2, built without an image registry: the
# debootstrap base agent-runner-sandbox-base:bookworm (setup-sandbox-image.sh) plus
# this machine's dockerd, containerd, runc, docker-init, socat and docker CLI with
# their libraries, and sshd (Debian's openssh-server, fetched with `apt-get
# download` and unpacked here when this machine has none) for the ssh:// transport
# (:1 had no sshd nor docker CLI). The tests start its containers
# (crates/cli/tests/support/remote_hosts.rs); a test starts sshd in one of them.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=agent-runner-test-remote-host:2
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
copy_with_libraries() { # $1: the program's path here, $2: its path in the image
  mkdir -p "$context/root$(dirname "$2")"
  cp -L "$1" "$context/root$2"
  # The libraries it loads, at their paths (ldd exits 1 on a static binary).
  for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*' || true); do
    mkdir -p "$context/root$(dirname "$lib")"
    [ -e "$context/root$lib" ] || cp -L "$lib" "$context/root$lib"
  done
}
for program in dockerd containerd containerd-shim-runc-v2 runc docker-init socat docker; do
  path=$(command -v "$program") || die "$program is missing (Debian: apt-get install docker.io socat)"
  copy_with_libraries "$path" "/usr/local/bin/$program"
done
sshd=$(command -v sshd || true)
if [ -z "$sshd" ]; then
  command -v apt-get >/dev/null 2>&1 || die "sshd is missing (Debian: apt-get install openssh-server)"
  say "fetching openssh-server with apt-get download (not installed here)"
  mkdir -p "$context/deb"
  (cd "$context/deb" && apt-get download -q openssh-server >/dev/null 2>&1) \
    || { apt-get update -q >/dev/null 2>&1 && (cd "$context/deb" && apt-get download -q openssh-server >/dev/null); } \
    || die "apt-get download openssh-server failed"
  dpkg -x "$context"/deb/openssh-server_*.deb "$context/deb/root"
  sshd="$context/deb/root/usr/sbin/sshd"
fi
copy_with_libraries "$sshd" /usr/sbin/sshd
rm -rf "$context/deb" 
install -m 755 "$here/remote-host/entrypoint.sh" "$context/root/usr/local/bin/remote-host"
cat >"$context/Dockerfile" <<DOCKERFILE
FROM $base
COPY root/ /
# sshd's privilege separation user and directory.
RUN echo 'sshd:x:74:65534:sshd:/run/sshd:/usr/sbin/nologin' >> /etc/passwd
LABEL agent-runner.recipe=$recipe
ENTRYPOINT ["/usr/local/bin/remote-host"]
DOCKERFILE
say "building $image"
docker build -q -t "$image" "$context" >/dev/null
say "built $image"
