#!/usr/bin/env bash
# Runs libFuzzer drivers (fuzz preset) for N seconds each: scripts/fuzz.sh [SECONDS [DRIVER...]].
# New interesting inputs are merged into a scratch directory first and then minimised into the
# checked-in corpus with -merge=1, so the corpus grows only by inputs that add coverage.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true

cmake --preset fuzz >/dev/null
cmake --build build/fuzz -j "${JOBS:-2}"
mapfile -t drivers < <(if [ $# -gt 0 ]; then printf '%s\n' "$@"; else
    find tests/fuzz -maxdepth 1 -name 'fuzz-*.c' -printf '%f\n' | sed 's/^fuzz-//; s/\.c$//' | sort; fi)
for d in "${drivers[@]}"; do
    corpus=tests/fuzz/corpus/$d
    scratch=$(mktemp -d)
    dict=()
    [ -f "tests/fuzz/$d.dict" ] && dict=(-dict="tests/fuzz/$d.dict")
    echo "== fuzz $d for ${secs}s"
    build/fuzz/tests/fuzz-"$d" "${dict[@]}" -max_total_time="$secs" -print_final_stats=1 \
        "$scratch" "$corpus"
    build/fuzz/tests/fuzz-"$d" -merge=1 "$corpus" "$scratch" >/dev/null 2>&1 || true
    rm -rf "$scratch"
done
