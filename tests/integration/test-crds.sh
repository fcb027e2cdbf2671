#!/usr/bin/env bash
# Integration test of deploy/crds/ against the lab's real kube-apiserver.
#
#   1. every CRD applies (structural schema accepted, CEL compiles within the cost budget) and
#      becomes Established; names, short names, category, scope, subresources and printer
#      columns are what users expect
#   2. the case table tests/data/crd-cases/*.yaml: one object per file, accepted or rejected as
#      its header says, rejections carrying the expected message, accepted objects read back
#      with the expected defaults (see "Case files" below)
#   2b. the edge-value table tests/data/edge-values.tsv: each value accepted, or rejected with the
#      message naming the limit, as the table says
#   3. the shipped join profiles (profiles/*/profile.yaml) apply
#   4. the upstream Karpenter example NodePools (tests/data/karpenter-examples/) apply unchanged
#   5. status and scale subresources: status writes are validated, SSHJoinProfile has no status,
#      kubectl scale works on a static NodePool; printer columns show up in kubectl get
#
# Case files: a header of comment lines, then YAML documents.
#   # <one-line description>
#   # expect: accept|reject
#   # message: <substring of the API server's error>          (reject only)
#   # check: <kubectl jsonpath> = <value>                        (accept only; repeatable)
#   # mode: update ...                                           (first document applied first)
# A token __FILL_<n>__ in a document becomes n 'x' characters, __FILLU_<n>__ n 'é' characters
# (two bytes each in UTF-8) (size-limit cases).
#
# Objects are created in the namespace kpssh-system and deleted after each case; CRDs and the
# namespace are removed at the end when this test created them.
# Prints "N passed, M failed"; exits non-zero when anything failed.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
REPO="${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}"
DATA="${KP_TEST_DATA_DIR:-$REPO/tests/data}"
CRDS="$REPO/deploy/crds"
KUBECTL=("$KPSSH_LAB_KUBECTL" --kubeconfig "$KUBECONFIG" --request-timeout=30s)
NS=kpssh-system

work="$(mktemp -d)"
created_crds=()
created_ns=0

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
diag() { sed 's/^/#   /' >&2; }
kc() { "${KUBECTL[@]}" "$@"; }
# Objects go in by server-side apply: client-side apply also copies the object into the
# last-applied-configuration annotation, which cannot hold a 256 KiB script.
sa() { kc apply --server-side --force-conflicts --field-manager=kpssh-test-crds "$@"; }

cleanup() {
    set +e
    local c
    for c in "${created_crds[@]}"; do
        kc delete crd "$c" --ignore-not-found --wait=false >/dev/null 2>&1
    done
    if [ "$created_ns" = 1 ]; then
        kc delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "test-crds.sh: command failed at line $LINENO: $BASH_COMMAND" >&2' ERR

# split_docs FILE OUTPREFIX: writes OUTPREFIX.1, OUTPREFIX.2, ... one per YAML document (comment
# lines before the first document are dropped) with __FILL_<n>__ expanded; prints the count.
split_docs() {
    local file="$1" out="$2" n=0 line fill len
    : >"$out.0"
    while IFS= read -r line || [ -n "$line" ]; do
        if [ "$line" = "---" ]; then
            n=$((n + 1))
            : >"$out.$n"
            continue
        fi
        while [[ $line =~ __FILL_([0-9]+)__ ]]; do
            len="${BASH_REMATCH[1]}"
            fill="$(head -c "$len" /dev/zero | tr '\0' x)"
            line="${line//__FILL_${len}__/$fill}"
        done
        while [[ $line =~ __FILLU_([0-9]+)__ ]]; do
            len="${BASH_REMATCH[1]}"
            fill="$(head -c "$len" /dev/zero | tr '\0' x | sed 's/x/\xc3\xa9/g')"
            line="${line//__FILLU_${len}__/$fill}"
        done
        printf '%s\n' "$line" >>"$out.$n"
    done <"$file"
    # A file with no '---' at all is a single document.
    if [ "$n" = 0 ]; then
        mv "$out.0" "$out.1"
        n=1
    fi
    echo "$n"
}

header() { # header FILE KEY: values of "# KEY: value" lines, one per line
    sed -n "s/^# $2: //p" "$1"
}

# --- 1. CRDs -----------------------------------------------------------------------------------
crd_names=(sshhosts.karpenter.kpssh.dev sshnodeclasses.karpenter.kpssh.dev
    sshjoinprofiles.karpenter.kpssh.dev nodepools.karpenter.sh nodeclaims.karpenter.sh)
for c in "${crd_names[@]}"; do
    kc get crd "$c" >/dev/null 2>&1 || created_crds+=("$c")
done
for f in "$CRDS"/*.yaml; do
    if out="$(kc apply --server-side --force-conflicts --field-manager=kpssh-test-crds -f "$f" 2>&1)"; then
        ok "CRD $(basename "$f") accepted by the API server"
    else
        not_ok "CRD $(basename "$f") accepted by the API server"
        diag <<<"$out"
    fi
done
for c in "${crd_names[@]}"; do
    if kc wait --for=condition=Established --timeout=60s "crd/$c" >/dev/null 2>&1 &&
        [ "$(kc get crd "$c" -o jsonpath='{.status.conditions[?(@.type=="NamesAccepted")].status}')" = True ] &&
        [ -z "$(kc get crd "$c" -o jsonpath='{.status.conditions[?(@.type=="NonStructuralSchema")].status}')" ]; then
        ok "CRD $c Established, names accepted, structural"
    else
        not_ok "CRD $c Established, names accepted, structural"
        kc get crd "$c" -o jsonpath='{.status.conditions}' 2>&1 | diag
    fi
done

# crd_field CRD JSONPATH EXPECTED DESCRIPTION
crd_field() {
    local got
    got="$(kc get crd "$1" -o jsonpath="$2" 2>&1)" || true
    if [ "$got" = "$3" ]; then ok "$4"; else
        not_ok "$4"
        echo "expected '$3', got '$got'" | diag
    fi
}
v='.spec.versions[0]'
crd_field sshhosts.karpenter.kpssh.dev "{.spec.scope} {$v.name} {.spec.names.shortNames} {.spec.names.categories} {$v.subresources}" \
    'Namespaced v1beta1 ["sshh"] ["karpenter"] {"status":{}}' "SSHHost: namespaced, v1beta1, short name sshh, category karpenter, status subresource"
crd_field sshnodeclasses.karpenter.kpssh.dev "{.spec.scope} {$v.name} {.spec.names.shortNames} {.spec.names.categories} {$v.subresources}" \
    'Cluster v1beta1 ["snc"] ["karpenter"] {"status":{}}' "SSHNodeClass: cluster-scoped, v1beta1, short name snc, category karpenter, status subresource"
crd_field sshjoinprofiles.karpenter.kpssh.dev "{.spec.scope} {$v.name} {.spec.names.shortNames} {.spec.names.categories} {$v.subresources}" \
    'Cluster v1beta1 ["sjp"] ["karpenter"] ' "SSHJoinProfile: cluster-scoped, v1beta1, short name sjp, category karpenter, no subresources"
crd_field nodepools.karpenter.sh "{.spec.scope} {$v.name} {.spec.names.categories} {$v.subresources.scale.specReplicasPath} {$v.subresources.scale.statusReplicasPath}" \
    'Cluster v1 ["karpenter"] .spec.replicas .status.nodes' "NodePool: cluster-scoped karpenter.sh/v1, category karpenter, scale subresource"
crd_field nodeclaims.karpenter.sh "{.spec.scope} {$v.name} {.spec.names.categories} {$v.subresources}" \
    'Cluster v1 ["karpenter"] {"status":{}}' "NodeClaim: cluster-scoped karpenter.sh/v1, category karpenter, status subresource"
cols="{$v.additionalPrinterColumns[*].name}"
crd_field sshhosts.karpenter.kpssh.dev "$cols" "Address Class State Ready Claim Installed Age Exec Arch ProviderID" "SSHHost printer columns"
crd_field sshnodeclasses.karpenter.kpssh.dev "$cols" "Profile Ready Age Source Reason" "SSHNodeClass printer columns"
crd_field sshjoinprofiles.karpenter.kpssh.dev "$cols" "Version Age" "SSHJoinProfile printer columns"
crd_field nodepools.karpenter.sh "$cols" "NodeClass Nodes Ready Age Weight CPU Memory" "NodePool printer columns (as upstream)"
crd_field nodeclaims.karpenter.sh "$cols" "Type Capacity Zone Node Ready Age ImageID ID NodePool NodeClass Drifted" "NodeClaim printer columns (as upstream)"

# The API server's discovery takes a moment to serve new kinds; wait until all five resolve.
for _ in $(seq 1 30); do
    kc get sshhosts,sshnodeclasses,sshjoinprofiles,nodepools,nodeclaims -A >/dev/null 2>&1 && break
    sleep 1
done
if out="$(kc api-resources --categories=karpenter -o name 2>&1)" &&
    [ "$(sort <<<"$out" | tr '\n' ' ')" = "nodeclaims.karpenter.sh nodepools.karpenter.sh sshhosts.karpenter.kpssh.dev sshjoinprofiles.karpenter.kpssh.dev sshnodeclasses.karpenter.kpssh.dev " ]; then
    ok "kubectl api-resources --categories=karpenter lists the five kinds"
else
    not_ok "kubectl api-resources --categories=karpenter lists the five kinds"
    diag <<<"$out"
fi

if ! kc get namespace "$NS" >/dev/null 2>&1; then
    kc create namespace "$NS" >/dev/null
    created_ns=1
fi

# --- 2. the case table -------------------------------------------------------------------------
ncases=0
for file in "$DATA"/crd-cases/*.yaml; do
    ncases=$((ncases + 1))
    name="$(basename "$file" .yaml)"
    expect="$(header "$file" expect)"
    msg="$(header "$file" message)"
    ndocs="$(split_docs "$file" "$work/$name")"
    docs=()
    for i in $(seq 1 "$ndocs"); do docs+=("$work/$name.$i"); done
    target="${docs[-1]}"
    what="case $name: $(sed -n '1s/^# //p' "$file") -> $expect"
    setup_ok=1
    for d in "${docs[@]:0:${#docs[@]}-1}"; do
        if ! out="$(sa -f "$d" 2>&1)"; then
            setup_ok=0
            echo "setup document rejected: $out" | diag
        fi
    done
    rc=0
    out="$(sa -f "$target" 2>&1)" || rc=$?
    failed=""
    if [ "$setup_ok" = 0 ]; then
        failed="setup failed"
    elif [ "$expect" = accept ]; then
        if [ "$rc" != 0 ]; then
            failed="rejected: $out"
        else
            while IFS= read -r c; do
                [ -n "$c" ] || continue
                path="${c%% = *}"
                want="${c#* = }"
                got="$(kc get -f "$target" -o jsonpath="$path" 2>&1)" || true
                [ "$got" = "$want" ] || failed+="check $path: want '$want', got '$got'; "
            done < <(header "$file" check)
        fi
    elif [ "$expect" = reject ]; then
        if [ "$rc" = 0 ]; then
            failed="accepted, expected a rejection containing: $msg"
        elif [ -z "$msg" ] || ! grep -qF -- "$msg" <<<"$out"; then
            failed="rejected, but without the message '$msg': $out"
        fi
    else
        failed="bad case file: expect is '$expect'"
    fi
    if [ -z "$failed" ]; then ok "$what"; else
        not_ok "$what"
        diag <<<"$failed"
    fi
    for d in "${docs[@]}"; do
        kc delete -f "$d" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    done
done
if [ "$ncases" -ge 40 ]; then ok "case table has $ncases cases (at least 40)"; else
    not_ok "case table has $ncases cases (at least 40)"
fi

# --- 2b. edge values: tests/data/edge-values.tsv, also read by tests/unit/test-edge-values.c ----
# Each row's object (edge-values/<kind>.json with the field set) is applied; the API server must
# accept it or reject it with the row's message. Status rows (api "-") are the controller's to
# write and are not applied. The value is spliced in as text: jq would round large integers.
nedge=0
while IFS=$'\t' read -r kind path value api api_msg _ _; do
    case "$kind" in '' | '#'*) continue ;; esac
    [ "$api" = - ] && continue
    nedge=$((nedge + 1))
    obj="$(jq --arg p "$path" 'setpath($p | split("."); "__EDGE__")' "$DATA/edge-values/$kind.json")"
    obj="${obj//\"__EDGE__\"/$value}"
    rc=0
    out="$(sa -f - <<<"$obj" 2>&1)" || rc=$?
    what="edge value $kind $path=$value -> $api"
    if [ "$api" = accept ] && [ "$rc" = 0 ]; then
        ok "$what"
    elif [ "$api" = reject ] && [ "$rc" != 0 ] && grep -qF -- "$api_msg" <<<"$out"; then
        ok "$what ($api_msg)"
    else
        not_ok "$what"
        diag <<<"$out"
    fi
    kc delete -f - --ignore-not-found --wait=false <<<"$obj" >/dev/null 2>&1 || true
done <"$DATA/edge-values.tsv"
if [ "$nedge" -ge 30 ]; then ok "edge-value table has $nedge API rows (at least 30)"; else
    not_ok "edge-value table has $nedge API rows (at least 30)"
fi

# --- 3. shipped join profiles ------------------------------------------------------------------
for f in "$REPO"/profiles/*/profile.yaml; do
    [ -e "$f" ] || continue
    if out="$(sa -f "$f" 2>&1)"; then
        ok "shipped profile $(basename "$(dirname "$f")") applies"
    else
        not_ok "shipped profile $(basename "$(dirname "$f")") applies"
        diag <<<"$out"
    fi
    kc delete -f "$f" --ignore-not-found --wait=false >/dev/null 2>&1 || true
done

# --- 4. upstream example NodePools, unchanged --------------------------------------------------
nexamples=0
for file in "$DATA"/karpenter-examples/*.yaml; do
    base="$(basename "$file" .yaml)"
    ndocs="$(split_docs "$file" "$work/ex-$base")"
    for i in $(seq 1 "$ndocs"); do
        d="$work/ex-$base.$i"
        grep -q '^kind: NodePool$' "$d" || continue
        nexamples=$((nexamples + 1))
        npname="$(awk '/^metadata:/{m=1;next} m&&/^  name:/{print $2; exit}' "$d")"
        want_msg="$(awk -F '\t' -v f="$base.yaml" '$1 == f {print $2}' "$DATA/karpenter-examples/expected-rejections.tsv")"
        rc=0
        out="$(sa -f "$d" 2>&1)" || rc=$?
        if [ -n "$want_msg" ]; then
            if [ "$rc" != 0 ] && grep -qF -- "$want_msg" <<<"$out"; then
                ok "upstream example $base.yaml: NodePool $npname rejected as upstream's CRD rejects it ($want_msg)"
            else
                not_ok "upstream example $base.yaml: NodePool $npname should be rejected with: $want_msg"
                diag <<<"$out"
            fi
        elif [ "$rc" = 0 ] &&
            exp="$(kc get nodepool "$npname" -o jsonpath='{.spec.template.spec.expireAfter}/{.spec.disruption.budgets[0].nodes}')" &&
            [[ $exp =~ ^[^/]+/.+$ ]]; then
            ok "upstream example $base.yaml: NodePool $npname applies unchanged (expireAfter/budget $exp)"
        else
            not_ok "upstream example $base.yaml: NodePool $npname applies unchanged"
            diag <<<"$out"
        fi
        kc delete nodepool "$npname" --ignore-not-found >/dev/null 2>&1 || true
    done
done
if [ "$nexamples" -ge 20 ]; then ok "$nexamples upstream example NodePools tried"; else
    not_ok "only $nexamples upstream example NodePools found in $DATA/karpenter-examples"
fi

# --- 5. defaults read back, subresources, kubectl views ----------------------------------------
cat >"$work/np.yaml" <<'EOF'
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: kpssh-test-crds-defaults
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: pool}
      requirements: []
EOF
sa -f "$work/np.yaml" >/dev/null
got="$(kc get nodepool kpssh-test-crds-defaults -o yaml)"
if grep -q '^      expireAfter: 720h$' <<<"$got" &&
    grep -q '^    consolidateAfter: 0s$' <<<"$got" &&
    grep -q '^    consolidationPolicy: WhenEmptyOrUnderutilized$' <<<"$got" &&
    [ "$(kc get nodepool kpssh-test-crds-defaults -o jsonpath='{.spec.disruption.budgets}')" = '[{"nodes":"10%"}]' ]; then
    ok "minimal NodePool reads back with expireAfter 720h, consolidateAfter 0s, WhenEmptyOrUnderutilized, budgets [{nodes: 10%}]"
else
    not_ok "minimal NodePool defaults"
    diag <<<"$got"
fi
hdr="$(kc get nodepools -o wide 2>&1 | sed -n 1p | tr -s ' ')"  # sed reads to the end: head could SIGPIPE kubectl
if [ "$hdr" = "NAME NODECLASS NODES READY AGE WEIGHT CPU MEMORY" ]; then ok "kubectl get nodepools -o wide columns"; else
    not_ok "kubectl get nodepools -o wide columns: $hdr"
fi
kc delete -f "$work/np.yaml" --ignore-not-found >/dev/null

# static NodePool: kubectl scale goes through the scale subresource
cat >"$work/static.yaml" <<'EOF'
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: kpssh-test-crds-static
spec:
  replicas: 1
  limits: {nodes: 5}
  template:
    spec:
      nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: pool}
      requirements: []
EOF
if sa -f "$work/static.yaml" >/dev/null 2>&1 && kc scale nodepool kpssh-test-crds-static --replicas=3 >/dev/null 2>&1 &&
    [ "$(kc get nodepool kpssh-test-crds-static -o jsonpath='{.spec.replicas}')" = 3 ]; then
    ok "kubectl scale nodepool sets spec.replicas through the scale subresource"
else
    not_ok "kubectl scale nodepool"
fi
kc delete -f "$work/static.yaml" --ignore-not-found >/dev/null 2>&1 || true

# SSHHost status: written through the status subresource and validated; spec writes ignore status
cat >"$work/host.yaml" <<EOF
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHHost
metadata:
  name: kpssh-test-crds-status
  namespace: $NS
  labels: {karpenter.kpssh.dev/host-class: small}
spec:
  address: 10.0.0.99
  sshKeySecretRef: {name: pool-ssh-key}
  capacity: {cpu: "2", memory: 4Gi}
EOF
sa -f "$work/host.yaml" >/dev/null
st='{"status":{"state":"Claimed","claimRef":{"name":"pool-abcde","uid":"0d6f8d6e-1d4c-4b4e-9c55-5a0f0e0f1a11"},"installedProfile":"tls-bootstrap@1","observedCapacity":{"cpu":"2","memory":"4029316Ki"},"observedArch":"amd64","hostKeyFingerprint":"SHA256:abc","conditions":[{"type":"Ready","status":"True","reason":"ProbeSucceeded","message":"Claimed","lastTransitionTime":"2026-10-01T00:00:00Z"}]}}'
if out="$(kc patch sshhost -n "$NS" kpssh-test-crds-status --subresource=status --type=merge -p "$st" 2>&1)"; then
    ok "SSHHost status subresource accepts a controller-style status"
else
    not_ok "SSHHost status subresource accepts a controller-style status"
    diag <<<"$out"
fi
row="$(kc get sshh -n "$NS" kpssh-test-crds-status --no-headers | tr -s ' ')"
if [[ $row == "kpssh-test-crds-status 10.0.0.99 small Claimed True pool-abcde tls-bootstrap@1 "* ]]; then
    ok "kubectl get sshh shows address, class, state, ready, claim and installed profile"
else
    not_ok "kubectl get sshh row: $row"
fi
if out="$(kc patch sshhost -n "$NS" kpssh-test-crds-status --subresource=status --type=merge -p '{"status":{"state":"Busy"}}' 2>&1)"; then
    not_ok "SSHHost status.state outside the enum is rejected"
elif grep -qF 'Unsupported value: "Busy"' <<<"$out"; then
    ok "SSHHost status.state outside the enum is rejected"
else
    not_ok "SSHHost status.state outside the enum is rejected with Unsupported value"
    diag <<<"$out"
fi
if out="$(kc patch sshhost -n "$NS" kpssh-test-crds-status --subresource=status --type=merge -p '{"status":{"bootstrapTokenID":"abcdefg"}}' 2>&1)"; then
    not_ok "SSHHost status.bootstrapTokenID longer than 6 is rejected"
else
    ok "SSHHost status.bootstrapTokenID longer than 6 is rejected"
fi
kc patch sshhost -n "$NS" kpssh-test-crds-status --type=merge -p '{"status":{"state":"Available"}}' >/dev/null 2>&1 || true
if [ "$(kc get sshhost -n "$NS" kpssh-test-crds-status -o jsonpath='{.status.state}')" = Claimed ]; then
    ok "a spec write cannot change SSHHost status"
else
    not_ok "a spec write cannot change SSHHost status"
fi
kc delete -f "$work/host.yaml" --ignore-not-found >/dev/null 2>&1 || true

cat >"$work/sjp.yaml" <<'EOF'
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHJoinProfile
metadata:
  name: kpssh-test-crds-nostatus
spec:
  scripts: {install: "true", join: "true", leave: "true"}
EOF
sa -f "$work/sjp.yaml" >/dev/null
if kc patch sshjoinprofile kpssh-test-crds-nostatus --subresource=status --type=merge -p '{"status":{}}' >/dev/null 2>&1; then
    not_ok "SSHJoinProfile has no status subresource"
else
    ok "SSHJoinProfile has no status subresource"
fi
kc delete -f "$work/sjp.yaml" --ignore-not-found >/dev/null 2>&1 || true

tap_done
