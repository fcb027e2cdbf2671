/* core/nodepool/nodepool.c: the NodePool controller (nodepool.h).
 *
 * DESIGN: one reconciler keyed by NodePool name on the shared NodePool informer; every
 * decision is a pure function (hash.c, health.c, and the usage / conditions / patch builders
 * here) and the reconcile only gathers inputs from the caches and the provider, then writes.
 *
 * Writes are compare-and-swaps on the cached resourceVersion (core/writes.h). The hash
 * annotations are written before the status, and a reconcile that wrote them stops there: the
 * metadata patch moved the resourceVersion, so a status write with the cached one would only
 * lose the race; the informer's update event brings the key back with the new object.
 *
 * Registration health is state of this process (Karpenter keeps it in memory too). Per NodePool
 * name, under mu: the UID it belongs to, the outcome buffer (health.h), outcomes not yet
 * reported (fed by the NodeClaim informer's handler, which runs on the informer thread and only
 * appends and enqueues), and the gauge series reported so far (to hide them when they go). A
 * reconcile copies the buffer and the pending outcomes, applies them to the copy while building
 * the status, and commits the copy (dropping exactly the outcomes it applied; the handler may
 * have appended more meanwhile) only once the status write succeeded or was not needed: a lost
 * race loses no outcome.
 *
 * Threads: handlers on informer threads, reconciles on the workers (one per key at a time);
 * the pool states under mu, never held across I/O or a store lock. */
#include "core/nodepool/nodepool.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/informer.h"
#include "k8s/reconciler.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/quantity.h"
#include "core/conds.h"
#include "core/core.h"
#include "core/nodepool/hash.h"
#include "core/nodepool/health.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/writes.h"

const char *const kp_nodepool_ready_deps[2] = {KP_NP_COND_VALIDATION_SUCCEEDED,
                                               KP_NP_COND_NODE_CLASS_READY};

/* How soon a reconcile that found a cache not yet synced looks again. */
#define SYNC_WAIT_USEC (1000000ULL)
/* After writing the hash annotations: the update event normally comes first. */
#define AFTER_META_USEC (1000000ULL)
/* Pending registration outcomes kept per NodePool between reconciles (a burst beyond this
 * keeps the latest: only the last KP_NP_HEALTH_BUFFER matter anyway). */
#define MAX_PENDING 16

/* --- usage ------------------------------------------------------------------------------------ */

static const char *const base_resources[] = {"cpu", "memory", "pods", "ephemeral-storage", "nodes"};

void kp_nodepool_usage_init(struct kp_np_usage *u)
{
    *u = (struct kp_np_usage){0};
    for (size_t i = 0; i < KP_ARRAY_SIZE(base_resources); i++)
        u->v[u->n++] = (struct kp_np_res){.name = base_resources[i], .milli = 0};
}

static struct kp_np_res *usage_slot(struct kp_np_usage *u, const char *name)
{
    for (size_t i = 0; i < u->n; i++)
        if (strcmp(u->v[i].name, name) == 0)
            return &u->v[i];
    if (u->n == KP_NP_USAGE_MAX) {
        u->dropped++;
        return NULL;
    }
    u->v[u->n] = (struct kp_np_res){.name = name, .milli = 0};
    return &u->v[u->n++];
}

static void usage_add_one(struct kp_np_usage *u, const char *name, int64_t milli)
{
    struct kp_np_res *s = usage_slot(u, name);

    if (!s || milli <= 0)
        return;
    s->milli = s->milli > INT64_MAX - milli ? INT64_MAX : s->milli + milli;
}

int64_t kp_nodepool_usage_get(const struct kp_np_usage *u, const char *name)
{
    for (size_t i = 0; i < u->n; i++)
        if (strcmp(u->v[i].name, name) == 0)
            return u->v[i].milli;
    return 0;
}

void kp_nodepool_usage_add(struct kp_np_usage *u, const struct kp_nodeclaim_view *nc,
                           const struct kp_node_view *node)
{
    const struct kp_condition *term =
        kp_conditions_get(&nc->conditions, KP_NC_COND_INSTANCE_TERMINATING);

    /* Karpenter's cluster state holds launched NodeClaims only, and a deleting one (or one
     * whose instance is terminating) is marked for deletion and contributes nothing. */
    if (!nc->provider_id || !*nc->provider_id || nc->meta.deletion_usec != 0 ||
        (term && term->status == KP_COND_TRUE))
        return;
    usage_add_one(u, "nodes", 1000);
    if (node && kp_streq(kp_labels_get(&node->meta.labels, KP_CORE_LABEL_INITIALIZED), "true")) {
        for (size_t i = 0; i < node->capacity.n; i++)
            if (strcmp(node->capacity.v[i].name, "nodes") != 0)
                usage_add_one(u, node->capacity.v[i].name, node->capacity.v[i].milli);
        return;
    }
    if (node)
        for (size_t i = 0; i < node->capacity.n; i++)
            if (strcmp(node->capacity.v[i].name, "nodes") != 0 && node->capacity.v[i].milli != 0)
                usage_add_one(u, node->capacity.v[i].name, node->capacity.v[i].milli);
    /* The NodeClaim's amounts fill in what the Node lacks (or all, with no Node yet). */
    for (size_t i = 0; i < nc->capacity.n; i++) {
        const char *name = nc->capacity.v[i].name;

        if (strcmp(name, "nodes") == 0)
            continue;
        if (node && kp_resources_get(&node->capacity, name, NULL) != 0)
            continue;
        usage_add_one(u, name, nc->capacity.v[i].milli);
    }
}

/* --- conditions --------------------------------------------------------------------------------- */

/* Sets ValidationSucceeded from kp_nodepool_validate's report. */
static int set_validation(struct kp_condset *cs, const struct kp_nodepool_view *np)
{
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    int problems, r;

    problems = kp_nodepool_validate(np, &msg);
    if (problems < 0 && problems != -KP_ELIMIT) {
        r = problems;
        goto out;
    }
    if (problems == 0) {
        r = kp_condset_set(cs, KP_NP_COND_VALIDATION_SUCCEEDED, KP_COND_TRUE, NULL, NULL);
        goto out;
    }
    /* One line per problem; the condition reads better on one line. */
    while (msg.len > 0 && kp_buf_str(&msg)[msg.len - 1] == '\n')
        kp_buf_truncate(&msg, msg.len - 1);
    {
        char *text = kp_buf_steal(&msg, NULL);

        if (!text) {
            r = -ENOMEM;
            goto out;
        }
        for (char *q = text; *q; q++)
            if (*q == '\n')
                *q = ';';
        r = kp_condset_set(cs, KP_NP_COND_VALIDATION_SUCCEEDED, KP_COND_FALSE,
                           KP_NP_REASON_VALIDATION_FAILED, text);
        kp_free(text);
    }
out:
    kp_buf_done(&msg);
    return r;
}

static int set_node_class_ready(struct kp_condset *cs, const struct kp_node_class_status *cls)
{
    const char *t = KP_NP_COND_NODE_CLASS_READY;

    if (!cls)
        return kp_condset_set(cs, t, KP_COND_FALSE, KP_NP_REASON_NODECLASS_READINESS_UNKNOWN,
                              "Node Class Readiness Unknown");
    if (!cls->found)
        return kp_condset_set(cs, t, KP_COND_FALSE, KP_NP_REASON_NODECLASS_NOT_FOUND,
                              "NodeClass not found on cluster");
    if (cls->deleting)
        return kp_condset_set(cs, t, KP_COND_FALSE, KP_NP_REASON_NODECLASS_TERMINATING,
                              "NodeClass is Terminating");
    switch (cls->ready) {
    case KP_COND_TRUE:
        return kp_condset_set(cs, t, KP_COND_TRUE, NULL, NULL);
    case KP_COND_FALSE:
        return kp_condset_set(cs, t, KP_COND_FALSE, cls->reason, cls->message);
    case KP_COND_UNKNOWN:
        break;
    }
    return kp_condset_set(cs, t, KP_COND_FALSE, KP_NP_REASON_NODECLASS_READINESS_UNKNOWN,
                          "Node Class Readiness Unknown");
}

int kp_nodepool_conditions(struct kp_condset *cs, const struct kp_nodepool_view *np,
                           const struct kp_node_class_status *cls)
{
    int r;

    if ((r = set_validation(cs, np)) < 0 || (r = set_node_class_ready(cs, cls)) < 0)
        return r;
    if (np->replicas >= 0)
        r = kp_condset_set(cs, KP_NP_COND_UNSUPPORTED_FIELDS, KP_COND_TRUE,
                           KP_NP_REASON_STATIC_UNSUPPORTED,
                           "spec.replicas: static NodePools are not implemented by kpssh; no "
                           "NodeClaims are created for this NodePool");
    else if (np->consolidation_policy == KP_CONSOLIDATE_BALANCED)
        r = kp_condset_set(cs, KP_NP_COND_UNSUPPORTED_FIELDS, KP_COND_TRUE,
                           KP_NP_REASON_BALANCED_UNSUPPORTED,
                           "spec.disruption.consolidationPolicy: Balanced is not implemented by "
                           "kpssh; this NodePool's nodes are consolidated as with "
                           "WhenEmptyOrUnderutilized");
    else if (kp_condset_get(cs, KP_NP_COND_UNSUPPORTED_FIELDS))
        kp_condset_clear(cs, KP_NP_COND_UNSUPPORTED_FIELDS);
    if (r < 0)
        return r;
    return kp_condset_root(cs, KP_NP_COND_READY, kp_nodepool_ready_deps,
                           KP_ARRAY_SIZE(kp_nodepool_ready_deps));
}

/* --- the status patch ----------------------------------------------------------------------------- */

static bool binary_format(const char *name)
{
    return strcmp(name, "memory") == 0 || strcmp(name, "ephemeral-storage") == 0 ||
           kp_startswith(name, "hugepages-") != NULL;
}

static bool usage_differs(const struct kp_nodepool_view *np, const struct kp_np_usage *u)
{
    if (np->nodes != kp_nodepool_usage_get(u, "nodes") / 1000)
        return true;
    for (size_t i = 0; i < u->n; i++) {
        bool found = false;

        if (kp_resources_get(&np->resources, u->v[i].name, &found) != u->v[i].milli || !found)
            return true;
    }
    for (size_t i = 0; i < np->resources.n; i++) {
        bool in = false;

        for (size_t j = 0; j < u->n && !in; j++)
            in = strcmp(u->v[j].name, np->resources.v[i].name) == 0;
        if (!in)
            return true;
    }
    return false;
}

static int put_resources(json_t *patch, const struct kp_nodepool_view *np,
                         const struct kp_np_usage *u)
{
    char text[KP_QUANTITY_STRMAX];
    int r;

    for (size_t i = 0; i < u->n; i++) {
        struct kp_quantity q = {.milli = u->v[i].milli,
                                .format = binary_format(u->v[i].name) ? KP_QUANTITY_BINARY_SI
                                                                      : KP_QUANTITY_DECIMAL_SI};

        if ((r = kp_quantity_format(&q, text, sizeof(text))) < 0 ||
            (r = kp_json_patch_set_str(patch, KP_JSON_PATH("status", "resources", u->v[i].name),
                                       text)) < 0)
            return r;
    }
    /* A merge patch keeps map keys it does not mention: a resource no longer counted is nulled. */
    for (size_t i = 0; i < np->resources.n; i++) {
        bool in = false;

        for (size_t j = 0; j < u->n && !in; j++)
            in = strcmp(u->v[j].name, np->resources.v[i].name) == 0;
        if (!in && (r = kp_json_patch_set_null(
                        patch, KP_JSON_PATH("status", "resources", np->resources.v[i].name))) < 0)
            return r;
    }
    return kp_json_patch_set_int(patch, KP_JSON_PATH("status", "nodes"),
                                 kp_nodepool_usage_get(u, "nodes") / 1000);
}

int kp_nodepool_status_patch(const struct kp_nodepool_view *np, const struct kp_condset *cs,
                             const struct kp_np_usage *u, bool have_class, int64_t class_generation,
                             json_t **ret)
{
    json_t *patch = NULL, *list = NULL;
    bool any = false;
    int r;

    *ret = NULL;
    if ((r = kp_json_patch_new(&patch)) < 0)
        return r;
    if (kp_condset_changed(cs)) {
        if ((r = kp_condset_json(cs, &list)) < 0 ||
            (r = kp_json_patch_set_steal(patch, KP_JSON_PATH("status", "conditions"), list)) < 0)
            goto out;
        any = true;
    }
    if (usage_differs(np, u)) {
        if ((r = put_resources(patch, np, u)) < 0)
            goto out;
        any = true;
    }
    if (have_class && np->node_class_observed_generation != class_generation) {
        if ((r = kp_json_patch_set_int(patch, KP_JSON_PATH("status", "nodeClassObservedGeneration"),
                                       class_generation)) < 0)
            goto out;
        any = true;
    }
    if (any) {
        *ret = patch;
        patch = NULL;
    }
out:
    kp_json_unref(patch);
    return r;
}

/* --- the controller ------------------------------------------------------------------------------ */

/* A registration outcome not yet reported on the NodePool. */
struct pending {
    uint64_t seq;
    char *owner_uid; /* the NodePool UID the NodeClaim's owner reference names */
    bool success;
    char *reason, *message; /* failure only */
};

/* What this process keeps per NodePool name (see the top). */
struct pool {
    char *uid; /* the incarnation the buffer belongs to; NULL until the first reconcile */
    struct kp_np_health_tracker health;
    struct pending pend[MAX_PENDING];
    size_t n_pend;
    uint64_t next_seq;
    /* Gauge series reported: touched by the key's own reconcile only (one at a time). */
    struct kp_strv usage_series, limit_series;
};

struct kp_nodepool_controller {
    const struct kp_core_env *env;
    struct kp_core_timing timing;
    struct kp_informer *nodepools, *nodeclaims, *nodes;
    struct kp_controller *base;
    struct kp_reconciler *rec;
    pthread_mutex_t mu;
    struct kp_map *pools; /* name -> struct pool *; under mu */
};

static void pending_done(struct pending *p)
{
    kp_free(p->owner_uid);
    kp_free(p->reason);
    kp_free(p->message);
    *p = (struct pending){0};
}

static struct pool *pool_free(struct pool *pl)
{
    if (!pl)
        return NULL;
    for (size_t i = 0; i < pl->n_pend; i++)
        pending_done(&pl->pend[i]);
    kp_strv_done(&pl->usage_series);
    kp_strv_done(&pl->limit_series);
    kp_free(pl->uid);
    kp_free(pl);
    return NULL;
}

/* The state of name, made when absent. Under mu. NULL on -ENOMEM. */
static struct pool *pool_get(struct kp_nodepool_controller *ctl, const char *name)
{
    struct pool *pl = kp_map_get(ctl->pools, name);

    if (pl)
        return pl;
    if (!(pl = kp_calloc(1, sizeof(*pl))))
        return NULL;
    pl->usage_series = (struct kp_strv)KP_STRV_INIT;
    pl->limit_series = (struct kp_strv)KP_STRV_INIT;
    if (kp_map_put(ctl->pools, name, pl, NULL) < 0)
        return pool_free(pl);
    return pl;
}

static void enqueue(struct kp_nodepool_controller *ctl, const char *name)
{
    int r;

    if (!name || !*name)
        return;
    r = kp_reconciler_enqueue(ctl->rec, name);
    if (r < 0 && r != -ESHUTDOWN)
        kp_log_warn_errno(r, "nodepool enqueue failed", KP_LF("nodepool", name));
}

/* The UID of nc's NodePool owner reference, or NULL. */
static const char *owner_nodepool_uid(const struct kp_nodeclaim_view *nc)
{
    for (size_t i = 0; i < nc->meta.owners.n; i++)
        if (kp_streq(nc->meta.owners.v[i].kind, "NodePool"))
            return nc->meta.owners.v[i].uid;
    return NULL;
}

/* Queues one outcome for nc's NodePool. Informer thread. */
static void record_outcome(struct kp_nodepool_controller *ctl, const struct kp_nodeclaim_view *nc,
                           bool success, const char *reason, const char *message)
{
    const char *uid = owner_nodepool_uid(nc);
    struct pending p = {.success = success};
    struct pool *pl;
    bool lost = false;

    if (!uid)
        return; /* Karpenter counts only NodeClaims owned by the NodePool */
    p.owner_uid = kp_strdup(uid);
    p.reason = success ? NULL : kp_strdup(reason);
    p.message = success ? NULL : kp_strdup(message);
    pthread_mutex_lock(&ctl->mu);
    pl = pool_get(ctl, nc->nodepool);
    if (!pl || !p.owner_uid || (!success && (!p.reason || !p.message))) {
        lost = true;
    } else {
        if (pl->n_pend == MAX_PENDING) {
            pending_done(&pl->pend[0]);
            memmove(&pl->pend[0], &pl->pend[1], (MAX_PENDING - 1) * sizeof(pl->pend[0]));
            pl->n_pend--;
        }
        p.seq = ++pl->next_seq;
        pl->pend[pl->n_pend++] = p;
        p = (struct pending){0};
    }
    pthread_mutex_unlock(&ctl->mu);
    pending_done(&p);
    if (lost)
        kp_log_warn("nodepool registration outcome lost (out of memory)",
                    KP_LF("nodepool", nc->nodepool), KP_LF("nodeclaim", nc->e.name));
}

static bool claim_ours(struct kp_nodepool_controller *ctl, const struct kp_nodeclaim_view *nc)
{
    return nc->nodepool && *nc->nodepool &&
           kp_provider_supports(ctl->env->provider, &nc->spec.node_class_ref);
}

static void on_claim_add(void *ctx, const struct kp_entry *e)
{
    struct kp_nodepool_controller *ctl = ctx;
    const struct kp_nodeclaim_view *nc = kp_nodeclaim_view(e);

    if (claim_ours(ctl, nc))
        enqueue(ctl, nc->nodepool);
}

static void on_claim_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    struct kp_nodepool_controller *ctl = ctx;
    const struct kp_nodeclaim_view *a = kp_nodeclaim_view(old_e), *b = kp_nodeclaim_view(new_e);
    const char *reason = NULL, *message = NULL;
    enum kp_np_outcome o;

    if (claim_ours(ctl, a) && !kp_streq(a->nodepool, b->nodepool))
        enqueue(ctl, a->nodepool);
    if (!claim_ours(ctl, b))
        return;
    o = kp_nodeclaim_registration_outcome(a, b, &ctl->timing, &reason, &message);
    if (o != KP_NP_OUTCOME_NONE)
        record_outcome(ctl, b, o == KP_NP_OUTCOME_SUCCESS, reason, message);
    enqueue(ctl, b->nodepool);
}

/* --- reconcile ------------------------------------------------------------------------------------ */

/* Drops what this process keeps of name and hides its gauges (gone, or not ours). */
static void forget(struct kp_nodepool_controller *ctl, const char *name)
{
    struct pool *pl;

    pthread_mutex_lock(&ctl->mu);
    pl = kp_map_remove(ctl->pools, name);
    pthread_mutex_unlock(&ctl->mu);
    if (!pl)
        return;
    for (size_t i = 0; i < pl->usage_series.n; i++)
        kp_core_hide(ctl->env->observer, KP_CM_NODEPOOLS_USAGE,
                     KP_CM_LABELS(name, pl->usage_series.v[i]));
    for (size_t i = 0; i < pl->limit_series.n; i++)
        kp_core_hide(ctl->env->observer, KP_CM_NODEPOOLS_LIMIT,
                     KP_CM_LABELS(name, pl->limit_series.v[i]));
    pool_free(pl);
}

/* A merge patch of metadata.annotations (only the keys named: a merge keeps the others). */
static int patch_annotations(struct kp_client *c, const struct kp_resource *res, const char *name,
                             const char *rv, const char *version, const char *hash)
{
    json_t *body = NULL;
    char *msg = NULL;
    int r;

    if ((r = kp_json_patch_new(&body)) < 0)
        return r;
    if ((r = kp_json_patch_set_str(
             body, KP_JSON_PATH("metadata", "annotations", KP_CORE_ANN_NODEPOOL_HASH_VERSION),
             version)) < 0 ||
        (hash &&
         (r = kp_json_patch_set_str(
              body, KP_JSON_PATH("metadata", "annotations", KP_CORE_ANN_NODEPOOL_HASH), hash)) < 0))
        goto out;
    r = kp_patch_cas(c, res, NULL, name, NULL, rv, body, &msg);
    if (r == -ENOENT)
        r = 0;
    if (r < 0 && r != -KP_ECONFLICT && msg)
        kp_log_debug("annotation write refused", KP_LF("name", name), KP_LF("detail", msg));
out:
    kp_free(msg);
    kp_json_unref(body);
    return r;
}

/* Karpenter's updateNodeClaimHash: every NodeClaim of the pool on the new hash version. Tries
 * them all; returns 0 or the first error. */
static int rehash_claims(struct kp_nodepool_controller *ctl, struct kp_client *c,
                         const struct kp_nodepool_view *np, const char *hash)
{
    struct kp_store_list l = {0};
    int r, first = 0;

    if ((r = kp_store_by_index(kp_informer_store(ctl->nodeclaims), KP_INDEX_NODECLAIM_NODEPOOL,
                               np->e.name, &l)) < 0)
        return r;
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_nodeclaim_view *nc = kp_nodeclaim_view(l.v[i]);
        struct kp_nodeclaim_hash_plan plan;

        if (!claim_ours(ctl, nc))
            continue;
        plan = kp_nodeclaim_hash_plan(nc);
        if (!plan.write)
            continue;
        r = patch_annotations(c, &KP_RES_NODECLAIM, nc->e.name, nc->e.rv, KP_NODEPOOL_HASH_VERSION,
                              plan.set_hash ? hash : NULL);
        if (r < 0 && first == 0)
            first = r;
    }
    kp_store_list_free(&l);
    return first;
}

/* The pool's usage from the caches. Entries the names point into are kept in *claims and
 * nodes[] (released by the caller). */
static int compute_usage(struct kp_nodepool_controller *ctl, const char *name,
                         struct kp_np_usage *u, struct kp_store_list *claims,
                         struct kp_entry ***ret_nodes)
{
    struct kp_entry **nodes = NULL;
    int r;

    kp_nodepool_usage_init(u);
    if ((r = kp_store_by_index(kp_informer_store(ctl->nodeclaims), KP_INDEX_NODECLAIM_NODEPOOL,
                               name, claims)) < 0)
        return r;
    if (!(nodes = kp_calloc(claims->n + 1, sizeof(*nodes))))
        return -ENOMEM;
    *ret_nodes = nodes;
    for (size_t i = 0; i < claims->n; i++) {
        const struct kp_nodeclaim_view *nc = kp_nodeclaim_view(claims->v[i]);
        struct kp_store_list nl = {0};

        if (nc->provider_id && *nc->provider_id &&
            kp_store_by_index(kp_informer_store(ctl->nodes), KP_INDEX_NODE_PROVIDER_ID,
                              nc->provider_id, &nl) == 0 &&
            nl.n > 0)
            nodes[i] = kp_entry_ref(nl.v[0]);
        kp_store_list_free(&nl);
        kp_nodepool_usage_add(u, nc, nodes[i] ? kp_node_view(nodes[i]) : NULL);
    }
    if (u->dropped)
        kp_log_debug("nodepool usage: too many resource names", KP_LF("nodepool", name),
                     KP_LF("dropped", u->dropped));
    return 0;
}

static double gauge_value(const char *name, int64_t milli)
{
    if (strcmp(name, "cpu") == 0)
        return (double)milli / 1000.0;
    /* Whole units, rounded up as Quantity.Value() does (usage is never negative). */
    int64_t units = milli / 1000 + (milli % 1000 > 0);

    return (double)units;
}

/* Reports one gauge family for name and hides the series of *series that are no longer listed;
 * *series becomes the names reported. */
static void report_gauges(struct kp_nodepool_controller *ctl, enum kp_core_metric m,
                          const char *name, const struct kp_np_res *v, size_t n,
                          struct kp_strv *series)
{
    struct kp_strv now = KP_STRV_INIT;
    bool complete = true;

    for (size_t i = 0; i < n; i++) {
        kp_core_gauge(ctl->env->observer, m, KP_CM_LABELS(name, v[i].name),
                      gauge_value(v[i].name, v[i].milli));
        if (kp_strv_push(&now, v[i].name) < 0)
            complete = false;
    }
    if (!complete) {
        kp_strv_done(&now); /* keep the old list: hiding a live series is worse than a stale one */
        return;
    }
    for (size_t i = 0; i < series->n; i++)
        if (!kp_strv_contains(&now, series->v[i]))
            kp_core_hide(ctl->env->observer, m, KP_CM_LABELS(name, series->v[i]));
    kp_strv_done(series);
    *series = now;
}

/* Snapshot of a pool's health for one reconcile. */
struct health_snap {
    struct kp_np_health_tracker t;
    struct pending pend[MAX_PENDING];
    size_t n_pend;
    uint64_t max_seq;
};

static void snap_done(struct health_snap *s)
{
    for (size_t i = 0; i < s->n_pend; i++)
        pending_done(&s->pend[i]);
    s->n_pend = 0;
}

/* Copies the pool's buffer and its pending outcomes of np's incarnation. A pool found on
 * another incarnation (a NodePool recreated under the name) starts over. */
static int snapshot(struct kp_nodepool_controller *ctl, const struct kp_nodepool_view *np,
                    struct health_snap *s)
{
    struct pool *pl;
    int r = 0;

    *s = (struct health_snap){0};
    pthread_mutex_lock(&ctl->mu);
    if (!(pl = pool_get(ctl, np->e.name))) {
        r = -ENOMEM;
        goto out;
    }
    if (!kp_streq(pl->uid, np->e.uid)) {
        char *dup = kp_strdup(np->e.uid);

        if (!dup) {
            r = -ENOMEM;
            goto out;
        }
        kp_free(pl->uid);
        pl->uid = dup;
        pl->health = (struct kp_np_health_tracker){0};
    }
    s->t = pl->health;
    for (size_t i = 0; i < pl->n_pend; i++) {
        const struct pending *p = &pl->pend[i];
        struct pending *q = &s->pend[s->n_pend];

        s->max_seq = p->seq;
        if (!kp_streq(p->owner_uid, np->e.uid))
            continue; /* an older incarnation's NodeClaim */
        q->success = p->success;
        if (!p->success &&
            (!(q->reason = kp_strdup(p->reason)) || !(q->message = kp_strdup(p->message)))) {
            pending_done(q);
            r = -ENOMEM;
            goto out;
        }
        s->n_pend++;
    }
out:
    pthread_mutex_unlock(&ctl->mu);
    if (r < 0)
        snap_done(s);
    return r;
}

/* Keeps the reconcile's buffer and drops the outcomes it reported. */
static void commit(struct kp_nodepool_controller *ctl, const struct kp_nodepool_view *np,
                   const struct health_snap *s)
{
    struct pool *pl;
    size_t k = 0;

    pthread_mutex_lock(&ctl->mu);
    pl = kp_map_get(ctl->pools, np->e.name);
    if (pl && kp_streq(pl->uid, np->e.uid)) {
        pl->health = s->t;
        for (size_t i = 0; i < pl->n_pend; i++) {
            if (pl->pend[i].seq <= s->max_seq)
                pending_done(&pl->pend[i]);
            else
                pl->pend[k++] = pl->pend[i];
        }
        pl->n_pend = k;
    }
    pthread_mutex_unlock(&ctl->mu);
}

/* The gauge series lists of name's pool (owned by the key's reconcile; see struct pool). */
static struct pool *pool_of(struct kp_nodepool_controller *ctl, const char *name)
{
    struct pool *pl;

    pthread_mutex_lock(&ctl->mu);
    pl = kp_map_get(ctl->pools, name);
    pthread_mutex_unlock(&ctl->mu);
    return pl;
}

static void report_all(struct kp_nodepool_controller *ctl, const struct kp_nodepool_view *np,
                       const struct kp_np_usage *u)
{
    struct pool *pl = pool_of(ctl, np->e.name);
    struct kp_np_res lim[KP_NP_USAGE_MAX];
    size_t n = 0;

    if (!pl)
        return;
    for (size_t i = 0; i < np->limits.n && n < KP_NP_USAGE_MAX; i++)
        lim[n++] = (struct kp_np_res){.name = np->limits.v[i].name, .milli = np->limits.v[i].milli};
    report_gauges(ctl, KP_CM_NODEPOOLS_USAGE, np->e.name, u->v, u->n, &pl->usage_series);
    report_gauges(ctl, KP_CM_NODEPOOLS_LIMIT, np->e.name, lim, n, &pl->limit_series);
}

static int reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                     uint64_t *ret_requeue)
{
    struct kp_nodepool_controller *ctl = ctx;
    struct kp_node_class_status cls = {0};
    struct kp_condset cs = {0};
    struct health_snap snap = {0};
    struct kp_np_usage u;
    struct kp_store_list claims = {0};
    struct kp_entry *e = NULL, **nodes = NULL;
    const struct kp_nodepool_view *np;
    json_t *patch = NULL;
    char hash[KP_NODEPOOL_HASH_MAX];
    char *msg = NULL;
    bool have_cls;
    int r;

    (void)cx; /* API calls only, each bounded by the client's timeout */
    r = kp_store_get(kp_informer_store(ctl->nodepools), key, &e);
    if (r == -ENOENT) {
        forget(ctl, key);
        return 0;
    }
    if (r < 0)
        return r;
    np = kp_nodepool_view(e);
    if (!kp_provider_supports(ctl->env->provider, &np->tmpl.node_class_ref)) {
        forget(ctl, key); /* another Karpenter's NodePool (coexistence) */
        goto out;
    }
    if (!kp_informer_synced(ctl->nodeclaims) || !kp_informer_synced(ctl->nodes)) {
        /* The counter and the hash fan-out read the NodeClaim cache: an empty one would write
         * zero usage and skip NodeClaims (Karpenter waits for cluster state in the same way). */
        *ret_requeue = SYNC_WAIT_USEC;
        goto out;
    }

    /* nodepool.hash */
    kp_nodepool_hash(np, hash);
    if (!kp_streq(kp_labels_get(&np->annotations, KP_CORE_ANN_NODEPOOL_HASH_VERSION),
                  KP_NODEPOOL_HASH_VERSION) &&
        (r = rehash_claims(ctl, c, np, hash)) < 0)
        goto out;
    if (kp_nodepool_hash_stale(np, hash)) {
        if ((r = patch_annotations(c, &KP_RES_NODEPOOL, key, np->e.rv, KP_NODEPOOL_HASH_VERSION,
                                   hash)) < 0)
            goto out;
        kp_log_debug("nodepool hash written", KP_LF("nodepool", key), KP_LF("hash", hash));
        *ret_requeue = AFTER_META_USEC;
        goto out;
    }

    /* Inputs: the node class as the provider sees it, the health buffer, the usage. */
    r = kp_provider_node_class_status(ctl->env->provider, &np->tmpl.node_class_ref, &cls);
    if (r < 0 && r != -EOPNOTSUPP)
        goto out;
    have_cls = r == 0;
    if ((r = snapshot(ctl, np, &snap)) < 0 ||
        (r = kp_condset_init(&cs, &np->conditions, np->generation,
                             (int64_t)kp_core_now(ctl->env))) < 0)
        goto out;

    /* nodepool.registrationhealth: only against a class that exists, as upstream */
    if (have_cls && cls.found && (r = kp_np_health_sync(&snap.t, &cs, np, cls.generation)) < 0)
        goto out;
    for (size_t i = 0; i < snap.n_pend; i++)
        if ((r = kp_np_health_apply(&snap.t, &cs, snap.pend[i].success, snap.pend[i].reason,
                                    snap.pend[i].message)) < 0)
            goto out;

    /* nodepool.validation, nodepool.readiness, Ready, UnsupportedFields */
    if ((r = kp_nodepool_conditions(&cs, np, have_cls ? &cls : NULL)) < 0)
        goto out;

    /* nodepool.counter */
    if ((r = compute_usage(ctl, key, &u, &claims, &nodes)) < 0)
        goto out;

    if ((r = kp_nodepool_status_patch(np, &cs, &u, have_cls && cls.found, cls.generation, &patch)) <
        0)
        goto out;
    if (patch) {
        r = kp_patch_cas(c, &KP_RES_NODEPOOL, NULL, key, "status", np->e.rv, patch, &msg);
        if (r == -ENOENT) {
            r = 0;
            goto out;
        }
        if (r < 0) {
            if (r != -KP_ECONFLICT && msg)
                kp_log_debug("nodepool status write refused", KP_LF("nodepool", key),
                             KP_LF("detail", msg));
            goto out;
        }
    }
    commit(ctl, np, &snap);
    report_all(ctl, np, &u);
    *ret_requeue = ctl->timing.nodepool_counter_usec;
out:
    for (size_t i = 0; nodes && i < claims.n; i++)
        kp_entry_unref(nodes[i]);
    kp_free(nodes);
    kp_store_list_free(&claims);
    kp_json_unref(patch);
    kp_free(msg);
    snap_done(&snap);
    kp_condset_done(&cs);
    kp_node_class_status_done(&cls);
    kp_entry_unref(e);
    return r;
}

int kp_nodepool_controller_new(const struct kp_core_env *env, struct kp_nodepool_controller **ret)
{
    struct kp_nodepool_controller *ctl = NULL;
    struct kp_controller_opts co = {0};
    int r;

    if (!env || !env->client || !env->informers || !env->provider || !ret)
        return -EINVAL;
    if (!(ctl = kp_calloc(1, sizeof(*ctl))))
        return -ENOMEM;
    pthread_mutex_init(&ctl->mu, NULL);
    ctl->env = env;
    ctl->timing = env->timing;
    kp_core_timing_defaults(&ctl->timing);
    if ((r = kp_map_new(&ctl->pools)) < 0 ||
        (r = kp_informers_nodepools(env->informers, &ctl->nodepools)) < 0 ||
        (r = kp_informers_nodeclaims(env->informers, &ctl->nodeclaims)) < 0 ||
        (r = kp_informers_nodes(env->informers, &ctl->nodes)) < 0)
        goto out;
    co.name = "nodepool";
    co.group = "karpenter.sh";
    co.kind = "NodePool";
    co.client = env->client;
    co.reconcile = reconcile;
    co.ctx = ctl;
    co.workers = env->workers;
    co.parent = env->parent;
    co.events = env->events;
    if ((r = kp_controller_new(&co, &ctl->base)) < 0)
        goto out;
    ctl->rec = kp_controller_reconciler(ctl->base);
    if ((r = kp_controller_add_index(ctl->base, ctl->nodeclaims, KP_INDEX_NODECLAIM_NODEPOOL,
                                     kp_index_nodeclaim_nodepool)) < 0 ||
        (r = kp_controller_add_index(ctl->base, ctl->nodes, KP_INDEX_NODE_PROVIDER_ID,
                                     kp_index_node_provider_id)) < 0 ||
        (r = kp_controller_watch_keys(ctl->base, ctl->nodepools)) < 0 ||
        (r = kp_controller_watch(ctl->base, ctl->nodeclaims,
                                 &(struct kp_informer_handler){.on_add = on_claim_add,
                                                               .on_update = on_claim_update,
                                                               .on_delete = on_claim_add,
                                                               .ctx = ctl})) < 0 ||
        (r = kp_controller_read(ctl->base, ctl->nodes)) < 0)
        goto out;
    *ret = ctl;
    ctl = NULL;
out:
    kp_nodepool_controller_free(ctl);
    return r;
}

int kp_nodepool_controller_start(struct kp_nodepool_controller *ctl)
{
    return kp_controller_start(ctl->base);
}

void kp_nodepool_controller_stop(struct kp_nodepool_controller *ctl)
{
    if (ctl)
        kp_controller_stop(ctl->base);
}

bool kp_nodepool_controller_ready(struct kp_nodepool_controller *ctl)
{
    return ctl && kp_controller_ready(ctl->base);
}

struct kp_nodepool_controller *kp_nodepool_controller_free(struct kp_nodepool_controller *ctl)
{
    const char *k;
    void *v;
    size_t it = 0;

    if (!ctl)
        return NULL;
    ctl->base = kp_controller_free(ctl->base);
    while (ctl->pools && kp_map_next(ctl->pools, &it, &k, &v))
        pool_free(v);
    kp_map_free(ctl->pools);
    pthread_mutex_destroy(&ctl->mu);
    kp_free(ctl);
    return NULL;
}
