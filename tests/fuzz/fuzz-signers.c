/* DESIGN: fuzz driver for the trusted-signer line parser (provider/ssh/sshsig.h).
 *
 * The input is one line of a trustedSigners entry (or a whole file: it is also split at
 * newlines, as the verifier does). Each parse must end in 0 with a known key type, a non-empty
 * blob and a canonical fingerprint of that blob, or in one of the listed errors with a message
 * for the malformed cases. Parsing the same line twice must give the same key and the same
 * cert-authority flag. The live
 * allocation count must not move. Any broken promise aborts. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "provider/ssh/knownhosts.h"
#include "provider/ssh/sshsig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const char *p, size_t n)
{
    struct kp_sshsig_signer a, b;
    char fp[KP_SSH_FP_SIZE], *msg = NULL;
    int r = kp_sshsig_signer_parse(p, n, &a, &msg);

    if (r < 0) {
        if (r != -ENOENT && r != -KP_EPARSE && r != -KP_ELIMIT && r != -ENOMEM && r != -EIO)
            abort();
        if ((r == -KP_EPARSE || r == -KP_ELIMIT) && !msg)
            abort();
        if (r == -ENOENT && msg)
            abort();
        kp_free(msg);
        return;
    }
    if (msg || !a.keytype || !a.blob || a.blob_len == 0 || strlen(a.fp) != KP_SSH_FP_LEN)
        abort();
    if (kp_ssh_fingerprint(a.blob, a.blob_len, fp) != 0 || strcmp(fp, a.fp) != 0)
        abort();
    if (kp_sshsig_signer_parse(p, n, &b, NULL) != 0 || b.blob_len != a.blob_len ||
        memcmp(a.blob, b.blob, a.blob_len) != 0 || strcmp(a.keytype, b.keytype) != 0 ||
        a.cert_authority != b.cert_authority)
        abort();
    kp_sshsig_signer_done(&a);
    kp_sshsig_signer_done(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    int64_t live = kp_alloc_live();
    size_t pos = 0;

    if (size > KP_MAX_SSHSIG_SIGNER_LINE + 16)
        return 0;
    one(p, size);
    while (pos < size) {
        const char *nl = memchr(p + pos, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - (p + pos)) : size - pos;

        one(p + pos, len);
        pos += len + 1;
    }
    if (kp_alloc_live() != live)
        abort();
    return 0;
}
