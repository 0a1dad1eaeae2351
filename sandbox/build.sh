#!/usr/bin/env bash
# Builds the worker image agent-runner-codex:latest from sandbox/Dockerfile, with or
# without an image registry (`make sandbox-image` runs this):
#   - registry: FROM $SANDBOX_BASE (default node:24-slim), pulled when missing;
#   - no registry (detected, or SANDBOX_BASE=debootstrap): FROM a Debian base made with
#     `debootstrap --variant=minbase` from the machine's Debian mirror and loaded with
#     `docker import` (agent-runner-sandbox-base:<suite>). Needs root.
# Either way codex is the native (static musl) binary of the npm package
# @openai/codex@$CODEX_VERSION and claude the native (glibc) binary of
# @anthropic-ai/claude-code@$CLAUDE_VERSION (its optional dependency
# @anthropic-ai/claude-code-linux-<arch>), both fetched from the npm registry and
# checked against the sha512 pinned here. The recipe's hash (this script, the Dockerfile, the base, the
# mirror, the packages) is kept as an image label: an unchanged recipe is not rebuilt.
#
# Environment:
#   SANDBOX_IMAGE           image to build (default agent-runner-codex:latest)
#   SANDBOX_BASE            auto (default: node:24-slim if present or pullable, else
#                           debootstrap) | debootstrap | an image name (e.g. a mirror's)
#   SANDBOX_EXTRA_PACKAGES  more Debian packages, e.g. "build-essential python3"
#   SANDBOX_REBUILD=1       rebuild although the recipe is unchanged (fresh packages)
#   DEBIAN_MIRROR           debootstrap's mirror (default: the machine's apt sources,
#                           else http://deb.debian.org/debian)
#   DEBIAN_SUITE            debootstrap's suite (default: the machine's release)
#   NPM_CONFIG_REGISTRY     npm registry or mirror for codex and claude (npm's own setting)
#   http_proxy, https_proxy, no_proxy   passed to the build
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=${SANDBOX_IMAGE:-agent-runner-codex:latest}
mode=${SANDBOX_BASE:-auto}
extra_packages=${SANDBOX_EXTRA_PACKAGES:-}
registry_base=node:24-slim
label=agent-runner.sandbox-image
base_label=agent-runner.sandbox-base
started=$(date +%s)

# Pinned: agent-runner's flags and JSONL parsing were checked against this version
# (crates/run/src/doctor.rs checks the image against it too). sha512 of the npm tarballs
# @openai/codex@0.169.0-linux-{x64,arm64} (the registry's dist.integrity, in hex).
CODEX_VERSION=0.169.0
codex_sha512_x64=a34e4dc803820f28123d1a35ca29f3c6f91149d9ac672043f44ee66e99a345a9d27ccf25ca9a96b50804a385df364c21b82476685bbc9a518eb101855d56d5c3
codex_sha512_arm64=359fc36905297109b19aa79eed9f6e0b5af3c371a149ba286b071a4ded4b379624f969629d42867535c98029514fff6881010433d4d6c58cefc4f7e3e46ff116

# Pinned: the flags and stream-json format in testdata/claude/ were recorded with this
# version. sha512 of the npm tarballs @anthropic-ai/claude-code-linux-{x64,arm64}@2.1.330
# (the registry's dist.integrity, in hex): the optional dependency that carries the
# native binary; the main package holds only an installer script.
CLAUDE_VERSION=2.1.330
claude_sha512_x64=f469fe57b0ed27c3359f3b4ff42783565f60dd1b6b7a923bace153c8f4519d97bc0facde6c81ca982ecebc16aeb9cb803f45f493ce520cdfcb3d56728ec19ecd
claude_sha512_arm64=578c9a9c0639100e54a70c113ed8d27ea0db36a0255097959f7358670d808264478dda52b0bb470336f14577e40276e3c135f3134b9e763431518d360113dcb0

say() { printf 'sandbox-image: %s\n' "$*" >&2; }
die() { printf 'sandbox-image: error: %s\n' "$*" >&2; exit 1; }

short_hash() { sha256sum | cut -c1-16; }

# Scratch directories, removed however the script ends.
scratch=()
cleanup() {
  local dir
  for dir in ${scratch[@]+"${scratch[@]}"}; do remove_root "$dir"; done
}
trap cleanup EXIT

new_scratch() { # prefix -> sets `dir`
  dir=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  scratch+=("$dir")
}

image_label() { # image label -> the label's value, empty when absent
  docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true
}

# --- architecture -----------------------------------------------------------------

case "$(dpkg --print-architecture 2>/dev/null || uname -m)" in
  amd64|x86_64) deb_arch=amd64 npm_arch=linux-x64 triple=x86_64-unknown-linux-musl
                codex_sha512=$codex_sha512_x64 claude_sha512=$claude_sha512_x64 ;;
  arm64|aarch64) deb_arch=arm64 npm_arch=linux-arm64 triple=aarch64-unknown-linux-musl
                 codex_sha512=$codex_sha512_arm64 claude_sha512=$claude_sha512_arm64 ;;
  *) die "no codex or claude binary for this architecture ($(uname -m)); both are published for x86_64 and aarch64" ;;
esac

# --- the machine's Debian mirror ----------------------------------------------------

# Prints "URI SUITE" for every enabled `deb` source with the `main` component, from
# one-line (.list) and deb822 (.sources) files alike.
apt_sources() {
  local file
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$file" \
      | awk '$1 == "deb" && NF >= 4 { for (i = 4; i <= NF; i++) if ($i == "main") { print $2, $3; break } }'
  done
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] || continue
    awk '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && comps ~ /(^| )main( |$)/ && enabled !~ /^[Nn]o/) {
          n = split(uris, u, " "); m = split(suites, s, " ")
          for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j]
        }
        types = uris = suites = comps = enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { key = tolower($1); sub(/^[^:]*:[ \t]*/, ""); gsub(/[ \t]+/, " ") }
      key == "types:" { types = $0 } key == "uris:" { uris = $0 }
      key == "suites:" { suites = $0 } key == "components:" { comps = $0 }
      key == "enabled:" { enabled = $0 }
      END { flush() }
    ' "$file"
  done
}

# Sets `mirror` and `suite`: DEBIAN_MIRROR/DEBIAN_SUITE, else the first apt source of
# this machine's release (VERSION_CODENAME), else Debian's own mirror and stable.
debian_source() {
  local codename="" sources
  codename=$( . /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}" ) || true
  suite=${DEBIAN_SUITE:-${codename:-stable}}
  sources=$(apt_sources 2>/dev/null || true)
  mirror=${DEBIAN_MIRROR:-$(awk -v s="$suite" '$2 == s { print $1; exit }' <<<"$sources")}
  mirror=${mirror:-http://deb.debian.org/debian}
  mirror=${mirror%/}
}

# --- recipes and their hashes -------------------------------------------------------

recipe_hash() { # base-description -> hash of everything the image is built from
  { cat "$here/Dockerfile" "${BASH_SOURCE[0]}"; printf '%s\n' "$1" "$deb_arch" "$extra_packages"; } | short_hash
}

debootstrap_base_hash() {
  { sed -n '/^bootstrap_base()/,/^}/p' "${BASH_SOURCE[0]}"; printf '%s\n' "$mirror" "$suite" "$deb_arch"; } | short_hash
}

# --- the debootstrap base ------------------------------------------------------------

ensure_debootstrap() {
  [ "$(id -u)" = 0 ] || die "without an image registry the base is made with debootstrap, which needs root: run \`sudo make sandbox-image\`, or use a registry (SANDBOX_BASE=<image>)"
  command -v debootstrap >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || die "debootstrap is missing and there is no apt-get to install it"
  say "installing debootstrap with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q debootstrap >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q debootstrap >/dev/null; } \
    || die "apt-get install debootstrap failed"
}

# Unmounts whatever debootstrap left mounted under $1, then removes it (not crossing
# into other file systems).
remove_root() {
  local root=$1 mounts
  [ -d "$root" ] || return 0
  mounts=$(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
  [ -z "$mounts" ] || umount -l $mounts 2>/dev/null || true
  rm -rf --one-file-system "$root"
}

# Debian minbase from $mirror/$suite, imported as the image $1 (labelled $2).
bootstrap_base() {
  local name=$1 hash=$2 dir root log
  new_scratch agent-runner-debootstrap
  root=$dir log=$dir/debootstrap.log
  say "bootstrapping Debian $suite ($deb_arch) from $mirror with debootstrap (about a minute)"
  debootstrap --variant=minbase --arch="$deb_arch" --include=ca-certificates \
      "$suite" "$root/fs" "$mirror" >"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; die "debootstrap of $suite from $mirror failed (set DEBIAN_MIRROR/DEBIAN_SUITE to another mirror or release)"; }
  # Slim like Debian's own container images: no docs, man pages or translations.
  cat >"$root/fs/etc/dpkg/dpkg.cfg.d/agent-runner-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
  find "$root/fs/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
  rm -rf "$root/fs/usr/share/man/"* "$root/fs/usr/share/info/"* "$root/fs/usr/share/locale/"*
  rm -rf "$root/fs/var/cache/apt/"*.bin "$root/fs/var/cache/apt/archives/"*.deb "$root/fs/var/lib/apt/lists/"*
  tar -C "$root/fs" --numeric-owner -c . \
    | docker import --change "LABEL $base_label=$hash" - "$name" >/dev/null \
    || die "docker import of the Debian base failed"
  remove_root "$root"
}

ensure_debootstrap_base() { # -> sets `base`
  local hash old
  base="agent-runner-sandbox-base:$suite"
  hash=$(debootstrap_base_hash)
  if [ "$(image_label "$base" "$base_label")" != "$hash" ]; then
    ensure_debootstrap
    old=$(docker image inspect -f '{{.Id}}' "$base" 2>/dev/null || true)
    bootstrap_base "$base" "$hash"
    [ -z "$old" ] || docker rmi "$old" >/dev/null 2>&1 || true
  fi
}

# --- codex and claude -------------------------------------------------------------------

# The npm tarball $2 of package $1 at version $3 into directory $4 as $4/<name>.tgz,
# checked against the sha512 $5; prints the tarball's path.
fetch_npm() {
  local package=$1 name=$2 version=$3 dir=$4 sha512=$5 spec tgz
  spec="$package@$version"
  tgz="$dir/$name.tgz"
  if command -v npm >/dev/null 2>&1; then
    say "fetching $spec with npm (registry: $(npm config get registry 2>/dev/null))"
    (cd "$dir" && npm pack --silent "$spec" >/dev/null 2>"$dir/npm.err") \
      || { tail -n 5 "$dir/npm.err" >&2; die "npm pack $spec failed (NPM_CONFIG_REGISTRY points npm at a mirror)"; }
  elif command -v curl >/dev/null 2>&1; then
    local registry=${NPM_CONFIG_REGISTRY:-${npm_config_registry:-https://registry.npmjs.org/}}
    local url="${registry%/}/$package/-/${package#*/}-$version.tgz"
    say "fetching $url with curl"
    curl -fsSL --retry 3 -o "$tgz" "$url" || die "cannot download $url (NPM_CONFIG_REGISTRY points at a mirror)"
  else
    die "neither npm nor curl is installed: one of them is needed to fetch $package from the npm registry"
  fi
  [ -f "$tgz" ] || die "npm pack did not produce $tgz"
  [ "$(sha512sum "$tgz" | cut -d' ' -f1)" = "$sha512" ] \
    || die "$spec does not match its pinned sha512: the registry or mirror served something else"
  printf '%s\n' "$tgz"
}

# codex's native binary for this architecture, unpacked as $1/codex (bin/codex and its
# resources). Its versions carry the platform: @openai/codex@<version>-linux-x64.
fetch_codex() {
  local dir=$1 tgz
  tgz=$(fetch_npm @openai/codex "openai-codex-$CODEX_VERSION-$npm_arch" "$CODEX_VERSION-$npm_arch" "$dir" "$codex_sha512")
  mkdir -p "$dir/codex"
  tar -xzf "$tgz" -C "$dir/codex" --strip-components=3 "package/vendor/$triple" \
    || die "cannot unpack $tgz"
  rm -f "$tgz"
  [ -x "$dir/codex/bin/codex" ] || die "@openai/codex@$CODEX_VERSION-$npm_arch has no bin/codex for $triple"
}

# claude's native binary (one self-contained executable) for this architecture,
# unpacked as $1/claude/claude. The package @anthropic-ai/claude-code itself would only
# pick this optional dependency at install time (and needs Node.js to do so).
fetch_claude() {
  local dir=$1 package="@anthropic-ai/claude-code-$npm_arch" tgz
  tgz=$(fetch_npm "$package" "anthropic-ai-claude-code-$npm_arch-$CLAUDE_VERSION" "$CLAUDE_VERSION" "$dir" "$claude_sha512")
  mkdir -p "$dir/claude"
  tar -xzf "$tgz" -C "$dir/claude" --strip-components=1 package/claude \
    || die "cannot unpack $tgz"
  rm -f "$tgz"
  [ -x "$dir/claude/claude" ] || die "$package@$CLAUDE_VERSION has no executable claude"
}

# --- the image -------------------------------------------------------------------------

build_image() { # base hash
  local base=$1 hash=$2 dir context old size
  new_scratch agent-runner-sandbox
  context=$dir
  fetch_codex "$context"
  fetch_claude "$context"
  cp "$here/Dockerfile" "$context/Dockerfile"
  local args=(--network host --build-arg "BASE=$base" --build-arg "EXTRA_PACKAGES=$extra_packages"
              --label "$label=$hash" -t "$image")
  local proxy
  for proxy in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -z "${!proxy:-}" ] || args+=(--build-arg "$proxy")
  done
  old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  say "building $image FROM $base"
  DOCKER_BUILDKIT=0 docker build "${args[@]}" "$context" >"$context/build.log" 2>&1 \
    || { tail -n 30 "$context/build.log" >&2; die "docker build of $image failed"; }
  # The image it replaces would stay behind untagged.
  [ -z "$old" ] || [ "$old" = "$(docker image inspect -f '{{.Id}}' "$image")" ] \
    || docker rmi "$old" >/dev/null 2>&1 || true
  size=$(docker image inspect -f '{{.Size}}' "$image")
  say "built $image in $(( $(date +%s) - started )) s ($(( size / 1000000 )) MB)"
}

main() {
  docker info >/dev/null 2>&1 || die "no Docker daemon is reachable (\`docker info\` failed)"
  debian_source
  local deb_hash registry_hash current
  deb_hash=$(recipe_hash "debootstrap $mirror $suite")
  case "$mode" in
    auto) registry_hash=$(recipe_hash "registry $registry_base") ;;
    debootstrap) registry_hash=none ;;
    *) registry_base=$mode; registry_hash=$(recipe_hash "registry $mode"); deb_hash=none ;;
  esac
  current=$(image_label "$image" "$label")
  if [ -z "${SANDBOX_REBUILD:-}" ] && [ -n "$current" ] \
      && { [ "$current" = "$deb_hash" ] || [ "$current" = "$registry_hash" ]; }; then
    say "$image is up to date ($current)"
    return 0
  fi

  # One build at a time on this machine; whoever waited finds the image built.
  local lock="${TMPDIR:-/tmp}/agent-runner-sandbox-build.lock"
  if command -v flock >/dev/null 2>&1 && { exec 9>>"$lock"; } 2>/dev/null; then
    flock 9
    current=$(image_label "$image" "$label")
    if [ -z "${SANDBOX_REBUILD:-}" ] && [ -n "$current" ] \
        && { [ "$current" = "$deb_hash" ] || [ "$current" = "$registry_hash" ]; }; then
      say "$image is up to date ($current)"
      return 0
    fi
  fi

  if [ "$registry_hash" != none ]; then
    if docker image inspect "$registry_base" >/dev/null 2>&1 \
        || docker pull -q "$registry_base" >/dev/null 2>&1; then
      build_image "$registry_base" "$registry_hash"
      return 0
    fi
    [ "$mode" = auto ] || die "cannot pull $registry_base (no registry reachable?); SANDBOX_BASE=debootstrap builds without one"
    say "no registry answers for $registry_base: building on a Debian base made with debootstrap"
  fi
  local base
  ensure_debootstrap_base
  build_image "$base" "$deb_hash"
}

main "$@"
