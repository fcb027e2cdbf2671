/* core/disruption/marking.h: the two controllers that tell disruption which nodes it may take
 *: Karpenter's nodeclaim.podevents, and nodeclaim.disruption, which
 * keeps the Drifted and Consolidatable conditions.
 *
 * nodeclaim.podevents (key: a Node name). A pod that becomes bound to a Node, goes terminal, or
 * starts terminating — not a DaemonSet's — is a "pod event" on that Node: its NodeClaim's
 * status.lastPodEventTime is set to now, at most once per KP_PODEVENTS_DEDUPE_USEC (10 s,
 * deliberately shorter than the 15 s consolidation validation). An event inside the dedupe
 * window is not dropped, as upstream drops it, but requeued to the window's end, so the time
 * written is never older than the node's last pod event. Pods listed at start-up are not events
 * (upstream stamps them with their PodScheduled time, which the pod projection does not keep;
 * stamping them with now would restart every node's consolidateAfter clock at each restart).
 *
 * nodeclaim.disruption (key: a NodeClaim name), for a NodeClaim of ours, not being deleted, whose
 * NodePool (karpenter.sh/nodepool label) exists. Two halves, written in one status write:
 *
 *   Drifted. A NodeClaim that is not Launched has no Drifted condition. A Launched one is drifted
 *   for the first of these that holds, which becomes the condition's reason (and, as upstream,
 *   its message):
 *     NodePoolDrifted      both NodeClaim and NodePool carry karpenter.sh/nodepool-hash and
 *                          -hash-version, the versions are equal and the hashes differ (a
 *                          version change is the hash controller's to resolve, never drift);
 *     RequirementsDrifted  the NodePool's spec.template requirements are not compatible with the
 *                          NodeClaim's labels taken as key In [value]: a NodePool key that is not
 *                          a label is drift unless its operator is NotIn or DoesNotExist, and a
 *                          key both have must share a value, so widening a requirement never
 *                          drifts and narrowing it past a node's label does;
 *     <provider reason>    the provider's is_drifted (SSH: ProfileDrift, NodeClassDrift); asked
 *                          only when the two above find nothing, as upstream saves its calls;
 *                          an error leaves the condition as it is, NotFound included.
 *   Upstream's InstanceTypeNotFound is not checked (marking.c says why). Drifted=True(reason) is
 *   set; a NodeClaim no longer drifted loses the condition (it is removed, never set False). A
 *   Launched NodeClaim is looked at again every KP_DRIFT_REQUEUE_USEC (5 min, upstream's) and
 *   whenever it, its NodePool's hash annotations or template requirements change. A NodePool
 *   whose requirement list the projection refused is left alone (it fails validation).
 *
 *   Consolidatable (skipped for static pools): consolidateAfter Never, or the NodeClaim not
 *   Initialized, clears the condition; otherwise it is set True once now - (lastPodEventTime,
 *   else the Initialized transition) >= consolidateAfter, and until then cleared and requeued at
 *   that moment. A NodePool change of consolidateAfter or replicas requeues its NodeClaims.
 *
 * Every decision is a pure function below (tests/unit/test-disruption.c, test-drift.c); every
 * write is a CAS on the NodeClaim's cached resourceVersion (core/writes.h). */
#ifndef KP_CORE_DISRUPTION_MARKING_H
#define KP_CORE_DISRUPTION_MARKING_H

#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_core_env;
struct kp_nodeclaim_view;
struct kp_nodepool_view;
struct kp_pod_view;

#define KP_NC_COND_CONSOLIDATABLE "Consolidatable"
#define KP_NC_COND_DRIFTED "Drifted"
/* Drifted reasons the core finds (API: Karpenter's names); providers add their own. */
#define KP_DRIFT_REASON_NODEPOOL "NodePoolDrifted"
#define KP_DRIFT_REASON_REQUIREMENTS "RequirementsDrifted"
/* How often a Launched NodeClaim's drift is decided again (upstream: 5 min). */
#define KP_DRIFT_REQUEUE_USEC (5ULL * 60ULL * 1000000ULL)
#define KP_PODEVENTS_DEDUPE_USEC (10ULL * 1000000ULL)

/* Whether the change old -> new of one pod (either NULL: added / deleted) is a pod event on
 * new's (or old's) Node: bound there anew, gone terminal, or begun terminating; never for a
 * DaemonSet's pod, and not for a pod first seen already bound (old NULL). Pure. */
bool kp_podevents_is_event(const struct kp_pod_view *old_p, const struct kp_pod_view *new_p);

/* What to do about one NodeClaim's lastPodEventTime at now: 0 to write now, else how long to
 * wait until the dedupe window ends. Pure. */
uint64_t kp_podevents_wait(const struct kp_nodeclaim_view *nc, int64_t now_usec) KP_NONNULL(1);

enum kp_consolidatable_action {
    KP_CONSOLIDATABLE_KEEP = 0, /* nothing to change */
    KP_CONSOLIDATABLE_SET,      /* set Consolidatable=True */
    KP_CONSOLIDATABLE_CLEAR,    /* remove the condition */
};

struct kp_consolidatable_plan {
    enum kp_consolidatable_action action;
    uint64_t requeue_usec; /* 0: none; else when the node becomes consolidatable */
};

/* The decision for nc of NodePool np at now (see the top). Pure. */
struct kp_consolidatable_plan kp_consolidatable_plan(const struct kp_nodeclaim_view *nc,
                                                     const struct kp_nodepool_view *np,
                                                     int64_t now_usec) KP_NONNULL(1, 2);

enum kp_drift_action {
    KP_DRIFT_KEEP = 0,     /* nothing to change */
    KP_DRIFT_SET,          /* set Drifted=True with reason */
    KP_DRIFT_CLEAR,        /* remove the condition */
    KP_DRIFT_ASK_PROVIDER, /* the core finds no drift: ask is_drifted, then plan again */
};

struct kp_drift_plan {
    enum kp_drift_action action;
    const char *reason;    /* SET: the reason (and message); a static string or the provider's */
    uint64_t requeue_usec; /* 0: none; else decide again then (every Launched NodeClaim) */
};

/* The Drifted decision for nc of NodePool np (see the top). provider_asked false: the core's own
 * checks only, and KP_DRIFT_ASK_PROVIDER when they find nothing; true: provider_reason is what
 * is_drifted answered (NULL: not drifted). A NodeClaim being deleted, or not of np, is KEEP.
 * Pure, but builds requirement sets: 0 with *ret filled, or -ENOMEM / -KP_ELIMIT. */
int kp_drift_plan(const struct kp_nodeclaim_view *nc, const struct kp_nodepool_view *np,
                  bool provider_asked, const char *provider_reason, struct kp_drift_plan *ret)
    KP_NONNULL(1, 2, 5) KP_WUR;

struct kp_podevents_controller;
struct kp_consolidation_controller;

/* Stopped controllers registered on env's informers (Pods, Nodes and NodeClaims; NodeClaims and
 * NodePools). kp_consolidation_controller is nodeclaim.disruption, both halves (the name is
 * older than its Drifted half). env is borrowed and outlives them. Main thread, before the informers start.
 * 0, -EINVAL, -EBUSY, -ENOMEM. */
int kp_podevents_controller_new(const struct kp_core_env *env,
                                struct kp_podevents_controller **ret) KP_WUR;
int kp_podevents_controller_start(struct kp_podevents_controller *ctl) KP_WUR;
void kp_podevents_controller_stop(struct kp_podevents_controller *ctl);
bool kp_podevents_controller_ready(struct kp_podevents_controller *ctl);
struct kp_podevents_controller *kp_podevents_controller_free(struct kp_podevents_controller *ctl);

int kp_consolidation_controller_new(const struct kp_core_env *env,
                                    struct kp_consolidation_controller **ret) KP_WUR;
int kp_consolidation_controller_start(struct kp_consolidation_controller *ctl) KP_WUR;
void kp_consolidation_controller_stop(struct kp_consolidation_controller *ctl);
bool kp_consolidation_controller_ready(struct kp_consolidation_controller *ctl);
struct kp_consolidation_controller *
kp_consolidation_controller_free(struct kp_consolidation_controller *ctl);

#endif
