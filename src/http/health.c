/* DESIGN: readiness checks (contract in health.h).
 *
 * The set of checks is fixed before the HTTP thread starts, so reading it needs no lock: the
 * thread creation that starts the server orders the writes before every read. The checks
 * themselves read atomics owned by whoever registered them. */
#include "http/health.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"

struct kp_health_check {
    char *name;
    kp_health_check_fn fn;
    void *ctx;
};

struct kp_health {
    struct kp_health_check checks[KP_HEALTH_MAX_CHECKS];
    size_t n;
};

int kp_health_new(struct kp_health **ret)
{
    struct kp_health *h = kp_calloc(1, sizeof(*h));

    if (!h)
        return -ENOMEM;
    *ret = h;
    return 0;
}

struct kp_health *kp_health_free(struct kp_health *h)
{
    size_t i;

    if (!h)
        return NULL;
    for (i = 0; i < h->n; i++)
        kp_free(h->checks[i].name);
    kp_free(h);
    return NULL;
}

static bool valid_check_name(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-'))
            return false;
    return true;
}

int kp_health_add_check(struct kp_health *h, const char *name, kp_health_check_fn fn, void *ctx)
{
    size_t i;

    if (!valid_check_name(name))
        return -EINVAL;
    for (i = 0; i < h->n; i++)
        if (strcmp(h->checks[i].name, name) == 0)
            return -EINVAL;
    if (h->n == KP_HEALTH_MAX_CHECKS)
        return -KP_ELIMIT;
    if (!(h->checks[h->n].name = kp_strdup(name)))
        return -ENOMEM;
    h->checks[h->n].fn = fn;
    h->checks[h->n].ctx = ctx;
    h->n++;
    return 0;
}

bool kp_health_check_flag(void *ctx)
{
    return atomic_load((atomic_bool *)ctx);
}

int kp_health_report(struct kp_health *h, bool verbose, struct kp_buf *out, bool *ret_ready)
{
    struct kp_buf lines = KP_BUF_INIT(out->max);
    bool ready = true;
    size_t i;
    int r = 0;

    for (i = 0; i < h->n && r >= 0; i++) {
        bool ok = h->checks[i].fn(h->checks[i].ctx);

        ready = ready && ok;
        r = kp_buf_printf(&lines, "[%c]%s %s\n", ok ? '+' : '-', h->checks[i].name,
                          ok ? "ok" : "not ready");
    }
    if (r >= 0) {
        if (ready && !verbose)
            r = kp_buf_puts(out, "ok\n");
        else if ((r = kp_buf_append(out, lines.data, lines.len)) >= 0)
            r = kp_buf_puts(out, ready ? "readyz check passed\n" : "readyz check failed\n");
    }
    kp_buf_done(&lines);
    if (r < 0)
        return r;
    *ret_ready = ready;
    return 0;
}
