#!/bin/bash
# PID 1 of one lab host. host.sh starts it as
#   ip netns exec <ns> unshare --mount --uts --pid --fork --kill-child \
#       --mount-proc --propagation private hostinit.sh <host-dir>
# It gives the host its hostname and private files, starts sshd, starts the
# units the host has enabled (like a boot), then reaps orphans forever.
# Killing it (host.sh stop/reboot) kills every process of the host.
set -euo pipefail
H=$1
# shellcheck disable=SC1091
. "$H/host.env"

hostname "$HOST_NAME"

# Private directories: whatever a script writes there over SSH lands under
# $H/fs, never in the machine's real files.
for d in etc/kubernetes var/lib/kubelet etc/kpssh usr/local/bin etc/systemd/system opt/cni opt/kpssh \
    var/lib/kpssh etc/default etc/sudoers.d home root; do
    [[ -d /$d ]] || mkdir -p "/$d" # empty mount point in the real tree
    [[ -d "$H/fs/${d//\//-}" ]] || mkdir -p "$H/fs/${d//\//-}"
    mount --bind "$H/fs/${d//\//-}" "/$d"
done
for f in etc/hosts etc/hostname etc/passwd etc/group etc/shadow etc/resolv.conf; do
    [[ -e "$H/files/${f//\//-}" ]] || continue # hosts added before the file existed
    mount --bind "$H/files/${f//\//-}" "/$f"
done
# Fresh /tmp, /var/tmp and /run, as after a boot. When the lab itself lives under one of them
# (a checkout in /tmp, as CI may use), the directory holding it is carried over into the fresh
# one, or the host could no longer reach its own scripts, keys and binaries.
fresh_tmpfs() {
    local dir=$1 mode=$2 top
    case "$H/" in
    "$dir"/*)
        top=${H#"$dir"/}
        top=${top%%/*}
        mount --bind "$dir" /mnt
        mount -t tmpfs -o "mode=$mode" tmpfs "$dir"
        mkdir -p "$dir/$top"
        mount --rbind "/mnt/$top" "$dir/$top"
        umount -l /mnt
        ;;
    *) mount -t tmpfs -o "mode=$mode" tmpfs "$dir" ;;
    esac
}
fresh_tmpfs /tmp 1777
fresh_tmpfs /var/tmp 1777
fresh_tmpfs /run 755
mkdir -p /run/sshd
chmod 755 /run/sshd

# What probes see: nproc, uname -m / arch, MemTotal.
mount --bind "$H/files/proc-meminfo" /proc/meminfo
mount --bind "$H/shims/nproc" /usr/bin/nproc
mount --bind "$H/shims/uname" /usr/bin/uname
[[ ! -e /usr/bin/arch ]] || mount --bind "$H/shims/arch" /usr/bin/arch
[[ ! -e /usr/bin/systemctl ]] || mount --bind "$H/shims/systemctl" /usr/bin/systemctl

rm -rf "$H/state/run"
mkdir -p "$H/state/run" "$H/logs"
echo "=== $(date -u +%FT%TZ) boot" >>"$H/logs/sshd.log"
/usr/sbin/sshd -D -e -f "$H/ssh/sshd_config" >>"$H/logs/sshd.log" 2>&1 &
echo $! >"$H/state/run/sshd.pid"

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "$H/shims/systemctl" boot >>"$H/logs/boot.log" 2>&1 || true
echo up >"$H/state/run/booted"

# Reap re-parented daemons (the kubelet stand-in detaches from its session).
set +e
while :; do
    wait
    sleep 1
done
