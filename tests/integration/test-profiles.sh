#!/usr/bin/env bash
# Integration test of the shipped join profiles (profiles/) on lab hosts, over plain ssh.
#
# Each phase runs the way kpssh's runner runs it in Raw mode: one stdin stream made of the runner
# preamble (`set -euo pipefail` and sorted, single-quoted exports, produced by kp-envdump from the
# real env.c contract) followed by the shipped script's bytes, unchanged, fed to `bash -s` as
# root (or through sudo for the lab's non-root user). tests/integration/profiles/sandbox.sh only
# gives the phase private copies of directories the lab shares with the real machine, and for
# install-type phases puts stand-in apt-get/curl/gpg/containerd/nodeadm first on PATH.
#
#   host 1  tls-bootstrap: join -> Ready hollow node with our providerID, labels and taints;
#           join again (idempotent); leave -> kubelet disabled+stopped, membership gone, binaries
#           kept; Node deleted; leave again through sudo; reboot keeps it out
#   host 2  tls-bootstrap install against stand-ins (apt path, skip-when-current, missing var);
#           sbc install (memory cgroup refusal, skip apt, Debian CNI path), sbc join by DNS name
#           (no --node-ip) -> Ready, leave
#   host 3  nodeadm-ssm: missing activation, cold join, leave, reboot, warm join (no activation
#           consumed), wrong-cluster refusal, secret never in output, argv or logs
#
# Prints "N passed, M failed"; exits non-zero when anything failed.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
REPO="${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}"
HERE="$REPO/tests/integration/profiles"
KUBECTL=("$KPSSH_LAB_KUBECTL" --kubeconfig "$KUBECONFIG")
POOL_NS=kpssh-system
REMOTE=/home/kpssh-prof-test

work="$(mktemp -d)"
chmod 700 "$work"
tokens=()

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"

host_var() { # host_var I NAME
    (
        # shellcheck source=/dev/null
        . "$KPSSH_LAB_HOSTS_DIR/h$1/host.env"
        eval "printf '%s' \"\${$2}\""
    )
}

ssh_opts=(-i "$KPSSH_LAB_SSH_KEY" -o UserKnownHostsFile="$KPSSH_LAB_KNOWN_HOSTS"
    -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR)
# shellcheck disable=SC2029 # CMD is meant to expand on the client
ssh_root() { # ssh_root I CMD: a command as root on host I
    ssh "${ssh_opts[@]}" "root@$(host_var "$1" HOST_IP)" "$2"
}
# shellcheck disable=SC2029
ssh_user() { # ssh_user I CMD: a command as the lab's non-root user on host I
    ssh "${ssh_opts[@]}" "$(host_var "$1" HOST_USER)@$(host_var "$1" HOST_IP)" "$2"
}

cleanup() {
    local i t
    set +e
    for t in "${tokens[@]}"; do
        "${KUBECTL[@]}" -n kube-system delete secret "bootstrap-token-$t" --ignore-not-found >/dev/null 2>&1
    done
    for i in 1 2 3; do
        [ -e "$KPSSH_LAB_HOSTS_DIR/h$i/host.env" ] || continue
        # Leave the host as the lab made it: no units enabled, nothing of ours in its private dirs.
        ssh_root "$i" "systemctl disable --now kubelet containerd >/dev/null 2>&1; rm -rf $REMOTE
            /etc/kubernetes/* /var/lib/kubelet/* /var/lib/kpssh/* /etc/systemd/system/kubelet.service
            /etc/systemd/system/kubelet.service.d /etc/systemd/system/containerd.service" \
            >/dev/null 2>&1
    done
    "${KUBECTL[@]}" delete node prof-tls-1 prof-sbc-2 --ignore-not-found >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# --- tools ------------------------------------------------------------------------------------

# kp-envdump from the sources: the tree's env.c and base/, no build directory needed.
cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Wextra -Werror -include "$REPO/src/base/banned.h" \
    -I"$REPO/src" "$REPO/tests/lib/kp-envdump.c" "$REPO/src/provider/ssh/env.c" \
    "$REPO"/src/base/*.c -lpthread -o "$work/kp-envdump"

# Pushes the sandbox wrapper and stand-ins to host I (its private /home).
prepare_host() {
    local i="$1"
    ssh_root "$i" "rm -rf $REMOTE && mkdir -p $REMOTE/standins && chmod 700 $REMOTE"
    tar -C "$HERE" -cf - sandbox.sh standins | ssh_root "$i" "tar -C $REMOTE -xf -"
}

# rand_hex N: 2N random lower-case hex digits (no SIGPIPE-prone pipelines under pipefail).
rand_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

# Mints a bootstrap token for group system:bootstrappers:kpssh; its value goes to $work/token.
mint_token() {
    local id secret exp
    id="$(rand_hex 3)"
    secret="$(rand_hex 8)"
    exp="$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"
    "${KUBECTL[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
metadata: {name: bootstrap-token-$id, namespace: kube-system}
type: bootstrap.kubernetes.io/token
stringData:
  token-id: "$id"
  token-secret: "$secret"
  expiration: "$exp"
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: "$KPSSH_LAB_BOOTSTRAP_GROUP"
  description: "kpssh profile integration test"
EOF
    tokens+=("$id")
    (umask 077 && printf '%s' "$id.$secret" >"$work/token")
}

# run_phase I PROFILE PHASE TAG [--sudo] [--standins] [--no-memcg] -- KP-ENVDUMP-ARGS...
# Streams preamble + profiles/PROFILE/PHASE.sh to host I; stdout/stderr go to $work/TAG.out/.err;
# returns the remote exit status.
run_phase() {
    local i="$1" profile="$2" phase="$3" tag="$4" as=root flags=()
    shift 4
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case "$1" in
        --sudo) as=user ;;
        *) flags+=("$1") ;;
        esac
        shift
    done
    shift
    "$work/kp-envdump" --phase "$phase" --host-address "$(host_var "$i" HOST_IP)" "$@" \
        >"$work/$tag.preamble" || return 99
    local cmd="bash $REMOTE/sandbox.sh ${flags[*]}"
    local rc=0
    if [ "$as" = root ]; then
        cat "$work/$tag.preamble" "$REPO/profiles/$profile/$phase.sh" |
            ssh_root "$i" "$cmd" >"$work/$tag.out" 2>"$work/$tag.err" || rc=$?
    else
        cat "$work/$tag.preamble" "$REPO/profiles/$profile/$phase.sh" |
            ssh_user "$i" "sudo $cmd" >"$work/$tag.out" 2>"$work/$tag.err" || rc=$?
    fi
    if [ "$rc" != 0 ]; then
        echo "# $tag exited $rc; stderr tail:" >&2
        tail -n 15 "$work/$tag.err" | sed 's/^/#   /' >&2
    fi
    return "$rc"
}

node_field() { # node_field NAME JSONPATH
    "${KUBECTL[@]}" get node "$1" -o "jsonpath=$2" 2>/dev/null
}
node_ready() {
    [ "$(node_field "$1" '{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_ready() { # wait_ready NAME SECONDS
    local i
    for ((i = 0; i < $2; i++)); do
        node_ready "$1" && return 0
        sleep 1
    done
    return 1
}
remote_true() { ssh_root "$1" "$2" >/dev/null 2>&1; }
remote_false() { ! ssh_root "$1" "$2" >/dev/null 2>&1; }
grep_out() { grep -q -- "$2" "$work/$1.out" "$work/$1.err"; }
calls() { ssh_root "$1" "cat $REMOTE/calls.log 2>/dev/null"; }
calls_match() { calls "$1" | grep -q -- "$2"; }
calls_nomatch() { ! calls "$1" | grep -q -- "$2"; }
node_absent() { ! "${KUBECTL[@]}" get node "$1" >/dev/null 2>&1; }
no_xtrace() { ! grep -nE '^[^#]*set -[a-z]*x|set -o xtrace' "$@"; }

# The lab kubelet's minor version: install skips the package manager when it matches.
prepare_host 1
lab_minor="$(ssh_root 1 'kubelet --version' | sed -n 's/^Kubernetes v\([0-9]*\.[0-9]*\).*/\1/p')"
[ -n "$lab_minor" ] || {
    echo "cannot read the lab kubelet's version" >&2
    exit 1
}
join_args=(--endpoint "$KPSSH_LAB_API_URL" --ca-file "$KPSSH_LAB_CA" --pool-ns "$POOL_NS")

# --- tls-bootstrap join and leave, verbatim, host 1 --------------------------------------------

n1=prof-tls-1
ip1="$(host_var 1 HOST_IP)"
mint_token
tls_args=("${join_args[@]}" --node-name "$n1" --host-name host-1 --token-file "$work/token"
    --node-address "$ip1" --label team=storage --label node-role.kubernetes.io/worker=
    --label node.kubernetes.io/instance-type=lab --label karpenter.sh/nodepool=pool-a
    --taint "karpenter.kpssh.dev/pool:NoSchedule" --taint "dedicated=profiles:NoExecute"
    --var clusterDNS=10.0.0.10 --var bootstrapWait=120)
cp "$work/token" "$work/token.tls1"
check "tls-bootstrap join exits 0" run_phase 1 tls-bootstrap join tls-join -- "${tls_args[@]}"
check "tls-bootstrap join: Node $n1 Ready" wait_ready "$n1" 120
check "tls-bootstrap join: providerID kpssh://$POOL_NS/host-1" \
    test "$(node_field "$n1" '{.spec.providerID}')" = "kpssh://$POOL_NS/host-1"
check "tls-bootstrap join: kubelet-settable labels set" \
    test "$(node_field "$n1" '{.metadata.labels.team}/{.metadata.labels.node\.kubernetes\.io/instance-type}/{.metadata.labels.karpenter\.sh/nodepool}')" = "storage/lab/pool-a"
check "tls-bootstrap join: node-role label filtered out" \
    test -z "$(node_field "$n1" '{.metadata.labels.node-role\.kubernetes\.io/worker}')"
taints="$(node_field "$n1" '{range .spec.taints[*]}{.key}={.value}:{.effect},{end}')"
check "tls-bootstrap join: registered with karpenter.sh/unregistered:NoExecute" \
    grep -q 'karpenter.sh/unregistered=:NoExecute' <<<"$taints"
check "tls-bootstrap join: NodeClaim taints registered" \
    grep -q 'karpenter.kpssh.dev/pool=:NoSchedule,.*dedicated=profiles:NoExecute' <<<"$taints"
check "tls-bootstrap join: InternalIP is the node address" \
    test "$(node_field "$n1" '{.status.addresses[?(@.type=="InternalIP")].address}')" = "$ip1"
check "tls-bootstrap join: bootstrap kubeconfig is mode 600" \
    test "$(ssh_root 1 'stat -c %a /etc/kubernetes/bootstrap-kubelet.conf')" = 600
check "tls-bootstrap join: drop-in carries the flags" \
    remote_true 1 "grep -q -- '--provider-id=kpssh://$POOL_NS/host-1' /etc/systemd/system/kubelet.service.d/90-kpssh.conf && grep -q -- '--node-ip=$ip1' /etc/systemd/system/kubelet.service.d/90-kpssh.conf"
check "tls-bootstrap join: kubelet enabled" remote_true 1 'systemctl is-enabled kubelet'

# Idempotent: a second join (fresh token, as after a controller restart) converges. It names the
# host by DNS name, as spec.address may: kubelet refuses a name for --node-ip, so none is passed.
mint_token # rewrites $work/token, which tls_args names
cp "$work/token" "$work/token.tls2"
check "tls-bootstrap join again, addressed by DNS name, exits 0" \
    run_phase 1 tls-bootstrap join tls-join2 -- "${tls_args[@]}" --node-address host-1
check "tls-bootstrap join by DNS name: no --node-ip" remote_false 1 \
    "grep -q -- '--node-ip' /etc/systemd/system/kubelet.service.d/90-kpssh.conf"
check "tls-bootstrap join again: Node Ready" wait_ready "$n1" 120

check "tls-bootstrap leave exits 0" run_phase 1 tls-bootstrap leave tls-leave --
check "tls-bootstrap leave: kubelet inactive" remote_false 1 'systemctl is-active kubelet'
check "tls-bootstrap leave: kubelet disabled" remote_false 1 'systemctl is-enabled kubelet'
check "tls-bootstrap leave: containerd disabled" remote_false 1 'systemctl is-enabled containerd'
check "tls-bootstrap leave: membership files gone" remote_false 1 \
    'ls /etc/kubernetes/kubelet.conf /etc/kubernetes/bootstrap-kubelet.conf /var/lib/kubelet/pki 2>/dev/null | grep -q .'
check "tls-bootstrap leave: binaries and configuration kept" remote_true 1 \
    'test -x /usr/local/bin/kubelet && test -s /etc/kubernetes/kubelet-config.yaml && test -s /etc/systemd/system/kubelet.service.d/90-kpssh.conf'
check "delete Node $n1" "${KUBECTL[@]}" delete node "$n1" --wait=true
check "tls-bootstrap leave again through sudo (idempotent)" \
    run_phase 1 tls-bootstrap leave tls-leave2 --sudo --
"$KPSSH_LAB_HOST_SH" reboot 1 >/dev/null 2>&1 || not_ok "reboot host 1"
sleep 10
check "after a reboot the left host stays out: kubelet inactive" remote_false 1 'systemctl is-active kubelet'
check "after a reboot the left host stays out: no Node" node_absent "$n1"

# --- installs against stand-ins and sbc, host 2 ------------------------------------------------

prepare_host 2
if run_phase 2 tls-bootstrap install inst-novar --standins -- "${join_args[@]}" --node-name x \
    --host-name host-2; then
    not_ok "tls-bootstrap install without k8sMinor is refused"
else
    check "tls-bootstrap install without k8sMinor is refused, naming the variable" \
        grep_out inst-novar 'spec.vars.k8sMinor'
fi
check "tls-bootstrap install (apt, other minor) exits 0" \
    run_phase 2 tls-bootstrap install inst-apt --standins -- "${join_args[@]}" --node-name x \
    --host-name host-2 --var k8sMinor=1.20
check "tls-bootstrap install: apt installs containerd, kubelet and CNI plugins" \
    calls_match 2 '^apt-get install .*containerd.*kubelet.*kubernetes-cni'
check "tls-bootstrap install: kubelet held" calls_match 2 '^apt-mark hold kubelet'
check "tls-bootstrap install: containerd uses the systemd cgroup driver" \
    remote_true 2 "grep -q 'SystemdCgroup = true' $REMOTE/root/etc/containerd/config.toml"
check "tls-bootstrap install: sysctl settings written" \
    remote_true 2 "grep -q 'net.ipv4.ip_forward = 1' $REMOTE/root/etc/sysctl.d/99-kpssh-k8s.conf"
check "tls-bootstrap install: marker written, kubelet left disabled" \
    remote_true 2 'test -s /var/lib/kpssh/installed && ! systemctl is-enabled kubelet'
ssh_root 2 ": >$REMOTE/calls.log"
check "tls-bootstrap install again, current kubelet: exits 0" \
    run_phase 2 tls-bootstrap install inst-cur --standins -- "${join_args[@]}" --node-name x \
    --host-name host-2 --var "k8sMinor=$lab_minor"
check "tls-bootstrap install again: apt skipped" calls_nomatch 2 '^apt-get'
check "tls-bootstrap install again: says it skipped" grep_out inst-cur 'skipping apt'

# Tarball method: the stand-in curl serves bytes that match no published checksum; install must
# refuse them before anything is installed.
if run_phase 2 tls-bootstrap install inst-tarball --standins -- "${join_args[@]}" --node-name x \
    --host-name host-2 --var "k8sMinor=$lab_minor" --var installMethod=tarball \
    --var "kubeletVersion=v$lab_minor.999" --var kubeMirror=https://mirror.invalid/k8s; then
    not_ok "tls-bootstrap tarball install refuses a download with a wrong checksum"
else
    check "tls-bootstrap tarball install refuses a download with a wrong checksum" \
        grep_out inst-tarball 'checksum mismatch for https://mirror.invalid/k8s/release/v'
    check "tls-bootstrap tarball install: lab kubelet untouched" \
        remote_true 2 'kubelet --version | grep -q "^Kubernetes v"'
fi

if run_phase 2 sbc install sbc-nomemcg --standins --no-memcg -- "${join_args[@]}" --node-name x \
    --host-name host-2 --var "k8sMinor=$lab_minor"; then
    not_ok "sbc install refuses a kernel without the memory cgroup"
else
    check "sbc install refuses a kernel without the memory cgroup" \
        grep_out sbc-nomemcg 'memory cgroup controller is off'
fi
ssh_root 2 ": >$REMOTE/calls.log"
check "sbc install (current kubelet) exits 0" \
    run_phase 2 sbc install sbc-inst --standins -- "${join_args[@]}" --node-name x \
    --host-name host-2 --var "k8sMinor=$lab_minor"
check "sbc install: apt skipped when current" calls_nomatch 2 '^apt-get'
check "sbc install: containerd looks for CNI plugins in /opt/cni/bin" \
    remote_true 2 "grep -q 'bin_dir = \"/opt/cni/bin\"' $REMOTE/root/etc/containerd/config.toml && grep -q 'SystemdCgroup = true' $REMOTE/root/etc/containerd/config.toml"
ssh_root 2 ": >$REMOTE/calls.log"
check "sbc install (other minor) runs apt" \
    run_phase 2 sbc install sbc-inst2 --standins -- "${join_args[@]}" --node-name x \
    --host-name host-2 --var k8sMinor=1.20
check "sbc install (other minor): apt installs kubelet with downgrades allowed" \
    calls_match 2 '^apt-get install .*--allow-downgrades.*kubelet'

n2=prof-sbc-2
mint_token
cp "$work/token" "$work/token.sbc"
check "sbc join by DNS name exits 0" \
    run_phase 2 sbc join sbc-join -- "${join_args[@]}" --node-name "$n2" --host-name host-2 \
    --token-file "$work/token" --node-address host-2 --label team=edge
check "sbc join: no --node-ip for a DNS name" remote_false 2 \
    "grep -q -- '--node-ip' /etc/systemd/system/kubelet.service.d/90-kpssh.conf"
check "sbc join: Node $n2 Ready" wait_ready "$n2" 120
check "sbc leave exits 0" run_phase 2 sbc leave sbc-leave --
check "sbc leave: kubelet disabled and inactive" remote_false 2 \
    'systemctl is-enabled kubelet || systemctl is-active kubelet'
check "delete Node $n2" "${KUBECTL[@]}" delete node "$n2" --wait=true

# --- nodeadm-ssm with stand-in nodeadm, host 3 -------------------------------------------------

prepare_host 3
act_id="d5a8b1c2-7e3f-4a6b-9c0d-$(rand_hex 6)"
act_code="Ac$(rand_hex 10)"
(umask 077 && printf '%s' "$act_id" >"$work/act-id" && printf '%s' "$act_code" >"$work/act-code")
ssm_vars=(--var clusterName=prod --var region=eu-central-1 --var k8sVersion=1.34)
ssm_base=("${join_args[@]}" --adopt --node-name prof-ssm-3 --host-name host-3
    --node-address "$(host_var 3 HOST_IP)" "${ssm_vars[@]}")
ssm_secrets=(--secret-file "activationId=$work/act-id" --secret-file "activationCode=$work/act-code")
mint_token
cp "$work/token" "$work/token.ssm"
ssm_join=("${ssm_base[@]}" --token-file "$work/token")

check "nodeadm-ssm install exits 0" \
    run_phase 3 nodeadm-ssm install ssm-inst --standins -- "${ssm_base[@]}" "${ssm_secrets[@]}"
check "nodeadm-ssm install: skipped nodeadm install (nodeadm and kubelet present)" \
    grep_out ssm-inst 'skipping nodeadm install'

if run_phase 3 nodeadm-ssm join ssm-noact --standins -- "${ssm_join[@]}"; then
    not_ok "nodeadm-ssm cold join without an activation is refused"
else
    check "nodeadm-ssm cold join without an activation is refused, naming the Secret keys" \
        grep_out ssm-noact 'activationId and activationCode'
    check "nodeadm-ssm refused cold join wrote no node config and ran no init" \
        remote_false 3 "test -e $REMOTE/root/etc/nodeadm/nodeConfig.yaml || test -e $REMOTE/nodeadm-inits"
fi

check "nodeadm-ssm cold join exits 0" \
    run_phase 3 nodeadm-ssm join ssm-cold --standins -- "${ssm_join[@]}" "${ssm_secrets[@]}"
check "nodeadm-ssm cold join: node config is mode 600" \
    test "$(ssh_root 3 "stat -c %a $REMOTE/root/etc/nodeadm/nodeConfig.yaml")" = 600
check "nodeadm-ssm cold join: one activation consumed" \
    test "$(ssh_root 3 "cat $REMOTE/nodeadm-inits")" = 1
check "nodeadm-ssm cold join: kubelet registers with the unregistered taint" \
    remote_true 3 "grep -q -- '--register-with-taints=karpenter.sh/unregistered:NoExecute' $REMOTE/root/etc/nodeadm/nodeConfig.yaml"
check "nodeadm-ssm cold join: kubelet active" remote_true 3 'systemctl is-active kubelet'

check "nodeadm-ssm leave exits 0" run_phase 3 nodeadm-ssm leave ssm-leave --standins --
check "nodeadm-ssm leave: kubelet and containerd disabled and stopped" remote_false 3 \
    'systemctl is-enabled kubelet || systemctl is-active kubelet || systemctl is-enabled containerd'
check "nodeadm-ssm leave: SSM registration and node config kept" remote_true 3 \
    "test -s $REMOTE/root/var/lib/amazon/ssm/registration && test -s $REMOTE/root/etc/nodeadm/nodeConfig.yaml"
"$KPSSH_LAB_HOST_SH" reboot 3 >/dev/null 2>&1 || not_ok "reboot host 3"
sleep 5
check "nodeadm-ssm: after a reboot the left host stays out" remote_false 3 'systemctl is-active kubelet'

check "nodeadm-ssm warm join (no activation in the env) exits 0" \
    run_phase 3 nodeadm-ssm join ssm-warm --standins -- "${ssm_join[@]}"
check "nodeadm-ssm warm join: no activation consumed" \
    test "$(ssh_root 3 "cat $REMOTE/nodeadm-inits")" = 1
check "nodeadm-ssm warm join: says warm" grep_out ssm-warm 'warm join'
check "nodeadm-ssm warm join: kubelet active" remote_true 3 'systemctl is-active kubelet'
if run_phase 3 nodeadm-ssm join ssm-moved --standins -- "${ssm_base[@]/clusterName=prod/clusterName=other}" \
    --token-file "$work/token" "${ssm_secrets[@]}"; then
    not_ok "nodeadm-ssm refuses to move a registered host to another cluster"
else
    check "nodeadm-ssm refuses to move a registered host to another cluster" \
        grep_out ssm-moved 'registered for another cluster'
fi
check "nodeadm-ssm final leave exits 0" run_phase 3 nodeadm-ssm leave ssm-leave2 --standins --

# --- secrets never leak -----------------------------------------------------------------------

check "no join script enables xtrace" no_xtrace "$REPO"/profiles/*/join.sh
leaks=0
for f in "$work/act-id" "$work/act-code" "$work/token.tls1" "$work/token.tls2" "$work/token.sbc" "$work/token.ssm"; do
    v="$(cat "$f")"
    # Every phase's output, both streams.
    if grep -rqF -- "$v" "$work"/*.out "$work"/*.err; then
        echo "# secret from $(basename "$f") found in phase output" >&2
        leaks=$((leaks + 1))
    fi
    # Every host log (sshd, kubelet, units) and the stand-ins' record of their argv.
    for i in 1 2 3; do
        if grep -rqF -- "$v" "$KPSSH_LAB_HOSTS_DIR/h$i/logs" 2>/dev/null ||
            ssh_root "$i" "grep -qF -- '$v' $REMOTE/calls.log 2>/dev/null"; then
            echo "# secret from $(basename "$f") found in host $i logs or argv" >&2
            leaks=$((leaks + 1))
        fi
    done
done
check "no token or activation value in any output, host log or stand-in argv" test "$leaks" = 0
for v in "$work/act-id" "$work/act-code"; do
    # The lab's own directory is left out: when the checkout lives under /tmp it is visible in
    # the host's /tmp too, and holds the host's private files a second time.
    where="$(ssh_root 3 "grep -rlF -- '$(cat "$v")' $REMOTE/root /var/lib/kpssh /etc/kubernetes \
        /etc/systemd/system /tmp 2>/dev/null | grep -vF -- '$KPSSH_LAB_DIR/'" || true)"
    check "the activation reaches the host only in the mode-600 node config ($(basename "$v"))" \
        test "$where" = "$REMOTE/root/etc/nodeadm/nodeConfig.yaml"
done

tap_done
