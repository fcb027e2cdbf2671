#!/usr/bin/env bash
# kpssh profile nodeadm-ssm, phase leave: stop being billed, stay warm.
# Disables and stops kubelet and containerd only. The SSM registration, certificates, node config
# and binaries stay, so the next join is warm and consumes no activation; disabled units keep the
# host out across reboots. Never `nodeadm uninstall` here: it deregisters the managed instance.
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "kpssh nodeadm-ssm leave: must run as root" >&2; exit 1; }

for unit in kubelet containerd; do
    if ! systemctl disable --now "$unit"; then
        if systemctl is-active --quiet "$unit"; then
            echo "kpssh nodeadm-ssm leave: could not stop $unit; the node stays billed" >&2
            exit 1
        fi
    fi
done
echo "kpssh: left the cluster; kubelet and containerd disabled, SSM registration kept"
