#!/usr/bin/env bash
# Tear down what up.sh and host.sh created for this lab (KPSSH_LAB_ID): the
# hosts (their processes, namespaces, veths), the control-plane processes it
# recorded (by PID, never by name), the etcd tmpfs, the bridge, and the lab
# directory except logs/ (kept for post-mortems; up.sh clears it).
# Safe to run twice and when nothing is up.
#
# Usage: tests/lab/down.sh [--quiet]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
quiet=0
[[ ${1:-} == --quiet ]] && quiet=1
need_root

if [[ -d $LAB_DIR || -n $(ip netns list 2>/dev/null | awk -v p="^${LAB_NETNS_PREFIX}[0-9]" '$1 ~ p') ]]; then
    ((quiet)) || log "tearing down lab $LAB_ID ($LAB_DIR)"
    "$LAB_SCRIPT_DIR/host.sh" del-all
fi

for c in kube-scheduler kube-controller-manager kube-apiserver etcd; do
    f=$LAB_DIR/pids/$c.pid
    if pid_alive "$f"; then
        ((quiet)) || log "stopping $c (pid $(<"$f"))"
    fi
    kill_pidfile "$f" 15
done

if [[ -s $LAB_DIR/state/etcd-mount ]]; then
    m=$(<"$LAB_DIR/state/etcd-mount")
    if mountpoint -q "$m"; then umount "$m" || umount -l "$m"; fi
    rm -f "$LAB_DIR/state/etcd-mount"
elif mountpoint -q "$LAB_DIR/etcd" 2>/dev/null; then
    umount "$LAB_DIR/etcd" || umount -l "$LAB_DIR/etcd"
fi

# The bridge name is derived from the lab ID, so an existing one is ours.
if ip link show "$LAB_BRIDGE" >/dev/null 2>&1; then
    ip link del "$LAB_BRIDGE"
fi

if [[ -d $LAB_DIR ]]; then
    find "$LAB_DIR" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
fi
((quiet)) || log "lab $LAB_ID is down"
