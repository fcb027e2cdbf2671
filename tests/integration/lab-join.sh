#!/usr/bin/env bash
# Hand-written join script used by test-lab-smoke.sh: written for a real systemd
# host (a packaged kubelet.service, a kubeadm-style drop-in that resets
# ExecStart and reads an EnvironmentFile), run as root over plain ssh.
# Inputs (environment): JOIN_SERVER JOIN_CA_B64 JOIN_TOKEN JOIN_NODE_NAME
#   JOIN_NODE_IP JOIN_PROVIDER_ID JOIN_LABELS JOIN_TAINTS
set -euo pipefail
for v in JOIN_SERVER JOIN_CA_B64 JOIN_TOKEN JOIN_NODE_NAME JOIN_NODE_IP JOIN_PROVIDER_ID \
    JOIN_LABELS JOIN_TAINTS; do
    [[ -n ${!v:-} ]] || {
        echo "join: $v is not set" >&2
        exit 1
    }
done
k=/etc/kubernetes
# A fresh membership: never reuse credentials of an earlier join.
systemctl stop kubelet || true
rm -rf "$k/kubelet.conf" /var/lib/kubelet/pki
install -d -m 0755 "$k/pki" /var/lib/kubelet /etc/systemd/system/kubelet.service.d
printf '%s' "$JOIN_CA_B64" | base64 -d >"$k/pki/ca.crt"
umask 077
cat >"$k/bootstrap-kubelet.conf" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "$JOIN_SERVER", certificate-authority: $k/pki/ca.crt}
users:
- name: b
  user: {token: "$JOIN_TOKEN"}
contexts:
- name: b
  context: {cluster: c, user: b}
current-context: b
EOF
umask 022
cat >/var/lib/kubelet/config.yaml <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
maxPods: 50
EOF
# What a kubelet package ships.
cat >/etc/systemd/system/kubelet.service <<'EOF'
[Unit]
Description=kubelet: The Kubernetes Node Agent

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
EOF
# kubeadm-style drop-in: reset ExecStart, flags from variables.
cat >/etc/systemd/system/kubelet.service.d/10-join.conf <<'EOF'
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS \
    $KUBELET_EXTRA_ARGS
EOF
cat >/etc/default/kubelet <<EOF
KUBELET_EXTRA_ARGS="--hostname-override=$JOIN_NODE_NAME --node-ip=$JOIN_NODE_IP --provider-id=$JOIN_PROVIDER_ID --node-labels=$JOIN_LABELS --register-with-taints=$JOIN_TAINTS --container-runtime-endpoint=unix:///run/containerd/containerd.sock --v 2 --rotate-certificates"
EOF
systemctl daemon-reload
systemctl enable --now containerd
systemctl enable --now kubelet
for _ in $(seq 120); do
    [[ -s $k/kubelet.conf ]] && break
    sleep 0.5
done
[[ -s $k/kubelet.conf ]] || {
    echo "join: kubelet did not finish TLS bootstrap within 60 s" >&2
    exit 1
}
echo "join: $JOIN_NODE_NAME bootstrapped"
