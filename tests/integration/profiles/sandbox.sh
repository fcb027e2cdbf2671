#!/usr/bin/env bash
# Runs on a lab host as root, with a phase stream (runner preamble + shipped script) on stdin:
#   bash sandbox.sh [--standins] [--no-memcg]
# The lab makes /etc/kubernetes, /var/lib/kubelet, /etc/systemd/system, /opt/cni, /usr/local/bin
# and a few more private to each host. The profiles also write to directories the lab leaves
# shared with the real machine (/etc/containerd, /etc/sysctl.d, /etc/apt, /etc/nodeadm, ...);
# this wrapper gives each of those a per-host directory under /home/kpssh-prof-test/root (the
# lab host's private /home), in a mount namespace of its own, and then runs `bash -s` on the
# unchanged stream. --standins puts the test's stand-in apt-get, curl, nodeadm, ... first on PATH;
# --no-memcg shows a kernel without the memory cgroup controller.
set -euo pipefail
base=/home/kpssh-prof-test
standins=0 nomemcg=0
for a in "$@"; do
    case "$a" in
    --standins) standins=1 ;;
    --no-memcg) nomemcg=1 ;;
    *) echo "sandbox: unknown option $a" >&2; exit 64 ;;
    esac
done
if [ -z "${KP_SANDBOXED:-}" ]; then
    export KP_SANDBOXED=1
    exec unshare --mount --propagation private bash "$0" "$@"
fi
for d in /etc/containerd /etc/modules-load.d /etc/sysctl.d /etc/cni /etc/apt /etc/nodeadm \
    /var/lib/amazon /usr/lib/cni /usr/local/sbin; do
    mkdir -p "$base/root$d"
    # The lab creates its own mount points in the real tree the same way; these stay empty.
    [ -d "$d" ] || mkdir -p "$d"
    mount --bind "$base/root$d" "$d"
done
if [ "$nomemcg" = 1 ]; then
    awk '$1 == "memory" { $4 = 0 } { print }' OFS='\t' /proc/cgroups >"$base/cgroups.fake"
    mount --bind "$base/cgroups.fake" /proc/cgroups
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        sed 's/\bmemory\b//' /sys/fs/cgroup/cgroup.controllers >"$base/controllers.fake"
        mount --bind "$base/controllers.fake" /sys/fs/cgroup/cgroup.controllers
    fi
fi
unset KP_SANDBOXED
if [ "$standins" = 1 ]; then
    export PATH="$base/standins:$PATH"
fi
exec bash -s
