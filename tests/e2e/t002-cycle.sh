#!/usr/bin/env bash
# e2e: the whole pool from 0 to every host and back to 0, timed, with kpssh-controller running as
# its own process under nothing but the RBAC the Helm chart renders (helm template: its
# ServiceAccount, ClusterRole, Roles, bindings and admission policies; its token is the
# controller's only credential, and the environment is the chart Deployment's). Installed from the
# repository's CRDs, the shipped tls-bootstrap join and leave scripts and a NodePool as users
# write them; kube-scheduler binds every pod.
#
#   1. up     a Deployment of four one-CPU pods, one per node (hostname anti-affinity), on a pool
#             of four 2-CPU hosts: four NodeClaims, every host InUse, every pod Running.
#   2. down   scaled to 0: every node is empty, drained, deleted; every host leaves (kubelet
#             inactive over SSH: the consolidation scenario's condition) and is Available again;
#             no NodeClaim, Node or bootstrap token Secret is left.
#   3. RBAC   the controller logged no 403 (forbidden) the whole time.
#   4. bill   what EKS Hybrid Nodes bills is the Node object: the Nodes' lifetimes summed over the
#             cycle (creationTimestamp to gone, sampled every 0.5 s) equal the attached time
#             kpssh reports (kpssh_host_attached_seconds_total{class="e2e"}, and 2 vCPUs each for
#             _vcpu_seconds_total) within the sampling error, and no Node outlives its kubelet:
#             each Node is gone within 5 s of its host's leave (which stops kubelet).
#
# Figures printed: the cycle's split from the controller's log (scale-up: pending -> last NodeClaim
# created, -> last host claimed, -> last host joined, -> last NodeClaim registered, -> every pod
# Running; scale-down: 0 replicas -> last node disrupting, -> last host left, -> every host
# Available). Ports: 31000 + 10 * lab ID + 7. Lab hosts 21..24.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label e2e), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
REL=kpssh-e2e
NS=kpssh-e2e # the release's namespace, and the pool namespace (the chart's default)
APPS=e2e-apps
NP=e2e-np
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 7))
HOSTS=(21 22 23 24)
N=${#HOSTS[@]}

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

# --- set-up: the chart's RBAC, the pool --------------------------------------------------------
pool_setup e2e "${HOSTS[@]}"
pool_chart "$REL"
pool_start
check "the controller is ready under the chart's RBAC" \
    wait_until 90 is_code 200 "http://127.0.0.1:$PORT/readyz"
for i in $(seq 1 "$N"); do
    check "host e2e-$i is probed Available" wait_until 90 host_is "e2e-$i" Available
done
pool_nodepool "$NP" e2e WhenEmpty 5s 100%

tokens() { count_of secrets -n kube-system --field-selector type=bootstrap.kubernetes.io/token; }
tokens_before=$(tokens)

# The Nodes of the NodePool every 0.5 s: "<name> <creation epoch s> <sample time ms>" lines.
(while :; do
    now=$(now_ms)
    kc get nodes -l karpenter.sh/nodepool="$NP" -o json 2>/dev/null |
        jq -r --arg now "$now" '.items[] | "\(.metadata.name) \(.metadata.creationTimestamp | fromdate) \($now)"' \
        >>"$work/nodes.samples" || true
    sleep 0.5
done) &
pid_sample=$!

# --- 1. up ---------------------------------------------------------------------------------------
t_up=$(now_ms)
pool_deployment web "$N" 1 yes
check "up: $N NodeClaims" wait_until 60 claim_count_is "$N"
check "up: every pod Running" wait_until 300 running_is "$N"
t_running=$(now_ms)
in_use() { [ "$(kc get sshhost -n "$NS" -o json | jq '[.items[] | select(.status.state == "InUse")] | length')" = "$N" ]; }
check "up: every host InUse" wait_until 30 in_use

# --- 2. down -------------------------------------------------------------------------------------
t_down=$(now_ms)
kc scale deployment web -n "$APPS" --replicas 0 >/dev/null
check "down: every NodeClaim gone" wait_until 300 claim_count_is 0
all_available() {
    local i
    for i in $(seq 1 "$N"); do host_is "e2e-$i" Available || return 1; done
}
check "down: every host Available again" wait_until 120 all_available
t_available=$(now_ms)
for i in "${HOSTS[@]}"; do
    check "down: kubelet inactive on lab host $i" kubelet_inactive "$i"
done
check "down: no Node of the NodePool left" none_of nodes -l karpenter.sh/nodepool="$NP"
check "down: no bootstrap token Secret left behind ($tokens_before before, $(tokens) after)" \
    test "$(tokens)" -le "$tokens_before"

# --- 3. RBAC ---------------------------------------------------------------------------------------
check "RBAC: the controller was never forbidden" not_in_file 'forbidden' "$work/ctl.log"
check "RBAC: nor answered 403" not_in_file '"code":403' "$work/ctl.log"

# --- 4. bill ----------------------------------------------------------------------------------------
sleep 1
kill "$pid_sample" 2>/dev/null
wait "$pid_sample" 2>/dev/null || true
pid_sample=""
# A Node's lifetime: from its creationTimestamp to the last sample that saw it (up to 0.5 s short).
lifetimes=$(awk '{ c[$1] = $2; if ($3 > l[$1]) l[$1] = $3 }
    END { for (n in c) { s += l[n] / 1000 - c[n]; k++ } printf "%.1f %d", s, k }' "$work/nodes.samples")
sampled=${lifetimes% *}
nodes_seen=${lifetimes#* }
metric() { body "http://127.0.0.1:$PORT/metrics" | awk -v m="$1{class=\"e2e\"}" '$1 == m { print $2 }'; }
attached=$(metric kpssh_host_attached_seconds_total)
vcpu=$(metric kpssh_host_attached_vcpu_seconds_total)
check "bill: the sampler saw the $N Nodes (saw $nodes_seen)" test "$nodes_seen" = "$N"
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }
check "bill: Node lifetimes ${sampled} s = kpssh's attached time ${attached:-none} s (within $((N + 1)) s)" \
    within "${attached:-0}" "$sampled" $((N + 1))
check "bill: attached vCPU-seconds ${vcpu:-none} = 2 x the attached seconds" \
    within "${vcpu:-0}" "$(awk -v a="${attached:-0}" 'BEGIN { print 2 * a }')" 2
# host left (leave has stopped kubelet) -> Node gone, per NodeClaim (the Node has its name).
gaps=$(jq -rs '([.[] | select(.message == "host left") | {(.nodeclaim): .time}] | add // {}) as $left
    | def secs: sub("\\.[0-9]+Z$"; "Z") | fromdate;
    [.[] | select(.message == "deleted node" and $left[.Node]) | ((.time | secs) - ($left[.Node] | secs))]
    | map(tostring) | join(" ")' "$work/ctl.log")
gaps_ok() { # every NodeClaim has a gap, none over 5 s
    local g n=0
    for g in $gaps; do
        n=$((n + 1))
        [ "$g" -le 5 ] || return 1
    done
    [ "$n" = "$N" ]
}
gaps_said() { # on failure, the log lines the gaps were made of
    gaps_ok && return 0
    jq -c 'select(.message == "host left" or .message == "deleted node")
        | {time, message, Node, nodeclaim, host, controller}' "$work/ctl.log" | sed 's/^/# /' >&2
    return 1
}
check "bill: no Node outlives its kubelet: $N Nodes gone within 5 s of their leave (gaps: ${gaps:-none} s)" \
    gaps_said

# --- figures ---------------------------------------------------------------------------------------
at() { # at <message> <t0 ms>: seconds from t0 to the Nth (last of N) log line with the message
    local ms
    ms=$(log_ms "$work/ctl.log" "$1" "$N") || {
        echo "-"
        return
    }
    awk -v a="$2" -v b="$ms" 'BEGIN { printf "%.1f", (b - a) / 1000 }'
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }
echo "# figure: 0 -> $N hosts: last NodeClaim created $(at "created nodeclaim" "$t_up") s," \
    "claimed $(at "host claimed" "$t_up") s, joined $(at "host joined" "$t_up") s," \
    "registered $(at "registered nodeclaim" "$t_up") s, pods Running $(secs "$t_up" "$t_running") s"
echo "# figure: $N -> 0 hosts: last node disrupting $(at "deleting node" "$t_down") s," \
    "left $(at "host left" "$t_down") s, every host Available $(secs "$t_down" "$t_available") s"
echo "# figure: the whole cycle $(secs "$t_up" "$t_available") s"
tap_done
