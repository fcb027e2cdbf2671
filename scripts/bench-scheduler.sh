#!/usr/bin/env bash
# Our scheduler and Karpenter's on the same workload and the same machine, back to back:
# build/release/bench/bench-scheduler -k N (Karpenter's BenchmarkScheduling<N> workload rebuilt
# in C, bench/bench-scheduler.c) and Karpenter's own BenchmarkScheduling<N> (build tag
# test_performance) from the pinned module bench/karpenter. Prints one row per size: time per
# Solve of each, the ratio Karpenter/kpssh, and the NodeClaims each plans. Figures only; gates
# nothing.
#
#   scripts/bench-scheduler.sh [--large]
#
# --large adds 10000 and 20000 pods (Karpenter takes tens of seconds per Solve there).
# Env: SIZES                 pod counts (default "1 50 100 500 1000 2000 5000")
#      KPSSH_BENCH_REPEATS   Solves per size (default 1: Karpenter's -benchtime 1x, our -r 1);
#                            each side reports the mean time per Solve
#      KPSSH_BENCH_NICE      nice level for builds and runs (default 10; the machine is shared)
#      GO                    the go command (default: go on PATH, else /usr/local/go/bin/go)
#      GOMAXPROCS            passed to Karpenter's benchmark (Go's default: every core; ours
#                            is single-threaded), shown in the table's header
#
# bench/karpenter/go.mod needs Go 1.26.9 or newer, so this script sets GOTOOLCHAIN=go1.27.3:
# the first run fetches that toolchain (~76 MB) and the Karpenter module graph through the Go
# module proxy, later runs use the module and build caches.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

KARPENTER_VERSION=v1.15.0 # must match bench/karpenter/go.mod
PKG=sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling
export GOTOOLCHAIN=go1.27.3
export GOFLAGS="-mod=readonly -buildvcs=false"

sizes=${SIZES:-1 50 100 500 1000 2000 5000}
repeats=${KPSSH_BENCH_REPEATS:-1}
nicelvl=${KPSSH_BENCH_NICE:-10}
for a in "$@"; do
    case $a in
    --large) sizes+=" 10000 20000" ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "bench-scheduler: unknown argument $a (try --help)" >&2
        exit 2
        ;;
    esac
done
for n in $sizes; do
    case $n in
    1 | 50 | 100 | 500 | 1000 | 2000 | 5000 | 10000 | 20000) ;;
    *)
        echo "bench-scheduler: Karpenter has no BenchmarkScheduling$n" \
            "(sizes: 1 50 100 500 1000 2000 5000 10000 20000)" >&2
        exit 2
        ;;
    esac
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] || {
    echo "bench-scheduler: KPSSH_BENCH_REPEATS must be a positive integer" >&2
    exit 2
}

say() { printf '[bench-scheduler %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
    printf 'bench-scheduler: %s\n' "$*" >&2
    exit 1
}
run() { nice -n "$nicelvl" "$@"; }

GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[[ -x $GO ]] || die "Go not found (set GO=/path/to/go; scripts/deps.sh wants one on PATH)"
proxy=$(GOTOOLCHAIN=local "$GO" env GOPROXY)
proxy_help="is the Go module proxy ($proxy) reachable from here?"

out=$repo/_out/bench-karpenter
mkdir -p "$out"

# --- ours -------------------------------------------------------------------------------------
say "building bench-scheduler (cmake preset release)"
{ run cmake --preset release && run cmake --build build/release --target bench-scheduler; } \
    >"$out/cmake.log" 2>&1 || {
    cat "$out/cmake.log" >&2
    die "building bench-scheduler (release preset) failed"
}
ours=$repo/build/release/bench/bench-scheduler

# --- Karpenter's: toolchain, modules, test binary ---------------------------------------------
cd "$repo/bench/karpenter"
if ! gover=$("$GO" version 2>"$out/go.err"); then
    cat "$out/go.err" >&2
    die "cannot get the $GOTOOLCHAIN toolchain: $proxy_help"
fi
say "$gover; fetching the module graph of sigs.k8s.io/karpenter $KARPENTER_VERSION if missing"
if ! "$GO" mod download 2>"$out/go.err"; then
    cat "$out/go.err" >&2
    die "cannot download bench/karpenter's modules: $proxy_help"
fi
say "compiling Karpenter's scheduling tests (-tags test_performance; minutes the first time)"
run "$GO" test -c -p 1 -tags test_performance -o "$out/scheduling.test" "$PKG"
cd "$repo"

# --- run, one process per size on each side ---------------------------------------------------
# Each size runs in its own process on both sides: every size starts from the same seed, and
# nothing a larger size allocated is still in the heap.
declare -A k_ms k_nodes o_ms o_nodes
procs=1 # GOMAXPROCS, from the -N suffix Go puts on the benchmark's name when it is not 1
# field UNIT LINE: the number just before UNIT in a `go test -bench` result line
field() { awk -v u="$1" '{ for (i = 2; i <= NF; i++) if ($i == u) print $(i - 1) }' <<<"$2"; }
for n in $sizes; do
    say "$n pods: kpssh"
    line=$(run "$ours" -k "$n" -r "$repeats") || die "bench-scheduler -k $n failed"
    printf '  %s\n' "$line" >&2
    o_ms[$n]=$(sed -n 's/.* solve_ms=\([0-9.]*\).*/\1/p' <<<"$line")
    o_nodes[$n]=$(sed -n 's/.* nodeclaims=\([0-9]*\).*/\1/p' <<<"$line")
    say "$n pods: Karpenter"
    res=$(run "$out/scheduling.test" -test.run '^$' -test.bench "^BenchmarkScheduling$n\$" \
        -test.benchtime "${repeats}x" -test.benchmem) || {
        printf '%s\n' "$res" >&2
        die "Karpenter's BenchmarkScheduling$n failed"
    }
    line=$(grep "^BenchmarkScheduling${n}[-[:space:]]" <<<"$res") ||
        die "no BenchmarkScheduling$n result in: $res"
    printf '  %s\n' "$line" >&2
    ns=$(field ns/op "$line")
    k_ms[$n]=$(awk -v ns="$ns" 'BEGIN { printf "%.3f", ns / 1e6 }')
    k_nodes[$n]=$(field nodes "$line")
    procs=$(sed -n 's/^BenchmarkScheduling[0-9]*-\([0-9]*\)[[:space:]].*/\1/p' <<<"$line")
done

# --- the table --------------------------------------------------------------------------------
echo
echo "Scheduling benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo "kpssh: bench-scheduler -k N -r $repeats (release preset);" \
    "Karpenter $KARPENTER_VERSION: BenchmarkScheduling<N> -benchtime ${repeats}x, $gover," \
    "GOMAXPROCS=${procs:-1}"
echo "time per Solve; ratio = Karpenter / kpssh; nodes = NodeClaims planned"
printf '%7s %14s %16s %8s %12s %16s\n' pods "kpssh/Solve" "Karpenter/Solve" ratio \
    "kpssh nodes" "Karpenter nodes"
for n in $sizes; do
    awk -v n="$n" -v o="${o_ms[$n]}" -v k="${k_ms[$n]}" -v on="${o_nodes[$n]}" \
        -v kn="${k_nodes[$n]}" 'BEGIN {
            printf "%7d %11.2f ms %13.2f ms %7.1fx %12d %16d\n", n, o, k,
                (o > 0 ? k / o : 0), on, kn
        }'
done
