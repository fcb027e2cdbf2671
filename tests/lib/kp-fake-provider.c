/* DESIGN: the fake provider (kp-fake-provider.h). One mutex over a small array of instances and
 * the published catalog; lookups are linear (tests hold a handful). Create's choice is the one
 * the contract describes (cheapest compatible available offering), so a core test that passes
 * here asks nothing of the SSH provider that it does not also do. */
#include "kp-fake-provider.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/str.h"
#include "base/time.h"
#include "api/obj-karpenter.h"
#include "api/requirements.h"

struct held {
    char *uid;
    struct kp_provider_instance in;
};

/* A node class as node_class_status reports it. */
struct fake_class {
    char *name;
    struct kp_node_class_status st;
};

struct kp_fake_provider {
    pthread_mutex_t mu;
    struct fake_class *classes;
    size_t n_classes;
    struct kp_instance_catalog *cat;
    uint64_t version;
    struct held *v;
    size_t n;
    int fail_r;
    enum kp_provider_err_kind fail_kind;
    const char *fail_reason;
    uint64_t delay_usec;
    struct kp_fake_provider_calls calls;
    struct {
        void (*fn)(void *ctx, const char *nodeclaim);
        void *ctx;
    } watchers[4]; /* watch_progress */
    size_t n_watchers;
};

int kp_fake_provider_new(struct kp_fake_provider **ret)
{
    struct kp_fake_provider *f = kp_calloc(1, sizeof(*f));
    struct kp_instance_types none = {0};

    if (!f)
        return -ENOMEM;
    pthread_mutex_init(&f->mu, NULL);
    if (kp_instance_catalog_new(&none, 0, &f->cat) < 0) {
        kp_fake_provider_free(f);
        return -ENOMEM;
    }
    *ret = f;
    return 0;
}

struct kp_fake_provider *kp_fake_provider_free(struct kp_fake_provider *f)
{
    if (!f)
        return NULL;
    for (size_t i = 0; i < f->n; i++) {
        kp_free(f->v[i].uid);
        kp_provider_instance_done(&f->v[i].in);
    }
    kp_free(f->v);
    for (size_t i = 0; i < f->n_classes; i++) {
        kp_free(f->classes[i].name);
        kp_node_class_status_done(&f->classes[i].st);
    }
    kp_free(f->classes);
    kp_instance_catalog_unref(f->cat);
    pthread_mutex_destroy(&f->mu);
    kp_free(f);
    return NULL;
}

int kp_fake_provider_publish(struct kp_fake_provider *f, struct kp_instance_types *types)
{
    struct kp_instance_catalog *cat = NULL;
    int r;

    pthread_mutex_lock(&f->mu);
    if (kp_instance_types_equal(&f->cat->own_, types)) {
        /* Nothing changed: the published catalog stays, with its version. */
        kp_instance_types_done(types);
        pthread_mutex_unlock(&f->mu);
        return 0;
    }
    if ((r = kp_instance_catalog_new(types, f->version + 1, &cat)) == 0) {
        f->version++;
        kp_instance_catalog_unref(f->cat);
        f->cat = cat;
    }
    pthread_mutex_unlock(&f->mu);
    return r;
}

void kp_fake_provider_fail_next_create(struct kp_fake_provider *f, int r,
                                       enum kp_provider_err_kind kind, const char *reason)
{
    pthread_mutex_lock(&f->mu);
    f->fail_r = r;
    f->fail_kind = kind;
    f->fail_reason = reason;
    pthread_mutex_unlock(&f->mu);
}

void kp_fake_provider_set_create_delay(struct kp_fake_provider *f, uint64_t usec)
{
    pthread_mutex_lock(&f->mu);
    f->delay_usec = usec;
    pthread_mutex_unlock(&f->mu);
}

const struct kp_fake_provider_calls *kp_fake_provider_calls(const struct kp_fake_provider *f)
{
    return &f->calls;
}

size_t kp_fake_provider_instances(struct kp_fake_provider *f)
{
    size_t n;

    pthread_mutex_lock(&f->mu);
    n = f->n;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* --- ops -------------------------------------------------------------------------------------- */

static const char *op_name(void *self)
{
    (void)self;
    return "fake";
}

static size_t op_supported_node_classes(void *self, const struct kp_node_class_kind **ret)
{
    static const struct kp_node_class_kind kinds[] = {
        {KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND}};

    (void)self;
    *ret = kinds;
    return KP_ARRAY_SIZE(kinds);
}

static size_t op_repair_policies(void *self, const struct kp_repair_policy **ret)
{
    static const struct kp_repair_policy policies[] = {
        {"Ready", "False", 30 * 60 * KP_USEC_PER_SEC},
        {"Ready", "Unknown", 30 * 60 * KP_USEC_PER_SEC},
    };

    (void)self;
    *ret = policies;
    return KP_ARRAY_SIZE(policies);
}

/* Whether every request of nc fits the allocatable of it. */
static bool requests_fit(const struct kp_instance_type *it, const struct kp_nodeclaim_view *nc)
{
    for (size_t i = 0; i < nc->requests.n; i++)
        if (nc->requests.v[i].milli > kp_instance_type_allocatable(it, nc->requests.v[i].name))
            return false;
    return true;
}

/* The cheapest (type, offering) whose allocatable holds nc's requests and an available offering
 * of which meets want. */
static const struct kp_instance_type *pick(const struct kp_instance_catalog *cat,
                                           const struct kp_nodeclaim_view *nc,
                                           const struct kp_reqset *want,
                                           const struct kp_offering **ret_off)
{
    const struct kp_instance_type *best = NULL;

    for (size_t i = 0; i < cat->n; i++) {
        const struct kp_instance_type *it = &cat->v[i];

        if (!kp_reqset_intersects(want, &it->reqs, NULL, 0) || !requests_fit(it, nc))
            continue;
        for (size_t j = 0; j < it->n_offerings; j++) {
            const struct kp_offering *o = &it->offerings[j];

            if (o->available && kp_reqset_intersects(want, &o->reqs, NULL, 0) &&
                (!best || o->price_micro_usd < (*ret_off)->price_micro_usd)) {
                best = it;
                *ret_off = o;
            }
        }
    }
    return best;
}

static int launch(struct kp_fake_provider *f, const struct kp_nodeclaim_view *nc, struct held *ret,
                  struct kp_provider_err *err)
{
    struct kp_reqset want;
    const struct kp_instance_type *it;
    const struct kp_offering *off = NULL;
    struct held h = {0};
    int r;

    if (!kp_nodeclass_ref_is(&nc->spec.node_class_ref, KP_FAKE_NODECLASS_GROUP,
                             KP_FAKE_NODECLASS_KIND))
        return kp_provider_err_set(err, -EINVAL, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_CONFIG,
                                   "NodeClaim %s does not reference a " KP_FAKE_NODECLASS_KIND,
                                   nc->e.name);
    if (nc->requests.n_bad > 0)
        return kp_provider_err_set(err, -EINVAL, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_CONFIG,
                                   "NodeClaim %s: a request is too large to hold", nc->e.name);
    if ((r = kp_reqset_from_nodeclaim(nc, &want)) < 0)
        return kp_provider_err_set(err, r, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_CONFIG,
                                   "NodeClaim %s: requirements refused", nc->e.name);
    it = pick(f->cat, nc, &want, &off);
    kp_reqset_done(&want);
    if (!it)
        return kp_provider_err_set(err, -ENOSPC, KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY, NULL,
                                   "no offering fits NodeClaim %s", nc->e.name);
    h.uid = kp_strdup(nc->e.uid ? nc->e.uid : "");
    h.in.nodeclaim = kp_strdup(nc->e.name);
    h.in.provider_id = kp_strjoin(KP_FAKE_PROVIDER_ID_SCHEME, nc->e.name, (const char *)NULL);
    h.in.instance_type = kp_strdup(it->name);
    h.in.backing = kp_strdup(it->name);
    h.in.creation_usec = (int64_t)kp_real_usec();
    r = -ENOMEM;
    if (!h.uid || !h.in.nodeclaim || !h.in.provider_id || !h.in.instance_type || !h.in.backing)
        goto fail;
    for (size_t i = 0; i < it->n_labels; i++)
        if ((r = kp_provider_kv_add(&h.in.labels, &h.in.n_labels, it->labels[i].key,
                                    it->labels[i].value)) < 0)
            goto fail;
    /* The offering decides where: its single-valued keys (zone, capacity type) win. */
    for (size_t i = 0; i < off->reqs.n; i++) {
        const char *v = kp_req_single(&off->reqs.v[i]);
        bool replaced = false;

        for (size_t j = 0; v && j < h.in.n_labels && !replaced; j++)
            if (kp_streq(h.in.labels[j].key, off->reqs.v[i].key)) {
                char *d = kp_strdup(v);

                if (!d)
                    goto fail;
                kp_free(h.in.labels[j].value);
                h.in.labels[j].value = d;
                replaced = true;
            }
        if (v && !replaced &&
            (r = kp_provider_kv_add(&h.in.labels, &h.in.n_labels, off->reqs.v[i].key, v)) < 0)
            goto fail;
    }
    for (size_t i = 0; i < it->n_capacity; i++)
        if ((r = kp_provider_res_add(&h.in.capacity, &h.in.n_capacity, it->capacity[i].name,
                                     it->capacity[i].milli)) < 0 ||
            (r = kp_provider_res_add(&h.in.allocatable, &h.in.n_allocatable, it->capacity[i].name,
                                     kp_instance_type_allocatable(it, it->capacity[i].name))) < 0)
            goto fail;
    *ret = h;
    return 0;
fail:
    kp_free(h.uid);
    kp_provider_instance_done(&h.in);
    return kp_provider_err_set(err, -ENOMEM, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
}

static struct held *find(struct kp_fake_provider *f, const char *name, const char *pid)
{
    for (size_t i = 0; i < f->n; i++)
        if ((name && kp_streq(f->v[i].in.nodeclaim, name)) ||
            (pid && kp_streq(f->v[i].in.provider_id, pid)))
            return &f->v[i];
    return NULL;
}

static int op_create(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, struct kp_provider_instance *ret,
                     struct kp_provider_err *err)
{
    struct kp_fake_provider *f = self;
    struct kp_deadline until;
    struct held h, *old, *nv;
    int r;

    (void)c;
    atomic_fetch_add(&f->calls.create, 1);
    pthread_mutex_lock(&f->mu);
    until = kp_deadline_in(f->delay_usec);
    pthread_mutex_unlock(&f->mu);
    /* The launch takes its time; the caller's ctx may end it. */
    while (!kp_deadline_expired(until)) {
        if ((r = kp_provider_ctx_check(ctx, err, "launching")) < 0)
            return r;
        kp_sleep_usec(5 * 1000);
    }
    if ((r = kp_provider_ctx_check(ctx, err, "launching")) < 0)
        return r;
    pthread_mutex_lock(&f->mu);
    if (f->fail_r) {
        r = kp_provider_err_set(err, f->fail_r, f->fail_kind, f->fail_reason, "injected failure");
        f->fail_r = 0;
        goto out;
    }
    old = find(f, nc->e.name, NULL);
    if (old && kp_streq(old->uid, nc->e.uid ? nc->e.uid : "")) {
        r = kp_provider_instance_copy(&old->in, ret); /* resumed: the same instance */
        goto out;
    }
    if (old) {
        r = kp_provider_err_set(err, -EAGAIN, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                "the instance of an earlier NodeClaim %s is still held",
                                nc->e.name);
        goto out;
    }
    if ((r = launch(f, nc, &h, err)) < 0)
        goto out;
    nv = kp_reallocarray(f->v, f->n + 1, sizeof(*nv));
    if (!nv || (r = kp_provider_instance_copy(&h.in, ret)) < 0) {
        if (nv)
            f->v = nv;
        kp_free(h.uid);
        kp_provider_instance_done(&h.in);
        r = kp_provider_err_set(err, -ENOMEM, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
        goto out;
    }
    f->v = nv;
    f->v[f->n++] = h;
out:
    pthread_mutex_unlock(&f->mu);
    return r;
}

static int op_delete(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, struct kp_provider_err *err)
{
    struct kp_fake_provider *f = self;
    struct held *h;
    int r;

    (void)c;
    atomic_fetch_add(&f->calls.delete, 1);
    if ((r = kp_provider_ctx_check(ctx, err, "deleting")) < 0)
        return r;
    pthread_mutex_lock(&f->mu);
    h = find(f, nc->e.name, NULL);
    if (!h || !kp_streq(h->uid, nc->e.uid ? nc->e.uid : "")) {
        r = kp_provider_err_set(err, -ENOENT, KP_PROVIDER_ERR_NOT_FOUND, NULL,
                                "no instance of NodeClaim %s", nc->e.name);
    } else {
        kp_free(h->uid);
        kp_provider_instance_done(&h->in);
        *h = f->v[--f->n];
        r = 0;
    }
    pthread_mutex_unlock(&f->mu);
    return r;
}

static int op_get(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                  const char *provider_id, struct kp_provider_instance *ret,
                  struct kp_provider_err *err)
{
    struct kp_fake_provider *f = self;
    struct held *h;
    int r;

    (void)c;
    atomic_fetch_add(&f->calls.get, 1);
    if ((r = kp_provider_ctx_check(ctx, err, "reading")) < 0)
        return r;
    pthread_mutex_lock(&f->mu);
    h = find(f, NULL, provider_id);
    r = h ? kp_provider_instance_copy(&h->in, ret)
          : kp_provider_err_set(err, -ENOENT, KP_PROVIDER_ERR_NOT_FOUND, NULL, "no instance %s",
                                provider_id ? provider_id : "");
    pthread_mutex_unlock(&f->mu);
    return r;
}

static int op_list(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                   struct kp_provider_instances *ret, struct kp_provider_err *err)
{
    struct kp_fake_provider *f = self;
    struct kp_provider_instances out = {0};
    int r = 0;

    (void)c;
    atomic_fetch_add(&f->calls.list, 1);
    if ((r = kp_provider_ctx_check(ctx, err, "listing")) < 0)
        return r;
    pthread_mutex_lock(&f->mu);
    out.v = kp_calloc(f->n ? f->n : 1, sizeof(*out.v));
    if (!out.v)
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < f->n; i++)
        if ((r = kp_provider_instance_copy(&f->v[i].in, &out.v[i])) == 0)
            out.n++;
    pthread_mutex_unlock(&f->mu);
    if (r < 0) {
        kp_provider_instances_done(&out);
        return kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
    }
    *ret = out;
    return 0;
}

static int op_get_instance_types(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                                 const struct kp_nodepool_view *np,
                                 struct kp_instance_catalog **ret, struct kp_provider_err *err)
{
    struct kp_fake_provider *f = self;
    struct kp_instance_types none = {0};
    int r;

    (void)c;
    atomic_fetch_add(&f->calls.get_instance_types, 1);
    if ((r = kp_provider_ctx_check(ctx, err, "reading instance types")) < 0)
        return r;
    if (!kp_nodeclass_ref_is(&np->tmpl.node_class_ref, KP_FAKE_NODECLASS_GROUP,
                             KP_FAKE_NODECLASS_KIND))
        return kp_instance_catalog_new(&none, 0, ret);
    pthread_mutex_lock(&f->mu);
    *ret = kp_instance_catalog_ref(f->cat);
    pthread_mutex_unlock(&f->mu);
    return 0;
}

static int op_is_drifted(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                         const struct kp_nodeclaim_view *nc, const char **ret_reason,
                         struct kp_provider_err *err)
{
    struct kp_fake_provider *f = self;

    (void)c;
    (void)nc;
    atomic_fetch_add(&f->calls.is_drifted, 1);
    *ret_reason = NULL;
    return kp_provider_ctx_check(ctx, err, "checking drift");
}

/* Copies src's strings into dst (dst zeroed first). 0 or -ENOMEM. */
static int copy_class_status(const struct kp_node_class_status *src,
                             struct kp_node_class_status *dst)
{
    *dst = *src;
    dst->reason = NULL;
    dst->message = NULL;
    if ((src->reason && !(dst->reason = kp_strdup(src->reason))) ||
        (src->message && !(dst->message = kp_strdup(src->message)))) {
        kp_node_class_status_done(dst);
        return -ENOMEM;
    }
    return 0;
}

int kp_fake_provider_set_node_class(struct kp_fake_provider *f, const char *name,
                                    const struct kp_node_class_status *st)
{
    struct kp_node_class_status copy = {0};
    int r = 0;

    if (st && (r = copy_class_status(st, &copy)) < 0)
        return r;
    copy.found = st != NULL;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->n_classes; i++) {
        if (!kp_streq(f->classes[i].name, name))
            continue;
        kp_node_class_status_done(&f->classes[i].st);
        if (st) {
            f->classes[i].st = copy;
        } else {
            kp_free(f->classes[i].name);
            f->classes[i] = f->classes[--f->n_classes];
        }
        goto out;
    }
    if (!st)
        goto out;
    {
        struct fake_class *v = kp_reallocarray(f->classes, f->n_classes + 1, sizeof(*v));
        char *dup = kp_strdup(name);

        if (v)
            f->classes = v;
        if (!v || !dup) {
            kp_free(dup);
            kp_node_class_status_done(&copy);
            r = -ENOMEM;
            goto out;
        }
        f->classes[f->n_classes++] = (struct fake_class){.name = dup, .st = copy};
    }
out:
    pthread_mutex_unlock(&f->mu);
    return r;
}

static int op_node_class_status(void *self, const struct kp_nodeclass_ref *ref,
                                struct kp_node_class_status *ret)
{
    struct kp_fake_provider *f = self;
    int r = 0;

    *ret = (struct kp_node_class_status){0};
    if (!kp_nodeclass_ref_is(ref, KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND) || !ref->name)
        return 0;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->n_classes; i++)
        if (kp_streq(f->classes[i].name, ref->name)) {
            r = copy_class_status(&f->classes[i].st, ret);
            break;
        }
    pthread_mutex_unlock(&f->mu);
    return r;
}

static int op_watch_progress(void *self, void (*fn)(void *ctx, const char *nodeclaim), void *ctx)
{
    struct kp_fake_provider *f = self;
    int r = 0;

    pthread_mutex_lock(&f->mu);
    if (f->n_watchers == KP_ARRAY_SIZE(f->watchers))
        r = -ENOMEM;
    else {
        f->watchers[f->n_watchers].fn = fn;
        f->watchers[f->n_watchers++].ctx = ctx;
    }
    pthread_mutex_unlock(&f->mu);
    return r;
}

static void op_unwatch_progress(void *self, void *ctx)
{
    struct kp_fake_provider *f = self;
    size_t n = 0;

    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->n_watchers; i++)
        if (f->watchers[i].ctx != ctx)
            f->watchers[n++] = f->watchers[i];
    f->n_watchers = n;
    pthread_mutex_unlock(&f->mu);
}

size_t kp_fake_provider_progress(struct kp_fake_provider *f, const char *nodeclaim)
{
    size_t n;

    pthread_mutex_lock(&f->mu);
    n = f->n_watchers;
    for (size_t i = 0; i < n; i++)
        f->watchers[i].fn(f->watchers[i].ctx, nodeclaim);
    pthread_mutex_unlock(&f->mu);
    return n;
}

static const struct kp_provider_ops fake_ops = {
    .name = op_name,
    .supported_node_classes = op_supported_node_classes,
    .repair_policies = op_repair_policies,
    .create = op_create,
    .delete = op_delete,
    .get = op_get,
    .list = op_list,
    .get_instance_types = op_get_instance_types,
    .is_drifted = op_is_drifted,
    .node_class_status = op_node_class_status,
    .watch_progress = op_watch_progress,
    .unwatch_progress = op_unwatch_progress,
};

struct kp_provider kp_fake_provider_as_provider(struct kp_fake_provider *f)
{
    return (struct kp_provider){.ops = &fake_ops, .self = f};
}
