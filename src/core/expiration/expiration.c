/* core/expiration/expiration.c: the NodeClaim expiration controller (expiration.h).
 *
 * DESIGN: one reconciler keyed by NodeClaim name on the shared NodeClaim informer. A reconcile
 * reads the NodeClaim from the cache, asks kp_expiration_plan, and either requeues at the expiry
 * or deletes with the cached uid as precondition (a NodeClaim recreated under the same name is
 * another incarnation: -KP_ECONFLICT, requeued, decided again). A NodeClaim already gone (404:
 * deleted by someone else since the cache saw it) is neither logged nor counted as expired, as
 * Karpenter ignores NotFound before its metric.
 *
 * Reading our own write: after the delete the cache may still show the NodeClaim without its
 * deletionTimestamp for a moment, and a key queued before could decide "expired" again and count
 * the disruption twice (Karpenter sleeps a second after the delete for this). We remember the uid
 * we deleted per name (a map under a mutex) and skip a second delete of that uid; the entry goes
 * when the cache no longer has the NodeClaim.
 *
 * Replacing first (env->expiry_replaces): an expired NodeClaim with reschedulable pods on its
 * Node is requeued at the end of the grace (kp_expiration_replace_wait) instead of deleted;
 * the disruption loop deletes it before then (the informer's update then finds it deleting), or
 * this controller does at the end.
 *
 * Threads: reconciles on the reconciler's workers (one key at a time); the map under mu. */
#include "core/expiration/expiration.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "base/time.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/informer.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "core/core.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/writes.h"

struct kp_expiration_plan kp_expiration_plan(const struct kp_provider *p,
                                             const struct kp_nodeclaim_view *nc, int64_t now_usec)
{
    struct kp_expiration_plan plan = {.action = KP_EXPIRATION_NONE};
    const struct kp_obj_duration *d = &nc->spec.expire_after;
    int64_t after_usec;

    if (!kp_provider_supports(p, &nc->spec.node_class_ref) || nc->meta.deletion_usec != 0)
        return plan;
    if (!d->text || !d->valid || d->never || d->ns < 0)
        return plan;
    after_usec = d->ns / 1000;
    /* An expiry beyond what int64 microseconds can hold never comes. */
    if (nc->meta.creation_usec > INT64_MAX - after_usec)
        return plan;
    plan.expiry_usec = nc->meta.creation_usec + after_usec;
    if (now_usec >= plan.expiry_usec) {
        plan.action = KP_EXPIRATION_DELETE;
        return plan;
    }
    plan.action = KP_EXPIRATION_WAIT;
    plan.requeue_usec = (uint64_t)(plan.expiry_usec - now_usec);
    return plan;
}

uint64_t kp_expiration_replace_wait(const struct kp_expiration_plan *plan, int64_t now_usec,
                                    bool replaces, uint32_t reschedulable)
{
    int64_t end;

    if (plan->action != KP_EXPIRATION_DELETE || !replaces || reschedulable == 0)
        return 0;
    if (plan->expiry_usec > INT64_MAX - (int64_t)KP_EXPIRATION_REPLACE_GRACE_USEC)
        return 0;
    end = plan->expiry_usec + (int64_t)KP_EXPIRATION_REPLACE_GRACE_USEC;
    return now_usec < end ? (uint64_t)(end - now_usec) : 0;
}

struct kp_expiration_controller {
    const struct kp_core_env *env;
    struct kp_informer *nodeclaims, *pods;
    struct kp_controller *base;
    pthread_mutex_t mu;
    struct kp_map *deleted; /* name -> uid (owned) we deleted; under mu */
};

/* Whether we already deleted this incarnation (uid) of name. */
static bool already_deleted(struct kp_expiration_controller *ctl, const char *name, const char *uid)
{
    bool r;

    pthread_mutex_lock(&ctl->mu);
    r = kp_streq(kp_map_get(ctl->deleted, name), uid);
    pthread_mutex_unlock(&ctl->mu);
    return r;
}

/* Remembers (uid) or forgets (uid NULL) our delete of name. A failed remember only loses the
 * de-duplication: the worst case is one doubled count. */
static void remember(struct kp_expiration_controller *ctl, const char *name, const char *uid)
{
    char *dup = uid ? kp_strdup(uid) : NULL;
    void *old = NULL;

    pthread_mutex_lock(&ctl->mu);
    if (dup) {
        if (kp_map_put(ctl->deleted, name, dup, &old) < 0) {
            kp_free(dup);
            old = NULL;
        }
    } else {
        old = kp_map_remove(ctl->deleted, name);
    }
    pthread_mutex_unlock(&ctl->mu);
    kp_free(old);
}

int kp_expiration_reconcile(struct kp_expiration_controller *ctl, struct kp_client *c,
                            const struct kp_ctx *cx, const char *key, uint64_t *ret_requeue)
{
    struct kp_expiration_plan plan;
    const struct kp_nodeclaim_view *nc;
    uint64_t wait;
    int64_t now = (int64_t)kp_core_now(ctl->env);
    struct kp_entry *e = NULL;
    char *msg = NULL;
    int r;

    (void)cx; /* one API call, bounded by the client's timeout */
    r = kp_store_get(kp_informer_store(ctl->nodeclaims), key, &e);
    if (r == -ENOENT) {
        remember(ctl, key, NULL);
        return 0;
    }
    if (r < 0)
        return r;
    nc = kp_nodeclaim_view(e);
    plan = kp_expiration_plan(ctl->env->provider, nc, now);
    switch (plan.action) {
    case KP_EXPIRATION_NONE:
        break;
    case KP_EXPIRATION_WAIT:
        *ret_requeue = plan.requeue_usec;
        break;
    case KP_EXPIRATION_DELETE:
        if (already_deleted(ctl, key, nc->e.uid))
            break;
        wait = kp_expiration_replace_wait(
            &plan, now, ctl->env->expiry_replaces,
            ctl->env->expiry_replaces
                ? kp_core_reschedulable_on(kp_informer_store(ctl->pods), nc->node_name)
                : 0);
        if (wait > 0) { /* the disruption loop replaces it first */
            kp_log_debug("expired nodeclaim left to the disruption loop to replace first",
                         KP_LF("nodeclaim", key), KP_LF("wait-usec", wait));
            *ret_requeue = wait;
            break;
        }
        r = kp_delete_uid(c, &KP_RES_NODECLAIM, NULL, key, nc->e.uid, &msg);
        if (r == -ENOENT) { /* gone meanwhile, not by us: nothing to count */
            r = 0;
            break;
        }
        if (r < 0) {
            if (r != -KP_ECONFLICT && msg)
                kp_log_debug("expired nodeclaim delete refused", KP_LF("nodeclaim", key),
                             KP_LF("detail", msg));
            break;
        }
        remember(ctl, key, nc->e.uid);
        kp_log_info("deleting expired nodeclaim", KP_LF("nodeclaim", key),
                    KP_LF("node", nc->node_name ? nc->node_name : ""),
                    KP_LF("expireAfter", nc->spec.expire_after.text));
        kp_core_count_disrupted(ctl->env->observer, nc, KP_CM_REASON_EXPIRED);
        /* Its pods are still bound: the count is of what the delete sets moving. */
        kp_core_count_disrupted_pods(
            ctl->env->observer, nc, KP_CM_REASON_EXPIRED,
            kp_core_reschedulable_on(kp_informer_store(ctl->pods), nc->node_name));
        break;
    }
    kp_free(msg);
    kp_entry_unref(e);
    return r;
}

static int reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                     uint64_t *ret_requeue)
{
    return kp_expiration_reconcile(ctx, c, cx, key, ret_requeue);
}

int kp_expiration_controller_new(const struct kp_core_env *env,
                                 struct kp_expiration_controller **ret)
{
    struct kp_expiration_controller *ctl = NULL;
    struct kp_controller_opts co = {0};
    int r;

    if (!env || !env->client || !env->informers || !env->provider || !ret)
        return -EINVAL;
    if (!(ctl = kp_calloc(1, sizeof(*ctl))))
        return -ENOMEM;
    pthread_mutex_init(&ctl->mu, NULL);
    ctl->env = env;
    if ((r = kp_map_new(&ctl->deleted)) < 0 ||
        (r = kp_informers_nodeclaims(env->informers, &ctl->nodeclaims)) < 0 ||
        (r = kp_informers_pods(env->informers, &ctl->pods)) < 0)
        goto out;
    co.name = "nodeclaim.expiration";
    co.group = "karpenter.sh";
    co.kind = "NodeClaim";
    co.client = env->client;
    co.reconcile = reconcile;
    co.ctx = ctl;
    co.workers = env->workers;
    co.parent = env->parent;
    co.events = env->events;
    if ((r = kp_controller_new(&co, &ctl->base)) < 0 ||
        (r = kp_controller_watch_keys(ctl->base, ctl->nodeclaims)) < 0 ||
        (r = kp_controller_add_index(ctl->base, ctl->pods, KP_INDEX_POD_NODE, kp_index_pod_node)) <
            0 ||
        (r = kp_controller_read(ctl->base, ctl->pods)) < 0)
        goto out;
    *ret = ctl;
    ctl = NULL;
out:
    kp_expiration_controller_free(ctl);
    return r;
}

int kp_expiration_controller_start(struct kp_expiration_controller *ctl)
{
    return kp_controller_start(ctl->base);
}

void kp_expiration_controller_stop(struct kp_expiration_controller *ctl)
{
    if (ctl)
        kp_controller_stop(ctl->base);
}

bool kp_expiration_controller_ready(struct kp_expiration_controller *ctl)
{
    return ctl && kp_controller_ready(ctl->base);
}

struct kp_expiration_controller *kp_expiration_controller_free(struct kp_expiration_controller *ctl)
{
    const char *k;
    void *v;
    size_t it = 0;

    if (!ctl)
        return NULL;
    ctl->base = kp_controller_free(ctl->base);
    while (ctl->deleted && kp_map_next(ctl->deleted, &it, &k, &v))
        kp_free(v);
    kp_map_free(ctl->deleted);
    pthread_mutex_destroy(&ctl->mu);
    kp_free(ctl);
    return NULL;
}
