/* core/provider.c: the small value helpers of the provider interface (core/provider.h).
 *
 * DESIGN: the interface is a header; this file only frees and fills the plain structs that cross
 * it, so every provider (and every fake in tests) builds results the same way. Pure; any thread. */
#include "core/provider.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/str.h"

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
    struct kp_buf b = KP_BUF_INIT(4096);
    va_list ap;

    if (!e)
        return r;
    e->kind = kind;
    if (kp_strscpy(e->reason, sizeof(e->reason), reason ? reason : "") < 0)
        e->reason[0] = '\0';
    kp_free(e->message);
    e->message = NULL;
    va_start(ap, fmt);
    if (kp_buf_vprintf(&b, fmt, ap) == 0)
        e->message = kp_buf_steal(&b, NULL);
    va_end(ap);
    kp_buf_done(&b);
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
        kv_free(it->labels, it->n_labels);
        res_free(it->capacity, it->n_capacity);
        res_free(it->overhead, it->n_overhead);
        for (size_t j = 0; j < it->n_offerings; j++) {
            kp_free(it->offerings[j].zone);
            kp_free(it->offerings[j].capacity_type);
        }
        kp_free(it->offerings);
    }
    kp_free(t->v);
    t->v = NULL;
    t->n = 0;
}

int64_t kp_instance_type_allocatable(const struct kp_instance_type *it, const char *name)
{
    int64_t cap = kp_provider_res_get(it->capacity, it->n_capacity, name, NULL);
    int64_t oh = kp_provider_res_get(it->overhead, it->n_overhead, name, NULL);

    return cap > oh ? cap - oh : 0;
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
