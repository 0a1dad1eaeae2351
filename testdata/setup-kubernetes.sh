#!/usr/bin/env bash
# The test cluster (SPEC §25 "The test cluster"): a single-node Kubernetes 1.20 built
# here from Debian's own `kubernetes` source package, for the Kubernetes backend's
# tests. No registry or cluster installer is reachable from these machines.
#
#   bash testdata/setup-kubernetes.sh          up (quick and harmless when it is up)
#   bash testdata/setup-kubernetes.sh --down   remove the node (container, volume,
#                                              network namespace); keep the binaries
#   bash testdata/setup-kubernetes.sh --purge  --down, and the binaries, the node
#                                              image and $K8S_STATE too
#
# - Binaries: kube-apiserver, kube-controller-manager, kube-scheduler and kubelet
#   built with `make WHAT=…` under `nice -n 19` with Debian's Go (golang-go's), from
#   `apt-get source kubernetes` with the two kubelet patches in testdata/kubernetes/;
#   kubectl from Debian's kubernetes-client (the same source), etcd from etcd-server,
#   the CNI loopback plugin from containernetworking-plugins, pause from the tree's
#   pause.c. Debian packages come through private apt lists (the machine's apt
#   configuration is not touched) and are unpacked, not installed. All cached in
#   $K8S_CACHE/<source version>/ (a later run takes seconds); the build tree and Go's
#   cache are removed after a build unless K8S_KEEP_BUILD=1.
# - The node: one container of agent-runner-test-k8s-node:1 (the emulated remote
#   hosts' image, setup-remote-hosts.sh, plus `ip` and the scripts in
#   testdata/kubernetes/) on `--network host`, where only a relay listens, on
#   https://$K8S_ADDR:6443; everything else (its own dockerd, etcd, the control
#   plane, kubelet with dockershim against that dockerd) runs in a network namespace
#   of its own. No kube-proxy. Pods get loopback only and run images loaded into the
#   node ($K8S_IMAGES, `imagePullPolicy: Never`). The machine's daemon only runs the
#   node; its docker0, routes, iptables and kernel settings are compared before and
#   after the start.
# - For the tests: $K8S_STATE/cluster.env names the kubeconfig
#   ($K8S_STATE/kubeconfig), its context and namespace (agent-runner-test), kubectl,
#   the node and the images loaded. Kubernetes 1.20 is end-of-life: a loopback test
#   fixture only.
#
# Needs root, docker (setup-docker.sh), agent-runner-test-remote-host:2
# (setup-remote-hosts.sh), gcc with glibc's static libraries, dpkg-dev, make, patch,
# openssl and apt access to Debian bookworm for the first build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
address=${K8S_ADDR:-127.0.0.60}
state=${K8S_STATE:-/var/lib/agent-runner-k8s}
cache=${K8S_CACHE:-/var/cache/agent-runner/kubernetes}
images=${K8S_IMAGES:-agent-runner-test-worker:latest}
ready_timeout=${K8S_READY_TIMEOUT:-180}
node=agent-runner-test-k8s-node
node_image=agent-runner-test-k8s-node:1
host_image=agent-runner-test-remote-host:2
context=agent-runner-test
namespace=agent-runner-test
label=agent-runner-test.k8s
# Bump when the build below changes what it produces (the patches are hashed anyway).
build_recipe="1 $(cat "$here"/kubernetes/*.patch | sha256sum | cut -c1-16)"

say() { printf 'setup-kubernetes: %s\n' "$*" >&2; }
die() { printf 'setup-kubernetes: error: %s\n' "$*" >&2; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { # milliseconds since $1, as seconds with one decimal
  local ms=$(($(now_ms) - $1))
  printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}
began=$(now_ms)

# run COMMAND…: runs it; on failure, dies naming it with the tail of its stderr.
run() {
  local err
  err=$(mktemp)
  if ! "$@" 2>"$err"; then
    local tail
    tail=$(tail -n 20 "$err")
    rm -f "$err"
    die "\`$*\` failed: ${tail:-no output on stderr}"
  fi
  rm -f "$err"
}

node_running() { [ "$(docker inspect -f '{{.State.Running}}' "$node" 2>/dev/null)" = true ]; }

down() {
  if docker inspect "$node" >/dev/null 2>&1; then
    run docker rm -f "$node" >/dev/null
    say "removed the node $node"
  fi
  if docker volume inspect "$node" >/dev/null 2>&1; then
    run docker volume rm "$node" >/dev/null
  fi
}

case ${1:-} in
'') ;;
--down)
  down
  exit 0
  ;;
--purge)
  down
  docker image rm "$node_image" >/dev/null 2>&1 || true
  rm -rf "$state" "$cache"
  say "removed $state, $cache and $node_image"
  exit 0
  ;;
*) die "unknown argument '$1' (none, --down or --purge)" ;;
esac

[ "$(id -u)" = 0 ] || die "needs root (the node container, $state and $cache)"
case $address in
127.*) ;;
*) die "K8S_ADDR must be a loopback address 127.0.0.N, not '$address'" ;;
esac
docker image inspect "$host_image" >/dev/null 2>&1 \
  || die "$host_image is missing; \`bash testdata/setup-remote-hosts.sh\` builds it"

# --- The source version: the binaries are cached by it.
version=${K8S_VERSION:-}
# apt-cache takes seconds on a busy machine: its answer is kept while apt's lists
# are unchanged.
apt_key=$(find /var/lib/apt/lists -maxdepth 1 -type f -printf '%T@ %s %f\n' 2>/dev/null \
  | sort | sha256sum | cut -c1-16)
if [ -z "$version" ] && [ -n "$apt_key" ] && read -r key answer 2>/dev/null <"$cache/apt-version" \
  && [ "$key" = "$apt_key" ]; then
  version=$answer
fi
if [ -z "$version" ]; then
  show=$(apt-cache show --no-all-versions kubernetes-client 2>/dev/null || true)
  version=$(printf '%s\n' "$show" | sed -n 's/^Source: kubernetes (\(.*\))$/\1/p')
  [ -n "$version" ] || version=$(printf '%s\n' "$show" | sed -n 's/^Version: //p')
  if [ -n "$version" ] && [ -n "$apt_key" ]; then
    mkdir -p "$cache"
    echo "$apt_key $version" >"$cache/apt-version"
  fi
fi
if [ -z "$version" ]; then
  # No apt lists: the newest build there is.
  version=$(find "$cache" -mindepth 2 -maxdepth 2 -name recipe -printf '%h\n' 2>/dev/null \
    | sort -V | tail -n 1 | xargs -r basename)
  [ -n "$version" ] || die "no kubernetes-client in apt's lists (apt-get update?) and nothing built in $cache; set K8S_VERSION"
fi
built=$cache/$version
bin=$built/bin

# --- The build (only when $built lacks it).
build() {
  local work=$cache/build staging=$cache/$version.partial began_build
  began_build=$(now_ms)
  say "building Kubernetes $version from Debian's source into $built (minutes; nice -n 19)"
  for tool in gcc make patch dpkg-source openssl; do
    command -v "$tool" >/dev/null || die "$tool is missing (Debian: apt-get install build-essential dpkg-dev openssl)"
  done
  rm -rf "$work" "$staging"
  mkdir -p "$work"/apt/parts "$work"/apt/lists/partial "$work"/apt/cache "$work"/debs \
    "$work"/root "$work"/src "$work"/bin "$work"/home "$staging"/bin/cni
  cat >"$work/apt/parts/debian.sources" <<'SOURCES'
Types: deb deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  local apt=(apt-get -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$work/apt/parts"
    -o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache" -qq)
  run "${apt[@]}" update
  (cd "$work/src" && run "${apt[@]}" source "kubernetes=$version" >/dev/null)
  (cd "$work/debs" && run "${apt[@]}" download golang-go golang-src etcd-server etcd-client \
    "kubernetes-client=$version" containernetworking-plugins)
  # golang-go names the Go it stands for (golang-1.19-go in bookworm).
  local go
  go=$(dpkg-deb -f "$work"/debs/golang-go_*.deb Depends | grep -o 'golang-[0-9.]*-go' | head -n 1)
  [ -n "$go" ] || die "golang-go's Depends name no golang-X-go: $(dpkg-deb -f "$work"/debs/golang-go_*.deb Depends)"
  (cd "$work/debs" && run "${apt[@]}" download "$go" "${go%-go}-src")
  for deb in "$work"/debs/*.deb; do run dpkg -x "$deb" "$work/root"; done
  local src goroot
  src=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n 1)
  [ -n "$src" ] || die "apt-get source kubernetes=$version left no kubernetes-* directory in $work/src"
  goroot=$(find "$work/root/usr/lib" -mindepth 1 -maxdepth 1 -type d -name 'go-*' | head -n 1)
  [ -x "$goroot/bin/go" ] || die "no go in $work/root/usr/lib/go-*/bin"
  for p in "$here"/kubernetes/*.patch; do
    run patch -d "$src" -p1 -s -i "$p"
  done
  # hack/lib/golang.sh's one use of rsync (`rsync -pc FILE DIR`); not installed here.
  cat >"$work/bin/rsync" <<'RSYNC'
#!/bin/sh
[ "$1" = -pc ] && shift
exec cp -p "$@"
RSYNC
  chmod +x "$work/bin/rsync"
  local targets=(cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler cmd/kubelet)
  local began_make
  began_make=$(now_ms)
  if ! (cd "$src" && PATH="$work/bin:$goroot/bin:$PATH" HOME="$work/home" GOCACHE="$work/home/go-build" \
    CGO_ENABLED=0 nice -n 19 make WHAT="${targets[*]}") >"$work/build.log" 2>&1; then
    die "\`make WHAT=\"${targets[*]}\"\` in $src failed (log: $work/build.log): $(tail -n 20 "$work/build.log")"
  fi
  local make_s
  make_s=$(secs "$began_make")
  for w in "${targets[@]}"; do cp "$src/_output/bin/${w#cmd/}" "$staging/bin/"; done
  cp "$work"/root/usr/bin/etcd "$work"/root/usr/bin/etcdctl "$work"/root/usr/bin/kubectl "$staging/bin/"
  cp "$work"/root/usr/lib/cni/loopback "$staging/bin/cni/"
  run gcc -Os -Wall -Werror -static -DVERSION=v3.4-agent-runner-test -o "$staging/bin/pause" \
    "$src/build/pause/linux/pause.c"
  local disk
  disk=$(du -sh "$work" | cut -f1)
  {
    echo "make_seconds=$make_s"
    echo "build_seconds=$(secs "$began_build")"
    echo "build_disk=$disk"
    echo "go=$go"
  } >"$staging/figures"
  echo "$build_recipe" >"$staging/recipe"
  rm -rf "$built"
  mv "$staging" "$built"
  if [ "${K8S_KEEP_BUILD:-0}" = 1 ]; then
    say "kept the build tree $work ($disk)"
  else
    rm -rf "$work"
  fi
  say "built in $(secs "$began_build") s (make ${make_s} s with $go; the build tree was $disk)"
}

if [ "$(cat "$built/recipe" 2>/dev/null)" = "$build_recipe" ]; then
  say "Kubernetes $version binaries cached in $built"
else
  build
fi

# --- PKI and kubeconfigs: a CA, the API server's certificate (for $address and the
# node's own addresses), one admin client certificate used by every component, the
# service-account key pair; kept across --down so a kubeconfig stays valid.
pki=$state/pki
mkdir -p "$pki"
chmod 700 "$state" "$pki"
if [ "$(cat "$pki/address" 2>/dev/null)" != "$address" ]; then
  say "PKI for $address in $pki"
  rm -f "$pki"/*
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj /CN=agent-runner-test-ca 2>/dev/null
    cert() { # name subject [subjectAltName]
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      {
        echo "basicConstraints=CA:FALSE"
        echo "keyUsage=digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=serverAuth,clientAuth"
        [ -z "${3:-}" ] || echo "subjectAltName=$3"
      } >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" \
        -days 3650 -extfile "$1.ext" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    cert apiserver /CN=kube-apiserver "IP:$address,IP:127.0.0.1,IP:10.60.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    cert admin "/O=system:masters/CN=agent-runner-test-admin"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || die "openssl failed making the PKI in $pki"
  kubeconfig() { # file server
    cat >"$1" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: $context
  cluster: {server: "$2", certificate-authority-data: $(base64 -w0 "$pki/ca.crt")}
users:
- name: $context-admin
  user: {client-certificate-data: $(base64 -w0 "$pki/admin.crt"), client-key-data: $(base64 -w0 "$pki/admin.key")}
contexts:
- name: $context
  context: {cluster: $context, user: $context-admin, namespace: $namespace}
current-context: $context
KUBECONFIG
    chmod 600 "$1"
  }
  kubeconfig "$pki/inner.kubeconfig" https://127.0.0.1:6443
  kubeconfig "$state/kubeconfig" "https://$address:6443"
  echo "$address" >"$pki/address"
fi
kubeconfig=$state/kubeconfig
kubectl=$bin/kubectl
k() { "$kubectl" --kubeconfig "$kubeconfig" --context "$context" --request-timeout=10s "$@"; }

# --- The node image: the remote hosts' (dockerd, containerd, runc, socat, docker) and ip.
node_recipe=$(cat "$here/kubernetes/node-entry.sh" "$here/kubernetes/node-inner.sh" \
  <(docker image inspect -f '{{.Id}}' "$host_image") | sha256sum | cut -c1-16)
if [ "$(docker image inspect --format '{{index .Config.Labels "agent-runner.recipe"}}' "$node_image" 2>/dev/null)" != "$node_recipe" ]; then
  context_dir=$(mktemp -d)
  trap 'rm -rf "$context_dir"' EXIT
  mkdir -p "$context_dir/root/usr/local/bin"
  ip=$(command -v ip) || die "ip is missing (Debian: apt-get install iproute2)"
  mkdir -p "$context_dir/root/usr/sbin"
  cp -L "$ip" "$context_dir/root/usr/sbin/ip"
  # Its libraries at their paths (ldd exits 1 on a static binary).
  for lib in $(ldd "$ip" 2>/dev/null | grep -o '/[^ ]*' || true); do
    mkdir -p "$context_dir/root$(dirname "$lib")"
    [ -e "$context_dir/root$lib" ] || cp -L "$lib" "$context_dir/root$lib"
  done
  install -m 755 "$here/kubernetes/node-entry.sh" "$context_dir/root/usr/local/bin/k8s-node-entry"
  install -m 755 "$here/kubernetes/node-inner.sh" "$context_dir/root/usr/local/bin/k8s-node-inner"
  cat >"$context_dir/Dockerfile" <<DOCKERFILE
FROM $host_image
COPY root/ /
LABEL agent-runner.recipe=$node_recipe
ENTRYPOINT ["/usr/local/bin/k8s-node-entry"]
DOCKERFILE
  say "building $node_image"
  run docker build -q -t "$node_image" "$context_dir" >/dev/null
fi

# --- The machine's network, kernel settings and daemon, to compare after the start.
machine_state() {
  echo "# links (veth pairs of other containers aside)"
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -v '^veth' | sort
  echo "# addresses"
  ip -o addr show | awk '{print $2, $3, $4}' | grep -v '^veth' | sort
  echo "# routes"
  ip route show | sed 's/ linkdown//' | sort
  ip -6 route show | grep -v '^fe80::/64 dev veth' | sed 's/ linkdown//' | sort
  if command -v iptables-save >/dev/null; then
    echo "# iptables"
    iptables-save | grep -v '^#' | sed 's/ \[[0-9]*:[0-9]*\]$//'
    ip6tables-save 2>/dev/null | grep -v '^#' | sed 's/ \[[0-9]*:[0-9]*\]$//'
  fi
  echo "# kernel settings kubelet wants"
  for key in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops \
    kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
    echo "$key=$(cat "/proc/sys/$key")"
  done
}
# A node that changed the machine is removed before saying so.
machine_changed() {
  down
  die "$*"
}
# What kubelet or kube-proxy would leave on the machine, whenever the node started.
assert_machine_clean() {
  local leftovers
  leftovers=$(docker ps -a --filter label=io.kubernetes.pod.name --format '{{.Names}}')
  [ -z "$leftovers" ] || machine_changed "kubelet's containers are on the machine's own daemon: $leftovers"
  ip link show docker0 >/dev/null 2>&1 || machine_changed "the machine's docker0 is gone"
  ! ip -o link show | grep -E ': (k8s0|cni[0-9]|cbr0|kube-)' \
    || machine_changed "a node's link is in the machine's network namespace"
  if command -v iptables-save >/dev/null && iptables-save | grep -q 'KUBE-'; then
    machine_changed "KUBE- chains in the machine's iptables: $(iptables-save | grep -m 5 'KUBE-')"
  fi
}

want="$node_recipe $version $address"
before=""
started=""
if node_running && [ "$(docker inspect -f "{{index .Config.Labels \"$label\"}}" "$node")" = "$want" ] \
  && k get --raw /readyz >/dev/null 2>&1; then
  say "the node $node is up (https://$address:6443)"
else
  down
  before=$(machine_state)
  say "starting the node $node (https://$address:6443)"
  run docker volume create --label "$label=1" "$node" >/dev/null
  # --privileged is refused on these machines (no CAP_SYS_RESOURCE in any bounding
  # set); the node gets the capabilities a Docker daemon needs, but none for the
  # whole machine's modules, clock or reboot.
  run docker run -d --init --name "$node" --label "$label=$want" --network host \
    --cgroupns=private --cap-add ALL --cap-drop SYS_RESOURCE --cap-drop SYS_MODULE \
    --cap-drop SYS_TIME --cap-drop SYS_BOOT \
    --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
    --device /dev/kmsg:/dev/kmsg:r --tmpfs /run:rw,exec,nosuid,size=64m \
    --mount "type=volume,source=$node,target=/var/lib/docker" \
    --mount "type=bind,source=$bin,target=/opt/k8s/bin,readonly" \
    --mount "type=bind,source=$pki,target=/etc/k8s/pki,readonly" \
    -e "K8S_NODE=$node" "$node_image" "$address" >/dev/null
  started=$(now_ms)
fi

# --- Readiness, under one deadline.
deadline=$(($(date +%s) + ready_timeout))
node_logs() {
  docker logs --tail 15 "$node" 2>&1 | sed 's/^/  /'
  docker exec "$node" sh -c 'for f in /var/log/k8s/*.log; do echo "$f:"; tail -n 5 "$f"; done' 2>/dev/null \
    | sed 's/^/  /'
}
# wait_until WHAT COMMAND…: until COMMAND succeeds; past the deadline, dies naming
# it, its last output and the node's logs.
wait_until() {
  local what=$1 out
  shift
  until out=$("$@" 2>&1); do
    node_running || die "$what: the node $node stopped:
$(node_logs)"
    if [ "$(date +%s)" -gt "$deadline" ]; then
      die "$what: not within ${ready_timeout} s; the last \`$*\` said: $(printf '%s' "$out" | tail -n 5)
the node's logs:
$(node_logs)"
    fi
    sleep 0.3
  done
}
node_ready() {
  [ "$(k get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_until "the API on https://$address:6443" k get --raw /readyz
wait_until "the node $node Ready" node_ready
node_ready_s=""
[ -z "$started" ] || node_ready_s=$(secs "$started")

k get namespace "$namespace" >/dev/null 2>&1 || run k create namespace "$namespace" >/dev/null
# Pods are admitted once the controller-manager gave the namespace's service account its token.
sa_token() { k -n "$namespace" get serviceaccount default -o jsonpath='{.secrets[0].name}' | grep -q .; }
wait_until "the service account default in $namespace" sa_token

# --- Test images into the node, when it lacks them or has others.
inner_docker_up() { docker exec "$node" docker version; }
wait_until "the node's dockerd" inner_docker_up
for image in $images; do
  ours=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null) \
    || die "$image is missing on this machine (make test-env builds the test images)"
  theirs=$(docker exec "$node" docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  if [ "$ours" != "$theirs" ]; then
    say "loading $image into the node"
    docker save "$image" | run docker exec -i "$node" docker load -q >/dev/null
  fi
done

# --- One Pod Ready, on the node's own daemon, with loopback only.
pod=agent-runner-test-readiness
k -n "$namespace" delete pod "$pod" --grace-period=0 --force >/dev/null 2>&1 || true
first_image=${images%% *}
pod_began=$(now_ms)
run k -n "$namespace" apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: $pod, labels: {$label: readiness}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
  - {name: main, image: $first_image, imagePullPolicy: Never, command: [sleep, "600"]}
POD
pod_ready() { [ "$(k -n "$namespace" get pod "$pod" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
wait_until "the Pod $namespace/$pod Ready" pod_ready
pod_ready_s=$(secs "$pod_began")
net_dev=$(run k -n "$namespace" exec "$pod" -- cat /proc/net/dev)
links=$(printf '%s\n' "$net_dev" | awk -F: 'NR > 2 {gsub(/ /, "", $1); print $1}' | tr '\n' ' ')
[ "$links" = "lo " ] || die "the Pod $pod has links other than loopback: $links"
[ -n "$(docker exec "$node" docker ps -q --filter "label=io.kubernetes.pod.name=$pod")" ] \
  || die "the Pod $pod's containers are not on the node's dockerd"
k -n "$namespace" delete pod "$pod" --wait=false >/dev/null 2>&1 || true

# --- The machine is as it was.
assert_machine_clean
if [ -n "$before" ]; then
  after=$(machine_state)
  if [ "$before" != "$after" ]; then
    machine_changed "the machine's network or kernel settings changed while the node started:
$(diff <(printf '%s\n' "$before") <(printf '%s\n' "$after"))"
  fi
fi

mkdir -p "$state/bin"
ln -sfn "$kubectl" "$state/bin/kubectl"
cat >"$state/cluster.env" <<ENV
# The test cluster (testdata/setup-kubernetes.sh); shell syntax, one NAME=value a line.
KUBECONFIG=$kubeconfig
K8S_CONTEXT=$context
K8S_NAMESPACE=$namespace
K8S_SERVER=https://$address:6443
K8S_NODE=$node
K8S_VERSION=$version
KUBECTL=$kubectl
K8S_IMAGES="$images"
ENV
figures="set-up ${secs_total:=$(secs "$began")} s"
[ -z "$node_ready_s" ] || figures="$figures, node Ready $node_ready_s s after its start"
figures="$figures, a Pod Ready in $pod_ready_s s"
say "ready: $figures; KUBECONFIG=$kubeconfig $state/bin/kubectl get nodes"
