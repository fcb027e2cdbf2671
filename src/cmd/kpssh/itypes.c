/* DESIGN: `kpssh simulate --instance-types FILE`: an InstanceTypes document read into the
 * struct kp_instance_type the SSH provider would build, and a provider that hands those types to
 * every NodePool (itypes.h).
 *
 * Why here and not in provider/ssh: the document is a CLI input for what-if questions ("what
 * would Karpenter pick among these types?"), not something the controller reads, so it lives with
 * the verb. Why the provider's struct and not a model of it: the scheduler must not be able to
 * tell the types from a catalog's, so an item is held to the same shape: the well-known keys in
 * its requirement set (instance type, arch, os, zone, capacity type), labels for its single-valued
 * keys, capacity with pods, an overhead, offerings with one zone and one capacity type each and a
 * price in micro-USD per hour (provider/ssh/inventory.c does the same for host classes).
 *
 * How: manifest.c turns the YAML or JSON into one JSON text (so both spellings and the scalar
 * typing are simulate -f's), jansson decodes it within api/obj.h's object ceiling, and one walk
 * checks every field, so the first error is reported with the item and the field that caused it.
 * Requirements go through the selector code's NodeSelectorRequirement parser (operators, keys,
 * integer bounds) and into api/requirements.h sets; quantities through api/quantity.h with the
 * projections' rules (strings, or integers as whole units; sub-milli rounded up). Every list has
 * a ceiling (itypes.h), and a count past it is -KP_ELIMIT before anything is allocated for it.
 *
 * The wrapping provider forwards every call but get_instance_types to the SSH provider, so which
 * NodePools and NodeClaims are ours (kp_provider_supports, owns_provider_id) does not change.
 *
 * Threads: the parser is pure; the provider is used by the CLI's main thread. */
#include "cmd/kpssh/itypes.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/str.h"
#include "json/json.h"
#include "api/obj.h"
#include "api/quantity.h"
#include "api/requirements.h"
#include "api/selector.h"
#include "cmd/kpssh/manifest.h"

#define ITYPES_ARCH_DEFAULT "amd64" /* as simulate's default for an SSHHost's observedArch */
#define ITYPES_OS_DEFAULT "linux"   /* as provider/ssh/inventory.h KP_INVENTORY_OS */
/* Input text quoted in a message is cut to this many bytes (messages are one line). */
#define ITYPES_SHOW_MAX 64

/* Where a message points: the document, and the item being read (name once it is valid). */
struct where {
    const char *file;
    unsigned line; /* the document's first line */
    bool in_item;
    size_t item; /* 0-based, as the field path items[i] */
    const char *name;
    char **ret_msg;
};

/* A copy of input text fit for a one-line message: cut to ITYPES_SHOW_MAX bytes, every control
 * byte and '"' shown as '?'. The buffer is for display only, so cutting is the intent. */
struct shown {
    char s[ITYPES_SHOW_MAX + 4];
};

static const char *show(struct shown *b, const char *s)
{
    size_t i = 0;

    for (; i < ITYPES_SHOW_MAX && s[i]; i++)
        b->s[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == '"' ? '?' : s[i];
    if (s[i]) {
        memcpy(b->s + i, "...", 3);
        i += 3;
    }
    b->s[i] = '\0';
    return b->s;
}

/* Sets the message "<file>:<line>: [items[i] "name": ]<why>" and returns r. */
static int fail(const struct where *w, int r, const char *fmt, ...) KP_PRINTF(3, 4);

static int fail(const struct where *w, int r, const char *fmt, ...)
{
    char *why = NULL;
    va_list ap;

    if (!w->ret_msg)
        return r;
    va_start(ap, fmt);
    kp_msg_setv(&why, fmt, ap);
    va_end(ap);
    if (!w->in_item)
        kp_msg_set(w->ret_msg, "%s:%u: %s", w->file, w->line, why ? why : kp_strerror(r));
    else if (w->name)
        kp_msg_set(w->ret_msg, "%s:%u: items[%zu] \"%s\": %s", w->file, w->line, w->item, w->name,
                   why ? why : kp_strerror(r));
    else
        kp_msg_set(w->ret_msg, "%s:%u: items[%zu]: %s", w->file, w->line, w->item,
                   why ? why : kp_strerror(r));
    kp_free(why);
    return r;
}

/* Refuses a key of obj that is not in known (NULL-terminated); at names obj in messages ("" at
 * the top), list names the known fields for the user. */
static int only_fields(const struct where *w, const json_t *obj, const char *at,
                       const char *const *known, const char *list)
{
    struct kp_json_iter it = KP_JSON_ITER_INIT;
    struct shown sh;
    const char *key;
    json_t *v;

    while (kp_json_object_next(obj, &it, &key, &v)) {
        bool ok = false;

        for (const char *const *k = known; *k && !ok; k++)
            ok = strcmp(*k, key) == 0;
        if (!ok)
            return fail(w, -KP_EPARSE, "%s%sunknown field \"%s\" (fields: %s)", at, *at ? ": " : "",
                        show(&sh, key), list);
    }
    return 0;
}

/* The value at key of obj; NULL when absent or null, or when obj is no object. */
static json_t *field(const json_t *obj, const char *key)
{
    json_t *v = NULL;

    if (kp_json_pathv(obj, KP_JSON_PATH(key), &v) < 0 || !v || kp_json_typeof(v) == KP_JSON_NULL)
        return NULL;
    return v;
}

/* Adds the ResourceList v (named at in messages) to (*res, *n), summing the amounts of a name
 * already there. v NULL: nothing. */
static int add_resources(const struct where *w, const json_t *v, const char *at,
                         struct kp_provider_res **res, size_t *n)
{
    struct kp_json_iter it = KP_JSON_ITER_INIT;
    struct shown sh;
    const char *name, *text;
    char *why = NULL;
    json_t *q;
    size_t count = 0;
    int r;

    if (!v)
        return 0;
    if (kp_json_typeof(v) != KP_JSON_OBJECT)
        return fail(w, -KP_EPARSE, "%s: must be a map of resource names to quantities", at);
    while (kp_json_object_next(v, &it, &name, &q))
        count++;
    if (count > KP_ITYPES_MAX_RESOURCES)
        return fail(w, -KP_ELIMIT, "%s: %zu resources, at most %u", at, count,
                    KP_ITYPES_MAX_RESOURCES);
    it = (struct kp_json_iter)KP_JSON_ITER_INIT;
    while (kp_json_object_next(v, &it, &name, &q)) {
        struct kp_quantity qty;
        int64_t units, sum;
        bool found = false;

        if (kp_label_validate_key(name, strlen(name), &why) < 0) {
            r = fail(w, -KP_EPARSE, "%s: \"%s\" is not a resource name: %s", at, show(&sh, name),
                     why ? why : "invalid");
            kp_free(why);
            return r;
        }
        /* As the projections read quantities (api/obj.h): strings, or integers as units. */
        if (kp_json_as_str(q, &text) == 0) {
            if ((r = kp_quantity_parse(text, strlen(text), KP_QUANTITY_ROUND_UP, &qty)) < 0)
                return fail(w, -KP_EPARSE, "%s.%s: \"%s\" is not a quantity: %s", at, name,
                            show(&sh, text), r == -ERANGE ? "out of range" : kp_strerror(r));
        } else if (kp_json_as_int(q, &units) == 0) {
            if (kp_quantity_from_units(units, KP_QUANTITY_DECIMAL_SI, &qty) < 0)
                return fail(w, -KP_EPARSE, "%s.%s: %lld is out of range", at, name,
                            (long long)units);
        } else {
            return fail(w, -KP_EPARSE,
                        "%s.%s: must be a quantity (a string such as \"500m\" or \"4Gi\", or an "
                        "integer)",
                        at, name);
        }
        if (qty.milli < 0)
            return fail(w, -KP_EPARSE, "%s.%s: must not be negative", at, name);
        for (size_t i = 0; i < *n && !found; i++) {
            if (strcmp((*res)[i].name, name) != 0)
                continue;
            found = true;
            if (kp_add_overflow((*res)[i].milli, qty.milli, &sum))
                return fail(w, -KP_EPARSE, "%s.%s: the sum is out of range", at, name);
            (*res)[i].milli = sum;
        }
        if (!found && (r = kp_provider_res_add(res, n, name, qty.milli)) < 0)
            return r;
    }
    return 0;
}

/* Intersects the NodeSelectorRequirement list v (named at in messages) into *s. v NULL:
 * nothing. */
static int add_requirements(const struct where *w, const json_t *v, const char *at,
                            struct kp_reqset *s)
{
    struct kp_selector_error se = {0};
    struct kp_selector *sel = NULL;
    int r;

    if (!v)
        return 0;
    if (kp_json_typeof(v) != KP_JSON_ARRAY)
        return fail(w, -KP_EPARSE, "%s: must be a list of {key, operator, values}", at);
    if (kp_json_array_size(v) > KP_ITYPES_MAX_REQUIREMENTS)
        return fail(w, -KP_ELIMIT, "%s: %zu requirements, at most %u", at, kp_json_array_size(v),
                    KP_ITYPES_MAX_REQUIREMENTS);
    if ((r = kp_selector_from_node_requirements(v, &sel, &se)) < 0) {
        if (r == -ENOMEM)
            return r;
        return fail(w, r == -KP_ELIMIT ? r : -KP_EPARSE, "%s[%zu]: %s", at, se.pos,
                    se.msg ? se.msg : kp_strerror(r));
    }
    for (size_t i = 0; i < kp_selector_count(sel) && r == 0; i++) {
        const struct kp_requirement *q = kp_selector_at(sel, i);

        if (q->min_values) {
            r = fail(w, -KP_EPARSE, "%s: %s: minValues belongs in a NodePool, not an instance type",
                     at, q->key);
            break;
        }
        r = kp_reqset_add(s, q->key, q->op, (const char *const *)q->values, q->n_values, 0);
        if (r < 0 && r != -ENOMEM)
            r = fail(w, r == -KP_ELIMIT ? r : -KP_EPARSE, "%s: %s: %s", at, q->key, kp_strerror(r));
    }
    kp_selector_free(sel);
    return r;
}

/* The single value of key in s, or NULL. */
static const char *single(const struct kp_reqset *s, const char *key)
{
    const struct kp_req *q = kp_reqset_get(s, key);

    return q ? kp_req_single(q) : NULL;
}

static int parse_offering(const struct where *w, const json_t *o, size_t i, struct kp_offering *of)
{
    static const char *const known[] = {"requirements", "price", "available", NULL};
    const char *zone, *ct;
    char *why = NULL;
    struct shown sh;
    char at[40], rat[64]; /* our own text: a field name and an index */
    json_t *v;
    double usd;
    int r;

    (void)snprintf(at, sizeof(at), "offerings[%zu]", i);
    if (kp_json_typeof(o) != KP_JSON_OBJECT)
        return fail(w, -KP_EPARSE, "%s: must be a map (requirements, price, available)", at);
    if ((r = only_fields(w, o, at, known, "requirements, price, available")) < 0)
        return r;
    of->available = true;
    (void)snprintf(rat, sizeof(rat), "%s.requirements", at);
    if ((r = add_requirements(w, field(o, "requirements"), rat, &of->reqs)) < 0)
        return r;
    zone = single(&of->reqs, KP_LABEL_ZONE);
    ct = single(&of->reqs, KP_LABEL_CAPACITY_TYPE);
    if (!zone)
        return fail(w, -KP_EPARSE, "%s.requirements: needs %s In [one zone]", at, KP_LABEL_ZONE);
    if (kp_label_validate_value(zone, strlen(zone), &why) < 0) {
        r = fail(w, -KP_EPARSE, "%s.requirements: zone \"%s\" is not a label value: %s", at,
                 show(&sh, zone), why ? why : "invalid");
        kp_free(why);
        return r;
    }
    if (!ct)
        return fail(w, -KP_EPARSE, "%s.requirements: needs %s In [on-demand] or In [spot]", at,
                    KP_LABEL_CAPACITY_TYPE);
    if (strcmp(ct, KP_CAPACITY_TYPE_ON_DEMAND) != 0 && strcmp(ct, "spot") != 0)
        return fail(w, -KP_EPARSE,
                    "%s.requirements: capacity type \"%s\" is not on-demand or spot (reserved "
                    "capacity is not modelled)",
                    at, show(&sh, ct));
    if (!(v = field(o, "price")))
        return fail(w, -KP_EPARSE, "%s.price: required (US dollars per hour)", at);
    if (kp_json_as_number(v, &usd) < 0)
        return fail(w, -KP_EPARSE, "%s.price: must be a number (US dollars per hour)", at);
    if (!(usd >= 0 && usd <= KP_ITYPES_MAX_PRICE_USD))
        return fail(w, -KP_EPARSE, "%s.price: %g is not between 0 and %d (US dollars per hour)", at,
                    usd, KP_ITYPES_MAX_PRICE_USD);
    /* Micro-USD per hour, the unit of kp_offering (provider/ssh/inventory.c's prices too). */
    of->price_micro_usd = (int64_t)(usd * 1e6 + 0.5);
    if ((v = field(o, "available")) && kp_json_as_bool(v, &of->available) < 0)
        return fail(w, -KP_EPARSE, "%s.available: must be true or false", at);
    return 0;
}

/* Whether key's set in s admits value; fails with what left it out. */
static int admits(const struct where *w, const struct kp_reqset *s, const char *key,
                  const char *value, const char *from)
{
    const struct kp_req *q = kp_reqset_get(s, key);
    struct shown sh;

    if (q && kp_req_has(q, value))
        return 0;
    return fail(w, -KP_EPARSE, "requirements: %s leaves out \"%s\" (%s)", key, show(&sh, value),
                from);
}

/* The requirement set of an item whose given requirements are already in it->reqs (see
 * itypes.h), then its labels. */
static int complete_type(const struct where *w, struct kp_instance_type *it)
{
    const char *arch = ITYPES_ARCH_DEFAULT, *os = ITYPES_OS_DEFAULT;
    const char **zones = NULL, **cts = NULL;
    char from[48];
    int r = 0;

    if (!kp_reqset_get(&it->reqs, KP_LABEL_ARCH))
        r = kp_reqset_add(&it->reqs, KP_LABEL_ARCH, KP_SEL_IN, &arch, 1, 0);
    if (r == 0 && !kp_reqset_get(&it->reqs, KP_LABEL_OS))
        r = kp_reqset_add(&it->reqs, KP_LABEL_OS, KP_SEL_IN, &os, 1, 0);
    if (r < 0)
        goto out;
    zones = kp_calloc(it->n_offerings, sizeof(*zones));
    cts = kp_calloc(it->n_offerings, sizeof(*cts));
    if (!zones || !cts) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < it->n_offerings; i++) {
        zones[i] = single(&it->offerings[i].reqs, KP_LABEL_ZONE);
        cts[i] = single(&it->offerings[i].reqs, KP_LABEL_CAPACITY_TYPE);
    }
    /* Intersected, not set: a requirement the item gives for these keys must admit them. */
    if ((r = kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN,
                           (const char *const *)&it->name, 1, 0)) < 0 ||
        (r = kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, zones, it->n_offerings, 0)) < 0 ||
        (r = kp_reqset_add(&it->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, cts, it->n_offerings, 0)) <
            0)
        goto out;
    if ((r = admits(w, &it->reqs, KP_LABEL_INSTANCE_TYPE, it->name, "the name")) < 0)
        goto out;
    for (size_t i = 0; i < it->n_offerings; i++) {
        (void)snprintf(from, sizeof(from), "offerings[%zu]", i);
        if ((r = admits(w, &it->reqs, KP_LABEL_ZONE, zones[i], from)) < 0 ||
            (r = admits(w, &it->reqs, KP_LABEL_CAPACITY_TYPE, cts[i], from)) < 0)
            goto out;
    }
    /* What an instance of it is labelled with: every key with exactly one value. */
    for (size_t i = 0; i < it->reqs.n && r == 0; i++) {
        const char *v = kp_req_single(&it->reqs.v[i]);

        if (v)
            r = kp_provider_kv_add(&it->labels, &it->n_labels, it->reqs.v[i].key, v);
    }
out:
    kp_free(cts);
    kp_free(zones);
    return r;
}

static int parse_item(struct where *w, const json_t *item, struct kp_instance_type *it)
{
    static const char *const known[] = {"name",     "requirements", "capacity",
                                        "overhead", "offerings",    NULL};
    static const char *const known_overhead[] = {"kubeReserved", "systemReserved",
                                                 "evictionThreshold", NULL};
    static const char *const overheads[] = {"kubeReserved", "systemReserved", "evictionThreshold"};
    static const char *const needed[] = {"cpu", "memory"};
    const char *name = NULL;
    char *why = NULL;
    bool has_pods = false;
    struct shown sh;
    json_t *v;
    size_t n;
    int r;

    if (kp_json_typeof(item) != KP_JSON_OBJECT)
        return fail(w, -KP_EPARSE,
                    "must be a map (name, requirements, capacity, overhead, offerings)");
    if ((r = only_fields(w, item, "", known, "name, requirements, capacity, overhead, offerings")) <
        0)
        return r;
    if (!(v = field(item, "name")))
        return fail(w, -KP_EPARSE, "name: required");
    if (kp_json_as_str(v, &name) < 0)
        return fail(w, -KP_EPARSE, "name: must be a string");
    if (!*name || kp_label_validate_value(name, strlen(name), &why) < 0) {
        r = fail(w, -KP_EPARSE, "name: \"%s\" is not a label value: %s", show(&sh, name),
                 !*name ? "empty"
                 : why  ? why
                        : "invalid");
        kp_free(why);
        return r;
    }
    w->name = name;
    if (!(it->name = kp_strdup(name)))
        return -ENOMEM;

    if (!(v = field(item, "capacity")))
        return fail(w, -KP_EPARSE, "capacity: required (cpu and memory at least)");
    if ((r = add_resources(w, v, "capacity", &it->capacity, &it->n_capacity)) < 0)
        return r;
    for (size_t i = 0; i < KP_ARRAY_SIZE(needed); i++)
        if (kp_provider_res_get(it->capacity, it->n_capacity, needed[i], NULL) <= 0)
            return fail(w, -KP_EPARSE, "capacity.%s: required, above 0", needed[i]);
    (void)kp_provider_res_get(it->capacity, it->n_capacity, "pods", &has_pods);
    if (!has_pods && (r = kp_provider_res_add(&it->capacity, &it->n_capacity, "pods",
                                              KP_ITYPES_PODS_DEFAULT * 1000LL)) < 0)
        return r;

    if ((v = field(item, "overhead"))) {
        if (kp_json_typeof(v) != KP_JSON_OBJECT)
            return fail(w, -KP_EPARSE,
                        "overhead: must be a map (kubeReserved, systemReserved, "
                        "evictionThreshold)");
        if ((r = only_fields(w, v, "overhead", known_overhead,
                             "kubeReserved, systemReserved, evictionThreshold")) < 0)
            return r;
        /* Karpenter's InstanceTypeOverhead.Total(): the three lists summed per resource. */
        for (size_t i = 0; i < KP_ARRAY_SIZE(overheads); i++) {
            char at[40];

            (void)snprintf(at, sizeof(at), "overhead.%s", overheads[i]);
            if ((r = add_resources(w, field(v, overheads[i]), at, &it->overhead, &it->n_overhead)) <
                0)
                return r;
        }
    }

    if (!(v = field(item, "offerings")))
        return fail(w, -KP_EPARSE, "offerings: required (at least one)");
    if (kp_json_typeof(v) != KP_JSON_ARRAY)
        return fail(w, -KP_EPARSE, "offerings: must be a list");
    n = kp_json_array_size(v);
    if (n == 0)
        return fail(w, -KP_EPARSE, "offerings: needs at least one offering");
    if (n > KP_ITYPES_MAX_OFFERINGS)
        return fail(w, -KP_ELIMIT, "offerings: %zu offerings, at most %u", n,
                    KP_ITYPES_MAX_OFFERINGS);
    if (!(it->offerings = kp_calloc(n, sizeof(*it->offerings))))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct kp_offering *of = &it->offerings[i];

        it->n_offerings = i + 1; /* counted before it is filled, so _done frees it */
        if ((r = parse_offering(w, kp_json_array_at(v, i), i, of)) < 0)
            return r;
        for (size_t j = 0; j < i; j++)
            if (strcmp(single(&of->reqs, KP_LABEL_ZONE),
                       single(&it->offerings[j].reqs, KP_LABEL_ZONE)) == 0 &&
                strcmp(single(&of->reqs, KP_LABEL_CAPACITY_TYPE),
                       single(&it->offerings[j].reqs, KP_LABEL_CAPACITY_TYPE)) == 0)
                return fail(w, -KP_EPARSE,
                            "offerings[%zu]: the same zone and capacity type as offerings[%zu]", i,
                            j);
    }

    if ((r = add_requirements(w, field(item, "requirements"), "requirements", &it->reqs)) < 0)
        return r;
    return complete_type(w, it);
}

struct parse {
    struct kp_instance_types types;
    bool seen;
};

static int type_cmp(const void *a, const void *b)
{
    return strcmp(((const struct kp_instance_type *)a)->name,
                  ((const struct kp_instance_type *)b)->name);
}

static int on_document(const struct kp_manifest_obj *o, void *ctx, char **ret_msg)
{
    static const char *const known[] = {"apiVersion", "kind", "metadata", "items", NULL};
    struct parse *ps = ctx;
    struct where w = {.file = o->file, .line = o->line, .ret_msg = ret_msg};
    const char *av = NULL, *kind = NULL;
    struct shown sh1, sh2;
    json_t *doc = NULL, *items;
    size_t n;
    int r;

    if (o->item || ps->seen) {
        r = fail(&w, -KP_EPARSE, "document %zu: the file must hold one %s document, no more",
                 o->doc, KP_ITYPES_KIND);
        goto out;
    }
    if ((r = kp_json_parse(o->json, o->len, KP_MAX_OBJECT_BYTES, 0, &doc, NULL)) < 0) {
        if (r != -ENOMEM)
            r = fail(&w, r, "document %zu: cannot read it: %s", o->doc, kp_strerror(r));
        goto out;
    }
    if (kp_json_get_str(doc, "apiVersion", &av) < 0)
        av = NULL;
    if (kp_json_get_str(doc, "kind", &kind) < 0)
        kind = NULL;
    if (!av || !kind || strcmp(av, KP_ITYPES_API_VERSION) != 0 ||
        strcmp(kind, KP_ITYPES_KIND) != 0) {
        r = fail(&w, -KP_EPARSE,
                 "document %zu: kind \"%s\" of apiVersion \"%s\" is not an instance type list "
                 "(want kind %s, apiVersion %s)",
                 o->doc, kind ? show(&sh1, kind) : "", av ? show(&sh2, av) : "", KP_ITYPES_KIND,
                 KP_ITYPES_API_VERSION);
        goto out;
    }
    if ((r = only_fields(&w, doc, "", known, "apiVersion, kind, metadata, items")) < 0)
        goto out;
    ps->seen = true;
    items = field(doc, "items");
    if (!items || kp_json_typeof(items) != KP_JSON_ARRAY) {
        r = fail(&w, -KP_EPARSE, "items: %s", items ? "must be a list" : "required (a list)");
        goto out;
    }
    n = kp_json_array_size(items);
    if (n > KP_ITYPES_MAX_ITEMS) {
        r = fail(&w, -KP_ELIMIT, "items: %zu instance types, at most %u", n, KP_ITYPES_MAX_ITEMS);
        goto out;
    }
    if (!(ps->types.v = kp_calloc(n + 1, sizeof(*ps->types.v)))) {
        r = -ENOMEM;
        goto out;
    }
    w.in_item = true;
    for (size_t i = 0; i < n; i++) {
        w.item = i;
        w.name = NULL;
        r = parse_item(&w, kp_json_array_at(items, i), &ps->types.v[i]);
        ps->types.n++; /* counted even when half built, so _done frees it */
        if (r < 0)
            goto out;
        for (size_t j = 0; j < i; j++)
            if (strcmp(ps->types.v[i].name, ps->types.v[j].name) == 0) {
                r = fail(&w, -KP_EPARSE, "name: items[%zu] has it too", j);
                goto out;
            }
    }
    r = 0;
out:
    kp_json_unref(doc);
    return r;
}

int kp_itypes_parse(const char *p, size_t len, const char *file, struct kp_instance_types *ret,
                    char **ret_msg)
{
    struct parse ps = {0};
    int r;

    if (len > KP_ITYPES_MAX_FILE) {
        kp_msg_set(ret_msg, "%s: larger than %u bytes", file, KP_ITYPES_MAX_FILE);
        return -KP_ELIMIT;
    }
    if ((r = kp_manifest_each(p, len, file, on_document, &ps, ret_msg)) < 0)
        goto out;
    if (!ps.seen) {
        kp_msg_set(ret_msg, "%s: no %s document", file, KP_ITYPES_KIND);
        r = -KP_EPARSE;
        goto out;
    }
    qsort(ps.types.v, ps.types.n, sizeof(*ps.types.v), type_cmp);
    *ret = ps.types;
    ps.types = (struct kp_instance_types){0};
out:
    kp_instance_types_done(&ps.types);
    return r;
}

/* --- the provider -------------------------------------------------------------------------------- */

struct kp_itypes_provider {
    struct kp_provider inner;
    struct kp_instance_catalog *cat;
};

static const struct kp_provider *inner(void *self)
{
    return &((struct kp_itypes_provider *)self)->inner;
}

static const char *op_name(void *self)
{
    return inner(self)->ops->name(inner(self)->self);
}

static size_t op_supported_node_classes(void *self, const struct kp_node_class_kind **ret)
{
    return inner(self)->ops->supported_node_classes(inner(self)->self, ret);
}

static size_t op_repair_policies(void *self, const struct kp_repair_policy **ret)
{
    return inner(self)->ops->repair_policies(inner(self)->self, ret);
}

static int op_create(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, struct kp_provider_instance *ret,
                     struct kp_provider_err *err)
{
    return inner(self)->ops->create(inner(self)->self, ctx, c, nc, ret, err);
}

static int op_delete(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, struct kp_provider_err *err)
{
    return inner(self)->ops->delete (inner(self)->self, ctx, c, nc, err);
}

static int op_get(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                  const char *provider_id, struct kp_provider_instance *ret,
                  struct kp_provider_err *err)
{
    return inner(self)->ops->get(inner(self)->self, ctx, c, provider_id, ret, err);
}

static int op_list(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                   struct kp_provider_instances *ret, struct kp_provider_err *err)
{
    return inner(self)->ops->list(inner(self)->self, ctx, c, ret, err);
}

/* The one catalog, whatever the NodePool: the scheduler narrows it by the NodePool's
 * requirements, as Karpenter's does with a cloud provider's answer. */
static int op_get_instance_types(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                                 const struct kp_nodepool_view *np,
                                 struct kp_instance_catalog **ret, struct kp_provider_err *err)
{
    struct kp_itypes_provider *p = self;
    int r;

    (void)c;
    (void)np;
    if ((r = kp_provider_ctx_check(ctx, err, "reading instance types")) < 0)
        return r;
    *ret = kp_instance_catalog_ref(p->cat);
    return 0;
}

static int op_is_drifted(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                         const struct kp_nodeclaim_view *nc, const char **ret_reason,
                         struct kp_provider_err *err)
{
    return inner(self)->ops->is_drifted(inner(self)->self, ctx, c, nc, ret_reason, err);
}

/* The optional calls keep their meaning when inner has none. */
static int op_node_class_status(void *self, const struct kp_nodeclass_ref *ref,
                                struct kp_node_class_status *ret)
{
    return kp_provider_node_class_status(inner(self), ref, ret);
}

static bool op_owns_provider_id(void *self, const char *provider_id)
{
    return kp_provider_owns_provider_id(inner(self), provider_id);
}

static int op_watch_drift(void *self, void (*fn)(void *ctx, const char *node_class), void *ctx)
{
    const struct kp_provider *in = inner(self);

    return in->ops->watch_drift ? in->ops->watch_drift(in->self, fn, ctx) : 0;
}

static void op_unwatch_drift(void *self, void *ctx)
{
    const struct kp_provider *in = inner(self);

    if (in->ops->unwatch_drift)
        in->ops->unwatch_drift(in->self, ctx);
}

static const struct kp_provider_ops itypes_ops = {
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
    .owns_provider_id = op_owns_provider_id,
    .watch_drift = op_watch_drift,
    .unwatch_drift = op_unwatch_drift,
};

int kp_itypes_provider_new(const struct kp_provider *inner_p, struct kp_instance_types *types,
                           struct kp_itypes_provider **ret)
{
    struct kp_itypes_provider *p = kp_calloc(1, sizeof(*p));
    int r;

    if (!p) {
        kp_instance_types_done(types);
        return -ENOMEM;
    }
    p->inner = *inner_p;
    /* Version 1: the catalog never changes while the verb runs. */
    if ((r = kp_instance_catalog_new(types, 1, &p->cat)) < 0) {
        kp_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

struct kp_itypes_provider *kp_itypes_provider_free(struct kp_itypes_provider *p)
{
    if (!p)
        return NULL;
    kp_instance_catalog_unref(p->cat);
    kp_free(p);
    return NULL;
}

struct kp_provider kp_itypes_provider_as_provider(struct kp_itypes_provider *p)
{
    return (struct kp_provider){.ops = &itypes_ops, .self = p};
}
