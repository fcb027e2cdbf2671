/* DESIGN: see core/conds.h. The set is a small array (a NodeClaim has at most a dozen condition
 * types), searched linearly; strings are copied so the set outlives the cached entry it came
 * from. */
#include "core/conds.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "json/json.h"
#include "k8s/rfc3339.h"

const char *const kp_nodeclaim_ready_deps[3] = {"Launched", "Registered", "Initialized"};

static void item_done(struct kp_condset_item *it)
{
    kp_free(it->type);
    kp_free(it->reason);
    kp_free(it->message);
}

void kp_condset_done(struct kp_condset *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        item_done(&cs->v[i]);
    kp_free(cs->v);
    *cs = (struct kp_condset){0};
}

static struct kp_condset_item *find(const struct kp_condset *cs, const char *type)
{
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i].type, type) == 0)
            return &cs->v[i];
    return NULL;
}

/* Appends an empty item of type (copied). NULL on -ENOMEM. */
static struct kp_condset_item *append(struct kp_condset *cs, const char *type)
{
    struct kp_condset_item *v = kp_reallocarray(cs->v, cs->n + 1, sizeof(*v));
    struct kp_condset_item *it;

    if (!v)
        return NULL;
    cs->v = v;
    it = &cs->v[cs->n];
    *it = (struct kp_condset_item){
        .type = kp_strdup(type), .reason = kp_strdup(""), .message = kp_strdup("")};
    if (!it->type || !it->reason || !it->message) {
        item_done(it);
        return NULL;
    }
    cs->n++;
    return it;
}

int kp_condset_init(struct kp_condset *cs, const struct kp_conditions *cached, int64_t generation,
                    int64_t now_usec)
{
    *cs = (struct kp_condset){.generation = generation, .now_usec = now_usec};
    for (size_t i = 0; cached && i < cached->n; i++) {
        const struct kp_condition *c = &cached->v[i];
        struct kp_condset_item *it;
        char *reason, *message;

        if (!c->type || find(cs, c->type))
            continue; /* a duplicate type: the API server's list-map keeps the first */
        if (!(it = append(cs, c->type)))
            goto oom;
        reason = kp_strdup(c->reason ? c->reason : "");
        message = kp_strdup(c->message ? c->message : "");
        if (!reason || !message) {
            kp_free(reason);
            kp_free(message);
            goto oom;
        }
        kp_free(it->reason);
        kp_free(it->message);
        it->reason = reason;
        it->message = message;
        it->status = c->status;
        it->observed_generation = c->observed_generation;
        it->last_transition_usec = c->last_transition_usec;
    }
    return 0;
oom:
    kp_condset_done(cs);
    cs->generation = generation;
    cs->now_usec = now_usec;
    return -ENOMEM;
}

const struct kp_condset_item *kp_condset_get(const struct kp_condset *cs, const char *type)
{
    return find(cs, type);
}

bool kp_condset_is_true(const struct kp_condset *cs, const char *type)
{
    const struct kp_condset_item *it = find(cs, type);

    return it && it->status == KP_COND_TRUE;
}

/* Replaces *slot with a copy of s when they differ; sets *changed. 0 or -ENOMEM. */
static int set_str(char **slot, const char *s, bool *changed)
{
    char *dup;

    if (strcmp(*slot, s) == 0)
        return 0;
    if (!(dup = kp_strdup(s)))
        return -ENOMEM;
    kp_free(*slot);
    *slot = dup;
    *changed = true;
    return 0;
}

int kp_condset_set(struct kp_condset *cs, const char *type, enum kp_cond_status status,
                   const char *reason, const char *message)
{
    struct kp_condset_item *it = find(cs, type);
    bool changed = false;
    int r;

    /* The CRDs' reason pattern refuses "": default as Karpenter's condition sets do. */
    if (!reason || !*reason)
        reason = status == KP_COND_TRUE ? type : "AwaitingReconciliation";
    if (!message)
        message = "";
    if (!it) {
        if (!(it = append(cs, type)))
            return -ENOMEM;
        it->status = status;
        it->last_transition_usec = 0;
        changed = true;
    }
    if (it->status != status || it->last_transition_usec == 0) {
        it->status = status;
        /* metav1.Time has second precision: store what the server will keep. */
        it->last_transition_usec = cs->now_usec - cs->now_usec % 1000000;
        changed = true;
    }
    if ((r = set_str(&it->reason, reason, &changed)) < 0 ||
        (r = set_str(&it->message, message, &changed)) < 0)
        return r;
    if (it->observed_generation != cs->generation) {
        it->observed_generation = cs->generation;
        changed = true;
    }
    if (changed)
        cs->changed = true;
    return 0;
}

void kp_condset_clear(struct kp_condset *cs, const char *type)
{
    struct kp_condset_item *it = find(cs, type);

    if (!it)
        return;
    item_done(it);
    memmove(it, it + 1, (size_t)(cs->v + cs->n - (it + 1)) * sizeof(*it));
    cs->n--;
    cs->changed = true;
}

int kp_condset_root(struct kp_condset *cs, const char *root, const char *const *deps, size_t n)
{
    const struct kp_condset_item *first_false = NULL, *first_unknown = NULL;
    const char *missing = NULL;

    for (size_t i = 0; i < n; i++) {
        const struct kp_condset_item *it = find(cs, deps[i]);

        if (!it) {
            if (!missing && !first_unknown)
                missing = deps[i];
        } else if (it->status == KP_COND_FALSE) {
            if (!first_false)
                first_false = it;
        } else if (it->status == KP_COND_UNKNOWN && !first_unknown && !missing) {
            first_unknown = it;
        }
    }
    if (first_false)
        return kp_condset_set(cs, root, KP_COND_FALSE, first_false->reason, first_false->message);
    if (first_unknown)
        return kp_condset_set(cs, root, KP_COND_UNKNOWN, first_unknown->reason,
                              first_unknown->message);
    if (missing)
        return kp_condset_set(cs, root, KP_COND_UNKNOWN, "AwaitingReconciliation",
                              "object is awaiting reconciliation");
    return kp_condset_set(cs, root, KP_COND_TRUE, root, "");
}

int kp_condset_json(const struct kp_condset *cs, json_t **ret)
{
    json_t *arr = NULL, *one = NULL;
    int r;

    if ((r = kp_json_array_new(&arr)) < 0)
        return r;
    for (size_t i = 0; i < cs->n; i++) {
        const struct kp_condset_item *it = &cs->v[i];
        char ts[KP_RFC3339_STRMAX];

        if ((r = kp_rfc3339_format(it->last_transition_usec, KP_RFC3339_SECONDS, ts, sizeof(ts))) <
                0 ||
            (r = kp_json_patch_new(&one)) < 0)
            goto out;
        if ((r = kp_json_patch_set_str(one, KP_JSON_PATH("type"), it->type)) < 0 ||
            (r = kp_json_patch_set_str(one, KP_JSON_PATH("status"),
                                       kp_cond_status_name(it->status))) < 0 ||
            (r = kp_json_patch_set_str(one, KP_JSON_PATH("reason"), it->reason)) < 0 ||
            (r = kp_json_patch_set_str(one, KP_JSON_PATH("message"), it->message)) < 0 ||
            (r = kp_json_patch_set_int(one, KP_JSON_PATH("observedGeneration"),
                                       it->observed_generation)) < 0 ||
            (r = kp_json_patch_set_str(one, KP_JSON_PATH("lastTransitionTime"), ts)) < 0)
            goto out;
        r = kp_json_array_append_steal(arr, one);
        one = NULL;
        if (r < 0)
            goto out;
    }
    *ret = arr;
    arr = NULL;
    r = 0;
out:
    kp_json_unref(one);
    kp_json_unref(arr);
    return r;
}
