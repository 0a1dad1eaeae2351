#!/bin/bash
# sig2run.sh D1 S1 D2 S2
start=$(date +%s.%N)
/work/wt/attack/target/debug/agent-runner run < sig2/task.yaml > sig2/out 2> sig2/err &
pid=$!
sleep $1; kill -$2 $pid; sleep $3; kill -$4 $pid 2>/dev/null
wait $pid; rc=$?
end=$(date +%s.%N)
sleep 1
c=$(docker ps -aq --filter label=agent-runner.task=sig2 | wc -l)
st=$(grep -m1 '^- State' sig2/repo/.agent-runner/task-sig2.md 2>/dev/null)
printf '%s %s then %s %s: rc=%s took=%.2f containers=%s note=%s out=%s\n' $1 $2 $3 $4 $rc $(echo "$end - $start" | bc) $c "$st" "$(head -c 100 sig2/out)"
