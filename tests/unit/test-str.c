/* DESIGN: unit tests for base/str.c.
 *
 * The number parsers are tested from tables: each row is an input given as (bytes, length), so
 * embedded NULs and inputs without a terminator are expressed exactly, plus the expected return
 * and value. Every failing row also checks that the output was left untouched (str.h: outputs
 * are written only on success). The allocating helpers get cmocka tests for their results and
 * torture cases that fail each of their allocations in turn. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "kp-test.h"

#define SENTINEL_U64 UINT64_C(0xdeadbeefcafef00d)
#define SENTINEL_U32 UINT32_C(0xdeadbeef)
#define SENTINEL_I64 INT64_C(-0x1234567890abcde)

/* An input given as a string literal with its exact length (the literal's terminator excluded),
 * so "1\0002" is three bytes. */
#define IN(lit) lit, sizeof(lit) - 1

/* --- comparisons -------------------------------------------------------------------------- */

static void test_streq(void **state)
{
    (void)state;
    assert_true(kp_streq(NULL, NULL));
    assert_false(kp_streq(NULL, ""));
    assert_false(kp_streq("", NULL));
    assert_true(kp_streq("", ""));
    assert_true(kp_streq("abc", "abc"));
    assert_false(kp_streq("abc", "abd"));
    assert_false(kp_streq("abc", "ab"));
    assert_false(kp_streq("ab", "abc"));
}

static void test_startswith(void **state)
{
    const char *s = "foobar";

    (void)state;
    assert_ptr_equal(kp_startswith(s, "foo"), s + 3);
    assert_string_equal(kp_startswith(s, "foo"), "bar");
    assert_ptr_equal(kp_startswith(s, ""), s);
    assert_ptr_equal(kp_startswith(s, "foobar"), s + 6);
    assert_string_equal(kp_startswith(s, "foobar"), "");
    assert_null(kp_startswith(s, "foobarx"));
    assert_null(kp_startswith(s, "bar"));
    assert_null(kp_startswith(s, "Foo"));
    assert_null(kp_startswith("", "a"));
    assert_string_equal(kp_startswith("", ""), "");
}

static void test_endswith(void **state)
{
    (void)state;
    assert_true(kp_endswith("foobar", "bar"));
    assert_true(kp_endswith("foobar", "foobar"));
    assert_true(kp_endswith("foobar", ""));
    assert_true(kp_endswith("", ""));
    assert_false(kp_endswith("bar", "foobar"));
    assert_false(kp_endswith("foobar", "baz"));
    assert_false(kp_endswith("foobar", "Bar"));
    assert_false(kp_endswith("", "a"));
    assert_true(kp_endswith("a.yaml.yaml", ".yaml"));
}

static void test_memeq_str(void **state)
{
    (void)state;
    assert_true(kp_memeq_str("abc", 3, "abc"));
    /* Only the first n bytes of p count. */
    assert_true(kp_memeq_str("abcdef", 3, "abc"));
    assert_false(kp_memeq_str("abc", 2, "abc"));
    assert_false(kp_memeq_str("abc", 3, "ab"));
    assert_false(kp_memeq_str("abc", 3, "abd"));
    assert_true(kp_memeq_str("", 0, ""));
    assert_true(kp_memeq_str("xyz", 0, ""));
    assert_true(kp_memeq_str(NULL, 0, ""));
    assert_false(kp_memeq_str(NULL, 0, "a"));
    /* An embedded NUL in p never equals a C string of the same length. */
    assert_false(kp_memeq_str("a\0b", 3, "a"));
    assert_false(kp_memeq_str("a\0", 2, "a"));
}

/* --- kp_strscpy --------------------------------------------------------------------------- */

static void test_strscpy(void **state)
{
    char buf[8];

    (void)state;
    memset(buf, 'X', sizeof(buf));
    assert_int_equal(kp_strscpy(buf, sizeof(buf), "abc"), 0);
    assert_string_equal(buf, "abc");

    /* Exactly fits: 7 characters and the terminator. */
    assert_int_equal(kp_strscpy(buf, sizeof(buf), "1234567"), 0);
    assert_string_equal(buf, "1234567");

    /* One too many: truncated prefix, still terminated. */
    assert_int_equal(kp_strscpy(buf, sizeof(buf), "12345678"), -E2BIG);
    assert_string_equal(buf, "1234567");

    assert_int_equal(kp_strscpy(buf, sizeof(buf), "a much longer source string"), -E2BIG);
    assert_string_equal(buf, "a much ");

    assert_int_equal(kp_strscpy(buf, sizeof(buf), ""), 0);
    assert_string_equal(buf, "");

    /* size 1 holds only the terminator. */
    assert_int_equal(kp_strscpy(buf, 1, ""), 0);
    assert_string_equal(buf, "");
    assert_int_equal(kp_strscpy(buf, 1, "x"), -E2BIG);
    assert_string_equal(buf, "");
}

static void test_strscpy_bounds(void **state)
{
    char buf[16];

    (void)state;
    /* Nothing is written past size: the guard bytes after it keep their value. */
    memset(buf, '#', sizeof(buf));
    assert_int_equal(kp_strscpy(buf, 4, "abcdefgh"), -E2BIG);
    assert_memory_equal(buf, "abc\0############", sizeof(buf));

    memset(buf, '#', sizeof(buf));
    assert_int_equal(kp_strscpy(buf, 4, "ab"), 0);
    assert_memory_equal(buf, "ab\0#############", sizeof(buf));
}

/* --- kp_strjoin, kp_strset ---------------------------------------------------------------- */

static void test_strjoin(void **state)
{
    char *s;

    (void)state;
    s = kp_strjoin("a", "bc", "def", (char *)NULL);
    assert_non_null(s);
    assert_string_equal(s, "abcdef");
    kp_free(s);

    s = kp_strjoin("only", (char *)NULL);
    assert_non_null(s);
    assert_string_equal(s, "only");
    kp_free(s);

    /* An empty list gives an empty string, not NULL. */
    s = kp_strjoin((const char *)NULL, (char *)NULL);
    assert_non_null(s);
    assert_string_equal(s, "");
    kp_free(s);

    s = kp_strjoin("", "", "", (char *)NULL);
    assert_non_null(s);
    assert_string_equal(s, "");
    kp_free(s);

    s = kp_strjoin("/apis/", "karpenter.sh", "/v1/", "nodeclaims", (char *)NULL);
    assert_non_null(s);
    assert_string_equal(s, "/apis/karpenter.sh/v1/nodeclaims");
    kp_free(s);
}

static void test_strjoin_enomem(void **state)
{
    int64_t live = kp_alloc_live();
    char *s;

    (void)state;
    kp_alloc_fail_at(1);
    s = kp_strjoin("a", "b", (char *)NULL);
    assert_true(kp_alloc_failed());
    kp_alloc_fail_at(0);
    assert_null(s);
    assert_int_equal(kp_alloc_live(), live);
}

static void test_strset(void **state)
{
    int64_t live = kp_alloc_live();
    char *p = NULL;
    char *old;

    (void)state;
    assert_int_equal(kp_strset(&p, "one"), 0);
    assert_string_equal(p, "one");

    assert_int_equal(kp_strset(&p, "two"), 0);
    assert_string_equal(p, "two");

    /* Setting from the current value itself must work (the old copy is freed after). */
    assert_int_equal(kp_strset(&p, p), 0);
    assert_string_equal(p, "two");

    /* Failure leaves *dst untouched. */
    old = p;
    kp_alloc_fail_at(1);
    assert_int_equal(kp_strset(&p, "three"), -ENOMEM);
    kp_alloc_fail_at(0);
    assert_ptr_equal(p, old);
    assert_string_equal(p, "two");

    assert_int_equal(kp_strset(&p, NULL), 0);
    assert_null(p);
    assert_int_equal(kp_strset(&p, NULL), 0);
    assert_null(p);

    assert_int_equal(kp_strset(&p, ""), 0);
    assert_string_equal(p, "");
    assert_int_equal(kp_strset(&p, NULL), 0);
    assert_int_equal(kp_alloc_live(), live);
}

/* --- number parsers ----------------------------------------------------------------------- */

struct u64_case {
    const char *in;
    size_t len;
    int r;
    uint64_t v;
};

static const struct u64_case u64_cases[] = {
    {IN("0"), 0, 0},
    {IN("1"), 0, 1},
    {IN("9"), 0, 9},
    {IN("10"), 0, 10},
    {IN("42"), 0, 42},
    {IN("000"), 0, 0},
    {IN("007"), 0, 7},
    {IN("18446744073709551615"), 0, UINT64_MAX},
    {IN("018446744073709551615"), 0, UINT64_MAX},
    {IN("0000000000000000000000000000018446744073709551615"), 0, UINT64_MAX},
    {IN("18446744073709551614"), 0, UINT64_MAX - 1},
    {IN("9999999999999999999"), 0, UINT64_C(9999999999999999999)},
    {IN("10000000000000000000"), 0, UINT64_C(10000000000000000000)},
    {IN("4294967296"), 0, UINT64_C(4294967296)},
    {IN("18446744073709551616"), -ERANGE, 0},
    {IN("18446744073709551620"), -ERANGE, 0},
    {IN("19000000000000000000"), -ERANGE, 0},
    {IN("99999999999999999999"), -ERANGE, 0},
    {IN("100000000000000000000"), -ERANGE, 0},
    {IN("184467440737095516150"), -ERANGE, 0},
    {IN(""), -EINVAL, 0},
    {IN("-"), -EINVAL, 0},
    {IN("+"), -EINVAL, 0},
    {IN("-0"), -EINVAL, 0},
    {IN("+1"), -EINVAL, 0},
    {IN("-1"), -EINVAL, 0},
    {IN(" 1"), -EINVAL, 0},
    {IN("1 "), -EINVAL, 0},
    {IN("\t1"), -EINVAL, 0},
    {IN("1\n"), -EINVAL, 0},
    {IN("1a"), -EINVAL, 0},
    {IN("a1"), -EINVAL, 0},
    {IN("0x10"), -EINVAL, 0},
    {IN("1.0"), -EINVAL, 0},
    {IN("1,000"), -EINVAL, 0},
    {IN("1_000"), -EINVAL, 0},
    {IN("1e3"), -EINVAL, 0},
    {IN("1\0"), -EINVAL, 0},
    {IN("1\0002"), -EINVAL, 0},
    {IN("\0"), -EINVAL, 0},
    {IN("\xd9\xa1"), -EINVAL, 0},     /* ARABIC-INDIC DIGIT ONE */
    {IN("\xef\xbc\x91"), -EINVAL, 0}, /* FULLWIDTH DIGIT ONE */
    {IN("/"), -EINVAL, 0},            /* '0' - 1 */
    {IN(":"), -EINVAL, 0},            /* '9' + 1 */
    /* A bad byte after an overflowing run is still malformed input, not a range error. */
    {IN("99999999999999999999999x"), -EINVAL, 0},
    {IN("x99999999999999999999999"), -EINVAL, 0},
};

static void test_parse_u64(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(u64_cases); i++) {
        const struct u64_case *c = &u64_cases[i];
        uint64_t v = SENTINEL_U64;
        int r = kp_parse_u64(c->in, c->len, &v);

        if (r != c->r || (r == 0 && v != c->v) || (r != 0 && v != SENTINEL_U64))
            fail_msg("kp_parse_u64 row %zu (len %zu): r=%d v=%" PRIu64 ", want r=%d v=%" PRIu64, i,
                     c->len, r, v, c->r, c->r == 0 ? c->v : SENTINEL_U64);
    }
}

static void test_parse_len_bounds(void **state)
{
    uint64_t v = SENTINEL_U64;
    uint32_t v32 = SENTINEL_U32;
    int64_t i = SENTINEL_I64;

    (void)state;
    /* Only the first n bytes are looked at: what follows may be anything. */
    assert_int_equal(kp_parse_u64("123abc", 3, &v), 0);
    assert_int_equal(v, 123);
    assert_int_equal(kp_parse_u64("123abc", 2, &v), 0);
    assert_int_equal(v, 12);
    assert_int_equal(kp_parse_u32("4294967295999", 10, &v32), 0);
    assert_int_equal(v32, UINT32_MAX);
    assert_int_equal(kp_parse_i64("-5-", 2, &i), 0);
    assert_int_equal(i, -5);
    assert_int_equal(kp_parse_x64("ffz", 2, &v), 0);
    assert_int_equal(v, 0xff);

    /* n == 0 is empty input even when p points at digits, and p may be NULL then. */
    v = SENTINEL_U64;
    assert_int_equal(kp_parse_u64("123", 0, &v), -EINVAL);
    assert_int_equal(kp_parse_u64(NULL, 0, &v), -EINVAL);
    assert_int_equal(kp_parse_x64(NULL, 0, &v), -EINVAL);
    assert_true(v == SENTINEL_U64);
    v32 = SENTINEL_U32;
    assert_int_equal(kp_parse_u32(NULL, 0, &v32), -EINVAL);
    assert_true(v32 == SENTINEL_U32);
    i = SENTINEL_I64;
    assert_int_equal(kp_parse_i64(NULL, 0, &i), -EINVAL);
    assert_true(i == SENTINEL_I64);
}

struct u32_case {
    const char *in;
    size_t len;
    int r;
    uint32_t v;
};

static const struct u32_case u32_cases[] = {
    {IN("0"), 0, 0},
    {IN("22"), 0, 22},
    {IN("65535"), 0, 65535},
    {IN("0004294967295"), 0, UINT32_MAX},
    {IN("4294967295"), 0, UINT32_MAX},
    {IN("4294967294"), 0, UINT32_MAX - 1},
    {IN("4294967296"), -ERANGE, 0},
    {IN("4294967300"), -ERANGE, 0},
    {IN("9999999999"), -ERANGE, 0},
    {IN("18446744073709551615"), -ERANGE, 0},
    {IN("18446744073709551616"), -ERANGE, 0},
    {IN("99999999999999999999999999"), -ERANGE, 0},
    {IN(""), -EINVAL, 0},
    {IN("-1"), -EINVAL, 0},
    {IN("+1"), -EINVAL, 0},
    {IN(" 1"), -EINVAL, 0},
    {IN("1 "), -EINVAL, 0},
    {IN("8080\0"), -EINVAL, 0},
    {IN("42949672950x"), -EINVAL, 0},
};

static void test_parse_u32(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(u32_cases); i++) {
        const struct u32_case *c = &u32_cases[i];
        uint32_t v = SENTINEL_U32;
        int r = kp_parse_u32(c->in, c->len, &v);

        if (r != c->r || (r == 0 && v != c->v) || (r != 0 && v != SENTINEL_U32))
            fail_msg("kp_parse_u32 row %zu: r=%d v=%" PRIu32 ", want r=%d v=%" PRIu32, i, r, v,
                     c->r, c->v);
    }
}

struct i64_case {
    const char *in;
    size_t len;
    int r;
    int64_t v;
};

static const struct i64_case i64_cases[] = {
    {IN("0"), 0, 0},
    {IN("-0"), 0, 0},
    {IN("+0"), 0, 0},
    {IN("1"), 0, 1},
    {IN("+1"), 0, 1},
    {IN("-1"), 0, -1},
    {IN("-007"), 0, -7},
    {IN("+007"), 0, 7},
    {IN("9223372036854775807"), 0, INT64_MAX},
    {IN("+9223372036854775807"), 0, INT64_MAX},
    {IN("09223372036854775807"), 0, INT64_MAX},
    {IN("-9223372036854775807"), 0, -INT64_MAX},
    {IN("-9223372036854775808"), 0, INT64_MIN},
    {IN("-0009223372036854775808"), 0, INT64_MIN},
    {IN("9223372036854775808"), -ERANGE, 0},
    {IN("+9223372036854775808"), -ERANGE, 0},
    {IN("-9223372036854775809"), -ERANGE, 0},
    {IN("18446744073709551615"), -ERANGE, 0},
    {IN("-18446744073709551616"), -ERANGE, 0},
    {IN("-99999999999999999999999"), -ERANGE, 0},
    {IN(""), -EINVAL, 0},
    {IN("-"), -EINVAL, 0},
    {IN("+"), -EINVAL, 0},
    {IN("--1"), -EINVAL, 0},
    {IN("+-1"), -EINVAL, 0},
    {IN("-+1"), -EINVAL, 0},
    {IN("++1"), -EINVAL, 0},
    {IN("1-"), -EINVAL, 0},
    {IN("1+1"), -EINVAL, 0},
    {IN("- 1"), -EINVAL, 0},
    {IN(" -1"), -EINVAL, 0},
    {IN("-1 "), -EINVAL, 0},
    {IN("\342\210\2221"), -EINVAL, 0}, /* U+2212 MINUS SIGN, then "1" */
    {IN("-\0001"), -EINVAL, 0},
    {IN("-1\0"), -EINVAL, 0},
    {IN("-99999999999999999999999-"), -EINVAL, 0},
};

static void test_parse_i64(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(i64_cases); i++) {
        const struct i64_case *c = &i64_cases[i];
        int64_t v = SENTINEL_I64;
        int r = kp_parse_i64(c->in, c->len, &v);

        if (r != c->r || (r == 0 && v != c->v) || (r != 0 && v != SENTINEL_I64))
            fail_msg("kp_parse_i64 row %zu: r=%d v=%" PRId64 ", want r=%d v=%" PRId64, i, r, v,
                     c->r, c->v);
    }
}

static const struct u64_case x64_cases[] = {
    {IN("0"), 0, 0},
    {IN("9"), 0, 9},
    {IN("a"), 0, 10},
    {IN("A"), 0, 10},
    {IN("f"), 0, 15},
    {IN("F"), 0, 15},
    {IN("ff"), 0, 255},
    {IN("Ff"), 0, 255},
    {IN("deadBEEF"), 0, 0xdeadbeef},
    {IN("0123456789abcdef"), 0, UINT64_C(0x0123456789abcdef)},
    {IN("0123456789ABCDEF"), 0, UINT64_C(0x0123456789abcdef)},
    {IN("ffffffffffffffff"), 0, UINT64_MAX},
    {IN("FFFFFFFFFFFFFFFF"), 0, UINT64_MAX},
    {IN("0000ffffffffffffffff"), 0, UINT64_MAX},
    {IN("8000000000000000"), 0, UINT64_C(1) << 63},
    {IN("10000000000000000"), -ERANGE, 0},
    {IN("fffffffffffffffff"), -ERANGE, 0},
    {IN("00010000000000000000"), -ERANGE, 0},
    {IN(""), -EINVAL, 0},
    {IN("0x1"), -EINVAL, 0},
    {IN("0X1"), -EINVAL, 0},
    {IN("x1"), -EINVAL, 0},
    {IN("g"), -EINVAL, 0},
    {IN("G"), -EINVAL, 0},
    {IN("@"), -EINVAL, 0}, /* 'A' - 1 */
    {IN("`"), -EINVAL, 0}, /* 'a' - 1 */
    {IN("-1"), -EINVAL, 0},
    {IN("+1"), -EINVAL, 0},
    {IN(" a"), -EINVAL, 0},
    {IN("a "), -EINVAL, 0},
    {IN("a\0"), -EINVAL, 0},
    {IN("a\0b"), -EINVAL, 0},
    {IN("fffffffffffffffffz"), -EINVAL, 0},
};

static void test_parse_x64(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(x64_cases); i++) {
        const struct u64_case *c = &x64_cases[i];
        uint64_t v = SENTINEL_U64;
        int r = kp_parse_x64(c->in, c->len, &v);

        if (r != c->r || (r == 0 && v != c->v) || (r != 0 && v != SENTINEL_U64))
            fail_msg("kp_parse_x64 row %zu: r=%d v=%" PRIx64 ", want r=%d v=%" PRIx64, i, r, v,
                     c->r, c->v);
    }
}

static void test_parse_roundtrip(void **state)
{
    char text[32];
    uint64_t u, got;
    int64_t s, sgot;
    int k, n;

    (void)state;
    /* Every power of two and its neighbours, in both bases and through both signed forms. */
    for (k = 0; k < 64; k++) {
        for (int d = -1; d <= 1; d++) {
            u = (UINT64_C(1) << k) + (uint64_t)(int64_t)d;
            n = snprintf(text, sizeof(text), "%" PRIu64, u);
            assert_int_equal(kp_parse_u64(text, (size_t)n, &got), 0);
            assert_true(got == u);
            n = snprintf(text, sizeof(text), "%" PRIx64, u);
            assert_int_equal(kp_parse_x64(text, (size_t)n, &got), 0);
            assert_true(got == u);
            s = (int64_t)u;
            n = snprintf(text, sizeof(text), "%" PRId64, s);
            assert_int_equal(kp_parse_i64(text, (size_t)n, &sgot), 0);
            assert_true(sgot == s);
        }
    }
}

static void test_safe_ato(void **state)
{
    uint32_t v32 = SENTINEL_U32;
    uint64_t v64 = SENTINEL_U64;
    int64_t i64 = SENTINEL_I64;

    (void)state;
    assert_int_equal(kp_safe_atou32("8080", &v32), 0);
    assert_int_equal(v32, 8080);
    assert_int_equal(kp_safe_atou32("4294967295", &v32), 0);
    assert_true(v32 == UINT32_MAX);
    v32 = SENTINEL_U32;
    assert_int_equal(kp_safe_atou32("4294967296", &v32), -ERANGE);
    assert_int_equal(kp_safe_atou32("", &v32), -EINVAL);
    assert_int_equal(kp_safe_atou32("-1", &v32), -EINVAL);
    assert_int_equal(kp_safe_atou32("12 ", &v32), -EINVAL);
    assert_true(v32 == SENTINEL_U32);

    assert_int_equal(kp_safe_atou64("18446744073709551615", &v64), 0);
    assert_true(v64 == UINT64_MAX);
    v64 = SENTINEL_U64;
    assert_int_equal(kp_safe_atou64("18446744073709551616", &v64), -ERANGE);
    assert_int_equal(kp_safe_atou64("0x1", &v64), -EINVAL);
    assert_true(v64 == SENTINEL_U64);
    assert_int_equal(kp_safe_atou64("000", &v64), 0);
    assert_true(v64 == 0);

    assert_int_equal(kp_safe_atoi64("-9223372036854775808", &i64), 0);
    assert_true(i64 == INT64_MIN);
    assert_int_equal(kp_safe_atoi64("+17", &i64), 0);
    assert_true(i64 == 17);
    i64 = SENTINEL_I64;
    assert_int_equal(kp_safe_atoi64("-9223372036854775809", &i64), -ERANGE);
    assert_int_equal(kp_safe_atoi64("-", &i64), -EINVAL);
    assert_int_equal(kp_safe_atoi64("", &i64), -EINVAL);
    assert_true(i64 == SENTINEL_I64);
}

/* --- strv --------------------------------------------------------------------------------- */

static void assert_strv_terminated(const struct kp_strv *sv)
{
    assert_true(sv->n < sv->cap || (sv->n == 0 && sv->v == NULL));
    if (sv->v)
        assert_null(sv->v[sv->n]);
}

static void test_strv_push(void **state)
{
    struct kp_strv sv = KP_STRV_INIT;
    char name[16];
    size_t i;

    (void)state;
    assert_null(sv.v);
    assert_int_equal(sv.n, 0);
    assert_false(kp_strv_contains(&sv, "a"));

    assert_int_equal(kp_strv_push(&sv, "first"), 0);
    assert_int_equal(sv.n, 1);
    assert_string_equal(sv.v[0], "first");
    assert_strv_terminated(&sv);

    /* Enough pushes to grow the vector several times. */
    for (i = 0; i < 200; i++) {
        assert_true(snprintf(name, sizeof(name), "e%zu", i) > 0);
        assert_int_equal(kp_strv_push(&sv, name), 0);
        assert_strv_terminated(&sv);
    }
    assert_int_equal(sv.n, 201);
    assert_string_equal(sv.v[0], "first");
    assert_string_equal(sv.v[1], "e0");
    assert_string_equal(sv.v[200], "e199");
    assert_true(kp_strv_contains(&sv, "e150"));
    assert_false(kp_strv_contains(&sv, "e200"));

    /* Push copies: the vector does not alias the caller's buffer. */
    assert_ptr_not_equal(sv.v[200], name);

    kp_strv_done(&sv);
    assert_null(sv.v);
    assert_int_equal(sv.n, 0);
    assert_int_equal(sv.cap, 0);

    /* done on an empty strv, and reuse after done. */
    kp_strv_done(&sv);
    assert_int_equal(kp_strv_push(&sv, ""), 0);
    assert_true(kp_strv_contains(&sv, ""));
    kp_strv_done(&sv);
}

static void test_strv_contains(void **state)
{
    struct kp_strv sv = KP_STRV_INIT;

    (void)state;
    assert_false(kp_strv_contains(&sv, ""));
    assert_false(kp_strv_contains(&sv, NULL));
    assert_int_equal(kp_strv_push(&sv, "alpha"), 0);
    assert_int_equal(kp_strv_push(&sv, "beta"), 0);
    assert_true(kp_strv_contains(&sv, "alpha"));
    assert_true(kp_strv_contains(&sv, "beta"));
    assert_false(kp_strv_contains(&sv, "alph"));
    assert_false(kp_strv_contains(&sv, "alphabet"));
    assert_false(kp_strv_contains(&sv, "Alpha"));
    assert_false(kp_strv_contains(&sv, ""));
    assert_false(kp_strv_contains(&sv, NULL));
    kp_strv_done(&sv);
}

static void test_strv_sort(void **state)
{
    static const char *const in[] = {"b", "a", "B", "", "ab", "\xc3\xa9", "aa", "a", "~"};
    static const char *const want[] = {"", "B", "a", "a", "aa", "ab", "b", "~", "\xc3\xa9"};
    struct kp_strv sv = KP_STRV_INIT;
    size_t i;

    (void)state;
    /* Sorting an empty or one-entry vector is a no-op. */
    kp_strv_sort(&sv);
    assert_null(sv.v);
    assert_int_equal(kp_strv_push(&sv, "z"), 0);
    kp_strv_sort(&sv);
    assert_string_equal(sv.v[0], "z");
    kp_strv_done(&sv);

    for (i = 0; i < KP_ARRAY_SIZE(in); i++)
        assert_int_equal(kp_strv_push(&sv, in[i]), 0);
    kp_strv_sort(&sv);
    assert_int_equal(sv.n, KP_ARRAY_SIZE(want));
    /* Bytewise: uppercase before lowercase, bytes >= 0x80 after ASCII. */
    for (i = 0; i < sv.n; i++)
        assert_string_equal(sv.v[i], want[i]);
    assert_strv_terminated(&sv);
    kp_strv_done(&sv);
}

static void test_strv_consume(void **state)
{
    struct kp_strv sv = KP_STRV_INIT;
    int64_t live = kp_alloc_live();
    char *s;

    (void)state;
    s = kp_strdup("owned");
    assert_non_null(s);
    assert_int_equal(kp_strv_consume(&sv, s), 0);
    /* Consume takes the pointer itself, no copy. */
    assert_ptr_equal(sv.v[0], s);
    kp_strv_done(&sv);
    assert_int_equal(kp_alloc_live(), live);
}

static void test_strv_consume_enomem(void **state)
{
    struct kp_strv sv = KP_STRV_INIT;
    int64_t live = kp_alloc_live();
    char name[16];
    char *s, **v;
    size_t i, n;

    (void)state;
    /* On an empty vector the first consume must allocate: fail it, s must be freed. */
    s = kp_strdup("lost");
    assert_non_null(s);
    kp_alloc_fail_at(1);
    assert_int_equal(kp_strv_consume(&sv, s), -ENOMEM);
    assert_true(kp_alloc_failed());
    kp_alloc_fail_at(0);
    assert_int_equal(kp_alloc_live(), live);
    assert_null(sv.v);
    assert_int_equal(sv.n, 0);

    /* Fill until a push has to grow, fail that growth, and check the vector is unchanged. */
    for (i = 0; i < 100; i++) {
        assert_true(snprintf(name, sizeof(name), "k%zu", i) > 0);
        if (sv.n + 2 > sv.cap) {
            s = kp_strdup(name);
            assert_non_null(s);
            v = sv.v;
            n = sv.n;
            kp_alloc_fail_at(1);
            assert_int_equal(kp_strv_consume(&sv, s), -ENOMEM);
            assert_true(kp_alloc_failed());
            kp_alloc_fail_at(0);
            assert_ptr_equal(sv.v, v);
            assert_int_equal(sv.n, n);
            assert_strv_terminated(&sv);
            assert_false(kp_strv_contains(&sv, name));
        }
        assert_int_equal(kp_strv_push(&sv, name), 0);
    }
    assert_int_equal(sv.n, 100);

    /* A failing push (the copy itself) leaves the vector unchanged too. */
    kp_alloc_fail_at(1);
    assert_int_equal(kp_strv_push(&sv, "never"), -ENOMEM);
    kp_alloc_fail_at(0);
    assert_int_equal(sv.n, 100);
    assert_false(kp_strv_contains(&sv, "never"));
    assert_strv_terminated(&sv);

    kp_strv_done(&sv);
    assert_int_equal(kp_alloc_live(), live);
}

/* --- torture cases: no cmocka asserts, release everything, 0 or a negative error ----------- */

static int torture_strjoin(void)
{
    char *a = NULL, *b = NULL, *c = NULL;
    int r = -ENOMEM;

    a = kp_strjoin("k", "ube", (char *)NULL);
    if (!a)
        goto out;
    b = kp_strjoin(a, "-", a, "-", "system", (char *)NULL);
    if (!b)
        goto out;
    c = kp_strjoin((const char *)NULL, (char *)NULL);
    if (!c)
        goto out;
    /* A wrong result is a bug, not an allocation failure: report it as a positive value. */
    r = strcmp(b, "kube-kube-system") == 0 && c[0] == '\0' ? 0 : 1;
out:
    kp_free(a);
    kp_free(b);
    kp_free(c);
    return r;
}

static int torture_strset(void)
{
    char *p = NULL;
    int r;

    r = kp_strset(&p, "first");
    if (r < 0)
        goto out;
    r = kp_strset(&p, "second value");
    if (r < 0)
        goto out;
    if (strcmp(p, "second value") != 0) {
        r = 1;
        goto out;
    }
    r = kp_strset(&p, p);
    if (r < 0)
        goto out;
    r = kp_strset(&p, NULL);
    if (r < 0)
        goto out;
    r = p == NULL ? 0 : 1;
out:
    kp_free(p);
    return r;
}

static int torture_strdup(void)
{
    char *a = NULL, *b = NULL;
    void *c = NULL;
    int r = -ENOMEM;

    a = kp_strdup("node-7");
    if (!a)
        goto out;
    b = kp_strndup("abcdef", 3);
    if (!b)
        goto out;
    c = kp_memdup("x\0y", 3);
    if (!c)
        goto out;
    r = strcmp(a, "node-7") == 0 && strcmp(b, "abc") == 0 && memcmp(c, "x\0y", 3) == 0 ? 0 : 1;
out:
    kp_free(a);
    kp_free(b);
    kp_free(c);
    return r;
}

static int torture_strv(void)
{
    struct kp_strv sv = KP_STRV_INIT;
    char name[16];
    char *s;
    int i, r = 0;

    for (i = 0; i < 40; i++) {
        if (snprintf(name, sizeof(name), "h%02d", 39 - i) < 0) {
            r = 1;
            goto out;
        }
        if (i % 2) {
            r = kp_strv_push(&sv, name);
        } else {
            s = kp_strdup(name);
            if (!s) {
                r = -ENOMEM;
                goto out;
            }
            r = kp_strv_consume(&sv, s); /* frees s on failure */
        }
        if (r < 0)
            goto out;
    }
    kp_strv_sort(&sv);
    if (sv.n != 40 || strcmp(sv.v[0], "h00") != 0 || strcmp(sv.v[39], "h39") != 0 ||
        sv.v[40] != NULL || !kp_strv_contains(&sv, "h17"))
        r = 1;
out:
    kp_strv_done(&sv);
    return r;
}

static void test_utf8_len(void **state)
{
    static const struct {
        const char *s;
        size_t want;
    } cases[] = {
        {"a", 1},
        {"\xc3\xa9", 2},         /* U+00E9 */
        {"\xe2\x82\xac", 3},     /* U+20AC */
        {"\xf0\x9f\x98\x80", 4}, /* U+1F600 */
        {"\xf4\x8f\xbf\xbf", 4}, /* U+10FFFF, the last code point */
        {"\xc0\xaf", 0},         /* overlong '/' */
        {"\xc1\xbf", 0},         /* overlong */
        {"\xe0\x80\xaf", 0},     /* overlong, three bytes */
        {"\xf0\x80\x80\xaf", 0}, /* overlong, four bytes */
        {"\xed\xa0\x80", 0},     /* U+D800, a surrogate */
        {"\xf4\x90\x80\x80", 0}, /* past U+10FFFF */
        {"\xf5\x80\x80\x80", 0}, /* no such lead byte */
        {"\xff", 0},
        {"\x80", 0},     /* a lone continuation byte */
        {"\xc3", 0},     /* cut short by the end */
        {"\xe2\x82", 0}, /* cut short */
        {"\xe2\x82z", 0},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        const unsigned char *u = (const unsigned char *)cases[i].s;

        if (kp_utf8_len(u, strlen(cases[i].s)) != cases[i].want)
            fail_msg("case %zu: kp_utf8_len = %zu, want %zu", i, kp_utf8_len(u, strlen(cases[i].s)),
                     cases[i].want);
    }
    /* The length bound is honoured: a valid sequence with fewer bytes left is invalid. */
    assert_int_equal(kp_utf8_len((const unsigned char *)"\xe2\x82\xac", 2), 0);
}

static void test_utf8_scrub(void **state)
{
    char *s;

    (void)state;
    s = kp_utf8_scrub("plain \xc3\xa9t\xc3\xa9 \xe2\x82\xac");
    assert_non_null(s);
    assert_string_equal(s, "plain \xc3\xa9t\xc3\xa9 \xe2\x82\xac"); /* valid text unchanged */
    kp_free(s);
    /* Latin-1 "café", a lone continuation, a cut sequence at the end: one U+FFFD per bad byte. */
    s = kp_utf8_scrub("caf\xe9 \x80x \xe2\x82");
    assert_non_null(s);
    assert_string_equal(s, "caf\xef\xbf\xbd \xef\xbf\xbdx \xef\xbf\xbd\xef\xbf\xbd");
    kp_free(s);
    s = kp_utf8_scrub("");
    assert_non_null(s);
    assert_string_equal(s, "");
    kp_free(s);
}

static int torture_utf8_scrub(void)
{
    char *s = kp_utf8_scrub("bad \xff byte");

    if (!s)
        return -ENOMEM;
    kp_free(s);
    return 0;
}

/* kp_sorted_find over structs keyed by a string member: hits, and every insertion point. */
static void test_sorted_find(void **state)
{
    struct item {
        int pad;
        const char *name;
    } v[] = {{1, "b"}, {2, "d"}, {3, "f"}};
    size_t pos = 99;

    (void)state;
    assert_true(kp_sorted_find(v, 3, sizeof(v[0]), offsetof(struct item, name), "d", &pos));
    assert_int_equal(pos, 1);
    assert_true(kp_sorted_find(v, 3, sizeof(v[0]), offsetof(struct item, name), "b", &pos));
    assert_int_equal(pos, 0);
    assert_true(kp_sorted_find(v, 3, sizeof(v[0]), offsetof(struct item, name), "f", &pos));
    assert_int_equal(pos, 2);
    assert_false(kp_sorted_find(v, 3, sizeof(v[0]), offsetof(struct item, name), "a", &pos));
    assert_int_equal(pos, 0);
    assert_false(kp_sorted_find(v, 3, sizeof(v[0]), offsetof(struct item, name), "c", &pos));
    assert_int_equal(pos, 1);
    assert_false(kp_sorted_find(v, 3, sizeof(v[0]), offsetof(struct item, name), "e", &pos));
    assert_int_equal(pos, 2);
    assert_false(kp_sorted_find(v, 3, sizeof(v[0]), offsetof(struct item, name), "g", &pos));
    assert_int_equal(pos, 3);
    assert_false(kp_sorted_find(NULL, 0, sizeof(v[0]), offsetof(struct item, name), "a", &pos));
    assert_int_equal(pos, 0);
}

int main(int argc, char **argv)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streq),
        cmocka_unit_test(test_startswith),
        cmocka_unit_test(test_endswith),
        cmocka_unit_test(test_memeq_str),
        cmocka_unit_test(test_strscpy),
        cmocka_unit_test(test_strscpy_bounds),
        cmocka_unit_test(test_strjoin),
        cmocka_unit_test(test_strjoin_enomem),
        cmocka_unit_test(test_strset),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_parse_len_bounds),
        cmocka_unit_test(test_parse_u32),
        cmocka_unit_test(test_parse_i64),
        cmocka_unit_test(test_parse_x64),
        cmocka_unit_test(test_parse_roundtrip),
        cmocka_unit_test(test_safe_ato),
        cmocka_unit_test(test_strv_push),
        cmocka_unit_test(test_strv_contains),
        cmocka_unit_test(test_strv_sort),
        cmocka_unit_test(test_strv_consume),
        cmocka_unit_test(test_strv_consume_enomem),
        cmocka_unit_test(test_utf8_len),
        cmocka_unit_test(test_utf8_scrub),
        cmocka_unit_test(test_sorted_find),
    };
    static const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_strjoin), KP_TORTURE(torture_strset),     KP_TORTURE(torture_strdup),
        KP_TORTURE(torture_strv),    KP_TORTURE(torture_utf8_scrub),
    };

    return kp_test_main("str", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
