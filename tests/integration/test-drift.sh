#!/usr/bin/env bash
# Integration test of the Drift disruption method in kpssh-controller against the lab: a real
# kube-apiserver, kube-controller-manager and kube-scheduler (which binds every pod), real sshd
# hosts and hollow kubelets. The test acts as a user: a NodePool whose template carries a label,
# a Deployment of two replicas (one per node), then the label changed.
#
#   1. scale-up     two replicas with hostname anti-affinity: two NodeClaims, the template
#                   label on both Nodes; a third host stays spare.
#   2. drift        the NodePool's template label changed: both NodeClaims become
#                   Drifted=True/NodePoolDrifted. One at a time (budget nodes: "1"), each is
#                   replaced: its replacement NodeClaim is launched (DisruptionLaunching) and
#                   Initialized first, then the drifted NodeClaim is deleted, drained and its
#                   host leaves (kubelet inactive over SSH). At the end: two NodeClaims, both
#                   with the new label and not Drifted, both pods Running. Sampled every 0.5 s:
#                   never a pod kube-scheduler could not place, never a drifted NodeClaim
#                   deleted while a replacement was not yet Initialized, never two Nodes
#                   disrupting at once.
#   2b. profile     the SSHJoinProfile's version bumped: within 30 s both NodeClaims are
#                   Drifted=True/ProfileDrift (the provider's watch, not the 5-minute poll), and
#                   they are replaced the same way.
#   2c. do-not-disrupt  a pod annotated karpenter.sh/do-not-disrupt holds its drifted Node
#                   (DisruptionBlocked names the pod) while the other Node is replaced; then a
#                   template terminationGracePeriod of 30s (a NodePool drift of its own) rolls
#                   both; a pod annotated on a Node that has it no longer holds drift: the
#                   Node is taken, the drain waits on the pod, and deletes it once the grace
#                   period has run out (Disrupted event).
#   3. events and metrics: DisruptionLaunching / DisruptionTerminating "...: Drifted",
#                   karpenter_nodeclaims_disrupted_total{reason="drifted"} and
#                   karpenter_voluntary_disruption_decisions_total{decision="replace",reason="drifted"}.
#   4. expiry      expireAfter 150s in the template (a drift): once the older NodeClaim has
#                   expired, its replacement is launched (DisruptionLaunching "...: Expired") and
#                   Initialized before it is deleted; no pod is ever left without a place.
#
# Figures printed: label changed -> both nodes replaced; expiry -> expired NodeClaim replaced.
# One replica (--disable-leader-election).
# Ports: 31000 + 10 * lab ID + 4. Lab hosts 141..143. Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-drift-it
APPS=drift-apps
NP=drift-np
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 4))
HOSTS=(141 142 143)

work="$(mktemp -d)"
pid_ctl=""
pid_sample=""

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

cleanup() { pool_cleanup "$NP"; }
trap cleanup EXIT

# --- helpers -----------------------------------------------------------------------------------
nodepool() { pool_nodepool "$NP" drift WhenEmpty 10m 1 "$1"; } # nodepool <team label>

# --- set-up ------------------------------------------------------------------------------------
pool_setup drift "${HOSTS[@]}"
nodepool blue

pool_controller drift-1 drift-2 drift-3

# --- 1. scale-up -------------------------------------------------------------------------------
pool_deployment web 2 500m yes
check "web: two NodeClaims" wait_until 60 claim_count_is 2
check "web: the pods run" wait_until 300 running_is 2
mapfile -t old_claims < <(claims | jq -r '.items[].metadata.name' | sort)
mapfile -t old_nodes < <(claims | jq -r '.items[].status.nodeName' | sort)
check "the Nodes carry the template label team=blue" eval \
    "[ \$(kc get nodes -l karpenter.sh/nodepool=$NP,team=blue -o name | wc -l) = 2 ]"
check "nothing is drifted yet" cond_count_is Drifted 0

# --- 2. drift ------------------------------------------------------------------------------------
# Every 0.5 s: unschedulable pods; a drifted NodeClaim going (deleting or gone) while a
# replacement is not Initialized; Nodes tainted karpenter.sh/disrupted or being deleted.
olds=$(printf '%s\n' "${old_claims[@]}" | jq -R . | jq -s .)
(while :; do
    u=$(pods_json | jq '[.items[] | select(any(.status.conditions[]?; .type == "PodScheduled" and .reason == "Unschedulable"))] | length')
    early=$(claims | jq --argjson olds "$olds" '
        ([.items[] | select(.metadata.name as $n | $olds | index($n) | not)]) as $new
        | ([.items[] | select(.metadata.name as $n | $olds | index($n)) | select(.metadata.deletionTimestamp == null)] | length) as $live
        | ([$new[] | select(any(.status.conditions[]?; .type == "Initialized" and .status == "True"))] | length) as $ready
        | if (2 - $live) > $ready then 1 else 0 end')
    d=$(kc get nodes -l karpenter.sh/nodepool="$NP" -o json 2>/dev/null | jq '[.items[]
        | select(.metadata.deletionTimestamp != null or any(.spec.taints[]?; .key == "karpenter.sh/disrupted"))]
        | length')
    echo "$u $early $d"
    sleep 0.5
done >"$work/samples") &
pid_sample=$!
t_label=$(now_ms)
nodepool green
drifted_reason() { [ "$(claims | jq '[.items[] | select(any(.status.conditions[]?; .type == "Drifted" and .status == "True" and .reason == "NodePoolDrifted"))] | length')" -ge 1 ]; }
check "the NodeClaims become Drifted=True/NodePoolDrifted" wait_until 60 drifted_reason
old_gone() { ! kc get nodeclaim "$1" >/dev/null 2>&1; }
for c in "${old_claims[@]}"; do
    check "$c: replaced and gone" wait_until 420 old_gone "$c"
done
t_drift=$(($(now_ms) - t_label))
check "two NodeClaims again" wait_until 60 claim_count_is 2
check "web: both pods run" wait_until 120 running_is 2
check "the new Nodes carry team=green" wait_until 60 eval \
    "[ \$(kc get nodes -l karpenter.sh/nodepool=$NP,team=green -o name | wc -l) = 2 ]"
check "nothing is drifted any more" cond_count_is Drifted 0
for nn in "${old_nodes[@]}"; do
    check "$nn: the Node is gone" wait_until 120 eval "! kc get node $nn >/dev/null 2>&1"
done
for h in drift-1 drift-2 drift-3; do
    if host_is "$h" Available; then
        idx=$(($(kc get sshhost -n "$NS" "$h" -o jsonpath='{.spec.address}' | sed 's/.*\.//') - 10))
        check "host $h (Available): kubelet stopped (leave ran)" kubelet_inactive "$idx"
    fi
done
kill "$pid_sample" 2>/dev/null || true
wait "$pid_sample" 2>/dev/null || true
pid_sample=""
max_u=$(awk '{print $1}' "$work/samples" | sort -n | tail -n 1)
early=$(awk '{print $2}' "$work/samples" | sort -n | tail -n 1)
max_d=$(awk '{print $3}' "$work/samples" | sort -n | tail -n 1)
n_samples=$(wc -l <"$work/samples")
check "no pod was ever left without a place (most unschedulable: ${max_u:-none}, $n_samples samples)" \
    test "${max_u:-9}" = 0
check "no drifted NodeClaim went before its replacement was Initialized" test "${early:-9}" = 0
check "budget nodes: \"1\": never two Nodes disrupting at once (most: ${max_d:-none})" \
    test "${max_d:-9}" -le 1

# --- 2b. a join profile bumped: ProfileDrift --------------------------------------------------
mapfile -t old_claims < <(claims | jq -r '.items[].metadata.name' | sort)
olds=$(printf '%s\n' "${old_claims[@]}" | jq -R . | jq -s .)
(while :; do
    early=$(claims | jq --argjson olds "$olds" '
        ([.items[] | select(.metadata.name as $n | $olds | index($n) | not)]) as $new
        | ([.items[] | select(.metadata.name as $n | $olds | index($n)) | select(.metadata.deletionTimestamp == null)] | length) as $live
        | ([$new[] | select(any(.status.conditions[]?; .type == "Initialized" and .status == "True"))] | length) as $ready
        | if (2 - $live) > $ready then 1 else 0 end')
    echo "$early"
    sleep 0.5
done >"$work/samples2") &
pid_sample=$!
t_profile=$(now_ms)
kc patch sshjoinprofile drift-tls --type=merge -p '{"spec":{"version":"2"}}' >/dev/null
profile_drifted() { [ "$(claims | jq '[.items[] | select(any(.status.conditions[]?; .type == "Drifted" and .status == "True" and .reason == "ProfileDrift"))] | length')" -ge 1 ]; }
check "profile version bumped: NodeClaims become Drifted=True/ProfileDrift within 30 s" \
    wait_until 30 profile_drifted
t_marked=$(($(now_ms) - t_profile))
for c in "${old_claims[@]}"; do
    check "$c: replaced and gone" wait_until 420 old_gone "$c"
done
t_roll=$(($(now_ms) - t_profile))
check "two NodeClaims again, none drifted" wait_until 60 eval "claim_count_is 2 && cond_count_is Drifted 0"
check "web: both pods run" wait_until 120 running_is 2
kill "$pid_sample" 2>/dev/null || true
wait "$pid_sample" 2>/dev/null || true
pid_sample=""
early=$(sort -n "$work/samples2" | tail -n 1)
check "no ProfileDrift NodeClaim went before its replacement was Initialized" test "${early:-9}" = 0

# --- 2c. a do-not-disrupt pod, then a terminationGracePeriod -------------------------------------
claim_on() { claims | jq -r --arg n "$1" '.items[] | select(.status.nodeName == $n) | .metadata.name'; }
pod_on() { pods_json | jq -r --arg n "$1" '.items[] | select(.spec.nodeName == $n and .metadata.deletionTimestamp == null) | .metadata.name'; }
claim_deleting() { kc get nodeclaim "$1" -o json 2>/dev/null | jq -e '.metadata.deletionTimestamp != null' >/dev/null || old_gone "$1"; }
tgp_everywhere() { [ "$(claims | jq '[.items[] | select(.spec.terminationGracePeriod == "30s" and .metadata.deletionTimestamp == null)] | length')" = 2 ]; }
# Graceful: with no terminationGracePeriod a pod annotated karpenter.sh/do-not-disrupt holds its
# drifted Node, and the Node says so; the other Node is replaced meanwhile.
held_node=$(claims | jq -r '.items[0].status.nodeName')
held_claim=$(claim_on "$held_node")
other_claim=$(claims | jq -r --arg c "$held_claim" '.items[] | select(.metadata.name != $c) | .metadata.name')
held_pod=$(pod_on "$held_node")
kc annotate pod -n "$APPS" "$held_pod" karpenter.sh/do-not-disrupt=true >/dev/null
kc patch sshjoinprofile drift-tls --type=merge -p '{"spec":{"version":"3"}}' >/dev/null
check "do-not-disrupt: the other NodeClaim $other_claim is replaced and gone" wait_until 420 old_gone "$other_claim"
check "do-not-disrupt: $held_node: DisruptionBlocked names the pod and the annotation" wait_until 60 eval \
    "kc get events -A --field-selector involvedObject.name=$held_node,reason=DisruptionBlocked -o json | jq -e '[.items[] | select((.message | contains(\"karpenter.sh/do-not-disrupt\")) and (.message | contains(\"$held_pod\")))] | length > 0' >/dev/null"
check "do-not-disrupt: $held_claim is still there and Drifted 20 s later" eval \
    "sleep 20; kc get nodeclaim $held_claim -o json | jq -e '.metadata.deletionTimestamp == null and any(.status.conditions[]; .type == \"Drifted\" and .status == \"True\")' >/dev/null"
# A terminationGracePeriod in the template drifts both NodeClaims (it is part of the NodePool's
# hash); the held one goes once its pod loses the annotation. Their replacements carry it.
kc patch nodepool "$NP" --type merge -p '{"spec":{"template":{"spec":{"terminationGracePeriod":"30s"}}}}' >/dev/null
kc annotate pod -n "$APPS" "$held_pod" karpenter.sh/do-not-disrupt- >/dev/null
check "terminationGracePeriod 30s: both NodeClaims replaced by ones that carry it" \
    wait_until 480 eval "tgp_everywhere && cond_count_is Drifted 0"
check "web: both pods run" wait_until 120 running_is 2
# Eventual: with a terminationGracePeriod, drift takes a Node despite its do-not-disrupt pod; the
# drain waits on that pod until the grace period has run out, then deletes it (Disrupted).
held_node=$(claims | jq -r '[.items[] | select(.metadata.deletionTimestamp == null)][0].status.nodeName')
held_claim=$(claim_on "$held_node")
held_pod=$(pod_on "$held_node")
kc annotate pod -n "$APPS" "$held_pod" karpenter.sh/do-not-disrupt=true >/dev/null
kc patch sshjoinprofile drift-tls --type=merge -p '{"spec":{"version":"4"}}' >/dev/null
check "terminationGracePeriod: $held_claim is disrupted despite its do-not-disrupt pod" \
    wait_until 420 claim_deleting "$held_claim"
t_tgp=$(now_ms)
check "terminationGracePeriod: the drain waits on $held_pod (not deleted 15 s later)" eval \
    "sleep 15; kc get pod -n $APPS $held_pod -o json | jq -e '.metadata.deletionTimestamp == null' >/dev/null"
check "terminationGracePeriod: $held_pod is deleted once it runs out (Disrupted event)" wait_until 90 eval \
    "kc get events -n $APPS --field-selector involvedObject.name=$held_pod,reason=Disrupted -o json | jq -e '[.items[] | select(.message | contains(\"bypasses the PDB of the pod and the do-not-disrupt annotation\"))] | length > 0' >/dev/null"
t_forced=$(($(now_ms) - t_tgp))
check "terminationGracePeriod: $held_claim is gone" wait_until 120 old_gone "$held_claim"
check "two NodeClaims again, none drifted" wait_until 420 eval "claim_count_is 2 && cond_count_is Drifted 0"
check "web: both pods run" wait_until 120 running_is 2

# --- 3. events and metrics ---------------------------------------------------------------------
for nn in "${old_nodes[@]}"; do
    check "$nn: DisruptionLaunching says Drifted" eval \
        "kc get events -A --field-selector involvedObject.name=$nn,reason=DisruptionLaunching -o json | jq -e '[.items[] | select(.message == \"Launching NodeClaim: Drifted\")] | length > 0' >/dev/null"
done
check "karpenter_nodeclaims_disrupted_total{reason=\"drifted\"} counts" \
    metric_has 'karpenter_nodeclaims_disrupted_total{' 'reason="drifted"'
check "karpenter_voluntary_disruption_decisions_total{decision=\"replace\",reason=\"drifted\"} counts" \
    metric_has 'karpenter_voluntary_disruption_decisions_total{decision="replace"' 'reason="drifted"'
check "the controller's log is JSON lines" all_json "$work/ctl.log"

# --- 4. expiry: the replacement first --------------------------------------------------------
# expireAfter 150s in the template drifts both NodeClaims (it is part of the NodePool's hash);
# their replacements carry it. The older of the two then expires with its pod still on it: the
# disruption loop launches its replacement (DisruptionLaunching "...: Expired") and deletes it
# once that is Initialized. Sampled every 0.5 s: it never went while no NodeClaim made after its
# expiry was Initialized, and no pod was ever left without a place.
has_expire() { [ "$(claims | jq '[.items[] | select(.spec.expireAfter == "150s" and .metadata.deletionTimestamp == null)] | length')" = 2 ]; }
kc patch nodepool "$NP" --type merge -p '{"spec":{"template":{"spec":{"expireAfter":"150s"}}}}' >/dev/null
check "expireAfter 150s: both NodeClaims replaced by ones that carry it" \
    wait_until 480 eval "has_expire && cond_count_is Drifted 0"
check "web: both pods run" wait_until 120 running_is 2
x_claim=$(claims | jq -r '[.items[] | select(.metadata.deletionTimestamp == null)] | sort_by(.metadata.creationTimestamp) | .[0].metadata.name')
x_node=$(kc get nodeclaim "$x_claim" -o jsonpath='{.status.nodeName}')
x_expiry=$(($(date -d "$(kc get nodeclaim "$x_claim" -o jsonpath='{.metadata.creationTimestamp}')" +%s) + 150))
(while :; do
    dx=$(kc get nodeclaim "$x_claim" -o json 2>/dev/null | jq '.metadata.deletionTimestamp != null' || echo true)
    ready=$(claims | jq --argjson t "$x_expiry" '[.items[] | select((.metadata.creationTimestamp | fromdateiso8601) >= $t)
        | select(any(.status.conditions[]?; .type == "Initialized" and .status == "True"))] | length')
    u=$(pods_json | jq '[.items[] | select(any(.status.conditions[]?; .type == "PodScheduled" and .reason == "Unschedulable"))] | length')
    early=0
    [ "$dx" = true ] && [ "$ready" = 0 ] && early=1
    echo "$early $u"
    sleep 0.5
done >"$work/samples4") &
pid_sample=$!
check "expiry: $x_claim launches its replacement (DisruptionLaunching: Expired on $x_node)" wait_until 300 eval \
    "kc get events -A --field-selector involvedObject.name=$x_node,reason=DisruptionLaunching -o json | jq -e '[.items[] | select(.message == \"Launching NodeClaim: Expired\")] | length > 0' >/dev/null"
check "expiry: $x_claim is gone" wait_until 300 old_gone "$x_claim"
t_expiry=$(($(now_ms) - x_expiry * 1000))
check "web: both pods run" wait_until 120 running_is 2
kill "$pid_sample" 2>/dev/null || true
wait "$pid_sample" 2>/dev/null || true
pid_sample=""
early=$(awk '{print $1}' "$work/samples4" | sort -n | tail -n 1)
max_u=$(awk '{print $2}' "$work/samples4" | sort -n | tail -n 1)
check "expiry: $x_claim did not go before its replacement was Initialized ($(wc -l <"$work/samples4") samples)" \
    test "${early:-9}" = 0
check "expiry: no pod was ever left without a place (most unschedulable: ${max_u:-none})" \
    test "${max_u:-9}" = 0
check "karpenter_nodeclaims_disrupted_total{reason=\"expired\"} counts" \
    metric_has 'karpenter_nodeclaims_disrupted_total{' 'reason="expired"'

echo "# label changed -> both nodes replaced: ${t_drift} ms (one at a time, replacement first)"
echo "# profile bumped -> ProfileDrift marked: ${t_marked} ms; -> both nodes replaced: ${t_roll} ms"
echo "# terminationGracePeriod 30s: NodeClaim deleting -> do-not-disrupt pod forced: ${t_forced} ms"
echo "# expiry -> the expired NodeClaim replaced and gone: ${t_expiry} ms"
kill -TERM "$pid_ctl"
wait "$pid_ctl" || true
pid_ctl=""
tap_done
