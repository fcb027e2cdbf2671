#!/usr/bin/env bash
# kpssh profile nodeadm-ssm, phase install: nodeadm (the EKS Hybrid Nodes build) and what
# `nodeadm install` puts down: kubelet, containerd, CNI plugins and the SSM agent.
# Skipped entirely when nodeadm and kubelet are already there (a pre-baked image).
#
# Variables: region (required), k8sVersion (required, e.g. 1.34),
#            nodeadmMirror (default https://hybrid-assets.eks.amazonaws.com)
set -euo pipefail

die() {
    echo "kpssh nodeadm-ssm install: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (nodeadm requires it)"
region="${KPSSH_VAR_region:-}"
k8s="${KPSSH_VAR_k8sVersion:-}"
[[ "$region" =~ ^[a-z0-9-]+$ ]] || die "set spec.vars.region on the SSHNodeClass (e.g. eu-central-1)"
[[ "$k8s" =~ ^[0-9]+\.[0-9]+$ ]] || die "set spec.vars.k8sVersion on the SSHNodeClass (e.g. 1.34)"
mirror="${KPSSH_VAR_nodeadmMirror:-https://hybrid-assets.eks.amazonaws.com}"

install -d -m 0755 /var/lib/kpssh
if command -v nodeadm >/dev/null 2>&1 && command -v kubelet >/dev/null 2>&1; then
    echo "kpssh: nodeadm and kubelet already installed; skipping nodeadm install"
else
    case "$(uname -m)" in
    x86_64 | amd64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) die "unsupported architecture $(uname -m): EKS Hybrid Nodes run on amd64 or arm64" ;;
    esac
    if ! command -v nodeadm >/dev/null 2>&1; then
        curl -fsSL --retry 3 -o /usr/local/bin/nodeadm.part \
            "$mirror/releases/latest/bin/linux/$arch/nodeadm" || die "cannot download nodeadm"
        chmod 0755 /usr/local/bin/nodeadm.part
        mv -f /usr/local/bin/nodeadm.part /usr/local/bin/nodeadm
    fi
    nodeadm install "$k8s" --credential-provider ssm --region "$region"
fi
# nodeadm starts nothing at install; make sure a pre-baked image does not either.
systemctl disable --now kubelet || true
date -u +%Y-%m-%dT%H:%M:%SZ >/var/lib/kpssh/installed
echo "kpssh: nodeadm-ssm installed for Kubernetes $k8s in $region"
