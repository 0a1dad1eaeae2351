#!/bin/sh
# An emulated remote Docker host (SPEC §22 "Tests"): this container shares the
# machine's network namespace (`--network host`), so the relay below listens on
# 127.0.0.N; the inner dockerd runs in a network namespace of its own
# (`unshare --net`): in the machine's it would delete or program docker0.
# $1: the address the relay listens on (127.0.0.N).
set -eu
address=$1
# Docker mounts the cgroup controllers read-only; the inner daemon writes there.
mount -o remount,rw /sys/fs/cgroup 2>/dev/null || true
for controller in /sys/fs/cgroup/*; do
  mount -o remount,bind,rw "$controller" 2>/dev/null || true
done
mkdir -p /run/inner
unshare --net -- dockerd --host unix:///run/inner/docker.sock \
  --iptables=false --ip-masq=false --storage-driver overlay2 \
  --data-root /var/lib/docker --exec-root /run/inner/exec \
  --pidfile /run/inner/dockerd.pid >/run/inner/dockerd.log 2>&1 &
waited=0
until [ -S /run/inner/docker.sock ]; do
  waited=$((waited + 1))
  if [ "$waited" -gt 300 ]; then
    echo "remote-host: the inner dockerd did not start" >&2
    tail -n 20 /run/inner/dockerd.log >&2
    exit 1
  fi
  sleep 0.1
done
# The docker CLI of an ssh:// client (`docker system dial-stdio`) finds the daemon
# at the default socket; sshd is started by the test that uses it.
ln -sf /run/inner/docker.sock /run/docker.sock
mkdir -p /run/sshd
# -t: a client half-closes its side (stdin done) long before the output ends.
# nodelay, as a dockerd listening on tcp:// (Go sets TCP_NODELAY on every
# connection): with Nagle, an answer socat writes in two parts (a container's
# inspect with its seccomp profile, 15 KB) waits for the client's delayed ACK, 40 ms.
exec socat -t 86400 "TCP-LISTEN:2375,bind=$address,reuseaddr,fork,backlog=128,nodelay" UNIX-CONNECT:/run/inner/docker.sock
