/* core/gc/gc.c: NodeClaim and orphan-Node garbage collection (gc.h).
 *
 * DESIGN: a singleton. The only key, KP_GC_KEY, is queued at start and requeued by every pass
 * after gc_interval_usec (after an error the reconciler's backoff brings it back sooner). A pass:
 *
 *   1. waits for the NodeClaim and Node caches to have synced: an empty cache would read as
 *      "no NodeClaim has this providerID" and delete every Node;
 *   2. calls the provider's List under the reconcile's context; a failure ends the pass (an
 *      empty answer from a failed List would collect every NodeClaim);
 *   3. puts the listed providerIDs in a map, then walks the NodeClaims (kp_gc_nodeclaim_plan)
 *      and the Nodes (kp_gc_node_plan), deleting with uid preconditions.
 *
 * Deletes are independent: a failed one is logged and the pass goes on; the pass then returns
 * the last error so the reconciler logs it and retries with backoff. A lost race (-KP_ECONFLICT:
 * the name now holds another object) is not an error: the next pass decides again. Nor is an
 * object already gone (-ENOENT: deleted by someone else since the cache saw it), which is neither
 * logged as collected nor counted, as Karpenter ignores NotFound before its metric.
 *
 * Threads: one worker at a time runs the only key; the map and lists are the pass's own. */
#include "core/gc/gc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/informer.h"
#include "k8s/reconciler.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "core/core.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/writes.h"

/* How soon a pass that found a cache not yet synced looks again. */
#define SYNC_WAIT_USEC (1000000ULL)

/* --- pure decisions ---------------------------------------------------------------------------- */

bool kp_gc_nodeclaim_plan(const struct kp_provider *p, const struct kp_nodeclaim_view *nc,
                          bool listed, const struct kp_node_view *node, int64_t now_usec)
{
    const struct kp_condition *reg = kp_conditions_get(&nc->conditions, KP_NC_COND_REGISTERED);
    const struct kp_condition *launched = kp_conditions_get(&nc->conditions, KP_NC_COND_LAUNCHED);
    int64_t since;

    if (!kp_provider_supports(p, &nc->spec.node_class_ref) || nc->meta.deletion_usec != 0)
        return false;
    if (!reg || reg->status != KP_COND_TRUE || !nc->provider_id || !*nc->provider_id)
        return false;
    /* Launched went True at its last transition; without one, the NodeClaim's age stands in. */
    since = launched && launched->last_transition_usec ? launched->last_transition_usec
                                                       : nc->meta.creation_usec;
    if (now_usec - since < KP_GC_LAUNCH_GRACE_USEC)
        return false;
    if (listed)
        return false;
    /* The kubelet still reports Ready: the machine is alive, whatever the provider says. */
    return !(node && node->ready == KP_COND_TRUE);
}

/* Writes <group>/<lowercase kind> into buf. false when it does not fit. */
bool kp_gc_node_labelled_ours(const struct kp_provider *p, const struct kp_node_view *node)
{
    const struct kp_node_class_kind *k = NULL;
    size_t n;
    char key[320];

    if (!kp_labels_get(&node->meta.labels, KP_CORE_LABEL_NODEPOOL))
        return false;
    if (kp_provider_owns_provider_id(p, node->provider_id))
        return true;
    n = p->ops->supported_node_classes(p->self, &k);
    for (size_t i = 0; i < n; i++)
        if (kp_core_nodeclass_label(k[i].group, k[i].kind, key, sizeof(key)) &&
            kp_labels_get(&node->meta.labels, key))
            return true;
    return false;
}

bool kp_gc_node_plan(const struct kp_provider *p, const struct kp_node_view *node,
                     const struct kp_gc_node_facts *facts, int64_t now_usec, uint64_t grace_usec)
{
    if (node->meta.deletion_usec != 0 || !node->provider_id || !*node->provider_id)
        return false;
    if (!facts->instance && !kp_gc_node_labelled_ours(p, node))
        return false; /* not ours: another controller's Node, or a node kpssh never made */
    if (facts->claim_with_provider_id || facts->claim_named)
        return false;
    return now_usec - node->meta.creation_usec >= (int64_t)grace_usec;
}

/* --- the controller ------------------------------------------------------------------------------ */

struct kp_gc_controller {
    const struct kp_core_env *env;
    struct kp_core_timing timing;
    struct kp_informer *nodeclaims, *nodes, *pods;
    struct kp_controller *base;
};

/* The Node with providerID pid, preferring a Ready one (two Nodes for one providerID is a
 * broken invariant; a Ready one still means a live kubelet). A new reference or NULL. */
static struct kp_entry *node_for(struct kp_gc_controller *ctl, const char *pid)
{
    struct kp_store_list l = {0};
    struct kp_entry *found = NULL;

    if (kp_store_by_index(kp_informer_store(ctl->nodes), KP_INDEX_NODE_PROVIDER_ID, pid, &l) < 0)
        return NULL;
    for (size_t i = 0; i < l.n; i++)
        if (!found || kp_node_view(l.v[i])->ready == KP_COND_TRUE) {
            kp_entry_unref(found);
            found = kp_entry_ref(l.v[i]);
        }
    kp_store_list_free(&l);
    return found;
}

/* Collects lost NodeClaims; returns 0 or the last failed delete's error. */
static int collect_nodeclaims(struct kp_gc_controller *ctl, struct kp_client *c,
                              const struct kp_map *listed, int64_t now)
{
    struct kp_store_list l = {0};
    int r, last = 0;

    if ((r = kp_store_list(kp_informer_store(ctl->nodeclaims), &l)) < 0)
        return r;
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_nodeclaim_view *nc = kp_nodeclaim_view(l.v[i]);
        bool in = nc->provider_id && kp_map_contains(listed, nc->provider_id);
        struct kp_entry *ne = nc->provider_id && !in ? node_for(ctl, nc->provider_id) : NULL;
        char *msg = NULL;

        if (kp_gc_nodeclaim_plan(ctl->env->provider, nc, in, ne ? kp_node_view(ne) : NULL, now)) {
            r = kp_delete_uid(c, &KP_RES_NODECLAIM, NULL, nc->e.name, nc->e.uid, &msg);
            if (r == 0) {
                kp_log_info("garbage collecting nodeclaim with no cloudprovider representation",
                            KP_LF("nodeclaim", nc->e.name),
                            KP_LF("node", nc->node_name ? nc->node_name : ""),
                            KP_LF("provider-id", nc->provider_id));
                kp_core_count_disrupted(ctl->env->observer, nc, KP_CM_REASON_GARBAGE_COLLECTED);
                kp_core_count_disrupted_pods(
                    ctl->env->observer, nc, KP_CM_REASON_GARBAGE_COLLECTED,
                    kp_core_reschedulable_on(kp_informer_store(ctl->pods), nc->node_name));
            } else if (r != -KP_ECONFLICT && r != -ENOENT) {
                kp_log_warn_errno(r, "garbage collection of nodeclaim failed",
                                  KP_LF("nodeclaim", nc->e.name), KP_LF("detail", msg ? msg : ""));
                last = r;
            }
        }
        kp_free(msg);
        kp_entry_unref(ne);
    }
    kp_store_list_free(&l);
    return last;
}

/* Whether a NodeClaim called name is in the cache; true also when the store cannot answer
 * (never delete on a doubt). */
static bool claim_exists(struct kp_gc_controller *ctl, const char *name)
{
    struct kp_entry *e = NULL;
    int r;

    if (!name || !*name)
        return false;
    r = kp_store_get(kp_informer_store(ctl->nodeclaims), name, &e);
    kp_entry_unref(e);
    return r != -ENOENT;
}

/* Whether some NodeClaim holds providerID pid; true also when the index cannot answer (never
 * delete on a doubt). */
static bool claim_with_pid(struct kp_gc_controller *ctl, const char *pid)
{
    struct kp_store_list l = {0};
    bool any;

    if (kp_store_by_index(kp_informer_store(ctl->nodeclaims), KP_INDEX_NODECLAIM_PROVIDER_ID, pid,
                          &l) < 0)
        return true;
    any = l.n > 0;
    kp_store_list_free(&l);
    return any;
}

/* Deletes orphaned Nodes; returns 0 or the last failed delete's error. */
static int collect_nodes(struct kp_gc_controller *ctl, struct kp_client *c,
                         const struct kp_map *listed, int64_t now)
{
    struct kp_store_list l = {0};
    int r, last = 0;

    if ((r = kp_store_list(kp_informer_store(ctl->nodes), &l)) < 0)
        return r;
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_node_view *node = kp_node_view(l.v[i]);
        struct kp_gc_node_facts f = {0};
        char *msg = NULL;

        if (!node->provider_id || !*node->provider_id)
            continue;
        f.instance = kp_map_get(listed, node->provider_id);
        f.claim_with_provider_id = claim_with_pid(ctl, node->provider_id);
        f.claim_named = claim_exists(ctl, node->e.name) ||
                        (f.instance && claim_exists(ctl, f.instance->nodeclaim));
        if (!kp_gc_node_plan(ctl->env->provider, node, &f, now, ctl->timing.orphan_node_grace_usec))
            continue;
        r = kp_delete_uid(c, &KP_RES_NODE, NULL, node->e.name, node->e.uid, &msg);
        if (r == 0)
            kp_log_info(
                "deleting node with no nodeclaim", KP_LF("node", node->e.name),
                KP_LF("provider-id", node->provider_id),
                KP_LF("instance", f.instance && f.instance->backing ? f.instance->backing : ""));
        else if (r != -KP_ECONFLICT && r != -ENOENT) {
            kp_log_warn_errno(r, "garbage collection of node failed", KP_LF("node", node->e.name),
                              KP_LF("detail", msg ? msg : ""));
            last = r;
        }
        kp_free(msg);
    }
    kp_store_list_free(&l);
    return last;
}

int kp_gc_reconcile(struct kp_gc_controller *ctl, struct kp_client *c, const struct kp_ctx *cx,
                    uint64_t *ret_requeue)
{
    const struct kp_provider *p = ctl->env->provider;
    struct kp_provider_instances list = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_map *listed = NULL;
    int64_t now;
    int r, r2;

    if (!kp_informer_synced(ctl->nodeclaims) || !kp_informer_synced(ctl->nodes)) {
        *ret_requeue = SYNC_WAIT_USEC;
        return 0;
    }
    *ret_requeue = ctl->timing.gc_interval_usec;
    if ((r = p->ops->list(p->self, cx, c, &list, &err)) < 0) {
        kp_log_debug("garbage collection waits for the provider's list",
                     KP_LF("kind", kp_provider_err_kind_name(err.kind)),
                     KP_LF("detail", err.message ? err.message : ""));
        goto out;
    }
    if ((r = kp_map_new(&listed)) < 0)
        goto out;
    for (size_t i = 0; i < list.n; i++)
        if (list.v[i].provider_id && *list.v[i].provider_id &&
            (r = kp_map_put(listed, list.v[i].provider_id, &list.v[i], NULL)) < 0)
            goto out;
    now = (int64_t)kp_core_now(ctl->env);
    r = collect_nodeclaims(ctl, c, listed, now);
    r2 = collect_nodes(ctl, c, listed, now);
    if (r == 0)
        r = r2;
out:
    kp_map_free(listed);
    kp_provider_instances_done(&list);
    kp_provider_err_done(&err);
    return r;
}

static int reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                     uint64_t *ret_requeue)
{
    (void)key; /* the only one, KP_GC_KEY */
    return kp_gc_reconcile(ctx, c, cx, ret_requeue);
}

int kp_gc_controller_new(const struct kp_core_env *env, struct kp_gc_controller **ret)
{
    struct kp_gc_controller *ctl = NULL;
    struct kp_controller_opts co = {0};
    int r;

    if (!env || !env->client || !env->informers || !env->provider || !ret)
        return -EINVAL;
    if (!(ctl = kp_calloc(1, sizeof(*ctl))))
        return -ENOMEM;
    ctl->env = env;
    ctl->timing = env->timing;
    kp_core_timing_defaults(&ctl->timing);
    if ((r = kp_informers_nodeclaims(env->informers, &ctl->nodeclaims)) < 0 ||
        (r = kp_informers_nodes(env->informers, &ctl->nodes)) < 0 ||
        (r = kp_informers_pods(env->informers, &ctl->pods)) < 0)
        goto out;
    co.name = "nodeclaim.garbagecollection";
    co.group = "karpenter.sh";
    co.kind = "NodeClaim";
    co.client = env->client;
    co.reconcile = reconcile;
    co.ctx = ctl;
    co.workers = 1; /* one key: more workers would idle */
    co.parent = env->parent;
    co.events = env->events;
    if ((r = kp_controller_new(&co, &ctl->base)) < 0 ||
        (r = kp_controller_add_index(ctl->base, ctl->nodes, KP_INDEX_NODE_PROVIDER_ID,
                                     kp_index_node_provider_id)) < 0 ||
        (r = kp_controller_add_index(ctl->base, ctl->nodeclaims, KP_INDEX_NODECLAIM_PROVIDER_ID,
                                     kp_index_nodeclaim_provider_id)) < 0 ||
        (r = kp_controller_read(ctl->base, ctl->nodeclaims)) < 0 ||
        (r = kp_controller_read(ctl->base, ctl->nodes)) < 0 ||
        (r = kp_controller_add_index(ctl->base, ctl->pods, KP_INDEX_POD_NODE, kp_index_pod_node)) <
            0 ||
        (r = kp_controller_read(ctl->base, ctl->pods)) < 0)
        goto out;
    *ret = ctl;
    ctl = NULL;
out:
    kp_gc_controller_free(ctl);
    return r;
}

int kp_gc_controller_start(struct kp_gc_controller *ctl)
{
    int r = kp_controller_start(ctl->base);

    if (r < 0)
        return r;
    /* A restart (a replica leading again) finds the key still queued: enqueue merges it. */
    return kp_reconciler_enqueue(kp_controller_reconciler(ctl->base), KP_GC_KEY);
}

void kp_gc_controller_stop(struct kp_gc_controller *ctl)
{
    if (ctl)
        kp_controller_stop(ctl->base);
}

bool kp_gc_controller_ready(struct kp_gc_controller *ctl)
{
    return ctl && kp_controller_ready(ctl->base);
}

struct kp_gc_controller *kp_gc_controller_free(struct kp_gc_controller *ctl)
{
    if (!ctl)
        return NULL;
    ctl->base = kp_controller_free(ctl->base);
    kp_free(ctl);
    return NULL;
}
