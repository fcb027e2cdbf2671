/* core/disruption/consolidation.h: Karpenter's single-node consolidation decisions (semantics
 * §5.4, §5.5), as pure functions the disruption loop (disruption.h) calls with a simulation
 * from core/provisioning/simulation.h.
 *
 * A consolidation candidate is a disruption candidate (kp_disruption_blocked says NULL) that
 * this method wants (kp_consolidation_unwanted says NULL): not of a static NodePool, with an
 * instance type, capacity type and zone label, consolidateAfter not Never, not empty (empty
 * nodes are Emptiness's), policy WhenEmptyOrUnderutilized, Consolidatable. Candidates are taken
 * in DisruptionCost order, lowest first (§5.5's v1.0-v1.13 sort: fewest and lowest-priority
 * pods, soonest to expire; for hosts of one class every price is the same, so the savings
 * ratio of v1.14 would order by pods alone), each within its NodePool's Underutilized budget.
 *
 * For one candidate the simulation takes it away and places its pods, the pending pods and the
 * deleting nodes' pods (kp_sim_prepare with the candidate moving); kp_consolidation_decide reads
 * the plan (a new NodeClaim sized with the DaemonSet pods it would run, and each remaining node
 * keeping room for those it should run but does not yet, as in a provisioning round): DELETE
 * when every pod that was running fits on the remaining nodes with no new
 * NodeClaim; REPLACE when exactly one new NodeClaim is needed and some of its instance types
 * are strictly cheaper than the candidate (options filtered to those); otherwise nothing, with
 * Karpenter's Unconsolidatable sentence. A running pod that would land on a node that is not
 * initialized (or a NodeClaim still in flight) makes the decision untrustworthy: nothing.
 *
 * Pure: no I/O, no clock, no lock. */
#ifndef KP_CORE_DISRUPTION_CONSOLIDATION_H
#define KP_CORE_DISRUPTION_CONSOLIDATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "core/provisioning/simulation.h"

struct kp_ctx;
struct kp_dnode;
struct kp_instance_type;
struct kp_labels;
struct kp_nodeclaim_view;
struct kp_pod_view;
struct kp_sched_input;
struct kp_sched_plan;

#define KP_DISRUPTION_REASON_UNDERUTILIZED "Underutilized"

/* Why consolidation does not want d (a disruption candidate): Karpenter's Unconsolidatable
 * sentence in buf[size], or NULL when it is a consolidation candidate. *ret_silent is set when
 * the reason is none of a user's business (an empty node, which Emptiness takes; a node not yet
 * Consolidatable; a static NodePool): no event then. */
const char *kp_consolidation_unwanted(const struct kp_dnode *d, char *buf, size_t size,
                                      bool *ret_silent) KP_NONNULL(1, 2, 4);

/* Karpenter's EvictionCost of one pod: clamp(1 + priority / 2^25, -10, 10) (the
 * controller.kubernetes.io/pod-deletion-cost annotation is not projected, so counts as 0). */
double kp_eviction_cost(const struct kp_pod_view *p) KP_NONNULL(1);

/* The lifetime left of nc at now as a fraction: clamp((expireAfter - age) / expireAfter, 0, 1);
 * 1 when it never expires. */
double kp_lifetime_remaining(const struct kp_nodeclaim_view *nc, int64_t now_usec) KP_NONNULL(1);

/* The price (micro-USD per hour) of the node labelled labels: its instance type (label
 * node.kubernetes.io/instance-type) among types[0..n), the offering whose zone and capacity
 * type match the node's labels; -1 when any of that is unknown. */
int64_t kp_node_price(const struct kp_instance_type *types, size_t n,
                      const struct kp_labels *labels) KP_NONNULL(3);

enum kp_consolidation_verdict {
    KP_CONSOL_NOTHING = 0,
    KP_CONSOL_DELETE,
    KP_CONSOL_REPLACE,
};

struct kp_consolidation_decision {
    enum kp_consolidation_verdict verdict;
    /* REPLACE: plan->claims[0]'s options whose every offering is strictly cheaper than the
     * candidates' price and that still meet the claim's minValues, in the plan's order (owned
     * array; the types are the plan's). */
    const struct kp_instance_type **types;
    size_t n_types;
    /* NOTHING: the Unconsolidatable sentence ("" when there is none to give). */
    char why[512];
    /* kp_consolidation_single's REPLACE: the simulation whose plan->claims[0] is the
     * replacement (its input lives in the build); released by _done. */
    struct kp_sim_run run;
    struct kp_sched_input in;
};

/* Why a running pod of in (bound: node_name set) has no trustworthy place in plan, written
 * into buf[size]: it fits nowhere, or it is a pod of the nodes taken away (Node names
 * moving[0..n_moving)) that would land only on a node that is not initialized or a NodeClaim
 * still in flight (a decision resting on it cannot be trusted). A pod of a node already being
 * deleted may land there: that node goes either way, and the capacity launched for its pods is
 * expected to come up (upstream's SimulateScheduling skips them too). NULL when every running
 * pod has a place; pending pods do not count. Consolidation and Drift both ask it. Pure. */
const char *kp_disruption_unplaced(const struct kp_sched_input *in,
                                   const struct kp_sched_plan *plan, const char *const *moving,
                                   size_t n_moving, char *buf, size_t size) KP_NONNULL(1, 2, 5);

/* The decision for candidates (their Node names moving[0..n_moving)) whose summed price is
 * price_micro (-1: unknown, which allows no replacement) from the simulation in/plan
 * (kp_sim_prepare with them moving, kp_sched_solve), their running pods' places judged by
 * kp_disruption_unplaced. A pod of in is "running" when it is bound (node_name set): pending
 * pods that still fit nowhere do not matter. 0 or -ENOMEM. */
int kp_consolidation_decide(const struct kp_sched_input *in, const struct kp_sched_plan *plan,
                            const char *const *moving, size_t n_moving, int64_t price_micro,
                            struct kp_consolidation_decision *ret) KP_NONNULL(1, 2, 6) KP_WUR;
void kp_consolidation_decision_done(struct kp_consolidation_decision *d);

/* What the disruption loop knows of a node's pods, from the pods bound to it (the informer's
 * by-node index): reschedulable pods, the first active pod whose do-not-disrupt is active
 * (*ret_blocking, NULL when none), and the DisruptionCost over the non-terminal pods. Pure. */
void kp_dnode_count_pods(struct kp_dnode *d, const struct kp_pod_view *const *pods, size_t n,
                         int64_t now_usec, const struct kp_pod_view **ret_blocking)
    KP_NONNULL(1, 5);

/* Told of each candidate consolidation does not want or cannot consolidate, with its sentence
 * (an Unconsolidatable event). */
typedef void (*kp_unconsolidatable_fn)(void *ctx, const struct kp_dnode *d, const char *why);

/* The consolidation candidates among v[0..n) (only: as in kp_emptiness_select) in the order
 * above, into ret_idx (room for n); each disruption candidate consolidation does not want is
 * told to fn (may be NULL) unless its reason is silent. Returns how many. */
size_t kp_consolidation_candidates(const struct kp_dnode *v, size_t n, const bool *only,
                                   int64_t now_usec, kp_unconsolidatable_fn fn, void *ctx,
                                   size_t *ret_idx) KP_NONNULL(7);

/* Single-node consolidation: the first of cand[0..n_cand) (snapshot indices of sim's snapshot,
 * which v[] follows one for one), within its NodePool's Underutilized budget (counted over v),
 * whose simulation (sim, built over that snapshot) gives DELETE or REPLACE; *ret_idx and *ret
 * filled (a REPLACE keeps its simulation in ret->run, valid while sim is). A candidate with
 * neither is told to fn (may be NULL). stop (may be NULL) ends the search when done. 1 found, 0 none, or -ENOMEM / a simulation error. */
int kp_consolidation_single(struct kp_sim *sim, const struct kp_dnode *v, size_t n,
                            const size_t *cand, size_t n_cand, int64_t now_usec,
                            kp_unconsolidatable_fn fn, void *ctx, const struct kp_ctx *stop,
                            size_t *ret_idx, struct kp_consolidation_decision *ret)
    KP_NONNULL(1, 10, 11) KP_WUR;

/* Karpenter's cap on multi-node consolidation's candidates. */
#define KP_CONSOLIDATION_MULTI_MAX 100u

/* Karpenter's time limits on one search (MultiNodeConsolidationTimeoutDuration,
 * SingleNodeConsolidationTimeoutDuration). The disruption loop runs each search under a context
 * with this deadline and counts karpenter_voluntary_disruption_consolidation_timeouts_total
 * when it fires; at pool scale a pass takes well under a second (bench/bench-disruption.c), so
 * they are a guard for clusters far larger than that. */
#define KP_CONSOLIDATION_MULTI_TIMEOUT_USEC (60ULL * 1000000ULL)
#define KP_CONSOLIDATION_SINGLE_TIMEOUT_USEC (180ULL * 1000000ULL)

/* Multi-node consolidation (§5.4): the candidates cand[0..n_cand) in order, each within its
 * NodePool's Underutilized budget (counted over v), at most KP_CONSOLIDATION_MULTI_MAX; a binary
 * search for the longest prefix of at least two whose simulation, all of them moving together,
 * gives DELETE (no new NodeClaim) or REPLACE (one, strictly cheaper than their summed price and,
 * when a candidate's own instance type is among the options, cheaper than the cheapest such
 * candidate). ret_idx (room for n_cand) gets the prefix's snapshot indices, *ret_n its length,
 * *ret the decision (a REPLACE keeps its simulation). stop ends the search with the best so far.
 * 1 found, 0 none, or a negative error. */
int kp_consolidation_multi(struct kp_sim *sim, const struct kp_dnode *v, size_t n,
                           const size_t *cand, size_t n_cand, int64_t now_usec,
                           const struct kp_ctx *stop, size_t *ret_idx, size_t *ret_n,
                           struct kp_consolidation_decision *ret) KP_NONNULL(1, 8, 9, 10) KP_WUR;

/* The decision for the nodes idx[0..k) taken away together (a multi-node command's
 * validation): as kp_consolidation_decide, with the same-type rule above when k > 1. */
int kp_consolidation_set(struct kp_sim *sim, const struct kp_dnode *v, const size_t *idx, size_t k,
                         int64_t now_usec, struct kp_consolidation_decision *ret)
    KP_NONNULL(1, 2, 3, 6) KP_WUR;

/* How a consolidation command computed by an earlier pass stands at its validation, before
 * the new simulation (Karpenter's validateCandidates; the simulation's part is "scheduling"). */
enum kp_consolidation_check {
    KP_CONSOL_CHECK_VALID = 0,
    /* A node of the command is no longer a consolidation candidate: gone, deleting or marked,
     * nominated, a do-not-disrupt or PDB-blocked pod, no longer Consolidatable, ... */
    KP_CONSOL_CHECK_CHURN,
    /* Together they no longer fit their NodePools' Underutilized budgets of now. */
    KP_CONSOL_CHECK_BUDGET,
};

/* The check above for the command's nodes, v[i] with cmd[i] set (n_cmd of them when the
 * command was made): each must still be a consolidation candidate (kp_consolidation_candidates
 * with only = cmd), and all of them must fit their pools' Underutilized budgets at once.
 * ret_idx (room for n) gets the candidates in consolidation order and *ret_n how many, whatever
 * the answer. Upstream's labels for the ConsolidationRejected reason: churn, budget. Pure. */
enum kp_consolidation_check kp_consolidation_recheck(const struct kp_dnode *v, size_t n,
                                                     const bool *cmd, size_t n_cmd,
                                                     int64_t now_usec, size_t *ret_idx,
                                                     size_t *ret_n) KP_NONNULL(3, 6, 7);

/* Karpenter's "consolidated" memo (its cluster ConsolidationState): once multi- and single-node
 * consolidation have both found nothing, neither runs again until something they read has
 * changed or KP_CONSOLIDATED_TTL_USEC has passed. "Changed" is a count the caller keeps of its
 * informers' events (Pods, Nodes, NodeClaims, NodePools, PDBs, PVCs, DaemonSets: every
 * projected change, which is more than Karpenter's MarkUnconsolidated calls, never less), or
 * the NodePools' catalogs (the sum of their versions: a provider republishes when its hosts,
 * classes or prices change, which no informer of the core sees); the time limit catches what no event announces: a pod's do-not-disrupt duration running out, a
 * budget's cron window opening. A search its time limit stopped does not set the memo: it has
 * not seen every candidate. Without it an idle pool of 1,000 nodes would be simulated in full
 * every pass (bench-disruption: about 0.8 s of CPU every 10 s). */
#define KP_CONSOLIDATED_TTL_USEC (5ULL * 60 * 1000000ULL)

struct kp_consolidated_memo {
    bool set;
    uint64_t changes;  /* the caller's change count when it was set */
    uint64_t catalogs; /* the catalogs' version sum when it was set */
    int64_t at_usec;   /* when it was set */
};

/* Whether m says the searches would find nothing now, with the caller's change count read
 * before the pass gathered its view and the catalogs' version sum read before the search.
 * Pure. */
bool kp_consolidated_memo_holds(const struct kp_consolidated_memo *m, uint64_t changes,
                                uint64_t catalogs, int64_t now_usec) KP_NONNULL(1);

#endif
