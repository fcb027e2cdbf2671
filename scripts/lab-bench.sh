#!/usr/bin/env bash
# Runs a benchmark that needs the test lab: brings the lab up, runs it, and always takes the lab
# down again. scripts/lab-bench.sh BENCH [ARGS...]; KPSSH_LAB_ID selects the lab instance
# (default 0, the one ctest uses), so do not run it beside a ctest run of the same instance.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 BENCH [ARGS...]" >&2; exit 2; }
bench=$1
shift
[ -x "$bench" ] || { echo "lab-bench: $bench is not built (make build)" >&2; exit 1; }
export KPSSH_LAB_ID=${KPSSH_LAB_ID:-0}
export KPSSH_LAB_DIR=${KPSSH_LAB_DIR:-$PWD/_out/lab$KPSSH_LAB_ID}
export KP_REPO=$PWD KP_TEST_DATA_DIR=$PWD/tests/data
trap 'tests/lab/down.sh >/dev/null 2>&1 || echo "lab-bench: tests/lab/down.sh failed" >&2' EXIT
tests/lab/up.sh --hosts 3
"$bench" "$@"
