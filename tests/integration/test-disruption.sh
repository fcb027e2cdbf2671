#!/usr/bin/env bash
# Integration test of voluntary disruption (Emptiness) in kpssh-controller against the lab: a real
# kube-apiserver, kube-controller-manager and kube-scheduler (which binds every pod), real sshd
# hosts, and hollow kubelets that TLS-bootstrap with the token the SSH provider mints. The test
# acts as a user: it creates a NodePool and a Deployment, scales the Deployment to zero and
# annotates a Node; the controller, run as its own process, does everything else.
#
#   1. scale-up     three replicas with hostname anti-affinity: three NodeClaims, three hosts
#                   joined, pods Running; the NodeClaims become Consolidatable.
#   2. drain        a PodDisruptionBudget that allows no disruption, and one NodeClaim deleted by
#                   hand: the Node's pod is not evicted (FailedDraining "evicting pod violates a
#                   PDB", the Node stays); the PDB deleted, the pod is evicted through the
#                   Eviction API (Evicted event), its replacement gets a Node of its own, and the
#                   host goes home; karpenter_pods_eviction_requests_total counts 429 and 200.
#   2b. do-not-disrupt  one Node annotated karpenter.sh/do-not-disrupt: "true".
#   3. empty        the Deployment scaled to 0: no Node goes before consolidateAfter (20s) has
#                   passed since its pod left; then the two other Nodes are disrupted one at a
#                   time (budget nodes: "1", sampled every 0.5 s: never two at once), each with
#                   DisruptionTerminating events; leave runs on each host (kubelet inactive,
#                   asserted over SSH), the Nodes go and the hosts are Available, warm.
#   4. annotated    the annotated Node stays, with a DisruptionBlocked event that names the
#                   annotation; its annotation removed while a budget of "0" has its cron window
#                   open, it still stays (DisruptionBlocked on the NodePool); that budget removed,
#                   it goes the same way. A second "0" budget whose window is closed all along
#                   (set up before step 1) never blocks anything.
#
# Figures printed: pod gone -> first NodeClaim deleted, pod gone -> every host Available, and
# the most Nodes seen disrupting at once. One replica (--disable-leader-election).
# Ports: 31000 + 10 * lab ID + 7. Lab hosts 191..193. Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-dis-it
APPS=dis-apps
NP=dis-np
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 7))
HOSTS=(191 192 193)

work="$(mktemp -d)"
pid_ctl=""
pid_sample=""

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

hosts_added=()
cleanup() { pool_cleanup "$NP"; }
trap cleanup EXIT

# --- helpers -----------------------------------------------------------------------------------
pods_gone() { [ "$(pods_json | jq '.items | length')" = 0 ]; }
node_gone() { ! kc get node "$1" >/dev/null 2>&1; }
# The SSHHost behind a Node (its providerID is kpssh://<pool namespace>/<host>), and the lab
# host index behind that (its address ends in 10 + index).
host_of() {
    local pid
    pid=$(kc get node "$1" -o jsonpath='{.spec.providerID}')
    echo "${pid##*/}"
}
host_index_of() {
    local addr
    addr=$(kc get sshhost -n "$NS" "$(host_of "$1")" -o jsonpath='{.spec.address}')
    echo $((${addr##*.} - 10))
}
live_claims_is() { [ "$(claims | jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length')" = "$1" ]; }
event_on() { # event_on <object name> <reason>
    [ -n "$(kc get events -A --field-selector "involvedObject.name=$1,reason=$2" -o name 2>/dev/null)" ]
}

# --- set-up ------------------------------------------------------------------------------------
pool_setup dis "${HOSTS[@]}"
pool_nodepool "$NP" dis WhenEmpty 20s 1
# A second budget of "0" nodes whose cron window (one minute each hour, half an hour from now,
# UTC) is closed for the whole test: it must not block anything.
closed_min=$(((10#$(date -u +%M) + 30) % 60))
kc patch nodepool "$NP" --type merge -p "{\"spec\":{\"disruption\":{\"budgets\":[{\"nodes\":\"1\"},{\"nodes\":\"0\",\"schedule\":\"$closed_min * * * *\",\"duration\":\"1m\"}]}}}" >/dev/null

pool_controller dis-1 dis-2 dis-3

# --- 1. scale-up -------------------------------------------------------------------------------
pool_deployment web 3 500m yes
check "web: three NodeClaims, one per replica" wait_until 60 claim_count_is 3
check "web: the pods run, one per Node" wait_until 300 running_is 3
check "the busy Nodes are not disrupted (still three NodeClaims after 30 s)" \
    eval "sleep 30; claim_count_is 3"
check "the NodeClaims become Consolidatable" wait_until 60 cond_count_is Consolidatable 3
mapfile -t nodes < <(pods_json | jq -r '.items[].spec.nodeName' | sort)
check "web: three distinct Nodes" test "${#nodes[@]}" = 3

# --- 2. drain: the Eviction API, and a PDB that holds it ----------------------------------------
claim_of() { claims | jq -r --arg n "$1" '.items[] | select(.status.nodeName == $n) | .metadata.name'; }
pod_on() { pods_json | jq -r --arg n "$1" '.items[] | select(.spec.nodeName == $n) | .metadata.name'; }
kc apply -f - >/dev/null <<EOF
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: $APPS}
spec:
  minAvailable: 3
  selector: {matchLabels: {app: web}}
EOF
pdb_ready() { [ "$(kc get pdb -n "$APPS" web -o jsonpath='{.status.observedGeneration}')" = 1 ]; }
check "the PDB is observed (no disruption allowed)" wait_until 60 pdb_ready
drained=${nodes[2]}
drained_pod=$(pod_on "$drained")
drained_host=$(host_index_of "$drained")
kc delete nodeclaim "$(claim_of "$drained")" --wait=false >/dev/null
check "$drained: FailedDraining names the PDB" wait_until 60 eval \
    "kc get events -A --field-selector involvedObject.name=$drained,reason=FailedDraining -o json | jq -e '[.items[] | select(.message | contains(\"evicting pod violates a PDB\"))] | length > 0' >/dev/null"
check "$drained: the PDB holds its pod (still there 10 s later)" eval \
    "sleep 10; kc get pod -n $APPS $drained_pod -o json | jq -e '.metadata.deletionTimestamp == null' >/dev/null"
check "karpenter_pods_eviction_requests_total{code=\"429\"} counts" \
    metric_has 'karpenter_pods_eviction_requests_total{code="429"}'
kc delete pdb -n "$APPS" web >/dev/null
check "$drained_pod: evicted (Evicted event: Forceful Termination)" wait_until 60 eval \
    "kc get events -n $APPS --field-selector involvedObject.name=$drained_pod,reason=Evicted -o json | jq -e '[.items[] | select(.message == \"Evicted pod: Forceful Termination\")] | length > 0' >/dev/null"
check "$drained: the Node is gone" wait_until 120 node_gone "$drained"
check "$drained: kubelet stopped on host $drained_host (leave ran)" kubelet_inactive "$drained_host"
check "web: the evicted pod's replacement runs (three again)" wait_until 300 running_is 3
check "karpenter_pods_eviction_requests_total{code=\"200\"} counts" \
    metric_has 'karpenter_pods_eviction_requests_total{code="200"}'
check "karpenter_pods_drained_total{reason=\"Forceful Termination\"} counts" \
    metric_has 'karpenter_pods_drained_total{reason="Forceful Termination"}'
check "three NodeClaims again, Consolidatable" wait_until 90 cond_count_is Consolidatable 3
mapfile -t nodes < <(pods_json | jq -r '.items[].spec.nodeName' | sort)
check "web: three distinct Nodes again" test "${#nodes[@]}" = 3

# --- 2b. do-not-disrupt on one Node ------------------------------------------------------------
kept=${nodes[0]}
kept_host=$(host_index_of "$kept")
kept_sshhost=$(host_of "$kept")
kc annotate node "$kept" karpenter.sh/do-not-disrupt=true >/dev/null

# --- 3. empty ----------------------------------------------------------------------------------
# A sampler counts, every 0.5 s, the pool's Nodes that are tainted karpenter.sh/disrupted or
# being deleted: the budget allows one at a time.
(while :; do
    kc get nodes -l karpenter.sh/nodepool="$NP" -o json 2>/dev/null | jq '[.items[]
        | select(.metadata.deletionTimestamp != null or any(.spec.taints[]?; .key == "karpenter.sh/disrupted"))]
        | length'
    sleep 0.5
done >"$work/disrupting.samples") &
pid_sample=$!
declare -A idx
for nn in "${nodes[@]}"; do idx[$nn]=$(host_index_of "$nn"); done
kc scale deployment -n "$APPS" web --replicas=0 >/dev/null
check "web: the pods are gone" wait_until 60 pods_gone
t_empty=$(now_ms)
check "no Node goes before consolidateAfter (15 s later: three NodeClaims)" \
    eval "sleep 15; claim_count_is 3"
check "a first Node is disrupted" wait_until 240 live_claims_is 2
t_first=$(($(now_ms) - t_empty))
check "the two Nodes without the annotation are disrupted" wait_until 240 claim_count_is 1
for nn in "${nodes[@]:1}"; do
    check "$nn: the Node is gone" wait_until 120 node_gone "$nn"
    check "$nn: DisruptionTerminating event" event_on "$nn" DisruptionTerminating
    check "$nn: kubelet stopped on host ${idx[$nn]} (leave ran)" kubelet_inactive "${idx[$nn]}"
done
for h in dis-1 dis-2 dis-3; do
    [ "$h" = "$kept_sshhost" ] && continue
    check "host $h is Available again" wait_until 120 host_is "$h" Available
done
t_avail=$(($(now_ms) - t_empty))

# --- 4. the annotated Node ---------------------------------------------------------------------
check "$kept (do-not-disrupt): still there" eval "sleep 20; kc get node $kept >/dev/null"
check "$kept: its NodeClaim stays" claim_count_is 1
check "$kept: DisruptionBlocked event names the annotation" eval \
    "kc get events -A --field-selector involvedObject.name=$kept,reason=DisruptionBlocked -o json | jq -e '[.items[] | select(.message | contains(\"karpenter.sh/do-not-disrupt\"))] | length > 0' >/dev/null"
# A budget of "0" whose window is open (daily from midnight UTC, for 24 h) blocks the pool: with
# the annotation gone the Node still stays, and the NodePool says why.
kc patch nodepool "$NP" --type merge -p '{"spec":{"disruption":{"budgets":[{"nodes":"1"},{"nodes":"0","schedule":"0 0 * * *","duration":"24h"}]}}}' >/dev/null
kc annotate node "$kept" karpenter.sh/do-not-disrupt- >/dev/null
check "$kept: a budget of 0 in an open cron window holds it (still there 30 s later)" eval \
    "sleep 30; claim_count_is 1 && kc get node $kept >/dev/null"
check "$NP: DisruptionBlocked event says the budget blocks" eval \
    "kc get events -A --field-selector involvedObject.name=$NP,reason=DisruptionBlocked -o json | jq -e '[.items[] | select(.message == \"No allowed disruptions for disruption reason Empty due to blocking budget\")] | length > 0' >/dev/null"
check "karpenter_nodepools_allowed_disruptions is 0 while the window is open" eval \
    "body http://127.0.0.1:$PORT/metrics | grep -F 'karpenter_nodepools_allowed_disruptions{' | grep -F 'nodepool=\"$NP\"' | grep -F 'reason=\"Empty\"' | grep -q ' 0$'"
kc patch nodepool "$NP" --type merge -p '{"spec":{"disruption":{"budgets":[{"nodes":"1"}]}}}' >/dev/null
check "$kept: once the annotation and the open-window budget are gone, it is disrupted too" \
    wait_until 120 claim_count_is 0
check "$kept: the Node is gone" wait_until 120 node_gone "$kept"
check "$kept: kubelet stopped on host $kept_host" kubelet_inactive "$kept_host"
for h in dis-1 dis-2 dis-3; do
    check "host $h is Available" wait_until 120 host_is "$h" Available
done
kill "$pid_sample" 2>/dev/null || true
wait "$pid_sample" 2>/dev/null || true
pid_sample=""
most=$(sort -n "$work/disrupting.samples" | tail -n 1)
check "budget nodes: \"1\": never more than one Node disrupting at once (most seen: ${most:-none}, $(wc -l <"$work/disrupting.samples") samples)" \
    test "${most:-9}" -le 1
check "karpenter_nodeclaims_disrupted_total{reason=\"empty\"} counts 3" eval \
    "body http://127.0.0.1:$PORT/metrics | grep '^karpenter_nodeclaims_disrupted_total{' | grep -F 'reason=\"empty\"' | grep -F 'nodepool=\"$NP\"' | grep -q ' 3$'"
check "karpenter_nodepools_allowed_disruptions reports the budget" eval \
    "body http://127.0.0.1:$PORT/metrics | grep -F 'karpenter_nodepools_allowed_disruptions{' | grep -F 'nodepool=\"$NP\"' | grep -F 'reason=\"Empty\"' | grep -q ' 1$'"
check "the controller's log is JSON lines" all_json "$work/ctl.log"

echo "# pods gone -> first NodeClaim deleted: ${t_first} ms (consolidateAfter 20 s + 15 s validation); pods gone -> two hosts Available: ${t_avail} ms"
kill -TERM "$pid_ctl"
wait "$pid_ctl" || true
pid_ctl=""
tap_done
