/* core/provider.h: the interface between the Karpenter-compatible core and a provider (the
 * equivalent of Karpenter's CloudProvider). The core owns NodePools, NodeClaims, Nodes,
 * scheduling and disruption; a provider owns the machines. The core calls a provider through
 * struct kp_provider_ops and never sees how machines are found, joined or released; kpssh has
 * one provider (provider/ssh/provider.h), tests may have fakes.
 *
 * Lifecycle split, as in Karpenter: Create launches (the NodeClaim becomes Launched when it
 * returns); waiting for the Node to register, initialise and become Ready is the core's
 * lifecycle job, with Karpenter's registration timeout, after which the core deletes the
 * NodeClaim and Delete returns the machine. A provider may wait inside Create only for what it
 * cannot answer without (the SSH provider's Adopt mode, whose providerID is the registered
 * Node's).
 *
 * Ownership: a provider declares the node class kinds it supports (supported_node_classes; the
 * first is the default). The core acts only on NodePools and NodeClaims whose nodeClassRef names
 * one of them (kp_provider_supports); every other object belongs to another controller and is
 * left alone.
 *
 * Deadlines and cancellation: every call that may block takes a const struct kp_ctx *
 * (base/ctx.h; NULL never ends) and honours it: once the context is cancelled or past its
 * deadline the call ends promptly (between steps, and inside an SSH phase within the session's
 * poll slice) with -ECANCELED or -ETIMEDOUT as KP_PROVIDER_ERR_RETRYABLE, leaving what it
 * started resumable. name, supported_node_classes and repair_policies answer constants and take
 * no context.
 *
 * Error semantics. Every call returns 0 or a negative error, and fills an optional
 * struct kp_provider_err with the class of failure the core acts on:
 *
 *   KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY  (-ENOSPC) no machine can back this NodeClaim now:
 *        the core deletes the NodeClaim and the scheduler tries another instance type / pool.
 *   KP_PROVIDER_ERR_NOT_FOUND  (-ENOENT) the instance does not exist, or is no longer this
 *        NodeClaim's (the Delete fence): Delete and Get answer it, and the core treats the
 *        instance as gone (ends its retries, removes the finalizer). Never a reason to retry.
 *   KP_PROVIDER_ERR_NODECLASS_NOT_READY  (-KP_ENOTREADY) the NodeClaim's node class is not
 *        Ready; reason and message come from its condition. Retry later.
 *   KP_PROVIDER_ERR_CREATE  (terminal for this attempt; e.g. -KP_ESCRIPT) Create failed with a
 *        reason for the NodeClaim's Launched condition (JoinFailed, AdoptFailed,
 *        NodeClassReadinessUnknown, ConfigurationError, ...). The core records it and, as
 *        Karpenter does, retries the launch, which may pick another machine.
 *   KP_PROVIDER_ERR_RETRYABLE  (-EAGAIN, -KP_ECONFLICT, -ETIMEDOUT, -ECANCELED, API errors) a
 *        transient failure; nothing was decided. The core requeues with backoff and calls again:
 *        every call is idempotent (Create resumes what an earlier attempt started).
 *   KP_PROVIDER_ERR_IN_PROGRESS  (-EINPROGRESS, Create only) the launch goes on without the
 *        caller, on the provider's own threads; nothing was decided. The provider calls its
 *        progress watchers (watch_progress) with the NodeClaim's name when that work ends; the
 *        core then calls Create again, which answers from it. Not a failure: the core writes
 *        nothing, counts nothing, and also comes back after KP_PROVIDER_PROGRESS_POLL_USEC in
 *        case a notice is lost. A Delete whose work goes on the same way answers 0 ("releasing",
 *        below) and notifies the same way.
 *
 * Threads: ops are called from core worker threads, several at once; each call gets the calling
 * worker's own client (STYLE.md section 4: one curl handle per worker). A provider's state must
 * be safe for concurrent calls. A Create or Delete blocks for as long as its work takes (an SSH
 * join: minutes) unless the provider runs that work on its own threads and answers IN_PROGRESS
 * (the SSH provider does, with its job pool), or its context ends first. */
#ifndef KP_CORE_PROVIDER_H
#define KP_CORE_PROVIDER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "api/obj.h"
#include "api/requirements.h"

struct kp_client;
struct kp_ctx;
struct kp_nodeclaim_view;
struct kp_nodeclass_ref;
struct kp_nodepool_view;

/* Well-known labels a provider's instance types and instances carry. */
#define KP_LABEL_INSTANCE_TYPE "node.kubernetes.io/instance-type"
#define KP_LABEL_ARCH "kubernetes.io/arch"
#define KP_LABEL_OS "kubernetes.io/os"
#define KP_LABEL_ZONE "topology.kubernetes.io/zone"
#define KP_LABEL_CAPACITY_TYPE "karpenter.sh/capacity-type"
#define KP_CAPACITY_TYPE_ON_DEMAND "on-demand"

/* NodeClaim Launched-condition reasons a provider may set with KP_PROVIDER_ERR_CREATE. */
#define KP_PROVIDER_REASON_CREATE_FAILED "CreateFailed"
#define KP_PROVIDER_REASON_JOIN_FAILED "JoinFailed"
#define KP_PROVIDER_REASON_ADOPT_FAILED "AdoptFailed"
#define KP_PROVIDER_REASON_CONFIG "ConfigurationError"
#define KP_PROVIDER_REASON_READINESS_UNKNOWN "NodeClassReadinessUnknown"
#define KP_PROVIDER_REASON_NOT_READY "NodeClassNotReady"
/* Drift reasons (kp_provider_ops.is_drifted). */
#define KP_PROVIDER_DRIFT_PROFILE "ProfileDrift"
#define KP_PROVIDER_DRIFT_NODECLASS "NodeClassDrift"

enum kp_provider_err_kind {
    KP_PROVIDER_ERR_NONE = 0,
    KP_PROVIDER_ERR_RETRYABLE,
    KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY,
    KP_PROVIDER_ERR_NOT_FOUND,
    KP_PROVIDER_ERR_NODECLASS_NOT_READY,
    KP_PROVIDER_ERR_CREATE,
    KP_PROVIDER_ERR_IN_PROGRESS,
};
/* How long the core waits on an IN_PROGRESS Create without a notice before it asks again. */
#define KP_PROVIDER_PROGRESS_POLL_USEC (30 * 1000000ULL)

/* What went wrong, for the core's decision and for the NodeClaim's condition and event. The
 * message is already redacted (no token, join-secret value or key ever appears in it). */
struct kp_provider_err {
    enum kp_provider_err_kind kind;
    char reason[64]; /* a condition reason (CamelCase); "" for RETRYABLE and NOT_FOUND */
    char *message;   /* owned; NULL when none */
};
#define KP_PROVIDER_ERR_INIT                                                                       \
    {                                                                                              \
        .kind = KP_PROVIDER_ERR_NONE, .reason = "", .message = NULL                                \
    }
void kp_provider_err_done(struct kp_provider_err *e);
/* Sets kind, reason (may be NULL) and a formatted message (replacing an earlier one), and
 * returns r, so a failure path reads `return kp_provider_err_set(err, r, ...)`. e may be NULL. A
 * message that cannot be allocated is dropped. */
int kp_provider_err_set(struct kp_provider_err *e, int r, enum kp_provider_err_kind kind,
                        const char *reason, const char *fmt, ...) KP_PRINTF(5, 6);
/* "InsufficientCapacity", "NotFound", ...: a stable name for logs and tests. */
const char *kp_provider_err_kind_name(enum kp_provider_err_kind kind);

/* A (name, value) pair and a name -> milli-units amount; strings owned by their container. */
struct kp_provider_kv {
    char *key;
    char *value;
};
struct kp_provider_res {
    char *name;
    int64_t milli; /* as api/obj.h: cpu 1 = 1000, memory 1Ki = 1024000 */
};

/* One offering of an instance type: where and how it can be had. Its requirement set holds at
 * least zone and capacity type (each In [one value]), so the scheduler can intersect a NodeClaim's
 * requirements with the offering's and pick the cheapest available one that is compatible. */
struct kp_offering {
    struct kp_reqset reqs;
    int64_t price_micro_usd; /* per hour */
    bool available;
    int64_t reservation_capacity; /* capacity-type reserved: instances left; 0 otherwise */
};
/* The offering's value for key when it is In [one value] (zone, capacity type), else NULL. */
const char *kp_offering_value(const struct kp_offering *o, const char *key);

/* One instance type. Its requirement set is what any instance of it satisfies: instance type,
 * arch and os In [its value], zone and capacity type In [the values of its offerings], plus
 * provider labels; labels are the single values an instance of it is labelled with (what a launch
 * stamps). Allocatable is capacity minus overhead. */
struct kp_instance_type {
    char *name;
    struct kp_reqset reqs;
    struct kp_provider_kv *labels;
    size_t n_labels;
    struct kp_provider_res *capacity;
    size_t n_capacity;
    struct kp_provider_res *overhead; /* kube-reserved */
    size_t n_overhead;
    struct kp_offering *offerings;
    size_t n_offerings;
};

/* A growable list of instance types, as a provider builds one (owned; see _done). */
struct kp_instance_types {
    struct kp_instance_type *v;
    size_t n;
};
void kp_instance_types_done(struct kp_instance_types *t);
/* Field-by-field equality, offerings and requirement sets included (a provider republishes a
 * catalog only when this says it changed). */
bool kp_instance_types_equal(const struct kp_instance_types *a, const struct kp_instance_types *b)
    KP_NONNULL(1, 2);
/* The allocatable amount of name (capacity - overhead, never below 0); 0 when absent. */
int64_t kp_instance_type_allocatable(const struct kp_instance_type *it, const char *name);
/* The cheapest available offering's price, or -1 when no offering is available. */
int64_t kp_instance_type_price(const struct kp_instance_type *it);
/* The same over the offerings compatible with reqs (well-known labels undefined in reqs allowed,
 * as the scheduler reads them): the price a NodeClaim with those requirements can have. */
int64_t kp_instance_type_price_for(const struct kp_instance_type *it, const struct kp_reqset *reqs)
    KP_NONNULL(1, 2);

/* The instance types a NodePool may launch, as a provider publishes them: immutable once
 * published and reference counted, so the scheduler can hold one across a whole batch (and
 * compare versions between batches) while the provider publishes the next. version is monotonic
 * per provider and changes exactly when the provider's view of what it can launch changed (its
 * node classes, its machines, their availability); 0 is the empty catalog of a NodePool the
 * provider has nothing for. Readers use v, n and version only. */
struct kp_instance_catalog {
    uint64_t version;
    const struct kp_instance_type *v;
    size_t n;
    struct kp_instance_types own_; /* private: what v points into */
    atomic_uint refs_;             /* private */
};
/* Publishes types (taken over: *types is emptied, also on failure) as a catalog with one
 * reference. 0 or -ENOMEM. */
int kp_instance_catalog_new(struct kp_instance_types *types, uint64_t version,
                            struct kp_instance_catalog **ret) KP_NONNULL(1, 3) KP_WUR;
/* A new reference (c may be NULL). Any thread. */
struct kp_instance_catalog *kp_instance_catalog_ref(struct kp_instance_catalog *c);
/* Drops a reference, freeing the catalog with the last; returns NULL. Any thread. */
struct kp_instance_catalog *kp_instance_catalog_unref(struct kp_instance_catalog *c);
/* The instance type called name, or NULL. */
const struct kp_instance_type *kp_instance_catalog_find(const struct kp_instance_catalog *c,
                                                        const char *name) KP_NONNULL(1, 2);

/* A node class kind a provider supports ({group, kind}; static strings). */
struct kp_node_class_kind {
    const char *group;
    const char *kind;
};

/* A Node condition the core's node repair acts on (Karpenter's RepairPolicy): a Node whose
 * condition type has had status for toleration_usec is unhealthy and is replaced. */
struct kp_repair_policy {
    const char *condition_type;   /* e.g. "Ready" */
    const char *condition_status; /* any status, as the API spells it ("True", "False", ...) */
    uint64_t toleration_usec;
};

/* What Create returns and Get/List report: the launched instance as the NodeClaim's status and
 * labels should show it, so the core models its capacity before the Node registers. */
struct kp_provider_instance {
    char *nodeclaim;   /* NodeClaim name the instance backs (also the Node name) */
    char *provider_id; /* status.providerID */
    char *instance_type;
    char *backing;         /* provider-specific identity for events and logs, e.g. "ns/host" */
    int64_t creation_usec; /* when the machine came to exist (0: unknown) */
    struct kp_provider_kv *labels; /* instance type, zone, capacity type, arch, os, ... */
    size_t n_labels;
    struct kp_provider_kv *annotations; /* e.g. the node-class hash and its version */
    size_t n_annotations;
    struct kp_provider_res *capacity;
    size_t n_capacity;
    struct kp_provider_res *allocatable;
    size_t n_allocatable;
};
void kp_provider_instance_done(struct kp_provider_instance *in);

struct kp_provider_instances {
    struct kp_provider_instance *v;
    size_t n;
};
void kp_provider_instances_done(struct kp_provider_instances *l);
/* A deep copy of a into *ret (NULL strings stay NULL; labels, annotations and resources
 * copied). 0 or -ENOMEM (nothing written then). */
int kp_provider_instance_copy(const struct kp_provider_instance *a,
                              struct kp_provider_instance *ret) KP_NONNULL(1, 2) KP_WUR;

/* Helpers for providers filling the structs above: 0 or -ENOMEM (nothing added then). */
int kp_provider_kv_add(struct kp_provider_kv **v, size_t *n, const char *key,
                       const char *value) KP_WUR;
int kp_provider_res_add(struct kp_provider_res **v, size_t *n, const char *name,
                        int64_t milli) KP_WUR;
/* The value of key in (v, n), or NULL. */
const char *kp_provider_kv_get(const struct kp_provider_kv *v, size_t n, const char *key);
/* The amount of name in (v, n); *ret_found (optional) tells whether it was there. */
int64_t kp_provider_res_get(const struct kp_provider_res *v, size_t n, const char *name,
                            bool *ret_found);

/* What a provider knows of one node class, for the NodePool's NodeClassReady condition and the
 * reset of its NodeRegistrationHealthy (Karpenter reads the node class object itself; the core
 * cannot, since the kind is the provider's). Strings owned (kp_node_class_status_done). */
struct kp_node_class_status {
    bool found;                /* false: not in the provider's cache (NodeClassNotFound) */
    bool deleting;             /* metadata.deletionTimestamp set (NodeClassTerminating) */
    int64_t generation;        /* metadata.generation */
    enum kp_cond_status ready; /* its Ready condition; UNKNOWN when it has none yet */
    char *reason;              /* Ready's reason, NULL when none */
    char *message;             /* Ready's message, NULL when none */
};
void kp_node_class_status_done(struct kp_node_class_status *s);

/* The provider vtable. self is the provider's own state, passed back on every call; ctx bounds
 * the call (see the top). Outputs are written on success only and owned by the caller (release
 * with the _done and _unref functions above). */
struct kp_provider_ops {
    /* A stable short name ("ssh"), for logs and metrics. */
    const char *(*name)(void *self);

    /* The node class kinds this provider serves, the default first; *ret points at static data.
     * Returns how many (at least one). */
    size_t (*supported_node_classes)(void *self, const struct kp_node_class_kind **ret);

    /* The Node conditions the core's node repair may act on; *ret points at static data.
     * Returns how many (0: this provider opts out of node repair). */
    size_t (*repair_policies)(void *self, const struct kp_repair_policy **ret);

    /* Launches (or resumes launching) an instance for nc and returns once it is launched (for
     * SSH: the join script exited 0), without waiting for its Node to register; the core waits
     * for registration. On success the instance now belongs to nc: a second Create for the same
     * NodeClaim (name and uid) returns the same instance. A provider that launches on its own
     * threads answers IN_PROGRESS until the launch has ended, and the ctx then bounds only the
     * call, not the launch: the launch's own deadline is ctx's deadline when the launch began. */
    int (*create)(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                  const struct kp_nodeclaim_view *nc, struct kp_provider_instance *ret,
                  struct kp_provider_err *err);

    /* Tears down nc's instance and returns the machine to the provider. Fenced: when the
     * instance is no longer nc's (its name and uid), answers NOT_FOUND and touches nothing. The
     * Node object is the core's to delete. As in Karpenter, 0 means "releasing" and the core
     * calls again (every 5 s) until the answer is NOT_FOUND, which alone means gone (a call
     * that finishes the release may answer it at once); a RETRYABLE error is retried with
     * backoff. */
    int (*delete)(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                  const struct kp_nodeclaim_view *nc, struct kp_provider_err *err);

    /* The instance with this providerID, NOT_FOUND when there is none (or it is not claimed). */
    int (*get)(void *self, const struct kp_ctx *ctx, struct kp_client *c, const char *provider_id,
               struct kp_provider_instance *ret, struct kp_provider_err *err);

    /* Every instance the provider holds for some NodeClaim (for garbage collection). */
    int (*list)(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                struct kp_provider_instances *ret, struct kp_provider_err *err);

    /* The catalog of instance types np may launch: *ret is a new reference to the published
     * catalog (not a copy), the same one for every caller until the provider republishes. A
     * NodePool this provider has nothing for (an unsupported or missing node class) gets an
     * empty catalog, not an error. Cheap when nothing changed: ask once per NodePool per batch. */
    int (*get_instance_types)(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                              const struct kp_nodepool_view *np, struct kp_instance_catalog **ret,
                              struct kp_provider_err *err);

    /* Provider-specific drift of nc: *ret_reason is a static reason string (ProfileDrift,
     * NodeClassDrift) or NULL when not drifted. An instance it cannot find is a NOT_FOUND
     * error: the core then keeps whatever it knew. */
    int (*is_drifted)(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                      const struct kp_nodeclaim_view *nc, const char **ret_reason,
                      struct kp_provider_err *err);

    /* Optional (NULL: the core reports the class's readiness as unknown). The node class ref
     * names as the provider's cache holds it, without I/O: called from a NodePool reconcile
     * every few seconds. 0 (also when not found: ret->found false) or -ENOMEM. */
    int (*node_class_status)(void *self, const struct kp_nodeclass_ref *ref,
                             struct kp_node_class_status *ret);

    /* Optional (NULL: never). Whether provider_id has the form this provider gives its
     * instances (for SSH: kpssh://<pool namespace>/<host>), claimed or not, without I/O. It
     * tells a Node of ours whose NodeClaim is gone, and whose labels do not say, from another
     * Karpenter's: garbage collection and termination must agree on which Nodes are ours, or
     * a Node one deletes the other never lets go. */
    bool (*owns_provider_id)(void *self, const char *provider_id);

    /* Optional (NULL: the core finds provider drift only by asking is_drifted every 5
     * minutes). Registers fn, called on an informer thread (it must not block) whenever
     * something is_drifted reads changes in a way that may change its answer: node_class is
     * the node class's name, or NULL when NodeClaims of any class may be affected. Main thread,
     * during set-up, before the informers start. 0, -ENOMEM or -EBUSY. unwatch_drift removes
     * every registration made with ctx. */
    int (*watch_drift)(void *self, void (*fn)(void *ctx, const char *node_class), void *ctx);
    void (*unwatch_drift)(void *self, void *ctx);

    /* Optional (NULL: the provider never answers IN_PROGRESS, and a Delete's "releasing" is
     * polled). Registers fn, called on a provider thread (it must not block) with a NodeClaim's
     * name when work a Create answered IN_PROGRESS for, or a Delete answered 0 for, has ended:
     * the next call for that NodeClaim answers from it. Main thread, during set-up. 0, -ENOMEM.
     * unwatch_progress removes every registration made with ctx, and no fn of it runs once it
     * returns. */
    int (*watch_progress)(void *self, void (*fn)(void *ctx, const char *nodeclaim), void *ctx);
    void (*unwatch_progress)(void *self, void *ctx);
};

/* A provider: its vtable and its state. */
struct kp_provider {
    const struct kp_provider_ops *ops;
    void *self;
};

/* Whether ref names a node class kind p supports (group and kind; the version is not compared,
 * as in Karpenter). The core's ownership test for NodePools and NodeClaims. */
bool kp_provider_supports(const struct kp_provider *p, const struct kp_nodeclass_ref *ref)
    KP_NONNULL(1, 2);
/* p's owns_provider_id, false when the provider has none or provider_id is NULL. */
bool kp_provider_owns_provider_id(const struct kp_provider *p, const char *provider_id)
    KP_NONNULL(1);
/* p's node_class_status, or -EOPNOTSUPP when the provider has none (*ret zeroed first). */
int kp_provider_node_class_status(const struct kp_provider *p, const struct kp_nodeclass_ref *ref,
                                  struct kp_node_class_status *ret) KP_NONNULL(1, 2, 3) KP_WUR;
/* 0 while ctx may go on; else its -ECANCELED / -ETIMEDOUT, recorded in err (optional) as
 * KP_PROVIDER_ERR_RETRYABLE with what was about to happen. For providers, between steps. */
int kp_provider_ctx_check(const struct kp_ctx *ctx, struct kp_provider_err *err,
                          const char *what) KP_WUR;

#endif
