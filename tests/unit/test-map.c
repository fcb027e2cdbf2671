/* Tests for base/map.h: put/get/remove semantics, growth, backward-shift deletion under churn
 * checked against a brute-force model, SipHash reference vector, allocation failures. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/map.h"

static void test_basic(void **state)
{
    struct kp_map *m = NULL;
    void *old = (void *)1;
    int a, b;

    (void)state;
    assert_int_equal(kp_map_new(&m), 0);
    assert_null(kp_map_get(m, "x"));
    assert_false(kp_map_contains(m, "x"));
    assert_null(kp_map_remove(m, "x"));
    assert_int_equal(kp_map_put(m, "x", &a, &old), 0);
    assert_null(old);
    assert_ptr_equal(kp_map_get(m, "x"), &a);
    assert_int_equal(kp_map_put(m, "x", &b, &old), 0);
    assert_ptr_equal(old, &a);
    assert_ptr_equal(kp_map_get(m, "x"), &b);
    assert_int_equal(kp_map_size(m), 1);
    assert_int_equal(kp_map_put(m, "", &a, NULL), 0);
    assert_ptr_equal(kp_map_get(m, ""), &a);
    assert_ptr_equal(kp_map_remove(m, "x"), &b);
    assert_int_equal(kp_map_size(m), 1);
    assert_null(kp_map_get(m, "x"));
    m = kp_map_free(m);
    assert_null(m);
    assert_null(kp_map_free(NULL));
}

/* Random inserts and removes against a plain array model; every key checked after each step. */
static void test_churn_model(void **state)
{
    enum { N = 300, STEPS = 20000 };
    static int present[N];
    static int values[N];
    struct kp_map *m = NULL;
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    char key[32];
    size_t live = 0;

    (void)state;
    memset(present, 0, sizeof(present));
    assert_int_equal(kp_map_new(&m), 0);
    for (int step = 0; step < STEPS; step++) {
        int k;

        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        k = (int)(rng % N);
        snprintf(key, sizeof(key), "ns/name-%d", k);
        if ((rng >> 32) & 1) {
            assert_int_equal(kp_map_put(m, key, &values[k], NULL), 0);
            if (!present[k])
                live++;
            present[k] = 1;
        } else {
            void *v = kp_map_remove(m, key);

            assert_ptr_equal(v, present[k] ? &values[k] : NULL);
            if (present[k])
                live--;
            present[k] = 0;
        }
        assert_int_equal(kp_map_size(m), live);
        if (step % 1000 == 0) {
            for (int i = 0; i < N; i++) {
                snprintf(key, sizeof(key), "ns/name-%d", i);
                assert_ptr_equal(kp_map_get(m, key), present[i] ? &values[i] : NULL);
            }
        }
    }
    /* Iteration visits each live key exactly once. */
    {
        size_t it = 0, seen = 0;
        const char *k;
        void *v;

        while (kp_map_next(m, &it, &k, &v)) {
            int idx = -1;

            assert_int_equal(sscanf(k, "ns/name-%d", &idx), 1);
            assert_true(present[idx]);
            assert_ptr_equal(v, &values[idx]);
            seen++;
        }
        assert_int_equal(seen, live);
    }
    kp_map_free(m);
}

/* Reference vector from the SipHash paper: key 00..0f, message 00..0e (15 bytes). */
static void test_siphash_vector(void **state)
{
    uint8_t key[16], msg[15];

    (void)state;
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 15; i++)
        msg[i] = (uint8_t)i;
    assert_true(kp_siphash24(msg, sizeof(msg), key) == 0xa129ca6149be45e5ULL);
    assert_true(kp_siphash24(msg, 0, key) == 0x726fdb47dd0e0e31ULL);
}

static void test_put_failure_leaves_map_unchanged(void **state)
{
    struct kp_map *m = NULL;
    int a;

    (void)state;
    assert_int_equal(kp_map_new(&m), 0);
    assert_int_equal(kp_map_put(m, "a", &a, NULL), 0);
    kp_alloc_fail_at(1);
    assert_int_equal(kp_map_put(m, "b", &a, NULL), -ENOMEM);
    kp_alloc_fail_at(0);
    assert_int_equal(kp_map_size(m), 1);
    assert_null(kp_map_get(m, "b"));
    assert_ptr_equal(kp_map_get(m, "a"), &a);
    kp_map_free(m);
}

static int torture_map(void)
{
    struct kp_map *m = NULL;
    char key[32];
    int r, dummy;

    r = kp_map_new(&m);
    if (r < 0)
        return r;
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        r = kp_map_put(m, key, &dummy, NULL);
        if (r < 0)
            goto out;
    }
    for (int i = 0; i < 40; i += 2) {
        snprintf(key, sizeof(key), "k%d", i);
        if (kp_map_remove(m, key) != &dummy) {
            r = -EINVAL;
            goto out;
        }
    }
    r = kp_map_size(m) == 20 ? 0 : -EINVAL;
out:
    kp_map_free(m);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_churn_model),
        cmocka_unit_test(test_siphash_vector),
        cmocka_unit_test(test_put_failure_leaves_map_unchanged),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_map),
    };

    return kp_test_main("map", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture), argc,
                        argv);
}
