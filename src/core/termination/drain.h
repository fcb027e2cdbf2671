/* core/termination/drain.h: the drain step of Node termination behind a small interface, and
 * Karpenter's rules for which pods a drain waits on.
 *
 * The termination controller (core/termination/termination.h) calls a drainer once per
 * reconcile of a terminating Node that has reached the drain step (tainted
 * karpenter.sh/disrupted:NoSchedule), with every pod the cache has bound to the Node. The
 * drainer answers whether the Node is drained and, if not, how many pods it still waits on; the
 * controller owns the rest (the NodeClaim's Drained condition, the FailedDraining event, the
 * requeue, the minimum drain time). kp_drainer_wait, the default, never evicts: it waits until
 * no pod that needs draining is bound (something else, a person or kubelet's graceful
 * shutdown, moves them), except that once the NodeClaim's termination deadline leaves a pod no
 * time for its own grace period it deletes that pod, as Karpenter does. The eviction drainer
 * (semantics §3.5: priority groups, the Eviction API with PDBs) is a later drop-in behind the
 * same vtable.
 *
 * Which pods count (Karpenter's IsWaitingEviction = !IsTerminal && IsDrainable, semantics §3.5):
 * not Succeeded/Failed; does not tolerate karpenter.sh/disrupted:NoSchedule (it would just come
 * back); not a static/mirror pod (owner reference kind Node, or the config.mirror annotation:
 * the API server cannot delete it); not stuck terminating (deletionTimestamp more than 1 min in
 * the past: kubelet is not going to finish it, so waiting would block the Node forever). Pods
 * with do-not-disrupt are waited on.
 *
 * Threads: the predicates are pure, any thread. A drainer's drain() runs on the controller's
 * reconcile workers, several at once (different Nodes), with the worker's own client. */
#ifndef KP_CORE_TERMINATION_DRAIN_H
#define KP_CORE_TERMINATION_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_client;
struct kp_ctx;
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

/* Whether p must be deleted now rather than evicted (Karpenter's forced path, semantics §3.5): a
 * termination deadline exists (deadline_usec > 0) and either p is terminating with a deletion
 * time after it, or now is past the deadline minus p's terminationGracePeriodSeconds. */
bool kp_drain_pod_needs_force(const struct kp_pod_view *p, int64_t deadline_usec, int64_t now_usec)
    KP_NONNULL(1);

/* The waiting drainer (no eviction): drained when no pod of in->pods is waiting eviction. With a
 * termination deadline it deletes (uid precondition, grace period ending at the deadline, at
 * least 1 s) each waiting pod kp_drain_pod_needs_force() names; PDBs and do-not-disrupt do not
 * hold that deletion, as in Karpenter. */
extern const struct kp_drainer kp_drainer_wait;

/* The waiting drainer's answer as a pure function (kp_drainer_wait calls it). */
void kp_drain_count(const struct kp_drain_input *in, struct kp_drain_result *ret) KP_NONNULL(1, 2);

#endif
