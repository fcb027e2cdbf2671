#!/usr/bin/env bash
# Bring up the lab's Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler built by tests/k8s-harness) on the
# lab bridge, with bootstrap-token auth, Node+RBAC authorization,
# NodeRestriction, CSR signing/auto-approval for node client certificates and
# the kube-public/cluster-info ConfigMap; then optionally N SSH hosts.
# Runs down.sh first, so leftovers of an earlier run are cleaned up.
#
# Usage: tests/lab/up.sh [--hosts N]      (KPSSH_LAB_ID selects the lab)
# Writes <labdir>/env.sh; see tests/lab/README.md.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nhosts=0
while (($#)); do
    case $1 in
    --hosts)
        nhosts=$2
        shift 2
        ;;
    --hosts=*)
        nhosts=${1#*=}
        shift
        ;;
    *) die "usage: up.sh [--hosts N]" ;;
    esac
done
[[ $nhosts =~ ^[0-9]+$ ]] || die "--hosts must be a number"

need_root
need_bins etcd kube-apiserver kube-controller-manager kube-scheduler kubectl hollow-node
for t in ip openssl ssh-keygen /usr/sbin/sshd nsenter unshare setsid curl; do
    command -v "$t" >/dev/null || die "missing tool $t (apt: iproute2 openssl openssh-server openssh-client util-linux curl)"
done

t0=$(date +%s.%N)
"$LAB_SCRIPT_DIR/down.sh" --quiet
rm -rf "$LAB_DIR/logs"
mkdir -p "$LAB_DIR"/{logs,pids,state,etcd,hosts}
log "lab $LAB_ID: dir $LAB_DIR, bridge $LAB_BRIDGE $LAB_GW/24, API $LAB_API_URL"

"$LAB_SCRIPT_DIR/pki.sh"
P=$LAB_DIR/pki

# Bridge the hosts hang off; the gateway address is also the API address.
ip link add "$LAB_BRIDGE" type bridge
echo "$LAB_BRIDGE" >"$LAB_DIR/state/bridge"
ip addr add "$LAB_GW/24" dev "$LAB_BRIDGE"
ip link set "$LAB_BRIDGE" up

dump_log() { tail -n 30 "$LAB_DIR/logs/$1.log" >&2 || true; }

# etcd on tmpfs, no fsync: fast and disposable.
mount -t tmpfs -o size=2g,mode=700 tmpfs "$LAB_DIR/etcd"
echo "$LAB_DIR/etcd" >"$LAB_DIR/state/etcd-mount"
start etcd "$LAB_BIN/etcd" --name "lab$LAB_ID" --data-dir "$LAB_DIR/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$LAB_ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$LAB_ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$LAB_ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$LAB_ETCD_PEER_PORT" \
    --initial-cluster "lab$LAB_ID=http://127.0.0.1:$LAB_ETCD_PEER_PORT" \
    --unsafe-no-fsync --log-level warn
wait_for 30 etcd curl -fsS "http://127.0.0.1:$LAB_ETCD_PORT/health" || {
    dump_log etcd
    die "etcd did not become healthy on 127.0.0.1:$LAB_ETCD_PORT"
}
t_etcd=$(date +%s.%N)

apiserver_cmd=("$LAB_BIN/kube-apiserver"
    --etcd-servers "http://127.0.0.1:$LAB_ETCD_PORT" \
    --bind-address "$LAB_GW" --advertise-address "$LAB_GW" --secure-port "$LAB_API_PORT" \
    --tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" \
    --client-ca-file "$P/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$P/sa.pub" --service-account-signing-key-file "$P/sa.key" \
    --service-cluster-ip-range "$LAB_SERVICE_CIDR" \
    --authorization-mode "Node,RBAC" \
    --enable-bootstrap-token-auth=true \
    --enable-admission-plugins NodeRestriction \
    --anonymous-auth=true --allow-privileged=true \
    --token-auth-file "$P/tokens.csv" \
    --kubelet-client-certificate "$P/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$P/apiserver-kubelet-client.key" \
    --cert-dir "$LAB_DIR/state/apiserver-certs" \
    --profiling=false --v=1)
# Saved so tests/lab/apiserver.sh can restart it with the same flags.
printf '%q ' "${apiserver_cmd[@]}" >"$LAB_DIR/state/kube-apiserver.cmd"
start kube-apiserver "${apiserver_cmd[@]}"
wait_for 120 kube-apiserver api_readyz || {
    dump_log kube-apiserver
    die "kube-apiserver not ready at $LAB_API_URL/readyz within 120 s"
}
t_api=$(date +%s.%N)

# Bootstrap objects: node bootstrap RBAC for group system:bootstrappers:kpssh,
# renewals for system:nodes, and cluster-info readable anonymously.
ci_kubeconfig=$(
    cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ""
  cluster:
    server: $LAB_API_URL
    certificate-authority-data: $(base64 -w0 <"$P/ca.crt")
contexts: []
users: []
EOF
)
kc apply -f - >"$LAB_DIR/logs/bootstrap-objects.log" <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kpssh-lab:kubelet-bootstrap}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-bootstrapper}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:bootstrappers:kpssh"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kpssh-lab:node-autoapprove-bootstrap}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:certificates.k8s.io:certificatesigningrequests:nodeclient"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:bootstrappers:kpssh"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kpssh-lab:node-autoapprove-certificate-rotation}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:nodes"}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cluster-info, namespace: kube-public}
data:
  kubeconfig: |
    ${ci_kubeconfig//$'\n'/$'\n'    }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: "kubeadm:bootstrap-signer-clusterinfo", namespace: kube-public}
rules:
- {apiGroups: [""], resources: [configmaps], resourceNames: [cluster-info], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: "kubeadm:bootstrap-signer-clusterinfo", namespace: kube-public}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: "kubeadm:bootstrap-signer-clusterinfo"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:anonymous"}]
EOF

start kube-controller-manager "$LAB_BIN/kube-controller-manager" \
    --kubeconfig "$P/kcm.kubeconfig" \
    --authentication-kubeconfig "$P/kcm.kubeconfig" --authorization-kubeconfig "$P/kcm.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$LAB_KCM_PORT" \
    --cert-dir "$LAB_DIR/state/kcm-certs" \
    --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file "$P/sa.key" --root-ca-file "$P/ca.crt" \
    --cluster-signing-cert-file "$P/ca.crt" --cluster-signing-key-file "$P/ca.key" \
    --controllers '*,bootstrapsigner,tokencleaner' \
    --service-cluster-ip-range "$LAB_SERVICE_CIDR" --cluster-name "kpssh-lab$LAB_ID" \
    --node-monitor-period 2s --node-monitor-grace-period 20s \
    --profiling=false --v=1
start kube-scheduler "$LAB_BIN/kube-scheduler" \
    --kubeconfig "$P/scheduler.kubeconfig" \
    --authentication-kubeconfig "$P/scheduler.kubeconfig" \
    --authorization-kubeconfig "$P/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$LAB_SCHED_PORT" \
    --leader-elect=false --profiling=false --v=1

# The controller-manager is working once it has published the root CA and
# created the default service account (pods need it).
wait_for 90 kube-controller-manager kc -n default get configmap kube-root-ca.crt ||
    {
        dump_log kube-controller-manager
        die "kube-controller-manager did not publish kube-root-ca.crt within 90 s"
    }
wait_for 60 "default service account" kc -n default get serviceaccount default ||
    die "no default service account after 60 s"
for c in kube-controller-manager kube-scheduler; do
    pid_alive "$LAB_DIR/pids/$c.pid" || {
        dump_log "$c"
        die "$c exited"
    }
done
wait_for 30 kube-scheduler curl -fsSk "https://127.0.0.1:$LAB_SCHED_PORT/healthz" ||
    die "kube-scheduler not healthy on 127.0.0.1:$LAB_SCHED_PORT"
t_ctl=$(date +%s.%N)

cat >"$LAB_DIR/env.sh" <<EOF
# Generated by tests/lab/up.sh for lab $LAB_ID; source it.
export KPSSH_LAB_ID=$LAB_ID
export KPSSH_LAB_DIR=$LAB_DIR
export KPSSH_LAB_BIN=$LAB_BIN
export KUBECONFIG=$P/admin.kubeconfig
export KPSSH_LAB_KUBECTL=$LAB_BIN/kubectl
export KPSSH_LAB_API_URL=$LAB_API_URL
export KPSSH_LAB_API_PORT=$LAB_API_PORT
export KPSSH_LAB_CA=$P/ca.crt
export KPSSH_LAB_ADMIN_CERT=$P/admin.crt
export KPSSH_LAB_ADMIN_KEY=$P/admin.key
export KPSSH_LAB_ADMIN_TOKEN_FILE=$P/admin.token
export KPSSH_LAB_GATEWAY=$LAB_GW
export KPSSH_LAB_SUBNET=$LAB_SUBNET_PREFIX.0/24
export KPSSH_LAB_BRIDGE=$LAB_BRIDGE
export KPSSH_LAB_ETCD_URL=http://127.0.0.1:$LAB_ETCD_PORT
export KPSSH_LAB_SSH_KEY=$LAB_DIR/ssh/id_ed25519
export KPSSH_LAB_KNOWN_HOSTS=$LAB_DIR/known_hosts
export KPSSH_LAB_HOSTS_DIR=$LAB_DIR/hosts
export KPSSH_LAB_HOST_SH=$LAB_SCRIPT_DIR/host.sh
export KPSSH_LAB_BOOTSTRAP_GROUP=system:bootstrappers:kpssh
EOF
: >"$LAB_DIR/known_hosts"

el() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b - a}'; }
log "control plane up in $(el "$t0" "$t_ctl") s (etcd $(el "$t0" "$t_etcd") s, apiserver ready +$(el "$t_etcd" "$t_api") s, kcm+scheduler +$(el "$t_api" "$t_ctl") s)"
echo "control-plane-start-seconds $(el "$t0" "$t_ctl")" >"$LAB_DIR/state/timings"

for ((i = 1; i <= nhosts; i++)); do
    "$LAB_SCRIPT_DIR/host.sh" add "$i"
done
log "lab $LAB_ID ready ($nhosts hosts) in $(el "$t0" "$(date +%s.%N)") s; source $LAB_DIR/env.sh"
