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
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
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
#include "api/duration.h"
#include "api/indexes.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-misc.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/conds.h"
#include "core/core.h"
#include "core/disruption/budget.h"
#include "core/disruption/consolidation.h"
#include "core/disruption/drift.h"
#include "core/disruption/marking.h"
#include "core/expiration/expiration.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/provisioning/pods.h"
#include "core/provisioning/provisioner.h"
#include "core/provisioning/scheduler.h"
#include "core/provisioning/simulation.h"
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
    if (!sn->nodeclaim)
        n = snprintf(buf, size, "node isn't managed by karpenter");
    else if (!sn->node)
        n = snprintf(buf, size, "nodeclaim does not have an associated node");
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
        n = snprintf(buf, size, "node doesn't have required label (label=%s)",
                     KP_CORE_LABEL_NODEPOOL);
    else if (!d->np)
        n = snprintf(buf, size, "NodePool not found (NodePool=%s)", sn->nodepool);
    else if (d->blocking_pod)
        n = snprintf(buf, size, "pod has \"%s\" annotation (Pod=%s)", KP_CORE_ANN_DO_NOT_DISRUPT,
                     d->blocking_pod);
    else if (d->blocking_pdb)
        n = snprintf(buf, size, "%s", d->blocking_pdb);
    else
        return NULL;
    return n < 0 ? "" : buf;
}

const char *kp_disruption_blocked_note(const char *why, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    (void)snprintf(buf, size, "%s", why);
    if (buf[0] >= 'a' && buf[0] <= 'z')
        buf[0] = (char)(buf[0] - 'a' + 'A');
    return buf;
}

/* Appends text to buf[size] at *len, cut short at the end (buf stays terminated). */
static void put(char *buf, size_t size, size_t *len, const char *text, size_t n)
{
    for (size_t i = 0; i < n && *len + 1 < size; i++)
        buf[(*len)++] = text[i];
    buf[*len] = '\0';
}

/* Appends s quoted as Go's %q (strconv.Quote) writes it: \" and \\ escaped, Go's short escapes
 * for control characters, other bytes below 0x20 and 0x7f as \xNN. XXX: bytes from 0x80 up are
 * copied as they are, which is strconv.Quote's output for printable UTF-8 only (it escapes
 * invalid UTF-8 and unprintable runes); an annotation value like that is far-fetched. */
static void put_go_quoted(char *buf, size_t size, size_t *len, const char *s)
{
    static const char shorts[] = "abtnvfr"; /* \a .. \r for 0x07 .. 0x0d */
    static const char hex[] = "0123456789abcdef";

    put(buf, size, len, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char e[4] = {'\\', (char)c, 0, 0};

        if (c == '"' || c == '\\')
            put(buf, size, len, e, 2);
        else if (c >= 0x07 && c <= 0x0d) {
            e[1] = shorts[c - 0x07];
            put(buf, size, len, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            e[1] = 'x';
            e[2] = hex[c >> 4];
            e[3] = hex[c & 0xf];
            put(buf, size, len, e, 4);
        } else
            put(buf, size, len, s, 1);
    }
    put(buf, size, len, "\"", 1);
}

#define PUT(text) put(buf, size, &len, (text), strlen(text))

const char *kp_disruption_invalid_do_not_disrupt(const struct kp_pod_view *p, char *buf,
                                                 size_t size)
{
    const char *v = p->do_not_disrupt;
    char err[512];
    size_t len = 0;

    if (!v || strcmp(v, "true") == 0 || p->do_not_disrupt_ns > 0 || size == 0)
        return NULL;
    buf[0] = '\0';
    PUT("Invalid " KP_CORE_ANN_DO_NOT_DISRUPT " annotation: ");
    if (kp_duration_parse_error(v, strlen(v), err, sizeof(err))) {
        PUT("failed to parse ");
        put_go_quoted(buf, size, &len, v);
        PUT(" as a duration: ");
        PUT(err);
    } else {
        PUT("duration ");
        put_go_quoted(buf, size, &len, v);
        PUT(" must be positive");
    }
    PUT(", ignoring annotation");
    return buf;
}

#undef PUT

const char *kp_disruption_do_not_disrupt_event(const struct kp_pod_view *p, int64_t now_usec,
                                               char *buf, size_t size)
{
    char at[KP_RFC3339_STRMAX];

    if (p->do_not_disrupt_ns <= 0 || !p->start_usec || (p->flags & KP_POD_DO_NOT_DISRUPT) ||
        size == 0)
        return NULL;
    if (!kp_pod_do_not_disrupt_active(p, now_usec)) {
        (void)snprintf(buf, size,
                       "The " KP_CORE_ANN_DO_NOT_DISRUPT
                       " grace period has elapsed, pod is now disruptable");
        return "DoNotDisruptGracePeriodElapsed";
    }
    if (kp_rfc3339_format(p->start_usec + p->do_not_disrupt_ns / KP_NSEC_PER_USEC,
                          KP_RFC3339_SECONDS, at, sizeof(at)) < 0)
        return NULL;
    (void)snprintf(buf, size, "The " KP_CORE_ANN_DO_NOT_DISRUPT " grace period will elapse at %s",
                   at);
    return "DoNotDisruptUntil";
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

struct kp_pool_budget *kp_pool_budget(struct kp_pool_budget *pools, size_t *n_pools,
                                      const struct kp_dnode *v, size_t n, const struct kp_dnode *d,
                                      uint32_t reason, int64_t now_usec)
{
    struct kp_pool_budget *pb;
    int64_t nodes, disrupting, allowed;

    for (size_t k = 0; k < *n_pools; k++)
        if (strcmp(pools[k].nodepool, d->sn->nodepool) == 0)
            return &pools[k];
    kp_disruption_pool_counts(v, n, d->sn->nodepool, &nodes, &disrupting);
    allowed =
        kp_budget_allowed(d->np->budgets, d->np->n_budgets, reason, nodes, now_usec / USEC_PER_SEC);
    pb = &pools[(*n_pools)++];
    pb->nodepool = d->sn->nodepool;
    pb->remaining = kp_budget_remaining(allowed, disrupting);
    return pb;
}

void kp_disruption_report_budgets(const struct kp_dnode *v, size_t n, uint32_t reason_bit,
                                  const char *reason, int64_t now_usec,
                                  const struct kp_core_observer *o, kp_pool_blocked_fn blocked,
                                  void *ctx)
{
    char note[160];

    for (size_t i = 0; i < n; i++) {
        const struct kp_nodepool_view *np = v[i].np;
        bool first = true;
        int64_t nodes, disrupting, allowed;

        if (!np)
            continue;
        for (size_t k = 0; k < i && first; k++)
            first = !v[k].np || !kp_streq(v[k].np->e.name, np->e.name);
        if (!first)
            continue;
        kp_disruption_pool_counts(v, n, np->e.name, &nodes, &disrupting);
        allowed = kp_budget_allowed(np->budgets, np->n_budgets, reason_bit, nodes,
                                    now_usec / USEC_PER_SEC);
        kp_core_gauge(o, KP_CM_NODEPOOLS_ALLOWED_DISRUPTIONS, KP_CM_LABELS(np->e.name, reason),
                      (double)(allowed == KP_BUDGET_UNLIMITED ? nodes : allowed));
        kp_core_gauge(o, KP_CM_NODEPOOLS_NODES_CONSUMING_BUDGETS, KP_CM_LABELS(np->e.name, reason),
                      (double)disrupting);
        if (blocked && nodes > 0 && allowed == 0) {
            (void)snprintf(note, sizeof(note), KP_DISRUPTION_POOL_BLOCKED_FMT, reason);
            blocked(ctx, np, note);
        }
    }
}

size_t kp_emptiness_select(const struct kp_dnode *v, size_t n, const bool *only, int64_t now_usec,
                           size_t *ret_idx, bool *ret_blocked)
{
    struct kp_pool_budget *pools = NULL;
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
        struct kp_pool_budget *pb =
            kp_pool_budget(pools, &n_pools, v, n, d, KP_DISRUPT_EMPTY, now_usec);

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

struct kp_replace_step kp_replace_decide(size_t n_cand, const enum kp_replace_seen *seen,
                                         size_t n_repl, size_t in_state, bool marked,
                                         int64_t elapsed_usec, bool forceful)
{
    struct kp_replace_step s = {.action = KP_REPLACE_WAIT, .requeue_usec = SOON_USEC};
    size_t ready = 0;
    bool failed = false, gave_up;

    if (n_cand == 0) {
        s.action = KP_REPLACE_FORGET;
        return s;
    }
    for (size_t k = 0; k < n_repl && !failed; k++) {
        switch (seen[k]) {
        case KP_REPLACE_SEEN_MISSING: /* the cache may lag the create a little, no more */
            failed = elapsed_usec > (int64_t)KP_DISRUPTION_REPLACE_CACHE_USEC;
            break;
        case KP_REPLACE_SEEN_DELETING:
            failed = true;
            break;
        case KP_REPLACE_SEEN_INITIALIZED:
            ready++;
            break;
        case KP_REPLACE_SEEN_LAUNCHING:
            break;
        }
    }
    if (!failed && in_state == n_repl && !marked)
        s.mark = marked = true;
    /* Deletes that keep failing (a webhook, RBAC) must not hold the loop for ever either; an
     * expiry is then left to the expiration controller's own delete. */
    gave_up = elapsed_usec > 2 * (int64_t)KP_DISRUPTION_REPLACE_TIMEOUT_USEC;
    failed = failed || gave_up;
    if (!failed && ready == n_repl) {
        s.action = KP_REPLACE_DELETE;
        return s;
    }
    if (!failed)
        failed = elapsed_usec > (int64_t)KP_DISRUPTION_REPLACE_TIMEOUT_USEC;
    if (failed && forceful && !gave_up) { /* an expiry goes without its replacements */
        s.action = KP_REPLACE_DELETE;
        /* Marked before its delete, as every other delete is, so no pass in between takes it
         * for a node no command holds and the clean-up leaves its taint on. */
        s.mark = !marked;
        return s;
    }
    if (failed) {
        s.action = KP_REPLACE_ROLLBACK;
        s.unmark = marked;
        s.requeue_usec = KP_DISRUPTION_POLL_USEC;
        return s;
    }
    /* Polled every second at first, as a join is often quick, then every 5 s (upstream backs
     * off to 10 s). */
    if (elapsed_usec > 30 * USEC_PER_SEC)
        s.requeue_usec = 5 * SOON_USEC;
    return s;
}

/* The expiry of d's NodeClaim (the plan's), for the order below. */
static int64_t expiry_of(const struct kp_provider *p, const struct kp_dnode *d, int64_t now)
{
    return kp_expiration_plan(p, kp_nodeclaim_view(d->sn->nodeclaim), now).expiry_usec;
}

size_t kp_expiry_candidates(const struct kp_provider *p, const struct kp_dnode *v, size_t n,
                            int64_t now_usec, size_t *ret_idx)
{
    size_t n_cand = 0;

    for (size_t i = 0; i < n; i++) {
        const struct kp_state_node *sn = v[i].sn;
        struct kp_expiration_plan plan;

        if (!sn->nodeclaim || !sn->node ||
            (sn->flags & (KP_STATE_NODE_DELETING | KP_STATE_NODE_MARKED_FOR_DELETION)))
            continue;
        plan = kp_expiration_plan(p, kp_nodeclaim_view(sn->nodeclaim), now_usec);
        if (kp_expiration_replace_wait(&plan, now_usec, true, v[i].reschedulable) >
            KP_DISRUPTION_REPLACE_TIMEOUT_USEC + KP_DISRUPTION_POLL_USEC)
            ret_idx[n_cand++] = i;
    }
    for (size_t i = 1; i < n_cand; i++) { /* insertion sort: stable, total order */
        size_t x = ret_idx[i], j = i;
        int64_t ex = expiry_of(p, &v[x], now_usec);

        for (; j > 0; j--) {
            const struct kp_dnode *y = &v[ret_idx[j - 1]];
            int64_t ey = expiry_of(p, y, now_usec);

            if (ey < ex || (ey == ex && strcmp(kp_nodeclaim_view(y->sn->nodeclaim)->e.name,
                                               kp_nodeclaim_view(v[x].sn->nodeclaim)->e.name) <= 0))
                break;
            ret_idx[j] = ret_idx[j - 1];
        }
        ret_idx[j] = x;
    }
    return n_cand;
}

/* --- the controller ------------------------------------------------------------------------------ */

/* The methods a command comes from. */
enum method {
    METHOD_EMPTINESS = 0,
    METHOD_MULTI,     /* multi-node consolidation, waiting for its validation */
    METHOD_SINGLE,    /* single-node consolidation, waiting for its validation */
    METHOD_REPLACING, /* single-node consolidation's replacement in flight */
};

struct kp_disruption_controller {
    const struct kp_core_env *env;
    struct kp_store *nodepools, *pods, *nodes, *nodeclaims, *pvcs, *pdbs, *daemonsets;
    struct kp_sim_sources sources; /* what consolidation's simulations read */
    struct kp_controller *base;
    /* The command waiting for its validation: providerIDs (owned), its method, and when it
     * may act. */
    char **cmd;
    size_t n_cmd;
    enum method cmd_method;
    enum kp_consolidation_verdict cmd_verdict; /* METHOD_SINGLE: what the validation expects */
    int64_t cmd_at_usec;
    /* METHOD_REPLACING: the replacement NodeClaims (owned), why and for which consolidation
     * type (metric labels), when they were created, and whether the candidate is marked for
     * deletion yet. */
    char **repl_names;
    size_t n_repl;
    const struct reason *repl_reason;
    const char *repl_type;
    int64_t repl_started_usec;
    bool repl_marked;
    /* The "consolidated" memo (consolidation.h): changes counts the events of every informer
     * the searches read (any thread); memo and timed_out belong to the one worker. */
    atomic_uint_fast64_t changes;
    struct kp_consolidated_memo memo;
    bool timed_out; /* a search of this pass was stopped by its time limit */
};

/* One pass's view: the snapshot, the kp_dnode per state node, and what they reference. */
struct pass {
    struct kp_state_snapshot *snap;
    struct kp_dnode *v;
    struct kp_entry **pools; /* NodePool entry per state node, or NULL (references) */
    char **blocking;         /* "ns/name" per state node, or NULL (owned) */
    char **pdb_blocking;     /* the PDB sentence per state node, or NULL (owned) */
    struct kp_store_list pdbs_l;
    const struct kp_pdb_view **pdbs; /* kp_pdbs_sort's order */
    size_t n_pdbs;
    size_t n;
    /* The scheduler's input over snap (pass_sim), built on first use: Drift, multi- and
     * single-node consolidation and their validations all read this one. */
    struct kp_sim sim;
    bool sim_built;
};

static void pass_done(struct pass *p)
{
    for (size_t i = 0; i < p->n; i++) {
        if (p->pools)
            kp_entry_unref(p->pools[i]);
        if (p->blocking)
            kp_free(p->blocking[i]);
        if (p->pdb_blocking)
            kp_free(p->pdb_blocking[i]);
    }
    kp_free(p->pools);
    kp_free(p->blocking);
    kp_free(p->pdb_blocking);
    kp_free(p->pdbs);
    kp_store_list_free(&p->pdbs_l);
    kp_sim_done(&p->sim); /* before the snapshot it borrows */
    kp_free(p->v);
    kp_state_snapshot_free(p->snap);
    memset(p, 0, sizeof(*p));
}

static void do_not_disrupt_events(struct kp_disruption_controller *ctl,
                                  const struct kp_pod_view *const *pv, size_t n, int64_t now);

/* What d's pods say (kp_dnode_count_pods), from the pods bound to node name; the first
 * do-not-disrupt pod's "ns/name" in *ret_blocking (owned, NULL when none). */
static int node_pods(struct kp_disruption_controller *ctl, const struct pass *p, const char *name,
                     int64_t now, struct kp_dnode *d, char **ret_blocking, char **ret_pdb)
{
    char why[512];
    struct kp_store_list l = {0};
    const struct kp_pod_view **pv = NULL, *blocking = NULL;
    int r;

    if ((r = kp_store_by_index(ctl->pods, KP_INDEX_POD_NODE, name, &l)) < 0)
        return r;
    if (!(pv = kp_calloc(l.n ? l.n : 1, sizeof(*pv)))) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < l.n; i++)
        pv[i] = kp_pod_view(l.v[i]);
    kp_dnode_count_pods(d, pv, l.n, now, &blocking);
    /* Upstream parses a pod's annotation (and reports a bad one, or a duration's state) only
     * for a node its own checks let through: d's pod fields are not set yet, so this asks the
     * node's part alone. */
    if (!kp_disruption_blocked(d, now, why, sizeof(why)))
        do_not_disrupt_events(ctl, pv, l.n, now);
    if (blocking && !(*ret_blocking = kp_strjoin(blocking->e.ns ? blocking->e.ns : "", "/",
                                                 blocking->e.name, (const char *)NULL)))
        r = -ENOMEM;
    if (r == 0 && p->n_pdbs &&
        kp_pdbs_block_eviction(pv, l.n, p->pdbs, p->n_pdbs, now, why, sizeof(why)) &&
        !(*ret_pdb = kp_strdup(why)))
        r = -ENOMEM;
out:
    kp_free(pv);
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
    p->pdb_blocking = kp_calloc(p->n, sizeof(*p->pdb_blocking));
    if (!p->v || !p->pools || !p->blocking || !p->pdb_blocking)
        return -ENOMEM;
    /* The PDBs once per pass, sorted for kp_pdbs_block_eviction's lookup by namespace. */
    if ((r = kp_store_list(ctl->pdbs, &p->pdbs_l)) < 0)
        return r;
    if (!(p->pdbs = kp_calloc(p->pdbs_l.n + 1, sizeof(*p->pdbs))))
        return -ENOMEM;
    for (size_t i = 0; i < p->pdbs_l.n; i++)
        p->pdbs[p->n_pdbs++] = kp_pdb_view(p->pdbs_l.v[i]);
    kp_pdbs_sort(p->pdbs, p->n_pdbs);
    for (size_t i = 0; i < p->n; i++) {
        const struct kp_state_node *sn = &p->snap->v[i];

        p->v[i].sn = sn;
        if (!sn->node || !sn->nodeclaim)
            continue;
        if (sn->nodepool && kp_store_get(ctl->nodepools, sn->nodepool, &p->pools[i]) == 0)
            p->v[i].np = kp_nodepool_view(p->pools[i]);
        /* Only a node a method could take needs its pods looked at: Consolidatable ones (with
         * none counted yet, kp_emptiness_wants says whether Emptiness or consolidation could),
         * drifted ones and expired ones. A busy, settled pool costs no pod walk per pass. */
        if (!kp_emptiness_wants(&p->v[i]) &&
            !cond_true(&kp_nodeclaim_view(sn->nodeclaim)->conditions, KP_NC_COND_DRIFTED) &&
            kp_expiration_plan(ctl->env->provider, kp_nodeclaim_view(sn->nodeclaim), now).action !=
                KP_EXPIRATION_DELETE)
            continue;
        if ((r = node_pods(ctl, p, sn->node_name, now, &p->v[i], &p->blocking[i],
                           &p->pdb_blocking[i])) < 0)
            return r;
        p->v[i].blocking_pod = p->blocking[i];
        p->v[i].blocking_pdb = p->pdb_blocking[i];
        p->v[i].walked = true;
    }
    return 0;
}

/* The pass's simulation input (see struct pass), built on first use. 0 with *ret, or the
 * build's error (a later call tries again). */
static int pass_sim(struct kp_disruption_controller *ctl, struct kp_client *c,
                    const struct kp_ctx *cx, struct pass *p, struct kp_sim **ret)
{
    int r;

    if (!p->sim_built) {
        if ((r = kp_sim_build(&ctl->sources, p->snap, c, cx, &p->sim)) < 0) {
            kp_sim_done(&p->sim);
            return r;
        }
        p->sim_built = true;
    }
    *ret = &p->sim;
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
    struct kp_event_ref ref = {.kind = kind, .api_version = api_version};

    if (!ev || !e) /* no recorder; or the object is gone (a Node removed mid-command) */
        return;
    ref.name = e->name;
    ref.uid = e->uid;
    (void)kp_events_emit(ev, &ref, type, reason, /* action= */ "Disruption", note);
}

/* InvalidDoNotDisruptAnnotation (Warning) on each active pod of pv[0..n) whose
 * karpenter.sh/do-not-disrupt value Karpenter ignores, as upstream's IsDoNotDisruptActive
 * publishes it while it looks at a candidate's pods (the recorder folds the repeats of every
 * pass). */
static void do_not_disrupt_events(struct kp_disruption_controller *ctl,
                                  const struct kp_pod_view *const *pv, size_t n, int64_t now)
{
    struct kp_events *ev = events(ctl);
    char note[768];

    for (size_t i = 0; ev && i < n; i++) {
        struct kp_event_ref ref = {.kind = "Pod", .api_version = "v1"};
        const char *reason;
        enum kp_event_type type = KP_EVENT_NORMAL;

        if (!kp_pod_active(pv[i]))
            continue;
        if (kp_disruption_invalid_do_not_disrupt(pv[i], note, sizeof(note))) {
            reason = "InvalidDoNotDisruptAnnotation";
            type = KP_EVENT_WARNING;
        } else if (!(reason = kp_disruption_do_not_disrupt_event(pv[i], now, note, sizeof(note)))) {
            continue;
        }
        ref.ns = pv[i]->e.ns;
        ref.name = pv[i]->e.name;
        ref.uid = pv[i]->e.uid;
        (void)kp_events_emit(ev, &ref, type, reason, /* action= */ "Disruption", note);
    }
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

/* Adds (add) or removes the disrupted taint on node, CAS on rv (NULL: its cached
 * resourceVersion); *ret_rv (optional): the resourceVersion the write gave the Node
 * (kp_patch_cas_rv). */
static int write_taint(struct kp_client *c, const struct kp_node_view *n, const char *rv, bool add,
                       char **ret_rv)
{
    json_t *body = NULL, *taints = NULL;
    char *msg = NULL;
    int r;

    if ((r = kp_json_patch_new(&body)) < 0)
        return r;
    if ((r = kp_taints_disrupted(n, add, &taints)) < 0 ||
        (r = kp_json_patch_set_steal(body, KP_JSON_PATH("spec", "taints"), taints)) < 0)
        goto out;
    r = kp_patch_cas_rv(c, &KP_RES_NODE, NULL, n->e.name, NULL, rv ? rv : n->e.rv, body, ret_rv,
                        &msg);
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
            if (write_taint(c, kp_node_view(ne), NULL, false, NULL) == 0)
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

/* A disruption reason, its spelling in most metric labels, its budget bit, and whether it is
 * consolidation (the consolidation_policy label) or forceful (expiry: nothing holds it back). */
struct reason {
    const char *name;  /* DisruptionReason, events, the nodepools_* metrics: "Empty" */
    const char *label; /* the other metrics: "empty" */
    uint32_t bit;      /* budget.h; 0: no budget */
    bool consolidation, forceful;
};
static const struct reason REASON_EMPTY = {KP_DISRUPTION_REASON_EMPTY, "empty", KP_DISRUPT_EMPTY,
                                           true, false};
static const struct reason REASON_UNDERUTILIZED = {
    KP_DISRUPTION_REASON_UNDERUTILIZED, "underutilized", KP_DISRUPT_UNDERUTILIZED, true, false};
static const struct reason REASON_DRIFTED = {KP_DISRUPTION_REASON_DRIFTED, "drifted",
                                             KP_DISRUPT_DRIFTED, false, false};
static const struct reason REASON_EXPIRED = {KP_DISRUPTION_REASON_EXPIRED, "expired", 0, false,
                                             true};

/* Undoes what disrupt_begin did to sn: the taint (the store's newest Node's taints without it,
 * under taint_rv, the resourceVersion the taint's own write gave the Node, when the server said
 * it: an undo in the same pass comes before the cache has seen the taint, and the cached
 * resourceVersion would only meet a Conflict; otherwise under the cached one. A conflict leaves it
 * to the next pass's clean-up), the DisruptionReason (with_reason), the mark. */
static void disrupt_rollback(struct kp_disruption_controller *ctl, struct kp_client *c,
                             const struct kp_state_node *sn, bool tainted, const char *taint_rv,
                             bool with_reason, bool marked, int64_t now)
{
    if (tainted && sn->node) {
        struct kp_entry *again = fresh(ctl->nodes, sn->node);

        if (again) {
            (void)write_taint(c, kp_node_view(again), taint_rv, false, NULL);
            kp_entry_unref(again);
        }
    }
    if (with_reason && sn->nodeclaim) {
        struct kp_entry *again = fresh(ctl->nodeclaims, sn->nodeclaim);

        if (again) {
            (void)write_reason(ctl, c, kp_nodeclaim_view(again), NULL, now);
            kp_entry_unref(again);
        }
    }
    if (marked && kp_cluster_state_mark_for_deletion(ctl->env->cluster, sn->provider_id, false) < 0)
        kp_log_debug("disruption mark not taken back: the node left the state",
                     KP_LF("provider-id", sn->provider_id));
}

/* The first steps of disrupting sn: mark it for deletion in the cluster state
 * (mark), check that no do-not-disrupt annotation or nomination came since the snapshot, taint
 * it karpenter.sh/disrupted:NoSchedule and set DisruptionReason (strict: a failed condition
 * write fails the step, as a command with replacements must). *ret_tainted / *ret_marked say
 * what to roll back, *ret_taint_rv (owned, may be NULL) under which resourceVersion (see
 * disrupt_rollback); they are set on failure too. 0, -KP_ECONFLICT (changed since the
 * snapshot), or a write error. */
static int disrupt_begin(struct kp_disruption_controller *ctl, struct kp_client *c,
                         const struct kp_state_node *sn, const struct reason *why, bool mark,
                         bool strict, int64_t now, bool *ret_tainted, char **ret_taint_rv,
                         bool *ret_marked)
{
    struct kp_entry *ne = fresh(ctl->nodes, sn->node), *ce = fresh(ctl->nodeclaims, sn->nodeclaim);
    const struct kp_node_view *nv;
    int r;

    *ret_tainted = *ret_marked = false;
    *ret_taint_rv = NULL;
    if (!ne || !ce) {
        r = -KP_ECONFLICT; /* gone or replaced since the snapshot: decided again next pass */
        goto out;
    }
    nv = kp_node_view(ne);
    if (mark) {
        if ((r = kp_cluster_state_mark_for_deletion(ctl->env->cluster, sn->provider_id, true)) < 0)
            goto out;
        *ret_marked = true;
    }
    /* Marked, the node takes no new nomination; one made, or a do-not-disrupt annotation
     * added, since the snapshot still wins (over all but an expiry). */
    if (!why->forceful &&
        (kp_streq(kp_labels_get(&nv->annotations, KP_CORE_ANN_DO_NOT_DISRUPT), "true") ||
         nominated_now(ctl, sn->provider_id))) {
        r = -KP_ECONFLICT;
        goto out;
    }
    if (!has_disrupted_taint(nv)) {
        if ((r = write_taint(c, nv, NULL, true, ret_taint_rv)) < 0)
            goto out;
        *ret_tainted = true;
    }
    /* The condition tells users why; without replacements a failed write does not stop the
     * command (as upstream). */
    r = write_reason(ctl, c, kp_nodeclaim_view(ce), why->name, now);
    if (!strict)
        r = 0;
out:
    kp_entry_unref(ne);
    kp_entry_unref(ce);
    return r;
}

/* The last step: deletes sn's NodeClaim (uid precondition), with DisruptionTerminating events
 * and karpenter_nodeclaims_disrupted_total. */
static int disrupt_delete(struct kp_disruption_controller *ctl, struct kp_client *c,
                          const struct kp_dnode *d, const struct reason *why)
{
    const struct kp_state_node *sn = d->sn;
    struct kp_entry *ce = fresh(ctl->nodeclaims, sn->nodeclaim);
    const struct kp_nodeclaim_view *nc;
    const char *ct, *it;
    char *msg = NULL, note[64];
    int r;

    if (!ce)
        return -KP_ECONFLICT;
    nc = kp_nodeclaim_view(ce);
    if (nc->meta.deletion_usec) { /* deleted by someone else (the expiration controller's
                                   * fallback): theirs to count, and a second delete of the
                                   * NodeClaim its finalizer holds would be accepted */
        r = 0;
        goto out;
    }
    ct = kp_labels_get(&nc->meta.labels, KP_LABEL_CAPACITY_TYPE);
    it = kp_labels_get(&nc->meta.labels, KP_LABEL_INSTANCE_TYPE);
    r = kp_delete_uid(c, &KP_RES_NODECLAIM, NULL, nc->e.name, nc->e.uid, &msg);
    if (r == -ENOENT) { /* deleted meanwhile, not by us: its end is not ours to count */
        r = 0;
        goto out;
    }
    if (r < 0) {
        kp_log_warn_errno(r, "disrupting nodeclaim failed", KP_LF("NodeClaim", nc->e.name),
                          KP_LF("detail", msg ? msg : ""));
        goto out;
    }
    kp_log_debug("disrupted node", KP_LF("reason", why->name), KP_LF("NodeClaim", nc->e.name),
                 KP_LF("Node", sn->node_name ? sn->node_name : ""), KP_LF("nodepool", sn->nodepool),
                 KP_LF("instance-type", it ? it : ""), KP_LF("capacity-type", ct ? ct : ""));
    (void)snprintf(note, sizeof(note), "Disrupting Node: %s", why->name);
    emit(ctl, sn->node, "Node", "v1", KP_EVENT_NORMAL, "DisruptionTerminating", note);
    (void)snprintf(note, sizeof(note), "Disrupting NodeClaim: %s", why->name);
    emit(ctl, sn->nodeclaim, "NodeClaim", "karpenter.sh/v1", KP_EVENT_NORMAL,
         "DisruptionTerminating", note);
    {
        /* Drift and expiry are no consolidation: no policy label (as upstream). */
        const char *const *labels = KP_CM_LABELS(
            why->label, sn->nodepool, ct ? ct : "",
            d->np && why->consolidation ? policy_label(d->np) : "", kp_core_termination_mode(nc));

        kp_core_count(ctl->env->observer, KP_CM_NODECLAIMS_DISRUPTED, labels);
        for (uint32_t k = 0; k < d->reschedulable; k++)
            kp_core_count(ctl->env->observer, KP_CM_PODS_DISRUPTION_INITIATED, labels);
    }
out:
    kp_free(msg);
    kp_entry_unref(ce);
    return r;
}

/* Disrupts one validated node without replacement: begin, then delete; a failure before the
 * delete is rolled back. The caller logs and counts the command. */
static int disrupt(struct kp_disruption_controller *ctl, struct kp_client *c,
                   const struct kp_dnode *d, const struct reason *why, int64_t now)
{
    bool tainted, marked;
    char *taint_rv = NULL;
    int r = disrupt_begin(ctl, c, d->sn, why, true, false, now, &tainted, &taint_rv, &marked);

    if (r == 0)
        r = disrupt_delete(ctl, c, d, why);
    if (r < 0)
        disrupt_rollback(ctl, c, d->sn, tainted, taint_rv, false, marked, now);
    kp_free(taint_rv);
    return r;
}

/* karpenter_nodepools_allowed_disruptions and _nodes_consuming_budgets for every NodePool with
 * nodes and every reason, each pass. Upstream sets them only for the methods a pass reaches
 * with candidates; each pass here keeps every series current instead, with the same values. */
static void report_budgets(struct kp_disruption_controller *ctl, const struct pass *p, int64_t now)
{
    static const struct reason *const reasons[] = {&REASON_EMPTY, &REASON_DRIFTED,
                                                   &REASON_UNDERUTILIZED};

    struct kp_store_list l = {0};

    for (size_t k = 0; k < KP_ARRAY_SIZE(reasons); k++)
        kp_disruption_report_budgets(p->v, p->n, reasons[k]->bit, reasons[k]->name, now,
                                     ctl->env->observer, /* blocked= */ NULL, NULL);
    /* A NodePool without nodes reports too (upstream's budget mapping walks every NodePool), so
     * a pool that drained to none does not keep its last figures. */
    if (kp_store_list(ctl->nodepools, &l) < 0)
        return;
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_nodepool_view *np = kp_nodepool_view(l.v[i]);
        bool has_nodes = false;

        for (size_t j = 0; j < p->n && !has_nodes; j++)
            has_nodes = p->v[j].np && kp_streq(p->v[j].np->e.name, np->e.name);
        if (has_nodes || !kp_provider_supports(ctl->env->provider, &np->tmpl.node_class_ref))
            continue;
        for (size_t k = 0; k < KP_ARRAY_SIZE(reasons); k++) {
            int64_t a = kp_budget_allowed(np->budgets, np->n_budgets, reasons[k]->bit, 0,
                                          now / USEC_PER_SEC);

            kp_core_gauge(ctl->env->observer, KP_CM_NODEPOOLS_ALLOWED_DISRUPTIONS,
                          KP_CM_LABELS(np->e.name, reasons[k]->name),
                          (double)(a == KP_BUDGET_UNLIMITED ? 0 : a));
            kp_core_gauge(ctl->env->observer, KP_CM_NODEPOOLS_NODES_CONSUMING_BUDGETS,
                          KP_CM_LABELS(np->e.name, reasons[k]->name), 0);
        }
    }
    kp_store_list_free(&l);
}

static void pool_blocked_cb(void *ctx, const struct kp_nodepool_view *np, const char *note)
{
    emit(ctx, &np->e, "NodePool", "karpenter.sh/v1", KP_EVENT_NORMAL, "DisruptionBlocked", note);
}

/* One method's evaluation, reported as upstream's disrupt() does for each method it tries:
 * karpenter_voluntary_disruption_eligible_nodes{reason} (its candidates),
 * _decision_evaluation_duration_seconds{reason, consolidation_type} (from eval_begin to
 * eval_end: the search, not the 15 s validation wait, which here is a later pass), and, when it
 * has candidates, the DisruptionBlocked event of every NodePool with nodes whose budgets allow
 * none for its reason (the recorder folds the repeats of every pass). */
struct eval {
    const struct reason *why;
    const char *type; /* consolidation_type */
    uint64_t started_usec;
};

static struct eval eval_begin(const struct reason *why, const char *type)
{
    return (struct eval){.why = why, .type = type, .started_usec = kp_mono_usec()};
}

static void eval_end(struct kp_disruption_controller *ctl, const struct pass *p,
                     const struct eval *e, size_t eligible, int64_t now)
{
    const struct kp_core_observer *o = ctl->env->observer;

    kp_core_gauge(o, KP_CM_VOLUNTARY_DISRUPTION_ELIGIBLE_NODES, KP_CM_LABELS(e->why->label),
                  (double)eligible);
    if (eligible > 0)
        kp_disruption_report_budgets(p->v, p->n, e->why->bit, e->why->name, now,
                                     /* o= */ NULL, pool_blocked_cb, ctl);
    kp_core_observe(o, KP_CM_VOLUNTARY_DISRUPTION_EVALUATION_DURATION,
                    KP_CM_LABELS(e->why->label, e->type),
                    (double)(kp_mono_usec() - e->started_usec) / (double)USEC_PER_SEC);
}

/* karpenter_voluntary_disruption_decisions_total{decision, reason, consolidation_type} once,
 * and _decisions_by_nodepool_total once for each NodePool of the nodes d[0..k). */
static void count_decision(struct kp_disruption_controller *ctl, const struct kp_dnode *const *d,
                           size_t k, const char *decision, const struct reason *why,
                           const char *type)
{
    const struct kp_core_observer *o = ctl->env->observer;

    for (size_t i = 0; i < k; i++) {
        bool first = true;

        for (size_t j = 0; j < i && first; j++)
            first = !kp_streq(d[j]->sn->nodepool, d[i]->sn->nodepool);
        if (first)
            kp_core_count(o, KP_CM_VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL,
                          KP_CM_LABELS(d[i]->sn->nodepool ? d[i]->sn->nodepool : "", decision,
                                       why->label, type));
    }
    kp_core_count(o, KP_CM_VOLUNTARY_DISRUPTION_DECISIONS,
                  KP_CM_LABELS(decision, why->label, type));
}

/* DisruptionBlocked on d's Node and NodeClaim with why as upstream's Blocked event writes it:
 * the same message on both, its first letter upper-case (pretty.Sentence). */
static void blocked_event(struct kp_disruption_controller *ctl, const struct kp_dnode *d,
                          const char *why)
{
    char note[640];

    kp_disruption_blocked_note(why, note, sizeof(note));
    emit(ctl, d->sn->node, "Node", "v1", KP_EVENT_NORMAL, "DisruptionBlocked", note);
    emit(ctl, d->sn->nodeclaim, "NodeClaim", "karpenter.sh/v1", KP_EVENT_NORMAL,
         "DisruptionBlocked", note);
}

/* DisruptionBlocked on the Node and the NodeClaim of every node a method could take (it is
 * Consolidatable or Drifted) but may not, with Karpenter's sentence: what keeps it is then
 * visible in kubectl describe. Only those: a busy, settled node is not news. */
static void report_blocked(struct kp_disruption_controller *ctl, const struct pass *p, int64_t now)
{
    char why[256];

    for (size_t i = 0; i < p->n; i++) {
        const struct kp_dnode *d = &p->v[i];
        const char *b;

        if (!d->sn->node || !d->sn->nodeclaim || !d->walked ||
            !(b = kp_disruption_blocked(d, now, why, sizeof(why))) ||
            (d->sn->flags & (KP_STATE_NODE_DELETING | KP_STATE_NODE_MARKED_FOR_DELETION)))
            continue;
        blocked_event(ctl, d, b);
    }
}

/* --- single-node consolidation ----------------------------------------------------------------- */

/* Unconsolidatable on the Node and the NodeClaim of d, with Karpenter's sentence. */
static void unconsolidatable(struct kp_disruption_controller *ctl, const struct kp_dnode *d,
                             const char *why)
{
    emit(ctl, d->sn->node, "Node", "v1", KP_EVENT_NORMAL, "Unconsolidatable", why);
    emit(ctl, d->sn->nodeclaim, "NodeClaim", "karpenter.sh/v1", KP_EVENT_NORMAL, "Unconsolidatable",
         why);
}

static void unconsolidatable_cb(void *ctx, const struct kp_dnode *d, const char *why)
{
    unconsolidatable(ctx, d, why);
}

/* Whether a search run under own (a child of cx with the search's time limit) was ended by
 * that limit rather than by cx. The search checks its context between trials, so one that
 * finished in the moment after its last check and the limit also counts: a trial is well under
 * a second (bench/bench-disruption.c) against limits of minutes. */
static bool search_timed_out(const struct kp_ctx *cx, const struct kp_ctx *own)
{
    return kp_ctx_err(cx) == 0 && kp_ctx_err(own) == -ETIMEDOUT;
}

static void count_timeout(struct kp_disruption_controller *ctl, const char *type)
{
    ctl->timed_out = true;
    kp_core_count(ctl->env->observer, KP_CM_VOLUNTARY_DISRUPTION_CONSOLIDATION_TIMEOUTS,
                  KP_CM_LABELS(type));
    kp_log_debug("consolidation search stopped by its time limit",
                 KP_LF("consolidation-type", type));
}

/* Single-node consolidation over p (only: the command's node at validation; NULL: every node)
 * with the pass's simulation input (*ret, a REPLACE's run included, must be released before
 * the pass). quiet: no Unconsolidatable events and no time limit (a validation's second look of
 * one node); otherwise the search stops after KP_CONSOLIDATION_SINGLE_TIMEOUT_USEC with nothing
 * found, as upstream's, and counts the timeout. *ret_eligible (optional): the candidates. 1
 * found (*ret_idx, *ret), 0 none, or a negative error. */
static int consolidation_single(struct kp_disruption_controller *ctl, struct kp_client *c,
                                const struct kp_ctx *cx, struct pass *p, const bool *only,
                                bool quiet, int64_t now, size_t *ret_idx,
                                struct kp_consolidation_decision *ret, size_t *ret_eligible)
{
    size_t *cand = kp_calloc(p->n ? p->n : 1, sizeof(*cand)), n_cand;
    struct kp_sim *sim = NULL;
    struct kp_ctx own;
    int r = 0;

    memset(ret, 0, sizeof(*ret));
    if (!cand)
        return -ENOMEM;
    kp_ctx_init(&own, cx,
                quiet ? kp_deadline_never() : kp_deadline_in(KP_CONSOLIDATION_SINGLE_TIMEOUT_USEC));
    n_cand = kp_consolidation_candidates(p->v, p->n, only, now, quiet ? NULL : unconsolidatable_cb,
                                         ctl, cand);
    if (ret_eligible)
        *ret_eligible = n_cand;
    if (n_cand > 0 && (r = pass_sim(ctl, c, &own, p, &sim)) == 0)
        r = kp_consolidation_single(sim, p->v, p->n, cand, n_cand, now,
                                    quiet ? NULL : unconsolidatable_cb, ctl, &own, ret_idx, ret);
    if ((r == 0 || r == -ETIMEDOUT) && !quiet && search_timed_out(cx, &own)) {
        count_timeout(ctl, "single");
        r = 0; /* as upstream's: nothing this pass (the input's build included) */
    }
    kp_free(cand);
    return r;
}

/* Forgets the replacements in flight. */
static void replacing_clear(struct kp_disruption_controller *ctl)
{
    for (size_t k = 0; k < ctl->n_repl; k++)
        kp_free(ctl->repl_names[k]);
    kp_free(ctl->repl_names);
    ctl->repl_names = NULL;
    ctl->n_repl = 0;
    ctl->repl_marked = false;
    cmd_clear(ctl);
}

/* Launches claims[0..n) (n >= 1, of in's plan) to replace the nodes d[0..k) (the orchestration
 * queue's first steps): taint and DisruptionReason on each first (a failure aborts the command), then
 * the NodeClaims. On success the command is in flight (replacing_step finishes it; ctl->cmd
 * must hold the candidates' providerIDs); on failure what was done to the candidates is rolled
 * back (NodeClaims already created stay, and Emptiness takes them back). */
static int replace_begin(struct kp_disruption_controller *ctl, struct kp_client *c,
                         const struct kp_dnode *const *d, size_t k, const struct reason *why,
                         const char *consolidation_type, const struct kp_sched_input *in,
                         const struct kp_sched_claim *claims, size_t n, int64_t now)
{
    bool *tainted = kp_calloc(k, sizeof(*tainted)), marked = false;
    char **taint_rv = kp_calloc(k, sizeof(*taint_rv));
    size_t begun = 0;
    char note[96];
    int r = 0;

    if (!tainted || !taint_rv || !(ctl->repl_names = kp_calloc(n, sizeof(*ctl->repl_names)))) {
        kp_free(tainted);
        kp_free(taint_rv);
        return -ENOMEM;
    }
    for (; begun < k && r == 0; begun++)
        r = disrupt_begin(ctl, c, d[begun]->sn, why, false, true, now, &tainted[begun],
                          &taint_rv[begun], &marked);
    if (r < 0)
        goto fail;
    for (size_t q = 0; q < n; q++) {
        if ((r = kp_provisioner_create(c, in->pools[claims[q].pool].np, &claims[q], why->label,
                                       ctl->env->observer, &ctl->repl_names[q])) < 0)
            goto fail;
        ctl->n_repl++;
    }
    ctl->repl_reason = why;
    ctl->repl_type = consolidation_type;
    /* Counted when the command starts, as upstream: a failure shows in queue_failures too. An
     * expiry is no voluntary disruption. */
    if (!why->forceful)
        count_decision(ctl, d, k, "replace", why, consolidation_type);
    ctl->repl_started_usec = now;
    ctl->repl_marked = false;
    ctl->cmd_method = METHOD_REPLACING;
    (void)snprintf(note, sizeof(note), "Launching NodeClaim: %s", why->name);
    for (size_t i = 0; i < k; i++) {
        emit(ctl, d[i]->sn->node, "Node", "v1", KP_EVENT_NORMAL, "DisruptionLaunching", note);
        emit(ctl, d[i]->sn->nodeclaim, "NodeClaim", "karpenter.sh/v1", KP_EVENT_NORMAL,
             "DisruptionLaunching", note);
    }
    kp_log_info("disrupting node(s)", KP_LF("decision", "replace"), KP_LF("reason", why->name),
                KP_LF("nodes", (uint64_t)k), KP_LF("first", d[0]->sn->name),
                KP_LF("replacements", (uint64_t)n), KP_LF("replacement", ctl->repl_names[0]));
    r = 0;
    goto out;
fail:
    for (size_t i = 0; i < begun; i++)
        disrupt_rollback(ctl, c, d[i]->sn, tainted[i], taint_rv[i], true, false, now);
    for (size_t q = 0; q < n; q++)
        kp_free(ctl->repl_names[q]);
    kp_free(ctl->repl_names);
    ctl->repl_names = NULL;
    ctl->n_repl = 0;
out:
    for (size_t i = 0; i < k; i++)
        kp_free(taint_rv[i]);
    kp_free(taint_rv);
    kp_free(tainted);
    return r;
}

static size_t ready_count(const enum kp_replace_seen *seen, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += seen[i] == KP_REPLACE_SEEN_INITIALIZED;
    return k;
}

/* The replacements in flight, each pass (§5.8 steps 4-6), as kp_replace_decide says: the
 * candidates marked for deletion once every replacement is in the cluster state, deleted once
 * every one is Initialized, the command rolled back when it failed. A candidate that went away
 * meanwhile is left out. *ret_requeue: when to look again. */
static int replacing_step(struct kp_disruption_controller *ctl, struct kp_client *c,
                          const struct pass *p, int64_t now, uint64_t *ret_requeue)
{
    const struct kp_dnode **cand = kp_calloc(ctl->n_cmd + 1, sizeof(*cand));
    enum kp_replace_seen *seen = kp_calloc(ctl->n_repl + 1, sizeof(*seen));
    size_t n_cand = 0, in_state = 0;
    struct kp_replace_step step;
    int r = 0;

    *ret_requeue = SOON_USEC;
    if (!cand || !seen) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < p->n; i++) {
        const struct kp_state_node *sn = p->v[i].sn;

        if (in_cmd(ctl, sn->provider_id) && sn->nodeclaim && !(sn->flags & KP_STATE_NODE_DELETING))
            cand[n_cand++] = &p->v[i];
        for (size_t k = 0; k < ctl->n_repl; k++)
            if (kp_streq(sn->nodeclaim_name, ctl->repl_names[k]))
                in_state++;
    }
    for (size_t k = 0; k < ctl->n_repl && n_cand > 0; k++) {
        struct kp_entry *re = NULL;

        if (kp_store_get(ctl->nodeclaims, ctl->repl_names[k], &re) < 0)
            continue; /* KP_REPLACE_SEEN_MISSING */
        if (kp_nodeclaim_view(re)->meta.deletion_usec)
            seen[k] = KP_REPLACE_SEEN_DELETING;
        else if (cond_true(&kp_nodeclaim_view(re)->conditions, KP_NC_COND_INITIALIZED))
            seen[k] = KP_REPLACE_SEEN_INITIALIZED;
        else
            seen[k] = KP_REPLACE_SEEN_LAUNCHING;
        kp_entry_unref(re);
    }
    step = kp_replace_decide(n_cand, seen, ctl->n_repl, in_state, ctl->repl_marked,
                             now - ctl->repl_started_usec, ctl->repl_reason->forceful);
    *ret_requeue = step.requeue_usec;
    if (step.mark) {
        for (size_t i = 0; i < n_cand; i++)
            if (kp_cluster_state_mark_for_deletion(ctl->env->cluster, cand[i]->sn->provider_id,
                                                   true) < 0)
                kp_log_debug("replaced node left the cluster state",
                             KP_LF("node", cand[i]->sn->name));
        ctl->repl_marked = true;
    }
    switch (step.action) {
    case KP_REPLACE_FORGET:
        kp_log_info("replaced node(s) went away by themselves",
                    KP_LF("replacement", ctl->repl_names[0]));
        replacing_clear(ctl);
        break;
    case KP_REPLACE_DELETE:
        if (ctl->repl_reason->forceful && ready_count(seen, ctl->n_repl) < ctl->n_repl)
            kp_log_warn("replacement failed; the expired node goes without it",
                        KP_LF("replacement", ctl->repl_names[0]), KP_LF("node", cand[0]->sn->name));
        for (size_t i = 0; i < n_cand; i++) {
            int one = disrupt_delete(ctl, c, cand[i], ctl->repl_reason);

            if (one < 0 && one != -ENOENT && one != -KP_ECONFLICT)
                r = one; /* retried next pass: the command stays in flight */
        }
        if (r == 0)
            replacing_clear(ctl);
        break;
    case KP_REPLACE_ROLLBACK:
        kp_log_warn("replacement failed; disruption rolled back",
                    KP_LF("replacement", ctl->repl_names[0]), KP_LF("node", cand[0]->sn->name));
        if (!ctl->repl_reason->forceful) /* an expiry is no voluntary disruption */
            kp_core_count(ctl->env->observer, KP_CM_VOLUNTARY_DISRUPTION_QUEUE_FAILURES,
                          KP_CM_LABELS("replace", ctl->repl_reason->label, ctl->repl_type));
        for (size_t i = 0; i < n_cand; i++)
            disrupt_rollback(ctl, c, cand[i]->sn, true, /* taint_rv= */ NULL, true, step.unmark,
                             now);
        replacing_clear(ctl);
        break;
    case KP_REPLACE_WAIT:
        for (size_t i = 0; i < n_cand; i++) {
            emit(ctl, cand[i]->sn->node, "Node", "v1", KP_EVENT_NORMAL,
                 "DisruptionWaitingReadiness", "Waiting on readiness to continue disruption");
            emit(ctl, cand[i]->sn->nodeclaim, "NodeClaim", "karpenter.sh/v1", KP_EVENT_NORMAL,
                 "DisruptionWaitingReadiness", "Waiting on readiness to continue disruption");
        }
        break;
    }
out:
    kp_free(seen);
    kp_free(cand);
    return r;
}

/* Consolidation's REPLACE of d[0..k): the plan's one claim narrowed to the cheaper types. */
static int replace_cheaper(struct kp_disruption_controller *ctl, struct kp_client *c,
                           const struct kp_dnode *const *d, size_t k, const char *type,
                           const struct kp_consolidation_decision *dec, int64_t now)
{
    struct kp_sched_claim rc = dec->run.plan.claims[0];
    const char **names = kp_calloc(dec->n_types + 1, sizeof(*names));
    int r;

    if (!names)
        return -ENOMEM;
    for (size_t t = 0; t < dec->n_types; t++)
        names[t] = dec->types[t]->name;
    rc.types = dec->types;
    rc.n_types = dec->n_types;
    if ((r = kp_reqset_copy(&dec->run.plan.claims[0].reqs, &rc.reqs)) < 0) {
        kp_free(names);
        return r;
    }
    if ((r = kp_reqset_add(&rc.reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, names, dec->n_types, 0)) ==
        0)
        r = replace_begin(ctl, c, d, k, &REASON_UNDERUTILIZED, type, &dec->in, &rc, 1, now);
    kp_reqset_done(&rc.reqs);
    kp_free(names);
    return r;
}

/* Starts the command for the one node d found by Drift or expiry, whose simulation planned
 * claims[0..n) (in's): deleted at once when n is 0, otherwise its replacements launched first
 * (replace_begin). The node is in the command before anything is written, so the clean-up of a
 * later pass never takes its taint off while the replacements launch. A lost race is no error
 * (the next pass decides again). 1 acted, or a negative error. */
static int start_one(struct kp_disruption_controller *ctl, struct kp_client *c,
                     const struct kp_dnode *d, const struct reason *why,
                     const struct kp_sched_input *in, const struct kp_sched_claim *claims, size_t n,
                     int64_t now)
{
    int r;

    if (!(ctl->cmd = kp_calloc(1, sizeof(*ctl->cmd))) ||
        !(ctl->cmd[0] = kp_strdup(d->sn->provider_id))) {
        cmd_clear(ctl);
        return -ENOMEM;
    }
    ctl->n_cmd = 1;
    if (n == 0) {
        r = disrupt(ctl, c, d, why, now);
        cmd_clear(ctl);
        if (r == 0) {
            kp_log_info("disrupting node(s)", KP_LF("decision", "delete"),
                        KP_LF("reason", why->name), KP_LF("nodes", (uint64_t)1),
                        KP_LF("names", d->sn->name));
            if (!why->forceful) /* an expiry is no voluntary disruption */
                count_decision(ctl, &d, 1, "delete", why, "");
        }
    } else {
        r = replace_begin(ctl, c, &d, 1, why, "", in, claims, n, now);
        if (r < 0)
            cmd_clear(ctl);
    }
    if (r == -KP_ECONFLICT) {
        kp_log_debug("disruption lost a race; the next pass decides again",
                     KP_LF("node", d->sn->name));
        r = 0;
    }
    return r == 0 ? 1 : r;
}

/* --- drift ------------------------------------------------------------------------------------- */

static void drift_blocked_cb(void *ctx, const struct kp_dnode *d, const char *why)
{
    blocked_event(ctx, d, why);
}

/* The Drift method (drift.h): acts at once on the first drifted node whose pods all find a
 * place, deleting it (no replacement needed) or launching its replacements first. 1 acted, 0
 * nothing to do, or a negative error. */
static int drift_run(struct kp_disruption_controller *ctl, struct kp_client *c,
                     const struct kp_ctx *cx, struct pass *p, int64_t now, size_t *ret_eligible)
{
    size_t *cand = kp_calloc(p->n ? p->n : 1, sizeof(*cand)), n_cand;
    struct kp_drift_command cmd = {0};
    struct kp_sim *sim = NULL;
    int r = 0;

    if (!cand)
        return -ENOMEM;
    n_cand = kp_drift_candidates(p->v, p->n, now, cand);
    *ret_eligible = n_cand;
    if (n_cand == 0 || (r = pass_sim(ctl, c, cx, p, &sim)) < 0 ||
        (r = kp_drift_search(sim, p->v, p->n, cand, n_cand, now, drift_blocked_cb, ctl, cx,
                             &cmd)) <= 0)
        goto out;
    if ((r = kp_ctx_err(cx)) == 0)
        r = start_one(ctl, c, &p->v[cmd.idx], &REASON_DRIFTED, &cmd.in, cmd.run.plan.claims,
                      cmd.run.plan.n_claims, now);
out:
    kp_drift_command_done(&cmd);
    kp_free(cand);
    return r;
}

/* --- expiry ------------------------------------------------------------------------------------ */

/* Replaces the first expired node whose pods need a place (kp_expiry_candidates) before it
 * goes: the simulation takes it away; the NodeClaims its plan needs are launched as a
 * replacement command, or, when none is needed (every pod fits elsewhere, or none would fit
 * anywhere), it is deleted at once. 1 acted, 0 nothing to do (a failed simulation included: the
 * expiration controller deletes it at the end of its grace), or a negative error. */
static int expiry_run(struct kp_disruption_controller *ctl, struct kp_client *c,
                      const struct kp_ctx *cx, struct pass *p, int64_t now)
{
    size_t *cand = kp_calloc(p->n ? p->n : 1, sizeof(*cand)), i;
    struct kp_sim_run run = {0};
    struct kp_sched_input in = {0};
    struct kp_sim *sim = NULL;
    const struct kp_dnode *d;
    int r;

    if (!cand)
        return -ENOMEM;
    if (kp_expiry_candidates(ctl->env->provider, p->v, p->n, now, cand) == 0) {
        r = 0;
        goto out;
    }
    i = cand[0];
    d = &p->v[i];
    if ((r = pass_sim(ctl, c, cx, p, &sim)) < 0 ||
        (r = kp_sim_prepare(sim, &i, 1, now, &run, &in)) < 0 ||
        (r = kp_sched_solve(&in, &run.plan)) < 0) {
        kp_log_warn_errno(r, "expired node's replacement not simulated; it goes without one",
                          KP_LF("node", d->sn->name));
        r = 0;
        goto out;
    }
    if ((r = kp_ctx_err(cx)) == 0)
        r = start_one(ctl, c, d, &REASON_EXPIRED, &in, run.plan.claims, run.plan.n_claims, now);
out:
    kp_sim_run_done(&run);
    kp_free(cand);
    return r;
}

/* --- multi-node consolidation ------------------------------------------------------------------ */

/* ConsolidationRejected on the Node and NodeClaim of every node of the dropped command still
 * there, with Karpenter's message and why: "churn" (no longer a candidate), "budget" (the
 * budget no longer allows it) or "scheduling" (the new simulation disagrees). */
static void rejected(struct kp_disruption_controller *ctl, const struct pass *p, int64_t now,
                     const char *type)
{
    size_t *cand = kp_calloc(p->n ? p->n : 1, sizeof(*cand)), n_cand = 0;
    bool *only = kp_calloc(p->n ? p->n : 1, sizeof(*only));
    const char *why = "scheduling",
               *decision = ctl->cmd_verdict == KP_CONSOL_REPLACE ? "replace" : "delete";
    char note[512];

    if (!cand || !only)
        goto out; /* no memory for events: the log line and the metric said it */
    for (size_t k = 0; k < p->n; k++)
        only[k] = in_cmd(ctl, p->v[k].sn->provider_id);
    switch (kp_consolidation_recheck(p->v, p->n, only, ctl->n_cmd, now, cand, &n_cand)) {
    case KP_CONSOL_CHECK_CHURN:
        why = "churn";
        break;
    case KP_CONSOL_CHECK_BUDGET:
        why = "budget";
        break;
    case KP_CONSOL_CHECK_VALID:
        break; /* the new simulation disagrees */
    }
    for (size_t k = 0; k < p->n; k++) {
        const struct kp_state_node *sn = p->v[k].sn;

        if (!only[k] || !sn->node || !sn->nodeclaim)
            continue;
        if (ctl->n_cmd == 1)
            (void)snprintf(note, sizeof(note), "Consolidation rejected: %s: [%s], reason: %s",
                           decision, sn->name, why);
        else
            (void)snprintf(note, sizeof(note),
                           "Consolidation rejected: %s: [%s] (part of %zu-node consolidation), "
                           "reason: %s",
                           decision, sn->name, ctl->n_cmd, why);
        emit(ctl, sn->node, "Node", "v1", KP_EVENT_NORMAL, "ConsolidationRejected", note);
        emit(ctl, sn->nodeclaim, "NodeClaim", "karpenter.sh/v1", KP_EVENT_NORMAL,
             "ConsolidationRejected", note);
    }
    for (size_t k = 0; k < ctl->n_cmd; k++)
        kp_core_count(ctl->env->observer, KP_CM_VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS,
                      KP_CM_LABELS(type));
    kp_log_info("consolidation command no longer valid; dropped",
                KP_LF("reason", KP_DISRUPTION_REASON_UNDERUTILIZED), KP_LF("why", why),
                KP_LF("nodes", (uint64_t)ctl->n_cmd));
out:
    kp_free(only);
    kp_free(cand);
}

/* Multi-node consolidation's search over p (consolidation.h): 1 with the set in ret_idx
 * (room for p->n), *ret_n and the decision's verdict, 0 none, or a negative error. Quiet: the
 * single-node pass that follows says why nodes stay. After KP_CONSOLIDATION_MULTI_TIMEOUT_USEC
 * the best set found so far stands, as upstream's, and the timeout is counted.
 * *ret_eligible: the candidates. */
static int multi_find(struct kp_disruption_controller *ctl, struct kp_client *c,
                      const struct kp_ctx *cx, struct pass *p, int64_t now, size_t *ret_idx,
                      size_t *ret_n, enum kp_consolidation_verdict *ret_verdict,
                      size_t *ret_eligible)
{
    size_t *cand = kp_calloc(p->n ? p->n : 1, sizeof(*cand)), n_cand;
    struct kp_consolidation_decision dec = {0};
    struct kp_sim *sim = NULL;
    struct kp_ctx own;
    int r = 0;

    if (!cand)
        return -ENOMEM;
    kp_ctx_init(&own, cx, kp_deadline_in(KP_CONSOLIDATION_MULTI_TIMEOUT_USEC));
    n_cand = kp_consolidation_candidates(p->v, p->n, NULL, now, NULL, NULL, cand);
    *ret_eligible = n_cand;
    if (n_cand >= 2 && (r = pass_sim(ctl, c, &own, p, &sim)) == 0 &&
        (r = kp_consolidation_multi(sim, p->v, p->n, cand, n_cand, now, &own, ret_idx, ret_n,
                                    &dec)) > 0)
        *ret_verdict = dec.verdict;
    if (r >= 0 || r == -ETIMEDOUT) {
        if (search_timed_out(cx, &own)) {
            count_timeout(ctl, "multi");
            if (r < 0) /* the simulation's input was not even built: nothing found */
                r = 0;
        }
    }
    kp_consolidation_decision_done(&dec);
    kp_free(cand);
    return r;
}

/* Validation and execution of a multi-node command: every node must still be a consolidation
 * candidate, together within budget, and a new simulation of all of them moving must reach the
 * same decision (upstream's: all candidates valid, same shape). */
static int validate_and_run_multi(struct kp_disruption_controller *ctl, struct kp_client *c,
                                  const struct kp_ctx *cx, struct pass *p, int64_t now)
{
    bool *only = kp_calloc(p->n ? p->n : 1, sizeof(*only));
    size_t *cand = kp_calloc(p->n ? p->n : 1, sizeof(*cand)), n_cand = 0, done = 0;
    const struct kp_dnode **d = kp_calloc(p->n ? p->n : 1, sizeof(*d));
    struct kp_consolidation_decision dec = {0};
    struct kp_sim *sim = NULL;
    int r = 0;

    if (!only || !cand || !d) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t k = 0; k < p->n; k++)
        only[k] = in_cmd(ctl, p->v[k].sn->provider_id);
    if (kp_consolidation_recheck(p->v, p->n, only, ctl->n_cmd, now, cand, &n_cand) !=
            KP_CONSOL_CHECK_VALID ||
        (r = pass_sim(ctl, c, cx, p, &sim)) < 0 ||
        (r = kp_consolidation_set(sim, p->v, cand, n_cand, now, &dec)) < 0 ||
        dec.verdict != ctl->cmd_verdict) {
        if (r == 0)
            rejected(ctl, p, now, "multi");
        goto out;
    }
    if ((r = kp_ctx_err(cx)) < 0)
        goto out;
    for (size_t k = 0; k < n_cand; k++)
        d[k] = &p->v[cand[k]];
    if (dec.verdict == KP_CONSOL_REPLACE) {
        r = replace_cheaper(ctl, c, d, n_cand, "multi", &dec, now);
        goto out;
    }
    for (size_t k = 0; k < n_cand; k++) {
        int one = disrupt(ctl, c, d[k], &REASON_UNDERUTILIZED, now);

        if (one == 0)
            done++;
        else if (one != -KP_ECONFLICT)
            r = one;
    }
    if (done > 0) {
        kp_log_info("disrupting node(s)", KP_LF("decision", "delete"),
                    KP_LF("reason", KP_DISRUPTION_REASON_UNDERUTILIZED),
                    KP_LF("nodes", (uint64_t)done), KP_LF("first", d[0]->sn->name));
        count_decision(ctl, d, n_cand, "delete", &REASON_UNDERUTILIZED, "multi");
    }
out:
    kp_consolidation_decision_done(&dec);
    kp_free(d);
    kp_free(cand);
    kp_free(only);
    return r;
}

/* Validation and execution of a single-node consolidation command: its node must still be a
 * candidate within budget, and a new simulation must come to a decision of the same kind
 * (DELETE, or REPLACE with the cheaper options of now). */
static int validate_and_run_single(struct kp_disruption_controller *ctl, struct kp_client *c,
                                   const struct kp_ctx *cx, struct pass *p, int64_t now)
{
    bool *only = p->n ? kp_calloc(p->n, sizeof(*only)) : NULL;
    struct kp_consolidation_decision dec = {0};
    size_t i = 0;
    int r;

    if (p->n && !only)
        return -ENOMEM;
    for (size_t k = 0; k < p->n; k++)
        only[k] = in_cmd(ctl, p->v[k].sn->provider_id);
    r = p->n ? consolidation_single(ctl, c, cx, p, only, true, now, &i, &dec, NULL) : 0;
    kp_free(only);
    if (r == 0 || (r > 0 && dec.verdict != ctl->cmd_verdict)) {
        rejected(ctl, p, now, "single");
        r = 0;
        goto out;
    }
    if (r < 0 || (r = kp_ctx_err(cx)) < 0)
        goto out;
    if (dec.verdict == KP_CONSOL_REPLACE) {
        const struct kp_dnode *d = &p->v[i];

        r = replace_cheaper(ctl, c, &d, 1, "single", &dec, now);
        goto out;
    }
    if ((r = disrupt(ctl, c, &p->v[i], &REASON_UNDERUTILIZED, now)) == -KP_ECONFLICT) {
        kp_log_debug("disruption lost a race; the next pass decides again",
                     KP_LF("node", p->v[i].sn->name));
        r = 0;
        goto out;
    }
    if (r < 0)
        goto out;
    kp_log_info("disrupting node(s)", KP_LF("decision", "delete"),
                KP_LF("reason", KP_DISRUPTION_REASON_UNDERUTILIZED), KP_LF("nodes", (uint64_t)1),
                KP_LF("names", p->v[i].sn->name));
    {
        const struct kp_dnode *d = &p->v[i];

        count_decision(ctl, &d, 1, "delete", &REASON_UNDERUTILIZED, "single");
    }
out:
    kp_consolidation_decision_done(&dec);
    return r;
}

/* Validation and execution of the waiting command: its own nodes are evaluated again on this
 * pass's view, those still selected within the budgets of now are disrupted (while cx lasts:
 * after SIGTERM or a lost Lease nothing more is written), the rest are dropped. One decision,
 * logged and counted once, as upstream's executeCommand. Returns 0 or the last failure. */
static int validate_and_run(struct kp_disruption_controller *ctl, struct kp_client *c,
                            const struct kp_ctx *cx, const struct pass *p, size_t *idx, int64_t now)
{
    bool *only = p->n ? kp_calloc(p->n, sizeof(*only)) : NULL;
    const struct kp_dnode **gone = p->n ? kp_calloc(p->n, sizeof(*gone)) : NULL;
    struct kp_buf names = KP_BUF_INIT(4096);
    size_t n_sel = 0, done = 0;
    int r, last = 0;

    if (p->n && (!only || !gone)) {
        kp_free(only);
        kp_free(gone);
        return -ENOMEM;
    }
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
        if ((r = disrupt(ctl, c, d, &REASON_EMPTY, now)) == -KP_ECONFLICT) {
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
        gone[done++] = d;
    }
    if (done > 0) {
        kp_log_info("disrupting node(s)", KP_LF("decision", "delete"),
                    KP_LF("reason", KP_DISRUPTION_REASON_EMPTY), KP_LF("nodes", (uint64_t)done),
                    KP_LF("names", kp_buf_str(&names)));
        count_decision(ctl, gone, done, "delete", &REASON_EMPTY, "empty");
    }
    if (n_sel < ctl->n_cmd) {
        kp_log_debug("disruption command validated",
                     KP_LF("dropped", (uint64_t)(ctl->n_cmd - n_sel)));
        for (size_t k = n_sel; k < ctl->n_cmd; k++)
            kp_core_count(ctl->env->observer, KP_CM_VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS,
                          KP_CM_LABELS("empty"));
    }
    kp_buf_done(&names);
    kp_free(gone);
    kp_free(only);
    return last;
}

/* Emptiness's candidates in p: the nodes not blocked that it wants. */
static size_t emptiness_eligible(const struct pass *p, int64_t now)
{
    size_t k = 0;
    char why[256];

    for (size_t i = 0; i < p->n; i++)
        k +=
            !kp_disruption_blocked(&p->v[i], now, why, sizeof(why)) && kp_emptiness_wants(&p->v[i]);
    return k;
}

/* *ret: the sum of the versions of the catalogs the NodePools of this provider have now (the
 * consolidated memo's second half): a provider's versions only grow, and it republishes when
 * what it can launch changed. false when a catalog cannot be had: then the memo is neither
 * trusted nor set. */
static bool catalogs_sum(struct kp_disruption_controller *ctl, struct kp_client *c,
                         const struct kp_ctx *cx, uint64_t *ret)
{
    const struct kp_provider *pr = ctl->env->provider;
    struct kp_store_list l = {0};
    bool ok = true;

    *ret = 0;
    if (kp_store_list(ctl->nodepools, &l) < 0)
        return false;
    for (size_t i = 0; i < l.n && ok; i++) {
        const struct kp_nodepool_view *np = kp_nodepool_view(l.v[i]);
        struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
        struct kp_instance_catalog *cat = NULL;

        if (!kp_provider_supports(pr, &np->tmpl.node_class_ref))
            continue;
        if (pr->ops->get_instance_types(pr->self, cx, c, np, &cat, &err) < 0)
            ok = false;
        else if (cat)
            *ret += cat->version;
        kp_provider_err_done(&err);
        kp_instance_catalog_unref(cat);
    }
    kp_store_list_free(&l);
    return ok;
}

int kp_disruption_reconcile(struct kp_disruption_controller *ctl, struct kp_client *c,
                            const struct kp_ctx *cx, uint64_t *ret_requeue)
{
    struct pass p = {0};
    size_t *idx = NULL, n_sel = 0;
    int64_t now = (int64_t)kp_core_now(ctl->env);
    /* Read before the view is gathered: an event after this makes the next pass search again. */
    uint64_t changes = atomic_load_explicit(&ctl->changes, memory_order_acquire), catalogs = 0;
    bool budget_blocked = false, catalogs_ok = false;
    enum method method;
    struct eval ev;
    size_t eligible = 0;
    int r;

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
    if (ctl->n_repl) {
        r = replacing_step(ctl, c, &p, now, ret_requeue);
        goto out;
    }
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
        if (ctl->cmd_method == METHOD_SINGLE)
            r = validate_and_run_single(ctl, c, cx, &p, now);
        else if (ctl->cmd_method == METHOD_MULTI)
            r = validate_and_run_multi(ctl, c, cx, &p, now);
        else
            r = validate_and_run(ctl, c, cx, &p, idx, now);
        if (!ctl->n_repl) /* a replacement in flight keeps its command */
            cmd_clear(ctl);
        *ret_requeue = SOON_USEC;
        goto out;
    }
    /* An expiry first: it waits for no budget, and its time is the expiration controller's. */
    if ((r = expiry_run(ctl, c, cx, &p, now)) != 0) {
        *ret_requeue = SOON_USEC;
        if (r > 0)
            r = 0;
        goto out;
    }
    /* The methods in Karpenter's order, each evaluated (eval_begin/eval_end) only when the ones
     * before found nothing. A pass with no state node evaluates them too, with no candidates,
     * so their eligible_nodes gauges go to 0. */
    method = METHOD_EMPTINESS;
    ev = eval_begin(&REASON_EMPTY, "empty");
    if (p.n)
        n_sel = kp_emptiness_select(p.v, p.n, NULL, now, idx, &budget_blocked);
    eval_end(ctl, &p, &ev, emptiness_eligible(&p, now), now);
    if (n_sel == 0) {
        /* Nothing empty: Drift's turn, which acts at once (no validation delay). */
        ev = eval_begin(&REASON_DRIFTED, "");
        r = drift_run(ctl, c, cx, &p, now, &eligible);
        eval_end(ctl, &p, &ev, eligible, now);
        if (r != 0) {
            *ret_requeue = SOON_USEC;
            if (r > 0)
                r = 0;
            goto out;
        }
    }
    if (n_sel == 0)
        catalogs_ok = catalogs_sum(ctl, c, cx, &catalogs);
    if (n_sel == 0 && catalogs_ok &&
        kp_consolidated_memo_holds(&ctl->memo, changes, catalogs, now)) {
        kp_log_debug("consolidation skipped: nothing changed since it last found nothing");
        r = 0;
        goto out;
    }
    ctl->timed_out = false;
    if (n_sel == 0) {
        /* Nothing empty or drifted: multi-node consolidation's turn, then single-node's. */
        ev = eval_begin(&REASON_UNDERUTILIZED, "multi");
        r = multi_find(ctl, c, cx, &p, now, idx, &n_sel, &ctl->cmd_verdict, &eligible);
        eval_end(ctl, &p, &ev, eligible, now);
        if (r < 0)
            goto out;
        if (n_sel > 0)
            method = METHOD_MULTI;
    }
    if (n_sel == 0) {
        struct kp_consolidation_decision dec;

        ev = eval_begin(&REASON_UNDERUTILIZED, "single");
        r = consolidation_single(ctl, c, cx, &p, NULL, false, now, &idx[0], &dec, &eligible);
        eval_end(ctl, &p, &ev, eligible, now);
        ctl->cmd_verdict = dec.verdict;
        kp_consolidation_decision_done(&dec);
        if (r == 0 && !ctl->timed_out && catalogs_ok)
            ctl->memo = (struct kp_consolidated_memo){
                .set = true, .changes = changes, .catalogs = catalogs, .at_usec = now};
        if (r <= 0)
            goto out;
        n_sel = 1;
        method = METHOD_SINGLE;
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
    ctl->cmd_method = method;
    ctl->cmd_at_usec = now + (int64_t)KP_DISRUPTION_VALIDATION_USEC;
    kp_log_info(method == METHOD_EMPTINESS
                    ? "empty nodes found; disrupting them after the validation delay"
                    : "underutilized nodes found; disrupting them after the validation delay",
                KP_LF("reason", method == METHOD_EMPTINESS ? KP_DISRUPTION_REASON_EMPTY
                                                           : KP_DISRUPTION_REASON_UNDERUTILIZED),
                KP_LF("nodes", (uint64_t)n_sel), KP_LF("first", p.v[idx[0]].sn->name));
    *ret_requeue = KP_DISRUPTION_VALIDATION_USEC;
    r = 0;
out:
    if (budget_blocked)
        kp_log_debug("empty nodes wait for their NodePool's disruption budget");
    kp_free(idx);
    pass_done(&p);
    return r;
}

static int reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                     uint64_t *ret_requeue)
{
    (void)key; /* the only one, KP_DISRUPTION_KEY */
    return kp_disruption_reconcile(ctx, c, cx, ret_requeue);
}

/* Every projected change of what the searches read counts toward the memo. */
static void changed(void *ctx)
{
    struct kp_disruption_controller *ctl = ctx;

    atomic_fetch_add_explicit(&ctl->changes, 1, memory_order_release);
}

static void on_add(void *ctx, const struct kp_entry *e)
{
    (void)e;
    changed(ctx);
}

static void on_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    (void)old_e;
    (void)new_e;
    changed(ctx);
}

static void on_delete(void *ctx, const struct kp_entry *old_e)
{
    (void)old_e;
    changed(ctx);
}

int kp_disruption_controller_new(const struct kp_core_env *env,
                                 struct kp_disruption_controller **ret)
{
    struct kp_disruption_controller *ctl = NULL;
    struct kp_controller_opts co = {0};
    struct kp_informer *nodepools, *pods, *nodes, *nodeclaims, *pvcs, *pdbs, *daemonsets;
    struct kp_informer_handler h = {
        .on_add = on_add, .on_update = on_update, .on_delete = on_delete};
    int r;

    if (!env || !env->client || !env->informers || !env->provider || !env->cluster || !ret)
        return -EINVAL;
    if ((r = kp_informers_nodepools(env->informers, &nodepools)) < 0 ||
        (r = kp_informers_pods(env->informers, &pods)) < 0 ||
        (r = kp_informers_nodes(env->informers, &nodes)) < 0 ||
        (r = kp_informers_nodeclaims(env->informers, &nodeclaims)) < 0 ||
        (r = kp_informers_pvcs(env->informers, &pvcs)) < 0 ||
        (r = kp_informers_pdbs(env->informers, &pdbs)) < 0 ||
        (r = kp_informers_daemonsets(env->informers, &daemonsets)) < 0)
        return r;
    if (!(ctl = kp_calloc(1, sizeof(*ctl))))
        return -ENOMEM;
    ctl->env = env;
    h.ctx = ctl;
    ctl->nodepools = kp_informer_store(nodepools);
    ctl->pods = kp_informer_store(pods);
    ctl->nodes = kp_informer_store(nodes);
    ctl->nodeclaims = kp_informer_store(nodeclaims);
    ctl->pvcs = kp_informer_store(pvcs);
    ctl->pdbs = kp_informer_store(pdbs);
    ctl->daemonsets = kp_informer_store(daemonsets);
    ctl->sources = (struct kp_sim_sources){.env = env,
                                           .pods = ctl->pods,
                                           .nodepools = ctl->nodepools,
                                           .pvcs = ctl->pvcs,
                                           .pdbs = ctl->pdbs,
                                           .daemonsets = ctl->daemonsets};
    co.name = "disruption";
    co.group = "karpenter.sh";
    co.kind = "NodePool";
    co.client = env->client;
    co.reconcile = reconcile;
    co.ctx = ctl;
    co.workers = 1; /* one key: one command at a time */
    co.timeout_usec = KP_DISRUPTION_PASS_TIMEOUT_USEC;
    co.parent = env->parent;
    co.events = env->events;
    co.events_component = "karpenter";
    if ((r = kp_controller_new(&co, &ctl->base)) < 0 ||
        (r = kp_controller_add_index(ctl->base, pods, KP_INDEX_POD_NODE, kp_index_pod_node)) < 0 ||
        (r = kp_controller_watch(ctl->base, nodepools, &h)) < 0 ||
        (r = kp_controller_watch(ctl->base, pods, &h)) < 0 ||
        (r = kp_controller_watch(ctl->base, nodes, &h)) < 0 ||
        (r = kp_controller_watch(ctl->base, nodeclaims, &h)) < 0 ||
        (r = kp_controller_watch(ctl->base, pvcs, &h)) < 0 ||
        (r = kp_controller_watch(ctl->base, pdbs, &h)) < 0 ||
        (r = kp_controller_watch(ctl->base, daemonsets, &h)) < 0)
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

    /* A new term starts from nothing: a command of the last one was never acted on, and a
     * replacement it launched is left to the clean-up (the candidate's taint) and to Emptiness
     * (the replacement, if nothing moves onto it). Before the workers start: a key the stopped
     * queue kept may run the moment they do. */
    /* The cluster state outlives the term: a mark the last term's replacement set would keep
     * the candidate out of the clean-up, and out of every simulation, for good. */
    for (size_t k = 0; ctl->repl_marked && k < ctl->n_cmd; k++)
        if (kp_cluster_state_mark_for_deletion(ctl->env->cluster, ctl->cmd[k], false) < 0)
            kp_log_debug("replaced node left the cluster state", KP_LF("provider-id", ctl->cmd[k]));
    replacing_clear(ctl);
    ctl->memo.set = false; /* a new term looks at everything afresh */
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
    replacing_clear(ctl);
    kp_free(ctl);
    return NULL;
}
