#!/usr/bin/env bash
# kpssh profile nodeadm-ssm, phase join: attach the host to an EKS cluster as a hybrid node.
#
# Warm (the host was a member before and only left): the SSM registration and the node config
# are still there, so re-enabling containerd and kubelet brings the same mi-* node back and no
# activation is consumed. Cold (first join, or after uninstall): needs an SSM hybrid activation
# from the join Secret (keys activationId and activationCode -> KPSSH_SECRET_ACTIVATIONID,
# KPSSH_SECRET_ACTIVATIONCODE), writes /etc/nodeadm/nodeConfig.yaml (mode 600) and runs
# `nodeadm init`, which registers a new managed instance.
#
# Variables: clusterName, region (required). Pair with providerIDSource: Adopt.
# Never enable xtrace here: the activation code would reach stderr, which kpssh relays.
set -euo pipefail
set +x

die() {
    echo "kpssh nodeadm-ssm join: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (nodeadm requires it)"
cluster="${KPSSH_VAR_clusterName:-}"
region="${KPSSH_VAR_region:-}"
[[ "$cluster" =~ ^[A-Za-z0-9][A-Za-z0-9_-]*$ ]] || die "set spec.vars.clusterName on the SSHNodeClass"
[[ "$region" =~ ^[a-z0-9-]+$ ]] || die "set spec.vars.region on the SSHNodeClass (e.g. eu-central-1)"
command -v nodeadm >/dev/null 2>&1 || die "nodeadm is not installed: the install phase must run first"

config=/etc/nodeadm/nodeConfig.yaml
registration=/var/lib/amazon/ssm/registration

if [ -s "$registration" ] && [ -s "$config" ]; then
    # A registered host only rejoins the cluster it is registered for; moving it is a cold cycle.
    if ! grep -q "^    name: $cluster\$" "$config" || ! grep -q "^    region: $region\$" "$config"; then
        die "this host is registered for another cluster or region ($config); run the profile's uninstall on it, then join again (cold, consumes an activation)"
    fi
    echo "kpssh: warm join: SSM registration present, re-enabling containerd and kubelet"
    systemctl enable --now containerd
    systemctl enable --now kubelet
    systemctl is-active --quiet kubelet || die "kubelet did not start; see journalctl -u kubelet"
    exit 0
fi

# Cold join.
if [ -z "${KPSSH_SECRET_ACTIVATIONID:-}" ] || [ -z "${KPSSH_SECRET_ACTIVATIONCODE:-}" ]; then
    die "cold join needs an SSM hybrid activation: put keys activationId and activationCode in the SSHNodeClass joinSecretRef Secret (warm joins never need them)"
fi

# Both go into double-quoted YAML; SSM ids and codes never hold quotes, backslashes or newlines.
for v in KPSSH_SECRET_ACTIVATIONID KPSSH_SECRET_ACTIVATIONCODE; do
    case "${!v}" in
    *[\"\\]* | *$'\n'*) die "$v holds a quote, backslash or newline; check the join Secret" ;;
    esac
done

flags=""
[ -z "${KPSSH_TAINTS:-}" ] || flags+="        - --register-with-taints=$KPSSH_TAINTS"$'\n'
[ -z "${KPSSH_NODE_LABELS:-}" ] || flags+="        - --node-labels=$KPSSH_NODE_LABELS"$'\n'
# --node-ip takes an IP literal only; a host known by a DNS name lets kubelet pick its address.
if [[ "${KPSSH_NODE_ADDRESS:-}" =~ ^[0-9a-fA-F.:]+$ ]]; then
    flags+="        - --node-ip=$KPSSH_NODE_ADDRESS"$'\n'
fi

install -d -m 0700 /etc/nodeadm
# The activation lands in the file through a heredoc (a bash builtin): never on a command line.
(
    umask 077
    cat >"$config.kpssh-tmp" <<CONF
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: $cluster
    region: $region
  hybrid:
    ssm:
      activationId: "$KPSSH_SECRET_ACTIVATIONID"
      activationCode: "$KPSSH_SECRET_ACTIVATIONCODE"
  kubelet:
    flags:
${flags:-        []}
CONF
)
chmod 0600 "$config.kpssh-tmp"
mv -f "$config.kpssh-tmp" "$config"

echo "kpssh: cold join: registering with SSM and initialising the node (consumes one activation)"
nodeadm init -c "file://$config"
systemctl enable containerd kubelet
systemctl is-active --quiet kubelet || die "nodeadm init finished but kubelet is not running"
