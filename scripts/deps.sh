#!/usr/bin/env bash
# Installs the Debian 12 packages kpssh needs to build and test, and only those missing.
# Idempotent: a second run installs nothing and says so. Prints every package it installs.
# Go (for tests/k8s-harness) is not a Debian package here: Debian 12's golang is too old to
# build Kubernetes, so scripts/deps.sh only checks that a Go >= 1.24 toolchain is on PATH.
set -euo pipefail

packages=(
    # build
    build-essential cmake ninja-build pkg-config git
    # product libraries (docs/ARCHITECTURE.md, layers)
    libcurl4-openssl-dev libssl-dev libjansson-dev libyaml-dev libssh-dev libmicrohttpd-dev
    # unit tests
    libcmocka-dev
    # deep checks: clang for tsan and libFuzzer, analyzers, format
    clang libclang-rt-14-dev clang-tidy clang-format cppcheck valgrind shellcheck
    # test lab: sshd hosts in network namespaces, PKI, helpers
    openssh-server openssh-client iproute2 openssl sudo jq util-linux procps psmisc curl
    ca-certificates
    # profile manifests: gen-profiles.sh --check compares embedded scripts byte for byte
    python3-yaml
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all ${#packages[@]} Debian packages present"
else
    echo "deps: installing ${#missing[@]} missing Debian package(s): ${missing[*]}"
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then
        sudo_cmd=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
    echo "deps: installed ${missing[*]}"
fi

# sshd is only ever started by the test lab with its own configuration; make sure the package's
# own service did not start one on the real machine (there is no systemd on CI machines anyway).

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
if ! command -v go >/dev/null 2>&1; then
    echo "deps: Go >= 1.24 is required for tests/k8s-harness and is not on PATH" >&2
    exit 1
fi
gov=$(go env GOVERSION)
echo "deps: $gov for tests/k8s-harness"
