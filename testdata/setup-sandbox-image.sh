#!/usr/bin/env bash
# Test environment, part 2: the real worker image agent-runner-codex:latest (real codex
# from npm) for crates/cli/tests/image/real_codex.rs, built by sandbox/build.sh and cached by the hash
# of its recipe, so an unchanged image costs well under a second.
# Under CI (testdata/ci.sh) a failed build fails `make test`. Elsewhere it is a
# warning, and `make test` does not run the tests that need the image (and says so).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=testdata/ci.sh
. "$here/ci.sh"

if bash "$here/../sandbox/build.sh"; then
  exit 0
fi
if in_ci; then
  printf 'setup-sandbox-image: error: %s\n' \
    "CI=$CI: the sandbox image must build (sandbox/build.sh failed above)." >&2
  exit 1
fi
printf 'setup-sandbox-image: warning: %s\n' \
  "the sandbox image was not built; the real-codex tests will not be run. Build it with \`make sandbox-image\` (as root without an image registry: it uses debootstrap)." >&2
