/* core/termination/termination.h: Karpenter's Node termination controller ("node.termination"): what happens between a managed Node getting a deletionTimestamp and its
 * karpenter.sh/termination finalizer going.
 *
 * A Node is managed when it carries the finalizer and either its NodeClaim (the one NodeClaim
 * whose status.providerID is the Node's spec.providerID) names a node class the provider
 * supports, or it carries the karpenter.sh/nodepool label. For a managed Node being deleted,
 * each reconcile walks Karpenter's steps in order and stops at the first that must wait:
 *
 *   1. the NodeClaim exists and is not deleting: delete it (uid precondition), so deleting a
 *      Node cascades to its NodeClaim as deleting a NodeClaim cascades to its Node;
 *   2. the Node is not Ready and the provider's Get(providerID) says NOT_FOUND: the machine is
 *      gone, remove the finalizer at once (nothing left to drain or release);
 *   3. the termination deadline is the NodeClaim's karpenter.sh/nodeclaim-termination-timestamp
 *      annotation (event TerminationGracePeriodExpiring on the Node while it is set);
 *   4. taint karpenter.sh/disrupted:NoSchedule (replacing a same-key taint of another effect)
 *      and label node.kubernetes.io/exclude-from-external-load-balancers=karpenter (one CAS);
 *   5. drain (drain.h; by default Karpenter's: forced deletions past the deadline, evictions
 *      through the Eviction API by priority group): until drained, Drained=Unknown/Draining, Warning FailedDraining, poll
 *      every drain_retry; then at least min_drain after Draining began; then Drained=True and
 *      karpenter_nodes_drained_total;
 *   6. VolumeAttachments naming the Node (but those whose PV belongs to a pod that is not
 *      drainable): VolumesDetached=Unknown/AwaitingVolumeDetachment, event, poll; past the
 *      deadline VolumesDetached=False/TerminationGracePeriodElapsed and go on;
 *   7. provider Delete(NodeClaim) until it answers NOT_FOUND (InstanceTerminating=True, poll
 *      every delete_retry);
 *   8. remove the Node finalizer (CAS, other finalizers kept), karpenter_nodes_terminated_total,
 *      termination and lifetime durations, log "deleted node".
 *
 * Order (EKS Hybrid Nodes / SSH hosts): the Node object is what the cluster bills and counts;
 * the provider's Delete is what takes the machine out (for SSH: the leave script, which stops
 * kubelet and cleans the host). Step 8 is reachable only after step 7 has seen NOT_FOUND, so a
 * Node never disappears while its machine still runs a kubelet that could re-register it.
 *
 * The decisions are one pure function (kp_termination_plan) of the projections and the answers
 * the reconcile has collected so far; kp_termination_reconcile() is the thin executor a worker
 * runs per Node key. Conditions go to the NodeClaim in one CAS status write (core/writes.h) on
 * its cached resourceVersion; a lost race (-KP_ECONFLICT) requeues.
 *
 * Threads: new/start/stop/free and set_drainer on the main thread (new during set-up, before
 * the informers start); ready from any thread; reconciles on the controller's workers, one Node
 * key at a time each. The plan is pure. */
#ifndef KP_CORE_TERMINATION_TERMINATION_H
#define KP_CORE_TERMINATION_TERMINATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "api/obj.h"
#include "core/core.h"
#include "core/termination/drain.h"

struct kp_client;
struct kp_ctx;
struct kp_node_view;
struct kp_nodeclaim_view;
struct kp_pod_view;
struct kp_termination_controller;
struct kp_volumeattachment_view;

/* Karpenter's reasons (API). */
#define KP_TERM_REASON_DRAINING "Draining"
#define KP_TERM_REASON_AWAITING_VOLUMES "AwaitingVolumeDetachment"
#define KP_TERM_REASON_TGP_ELAPSED "TerminationGracePeriodElapsed"
#define KP_TERM_EVENT_FAILED_DRAINING "FailedDraining"
#define KP_TERM_EVENT_AWAITING_VOLUMES "AwaitingVolumeDetachment"
#define KP_TERM_EVENT_TGP_EXPIRING "TerminationGracePeriodExpiring"
#define KP_TERM_LB_EXCLUDE_VALUE "karpenter"

/* --- the decision ------------------------------------------------------------------------- */

/* An answer the executor has (or has not yet) collected for this reconcile. */
enum kp_term_answer {
    KP_TERM_ASK = 0, /* not asked yet: the plan asks for it when it gets there */
    KP_TERM_GONE,    /* Get / Delete answered NOT_FOUND */
    KP_TERM_PRESENT, /* Get found the instance */
    KP_TERM_DELETED, /* Delete returned 0: releasing; call again until NOT_FOUND */
};

struct kp_term_in {
    const struct kp_node_view *node;
    /* The Node's one NodeClaim by providerID; NULL when none or more than one (then no single
     * source of truth: Karpenter proceeds without one). */
    const struct kp_nodeclaim_view *nodeclaim;
    bool nodeclaim_supported; /* its nodeClassRef names a kind the provider serves */
    bool node_labelled_ours;  /* the Node carries karpenter.sh/nodepool and the label of a node
                              * class the provider serves, or a providerID of the provider's
                              * own form (kp_gc_node_labelled_ours) */
    const struct kp_pod_view *const *pods; /* every pod bound to the Node */
    size_t n_pods;
    const struct kp_volumeattachment_view *const *attachments; /* spec.nodeName == the Node */
    size_t n_attachments;
    /* PV names of the PVCs of the Node's pods that are not drainable (their attachments do not
     * block: the pods stay, so would the volumes). */
    const char *const *skip_pvs;
    size_t n_skip_pvs;
    int64_t now_usec;
    /* What this reconcile has done or learned so far (the executor fills these in and asks the
     * plan again). */
    bool nodeclaim_deleted;              /* step 1's delete was sent */
    enum kp_term_answer instance;        /* step 2's Get */
    bool tainted;                        /* step 4's patch went through */
    const struct kp_drain_result *drain; /* step 5's drainer answer; NULL: not asked */
    enum kp_term_answer deleted;         /* step 7's Delete */
};

enum kp_term_verb {
    KP_TERM_IGNORE = 0,       /* not ours, not deleting, or no finalizer: nothing to do */
    KP_TERM_DELETE_NODECLAIM, /* delete in->nodeclaim (uid precondition), then plan again */
    KP_TERM_GET_INSTANCE,     /* ask the provider's Get(providerID), then plan again */
    KP_TERM_TAINT,            /* CAS-patch the taint and label, then plan again */
    KP_TERM_DRAIN,            /* call the drainer, then plan again */
    KP_TERM_DELETE_INSTANCE,  /* call the provider's Delete(NodeClaim), then plan again */
    KP_TERM_WAIT,             /* write conditions, emit events, come back after requeue_usec */
    KP_TERM_FAIL,             /* write conditions, fail with error (backoff): bad annotation */
    KP_TERM_REMOVE_FINALIZER, /* write conditions, then remove the Node's finalizer */
};

/* One NodeClaim condition to set (status, reason and message as Karpenter's condition set
 * would: SetTrue is reason = type, message ""). */
struct kp_term_cond {
    const char *type;
    enum kp_cond_status status;
    const char *reason;
    const char *message;
};

/* One event on the Node. */
struct kp_term_event {
    bool warning;
    const char *reason;
    char note[512];
};

struct kp_term_action {
    enum kp_term_verb verb;
    uint64_t requeue_usec; /* KP_TERM_WAIT */
    int error;             /* KP_TERM_FAIL: the -errno to return */
    const char *why;       /* a short account for logs and tests (static) */
    int64_t deadline_usec; /* the termination deadline; 0: none */
    /* Conditions to set on in->nodeclaim (only with a NodeClaim; the executor skips a write
     * that changes nothing). */
    struct kp_term_cond conds[3];
    size_t n_conds;
    /* Events on the Node: TerminationGracePeriodExpiring first when the deadline is set. */
    struct kp_term_event events[2];
    size_t n_events;
};

/* The next step for in, under timing t (defaults filled). Pure. */
void kp_termination_plan(const struct kp_term_in *in, const struct kp_core_timing *t,
                         struct kp_term_action *ret) KP_NONNULL(1, 2, 3);

/* Whether in->node needs the disrupted taint or the load-balancer label (step 4). */
bool kp_termination_needs_taint(const struct kp_node_view *node) KP_NONNULL(1);

/* --- the controller ------------------------------------------------------------------------ */

/* Registers on env's informers (Nodes: keys; NodeClaims: mapped to their Node; pods,
 * VolumeAttachments, PVCs: read, with the indexes it uses). env is borrowed and must outlive
 * the controller. 0, -EINVAL (no client, informers or provider), -ENOMEM, or the registration
 * errors of k8s/controller.h. */
int kp_termination_controller_new(const struct kp_core_env *env,
                                  struct kp_termination_controller **ret) KP_WUR;
/* Replaces the drainer (default: the evicting drainer of drain.h; d borrowed, outlives the
 * controller). Before start. */
void kp_termination_controller_set_drainer(struct kp_termination_controller *tc,
                                           const struct kp_drainer *d) KP_NONNULL(1, 2);
int kp_termination_controller_start(struct kp_termination_controller *tc) KP_WUR;
void kp_termination_controller_stop(struct kp_termination_controller *tc);
bool kp_termination_controller_ready(struct kp_termination_controller *tc);
/* NULL-safe; returns NULL. After the informers have stopped. */
struct kp_termination_controller *
kp_termination_controller_free(struct kp_termination_controller *tc);

/* One reconcile of the Node called key, as a worker runs it (exposed for tests: a test feeds
 * the stores and calls it with a client of its own). Returns as k8s/reconciler.h says. */
int kp_termination_reconcile(struct kp_termination_controller *tc, struct kp_client *c,
                             const struct kp_ctx *cx, const char *key,
                             uint64_t *ret_requeue_usec) KP_WUR;

#endif
