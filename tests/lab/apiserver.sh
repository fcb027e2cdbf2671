#!/usr/bin/env bash
# Stops, starts or restarts the lab's kube-apiserver with the flags up.sh gave it, for tests of
# clients that must survive an API server restart (watches, informers, leader election).
#   tests/lab/apiserver.sh stop|start|restart      (KPSSH_LAB_ID selects the lab)
# start waits until /readyz answers. Only the process up.sh recorded is stopped, by PID.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need_root

cmdfile=$LAB_DIR/state/kube-apiserver.cmd
pidfile=$LAB_DIR/pids/kube-apiserver.pid
[[ -s $cmdfile ]] || die "no recorded kube-apiserver command in $cmdfile: is lab $LAB_ID up?"

do_stop() {
    kill_pidfile "$pidfile" 30
    log "kube-apiserver stopped"
}
do_start() {
    local -a cmd
    pid_alive "$pidfile" && die "kube-apiserver is already running"
    # The file holds the command line quoted by printf %q in up.sh.
    eval "cmd=($(<"$cmdfile"))"
    start kube-apiserver "${cmd[@]}"
    wait_for 120 kube-apiserver api_readyz || die "kube-apiserver not ready within 120 s"
    log "kube-apiserver ready"
}

case ${1:-} in
stop) do_stop ;;
start) do_start ;;
restart)
    do_stop
    do_start
    ;;
*)
    echo "usage: $0 stop|start|restart" >&2
    exit 2
    ;;
esac
