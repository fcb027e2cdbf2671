/* core/nodepool/hash.h: the NodePool template hash behind the karpenter.sh/nodepool-hash
 * annotation (static drift), and the plans that keep the annotation on NodePools
 * and their NodeClaims.
 *
 * What the hash covers is Karpenter's rule: spec.template's metadata labels and annotations,
 * taints, startupTaints, nodeClassRef, expireAfter and terminationGracePeriod; NOT the
 * requirements, the resources, nor anything outside the template (weight, limits, disruption,
 * replicas), so editing those never drifts a node. Zero values count as absent, lists and maps
 * as sets (reordering taints changes nothing), durations by value ("1h" and "60m" are equal;
 * Karpenter hashes the parsed duration, not the text).
 *
 * The number cannot be Karpenter's (Go's hashstructure over Go values); it only has to be
 * stable across kpssh processes and builds, which it is: FNV-1a 64 over a canonical
 * serialization defined in hash.c, printed in decimal as Karpenter prints its own. A change to
 * that serialization changes every hash and must bump KP_NODEPOOL_HASH_VERSION, which makes the
 * hash controller re-stamp the NodeClaims instead of drifting all of them.
 *
 * Everything here is pure; any thread. */
#ifndef KP_CORE_NODEPOOL_HASH_H
#define KP_CORE_NODEPOOL_HASH_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"

struct kp_nodeclaim_view;
struct kp_nodepool_view;

/* The value of karpenter.sh/nodepool-hash-version kpssh writes (Karpenter's current version;
 * see above for when to bump it). */
#define KP_NODEPOOL_HASH_VERSION "v3"
/* Room for the decimal text of a 64-bit hash and its NUL. */
#define KP_NODEPOOL_HASH_MAX 21

/* Writes np's template hash as decimal text into ret. Never fails. */
void kp_nodepool_hash(const struct kp_nodepool_view *np, char ret[KP_NODEPOOL_HASH_MAX])
    KP_NONNULL(1, 2);

/* Whether np's own annotations must be written: its nodepool-hash differs from hash, or its
 * nodepool-hash-version from KP_NODEPOOL_HASH_VERSION. */
bool kp_nodepool_hash_stale(const struct kp_nodepool_view *np, const char *hash) KP_NONNULL(1, 2);

/* What the hash controller writes on one NodeClaim of a NodePool whose hash version changed
 * (Karpenter's updateNodeClaimHash). */
struct kp_nodeclaim_hash_plan {
    bool write;    /* patch metadata.annotations at all */
    bool set_hash; /* also karpenter.sh/nodepool-hash (hash-version always when write) */
};
/* The plan for nc: nothing when its nodepool-hash-version is already KP_NODEPOOL_HASH_VERSION;
 * else the version, and the hash too unless nc has a Drifted condition (a drifted NodeClaim
 * stays drifted: under a new hash function nothing can tell whether it still is). */
struct kp_nodeclaim_hash_plan kp_nodeclaim_hash_plan(const struct kp_nodeclaim_view *nc)
    KP_NONNULL(1);

#endif
