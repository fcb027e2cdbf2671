/* core/termination/termination.c: Karpenter's Node termination controller (termination.h).
 *
 * DESIGN
 *
 * What: the finalizer of a managed Node, upstream's pkg/controllers/node/termination: cascade
 * to the NodeClaim, the fast path for a machine that is already gone, taint, drain, wait for
 * volume detachment, release the machine through the provider, then let the Node go. The
 * semantics are upstream's to the reason string; only the shape is ours.
 *
 * How: kp_termination_plan() is a pure function of the Node, its NodeClaim, the pods and
 * VolumeAttachments the caches hold for it, the clock, and the answers the current reconcile
 * has collected. It walks the steps in order and returns the first thing to do. Asking the
 * provider (Get, Delete), calling the drainer, deleting the NodeClaim and tainting are
 * "continue" verbs: the executor does them, notes the answer in the input and asks the plan
 * again, so one reconcile goes as far as upstream's does (taint, then drain in the same pass).
 * The other verbs end the reconcile: WAIT (requeue after a delay), FAIL, REMOVE_FINALIZER.
 * Each carries the NodeClaim conditions the walk produced (Drained, VolumesDetached,
 * InstanceTerminating); the executor writes them in one CAS status patch before it does the
 * verb, as upstream patches the NodeClaim before it removes the finalizer. A continue verb that
 * fails still writes what the walk produced up to it (upstream patches, then returns the error).
 *
 * Why: every transition is then a table test of the plan (tests/unit/test-termination.c), and
 * the executor stays a switch over verbs with one write each.
 *
 * Order of release (EKS Hybrid Nodes, SSH hosts): the finalizer is removed only by
 * REMOVE_FINALIZER, which the plan returns after the provider's Delete answered NOT_FOUND (or,
 * without a NodeClaim, when there is nothing the provider could release; or on the fast path,
 * when the provider already says the machine is gone). A Delete that returned 0 is "releasing"
 * (for SSH: the leave script ran) and is asked again after delete_retry; only its NOT_FOUND ends
 * the wait. So the Node object, which is what the cluster counts and bills, outlives the
 * machine's kubelet.
 *
 * Races: every write is a CAS (core/writes.h): the taint and the finalizer patches carry the
 * Node's cached resourceVersion, the condition write the NodeClaim's, the cascade delete the
 * NodeClaim's uid. A lost race returns -KP_ECONFLICT and the reconciler brings the key back
 * to decide on the newer cache. The taint and the finalizer lists are whole-list merge patches
 * built from the cached lists, which the CAS keeps safe.
 *
 * Known differences from upstream: the taint patch rebuilds spec.taints from the projection,
 * which does not keep timeAdded (a NoExecute taint's informational timestamp is dropped by the
 * rewrite). Karpenter sleeps a second after its status patch to read its own writes; the CAS
 * on the cached resourceVersion gives the same protection against double counting.
 *
 * Threads: reconciles on the workers (k8s/reconciler.h: one key at a time), each with its own
 * client; the informer handler only enqueues. Everything shared (env, stores, drainer,
 * recorder, observer) is immutable or thread-safe. Logging: this file logs "tainted node" and
 * "deleted node" as Karpenter does, once per transition. */
#include "core/termination/termination.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "k8s/reconciler.h"
#include "k8s/rfc3339.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"
#include "core/conds.h"
#include "core/gc/gc.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/writes.h"

#define USEC_PER_SEC_F 1000000.0

/* The longest a termination reconcile may run: well above the leave phases profiles set. */
#define TERMINATION_RECONCILE_TIMEOUT_USEC (65 * 60 * 1000000ULL)
/* At most this many VolumeAttachment names in the event note (upstream's pretty.Slice 5). */
#define VA_NAMES_MAX 5
/* Continue verbs per reconcile are at most one each (5); a few more is a bug's guard. */
#define PLAN_ROUNDS_MAX 8

/* --- the decision ------------------------------------------------------------------------- */

static bool has_finalizer(const struct kp_node_view *n)
{
    return kp_strs_has(n->finalizers, n->n_finalizers, KP_CORE_FINALIZER);
}

bool kp_termination_needs_taint(const struct kp_node_view *node)
{
    const char *lb = kp_labels_get(&node->meta.labels, KP_CORE_LABEL_EXCLUDE_LB);
    bool tainted = false;

    for (size_t i = 0; i < node->taints.n && !tainted; i++)
        tainted = strcmp(node->taints.v[i].key, KP_CORE_TAINT_DISRUPTED) == 0 &&
                  node->taints.v[i].effect == KP_TAINT_NO_SCHEDULE;
    return !tainted || !lb || strcmp(lb, KP_TERM_LB_EXCLUDE_VALUE) != 0;
}

static void add_cond(struct kp_term_action *a, const char *type, enum kp_cond_status st,
                     const char *reason, const char *message)
{
    /* Later steps set each type at most once per walk; a repeat replaces. */
    for (size_t i = 0; i < a->n_conds; i++)
        if (strcmp(a->conds[i].type, type) == 0) {
            a->conds[i].status = st;
            a->conds[i].reason = reason;
            a->conds[i].message = message;
            return;
        }
    if (a->n_conds < KP_ARRAY_SIZE(a->conds)) {
        a->conds[a->n_conds].type = type;
        a->conds[a->n_conds].status = st;
        a->conds[a->n_conds].reason = reason;
        a->conds[a->n_conds].message = message;
        a->n_conds++;
    }
}

static struct kp_term_event *add_event(struct kp_term_action *a, bool warning, const char *reason)
{
    struct kp_term_event *ev;

    if (a->n_events >= KP_ARRAY_SIZE(a->events))
        return NULL;
    ev = &a->events[a->n_events++];
    ev->warning = warning;
    ev->reason = reason;
    ev->note[0] = '\0';
    return ev;
}

static void verb(struct kp_term_action *a, enum kp_term_verb v, const char *why)
{
    a->verb = v;
    a->why = why;
}

static void wait_for(struct kp_term_action *a, uint64_t usec, const char *why)
{
    verb(a, KP_TERM_WAIT, why);
    a->requeue_usec = usec;
}

static bool pv_skipped(const struct kp_term_in *in, const char *pv)
{
    for (size_t i = 0; i < in->n_skip_pvs; i++)
        if (in->skip_pvs[i] && strcmp(in->skip_pvs[i], pv) == 0)
            return true;
    return false;
}

/* The attachment blocks termination: it names a PV (an inline volume does not block, as
 * upstream) that is not a non-drainable pod's. */
static bool va_blocks(const struct kp_term_in *in, const struct kp_volumeattachment_view *va)
{
    return va && va->pv_name && !pv_skipped(in, va->pv_name);
}

/* "Awaiting deletion of bound volumeattachments (a, b and 2 other(s))". */
static void va_note(const struct kp_term_in *in, size_t blocking, char *buf, size_t size)
{
    size_t used, shown = 0;
    int n = snprintf(buf, size, "Awaiting deletion of bound volumeattachments (");

    used = n > 0 && (size_t)n < size ? (size_t)n : 0;
    for (size_t i = 0; i < in->n_attachments && used < size; i++) {
        const struct kp_volumeattachment_view *va = in->attachments[i];

        if (!va_blocks(in, va))
            continue;
        if (shown == VA_NAMES_MAX) {
            n = snprintf(buf + used, size - used, " and %zu other(s)", blocking - shown);
            used += n > 0 ? (size_t)n : 0;
            break;
        }
        n = snprintf(buf + used, size - used, "%s%s", shown ? ", " : "", va->e.name);
        used += n > 0 ? (size_t)n : 0;
        shown++;
    }
    if (used < size)
        (void)snprintf(buf + used, size - used, ")");
}

/* Steps 5 and later, once the Node is tainted. */
static void plan_drained(const struct kp_term_in *in, const struct kp_core_timing *t,
                         struct kp_term_action *a)
{
    const struct kp_nodeclaim_view *nc = in->nodeclaim;
    const struct kp_condition *drained =
        nc ? kp_conditions_get(&nc->conditions, KP_NC_COND_DRAINED) : NULL;
    struct kp_term_event *ev;
    size_t blocking = 0;

    /* 5. Drain. Draining starts the clock of the minimum drain time (its transition time). */
    if (nc && !drained)
        add_cond(a, KP_NC_COND_DRAINED, KP_COND_UNKNOWN, KP_TERM_REASON_DRAINING,
                 KP_TERM_REASON_DRAINING);
    if (!in->drain) {
        verb(a, KP_TERM_DRAIN, "drain");
        return;
    }
    if (!in->drain->drained) {
        if ((ev = add_event(a, true, KP_TERM_EVENT_FAILED_DRAINING)))
            (void)snprintf(ev->note, sizeof(ev->note), "Failed to drain node, %s",
                           in->drain->message);
        wait_for(a, t->drain_retry_usec, "draining");
        return;
    }
    /* Pods the scheduler bound just before it saw the taint are caught by waiting a little
     * after Draining began, even when the Node looked empty at once. */
    if (nc &&
        (!drained || (drained->status == KP_COND_UNKNOWN &&
                      in->now_usec - drained->last_transition_usec < (int64_t)t->min_drain_usec))) {
        wait_for(a, t->drain_retry_usec, "minimum drain time");
        return;
    }
    if (nc)
        add_cond(a, KP_NC_COND_DRAINED, KP_COND_TRUE, KP_NC_COND_DRAINED, "");

    /* 6. Volume detachment (Karpenter never detaches; the attach-detach controller does). */
    for (size_t i = 0; i < in->n_attachments; i++)
        blocking += va_blocks(in, in->attachments[i]);
    if (blocking == 0) {
        if (nc)
            add_cond(a, KP_NC_COND_VOLUMES_DETACHED, KP_COND_TRUE, KP_NC_COND_VOLUMES_DETACHED, "");
    } else if (!a->deadline_usec || in->now_usec <= a->deadline_usec) {
        if ((ev = add_event(a, false, KP_TERM_EVENT_AWAITING_VOLUMES)))
            va_note(in, blocking, ev->note, sizeof(ev->note));
        if (nc)
            add_cond(a, KP_NC_COND_VOLUMES_DETACHED, KP_COND_UNKNOWN,
                     KP_TERM_REASON_AWAITING_VOLUMES, KP_TERM_REASON_AWAITING_VOLUMES);
        wait_for(a, t->drain_retry_usec, "awaiting volume detachment");
        return;
    } else if (nc) {
        add_cond(a, KP_NC_COND_VOLUMES_DETACHED, KP_COND_FALSE, KP_TERM_REASON_TGP_ELAPSED,
                 KP_TERM_REASON_TGP_ELAPSED);
    }

    /* 7. The machine: Delete until NOT_FOUND. Without a NodeClaim there is nothing to hand
     * the provider (NodeClaim garbage collection owns such machines). */
    if (nc) {
        if (in->deleted == KP_TERM_ASK) {
            verb(a, KP_TERM_DELETE_INSTANCE, "delete instance");
            return;
        }
        add_cond(a, KP_NC_COND_INSTANCE_TERMINATING, KP_COND_TRUE, KP_NC_COND_INSTANCE_TERMINATING,
                 "");
        if (in->deleted != KP_TERM_GONE) {
            wait_for(a, t->delete_retry_usec, "instance terminating");
            return;
        }
    }

    /* 8. Only now may the Node go: its machine is released. */
    verb(a, KP_TERM_REMOVE_FINALIZER, nc ? "instance gone" : "drained, no nodeclaim");
}

void kp_termination_plan(const struct kp_term_in *in, const struct kp_core_timing *t,
                         struct kp_term_action *ret)
{
    const struct kp_node_view *node = in->node;
    const struct kp_nodeclaim_view *nc = in->nodeclaim;
    const char *ts;

    memset(ret, 0, sizeof(*ret));
    if (!node->meta.deletion_usec) {
        verb(ret, KP_TERM_IGNORE, "not deleting");
        return;
    }
    if (!has_finalizer(node)) {
        verb(ret, KP_TERM_IGNORE, "no finalizer");
        return;
    }
    /* Ours: its NodeClaim names a node class the provider serves, or, without a NodeClaim, it
     * carries such a node class's label or a providerID of the provider's own form
     * (karpenter.sh/nodepool and this finalizer alone are on every Karpenter's Nodes: another
     * Karpenter in the cluster owns those). Garbage collection asks the same question. */
    if (nc ? !in->nodeclaim_supported : !in->node_labelled_ours) {
        verb(ret, KP_TERM_IGNORE, "not managed");
        return;
    }

    /* 1. Cascade: deleting the Node deletes its NodeClaim. */
    if (nc && !nc->meta.deletion_usec && !in->nodeclaim_deleted) {
        verb(ret, KP_TERM_DELETE_NODECLAIM, "cascade to nodeclaim");
        return;
    }

    /* 2. A Node whose kubelet is not Ready and whose machine the provider no longer has:
     * nothing to drain or release. A Ready kubelet is proof the machine still runs, whatever
     * the provider says. */
    if (node->ready != KP_COND_TRUE && node->provider_id && *node->provider_id) {
        if (in->instance == KP_TERM_ASK) {
            verb(ret, KP_TERM_GET_INSTANCE, "is the instance gone");
            return;
        }
        if (in->instance == KP_TERM_GONE) {
            verb(ret, KP_TERM_REMOVE_FINALIZER, "instance not found");
            return;
        }
    }

    /* 3. The deadline. The event is repeated every reconcile (the recorder folds repeats). */
    ts = nc ? kp_labels_get(&nc->annotations, KP_CORE_ANN_TERMINATION_TIMESTAMP) : NULL;
    if (ts) {
        struct kp_term_event *ev = add_event(ret, true, KP_TERM_EVENT_TGP_EXPIRING);

        if (ev)
            (void)snprintf(ev->note, sizeof(ev->note), "All pods will be deleted by %s", ts);
        if (kp_rfc3339_parse(ts, strlen(ts), &ret->deadline_usec) < 0) {
            ret->deadline_usec = 0;
            ret->error = -KP_EPARSE;
            verb(ret, KP_TERM_FAIL, "unparsable " KP_CORE_ANN_TERMINATION_TIMESTAMP);
            return;
        }
    }

    /* 4. Taint, so nothing new lands while it drains, and leave the load balancers. */
    if (!in->tainted && kp_termination_needs_taint(node)) {
        verb(ret, KP_TERM_TAINT, "taint");
        return;
    }

    plan_drained(in, t, ret);
}

/* --- the controller ------------------------------------------------------------------------ */

struct kp_termination_controller {
    const struct kp_core_env *env;
    struct kp_core_timing timing;
    const struct kp_drainer *drainer;
    struct kp_evict_drainer *evict; /* the default drainer's state */
    struct kp_drainer evict_view;
    struct kp_controller *base;
    struct kp_reconciler *rec;
    struct kp_store *nodes, *nodeclaims, *pods, *attachments, *pvcs;
    bool watching; /* registered with the provider's watch_progress */
};

/* A NodeClaim change (the termination annotation, its deletion) wakes its Node. */
static void on_claim(void *ctx, const struct kp_entry *e)
{
    struct kp_termination_controller *tc = ctx;
    const struct kp_nodeclaim_view *nc = kp_nodeclaim_view(e);

    if (nc->node_name && *nc->node_name)
        (void)kp_reconciler_enqueue(tc->rec, nc->node_name); /* -ENOMEM: the poll catches up */
}

static void on_claim_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    (void)old_e;
    on_claim(ctx, new_e);
}

/* The provider's work for a NodeClaim ended (watch_progress; a provider thread): a leave whose
 * Delete answered "releasing" is done, so its Node is asked again now, not at the next poll. */
static void on_progress(void *ctx, const char *nodeclaim)
{
    struct kp_termination_controller *tc = ctx;
    struct kp_entry *e = NULL;

    if (kp_store_get(tc->nodeclaims, nodeclaim, &e) == 0)
        on_claim(tc, e);
    kp_entry_unref(e);
}

static int reconcile_fn(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                        uint64_t *ret_requeue_usec)
{
    return kp_termination_reconcile(ctx, c, cx, key, ret_requeue_usec);
}

int kp_termination_controller_new(const struct kp_core_env *env,
                                  struct kp_termination_controller **ret)
{
    struct kp_controller_opts co = {0};
    struct kp_informer_handler claims_h = {
        .on_add = on_claim, .on_update = on_claim_update, .on_delete = NULL};
    struct kp_informer *nodes, *nodeclaims, *pods, *vas, *pvcs;
    struct kp_termination_controller *tc;
    int r;

    if (!env || !env->client || !env->informers || !env->provider)
        return -EINVAL;
    if ((r = kp_informers_nodes(env->informers, &nodes)) < 0 ||
        (r = kp_informers_nodeclaims(env->informers, &nodeclaims)) < 0 ||
        (r = kp_informers_pods(env->informers, &pods)) < 0 ||
        (r = kp_informers_volumeattachments(env->informers, &vas)) < 0 ||
        (r = kp_informers_pvcs(env->informers, &pvcs)) < 0)
        return r;
    tc = kp_calloc(1, sizeof(*tc));
    if (!tc)
        return -ENOMEM;
    tc->env = env;
    tc->timing = env->timing;
    kp_core_timing_defaults(&tc->timing);
    if ((r = kp_evict_drainer_new(&tc->evict)) < 0) {
        kp_free(tc);
        return r;
    }
    tc->evict_view = kp_evict_drainer(tc->evict);
    tc->drainer = &tc->evict_view;
    tc->nodes = kp_informer_store(nodes);
    tc->nodeclaims = kp_informer_store(nodeclaims);
    tc->pods = kp_informer_store(pods);
    tc->attachments = kp_informer_store(vas);
    tc->pvcs = kp_informer_store(pvcs);
    co.name = "node.termination";
    co.group = "";
    co.kind = "Node";
    co.client = env->client;
    co.reconcile = reconcile_fn;
    co.ctx = tc;
    co.workers = env->workers;
    co.parent = env->parent;
    co.events = env->events;
    /* A reconcile may run the provider's Delete, which without a job pool runs a leave script
     * inline (its profile timeout defaults to 3 min): the reconcile's deadline must not cut it
     * short, or every retry would start the leave again and never finish. */
    co.timeout_usec = TERMINATION_RECONCILE_TIMEOUT_USEC;
    if ((r = kp_controller_new(&co, &tc->base)) < 0)
        goto fail;
    tc->rec = kp_controller_reconciler(tc->base);
    claims_h.ctx = tc;
    if ((r = kp_controller_add_index(tc->base, nodeclaims, KP_INDEX_NODECLAIM_PROVIDER_ID,
                                     kp_index_nodeclaim_provider_id)) < 0 ||
        (r = kp_controller_add_index(tc->base, pods, KP_INDEX_POD_NODE, kp_index_pod_node)) < 0 ||
        (r = kp_controller_add_index(tc->base, vas, KP_INDEX_VOLUMEATTACHMENT_NODE,
                                     kp_index_volumeattachment_node)) < 0 ||
        (r = kp_controller_watch_keys(tc->base, nodes)) < 0 ||
        (r = kp_controller_watch(tc->base, nodeclaims, &claims_h)) < 0 ||
        (r = kp_controller_read(tc->base, pods)) < 0 ||
        (r = kp_controller_read(tc->base, vas)) < 0 || (r = kp_controller_read(tc->base, pvcs)) < 0)
        goto fail;
    if (env->provider->ops->watch_progress) {
        if ((r = env->provider->ops->watch_progress(env->provider->self, on_progress, tc)) < 0)
            goto fail;
        tc->watching = true;
    }
    *ret = tc;
    return 0;
fail:
    kp_termination_controller_free(tc);
    return r;
}

void kp_termination_controller_set_drainer(struct kp_termination_controller *tc,
                                           const struct kp_drainer *d)
{
    tc->drainer = d;
}

/* Nodes cached before the handler saw them (an informer started early) are not missed. */
static int enqueue_node(void *ctx, struct kp_entry *e)
{
    (void)kp_reconciler_enqueue(ctx, e->key);
    return 0;
}

int kp_termination_controller_start(struct kp_termination_controller *tc)
{
    int r;

    if (!tc)
        return -EINVAL;
    if ((r = kp_controller_start(tc->base)) < 0)
        return r;
    (void)kp_store_walk(tc->nodes, enqueue_node, tc->rec); /* the visitor never stops it */
    return 0;
}

void kp_termination_controller_stop(struct kp_termination_controller *tc)
{
    if (tc)
        kp_controller_stop(tc->base);
}

bool kp_termination_controller_ready(struct kp_termination_controller *tc)
{
    return tc && kp_controller_ready(tc->base);
}

struct kp_termination_controller *
kp_termination_controller_free(struct kp_termination_controller *tc)
{
    if (!tc)
        return NULL;
    if (tc->watching)
        tc->env->provider->ops->unwatch_progress(tc->env->provider->self, tc);
    tc->base = kp_controller_free(tc->base); /* takes its handlers back out of the informers */
    tc->evict = kp_evict_drainer_free(tc->evict);
    kp_free(tc);
    return NULL;
}

/* --- the executor -------------------------------------------------------------------------- */

/* What one reconcile read from the caches; released by gather_done. */
struct gathered {
    struct kp_entry *node, *nodeclaim;
    struct kp_store_list pods, vas, pvcs_held;
    const struct kp_pod_view **podv;
    const struct kp_volumeattachment_view **vav;
    const char **skip;
    size_t n_skip;
};

static void gather_done(struct gathered *g)
{
    kp_entry_unref(g->node);
    kp_entry_unref(g->nodeclaim);
    kp_store_list_free(&g->pods);
    kp_store_list_free(&g->vas);
    for (size_t i = 0; i < g->pvcs_held.n; i++)
        kp_entry_unref(g->pvcs_held.v[i]);
    kp_free(g->pvcs_held.v);
    kp_free(g->podv);
    kp_free(g->vav);
    kp_free(g->skip);
}

/* The PV names of the PVCs of pods that will stay (not drainable). A PVC the cache does not
 * have (or that is unbound) names no PV: skipped, as upstream skips a NotFound. */
static int gather_skip_pvs(struct kp_termination_controller *tc, struct gathered *g,
                           int64_t now_usec)
{
    size_t cap = 0;

    for (size_t i = 0; i < g->pods.n; i++)
        if (!kp_drain_pod_drainable(g->podv[i], now_usec))
            cap += g->podv[i]->n_pvc_claims;
    if (!cap)
        return 0;
    g->skip = kp_calloc(cap, sizeof(*g->skip));
    g->pvcs_held.v = kp_calloc(cap, sizeof(*g->pvcs_held.v));
    if (!g->skip || !g->pvcs_held.v)
        return -ENOMEM;
    for (size_t i = 0; i < g->pods.n; i++) {
        const struct kp_pod_view *p = g->podv[i];

        if (kp_drain_pod_drainable(p, now_usec))
            continue;
        for (size_t j = 0; j < p->n_pvc_claims; j++) {
            char key[512];
            struct kp_entry *e = NULL;
            int n = snprintf(key, sizeof(key), "%s/%s", p->e.ns, p->pvc_claims[j]);

            if (n < 0 || (size_t)n >= sizeof(key) || kp_store_get(tc->pvcs, key, &e) < 0)
                continue;
            g->pvcs_held.v[g->pvcs_held.n++] = e;
            if (kp_pvc_view(e)->volume_name)
                g->skip[g->n_skip++] = kp_pvc_view(e)->volume_name;
        }
    }
    return 0;
}

/* Reads what the plan decides on for g->node (set by the caller) from the caches. */
/* The uid of the NodeClaim owning node (the ownerReference the registration sync writes), or
 * NULL. */
static const char *owner_nodeclaim_uid(const struct kp_node_view *node)
{
    for (size_t i = 0; i < node->meta.owners.n; i++)
        if (kp_streq(node->meta.owners.v[i].kind, "NodeClaim") && node->meta.owners.v[i].uid)
            return node->meta.owners.v[i].uid;
    return NULL;
}

static int gather(struct kp_termination_controller *tc, int64_t now_usec, struct gathered *g,
                  struct kp_term_in *in)
{
    const struct kp_node_view *nv = kp_node_view(g->node);
    int r;

    in->node = nv;
    in->now_usec = now_usec;
    /* Only a deleting Node with our finalizer reads the rest: every Node event comes here. */
    if (!nv->meta.deletion_usec || !has_finalizer(nv))
        return 0;
    in->node_labelled_ours = kp_gc_node_labelled_ours(tc->env->provider, nv);
    if (nv->provider_id && *nv->provider_id) {
        struct kp_store_list l = {0};

        if ((r = kp_store_by_index(tc->nodeclaims, KP_INDEX_NODECLAIM_PROVIDER_ID, nv->provider_id,
                                   &l)) < 0)
            return r;
        /* A providerID names a host, not a claim: after a release the host's next NodeClaim
         * can share it with this Node's old one. A Node the registration sync has made owned
         * by a NodeClaim is that NodeClaim's alone (or none's, when it is gone); otherwise one
         * NodeClaim with the providerID is its own, and none or several mean no single source
         * of truth: proceed without (upstream). */
        const char *owner = owner_nodeclaim_uid(nv);
        struct kp_entry *pick = NULL;

        for (size_t i = 0; i < l.n && owner; i++)
            if (kp_streq(l.v[i]->uid, owner))
                pick = l.v[i];
        if (!owner && l.n == 1)
            pick = l.v[0];
        if (pick) {
            g->nodeclaim = kp_entry_ref(pick);
            in->nodeclaim = kp_nodeclaim_view(g->nodeclaim);
            in->nodeclaim_supported =
                kp_provider_supports(tc->env->provider, &in->nodeclaim->spec.node_class_ref);
        }
        kp_store_list_free(&l);
    }
    if ((r = kp_store_by_index(tc->pods, KP_INDEX_POD_NODE, nv->e.name, &g->pods)) < 0 ||
        (r = kp_store_by_index(tc->attachments, KP_INDEX_VOLUMEATTACHMENT_NODE, nv->e.name,
                               &g->vas)) < 0)
        return r;
    if (g->pods.n && !(g->podv = kp_calloc(g->pods.n, sizeof(*g->podv))))
        return -ENOMEM;
    if (g->vas.n && !(g->vav = kp_calloc(g->vas.n, sizeof(*g->vav))))
        return -ENOMEM;
    for (size_t i = 0; i < g->pods.n; i++)
        g->podv[i] = kp_pod_view(g->pods.v[i]);
    for (size_t i = 0; i < g->vas.n; i++)
        g->vav[i] = kp_volumeattachment_view(g->vas.v[i]);
    in->pods = g->podv;
    in->n_pods = g->pods.n;
    in->attachments = g->vav;
    in->n_attachments = g->vas.n;
    if ((r = gather_skip_pvs(tc, g, now_usec)) < 0)
        return r;
    in->skip_pvs = g->skip;
    in->n_skip_pvs = g->n_skip;
    return 0;
}

/* An entry's uid or resourceVersion for a precondition: "" when the projection has none, which
 * the writes refuse (-EINVAL) instead of writing without one. */
static const char *pre(const char *s)
{
    return s ? s : "";
}

static const char *node_label(const struct kp_node_view *n, const char *key)
{
    const char *v = kp_labels_get(&n->meta.labels, key);

    return v ? v : "";
}

/* Writes a's conditions onto the NodeClaim (one CAS status patch; nothing when unchanged) and
 * counts a Drained that became True. 0 also when the NodeClaim is gone. */
static int write_conds(struct kp_termination_controller *tc, struct kp_client *c,
                       const struct kp_term_in *in, const struct kp_term_action *a)
{
    const struct kp_nodeclaim_view *nc = in->nodeclaim;
    const struct kp_condition *was;
    struct kp_condset cs;
    char *msg = NULL;
    int r;

    if (!nc || !a->n_conds)
        return 0;
    if ((r = kp_condset_init(&cs, &nc->conditions, nc->generation, in->now_usec)) < 0)
        return r;
    for (size_t i = 0; i < a->n_conds && r >= 0; i++)
        r = kp_condset_set(&cs, a->conds[i].type, a->conds[i].status, a->conds[i].reason,
                           a->conds[i].message);
    if (r >= 0)
        r = kp_write_conditions(c, &KP_RES_NODECLAIM, NULL, nc->e.name, pre(nc->e.rv), &cs, &msg);
    if (r == -ENOENT)
        r = 0; /* the NodeClaim went meanwhile: nothing to record on */
    else if (r == 0 && kp_condset_changed(&cs)) {
        /* Counted after the write, once: the next reconcile reads Drained True from the
         * cache and does not count again. */
        was = kp_conditions_get(&nc->conditions, KP_NC_COND_DRAINED);
        if ((!was || was->status != KP_COND_TRUE) && kp_condset_is_true(&cs, KP_NC_COND_DRAINED))
            kp_core_count(tc->env->observer, KP_CM_NODES_DRAINED,
                          KP_CM_LABELS(node_label(in->node, KP_CORE_LABEL_NODEPOOL)));
    } else if (r < 0 && r != -KP_ECONFLICT)
        kp_log_warn_errno(r, "updating nodeclaim conditions", KP_LF("nodeclaim", nc->e.name),
                          KP_LF("detail", msg ? msg : ""));
    kp_free(msg);
    kp_condset_done(&cs);
    return r;
}

static void emit_events(struct kp_termination_controller *tc, const struct kp_node_view *n,
                        const struct kp_term_action *a)
{
    struct kp_events *ev = kp_controller_events(tc->base);
    const struct kp_event_ref ref = {
        .kind = "Node", .api_version = "v1", .ns = NULL, .name = n->e.name, .uid = n->e.uid};

    if (!ev)
        return;
    for (size_t i = 0; i < a->n_events; i++)
        (void)kp_events_emit(ev, &ref, a->events[i].warning ? KP_EVENT_WARNING : KP_EVENT_NORMAL,
                             a->events[i].reason, "Terminate", a->events[i].note);
}

/* Appends {key, value?, effect} to arr. */
/* Step 4: spec.taints with the disrupted NoSchedule taint (a same-key taint of another effect
 * replaced, every other taint kept) and the load-balancer label, in one CAS merge patch. */
static int patch_taint(struct kp_client *c, const struct kp_node_view *n)
{
    json_t *body = NULL, *taints = NULL;
    char *msg = NULL;
    int r;

    if ((r = kp_json_patch_new(&body)) < 0)
        return r;
    if ((r = kp_taints_disrupted(n, true, &taints)) < 0)
        goto out;
    r = kp_json_patch_set_steal(body, KP_JSON_PATH("spec", "taints"), taints);
    taints = NULL;
    if (r < 0 || (r = kp_json_patch_set_str(
                      body, KP_JSON_PATH("metadata", "labels", KP_CORE_LABEL_EXCLUDE_LB),
                      KP_TERM_LB_EXCLUDE_VALUE)) < 0)
        goto out;
    r = kp_patch_cas(c, &KP_RES_NODE, NULL, n->e.name, NULL, pre(n->e.rv), body, &msg);
    if (r == 0)
        kp_log_info("tainted node", KP_LF("Node", n->e.name),
                    KP_LF("taint.Key", KP_CORE_TAINT_DISRUPTED),
                    KP_LF("taint.Effect", "NoSchedule"));
    else if (r != -KP_ECONFLICT && r != -ENOENT)
        kp_log_warn_errno(r, "tainting node", KP_LF("Node", n->e.name),
                          KP_LF("detail", msg ? msg : ""));
out:
    kp_json_unref(taints);
    kp_json_unref(body);
    kp_free(msg);
    return r;
}

/* Step 8 (and the fast path): the finalizer out, every other one kept; then the metrics and
 * "deleted node". A Node already gone is not counted (upstream ignores NotFound). */
static int remove_finalizer(struct kp_termination_controller *tc, struct kp_client *c,
                            const struct kp_node_view *n, int64_t now_usec)
{
    const char *np = node_label(n, KP_CORE_LABEL_NODEPOOL);
    json_t *body = NULL;
    char *msg = NULL;
    int r;

    if ((r = kp_json_patch_new(&body)) < 0)
        return r;
    if ((r = kp_patch_finalizers(body, n->finalizers, n->n_finalizers, KP_CORE_FINALIZER, false)) <
        0)
        goto out;
    r = kp_patch_cas(c, &KP_RES_NODE, NULL, n->e.name, NULL, pre(n->e.rv), body, &msg);
    if (r == -ENOENT) {
        r = 0;
        goto out;
    }
    if (r < 0) {
        if (r != -KP_ECONFLICT)
            kp_log_warn_errno(r, "removing finalizer", KP_LF("Node", n->e.name),
                              KP_LF("detail", msg ? msg : ""));
        goto out;
    }
    kp_core_count(tc->env->observer, KP_CM_NODES_TERMINATED,
                  KP_CM_LABELS(np, node_label(n, KP_LABEL_ZONE)));
    kp_core_observe(tc->env->observer, KP_CM_NODES_TERMINATION_DURATION, KP_CM_LABELS(np),
                    (double)(now_usec - n->meta.deletion_usec) / USEC_PER_SEC_F);
    kp_core_observe(tc->env->observer, KP_CM_NODES_LIFETIME_DURATION, KP_CM_LABELS(np),
                    (double)(now_usec - n->meta.creation_usec) / USEC_PER_SEC_F);
    kp_log_info("deleted node", KP_LF("Node", n->e.name));
out:
    kp_json_unref(body);
    kp_free(msg);
    return r;
}

/* Asks the provider for the Node's machine (step 2). */
static int ask_instance(struct kp_termination_controller *tc, struct kp_client *c,
                        const struct kp_ctx *cx, const struct kp_node_view *n,
                        enum kp_term_answer *ret)
{
    const struct kp_provider *p = tc->env->provider;
    struct kp_provider_instance inst = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    int r = p->ops->get(p->self, cx, c, n->provider_id, &inst, &err);

    if (r == 0) {
        *ret = KP_TERM_PRESENT;
        kp_provider_instance_done(&inst);
    } else if (err.kind == KP_PROVIDER_ERR_NOT_FOUND) {
        *ret = KP_TERM_GONE;
        r = 0;
    } else {
        kp_log_warn_errno(r, "getting instance", KP_LF("Node", n->e.name),
                          KP_LF("detail", err.message ? err.message : ""));
    }
    kp_provider_err_done(&err);
    return r;
}

/* Step 7: the provider releases the machine (for SSH, runs the leave script). */
static int delete_instance(struct kp_termination_controller *tc, struct kp_client *c,
                           const struct kp_ctx *cx, const struct kp_nodeclaim_view *nc,
                           enum kp_term_answer *ret)
{
    const struct kp_provider *p = tc->env->provider;
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    int r = p->ops->delete (p->self, cx, c, nc, &err);

    if (r == 0)
        *ret = KP_TERM_DELETED;
    else if (err.kind == KP_PROVIDER_ERR_NOT_FOUND) {
        *ret = KP_TERM_GONE;
        r = 0;
    } else {
        kp_log_warn_errno(r, "deleting instance", KP_LF("nodeclaim", nc->e.name),
                          KP_LF("detail", err.message ? err.message : ""));
    }
    kp_provider_err_done(&err);
    return r;
}

int kp_termination_reconcile(struct kp_termination_controller *tc, struct kp_client *c,
                             const struct kp_ctx *cx, const char *key, uint64_t *ret_requeue_usec)
{
    struct gathered g = {0};
    struct kp_term_in in = {0};
    struct kp_term_action a;
    struct kp_drain_result dr;
    char *msg = NULL;
    int r;

    if (kp_store_get(tc->nodes, key, &g.node) < 0) {
        r = 0; /* the Node is gone: nothing to finalize */
        goto out;
    }
    if ((r = gather(tc, (int64_t)kp_core_now(tc->env), &g, &in)) < 0)
        goto out;
    for (unsigned round = 0; round < PLAN_ROUNDS_MAX; round++) {
        kp_termination_plan(&in, &tc->timing, &a);
        if (a.verb != KP_TERM_IGNORE && (r = kp_ctx_err(cx)) < 0)
            goto out; /* stopping or past the deadline: start nothing */
        switch (a.verb) {
        case KP_TERM_IGNORE:
            r = 0;
            goto out;
        case KP_TERM_DELETE_NODECLAIM:
            if (!*pre(in.nodeclaim->e.uid)) {
                r = -EINVAL; /* no uid, no precondition: never delete blind */
                goto out;
            }
            r = kp_delete_uid(c, &KP_RES_NODECLAIM, NULL, in.nodeclaim->e.name, in.nodeclaim->e.uid,
                              &msg);
            if (r == -ENOENT)
                r = 0; /* already gone: as deleted */
            if (r < 0)
                goto out;
            in.nodeclaim_deleted = true;
            continue;
        case KP_TERM_GET_INSTANCE:
            if ((r = ask_instance(tc, c, cx, in.node, &in.instance)) < 0)
                goto out;
            continue;
        case KP_TERM_TAINT:
            if ((r = patch_taint(c, in.node)) < 0)
                goto out;
            in.tainted = true;
            continue;
        case KP_TERM_DRAIN:
            memset(&dr, 0, sizeof(dr));
            {
                const struct kp_drain_input di = {.node = in.node,
                                                  .nodeclaim = in.nodeclaim,
                                                  .pods = in.pods,
                                                  .n_pods = in.n_pods,
                                                  .deadline_usec = a.deadline_usec,
                                                  .now_usec = in.now_usec,
                                                  .clock = tc->env->now_usec ? tc->env->now_usec
                                                                             : kp_real_usec,
                                                  .events = kp_controller_events(tc->base),
                                                  .observer = tc->env->observer};

                r = tc->drainer->ops->drain(tc->drainer->self, c, cx, &di, &dr);
            }
            if (r < 0) {
                (void)write_conds(tc, c, &in, &a); /* Draining began even so */
                goto out;
            }
            in.drain = &dr;
            continue;
        case KP_TERM_DELETE_INSTANCE:
            if ((r = delete_instance(tc, c, cx, in.nodeclaim, &in.deleted)) < 0) {
                (void)write_conds(tc, c, &in, &a); /* Drained, VolumesDetached */
                goto out;
            }
            continue;
        case KP_TERM_WAIT:
            if ((r = write_conds(tc, c, &in, &a)) < 0)
                goto out;
            emit_events(tc, in.node, &a);
            *ret_requeue_usec = a.requeue_usec;
            goto out;
        case KP_TERM_FAIL:
            emit_events(tc, in.node, &a);
            (void)write_conds(tc, c, &in, &a);
            r = a.error;
            kp_log_warn_errno(r, a.why, KP_LF("Node", in.node->e.name));
            goto out;
        case KP_TERM_REMOVE_FINALIZER:
            /* The NodeClaim's record first: a lost race there comes back before the Node
             * can go, so the conditions are never lost with it. */
            if ((r = write_conds(tc, c, &in, &a)) < 0)
                goto out;
            emit_events(tc, in.node, &a);
            r = remove_finalizer(tc, c, in.node, in.now_usec);
            goto out;
        }
    }
    r = -ELOOP; /* the plan asked for the same thing twice: a bug, retried with backoff */
out:
    kp_free(msg);
    gather_done(&g);
    return r;
}
