#!/usr/bin/env bash
# `make demo-pipeline`: the seed's golden pipeline, offline. A throw-away git
# workspace, `task new "TODO アプリを作成して"`, the scripted Task Builder and Meta
# (testdata/demo-pipeline/), the test worker image, `orchestrate --once`, then
# `task list` and `task show`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${AGENT_RUNNER_BIN:-$here/../target/release/agent-runner}
[ -x "$bin" ] || { echo "demo-pipeline: $bin not built; run \`make build\`" >&2; exit 1; }

bash "$here/setup-docker.sh"

work=$(mktemp -d /tmp/agent-runner-demo-pipeline.XXXXXX)
export AGENT_RUNNER_HOME=$work/home
repo=$work/workspace
mkdir -p "$repo"
printf '# Demo workspace\n\nAn empty project for the pipeline demo.\n' > "$repo/README.md"
git -C "$repo" init -q
git -C "$repo" add README.md
git -C "$repo" -c user.name=demo -c user.email=demo@localhost commit -qm "Start"

cat > "$work/defaults.yaml" <<YAML
builder:
  kind: scripted
  script: $here/demo-pipeline/builder-script.yaml
runner:
  meta:
    kind: scripted
    script: $here/demo-pipeline/meta-script.yaml
  worker:
    docker_image: agent-runner-test-worker:latest
    network: none
YAML

run() { echo "\$ agent-runner $*"; "$bin" "$@"; }
run workspace init "$repo" --defaults "$work/defaults.yaml"
echo
id=$("$bin" task new -w "$repo" "TODO アプリを作成して")
echo "\$ agent-runner task new -w $repo \"TODO アプリを作成して\""
echo "$id"
echo
run task run -w "$repo" "$id"
echo
status=0
run orchestrate -w "$repo" --once || status=$?
echo
run task list -w "$repo"
echo
run task show -w "$repo" "$id"
echo
echo "== files in the workspace: $(cd "$repo" && ls | tr '\n' ' ')"
echo "== demo directory: $work (remove it with: rm -rf $work)"
exit "$status"
