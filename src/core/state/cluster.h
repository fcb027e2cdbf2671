/* core/state/cluster.h: the core's cluster state — one in-memory view of the cluster's nodes
 * that the provisioner and disruption read, as Karpenter's pkg/controllers/state Cluster and
 * StateNode.
 *
 * A state node is keyed by providerID and joins a Node and its NodeClaim (either may come
 * first; a Node without a providerID that no NodePool manages is keyed by its name, as
 * upstream). For each it keeps what is expensive to recompute: the summed requests and limits of
 * the bound, non-terminal pods (terminating ones included: they still hold their resources) and
 * of the DaemonSet pods among them, the pod counts and the host ports in use, plus the two
 * in-memory marks the provisioner and disruption set (marked for deletion, nominated). Pods are
 * counted by the node name they are bound to, so a pod seen before its Node is counted as soon
 * as the Node arrives, without looking at any pod again.
 *
 * The state is fed by handlers on the shared Node, NodeClaim and Pod informers
 * (api/informers.h), registered by kp_cluster_state_new() during set-up. Every event updates
 * only the objects it names: a pod event adds or takes away that pod's share on its node; no
 * event rescans pods.
 *
 * Readers get value copies: a snapshot (struct kp_state_snapshot) holds kp_state_node values
 * taken under the state's read lock in one go, so they agree with each other, plus a reference
 * on each Node and NodeClaim entry they name (no copies of those). A snapshot is the caller's and
 * stays valid until kp_state_snapshot_free(), whatever happens to the state meanwhile.
 *
 * Threads: the informer threads write (one rwlock); readers on any thread. No lock is held
 * while calling code outside this module (observer callbacks run after the lock is dropped). */
#ifndef KP_CORE_STATE_CLUSTER_H
#define KP_CORE_STATE_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "api/obj.h"
#include "api/obj-pod.h"

struct kp_core_env;
struct kp_cluster_state;

enum kp_state_node_flags {
    KP_STATE_NODE_MANAGED = 1 << 0,     /* has a NodeClaim (Karpenter's Managed()) */
    KP_STATE_NODE_REGISTERED = 1 << 1,  /* unmanaged, or the Node has karpenter.sh/registered */
    KP_STATE_NODE_INITIALIZED = 1 << 2, /* unmanaged, or the Node has karpenter.sh/initialized */
    /* Deleted(): the NodeClaim is being deleted or its InstanceTerminating condition is True,
     * or (without a NodeClaim) the Node is being deleted. */
    KP_STATE_NODE_DELETING = 1 << 3,
    /* MarkedForDeletion(): marked by kp_cluster_state_mark_for_deletion(), or DELETING. */
    KP_STATE_NODE_MARKED_FOR_DELETION = 1 << 4,
    KP_STATE_NODE_NOMINATED = 1 << 5, /* nominated_until_usec is after the snapshot's time */
};

/* One state node, as copied into a snapshot. Strings point into the Node or NodeClaim entry
 * (which the snapshot holds) or into the snapshot itself; arrays live in the snapshot. */
struct kp_state_node {
    const char *provider_id; /* the key */
    /* Karpenter's Name(): the NodeClaim's name until the Node is registered, then the Node's. */
    const char *name;
    const char *node_name;      /* NULL without a Node */
    const char *nodeclaim_name; /* NULL without a NodeClaim */
    const char *nodepool;       /* label karpenter.sh/nodepool of Labels(), or NULL */
    struct kp_entry *node;      /* kp_node_view(); NULL without a Node */
    struct kp_entry *nodeclaim; /* kp_nodeclaim_view(); NULL without a NodeClaim */
    uint32_t flags;             /* enum kp_state_node_flags */
    int64_t nominated_until_usec;
    /* Karpenter's Capacity() / Allocatable(): the Node's; while a managed node is not
     * initialized, entries the Node lacks or has at zero come from the NodeClaim's status (and
     * without a Node, the NodeClaim's status alone). Upstream's Capacity() also adds "nodes: 1";
     * a reader summing NodePool usage adds it. */
    struct kp_resources capacity;
    struct kp_resources allocatable;
    /* Sums over the bound, non-terminal pods (DaemonSet pods included), each counting "pods: 1"
     * as Karpenter's RequestsForPods does. Resources that sum to zero are left out. */
    struct kp_resources pod_requests;
    struct kp_resources pod_limits;
    struct kp_resources daemon_requests; /* the DaemonSet-owned pods among them */
    struct kp_resources daemon_limits;
    uint32_t pods;
    uint32_t daemon_pods;
    /* Every host port those pods hold (Karpenter's HostPortUsage), ip strings copied. */
    const struct kp_host_port *host_ports;
    size_t n_host_ports;
};

struct kp_state_snapshot {
    const struct kp_state_node *v;
    size_t n;
    int64_t taken_usec; /* env's clock when taken: what NOMINATED was judged against */
};
/* Drops the snapshot's entry references and frees it; accepts and returns NULL. Any thread. */
struct kp_state_snapshot *kp_state_snapshot_free(struct kp_state_snapshot *s);

/* Available(): allocatable minus pod requests, per allocatable resource, never below zero.
 * *ret lives in memory the caller passes: v[cap]; returns the number written (at most cap) —
 * allocatable lists are short (cpu, memory, pods, ephemeral-storage, a few extended). */
size_t kp_state_node_available(const struct kp_state_node *n, struct kp_res *v, size_t cap)
    KP_NONNULL(1);

/* A cluster state registered on env's shared Node, NodeClaim and Pod informers (made on first
 * use in env->informers). NodeClaims count only when env->provider supports their nodeClassRef
 * (every NodeClaim when env->provider is NULL, for tests). env is borrowed and must outlive the
 * state. Main thread, during set-up, before the registry starts. 0, -ENOMEM, or the errors of
 * api/informers.h (-EBUSY after start). On error nothing stays registered. */
int kp_cluster_state_new(const struct kp_core_env *env, struct kp_cluster_state **ret) KP_WUR;
/* Takes the handlers back out of the informers (which must be stopped: a running one aborts,
 * as kp_controller_free) and frees; accepts and returns NULL. Main thread. */
struct kp_cluster_state *kp_cluster_state_free(struct kp_cluster_state *s);

/* Karpenter's Synced(): the Node, NodeClaim and Pod informers are synced, no NodeClaim is
 * without a providerID (one still launching: its node is not known yet), and — until the first
 * time this returned true — every Node the informer holds is in the state (a managed Node
 * waits for its instance-type label or providerID; after the first sync upstream stops checking
 * that, and so does this). Any thread. */
bool kp_cluster_state_synced(struct kp_cluster_state *s);
/* State nodes held. Any thread. */
size_t kp_cluster_state_node_count(struct kp_cluster_state *s);
/* Reports karpenter_cluster_state_synced (1/0) and karpenter_cluster_state_node_count through
 * env->observer; the integrator calls it at scrape time. Any thread. */
void kp_cluster_state_report(struct kp_cluster_state *s);

/* Every state node, in no particular order. *ret is the caller's. 0 or -ENOMEM/-EOVERFLOW.
 * Any thread. */
int kp_cluster_state_snapshot(struct kp_cluster_state *s, struct kp_state_snapshot **ret) KP_WUR;
/* The one state node of a providerID, or of the Node named node_name, as a snapshot of one.
 * 0, -ENOENT, -ENOMEM. Any thread. */
int kp_cluster_state_get_by_provider_id(struct kp_cluster_state *s, const char *provider_id,
                                        struct kp_state_snapshot **ret) KP_NONNULL(1, 2) KP_WUR;
int kp_cluster_state_get_by_node_name(struct kp_cluster_state *s, const char *node_name,
                                      struct kp_state_snapshot **ret) KP_NONNULL(1, 2) KP_WUR;

/* The in-memory marks (Karpenter's MarkForDeletion/UnmarkForDeletion, NominateNodeForPod):
 * disruption marks candidates while it acts; the provisioner nominates a node that received
 * pods until until_usec (env clock), which blocks its voluntary disruption. 0 or -ENOENT.
 * Any thread. */
int kp_cluster_state_mark_for_deletion(struct kp_cluster_state *s, const char *provider_id,
                                       bool marked) KP_NONNULL(1, 2) KP_WUR;
int kp_cluster_state_nominate(struct kp_cluster_state *s, const char *provider_id,
                              int64_t until_usec) KP_NONNULL(1, 2) KP_WUR;

/* The handlers kp_cluster_state_new() registers, for tests that feed decoded entries without
 * informers (kp_cluster_state_new_detached). Informer-thread rules: entries are borrowed. */
void kp_cluster_state_node_event(struct kp_cluster_state *s, const struct kp_entry *old_e,
                                 const struct kp_entry *new_e) KP_NONNULL(1);
void kp_cluster_state_nodeclaim_event(struct kp_cluster_state *s, const struct kp_entry *old_e,
                                      const struct kp_entry *new_e) KP_NONNULL(1);
void kp_cluster_state_pod_event(struct kp_cluster_state *s, const struct kp_entry *old_e,
                                const struct kp_entry *new_e) KP_NONNULL(1);
/* A state on no informer: tests call the event functions above (old_e NULL: add; new_e NULL:
 * delete). Synced then needs no informer; kp_cluster_state_set_informers_synced() stands in for
 * them. 0 or -ENOMEM. */
int kp_cluster_state_new_detached(const struct kp_core_env *env,
                                  struct kp_cluster_state **ret) KP_WUR;
void kp_cluster_state_set_informers_synced(struct kp_cluster_state *s, bool synced) KP_NONNULL(1);

#endif
