/* core/lifecycle/lifecycle.h: Karpenter's NodeClaim lifecycle controller (nodeclaim.lifecycle):
 * finalizer, launch, registration, initialization, liveness and the NodeClaim's own deletion.
 *
 * One reconcile per NodeClaim name (cluster-scoped). Only NodeClaims whose nodeClassRef the
 * provider supports (kp_provider_supports) are touched; every other one belongs to another
 * controller. Node events come back as the NodeClaims with the Node's spec.providerID (index
 * KP_INDEX_NODECLAIM_PROVIDER_ID), or the NodeClaim of the Node's name.
 *
 * The decisions are the pure function kp_lifecycle_plan() (projection + matching Nodes + what
 * this reconcile already did + now + timing -> one action); the controller's reconcile is a
 * thin loop that performs the action, records its outcome in the plan's input, and plans again
 * until an action ends the reconcile. See plan.c and lifecycle.c for the rules.
 *
 * Threads: new, start, stop and free on the main thread (new during set-up, before the
 * informers start; free after they stopped); ready from any thread. Reconciles run on env->workers
 * workers; Create runs on the reconcile's worker under the reconcile's context, so a blocking
 * launch (an SSH join) holds one worker and ends when the process is told to stop. */
#ifndef KP_CORE_LIFECYCLE_LIFECYCLE_H
#define KP_CORE_LIFECYCLE_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "core/conds.h"
#include "core/core.h"

typedef struct json_t json_t;
struct kp_client;
struct kp_ctx;
struct kp_node_view;
struct kp_nodeclaim_view;
struct kp_provider;
struct kp_provider_err;
struct kp_provider_instance;
struct kp_taint;
struct kp_lifecycle_controller;

/* How long a successful Create's result is remembered per NodeClaim uid (Karpenter's 1 h): a
 * status write that failed after a launch must never launch a second instance. */
#define KP_LIFECYCLE_CACHE_TTL_USEC (3600ULL * 1000000ULL)
/* A Launched condition message longer than this is cut and ends in "..." (Karpenter's). */
#define KP_LIFECYCLE_MESSAGE_MAX 300
/* Workers when env->workers is 0 (core.h's default of 1 would let one blocking launch, an SSH
 * join of minutes, hold up every other claim's registration). */
#define KP_LIFECYCLE_WORKERS_DEFAULT 4u
/* The event reporting component Karpenter's events carry. */
#define KP_LIFECYCLE_COMPONENT "karpenter"

/* Event reasons (API: semantics section 7). */
#define KP_LIFECYCLE_EVENT_INSUFFICIENT_CAPACITY "InsufficientCapacityError"
#define KP_LIFECYCLE_EVENT_UNREGISTERED_TAINT_MISSING "UnregisteredTaintMissing"
#define KP_LIFECYCLE_EVENT_TGP_EXPIRING "TerminationGracePeriodExpiring"

/* --- the controller -------------------------------------------------------------------------- */

/* Registers on env->informers (NodeClaims: keys, provider-id index; Nodes: fan-out,
 * provider-id index). env and everything it points at must outlive the controller. 0, -EINVAL
 * (no client, informers or provider), -ENOMEM or the registry's errors; nothing stays registered
 * on failure (indexes aside, k8s/controller.h). */
int kp_lifecycle_controller_new(const struct kp_core_env *env,
                                struct kp_lifecycle_controller **ret) KP_WUR;
/* Starts the workers. 0 or -errno. */
int kp_lifecycle_controller_start(struct kp_lifecycle_controller *ctl) KP_WUR;
/* Cancels the reconciles in progress (a Create in flight ends RETRYABLE) and joins the workers.
 * Idempotent; NULL-safe. */
void kp_lifecycle_controller_stop(struct kp_lifecycle_controller *ctl);
/* Started, workers running, NodeClaim and Node informers synced. Any thread; NULL: false. */
bool kp_lifecycle_controller_ready(struct kp_lifecycle_controller *ctl);
/* Stops and frees; accepts and returns NULL. The informers must have stopped. */
struct kp_lifecycle_controller *kp_lifecycle_controller_free(struct kp_lifecycle_controller *ctl);

/* What a claim's launch and registration came to, for the NodePool's NodeRegistrationHealthy
 * condition (Karpenter's lifecycle feeds its NodePool health tracker from registration.go and
 * liveness.go; the tracker and the condition are core/nodepool's). Reported once per claim:
 * registered when its registration is written, or not when a liveness timeout deleted it. */
struct kp_lifecycle_outcome {
    const char *nodeclaim;
    const char *nodepool;     /* label karpenter.sh/nodepool; NULL for a standalone claim */
    const char *nodepool_uid; /* its ownerReference of kind NodePool; NULL when none */
    bool registered;
    bool launched;       /* !registered: whether it had launched (RegistrationFailed) or not */
    const char *reason;  /* !registered && !launched: Launched's reason and message */
    const char *message; /* (strings borrowed for the call) */
};
typedef void (*kp_lifecycle_outcome_fn)(void *ctx, const struct kp_lifecycle_outcome *o);
/* Sets the outcome callback (NULL: none). Main thread, before start. fn runs on the reconcile
 * workers, several at once: it must be thread-safe and must not block. */
void kp_lifecycle_controller_on_outcome(struct kp_lifecycle_controller *ctl,
                                        kp_lifecycle_outcome_fn fn, void *ctx) KP_NONNULL(1);

/* One reconcile of NodeClaim name, as a worker runs it once both informers have synced (the
 * worker checks that; tests call this directly with stores fed by hand). c is the caller's client; cx bounds the call (NULL: never ends). 0 (requeue in
 * *ret_requeue_usec, 0 for none), -KP_ECONFLICT (a lost race: come back soon), or an error
 * (retry with backoff; *ret_requeue_usec may still ask for sooner). */
int kp_lifecycle_reconcile(struct kp_lifecycle_controller *ctl, struct kp_client *c,
                           const struct kp_ctx *cx, const char *name,
                           uint64_t *ret_requeue_usec) KP_WUR;

/* --- the decisions (plan.c; pure, any thread) ------------------------------------------------- */

enum kp_lc_verb {
    KP_LC_NONE = 0,          /* nothing to write; come back after requeue_usec (0: on events) */
    KP_LC_ADD_FINALIZER,     /* CAS: metadata.finalizers += karpenter.sh/termination */
    KP_LC_LAUNCH,            /* provider Create (none cached for the uid) */
    KP_LC_DELETE,            /* delete the NodeClaim (uid precondition); reason names why */
    KP_LC_SYNC_NODE,         /* CAS on node: registration's sync (kp_lifecycle_node_patch) */
    KP_LC_LABEL_INITIALIZED, /* node: label karpenter.sh/initialized=true */
    KP_LC_WRITE_STATUS,      /* CAS: cs (+ the launch's fields and metadata), then requeue_usec */
    /* deletion (the NodeClaim has a deletionTimestamp and our finalizer) */
    KP_LC_ANNOTATE_TGP,     /* CAS: karpenter.sh/nodeclaim-termination-timestamp */
    KP_LC_DELETE_NODES,     /* delete every Node of nodes[] not yet deleting (uid precondition) */
    KP_LC_WAIT_NODES,       /* Nodes still there: wait for their termination */
    KP_LC_DELETE_INSTANCE,  /* provider Delete */
    KP_LC_REMOVE_FINALIZER, /* CAS: metadata.finalizers -= karpenter.sh/termination */
};
/* "Launch", "SyncNode", ...: for logs and test messages. */
const char *kp_lc_verb_name(enum kp_lc_verb v);

/* What this reconcile's provider Delete said. */
enum kp_lc_instance {
    KP_LC_INSTANCE_UNASKED = 0,
    KP_LC_INSTANCE_TERMINATING, /* Delete returned 0: releasing; ask again until NotFound */
    KP_LC_INSTANCE_GONE,        /* Delete answered NOT_FOUND */
};

struct kp_lifecycle_in {
    const struct kp_nodeclaim_view *nc;
    /* The Nodes whose spec.providerID is the NodeClaim's (kp_lifecycle_provider_id). */
    const struct kp_node_view *const *nodes;
    size_t n_nodes;
    /* Create's result for nc's uid (this reconcile's, or the launch cache's), or NULL. */
    const struct kp_provider_instance *launched;
    /* This reconcile's failed Create (kind, reason, message), or NULL. */
    const struct kp_provider_err *create_err;
    bool node_synced;  /* this reconcile performed KP_LC_SYNC_NODE */
    bool node_labeled; /* this reconcile performed KP_LC_LABEL_INITIALIZED */
    enum kp_lc_instance instance;
    int64_t now_usec;
    const struct kp_core_timing *timing; /* every field set (kp_core_timing_defaults) */
};

struct kp_lifecycle_action {
    enum kp_lc_verb verb;
    /* KP_LC_DELETE: the disrupted reason (KP_CM_REASON_*); static. */
    const char *reason;
    uint64_t requeue_usec;
    /* The NodeClaim's conditions as this reconcile leaves them (KP_LC_WRITE_STATUS writes them;
     * other verbs ignore them). Owned: kp_lifecycle_action_done(). */
    struct kp_condset cs;
    bool write_launch;     /* WRITE_STATUS: also providerID, capacity, allocatable and
                            * the launch's labels and annotations from in->launched */
    bool launch_failed;    /* WRITE_STATUS: Create failed; the reconcile still returns its error */
    bool registered_now;   /* WRITE_STATUS: Registered goes True (status.nodeName = node_name) */
    bool initialized_now;  /* WRITE_STATUS: Initialized goes True */
    const char *node_name; /* registered_now: the Node's name (points into in) */
    /* SYNC_NODE, LABEL_INITIALIZED: the Node (points into in). */
    const struct kp_node_view *node;
    bool taint_missing;        /* SYNC_NODE: the Node came without karpenter.sh/unregistered */
    int64_t tgp_deadline_usec; /* ANNOTATE_TGP: deletionTimestamp + terminationGracePeriod */
    /* LAUNCH: how long the Create may run: what is left of the launch timeout, counted from the
     * Launched condition's last transition (now when it has none yet), so a join that hangs is
     * cut off when the timeout says the claim is dead, not a whole timeout later. */
    uint64_t launch_budget_usec;
};

/* Decides the next action for in (see plan.c). *ret is overwritten (its cs initialised, so
 * kp_lifecycle_action_done() is always due). 0 or -ENOMEM. */
int kp_lifecycle_plan(const struct kp_lifecycle_in *in, struct kp_lifecycle_action *ret)
    KP_NONNULL(1, 2) KP_WUR;
void kp_lifecycle_action_done(struct kp_lifecycle_action *a);

/* The providerID the NodeClaim's Nodes are looked up by: status.providerID, else the launch's
 * (launched may be NULL). NULL when neither. */
const char *kp_lifecycle_provider_id(const struct kp_nodeclaim_view *nc,
                                     const struct kp_provider_instance *launched) KP_NONNULL(1);

/* Whether t is one of Karpenter's known ephemeral taints (not-ready NoSchedule/NoExecute,
 * unreachable NoSchedule, cloudprovider uninitialized NoSchedule, karpenter.sh/unregistered
 * NoExecute; matched by key and effect) or has a key under readiness.k8s.io/. */
bool kp_lifecycle_ephemeral_taint(const struct kp_taint *t) KP_NONNULL(1);

/* msg cut to KP_LIFECYCLE_MESSAGE_MAX bytes plus "..." when longer (never inside a UTF-8
 * sequence), as a new string; NULL gives "". NULL on -ENOMEM. */
char *kp_lifecycle_truncate(const char *msg) KP_WUR;

/* --- the writes' bodies (plan.c; pure) ---------------------------------------------------------- */

/* Registration's merge patch of node (without the resourceVersion; the caller's CAS adds it):
 * finalizer karpenter.sh/termination, an ownerReference to nc (karpenter.sh/v1 NodeClaim,
 * blockOwnerDeletion), nc's taints and startupTaints merged by key and effect (existing kept)
 * unless the Node says karpenter.sh/do-not-sync-taints=true (label, as Karpenter reads it, or
 * annotation), the karpenter.sh/unregistered taint removed, nc's labels and annotations merged
 * (nc's win), label karpenter.sh/registered=true. With launched (a launch of this reconcile
 * whose metadata is not on nc yet; NULL otherwise), also what kp_lifecycle_launch_patch adds to
 * nc. *ret is a new reference. 0 or -ENOMEM. */
int kp_lifecycle_node_patch(const struct kp_nodeclaim_view *nc,
                            const struct kp_provider_instance *launched,
                            const struct kp_node_view *node, json_t **ret)
    KP_NONNULL(1, 3, 4) KP_WUR;

/* The launch's metadata merge patch of nc: the instance's labels nc does not set (nc's own win)
 * and the instance's annotations (the instance's win). *ret is NULL when nothing changes, else a
 * new reference. 0 or -ENOMEM. */
int kp_lifecycle_launch_patch(const struct kp_nodeclaim_view *nc,
                              const struct kp_provider_instance *in, json_t **ret)
    KP_NONNULL(1, 2, 3) KP_WUR;

/* The status merge patch of a WRITE_STATUS action: conditions (all), and with write_launch
 * providerID, capacity, allocatable (the provider reports no image), with registered_now
 * nodeName. launched is in->launched (NULL unless write_launch). *ret is a new reference. 0 or
 * -ENOMEM. */
int kp_lifecycle_status_patch(const struct kp_lifecycle_action *a,
                              const struct kp_provider_instance *launched, json_t **ret)
    KP_NONNULL(1, 3) KP_WUR;

#endif
