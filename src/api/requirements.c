/* DESIGN: requirement sets (requirements.h).
 *
 * What: one struct per key holding either a finite value set or a complement with optional
 * integer bounds, and the set algebra the scheduler needs on it: intersection, "is there a value
 * both allow" and "does one side define every key the other requires". The rules are Karpenter's
 * (facts from pkg/scheduling): Gt/Lt/Gte/Lte are complements narrowed to an integer range, a
 * finite set never keeps bounds (its values outside them are dropped when it is made), and a
 * complement whose range is empty collapses to DoesNotExist.
 *
 * Why sorted arrays: the sets are small (a few zones, a few instance types), built once per
 * NodePool or instance type and read many times per scheduling pass; merging sorted arrays makes
 * every operation linear, equal sets byte-equal, and lookups a binary search, with no hashing and
 * no allocation on the read side.
 *
 * Ownership: every function that changes a set builds the new key's set on the side and swaps
 * it in only once it is complete, so a failure leaves the set as it was. Pure; any thread. */
#include "api/requirements.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/str.h"
#include "api/obj-karpenter.h"

const char *const kp_reqset_well_known_labels[] = {
    "karpenter.sh/nodepool",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
    NULL,
};

/* --- one key ---------------------------------------------------------------------------------- */

static void req_done(struct kp_req *r)
{
    kp_free(r->key);
    for (size_t i = 0; !r->packed && i < r->n_values; i++)
        kp_free(r->values[i]);
    kp_free(r->values);
    memset(r, 0, sizeof(*r));
}

void kp_reqset_done(struct kp_reqset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        req_done(&s->v[i]);
    kp_free(s->v);
    s->v = NULL;
    s->n = 0;
}

void kp_reqset_remove(struct kp_reqset *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i].key, key) == 0) {
            req_done(&s->v[i]);
            memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(s->v[0]));
            s->n--;
            return;
        }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool values_has(char *const *v, size_t n, const char *value)
{
    return n && bsearch(&value, v, n, sizeof(*v), cmp_str) != NULL;
}

/* Whether value is an integer within the bounds (no bounds: any value). */
static bool within(const struct kp_req *r, const char *value)
{
    int64_t x;

    if (!r->has_min && !r->has_max)
        return true;
    if (kp_safe_atoi64(value, &x) < 0)
        return false;
    return (!r->has_min || x >= r->min) && (!r->has_max || x <= r->max);
}

bool kp_req_has(const struct kp_req *r, const char *value)
{
    bool listed = values_has(r->values, r->n_values, value);

    return (r->complement ? !listed : listed) && within(r, value);
}

enum kp_selector_op kp_req_operator(const struct kp_req *r)
{
    if (r->complement)
        return r->n_values ? KP_SEL_NOT_IN : KP_SEL_EXISTS;
    return r->n_values ? KP_SEL_IN : KP_SEL_DOES_NOT_EXIST;
}

const char *kp_req_single(const struct kp_req *r)
{
    return !r->complement && r->n_values == 1 ? r->values[0] : NULL;
}

/* Appends a copy of value to a growing value array. */
static int push_value(char ***v, size_t *n, size_t *cap, const char *value)
{
    char *d;

    if (*n >= KP_REQSET_MAX_VALUES)
        return -KP_ELIMIT;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        char **nv = kp_reallocarray(*v, nc, sizeof(**v));

        if (!nv)
            return -ENOMEM;
        *v = nv;
        *cap = nc;
    }
    d = kp_strdup(value);
    if (!d)
        return -ENOMEM;
    (*v)[(*n)++] = d;
    return 0;
}

/* Whether v has no NULL and is in strcmp order without repeats. Callers often pass such sets (a
 * scheduler's instance-type names, a copy of a set), and one pass is cheaper than a sort that
 * finds nothing to do. */
static bool strictly_sorted(const char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!v[i] || (i && strcmp(v[i - 1], v[i]) >= 0))
            return false;
    return true;
}

/* r->values := copies of v[0..n), sorted and unique already, as one allocation: the pointer
 * array, then the strings in that order, so the last one ends the block (req_copy copies it
 * whole). A set of 400 instance-type names costs one allocation and one free, not 401 of each. */
static int values_pack(struct kp_req *r, const char *const *v, size_t n)
{
    size_t bytes = n * sizeof(char *);
    char *at;

    if (n > KP_REQSET_MAX_VALUES)
        return -KP_ELIMIT;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(v[i]) + 1;

        if (len > SIZE_MAX - bytes)
            return -ENOMEM;
        bytes += len;
    }
    if (!(r->values = kp_malloc(bytes ? bytes : 1)))
        return -ENOMEM;
    at = (char *)(r->values + n);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(v[i]) + 1;

        memcpy(at, v[i], len);
        r->values[i] = at;
        at += len;
    }
    r->n_values = n;
    r->packed = true;
    return 0;
}

/* A new key set from op and values (validated), into *ret. */
static int req_make(const char *key, enum kp_selector_op op, const char *const *values, size_t n,
                    uint32_t min_values, struct kp_req *ret)
{
    struct kp_req r = {0};
    size_t cap = 0;
    int64_t bound = 0;
    int rc;

    switch (op) {
    case KP_SEL_IN:
    case KP_SEL_EQUALS:
    case KP_SEL_NOT_IN:
    case KP_SEL_NOT_EQUALS:
        break;
    case KP_SEL_EXISTS:
    case KP_SEL_DOES_NOT_EXIST:
        if (n != 0)
            return -EINVAL;
        break;
    case KP_SEL_GT:
    case KP_SEL_LT:
    case KP_SEL_GTE:
    case KP_SEL_LTE:
        if (n != 1 || !values[0] || kp_safe_atoi64(values[0], &bound) < 0)
            return -EINVAL;
        break;
    default:
        return -EINVAL;
    }
    if (n > KP_REQSET_MAX_VALUES)
        return -KP_ELIMIT;
    r.key = kp_strdup(key);
    if (!r.key)
        return -ENOMEM;
    r.min_values = min_values;
    r.complement = op == KP_SEL_NOT_IN || op == KP_SEL_NOT_EQUALS;
    switch (op) {
    case KP_SEL_NOT_IN:
    case KP_SEL_NOT_EQUALS:
    case KP_SEL_IN:
    case KP_SEL_EQUALS:
        if (n && strictly_sorted(values, n)) {
            if ((rc = values_pack(&r, values, n)) < 0)
                goto fail;
            break;
        }
        for (size_t i = 0; i < n; i++)
            if (values[i] && (rc = push_value(&r.values, &r.n_values, &cap, values[i])) < 0)
                goto fail;
        if (r.n_values > 1) {
            size_t w = 1;

            qsort(r.values, r.n_values, sizeof(*r.values), cmp_str);
            for (size_t i = 1; i < r.n_values; i++) {
                if (strcmp(r.values[i], r.values[w - 1]) == 0)
                    kp_free(r.values[i]);
                else
                    r.values[w++] = r.values[i];
            }
            r.n_values = w;
        }
        break;
    case KP_SEL_EXISTS:
        r.complement = true;
        break;
    case KP_SEL_DOES_NOT_EXIST:
        break;
    case KP_SEL_GT:
    case KP_SEL_GTE:
        r.complement = true;
        r.has_min = true;
        if (op == KP_SEL_GT && bound == INT64_MAX) {
            r.complement = r.has_min = false; /* nothing is greater: DoesNotExist */
            break;
        }
        r.min = op == KP_SEL_GT ? bound + 1 : bound;
        break;
    case KP_SEL_LT:
    case KP_SEL_LTE:
        r.complement = true;
        r.has_max = true;
        if (op == KP_SEL_LT && bound == INT64_MIN) {
            r.complement = r.has_max = false;
            break;
        }
        r.max = op == KP_SEL_LT ? bound - 1 : bound;
        break;
    }
    *ret = r;
    return 0;
fail:
    req_done(&r);
    return rc;
}

/* *ret := a ∩ b (same key). */
static int req_intersect(const struct kp_req *a, const struct kp_req *b, struct kp_req *ret)
{
    struct kp_req r = {0};
    struct kp_req bounds = {0};
    size_t cap = 0, i = 0, j = 0;
    int rc = 0;

    r.key = kp_strdup(a->key);
    if (!r.key)
        return -ENOMEM;
    r.min_values = a->min_values > b->min_values ? a->min_values : b->min_values;
    bounds.has_min = a->has_min || b->has_min;
    bounds.has_max = a->has_max || b->has_max;
    bounds.min = !a->has_min ? b->min : !b->has_min ? a->min : a->min > b->min ? a->min : b->min;
    bounds.max = !a->has_max ? b->max : !b->has_max ? a->max : a->max < b->max ? a->max : b->max;

    if (a->complement && b->complement) {
        if (bounds.has_min && bounds.has_max && bounds.min > bounds.max)
            goto out; /* an empty range: DoesNotExist */
        r.complement = true;
        r.has_min = bounds.has_min;
        r.has_max = bounds.has_max;
        r.min = bounds.min;
        r.max = bounds.max;
        /* The union of the excluded values. */
        while (rc == 0 && (i < a->n_values || j < b->n_values)) {
            int c = i == a->n_values   ? 1
                    : j == b->n_values ? -1
                                       : strcmp(a->values[i], b->values[j]);

            rc = push_value(&r.values, &r.n_values, &cap, c <= 0 ? a->values[i] : b->values[j]);
            if (c <= 0)
                i++;
            if (c >= 0)
                j++;
        }
    } else if (a->complement || b->complement) {
        const struct kp_req *fin = a->complement ? b : a, *co = a->complement ? a : b;

        for (i = 0; rc == 0 && i < fin->n_values; i++)
            if (!values_has(co->values, co->n_values, fin->values[i]) &&
                within(&bounds, fin->values[i]))
                rc = push_value(&r.values, &r.n_values, &cap, fin->values[i]);
    } else {
        while (rc == 0 && i < a->n_values && j < b->n_values) {
            int c = strcmp(a->values[i], b->values[j]);

            if (c == 0) {
                if (within(&bounds, a->values[i]))
                    rc = push_value(&r.values, &r.n_values, &cap, a->values[i]);
                i++;
                j++;
            } else if (c < 0)
                i++;
            else
                j++;
        }
    }
out:
    if (rc < 0) {
        req_done(&r);
        return rc;
    }
    *ret = r;
    return 0;
}

static int req_copy(const struct kp_req *a, struct kp_req *ret)
{
    struct kp_req r = *a;
    int rc;

    r.key = kp_strdup(a->key);
    r.values = NULL;
    r.n_values = 0;
    r.packed = false;
    if (!r.key)
        return -ENOMEM;
    if (a->packed && a->n_values) {
        /* One block copied whole, its pointers moved by the distance between the blocks. */
        const char *base = (const char *)a->values, *last = a->values[a->n_values - 1];
        size_t bytes = (size_t)(last - base) + strlen(last) + 1;

        if (!(r.values = kp_malloc(bytes))) {
            req_done(&r);
            return -ENOMEM;
        }
        memcpy(r.values, a->values, bytes);
        for (size_t i = 0; i < a->n_values; i++)
            r.values[i] = (char *)r.values + (a->values[i] - base);
        r.n_values = a->n_values;
        r.packed = true;
    } else if (a->n_values &&
               (rc = values_pack(&r, (const char *const *)a->values, a->n_values)) < 0) {
        /* a's values are sorted and unique (the set's invariant). */
        req_done(&r);
        return rc;
    }
    *ret = r;
    return 0;
}

/* --- the set ---------------------------------------------------------------------------------- */

/* The index of key in s, or where it would go (*found false). */
static size_t find(const struct kp_reqset *s, const char *key, bool *found)
{
    size_t pos;

    *found = kp_sorted_find(s->v, s->n, sizeof(*s->v), offsetof(struct kp_req, key), key, &pos);
    return pos;
}

const struct kp_req *kp_reqset_get(const struct kp_reqset *s, const char *key)
{
    bool found;
    size_t i = find(s, key, &found);

    return found ? &s->v[i] : NULL;
}

/* Merges one key's set r (consumed, also on failure) into s. */
static int merge(struct kp_reqset *s, struct kp_req *r)
{
    bool found;
    size_t at = find(s, r->key, &found);
    struct kp_req *nv;
    int rc;

    if (found) {
        struct kp_req x;

        rc = req_intersect(&s->v[at], r, &x);
        req_done(r);
        if (rc < 0)
            return rc;
        req_done(&s->v[at]);
        s->v[at] = x;
        return 0;
    }
    if (s->n >= KP_REQSET_MAX_KEYS) {
        req_done(r);
        return -KP_ELIMIT;
    }
    nv = kp_reallocarray(s->v, s->n + 1, sizeof(*s->v));
    if (!nv) {
        req_done(r);
        return -ENOMEM;
    }
    s->v = nv;
    memmove(&s->v[at + 1], &s->v[at], (s->n - at) * sizeof(*s->v));
    s->v[at] = *r;
    s->n++;
    memset(r, 0, sizeof(*r));
    return 0;
}

int kp_reqset_add(struct kp_reqset *s, const char *key, enum kp_selector_op op,
                  const char *const *values, size_t n_values, uint32_t min_values)
{
    struct kp_req r;
    int rc;

    if ((rc = req_make(key, op, values, n_values, min_values, &r)) < 0)
        return rc;
    return merge(s, &r);
}

int kp_reqset_copy(const struct kp_reqset *s, struct kp_reqset *ret)
{
    struct kp_reqset out = KP_REQSET_INIT;
    int rc;

    *ret = out;
    if (s->n == 0)
        return 0;
    out.v = kp_calloc(s->n, sizeof(*out.v));
    if (!out.v)
        return -ENOMEM;
    for (; out.n < s->n; out.n++)
        if ((rc = req_copy(&s->v[out.n], &out.v[out.n])) < 0) {
            kp_reqset_done(&out);
            return rc;
        }
    *ret = out;
    return 0;
}

/* Applies add to a scratch copy and swaps it in on success, so s is unchanged on failure. */
int kp_reqset_intersect(struct kp_reqset *s, const struct kp_reqset *other)
{
    struct kp_reqset t;
    int rc;

    if ((rc = kp_reqset_copy(s, &t)) < 0)
        return rc;
    for (size_t i = 0; i < other->n; i++) {
        struct kp_req r;

        if ((rc = req_copy(&other->v[i], &r)) < 0 || (rc = merge(&t, &r)) < 0) {
            kp_reqset_done(&t);
            return rc;
        }
    }
    kp_reqset_done(s);
    *s = t;
    return 0;
}

int kp_reqset_add_requirements(struct kp_reqset *s, const struct kp_requirement *v, size_t n)
{
    struct kp_reqset t;
    int rc;

    if ((rc = kp_reqset_copy(s, &t)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        if ((rc = kp_reqset_add(&t, v[i].key, v[i].op, (const char *const *)v[i].values,
                                v[i].n_values, v[i].min_values)) < 0) {
            kp_reqset_done(&t);
            return rc;
        }
    kp_reqset_done(s);
    *s = t;
    return 0;
}

int kp_reqset_add_labels(struct kp_reqset *s, const struct kp_labels *l)
{
    struct kp_reqset t;
    int rc;

    if ((rc = kp_reqset_copy(s, &t)) < 0)
        return rc;
    for (size_t i = 0; i < l->n; i++) {
        const char *val = l->v[i].value ? l->v[i].value : "";

        if ((rc = kp_reqset_add(&t, l->v[i].key, KP_SEL_IN, &val, 1, 0)) < 0) {
            kp_reqset_done(&t);
            return rc;
        }
    }
    kp_reqset_done(s);
    *s = t;
    return 0;
}

int kp_reqset_from_nodepool(const struct kp_nodepool_view *np, struct kp_reqset *ret)
{
    struct kp_reqset s = KP_REQSET_INIT;
    const char *name = np->e.name ? np->e.name : "";
    int rc;

    *ret = s;
    if (np->tmpl.reqs_error)
        return -EINVAL;
    if ((rc = kp_reqset_add_requirements(&s, np->tmpl.requirements.v, np->tmpl.requirements.n)) <
            0 ||
        (rc = kp_reqset_add_labels(&s, &np->tmpl_labels)) < 0 ||
        (rc = kp_reqset_add(&s, "karpenter.sh/nodepool", KP_SEL_IN, &name, 1, 0)) < 0) {
        kp_reqset_done(&s);
        return rc;
    }
    *ret = s;
    return 0;
}

int kp_reqset_from_nodeclaim(const struct kp_nodeclaim_view *nc, struct kp_reqset *ret)
{
    struct kp_reqset s = KP_REQSET_INIT;
    int rc;

    *ret = s;
    if (nc->spec.reqs_error)
        return -EINVAL;
    if ((rc = kp_reqset_add_requirements(&s, nc->spec.requirements.v, nc->spec.requirements.n)) <
        0) {
        kp_reqset_done(&s);
        return rc;
    }
    *ret = s;
    return 0;
}

/* --- questions -------------------------------------------------------------------------------- */

void kp_req_format(const struct kp_req *r, char *buf, size_t size)
{
    static const char *const names[] = {
        [KP_SEL_IN] = "In",
        [KP_SEL_NOT_IN] = "NotIn",
        [KP_SEL_EXISTS] = "Exists",
        [KP_SEL_DOES_NOT_EXIST] = "DoesNotExist",
    };
    size_t used;
    int w;

    if (size == 0)
        return;
    w = snprintf(buf, size, "%s %s", r->key, names[kp_req_operator(r)]);
    used = w < 0 ? 0 : (size_t)w;
    if (r->n_values && used < size) {
        /* Five values say enough; the rest are counted. */
        size_t shown = r->n_values > 5 ? 5 : r->n_values;

        w = snprintf(buf + used, size - used, " [");
        used += w < 0 ? 0 : (size_t)w;
        for (size_t i = 0; i < shown && used < size; i++) {
            w = snprintf(buf + used, size - used, "%s%s", i ? " " : "", r->values[i]);
            used += w < 0 ? 0 : (size_t)w;
        }
        if (shown < r->n_values && used < size) {
            w = snprintf(buf + used, size - used, " and %zu more", r->n_values - shown);
            used += w < 0 ? 0 : (size_t)w;
        }
        if (used < size) {
            w = snprintf(buf + used, size - used, "]");
            used += w < 0 ? 0 : (size_t)w;
        }
    }
    if (r->has_min && used < size) {
        w = snprintf(buf + used, size - used, " Gte %" PRId64, r->min);
        used += w < 0 ? 0 : (size_t)w;
    }
    if (r->has_max && used < size)
        (void)snprintf(buf + used, size - used, " Lte %" PRId64, r->max);
}

static bool is_negative(enum kp_selector_op op)
{
    return op == KP_SEL_NOT_IN || op == KP_SEL_DOES_NOT_EXIST;
}

/* Whether a ∩ b has some value, without building it. */
static bool req_overlaps(const struct kp_req *a, const struct kp_req *b)
{
    if (a->complement && b->complement) {
        bool has_min = a->has_min || b->has_min, has_max = a->has_max || b->has_max;
        int64_t lo = !a->has_min       ? b->min
                     : !b->has_min     ? a->min
                     : a->min > b->min ? a->min
                                       : b->min;
        int64_t hi = !a->has_max       ? b->max
                     : !b->has_max     ? a->max
                     : a->max < b->max ? a->max
                                       : b->max;

        return !(has_min && has_max && lo > hi);
    }
    if (!a->complement) {
        for (size_t i = 0; i < a->n_values; i++)
            if (kp_req_has(b, a->values[i]))
                return true;
        return false;
    }
    return req_overlaps(b, a);
}

static void why_set(char *why, size_t size, const struct kp_req *a, const struct kp_req *b)
{
    char x[KP_REQSET_WHY_SIZE / 2], y[KP_REQSET_WHY_SIZE / 2];

    if (!why || size == 0)
        return;
    kp_req_format(b, x, sizeof(x));
    kp_req_format(a, y, sizeof(y));
    (void)snprintf(why, size, "key %s: no value satisfies both %s and %s", a->key, x, y);
}

bool kp_reqset_intersects(const struct kp_reqset *a, const struct kp_reqset *b, char *why,
                          size_t why_size)
{
    size_t i = 0, j = 0;

    /* Both sorted by key: walk them together over the common keys. */
    while (i < a->n && j < b->n) {
        int c = strcmp(a->v[i].key, b->v[j].key);

        if (c < 0) {
            i++;
            continue;
        }
        if (c > 0) {
            j++;
            continue;
        }
        if (!req_overlaps(&a->v[i], &b->v[j]) &&
            !(is_negative(kp_req_operator(&a->v[i])) && is_negative(kp_req_operator(&b->v[j])))) {
            why_set(why, why_size, &a->v[i], &b->v[j]);
            return false;
        }
        i++;
        j++;
    }
    return true;
}

static bool listed(const char *const *l, const char *key)
{
    for (; l && *l; l++)
        if (kp_streq(*l, key))
            return true;
    return false;
}

bool kp_reqset_compatible(const struct kp_reqset *s, const struct kp_reqset *incoming,
                          const char *const *allow_undefined, char *why, size_t why_size)
{
    for (size_t i = 0; i < incoming->n; i++) {
        const struct kp_req *r = &incoming->v[i];

        if (listed(allow_undefined, r->key) || is_negative(kp_req_operator(r)) ||
            kp_reqset_get(s, r->key))
            continue;
        if (why && why_size)
            (void)snprintf(why, why_size, "label %s is required but has no known values here",
                           r->key);
        return false;
    }
    return kp_reqset_intersects(s, incoming, why, why_size);
}

static bool req_equal(const struct kp_req *a, const struct kp_req *b)
{
    if (!kp_streq(a->key, b->key) || a->complement != b->complement || a->n_values != b->n_values ||
        a->has_min != b->has_min || a->has_max != b->has_max || (a->has_min && a->min != b->min) ||
        (a->has_max && a->max != b->max) || a->min_values != b->min_values)
        return false;
    for (size_t i = 0; i < a->n_values; i++)
        if (!kp_streq(a->values[i], b->values[i]))
            return false;
    return true;
}

bool kp_reqset_equal(const struct kp_reqset *a, const struct kp_reqset *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!req_equal(&a->v[i], &b->v[i]))
            return false;
    return true;
}
