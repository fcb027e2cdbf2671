/* Tests for base/alloc.h and base/err.h: failure injection fires once at the n-th call, live
 * counting, overflow checks, wipe, and error names for errno and KP_E* codes. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/err.h"

static void test_fail_at(void **state)
{
    void *a, *b, *c;

    (void)state;
    kp_alloc_fail_at(2);
    a = kp_malloc(8);
    assert_non_null(a);
    assert_false(kp_alloc_failed());
    b = kp_malloc(8);
    assert_null(b);
    assert_int_equal(errno, ENOMEM);
    assert_true(kp_alloc_failed());
    c = kp_malloc(8);
    assert_non_null(c);
    kp_free(a);
    kp_free(c);
    kp_alloc_fail_at(0);
}

static void test_live_count(void **state)
{
    int64_t live = kp_alloc_live();
    char *s, *t;

    (void)state;
    s = kp_strdup("hello");
    t = kp_strndup("hello world", 5);
    assert_string_equal(t, "hello");
    assert_int_equal(kp_alloc_live(), live + 2);
    s = kp_realloc(s, 4096);
    assert_non_null(s);
    assert_int_equal(kp_alloc_live(), live + 2);
    kp_free(s);
    kp_free(t);
    kp_free(NULL);
    assert_int_equal(kp_alloc_live(), live);
}

static void test_overflow(void **state)
{
    (void)state;
    assert_null(kp_calloc(SIZE_MAX / 2, 4));
    assert_null(kp_reallocarray(NULL, SIZE_MAX / 2, 4));
}

/* kp_grow_array: unchanged while there is room, first elements from empty, doubled when full,
 * NULL with the array and the capacity kept when the doubling would overflow. */
static void test_grow_array(void **state)
{
    size_t cap = 0, big = SIZE_MAX / 2 + 1;
    int *v = NULL, *nv;

    (void)state;
    v = kp_grow_array(v, &cap, 0, sizeof(*v), 3);
    assert_non_null(v);
    assert_int_equal(cap, 3);
    assert_ptr_equal(kp_grow_array(v, &cap, 2, sizeof(*v), 3), v);
    assert_int_equal(cap, 3);
    for (int i = 0; i < 3; i++)
        v[i] = i;
    v = kp_grow_array(v, &cap, 3, sizeof(*v), 3);
    assert_non_null(v);
    assert_int_equal(cap, 6);
    assert_int_equal(v[2], 2);
    nv = kp_grow_array(v, &big, SIZE_MAX / 2 + 1, sizeof(*v), 3);
    assert_null(nv);
    assert_int_equal(big, SIZE_MAX / 2 + 1);
    kp_free(v);
}

static void test_wipe(void **state)
{
    char buf[16];

    (void)state;
    memset(buf, 'x', sizeof(buf));
    kp_wipe(buf, sizeof(buf));
    for (size_t i = 0; i < sizeof(buf); i++)
        assert_int_equal(buf[i], 0);
    kp_wipe(NULL, 10);
}

static void test_errors(void **state)
{
    (void)state;
    assert_string_equal(kp_errname(-ENOENT), "ENOENT");
    assert_string_equal(kp_errname(-KP_ECONFLICT), "KP_ECONFLICT");
    assert_string_equal(kp_strerror(-KP_ELIMIT), "size limit exceeded");
    assert_string_equal(kp_strerror(KP_EHOSTKEY), "host key mismatch");
    assert_string_equal(kp_strerror(0), "success");
    assert_string_equal(kp_strerror(-999999), "unknown error");
    /* Every KP_E* code has a name and a text. */
    for (int r = KP_ERR_BASE; r < KP_ERR_END; r++) {
        assert_non_null(kp_errname(-r));
        assert_non_null(kp_strerror(-r));
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_at),  cmocka_unit_test(test_live_count),
        cmocka_unit_test(test_overflow), cmocka_unit_test(test_wipe),
        cmocka_unit_test(test_errors),   cmocka_unit_test(test_grow_array),
    };

    return kp_test_main("alloc", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
