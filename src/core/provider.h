/* core/provider.h: the interface between the Karpenter-compatible core and a provider (the
 * equivalent of Karpenter's CloudProvider). The core owns NodePools, NodeClaims, Nodes,
 * scheduling and disruption; a provider owns the machines. The core calls a provider through
 * struct kp_provider_ops and never sees how machines are found, joined or released; kpssh has
 * one provider (provider/ssh/provider.h), tests may have fakes.
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
 *   KP_PROVIDER_ERR_RETRYABLE  (-EAGAIN, -KP_ECONFLICT, -ETIMEDOUT, API errors) a transient
 *        failure; nothing was decided. The core requeues with backoff and calls again: every
 *        call is idempotent (Create resumes what an earlier attempt started).
 *
 * Threads: ops are called from core worker threads, several at once; each call gets the calling
 * worker's own client (STYLE.md section 4: one curl handle per worker). A provider's ctx must
 * be safe for concurrent calls. Calls may block for minutes (Create runs join scripts). */
#ifndef KP_CORE_PROVIDER_H
#define KP_CORE_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_client;
struct kp_nodeclaim_view;
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
};

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
    int64_t milli; /* as k8s/obj.h: cpu 1 = 1000, memory 1Ki = 1024000 */
};

/* One offering of an instance type. */
struct kp_offering {
    char *zone;
    char *capacity_type;
    int64_t price_micro_usd; /* per hour */
    bool available;
};

/* One instance type. Labels are the single-valued requirements it satisfies (instance type,
 * arch, os, zone, capacity type, ...). Allocatable is capacity minus overhead. */
struct kp_instance_type {
    char *name;
    struct kp_provider_kv *labels;
    size_t n_labels;
    struct kp_provider_res *capacity;
    size_t n_capacity;
    struct kp_provider_res *overhead; /* kube-reserved */
    size_t n_overhead;
    struct kp_offering *offerings;
    size_t n_offerings;
};

struct kp_instance_types {
    struct kp_instance_type *v;
    size_t n;
};
void kp_instance_types_done(struct kp_instance_types *t);
/* The allocatable amount of name (capacity - overhead, never below 0); 0 when absent. */
int64_t kp_instance_type_allocatable(const struct kp_instance_type *it, const char *name);
/* The cheapest available offering's price, or -1 when no offering is available. */
int64_t kp_instance_type_price(const struct kp_instance_type *it);

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

/* The provider vtable. ctx is the provider's own state, passed back on every call. Outputs are
 * written on success only and owned by the caller (release with the _done functions above). */
struct kp_provider_ops {
    /* A stable short name ("ssh"), for logs and metrics. */
    const char *(*name)(void *ctx);

    /* Launches (or resumes launching) an instance for nc. Blocks until the instance is
     * registered with the cluster or failed. On success the instance now belongs to nc: a second
     * Create for the same NodeClaim (name and uid) returns the same instance. */
    int (*create)(void *ctx, struct kp_client *c, const struct kp_nodeclaim_view *nc,
                  struct kp_provider_instance *ret, struct kp_provider_err *err);

    /* Tears down nc's instance and returns the machine to the provider. Fenced: when the
     * instance is no longer nc's (its name and uid), answers NOT_FOUND and touches nothing. The
     * Node object is the core's to delete after Delete succeeds. 0 means "gone"; the core calls
     * again after a RETRYABLE error. */
    int (*delete)(void *ctx, struct kp_client *c, const struct kp_nodeclaim_view *nc,
                  struct kp_provider_err *err);

    /* The instance with this providerID, NOT_FOUND when there is none (or it is not claimed). */
    int (*get)(void *ctx, struct kp_client *c, const char *provider_id,
               struct kp_provider_instance *ret, struct kp_provider_err *err);

    /* Every instance the provider holds for some NodeClaim (for garbage collection). */
    int (*list)(void *ctx, struct kp_client *c, struct kp_provider_instances *ret,
                struct kp_provider_err *err);

    /* The instance types a NodePool of this provider may launch, with offerings. A NodePool
     * whose nodeClassRef is not this provider's yields an empty list, not an error. */
    int (*instance_types)(void *ctx, struct kp_client *c, const struct kp_nodepool_view *np,
                          struct kp_instance_types *ret, struct kp_provider_err *err);

    /* Provider-specific drift of nc: *ret_reason is a static reason string (ProfileDrift,
     * NodeClassDrift) or NULL when not drifted. An unresolvable instance is not drifted. */
    int (*is_drifted)(void *ctx, struct kp_client *c, const struct kp_nodeclaim_view *nc,
                      const char **ret_reason, struct kp_provider_err *err);
};

/* A provider: its vtable and its state. */
struct kp_provider {
    const struct kp_provider_ops *ops;
    void *ctx;
};

#endif
