#!/usr/bin/env bash
# Self-test of cmake/Layers.cmake (kp_layer): a layer's sources in a sub-folder are built into
# the layer's library, and a dependency that is not a target fails the configure with a message
# naming it. Configures a scratch project only; nothing is compiled.
set -euo pipefail
repo=${KP_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/p/src/lo" "$tmp/p/src/hi/sub"
printf 'int lo(void) { return 1; }\n' >"$tmp/p/src/lo/lo.c"
printf 'int hi(void) { return 2; }\n' >"$tmp/p/src/hi/hi.c"
printf 'int deep(void) { return 3; }\n' >"$tmp/p/src/hi/sub/deep.c"
cat >"$tmp/p/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(layers C)
list(APPEND CMAKE_MODULE_PATH $repo/cmake)
function(kp_warnings t)
endfunction()
add_subdirectory(src)
CMAKE
write_project() { # $1: the DEPS of layer hi
    cat >"$tmp/p/src/CMakeLists.txt" <<CMAKE
include(Layers)
kp_layer(lo)
kp_layer(hi DEPS $1)
get_target_property(_s kp_hi SOURCES)
message(STATUS "kp_hi sources: \${_s}")
CMAKE
}

write_project kp_lo
out=$(cmake -S "$tmp/p" -B "$tmp/b1" 2>&1) || {
    echo "FAIL: configure with a valid DEPS failed: $out" >&2
    exit 1
}
grep -q 'kp_hi sources: .*hi/sub/deep.c' <<<"$out" || {
    echo "FAIL: src/hi/sub/deep.c is not built into kp_hi: $out" >&2
    exit 1
}
write_project kp_loo
if out=$(cmake -S "$tmp/p" -B "$tmp/b2" 2>&1); then
    echo "FAIL: configure accepted a dependency that is not a target" >&2
    exit 1
fi
grep -q "dependency 'kp_loo' is not a target" <<<"$out" || {
    echo "FAIL: unexpected message: $out" >&2
    exit 1
}
echo "cmake-layers: ok"
