/* core/provider.c: the small value helpers of the provider interface (core/provider.h).
 *
 * DESIGN: the interface is a header; this file only frees and fills the plain structs that cross
 * it, so every provider (and every fake in tests) builds results the same way, and holds the
 * catalog's reference count: a catalog is published once and shared by every reader until its
 * last reference goes, so a reader holding an old one is never disturbed by a republish. Pure;
 * any thread. */
#include "core/provider.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/str.h"
#include "api/obj-karpenter.h"

void kp_provider_err_done(struct kp_provider_err *e)
{
    if (!e)
        return;
    kp_free(e->message);
    e->message = NULL;
    e->kind = KP_PROVIDER_ERR_NONE;
    e->reason[0] = '\0';
}

int kp_provider_err_set(struct kp_provider_err *e, int r, enum kp_provider_err_kind kind,
                        const char *reason, const char *fmt, ...)
{
    va_list ap;

    if (!e)
        return r;
    e->kind = kind;
    if (kp_strscpy(e->reason, sizeof(e->reason), reason ? reason : "") < 0)
        e->reason[0] = '\0';
    va_start(ap, fmt);
    kp_msg_setv(&e->message, fmt, ap);
    va_end(ap);
    return r;
}

const char *kp_provider_err_kind_name(enum kp_provider_err_kind kind)
{
    switch (kind) {
    case KP_PROVIDER_ERR_NONE:
        return "None";
    case KP_PROVIDER_ERR_RETRYABLE:
        return "Retryable";
    case KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY:
        return "InsufficientCapacity";
    case KP_PROVIDER_ERR_NOT_FOUND:
        return "NotFound";
    case KP_PROVIDER_ERR_NODECLASS_NOT_READY:
        return "NodeClassNotReady";
    case KP_PROVIDER_ERR_CREATE:
        return "CreateError";
    case KP_PROVIDER_ERR_IN_PROGRESS:
        return "InProgress";
    }
    return "Unknown";
}

static void kv_free(struct kp_provider_kv *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        kp_free(v[i].key);
        kp_free(v[i].value);
    }
    kp_free(v);
}

static void res_free(struct kp_provider_res *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        kp_free(v[i].name);
    kp_free(v);
}

void kp_instance_types_done(struct kp_instance_types *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        struct kp_instance_type *it = &t->v[i];
        kp_free(it->name);
        kp_reqset_done(&it->reqs);
        kv_free(it->labels, it->n_labels);
        res_free(it->capacity, it->n_capacity);
        res_free(it->overhead, it->n_overhead);
        for (size_t j = 0; j < it->n_offerings; j++)
            kp_reqset_done(&it->offerings[j].reqs);
        kp_free(it->offerings);
    }
    kp_free(t->v);
    t->v = NULL;
    t->n = 0;
}

const char *kp_offering_value(const struct kp_offering *o, const char *key)
{
    const struct kp_req *r = kp_reqset_get(&o->reqs, key);

    return r ? kp_req_single(r) : NULL;
}

static bool kv_equal(const struct kp_provider_kv *a, size_t na, const struct kp_provider_kv *b,
                     size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (!kp_streq(a[i].key, b[i].key) || !kp_streq(a[i].value, b[i].value))
            return false;
    return true;
}

static bool res_equal(const struct kp_provider_res *a, size_t na, const struct kp_provider_res *b,
                      size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (!kp_streq(a[i].name, b[i].name) || a[i].milli != b[i].milli)
            return false;
    return true;
}

static bool type_equal(const struct kp_instance_type *a, const struct kp_instance_type *b)
{
    if (!kp_streq(a->name, b->name) || !kp_reqset_equal(&a->reqs, &b->reqs) ||
        !kv_equal(a->labels, a->n_labels, b->labels, b->n_labels) ||
        !res_equal(a->capacity, a->n_capacity, b->capacity, b->n_capacity) ||
        !res_equal(a->overhead, a->n_overhead, b->overhead, b->n_overhead) ||
        a->n_offerings != b->n_offerings)
        return false;
    for (size_t i = 0; i < a->n_offerings; i++) {
        const struct kp_offering *x = &a->offerings[i], *y = &b->offerings[i];

        if (x->price_micro_usd != y->price_micro_usd || x->available != y->available ||
            x->reservation_capacity != y->reservation_capacity ||
            !kp_reqset_equal(&x->reqs, &y->reqs))
            return false;
    }
    return true;
}

bool kp_instance_types_equal(const struct kp_instance_types *a, const struct kp_instance_types *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!type_equal(&a->v[i], &b->v[i]))
            return false;
    return true;
}

int kp_instance_catalog_new(struct kp_instance_types *types, uint64_t version,
                            struct kp_instance_catalog **ret)
{
    struct kp_instance_catalog *c = kp_calloc(1, sizeof(*c));

    if (!c) {
        kp_instance_types_done(types);
        return -ENOMEM;
    }
    c->own_ = *types;
    *types = (struct kp_instance_types){0};
    c->v = c->own_.v;
    c->n = c->own_.n;
    c->version = version;
    atomic_init(&c->refs_, 1);
    *ret = c;
    return 0;
}

struct kp_instance_catalog *kp_instance_catalog_ref(struct kp_instance_catalog *c)
{
    if (c)
        atomic_fetch_add_explicit(&c->refs_, 1, memory_order_relaxed);
    return c;
}

struct kp_instance_catalog *kp_instance_catalog_unref(struct kp_instance_catalog *c)
{
    if (c && atomic_fetch_sub_explicit(&c->refs_, 1, memory_order_acq_rel) == 1) {
        kp_instance_types_done(&c->own_);
        kp_free(c);
    }
    return NULL;
}

const struct kp_instance_type *kp_instance_catalog_find(const struct kp_instance_catalog *c,
                                                        const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (kp_streq(c->v[i].name, name))
            return &c->v[i];
    return NULL;
}

bool kp_provider_supports(const struct kp_provider *p, const struct kp_nodeclass_ref *ref)
{
    const struct kp_node_class_kind *k = NULL;
    size_t n = p->ops->supported_node_classes(p->self, &k);

    for (size_t i = 0; i < n; i++)
        if (kp_nodeclass_ref_is(ref, k[i].group, k[i].kind))
            return true;
    return false;
}

bool kp_provider_owns_provider_id(const struct kp_provider *p, const char *provider_id)
{
    return provider_id && *provider_id && p->ops->owns_provider_id &&
           p->ops->owns_provider_id(p->self, provider_id);
}

void kp_node_class_status_done(struct kp_node_class_status *s)
{
    if (!s)
        return;
    kp_free(s->reason);
    kp_free(s->message);
    *s = (struct kp_node_class_status){0};
}

int kp_provider_node_class_status(const struct kp_provider *p, const struct kp_nodeclass_ref *ref,
                                  struct kp_node_class_status *ret)
{
    *ret = (struct kp_node_class_status){0};
    if (!p->ops->node_class_status)
        return -EOPNOTSUPP;
    return p->ops->node_class_status(p->self, ref, ret);
}

int kp_provider_ctx_check(const struct kp_ctx *ctx, struct kp_provider_err *err, const char *what)
{
    int r = kp_ctx_err(ctx);

    if (r == 0)
        return 0;
    return kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "%s before %s",
                               r == -ECANCELED ? "cancelled" : "deadline passed",
                               what ? what : "the next step");
}

int64_t kp_instance_type_allocatable(const struct kp_instance_type *it, const char *name)
{
    int64_t cap = kp_provider_res_get(it->capacity, it->n_capacity, name, NULL);
    int64_t oh = kp_provider_res_get(it->overhead, it->n_overhead, name, NULL);

    return cap > oh ? cap - oh : 0;
}

int64_t kp_instance_type_price_for(const struct kp_instance_type *it, const struct kp_reqset *reqs)
{
    int64_t best = -1;

    for (size_t i = 0; i < it->n_offerings; i++) {
        const struct kp_offering *o = &it->offerings[i];

        if (o->available &&
            kp_reqset_compatible(reqs, &o->reqs, kp_reqset_well_known_labels, NULL, 0) &&
            (best < 0 || o->price_micro_usd < best))
            best = o->price_micro_usd;
    }
    return best;
}

int64_t kp_instance_type_price(const struct kp_instance_type *it)
{
    int64_t best = -1;

    for (size_t i = 0; i < it->n_offerings; i++)
        if (it->offerings[i].available && (best < 0 || it->offerings[i].price_micro_usd < best))
            best = it->offerings[i].price_micro_usd;
    return best;
}

void kp_provider_instance_done(struct kp_provider_instance *in)
{
    if (!in)
        return;
    kp_free(in->nodeclaim);
    kp_free(in->provider_id);
    kp_free(in->instance_type);
    kp_free(in->backing);
    kv_free(in->labels, in->n_labels);
    kv_free(in->annotations, in->n_annotations);
    res_free(in->capacity, in->n_capacity);
    res_free(in->allocatable, in->n_allocatable);
    memset(in, 0, sizeof(*in));
}

void kp_provider_instances_done(struct kp_provider_instances *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        kp_provider_instance_done(&l->v[i]);
    kp_free(l->v);
    l->v = NULL;
    l->n = 0;
}

int kp_provider_kv_add(struct kp_provider_kv **v, size_t *n, const char *key, const char *value)
{
    struct kp_provider_kv *nv;
    char *k = NULL, *val = NULL;

    k = kp_strdup(key);
    val = kp_strdup(value ? value : "");
    if (!k || !val)
        goto fail;
    nv = kp_reallocarray(*v, *n + 1, sizeof(**v));
    if (!nv)
        goto fail;
    nv[*n].key = k;
    nv[*n].value = val;
    *v = nv;
    (*n)++;
    return 0;
fail:
    kp_free(k);
    kp_free(val);
    return -ENOMEM;
}

int kp_provider_res_add(struct kp_provider_res **v, size_t *n, const char *name, int64_t milli)
{
    struct kp_provider_res *nv;
    char *k = kp_strdup(name);

    if (!k)
        return -ENOMEM;
    nv = kp_reallocarray(*v, *n + 1, sizeof(**v));
    if (!nv) {
        kp_free(k);
        return -ENOMEM;
    }
    nv[*n].name = k;
    nv[*n].milli = milli;
    *v = nv;
    (*n)++;
    return 0;
}

const char *kp_provider_kv_get(const struct kp_provider_kv *v, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (kp_streq(v[i].key, key))
            return v[i].value;
    return NULL;
}

int64_t kp_provider_res_get(const struct kp_provider_res *v, size_t n, const char *name,
                            bool *ret_found)
{
    for (size_t i = 0; i < n; i++)
        if (kp_streq(v[i].name, name)) {
            if (ret_found)
                *ret_found = true;
            return v[i].milli;
        }
    if (ret_found)
        *ret_found = false;
    return 0;
}

int kp_provider_instance_copy(const struct kp_provider_instance *a,
                              struct kp_provider_instance *ret)
{
    struct kp_provider_instance in = {0};
    int r = -ENOMEM;

    if ((a->nodeclaim && !(in.nodeclaim = kp_strdup(a->nodeclaim))) ||
        (a->provider_id && !(in.provider_id = kp_strdup(a->provider_id))) ||
        (a->instance_type && !(in.instance_type = kp_strdup(a->instance_type))) ||
        (a->backing && !(in.backing = kp_strdup(a->backing))))
        goto fail;
    in.creation_usec = a->creation_usec;
    for (size_t i = 0; i < a->n_labels; i++)
        if ((r = kp_provider_kv_add(&in.labels, &in.n_labels, a->labels[i].key,
                                    a->labels[i].value ? a->labels[i].value : "")) < 0)
            goto fail;
    for (size_t i = 0; i < a->n_annotations; i++)
        if ((r = kp_provider_kv_add(&in.annotations, &in.n_annotations, a->annotations[i].key,
                                    a->annotations[i].value ? a->annotations[i].value : "")) < 0)
            goto fail;
    for (size_t i = 0; i < a->n_capacity; i++)
        if ((r = kp_provider_res_add(&in.capacity, &in.n_capacity, a->capacity[i].name,
                                     a->capacity[i].milli)) < 0)
            goto fail;
    for (size_t i = 0; i < a->n_allocatable; i++)
        if ((r = kp_provider_res_add(&in.allocatable, &in.n_allocatable, a->allocatable[i].name,
                                     a->allocatable[i].milli)) < 0)
            goto fail;
    *ret = in;
    return 0;
fail:
    kp_provider_instance_done(&in);
    return r < 0 ? r : -ENOMEM;
}
