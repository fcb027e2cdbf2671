#!/usr/bin/env bash
# clang-format over our C sources. With --fix it rewrites them; without, it fails on any
# difference and prints the files that need `make format`.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- 'src/*.[ch]' \
    'tests/*.[ch]' 'bench/*.[ch]' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
[ ${#files[@]} -gt 0 ] || { echo "check-format: no files"; exit 0; }
if [ "${1:-}" = --fix ]; then
    clang-format -i "${files[@]}"
    echo "check-format: formatted ${#files[@]} files"
    exit 0
fi
bad=()
for f in "${files[@]}"; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
        bad+=("$f")
    fi
done
if [ ${#bad[@]} -gt 0 ]; then
    echo "check-format: these files need 'make format':" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
fi
echo "check-format: ok (${#files[@]} files)"
