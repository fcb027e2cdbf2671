#!/usr/bin/env bash
# Make the lab's PKI with openssl: one CA (client CA of the API server and the
# controller-manager's cluster signing CA, so CSR-issued kubelet certificates
# authenticate), the API server serving certificate, client certificates for
# admin / controller-manager / scheduler / apiserver->kubelet, the service
# account key pair, a static bearer token, kubeconfigs, and the lab's SSH
# client key pair. Idempotent: existing files are kept.
#
# Usage: tests/lab/pki.sh            (normally called by up.sh)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

P=$LAB_DIR/pki
mkdir -p "$P" "$LAB_DIR/ssh"
chmod 700 "$P" "$LAB_DIR/ssh"
cd "$P"

newkey() { [[ -s $1 ]] || openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

if [[ ! -s ca.crt ]]; then
    newkey ca.key
    openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=kpssh-lab$LAB_ID-ca" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out ca.crt
fi

# cert NAME SUBJECT EXTFILE-CONTENT
cert() {
    local name=$1 subj=$2 ext=$3
    [[ -s $name.crt ]] && return 0
    newkey "$name.key"
    openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr"
    printf '%s\n' "$ext" >"$name.ext"
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 \
        -days 3650 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    rm -f "$name.csr" "$name.ext"
}
client_ext='basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth'

cert apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$LAB_GW,IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=kpssh-lab-admin" "$client_ext"
cert kcm "/CN=system:kube-controller-manager" "$client_ext"
cert scheduler "/CN=system:kube-scheduler" "$client_ext"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client_ext"

if [[ ! -s sa.key ]]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub
fi

# Static bearer token for non-cert clients (system:masters); one line:
# token,user,uid,"groups".
if [[ ! -s tokens.csv ]]; then
    tok=$(openssl rand -hex 24)
    printf '%s,kpssh-lab-token-admin,kpssh-lab-token-admin,"system:masters"\n' "$tok" >tokens.csv
    printf '%s\n' "$tok" >admin.token
fi

b64() { base64 -w0 <"$1"; }
# kubeconfig FILE USER CERT-BASENAME
kubeconfig() {
    local f=$1 user=$2 c=$3
    cat >"$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kpssh-lab$LAB_ID
  cluster:
    server: $LAB_API_URL
    certificate-authority-data: $(b64 ca.crt)
users:
- name: $user
  user:
    client-certificate-data: $(b64 "$c.crt")
    client-key-data: $(b64 "$c.key")
contexts:
- name: $user@kpssh-lab$LAB_ID
  context:
    cluster: kpssh-lab$LAB_ID
    user: $user
current-context: $user@kpssh-lab$LAB_ID
EOF
    chmod 600 "$f"
}
kubeconfig admin.kubeconfig admin admin
kubeconfig kcm.kubeconfig kcm kcm
kubeconfig scheduler.kubeconfig scheduler scheduler

# Lab SSH client key (the "test controller" identity on every host).
[[ -s $LAB_DIR/ssh/id_ed25519 ]] ||
    ssh-keygen -q -t ed25519 -N '' -C "kpssh-lab$LAB_ID-controller" -f "$LAB_DIR/ssh/id_ed25519"
log "PKI ready in $P"
