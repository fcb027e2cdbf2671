# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source this
# Common settings for the kpssh test lab. Sourced by up.sh, down.sh, host.sh
# and pki.sh; never executed on its own.
#
# Everything that could collide between two labs on one machine derives from
# KPSSH_LAB_ID (0..199): bridge and interface names, the subnet, TCP ports and
# the lab directory.

LAB_SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_REPO=$(cd "$LAB_SCRIPT_DIR/../.." && pwd)

LAB_ID=${KPSSH_LAB_ID:-0}
if ! [[ $LAB_ID =~ ^[0-9]+$ ]] || ((LAB_ID > 199)); then
    echo "lab: KPSSH_LAB_ID must be an integer 0..199, got '$LAB_ID'" >&2
    exit 2
fi
LAB_DIR=${KPSSH_LAB_DIR:-$LAB_REPO/_out/lab$LAB_ID}
LAB_BIN=${KPSSH_LAB_BIN:-$LAB_REPO/_out/k8s/bin}

LAB_BRIDGE=kt${LAB_ID}br
LAB_SUBNET_PREFIX=10.213.$LAB_ID
LAB_GW=$LAB_SUBNET_PREFIX.1
LAB_NETNS_PREFIX=kt$LAB_ID-h

LAB_API_PORT=$((16443 + LAB_ID))
LAB_ETCD_PORT=$((22379 + 2 * LAB_ID))
LAB_ETCD_PEER_PORT=$((22380 + 2 * LAB_ID))
LAB_KCM_PORT=$((24257 + LAB_ID))
LAB_SCHED_PORT=$((24659 + LAB_ID))

LAB_SERVICE_CIDR=10.0.0.0/24
LAB_API_URL=https://$LAB_GW:$LAB_API_PORT

log() { printf '[lab%s %s] %s\n' "$LAB_ID" "$(date +%H:%M:%S)" "$*" >&2; }
die() {
    printf '[lab%s] ERROR: %s\n' "$LAB_ID" "$*" >&2
    exit 1
}

need_root() { [[ $(id -u) == 0 ]] || die "must run as root (network namespaces, mounts)"; }

need_bins() {
    local b
    for b in "$@"; do
        [[ -x $LAB_BIN/$b ]] || die "missing $LAB_BIN/$b - run tests/k8s-harness/build.sh first"
    done
}

# pid_alive PIDFILE: true when the recorded process still exists and its
# command line mentions the lab directory or bin directory (guards against a
# recycled PID belonging to somebody else).
pid_alive() {
    local f=$1 pid
    [[ -s $f ]] || return 1
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/cmdline ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -e "$LAB_DIR" -e "$LAB_BIN" || return 1
    [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]
}

# kill_pidfile PIDFILE [TIMEOUT_S]: TERM then KILL a recorded process.
kill_pidfile() {
    local f=$1 t=${2:-10} pid i
    if pid_alive "$f"; then
        pid=$(<"$f")
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < t * 10; i++)); do
            pid_alive "$f" || break
            sleep 0.1
        done
        if pid_alive "$f"; then
            log "pid $pid ($f) ignored TERM; sending KILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    fi
    rm -f "$f"
}

# start NAME CMD...: run a daemon in its own session, record its PID.
start() {
    local name=$1
    shift
    setsid "$@" </dev/null >"$LAB_DIR/logs/$name.log" 2>&1 &
    echo $! >"$LAB_DIR/pids/$name.pid"
}

# api_readyz: the API server answers /readyz (admin credentials).
api_readyz() {
    local p=$LAB_DIR/pki
    curl -fsS --cacert "$p/ca.crt" --cert "$p/admin.crt" --key "$p/admin.key" "$LAB_API_URL/readyz"
}

# wait_for SECONDS DESCRIPTION CMD...: poll CMD every 0.5 s.
wait_for() {
    local t=$1 i
    shift 2 # $2 names what is awaited, for the reader
    for ((i = 0; i < t * 2; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    return 1
}

kc() { "$LAB_BIN/kubectl" --kubeconfig "$LAB_DIR/pki/admin.kubeconfig" "$@"; }

host_dir() { echo "$LAB_DIR/hosts/h$1"; }
host_ns() { echo "$LAB_NETNS_PREFIX$1"; }
host_veth() { echo "kt${LAB_ID}h$1"; }
host_ip() { echo "$LAB_SUBNET_PREFIX.$((10 + $1))"; }
host_name() { echo "host-$1"; }
