#!/usr/bin/env bash
# Integration test of the Helm chart deploy/charts/kpssh against the lab's real API server.
#
#   1. static: the chart's CRDs come from deploy/crds (symbolic link, same specs as rendered);
#      helm lint and helm template for default and non-default values (bootstrapGroup reaches
#      the controller; every KPSSH_* variable is a controller option; node anti-affinity); values files that
#      values.schema.json (or the templates) must reject are rejected with a useful message
#   2. install: helm install into a fresh namespace; CRDs from deploy/crds applied and kept on
#      uninstall; Deployment (Recreate, restricted securityContext, anti-affinity on
#      karpenter.sh/nodepool and the managed label, probes, KPSSH_* env) admitted under the
#      restricted Pod Security level; examples/ apply (server-side dry run) against the real CRDs
#   3. RBAC: a token of the chart's ServiceAccount, used through kubectl --token with nothing
#      else, does every call the controller needs and is refused everything out of scope; the
#      admission policies stop spec writes and foreign kube-system Secrets; auth can-i for breadth
#   4. coexistence: with karpenter.sh CRDs owned by someone else (label owner=other-karpenter), a
#      second install (and upgrade, and uninstall) leaves them untouched
#
# Prints "N passed, M failed"; exits non-zero when anything failed.
set -euo pipefail

: "${KPSSH_LAB_DIR:?run under ctest (label integration), which brings the lab up}"
# shellcheck source=/dev/null
. "$KPSSH_LAB_DIR/env.sh"
REPO="${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}"
CHART="$REPO/deploy/charts/kpssh"
DATA="$REPO/tests/data/chart"
HELM="$KPSSH_LAB_BIN/helm"
KUBECTL=("$KPSSH_LAB_KUBECTL" --kubeconfig "$KUBECONFIG")

NS=kpssh-chart            # release namespace
POOL=kpssh-chart-pool     # pool namespace (distinct, so the pool Role is proven to land there)
OTHER=kpssh-chart-other   # a namespace the controller has no business in
REL=kpssh-t               # release name; fullname, ServiceAccount and Lease are "kpssh-t"
SA_USER="system:serviceaccount:$NS:$REL"

work="$(mktemp -d)"
chmod 700 "$work"

# shellcheck source=../lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# check_eq DESCRIPTION EXPECTED ACTUAL
check_eq() {
    if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (want '$2', got '$3')"; fi
}
k() { "${KUBECTL[@]}" "$@"; }
fails() { ! "$@" >/dev/null 2>&1; } # fails CMD...: true when CMD fails
quiet() { "$@" >/dev/null; }          # quiet CMD...: CMD without its output
# y2j [FILE...]: YAML documents (stdin or files) to one JSON array of objects, Lists flattened.
y2j() {
    python3 -c 'import json, sys, yaml
docs = []
for f in (sys.argv[1:] or ["-"]):
    with (sys.stdin if f == "-" else open(f)) as fh:
        for d in yaml.safe_load_all(fh):
            if isinstance(d, dict):
                docs.extend(d.get("items") or [] if d.get("kind") == "List" else [d])
json.dump(docs, sys.stdout)' "$@"
}
helm_() { "$HELM" --kubeconfig "$KUBECONFIG" "$@" 2>"$work/helm.err"; }
# Helm reports every symbolic link it follows on stderr; keep the rest for failures.
helm_err() { grep -v 'found symbolic link' "$work/helm.err" || true; }

crd_names() { # crd_names GROUP: names of the CRDs of GROUP in deploy/crds
    y2j "$REPO"/deploy/crds/*.yaml | jq -r --arg g "$1" '.[]
        | select(.kind == "CustomResourceDefinition" and .spec.group == $g) | .metadata.name' | sort
}

# Removes every CRD of our two groups (and their objects) from the lab, and waits until they are
# gone: the next test must not apply its CRDs into a delete still in progress.
delete_crds() { "$REPO/tests/lab/crds.sh" delete; }

cleanup() {
    set +e
    "$HELM" --kubeconfig "$KUBECONFIG" uninstall "$REL" -n "$NS" --wait >/dev/null 2>&1
    "$HELM" --kubeconfig "$KUBECONFIG" uninstall "$REL-again" -n "$NS" --wait >/dev/null 2>&1
    k delete node kpssh-chart-fake --ignore-not-found >/dev/null 2>&1
    k -n kube-system delete secret kpssh-chart-victim bootstrap-token-kpcht1 \
        --ignore-not-found >/dev/null 2>&1
    k -n kube-public delete configmap kpssh-chart-other --ignore-not-found >/dev/null 2>&1
    k delete namespace "$NS" "$POOL" "$OTHER" --ignore-not-found --wait=false >/dev/null 2>&1
    if [ -n "${created_kpssh_system:-}" ]; then
        k delete namespace kpssh-system --ignore-not-found --wait=false >/dev/null 2>&1
    fi
    delete_crds >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

if [ ! -x "$HELM" ]; then
    echo "Bail out! no helm at $HELM: run tests/k8s-harness/build.sh" >&2
    exit 1
fi
"$HELM" version --short

# =============================================================================================
# 1. Static checks: CRD source, lint, template, schema
# =============================================================================================

check "files/crds is a symbolic link to deploy/crds" \
    test "$(readlink -f "$CHART/files/crds")" = "$(readlink -f "$REPO/deploy/crds")"
own_crds="$(crd_names karpenter.kpssh.dev)"
karp_crds="$(crd_names karpenter.sh)"
check_eq "deploy/crds has our three CRDs" \
    "sshhosts.karpenter.kpssh.dev sshjoinprofiles.karpenter.kpssh.dev sshnodeclasses.karpenter.kpssh.dev" \
    "$(echo "$own_crds" | xargs)"
has_karpenter_crds() { grep -qx nodepools.karpenter.sh <<<"$karp_crds" && grep -qx nodeclaims.karpenter.sh <<<"$karp_crds"; }
check "deploy/crds has karpenter.sh NodePool and NodeClaim" has_karpenter_crds

check "helm lint (default values)" helm_ lint --quiet "$CHART"
check "helm lint (non-default values)" helm_ lint --quiet "$CHART" -f "$DATA/values-custom.yaml"
check "helm lint --strict" helm_ lint --quiet --strict "$CHART"

if helm_ template "$REL" "$CHART" -n "$NS" >"$work/default.yaml"; then
    ok "helm template (default values)"
else
    not_ok "helm template (default values): $(helm_err)"
fi
if helm_ template "$REL" "$CHART" -n "$NS" -f "$DATA/values-custom.yaml" >"$work/custom.yaml"; then
    ok "helm template (non-default values)"
else
    not_ok "helm template (non-default values): $(helm_err)"
fi
y2j "$work/default.yaml" >"$work/default.json"
y2j "$work/custom.yaml" >"$work/custom.json"

# A packaged chart carries the CRD files themselves (helm package follows the link).
packaged_crds() {
    helm_ package "$CHART" -d "$work/pkg" >/dev/null &&
        helm_ template "$REL" "$work"/pkg/kpssh-*.tgz -n "$NS" | y2j |
        jq -r '[.[] | select(.kind == "CustomResourceDefinition") | .metadata.name] | sort | join(" ")'
}
check_eq "helm package: the packaged chart renders every CRD" \
    "$(echo "$own_crds $karp_crds" | xargs -n1 | sort | xargs)" "$(packaged_crds)"

kinds() { jq -r '[.[].kind] | sort | unique | join(",")' "$1"; }
check_eq "default render: object kinds" \
    "ClusterRole,ClusterRoleBinding,CustomResourceDefinition,Deployment,Role,RoleBinding,ServiceAccount,ValidatingAdmissionPolicy,ValidatingAdmissionPolicyBinding" \
    "$(kinds "$work/default.json")"
check_eq "non-default render: object kinds" \
    "ClusterRole,ClusterRoleBinding,Deployment,NetworkPolicy,PodDisruptionBudget,Role,RoleBinding,Service,ServiceAccount,ServiceMonitor" \
    "$(kinds "$work/custom.json")"
# Every CRD of deploy/crds is rendered with the same spec (the chart never carries a stale copy).
y2j "$REPO"/deploy/crds/*.yaml | jq -S '[.[] | select(.kind == "CustomResourceDefinition")]
    | map({(.metadata.name): .spec}) | add' >"$work/src-crds.json"
jq -S '[.[] | select(.kind == "CustomResourceDefinition")] | map({(.metadata.name): .spec}) | add' \
    "$work/default.json" >"$work/rendered-crds.json"
check "rendered CRD specs equal deploy/crds" cmp -s "$work/src-crds.json" "$work/rendered-crds.json"
check_eq "rendered CRDs carry helm.sh/resource-policy: keep" "keep" \
    "$(jq -r '[.[] | select(.kind == "CustomResourceDefinition")
        | .metadata.annotations["helm.sh/resource-policy"]] | unique | join(",")' "$work/default.json")"

dep() { jq -r "[.[] | select(.kind == \"Deployment\")][0] | $1" "$2"; }
check_eq "non-default: digest overrides tag" \
    "registry.example.internal/kpssh/kpssh-controller@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" \
    "$(dep '.spec.template.spec.containers[0].image' "$work/custom.json")"
check_eq "non-default: pool namespace reaches env and the secrets Role" "kpssh-pool kpssh-pool" \
    "$(dep '.spec.template.spec.containers[0].env[] | select(.name == "KPSSH_POOL_NAMESPACE") | .value' "$work/custom.json") $(jq -r '.[] | select(.kind == "Role" and (.metadata.name | endswith("-pool-secrets"))) | .metadata.namespace' "$work/custom.json")"
check_eq "non-default: ports, log level, extra env" "9090 9091 debug 1" \
    "$(dep '[.spec.template.spec.containers[0].ports[].containerPort | tostring] | join(" ")' "$work/custom.json") $(dep '.spec.template.spec.containers[0].env | map({(.name): .}) | add | "\(.KPSSH_LOG_LEVEL.value) \(.KPSSH_EXTRA.value)"' "$work/custom.json")"
# The admission policy lets the controller create only tokens of bootstrapGroup, so the
# controller must be told the same group, or every join's token is refused.
check_eq "non-default: bootstrapGroup reaches the controller's env and the admission policy" \
    "system:bootstrappers:team-a true" \
    "$(dep '.spec.template.spec.containers[0].env[] | select(.name == "KPSSH_BOOTSTRAP_GROUP") | .value' "$work/custom.json") $(helm_ template "$REL" "$CHART" -n "$NS" -f "$DATA/values-custom.yaml" --set admissionPolicy.enabled=true | grep -qF "$(printf %s system:bootstrappers:team-a | base64 -w0)" && echo true || echo false)"
# Every KPSSH_* variable the chart sets is an option of the built controller (its --help lists
# each one's env name): a name the controller does not read would be ignored without a word.
controller_envs() { "$KPSSH_CONTROLLER_BIN" --help | sed -n 's/^ *env \(KPSSH_[A-Z0-9_]*\).*/\1/p' | sort -u; }
chart_envs() { # chart_envs FILE: the chart's own KPSSH_* env names (controller.env extras left out)
    dep '.spec.template.spec.containers[0].env[].name | select(startswith("KPSSH_")) | select(. != "KPSSH_EXTRA")' "$1" | sort -u
}
unknown_envs() {
    comm -23 <({ chart_envs "$work/default.json"; chart_envs "$work/custom.json"; } | sort -u) \
        <(controller_envs) | xargs
}
if [ -x "${KPSSH_CONTROLLER_BIN:-}" ]; then
    check_eq "every KPSSH_* variable the chart sets is a controller option" "" "$(unknown_envs)"
else
    not_ok "no KPSSH_CONTROLLER_BIN to compare the chart's variables with (run under ctest)"
fi
# Node anti-affinity: off every node a NodePool made (upstream's rule, which holds for NodePools
# used unchanged) and off nodes with kpssh's managed label.
check_eq "default render: required node anti-affinity on karpenter.sh/nodepool and the managed label" \
    "karpenter.sh/nodepool DoesNotExist,karpenter.kpssh.dev/managed DoesNotExist" \
    "$(dep '[.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[] | .matchExpressions[] | "\(.key) \(.operator)"] | join(",")' "$work/default.json")"
check_eq "avoidManagedNodes=false renders no affinity" "null" \
    "$(helm_ template "$REL" "$CHART" -n "$NS" --set avoidManagedNodes=false | y2j | jq -c '[.[] | select(.kind == "Deployment")][0].spec.template.spec.affinity')"
check_eq "non-default: extra ClusterRole rule appended" "kpssh-extra" \
    "$(jq -r '.[] | select(.kind == "ClusterRole") | .rules[-1].resourceNames[0]' "$work/custom.json")"
check_eq "non-default: NetworkPolicy egress to API, SSH ports 22 and 2222" "6443|22,2222" \
    "$(jq -r '.[] | select(.kind == "NetworkPolicy") | .spec.egress | "\([.[1].ports[].port] | join(","))|\([.[2].ports[].port] | join(","))"' "$work/custom.json")"

# Selection of the CRDs.
rendered_crds() { # rendered_crds HELM-ARGS...: names of the CRDs rendered
    helm_ template "$REL" "$CHART" -n "$NS" "$@" >"$work/sel.yaml" || return 1
    y2j "$work/sel.yaml" | jq -r '[.[] | select(.kind == "CustomResourceDefinition")
        | .metadata.name] | sort | join(" ")'
}
check_eq "crds.karpenter=never renders only ours" "$(echo "$own_crds" | xargs)" \
    "$(rendered_crds --set crds.karpenter=never)"
check_eq "crds.install=false renders only karpenter.sh (auto, nothing to look up)" \
    "$(echo "$karp_crds" | xargs)" "$(rendered_crds --set crds.install=false)"

# Rejected values.
reject() { # reject DESCRIPTION FILE EXPECTED-MESSAGE-PART...
    local desc="$1" file="$2"
    shift 2
    if helm_ template "$REL" "$CHART" -f "$DATA/$file" >/dev/null; then
        not_ok "$desc: accepted"
        return
    fi
    local m
    for m in "$@"; do
        if ! grep -qF -- "$m" "$work/helm.err"; then
            not_ok "$desc: message lacks '$m': $(helm_err)"
            return
        fi
    done
    ok "$desc"
}
reject "schema rejects an unknown key" invalid-unknown-key.yaml "additional properties 'replica' not allowed"
reject "schema rejects allowPrivilegeEscalation: true" invalid-privileged.yaml \
    "/securityContext/allowPrivilegeEscalation"
reject "schema rejects bad enum, type and duration" invalid-types.yaml \
    "/controller/metricsPort" "/crds/karpenter" "/settings/logLevel" "/bootstrapGroup"
reject "template rejects minAvailable >= replicas" invalid-pdb.yaml "must be lower than replicas"
check "helm lint fails on a schema violation" fails "$HELM" lint "$CHART" -f "$DATA/invalid-unknown-key.yaml"

# =============================================================================================
# 2. Install
# =============================================================================================

leftover="$(k get crd -o name | grep -E '\.karpenter\.(sh|kpssh\.dev)$' || true)"
if [ -n "$leftover" ]; then
    echo "# removing CRDs another test left behind: $(echo "$leftover" | xargs)"
    delete_crds
fi
k create namespace "$NS" >/dev/null
k create namespace "$POOL" >/dev/null
k create namespace "$OTHER" >/dev/null
# The release namespace enforces the restricted Pod Security level: the pod must be admitted.
k label namespace "$NS" pod-security.kubernetes.io/enforce=restricted >/dev/null

if helm_ install "$REL" "$CHART" -n "$NS" --set poolNamespace="$POOL" >"$work/install.out"; then
    ok "helm install"
else
    not_ok "helm install: $(helm_err)"
fi
check "NOTES say the karpenter.sh CRDs were installed" \
    grep -q 'karpenter.sh CRDs: installed by this release' "$work/install.out"

for c in $own_crds $karp_crds; do
    check "CRD $c established" \
        quiet k wait --for=condition=Established "crd/$c" --timeout=60s
done
check_eq "CRDs belong to the release and are kept on uninstall" "$REL keep" \
    "$(k get crd sshhosts.karpenter.kpssh.dev -o json | jq -r '"\(.metadata.annotations["meta.helm.sh/release-name"]) \(.metadata.annotations["helm.sh/resource-policy"])"')"

k -n "$NS" get deployment "$REL" -o json >"$work/deploy.json"
d() { jq -r "$1" "$work/deploy.json"; }
check_eq "Deployment: 1 replica, Recreate" "1 Recreate" "$(d '"\(.spec.replicas) \(.spec.strategy.type)"')"
check_eq "pod securityContext: runAsNonRoot, seccomp RuntimeDefault" "true RuntimeDefault" \
    "$(d '.spec.template.spec.securityContext | "\(.runAsNonRoot) \(.seccompProfile.type)"')"
check_eq "container securityContext: no escalation, read-only root, drop ALL, seccomp" \
    "false true ALL RuntimeDefault" \
    "$(d '.spec.template.spec.containers[0].securityContext | "\(.allowPrivilegeEscalation) \(.readOnlyRootFilesystem) \(.capabilities.drop | join(",")) \(.seccompProfile.type)"')"
check_eq "required node anti-affinity on karpenter.sh/nodepool and karpenter.kpssh.dev/managed" \
    "karpenter.sh/nodepool DoesNotExist,karpenter.kpssh.dev/managed DoesNotExist" \
    "$(d '[.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[] | "\(.key) \(.operator)"] | join(",")')"
check_eq "probes: readiness /readyz, liveness /healthz on http-probes (8081)" \
    "/readyz http-probes /healthz http-probes 8081" \
    "$(d '.spec.template.spec.containers[0] | "\(.readinessProbe.httpGet.path) \(.readinessProbe.httpGet.port) \(.livenessProbe.httpGet.path) \(.livenessProbe.httpGet.port) \(.ports[] | select(.name == "http-probes") | .containerPort)"')"
check_eq "env: pool namespace, per-release lease name, log level, bootstrap group" \
    "$POOL $REL info system:bootstrappers:kpssh" \
    "$(d '.spec.template.spec.containers[0].env | map({(.name): .value}) | add | "\(.KPSSH_POOL_NAMESPACE) \(.KPSSH_LEADER_ELECTION_NAME) \(.KPSSH_LOG_LEVEL) \(.KPSSH_BOOTSTRAP_GROUP)"')"
check_eq "runs as ServiceAccount $REL" "$REL" "$(d '.spec.template.spec.serviceAccountName')"
# The ReplicaSet's pod passes the restricted level (it stays Pending: the lab has no node for it).
pod_ok=false
for _ in $(seq 60); do
    if [ -n "$(k -n "$NS" get pods -l app.kubernetes.io/instance="$REL" -o name)" ]; then
        pod_ok=true
        break
    fi
    sleep 0.5
done
check "controller pod admitted under Pod Security 'restricted'" $pod_ok
check_eq "no Service, ServiceMonitor, PDB or NetworkPolicy by default" "0" \
    "$(k -n "$NS" get service,poddisruptionbudget,networkpolicy -l app.kubernetes.io/instance="$REL" -o name | wc -l)"

# examples/ against the real CRDs (server-side dry run validates schemas and CEL).
if ! k get namespace kpssh-system >/dev/null 2>&1; then
    k create namespace kpssh-system >/dev/null
    created_kpssh_system=1
fi
for f in "$REPO"/examples/*.yaml; do
    if k apply --dry-run=server -f "$f" >"$work/ex.out" 2>&1; then
        ok "example $(basename "$f") applies (server dry run)"
    else
        not_ok "example $(basename "$f"): $(cat "$work/ex.out")"
    fi
done
example_json() { y2j "$REPO/examples/$1" | jq '.[0]'; }
examples_label_and_taint() {
    example_json nodepool.yaml | jq -e '.spec.template.metadata.labels["karpenter.kpssh.dev/managed"] == "true"' >/dev/null &&
        example_json nodepool-coexist.yaml | jq -e '.spec.template.metadata.labels["karpenter.kpssh.dev/managed"] == "true"
            and .spec.template.spec.taints[0].key == "karpenter.kpssh.dev/pool"
            and .spec.template.spec.taints[0].effect == "NoSchedule"' >/dev/null
}
check "examples: both NodePools carry the managed label; ssh-pool the pool taint" examples_label_and_taint

# An upgrade of a release that owns the karpenter.sh CRDs keeps rendering them.
if helm_ upgrade "$REL" "$CHART" -n "$NS" --reuse-values >/dev/null; then
    ok "helm upgrade"
else
    not_ok "helm upgrade: $(helm_err)"
fi
check_eq "after upgrade the release still owns both CRD groups" \
    "$(echo "$own_crds $karp_crds" | xargs -n1 | sort | xargs)" \
    "$(helm_ get manifest "$REL" -n "$NS" | y2j |
        jq -r '[.[] | select(.kind == "CustomResourceDefinition") | .metadata.name] | sort | join(" ")')"

# =============================================================================================
# 3. RBAC: the chart's ServiceAccount with nothing but the chart's RBAC
# =============================================================================================

token="$(k -n "$NS" create token "$REL" --duration=15m)"
cat >"$work/sa.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: lab
    cluster:
      server: $KPSSH_LAB_API_URL
      certificate-authority: $KPSSH_LAB_CA
users:
  - name: sa
    user:
      token: $token
contexts:
  - name: sa
    context: {cluster: lab, user: sa}
current-context: sa
EOF
chmod 600 "$work/sa.kubeconfig"
sa() { "$KPSSH_LAB_KUBECTL" --kubeconfig "$work/sa.kubeconfig" "$@"; }
check_eq "the token is the chart's ServiceAccount" "$SA_USER" \
    "$(sa auth whoami -o json | jq -r .status.userInfo.username)"

# Objects the calls act on, written as admin.
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
metadata: {name: pool-key, namespace: $POOL}
stringData: {privateKey: not-a-key}
---
apiVersion: v1
kind: Secret
metadata: {name: other-secret, namespace: $OTHER}
stringData: {k: v}
---
apiVersion: v1
kind: Secret
metadata: {name: release-ns-secret, namespace: $NS}
stringData: {k: v}
---
apiVersion: v1
kind: Secret
metadata: {name: kpssh-chart-victim, namespace: kube-system}
stringData: {k: v}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kpssh-chart-other, namespace: kube-public}
data: {k: v}
---
apiVersion: v1
kind: Pod
metadata: {name: evict-me, namespace: $OTHER}
spec:
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
---
apiVersion: v1
kind: Node
metadata: {name: kpssh-chart-fake}
---
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHHost
metadata: {name: h1, namespace: $POOL}
spec:
  address: 10.213.250.21
  sshKeySecretRef: {name: pool-key}
  capacity: {cpu: "2", memory: 4Gi}
---
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHJoinProfile
metadata: {name: chart-test}
spec:
  scripts: {install: "true", join: "true", leave: "true"}
---
apiVersion: karpenter.kpssh.dev/v1beta1
kind: SSHNodeClass
metadata: {name: chart-test}
spec:
  joinProfileRef: {name: chart-test}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: chart-test}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: chart-test}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
EOF
cat >"$work/nodeclaim.yaml" <<'EOF'
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: chart-test-abcde
  labels: {karpenter.sh/nodepool: chart-test}
spec:
  nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: chart-test}
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [small]}
EOF
cat >"$work/token.yaml" <<'EOF'
apiVersion: v1
kind: Secret
metadata: {name: bootstrap-token-kpcht1, namespace: kube-system}
type: bootstrap.kubernetes.io/token
stringData:
  token-id: kpcht1
  token-secret: 0123456789abcdef
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: system:bootstrappers:kpssh
  expiration: "2099-01-01T00:00:00Z"
  description: kpssh nodeclaim chart-test-abcde
EOF
sed -e 's/bootstrap-token-kpcht1/bootstrap-token-kpcht2/; s/kpcht1/kpcht2/' \
    -e 's/system:bootstrappers:kpssh/system:bootstrappers:kubeadm:default-node-token/' \
    "$work/token.yaml" >"$work/token-other-group.yaml"
cat >"$work/plain-secret.yaml" <<'EOF'
apiVersion: v1
kind: Secret
metadata: {name: kpssh-chart-plain, namespace: kube-system}
stringData: {k: v}
EOF
cat >"$work/event.yaml" <<EOF
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: h1.chart-test, namespace: $POOL}
eventTime: "2026-01-01T00:00:00.000000Z"
reportingController: karpenter.kpssh.dev/controller
reportingInstance: kpssh-t-0
action: Probe
reason: ProbeSucceeded
type: Normal
note: chart test
regarding: {apiVersion: karpenter.kpssh.dev/v1beta1, kind: SSHHost, namespace: $POOL, name: h1}
EOF
cat >"$work/eviction.json" <<EOF
{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"evict-me","namespace":"$OTHER"}}
EOF
cat >"$work/lease.yaml" <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: $REL, namespace: $NS}
spec: {holderIdentity: kpssh-t-0, leaseDurationSeconds: 15}
EOF
sed "s/name: $REL,/name: someone-elses-lease,/" "$work/lease.yaml" >"$work/lease-other.yaml"
k apply -f "$work/lease-other.yaml" >/dev/null

# RBAC reaches the authorizer's cache after a moment: wait until the first allowed call works.
for _ in $(seq 50); do
    sa get sshhosts -n "$POOL" >/dev/null 2>&1 && break
    sleep 0.2
done

# allow DESCRIPTION KUBECTL-ARGS...: the call succeeds with the token.
allow() {
    local desc="$1"
    shift
    if sa "$@" >"$work/sa.out" 2>&1; then
        ok "allowed: $desc"
    else
        not_ok "allowed: $desc: $(head -c 400 "$work/sa.out")"
    fi
}
# deny DESCRIPTION PATTERN KUBECTL-ARGS...: the call fails with a message matching PATTERN
# (Forbidden from RBAC, or the admission policy's text).
deny() {
    local desc="$1" pat="$2"
    shift 2
    if sa "$@" >"$work/sa.out" 2>&1; then
        not_ok "denied: $desc: the call succeeded"
    elif grep -qE -- "$pat" "$work/sa.out"; then
        ok "denied: $desc"
    else
        not_ok "denied: $desc: failed for another reason: $(head -c 400 "$work/sa.out")"
    fi
}
FORBIDDEN='Forbidden|forbidden'
# allow_req DESCRIPTION METHOD PATH BODY: one request exactly as the controller makes it (kubectl
# patch would GET the object first, which the controller never does and RBAC need not allow).
allow_req() {
    local code
    code="$(curl -sS --cacert "$KPSSH_LAB_CA" -H "Authorization: Bearer $token" -X "$2" \
        -H 'Content-Type: application/merge-patch+json' --data-binary "$4" -o "$work/sa.out" \
        -w '%{http_code}' "$KPSSH_LAB_API_URL$3")" || code=000
    case "$code" in
    2??) ok "allowed: $1" ;;
    *) not_ok "allowed: $1: HTTP $code $(head -c 400 "$work/sa.out")" ;;
    esac
}

# --- reads: list and watch of everything the informers cache ---
for r in pods nodes poddisruptionbudgets.policy daemonsets.apps persistentvolumeclaims \
    persistentvolumes namespaces storageclasses.storage.k8s.io csinodes.storage.k8s.io \
    nodepools.karpenter.sh nodeclaims.karpenter.sh sshhosts.karpenter.kpssh.dev \
    sshnodeclasses.karpenter.kpssh.dev sshjoinprofiles.karpenter.kpssh.dev; do
    allow "list $r (all namespaces)" get "$r" -A
done
for p in /api/v1/pods /api/v1/nodes /apis/policy/v1/poddisruptionbudgets \
    /apis/apps/v1/daemonsets /apis/karpenter.sh/v1/nodepools /apis/karpenter.sh/v1/nodeclaims \
    /apis/karpenter.kpssh.dev/v1beta1/sshhosts /apis/karpenter.kpssh.dev/v1beta1/sshnodeclasses \
    /apis/karpenter.kpssh.dev/v1beta1/sshjoinprofiles; do
    allow "watch $p" get --raw "$p?watch=1&timeoutSeconds=1"
done

# --- writes the controller makes ---
allow "create a NodeClaim" create -f "$work/nodeclaim.yaml"
allow "patch a NodeClaim (labels)" patch nodeclaim chart-test-abcde --type=merge \
    -p '{"metadata":{"annotations":{"karpenter.kpssh.dev/nodeclass-hash":"0123456789abcdef"}}}'
allow "patch nodeclaims/status" patch nodeclaim chart-test-abcde --subresource=status \
    --type=merge -p '{"status":{"providerID":"kpssh://kpssh-chart-pool/h1"}}'
allow "delete a NodeClaim" delete nodeclaim chart-test-abcde --wait=false
KP=/apis/karpenter.kpssh.dev/v1beta1
allow_req "patch sshhosts/status (claim lock)" PATCH "$KP/namespaces/$POOL/sshhosts/h1/status" \
    '{"status":{"state":"Available"}}'
allow_req "patch sshnodeclasses/status" PATCH "$KP/sshnodeclasses/chart-test/status" \
    '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}'
allow "add the SSHNodeClass termination finalizer" patch sshnodeclass chart-test --type=merge \
    -p '{"metadata":{"finalizers":["karpenter.kpssh.dev/termination"]}}'
allow "remove the SSHNodeClass finalizer" patch sshnodeclass chart-test --type=merge \
    -p '{"metadata":{"finalizers":null}}'
allow_req "patch nodepools/status" PATCH /apis/karpenter.sh/v1/nodepools/chart-test/status \
    '{"status":{"resources":{"cpu":"0"}}}'
allow "get a Secret in the pool namespace" get secret pool-key -n "$POOL"
allow "create a bootstrap token in kube-system" create -f "$work/token.yaml"
allow "delete that bootstrap token" delete secret bootstrap-token-kpcht1 -n kube-system
allow "get kube-public/cluster-info" get configmap cluster-info -n kube-public
allow "create an Event (events.k8s.io)" create -f "$work/event.yaml"
allow_req "patch that Event (series)" PATCH "/apis/events.k8s.io/v1/namespaces/$POOL/events/h1.chart-test" \
    '{"series":{"count":2,"lastObservedTime":"2026-01-01T00:00:10.000000Z"}}'
allow "create pods/eviction" create --raw "/api/v1/namespaces/$OTHER/pods/evict-me/eviction" \
    -f "$work/eviction.json"
allow "patch a Node (taint)" patch node kpssh-chart-fake --type=merge \
    -p '{"spec":{"taints":[{"key":"karpenter.sh/disrupted","effect":"NoSchedule"}]}}'
allow "create its leader-election Lease" create -f "$work/lease.yaml"
allow "get its Lease" get lease "$REL" -n "$NS"
allow "update its Lease" replace -f "$work/lease.yaml"
allow "list/watch node Leases" get --raw "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=1&timeoutSeconds=1"
allow "delete a Node after leave" delete node kpssh-chart-fake --wait=false

# --- out of scope ---
deny "get a Secret in another namespace" "$FORBIDDEN" get secret other-secret -n "$OTHER"
deny "get a Secret in the release namespace (not the pool)" "$FORBIDDEN" \
    get secret release-ns-secret -n "$NS"
deny "list Secrets cluster-wide" "$FORBIDDEN" get secrets -A
deny "list Secrets in the pool namespace (get only)" "$FORBIDDEN" get secrets -n "$POOL"
deny "watch Secrets in the pool namespace" "$FORBIDDEN" \
    get --raw "/api/v1/namespaces/$POOL/secrets?watch=1&timeoutSeconds=1"
deny "get a Secret in kube-system (create/delete only)" "$FORBIDDEN" \
    get secret kpssh-chart-victim -n kube-system
deny "update an SSHHost spec" "$FORBIDDEN" patch sshhost h1 -n "$POOL" --type=merge \
    -p '{"spec":{"port":2222}}'
deny "create an SSHHost" "$FORBIDDEN" create -f "$REPO/examples/host.yaml"
deny "delete an SSHHost" "$FORBIDDEN" delete sshhost h1 -n "$POOL"
deny "update an SSHJoinProfile" "$FORBIDDEN" patch sshjoinprofile chart-test --type=merge \
    -p '{"spec":{"version":"2"}}'
deny "create an SSHJoinProfile" "$FORBIDDEN" create -f "$REPO/profiles/tls-bootstrap/profile.yaml"
deny "create a Node" "$FORBIDDEN" create -f - <<<'{"apiVersion":"v1","kind":"Node","metadata":{"name":"kpssh-chart-made"}}'
deny "update a Node (PUT)" "$FORBIDDEN|not found" replace -f - <<<'{"apiVersion":"v1","kind":"Node","metadata":{"name":"kpssh-chart-fake"}}'
deny "get a ConfigMap in kube-public other than cluster-info" "$FORBIDDEN" \
    get configmap kpssh-chart-other -n kube-public
deny "list ConfigMaps in kube-public" "$FORBIDDEN" get configmaps -n kube-public
deny "create a Pod" "$FORBIDDEN" run kpssh-chart-pod -n "$OTHER" --image=registry.k8s.io/pause:3.10
deny "update another Lease in the release namespace" "$FORBIDDEN" replace -f "$work/lease-other.yaml"
deny "create a ClusterRoleBinding" "$FORBIDDEN" create clusterrolebinding kpssh-chart-escalate \
    --clusterrole=cluster-admin --serviceaccount="$NS:$REL"
# What RBAC must grant but the admission policies narrow.
deny "change an SSHNodeClass spec (admission policy)" "may change only the metadata and status" \
    patch sshnodeclass chart-test --type=merge -p '{"spec":{"pricePerCPUHour":"9"}}'
deny "change a NodePool spec (admission policy)" "may change only the metadata and status" \
    patch nodepool chart-test --type=merge -p '{"spec":{"weight":50}}'
deny "create a non-token Secret in kube-system (admission policy)" "only create and delete its own bootstrap tokens" \
    create -f "$work/plain-secret.yaml"
deny "create a token for another bootstrap group (admission policy)" "only create and delete its own bootstrap tokens" \
    create -f "$work/token-other-group.yaml"
deny "delete another Secret in kube-system (admission policy)" "only create and delete its own bootstrap tokens" \
    delete secret kpssh-chart-victim -n kube-system
check "the victim Secret survived" quiet k get secret kpssh-chart-victim -n kube-system

# --- breadth: auth can-i (as the ServiceAccount, through the admin's impersonation) ---
# Each line: the arguments of `kubectl auth can-i`.
can() { k auth can-i --as="$SA_USER" "$@" >/dev/null 2>&1; }
while read -ra args; do
    [ "${#args[@]}" -gt 0 ] || continue
    check "can-i yes: ${args[*]}" can "${args[@]}"
done <<EOF
list pods
watch pods
delete pods -n $OTHER
create pods --subresource=eviction -n $OTHER
watch nodes
patch nodes
delete nodes
watch persistentvolumes
watch persistentvolumeclaims
watch namespaces
watch daemonsets.apps
watch statefulsets.apps
watch replicasets.apps
watch deployments.apps
watch poddisruptionbudgets.policy
watch storageclasses.storage.k8s.io
watch csinodes.storage.k8s.io
watch volumeattachments.storage.k8s.io
create events -n $POOL
patch events -n $POOL
create events.events.k8s.io -n $POOL
patch events.events.k8s.io -n $POOL
watch nodepools.karpenter.sh
patch nodepools.karpenter.sh
update nodepools.karpenter.sh --subresource=status
watch nodeclaims.karpenter.sh
create nodeclaims.karpenter.sh
update nodeclaims.karpenter.sh
delete nodeclaims.karpenter.sh
update nodeclaims.karpenter.sh --subresource=status
watch sshhosts.karpenter.kpssh.dev
update sshhosts.karpenter.kpssh.dev --subresource=status -n $POOL
patch sshhosts.karpenter.kpssh.dev --subresource=status -n $POOL
watch sshnodeclasses.karpenter.kpssh.dev
update sshnodeclasses.karpenter.kpssh.dev
update sshnodeclasses.karpenter.kpssh.dev --subresource=status
watch sshjoinprofiles.karpenter.kpssh.dev
get secrets/pool-key -n $POOL
create secrets -n kube-system
delete secrets/bootstrap-token-abcdef -n kube-system
get configmaps/cluster-info -n kube-public
create leases.coordination.k8s.io -n $NS
get leases.coordination.k8s.io/$REL -n $NS
update leases.coordination.k8s.io/$REL -n $NS
watch leases.coordination.k8s.io -n kube-node-lease
EOF
while read -ra args; do
    [ "${#args[@]}" -gt 0 ] || continue
    check "can-i no: ${args[*]}" fails can "${args[@]}"
done <<EOF
get secrets -n $OTHER
get secrets -n $NS
list secrets -A
list secrets -n $POOL
watch secrets -n $POOL
create secrets -n $POOL
update secrets -n $POOL
get secrets -n kube-system
list secrets -n kube-system
update secrets -n kube-system
list configmaps -A
get configmaps/kubeadm-config -n kube-public
get configmaps -n kube-system
create nodes
update nodes
create pods -n $OTHER
update pods -n $OTHER
create pods --subresource=exec -n $OTHER
create sshhosts.karpenter.kpssh.dev -n $POOL
update sshhosts.karpenter.kpssh.dev -n $POOL
patch sshhosts.karpenter.kpssh.dev -n $POOL
delete sshhosts.karpenter.kpssh.dev -n $POOL
get sshhosts.karpenter.kpssh.dev --subresource=status -n $POOL
create sshjoinprofiles.karpenter.kpssh.dev
update sshjoinprofiles.karpenter.kpssh.dev
patch sshjoinprofiles.karpenter.kpssh.dev
delete sshjoinprofiles.karpenter.kpssh.dev
create sshnodeclasses.karpenter.kpssh.dev
delete sshnodeclasses.karpenter.kpssh.dev
create nodepools.karpenter.sh
delete nodepools.karpenter.sh
update leases.coordination.k8s.io/other-lease -n $NS
delete leases.coordination.k8s.io/$REL -n $NS
create serviceaccounts/$REL --subresource=token -n $NS
create certificatesigningrequests.certificates.k8s.io
update customresourcedefinitions.apiextensions.k8s.io
create rolebindings.rbac.authorization.k8s.io -n $POOL
impersonate users
* *
EOF

# =============================================================================================
# 4. Coexistence: karpenter.sh CRDs owned by another Karpenter
# =============================================================================================

if helm_ uninstall "$REL" -n "$NS" --wait >/dev/null; then
    ok "helm uninstall"
else
    not_ok "helm uninstall: $(helm_err)"
fi
check_eq "uninstall removed the chart's objects" "0" \
    "$(k get clusterrole,clusterrolebinding,validatingadmissionpolicy -o name | grep -c "/$REL" || true)"
check_eq "uninstall kept every CRD (resource-policy keep) and the SSHHost" "6" \
    "$({ for c in $own_crds $karp_crds; do k get crd "$c" -o name; done; k get sshhost h1 -n "$POOL" -o name; } 2>/dev/null | wc -l)"

# A cluster where someone else installed the karpenter.sh CRDs.
delete_crds
for f in "$REPO"/deploy/crds/karpenter.sh_*.yaml; do
    k create -f "$f" >/dev/null
done
# shellcheck disable=SC2086 # one word per CRD
k label crd $karp_crds owner=other-karpenter >/dev/null
for c in $karp_crds; do
    k wait --for=condition=Established "crd/$c" --timeout=60s >/dev/null
done
snapshot() { # uid, resourceVersion, labels and annotations of the karpenter.sh CRDs
    local c
    for c in $karp_crds; do
        k get crd "$c" -o json --show-managed-fields | jq -c '{n: .metadata.name, uid: .metadata.uid,
            rv: .metadata.resourceVersion, l: .metadata.labels, a: (.metadata.annotations // {}),
            m: [.metadata.managedFields[].manager] | unique}'
    done
}
before="$(snapshot)"

REL2="$REL-again"
if helm_ install "$REL2" "$CHART" -n "$NS" --set poolNamespace="$POOL" >"$work/install2.out"; then
    ok "second install with foreign karpenter.sh CRDs"
else
    not_ok "second install with foreign karpenter.sh CRDs: $(helm_err)"
fi
check "NOTES say the karpenter.sh CRDs were left alone" \
    grep -q 'karpenter.sh CRDs: left alone (owned by someone else' "$work/install2.out"
manifest_crds() {
    helm_ get manifest "$REL2" -n "$NS" | y2j |
        jq -r '[.[] | select(.kind == "CustomResourceDefinition") | .metadata.name] | sort | join(" ")'
}
check_eq "the release holds only our CRDs" "$(echo "$own_crds" | xargs)" "$(manifest_crds)"
check_eq "foreign karpenter.sh CRDs untouched by install (uid, resourceVersion, labels, managers)" \
    "$before" "$(snapshot)"
for c in $own_crds; do
    check "our CRD $c installed by the second release" \
        quiet k wait --for=condition=Established "crd/$c" --timeout=60s
done
if helm_ upgrade "$REL2" "$CHART" -n "$NS" --reuse-values --set settings.logLevel=debug >/dev/null; then
    ok "helm upgrade of the second release"
else
    not_ok "helm upgrade of the second release: $(helm_err)"
fi
check_eq "foreign karpenter.sh CRDs untouched by upgrade" "$before" "$(snapshot)"
check "crds.karpenter=always refuses to adopt the foreign CRDs" fails "$HELM" --kubeconfig "$KUBECONFIG" \
    upgrade "$REL2" "$CHART" -n "$NS" --reuse-values --set crds.karpenter=always
check_eq "foreign karpenter.sh CRDs untouched by the refused upgrade" "$before" "$(snapshot)"
if helm_ uninstall "$REL2" -n "$NS" --wait >/dev/null; then
    ok "helm uninstall of the second release"
else
    not_ok "helm uninstall of the second release: $(helm_err)"
fi
check_eq "foreign karpenter.sh CRDs untouched by uninstall" "$before" "$(snapshot)"
check_eq "no release left in $NS" "" "$(helm_ list -n "$NS" -q)"

tap_done
