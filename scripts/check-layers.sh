#!/usr/bin/env bash
# Checks the one-way layering of STYLE.md section 2 on #include lines, and that every header
# compiles on its own. The CMake link lines enforce the same at link time; this catches an
# include of a header from a layer above even when no symbol from it is used yet.
#
#   base <- json, yaml <- k8s (client) <- api (typed kinds) <- core <- provider/ssh <- cmd/controller
#   http uses base only; cmd/kpssh sees core/ (simulate runs the controller's scheduler);
#   cmd/shim sees base only.
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0

# Project layers each directory may include ("x/" prefixes), and third-party headers it may use.
allowed_layers() {
    case "$1" in
    base) echo "base" ;;
    json) echo "base json" ;;
    yaml) echo "base yaml" ;;
    k8s) echo "base json yaml k8s" ;;
    api) echo "base json yaml k8s api" ;;
    core) echo "base json yaml k8s api core" ;;
    provider/ssh) echo "base json yaml k8s api core provider" ;;
    http) echo "base http" ;;
    cmd/controller) echo "base json yaml k8s api core provider http cmd" ;;
    cmd/kpssh) echo "base json yaml k8s api core provider cmd" ;;
    cmd/shim) echo "base cmd" ;;
    *) echo "" ;;
    esac
}
allowed_thirdparty() {
    case "$1" in
    json) echo "jansson" ;;
    yaml) echo "yaml" ;;
    k8s) echo "curl openssl" ;;
    provider/ssh) echo "libssh openssl" ;;
    http) echo "microhttpd" ;;
    cmd/kpssh) echo "openssl" ;;
    *) echo "" ;;
    esac
}
# Which third-party family a <header> belongs to (empty for libc/POSIX).
thirdparty_of() {
    case "$1" in
    curl/*) echo curl ;;
    jansson.h | jansson_config.h) echo jansson ;;
    yaml.h) echo yaml ;;
    libssh/*) echo libssh ;;
    openssl/*) echo openssl ;;
    microhttpd.h) echo microhttpd ;;
    cmocka.h) echo cmocka ;;
    *) echo "" ;;
    esac
}

layer_of() {
    local f=${1#src/}
    case "$f" in
    provider/ssh/*) echo provider/ssh ;;
    cmd/controller/*) echo cmd/controller ;;
    cmd/kpssh/*) echo cmd/kpssh ;;
    cmd/shim/*) echo cmd/shim ;;
    */*) echo "${f%%/*}" ;;
    *) echo "" ;;
    esac
}

while IFS= read -r file; do
    layer=$(layer_of "$file")
    [ -n "$layer" ] || continue
    ok_layers=" $(allowed_layers "$layer") "
    ok_third=" $(allowed_thirdparty "$layer") "
    while IFS= read -r line; do
        lineno=${line%%:*}
        inc=$(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1/p' <<<"${line#*:}")
        [ -n "$inc" ] || continue
        if [[ "$line" == *'"'* ]]; then
            dep=${inc%%/*}
            [ "$dep" != "$inc" ] || continue # same-directory include
            # cmd/kpssh and cmd/shim must not reach into each other or into cmd/controller.
            if [ "$dep" = cmd ]; then
                sub=$(cut -d/ -f2 <<<"$inc")
                if [ "cmd/$sub" != "$layer" ]; then
                    echo "$file:$lineno: $layer may not include $inc" >&2
                    fail=1
                fi
                continue
            fi
            if [[ "$ok_layers" != *" $dep "* ]]; then
                echo "$file:$lineno: layer $layer may not include $inc (allowed: $ok_layers)" >&2
                fail=1
            fi
            # obj-kpssh: the projections of our own kinds (pure, api/ below them), which the
            # CLI's pool view reads as the controller does; provider: the SSH provider itself,
            # whose catalog kpssh simulate builds over in-memory stores; profile: the
            # SSHJoinProfile checks (pure), which kpssh profile lint runs as the controller does.
            if [ "$layer" = cmd/kpssh ] && [ "$dep" = provider ]; then
                case "$inc" in
                provider/ssh/session.h | provider/ssh/probe.h | provider/ssh/sshsig.h | provider/ssh/knownhosts.h | provider/ssh/obj-kpssh.h | provider/ssh/provider.h | provider/ssh/profile.h) ;;
                *) echo "$file:$lineno: cmd/kpssh may use only session, probe, sshsig, knownhosts, obj-kpssh, profile and provider of provider/ssh" >&2; fail=1 ;;
                esac
            fi
        else
            fam=$(thirdparty_of "$inc")
            [ -n "$fam" ] || continue
            if [[ "$ok_third" != *" $fam "* ]]; then
                echo "$file:$lineno: layer $layer may not include <$inc>" >&2
                fail=1
            elif [ "$fam" = curl ] && [ "$file" != src/k8s/transport.c ]; then
                echo "$file:$lineno: only src/k8s/transport.c includes curl" >&2
                fail=1
            fi
        fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include' "$file" || true)
done < <(find src -name '*.[ch]' | sort)

# Every header compiles alone (STYLE.md rule 2): no hidden include-order dependency.
cc=${CC:-gcc}
while IFS= read -r h; do
    [ "$h" = src/base/banned.h ] && continue
    flags=(-std=c11 -D_GNU_SOURCE -fsyntax-only -Isrc -x c)
    if ! "$cc" "${flags[@]}" - <<<"#include \"${h#src/}\"" 2>/tmp/kp-hdr.$$; then
        echo "$h: does not compile on its own:" >&2
        cat /tmp/kp-hdr.$$ >&2
        fail=1
    fi
done < <(find src -name '*.h' | sort)
rm -f /tmp/kp-hdr.$$

if [ "$fail" -ne 0 ]; then
    echo "check-layers: FAILED" >&2
    exit 1
fi
echo "check-layers: ok"
