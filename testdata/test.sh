#!/usr/bin/env bash
# `make test`: the whole suite, then what was not run and why. Tests that need what
# a machine may lack say so with #[ignore = "needs WHAT"] (WHAT: root, chromium,
# sandbox-image, joined by " and "; crates/cli/tests/support/prerequisite.rs checks them in the
# test). Under CI (testdata/ci.sh) all of them run, so a missing prerequisite fails
# its test; elsewhere those whose prerequisites are here run, the others are named.
# TEST_WITHOUT="chromium root" counts those as missing, to see what a machine
# without them runs (ignored under CI).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=testdata/ci.sh
. testdata/ci.sh

CARGO=${CARGO:-cargo}
say() { printf 'make test: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }

# Whether prerequisite $1 is here; the same checks as crates/cli/tests/support/prerequisite.rs.
have() {
  case " ${TEST_WITHOUT:-} " in *" $1 "*) return 1 ;; esac
  case $1 in
    root) [ "$(id -u)" = 0 ] && [ -x /usr/bin/setpriv ] ;;
    chromium) [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] ;;
    sandbox-image)
      docker image inspect -f '{{index .Config.Labels "agent-runner.sandbox-image"}}' \
        agent-runner-codex:latest 2>/dev/null | grep -q . ;;
    *) return 1 ;;
  esac
}

# What to do about a missing prerequisite $1.
how() {
  case " ${TEST_WITHOUT:-} " in *" $1 "*) echo "left out by TEST_WITHOUT"; return ;; esac
  case $1 in
    root) echo "run the tests as root, with setpriv (util-linux)" ;;
    chromium) echo "/usr/bin/chromium and /usr/bin/chromedriver are missing; \`make test-env\` installs them as root" ;;
    sandbox-image) echo "agent-runner-codex:latest is not built; \`make sandbox-image\`" ;;
  esac
}

# "<test> <prerequisite>..." for every #[ignore] test in crates/cli/tests/*.rs; an #[ignore]
# that does not say what it needs is an error (the suite must not hide tests).
grep -rln '#\[ignore' crates/*/src >/dev/null 2>&1 && die "crates/*/src/ has #[ignore] tests: keep tests that need prerequisites in crates/cli/tests/*.rs"
ignored=()
for file in crates/cli/tests/*.rs; do
  needs=
  while IFS= read -r line; do
    case $line in
      '#[ignore'*)
        needs=${line#'#[ignore = "needs '}
        needs=${needs%'"]'}
        if [ "$needs" = "$line" ] || [ -z "$needs" ]; then
          die "$file: \`$line\`: write #[ignore = \"needs WHAT\"] (WHAT: root, chromium, sandbox-image)"
        fi
        for what in ${needs// and / }; do
          case $what in root | chromium | sandbox-image) ;; *) die "$file: \`$line\`: unknown prerequisite $what" ;; esac
        done
        ;;
      'fn '*)
        if [ -n "$needs" ]; then
          name=${line#fn }
          ignored+=("${name%%(*} ${needs// and / }")
          needs=
        fi
        ;;
    esac
  done <"$file"
done
"$CARGO" test --locked --no-run
listed=$("$CARGO" test --locked -q -- --list --ignored 2>/dev/null | grep -c ': test$' || true)
[ "$listed" -eq "${#ignored[@]}" ] \
  || die "cargo lists $listed ignored tests, crates/cli/tests/*.rs declares ${#ignored[@]} (an #[ignore] test must be a top-level fn)"

# The tests whose prerequisites are not all here (not under CI: there all run).
skip=()
declare -A not_run=()
if ! in_ci; then
  for entry in "${ignored[@]}"; do
    read -r name needs <<<"$entry"
    for what in $needs; do
      if ! have "$what"; then
        skip+=(--skip "$name")
        not_run[$what]="${not_run[$what]:-} $name"
        break
      fi
    done
  done
fi
# --skip takes names across all test binaries: a skipped name must be only ignored tests'.
if [ ${#skip[@]} -gt 0 ]; then
  all=$("$CARGO" test --locked -q -- --list 2>/dev/null | grep ': test$' || true)
  for ((i = 1; i < ${#skip[@]}; i += 2)); do
    name=${skip[i]}
    declared=$(printf '%s\n' "${ignored[@]}" | grep -c "^$name " || true)
    [ "$(grep -c "^$name: test$" <<<"$all")" -eq "$declared" ] \
      || die "test $name is both ignored (needs a prerequisite) and not, in different files: rename one"
  done
fi

started=$(date +%s)
status=0
if [ ${#skip[@]} -eq 0 ]; then
  "$CARGO" test --locked --no-fail-fast -- --include-ignored || status=$?
else
  "$CARGO" test --locked --no-fail-fast -- --include-ignored --exact "${skip[@]}" || status=$?
fi
took=$(($(date +%s) - started))

count=$((${#skip[@]} / 2))
if [ "$count" -eq 0 ]; then
  say "all ${#ignored[@]} tests that need root, chromium or the sandbox image were run (${took} s)"
else
  say "$count of ${#ignored[@]} tests that need a prerequisite were NOT run (${took} s):"
  for what in "${!not_run[@]}"; do
    read -r -a names <<<"${not_run[$what]}"
    say "  ${#names[@]} need $what ($(how "$what")):${not_run[$what]}"
  done
  say "  (under CI=true all of them run, and fail where a prerequisite is missing)"
fi
exit "$status"
