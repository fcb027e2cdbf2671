/* core/provisioning/pods.h: which pods a provisioning round schedules.
 *
 * Karpenter's provisioner (pkg/controllers/provisioning/provisioner.go) builds each round's pod
 * list from two sources:
 *
 *  1. pending pods: every pod Karpenter's IsProvisionable accepts (pkg/utils/pod/scheduling.go)
 *     and its Validate() does not refuse. A refused pod is ignored for the round, recorded in
 *     cluster state as "ignoring pod, <why>", counted in karpenter_scheduler_ignored_pods_count
 *     and, unless it only asked to stay off Karpenter's nodes, told so by a FailedScheduling
 *     event "Failed to schedule pod, <why>";
 *  2. the currently reschedulable pods of the Nodes being deleted or marked for deletion
 *     (pkg/utils/pdb IsCurrentlyReschedulable), so their replacements are provisioned before
 *     the drain evicts them.
 * Pods with Dynamic Resource Allocation claims are refused from both (Karpenter's scheduler
 * does so while IGNORE_DRA_REQUESTS, its default, holds; kpssh never models DRA).
 *
 * Everything here is a pure function of projections (api/obj-pod.h, api/obj-misc.h) and the
 * time; no I/O, no logging, no metrics. Any thread. See docs/internals/provisioning.md. */
#ifndef KP_CORE_PROVISIONING_PODS_H
#define KP_CORE_PROVISIONING_PODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_pdb_view;
struct kp_pod_view;
struct kp_pvc_view;

/* The gauge Karpenter sets to the number of pending pods validation refused in the last round
 * (struct kp_podsel_round.ignored). Not registered here. */
#define KP_PODSEL_METRIC_IGNORED "karpenter_scheduler_ignored_pods_count"
/* Prefixes Karpenter puts before the reason: in cluster state (and its log line), and in the
 * FailedScheduling event's message. */
#define KP_PODSEL_IGNORED_PREFIX "ignoring pod, "
#define KP_PODSEL_EVENT_PREFIX "Failed to schedule pod, "
#define KP_PODSEL_EVENT_REASON "FailedScheduling"

/* Why a pod is not provisionable: the first of Karpenter's IsProvisionable checks that fails,
 * in its order. Such a pod is simply not Karpenter's business (no event, no count). */
enum kp_podsel_skip {
    KP_PODSEL_PROVISIONABLE = 0,
    KP_PODSEL_NOT_UNSCHEDULABLE, /* kube-scheduler has not marked it PodScheduled/Unschedulable */
    KP_PODSEL_BOUND,             /* spec.nodeName is set */
    KP_PODSEL_PREEMPTING,        /* status.nominatedNodeName is set: it waits for a preemption */
    KP_PODSEL_DAEMONSET,         /* owned by an apps/v1 DaemonSet */
    KP_PODSEL_STATIC,            /* owned by a v1 Node: a static pod's mirror */
};
/* Karpenter's IsProvisionable, saying which check failed. Terminal and terminating pods are not
 * excluded (nor are they by Karpenter: an unbound pod is deleted at once unless a finalizer
 * holds it, and kube-scheduler keeps marking it Unschedulable until then). */
enum kp_podsel_skip kp_podsel_provisionable(const struct kp_pod_view *p) KP_NONNULL(1);
/* A short static phrase for logs and tests ("not marked unschedulable", ...). */
const char *kp_podsel_skip_name(enum kp_podsel_skip s);

/* The verdict on a provisionable pod. */
enum kp_podsel_verdict {
    KP_PODSEL_VALID = 0,
    /* Its requirements make karpenter.sh/nodepool DoesNotExist: it means to avoid Karpenter's
     * nodes. Ignored and counted, no event. */
    KP_PODSEL_AVOIDS_KARPENTER,
    /* Validation refused it (restricted label, matchFields, a value that cannot be a label,
     * a negative Gt/Lt bound, no known capacity type, a claim that cannot be used). Ignored,
     * counted, FailedScheduling. */
    KP_PODSEL_INVALID,
    /* It has DRA claims. Not scheduled, FailedScheduling, not counted as ignored. */
    KP_PODSEL_DRA,
};

/* How validation finds a pod's PersistentVolumeClaims (the caller's PVC store): get returns the
 * claim ns/name or NULL when there is none; the view must stay valid for the call. */
struct kp_podsel_pvcs {
    const struct kp_pvc_view *(*get)(void *ctx, const char *ns, const char *name);
    void *ctx;
};

/* Karpenter's Validate(), then its DRA refusal, of one provisionable pod. Returns the verdict
 * (>= 0) or -ENOMEM. For a verdict other than KP_PODSEL_VALID, ret_msg (optional, base/err.h)
 * receives the reason without prefix, Karpenter's wording: every problem found, joined by "; "
 * (e.g. "configured to not run on a Karpenter provisioned node"); it may stay NULL when the
 * text could not be allocated, the verdict stands. Requirements the API server already refuses
 * (unsupported operators, keys that are no qualified names, In without values) cannot reach a
 * projection and are not checked again.
 *
 * With pvcs (NULL: no volume checks), the first of the pod's persistentVolumeClaim volumes that
 * fails one of Karpenter's claim checks is reported: the claim is missing, being deleted, Lost,
 * bound (volumeName set) without the pv.kubernetes.io/bind-completed mark, or unbound without a
 * storage class. Not made (they need projections kpssh does not have): the bound volume's
 * PersistentVolume exists and is not being deleted; an unbound claim's StorageClass exists, does
 * not bind Immediate, has no unsupported topology key; the CSI provisioner is supported; generic
 * ephemeral volumes (the projection lists persistentVolumeClaim volumes only). */
int kp_podsel_validate(const struct kp_pod_view *p, const struct kp_podsel_pvcs *pvcs,
                       char **ret_msg) KP_NONNULL(1) KP_WUR;

/* Karpenter's IsCurrentlyReschedulable at now_usec (realtime, as status.startTime): the pod is
 * reschedulable (active, or a terminating StatefulSet pod; not owned by a DaemonSet or a Node),
 * has no active do-not-disrupt (unless it is no longer active), and no PodDisruptionBudget of
 * pdbs fully blocks its eviction (maxUnavailable 0 or "0%", or minAvailable "100%"; more than one
 * PDB selecting it blocks too, as the Eviction API refuses that). A pod that would not be
 * evicted anyway (not active, tolerates karpenter.sh/disrupted:NoSchedule, owned by a Node, or
 * do-not-disrupt) is not held back by PDBs; nor is one that is not Ready (Ready=False) under a
 * PDB that always allows unhealthy pods to go. */
bool kp_podsel_reschedulable(const struct kp_pod_view *p, const struct kp_pdb_view *const *pdbs,
                             size_t n_pdbs, int64_t now_usec) KP_NONNULL(1);

/* PodDisruptionBudget lists. Every function here that takes pdbs[0..n_pdbs) (NULL, 0: none)
 * matches a PDB to a pod as Karpenter's pkg/utils/pdb does: same namespace, and the PDB's
 * spec.selector matches the pod's labels (an absent selector matches no pod, an empty one every
 * pod of its namespace, as metav1.LabelSelectorAsSelector makes them). When pdbs is in
 * kp_pdbs_sort's order, a pod's PDBs are found by binary search on its namespace, so a pod
 * costs O(log n_pdbs + the PDBs of its namespace); in any other order the answers are the same
 * but each pod looks at every PDB. A caller asking about many pods (a round, a node's pods)
 * sorts its list once. */

/* Sorts pdbs[0..n) by namespace, then name. Pure; any thread. */
void kp_pdbs_sort(const struct kp_pdb_view **pdbs, size_t n);

/* The sentences of Karpenter's ValidatePodsDisruptable (pkg/controllers/state/statenode.go) when
 * its PDB check refuses a node, as the error reads (its DisruptionBlocked event capitalises the
 * first letter, pretty.Sentence). The keys are "namespace/name"; Karpenter wraps them with
 * serrors.Wrap, whose text is "<message> (<key>=<value>)", and the value is a
 * []client.ObjectKey, which Go's %v prints as "[ns/a ns/b]", so even one key is in brackets
 * (Karpenter's own tests expect "pdb prevents pod evictions (PodDisruptionBudget=[ns/name])"). */
#define KP_PDB_MSG_PREVENTS "pdb prevents pod evictions"
#define KP_PDB_MSG_MULTIPLE "eviction does not support multiple PDBs"

/* Karpenter's CanEvictPods (pkg/utils/pdb/pdb.go): whether every pod of pods[0..n) could be
 * evicted now as far as PDBs go, which a node needs to be a candidate for voluntary disruption
 *. A pod that would never be evicted (not active: terminal or terminating;
 * tolerating karpenter.sh/disrupted:NoSchedule; owned by a Node; an active do-not-disrupt at
 * now_usec) never blocks. Otherwise the first pod, in the order of pods, that
 *  - more than one PDB selects blocks (the Eviction API refuses such a pod whatever the PDBs
 *    allow): "eviction does not support multiple PDBs (PodDisruptionBudget(s)=[ns/a ns/b])",
 *    the PDBs in the order of pdbs (by name when sorted; Karpenter's is its cache's);
 *  - one PDB selects that has status.disruptionsAllowed 0 blocks, unless the PDB's
 *    unhealthyPodEvictionPolicy is AlwaysAllow and the pod's Ready condition is False:
 *    "pdb prevents pod evictions (PodDisruptionBudget=[ns/name])".
 * Returns that sentence written into buf[size] (cut short when it does not fit; "" when size is
 * 0), or NULL when no pod is blocked. The do-not-disrupt sentence Karpenter checks first is not
 * this function's. Pure; any thread. */
const char *kp_pdbs_block_eviction(const struct kp_pod_view *const *pods, size_t n,
                                   const struct kp_pdb_view *const *pdbs, size_t n_pdbs,
                                   int64_t now_usec, char *buf, size_t size) KP_NONNULL(6);

/* One round's input; everything borrowed for the call. */
struct kp_podsel_input {
    /* Pods that may be pending: every unbound pod of the cache, in any order (each is checked
     * against kp_podsel_provisionable, so passing more is harmless). */
    const struct kp_pod_view *const *pending;
    size_t n_pending;
    /* The pods bound to Nodes marked for deletion, captured after the pending ones (semantics
     * §4.2: prefer under- to over-provisioning). */
    const struct kp_pod_view *const *deleting;
    size_t n_deleting;
    /* The PDBs the deleting Nodes' pods are checked against (kp_podsel_reschedulable); best in
     * kp_pdbs_sort's order (see there). NULL, 0: none. */
    const struct kp_pdb_view *const *pdbs;
    size_t n_pdbs;
    int64_t now_usec;                  /* realtime */
    const struct kp_podsel_pvcs *pvcs; /* NULL: no volume checks (kp_podsel_validate) */
};

/* A pod the round leaves out, and why. */
struct kp_podsel_refused {
    const struct kp_pod_view *pod; /* borrowed from the input */
    enum kp_podsel_verdict verdict;
    bool from_deleting; /* a reschedulable pod of a deleting Node (DRA only) */
    char *message;      /* owned; the reason without prefix; NULL if it could not be made */
};

/* One round's pods. */
struct kp_podsel_round {
    /* What the scheduler gets: the accepted pending pods in input order, then the accepted
     * reschedulable pods of deleting Nodes in input order. Borrowed from the input. */
    const struct kp_pod_view **pods;
    size_t n_pods;
    size_t n_pending;                  /* pods[0 .. n_pending) are the pending ones */
    struct kp_podsel_refused *refused; /* in input order, pending first */
    size_t n_refused;
    size_t skipped;     /* pending candidates that were not provisionable at all */
    size_t not_resched; /* deleting-node pods that are not currently reschedulable */
    size_t ignored;     /* AVOIDS_KARPENTER + INVALID: the value of KP_PODSEL_METRIC_IGNORED */
};

/* Selects the round's pods. 0, or -ENOMEM (nothing is filled). *ret is initialised here; release
 * it with kp_podsel_round_done(). */
int kp_podsel_select(const struct kp_podsel_input *in, struct kp_podsel_round *ret)
    KP_NONNULL(1, 2) KP_WUR;
/* Releases a round's arrays and messages (not the pods); NULL-safe; *r is zeroed. */
void kp_podsel_round_done(struct kp_podsel_round *r);

/* Whether the refused pod gets a FailedScheduling event (all but KP_PODSEL_AVOIDS_KARPENTER). */
static inline bool kp_podsel_verdict_has_event(enum kp_podsel_verdict v)
{
    return v == KP_PODSEL_INVALID || v == KP_PODSEL_DRA;
}

#endif
