/* core/disruption/disruption.c: the voluntary disruption loop, Emptiness (disruption.h).
 *
 * DESIGN: the decisions are pure functions of value structs (kp_dnode: a state node plus what
 * the caches say of its NodePool and pods), so every rule is a table test
 * (tests/unit/test-disruption.c). The controller is one key on one worker: it gathers the
 * kp_dnode array from a cluster state snapshot and the caches, asks the pure functions, and
 * carries out at most one command per pass.
 *
 * Why the command waits 15 s before it acts (Karpenter's commandValidationDelay): a node that
 * looks empty may be about to receive pods the scheduler has just placed, and the pod-event
 * dedupe is 10 s; after the wait the nodes are evaluated again from fresh caches and only those
 * still selected, within the budgets of that moment, are disrupted. The waiting command lives in
 * the controller (only this reconcile touches it: one key, one worker); a restart forgets it,
 * which costs one more wait and nothing else, since nothing was written for it.
 *
 * Why clean-up runs every pass: the taint is written before the NodeClaim delete, and a crash
 * in between leaves a tainted Node that no command holds. Upstream cleans at each pass too.
 *
 * Threads: the reconcile on the controller's one worker; the snapshot and the entries it holds
 * are the pass's own. */
#include "core/disruption/disruption.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/str.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "k8s/reconciler.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/conds.h"
#include "core/core.h"
#include "core/disruption/budget.h"
#include "core/disruption/marking.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/state/cluster.h"
#include "core/writes.h"

#define USEC_PER_SEC 1000000LL
/* How soon a pass that found the cluster state not synced, or that acted, looks again. */
#define SOON_USEC (1000000ULL)

/* --- pure decisions ---------------------------------------------------------------------------- */

static bool cond_true(const struct kp_conditions *c, const char *type)
{
    const struct kp_condition *x = kp_conditions_get(c, type);

    return x && x->status == KP_COND_TRUE;
}

const char *kp_disruption_blocked(const struct kp_dnode *d, int64_t now_usec, char *buf,
                                  size_t size)
{
    const struct kp_state_node *sn = d->sn;
    int n;

    (void)now_usec;
    if (!sn->node || !sn->nodeclaim)
        n = snprintf(buf, size, "state node doesn't contain both a node and a nodeclaim");
    else if (!(sn->flags & KP_STATE_NODE_INITIALIZED))
        n = snprintf(buf, size, "node isn't initialized");
    else if (sn->flags & (KP_STATE_NODE_DELETING | KP_STATE_NODE_MARKED_FOR_DELETION))
        n = snprintf(buf, size, "node is deleting or marked for deletion");
    else if (sn->flags & KP_STATE_NODE_NOMINATED)
        n = snprintf(buf, size, "node is nominated for a pending pod");
    else if (kp_streq(
                 kp_labels_get(&kp_node_view(sn->node)->annotations, KP_CORE_ANN_DO_NOT_DISRUPT),
                 "true"))
        n = snprintf(buf, size, "disruption is blocked through the \"%s\" annotation",
                     KP_CORE_ANN_DO_NOT_DISRUPT);
    else if (!sn->nodepool)
        n = snprintf(buf, size, "node doesn't have required label \"%s\"", KP_CORE_LABEL_NODEPOOL);
    else if (!d->np)
        n = snprintf(buf, size, "nodepool \"%s\" not found", sn->nodepool);
    else if (d->blocking_pod)
        n = snprintf(buf, size, "pod \"%s\" has \"%s\" annotation", d->blocking_pod,
                     KP_CORE_ANN_DO_NOT_DISRUPT);
    else
        return NULL;
    return n < 0 ? "" : buf;
}

void kp_disruption_pool_counts(const struct kp_dnode *v, size_t n, const char *nodepool,
                               int64_t *ret_nodes, int64_t *ret_disrupting)
{
    *ret_nodes = 0;
    *ret_disrupting = 0;
    for (size_t i = 0; i < n; i++) {
        const struct kp_state_node *sn = v[i].sn;

        if (!kp_streq(sn->nodepool, nodepool) || !sn->node || !sn->nodeclaim ||
            !(sn->flags & KP_STATE_NODE_MANAGED) || !(sn->flags & KP_STATE_NODE_INITIALIZED) ||
            cond_true(&kp_nodeclaim_view(sn->nodeclaim)->conditions,
                      KP_NC_COND_INSTANCE_TERMINATING))
            continue;
        (*ret_nodes)++;
        if (kp_node_view(sn->node)->ready != KP_COND_TRUE ||
            (sn->flags & (KP_STATE_NODE_DELETING | KP_STATE_NODE_MARKED_FOR_DELETION)))
            (*ret_disrupting)++;
    }
}

bool kp_emptiness_wants(const struct kp_dnode *d)
{
    const struct kp_obj_duration *after;

    if (!d->np || !d->sn->nodeclaim || d->np->replicas >= 0 || d->reschedulable > 0)
        return false;
    after = &d->np->consolidate_after;
    if (after->text && (!after->valid || after->never))
        return false;
    return cond_true(&kp_nodeclaim_view(d->sn->nodeclaim)->conditions, KP_NC_COND_CONSOLIDATABLE);
}

/* The order of the command: the oldest NodeClaim first, then its name. */
static bool before(const struct kp_dnode *a, const struct kp_dnode *b)
{
    const struct kp_nodeclaim_view *x = kp_nodeclaim_view(a->sn->nodeclaim);
    const struct kp_nodeclaim_view *y = kp_nodeclaim_view(b->sn->nodeclaim);

    if (x->meta.creation_usec != y->meta.creation_usec)
        return x->meta.creation_usec < y->meta.creation_usec;
    return strcmp(x->e.name, y->e.name) < 0;
}

struct pool_budget {
    const char *name;
    int64_t remaining;
};

size_t kp_emptiness_select(const struct kp_dnode *v, size_t n, const bool *only, int64_t now_usec,
                           size_t *ret_idx, bool *ret_blocked)
{
    struct pool_budget *pools = NULL;
    size_t n_cand = 0, n_pools = 0, out = 0;
    char why[256];

    if (ret_blocked)
        *ret_blocked = false;
    for (size_t i = 0; i < n; i++)
        if ((!only || only[i]) && !kp_disruption_blocked(&v[i], now_usec, why, sizeof(why)) &&
            kp_emptiness_wants(&v[i]))
            ret_idx[n_cand++] = i;
    /* Insertion sort: candidates are few, and the order must be total and stable. */
    for (size_t i = 1; i < n_cand; i++) {
        size_t x = ret_idx[i], j = i;

        for (; j > 0 && before(&v[x], &v[ret_idx[j - 1]]); j--)
            ret_idx[j] = ret_idx[j - 1];
        ret_idx[j] = x;
    }
    if (n_cand == 0 || !(pools = kp_calloc(n_cand, sizeof(*pools))))
        return 0; /* nothing to do, or no memory to check budgets with: disrupt nothing */
    for (size_t i = 0; i < n_cand; i++) {
        const struct kp_dnode *d = &v[ret_idx[i]];
        struct pool_budget *pb = NULL;

        for (size_t k = 0; k < n_pools && !pb; k++)
            if (strcmp(pools[k].name, d->sn->nodepool) == 0)
                pb = &pools[k];
        if (!pb) {
            int64_t nodes, disrupting, allowed;

            kp_disruption_pool_counts(v, n, d->sn->nodepool, &nodes, &disrupting);
            allowed = kp_budget_allowed(d->np->budgets, d->np->n_budgets, KP_DISRUPT_EMPTY, nodes,
                                        now_usec / USEC_PER_SEC);
            pb = &pools[n_pools++];
            pb->name = d->sn->nodepool;
            pb->remaining = kp_budget_remaining(allowed, disrupting);
        }
        if (pb->remaining <= 0) {
            if (ret_blocked)
                *ret_blocked = true;
            continue;
        }
        if (pb->remaining != KP_BUDGET_UNLIMITED)
            pb->remaining--;
        ret_idx[out++] = ret_idx[i];
    }
    kp_free(pools);
    return out;
}

/* --- the controller ------------------------------------------------------------------------------ */

struct kp_disruption_controller {
    const struct kp_core_env *env;
    struct kp_store *nodepools, *pods, *nodes, *nodeclaims;
    struct kp_controller *base;
    /* The command waiting for its validation: providerIDs (owned), and when it may act. */
    char **cmd;
    size_t n_cmd;
    int64_t cmd_at_usec;
};

/* One pass's view: the snapshot, the kp_dnode per state node, and what they reference. */
struct pass {
    struct kp_state_snapshot *snap;
    struct kp_dnode *v;
    struct kp_entry **pools; /* NodePool entry per state node, or NULL (references) */
    char **blocking;         /* "ns/name" per state node, or NULL (owned) */
    size_t n;
};

static void pass_done(struct pass *p)
{
    for (size_t i = 0; i < p->n; i++) {
        if (p->pools)
            kp_entry_unref(p->pools[i]);
        if (p->blocking)
            kp_free(p->blocking[i]);
    }
    kp_free(p->pools);
    kp_free(p->blocking);
    kp_free(p->v);
    kp_state_snapshot_free(p->snap);
    memset(p, 0, sizeof(*p));
}

/* The reschedulable pods and the first do-not-disrupt pod bound to node name. */
static int node_pods(struct kp_disruption_controller *ctl, const char *name, int64_t now,
                     uint32_t *ret_resched, char **ret_blocking)
{
    struct kp_store_list l = {0};
    int r;

    if ((r = kp_store_by_index(ctl->pods, KP_INDEX_POD_NODE, name, &l)) < 0)
        return r;
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_pod_view *p = kp_pod_view(l.v[i]);

        if (kp_pod_reschedulable(p))
            (*ret_resched)++;
        if (!*ret_blocking && kp_pod_active(p) && kp_pod_do_not_disrupt_active(p, now)) {
            *ret_blocking = kp_strjoin(p->e.ns ? p->e.ns : "", "/", p->e.name, (const char *)NULL);
            if (!*ret_blocking) {
                r = -ENOMEM;
                break;
            }
        }
    }
    kp_store_list_free(&l);
    return r;
}

static int pass_gather(struct kp_disruption_controller *ctl, int64_t now, struct pass *p)
{
    int r;

    if ((r = kp_cluster_state_snapshot(ctl->env->cluster, &p->snap)) < 0)
        return r;
    p->n = p->snap->n;
    if (p->n == 0)
        return 0;
    p->v = kp_calloc(p->n, sizeof(*p->v));
    p->pools = kp_calloc(p->n, sizeof(*p->pools));
    p->blocking = kp_calloc(p->n, sizeof(*p->blocking));
    if (!p->v || !p->pools || !p->blocking)
        return -ENOMEM;
    for (size_t i = 0; i < p->n; i++) {
        const struct kp_state_node *sn = &p->snap->v[i];

        p->v[i].sn = sn;
        if (!sn->node || !sn->nodeclaim)
            continue;
        if (sn->nodepool && kp_store_get(ctl->nodepools, sn->nodepool, &p->pools[i]) == 0)
            p->v[i].np = kp_nodepool_view(p->pools[i]);
        /* Only a node Emptiness could take needs its pods looked at (with none counted yet,
         * kp_emptiness_wants says whether it could): a busy pool costs no pod walk per pass. */
        if (!kp_emptiness_wants(&p->v[i]))
            continue;
        if ((r = node_pods(ctl, sn->node_name, now, &p->v[i].reschedulable, &p->blocking[i])) < 0)
            return r;
        p->v[i].blocking_pod = p->blocking[i];
    }
    return 0;
}

static bool in_cmd(const struct kp_disruption_controller *ctl, const char *pid)
{
    for (size_t i = 0; i < ctl->n_cmd; i++)
        if (kp_streq(ctl->cmd[i], pid))
            return true;
    return false;
}

static void cmd_clear(struct kp_disruption_controller *ctl)
{
    for (size_t i = 0; i < ctl->n_cmd; i++)
        kp_free(ctl->cmd[i]);
    kp_free(ctl->cmd);
    ctl->cmd = NULL;
    ctl->n_cmd = 0;
}

static bool has_disrupted_taint(const struct kp_node_view *n)
{
    for (size_t i = 0; i < n->taints.n; i++)
        if (strcmp(n->taints.v[i].key, KP_CORE_TAINT_DISRUPTED) == 0)
            return true;
    return false;
}

static struct kp_events *events(struct kp_disruption_controller *ctl)
{
    return ctl->env->events ? ctl->env->events : kp_controller_events(ctl->base);
}

static void emit(struct kp_disruption_controller *ctl, const struct kp_entry *e, const char *kind,
                 const char *api_version, enum kp_event_type type, const char *reason,
                 const char *note)
{
    struct kp_events *ev = events(ctl);
    const struct kp_event_ref ref = {
        .kind = kind, .api_version = api_version, .name = e->name, .uid = e->uid};

    if (ev)
        (void)kp_events_emit(ev, &ref, type, reason, /* action= */ "Disruption", note);
}

/* The informer's current entry of key in store when it is still the incarnation uid: a new
 * reference, or NULL. The cluster state's entries decide; writes carry the store's
 * resourceVersion, which moves on updates the projection does not show (a kubelet's heartbeat),
 * and which the state's references, fed by change handlers only, do not follow. */
static struct kp_entry *fresh(struct kp_store *store, const struct kp_entry *e)
{
    struct kp_entry *cur = NULL;

    if (kp_store_get(store, e->key, &cur) < 0)
        return NULL;
    if (!kp_streq(cur->uid, e->uid)) {
        kp_entry_unref(cur);
        return NULL;
    }
    return cur;
}

/* Adds (add) or removes the disrupted taint on node, CAS on its cached resourceVersion. */
static int write_taint(struct kp_client *c, const struct kp_node_view *n, bool add)
{
    json_t *body = NULL, *taints = NULL;
    char *msg = NULL;
    int r;

    if ((r = kp_json_patch_new(&body)) < 0)
        return r;
    if ((r = kp_taints_disrupted(n, add, &taints)) < 0 ||
        (r = kp_json_patch_set_steal(body, KP_JSON_PATH("spec", "taints"), taints)) < 0)
        goto out;
    r = kp_patch_cas(c, &KP_RES_NODE, NULL, n->e.name, NULL, n->e.rv, body, &msg);
    if (r < 0 && r != -KP_ECONFLICT && r != -ENOENT)
        kp_log_warn_errno(r, add ? "tainting node" : "untainting node", KP_LF("Node", n->e.name),
                          KP_LF("detail", msg ? msg : ""));
out:
    kp_json_unref(body);
    kp_free(msg);
    return r;
}

/* Sets (reason non-NULL) or clears DisruptionReason on nc, CAS. 0 when nothing changed. */
static int write_reason(struct kp_disruption_controller *ctl, struct kp_client *c,
                        const struct kp_nodeclaim_view *nc, const char *reason, int64_t now)
{
    struct kp_condset cs = {0};
    char *msg = NULL;
    int r;

    (void)ctl;
    if ((r = kp_condset_init(&cs, &nc->conditions, nc->generation, now)) < 0)
        goto out;
    if (reason)
        r = kp_condset_set(&cs, KP_NC_COND_DISRUPTION_REASON, KP_COND_TRUE, reason, reason);
    else
        kp_condset_clear(&cs, KP_NC_COND_DISRUPTION_REASON);
    if (r >= 0)
        r = kp_write_conditions(c, &KP_RES_NODECLAIM, NULL, nc->e.name, nc->e.rv, &cs, &msg);
    if (r < 0 && r != -KP_ECONFLICT && r != -ENOENT)
        kp_log_debug("DisruptionReason not written", KP_LF("NodeClaim", nc->e.name),
                     KP_LF("detail", msg ? msg : ""));
out:
    kp_condset_done(&cs);
    kp_free(msg);
    return r;
}

/* Step 1: takes the taint (and DisruptionReason) off nodes no command holds. */
static void cleanup(struct kp_disruption_controller *ctl, struct kp_client *c,
                    const struct kp_ctx *cx, const struct pass *p, int64_t now)
{
    for (size_t i = 0; i < p->n && !kp_ctx_done(cx); i++) {
        const struct kp_state_node *sn = p->v[i].sn;
        const struct kp_node_view *nv = sn->node ? kp_node_view(sn->node) : NULL;

        struct kp_entry *ne, *ce;

        if (!nv || !sn->nodeclaim || in_cmd(ctl, sn->provider_id) ||
            (sn->flags & (KP_STATE_NODE_DELETING | KP_STATE_NODE_MARKED_FOR_DELETION)) ||
            nv->meta.deletion_usec != 0)
            continue;
        if (has_disrupted_taint(nv) && (ne = fresh(ctl->nodes, sn->node))) {
            if (write_taint(c, kp_node_view(ne), false) == 0)
                kp_log_info("removed stale disruption taint", KP_LF("Node", nv->e.name));
            kp_entry_unref(ne);
        }
        if (kp_conditions_get(&kp_nodeclaim_view(sn->nodeclaim)->conditions,
                              KP_NC_COND_DISRUPTION_REASON) &&
            (ce = fresh(ctl->nodeclaims, sn->nodeclaim))) {
            (void)write_reason(ctl, c, kp_nodeclaim_view(ce), NULL, now);
            kp_entry_unref(ce);
        }
    }
}

/* The consolidation_policy label: the policy in snake_case, as Karpenter's metrics write it. */
static const char *policy_label(const struct kp_nodepool_view *np)
{
    switch (np->consolidation_policy) {
    case KP_CONSOLIDATE_WHEN_EMPTY:
        return "when_empty";
    case KP_CONSOLIDATE_BALANCED:
        return "balanced";
    default:
        return "when_empty_or_underutilized";
    }
}

/* Whether the state says provider_id is nominated now. */
static bool nominated_now(struct kp_disruption_controller *ctl, const char *provider_id)
{
    struct kp_state_snapshot *one = NULL;
    bool r;

    if (kp_cluster_state_get_by_provider_id(ctl->env->cluster, provider_id, &one) < 0)
        return false;
    r = one->n > 0 && (one->v[0].flags & KP_STATE_NODE_NOMINATED);
    kp_state_snapshot_free(one);
    return r;
}

/* Disrupts one validated node: mark, taint, DisruptionReason, delete. A failure before the
 * delete rolls the mark and the taint back. The caller logs and counts the command. */
static int disrupt(struct kp_disruption_controller *ctl, struct kp_client *c,
                   const struct kp_dnode *d, int64_t now)
{
    const struct kp_state_node *sn = d->sn;
    struct kp_entry *ne = fresh(ctl->nodes, sn->node), *ce = fresh(ctl->nodeclaims, sn->nodeclaim);
    const struct kp_node_view *nv;
    const struct kp_nodeclaim_view *nc;
    const char *ct, *it;
    bool tainted = false, marked = false;
    char *msg = NULL;
    int r;

    if (!ne || !ce) {
        r = -KP_ECONFLICT; /* gone or replaced since the snapshot: decided again next pass */
        goto fail;
    }
    nv = kp_node_view(ne);
    nc = kp_nodeclaim_view(ce);
    ct = kp_labels_get(&nc->meta.labels, KP_LABEL_CAPACITY_TYPE);
    it = kp_labels_get(&nc->meta.labels, KP_LABEL_INSTANCE_TYPE);
    if ((r = kp_cluster_state_mark_for_deletion(ctl->env->cluster, sn->provider_id, true)) < 0)
        goto fail;
    marked = true;
    /* Marked, the node takes no new nomination; one made, or a do-not-disrupt annotation
     * added, since the snapshot still wins. */
    if (kp_streq(kp_labels_get(&nv->annotations, KP_CORE_ANN_DO_NOT_DISRUPT), "true") ||
        nominated_now(ctl, sn->provider_id)) {
        r = -KP_ECONFLICT;
        goto fail;
    }
    if (!has_disrupted_taint(nv)) {
        if ((r = write_taint(c, nv, true)) < 0)
            goto fail;
        tainted = true;
    }
    /* The condition tells users why; without replacements a failed write does not stop the
     * command (as upstream). */
    (void)write_reason(ctl, c, nc, KP_DISRUPTION_REASON_EMPTY, now);
    r = kp_delete_uid(c, &KP_RES_NODECLAIM, NULL, nc->e.name, nc->e.uid, &msg);
    if (r < 0) {
        kp_log_warn_errno(r, "disrupting nodeclaim failed", KP_LF("NodeClaim", nc->e.name),
                          KP_LF("detail", msg ? msg : ""));
        goto fail;
    }
    kp_log_debug("disrupted node", KP_LF("reason", KP_DISRUPTION_REASON_EMPTY),
                 KP_LF("NodeClaim", nc->e.name), KP_LF("Node", nv->e.name),
                 KP_LF("nodepool", sn->nodepool), KP_LF("instance-type", it ? it : ""),
                 KP_LF("capacity-type", ct ? ct : ""));
    emit(ctl, sn->node, "Node", "v1", KP_EVENT_NORMAL, "DisruptionTerminating",
         "Disrupting Node: " KP_DISRUPTION_REASON_EMPTY);
    emit(ctl, sn->nodeclaim, "NodeClaim", "karpenter.sh/v1", KP_EVENT_NORMAL,
         "DisruptionTerminating", "Disrupting NodeClaim: " KP_DISRUPTION_REASON_EMPTY);
    kp_core_count(ctl->env->observer, KP_CM_NODECLAIMS_DISRUPTED,
                  KP_CM_LABELS("empty", sn->nodepool, ct ? ct : "", policy_label(d->np),
                               kp_core_termination_mode(nc)));
    kp_free(msg);
    kp_entry_unref(ne);
    kp_entry_unref(ce);
    return 0;
fail:
    if (tainted) {
        /* The taint patch moved the Node's resourceVersion: take it off from the store's
         * newest; a conflict leaves it to the next pass's clean-up. */
        struct kp_entry *again = fresh(ctl->nodes, sn->node);

        if (again) {
            (void)write_taint(c, kp_node_view(again), false);
            kp_entry_unref(again);
        }
    }
    if (marked && kp_cluster_state_mark_for_deletion(ctl->env->cluster, sn->provider_id, false) < 0)
        kp_log_debug("disruption mark not taken back: the node left the state",
                     KP_LF("provider-id", sn->provider_id));
    kp_free(msg);
    kp_entry_unref(ne);
    kp_entry_unref(ce);
    return r;
}

/* karpenter_nodepools_allowed_disruptions{nodepool, reason} for every NodePool with nodes, and
 * the NodePool's DisruptionBlocked event when its budgets allow no Empty disruption at all while
 * it has nodes (the recorder folds the repeats of every pass). */
static void report_budgets(struct kp_disruption_controller *ctl, const struct pass *p, int64_t now)
{
    static const struct {
        uint32_t bit;
        const char *label;
    } reasons[] = {{KP_DISRUPT_EMPTY, "empty"},
                   {KP_DISRUPT_DRIFTED, "drifted"},
                   {KP_DISRUPT_UNDERUTILIZED, "underutilized"}};

    for (size_t i = 0; i < p->n; i++) {
        const struct kp_dnode *d = &p->v[i];
        bool first = true;
        int64_t nodes, disrupting;

        if (!d->np)
            continue;
        for (size_t k = 0; k < i && first; k++)
            first = !p->v[k].np || !kp_streq(p->v[k].np->e.name, d->np->e.name);
        if (!first)
            continue;
        kp_disruption_pool_counts(p->v, p->n, d->np->e.name, &nodes, &disrupting);
        for (size_t k = 0; k < KP_ARRAY_SIZE(reasons); k++) {
            int64_t a = kp_budget_allowed(d->np->budgets, d->np->n_budgets, reasons[k].bit, nodes,
                                          now / USEC_PER_SEC);

            kp_core_gauge(ctl->env->observer, KP_CM_NODEPOOLS_ALLOWED_DISRUPTIONS,
                          KP_CM_LABELS(d->np->e.name, reasons[k].label),
                          (double)(a == KP_BUDGET_UNLIMITED ? nodes : a));
            if (reasons[k].bit == KP_DISRUPT_EMPTY && nodes > 0 && a == 0)
                emit(ctl, &d->np->e, "NodePool", "karpenter.sh/v1", KP_EVENT_NORMAL,
                     "DisruptionBlocked",
                     "No allowed disruptions for disruption reason " KP_DISRUPTION_REASON_EMPTY
                     " due to blocking budget");
        }
    }
}

/* DisruptionBlocked on the Node and the NodeClaim of every node Emptiness wants but may not
 * take, with Karpenter's sentence: what keeps an empty node is then visible in kubectl describe.
 * Only those: a busy or not yet consolidatable node is not news. */
static void report_blocked(struct kp_disruption_controller *ctl, const struct pass *p, int64_t now)
{
    char why[256], note[320];

    for (size_t i = 0; i < p->n; i++) {
        const struct kp_dnode *d = &p->v[i];
        const char *b;

        if (!d->sn->node || !d->sn->nodeclaim || !kp_emptiness_wants(d) ||
            !(b = kp_disruption_blocked(d, now, why, sizeof(why))) ||
            (d->sn->flags & (KP_STATE_NODE_DELETING | KP_STATE_NODE_MARKED_FOR_DELETION)))
            continue;
        (void)snprintf(note, sizeof(note), "Cannot disrupt Node: %s", b);
        emit(ctl, d->sn->node, "Node", "v1", KP_EVENT_NORMAL, "DisruptionBlocked", note);
        (void)snprintf(note, sizeof(note), "Cannot disrupt NodeClaim: %s", b);
        emit(ctl, d->sn->nodeclaim, "NodeClaim", "karpenter.sh/v1", KP_EVENT_NORMAL,
             "DisruptionBlocked", note);
    }
}

/* Validation and execution of the waiting command: its own nodes are evaluated again on this
 * pass's view, those still selected within the budgets of now are disrupted (while cx lasts:
 * after SIGTERM or a lost Lease nothing more is written), the rest are dropped. One decision,
 * logged and counted once, as upstream's executeCommand. Returns 0 or the last failure. */
static int validate_and_run(struct kp_disruption_controller *ctl, struct kp_client *c,
                            const struct kp_ctx *cx, const struct pass *p, size_t *idx, int64_t now)
{
    bool *only = p->n ? kp_calloc(p->n, sizeof(*only)) : NULL;
    struct kp_buf names = KP_BUF_INIT(4096);
    size_t n_sel = 0, done = 0;
    int r, last = 0;

    if (p->n && !only)
        return -ENOMEM;
    for (size_t i = 0; i < p->n; i++)
        only[i] = in_cmd(ctl, p->v[i].sn->provider_id);
    if (p->n)
        n_sel = kp_emptiness_select(p->v, p->n, only, now, idx, NULL);
    for (size_t i = 0; i < n_sel; i++) {
        const struct kp_dnode *d = &p->v[idx[i]];

        if ((r = kp_ctx_err(cx)) < 0) {
            last = r;
            break;
        }
        if ((r = disrupt(ctl, c, d, now)) == -KP_ECONFLICT) {
            kp_log_debug("disruption lost a race; the next pass decides again",
                         KP_LF("node", d->sn->name));
            continue;
        }
        if (r < 0) {
            last = r;
            continue;
        }
        /* A name past the buffer's ceiling only shortens the log line. */
        if (kp_buf_printf(&names, "%s%s", done ? ", " : "", d->sn->name) < 0)
            kp_log_debug("disrupted node left out of the log line", KP_LF("node", d->sn->name));
        done++;
    }
    if (done > 0) {
        kp_log_info("disrupting node(s)", KP_LF("decision", "delete"),
                    KP_LF("reason", KP_DISRUPTION_REASON_EMPTY), KP_LF("nodes", (uint64_t)done),
                    KP_LF("names", kp_buf_str(&names)));
        kp_core_count(ctl->env->observer, KP_CM_VOLUNTARY_DISRUPTION_DECISIONS,
                      KP_CM_LABELS("delete", "empty", "empty"));
    }
    if (n_sel < ctl->n_cmd)
        kp_log_debug("disruption command validated",
                     KP_LF("dropped", (uint64_t)(ctl->n_cmd - n_sel)));
    kp_buf_done(&names);
    kp_free(only);
    return last;
}

static int reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                     uint64_t *ret_requeue)
{
    struct kp_disruption_controller *ctl = ctx;
    struct pass p = {0};
    size_t *idx = NULL, n_sel = 0;
    int64_t now = (int64_t)kp_core_now(ctl->env);
    bool budget_blocked = false;
    int r;

    (void)key;
    *ret_requeue = KP_DISRUPTION_POLL_USEC;
    if (!kp_cluster_state_synced(ctl->env->cluster)) {
        *ret_requeue = SOON_USEC;
        return 0;
    }
    if ((r = pass_gather(ctl, now, &p)) < 0)
        goto out;
    cleanup(ctl, c, cx, &p, now);
    report_budgets(ctl, &p, now);
    report_blocked(ctl, &p, now);
    /* Room for every state node's index (at least one, so it is never NULL). */
    if (!(idx = kp_calloc(p.n ? p.n : 1, sizeof(*idx)))) {
        r = -ENOMEM;
        goto out;
    }
    if (p.n && ctl->n_cmd == 0)
        n_sel = kp_emptiness_select(p.v, p.n, NULL, now, idx, &budget_blocked);
    for (size_t i = 0; i < p.n && kp_log_enabled(KP_LOG_DEBUG); i++) {
        char why[256];
        const char *b = kp_disruption_blocked(&p.v[i], now, why, sizeof(why));

        kp_log_debug("disruption candidate", KP_LF("node", p.v[i].sn->name),
                     KP_LF("blocked", b ? b : ""),
                     KP_LF("empty", kp_emptiness_wants(&p.v[i]) ? "true" : "false"));
    }
    if (ctl->n_cmd > 0) {
        if (now < ctl->cmd_at_usec) {
            *ret_requeue = (uint64_t)(ctl->cmd_at_usec - now);
            goto out;
        }
        r = validate_and_run(ctl, c, cx, &p, idx, now);
        cmd_clear(ctl);
        *ret_requeue = SOON_USEC;
        goto out;
    }
    if (n_sel == 0) {
        r = 0;
        goto out;
    }
    if (!(ctl->cmd = kp_calloc(n_sel, sizeof(*ctl->cmd)))) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_sel; i++)
        if (!(ctl->cmd[ctl->n_cmd++] = kp_strdup(p.v[idx[i]].sn->provider_id))) {
            cmd_clear(ctl);
            r = -ENOMEM;
            goto out;
        }
    ctl->cmd_at_usec = now + (int64_t)KP_DISRUPTION_VALIDATION_USEC;
    kp_log_info("empty nodes found; disrupting them after the validation delay",
                KP_LF("reason", KP_DISRUPTION_REASON_EMPTY), KP_LF("nodes", (uint64_t)n_sel),
                KP_LF("first", p.v[idx[0]].sn->name));
    *ret_requeue = KP_DISRUPTION_VALIDATION_USEC;
    r = 0;
out:
    if (budget_blocked)
        kp_log_debug("empty nodes wait for their NodePool's disruption budget");
    kp_free(idx);
    pass_done(&p);
    return r;
}

int kp_disruption_controller_new(const struct kp_core_env *env,
                                 struct kp_disruption_controller **ret)
{
    struct kp_disruption_controller *ctl = NULL;
    struct kp_controller_opts co = {0};
    struct kp_informer *nodepools, *pods, *nodes, *nodeclaims;
    int r;

    if (!env || !env->client || !env->informers || !env->provider || !env->cluster || !ret)
        return -EINVAL;
    if ((r = kp_informers_nodepools(env->informers, &nodepools)) < 0 ||
        (r = kp_informers_pods(env->informers, &pods)) < 0 ||
        (r = kp_informers_nodes(env->informers, &nodes)) < 0 ||
        (r = kp_informers_nodeclaims(env->informers, &nodeclaims)) < 0)
        return r;
    if (!(ctl = kp_calloc(1, sizeof(*ctl))))
        return -ENOMEM;
    ctl->env = env;
    ctl->nodepools = kp_informer_store(nodepools);
    ctl->pods = kp_informer_store(pods);
    ctl->nodes = kp_informer_store(nodes);
    ctl->nodeclaims = kp_informer_store(nodeclaims);
    co.name = "disruption";
    co.group = "karpenter.sh";
    co.kind = "NodePool";
    co.client = env->client;
    co.reconcile = reconcile;
    co.ctx = ctl;
    co.workers = 1; /* one key: one command at a time */
    co.parent = env->parent;
    co.events = env->events;
    co.events_component = "karpenter";
    if ((r = kp_controller_new(&co, &ctl->base)) < 0 ||
        (r = kp_controller_add_index(ctl->base, pods, KP_INDEX_POD_NODE, kp_index_pod_node)) < 0 ||
        (r = kp_controller_read(ctl->base, nodepools)) < 0 ||
        (r = kp_controller_read(ctl->base, pods)) < 0 ||
        (r = kp_controller_read(ctl->base, nodes)) < 0 ||
        (r = kp_controller_read(ctl->base, nodeclaims)) < 0)
        goto out;
    *ret = ctl;
    ctl = NULL;
out:
    kp_disruption_controller_free(ctl);
    return r;
}

int kp_disruption_controller_start(struct kp_disruption_controller *ctl)
{
    int r;

    /* A new term starts from nothing: a command of the last one was never acted on. Before the
     * workers start: a key the stopped queue kept may run the moment they do. */
    cmd_clear(ctl);
    if ((r = kp_controller_start(ctl->base)) < 0)
        return r;
    return kp_reconciler_enqueue(kp_controller_reconciler(ctl->base), KP_DISRUPTION_KEY);
}

void kp_disruption_controller_stop(struct kp_disruption_controller *ctl)
{
    if (ctl)
        kp_controller_stop(ctl->base);
}

bool kp_disruption_controller_ready(struct kp_disruption_controller *ctl)
{
    return ctl && kp_controller_ready(ctl->base);
}

struct kp_disruption_controller *kp_disruption_controller_free(struct kp_disruption_controller *ctl)
{
    if (!ctl)
        return NULL;
    ctl->base = kp_controller_free(ctl->base);
    cmd_clear(ctl);
    kp_free(ctl);
    return NULL;
}
