#!/usr/bin/env bash
# Browser for the web view's tests (crates/cli/tests/docker/browser.rs): Debian's chromium and
# chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver), and a Japanese font so
# that screenshots show the golden test's prompt. Installed with apt-get when we are
# root on Debian; otherwise says what is missing: `make test` then does not run the
# browser tests (and says so), except under CI, where this fails.
set -euo pipefail
# shellcheck source=testdata/ci.sh
. "$(dirname "${BASH_SOURCE[0]}")/ci.sh"

say() { printf 'setup-browser: %s\n' "$*" >&2; }

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
fc-list 2>/dev/null | grep -qi -e 'Noto Sans CJK' -e 'IPAGothic' -e 'IPAexGothic' || missing+=(fonts-ipafont-gothic)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  say "missing: ${missing[*]}; install them (Debian: apt-get install ${missing[*]}), else the browser tests are not run"
  if in_ci; then
    say "error: CI=$CI: the browser tests must run"
    exit 1
  fi
  exit 0
fi
say "installing ${missing[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${missing[@]}" >/dev/null; } \
  || { say "error: apt-get install ${missing[*]} failed"; exit 1; }
/usr/bin/chromium --version >&2
