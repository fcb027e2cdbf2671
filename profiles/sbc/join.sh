#!/usr/bin/env bash
# kpssh profile sbc, phase join: point the installed kubelet at the cluster with a
# bootstrap token and wait until TLS bootstrapping has given it a client certificate.
# The same steps as tls-bootstrap's join.
# Idempotent: every run starts from a clean membership state and rewrites all it owns.
#
# Reads KPSSH_CLUSTER_ENDPOINT, KPSSH_CLUSTER_CA_B64, KPSSH_BOOTSTRAP_TOKEN, KPSSH_NODE_NAME,
# KPSSH_PROVIDER_ID, KPSSH_NODE_ADDRESS, KPSSH_NODE_LABELS, KPSSH_TAINTS and the variables
#   clusterDNS          default 10.96.0.10
#   serverTLSBootstrap  true|false (default false); true needs a serving-CSR approver
#   bootstrapWait       seconds to wait for the client certificate (default 120)
# Never enable xtrace here: the bootstrap token would reach stderr, which kpssh relays.
set -euo pipefail

die() {
    echo "kpssh sbc join: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (the runner uses sudo for non-root users)"
for v in KPSSH_CLUSTER_ENDPOINT KPSSH_CLUSTER_CA_B64 KPSSH_BOOTSTRAP_TOKEN KPSSH_NODE_NAME; do
    [ -n "${!v:-}" ] || die "$v is empty; kpssh sets it for join (testing by hand? export it)"
done
cluster_dns="${KPSSH_VAR_clusterDNS:-10.96.0.10}"
server_tls="${KPSSH_VAR_serverTLSBootstrap:-false}"
wait_s="${KPSSH_VAR_bootstrapWait:-120}"
[[ "$server_tls" =~ ^(true|false)$ ]] || die "spec.vars.serverTLSBootstrap must be true or false"
[[ "$wait_s" =~ ^[0-9]+$ ]] || die "spec.vars.bootstrapWait must be a number of seconds"
[[ "$cluster_dns" =~ ^[0-9a-fA-F.:]+$ ]] || die "spec.vars.clusterDNS must be an IP address"
# Flag values go into a systemd unit, where '%', '$', quotes and spaces would need escaping.
# Kubernetes names, labels and taints never hold them; refuse anything that does.
for v in KPSSH_NODE_NAME KPSSH_PROVIDER_ID KPSSH_NODE_ADDRESS KPSSH_NODE_LABELS KPSSH_TAINTS; do
    [[ "${!v:-}" =~ ^[A-Za-z0-9._:/,=@+-]*$ ]] || die "$v holds characters kubelet flags cannot take"
done
kubelet_bin="$(command -v kubelet)" || die "kubelet is not installed: the install phase must run first"

k=/etc/kubernetes
dropin_dir=/etc/systemd/system/kubelet.service.d

# Start from a clean membership: a previous join's credentials must not be reused.
systemctl stop kubelet || true
rm -f "$k/kubelet.conf" "$k/bootstrap-kubelet.conf"
rm -rf /var/lib/kubelet/pki
install -d -m 0755 "$k" "$k/pki" /var/lib/kubelet "$dropin_dir"

# write FILE MODE: stdin to FILE through a temporary file, so no reader sees half a file.
write() {
    local tmp="$1.kpssh-tmp"
    (umask 077 && cat >"$tmp")
    chmod "$2" "$tmp"
    mv -f "$tmp" "$1"
}

printf '%s' "$KPSSH_CLUSTER_CA_B64" | base64 -d | write "$k/pki/ca.crt" 0644 ||
    die "KPSSH_CLUSTER_CA_B64 is not valid base64"
grep -q 'BEGIN CERTIFICATE' "$k/pki/ca.crt" || die "the cluster CA is not a PEM certificate"

write "$k/bootstrap-kubelet.conf" 0600 <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: $KPSSH_CLUSTER_ENDPOINT
    certificate-authority: $k/pki/ca.crt
users:
- name: kubelet-bootstrap
  user:
    token: $KPSSH_BOOTSTRAP_TOKEN
contexts:
- name: bootstrap
  context:
    cluster: cluster
    user: kubelet-bootstrap
current-context: bootstrap
EOF

resolv=""
if [ -s /run/systemd/resolve/resolv.conf ]; then
    resolv="resolvConf: /run/systemd/resolve/resolv.conf"
fi
write "$k/kubelet-config.yaml" 0644 <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $k/pki/ca.crt
authorization:
  mode: Webhook
cgroupDriver: systemd
clusterDNS:
- $cluster_dns
clusterDomain: cluster.local
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
rotateCertificates: true
serverTLSBootstrap: $server_tls
staticPodPath: $k/manifests
failSwapOn: false
$resolv
EOF

args="--bootstrap-kubeconfig=$k/bootstrap-kubelet.conf --kubeconfig=$k/kubelet.conf"
args+=" --config=$k/kubelet-config.yaml --hostname-override=$KPSSH_NODE_NAME"
# --node-ip takes an IP literal only; a board known by a DNS name lets kubelet pick its address.
if [[ "${KPSSH_NODE_ADDRESS:-}" =~ ^[0-9a-fA-F.:]+$ ]]; then
    args+=" --node-ip=$KPSSH_NODE_ADDRESS"
fi
[ -z "${KPSSH_PROVIDER_ID:-}" ] || args+=" --provider-id=$KPSSH_PROVIDER_ID"
[ -z "${KPSSH_NODE_LABELS:-}" ] || args+=" --node-labels=$KPSSH_NODE_LABELS"
[ -z "${KPSSH_TAINTS:-}" ] || args+=" --register-with-taints=$KPSSH_TAINTS"

# 90- sorts after kubeadm's 10-kubeadm.conf, so this ExecStart wins if both exist.
rm -f "$dropin_dir/10-kpssh.conf"
write "$dropin_dir/90-kpssh.conf" 0644 <<EOF
# Written by kpssh profile sbc join; rewritten on every join.
[Service]
ExecStart=
ExecStart=$kubelet_bin $args
EOF

systemctl daemon-reload
systemctl enable --now containerd
systemctl enable kubelet
systemctl restart kubelet

# TLS bootstrap is done when kubelet has written its own kubeconfig.
deadline=$((SECONDS + wait_s))
until [ -s "$k/kubelet.conf" ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "kpssh: kubelet did not finish TLS bootstrap within ${wait_s}s" >&2
        journalctl -u kubelet -n 50 --no-pager >&2 2>/dev/null || true
        exit 1
    fi
    sleep 2
done
echo "kpssh: $KPSSH_NODE_NAME bootstrapped against $KPSSH_CLUSTER_ENDPOINT"
