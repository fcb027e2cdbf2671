/* Tests for http/metrics.h: the exposition format byte for byte (HELP/TYPE lines, label
 * escaping, histogram buckets, value formatting), registration rules, label lookups, hiding,
 * the series ceiling, collectors and process metrics, and lock-free updates from several
 * threads. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "http/metrics.h"

static struct kp_metrics *new_registry(void)
{
    struct kp_metrics *m = NULL;

    assert_int_equal(kp_metrics_new(&m), 0);
    return m;
}

static struct kp_metric *reg(struct kp_metrics *m, const char *name, const char *help,
                             enum kp_metric_type type, const char *const *labels)
{
    struct kp_metric *f = NULL;
    struct kp_metric_opts o = {.name = name, .help = help, .type = type, .labels = labels};

    if (type == KP_METRIC_HISTOGRAM) {
        o.buckets = KP_METRICS_DURATION_BUCKETS;
        o.nbuckets = KP_ARRAY_SIZE(KP_METRICS_DURATION_BUCKETS);
    }
    assert_int_equal(kp_metrics_register(m, &o, &f), 0);
    assert_non_null(f);
    return f;
}

static char *render(struct kp_metrics *m)
{
    struct kp_buf b = KP_BUF_INIT(KP_MAX_METRICS_BODY);

    assert_int_equal(kp_metrics_render(m, &b), 0);
    return kp_buf_steal(&b, NULL);
}

static void check_value(double v, const char *want)
{
    struct kp_buf b = KP_BUF_INIT(64);

    assert_int_equal(kp_metrics_format_value(&b, v), 0);
    assert_string_equal(kp_buf_str(&b), want);
    kp_buf_done(&b);
}

static void test_format_value(void **state)
{
    (void)state;
    check_value(0, "0");
    check_value(1, "1");
    check_value(-7, "-7");
    check_value(0.25, "0.25");
    check_value(0.1, "0.1");
    check_value(2.5, "2.5");
    check_value(600, "600");
    check_value(1e20, "1e+20");
    check_value(1.0 / 3.0, "0.33333333333333331");
    check_value(18446744073709551615.0, "1.8446744073709552e+19");
    check_value(INFINITY, "+Inf");
    check_value(-INFINITY, "-Inf");
    check_value(NAN, "NaN");
}

static void test_escape(void **state)
{
    struct kp_buf b = KP_BUF_INIT(256);

    (void)state;
    assert_int_equal(kp_metrics_escape_label(&b, "a\"b\\c\nd"), 0);
    assert_string_equal(kp_buf_str(&b), "a\\\"b\\\\c\\nd");
    kp_buf_reset(&b);
    assert_int_equal(kp_metrics_escape_help(&b, "say \"hi\"\\\nnow"), 0);
    assert_string_equal(kp_buf_str(&b), "say \"hi\"\\\\\\nnow");
    kp_buf_reset(&b);
    assert_int_equal(kp_metrics_escape_label(&b, ""), 0);
    assert_string_equal(kp_buf_str(&b), "");
    kp_buf_done(&b);
}

static void test_names(void **state)
{
    (void)state;
    assert_true(kp_metrics_valid_name("kpssh_pool_hosts", false));
    assert_true(kp_metrics_valid_name("a:b_c9", false));
    assert_true(kp_metrics_valid_name("_x", false));
    assert_false(kp_metrics_valid_name("", false));
    assert_false(kp_metrics_valid_name("9a", false));
    assert_false(kp_metrics_valid_name("a-b", false));
    assert_false(kp_metrics_valid_name("a b", false));
    assert_true(kp_metrics_valid_name("state", true));
    assert_false(kp_metrics_valid_name("a:b", true));
    assert_false(kp_metrics_valid_name("__name__", true));
}

/* The whole output for every kind of family, byte for byte. */
static void test_render_exact(void **state)
{
    static const double buckets[] = {0.5, 1, 2.5};
    struct kp_metrics *m = new_registry();
    struct kp_metric *c, *g, *h, *hl, *empty;
    char *out;

    (void)state;
    c = reg(m, "kpssh_things_total", "Things done.", KP_METRIC_COUNTER, NULL);
    g = reg(m, "kpssh_pool_hosts", "Hosts by state and class.\nSecond \\ line.", KP_METRIC_GAUGE,
            (const char *const[]){"state", "class", NULL});
    assert_int_equal(kp_metrics_register(m,
                                         &(struct kp_metric_opts){.name = "kpssh_phase_seconds",
                                                                  .help = "Phase durations.",
                                                                  .type = KP_METRIC_HISTOGRAM,
                                                                  .buckets = buckets,
                                                                  .nbuckets = 3},
                                         &h),
                     0);
    hl = reg(m, "kpssh_probe_seconds", "Probe durations.", KP_METRIC_HISTOGRAM,
             (const char *const[]){"outcome", NULL});
    empty =
        reg(m, "kpssh_empty", "No series yet.", KP_METRIC_GAUGE, (const char *const[]){"x", NULL});
    (void)empty;

    kp_counter_inc(kp_metric_series(c));
    kp_counter_add(kp_metric_series(c), 41);
    kp_gauge_set(kp_metric_labels(g, "Available", "small", NULL), 3);
    kp_gauge_set(kp_metric_labels(g, "Unhealthy", "small", NULL), 1);
    kp_gauge_set(kp_metric_labels(g, "Available", "big \"q\"\\\n", NULL), 0.5);
    kp_gauge_add(kp_metric_labels(g, "Available", "small", NULL), -1);
    kp_histogram_observe(kp_metric_series(h), 0.25);
    kp_histogram_observe(kp_metric_series(h), 1);
    kp_histogram_observe(kp_metric_series(h), 2);
    kp_histogram_observe(kp_metric_series(h), 100);
    kp_histogram_observe(kp_metric_labels(hl, "success", NULL), 0.3);

    out = render(m);
    if (getenv("KP_TEST_DUMP"))
        fputs(out, stderr);
    assert_string_equal(out,
                        "# HELP kpssh_things_total Things done.\n"
                        "# TYPE kpssh_things_total counter\n"
                        "kpssh_things_total 42\n"
                        "# HELP kpssh_pool_hosts Hosts by state and class.\\nSecond \\\\ line.\n"
                        "# TYPE kpssh_pool_hosts gauge\n"
                        "kpssh_pool_hosts{state=\"Available\",class=\"big \\\"q\\\"\\\\\\n\"} 0.5\n"
                        "kpssh_pool_hosts{state=\"Available\",class=\"small\"} 2\n"
                        "kpssh_pool_hosts{state=\"Unhealthy\",class=\"small\"} 1\n"
                        "# HELP kpssh_phase_seconds Phase durations.\n"
                        "# TYPE kpssh_phase_seconds histogram\n"
                        "kpssh_phase_seconds_bucket{le=\"0.5\"} 1\n"
                        "kpssh_phase_seconds_bucket{le=\"1\"} 2\n"
                        "kpssh_phase_seconds_bucket{le=\"2.5\"} 3\n"
                        "kpssh_phase_seconds_bucket{le=\"+Inf\"} 4\n"
                        "kpssh_phase_seconds_sum 103.25\n"
                        "kpssh_phase_seconds_count 4\n"
                        "# HELP kpssh_probe_seconds Probe durations.\n"
                        "# TYPE kpssh_probe_seconds histogram\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"0.25\"} 0\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"0.5\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"1\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"2.5\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"5\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"10\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"30\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"60\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"120\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"300\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"600\"} 1\n"
                        "kpssh_probe_seconds_bucket{outcome=\"success\",le=\"+Inf\"} 1\n"
                        "kpssh_probe_seconds_sum{outcome=\"success\"} 0.3\n"
                        "kpssh_probe_seconds_count{outcome=\"success\"} 1\n"
                        "# HELP kpssh_empty No series yet.\n"
                        "# TYPE kpssh_empty gauge\n");
    kp_free(out);
    assert_int_equal(kp_histogram_count(kp_metric_series(h)), 4);
    assert_true(kp_histogram_sum(kp_metric_series(h)) == 103.25);
    kp_metrics_free(m);
}

static void test_register_rules(void **state)
{
    static const double bad_order[] = {1, 1};
    static const double inf[] = {1, INFINITY};
    struct kp_metrics *m = new_registry();
    struct kp_metric *f = NULL;

    (void)state;
    reg(m, "x_total", "x", KP_METRIC_COUNTER, NULL);
    assert_int_equal(
        kp_metrics_register(m, &(struct kp_metric_opts){.name = "x_total", .help = "y"}, &f),
        -EEXIST);
    assert_int_equal(
        kp_metrics_register(m, &(struct kp_metric_opts){.name = "1x", .help = "y"}, NULL), -EINVAL);
    assert_int_equal(kp_metrics_register(m, &(struct kp_metric_opts){.name = "nohelp"}, NULL),
                     -EINVAL);
    assert_int_equal(kp_metrics_register(
                         m,
                         &(struct kp_metric_opts){.name = "dup",
                                                  .help = "h",
                                                  .labels = (const char *const[]){"a", "a", NULL}},
                         NULL),
                     -EINVAL);
    assert_int_equal(
        kp_metrics_register(m,
                            &(struct kp_metric_opts){.name = "bad_label",
                                                     .help = "h",
                                                     .labels = (const char *const[]){"a-b", NULL}},
                            NULL),
        -EINVAL);
    assert_int_equal(
        kp_metrics_register(m,
                            &(struct kp_metric_opts){.name = "h_le",
                                                     .help = "h",
                                                     .type = KP_METRIC_HISTOGRAM,
                                                     .labels = (const char *const[]){"le", NULL},
                                                     .buckets = KP_METRICS_DURATION_BUCKETS,
                                                     .nbuckets = 11},
                            NULL),
        -EINVAL);
    assert_int_equal(kp_metrics_register(m,
                                         &(struct kp_metric_opts){.name = "h_order",
                                                                  .help = "h",
                                                                  .type = KP_METRIC_HISTOGRAM,
                                                                  .buckets = bad_order,
                                                                  .nbuckets = 2},
                                         NULL),
                     -EINVAL);
    assert_int_equal(kp_metrics_register(m,
                                         &(struct kp_metric_opts){.name = "h_inf",
                                                                  .help = "h",
                                                                  .type = KP_METRIC_HISTOGRAM,
                                                                  .buckets = inf,
                                                                  .nbuckets = 2},
                                         NULL),
                     -EINVAL);
    assert_int_equal(
        kp_metrics_register(
            m, &(struct kp_metric_opts){.name = "h_none", .help = "h", .type = KP_METRIC_HISTOGRAM},
            NULL),
        -EINVAL);
    assert_int_equal(kp_metrics_register(m,
                                         &(struct kp_metric_opts){.name = "g_buckets",
                                                                  .help = "h",
                                                                  .type = KP_METRIC_GAUGE,
                                                                  .buckets = inf,
                                                                  .nbuckets = 2},
                                         NULL),
                     -EINVAL);
    kp_metrics_free(m);
}

static void test_labels_lookup(void **state)
{
    struct kp_metrics *m = new_registry();
    struct kp_metric *g, *c;
    struct kp_series *a, *b;

    (void)state;
    g = reg(m, "g", "g", KP_METRIC_GAUGE, (const char *const[]){"a", "b", NULL});
    c = reg(m, "c_total", "c", KP_METRIC_COUNTER, NULL);
    a = kp_metric_labels(g, "1", "2", NULL);
    b = kp_metric_labels(g, "1", "2", NULL);
    assert_non_null(a);
    assert_ptr_equal(a, b);
    assert_ptr_equal(kp_metric_labelv(g, (const char *const[]){"1", "2"}), a);
    assert_ptr_not_equal(kp_metric_labels(g, "2", "1", NULL), a);
    /* Wrong counts, NULL families and labelled families asked for their single series. */
    assert_null(kp_metric_labels(g, "1", NULL));
    assert_null(kp_metric_labels(g, "1", "2", "3", NULL));
    assert_null(kp_metric_series(g));
    assert_null(kp_metric_labels(NULL, "x", NULL));
    assert_int_equal(kp_metrics_dropped(m), 2);
    assert_ptr_equal(kp_metric_labels(c, NULL), kp_metric_series(c));
    /* Updates of NULL do nothing. */
    kp_counter_inc(NULL);
    kp_gauge_set(NULL, 1);
    kp_histogram_observe(NULL, 1);
    kp_series_hide(NULL);
    kp_metrics_free(m);
}

static void test_hide(void **state)
{
    struct kp_metrics *m = new_registry();
    struct kp_metric *g;
    struct kp_series *s;
    char *out;

    (void)state;
    g = reg(m, "g", "g", KP_METRIC_GAUGE, (const char *const[]){"a", NULL});
    s = kp_metric_labels(g, "x", NULL);
    kp_gauge_set(s, 5);
    kp_gauge_set(kp_metric_labels(g, "y", NULL), 6);
    kp_series_hide(s);
    out = render(m);
    assert_string_equal(out, "# HELP g g\n# TYPE g gauge\ng{a=\"y\"} 6\n");
    kp_free(out);
    kp_gauge_set(s, 7);
    out = render(m);
    assert_string_equal(out, "# HELP g g\n# TYPE g gauge\ng{a=\"x\"} 7\ng{a=\"y\"} 6\n");
    kp_free(out);
    assert_true(kp_gauge_get(s) == 7);
    kp_metrics_free(m);
}

static void test_series_ceiling(void **state)
{
    struct kp_metrics *m = new_registry();
    struct kp_metric *c;
    char name[32];
    unsigned i;

    (void)state;
    c = reg(m, "c_total", "c", KP_METRIC_COUNTER, (const char *const[]){"host", NULL});
    for (i = 0; i < KP_METRICS_MAX_SERIES; i++) {
        (void)snprintf(name, sizeof(name), "h%u", i);
        assert_non_null(kp_metric_labels(c, name, NULL));
    }
    assert_null(kp_metric_labels(c, "one-too-many", NULL));
    assert_non_null(kp_metric_labels(c, "h7", NULL)); /* existing ones still resolve */
    assert_int_equal(kp_metrics_dropped(m), 1);
    kp_metrics_free(m);
}

static void test_render_limit(void **state)
{
    struct kp_metrics *m = new_registry();
    struct kp_buf b = KP_BUF_INIT(40);

    (void)state;
    reg(m, "a_long_enough_metric_name_total", "help text that is long", KP_METRIC_COUNTER, NULL);
    assert_int_equal(kp_metrics_render(m, &b), -KP_ELIMIT);
    assert_null(b.data);
    kp_metrics_free(m);
}

static void collect_answer(struct kp_metrics *m, void *ctx)
{
    (void)m;
    kp_gauge_set(ctx, 42);
}

static void test_collector_and_process(void **state)
{
    struct kp_metrics *m = new_registry();
    struct kp_metric *g;
    char *out;

    (void)state;
    g = reg(m, "answer", "computed on scrape", KP_METRIC_GAUGE, NULL);
    assert_int_equal(kp_metrics_add_collector(m, collect_answer, kp_metric_series(g)), 0);
    assert_int_equal(kp_metrics_add_process(m), 0);
    assert_int_equal(kp_metrics_add_process(m), -EEXIST);
    out = render(m);
    assert_non_null(strstr(out, "\nanswer 42\n"));
    assert_non_null(strstr(out, "# TYPE process_cpu_seconds_total counter\n"));
    assert_non_null(strstr(out, "# TYPE process_resident_memory_bytes gauge\nprocess_resident_"));
    assert_non_null(strstr(out, "\nprocess_open_fds "));
    assert_non_null(strstr(out, "\nprocess_max_fds "));
    assert_non_null(strstr(out, "\nprocess_start_time_seconds 1"));
    assert_null(strstr(out, "process_resident_memory_bytes 0\n"));
    kp_free(out);
    kp_metrics_free(m);
}

#define THREADS 4
#define PER_THREAD 20000

struct hammer {
    struct kp_metric *c, *h, *g;
};

static void *hammer_fn(void *arg)
{
    struct hammer *hm = arg;
    int i;

    for (i = 0; i < PER_THREAD; i++) {
        kp_counter_inc(kp_metric_labels(hm->c, i % 2 ? "odd" : "even", NULL));
        kp_histogram_observe(kp_metric_series(hm->h), 1.5);
        kp_gauge_add(kp_metric_series(hm->g), 0.5);
    }
    return NULL;
}

static void test_threads(void **state)
{
    struct kp_metrics *m = new_registry();
    struct hammer hm;
    pthread_t t[THREADS];
    struct kp_buf b = KP_BUF_INIT(KP_MAX_METRICS_BODY);
    int i;

    (void)state;
    hm.c = reg(m, "c_total", "c", KP_METRIC_COUNTER, (const char *const[]){"parity", NULL});
    hm.h = reg(m, "h_seconds", "h", KP_METRIC_HISTOGRAM, NULL);
    hm.g = reg(m, "g", "g", KP_METRIC_GAUGE, NULL);
    for (i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer_fn, &hm), 0);
    for (i = 0; i < 20; i++) { /* renders race with the updates */
        assert_int_equal(kp_metrics_render(m, &b), 0);
        kp_buf_reset(&b);
    }
    for (i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    kp_buf_done(&b);
    assert_int_equal(kp_counter_get(kp_metric_labels(hm.c, "odd", NULL)), THREADS * PER_THREAD / 2);
    assert_int_equal(kp_counter_get(kp_metric_labels(hm.c, "even", NULL)),
                     THREADS * PER_THREAD / 2);
    assert_int_equal(kp_histogram_count(kp_metric_series(hm.h)), THREADS * PER_THREAD);
    assert_true(kp_histogram_sum(kp_metric_series(hm.h)) == 1.5 * THREADS * PER_THREAD);
    assert_true(kp_gauge_get(kp_metric_series(hm.g)) == 0.5 * THREADS * PER_THREAD);
    kp_metrics_free(m);
}

/* Torture: build a registry with every kind of family and render it. */
static int torture_registry(void)
{
    struct kp_metrics *m = NULL;
    struct kp_metric *g = NULL, *h = NULL;
    struct kp_buf b = KP_BUF_INIT(KP_MAX_METRICS_BODY);
    int r;

    if ((r = kp_metrics_new(&m)) < 0)
        return r;
    r = kp_metrics_register(m,
                            &(struct kp_metric_opts){.name = "g",
                                                     .help = "g",
                                                     .type = KP_METRIC_GAUGE,
                                                     .labels = (const char *const[]){"a", NULL}},
                            &g);
    if (r == 0)
        r = kp_metrics_register(m,
                                &(struct kp_metric_opts){.name = "h",
                                                         .help = "h",
                                                         .type = KP_METRIC_HISTOGRAM,
                                                         .buckets = KP_METRICS_DURATION_BUCKETS,
                                                         .nbuckets = 11},
                                &h);
    if (r == 0)
        r = kp_metrics_add_process(m);
    if (r == 0) {
        kp_gauge_set(kp_metric_labels(g, "x", NULL), 1);
        kp_histogram_observe(kp_metric_series(h), 3);
        r = kp_metrics_render(m, &b);
    }
    kp_buf_done(&b);
    kp_metrics_free(m);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_value),   cmocka_unit_test(test_escape),
        cmocka_unit_test(test_names),          cmocka_unit_test(test_render_exact),
        cmocka_unit_test(test_register_rules), cmocka_unit_test(test_labels_lookup),
        cmocka_unit_test(test_hide),           cmocka_unit_test(test_series_ceiling),
        cmocka_unit_test(test_render_limit),   cmocka_unit_test(test_collector_and_process),
        cmocka_unit_test(test_threads),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_registry),
    };

    return kp_test_main("metrics", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
