/* provider/ssh/nodeclassctl.h: the SSHNodeClass controller: the Ready condition and the
 * termination finalizer (docs/operations.md, "Node-class readiness").
 *
 * Ready is True when the class passes its CRD rules, its SSHJoinProfile exists and validates
 * (a leave script mentioning KPSSH_VAR_ or KPSSH_SECRET_ is invalid: leave runs without a node
 * class), its hostSelector
 * builds and selects at least one SSHHost of the pool namespace (any state). Otherwise False,
 * with the first failing check's reason, in this order:
 *
 *   NodeClassInvalid   the class fails kp_sshnodeclass_validate() (a selector that does not
 *                      build, alone, is SelectorError below)
 *   ProfileNotFound    SSHJoinProfile "<name>" not found
 *   ProfileInvalid     the profile fails kp_profile_validate_view() (message: its report)
 *   SelectorError      spec.hostSelector does not build
 *   NoHosts            no SSHHost of the pool namespace matches spec.hostSelector
 *
 * The condition is a metav1.Condition (type, status, reason, message, observedGeneration,
 * lastTransitionTime, which moves only when status changes). status.conditions is the only
 * status field the CRD defines. The finalizer KP_SSH_NODECLASS_FINALIZER is added to every
 * class and removed once it is being deleted and no NodeClaim references it. Every write is a
 * compare-and-swap: a merge patch carrying metadata.resourceVersion (status subresource for the
 * condition, the object for the finalizer). Transitions of Ready are reported as events on the
 * SSHNodeClass.
 *
 * The decisions are pure functions (kp_nodeclass_ready_compute and friends, tested in
 * tests/unit/test-nodeclassctl.c); struct kp_ssh_nodeclassctl wires them to informers and a
 * reconciler (k8s/reconciler.h). */
#ifndef KP_PROVIDER_SSH_NODECLASSCTL_H
#define KP_PROVIDER_SSH_NODECLASSCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "api/obj.h"

struct kp_buf;
struct kp_client;
struct kp_events;
struct kp_informer;
struct kp_labels;
struct kp_sshjoinprofile_view;
struct kp_sshnodeclass_view;

#define KP_SSH_NODECLASS_FINALIZER "karpenter.kpssh.dev/termination"
#define KP_SSH_NODECLASS_CONDITION_READY "Ready"
/* reportingController of the events this controller writes (and of the recorder it makes when
 * the options give none). */
#define KP_SSH_NODECLASSCTL_COMPONENT "kpssh-nodeclass-status"

#define KP_NODECLASS_REASON_READY "Ready"
#define KP_NODECLASS_REASON_INVALID "NodeClassInvalid"
#define KP_NODECLASS_REASON_PROFILE_NOT_FOUND "ProfileNotFound"
#define KP_NODECLASS_REASON_PROFILE_INVALID "ProfileInvalid"
#define KP_NODECLASS_REASON_SELECTOR_ERROR "SelectorError"
#define KP_NODECLASS_REASON_NO_HOSTS "NoHosts"

/* Longest condition message written (the CRD allows 32768); longer ones are cut. */
#define KP_NODECLASS_MAX_MESSAGE (16u * 1024u)

/* --- pure decisions (any thread, no I/O) ------------------------------------------------------ */

/* What the Ready condition should say. reason points to a static string; message is owned. */
struct kp_nodeclass_ready {
    enum kp_cond_status status; /* KP_COND_TRUE or KP_COND_FALSE */
    const char *reason;
    char *message; /* "" when Ready */
};
void kp_nodeclass_ready_done(struct kp_nodeclass_ready *r);

/* Computes Ready for nc. profile: the class's SSHJoinProfile from the cache, NULL when there is
 * none. n_hosts: how many SSHHosts of the pool namespace the class selects
 * (kp_inventory_member); only whether it is 0 matters. pool_ns names the namespace in the
 * NoHosts message. 0 or -ENOMEM (*ret untouched then). */
int kp_nodeclass_ready_compute(const struct kp_sshnodeclass_view *nc,
                               const struct kp_sshjoinprofile_view *profile, size_t n_hosts,
                               const char *pool_ns, struct kp_nodeclass_ready *ret)
    KP_NONNULL(1, 4, 5) KP_WUR;

/* True when nc's cached Ready condition differs from want in status, reason, message or
 * observedGeneration (= nc's generation): a status write is needed. */
bool kp_nodeclass_ready_differs(const struct kp_sshnodeclass_view *nc,
                                const struct kp_nodeclass_ready *want) KP_NONNULL(1, 2);

/* Appends the status merge patch (JSON text) to out: metadata.resourceVersion = rv and
 * status.conditions = [Ready] with observedGeneration = nc's generation and lastTransitionTime =
 * the cached one when the status is unchanged, else now_usec (realtime). Bytes outside printable
 * ASCII in the message become '?'. 0, -EINVAL (empty rv), -ENOMEM, -KP_ELIMIT. */
int kp_nodeclass_status_patch(const struct kp_sshnodeclass_view *nc, const char *rv,
                              const struct kp_nodeclass_ready *want, uint64_t now_usec,
                              struct kp_buf *out) KP_NONNULL(1, 2, 3, 5) KP_WUR;

/* True when nc carries KP_SSH_NODECLASS_FINALIZER. */
bool kp_nodeclass_has_finalizer(const struct kp_sshnodeclass_view *nc) KP_NONNULL(1);

/* Appends the finalizer merge patch (JSON text) to out: metadata.resourceVersion = nc's and
 * metadata.finalizers = nc's with ours added (add) or removed (!add), other finalizers kept in
 * order. 0, -EINVAL (no rv), -ENOMEM, -KP_ELIMIT. */
int kp_nodeclass_finalizer_patch(const struct kp_sshnodeclass_view *nc, bool add,
                                 struct kp_buf *out) KP_NONNULL(1, 3) KP_WUR;

/* True when an SSHHost update can change which classes select it (labels or namespace). */
bool kp_nodeclass_host_labels_changed(const struct kp_labels *a, const struct kp_labels *b)
    KP_NONNULL(1, 2);

/* --- the controller --------------------------------------------------------------------------- */

struct kp_ssh_nodeclassctl_opts {
    const char *pool_namespace; /* SSHHosts live here (copied) */
    struct kp_client *client;   /* cloned per worker; must outlive start() */
    struct kp_informer *nodeclasses, *profiles, *hosts, *nodeclaims; /* not yet started */
    struct kp_events *events; /* optional: a recorder with reportingController
                               * KP_SSH_NODECLASSCTL_COMPONENT; NULL: the controller makes its
                               * own from client */
    unsigned workers;         /* 0: 1 */
};

struct kp_ssh_nodeclassctl;

/* A stopped controller (on the skeleton of k8s/controller.h). Adds its handlers to the four
 * informers and the NodeClaim class index (provider/ssh/indexes.h) plus a profile index to the
 * node-class informer; the informers must not have started and must outlive the controller. On
 * an error nothing stays registered. Call on the main thread.
 * 0, -EINVAL (missing option), -EBUSY (an informer started), -ENOMEM. */
int kp_ssh_nodeclassctl_new(const struct kp_ssh_nodeclassctl_opts *o,
                            struct kp_ssh_nodeclassctl **ret) KP_WUR;
/* Starts the workers (after or before the informers; keys queue up until they sync). 0 or
 * -errno. Main thread. */
int kp_ssh_nodeclassctl_start(struct kp_ssh_nodeclassctl *ctl) KP_WUR;
/* Lets the workers finish the key in hand and joins them. Idempotent. Main thread. */
void kp_ssh_nodeclassctl_stop(struct kp_ssh_nodeclassctl *ctl);
/* True once started and its four informers have synced (a /readyz check). Any thread. */
bool kp_ssh_nodeclassctl_ready(struct kp_ssh_nodeclassctl *ctl);
/* Stops, takes its handlers back out of the informers and frees; accepts and returns NULL.
 * Free it only after the informers have stopped (and before they are freed). */
struct kp_ssh_nodeclassctl *kp_ssh_nodeclassctl_free(struct kp_ssh_nodeclassctl *ctl);

/* The reconcile step for one class (the reconciler calls it; tests may too). */
int kp_ssh_nodeclassctl_reconcile(struct kp_ssh_nodeclassctl *ctl, struct kp_client *c,
                                  const char *name, uint64_t *ret_requeue_usec) KP_WUR;

#endif
