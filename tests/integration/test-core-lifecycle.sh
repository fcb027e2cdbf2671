#!/usr/bin/env bash
# Integration test of Karpenter's core in kpssh-controller (NodeClaim lifecycle, Node termination,
# garbage collection, expiration) against the lab: a real kube-apiserver, kube-controller-manager
# and kube-scheduler, real sshd hosts, and hollow kubelets that TLS-bootstrap with the token the
# SSH provider mints. The test only creates and deletes NodeClaims and Nodes, as the provisioner
# and users would; the controller, run as its own process, does everything else.
#
#   1. lifecycle  a NodeClaim for an SSHNodeClass becomes Launched -> Registered -> Initialized
#                 -> Ready; its Node is Ready, carries the NodeClaim's labels and taints,
#                 karpenter.sh/registered and karpenter.sh/initialized, the termination finalizer
#                 and an ownerRef to the NodeClaim, and has lost karpenter.sh/unregistered; the
#                 host is InUse.
#   2. deletion   deleting the NodeClaim runs leave on the host (kubelet inactive, asserted over
#                 SSH; the leave's own finishing time, stamped on the host, is before the Node's
#                 DELETED watch event: the Node is the bill on EKS Hybrid Nodes), then the
#                 NodeClaim goes and the host is Available, warm.
#   3. cascade    deleting the Node instead takes the NodeClaim with it, the same way.
#   4. failures   the pool exhausted (its one host claimed): the NodeClaim is deleted with an
#                 InsufficientCapacityError event; a node class that is not Ready: deleted; a
#                 join that fails: Launched=Unknown with reason JoinFailed, the host Unhealthy,
#                 the launch retried (no other host: deleted).
#   5. garbage    a NodeClaim whose host an operator force-released is collected; a Node left
#                 with our providerID and no NodeClaim is collected and its host left.
#   6. expiry     a NodeClaim with expireAfter 25s is deleted once it has expired.
#   7. timeouts   a controller restarted with --registration-ttl 20s / --launch-timeout 20s:
#                 a launch whose kubelet never registers, and a launch that never ends, are
#                 deleted and their hosts come back.
#   8. SIGTERM    while a join is in flight: the controller exits 0 within 5 s, the claim
#                 stays, and the next process resumes the launch (cut by the launch timeout).
#
# One replica (--disable-leader-election). Ports: 31000 + 10 * lab ID + 8. Lab hosts 161..166.
# Prints "N passed, M failed".
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
NS=kpssh-core-it
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 8))
HOSTS=(161 162 163 164 165 166)

work="$(mktemp -d)"
pid_ctl=""
pid_watch=""

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

hosts_added=()
cleanup() {
    set +e
    # Only the processes this test started, by PID.
    [ -n "$pid_ctl" ] && kill -KILL "$pid_ctl" 2>/dev/null
    [ -n "$pid_watch" ] && kill -KILL "$pid_watch" 2>/dev/null
    [ -n "${pid_watch2:-}" ] && kill -KILL "$pid_watch2" 2>/dev/null
    for nc in $(kc get nodeclaims -o name 2>/dev/null | grep '/core-'); do
        kc patch "$nc" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
        kc delete "$nc" --wait=false >/dev/null 2>&1
    done
    for n in $(kc get nodes -o name 2>/dev/null | grep '/core-'); do
        kc patch "$n" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
        kc delete "$n" --wait=false >/dev/null 2>&1
    done
    for i in "${hosts_added[@]}"; do "$KPSSH_LAB_HOST_SH" del "$i" >/dev/null 2>&1; done
    kc delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
    if [ "${fail:-0}" != 0 ]; then
        echo "# --- last of the controller's log ---"
        tail -n 60 "$work/ctl.log" 2>/dev/null | sed 's/^/# /'
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# --- helpers -----------------------------------------------------------------------------------
cond() { # cond <nodeclaim> <type>: status of the condition ("" when absent or no NodeClaim)
    kc get nodeclaim "$1" -o json 2>/dev/null |
        jq -r --arg t "$2" '.status.conditions[]? | select(.type == $t) | .status' 2>/dev/null || true
}
cond_reason() {
    kc get nodeclaim "$1" -o json 2>/dev/null |
        jq -r --arg t "$2" '.status.conditions[]? | select(.type == $t) | .reason' 2>/dev/null || true
}
cond_is() { [ "$(cond "$1" "$2")" = "$3" ]; }
cond_reason_is() { [ "$(cond "$1" "$2")" = "$3" ] && [ "$(cond_reason "$1" "$2")" = "$4" ]; }
gone() { ! kc get "$1" "$2" >/dev/null 2>&1; }
exists() { kc get "$1" "$2" >/dev/null 2>&1; }
pid_watch2=""
node_json() { kc get node "$1" -o json 2>/dev/null || echo '{}'; }
node_has() { node_json "$1" | jq -e "$2" >/dev/null; }
event_seen() { # event_seen <object name> <reason>
    [ -n "$(kc get events -A --field-selector "involvedObject.name=$1,reason=$2" -o name 2>/dev/null)" ]
}

nodeclaim() { # nodeclaim <name> <node class> [extra spec YAML lines]
    kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: $1
  labels: {karpenter.sh/nodepool: core-np, team: core}
spec:
  nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: $2}
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  taints:
    - {key: example.com/team, value: core, effect: NoSchedule}
  resources:
    requests: {cpu: 100m}
${3:-}
EOF
}

profile() { # profile <name> <install> <join> <leave>
    jq -n --arg n "$1" --arg i "$2" --arg j "$3" --arg l "$4" '{apiVersion: "karpenter.kpssh.dev/v1beta1",
        kind: "SSHJoinProfile", metadata: {name: $n}, spec: {version: "1",
        scripts: {install: $i, join: $j, leave: $l}, timeouts: {join: "3m"}}}' | kc apply -f - >/dev/null
}

start_controller() { # start_controller [extra options]
    "$BIN" --kubeconfig "$KUBECONFIG" --pool-namespace "$NS" --disable-leader-election \
        --bind-address 127.0.0.1 --metrics-port "$PORT" --health-probe-port "$PORT" \
        --probe-interval 5s --probe-timeout 4s --gc-interval 5s --orphan-node-grace 5s \
        --shutdown-timeout 20s "$@" >>"$work/ctl.log" 2>&1 &
    pid_ctl=$!
    wait_until 60 is_code 200 "http://127.0.0.1:$PORT/readyz"
}
stop_controller() {
    kill -TERM "$pid_ctl"
    wait "$pid_ctl" || true
    pid_ctl=""
}

# --- set-up ------------------------------------------------------------------------------------
# The CRDs, once any delete an earlier test started has finished (tests/lab/crds.sh says why).
"$KP_REPO/tests/lab/crds.sh" apply
kc create namespace "$NS" >/dev/null
kc create secret generic core-key -n "$NS" --from-file=privateKey="$KPSSH_LAB_SSH_KEY" >/dev/null

# The lab-safe install (the shipped one installs packages into directories the lab shares with
# the real machine; the lab host already has kubelet and systemctl), the shipped join and leave.
lab_install='mkdir -p /var/lib/kpssh
systemctl disable --now kubelet >/dev/null 2>&1 || true'
# The shipped leave, then a marker with the time it finished (the host shares the machine's
# clock), so the order "kubelet stopped, then the Node went" is measured, not polled.
profile core-tls "$lab_install" "$(cat "$KP_REPO/profiles/tls-bootstrap/join.sh")" \
    "$(cat "$KP_REPO/profiles/tls-bootstrap/leave.sh")
date +%s%3N > /var/lib/kpssh/left-at-ms"
# A join that registers the Node through the API (no kubelet: never Ready) in a second.
# shellcheck disable=SC2016 # expanded on the host, by the join's shell
api_join='body=$(printf '"'"'{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s"},"spec":{"providerID":"%s"}}'"'"' "$KPSSH_NODE_NAME" "$KPSSH_PROVIDER_ID")
printf %s "$KPSSH_CLUSTER_CA_B64" | base64 -d > /tmp/kpssh-core-ca.crt
code=$(curl -sS -o /dev/null -w "%{http_code}" --cacert /tmp/kpssh-core-ca.crt -H "Authorization: Bearer $KPSSH_VAR_adminToken" -H "Content-Type: application/json" -X POST "$KPSSH_CLUSTER_ENDPOINT/api/v1/nodes" -d "$body")
case $code in 201|409) ;; *) echo "node create: HTTP $code" >&2; exit 1 ;; esac'
profile core-api "mkdir -p /var/lib/kpssh" "$api_join" "true"
# shellcheck disable=SC2016
profile core-fail "mkdir -p /var/lib/kpssh" 'echo "join refused on purpose" >&2; exit 3' "true"
profile core-noreg "mkdir -p /var/lib/kpssh" "true" "true"
profile core-slow "mkdir -p /var/lib/kpssh" "sleep 600" "true"

pool_nodeclass core core core-tls
pool_nodeclass core-empty core-empty core-tls
pool_nodeclass core-notready core-notready no-such-profile
pool_nodeclass core-fail core-fail core-fail
pool_nodeclass core-api core-api core-api
pool_nodeclass core-noreg core-noreg core-noreg
pool_nodeclass core-slow core-slow core-slow

# SSHHosts <class>-1, <class>-2, ... (tests/lib/pool.sh): core-1, core-fail-1, core-api-1 and
# core-api-2, core-noreg-1, core-slow-1.
pool_hosts "$NS" core core-key core "${HOSTS[0]}"
pool_hosts "$NS" core-fail core-key core-fail "${HOSTS[1]}"
pool_hosts "$NS" core-api core-key core-api "${HOSTS[2]}" "${HOSTS[3]}"
pool_hosts "$NS" core-noreg core-key core-noreg "${HOSTS[4]}"
pool_hosts "$NS" core-slow core-key core-slow "${HOSTS[5]}"

start_controller
check "the controller is ready" is_code 200 "http://127.0.0.1:$PORT/readyz"
for h in core-1 core-fail-1 core-api-1 core-api-2 core-noreg-1 core-slow-1; do
    check "host $h is probed Available" wait_until 90 host_is "$h" Available
done

# --- 1. lifecycle ------------------------------------------------------------------------------
nodeclaim core-a core
check "core-a: finalizer karpenter.sh/termination" wait_until 20 \
    eval "kc get nodeclaim core-a -o json | jq -e '.metadata.finalizers | index(\"karpenter.sh/termination\")' >/dev/null"
check "core-a: Launched" wait_until 180 cond_is core-a Launched True
check "core-a: Registered" wait_until 180 cond_is core-a Registered True
check "core-a: Initialized" wait_until 180 cond_is core-a Initialized True
check "core-a: Ready" wait_until 30 cond_is core-a Ready True
check "core-a: status.nodeName is its Node" \
    test "$(kc get nodeclaim core-a -o jsonpath='{.status.nodeName}')" = core-a
check "core-a: the Node is Ready" node_has core-a '.status.conditions[] | select(.type == "Ready") | .status == "True"'
check "core-a: Node labels (nodepool, registered, initialized, the NodeClaim's own)" node_has core-a \
    '.metadata.labels | ."karpenter.sh/nodepool" == "core-np" and ."karpenter.sh/registered" == "true" and ."karpenter.sh/initialized" == "true" and .team == "core"'
check "core-a: Node has the NodeClaim's taint" node_has core-a \
    '[.spec.taints[]? | select(.key == "example.com/team" and .effect == "NoSchedule")] | length == 1'
check "core-a: karpenter.sh/unregistered is gone" node_has core-a \
    '[.spec.taints[]? | select(.key == "karpenter.sh/unregistered")] | length == 0'
check "core-a: Node finalizer karpenter.sh/termination" node_has core-a \
    '.metadata.finalizers | index("karpenter.sh/termination") != null'
check "core-a: Node is owned by its NodeClaim" node_has core-a \
    '[.metadata.ownerReferences[]? | select(.kind == "NodeClaim" and .name == "core-a" and .apiVersion == "karpenter.sh/v1")] | length == 1'
check "core-a: host core-1 is InUse" wait_until 30 host_is core-1 InUse
# The install and the join ran on the launch pool, not on a lifecycle worker.
pool_jobs() { # pool_jobs <kind>: successful jobs of that kind so far
    curl -s "http://127.0.0.1:$PORT/metrics" |
        awk -v k="$1" '$1 == "kpssh_ssh_jobs_total{kind=\"" k "\",result=\"success\"}" {print $2}'
}
pool_jobs_is() { test "$(pool_jobs "$1")" = "$2"; }
# Launched means the join script has exited, so both are counted by now (a scrape may be slow).
check "core-a: its install ran on the launch pool" wait_until 10 pool_jobs_is install 1
check "core-a: its join ran on the launch pool" wait_until 10 pool_jobs_is join 1

# --- 2. deletion: leave before the Node goes ----------------------------------------------------
# A watch stamps each Node event with the time it arrived; the leave script stamps the time it
# finished on the host. The Node's DELETED event must come after the leave.
left_at() { "$KPSSH_LAB_HOST_SH" exec "$1" cat /var/lib/kpssh/left-at-ms 2>/dev/null || true; }
(kc get node core-a --watch-only --output-watch-events -o jsonpath='{.type}{"\n"}' 2>/dev/null |
    while read -r t; do echo "$(now_ms) $t"; done >"$work/node-a.events") &
pid_watch=$!
sleep 1
kc delete nodeclaim core-a --wait=false >/dev/null
check "core-a: the NodeClaim is gone" wait_until 120 gone nodeclaim core-a
check "core-a: the Node is gone" wait_until 30 gone node core-a
sleep 1
kill "$pid_watch" 2>/dev/null || true
pid_watch=""
t_left=$(left_at "${HOSTS[0]}")
t_del=$(awk '$2 == "DELETED" {print $1; exit}' "$work/node-a.events")
check "core-a: kubelet stopped on the host (leave ran)" kubelet_inactive "${HOSTS[0]}"
check "core-a: leave finished (${t_left:-never}) before the Node was deleted (${t_del:-never})" \
    test -n "$t_left" -a -n "$t_del" -a "${t_left:-0}" -le "${t_del:-0}"
check "core-a: host core-1 is Available again" wait_until 60 host_is core-1 Available

# --- 3. cascade from the Node -------------------------------------------------------------------
nodeclaim core-b core
check "core-b: Initialized" wait_until 180 cond_is core-b Initialized True
kc delete node core-b --wait=false >/dev/null
check "core-b: deleting the Node deletes the NodeClaim" wait_until 120 gone nodeclaim core-b
check "core-b: the Node is gone" wait_until 60 gone node core-b
check "core-b: kubelet stopped on the host" kubelet_inactive "${HOSTS[0]}"
check "core-b: host core-1 is Available again" wait_until 60 host_is core-1 Available

# --- 4. launch failures -------------------------------------------------------------------------
# The pool exhausted: core-c1 takes the one host of core-noreg (its join exits 0 and never
# registers a Node), so core-c2 finds none.
nodeclaim core-c1 core-noreg
check "core-c1: Launched on the only host" wait_until 60 cond_is core-c1 Launched True
nodeclaim core-c2 core-noreg
check "core-c2 (pool exhausted): InsufficientCapacityError event" \
    wait_until 60 event_seen core-c2 InsufficientCapacityError
check "core-c2 (pool exhausted): the NodeClaim is deleted" wait_until 60 gone nodeclaim core-c2
kc delete nodeclaim core-c1 --wait=false >/dev/null
check "core-c1: released" wait_until 60 gone nodeclaim core-c1
check "core-c1: host core-noreg-1 is Available again" wait_until 60 host_is core-noreg-1 Available
nodeclaim core-d core-notready
check "core-d (node class not Ready): the NodeClaim is deleted" wait_until 60 gone nodeclaim core-d
# A failing join: the NodeClaim's Launched condition and the host's state are transient (the
# retry finds no other host and the probe heals the host), so watches record every version.
(kc get nodeclaims --field-selector metadata.name=core-e --watch -o json 2>/dev/null >"$work/nc-e.watch") &
pid_watch=$!
(kc get sshhost -n "$NS" core-fail-1 --watch -o json 2>/dev/null >"$work/host-fail.watch") &
pid_watch2=$!
nodeclaim core-e core-fail
saw_join_failed() {
    jq -s -e 'map(.status.conditions[]? | select(.type == "Launched" and .status == "Unknown" and .reason == "JoinFailed")) | length > 0' \
        "$work/nc-e.watch" >/dev/null 2>&1
}
saw_unhealthy() {
    jq -s -e 'map(select(.status.state == "Unhealthy")) | length > 0' "$work/host-fail.watch" >/dev/null 2>&1
}
check "core-e (join fails): Launched=Unknown, reason JoinFailed" wait_until 120 saw_join_failed
check "core-e (join fails): host core-fail-1 went Unhealthy" wait_until 60 saw_unhealthy
check "core-e: the launch is retried (and finds no other host: deleted)" wait_until 60 gone nodeclaim core-e
kill "$pid_watch" "$pid_watch2" 2>/dev/null || true
pid_watch=""

# --- 5. garbage collection ---------------------------------------------------------------------
nodeclaim core-g core-api
check "core-g: Registered" wait_until 120 cond_is core-g Registered True
g_host=$(kc get sshhost -n "$NS" -o json | jq -r '.items[] | select(.status.claimRef.name == "core-g") | .metadata.name')
check "core-g: claimed a host ($g_host)" test -n "$g_host"
# An operator force-releases the host: the provider no longer lists core-g's instance.
kc patch sshhost -n "$NS" "$g_host" --subresource=status --type=merge \
    -p '{"status":{"state":"Available","claimRef":null,"providerID":null,"bootstrapTokenID":null}}' >/dev/null
check "core-g: the NodeClaim of the force-released host is collected" wait_until 60 gone nodeclaim core-g
check "core-g: its Node goes too" wait_until 60 gone node core-g

nodeclaim core-o core-api
check "core-o: Registered" wait_until 120 cond_is core-o Registered True
o_host=$(kc get sshhost -n "$NS" -o json | jq -r '.items[] | select(.status.claimRef.name == "core-o") | .metadata.name')
# The controller is away while someone force-deletes the NodeClaim: its Node stays behind.
stop_controller
kc patch nodeclaim core-o --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null
kc delete nodeclaim core-o --wait=false >/dev/null 2>&1 || true
check "core-o: the NodeClaim is gone, the Node is left" eval "gone nodeclaim core-o && exists node core-o"
start_controller
if wait_until 90 gone node core-o; then
    ok "core-o: the Node without a NodeClaim is collected"
else
    not_ok "core-o: the Node without a NodeClaim is collected"
    echo "# the Node left: $(node_json core-o | jq -c '{labels: .metadata.labels, providerID: .spec.providerID, finalizers: .metadata.finalizers, deletionTimestamp: .metadata.deletionTimestamp}')"
    grep -F 'core-o' "$work/ctl.log" | tail -n 20 | sed 's/^/#   /'
fi
check "core-o: its host ($o_host) is left and Available" wait_until 60 host_is "$o_host" Available

# --- 6. expiry ----------------------------------------------------------------------------------
t_h=$(now_ms)
nodeclaim core-h core-api "  expireAfter: 25s"
check "core-h: Registered" wait_until 120 cond_is core-h Registered True
check "core-h: deleted once expired" wait_until 90 gone nodeclaim core-h
t_gone=$(now_ms)
check "core-h: not before its expiry ($((t_gone - t_h)) ms after creation)" test $((t_gone - t_h)) -ge 24000

# --- 7. registration TTL and launch timeout -----------------------------------------------------
stop_controller
start_controller --registration-ttl 20s --launch-timeout 20s
nodeclaim core-r core-noreg
check "core-r (never registers): Launched" wait_until 60 cond_is core-r Launched True
check "core-r: Registered=Unknown NodeNotFound" cond_reason_is core-r Registered Unknown NodeNotFound
check "core-r: deleted after the registration TTL" wait_until 90 gone nodeclaim core-r
check "core-r: host core-noreg-1 comes back Available" wait_until 60 host_is core-noreg-1 Available
nodeclaim core-s core-slow
check "core-s (a launch that never ends): deleted after the launch timeout" wait_until 120 gone nodeclaim core-s
check "core-s: host core-slow-1 comes back Available" wait_until 120 host_is core-slow-1 Available

# --- 8. SIGTERM while a join is in flight ------------------------------------------------------
# The join phase runs on the launch pool under the controller's context: SIGTERM cancels the
# SSH session, the process exits 0 well inside the chart's 30 s grace period (no watchdog), and
# the claim stays on the host, so the next process resumes the launch (here cut by the launch
# timeout, as core-s was).
slow_host() { kc get sshhost -n "$NS" core-slow-1 -o json 2>/dev/null || echo '{}'; }
joining() { # the host is core-t's and its bootstrap token is minted: the join is next
    slow_host | jq -e '.status.claimRef.name == "core-t" and (.status.bootstrapTokenID // "") != ""' >/dev/null
}
nodeclaim core-t core-slow
check "core-t: host core-slow-1 claimed and its token minted" wait_until 60 joining
sleep 2 # the join's "sleep 600" is running on the host now
t_term=$(now_ms)
kill -TERM "$pid_ctl"
rc_term=0
wait "$pid_ctl" || rc_term=$?
ms_term=$(($(now_ms) - t_term))
pid_ctl=""
echo "# SIGTERM with a join in flight -> exit $rc_term after $ms_term ms"
check "SIGTERM with a join in flight: exit 0 (not the watchdog's 142)" test "$rc_term" = 0
check "SIGTERM with a join in flight: exited within 5 s (${ms_term} ms; grace period 30 s)" \
    test "$ms_term" -le 5000
check "core-t: the claim is still on the host (the launch resumes)" \
    eval 'slow_host | jq -e ".status.claimRef.name == \"core-t\"" >/dev/null'
start_controller --registration-ttl 20s --launch-timeout 20s
check "core-t: the resumed launch is cut by the launch timeout and deleted" \
    wait_until 120 gone nodeclaim core-t
check "core-t: host core-slow-1 comes back Available" wait_until 120 host_is core-slow-1 Available

check "the controller's log is JSON lines" all_json "$work/ctl.log"
stop_controller
tap_done
