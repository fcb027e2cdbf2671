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
#                   two web pods fit one host. Single-node consolidation takes
#                   one node at a time (budget nodes: "1"), its pods evicted onto the others:
#                   the NodeClaims go down to two, the freed hosts leave (kubelet inactive over
#                   SSH) and are Available, every pod of the Deployment Runs at the end.
#                   Sampled every 0.5 s through it: never a pod kube-scheduler could not place
#                   (PodScheduled=False/Unschedulable), never more NodeClaims than before (no
#                   capacity was needed), never two Nodes disrupting at once.
#   3. events and metrics: DisruptionTerminating "Disrupting Node: Underutilized",
#                   karpenter_nodeclaims_disrupted_total{reason="underutilized"},
#                   karpenter_voluntary_disruption_decisions_total{consolidation_type="single"}.
#
# Figures printed: filler gone -> two NodeClaims left, and the samples' maxima.
# One replica (--disable-leader-election). Ports: 31000 + 10 * lab ID + 5. Lab hosts 171..174.
# Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-con-it
APPS=con-apps
NP=con-np
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

cleanup() {
    set +e
    # Only the processes this test started, by PID.
    [ -n "$pid_ctl" ] && kill -KILL "$pid_ctl" 2>/dev/null
    [ -n "$pid_sample" ] && kill -KILL "$pid_sample" 2>/dev/null
    kc delete namespace "$APPS" --ignore-not-found --wait=false >/dev/null 2>&1
    kc delete nodepool "$NP" --ignore-not-found --wait=false >/dev/null 2>&1
    pool_forget "$NP"
    kc delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
    if [ "${fail:-0}" != 0 ]; then
        echo "# --- last of the controller's log ---"
        tail -n 80 "$work/ctl.log" 2>/dev/null | sed 's/^/# /'
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# --- helpers -----------------------------------------------------------------------------------
host_state() { kc get sshhost -n "$NS" "$1" -o jsonpath='{.status.state}' 2>/dev/null || true; }
host_is() { [ "$(host_state "$1")" = "$2" ]; }
claims() { kc get nodeclaims -l karpenter.sh/nodepool="$NP" -o json 2>/dev/null || echo '{"items":[]}'; }
claim_count_is() { [ "$(claims | jq '.items | length')" = "$1" ]; }
cond_count_is() { # cond_count_is <type> <count>: NodeClaims whose condition <type> is True
    [ "$(claims | jq --arg t "$1" '[.items[] | select(any(.status.conditions[]?; .type == $t and .status == "True"))] | length')" = "$2" ]
}
pods_json() { kc get pods -n "$APPS" -l app=web -o json 2>/dev/null || echo '{"items":[]}'; }
running_is() { [ "$(pods_json | jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length')" = "$1" ]; }
kubelet_inactive() { ! "$KPSSH_LAB_HOST_SH" exec "$1" systemctl is-active --quiet kubelet; }
metric_has() { body "http://127.0.0.1:$PORT/metrics" | grep -F "$1" | grep -F "$2" | grep -qv ' 0$'; }

# --- set-up ------------------------------------------------------------------------------------
"$KP_REPO/tests/lab/crds.sh" apply
kc create namespace "$NS" >/dev/null
kc create namespace "$APPS" >/dev/null
kc create secret generic con-key -n "$NS" --from-file=privateKey="$KPSSH_LAB_SSH_KEY" >/dev/null
pool_profile con-tls
pool_nodeclass con con con-tls
pool_hosts "$NS" con con-key con "${HOSTS[@]}"
kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: $NP}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: con}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      expireAfter: Never
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 20s
    budgets: [{nodes: "1"}]
EOF

"$BIN" --kubeconfig "$KUBECONFIG" --pool-namespace "$NS" --disable-leader-election \
    --bind-address 127.0.0.1 --metrics-port "$PORT" --health-probe-port "$PORT" \
    --probe-interval 5s --probe-timeout 4s --shutdown-timeout 20s >>"$work/ctl.log" 2>&1 &
pid_ctl=$!
check "the controller is ready" wait_until 60 is_code 200 "http://127.0.0.1:$PORT/readyz"
for h in con-1 con-2 con-3 con-4; do
    check "host $h is probed Available" wait_until 90 host_is "$h" Available
done

# --- 1. scale-up -------------------------------------------------------------------------------
deployment() { # deployment <name> <anti-affinity: yes|no>
    local aff=""
    [ "$2" = yes ] && aff="
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {labelSelector: {matchLabels: {app: $1}}, topologyKey: kubernetes.io/hostname}"
    kc apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: $APPS}
spec:
  replicas: 4
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      nodeSelector: {karpenter.sh/nodepool: $NP}
      terminationGracePeriodSeconds: 0$aff
      containers:
        - {name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 700m}}}
EOF
}
filler_running() { [ "$(kc get pods -n "$APPS" -l app=filler -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 4 ]; }
deployment filler yes
check "filler: four NodeClaims, one per replica" wait_until 90 claim_count_is 4
check "filler: the four pods run" wait_until 300 filler_running
deployment web no
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
kc delete deployment -n "$APPS" filler --wait=false >/dev/null
filler_gone() { [ "$(kc get pods -n "$APPS" -l app=filler -o json | jq '.items | length')" = 0 ]; }
check "filler: gone" wait_until 60 filler_gone
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
check "budget nodes: \"1\": never two Nodes disrupting at once (most: ${max_d:-none})" \
    test "${max_d:-9}" -le 1

# --- 3. events and metrics ---------------------------------------------------------------------
check "DisruptionTerminating events say Underutilized" eval \
    "kc get events -A --field-selector reason=DisruptionTerminating -o json | jq -e '[.items[] | select(.message == \"Disrupting Node: Underutilized\")] | length >= 2' >/dev/null"
check "karpenter_nodeclaims_disrupted_total{reason=\"underutilized\"} counts" \
    metric_has 'karpenter_nodeclaims_disrupted_total{' 'reason="underutilized"'
check "karpenter_voluntary_disruption_decisions_total{consolidation_type=\"single\"} counts" \
    metric_has 'karpenter_voluntary_disruption_decisions_total{' 'consolidation_type="single"'
check "the controller's log is JSON lines" all_json "$work/ctl.log"

echo "# filler gone -> two NodeClaims: ${t_two} ms (consolidateAfter 20 s, 15 s validation, one node at a time)"
kill -TERM "$pid_ctl"
wait "$pid_ctl" || true
pid_ctl=""
tap_done
