#!/usr/bin/env bash
# Integration test: a host that hangs (accepts TCP, never speaks) holds neither the shutdown nor
# a stand-down of kpssh-controller, and a standby never leads while the old leader can still
# write. Two controller processes against the lab's real kube-apiserver.
#
#   1. Three SSHHosts point at a tarpit on 127.0.0.1 (listeners that accept and never say a
#      word); probe timeout 120 s, so each probe hangs for the whole test. Instance A leads and
#      its probes are in flight (the tarpit saw the connections, /metrics counts the jobs);
#      instance B stands by.
#   2. SIGTERM to A while the probes hang: A exits 0 within 5 s (the chart's grace period is
#      30 s) without the shutdown watchdog, after releasing the Lease; B leads, and its
#      "became leader" comes after A's release, which A logs only once every controller has
#      stopped and its fence is closed: no instant had both able to write.
#   3. B probes the hung hosts in turn; the Lease is taken from B behind its back (another
#      holder): B stands down within 5 s although its probes hang, and its SSH jobs are gone.
#   4. SIGTERM to B (standing by, then leading again is not waited for): exit 0 within 5 s.
#
# Before the SSH job pool, a reconcile worker held each probe for its whole timeout and stop
# waited for it: step 2 took the --shutdown-timeout and ended by SIGALRM (exit 142).
#
# Lease 4s / renew deadline 3s / retry 500ms. Ports: 31000 + 10 * lab ID + 6..7. Prints
# "N passed, M failed" and the figures.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-hung-it
LEASE=kpssh-hung-it
NHUNG=3
BASE=$((31000 + 10 * ${KPSSH_LAB_ID:-0}))
A_PORT=$((BASE + 6))
B_PORT=$((BASE + 7))

work="$(mktemp -d)"
pid_a=""
pid_b=""
pid_tarpit=""

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"

cleanup() {
    set +e
    # Only the processes this test started, by PID.
    [ -n "$pid_a" ] && kill -KILL "$pid_a" 2>/dev/null
    [ -n "$pid_b" ] && kill -KILL "$pid_b" 2>/dev/null
    [ -n "$pid_tarpit" ] && kill -KILL "$pid_tarpit" 2>/dev/null
    kc delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# Connections the tarpit has accepted so far.
dials() { wc -l <"$work/tarpit.log" 2>/dev/null || echo 0; }
dialed_at_least() { [ "$(dials)" -ge "$1" ]; }
# Ends $1 by SIGTERM and reaps it (in this shell, which is its parent): sets term_rc to its
# exit status and term_ms to the milliseconds it took. The shutdown watchdog (--shutdown-timeout
# 20s) and ctest's timeout bound the wait.
term_and_time() {
    local t0
    t0=$(now_ms)
    kill -TERM "$1"
    term_rc=0
    wait "$1" || term_rc=$?
    term_ms=$(($(now_ms) - t0))
}

common=(--kubeconfig "$KUBECONFIG" --pool-namespace "$NS" --leader-election-namespace "$NS"
    --leader-election-name "$LEASE" --leader-election-lease-duration 4s
    --leader-election-renew-deadline 3s --leader-election-retry-period 500ms
    --bind-address 127.0.0.1 --shutdown-timeout 20s --probe-interval 10m --probe-timeout 120s)

# --- set-up ------------------------------------------------------------------------------------
# The CRDs, once any delete an earlier test started has finished (tests/lab/crds.sh says why).
"$KP_REPO/tests/lab/crds.sh" apply
kc create namespace "$NS" >/dev/null
kc create secret generic hung-key -n "$NS" --from-file=privateKey="$KPSSH_LAB_SSH_KEY" >/dev/null

# The tarpit: one listener per host (an address and port is one host), each accepts every
# connection, logs one line per accept, holds it open and never writes.
python3 - "$work/tarpit.ports" "$work/tarpit.log" "$NHUNG" <<'EOF' &
import os, select, socket, sys
ls = []
for _ in range(int(sys.argv[3])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    ls.append(s)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("".join("%d\n" % s.getsockname()[1] for s in ls))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
held = []
while True:
    for s in select.select(ls, [], [])[0]:
        c, _ = s.accept()
        held.append(c)
        with open(sys.argv[2], "a") as f:
            f.write("accepted\n")
EOF
pid_tarpit=$!
wait_until 10 test -s "$work/tarpit.ports"
: >"$work/tarpit.log"
i=0
while read -r port; do
    i=$((i + 1))
    kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHHost
metadata: {name: hung-$i, namespace: $NS}
spec:
  address: 127.0.0.1
  port: $port
  sshKeySecretRef: {name: hung-key}
  capacity: {cpu: "1", memory: 1Gi}
EOF
done <"$work/tarpit.ports"

# --- 1. A leads with its probes hanging, B stands by --------------------------------------------
"$BIN" "${common[@]}" --leader-election-identity hung-a --metrics-port "$A_PORT" \
    --health-probe-port "$A_PORT" >"$work/a.log" 2>&1 &
pid_a=$!
check "A: leads" wait_until 30 holder_is hung-a
check "A: its probes reached the tarpit ($NHUNG hosts)" wait_until 30 dialed_at_least "$NHUNG"
check "A: /metrics counts the SSH jobs in flight" \
    wait_until 10 url_has "http://127.0.0.1:$A_PORT/metrics" "^kpssh_ssh_jobs_in_flight $NHUNG\$"
"$BIN" "${common[@]}" --leader-election-identity hung-b --metrics-port "$B_PORT" \
    --health-probe-port "$B_PORT" >"$work/b.log" 2>&1 &
pid_b=$!
check "B: ready in standby" wait_until 20 is_code 200 "http://127.0.0.1:$B_PORT/readyz"
sleep 1
check "B: does not lead" holder_is hung-a

# --- 2. SIGTERM to A while its probes hang -------------------------------------------------------
n=$(dials)
term_and_time "$pid_a"
rc_a=$term_rc ms_a=$term_ms
pid_a=""
echo "# A: SIGTERM with $NHUNG hung probes in flight -> exit $rc_a after $ms_a ms"
check "A: exit status 0 (got $rc_a)" test "$rc_a" = 0
check "A: exited within 5 s of SIGTERM (${ms_a} ms; grace period 30 s)" test "$ms_a" -le 5000
check "A: the watchdog did not have to end it" \
    not_in_file "shutdown did not finish within --shutdown-timeout" "$work/a.log"
check "A: released the Lease" grep -q '"released the leader Lease"' "$work/a.log"
check "B: leads" wait_until 15 holder_is hung-b
t_rel=$(log_ms "$work/a.log" "released the leader Lease" || true)
t_led=$(log_ms "$work/b.log" "became leader" || true)
echo "# B: became leader $((${t_led:-0} - ${t_rel:-0})) ms after A released the Lease"
check "B: became leader only after A had stopped writing (released: ${t_rel:-none}, led: ${t_led:-none})" \
    test -n "$t_rel" -a -n "$t_led" -a "${t_led:-0}" -ge "${t_rel:-1}"

# --- 3. the Lease taken from B while its probes hang --------------------------------------------
check "B: its probes reached the tarpit too" wait_until 30 dialed_at_least $((n + NHUNG))
check "B: /metrics counts its SSH jobs in flight" \
    wait_until 10 url_has "http://127.0.0.1:$B_PORT/metrics" "^kpssh_ssh_jobs_in_flight $NHUNG\$"
kc patch lease -n "$NS" "$LEASE" --type merge \
    -p '{"spec":{"holderIdentity":"intruder","leaseDurationSeconds":30}}' >/dev/null
lost_msg="leader Lease lost; writes fenced, stopping the controllers and standing by"
check "B: logs the loss" wait_until 15 grep -q "\"$lost_msg\"" "$work/b.log"
check "B: stands by" wait_until 30 grep -q '"standing by"' "$work/b.log"
t_lost=$(log_ms "$work/b.log" "$lost_msg" || true)
t_stood=$(log_ms "$work/b.log" "standing by" || true)
stand_ms=$((${t_stood:-0} - ${t_lost:-0}))
echo "# B: stood down in $stand_ms ms with $NHUNG hung probes in flight"
check "B: stood down within 5 s (${stand_ms} ms)" \
    test -n "$t_lost" -a -n "$t_stood" -a "$stand_ms" -le 5000
check "B: no SSH job in flight in standby" \
    wait_until 5 url_has "http://127.0.0.1:$B_PORT/metrics" '^kpssh_ssh_jobs_in_flight 0$'
check "B: cancelled jobs counted" \
    url_has "http://127.0.0.1:$B_PORT/metrics" '^kpssh_ssh_jobs_total\{kind="probe",result="cancelled"\} [1-9]'
check "B: did not write the Lease it lost" holder_is intruder

# --- 4. SIGTERM to B -----------------------------------------------------------------------------
term_and_time "$pid_b"
rc_b=$term_rc ms_b=$term_ms
pid_b=""
echo "# B: SIGTERM in standby -> exit $rc_b after $ms_b ms"
check "B: exit status 0 (got $rc_b)" test "$rc_b" = 0
check "B: exited within 5 s (${ms_b} ms)" test "$ms_b" -le 5000
check "every log line is JSON" all_json "$work/a.log"
check "every log line of B is JSON" all_json "$work/b.log"

if [ "$fail" -ne 0 ]; then
    for f in a b; do
        echo "# --- $f.log (tail)"
        tail -n 30 "$work/$f.log" 2>/dev/null | sed 's/^/#   /'
    done
fi
tap_done
