#!/usr/bin/env bash
# Greps the tree for the functions base/banned.h bans (STYLE.md rule 7). The compiler already
# refuses them in built code; this also covers files a given preset does not build.
set -euo pipefail
cd "$(dirname "$0")/.."

banned='strcpy|strcat|strncpy|strncat|strtok|strtok_r|sprintf|vsprintf|atoi|atol|atoll|gmtime|localtime|ctime|asctime|mktemp|system|popen'
# A call is the name not preceded by an identifier character or '_', followed by '('.
pattern="(^|[^A-Za-z0-9_>.])($banned)[[:space:]]*\\("
hits=$(grep -rnE --include='*.c' --include='*.h' "$pattern" src tests bench 2>/dev/null |
    grep -v '^src/base/banned.h:' |
    grep -v '^tests/data/selfcheck/uses-strcpy.c:' |
    grep -vE ':[[:space:]]*(/\*|\*)' || true)
if [ -n "$hits" ]; then
    echo "check-banned: banned functions used (see src/base/banned.h for replacements):" >&2
    echo "$hits" >&2
    exit 1
fi
echo "check-banned: ok"
