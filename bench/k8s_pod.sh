#!/usr/bin/env bash
# Pod start → first exec on a cluster by hand, the baseline for the Kubernetes
# backend (SPEC §25 "Figures"): `kubectl create` of a held Pod (stdin, stdinOnce),
# its phase polled until Running, `kubectl attach -i` held, one `kubectl exec -i`,
# then the attach closed and `kubectl delete --wait=false`. Prints each round and
# the median, in milliseconds.
# Usage: bench/k8s_pod.sh [ROUNDS]  (default 5), against the test cluster
# (/var/lib/agent-runner-k8s/cluster.env) or KUBECONFIG/K8S_CONTEXT/K8S_NAMESPACE/
# KUBECTL/IMAGE from the environment.
set -euo pipefail
rounds=${1:-5}
env_file=/var/lib/agent-runner-k8s/cluster.env
if [ -z "${K8S_CONTEXT:-}" ] && [ -r "$env_file" ]; then
  # shellcheck disable=SC1090
  . "$env_file"
fi
export KUBECONFIG
image=${IMAGE:-agent-runner-test-worker:latest}
k() { "${KUBECTL:-kubectl}" --context "$K8S_CONTEXT" --namespace "$K8S_NAMESPACE" --request-timeout=30s "$@"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

starts=() firsts=()
for i in $(seq "$rounds"); do
  name=bench-k8s-pod-$$-$i
  t0=$(now_ms)
  k create -f - >/dev/null <<YAML
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$name", "labels": {"agent-runner.task": "$name"}},
 "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": 300,
  "automountServiceAccountToken": false, "enableServiceLinks": false,
  "containers": [{"name": "worker", "image": "$image", "imagePullPolicy": "IfNotPresent",
   "command": ["/bin/sh", "-c", "cat >/dev/null"], "stdin": true, "stdinOnce": true}]}}
YAML
  until [ "$(k get pod "$name" -o 'jsonpath={.status.phase}')" = Running ]; do sleep 0.25; done
  t1=$(now_ms)
  fifo=$(mktemp -u) && mkfifo "$fifo"
  k attach -i "$name" -c worker <"$fifo" >/dev/null 2>&1 &
  attach=$!
  exec 9>"$fifo"
  echo 'echo first' | k exec -i "$name" -c worker -- /bin/sh >/dev/null
  t2=$(now_ms)
  exec 9>&-
  wait "$attach" || true
  rm -f "$fifo"
  k delete pod "$name" --wait=false >/dev/null
  starts+=($((t1 - t0))) firsts+=($((t2 - t0)))
  printf 'round %d: Pod Running %d ms, first exec done %d ms after create\n' "$i" $((t1 - t0)) $((t2 - t0))
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf 'median of %d: Pod Running %s ms, first exec done %s ms after create\n' \
  "$rounds" "$(median "${starts[@]}")" "$(median "${firsts[@]}")"
