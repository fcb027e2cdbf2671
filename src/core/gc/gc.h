/* core/gc/gc.h: Karpenter's nodeclaim.garbagecollection, and its mirror image
 * for Nodes, as one singleton loop.
 *
 * Every env timing gc_interval_usec, once the NodeClaim and Node caches have synced and the
 * provider's List has answered (nothing is decided on a failed or partial picture):
 *
 *   NodeClaims the provider lost. A NodeClaim of ours (kp_provider_supports) that is
 *   Registered=True, not being deleted, Launched more than KP_GC_LAUNCH_GRACE_USEC ago, and
 *   whose status.providerID is in no instance List returned: when its Node exists and is Ready,
 *   it is kept (the kubelet is alive, whatever the provider says); otherwise it is deleted (uid
 *   precondition), logged and counted as karpenter_nodeclaims_disrupted_total
 *   {reason="garbage_collected"}. Unregistered NodeClaims are the registration TTL's (lifecycle).
 *
 *   Nodes whose NodeClaim is gone (kpssh's own; Karpenter has no such loop). A Node of ours
 *   (its spec.providerID is one of the provider's instances, or it carries the
 *   karpenter.sh/nodepool label and the node class label <group>/<lowercase kind> of a kind the
 *   provider supports), not being deleted, older than env timing orphan_node_grace_usec, with
 *   no NodeClaim holding its providerID, and no NodeClaim named as the instance says it backs
 *   (or named as the Node): deleted (uid precondition) and logged, so the Node's termination
 *   runs and the machine is released. The name checks keep a NodeClaim whose launch returned
 *   but whose status.providerID is not written yet (or, in the SSH provider's Adopt mode, not
 *   known yet) from losing its Node.
 *
 * A collected NodeClaim also adds the reschedulable pods still bound to its Node (from the pod
 * cache's by-node index) to karpenter_pods_disruption_initiated_total, same labels.
 *
 * The decisions are pure (kp_gc_nodeclaim_plan, kp_gc_node_plan; tests/unit/test-gc.c); the
 * controller is one key ("gc") on a reconciler (k8s/controller.h) that requeues itself. */
#ifndef KP_CORE_GC_GC_H
#define KP_CORE_GC_GC_H

#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_core_env;
struct kp_node_view;
struct kp_nodeclaim_view;
struct kp_provider;
struct kp_provider_instance;

/* How long after Launched went True a registered NodeClaim is spared: a provider's List may
 * trail its own Create for a moment. */
#define KP_GC_LAUNCH_GRACE_USEC (10 * 1000000LL)
/* The singleton's key. */
#define KP_GC_KEY "gc"

/* Whether nc is to be garbage collected. listed: its providerID is among the provider's
 * instances. node: its Node (by providerID) from the cache, NULL when none. Pure. */
bool kp_gc_nodeclaim_plan(const struct kp_provider *p, const struct kp_nodeclaim_view *nc,
                          bool listed, const struct kp_node_view *node, int64_t now_usec)
    KP_NONNULL(1, 2);

/* Whether node carries karpenter.sh/nodepool and either the node class label of a kind p
 * supports or a providerID of p's own form (kp_provider_owns_provider_id). Termination asks the
 * same question, so a Node this collects is one termination lets go. */
bool kp_gc_node_labelled_ours(const struct kp_provider *p, const struct kp_node_view *node)
    KP_NONNULL(1, 2);

/* What the cache and the provider say about one Node. */
struct kp_gc_node_facts {
    /* The provider's instance whose providerID is the Node's spec.providerID, or NULL. */
    const struct kp_provider_instance *instance;
    bool claim_with_provider_id; /* some NodeClaim's status.providerID is the Node's */
    bool claim_named;            /* a NodeClaim named instance->nodeclaim or as the Node exists */
};

/* Whether node is an orphan to delete at now_usec with the grace (see the top). Pure. */
bool kp_gc_node_plan(const struct kp_provider *p, const struct kp_node_view *node,
                     const struct kp_gc_node_facts *facts, int64_t now_usec, uint64_t grace_usec)
    KP_NONNULL(1, 2, 3);

struct kp_gc_controller;

/* A stopped controller reading env's NodeClaim and Node informers (and adding the providerID
 * indexes of api/indexes.h to them). env is borrowed and outlives the controller; the
 * informers must not have started. Main thread. 0, -EINVAL, -EBUSY, -ENOMEM. */
int kp_gc_controller_new(const struct kp_core_env *env, struct kp_gc_controller **ret) KP_WUR;
/* Starts the workers and queues the first pass. 0 or -errno. */
int kp_gc_controller_start(struct kp_gc_controller *ctl) KP_WUR;
void kp_gc_controller_stop(struct kp_gc_controller *ctl);
bool kp_gc_controller_ready(struct kp_gc_controller *ctl);
struct kp_gc_controller *kp_gc_controller_free(struct kp_gc_controller *ctl);

struct kp_client;
struct kp_ctx;

/* One pass, as the worker runs it for KP_GC_KEY (exposed for tests: a test feeds the stores,
 * starts or leaves the informers and calls it with a client of its own). c is the caller's
 * client; cx bounds the provider's List (NULL: never ends). 0 (requeue in *ret_requeue: the
 * interval, or a second while a cache has not synced), or the List's or the last failed
 * delete's error (retry with backoff). */
int kp_gc_reconcile(struct kp_gc_controller *ctl, struct kp_client *c, const struct kp_ctx *cx,
                    uint64_t *ret_requeue) KP_WUR;

#endif
