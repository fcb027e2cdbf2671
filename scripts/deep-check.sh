#!/usr/bin/env bash
# The checks too slow for every CI run (STYLE.md section 7), run before merging changes to
# threading, ownership, parsers or the shim: full clang-tidy, the TSan suite, the allocation
# torture sweep, valgrind over the unit tier, and long fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_secs=${FUZZ_SECONDS:-600}

KP_TIDY_SCOPE=all scripts/check-static.sh

echo "== tsan"
cmake --preset tsan >/dev/null
cmake --build build/tsan -j 2
(cd build/tsan && KP_TEST_TIMEOUT_MULTIPLIER=10 ctest -j 2 --output-on-failure -L 'unit|fault')

echo "== torture"
cmake --preset dev >/dev/null
cmake --build build/dev -j 2
(cd build/dev && ctest -j 2 --output-on-failure -L torture)

echo "== valgrind (plain preset, unit tier)"
cmake --preset plain >/dev/null
cmake --build build/plain -j 2
(cd build/plain && ctest -j 2 --output-on-failure -L unit -T memcheck \
    --overwrite MemoryCheckCommandOptions="--leak-check=full --error-exitcode=1 --errors-for-leak-kinds=definite,possible")

echo "== fuzz ${fuzz_secs}s per driver"
scripts/fuzz.sh "$fuzz_secs"
