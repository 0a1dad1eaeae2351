#!/usr/bin/env bash
# Figures of the Kubernetes test cluster (testdata/setup-kubernetes.sh), not part of
# `make bench`: the set-up from no node with the binaries cached (BENCH_RUNS times,
# default 3), again with the node up, then testdata/check-kubernetes.sh (its checks
# and figures), and the node removed at the end. BENCH_K8S_UNCACHED=1 first times a
# whole build into an empty cache (minutes; the cache in use is left alone).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${BENCH_RUNS:-3}
secs() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
# The figures line setup-kubernetes.sh prints last.
figures() { grep -o 'ready: .*;' "$1" | sed 's/^ready: //; s/;$//'; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if [ "${BENCH_K8S_UNCACHED:-0}" = 1 ]; then
  cache=$(mktemp -d /var/tmp/bench-k8s-cache.XXXXXX)
  bash testdata/setup-kubernetes.sh --down
  s=$(date +%s%N)
  K8S_CACHE=$cache bash testdata/setup-kubernetes.sh 2>"$log"
  echo "set-up, nothing cached: $(secs "$s") s ($(figures "$log"); $(grep -o 'built in .*' "$log"))"
  echo "  binaries: $(du -sh "$cache" | cut -f1)"
  rm -rf "$cache"
fi
for i in $(seq "$runs"); do
  bash testdata/setup-kubernetes.sh --down
  s=$(date +%s%N)
  bash testdata/setup-kubernetes.sh 2>"$log"
  echo "set-up $i, binaries cached, no node: $(secs "$s") s ($(figures "$log"))"
done
s=$(date +%s%N)
bash testdata/setup-kubernetes.sh 2>"$log"
echo "set-up with the node up: $(secs "$s") s ($(figures "$log"))"
bash testdata/check-kubernetes.sh
bash testdata/setup-kubernetes.sh --down
