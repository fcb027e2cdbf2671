/* core/lifecycle/lifecycle.c: the NodeClaim lifecycle controller (lifecycle.h): set-up, informer
 * fan-out, the launch cache, and the reconcile that carries out plan.c's actions.
 *
 * DESIGN
 *
 * What: one reconcile per NodeClaim name on a k8s/controller.h skeleton with env->workers
 * workers. A reconcile reads the NodeClaim and the Nodes with its providerID from the informer
 * caches and loops: plan (plan.c), perform the action, add its outcome to the plan's input, plan
 * again; an action that writes the NodeClaim's status, deletes something, or waits ends the loop.
 * So a reconcile makes at most one status write, as Karpenter's does, and every write is a CAS
 * (core/writes.h): a lost race (-KP_ECONFLICT) ends the reconcile and the reconciler brings the
 * key back after its conflict delay, to decide again from the newer cache.
 *
 * Why a launch cache: Create is idempotent per NodeClaim for the provider, but a Create that
 * succeeded and whose status write then failed (a conflict, the API server down) must not cost
 * a second launch attempt, nor lose the instance: the result is kept per uid for
 * KP_LIFECYCLE_CACHE_TTL_USEC (Karpenter's 1 h), read before any Create, dropped once the
 * claim says Launched=True or its finalizer is removed. The cache also tells the deletion path
 * about an instance whose providerID never reached the status (see plan.c: the un-launched
 * race). It is a map under a mutex: workers reconcile different keys at once.
 *
 * Where Create runs: the call is made on the reconcile's worker, under the reconcile's context,
 * whose deadline we raise to the launch timeout plus a minute (a provider that launches inline
 * takes minutes for an SSH join), and under a context of its own that ends when the launch
 * timeout does (counted from the Launched condition's last transition, as the liveness check
 * counts it): a join that hangs is cut off when the claim is due to die, not a whole timeout
 * after the reconcile began. The SSH provider in the controller does not launch inline: it
 * runs the install and join on its job pool, with that deadline, and answers IN_PROGRESS at
 * once; the reconcile then writes nothing and ends, and the job's end enqueues the key
 * (watch_progress), so a host that hangs holds a pool thread, never a worker. stop() and the
 * process's context (SIGTERM, a lost Lease) cancel a launch either way, and the provider leaves
 * what it started resumable. A cancelled Create writes nothing: the next leader resumes it. A
 * Create past its deadline is a failed launch (Launched=Unknown is written), and the liveness
 * check then deletes the claim.
 *
 * Read-your-writes: Karpenter sleeps a second after its status patch so its own watch event
 * does not replay the reconcile on a stale cache. We do not block a worker; the CAS makes a
 * stale replay harmless (the status write of a stale view conflicts), and the counters move only
 * after a status write succeeded, so nothing is counted twice.
 *
 * Threads: informer handlers run on the informer threads and only enqueue keys (walking a store
 * index under its read lock: no I/O, no log there). Reconciles on the workers, each with its own
 * client; one key is never reconciled twice at once (k8s/reconciler.h). The controller's fields
 * are immutable after new() except the cache (its mutex). Logging: this file is the decision
 * point and logs each transition once, with Karpenter's messages. */
#include "core/lifecycle/lifecycle.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "k8s/rfc3339.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "k8s/workqueue.h"
#include "api/indexes.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/writes.h"

#define USEC_PER_SEC 1000000ULL
/* The most actions one reconcile performs: finalizer, launch, node sync, node label, status. */
#define MAX_STEPS 8
/* How long a claim we deleted is left alone while the cache catches up with its deletion. */
#define DELETED_HOLD_USEC (60 * USEC_PER_SEC)
/* The rest of a reconcile once a launch returns: a few API calls. */
#define RECONCILE_MARGIN_USEC (60 * USEC_PER_SEC)

struct cached {
    struct kp_provider_instance in;
    int64_t expires_usec;
};

struct kp_lifecycle_controller {
    const struct kp_core_env *env;
    struct kp_core_timing timing; /* env's, defaults filled */
    struct kp_informer *nodeclaims, *nodes;
    struct kp_controller *base;
    struct kp_reconciler *rec;
    pthread_mutex_t mu;              /* guards cache and deleted */
    struct kp_map *cache;            /* uid -> struct cached */
    struct kp_map *deleted;          /* uid -> int64_t *: until when it is held (claim_held) */
    kp_lifecycle_outcome_fn outcome; /* set before start; read by workers */
    void *outcome_ctx;
    bool watching; /* registered with the provider's watch_progress */
};

/* --- the launch cache ------------------------------------------------------------------------ */

static void cached_free(struct cached *c)
{
    if (!c)
        return;
    kp_provider_instance_done(&c->in);
    kp_free(c);
}

/* Drops expired entries. Under mu. */
static void cache_sweep_locked(struct kp_lifecycle_controller *ctl, int64_t now)
{
    for (;;) {
        const char *key = NULL, *victim = NULL;
        void *value;
        size_t it = 0;
        char *copy;

        while (kp_map_next(ctl->cache, &it, &key, &value))
            if (((struct cached *)value)->expires_usec <= now) {
                victim = key;
                break;
            }
        if (!victim || !(copy = kp_strdup(victim)))
            return;
        cached_free(kp_map_remove(ctl->cache, copy));
        kp_free(copy);
    }
}

/* A copy of uid's cached launch into *ret: 0, -ENOENT or -ENOMEM. */
static int cache_get(struct kp_lifecycle_controller *ctl, const char *uid, int64_t now,
                     struct kp_provider_instance *ret)
{
    struct cached *c;
    int r = -ENOENT;

    pthread_mutex_lock(&ctl->mu);
    c = kp_map_get(ctl->cache, uid);
    if (c && c->expires_usec > now)
        r = kp_provider_instance_copy(&c->in, ret);
    pthread_mutex_unlock(&ctl->mu);
    return r;
}

static int cache_put(struct kp_lifecycle_controller *ctl, const char *uid, int64_t now,
                     const struct kp_provider_instance *in)
{
    struct cached *c = kp_calloc(1, sizeof(*c));
    void *old = NULL;
    int r;

    if (!c)
        return -ENOMEM;
    if ((r = kp_provider_instance_copy(in, &c->in)) < 0) {
        kp_free(c);
        return r;
    }
    c->expires_usec = now + (int64_t)KP_LIFECYCLE_CACHE_TTL_USEC;
    pthread_mutex_lock(&ctl->mu);
    cache_sweep_locked(ctl, now);
    r = kp_map_put(ctl->cache, uid, c, &old);
    pthread_mutex_unlock(&ctl->mu);
    if (r < 0)
        cached_free(c);
    cached_free(old);
    return r;
}

static void cache_drop(struct kp_lifecycle_controller *ctl, const char *uid)
{
    struct cached *c;

    pthread_mutex_lock(&ctl->mu);
    c = kp_map_remove(ctl->cache, uid);
    pthread_mutex_unlock(&ctl->mu);
    cached_free(c);
}

/* Claims this controller deleted (InsufficientCapacity, a timeout) whose deletion the cache may
 * not show yet: the watch event of an earlier write of ours can bring the key back before the
 * deletion's, and a reconcile on that view would launch (and count) again. Held for
 * DELETED_HOLD_USEC at most, or until a view shows the deletion. */
static void held_put(struct kp_lifecycle_controller *ctl, const char *uid, int64_t now)
{
    int64_t *until = kp_malloc(sizeof(*until));
    void *old = NULL;

    if (!until)
        return; /* at worst a second, harmless attempt: every write is a CAS */
    *until = now + (int64_t)DELETED_HOLD_USEC;
    pthread_mutex_lock(&ctl->mu);
    if (kp_map_put(ctl->deleted, uid, until, &old) < 0)
        kp_free(until);
    pthread_mutex_unlock(&ctl->mu);
    kp_free(old);
}

/* Whether uid is held (and drops it once expired or when deleting says the cache caught up). */
static bool claim_held(struct kp_lifecycle_controller *ctl, const char *uid, bool deleting,
                       int64_t now)
{
    int64_t *until, *gone = NULL;
    bool held = false;

    pthread_mutex_lock(&ctl->mu);
    until = kp_map_get(ctl->deleted, uid);
    if (until && (deleting || *until <= now))
        gone = kp_map_remove(ctl->deleted, uid);
    else if (until)
        held = true;
    pthread_mutex_unlock(&ctl->mu);
    kp_free(gone);
    return held;
}

/* --- fan-out --------------------------------------------------------------------------------- */

/* The provider's work for a NodeClaim ended (watch_progress; a provider thread): reconcile it,
 * so the Create or Delete that answered IN_PROGRESS or "releasing" is asked again now. */
static void on_progress(void *ctx, const char *nodeclaim)
{
    struct kp_lifecycle_controller *ctl = ctx;

    (void)kp_reconciler_enqueue(ctl->rec, nodeclaim);
}

static bool managed(const struct kp_lifecycle_controller *ctl, const struct kp_nodeclaim_view *nc)
{
    return kp_provider_supports(ctl->env->provider, &nc->spec.node_class_ref);
}

struct fanout {
    struct kp_lifecycle_controller *ctl;
    unsigned enqueued;
};

/* Under the NodeClaim store's read lock: enqueue only. */
static int enqueue_visit(void *ctx, struct kp_entry *e)
{
    struct fanout *f = ctx;

    if (managed(f->ctl, kp_nodeclaim_view(e)) && kp_reconciler_enqueue(f->ctl->rec, e->name) == 0)
        f->enqueued++;
    return 0;
}

/* A Node event: its NodeClaims by providerID, else the NodeClaim of its name (a Node that
 * registered before the claim's providerID was written, or one without any). */
static void node_event(struct kp_lifecycle_controller *ctl, const struct kp_entry *e)
{
    const struct kp_node_view *n = kp_node_view(e);
    struct kp_store *s = kp_informer_store(ctl->nodeclaims);
    struct fanout f = {.ctl = ctl};
    struct kp_entry *nc = NULL;

    if (n->provider_id)
        (void)kp_store_walk_index(s, KP_INDEX_NODECLAIM_PROVIDER_ID, n->provider_id, enqueue_visit,
                                  &f); /* -ENOENT: none */
    if (f.enqueued == 0 && kp_store_get(s, e->name, &nc) == 0) {
        (void)enqueue_visit(&f, nc);
        kp_entry_unref(nc);
    }
}

static void on_node_add(void *ctx, const struct kp_entry *e)
{
    node_event(ctx, e);
}

static void on_node_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    const struct kp_node_view *o = kp_node_view(old_e), *n = kp_node_view(new_e);

    /* A providerID that changed (set late) concerns the claim of the old one too. */
    if (o->provider_id && !kp_streq(o->provider_id, n->provider_id))
        node_event(ctx, old_e);
    node_event(ctx, new_e);
}

static int reconcile_fn(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                        uint64_t *ret_requeue)
{
    struct kp_lifecycle_controller *ctl = ctx;

    /* Before both caches have synced, "no Node" would read as NodeNotFound (and start the
     * registration TTL's clock on a Node that exists). */
    if (!kp_informer_synced(ctl->nodeclaims) || !kp_informer_synced(ctl->nodes)) {
        *ret_requeue = USEC_PER_SEC;
        return 0;
    }
    return kp_lifecycle_reconcile(ctl, c, cx, key, ret_requeue);
}

/* --- set-up ------------------------------------------------------------------------------------ */

/* Karpenter's lifecycle controller backs a failing NodeClaim off from 1 s to 1 min per item: a
 * failed launch (its Launched=Unknown written) is retried a second later, not at once. */
static const struct kp_workqueue_options lifecycle_queue = {
    .backoff_base_usec = 1000000ULL,
    .backoff_cap_usec = 60 * 1000000ULL,
};

int kp_lifecycle_controller_new(const struct kp_core_env *env, struct kp_lifecycle_controller **ret)
{
    struct kp_lifecycle_controller *ctl = NULL;
    struct kp_controller_opts co = {0};
    int r;

    if (!env || !env->client || !env->informers || !env->provider || !env->provider->ops || !ret)
        return -EINVAL;
    if (!(ctl = kp_calloc(1, sizeof(*ctl))))
        return -ENOMEM;
    ctl->env = env;
    ctl->timing = env->timing;
    kp_core_timing_defaults(&ctl->timing);
    if ((r = pthread_mutex_init(&ctl->mu, NULL)) != 0) {
        kp_free(ctl);
        return -r;
    }
    if ((r = kp_map_new(&ctl->cache)) < 0 || (r = kp_map_new(&ctl->deleted)) < 0)
        goto out;
    if ((r = kp_informers_nodeclaims(env->informers, &ctl->nodeclaims)) < 0 ||
        (r = kp_informers_nodes(env->informers, &ctl->nodes)) < 0)
        goto out;
    co.name = "nodeclaim.lifecycle";
    co.group = "karpenter.sh";
    co.kind = "NodeClaim";
    co.client = env->client;
    co.reconcile = reconcile_fn;
    co.ctx = ctl;
    co.workers = env->workers ? env->workers : KP_LIFECYCLE_WORKERS_DEFAULT;
    co.parent = env->parent;
    co.timeout_usec = ctl->timing.launch_timeout_usec + RECONCILE_MARGIN_USEC;
    co.queue = &lifecycle_queue;
    co.events = env->events;
    co.events_component = KP_LIFECYCLE_COMPONENT;
    if ((r = kp_controller_new(&co, &ctl->base)) < 0)
        goto out;
    ctl->rec = kp_controller_reconciler(ctl->base);
    if ((r = kp_controller_add_index(ctl->base, ctl->nodeclaims, KP_INDEX_NODECLAIM_PROVIDER_ID,
                                     kp_index_nodeclaim_provider_id)) < 0 ||
        (r = kp_controller_add_index(ctl->base, ctl->nodes, KP_INDEX_NODE_PROVIDER_ID,
                                     kp_index_node_provider_id)) < 0)
        goto out;
    if ((r = kp_controller_watch_keys(ctl->base, ctl->nodeclaims)) < 0 ||
        (r = kp_controller_watch(ctl->base, ctl->nodes,
                                 &(struct kp_informer_handler){.on_add = on_node_add,
                                                               .on_update = on_node_update,
                                                               .on_delete = on_node_add,
                                                               .ctx = ctl})) < 0)
        goto out;
    if (env->provider->ops->watch_progress) {
        if ((r = env->provider->ops->watch_progress(env->provider->self, on_progress, ctl)) < 0)
            goto out;
        ctl->watching = true;
    }
    *ret = ctl;
    ctl = NULL;
    r = 0;
out:
    kp_lifecycle_controller_free(ctl);
    return r;
}

int kp_lifecycle_controller_start(struct kp_lifecycle_controller *ctl)
{
    return ctl ? kp_controller_start(ctl->base) : -EINVAL;
}

void kp_lifecycle_controller_stop(struct kp_lifecycle_controller *ctl)
{
    if (ctl)
        kp_controller_stop(ctl->base);
}

void kp_lifecycle_controller_on_outcome(struct kp_lifecycle_controller *ctl,
                                        kp_lifecycle_outcome_fn fn, void *ctx)
{
    ctl->outcome = fn;
    ctl->outcome_ctx = ctx;
}

bool kp_lifecycle_controller_ready(struct kp_lifecycle_controller *ctl)
{
    return ctl && kp_controller_ready(ctl->base);
}

struct kp_lifecycle_controller *kp_lifecycle_controller_free(struct kp_lifecycle_controller *ctl)
{
    const char *key;
    void *value;
    size_t it = 0;

    if (!ctl)
        return NULL;
    if (ctl->watching)
        ctl->env->provider->ops->unwatch_progress(ctl->env->provider->self, ctl);
    ctl->base = kp_controller_free(ctl->base);
    while (ctl->cache && kp_map_next(ctl->cache, &it, &key, &value))
        cached_free(value);
    ctl->cache = kp_map_free(ctl->cache);
    it = 0;
    while (ctl->deleted && kp_map_next(ctl->deleted, &it, &key, &value))
        kp_free(value);
    ctl->deleted = kp_map_free(ctl->deleted);
    pthread_mutex_destroy(&ctl->mu);
    kp_free(ctl);
    return NULL;
}

/* --- reconcile: the actions -------------------------------------------------------------------- */

static struct kp_events *events(struct kp_lifecycle_controller *ctl)
{
    return ctl->env->events ? ctl->env->events : kp_controller_events(ctl->base);
}

static void emit(struct kp_lifecycle_controller *ctl, const struct kp_nodeclaim_view *nc,
                 enum kp_event_type type, const char *reason, const char *note)
{
    struct kp_events *ev = events(ctl);
    const struct kp_event_ref ref = {.kind = "NodeClaim",
                                     .api_version = "karpenter.sh/v1",
                                     .name = nc->e.name,
                                     .uid = nc->e.uid};

    /* A dropped event is counted by the recorder; the conditions are the record that matters. */
    if (ev)
        (void)kp_events_emit(ev, &ref, type, reason, /* action= */ "Lifecycle", note);
}

static void report(struct kp_lifecycle_controller *ctl, const struct kp_nodeclaim_view *nc,
                   bool registered)
{
    const struct kp_condition *l = kp_conditions_get(&nc->conditions, KP_NC_COND_LAUNCHED);
    struct kp_lifecycle_outcome o = {.nodeclaim = nc->e.name,
                                     .nodepool = nc->nodepool,
                                     .registered = registered,
                                     .launched = l && l->status == KP_COND_TRUE};

    if (!ctl->outcome)
        return;
    for (size_t i = 0; i < nc->meta.owners.n; i++)
        if (kp_streq(nc->meta.owners.v[i].kind, "NodePool") &&
            kp_streq(nc->meta.owners.v[i].name, nc->nodepool))
            o.nodepool_uid = nc->meta.owners.v[i].uid;
    if (!registered && !o.launched && l) {
        o.reason = l->reason;
        o.message = l->message;
    }
    ctl->outcome(ctl->outcome_ctx, &o);
}

static const char *label(const struct kp_nodeclaim_view *nc, const char *key)
{
    const char *v = kp_labels_get(&nc->meta.labels, key);

    return v ? v : "";
}

static void count_disrupted(struct kp_lifecycle_controller *ctl, const struct kp_nodeclaim_view *nc,
                            const char *reason)
{
    kp_core_count_disrupted(ctl->env->observer, nc, reason);
}

/* A merge patch of the NodeClaim (sub "status" or NULL) with the precondition rv; with ret_e,
 * the server's answer projected (the next write's resourceVersion). */
static int patch_claim(struct kp_client *c, const char *name, const char *sub, const char *rv,
                       json_t *body, struct kp_entry **ret_e)
{
    struct kp_error err = KP_ERROR_INIT;
    json_t *obj = NULL;
    int r;

    if (!rv || !*rv)
        return -EINVAL;
    if ((r = kp_json_patch_set_str(body, KP_JSON_PATH("metadata", "resourceVersion"), rv)) < 0)
        return r;
    r = kp_client_patch(c, &KP_RES_NODECLAIM, NULL, name, sub, KP_PATCH_MERGE, body,
                        ret_e ? &obj : NULL, &err);
    if (r < 0 && r != -KP_ECONFLICT && err.message)
        kp_log_debug("nodeclaim write refused", KP_LF("detail", err.message));
    kp_error_done(&err);
    if (r >= 0 && ret_e)
        r = kp_nodeclaim_project(obj, ret_e);
    kp_json_unref(obj);
    return r;
}

static int write_finalizer(struct kp_client *c, const struct kp_nodeclaim_view *nc, bool add,
                           struct kp_entry **ret_e)
{
    json_t *body = NULL;
    int r;

    if ((r = kp_json_patch_new(&body)) < 0)
        return r;
    if ((r = kp_patch_finalizers(body, nc->finalizers, nc->n_finalizers, KP_CORE_FINALIZER, add)) >=
        0)
        r = patch_claim(c, nc->e.name, NULL, nc->e.rv, body, ret_e);
    kp_json_unref(body);
    return r;
}

static int write_tgp(struct kp_lifecycle_controller *ctl, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, int64_t deadline, struct kp_entry **ret_e)
{
    char when[KP_RFC3339_STRMAX], note[128];
    json_t *body = NULL;
    int r;

    if ((r = kp_rfc3339_format(deadline, KP_RFC3339_SECONDS, when, sizeof(when))) < 0 ||
        (r = kp_json_patch_new(&body)) < 0)
        return r;
    r = kp_json_patch_set_str(
        body, KP_JSON_PATH("metadata", "annotations", KP_CORE_ANN_TERMINATION_TIMESTAMP), when);
    if (r >= 0)
        r = patch_claim(c, nc->e.name, NULL, nc->e.rv, body, ret_e);
    kp_json_unref(body);
    if (r < 0)
        return r;
    kp_log_info("annotated nodeclaim", KP_LF(KP_CORE_ANN_TERMINATION_TIMESTAMP, when));
    (void)snprintf(note, sizeof(note), "All pods will be deleted by %s", when);
    emit(ctl, nc, KP_EVENT_WARNING, KP_LIFECYCLE_EVENT_TGP_EXPIRING, note);
    return 0;
}

static int sync_node(struct kp_lifecycle_controller *ctl, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc,
                     const struct kp_provider_instance *launched,
                     const struct kp_lifecycle_action *a)
{
    char *msg = NULL;
    json_t *body = NULL;
    int r;

    if (a->taint_missing) {
        kp_log_error("node claim registration error", KP_LF("Node", a->node->e.name),
                     KP_LF("taint", KP_CORE_TAINT_UNREGISTERED),
                     KP_LF("error", "missing taint prevents registration-related race "
                                    "conditions on Karpenter-managed nodes"));
        emit(ctl, nc, KP_EVENT_WARNING, KP_LIFECYCLE_EVENT_UNREGISTERED_TAINT_MISSING,
             "Missing " KP_CORE_TAINT_UNREGISTERED " taint which prevents registration related "
             "race conditions on Karpenter-managed nodes");
    }
    if ((r = kp_lifecycle_node_patch(nc, launched, a->node, &body)) < 0)
        return r;
    r = kp_patch_cas(c, &KP_RES_NODE, NULL, a->node->e.name, NULL, a->node->e.rv, body, &msg);
    if (r < 0 && r != -KP_ECONFLICT)
        kp_log_debug("node write refused", KP_LF("Node", a->node->e.name),
                     KP_LF("detail", msg ? msg : ""));
    kp_free(msg);
    kp_json_unref(body);
    return r;
}

static int label_initialized(struct kp_client *c, const struct kp_node_view *node)
{
    struct kp_error err = KP_ERROR_INIT;
    json_t *body = NULL;
    int r;

    if ((r = kp_json_patch_new(&body)) < 0)
        return r;
    /* Adding one label cannot lose anyone's write: no precondition, as in Karpenter. */
    if ((r = kp_json_patch_set_str(
             body, KP_JSON_PATH("metadata", "labels", KP_CORE_LABEL_INITIALIZED), "true")) >= 0)
        r = kp_client_patch(c, &KP_RES_NODE, NULL, node->e.name, NULL, KP_PATCH_MERGE, body,
                            /* ret_obj= */ NULL, &err);
    kp_error_done(&err);
    kp_json_unref(body);
    return r;
}

/* Deletes the NodeClaim for a planned reason (uid precondition) and counts it. */
static int delete_claim(struct kp_lifecycle_controller *ctl, struct kp_client *c,
                        const struct kp_nodeclaim_view *nc, const struct kp_lifecycle_action *a,
                        const struct kp_provider_err *create_err)
{
    char *msg = NULL, *note = NULL, *cut = NULL;
    /* A launch the provider refused (capacity, node class), else a liveness timeout (which
     * may follow a failed launch too). */
    bool refused = create_err && (kp_streq(a->reason, KP_CM_REASON_INSUFFICIENT_CAPACITY) ||
                                  kp_streq(a->reason, KP_CM_REASON_NODECLASS_NOT_READY));
    int r;

    if (refused) {
        kp_log_error("failed launching nodeclaim",
                     KP_LF("error", create_err->message ? create_err->message : ""),
                     KP_LF("reason", kp_provider_err_kind_name(create_err->kind)));
        if (create_err->kind == KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY) {
            cut = kp_lifecycle_truncate(create_err->message ? create_err->message
                                                            : "insufficient capacity");
            note = cut ? kp_strjoin("NodeClaim ", nc->e.name, " event: ", cut, (const char *)NULL)
                       : NULL;
            if (note)
                emit(ctl, nc, KP_EVENT_WARNING, KP_LIFECYCLE_EVENT_INSUFFICIENT_CAPACITY, note);
        }
    }
    r = kp_delete_uid(c, &KP_RES_NODECLAIM, NULL, nc->e.name, nc->e.uid, &msg);
    if (r == -ENOENT) {
        r = 0; /* deleted meanwhile, not by us: not counted (Karpenter ignores NotFound first) */
    } else if (r == 0) {
        held_put(ctl, nc->e.uid, (int64_t)kp_core_now(ctl->env));
        if (!refused) {
            kp_log_info("terminating due to timeout", KP_LF("reason", a->reason));
            report(ctl, nc, /* registered= */ false);
        }
        count_disrupted(ctl, nc, a->reason);
    } else if (r != -KP_ECONFLICT) {
        kp_log_debug("nodeclaim delete refused", KP_LF("detail", msg ? msg : ""));
    }
    kp_free(msg);
    kp_free(note);
    kp_free(cut);
    return r;
}

static int delete_nodes(struct kp_client *c, const struct kp_lifecycle_in *in)
{
    int first = 0;

    for (size_t i = 0; i < in->n_nodes; i++) {
        const struct kp_node_view *n = in->nodes[i];
        char *msg = NULL;
        int r;

        if (n->meta.deletion_usec != 0)
            continue;
        /* The Node's own termination (its finalizer: drain, then the instance) takes it from
         * here; the NodeClaim waits for it to be gone. */
        r = kp_delete_uid(c, &KP_RES_NODE, NULL, n->e.name, n->e.uid, &msg);
        if (r == -ENOENT)
            r = 0; /* already gone: as deleted */
        if (r == 0)
            kp_log_info("deleting node", KP_LF("Node", n->e.name));
        else if (!first)
            first = r;
        kp_free(msg);
    }
    return first;
}

static int write_status(struct kp_lifecycle_controller *ctl, struct kp_client *c,
                        const struct kp_nodeclaim_view *nc, const struct kp_lifecycle_action *a,
                        const struct kp_provider_instance *launched)
{
    struct kp_entry *fresh = NULL;
    json_t *meta = NULL, *body = NULL;
    const char *rv = nc->e.rv;
    int r;

    /* The launch's labels and annotations live in metadata, a separate write before the status
     * (the status subresource ignores metadata but for the precondition). */
    if (a->write_launch && launched) {
        if ((r = kp_lifecycle_launch_patch(nc, launched, &meta)) < 0)
            goto out;
        if (meta) {
            if ((r = patch_claim(c, nc->e.name, NULL, rv, meta, &fresh)) < 0)
                goto out;
            rv = fresh->rv;
        }
    }
    if ((r = kp_lifecycle_status_patch(a, launched, &body)) < 0 ||
        (r = patch_claim(c, nc->e.name, "status", rv, body, NULL)) < 0)
        goto out;
    if (a->registered_now) {
        kp_log_info("registered nodeclaim", KP_LF("Node", a->node_name ? a->node_name : ""));
        kp_core_count(ctl->env->observer, KP_CM_NODES_CREATED,
                      KP_CM_LABELS(label(nc, KP_CORE_LABEL_NODEPOOL), label(nc, KP_LABEL_ZONE)));
        report(ctl, nc, /* registered= */ true);
    }
    if (a->initialized_now)
        kp_log_info("initialized nodeclaim", KP_LF("Node", nc->node_name ? nc->node_name : ""));
out:
    kp_json_unref(meta);
    kp_json_unref(body);
    kp_entry_unref(fresh);
    return r;
}

static int remove_finalizer(struct kp_lifecycle_controller *ctl, struct kp_client *c,
                            const struct kp_nodeclaim_view *nc, int64_t now, int64_t instance_since)
{
    const char *np = label(nc, KP_CORE_LABEL_NODEPOOL);
    const struct kp_condition *term =
        kp_conditions_get(&nc->conditions, KP_NC_COND_INSTANCE_TERMINATING);
    int r;

    if ((r = write_finalizer(c, nc, /* add= */ false, NULL)) < 0)
        return r == -ENOENT ? 0 : r;
    if (term && term->status == KP_COND_TRUE && term->last_transition_usec > 0)
        instance_since = term->last_transition_usec;
    if (instance_since > 0 && now >= instance_since)
        kp_core_observe(ctl->env->observer, KP_CM_NODECLAIMS_INSTANCE_TERMINATION_DURATION,
                        KP_CM_LABELS(np), (double)(now - instance_since) / 1e6);
    kp_log_info("deleted nodeclaim");
    if (now >= nc->meta.deletion_usec)
        kp_core_observe(ctl->env->observer, KP_CM_NODECLAIMS_TERMINATION_DURATION, KP_CM_LABELS(np),
                        (double)(now - nc->meta.deletion_usec) / 1e6);
    kp_core_count(ctl->env->observer, KP_CM_NODECLAIMS_TERMINATED,
                  KP_CM_LABELS(np, label(nc, KP_LABEL_CAPACITY_TYPE), label(nc, KP_LABEL_ZONE)));
    cache_drop(ctl, nc->e.uid);
    return 0;
}

/* The Nodes with providerID pid, as views into l (which holds the references). */
/* Whether node is owned by a NodeClaim other than the one with uid: the registration sync
 * writes that ownerReference. A providerID names a host, not a claim: a host released by one
 * NodeClaim's termination can be claimed by the next while the old Node still waits for its
 * finalizer, and the two Nodes then share the providerID. */
static bool owned_by_another(const struct kp_node_view *node, const char *uid)
{
    for (size_t i = 0; i < node->meta.owners.n; i++) {
        const struct kp_owner_ref *o = &node->meta.owners.v[i];

        if (kp_streq(o->kind, "NodeClaim") && o->uid && uid && !kp_streq(o->uid, uid))
            return true;
    }
    return false;
}

/* The Nodes with providerID pid that are not another NodeClaim's (owned_by_another): views into
 * l's entries in *ret_v (NULL when none), their count in *ret_n. For a claim being deleted
 * (deleted_at, the API server's deletionTimestamp; 0: not deleting), a Node the API server
 * created after that is not its: a providerID names a host, and once this claim's leave has
 * released the host, the next claim's join registers a Node with the same providerID before
 * the next claim has marked it as its own. Deleting that Node would strand the next claim. */
static int lookup_nodes(struct kp_lifecycle_controller *ctl, const char *pid, const char *uid,
                        int64_t deleted_at, struct kp_store_list *l,
                        const struct kp_node_view ***ret_v, size_t *ret_n)
{
    const struct kp_node_view **v = NULL;
    size_t n = 0;
    int r;

    kp_store_list_free(l);
    *ret_v = NULL;
    *ret_n = 0;
    if (!pid)
        return 0;
    r = kp_store_by_index(kp_informer_store(ctl->nodes), KP_INDEX_NODE_PROVIDER_ID, pid, l);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    if (l->n > 0 && !(v = kp_calloc(l->n, sizeof(*v))))
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        const struct kp_node_view *node = kp_node_view(l->v[i]);

        if (owned_by_another(node, uid) || (deleted_at && node->meta.creation_usec > deleted_at))
            continue;
        v[n++] = node;
    }
    *ret_v = v;
    *ret_n = n;
    return 0;
}

/* --- reconcile ------------------------------------------------------------------------------- */

int kp_lifecycle_reconcile(struct kp_lifecycle_controller *ctl, struct kp_client *c,
                           const struct kp_ctx *cx, const char *name, uint64_t *ret_requeue_usec)
{
    struct kp_entry *e = NULL, *fresh = NULL, *next = NULL;
    struct kp_store_list nodes = {0};
    const struct kp_node_view **nv = NULL, **nv_in = NULL; /* nv_in: what in.nodes is */
    struct kp_provider_instance made = {0};
    struct kp_provider_err perr = KP_PROVIDER_ERR_INIT;
    struct kp_lifecycle_action a = {0};
    struct kp_lifecycle_in in = {0};
    const struct kp_nodeclaim_view *nc;
    const struct kp_condition *launched_cond;
    const struct kp_provider *p = ctl->env->provider;
    bool have_made = false;
    size_t n_nodes = 0;
    int64_t now = (int64_t)kp_core_now(ctl->env), instance_since = 0;
    struct kp_ctx launch_cx;
    int r, create_r = 0;

    *ret_requeue_usec = 0;
    r = kp_store_get(kp_informer_store(ctl->nodeclaims), name, &e);
    if (r == -ENOENT)
        return 0; /* gone; a cached launch of it expires with the cache's TTL */
    if (r < 0)
        return r;
    nc = kp_nodeclaim_view(e);
    if (!managed(ctl, nc))
        goto out;
    if (claim_held(ctl, nc->e.uid, nc->meta.deletion_usec != 0, now)) {
        *ret_requeue_usec = USEC_PER_SEC; /* deleted by us; the cache will say so shortly */
        goto out;
    }
    launched_cond = kp_conditions_get(&nc->conditions, KP_NC_COND_LAUNCHED);
    if (launched_cond && launched_cond->status == KP_COND_TRUE) {
        cache_drop(ctl, nc->e.uid); /* the status holds the launch now */
    } else {
        r = cache_get(ctl, nc->e.uid, now, &made);
        if (r < 0 && r != -ENOENT)
            goto out;
        have_made = r == 0;
    }
    r = 0;
    in.timing = &ctl->timing;
    in.now_usec = now;
    for (int step = 0; step < MAX_STEPS; step++) {
        in.nc = nc;
        in.launched = have_made ? &made : NULL;
        /* A deleting claim's Nodes are those of its written providerID (Karpenter's). */
        if ((r = lookup_nodes(ctl,
                              nc->meta.deletion_usec ? nc->provider_id
                                                     : kp_lifecycle_provider_id(nc, in.launched),
                              nc->e.uid, nc->meta.deletion_usec, &nodes, &nv, &n_nodes)) < 0)
            goto out;
        kp_free(nv_in);
        nv_in = nv;
        nv = NULL;
        in.nodes = nv_in;
        in.n_nodes = nv_in ? n_nodes : 0;
        kp_lifecycle_action_done(&a);
        if ((r = kp_lifecycle_plan(&in, &a)) < 0)
            goto out;
        kp_log_debug("nodeclaim lifecycle step", KP_LF("action", kp_lc_verb_name(a.verb)));
        switch (a.verb) {
        case KP_LC_NONE:
        case KP_LC_WAIT_NODES:
            *ret_requeue_usec = a.requeue_usec;
            goto out;
        case KP_LC_ADD_FINALIZER:
            /* Go on from the server's answer: its resourceVersion is what the next write
             * needs, and the cache may not have it yet. */
            if ((r = write_finalizer(c, nc, /* add= */ true, &next)) < 0)
                goto out;
            kp_entry_unref(fresh);
            fresh = next;
            next = NULL;
            nc = kp_nodeclaim_view(fresh);
            continue;
        case KP_LC_LAUNCH:
            /* Nothing new starts on a context that is done (stop, SIGTERM, the deadline). */
            if ((r = kp_ctx_err(cx)) < 0)
                goto out;
            kp_ctx_init(&launch_cx, cx, kp_deadline_in(a.launch_budget_usec));
            create_r = p->ops->create(p->self, &launch_cx, c, nc, &made, &perr);
            if (create_r == 0) {
                have_made = true;
                kp_log_info(
                    "launched nodeclaim",
                    KP_LF("provider-id", made.provider_id ? made.provider_id : ""),
                    KP_LF("instance-type", made.instance_type ? made.instance_type : ""),
                    KP_LF("zone",
                          kp_provider_kv_get(made.labels, made.n_labels, KP_LABEL_ZONE)
                              ? kp_provider_kv_get(made.labels, made.n_labels, KP_LABEL_ZONE)
                              : ""),
                    KP_LF(
                        "capacity-type",
                        kp_provider_kv_get(made.labels, made.n_labels, KP_LABEL_CAPACITY_TYPE)
                            ? kp_provider_kv_get(made.labels, made.n_labels, KP_LABEL_CAPACITY_TYPE)
                            : ""));
                /* Remembered before anything else can fail: the status write may not make it. */
                if ((r = cache_put(ctl, nc->e.uid, now, &made)) < 0)
                    goto out;
                continue;
            }
            /* A launch going on on the provider's threads: nothing to decide until it ends,
             * which enqueues this key (watch_progress); the poll covers a lost notice. */
            if (perr.kind == KP_PROVIDER_ERR_IN_PROGRESS) {
                *ret_requeue_usec = KP_PROVIDER_PROGRESS_POLL_USEC;
                r = 0;
                goto out;
            }
            /* A launch cancelled (stop, SIGTERM, a lost Lease) decided nothing: write nothing,
             * so the next leader resumes it. One that ran out of the reconcile's deadline is a
             * failed launch like any other: Launched=Unknown is written, so the launch timeout
             * runs (a launch that never returns must not be retried forever). */
            if (create_r == -ECANCELED || kp_ctx_err(cx) == -ECANCELED) {
                r = create_r;
                goto out;
            }
            if (perr.kind == KP_PROVIDER_ERR_NONE)
                perr.kind = KP_PROVIDER_ERR_RETRYABLE;
            in.create_err = &perr;
            continue;
        case KP_LC_DELETE:
            r = delete_claim(ctl, c, nc, &a, in.create_err);
            goto out;
        case KP_LC_SYNC_NODE:
            if ((r = sync_node(ctl, c, nc, in.launched, &a)) < 0)
                goto out;
            in.node_synced = true;
            continue;
        case KP_LC_LABEL_INITIALIZED:
            if ((r = label_initialized(c, a.node)) < 0)
                goto out;
            in.node_labeled = true;
            continue;
        case KP_LC_WRITE_STATUS:
            if ((r = write_status(ctl, c, nc, &a, in.launched)) < 0)
                goto out;
            *ret_requeue_usec = a.requeue_usec;
            if (a.launch_failed)
                r = create_r < 0 ? create_r : -EAGAIN; /* retried with the key's backoff */
            goto out;
        case KP_LC_ANNOTATE_TGP:
            if ((r = write_tgp(ctl, c, nc, a.tgp_deadline_usec, &next)) < 0)
                goto out;
            kp_entry_unref(fresh);
            fresh = next;
            next = NULL;
            nc = kp_nodeclaim_view(fresh);
            continue;
        case KP_LC_DELETE_NODES:
            r = delete_nodes(c, &in);
            *ret_requeue_usec = a.requeue_usec;
            goto out;
        case KP_LC_DELETE_INSTANCE: {
            int d;

            if ((r = kp_ctx_err(cx)) < 0)
                goto out;
            if (!instance_since)
                instance_since = (int64_t)kp_core_now(ctl->env);
            kp_provider_err_done(&perr);
            d = p->ops->delete (p->self, cx, c, nc, &perr);
            if (d == 0 || perr.kind == KP_PROVIDER_ERR_IN_PROGRESS) {
                in.instance = KP_LC_INSTANCE_TERMINATING;
            } else if (perr.kind == KP_PROVIDER_ERR_NOT_FOUND || d == -ENOENT) {
                in.instance = KP_LC_INSTANCE_GONE;
            } else {
                *ret_requeue_usec = ctl->timing.delete_retry_usec;
                r = d;
                goto out;
            }
            continue;
        }
        case KP_LC_REMOVE_FINALIZER:
            r = remove_finalizer(ctl, c, nc, (int64_t)kp_core_now(ctl->env), instance_since);
            goto out;
        }
    }
    /* Every path above ends in a write or a wait well within MAX_STEPS; getting here means the
     * plan and the executor disagree, which must not spin. */
    kp_log_error("nodeclaim lifecycle did not settle", KP_LF("action", kp_lc_verb_name(a.verb)));
    r = -ELOOP;
out:
    kp_lifecycle_action_done(&a);
    kp_free(nv_in);
    kp_free(nv);
    kp_store_list_free(&nodes);
    kp_provider_err_done(&perr);
    kp_provider_instance_done(&made);
    kp_entry_unref(next);
    kp_entry_unref(fresh);
    kp_entry_unref(e);
    return r;
}
