#!/usr/bin/env bash
# A timestamping kubectl for tracing where a task's time goes on a cluster: named in
# AGENT_RUNNER_KUBECTL (and KUBECTL for bench/k8s_bare.sh), it runs the real kubectl
# (KUBECTL_TRACED, else `kubectl` on PATH) and appends one line per call to
# KUBECTL_TRACE (default /tmp/kubectl-trace.log): start and end (epoch seconds),
# the duration, the exit code and the arguments (the first 140 characters; an
# exec's variables travel on stdin, never here). A call killed by its caller (the
# backend's watch and attach end so) leaves no line.
set -u
log=${KUBECTL_TRACE:-/tmp/kubectl-trace.log}
start=$(date +%s.%N)
"${KUBECTL_TRACED:-kubectl}" "$@"
rc=$?
end=$(date +%s.%N)
args="$*"
args=${args//$'\n'/ }
printf '%s %s %s rc=%s %s\n' "$start" "$end" \
  "$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }')" "$rc" \
  "${args:0:140}" >>"$log"
exit "$rc"
