#!/usr/bin/env bash
# Checks the test cluster (testdata/setup-kubernetes.sh, which must have run) does
# what the Kubernetes backend needs, and prints its figures: `kubectl run` (-i too),
# `exec -i` (10 MB through stdin, exit codes, stdout and stderr apart), `attach -i`
# to a stdinOnce container, `cp` both ways, labels and selectors,
# `activeDeadlineSeconds`, a Guaranteed Pod, Pods with loopback only (neither the
# node nor the API reachable), Pod containers on the node's dockerd only, and
# deletes. One PASS or FAIL line per check; exits with the number of failures.
set -uo pipefail

state=${K8S_STATE:-/var/lib/agent-runner-k8s}
[ -r "$state/cluster.env" ] || { echo "check-kubernetes: no $state/cluster.env; run testdata/setup-kubernetes.sh" >&2; exit 2; }
# shellcheck source=/dev/null
. "$state/cluster.env"
image=${K8S_IMAGES%% *}
ns=$K8S_NAMESPACE
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --context "$K8S_CONTEXT" -n "$ns" "$@"; }
t=$(mktemp -d /tmp/check-kubernetes.XXXXXX)
trap 'rm -rf "$t"' EXIT
fails=0
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
ok() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi; }

k delete pods -l app=check-kubernetes --grace-period=0 --force >/dev/null 2>&1
k wait --for=delete pods -l app=check-kubernetes --timeout=60s >/dev/null 2>&1
cat >"$t/pods.yaml" <<PODS
apiVersion: v1
kind: Pod
metadata: {name: t-sleeper, labels: {app: check-kubernetes, run: t1}}
spec:
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
  - {name: main, image: $image, imagePullPolicy: Never, command: [sh, -c, 'trap "exit 0" TERM; sleep 3600 & wait']}
---
apiVersion: v1
kind: Pod
metadata: {name: t-catter, labels: {app: check-kubernetes, run: t1}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
  - {name: main, image: $image, imagePullPolicy: Never, command: [cat], stdin: true, stdinOnce: true}
---
apiVersion: v1
kind: Pod
metadata: {name: t-deadline, labels: {app: check-kubernetes, run: t2}}
spec:
  restartPolicy: Never
  activeDeadlineSeconds: 5
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
  - {name: main, image: $image, imagePullPolicy: Never, command: [sleep, "3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: t-guaranteed, labels: {app: check-kubernetes, run: t1}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
  - name: main
    image: $image
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources: {limits: {cpu: 100m, memory: 64Mi}}
PODS
s=$(date +%s%N)
k apply -f "$t/pods.yaml" >/dev/null
k wait --for=condition=Ready pod -l run=t1 --timeout=90s >/dev/null
ok $? "3 Pods Ready $(ms "$s") ms after one apply"
s=$(date +%s%N)
k run t-run --image="$image" --image-pull-policy=Never --restart=Never --labels=app=check-kubernetes \
  -- sh -c 'echo from-kubectl-run' >/dev/null
until [ "$(k get pod t-run -o jsonpath='{.status.phase}')" = Succeeded ] || [ "$(ms "$s")" -gt 60000 ]; do sleep 0.2; done
[ "$(k logs t-run)" = from-kubectl-run ]
ok $? "kubectl run --restart=Never: Succeeded and its log $(ms "$s") ms after the run"
s=$(date +%s%N)
out=$(echo piped-in | k run t-run-i -i --rm --quiet --image="$image" --image-pull-policy=Never --restart=Never \
  --labels=app=check-kubernetes -- tr a-z A-Z 2>"$t/run-i.err")
[ "$out" = PIPED-IN ]
ok $? "kubectl run -i --rm: stdin in, stdout back ('$out', $(ms "$s") ms with the deletion)"

sleep 5
r=$(k get pods -l run=t1 -o jsonpath='{range .items[*]}{.status.containerStatuses[0].restartCount}{end}')
[ "$r" = 000 ]
ok $? "no restarts 5 s later (restart counts: $r)"
echo hello-exec | k exec -i t-sleeper -- sh -c 'cat > /tmp/x'
[ "$(k exec t-sleeper -- cat /tmp/x)" = hello-exec ]
ok $? "exec -i: stdin to a file"
head -c 10000000 /dev/urandom >"$t/blob"
s=$(date +%s%N)
k exec -i t-sleeper -- sh -c 'cat > /tmp/blob' <"$t/blob"
e=$(ms "$s")
[ "$(k exec t-sleeper -- sha256sum /tmp/blob | cut -d' ' -f1)" = "$(sha256sum "$t/blob" | cut -d' ' -f1)" ]
ok $? "exec -i: 10 MB through stdin, the same checksum ($e ms)"
k exec t-sleeper -- sh -c 'echo out; echo err >&2; exit 7' >"$t/o" 2>"$t/e"
rc=$?
[ $rc = 7 ] && grep -qx out "$t/o" && grep -qx err "$t/e"
ok $? "exec: exit code ($rc) and stdout and stderr apart"
python3 - "$KUBECTL" "$KUBECONFIG" "$K8S_CONTEXT" "$ns" t-catter >"$t/attach" 2>&1 <<'PY'
import subprocess, sys, time
kubectl, config, context, ns, pod = sys.argv[1:]
p = subprocess.Popen([kubectl, "--kubeconfig", config, "--context", context, "-n", ns,
                      "attach", "-i", "-c", "main", pod],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
time.sleep(1.0)
for i in range(5):
    m = f"ping {i}\n".encode()
    p.stdin.write(m)
    p.stdin.flush()
    assert p.stdout.readline() == m
p.stdin.close()
print("attach rc", p.wait(timeout=20))
PY
rc=$?
[ $rc = 0 ] && grep -q "attach rc 0" "$t/attach"
ok $? "attach -i: 5 lines to cat and back, then EOF ends it ($(tr '\n' ' ' <"$t/attach"))"
sleep 2
ph=$(k get pod t-catter -o jsonpath='{.status.phase}')
[ "$ph" = Succeeded ]
ok $? "a stdinOnce Pod ends once the attach closes stdin (phase $ph)"
mkdir -p "$t/dir/sub"
echo one >"$t/dir/a"
echo two >"$t/dir/sub/b"
cp "$t/blob" "$t/dir/"
s=$(date +%s%N)
k cp "$t/dir" t-sleeper:/tmp/dir >/dev/null 2>&1
e=$(ms "$s")
[ "$(k exec t-sleeper -- cat /tmp/dir/sub/b)" = two ]
ok $? "kubectl cp: a directory (10 MB in it) into a Pod ($e ms)"
k exec t-sleeper -- sh -c 'mkdir -p /tmp/out/d; echo made-in-pod > /tmp/out/d/f'
k cp t-sleeper:/tmp/out "$t/back" >/dev/null 2>&1
[ "$(cat "$t/back/d/f" 2>/dev/null)" = made-in-pod ]
ok $? "kubectl cp: a directory out of a Pod"
k label pod t-sleeper agent-runner.owner=check-42 >/dev/null
[ "$(k get pods -l 'agent-runner.owner=check-42,app=check-kubernetes' -o name)" = pod/t-sleeper ] \
  && [ "$(k get pods -l 'agent-runner.owner!=check-42,run=t1' -o name | wc -l)" = 2 ]
ok $? "labels: one added, selected by equality and by inequality"
k=0
until [ "$(k get pod t-deadline -o jsonpath='{.status.reason}')" = DeadlineExceeded ] || [ $k -gt 150 ]; do
  sleep 0.2
  k=$((k + 1))
done
st=$(k get pod t-deadline -o jsonpath='{.status.phase}/{.status.reason}')
[ "$st" = Failed/DeadlineExceeded ]
ok $? "activeDeadlineSeconds: 5 -> $st"
q=$(k get pod t-guaranteed -o jsonpath='{.status.qosClass}/{.status.phase}')
[ "$q" = Guaranteed/Running ]
ok $? "a Guaranteed Pod runs ($q)"
links=$(k exec t-sleeper -- cat /proc/net/dev | awk -F: 'NR > 2 {gsub(/ /, "", $1); print $1}' | tr '\n' ' ')
[ "$links" = "lo " ]
ok $? "a Pod's links: loopback only ($links)"
node_ip=$(k get node "$K8S_NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
api=${K8S_SERVER#https://}
api=${api%:*}
for target in "$node_ip 6443" "$node_ip 10250" "$api 6443" "127.0.0.1 6443"; do
  # shellcheck disable=SC2086 # "address port"
  out=$(k exec t-sleeper -- nc -w 2 $target </dev/null 2>&1)
  rc=$?
  [ $rc != 0 ]
  ok $? "a Pod cannot connect to $target (exit $rc: $(printf '%s' "$out" | head -n 1))"
done
# The same nc reaches a server on the Pod's own loopback: the refusals above are the network's.
out=$(k exec t-sleeper -- sh -c 'mkdir -p /tmp/www && echo served > /tmp/www/x && httpd -p 127.0.0.1:8080 -h /tmp/www \
  && printf "GET /x HTTP/1.0\r\n\r\n" | nc -w 2 127.0.0.1 8080 | tail -n 1' 2>&1)
[ "$out" = served ]
ok $? "a Pod reaches its own loopback with the same nc ($out)"
[ -z "$(docker ps -a --filter label=io.kubernetes.pod.name --format '{{.Names}}')" ] \
  && [ -n "$(docker exec "$K8S_NODE" docker ps -q --filter label=io.kubernetes.pod.name=t-sleeper)" ]
ok $? "Pod containers run on the node's dockerd, none on the machine's"
s=$(date +%s%N)
k delete pods -l run=t1 --wait=true >/dev/null
e=$(ms "$s")
[ -z "$(k get pods -l run=t1 -o name)" ]
ok $? "delete pods -l run=t1 (3 Pods, $e ms)"
k delete pods -l app=check-kubernetes --wait=true >/dev/null 2>&1
left=$(docker exec "$K8S_NODE" docker ps -q --filter label=io.kubernetes.pod.namespace | wc -l)
echo "  Pod containers left running in the node: $left"

# Figures of the set-up (what it wrote when it built) and disk and memory now.
built=$(dirname "$(dirname "$KUBECTL")")
if [ -r "$built/figures" ]; then
  echo "  build: $(tr '\n' ' ' <"$built/figures")"
fi
echo "  disk: binaries $(du -sh "$built" | cut -f1), node image $(docker image inspect -f '{{.Size}}' agent-runner-test-k8s-node:1 | awk '{printf "%.0f MB", $1 / 1e6}'), node's dockerd $(docker exec "$K8S_NODE" du -sh /var/lib/docker | cut -f1), node's etcd $(docker exec "$K8S_NODE" du -sh /var/lib/etcd | cut -f1)"
echo "  node memory: $(docker stats --no-stream --format '{{.MemUsage}}' "$K8S_NODE")"
echo "fails=$fails"
exit "$fails"
