/* DESIGN: see core/writes.h. Each function turns one write into a request with a
 * precondition, so the controllers' code says what it writes and never how the race is kept. */
#include "core/writes.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "api/obj-node.h"
#include "core/conds.h"
#include "core/core.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/status.h"

bool kp_strs_has(const char *const *list, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && strcmp(list[i], s) == 0)
            return true;
    return false;
}

/* Appends a copy of s to arr. */
static int append_str(json_t *arr, const char *s)
{
    json_t *one = NULL;
    int r = kp_json_string_new(s, &one);

    return r < 0 ? r : kp_json_array_append_steal(arr, one);
}

int kp_patch_finalizers(json_t *patch, const char *const *list, size_t n, const char *name,
                        bool add)
{
    json_t *arr = NULL;
    int r;

    if ((r = kp_json_array_new(&arr)) < 0)
        return r;
    /* A merge patch replaces the whole list: every other finalizer is sent back as it was. */
    for (size_t i = 0; i < n && r >= 0; i++)
        if (list[i] && strcmp(list[i], name) != 0)
            r = append_str(arr, list[i]);
    if (r >= 0 && add)
        r = append_str(arr, name);
    if (r < 0) {
        kp_json_unref(arr);
        return r;
    }
    return kp_json_patch_set_steal(patch, KP_JSON_PATH("metadata", "finalizers"), arr);
}

/* Hands the server's message to *ret_msg (when asked) and releases err. */
static int finish(int r, struct kp_error *err, char **ret_msg)
{
    if (r < 0 && ret_msg)
        kp_msg_set(ret_msg, "%s", err->message ? err->message : kp_strerror(r));
    kp_error_done(err);
    return r;
}

int kp_patch_cas_rv(struct kp_client *c, const struct kp_resource *res, const char *ns,
                    const char *name, const char *subresource, const char *rv, json_t *body,
                    char **ret_rv, char **ret_msg)
{
    struct kp_error err = KP_ERROR_INIT;
    json_t *got = NULL;
    const char *new_rv = NULL;
    int r;

    if (!*rv)
        return -EINVAL; /* no precondition, no write */
    if ((r = kp_json_patch_set_str(body, KP_JSON_PATH("metadata", "resourceVersion"), rv)) < 0)
        return r;
    r = kp_client_patch(c, res, ns, name, subresource, KP_PATCH_MERGE, body, ret_rv ? &got : NULL,
                        &err);
    if (r >= 0 && ret_rv) {
        *ret_rv = NULL;
        /* Out of memory for the copy, *ret_rv stays NULL: the write stands, and the caller's
         * undo falls back to the cache's resourceVersion, as when the answer has none. */
        if (got && kp_json_path_str(got, "metadata.resourceVersion", &new_rv) >= 0 && new_rv &&
            *new_rv)
            *ret_rv = kp_strdup(new_rv);
    }
    kp_json_unref(got);
    return finish(r, &err, ret_msg);
}

int kp_patch_cas(struct kp_client *c, const struct kp_resource *res, const char *ns,
                 const char *name, const char *subresource, const char *rv, json_t *body,
                 char **ret_msg)
{
    return kp_patch_cas_rv(c, res, ns, name, subresource, rv, body, /* ret_rv= */ NULL, ret_msg);
}

int kp_write_conditions(struct kp_client *c, const struct kp_resource *res, const char *ns,
                        const char *name, const char *rv, const struct kp_condset *cs,
                        char **ret_msg)
{
    json_t *body = NULL, *list = NULL;
    int r;

    if (!kp_condset_changed(cs))
        return 0;
    if ((r = kp_json_patch_new(&body)) < 0)
        return r;
    if ((r = kp_condset_json(cs, &list)) < 0 ||
        (r = kp_json_patch_set_steal(body, KP_JSON_PATH("status", "conditions"), list)) < 0)
        goto out;
    r = kp_patch_cas(c, res, ns, name, "status", rv, body, ret_msg);
out:
    kp_json_unref(body);
    return r;
}

int kp_delete_uid(struct kp_client *c, const struct kp_resource *res, const char *ns,
                  const char *name, const char *uid, char **ret_msg)
{
    struct kp_error err = KP_ERROR_INIT;
    const struct kp_delete_opts opts = {.precondition_uid = uid};

    return finish(kp_client_delete(c, res, ns, name, &opts, &err), &err, ret_msg);
}

static int taint_append(json_t *arr, const char *key, const char *value,
                        enum kp_taint_effect effect)
{
    json_t *o = NULL;
    int r;

    if ((r = kp_json_patch_new(&o)) < 0)
        return r;
    if ((r = kp_json_patch_set_str(o, KP_JSON_PATH("key"), key)) < 0 ||
        (value && (r = kp_json_patch_set_str(o, KP_JSON_PATH("value"), value)) < 0) ||
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("effect"), kp_taint_effect_name(effect))) < 0) {
        kp_json_unref(o);
        return r;
    }
    return kp_json_array_append_steal(arr, o);
}

int kp_taints_disrupted(const struct kp_node_view *n, bool add, json_t **ret)
{
    json_t *taints = NULL;
    bool have = false;
    int r;

    if ((r = kp_json_array_new(&taints)) < 0)
        return r;
    for (size_t i = 0; i < n->taints.n && r >= 0; i++) {
        const struct kp_taint *t = &n->taints.v[i];

        if (strcmp(t->key, KP_CORE_TAINT_DISRUPTED) == 0) {
            if (!add || t->effect != KP_TAINT_NO_SCHEDULE || have)
                continue; /* removed, replaced, or a duplicate */
            have = true;
        }
        r = taint_append(taints, t->key, t->value, t->effect);
    }
    if (r >= 0 && add && !have)
        r = taint_append(taints, KP_CORE_TAINT_DISRUPTED, NULL, KP_TAINT_NO_SCHEDULE);
    if (r < 0) {
        kp_json_unref(taints);
        return r;
    }
    *ret = taints;
    return 0;
}
