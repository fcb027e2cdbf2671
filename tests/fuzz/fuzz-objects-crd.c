/* Fuzz driver: the CRD projections (NodePool, NodeClaim, SSHHost, SSHNodeClass, SSHJoinProfile)
 * and their validators over the same bytes. Each decoder must refuse the input or produce an
 * entry whose key is consistent and whose fingerprint does not depend on the address it was
 * packed at (decoding twice gives equal hashes and sizes); every validator must run over what was
 * projected (walking every packed array and string) and return a count, never crash, and write
 * one line per reported problem. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(const struct kp_entry *e)
{
    if (!*e->ns) {
        if (strcmp(e->key, e->name) != 0)
            abort();
    } else if (strncmp(e->key, e->ns, strlen(e->ns)) != 0 ||
               strcmp(e->key + strlen(e->ns) + 1, e->name) != 0 || !*e->name) {
        abort();
    }
}

/* Lines in the report match the count (capped as kp_valid documents). */
static void check_report(int r, const struct kp_buf *msg)
{
    size_t lines = 0;

    if (r < 0)
        return; /* -ENOMEM or the report's ceiling */
    for (size_t i = 0; i < msg->len; i++)
        lines += msg->data[i] == '\n';
    if (r == 0 ? lines != 0 : (lines == 0 || lines > KP_VALID_MAX_LINES + 1))
        abort();
}

static int validate_pool(const struct kp_entry *e, struct kp_buf *m)
{
    return kp_nodepool_validate(kp_nodepool_view(e), m);
}

static int validate_claim(const struct kp_entry *e, struct kp_buf *m)
{
    return kp_nodeclaim_validate(kp_nodeclaim_view(e), m);
}

static int validate_host(const struct kp_entry *e, struct kp_buf *m)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(e);

    /* The accessors must hold on every projected host. */
    if (!kp_sshhost_class(h) || !h->user)
        abort();
    (void)kp_sshhost_node_ip(h);
    return kp_sshhost_validate(h, m);
}

static int validate_class(const struct kp_entry *e, struct kp_buf *m)
{
    const struct kp_sshnodeclass_view *c = kp_sshnodeclass_view(e);
    struct kp_labels none = {0};

    (void)kp_sshnodeclass_selects(c, &none);
    return kp_sshnodeclass_validate(c, m);
}

static int validate_profile(const struct kp_entry *e, struct kp_buf *m)
{
    const struct kp_sshjoinprofile_view *v = kp_sshjoinprofile_view(e);

    for (size_t i = 0; i < KP_SJP_PHASES; i++)
        if (v->scripts[i].data && strlen(v->scripts[i].data) != v->scripts[i].len)
            abort();
    return kp_profile_validate_view(v, m);
}

static void run(int (*decode)(const char *, size_t, struct kp_entry **),
                int (*validate)(const struct kp_entry *, struct kp_buf *), const uint8_t *data,
                size_t size)
{
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    struct kp_entry *a = NULL, *b = NULL;

    if (decode((const char *)data, size, &a) < 0)
        return;
    check_entry(a);
    if (decode((const char *)data, size, &b) < 0 || a->hash != b->hash || a->bytes != b->bytes)
        abort();
    check_report(validate(a, &msg), &msg);
    kp_buf_done(&msg);
    kp_entry_unref(a);
    kp_entry_unref(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(kp_nodepool_decode, validate_pool, data, size);
    run(kp_nodeclaim_decode, validate_claim, data, size);
    run(kp_sshhost_decode, validate_host, data, size);
    run(kp_sshnodeclass_decode, validate_class, data, size);
    run(kp_sshjoinprofile_decode, validate_profile, data, size);
    return 0;
}
