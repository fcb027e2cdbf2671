#!/usr/bin/env bash
# Our scheduler and Karpenter's on the same workloads and the same machine, back to back, from
# bench/bench-scheduler.c (its workloads rebuilt in C) and Karpenter's own benchmarks (build tag
# test_performance) in the pinned module bench/karpenter:
#   diverse        bench-scheduler -k N        beside BenchmarkScheduling<N>, one row per size
#   prefs-respect  bench-scheduler -p 4000     beside BenchmarkRespectPreferences
#   prefs-ignore   bench-scheduler -p 4000 -i  beside BenchmarkIgnorePreferences
#                  (makePreferencePods(4000); Karpenter's Respect takes about a minute here)
#   big-cluster    bench-scheduler -b, kpssh only (Karpenter has no such benchmark): 2,000
#                  pending pods against 1,000 existing nodes holding 10,000 bound pods
# Prints one row each: time per Solve of each side, the ratio Karpenter/kpssh, the NodeClaims
# each plans, and how many pods kpssh put on existing nodes. Figures only; gates nothing.
#
#   scripts/bench-scheduler.sh [--large]
#
# --large adds 10000 and 20000 pods (Karpenter takes tens of seconds per Solve there).
# Env: SIZES                 diverse pod counts (default "1 50 100 500 1000 2000 5000"); the
#                            preference and big-cluster rows always run, at their fixed sizes
#      KPSSH_BENCH_REPEATS   Solves per row (default 1: Karpenter's -benchtime 1x, our -r 1);
#                            each side reports the mean time per Solve. Above 1 the preference
#                            rows are no longer pod for pod: Go calls a benchmark once with
#                            b.N=1 before the timed call, whose pods then take the seeded
#                            stream's second draw (1000m, 100Mi), not the first -p uses
#      KPSSH_BENCH_NICE      nice level for builds and runs (default 10; the machine is shared)
#      GO                    the go command (default: go on PATH, else /usr/local/go/bin/go)
#      GOMAXPROCS            passed to Karpenter's benchmarks (Go's default: every core; ours
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
ours_bin=$repo/build/release/bench/bench-scheduler

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

# --- run, one process per row on each side ----------------------------------------------------
# Each row runs in its own process on both sides: every workload starts from the same seed (the
# preference pods' one request is the first draw of Karpenter's seeded stream, which -p
# reproduces), and nothing an earlier row allocated is still in the heap.
PREF_PODS=4000 # makePreferencePods(4000) in both of Karpenter's preference benchmarks
declare -A o_ms o_nodes o_pods o_existing k_ms k_nodes
rows=()
procs=1 # GOMAXPROCS, from the -N suffix Go puts on the benchmark's name when it is not 1
# field UNIT LINE: the number just before UNIT in a `go test -bench` result line
field() { awk -v u="$1" '{ for (i = 2; i <= NF; i++) if ($i == u) print $(i - 1) }' <<<"$2"; }
# ours ROW ARGS...: bench-scheduler ARGS; its time per Solve, NodeClaims, pods and placements
# on existing nodes (when it has any) become ROW's
ours() {
    local row=$1 line
    shift
    say "$row: kpssh"
    line=$(run "$ours_bin" "$@" -r "$repeats") || die "bench-scheduler $* failed"
    printf '  %s\n' "$line" >&2
    o_ms[$row]=$(sed -n 's/.* solve_ms=\([0-9.]*\).*/\1/p' <<<"$line")
    o_nodes[$row]=$(sed -n 's/.* nodeclaims=\([0-9]*\).*/\1/p' <<<"$line")
    o_pods[$row]=$(sed -n 's/.* pods=\([0-9]*\).*/\1/p' <<<"$line")
    o_existing[$row]=$(sed -n 's/.* on_existing=\([0-9]*\).*/\1/p' <<<"$line")
    rows+=("$row")
}
# theirs ROW BENCHMARK: Karpenter's BENCHMARK; its time per Solve and NodeClaims become ROW's
theirs() {
    local row=$1 bench=$2 res line ns
    say "$row: Karpenter's $bench"
    res=$(run "$out/scheduling.test" -test.run '^$' -test.bench "^$bench\$" \
        -test.benchtime "${repeats}x" -test.benchmem) || {
        printf '%s\n' "$res" >&2
        die "Karpenter's $bench failed"
    }
    line=$(grep "^${bench}[-[:space:]]" <<<"$res") || die "no $bench result in: $res"
    printf '  %s\n' "$line" >&2
    ns=$(field ns/op "$line")
    k_ms[$row]=$(awk -v ns="$ns" 'BEGIN { printf "%.3f", ns / 1e6 }')
    k_nodes[$row]=$(field nodes "$line")
    procs=$(sed -n "s/^${bench}-\([0-9]*\)[[:space:]].*/\1/p" <<<"$line")
}
for n in $sizes; do
    ours "diverse $n" -k "$n"
    theirs "diverse $n" "BenchmarkScheduling$n"
done
ours prefs-respect -p "$PREF_PODS"
theirs prefs-respect BenchmarkRespectPreferences
ours prefs-ignore -p "$PREF_PODS" -i
theirs prefs-ignore BenchmarkIgnorePreferences
ours big-cluster -b

# --- the table --------------------------------------------------------------------------------
echo
echo "Scheduling benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo "kpssh: bench-scheduler -k N | -p $PREF_PODS [-i] | -b, -r $repeats (release preset);" \
    "Karpenter $KARPENTER_VERSION: BenchmarkScheduling<N> | BenchmarkRespectPreferences |" \
    "BenchmarkIgnorePreferences, -benchtime ${repeats}x, $gover, GOMAXPROCS=${procs:-1}"
echo "time per Solve; ratio = Karpenter / kpssh; nodes = NodeClaims planned;" \
    "on existing = pods kpssh placed on existing nodes (big-cluster: 1,000 nodes, 10,000 bound" \
    "pods); - = no such benchmark"
printf '%-13s %6s %14s %16s %8s %12s %16s %12s\n' workload pods "kpssh/Solve" \
    "Karpenter/Solve" ratio "kpssh nodes" "Karpenter nodes" "on existing"
for row in "${rows[@]}"; do
    awk -v w="${row%% *}" -v n="${o_pods[$row]}" -v o="${o_ms[$row]}" -v k="${k_ms[$row]:-}" \
        -v on="${o_nodes[$row]}" -v kn="${k_nodes[$row]:-}" -v e="${o_existing[$row]:-}" 'BEGIN {
            printf "%-13s %6d %11.2f ms ", w, n, o
            if (k == "")
                printf "%16s %8s ", "-", "-"
            else
                printf "%13.2f ms %7.1fx ", k, (o > 0 ? k / o : 0)
            printf "%12d %16s %12s\n", on, (kn == "" ? "-" : sprintf("%d", kn)),
                (e == "" ? "-" : e)
        }'
done
