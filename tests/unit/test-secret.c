/* DESIGN: unit tests for base/secret.c: copies, lengths, and that log redaction follows the
 * lifetime of each secret (checked through kp_log_redact_dup, the same table the log uses). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/secret.h"
#include "kp-test.h"

/* True when text s comes out of the redactor changed. */
static bool is_redacted(const char *s)
{
    char *d = kp_log_redact_dup(s);
    bool changed;

    assert_non_null(d);
    changed = strcmp(d, s) != 0;
    kp_free(d);
    return changed;
}

static int setup(void **state)
{
    (void)state;
    kp_log_redact_clear();
    return 0;
}

static void test_copy_and_reveal(void **state)
{
    char src[] = "bootstrap-token-abcdef";
    struct kp_secret *s = NULL;

    (void)state;
    assert_int_equal(kp_secret_new(src, strlen(src), &s), 0);
    assert_non_null(s);
    memset(src, 'x', sizeof(src) - 1); /* the secret holds its own copy */
    assert_string_equal(kp_secret_reveal(s), "bootstrap-token-abcdef");
    assert_int_equal(kp_secret_len(s), strlen("bootstrap-token-abcdef"));
    s = kp_secret_free(s);
    assert_null(s);
    assert_null(kp_secret_free(NULL));
}

static void test_binary_and_empty(void **state)
{
    static const char bin[] = {'a', 'b', '\0', 'c', 'd'};
    struct kp_secret *s = NULL;

    (void)state;
    assert_int_equal(kp_secret_new(bin, sizeof(bin), &s), 0);
    assert_int_equal(kp_secret_len(s), 5);
    assert_memory_equal(kp_secret_reveal(s), bin, sizeof(bin));
    assert_int_equal(kp_secret_reveal(s)[5], '\0');
    s = kp_secret_free(s);

    assert_int_equal(kp_secret_new(NULL, 0, &s), 0);
    assert_int_equal(kp_secret_len(s), 0);
    assert_string_equal(kp_secret_reveal(s), "");
    s = kp_secret_free(s);
}

static void test_redaction_follows_lifetime(void **state)
{
    const char *text = "join with token=abcdef.0123456789abcdef now";
    struct kp_secret *s = NULL;
    char *d;

    (void)state;
    assert_false(is_redacted(text));
    assert_int_equal(kp_secret_new("abcdef.0123456789abcdef", 23, &s), 0);
    d = kp_log_redact_dup(text);
    assert_non_null(d);
    assert_string_equal(d, "join with token=[REDACTED] now");
    kp_free(d);
    s = kp_secret_free(s);
    assert_false(is_redacted(text));
}

static void test_short_secret_not_registered(void **state)
{
    struct kp_secret *s7 = NULL, *s8 = NULL;

    (void)state;
    assert_int_equal(kp_secret_new("1234567", KP_LOG_REDACT_MIN - 1, &s7), 0);
    assert_false(is_redacted("a 1234567 b"));
    assert_int_equal(kp_secret_new("12345678", KP_LOG_REDACT_MIN, &s8), 0);
    assert_true(is_redacted("a 12345678 b"));
    s7 = kp_secret_free(s7);
    s8 = kp_secret_free(s8);
    assert_false(is_redacted("a 12345678 b"));
}

/* Two secrets that happen to hold the same value: freeing one keeps the other protected. */
static void test_equal_values(void **state)
{
    struct kp_secret *a = NULL, *b = NULL;

    (void)state;
    assert_int_equal(kp_secret_new("same-value-123", 14, &a), 0);
    assert_int_equal(kp_secret_new("same-value-123", 14, &b), 0);
    a = kp_secret_free(a);
    assert_true(is_redacted("x same-value-123 y"));
    b = kp_secret_free(b);
    assert_false(is_redacted("x same-value-123 y"));
}

/* A secret with an embedded NUL is registered up to the NUL (see secret.c). */
static void test_embedded_nul_prefix(void **state)
{
    static const char v[] = "prefix-part-long\0tail";
    struct kp_secret *s = NULL;

    (void)state;
    assert_int_equal(kp_secret_new(v, sizeof(v) - 1, &s), 0);
    assert_true(is_redacted("x prefix-part-long y"));
    s = kp_secret_free(s);
    assert_false(is_redacted("x prefix-part-long y"));
}

static int torture_secret_lifetime(void)
{
    struct kp_secret *a = NULL, *b = NULL;
    char *d = NULL;
    int r;

    r = kp_secret_new("torture-secret-one", 18, &a);
    if (r < 0)
        goto out;
    r = kp_secret_new("torture-secret-one", 18, &b); /* same value: a second registration */
    if (r < 0)
        goto out;
    d = kp_log_redact_dup("see torture-secret-one here");
    if (!d) {
        r = -ENOMEM;
        goto out;
    }
    if (strcmp(d, "see [REDACTED] here") != 0)
        r = -EINVAL;
out:
    kp_free(d);
    a = kp_secret_free(a);
    b = kp_secret_free(b);
    return r;
}

static int torture_secret_short_and_empty(void)
{
    struct kp_secret *a = NULL, *b = NULL;
    int r;

    r = kp_secret_new("short", 5, &a);
    if (r < 0)
        goto out;
    r = kp_secret_new("", 0, &b);
out:
    a = kp_secret_free(a);
    b = kp_secret_free(b);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_copy_and_reveal, setup),
        cmocka_unit_test_setup(test_binary_and_empty, setup),
        cmocka_unit_test_setup(test_redaction_follows_lifetime, setup),
        cmocka_unit_test_setup(test_short_secret_not_registered, setup),
        cmocka_unit_test_setup(test_equal_values, setup),
        cmocka_unit_test_setup(test_embedded_nul_prefix, setup),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_secret_lifetime),
        KP_TORTURE(torture_secret_short_and_empty),
    };

    return kp_test_main("secret", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
