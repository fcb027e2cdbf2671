/* DESIGN: fuzz driver for the host-key pin parser (provider/ssh/knownhosts.h).
 *
 * The input is a knownHost text. It is parsed for two hosts (a name on port 22 and an address
 * on another port, so both the plain and the "[host]:port" matching paths run), and every
 * result is checked against the header's promises: on success at least one key, every
 * fingerprint canonical (KP_SSH_FP_LEN characters, "SHA256:" prefix, re-parses to itself),
 * check() accepts each non-revoked key; on failure a reason is given. The raw input also goes
 * through the fingerprint and key-blob parsers. Any broken promise aborts. The live allocation
 * count must not move: the parser frees what it allocates on every path. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "provider/ssh/knownhosts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_fp(const char *fp)
{
    char again[KP_SSH_FP_SIZE];

    if (strlen(fp) != KP_SSH_FP_LEN || strncmp(fp, "SHA256:", 7) != 0)
        abort();
    if (kp_ssh_fingerprint_parse(fp, strlen(fp), again) != 0 || strcmp(fp, again) != 0)
        abort();
}

static void one(const char *p, size_t n, const char *host, uint16_t port)
{
    struct kp_knownhosts kh;
    struct kp_knownhosts_error err = {0, NULL};
    struct kp_buf algos = KP_BUF_INIT(1024);
    int r = kp_knownhosts_parse(p, n, host, port, &kh, &err);

    if (r < 0) {
        if (!err.reason)
            abort();
        return;
    }
    if (kh.nkeys == 0 || kh.nkeys > KP_KNOWNHOSTS_MAX_KEYS || kh.nrevoked > KP_KNOWNHOSTS_MAX_KEYS)
        abort();
    for (unsigned i = 0; i < kh.nkeys; i++) {
        bool revoked = false;

        check_fp(kh.keys[i].fp);
        for (unsigned k = 0; k < kh.nrevoked; k++)
            revoked = revoked || strcmp(kh.revoked[k].fp, kh.keys[i].fp) == 0;
        if ((kp_knownhosts_check(&kh, kh.keys[i].fp) == 0) == revoked)
            abort();
    }
    for (unsigned i = 0; i < kh.nrevoked; i++)
        check_fp(kh.revoked[i].fp);
    if (kp_knownhosts_algorithms(&kh, &algos) < 0)
        abort();
    kp_buf_done(&algos);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    int64_t live = kp_alloc_live();
    char fp[KP_SSH_FP_SIZE];
    const char *kt = NULL;

    if (size > KP_MAX_KNOWNHOSTS + 16)
        return 0;
    one(p, size, "h1.example", 22);
    one(p, size, "10.0.0.7", 2222);
    if (kp_ssh_fingerprint_parse(p, size, fp) == 0)
        check_fp(fp);
    if (kp_ssh_key_fingerprint(p, size, fp, &kt) == 0) {
        check_fp(fp);
        if (!kt)
            abort();
    }
    if (kp_alloc_live() != live)
        abort();
    return 0;
}
