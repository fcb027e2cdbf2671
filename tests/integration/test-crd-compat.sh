#!/usr/bin/env bash
# Integration test: kpssh on the karpenter.sh CRDs of each upstream Karpenter release it supports.
#
# In a shared cluster another Karpenter owns nodepools.karpenter.sh and nodeclaims.karpenter.sh
# and kpssh's chart leaves them alone (coexistence: docs/api.md), so kpssh must work on whichever release's CRDs
# that Karpenter installed. tests/data/karpenter-crds/<version>/ holds upstream's files verbatim;
# for each version (oldest first) this test
#   1. installs that version's two CRDs in place of ours, as that Karpenter's install or upgrade
#      would (kubectl replace: the whole object, so no field of another release survives), and
#      checks the API server serves exactly their schema
#   2. checks the release's own rules are in force (v1.13 and v1.14 require consolidateAfter in
#      a disruption block and refuse the budget reason Unhealthy, v1.13 refuses Balanced), which
#      also waits out the API server's switch to the new schema
#   3. applies NodePools written as kpssh's docs and examples write them, and a NodeClaim as
#      kpssh's provisioning writes it, and checks each is accepted and that kpssh's projections
#      (tests/lib/kp-objcheck.c: the informers' decode and the NodePool validator) read it back
#      valid, with that release's defaults filled in
#   4. runs lifecycle_on_crds (below): kpssh-controller on that release's CRDs leads, syncs and
#      decodes every object, and its core launches, registers and releases a NodeClaim on a lab
#      host (an SSHHost whose join registers the Node through the API) and writes the NodePool's
#      hash annotation and ValidationSucceeded, each write accepted by that release's schema
# then restores deploy/crds' versions (or removes the CRDs when the lab had none). A static part
# first checks that deploy/crds/karpenter.sh_*.yaml is the newest vendored release verbatim under
# its header, so the CRDs kpssh ships and the ones tested here cannot drift apart.
#
# Objects are cluster-scoped and named crd-compat-*; they are deleted after each version. The
# controller runs in a namespace of its own (removed at the end, with kpssh's own CRDs when the
# lab had none), on port 31000 + 10 * lab ID + 8.
# Prints "N passed, M failed"; exits non-zero when anything failed.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
REPO="${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}"
DATA="${KP_TEST_DATA_DIR:-$REPO/tests/data}"
CRDS="$REPO/deploy/crds"
UPSTREAM="$DATA/karpenter-crds"
OBJCHECK="${KP_OBJCHECK_BIN:-$PWD/kp-objcheck}"
KINDS=(nodepools nodeclaims)
FIN=karpenter.sh/termination
NS=kpssh-crd-compat
LEASE=kpssh-crd-compat
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 8))

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# BIN (kpssh-controller), KUBECTL, kc, wait_until, is_code, url_has, status_of, not_in_file.
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
[ -x "$OBJCHECK" ] || {
    echo "kp-objcheck not found at $OBJCHECK (set KP_OBJCHECK_BIN; tests/Lab.cmake builds it)" >&2
    exit 1
}
diag() { sed 's/^/#   /' >&2; }

work="$(mktemp -d)"
had_crds=()    # the karpenter.sh CRDs the lab had before this test: restored, not deleted
created_own=() # kpssh's own CRDs this test installed for the controller: removed at the end
created_ns=0
restored=0
pid_ctl=""
host_added=0
LIVE_HOST=171

# crd_body FILE: a CRD file from its first "---" on (deploy/crds' files carry a header before it).
crd_body() { sed -n '/^---$/,$p' "$1"; }

# ver_ge A B: version A is B or newer.
ver_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$2" ]; }

# delete_objects: removes every crd-compat-* NodeClaim and NodePool, finalizers first (nothing
# else in the lab acts on them, so a finalizer left in place would keep a NodeClaim forever).
delete_objects() {
    local kind o
    for kind in nodeclaims nodepools; do
        for o in $(kc get "$kind" -o name 2>/dev/null | grep '/crd-compat-' || true); do
            kc patch "$o" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
            kc delete "$o" --ignore-not-found --wait=false >/dev/null 2>&1 || true
        done
    done
}

# install_crds DIR: DIR's karpenter.sh_{nodepools,nodeclaims}.yaml become the lab's CRDs, whole
# (replace when the CRD exists, create when not), Established within 60 s.
install_crds() {
    local dir="$1" k
    for k in "${KINDS[@]}"; do
        if kc get crd "$k.karpenter.sh" >/dev/null 2>&1; then
            kc replace -f "$dir/karpenter.sh_$k.yaml" >/dev/null || return 1
        else
            kc create -f "$dir/karpenter.sh_$k.yaml" >/dev/null || return 1
        fi
    done
    for k in "${KINDS[@]}"; do
        kc wait --for=condition=Established --timeout=60s "crd/$k.karpenter.sh" >/dev/null || return 1
    done
}

# served_is DIR: the API server serves exactly DIR's versions (schemas, printer columns,
# subresources) for both CRDs.
served_is() {
    local dir="$1" k want got
    for k in "${KINDS[@]}"; do
        want="$(crd_body "$dir/karpenter.sh_$k.yaml" | python3 -c 'import json, sys, yaml
print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d][0]["spec"]["versions"]))' | jq -S .)"
        got="$(kc get crd "$k.karpenter.sh" -o json | jq -S .spec.versions)"
        [ "$want" = "$got" ] || {
            echo "served $k.karpenter.sh differs from $dir" | diag
            return 1
        }
    done
}

restore_ours() {
    local k
    delete_objects
    if [ "${#had_crds[@]}" -gt 0 ]; then
        install_crds "$CRDS" || return 1
    fi
    # CRDs the lab did not have before this test are removed again.
    for k in "${KINDS[@]}"; do
        if [[ " ${had_crds[*]} " != *" $k.karpenter.sh "* ]]; then
            kc delete crd "$k.karpenter.sh" --ignore-not-found --timeout=60s >/dev/null || return 1
        fi
    done
}

cleanup() {
    set +e
    local c
    # Only the process this test started, by PID.
    [ -n "$pid_ctl" ] && kill -KILL "$pid_ctl" 2>/dev/null
    for o in $(kc get nodeclaims -o name 2>/dev/null | grep '/crd-compat-'); do
        kc patch "$o" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
        kc delete "$o" --wait=false >/dev/null 2>&1
    done
    for o in $(kc get nodes -o name 2>/dev/null | grep '/crd-compat-'); do
        kc patch "$o" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
        kc delete "$o" --wait=false >/dev/null 2>&1
    done
    # The node class and host carry the SSH provider's finalizers, and its controller is gone:
    # left in place they would hold their CRDs (removed below when this test made them) in
    # Terminating, and every later test that creates one would be refused.
    kc patch sshnodeclass crd-compat --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
    kc delete sshnodeclass crd-compat --ignore-not-found --wait=false >/dev/null 2>&1
    kc patch sshhost -n "$NS" crd-compat-host --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
    kc delete sshhost -n "$NS" crd-compat-host --ignore-not-found --wait=false >/dev/null 2>&1
    kc delete sshjoinprofile crd-compat --ignore-not-found --wait=false >/dev/null 2>&1
    [ "$host_added" = 1 ] && "$KPSSH_LAB_HOST_SH" del "$LIVE_HOST" >/dev/null 2>&1
    [ "$restored" = 1 ] || restore_ours >/dev/null 2>&1
    [ "$created_ns" = 1 ] && kc delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
    # Waited for: a test after this one may install the same CRDs, which fails while these go.
    for c in "${created_own[@]}"; do
        kc delete crd "$c" --ignore-not-found --timeout=60s >/dev/null 2>&1
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "test-crd-compat.sh: command failed at line $LINENO: $BASH_COMMAND" >&2' ERR

# apply_ok WHAT FILE: one test point, FILE created (server-side apply) without error.
apply_ok() {
    local out
    if out="$(kc apply --server-side --field-manager=kpssh-test-crd-compat -f "$2" 2>&1)"; then
        ok "$1"
    else
        not_ok "$1"
        diag <<<"$out"
        return 1
    fi
}

# dry_run EXPECT MESSAGE WHAT: a server-side dry run of the NodePool on stdin is accepted
# (EXPECT accept) or rejected with MESSAGE (EXPECT reject). Quiet; status only.
dry_run() {
    local out rc=0
    out="$(kc create --dry-run=server -f - 2>&1)" || rc=$?
    if [ "$1" = accept ]; then [ "$rc" = 0 ]; else [ "$rc" != 0 ] && grep -qF -- "$2" <<<"$out"; fi
}

# objcheck KIND NAME: kp-objcheck's output for the object as the API server serves it now, in
# $work/check.out; its status is kp-objcheck's (0: decoded and valid).
objcheck() {
    kc get "$1" "$2" -o json >"$work/obj.json" || return 2
    "$OBJCHECK" "${1%s}" "$work/obj.json" >"$work/check.out" 2>&1
}

# projected WHAT KIND NAME KEY=VALUE...: one test point: kpssh's projection decodes the object,
# its validator is quiet, and every given line is in kp-objcheck's output.
projected() {
    local what="$1" kind="$2" name="$3" want missing=""
    shift 3
    if ! objcheck "$kind" "$name"; then
        not_ok "$what"
        diag <"$work/check.out"
        return 0
    fi
    for want in "$@"; do
        grep -qxF -- "$want" "$work/check.out" || missing+="$want; "
    done
    if [ -z "$missing" ]; then ok "$what"; else
        not_ok "$what"
        echo "missing: $missing" | diag
        diag <"$work/check.out"
    fi
}

# np_yaml NAME DISRUPTION-YAML: a NodePool of kpssh's (nodeClassRef to our SSHNodeClass) with the
# given spec.disruption (indented four spaces; empty: none).
np_yaml() {
    cat <<EOF
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: $1
spec:
  template:
    metadata:
      labels: {karpenter.kpssh.dev/managed: "true"}
    spec:
      nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: pool}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
EOF
    [ -z "$2" ] || printf '  disruption:\n%s\n' "$2"
}

# --- 0. what kpssh ships is the newest vendored release, verbatim -----------------------------
mapfile -t versions < <(find "$UPSTREAM" -mindepth 1 -maxdepth 1 -type d -name 'v*' -printf '%f\n' | sort -V)
newest="${versions[-1]:-}"
if [ "${#versions[@]}" -ge 3 ]; then ok "vendored upstream CRD releases: ${versions[*]}"; else
    not_ok "at least three vendored upstream CRD releases in $UPSTREAM (found: ${versions[*]})"
fi
for k in "${KINDS[@]}"; do
    f="$CRDS/karpenter.sh_$k.yaml"
    if crd_body "$f" | cmp -s - "$UPSTREAM/$newest/karpenter.sh_$k.yaml"; then
        ok "deploy/crds/karpenter.sh_$k.yaml is upstream $newest's file below its header"
    else
        not_ok "deploy/crds/karpenter.sh_$k.yaml is upstream $newest's file below its header"
        crd_body "$f" | diff - "$UPSTREAM/$newest/karpenter.sh_$k.yaml" | head -n 20 | diag || true
    fi
    if sed '/^---$/,$d' "$f" | grep -q "Karpenter $newest's CRD"; then
        ok "deploy/crds/karpenter.sh_$k.yaml's header names release $newest"
    else
        not_ok "deploy/crds/karpenter.sh_$k.yaml's header names release $newest"
    fi
done

# A CRD another test deleted without waiting may still be going: let it go first, and do not
# count it as one the lab has.
for k in "${KINDS[@]}"; do
    if [ -n "$(kc get crd "$k.karpenter.sh" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]; then
        kc wait --for=delete --timeout=60s "crd/$k.karpenter.sh" >/dev/null 2>&1 || true
    fi
    if kc get crd "$k.karpenter.sh" >/dev/null 2>&1; then had_crds+=("$k.karpenter.sh"); fi
done
delete_objects

# kpssh-controller's SSH provider lists kpssh's own kinds: their CRDs (ours, whatever the
# karpenter.sh ones are) and the pool namespace must exist before it can lead.
for f in "$CRDS"/karpenter.kpssh.dev_*.yaml; do
    c="$(sed -n 's/^  name: //p' "$f" | awk 'NR == 1')"
    if ! kc get crd "$c" >/dev/null 2>&1; then
        kc apply --server-side --field-manager=kpssh-test-crd-compat -f "$f" >/dev/null
        created_own+=("$c")
    fi
done
for c in "${created_own[@]}"; do
    kc wait --for=condition=Established --timeout=60s "crd/$c" >/dev/null
done
if ! kc get namespace "$NS" >/dev/null 2>&1; then
    kc create namespace "$NS" >/dev/null
    created_ns=1
fi

# The lab host and objects the lifecycle runs on: an SSHJoinProfile whose join registers the
# Node through the API (no kubelet: a cycle takes seconds), an SSHNodeClass selecting one SSHHost
# on lab host LIVE_HOST. Our own kinds, so they do not depend on the karpenter.sh release.
admin_token=$(tr -d ' \n' <"$KPSSH_LAB_ADMIN_TOKEN_FILE")
"$KPSSH_LAB_HOST_SH" add "$LIVE_HOST" >/dev/null
host_added=1
kc create secret generic crd-compat-key -n "$NS" --from-file=privateKey="$KPSSH_LAB_SSH_KEY" \
    --dry-run=client -o yaml | kc apply -f - >/dev/null
# shellcheck disable=SC2016 # expanded on the host, by the join's shell
api_join='body=$(printf '"'"'{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s"},"spec":{"providerID":"%s"}}'"'"' "$KPSSH_NODE_NAME" "$KPSSH_PROVIDER_ID")
printf %s "$KPSSH_CLUSTER_CA_B64" | base64 -d > /tmp/kpssh-compat-ca.crt
code=$(curl -sS -o /dev/null -w "%{http_code}" --cacert /tmp/kpssh-compat-ca.crt -H "Authorization: Bearer $KPSSH_VAR_adminToken" -H "Content-Type: application/json" -X POST "$KPSSH_CLUSTER_ENDPOINT/api/v1/nodes" -d "$body")
case $code in 201|409) ;; *) echo "node create: HTTP $code" >&2; exit 1 ;; esac'
jq -n --arg j "$api_join" '{apiVersion: "karpenter.kpssh.dev/v1beta1", kind: "SSHJoinProfile",
    metadata: {name: "crd-compat"}, spec: {version: "1", scripts: {install: "mkdir -p /var/lib/kpssh",
    join: $j, leave: "true"}}}' | kc apply -f - >/dev/null
jq -n --arg ep "$KPSSH_LAB_API_URL" --arg ca "$(base64 -w0 "$KPSSH_LAB_CA")" --arg tok "$admin_token" '{
    apiVersion: "karpenter.kpssh.dev/v1beta1", kind: "SSHNodeClass", metadata: {name: "crd-compat"},
    spec: {hostSelector: {matchLabels: {"karpenter.kpssh.dev/host-class": "crd-compat"}},
           joinProfileRef: {name: "crd-compat"}, cluster: {endpoint: $ep, caBundle: $ca},
           vars: {adminToken: $tok}}}' | kc apply -f - >/dev/null
jq -n --arg ns "$NS" --arg addr "${KPSSH_LAB_GATEWAY%.*}.$((10 + LIVE_HOST))" '{
    apiVersion: "karpenter.kpssh.dev/v1beta1", kind: "SSHHost",
    metadata: {name: "crd-compat-host", namespace: $ns,
               labels: {"karpenter.kpssh.dev/host-class": "crd-compat"}},
    spec: {address: $addr, sshKeySecretRef: {name: "crd-compat-key"},
           capacity: {cpu: "2", memory: "4Gi"}}}' | kc apply -f - >/dev/null

nc_cond_is() { # nc_cond_is NODECLAIM TYPE STATUS
    [ "$(kc get nodeclaim "$1" -o json 2>/dev/null |
        jq -r --arg t "$2" '.status.conditions[]? | select(.type == $t) | .status' 2>/dev/null)" = "$3" ]
}
np_cond_is() { # np_cond_is NODEPOOL TYPE STATUS
    [ "$(kc get nodepool "$1" -o json 2>/dev/null |
        jq -r --arg t "$2" '.status.conditions[]? | select(.type == $t) | .status' 2>/dev/null)" = "$3" ]
}
np_has_hash() { [ -n "$(kc get nodepool "$1" -o jsonpath='{.metadata.annotations.karpenter\.sh/nodepool-hash}' 2>/dev/null)" ]; }
host_available() { [ "$(kc get sshhost -n "$NS" crd-compat-host -o jsonpath='{.status.state}' 2>/dev/null)" = Available ]; }
gone_nc() { ! kc get nodeclaim "$1" >/dev/null 2>&1; }

# controller_start VERSION / controller_stop VERSION: kpssh-controller on this release's CRDs
# becomes ready (it leads) and its NodeClaim informer syncs; at the end SIGTERM ends it with
# status 0 and no object was skipped as undecodable.
controller_start() {
    local v="$1" metrics="http://127.0.0.1:$PORT/metrics"
    "$BIN" --kubeconfig "$KUBECONFIG" --pool-namespace "$NS" --leader-election-namespace "$NS" \
        --leader-election-name "$LEASE" --leader-election-lease-duration 4s \
        --leader-election-renew-deadline 3s --leader-election-retry-period 500ms \
        --bind-address 127.0.0.1 --metrics-port "$PORT" --health-probe-port "$PORT" \
        --probe-interval 5s --probe-timeout 4s --shutdown-timeout 10s >"$work/ctl-$v.log" 2>&1 &
    pid_ctl=$!
    check "$v: kpssh-controller leads and is ready" wait_until 30 is_code 200 "http://127.0.0.1:$PORT/readyz"
    if wait_until 20 url_has "$metrics" '^kpssh_informer_synced\{kind="NodeClaim"\} 1$'; then
        ok "$v: kpssh-controller's NodeClaim informer synced"
    else
        not_ok "$v: kpssh-controller's NodeClaim informer synced"
        { body "$metrics" | grep "^kpssh_informer_synced" || true; } | diag
        tail -n 5 "$work/ctl-$v.log" | diag
    fi
}
controller_stop() {
    local v="$1" log="$work/ctl-$1.log" rc
    kill -TERM "$pid_ctl" 2>/dev/null || true
    # status_of runs in a subshell, which knows the status of a child that has ended only.
    check "$v: kpssh-controller ends after SIGTERM" wait_until 15 dead "$pid_ctl"
    rc="$(status_of "$pid_ctl")"
    pid_ctl=""
    check "$v: kpssh-controller exits 0 (got $rc)" test "$rc" = 0
    if not_in_file 'does not decode' "$log"; then ok "$v: kpssh-controller decoded every object"; else
        not_ok "$v: kpssh-controller decoded every object"
        grep -F 'does not decode' "$log" | head -n 5 | diag
    fi
}

# lifecycle_on_crds VERSION NODEPOOL NODECLAIM: Karpenter's core in kpssh-controller runs a
# NodeClaim's whole life on this release's CRDs. The hand-written NodeClaim of step 3 (a node
# class that does not exist) goes first, so the lifecycle is about one NodeClaim: a NodeClaim of
# NODEPOOL for the lab's SSHNodeClass is launched and registered by the core (its status writes
# accepted by this release's schema and read back by kpssh's projection); the NodePool controller
# writes NODEPOOL's hash annotation and ValidationSucceeded; deleting the NodeClaim lets the core
# release its finalizer, and the host comes back Available.
lifecycle_on_crds() {
    local v="$1" np="$2" nc="$3" live="$2-live"

    kc patch nodeclaim "$nc" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    kc delete nodeclaim "$nc" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    controller_start "$v"
    check "$v lifecycle: the lab host is probed Available" wait_until 60 host_available
    jq -n --arg n "$live" --arg np "$np" '{apiVersion: "karpenter.sh/v1", kind: "NodeClaim",
        metadata: {name: $n, labels: {"karpenter.sh/nodepool": $np}},
        spec: {nodeClassRef: {group: "karpenter.kpssh.dev", kind: "SSHNodeClass", name: "crd-compat"},
               requirements: [{key: "karpenter.sh/capacity-type", operator: "In", values: ["on-demand"]}],
               resources: {requests: {cpu: "100m"}}}}' | kc apply -f - >/dev/null
    check "$v lifecycle: the core launches the NodeClaim" wait_until 60 nc_cond_is "$live" Launched True
    check "$v lifecycle: the core registers its Node" wait_until 60 nc_cond_is "$live" Registered True
    projected "$v lifecycle: the core's status writes are accepted and projected" nodeclaims "$live" \
        condition.Launched=True condition.Registered=True finalizers=1
    check "$v lifecycle: the core writes the NodePool's hash annotation" wait_until 30 np_has_hash "$np"
    check "$v lifecycle: the core writes the NodePool's ValidationSucceeded" \
        wait_until 30 np_cond_is "$np" ValidationSucceeded True
    kc delete nodeclaim "$live" --wait=false >/dev/null
    check "$v lifecycle: deleting the NodeClaim, the core releases it" wait_until 90 gone_nc "$live"
    check "$v lifecycle: the host is Available again" wait_until 60 host_available
    controller_stop "$v"
}

# crd_version VERSION: steps 1 to 4 of the header on one release's CRDs.
crd_version() {
    local v="$1" dir="$UPSTREAM/$1" np nc uid out ca_req unh bal tries
    np="crd-compat-${v//./-}"
    nc="$np-nc"

    # 1. installed whole, and served as written
    if install_crds "$dir" && served_is "$dir"; then
        ok "$v: upstream's CRDs installed in place of ours and served exactly"
    else
        not_ok "$v: upstream's CRDs installed in place of ours and served exactly"
        return 0
    fi

    # 2. the release's own rules. The first probe is retried: the API server switches a CRD's
    # schema shortly after the update is acknowledged.
    ver_ge "$v" v1.15.0 && ca_req=accept || ca_req=reject
    ver_ge "$v" v1.15.0 && unh=accept || unh=reject
    ver_ge "$v" v1.14.0 && bal=accept || bal=reject
    tries=0
    until np_yaml crd-compat-probe '    consolidationPolicy: WhenEmpty' |
        dry_run "$ca_req" 'spec.disruption.consolidateAfter: Required value'; do
        tries=$((tries + 1))
        [ "$tries" -lt 60 ] || break
        sleep 0.5
    done
    check "$v: a disruption block without consolidateAfter is ${ca_req}ed" \
        dry_run "$ca_req" 'spec.disruption.consolidateAfter: Required value' \
        < <(np_yaml crd-compat-probe '    consolidationPolicy: WhenEmpty')
    check "$v: consolidationPolicy Balanced is ${bal}ed" \
        dry_run "$bal" 'Unsupported value: "Balanced"' \
        < <(np_yaml crd-compat-probe $'    consolidationPolicy: Balanced\n    consolidateAfter: 1m')
    check "$v: budget reason Unhealthy is ${unh}ed" \
        dry_run "$unh" 'Unsupported value: "Unhealthy"' \
        < <(np_yaml crd-compat-probe $'    consolidateAfter: 1m\n    budgets: [{nodes: "1", reasons: [Unhealthy]}]')

    # 3. NodePools as kpssh's docs and examples write them. consolidateAfter is always written:
    # v1.13 and v1.14 require it in a disruption block.
    np_yaml "$np" $'    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 60s\n    budgets:\n      - {nodes: "10%"}\n      - {nodes: "0", schedule: "0 9 * * mon-fri", duration: 8h, reasons: [Drifted, Underutilized]}' >"$work/np.yaml"
    if apply_ok "$v: kpssh's NodePool (disruption with consolidateAfter, budgets) accepted" "$work/np.yaml"; then
        projected "$v: kpssh's projection reads the NodePool as written, valid" nodepools "$np" \
            ours=true consolidationPolicy=WhenEmptyOrUnderutilized consolidateAfter=60s budgets=2 \
            'budget.1=0 Underutilized,Drifted' template.expireAfter=720h template.requirements=1
    fi
    np_yaml "$np-minimal" '' >"$work/np-minimal.yaml"
    if apply_ok "$v: a NodePool without disruption accepted" "$work/np-minimal.yaml"; then
        projected "$v: kpssh's projection reads $v's defaults (0s, WhenEmptyOrUnderutilized, 10%, 720h), valid" \
            nodepools "$np-minimal" consolidateAfter=0s consolidationPolicy=WhenEmptyOrUnderutilized \
            budgets=1 'budget.0=10% all' template.expireAfter=720h
    fi
    if [ "$unh" = accept ]; then
        np_yaml "$np-repair" $'    consolidateAfter: 1m\n    budgets: [{nodes: "1", reasons: [Unhealthy]}]' >"$work/np-repair.yaml"
        if apply_ok "$v: a NodePool pacing node repair (budget reason Unhealthy) accepted" "$work/np-repair.yaml"; then
            projected "$v: kpssh's projection reads the Unhealthy budget, valid" nodepools "$np-repair" \
                'budget.0=1 Unhealthy'
        fi
    fi
    for ex in nodepool nodepool-coexist; do
        sed "s/^  name: .*/  name: crd-compat-example-$ex/" "$REPO/examples/$ex.yaml" >"$work/ex.yaml"
        if apply_ok "$v: examples/$ex.yaml accepted" "$work/ex.yaml"; then
            projected "$v: kpssh's projection reads examples/$ex.yaml, valid" nodepools \
                "crd-compat-example-$ex" ours=true template.expireAfter=Never consolidateAfter=60s
        fi
    done

    # A NodeClaim as kpssh's provisioning writes it from the first NodePool's template.
    uid="$(kc get nodepool "$np" -o jsonpath='{.metadata.uid}' 2>/dev/null || true)"
    cat >"$work/nc.yaml" <<EOF
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: $nc
  labels:
    karpenter.sh/nodepool: $np
    karpenter.kpssh.dev/managed: "true"
    node.kubernetes.io/instance-type: default
    karpenter.sh/capacity-type: on-demand
    topology.kubernetes.io/zone: pool
  annotations:
    karpenter.sh/nodepool-hash: "6821555240594823858"
    karpenter.sh/nodepool-hash-version: v3
  finalizers: [$FIN]
  ownerReferences:
    - {apiVersion: karpenter.sh/v1, kind: NodePool, name: $np, uid: "${uid:-missing}", blockOwnerDeletion: true}
spec:
  nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: pool}
  requirements:
    - {key: karpenter.sh/nodepool, operator: In, values: [$np]}
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: node.kubernetes.io/instance-type, operator: In, values: [default], minValues: 1}
  resources:
    requests: {cpu: 1350m, memory: 1280Mi, pods: "6"}
  expireAfter: 720h
  terminationGracePeriod: 48h
EOF
    if apply_ok "$v: a NodeClaim as kpssh's provisioning writes it accepted" "$work/nc.yaml"; then
        projected "$v: kpssh's projection reads the NodeClaim, valid" nodeclaims "$nc" \
            ours=true "nodepool=$np" spec.requirements=3 requests.cpu=1350 finalizers=1 \
            hash=6821555240594823858 spec.expireAfter=720h spec.terminationGracePeriod=48h
        # 4.
        lifecycle_on_crds "$v" "$np" "$nc"
    fi
    delete_objects
}

for v in "${versions[@]}"; do
    crd_version "$v"
done

# --- the lab as it was: deploy/crds' versions, or no karpenter.sh CRDs ------------------------
if restore_ours; then
    restored=1
    if [ "${#had_crds[@]}" -eq 0 ]; then
        ok "karpenter.sh CRDs removed again (the lab had none)"
    elif served_is "$CRDS"; then
        ok "deploy/crds' karpenter.sh CRDs restored and served exactly"
    else
        not_ok "deploy/crds' karpenter.sh CRDs restored and served exactly"
    fi
else
    not_ok "deploy/crds' karpenter.sh CRDs restored"
fi

tap_done
