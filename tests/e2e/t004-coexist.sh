#!/usr/bin/env bash
# e2e: NodePools side by side, as a cluster shared with another Karpenter has them. Three 2-CPU
# lab hosts in one SSHNodeClass and three NodePools:
#   heavy   weight 50, ours, limits cpu 2 (one host)
#   light   weight 10, ours, no limits
#   other   weight 100, nodeClassRef of another Karpenter (karpenter.k8s.aws/EC2NodeClass)
#
#   1. weight    three pods of 1500m with no NodePool selector: kube-scheduler finds no node,
#                kpssh fills the heaviest of its NodePools first (heavy: one NodeClaim, its
#                limit reached) and the rest goes to light (two NodeClaims); every pod Running.
#   2. foreign   kpssh never touches other: no NodeClaim, no status or finalizer written to it,
#                and a pod that selects it stays Pending with no NodeClaim anywhere for it.
#   3. down      scaled to 0: every NodeClaim gone, every host Available.
#
# Ports: 31000 + 10 * lab ID + 9. Lab hosts 27..29.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label e2e), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-e2e-co
APPS=e2e-co-apps
NP=heavy # what pool_cleanup and claims() look at first
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 9))
HOSTS=(27 28 29)

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

cleanup() {
    set +e # an EXIT trap that stops early would leave the controller running
    kc delete nodepool other --ignore-not-found --wait=false >/dev/null 2>&1
    pool_cleanup heavy light
}
trap cleanup EXIT

# np <name> <weight> <limits block or empty>: one of our NodePools over class co.
np() {
    kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: $1}
spec:
  weight: $2
  template:
    spec:
      nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: co}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      expireAfter: Never
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 5s, budgets: [{nodes: "100%"}]}
$3
EOF
}
pool_claims() { kc get nodeclaims -l karpenter.sh/nodepool="$1" -o name 2>/dev/null | wc -l; }
claims_are() { [ "$(pool_claims heavy)" = "$1" ] && [ "$(pool_claims light)" = "$2" ]; }
all_claims() { kc get nodeclaims -o name 2>/dev/null | wc -l; }
app_running() { # app_running <app> <count>
    [ "$(kc get pods -n "$APPS" -l app="$1" -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = "$2" ]
}

pool_setup co "${HOSTS[@]}"
np heavy 50 '  limits: {cpu: "2"}'
np light 10 ''
kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: other}
spec:
  weight: 100
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
EOF
pool_chart "$NS"
pool_controller co-1 co-2 co-3

# --- 1. weight -------------------------------------------------------------------------------------
kc apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: any, namespace: $APPS}
spec:
  replicas: 3
  selector: {matchLabels: {app: any}}
  template:
    metadata: {labels: {app: any}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - {name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 1500m}}}
EOF
check "weight: every pod Running" wait_until 300 app_running any 3
check "weight: heavy (weight 50, limit 2 CPUs) got one NodeClaim, light the other two" \
    claims_are 1 2
check "weight: no NodeClaim for the foreign NodePool" test "$(pool_claims other)" = 0

# --- 2. foreign ------------------------------------------------------------------------------------
pool_deployment web 1 100m no other
sleep 15
check "foreign: a pod that selects it stays Pending" \
    test "$(kc get pods -n "$APPS" -l app=web -o jsonpath='{.items[0].status.phase}')" = Pending
check "foreign: and gets no NodeClaim anywhere" test "$(all_claims)" = 3
other=$(kc get nodepool other -o json)
check "foreign: kpssh wrote no status to it" test "$(jq -c '.status // {} | del(.conditions | select(. == []))' <<<"$other")" = '{}'
check "foreign: nor a finalizer" test "$(jq -c '.metadata.finalizers // []' <<<"$other")" = '[]'
check "foreign: nor an annotation of ours" \
    test "$(jq '[.metadata.annotations // {} | keys[] | select(startswith("karpenter."))] | length' <<<"$other")" = 0

# --- 3. down ---------------------------------------------------------------------------------------
kc delete deployment -n "$APPS" web >/dev/null
kc scale deployment any -n "$APPS" --replicas 0 >/dev/null
no_claims() { [ "$(all_claims)" = 0 ]; }
check "down: every NodeClaim gone" wait_until 300 no_claims
for h in co-1 co-2 co-3; do check "down: $h Available" wait_until 120 host_is "$h" Available; done
tap_done
