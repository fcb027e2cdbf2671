#!/usr/bin/env bash
# Integration test of the kpssh-controller process against the lab's real kube-apiserver.
#
#   1. --help lists every option with its KPSSH_ variable; --version; bad values and unknown
#      options fail with a message naming the option and exit code 2
#   2. instance A (admin kubeconfig, bearer token from KPSSH_TOKEN, metrics and probes on two
#      ports): /healthz 200, /readyz 200 once it leads, /metrics carries the kpssh_ and process_
#      families in the 0.0.4 text format, 404 elsewhere; the Lease names A's identity; the
#      effective-configuration log line shows the token as [REDACTED] and no line carries it
#   3. instance B (one port for everything) stands by: ready, not leader, Lease still A's
#   4. SIGTERM to A: exit 0, Lease released, B leads within a few seconds
#   5. the Lease taken away from B behind its back: B stops its controllers and stands by
#      without exiting or writing the Lease; once the intruder stops renewing, B leads again
#   6. SIGTERM to B: exit 0
#
# Both instances run with a short Lease (4s/3s/500ms) in a namespace of their own, removed at
# the end. Ports: 31000 + 10 * lab ID + 0..2. Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-ctl-it
LEASE=kpssh-ctl-it
BASE=$((31000 + 10 * ${KPSSH_LAB_ID:-0}))
A_METRICS=$BASE
A_HEALTH=$((BASE + 1))
B_PORT=$((BASE + 2))

work="$(mktemp -d)"
pid_a=""
pid_b=""

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"

cleanup() {
    set +e
    # Only the processes this test started, by PID.
    [ -n "$pid_a" ] && kill -KILL "$pid_a" 2>/dev/null
    [ -n "$pid_b" ] && kill -KILL "$pid_b" 2>/dev/null
    kc delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

matches() { [[ "$1" =~ $2 ]]; }
starts_with() { [[ "$1" == "$2"* ]]; }
version_ok() { "$BIN" --version | grep -q '^kpssh-controller [0-9]'; }

common=(--kubeconfig "$KUBECONFIG" --pool-namespace "$NS" --leader-election-namespace "$NS"
    --leader-election-name "$LEASE" --leader-election-lease-duration 4s
    --leader-election-renew-deadline 3s --leader-election-retry-period 500ms
    --bind-address 127.0.0.1 --shutdown-timeout 10s)

# --- 1. options --------------------------------------------------------------------------------
rc=0
"$BIN" --help >"$work/help" 2>&1 || rc=$?
check "--help exits 0" test "$rc" = 0
want_opts=(kubeconfig context token kube-client-qps kube-client-burst disable-leader-election
    leader-election-name leader-election-namespace pod-name leader-election-identity
    leader-election-lease-duration leader-election-renew-deadline leader-election-retry-period
    bind-address metrics-port health-probe-port log-level log-format pool-namespace workers
    probe-interval probe-timeout probe-concurrency bootstrap-group shutdown-timeout core-workers
    launch-concurrency launch-timeout registration-ttl gc-interval orphan-node-grace)
missing=""
for o in "${want_opts[@]}"; do
    env_name="KPSSH_$(tr 'a-z-' 'A-Z_' <<<"$o")"
    grep -q -- "^  --$o\b" "$work/help" || missing+=" --$o"
    grep -q -- "env $env_name\b" "$work/help" || missing+=" $env_name"
done
check "--help lists every option and its variable${missing:+ (missing:$missing)}" test -z "$missing"
listed=$(grep -c '^  --' "$work/help")
check "--help lists nothing unexpected ($listed entries)" test "$listed" = $((${#want_opts[@]} + 2))
check "--version prints the version" version_ok

usage_case() { # usage_case <description> <expected message> <env...> -- <args...>
    local what=$1 msg=$2 envs=() rc=0
    shift 2
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    env "${envs[@]}" "$BIN" "$@" >"$work/usage.out" 2>&1 || rc=$?
    if [ "$rc" = 2 ] && grep -qF -- "$msg" "$work/usage.out"; then
        ok "$what"
    else
        not_ok "$what (exit $rc): $(head -c 300 "$work/usage.out")"
    fi
}
usage_case "workers out of range" 'kpssh-controller: --workers="0": must be between 1 and 64' -- --workers=0
usage_case "not a number" '--metrics-port="http": expected an unsigned integer' -- --metrics-port http
usage_case "port out of range" '--health-probe-port="70000": must be between 0 and 65535' -- --health-probe-port=70000
usage_case "bad duration from env" 'KPSSH_PROBE_INTERVAL="soon": expected a duration' KPSSH_PROBE_INTERVAL=soon --
usage_case "bad choice" '--log-level="loud": expected one of debug, info, warn, error' -- --log-level=loud
usage_case "bad boolean" '--disable-leader-election="maybe": expected true or false' -- --disable-leader-election=maybe
usage_case "unknown option" 'unknown option --wrokers' -- --wrokers=3
usage_case "missing value" '--pool-namespace needs a value' -- --pool-namespace
usage_case "positional argument" 'unexpected argument "run"' -- run
usage_case "inconsistent lease timings" 'renew-deadline must be shorter than' -- --leader-election-renew-deadline=20s
usage_case "flag wins over env" '--workers="65"' KPSSH_WORKERS=3 -- --workers=65

# --- 2. instance A -----------------------------------------------------------------------------
# The SSH provider's informers list our kinds: the CRDs must exist before a replica can lead.
# The CRDs, once any delete an earlier test started has finished (tests/lab/crds.sh says why).
"$KP_REPO/tests/lab/crds.sh" apply
kc create namespace "$NS" >/dev/null
token=$(tr -d ' \n' <"$KPSSH_LAB_ADMIN_TOKEN_FILE")
# KPSSH_POD_NAME is what the chart sets (from metadata.name); a bare POD_NAME is not read.
KPSSH_TOKEN="$token" KPSSH_POD_NAME=ctl-a POD_NAME=not-read KPSSH_LOG_LEVEL=debug "$BIN" "${common[@]}" \
    --metrics-port "$A_METRICS" --health-probe-port "$A_HEALTH" --workers 3 \
    --probe-concurrency 5 >"$work/a.log" 2>"$work/a.err" &
pid_a=$!

check "A: /healthz answers 200" wait_until 20 is_code 200 "http://127.0.0.1:$A_HEALTH/healthz"
check "A: /readyz becomes 200" wait_until 20 is_code 200 "http://127.0.0.1:$A_HEALTH/readyz"
id_a=$(jq -r 'select(.message == "starting kpssh-controller") | .identity' "$work/a.log" | awk 'NR == 1')
check "A: identity is KPSSH_POD_NAME plus a random suffix ($id_a)" \
    matches "$id_a" '^ctl-a_[0-9a-f]{8}$'
check "A: the Lease names A" wait_until 10 holder_is "$id_a"
# Reconcile workers are named "<controller prefix>/<n>" (k8s/reconciler.c).
threads() { cat /proc/"$pid_a"/task/*/comm 2>/dev/null | grep -c "^$1/" || true; }
# The SSH job pool's threads are "<prefix>-ssh/<n>" (provider/ssh/jobs.c).
workers="$(threads sshnodecla) $(threads startuptai) $(threads sshhost) $(threads sshhost-ssh)"
check "A: --workers 3 for each controller's reconciles, --probe-concurrency 5 SSH job threads (got $workers)" \
    test "$workers" = "3 3 3 5"
metrics=$(body "http://127.0.0.1:$A_METRICS/metrics")
has() { grep -qE "$1" <<<"$metrics"; }
check "A: /metrics has kpssh_build_info" has '^kpssh_build_info\{version="[0-9.]+"\} 1$'
check "A: /metrics says A leads" has '^kpssh_leader_election_is_leader 1$'
check "A: /metrics has HELP and TYPE lines" has '^# TYPE kpssh_log_dropped_lines_total counter$'
check "A: /metrics has process metrics" has '^process_resident_memory_bytes [1-9]'
check "A: /metrics has process_cpu_seconds_total" has '^process_cpu_seconds_total [0-9]'
check "A: /metrics has process_open_fds" has '^process_open_fds [1-9]'
check "A: /metrics has kpssh_pool_hosts" has '^# TYPE kpssh_pool_hosts gauge$'
check "A: /metrics has the probe histogram" \
    has '^kpssh_host_probe_duration_seconds_count\{outcome="success"\} [0-9]+$'
check "A: /metrics has the phase histogram" \
    has '^# TYPE kpssh_instance_phase_duration_seconds histogram$'
check "A: /metrics has the zombie counter" has '^# TYPE kpssh_host_zombie_actions_total counter$'
ctype=$(curl -s -o /dev/null -w '%{content_type}' "http://127.0.0.1:$A_METRICS/metrics")
check "A: /metrics content type is text 0.0.4 ($ctype)" \
    starts_with "$ctype" "text/plain; version=0.0.4"
check "A: /healthz is not on the metrics port" is_code 404 "http://127.0.0.1:$A_METRICS/healthz"
check "A: unknown path 404" is_code 404 "http://127.0.0.1:$A_HEALTH/nope"
check "A: every log line is JSON" all_json "$work/a.log"
eff=$(jq -c 'select(.message == "effective configuration")' "$work/a.log")
check "A: effective configuration logged" test -n "$eff"
check "A: token shown as [REDACTED]" test "$(jq -r .token <<<"$eff")" = "[REDACTED]"
shown=$(jq -r '[.leader_election_name, .metrics_port, .probe_interval, .workers] | join(" ")' <<<"$eff")
check "A: effective configuration shows the values ($shown)" \
    test "$shown" = "$LEASE $A_METRICS 2m0s 3"
check "A: the token appears in no log line" not_in_file "$token" "$work/a.log"
check "A: the token appears nowhere on stderr" not_in_file "$token" "$work/a.err"
# Karpenter's log keys and spellings (pkg/operator/logging: level in capitals, RFC 3339 UTC time
# with milliseconds, logger, message, commit), on stdout.
first=$(head -n 1 "$work/a.log")
upstream_keys() {
    jq -e '(.level == "INFO" or .level == "DEBUG") and .logger == "controller" and
        (.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$")) and
        (.message | type == "string") and (.commit | length > 0) and
        (has("msg") or has("ts") | not)' <<<"$first" >/dev/null
}
check "A: log lines carry upstream's keys ($first)" upstream_keys
check "A: no log line on stderr" not_in_file '"level"' "$work/a.err"
# A reconcile's lines carry controller-runtime's keys: an SSHHost nobody can reach is probed
# (and fails) inside the sshhost controller's scope.
kc apply -f - >/dev/null <<YAML
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHHost
metadata: {name: h-log, namespace: $NS}
spec: {address: 127.0.0.1, port: 1, user: root, sshKeySecretRef: {name: none},
       capacity: {cpu: "1", memory: 1Gi}}
YAML
scoped_line() {
    jq -e --arg ns "$NS" 'select(.controller == "sshhost" and .controllerGroup ==
        "karpenter.kpssh.dev" and .controllerKind == "SSHHost" and .namespace == $ns and
        .name == "h-log" and (.reconcileID | test("^[0-9a-f-]{36}$")))' "$work/a.log" \
        | grep -q .
}
check "A: the host's reconcile lines carry controller, namespace, name and reconcileID" \
    wait_until 30 scoped_line
kc delete sshhost -n "$NS" h-log --timeout=30s >/dev/null || true

# --- 3. instance B stands by -------------------------------------------------------------------
"$BIN" "${common[@]}" --leader-election-identity ctl-b --metrics-port "$B_PORT" \
    --health-probe-port "$B_PORT" >"$work/b.log" 2>"$work/b.err" &
pid_b=$!
check "B: /readyz 200 on the shared port (standby is ready)" \
    wait_until 20 is_code 200 "http://127.0.0.1:$B_PORT/readyz"
check "B: /metrics on the shared port" is_code 200 "http://127.0.0.1:$B_PORT/metrics"
sleep 2 # several retry periods
check "B: stays not leader" url_has "http://127.0.0.1:$B_PORT/metrics" \
    '^kpssh_leader_election_is_leader 0$'
check "B: the Lease still names A" holder_is "$id_a"
check "B: never logged becoming leader" not_in_file '"became leader"' "$work/b.log"

# --- 4. SIGTERM to A ---------------------------------------------------------------------------
t0=$SECONDS
kill -TERM "$pid_a"
check "A: ends after SIGTERM" wait_until 15 dead "$pid_a"
rc_a=$(status_of "$pid_a")
pid_a=""
check "A: exit code 0 (got $rc_a)" test "$rc_a" = 0
check "A: logged the Lease release" grep -q '"released the leader Lease"' "$work/a.log"
check "B: takes the Lease over" wait_until 10 holder_is ctl-b
took=$((SECONDS - t0))
check "B: took over within 5 s (took ${took}s)" test "$took" -le 5
check "B: /metrics says B leads" wait_until 5 url_has "http://127.0.0.1:$B_PORT/metrics" \
    '^kpssh_leader_election_is_leader 1$'
# Readiness drops while the new leader's informers sync, then comes back.
check "B: /readyz 200 while leading" \
    wait_until 20 is_code 200 "http://127.0.0.1:$B_PORT/readyz"

# --- 5. the Lease taken from B -----------------------------------------------------------------
# The intruder "renews" once, with an 8 s Lease, and never again.
kc patch lease -n "$NS" "$LEASE" --type merge \
    -p '{"spec":{"holderIdentity":"intruder","leaseDurationSeconds":8}}' >/dev/null
lost_msg='"leader Lease lost; writes fenced, stopping the controllers and standing by"'
check "B: logs the loss and stands by" wait_until 15 grep -q "$lost_msg" "$work/b.log"
check "B: did not write the Lease it lost" holder_is intruder
check "B: still running" kill -0 "$pid_b"
check "B: /metrics says B no longer leads" wait_until 5 url_has "http://127.0.0.1:$B_PORT/metrics" \
    '^kpssh_leader_election_is_leader 0$'
check "B: /readyz 200 in standby" is_code 200 "http://127.0.0.1:$B_PORT/readyz"
check "B: leads again once the intruder's Lease expires" wait_until 25 holder_is ctl-b
check "B: logged becoming leader a second time" \
    test "$(grep -c '"became leader"' "$work/b.log")" = 2
check "B: /readyz 200 once its controllers run again" \
    wait_until 20 is_code 200 "http://127.0.0.1:$B_PORT/readyz"
check "B: /metrics says B leads again" url_has "http://127.0.0.1:$B_PORT/metrics" \
    '^kpssh_leader_election_is_leader 1$'

# --- 6. SIGTERM to B ---------------------------------------------------------------------------
kill -TERM "$pid_b"
check "B: ends after SIGTERM" wait_until 15 dead "$pid_b"
rc_b=$(status_of "$pid_b")
pid_b=""
check "B: exit code 0 (got $rc_b)" test "$rc_b" = 0
check "B: released the Lease" grep -q '"released the leader Lease"' "$work/b.log"

if [ "$fail" -ne 0 ]; then
    for f in a.log a.err b.log b.err; do
        echo "# --- $f (tail)"
        tail -n 20 "$work/$f" 2>/dev/null | sed 's/^/#   /'
    done
fi
tap_done
