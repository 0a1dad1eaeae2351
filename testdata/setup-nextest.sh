#!/usr/bin/env bash
# cargo-nextest, which `make test` runs the suite with (testdata/test.sh): from
# crates.io when this machine lacks it (a few minutes' build, once).
set -euo pipefail
CARGO=${CARGO:-cargo}
if "$CARGO" nextest --version >/dev/null 2>&1; then
  exit 0
fi
echo "setup-nextest: installing cargo-nextest from crates.io" >&2
"$CARGO" install cargo-nextest --locked
