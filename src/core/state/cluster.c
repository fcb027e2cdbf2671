/* DESIGN: the core's cluster state (core/state/cluster.h).
 *
 * What: Karpenter's state.Cluster for kpssh — state nodes keyed by providerID joining a Node and
 * its NodeClaim, with the resources the bound pods use, kept up to date from informer events.
 *
 * Why this shape: the provisioner and disruption ask "what is left on each node" many times a
 * second; summing pods each time costs O(pods), and Karpenter's own answer (rebuild a node's sums
 * from a pod list whenever the Node changes) costs O(pods per node) per Node heartbeat. Here
 * every event changes only what it names:
 *
 *   bindings   pod key -> struct kp_binding: the pod entry last counted (a reference) and the
 *              usage it was added to. Counting is a function of the latest entry per key, so an
 *              update repeated, or an add after an add, never counts twice: the old share is
 *              taken off before the new one goes on. Unbound, terminal (Succeeded/Failed) and
 *              deleted pods have no binding.
 *   usages     node name -> struct kp_usage: sums of requests/limits (all pods, and DaemonSet
 *              pods), pod counts, and the bindings whose pods hold host ports. Pods bind to a
 *              node *name*; a usage exists while a pod is bound to that name or a Node of that
 *              name is in the state, so pods seen before their Node are already summed when the
 *              Node arrives, and a Node re-created under the same name finds its pods' sums.
 *   recs       providerID -> struct kp_rec: the Node and NodeClaim entries (references, never
 *              copies), the usage of the Node's name, and the in-memory marks.
 *   node_recs  Node name -> rec (Karpenter's nodeNameToProviderID), claims: NodeClaim name ->
 *              rec, or the UNLAUNCHED marker while it has no providerID
 *              (nodeClaimNameToProviderID), pending: Nodes the informer holds that the state
 *              does not (managed Nodes still without providerID or instance-type label).
 *
 * Sums are int64 milli-units with resource names interned once (names: the few resource names a
 * cluster uses), so a usage costs a few small arrays however many pods it counts. An update
 * first reserves what can fail (map slots, sum slots), then changes counts, so an allocation
 * failure leaves the sums as they were; the state is then marked degraded (never synced again:
 * better no provisioning than provisioning from wrong sums) and the failure logged once.
 *
 * Threads: the three informer threads write under the write lock; readers take the read lock
 * only to copy (snapshots, counts). No lock is held while calling code of another module except
 * the store's refcounting and allocation; observer callbacks run after the lock is dropped.
 *
 * Invariants (under the lock): each binding's counts are in exactly its usage; a usage's pods
 * equals the bindings pointing at it; rec->u is the usage of rec->node's name iff rec->node, and
 * then u->rec == rec; a rec has a Node or a NodeClaim; node_recs[name] == rec iff rec->node has
 * that name; n_unlaunched equals the UNLAUNCHED values in claims. */
#include "core/state/cluster.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/list.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "core/core.h"
#include "core/observe.h"
#include "core/provider.h"
#include "k8s/informer.h"

#define KP_LABEL_INSTANCE_TYPE "node.kubernetes.io/instance-type"
#define KP_RES_PODS "pods"
#define KP_MILLI_ONE 1000

/* A resource sum; name is interned (s->names). */
struct kp_sum {
    const char *name;
    int64_t milli;
};
struct kp_sums {
    struct kp_sum *v;
    size_t n, cap;
};

struct kp_rec;

struct kp_usage {
    char *node_name;
    struct kp_sums req, lim, ds_req, ds_lim;
    uint32_t pods, ds_pods;
    struct kp_list hp; /* struct kp_binding.hp_link of the pods holding host ports */
    size_t n_hp;       /* host ports those pods hold */
    struct kp_rec *rec;
};

struct kp_binding {
    struct kp_entry *pod; /* the entry whose share is counted */
    struct kp_usage *u;
    struct kp_list hp_link; /* in u->hp when the pod holds host ports */
};

struct kp_rec {
    char *provider_id;
    struct kp_entry *node;      /* kp_node_view, or NULL */
    struct kp_entry *nodeclaim; /* kp_nodeclaim_view, or NULL */
    struct kp_usage *u;         /* the usage of node's name while node is set */
    bool marked;
    int64_t nominated_until_usec;
};

struct kp_cluster_state {
    const struct kp_core_env *env;
    struct kp_informer *nodes_inf, *claims_inf, *pods_inf; /* borrowed; NULL when detached */
    pthread_rwlock_t lock;
    /* Everything below under lock. */
    struct kp_map *recs, *node_recs, *claims, *usages, *bindings, *names, *pending;
    size_t n_unlaunched;
    bool degraded;
    /* Outside the lock. */
    atomic_bool has_synced;
    atomic_bool fake_informers_synced; /* detached states only */
};

/* The claims value of a NodeClaim without a providerID, and the value of a pending Node. */
static char kp_unlaunched, kp_present;
#define KP_UNLAUNCHED ((void *)&kp_unlaunched)
#define KP_PRESENT ((void *)&kp_present)

/* --- small helpers -------------------------------------------------------------------------- */

/* A reference on an entry a handler borrowed (const: its contents are immutable; the count is
 * atomic and not part of them). */
static struct kp_entry *kp_entry_keep(const struct kp_entry *e)
{
    return kp_entry_ref((struct kp_entry *)(uintptr_t)e);
}

static bool kp_label_true(const struct kp_labels *l, const char *key)
{
    const char *v = kp_labels_get(l, key);

    return v && strcmp(v, "true") == 0;
}

static bool kp_label_set(const struct kp_labels *l, const char *key)
{
    const char *v = kp_labels_get(l, key);

    return v && *v;
}

static void kp_state_degrade(struct kp_cluster_state *s, int r, const char *what)
{
    if (!s->degraded)
        (void)kp_log_error_errno(r, "cluster state lost an update; it reports unsynced from now on",
                                 KP_LF("update", what));
    s->degraded = true;
}

/* The interned copy of name (added when new). NULL on -ENOMEM. */
static const char *kp_state_intern(struct kp_cluster_state *s, const char *name)
{
    char *v = kp_map_get(s->names, name);

    if (v)
        return v;
    if (!(v = kp_strdup(name)))
        return NULL;
    if (kp_map_put(s->names, name, v, NULL) < 0) {
        kp_free(v);
        return NULL;
    }
    return v;
}

static struct kp_sum *kp_sums_find(struct kp_sums *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->v[i].name, name) == 0)
            return &m->v[i];
    return NULL;
}

/* Makes sure m has a slot for name. 0 or -ENOMEM. */
static int kp_sums_reserve_one(struct kp_cluster_state *s, struct kp_sums *m, const char *name)
{
    struct kp_sum *v;
    const char *in;

    if (kp_sums_find(m, name))
        return 0;
    if (!(in = kp_state_intern(s, name)))
        return -ENOMEM;
    if (!(v = kp_grow_array(m->v, &m->cap, m->n, sizeof(*v), 4)))
        return -ENOMEM;
    m->v = v;
    m->v[m->n].name = in;
    m->v[m->n].milli = 0;
    m->n++;
    return 0;
}

/* Slots for every resource of r, and for "pods". */
static int kp_sums_reserve(struct kp_cluster_state *s, struct kp_sums *m,
                           const struct kp_resources *r)
{
    int ret;

    for (size_t i = 0; i < r->n; i++)
        if ((ret = kp_sums_reserve_one(s, m, r->v[i].name)) < 0)
            return ret;
    return kp_sums_reserve_one(s, m, KP_RES_PODS);
}

/* Adds (sign 1) or takes away (sign -1) r plus "pods: 1". Slots exist (reserved, or added by
 * the share now taken away). Saturates instead of wrapping: quantities are bounded by the
 * projection, and a sum past int64 is not a cluster that exists. */
static void kp_sums_apply(struct kp_sums *m, const struct kp_resources *r, int sign)
{
    for (size_t i = 0; i <= r->n; i++) {
        const char *name = i < r->n ? r->v[i].name : KP_RES_PODS;
        int64_t d = i < r->n ? r->v[i].milli : KP_MILLI_ONE;
        struct kp_sum *x = kp_sums_find(m, name);

        if (!x)
            abort(); /* a share taken away that was never added: a broken invariant */
        if (kp_add_overflow(x->milli, sign > 0 ? d : -d, &x->milli))
            x->milli = sign > 0 ? INT64_MAX : INT64_MIN;
    }
}

static void kp_sums_done(struct kp_sums *m)
{
    kp_free(m->v);
    *m = (struct kp_sums){0};
}

/* --- usages --------------------------------------------------------------------------------- */

static struct kp_usage *kp_usage_get(struct kp_cluster_state *s, const char *node_name)
{
    struct kp_usage *u = kp_map_get(s->usages, node_name);

    if (u)
        return u;
    if (!(u = kp_calloc(1, sizeof(*u))))
        return NULL;
    kp_list_init(&u->hp);
    if (!(u->node_name = kp_strdup(node_name)) || kp_map_put(s->usages, node_name, u, NULL) < 0) {
        kp_free(u->node_name);
        kp_free(u);
        return NULL;
    }
    return u;
}

/* Frees u once nothing refers to it: no pod counted, no Node of that name. */
static void kp_usage_release(struct kp_cluster_state *s, struct kp_usage *u)
{
    if (!u || u->pods > 0 || u->rec)
        return;
    (void)kp_map_remove(s->usages, u->node_name);
    kp_sums_done(&u->req);
    kp_sums_done(&u->lim);
    kp_sums_done(&u->ds_req);
    kp_sums_done(&u->ds_lim);
    kp_free(u->node_name);
    kp_free(u);
}

static int kp_usage_reserve(struct kp_cluster_state *s, struct kp_usage *u,
                            const struct kp_pod_view *p)
{
    int r;

    if ((r = kp_sums_reserve(s, &u->req, &p->requests)) < 0 ||
        (r = kp_sums_reserve(s, &u->lim, &p->limits)) < 0)
        return r;
    if (p->flags & KP_POD_DAEMONSET) {
        if ((r = kp_sums_reserve(s, &u->ds_req, &p->requests)) < 0 ||
            (r = kp_sums_reserve(s, &u->ds_lim, &p->limits)) < 0)
            return r;
    }
    return 0;
}

/* Adds (sign 1) or takes away (sign -1) b's pod share in b->u. */
static void kp_binding_count(struct kp_binding *b, int sign)
{
    const struct kp_pod_view *p = kp_pod_view(b->pod);
    struct kp_usage *u = b->u;

    kp_sums_apply(&u->req, &p->requests, sign);
    kp_sums_apply(&u->lim, &p->limits, sign);
    if (sign > 0)
        u->pods++;
    else
        u->pods--;
    if (p->flags & KP_POD_DAEMONSET) {
        kp_sums_apply(&u->ds_req, &p->requests, sign);
        kp_sums_apply(&u->ds_lim, &p->limits, sign);
        if (sign > 0)
            u->ds_pods++;
        else
            u->ds_pods--;
    }
    if (p->n_host_ports > 0) {
        if (sign > 0) {
            kp_list_add_tail(&u->hp, &b->hp_link);
            u->n_hp += p->n_host_ports;
        } else {
            kp_list_del(&b->hp_link);
            u->n_hp -= p->n_host_ports;
        }
    }
}

/* --- recs ----------------------------------------------------------------------------------- */

static struct kp_rec *kp_rec_get(struct kp_cluster_state *s, const char *provider_id)
{
    struct kp_rec *rec = kp_map_get(s->recs, provider_id);

    if (rec)
        return rec;
    if (!(rec = kp_calloc(1, sizeof(*rec))))
        return NULL;
    if (!(rec->provider_id = kp_strdup(provider_id)) ||
        kp_map_put(s->recs, provider_id, rec, NULL) < 0) {
        kp_free(rec->provider_id);
        kp_free(rec);
        return NULL;
    }
    return rec;
}

/* Frees rec once it holds neither a Node nor a NodeClaim (also a fresh rec an update could not
 * fill). */
static void kp_rec_release(struct kp_cluster_state *s, struct kp_rec *rec)
{
    if (!rec || rec->node || rec->nodeclaim)
        return;
    (void)kp_map_remove(s->recs, rec->provider_id);
    kp_free(rec->provider_id);
    kp_free(rec);
}

/* Karpenter's cleanupNode: the Node leaves its rec (and the rec goes when no NodeClaim holds
 * it). The pods bound to the name stay counted in the usage. */
static void kp_rec_drop_node(struct kp_cluster_state *s, struct kp_rec *rec)
{
    struct kp_usage *u = rec->u;

    (void)kp_map_remove(s->node_recs, rec->node->name);
    rec->node = kp_entry_unref(rec->node);
    rec->u = NULL;
    if (u) {
        u->rec = NULL;
        kp_usage_release(s, u);
    }
    kp_rec_release(s, rec);
}

/* Karpenter's cleanupNodeClaim for the claim called name, if rec holds that one. */
static void kp_rec_drop_claim(struct kp_cluster_state *s, struct kp_rec *rec, const char *name)
{
    if (!rec->nodeclaim || strcmp(rec->nodeclaim->name, name) != 0)
        return;
    rec->nodeclaim = kp_entry_unref(rec->nodeclaim);
    kp_rec_release(s, rec);
}

/* --- events --------------------------------------------------------------------------------- */

/* Node add/update: Karpenter's UpdateNode. */
static void kp_state_node_put(struct kp_cluster_state *s, const struct kp_entry *e)
{
    const struct kp_node_view *nv = kp_node_view(e);
    const struct kp_labels *l = &nv->meta.labels;
    bool managed = kp_label_set(l, KP_CORE_LABEL_NODEPOOL);
    bool initialized = kp_label_set(l, KP_CORE_LABEL_INITIALIZED);
    const char *pid = nv->provider_id;
    struct kp_rec *old = kp_map_get(s->node_recs, e->name), *rec;
    struct kp_usage *u;
    int r = -ENOMEM;

    if (!pid) {
        /* A managed Node gets its providerID soon (the provider sets it); an unmanaged one may
         * never have one and is keyed by its name. */
        pid = managed ? NULL : e->name;
    }
    if (!pid || (managed && !kp_label_set(l, KP_LABEL_INSTANCE_TYPE) && !initialized)) {
        /* Not in the state yet: wait for the providerID / instance-type label, as upstream.
         * A Node already in the state keeps its last accepted entry. */
        if (!old && kp_map_put(s->pending, e->name, KP_PRESENT, NULL) < 0)
            kp_state_degrade(s, -ENOMEM, "node");
        return;
    }
    (void)kp_map_remove(s->pending, e->name);
    if (old && strcmp(old->provider_id, pid) != 0) {
        kp_rec_drop_node(s, old); /* the providerID changed: leave the old key */
        old = NULL;
    }
    if (!(rec = kp_rec_get(s, pid)))
        goto fail;
    if (rec->node && strcmp(rec->node->name, e->name) != 0) {
        /* Another Node held this providerID (a host re-registered under a new name): the newer
         * one wins, as upstream's map assignment does. */
        kp_rec_drop_node(s, rec);
        if (!(rec = kp_rec_get(s, pid)))
            goto fail;
    }
    if (!(u = kp_usage_get(s, e->name)))
        goto fail;
    if (!old && (r = kp_map_put(s->node_recs, e->name, rec, NULL)) < 0) {
        kp_usage_release(s, u);
        goto fail;
    }
    kp_entry_unref(rec->node);
    rec->node = kp_entry_keep(e);
    rec->u = u;
    u->rec = rec;
    return;
fail:
    kp_rec_release(s, rec);
    kp_state_degrade(s, r, "node");
}

static void kp_state_node_gone(struct kp_cluster_state *s, const struct kp_entry *e)
{
    struct kp_rec *rec = kp_map_get(s->node_recs, e->name);

    (void)kp_map_remove(s->pending, e->name);
    if (rec)
        kp_rec_drop_node(s, rec);
}

void kp_cluster_state_node_event(struct kp_cluster_state *s, const struct kp_entry *old_e,
                                 const struct kp_entry *new_e)
{
    pthread_rwlock_wrlock(&s->lock);
    if (new_e)
        kp_state_node_put(s, new_e);
    else if (old_e)
        kp_state_node_gone(s, old_e);
    pthread_rwlock_unlock(&s->lock);
}

static bool kp_state_manages(const struct kp_cluster_state *s, const struct kp_nodeclaim_view *nc)
{
    const struct kp_provider *p = s->env ? s->env->provider : NULL;

    return !p || kp_provider_supports(p, &nc->spec.node_class_ref);
}

/* Forgets the claim called name: Karpenter's cleanupNodeClaim. */
static void kp_state_claim_forget(struct kp_cluster_state *s, const char *name)
{
    void *was = kp_map_remove(s->claims, name);

    if (was == KP_UNLAUNCHED)
        s->n_unlaunched--;
    else if (was)
        kp_rec_drop_claim(s, was, name);
}

/* NodeClaim add/update: Karpenter's UpdateNodeClaim. */
static void kp_state_claim_put(struct kp_cluster_state *s, const struct kp_entry *e)
{
    const struct kp_nodeclaim_view *nc = kp_nodeclaim_view(e);
    const char *pid = nc->provider_id;
    void *was = kp_map_get(s->claims, e->name);
    struct kp_rec *rec = NULL;
    int r = -ENOMEM;

    if (!kp_state_manages(s, nc)) {
        kp_state_claim_forget(s, e->name); /* another provider's: not ours to track */
        return;
    }
    if (was && was != KP_UNLAUNCHED && (!pid || strcmp(((struct kp_rec *)was)->provider_id, pid)))
        kp_state_claim_forget(s, e->name); /* its providerID changed: leave the old key */
    if (!pid) {
        if (kp_map_get(s->claims, e->name) == KP_UNLAUNCHED)
            return;
        if ((r = kp_map_put(s->claims, e->name, KP_UNLAUNCHED, NULL)) < 0)
            goto fail;
        s->n_unlaunched++;
        return;
    }
    if (!(rec = kp_rec_get(s, pid)))
        goto fail;
    if ((r = kp_map_put(s->claims, e->name, rec, &was)) < 0)
        goto fail;
    if (was == KP_UNLAUNCHED)
        s->n_unlaunched--;
    kp_entry_unref(rec->nodeclaim);
    rec->nodeclaim = kp_entry_keep(e);
    return;
fail:
    kp_rec_release(s, rec);
    kp_state_degrade(s, r, "nodeclaim");
}

void kp_cluster_state_nodeclaim_event(struct kp_cluster_state *s, const struct kp_entry *old_e,
                                      const struct kp_entry *new_e)
{
    pthread_rwlock_wrlock(&s->lock);
    if (new_e)
        kp_state_claim_put(s, new_e);
    else if (old_e)
        kp_state_claim_forget(s, old_e->name);
    pthread_rwlock_unlock(&s->lock);
}

/* A new, empty binding of pod key (no pod, no node yet) in s->bindings, in *ret. 0 or -ENOMEM. */
static int kp_binding_add(struct kp_cluster_state *s, const char *key, struct kp_binding **ret)
{
    struct kp_binding *nb = kp_calloc(1, sizeof(*nb));
    int r;

    if (!nb)
        return -ENOMEM;
    kp_list_init(&nb->hp_link);
    if ((r = kp_map_put(s->bindings, key, nb, NULL)) < 0) {
        kp_free(nb);
        return r;
    }
    *ret = nb;
    return 0;
}

static void kp_binding_free(struct kp_cluster_state *s, struct kp_binding *b)
{
    struct kp_usage *u = b->u;

    kp_binding_count(b, -1);
    kp_entry_unref(b->pod);
    kp_free(b);
    kp_usage_release(s, u);
}

/* Pod add/update: Karpenter's UpdatePod (updateNodeUsageFromPod / FromPodCompletion). */
static void kp_state_pod_put(struct kp_cluster_state *s, const struct kp_entry *e)
{
    const struct kp_pod_view *p = kp_pod_view(e);
    struct kp_binding *b = kp_map_get(s->bindings, e->key);
    struct kp_usage *u;
    int r = -ENOMEM;

    if (!p->node_name || kp_pod_terminal(p)) {
        /* Unbound (a name re-used by a new pod) or done: it holds nothing on any node. */
        if (b) {
            (void)kp_map_remove(s->bindings, e->key);
            kp_binding_free(s, b);
        }
        return;
    }
    if (!(u = kp_usage_get(s, p->node_name)))
        goto fail;
    if ((r = kp_usage_reserve(s, u, p)) < 0)
        goto fail_usage;
    if (!b && (r = kp_binding_add(s, e->key, &b)) < 0)
        goto fail_usage;
    if (b->pod) {
        struct kp_usage *was = b->u;

        /* Take the old share off first, wherever it was (the pod may have moved nodes). */
        kp_binding_count(b, -1);
        b->pod = kp_entry_unref(b->pod);
        if (was != u)
            kp_usage_release(s, was);
    }
    b->pod = kp_entry_keep(e);
    b->u = u;
    kp_binding_count(b, 1);
    return;
fail_usage:
    kp_usage_release(s, u);
fail:
    kp_state_degrade(s, r, "pod");
}

static void kp_state_pod_gone(struct kp_cluster_state *s, const struct kp_entry *e)
{
    struct kp_binding *b = kp_map_remove(s->bindings, e->key);

    if (b)
        kp_binding_free(s, b);
}

void kp_cluster_state_pod_event(struct kp_cluster_state *s, const struct kp_entry *old_e,
                                const struct kp_entry *new_e)
{
    pthread_rwlock_wrlock(&s->lock);
    if (new_e)
        kp_state_pod_put(s, new_e);
    else if (old_e)
        kp_state_pod_gone(s, old_e);
    pthread_rwlock_unlock(&s->lock);
}

/* Informer handler adapters. */
static void kp_on_node_add(void *ctx, const struct kp_entry *e)
{
    kp_cluster_state_node_event(ctx, NULL, e);
}
static void kp_on_node_update(void *ctx, const struct kp_entry *o, const struct kp_entry *n)
{
    kp_cluster_state_node_event(ctx, o, n);
}
static void kp_on_node_delete(void *ctx, const struct kp_entry *o)
{
    kp_cluster_state_node_event(ctx, o, NULL);
}
static void kp_on_claim_add(void *ctx, const struct kp_entry *e)
{
    kp_cluster_state_nodeclaim_event(ctx, NULL, e);
}
static void kp_on_claim_update(void *ctx, const struct kp_entry *o, const struct kp_entry *n)
{
    kp_cluster_state_nodeclaim_event(ctx, o, n);
}
static void kp_on_claim_delete(void *ctx, const struct kp_entry *o)
{
    kp_cluster_state_nodeclaim_event(ctx, o, NULL);
}
static void kp_on_pod_add(void *ctx, const struct kp_entry *e)
{
    kp_cluster_state_pod_event(ctx, NULL, e);
}
static void kp_on_pod_update(void *ctx, const struct kp_entry *o, const struct kp_entry *n)
{
    kp_cluster_state_pod_event(ctx, o, n);
}
static void kp_on_pod_delete(void *ctx, const struct kp_entry *o)
{
    kp_cluster_state_pod_event(ctx, o, NULL);
}

/* --- snapshots ------------------------------------------------------------------------------ */

static bool kp_rec_managed(const struct kp_rec *rec)
{
    return rec->nodeclaim != NULL;
}

static bool kp_rec_label_true(const struct kp_rec *rec, const char *label)
{
    if (!kp_rec_managed(rec))
        return true; /* Nodes not managed by Karpenter count as registered and initialized */
    return rec->node && kp_label_true(&kp_node_view(rec->node)->meta.labels, label);
}

static bool kp_rec_deleting(const struct kp_rec *rec)
{
    if (rec->nodeclaim) {
        const struct kp_nodeclaim_view *nc = kp_nodeclaim_view(rec->nodeclaim);
        const struct kp_condition *c =
            kp_conditions_get(&nc->conditions, KP_NC_COND_INSTANCE_TERMINATING);

        return nc->meta.deletion_usec != 0 || (c && c->status == KP_COND_TRUE);
    }
    return rec->node && kp_node_view(rec->node)->meta.deletion_usec != 0;
}

/* Capacity() / Allocatable(): the node's list (either may be NULL); with claim, a resource the
 * node lacks or has at zero takes the claim's amount (upstream's "override zero quantities"). */
static struct kp_resources kp_pack_merged(struct kp_pack *p, const struct kp_resources *node,
                                          const struct kp_resources *claim)
{
    size_t n = node ? node->n : 0, k = 0;
    struct kp_res *v, scratch = {0};

    for (size_t i = 0; claim && i < claim->n; i++) {
        bool found = false;

        if (node)
            (void)kp_resources_get(node, claim->v[i].name, &found);
        n += !found;
    }
    v = kp_pack_array(p, n, sizeof(*v));
    for (size_t i = 0; node && i < node->n; i++) {
        struct kp_res *x = v ? &v[k] : &scratch;
        int64_t m = node->v[i].milli;

        if (m == 0 && claim)
            m = kp_resources_get(claim, node->v[i].name, NULL);
        x->name = node->v[i].name; /* points into an entry the snapshot holds */
        x->milli = m;
        k++;
    }
    for (size_t i = 0; claim && i < claim->n; i++) {
        struct kp_res *x = v ? &v[k] : &scratch;
        bool found = false;

        if (node)
            (void)kp_resources_get(node, claim->v[i].name, &found);
        if (found)
            continue;
        x->name = claim->v[i].name;
        x->milli = claim->v[i].milli;
        k++;
    }
    return (struct kp_resources){.v = v, .n = n};
}

/* Sums with their non-zero entries. Names are copied: a snapshot may outlive the state. */
static struct kp_resources kp_pack_sums(struct kp_pack *p, const struct kp_sums *m)
{
    size_t n = 0, k = 0;
    struct kp_res *v;

    for (size_t i = 0; i < m->n; i++)
        n += m->v[i].milli != 0;
    v = kp_pack_array(p, n, sizeof(*v));
    for (size_t i = 0; i < m->n; i++) {
        char *name;

        if (m->v[i].milli == 0)
            continue;
        name = kp_pack_str(p, m->v[i].name);
        if (v) {
            v[k].name = name;
            v[k].milli = m->v[i].milli;
        }
        k++;
    }
    return (struct kp_resources){.v = v, .n = n};
}

/* One state node into x (both pack passes). References are taken in the copying pass. */
static void kp_pack_state_node(struct kp_pack *p, const struct kp_rec *rec, int64_t now,
                               struct kp_state_node *x)
{
    const struct kp_node_view *nv = rec->node ? kp_node_view(rec->node) : NULL;
    const struct kp_nodeclaim_view *nc = rec->nodeclaim ? kp_nodeclaim_view(rec->nodeclaim) : NULL;
    bool registered = kp_rec_label_true(rec, KP_CORE_LABEL_REGISTERED);
    bool initialized = kp_rec_label_true(rec, KP_CORE_LABEL_INITIALIZED);
    bool deleting = kp_rec_deleting(rec);
    const struct kp_labels *labels;
    const struct kp_usage *u = rec->u;
    struct kp_host_port *hp, scratch = {0};
    size_t k = 0;

    x->provider_id = kp_pack_str(p, rec->provider_id);
    x->node_name = nv ? nv->e.name : NULL;
    x->nodeclaim_name = nc ? nc->e.name : NULL;
    x->name = !nv || (nc && !registered) ? x->nodeclaim_name : x->node_name;
    labels = !nv || (nc && !registered) ? &nc->meta.labels : &nv->meta.labels;
    x->nodepool = kp_labels_get(labels, KP_CORE_LABEL_NODEPOOL);
    x->flags = (nc ? KP_STATE_NODE_MANAGED : 0) | (registered ? KP_STATE_NODE_REGISTERED : 0) |
               (initialized ? KP_STATE_NODE_INITIALIZED : 0) |
               (deleting ? KP_STATE_NODE_DELETING : 0) |
               (deleting || rec->marked ? KP_STATE_NODE_MARKED_FOR_DELETION : 0) |
               (rec->nominated_until_usec > now ? KP_STATE_NODE_NOMINATED : 0);
    x->nominated_until_usec = rec->nominated_until_usec;
    if (!initialized && nc) {
        x->capacity = kp_pack_merged(p, nv ? &nv->capacity : NULL, &nc->capacity);
        x->allocatable = kp_pack_merged(p, nv ? &nv->allocatable : NULL, &nc->allocatable);
    } else {
        x->capacity = kp_pack_merged(p, &nv->capacity, NULL);
        x->allocatable = kp_pack_merged(p, &nv->allocatable, NULL);
    }
    if (u) {
        x->pod_requests = kp_pack_sums(p, &u->req);
        x->pod_limits = kp_pack_sums(p, &u->lim);
        x->daemon_requests = kp_pack_sums(p, &u->ds_req);
        x->daemon_limits = kp_pack_sums(p, &u->ds_lim);
        x->pods = u->pods;
        x->daemon_pods = u->ds_pods;
        hp = kp_pack_array(p, u->n_hp, sizeof(*hp));
        for (struct kp_list *l = u->hp.next; l != &u->hp; l = l->next) {
            const struct kp_binding *b = KP_CONTAINER_OF(l, struct kp_binding, hp_link);
            const struct kp_pod_view *pv = kp_pod_view(b->pod);

            for (size_t i = 0; i < pv->n_host_ports; i++) {
                struct kp_host_port *y = hp ? &hp[k] : &scratch;

                y->ip = kp_pack_str(p, pv->host_ports[i].ip);
                y->port = pv->host_ports[i].port;
                y->protocol = pv->host_ports[i].protocol;
                k++;
            }
        }
        x->host_ports = hp;
        x->n_host_ports = u->n_hp;
    }
    if (!kp_pack_sizing(p)) {
        x->node = kp_entry_ref(rec->node);
        x->nodeclaim = kp_entry_ref(rec->nodeclaim);
    }
}

/* A snapshot of one rec, or of every rec when one is NULL. Under the read lock; now was read
 * before it was taken (the env's clock is the caller's code). */
static int kp_snapshot_build(struct kp_cluster_state *s, const struct kp_rec *one, int64_t now,
                             struct kp_state_snapshot **ret)
{
    struct kp_state_snapshot *snap = NULL;
    size_t n = one ? 1 : kp_map_size(s->recs);
    struct kp_state_node *v = NULL, scratch;
    struct kp_pack p;
    int r;

    kp_pack_init(&p, sizeof(*snap));
    for (int pass = 0; pass < 2; pass++) {
        size_t it = 0, k = 0;
        const char *key;
        void *val;

        if (pass == 1) {
            if ((r = kp_pack_alloc(&p, &snap)) < 0)
                return r;
        }
        v = kp_pack_array(&p, n, sizeof(*v));
        if (one) {
            memset(&scratch, 0, sizeof(scratch));
            kp_pack_state_node(&p, one, now, v ? &v[0] : &scratch);
            continue;
        }
        while (kp_map_next(s->recs, &it, &key, &val)) {
            memset(&scratch, 0, sizeof(scratch));
            kp_pack_state_node(&p, val, now, v ? &v[k] : &scratch);
            k++;
        }
    }
    snap->v = v;
    snap->n = n;
    snap->taken_usec = now;
    *ret = snap;
    return 0;
}

struct kp_state_snapshot *kp_state_snapshot_free(struct kp_state_snapshot *s)
{
    if (!s)
        return NULL;
    for (size_t i = 0; i < s->n; i++) {
        kp_entry_unref(s->v[i].node);
        kp_entry_unref(s->v[i].nodeclaim);
    }
    kp_free(s);
    return NULL;
}

size_t kp_state_node_available(const struct kp_state_node *n, struct kp_res *v, size_t cap)
{
    size_t k = 0;

    for (size_t i = 0; i < n->allocatable.n && k < cap; i++) {
        int64_t a = n->allocatable.v[i].milli -
                    kp_resources_get(&n->pod_requests, n->allocatable.v[i].name, NULL);

        v[k].name = n->allocatable.v[i].name;
        v[k].milli = a > 0 ? a : 0;
        k++;
    }
    return k;
}

int kp_cluster_state_snapshot(struct kp_cluster_state *s, struct kp_state_snapshot **ret)
{
    int64_t now = (int64_t)kp_core_now(s->env);
    int r;

    pthread_rwlock_rdlock(&s->lock);
    r = kp_snapshot_build(s, NULL, now, ret);
    pthread_rwlock_unlock(&s->lock);
    return r;
}

int kp_cluster_state_get_by_provider_id(struct kp_cluster_state *s, const char *provider_id,
                                        struct kp_state_snapshot **ret)
{
    int64_t now = (int64_t)kp_core_now(s->env);
    struct kp_rec *rec;
    int r = -ENOENT;

    pthread_rwlock_rdlock(&s->lock);
    if ((rec = kp_map_get(s->recs, provider_id)))
        r = kp_snapshot_build(s, rec, now, ret);
    pthread_rwlock_unlock(&s->lock);
    return r;
}

int kp_cluster_state_get_by_node_name(struct kp_cluster_state *s, const char *node_name,
                                      struct kp_state_snapshot **ret)
{
    int64_t now = (int64_t)kp_core_now(s->env);
    struct kp_rec *rec;
    int r = -ENOENT;

    pthread_rwlock_rdlock(&s->lock);
    if ((rec = kp_map_get(s->node_recs, node_name)))
        r = kp_snapshot_build(s, rec, now, ret);
    pthread_rwlock_unlock(&s->lock);
    return r;
}

int kp_cluster_state_mark_for_deletion(struct kp_cluster_state *s, const char *provider_id,
                                       bool marked)
{
    struct kp_rec *rec;
    int r = -ENOENT;

    pthread_rwlock_wrlock(&s->lock);
    if ((rec = kp_map_get(s->recs, provider_id))) {
        rec->marked = marked;
        r = 0;
    }
    pthread_rwlock_unlock(&s->lock);
    return r;
}

int kp_cluster_state_nominate(struct kp_cluster_state *s, const char *provider_id,
                              int64_t until_usec)
{
    struct kp_rec *rec;
    int r = -ENOENT;

    pthread_rwlock_wrlock(&s->lock);
    if ((rec = kp_map_get(s->recs, provider_id))) {
        rec->nominated_until_usec = until_usec;
        r = 0;
    }
    pthread_rwlock_unlock(&s->lock);
    return r;
}

/* --- synced, counts, metrics ---------------------------------------------------------------- */

static bool kp_state_informers_synced(struct kp_cluster_state *s)
{
    if (!s->nodes_inf)
        return atomic_load(&s->fake_informers_synced);
    return kp_informer_synced(s->nodes_inf) && kp_informer_synced(s->claims_inf) &&
           kp_informer_synced(s->pods_inf);
}

bool kp_cluster_state_synced(struct kp_cluster_state *s)
{
    bool ok;

    if (!kp_state_informers_synced(s))
        return false;
    pthread_rwlock_rdlock(&s->lock);
    ok = !s->degraded && s->n_unlaunched == 0 &&
         (atomic_load(&s->has_synced) || kp_map_size(s->pending) == 0);
    pthread_rwlock_unlock(&s->lock);
    if (ok)
        atomic_store(&s->has_synced, true);
    return ok;
}

size_t kp_cluster_state_node_count(struct kp_cluster_state *s)
{
    size_t n;

    pthread_rwlock_rdlock(&s->lock);
    n = kp_map_size(s->recs);
    pthread_rwlock_unlock(&s->lock);
    return n;
}

void kp_cluster_state_report(struct kp_cluster_state *s)
{
    static const char *const none[] = {NULL};
    const struct kp_core_observer *o = s->env ? s->env->observer : NULL;
    bool synced = kp_cluster_state_synced(s);
    size_t n = kp_cluster_state_node_count(s);

    /* Both values are read and the lock dropped before the observer runs. */
    kp_core_gauge(o, KP_CM_CLUSTER_STATE_SYNCED, none, synced ? 1.0 : 0.0);
    kp_core_gauge(o, KP_CM_CLUSTER_STATE_NODE_COUNT, none, (double)n);
}

/* --- lifecycle ------------------------------------------------------------------------------ */

static int kp_state_alloc(const struct kp_core_env *env, struct kp_cluster_state **ret)
{
    struct kp_cluster_state *s = kp_calloc(1, sizeof(*s));

    if (!s)
        return -ENOMEM;
    s->env = env;
    pthread_rwlock_init(&s->lock, NULL);
    atomic_init(&s->has_synced, false);
    atomic_init(&s->fake_informers_synced, false);
    if (kp_map_new(&s->recs) < 0 || kp_map_new(&s->node_recs) < 0 || kp_map_new(&s->claims) < 0 ||
        kp_map_new(&s->usages) < 0 || kp_map_new(&s->bindings) < 0 || kp_map_new(&s->names) < 0 ||
        kp_map_new(&s->pending) < 0) {
        kp_cluster_state_free(s);
        return -ENOMEM;
    }
    *ret = s;
    return 0;
}

int kp_cluster_state_new_detached(const struct kp_core_env *env, struct kp_cluster_state **ret)
{
    return kp_state_alloc(env, ret);
}

void kp_cluster_state_set_informers_synced(struct kp_cluster_state *s, bool synced)
{
    atomic_store(&s->fake_informers_synced, synced);
}

static void kp_state_unregister(struct kp_cluster_state *s)
{
    struct kp_informer *infs[] = {s->nodes_inf, s->claims_inf, s->pods_inf};

    for (size_t i = 0; i < KP_ARRAY_SIZE(infs); i++) {
        if (infs[i] && kp_informer_remove_handlers(infs[i], s) < 0) {
            kp_log_error("cluster state freed while its informers run (stop the registry first)");
            abort();
        }
    }
}

int kp_cluster_state_new(const struct kp_core_env *env, struct kp_cluster_state **ret)
{
    const struct kp_informer_handler nodes = {kp_on_node_add, kp_on_node_update, kp_on_node_delete,
                                              NULL},
                                     claims = {kp_on_claim_add, kp_on_claim_update,
                                               kp_on_claim_delete, NULL},
                                     pods = {kp_on_pod_add, kp_on_pod_update, kp_on_pod_delete,
                                             NULL};
    struct kp_informer_handler h;
    struct kp_cluster_state *s = NULL;
    int r;

    if (!env || !env->informers)
        return -EINVAL;
    if ((r = kp_state_alloc(env, &s)) < 0)
        return r;
    if ((r = kp_informers_nodes(env->informers, &s->nodes_inf)) < 0 ||
        (r = kp_informers_nodeclaims(env->informers, &s->claims_inf)) < 0 ||
        (r = kp_informers_pods(env->informers, &s->pods_inf)) < 0)
        goto out;
    h = nodes;
    h.ctx = s;
    if ((r = kp_informer_add_handler(s->nodes_inf, &h)) < 0)
        goto out;
    h = claims;
    h.ctx = s;
    if ((r = kp_informer_add_handler(s->claims_inf, &h)) < 0)
        goto out;
    h = pods;
    h.ctx = s;
    if ((r = kp_informer_add_handler(s->pods_inf, &h)) < 0)
        goto out;
    *ret = s;
    s = NULL;
out:
    kp_cluster_state_free(s);
    return r;
}

struct kp_cluster_state *kp_cluster_state_free(struct kp_cluster_state *s)
{
    size_t it = 0;
    const char *key;
    void *val;

    if (!s)
        return NULL;
    kp_state_unregister(s);
    /* Bindings first (they release usages), then recs (nodes release their usages). */
    if (s->bindings)
        while (kp_map_next(s->bindings, &it, &key, &val)) {
            struct kp_binding *b = val;

            kp_entry_unref(b->pod);
            kp_free(b);
        }
    it = 0;
    if (s->usages)
        while (kp_map_next(s->usages, &it, &key, &val)) {
            struct kp_usage *u = val;

            kp_sums_done(&u->req);
            kp_sums_done(&u->lim);
            kp_sums_done(&u->ds_req);
            kp_sums_done(&u->ds_lim);
            kp_free(u->node_name);
            kp_free(u);
        }
    it = 0;
    if (s->recs)
        while (kp_map_next(s->recs, &it, &key, &val)) {
            struct kp_rec *rec = val;

            kp_entry_unref(rec->node);
            kp_entry_unref(rec->nodeclaim);
            kp_free(rec->provider_id);
            kp_free(rec);
        }
    it = 0;
    if (s->names)
        while (kp_map_next(s->names, &it, &key, &val))
            kp_free(val);
    kp_map_free(s->recs);
    kp_map_free(s->node_recs);
    kp_map_free(s->claims);
    kp_map_free(s->usages);
    kp_map_free(s->bindings);
    kp_map_free(s->names);
    kp_map_free(s->pending);
    pthread_rwlock_destroy(&s->lock);
    kp_free(s);
    return NULL;
}
