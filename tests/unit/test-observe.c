/* Tests for core/observe.c: the table of Karpenter's metric families is complete and well formed
 * (every enum value has a family named karpenter_*, label counts match the NULL-terminated
 * lists, histograms carry strictly increasing buckets), since kpssh-controller registers it
 * as is and a dashboard's query depends on each name and label. */
#include "kp-test.h"

#include <string.h>

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

/* kpssh-controller registers every family of the table as cmd/controller/core.c does; a family
 * the registry refuses (too many buckets, a bad name) would stop the controller at start-up. */
static void test_registers(void **state)
{
    struct kp_metrics *m = NULL;

    (void)state;
    assert_int_equal(kp_metrics_new(&m), 0);
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
        struct kp_metric *f = NULL;

        assert_int_equal(kp_metrics_register(m, &o, &f), 0);
    }
    kp_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_registers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
