/* core/core.h: what every controller of Karpenter's core is given, and the names it shares.
 *
 * The core's controllers (core/lifecycle, core/termination, core/nodepool, core/gc,
 * core/expiration, later the provisioner and disruption) are each built from one struct
 * kp_core_env by a kp_<name>_controller_new() that registers on the process's informers during
 * set-up, and driven by _start/_stop/_ready/_free from cmd/controller/core.c (one row of the
 * controllers table). They reach hosts only through env->provider (core/provider.h) and read the
 * cluster only from the informers' caches (api/informers.h): they never list the API server to
 * decide.
 *
 * Time: env->now_usec is the wall clock the core decides with (condition transition times,
 * timeouts, expiry); tests pass a fake one. NULL means kp_real_usec().
 *
 * Threads: the env is built on the main thread before set-up and read-only afterwards; every
 * pointer in it is borrowed and outlives the controllers. */
#ifndef KP_CORE_CORE_H
#define KP_CORE_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kp_client;
struct kp_cluster_state;
struct kp_core_observer;
struct kp_ctx;
struct kp_events;
struct kp_provider;
struct kp_registry;
struct kp_store;

/* Karpenter's names (API: users' kubectl habits and tools rely on them). */
#define KP_CORE_FINALIZER "karpenter.sh/termination"
#define KP_CORE_LABEL_NODEPOOL "karpenter.sh/nodepool"
#define KP_CORE_LABEL_REGISTERED "karpenter.sh/registered"
#define KP_CORE_LABEL_INITIALIZED "karpenter.sh/initialized"
#define KP_CORE_LABEL_EXCLUDE_LB "node.kubernetes.io/exclude-from-external-load-balancers"
#define KP_CORE_ANN_DO_NOT_SYNC_TAINTS "karpenter.sh/do-not-sync-taints"
#define KP_CORE_ANN_DO_NOT_DISRUPT "karpenter.sh/do-not-disrupt"
#define KP_CORE_ANN_TERMINATION_TIMESTAMP "karpenter.sh/nodeclaim-termination-timestamp"
#define KP_CORE_ANN_NODEPOOL_HASH "karpenter.sh/nodepool-hash"
#define KP_CORE_ANN_NODEPOOL_HASH_VERSION "karpenter.sh/nodepool-hash-version"
#define KP_CORE_TAINT_UNREGISTERED "karpenter.sh/unregistered"
#define KP_CORE_TAINT_DISRUPTED "karpenter.sh/disrupted"

/* NodeClaim condition types. */
#define KP_NC_COND_LAUNCHED "Launched"
#define KP_NC_COND_REGISTERED "Registered"
#define KP_NC_COND_INITIALIZED "Initialized"
#define KP_NC_COND_READY "Ready"
#define KP_NC_COND_DRAINED "Drained"
#define KP_NC_COND_VOLUMES_DETACHED "VolumesDetached"
#define KP_NC_COND_INSTANCE_TERMINATING "InstanceTerminating"
/* Set True by a voluntary disruption with the method's reason (Empty, Underutilized, Drifted);
 * drains name it in their Evicted events. */
#define KP_NC_COND_DISRUPTION_REASON "DisruptionReason"

/* Durations the core runs with (Karpenter's defaults in parentheses); options set them so tests
 * can shorten them. 0 means the default. */
struct kp_core_timing {
    uint64_t launch_timeout_usec;    /* 5 min: Launched not True since its last transition */
    uint64_t registration_ttl_usec;  /* 15 min: Registered not True since its last transition */
    uint64_t gc_interval_usec;       /* 2 min: NodeClaim garbage collection */
    uint64_t orphan_node_grace_usec; /* 1 min (kpssh's own): a Node with our providerID and no
                                         * NodeClaim is collected only this long after it appeared */
    uint64_t delete_retry_usec;      /* 5 s: provider Delete until NotFound */
    uint64_t drain_retry_usec;       /* 1 s: drain and volume-detachment polling */
    uint64_t min_drain_usec;         /* 5 s: Drained waits this long after Draining began */
    uint64_t nodepool_counter_usec;  /* 5 s: NodePool status.resources / status.nodes */
};
/* The defaults, for fields left 0. */
void kp_core_timing_defaults(struct kp_core_timing *t);

struct kp_core_env {
    struct kp_client *client;      /* the main thread's; controllers clone one per worker */
    struct kp_registry *informers; /* the process's informers (k8s/registry.h) */
    const struct kp_provider *provider;
    /* Where the core's metrics go (core/observe.h; borrowed). NULL: none (unit tests). */
    const struct kp_core_observer *observer;
    /* The recorder events go to (borrowed; NULL: none). Karpenter's events are reported by
     * component "karpenter". */
    struct kp_events *events;
    const struct kp_ctx *parent;  /* the leadership term's context; reconciles run under it */
    struct kp_core_timing timing; /* 0 fields: defaults */
    unsigned workers;             /* reconcile workers per controller; 0: 1 */
    uint64_t (*now_usec)(void);   /* wall clock; NULL: kp_real_usec */
    /* The cluster state (core/state/cluster.h), made from this env during set-up and set here
     * before the controllers that read it are made (the provisioner); borrowed. */
    struct kp_cluster_state *cluster;
    /* The disruption loop runs beside the expiration controller: an expired NodeClaim whose
     * pods need a place gets replacements before its delete (core/expiration/expiration.h). */
    bool expiry_replaces;
};

/* The NodeClass label Karpenter stamps on its NodeClaims and Nodes, "<group>/<kind lowercased>"
 * (karpenter.kpssh.dev/sshnodeclass: <name>), into buf[size]; false when it does not fit. It
 * tells this provider's Nodes from another Karpenter's, which carry karpenter.sh/nodepool and
 * the karpenter.sh/termination finalizer too. */
bool kp_core_nodeclass_label(const char *group, const char *kind, char *buf, size_t size);

/* env->now_usec() or the real clock. */
uint64_t kp_core_now(const struct kp_core_env *env);

/* The reschedulable pods (kp_pod_reschedulable) bound to Node node in pods, a Pod store with
 * the KP_INDEX_POD_NODE index; 0 for a NULL or empty node name, or when the index answers an
 * error (the count is a metric's, or decides only whether an expiry waits for replacements,
 * where 0 means the plain forceful delete). */
uint32_t kp_core_reschedulable_on(struct kp_store *pods, const char *node);

#endif
