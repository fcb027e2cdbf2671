/* provider/ssh/knownhosts.h: SSH host-key pins and SHA256 fingerprints.
 *
 * A pin says which host key a host must present. It comes from the `knownHost` field of an
 * SSHHost's key Secret (the pre-pin) or from status.hostKeyFingerprint (the TOFU pin). The
 * pre-pin may be written in any of three forms, one or more lines of them:
 *
 *   SHA256:AbC...                         a fingerprint as `ssh-keygen -lf` prints it
 *   ssh-ed25519 AAAA... comment           a public-key line (any host)
 *   h1,10.0.0.7 ssh-ed25519 AAAA...       a known_hosts line, incl. [host]:port and hashed
 *                                         |1|salt|hash host fields; lines for other hosts are
 *                                         skipped; @revoked lines that name the host forbid
 *                                         their key; @cert-authority lines are refused
 *
 * Everything here is pure (no I/O, no globals), bounded and fuzzed
 * (tests/fuzz/fuzz-knownhosts.c). Any thread. Outputs are written only on success. */
#ifndef KP_PROVIDER_SSH_KNOWNHOSTS_H
#define KP_PROVIDER_SSH_KNOWNHOSTS_H

#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_buf;

/* "SHA256:" plus 43 characters of unpadded base64: the form OpenSSH prints. */
#define KP_SSH_FP_LEN 50
#define KP_SSH_FP_SIZE (KP_SSH_FP_LEN + 1)
/* Ceilings for a pre-pin: the whole text, and the keys it may name. */
#define KP_MAX_KNOWNHOSTS (64 * 1024)
#define KP_KNOWNHOSTS_MAX_KEYS 16
/* The longest key blob we accept (an RSA-16384 public key is about 2 KiB). */
#define KP_MAX_SSH_KEY_BLOB (16 * 1024)

struct kp_knownhosts_key {
    char fp[KP_SSH_FP_SIZE]; /* canonical "SHA256:..." */
    const char *keytype;     /* static string ("ssh-ed25519", ...) or NULL for a bare fingerprint */
};

/* A parsed pin set. Plain data: copy it freely. */
struct kp_knownhosts {
    unsigned nkeys;    /* accepted keys: the host must present one of them */
    unsigned nrevoked; /* keys named by @revoked lines for this host: never accepted */
    struct kp_knownhosts_key keys[KP_KNOWNHOSTS_MAX_KEYS];
    struct kp_knownhosts_key revoked[KP_KNOWNHOSTS_MAX_KEYS];
};

/* Where and why a parse failed: line counts from 1; reason is a static string. */
struct kp_knownhosts_error {
    unsigned line;
    const char *reason;
};

/* Writes the fingerprint of a public-key blob (the SSH wire encoding) as "SHA256:" + unpadded
 * base64 of its SHA-256, NUL-terminated, into ret_fp. 0, -EINVAL (empty or longer than
 * KP_MAX_SSH_KEY_BLOB) or -EIO (libcrypto failed). */
int kp_ssh_fingerprint(const void *blob, size_t len, char ret_fp[KP_SSH_FP_SIZE]) KP_WUR;

/* Decodes a base64 public key (the second field of a public-key line), checks that its blob is
 * well formed and of a type we know, and writes its fingerprint and static type name.
 * 0, -KP_EPARSE or -EIO. */
int kp_ssh_key_fingerprint(const char *b64, size_t len, char ret_fp[KP_SSH_FP_SIZE],
                           const char **ret_keytype) KP_WUR;

/* Parses one fingerprint ("SHA256:" + 43 base64 characters, padding '=' allowed) into its
 * canonical unpadded form. For the TOFU pin. 0 or -KP_EPARSE. */
int kp_ssh_fingerprint_parse(const char *p, size_t len, char ret_fp[KP_SSH_FP_SIZE]) KP_WUR;

/* Parses a pre-pin of n bytes for the host we dial (host as given to the session, port 0 means
 * 22). Blank lines and '#' comments are skipped. Returns 0 with at least one key, -ENOENT when
 * nothing in it applies to this host, -KP_EPARSE (malformed, MD5 fingerprint, @cert-authority:
 * reterr says which line and why), -KP_ELIMIT (more than KP_MAX_KNOWNHOSTS bytes or
 * KP_KNOWNHOSTS_MAX_KEYS keys) or -EIO (libcrypto failed). reterr is optional and written only
 * on failure. */
int kp_knownhosts_parse(const char *p, size_t n, const char *host, uint16_t port,
                        struct kp_knownhosts *ret, struct kp_knownhosts_error *reterr) KP_WUR;

/* Checks a presented fingerprint against a pin set: 0 when it is one of the keys and not
 * revoked, -KP_EHOSTKEY otherwise. */
int kp_knownhosts_check(const struct kp_knownhosts *kh, const char *fp) KP_WUR;

/* Appends to out the host-key algorithms (libssh's comma list) that can produce the pinned keys,
 * so the server is asked for a key we can check; appends nothing when any pin is a bare
 * fingerprint (its type is unknown). 0, -ENOMEM or -KP_ELIMIT. */
int kp_knownhosts_algorithms(const struct kp_knownhosts *kh, struct kp_buf *out) KP_WUR;

#endif
