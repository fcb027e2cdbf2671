# shellcheck shell=bash
# tests/lib/pool.sh: a pool of lab hosts that join with the shipped tls-bootstrap profile, for
# the shell tests that run kpssh-controller on the lab (sourced after the lab's env.sh and
# tests/lib/ctl.sh, which defines kc). The caller owns clean-up: pool_hosts appends each lab host
# index it adds to the array hosts_added, for the caller's trap to delete.

# SIGTERM (timeout(1) a minute before ctest's timeout, see tests/Lab.cmake) ends the script
# through its EXIT trap, and pool_cleanup knows why: bash hands an EXIT trap run for a signal a
# status of 0, so the signal is noted here.
pool_signal=""
trap 'pool_signal=TERM; exit 143' TERM

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

# pool_setup <prefix> <lab host index>...: the CRDs (once any delete an earlier test started has
# finished: tests/lab/crds.sh says why), the namespaces NS and APPS, the SSH key Secret
# <prefix>-key, the profile <prefix>-tls, the node class <prefix> over host class <prefix>, and
# the SSHHosts <prefix>-1, <prefix>-2, ... for the lab hosts.
pool_setup() {
    local px=$1
    shift
    "$KP_REPO/tests/lab/crds.sh" apply
    kc create namespace "$NS" >/dev/null
    kc create namespace "$APPS" >/dev/null
    kc create secret generic "$px-key" -n "$NS" --from-file=privateKey="$KPSSH_LAB_SSH_KEY" >/dev/null
    pool_profile "$px-tls"
    pool_nodeclass "$px" "$px" "$px-tls"
    pool_hosts "$NS" "$px" "$px-key" "$px" "$@"
}

# pool_nodepool <name> <node class> <policy> <consolidateAfter> <budget nodes> [<team label>]: a
# NodePool of on-demand nodes of the SSHNodeClass, never expiring, with that disruption block
# and, when given, the template label team=<team label> (a change of it drifts the nodes).
pool_nodepool() {
    local meta=""
    [ -n "${6:-}" ] && meta="
    metadata:
      labels: {team: $6}"
    kc apply -f - >/dev/null <<EOF
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: $1}
spec:
  template:$meta
    spec:
      nodeClassRef: {group: karpenter.kpssh.dev, kind: SSHNodeClass, name: $2}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      expireAfter: Never
  disruption:
    consolidationPolicy: $3
    consolidateAfter: $4
    budgets: [{nodes: "$5"}]
EOF
}

# rbac_bound <user> <rules>: kubectl auth can-i says yes to every "<namespace|-> <verb>
# <resource[.group][/name]> <subresource|->" line of the rules file, as that user.
rbac_bound() {
    local ns v r sub args
    while read -r ns v r sub; do
        args=("$v" "$r" "--as=$1")
        if [ "$ns" = - ]; then args+=(-A); else args+=("--namespace=$ns"); fi
        [ "$sub" = - ] || args+=("--subresource=$sub")
        kc auth can-i "${args[@]}" >/dev/null 2>&1 || return 1
    done <"$2"
}

# pool_chart <release>: the e2e tier's credentials. The objects the Helm chart renders for a
# release in NS (helm template, with no CRDs: karpenter.sh's would be rendered too, and deleting
# them again would wipe every NodePool of the lab; NS is also the pool namespace, the chart's
# default) but its Deployment, which the lab has no kubelet to run; a TokenRequest token of the
# chart's ServiceAccount in $work/sa.kubeconfig, once the API server enforces its bindings; and
# the chart Deployment's environment (its literal values) in chart_env. pool_start then runs the
# controller as that Deployment would, with nothing but the chart's RBAC; pool_cleanup deletes
# the objects again.
pool_chart() {
    # shellcheck disable=SC2154 # work: the caller's scratch directory
    "$KPSSH_LAB_BIN/helm" template "$1" "$KP_REPO/deploy/charts/kpssh" -n "$NS" \
        --set crds.install=false --set crds.karpenter=never >"$work/chart.yaml" 2>"$work/helm.err"
    # kubectl prints one JSON document per object: slurped into one array.
    kc create --dry-run=client -o json -f "$work/chart.yaml" | jq -s . >"$work/chart.json"
    jq '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind != "Deployment")]}' \
        "$work/chart.json" >"$work/rbac.json"
    kc apply -f "$work/rbac.json" >/dev/null
    check "the chart renders RBAC for the controller" test "$(jq \
        '[.items[] | select(.kind == "ClusterRole" or .kind == "Role")] | length' "$work/rbac.json")" -ge 2
    # The API server's authorizer learns new bindings from a watch: a controller started at once
    # can be refused its first requests. Wait until every role's rules are the ServiceAccount's.
    jq -r '.items[] | select(.kind == "ClusterRole" or .kind == "Role") | .metadata.namespace as $ns
        | .rules[] | select(.resources and .verbs) | .verbs[0] as $v | (.apiGroups[0] // "") as $g
        | (.resources[0] | split("/")) as [$r, $sub] | select($v != "*" and $r != "*")
        | (if .resourceNames then "/" + .resourceNames[0] else "" end) as $name
        | "\($ns // "-") \($v) \($r)\(if $g == "" then "" else "." + $g end)\($name) \($sub // "-")"' \
        "$work/rbac.json" | sort -u >"$work/rbac.rules"
    check "the chart's RBAC is in force ($(wc -l <"$work/rbac.rules") rules)" \
        wait_until 30 rbac_bound "system:serviceaccount:$NS:$1" "$work/rbac.rules"
    cat >"$work/sa.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: lab
    cluster: {server: $KPSSH_LAB_API_URL, certificate-authority: $KPSSH_LAB_CA}
users:
  - name: sa
    user: {token: $(kc -n "$NS" create token "$1" --duration=1h)}
contexts:
  - name: sa
    context: {cluster: lab, user: sa}
current-context: sa
KUBECONFIG
    chmod 600 "$work/sa.kubeconfig"
    mapfile -t chart_env < <(jq -r '.[] | select(.kind == "Deployment")
        | .spec.template.spec.containers[0].env[] | select(.value != null) | "\(.name)=\(.value)"' \
        "$work/chart.json")
    check "the controller takes the chart Deployment's environment (${#chart_env[@]} values)" \
        test "${#chart_env[@]}" -ge 4
}

# pool_start: starts kpssh-controller ($BIN, one replica) on PORT, logging to $work/ctl.log, with
# its PID in pid_ctl: after pool_chart as the chart's Deployment would run it (its environment,
# the downward API's values by hand, its ServiceAccount's token, leader election on), else with
# the lab's admin kubeconfig and no leader election.
pool_start() {
    # shellcheck disable=SC2154 # work: the caller's scratch directory
    if [ -s "$work/sa.kubeconfig" ]; then
        env "${chart_env[@]}" KPSSH_LEADER_ELECTION_NAMESPACE="$NS" KPSSH_POD_NAME="$NS-0" \
            KPSSH_METRICS_PORT="$PORT" KPSSH_HEALTH_PROBE_PORT="$PORT" \
            "$BIN" --kubeconfig "$work/sa.kubeconfig" --bind-address 127.0.0.1 \
            --probe-interval 5s --probe-timeout 4s --shutdown-timeout 20s >>"$work/ctl.log" 2>&1 &
    else
        "$BIN" --kubeconfig "$KUBECONFIG" --pool-namespace "$NS" --disable-leader-election \
            --bind-address 127.0.0.1 --metrics-port "$PORT" --health-probe-port "$PORT" \
            --probe-interval 5s --probe-timeout 4s --shutdown-timeout 20s >>"$work/ctl.log" 2>&1 &
    fi
    # shellcheck disable=SC2034 # pid_ctl: the caller's, for its clean-up
    pid_ctl=$!
}

# pool_controller <SSHHost>...: pool_start, then checks that the controller is ready and that
# each SSHHost named is probed Available.
pool_controller() {
    local h
    pool_start
    check "the controller is ready" wait_until 60 is_code 200 "http://127.0.0.1:$PORT/readyz"
    for h in "$@"; do
        check "host $h is probed Available" wait_until 90 host_is "$h" Available
    done
}

# pool_deployment <name> <replicas> <cpu> <anti-affinity: yes|no> [<nodepool>]: a Deployment of
# pause pods in APPS, labelled app=<name>, on NodePool NP (or the one named), with a hostname
# anti-affinity among its own pods when asked, and no grace period (an evicted pod is gone at
# once, as the tests count pods).
pool_deployment() {
    local aff=""
    [ "$4" = yes ] && aff="
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {labelSelector: {matchLabels: {app: $1}}, topologyKey: kubernetes.io/hostname}"
    kc apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: $APPS}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      nodeSelector: {karpenter.sh/nodepool: ${5:-$NP}}
      terminationGracePeriodSeconds: 0$aff
      containers:
        - {name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: $3}}}
EOF
}

# pool_cleanup <nodepool>...: a test's clean-up, run by its EXIT trap: kills only what the test
# started (pid_ctl, pid_sample); when a check failed or SIGTERM ended the script (pool_signal,
# ctest's timeout), prints the
# pool as kpssh get pool shows it (KPSSH_CLI_BIN overrides the CLI's path) and the end of the
# controller's log; then deletes APPS, the NodePools, NS and pool_chart's objects and forgets the
# NodePools' NodeClaims and Nodes (pool_forget).
pool_cleanup() {
    local np
    set +e
    trap '' TERM # a timeout arriving now lets the clean-up finish (timeout -k bounds it)
    [ -n "${pid_ctl:-}" ] && kill -KILL "$pid_ctl" 2>/dev/null
    [ -n "${pid_sample:-}" ] && kill -KILL "$pid_sample" 2>/dev/null
    [ -n "$pool_signal" ] && echo "# ended by SIG$pool_signal after ${SECONDS} s: out of time"
    if [ "${fail:-0}" != 0 ] || [ -n "$pool_signal" ]; then
        echo "# --- the pool (kpssh get pool -o wide) ---"
        "${KPSSH_CLI_BIN:-$PWD/../src/kpssh}" get pool -n "$NS" -o wide --no-color \
            --kubeconfig "$KUBECONFIG" 2>&1 | sed 's/^/# /'
        echo "# --- the controller's warnings and errors (the last 40) ---"
        grep -E '"level":"(WARN|ERROR)"' "$work/ctl.log" 2>/dev/null | tail -n 40 | sed 's/^/# /'
        echo "# --- last of the controller's log ---"
        tail -n 120 "$work/ctl.log" 2>/dev/null | sed 's/^/# /'
    fi
    # KP_TEST_KEEP_LOGS=<dir>: the controller's whole log is kept there, named after the test.
    [ -n "${KP_TEST_KEEP_LOGS:-}" ] && [ -s "$work/ctl.log" ] &&
        cp "$work/ctl.log" "$KP_TEST_KEEP_LOGS/$(basename "$0" .sh).ctl.log" 2>/dev/null
    kc delete namespace "$APPS" --ignore-not-found --wait=false >/dev/null 2>&1
    kc delete nodepool "$@" --ignore-not-found --wait=false >/dev/null 2>&1
    for np in "$@"; do pool_forget "$np"; done
    kc delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
    [ -s "$work/rbac.json" ] && kc delete -f "$work/rbac.json" --ignore-not-found --wait=false >/dev/null 2>&1
    rm -rf "$work"
}

# --- what the disruption tests look at -----------------------------------------------------------
# These read the caller's NS (pool namespace), NP (NodePool), APPS (the namespace of the
# Deployment "web" the tests scale) and PORT (the controller's metrics port).
host_state() { kc get sshhost -n "$NS" "$1" -o jsonpath='{.status.state}' 2>/dev/null || true; }
host_is() { [ "$(host_state "$1")" = "$2" ]; }
kubelet_inactive() { ! "$KPSSH_LAB_HOST_SH" exec "$1" systemctl is-active --quiet kubelet; }
claims() { kc get nodeclaims -l karpenter.sh/nodepool="$NP" -o json 2>/dev/null || echo '{"items":[]}'; }
claim_count_is() { [ "$(claims | jq '.items | length')" = "$1" ]; }
cond_count_is() { # cond_count_is <type> <count>: NodeClaims of NP whose condition <type> is True
    [ "$(claims | jq --arg t "$1" '[.items[] | select(any(.status.conditions[]?; .type == $t and .status == "True"))] | length')" = "$2" ]
}
pods_json() { kc get pods -n "$APPS" -l app=web -o json 2>/dev/null || echo '{"items":[]}'; }
running_is() { # running_is <count>: web pods Running and not terminating
    [ "$(pods_json | jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length')" = "$1" ]
}
none_of() { # none_of <kubectl get arguments>: kubectl answers, and with no object
    local out
    out=$(kc get "$@" -o name) && [ -z "$out" ]
}
count_of() { # count_of <kubectl get arguments>: how many objects; fails when kubectl does
    local out
    out=$(kc get "$@" -o name) || return 1
    if [ -z "$out" ]; then echo 0; else wc -l <<<"$out"; fi
}
metric_has() { # metric_has <text> [<more text>]: a series holding both, not at 0
    body "http://127.0.0.1:$PORT/metrics" | grep -F "$1" | grep -F "${2:-}" | grep -qv ' 0$'
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
