#!/usr/bin/env bash
# `make demo`: a whole task, offline. Scripted Meta (testdata/demo/meta-script.yaml),
# the test worker image, a throw-away git repo. Prints the Task Note.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${AGENT_RUNNER_BIN:-$here/../target/release/agent-runner}
[ -x "$bin" ] || { echo "demo: $bin not built; run \`make build\`" >&2; exit 1; }

bash "$here/setup-docker.sh"

work=$(mktemp -d /tmp/agent-runner-demo.XXXXXX)
repo=$work/repo
mkdir -p "$repo"
cat > "$repo/test.sh" <<'TEST'
out=$(sh greet.sh)
[ "$out" = "Hello, world!" ] || { echo "expected 'Hello, world!', got '$out'"; exit 1; }
TEST
cat > "$work/PRD.md" <<'PRD'
# Greeting

Add `greet.sh`, a POSIX shell script that prints exactly `Hello, world!`.
`sh test.sh` must pass.
PRD
git -C "$repo" init -q
git -C "$repo" add test.sh
git -C "$repo" -c user.name=demo -c user.email=demo@localhost commit -qm "Add the test"

cat > "$work/task.yaml" <<YAML
version: 1
task:
  id: demo-greeting
  title: Add a greeting script
  repo: $repo
  prd:
    path: $work/PRD.md
  test:
    command: sh test.sh
runner:
  meta:
    kind: scripted
    script: $here/demo/meta-script.yaml
  worker:
    docker_image: agent-runner-test-worker:latest
    network: none
YAML

echo "== agent-runner run < $work/task.yaml"
start=$(date +%s%N)
status=0
"$bin" run < "$work/task.yaml" || status=$?
end=$(date +%s%N)
note=$repo/.agent-runner/task-demo-greeting.md
echo "== exit status $status, wall time $(( (end - start) / 1000000 )) ms"
echo "== Task Note: $note"
echo
cat "$note"
echo
echo "== demo workspace: $work (remove it with: rm -rf $work)"
exit "$status"
