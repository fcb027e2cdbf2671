#!/usr/bin/env bash
# Integration test of `kpssh simulate` against the lab: the plan it prints for the live cluster
# is what kpssh-controller then does (issue 14: "on the live lab agrees with what the controller
# then does").
#
#   1. freeze     the controller probes two warm hosts and makes the NodePool Ready, then is
#                 stopped, so nothing acts on what follows.
#   2. pending    a Deployment of two replicas with hostname anti-affinity and 1500m each:
#                 kube-scheduler marks both Unschedulable.
#   3. simulate   `kpssh simulate -o json` (live mode) plans two NodeClaims of the NodePool, one
#                 pod each, instance type "sim" (the host class) at $0.03/h, nothing unplaced;
#                 the table and -o yaml agree; two runs print the same bytes; the cluster is
#                 unchanged (no NodeClaim).
#   4. agree      the controller, started again, creates exactly two NodeClaims of that NodePool
#                 whose instance-type requirement is the plan's options, and both pods run.
#
# One replica (--disable-leader-election). Ports: 31000 + 10 * lab ID + 2. Lab hosts 121, 122.
# Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-sim-it
APPS=sim-apps
NP=sim-np
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 2))
HOSTS=(121 122)

work="$(mktemp -d)"
pid_ctl=""
hosts_added=()

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

KPSSH="${KPSSH_CLI_BIN:-$PWD/../src/kpssh}"
if [ ! -x "$KPSSH" ]; then
    echo "kpssh not found at $KPSSH (set KPSSH_CLI_BIN)" >&2
    exit 1
fi
trap 'pool_cleanup "$NP"' EXIT

sim() { "$KPSSH" simulate -n "$NS" --kubeconfig "$KUBECONFIG" "$@"; }
unschedulable_is() { # unschedulable_is <count>: web pods kube-scheduler marked Unschedulable
    [ "$(pods_json | jq '[.items[] | select(any(.status.conditions[]?; .type == "PodScheduled" and .reason == "Unschedulable"))] | length')" = "$1" ]
}
jq_true() { jq -e "$@" >/dev/null; }
nodepool_ready() {
    [ "$(kc get nodepool "$NP" -o json | jq -r '.status.conditions[]? | select(.type == "Ready") | .status')" = True ]
}

# --- 1. freeze -------------------------------------------------------------------------------------
POOL_CPU=2 pool_setup sim "${HOSTS[@]}"
kc patch sshnodeclass sim --type=merge -p '{"spec":{"pricePerCPUHour":"0.015"}}' >/dev/null
pool_nodepool "$NP" sim WhenEmpty 10m 1
pool_controller sim-1 sim-2
check "the NodePool is Ready" wait_until 60 nodepool_ready
stopped=$pid_ctl
kill -TERM "$pid_ctl"
wait "$pid_ctl" || true
pid_ctl=""
check "the controller stopped" dead "$stopped"

# --- 2. pending ------------------------------------------------------------------------------------
pool_deployment web 2 1500m yes
check "kube-scheduler marks both pods Unschedulable" wait_until 60 unschedulable_is 2

# --- 3. simulate -----------------------------------------------------------------------------------
sim -o json >"$work/plan.json" 2>"$work/plan.err"
sed -n '1,60s/^/# /p' "$work/plan.json"
check "simulate: nothing on stderr" test ! -s "$work/plan.err"
check "simulate: a SimulationPlan" jq_true '.kind == "SimulationPlan"' "$work/plan.json"
# shellcheck disable=SC2016 # jq's variables
check "simulate: two NodeClaims of the NodePool, one pod each" jq_true --arg np "$NP" \
    '(.nodeClaims | length) == 2 and all(.nodeClaims[]; .nodePool == $np and (.pods | length) == 1)' \
    "$work/plan.json"
check "simulate: instance type sim at \$0.03/h" jq_true \
    'all(.nodeClaims[]; .instanceTypes == [{"name": "sim", "pricePerHour": "0.03"}])' "$work/plan.json"
# shellcheck disable=SC2016 # jq's variables
check "simulate: every web pod planned, nothing unplaced" jq_true --arg ns "$APPS" \
    '([.nodeClaims[].pods[]] | length) == 2 and all(.nodeClaims[].pods[]; startswith($ns + "/web-")) and .unplaced == [] and .placements == []' \
    "$work/plan.json"
sim -o json >"$work/plan2.json"
check "simulate: two runs print the same plan" cmp -s "$work/plan.json" "$work/plan2.json"
sim >"$work/plan.txt"
check "simulate: the summary says two NodeClaims" grep -qx 'NodeClaims to create: 2' "$work/plan.txt"
sim -o yaml >"$work/plan.yaml"
check "simulate: -o yaml" grep -qx 'kind: "SimulationPlan"' "$work/plan.yaml"
check "simulate changed nothing: no NodeClaim" claim_count_is 0

# --- 4. agree --------------------------------------------------------------------------------------
pool_start
check "the controller creates two NodeClaims" wait_until 90 claim_count_is 2
sleep 3 # a third would be a disagreement: give it the time of a batch window
check "exactly two" claim_count_is 2
want=$(jq -c '[.nodeClaims[] | [.instanceTypes[].name]] | sort' "$work/plan.json")
got=$(claims | jq -c '[.items[] | [.spec.requirements[] | select(.key == "node.kubernetes.io/instance-type") | .values[]]] | sort')
check "the NodeClaims' instance types are the plan's ($want, $got)" test "$want" = "$got"
check "both pods run" wait_until 180 running_is 2

tap_done
