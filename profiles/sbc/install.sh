#!/usr/bin/env bash
# kpssh profile sbc, phase install: tls-bootstrap for Debian-family single-board computers
# (Raspberry Pi OS, Armbian, Debian, Ubuntu on arm64 or amd64). Differences from tls-bootstrap:
# refuses early when the memory cgroup controller is off (the Pi OS default), turns swap off,
# skips apt entirely when kubelet <k8sMinor> and containerd are already there (SD cards are
# slow; pre-baked images join in seconds), and points containerd at /opt/cni/bin, where the
# Kubernetes CNI plugins and CNI agents install, instead of Debian's /usr/lib/cni.
#
# Variables: k8sMinor (required, e.g. 1.36);
#            aptRepo (default https://pkgs.k8s.io/core:/stable:/v<k8sMinor>/deb/)
set -euo pipefail

die() {
    echo "kpssh sbc install: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (the runner uses sudo for non-root users)"
minor="${KPSSH_VAR_k8sMinor:-}"
[[ "$minor" =~ ^[0-9]+\.[0-9]+$ ]] ||
    die "set spec.vars.k8sMinor on the SSHNodeClass to a minor version such as 1.36 (got '$minor')"
command -v apt-get >/dev/null 2>&1 || die "the sbc profile needs a Debian-family OS with apt"

# Memory cgroup: on cgroup v2 it is listed in cgroup.controllers; on v1 /proc/cgroups says
# whether it is enabled (4th column).
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    grep -qw memory /sys/fs/cgroup/cgroup.controllers ||
        die "memory cgroup controller is off: add 'cgroup_enable=memory cgroup_memory=1' to the kernel command line (prep-host does it) and reboot"
elif ! awk '$1 == "memory" && $4 == 1 { found = 1 } END { exit !found }' /proc/cgroups; then
    die "memory cgroup controller is off: add 'cgroup_enable=memory cgroup_memory=1' to the kernel command line (prep-host does it) and reboot"
fi

# Swap off, now and after reboots (kubelet runs with failSwapOn false, but memory accounting on
# a 2-4 GB board is only honest without swap).
if systemctl is-enabled --quiet dphys-swapfile 2>/dev/null; then
    systemctl disable --now dphys-swapfile
fi
if [ "$(wc -l </proc/swaps)" -gt 1 ]; then
    swapoff -a
fi

install -d -m 0755 /var/lib/kpssh /etc/modules-load.d /etc/sysctl.d /etc/containerd
printf 'overlay\nbr_netfilter\n' >/etc/modules-load.d/kpssh-k8s.conf
for m in overlay br_netfilter; do
    modprobe "$m" || echo "kpssh: could not load module $m; continuing in case it is built in" >&2
done
cat >/etc/sysctl.d/99-kpssh-k8s.conf <<'CONF'
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
net.ipv4.ip_forward = 1
CONF
sysctl -q -p /etc/sysctl.d/99-kpssh-k8s.conf

current=""
if command -v kubelet >/dev/null 2>&1; then
    current="$(kubelet --version 2>/dev/null | sed -n 's/^Kubernetes v\([0-9]*\.[0-9]*\).*/\1/p')"
fi
if [ "$current" = "$minor" ] && command -v containerd >/dev/null 2>&1; then
    echo "kpssh: kubelet $minor and containerd already installed; skipping apt"
else
    export DEBIAN_FRONTEND=noninteractive
    repo="${KPSSH_VAR_aptRepo:-https://pkgs.k8s.io/core:/stable:/v$minor/deb/}"
    keyring=/etc/apt/keyrings/kubernetes-apt-keyring.gpg
    list=/etc/apt/sources.list.d/kubernetes.list
    line="deb [signed-by=$keyring] $repo /"
    apt-get update -q
    apt-get install -y -q ca-certificates curl gpg
    install -d -m 0755 /etc/apt/keyrings /etc/apt/sources.list.d
    if [ ! -s "$keyring" ] || [ "$(cat "$list" 2>/dev/null)" != "$line" ]; then
        curl -fsSL --retry 3 "${repo}Release.key" | gpg --batch --yes --dearmor -o "$keyring"
        echo "$line" >"$list"
        apt-get update -q
    fi
    apt-mark unhold kubelet >/dev/null 2>&1 || true
    apt-get install -y -q --allow-downgrades containerd conntrack socat ethtool kubelet \
        kubernetes-cni
    apt-mark hold kubelet
fi

# containerd: systemd cgroups, and CNI plugins from /opt/cni/bin (Debian's build defaults to
# /usr/lib/cni, where neither kubernetes-cni nor Cilium/Calico/Flannel put theirs).
containerd config default >/etc/containerd/config.toml.kpssh
sed -i -e 's/SystemdCgroup = false/SystemdCgroup = true/' \
    -e 's#"/usr/lib/cni"#"/opt/cni/bin"#g' /etc/containerd/config.toml.kpssh
mv -f /etc/containerd/config.toml.kpssh /etc/containerd/config.toml
install -d -m 0755 /opt/cni/bin
systemctl daemon-reload
systemctl enable containerd
systemctl restart containerd

systemctl disable --now kubelet || true
date -u +%Y-%m-%dT%H:%M:%SZ >/var/lib/kpssh/installed
echo "kpssh: sbc installed (kubelet $(kubelet --version 2>/dev/null || echo '?'))"
