/* Tests for k8s/workqueue.h: dedup, dirty-while-processing, delayed adds, backoff and forget,
 * shutdown, and a multi-threaded check that no key is ever processed by two workers at once
 * (also run under the tsan preset). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/time.h"
#include "k8s/workqueue.h"

static struct kp_workqueue *new_queue(void)
{
    struct kp_workqueue_options o = {
        .backoff_base_usec = 1000, .backoff_cap_usec = 8000, .qps = -1};
    struct kp_workqueue *q = NULL;

    assert_int_equal(kp_workqueue_new(&o, &q), 0);
    return q;
}

static void finish(struct kp_workqueue *q)
{
    kp_workqueue_shutdown(q);
    kp_workqueue_wait_idle(q);
    kp_workqueue_free(q);
}

static void test_dedup_and_order(void **state)
{
    struct kp_workqueue *q = new_queue();
    struct kp_workqueue_stats st;
    const char *k;

    (void)state;
    assert_int_equal(kp_workqueue_add(q, "ns/a"), 0);
    assert_int_equal(kp_workqueue_add(q, "ns/b"), 0);
    assert_int_equal(kp_workqueue_add(q, "ns/a"), 0);
    kp_workqueue_get_stats(q, &st);
    assert_int_equal(st.depth, 2);
    assert_int_equal(kp_workqueue_get(q, &k), 0);
    assert_string_equal(k, "ns/a");
    kp_workqueue_done(q, k);
    assert_int_equal(kp_workqueue_get(q, &k), 0);
    assert_string_equal(k, "ns/b");
    kp_workqueue_done(q, k);
    kp_workqueue_get_stats(q, &st);
    assert_int_equal(st.depth, 0);
    assert_int_equal(st.processing, 0);
    finish(q);
}

static void test_add_while_processing(void **state)
{
    struct kp_workqueue *q = new_queue();
    struct kp_workqueue_stats st;
    const char *k;

    (void)state;
    assert_int_equal(kp_workqueue_add(q, "x"), 0);
    assert_int_equal(kp_workqueue_get(q, &k), 0);
    /* Added while a worker holds it: not handed out again until done. */
    assert_int_equal(kp_workqueue_add(q, "x"), 0);
    assert_int_equal(kp_workqueue_add(q, "x"), 0);
    kp_workqueue_get_stats(q, &st);
    assert_int_equal(st.depth, 0);
    assert_int_equal(st.processing, 1);
    kp_workqueue_done(q, "x");
    kp_workqueue_get_stats(q, &st);
    assert_int_equal(st.depth, 1);
    assert_int_equal(kp_workqueue_get(q, &k), 0);
    assert_string_equal(k, "x");
    kp_workqueue_done(q, k);
    kp_workqueue_get_stats(q, &st);
    assert_int_equal(st.depth, 0);
    finish(q);
}

static void test_add_after(void **state)
{
    struct kp_workqueue *q = new_queue();
    struct kp_workqueue_stats st;
    uint64_t t0 = kp_mono_usec();
    const char *k;

    (void)state;
    assert_int_equal(kp_workqueue_add_after(q, "late", 40000), 0);
    assert_int_equal(kp_workqueue_add_after(q, "early", 20000), 0);
    /* A later delay for a key with an earlier one pending changes nothing. */
    assert_int_equal(kp_workqueue_add_after(q, "early", 10000000), 0);
    kp_workqueue_get_stats(q, &st);
    assert_int_equal(st.depth, 0);
    assert_int_equal(st.delayed, 2);
    assert_int_equal(kp_workqueue_get(q, &k), 0);
    assert_string_equal(k, "early");
    assert_true(kp_mono_usec() - t0 >= 20000);
    kp_workqueue_done(q, k);
    assert_int_equal(kp_workqueue_get(q, &k), 0);
    assert_string_equal(k, "late");
    assert_true(kp_mono_usec() - t0 >= 40000);
    kp_workqueue_done(q, k);
    kp_workqueue_get_stats(q, &st);
    assert_int_equal(st.delayed, 0);
    finish(q);
}

static void test_rate_limited_backoff(void **state)
{
    struct kp_workqueue *q = new_queue();
    const char *k;

    (void)state;
    for (unsigned i = 1; i <= 5; i++) {
        uint64_t t0 = kp_mono_usec();
        /* Delay for the i-th failure: 1 ms * 2^(i-1), capped at 8 ms. */
        uint64_t expect = KP_MIN(1000ULL << (i - 1), 8000ULL);

        assert_int_equal(kp_workqueue_add_rate_limited(q, "r"), 0);
        assert_int_equal(kp_workqueue_failures(q, "r"), i);
        assert_int_equal(kp_workqueue_get(q, &k), 0);
        assert_true(kp_mono_usec() - t0 >= expect);
        kp_workqueue_done(q, k);
    }
    kp_workqueue_forget(q, "r");
    assert_int_equal(kp_workqueue_failures(q, "r"), 0);
    finish(q);
}

static void test_global_bucket(void **state)
{
    struct kp_workqueue_options o = {.backoff_base_usec = 1, .qps = 100, .burst = 2};
    struct kp_workqueue *q = NULL;
    uint64_t t0;
    const char *k;
    char key[16];

    (void)state;
    assert_int_equal(kp_workqueue_new(&o, &q), 0);
    t0 = kp_mono_usec();
    /* Burst of 2 goes at once; the next 3 wait for tokens at 100/s: >= 30 ms in all. */
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(kp_workqueue_add_rate_limited(q, key), 0);
    }
    for (int i = 0; i < 5; i++) {
        assert_int_equal(kp_workqueue_get(q, &k), 0);
        kp_workqueue_done(q, k);
    }
    assert_true(kp_mono_usec() - t0 >= 29000);
    finish(q);
}

static void *blocked_getter(void *arg)
{
    struct kp_workqueue *q = arg;
    const char *k;
    intptr_t r = kp_workqueue_get(q, &k);

    return (void *)r;
}

static void test_shutdown(void **state)
{
    struct kp_workqueue *q = new_queue();
    pthread_t t;
    void *res;

    (void)state;
    assert_int_equal(pthread_create(&t, NULL, blocked_getter, q), 0);
    kp_sleep_usec(10000);
    kp_workqueue_shutdown(q);
    assert_int_equal(pthread_join(t, &res), 0);
    assert_int_equal((intptr_t)res, -ESHUTDOWN);
    assert_int_equal(kp_workqueue_add(q, "x"), -ESHUTDOWN);
    assert_int_equal(kp_workqueue_add_after(q, "x", 10), -ESHUTDOWN);
    assert_int_equal(kp_workqueue_add_rate_limited(q, "x"), -ESHUTDOWN);
    kp_workqueue_wait_idle(q);
    kp_workqueue_free(q);
}

/* A key added again while a worker holds it, whose worker finishes during shutdown, is served
 * once the queue reopens, and later adds of it still work (a replica that leads again). */
static void test_dirty_across_reopen(void **state)
{
    struct kp_workqueue *q = new_queue();
    struct kp_workqueue_stats st;
    const char *k;

    (void)state;
    assert_int_equal(kp_workqueue_add(q, "nc"), 0);
    assert_int_equal(kp_workqueue_get(q, &k), 0);
    assert_string_equal(k, "nc");
    assert_int_equal(kp_workqueue_add(q, "nc"), 0); /* dirty while processing */
    kp_workqueue_shutdown(q);
    kp_workqueue_done(q, "nc");
    assert_int_equal(kp_workqueue_get(q, &k), -ESHUTDOWN);
    kp_workqueue_wait_idle(q);
    kp_workqueue_reopen(q);
    kp_workqueue_get_stats(q, &st);
    assert_int_equal(st.depth, 1); /* checked first: get() would wait for ever */
    assert_int_equal(kp_workqueue_get(q, &k), 0);
    assert_string_equal(k, "nc");
    kp_workqueue_done(q, "nc");
    assert_int_equal(kp_workqueue_add(q, "nc"), 0);
    kp_workqueue_get_stats(q, &st);
    assert_int_equal(st.depth, 1);
    assert_int_equal(kp_workqueue_get(q, &k), 0);
    assert_string_equal(k, "nc");
    kp_workqueue_done(q, "nc");
    kp_workqueue_shutdown(q);
    kp_workqueue_wait_idle(q);
    kp_workqueue_free(q);
}

/* --- concurrency: many producers and workers, 16 keys -------------------------------------- */
#define NKEYS 16
#define NWORKERS 4
#define NPRODUCERS 3
#define NADDS 3000

struct conc {
    struct kp_workqueue *q;
    atomic_int busy[NKEYS];
    atomic_int overlaps;
    atomic_int processed;
    atomic_int producers_left;
};

static void *producer(void *arg)
{
    struct conc *c = arg;
    uint64_t rng = (uint64_t)(uintptr_t)&rng | 1;
    char key[16];

    for (int i = 0; i < NADDS; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        snprintf(key, sizeof(key), "k%d", (int)(rng % NKEYS));
        if (kp_workqueue_add(c->q, key) < 0)
            break;
    }
    atomic_fetch_sub(&c->producers_left, 1);
    return NULL;
}

static void *worker(void *arg)
{
    struct conc *c = arg;
    const char *k;

    while (kp_workqueue_get(c->q, &k) == 0) {
        int idx = -1;

        if (sscanf(k, "k%d", &idx) == 1 && idx >= 0 && idx < NKEYS) {
            if (atomic_fetch_add(&c->busy[idx], 1) != 0)
                atomic_fetch_add(&c->overlaps, 1);
            kp_sleep_usec(50);
            atomic_fetch_sub(&c->busy[idx], 1);
        }
        atomic_fetch_add(&c->processed, 1);
        kp_workqueue_done(c->q, k);
    }
    return NULL;
}

static void test_never_two_workers(void **state)
{
    static struct conc c;
    pthread_t w[NWORKERS], p[NPRODUCERS];
    struct kp_workqueue_stats st;

    (void)state;
    memset(&c, 0, sizeof(c));
    c.q = new_queue();
    atomic_store(&c.producers_left, NPRODUCERS);
    for (int i = 0; i < NWORKERS; i++)
        assert_int_equal(pthread_create(&w[i], NULL, worker, &c), 0);
    for (int i = 0; i < NPRODUCERS; i++)
        assert_int_equal(pthread_create(&p[i], NULL, producer, &c), 0);
    for (int i = 0; i < NPRODUCERS; i++)
        pthread_join(p[i], NULL);
    /* Let the workers drain what is queued, then stop them. */
    for (;;) {
        kp_workqueue_get_stats(c.q, &st);
        if (st.depth == 0 && st.processing == 0)
            break;
        kp_sleep_usec(1000);
    }
    kp_workqueue_shutdown(c.q);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(w[i], NULL);
    assert_int_equal(atomic_load(&c.overlaps), 0);
    /* Dedup folds adds together, so fewer runs than adds, but at least one per key. */
    assert_true(atomic_load(&c.processed) >= NKEYS);
    assert_true(atomic_load(&c.processed) <= NPRODUCERS * NADDS);
    kp_workqueue_wait_idle(c.q);
    kp_workqueue_free(c.q);
}

static int torture_workqueue(void)
{
    struct kp_workqueue *q = NULL;
    const char *k;
    int r;

    r = kp_workqueue_new(NULL, &q);
    if (r < 0)
        return r;
    if ((r = kp_workqueue_add(q, "a")) < 0 || (r = kp_workqueue_add(q, "b")) < 0 ||
        (r = kp_workqueue_add_after(q, "c", 1)) < 0 ||
        (r = kp_workqueue_add_rate_limited(q, "d")) < 0)
        goto out;
    r = kp_workqueue_get(q, &k);
    if (r < 0)
        goto out;
    kp_workqueue_done(q, k);
    kp_workqueue_forget(q, "d");
out:
    kp_workqueue_shutdown(q);
    kp_workqueue_wait_idle(q);
    kp_workqueue_free(q);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dedup_and_order),     cmocka_unit_test(test_add_while_processing),
        cmocka_unit_test(test_add_after),           cmocka_unit_test(test_rate_limited_backoff),
        cmocka_unit_test(test_global_bucket),       cmocka_unit_test(test_shutdown),
        cmocka_unit_test(test_dirty_across_reopen), cmocka_unit_test(test_never_two_workers),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_workqueue),
    };

    return kp_test_main("workqueue", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture),
                        argc, argv);
}
