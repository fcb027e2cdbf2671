/* DESIGN: controller-side SSHSIG verification (provider/ssh/sshsig.h).
 *
 * What: checks an `ssh-keygen -Y sign` signature over a profile script before the controller
 * dials a Verified host: right namespace, a signer among the host's trustedSigners, a hash and
 * signature algorithm we accept, and a signature that verifies.
 *
 * Why in C with libcrypto, not by running ssh-keygen: the controller image carries no OpenSSH
 * binaries, a subprocess per dial would cost more than the check, and the host's shim already
 * runs the host's own ssh-keygen (the check that matters for safety). The controller's check
 * exists to turn a signing mistake into a clear configuration error before a host is touched,
 * so its messages name the signer's key (type and SHA256 fingerprint, as ssh-keygen -l prints
 * it) and what was expected.
 *
 * Why this shape: three steps, each with one job. The armour parser and the trusted-line parser
 * take outside bytes, so they are pure, bounded (KP_MAX_SSHSIG_ARMOUR, KP_MAX_SSHSIG_SIGNER_LINE,
 * KP_MAX_SSH_KEY_BLOB) and fuzzed; they check structure only and leave every pointer inside one
 * owned blob. The verifier decodes the signer key into its parts (key_decode, shared with the
 * trusted-line parser so a key is read one way only), compares the signer blob byte for byte
 * with each trusted key (the same rule as OpenSSH's allowed_signers: no fingerprints), and only
 * then builds libcrypto objects. Trust is decided on bytes we parsed, never on what libcrypto
 * accepted.
 *
 * Certificates (PROTOCOL.certkeys): operators rotate signers with a signing CA, listed in the
 * host's allowed_signers as `kpssh cert-authority ssh-ed25519 AAAA...` and in trustedSigners as
 * `cert-authority ssh-ed25519 AAAA...`. The rules are OpenSSH's (sshsig.c
 * check_allowed_keys_line, sshkey.c cert_parse and sshkey_cert_check_authority), because the
 * host's ssh-keygen -Y verify has the last word and the two must agree: a cert-authority line
 * trusts certificates whose signature key byte-equals its key and never that key's own
 * signatures; a plain line never trusts a certificate, even of its own key. cert_decode reads
 * the whole certificate with the same bounded reader (nonce, the embedded key through
 * key_fields, serial, type, key id, principals, validity, critical options, extensions,
 * reserved, CA key, CA signature; nothing after it), so the CA's signature covers exactly the
 * bytes before the signature field. The checks, after the CA is found among trusted lines:
 * the CA's signature verifies (sig_check, the same code as for the signature itself), user
 * certificate, valid_after <= now < valid_before, and KP_SSHSIG_PRINCIPAL among a non-empty
 * principals list, compared exactly. Critical options are only checked for form: ssh-keygen -Y
 * verify ignores them (force-command and source-address mean nothing to a signature), and
 * refusing what the host accepts would turn a good setup into a configuration error. One
 * deliberate difference: a CA signature in the SHA-1 `ssh-rsa` format is refused with -ENOTSUP,
 * where ssh-keygen -Y verify still accepts it; ssh-keygen has signed certificates with
 * rsa-sha2-512 since 8.2, and we keep SHA-1 out of every trust decision. The time is an input
 * (kp_sshsig_verify_at), so the verifier stays pure and the validity checks are testable.
 *
 * Algorithms: ssh-ed25519; ecdsa-sha2-nistp256/384/521 (SSH mpints r,s re-encoded as DER for
 * libcrypto); rsa-sha2-256 and rsa-sha2-512 by ssh-rsa keys of 1024 bits or more. The SHA-1
 * `ssh-rsa` format is refused, as OpenSSH 8.8+ on the host refuses it. Security-key formats
 * (sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com) are recognised and refused
 * with -ENOTSUP: their signed data adds the application hash, flags and counter, and without a
 * security key on the build machine there is no reference signature to prove an implementation
 * against; a check we cannot test is worse than a clear refusal. Their keys still parse as
 * trusted lines, so a trustedSigners list that mixes them with plain keys keeps working.
 *
 * Signed data (PROTOCOL.sshsig): "SSHSIG" || string(namespace) || string("") ||
 * string(hash_alg) || string(H(message)); the reserved field of the blob is not signed.
 *
 * Threads: none; any thread. libcrypto objects live only inside one call. */
#include "provider/ssh/sshsig.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/time.h"

#define SIG_MAGIC "SSHSIG"
#define SIG_MAGIC_LEN 6
#define SIG_VERSION 1
#define SIG_BEGIN "-----BEGIN SSH SIGNATURE-----"
#define SIG_END "-----END SSH SIGNATURE-----"
#define SIG_ED25519_LEN 32
#define SIG_ED25519_SIG_LEN 64
#define SIG_RSA_MIN_BITS 1024
#define SIG_RSA_MAX_BITS 16384
/* The largest EC point we take (uncompressed nistp521) and scalar (nistp521 r or s). */
#define SIG_EC_POINT_MAX 133
#define SIG_EC_SCALAR_MAX 66
/* A signed-data buffer: magic, four length words, a hash name, a digest and the namespace. */
#define SIG_TOSIGN_MAX (KP_MAX_SSHSIG_ARMOUR + 256)
/* How much of an outside string a message quotes. */
#define SIG_QUOTE_MAX 64
/* Certificate types and fields (PROTOCOL.certkeys; sshkey.h SSHKEY_CERT_MAX_PRINCIPALS). */
#define SIG_CERT_USER 1
#define SIG_CERT_HOST 2
#define SIG_CERT_MAX_PRINCIPALS 256
/* "2006-01-02T15:04:05Z", "forever", or seconds past year 9999. */
#define SIG_TIME_MAX 48

enum sig_kind { SIG_ED25519, SIG_ECDSA, SIG_RSA, SIG_SK_ED25519, SIG_SK_ECDSA };

struct sig_keytype {
    const char *name;    /* key type in a public-key line and inside the blob */
    const char *display; /* as ssh-keygen -l names it */
    enum sig_kind kind;
    const char *curve;         /* ECDSA: the curve name inside the blob */
    const char *group;         /* ECDSA: libcrypto's group name */
    size_t point_len;          /* ECDSA: uncompressed point length */
    const EVP_MD *(*md)(void); /* ECDSA: the curve's hash */
};

static const struct sig_keytype keytypes[] = {
    {"ssh-ed25519", "ED25519", SIG_ED25519, NULL, NULL, 0, NULL},
    {"ecdsa-sha2-nistp256", "ECDSA", SIG_ECDSA, "nistp256", "prime256v1", 65, EVP_sha256},
    {"ecdsa-sha2-nistp384", "ECDSA", SIG_ECDSA, "nistp384", "secp384r1", 97, EVP_sha384},
    {"ecdsa-sha2-nistp521", "ECDSA", SIG_ECDSA, "nistp521", "secp521r1", 133, EVP_sha512},
    {"ssh-rsa", "RSA", SIG_RSA, NULL, NULL, 0, NULL},
    {"sk-ssh-ed25519@openssh.com", "ED25519-SK", SIG_SK_ED25519, NULL, NULL, 0, NULL},
    {"sk-ecdsa-sha2-nistp256@openssh.com", "ECDSA-SK", SIG_SK_ECDSA, "nistp256", "prime256v1", 65,
     EVP_sha256},
};

/* Certificate types: the name inside the blob and the plain type of the key it certifies. The
 * security-key certificate types are left out: their signatures are refused anyway. */
struct sig_certtype {
    const char *name;
    const char *display; /* as ssh-keygen -l names it */
    size_t plain;        /* index into keytypes */
};

static const struct sig_certtype certtypes[] = {
    {"ssh-ed25519-cert-v01@openssh.com", "ED25519-CERT", 0},
    {"ecdsa-sha2-nistp256-cert-v01@openssh.com", "ECDSA-CERT", 1},
    {"ecdsa-sha2-nistp384-cert-v01@openssh.com", "ECDSA-CERT", 2},
    {"ecdsa-sha2-nistp521-cert-v01@openssh.com", "ECDSA-CERT", 3},
    {"ssh-rsa-cert-v01@openssh.com", "RSA-CERT", 4},
};

/* A decoded public key; the byte fields point into the blob it was decoded from. */
struct sig_key {
    const struct sig_keytype *kt;
    struct kp_sshsig_bytes a;           /* ed25519: the 32-byte key; ECDSA: the point; RSA: e */
    struct kp_sshsig_bytes b;           /* RSA: n (magnitude, no leading zero) */
    struct kp_sshsig_bytes application; /* sk-*: the FIDO application string */
};

/* A decoded certificate; the byte fields point into the certificate blob. */
struct sig_cert {
    const struct sig_certtype *ct;
    struct sig_key key;               /* the certified key (its kt is the plain type) */
    struct kp_sshsig_bytes keyfields; /* that key's fields, as in a plain blob after the type */
    uint64_t serial;
    uint32_t type;                     /* SIG_CERT_USER or SIG_CERT_HOST */
    struct kp_sshsig_bytes key_id;     /* without the one trailing NUL OpenSSH tolerates */
    struct kp_sshsig_bytes principals; /* the packed list of strings */
    uint64_t valid_after, valid_before;
    struct kp_sshsig_bytes ca_blob;                         /* the signature key */
    struct sig_key ca;                                      /* ...decoded */
    struct kp_sshsig_bytes sig_format, sig_blob, sig_extra; /* the CA's signature */
    size_t signed_len; /* the CA signed the first signed_len bytes of the blob */
};

/* --- SSH wire reading ------------------------------------------------------------------------ */

struct rd {
    const unsigned char *p;
    size_t n;
};

static bool rd_u32(struct rd *r, uint32_t *ret)
{
    if (r->n < 4)
        return false;
    *ret =
        ((uint32_t)r->p[0] << 24) | ((uint32_t)r->p[1] << 16) | ((uint32_t)r->p[2] << 8) | r->p[3];
    r->p += 4;
    r->n -= 4;
    return true;
}

static bool rd_u64(struct rd *r, uint64_t *ret)
{
    uint32_t hi, lo;
    struct rd save = *r;

    if (!rd_u32(r, &hi) || !rd_u32(r, &lo)) {
        *r = save;
        return false;
    }
    *ret = ((uint64_t)hi << 32) | lo;
    return true;
}

static bool rd_string(struct rd *r, struct kp_sshsig_bytes *ret)
{
    uint32_t len;
    struct rd save = *r;

    if (!rd_u32(r, &len) || len > r->n) {
        *r = save;
        return false;
    }
    ret->data = r->p;
    ret->len = len;
    r->p += len;
    r->n -= len;
    return true;
}

/* A string read as OpenSSH's sshbuf_get_cstring reads it: a NUL is allowed only as the last
 * byte, and is then dropped. */
static bool rd_cstring(struct rd *r, struct kp_sshsig_bytes *ret)
{
    struct kp_sshsig_bytes s;
    const unsigned char *z;
    struct rd save = *r;

    if (!rd_string(r, &s))
        return false;
    z = s.len ? memchr(s.data, '\0', s.len) : NULL;
    if (z && z != s.data + s.len - 1) {
        *r = save;
        return false;
    }
    if (z)
        s.len--;
    *ret = s;
    return true;
}

/* An mpint that must be positive and minimally encoded; *ret is its magnitude without the
 * leading zero byte that keeps the sign bit clear. */
static bool rd_mpint(struct rd *r, struct kp_sshsig_bytes *ret)
{
    struct kp_sshsig_bytes s;

    if (!rd_string(r, &s) || s.len == 0)
        return false;
    if (s.data[0] & 0x80)
        return false; /* negative */
    if (s.data[0] == 0) {
        if (s.len == 1 || !(s.data[1] & 0x80))
            return false; /* zero, or a needless leading zero */
        s.data++;
        s.len--;
    }
    *ret = s;
    return true;
}

static bool bytes_is(const struct kp_sshsig_bytes *b, const char *s)
{
    size_t n = strlen(s);

    return b->len == n && memcmp(b->data, s, n) == 0;
}

static const struct sig_keytype *keytype_find(const void *p, size_t n)
{
    for (size_t i = 0; i < KP_ARRAY_SIZE(keytypes); i++)
        if (strlen(keytypes[i].name) == n && memcmp(keytypes[i].name, p, n) == 0)
            return &keytypes[i];
    return NULL;
}

static const struct sig_certtype *certtype_find(const void *p, size_t n)
{
    for (size_t i = 0; i < KP_ARRAY_SIZE(certtypes); i++)
        if (strlen(certtypes[i].name) == n && memcmp(certtypes[i].name, p, n) == 0)
            return &certtypes[i];
    return NULL;
}

/* Whether n bytes at p name any OpenSSH certificate type, ours or not. */
static bool is_cert_name(const void *p, size_t n)
{
    static const char suffix[] = "-cert-v01@openssh.com";
    size_t sl = sizeof(suffix) - 1;

    return n > sl && memcmp((const char *)p + n - sl, suffix, sl) == 0;
}

/* Quotes up to SIG_QUOTE_MAX bytes of outside text for a message, printable ASCII only. */
static void quote(const void *p, size_t n, char out[SIG_QUOTE_MAX + 4])
{
    const unsigned char *s = p;
    size_t o = 0;

    for (size_t i = 0; i < n && i < SIG_QUOTE_MAX; i++)
        out[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
    if (n > SIG_QUOTE_MAX) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static unsigned bits_of(const struct kp_sshsig_bytes *mag)
{
    unsigned bits = (unsigned)mag->len * 8;

    for (unsigned char top = mag->data[0]; !(top & 0x80); top = (unsigned char)(top << 1))
        bits--;
    return bits;
}

/* Reads the fields of a key of type kt, those after its type name, from r into *ret. 0 or
 * -KP_EPARSE; *reason names the problem. */
static int key_fields(struct rd *rp, const struct sig_keytype *kt, struct sig_key *ret,
                      const char **reason)
{
    struct rd r = *rp;
    struct kp_sshsig_bytes curve;
    struct sig_key k;

    memset(&k, 0, sizeof(k));
    k.kt = kt;
    switch (k.kt->kind) {
    case SIG_ED25519:
    case SIG_SK_ED25519:
        if (!rd_string(&r, &k.a) || k.a.len != SIG_ED25519_LEN) {
            *reason = "ed25519 key is not 32 bytes";
            return -KP_EPARSE;
        }
        break;
    case SIG_ECDSA:
    case SIG_SK_ECDSA:
        if (!rd_string(&r, &curve) || !bytes_is(&curve, k.kt->curve)) {
            *reason = "ECDSA key names a curve other than its type's";
            return -KP_EPARSE;
        }
        if (!rd_string(&r, &k.a) || k.a.len != k.kt->point_len || k.a.data[0] != 0x04) {
            *reason = "ECDSA key is not an uncompressed point of its curve";
            return -KP_EPARSE;
        }
        break;
    case SIG_RSA:
        if (!rd_mpint(&r, &k.a) || !rd_mpint(&r, &k.b)) {
            *reason = "RSA key does not hold two positive integers (e, n)";
            return -KP_EPARSE;
        }
        if (bits_of(&k.b) < SIG_RSA_MIN_BITS || bits_of(&k.b) > SIG_RSA_MAX_BITS || k.a.len > 8 ||
            !(k.a.data[k.a.len - 1] & 1)) {
            *reason = "RSA key is shorter than 1024 bits, longer than 16384, or has an unusable "
                      "exponent";
            return -KP_EPARSE;
        }
        break;
    }
    if (k.kt->kind == SIG_SK_ED25519 || k.kt->kind == SIG_SK_ECDSA) {
        if (!rd_string(&r, &k.application) || k.application.len == 0) {
            *reason = "security-key key has no application string";
            return -KP_EPARSE;
        }
    }
    *rp = r;
    *ret = k;
    return 0;
}

/* Decodes a plain public-key blob. 0, -ENOTSUP (a type we do not know: certificates, ssh-dss,
 * ...) or -KP_EPARSE; *reason names the problem. */
static int key_decode(const unsigned char *blob, size_t len, struct sig_key *ret,
                      const char **reason)
{
    struct rd r = {blob, len};
    struct kp_sshsig_bytes type;
    const struct sig_keytype *kt;
    struct sig_key k;
    int rc;

    if (!rd_string(&r, &type) || type.len == 0) {
        *reason = "key blob does not start with its type name";
        return -KP_EPARSE;
    }
    kt = keytype_find(type.data, type.len);
    if (!kt) {
        *reason = is_cert_name(type.data, type.len)
                      ? "key is a certificate where a plain key is expected"
                      : "key type is not one kpssh verifies (ssh-ed25519, "
                        "ecdsa-sha2-nistp256/384/521, ssh-rsa, sk-ssh-ed25519@openssh.com, "
                        "sk-ecdsa-sha2-nistp256@openssh.com)";
        return -ENOTSUP;
    }
    if ((rc = key_fields(&r, kt, &k, reason)) < 0)
        return rc;
    if (r.n != 0) {
        *reason = "key blob has bytes after the key";
        return -KP_EPARSE;
    }
    *ret = k;
    return 0;
}

/* A list of string pairs (critical options, extensions), each name and data a string. */
static bool pairs_ok(const struct kp_sshsig_bytes *b)
{
    struct rd r = {b->data, b->len};
    struct kp_sshsig_bytes name, data;

    while (r.n > 0)
        if (!rd_string(&r, &name) || !rd_string(&r, &data))
            return false;
    return true;
}

/* Decodes a certificate blob (PROTOCOL.certkeys) as OpenSSH's cert_parse does: structure, the
 * type being user or host, principals (at most 256, each a string without inner NUL), critical
 * options and extensions being pairs of strings, and the CA key a plain key. 0, -KP_EPARSE,
 * -ENOTSUP (a certificate type or CA key type we do not verify) or -KP_EAUTH (the CA key is
 * itself a certificate); *reason names the problem. Nothing is checked against a time, a
 * principal or a trust list here. */
static int cert_decode(const unsigned char *blob, size_t len, struct sig_cert *ret,
                       const char **reason)
{
    struct rd r = {blob, len}, pr, sr;
    struct kp_sshsig_bytes type, nonce, critical, extensions, reserved, sig, name;
    struct sig_cert c;
    const unsigned char *fields;
    size_t n = 0;
    int rc;

    memset(&c, 0, sizeof(c));
    if (!rd_string(&r, &type) || !(c.ct = certtype_find(type.data, type.len))) {
        *reason = "certificate type is not one kpssh verifies (ssh-ed25519, "
                  "ecdsa-sha2-nistp256/384/521 and ssh-rsa certificates)";
        return -ENOTSUP;
    }
    if (!rd_string(&r, &nonce)) {
        *reason = "certificate ends before its nonce";
        return -KP_EPARSE;
    }
    fields = r.p;
    if ((rc = key_fields(&r, &keytypes[c.ct->plain], &c.key, reason)) < 0)
        return rc;
    c.keyfields.data = fields;
    c.keyfields.len = (size_t)(r.p - fields);
    if (!rd_u64(&r, &c.serial) || !rd_u32(&r, &c.type) || !rd_cstring(&r, &c.key_id) ||
        !rd_string(&r, &c.principals) || !rd_u64(&r, &c.valid_after) ||
        !rd_u64(&r, &c.valid_before) || !rd_string(&r, &critical) || !rd_string(&r, &extensions) ||
        !rd_string(&r, &reserved) || !rd_string(&r, &c.ca_blob)) {
        *reason = "certificate ends inside its fields (serial, type, key id, principals, "
                  "validity, critical options, extensions, reserved, signature key), or its key "
                  "id holds a NUL";
        return -KP_EPARSE;
    }
    c.signed_len = (size_t)(r.p - blob);
    if (!rd_string(&r, &sig) || r.n != 0) {
        *reason = "certificate has no signature, or bytes after it";
        return -KP_EPARSE;
    }
    if (c.type != SIG_CERT_USER && c.type != SIG_CERT_HOST) {
        *reason = "certificate type is neither user (1) nor host (2)";
        return -KP_EPARSE;
    }
    pr.p = c.principals.data;
    pr.n = c.principals.len;
    while (pr.n > 0) {
        if (n++ >= SIG_CERT_MAX_PRINCIPALS || !rd_cstring(&pr, &name)) {
            *reason = "certificate principals are not a list of at most 256 strings";
            return -KP_EPARSE;
        }
    }
    if (!pairs_ok(&critical) || !pairs_ok(&extensions)) {
        *reason = "certificate critical options or extensions are not pairs of strings";
        return -KP_EPARSE;
    }
    rc = key_decode(c.ca_blob.data, c.ca_blob.len, &c.ca, reason);
    if (rc < 0) {
        struct rd t = {c.ca_blob.data, c.ca_blob.len};

        if (rc == -ENOTSUP && rd_string(&t, &type) && is_cert_name(type.data, type.len)) {
            *reason = "certificate is signed by a key that is itself a certificate, which "
                      "OpenSSH never accepts as a CA";
            return -KP_EAUTH;
        }
        *reason = rc == -ENOTSUP ? "certificate is signed by a CA key of a type kpssh does not "
                                   "verify"
                                 : "certificate's CA key is malformed";
        return rc;
    }
    sr.p = sig.data;
    sr.n = sig.len;
    if (!rd_string(&sr, &c.sig_format) || c.sig_format.len == 0 || !rd_string(&sr, &c.sig_blob)) {
        *reason = "certificate's CA signature is not a format name and a signature";
        return -KP_EPARSE;
    }
    c.sig_extra.data = sr.p;
    c.sig_extra.len = sr.n;
    *ret = c;
    return 0;
}

/* --- the armour ---------------------------------------------------------------------------- */

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Structure of the decoded blob into s (whose blob is set). 0 or -KP_EPARSE with *reason. */
static int blob_parse(struct kp_sshsig *s, const char **reason)
{
    struct rd r = {s->blob, s->blob_len}, sr;

    if (r.n < SIG_MAGIC_LEN || memcmp(r.p, SIG_MAGIC, SIG_MAGIC_LEN) != 0) {
        *reason = "the decoded signature does not start with \"SSHSIG\"";
        return -KP_EPARSE;
    }
    r.p += SIG_MAGIC_LEN;
    r.n -= SIG_MAGIC_LEN;
    if (!rd_u32(&r, &s->version)) {
        *reason = "the signature ends before its version";
        return -KP_EPARSE;
    }
    if (s->version != SIG_VERSION) {
        *reason = "the signature's version is not 1";
        return -KP_EPARSE;
    }
    if (!rd_string(&r, &s->publickey) || !rd_string(&r, &s->ns) || !rd_string(&r, &s->reserved) ||
        !rd_string(&r, &s->hash_alg) || !rd_string(&r, &s->signature)) {
        *reason = "the signature ends inside its fields (public key, namespace, reserved, hash, "
                  "signature)";
        return -KP_EPARSE;
    }
    if (r.n != 0) {
        *reason = "the signature has bytes after its last field";
        return -KP_EPARSE;
    }
    if (s->publickey.len == 0 || s->hash_alg.len == 0) {
        *reason = "the signature's public key or hash algorithm is empty";
        return -KP_EPARSE;
    }
    sr.p = s->signature.data;
    sr.n = s->signature.len;
    if (!rd_string(&sr, &s->sig_format) || s->sig_format.len == 0 ||
        !rd_string(&sr, &s->sig_blob)) {
        *reason = "the signature field is not a format name and a signature";
        return -KP_EPARSE;
    }
    s->sig_extra.data = sr.p;
    s->sig_extra.len = sr.n;
    return 0;
}

int kp_sshsig_armor(const struct kp_sshsig *s, struct kp_buf *out)
{
    struct kp_buf b64 = KP_BUF_INIT(KP_MAX_SSHSIG_ARMOUR * 2);
    int r;

    if ((r = kp_base64_encode(s->blob, s->blob_len, 0, &b64)) < 0 ||
        (r = kp_buf_puts(out, SIG_BEGIN "\n")) < 0)
        goto out;
    for (size_t i = 0; i < b64.len; i += 70) {
        size_t n = b64.len - i < 70 ? b64.len - i : 70;

        if ((r = kp_buf_append(out, b64.data + i, n)) < 0 || (r = kp_buf_putc(out, '\n')) < 0)
            goto out;
    }
    r = kp_buf_puts(out, SIG_END "\n");
out:
    kp_buf_done(&b64);
    return r;
}

int kp_sshsig_parse(const char *armored, size_t n, struct kp_sshsig *ret, char **ret_msg)
{
    struct kp_buf b64 = KP_BUF_INIT(KP_MAX_SSHSIG_ARMOUR);
    struct kp_buf raw = KP_BUF_INIT(KP_MAX_SSHSIG_ARMOUR);
    struct kp_sshsig s;
    const char *reason = NULL, *p = armored, *end;
    size_t i;
    bool closed = false;
    int r;

    memset(&s, 0, sizeof(s));
    if (n > KP_MAX_SSHSIG_ARMOUR) {
        reason = "it is longer than 16 KiB";
        r = -KP_ELIMIT;
        goto out;
    }
    while (n > 0 && is_ws(p[0])) {
        p++;
        n--;
    }
    while (n > 0 && is_ws(p[n - 1]))
        n--;
    end = p + n;
    if (n < sizeof(SIG_BEGIN) - 1 || memcmp(p, SIG_BEGIN, sizeof(SIG_BEGIN) - 1) != 0) {
        reason = "it does not start with " SIG_BEGIN;
        r = -KP_EPARSE;
        goto out;
    }
    p += sizeof(SIG_BEGIN) - 1;
    /* The begin marker ends its line: trailing blanks, then a line break. */
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    if (p >= end || *p != '\n') {
        reason = "the begin line has text after " SIG_BEGIN;
        r = -KP_EPARSE;
        goto out;
    }
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

        while (len > 0 && is_ws(p[0])) {
            p++;
            len--;
        }
        while (len > 0 && is_ws(p[len - 1]))
            len--;
        if (len == sizeof(SIG_END) - 1 && memcmp(p, SIG_END, len) == 0) {
            closed = true;
            p += len;
            break;
        }
        for (i = 0; i < len; i++) {
            if (is_ws(p[i]) || p[i] == '\0') {
                reason = "a line of the armour holds a space or other byte outside base64";
                r = -KP_EPARSE;
                goto out;
            }
        }
        if ((r = kp_buf_append(&b64, p, len)) < 0)
            goto out;
        p = nl ? nl + 1 : end;
    }
    if (!closed || p != end) {
        reason = closed ? "there is text after " SIG_END : "it does not end with " SIG_END;
        r = -KP_EPARSE;
        goto out;
    }
    r = kp_base64_decode(b64.data ? b64.data : "", b64.len, 0, &raw);
    if (r < 0) {
        if (r != -ENOMEM) {
            reason = "its body is not valid base64";
            r = -KP_EPARSE;
        }
        goto out;
    }
    s.blob_len = raw.len;
    s.blob = (unsigned char *)kp_buf_steal(&raw, NULL);
    if (!s.blob) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = blob_parse(&s, &reason)) < 0)
        goto out;
    *ret = s;
    memset(&s, 0, sizeof(s)); /* the caller owns the blob now */
    r = 0;
out:
    if (r < 0 && r != -ENOMEM)
        kp_msg_set(ret_msg, "the signature is not an armored SSH signature: %s",
                   reason ? reason : kp_strerror(r));
    kp_sshsig_done(&s);
    kp_buf_done(&b64);
    kp_buf_done(&raw);
    return r;
}

void kp_sshsig_done(struct kp_sshsig *s)
{
    if (!s)
        return;
    kp_free(s->blob);
    memset(s, 0, sizeof(*s));
}

/* --- trusted lines ------------------------------------------------------------------------- */

/* The next token of an authorized_keys line at or after *pos: runs of non-blank bytes, blanks
 * inside double quotes included (options such as command="a b"). false at the end. */
static bool next_token(const char *p, size_t n, size_t *pos, const char **ret_tok, size_t *ret_len)
{
    size_t i = *pos, start;
    bool quoted = false;

    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (i >= n)
        return false;
    start = i;
    for (; i < n; i++) {
        if (p[i] == '"')
            quoted = !quoted;
        else if (p[i] == '\\' && quoted && i + 1 < n)
            i++;
        else if (!quoted && (p[i] == ' ' || p[i] == '\t'))
            break;
    }
    *ret_tok = p + start;
    *ret_len = i - start;
    *pos = i;
    return true;
}

/* Whether an option list (or a principals field) of n bytes holds the cert-authority flag: an
 * element between commas outside double quotes equal to "cert-authority" in any case, as
 * OpenSSH's opt_flag matches it. */
static bool opts_cert_authority(const char *p, size_t n)
{
    static const char flag[] = "cert-authority";
    size_t start = 0;
    bool quoted = false;

    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] == '"')
            quoted = !quoted;
        else if (i < n && p[i] == '\\' && quoted && i + 1 < n)
            i++;
        else if (i == n || (!quoted && p[i] == ',')) {
            if (i - start == sizeof(flag) - 1 && strncasecmp(p + start, flag, i - start) == 0)
                return true;
            start = i + 1;
        }
    }
    return false;
}

int kp_sshsig_signer_parse(const char *line, size_t n, struct kp_sshsig_signer *ret, char **ret_msg)
{
    struct kp_buf blob = KP_BUF_INIT(KP_MAX_SSH_KEY_BLOB);
    struct kp_sshsig_signer s;
    const struct sig_keytype *kt = NULL;
    struct sig_key key;
    const char *reason = NULL, *tok = NULL;
    size_t pos = 0, tlen = 0;
    bool ca = false, cert = false;
    int r;

    memset(&s, 0, sizeof(s));
    if (n > KP_MAX_SSHSIG_SIGNER_LINE) {
        reason = "the line is longer than 32 KiB";
        r = -KP_ELIMIT;
        goto out;
    }
    if (memchr(line, '\0', n)) {
        reason = "the line holds a NUL byte";
        r = -KP_EPARSE;
        goto out;
    }
    while (n > 0 && is_ws(line[n - 1]))
        n--;
    while (pos < n && (line[pos] == ' ' || line[pos] == '\t'))
        pos++;
    if (pos >= n || line[pos] == '#') {
        r = -ENOENT; /* blank or a comment: nothing to say */
        goto out;
    }
    /* Options, or an allowed_signers principals field, come before the key type; a quoted
     * option is one token, so a key type inside command="..." is never taken for the key. */
    while (next_token(line, n, &pos, &tok, &tlen)) {
        kt = keytype_find(tok, tlen);
        if (kt)
            break;
        if (is_cert_name(tok, tlen)) {
            cert = true;
            break;
        }
        ca = ca || opts_cert_authority(tok, tlen);
    }
    if (cert) {
        reason = "the line is a certificate; to trust certificates, list the public key of the "
                 "CA that signs them with the cert-authority option ('cert-authority ssh-ed25519 "
                 "AAAAC3Nza... ca@example')";
        r = -KP_EPARSE;
        goto out;
    }
    if (!kt) {
        reason = "no key type of ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa, "
                 "sk-ssh-ed25519@openssh.com or sk-ecdsa-sha2-nistp256@openssh.com, followed by "
                 "the base64 key, was found (expected the contents of a .pub file)";
        r = -KP_EPARSE;
        goto out;
    }
    if (!next_token(line, n, &pos, &tok, &tlen)) {
        reason = "the key type is not followed by the base64 key";
        r = -KP_EPARSE;
        goto out;
    }
    r = kp_base64_decode(tok, tlen, 0, &blob);
    if (r < 0 || blob.len == 0) {
        if (r != -ENOMEM) {
            reason = "the key is not valid base64, or longer than 16 KiB";
            r = -KP_EPARSE;
        }
        goto out;
    }
    r = key_decode((const unsigned char *)blob.data, blob.len, &key, &reason);
    if (r < 0) {
        r = -KP_EPARSE;
        goto out;
    }
    if (key.kt != kt) {
        reason = "the key blob's type differs from the line's key type";
        r = -KP_EPARSE;
        goto out;
    }
    if ((r = kp_ssh_fingerprint(blob.data, blob.len, s.fp)) < 0) {
        r = r == -EINVAL ? -KP_EPARSE : r;
        goto out;
    }
    s.keytype = kt->name;
    s.cert_authority = ca;
    s.blob_len = blob.len;
    s.blob = (unsigned char *)kp_buf_steal(&blob, NULL);
    if (!s.blob) {
        r = -ENOMEM;
        goto out;
    }
    *ret = s;
    memset(&s, 0, sizeof(s));
    r = 0;
out:
    if (r < 0 && r != -ENOENT && r != -ENOMEM)
        kp_msg_set(ret_msg, "not an OpenSSH public key line: %s", reason ? reason : kp_strerror(r));
    kp_sshsig_signer_done(&s);
    kp_buf_done(&blob);
    return r;
}

void kp_sshsig_signer_done(struct kp_sshsig_signer *s)
{
    if (!s)
        return;
    kp_free(s->blob);
    memset(s, 0, sizeof(*s));
}

/* --- libcrypto ------------------------------------------------------------------------------ */

/* An EVP_PKEY for a decoded key. 0, -KP_EPARSE (libcrypto refused the key: e.g. a point off
 * its curve) or -ENOMEM. */
static int key_pkey(const struct sig_key *k, EVP_PKEY **ret)
{
    OSSL_PARAM_BLD *bld = NULL;
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = NULL, *check = NULL;
    EVP_PKEY *pkey = NULL;
    BIGNUM *n = NULL, *e = NULL;
    int r = -KP_EPARSE;

    if (k->kt->kind == SIG_ED25519 || k->kt->kind == SIG_SK_ED25519) {
        pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, k->a.data, k->a.len);
        if (!pkey)
            goto out;
        *ret = pkey;
        pkey = NULL;
        r = 0;
        goto out;
    }
    bld = OSSL_PARAM_BLD_new();
    if (!bld) {
        r = -ENOMEM;
        goto out;
    }
    if (k->kt->kind == SIG_RSA) {
        e = BN_bin2bn(k->a.data, (int)k->a.len, NULL);
        n = BN_bin2bn(k->b.data, (int)k->b.len, NULL);
        if (!e || !n || !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) ||
            !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e)) {
            r = -ENOMEM;
            goto out;
        }
        ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    } else {
        if (!OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, k->kt->group, 0) ||
            !OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, k->a.data, k->a.len)) {
            r = -ENOMEM;
            goto out;
        }
        ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    }
    params = OSSL_PARAM_BLD_to_param(bld);
    if (!ctx || !params) {
        r = -ENOMEM;
        goto out;
    }
    if (EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        goto out;
    if (k->kt->kind != SIG_RSA) {
        /* libcrypto decodes the point on import; this also checks it lies on the curve and is
         * not the point at infinity, whatever the import did. */
        check = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
        if (!check || EVP_PKEY_public_check(check) != 1)
            goto out;
    }
    *ret = pkey;
    pkey = NULL;
    r = 0;
out:
    ERR_clear_error();
    EVP_PKEY_free(pkey);
    EVP_PKEY_CTX_free(check);
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(n);
    BN_free(e);
    return r;
}

/* The SSH ECDSA signature (string of mpint r, mpint s) as DER for libcrypto. 0, -KP_EPARSE or
 * -ENOMEM; *ret_der is freed with OPENSSL_free. */
static int ecdsa_der(const struct kp_sshsig_bytes *blob, unsigned char **ret_der, size_t *ret_len)
{
    struct rd rd = {blob->data, blob->len};
    struct kp_sshsig_bytes rb, sb;
    ECDSA_SIG *sig = NULL;
    BIGNUM *br = NULL, *bs = NULL;
    unsigned char *der = NULL;
    int len, r;

    if (!rd_mpint(&rd, &rb) || !rd_mpint(&rd, &sb) || rd.n != 0 || rb.len > SIG_EC_SCALAR_MAX ||
        sb.len > SIG_EC_SCALAR_MAX)
        return -KP_EPARSE;
    sig = ECDSA_SIG_new();
    br = BN_bin2bn(rb.data, (int)rb.len, NULL);
    bs = BN_bin2bn(sb.data, (int)sb.len, NULL);
    if (!sig || !br || !bs || ECDSA_SIG_set0(sig, br, bs) != 1) {
        r = -ENOMEM;
        goto out;
    }
    br = bs = NULL; /* sig owns them now */
    len = i2d_ECDSA_SIG(sig, &der);
    if (len <= 0) {
        r = -ENOMEM;
        goto out;
    }
    *ret_der = der;
    *ret_len = (size_t)len;
    r = 0;
out:
    BN_free(br);
    BN_free(bs);
    ECDSA_SIG_free(sig);
    return r;
}

/* 1 when sig verifies over data with pkey (md NULL for ed25519), 0 when it does not, -ENOMEM. */
static int digest_verify(EVP_PKEY *pkey, const EVP_MD *md, const unsigned char *sig, size_t siglen,
                         const unsigned char *data, size_t len)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    int r;

    if (!m)
        return -ENOMEM;
    r = EVP_DigestVerifyInit(m, NULL, md, NULL, pkey) == 1 &&
        EVP_DigestVerify(m, sig, siglen, data, len) == 1;
    EVP_MD_CTX_free(m);
    ERR_clear_error();
    return r;
}

/* --- verification ------------------------------------------------------------------------- */

/* The parts of one SSH signature field: string(format) string(blob), then what follows. */
struct sig_parts {
    struct kp_sshsig_bytes format, blob, extra;
};

/* Checks a signature (format, blob, extra) by key over the signed data. 0, -KP_EAUTH (does not
 * verify, *reason = bad; or a format that does not belong to the key), -ENOTSUP, -KP_EPARSE
 * (malformed signature blob) or -ENOMEM; *reason says which. */
static int sig_check(const struct sig_parts *s, const struct sig_key *k, const unsigned char *data,
                     size_t len, const char *bad, const char **reason)
{
    unsigned char *der = NULL, *padded = NULL;
    const unsigned char *sig = s->blob.data;
    size_t siglen = s->blob.len;
    const EVP_MD *md = NULL;
    EVP_PKEY *pkey = NULL;
    int r, size;

    switch (k->kt->kind) {
    case SIG_SK_ED25519:
    case SIG_SK_ECDSA:
        *reason = "security-key (sk-*) signatures are not verified by the controller; sign with "
                  "an ed25519, ecdsa or rsa key or CA";
        r = -ENOTSUP;
        goto out;
    case SIG_ED25519:
        if (!bytes_is(&s->format, "ssh-ed25519")) {
            *reason = "its signature format does not belong to an ed25519 key";
            r = -KP_EAUTH;
            goto out;
        }
        if (siglen != SIG_ED25519_SIG_LEN) {
            *reason = "its ed25519 signature is not 64 bytes";
            r = -KP_EPARSE;
            goto out;
        }
        break;
    case SIG_ECDSA:
        if (!bytes_is(&s->format, k->kt->name)) {
            *reason = "its signature format does not belong to the signer's ECDSA key";
            r = -KP_EAUTH;
            goto out;
        }
        md = k->kt->md();
        if ((r = ecdsa_der(&s->blob, &der, &siglen)) < 0) {
            *reason = "its ECDSA signature is not two positive integers r and s";
            goto out;
        }
        sig = der;
        break;
    case SIG_RSA:
        if (bytes_is(&s->format, "rsa-sha2-256")) {
            md = EVP_sha256();
        } else if (bytes_is(&s->format, "rsa-sha2-512")) {
            md = EVP_sha512();
        } else if (bytes_is(&s->format, "ssh-rsa")) {
            *reason = "it is an ssh-rsa signature with SHA-1, which OpenSSH refuses since 8.8; "
                      "sign again with a current ssh-keygen (rsa-sha2-512)";
            r = -ENOTSUP;
            goto out;
        } else {
            *reason = "its signature format does not belong to an RSA key";
            r = -KP_EAUTH;
            goto out;
        }
        break;
    }
    if (s->extra.len != 0) {
        *reason = "its signature field has bytes after the signature";
        r = -KP_EPARSE;
        goto out;
    }
    if ((r = key_pkey(k, &pkey)) < 0) {
        *reason = "libcrypto does not accept the signer's key";
        goto out;
    }
    if (k->kt->kind == SIG_RSA) {
        /* OpenSSH may send a signature shorter than the modulus; libcrypto wants it padded. */
        size = EVP_PKEY_get_size(pkey);
        if (size <= 0 || siglen > (size_t)size || siglen == 0) {
            *reason = "its RSA signature is longer than the key's modulus";
            r = -KP_EPARSE;
            goto out;
        }
        if (siglen < (size_t)size) {
            padded = kp_calloc(1, (size_t)size);
            if (!padded) {
                r = -ENOMEM;
                goto out;
            }
            memcpy(padded + ((size_t)size - siglen), sig, siglen);
            sig = padded;
            siglen = (size_t)size;
        }
    }
    r = digest_verify(pkey, md, sig, siglen, data, len);
    if (r < 0)
        goto out;
    if (r == 0) {
        *reason = bad;
        r = -KP_EAUTH;
        goto out;
    }
    r = 0;
out:
    OPENSSL_free(der);
    kp_free(padded);
    EVP_PKEY_free(pkey);
    return r;
}

static int put_string(struct kp_buf *b, const void *p, size_t n)
{
    unsigned char len[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 8), (unsigned char)n};
    int r;

    if (n > UINT32_MAX)
        return -KP_ELIMIT;
    if ((r = kp_buf_append(b, len, 4)) < 0)
        return r;
    return kp_buf_append(b, p, n);
}

/* What the trusted lines say about one signer. */
struct trust {
    int parsed;       /* lines that parse */
    bool found;       /* one of them trusts the signer */
    bool other_sense; /* one holds the right key in the wrong sense: a plain signer's key as a
                       * cert-authority, or a certificate's CA without cert-authority */
};

/* Scans the trusted entries for the signer: for a plain key (ca NULL) a plain line with its
 * blob, for a certificate a cert-authority line with the blob of its CA. 0 or -ENOMEM. */
static int trusted_find(const char *const *trusted, size_t ntrusted,
                        const struct kp_sshsig_bytes *key, const struct kp_sshsig_bytes *ca,
                        struct trust *ret)
{
    const struct kp_sshsig_bytes *want = ca ? ca : key;

    memset(ret, 0, sizeof(*ret));
    for (size_t i = 0; i < ntrusted; i++) {
        const char *t = trusted[i];
        size_t n = t ? strlen(t) : 0, pos = 0;

        while (pos < n) {
            const char *nl = memchr(t + pos, '\n', n - pos);
            size_t len = nl ? (size_t)(nl - (t + pos)) : n - pos;
            struct kp_sshsig_signer sg;
            int r = kp_sshsig_signer_parse(t + pos, len, &sg, /* ret_msg= */ NULL);

            if (r == -ENOMEM)
                return r;
            if (r == 0) {
                if (ret->parsed < INT32_MAX)
                    ret->parsed++;
                if (sg.blob_len == want->len && memcmp(sg.blob, want->data, sg.blob_len) == 0) {
                    if (sg.cert_authority == (ca != NULL))
                        ret->found = true;
                    else
                        ret->other_sense = true;
                }
                kp_sshsig_signer_done(&sg);
            }
            pos += len + 1;
        }
    }
    return 0;
}

/* A time for a message: "2020-02-01T00:00:00Z" (UTC), "forever" for the largest value. */
static void time_str(uint64_t sec, char out[SIG_TIME_MAX])
{
    char buf[KP_RFC3339_MAX];

    /* 253402300799 is 9999-12-31T23:59:59Z, the last second RFC 3339 can write. */
    if (sec == UINT64_MAX) {
        (void)snprintf(out, SIG_TIME_MAX, "forever");
    } else if (sec <= 253402300799ULL &&
               kp_time_format_rfc3339(sec * KP_USEC_PER_SEC, buf, sizeof(buf)) == 0) {
        /* "2020-02-01T00:00:00.000000Z": drop the microseconds, always zero here. */
        (void)snprintf(out, SIG_TIME_MAX, "%.19sZ", buf);
    } else {
        (void)snprintf(out, SIG_TIME_MAX, "%" PRIu64 " s after 1970", sec);
    }
}

/* The certificate's principals for a message: comma-separated, quoted, cut at SIG_QUOTE_MAX. */
static void principals_str(const struct sig_cert *c, char out[SIG_QUOTE_MAX + 4])
{
    char joined[SIG_QUOTE_MAX + 1] = "";
    struct rd r = {c->principals.data, c->principals.len};
    struct kp_sshsig_bytes p;
    size_t o = 0;

    while (r.n > 0 && rd_cstring(&r, &p) && o <= SIG_QUOTE_MAX) {
        if (o > 0)
            joined[o++] = ',';
        for (size_t i = 0; i < p.len && o <= SIG_QUOTE_MAX; i++)
            joined[o++] = (char)p.data[i];
    }
    quote(joined, o, out);
}

static bool principal_listed(const struct sig_cert *c, const char *name)
{
    struct rd r = {c->principals.data, c->principals.len};
    struct kp_sshsig_bytes p;

    while (r.n > 0 && rd_cstring(&r, &p))
        if (bytes_is(&p, name))
            return true;
    return false;
}

/* The checks of a certificate whose CA is trusted: the CA's signature, user certificate,
 * validity at now, our principal. 0, -KP_EAUTH, -ENOTSUP, -KP_EPARSE or -ENOMEM; on failure
 * *ret_msg says why, after `who` (the certificate's description). */
static int cert_check(const struct sig_cert *c, const unsigned char *blob, uint64_t now,
                      const char *who, char **ret_msg)
{
    const struct sig_parts sig = {c->sig_format, c->sig_blob, c->sig_extra};
    char t1[SIG_TIME_MAX], t2[SIG_TIME_MAX], t3[SIG_TIME_MAX], q[SIG_QUOTE_MAX + 4];
    const char *reason = NULL;
    int r;

    if (c->ca.kt->kind == SIG_RSA && bytes_is(&c->sig_format, "ssh-rsa")) {
        kp_msg_set(ret_msg,
                   "signature by %s is refused: the CA signed the certificate with ssh-rsa "
                   "(SHA-1), which kpssh does not accept; issue it again with ssh-keygen -s "
                   "<ca> -t rsa-sha2-512",
                   who);
        return -ENOTSUP;
    }
    r = sig_check(&sig, &c->ca, blob, c->signed_len,
                  "it does not verify: the certificate was changed after the CA signed it",
                  &reason);
    if (r < 0) {
        if (r != -ENOMEM)
            kp_msg_set(ret_msg, "signature by %s is rejected: bad CA signature: %s", who, reason);
        return r;
    }
    if (c->type != SIG_CERT_USER) {
        kp_msg_set(ret_msg,
                   "signature by %s is rejected: it is a host certificate; signing needs a user "
                   "certificate (ssh-keygen -s without -h)",
                   who);
        return -KP_EAUTH;
    }
    time_str(c->valid_after, t1);
    time_str(c->valid_before, t2);
    time_str(now, t3);
    if (now < c->valid_after) {
        kp_msg_set(ret_msg,
                   "signature by %s is rejected: the certificate is not yet valid (certificate "
                   "valid from %s to %s, now %s)",
                   who, t1, t2, t3);
        return -KP_EAUTH;
    }
    if (now >= c->valid_before) {
        kp_msg_set(ret_msg,
                   "signature by %s is rejected: the certificate has expired (certificate valid "
                   "before %s, now %s)",
                   who, t2, t3);
        return -KP_EAUTH;
    }
    if (c->principals.len == 0) {
        kp_msg_set(ret_msg,
                   "signature by %s is rejected: the certificate lists no principals, and must "
                   "list \"" KP_SSHSIG_PRINCIPAL "\" (ssh-keygen -s <ca> -n " KP_SSHSIG_PRINCIPAL
                   ")",
                   who);
        return -KP_EAUTH;
    }
    if (!principal_listed(c, KP_SSHSIG_PRINCIPAL)) {
        principals_str(c, q);
        kp_msg_set(ret_msg,
                   "signature by %s is rejected: principal \"" KP_SSHSIG_PRINCIPAL
                   "\" is missing from the certificate's principals \"%s\" (ssh-keygen -s <ca> "
                   "-n " KP_SSHSIG_PRINCIPAL ")",
                   who, q);
        return -KP_EAUTH;
    }
    return 0;
}

/* The fingerprint of a certificate's key, as ssh-keygen -l prints it: over the plain key blob
 * (type name and the key's fields), not the certificate. */
static int cert_key_fp(const struct sig_cert *c, char fp[KP_SSH_FP_SIZE])
{
    struct kp_buf b = KP_BUF_INIT(KP_MAX_SSH_KEY_BLOB);
    const char *name = c->key.kt->name;
    int r;

    if ((r = put_string(&b, name, strlen(name))) < 0 ||
        (r = kp_buf_append(&b, c->keyfields.data, c->keyfields.len)) < 0)
        goto out;
    r = kp_ssh_fingerprint(b.data, b.len, fp);
out:
    kp_buf_done(&b);
    return r;
}

int kp_sshsig_verify_at(const char *armored, size_t armored_len, const void *msg, size_t msg_len,
                        const char *ns, const char *const *trusted, size_t ntrusted,
                        int64_t now_unix_sec, char **ret_msg)
{
    struct kp_buf tosign = KP_BUF_INIT(SIG_TOSIGN_MAX);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    struct kp_sshsig s;
    struct sig_cert cert;
    struct sig_key key;
    struct sig_parts parts;
    struct trust tr;
    char fp[KP_SSH_FP_SIZE], cafp[KP_SSH_FP_SIZE], q[SIG_QUOTE_MAX + 4];
    char who[SIG_QUOTE_MAX + 2 * KP_SSH_FP_SIZE + 128];
    const char *reason = NULL;
    const EVP_MD *hash;
    struct kp_sshsig_bytes type = {NULL, 0};
    struct rd tr_rd;
    bool is_cert;
    int r;

    memset(&s, 0, sizeof(s));
    memset(&cert, 0, sizeof(cert));
    r = kp_sshsig_parse(armored, armored_len, &s, ret_msg);
    if (r < 0) {
        r = r == -KP_ELIMIT ? -KP_EPARSE : r;
        goto out;
    }
    tr_rd.p = s.publickey.data;
    tr_rd.n = s.publickey.len;
    is_cert = rd_string(&tr_rd, &type) && is_cert_name(type.data, type.len);
    if (is_cert) {
        r = cert_decode(s.publickey.data, s.publickey.len, &cert, &reason);
        if (r < 0) {
            quote(type.data, type.len, q);
            kp_msg_set(ret_msg, "signature's certificate (%s) is %s: %s", q,
                       r == -ENOTSUP    ? "not supported"
                       : r == -KP_EAUTH ? "refused"
                                        : "malformed",
                       reason);
            goto out;
        }
        key = cert.key;
        if ((r = cert_key_fp(&cert, fp)) < 0 ||
            (r = kp_ssh_fingerprint(cert.ca_blob.data, cert.ca_blob.len, cafp)) < 0) {
            if (r == -EINVAL) {
                r = -KP_EPARSE;
                kp_msg_set(ret_msg, "signature's certificate is longer than 16 KiB");
            } else if (r != -ENOMEM) {
                kp_msg_set(ret_msg, "libcrypto failed to fingerprint the signature's certificate");
            }
            goto out;
        }
        quote(cert.key_id.data, cert.key_id.len, q);
        (void)snprintf(who, sizeof(who),
                       "certificate \"%s\" (serial %" PRIu64 ", %s key %s, CA %s key %s)", q,
                       cert.serial, cert.ct->display, fp, cert.ca.kt->display, cafp);
    } else {
        r = key_decode(s.publickey.data, s.publickey.len, &key, &reason);
        if (r < 0) {
            quote(s.publickey.data + (s.publickey.len >= 4 ? 4 : 0),
                  s.publickey.len >= 4 ? s.publickey.len - 4 : 0, q);
            if (r == -ENOTSUP)
                kp_msg_set(ret_msg, "signature is by a key of type \"%s\": %s", q, reason);
            else
                kp_msg_set(ret_msg, "signature's public key is malformed: %s", reason);
            goto out;
        }
        if ((r = kp_ssh_fingerprint(s.publickey.data, s.publickey.len, fp)) < 0) {
            r = r == -EINVAL ? -KP_EPARSE : r;
            kp_msg_set(ret_msg, "signature's public key is longer than 16 KiB");
            goto out;
        }
        (void)snprintf(who, sizeof(who), "%s key %s", key.kt->display, fp);
    }
    r = trusted_find(trusted, ntrusted, &s.publickey, is_cert ? &cert.ca_blob : NULL, &tr);
    if (r < 0)
        goto out;
    if (tr.parsed == 0) {
        kp_msg_set(ret_msg, "no trustedSigners entry is an OpenSSH public key line (such as "
                            "'ssh-ed25519 AAAAC3Nza... signer@example')");
        r = -EINVAL;
        goto out;
    }
    if (!ns || strlen(ns) != s.ns.len || memcmp(ns, s.ns.data, s.ns.len) != 0) {
        quote(s.ns.data, s.ns.len, q);
        kp_msg_set(
            ret_msg,
            "signature namespace is \"%s\", want \"%s\" (sign with ssh-keygen -Y sign -n %s)", q,
            ns ? ns : "", ns ? ns : "");
        r = -KP_EAUTH;
        goto out;
    }
    if (!tr.found && is_cert) {
        kp_msg_set(ret_msg,
                   "signature is by %s, whose CA is not a cert-authority entry among "
                   "trustedSigners%s",
                   who,
                   tr.other_sense ? " (the CA key is listed, but without the cert-authority "
                                    "option, so only its own signatures are trusted)"
                                  : "");
        r = -KP_EAUTH;
        goto out;
    }
    if (!tr.found) {
        kp_msg_set(ret_msg, "signature is by %s, which is not among trustedSigners%s", who,
                   tr.other_sense ? " (the key is listed with cert-authority, which trusts the "
                                    "certificates it signs, not its own signatures)"
                                  : "");
        r = -KP_EAUTH;
        goto out;
    }
    if (is_cert &&
        (r = cert_check(&cert, s.publickey.data, now_unix_sec < 0 ? 0 : (uint64_t)now_unix_sec, who,
                        ret_msg)) < 0)
        goto out;
    if (bytes_is(&s.hash_alg, "sha256")) {
        hash = EVP_sha256();
    } else if (bytes_is(&s.hash_alg, "sha512")) {
        hash = EVP_sha512();
    } else {
        quote(s.hash_alg.data, s.hash_alg.len, q);
        kp_msg_set(ret_msg, "signature by %s uses hash \"%s\"; kpssh accepts sha256 and sha512",
                   who, q);
        r = -ENOTSUP;
        goto out;
    }
    if (EVP_Digest(msg_len ? msg : "", msg_len, digest, &dlen, hash, NULL) != 1) {
        ERR_clear_error();
        r = -EIO;
        goto out;
    }
    if ((r = kp_buf_append(&tosign, SIG_MAGIC, SIG_MAGIC_LEN)) < 0 ||
        (r = put_string(&tosign, s.ns.data, s.ns.len)) < 0 ||
        (r = put_string(&tosign, "", 0)) < 0 ||
        (r = put_string(&tosign, s.hash_alg.data, s.hash_alg.len)) < 0 ||
        (r = put_string(&tosign, digest, dlen)) < 0) {
        r = r == -KP_ELIMIT ? -KP_EPARSE : r;
        goto out;
    }
    parts.format = s.sig_format;
    parts.blob = s.sig_blob;
    parts.extra = s.sig_extra;
    r = sig_check(&parts, &key, (const unsigned char *)tosign.data, tosign.len,
                  "the signature does not verify: the script or the signature was changed after "
                  "signing, or it was signed over other bytes",
                  &reason);
    if (r < 0 && r != -ENOMEM)
        kp_msg_set(ret_msg, "signature by %s is rejected: %s", who, reason);
out:
    kp_buf_done(&tosign);
    kp_sshsig_done(&s);
    return r;
}

int kp_sshsig_verify(const char *armored, size_t armored_len, const void *msg, size_t msg_len,
                     const char *ns, const char *const *trusted, size_t ntrusted, char **ret_msg)
{
    return kp_sshsig_verify_at(armored, armored_len, msg, msg_len, ns, trusted, ntrusted,
                               (int64_t)(kp_real_usec() / KP_USEC_PER_SEC), ret_msg);
}
