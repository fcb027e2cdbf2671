#!/usr/bin/env bash
# Crash test of voluntary disruption in kpssh-controller against the lab (real control plane,
# kube-scheduler, sshd hosts, hollow kubelets): the controller is SIGKILLed at a random moment of
# each of ROUNDS drift commands and started again, and the pool must converge every time.
#
# A NodePool with a template label and a Deployment of two replicas (one per node, hostname
# anti-affinity) on three hosts. Each round changes the label, so both NodeClaims drift and are
# replaced one at a time (a replacement launched, Initialized, then the drifted node drained and
# deleted); 1 .. 25 s later the controller is killed with SIGKILL and restarted at once. Whatever
# the kill interrupted (the taint, the replacement's launch, the wait, the delete, the drain, the
# leave) must be finished or rolled back by the restarted controller: within the bound, two
# NodeClaims, none Drifted, both with the round's label; both pods Running; no Node tainted
# karpenter.sh/disrupted; no host Claimed or Leaving; the spare host Available. A replacement a
# killed command left behind is taken back by Emptiness (consolidateAfter 10s).
#
# Then CROUNDS consolidation rounds (see "consolidation rounds" below): the controller killed at
# a random moment of Emptiness and single-node consolidation commands, with the same demands.
#
# Figures printed: the kill delays, and per round the time from the kill to convergence.
# Seed: KP_CRASH_SEED (default: from the clock), printed. Ports: 31000 + 10 * lab ID + 3. Lab
# hosts 131..133. Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-dcr-it
APPS=dcr-apps
NP=dcr-np
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 3))
HOSTS=(131 132 133)
ROUNDS=${KP_CRASH_ROUNDS:-7} # more with KP_CRASH_ROUNDS; 7 keeps CI inside its budget
CROUNDS=${KP_CRASH_CONSOLIDATION_ROUNDS:-3}
SEED=${KP_CRASH_SEED:-$(date +%s)}
RANDOM=$SEED

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

nodepool() { pool_nodepool "$NP" dcr WhenEmpty 10s 1 "$1"; } # nodepool <team label>
tainted_count() {
    kc get nodes -l karpenter.sh/nodepool="$NP" -o json 2>/dev/null |
        jq '[.items[] | select(any(.spec.taints[]?; .key == "karpenter.sh/disrupted"))] | length'
}
hosts_busy() { # hosts Claimed or Leaving
    kc get sshhosts -n "$NS" -o json | jq '[.items[] | select(.status.state == "Claimed" or .status.state == "Leaving")] | length'
}
labelled_is() { # labelled_is <team> <count>: NodeClaims of NP carrying the label
    [ "$(claims | jq --arg t "$1" '[.items[] | select(.metadata.labels.team == $t)] | length')" = "$2" ]
}
available_is() {
    [ "$(kc get sshhosts -n "$NS" -o json | jq '[.items[] | select(.status.state == "Available")] | length')" = "$1" ]
}
converged() { # converged <team>
    claim_count_is 2 && cond_count_is Drifted 0 && labelled_is "$1" 2 && running_is 2 &&
        [ "$(tainted_count)" = 0 ] && [ "$(hosts_busy)" = 0 ] && available_is 1
}
# crash_after <seconds>: waits, SIGKILLs the controller and starts it again at once; t_kill is
# the moment of the kill.
crash_after() {
    sleep "$1"
    kill -KILL "$pid_ctl"
    wait "$pid_ctl" 2>/dev/null || true
    t_kill=$(now_ms)
    pool_start
}

echo "# seed $SEED (KP_CRASH_SEED), $ROUNDS drift rounds, $CROUNDS consolidation rounds"
pool_setup dcr "${HOSTS[@]}"
nodepool t0
pool_controller dcr-1 dcr-2 dcr-3
pool_deployment web 2 500m yes
check "web: two NodeClaims, pods Running" wait_until 300 converged t0

delays=""
for round in $(seq 1 "$ROUNDS"); do
    nodepool "t$round"
    delay=$((1 + RANDOM % 25))
    delays="$delays $delay"
    crash_after "$delay"
    check "round $round: killed $delay s into the roll; the pool converges (two NodeClaims labelled t$round, none drifted, no taint, no host Claimed or Leaving)" \
        wait_until 420 converged "t$round"
    echo "# round $round: kill -> converged $(($(now_ms) - t_kill)) ms"
done
# --- consolidation rounds ------------------------------------------------------------------------
# The same pool, now WhenEmptyOrUnderutilized. Each round: "filler" (three 1200m pods, one per
# node) takes all three hosts, "web" (three 300m pods) fills the gaps beside it; then filler is
# deleted, so every Node is underutilized and web fits one of them. Emptiness and consolidation
# take the Nodes one at a time (budget "1"); 5 .. 49 s after the delete the controller is killed
# and restarted. Converged: one NodeClaim, the three web pods Running, no taint, no host Claimed
# or Leaving, two hosts Available. web is then deleted and the last Node goes before the next
# round.
filler_running_is() {
    [ "$(kc get pods -n "$APPS" -l app=filler -o json | jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length')" = "$1" ]
}
consolidated() {
    claim_count_is 1 && running_is 3 && [ "$(tainted_count)" = 0 ] && [ "$(hosts_busy)" = 0 ] &&
        available_is 2
}
kc delete deployment -n "$APPS" web --wait=false >/dev/null
pool_nodepool "$NP" dcr WhenEmptyOrUnderutilized 10s 1 "t$ROUNDS"
check "consolidation: web deleted, Emptiness takes both Nodes, three hosts Available" \
    wait_until 300 eval "claim_count_is 0 && available_is 3"
cdelays=""
for round in $(seq 1 "$CROUNDS"); do
    pool_deployment filler 3 1200m yes
    check "consolidation round $round: filler takes three Nodes" wait_until 300 eval \
        "claim_count_is 3 && filler_running_is 3"
    pool_deployment web 3 300m no
    check "consolidation round $round: web runs beside it" wait_until 120 running_is 3
    kc delete deployment -n "$APPS" filler --wait=false >/dev/null
    delay=$((5 + RANDOM % 45))
    cdelays="$cdelays $delay"
    crash_after "$delay"
    check "consolidation round $round: killed $delay s after filler left; the pool converges (one NodeClaim, web Running, no taint, no host Claimed or Leaving, two hosts Available)" \
        wait_until 420 consolidated
    echo "# consolidation round $round: kill -> converged $(($(now_ms) - t_kill)) ms"
    kc delete deployment -n "$APPS" web --wait=false >/dev/null
    check "consolidation round $round: web deleted, the last Node goes" wait_until 300 eval \
        "claim_count_is 0 && available_is 3"
done
check "no NodeClaim of the NodePool is stuck being deleted" eval \
    "[ \$(claims | jq '[.items[] | select(.metadata.deletionTimestamp != null)] | length') = 0 ]"
check "the controller's log is JSON lines" all_json "$work/ctl.log"

echo "# kill delays (s):$delays; consolidation:$cdelays"
kill -TERM "$pid_ctl"
wait "$pid_ctl" || true
pid_ctl=""
tap_done
