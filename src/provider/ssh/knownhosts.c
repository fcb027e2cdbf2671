/* DESIGN: host-key pins (knownhosts.h).
 *
 * What: turns the operator's `knownHost` text into a small set of canonical SHA256
 * fingerprints for the one host being dialed, and checks a presented fingerprint against it.
 *
 * Why this way: the session compares fingerprints only, so every accepted form (fingerprint,
 * public-key line, known_hosts line) is reduced to "SHA256:<43 base64>" at parse time and a
 * presented key is reduced the same way. Parsing is strict: a pin is a security decision, so a
 * typo anywhere in the text is an error with its line number, never a silently skipped line
 * that would leave the host unpinned. Lines for other hosts are skipped (one Secret may carry
 * ssh-keyscan output for a whole rack). Host matching follows OpenSSH: comma-separated
 * patterns with '*' and '?', '!' negation, "[host]:port" for ports other than 22, hashed
 * "|1|salt|hash" fields (HMAC-SHA1 keyed by the salt over that same name), case-insensitive.
 * @cert-authority lines are refused rather than ignored: an operator who wrote one expects
 * certificate checking, and quietly accepting any key instead would be worse than an error.
 *
 * Base64 is decoded by a small strict decoder here: OpenSSL's EVP_DecodeBlock accepts
 * whitespace and does not report padding, and a fingerprint must be canonical to compare.
 * base64 comes from base/base64.h.
 *
 * Threads: pure functions, no globals; any thread. Invariant: everything written to a
 * struct kp_knownhosts is canonical (fixed length, our alphabet), never outside bytes. */
#include "provider/ssh/knownhosts.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/err.h"

/* A DNS name is at most 253 characters; "[" name "]:" port adds 8. */
#define KH_NAME_MAX 272
#define KH_SHA256_LEN 32
#define KH_SHA1_LEN 20
#define KH_SALT_MAX 64

struct kh_keytype {
    const char *name;       /* as in a public-key line and inside the blob */
    const char *algorithms; /* libssh host-key algorithms that produce this key type */
};

static const struct kh_keytype kh_keytypes[] = {
    {"ssh-ed25519", "ssh-ed25519"},
    {"ecdsa-sha2-nistp256", "ecdsa-sha2-nistp256"},
    {"ecdsa-sha2-nistp384", "ecdsa-sha2-nistp384"},
    {"ecdsa-sha2-nistp521", "ecdsa-sha2-nistp521"},
    /* SHA-1 "ssh-rsa" signatures are off in libssh 0.10 and OpenSSH 8.8+: ask for SHA-2. */
    {"ssh-rsa", "rsa-sha2-512,rsa-sha2-256"},
};

/* Strict base64 (base/base64.h) of a non-empty key blob into out[cap]. 0 or -KP_EPARSE. */
static int kh_b64_decode(const char *p, size_t n, unsigned char *out, size_t cap, size_t *ret_len)
{
    struct kp_buf b = KP_BUF_INIT(cap);
    int r;

    if (n == 0)
        return -KP_EPARSE;
    r = kp_base64_decode(p, n, 0, &b);
    if (r == 0 && b.len > 0)
        memcpy(out, b.data, b.len);
    if (r == 0)
        *ret_len = b.len;
    kp_buf_done(&b);
    return r == -ENOMEM ? r : (r < 0 ? -KP_EPARSE : 0);
}

static void kh_fp_from_digest(const unsigned char digest[KH_SHA256_LEN],
                              char ret_fp[KP_SSH_FP_SIZE])
{
    memcpy(ret_fp, "SHA256:", 7);
    if (kp_base64_encode_to(digest, KH_SHA256_LEN, KP_BASE64_NOPAD, ret_fp + 7,
                            KP_SSH_FP_SIZE - 7) < 0)
        abort(); /* KP_SSH_FP_SIZE is sized for a SHA-256 digest */
}

int kp_ssh_fingerprint(const void *blob, size_t len, char ret_fp[KP_SSH_FP_SIZE])
{
    unsigned char digest[KH_SHA256_LEN];
    unsigned int dlen = 0;

    if (len == 0 || len > KP_MAX_SSH_KEY_BLOB)
        return -EINVAL;
    if (EVP_Digest(blob, len, digest, &dlen, EVP_sha256(), NULL) != 1 || dlen != KH_SHA256_LEN)
        return -EIO;
    kh_fp_from_digest(digest, ret_fp);
    return 0;
}

static const struct kh_keytype *kh_keytype_find(const char *p, size_t n)
{
    for (size_t i = 0; i < KP_ARRAY_SIZE(kh_keytypes); i++)
        if (strlen(kh_keytypes[i].name) == n && memcmp(kh_keytypes[i].name, p, n) == 0)
            return &kh_keytypes[i];
    return NULL;
}

/* Decodes a key blob, checks that it starts with a known type name (equal to want when given)
 * and fingerprints it. */
static int kh_key_fingerprint(const char *b64, size_t len, const char *want, size_t want_len,
                              char ret_fp[KP_SSH_FP_SIZE], const char **ret_keytype)
{
    const struct kh_keytype *kt;
    unsigned char *blob = NULL;
    size_t cap, blen = 0;
    uint32_t tlen;
    int r;

    if (len == 0 || len > (KP_MAX_SSH_KEY_BLOB / 3) * 4 + 4) {
        r = -KP_EPARSE;
        goto out;
    }
    cap = len / 4 * 3 + 3;
    blob = kp_malloc(cap);
    if (!blob) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = kh_b64_decode(b64, len, blob, cap, &blen)) < 0)
        goto out;
    if (blen < 4) {
        r = -KP_EPARSE;
        goto out;
    }
    tlen =
        ((uint32_t)blob[0] << 24) | ((uint32_t)blob[1] << 16) | ((uint32_t)blob[2] << 8) | blob[3];
    /* The type name, then at least one more byte of key material. */
    if (tlen == 0 || tlen > 64 || (size_t)tlen + 4 >= blen) {
        r = -KP_EPARSE;
        goto out;
    }
    kt = kh_keytype_find((const char *)blob + 4, tlen);
    if (!kt || (want && (want_len != tlen || memcmp(want, blob + 4, tlen) != 0))) {
        r = -KP_EPARSE;
        goto out;
    }
    if ((r = kp_ssh_fingerprint(blob, blen, ret_fp)) < 0)
        goto out;
    *ret_keytype = kt->name;
    r = 0;
out:
    kp_free(blob);
    return r;
}

int kp_ssh_key_fingerprint(const char *b64, size_t len, char ret_fp[KP_SSH_FP_SIZE],
                           const char **ret_keytype)
{
    char fp[KP_SSH_FP_SIZE];
    const char *kt = NULL;
    int r;

    r = kh_key_fingerprint(b64, len, /* want= */ NULL, 0, fp, &kt);
    if (r < 0)
        return r;
    memcpy(ret_fp, fp, KP_SSH_FP_SIZE);
    *ret_keytype = kt;
    return 0;
}

int kp_ssh_fingerprint_parse(const char *p, size_t len, char ret_fp[KP_SSH_FP_SIZE])
{
    unsigned char digest[KH_SHA256_LEN];
    size_t dlen = 0;

    if (len < 7 || memcmp(p, "SHA256:", 7) != 0)
        return -KP_EPARSE;
    p += 7;
    len -= 7;
    if (len != 43 && !(len == 44 && p[43] == '='))
        return -KP_EPARSE;
    if (kh_b64_decode(p, len, digest, sizeof(digest), &dlen) < 0 || dlen != KH_SHA256_LEN)
        return -KP_EPARSE;
    kh_fp_from_digest(digest, ret_fp);
    return 0;
}

static unsigned char kh_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Glob match of the pattern p[n] ('*' any run, '?' one byte) against name, case-insensitive.
 * The classic single-backtrack walk: O(n * len(name)) at worst, no recursion. */
static bool kh_glob(const char *p, size_t n, const char *name, size_t nlen)
{
    size_t pi = 0, ni = 0, star_p = SIZE_MAX, star_n = 0;

    while (ni < nlen) {
        if (pi < n &&
            (p[pi] == '?' || kh_lower((unsigned char)p[pi]) == kh_lower((unsigned char)name[ni]))) {
            pi++;
            ni++;
        } else if (pi < n && p[pi] == '*') {
            star_p = pi++;
            star_n = ni;
        } else if (star_p != SIZE_MAX) {
            pi = star_p + 1;
            ni = ++star_n;
        } else {
            return false;
        }
    }
    while (pi < n && p[pi] == '*')
        pi++;
    return pi == n;
}

/* Matches the host field of a known_hosts line against name. 1 match, 0 no match, or a
 * negative error for a malformed field. */
static int kh_match_hosts(const char *f, size_t n, const char *name, size_t nlen,
                          const char **reason)
{
    bool matched = false;
    size_t i = 0;

    if (n >= 3 && memcmp(f, "|1|", 3) == 0) {
        unsigned char salt[KH_SALT_MAX], hash[KH_SHA1_LEN], mac[EVP_MAX_MD_SIZE];
        size_t slen = 0, hlen = 0;
        unsigned int mlen = 0;
        const char *bar = memchr(f + 3, '|', n - 3);

        if (!bar || memchr(f, ',', n) ||
            kh_b64_decode(f + 3, (size_t)(bar - f) - 3, salt, sizeof(salt), &slen) < 0 ||
            kh_b64_decode(bar + 1, n - (size_t)(bar + 1 - f), hash, sizeof(hash), &hlen) < 0 ||
            hlen != KH_SHA1_LEN) {
            *reason = "malformed hashed host field (expected |1|<salt>|<hash>)";
            return -KP_EPARSE;
        }
        if (!HMAC(EVP_sha1(), salt, (int)slen, (const unsigned char *)name, nlen, mac, &mlen) ||
            mlen != KH_SHA1_LEN) {
            *reason = "HMAC-SHA1 failed";
            return -EIO;
        }
        return CRYPTO_memcmp(mac, hash, KH_SHA1_LEN) == 0;
    }
    while (i < n) {
        const char *pat = f + i, *comma = memchr(pat, ',', n - i);
        size_t plen = comma ? (size_t)(comma - pat) : n - i;
        bool negate = plen > 0 && pat[0] == '!';

        if (negate) {
            pat++;
            plen--;
        }
        if (plen == 0) {
            *reason = "empty host pattern";
            return -KP_EPARSE;
        }
        if (kh_glob(pat, plen, name, nlen)) {
            if (negate)
                return 0; /* a negated match rules the line out, whatever else matches */
            matched = true;
        }
        i += (comma ? plen + 1 : plen) + (negate ? 1 : 0);
    }
    return matched;
}

struct kh_line {
    const char *tok[4];
    size_t len[4];
    unsigned ntok; /* tokens found, at most 4 (the fourth holds the rest: a comment) */
};

static void kh_split(const char *p, size_t n, struct kh_line *l)
{
    size_t i = 0;

    l->ntok = 0;
    while (i < n && l->ntok < 4) {
        size_t start;

        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        if (i >= n)
            break;
        start = i;
        if (l->ntok == 3) {
            i = n; /* the rest of the line is one comment token */
        } else {
            while (i < n && p[i] != ' ' && p[i] != '\t')
                i++;
        }
        l->tok[l->ntok] = p + start;
        l->len[l->ntok] = i - start;
        l->ntok++;
    }
}

static bool kh_tok_is(const struct kh_line *l, unsigned i, const char *s)
{
    return i < l->ntok && strlen(s) == l->len[i] && memcmp(l->tok[i], s, l->len[i]) == 0;
}

static bool kh_tok_startswith(const struct kh_line *l, unsigned i, const char *s)
{
    size_t n = strlen(s);

    return i < l->ntok && l->len[i] >= n && memcmp(l->tok[i], s, n) == 0;
}

static bool kh_all_digits(const char *p, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

/* True for a token that names a key type (known or not), as opposed to a host pattern. */
static bool kh_looks_like_keytype(const char *p, size_t n)
{
    return (n > 4 && memcmp(p, "ssh-", 4) == 0) || (n > 6 && memcmp(p, "ecdsa-", 6) == 0) ||
           (n > 3 && memcmp(p, "sk-", 3) == 0);
}

static int kh_add(struct kp_knownhosts *kh, bool revoked, const char *fp, const char *keytype,
                  const char **reason)
{
    unsigned *count = revoked ? &kh->nrevoked : &kh->nkeys;
    struct kp_knownhosts_key *set = revoked ? kh->revoked : kh->keys;

    for (unsigned i = 0; i < *count; i++)
        if (strcmp(set[i].fp, fp) == 0)
            return 0; /* the same key twice (e.g. two host lines): keep one */
    if (*count >= KP_KNOWNHOSTS_MAX_KEYS) {
        *reason = "too many keys";
        return -KP_ELIMIT;
    }
    memcpy(set[*count].fp, fp, KP_SSH_FP_SIZE);
    set[*count].keytype = keytype;
    (*count)++;
    return 0;
}

static int kh_key_error(int r, const char **reason)
{
    if (r == -KP_EPARSE)
        *reason = "malformed public key (expected a supported key type and its base64 blob: "
                  "ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa)";
    else if (r == -ENOMEM)
        *reason = "out of memory";
    else
        *reason = "libcrypto failed";
    return r;
}

static int kh_parse_line(const char *p, size_t n, const char *name, size_t nlen,
                         struct kp_knownhosts *kh, const char **reason)
{
    char fp[KP_SSH_FP_SIZE];
    const char *kt = NULL, *rest;
    struct kh_line l;
    bool revoked = false;
    unsigned t = 0;
    int r;

    kh_split(p, n, &l);
    if (l.ntok == 0)
        return 0;
    /* "SHA256:..." alone or after the bit count, as ssh-keygen -lf prints it. */
    if (kh_tok_startswith(&l, 0, "SHA256:") ||
        (kh_all_digits(l.tok[0], l.len[0]) && kh_tok_startswith(&l, 1, "SHA256:"))) {
        t = kh_tok_startswith(&l, 0, "SHA256:") ? 0 : 1;
        if (kp_ssh_fingerprint_parse(l.tok[t], l.len[t], fp) < 0) {
            *reason = "malformed SHA256 fingerprint (expected SHA256: and 43 base64 characters)";
            return -KP_EPARSE;
        }
        return kh_add(kh, false, fp, /* keytype= */ NULL, reason);
    }
    if (kh_tok_startswith(&l, 0, "MD5:") ||
        (kh_all_digits(l.tok[0], l.len[0]) && kh_tok_startswith(&l, 1, "MD5:"))) {
        *reason = "MD5 fingerprints are not accepted: give the SHA256 one (ssh-keygen -lf)";
        return -KP_EPARSE;
    }
    if (l.tok[0][0] == '@') {
        if (kh_tok_is(&l, 0, "@cert-authority")) {
            *reason = "@cert-authority lines are not supported: pin the host key itself or its "
                      "SHA256 fingerprint";
            return -KP_EPARSE;
        }
        if (!kh_tok_is(&l, 0, "@revoked")) {
            *reason = "unknown marker (only @revoked is understood)";
            return -KP_EPARSE;
        }
        revoked = true;
        if (l.ntok < 2) {
            *reason = "@revoked needs a host field, a key type and a key";
            return -KP_EPARSE;
        }
        /* Re-split what follows the marker so the comment token lands in the right place. */
        rest = l.tok[1];
        kh_split(rest, (size_t)(p + n - rest), &l);
        if (l.ntok < 3) {
            *reason = "@revoked needs a host field, a key type and a key";
            return -KP_EPARSE;
        }
    }
    if (!revoked && kh_looks_like_keytype(l.tok[0], l.len[0])) {
        /* A bare public-key line: it applies to whatever host we dial. */
        if (l.ntok < 2) {
            *reason = "public-key line without its base64 key";
            return -KP_EPARSE;
        }
        if (!kh_keytype_find(l.tok[0], l.len[0])) {
            *reason = "unsupported key type (ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa)";
            return -KP_EPARSE;
        }
        r = kh_key_fingerprint(l.tok[1], l.len[1], l.tok[0], l.len[0], fp, &kt);
        if (r < 0)
            return kh_key_error(r, reason);
        return kh_add(kh, false, fp, kt, reason);
    }
    /* A known_hosts line: hosts keytype key [comment]. */
    if (l.ntok < 3) {
        *reason = "expected a fingerprint, a public-key line or a known_hosts line "
                  "(hosts keytype key)";
        return -KP_EPARSE;
    }
    if (!kh_keytype_find(l.tok[1], l.len[1])) {
        *reason = "unsupported key type (ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa)";
        return -KP_EPARSE;
    }
    r = kh_key_fingerprint(l.tok[2], l.len[2], l.tok[1], l.len[1], fp, &kt);
    if (r < 0)
        return kh_key_error(r, reason);
    r = kh_match_hosts(l.tok[0], l.len[0], name, nlen, reason);
    if (r <= 0)
        return r; /* another host's line, or a malformed host field */
    return kh_add(kh, revoked, fp, kt, reason);
}

/* The name known_hosts files use for host:port, lower-cased. 0 or -EINVAL. */
static int kh_name(const char *host, uint16_t port, char name[KH_NAME_MAX], size_t *ret_len)
{
    size_t hlen = strlen(host), o = 0;
    int k;

    if (hlen == 0 || hlen > 253)
        return -EINVAL;
    if (port != 0 && port != 22)
        name[o++] = '[';
    for (size_t i = 0; i < hlen; i++)
        name[o++] = (char)kh_lower((unsigned char)host[i]);
    if (port != 0 && port != 22) {
        k = snprintf(name + o, KH_NAME_MAX - o, "]:%u", (unsigned)port);
        if (k < 0 || (size_t)k >= KH_NAME_MAX - o)
            return -EINVAL;
        o += (size_t)k;
    }
    name[o] = '\0';
    *ret_len = o;
    return 0;
}

int kp_knownhosts_parse(const char *p, size_t n, const char *host, uint16_t port,
                        struct kp_knownhosts *ret, struct kp_knownhosts_error *reterr)
{
    struct kp_knownhosts kh;
    char name[KH_NAME_MAX];
    const char *reason = NULL;
    size_t nlen = 0, i = 0;
    unsigned line = 0;
    int r;

    memset(&kh, 0, sizeof(kh));
    if (n > KP_MAX_KNOWNHOSTS) {
        reason = "knownHost text is longer than 64 KiB";
        r = -KP_ELIMIT;
        goto out;
    }
    if ((r = kh_name(host, port, name, &nlen)) < 0) {
        reason = "host name is empty or longer than 253 characters";
        goto out;
    }
    while (i < n) {
        const char *nl = memchr(p + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - p) : n, len = end - i, lead = 0;

        line++;
        if (len > 0 && p[i + len - 1] == '\r')
            len--;
        while (lead < len && (p[i + lead] == ' ' || p[i + lead] == '\t'))
            lead++;
        if (memchr(p + i, '\0', len)) {
            reason = "NUL byte in knownHost text";
            r = -KP_EPARSE;
            goto out;
        }
        if (lead < len && p[i + lead] != '#') {
            r = kh_parse_line(p + i + lead, len - lead, name, nlen, &kh, &reason);
            if (r < 0)
                goto out;
        }
        i = end + 1;
    }
    if (kh.nkeys == 0) {
        reason = "no key in knownHost applies to this host";
        r = -ENOENT;
        goto out;
    }
    *ret = kh;
    r = 0;
out:
    if (r < 0 && reterr) {
        reterr->line = line;
        reterr->reason = reason ? reason : kp_strerror(r);
    }
    return r;
}

int kp_knownhosts_check(const struct kp_knownhosts *kh, const char *fp)
{
    bool found = false;

    for (unsigned i = 0; i < kh->nrevoked; i++)
        if (strcmp(kh->revoked[i].fp, fp) == 0)
            return -KP_EHOSTKEY;
    for (unsigned i = 0; i < kh->nkeys; i++)
        if (strcmp(kh->keys[i].fp, fp) == 0)
            found = true;
    return found ? 0 : -KP_EHOSTKEY;
}

int kp_knownhosts_algorithms(const struct kp_knownhosts *kh, struct kp_buf *out)
{
    bool seen[KP_ARRAY_SIZE(kh_keytypes)] = {false};
    bool first = true;
    int r;

    for (unsigned i = 0; i < kh->nkeys; i++) {
        if (!kh->keys[i].keytype)
            return 0; /* a bare fingerprint: any type may be the pinned one */
    }
    for (unsigned i = 0; i < kh->nkeys; i++) {
        for (size_t k = 0; k < KP_ARRAY_SIZE(kh_keytypes); k++) {
            if (kh_keytypes[k].name != kh->keys[i].keytype || seen[k])
                continue;
            seen[k] = true;
            if (!first && (r = kp_buf_putc(out, ',')) < 0)
                return r;
            if ((r = kp_buf_puts(out, kh_keytypes[k].algorithms)) < 0)
                return r;
            first = false;
        }
    }
    return 0;
}
