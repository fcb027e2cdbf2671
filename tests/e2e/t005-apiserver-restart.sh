#!/usr/bin/env bash
# e2e: kube-apiserver killed in the middle of a scale-up, etcd compacted while it is down (so
# every watch the controller held has expired: its resourceVersion is older than anything the
# restarted server can resume from, 410 Gone), then started again. Three 2-CPU lab hosts, three
# pods of 1 CPU with hostname anti-affinity.
#
#   1. the kill     once the first NodeClaim exists the API server is stopped, etcd compacted,
#                   and after 5 s the server started again (tests/lab/apiserver.sh).
#   2. completes    every pod Running; the controller relisted (its informers synced again);
#                   it did not restart. It runs under the chart's RBAC with leader election,
#                   and the outage costs it the Lease: the next term resumes what the lost one
#                   left half-done.
#   3. no leaks     exactly three NodeClaims, each with its own host (claimRef) and Node, three
#                   hosts InUse and no other host claimed, no bootstrap token Secret left.
#   4. down         scaled to 0: every NodeClaim, Node gone; every host Available.
#
# Ports: 31000 + 10 * lab ID + 6. Lab hosts 30..32.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label e2e), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
REPO=${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
NS=kpssh-e2e-as
APPS=e2e-as-apps
NP=e2e-as
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 6))
HOSTS=(30 31 32)
N=${#HOSTS[@]}

work="$(mktemp -d)"
pid_ctl=""
pid_sample=""
hosts_added=()
api_down=0

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

cleanup() {
    set +e # an EXIT trap that stops early would leave the controller running
    # The lab is shared with the tests after this one: never leave it without its API server.
    [ "$api_down" = 1 ] && "$REPO/tests/lab/apiserver.sh" start >/dev/null 2>&1
    pool_cleanup "$NP"
}
trap cleanup EXIT

etcd() { curl -sf --max-time 5 -X POST "$KPSSH_LAB_ETCD_URL/v3/kv/$1" -d "$2"; }
syncs() { grep -c '"informer in sync"' "$work/ctl.log" || true; }
tokens() { count_of secrets -n kube-system --field-selector type=bootstrap.kubernetes.io/token; }
hosts_json() { kc get sshhost -n "$NS" -o json; }

pool_setup as "${HOSTS[@]}"
pool_nodepool "$NP" as WhenEmpty 5s 100%
# Under the chart's RBAC with leader election, as t002-t004. The outage outlasts the Lease's renew
# deadline, so the replica loses the Lease in the middle of the launch and leads again once the
# server is back: the next term must resume the NodeClaims the lost one left half-launched (its
# informers announce every cached object again when they restart, k8s/informer.h).
pool_chart "$NS"
pool_controller as-1 as-2 as-3
tokens_before=$(tokens)
syncs_before=$(syncs)

# --- 1. the kill ---------------------------------------------------------------------------------
pool_deployment web "$N" 1 yes
some_claim() { [ "$(claims | jq '.items | length')" -ge 1 ]; }
check "a NodeClaim exists: the scale-up has begun" wait_until 60 some_claim
api_down=1
"$REPO/tests/lab/apiserver.sh" stop >/dev/null
rev=$(etcd range '{"key":"AA=="}' | jq -r .header.revision)
check "etcd compacted at revision $rev while the API server is down" \
    etcd compaction "{\"revision\":\"$rev\",\"physical\":true}"
sleep 5
"$REPO/tests/lab/apiserver.sh" start >/dev/null
api_down=0

# --- 2. completes ----------------------------------------------------------------------------------
check "the scale-up completes: every pod Running" wait_until 300 running_is "$N"
check "the controller relisted after the restart ($syncs_before syncs before, $(syncs) after)" \
    test "$(syncs)" -gt "$syncs_before"
check "the controller is the same process" kill -0 "$pid_ctl"

# --- 3. no leaks -----------------------------------------------------------------------------------
sleep 5
check "exactly $N NodeClaims" claim_count_is "$N"
check "each NodeClaim has its own Node" test "$(claims | jq '[.items[].status.nodeName // empty] | unique | length')" = "$N"
check "each NodeClaim holds its own host" test "$(hosts_json | jq '[.items[].status.claimRef.name // empty] | unique | length')" = "$N"
check "the hosts' claims are the NodeClaims" test \
    "$(hosts_json | jq -c '[.items[].status.claimRef.name // empty] | sort')" = \
    "$(claims | jq -c '[.items[].metadata.name] | sort')"
check "$N hosts InUse" test "$(hosts_json | jq '[.items[] | select(.status.state == "InUse")] | length')" = "$N"
tokens_back() { [ "$(tokens)" -le "$tokens_before" ]; }
check "no bootstrap token Secret left behind" wait_until 60 tokens_back

# --- 4. down ---------------------------------------------------------------------------------------
kc scale deployment web -n "$APPS" --replicas 0 >/dev/null
check "down: every NodeClaim gone" wait_until 300 claim_count_is 0
check "down: no Node of the NodePool" none_of nodes -l karpenter.sh/nodepool="$NP"
for h in as-1 as-2 as-3; do check "down: $h Available" wait_until 120 host_is "$h" Available; done
tap_done
