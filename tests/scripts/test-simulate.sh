#!/usr/bin/env bash
# Golden files of `kpssh simulate` (docs/cli.md): each tests/data/simulate/<case>/input.yaml is
# simulated with -o json and must equal expected.json byte for byte, twice (the plan is
# deterministic); -o yaml and the summary must succeed on it too. A case with an
# instance-types.yaml is simulated with --instance-types that file. Then bad inputs: malformed
# YAML, an unknown kind, an object its projection refuses, and a List item that is no object must
# each exit 2 with a one-line message naming the file and the document; so must bad
# --instance-types documents, naming the file, the item and the field.
# Usage: test-simulate.sh KPSSH [DATA_DIR]
set -euo pipefail
kpssh=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
data=${2:-${KP_TEST_DATA_DIR:-$(cd "$(dirname "$0")/../data" && pwd)}}/simulate
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cases=0

for dir in "$data"/*/; do
    c=$(basename "$dir")
    [ -f "$dir/input.yaml" ] || continue
    cases=$((cases + 1))
    it=() it_abs=()
    if [ -f "$dir/instance-types.yaml" ]; then
        it=(--instance-types instance-types.yaml)
        it_abs=(--instance-types "$dir/instance-types.yaml")
    fi
    if ! (cd "$dir" && "$kpssh" simulate -f input.yaml ${it[@]+"${it[@]}"} -o json \
        >"$tmp/$c.1.json" 2>"$tmp/$c.err"); then
        echo "FAIL $c: simulate failed: $(cat "$tmp/$c.err")" >&2
        fail=1
        continue
    fi
    (cd "$dir" && "$kpssh" simulate -f input.yaml ${it[@]+"${it[@]}"} -o json >"$tmp/$c.2.json")
    if ! cmp -s "$tmp/$c.1.json" "$tmp/$c.2.json"; then
        echo "FAIL $c: two runs printed different plans" >&2
        fail=1
    fi
    if ! diff -u "$dir/expected.json" "$tmp/$c.1.json" >&2; then
        echo "FAIL $c: the plan differs from expected.json (above)" >&2
        fail=1
    fi
    if ! "$kpssh" simulate -f - ${it_abs[@]+"${it_abs[@]}"} -o yaml <"$dir/input.yaml" \
        >"$tmp/$c.yaml" ||
        ! grep -q '^kind: "SimulationPlan"$' "$tmp/$c.yaml"; then
        echo "FAIL $c: -o yaml from stdin" >&2
        fail=1
    fi
    if ! "$kpssh" simulate -f "$dir/input.yaml" ${it_abs[@]+"${it_abs[@]}"} >"$tmp/$c.txt" ||
        ! grep -q '^NodeClaims to create: ' "$tmp/$c.txt"; then
        echo "FAIL $c: the summary" >&2
        fail=1
    fi
done
if [ "$cases" -lt 6 ]; then
    echo "FAIL: only $cases golden cases under $data" >&2
    fail=1
fi

# refused <what> <stdin text> <pattern> <simulate arguments...>: kpssh simulate must exit 2 with
# one line of message that matches pattern.
refused() {
    local what=$1 in=$2 want=$3 rc=0 err
    shift 3
    err=$(printf '%s' "$in" | "$kpssh" simulate "$@" 2>&1 >/dev/null) || rc=$?
    if [ "$rc" -ne 2 ]; then
        echo "FAIL $what: exit $rc, want 2 ($err)" >&2
        fail=1
    elif [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || ! grep -Eq -- "$want" <<<"$err"; then
        echo "FAIL $what: message \"$err\" does not match /$want/" >&2
        fail=1
    fi
}
# bad <file or -> <stdin text or ""> <pattern the message must match>
bad() { refused "bad input $1" "$2" "$3" -f "$1"; }
bad "$data/bad/malformed.yaml" "" 'malformed\.yaml:4:1: .*flow mapping'
bad "$data/bad/unknown-kind.yaml" "" 'unknown-kind\.yaml:7: document 2: kind "Deployment" of apiVersion "apps/v1" is not read'
bad "$data/bad/projection.yaml" "" 'projection\.yaml:1: document 1: Pod "broken" is not a valid Pod'
bad - '{"apiVersion":"v1","kind":"List","items":[5]}' '<stdin>:1:[0-9]+: document 1 \(a List item\): expected an object'
bad "$tmp/missing.yaml" "" 'cannot read .*missing\.yaml'
bad - 'apiVersion: v1
kind: Pod
metadata: {name: twice}
spec: {containers: []}
---
apiVersion: v1
kind: Pod
metadata: {name: twice}
spec: {containers: []}' 'document 2: Pod "twice" is given twice'

# bad_types <InstanceTypes text> <pattern>: --instance-types from stdin must be refused the same way.
bad_types() {
    refused "bad instance types" "$1" "$2" -f "$data/examples/input.yaml" --instance-types -
}
head='apiVersion: kpssh.dev/v1alpha1
kind: InstanceTypes
items:
'
bad_types "$head" '<stdin>:1: items: required'
bad_types 'apiVersion: v1
kind: InstanceTypes
items: []' '<stdin>:1: document 1: kind "InstanceTypes" of apiVersion "v1" is not an instance type list'
bad_types "$head"'- name: big
  capacity: {cpu: "4", memory: 8Gi}
  offerings: [{requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}], price: 1}]' \
    '<stdin>:1: items\[0\] "big": offerings\[0\]\.requirements: needs karpenter\.sh/capacity-type'
bad_types "$head"'- name: big
  capacity: {cpu: lots, memory: 8Gi}' '<stdin>:1: items\[0\] "big": capacity\.cpu: "lots" is not a quantity'
bad_types 'items: [' '<stdin>:[0-9]+:[0-9]+: .*flow node'
rc=0
err=$("$kpssh" simulate -f "$data/examples/input.yaml" --instance-types "$tmp/none.yaml" 2>&1) || rc=$?
if [ "$rc" -ne 2 ] || ! grep -q 'cannot read .*none\.yaml' <<<"$err"; then
    echo "FAIL --instance-types of a missing file: exit $rc ($err)" >&2
    fail=1
fi

[ "$fail" -eq 0 ] && echo "simulate: $cases golden cases and the bad inputs pass"
exit "$fail"
