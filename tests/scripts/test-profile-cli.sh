#!/usr/bin/env bash
# `kpssh profile lint|sign|verify` (docs/cli.md) on the shipped profiles: every profiles/*/
# profile.yaml must lint clean (the shipped profiles must stay signable as they are); one is
# signed with a fresh ed25519 key and must verify, with the rest of the manifest unchanged (the
# diff adds lines only), and the host's check must agree (ssh-keygen -Y verify over the script
# bytes). Then the refusals: a changed script, an untrusted signer, a missing signature and a
# lint problem must each exit 1.
# Usage: test-profile-cli.sh KPSSH [REPO]
set -euo pipefail
kpssh=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
repo=${2:-${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() {
    echo "FAIL: $*" >&2
    fail=1
}

n=0
for f in "$repo"/profiles/*/profile.yaml; do
    n=$((n + 1))
    "$kpssh" profile lint -f "$f" >"$tmp/lint.out" 2>&1 || bad "lint $f: $(cat "$tmp/lint.out")"
done
[ "$n" -gt 0 ] || bad "no shipped profiles under $repo/profiles"

ssh-keygen -q -t ed25519 -N '' -C profile-cli-test -f "$tmp/key"
ssh-keygen -q -t ed25519 -N '' -C other -f "$tmp/other"
src=$repo/profiles/tls-bootstrap/profile.yaml
"$kpssh" profile sign -f "$src" --key "$tmp/key" -o "$tmp/signed.yaml" 2>"$tmp/sign.err" ||
    bad "sign: $(cat "$tmp/sign.err")"
"$kpssh" profile verify -f "$tmp/signed.yaml" --signers "$tmp/key.pub" >"$tmp/verify.out" ||
    bad "verify of a fresh signature: $(cat "$tmp/verify.out")"
[ "$(grep -c ': verified, signed by ' "$tmp/verify.out")" -eq 4 ] ||
    bad "verify did not report four verified phases: $(cat "$tmp/verify.out")"
"$kpssh" profile lint -f "$tmp/signed.yaml" >/dev/null 2>&1 || bad "the signed manifest does not lint"
if diff "$src" "$tmp/signed.yaml" | grep -q '^<'; then
    bad "sign changed lines other than spec.signatures"
fi
# Signing again replaces the block instead of adding a second one (ed25519 is deterministic).
"$kpssh" profile sign -f "$tmp/signed.yaml" --key "$tmp/key" -o "$tmp/again.yaml" 2>/dev/null
cmp -s "$tmp/signed.yaml" "$tmp/again.yaml" || bad "re-signing changed the manifest"

# The host's ssh-keygen accepts what sign wrote, over the script bytes as the manifest holds them.
if command -v python3 >/dev/null && python3 -c 'import yaml' 2>/dev/null; then
    python3 - "$tmp/signed.yaml" "$tmp" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
open(sys.argv[2] + "/join.sh", "w").write(doc["spec"]["scripts"]["join"])
open(sys.argv[2] + "/join.sig", "w").write(doc["spec"]["signatures"]["join"])
PY
    printf 'kpssh namespaces="kpssh" %s\n' "$(cat "$tmp/key.pub")" >"$tmp/allowed_signers"
    ssh-keygen -Y verify -f "$tmp/allowed_signers" -I kpssh -n kpssh -s "$tmp/join.sig" \
        <"$tmp/join.sh" >/dev/null 2>&1 || bad "ssh-keygen -Y verify rejects the join signature"
fi

# Refusals.
sed 's/set -euo pipefail/set -eu  pipefail/' "$tmp/signed.yaml" >"$tmp/changed.yaml"
if "$kpssh" profile verify -f "$tmp/changed.yaml" --signers "$tmp/key.pub" >"$tmp/out" 2>&1; then
    bad "verify accepted changed scripts"
fi
grep -q 'does not verify' "$tmp/out" || bad "changed script: $(cat "$tmp/out")"
if "$kpssh" profile verify -f "$tmp/signed.yaml" --signers "$tmp/other.pub" >"$tmp/out" 2>&1; then
    bad "verify accepted an untrusted signer"
fi
grep -q 'not among trustedSigners' "$tmp/out" || bad "untrusted signer: $(cat "$tmp/out")"
if "$kpssh" profile verify -f "$src" --signers "$tmp/key.pub" >"$tmp/out" 2>&1; then
    bad "verify accepted a profile without signatures"
fi
grep -q 'no signature' "$tmp/out" || bad "missing signature: $(cat "$tmp/out")"
# shellcheck disable=SC2016 # a literal $KPSSH_VAR_ for the script, not for this shell
sed 's/^\(    leave: |\)$/\1\n      # uses $KPSSH_VAR_region/' "$src" >"$tmp/leave.yaml"
if "$kpssh" profile lint -f "$tmp/leave.yaml" >"$tmp/out" 2>&1; then
    bad "lint accepted a leave script with KPSSH_VAR_"
fi
grep -q 'leave.yaml:[0-9]*:[0-9]*: spec.scripts.leave: mentions KPSSH_VAR_region' "$tmp/out" ||
    bad "lint leave: $(cat "$tmp/out")"

[ "$fail" -eq 0 ] && echo "profile cli: ok ($n shipped profiles linted, sign/verify round trip)"
exit "$fail"
