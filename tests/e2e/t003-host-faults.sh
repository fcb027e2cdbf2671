#!/usr/bin/env bash
# e2e: what happens to hosts behind kpssh's back, on two lab hosts with kpssh-controller running
# as its own process and a NodePool that never consolidates on its own (consolidateAfter 10m).
# The reference system's scenarios 3-5, with its budgets (host back within 300 s):
#
#   1. reboot        a warm host reboots (its sshd, host key and files stay): no Node of the pool
#                    appears for 30 s, and the host is probed Available again.
#   2. zombie guard  a joined, empty node's NodeClaim loses its finalizers and is deleted while
#                    the controller is paused (SIGSTOP), so the provider's Delete never runs and the host's kubelet keeps going: the stale
#                    claim is released, the guard finds kubelet active on an unclaimed host
#                    (Warning ZombieKubelet), runs the profile's leave and deletes kpssh's Node
#                    (ZombieLeft); the host is Available, kubelet inactive, and no Node of the
#                    pool comes back for 60 s.
#   3. power outage  a joined, empty node's host is stopped (no sshd, no kubelet) and its
#                    NodeClaim deleted (as a repair would): the leave cannot run, the NodeClaim
#                    goes anyway, the claim is released and exactly that one host is Unhealthy.
#                    The host starts again with kubelet enabled: the guard leaves, the host is
#                    Available, kubelet inactive, and no Node of the pool comes back for 60 s.
#
# Ports: 31000 + 10 * lab ID + 8. Lab hosts 25, 26 (SSHHosts hf-1, hf-2).
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label e2e), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-e2e-hf
APPS=e2e-hf-apps
NP=e2e-hf
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 8))
HOSTS=(25 26)

work="$(mktemp -d)"
pid_ctl=""
pid_sample=""
hosts_added=()

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

cleanup() { pool_cleanup "$NP"; }
trap cleanup EXIT

pool_nodes() { count_of nodes -l karpenter.sh/nodepool="$NP"; }
# no_node_for <seconds>: no Node of the NodePool exists at any 0.5 s sample during that time.
no_node_for() {
    local end=$((SECONDS + $1)) n
    while [ "$SECONDS" -lt "$end" ]; do
        n=$(pool_nodes) && [ "$n" = 0 ] || return 1
        sleep 0.5
    done
}
lab_index() { echo "${HOSTS[$((${1#hf-} - 1))]}"; } # lab_index <SSHHost>: its lab host
in_use_host() {
    kc get sshhost -n "$NS" -o json | jq -r '.items[] | select(.status.state == "InUse") | .metadata.name'
}
one_in_use() { [ "$(in_use_host | wc -l)" = 1 ]; }
host_event() { # host_event <reason> <SSHHost>: an event of that reason about the host
    kc get events -n "$NS" --field-selector "reason=$1,involvedObject.name=$2" -o name | grep -q .
}
unhealthy_count() {
    kc get sshhost -n "$NS" -o json | jq '[.items[] | select(.status.state == "Unhealthy")] | length'
}
# join_one: one pod on the NodePool, Running on a joined host, then scaled away (the node stays:
# consolidateAfter 10m). Sets host (the SSHHost) and claim (its NodeClaim).
join_one() {
    local what=$1
    kc scale deployment web -n "$APPS" --replicas 1 >/dev/null
    check "$what: a host joins for one pod" wait_until 120 running_is 1
    check "$what: one host InUse" wait_until 30 one_in_use
    host=$(in_use_host | awk "NR == 1")
    claim=$(claims | jq -r '.items[0].metadata.name')
    kc scale deployment web -n "$APPS" --replicas 0 >/dev/null
    check "$what: the pod is gone, the node stays" wait_until 60 running_is 0
}

pool_setup hf "${HOSTS[@]}"
pool_nodepool "$NP" hf WhenEmpty 10m 100%
pool_chart "$NS"
pool_controller hf-1 hf-2
pool_deployment web 0 500m no

# --- 1. reboot -----------------------------------------------------------------------------------
# probed_since <SSHHost> <epoch s>: a probe after that time found the host Available.
probed_since() {
    local t
    t=$(kc get sshhost -n "$NS" "$1" -o jsonpath='{.status.lastProbeTime}') || return 1
    [ -n "$t" ] && [ "$(date -d "$t" +%s)" -gt "$2" ] && host_is "$1" Available
}
rebooted=$(date +%s)
"$KPSSH_LAB_HOST_SH" reboot "${HOSTS[0]}" >/dev/null
check "reboot: no Node of the pool for 30 s" no_node_for 30
check "reboot: hf-1 is probed Available after the reboot" wait_until 300 probed_since hf-1 "$rebooted"
check "reboot: kubelet inactive on it" kubelet_inactive "${HOSTS[0]}"

# --- 2. zombie guard -----------------------------------------------------------------------------
join_one zombie
# Behind the controller's back: it is paused (SIGSTOP) while the finalizers go and the NodeClaim
# is deleted, or it would put its finalizer back before the delete and terminate the node the
# ordinary way.
kill -STOP "$pid_ctl"
kc patch nodeclaim "$claim" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null
kc delete nodeclaim "$claim" --wait=false >/dev/null 2>&1 || true
kill -CONT "$pid_ctl"
check "zombie: the NodeClaim is gone without the provider's Delete" wait_until 30 claim_count_is 0
check "zombie: the guard finds the kubelet (ZombieKubelet on $host)" \
    wait_until 300 host_event ZombieKubelet "$host"
check "zombie: $host is Available again" wait_until 300 host_is "$host" Available
check "zombie: kpssh's Node is deleted (ZombieLeft)" host_event ZombieLeft "$host"
check "zombie: kubelet inactive on $host" kubelet_inactive "$(lab_index "$host")"
check "zombie: no Node of the pool for 60 s" no_node_for 60

# --- 3. power outage -------------------------------------------------------------------------------
join_one outage
idx=$(lab_index "$host")
"$KPSSH_LAB_HOST_SH" stop "$idx" >/dev/null
kc delete nodeclaim "$claim" --wait=false >/dev/null
check "outage: the NodeClaim goes although the leave cannot run" wait_until 300 claim_count_is 0
only_unhealthy() { [ "$(unhealthy_count)" = 1 ] && host_is "$1" Unhealthy; }
check "outage: exactly one host Unhealthy ($host)" wait_until 120 only_unhealthy "$host"
claimref=$(kc get sshhost -n "$NS" "$host" -o jsonpath='{.status.claimRef.name}')
check "outage: its claim is released (claimRef '$claimref')" test -z "$claimref"
"$KPSSH_LAB_HOST_SH" start "$idx" >/dev/null
check "outage: the host is back and Available" wait_until 300 host_is "$host" Available
check "outage: kubelet inactive on $host" kubelet_inactive "$idx"
check "outage: no Node of the pool for 60 s" no_node_for 60
tap_done
