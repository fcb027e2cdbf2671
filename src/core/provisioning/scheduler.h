/* core/provisioning/scheduler.h: the provisioning scheduler, Karpenter's scheduling simulation
 * (pkg/controllers/provisioning/scheduling) as one pure function.
 *
 * kp_sched_solve() takes value structs in (the pods to place, the nodes and in-flight NodeClaims
 * that exist, the NodePools with their instance types, the DaemonSets every new node will run)
 * and writes a plan out: which pod goes to which existing node, which new NodeClaims to create
 * (NodePool, narrowed requirements, instance-type options in price order, their pods) and why
 * each pod that fits nowhere does not. It does no I/O, takes no lock, reads no clock and keeps no
 * global state: the same input gives the same plan, byte for byte. Every tie is broken by the
 * total orders listed in docs/internals/scheduler.md, never by hash or map order.
 *
 * What is modelled, and what is refused, is in docs/internals/scheduler.md. In short: node
 * selectors, required and preferred node affinity (Karpenter's first term / heaviest preference,
 * relaxed one step at a time), tolerations, effective requests plus "pods: 1", DaemonSet
 * overhead per instance type, host ports, NodePool limits (pessimistic), minValues (Strict or
 * BestEffort), topology spread on any key, pod affinity and anti-affinity on any key (inverse
 * anti-affinity of bound and batch pods included), and Karpenter's preference relaxation order
 * (or PREFERENCE_POLICY=Ignore). Pods using what is not modelled (matchFields, a namespaceSelector
 * with expressions) fail with a reason saying so; they are never placed by guesswork.
 *
 * Lifetimes: the input is borrowed for the call; the plan borrows from the input too (names,
 * instance types, resource names), so the input must outlive the plan. Everything else in the
 * plan is owned by it (kp_sched_plan_done).
 *
 * Threads: pure; any thread, any number at once on distinct plans. */
#ifndef KP_CORE_PROVISIONING_SCHEDULER_H
#define KP_CORE_PROVISIONING_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "api/obj-pod.h"
#include "api/requirements.h"

struct kp_instance_type;
struct kp_nodepool_view;
struct kp_sched_prepared;

/* Karpenter's MaxInstanceTypes: options kept on one NodeClaim. */
#define KP_SCHED_MAX_INSTANCE_TYPES 600u
/* The resource name of the per-pod count every pod adds one of, and of a NodePool's node limit. */
#define KP_SCHED_RES_PODS "pods"
#define KP_SCHED_RES_NODES "nodes"
#define KP_LABEL_HOSTNAME "kubernetes.io/hostname"

/* A DaemonSet's pod template: what a node it runs on spends on it. From kp_daemonset_view
 * (api/obj-misc.h); host ports are the template's (none when the caller does not know them). */
struct kp_sched_daemon {
    const char *name;
    struct kp_resources requests; /* effective requests, without "pods: 1" (added here) */
    struct kp_labels node_selector;
    struct kp_tolerations tolerations;
    const struct kp_node_term *required; /* required node affinity terms (ORed) */
    size_t n_required;
    const struct kp_host_port *host_ports;
    size_t n_host_ports;
};

/* A node that exists, or an in-flight NodeClaim (launched or not, no Node yet: labels are the
 * single values of its requirements plus its stamped labels, allocatable from its status or its
 * instance type; initialized false). */
struct kp_sched_node {
    const char *name;     /* the Node's name (the NodeClaim's while there is no Node) */
    const char *nodepool; /* label karpenter.sh/nodepool; NULL for an unmanaged node */
    bool initialized;     /* unmanaged, or karpenter.sh/initialized */
    struct kp_labels labels;
    struct kp_taints taints;
    /* The NodeClaim's startup taints: while a managed node is not initialized these and the
     * known ephemeral taints (core/lifecycle/lifecycle.h) are not required to be tolerated. */
    struct kp_taints startup_taints;
    struct kp_resources allocatable;
    struct kp_resources capacity; /* counted against its NodePool's limits */
    /* The pods bound to it that hold resources (non-terminal; terminating ones included), with
     * their labels and anti-affinity for topology. */
    const struct kp_pod_view *const *pods;
    size_t n_pods;
};

/* A NodePool that may launch (managed, Ready, not deleting, not static: the caller's filter),
 * and the instance types its provider offers it (kp_instance_catalog v, n). */
struct kp_sched_pool {
    const struct kp_nodepool_view *np; /* name, requirements, labels, taints, weight, limits */
    const struct kp_instance_type *types;
    size_t n_types;
};

struct kp_sched_input {
    const struct kp_pod_view *const *pods; /* to place (provisionable, validated by the caller) */
    size_t n_pods;
    const struct kp_sched_node *nodes; /* existing Nodes */
    size_t n_nodes;
    const struct kp_sched_node *inflight; /* NodeClaims without a Node yet */
    size_t n_inflight;
    const struct kp_sched_pool *pools;
    size_t n_pools;
    const struct kp_sched_daemon *daemons;
    size_t n_daemons;
    size_t max_instance_types; /* 0: KP_SCHED_MAX_INSTANCE_TYPES */
    /* Karpenter's PREFERENCE_POLICY=Ignore: preferred node and pod (anti-)affinity and
     * ScheduleAnyway spreads play no part (false: Respect, the default). */
    bool ignore_preferences;
    /* Karpenter's MIN_VALUES_POLICY=BestEffort: a minValues the options cannot meet is lowered
     * to what they meet (the claim says so) instead of refusing the claim (false: Strict). */
    bool min_values_best_effort;
    /* Optional (NULL: none): what kp_sched_prepare_nodes computed once for a superset of nodes
     * and inflight, with the same daemons. The solve then borrows each node's set-up instead of
     * redoing it, and copies a node's mutable state only when it places a pod there; the plan is
     * the same byte for byte. prepared_of[i], for each input node i (nodes then inflight), is
     * that node's index in the prepared set (its nodes then its inflight); it must be strictly
     * increasing, and the node there must be the same one (same name, labels, pods, taints and
     * allocatable arrays). NULL: the identity (the input is exactly the prepared set). A
     * mismatch makes the solve fail with -EINVAL. */
    const struct kp_sched_prepared *prepared;
    const size_t *prepared_of;
};

/* One resource amount of a plan; name borrowed from the input. */
struct kp_sched_res {
    const char *name;
    int64_t milli;
};

/* A NodeClaim to create. */
struct kp_sched_claim {
    size_t pool; /* index into in->pools */
    /* NodePool requirements and labels narrowed by its pods and their topology (the internal
     * hostname placeholder removed), plus instance type In [the options]. */
    struct kp_reqset reqs;
    const struct kp_instance_type **types; /* options, cheapest compatible offering first */
    size_t n_types;
    struct kp_sched_res *requests; /* the pods' requests plus the least DaemonSet overhead */
    size_t n_requests;
    size_t *pods; /* indices into in->pods, in placement order */
    size_t n_pods;
    /* BestEffort lowered some minValues in reqs (annotation
     * karpenter.sh/nodeclaim-min-values-relaxed). */
    bool min_values_relaxed;
};

enum kp_sched_where {
    KP_SCHED_FAILED = 0,
    KP_SCHED_NODE,  /* index: into in->nodes, then in->inflight (n_nodes + i) */
    KP_SCHED_CLAIM, /* index: into plan->claims */
};

/* The outcome for one input pod (same index). */
struct kp_sched_result {
    enum kp_sched_where where;
    size_t index;
    unsigned relaxed; /* preference relaxation steps the placement needed */
    char *error;      /* KP_SCHED_FAILED: why (owned); else NULL */
};

struct kp_sched_plan {
    struct kp_sched_claim *claims;
    size_t n_claims;
    struct kp_sched_result *pods; /* in->n_pods entries */
    size_t n_pods;
};

/* Plans placements for in->pods. 0, -ENOMEM, -EOVERFLOW, -KP_ELIMIT or -EINVAL (a pod or
 * NodePool whose requirement values the sets refuse); a pod that cannot be placed is not an
 * error, its result says why. *ret is initialised here and filled on success only. */
int kp_sched_solve(const struct kp_sched_input *in, struct kp_sched_plan *ret)
    KP_NONNULL(1, 2) KP_WUR;
void kp_sched_plan_done(struct kp_sched_plan *p);

/* The per-node part of a solve's set-up that does not depend on the pods being placed, done
 * once for nodes and inflight (as in kp_sched_input) and the daemons every solve over it will
 * pass: each node's requirement set (labels plus hostname), the taints it must have tolerated,
 * its free resources after its bound pods, their host ports, the DaemonSet room it still owes,
 * and the order nodes are tried in. Many solves over subsets of these nodes (consolidation
 * leaves one or a few out per trial) then pay only for what they change. Everything passed is
 * borrowed and must outlive *ret and every solve using it. 0, -ENOMEM, -EOVERFLOW, -KP_ELIMIT or
 * -EINVAL (a label value the sets refuse; a solve without prepared state fails the same way);
 * *ret is written on success only. The result is immutable: any number of solves on any threads
 * may read it at once. */
int kp_sched_prepare_nodes(const struct kp_sched_node *nodes, size_t n_nodes,
                           const struct kp_sched_node *inflight, size_t n_inflight,
                           const struct kp_sched_daemon *daemons, size_t n_daemons,
                           struct kp_sched_prepared **ret) KP_NONNULL(7) KP_WUR;
/* Releases p; NULL-tolerant; returns NULL. */
struct kp_sched_prepared *kp_sched_prepared_free(struct kp_sched_prepared *p);

#endif
