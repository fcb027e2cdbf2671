/* core/disruption/marking.h: the two controllers that tell disruption when a node has been quiet
 * long enough to consolidate (semantics §3.10, §5.9): Karpenter's nodeclaim.podevents and the
 * Consolidatable half of nodeclaim.disruption.
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
 * nodeclaim.disruption, Consolidatable (key: a NodeClaim name). For a NodeClaim of ours whose
 * NodePool exists and is not static: consolidateAfter Never, or the NodeClaim not Initialized,
 * clears the condition; otherwise it is set True once now - (lastPodEventTime, else the
 * Initialized transition) >= consolidateAfter, and until then cleared and requeued at that
 * moment. A NodePool change requeues its NodeClaims. Drift is not marked yet.
 *
 * Both decisions are pure functions below (tests/unit/test-marking.c); every write is a CAS on
 * the NodeClaim's cached resourceVersion (core/writes.h). */
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

struct kp_podevents_controller;
struct kp_consolidation_controller;

/* Stopped controllers registered on env's informers (Pods, Nodes and NodeClaims; NodeClaims and
 * NodePools). env is borrowed and outlives them. Main thread, before the informers start.
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
