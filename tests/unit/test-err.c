/* Tests for base/err.h: the names of codes, and kp_msg_set(), the one way error text is handed
 * back (set, replace, no-op without a destination, bounded with a cut at a character boundary,
 * text lost but nothing leaked when memory runs out). */
#include <errno.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/err.h"

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(kp_errname(-ENOENT), "ENOENT");
    assert_string_equal(kp_errname(-KP_ECONFLICT), "KP_ECONFLICT");
    assert_non_null(kp_strerror(-KP_EPARSE));
}

static void test_msg_set_and_replace(void **state)
{
    char *m = NULL;

    (void)state;
    kp_msg_set(&m, "host %s: port %d refused", "h7", 22);
    assert_string_equal(m, "host h7: port 22 refused");
    /* A second message replaces the first (the first is freed: ASan would see a leak). */
    kp_msg_set(&m, "%s", "second");
    assert_string_equal(m, "second");
    kp_msg_set(&m, "%s", "");
    assert_string_equal(m, "");
    /* The new text may be built from the old one: it is read before it is freed. */
    kp_msg_set(&m, "%s", "inner");
    kp_msg_set(&m, "outer: %s", m);
    assert_string_equal(m, "outer: inner");
    kp_free(m);
    /* No destination: nothing happens (the caller did not ask for the text). */
    kp_msg_set(NULL, "ignored %d", 1);
}

static void test_msg_bounded(void **state)
{
    size_t n = KP_MSG_MAX + 100;
    char *big = kp_malloc(n + 1), *m = NULL;

    (void)state;
    assert_non_null(big);
    /* Exactly the limit: kept whole. */
    memset(big, 'a', KP_MSG_MAX);
    big[KP_MSG_MAX] = '\0';
    kp_msg_set(&m, "%s", big);
    assert_int_equal(strlen(m), KP_MSG_MAX);
    assert_int_equal(m[KP_MSG_MAX - 1], 'a');

    /* Longer, of two-byte characters: cut to at most the limit, at a character boundary, with
     * "..." at the end. */
    for (size_t i = 0; i + 1 < n; i += 2)
        memcpy(big + i, "\xc3\xa9", 2);
    big[n - (n % 2)] = '\0';
    kp_msg_set(&m, "x%s", big);
    assert_true(strlen(m) <= KP_MSG_MAX);
    assert_true(strlen(m) >= KP_MSG_MAX - 4);
    assert_memory_equal(m + strlen(m) - 3, "...", 3);
    for (size_t i = 1; i + 3 < strlen(m); i += 2)
        assert_memory_equal(m + i, "\xc3\xa9", 2);
    kp_free(m);
    kp_free(big);
}

/* The cut lands on a continuation byte (two-byte characters from offset 0, the cut at the odd
 * offset KP_MSG_MAX - 3): it backs up one byte to the start of that character. */
static void test_msg_cut_backs_up(void **state)
{
    size_t n = KP_MSG_MAX + 100;
    char *big = kp_malloc(n + 1), *m = NULL;

    (void)state;
    assert_non_null(big);
    assert_int_equal((KP_MSG_MAX - 3) % 2, 1);
    for (size_t i = 0; i + 1 < n; i += 2)
        memcpy(big + i, "\xc3\xa9", 2);
    big[n - (n % 2)] = '\0';
    kp_msg_set(&m, "%s", big);
    assert_int_equal(strlen(m), KP_MSG_MAX - 4 + 3);
    assert_memory_equal(m + KP_MSG_MAX - 6, "\xc3\xa9...", 5);
    kp_free(m);
    kp_free(big);
}

/* Out of memory: *ret is NULL (the old text freed), nothing leaks. */
static int torture_msg_set(void)
{
    char *m = NULL;

    kp_msg_set(&m, "first %d", 1);
    if (!m)
        return -ENOMEM;
    kp_msg_set(&m, "second %d", 2);
    if (!m)
        return -ENOMEM;
    if (strcmp(m, "second 2") != 0) {
        kp_free(m);
        return -EINVAL;
    }
    kp_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_msg_set_and_replace),
        cmocka_unit_test(test_msg_bounded),
        cmocka_unit_test(test_msg_cut_backs_up),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_msg_set),
    };

    return kp_test_main("err", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
