/* core/disruption/marking.c: nodeclaim.podevents and nodeclaim.disruption's Drifted and
 * Consolidatable marking (marking.h).
 *
 * DESIGN: two small reconcilers on the shared informers. The informer handlers only decide
 * whether a change is worth a look and enqueue a key (no I/O, no log on an informer thread).
 * The reconciles read the caches, ask the pure plans below, and write one CAS status patch.
 * A lost race (-KP_ECONFLICT) is requeued by the reconciler and decided again on the newer
 * cache; a key whose object is gone is done.
 *
 * nodeclaim.disruption decides both of its conditions from one cached NodeClaim and sends both
 * changes in one status write: a merge patch replaces the whole conditions list, so two writes
 * under the same resourceVersion would have the second lose its race every time.
 *
 * Why no InstanceTypeNotFound (upstream's third drift check): the SSH provider's instance types
 * are its host classes, built from the pool's current SSHHosts (provider/ssh/inventory.c), and
 * a launched NodeClaim's type is the class of the host under it. That host is itself a member
 * of its class for as long as it exists and its node class selects it, so the type cannot be
 * retired under a running machine as a cloud's can, and the single offering (zone "pool",
 * on-demand) is the one every launch is labelled with. What could still make the type vanish
 * from the catalog is the inventory's momentary state: a class whose arch turns mixed or
 * unprobed, a probe reporting no cpu, a relabelled host-class. Drifting on those would replace
 * healthy nodes over a probe's hiccup; a change to what a node should be is the provider's
 * NodeClassDrift or ProfileDrift to report. (A hostSelector edit that stops selecting a running
 * host is caught by neither; XXX: the provider could report it if users want it.)
 *
 * Why podevents is keyed by Node name: many pods of one Node change at once (a Deployment
 * scaled to zero); the work queue merges their keys into one reconcile and one write.
 *
 * Threads: reconciles on the workers (one key at a time), handlers on the informer threads;
 * the controllers' fields are immutable after new(). */
#include "core/disruption/marking.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/str.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/informer.h"
#include "k8s/reconciler.h"
#include "k8s/rfc3339.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/requirements.h"
#include "core/conds.h"
#include "core/core.h"
#include "core/provider.h"
#include "core/writes.h"

/* --- pure decisions ---------------------------------------------------------------------------- */

static bool daemonset_pod(const struct kp_pod_view *p)
{
    return p->flags & KP_POD_DAEMONSET;
}

bool kp_podevents_is_event(const struct kp_pod_view *o, const struct kp_pod_view *n)
{
    if (!o)
        return false; /* listed at start-up, or created bound: see marking.h */
    if (!n)           /* deleted: an event only if it left while still running there */
        return o->node_name && !daemonset_pod(o) && kp_pod_active(o);
    if (!n->node_name || daemonset_pod(n))
        return false;
    if (!kp_streq(o->node_name, n->node_name))
        return true; /* bound (or moved) to this Node */
    if (kp_pod_terminal(n) && !kp_pod_terminal(o))
        return true;
    return kp_pod_terminating(n) && !kp_pod_terminating(o);
}

uint64_t kp_podevents_wait(const struct kp_nodeclaim_view *nc, int64_t now_usec)
{
    int64_t end;

    if (nc->last_pod_event_usec <= 0)
        return 0;
    end = nc->last_pod_event_usec + (int64_t)KP_PODEVENTS_DEDUPE_USEC;
    return end > now_usec ? (uint64_t)(end - now_usec) : 0;
}

struct kp_consolidatable_plan kp_consolidatable_plan(const struct kp_nodeclaim_view *nc,
                                                     const struct kp_nodepool_view *np,
                                                     int64_t now_usec)
{
    struct kp_consolidatable_plan plan = {.action = KP_CONSOLIDATABLE_KEEP};
    const struct kp_condition *cur = kp_conditions_get(&nc->conditions, KP_NC_COND_CONSOLIDATABLE);
    const struct kp_condition *init = kp_conditions_get(&nc->conditions, KP_NC_COND_INITIALIZED);
    const struct kp_obj_duration *after = &np->consolidate_after;
    int64_t since, at;

    if (np->replicas >= 0 || nc->meta.deletion_usec != 0)
        return plan; /* static pools are never consolidated; a deleting claim is on its way */
    /* Never (or a value that does not parse, which fails the NodePool's validation): no
     * consolidation, so no condition. */
    if ((after->text && (!after->valid || after->never)) || !init || init->status != KP_COND_TRUE) {
        if (cur)
            plan.action = KP_CONSOLIDATABLE_CLEAR;
        return plan;
    }
    since = nc->last_pod_event_usec > 0 ? nc->last_pod_event_usec : init->last_transition_usec;
    at = since + (after->text ? after->ns / 1000 : 0);
    if (now_usec < at) {
        if (cur)
            plan.action = KP_CONSOLIDATABLE_CLEAR;
        plan.requeue_usec = (uint64_t)(at - now_usec);
        return plan;
    }
    if (!cur || cur->status != KP_COND_TRUE)
        plan.action = KP_CONSOLIDATABLE_SET;
    return plan;
}

/* The condition as the plan would leave it: True with reason as reason and message. */
static bool drift_marked(const struct kp_condition *cur, const char *reason)
{
    return cur && cur->status == KP_COND_TRUE && kp_streq(cur->reason, reason) &&
           kp_streq(cur->message, reason);
}

/* Upstream's static drift: both hash annotations on both objects, equal versions, other hashes. */
static bool nodepool_drifted(const struct kp_nodeclaim_view *nc, const struct kp_nodepool_view *np)
{
    const char *np_hash = kp_labels_get(&np->annotations, KP_CORE_ANN_NODEPOOL_HASH);
    const char *np_ver = kp_labels_get(&np->annotations, KP_CORE_ANN_NODEPOOL_HASH_VERSION);
    const char *nc_hash = kp_labels_get(&nc->annotations, KP_CORE_ANN_NODEPOOL_HASH);
    const char *nc_ver = kp_labels_get(&nc->annotations, KP_CORE_ANN_NODEPOOL_HASH_VERSION);

    if (!np_hash || !np_ver || !nc_hash || !nc_ver || !kp_streq(np_ver, nc_ver))
        return false;
    return !kp_streq(np_hash, nc_hash);
}

/* Whether np's template requirements are incompatible with nc's labels (key In [value]). No
 * key is allowed to be undefined: a node lacking a label the NodePool now requires does not
 * satisfy it. 0 with *ret_drifted, or the reqset errors. */
static int requirements_drifted(const struct kp_nodeclaim_view *nc,
                                const struct kp_nodepool_view *np, bool *ret_drifted)
{
    struct kp_reqset labels = KP_REQSET_INIT, pool = KP_REQSET_INIT;
    int r;

    if ((r = kp_reqset_add_labels(&labels, &nc->meta.labels)) < 0 ||
        (r = kp_reqset_add_requirements(&pool, np->tmpl.requirements.v, np->tmpl.requirements.n)) <
            0)
        goto out;
    *ret_drifted = !kp_reqset_compatible(&labels, &pool, /* allow_undefined= */ NULL,
                                         /* why= */ NULL, 0);
out:
    kp_reqset_done(&labels);
    kp_reqset_done(&pool);
    return r;
}

int kp_drift_plan(const struct kp_nodeclaim_view *nc, const struct kp_nodepool_view *np,
                  bool provider_asked, const char *provider_reason, struct kp_drift_plan *ret)
{
    struct kp_drift_plan plan = {.action = KP_DRIFT_KEEP};
    const struct kp_condition *cur = kp_conditions_get(&nc->conditions, KP_NC_COND_DRIFTED);
    const struct kp_condition *launched = kp_conditions_get(&nc->conditions, KP_NC_COND_LAUNCHED);
    const char *reason = NULL;
    bool drifted = false;
    int r;

    /* Not of this pool, on its way out, or a pool whose requirements cannot be read (it fails
     * validation, and the core leaves an invalid NodePool alone): nothing to decide. */
    if (!nc->nodepool || !kp_streq(nc->nodepool, np->e.name) || nc->meta.deletion_usec != 0 ||
        np->tmpl.reqs_error)
        goto done;
    if (!launched || launched->status != KP_COND_TRUE) {
        if (cur)
            plan.action = KP_DRIFT_CLEAR;
        goto done; /* its Launched transition is a NodeClaim update, which requeues it */
    }
    plan.requeue_usec = KP_DRIFT_REQUEUE_USEC;
    if (nodepool_drifted(nc, np))
        reason = KP_DRIFT_REASON_NODEPOOL;
    else {
        if ((r = requirements_drifted(nc, np, &drifted)) < 0)
            return r;
        if (drifted)
            reason = KP_DRIFT_REASON_REQUIREMENTS;
        else if (!provider_asked) {
            plan.action = KP_DRIFT_ASK_PROVIDER;
            goto done;
        } else if (provider_reason && *provider_reason)
            reason = provider_reason;
    }
    if (reason) {
        plan.reason = reason;
        if (!drift_marked(cur, reason))
            plan.action = KP_DRIFT_SET;
    } else if (cur)
        plan.action = KP_DRIFT_CLEAR;
done:
    *ret = plan;
    return 0;
}

/* --- nodeclaim.podevents ------------------------------------------------------------------------ */

struct kp_podevents_controller {
    const struct kp_core_env *env;
    struct kp_store *nodes, *nodeclaims;
    struct kp_controller *base;
    struct kp_reconciler *rec;
};

static void pod_changed(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    struct kp_podevents_controller *ctl = ctx;
    const struct kp_pod_view *o = old_e ? kp_pod_view(old_e) : NULL;
    const struct kp_pod_view *n = new_e ? kp_pod_view(new_e) : NULL;

    const struct kp_pod_view *p = n ? n : o;

    if (p && kp_podevents_is_event(o, n))
        (void)kp_reconciler_enqueue(ctl->rec, p->node_name);
}
static void pod_added(void *ctx, const struct kp_entry *e)
{
    pod_changed(ctx, NULL, e);
}
static void pod_deleted(void *ctx, const struct kp_entry *e)
{
    pod_changed(ctx, e, NULL);
}

/* The NodeClaim of the Node called name (by its providerID): a new reference, or NULL. */
static struct kp_entry *claim_of_node(struct kp_store *nodes, struct kp_store *nodeclaims,
                                      const char *name)
{
    struct kp_store_list l = {0};
    struct kp_entry *ne = NULL, *found = NULL;
    const struct kp_node_view *nv;

    if (kp_store_get(nodes, name, &ne) < 0)
        return NULL;
    nv = kp_node_view(ne);
    if (nv->provider_id && *nv->provider_id &&
        kp_store_by_index(nodeclaims, KP_INDEX_NODECLAIM_PROVIDER_ID, nv->provider_id, &l) == 0 &&
        l.n == 1)
        found = kp_entry_ref(l.v[0]);
    kp_store_list_free(&l);
    kp_entry_unref(ne);
    return found;
}

static int podevents_reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx,
                               const char *key, uint64_t *ret_requeue)
{
    struct kp_podevents_controller *ctl = ctx;
    struct kp_entry *e = claim_of_node(ctl->nodes, ctl->nodeclaims, key);
    const struct kp_nodeclaim_view *nc;
    char ts[KP_RFC3339_STRMAX], *msg = NULL;
    json_t *body = NULL;
    int64_t now = (int64_t)kp_core_now(ctl->env);
    uint64_t wait;
    int r = 0;

    (void)cx;
    if (!e)
        return 0; /* no NodeClaim (yet, or any more): nothing to stamp */
    nc = kp_nodeclaim_view(e);
    if (!kp_provider_supports(ctl->env->provider, &nc->spec.node_class_ref) ||
        nc->meta.deletion_usec != 0)
        goto out;
    if ((wait = kp_podevents_wait(nc, now)) > 0) {
        *ret_requeue = wait;
        goto out;
    }
    if ((r = kp_rfc3339_format(now, KP_RFC3339_SECONDS, ts, sizeof(ts))) < 0 ||
        (r = kp_json_patch_new(&body)) < 0 ||
        (r = kp_json_patch_set_str(body, KP_JSON_PATH("status", "lastPodEventTime"), ts)) < 0)
        goto out;
    r = kp_patch_cas(c, &KP_RES_NODECLAIM, NULL, nc->e.name, "status", nc->e.rv, body, &msg);
    if (r == -ENOENT)
        r = 0;
    else if (r < 0 && r != -KP_ECONFLICT)
        kp_log_debug("lastPodEventTime not written", KP_LF("NodeClaim", nc->e.name),
                     KP_LF("detail", msg ? msg : ""));
out:
    kp_free(msg);
    kp_json_unref(body);
    kp_entry_unref(e);
    return r;
}

int kp_podevents_controller_new(const struct kp_core_env *env, struct kp_podevents_controller **ret)
{
    struct kp_podevents_controller *ctl = NULL;
    struct kp_controller_opts co = {0};
    struct kp_informer *pods, *nodes, *nodeclaims;
    struct kp_informer_handler h = {
        .on_add = pod_added, .on_update = pod_changed, .on_delete = pod_deleted};
    int r;

    if (!env || !env->client || !env->informers || !env->provider || !ret)
        return -EINVAL;
    if ((r = kp_informers_pods(env->informers, &pods)) < 0 ||
        (r = kp_informers_nodes(env->informers, &nodes)) < 0 ||
        (r = kp_informers_nodeclaims(env->informers, &nodeclaims)) < 0)
        return r;
    if (!(ctl = kp_calloc(1, sizeof(*ctl))))
        return -ENOMEM;
    ctl->env = env;
    ctl->nodes = kp_informer_store(nodes);
    ctl->nodeclaims = kp_informer_store(nodeclaims);
    co.name = "nodeclaim.podevents";
    co.group = "";
    co.kind = "Pod";
    co.client = env->client;
    co.reconcile = podevents_reconcile;
    co.ctx = ctl;
    co.workers = env->workers;
    co.parent = env->parent;
    co.events = env->events;
    h.ctx = ctl;
    if ((r = kp_controller_new(&co, &ctl->base)) < 0)
        goto out;
    ctl->rec = kp_controller_reconciler(ctl->base);
    if ((r = kp_controller_add_index(ctl->base, nodeclaims, KP_INDEX_NODECLAIM_PROVIDER_ID,
                                     kp_index_nodeclaim_provider_id)) < 0 ||
        (r = kp_controller_watch(ctl->base, pods, &h)) < 0 ||
        (r = kp_controller_read(ctl->base, nodes)) < 0 ||
        (r = kp_controller_read(ctl->base, nodeclaims)) < 0)
        goto out;
    *ret = ctl;
    ctl = NULL;
out:
    kp_podevents_controller_free(ctl);
    return r;
}

int kp_podevents_controller_start(struct kp_podevents_controller *ctl)
{
    return kp_controller_start(ctl->base);
}

void kp_podevents_controller_stop(struct kp_podevents_controller *ctl)
{
    if (ctl)
        kp_controller_stop(ctl->base);
}

bool kp_podevents_controller_ready(struct kp_podevents_controller *ctl)
{
    return ctl && kp_controller_ready(ctl->base);
}

struct kp_podevents_controller *kp_podevents_controller_free(struct kp_podevents_controller *ctl)
{
    if (!ctl)
        return NULL;
    ctl->base = kp_controller_free(ctl->base);
    kp_free(ctl);
    return NULL;
}

/* --- nodeclaim.disruption: Consolidatable ------------------------------------------------------ */

struct kp_consolidation_controller {
    const struct kp_core_env *env;
    struct kp_store *nodeclaims, *nodepools;
    struct kp_controller *base;
    struct kp_reconciler *rec;
    bool watching; /* registered with the provider's watch_drift */
};

static bool requirement_equal(const struct kp_requirement *a, const struct kp_requirement *b)
{
    if (!kp_streq(a->key, b->key) || a->op != b->op || a->n_values != b->n_values ||
        a->min_values != b->min_values)
        return false;
    for (size_t i = 0; i < a->n_values; i++)
        if (!kp_streq(a->values[i], b->values[i]))
            return false;
    return true;
}

static bool requirements_equal(const struct kp_nodeclaim_spec *a, const struct kp_nodeclaim_spec *b)
{
    if (a->requirements.n != b->requirements.n || !kp_streq(a->reqs_error, b->reqs_error))
        return false;
    for (size_t i = 0; i < a->requirements.n; i++)
        if (!requirement_equal(&a->requirements.v[i], &b->requirements.v[i]))
            return false;
    return true;
}

/* Whether a NodePool change can change its NodeClaims' conditions: consolidateAfter or replicas
 * (Consolidatable), the hash annotations or the template requirements (Drifted); not a status
 * write, which would requeue every NodeClaim of the pool each time. */
static bool marking_changed(const struct kp_nodepool_view *o, const struct kp_nodepool_view *n)
{
    const struct kp_obj_duration *a = &o->consolidate_after, *b = &n->consolidate_after;

    return o->replicas != n->replicas || !kp_streq(a->text, b->text) || a->ns != b->ns ||
           a->never != b->never || a->valid != b->valid ||
           !kp_streq(kp_labels_get(&o->annotations, KP_CORE_ANN_NODEPOOL_HASH),
                     kp_labels_get(&n->annotations, KP_CORE_ANN_NODEPOOL_HASH)) ||
           !kp_streq(kp_labels_get(&o->annotations, KP_CORE_ANN_NODEPOOL_HASH_VERSION),
                     kp_labels_get(&n->annotations, KP_CORE_ANN_NODEPOOL_HASH_VERSION)) ||
           !requirements_equal(&o->tmpl, &n->tmpl);
}

/* A NodePool arrived or changed what marking reads: every NodeClaim of it decides again. */
static void nodepool_changed(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    struct kp_consolidation_controller *ctl = ctx;
    const struct kp_entry *e = new_e ? new_e : old_e;
    struct kp_store_list l = {0};

    if (!e ||
        (old_e && new_e && !marking_changed(kp_nodepool_view(old_e), kp_nodepool_view(new_e))))
        return;
    if (kp_store_by_index(ctl->nodeclaims, KP_INDEX_NODECLAIM_NODEPOOL, e->name, &l) < 0)
        return;
    for (size_t i = 0; i < l.n; i++)
        (void)kp_reconciler_enqueue(ctl->rec, l.v[i]->name);
    kp_store_list_free(&l);
}
static void nodepool_added(void *ctx, const struct kp_entry *e)
{
    nodepool_changed(ctx, NULL, e);
}

/* The provider says what is_drifted reads changed (watch_drift): the NodeClaims of that node
 * class (NULL: all) decide again, so a profile bump is seen in seconds, not at the 5-minute
 * requeue. Informer thread: a store walk and enqueues only. */
static void provider_drift_changed(void *ctx, const char *node_class)
{
    struct kp_consolidation_controller *ctl = ctx;
    struct kp_store_list l = {0};

    if (kp_store_list(ctl->nodeclaims, &l) < 0)
        return; /* the 5-minute requeue still comes */
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_nodeclaim_view *nc = kp_nodeclaim_view(l.v[i]);

        if (!node_class || kp_streq(nc->spec.node_class_ref.name, node_class))
            (void)kp_reconciler_enqueue(ctl->rec, l.v[i]->name);
    }
    kp_store_list_free(&l);
}

/* Asks the provider whether nc drifted: 0 with *ret_reason (NULL: not drifted); 1 when the
 * provider does not know the instance (upstream ignores NotFound: the condition stays as it
 * is); or the provider's error, logged here. */
static int ask_provider(struct kp_consolidation_controller *ctl, struct kp_client *c,
                        const struct kp_ctx *cx, const struct kp_nodeclaim_view *nc,
                        const char **ret_reason)
{
    const struct kp_provider *p = ctl->env->provider;
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    const char *reason = NULL;
    int r = p->ops->is_drifted(p->self, cx, c, nc, &reason, &err);

    if (r == 0)
        *ret_reason = reason;
    else if (err.kind == KP_PROVIDER_ERR_NOT_FOUND)
        r = 1; /* the instance is not found: no answer, the condition stays as it is */
    else
        kp_log_debug("getting drift", KP_LF("NodeClaim", nc->e.name),
                     KP_LF("error", kp_strerror(r)),
                     KP_LF("detail", err.message ? err.message : ""));
    kp_provider_err_done(&err);
    return r;
}

/* The sooner of two requeues, 0 meaning none. */
static uint64_t sooner(uint64_t a, uint64_t b)
{
    if (!a || !b)
        return a ? a : b;
    return a < b ? a : b;
}

static int consolidation_reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx,
                                   const char *key, uint64_t *ret_requeue)
{
    struct kp_consolidation_controller *ctl = ctx;
    struct kp_entry *e = NULL, *pe = NULL;
    struct kp_consolidatable_plan plan;
    struct kp_drift_plan drift = {.action = KP_DRIFT_KEEP};
    const struct kp_nodeclaim_view *nc;
    const struct kp_nodepool_view *np;
    const char *provider_reason = NULL;
    struct kp_condset cs = {0};
    int64_t now = (int64_t)kp_core_now(ctl->env);
    char *msg = NULL;
    int r, provider_r = 0;

    r = kp_store_get(ctl->nodeclaims, key, &e);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    nc = kp_nodeclaim_view(e);
    if (!kp_provider_supports(ctl->env->provider, &nc->spec.node_class_ref) || !nc->nodepool ||
        kp_store_get(ctl->nodepools, nc->nodepool, &pe) < 0) {
        r = 0; /* not ours, or no NodePool (yet): its arrival requeues the claim */
        goto out;
    }
    np = kp_nodepool_view(pe);
    plan = kp_consolidatable_plan(nc, np, now);
    if ((r = kp_drift_plan(nc, np, /* provider_asked= */ false, NULL, &drift)) < 0)
        goto out;
    if (drift.action == KP_DRIFT_ASK_PROVIDER) {
        provider_r = ask_provider(ctl, c, cx, nc, &provider_reason);
        if (provider_r != 0) /* an error is retried with backoff; NotFound waits for the poll */
            drift = (struct kp_drift_plan){.action = KP_DRIFT_KEEP,
                                           .requeue_usec = provider_r > 0 ? drift.requeue_usec : 0};
        else if ((r = kp_drift_plan(nc, np, true, provider_reason, &drift)) < 0)
            goto out;
    }
    *ret_requeue = sooner(plan.requeue_usec, drift.requeue_usec);
    if (plan.action == KP_CONSOLIDATABLE_KEEP && drift.action == KP_DRIFT_KEEP)
        goto out;
    /* Both conditions in one write: see the top. */
    if ((r = kp_condset_init(&cs, &nc->conditions, nc->generation, now)) < 0)
        goto out;
    if (plan.action == KP_CONSOLIDATABLE_SET)
        r = kp_condset_set(&cs, KP_NC_COND_CONSOLIDATABLE, KP_COND_TRUE, NULL, NULL);
    else if (plan.action == KP_CONSOLIDATABLE_CLEAR)
        kp_condset_clear(&cs, KP_NC_COND_CONSOLIDATABLE);
    if (r < 0)
        goto out;
    /* Upstream's message is the reason itself. */
    if (drift.action == KP_DRIFT_SET)
        r = kp_condset_set(&cs, KP_NC_COND_DRIFTED, KP_COND_TRUE, drift.reason, drift.reason);
    else if (drift.action == KP_DRIFT_CLEAR)
        kp_condset_clear(&cs, KP_NC_COND_DRIFTED);
    if (r < 0)
        goto out;
    r = kp_write_conditions(c, &KP_RES_NODECLAIM, NULL, nc->e.name, nc->e.rv, &cs, &msg);
    if (r == -ENOENT)
        r = 0;
    else if (r < 0 && r != -KP_ECONFLICT)
        kp_log_debug("disruption conditions not written", KP_LF("NodeClaim", nc->e.name),
                     KP_LF("detail", msg ? msg : ""));
    else if (r == 0) {
        if (plan.action == KP_CONSOLIDATABLE_CLEAR)
            kp_log_debug("removing consolidatable status condition",
                         KP_LF("NodeClaim", nc->e.name));
        if (drift.action == KP_DRIFT_SET && !kp_conditions_get(&nc->conditions, KP_NC_COND_DRIFTED))
            kp_log_debug("marking drifted", KP_LF("NodeClaim", nc->e.name),
                         KP_LF("reason", drift.reason));
        else if (drift.action == KP_DRIFT_CLEAR)
            kp_log_debug("removing drifted status condition", KP_LF("NodeClaim", nc->e.name));
    }
out:
    kp_condset_done(&cs);
    kp_free(msg);
    kp_entry_unref(pe);
    kp_entry_unref(e);
    /* A provider error is returned once what could be written was, so the reconciler retries
     * with backoff; a lost race or a write error wins, being the sooner retry. */
    return r < 0 ? r : provider_r < 0 ? provider_r : 0;
}

int kp_consolidation_controller_new(const struct kp_core_env *env,
                                    struct kp_consolidation_controller **ret)
{
    struct kp_consolidation_controller *ctl = NULL;
    struct kp_controller_opts co = {0};
    struct kp_informer *nodeclaims, *nodepools;
    struct kp_informer_handler h = {.on_add = nodepool_added, .on_update = nodepool_changed};
    int r;

    if (!env || !env->client || !env->informers || !env->provider || !ret)
        return -EINVAL;
    if ((r = kp_informers_nodeclaims(env->informers, &nodeclaims)) < 0 ||
        (r = kp_informers_nodepools(env->informers, &nodepools)) < 0)
        return r;
    if (!(ctl = kp_calloc(1, sizeof(*ctl))))
        return -ENOMEM;
    ctl->env = env;
    ctl->nodeclaims = kp_informer_store(nodeclaims);
    ctl->nodepools = kp_informer_store(nodepools);
    co.name = "nodeclaim.disruption";
    co.group = "karpenter.sh";
    co.kind = "NodeClaim";
    co.client = env->client;
    co.reconcile = consolidation_reconcile;
    co.ctx = ctl;
    co.workers = env->workers;
    co.parent = env->parent;
    co.events = env->events;
    h.ctx = ctl;
    if ((r = kp_controller_new(&co, &ctl->base)) < 0)
        goto out;
    ctl->rec = kp_controller_reconciler(ctl->base);
    if ((r = kp_controller_add_index(ctl->base, nodeclaims, KP_INDEX_NODECLAIM_NODEPOOL,
                                     kp_index_nodeclaim_nodepool)) < 0 ||
        (r = kp_controller_watch_keys(ctl->base, nodeclaims)) < 0 ||
        (r = kp_controller_watch(ctl->base, nodepools, &h)) < 0)
        goto out;
    if (env->provider->ops->watch_drift) {
        if ((r = env->provider->ops->watch_drift(env->provider->self, provider_drift_changed,
                                                 ctl)) < 0)
            goto out;
        ctl->watching = true;
    }
    *ret = ctl;
    ctl = NULL;
out:
    kp_consolidation_controller_free(ctl);
    return r;
}

int kp_consolidation_controller_start(struct kp_consolidation_controller *ctl)
{
    return kp_controller_start(ctl->base);
}

void kp_consolidation_controller_stop(struct kp_consolidation_controller *ctl)
{
    if (ctl)
        kp_controller_stop(ctl->base);
}

bool kp_consolidation_controller_ready(struct kp_consolidation_controller *ctl)
{
    return ctl && kp_controller_ready(ctl->base);
}

struct kp_consolidation_controller *
kp_consolidation_controller_free(struct kp_consolidation_controller *ctl)
{
    if (!ctl)
        return NULL;
    if (ctl->watching && ctl->env->provider->ops->unwatch_drift)
        ctl->env->provider->ops->unwatch_drift(ctl->env->provider->self, ctl);
    ctl->base = kp_controller_free(ctl->base);
    kp_free(ctl);
    return NULL;
}
