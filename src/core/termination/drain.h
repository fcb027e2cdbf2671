/* core/termination/drain.h: the drain step of Node termination behind a small interface, and
 * Karpenter's rules for which pods a drain waits on and how it moves them.
 *
 * The termination controller (core/termination/termination.h) calls a drainer once per
 * reconcile of a terminating Node that has reached the drain step (tainted
 * karpenter.sh/disrupted:NoSchedule), with every pod the cache has bound to the Node. The
 * drainer answers whether the Node is drained and, if not, how many pods it still waits on; the
 * controller owns the rest (the NodeClaim's Drained condition, the "N pods are waiting" event,
 * the 1 s requeue, the minimum drain time). Two drainers:
 *  - the evicting drainer (kp_evict_drainer_new), the controller's default: Karpenter's drain.
 *    Each call, pods past the termination deadline are deleted (any group), then the first
 *    non-empty priority group of the rest is evicted through the Eviction API, so the API
 *    server enforces PodDisruptionBudgets. Pods with an active do-not-disrupt are waited on,
 *    never evicted; the deadline deletes them too.
 *  - kp_drainer_wait never evicts: it waits until no pod that needs draining is bound, deleting
 *    only the pods the deadline has run out for. For tests and for an operator's drain.
 *
 * Which pods count (Karpenter's IsWaitingEviction = !IsTerminal && IsDrainable):
 * not Succeeded/Failed; does not tolerate karpenter.sh/disrupted:NoSchedule (it would just come
 * back); not a static/mirror pod (owner reference kind Node, or the config.mirror annotation:
 * the API server cannot delete it); not stuck terminating (deletionTimestamp more than 1 min in
 * the past: kubelet is not going to finish it, so waiting would block the Node forever). Pods
 * with do-not-disrupt are waited on.
 *
 * The priority groups (kubelet's graceful shutdown order): 0 non-critical pods not of a
 * DaemonSet, 1 non-critical DaemonSet pods, 2 critical pods not of a DaemonSet, 3 critical
 * DaemonSet pods; critical means priorityClassName system-cluster-critical or
 * system-node-critical. A group is evicted only when every earlier group is gone.
 *
 * Threads: the predicates and kp_drain_plan are pure, any thread. A drainer's drain() runs on
 * the controller's reconcile workers, several at once (different Nodes), with the worker's own
 * client; the evicting drainer's per-pod state is behind its own lock. */
#ifndef KP_CORE_TERMINATION_DRAIN_H
#define KP_CORE_TERMINATION_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_client;
struct kp_core_observer;
struct kp_ctx;
struct kp_events;
struct kp_node_view;
struct kp_nodeclaim_view;
struct kp_pod_view;

/* How long past its deletionTimestamp a terminating pod stops counting (Karpenter's 1 min). */
#define KP_DRAIN_STUCK_TERMINATING_USEC (60 * 1000000LL)

/* Whether p does not block its Node's drain for the reason that it tolerates
 * karpenter.sh/disrupted:NoSchedule. */
bool kp_drain_pod_tolerates_disrupted(const struct kp_pod_view *p) KP_NONNULL(1);
/* Static or mirror pod: managed by kubelet, not deletable through the API. */
bool kp_drain_pod_owned_by_node(const struct kp_pod_view *p) KP_NONNULL(1);
/* Succeeded or Failed. */
bool kp_drain_pod_terminal(const struct kp_pod_view *p) KP_NONNULL(1);
/* Terminating for more than KP_DRAIN_STUCK_TERMINATING_USEC at now_usec. */
bool kp_drain_pod_stuck_terminating(const struct kp_pod_view *p, int64_t now_usec) KP_NONNULL(1);
/* Karpenter's IsDrainable: does not tolerate the disrupted taint, not stuck terminating, not
 * owned by the Node. Decides whose volumes termination waits on. */
bool kp_drain_pod_drainable(const struct kp_pod_view *p, int64_t now_usec) KP_NONNULL(1);
/* Karpenter's IsWaitingEviction: not terminal and drainable. What a drain waits on. */
bool kp_drain_pod_waiting_eviction(const struct kp_pod_view *p, int64_t now_usec) KP_NONNULL(1);

/* What one drain call found. */
struct kp_drain_result {
    bool drained;   /* nothing left to wait on: the controller may go on */
    size_t waiting; /* pods still waited on (0 when drained) */
    /* Why not drained, completing "Failed to drain node, ..." (Karpenter's NodeDrainError
     * text): "3 pods are waiting to be evicted". "" when drained. */
    char message[160];
};

/* One drain call's input; everything borrowed for the call. */
struct kp_drain_input {
    const struct kp_node_view *node;
    const struct kp_nodeclaim_view *nodeclaim; /* NULL when the Node has none */
    const struct kp_pod_view *const *pods;     /* every pod bound to the Node, cached */
    size_t n_pods;
    int64_t deadline_usec; /* the termination deadline (TGP); 0: none */
    int64_t now_usec;
    /* The clock, read again before each pacing decision and forced deletion (a drain's calls
     * take time); NULL: now_usec throughout. */
    uint64_t (*clock)(void);
    struct kp_events *events;                /* Evicted, Disrupted, FailedDraining; NULL: none */
    const struct kp_core_observer *observer; /* karpenter_pods_*; NULL: none */
};

struct kp_drainer_ops {
    /* Drains in->node a step further and says where it stands. c is the worker's client (an
     * eviction drainer writes through it), cx the reconcile's context (done: start nothing).
     * 0 with *ret filled, or a negative error (the controller retries the Node with backoff).
     * Must not block for long: it runs on a reconcile worker. */
    int (*drain)(void *self, struct kp_client *c, const struct kp_ctx *cx,
                 const struct kp_drain_input *in, struct kp_drain_result *ret);
};

/* A drainer: its vtable and its state (borrowed; outlives the controller using it). */
struct kp_drainer {
    const struct kp_drainer_ops *ops;
    void *self;
};

/* Whether p must be deleted now rather than evicted (Karpenter's forced path): a
 * termination deadline exists (deadline_usec > 0) and either p is terminating with a deletion
 * time after it, or p is not terminating and now is past the deadline minus its
 * terminationGracePeriodSeconds. */
bool kp_drain_pod_needs_force(const struct kp_pod_view *p, int64_t deadline_usec, int64_t now_usec)
    KP_NONNULL(1);

/* The waiting drainer (no eviction): drained when no pod of in->pods is waiting eviction. With a
 * termination deadline it deletes (uid precondition, grace period ending at the deadline, at
 * least 1 s) each waiting pod kp_drain_pod_needs_force() names; PDBs and do-not-disrupt do not
 * hold that deletion, as in Karpenter. */
extern const struct kp_drainer kp_drainer_wait;

/* The waiting drainer's answer as a pure function (kp_drainer_wait calls it). */
void kp_drain_count(const struct kp_drain_input *in, struct kp_drain_result *ret) KP_NONNULL(1, 2);

/* --- the evicting drainer ------------------------------------------------------------------ */

#define KP_DRAIN_GROUPS 4

/* p's priority group, 0..KP_DRAIN_GROUPS-1 (see the top). */
unsigned kp_drain_group(const struct kp_pod_view *p) KP_NONNULL(1);

enum kp_drain_verb {
    KP_DRAIN_SKIP = 0, /* not waited on: terminal, tolerates the taint, static, stuck */
    KP_DRAIN_WAIT,     /* waited on, nothing to do now (a later group, terminating, or
                        * do-not-disrupt) */
    KP_DRAIN_EVICT,    /* evict through the Eviction API */
    KP_DRAIN_FORCE,    /* delete, past the termination deadline (kp_drain_pod_needs_force) */
};

/* What a drain does with each of in->pods now: verbs[i] for in->pods[i] (room for n_pods), and
 * *ret as kp_drain_count fills it. Pure (Karpenter's Terminator.Drain and the eviction queue's
 * choice between force, wait and evict). */
void kp_drain_plan(const struct kp_drain_input *in, enum kp_drain_verb *verbs,
                   struct kp_drain_result *ret) KP_NONNULL(1, 3);

/* How the evicting drainer paces its calls per pod, after Karpenter's eviction queue: a failed
 * eviction (PDB refusal included) backs off from 100 ms doubling to 10 s; a pod evicted or
 * deleted is not called for again for KP_EVICT_SETTLE_USEC (the cache shows it terminating well
 * before); at most KP_EVICT_MAX_CALLS API calls per drain() call, the rest at the next one. */
#define KP_EVICT_BACKOFF_BASE_USEC (100 * 1000LL)
#define KP_EVICT_BACKOFF_MAX_USEC (10 * 1000000LL)
#define KP_EVICT_SETTLE_USEC (15 * 1000000LL)
#define KP_EVICT_MAX_CALLS 64u

/* The message the Eviction API answers when more than one PDB selects a pod (Kubernetes'
 * eviction.go): treated like a PDB refusal. */
#define KP_EVICT_MULTIPLE_PDBS_MESSAGE                                                             \
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "     \
    "support."

struct kp_evict_drainer;

/* A new evicting drainer with no pod state. 0 or -ENOMEM. */
int kp_evict_drainer_new(struct kp_evict_drainer **ret) KP_WUR;
struct kp_evict_drainer *kp_evict_drainer_free(struct kp_evict_drainer *d);
/* Its vtable view (borrowing d). */
struct kp_drainer kp_evict_drainer(struct kp_evict_drainer *d) KP_NONNULL(1);
/* Pods it keeps pacing state for (tests). */
size_t kp_evict_drainer_tracked(struct kp_evict_drainer *d) KP_NONNULL(1);

#endif
