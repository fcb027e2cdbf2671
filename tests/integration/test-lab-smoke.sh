#!/usr/bin/env bash
# Smoke test of the test lab (issue 3): real control plane + three SSH hosts;
# a hand-run join over plain ssh with a freshly minted bootstrap token; TLS
# bootstrap through an auto-approved CSR; Node registration with providerID,
# labels and taints under system:node:<name>; a pod Running on the hollow
# node; eviction refused by a PDB and allowed after relaxing it; reboot of an
# enabled host brings kubelet back, of a disabled host does not; leave over
# ssh leaves the cluster and the host clean.
#
# If the lab (KPSSH_LAB_ID) is already up (ctest fixture), it is used and left
# running; otherwise this script brings it up and tears it down.
# Ends with "N passed, 0 failed"; any failure stops it with exit 1.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
lab=$repo/tests/lab
# shellcheck source=../lab/lib.sh disable=SC1091
source "$lab/lib.sh"

passed=0
T0=$(date +%s.%N)
now() { date +%s.%N; }
el() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b - a}'; }
ok() {
    passed=$((passed + 1))
    printf 'ok %d - %s\n' "$passed" "$*"
}
fail() {
    printf 'FAIL - %s\n' "$*" >&2
    diagnostics >&2 || true
    printf '%d passed, 1 failed\n' "$passed"
    exit 1
}
# check DESCRIPTION CMD...: one check; CMD's output is shown on failure.
check() {
    local what=$1 out
    shift
    if out=$("$@" 2>&1); then ok "$what"; else fail "$what: $out"; fi
}
# eventually SECONDS DESCRIPTION CMD...
eventually() {
    local t=$1 what=$2 i out=''
    shift 2
    for ((i = 0; i < t * 2; i++)); do
        if out=$("$@" 2>&1); then
            ok "$what"
            return 0
        fi
        sleep 0.5
    done
    fail "$what (not within $t s): $out"
}

own_lab=0
diagnostics() {
    echo "--- diagnostics (lab $LAB_ID, $LAB_DIR)"
    "$lab/host.sh" list 2>&1 || true
    [[ -e $LAB_DIR/pki/admin.kubeconfig ]] && kc get nodes,csr -o wide 2>&1 | head -20
    local f
    for f in "$LAB_DIR"/hosts/h1/logs/kubelet.log "$LAB_DIR"/logs/kube-apiserver.log; do
        [[ -e $f ]] && {
            echo "--- tail $f"
            tail -n 15 "$f"
        }
    done
    return 0
}
cleanup() {
    if ((own_lab)); then
        "$lab/down.sh" || true
    elif [[ -e $LAB_DIR/hosts/h1/host.env ]]; then
        # A shared lab: leave host 1 as the lab made it (lab-join.sh's unit, drop-in and
        # credentials would otherwise start a stale kubelet in the next test that enables one).
        "$lab/host.sh" exec 1 sh -c 'systemctl disable --now kubelet containerd >/dev/null 2>&1
            rm -rf /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d \
                /etc/kubernetes/* /var/lib/kubelet/*' >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
# Anything failing outside a check still fails loudly.
trap 'fail "unexpected error (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

need_root
[[ -x $LAB_BIN/kubectl ]] || fail "no $LAB_BIN/kubectl: run tests/k8s-harness/build.sh first"

# --- 1. control plane and hosts ------------------------------------------
apiready() { curl -fsS --cacert "$LAB_DIR/pki/ca.crt" --cert "$LAB_DIR/pki/admin.crt" \
    --key "$LAB_DIR/pki/admin.key" "$LAB_API_URL/readyz"; }
if [[ -e $LAB_DIR/env.sh ]] && apiready >/dev/null 2>&1; then
    echo "# using the running lab $LAB_ID ($LAB_DIR)"
else
    echo "# bringing up lab $LAB_ID"
    own_lab=1
    t=$(now)
    "$lab/up.sh" || fail "tests/lab/up.sh failed"
    echo "# control-plane start: $(el "$t" "$(now)") s"
fi
[[ -s $LAB_DIR/state/timings ]] && echo "# $(cat "$LAB_DIR/state/timings")"
# shellcheck disable=SC1091
source "$LAB_DIR/env.sh"
# Three hosts; if we add them ourselves, make host 2 a different shape.
for i in 1 2 3; do
    if [[ ! -e $LAB_DIR/hosts/h$i/host.env ]]; then
        if ((i == 2)); then
            "$lab/host.sh" add 2 --cpu 4 --mem-mib 8192 --arch aarch64 --user ops || fail "host.sh add 2"
        else
            "$lab/host.sh" add "$i" || fail "host.sh add $i"
        fi
    fi
done
check "kube-apiserver /readyz" apiready
check "kubectl and server report v1.36.3" jq -e '.clientVersion.gitVersion == "v1.36.3" and .serverVersion.gitVersion == "v1.36.3"' <<<"$(kc version -o json)"
empty() { [[ -z $("$@") ]]; }
check "no nodes before the join" empty kc get nodes -o name
check "kube-public/cluster-info readable anonymously" curl -fsS --cacert "$KPSSH_LAB_CA" \
    "$KPSSH_LAB_API_URL/api/v1/namespaces/kube-public/configmaps/cluster-info"

SSH=(ssh -i "$KPSSH_LAB_SSH_KEY" -o BatchMode=yes -o StrictHostKeyChecking=yes
    -o UserKnownHostsFile="$KPSSH_LAB_KNOWN_HOSTS" -o ConnectTimeout=5 -o LogLevel=ERROR)
# hv I VAR: a value from host I's host.env
hv() { (
    # shellcheck disable=SC1090
    . "$LAB_DIR/hosts/h$1/host.env"
    eval "echo \"\$$2\""
); }
for i in 1 2 3; do
    ip=$(hv "$i" HOST_IP) name=$(hv "$i" HOST_NAME) user=$(hv "$i" HOST_USER)
    got=$("${SSH[@]}" "root@$ip" hostname 2>&1) || fail "host $i: ssh root@$ip: $got"
    check "host $i: root ssh with pinned host key, hostname $name" test "$got" == "$name"
    # shellcheck disable=SC2016
    probe=$("${SSH[@]}" "$user@$ip" \
        'echo "$(sudo -n id -u) $(nproc) $(uname -m) $(awk "/^MemTotal:/{print \$2}" /proc/meminfo)"' 2>&1) ||
        fail "host $i: ssh/sudo as $user: $probe"
    want="0 $(hv "$i" HOST_CPU) $(hv "$i" HOST_ARCH) $(($(hv "$i" HOST_MEM_MIB) * 1024))"
    check "host $i: $user has sudo; probes see '$want' (uid nproc arch MemTotal)" test "$probe" == "$want"
done

# --- 2. join host 1 by hand ------------------------------------------------
# shellcheck disable=SC1091
. "$LAB_DIR/hosts/h1/host.env"
H1=$HOST_DIR
node=$HOST_NAME
pid_want=kpssh://kpssh-system/$node
# no_kubelet I: no hollow kubelet process in host I's PID namespace
no_kubelet() { ! "$lab/host.sh" exec "$1" ps -eo comm | grep -qx hollow-node; }
node_ready() { [[ $(kc get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; }
remote_state() { "${SSH[@]}" "root@$HOST_IP" 'systemctl is-active kubelet; systemctl is-enabled kubelet' | tr '\n' ' '; }
check "host 1 has no kubelet running" no_kubelet 1

tid=$(openssl rand -hex 3)
tsec=$(openssl rand -hex 8)
exp=$(date -u -d '+1 hour' +%FT%TZ)
check "mint bootstrap token $tid" kc apply -f - <<EOF
apiVersion: v1
kind: Secret
metadata: {name: bootstrap-token-$tid, namespace: kube-system}
type: bootstrap.kubernetes.io/token
stringData:
  token-id: "$tid"
  token-secret: "$tsec"
  expiration: "$exp"
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: "system:bootstrappers:kpssh"
EOF
eventually 30 "bootstrapsigner signed cluster-info for token $tid" \
    kc -n kube-public get configmap cluster-info -o "jsonpath={.data.jws-kubeconfig-$tid}" --allow-missing-template-keys=false

tj=$(now)
join_env="JOIN_SERVER=$KPSSH_LAB_API_URL JOIN_CA_B64=$(base64 -w0 <"$KPSSH_LAB_CA") JOIN_TOKEN=$tid.$tsec"
join_env+=" JOIN_NODE_NAME=$node JOIN_NODE_IP=$HOST_IP JOIN_PROVIDER_ID=$pid_want"
join_env+=" JOIN_LABELS=kpssh.dev/pool=smoke,kpssh.dev/host=$node JOIN_TAINTS=kpssh.dev/smoke=true:NoSchedule"
check "join script over ssh as root@$HOST_IP" bash -c \
    "${SSH[*]} root@$HOST_IP env $join_env bash -s < $here/lab-join.sh"
eventually 90 "Node $node Ready" node_ready "$node"
t_ready=$(now)
echo "# join script start -> Node Ready: $(el "$tj" "$t_ready") s"

csr=$(kc get csr -o json | jq -r --arg u "system:bootstrap:$tid" \
    '.items[] | select(.spec.username == $u and .spec.signerName == "kubernetes.io/kube-apiserver-client-kubelet") | .metadata.name' | awk 'NR == 1')
check "CSR from system:bootstrap:$tid exists" test -n "$csr"
check "CSR $csr approved and issued" jq -e '([.status.conditions[]? | select(.type == "Approved" and .status == "True")] | length == 1) and (.status.certificate | length > 0)' <<<"$(kc get csr "$csr" -o json)"
nodejson=$(kc get node "$node" -o json)
check "Node providerID $pid_want" test "$(jq -r .spec.providerID <<<"$nodejson")" == "$pid_want"
check "Node labels from --node-labels" jq -e '.metadata.labels["kpssh.dev/pool"] == "smoke" and .metadata.labels["kpssh.dev/host"] == "'"$node"'"' <<<"$nodejson"
check "Node taint from --register-with-taints" jq -e '[.spec.taints[]? | select(.key == "kpssh.dev/smoke" and .value == "true" and .effect == "NoSchedule")] | length == 1' <<<"$nodejson"
# to_ki QUANTITY: Ki/Mi/Gi quantity in KiB
to_ki() { awk '/Ki$/{print $0+0} /Mi$/{print ($0+0)*1024} /Gi$/{print ($0+0)*1048576}' <<<"$1"; }
cap=$(jq -r '"\(.status.capacity.cpu) \(.status.capacity.memory) \(.status.capacity.pods)"' <<<"$nodejson")
read -r ccpu cmem cpods <<<"$cap"
check "Node capacity = host shape (cpu $HOST_CPU, ${HOST_MEM_MIB}Mi, pods 50 from config.yaml; got $cap)" \
    test "$ccpu $(to_ki "$cmem") $cpods" == "$HOST_CPU $((HOST_MEM_MIB * 1024)) 50"
check "Node address $HOST_IP" jq -e "[.status.addresses[] | select(.type == \"InternalIP\" and .address == \"$HOST_IP\")] | length == 1" <<<"$nodejson"
who=$("$lab/host.sh" exec 1 "$LAB_BIN/kubectl" --kubeconfig /etc/kubernetes/kubelet.conf auth whoami -o jsonpath='{.status.userInfo.username}') ||
    fail "kubectl auth whoami with the kubelet's kubeconfig inside host 1"
check "kubelet authenticates as system:node:$node (client cert from the CSR)" test "$who" == "system:node:$node"
eventually 30 "node lease created by the kubelet" kc -n kube-node-lease get lease "$node"
check "join wrote only the host's private files" bash -c \
    "[[ -s $H1/fs/etc-kubernetes/kubelet.conf && -s $H1/fs/etc-systemd-system/kubelet.service && ! -e /etc/kubernetes/kubelet.conf && ! -e /etc/systemd/system/kubelet.service ]]"
check "systemctl is-active/is-enabled kubelet over ssh: active enabled" test "$(remote_state)" == "active enabled "

# --- 3. a pod on the node, eviction against a PDB --------------------------
check "create pod smoke on $node" kc apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata: {name: lab-smoke, namespace: default, labels: {app: lab-smoke}}
spec:
  nodeSelector: {kubernetes.io/hostname: $node}
  tolerations: [{key: kpssh.dev/smoke, operator: Exists, effect: NoSchedule}]
  terminationGracePeriodSeconds: 2
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: lab-smoke, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: lab-smoke}}
EOF
pod_is() { [[ $(kc get pod lab-smoke -o jsonpath='{.spec.nodeName}/{.status.phase}') == "$1" ]]; }
eventually 60 "pod lab-smoke Running on $node" pod_is "$node/Running"
pdb_is() { [[ $(kc get pdb lab-smoke -o json | jq -r '"\(.status.observedGeneration == .metadata.generation) \(.status.currentHealthy) \(.status.disruptionsAllowed)"') == "$1" ]]; }
eventually 30 "PDB observed: 1 healthy, 0 disruptions allowed" pdb_is "true 1 0"
evict() {
    curl -sS -o "$LAB_DIR/evict.out" -w '%{http_code}' --cacert "$KPSSH_LAB_CA" --cert "$KPSSH_LAB_ADMIN_CERT" \
        --key "$KPSSH_LAB_ADMIN_KEY" -H 'Content-Type: application/json' -X POST \
        "$KPSSH_LAB_API_URL/api/v1/namespaces/default/pods/lab-smoke/eviction" \
        -d '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"lab-smoke","namespace":"default"}}'
}
code=$(evict)
check "eviction refused with 429 while the PDB forbids it (got $code)" test "$code" == 429
check "refusal names the disruption budget" grep -q 'disruption budget' "$LAB_DIR/evict.out"
check "relax the PDB" kc patch pdb lab-smoke --type merge -p '{"spec":{"minAvailable":0}}'
eventually 30 "PDB now allows a disruption" pdb_is "true 1 1"
code=$(evict)
check "eviction accepted after relaxing the PDB (got $code)" test "$code" == 201
pod_gone() { ! kc get pod lab-smoke >/dev/null 2>&1; }
eventually 60 "evicted pod terminated by the kubelet and gone" pod_gone
kc delete pdb lab-smoke >/dev/null

# --- 4. reboot with kubelet enabled: it comes back --------------------------
kpid=$(<"$H1/state/run/kubelet.service.pid")
"$lab/host.sh" reboot 1 >/dev/null 2>&1 || fail "host.sh reboot 1"
new_kubelet() { [[ $(remote_state) == "active enabled " && $(<"$H1/state/run/kubelet.service.pid") != "$kpid" ]]; }
check "after reboot, kubelet (enabled) is running again with a new PID" new_kubelet
eventually 60 "Node $node Ready after the reboot" node_ready "$node"

# --- 5. leave: disable kubelet over ssh (as the sudo user), delete the node --
check "systemctl disable --now kubelet over ssh as $HOST_USER with sudo" \
    "${SSH[@]}" "$HOST_USER@$HOST_IP" sudo -n systemctl disable --now kubelet
check "kubelet inactive and disabled" test "$(remote_state)" == "inactive disabled "
check "no kubelet process left in host 1" no_kubelet 1
check "delete Node $node" kc delete node "$node" --wait=true
check "delete bootstrap token secret" kc -n kube-system delete secret "bootstrap-token-$tid"
"$lab/host.sh" reboot 1 >/dev/null 2>&1 || fail "host.sh reboot 1 (disabled)"
check "after reboot, disabled kubelet stays down (inactive disabled, no process)" \
    bash -c "[[ \"\$1\" == 'inactive disabled ' ]]" _ "$(remote_state)"
check "no kubelet process after the reboot" no_kubelet 1
sleep 3
check "cluster clean: no nodes" empty kc get nodes -o name
check "cluster clean: no bootstrap token secret" \
    empty kc -n kube-system get secrets --field-selector type=bootstrap.kubernetes.io/token -o name
check "cluster clean: no pods in default" empty kc -n default get pods -o name

echo "# total $(el "$T0" "$(now)") s"
printf '%d passed, 0 failed\n' "$passed"
