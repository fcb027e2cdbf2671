/* core/disruption/consolidation.c: single-node consolidation's pure decisions
 * (consolidation.h). */
#include "core/disruption/consolidation.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/str.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/disruption/budget.h"
#include "core/disruption/disruption.h"
#include "core/disruption/marking.h"
#include "core/provider.h"
#include "core/provisioning/scheduler.h"
#include "core/provisioning/simulation.h"
#include "core/state/cluster.h"

const char *kp_consolidation_unwanted(const struct kp_dnode *d, char *buf, size_t size,
                                      bool *ret_silent)
{
    const struct kp_nodepool_view *np = d->np;
    const struct kp_labels *labels;
    const struct kp_condition *c;
    int n;

    *ret_silent = true;
    if (!np || !d->sn->node || !d->sn->nodeclaim || np->replicas >= 0)
        n = snprintf(buf, size, "not a node of a dynamic NodePool");
    else if (d->reschedulable == 0)
        n = snprintf(buf, size, "node is empty"); /* Emptiness takes it */
    else {
        *ret_silent = false;
        labels = &kp_node_view(d->sn->node)->meta.labels;
        c = kp_conditions_get(&kp_nodeclaim_view(d->sn->nodeclaim)->conditions,
                              KP_NC_COND_CONSOLIDATABLE);
        if (!kp_labels_get(labels, KP_LABEL_INSTANCE_TYPE))
            n = snprintf(buf, size, "Instance Type \"\" not found");
        else if (!kp_labels_get(labels, KP_LABEL_CAPACITY_TYPE))
            n = snprintf(buf, size, "Node does not have label \"%s\"", KP_LABEL_CAPACITY_TYPE);
        else if (!kp_labels_get(labels, KP_LABEL_ZONE))
            n = snprintf(buf, size, "Node does not have label \"%s\"", KP_LABEL_ZONE);
        else if (np->consolidate_after.text &&
                 (!np->consolidate_after.valid || np->consolidate_after.never))
            n = snprintf(buf, size, "NodePool \"%s\" has consolidation disabled", np->e.name);
        else if (np->consolidation_policy == KP_CONSOLIDATE_WHEN_EMPTY)
            n = snprintf(buf, size,
                         "NodePool \"%s\" has consolidation policy WhenEmpty, but node is not "
                         "empty",
                         np->e.name);
        else if (!c || c->status != KP_COND_TRUE) {
            *ret_silent = true;
            n = snprintf(buf, size, "node is not consolidatable yet");
        } else
            return NULL;
    }
    return n < 0 ? "" : buf;
}

double kp_eviction_cost(const struct kp_pod_view *p)
{
    double cost = 1.0 + (double)p->priority / (double)(1 << 25);

    return cost < -10.0 ? -10.0 : cost > 10.0 ? 10.0 : cost;
}

double kp_lifetime_remaining(const struct kp_nodeclaim_view *nc, int64_t now_usec)
{
    const struct kp_obj_duration *ea = &nc->spec.expire_after;
    double total, left;

    if (!ea->valid || ea->never || ea->ns <= 0 || nc->meta.creation_usec <= 0)
        return 1.0;
    total = (double)ea->ns / 1000.0; /* usec */
    left = (total - (double)(now_usec - nc->meta.creation_usec)) / total;
    return left < 0.0 ? 0.0 : left > 1.0 ? 1.0 : left;
}

int64_t kp_node_price(const struct kp_instance_type *types, size_t n,
                      const struct kp_labels *labels)
{
    const char *it = kp_labels_get(labels, KP_LABEL_INSTANCE_TYPE);
    const char *zone = kp_labels_get(labels, KP_LABEL_ZONE);
    const char *ct = kp_labels_get(labels, KP_LABEL_CAPACITY_TYPE);

    if (!it || !types)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!kp_streq(types[i].name, it))
            continue;
        for (size_t k = 0; k < types[i].n_offerings; k++) {
            const struct kp_offering *o = &types[i].offerings[k];

            if (kp_streq(kp_offering_value(o, KP_LABEL_ZONE), zone) &&
                kp_streq(kp_offering_value(o, KP_LABEL_CAPACITY_TYPE), ct))
                return o->price_micro_usd;
        }
        return -1;
    }
    return -1;
}

/* The dearest available offering of t: what a launch of it may cost at worst. */
static int64_t worst_price(const struct kp_instance_type *t)
{
    int64_t worst = -1;

    for (size_t i = 0; i < t->n_offerings; i++)
        if (t->offerings[i].available && t->offerings[i].price_micro_usd > worst)
            worst = t->offerings[i].price_micro_usd;
    return worst;
}

/* Whether q allows value v. */
static bool allows(const struct kp_req *q, const char *v)
{
    bool listed = false;

    for (size_t i = 0; i < q->n_values && !listed; i++)
        listed = kp_streq(q->values[i], v);
    return q->complement ? !listed : listed;
}

/* Whether the options types[0..n) still meet every minValues of reqs, as Karpenter's
 * RemoveInstanceTypeOptionsByPriceAndMinValues checks after filtering by price: for each key
 * with minValues, at least that many distinct values of it among the options (the instance
 * type key: that many options). A replacement that could not meet it would be refused by the
 * NodeClaim's own validation. */
static bool meets_min_values(const struct kp_reqset *reqs, const struct kp_instance_type **types,
                             size_t n)
{
    for (size_t k = 0; k < reqs->n; k++) {
        const struct kp_req *q = &reqs->v[k];
        const char **seen;
        size_t n_seen = 0;

        if (!q->min_values)
            continue;
        if (kp_streq(q->key, KP_LABEL_INSTANCE_TYPE)) {
            if (n < q->min_values)
                return false;
            continue;
        }
        if (!(seen = kp_calloc(q->min_values, sizeof(*seen))))
            return false; /* no memory to tell: no replacement rather than a wrong one */
        for (size_t t = 0; t < n && n_seen < q->min_values; t++) {
            const struct kp_req *tq = kp_reqset_get(&types[t]->reqs, q->key);

            for (size_t v = 0; tq && !tq->complement && v < tq->n_values; v++) {
                bool dup = false;

                for (size_t i = 0; i < n_seen && !dup; i++)
                    dup = kp_streq(seen[i], tq->values[v]);
                if (!dup && allows(q, tq->values[v]) && n_seen < q->min_values)
                    seen[n_seen++] = tq->values[v];
            }
        }
        kp_free(seen);
        if (n_seen < q->min_values)
            return false;
    }
    return true;
}

/* Whether p is bound to one of the nodes moving[0..n). */
static bool on_moving(const struct kp_pod_view *p, const char *const *moving, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (kp_streq(p->node_name, moving[i]))
            return true;
    return false;
}

const char *kp_disruption_unplaced(const struct kp_sched_input *in,
                                   const struct kp_sched_plan *plan, const char *const *moving,
                                   size_t n_moving, char *buf, size_t size)
{
    for (size_t i = 0; i < plan->n_pods && i < in->n_pods; i++) {
        const struct kp_sched_result *res = &plan->pods[i];
        const struct kp_pod_view *p = in->pods[i];
        const struct kp_sched_node *n;

        if (!p->node_name)
            continue; /* pending: whether it fits holds no disruption */
        if (res->where == KP_SCHED_FAILED) {
            (void)snprintf(buf, size, "not all pods would schedule, %s/%s => %s", p->e.ns,
                           p->e.name, res->error ? res->error : "no placement");
            return buf;
        }
        if (res->where != KP_SCHED_NODE ||
            (res->index < in->n_nodes && in->nodes[res->index].initialized) ||
            !on_moving(p, moving, n_moving))
            continue;
        n = res->index < in->n_nodes ? &in->nodes[res->index]
                                     : &in->inflight[res->index - in->n_nodes];
        (void)snprintf(buf, size, "would schedule against uninitialized %s/%s",
                       res->index < in->n_nodes ? "node" : "nodeclaim", n->name);
        return buf;
    }
    return NULL;
}

void kp_consolidation_decision_done(struct kp_consolidation_decision *d)
{
    if (!d)
        return;
    kp_sim_run_done(&d->run);
    kp_free(d->types);
    memset(d, 0, sizeof(*d));
}

int kp_consolidation_decide(const struct kp_sched_input *in, const struct kp_sched_plan *plan,
                            const char *const *moving, size_t n_moving, int64_t price_micro,
                            struct kp_consolidation_decision *ret)
{
    const struct kp_sched_claim *claim;

    memset(ret, 0, sizeof(*ret));
    if (kp_disruption_unplaced(in, plan, moving, n_moving, ret->why, sizeof(ret->why)))
        return 0; /* a running pod without a trustworthy place */
    if (plan->n_claims == 0) {
        ret->verdict = KP_CONSOL_DELETE;
        return 0;
    }
    if (plan->n_claims > 1) {
        (void)snprintf(ret->why, sizeof(ret->why), "Can't remove without creating %zu candidates",
                       plan->n_claims);
        return 0;
    }
    claim = &plan->claims[0];
    if (price_micro >= 0 && claim->n_types > 0) {
        if (!(ret->types = kp_calloc(claim->n_types, sizeof(*ret->types))))
            return -ENOMEM;
        for (size_t i = 0; i < claim->n_types; i++) {
            int64_t w = worst_price(claim->types[i]);

            if (w >= 0 && w < price_micro)
                ret->types[ret->n_types++] = claim->types[i];
        }
    }
    if (ret->n_types > 0 && !meets_min_values(&claim->reqs, ret->types, ret->n_types)) {
        kp_free(ret->types);
        ret->types = NULL;
        ret->n_types = 0;
        (void)snprintf(ret->why, sizeof(ret->why),
                       "Filtering by price: minValues requirement is not met");
        return 0;
    }
    if (ret->n_types == 0) {
        kp_free(ret->types);
        ret->types = NULL;
        (void)snprintf(ret->why, sizeof(ret->why), "Can't replace with a cheaper node");
        return 0;
    }
    ret->verdict = KP_CONSOL_REPLACE;
    return 0;
}

void kp_dnode_count_pods(struct kp_dnode *d, const struct kp_pod_view *const *pods, size_t n,
                         int64_t now_usec, const struct kp_pod_view **ret_blocking)
{
    double cost = 0.0;

    *ret_blocking = NULL;
    d->reschedulable = 0;
    for (size_t i = 0; i < n; i++) {
        const struct kp_pod_view *p = pods[i];

        if (!kp_pod_terminal(p))
            cost += kp_eviction_cost(p);
        if (kp_pod_reschedulable(p))
            d->reschedulable++;
        if (!*ret_blocking && kp_pod_active(p) && kp_pod_do_not_disrupt_active(p, now_usec))
            *ret_blocking = p;
    }
    d->disruption_cost =
        d->sn->nodeclaim
            ? cost * kp_lifetime_remaining(kp_nodeclaim_view(d->sn->nodeclaim), now_usec)
            : cost;
}

/* The order: the lowest disruption cost first, then the oldest NodeClaim, then its name. */
static bool cheaper(const struct kp_dnode *a, const struct kp_dnode *b)
{
    const struct kp_nodeclaim_view *x = kp_nodeclaim_view(a->sn->nodeclaim);
    const struct kp_nodeclaim_view *y = kp_nodeclaim_view(b->sn->nodeclaim);

    if (a->disruption_cost != b->disruption_cost)
        return a->disruption_cost < b->disruption_cost;
    if (x->meta.creation_usec != y->meta.creation_usec)
        return x->meta.creation_usec < y->meta.creation_usec;
    return strcmp(x->e.name, y->e.name) < 0;
}

size_t kp_consolidation_candidates(const struct kp_dnode *v, size_t n, const bool *only,
                                   int64_t now_usec, kp_unconsolidatable_fn fn, void *ctx,
                                   size_t *ret_idx)
{
    size_t n_cand = 0;
    char why[512];

    for (size_t i = 0; i < n; i++) {
        const char *no;
        bool silent;

        if ((only && !only[i]) || kp_disruption_blocked(&v[i], now_usec, why, sizeof(why)))
            continue;
        if ((no = kp_consolidation_unwanted(&v[i], why, sizeof(why), &silent))) {
            if (!silent && fn)
                fn(ctx, &v[i], no);
            continue;
        }
        ret_idx[n_cand++] = i;
    }
    for (size_t i = 1; i < n_cand; i++) { /* insertion sort: stable, total order */
        size_t x = ret_idx[i], j = i;

        for (; j > 0 && cheaper(&v[x], &v[ret_idx[j - 1]]); j--)
            ret_idx[j] = ret_idx[j - 1];
        ret_idx[j] = x;
    }
    return n_cand;
}

/* The price of d's node from its NodePool's catalog in sim; -1 when unknown. */
static int64_t dnode_price(const struct kp_sim *sim, const struct kp_dnode *d)
{
    for (size_t k = 0; k < sim->n_pools; k++)
        if (kp_streq(sim->pools[k].np->e.name, d->sn->nodepool))
            return kp_node_price(sim->pools[k].types, sim->pools[k].n_types,
                                 &kp_node_view(d->sn->node)->meta.labels);
    return -1;
}

/* The summed price of the nodes idx[0..k) of v from sim's catalogs; -1 when any is unknown. */
static int64_t set_price(const struct kp_sim *sim, const struct kp_dnode *v, const size_t *idx,
                         size_t k)
{
    int64_t sum = 0;

    for (size_t i = 0; i < k; i++) {
        int64_t one = dnode_price(sim, &v[idx[i]]);

        if (one < 0)
            return -1;
        sum += one;
    }
    return sum;
}

/* One trial: the decision for the nodes idx[0..k) taken away together. A REPLACE keeps its
 * simulation in ret (the options point into the build's catalogs, the claim into the plan). */
static int try_set(struct kp_sim *sim, const struct kp_dnode *v, const size_t *idx, size_t k,
                   int64_t now, struct kp_consolidation_decision *ret)
{
    struct kp_sim_run run = {0};
    struct kp_sched_input in = {0};
    const char **moving = kp_calloc(k ? k : 1, sizeof(*moving));
    int r;

    memset(ret, 0, sizeof(*ret));
    if (!moving)
        return -ENOMEM;
    for (size_t i = 0; i < k; i++)
        moving[i] = v[idx[i]].sn->node_name;
    if ((r = kp_sim_prepare(sim, idx, k, now, &run, &in)) == 0 &&
        (r = kp_sched_solve(&in, &run.plan)) == 0)
        r = kp_consolidation_decide(&in, &run.plan, moving, k, set_price(sim, v, idx, k), ret);
    kp_free(moving);
    if (r == 0 && ret->verdict == KP_CONSOL_REPLACE) {
        ret->run = run;
        ret->in = in;
        return 0;
    }
    kp_sim_run_done(&run);
    return r;
}

static int try_one(struct kp_sim *sim, const struct kp_dnode *v, size_t i, int64_t now,
                   struct kp_consolidation_decision *ret)
{
    return try_set(sim, v, &i, 1, now, ret);
}

int kp_consolidation_single(struct kp_sim *sim, const struct kp_dnode *v, size_t n,
                            const size_t *cand, size_t n_cand, int64_t now_usec,
                            kp_unconsolidatable_fn fn, void *ctx, const struct kp_ctx *stop,
                            size_t *ret_idx, struct kp_consolidation_decision *ret)
{
    struct kp_pool_budget *pools = kp_calloc(n_cand ? n_cand : 1, sizeof(*pools));
    size_t n_pools = 0;
    int r = 0;

    memset(ret, 0, sizeof(*ret));
    if (!pools)
        return -ENOMEM;
    for (size_t k = 0; k < n_cand && r == 0; k++) {
        const struct kp_dnode *d = &v[cand[k]];
        struct kp_consolidation_decision dec;
        struct kp_pool_budget *pb;

        if (kp_ctx_done(stop))
            break;
        pb = kp_pool_budget(pools, &n_pools, v, n, d, KP_DISRUPT_UNDERUTILIZED, now_usec);
        if (pb->remaining <= 0)
            continue;
        if ((r = try_one(sim, v, cand[k], now_usec, &dec)) < 0)
            break;
        if (dec.verdict != KP_CONSOL_NOTHING) {
            *ret_idx = cand[k];
            *ret = dec;
            r = 1;
            break;
        }
        if (fn && dec.why[0])
            fn(ctx, d, dec.why);
        kp_consolidation_decision_done(&dec);
    }
    kp_free(pools);
    return r;
}

/* Karpenter's filterOutSameInstanceType: when an option of the replacement is the instance type
 * of one of the candidates, only options strictly cheaper than the cheapest such candidate stay
 * (never "replace three nodes with one more of the same"). Whether any option is left. */
static bool drop_same_types(const struct kp_sim *sim, const struct kp_dnode *v, const size_t *idx,
                            size_t k, struct kp_consolidation_decision *dec)
{
    int64_t max = -1; /* -1: no limit */
    size_t out = 0;

    for (size_t t = 0; t < dec->n_types; t++)
        for (size_t i = 0; i < k; i++) {
            const struct kp_dnode *d = &v[idx[i]];
            int64_t p;

            if (!kp_streq(
                    kp_labels_get(&kp_node_view(d->sn->node)->meta.labels, KP_LABEL_INSTANCE_TYPE),
                    dec->types[t]->name) ||
                (p = dnode_price(sim, d)) < 0)
                continue;
            if (max < 0 || p < max)
                max = p;
        }
    for (size_t t = 0; t < dec->n_types; t++)
        if (max < 0 || worst_price(dec->types[t]) < max)
            dec->types[out++] = dec->types[t];
    dec->n_types = out;
    return out > 0 && meets_min_values(&dec->run.plan.claims[0].reqs, dec->types, out);
}

int kp_consolidation_multi(struct kp_sim *sim, const struct kp_dnode *v, size_t n,
                           const size_t *cand, size_t n_cand, int64_t now_usec,
                           const struct kp_ctx *stop, size_t *ret_idx, size_t *ret_n,
                           struct kp_consolidation_decision *ret)
{
    size_t *take = kp_calloc(n_cand ? n_cand : 1, sizeof(*take)), n_take = 0, best = 0;
    struct kp_pool_budget *pools = kp_calloc(n_cand ? n_cand : 1, sizeof(*pools));
    size_t n_pools = 0, lo = 1, hi;
    int r = 0;

    memset(ret, 0, sizeof(*ret));
    *ret_n = 0;
    if (!take || !pools) {
        r = -ENOMEM;
        goto out;
    }
    /* The candidates in order, each within its pool's budget, at most KP_MULTI_MAX. */
    for (size_t k = 0; k < n_cand && n_take < KP_CONSOLIDATION_MULTI_MAX; k++) {
        const struct kp_dnode *d = &v[cand[k]];
        struct kp_pool_budget *pb;

        pb = kp_pool_budget(pools, &n_pools, v, n, d, KP_DISRUPT_UNDERUTILIZED, now_usec);
        if (pb->remaining <= 0)
            continue;
        if (pb->remaining != KP_BUDGET_UNLIMITED)
            pb->remaining--;
        take[n_take++] = cand[k];
    }
    if (n_take < 2)
        goto out;
    /* The largest prefix [0, mid] (mid >= 1) that consolidates: it shrinks while they do not. */
    hi = n_take - 1;
    while (lo <= hi) {
        size_t mid = lo + (hi - lo) / 2;
        struct kp_consolidation_decision dec;
        bool valid;

        if (kp_ctx_done(stop))
            break; /* the best found so far stands */
        if ((r = try_set(sim, v, take, mid + 1, now_usec, &dec)) < 0)
            break;
        valid = dec.verdict == KP_CONSOL_DELETE ||
                (dec.verdict == KP_CONSOL_REPLACE && drop_same_types(sim, v, take, mid + 1, &dec));
        if (valid) {
            kp_consolidation_decision_done(ret);
            *ret = dec;
            best = mid + 1;
            lo = mid + 1;
        } else {
            kp_consolidation_decision_done(&dec);
            hi = mid - 1;
        }
    }
    if (r >= 0 && best >= 2) {
        memcpy(ret_idx, take, best * sizeof(*take));
        *ret_n = best;
        r = 1;
    } else if (r >= 0) {
        kp_consolidation_decision_done(ret);
        r = 0;
    }
out:
    if (r < 0)
        kp_consolidation_decision_done(ret);
    kp_free(pools);
    kp_free(take);
    return r;
}

int kp_consolidation_set(struct kp_sim *sim, const struct kp_dnode *v, const size_t *idx, size_t k,
                         int64_t now_usec, struct kp_consolidation_decision *ret)
{
    int r = try_set(sim, v, idx, k, now_usec, ret);

    if (r == 0 && ret->verdict == KP_CONSOL_REPLACE && k > 1 &&
        !drop_same_types(sim, v, idx, k, ret)) {
        kp_consolidation_decision_done(ret);
        (void)snprintf(ret->why, sizeof(ret->why), "Can't replace with a cheaper node");
    }
    return r;
}

/* Whether the nodes idx[0..k) of v[0..n) fit their NodePools' Underutilized budgets together. */
static bool budgets_allow(const struct kp_dnode *v, size_t n, const size_t *idx, size_t k,
                          int64_t now_usec)
{
    for (size_t i = 0; i < k; i++) {
        const struct kp_dnode *d = &v[idx[i]];
        int64_t nodes, disrupting, allowed, left, want = 0;

        for (size_t j = 0; j < k; j++)
            want += kp_streq(v[idx[j]].sn->nodepool, d->sn->nodepool);
        kp_disruption_pool_counts(v, n, d->sn->nodepool, &nodes, &disrupting);
        allowed = kp_budget_allowed(d->np->budgets, d->np->n_budgets, KP_DISRUPT_UNDERUTILIZED,
                                    nodes, now_usec / 1000000);
        left = kp_budget_remaining(allowed, disrupting);
        if (left != KP_BUDGET_UNLIMITED && left < want)
            return false;
    }
    return true;
}

enum kp_consolidation_check kp_consolidation_recheck(const struct kp_dnode *v, size_t n,
                                                     const bool *cmd, size_t n_cmd,
                                                     int64_t now_usec, size_t *ret_idx,
                                                     size_t *ret_n)
{
    *ret_n = kp_consolidation_candidates(v, n, cmd, now_usec, NULL, NULL, ret_idx);
    if (*ret_n != n_cmd)
        return KP_CONSOL_CHECK_CHURN;
    if (!budgets_allow(v, n, ret_idx, *ret_n, now_usec))
        return KP_CONSOL_CHECK_BUDGET;
    return KP_CONSOL_CHECK_VALID;
}

bool kp_consolidated_memo_holds(const struct kp_consolidated_memo *m, uint64_t changes,
                                uint64_t catalogs, int64_t now_usec)
{
    /* A clock that went back counts as expired too: better one search too many. */
    return m->set && m->changes == changes && m->catalogs == catalogs && now_usec >= m->at_usec &&
           now_usec - m->at_usec < (int64_t)KP_CONSOLIDATED_TTL_USEC;
}
