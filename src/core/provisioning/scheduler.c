/* core/provisioning/scheduler.c: the provisioning scheduler (scheduler.h), pure.
 *
 * DESIGN
 *
 * What: Karpenter's Solve (pkg/controllers/provisioning/scheduling/scheduler.go) over value
 * structs. Pods are queued largest first (cpu, then memory descending, then older, then uid,
 * then input index). Each pod popped is tried, with its preferences intact, on
 *   1. existing nodes and in-flight NodeClaims: initialized first, then by name (first fit);
 *   2. the NodeClaims this solve already opened, fewest pods first (ties: opened earlier);
 *   3. a new NodeClaim from each NodePool in weight order (weight descending, then name
 *      descending, as Karpenter's OrderByWeight): the first that can take the pod wins.
 * When nothing takes it, one preference is relaxed (preferences.go's order) and the pod is
 * tried again; when nothing is left to relax the pod goes to the back of the queue with its
 * preferences restored. The loop ends when the queue is empty or a whole turn of the queue made
 * no progress (queue.go: a pod met again with the queue as long as when it was pushed).
 *
 * A NodeClaim under construction holds requirements (the NodePool's, narrowed by each pod's and
 * by topology), the instance types still possible (the pool's types filtered by requirements,
 * by fit of the summed requests plus that type's DaemonSet overhead in its allocatable, by host
 * ports of the DaemonSets and by an available offering compatible with the requirements, then
 * checked for minValues), the summed requests and the host ports in use. At the end, options are
 * ordered by cheapest compatible available offering (ties: name, then catalog order), cut to
 * max_instance_types, and the least DaemonSet overhead is added to the requests (nodeclaim.go).
 *
 * Topology (topology.go, topologygroup.go) is topology.c's: every distinct group of the batch
 * holds a count per domain, taken once from the bound pods and kept current by each placement,
 * so checking a pod never looks at other pods. Where Karpenter iterates a Go map (the domain of
 * least count, the first domain of a self-affinity bootstrap) domains go in name order, which
 * makes the choice the least name among equals.
 *
 * Existing nodes' set-up (node_init: requirements from labels, free resources after bound pods,
 * host ports, DaemonSet room, anti-affinity of bound pods, the order) does not depend on the
 * pods being placed, so kp_sched_prepare_nodes() does it once for a set of nodes and a solve over
 * a subset borrows it (in->prepared): each target is a by-value copy marked borrowed, and
 * target_own() copies the two things a placement changes (used, ports) before the first pod
 * lands there. Nothing borrowed is ever written, so a prepared set may serve many solves.
 *
 * Speed: the shortcuts below skip work whose outcome is already known; none changes a plan (the
 * bench's plan digests and test_prepared_equivalence hold them to that). Each names the
 * invariant it relies on:
 *   OPTIONS  A claim's requirements only narrow, and claim_add keeps only options that passed
 *            the requirement and offering tests against exactly the requirements it stores
 *            (t->opts_reqs_ok; off when BestEffort rewrote a minValues after the tests). A pod
 *            that leaves the requirements equal therefore needs only the fit and host-port
 *            tests per option; those go first, the costly requirement tests (five offering
 *            compatibility checks each) run only on what fits. The flags behind a "no instance
 *            type ..." reason are computed in a second pass, only when no option is left.
 *   TYPES    Whether an instance type's requirements intersect a claim's, and which of its
 *            offerings are available and compatible with them (so its price), depend only on
 *            the claim's requirements for keys the type or an offering constrains: intersects
 *            walks common keys, and compatible asks only about the offering's keys. Each pool
 *            keeps those keys (tkeys) and, per projection of a claim's requirements onto them,
 *            the answers per type, filled when first asked (tcache_get; the last
 *            KP_SCHED_TCACHE projections). Claims of one pool mostly share a projection (the
 *            hostname, the pods' own labels and most topology keys are not type keys), so
 *            400 types cost 400 array reads per placement instead of 2,000 set comparisons.
 *   FIT      An option's room test (rv_fits3: held + pod + the type's DaemonSet overhead within
 *            its allocatable, per resource any of them names) runs on dense per-type amounts
 *            over the pool's resource names (fit_init), the held and pod amounts summed once
 *            per claim and pod (fit_need_init) in rv_fits3's order, so saturation is the same.
 *            A name only the overhead has passes for every pod when the overhead alone fits
 *            (alone_ok); a type where it does not, a pod or claim naming a resource no type
 *            has, or more than 64 names, fall back to rv_fits3.
 *   HOSTS    A pod with required hostname anti-affinity (or selected by an inverse one, or
 *            with a preferred one not yet relaxed away, which binds while in force) is
 *            refused by every open claim whose hostname domain already counts in that group:
 *            topology.c's next_anti returns nothing for a target whose hostname requirement is
 *            one value with a count. With one such pod per claim (Karpenter's benchmark) that
 *            refusal was a topology walk per claim per pod. Each hostname group now mirrors its
 *            claims' counts in an array by claim seq (ccount, written wherever the count
 *            changes: group_record, and register), each pod lists those groups (anti_host),
 *            and each claim knows whether its hostname is exactly its own name
 *            (host_is_name, refreshed by claim_add). Both are also bitsets by claim seq (the
 *            group's taken: ccount non-zero; the solver's host_named), so before a scan
 *            scan_candidates clears such claims from a mask 64 at a time, and the scan passes
 *            over them with one bit test each, never reading the claim. Only claims the full
 *            check would refuse are skipped. A claim registers its hostname once, with its
 *            first pod (registering again was a no-op).
 *   MEMO     When every topology group a pod must satisfy uses one key K other than the
 *            hostname (zone spread or zone affinity), kp_sched_topo_feasible's answer on a
 *            claim depends only on the claim's set for K: each group's walk (narrow_one) reads
 *            the target's requirements for its own key alone, and no count changes during one
 *            scan of the claims. pod_add remembers the answer per distinct set (topo_memo, at
 *            most TOPO_MEMO) and skips claims it refuses, without their room and requirement
 *            checks. Zone-affinity pods otherwise walked every claim pinned to another zone.
 *   ZONES    The same invariant, kept across scans: for each such key K a scan has asked
 *            about (at most ZONE_KEYS), the distinct sets claims hold for K are classes (at
 *            most ZONE_CLASSES; a claim beyond them is loose, always tried), each with a
 *            bitset of its claims by seq, refiled by claim_add whenever a claim's
 *            requirements change. A scan asks kp_sched_topo_feasible once per class, on a set
 *            holding just that class's requirement, and scan_candidates keeps in the mask only
 *            the claims of feasible classes, so a claim pinned to a refused zone costs a bit
 *            test instead of a set lookup and comparison.
 *   FINISH   A finished claim's options in price order (cut at max_types), the instance-type
 *            and capacity-type requirements they give, and the option whose DaemonSet overhead
 *            it requests depend only on its projection (TYPES: prices and offering masks) and
 *            its option set, as long as no requirement has minValues (min_values_unmet and
 *            BestEffort read the rest of the requirements). Claims filled by like pods share
 *            both (Karpenter's 5,000-pod benchmark: 1,000 claims, 38 distinct pairs), so
 *            claim_finish remembers each pair's result (fmemo, at most FINISH_MEMO per pool,
 *            keyed by the projection's generation and the option set) and applies it by one
 *            intersection, instead of a sort and a walk over 400 types and their offerings.
 *            The names set is one allocation (requirements.c packs sorted values), so
 *            applying it copies a block.
 *   ORDER    The claims' order (fewest pods first, stable) was re-established by an insertion
 *            pass over all claims per pod. Between two scans exactly one claim changes (it
 *            gains a pod, or is appended with one), so claim_order_fix moves just that one to
 *            where the stable sort would put it.
 *
 * Threads: pure; any thread. Nothing here outlives the call but the plan (and a prepared set
 * its caller's kp_sched_prepared_free). */
#include "core/provisioning/scheduler-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/str.h"
#include "api/obj-karpenter.h"
#include "core/lifecycle/lifecycle.h"
#include "core/provider.h"

#define MSG_SIZE 1024u

typedef int (*idx_cmp_fn)(const void *ctx, size_t a, size_t b);
static int sort_idx(size_t *v, size_t n, idx_cmp_fn cmp, const void *ctx);
static int zones_classify(struct kp_sched_solver *s, const struct kp_sched_target *t);

/* --- resource vectors ---------------------------------------------------------------------- */

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;

    if (kp_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static bool rv_pos(const struct kp_sched_rv *r, const char *name, size_t *ret_pos)
{
    return kp_sorted_find(r->v, r->n, sizeof(*r->v), offsetof(struct kp_sched_res, name), name,
                          ret_pos);
}

static int64_t rv_get(const struct kp_sched_rv *r, const char *name)
{
    size_t pos;

    return rv_pos(r, name, &pos) ? r->v[pos].milli : 0;
}

static int rv_add(struct kp_sched_rv *r, const char *name, int64_t milli)
{
    size_t pos;
    struct kp_sched_res *nv;

    if (rv_pos(r, name, &pos)) {
        r->v[pos].milli = sat_add(r->v[pos].milli, milli);
        return 0;
    }
    nv = kp_grow_array(r->v, &r->cap, r->n, sizeof(*r->v), 8);
    if (!nv)
        return -ENOMEM;
    r->v = nv;
    memmove(&r->v[pos + 1], &r->v[pos], (r->n - pos) * sizeof(*r->v));
    r->v[pos].name = name;
    r->v[pos].milli = milli;
    r->n++;
    return 0;
}

static int rv_add_res(struct kp_sched_rv *r, const struct kp_resources *res, int64_t sign)
{
    int rc;

    for (size_t i = 0; i < res->n; i++)
        if ((rc = rv_add(r, res->v[i].name, sign * res->v[i].milli)) < 0)
            return rc;
    return 0;
}

static int rv_add_rv(struct kp_sched_rv *r, const struct kp_sched_rv *o, int64_t sign)
{
    int rc;

    for (size_t i = 0; i < o->n; i++)
        if ((rc = rv_add(r, o->v[i].name, sign * o->v[i].milli)) < 0)
            return rc;
    return 0;
}

static void rv_done(struct kp_sched_rv *r)
{
    kp_free(r->v);
    memset(r, 0, sizeof(*r));
}

static int name_cmp(const char *x, const char *y)
{
    return x == y ? 0 : strcmp(x, y);
}

/* Whether a + b + c fits in avail for every resource any of them names (absent: 0), as
 * Karpenter's resources.Fits. c may be NULL. Every vector is sorted by name, so one merged walk
 * visits each name once and finds it in avail by advancing, never by searching: this runs for
 * every (pod, node) pair a placement tries. */
static bool rv_fits3(const struct kp_sched_rv *a, const struct kp_sched_rv *b,
                     const struct kp_sched_rv *c, const struct kp_sched_rv *avail)
{
    const struct kp_sched_rv *all[3] = {a, b, c};
    size_t pos[3] = {0, 0, 0}, ap = 0;

    for (;;) {
        const char *name = NULL;
        int64_t sum = 0, have = 0;

        for (size_t k = 0; k < 3; k++)
            if (all[k] && pos[k] < all[k]->n &&
                (!name || name_cmp(all[k]->v[pos[k]].name, name) < 0))
                name = all[k]->v[pos[k]].name;
        if (!name)
            return true;
        for (size_t k = 0; k < 3; k++)
            if (all[k] && pos[k] < all[k]->n && name_cmp(all[k]->v[pos[k]].name, name) == 0)
                sum = sat_add(sum, all[k]->v[pos[k]++].milli);
        while (ap < avail->n && name_cmp(avail->v[ap].name, name) < 0)
            ap++;
        if (ap < avail->n && name_cmp(avail->v[ap].name, name) == 0)
            have = avail->v[ap].milli;
        if (sum > have)
            return false;
    }
}

/* A pod's requests as the scheduler counts them: effective requests plus "pods: 1". */
static int rv_pod(struct kp_sched_rv *r, const struct kp_resources *req)
{
    int rc;

    if ((rc = rv_add_res(r, req, 1)) < 0)
        return rc;
    return rv_add(r, KP_SCHED_RES_PODS, 1000);
}

static void msg_append(char *msg, const char *fmt, ...) KP_PRINTF(2, 3);
static void msg_append(char *msg, const char *fmt, ...)
{
    size_t len = strlen(msg);
    va_list ap;

    if (len + 1 >= MSG_SIZE)
        return;
    va_start(ap, fmt);
    (void)vsnprintf(msg + len, MSG_SIZE - len, fmt, ap); /* cut at MSG_SIZE on purpose */
    va_end(ap);
}

static const char *node_hostname(const struct kp_sched_node *n)
{
    const char *h = kp_labels_get(&n->labels, KP_LABEL_HOSTNAME);

    return h ? h : n->name;
}

/* A requirement set from a node selector and one node selector term's expressions. */
int kp_sched_strict_reqs(const struct kp_labels *sel, const struct kp_node_term *term,
                         struct kp_reqset *ret)
{
    struct kp_reqset s = KP_REQSET_INIT;
    int rc;

    if ((rc = kp_reqset_add_labels(&s, sel)) < 0 ||
        (term && (rc = kp_reqset_add_requirements(&s, term->exprs.v, term->exprs.n)) < 0)) {
        kp_reqset_done(&s);
        return rc;
    }
    *ret = s;
    return 0;
}

/* --- taints --------------------------------------------------------------------------------- */

static bool pod_tolerates(const struct kp_sched_pod *sp, const struct kp_taint *t)
{
    return kp_tolerations_tolerate(&sp->p->tolerations, t) ||
           (sp->tol_pns && t->effect == KP_TAINT_PREFER_NO_SCHEDULE);
}

/* The first taint of ts the pod does not tolerate, or NULL. */
static const struct kp_taint *untolerated(const struct kp_sched_pod *sp, const struct kp_taints *ts)
{
    for (size_t i = 0; i < ts->n; i++)
        if (!pod_tolerates(sp, &ts->v[i]))
            return &ts->v[i];
    return NULL;
}

bool kp_sched_tolerates_all(const struct kp_tolerations *tl, const struct kp_taints *ts,
                            bool prefer_ok)
{
    for (size_t i = 0; i < ts->n; i++)
        if (!kp_tolerations_tolerate(tl, &ts->v[i]) &&
            !(prefer_ok && ts->v[i].effect == KP_TAINT_PREFER_NO_SCHEDULE))
            return false;
    return true;
}

static void taint_why(const struct kp_taint *t, char *why, size_t n)
{
    (void)snprintf(why, n, "did not tolerate taint %s%s%s:%s", t->key, t->value ? "=" : "",
                   t->value ? t->value : "", kp_taint_effect_name(t->effect));
}

static bool ports_conflict(const struct kp_pod_view *p, const struct kp_host_port *const *used,
                           size_t n_used)
{
    for (size_t i = 0; i < p->n_host_ports; i++)
        for (size_t j = 0; j < n_used; j++)
            if (kp_host_port_conflicts(&p->host_ports[i], used[j]))
                return true;
    return false;
}

static int ports_add(struct kp_sched_target *t, const struct kp_host_port *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct kp_host_port **np =
            kp_grow_array(t->ports, &t->cap_ports, t->n_ports, sizeof(*t->ports), 4);

        if (!np)
            return -ENOMEM;
        t->ports = np;
        t->ports[t->n_ports++] = &v[i];
    }
    return 0;
}

/* --- pod requirements and relaxation (preferences.go) -------------------------------------- */

static const struct kp_node_term *active_required(const struct kp_sched_pod *sp)
{
    return sp->p->n_required ? &sp->p->required[sp->req_skip] : NULL;
}

/* Requirements (nodeSelector, the first remaining required term, the heaviest remaining
 * preferred term) and strict requirements (without the preference), after relaxation. */
static int pod_update_reqs(struct kp_sched_pod *sp)
{
    const struct kp_node_term *pref = NULL;
    int rc;

    kp_reqset_done(&sp->reqs);
    kp_reqset_done(&sp->strict);
    sp->reqs_invalid = false;
    if (sp->pnode_drop < sp->p->n_preferred)
        pref = &sp->p->preferred[sp->pnode_order[sp->pnode_drop]];
    rc = kp_sched_strict_reqs(&sp->p->node_selector, active_required(sp), &sp->strict);
    if (rc == 0 && (rc = kp_reqset_copy(&sp->strict, &sp->reqs)) == 0 && pref)
        rc = kp_reqset_add_requirements(&sp->reqs, pref->exprs.v, pref->exprs.n);
    if (rc == -EINVAL) {
        sp->reqs_invalid = true;
        return 0;
    }
    return rc;
}

/* The pod with every preference it starts with: all of them, or under PREFERENCE_POLICY=Ignore
 * none (preferred terms count as dropped, ScheduleAnyway spreads are left out). */
static void pod_reset(const struct kp_sched_solver *s, struct kp_sched_pod *sp)
{
    const struct kp_pod_view *p = sp->p;
    bool ignore = s->in->ignore_preferences;

    sp->req_skip = 0;
    sp->paff_drop = ignore ? p->n_preferred_affinity : 0;
    sp->panti_drop = ignore ? p->n_preferred_anti_affinity : 0;
    sp->pnode_drop = ignore ? p->n_preferred : 0;
    sp->n_spread_active = 0;
    for (size_t i = 0; i < p->n_spread; i++)
        if (!ignore || p->spread[i].do_not_schedule)
            sp->spread_active[sp->n_spread_active++] = i;
    sp->tol_pns = false;
    sp->steps = 0;
}

static bool has_pns_toleration(const struct kp_pod_view *p)
{
    for (size_t i = 0; i < p->tolerations.n; i++) {
        const struct kp_toleration *t = &p->tolerations.v[i];

        if (t->exists && (!t->key || !*t->key) && t->effect == KP_TAINT_PREFER_NO_SCHEDULE)
            return true;
    }
    return false;
}

/* One relaxation step in Karpenter's order; false when nothing is left to relax. */
static bool pod_relax(const struct kp_sched_solver *s, struct kp_sched_pod *sp)
{
    const struct kp_pod_view *p = sp->p;

    if (p->n_required - sp->req_skip > 1) {
        sp->req_skip++;
    } else if (sp->paff_drop < p->n_preferred_affinity) {
        sp->paff_drop++;
    } else if (sp->panti_drop < p->n_preferred_anti_affinity) {
        sp->panti_drop++;
    } else if (sp->pnode_drop < p->n_preferred) {
        sp->pnode_drop++;
    } else {
        size_t i;

        for (i = 0; i < sp->n_spread_active; i++)
            if (!p->spread[sp->spread_active[i]].do_not_schedule)
                break;
        if (i < sp->n_spread_active) {
            /* Karpenter moves the last constraint into the removed one's place. */
            sp->spread_active[i] = sp->spread_active[sp->n_spread_active - 1];
            sp->n_spread_active--;
        } else if (s->pns_allowed && !sp->tol_pns && !has_pns_toleration(p)) {
            sp->tol_pns = true;
        } else {
            return false;
        }
    }
    sp->steps++;
    return true;
}

/* Indices 0..n-1 ordered by weight descending, stable. */
static size_t *weight_order(const void *base, size_t n, size_t stride, size_t weight_off)
{
    size_t *o = kp_calloc(n ? n : 1, sizeof(*o));

    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int32_t w;
        size_t j = i;

        memcpy(&w, (const char *)base + i * stride + weight_off, sizeof(w));
        while (j > 0) {
            int32_t wj;

            memcpy(&wj, (const char *)base + o[j - 1] * stride + weight_off, sizeof(wj));
            if (wj >= w)
                break;
            o[j] = o[j - 1];
            j--;
        }
        o[j] = i;
    }
    return o;
}

/* --- existing nodes (existingnode.go) ------------------------------------------------------ */

static bool daemon_fits_node(const struct kp_sched_daemon *d, const struct kp_sched_target *t,
                             bool *ret_ok, int *ret_err)
{
    struct kp_reqset r = KP_REQSET_INIT;
    int rc;

    *ret_ok = false;
    *ret_err = 0;
    if (!kp_sched_tolerates_all(&d->tolerations, &t->taints, false))
        return true;
    rc = kp_sched_strict_reqs(&d->node_selector, d->n_required ? &d->required[0] : NULL, &r);
    if (rc == -EINVAL)
        return true; /* a template we cannot read will not run anywhere we can tell */
    if (rc < 0) {
        *ret_err = rc;
        return false;
    }
    *ret_ok = kp_reqset_compatible(&t->reqs, &r, NULL, NULL, 0);
    kp_reqset_done(&r);
    return true;
}

/* Everything about existing node n that does not depend on the pods being placed: what it must
 * have tolerated, its requirements, its free resources and host ports after its bound pods, the
 * room its DaemonSets still claim, and its bound pods with required anti-affinity. */
static int node_init(const struct kp_sched_daemon *daemons, size_t n_daemons,
                     struct kp_sched_target *t, const struct kp_sched_node *n)
{
    struct kp_sched_rv ds = {0}, running = {0};
    const char *host;
    size_t n_anti = 0;
    int rc;

    t->node = n;
    t->hostname = node_hostname(n);
    host = t->hostname;
    /* A managed node that is not initialized yet will lose its startup and ephemeral taints. */
    if (n->nodepool && !n->initialized) {
        t->taints_v = kp_calloc(n->taints.n ? n->taints.n : 1, sizeof(*t->taints_v));
        if (!t->taints_v)
            return -ENOMEM;
        for (size_t i = 0; i < n->taints.n; i++) {
            const struct kp_taint *x = &n->taints.v[i];
            bool startup = false;

            for (size_t j = 0; j < n->startup_taints.n; j++)
                startup = startup || (kp_streq(n->startup_taints.v[j].key, x->key) &&
                                      n->startup_taints.v[j].effect == x->effect);
            if (!startup && !kp_lifecycle_ephemeral_taint(x))
                t->taints_v[t->taints.n++] = *x;
        }
        t->taints.v = t->taints_v;
    } else {
        t->taints = n->taints;
    }
    if ((rc = kp_reqset_add_labels(&t->reqs, &n->labels)) < 0 ||
        (rc = kp_reqset_add(&t->reqs, KP_LABEL_HOSTNAME, KP_SEL_IN, &host, 1, 0)) < 0 ||
        (rc = rv_add_res(&t->avail, &n->allocatable, 1)) < 0)
        goto out;
    for (size_t i = 0; i < n->n_pods; i++) {
        const struct kp_pod_view *p = n->pods[i];

        if (kp_pod_terminal(p))
            continue;
        if ((rc = rv_add_res(&t->avail, &p->requests, -1)) < 0 ||
            (rc = rv_add(&t->avail, KP_SCHED_RES_PODS, -1000)) < 0 ||
            (rc = ports_add(t, p->host_ports, p->n_host_ports)) < 0)
            goto out;
        if ((p->flags & KP_POD_DAEMONSET) && (rc = rv_pod(&running, &p->requests)) < 0)
            goto out;
        n_anti += !kp_pod_terminating(p) && p->n_anti_affinity > 0;
    }
    if (n_anti) {
        t->anti = kp_calloc(n_anti, sizeof(*t->anti));
        if (!t->anti) {
            rc = -ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < n->n_pods; i++) {
            const struct kp_pod_view *p = n->pods[i];

            if (!kp_pod_terminal(p) && !kp_pod_terminating(p) && p->n_anti_affinity > 0)
                t->anti[t->n_anti++] = p;
        }
    }
    /* What the DaemonSets that would run here still need beyond their pods already bound. */
    for (size_t i = 0; i < n_daemons; i++) {
        const struct kp_sched_daemon *d = &daemons[i];
        bool ok;

        if (!daemon_fits_node(d, t, &ok, &rc)) {
            goto out;
        }
        if (ok && (rc = rv_pod(&ds, &d->requests)) < 0)
            goto out;
    }
    for (size_t i = 0; i < ds.n; i++) {
        int64_t left = ds.v[i].milli - rv_get(&running, ds.v[i].name);

        if (left > 0 && (rc = rv_add(&t->used, ds.v[i].name, left)) < 0)
            goto out;
    }
    rc = 0;
out:
    rv_done(&ds);
    rv_done(&running);
    return rc;
}

/* ExistingNode.CanAdd: taints, host ports, resources, requirements, topology. On success
 * *ret_reqs holds the node's requirements narrowed by topology, or nothing when no topology
 * applies (the node's own requirements then stand). */
static int node_can_add(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                        const struct kp_sched_target *t, bool *ok, struct kp_reqset *ret_reqs)
{
    char why[KP_REQSET_WHY_SIZE];
    struct kp_reqset r = KP_REQSET_INIT;
    int rc;

    *ok = false;
    if (untolerated(sp, &t->taints) || ports_conflict(sp->p, t->ports, t->n_ports) ||
        !rv_fits3(&t->used, &sp->req, NULL, &t->avail) ||
        !kp_reqset_compatible(&t->reqs, &sp->reqs, NULL, NULL, 0))
        return 0;
    if (!kp_sched_pod_has_topology(sp)) {
        *ok = true; /* *ret_reqs stays empty: the node's own requirements stand */
        return 0;
    }
    if ((rc = kp_sched_topo_feasible(s, sp, &t->reqs, ok)) < 0 || !*ok)
        return rc;
    if ((rc = kp_reqset_copy(&t->reqs, &r)) < 0 ||
        (rc = kp_sched_topo_narrow(s, sp, &r, ok, why, sizeof(why))) < 0 || !*ok) {
        kp_reqset_done(&r);
        return rc;
    }
    /* ExistingNode.CanAdd's nodeRequirements.Compatible(topologyRequirements): a domain the
     * topology asks for under a key the node has no label for (In or Exists) is not on it; the
     * narrowing alone only added the key. */
    if (!kp_reqset_compatible(&t->reqs, &r, NULL, NULL, 0)) {
        *ok = false;
        kp_reqset_done(&r);
        return 0;
    }
    *ret_reqs = r;
    return 0;
}

/* A node borrowed from a prepared set gets its own copy of what a placement changes (used
 * resources, host ports in use) before the first pod lands on it. */
static int target_own(struct kp_sched_target *t)
{
    struct kp_sched_res *used = NULL;
    const struct kp_host_port **ports = NULL;

    if (!t->cow)
        return 0;
    if ((t->used.n && !(used = kp_calloc(t->used.n, sizeof(*used)))) ||
        (t->n_ports && !(ports = kp_calloc(t->n_ports, sizeof(*ports))))) {
        kp_free(used);
        return -ENOMEM;
    }
    if (t->used.n)
        memcpy(used, t->used.v, t->used.n * sizeof(*used));
    if (t->n_ports)
        memcpy(ports, t->ports, t->n_ports * sizeof(*ports));
    t->used.v = used;
    t->used.cap = t->used.n;
    t->ports = ports;
    t->cap_ports = t->n_ports;
    t->cow = false;
    return 0;
}

static int node_add(struct kp_sched_solver *s, struct kp_sched_pod *sp, struct kp_sched_target *t,
                    const struct kp_reqset *reqs)
{
    int rc;

    if ((rc = target_own(t)) < 0 || (rc = rv_add_rv(&t->used, &sp->req, 1)) < 0 ||
        (rc = ports_add(t, sp->p->host_ports, sp->p->n_host_ports)) < 0)
        return rc;
    return kp_sched_topo_record(s, sp, &t->taints, reqs);
}

/* --- NodePools and instance types (nodeclaimtemplate.go, nodeclaim.go) -------------------- */

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* How many distinct values of r's key, allowed by r, the instance types (indices into types)
 * have between them. */
static int min_values_count(const struct kp_req *r, const struct kp_instance_type *types,
                            const size_t *idx, size_t n, size_t *ret)
{
    const char **seen;
    size_t n_seen = 0, room = 0, distinct = 0;

    for (size_t i = 0; i < n; i++) {
        const struct kp_req *tr = kp_reqset_get(&types[idx[i]].reqs, r->key);

        room += req_is_in(tr) ? tr->n_values : 0;
    }
    seen = kp_calloc(room ? room : 1, sizeof(*seen));
    if (!seen)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct kp_req *tr = kp_reqset_get(&types[idx[i]].reqs, r->key);

        for (size_t j = 0; req_is_in(tr) && j < tr->n_values; j++)
            if (kp_req_has(r, tr->values[j]))
                seen[n_seen++] = tr->values[j];
    }
    qsort(seen, n_seen, sizeof(*seen), cmp_cstr);
    for (size_t i = 0; i < n_seen; i++)
        distinct += i == 0 || strcmp(seen[i - 1], seen[i]) != 0;
    kp_free(seen);
    *ret = distinct;
    return 0;
}

/* The first key whose minValues the instance types cannot meet, or NULL (SatisfiesMinValues). */
static const struct kp_req *min_values_unmet(const struct kp_reqset *reqs,
                                             const struct kp_instance_type *types,
                                             const size_t *idx, size_t n, int *ret_err)
{
    *ret_err = 0;
    for (size_t k = 0; k < reqs->n; k++) {
        size_t count;

        if (!reqs->v[k].min_values)
            continue;
        if ((*ret_err = min_values_count(&reqs->v[k], types, idx, n, &count)) < 0)
            return NULL;
        if (count < reqs->v[k].min_values)
            return &reqs->v[k];
    }
    return NULL;
}

/* key's set in s again, with minValues mv: a set's minValues only grows by intersection, so the
 * set is rebuilt from what it reads as (values, excluded values, bounds). */
static int req_set_min_values(struct kp_reqset *s, const char *key, uint32_t mv)
{
    struct kp_reqset old = KP_REQSET_INIT;
    const struct kp_req *r;
    const char *const *vals;
    int rc;

    if ((rc = kp_reqset_copy(s, &old)) < 0)
        return rc;
    r = kp_reqset_get(&old, key);
    vals = (const char *const *)r->values;
    kp_reqset_remove(s, key);
    if (!r->complement) {
        rc = kp_reqset_add(s, r->key, KP_SEL_IN, vals, r->n_values, mv);
    } else {
        char num[24];
        const char *nv = num;

        rc = kp_reqset_add(s, r->key, r->n_values ? KP_SEL_NOT_IN : KP_SEL_EXISTS, vals,
                           r->n_values, mv);
        if (rc == 0 && r->has_min) {
            (void)snprintf(num, sizeof(num), "%" PRId64, r->min);
            rc = kp_reqset_add(s, r->key, KP_SEL_GTE, &nv, 1, mv);
        }
        if (rc == 0 && r->has_max) {
            (void)snprintf(num, sizeof(num), "%" PRId64, r->max);
            rc = kp_reqset_add(s, r->key, KP_SEL_LTE, &nv, 1, mv);
        }
    }
    kp_reqset_done(&old);
    return rc;
}

/* MIN_VALUES_POLICY=BestEffort: each minValues the options cannot meet is lowered to what they
 * do meet; *relaxed is set when one was. */
static int min_values_relax(struct kp_reqset *reqs, const struct kp_instance_type *types,
                            const size_t *idx, size_t n, bool *relaxed)
{
    for (size_t k = 0; k < reqs->n; k++) {
        size_t count;
        int rc;

        if (!reqs->v[k].min_values)
            continue;
        if ((rc = min_values_count(&reqs->v[k], types, idx, n, &count)) < 0)
            return rc;
        if (count >= reqs->v[k].min_values)
            continue;
        /* The key string lives in reqs->v[k], which the rebuild frees: keep a copy. */
        {
            char *key = kp_strdup(reqs->v[k].key);

            if (!key)
                return -ENOMEM;
            rc = req_set_min_values(reqs, key, (uint32_t)count);
            kp_free(key);
        }
        if (rc < 0)
            return rc;
        *relaxed = true;
    }
    return 0;
}

/* isDaemonPodCompatible: tolerates the pool's taints (PreferNoSchedule always) and, for the
 * first required term that works, compatible with the pool and intersecting the type. */
static int daemon_fits_type(const struct kp_sched_daemon *d, const struct kp_sched_pool_state *pl,
                            const struct kp_instance_type *it, bool *ok)
{
    size_t nt = d->n_required ? d->n_required : 1;

    *ok = false;
    if (!kp_sched_tolerates_all(&d->tolerations, &pl->in->np->tmpl.taints, true))
        return 0;
    for (size_t i = 0; i < nt && !*ok; i++) {
        struct kp_reqset r = KP_REQSET_INIT;
        int rc =
            kp_sched_strict_reqs(&d->node_selector, d->n_required ? &d->required[i] : NULL, &r);

        if (rc == -EINVAL)
            continue;
        if (rc < 0)
            return rc;
        *ok = kp_reqset_compatible(&pl->reqs, &r, kp_reqset_well_known_labels, NULL, 0) &&
              kp_reqset_intersects(&it->reqs, &r, NULL, 0);
        kp_reqset_done(&r);
    }
    return 0;
}

static int64_t type_capacity(const struct kp_instance_type *it, const char *name)
{
    if (strcmp(name, KP_SCHED_RES_NODES) == 0)
        return 1000;
    return kp_provider_res_get(it->capacity, it->n_capacity, name, NULL);
}

/* --- OPTIONS cache: requirement tests of instance types, per projection ------------------ */

#define KP_SCHED_TCACHE 16u
#define TC_UNKNOWN INT64_MIN
/* FINISH: remembered (projection, option set) derivations per pool. */
#define FINISH_MEMO 64u

/* Adds name to the sorted, unique set[0..*n) (room for it is the caller's): a few compares
 * per name where collecting thousands of copies and sorting them cost a fifth of a
 * one-pod solve. */
static void name_set_add(const char **set, size_t *n, const char *name)
{
    size_t pos;

    if (kp_sorted_find(set, *n, sizeof(*set), 0, name, &pos))
        return;
    memmove(&set[pos + 1], &set[pos], (*n - pos) * sizeof(*set));
    set[pos] = name;
    (*n)++;
}

/* pl->tkeys: every key the requirements of pl's types and of their offerings constrain. */
static int tkeys_init(struct kp_sched_pool_state *pl)
{
    const struct kp_sched_pool *in = pl->in;
    size_t room = 0;

    for (size_t i = 0; i < in->n_types; i++) {
        room += in->types[i].reqs.n;
        for (size_t o = 0; o < in->types[i].n_offerings; o++)
            room += in->types[i].offerings[o].reqs.n;
    }
    pl->tkeys = kp_calloc(room ? room : 1, sizeof(*pl->tkeys));
    if (!pl->tkeys)
        return -ENOMEM;
    for (size_t i = 0; i < in->n_types; i++) {
        const struct kp_instance_type *it = &in->types[i];

        for (size_t k = 0; k < it->reqs.n; k++)
            name_set_add(pl->tkeys, &pl->n_tkeys, it->reqs.v[k].key);
        for (size_t o = 0; o < it->n_offerings; o++)
            for (size_t k = 0; k < it->offerings[o].reqs.n; k++)
                name_set_add(pl->tkeys, &pl->n_tkeys, it->offerings[o].reqs.v[k].key);
    }
    return 0;
}

static void tcache_done(struct kp_sched_tcache *tc)
{
    kp_reqset_done(&tc->proj);
    kp_free(tc->meets);
    kp_free(tc->price);
    kp_free(tc->offs);
    memset(tc, 0, sizeof(*tc));
}

/* The cache entry for reqs: its keys outside pl->tkeys dropped, since the requirement tests of
 * a type (kp_reqset_intersects with the type's requirements, kp_reqset_compatible with each
 * offering's) only ever look at keys the type or the offering constrains. */
static int tcache_get(struct kp_sched_pool_state *pl, const struct kp_reqset *reqs,
                      struct kp_sched_tcache **ret)
{
    struct kp_reqset view = KP_REQSET_INIT;
    struct kp_sched_tcache *tc, fresh = {0};
    size_t nt = pl->in->n_types ? pl->in->n_types : 1, pos;
    int rc;

    if (reqs->n > pl->cap_view) {
        struct kp_req *nv = kp_reallocarray(pl->view, reqs->n, sizeof(*nv));

        if (!nv)
            return -ENOMEM;
        pl->view = nv;
        pl->cap_view = reqs->n;
    }
    /* A shallow view (borrowed keys and values, never freed) in reqs' own order. */
    view.v = pl->view;
    for (size_t i = 0; i < reqs->n; i++)
        if (kp_sorted_find(pl->tkeys, pl->n_tkeys, sizeof(*pl->tkeys), 0, reqs->v[i].key, &pos))
            view.v[view.n++] = reqs->v[i];
    for (size_t i = 0; i < pl->n_tc; i++)
        if (kp_reqset_equal(&pl->tc[i].proj, &view)) {
            *ret = &pl->tc[i];
            return 0;
        }
    if ((rc = kp_reqset_copy(&view, &fresh.proj)) < 0)
        return rc;
    fresh.meets = kp_calloc(nt, sizeof(*fresh.meets));
    fresh.price = kp_calloc(nt, sizeof(*fresh.price));
    fresh.offs = kp_calloc(nt, sizeof(*fresh.offs));
    if (!fresh.meets || !fresh.price || !fresh.offs) {
        tcache_done(&fresh);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nt; i++) {
        fresh.meets[i] = -1;
        fresh.price[i] = TC_UNKNOWN;
    }
    if (!pl->tc && !(pl->tc = kp_calloc(KP_SCHED_TCACHE, sizeof(*pl->tc)))) {
        tcache_done(&fresh);
        return -ENOMEM;
    }
    if (pl->n_tc < KP_SCHED_TCACHE) {
        tc = &pl->tc[pl->n_tc++];
    } else {
        tc = &pl->tc[pl->next_tc];
        pl->next_tc = (pl->next_tc + 1) % KP_SCHED_TCACHE;
        tcache_done(tc);
    }
    fresh.gen = ++pl->tc_gen;
    *tc = fresh;
    *ret = tc;
    return 0;
}

/* kp_reqset_intersects(type ti's requirements, the claim's). */
static bool tc_meets(const struct kp_sched_pool_state *pl, struct kp_sched_tcache *tc, size_t ti)
{
    if (tc->meets[ti] < 0)
        tc->meets[ti] = kp_reqset_intersects(&pl->in->types[ti].reqs, &tc->proj, NULL, 0);
    return tc->meets[ti] != 0;
}

/* kp_instance_type_price_for(type ti, the claim's requirements); fills the offering mask too. */
static int64_t tc_price(const struct kp_sched_pool_state *pl, struct kp_sched_tcache *tc, size_t ti)
{
    if (tc->price[ti] == TC_UNKNOWN) {
        const struct kp_instance_type *it = &pl->in->types[ti];
        int64_t best = -1;
        uint64_t offs = 0;

        for (size_t i = 0; i < it->n_offerings; i++) {
            const struct kp_offering *o = &it->offerings[i];

            if (!o->available ||
                !kp_reqset_compatible(&tc->proj, &o->reqs, kp_reqset_well_known_labels, NULL, 0))
                continue;
            if (i < 64)
                offs |= (uint64_t)1 << i;
            if (best < 0 || o->price_micro_usd < best)
                best = o->price_micro_usd;
        }
        tc->price[ti] = best;
        tc->offs[ti] = offs;
    }
    return tc->price[ti];
}

/* --- FIT: resource fit of a claim's options on dense per-type amounts -------------------- */

#define FIT_MAX_NAMES 64u

/* pl->rn and the dense amounts, from pl->alloc and pl->ovh. */
static int fit_init(struct kp_sched_pool_state *pl)
{
    size_t nt = pl->in->n_types, room = 0;

    for (size_t i = 0; i < nt; i++)
        room += pl->alloc[i].n + pl->ovh[i].n;
    pl->rn = kp_calloc(room ? room : 1, sizeof(*pl->rn));
    if (!pl->rn)
        return -ENOMEM;
    for (size_t i = 0; i < nt; i++) {
        for (size_t j = 0; j < pl->alloc[i].n; j++)
            name_set_add(pl->rn, &pl->n_rn, pl->alloc[i].v[j].name);
        for (size_t j = 0; j < pl->ovh[i].n; j++)
            name_set_add(pl->rn, &pl->n_rn, pl->ovh[i].v[j].name);
    }
    if (pl->n_rn > FIT_MAX_NAMES)
        return 0; /* not dense: rv_fits3 every time */
    pl->d_alloc = kp_calloc(nt * pl->n_rn + 1, sizeof(*pl->d_alloc));
    pl->d_ovh = kp_calloc(nt * pl->n_rn + 1, sizeof(*pl->d_ovh));
    pl->has_alloc = kp_calloc(nt + 1, sizeof(*pl->has_alloc));
    pl->has_ovh = kp_calloc(nt + 1, sizeof(*pl->has_ovh));
    pl->alone_ok = kp_calloc(nt + 1, sizeof(*pl->alone_ok));
    if (!pl->d_alloc || !pl->d_ovh || !pl->has_alloc || !pl->has_ovh || !pl->alone_ok)
        return -ENOMEM;
    for (size_t i = 0; i < nt; i++) {
        size_t pos;

        for (size_t j = 0; j < pl->alloc[i].n; j++)
            if (kp_sorted_find(pl->rn, pl->n_rn, sizeof(*pl->rn), 0, pl->alloc[i].v[j].name,
                               &pos)) {
                pl->d_alloc[i * pl->n_rn + pos] = pl->alloc[i].v[j].milli;
                pl->has_alloc[i] |= (uint64_t)1 << pos;
            }
        for (size_t j = 0; j < pl->ovh[i].n; j++)
            if (kp_sorted_find(pl->rn, pl->n_rn, sizeof(*pl->rn), 0, pl->ovh[i].v[j].name, &pos)) {
                pl->d_ovh[i * pl->n_rn + pos] = pl->ovh[i].v[j].milli;
                pl->has_ovh[i] |= (uint64_t)1 << pos;
            }
        pl->alone_ok[i] = rv_fits3(&pl->ovh[i], NULL, NULL, &pl->alloc[i]);
    }
    pl->dense = true;
    return 0;
}

/* pl->octs: each offering's capacity type, looked up once. */
static int octs_init(struct kp_sched_pool_state *pl)
{
    size_t nt = pl->in->n_types, n = 0;

    pl->octs_at = kp_calloc(nt + 1, sizeof(*pl->octs_at));
    if (!pl->octs_at)
        return -ENOMEM;
    for (size_t i = 0; i < nt; i++) {
        pl->octs_at[i] = n;
        n += pl->in->types[i].n_offerings;
    }
    pl->octs = kp_calloc(n + 1, sizeof(*pl->octs));
    if (!pl->octs)
        return -ENOMEM;
    for (size_t i = 0; i < nt; i++)
        for (size_t j = 0; j < pl->in->types[i].n_offerings; j++)
            pl->octs[pl->octs_at[i] + j] =
                kp_offering_value(&pl->in->types[i].offerings[j], KP_LABEL_CAPACITY_TYPE);
    /* Canonical pointers, so claim_finish's de-duplication compares pointers; given up (and
     * strings compared) past 64 distinct values. */
    {
        const char *seen[64];
        size_t n_seen = 0;

        pl->octs_canon = true;
        for (size_t i = 0; pl->octs_canon && i < n; i++) {
            size_t k = 0;

            if (!pl->octs[i])
                continue;
            while (k < n_seen && strcmp(seen[k], pl->octs[i]) != 0)
                k++;
            if (k == n_seen) {
                if (n_seen == sizeof(seen) / sizeof(seen[0])) {
                    pl->octs_canon = false;
                    break;
                }
                seen[n_seen++] = pl->octs[i];
            }
            pl->octs[i] = seen[k];
        }
    }
    return 0;
}

static int cmp_name_idx(const void *ctx, size_t a, size_t b)
{
    const struct kp_instance_type *types = ctx;
    /* A provider's type should have a name; one without sorts first rather than crashing. */
    int c = strcmp(types[a].name ? types[a].name : "", types[b].name ? types[b].name : "");

    return c ? c : (a < b ? -1 : a > b);
}

/* What a claim holds plus one pod, on pl's dense names: v[j] summed as rv_fits3 sums (a's
 * amount, then b's, saturating). usable false (rv_fits3 then) when pl is not dense or a or b
 * names a resource pl's types do not. */
struct fit_need {
    bool usable;
    size_t n_idx;
    uint8_t idx[FIT_MAX_NAMES]; /* names a or b has, in pl->rn */
    int64_t v[FIT_MAX_NAMES];
};

static void fit_need_init(const struct kp_sched_pool_state *pl, const struct kp_sched_rv *a,
                          const struct kp_sched_rv *b, struct fit_need *nd)
{
    const struct kp_sched_rv *both[2] = {a, b};
    uint64_t seen = 0;

    nd->usable = pl->dense;
    nd->n_idx = 0;
    for (size_t k = 0; nd->usable && k < 2; k++)
        for (size_t i = 0; nd->usable && i < both[k]->n; i++) {
            size_t pos;

            if (!kp_sorted_find(pl->rn, pl->n_rn, sizeof(*pl->rn), 0, both[k]->v[i].name, &pos)) {
                nd->usable = false;
                break;
            }
            if (!(seen & ((uint64_t)1 << pos))) {
                seen |= (uint64_t)1 << pos;
                nd->idx[nd->n_idx++] = (uint8_t)pos;
                nd->v[pos] = 0;
            }
            nd->v[pos] = sat_add(nd->v[pos], both[k]->v[i].milli);
        }
}

/* rv_fits3(a, b, &pl->ovh[ti], &pl->alloc[ti]) for the a and b nd was made from. A name only
 * the overhead has is checked by alone_ok; when that fails, rv_fits3 decides. */
static bool fit_option(const struct kp_sched_pool_state *pl, const struct fit_need *nd,
                       const struct kp_sched_rv *a, const struct kp_sched_rv *b, size_t ti)
{
    const int64_t *al, *ov;

    if (!nd->usable || !pl->alone_ok[ti])
        return rv_fits3(a, b, &pl->ovh[ti], &pl->alloc[ti]);
    /* Only now: a pool that is not dense has no d_alloc or d_ovh to point into. */
    al = &pl->d_alloc[ti * pl->n_rn];
    ov = &pl->d_ovh[ti * pl->n_rn];
    for (size_t k = 0; k < nd->n_idx; k++) {
        size_t j = nd->idx[k];
        int64_t sum = nd->v[j], have = 0;

        if (pl->has_ovh[ti] & ((uint64_t)1 << j))
            sum = sat_add(sum, ov[j]);
        if (pl->has_alloc[ti] & ((uint64_t)1 << j))
            have = al[j];
        if (sum > have)
            return false;
    }
    return true;
}

static int pool_init(struct kp_sched_solver *s, struct kp_sched_pool_state *pl,
                     const struct kp_sched_pool *in)
{
    const struct kp_nodepool_view *np = in->np;
    size_t nt = in->n_types ? in->n_types : 1;
    int rc, err;

    pl->in = in;
    pl->name = np->e.name;
    for (size_t i = 0; i < np->tmpl.taints.n; i++)
        if (np->tmpl.taints.v[i].effect == KP_TAINT_PREFER_NO_SCHEDULE)
            s->pns_allowed = true;
    rc = kp_reqset_from_nodepool(np, &pl->reqs);
    if (rc == -EINVAL)
        return 0; /* not usable: the NodePool's validation reports it */
    if (rc < 0)
        return rc;
    pl->types = kp_calloc(nt, sizeof(*pl->types));
    pl->alloc = kp_calloc(nt, sizeof(*pl->alloc));
    pl->ovh = kp_calloc(nt, sizeof(*pl->ovh));
    pl->dports = kp_calloc(nt, sizeof(*pl->dports));
    pl->n_dports = kp_calloc(nt, sizeof(*pl->n_dports));
    if (!pl->types || !pl->alloc || !pl->ovh || !pl->dports || !pl->n_dports)
        return -ENOMEM;
    for (size_t i = 0; i < in->n_types; i++) {
        const struct kp_instance_type *it = &in->types[i];

        for (size_t j = 0; j < it->n_capacity; j++)
            if ((rc = rv_add(&pl->alloc[i], it->capacity[j].name,
                             kp_instance_type_allocatable(it, it->capacity[j].name))) < 0)
                return rc;
        for (size_t j = 0; j < s->in->n_daemons; j++) {
            const struct kp_sched_daemon *d = &s->in->daemons[j];
            bool ok;

            if ((rc = daemon_fits_type(d, pl, it, &ok)) < 0)
                return rc;
            if (!ok)
                continue;
            if ((rc = rv_pod(&pl->ovh[i], &d->requests)) < 0)
                return rc;
            for (size_t k = 0; k < d->n_host_ports; k++) {
                const struct kp_host_port **np2 =
                    kp_reallocarray(pl->dports[i], pl->n_dports[i] + 1, sizeof(*np2));

                if (!np2)
                    return -ENOMEM;
                pl->dports[i] = np2;
                pl->dports[i][pl->n_dports[i]++] = &d->host_ports[k];
            }
        }
        /* The template's own filter: requirements and an offering, nothing requested yet. */
        if (kp_reqset_intersects(&it->reqs, &pl->reqs, NULL, 0) &&
            kp_instance_type_price_for(it, &pl->reqs) >= 0)
            pl->types[pl->n_types++] = i;
    }
    if (pl->n_types == 0)
        return 0;
    if ((rc = tkeys_init(pl)) < 0 || (rc = fit_init(pl)) < 0 || (rc = octs_init(pl)) < 0)
        return rc;
    pl->by_name = kp_calloc(in->n_types + 1, sizeof(*pl->by_name));
    pl->mark = kp_calloc(in->n_types + 1, sizeof(*pl->mark));
    if (!pl->by_name || !pl->mark)
        return -ENOMEM;
    for (size_t i = 0; i < in->n_types; i++)
        pl->by_name[i] = i;
    if ((rc = sort_idx(pl->by_name, in->n_types, cmp_name_idx, in->types)) < 0)
        return rc;
    /* BestEffort keeps a pool whose types cannot meet its minValues (claims relax them). */
    if ((min_values_unmet(&pl->reqs, in->types, pl->types, pl->n_types, &err) &&
         !s->in->min_values_best_effort) ||
        err)
        return err;
    pl->usable = true;
    /* Limits: what is left after the capacity of the pool's nodes and in-flight claims. */
    if (np->limits.n) {
        pl->limited = true;
        if ((rc = rv_add_res(&pl->remaining, &np->limits, 1)) < 0)
            return rc;
        for (size_t i = 0; i < s->n_nodes; i++) {
            const struct kp_sched_node *n = s->nodes[i].node;

            if (!n->nodepool || strcmp(n->nodepool, pl->name) != 0)
                continue;
            for (size_t j = 0; j < pl->remaining.n; j++) {
                struct kp_sched_res *x = &pl->remaining.v[j];

                x->milli = sat_add(x->milli, strcmp(x->name, KP_SCHED_RES_NODES) == 0
                                                 ? -1000
                                                 : -kp_resources_get(&n->capacity, x->name, NULL));
            }
        }
        pl->lcap = kp_calloc(in->n_types * pl->remaining.n + 1, sizeof(*pl->lcap));
        if (!pl->lcap)
            return -ENOMEM;
        for (size_t i = 0; i < in->n_types; i++)
            for (size_t j = 0; j < pl->remaining.n; j++)
                pl->lcap[i * pl->remaining.n + j] =
                    type_capacity(&in->types[i], pl->remaining.v[j].name);
    }
    return 0;
}

static void fmemo_done(struct kp_sched_fmemo *m)
{
    kp_free(m->in);
    kp_free(m->out);
    kp_reqset_done(&m->add);
    memset(m, 0, sizeof(*m));
}

static void pool_done(struct kp_sched_pool_state *pl)
{
    for (size_t i = 0; i < pl->n_tc; i++)
        tcache_done(&pl->tc[i]);
    kp_free(pl->tc);
    for (size_t i = 0; i < pl->n_fm; i++)
        fmemo_done(&pl->fm[i]);
    kp_free(pl->fm);
    kp_free(pl->tkeys);
    kp_free(pl->view);
    kp_free(pl->rn);
    kp_free(pl->d_alloc);
    kp_free(pl->d_ovh);
    kp_free(pl->has_alloc);
    kp_free(pl->has_ovh);
    kp_free(pl->alone_ok);
    kp_free(pl->lcap);
    kp_free(pl->octs);
    kp_free(pl->octs_at);
    kp_free(pl->by_name);
    kp_free(pl->mark);
    kp_reqset_done(&pl->reqs);
    for (size_t i = 0; pl->in && i < pl->in->n_types; i++) {
        if (pl->alloc)
            rv_done(&pl->alloc[i]);
        if (pl->ovh)
            rv_done(&pl->ovh[i]);
        if (pl->dports)
            kp_free(pl->dports[i]);
    }
    kp_free(pl->types);
    kp_free(pl->alloc);
    kp_free(pl->ovh);
    kp_free(pl->dports);
    kp_free(pl->n_dports);
    rv_done(&pl->remaining);
}

static void target_done(struct kp_sched_target *t)
{
    if (!t->borrowed) {
        kp_free(t->taints_v);
        rv_done(&t->avail);
        kp_reqset_done(&t->reqs);
        kp_free(t->anti);
    }
    if (!t->cow) {
        rv_done(&t->used);
        kp_free(t->ports);
    }
    kp_free(t->opts);
    kp_free(t->pods);
}

/* --- NodeClaims of this solve (nodeclaim.go) ----------------------------------------------- */

struct proposal {
    struct kp_reqset reqs;
    size_t *opts, n_opts;
    bool mv_relaxed;
};

static void proposal_done(struct proposal *pr)
{
    kp_reqset_done(&pr->reqs);
    kp_free(pr->opts);
    memset(pr, 0, sizeof(*pr));
}

/* Whether some option of t still has room (resources with its DaemonSet overhead, host ports)
 * for the pod, requirements aside. No allocation. */
static bool claim_room(const struct kp_sched_pool_state *pl, const struct kp_sched_target *t,
                       const struct kp_sched_pod *sp, const struct fit_need *nd)
{
    for (size_t i = 0; i < t->n_opts; i++) {
        size_t ti = t->opts[i];

        if (!ports_conflict(sp->p, pl->dports[ti], pl->n_dports[ti]) &&
            fit_option(pl, nd, &t->used, &sp->req, ti))
            return true;
    }
    return false;
}

/* NodeClaim.CanAdd for claim t (options t->opts) and pod sp. 0 with *ok and, when ok, *ret
 * filled; when not, why says why. */
static int claim_can_add(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                         const struct kp_sched_target *t, bool *ok, struct proposal *ret, char *why,
                         size_t why_size)
{
    struct kp_sched_pool_state *pl = &s->pools[t->pool];
    struct kp_sched_tcache *tc = NULL;
    struct fit_need nd;
    const struct kp_taint *bad;
    struct proposal pr = {0};
    bool reqs_met = false, fits = false, offering = false, ports = false, same;
    const struct kp_req *mv;
    int rc;

    *ok = false;
    if ((bad = untolerated(sp, &pl->in->np->tmpl.taints))) {
        taint_why(bad, why, why_size);
        return 0;
    }
    if (!kp_reqset_compatible(&t->reqs, &sp->reqs, kp_reqset_well_known_labels, why, why_size)) {
        /* Cut on purpose: the reason loses its last bytes to the prefix. */
        char tmp[KP_REQSET_WHY_SIZE - sizeof("incompatible requirements, ")];

        (void)snprintf(tmp, sizeof(tmp), "%s", why);
        (void)snprintf(why, why_size, "incompatible requirements, %s", tmp);
        return 0;
    }
    /* A claim already holding pods mostly fails on room: find out before copying anything (its
     * reason is never shown, so the order of the checks does not matter for it). */
    fit_need_init(pl, &t->used, &sp->req, &nd);
    if (t->n_pods && !claim_room(pl, t, sp, &nd)) {
        (void)snprintf(why, why_size, "no room left on the nodeclaim");
        return 0;
    }
    if (t->n_pods && kp_sched_pod_has_topology(sp)) {
        if ((rc = kp_sched_topo_feasible(s, sp, &t->reqs, ok)) < 0)
            return rc;
        if (!*ok) {
            (void)snprintf(why, why_size, "topology rules the nodeclaim out");
            return 0;
        }
        *ok = false;
    }
    if ((rc = kp_reqset_copy(&t->reqs, &pr.reqs)) < 0 ||
        (rc = kp_reqset_intersect(&pr.reqs, &sp->reqs)) < 0 ||
        (rc = kp_sched_topo_narrow(s, sp, &pr.reqs, ok, why, why_size)) < 0 || !*ok)
        goto fail;
    *ok = false;
    if (ports_conflict(sp->p, t->ports, t->n_ports)) {
        (void)snprintf(why, why_size, "host port conflict with a pod already on the nodeclaim");
        goto fail;
    }
    pr.opts = kp_calloc(t->n_opts ? t->n_opts : 1, sizeof(*pr.opts));
    if (!pr.opts) {
        rc = -ENOMEM;
        goto fail;
    }
    /* The options that take the pod: cheapest test first, and none of the requirement tests
     * when the pod left the requirements as they were (OPTIONS in the DESIGN note). */
    same = t->opts_reqs_ok && kp_reqset_equal(&pr.reqs, &t->reqs);
    if (!same && (rc = tcache_get(pl, &pr.reqs, &tc)) < 0)
        goto fail;
    for (size_t i = 0; i < t->n_opts; i++) {
        size_t ti = t->opts[i];

        if (ports_conflict(sp->p, pl->dports[ti], pl->n_dports[ti]) ||
            !fit_option(pl, &nd, &t->used, &sp->req, ti))
            continue;
        if (same || (tc_meets(pl, tc, ti) && tc_price(pl, tc, ti) >= 0))
            pr.opts[pr.n_opts++] = ti;
    }
    /* None: find out why, as one pass testing everything would have. */
    if (pr.n_opts == 0 && same && (rc = tcache_get(pl, &pr.reqs, &tc)) < 0)
        goto fail;
    for (size_t i = 0; pr.n_opts == 0 && i < t->n_opts; i++) {
        size_t ti = t->opts[i];

        if (ports_conflict(sp->p, pl->dports[ti], pl->n_dports[ti]))
            continue;
        ports = true;
        reqs_met = reqs_met || tc_meets(pl, tc, ti);
        fits = fits || fit_option(pl, &nd, &t->used, &sp->req, ti);
        offering = offering || tc_price(pl, tc, ti) >= 0;
    }
    if (pr.n_opts == 0) {
        if (!ports)
            (void)snprintf(why, why_size,
                           "host port conflict with daemonsets on every instance "
                           "type");
        else if (!reqs_met)
            (void)snprintf(why, why_size, "no instance type met the scheduling requirements");
        else if (!fits)
            (void)snprintf(why, why_size,
                           "no instance type has enough resources (with daemonset overhead)");
        else if (!offering)
            (void)snprintf(why, why_size, "no instance type has an available offering");
        else
            (void)snprintf(why, why_size,
                           "no instance type met requirements, resources and offering together");
        goto fail;
    }
    mv = min_values_unmet(&pr.reqs, pl->in->types, pr.opts, pr.n_opts, &rc);
    if (rc < 0)
        goto fail;
    if (mv && s->in->min_values_best_effort) {
        if ((rc = min_values_relax(&pr.reqs, pl->in->types, pr.opts, pr.n_opts, &pr.mv_relaxed)) <
            0)
            goto fail;
    } else if (mv) {
        (void)snprintf(why, why_size, "minValues requirement is not met for label %s", mv->key);
        goto fail;
    }
    *ok = true;
    *ret = pr;
    return 0;
fail:
    proposal_done(&pr);
    return rc;
}

static int claim_add(struct kp_sched_solver *s, struct kp_sched_pod *sp, struct kp_sched_target *t,
                     struct proposal *pr)
{
    const struct kp_sched_pool_state *pl = &s->pools[t->pool];
    size_t *np;
    int rc;

    np = kp_grow_array(t->pods, &t->cap_pods, t->n_pods, sizeof(*t->pods), 4);
    if (!np)
        return -ENOMEM;
    t->pods = np;
    t->pods[t->n_pods++] = sp->idx;
    kp_reqset_done(&t->reqs);
    t->reqs = pr->reqs;
    kp_free(t->opts);
    t->opts = pr->opts;
    t->n_opts = pr->n_opts;
    t->mv_relaxed = t->mv_relaxed || pr->mv_relaxed;
    /* OPTIONS: each option passed the requirement and offering tests against exactly these
     * requirements, unless BestEffort rewrote a minValues after the tests. */
    t->opts_reqs_ok = !pr->mv_relaxed;
    {
        const struct kp_req *h = kp_reqset_get(&t->reqs, KP_LABEL_HOSTNAME);
        const char *v = h ? kp_req_single(h) : NULL;

        t->host_is_name = v && strcmp(v, t->name) == 0;
        if (t->host_is_name)
            s->host_named[t->seq / 64] |= (uint64_t)1 << (t->seq % 64);
        else
            s->host_named[t->seq / 64] &= ~((uint64_t)1 << (t->seq % 64));
    }
    if ((rc = zones_classify(s, t)) < 0)
        return rc;
    memset(pr, 0, sizeof(*pr));
    if ((rc = rv_add_rv(&t->used, &sp->req, 1)) < 0 ||
        (rc = ports_add(t, sp->p->host_ports, sp->p->n_host_ports)) < 0 ||
        (t->n_pods == 1 && (rc = kp_sched_topo_register_host(s, t->name, t->seq)) < 0))
        return rc;
    return kp_sched_topo_record(s, sp, &pl->in->np->tmpl.taints, &t->reqs);
}

/* A fresh claim of pool pi: the template's requirements plus its own hostname, the options left
 * within the pool's limits. *ok false (why set) when the limits leave nothing. */
static int claim_new(struct kp_sched_solver *s, size_t pi, struct kp_sched_target **ret, bool *ok,
                     char *why, size_t why_size)
{
    const struct kp_sched_pool_state *pl = &s->pools[pi];
    struct kp_sched_target *t;
    const char *host;
    int rc;

    *ok = false;
    if (pl->limited) {
        size_t pos;

        if (rv_pos(&pl->remaining, KP_SCHED_RES_NODES, &pos) && pl->remaining.v[pos].milli <= 0) {
            (void)snprintf(why, why_size, "node limits have been exhausted for nodepool");
            return 0;
        }
    }
    t = kp_calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->pool = pi;
    t->seq = s->n_claims;
    (void)snprintf(t->name, sizeof(t->name), "kp-sched-claim-%zu", s->n_claims);
    host = t->name;
    t->opts = kp_calloc(pl->n_types, sizeof(*t->opts));
    if (!t->opts) {
        rc = -ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < pl->n_types; i++) {
        bool within = true;

        for (size_t j = 0; pl->limited && within && j < pl->remaining.n; j++)
            within = pl->lcap[pl->types[i] * pl->remaining.n + j] <= pl->remaining.v[j].milli;
        if (within)
            t->opts[t->n_opts++] = pl->types[i];
    }
    if (t->n_opts == 0) {
        (void)snprintf(why, why_size, "all available instance types exceed limits for nodepool");
        rc = 0;
        goto fail;
    }
    if ((rc = kp_reqset_copy(&pl->reqs, &t->reqs)) < 0 ||
        (rc = kp_reqset_add(&t->reqs, KP_LABEL_HOSTNAME, KP_SEL_IN, &host, 1, 0)) < 0)
        goto fail;
    *ok = true;
    *ret = t;
    return 0;
fail:
    target_done(t);
    kp_free(t);
    return rc;
}

/* subtractMax: the pool's remaining limits less the largest capacity among the claim's
 * options (we cannot know which one the provider picks). */
static void pool_subtract_max(struct kp_sched_pool_state *pl, const struct kp_sched_target *t)
{
    for (size_t j = 0; pl->limited && j < pl->remaining.n; j++) {
        int64_t max = 0;

        for (size_t i = 0; i < t->n_opts; i++) {
            int64_t c = pl->lcap[t->opts[i] * pl->remaining.n + j];

            if (c > max)
                max = c;
        }
        pl->remaining.v[j].milli = sat_add(pl->remaining.v[j].milli, -max);
    }
}

/* --- one pod ------------------------------------------------------------------------------- */

/* Whether two sets of one key read the same (NULL: the key is not constrained). */
static bool req_same(const struct kp_req *a, const struct kp_req *b)
{
    if (!a || !b)
        return a == b;
    if (a->complement != b->complement || a->n_values != b->n_values || a->has_min != b->has_min ||
        a->has_max != b->has_max || a->min != b->min || a->max != b->max ||
        a->min_values != b->min_values)
        return false;
    for (size_t i = 0; i < a->n_values; i++)
        if (strcmp(a->values[i], b->values[i]) != 0)
            return false;
    return true;
}

/* MEMO: kp_sched_topo_feasible answers for one pod during one scan of the claims, by the
 * claims' set for the pod's single topology key. */
#define TOPO_MEMO 8u

struct topo_memo {
    const char *key; /* NULL: no memo for this pod */
    size_t n;
    const struct kp_req *r[TOPO_MEMO]; /* borrowed from claims' reqs, unchanged during a scan */
    bool ok[TOPO_MEMO];
};

/* 0 with *skip true when the memo (filled here on a miss) says topology refuses the pod on t. */
static int topo_memo_skip(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                          const struct kp_sched_target *t, struct topo_memo *m, bool *skip)
{
    const struct kp_req *r;
    size_t i;
    int rc;

    *skip = false;
    if (!m->key)
        return 0;
    r = kp_reqset_get(&t->reqs, m->key);
    for (i = 0; i < m->n && !req_same(m->r[i], r); i++)
        ;
    if (i == m->n) {
        if (m->n == TOPO_MEMO)
            return 0;
        if ((rc = kp_sched_topo_feasible(s, sp, &t->reqs, &m->ok[i])) < 0)
            return rc;
        m->r[i] = r;
        m->n++;
    }
    *skip = !m->ok[i];
    return 0;
}

/* ORDER: claim_order sorted by pod count, stably (an earlier order of equal counts stays),
 * except the claim at pos, which just gained a pod or was just appended: move it back past
 * larger counts and on past smaller ones, which is what a stable sort of the whole order
 * gives when one element is out of place. */
static void claim_order_fix(struct kp_sched_solver *s, size_t pos)
{
    size_t v = s->claim_order[pos], n = s->claims[v]->n_pods;

    while (pos > 0 && s->claims[s->claim_order[pos - 1]]->n_pods > n) {
        s->claim_order[pos] = s->claim_order[pos - 1];
        pos--;
    }
    while (pos + 1 < s->n_claims && s->claims[s->claim_order[pos + 1]]->n_pods < n) {
        s->claim_order[pos] = s->claim_order[pos + 1];
        pos++;
    }
    s->claim_order[pos] = v;
}

/* v := words bitset words long, the words past old_words zero. */
static int words_grow(uint64_t **v, size_t old_words, size_t words)
{
    uint64_t *n = kp_reallocarray(*v, words, sizeof(*n));

    if (!n)
        return -ENOMEM;
    memset(n + old_words, 0, (words - old_words) * sizeof(*n));
    *v = n;
    return 0;
}

static int zkey_grow(struct kp_sched_zkey *z, size_t old_cap, size_t cap)
{
    uint8_t *co;
    int rc;

    for (size_t c = 0; c < z->n_cls; c++)
        if ((rc = words_grow(&z->bits[c], old_cap / 64, cap / 64)) < 0)
            return rc;
    if ((rc = words_grow(&z->loose, old_cap / 64, cap / 64)) < 0)
        return rc;
    if (!(co = kp_reallocarray(z->cls_of, cap, sizeof(*co))))
        return -ENOMEM;
    memset(co + old_cap, ZONE_NONE, cap - old_cap);
    z->cls_of = co;
    return 0;
}

/* Room in the HOSTS and ZONES indexes for claim seq n - 1. */
static int index_reserve(struct kp_sched_solver *s, size_t n)
{
    size_t cap = s->cap_hosts ? s->cap_hosts : 64;
    int rc;

    if (n <= s->cap_hosts)
        return 0;
    while (cap < n)
        cap *= 2;
    if ((rc = words_grow(&s->host_named, s->cap_hosts / 64, cap / 64)) < 0 ||
        (rc = words_grow(&s->scan_mask, s->cap_hosts / 64, cap / 64)) < 0)
        return rc;
    for (size_t k = 0; k < s->n_zkeys; k++)
        if ((rc = zkey_grow(&s->zkeys[k], s->cap_hosts, cap)) < 0)
            return rc;
    s->cap_hosts = cap;
    return 0;
}

/* ZONES: files claim t under the class of its set for z's key, a new class when it is a set no
 * claim held yet (loose once there are ZONE_CLASSES). */
static int zkey_classify(struct kp_sched_solver *s, struct kp_sched_zkey *z,
                         const struct kp_sched_target *t)
{
    const struct kp_req *r = kp_reqset_get(&t->reqs, z->key);
    size_t seq = t->seq, w = seq / 64, c;
    uint64_t bit = (uint64_t)1 << (seq % 64);
    int rc;

    if (z->cls_of[seq] != ZONE_NONE)
        z->bits[z->cls_of[seq]][w] &= ~bit;
    z->loose[w] &= ~bit;
    z->cls_of[seq] = ZONE_NONE;
    for (c = 0; c < z->n_cls; c++)
        if (req_same(z->cls[c].n ? &z->cls[c].v[0] : NULL, r))
            break;
    if (c == ZONE_CLASSES) {
        z->loose[w] |= bit;
        return 0;
    }
    if (c == z->n_cls) {
        if (!(z->bits[c] = kp_calloc(s->cap_hosts / 64, sizeof(*z->bits[c]))))
            return -ENOMEM;
        if (r) {
            struct kp_req one = *r; /* a borrowed view, copied into the class */
            struct kp_reqset view = {&one, 1};

            if ((rc = kp_reqset_copy(&view, &z->cls[c])) < 0) {
                kp_free(z->bits[c]);
                z->bits[c] = NULL;
                return rc;
            }
        }
        z->n_cls++;
    }
    z->bits[c][w] |= bit;
    z->cls_of[seq] = (uint8_t)c;
    return 0;
}

/* Claim t's requirements changed (claim_add): refile it under every indexed key. */
static int zones_classify(struct kp_sched_solver *s, const struct kp_sched_target *t)
{
    int rc;

    for (size_t k = 0; k < s->n_zkeys; k++)
        if ((rc = zkey_classify(s, &s->zkeys[k], t)) < 0)
            return rc;
    return 0;
}

/* The ZONES index of key, made (and every open claim filed) when first asked; *ret NULL when
 * ZONE_KEYS keys are indexed already. */
static int zkey_for(struct kp_sched_solver *s, const char *key, struct kp_sched_zkey **ret)
{
    struct kp_sched_zkey *z;
    int rc;

    *ret = NULL;
    for (size_t k = 0; k < s->n_zkeys; k++)
        if (kp_streq(s->zkeys[k].key, key)) {
            *ret = &s->zkeys[k];
            return 0;
        }
    if (s->n_zkeys == ZONE_KEYS)
        return 0;
    z = &s->zkeys[s->n_zkeys];
    memset(z, 0, sizeof(*z));
    z->key = key;
    if ((rc = zkey_grow(z, 0, s->cap_hosts)) < 0) {
        kp_free(z->loose);
        kp_free(z->cls_of);
        return rc;
    }
    s->n_zkeys++;
    for (size_t i = 0; i < s->n_claims; i++)
        if ((rc = zkey_classify(s, z, s->claims[i])) < 0)
            return rc;
    *ret = z;
    return 0;
}

static void zkey_done(struct kp_sched_zkey *z)
{
    for (size_t c = 0; c < z->n_cls; c++) {
        kp_reqset_done(&z->cls[c]);
        kp_free(z->bits[c]);
    }
    kp_free(z->loose);
    kp_free(z->cls_of);
}

/* Whether preferred anti-affinity term k of sp (in relaxation order) is on the hostname and
 * still in force: then it refuses claims as a required one does (HOSTS). */
static bool panti_host(const struct kp_sched_solver *s, const struct kp_sched_pod *sp, size_t k)
{
    const struct kp_sched_group *g = &s->groups[sp->g_panti[sp->panti_order[k]]];

    return k >= sp->panti_drop && g->type == KP_SCHED_ANTI && kp_streq(g->key, KP_LABEL_HOSTNAME);
}

/* Whether some hostname anti-affinity group refuses claims for sp now (HOSTS). */
static bool hosts_apply(const struct kp_sched_solver *s, const struct kp_sched_pod *sp)
{
    for (size_t k = sp->panti_drop; k < sp->p->n_preferred_anti_affinity; k++)
        if (panti_host(s, sp, k))
            return true;
    return sp->n_anti_host > 0;
}

/* Word w of the claims (by seq) whose hostname counts in group gi. */
static uint64_t taken_word(const struct kp_sched_solver *s, size_t gi, size_t w)
{
    const struct kp_sched_group *g = &s->groups[gi];

    return w < g->cap_ccount / 64 ? g->taken[w] : 0;
}

/* HOSTS and ZONES: s->scan_mask := by seq, the claims the scan must try for sp, its first nw
 * words: all but those whose hostname is their own name and counts in one of sp's anti_host
 * groups or its preferred hostname anti-affinity still in force, and (z not NULL) those whose
 * set for z's key topology refuses sp on. */
static int scan_candidates(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                           const struct kp_sched_zkey *z, size_t nw)
{
    bool feasible[ZONE_CLASSES];
    int rc;

    for (size_t c = 0; z && c < z->n_cls; c++)
        if ((rc = kp_sched_topo_feasible(s, sp, &z->cls[c], &feasible[c])) < 0)
            return rc;
    for (size_t w = 0; w < nw; w++) {
        uint64_t cand = ~(uint64_t)0, taken = 0;

        for (size_t i = 0; i < sp->n_anti_host; i++)
            taken |= taken_word(s, sp->anti_host[i], w);
        for (size_t k = sp->panti_drop; k < sp->p->n_preferred_anti_affinity; k++)
            if (panti_host(s, sp, k))
                taken |= taken_word(s, sp->g_panti[sp->panti_order[k]], w);
        cand &= ~(s->host_named[w] & taken);
        if (z) {
            uint64_t in = z->loose[w];

            for (size_t c = 0; c < z->n_cls; c++)
                if (feasible[c])
                    in |= z->bits[c][w];
            cand &= in;
        }
        s->scan_mask[w] = cand;
    }
    return 0;
}

/* One open claim, at place k of claim_order, tried for sp (HOSTS and ZONES have passed it):
 * *placed when it took the pod. */
static int claim_try(struct kp_sched_solver *s, struct kp_sched_pod *sp, size_t k,
                     struct topo_memo *memo, char *why, bool *placed)
{
    struct kp_sched_target *t = s->claims[s->claim_order[k]];
    struct kp_sched_result *res = &s->res[sp->idx];
    struct proposal pr = {0};
    bool skip, ok;
    int rc;

    /* MEMO: what claim_can_add's topology check would refuse, cheaply. */
    if ((rc = topo_memo_skip(s, sp, t, memo, &skip)) < 0 || skip)
        return rc;
    if ((rc = claim_can_add(s, sp, t, &ok, &pr, why, KP_REQSET_WHY_SIZE)) < 0 || !ok)
        return rc;
    rc = claim_add(s, sp, t, &pr);
    proposal_done(&pr);
    if (rc < 0)
        return rc;
    claim_order_fix(s, k);
    res->where = KP_SCHED_CLAIM;
    res->index = t->seq;
    *placed = true;
    return 0;
}

/* Scheduler.add: existing nodes, then this solve's claims, then a new claim per pool. 0 with
 * *placed; when not placed, msg says why. */
static int pod_add(struct kp_sched_solver *s, struct kp_sched_pod *sp, bool *placed, char *msg)
{
    struct topo_memo memo = {0};
    struct kp_sched_zkey *z = NULL;
    char why[KP_REQSET_WHY_SIZE];
    struct kp_sched_result *res = &s->res[sp->idx];
    bool ok;
    int rc;

    *placed = false;
    msg[0] = '\0';
    if (sp->reqs_invalid) {
        msg_append(msg, "invalid node selector or node affinity values");
        return 0;
    }
    for (size_t k = 0; k < s->n_nodes; k++) {
        struct kp_sched_target *t = &s->nodes[s->node_order[k]];
        struct kp_reqset r = KP_REQSET_INIT;

        if ((rc = node_can_add(s, sp, t, &ok, &r)) < 0)
            return rc;
        if (!ok)
            continue;
        rc = node_add(s, sp, t, r.n ? &r : &t->reqs);
        kp_reqset_done(&r);
        if (rc < 0)
            return rc;
        res->where = KP_SCHED_NODE;
        res->index = s->node_order[k];
        *placed = true;
        return 0;
    }
    /* Claims already opened, fewest pods first (stable: ties keep their opening order), as
     * claim_order_fix keeps them (ORDER in the DESIGN note). */
    memo.key =
        s->n_claims && kp_sched_pod_has_topology(sp) ? kp_sched_topo_single_key(s, sp) : NULL;
    if (memo.key && (rc = zkey_for(s, memo.key, &z)) < 0)
        return rc;
    if (z || hosts_apply(s, sp)) {
        /* HOSTS and ZONES: in order, only the claims the topology leaves. */
        size_t nw = (s->n_claims + 63) / 64;

        if ((rc = scan_candidates(s, sp, z, nw)) < 0)
            return rc;
        for (size_t k = 0; k < s->n_claims; k++) {
            size_t seq = s->claim_order[k];

            if (!(s->scan_mask[seq / 64] & ((uint64_t)1 << (seq % 64))))
                continue;
            if ((rc = claim_try(s, sp, k, &memo, why, placed)) < 0 || *placed)
                return rc;
        }
    } else {
        for (size_t k = 0; k < s->n_claims; k++)
            if ((rc = claim_try(s, sp, k, &memo, why, placed)) < 0 || *placed)
                return rc;
    }
    if (s->in->n_pools == 0) {
        msg_append(msg, "no nodepools found");
        return 0;
    }
    if (s->n_usable == 0) {
        msg_append(msg, "nodepool requirements filtered out all available instance types");
        return 0;
    }
    for (size_t k = 0; k < s->n_usable; k++) {
        size_t pi = s->pool_order[k];
        struct kp_sched_target *t = NULL, **nc;
        struct proposal pr = {0};
        size_t *no;

        why[0] = '\0';
        if ((rc = claim_new(s, pi, &t, &ok, why, sizeof(why))) < 0)
            return rc;
        if (ok && (rc = claim_can_add(s, sp, t, &ok, &pr, why, sizeof(why))) < 0) {
            target_done(t);
            kp_free(t);
            return rc;
        }
        if (!ok) {
            if (t) {
                target_done(t);
                kp_free(t);
            }
            msg_append(msg, "%sincompatible with nodepool \"%s\", %s", msg[0] ? "; " : "",
                       s->pools[pi].name, why);
            continue;
        }
        no = kp_reallocarray(s->claim_order, s->n_claims + 1, sizeof(*no));
        if (no)
            s->claim_order = no;
        nc = no && index_reserve(s, s->n_claims + 1) == 0
                 ? kp_grow_array(s->claims, &s->cap_claims, s->n_claims, sizeof(*s->claims), 8)
                 : NULL;
        if (!nc) {
            proposal_done(&pr);
            target_done(t);
            kp_free(t);
            return -ENOMEM;
        }
        s->claims = nc;
        s->claims[s->n_claims] = t;
        s->claim_order[s->n_claims] = s->n_claims;
        s->n_claims++;
        rc = claim_add(s, sp, t, &pr);
        proposal_done(&pr);
        if (rc < 0)
            return rc;
        claim_order_fix(s, s->n_claims - 1);
        pool_subtract_max(&s->pools[pi], t);
        res->where = KP_SCHED_CLAIM;
        res->index = t->seq;
        *placed = true;
        return 0;
    }
    return 0;
}

/* Scheduler.trySchedule: the pod with all its preferences, then relaxed one step at a time. */
static int pod_try(struct kp_sched_solver *s, struct kp_sched_pod *sp, bool *placed, char *msg)
{
    int rc;

    pod_reset(s, sp);
    for (;;) {
        if ((rc = pod_update_reqs(sp)) < 0 || (rc = pod_add(s, sp, placed, msg)) < 0)
            return rc;
        if (*placed) {
            s->res[sp->idx].relaxed = sp->steps;
            return 0;
        }
        if (!pod_relax(s, sp))
            return 0;
    }
}

/* --- set-up -------------------------------------------------------------------------------- */

static bool key_set(const char *k)
{
    return k && *k;
}

/* Whether every spread constraint and pod (anti-)affinity term names a topology key (the API
 * requires one; a projection of an object written around validation may lack it). */
static bool topology_keys_set(const struct kp_pod_view *p)
{
    for (size_t i = 0; i < p->n_spread; i++)
        if (!key_set(p->spread[i].topology_key))
            return false;
    for (size_t i = 0; i < p->n_affinity; i++)
        if (!key_set(p->affinity[i].topology_key))
            return false;
    for (size_t i = 0; i < p->n_anti_affinity; i++)
        if (!key_set(p->anti_affinity[i].topology_key))
            return false;
    for (size_t i = 0; i < p->n_preferred_affinity; i++)
        if (!key_set(p->preferred_affinity[i].topology_key))
            return false;
    for (size_t i = 0; i < p->n_preferred_anti_affinity; i++)
        if (!key_set(p->preferred_anti_affinity[i].topology_key))
            return false;
    return true;
}

static int pod_init(struct kp_sched_solver *s, struct kp_sched_pod *sp, const struct kp_pod_view *p,
                    size_t idx)
{
    const struct kp_pod_view *q = p;
    int rc;

    sp->p = p;
    sp->idx = idx;
    if ((rc = rv_pod(&sp->req, &p->requests)) < 0)
        return rc;
    for (size_t i = 0; i < p->n_required; i++)
        if (p->required[i].fields.n) {
            kp_msg_set(&sp->refuse, "node affinity matchFields is not supported");
            return sp->refuse ? 0 : -ENOMEM;
        }
    if (!topology_keys_set(p)) {
        kp_msg_set(&sp->refuse, "a topology spread or pod affinity term has no topologyKey");
        return sp->refuse ? 0 : -ENOMEM;
    }
    sp->pnode_order = weight_order(q->preferred, q->n_preferred, sizeof(*q->preferred),
                                   offsetof(struct kp_node_term, weight));
    sp->paff_order =
        weight_order(q->preferred_affinity, q->n_preferred_affinity, sizeof(*q->preferred_affinity),
                     offsetof(struct kp_pod_term, weight));
    sp->panti_order =
        weight_order(q->preferred_anti_affinity, q->n_preferred_anti_affinity,
                     sizeof(*q->preferred_anti_affinity), offsetof(struct kp_pod_term, weight));
    sp->g_spread = kp_calloc(p->n_spread + 1, sizeof(size_t));
    sp->spread_active = kp_calloc(p->n_spread + 1, sizeof(size_t));
    sp->g_aff = kp_calloc(p->n_affinity + 1, sizeof(size_t));
    sp->g_paff = kp_calloc(p->n_preferred_affinity + 1, sizeof(size_t));
    sp->g_anti = kp_calloc(p->n_anti_affinity + 1, sizeof(size_t));
    sp->g_panti = kp_calloc(p->n_preferred_anti_affinity + 1, sizeof(size_t));
    sp->g_inv = kp_calloc(p->n_anti_affinity + 1, sizeof(size_t));
    if (!sp->pnode_order || !sp->paff_order || !sp->panti_order || !sp->g_spread ||
        !sp->spread_active || !sp->g_aff || !sp->g_paff || !sp->g_anti || !sp->g_panti ||
        !sp->g_inv)
        return -ENOMEM;
    rc = 0;
    for (size_t i = 0; rc == 0 && i < p->n_spread; i++)
        rc = kp_sched_group_from_spread(s, p, &p->spread[i], &sp->g_spread[i]);
    for (size_t i = 0; rc == 0 && i < p->n_affinity; i++)
        rc = kp_sched_group_from_term(s, p, &p->affinity[i], KP_SCHED_AFFINITY, false,
                                      &sp->g_aff[i]);
    for (size_t i = 0; rc == 0 && i < p->n_preferred_affinity; i++)
        rc = kp_sched_group_from_term(s, p, &p->preferred_affinity[i], KP_SCHED_AFFINITY, false,
                                      &sp->g_paff[i]);
    for (size_t i = 0; rc == 0 && i < p->n_anti_affinity; i++)
        rc = kp_sched_group_from_term(s, p, &p->anti_affinity[i], KP_SCHED_ANTI, false,
                                      &sp->g_anti[i]);
    for (size_t i = 0; rc == 0 && i < p->n_preferred_anti_affinity; i++)
        rc = kp_sched_group_from_term(s, p, &p->preferred_anti_affinity[i], KP_SCHED_ANTI, false,
                                      &sp->g_panti[i]);
    for (size_t i = 0; rc == 0 && i < p->n_anti_affinity; i++)
        rc = kp_sched_group_from_term(s, p, &p->anti_affinity[i], KP_SCHED_ANTI, true,
                                      &sp->g_inv[i]);
    if (rc == -EOPNOTSUPP || rc == -EINVAL) {
        if (!sp->refuse)
            kp_msg_set(&sp->refuse, rc == -EINVAL
                                        ? "invalid node affinity values in a topology spread's "
                                          "node filter"
                                        : "pod affinity namespaceSelector with expressions is "
                                          "not supported");
        return sp->refuse ? 0 : -ENOMEM;
    }

    return rc;
}

/* --- orders -------------------------------------------------------------------------------- */

/* A stable merge sort of indices with a context (qsort has none, and is not stable). */
static int sort_idx(size_t *v, size_t n, idx_cmp_fn cmp, const void *ctx)
{
    size_t *tmp, in_order = 1;

    /* A stable sort leaves input already in order as it is: a claim's options usually come
     * in catalog order, which is often price order. */
    while (in_order < n && cmp(ctx, v[in_order - 1], v[in_order]) <= 0)
        in_order++;
    if (in_order >= n)
        return 0;
    tmp = kp_calloc(n, sizeof(*tmp));
    if (!tmp)
        return -ENOMEM;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;

            while (i < mid && j < hi)
                tmp[k++] = cmp(ctx, v[j], v[i]) < 0 ? v[j++] : v[i++];
            while (i < mid)
                tmp[k++] = v[i++];
            while (j < hi)
                tmp[k++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof(*v));
    }
    kp_free(tmp);
    return 0;
}

static int cmp_i64(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

/* queue.go byCPUAndMemoryDescending, then creation, uid and input order. */
static int cmp_pods(const void *ctx, size_t a, size_t b)
{
    const struct kp_sched_solver *s = ctx;
    const struct kp_sched_pod *x = &s->pods[a], *y = &s->pods[b];
    int c;

    if ((c = cmp_i64(y->sort_cpu, x->sort_cpu)) || (c = cmp_i64(y->sort_mem, x->sort_mem)) ||
        (c = cmp_i64(x->p->meta.creation_usec, y->p->meta.creation_usec)))
        return c;
    if ((c = strcmp(x->p->e.uid ? x->p->e.uid : "", y->p->e.uid ? y->p->e.uid : "")))
        return c;
    return cmp_i64((int64_t)a, (int64_t)b);
}

/* sortExistingNodes: initialized first, then by name. ctx: the targets. */
static int cmp_nodes(const void *ctx, size_t a, size_t b)
{
    const struct kp_sched_target *t = ctx;
    const struct kp_sched_node *x = t[a].node, *y = t[b].node;
    int c;

    if (x->initialized != y->initialized)
        return x->initialized ? -1 : 1;
    if ((c = strcmp(x->name, y->name)))
        return c;
    return cmp_i64((int64_t)a, (int64_t)b);
}

/* OrderByWeight: weight descending, then name descending. */
static int cmp_pools(const void *ctx, size_t a, size_t b)
{
    const struct kp_sched_solver *s = ctx;
    const struct kp_nodepool_view *x = s->pools[a].in->np, *y = s->pools[b].in->np;
    int c;

    if ((c = cmp_i64(y->weight, x->weight)) || (c = strcmp(y->e.name, x->e.name)))
        return c;
    return cmp_i64((int64_t)a, (int64_t)b);
}

struct opt_ctx {
    const struct kp_instance_type *types;
    const int64_t *price; /* by type index */
};

/* OrderByPrice: cheapest compatible available offering, then name, then catalog order. */
static int cmp_opts(const void *ctx, size_t a, size_t b)
{
    const struct opt_ctx *o = ctx;
    int c;

    if ((c = cmp_i64(o->price[a], o->price[b])) || (c = strcmp(o->types[a].name, o->types[b].name)))
        return c;
    return cmp_i64((int64_t)a, (int64_t)b);
}

/* --- finishing (FinalizeScheduling, ToNodeClaim) ------------------------------------------- */

static bool has_min_values(const struct kp_reqset *reqs)
{
    for (size_t i = 0; i < reqs->n; i++)
        if (reqs->v[i].min_values)
            return true;
    return false;
}

static uint64_t opts_hash(uint64_t gen, const size_t *v, size_t n)
{
    uint64_t h = UINT64_C(14695981039346656037) ^ gen;

    for (size_t i = 0; i < n; i++)
        h = (h ^ v[i]) * UINT64_C(1099511628211);
    return (h ^ n) * UINT64_C(1099511628211);
}

static const struct kp_sched_fmemo *fmemo_find(const struct kp_sched_pool_state *pl, uint64_t gen,
                                               uint64_t hash, const size_t *opts, size_t n)
{
    for (size_t i = 0; i < pl->n_fm; i++) {
        const struct kp_sched_fmemo *m = &pl->fm[i];

        if (m->gen == gen && m->hash == hash && m->n_in == n &&
            (n == 0 || memcmp(m->in, opts, n * sizeof(*opts)) == 0))
            return m;
    }
    return NULL;
}

/* Remembers what claim_finish derived; a failure only means no memo. */
static void fmemo_put(struct kp_sched_pool_state *pl, uint64_t gen, uint64_t hash, const size_t *in,
                      size_t n_in, const size_t *out, size_t n_out, const struct kp_reqset *add,
                      size_t best)
{
    struct kp_sched_fmemo m = {gen, hash, NULL, n_in, NULL, n_out, KP_REQSET_INIT, best}, *slot;

    if (!pl->fm && !(pl->fm = kp_calloc(FINISH_MEMO, sizeof(*pl->fm))))
        return;
    m.in = kp_calloc(n_in ? n_in : 1, sizeof(*m.in));
    m.out = kp_calloc(n_out ? n_out : 1, sizeof(*m.out));
    if (!m.in || !m.out || kp_reqset_copy(add, &m.add) < 0) {
        fmemo_done(&m);
        return;
    }
    memcpy(m.in, in, n_in * sizeof(*in));
    memcpy(m.out, out, n_out * sizeof(*out));
    if (pl->n_fm < FINISH_MEMO) {
        slot = &pl->fm[pl->n_fm++];
    } else {
        slot = &pl->fm[pl->next_fm];
        pl->next_fm = (pl->next_fm + 1) % FINISH_MEMO;
        fmemo_done(slot);
    }
    *slot = m;
}

/* t's options in price order, cut at max_types, minValues checked (relaxed under BestEffort)
 * and *add := the instance-type and capacity-type requirements they give; *best: the option
 * with the least DaemonSet overhead. *ok false: minValues unmet, the pods fail. */
static int finish_derive(struct kp_sched_solver *s, struct kp_sched_pool_state *pl,
                         struct kp_sched_target *t, struct kp_sched_tcache *tc,
                         struct kp_reqset *add, size_t *ret_best, bool *ok)
{
    const struct kp_instance_type *types = pl->in->types;
    int64_t *price = kp_calloc(pl->in->n_types ? pl->in->n_types : 1, sizeof(*price));
    const char **names = NULL, **cts = NULL;
    size_t n_cts = 0, n_ct_room = 0, best = SIZE_MAX;
    int64_t best_cpu = 0, best_mem = 0;
    const struct kp_req *mv;
    struct opt_ctx oc = {types, price};
    int rc = -ENOMEM;

    *ok = false;
    if (!price)
        goto out;
    for (size_t i = 0; i < t->n_opts; i++) {
        int64_t pr = tc_price(pl, tc, t->opts[i]);

        price[t->opts[i]] = pr < 0 ? INT64_MAX : pr; /* none left: last, as upstream */
    }
    if ((rc = sort_idx(t->opts, t->n_opts, cmp_opts, &oc)) < 0)
        goto out;
    if (t->n_opts > s->max_types)
        t->n_opts = s->max_types;
    mv = min_values_unmet(&t->reqs, types, t->opts, t->n_opts, &rc);
    if (rc < 0)
        goto out;
    if (mv && s->in->min_values_best_effort) {
        if ((rc = min_values_relax(&t->reqs, types, t->opts, t->n_opts, &t->mv_relaxed)) < 0)
            goto out;
    } else if (mv) {
        rc = 0; /* the caller fails the pods */
        goto out;
    }
    /* Looked up again: BestEffort may have rewritten a minValues above. */
    if ((rc = tcache_get(pl, &t->reqs, &tc)) < 0)
        goto out;
    rc = -ENOMEM;
    names = kp_calloc(t->n_opts, sizeof(*names));
    for (size_t i = 0; i < t->n_opts; i++)
        n_ct_room += types[t->opts[i]].n_offerings;
    cts = kp_calloc(n_ct_room ? n_ct_room : 1, sizeof(*cts));
    if (!names || !cts)
        goto out;
    /* The least DaemonSet overhead among the options (cpu, then memory, then price order). */
    for (size_t i = 0; i < t->n_opts; i++) {
        const struct kp_instance_type *it = &types[t->opts[i]];
        const struct kp_sched_rv *o = &pl->ovh[t->opts[i]];
        int64_t o_cpu = rv_get(o, "cpu"), o_mem = rv_get(o, "memory");

        pl->mark[t->opts[i]] = true;
        if (best == SIZE_MAX || o_cpu < best_cpu || (o_cpu == best_cpu && o_mem < best_mem)) {
            best = t->opts[i];
            best_cpu = o_cpu;
            best_mem = o_mem;
        }
        (void)tc_price(pl, tc, t->opts[i]); /* fills tc->offs */
        for (size_t j = 0; j < it->n_offerings; j++) {
            const struct kp_offering *of = &it->offerings[j];
            const char *ct;
            bool dup = false;

            if (j < 64) {
                if (!(tc->offs[t->opts[i]] & ((uint64_t)1 << j)))
                    continue;
            } else if (!of->available ||
                       !kp_reqset_compatible(&t->reqs, &of->reqs, kp_reqset_well_known_labels, NULL,
                                             0)) {
                continue;
            }
            if (!(ct = pl->octs[pl->octs_at[t->opts[i]] + j]))
                continue;
            for (size_t k = 0; !dup && k < n_cts; k++)
                dup = cts[k] == ct || (!pl->octs_canon && kp_streq(cts[k], ct));
            if (!dup)
                cts[n_cts++] = ct;
        }
    }
    /* The names in name order (the set sorts them anyway; sorted input sorts fastest). */
    for (size_t i = 0, n = 0; i < pl->in->n_types; i++)
        if (pl->mark[pl->by_name[i]]) {
            pl->mark[pl->by_name[i]] = false;
            names[n++] = types[pl->by_name[i]].name;
        }
    if ((rc = kp_reqset_add(add, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, names, t->n_opts, 0)) < 0 ||
        (n_cts && (rc = kp_reqset_add(add, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, cts, n_cts, 0)) < 0))
        goto out;
    *ret_best = best;
    *ok = true;
    rc = 0;
out:
    kp_free(price);
    kp_free(names);
    kp_free(cts);
    return rc;
}

/* The plan's NodeClaim from claim t: its options in price order and the requirements they give
 * (FINISH in the DESIGN note), its requests (held + the least DaemonSet overhead among the
 * options) and its pods. *ok false: minValues unmet, the caller fails its pods. */
static int claim_finish(struct kp_sched_solver *s, struct kp_sched_target *t,
                        struct kp_sched_claim *out, bool *ok)
{
    struct kp_sched_pool_state *pl = &s->pools[t->pool];
    struct kp_sched_tcache *tc = NULL;
    const struct kp_sched_fmemo *m = NULL;
    const struct kp_instance_type *types = pl->in->types;
    struct kp_reqset add = KP_REQSET_INIT;
    struct kp_sched_rv req = {0};
    size_t *in = NULL, n_in = t->n_opts, best = SIZE_MAX;
    uint64_t gen = 0, hash = 0;
    bool memo;
    int rc;

    *ok = false;
    kp_reqset_remove(&t->reqs, KP_LABEL_HOSTNAME);
    if ((rc = tcache_get(pl, &t->reqs, &tc)) < 0)
        return rc;
    /* Without minValues, nothing but the projection and the option set goes in. */
    memo = !has_min_values(&t->reqs);
    if (memo) {
        gen = tc->gen;
        hash = opts_hash(gen, t->opts, t->n_opts);
        m = fmemo_find(pl, gen, hash, t->opts, t->n_opts);
    }
    if (m) {
        memcpy(t->opts, m->out, m->n_out * sizeof(*t->opts));
        t->n_opts = m->n_out;
        best = m->best;
        if ((rc = kp_reqset_intersect(&t->reqs, &m->add)) < 0)
            goto out;
    } else {
        rc = -ENOMEM;
        if (memo && !(in = kp_calloc(t->n_opts ? t->n_opts : 1, sizeof(*in))))
            goto out;
        if (in)
            memcpy(in, t->opts, t->n_opts * sizeof(*in));
        if ((rc = finish_derive(s, pl, t, tc, &add, &best, ok)) < 0 || !*ok)
            goto out;
        *ok = false;
        if (memo)
            fmemo_put(pl, gen, hash, in, n_in, t->opts, t->n_opts, &add, best);
        if ((rc = kp_reqset_intersect(&t->reqs, &add)) < 0)
            goto out;
    }
    if ((rc = rv_add_rv(&req, &t->used, 1)) < 0 || (rc = rv_add_rv(&req, &pl->ovh[best], 1)) < 0)
        goto out;
    out->types = kp_calloc(t->n_opts, sizeof(*out->types));
    if (!out->types) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < t->n_opts; i++)
        out->types[i] = &types[t->opts[i]];
    out->n_types = t->n_opts;
    out->pool = t->pool;
    out->reqs = t->reqs;
    t->reqs = (struct kp_reqset)KP_REQSET_INIT;
    out->requests = req.v;
    out->n_requests = req.n;
    req.v = NULL;
    out->pods = t->pods;
    out->n_pods = t->n_pods;
    out->min_values_relaxed = t->mv_relaxed;
    t->pods = NULL;
    *ok = true;
    rc = 0;
out:
    kp_free(in);
    kp_reqset_done(&add);
    rv_done(&req);
    return rc;
}

static void solver_done(struct kp_sched_solver *s)
{
    for (size_t i = 0; s->pods && i < s->n_pods; i++) {
        struct kp_sched_pod *sp = &s->pods[i];

        rv_done(&sp->req);
        kp_free(sp->refuse);
        kp_free(sp->pnode_order);
        kp_free(sp->paff_order);
        kp_free(sp->panti_order);
        kp_free(sp->g_spread);
        kp_free(sp->g_aff);
        kp_free(sp->g_paff);
        kp_free(sp->g_anti);
        kp_free(sp->g_panti);
        kp_free(sp->g_inv);
        kp_free(sp->sel);
        kp_free(sp->inv_sel);
        kp_free(sp->anti_host);
        kp_free(sp->spread_active);
        kp_reqset_done(&sp->reqs);
        kp_reqset_done(&sp->strict);
    }
    kp_free(s->pods);
    for (size_t i = 0; s->nodes && i < s->n_nodes; i++)
        target_done(&s->nodes[i]);
    kp_free(s->nodes);
    kp_free(s->node_order);
    for (size_t i = 0; i < s->n_claims; i++) {
        target_done(s->claims[i]);
        kp_free(s->claims[i]);
    }
    kp_free(s->claims);
    kp_free(s->claim_order);
    kp_free(s->host_named);
    kp_free(s->scan_mask);
    for (size_t k = 0; k < s->n_zkeys; k++)
        zkey_done(&s->zkeys[k]);
    for (size_t i = 0; s->pools && i < s->n_pools; i++)
        pool_done(&s->pools[i]);
    kp_free(s->pools);
    kp_free(s->pool_order);
    for (size_t i = 0; i < s->n_groups; i++)
        kp_sched_group_done(&s->groups[i]);
    kp_free(s->groups);
}

void kp_sched_plan_done(struct kp_sched_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_claims; i++) {
        kp_reqset_done(&p->claims[i].reqs);
        kp_free(p->claims[i].types);
        kp_free(p->claims[i].requests);
        kp_free(p->claims[i].pods);
    }
    kp_free(p->claims);
    for (size_t i = 0; i < p->n_pods; i++)
        kp_free(p->pods[i].error);
    kp_free(p->pods);
    memset(p, 0, sizeof(*p));
}

/* --- prepared nodes ------------------------------------------------------------------------ */

/* What node_init made of every node of a set, and their order, for many solves over subsets of
 * the set. Immutable once made. */
struct kp_sched_prepared {
    const struct kp_sched_node *nodes, *inflight; /* borrowed */
    size_t n_nodes, n_inflight;
    const struct kp_sched_daemon *daemons; /* borrowed; a solve must pass the same */
    size_t n_daemons;
    struct kp_sched_target *t; /* per node, nodes then inflight; t[i].node is the set's */
    size_t n_t;                /* how many of t were initialised (all, once made) */
    size_t *order;             /* indices into t in cmp_nodes order */
};

struct kp_sched_prepared *kp_sched_prepared_free(struct kp_sched_prepared *p)
{
    if (!p)
        return NULL;
    for (size_t i = 0; i < p->n_t; i++)
        target_done(&p->t[i]);
    kp_free(p->t);
    kp_free(p->order);
    kp_free(p);
    return NULL;
}

int kp_sched_prepare_nodes(const struct kp_sched_node *nodes, size_t n_nodes,
                           const struct kp_sched_node *inflight, size_t n_inflight,
                           const struct kp_sched_daemon *daemons, size_t n_daemons,
                           struct kp_sched_prepared **ret)
{
    struct kp_sched_prepared *p = NULL;
    size_t nn;
    int rc = -ENOMEM;

    if (kp_add_overflow(n_nodes, n_inflight, &nn))
        return -EOVERFLOW;
    p = kp_calloc(1, sizeof(*p));
    if (!p)
        goto out;
    *p = (struct kp_sched_prepared){.nodes = nodes,
                                    .inflight = inflight,
                                    .n_nodes = n_nodes,
                                    .n_inflight = n_inflight,
                                    .daemons = daemons,
                                    .n_daemons = n_daemons};
    p->t = kp_calloc(nn ? nn : 1, sizeof(*p->t));
    p->order = kp_calloc(nn ? nn : 1, sizeof(*p->order));
    if (!p->t || !p->order)
        goto out;
    for (size_t i = 0; i < nn; i++) {
        p->n_t++;
        if ((rc = node_init(daemons, n_daemons, &p->t[i],
                            i < n_nodes ? &nodes[i] : &inflight[i - n_nodes])) < 0)
            goto out;
        p->order[i] = i;
    }
    if ((rc = sort_idx(p->order, nn, cmp_nodes, p->t)) < 0)
        goto out;
    *ret = p;
    p = NULL; /* the caller owns it now */
    rc = 0;
out:
    kp_sched_prepared_free(p);
    return rc;
}

/* Whether a and b are the same node as far as node_init can tell. */
static bool same_node(const struct kp_sched_node *a, const struct kp_sched_node *b)
{
    return a->name == b->name && a->nodepool == b->nodepool && a->initialized == b->initialized &&
           a->labels.v == b->labels.v && a->labels.n == b->labels.n && a->taints.v == b->taints.v &&
           a->taints.n == b->taints.n && a->startup_taints.v == b->startup_taints.v &&
           a->startup_taints.n == b->startup_taints.n && a->allocatable.v == b->allocatable.v &&
           a->allocatable.n == b->allocatable.n && a->pods == b->pods && a->n_pods == b->n_pods;
}

/* s->nodes and s->node_order from in->prepared: each target is a shallow copy of the prepared
 * one (borrowed, copy on write) pointing at the input's node, and the order is the prepared
 * order restricted to the input. prepared_of is strictly increasing, so ties on name break by
 * input index exactly as they broke by prepared index: the same order sort_idx would give. */
static int nodes_from_prepared(struct kp_sched_solver *s)
{
    const struct kp_sched_input *in = s->in;
    const struct kp_sched_prepared *p = in->prepared;
    size_t nn = in->n_nodes + in->n_inflight, np = p->n_t;
    size_t *inv = NULL;
    int rc = -EINVAL;

    if (in->daemons != p->daemons || in->n_daemons != p->n_daemons ||
        (!in->prepared_of && nn != np))
        goto out;
    inv = kp_calloc(np ? np : 1, sizeof(*inv));
    if (!inv) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t j = 0; j < np; j++)
        inv[j] = SIZE_MAX;
    for (size_t i = 0; i < nn; i++) {
        const struct kp_sched_node *n =
            i < in->n_nodes ? &in->nodes[i] : &in->inflight[i - in->n_nodes];
        size_t j = in->prepared_of ? in->prepared_of[i] : i;

        if (j >= np || (i > 0 && j <= (in->prepared_of ? in->prepared_of[i - 1] : i - 1)) ||
            !same_node(n, p->t[j].node))
            goto out;
        s->nodes[i] = p->t[j];
        s->nodes[i].node = n;
        s->nodes[i].borrowed = true;
        s->nodes[i].cow = true;
        s->n_nodes++;
        inv[j] = i;
    }
    for (size_t k = 0, m = 0; k < np; k++)
        if (inv[p->order[k]] != SIZE_MAX)
            s->node_order[m++] = inv[p->order[k]];
    rc = 0;
out:
    kp_free(inv);
    return rc;
}

static int solver_setup(struct kp_sched_solver *s)
{
    const struct kp_sched_input *in = s->in;
    size_t nn = in->n_nodes + in->n_inflight;
    int rc;

    s->max_types = in->max_instance_types ? in->max_instance_types : KP_SCHED_MAX_INSTANCE_TYPES;
    s->nodes = kp_calloc(nn ? nn : 1, sizeof(*s->nodes));
    s->node_order = kp_calloc(nn ? nn : 1, sizeof(*s->node_order));
    s->pools = kp_calloc(in->n_pools ? in->n_pools : 1, sizeof(*s->pools));
    s->pool_order = kp_calloc(in->n_pools ? in->n_pools : 1, sizeof(*s->pool_order));
    s->pods = kp_calloc(in->n_pods ? in->n_pods : 1, sizeof(*s->pods));
    if (!s->nodes || !s->node_order || !s->pools || !s->pool_order || !s->pods)
        return -ENOMEM;
    if (in->prepared) {
        if ((rc = nodes_from_prepared(s)) < 0)
            return rc;
    } else {
        for (size_t i = 0; i < nn; i++) {
            const struct kp_sched_node *n =
                i < in->n_nodes ? &in->nodes[i] : &in->inflight[i - in->n_nodes];

            s->n_nodes++;
            if ((rc = node_init(in->daemons, in->n_daemons, &s->nodes[i], n)) < 0)
                return rc;
            s->node_order[i] = i;
        }
        if ((rc = sort_idx(s->node_order, s->n_nodes, cmp_nodes, s->nodes)) < 0)
            return rc;
    }
    for (size_t i = 0; i < in->n_pools; i++) {
        s->n_pools++;
        if ((rc = pool_init(s, &s->pools[i], &in->pools[i])) < 0)
            return rc;
        if (s->pools[i].usable)
            s->pool_order[s->n_usable++] = i;
    }
    if ((rc = sort_idx(s->pool_order, s->n_usable, cmp_pools, s)) < 0)
        return rc;
    for (size_t i = 0; i < in->n_pods; i++) {
        s->n_pods++;
        if ((rc = pod_init(s, &s->pods[i], in->pods[i], i)) < 0)
            return rc;
    }
    if ((rc = kp_sched_bound_anti_affinity(s)) < 0)
        return rc;
    return kp_sched_pods_selections(s);
}

/* The queue loop of Solve. */
static int solver_run(struct kp_sched_solver *s)
{
    char msg[MSG_SIZE];
    size_t n = 0, head = 0, len;
    size_t *q = kp_calloc(s->n_pods ? s->n_pods : 1, sizeof(*q));
    size_t *last = kp_calloc(s->n_pods ? s->n_pods : 1, sizeof(*last));
    int rc = -ENOMEM;

    if (!q || !last)
        goto out;
    for (size_t i = 0; i < s->n_pods; i++) {
        last[i] = SIZE_MAX;
        if (s->pods[i].refuse) {
            if ((s->res[i].error = kp_strdup(s->pods[i].refuse)) == NULL)
                goto out;
            continue;
        }
        q[n++] = i;
        s->pods[i].sort_cpu = rv_get(&s->pods[i].req, "cpu");
        s->pods[i].sort_mem = rv_get(&s->pods[i].req, "memory");
    }
    if ((rc = sort_idx(q, n, cmp_pods, s)) < 0)
        goto out;
    len = n;
    while (len > 0) {
        size_t pi = q[head];
        bool placed;

        if (last[pi] == len)
            break; /* a whole turn without progress */
        head = (head + 1) % n;
        len--;
        if ((rc = pod_try(s, &s->pods[pi], &placed, msg)) < 0)
            goto out;
        kp_free(s->res[pi].error);
        s->res[pi].error = NULL;
        if (placed)
            continue;
        s->res[pi].where = KP_SCHED_FAILED;
        if ((s->res[pi].error = kp_strdup(msg[0] ? msg : "no placement")) == NULL) {
            rc = -ENOMEM;
            goto out;
        }
        q[(head + len) % n] = pi;
        len++;
        last[pi] = len;
    }
    rc = 0;
out:
    kp_free(q);
    kp_free(last);
    return rc;
}

int kp_sched_solve(const struct kp_sched_input *in, struct kp_sched_plan *ret)
{
    struct kp_sched_solver s = {0};
    struct kp_sched_plan plan = {0};
    size_t *map = NULL;
    int rc = -ENOMEM;

    memset(ret, 0, sizeof(*ret));
    s.in = in;
    plan.pods = kp_calloc(in->n_pods ? in->n_pods : 1, sizeof(*plan.pods));
    if (!plan.pods)
        goto out;
    plan.n_pods = in->n_pods;
    s.res = plan.pods;
    if ((rc = solver_setup(&s)) < 0 || (rc = solver_run(&s)) < 0)
        goto out;
    rc = -ENOMEM;
    plan.claims = kp_calloc(s.n_claims ? s.n_claims : 1, sizeof(*plan.claims));
    map = kp_calloc(s.n_claims ? s.n_claims : 1, sizeof(*map));
    if (!plan.claims || !map)
        goto out;
    for (size_t i = 0; i < s.n_claims; i++) {
        struct kp_sched_target *t = s.claims[i];
        bool ok;

        map[i] = SIZE_MAX;
        if ((rc = claim_finish(&s, t, &plan.claims[plan.n_claims], &ok)) < 0)
            goto out;
        if (ok) {
            map[i] = plan.n_claims++;
            continue;
        }
        /* Cutting the options to the cheapest max_instance_types broke minValues. */
        for (size_t k = 0; k < t->n_pods; k++) {
            struct kp_sched_result *r = &plan.pods[t->pods[k]];

            r->where = KP_SCHED_FAILED;
            kp_msg_set(&r->error, "minValues cannot be met by the %zu cheapest instance types",
                       s.max_types);
            if (!r->error) {
                rc = -ENOMEM;
                goto out;
            }
        }
    }
    for (size_t i = 0; i < plan.n_pods; i++)
        if (plan.pods[i].where == KP_SCHED_CLAIM)
            plan.pods[i].index = map[plan.pods[i].index];
    *ret = plan;
    plan = (struct kp_sched_plan){0};
    rc = 0;
out:
    kp_free(map);
    solver_done(&s);
    kp_sched_plan_done(&plan);
    return rc;
}
