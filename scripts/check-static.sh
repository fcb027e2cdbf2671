#!/usr/bin/env bash
# Static analysis (STYLE.md section 7): cppcheck over product code, clang-tidy, and the gcc
# -fanalyzer build. KP_TIDY_SCOPE picks clang-tidy's files:
#   changed (default)  C files changed against KP_TIDY_BASE (default: HEAD, i.e. uncommitted)
#   ci                 base/ json/ yaml/ k8s/ cmd/shim/ (what CI can afford)
#   all                the whole tree (scripts/deep-check.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}

echo "== cppcheck"
cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
    --std=c11 -D_GNU_SOURCE -D__CPPCHECK__ -Isrc --inline-suppr --suppress=missingIncludeSystem \
    -j "$jobs" src

echo "== gcc -fanalyzer (analyze preset)"
cmake --preset analyze >/dev/null
cmake --build build/analyze -j "$jobs"

echo "== clang-tidy"
[ -f build/dev/compile_commands.json ] || cmake --preset dev >/dev/null
scope=${KP_TIDY_SCOPE:-changed}
case "$scope" in
ci) mapfile -t files < <(find src/base src/json src/yaml src/k8s src/cmd/shim -name '*.c' 2>/dev/null | sort) ;;
all) mapfile -t files < <(find src -name '*.c' | sort) ;;
changed)
    mapfile -t files < <( (git diff --name-only "${KP_TIDY_BASE:-HEAD}" -- 'src/*.c';
        git ls-files --others --exclude-standard -- 'src/*.c') | sort -u |
        while read -r f; do [ -f "$f" ] && echo "$f"; done) ;;
*) echo "unknown KP_TIDY_SCOPE=$scope" >&2; exit 2 ;;
esac
if [ ${#files[@]} -eq 0 ]; then
    echo "clang-tidy: no files in scope '$scope'"
else
    printf '%s\n' "${files[@]}" | xargs -P "$jobs" -n 4 clang-tidy --quiet -p build/dev \
        --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-unused-command-line-argument
    echo "clang-tidy: ok (${#files[@]} files, scope $scope)"
fi
