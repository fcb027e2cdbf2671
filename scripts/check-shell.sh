#!/usr/bin/env bash
# Runs shellcheck over every shell script in the tree, and checks the generated profile manifests
# are in step with their scripts (scripts/gen-profiles.sh --check).
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t scripts < <(git ls-files --cached --others --exclude-standard |
    while read -r f; do
        [ -f "$f" ] || continue
        case "$f" in
        *.sh | .ci/run) echo "$f" ;;
        tests/lab/shims/* | tests/integration/profiles/standins/*)
            head -c 64 "$f" | grep -q '^#!.*\(ba\)\?sh' && echo "$f" ;;
        esac
    done | sort -u)
shellcheck -x -P SCRIPTDIR "${scripts[@]}"
echo "check-shell: shellcheck ok (${#scripts[@]} scripts)"
if [ -x scripts/gen-profiles.sh ]; then
    scripts/gen-profiles.sh --check
fi
