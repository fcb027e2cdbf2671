/* Tests for core/observe.c: the table of Karpenter's metric families is complete and well formed
 * (every enum value has a family named karpenter_*, label counts match the NULL-terminated
 * lists, histograms carry strictly increasing buckets), since kpssh-controller registers it
 * as is and a dashboard's query depends on each name and label. */
#include "kp-test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "core/observe.h"
#include "http/metrics.h"

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_CM_N; i++) {
        const struct kp_core_metric_def *d = &kp_core_metric_defs[i];
        size_t n = 0;

        assert_non_null(d->name);
        assert_int_equal(strncmp(d->name, "karpenter_", 10), 0);
        assert_non_null(d->help);
        while (d->labels && d->labels[n])
            n++;
        assert_int_equal(n, d->n_labels);
        if (d->type == KP_CM_HISTOGRAM) {
            assert_true(d->n_buckets > 0);
            for (size_t b = 1; b < d->n_buckets; b++)
                assert_true(d->buckets[b] > d->buckets[b - 1]);
        } else {
            assert_int_equal(d->n_buckets, 0);
        }
    }
    /* Upstream's: instance termination 1 .. 1024 s, NodeClaim termination 1 .. 2048 s. */
    assert_true(
        kp_core_metric_defs[KP_CM_NODECLAIMS_INSTANCE_TERMINATION_DURATION]
            .buckets[kp_core_metric_defs[KP_CM_NODECLAIMS_INSTANCE_TERMINATION_DURATION].n_buckets -
                     1] == 1024);
    assert_true(
        kp_core_metric_defs[KP_CM_NODECLAIMS_TERMINATION_DURATION]
            .buckets[kp_core_metric_defs[KP_CM_NODECLAIMS_TERMINATION_DURATION].n_buckets - 1] ==
        2048);
    assert_string_equal(kp_core_metric_defs[KP_CM_NODECLAIMS_DISRUPTED].labels[0], "reason");
}

/* Registers every family of the table into m as cmd/controller/core.c does, into f[]. */
static void register_all(struct kp_metrics *m, struct kp_metric **fam)
{
    for (size_t i = 0; i < KP_CM_N; i++) {
        const struct kp_core_metric_def *d = &kp_core_metric_defs[i];
        struct kp_metric_opts o = {
            .name = d->name,
            .help = d->help,
            .type = d->type == KP_CM_COUNTER ? KP_METRIC_COUNTER
                    : d->type == KP_CM_GAUGE ? KP_METRIC_GAUGE
                                             : KP_METRIC_HISTOGRAM,
            .labels = d->n_labels ? d->labels : NULL,
            .buckets = d->buckets,
            .nbuckets = d->n_buckets,
        };
        assert_int_equal(kp_metrics_register(m, &o, &fam[i]), 0);
    }
}

/* kpssh-controller registers every family of the table as cmd/controller/core.c does; a family
 * the registry refuses (too many buckets, a bad name) would stop the controller at start-up. */
static void test_registers(void **state)
{
    struct kp_metrics *m = NULL;
    struct kp_metric *fam[KP_CM_N];

    (void)state;
    assert_int_equal(kp_metrics_new(&m), 0);
    register_all(m, fam);
    kp_metrics_free(m);
}

static char *render(struct kp_metrics *m)
{
    struct kp_buf b = KP_BUF_INIT(KP_MAX_METRICS_BODY);

    assert_int_equal(kp_metrics_render(m, &b), 0);
    return kp_buf_steal(&b, NULL);
}

static void assert_has(const char *out, const char *line)
{
    if (!strstr(out, line))
        fail_msg("missing from the exposition: %s", line);
}

/* The voluntary-disruption families as a scrape shows them: upstream's names, types, label
 * names in upstream's order, and the timeout series at 0 before anything counts them
 * (upstream's metrics.go init()). */
static void test_disruption_exposition(void **state)
{
    struct kp_metrics *m = NULL;
    struct kp_metric *fam[KP_CM_N];
    char *out;

    (void)state;
    assert_int_equal(kp_metrics_new(&m), 0);
    register_all(m, fam);
    for (size_t i = 0; i < KP_CM_INITIAL_SERIES_N; i++)
        assert_non_null(kp_metric_labelv(fam[kp_core_initial_series[i].metric],
                                         kp_core_initial_series[i].labels));
    kp_histogram_observe(kp_metric_labelv(fam[KP_CM_VOLUNTARY_DISRUPTION_EVALUATION_DURATION],
                                          KP_CM_LABELS("underutilized", "multi")),
                         0.004);
    kp_counter_inc(kp_metric_labelv(fam[KP_CM_VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL],
                                    KP_CM_LABELS("default", "delete", "empty", "empty")));
    kp_gauge_set(
        kp_metric_labelv(fam[KP_CM_VOLUNTARY_DISRUPTION_ELIGIBLE_NODES], KP_CM_LABELS("drifted")),
        3);
    kp_gauge_set(kp_metric_labelv(fam[KP_CM_NODEPOOLS_NODES_CONSUMING_BUDGETS],
                                  KP_CM_LABELS("default", "Empty")),
                 1);
    kp_gauge_set(kp_metric_labelv(fam[KP_CM_NODEPOOLS_ALLOWED_DISRUPTIONS],
                                  KP_CM_LABELS("default", "Underutilized")),
                 2);
    out = render(m);
    if (getenv("KP_TEST_DUMP"))
        fputs(out, stderr);
    assert_has(out, "# TYPE karpenter_voluntary_disruption_decision_evaluation_duration_seconds "
                    "histogram\n");
    /* Upstream's DurationBuckets: 0.005 first, 600 last. */
    assert_has(out, "\nkarpenter_voluntary_disruption_decision_evaluation_duration_seconds_bucket{"
                    "reason=\"underutilized\",consolidation_type=\"multi\",le=\"0.005\"} 1\n");
    assert_has(out, "\nkarpenter_voluntary_disruption_decision_evaluation_duration_seconds_bucket{"
                    "reason=\"underutilized\",consolidation_type=\"multi\",le=\"600\"} 1\n");
    assert_has(out, "# TYPE karpenter_voluntary_disruption_decisions_by_nodepool_total counter\n");
    assert_has(out, "\nkarpenter_voluntary_disruption_decisions_by_nodepool_total{nodepool="
                    "\"default\",decision=\"delete\",reason=\"empty\",consolidation_type="
                    "\"empty\"} 1\n");
    assert_has(out, "# TYPE karpenter_voluntary_disruption_eligible_nodes gauge\n");
    assert_has(out, "\nkarpenter_voluntary_disruption_eligible_nodes{reason=\"drifted\"} 3\n");
    assert_has(out, "# TYPE karpenter_voluntary_disruption_consolidation_timeouts_total counter\n");
    assert_has(out, "\nkarpenter_voluntary_disruption_consolidation_timeouts_total{"
                    "consolidation_type=\"multi\"} 0\n");
    assert_has(out, "\nkarpenter_voluntary_disruption_consolidation_timeouts_total{"
                    "consolidation_type=\"single\"} 0\n");
    assert_has(out, "# TYPE karpenter_nodepools_nodes_consuming_budgets gauge\n");
    assert_has(out, "\nkarpenter_nodepools_nodes_consuming_budgets{nodepool=\"default\","
                    "reason=\"Empty\"} 1\n");
    assert_has(out, "\nkarpenter_nodepools_allowed_disruptions{nodepool=\"default\","
                    "reason=\"Underutilized\"} 2\n");
    /* The families that were there before keep their names and labels. */
    assert_has(out, "# TYPE karpenter_voluntary_disruption_decisions_total counter\n");
    assert_has(out, "# TYPE karpenter_voluntary_disruption_failed_validations_total counter\n");
    assert_has(out, "# TYPE karpenter_voluntary_disruption_queue_failures_total counter\n");
    assert_has(out, "# TYPE karpenter_nodeclaims_disrupted_total counter\n");
    assert_has(out, "# TYPE karpenter_pods_disruption_initiated_total counter\n");
    kp_free(out);
    kp_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_registers),
        cmocka_unit_test(test_disruption_exposition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
