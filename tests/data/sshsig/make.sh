#!/usr/bin/env bash
# Regenerates the SSHSIG fixtures of tests/unit/test-sshsig.c. Run once and commit the output;
# the unit test reads the files and never runs this (it makes its own fresh key at test time as
# well). The keys are test keys with no other use: never trust them anywhere.
#
#   <alg>, <alg>.pub       key pair (RSA in PEM so openssl can read it below)
#   msg.txt                the signed message
#   <alg>.sig              ssh-keygen -Y sign -n kpssh over msg.txt
#   <alg>.file.sig         the same key, namespace "file" (a git/file signature, wrong for us)
#   rsa.sha256.sig         rsa-sha2-256 format: ssh-keygen signs RSA with rsa-sha2-512 only, so
#                          this one re-signs the same signed data with openssl
#   rsa.sha1.sig           the SHA-1 "ssh-rsa" format, made the same way, which we must refuse
#   ca-<alg>, ca-<alg>.pub certificate authorities (ed25519, rsa, ecdsa384; "other" is an ed25519
#                          CA that nobody trusts)
#   cert-<name>.pub        a user certificate for one of the keys above (table below)
#   cert-<name>.sig        ssh-keygen -Y sign -n kpssh -f cert-<name>.pub over msg.txt
#
# `make.sh certs` remakes only the CAs and certificates, over the keys already here, so the
# plain-key fixtures (whose public keys tests/fuzz/fuzz-sshsig.c quotes) stay as they are.
#
# Hash algorithms vary on purpose: ed25519 and rsa sign with sha512 (ssh-keygen's default), the
# ECDSA keys with -O hashalg=sha256.
set -euo pipefail
cd "$(dirname "$0")"
# Certificate validity (-V) is read in local time: make it UTC so the windows are the same for
# everyone.
export TZ=UTC
what=${1:-all}

sign() { # key namespace out [options...]
    local key=$1 ns=$2 out=$3
    shift 3
    ssh-keygen -q -Y sign -f "$key" -n "$ns" "$@" <msg.txt >"$out"
}

certs() {
    rm -f ca-* cert-*
    ssh-keygen -q -t ed25519 -N '' -C fixture-ca-ed25519 -f ca-ed25519
    ssh-keygen -q -t rsa -b 2048 -N '' -C fixture-ca-rsa -f ca-rsa
    ssh-keygen -q -t ecdsa -b 384 -N '' -C fixture-ca-ecdsa384 -f ca-ecdsa384
    ssh-keygen -q -t ed25519 -N '' -C fixture-ca-other -f ca-other
    local tmp
    tmp=$(mktemp -d)
    # name  user key  CA  serial  ssh-keygen -s options. ssh-keygen signs with an RSA CA as
    # rsa-sha2-512 unless -t says otherwise.
    while read -r name key ca serial opts; do
        install -m 600 "$key" "$tmp/$name" # ssh-keygen ignores a private key others can read
        cp "$key.pub" "$tmp/$name.pub"
        # shellcheck disable=SC2086 # opts is a list of options
        ssh-keygen -q -s "ca-$ca" -I "fixture-$name" -z "$serial" $opts "$tmp/$name.pub"
        cp "$tmp/$name-cert.pub" "cert-$name.pub"
        sign "$tmp/$name-cert.pub" kpssh "cert-$name.sig"
    done <<'TABLE'
ed25519     ed25519  ed25519 1001 -n kpssh,ops -V always:forever
ecdsa256    ecdsa256 rsa     1002 -n kpssh -V 19700101:21000101
ecdsa384    ecdsa384 ecdsa384 1003 -n ops,kpssh -V 20200101:21000101
ecdsa521    ecdsa521 ed25519 1004 -n kpssh -V always:forever
rsa         rsa      rsa     1005 -n kpssh -t rsa-sha2-256 -V 20200101:21000101
expired     ed25519  ed25519 2001 -n kpssh -V 20200101:20200201
future      ed25519  ed25519 2002 -n kpssh -V 20990101:21000101
principal   ed25519  ed25519 2003 -n ops,kpssh-admin -V always:forever
noprincipal ed25519  ed25519 2004 -V always:forever
host        ed25519  ed25519 2005 -h -n kpssh -V always:forever
sha1ca      rsa      rsa     2006 -n kpssh -t ssh-rsa -V always:forever
critical    ed25519  ed25519 2007 -n kpssh -O force-command=/bin/false -O critical:unknown@example.com=x
other       ed25519  other   2008 -n kpssh -V always:forever
TABLE
    rm -rf "$tmp"
    # The good ones must be good to OpenSSH itself.
    printf 'kpssh cert-authority %s\n' "$(cat ca-ed25519.pub)" "$(cat ca-rsa.pub)" \
        "$(cat ca-ecdsa384.pub)" >allowed_signers
    for name in ed25519 ecdsa256 ecdsa384 ecdsa521 rsa; do
        ssh-keygen -q -Y verify -f allowed_signers -I kpssh -n kpssh -s "cert-$name.sig" \
            <msg.txt >/dev/null
    done
    rm -f allowed_signers
    echo "sshsig certificate fixtures regenerated"
}

if [ "$what" = certs ]; then
    certs
    exit 0
fi

rm -f ed25519* ecdsa256* ecdsa384* ecdsa521* rsa* msg.txt
# shellcheck disable=SC2016 # the message is literal script text, expanded by nobody
printf 'kpssh signed script fixture\n#!/bin/bash\necho "hello from $(hostname)"\n' >msg.txt

ssh-keygen -q -t ed25519 -N '' -C fixture-ed25519 -f ed25519
ssh-keygen -q -t ecdsa -b 256 -N '' -C fixture-ecdsa256 -f ecdsa256
ssh-keygen -q -t ecdsa -b 384 -N '' -C fixture-ecdsa384 -f ecdsa384
ssh-keygen -q -t ecdsa -b 521 -N '' -C fixture-ecdsa521 -f ecdsa521
ssh-keygen -q -t rsa -b 2048 -m PEM -N '' -C fixture-rsa -f rsa

for k in ed25519 rsa; do
    sign $k kpssh $k.sig
    sign $k file $k.file.sig
done
for k in ecdsa256 ecdsa384 ecdsa521; do
    sign $k kpssh $k.sig -O hashalg=sha256
    sign $k file $k.file.sig -O hashalg=sha256
done

# rsa-sha2-256 and ssh-rsa (SHA-1) signatures over the signed data of rsa.sig (sha512 message
# hash), wrapped in the same SSHSIG blob with only the signature field changed.
python3 - <<'PY'
import base64, hashlib, struct, subprocess

def s(b):
    return struct.pack(">I", len(b)) + b

def read_str(b, o):
    n = struct.unpack(">I", b[o:o + 4])[0]
    return b[o + 4:o + 4 + n], o + 4 + n

def armor(blob):
    b64 = base64.b64encode(blob).decode()
    lines = [b64[i:i + 76] for i in range(0, len(b64), 76)]
    return "-----BEGIN SSH SIGNATURE-----\n" + "\n".join(lines) + "\n-----END SSH SIGNATURE-----\n"

text = open("rsa.sig").read().split("\n")
blob = base64.b64decode("".join(l for l in text if l and not l.startswith("-----")))
assert blob[:6] == b"SSHSIG"
o = 10
pub, o = read_str(blob, o)
ns, o = read_str(blob, o)
_, o = read_str(blob, o)
hashalg, o = read_str(blob, o)
msg = open("msg.txt", "rb").read()
tosign = b"SSHSIG" + s(ns) + s(b"") + s(hashalg) + s(hashlib.new(hashalg.decode(), msg).digest())
for fmt, md, out in ((b"rsa-sha2-256", "-sha256", "rsa.sha256.sig"), (b"ssh-rsa", "-sha1", "rsa.sha1.sig")):
    sig = subprocess.run(["openssl", "dgst", md, "-sign", "rsa"], input=tosign,
                         capture_output=True, check=True).stdout
    new = b"SSHSIG" + struct.pack(">I", 1) + s(pub) + s(ns) + s(b"") + s(hashalg) + s(s(fmt) + s(sig))
    open(out, "w").write(armor(new))
PY
# The rsa-sha2-256 one must be acceptable to OpenSSH itself, not only to us.
printf 'kpssh %s\n' "$(cat rsa.pub)" >allowed_signers
ssh-keygen -q -Y verify -f allowed_signers -I kpssh -n kpssh -s rsa.sha256.sig <msg.txt >/dev/null
rm -f allowed_signers
certs
echo "sshsig fixtures regenerated"
