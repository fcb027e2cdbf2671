/* DESIGN: the informer registry (see registry.h for the contract).
 *
 * What: a growable array of informers, each with the (resource, namespace) it was made for.
 * Lookups are a linear scan: a process has about ten informers and looks them up only while it
 * sets up, so a map would buy nothing.
 *
 * Why the registry owns them: informers are the process's cost (one LIST and one WATCH, and one
 * cached copy of every object, per kind), and the controllers reading a kind are many (the SSH
 * provider's host controller, taint gate and registration wait, later the core's provisioner
 * and lifecycle controllers). One owner makes each informer once, starts them all together
 * before any controller acts, and stops them after every controller has stopped.
 *
 * Typed lookups: a resource is matched by group and plural name (the address of a struct
 * kp_resource is not unique across translation units), the namespace by string. A match with
 * another view kind or projection is the caller's mistake (it would read one kind's entries as
 * another's layout) and is refused rather than handed out.
 *
 * Threads: the array and `started` change on the main thread only; `started` is atomic so the
 * HTTP thread's readiness check can read it; the informers are thread-safe on their own. The
 * array is sealed at the first start, not only while started: the metrics collector walks it
 * (count, at) from the HTTP thread across a stop and a restart. */
#include "k8s/registry.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/str.h"
#include "base/time.h"
#include "k8s/client.h"
#include "k8s/informer.h"

struct kp_registry {
    struct kp_client *client; /* borrowed during set-up only; see kp_registry_new */
    struct kp_informer **v;
    size_t n, cap;
    bool sealed; /* started once: the array is fixed from then on (main thread only) */
    atomic_bool started;
};

int kp_registry_new(struct kp_client *c, struct kp_registry **ret)
{
    struct kp_registry *reg;

    if (!c)
        return -EINVAL;
    reg = kp_calloc(1, sizeof(*reg));
    if (!reg)
        return -ENOMEM;
    reg->client = c;
    atomic_init(&reg->started, false);
    *ret = reg;
    return 0;
}

struct kp_registry *kp_registry_free(struct kp_registry *reg)
{
    if (!reg)
        return NULL;
    kp_registry_stop(reg);
    for (size_t i = reg->n; i-- > 0;)
        kp_informer_free(reg->v[i]);
    kp_free(reg->v);
    kp_free(reg);
    return NULL;
}

static bool same_resource(const struct kp_resource *a, const struct kp_resource *b)
{
    return a == b || (kp_streq(a->group, b->group) && kp_streq(a->resource, b->resource));
}

static bool same_ns(const char *a, const char *b)
{
    return kp_streq(a ? a : "", b ? b : "");
}

int kp_registry_informer(struct kp_registry *reg, const struct kp_informer_opts *opts,
                         struct kp_informer **ret)
{
    struct kp_informer *inf = NULL;
    int r;

    if (!opts || !opts->res || !opts->project || !opts->view_kind || opts->label_selector ||
        opts->field_selector)
        return -EINVAL;
    if (!kp_streq(opts->view_kind, opts->res->kind))
        return -EPROTOTYPE;
    for (size_t i = 0; i < reg->n; i++) {
        struct kp_informer *have = reg->v[i];

        if (!same_resource(kp_informer_resource(have), opts->res) ||
            !same_ns(kp_informer_namespace(have), opts->ns))
            continue;
        if (kp_informer_view_kind(have) != opts->view_kind ||
            kp_informer_project(have) != opts->project)
            return -EPROTOTYPE;
        *ret = have;
        return 0;
    }
    if (reg->sealed)
        return -EBUSY;
    {
        struct kp_informer **v = kp_grow_array(reg->v, &reg->cap, reg->n, sizeof(*v), 8);

        if (!v)
            return -ENOMEM;
        reg->v = v;
    }
    if ((r = kp_informer_new(reg->client, opts, &inf)) < 0)
        return r;
    reg->v[reg->n++] = inf;
    *ret = inf;
    return 0;
}

int kp_registry_typed(struct kp_registry *reg, const struct kp_resource *res, kp_project_fn project,
                      const char *view_kind, const char *ns, struct kp_informer **ret)
{
    struct kp_informer_opts o = {.res = res, .project = project, .view_kind = view_kind, .ns = ns};

    return kp_registry_informer(reg, &o, ret);
}

/* All asked at once, then joined: each informer takes up to a second to notice, and one after
 * the other they made most of a shutdown's (or a stand-down's) time. */
static void stop_all(struct kp_registry *reg)
{
    for (size_t i = reg->n; i-- > 0;)
        kp_informer_cancel(reg->v[i]);
    for (size_t i = reg->n; i-- > 0;)
        kp_informer_stop(reg->v[i]);
}

int kp_registry_start(struct kp_registry *reg, uint64_t timeout_usec, const struct kp_ctx *ctx,
                      const char **ret_kind)
{
    struct kp_deadline d = kp_deadline_in(timeout_usec);
    size_t i;
    int r = 0;

    if (atomic_load(&reg->started))
        return -EALREADY;
    /* From the first start on, other threads may walk the array (count, at): it stays. */
    reg->sealed = true;
    for (i = 0; i < reg->n; i++)
        if ((r = kp_informer_start(reg->v[i])) < 0)
            goto fail;
    for (i = 0; i < reg->n; i++) {
        /* In slices, so a cancelled context ends the wait soon; the last slice ends with d. */
        do {
            if ((r = kp_ctx_err(ctx)) < 0)
                goto fail;
            r = kp_informer_wait_synced(
                reg->v[i], KP_MIN(kp_deadline_left_usec(d), KP_REGISTRY_WAIT_SLICE_USEC));
        } while (r == -ETIMEDOUT && !kp_deadline_expired(d));
        if (r < 0)
            goto fail;
    }
    atomic_store(&reg->started, true);
    return 0;
fail:
    if (ret_kind)
        *ret_kind = kp_informer_kind(reg->v[i]);
    stop_all(reg);
    return r;
}

void kp_registry_stop(struct kp_registry *reg)
{
    /* Not started from this instant: readiness stops asking before the watches wind down. */
    atomic_store(&reg->started, false);
    stop_all(reg);
}

bool kp_registry_started(struct kp_registry *reg)
{
    return atomic_load(&reg->started);
}

bool kp_registry_synced(struct kp_registry *reg)
{
    if (!atomic_load(&reg->started))
        return false;
    for (size_t i = 0; i < reg->n; i++)
        if (!kp_informer_synced(reg->v[i]))
            return false;
    return true;
}

size_t kp_registry_count(const struct kp_registry *reg)
{
    return reg->n;
}

struct kp_informer *kp_registry_at(const struct kp_registry *reg, size_t i)
{
    return i < reg->n ? reg->v[i] : NULL;
}
