# shellcheck shell=bash
# tests/lib/pool.sh: a pool of lab hosts that join with the shipped tls-bootstrap profile, for
# the shell tests that run kpssh-controller on the lab (sourced after the lab's env.sh and
# tests/lib/ctl.sh, which defines kc). The caller owns clean-up: pool_hosts appends each lab host
# index it adds to the array hosts_added, for the caller's trap to delete.

# pool_profile <name>: an SSHJoinProfile with a lab-safe install (the shipped one installs
# packages into directories the lab shares with the real machine; the lab host already has
# kubelet and systemctl) and the shipped join and leave scripts.
pool_profile() {
    jq -n --arg n "$1" --arg i 'mkdir -p /var/lib/kpssh
systemctl disable --now kubelet >/dev/null 2>&1 || true' \
        --arg j "$(cat "$KP_REPO/profiles/tls-bootstrap/join.sh")" \
        --arg l "$(cat "$KP_REPO/profiles/tls-bootstrap/leave.sh")" '{
        apiVersion: "karpenter.kpssh.dev/v1beta1", kind: "SSHJoinProfile", metadata: {name: $n},
        spec: {version: "1", scripts: {install: $i, join: $j, leave: $l}, timeouts: {join: "3m"}}}' |
        kc apply -f - >/dev/null
}

# pool_nodeclass <name> <host class> <profile>: an SSHNodeClass for the lab's API server, whose
# hosts are the SSHHosts labelled with the host class.
pool_nodeclass() {
    local admin_token
    admin_token=$(tr -d ' \n' <"$KPSSH_LAB_ADMIN_TOKEN_FILE")
    jq -n --arg n "$1" --arg c "$2" --arg p "$3" --arg ep "$KPSSH_LAB_API_URL" \
        --arg ca "$(base64 -w0 "$KPSSH_LAB_CA")" --arg tok "$admin_token" '{
        apiVersion: "karpenter.kpssh.dev/v1beta1", kind: "SSHNodeClass", metadata: {name: $n},
        spec: {hostSelector: {matchLabels: {"karpenter.kpssh.dev/host-class": $c}},
               joinProfileRef: {name: $p}, cluster: {endpoint: $ep, caBundle: $ca},
               vars: {clusterDNS: "10.0.0.10", bootstrapWait: "120", adminToken: $tok}}}' |
        kc apply -f - >/dev/null
}

# pool_hosts <namespace> <host class> <key Secret> <name prefix> <lab host index>...: starts each
# lab host and writes an SSHHost <prefix>-1, <prefix>-2, ... for it (POOL_CPU CPUs, default 2;
# 4Gi).
pool_hosts() {
    local ns=$1 class=$2 key=$3 prefix=$4 n=0 i cpu=${POOL_CPU:-2}
    shift 4
    for i in "$@"; do
        n=$((n + 1))
        "$KPSSH_LAB_HOST_SH" add "$i" --cpu "$cpu" >/dev/null
        hosts_added+=("$i")
        kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHHost
metadata:
  name: $prefix-$n
  namespace: $ns
  labels: {karpenter.kpssh.dev/host-class: $class}
spec:
  address: ${KPSSH_LAB_GATEWAY%.*}.$((10 + i))
  sshKeySecretRef: {name: $key}
  capacity: {cpu: "$cpu", memory: 4Gi}
EOF
    done
}

# pool_forget <nodepool>: for a test's clean-up, with the controller gone: every NodeClaim and
# Node of the NodePool loses its finalizers and is deleted (nothing is left to release them), then
# the lab hosts in hosts_added are stopped.
pool_forget() {
    local o
    for o in $(kc get nodeclaims,nodes -l karpenter.sh/nodepool="$1" -o name 2>/dev/null); do
        kc patch "$o" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
        kc delete "$o" --wait=false >/dev/null 2>&1
    done
    for o in "${hosts_added[@]}"; do "$KPSSH_LAB_HOST_SH" del "$o" >/dev/null 2>&1; done
}
