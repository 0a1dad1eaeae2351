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
# BARE_CODEX is the codex to run (default `codex`, on PATH), BARE_CODEX_ARGS more
# of its options (words), BARE_RUN_ARGS more options of `docker run` (words: the
# tools volume's mount, variables): the agent from the tools volume.
# BARE_TRANSPORT=copy (a daemon elsewhere, DOCKER_HOST): nothing of this machine is
# mounted. In: a `git clone` of REPO copied with one `docker cp -a` into a volume
# through a created container. Out, after the container is removed: a container with
# that volume read-only commits the working tree in a private repository borrowing
# the clone's objects and writes `git bundle` of it into a second volume, read out
# with `docker cp` and fetched into REPO as the branch bench-bare; both volumes removed.
# Usage: bare.sh REPO IMAGE TEST_COMMAND PROMPT...
set -euo pipefail
repo=$1 image=$2 test=$3
shift 3
name=bench-bare-$$
case ${BARE_AGENT:-codex} in
  codex)
    agent_env=()
    # shellcheck disable=SC2206 # words, by design
    agent=("${BARE_CODEX:-codex}" exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
      ${BARE_CODEX_ARGS:-} -C /workspace/project -) ;;
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
mount=type=bind,source=$repo,target=/workspace/project
if [ "${BARE_TRANSPORT:-bind}" = copy ]; then
  tmp=$(mktemp -d)
  trap 'docker rm -f "$name" "$name-cp" >/dev/null 2>&1; docker volume rm -f "$name" "$name-out" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
  git clone -q --no-local "$repo" "$tmp/clone"
  docker volume create "$name" >/dev/null
  docker create --name "$name-cp" --network none --mount "type=volume,source=$name,target=/workspace/project" "$image" /none >/dev/null
  docker cp -a "$tmp/clone/." "$name-cp:/workspace/project/"
  docker rm -f "$name-cp" >/dev/null
  mount=type=volume,source=$name,target=/workspace/project
fi
# shellcheck disable=SC2086 # words, by design
docker run -d --rm --init --network "${BARE_NETWORK:-none}" --name "$name" --label agent-runner.task=bench-bare \
  --mount "$mount" -w /workspace/project ${BARE_RUN_ARGS:-} \
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
[ "${BARE_TRANSPORT:-bind}" = copy ] || exit 0
# shellcheck disable=SC2016 # expanded in the container
bundle='set -e
export HOME=/tmp GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0="*"
head=$(git --git-dir=/clones/work/.git rev-parse HEAD)
git init -q /tmp/g
export GIT_DIR=/tmp/g/.git GIT_WORK_TREE=/clones/work GIT_INDEX_FILE=/tmp/g/index
echo /clones/work/.git/objects > "$GIT_DIR/objects/info/alternates"
cd /clones/work
git read-tree "$head"
git add -A
commit=$(git -c user.name=b -c user.email=b@localhost commit-tree "$(git write-tree)" -p "$head" -m work)
echo "$commit" > "$GIT_DIR/refs/heads/work"
git bundle create -q /out/work.bundle refs/heads/work "^$head"'
docker volume create "$name-out" >/dev/null
docker run --rm --init --network none --cap-drop ALL --mount "type=volume,source=$name,target=/clones/work,ro=true" \
  --mount "type=volume,source=$name-out,target=/out" "$image" sh -c "$bundle" >/dev/null
docker create --name "$name-cp" --network none --mount "type=volume,source=$name-out,target=/out" "$image" /none >/dev/null
docker cp "$name-cp:/out/work.bundle" "$tmp/work.bundle"
docker rm -f "$name-cp" >/dev/null
git -C "$repo" fetch -q "$tmp/work.bundle" refs/heads/work:refs/heads/bench-bare
docker volume rm "$name" "$name-out" >/dev/null
