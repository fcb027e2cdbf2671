/* core/nodepool/nodepool.h: Karpenter's NodePool controllers as one
 * reconciler per NodePool: nodepool.hash, nodepool.validation, nodepool.readiness,
 * nodepool.registrationhealth and nodepool.counter, plus the NodePool gauges of
 * pkg/controllers/metrics/nodepool.
 *
 * Only NodePools whose nodeClassRef names a node class kind the provider supports are touched
 * (coexistence: every other NodePool is another Karpenter's; not even its gauges are ours).
 *
 * Per reconcile, in this order:
 *
 *   hash      when karpenter.sh/nodepool-hash-version on the NodePool is not
 *             KP_NODEPOOL_HASH_VERSION, each of its NodeClaims (label karpenter.sh/nodepool)
 *             gets the new version, and the new hash unless it has a Drifted condition; then the
 *             NodePool's own two annotations (hash.h). Each write is a merge patch with the
 *             cached resourceVersion.
 *   status    one status merge patch (resourceVersion precondition), only when it changes
 *             anything:
 *     conditions  ValidationSucceeded (True, or False NodePoolValidationFailed with
 *                 kp_nodepool_validate's report); NodeClassReady (from the provider's
 *                 node_class_status: False NodeClassNotFound / NodeClassTerminating /
 *                 NodeClassReadinessUnknown, the class's own Ready reason and message when
 *                 False, True when Ready); NodeRegistrationHealthy (health.h);
 *                 Ready = ValidationSucceeded and NodeClassReady (NodeRegistrationHealthy is
 *                 informational, as upstream); and kpssh's UnsupportedFields (below)
 *     resources   status.resources and status.nodes: Karpenter's counter over the pool's
 *                 NodeClaims that have launched (status.providerID), are not being deleted and
 *                 not InstanceTerminating: each counts nodes: 1 plus its capacity, which is the
 *                 Node's status.capacity once the Node is initialized (label
 *                 karpenter.sh/initialized), the Node's with the NodeClaim's status.capacity for
 *                 zero or absent amounts before that, the NodeClaim's alone while there is no
 *                 Node; cpu, memory, pods, ephemeral-storage and nodes are always listed
 *     nodeClassObservedGeneration  the class's generation (the registration-health reset)
 *   gauges    karpenter_nodepools_usage (status.resources) and karpenter_nodepools_limit
 *             (spec.limits) {nodepool, resource_type}, cpu in cores, others in units; series of
 *             a resource no longer listed, and all of a NodePool that is gone or no longer ours,
 *             are hidden.
 *
 * The key is requeued every env timing nodepool_counter_usec (Karpenter's counter period),
 * which also refreshes NodeClassReady: the core sees no events of the provider's node class
 * kind. NodeClaim events of a pool enqueue it at once.
 *
 * UnsupportedFields (kpssh's own condition type; absent when nothing applies): True with reason
 * StaticCapacityUnsupported when spec.replicas is set. Static NodePools (Karpenter's alpha
 * StaticCapacity gate, off by default upstream) are not implemented: kpssh neither keeps
 * replicas NodeClaims for such a pool nor provisions it dynamically (the provisioner must skip
 * a NodePool with replicas, as Karpenter's does). With reason BalancedConsolidationUnsupported
 * when consolidationPolicy is Balanced: its savings-per-disruption threshold is not implemented,
 * and the pool is consolidated as WhenEmptyOrUnderutilized (said, never silent). Ready is left to
 * its upstream dependents.
 *
 * Pure parts: hash.h, health.h, and kp_nodepool_usage / kp_nodepool_conditions /
 * kp_nodepool_status_patch below (tests/unit/test-nodepool.c). */
#ifndef KP_CORE_NODEPOOL_NODEPOOL_H
#define KP_CORE_NODEPOOL_NODEPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

typedef struct json_t json_t;
struct kp_condset;
struct kp_core_env;
struct kp_node_class_status;
struct kp_node_view;
struct kp_nodeclaim_view;
struct kp_nodepool_view;

#define KP_NP_COND_VALIDATION_SUCCEEDED "ValidationSucceeded"
#define KP_NP_COND_NODE_CLASS_READY "NodeClassReady"
#define KP_NP_COND_READY "Ready"
#define KP_NP_COND_UNSUPPORTED_FIELDS "UnsupportedFields"
#define KP_NP_REASON_VALIDATION_FAILED "NodePoolValidationFailed"
#define KP_NP_REASON_NODECLASS_NOT_FOUND "NodeClassNotFound"
#define KP_NP_REASON_NODECLASS_TERMINATING "NodeClassTerminating"
#define KP_NP_REASON_NODECLASS_READINESS_UNKNOWN "NodeClassReadinessUnknown"
#define KP_NP_REASON_STATIC_UNSUPPORTED "StaticCapacityUnsupported"
#define KP_NP_REASON_BALANCED_UNSUPPORTED "BalancedConsolidationUnsupported"

/* Ready's dependents, as Karpenter's NodePool condition set. */
extern const char *const kp_nodepool_ready_deps[2];

/* One resource of a usage sum, in milli-units (api/obj.h). name is static or points into an
 * entry the caller holds. */
struct kp_np_res {
    const char *name;
    int64_t milli;
};
/* A NodePool's usage: base resources first, then others in order of first appearance. */
#define KP_NP_USAGE_MAX 32
struct kp_np_usage {
    struct kp_np_res v[KP_NP_USAGE_MAX];
    size_t n;
    unsigned dropped; /* resource names beyond KP_NP_USAGE_MAX (not summed) */
};

/* Starts u with Karpenter's base resources at 0. */
void kp_nodepool_usage_init(struct kp_np_usage *u) KP_NONNULL(1);
/* Adds nc's share to u (nothing when it does not count, see the top); node is its Node from the
 * cache (by providerID) or NULL. Names point into nc / node: keep them while u is used.
 * Saturates instead of overflowing. */
void kp_nodepool_usage_add(struct kp_np_usage *u, const struct kp_nodeclaim_view *nc,
                           const struct kp_node_view *node) KP_NONNULL(1, 2);
/* The amount of name in u (0 when absent). */
int64_t kp_nodepool_usage_get(const struct kp_np_usage *u, const char *name) KP_NONNULL(1, 2);

/* Sets ValidationSucceeded, NodeClassReady, UnsupportedFields and Ready in cs for np. cls: what
 * the provider says of np's node class, NULL when it cannot say (NodeClassReadinessUnknown).
 * NodeRegistrationHealthy is health.h's. 0 or -ENOMEM. */
int kp_nodepool_conditions(struct kp_condset *cs, const struct kp_nodepool_view *np,
                           const struct kp_node_class_status *cls) KP_NONNULL(1, 2) KP_WUR;

/* The status merge patch for np: status.conditions from cs (when changed), status.resources
 * and status.nodes from u (when they differ from the cached ones; resources the cache lists
 * and u does not are sent as null, so the merge removes them), and
 * status.nodeClassObservedGeneration = class_generation when have_class and it differs.
 * *ret is NULL when nothing differs, else a new patch object (without resourceVersion).
 * 0 or -ENOMEM. */
int kp_nodepool_status_patch(const struct kp_nodepool_view *np, const struct kp_condset *cs,
                             const struct kp_np_usage *u, bool have_class, int64_t class_generation,
                             json_t **ret) KP_NONNULL(1, 2, 3, 6) KP_WUR;

struct kp_nodepool_controller;

/* A stopped controller registered on env's NodePool informer (keys), NodeClaim informer
 * (fan-out to its pool, the nodepool index) and Node informer (read, providerID index). env is
 * borrowed and outlives the controller; the informers must not have started. Main thread.
 * 0, -EINVAL, -EBUSY, -ENOMEM. */
int kp_nodepool_controller_new(const struct kp_core_env *env,
                               struct kp_nodepool_controller **ret) KP_WUR;
int kp_nodepool_controller_start(struct kp_nodepool_controller *ctl) KP_WUR;
void kp_nodepool_controller_stop(struct kp_nodepool_controller *ctl);
/* Started and the three informers synced. Any thread; NULL: false. */
bool kp_nodepool_controller_ready(struct kp_nodepool_controller *ctl);
/* Stops and frees (after the informers have stopped); accepts and returns NULL. */
struct kp_nodepool_controller *kp_nodepool_controller_free(struct kp_nodepool_controller *ctl);

#endif
