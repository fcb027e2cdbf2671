/* core/nodepool/health.h: the NodePool's NodeRegistrationHealthy condition:
 * Karpenter's ring buffer of launch/registration outcomes and the rules that turn outcomes into
 * the condition.
 *
 * Karpenter's lifecycle controller feeds the buffer where it decides (a registration, a launch
 * or registration timeout). kpssh's NodePool controller keeps the buffer itself and reads the
 * same moments off NodeClaim events (kp_nodeclaim_registration_outcome):
 *
 *   success  Registered turns True on a NodeClaim (not on its first sight: a restart re-lists
 *            every NodeClaim, and those registered long ago)
 *   failure  a NodeClaim that never registered starts being deleted once the lifecycle's
 *            timeout had passed: Launched not True for launch_timeout_usec, or Registered not
 *            True for registration_ttl_usec since their last transitions (the liveness rule
 *            that deletes it), reason "RegistrationFailed" / "Failed to register node" when it
 *            had launched, else the Launched condition's reason and message
 *
 * The buffer holds the last KP_NP_HEALTH_BUFFER outcomes; it is Unhealthy when at least half
 * of KP_NP_HEALTH_BUFFER (not of what it holds) are failures, Healthy when it holds anything
 * else, Unknown when empty. A success sets the condition True when the buffer with it is
 * Healthy; a failure sets it False when the buffer with it is Unhealthy. A NodePool or node class
 * generation change resets the buffer and the condition to Unknown; after a restart an empty
 * buffer is seeded from the condition (True: one success; False: two failures).
 *
 * Pure functions; the tracker is a plain value owned by its caller. */
#ifndef KP_CORE_NODEPOOL_HEALTH_H
#define KP_CORE_NODEPOOL_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_condset;
struct kp_core_timing;
struct kp_nodeclaim_view;
struct kp_nodepool_view;

#define KP_NP_COND_NODE_REGISTRATION_HEALTHY "NodeRegistrationHealthy"
#define KP_NP_REASON_REGISTRATION_FAILED "RegistrationFailed"
#define KP_NP_HEALTH_BUFFER 4

enum kp_np_health {
    KP_NP_HEALTH_UNKNOWN = 0,
    KP_NP_HEALTH_HEALTHY,
    KP_NP_HEALTH_UNHEALTHY,
};

/* A ring of the last KP_NP_HEALTH_BUFFER outcomes (true: success). Zero value: empty. */
struct kp_np_health_tracker {
    bool v[KP_NP_HEALTH_BUFFER];
    size_t n;    /* how many held */
    size_t next; /* where the next goes (overwriting the oldest when full) */
};

void kp_np_health_insert(struct kp_np_health_tracker *t, bool success) KP_NONNULL(1);
enum kp_np_health kp_np_health_status(const struct kp_np_health_tracker *t) KP_NONNULL(1);
/* Karpenter's SetStatus: Unknown empties, Healthy holds one success, Unhealthy half the buffer
 * of failures. */
void kp_np_health_seed(struct kp_np_health_tracker *t, enum kp_np_health s) KP_NONNULL(1);

enum kp_np_outcome {
    KP_NP_OUTCOME_NONE = 0,
    KP_NP_OUTCOME_SUCCESS,
    KP_NP_OUTCOME_FAILURE,
};

/* What the change old -> new of one NodeClaim (old NULL: first sight) says about registration
 * health (see the top). On FAILURE *ret_reason and *ret_message point into new (or at static
 * text). Pure. */
enum kp_np_outcome kp_nodeclaim_registration_outcome(const struct kp_nodeclaim_view *old_nc,
                                                     const struct kp_nodeclaim_view *new_nc,
                                                     const struct kp_core_timing *timing,
                                                     const char **ret_reason,
                                                     const char **ret_message)
    KP_NONNULL(2, 3, 4, 5);

/* The reset rules, before outcomes are applied: seeds an empty t from the cached condition in
 * cs, then, when cs has no NodeRegistrationHealthy, or np's status.nodeClassObservedGeneration
 * differs from class_generation, or the condition's observedGeneration from np's generation,
 * sets it Unknown and empties t. 0 or -ENOMEM. */
int kp_np_health_sync(struct kp_np_health_tracker *t, struct kp_condset *cs,
                      const struct kp_nodepool_view *np, int64_t class_generation)
    KP_NONNULL(1, 2, 3) KP_WUR;

/* Applies one outcome to t and cs (success, or failure with reason and message). 0 or -ENOMEM. */
int kp_np_health_apply(struct kp_np_health_tracker *t, struct kp_condset *cs, bool success,
                       const char *reason, const char *message) KP_NONNULL(1, 2) KP_WUR;

#endif
