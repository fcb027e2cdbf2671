#!/usr/bin/env bash
# Build the pinned upstream Kubernetes test binaries (test tooling only,
# never shipped) into <repo>/_out/k8s/bin:
#   etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubemark
#   hollow-node (from this module, in one `go build`), helm (second module).
# Idempotent: a stamp over the inputs (go.mod, go.sum, Go sources, this
# script, go version) skips the build when nothing changed.
#
# Env: GO (default: go on PATH, else /usr/local/go/bin/go)
#      KPSSH_BUILD_JOBS (go build -p, default 2)
#      KPSSH_K8S_OUT (default <repo>/_out/k8s)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${KPSSH_K8S_OUT:-$repo/_out/k8s}
bin=$out/bin
jobs=${KPSSH_BUILD_JOBS:-2}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[[ -x $GO ]] || {
    echo "build.sh: Go not found (set GO=/path/to/go)" >&2
    exit 1
}

# Must match the k8s.io/kubernetes requirement in go.mod and the staging
# replaces (v0.<minor>.<patch>).
KUBE_VERSION=v1.36.3
HELM_VERSION=v4.3.2
ETCD_NOTE='etcd version comes from go.etcd.io/etcd/server/v3 in go.mod'

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="-mod=readonly -trimpath -buildvcs=false"

say() { printf '[k8s-harness %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

stamp_now() {
    {
        "$GO" version
        echo "$KUBE_VERSION $HELM_VERSION $ETCD_NOTE"
        cd "$here"
        find . -name '*.go' -o -name go.mod -o -name go.sum -o -name build.sh | LC_ALL=C sort |
            xargs sha256sum
    } | sha256sum | cut -d' ' -f1
}

bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubemark hollow-node helm)
want=$(stamp_now)
if [[ -f $out/stamp && $(<"$out/stamp") == "$want" ]]; then
    ok=1
    for b in "${bins[@]}"; do [[ -x $bin/$b ]] || ok=0; done
    if ((ok)); then
        say "up to date: $bin (Kubernetes $KUBE_VERSION, stamp ${want:0:12})"
        exit 0
    fi
fi

t0=$(date +%s)
mkdir -p "$bin"
rm -f "$out/stamp"
say "building Kubernetes $KUBE_VERSION binaries + etcd + hollow-node into $bin (go build -p $jobs; $("$GO" version))"
say "GOMODCACHE=$("$GO" env GOMODCACHE) GOCACHE=$("$GO" env GOCACHE)"

minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

cd "$here"
"$GO" build -p "$jobs" -ldflags "$ld" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubemark \
    ./cmd/etcd ./cmd/hollow-node
t1=$(date +%s)
say "kubernetes binaries built in $((t1 - t0)) s"

say "building helm $HELM_VERSION (separate module: it needs newer k8s.io libraries)"
cd "$here/helm"
"$GO" build -p "$jobs" -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    -o "$bin/helm" helm.sh/helm/v4/cmd/helm
t2=$(date +%s)
say "helm built in $((t2 - t1)) s"

"$bin/kubectl" version --client | sed 's/^/    /'
"$bin/etcd" --version | sed -n '1s/^/    /p' # sed reads it all: head would let etcd die of SIGPIPE under pipefail
"$bin/helm" version --short | sed 's/^/    /'
echo "$want" >"$out/stamp"
say "done in $((t2 - t0)) s; $(du -sh "$bin" | cut -f1) in $bin"
