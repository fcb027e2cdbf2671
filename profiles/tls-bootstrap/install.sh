#!/usr/bin/env bash
# kpssh profile tls-bootstrap, phase install: containerd, kubelet and the CNI plugins for this
# host's architecture, plus the kernel settings a node needs. Idempotent; runs once per
# <profile>@<version> on a host, and again whenever it fails or the version changes.
#
# Variables (SSHNodeClass spec.vars):
#   k8sMinor          required, e.g. 1.36: the kubelet minor version to install
#   installMethod     apt (default): Debian/Ubuntu packages from the Kubernetes community repo
#                     tarball: release binaries, for any systemd distribution
#   aptRepo           apt repo base (default https://pkgs.k8s.io/core:/stable:/v<k8sMinor>/deb/)
#   kubeMirror        tarball base for kubelet (default https://dl.k8s.io)
#   githubMirror      tarball base for containerd, runc and CNI plugins (default https://github.com)
#   kubeletVersion    tarball: exact version such as v1.36.3 (default: stable-<k8sMinor>.txt)
#   containerdVersion tarball: default 2.1.4;  runcVersion: default 1.3.0
#   cniVersion        tarball: default 1.7.1
set -euo pipefail

die() {
    echo "kpssh tls-bootstrap install: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (the runner uses sudo for non-root users)"
minor="${KPSSH_VAR_k8sMinor:-}"
[[ "$minor" =~ ^[0-9]+\.[0-9]+$ ]] ||
    die "set spec.vars.k8sMinor on the SSHNodeClass to a minor version such as 1.36 (got '$minor')"
method="${KPSSH_VAR_installMethod:-apt}"

case "$(uname -m)" in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) die "unsupported architecture $(uname -m): kpssh pools are amd64 or arm64" ;;
esac

install -d -m 0755 /var/lib/kpssh /etc/modules-load.d /etc/sysctl.d /etc/containerd

# Kernel: overlay for containerd snapshots, br_netfilter so bridged pod traffic meets iptables.
printf 'overlay\nbr_netfilter\n' >/etc/modules-load.d/kpssh-k8s.conf
for m in overlay br_netfilter; do
    modprobe "$m" || echo "kpssh: could not load module $m; continuing in case it is built in" >&2
done
cat >/etc/sysctl.d/99-kpssh-k8s.conf <<'EOF'
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
net.ipv4.ip_forward = 1
EOF
sysctl -q -p /etc/sysctl.d/99-kpssh-k8s.conf

# The installed kubelet's major.minor, or nothing.
kubelet_minor() {
    command -v kubelet >/dev/null 2>&1 || return 0
    kubelet --version 2>/dev/null | sed -n 's/^Kubernetes v\([0-9]*\.[0-9]*\).*/\1/p'
}

# fetch URL DEST [SUMS_URL NAME]: download, and check the SHA-256 when a checksum file exists.
# A checksum file holds either the bare hash or "hash  name" lines.
fetch() {
    local url="$1" dest="$2" sums_url="${3:-}" name="${4:-}" want got
    curl -fsSL --retry 3 -o "$dest.part" "$url" || die "download failed: $url"
    if [ -n "$sums_url" ]; then
        curl -fsSL --retry 3 -o "$dest.sums" "$sums_url" || die "download failed: $sums_url"
        if [ "$(wc -w <"$dest.sums")" = 1 ]; then
            want="$(tr -d ' \n' <"$dest.sums")"
        else
            want="$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1 }' "$dest.sums")"
        fi
        got="$(sha256sum "$dest.part" | awk '{ print $1 }')"
        rm -f "$dest.sums"
        if [ -z "$want" ] || [ "$want" != "$got" ]; then die "checksum mismatch for $url"; fi
    fi
    mv -f "$dest.part" "$dest"
}

install_apt() {
    local repo="${KPSSH_VAR_aptRepo:-https://pkgs.k8s.io/core:/stable:/v$minor/deb/}"
    local keyring=/etc/apt/keyrings/kubernetes-apt-keyring.gpg
    local list=/etc/apt/sources.list.d/kubernetes.list
    local line="deb [signed-by=$keyring] $repo /"

    export DEBIAN_FRONTEND=noninteractive
    if [ "$(kubelet_minor)" = "$minor" ] && command -v containerd >/dev/null 2>&1; then
        echo "kpssh: kubelet $minor and containerd already installed; skipping apt"
        return 0
    fi
    install -d -m 0755 /etc/apt/keyrings /etc/apt/sources.list.d
    if [ ! -s "$keyring" ] || [ "$(cat "$list" 2>/dev/null)" != "$line" ]; then
        apt-get update -q
        apt-get install -y -q ca-certificates curl gpg
        curl -fsSL --retry 3 "${repo}Release.key" | gpg --batch --yes --dearmor -o "$keyring"
        echo "$line" >"$list"
    fi
    apt-get update -q
    apt-mark unhold kubelet >/dev/null 2>&1 || true
    apt-get install -y -q --allow-downgrades containerd conntrack socat ethtool kubelet \
        kubernetes-cni
    apt-mark hold kubelet
}

install_tarball() {
    local kube="${KPSSH_VAR_kubeMirror:-https://dl.k8s.io}"
    local gh="${KPSSH_VAR_githubMirror:-https://github.com}"
    local ver="${KPSSH_VAR_kubeletVersion:-}"
    local cv="${KPSSH_VAR_containerdVersion:-2.1.4}"
    local rv="${KPSSH_VAR_runcVersion:-1.3.0}"
    local nv="${KPSSH_VAR_cniVersion:-1.7.1}"
    local tmp

    command -v curl >/dev/null 2>&1 || die "the tarball method needs curl on the host"
    if [ -z "$ver" ]; then
        ver="$(curl -fsSL --retry 3 "$kube/release/stable-$minor.txt")" ||
            die "cannot resolve the latest $minor release from $kube"
    fi
    [[ "$ver" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || die "bad kubelet version '$ver'"
    tmp="$(mktemp -d)"
    # shellcheck disable=SC2064 # expand now: tmp is local
    trap "rm -rf '$tmp'" EXIT

    if [ "$(kubelet_minor)" != "$minor" ] || [ "$(kubelet --version 2>/dev/null)" != "Kubernetes $ver" ]; then
        fetch "$kube/release/$ver/bin/linux/$arch/kubelet" "$tmp/kubelet" \
            "$kube/release/$ver/bin/linux/$arch/kubelet.sha256" kubelet
        install -m 0755 "$tmp/kubelet" /usr/local/bin/kubelet
    fi
    if [ "$(containerd --version 2>/dev/null | awk '{ print $3 }')" != "v$cv" ]; then
        fetch "$gh/containerd/containerd/releases/download/v$cv/containerd-$cv-linux-$arch.tar.gz" \
            "$tmp/containerd.tgz" \
            "$gh/containerd/containerd/releases/download/v$cv/containerd-$cv-linux-$arch.tar.gz.sha256sum" \
            "containerd-$cv-linux-$arch.tar.gz"
        tar -C /usr/local -xzf "$tmp/containerd.tgz"
    fi
    if ! /usr/local/sbin/runc --version 2>/dev/null | grep -q "^runc version $rv\$"; then
        fetch "$gh/opencontainers/runc/releases/download/v$rv/runc.$arch" "$tmp/runc" \
            "$gh/opencontainers/runc/releases/download/v$rv/runc.sha256sum" "runc.$arch"
        install -D -m 0755 "$tmp/runc" /usr/local/sbin/runc
    fi
    if [ "$(cat /opt/cni/bin/.kpssh-version 2>/dev/null)" != "$nv" ]; then
        fetch "$gh/containernetworking/plugins/releases/download/v$nv/cni-plugins-linux-$arch-v$nv.tgz" \
            "$tmp/cni.tgz" \
            "$gh/containernetworking/plugins/releases/download/v$nv/cni-plugins-linux-$arch-v$nv.tgz.sha256" \
            "cni-plugins-linux-$arch-v$nv.tgz"
        install -d -m 0755 /opt/cni/bin
        tar -C /opt/cni/bin -xzf "$tmp/cni.tgz"
        echo "$nv" >/opt/cni/bin/.kpssh-version
    fi

    install -d -m 0755 /etc/systemd/system
    cat >/etc/systemd/system/containerd.service <<'EOF'
[Unit]
Description=containerd container runtime (installed by kpssh)
After=network.target local-fs.target

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNOFILE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
EOF
    cat >/etc/systemd/system/kubelet.service <<'EOF'
[Unit]
Description=kubelet (installed by kpssh; flags come from kubelet.service.d/90-kpssh.conf)
Wants=network-online.target
After=network-online.target containerd.service

[Service]
ExecStart=/usr/local/bin/kubelet
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
EOF
}

case "$method" in
apt) install_apt ;;
tarball) install_tarball ;;
*) die "spec.vars.installMethod must be apt or tarball (got '$method')" ;;
esac

# containerd with the systemd cgroup driver, which kubelet-config.yaml also selects.
containerd config default >/etc/containerd/config.toml.kpssh
# Debian's containerd looks for CNI plugins in /usr/lib/cni; kubernetes-cni and CNI agents use
# /opt/cni/bin.
sed -i -e 's/SystemdCgroup = false/SystemdCgroup = true/' \
    -e 's#"/usr/lib/cni"#"/opt/cni/bin"#g' /etc/containerd/config.toml.kpssh
mv -f /etc/containerd/config.toml.kpssh /etc/containerd/config.toml
systemctl daemon-reload
systemctl enable containerd
systemctl restart containerd

# Packages may start kubelet; it has no configuration until join, so keep it down until then.
systemctl disable --now kubelet || true
date -u +%Y-%m-%dT%H:%M:%SZ >/var/lib/kpssh/installed
echo "kpssh: tls-bootstrap installed (kubelet $(kubelet --version 2>/dev/null || echo '?'), $arch)"
