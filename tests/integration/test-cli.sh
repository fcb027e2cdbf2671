#!/usr/bin/env bash
# Integration test of the kpssh CLI's `get pool` against the lab: a real kube-apiserver,
# kube-scheduler, sshd hosts and hollow kubelets, with kpssh-controller managing a pool of two
# hosts of which one joins for a one-replica Deployment.
#
#   1. table      every SSHHost of the pool namespace is listed with its state; the joined one
#                 is InUse with its NodeClaim, its Node and the one pod on it.
#   2. -o json    parses with jq and agrees with `kubectl get sshhost` (names, states, claims);
#                 totals count the hosts, the warm one and the joined one.
#   3. colour     in a terminal (script(1)) the InUse row is amber and the Available row green;
#                 through a pipe, with --no-color in a terminal, or with NO_COLOR set, there is
#                 no escape byte.
#   4. plugin     `kubectl kpssh get pool` finds kubectl-kpssh on PATH.
#   5. -w         prints a first table, then a new one when the warm host is parked
#                 (maintenance annotation: state Maintenance), and ends with 0 on SIGINT; in a
#                 terminal it clears the screen before each table.
#
# Ports: 31000 + 10 * lab ID + 1. Lab hosts 151, 152. Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-cli-it
APPS=cli-apps
NP=cli-np
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 1))
HOSTS=(151 152)

work="$(mktemp -d)"
pid_ctl=""
pid_watch=""

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

KPSSH="${KPSSH_CLI_BIN:-$PWD/../src/kpssh}"
if [ ! -x "$KPSSH" ] || [ ! -x "$(dirname "$KPSSH")/kubectl-kpssh" ]; then
    echo "kpssh or kubectl-kpssh not found next to $KPSSH (set KPSSH_CLI_BIN)" >&2
    exit 1
fi

cleanup() {
    set +e # a watcher that already ended must not stop the rest of the clean-up
    [ -n "$pid_watch" ] && kill -KILL "$pid_watch" 2>/dev/null
    pool_cleanup "$NP"
}
trap cleanup EXIT

pool() { "$KPSSH" get pool -n "$NS" "$@"; }
# The row of host $2 in table $1 (a file).
row() { grep -E "^(.\[[0-9;]*m)?$2 " "$1" | tail -n 1; }
row_has() { row "$1" "$2" | grep -qE "$3"; }
esc_free() { ! grep -q $'\e' "$1"; }
jq_true() { jq -e "$@" >/dev/null; } # quiet: check's own "ok" line must still reach stdout
# In a pseudo-terminal: script(1) runs the command with a tty as stdout.
in_tty() { script -qefc "$*" /dev/null; }

# --- set-up: two warm hosts, one joins for a Deployment ------------------------------------------
pool_setup cli "${HOSTS[@]}"
pool_nodepool "$NP" cli WhenEmpty 10m 1
pool_controller cli-1 cli-2
t0=$SECONDS
pool_deployment web 1 500m no
check "web: the pod runs" wait_until 120 running_is 1
joined=$(claims | jq -r '.items[0].status.nodeName')
held=$(kc get sshhost -n "$NS" -o json |
    jq -r '.items[] | select(.status.state == "InUse") | .metadata.name')
spare=$(kc get sshhost -n "$NS" -o json |
    jq -r '.items[] | select(.status.state == "Available") | .metadata.name')
echo "# joined in $((SECONDS - t0)) s: host ${held:-?} as Node ${joined:-?}; spare ${spare:-?}"
check "one host is InUse and one Available" test -n "$held" -a -n "$spare"

# --- 1. table -------------------------------------------------------------------------------------
pool >"$work/table" 2>"$work/table.err"
sed 's/^/# /' "$work/table"
check "the table has the header" grep -qE '^NAME +CLASS +STATE +NODECLAIM +NODE +PODS +VCPU +RATE +AGE$' "$work/table"
check "the spare host is Available with no Node" row_has "$work/table" "$spare" "^$spare +cli +Available +- +- +- +0 +- "
check "the joined host is InUse with its NodeClaim, Node, one pod, 2 vCPU, \$0.04/h" \
    row_has "$work/table" "$held" "^$held +cli +InUse +cli-np-[a-z0-9]+ +$joined +1 +2 +\\\$0.04/h "
# shellcheck disable=SC2016 # a literal dollar sign
check "the totals line" grep -qxF '2 hosts: 1 warm, 1 joined, 0 at work, 0 failed; 2 vCPU attached, $0.04/h' "$work/table"
check "nothing on stderr" test ! -s "$work/table.err"
pool -o wide >"$work/wide"
check "-o wide adds ADDRESS, NODEPOOL, NODECLASS and TAINTS" \
    row_has "$work/wide" "$held" " $NP +cli +"

# --- 2. -o json, -o yaml ---------------------------------------------------------------------------
pool -o json >"$work/view.json"
check "-o json parses" jq_true '.kind == "PoolView"' "$work/view.json"
kc get sshhost -n "$NS" -o json |
    jq -c '[.items[] | {name: .metadata.name, state: .status.state, nodeClaim: (.status.claimRef.name // null)}] | sort_by(.name)' >"$work/want"
jq -c '[.hosts[] | {name, state, nodeClaim}] | sort_by(.name)' "$work/view.json" >"$work/got"
check "-o json agrees with kubectl get sshhost" diff "$work/want" "$work/got"
# shellcheck disable=SC2016 # jq's variables
check "-o json: the joined host's Node, pods, color" jq_true --arg h "$held" --arg n "$joined" \
    '.hosts[] | select(.name == $h) | .node == $n and .pods == 1 and .color == "amber" and .ratePerHour == "0.04"' "$work/view.json"
check "-o json: totals" jq_true '.totals | .hosts == 2 and .warm == 1 and .joined == 1 and .vcpu == "2"' "$work/view.json"
pool -o yaml >"$work/view.yaml"
check "-o yaml starts with the kind" grep -qx 'kind: "PoolView"' "$work/view.yaml"

# --- 3. colour ------------------------------------------------------------------------------------
check "a pipe gets no escape bytes" esc_free "$work/table"
in_tty "$KPSSH get pool -n $NS" >"$work/tty"
check "in a terminal the InUse row is amber" grep -qF $'\e[38;5;214m'"$held " "$work/tty"
check "in a terminal the Available row is green" grep -qF $'\e[32m'"$spare " "$work/tty"
in_tty "$KPSSH get pool -n $NS --no-color" >"$work/tty-nc"
check "--no-color in a terminal: no escape bytes" esc_free "$work/tty-nc"
pool --color >"$work/forced"
check "--color through a pipe: the InUse row is amber" grep -qF $'\e[38;5;214m'"$held " "$work/forced"
pool --color --no-color >"$work/forced-nc"
check "--no-color wins over --color" esc_free "$work/forced-nc"
in_tty "NO_COLOR=1 $KPSSH get pool -n $NS" >"$work/tty-env"
check "NO_COLOR in a terminal: no escape bytes" esc_free "$work/tty-env"

# --- 4. the kubectl plugin ------------------------------------------------------------------------
PATH="$(dirname "$KPSSH"):$PATH" "$KPSSH_LAB_KUBECTL" kpssh get pool -n "$NS" >"$work/plugin" 2>&1 || true
check "kubectl kpssh get pool lists the hosts" row_has "$work/plugin" "$spare" Available
check "kubectl kpssh: unknown command exits 2" eval \
    "PATH=\"$(dirname "$KPSSH"):\$PATH\" \"$KPSSH_LAB_KUBECTL\" kpssh frob 2>/dev/null; [ \$? = 2 ]"

# --- 5. -w ----------------------------------------------------------------------------------------
tables() { grep -c "get pool -n $NS -w" "$work/watch" || true; }
tables_at_least() { [ "$(tables)" -ge "$1" ]; }
# Started directly, not through the function pool: $! must be kpssh itself, for the SIGINT.
"$KPSSH" get pool -n "$NS" -w >"$work/watch" 2>"$work/watch.err" &
pid_watch=$!
check "-w prints a first table" wait_until 20 tables_at_least 1
first=$(tables)
kc annotate sshhost -n "$NS" "$spare" karpenter.kpssh.dev/maintenance= >/dev/null
check "-w prints a new table when the host is parked" wait_until 30 tables_at_least $((first + 1))
check "-w: the last table shows the host in Maintenance" wait_until 30 \
    row_has "$work/watch" "$spare" "^$spare +cli +Maintenance "
# A change the table does not show (an annotation of no meaning to kpssh) draws nothing new.
sleep 1
shown=$(tables)
kc annotate sshhost -n "$NS" "$spare" example.com/note=unrelated >/dev/null
sleep 3
check "-w: no new table for a change the view does not show ($shown, then $(tables))" \
    test "$(tables)" = "$shown"
check "-w: every table has its timestamp header" \
    grep -qE "^kpssh get pool -n $NS -w +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$" "$work/watch"
check "-w through a pipe: no escape bytes" esc_free "$work/watch"
kill -INT "$pid_watch"
rc=0
wait "$pid_watch" || rc=$?
pid_watch=""
check "-w ends with 0 on SIGINT (status $rc)" test "$rc" = 0
check "-w: nothing on stderr" test ! -s "$work/watch.err"
rc=0
in_tty "timeout --preserve-status -s INT 3 $KPSSH get pool -n $NS -w" >"$work/watch-tty" || rc=$?
check "-w in a terminal ends with 0 on SIGINT (status $rc)" test "$rc" = 0
check "-w in a terminal clears the screen before the table" \
    grep -qF $'\e[H\e[2J'"kpssh get pool -n $NS -w" "$work/watch-tty"

tap_done
