#!/bin/bash
# The test cluster's node (testdata/setup-kubernetes.sh): PID 1's child (`docker run
# --init`) of a container on `--network host`. Only the relay below stays in the
# machine's network namespace, listening on 127.0.0.N:6443 and forwarding to a unix
# socket; the whole cluster (dockerd, etcd, kube-apiserver, controller-manager,
# scheduler, kubelet) runs in a network namespace of its own (`unshare --net`,
# node-inner.sh): in the machine's, kubelet and dockerd would program docker0, the
# routes and iptables of every container here.
# $1: the address the API is published on (127.0.0.N).
set -euo pipefail
address=$1
log() { echo "node: $(date +%T) $*"; }

# Docker mounts the cgroup controllers read-only; the inner dockerd and kubelet write there.
mount -o remount,rw /sys/fs/cgroup 2>/dev/null || true
for controller in /sys/fs/cgroup/*; do
  mount -o remount,bind,rw "$controller" 2>/dev/null || true
done
# kubelet sets these kernel settings at start and fails when it cannot. They are the
# whole machine's, not this container's, and /proc/sys stays read-only: kubelet reads
# the values it wants from files mounted over them in this container only.
mkdir -p /run/k8s/sysctl
for setting in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
  kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
  key=${setting%=*} value=${setting#*=}
  [ "$(cat "/proc/sys/$key")" = "$value" ] && continue
  echo "$value" >"/run/k8s/sysctl/${key//\//.}"
  mount --bind "/run/k8s/sysctl/${key//\//.}" "/proc/sys/$key"
done
# kubelet's mount propagation (emptyDir and projected volumes into Pods) wants it.
mount --make-rshared /
[ -c /dev/kmsg ] || { log "/dev/kmsg is missing (kubelet's OOM watcher reads it)"; exit 1; }

unshare --net -- /usr/local/bin/k8s-node-inner &
log "started the cluster in its own network namespace (pid $!)"
# nodelay, as an API server's own socket (Go sets TCP_NODELAY): with Nagle, an answer
# socat writes in parts waits for kubectl's delayed ACK, 40 ms.
socat -t 86400 "TCP-LISTEN:6443,bind=$address,reuseaddr,fork,nodelay" UNIX-CONNECT:/run/k8s/api.sock &
log "relay https://$address:6443 -> /run/k8s/api.sock (pid $!)"
# Either ending ends the node: a half-alive node would look up to `docker ps`.
wait -n || true
log "a part of the node exited"
exit 1
