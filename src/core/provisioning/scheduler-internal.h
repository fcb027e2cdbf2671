/* core/provisioning/scheduler-internal.h: what scheduler.c and topology.c share. Not for other
 * modules: the scheduler's contract is scheduler.h.
 *
 * The solver's state lives for one kp_sched_solve() call on its caller's thread; nothing here is
 * shared across threads. */
#ifndef KP_CORE_PROVISIONING_SCHEDULER_INTERNAL_H
#define KP_CORE_PROVISIONING_SCHEDULER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "api/obj-pod.h"
#include "api/requirements.h"
#include "core/provisioning/scheduler.h"

/* Amounts sorted by name; names borrowed from the input (or static). */
struct kp_sched_rv {
    struct kp_sched_res *v;
    size_t n, cap;
};

/* --- the solver's state ------------------------------------------------------------------- */

enum kp_sched_gtype { KP_SCHED_SPREAD, KP_SCHED_AFFINITY, KP_SCHED_ANTI };

struct kp_sched_domain {
    const char *name; /* borrowed: input labels, instance type values or a claim's hostname */
    int64_t count;
    size_t claim; /* 1 + the seq of the claim this is the hostname of; 0: none */
};

struct kp_sched_group {
    enum kp_sched_gtype type;
    bool inverse; /* a bound or batch pod's anti-affinity, enforced on the pods it selects */
    const char *key;
    int32_t max_skew;
    int32_t min_domains;
    bool all_ns;
    const char *const *ns; /* when !all_ns and n_ns > 0 */
    size_t n_ns;
    const char *own_ns; /* when !all_ns and n_ns == 0 */
    const struct kp_reqs *sel;
    struct kp_label *extra; /* matchLabelKeys: key = the pod's value */
    size_t n_extra;
    /* Spread only: nodeAffinityPolicy / nodeTaintsPolicy Honor, from this pod. */
    bool f_affinity, f_taints;
    const struct kp_pod_view *fpod;
    struct kp_reqset *freqs; /* one per required term (or one), the pod's strict requirements */
    size_t n_freqs;
    struct kp_sched_domain *d;
    size_t n_d, cap_d;
    size_t n_empty;
    /* Hostname groups: the count of each claim's hostname domain by claim seq, kept equal to
     * that domain's count (HOSTS in scheduler.c's DESIGN note). */
    int64_t *ccount;
    size_t cap_ccount;
    uint64_t *taken; /* bit seq: ccount[seq] != 0 (words for cap_ccount bits) */
};

/* One pod being placed. */
struct kp_sched_pod {
    const struct kp_pod_view *p;
    size_t idx;
    struct kp_sched_rv req;
    int64_t sort_cpu, sort_mem; /* req's cpu and memory, read once for the queue's sort */
    char *refuse; /* a feature this scheduler does not model: the pod fails with this */
    /* Preferred terms by weight descending (stable): the order relaxation drops them in. */
    size_t *pnode_order, *paff_order, *panti_order;
    /* Group of each spread constraint and affinity term, by their index in the pod. */
    size_t *g_spread, *g_aff, *g_paff, *g_anti, *g_panti, *g_inv;
    size_t *sel, n_sel;         /* non-inverse groups that select this pod */
    size_t *inv_sel, n_inv_sel; /* inverse groups that select this pod */
    /* Its required anti-affinity groups and the inverse groups selecting it, on hostname:
     * a claim whose hostname counts in one can never take the pod (HOSTS). */
    size_t *anti_host, n_anti_host;
    /* Relaxation state (reset for each attempt). */
    size_t req_skip, paff_drop, panti_drop, pnode_drop;
    size_t *spread_active, n_spread_active;
    bool tol_pns;
    unsigned steps;
    struct kp_reqset reqs, strict;
    bool reqs_invalid;
};

struct kp_sched_target {
    /* existing node */
    const struct kp_sched_node *node;
    const char *hostname;
    bool has_node_taints_copy;
    struct kp_taint *taints_v;
    struct kp_taints taints;
    struct kp_sched_rv avail;
    /* Bound pods, not terminal nor terminating, with required anti-affinity (in n->pods order):
     * the inverse groups kp_sched_bound_anti_affinity makes. Owned unless borrowed. */
    const struct kp_pod_view **anti;
    size_t n_anti;
    /* Borrowed from a kp_sched_prepared: taints_v, avail, reqs and anti are its, never freed
     * here; while cow is also set, used and ports are its too (target_own copies them before
     * the first placement changes them). */
    bool borrowed, cow;
    /* claim */
    size_t pool;
    size_t seq;
    char name[40];
    size_t *opts, n_opts;
    size_t *pods, n_pods, cap_pods;
    bool mv_relaxed;   /* BestEffort lowered a minValues */
    bool host_is_name; /* reqs' hostname is exactly In [name] (HOSTS) */
    /* Every option intersects reqs and has an available offering compatible with reqs (set by
     * claim_add; see OPTIONS in scheduler.c's DESIGN note). */
    bool opts_reqs_ok;
    /* both */
    struct kp_reqset reqs;
    struct kp_sched_rv used;
    const struct kp_host_port **ports;
    size_t n_ports, cap_ports;
};

/* The requirement tests of a pool's instance types against one projection of a claim's
 * requirements (OPTIONS in scheduler.c's DESIGN note). Per in->types index, filled lazily. */
struct kp_sched_tcache {
    struct kp_reqset proj; /* the requirements on the keys the types and offerings constrain */
    int8_t *meets;         /* -1: not yet; else whether the type's requirements intersect */
    int64_t *price;        /* INT64_MIN: not yet; -1: no compatible available offering */
    uint64_t *offs;        /* with price: bit i set when offerings[i] is available and compatible */
    uint64_t gen;          /* which projection this is (entries are reused): FINISH's key */
};

/* FINISH (scheduler.c's DESIGN note): what claim_finish derived from one projection (by gen)
 * and one option set as the claim held it (in, hashed). */
struct kp_sched_fmemo {
    uint64_t gen, hash;
    size_t *in, n_in;
    size_t *out, n_out;   /* in, in price order, cut at the solver's max_types */
    struct kp_reqset add; /* the instance-type and capacity-type requirements they give */
    size_t best;          /* the option whose DaemonSet overhead the NodeClaim requests */
};

struct kp_sched_pool_state {
    const struct kp_sched_pool *in;
    const char *name;
    bool usable;
    struct kp_reqset reqs;
    size_t *types, n_types;    /* indices into in->types that the pool's requirements allow */
    struct kp_sched_rv *alloc; /* per in->types index */
    struct kp_sched_rv *ovh;   /* DaemonSet overhead per in->types index */
    const struct kp_host_port ***dports; /* DaemonSet host ports per in->types index */
    size_t *n_dports;
    bool limited;
    struct kp_sched_rv remaining;
    /* OPTIONS cache: the keys any type or offering constrains (sorted by strcmp), recent
     * projections' results (at most KP_SCHED_TCACHE, replaced round robin) and scratch. */
    const char **tkeys;
    size_t n_tkeys;
    struct kp_sched_tcache *tc;
    size_t n_tc, next_tc;
    uint64_t tc_gen;
    struct kp_sched_fmemo *fm; /* at most FINISH_MEMO, replaced round robin */
    size_t n_fm, next_fm;
    struct kp_req *view;
    size_t cap_view;
    /* FIT (scheduler.c's DESIGN note): the resource names alloc and ovh use (sorted by
     * strcmp; at most 64, else dense is false) and per type, at [type * n_rn + name], their
     * amounts with a bit per name present; alone_ok: the overhead alone fits. */
    bool dense;
    const char **rn;
    size_t n_rn;
    int64_t *d_alloc, *d_ovh;
    uint64_t *has_alloc, *has_ovh;
    bool *alone_ok;
    /* Per type, at [type * remaining.n + j]: its capacity of remaining's j-th resource
     * (type_capacity; limited pools only). Per type, at octs_at[type]: each offering's
     * capacity type (kp_offering_value). Both fixed for the solve. */
    int64_t *lcap;
    const char **octs;
    size_t *octs_at;
    bool octs_canon; /* equal capacity types in octs share one pointer */
    /* The types in name order (strcmp, then index), and a scratch mark per type. */
    size_t *by_name;
    bool *mark;
};

/* ZONES (scheduler.c's DESIGN note): for one topology key the scans asked about, the distinct
 * sets the claims hold for it (at most ZONE_CLASSES) and which claims hold each. */
#define ZONE_KEYS 4u
#define ZONE_CLASSES 32u
#define ZONE_NONE UINT8_MAX
struct kp_sched_zkey {
    const char *key;                    /* borrowed from a group */
    struct kp_reqset cls[ZONE_CLASSES]; /* just the key's requirement, or empty when none */
    uint64_t *bits[ZONE_CLASSES];       /* by claim seq: the claims holding cls[c] */
    size_t n_cls;
    uint64_t *loose; /* by seq: claims whose set made no class (over) */
    uint8_t *cls_of; /* by seq: the class, ZONE_NONE for loose or none yet */
};

struct kp_sched_solver {
    const struct kp_sched_input *in;
    struct kp_sched_pod *pods;
    size_t n_pods;
    struct kp_sched_target *nodes; /* in->nodes then in->inflight */
    size_t n_nodes;
    size_t *node_order;
    struct kp_sched_target **claims;
    size_t n_claims, cap_claims;
    size_t *claim_order;
    /* HOSTS and ZONES, bitsets by claim seq: host_is_name, and the claims one scan may try. */
    uint64_t *host_named, *scan_mask;
    size_t cap_hosts; /* claims these and zkeys have room for, a multiple of 64 */
    struct kp_sched_zkey zkeys[ZONE_KEYS];
    size_t n_zkeys;
    struct kp_sched_pool_state *pools;
    size_t n_pools;
    size_t *pool_order;
    size_t n_usable;
    struct kp_sched_group *groups;
    size_t n_groups, cap_groups;
    bool pns_allowed; /* some NodePool has a PreferNoSchedule taint */
    size_t max_types;
    struct kp_sched_result *res;
};

/* A requirement's membership; an absent requirement (NULL) allows everything. */
static inline bool req_has(const struct kp_req *r, const char *v)
{
    return !r || kp_req_has(r, v);
}

/* r's finite values (In), or false when r is absent or a complement. */
static inline bool req_is_in(const struct kp_req *r)
{
    return r && !r->complement;
}

static inline bool is_empty_req(const struct kp_req *r)
{
    return r && !r->complement && r->n_values == 0;
}

/* --- scheduler.c ----------------------------------------------------------------------------- */

/* Whether tl tolerates every taint of ts (PreferNoSchedule ones regardless when prefer_ok). */
bool kp_sched_tolerates_all(const struct kp_tolerations *tl, const struct kp_taints *ts,
                            bool prefer_ok) KP_NONNULL(1, 2);
/* A requirement set from a node selector and one node selector term's expressions (term may be
 * NULL). 0, -EINVAL, -ENOMEM or -KP_ELIMIT; *ret is filled on success only. */
int kp_sched_strict_reqs(const struct kp_labels *sel, const struct kp_node_term *term,
                         struct kp_reqset *ret) KP_NONNULL(1, 3) KP_WUR;

/* --- topology.c ------------------------------------------------------------------------------ */

/* The group of a pod (anti-)affinity term or topology spread constraint of pod p, made (with its
 * domains and the counts of the bound pods) unless an equal one exists; *ret_idx is its index
 * in s->groups. -EOPNOTSUPP for a namespaceSelector with expressions, -EINVAL for an empty
 * topologyKey; -ENOMEM. */
int kp_sched_group_from_term(struct kp_sched_solver *s, const struct kp_pod_view *p,
                             const struct kp_pod_term *t, enum kp_sched_gtype type, bool inverse,
                             size_t *ret_idx) KP_WUR;
int kp_sched_group_from_spread(struct kp_sched_solver *s, const struct kp_pod_view *p,
                               const struct kp_spread *c, size_t *ret_idx) KP_WUR;
void kp_sched_group_done(struct kp_sched_group *g);
/* The inverse groups of the bound pods' required anti-affinity, counted where they run. */
int kp_sched_bound_anti_affinity(struct kp_sched_solver *s) KP_WUR;
/* Fills each pod's lists of the groups that select it. Call once every group exists. */
int kp_sched_pods_selections(struct kp_sched_solver *s) KP_WUR;
/* Whether any group constrains the pod now (after its relaxation). */
bool kp_sched_pod_has_topology(const struct kp_sched_pod *sp);
/* Topology.AddRequirements: *reqs narrowed by every group the pod must satisfy now. 0 with *ok
 * telling whether each left a domain (why says which did not), or a negative error. */
int kp_sched_topo_narrow(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                         struct kp_reqset *reqs, bool *ok, char *why, size_t why_size) KP_WUR;
/* A cheap necessary condition for kp_sched_topo_narrow on reqs or any narrower set: *ok false
 * means it would fail. No allocation beyond scratch. */
int kp_sched_topo_feasible(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                           const struct kp_reqset *reqs, bool *ok) KP_WUR;
/* The one topology key every group the pod must satisfy now uses, when it is one key and not
 * the hostname; else NULL. kp_sched_topo_feasible's answer for the pod then depends on a
 * target's requirements only through their set for that key (MEMO in scheduler.c). */
const char *kp_sched_topo_single_key(const struct kp_sched_solver *s,
                                     const struct kp_sched_pod *sp);
/* Topology.Record: the pod landed on a target with these taints and requirements. */
int kp_sched_topo_record(struct kp_sched_solver *s, const struct kp_sched_pod *sp,
                         const struct kp_taints *taints, const struct kp_reqset *reqs) KP_WUR;
/* Topology.Register of claim seq's hostname in every hostname group. */
int kp_sched_topo_register_host(struct kp_sched_solver *s, const char *host, size_t seq) KP_WUR;
#endif
