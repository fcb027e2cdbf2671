/* core/observe.c: Karpenter's metric families as the core reports them (core/observe.h). Names,
 * label names and label order are Karpenter's v1 exports; help texts are ours. */
#include "core/observe.h"

#include "api/obj-karpenter.h"
#include "core/core.h"
#include "core/provider.h"

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})
#define N(...) (sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))
#define B(a) (a), (sizeof(a) / sizeof((a)[0]))

/* Upstream's buckets, family by family (pkg/metrics DurationBuckets; the lifecycle's
 * ExponentialBuckets(1, 2, 11) and (1, 2, 12); the node lifetime's 15 min .. 30 days). */
static const double duration_buckets[] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8,   0.9,  1.0,   1.25, 1.5, 1.75, 2.0, 2.5,  3.0, 3.5,  4.0, 4.5,  5,   6,   7,
    8,     9,    10,    15,   20,  25,   30,  40,   50,  60,   120, 150,  300, 450, 600};
static const double exp_1_2_11[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
static const double exp_1_2_12[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
#define MIN_ 60.0
#define HOUR_ 3600.0
#define DAY_ 86400.0
static const double lifetime_buckets[] = {
    15 * MIN_, 30 * MIN_,  45 * MIN_,  HOUR_,      2 * HOUR_,  4 * HOUR_, 6 * HOUR_,
    8 * HOUR_, 10 * HOUR_, 12 * HOUR_, 16 * HOUR_, 20 * HOUR_, DAY_,      2 * DAY_,
    3 * DAY_,  5 * DAY_,   10 * DAY_,  15 * DAY_,  20 * DAY_,  25 * DAY_, 30 * DAY_};

const struct kp_core_metric_def kp_core_metric_defs[KP_CM_N] = {
    [KP_CM_NODECLAIMS_CREATED] = {"karpenter_nodeclaims_created_total",
                                  "NodeClaims created, by the reason they were made for.",
                                  KP_CM_COUNTER, L("reason", "nodepool", "min_values_relaxed"),
                                  N("reason", "nodepool", "min_values_relaxed"), NULL, 0},
    [KP_CM_NODECLAIMS_TERMINATED] = {"karpenter_nodeclaims_terminated_total",
                                     "NodeClaims whose finalizer was released.", KP_CM_COUNTER,
                                     L("nodepool", "capacity_type", "zone"),
                                     N("nodepool", "capacity_type", "zone"), NULL, 0},
    [KP_CM_NODECLAIMS_DISRUPTED] =
        {"karpenter_nodeclaims_disrupted_total",
         "NodeClaims deleted by the core, by reason (insufficient_capacity, launch_timeout, "
         "registration_timeout, garbage_collected, expired, ...).",
         KP_CM_COUNTER,
         L("reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"),
         N("reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"), NULL,
         0},
    [KP_CM_NODECLAIMS_TERMINATION_DURATION] =
        {"karpenter_nodeclaims_termination_duration_seconds",
         "Seconds from a NodeClaim's deletion request to the release of its finalizer.",
         KP_CM_HISTOGRAM, L("nodepool"), N("nodepool"), B(exp_1_2_12)},
    [KP_CM_NODECLAIMS_INSTANCE_TERMINATION_DURATION] =
        {"karpenter_nodeclaims_instance_termination_duration_seconds",
         "Seconds from a NodeClaim's deletion request to the provider saying its instance is "
         "gone.",
         KP_CM_HISTOGRAM, L("nodepool"), N("nodepool"), B(exp_1_2_11)},
    [KP_CM_NODES_CREATED] = {"karpenter_nodes_created_total", "Nodes registered for a NodeClaim.",
                             KP_CM_COUNTER, L("nodepool", "zone"), N("nodepool", "zone"), NULL, 0},
    [KP_CM_NODES_TERMINATED] = {"karpenter_nodes_terminated_total",
                                "Nodes whose termination finalizer was released.", KP_CM_COUNTER,
                                L("nodepool", "zone"), N("nodepool", "zone"), NULL, 0},
    [KP_CM_NODES_DRAINED] = {"karpenter_nodes_drained_total", "Nodes drained for termination.",
                             KP_CM_COUNTER, L("nodepool"), N("nodepool"), NULL, 0},
    [KP_CM_NODES_TERMINATION_DURATION] =
        {"karpenter_nodes_termination_duration_seconds",
         "Seconds from a Node's deletion request to the release of its finalizer.", KP_CM_HISTOGRAM,
         L("nodepool"), N("nodepool"), B(duration_buckets)},
    [KP_CM_NODES_LIFETIME_DURATION] = {"karpenter_nodes_lifetime_duration_seconds",
                                       "Seconds from a Node's creation to its termination.",
                                       KP_CM_HISTOGRAM, L("nodepool"), N("nodepool"),
                                       B(lifetime_buckets)},
    [KP_CM_NODEPOOLS_USAGE] = {"karpenter_nodepools_usage",
                               "Resources of a NodePool's NodeClaims, by resource type.",
                               KP_CM_GAUGE, L("nodepool", "resource_type"),
                               N("nodepool", "resource_type"), NULL, 0},
    [KP_CM_NODEPOOLS_LIMIT] = {"karpenter_nodepools_limit",
                               "A NodePool's spec.limits, by resource type.", KP_CM_GAUGE,
                               L("nodepool", "resource_type"), N("nodepool", "resource_type"), NULL,
                               0},
    [KP_CM_NODEPOOLS_ALLOWED_DISRUPTIONS] =
        {"karpenter_nodepools_allowed_disruptions",
         "Nodes of a NodePool its disruption budgets allow to disrupt now, by reason.", KP_CM_GAUGE,
         L("nodepool", "reason"), N("nodepool", "reason"), NULL, 0},
    [KP_CM_CLUSTER_STATE_SYNCED] = {"karpenter_cluster_state_synced",
                                    "1 when the core's cluster state matches the API server's "
                                    "Nodes and NodeClaims, 0 otherwise.",
                                    KP_CM_GAUGE, L(NULL), 0, NULL, 0},
    [KP_CM_CLUSTER_STATE_NODE_COUNT] = {"karpenter_cluster_state_node_count",
                                        "Nodes the core's cluster state holds.", KP_CM_GAUGE,
                                        L(NULL), 0, NULL, 0},
    [KP_CM_VOLUNTARY_DISRUPTION_DECISIONS] =
        {"karpenter_voluntary_disruption_decisions_total",
         "Disruption decisions carried out, by decision, reason and consolidation type.",
         KP_CM_COUNTER, L("decision", "reason", "consolidation_type"),
         N("decision", "reason", "consolidation_type"), NULL, 0},
    [KP_CM_PODS_DRAINED] = {"karpenter_pods_drained_total",
                            "Pods drained during Node termination, by reason.", KP_CM_COUNTER,
                            L("reason"), N("reason"), NULL, 0},
    [KP_CM_PODS_EVICTION_REQUESTS] = {"karpenter_pods_eviction_requests_total",
                                      "Pod eviction requests made, by response code.",
                                      KP_CM_COUNTER, L("code"), N("code"), NULL, 0},
    [KP_CM_PODS_DISRUPTION_INITIATED] =
        {"karpenter_pods_disruption_initiated_total",
         "Reschedulable pods on the nodes disruption deleted, by reason and NodePool.",
         KP_CM_COUNTER,
         L("reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"),
         N("reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"), NULL,
         0},
    [KP_CM_VOLUNTARY_DISRUPTION_QUEUE_FAILURES] =
        {"karpenter_voluntary_disruption_queue_failures_total",
         "Disruption commands whose replacements failed, by decision, reason and consolidation "
         "type.",
         KP_CM_COUNTER, L("decision", "reason", "consolidation_type"),
         N("decision", "reason", "consolidation_type"), NULL, 0},
    [KP_CM_VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS] =
        {"karpenter_voluntary_disruption_failed_validations_total",
         "Candidates selected for disruption that failed validation, by consolidation type.",
         KP_CM_COUNTER, L("consolidation_type"), N("consolidation_type"), NULL, 0},
    [KP_CM_VOLUNTARY_DISRUPTION_EVALUATION_DURATION] =
        {"karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
         "Seconds one disruption method took to look for a command, by reason and consolidation "
         "type.",
         KP_CM_HISTOGRAM, L("reason", "consolidation_type"), N("reason", "consolidation_type"),
         B(duration_buckets)},
    [KP_CM_VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL] =
        {"karpenter_voluntary_disruption_decisions_by_nodepool_total",
         "Disruption decisions carried out, once per NodePool of their nodes, by NodePool, "
         "decision, reason and consolidation type.",
         KP_CM_COUNTER, L("nodepool", "decision", "reason", "consolidation_type"),
         N("nodepool", "decision", "reason", "consolidation_type"), NULL, 0},
    [KP_CM_VOLUNTARY_DISRUPTION_ELIGIBLE_NODES] =
        {"karpenter_voluntary_disruption_eligible_nodes",
         "Nodes a disruption method could take at its last evaluation, by reason.", KP_CM_GAUGE,
         L("reason"), N("reason"), NULL, 0},
    [KP_CM_VOLUNTARY_DISRUPTION_CONSOLIDATION_TIMEOUTS] =
        {"karpenter_voluntary_disruption_consolidation_timeouts_total",
         "Consolidation searches stopped by their time limit, by consolidation type.",
         KP_CM_COUNTER, L("consolidation_type"), N("consolidation_type"), NULL, 0},
    [KP_CM_NODEPOOLS_NODES_CONSUMING_BUDGETS] =
        {"karpenter_nodepools_nodes_consuming_budgets",
         "Nodes of a NodePool that take from its disruption budgets now (not Ready, or being "
         "disrupted), by reason.",
         KP_CM_GAUGE, L("nodepool", "reason"), N("nodepool", "reason"), NULL, 0},
};

/* Upstream's disruption metrics.go starts both timeout series at 0. */
const struct kp_core_metric_series kp_core_initial_series[KP_CM_INITIAL_SERIES_N] = {
    {KP_CM_VOLUNTARY_DISRUPTION_CONSOLIDATION_TIMEOUTS, L("multi")},
    {KP_CM_VOLUNTARY_DISRUPTION_CONSOLIDATION_TIMEOUTS, L("single")},
};

const char *kp_core_termination_mode(const struct kp_nodeclaim_view *nc)
{
    const struct kp_obj_duration *d = &nc->spec.termination_grace_period;

    if (!d->text || !d->valid)
        return "graceful";
    return d->ns <= 0 ? "forceful" : "eventual";
}

static void count_disrupted(const struct kp_core_observer *o, enum kp_core_metric m,
                            const struct kp_nodeclaim_view *nc, const char *reason, uint32_t times)
{
    const char *ct = kp_labels_get(&nc->meta.labels, KP_LABEL_CAPACITY_TYPE);
    const char *const *labels =
        KP_CM_LABELS(reason, nc->nodepool ? nc->nodepool : "", ct ? ct : "",
                     /* consolidation_policy= */ "", kp_core_termination_mode(nc));

    for (uint32_t i = 0; i < times; i++)
        kp_core_count(o, m, labels);
}

void kp_core_count_disrupted(const struct kp_core_observer *o, const struct kp_nodeclaim_view *nc,
                             const char *reason)
{
    count_disrupted(o, KP_CM_NODECLAIMS_DISRUPTED, nc, reason, 1);
}

void kp_core_count_disrupted_pods(const struct kp_core_observer *o,
                                  const struct kp_nodeclaim_view *nc, const char *reason,
                                  uint32_t pods)
{
    count_disrupted(o, KP_CM_PODS_DISRUPTION_INITIATED, nc, reason, pods);
}
