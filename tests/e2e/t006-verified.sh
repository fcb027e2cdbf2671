#!/usr/bin/env bash
# e2e: verified execution on a lab host set up by the documented host recipe (host.sh verified:
# user kpssh pinned to kpssh-shim by sshd's ForceCommand and authorized_keys, sudo for exactly
# the shim, /etc/kpssh/allowed_signers). One 2-CPU host, the controller under the chart's RBAC.
#
#   1. the host     the login runs the shim whatever is asked: a plain `bash -s` is refused
#                   (exit 4) and runs nothing; envelopes sent by hand behave as OpenSSH defines:
#                   signed -> 0, one byte changed after signing -> 2, another namespace -> 2, a
#                   signer past its valid-before -> 2, a certificate of a cert-authority -> 0.
#   2. the cycle    a profile signed with `kpssh profile sign`: one pod makes a NodeClaim; the
#                   probe, install and join run through the shim (its log shows each); Node
#                   Ready, pod Running; scaled to 0, leave runs through the shim and the host is
#                   Available again (warm).
#   3. unsigned     the same profile without signatures: the controller refuses before it dials
#                   ("no signature for phase install"); no phase reaches the shim; the host is
#                   never Unhealthy.
#   4. rogue key    install signed by the host's signer, join by a key the SSHHost's
#                   trustedSigners list but the host's allowed_signers lacks: install runs, the
#                   shim rejects the join (exit 2, "signature rejected" in the host's events), no
#                   Node, the host not InUse.
#
# Ports: 31000 + 10 * lab ID + 4. Lab host 33.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label e2e), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
REPO=${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
NS=kpssh-e2e-vf
APPS=e2e-vf-apps
NP=e2e-vf
PORT=$((31000 + 10 * ${KPSSH_LAB_ID:-0} + 4))
LAB_HOST=33
SHIM=${KPSSH_SHIM_BIN:-$PWD/../src/kpssh-shim}
CLI=${KPSSH_CLI_BIN:-$PWD/../src/kpssh}

work="$(mktemp -d)"
pid_ctl=""
pid_sample=""
hosts_added=()

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=../lib/ctl.sh
. "$(dirname "$0")/../lib/ctl.sh"
# shellcheck source=../lib/pool.sh
. "$(dirname "$0")/../lib/pool.sh"

cleanup() {
    set +e
    if [ "${fail:-0}" != 0 ]; then
        echo "# --- the shim's log on the host ---"
        tail -n 40 "$shimlog" 2>/dev/null | sed 's/^/# /'
    fi
    pool_cleanup "$NP"
}
trap cleanup EXIT

[ -x "$SHIM" ] || { echo "kpssh-shim not found at $SHIM (set KPSSH_SHIM_BIN)" >&2; exit 1; }
ip=${KPSSH_LAB_GATEWAY%.*}.$((10 + LAB_HOST))
shimlog="$KPSSH_LAB_HOSTS_DIR/h$LAB_HOST/fs/var-lib-kpssh/shim.log"

# --- keys: the host's signer A, a rogue R, an expired E, a CA and a certified key U ------------
for k in A R E CA U; do ssh-keygen -q -t ed25519 -N '' -C "e2e-$k" -f "$work/$k"; done
ssh-keygen -q -s "$work/CA" -I e2e-signer-u -n kpssh -V -1d:+1d "$work/U.pub"
{
    printf 'kpssh namespaces="kpssh" %s\n' "$(cat "$work/A.pub")"
    printf 'kpssh namespaces="kpssh",valid-before="20200101" %s\n' "$(cat "$work/E.pub")"
    printf 'kpssh cert-authority,namespaces="kpssh" %s\n' "$(cat "$work/CA.pub")"
} >"$work/allowed_signers"

# --- the pool: one Verified host ---------------------------------------------------------------
"$REPO/tests/lab/crds.sh" apply
kc create namespace "$NS" >/dev/null
kc create namespace "$APPS" >/dev/null
kc create secret generic vf-key -n "$NS" --from-file=privateKey="$KPSSH_LAB_SSH_KEY" >/dev/null
"$KPSSH_LAB_HOST_SH" add "$LAB_HOST" --cpu 2 >/dev/null
hosts_added+=("$LAB_HOST")
"$KPSSH_LAB_HOST_SH" verified "$LAB_HOST" --shim "$SHIM" --allowed-signers "$work/allowed_signers" >/dev/null
sshhost() { # sshhost <trusted signer .pub files>...: the SSHHost vf-1, Verified, user kpssh
    local signers=""
    for f in "$@"; do signers="$signers
    - $(cat "$f")"; done
    kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHHost
metadata:
  name: vf-1
  namespace: $NS
  labels: {karpenter.kpssh.dev/host-class: vf}
spec:
  address: $ip
  user: kpssh
  sshKeySecretRef: {name: vf-key}
  capacity: {cpu: "2", memory: 4Gi}
  execMode: Verified
  trustedSigners:$signers
EOF
}
sshhost "$work/A.pub"

# --- 1. the host ---------------------------------------------------------------------------------
as_kpssh() { # as_kpssh <command>: ssh to the host as kpssh, stdin passed on; prints the exit code
    local rc=0
    ssh -i "$KPSSH_LAB_SSH_KEY" -o UserKnownHostsFile="$KPSSH_LAB_KNOWN_HOSTS" -o BatchMode=yes \
        -o ConnectTimeout=10 "kpssh@$ip" "$1" >"$work/out" 2>"$work/err" || rc=$?
    echo "$rc"
}
envelope() { # envelope <script> <signature>: a join envelope (version 1) for the shim
    printf 'kpssh-envelope: 1\nphase: join\nparams-b64: %s\nsig-b64: %s\nscript-b64: %s\n' \
        "$(printf 'KPSSH_NODE_NAME=e2e\n' | base64 -w0)" "$(base64 -w0 "$2")" "$(base64 -w0 "$1")"
}
cat >"$work/s.sh" <<'SCRIPT'
#!/bin/bash
set -euo pipefail
echo "ran as $(id -un) for $KPSSH_NODE_NAME"
SCRIPT
sign() { ssh-keygen -q -Y sign -f "$1" -n "${3:-kpssh}" "$2" >/dev/null 2>&1 && mv "$2.sig" "$4"; }
sign "$work/A" "$work/s.sh" kpssh "$work/s.A.sig"
sign "$work/A" "$work/s.sh" other "$work/s.other.sig"
sign "$work/E" "$work/s.sh" kpssh "$work/s.E.sig"
sign "$work/U-cert.pub" "$work/s.sh" kpssh "$work/s.U.sig"
cp "$work/s.sh" "$work/s2.sh" && printf '#' >>"$work/s2.sh"

rc=$(echo 'echo NOT-THE-SHIM' | as_kpssh 'bash -s')
check "a plain bash -s is refused by the shim (exit $rc, want 4)" test "$rc" = 4
check "... and ran nothing" not_in_file NOT-THE-SHIM "$work/out"
check "... saying so on stderr" grep -q '^kpssh-shim: ' "$work/err"
rc=$(envelope "$work/s.sh" "$work/s.A.sig" | as_kpssh ignored)
check "a signed script runs, as root (exit $rc)" grep -q '^ran as root for e2e$' "$work/out"
rc=$(envelope "$work/s2.sh" "$work/s.A.sig" | as_kpssh ignored)
check "one byte changed after signing: rejected (exit $rc, want 2)" test "$rc" = 2
rc=$(envelope "$work/s.sh" "$work/s.other.sig" | as_kpssh ignored)
check "signed for another namespace: rejected (exit $rc, want 2)" test "$rc" = 2
rc=$(envelope "$work/s.sh" "$work/s.E.sig" | as_kpssh ignored)
check "a signer past its valid-before: rejected (exit $rc, want 2)" test "$rc" = 2
rc=$(envelope "$work/s.sh" "$work/s.U.sig" | as_kpssh ignored)
check "a certificate of a cert-authority signer: runs (exit $rc)" test "$rc" = 0
# The cost of verification per phase: the same script 5 times through the shim (sudo, envelope,
# ssh-keygen -Y verify) and 5 times as Raw mode runs it for a sudo user (sudo -n bash -s).
as_lab() {
    ssh -i "$KPSSH_LAB_SSH_KEY" -o UserKnownHostsFile="$KPSSH_LAB_KNOWN_HOSTS" -o BatchMode=yes \
        -o ConnectTimeout=10 "lab@$ip" 'sudo -n bash -s' >"$work/out" 2>&1 || echo "raw: exit $?" >>"$work/out"
}
{ echo "export KPSSH_NODE_NAME='e2e'"; cat "$work/s.sh"; } >"$work/raw.sh"
envelope "$work/s.sh" "$work/s.A.sig" >"$work/env.A"
t0=$(now_ms)
for _ in 1 2 3 4 5; do as_kpssh ignored <"$work/env.A" >/dev/null; done
t1=$(now_ms)
for _ in 1 2 3 4 5; do as_lab <"$work/raw.sh"; done
t2=$(now_ms)
check "the raw comparison ran the script" grep -q '^ran as root for e2e$' "$work/out"
echo "# figure: one phase end to end (connect, run, close), mean of 5: verified $(((t1 - t0) / 5)) ms," \
    "raw (sudo -n bash -s) $(((t2 - t1) / 5)) ms: $(((t1 - t0 - (t2 - t1)) / 5)) ms for the shim"
rc=$(printf 'kpssh-envelope: 1\nphase: probe\n' | as_kpssh ignored)
check "the probe verb answers four lines (exit $rc)" test "$rc" = 0 -a "$(wc -l <"$work/out")" = 4

# --- 2. the cycle --------------------------------------------------------------------------------
block() { sed 's/^/      /' "$1"; } # a script as the body of a YAML block scalar
printf '#!/bin/bash\nset -euo pipefail\nmkdir -p /var/lib/kpssh\nsystemctl disable --now kubelet >/dev/null 2>&1 || true\n' >"$work/install.sh"
profile_yaml() { # profile_yaml <name>: the lab-safe tls-bootstrap profile, unsigned
    cat <<EOF
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHJoinProfile
metadata:
  name: $1
spec:
  version: "1"
  timeouts: {join: 3m}
  scripts:
    install: |
$(block "$work/install.sh")
    join: |
$(block "$REPO/profiles/tls-bootstrap/join.sh")
    leave: |
$(block "$REPO/profiles/tls-bootstrap/leave.sh")
EOF
}
profile_yaml vf-signed >"$work/signed.in.yaml"
check "kpssh profile lint: the profile keeps the script contract" \
    "$CLI" profile lint -f "$work/signed.in.yaml"
check "kpssh profile sign signs its scripts" \
    "$CLI" profile sign -f "$work/signed.in.yaml" --key "$work/A" -o "$work/signed.yaml"
check "kpssh profile verify: every script verifies by A" \
    "$CLI" profile verify -f "$work/signed.yaml" --signers "$work/A.pub"
kc apply -f "$work/signed.yaml" >/dev/null
pool_nodeclass vf vf vf-signed
pool_nodepool "$NP" vf WhenEmpty 5s 100%
pool_chart "$NS"
pool_controller vf-1
check "the probe ran through the shim" wait_until 30 grep -q 'probe: start' "$shimlog"

starts() { grep -c "$1: start" "$shimlog" 2>/dev/null || true; }
pool_deployment web 1 1 no
check "the pod runs on a node of the Verified host" wait_until 180 running_is 1
check "the Node is Ready" test "$(kc get nodes -l karpenter.sh/nodepool="$NP" \
    -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}')" = True
check "vf-1 is InUse" host_is vf-1 InUse
check "install ran through the shim" test "$(starts install)" -ge 1
check "join ran through the shim" test "$(starts join)" -ge 1
kc scale deployment web -n "$APPS" --replicas 0 >/dev/null
check "scaled to 0: the NodeClaim is gone" wait_until 180 claim_count_is 0
check "leave ran through the shim" wait_until 30 test "$(starts leave)" -ge 1
check "vf-1 is Available again (warm)" wait_until 60 host_is vf-1 Available
kubelet_disabled() { ! "$KPSSH_LAB_HOST_SH" exec "$LAB_HOST" systemctl is-enabled --quiet kubelet; }
check "... with kubelet stopped" kubelet_inactive "$LAB_HOST"
check "... and disabled" kubelet_disabled

# --- 3. unsigned -----------------------------------------------------------------------------------
profile_yaml vf-unsigned | kc apply -f - >/dev/null
pool_nodeclass vf vf vf-unsigned
before_install=$(starts install) before_join=$(starts join)
kc scale deployment web -n "$APPS" --replicas 1 >/dev/null
refused() { kc get events -n "$NS" --field-selector involvedObject.name=vf-1 -o json |
    jq -e '[.items[] | select(.message | contains("has no signature for phase install"))] | length > 0' >/dev/null; }
check "the controller refuses the unsigned profile before it dials" wait_until 90 refused
sleep 5
check "no install or join reached the shim" test "$(starts install)" = "$before_install" \
    -a "$(starts join)" = "$before_join"
check "vf-1 was never Unhealthy" test "$(host_state vf-1)" != Unhealthy
installed() { kc get sshhost -n "$NS" vf-1 -o jsonpath='{.status.installedProfile}'; }
check "the unsigned profile was never installed (installedProfile $(installed))" \
    test "$(installed)" = vf-signed@1
check "no Node of the NodePool" none_of nodes -l karpenter.sh/nodepool="$NP"
kc scale deployment web -n "$APPS" --replicas 0 >/dev/null
# A launch that failed (Launched=Unknown, ConfigurationError) is retried until the launch
# timeout (5 min) deletes the NodeClaim, as in Karpenter; the operator who fixes the profile
# deletes it at once.
kc delete nodeclaims -l karpenter.sh/nodepool="$NP" --wait=false >/dev/null
check "the NodeClaim that could not launch is deleted" wait_until 60 claim_count_is 0
check "vf-1 is Available" wait_until 60 host_is vf-1 Available

# --- 4. rogue key ----------------------------------------------------------------------------------
sign "$work/A" "$work/install.sh" kpssh "$work/install.sig"
cp "$REPO/profiles/tls-bootstrap/join.sh" "$work/join.sh"
sign "$work/R" "$work/join.sh" kpssh "$work/join.sig"
cp "$REPO/profiles/tls-bootstrap/leave.sh" "$work/leave.sh"
sign "$work/R" "$work/leave.sh" kpssh "$work/leave.sig"
jq -n --rawfile i "$work/install.sh" --rawfile j "$work/join.sh" \
    --rawfile l "$work/leave.sh" --rawfile si "$work/install.sig" --rawfile sj "$work/join.sig" \
    --rawfile sl "$work/leave.sig" '{
    apiVersion: "karpenter.kpssh.dev/v1beta1", kind: "SSHJoinProfile", metadata: {name: "vf-rogue"},
    spec: {version: "1", timeouts: {join: "3m"}, scripts: {install: $i, join: $j, leave: $l},
           signatures: {install: $si, join: $sj, leave: $sl}}}' | kc apply -f - >/dev/null
sshhost "$work/A.pub" "$work/R.pub"
pool_nodeclass vf vf vf-rogue
before_install=$(starts install)
kc scale deployment web -n "$APPS" --replicas 1 >/dev/null
rejected() { kc get events -n "$NS" --field-selector involvedObject.name=vf-1 -o json |
    jq -e '[.items[] | select(.message | contains("kpssh-shim exited 2 (signature rejected)"))] | length > 0' >/dev/null; }
check "the shim rejects the rogue join: exit 2, \"signature rejected\" in vf-1's events" wait_until 120 rejected
check "install ran first" test "$(starts install)" -gt "$before_install"
check "... and is recorded: installedProfile $(installed)" test "$(installed)" = vf-rogue@1
check "the shim logged the rejected join" grep -q 'join: signature rejected' "$shimlog"
check "no Node of the NodePool" none_of nodes -l karpenter.sh/nodepool="$NP"
check "vf-1 is not InUse: released Unhealthy (the host disagreed with the controller)" \
    wait_until 30 host_is vf-1 Unhealthy
kc scale deployment web -n "$APPS" --replicas 0 >/dev/null

tap_done
