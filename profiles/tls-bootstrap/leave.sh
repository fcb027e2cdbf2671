#!/usr/bin/env bash
# kpssh profile tls-bootstrap, phase leave: take the host out of the cluster and keep it warm.
# Disables (not only stops) kubelet and containerd, so a reboot keeps the host out; removes the
# membership credentials; keeps binaries, images and configuration for the next join.
# Runs without a node class: only KPSSH_HOST_ADDRESS and KPSSH_NODE_ADDRESS have values.
set -euo pipefail

die() {
    echo "kpssh tls-bootstrap leave: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (the runner uses sudo for non-root users)"

# A unit that cannot be disabled is only acceptable when it is not running (never installed).
for unit in kubelet containerd; do
    if ! systemctl disable --now "$unit"; then
        if systemctl is-active --quiet "$unit"; then
            die "could not stop $unit; the node would stay a member"
        fi
    fi
done

# Pods' shims outlive containerd (KillMode=process); nothing may keep running for a left node.
# Each Kubernetes task records its shim's pid; kill exactly those, never by process name.
for pidfile in /run/containerd/io.containerd.runtime.v2.task/k8s.io/*/shim.pid; do
    [ -f "$pidfile" ] || continue
    kill -9 "$(cat "$pidfile")" 2>/dev/null || true
    sleep 1
done

# Volumes kubelet mounted below its root (deepest first); never its root itself.
awk '$2 ~ "^/var/lib/kubelet/" { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do
        umount -l "$m" || echo "kpssh: could not unmount $m" >&2
    done

rm -f /etc/kubernetes/kubelet.conf /etc/kubernetes/bootstrap-kubelet.conf
rm -rf /var/lib/kubelet/pki /var/lib/kubelet/pods
if [ -d /etc/cni/net.d ]; then
    find /etc/cni/net.d -mindepth 1 -maxdepth 1 -exec rm -rf {} +
fi
for link in kube-bridge kube-dummy-if cni0 flannel.1; do
    if ip link show "$link" >/dev/null 2>&1; then
        ip link delete "$link" || echo "kpssh: could not delete link $link" >&2
    fi
done
echo "kpssh: left the cluster; kubelet and containerd disabled, binaries kept"
