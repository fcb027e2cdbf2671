#!/usr/bin/env bash
# scripts/demo.sh: the whole kpssh cycle on this machine, as `make demo` shows it. A lab (a real
# Kubernetes control plane and real sshd hosts in network namespaces, tests/lab) with a pool of
# four hosts in two classes; kpssh-controller as its own process; the NodePool and the Deployment
# of examples/; the Deployment scaled up (hosts join: amber) and back to zero (they leave and go
# back to the pool warm: green) while `kpssh get pool -w` shows the pool. The lab and the
# controller stay up afterwards, for looking around; `make demo-down` ends both.
#
#   scripts/demo.sh up      the cycle (make demo; make builds and installs what is missing first)
#   scripts/demo.sh down    stops the controller and the lab (make demo-down); safe to run twice
#
# Environment:
#   KPSSH_DEMO_LAB_ID     lab instance (default 199: the test tiers use 0..99 and their demo test
#                         its lab + 100, never 199)
#   KPSSH_DEMO_BUILD      the build directory holding src/kpssh-controller and src/kpssh
#                         (default build/dev)
#   KPSSH_DEMO_REPLICAS   replicas of the scale-up (default 6: two 4-CPU hosts; docs/demo.md says
#                         why)
#   KPSSH_DEMO_CHECK=1    for the e2e test: fail (exit 1) when a step does not happen in time,
#                         instead of only saying so
#
# Every step prints its time since the start; the summary at the end splits the cycle.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export KPSSH_LAB_ID=${KPSSH_DEMO_LAB_ID:-199}
export KPSSH_LAB_DIR="$REPO/_out/lab$KPSSH_LAB_ID"
BUILD=${KPSSH_DEMO_BUILD:-$REPO/build/dev}
REPLICAS=${KPSSH_DEMO_REPLICAS:-6}
CHECK=${KPSSH_DEMO_CHECK:-0}
DEMO_DIR="$REPO/_out/demo$KPSSH_LAB_ID"
NS=kpssh-system
PORT=$((18000 + KPSSH_LAB_ID))
CTL="$BUILD/src/kpssh-controller"
CLI="$BUILD/src/kpssh"

t0=$(date +%s.%N)
# Seconds since a date +%s.%N stamp, to a tenth.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { printf '[%6ss] %s\n' "$(since "$t0")" "$*"; }
die() {
    echo "demo: $*" >&2
    exit 1
}

# --- down ----------------------------------------------------------------------------------------
down() {
    local pid
    for f in "$DEMO_DIR/controller.pid" "$DEMO_DIR/watch.pid"; do
        [ -s "$f" ] || continue
        pid=$(<"$f")
        # Only the process this script started: the PID file's, if it still runs our binary.
        if kill -0 "$pid" 2>/dev/null && grep -qa kpssh "/proc/$pid/cmdline" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.2
            done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    done
    "$REPO/tests/lab/down.sh"
    echo "demo: stopped (logs kept in $DEMO_DIR)"
}

case "${1:-up}" in
up) ;;
down)
    down
    exit 0
    ;;
*) die "usage: scripts/demo.sh [up|down]" ;;
esac

[ "$(id -u)" = 0 ] || die "the lab needs root (network namespaces, a bridge, tmpfs)"
for b in "$CTL" "$CLI"; do
    [ -x "$b" ] || die "$b is missing: run 'make demo' (it builds first) or set KPSSH_DEMO_BUILD"
done
[ -x "$REPO/_out/k8s/bin/kube-apiserver" ] || [ -n "${KPSSH_LAB_BIN:-}" ] ||
    die "the Kubernetes binaries are missing: run 'make harness' (make demo does)"

# A step that must happen within a time: waits, then says how long it took. With
# KPSSH_DEMO_CHECK=1 a step that does not happen ends the demo with the controller's log.
step() { # step <seconds> <what> <command...>
    local limit=$1 what=$2 ts deadline
    shift 2
    ts=$(date +%s.%N)
    deadline=$((SECONDS + limit))
    until "$@"; do
        if [ -s "$DEMO_DIR/controller.pid" ] && ! kill -0 "$(<"$DEMO_DIR/controller.pid")" 2>/dev/null; then
            say "kpssh-controller has exited; the end of its log:"
            tail -n 20 "$DEMO_DIR/controller.log" >&2
            exit 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "NOT DONE within ${limit}s: $what"
            if [ "$CHECK" = 1 ]; then
                echo "# --- the pool ---"
                "$CLI" get pool -n "$NS" --no-color 2>&1 | sed 's/^/# /' || true
                echo "# --- last of the controller's log ($DEMO_DIR/controller.log) ---"
                tail -n 60 "$DEMO_DIR/controller.log" | sed 's/^/# /'
                exit 1
            fi
            return 0
        fi
        sleep 0.5
    done
    say "$what ($(since "$ts")s)"
}

# --- the lab ----------------------------------------------------------------------------------
# A demo left running is ended first, so `make demo` twice starts clean.
down >/dev/null 2>&1 || true
mkdir -p "$DEMO_DIR"
say "bringing up lab $KPSSH_LAB_ID: etcd, kube-apiserver, kube-controller-manager, kube-scheduler"
"$REPO/tests/lab/up.sh" --hosts 0 >"$DEMO_DIR/lab-up.log" 2>&1 ||
    {
        tail -n 30 "$DEMO_DIR/lab-up.log" >&2
        die "the lab did not come up (log: $DEMO_DIR/lab-up.log)"
    }
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
kc() { "$KPSSH_LAB_KUBECTL" --kubeconfig "$KUBECONFIG" --request-timeout=30s "$@"; }

say "the API: CRDs, namespace $NS, the pool's SSH key Secret"
"$REPO/tests/lab/crds.sh" apply >/dev/null
kc create namespace "$NS" >/dev/null
kc create secret generic pool-ssh-key -n "$NS" --from-file=privateKey="$KPSSH_LAB_SSH_KEY" >/dev/null

# The join profile: the shipped tls-bootstrap join and leave scripts, under the shipped name. Its
# install step is replaced: the shipped one installs packages, and the lab's hosts share their
# directories with this machine (they have a kubelet already).
jq -n --arg i 'mkdir -p /var/lib/kpssh
systemctl disable --now kubelet >/dev/null 2>&1 || true' \
    --arg j "$(cat "$REPO/profiles/tls-bootstrap/join.sh")" \
    --arg l "$(cat "$REPO/profiles/tls-bootstrap/leave.sh")" '{
    apiVersion: "karpenter.kpssh.dev/v1beta1", kind: "SSHJoinProfile",
    metadata: {name: "tls-bootstrap"},
    spec: {version: "1", scripts: {install: $i, join: $j, leave: $l}, timeouts: {join: "3m"}}}' |
    kc apply -f - >/dev/null
kc apply -f "$REPO/examples/nodeclass.yaml" >/dev/null

# Four hosts: two of class small (2 CPUs), two of class large (4 CPUs), each an sshd in its own
# network namespace, written as SSHHosts the way examples/host.yaml is.
say "four SSH hosts: small-1, small-2 (2 CPUs), large-1, large-2 (4 CPUs)"
i=0
for spec in small:2 small:2 large:4 large:4; do
    i=$((i + 1))
    class=${spec%:*}
    cpu=${spec#*:}
    n=$(((i - 1) % 2 + 1))
    "$KPSSH_LAB_HOST_SH" add "$i" --cpu "$cpu" >>"$DEMO_DIR/lab-up.log" 2>&1
    kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHHost
metadata:
  name: $class-$n
  namespace: $NS
  labels: {karpenter.kpssh.dev/host-class: $class}
spec:
  address: ${KPSSH_LAB_GATEWAY%.*}.$((10 + i))
  user: root
  sshKeySecretRef: {name: pool-ssh-key}
  capacity: {cpu: "$cpu", memory: 4Gi}
EOF
done

# --- the controller ------------------------------------------------------------------------------
say "starting kpssh-controller (log: $DEMO_DIR/controller.log)"
setsid "$CTL" --kubeconfig "$KUBECONFIG" --pool-namespace "$NS" --disable-leader-election \
    --bind-address 127.0.0.1 --metrics-port "$PORT" --health-probe-port "$PORT" \
    --probe-interval 10s --probe-timeout 8s >"$DEMO_DIR/controller.log" 2>&1 </dev/null &
echo $! >"$DEMO_DIR/controller.pid"
ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$PORT/readyz")" = 200 ]; }
step 60 "kpssh-controller is ready" ready
states() { kc get sshhost -n "$NS" -o jsonpath='{range .items[*]}{.status.state}{"\n"}{end}'; }
count_state() { [ "$(states | grep -cx "$1")" = "$2" ]; }
step 90 "every host probed over SSH: Available (warm)" count_state Available 4

# The pool view, from a watch: a new table whenever a host, NodeClaim, Node or pod changes. It
# writes into a pipe, so it appends (a terminal would be cleared, and the demo's lines with it);
# --color keeps the pool's colours when the demo runs on a terminal.
colour=()
[ -t 1 ] && colour=(--color)
"$CLI" get pool -n "$NS" -w "${colour[@]}" > >(cat) &
echo $! >"$DEMO_DIR/watch.pid"
sleep 1

# --- scale up ------------------------------------------------------------------------------------
say "applying examples/nodepool.yaml (consolidateAfter shortened to 10s for the demo)"
kc apply -f "$REPO/examples/nodepool.yaml" >/dev/null
kc patch nodepool pool --type merge -p '{"spec":{"disruption":{"consolidateAfter":"10s"}}}' >/dev/null
kc apply -f "$REPO/examples/inflate.yaml" >/dev/null
say "scaling deployment inflate to $REPLICAS pods of 1 CPU: pending pods pull hosts from the pool"
t_up=$(date +%s.%N)
kc scale deployment inflate -n default --replicas "$REPLICAS" >/dev/null
pods_running() {
    [ "$(kc get pods -n default -l app=inflate --field-selector=status.phase=Running \
        -o name | wc -l)" = "$1" ]
}
claims_exist() { [ "$(kc get nodeclaims -o name | wc -l)" -ge 1 ]; }
step 30 "NodeClaims created for the pending pods" claims_exist
step 240 "all $REPLICAS pods Running on joined hosts" pods_running "$REPLICAS"
up_s=$(since "$t_up")
joined=$(states | grep -cx InUse || true)

# --- scale down ----------------------------------------------------------------------------------
sleep 3
say "scaling inflate to 0: empty nodes are drained, leave, and their hosts go back warm"
t_down=$(date +%s.%N)
kc scale deployment inflate -n default --replicas 0 >/dev/null
no_claims() { [ "$(kc get nodeclaims -o name | wc -l)" = 0 ]; }
step 180 "every NodeClaim gone (Nodes drained and deleted)" no_claims
step 120 "every host Available again (warm: kubelet stopped, binaries kept)" count_state Available 4
down_s=$(since "$t_down")
sleep 2
# The watch's last table before the summary, not interleaved with it.
watch_pid=$(cat "$DEMO_DIR/watch.pid")
kill -TERM "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
rm -f "$DEMO_DIR/watch.pid"

cat <<EOF

kpssh demo: $REPLICAS pods scaled up in ${up_s}s ($joined hosts joined) and back to 0 in ${down_s}s
(hosts warm again); the whole run took $(since "$t0")s.

The lab and the controller keep running. Look around:
  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$KPSSH_LAB_KUBECTL
  $CLI get pool -n $NS -w            # the pool view (also: kubectl kpssh get pool)
  kubectl get nodepools,nodeclaims,nodes
  kubectl scale deployment inflate --replicas 3
  kubectl get events -A --sort-by=.lastTimestamp | tail
  curl -s http://127.0.0.1:$PORT/metrics | grep '^karpenter_'
  less $DEMO_DIR/controller.log      # one JSON line per event
Stop everything: make demo-down
EOF
