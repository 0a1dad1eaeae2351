#!/usr/bin/env bash
# The baseline of bench/kubernetes.py: the calls a task on a cluster needs, made by
# hand with kubectl (SPEC §25 "Figures"). The same Meta requests as agent-runner's
# (curl, from BARE_META_URL and the bodies in BARE_META_BODIES, where agent-runner
# makes them); a held Pod of IMAGE (`kubectl create`, stdin and stdinOnce, its phase
# polled until Running, `kubectl attach -i` held as agent-runner's lifeline); a
# `git clone` of REPO streamed in by one `kubectl exec -i … tar -x`; per prompt one
# `kubectl exec -i` of the image's codex and one of the test; then the work committed
# on a private index and bundled by one exec, the bundle read out by another and
# fetched into REPO as the branch bench-bare; the attach closed and `kubectl delete
# --wait=false`.
# Usage: k8s_bare.sh REPO IMAGE TEST_COMMAND PROMPT...  (KUBECTL, K8S_CONTEXT,
# K8S_NAMESPACE and KUBECONFIG from the environment: the test cluster's cluster.env)
set -euo pipefail
repo=$1 image=$2 test=$3
shift 3
name=bench-k8s-bare-$$
k() { "${KUBECTL:-kubectl}" --context "$K8S_CONTEXT" --namespace "$K8S_NAMESPACE" --request-timeout=60s "$@"; }
n=0
meta() {
  [ -n "${BARE_META_URL:-}" ] || return 0
  n=$((n + 1))
  [ -f "$BARE_META_BODIES/$n.json" ] || return 0
  curl -sS -o /dev/null -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
    --data-binary "@$BARE_META_BODIES/$n.json" "$BARE_META_URL/chat/completions"
}
tmp=$(mktemp -d)
attach=
cleanup() {
  exec 9>&- 2>/dev/null || true
  [ -z "$attach" ] || wait "$attach" 2>/dev/null || true
  k delete pod "$name" --wait=false --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
meta
meta
k create -f - >/dev/null <<YAML
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$name", "labels": {"agent-runner.task": "bench-bare"}},
 "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": 600,
  "automountServiceAccountToken": false, "enableServiceLinks": false,
  "terminationGracePeriodSeconds": 2,
  "containers": [{"name": "worker", "image": "$image", "imagePullPolicy": "IfNotPresent",
   "command": ["/bin/sh", "-c", "cat >/dev/null"], "stdin": true, "stdinOnce": true,
   "volumeMounts": [{"name": "work", "mountPath": "/workspace/project"}]}],
  "volumes": [{"name": "work", "emptyDir": {}}]}}
YAML
until [ "$(k get pod "$name" -o 'jsonpath={.status.phase}')" = Running ]; do sleep 0.25; done
mkfifo "$tmp/lifeline"
k attach -i "$name" -c worker <"$tmp/lifeline" >/dev/null 2>&1 &
attach=$!
exec 9>"$tmp/lifeline"
git clone -q --no-local "$repo" "$tmp/clone"
tar -C "$tmp/clone" -c . | k exec -i "$name" -c worker -- tar -x -C /workspace/project
# The clock of bench/kubernetes.py's "start to the first worker run".
echo "bare: first agent at $(date +%s.%N)" >&2
left=$#
for prompt in "$@"; do
  printf '%s\n' "$prompt" | k exec -i "$name" -c worker -- sh -c \
    'cd /workspace/project && CODEX_HOME=/tmp exec codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -' >/dev/null
  k exec "$name" -c worker -- sh -c "cd /workspace/project && $test" >/dev/null
  meta
  left=$((left - 1))
  [ "$left" = 0 ] || meta
done
# shellcheck disable=SC2016 # expanded in the Pod
bundle='set -e
export HOME=/tmp GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0="*"
head=$(git --git-dir=/workspace/project/.git rev-parse HEAD)
git init -q /tmp/g
export GIT_DIR=/tmp/g/.git GIT_WORK_TREE=/workspace/project GIT_INDEX_FILE=/tmp/g/index
echo /workspace/project/.git/objects > "$GIT_DIR/objects/info/alternates"
cd /workspace/project
git read-tree "$head"
git add -A
commit=$(git -c user.name=b -c user.email=b@localhost commit-tree "$(git write-tree)" -p "$head" -m work)
echo "$commit" > "$GIT_DIR/refs/heads/work"
git bundle create -q /tmp/work.bundle refs/heads/work "^$head"'
k exec "$name" -c worker -- sh -c "$bundle" >/dev/null
k exec "$name" -c worker -- cat /tmp/work.bundle >"$tmp/work.bundle"
git -C "$repo" fetch -q "$tmp/work.bundle" refs/heads/work:refs/heads/bench-bare
