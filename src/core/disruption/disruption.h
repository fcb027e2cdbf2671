/* core/disruption/disruption.h: Karpenter's voluntary disruption loop: nodes of
 * ours that are empty, drifted or underutilized are taken away within their NodePool's
 * disruption budgets, and their hosts go back to the pool warm.
 *
 * One singleton reconcile (key KP_DISRUPTION_KEY) runs every KP_DISRUPTION_POLL_USEC, sooner
 * after it acted. Each pass, on a synced cluster state (core/state/cluster.h):
 *
 *   1. clean-up: a Node tainted karpenter.sh/disrupted that no command holds and that is not
 *      being deleted loses the taint, and its NodeClaim the DisruptionReason condition (what a
 *      crash between tainting and deleting leaves behind);
 *   2. a command with replacements in flight is carried on (see "Replacing" below), and
 *      nothing else happens;
 *   3. a command computed by an earlier pass whose validation delay (15 s) has passed is
 *      validated: Emptiness evaluates its nodes again and disrupts those still selected;
 *      single-node consolidation simulates again and must reach the same decision;
 *   4. an expired node whose pods need a place is replaced before it goes (Expiry below);
 *   5. otherwise the methods in Karpenter's order, the first that finds something wins:
 *      Emptiness (kp_emptiness_select, waits 15 s), Drift (drift.h, acts at once), multi-node
 *      and single-node consolidation (consolidation.h, each waits 15 s and simulates again).
 *
 * Disrupting a node without replacement: mark it for deletion in the cluster state, taint it
 * karpenter.sh/disrupted:NoSchedule, set DisruptionReason=True (Empty, Drifted, Underutilized)
 * on its NodeClaim, delete the NodeClaim (uid precondition), with DisruptionTerminating events
 * on the Node and the NodeClaim and karpenter_nodeclaims_disrupted_total /
 * karpenter_pods_disruption_initiated_total. A failed step rolls the taint and the mark back.
 * Termination (core/termination) then drains, runs the provider's Delete (the host's leave)
 * and releases the Node.
 *
 * Replacing (a drifted node whose pods need new capacity; an underutilized node a cheaper
 * NodeClaim can take): taint and DisruptionReason (a failure aborts), create the replacement
 * NodeClaims (DisruptionLaunching), mark the candidate once they are all in the cluster state,
 * wait until they are all Initialized (DisruptionWaitingReadiness), then delete the candidate.
 * A replacement that disappears or is not Initialized within
 * KP_DISRUPTION_REPLACE_TIMEOUT_USEC rolls the command back
 * (karpenter_voluntary_disruption_queue_failures_total).
 *
 * Expiry (core/expiration/expiration.h): a node whose NodeClaim has expired and whose pods need a
 * place is not a voluntary disruption, but it is replaced here first, before the methods (after
 * a command waiting for its validation): the simulation takes it away, the NodeClaims its pods
 * need are launched as a replacement command and it is deleted once they are Initialized (no
 * replacement needed: deleted at once). Forceful as expiry is: no budget, do-not-disrupt,
 * nomination or PDB holds it, a failed replacement does not roll it back (it is deleted
 * anyway), and no voluntary_disruption metric counts it. DisruptionReason=Expired says why.
 *
 * Candidates (kp_disruption_blocked, §5.2): a Node with a NodeClaim, initialized, not being
 * deleted or marked, not nominated, without the Node annotation karpenter.sh/do-not-disrupt:
 * "true", of an existing NodePool, with no active pod whose do-not-disrupt annotation is
 * active (DaemonSet and static pods included), and whose pods can all be evicted now as far as
 * PodDisruptionBudgets go (a PDB with disruptionsAllowed 0 or two PDBs on one pod block it).
 *
 * Empty (§5.4): no reschedulable pod (Karpenter before v1.14; since v1.14 pods whose eviction
 * cost is not positive do not count either, which kpssh does not compute yet), Consolidatable
 * True, consolidateAfter not Never, not a static NodePool. Every consolidation policy allows it.
 * Emptiness's order: the oldest NodeClaim first, then by name (every empty node's disruption
 * cost is the same, so the order only decides who goes first under a budget, and a total order
 * keeps two replicas and a re-run in agreement).
 *
 * Budgets (§5.6, budget.h): per NodePool and reason, nodes = managed initialized nodes not
 * InstanceTerminating, disrupting = those whose Node is not Ready or that are deleting or
 * marked; each selected node takes one from its pool's remaining budget.
 */
#ifndef KP_CORE_DISRUPTION_DISRUPTION_H
#define KP_CORE_DISRUPTION_DISRUPTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_core_env;
struct kp_core_observer;
struct kp_nodepool_view;
struct kp_state_node;

#define KP_DISRUPTION_KEY "disruption"
#define KP_DISRUPTION_POLL_USEC (10ULL * 1000000ULL)
#define KP_DISRUPTION_VALIDATION_USEC (15ULL * 1000000ULL)
#define KP_DISRUPTION_REASON_EMPTY "Empty"
/* A replacement must be Initialized this long after its creation (Karpenter's queue timeout is
 * at least 10 min), and show up in the cache within 30 s. */
#define KP_DISRUPTION_REPLACE_TIMEOUT_USEC (10ULL * 60 * 1000000ULL)
#define KP_DISRUPTION_REPLACE_CACHE_USEC (30ULL * 1000000ULL)
/* The deadline of one pass: room for both consolidation searches' own limits (1 + 3 min,
 * consolidation.h) and the rest of the pass, so that those limits, not the pass's, end a long
 * search and are counted. */
#define KP_DISRUPTION_PASS_TIMEOUT_USEC (5ULL * 60 * 1000000ULL)

/* What disruption knows of one state node, gathered from the caches. */
struct kp_dnode {
    const struct kp_state_node *sn;
    const struct kp_nodepool_view *np; /* its NodePool; NULL when it has none */
    /* The pods, looked at only for a node Emptiness could take (the controller's pass skips
     * the walk for the rest): reschedulable pods bound to the Node, and an active pod whose
     * do-not-disrupt is active (NULL when none). */
    uint32_t reschedulable;
    const char *blocking_pod;
    /* Karpenter's PDB sentence when a pod bound to the Node cannot be evicted now as far as
     * PodDisruptionBudgets go (kp_pdbs_block_eviction), NULL otherwise. */
    const char *blocking_pdb;
    bool walked; /* the pods above were looked at (a node a method could take) */
    /* Karpenter's DisruptionCost: the eviction costs of the node's pods times the NodeClaim's
     * lifetime remaining (consolidation.h); consolidation takes the cheapest first. */
    double disruption_cost;
};

/* Why d is no candidate for voluntary disruption at now_usec, as Karpenter's DisruptionBlocked
 * sentence written into buf[size]; NULL when it is one. Pure. */
const char *kp_disruption_blocked(const struct kp_dnode *d, int64_t now_usec, char *buf,
                                  size_t size) KP_NONNULL(1, 3);

/* The message of Karpenter's DisruptionBlocked event on a Node and its NodeClaim for why (a
 * sentence of kp_disruption_blocked or of a search): why with its first letter upper-case
 * (pretty.Sentence), written into buf[size] (cut short when it does not fit). Returns buf. Pure. */
const char *kp_disruption_blocked_note(const char *why, char *buf, size_t size) KP_NONNULL(1, 2);

struct kp_pod_view;

/* Karpenter's InvalidDoNotDisruptAnnotation message (a Warning on the pod) when pod p's
 * karpenter.sh/do-not-disrupt annotation is neither "true" nor a positive Go duration, which
 * Karpenter then ignores: "Invalid karpenter.sh/do-not-disrupt annotation: failed to parse \"x\"
 * as a duration: time: invalid duration \"x\", ignoring annotation", or "...: duration \"0s\" must
 * be positive, ignoring annotation"; written into buf[size] (cut short when it does not fit).
 * NULL when the annotation is absent or valid. Pure. */
const char *kp_disruption_invalid_do_not_disrupt(const struct kp_pod_view *p, char *buf,
                                                 size_t size) KP_NONNULL(1, 2);
/* The Normal event Karpenter's IsDoNotDisruptActive publishes for pod p at now_usec when its
 * karpenter.sh/do-not-disrupt annotation is a positive duration and p has a start time:
 * "DoNotDisruptUntil" ("The karpenter.sh/do-not-disrupt grace period will elapse at
 * <startTime + duration, RFC 3339>") while it protects the pod, "DoNotDisruptGracePeriodElapsed"
 * ("The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable") after.
 * Returns the reason with the note in buf[size], or NULL ("true", absent, invalid, or no start
 * time: no event). Pure. */
const char *kp_disruption_do_not_disrupt_event(const struct kp_pod_view *p, int64_t now_usec,
                                               char *buf, size_t size) KP_NONNULL(1, 3);

/* Karpenter's budget mapping for the nodes of nodepool among v[0..n): *ret_nodes managed,
 * initialized, not InstanceTerminating; *ret_disrupting those among them whose Node is not
 * Ready or that are deleting or marked for deletion. Pure. */
void kp_disruption_pool_counts(const struct kp_dnode *v, size_t n, const char *nodepool,
                               int64_t *ret_nodes, int64_t *ret_disrupting) KP_NONNULL(3, 4, 5);

/* What is left of one NodePool's budget for one reason during a pass: a method keeps one per
 * NodePool it meets (an array with room for as many as its candidates) and takes one from
 * `remaining` for each node it selects. */
struct kp_pool_budget {
    const char *nodepool;
    int64_t remaining; /* KP_BUDGET_UNLIMITED, or how many more it may take */
};

/* The entry of d's NodePool in pools[0..*n_pools), made (counted over v[0..n) at now for the
 * reason bit, kp_budget_allowed minus the pool's disrupting nodes) when not there yet; pools
 * has room for one more. Pure. */
struct kp_pool_budget *kp_pool_budget(struct kp_pool_budget *pools, size_t *n_pools,
                                      const struct kp_dnode *v, size_t n, const struct kp_dnode *d,
                                      uint32_t reason, int64_t now_usec) KP_NONNULL(1, 2, 5);

/* The sentence of Karpenter's DisruptionBlocked event on a NodePool whose budgets allow no
 * disruption for a reason (%s: the DisruptionReason, "Empty", "Drifted", "Underutilized"). */
#define KP_DISRUPTION_POOL_BLOCKED_FMT                                                             \
    "No allowed disruptions for disruption reason %s due to blocking budget"

/* Told of a NodePool whose budgets allow no disruption, with the sentence above. */
typedef void (*kp_pool_blocked_fn)(void *ctx, const struct kp_nodepool_view *np, const char *note);

/* The budgets of every NodePool of v[0..n) (in the order of its first node) for one reason: its
 * budget bit (budget.h) and its DisruptionReason spelling, which is also the metrics' label
 * value. Through o (may be NULL) karpenter_nodepools_allowed_disruptions{nodepool, reason} (the
 * budgets' allowance at now_usec; a pool no budget limits shows its node count) and
 * karpenter_nodepools_nodes_consuming_budgets{nodepool, reason}; to blocked (may be NULL) each
 * pool that has nodes and whose budgets allow none, as upstream's budget mapping does. Pure
 * apart from o and blocked. */
void kp_disruption_report_budgets(const struct kp_dnode *v, size_t n, uint32_t reason_bit,
                                  const char *reason, int64_t now_usec,
                                  const struct kp_core_observer *o, kp_pool_blocked_fn blocked,
                                  void *ctx) KP_NONNULL(4);

/* Whether d is empty and consolidatable (the Emptiness method's ShouldDisrupt, candidate rules
 * aside). Pure. */
bool kp_emptiness_wants(const struct kp_dnode *d) KP_NONNULL(1);

/* The Emptiness command over v[0..n) at now_usec: indices of the nodes to delete, in the order
 * above, each within its pool's Empty budget (counted over all of v). With only (n flags, may be
 * NULL: every node), a node is considered only where only[i] is set: the validation re-checks
 * the command's own nodes, so no other node can spend their budget. ret_idx has room for n.
 * *ret_blocked (optional) is set when some wanted node was left out only by its budget.
 * Returns how many. Pure. */
size_t kp_emptiness_select(const struct kp_dnode *v, size_t n, const bool *only, int64_t now_usec,
                           size_t *ret_idx, bool *ret_blocked) KP_NONNULL(5);

#define KP_DISRUPTION_REASON_EXPIRED "Expired"

struct kp_provider;

/* The expired nodes among v[0..n) this loop replaces before they go: with a NodeClaim of
 * provider p and a Node, not deleting or marked, expired at now_usec with reschedulable pods
 * (d->reschedulable), and with enough of the expiration controller's grace left for a command
 * to end before it (kp_expiration_replace_wait more than KP_DISRUPTION_REPLACE_TIMEOUT_USEC +
 * KP_DISRUPTION_POLL_USEC). Into ret_idx (room for n), the soonest expiry first, then by
 * NodeClaim name. Pure. */
size_t kp_expiry_candidates(const struct kp_provider *p, const struct kp_dnode *v, size_t n,
                            int64_t now_usec, size_t *ret_idx) KP_NONNULL(1, 5);

/* What a pass sees of one replacement NodeClaim of a command in flight. */
enum kp_replace_seen {
    KP_REPLACE_SEEN_MISSING = 0, /* not in the NodeClaim cache (yet, or any more) */
    KP_REPLACE_SEEN_LAUNCHING,   /* there, not Initialized */
    KP_REPLACE_SEEN_INITIALIZED,
    KP_REPLACE_SEEN_DELETING, /* there, with a deletion timestamp */
};

enum kp_replace_action {
    KP_REPLACE_WAIT = 0, /* look again after requeue_usec */
    KP_REPLACE_FORGET,   /* every candidate went away by itself: drop the command */
    KP_REPLACE_DELETE,   /* every replacement is Initialized: delete the candidates */
    KP_REPLACE_ROLLBACK, /* the command failed: untaint the candidates, clear DisruptionReason */
};

struct kp_replace_step {
    enum kp_replace_action action;
    /* Mark the candidates for deletion in the cluster state now: every replacement is in it
     * (not before, or the provisioner would plan their pods afresh). */
    bool mark;
    /* ROLLBACK: take the mark back too (it was set by this pass or an earlier one). */
    bool unmark;
    uint64_t requeue_usec;
};

/* One pass's decision for a command whose replacements are in flight (the orchestration
 * queue's steps 4-6), from n_cand candidates still there (with a NodeClaim, not deleting),
 * what is seen of each replacement seen[0..n_repl), how many of them are in the cluster state
 * (in_state), whether the candidates are marked already, and the time since the replacements
 * were created. A replacement being deleted fails the command; so does one missing from the
 * cache after KP_DISRUPTION_REPLACE_CACHE_USEC, or any not Initialized after
 * KP_DISRUPTION_REPLACE_TIMEOUT_USEC; past twice that even Initialized replacements fail it
 * (deletes that keep failing must not hold the loop). Replacements that were created are left
 * to Emptiness; the decision never deletes them. forceful (an expiry's command): a failure
 * before twice the timeout deletes the candidates instead of rolling back (marking them first
 * when they are not yet). Pure. */
struct kp_replace_step kp_replace_decide(size_t n_cand, const enum kp_replace_seen *seen,
                                         size_t n_repl, size_t in_state, bool marked,
                                         int64_t elapsed_usec, bool forceful);

struct kp_disruption_controller;

/* A stopped controller reading env's Node, NodeClaim, NodePool, Pod, PVC,
 * PodDisruptionBudget and DaemonSet informers (consolidation's simulations read the last three
 * as the provisioner's rounds do) and env->cluster (which must be set). env is borrowed and outlives it. Main thread, before the
 * informers start. 0, -EINVAL, -EBUSY, -ENOMEM. */
int kp_disruption_controller_new(const struct kp_core_env *env,
                                 struct kp_disruption_controller **ret) KP_WUR;
int kp_disruption_controller_start(struct kp_disruption_controller *ctl) KP_WUR;
void kp_disruption_controller_stop(struct kp_disruption_controller *ctl);
bool kp_disruption_controller_ready(struct kp_disruption_controller *ctl);
struct kp_disruption_controller *
kp_disruption_controller_free(struct kp_disruption_controller *ctl);

struct kp_client;
struct kp_ctx;

/* One pass, as the worker runs it for KP_DISRUPTION_KEY (exposed for tests: a test feeds the
 * stores and a detached cluster state (kp_cluster_state_new_detached) and calls it with a client
 * of its own; the controller need not be started, and its events go to env->events only). c
 * writes; cx bounds the pass (NULL: never ends). 0 (requeue in *ret_requeue: the poll interval,
 * the validation delay, or a second while the cluster state is not synced or after acting), or
 * the pass's error (retry with backoff). */
int kp_disruption_reconcile(struct kp_disruption_controller *ctl, struct kp_client *c,
                            const struct kp_ctx *cx, uint64_t *ret_requeue) KP_WUR;

#endif
