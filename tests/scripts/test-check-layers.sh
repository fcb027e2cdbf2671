#!/usr/bin/env bash
# Self-test of scripts/check-layers.sh: a copy of the tree passes, and the same copy with one
# include that points up the layers (base/ including k8s/) fails with a message naming it.
set -euo pipefail
repo=${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/scripts"
cp "$repo/scripts/check-layers.sh" "$tmp/scripts/"
cp -r "$repo/src" "$tmp/src"
if ! (cd "$tmp" && scripts/check-layers.sh >/dev/null); then
    echo "FAIL: check-layers rejects the unmodified tree" >&2
    exit 1
fi
mkdir -p "$tmp/src/k8s"
printf '#ifndef X_H\n#define X_H\nint kp_x(void);\n#endif\n' >"$tmp/src/k8s/x.h"
printf '#include "k8s/x.h"\n' >"$tmp/src/base/bad.c"
if out=$(cd "$tmp" && scripts/check-layers.sh 2>&1); then
    echo "FAIL: check-layers accepted base/ including k8s/" >&2
    exit 1
fi
grep -q 'src/base/bad.c:1: layer base may not include k8s/x.h' <<<"$out" || {
    echo "FAIL: unexpected message: $out" >&2
    exit 1
}
rm "$tmp/src/base/bad.c"
printf '#include <curl/curl.h>\n' >"$tmp/src/base/bad.c"
if (cd "$tmp" && scripts/check-layers.sh >/dev/null 2>&1); then
    echo "FAIL: check-layers accepted base/ including curl" >&2
    exit 1
fi
echo "3 passed, 0 failed"
