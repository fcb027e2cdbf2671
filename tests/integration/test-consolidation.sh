#!/usr/bin/env bash
# Integration test of single-node consolidation (reason Underutilized) in kpssh-controller
# against the lab: a real kube-apiserver, kube-controller-manager and kube-scheduler (which binds
# every pod), real sshd hosts and hollow kubelets. The test acts as a user: a NodePool with
# consolidationPolicy WhenEmptyOrUnderutilized, two Deployments that fill four nodes, one of them
# then deleted so each node is a third used; the controller, run as its own process, does the
# rest.
#
#   1. scale-up     "filler", four replicas of 700m CPU with hostname anti-affinity: four
#                   NodeClaims on 2-CPU hosts; then "web", four replicas of 700m without
#                   constraints: kube-scheduler can only put one beside each filler pod.
#   2. scale-down   "filler" deleted: each node holds one web pod and is underutilized, since
#                   two web pods fit one host. A PDB with minAvailable 4 holds every node first
#                   (DisruptionBlocked "Pdb prevents pod evictions ..."); once it is deleted,
#                   multi-node consolidation takes two nodes in one command (budget nodes:
#                   "2"), their pods evicted onto the others: the NodeClaims go down to two, the freed hosts leave (kubelet inactive over
#                   SSH) and are Available, every pod of the Deployment Runs at the end.
#                   Sampled every 0.5 s through it: never a pod kube-scheduler could not place
#                   (PodScheduled=False/Unschedulable), never more NodeClaims than before (no
#                   capacity was needed), never three Nodes disrupting at once.
#   3. events and metrics: DisruptionTerminating "Disrupting Node: Underutilized",
#                   karpenter_nodeclaims_disrupted_total{reason="underutilized"},
#                   karpenter_voluntary_disruption_decisions_total{consolidation_type="multi"}.
#   4. replace      a second NodePool over two host classes, "conbig" (one 4-CPU host, $0.08/h)
#                   and "consmall" (one 2-CPU host, $0.04/h). A 2500m pod takes the big host;
#                   a 500m pod joins it; the 2500m pod is deleted. Single-node consolidation
#                   (budget nodes: "1") replaces the big node:
#                   a consmall NodeClaim is launched (DisruptionLaunching), the big NodeClaim
#                   is deleted only once it is Initialized, the 500m pod runs on the small
#                   node, never unschedulable, and the big host goes back Available.
#
# Figures printed: PDB deleted -> two NodeClaims left, and the samples' maxima.
# One replica (--disable-leader-election). Ports: 31000 + 10 * lab ID + 5. Lab hosts 171..176.
# Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-con-it
APPS=con-apps
NP=con-np
NP2=con-big-np
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 5))
HOSTS=(171 172 173 174)

work="$(mktemp -d)"
pid_ctl=""
pid_sample=""

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

cleanup() { pool_cleanup "$NP" "$NP2"; }
trap cleanup EXIT

# --- helpers -----------------------------------------------------------------------------------

# --- set-up ------------------------------------------------------------------------------------
pool_setup con "${HOSTS[@]}"
pool_nodepool "$NP" con WhenEmptyOrUnderutilized 20s 2

pool_controller con-1 con-2 con-3 con-4

# --- 1. scale-up -------------------------------------------------------------------------------
filler_running() { [ "$(kc get pods -n "$APPS" -l app=filler -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 4 ]; }
pool_deployment filler 4 700m yes
check "filler: four NodeClaims, one per replica" wait_until 90 claim_count_is 4
check "filler: the four pods run" wait_until 300 filler_running
pool_deployment web 4 700m no
check "web: the four pods run beside them" wait_until 120 running_is 4
check "web: one pod on each Node" eval \
    "[ \$(pods_json | jq '[.items[].spec.nodeName] | unique | length') = 4 ]"
check "four NodeClaims still" claim_count_is 4

# --- 2. scale-down: underutilized nodes are consolidated ----------------------------------------
# Every 0.5 s: pods kube-scheduler could not place, the pool's NodeClaims, and its Nodes that are
# tainted karpenter.sh/disrupted or being deleted.
(while :; do
    u=$(pods_json | jq '[.items[] | select(any(.status.conditions[]?; .type == "PodScheduled" and .reason == "Unschedulable"))] | length')
    c=$(claims | jq '.items | length')
    d=$(kc get nodes -l karpenter.sh/nodepool="$NP" -o json 2>/dev/null | jq '[.items[]
        | select(.metadata.deletionTimestamp != null or any(.spec.taints[]?; .key == "karpenter.sh/disrupted"))]
        | length')
    echo "$u $c $d"
    sleep 0.5
done >"$work/samples") &
pid_sample=$!
# A PodDisruptionBudget that allows no web pod to go holds every node first.
kc apply -f - >/dev/null <<EOF
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: $APPS}
spec:
  minAvailable: 4
  selector: {matchLabels: {app: web}}
EOF
kc delete deployment -n "$APPS" filler --wait=false >/dev/null
filler_gone() { [ "$(kc get pods -n "$APPS" -l app=filler -o json | jq '.items | length')" = 0 ]; }
check "filler: gone" wait_until 60 filler_gone
pdb_blocked() {
    kc get events -A --field-selector reason=DisruptionBlocked -o json |
        jq -e '[.items[] | select(.involvedObject.kind == "Node" and (.message | contains("Pdb prevents pod evictions (PodDisruptionBudget=[con-apps/web])")))] | length > 0' >/dev/null
}
check "the PDB blocks: DisruptionBlocked names it" wait_until 90 pdb_blocked
check "the PDB holds every node (four NodeClaims, 30 s on)" eval "sleep 30; claim_count_is 4"
kc delete pdb -n "$APPS" web >/dev/null
t_down=$(now_ms)
check "consolidation: down to two NodeClaims" wait_until 420 claim_count_is 2
t_two=$(($(now_ms) - t_down))
check "web: the four pods run on what is left" wait_until 120 running_is 4
check "the two NodeClaims left hold the pods" eval \
    "[ \$(pods_json | jq '[.items[].spec.nodeName] | unique | length') -le 2 ]"
freed=0
for h in con-1 con-2 con-3 con-4; do
    check "host $h is Available or in use" wait_until 120 eval \
        "host_is $h Available || host_is $h InUse"
    if host_is "$h" Available; then
        freed=$((freed + 1))
        idx=$(($(kc get sshhost -n "$NS" "$h" -o jsonpath='{.spec.address}' | sed 's/.*\.//') - 10))
        check "host $h: kubelet stopped (leave ran)" kubelet_inactive "$idx"
    fi
done
check "two hosts went back to the pool" test "$freed" = 2
kill "$pid_sample" 2>/dev/null || true
wait "$pid_sample" 2>/dev/null || true
pid_sample=""
max_u=$(awk '{print $1}' "$work/samples" | sort -n | tail -n 1)
max_c=$(awk '{print $2}' "$work/samples" | sort -n | tail -n 1)
max_d=$(awk '{print $3}' "$work/samples" | sort -n | tail -n 1)
n_samples=$(wc -l <"$work/samples")
check "no pod was ever left without a place (most unschedulable at once: ${max_u:-none}, $n_samples samples)" \
    test "${max_u:-9}" = 0
check "no new capacity was needed (most NodeClaims: ${max_c:-none})" test "${max_c:-9}" -le 4
check "budget nodes: \"2\": never three Nodes disrupting at once (most: ${max_d:-none})" \
    test "${max_d:-9}" -le 2

# --- 3. events and metrics ---------------------------------------------------------------------
check "DisruptionTerminating events say Underutilized" eval \
    "kc get events -A --field-selector reason=DisruptionTerminating -o json | jq -e '[.items[] | select(.message == \"Disrupting Node: Underutilized\")] | length >= 2' >/dev/null"
check "karpenter_nodeclaims_disrupted_total{reason=\"underutilized\"} counts" \
    metric_has 'karpenter_nodeclaims_disrupted_total{' 'reason="underutilized"'
check "karpenter_voluntary_disruption_decisions_total{consolidation_type=\"multi\"} counts" \
    metric_has 'karpenter_voluntary_disruption_decisions_total{decision="delete"' 'consolidation_type="multi"'
# --- 4. replace: a big node whose pods fit a small one -------------------------------------------
POOL_CPU=4 pool_hosts "$NS" conbig con-key conbig 175
pool_hosts "$NS" consmall con-key consmall 176
pool_nodeclass conbig conbig con-tls
kc patch sshnodeclass conbig --type=merge -p '{"spec":{"pricePerCPUHour":"0.02","hostSelector":{"matchLabels":null,"matchExpressions":[{"key":"karpenter.kpssh.dev/host-class","operator":"In","values":["conbig","consmall"]}]}}}' >/dev/null
pool_nodepool "$NP2" conbig WhenEmptyOrUnderutilized 20s 1
check "hosts conbig-1 and consmall-1 are probed Available" wait_until 90 eval \
    "host_is conbig-1 Available && host_is consmall-1 Available"
app_node() { kc get pods -n "$APPS" -l app="$1" -o json | jq -r '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)][0].spec.nodeName // ""'; }
app_runs() { [ -n "$(app_node "$1")" ]; }
claims2() { kc get nodeclaims -l karpenter.sh/nodepool="$NP2" -o json 2>/dev/null || echo '{"items":[]}'; }
pool_deployment hog 1 2500m no "$NP2"
check "hog (2500m): runs on a conbig node" wait_until 300 app_runs hog
big_node=$(app_node hog)
check "hog's node is of instance type conbig" test \
    "$(kc get node "$big_node" -o jsonpath='{.metadata.labels.node\.kubernetes\.io/instance-type}')" = conbig
big_claim=$(claims2 | jq -r --arg n "$big_node" '.items[] | select(.status.nodeName == $n) | .metadata.name')
pool_deployment light 1 500m no "$NP2"
check "light (500m): runs beside it" wait_until 120 eval "[ \"\$(app_node light)\" = $big_node ]"
# Every 0.5 s: is light unschedulable, and is the big NodeClaim going (deleting or gone) while
# no consmall NodeClaim is Initialized (the replacement must come first)?
(while :; do
    u=$(kc get pods -n "$APPS" -l app=light -o json 2>/dev/null | jq '[.items[] | select(any(.status.conditions[]?; .type == "PodScheduled" and .reason == "Unschedulable"))] | length')
    early=$(claims2 | jq --arg b "$big_claim" '
        ([.items[] | select(.metadata.name == $b and .metadata.deletionTimestamp == null)] | length) as $live
        | ([.items[] | select(.metadata.labels["node.kubernetes.io/instance-type"] == "consmall"
            and any(.status.conditions[]?; .type == "Initialized" and .status == "True"))] | length) as $ready
        | if $live == 0 and $ready == 0 then 1 else 0 end')
    echo "$u $early"
    sleep 0.5
done >"$work/samples2") &
pid_sample=$!
t_hog=$(now_ms)
kc delete deployment -n "$APPS" hog --wait=false >/dev/null
small_claim() { claims2 | jq -r '.items[] | select(.metadata.labels["node.kubernetes.io/instance-type"] == "consmall" or any(.spec.requirements[]; .key == "node.kubernetes.io/instance-type" and .values == ["consmall"])) | .metadata.name' | awk 'NR == 1'; }
has_small_claim() { [ -n "$(small_claim)" ]; }
check "replace: a consmall NodeClaim is launched" wait_until 240 has_small_claim
repl=$(small_claim)
echo "# replacement: $repl"
check "$big_node: DisruptionLaunching event" wait_until 30 eval \
    "kc get events -A --field-selector involvedObject.name=$big_node,reason=DisruptionLaunching -o json | jq -e '[.items[] | select(.message == \"Launching NodeClaim: Underutilized\")] | length > 0' >/dev/null"
check "the big NodeClaim goes" wait_until 300 eval "! kc get nodeclaim $big_claim >/dev/null 2>&1"
t_replaced=$(($(now_ms) - t_hog))
check "light runs on the consmall node" wait_until 120 eval \
    "[ \"\$(kc get node \"\$(app_node light)\" -o jsonpath='{.metadata.labels.node\\.kubernetes\\.io/instance-type}')\" = consmall ]"
check "host conbig-1 is Available again" wait_until 120 host_is conbig-1 Available
kill "$pid_sample" 2>/dev/null || true
wait "$pid_sample" 2>/dev/null || true
pid_sample=""
max_u2=$(awk '{print $1}' "$work/samples2" | sort -n | tail -n 1)
early=$(awk '{print $2}' "$work/samples2" | sort -n | tail -n 1)
check "light was never unschedulable (most: ${max_u2:-none}, $(wc -l <"$work/samples2") samples)" \
    test "${max_u2:-9}" = 0
check "the big NodeClaim was never deleted before the replacement was Initialized" \
    test "${early:-9}" = 0
check "karpenter_voluntary_disruption_decisions_total{decision=\"replace\"} counts" \
    metric_has 'karpenter_voluntary_disruption_decisions_total{' 'decision="replace"'
check "karpenter_nodeclaims_created_total{reason=\"underutilized\"} counts" \
    metric_has 'karpenter_nodeclaims_created_total{' 'reason="underutilized"'

check "the controller's log is JSON lines" all_json "$work/ctl.log"

echo "# PDB deleted -> two NodeClaims: ${t_two} ms (consolidateAfter 20 s, 15 s validation, two nodes in one command)"
echo "# hog deleted -> big NodeClaim replaced and gone: ${t_replaced} ms"
kill -TERM "$pid_ctl"
wait "$pid_ctl" || true
pid_ctl=""
tap_done
