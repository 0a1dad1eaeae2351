#!/bin/bash
# The test cluster inside the node's own network namespace (started by node-entry.sh):
# a Docker daemon of its own, etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kubelet (dockershim -> that dockerd), binaries in /opt/k8s/bin
# (built by testdata/setup-kubernetes.sh), PKI in /etc/k8s/pki, logs in /var/log/k8s.
# The namespace has loopback and one end of a veth pair whose other end goes nowhere
# (this kernel has no "dummy" link type): kubelet and the API server refuse a
# loopback node address. Pods get loopback only: a CNI list holding the `loopback`
# plugin alone, and the patched kubelet keeps such IP-less sandboxes
# (KUBELET_ALLOW_NO_POD_IP=1).
set -euo pipefail
B=/opt/k8s/bin P=/etc/k8s/pki L=/var/log/k8s
export PATH=$B:$PATH
node=${K8S_NODE:?the node name}
node_ip=10.60.0.1
log() { echo "node: $(date +%T) $*"; }
up() { # name command...: runs in the background, logs to $L/name.log
  local name=$1
  shift
  "$@" >"$L/$name.log" 2>&1 &
  log "started $name (pid $!)"
}
waitfor() { # what command...: until the command succeeds, 120 s at most
  local what=$1 tries=0
  shift
  until "$@" >/dev/null 2>&1; do
    sleep 0.2
    tries=$((tries + 1))
    if [ "$tries" -gt 600 ]; then
      log "$what did not come up within 120 s"
      tail -n 20 "$L"/*.log
      exit 1
    fi
  done
  log "$what up"
}

mkdir -p "$L" /var/lib/etcd /var/lib/kubelet /etc/cni/net.d /run/k8s
ip link set lo up
ip link add k8s0 type veth peer name k8s0p
ip addr add "$node_ip/24" dev k8s0
ip link set k8s0p up
ip link set k8s0 up

up dockerd dockerd --host unix:///var/run/docker.sock --bridge=none --iptables=false \
  --ip-masq=false --ip-forward=false --storage-driver=overlay2 --data-root=/var/lib/docker
up etcd etcd --name "$node" --data-dir /var/lib/etcd --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380
up relay socat UNIX-LISTEN:/run/k8s/api.sock,fork,unlink-early TCP:127.0.0.1:6443,nodelay
waitfor dockerd docker version
# The pod sandbox image: kubernetes' pause.c, built static by setup-kubernetes.sh.
tar -C "$B" -c pause | docker import --change 'ENTRYPOINT ["/pause"]' \
  --change 'USER 65535:65535' - agent-runner-test-k8s-pause:3.4 >/dev/null
waitfor etcd etcdctl --endpoints http://127.0.0.1:2379 endpoint health
up kube-apiserver kube-apiserver --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=0.0.0.0 --advertise-address="$node_ip" --secure-port=6443 \
  --tls-cert-file=$P/apiserver.crt --tls-private-key-file=$P/apiserver.key --client-ca-file=$P/ca.crt \
  --service-account-key-file=$P/sa.pub --service-account-signing-key-file=$P/sa.key \
  --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.0.0.0/24 \
  --authorization-mode=Node,RBAC --allow-privileged=true \
  --kubelet-client-certificate=$P/admin.crt --kubelet-client-key=$P/admin.key \
  --kubelet-preferred-address-types=InternalIP
waitfor kube-apiserver kubectl --kubeconfig $P/inner.kubeconfig get --raw /readyz
up kube-controller-manager kube-controller-manager --kubeconfig=$P/inner.kubeconfig \
  --authentication-kubeconfig=$P/inner.kubeconfig --authorization-kubeconfig=$P/inner.kubeconfig \
  --service-account-private-key-file=$P/sa.key --root-ca-file=$P/ca.crt --leader-elect=false \
  --controllers='*,-nodeipam,-service,-route,-cloud-node-lifecycle'
up kube-scheduler kube-scheduler --kubeconfig=$P/inner.kubeconfig \
  --authentication-kubeconfig=$P/inner.kubeconfig --authorization-kubeconfig=$P/inner.kubeconfig \
  --leader-elect=false
echo '{"cniVersion":"0.4.0","name":"loopback-only","plugins":[{"type":"loopback"}]}' \
  >/etc/cni/net.d/10-loopback-only.conflist
export KUBELET_ALLOW_NO_POD_IP=1
# No iptables chains, no hairpin, no eviction nor image GC (a test fixture on a
# shared disk), no QoS cgroups (the node's cgroups are Docker's).
up kubelet kubelet --kubeconfig=$P/inner.kubeconfig --hostname-override="$node" --node-ip="$node_ip" \
  --container-runtime=docker --docker-endpoint=unix:///var/run/docker.sock \
  --pod-infra-container-image=agent-runner-test-k8s-pause:3.4 \
  --network-plugin=cni --cni-conf-dir=/etc/cni/net.d --cni-bin-dir=$B/cni \
  --make-iptables-util-chains=false --hairpin-mode=none \
  --fail-swap-on=false --cgroup-driver=cgroupfs --cgroups-per-qos=false --enforce-node-allocatable= \
  --eviction-hard='memory.available<1Mi,nodefs.available<1%,imagefs.available<1%' \
  --image-gc-high-threshold=100 --image-gc-low-threshold=99 \
  --anonymous-auth=false --client-ca-file=$P/ca.crt --authorization-mode=AlwaysAllow \
  --root-dir=/var/lib/kubelet --v=1
log "all started"
wait -n || true
log "a component exited"
tail -n 30 "$L"/*.log
exit 1
