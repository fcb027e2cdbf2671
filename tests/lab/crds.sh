#!/usr/bin/env bash
# tests/lab/crds.sh: put the repository's CRDs (deploy/crds) on the lab, or take them off, and
# wait until the API server has really done it.
#
#   crds.sh apply    the CRDs of deploy/crds, server-side, then Established
#   crds.sh delete   every CRD of our two groups (karpenter.sh, karpenter.kpssh.dev), then gone
#
# Why a script: a CRD delete is asynchronous. The API server first deletes every object of the
# kind, and an object with a finalizer that no running controller removes holds the CRD in
# Terminating for as long as it stays. A test that applies the CRDs while an earlier test's
# delete is still going changes nothing ("currently being deleted"), the CRDs then vanish, and
# every informer of the next test lists 404 until it gives up. So both verbs first finish any
# delete in progress: they strip the finalizers of the objects a terminating CRD still holds
# (test leftovers: nothing else runs on the lab), release a CRD that stays terminating with no
# object left (see settle), and wait for it to go. Fails loudly (exit 1, with the CRDs still
# terminating named) rather than leave the next test a lab in flux.
#
# Needs the lab's env.sh: run under ctest, or with KPSSH_LAB_DIR set.
set -Eeuo pipefail
# A step that fails says where, so a test that calls this never fails without a word.
trap 'echo "crds.sh: line $LINENO: exit $? (${BASH_COMMAND})" >&2' ERR

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
REPO="${KP_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
WAIT_S="${KPSSH_LAB_CRD_WAIT_S:-180}"
EMPTY_S=15

kc() { "$KPSSH_LAB_KUBECTL" --kubeconfig "$KUBECONFIG" --request-timeout=30s "$@"; }

# Our CRDs on the lab, one name a line; with "terminating", only those being deleted.
ours() {
    kc get crd -o json | jq -r --arg only "${1:-}" '.items[]
        | select(.metadata.name | endswith(".karpenter.sh") or endswith(".karpenter.kpssh.dev"))
        | select($only == "" or .metadata.deletionTimestamp != null) | .metadata.name'
}

# Removes the finalizers of every object of CRD $1 that still has some. The CRD may be gone by
# the time it is listed (that is what we wait for): then there is nothing to do.
strip_finalizers() {
    local crd=$1 objs ns name
    objs=$(kc get "$crd" -A -o json 2>/dev/null | jq -r '.items[]
        | select((.metadata.finalizers // []) | length > 0)
        | "\(.metadata.namespace // "-") \(.metadata.name)"') || return 0
    while read -r ns name; do
        [ -n "$name" ] || continue
        if [ "$ns" = "-" ]; then
            kc patch "$crd" "$name" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
        else
            kc patch "$crd" "$name" -n "$ns" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
        fi
    done <<<"$objs"
}

# Whether CRD $1 is served and holds no object (false when it cannot be listed).
holds_nothing() {
    local n
    n=$(kc get "$1" -A -o name 2>/dev/null | wc -l) || return 1
    [ "$n" -eq 0 ]
}

# Waits until no CRD of ours is terminating, helping each along; 1 after WAIT_S seconds.
# The API server's CRD clean-up backs off after errors (a CRD deleted right after it was made,
# before its storage served): a CRD found empty for EMPTY_S seconds gets its cleanup finalizer
# taken off, which with no object left skips nothing.
settle() {
    local deadline=$((SECONDS + WAIT_S)) left crd
    declare -A empty_since=()
    while :; do
        left="$(ours terminating)"
        [ -n "$left" ] || return 0
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "crds.sh: still terminating after ${WAIT_S}s: $(echo "$left" | xargs)" >&2
            return 1
        fi
        for crd in $left; do
            strip_finalizers "$crd"
            if ! holds_nothing "$crd"; then
                unset "empty_since[$crd]"
                continue
            fi
            : "${empty_since[$crd]:=$SECONDS}"
            if [ $((SECONDS - empty_since[$crd])) -ge "$EMPTY_S" ]; then
                echo "crds.sh: $crd holds no object and is still terminating; releasing it" >&2
                kc patch crd "$crd" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
            fi
        done
        sleep 1
    done
}

case "${1:-}" in
apply)
    settle
    kc apply --server-side -f "$REPO/deploy/crds" >/dev/null
    # shellcheck disable=SC2046 # one word per CRD
    kc wait --for=condition=Established --timeout=60s $(ours | sed 's|^|crd/|') >/dev/null
    if [ -n "$(ours terminating)" ]; then
        echo "crds.sh: a CRD went terminating while it was applied: $(ours terminating | xargs)" >&2
        exit 1
    fi
    ;;
delete)
    names="$(ours)"
    if [ -n "$names" ]; then
        # shellcheck disable=SC2086 # one word per CRD
        kc delete crd $names --wait=false >/dev/null
    fi
    settle
    ;;
*)
    echo "usage: crds.sh apply|delete" >&2
    exit 2
    ;;
esac
