#!/usr/bin/env bash
# `make demo-eval`: an evaluation, offline. The demo suite (testdata/demo-eval/
# make-suite.sh: two small projects with planted bugs, held-out graders, the test
# image's fake codex driven by a scripted Meta) checked with `eval validate`, run
# with `eval run --jobs 2`, then run again (nothing left to do: the same table).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${AGENT_RUNNER_BIN:-$here/../target/release/agent-runner}
[ -x "$bin" ] || { echo "demo-eval: $bin not built; run \`make build\`" >&2; exit 1; }

bash "$here/setup-docker.sh"

work=$(mktemp -d /tmp/agent-runner-demo-eval.XXXXXX)
export AGENT_RUNNER_HOME=$work/home
MAX_DURATION_SEC=30 sh "$here/demo-eval/make-suite.sh" "$work/suite" fixed wrong fixed slow

run() { echo "\$ agent-runner $*"; "$bin" "$@"; }
run eval validate "$work/suite/suite.yaml"
echo
run eval run "$work/suite/suite.yaml" -w "$work/eval" --jobs 2
echo
echo "# Again: every run has its outcome, so nothing runs."
run eval run "$work/suite/suite.yaml" -w "$work/eval" --jobs 2
echo
echo "The demo's files are in $work (remove it when done)."
