/* provider/ssh/sshsig.h: controller-side verification of OpenSSH signatures (SSHSIG).
 *
 * A Verified host runs only scripts signed with `ssh-keygen -Y sign -n kpssh`. The host's shim
 * checks that with the host's own ssh-keygen; the controller checks the same signature before it
 * dials, against the SSHHost's spec.trustedSigners, so a bad signature is a configuration error
 * reported on the object rather than a failed join. Format: PROTOCOL.sshsig of OpenSSH.
 *
 * Three pieces: the armour parser (kp_sshsig_parse), the trusted-line parser
 * (kp_sshsig_signer_parse) and the verifier that uses both (kp_sshsig_verify_at, and
 * kp_sshsig_verify for the current time). The parsers are pure and bounded and fuzzed
 * (tests/fuzz/fuzz-sshsig.c, fuzz-signers.c); the verifier adds libcrypto and nothing else: no
 * I/O, no globals, and the time is an input. Any thread. Outputs are written only on success. */
#ifndef KP_PROVIDER_SSH_SSHSIG_H
#define KP_PROVIDER_SSH_SSHSIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "provider/ssh/knownhosts.h"

/* Ceiling for one armoured signature (equal to the profile's KP_MAX_PROFILE_SIGNATURE), and for
 * one trusted line. */
#define KP_MAX_SSHSIG_ARMOUR (16u * 1024u)
#define KP_MAX_SSHSIG_SIGNER_LINE (32u * 1024u)

/* The principal a signing certificate must list (ssh-keygen -s ... -n kpssh): the one the host's
 * shim names to ssh-keygen -Y verify -I. */
#define KP_SSHSIG_PRINCIPAL "kpssh"

/* Bytes inside a decoded blob; never NUL-terminated. */
struct kp_sshsig_bytes {
    const unsigned char *data;
    size_t len;
};

/* The fields of one SSHSIG blob. blob is owned (kp_sshsig_done); the other fields point into it.
 * The parse checks structure only: magic, version 1, every field present, nothing after the
 * signature, and the signature field being string(format) string(blob) [extra]; extra holds
 * what follows (security-key flags and counter) and is checked by the verifier. */
struct kp_buf;

struct kp_sshsig {
    unsigned char *blob;
    size_t blob_len;
    uint32_t version;
    struct kp_sshsig_bytes publickey; /* the signer's key blob (SSH wire encoding) */
    struct kp_sshsig_bytes ns;        /* namespace */
    struct kp_sshsig_bytes reserved;
    struct kp_sshsig_bytes hash_alg;  /* "sha256" or "sha512" for signatures we verify */
    struct kp_sshsig_bytes signature; /* the whole signature field */
    struct kp_sshsig_bytes sig_format, sig_blob, sig_extra; /* its parts */
};

/* Parses an armoured signature ("-----BEGIN SSH SIGNATURE-----", base64 lines, "-----END SSH
 * SIGNATURE-----"; whitespace around it and CRLF line ends allowed) of n bytes into *ret.
 * 0, -KP_EPARSE (malformed), -KP_ELIMIT (more than KP_MAX_SSHSIG_ARMOUR bytes) or -ENOMEM;
 * on failure *ret_msg (optional, base/err.h) says what is wrong. Release *ret with
 * kp_sshsig_done(). Pure over (ptr, len). */
int kp_sshsig_parse(const char *armored, size_t n, struct kp_sshsig *ret, char **ret_msg) KP_WUR;
/* Releases what kp_sshsig_parse() stored; s may be NULL; leaves *s empty. */
void kp_sshsig_done(struct kp_sshsig *s);

/* Appends the canonical armour of a parsed signature to out, as ssh-keygen writes it (begin
 * line, base64 in lines of 70, end line, each ending in LF): what the controller accepted in
 * any whitespace the manifest left is what a host's `ssh-keygen -Y verify` reads. 0, -ENOMEM or
 * -KP_ELIMIT. */
int kp_sshsig_armor(const struct kp_sshsig *s, struct kp_buf *out) KP_WUR;

/* One trusted signer: the key of an OpenSSH public-key line. */
struct kp_sshsig_signer {
    const char *keytype; /* static: "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", ... */
    unsigned char *blob; /* owned: the decoded key blob */
    size_t blob_len;
    char fp[KP_SSH_FP_SIZE]; /* "SHA256:..." of blob, as ssh-keygen -l prints it */
    /* The line has the cert-authority option: it trusts user certificates signed by this key,
     * and not signatures by the key itself (allowed_signers semantics). */
    bool cert_authority;
};

/* Parses one line of n bytes in authorized_keys style: optional options (double quotes may hold
 * spaces), key type, base64 key blob, optional comment. A leading principals field as in an
 * allowed_signers file is skipped like an option. An option list (any field before the key type,
 * split at commas outside double quotes) holding `cert-authority`, in any case, sets
 * cert_authority; other options are not interpreted. The blob must decode strictly, name the
 * same type as the line and be a well-formed key of one of ssh-ed25519,
 * ecdsa-sha2-nistp256/384/521, ssh-rsa (1024 bits or more), sk-ssh-ed25519@openssh.com,
 * sk-ecdsa-sha2-nistp256@openssh.com; a certificate is not a trusted line (its CA is, with
 * cert-authority). 0; -ENOENT for a blank line or a '#' comment; -KP_EPARSE (no key, or a
 * malformed one);
 * -KP_ELIMIT (longer than KP_MAX_SSHSIG_SIGNER_LINE); -ENOMEM; -EIO (libcrypto failed). On
 * failure *ret_msg (optional) says why. Release *ret with kp_sshsig_signer_done(). Pure. */
int kp_sshsig_signer_parse(const char *line, size_t n, struct kp_sshsig_signer *ret,
                           char **ret_msg) KP_WUR;
void kp_sshsig_signer_done(struct kp_sshsig_signer *s);

/* Verifies an armored SSHSIG over msg at time now_unix_sec (seconds since 1970, UTC; times
 * before 1970 count as 1970). The namespace must equal `ns`, hash sha256 or sha512, and the
 * signer must be trusted by one of the trusted lines (OpenSSH public key lines, authorized_keys
 * style: optional options, keytype, base64 blob, comment; blank lines and # comments skipped),
 * with the rules of an OpenSSH allowed_signers file:
 *   - a plain key is trusted by a line without cert-authority whose key byte-equals it;
 *   - a certificate (ssh-ed25519-cert-v01@openssh.com, ecdsa-sha2-nistp256/384/521-cert-v01@
 *     openssh.com, ssh-rsa-cert-v01@openssh.com; PROTOCOL.certkeys) is trusted by a
 *     cert-authority line whose key byte-equals the certificate's signature key, when the CA's
 *     signature over the certificate verifies, it is a user certificate, valid_after <= now <
 *     valid_before, and its principals include KP_SSHSIG_PRINCIPAL exactly. Critical options
 *     and extensions must be well formed and are otherwise ignored, as ssh-keygen -Y verify
 *     ignores them. A certificate is never trusted by a plain line, nor a plain key by a
 *     cert-authority line.
 * Then the signature must verify with the signer's key (a certificate's embedded key). Options
 * other than cert-authority (namespaces=, valid-after=, valid-before=, a principals field) are
 * not interpreted. 0 when it verifies; otherwise a negative code and *ret_msg (optional) a human
 * sentence naming the signer (key type and SHA256 fingerprint; for a certificate also its key
 * id, serial and the CA's fingerprint) and the reason:
 *   -KP_EPARSE  armour, blob or certificate malformed (bounded parser)
 *   -KP_EAUTH   well-formed but rejected: namespace mismatch, signer or CA not trusted, bad
 *               signature, bad CA signature, certificate expired or not yet valid, principal
 *               missing, host certificate, CA key itself a certificate
 *   -ENOTSUP    algorithm we do not verify (e.g. ssh-rsa with SHA-1, for the signature or for a
 *               certificate's CA signature; security keys)
 *   -EINVAL     no trusted line parses
 *   -ENOMEM
 *   -EIO        libcrypto failed for another reason than the signature
 * A trusted entry may hold several lines (a file's contents); each line counts on its own and
 * lines that do not parse are skipped. Security-key signatures (sk-*), by a key or a CA, are
 * refused with -ENOTSUP: we have no way to produce a reference signature to test them against.
 * Pure: same inputs, same answer. Any thread. */
int kp_sshsig_verify_at(const char *armored, size_t armored_len, const void *msg, size_t msg_len,
                        const char *ns, const char *const *trusted, size_t ntrusted,
                        int64_t now_unix_sec, char **ret_msg) KP_WUR;

/* kp_sshsig_verify_at at the current wall-clock time (CLOCK_REALTIME), which only matters for
 * certificates: their validity window is checked against it, as ssh-keygen -Y verify does. */
int kp_sshsig_verify(const char *armored, size_t armored_len, const void *msg, size_t msg_len,
                     const char *ns, const char *const *trusted, size_t ntrusted,
                     char **ret_msg) KP_WUR;

#endif
