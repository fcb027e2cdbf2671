/* DESIGN: shared decoding for projections (see obj.h).
 *
 * Every helper is called twice per object, once in the pack's sizing pass and once in its
 * copying pass (k8s/store.h). They must decide the same way both times, so they depend only on
 * the JSON they are given. Validation happens in the first pass: an object that fails it is
 * never allocated. Arrays are written through a scratch element while sizing.
 *
 * Selectors are validated and canonicalised by api/selector.c, then their requirements are
 * copied into the block, so matching needs no allocation and the entry stays one block. */
#include "api/obj.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "json/json.h"
#include "api/quantity.h"
#include "k8s/rfc3339.h"

const char *kp_labels_get(const struct kp_labels *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0)
            return l->v[i].value;
    return NULL;
}

int64_t kp_resources_get(const struct kp_resources *r, const char *name, bool *ret_found)
{
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->v[i].name, name) == 0) {
            if (ret_found)
                *ret_found = true;
            return r->v[i].milli;
        }
    }
    if (ret_found)
        *ret_found = false;
    return 0;
}

const struct kp_condition *kp_conditions_get(const struct kp_conditions *c, const char *type)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].type, type) == 0)
            return &c->v[i];
    return NULL;
}

const char *kp_cond_status_name(enum kp_cond_status s)
{
    return s == KP_COND_TRUE ? "True" : s == KP_COND_FALSE ? "False" : "Unknown";
}

int kp_conditions_patch_one(const char *type, enum kp_cond_status status, const char *reason,
                            const char *message, int64_t observed_generation,
                            const char *last_transition, json_t **ret)
{
    json_t *arr = NULL, *cond = NULL;
    int r;

    if ((r = kp_json_array_new(&arr)) < 0)
        return r;
    if ((r = kp_json_patch_new(&cond)) < 0 ||
        (r = kp_json_patch_set_str(cond, KP_JSON_PATH("type"), type)) < 0 ||
        (r = kp_json_patch_set_str(cond, KP_JSON_PATH("status"), kp_cond_status_name(status))) <
            0 ||
        (r = kp_json_patch_set_str(cond, KP_JSON_PATH("reason"), reason ? reason : "Unknown")) <
            0 ||
        (r = kp_json_patch_set_str(cond, KP_JSON_PATH("message"), message ? message : "")) < 0 ||
        (r = kp_json_patch_set_int(cond, KP_JSON_PATH("observedGeneration"), observed_generation)) <
            0 ||
        (r = kp_json_patch_set_str(cond, KP_JSON_PATH("lastTransitionTime"), last_transition)) <
            0) {
        kp_json_unref(cond);
        kp_json_unref(arr);
        return r;
    }
    if ((r = kp_json_array_append_steal(arr, cond)) < 0) {
        kp_json_unref(arr);
        return r;
    }
    *ret = arr;
    return 0;
}

const struct kp_owner_ref *kp_owner_refs_controller(const struct kp_owner_refs *o)
{
    for (size_t i = 0; i < o->n; i++)
        if (o->v[i].controller)
            return &o->v[i];
    return NULL;
}

static bool kp_str_empty(const char *s)
{
    return !s || !*s;
}

bool kp_tolerations_tolerate(const struct kp_tolerations *tl, const struct kp_taint *t)
{
    for (size_t i = 0; i < tl->n; i++) {
        const struct kp_toleration *x = &tl->v[i];

        if (x->effect != KP_TAINT_ANY && x->effect != t->effect)
            continue;
        if (kp_str_empty(x->key)) {
            if (x->exists)
                return true; /* empty key with Exists tolerates everything */
            continue;
        }
        if (strcmp(x->key, t->key) != 0)
            continue;
        if (x->exists)
            return true;
        if (strcmp(x->value ? x->value : "", t->value ? t->value : "") == 0)
            return true;
    }
    return false;
}

bool kp_reqs_match(const struct kp_reqs *r, const struct kp_labels *labels)
{
    if (!r->present)
        return false;
    return kp_requirements_match(r->v, r->n, labels->v, labels->n);
}

/* --- decoding ----------------------------------------------------------------------------- */

/* An optional object member (absent or null: NULL). */
int kp_obj_opt_object(const json_t *obj, const char *key, json_t **ret)
{
    int r;

    *ret = NULL;
    if (!obj)
        return 0;
    r = kp_json_get_object(obj, key, ret);
    return r == -ENOENT ? 0 : r;
}

int kp_obj_opt_array(const json_t *obj, const char *key, json_t **ret)
{
    int r;

    *ret = NULL;
    if (!obj)
        return 0;
    r = kp_json_get_array(obj, key, ret);
    return r == -ENOENT ? 0 : r;
}

int kp_obj_opt_int32(const json_t *obj, const char *key, int32_t dflt, int32_t *ret)
{
    int64_t v;
    int r = kp_json_get_int(obj, key, &v);

    if (r == -ENOENT) {
        *ret = dflt;
        return 0;
    }
    if (r < 0)
        return r;
    if (v < INT32_MIN || v > INT32_MAX)
        return -KP_EPARSE;
    *ret = (int32_t)v;
    return 0;
}

int kp_obj_time(const json_t *obj, const char *key, int64_t *ret_usec)
{
    const char *s;
    int64_t t;
    int r;

    r = kp_json_get_str(obj, key, &s);
    if (r == -ENOENT) {
        *ret_usec = 0;
        return 0;
    }
    if (r < 0)
        return r;
    r = kp_rfc3339_parse(s, strlen(s), &t);
    if (r < 0)
        return -KP_EPARSE;
    *ret_usec = t;
    return 0;
}

int kp_obj_labels(const json_t *map, bool (*keep)(const char *key), struct kp_pack *p,
                  struct kp_labels *ret)
{
    struct kp_json_iter it = KP_JSON_ITER_INIT;
    struct kp_label *v, scratch = {0};
    const char *k;
    json_t *val;
    size_t n = 0, i = 0;

    if (!map || kp_json_typeof(map) == KP_JSON_NULL) {
        *ret = (struct kp_labels){0};
        return 0;
    }
    if (kp_json_typeof(map) != KP_JSON_OBJECT)
        return -KP_EPARSE;
    while (kp_json_object_next(map, &it, &k, &val)) {
        if (kp_json_typeof(val) != KP_JSON_STRING)
            return -KP_EPARSE;
        if (!keep || keep(k))
            n++;
    }
    v = kp_pack_array(p, n, sizeof(*v));
    it = (struct kp_json_iter)KP_JSON_ITER_INIT;
    while (kp_json_object_next(map, &it, &k, &val)) {
        struct kp_label *l = v ? &v[i] : &scratch;
        const char *s = NULL;

        if (keep && !keep(k))
            continue;
        if (kp_json_as_str(val, &s) < 0)
            return -KP_EPARSE;
        l->key = kp_pack_str(p, k);
        l->value = kp_pack_str(p, s);
        i++;
    }
    *ret = (struct kp_labels){.v = v, .n = n};
    return 0;
}

/* An amount that is well formed but too large to hold: the text of a quantity parse's -ERANGE,
 * or of an integer beyond the hold limit. */
static bool res_too_big(const json_t *val, struct kp_quantity *q, char *text, size_t size)
{
    const char *s = NULL;
    int64_t units;

    if (kp_json_as_str(val, &s) == 0) {
        int r = kp_quantity_parse(s, strlen(s), KP_QUANTITY_ROUND_UP, q);

        if (r < 0 && r != -ERANGE)
            return false; /* malformed: refused as before */
        if (r == 0 && q->milli <= KP_RES_HOLD_MAX_UNITS * 1000 &&
            q->milli >= -KP_RES_HOLD_MAX_UNITS * 1000)
            return false;
        (void)snprintf(text, size, "%.63s", s);
        return true;
    }
    if (kp_json_as_int(val, &units) == 0 &&
        (units > KP_RES_HOLD_MAX_UNITS || units < -KP_RES_HOLD_MAX_UNITS)) {
        (void)snprintf(text, size, "%" PRId64, units);
        return true;
    }
    return false;
}

static int obj_resources(const json_t *map, bool keep, struct kp_pack *p, struct kp_resources *ret)
{
    struct kp_json_iter it = KP_JSON_ITER_INIT;
    struct kp_res *v, scratch = {0};
    struct kp_res_bad *bad, bad_scratch = {0};
    const char *k;
    json_t *val;
    size_t n = 0, n_bad = 0, i = 0, j = 0;
    char text[64];

    if (!map || kp_json_typeof(map) == KP_JSON_NULL) {
        *ret = (struct kp_resources){0};
        return 0;
    }
    if (kp_json_typeof(map) != KP_JSON_OBJECT)
        return -KP_EPARSE;
    while (kp_json_object_next(map, &it, &k, &val)) {
        struct kp_quantity q;

        if (keep && res_too_big(val, &q, text, sizeof(text)))
            n_bad++;
        else
            n++;
    }
    v = kp_pack_array(p, n, sizeof(*v));
    bad = n_bad ? kp_pack_array(p, n_bad, sizeof(*bad)) : NULL;
    it = (struct kp_json_iter)KP_JSON_ITER_INIT;
    while (kp_json_object_next(map, &it, &k, &val)) {
        struct kp_res *x = v ? &v[i] : &scratch;
        struct kp_quantity q;
        const char *s = NULL;
        int64_t units;

        if (keep && res_too_big(val, &q, text, sizeof(text))) {
            struct kp_res_bad *b = bad ? &bad[j] : &bad_scratch;

            b->name = kp_pack_str(p, k);
            b->value = kp_pack_str(p, text);
            j++;
            continue;
        }
        /* Quantities arrive as strings; integers are accepted as whole units. */
        if (kp_json_as_str(val, &s) == 0) {
            if (kp_quantity_parse(s, strlen(s), KP_QUANTITY_ROUND_UP, &q) < 0)
                return -KP_EPARSE;
        } else if (kp_json_as_int(val, &units) == 0) {
            if (kp_quantity_from_units(units, KP_QUANTITY_DECIMAL_SI, &q) < 0)
                return -KP_EPARSE;
        } else {
            return -KP_EPARSE;
        }
        x->name = kp_pack_str(p, k);
        x->milli = q.milli;
        i++;
    }
    *ret = (struct kp_resources){.v = v, .n = n, .bad = bad, .n_bad = n_bad};
    return 0;
}

int kp_obj_resources(const json_t *map, struct kp_pack *p, struct kp_resources *ret)
{
    return obj_resources(map, false, p, ret);
}

int kp_obj_resources_keep(const json_t *map, struct kp_pack *p, struct kp_resources *ret)
{
    return obj_resources(map, true, p, ret);
}

const char *kp_taint_effect_name(enum kp_taint_effect e)
{
    switch (e) {
    case KP_TAINT_NO_SCHEDULE:
        return "NoSchedule";
    case KP_TAINT_PREFER_NO_SCHEDULE:
        return "PreferNoSchedule";
    case KP_TAINT_NO_EXECUTE:
        return "NoExecute";
    default:
        return "";
    }
}

static int kp_obj_effect(const json_t *obj, bool required, enum kp_taint_effect *ret)
{
    const char *s;
    int r;

    r = kp_json_get_str(obj, "effect", &s);
    if (r == -ENOENT || (r == 0 && !*s)) {
        if (required)
            return -KP_EPARSE;
        *ret = KP_TAINT_ANY;
        return 0;
    }
    if (r < 0)
        return r;
    if (strcmp(s, "NoSchedule") == 0)
        *ret = KP_TAINT_NO_SCHEDULE;
    else if (strcmp(s, "PreferNoSchedule") == 0)
        *ret = KP_TAINT_PREFER_NO_SCHEDULE;
    else if (strcmp(s, "NoExecute") == 0)
        *ret = KP_TAINT_NO_EXECUTE;
    else
        return -KP_EPARSE;
    return 0;
}

int kp_obj_opt_str(const json_t *obj, const char *key, const char **ret)
{
    int r;

    *ret = NULL;
    if (!obj)
        return 0;
    r = kp_json_get_str(obj, key, ret);

    if (r == -ENOENT) {
        *ret = NULL;
        return 0;
    }
    return r;
}

/* Checks arr is an array (or absent: n = 0). */
static int kp_obj_array(const json_t *arr, size_t *ret_n)
{
    if (!arr || kp_json_typeof(arr) == KP_JSON_NULL) {
        *ret_n = 0;
        return 0;
    }
    if (kp_json_typeof(arr) != KP_JSON_ARRAY)
        return -KP_EPARSE;
    *ret_n = kp_json_array_size(arr);
    return 0;
}

int kp_obj_taints(const json_t *arr, struct kp_pack *p, struct kp_taints *ret)
{
    struct kp_taint *v, scratch = {0};
    size_t n;
    int r;

    r = kp_obj_array(arr, &n);
    if (r < 0)
        return r;
    v = kp_pack_array(p, n, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        const json_t *t = kp_json_array_at(arr, i);
        struct kp_taint *x = v ? &v[i] : &scratch;
        const char *key, *value;

        if ((r = kp_json_get_str(t, "key", &key)) < 0 ||
            (r = kp_obj_opt_str(t, "value", &value)) < 0 ||
            (r = kp_obj_effect(t, true, &x->effect)) < 0)
            return r == -ENOENT ? -KP_EPARSE : r;
        x->key = kp_pack_str(p, key);
        x->value = kp_pack_str(p, value);
    }
    *ret = (struct kp_taints){.v = v, .n = n};
    return 0;
}

int kp_obj_tolerations(const json_t *arr, struct kp_pack *p, struct kp_tolerations *ret)
{
    struct kp_toleration *v, scratch = {0};
    size_t n;
    int r;

    r = kp_obj_array(arr, &n);
    if (r < 0)
        return r;
    v = kp_pack_array(p, n, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        const json_t *t = kp_json_array_at(arr, i);
        struct kp_toleration *x = v ? &v[i] : &scratch;
        const char *key, *value, *op;
        int64_t secs;

        if ((r = kp_obj_opt_str(t, "key", &key)) < 0 ||
            (r = kp_obj_opt_str(t, "value", &value)) < 0 ||
            (r = kp_obj_opt_str(t, "operator", &op)) < 0 ||
            (r = kp_obj_effect(t, false, &x->effect)) < 0)
            return r;
        if (!op || strcmp(op, "Equal") == 0 || !*op)
            x->exists = false;
        else if (strcmp(op, "Exists") == 0)
            x->exists = true;
        else
            return -KP_EPARSE;
        r = kp_json_get_int(t, "tolerationSeconds", &secs);
        if (r == -ENOENT)
            secs = -1;
        else if (r < 0)
            return r;
        x->seconds = secs;
        x->key = kp_pack_str(p, key);
        x->value = kp_pack_str(p, value);
    }
    *ret = (struct kp_tolerations){.v = v, .n = n};
    return 0;
}

int kp_obj_conditions(const json_t *arr, struct kp_pack *p, struct kp_conditions *ret)
{
    struct kp_condition *v, scratch = {0};
    size_t n;
    int r;

    r = kp_obj_array(arr, &n);
    if (r < 0)
        return r;
    v = kp_pack_array(p, n, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        const json_t *c = kp_json_array_at(arr, i);
        struct kp_condition *x = v ? &v[i] : &scratch;
        const char *type, *status, *reason, *message;
        int64_t gen = 0;

        if ((r = kp_json_get_str(c, "type", &type)) < 0 ||
            (r = kp_json_get_str(c, "status", &status)) < 0 ||
            (r = kp_obj_opt_str(c, "reason", &reason)) < 0 ||
            (r = kp_obj_opt_str(c, "message", &message)) < 0 ||
            ((r = kp_json_get_int(c, "observedGeneration", &gen)) < 0 && r != -ENOENT) ||
            (r = kp_obj_time(c, "lastTransitionTime", &x->last_transition_usec)) < 0)
            return r == -ENOENT ? -KP_EPARSE : r;
        if (strcmp(status, "True") == 0)
            x->status = KP_COND_TRUE;
        else if (strcmp(status, "False") == 0)
            x->status = KP_COND_FALSE;
        else
            x->status = KP_COND_UNKNOWN;
        x->type = kp_pack_str(p, type);
        x->reason = kp_pack_str(p, reason);
        x->message = kp_pack_str(p, message);
        x->observed_generation = gen;
    }
    *ret = (struct kp_conditions){.v = v, .n = n};
    return 0;
}

int kp_obj_strings(const json_t *arr, struct kp_pack *p, const char *const **ret_v, size_t *ret_n)
{
    const char **v;
    const char *scratch = NULL;
    size_t n;
    int r;

    r = kp_obj_array(arr, &n);
    if (r < 0)
        return r;
    v = kp_pack_array(p, n, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        const char *s;

        if (kp_json_as_str(kp_json_array_at(arr, i), &s) < 0)
            return -KP_EPARSE;
        *(v ? &v[i] : &scratch) = kp_pack_str(p, s);
    }
    *ret_v = v;
    *ret_n = n;
    return 0;
}

/* Writes a kp_reqs member by member (it has padding; see kp_obj_pack_selector). */
static void kp_reqs_set(struct kp_reqs *r, const struct kp_requirement *v, size_t n, bool present)
{
    r->v = v;
    r->n = n;
    r->present = present;
}

/* Copies a built selector's requirements into the block. */
static void kp_obj_pack_selector(const struct kp_selector *sel, struct kp_pack *p,
                                 struct kp_reqs *ret)
{
    size_t n = kp_selector_count(sel);
    struct kp_requirement *v = kp_pack_array(p, n, sizeof(*v)), scratch = {0};

    for (size_t i = 0; i < n; i++) {
        const struct kp_requirement *src = kp_selector_at(sel, i);
        struct kp_requirement *x = v ? &v[i] : &scratch;
        char **vals = kp_pack_array(p, src->n_values, sizeof(*vals));
        char *sv;

        /* Member by member: a struct assignment may copy stack garbage into padding, and the
         * entry's fingerprint hashes the block's bytes. */
        x->op = src->op;
        x->n_values = src->n_values;
        x->bound = src->bound;
        x->min_values = src->min_values;
        x->key = kp_pack_str(p, src->key);
        for (size_t j = 0; j < src->n_values; j++)
            *(vals ? &vals[j] : &sv) = kp_pack_str(p, src->values[j]);
        x->values = vals;
    }
    kp_reqs_set(ret, v, n, true);
}

int kp_obj_label_selector(const json_t *sel, struct kp_pack *p, struct kp_reqs *ret)
{
    struct kp_selector *s = NULL;
    int r;

    if (!sel || kp_json_typeof(sel) == KP_JSON_NULL) {
        kp_reqs_set(ret, NULL, 0, false);
        return 0;
    }
    r = kp_selector_from_json(sel, &s, /* reterr= */ NULL);
    if (r < 0)
        return r == -ENOMEM ? r : -KP_EPARSE;
    kp_obj_pack_selector(s, p, ret);
    kp_selector_free(s);
    return 0;
}

int kp_obj_node_requirements(const json_t *arr, struct kp_pack *p, struct kp_reqs *ret)
{
    struct kp_selector *s = NULL;
    int r;

    if (!arr || kp_json_typeof(arr) == KP_JSON_NULL) {
        kp_reqs_set(ret, NULL, 0, true);
        return 0;
    }
    r = kp_selector_from_node_requirements(arr, &s, /* reterr= */ NULL);
    if (r < 0)
        return r == -ENOMEM ? r : -KP_EPARSE;
    kp_obj_pack_selector(s, p, ret);
    kp_selector_free(s);
    return 0;
}

int kp_obj_meta(const json_t *obj, bool namespaced, struct kp_pack *p, struct kp_entry *e,
                struct kp_meta *m)
{
    const char *name, *ns = NULL, *uid = NULL, *rv = NULL;
    json_t *meta, *arr, *labels;
    struct kp_owner_ref *v, scratch = {0};
    size_t n;
    int r;

    if ((r = kp_json_get_object(obj, "metadata", &meta)) < 0 ||
        (r = kp_json_get_str(meta, "name", &name)) < 0 || !*name)
        return -KP_EPARSE;
    r = kp_obj_opt_str(meta, "namespace", &ns);
    if (r < 0 || (namespaced && kp_str_empty(ns)) || (!namespaced && !kp_str_empty(ns)))
        return -KP_EPARSE;
    if ((r = kp_obj_opt_str(meta, "uid", &uid)) < 0 ||
        (r = kp_obj_opt_str(meta, "resourceVersion", &rv)) < 0 ||
        (r = kp_obj_time(meta, "creationTimestamp", &m->creation_usec)) < 0 ||
        (r = kp_obj_time(meta, "deletionTimestamp", &m->deletion_usec)) < 0)
        return -KP_EPARSE;
    labels = NULL;
    r = kp_json_get_object(meta, "labels", &labels);
    if (r < 0 && r != -ENOENT)
        return r;
    r = kp_obj_labels(labels, NULL, p, &m->labels);
    if (r < 0)
        return r;

    arr = NULL;
    r = kp_json_get_array(meta, "ownerReferences", &arr);
    if (r < 0 && r != -ENOENT)
        return r;
    n = kp_json_array_size(arr);
    v = kp_pack_array(p, n, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        const json_t *o = kp_json_array_at(arr, i);
        struct kp_owner_ref *x = v ? &v[i] : &scratch;
        const char *av, *kind, *oname, *ouid;
        bool ctl = false;

        if (kp_json_get_str(o, "apiVersion", &av) < 0 || kp_json_get_str(o, "kind", &kind) < 0 ||
            kp_json_get_str(o, "name", &oname) < 0 || kp_json_get_str(o, "uid", &ouid) < 0)
            return -KP_EPARSE;
        r = kp_json_get_bool(o, "controller", &ctl);
        if (r < 0 && r != -ENOENT)
            return r;
        x->api_version = kp_pack_str(p, av);
        x->kind = kp_pack_str(p, kind);
        x->name = kp_pack_str(p, oname);
        x->uid = kp_pack_str(p, ouid);
        x->controller = ctl;
    }
    m->owners = (struct kp_owner_refs){.v = v, .n = n};
    kp_pack_entry(p, e, namespaced ? ns : NULL, name, uid, rv);
    return 0;
}

const char kp_kind_node[] = "Node", kp_kind_pod[] = "Pod", kp_kind_nodepool[] = "NodePool",
           kp_kind_nodeclaim[] = "NodeClaim", kp_kind_sshhost[] = "SSHHost",
           kp_kind_sshnodeclass[] = "SSHNodeClass", kp_kind_sshjoinprofile[] = "SSHJoinProfile",
           kp_kind_pdb[] = "PodDisruptionBudget", kp_kind_daemonset[] = "DaemonSet",
           kp_kind_lease[] = "Lease";

void kp_obj_kind_mismatch(const struct kp_entry *e, const char *want)
{
    kp_log_error("an entry was read as the wrong kind; aborting (a programming error)",
                 KP_LF("key", e->key ? e->key : ""), KP_LF("is", e->kind ? e->kind : "(untagged)"),
                 KP_LF("read_as", want));
    abort();
}

int kp_obj_project(const json_t *obj, const char *kind, size_t head,
                   int (*fill)(const json_t *obj, struct kp_pack *p, void *view),
                   struct kp_entry **ret)
{
    struct kp_pack p;
    struct kp_entry *e = NULL;
    void *scratch;
    int r;

    /* The sizing pass writes into a zeroed scratch view of the same size. */
    scratch = kp_calloc(1, head);
    if (!scratch)
        return -ENOMEM;
    kp_pack_init(&p, head);
    r = fill(obj, &p, scratch);
    kp_free(scratch);
    if (r < 0)
        return r;
    r = kp_pack_alloc(&p, &e);
    if (r < 0)
        return r;
    r = fill(obj, &p, e);
    if (r == 0)
        r = kp_pack_finish(&p, e);
    if (r < 0) {
        /* The copying pass failing after the sizing pass passed means fill() is not
         * deterministic or ran out of memory in a helper (selector building). A fill that
         * attached something to the entry set its destroy to release it. */
        if (e->destroy)
            e->destroy(e);
        else
            kp_free(e);
        return r;
    }
    e->kind = kind;
    *ret = e;
    return 0;
}

int kp_obj_decode(const char *data, size_t n, const char *kind, size_t head,
                  int (*fill)(const json_t *obj, struct kp_pack *p, void *view),
                  struct kp_entry **ret)
{
    json_t *obj = NULL;
    int r;

    r = kp_json_parse(data, n, KP_MAX_OBJECT_BYTES, 0, &obj, /* reterr= */ NULL);
    if (r < 0)
        return r;
    if (kp_json_typeof(obj) != KP_JSON_OBJECT)
        r = -KP_EPARSE;
    else
        r = kp_obj_project(obj, kind, head, fill, ret);
    kp_json_unref(obj);
    return r;
}
