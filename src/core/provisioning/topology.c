/* core/provisioning/topology.c: topology groups for the scheduler (scheduler-internal.h), pure.
 *
 * DESIGN
 *
 * What: Karpenter's Topology and TopologyGroup (topology.go, topologygroup.go). Every distinct
 * (kind, key, namespaces, selector, skew, minDomains, node filter) among the batch's spread
 * constraints and pod (anti-)affinity terms is one group; pods of one template share theirs.
 * A group holds a count per domain in an array sorted by domain name, so lookups binary-search
 * and every scan goes in name order (the tie order where upstream iterates a Go map).
 *
 * Domains: the values the usable NodePools' requirements and instance types allow for the key
 * (for a spread with nodeTaintsPolicy Honor, only pools the pod tolerates), the existing nodes'
 * values, and each new claim's hostname once a pod is on it.
 *
 * Counts: taken once per group from the bound pods of the input nodes (non-terminal, not
 * terminating, in the group's namespaces, matching its selector, on nodes its filter admits),
 * then kept current by kp_sched_topo_record() for the groups each placed pod is selected by
 * (computed once per pod). A check costs the pod's groups times their domains; no pod is ever
 * looked at twice.
 *
 * Inverse groups: a bound pod's required anti-affinity term, recorded at its node's domain, and a
 * batch pod's, recorded where it lands; they keep the pods they select out of those domains.
 *
 * Threads: the solver's, for one call. */
#include "core/provisioning/scheduler-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "api/obj-karpenter.h"
#include "core/provider.h"

/* --- topology groups (topologygroup.go) ---------------------------------------------------- */

static bool group_dom_pos(const struct kp_sched_group *g, const char *name, size_t *ret_pos)
{
    return kp_sorted_find(g->d, g->n_d, sizeof(*g->d), offsetof(struct kp_sched_domain, name), name,
                          ret_pos);
}

static const struct kp_sched_domain *group_find(const struct kp_sched_group *g, const char *name)
{
    size_t pos;

    return group_dom_pos(g, name, &pos) ? &g->d[pos] : NULL;
}

static int64_t group_count(const struct kp_sched_group *g, const char *name)
{
    const struct kp_sched_domain *d = group_find(g, name);

    return d ? d->count : 0;
}

static int group_register(struct kp_sched_group *g, const char *name, size_t *ret_pos)
{
    size_t pos;
    struct kp_sched_domain *nd;

    if (group_dom_pos(g, name, &pos)) {
        if (ret_pos)
            *ret_pos = pos;
        return 0;
    }
    nd = kp_grow_array(g->d, &g->cap_d, g->n_d, sizeof(*g->d), 8);
    if (!nd)
        return -ENOMEM;
    g->d = nd;
    memmove(&g->d[pos + 1], &g->d[pos], (g->n_d - pos) * sizeof(*g->d));
    g->d[pos].name = name;
    g->d[pos].claim = 0;
    g->d[pos].count = 0;
    g->n_d++;
    g->n_empty++;
    if (ret_pos)
        *ret_pos = pos;
    return 0;
}

/* ccount[seq] := count, and its taken bit with it (HOSTS). Counts only grow. */
static void ccount_set(struct kp_sched_group *g, size_t seq, int64_t count)
{
    g->ccount[seq] = count;
    if (count != 0)
        g->taken[seq / 64] |= (uint64_t)1 << (seq % 64);
}

static int group_record(struct kp_sched_group *g, const char *name)
{
    size_t pos;
    int rc;

    if ((rc = group_register(g, name, &pos)) < 0)
        return rc;
    if (g->d[pos].count == 0)
        g->n_empty--;
    g->d[pos].count++;
    if (g->d[pos].claim)
        ccount_set(g, g->d[pos].claim - 1, g->d[pos].count);
    return 0;
}

static bool group_selects(const struct kp_sched_group *g, const struct kp_pod_view *p)
{
    bool ns_ok = g->all_ns;

    if (!ns_ok && g->n_ns == 0)
        ns_ok = kp_streq(g->own_ns, p->e.ns);
    for (size_t i = 0; !ns_ok && i < g->n_ns; i++)
        ns_ok = kp_streq(g->ns[i], p->e.ns);
    if (!ns_ok || !kp_reqs_match(g->sel, &p->meta.labels))
        return false;
    for (size_t i = 0; i < g->n_extra; i++)
        if (!kp_streq(kp_labels_get(&p->meta.labels, g->extra[i].key), g->extra[i].value))
            return false;
    return true;
}

/* TopologyNodeFilter.Matches: whether a node with these taints and requirements is one the
 * spread counts (nodeTaintsPolicy, nodeAffinityPolicy). Plain compatibility, also for a new
 * claim: upstream's Matches does not pass its compatibility options on. */
static bool group_filter(const struct kp_sched_group *g, const struct kp_taints *taints,
                         const struct kp_reqset *reqs)
{
    bool any = false;

    if (g->type != KP_SCHED_SPREAD)
        return true;
    if (g->f_taints && !kp_sched_tolerates_all(&g->fpod->tolerations, taints, false))
        return false;
    if (!g->f_affinity)
        return true;
    for (size_t i = 0; !any && i < g->n_freqs; i++)
        any = kp_reqset_compatible(reqs, &g->freqs[i], NULL, NULL, 0);
    return any;
}

void kp_sched_group_done(struct kp_sched_group *g)
{
    kp_free(g->extra);
    for (size_t i = 0; i < g->n_freqs; i++)
        kp_reqset_done(&g->freqs[i]);
    kp_free(g->freqs);
    kp_free(g->d);
    kp_free(g->ccount);
    kp_free(g->taken);
}

static bool reqs_same(const struct kp_reqs *a, const struct kp_reqs *b)
{
    if (a->present != b->present || a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        const struct kp_requirement *x = &a->v[i], *y = &b->v[i];

        if (!kp_streq(x->key, y->key) || x->op != y->op || x->n_values != y->n_values)
            return false;
        for (size_t j = 0; j < x->n_values; j++)
            if (!kp_streq(x->values[j], y->values[j]))
                return false;
    }
    return true;
}

/* Whether two groups count the same pods in the same domains (Karpenter's group hash). */
static bool group_same(const struct kp_sched_group *a, const struct kp_sched_group *b)
{
    if (a->type != b->type || a->inverse != b->inverse || !kp_streq(a->key, b->key) ||
        a->max_skew != b->max_skew || a->min_domains != b->min_domains || a->all_ns != b->all_ns ||
        a->n_ns != b->n_ns || a->n_extra != b->n_extra || a->f_affinity != b->f_affinity ||
        a->f_taints != b->f_taints)
        return false;
    if (!a->all_ns && a->n_ns == 0 && !kp_streq(a->own_ns, b->own_ns))
        return false;
    for (size_t i = 0; i < a->n_ns; i++)
        if (!kp_streq(a->ns[i], b->ns[i]))
            return false;
    for (size_t i = 0; i < a->n_extra; i++)
        if (!kp_streq(a->extra[i].key, b->extra[i].key) ||
            !kp_streq(a->extra[i].value, b->extra[i].value))
            return false;
    if (!reqs_same(a->sel, b->sel))
        return false;
    /* A filter is the pod's own node selection: pods of one template share those arrays. */
    if (a->f_affinity &&
        (a->fpod->node_selector.v != b->fpod->node_selector.v ||
         a->fpod->node_selector.n != b->fpod->node_selector.n ||
         a->fpod->required != b->fpod->required || a->fpod->n_required != b->fpod->n_required))
        return false;
    if (a->f_taints && a->fpod->tolerations.v != b->fpod->tolerations.v)
        return false;
    return true;
}

/* Registers in g the domains NodePools can launch into for g's key: for each usable pool and
 * each of its instance types, the values both allow (finite on either side). */
static int group_pool_domains(const struct kp_sched_solver *s, struct kp_sched_group *g)
{
    int rc;

    for (size_t i = 0; i < s->n_pools; i++) {
        const struct kp_sched_pool_state *pl = &s->pools[i];
        const struct kp_req *pr = kp_reqset_get(&pl->reqs, g->key);

        if (!pl->usable)
            continue;
        /* nodeTaintsPolicy Honor: only pools whose taints the pod tolerates give domains
         * (TopologyDomainGroup.ForEachDomain). */
        if (g->type == KP_SCHED_SPREAD && g->f_taints &&
            !kp_sched_tolerates_all(&g->fpod->tolerations, &pl->in->np->tmpl.taints, false))
            continue;
        for (size_t j = 0; j < pl->n_types; j++) {
            const struct kp_instance_type *it = &pl->in->types[pl->types[j]];
            const struct kp_req *tr = kp_reqset_get(&it->reqs, g->key);

            if (req_is_in(tr)) {
                for (size_t k = 0; k < tr->n_values; k++)
                    if (req_has(pr, tr->values[k]) &&
                        (rc = group_register(g, tr->values[k], NULL)) < 0)
                        return rc;
            } else if (req_is_in(pr)) {
                for (size_t k = 0; k < pr->n_values; k++)
                    if (req_has(tr, pr->values[k]) &&
                        (rc = group_register(g, pr->values[k], NULL)) < 0)
                        return rc;
            }
        }
    }
    return 0;
}

/* Registers the existing nodes' domains and counts their bound pods (countDomains). */
static int group_count_nodes(const struct kp_sched_solver *s, struct kp_sched_group *g)
{
    int rc;

    for (size_t i = 0; i < s->n_nodes; i++) {
        const struct kp_sched_target *t = &s->nodes[i];
        const char *dom = kp_streq(g->key, KP_LABEL_HOSTNAME)
                              ? t->hostname
                              : kp_labels_get(&t->node->labels, g->key);

        if (!dom || !group_filter(g, &t->node->taints, &t->reqs))
            continue;
        if ((rc = group_register(g, dom, NULL)) < 0)
            return rc;
        if (g->inverse)
            continue; /* inverse groups count their owners, not the pods they select */
        for (size_t j = 0; j < t->node->n_pods; j++) {
            const struct kp_pod_view *p = t->node->pods[j];

            if (kp_pod_terminal(p) || kp_pod_terminating(p) || !group_selects(g, p))
                continue;
            if ((rc = group_record(g, dom)) < 0)
                return rc;
        }
    }
    return 0;
}

/* Adds g (taking over its arrays) unless an equal group exists; *ret_idx is the group's index.
 * A new group gets its domains and counts. */
static int group_add(struct kp_sched_solver *s, struct kp_sched_group *g, size_t *ret_idx)
{
    struct kp_sched_group *ng;
    int rc;

    for (size_t i = 0; i < s->n_groups; i++)
        if (group_same(&s->groups[i], g)) {
            kp_sched_group_done(g);
            *ret_idx = i;
            return 0;
        }
    if ((rc = group_pool_domains(s, g)) < 0 || (rc = group_count_nodes(s, g)) < 0) {
        kp_sched_group_done(g);
        return rc;
    }
    ng = kp_grow_array(s->groups, &s->cap_groups, s->n_groups, sizeof(*s->groups), 8);
    if (!ng) {
        kp_sched_group_done(g);
        return -ENOMEM;
    }
    s->groups = ng;
    s->groups[s->n_groups] = *g;
    *ret_idx = s->n_groups++;
    return 0;
}

/* The namespaces of a pod (anti-)affinity term: its list, all for an empty namespaceSelector,
 * else the pod's own. A namespaceSelector with expressions needs Namespace labels we do not
 * have: refused (-EOPNOTSUPP). */
static int term_namespaces(const struct kp_pod_view *p, const struct kp_pod_term *t,
                           struct kp_sched_group *g)
{
    if (t->ns_selector.present) {
        if (t->ns_selector.n > 0)
            return -EOPNOTSUPP;
        g->all_ns = true;
        return 0;
    }
    g->ns = t->namespaces;
    g->n_ns = t->n_namespaces;
    g->own_ns = p->e.ns;
    return 0;
}

int kp_sched_group_from_term(struct kp_sched_solver *s, const struct kp_pod_view *p,
                             const struct kp_pod_term *t, enum kp_sched_gtype type, bool inverse,
                             size_t *ret_idx)
{
    struct kp_sched_group g = {0};
    int rc;

    if (!t->topology_key || !*t->topology_key)
        return -EINVAL; /* the API refuses it; a projection may still hold it */
    g.type = type;
    g.inverse = inverse;
    g.key = t->topology_key;
    g.max_skew = INT32_MAX;
    g.sel = &t->selector;
    if ((rc = term_namespaces(p, t, &g)) < 0)
        return rc;
    return group_add(s, &g, ret_idx);
}

int kp_sched_group_from_spread(struct kp_sched_solver *s, const struct kp_pod_view *p,
                               const struct kp_spread *c, size_t *ret_idx)
{
    struct kp_sched_group g = {0};
    size_t nt = p->n_required ? p->n_required : 1;
    int rc = -ENOMEM;

    if (!c->topology_key || !*c->topology_key)
        return -EINVAL;
    g.type = KP_SCHED_SPREAD;
    g.key = c->topology_key;
    g.max_skew = c->max_skew;
    g.min_domains = c->min_domains;
    g.own_ns = p->e.ns;
    g.sel = &c->selector;
    g.f_affinity = c->honor_node_affinity;
    g.f_taints = c->honor_node_taints;
    g.fpod = p;
    if (c->n_match_label_keys) {
        g.extra = kp_calloc(c->n_match_label_keys, sizeof(*g.extra));
        if (!g.extra)
            goto fail;
        for (size_t i = 0; i < c->n_match_label_keys; i++) {
            const char *v = kp_labels_get(&p->meta.labels, c->match_label_keys[i]);

            if (!v)
                continue; /* kube-scheduler ignores a key the pod does not carry */
            g.extra[g.n_extra].key = c->match_label_keys[i];
            g.extra[g.n_extra++].value = v;
        }
    }
    if (g.f_affinity) {
        g.freqs = kp_calloc(nt, sizeof(*g.freqs));
        if (!g.freqs)
            goto fail;
        for (size_t i = 0; i < nt; i++) {
            if ((rc = kp_sched_strict_reqs(
                     &p->node_selector, p->n_required ? &p->required[i] : NULL, &g.freqs[i])) < 0)
                goto fail;
            g.n_freqs++;
        }
    }
    return group_add(s, &g, ret_idx);
fail:
    kp_sched_group_done(&g);
    return rc;
}

/* --- next domains (nextDomainTopologySpread, nextDomainAffinity, nextDomainAntiAffinity) --- */

/* Allowed domains go to out (room for max(nr's values, g's domains) + 2). pr: the pod's strict
 * requirement for the key (NULL: any), nr: the target's (NULL: any). */
static int64_t spread_min(const struct kp_sched_group *g, const struct kp_req *pr)
{
    int64_t min = INT32_MAX;
    int64_t supported = 0;

    if (kp_streq(g->key, KP_LABEL_HOSTNAME))
        return 0;
    for (size_t i = 0; i < g->n_d; i++)
        if (req_has(pr, g->d[i].name)) {
            supported++;
            if (g->d[i].count < min)
                min = g->d[i].count;
        }
    if (g->min_domains > 0 && supported < g->min_domains)
        min = 0;
    return min;
}

static size_t next_spread(const struct kp_sched_group *g, const struct kp_sched_pod *sp,
                          const struct kp_req *pr, const struct kp_req *nr, const char **out)
{
    int64_t min = spread_min(g, pr), self = group_selects(g, sp->p) ? 1 : 0;
    int64_t best = INT64_MAX;
    const char *host = nr ? kp_req_single(nr) : NULL;
    const char *pick = NULL;

    if (host && kp_streq(g->key, KP_LABEL_HOSTNAME)) {
        if (group_count(g, host) + self > g->max_skew)
            return 0;
        out[0] = host;
        return 1;
    }
    if (req_is_in(nr)) {
        for (size_t i = 0; i < nr->n_values; i++) {
            const struct kp_sched_domain *d = group_find(g, nr->values[i]);

            if (d && d->count + self - min <= g->max_skew && d->count + self < best) {
                best = d->count + self;
                pick = d->name;
            }
        }
    } else {
        for (size_t i = 0; i < g->n_d; i++) {
            const struct kp_sched_domain *d = &g->d[i];

            if (req_has(nr, d->name) && d->count + self - min <= g->max_skew &&
                d->count + self < best) {
                best = d->count + self;
                pick = d->name;
            }
        }
    }
    if (!pick)
        return 0;
    out[0] = pick;
    return 1;
}

static bool any_compatible(const struct kp_sched_group *g, const struct kp_req *pr)
{
    if (!pr)
        return g->n_empty < g->n_d;
    for (size_t i = 0; i < g->n_d; i++)
        if (g->d[i].count > 0 && kp_req_has(pr, g->d[i].name))
            return true;
    return false;
}

static size_t next_affinity(const struct kp_sched_group *g, const struct kp_sched_pod *sp,
                            const struct kp_req *pr, const struct kp_req *nr, const char **out)
{
    const char *host = nr ? kp_req_single(nr) : NULL;
    bool bootstrap;
    size_t n = 0;

    if (host && kp_streq(g->key, KP_LABEL_HOSTNAME)) {
        if (!req_has(pr, host))
            return 0;
        if (group_count(g, host) > 0 ||
            (group_selects(g, sp->p) && (g->n_empty == g->n_d || !any_compatible(g, pr)))) {
            out[0] = host;
            return 1;
        }
        return 0;
    }
    if (req_is_in(nr)) {
        for (size_t i = 0; i < nr->n_values; i++)
            if (req_has(pr, nr->values[i]) && group_count(g, nr->values[i]) > 0)
                out[n++] = nr->values[i];
    } else {
        for (size_t i = 0; i < g->n_d; i++)
            if (g->d[i].count > 0 && req_has(pr, g->d[i].name) && req_has(nr, g->d[i].name))
                out[n++] = g->d[i].name;
    }
    if (n)
        return n;
    /* No pod to be near yet: a pod that selects itself may start anywhere it can go. */
    bootstrap = group_selects(g, sp->p) && (g->n_empty == g->n_d || !any_compatible(g, pr));
    if (!bootstrap)
        return 0;
    for (size_t i = 0; i < g->n_d; i++)
        if (req_has(pr, g->d[i].name) && req_has(nr, g->d[i].name)) {
            out[n++] = g->d[i].name;
            break;
        }
    for (size_t i = 0; i < g->n_d; i++)
        if (req_has(pr, g->d[i].name)) {
            if (n == 0 || !kp_streq(out[0], g->d[i].name))
                out[n++] = g->d[i].name;
            break;
        }
    return n;
}

static size_t next_anti(const struct kp_sched_group *g, const struct kp_req *pr,
                        const struct kp_req *nr, const char **out)
{
    const char *host = nr ? kp_req_single(nr) : NULL;
    size_t n = 0;

    if (host && kp_streq(g->key, KP_LABEL_HOSTNAME)) {
        if (group_count(g, host) != 0)
            return 0;
        out[0] = host;
        return 1;
    }
    if (req_is_in(nr)) {
        for (size_t i = 0; i < nr->n_values; i++) {
            const struct kp_sched_domain *d = group_find(g, nr->values[i]);

            if (d && d->count == 0 && req_has(pr, d->name))
                out[n++] = d->name;
        }
    } else {
        for (size_t i = 0; i < g->n_d; i++)
            if (g->d[i].count == 0 && req_has(nr, g->d[i].name) && req_has(pr, g->d[i].name))
                out[n++] = g->d[i].name;
    }
    return n;
}

static const char *gtype_name(enum kp_sched_gtype t)
{
    switch (t) {
    case KP_SCHED_SPREAD:
        return "topology spread";
    case KP_SCHED_AFFINITY:
        return "pod affinity";
    case KP_SCHED_ANTI:
        return "pod anti-affinity";
    }
    return "";
}

/* Calls fn for each group the pod must satisfy now: its own (what relaxation left), then the
 * inverse groups that select it. Stops at the first fn returning non-zero and returns that. */
static int for_pod_groups(const struct kp_sched_pod *sp, int (*fn)(size_t g, void *ctx), void *ctx)
{
    const struct kp_pod_view *p = sp->p;
    int rc;

    for (size_t i = 0; i < sp->n_spread_active; i++)
        if ((rc = fn(sp->g_spread[sp->spread_active[i]], ctx)) != 0)
            return rc;
    for (size_t i = 0; i < p->n_affinity; i++)
        if ((rc = fn(sp->g_aff[i], ctx)) != 0)
            return rc;
    for (size_t i = sp->paff_drop; i < p->n_preferred_affinity; i++)
        if ((rc = fn(sp->g_paff[sp->paff_order[i]], ctx)) != 0)
            return rc;
    for (size_t i = 0; i < p->n_anti_affinity; i++)
        if ((rc = fn(sp->g_anti[i], ctx)) != 0)
            return rc;
    for (size_t i = sp->panti_drop; i < p->n_preferred_anti_affinity; i++)
        if ((rc = fn(sp->g_panti[sp->panti_order[i]], ctx)) != 0)
            return rc;
    for (size_t i = 0; i < sp->n_inv_sel; i++)
        if ((rc = fn(sp->inv_sel[i], ctx)) != 0)
            return rc;
    return 0;
}

struct narrow_ctx {
    struct kp_sched_solver *s;
    const struct kp_sched_pod *sp;
    const struct kp_reqset *base; /* the target's requirements before topology */
    struct kp_reqset *acc;        /* base narrowed by every group */
    char *why;
    size_t why_size;
    int err;
};

#define NARROW_FAILED 1

static int narrow_one(size_t gi, void *vctx)
{
    struct narrow_ctx *c = vctx;
    const struct kp_sched_group *g = &c->s->groups[gi];
    const struct kp_req *pr = kp_reqset_get(&c->sp->strict, g->key);
    const struct kp_req *nr = kp_reqset_get(c->base, g->key);
    const char *few[8], **out = few;
    size_t room, n = 0;
    int rc;

    /* At most one domain comes out of a spread, or of a target with a hostname of its own
     * (each next_* returns early then); else at most every domain, and affinity's bootstrap
     * two. A hostname group has a domain per claim: sizing for those on every check made a
     * claim scan quadratic. */
    if (g->type == KP_SCHED_SPREAD ||
        (nr && kp_req_single(nr) && kp_streq(g->key, KP_LABEL_HOSTNAME)))
        room = 1;
    else
        room = (nr && nr->n_values > g->n_d ? nr->n_values : g->n_d) + 2;
    if (room > sizeof(few) / sizeof(few[0]) && !(out = kp_reallocarray(NULL, room, sizeof(*out)))) {
        c->err = -ENOMEM;
        return -ENOMEM;
    }
    switch (g->type) {
    case KP_SCHED_SPREAD:
        n = next_spread(g, c->sp, pr, nr, out);
        break;
    case KP_SCHED_AFFINITY:
        n = next_affinity(g, c->sp, pr, nr, out);
        break;
    case KP_SCHED_ANTI:
        n = next_anti(g, pr, nr, out);
        break;
    }
    rc = 0;
    if (!c->acc) { /* feasibility only: no reason wanted */
        if (out != few)
            kp_free(out);
        return n != 0 ? 0 : NARROW_FAILED;
    }
    if (n == 0 || (rc = kp_reqset_add(c->acc, g->key, KP_SEL_IN, out, n, 0)) < 0 ||
        is_empty_req(kp_reqset_get(c->acc, g->key))) {
        if (out != few)
            kp_free(out);
        if (rc < 0) {
            c->err = rc;
            return rc;
        }
        (void)snprintf(c->why, c->why_size, "unsatisfiable %s%s constraint, key=%s",
                       g->inverse ? "inverse " : "", gtype_name(g->type), g->key);
        return NARROW_FAILED;
    }
    if (out != few)
        kp_free(out);
    return 0;
}

/* Topology.AddRequirements: *reqs narrowed by every group the pod must satisfy. 0 with *ok
 * telling whether some domain is left for each; or a negative error. */
int kp_sched_topo_narrow(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                         struct kp_reqset *reqs, bool *ok, char *why, size_t why_size)
{
    struct kp_reqset base = KP_REQSET_INIT;
    struct narrow_ctx c = {s, sp, &base, reqs, why, why_size, 0};
    int rc;

    if ((rc = kp_reqset_copy(reqs, &base)) < 0)
        return rc;
    rc = for_pod_groups(sp, narrow_one, &c);
    kp_reqset_done(&base);
    if (rc < 0)
        return c.err ? c.err : rc;
    *ok = rc == 0;
    return 0;
}

/* Whether every group leaves the pod some domain under reqs, without building anything. The
 * choices only shrink as reqs narrows, so false here means false for any narrower set. */
int kp_sched_topo_feasible(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                           const struct kp_reqset *reqs, bool *ok)
{
    struct narrow_ctx c = {s, sp, reqs, NULL, NULL, 0, 0};
    int rc = for_pod_groups(sp, narrow_one, &c);

    if (rc < 0)
        return c.err ? c.err : rc;
    *ok = rc == 0;
    return 0;
}

struct key_ctx {
    const struct kp_sched_solver *s;
    const char *key;
};

static int same_key(size_t gi, void *vctx)
{
    struct key_ctx *c = vctx;
    const char *k = c->s->groups[gi].key;

    if (kp_streq(k, KP_LABEL_HOSTNAME) || (c->key && !kp_streq(c->key, k)))
        return 1;
    c->key = k;
    return 0;
}

const char *kp_sched_topo_single_key(const struct kp_sched_solver *s, const struct kp_sched_pod *sp)
{
    struct key_ctx c = {s, NULL};

    return for_pod_groups(sp, same_key, &c) == 0 ? c.key : NULL;
}

/* Topology.Record after the pod landed on a target with these taints and requirements. */
int kp_sched_topo_record(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                         const struct kp_taints *taints, const struct kp_reqset *reqs)
{
    int rc;

    for (size_t i = 0; i < sp->n_sel; i++) {
        struct kp_sched_group *g = &s->groups[sp->sel[i]];
        const struct kp_req *r = kp_reqset_get(reqs, g->key);

        if (!req_is_in(r) || !group_filter(g, taints, reqs))
            continue;
        if (g->type == KP_SCHED_ANTI) {
            for (size_t k = 0; k < r->n_values; k++)
                if ((rc = group_record(g, r->values[k])) < 0)
                    return rc;
        } else if (r->n_values == 1 && (rc = group_record(g, r->values[0])) < 0) {
            return rc;
        }
    }
    for (size_t i = 0; i < sp->p->n_anti_affinity; i++) {
        struct kp_sched_group *g = &s->groups[sp->g_inv[i]];
        const struct kp_req *r = kp_reqset_get(reqs, g->key);

        for (size_t k = 0; req_is_in(r) && k < r->n_values; k++)
            if ((rc = group_record(g, r->values[k])) < 0)
                return rc;
    }
    return 0;
}

/* Registers a new claim's hostname in every hostname group (Topology.Register). */
int kp_sched_topo_register_host(struct kp_sched_solver *s, const char *host, size_t seq)
{
    size_t pos;
    int rc;

    for (size_t i = 0; i < s->n_groups; i++) {
        struct kp_sched_group *g = &s->groups[i];

        if (!kp_streq(g->key, KP_LABEL_HOSTNAME))
            continue;
        if (seq >= g->cap_ccount) {
            size_t cap = g->cap_ccount ? g->cap_ccount : 64, old_words = g->cap_ccount / 64;
            int64_t *nc;
            uint64_t *nt;

            while (cap <= seq)
                cap *= 2;
            if (!(nc = kp_reallocarray(g->ccount, cap, sizeof(*nc))))
                return -ENOMEM;
            g->ccount = nc;
            if (!(nt = kp_reallocarray(g->taken, cap / 64, sizeof(*nt))))
                return -ENOMEM;
            memset(nt + old_words, 0, (cap / 64 - old_words) * sizeof(*nt));
            g->taken = nt;
            g->cap_ccount = cap;
        }
        if ((rc = group_register(g, host, &pos)) < 0)
            return rc;
        g->d[pos].claim = seq + 1;
        ccount_set(g, seq, g->d[pos].count);
    }
    return 0;
}

/* Whether any topology group constrains the pod now. */
bool kp_sched_pod_has_topology(const struct kp_sched_pod *sp)
{
    const struct kp_pod_view *p = sp->p;

    return sp->n_spread_active || p->n_affinity || p->n_anti_affinity || sp->n_inv_sel ||
           sp->paff_drop < p->n_preferred_affinity || sp->panti_drop < p->n_preferred_anti_affinity;
}

/* The inverse anti-affinity of the pods bound to existing nodes, counted where they run. */
int kp_sched_bound_anti_affinity(struct kp_sched_solver *s)
{
    int rc;

    for (size_t i = 0; i < s->n_nodes; i++) {
        const struct kp_sched_target *t = &s->nodes[i];

        /* t->anti: the bound pods that are neither terminal nor terminating and have required
         * anti-affinity, in bound order (node_init's, possibly made once for many solves). */
        for (size_t j = 0; j < t->n_anti; j++) {
            const struct kp_pod_view *p = t->anti[j];

            for (size_t k = 0; k < p->n_anti_affinity; k++) {
                const struct kp_pod_term *term = &p->anti_affinity[k];
                const char *dom = kp_streq(term->topology_key, KP_LABEL_HOSTNAME)
                                      ? t->hostname
                                      : kp_labels_get(&t->node->labels, term->topology_key);
                size_t gi;

                rc = kp_sched_group_from_term(s, p, term, KP_SCHED_ANTI, true, &gi);
                if (rc == -EOPNOTSUPP || rc == -EINVAL)
                    continue; /* XXX: a namespaceSelector we cannot evaluate is not enforced */
                if (rc < 0)
                    return rc;
                if (dom && (rc = group_record(&s->groups[gi], dom)) < 0)
                    return rc;
            }
        }
    }
    return 0;
}

/* Which groups select each pod, computed once: placements then touch only these. */
int kp_sched_pods_selections(struct kp_sched_solver *s)
{
    for (size_t i = 0; i < s->n_pods; i++) {
        struct kp_sched_pod *sp = &s->pods[i];

        sp->sel = kp_calloc(s->n_groups + 1, sizeof(*sp->sel));
        sp->inv_sel = kp_calloc(s->n_groups + 1, sizeof(*sp->inv_sel));
        if (!sp->sel || !sp->inv_sel)
            return -ENOMEM;
        for (size_t g = 0; g < s->n_groups; g++) {
            if (!group_selects(&s->groups[g], sp->p))
                continue;
            if (s->groups[g].inverse)
                sp->inv_sel[sp->n_inv_sel++] = g;
            else
                sp->sel[sp->n_sel++] = g;
        }
        if (sp->refuse)
            continue; /* never placed; its group indices may be unset */
        sp->anti_host =
            kp_calloc(sp->p->n_anti_affinity + sp->n_inv_sel + 1, sizeof(*sp->anti_host));
        if (!sp->anti_host)
            return -ENOMEM;
        for (size_t k = 0; k < sp->p->n_anti_affinity + sp->n_inv_sel; k++) {
            size_t g = k < sp->p->n_anti_affinity ? sp->g_anti[k]
                                                  : sp->inv_sel[k - sp->p->n_anti_affinity];

            if (s->groups[g].type == KP_SCHED_ANTI && kp_streq(s->groups[g].key, KP_LABEL_HOSTNAME))
                sp->anti_host[sp->n_anti_host++] = g;
        }
    }
    return 0;
}
