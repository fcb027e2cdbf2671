#!/usr/bin/env bash
# kpssh profile tls-bootstrap, phase uninstall: remove what install and join put on the host.
# Never run by the controller; for repair by hand. The next claim runs install again.
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "kpssh tls-bootstrap uninstall: must run as root" >&2; exit 1; }

systemctl disable --now kubelet || true
if command -v apt-get >/dev/null 2>&1 && dpkg -s kubelet >/dev/null 2>&1; then
    apt-mark unhold kubelet >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -q kubelet kubernetes-cni
fi
rm -f /usr/local/bin/kubelet /etc/systemd/system/kubelet.service
rm -f /etc/systemd/system/kubelet.service.d/90-kpssh.conf
rm -f /etc/systemd/system/kubelet.service.d/10-kpssh.conf
rm -f /etc/apt/sources.list.d/kubernetes.list /etc/apt/keyrings/kubernetes-apt-keyring.gpg
rm -f /etc/modules-load.d/kpssh-k8s.conf /etc/sysctl.d/99-kpssh-k8s.conf
rm -rf /etc/kubernetes /var/lib/kubelet /etc/cni /opt/cni /var/lib/kpssh
systemctl daemon-reload
echo "kpssh: tls-bootstrap uninstalled (containerd kept, disabled)"
