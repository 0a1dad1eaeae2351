#!/usr/bin/env bash
# The baseline for the overhead benchmark: only the calls a task needs, made by hand.
# One container, one agent run and one test run per prompt, then removal. With
# BARE_META_URL and BARE_META_BODIES (a directory of request bodies 1.json, 2.json,
# ... as agent-runner sent them; BARE_META_PATH, default chat/completions, the
# endpoint), the same Meta requests with curl, where agent-runner
# makes them: two before the container starts (plan_task, next_action), then after
# each test the assessment and, but for the last loop, the next next_action.
# BARE_AGENT=claude runs Claude Code instead (`claude -p …`, the variables it is
# given by agent-runner: ANTHROPIC_API_KEY by name, ANTHROPIC_BASE_URL, no
# non-essential traffic, IS_SANDBOX as root); BARE_NETWORK is docker's network
# (default none).
# Usage: bare.sh REPO IMAGE TEST_COMMAND PROMPT...
set -euo pipefail
repo=$1 image=$2 test=$3
shift 3
name=bench-bare-$$
case ${BARE_AGENT:-codex} in
  codex)
    agent_env=()
    agent=(codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
      -C /workspace/project -) ;;
  claude)
    agent_env=(-w /workspace/project -e ANTHROPIC_API_KEY -e "ANTHROPIC_BASE_URL=$ANTHROPIC_BASE_URL"
      -e CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 -e IS_SANDBOX=1)
    agent=(claude -p --output-format stream-json --verbose --dangerously-skip-permissions) ;;
  *) echo "bare.sh: BARE_AGENT is codex or claude" >&2; exit 2 ;;
esac
n=0
meta() {
  [ -n "${BARE_META_URL:-}" ] || return 0
  n=$((n + 1))
  [ -f "$BARE_META_BODIES/$n.json" ] || return 0
  curl -sS -o /dev/null -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
    --data-binary "@$BARE_META_BODIES/$n.json" "$BARE_META_URL/${BARE_META_PATH:-chat/completions}"
}
meta
meta
docker run -d --rm --init --network "${BARE_NETWORK:-none}" --name "$name" --label agent-runner.task=bench-bare \
  --mount "type=bind,source=$repo,target=/workspace/project" -w /workspace/project \
  -e CODEX_HOME=/tmp "$image" sleep 3600 >/dev/null
left=$#
for prompt in "$@"; do
  printf '%s\n' "$prompt" | docker exec -i "${agent_env[@]}" "$name" "${agent[@]}" >/dev/null
  docker exec -w /workspace/project "$name" sh -c "$test" >/dev/null
  meta
  left=$((left - 1))
  [ "$left" = 0 ] || meta
done
docker rm -f "$name" >/dev/null
