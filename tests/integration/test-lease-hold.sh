#!/usr/bin/env bash
# Integration test: kpssh-controller keeps its leader Lease through a slow start-up, and an API
# server outage longer than the renew deadline turns the leader into a standby that leads again
# afterwards, in the same process. Real kube-apiserver of the lab, real sshd host.
#
#   1. 10,000 Pods (schedulerName nobody serves, so nothing else touches them). Instance A runs
#      with a client rate limit of 1 request/s, so its six informers need 20 pages of Pods and a
#      dozen more requests before its controllers start: tens of seconds against a 4 s Lease.
#      Instance B stands by from the moment A leads. The Lease names A every time it is looked
#      at, B never leads, A's start-up ends with its controllers running and /readyz 200.
#   2. B is stopped (so "leads again" below can only mean A), an SSHHost for lab host 1 is
#      probed every 3 s, then kube-apiserver is stopped for 60 s: A stays up, logs the loss
#      within the renew deadline plus one request timeout, keeps serving /healthz, and after
#      the API server is back it leads again and probes again (lastProbeTime advances). No
#      write can reach a stopped API server, so the write fence's proof is the fault test
#      (fault/lease-fence); here the log shows what was refused while fenced.
#
# Lease 4s / renew deadline 3s / retry 500ms. Ports: 31000 + 10 * lab ID + 3..5. Prints
# "N passed, M failed" and the figures (start-up time, time back to leading).
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-lease-hold
PODS_NS=kpssh-lease-hold-pods
LEASE=kpssh-lease-hold
NPODS=${KPSSH_LEASE_HOLD_PODS:-10000}
BASE=$((31000 + 10 * ${KPSSH_LAB_ID:-0}))
A_PORT=$((BASE + 3))
B_PORT=$((BASE + 4))
HOST_IP="${KPSSH_LAB_SUBNET%.*}.11" # host 1
APISERVER_SH="$KP_REPO/tests/lab/apiserver.sh"

work="$(mktemp -d)"
pid_a=""
pid_b=""
api_down=0

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"

cleanup() {
    set +e
    [ "$api_down" = 1 ] && "$APISERVER_SH" start >/dev/null 2>&1
    # Only the processes this test started, by PID.
    [ -n "$pid_a" ] && kill -KILL "$pid_a" 2>/dev/null
    [ -n "$pid_b" ] && kill -KILL "$pid_b" 2>/dev/null
    kc delete namespace "$NS" "$PODS_NS" --ignore-not-found --wait=false >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

probe_time() {
    kc get sshhost -n "$NS" h1 -o jsonpath='{.status.lastProbeTime}' 2>/dev/null || true
}
led_twice() { [ "$(jq -r 'select(.message == "became leader") | .message' "$work/a.log" | wc -l)" = 2 ]; }
probed_after() { # probed_after <epoch ms>
    local t
    t=$(probe_time)
    [ -n "$t" ] && [ "$(date -d "$t" +%s%3N)" -gt "$1" ]
}

common=(--kubeconfig "$KUBECONFIG" --pool-namespace "$NS" --leader-election-namespace "$NS"
    --leader-election-name "$LEASE" --leader-election-lease-duration 4s
    --leader-election-renew-deadline 3s --leader-election-retry-period 500ms
    --bind-address 127.0.0.1 --shutdown-timeout 20s --probe-interval 3s --probe-timeout 2s)

# --- set-up ------------------------------------------------------------------------------------
# The CRDs, once any delete an earlier test started has finished (tests/lab/crds.sh says why).
"$KP_REPO/tests/lab/crds.sh" apply
kc create namespace "$NS" >/dev/null
kc create namespace "$PODS_NS" >/dev/null
# The ServiceAccount admission plugin wants the namespace's default ServiceAccount.
wait_until 30 kc get serviceaccount default -n "$PODS_NS" >/dev/null 2>&1
# Four List files created side by side: about a minute for 10,000 Pods on the lab.
python3 - "$work" "$PODS_NS" "$NPODS" <<'EOF'
import json, sys
work, ns, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for part in range(4):
    items = [{"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "p-%05d" % i, "namespace": ns},
              "spec": {"schedulerName": "kpssh-nobody", "automountServiceAccountToken": False,
                       "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
             for i in range(part, n, 4)]
    with open("%s/pods-%d.json" % (work, part), "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
EOF
t=$(now_ms)
pids=()
for part in 0 1 2 3; do
    kc create -f "$work/pods-$part.json" >/dev/null &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
npods=$(kc get pods -n "$PODS_NS" --no-headers 2>/dev/null | wc -l)
echo "# created $npods Pods in $(($(now_ms) - t)) ms"
check "set-up: $NPODS Pods exist" test "$npods" = "$NPODS"

# --- 1. a slow start-up keeps the Lease ----------------------------------------------------------
"$BIN" "${common[@]}" --leader-election-identity ctl-a --metrics-port "$A_PORT" \
    --health-probe-port "$A_PORT" --kube-client-qps 1 --kube-client-burst 1 >"$work/a.log" 2>"$work/a.err" &
pid_a=$!
check "A: leads" wait_until 20 holder_is ctl-a
"$BIN" "${common[@]}" --leader-election-identity ctl-b --metrics-port "$B_PORT" \
    --health-probe-port "$B_PORT" >"$work/b.log" 2>"$work/b.err" &
pid_b=$!

# While A starts (up to 10 minutes), look at the Lease every half second.
looks=0
others=0
deadline=$((SECONDS + 600))
while [ "$SECONDS" -lt "$deadline" ] && ! grep -q '"controllers started"' "$work/a.log"; do
    dead "$pid_a" && break
    h=$(holder)
    looks=$((looks + 1))
    [ "$h" = ctl-a ] || others=$((others + 1))
    sleep 0.5
done
t_lead=$(log_ms "$work/a.log" "became leader")
t_started=$(log_ms "$work/a.log" "controllers started")
startup_ms=$((${t_started:-0} - ${t_lead:-0}))
echo "# A: start-up (became leader -> controllers started) took ${startup_ms} ms; Lease looked at $looks times, $others not naming A"
check "A: controllers started" test -n "$t_started"
check "A: start-up outlasted the 4 s Lease several times (${startup_ms} ms)" \
    test "$startup_ms" -gt 12000
check "A: the Lease named A at each of $looks looks" test "$others" = 0
check "A: never lost the Lease" not_in_file '"leader Lease lost' "$work/a.log"
check "A: still running" kill -0 "$pid_a"
check "A: /readyz 200 once started" wait_until 60 is_code 200 "http://127.0.0.1:$A_PORT/readyz"
check "B: never led" not_in_file '"became leader"' "$work/b.log"
check "B: /metrics says B does not lead" url_has "http://127.0.0.1:$B_PORT/metrics" \
    '^kpssh_leader_election_is_leader 0$'
check "B: /readyz 200 (standby)" is_code 200 "http://127.0.0.1:$B_PORT/readyz"

# --- 2. kube-apiserver stopped for 60 s under the leader -----------------------------------------
kill -TERM "$pid_b"
check "B: ends after SIGTERM" wait_until 15 dead "$pid_b"
rc_b=$(status_of "$pid_b")
pid_b=""
check "B: exit code 0 (got $rc_b)" test "$rc_b" = 0

kc create secret generic pool-key -n "$NS" --from-file=privateKey="$KPSSH_LAB_SSH_KEY" >/dev/null
kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHHost
metadata: {name: h1, namespace: $NS}
spec:
  address: $HOST_IP
  sshKeySecretRef: {name: pool-key}
  capacity: {cpu: "2", memory: 4Gi}
EOF
t=$(now_ms)
check "A: probes the host" wait_until 60 probed_after "$t"
t_probe_before=$(date -d "$(probe_time)" +%s%3N)

t_stop=$(now_ms)
api_down=1
"$APISERVER_SH" stop >/dev/null
t_stopped=$(now_ms) # kube-apiserver drains before it ends: the outage counts from here
echo "# kube-apiserver took $((t_stopped - t_stop)) ms to stop"
lost_msg="leader Lease lost; writes fenced, stopping the controllers and standing by"
check "A: fences and stands by" wait_until 20 grep -q "\"$lost_msg\"" "$work/a.log"
t_lost=$(log_ms "$work/a.log" "$lost_msg")
fence_ms=$((${t_lost:-0} - t_stop))
echo "# A: stood down ${fence_ms} ms after kube-apiserver was stopped"
# Renew deadline 3 s, counted from the last renewal before the stop (up to one retry period
# earlier), plus the hung request's 1.5 s timeout and a retry period before the keeper looks.
check "A: stood down within 6 s of the stop (${fence_ms} ms)" test "$fence_ms" -le 6000
while [ $(($(now_ms) - t_stopped)) -lt 60000 ]; do
    dead "$pid_a" && break
    sleep 1
done
check "A: alive throughout the outage" kill -0 "$pid_a"
check "A: /healthz 200 during the outage" is_code 200 "http://127.0.0.1:$A_PORT/healthz"
check "A: /readyz says not ready during the outage" is_code 503 "http://127.0.0.1:$A_PORT/readyz"
check "A: /metrics says A does not lead during the outage" \
    url_has "http://127.0.0.1:$A_PORT/metrics" '^kpssh_leader_election_is_leader 0$'
t_start=$(now_ms)
"$APISERVER_SH" start >/dev/null
api_down=0
t_back=$(now_ms)
echo "# kube-apiserver was down $((t_start - t_stopped)) ms (gone) and took $((t_back - t_start)) ms to come back ready"

check "A: leads again" wait_until 30 holder_is ctl-a
check "A: logged becoming leader a second time" wait_until 10 led_twice
t_relead=$(log_ms "$work/a.log" "became leader" 2)
echo "# A: leading again ${t_relead:+$((t_relead - t_start))} ms after kube-apiserver was started again"
check "A: /readyz 200 again" wait_until 120 is_code 200 "http://127.0.0.1:$A_PORT/readyz"
check "A: probes the host again (lastProbeTime advances)" wait_until 60 probed_after "$t_start"
t_probe_after=$(date -d "$(probe_time)" +%s%3N)
check "A: no probe result was written between the loss and leading again" \
    test "$t_probe_before" -lt "$t_lost" -a "$t_probe_after" -ge "${t_relead:-0}"
refused=$(grep -c 'writes are fenced' "$work/a.log" || true)
echo "# A: $refused log lines name a write refused by the fence"
check "A: every log line is JSON" all_json "$work/a.log"

kill -TERM "$pid_a"
check "A: ends after SIGTERM" wait_until 25 dead "$pid_a"
rc_a=$(status_of "$pid_a")
pid_a=""
check "A: exit code 0 (got $rc_a)" test "$rc_a" = 0
check "A: released the Lease" grep -q '"released the leader Lease"' "$work/a.log"

if [ "$fail" -ne 0 ]; then
    for f in a b; do
        echo "# --- $f.log (tail)"
        tail -n 30 "$work/$f.log" 2>/dev/null | sed 's/^/#   /'
    done
fi
tap_done
