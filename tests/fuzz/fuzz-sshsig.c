/* DESIGN: fuzz driver for the SSHSIG armour parser and verifier (provider/ssh/sshsig.h).
 *
 * The input is an armoured signature. It is parsed, and on success every field must lie inside
 * the owned blob and the signature field must be its format, blob and extra bytes end to end.
 * Then it is verified over the fixture message of tests/data/sshsig/ against the fixture keys
 * (one per algorithm, lines copied from tests/data/sshsig/<alg>.pub), so mutations of the seed
 * signatures reach every algorithm's signature checks, not only the parser. The fixture CAs
 * (ca-<alg>.pub) are trusted as cert-authority lines, so mutations of the certificate seeds
 * (tests/data/sshsig/cert-*.sig) reach the certificate parser and its CA-signature, validity and
 * principal checks; the time is fixed (2026-01-01) so every run gives the same verdicts. The
 * verdict must be one of the codes the header lists, with a message whenever it is not 0, and
 * the live allocation count must not move. Any broken promise aborts. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "provider/ssh/sshsig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Public-key lines of tests/data/sshsig/{ed25519,ecdsa256,ecdsa384,ecdsa521,rsa}.pub, and the
 * CAs ca-{ed25519,rsa,ecdsa384}.pub as cert-authority lines. */
#define PUB_ED25519                                                                                \
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPuQA/GN9uN5XnCQ4SzFv8JBHoxNQIHo/IaQETAk/1zQ"
#define PUB_ECDSA256                                                                               \
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEY03yxv8G48sQAnACCI" \
    "Q0lzSeiWix/r3Rs7mExZ8dTkD9w8MMrwwE2ynDpq0Ng7bOhv+5ATaXy6hPt9AYw2gk4="
#define PUB_ECDSA384                                                                               \
    "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBMHgsWeaKcgoq23JuuKa" \
    "5D+HPGO1fJwyk6VnE/spW6AMw0hBckV0mIiHRYIyezqsEy2XgOtoBmOt/xLpVcQSicFw4zikFy/QIri8UN4xkQqVTTrk" \
    "KoO/szXdWUWuJW7gGA=="
#define PUB_ECDSA521                                                                               \
    "ecdsa-sha2-nistp521 AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBACHAaXYr6E7fRsydPBg" \
    "sGoExVyXZXOt+ZxnQWvvfg+VQefrHiHznFLrgo35atx4ryJ50o+zvfCHlfrx+fdY7dGrLQCeMz+/ngeE84ezM5LKcmdz" \
    "AH94zzzVCehu5h1XRuSl/eJObnGNcZ/OQ9dPEAmxSqD2jbNzmLPbWw9qAolZv0LqmQ=="
#define PUB_RSA                                                                                    \
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC4ahxG/N76achdcGJ+JbFjt3aOUrfrdP2wSTUNkjArTfpwXViyC4Cl" \
    "nMkjxCcKG4F39UYGYbboNmosOXzwSRGNfPS9RCSuFvyoCFTqksHLrHVWBtKo9hzuaMw78h5DPYZz/AM1gJm5Gqhv9neu" \
    "bNA1wwih3FbB1TsAQ9+1B/0WK+saQ115VQTwuhRwdtzAS/yJONmn0ZVY/U3uTjzQgg8D3UyRiSP0o1TE0g0Bl/woez7m" \
    "OdeOQ20umrfkESbN7CiqH6PD2mPQwuFY6uvt5Sv/Kn6uh2Mc06XCdIFt71+xYOdqN/cbEwfw1oSOGkMruywC5nPwxahD" \
    "Swx+w1Y6y9Yr"
#define CA_ED25519                                                                                 \
    "cert-authority ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEg4XjibpWgpM3k19G1dNeIuY95nczXTBZgTkiN8W" \
    "YbV"
#define CA_RSA                                                                                     \
    "cert-authority ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCepigC5lMrvlnY1qgxUXZA2qHevP6iU2YZ3nEi8" \
    "d4AR4vsG+DQLmHCvDIQO1ZvN8mbcQypv1q3RywdlnNbNfKLyhiUZQC+MTcUbhYcOvVvDko5bI68tojFA6PPwtGBuvOZ9" \
    "W+gLr94spU4fSJNfY6V4/AVKoIF7W3ap7EgB+2brBJJJtFiMnHLl3jjVKnU/4BjK8CvD75IgUbHc7dle3poaYmaVSKBH" \
    "x74atn8xxGowz3Ebeu6KHltG3be+rgRotkMdPy0D+rdkFJtotw+QU5nl/xUDOsr85xsriZepUdfFkO59c2wLECXAIQBd" \
    "fQmlhmPMYkqWmoSyjdYunfDzEtb"
#define CA_ECDSA384                                                                                \
    "cert-authority ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBFxWF" \
    "tpjZhV7FsrV1QbXcjRo0Jc/M5Y2wz5K4Prljtx0AF1ZGm7cgnrHKAHFRmQLqiIJ5McVdvehSkSCqxpth94b9b0+iolsi" \
    "bGxI/6+eWSoKtKTRx11c5WDqZwKcgBM7g=="
/* 2026-01-01T00:00:00Z: inside the window of every good certificate fixture. */
#define NOW INT64_C(1767225600)
#define MSG "kpssh signed script fixture\n#!/bin/bash\necho \"hello from $(hostname)\"\n"

static bool inside(const struct kp_sshsig *s, const struct kp_sshsig_bytes *b)
{
    return b->data >= s->blob && b->len <= s->blob_len &&
           (size_t)(b->data - s->blob) <= s->blob_len - b->len;
}

static void check_parse(const char *p, size_t n)
{
    struct kp_sshsig s;
    char *msg = NULL;
    int r = kp_sshsig_parse(p, n, &s, &msg);

    if (r < 0) {
        if (r != -KP_EPARSE && r != -KP_ELIMIT && r != -ENOMEM)
            abort();
        if (r != -ENOMEM && !msg)
            abort();
        kp_free(msg);
        return;
    }
    if (msg || s.version != 1 || !inside(&s, &s.publickey) || !inside(&s, &s.ns) ||
        !inside(&s, &s.reserved) || !inside(&s, &s.hash_alg) || !inside(&s, &s.signature) ||
        !inside(&s, &s.sig_format) || !inside(&s, &s.sig_blob) || !inside(&s, &s.sig_extra))
        abort();
    if (s.sig_format.len + s.sig_blob.len + 8 + s.sig_extra.len != s.signature.len ||
        s.sig_extra.data + s.sig_extra.len != s.signature.data + s.signature.len)
        abort();
    kp_sshsig_done(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const trusted[] = {
        "# fixture keys",       PUB_ED25519, PUB_ECDSA256, PUB_ECDSA384 "\n" PUB_ECDSA521, PUB_RSA,
        CA_ED25519 "\n" CA_RSA, CA_ECDSA384};
    const char *p = (const char *)data;
    int64_t live = kp_alloc_live();
    char *msg = NULL;
    int r;

    if (size > KP_MAX_SSHSIG_ARMOUR + 16)
        return 0;
    check_parse(p, size);
    r = kp_sshsig_verify_at(p, size, MSG, strlen(MSG), "kpssh", trusted, KP_ARRAY_SIZE(trusted),
                            NOW, &msg);
    if (r != 0 && r != -KP_EPARSE && r != -KP_EAUTH && r != -ENOTSUP && r != -ENOMEM && r != -EIO)
        abort();
    if ((r == 0) != (msg == NULL) && r != -ENOMEM)
        abort();
    kp_free(msg);
    if (kp_alloc_live() != live)
        abort();
    return 0;
}
