/* core/observe.h: the metrics Karpenter's core reports, by their upstream names and labels.
 *
 * The core does not depend on http/ (scripts/check-layers.sh). It declares the families it
 * reports in one table (kp_core_metric_defs: name, help, type, label names, exactly as
 * Karpenter exports them, so users' dashboards keep working) and reports through a small
 * observer; kpssh-controller registers every family of the table and adapts the observer to
 * them (cmd/controller/core.c). Tests pass their own observer or none.
 *
 * Labels are passed as an array of values in the family's label order (n_labels of them).
 * Callbacks run on the reporting worker's thread, several at once: they must be thread-safe and
 * must not block. The observer and each callback may be NULL. */
#ifndef KP_CORE_OBSERVE_H
#define KP_CORE_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

enum kp_core_metric {
    KP_CM_NODECLAIMS_CREATED = 0,                   /* {reason,nodepool,min_values_relaxed} */
    KP_CM_NODECLAIMS_TERMINATED,                    /* {nodepool,capacity_type,zone} */
    KP_CM_NODECLAIMS_DISRUPTED,                     /* {reason,nodepool,capacity_type,
                                                *  consolidation_policy,termination_mode} */
    KP_CM_NODECLAIMS_TERMINATION_DURATION,          /* histogram {nodepool} */
    KP_CM_NODECLAIMS_INSTANCE_TERMINATION_DURATION, /* histogram {nodepool} */
    KP_CM_NODES_CREATED,                            /* {nodepool,zone} */
    KP_CM_NODES_TERMINATED,                         /* {nodepool,zone} */
    KP_CM_NODES_DRAINED,                            /* {nodepool} */
    /* {nodepool}. XXX: a Summary (quantiles 0, 0.5, 0.9, 0.99, 1) upstream; http/metrics has no
     * summary type, so here it is a histogram with upstream's DurationBuckets: _sum and _count
     * match, a dashboard's quantile= selector does not. */
    KP_CM_NODES_TERMINATION_DURATION,
    KP_CM_NODES_LIFETIME_DURATION, /* histogram {nodepool} */
    KP_CM_NODEPOOLS_USAGE,         /* gauge {nodepool,resource_type} */
    KP_CM_NODEPOOLS_LIMIT,         /* gauge {nodepool,resource_type} */
    /* gauge {nodepool,reason}: reason as DisruptionReason (Empty, Drifted, Underutilized) */
    KP_CM_NODEPOOLS_ALLOWED_DISRUPTIONS,
    KP_CM_CLUSTER_STATE_SYNCED,     /* gauge {} */
    KP_CM_CLUSTER_STATE_NODE_COUNT, /* gauge {} */
    /* {decision,reason,consolidation_type}: a command of the disruption loop carried out */
    KP_CM_VOLUNTARY_DISRUPTION_DECISIONS,
    KP_CM_PODS_DRAINED,           /* {reason}: a pod evicted or deleted by a drain */
    KP_CM_PODS_EVICTION_REQUESTS, /* {code}: an Eviction API call and its HTTP status */
    /* {reason,nodepool,capacity_type,consolidation_policy,termination_mode}: the reschedulable
     * pods of each node a disruption command deletes */
    KP_CM_PODS_DISRUPTION_INITIATED,
    KP_CM_VOLUNTARY_DISRUPTION_QUEUE_FAILURES,     /* {decision,reason,consolidation_type} */
    KP_CM_VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS, /* {consolidation_type} */
    /* histogram {reason,consolidation_type}: one method's evaluation in a pass (reason
     * lower-case: empty, drifted, underutilized; consolidation_type empty, "", multi, single) */
    KP_CM_VOLUNTARY_DISRUPTION_EVALUATION_DURATION,
    /* {nodepool,decision,reason,consolidation_type}: a decision, once per NodePool it touches */
    KP_CM_VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL,
    KP_CM_VOLUNTARY_DISRUPTION_ELIGIBLE_NODES,         /* gauge {reason}: a method's candidates */
    KP_CM_VOLUNTARY_DISRUPTION_CONSOLIDATION_TIMEOUTS, /* {consolidation_type}: multi, single */
    /* gauge {nodepool,reason}: a NodePool's nodes that are not Ready or are being disrupted,
     * which its budgets count as taken (reason as DisruptionReason: Empty, Drifted, ...) */
    KP_CM_NODEPOOLS_NODES_CONSUMING_BUDGETS,
    KP_CM_N
};

enum kp_core_metric_type {
    KP_CM_COUNTER = 0,
    KP_CM_GAUGE,
    KP_CM_HISTOGRAM,
};

struct kp_core_metric_def {
    const char *name;
    const char *help;
    enum kp_core_metric_type type;
    const char *const *labels; /* NULL-terminated label names */
    size_t n_labels;
    const double *buckets; /* histograms: upstream's upper bounds (seconds) */
    size_t n_buckets;
};
/* Indexed by enum kp_core_metric. */
extern const struct kp_core_metric_def kp_core_metric_defs[KP_CM_N];

/* Disrupted reasons (label reason of KP_CM_NODECLAIMS_DISRUPTED), Karpenter's spelling. */
#define KP_CM_REASON_INSUFFICIENT_CAPACITY "insufficient_capacity"
#define KP_CM_REASON_NODECLASS_NOT_READY "nodeclass_not_ready"
#define KP_CM_REASON_LAUNCH_TIMEOUT "launch_timeout"
#define KP_CM_REASON_REGISTRATION_TIMEOUT "registration_timeout"
#define KP_CM_REASON_GARBAGE_COLLECTED "garbage_collected"
#define KP_CM_REASON_EXPIRED "expired"

struct kp_core_observer {
    /* A counter family grows by one. */
    void (*count)(void *ctx, enum kp_core_metric m, const char *const *labels);
    /* A histogram family observes v (seconds for durations). */
    void (*observe)(void *ctx, enum kp_core_metric m, const char *const *labels, double v);
    /* A gauge family is set to v; hide drops the series (a NodePool that is gone). */
    void (*gauge)(void *ctx, enum kp_core_metric m, const char *const *labels, double v);
    void (*hide)(void *ctx, enum kp_core_metric m, const char *const *labels);
    void *ctx;
};

/* Null-safe reporting helpers; labels as in the family's order. */
static inline void kp_core_count(const struct kp_core_observer *o, enum kp_core_metric m,
                                 const char *const *labels)
{
    if (o && o->count)
        o->count(o->ctx, m, labels);
}
static inline void kp_core_observe(const struct kp_core_observer *o, enum kp_core_metric m,
                                   const char *const *labels, double v)
{
    if (o && o->observe)
        o->observe(o->ctx, m, labels, v);
}
static inline void kp_core_gauge(const struct kp_core_observer *o, enum kp_core_metric m,
                                 const char *const *labels, double v)
{
    if (o && o->gauge)
        o->gauge(o->ctx, m, labels, v);
}
static inline void kp_core_hide(const struct kp_core_observer *o, enum kp_core_metric m,
                                const char *const *labels)
{
    if (o && o->hide)
        o->hide(o->ctx, m, labels);
}
struct kp_nodeclaim_view;

/* The termination_mode label of a NodeClaim, as Karpenter's DisruptionTerminationMode:
 * "graceful" without a terminationGracePeriod, "forceful" when it is 0, "eventual" otherwise. */
const char *kp_core_termination_mode(const struct kp_nodeclaim_view *nc);
/* karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type, consolidation_policy="",
 * termination_mode} grows by one for nc (the core's deletions that are not consolidation). */
void kp_core_count_disrupted(const struct kp_core_observer *o, const struct kp_nodeclaim_view *nc,
                             const char *reason);
/* karpenter_pods_disruption_initiated_total grows by pods, with kp_core_count_disrupted's
 * labels: the reschedulable pods a forceful delete (expiration, garbage collection) set moving. */
void kp_core_count_disrupted_pods(const struct kp_core_observer *o,
                                  const struct kp_nodeclaim_view *nc, const char *reason,
                                  uint32_t pods);

/* Series that exist from start-up at 0 before anything counts them, as upstream adds them in
 * an init(): kpssh-controller makes each right after registering the families. */
struct kp_core_metric_series {
    enum kp_core_metric metric;
    const char *const *labels;
};
#define KP_CM_INITIAL_SERIES_N 2
extern const struct kp_core_metric_series kp_core_initial_series[KP_CM_INITIAL_SERIES_N];

/* A label array literal: KP_CM_LABELS("provisioned", np, "false"). */
#define KP_CM_LABELS(...) ((const char *const[]){__VA_ARGS__, NULL})

#endif
