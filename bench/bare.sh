#!/usr/bin/env bash
# The baseline for the overhead benchmark: the docker CLI calls a task needs, made by
# hand. One container, one codex run and one test run per prompt, then removal.
# Usage: bare.sh REPO IMAGE TEST_COMMAND PROMPT...
set -euo pipefail
repo=$1 image=$2 test=$3
shift 3
name=bench-bare-$$
docker run -d --rm --init --network none --name "$name" --label agent-runner.task=bench-bare \
  --mount "type=bind,source=$repo,target=/workspace/project" -w /workspace/project \
  -e CODEX_HOME=/tmp "$image" sleep 3600 >/dev/null
for prompt in "$@"; do
  printf '%s\n' "$prompt" | docker exec -i "$name" codex exec --json --skip-git-repo-check \
    --dangerously-bypass-approvals-and-sandbox -C /workspace/project - >/dev/null
  docker exec -w /workspace/project "$name" sh -c "$test" >/dev/null
done
docker rm -f "$name" >/dev/null
