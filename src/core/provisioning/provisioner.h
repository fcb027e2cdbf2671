/* core/provisioning/provisioner.h: Karpenter's provisioner: pending pods become
 * NodeClaims.
 *
 * A pod kube-scheduler marked Unschedulable triggers the batcher (batcher.h); when the window
 * closes a round runs: the round's pods (pods.h: pending provisionable pods, then the
 * reschedulable pods of Nodes marked for deletion), the scheduler's simulation (scheduler.h)
 * against the cluster state's Nodes and in-flight NodeClaims (core/state/cluster.h) and the
 * Ready NodePools of this provider with their instance types, and then what the plan says:
 * NodeClaims created from their NodePool's template (kp_provisioner_nodeclaim), existing nodes
 * nominated for 20 s, Nominated and FailedScheduling events on the pods,
 * karpenter_nodeclaims_created_total{reason="provisioned"}. A round is skipped while the
 * cluster state is not synced (a NodeClaim still launching has no capacity to count yet) and
 * while a NodeClaim it created is not in the cache yet, so a pod is never provisioned twice.
 * While pods stay pending a round runs again every KP_PROVISIONER_RETRY_USEC (Karpenter
 * re-triggers its provisionable pods on the same period).
 *
 * A deleting Node's pod that a PodDisruptionBudget fully blocks (pods.h
 * kp_podsel_reschedulable) is not provisioned for: it will not leave until the PDB changes.
 * The PDBs come from the shared PDB informer, listed once per round.
 *
 * DaemonSet overhead: the shared DaemonSet informer's DaemonSets, listed once per round
 * (simulation.h), are the scheduler's daemons, as Karpenter's getDaemonSetPods feeds its
 * scheduler. A DaemonSet counts on a NodePool's instance type only when its pod template
 * tolerates the NodePool's taints (PreferNoSchedule always) and its nodeSelector with one of
 * its required node affinity terms is compatible with the NodePool's requirements and
 * intersects the type's; on an existing node, when it tolerates the node's taints and its
 * nodeSelector and first term match the node's labels, less what its pods already bound there
 * request. A template with Dynamic Resource
 * Allocation claims is left out, as Karpenter does by default. Not modelled: Karpenter sizes a
 * DaemonSet by its newest existing pod when there is one (requests an admission webhook or a
 * LimitRange changed); kpssh reads the template only, its limits standing in for requests it
 * does not set, as Karpenter's PodForDaemonSet does.
 *
 * The controller is one key (KP_PROVISIONER_KEY) on a reconciler; the batcher's state machine
 * decides, under a mutex, whether a reconcile runs a round or requeues itself for the window's
 * end, so no worker sleeps in a window. Threads: informer handlers trigger and enqueue; one
 * worker reconciles. */
#ifndef KP_CORE_PROVISIONING_PROVISIONER_H
#define KP_CORE_PROVISIONING_PROVISIONER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_client;
struct kp_core_env;
struct kp_core_observer;
struct kp_nodepool_view;
struct kp_sched_claim;
typedef struct json_t json_t;

#define KP_PROVISIONER_KEY "provisioner"
/* How long a nominated existing node is kept from voluntary disruption (Karpenter's). */
#define KP_PROVISIONER_NOMINATION_USEC (20 * 1000000LL)
/* A round with pods left pending runs again after this long. */
#define KP_PROVISIONER_RETRY_USEC (10 * 1000000ULL)
/* Karpenter's event reasons on pods. */
#define KP_PROVISIONER_EVENT_NOMINATED "Nominated"
#define KP_PROVISIONER_EVENT_FAILED "FailedScheduling"
/* The annotation a NodeClaim whose minValues were lowered carries (BestEffort). */
#define KP_PROVISIONER_ANN_MIN_VALUES_RELAXED "karpenter.sh/nodeclaim-min-values-relaxed"

/* The NodeClaim object for one planned claim of NodePool np (Karpenter's NodeClaimTemplate
 * ToNodeClaim): generateName "<pool>-"; labels: the template's, karpenter.sh/nodepool, the node
 * class label, and the custom labels the requirements pin (a key that is not well-known with a
 * finite set of values gets the first of them); annotations: the template's, the NodePool hash
 * and its version, min-values-relaxed when set; an ownerReference to the NodePool; spec: the
 * narrowed requirements (with minValues; bounds as Gte/Lte), the planned requests, the
 * template's taints, startup taints, nodeClassRef, expireAfter and terminationGracePeriod.
 * Pure. 0, -ENOMEM, or -EINVAL (a NodePool without a uid, which an ownerReference needs). */
int kp_provisioner_nodeclaim(const struct kp_nodepool_view *np, const struct kp_sched_claim *c,
                             json_t **ret) KP_NONNULL(1, 2, 3) KP_WUR;

/* Creates the NodeClaim of planned claim sc of NodePool np (kp_provisioner_nodeclaim), logs
 * it and counts karpenter_nodeclaims_created_total{reason} ("provisioned", or a disruption's
 * replacement reason); its name in *ret_name (owned). 0, -ENOMEM, or the create's error. */
int kp_provisioner_create(struct kp_client *c, const struct kp_nodepool_view *np,
                          const struct kp_sched_claim *sc, const char *reason,
                          const struct kp_core_observer *observer, char **ret_name)
    KP_NONNULL(1, 2, 3, 4, 6) KP_WUR;

struct kp_provisioner_controller;

/* A stopped provisioner reading env's Pod, Node, NodeClaim, NodePool, PVC,
 * PodDisruptionBudget and DaemonSet informers and the cluster state env->cluster (which must be set); it is
 * ready once each of them has synced. Main thread, before the informers start.
 * 0, -EINVAL, -EBUSY, -ENOMEM. */
int kp_provisioner_controller_new(const struct kp_core_env *env,
                                  struct kp_provisioner_controller **ret) KP_WUR;
int kp_provisioner_controller_start(struct kp_provisioner_controller *ctl) KP_WUR;
void kp_provisioner_controller_stop(struct kp_provisioner_controller *ctl);
bool kp_provisioner_controller_ready(struct kp_provisioner_controller *ctl);
struct kp_provisioner_controller *
kp_provisioner_controller_free(struct kp_provisioner_controller *ctl);

#endif
