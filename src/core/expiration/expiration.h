/* core/expiration/expiration.h: Karpenter's nodeclaim.expiration controller.
 *
 * A NodeClaim of ours (kp_provider_supports on its nodeClassRef) whose spec.expireAfter is a
 * duration (not "Never", not absent) is deleted once now >= metadata.creationTimestamp +
 * expireAfter: forcefully, ignoring disruption budgets and do-not-disrupt (draining still honours
 * PDBs until the terminationGracePeriod, which is core/termination's job). The delete carries the
 * cached uid as a precondition, is logged ("deleting expired nodeclaim") and counted as
 * karpenter_nodeclaims_disrupted_total{reason="expired"}. Before that moment the key is requeued
 * at the expiry. A NodeClaim already being deleted is left alone.
 *
 * The reschedulable pods still bound to its Node (the pod cache's by-node index) are added to
 * karpenter_pods_disruption_initiated_total with the same labels.
 *
 * Replacement before the delete (env->expiry_replaces, set when the disruption loop of
 * core/disruption runs in the same process): an expired NodeClaim whose Node still holds
 * reschedulable pods is not deleted at once; for KP_EXPIRATION_REPLACE_GRACE_USEC past its
 * expiry it is the disruption loop's, which launches the NodeClaims its pods need, waits until
 * they are Initialized and then deletes it (budgets and do-not-disrupt still do not hold it
 * back; replacements that fail do not save it either). Only when that has not happened by the
 * end of the grace (the loop busy with another command, or not leading) does this controller
 * delete it, as Karpenter v1 does at once. Karpenter v1 deletes straight away and lets the
 * provisioner launch capacity for the evicted pods; launching first means the pods of an
 * expiring node do not wait pending for a host's install and join.
 *
 * The decision is the pure kp_expiration_plan (tests/unit/test-expiration.c); the controller is
 * a reconciler keyed by NodeClaim name on the shared NodeClaim informer (k8s/controller.h). */
#ifndef KP_CORE_EXPIRATION_EXPIRATION_H
#define KP_CORE_EXPIRATION_EXPIRATION_H

#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_core_env;
struct kp_nodeclaim_view;
struct kp_provider;

enum kp_expiration_action {
    KP_EXPIRATION_NONE = 0, /* not ours, deleting, or no expireAfter: nothing, no requeue */
    KP_EXPIRATION_WAIT,     /* not yet: requeue after requeue_usec */
    KP_EXPIRATION_DELETE,   /* expired: delete now */
};

struct kp_expiration_plan {
    enum kp_expiration_action action;
    uint64_t requeue_usec; /* WAIT only: until the expiry (at least 1) */
    int64_t expiry_usec;   /* WAIT and DELETE: when it expires (expired) */
};

/* How long past its expiry an expired NodeClaim whose pods need a place is left to the
 * disruption loop to replace first (see the top): longer than the loop's replacement timeout
 * (KP_DISRUPTION_REPLACE_TIMEOUT_USEC, 10 min), so a command the loop starts in time always
 * ends, by its delete, before this controller's. */
#define KP_EXPIRATION_REPLACE_GRACE_USEC (15ULL * 60 * 1000000ULL)

/* The decision for nc at now_usec. Pure; any thread. An expireAfter that does not parse is
 * treated as absent (the NodeClaim fails its validation; it is not ours to guess). */
struct kp_expiration_plan kp_expiration_plan(const struct kp_provider *p,
                                             const struct kp_nodeclaim_view *nc, int64_t now_usec)
    KP_NONNULL(1, 2);

/* For a DELETE plan: how long the delete still waits at now_usec for the disruption loop to
 * replace first: the rest of the grace when replaces and reschedulable > 0 (the pods bound to
 * the NodeClaim's Node), otherwise 0 (delete now); 0 for any other plan too. Pure. */
uint64_t kp_expiration_replace_wait(const struct kp_expiration_plan *plan, int64_t now_usec,
                                    bool replaces, uint32_t reschedulable) KP_NONNULL(1);

struct kp_expiration_controller;

/* A stopped controller registered on env's NodeClaim informer (key per NodeClaim). env is
 * borrowed and must outlive the controller; the informers must not have started. Main thread.
 * 0, -EINVAL (env without client, informers or provider), -EBUSY (informers started), -ENOMEM. */
int kp_expiration_controller_new(const struct kp_core_env *env,
                                 struct kp_expiration_controller **ret) KP_WUR;
int kp_expiration_controller_start(struct kp_expiration_controller *ctl) KP_WUR;
void kp_expiration_controller_stop(struct kp_expiration_controller *ctl);
/* Started, and the NodeClaim informer synced. Any thread; NULL: false. */
bool kp_expiration_controller_ready(struct kp_expiration_controller *ctl);
/* Stops and frees (after the informers have stopped); accepts and returns NULL. */
struct kp_expiration_controller *
kp_expiration_controller_free(struct kp_expiration_controller *ctl);

struct kp_client;
struct kp_ctx;

/* One reconcile of the NodeClaim called key, as a worker runs it (exposed for tests: a test
 * feeds the store and calls it with a client of its own). Returns as k8s/reconciler.h says: 0
 * (requeue in *ret_requeue, left alone when there is none), -KP_ECONFLICT (another incarnation:
 * decided again soon) or the delete's error. */
int kp_expiration_reconcile(struct kp_expiration_controller *ctl, struct kp_client *c,
                            const struct kp_ctx *cx, const char *key, uint64_t *ret_requeue) KP_WUR;

#endif
