/* Tests for base/ctx.h: cancellation and deadlines along a chain of contexts. */
#include <errno.h>
#include <pthread.h>

#include "kp-test.h"

#include "base/ctx.h"
#include "base/time.h"

/* NULL never ends; a fresh root without deadline goes on. */
static void test_null_and_fresh(void **state)
{
    struct kp_ctx root;

    (void)state;
    assert_int_equal(kp_ctx_err(NULL), 0);
    assert_true(kp_ctx_deadline(NULL).at == KP_USEC_INFINITY);
    kp_ctx_init(&root, NULL, kp_deadline_never());
    assert_int_equal(kp_ctx_err(&root), 0);
    assert_false(kp_ctx_done(&root));
    assert_true(kp_ctx_deadline(&root).at == KP_USEC_INFINITY);
}

/* Cancelling a parent ends every child; cancelling a child leaves the parent running. */
static void test_cancel_flows_down_only(void **state)
{
    struct kp_ctx root, mid, leaf, sibling;

    (void)state;
    kp_ctx_init(&root, NULL, kp_deadline_never());
    kp_ctx_init(&mid, &root, kp_deadline_never());
    kp_ctx_init(&leaf, &mid, kp_deadline_never());
    kp_ctx_init(&sibling, &root, kp_deadline_never());
    kp_ctx_cancel(&leaf);
    assert_int_equal(kp_ctx_err(&leaf), -ECANCELED);
    assert_int_equal(kp_ctx_err(&mid), 0);
    assert_int_equal(kp_ctx_err(&sibling), 0);
    kp_ctx_cancel(&root);
    kp_ctx_cancel(&root); /* idempotent */
    assert_int_equal(kp_ctx_err(&mid), -ECANCELED);
    assert_int_equal(kp_ctx_err(&sibling), -ECANCELED);
    assert_int_equal(kp_ctx_err(&root), -ECANCELED);
}

/* The earliest deadline on the chain decides; cancellation wins over an expired deadline. */
static void test_deadlines(void **state)
{
    struct kp_ctx root, child, grandchild;

    (void)state;
    kp_ctx_init(&root, NULL, kp_deadline_in(3600 * KP_USEC_PER_SEC));
    kp_ctx_init(&child, &root, kp_deadline_never());
    kp_ctx_init(&grandchild, &child, kp_deadline_in(7200 * KP_USEC_PER_SEC));
    assert_true(kp_ctx_deadline(&grandchild).at == root.deadline.at);
    assert_int_equal(kp_ctx_err(&grandchild), 0);

    kp_ctx_init(&child, &root, (struct kp_deadline){.at = 1}); /* long past */
    assert_int_equal(kp_ctx_err(&grandchild), -ETIMEDOUT);
    assert_int_equal(kp_ctx_err(&root), 0);
    assert_true(kp_ctx_deadline(&grandchild).at == 1);
    kp_ctx_cancel(&root);
    assert_int_equal(kp_ctx_err(&grandchild), -ECANCELED);
}

static void *cancel_later(void *arg)
{
    kp_sleep_usec(20 * KP_USEC_PER_MSEC);
    kp_ctx_cancel(arg);
    return NULL;
}

/* A cancel from another thread is seen by a reader polling its context. */
static void test_cancel_across_threads(void **state)
{
    struct kp_ctx root, child;
    pthread_t t;
    uint64_t start = kp_mono_usec();

    (void)state;
    kp_ctx_init(&root, NULL, kp_deadline_never());
    kp_ctx_init(&child, &root, kp_deadline_in(60 * KP_USEC_PER_SEC));
    assert_int_equal(pthread_create(&t, NULL, cancel_later, &root), 0);
    while (!kp_ctx_done(&child) && kp_mono_usec() - start < 30 * KP_USEC_PER_SEC)
        kp_sleep_usec(KP_USEC_PER_MSEC);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(kp_ctx_err(&child), -ECANCELED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_and_fresh),
        cmocka_unit_test(test_cancel_flows_down_only),
        cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_cancel_across_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
