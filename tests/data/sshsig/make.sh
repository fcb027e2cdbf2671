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
#
# Hash algorithms vary on purpose: ed25519 and rsa sign with sha512 (ssh-keygen's default), the
# ECDSA keys with -O hashalg=sha256.
set -euo pipefail
cd "$(dirname "$0")"

rm -f ed25519* ecdsa256* ecdsa384* ecdsa521* rsa* msg.txt
# shellcheck disable=SC2016 # the message is literal script text, expanded by nobody
printf 'kpssh signed script fixture\n#!/bin/bash\necho "hello from $(hostname)"\n' >msg.txt

ssh-keygen -q -t ed25519 -N '' -C fixture-ed25519 -f ed25519
ssh-keygen -q -t ecdsa -b 256 -N '' -C fixture-ecdsa256 -f ecdsa256
ssh-keygen -q -t ecdsa -b 384 -N '' -C fixture-ecdsa384 -f ecdsa384
ssh-keygen -q -t ecdsa -b 521 -N '' -C fixture-ecdsa521 -f ecdsa521
ssh-keygen -q -t rsa -b 2048 -m PEM -N '' -C fixture-rsa -f rsa

sign() { # key namespace out [options...]
    local key=$1 ns=$2 out=$3
    shift 3
    ssh-keygen -q -Y sign -f "$key" -n "$ns" "$@" <msg.txt >"$out"
}
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
echo "sshsig fixtures regenerated"
