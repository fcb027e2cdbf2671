/* core/disruption/drift.c: the Drift disruption method's pure decisions (drift.h). */
#include "core/disruption/drift.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "api/obj-karpenter.h"
#include "api/obj-pod.h"
#include "core/disruption/budget.h"
#include "core/disruption/consolidation.h"
#include "core/disruption/disruption.h"
#include "core/disruption/marking.h"
#include "core/provisioning/scheduler.h"
#include "core/state/cluster.h"

static const struct kp_condition *drifted(const struct kp_dnode *d)
{
    const struct kp_condition *c;

    if (!d->sn->nodeclaim)
        return NULL;
    c = kp_conditions_get(&kp_nodeclaim_view(d->sn->nodeclaim)->conditions, KP_NC_COND_DRIFTED);
    return c && c->status == KP_COND_TRUE ? c : NULL;
}

bool kp_drift_candidate(const struct kp_dnode *d, int64_t now_usec)
{
    char why[256];
    struct kp_dnode eventual;
    const struct kp_obj_duration *tgp;

    if (!d->np || d->np->replicas >= 0 || !drifted(d))
        return false;
    if (!kp_disruption_blocked(d, now_usec, why, sizeof(why)))
        return true;
    /* Eventual: with a terminationGracePeriod, a do-not-disrupt pod does not hold the node. */
    tgp = &kp_nodeclaim_view(d->sn->nodeclaim)->spec.termination_grace_period;
    if ((!d->blocking_pod && !d->blocking_pdb) || !tgp->text || !tgp->valid)
        return false;
    eventual = *d;
    eventual.blocking_pod = NULL;
    eventual.blocking_pdb = NULL;
    return !kp_disruption_blocked(&eventual, now_usec, why, sizeof(why));
}

/* Empty first, then the oldest Drifted transition, then the name. */
static bool sooner(const struct kp_dnode *a, const struct kp_dnode *b)
{
    const struct kp_condition *ca = drifted(a), *cb = drifted(b); /* candidates: never NULL */
    int64_t ta = ca ? ca->last_transition_usec : 0, tb = cb ? cb->last_transition_usec : 0;

    if ((a->reschedulable == 0) != (b->reschedulable == 0))
        return a->reschedulable == 0;
    if (ta != tb)
        return ta < tb;
    return strcmp(kp_nodeclaim_view(a->sn->nodeclaim)->e.name,
                  kp_nodeclaim_view(b->sn->nodeclaim)->e.name) < 0;
}

size_t kp_drift_candidates(const struct kp_dnode *v, size_t n, int64_t now_usec, size_t *ret_idx)
{
    size_t n_cand = 0;

    for (size_t i = 0; i < n; i++)
        if (kp_drift_candidate(&v[i], now_usec))
            ret_idx[n_cand++] = i;
    for (size_t i = 1; i < n_cand; i++) { /* insertion sort: stable, total order */
        size_t x = ret_idx[i], j = i;

        for (; j > 0 && sooner(&v[x], &v[ret_idx[j - 1]]); j--)
            ret_idx[j] = ret_idx[j - 1];
        ret_idx[j] = x;
    }
    return n_cand;
}

void kp_drift_command_done(struct kp_drift_command *c)
{
    if (!c)
        return;
    kp_sim_run_done(&c->run);
    memset(c, 0, sizeof(*c));
}

int kp_drift_search(struct kp_sim *sim, const struct kp_dnode *v, size_t n, const size_t *cand,
                    size_t n_cand, int64_t now_usec, kp_drift_blocked_fn fn, void *ctx,
                    const struct kp_ctx *stop, struct kp_drift_command *ret)
{
    struct kp_pool_budget *pools = kp_calloc(n_cand ? n_cand : 1, sizeof(*pools));
    size_t n_pools = 0;
    char why[512];
    int r = 0;

    memset(ret, 0, sizeof(*ret));
    if (!pools)
        return -ENOMEM;
    for (size_t k = 0; k < n_cand && r == 0; k++) {
        const struct kp_dnode *d = &v[cand[k]];
        struct kp_pool_budget *pb;
        struct kp_sim_run run = {0};
        struct kp_sched_input in = {0};
        const char *no;
        size_t i = cand[k];

        if (kp_ctx_done(stop))
            break;
        pb = kp_pool_budget(pools, &n_pools, v, n, d, KP_DISRUPT_DRIFTED, now_usec);
        if (pb->remaining <= 0)
            continue;
        if ((r = kp_sim_prepare(sim, &i, 1, now_usec, &run, &in)) < 0 ||
            (r = kp_sched_solve(&in, &run.plan)) < 0) {
            kp_sim_run_done(&run);
            break;
        }
        if ((no = kp_disruption_unplaced(&in, &run.plan, &d->sn->node_name, 1, why, sizeof(why)))) {
            if (fn)
                fn(ctx, d, no);
            kp_sim_run_done(&run);
            continue;
        }
        ret->idx = i;
        ret->run = run;
        ret->in = in;
        r = 1;
    }
    kp_free(pools);
    return r;
}
