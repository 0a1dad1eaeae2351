#!/usr/bin/env bash
# Test environment: makes a Docker daemon reachable and builds the test worker image
# `agent-runner-test-worker:latest` (FROM scratch: static busybox, Debian's git with its
# libraries, and testdata's fake codex), plus the variants `:nogit` and `:nocodex`.
# Nothing is pulled: no image registry is needed.
#
# On a Debian machine where we are root, a missing daemon is installed (docker.io,
# busybox-static) and started detached, its data on a tmpfs (below); its log is
# $AGENT_RUNNER_DOCKERD_LOG. A daemon already running is used as it is.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=${AGENT_RUNNER_TEST_IMAGE:-agent-runner-test-worker:latest}
dockerd_log=${AGENT_RUNNER_DOCKERD_LOG:-/tmp/agent-runner-dockerd.log}

say() { printf 'setup-docker: %s\n' "$*" >&2; }
die() { printf 'setup-docker: error: %s\n' "$*" >&2; exit 1; }

can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

apt_install() {
  say "installing $* with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "$@" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$@" >/dev/null; } \
    || die "apt-get install $* failed"
}

static_busybox() {
  local candidate
  for candidate in /bin/busybox /usr/bin/busybox; do
    [ -x "$candidate" ] || continue
    # ldd exits 1 on a static binary; only its message tells.
    case "$(LC_ALL=C ldd "$candidate" 2>&1 || true)" in
      *"not a dynamic executable"*) echo "$candidate"; return 0 ;;
    esac
  done
  return 1
}

ensure_daemon() {
  if docker info >/dev/null 2>&1; then return 0; fi
  if ! can_install; then
    die "no Docker daemon is reachable (\`docker info\` failed). Start one (e.g. \`sudo systemctl start docker\`), or run this script as root on Debian to have it installed and started."
  fi
  command -v dockerd >/dev/null 2>&1 || apt_install docker.io
  command -v docker >/dev/null 2>&1 || die "docker CLI missing after installing docker.io"
  local root_flag=()
  if [ "${AGENT_RUNNER_DOCKERD_TMPFS:-1}" != 0 ]; then
    # The daemon started here keeps its images, containers and volumes in memory.
    # The suite starts and removes thousands of containers, and on a disk each one
    # waits for the daemon's fsyncs (measured on these machines: a container's
    # start and removal 470-600 ms with the data on disk, 295-345 ms on a tmpfs;
    # a synced 4 KiB write 5 ms). What is in it lasts until the machine restarts.
    local root=${AGENT_RUNNER_DOCKERD_ROOT:-/var/lib/agent-runner-docker}
    mkdir -p "$root"
    if ! mountpoint -q "$root"; then
      mount -t tmpfs -o "size=${AGENT_RUNNER_DOCKERD_TMPFS_SIZE:-60%},mode=0711" agent-runner-docker "$root" \
        || die "could not mount a tmpfs on $root (AGENT_RUNNER_DOCKERD_TMPFS=0 keeps the daemon's data on disk)"
    fi
    root_flag=(--data-root "$root")
  fi
  say "starting dockerd ${root_flag[*]} (log: $dockerd_log)"
  # Detached and with its own output, so it does not hold the caller's pipes open.
  setsid dockerd "${root_flag[@]}" >"$dockerd_log" 2>&1 </dev/null &
  local waited=0
  until docker info >/dev/null 2>&1; do
    sleep 1; waited=$((waited + 1))
    if [ $waited -ge 60 ]; then
      tail -n 20 "$dockerd_log" >&2 || true
      die "dockerd did not answer within 60 s (log: $dockerd_log)"
    fi
  done
  say "dockerd is up after ${waited}s"
}

# The files of Debian's git that the image needs: the binary (also as the exec-path
# copy it re-runs for helpers such as pack-objects) and the shared libraries it links.
git_files() {
  local git=/usr/bin/git
  [ -x "$git" ] || { can_install || die "git is needed in the test image: install Debian's git"; apt_install git; }
  echo "$git"
  LC_ALL=C ldd "$git" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }'
}

ensure_image() {
  local busybox
  if ! busybox=$(static_busybox); then
    can_install || die "a static busybox is needed to build $image: install busybox-static"
    apt_install busybox-static
    busybox=$(static_busybox) || die "no static busybox found after installing busybox-static"
  fi
  local files
  files=$(git_files)
  # Rebuild only when an input changed: the inputs' hash is kept as an image label.
  local hash current
  hash=$( { cat "$here/worker-image/Dockerfile" "$here/worker-image/codex" "$busybox"; echo "$files" | xargs cat; } | sha256sum | cut -c1-16)
  current=$(docker image inspect -f '{{index .Config.Labels "agent-runner.test-image"}}' "$image" 2>/dev/null || true)
  if [ "$current" != "$hash" ]; then
    local context
    context=$(mktemp -d)
    trap 'rm -rf "$context"' RETURN
    cp "$here/worker-image/Dockerfile" "$here/worker-image/codex" "$context/"
    cp "$busybox" "$context/busybox"
    mkdir -p "$context/gitroot/usr/lib/git-core"
    local f
    for f in $files; do
      mkdir -p "$context/gitroot$(dirname "$f")"
      cp -L "$f" "$context/gitroot$f"
    done
    cp /usr/bin/git "$context/gitroot/usr/lib/git-core/git"
    # An empty template directory keeps `git init` quiet.
    mkdir -p "$context/gitroot/usr/share/git-core/templates"
    chmod 755 "$context/codex" "$context/busybox"
    say "building $image"
    DOCKER_BUILDKIT=0 docker build -q --label "agent-runner.test-image=$hash" -t "$image" "$context" >/dev/null 2>"$context/build.err" \
      || { cat "$context/build.err" >&2; die "docker build of $image failed"; }
  fi
  # Variants for tests of a broken image: without git, without codex.
  local base=${image%:*} variant
  for variant in nogit:"/usr/bin/git /usr/lib/git-core" nocodex:/usr/local/bin/codex; do
    local tag=${variant%%:*} paths=${variant#*:}
    current=$(docker image inspect -f '{{index .Config.Labels "agent-runner.test-image"}}' "$base:$tag" 2>/dev/null || true)
    [ "$current" = "$hash" ] && continue
    say "building $base:$tag"
    printf 'FROM %s\nRUN rm -rf %s\n' "$image" "$paths" \
      | DOCKER_BUILDKIT=0 docker build -q --label "agent-runner.test-image=$hash" -t "$base:$tag" - >/dev/null 2>&1 \
      || die "docker build of $base:$tag failed"
  done
}

ensure_daemon
ensure_image
