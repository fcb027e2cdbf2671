#!/usr/bin/env bash
# Integration test of Karpenter's provisioner in kpssh-controller against the lab: a real
# kube-apiserver, kube-controller-manager and kube-scheduler (which binds every pod; the test
# never does), real sshd hosts, and hollow kubelets that TLS-bootstrap with the token the SSH
# provider mints. The test creates a NodePool and a Deployment, as a user would; the controller,
# run as its own process, does the rest.
#
#   1. scale-up   two replicas with a nodeSelector for the NodePool and hostname anti-affinity:
#                 kube-scheduler marks them Unschedulable, kpssh creates one NodeClaim per
#                 replica from the NodePool's template (labels, owner, hash annotation), the
#                 hosts join, kube-scheduler binds each pod to its own new Node and the pods
#                 are Running; the pods get Nominated events and
#                 karpenter_nodeclaims_created_total{reason="provisioned"} counts 2.
#   2. no fit     a pod asking for more CPU than any host has gets a FailedScheduling event
#                 from kpssh and no NodeClaim.
#   3. foreign    a NodePool of another Karpenter (nodeClassRef of another group) and a pod
#                 selecting it: never acted on.
#   4. cleanup    deleting the Deployment and the NodeClaims gives the hosts back, warm.
#
# Figures printed: pending -> NodeClaim created, pending -> all pods Running.
# One replica (--disable-leader-election). Ports: 31000 + 10 * lab ID + 9. Lab hosts 181..182.
# Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-prov-it
APPS=prov-apps
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 9))
HOSTS=(181 182)

work="$(mktemp -d)"
pid_ctl=""

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

hosts_added=()
cleanup() {
    set +e
    [ -n "$pid_ctl" ] && kill -KILL "$pid_ctl" 2>/dev/null # only the process this test started
    kc delete namespace "$APPS" --ignore-not-found --wait=false >/dev/null 2>&1
    kc delete nodepool prov-np prov-foreign --ignore-not-found --wait=false >/dev/null 2>&1
    pool_forget prov-np
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
claims() { kc get nodeclaims -l karpenter.sh/nodepool="$1" -o json 2>/dev/null || echo '{"items":[]}'; }
claim_count() { claims "$1" | jq '.items | length'; }
claim_count_is() { [ "$(claim_count "$1")" = "$2" ]; }
ready_claims() {
    claims "$1" | jq '[.items[] | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length'
}
ready_claims_is() { [ "$(ready_claims "$1")" = "$2" ]; }
pods_json() { kc get pods -n "$APPS" -l "app=$1" -o json 2>/dev/null || echo '{"items":[]}'; }
running_is() { [ "$(pods_json "$1" | jq '[.items[] | select(.status.phase == "Running")] | length')" = "$2" ]; }
event_with() { # event_with <namespace> <reason> <message substring>
    kc get events -n "$1" -o json 2>/dev/null |
        jq -e --arg r "$2" --arg m "$3" '[.items[] | select(.reason == $r and (.message | contains($m)))] | length > 0' >/dev/null
}
created_is() { # created_is <nodepool> <count>: karpenter_nodeclaims_created_total, provisioned
    local m
    m=$(body "http://127.0.0.1:$PORT/metrics" | grep '^karpenter_nodeclaims_created_total{' |
        grep -F "nodepool=\"$1\"" | grep -F 'reason="provisioned"' || true)
    [ -n "$m" ] && [ "${m##* }" = "$2" ]
}

# --- set-up ------------------------------------------------------------------------------------
# The CRDs, once any delete an earlier test started has finished (tests/lab/crds.sh says why).
"$KP_REPO/tests/lab/crds.sh" apply
kc create namespace "$NS" >/dev/null
kc create namespace "$APPS" >/dev/null
kc create secret generic prov-key -n "$NS" --from-file=privateKey="$KPSSH_LAB_SSH_KEY" >/dev/null
pool_profile prov-tls
pool_nodeclass prov prov prov-tls
pool_hosts "$NS" prov prov-key prov "${HOSTS[@]}"
kc apply -f - >/dev/null <<'EOF'
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: prov-np}
spec:
  template:
    metadata:
      labels: {example.com/pool: prov}
    spec:
      nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: prov}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      expireAfter: Never
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: prov-foreign}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
EOF

"$BIN" --kubeconfig "$KUBECONFIG" --pool-namespace "$NS" --disable-leader-election \
    --bind-address 127.0.0.1 --metrics-port "$PORT" --health-probe-port "$PORT" \
    --probe-interval 5s --probe-timeout 4s --shutdown-timeout 20s >>"$work/ctl.log" 2>&1 &
pid_ctl=$!
check "the controller is ready" wait_until 60 is_code 200 "http://127.0.0.1:$PORT/readyz"
for h in prov-1 prov-2; do
    check "host $h is probed Available" wait_until 90 host_is "$h" Available
done
check "NodePool prov-np is Ready" wait_until 60 eval \
    "kc get nodepool prov-np -o json | jq -e 'any(.status.conditions[]?; .type == \"Ready\" and .status == \"True\")' >/dev/null"

# --- 1. scale-up -------------------------------------------------------------------------------
t0=$(now_ms)
kc apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $APPS}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {karpenter.sh/nodepool: prov-np}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {labelSelector: {matchLabels: {app: web}}, topologyKey: kubernetes.io/hostname}
      containers:
        - {name: web, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 500m, memory: 256Mi}}}
EOF
check "web: two NodeClaims for prov-np, one per replica" wait_until 60 claim_count_is prov-np 2
t_claim=$(($(now_ms) - t0))
c0=$(claims prov-np | jq '.items[0]')
check "the NodeClaim's owner is the NodePool" \
    jq -e '.metadata.ownerReferences[0] | .kind == "NodePool" and .name == "prov-np" and .blockOwnerDeletion == true' <<<"$c0"
check "the NodeClaim carries the template's and Karpenter's labels" \
    jq -e '.metadata.labels | ."example.com/pool" == "prov" and ."karpenter.kpssh.dev/sshnodeclass" == "prov"' <<<"$c0"
check "the NodeClaim carries the NodePool hash" \
    jq -e '.metadata.annotations | has("karpenter.sh/nodepool-hash") and ."karpenter.sh/nodepool-hash-version" == "v3"' <<<"$c0"
check "the NodeClaim asks for the pod's requests and the class's instance type" \
    jq -e '(.spec.resources.requests.cpu == "500m") and any(.spec.requirements[]; .key == "node.kubernetes.io/instance-type" and .operator == "In")' <<<"$c0"
check "web: pods are Nominated to their NodeClaims" wait_until 30 event_with "$APPS" Nominated "nodeclaim/prov-np-"
check "web: both NodeClaims become Ready" wait_until 240 ready_claims_is prov-np 2
check "web: kube-scheduler binds both pods; they run" wait_until 120 running_is web 2
t_run=$(($(now_ms) - t0))
check "web: each pod on its own Node (anti-affinity)" \
    test "$(pods_json web | jq '[.items[].spec.nodeName] | unique | length')" = 2
check "web: the pods' Nodes are prov-np's" \
    test "$(pods_json web | jq -r '.items[].spec.nodeName' | while read -r nn; do kc get node "$nn" -o jsonpath='{.metadata.labels.karpenter\.sh/nodepool}'; echo; done | sort -u)" = prov-np
check "karpenter_nodeclaims_created_total{reason=provisioned} counts 2" wait_until 20 created_is prov-np 2
check "no third NodeClaim once the pods run" claim_count_is prov-np 2

# --- 2. a pod that fits no class ---------------------------------------------------------------
kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: $APPS, labels: {app: huge}}
spec:
  nodeSelector: {karpenter.sh/nodepool: prov-np}
  containers:
    - {name: huge, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "64"}}}
EOF
check "huge: FailedScheduling from kpssh" wait_until 60 event_with "$APPS" FailedScheduling "Failed to schedule pod"
check "huge: no NodeClaim for it" claim_count_is prov-np 2

# --- 3. another Karpenter's NodePool -----------------------------------------------------------
kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: elsewhere, namespace: $APPS, labels: {app: elsewhere}}
spec:
  nodeSelector: {karpenter.sh/nodepool: prov-foreign}
  containers:
    - {name: e, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}
EOF
sleep 15
check "foreign: no NodeClaim for another Karpenter's NodePool" claim_count_is prov-foreign 0

# --- 4. cleanup --------------------------------------------------------------------------------
kc delete deployment -n "$APPS" web --wait=false >/dev/null
kc delete pod -n "$APPS" huge elsewhere --wait=false >/dev/null
kc delete nodeclaims -l karpenter.sh/nodepool=prov-np --wait=false >/dev/null
check "the NodeClaims go" wait_until 180 claim_count_is prov-np 0
for h in prov-1 prov-2; do
    check "host $h is Available again" wait_until 120 host_is "$h" Available
done
check "the controller's log is JSON lines" all_json "$work/ctl.log"

echo "# pending -> NodeClaims created: ${t_claim} ms; pending -> pods Running: ${t_run} ms"
kill -TERM "$pid_ctl"
wait "$pid_ctl" || true
pid_ctl=""
tap_done
