#!/usr/bin/env bash
# kpssh profile nodeadm-ssm, phase uninstall: deregister from SSM and remove what nodeadm put
# down. Never run by the controller. The next join is cold and needs a fresh activation.
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "kpssh nodeadm-ssm uninstall: must run as root" >&2; exit 1; }

systemctl disable --now kubelet || true
if command -v nodeadm >/dev/null 2>&1; then
    nodeadm uninstall || nodeadm uninstall --skip node-validation
fi
rm -f /etc/nodeadm/nodeConfig.yaml /var/lib/kpssh/installed
echo "kpssh: nodeadm-ssm uninstalled"
