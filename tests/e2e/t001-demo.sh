#!/usr/bin/env bash
# e2e: `make demo` run non-interactively (scripts/demo.sh with KPSSH_DEMO_CHECK=1, so a step that
# does not happen in time fails it with the pool and the controller's log). The demo brings up
# its own lab (ID: this lab's + 100), four hosts in two classes, kpssh-controller, the NodePool
# and Deployment of examples/, scales up and back to zero while `kpssh get pool -w` runs; then
# `scripts/demo.sh down` takes everything away again. Checks what a newcomer would see:
#   - the demo ends 0 and prints its summary;
#   - every pod of the scale-up ran, and hosts joined (the pool view showed hosts InUse);
#   - every host is Available again at the end, and no NodeClaim or Node is left;
#   - demo down stops the controller and takes the demo's lab (its bridge) away.
# Figures printed: the demo's own step times and summary.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label e2e), which brings the lab up}"
REPO=${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=$(cd "$PWD/.." && pwd)
# Never 199, make demo's own default: a demo left running by a developer stays up.
DEMO_ID=$((${KPSSH_LAB_ID:-0} + 100))
[ "$DEMO_ID" -lt 199 ] || DEMO_ID=$((${KPSSH_LAB_ID:-0} - 100))
work=$(mktemp -d)

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"

demo() { KPSSH_DEMO_LAB_ID=$DEMO_ID KPSSH_DEMO_BUILD=$BUILD KPSSH_DEMO_CHECK=1 "$REPO/scripts/demo.sh" "$@"; }
cleanup() {
    demo down >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

rc=0
demo up >"$work/demo.out" 2>&1 || rc=$?
sed 's/^/# /' "$work/demo.out"
check "the demo ends 0 (got $rc)" test "$rc" = 0
check "it printed its summary" grep -q '^kpssh demo: .* scaled up in .* and back to 0 in' "$work/demo.out"
check "every pod of the scale-up ran" grep -q 'all [0-9]* pods Running on joined hosts' "$work/demo.out"
check "the pool view showed joined hosts" grep -q 'InUse' "$work/demo.out"
last_totals() { grep -E '^# [0-9]+ hosts:|^[0-9]+ hosts:' "$work/demo.out" | tail -n 1; }
all_warm_at_end() { last_totals | grep -q "4 hosts: 4 warm, 0 joined"; }
check "the pool view's last table shows every host warm ($(last_totals))" all_warm_at_end

# shellcheck source=/dev/null
. "$REPO/_out/lab$DEMO_ID/env.sh"
kc() { "$KPSSH_LAB_KUBECTL" --kubeconfig "$KUBECONFIG" --request-timeout=30s "$@"; }
none_of() { local out; out=$(kc get "$@" -o name) && [ -z "$out" ]; }
check "no NodeClaim left" none_of nodeclaims
check "no Node left" none_of nodes
ctl_pid=$(cat "$REPO/_out/demo$DEMO_ID/controller.pid")
check "the controller still runs after the demo (for looking around)" kill -0 "$ctl_pid"

demo down >"$work/down.out" 2>&1 || true
check "demo down stops the controller" eval "! kill -0 $ctl_pid 2>/dev/null"
check "demo down takes the lab away" eval "! ip link show kt${DEMO_ID}br >/dev/null 2>&1"
tap_done
