/* core/provisioning/simulation.h: the scheduler's input built from the cluster state, once per
 * snapshot, for every caller that asks "where would these pods go?": the provisioner (pending
 * pods onto existing nodes and new NodeClaims) and consolidation (the same question with some
 * nodes taken away and their pods moving).
 *
 * kp_sim_build reads one cluster-state snapshot (borrowed) and the caches: every state node with
 * a Node that is not marked for deletion becomes an existing node with its bound pods; every
 * NodeClaim without a Node an in-flight node; the Ready NodePools of this provider come with
 * their instance types; the unbound pods of the Pod cache are the pending candidates; the
 * PodDisruptionBudgets (when the sources have them) decide which deleting or moving pods are
 * currently reschedulable (pods.h kp_podsel_reschedulable: a fully blocked pod stays); the
 * DaemonSets (when the sources have them) are every input's daemons, so a new node is sized
 * with the DaemonSet pods it will run and an existing node keeps room for those not running on
 * it yet (the scheduler decides per NodePool and instance type which of them would). Then
 * kp_sim_prepare picks one simulation's pods and nodes: the pending pods, the pods of nodes
 * marked for deletion, and the pods of the nodes named as moving (Karpenter's
 * SimulateScheduling: candidates' pods are migrating like a deleting node's), all through
 * kp_podsel_select; the moving nodes are left out of the destinations. Several prepares may run
 * over one build (consolidation tries many candidate sets); each is released on its own.
 *
 * Index spaces: a prepared input's nodes are the build's existing nodes minus the moving ones,
 * then the in-flight ones; run->snap_of maps each input node (nodes then in-flight) back to its
 * snapshot index. The build also sets up the scheduler's per-node state once
 * (kp_sched_prepare_nodes), and every prepared input points at it (in->prepared), so a solve
 * does not redo it for every node each trial.
 *
 * Threads: one thread owns a build and its prepares; the snapshot and the caches' entries are
 * held by reference, so they stay valid whatever the informers do meanwhile. */
#ifndef KP_CORE_PROVISIONING_SIMULATION_H
#define KP_CORE_PROVISIONING_SIMULATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "k8s/store.h"
#include "core/provisioning/pods.h"
#include "core/provisioning/scheduler.h"

struct kp_client;
struct kp_core_env;
struct kp_ctx;
struct kp_instance_catalog;
struct kp_state_snapshot;

/* Where a build reads from; all borrowed. pvcs NULL: no volume checks; pdbs NULL: no
 * PodDisruptionBudgets (every deleting or moving pod that pods.h finds reschedulable without
 * PDBs moves); daemonsets NULL: no DaemonSet overhead. */
struct kp_sim_sources {
    const struct kp_core_env *env; /* provider, clock */
    struct kp_store *pods, *nodepools, *pvcs, *pdbs, *daemonsets;
};

struct kp_sim {
    const struct kp_sim_sources *src;
    const struct kp_state_snapshot *snap; /* borrowed */
    struct kp_store_list pods_all;        /* every pod (the pending ones are picked from it) */
    struct kp_store_list *bound;          /* per snapshot node: its pods */
    const struct kp_pod_view **pending;   /* unbound pod views */
    size_t n_pending;
    /* Existing nodes (snapshot nodes with a Node, not marked for deletion) and in-flight
     * NodeClaims, with their snapshot indices and providerIDs. */
    struct kp_sched_node *nodes, *inflight;
    size_t n_nodes, n_inflight;
    size_t *node_snap, *inflight_snap;
    const struct kp_pod_view ***node_pods; /* per existing node: bound pod views */
    struct kp_label **lab_own;             /* per in-flight node: its labels array */
    struct kp_store_list pools_l;
    struct kp_sched_pool *pools;
    struct kp_instance_catalog **cats;
    size_t n_pools;
    struct kp_entry **pvc_refs; /* the PVCs validation read, held until kp_sim_done */
    size_t n_pvc_refs;
    /* Every PodDisruptionBudget, listed once per build and held until kp_sim_done; the views
     * in kp_pdbs_sort's order, as every prepare's pod selection reads them. */
    struct kp_store_list pdbs_l;
    const struct kp_pdb_view **pdbs;
    size_t n_pdbs;
    /* Every DaemonSet, listed once per build and held until kp_sim_done, as the scheduler's
     * daemons in key order (namespace/name); those with Dynamic Resource Allocation claims are
     * left out, as Karpenter leaves out such pods (IGNORE_DRA_REQUESTS, its default). */
    struct kp_store_list daemonsets_l;
    struct kp_sched_daemon *daemons;
    size_t n_daemons;
    /* The scheduler's per-node set-up of nodes and inflight, made once per build so that each
     * prepare's solve borrows it (NULL when a node's labels are invalid: the solves then set
     * every node up themselves and report it, as before). */
    struct kp_sched_prepared *prep;
};

/* Builds sim from snap (borrowed; must outlive sim) and src. c and cx are for the provider's
 * instance types. 0, -ENOMEM, or a store error; sim is released by kp_sim_done either way. */
int kp_sim_build(const struct kp_sim_sources *src, const struct kp_state_snapshot *snap,
                 struct kp_client *c, const struct kp_ctx *cx, struct kp_sim *sim)
    KP_NONNULL(1, 2, 5) KP_WUR;
void kp_sim_done(struct kp_sim *sim);

/* One simulation's input over a build. */
struct kp_sim_run {
    struct kp_podsel_round sel;       /* the pods, pending first */
    const struct kp_pod_view **moved; /* pods of deleting and moving nodes */
    size_t n_moved;
    struct kp_sched_node *nodes; /* the build's existing nodes minus the moving ones */
    size_t n_nodes;
    size_t *snap_of;           /* per input node (nodes then in-flight): snapshot index */
    size_t *prep_of;           /* per input node: its index in sim->prep (in->prepared_of) */
    struct kp_sched_plan plan; /* filled by the caller's kp_sched_solve */
};

/* Prepares *in over sim: moving[0..n_moving) are snapshot indices of nodes whose pods move and
 * which are no destination (NULL, 0: none). 0 or -ENOMEM. *run is released by
 * kp_sim_run_done either way. */
int kp_sim_prepare(struct kp_sim *sim, const size_t *moving, size_t n_moving, int64_t now_usec,
                   struct kp_sim_run *run, struct kp_sched_input *in) KP_NONNULL(1, 5, 6) KP_WUR;
void kp_sim_run_done(struct kp_sim_run *run);

#endif
