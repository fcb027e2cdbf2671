/* Tests for api/duration.h: Go's time.ParseDuration grammar and Duration.String() output,
 * including the int64 edges and Karpenter's "Never". Expected strings come from Go's documented
 * behaviour ("1h0m0s", "1.5s", "2µs"...). */
#include <errno.h>
#include <string.h>

#include "kp-test.h"

#include "base/err.h"
#include "api/duration.h"

static void test_parse_valid(void **state)
{
    static const struct {
        const char *in;
        int64_t ns;
    } cases[] = {
        {"0", 0},
        {"+0", 0},
        {"-0", 0},
        {"0s", 0},
        {"5s", 5 * KP_NSEC_PER_SEC},
        {"30s", 30 * KP_NSEC_PER_SEC},
        {"1478s", 1478 * KP_NSEC_PER_SEC},
        {"-5s", -5 * KP_NSEC_PER_SEC},
        {"+5s", 5 * KP_NSEC_PER_SEC},
        {"-5m", -5 * KP_NSEC_PER_MIN},
        {"5.0s", 5 * KP_NSEC_PER_SEC},
        {"5.6s", 5 * KP_NSEC_PER_SEC + 600 * KP_NSEC_PER_MSEC},
        {"5.s", 5 * KP_NSEC_PER_SEC},
        {".5s", 500 * KP_NSEC_PER_MSEC},
        {"1.0s", KP_NSEC_PER_SEC},
        {"1.00s", KP_NSEC_PER_SEC},
        {"1.004s", 1004 * KP_NSEC_PER_MSEC},
        {"1.0040s", 1004 * KP_NSEC_PER_MSEC},
        {"100.00100s", 100001 * KP_NSEC_PER_MSEC},
        {"1.5s", 1500 * KP_NSEC_PER_MSEC},
        {"10ns", 10},
        {"11us", 11 * KP_NSEC_PER_USEC},
        {"12\xc2\xb5s", 12 * KP_NSEC_PER_USEC},
        {"12\xce\xbcs", 12 * KP_NSEC_PER_USEC},
        {"2us", 2000},
        {"300ms", 300 * KP_NSEC_PER_MSEC},
        {"13ms", 13 * KP_NSEC_PER_MSEC},
        {"14s", 14 * KP_NSEC_PER_SEC},
        {"15m", 15 * KP_NSEC_PER_MIN},
        {"16h", 16 * KP_NSEC_PER_HOUR},
        {"720h", 720 * KP_NSEC_PER_HOUR},
        {"1h30m", 90 * KP_NSEC_PER_MIN},
        {"3h30m", 210 * KP_NSEC_PER_MIN},
        {"10.5s4m", 4 * KP_NSEC_PER_MIN + 10500 * KP_NSEC_PER_MSEC},
        {"-2m3.4s", -(2 * KP_NSEC_PER_MIN + 3400 * KP_NSEC_PER_MSEC)},
        {"1h2m3s4ms5us6ns", KP_NSEC_PER_HOUR + 2 * KP_NSEC_PER_MIN + 3 * KP_NSEC_PER_SEC +
                                4 * KP_NSEC_PER_MSEC + 5 * KP_NSEC_PER_USEC + 6},
        {"39h9m14.425s", 39 * KP_NSEC_PER_HOUR + 9 * KP_NSEC_PER_MIN + 14425 * KP_NSEC_PER_MSEC},
        {"52763797000ns", 52763797000},
        {"0.3333333333333333333h", 20 * KP_NSEC_PER_MIN - 1}, /* exact truncation */
        {"9007199254.740993ms", (INT64_C(1) << 53) + 1},
        {"9223372036854775807ns", INT64_MAX},
        {"9223372036.854775807s", INT64_MAX},
        {"-9223372036854775808ns", INT64_MIN},
        {"-9223372036.854775808s", INT64_MIN},
        {"0.100000000000000000000h", 6 * KP_NSEC_PER_MIN},
        {"0.830103483285477580700h", 49 * KP_NSEC_PER_MIN + 48 * KP_NSEC_PER_SEC + 372539827},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        int64_t ns = 42;
        int r = kp_duration_parse(cases[i].in, strlen(cases[i].in), &ns);

        if (r != 0 || ns != cases[i].ns)
            fail_msg("%s: r=%d ns=%lld want %lld", cases[i].in, r, (long long)ns,
                     (long long)cases[i].ns);
    }
}

static void test_parse_invalid(void **state)
{
    static const struct {
        const char *in;
        int r;
    } cases[] = {
        {"", -KP_EPARSE},
        {"3", -KP_EPARSE},
        {"-", -KP_EPARSE},
        {"+", -KP_EPARSE},
        {"s", -KP_EPARSE},
        {".", -KP_EPARSE},
        {"-.", -KP_EPARSE},
        {".s", -KP_EPARSE},
        {"+.s", -KP_EPARSE},
        {"1d", -KP_EPARSE},
        {"1 s", -KP_EPARSE},
        {" 1s", -KP_EPARSE},
        {"1s ", -KP_EPARSE},
        {"1S", -KP_EPARSE},
        {"1sec", -KP_EPARSE},
        {"1h-5m", -KP_EPARSE},
        {"00", -KP_EPARSE},
        {"Never", -KP_EPARSE},
        {"1.2.3s", -KP_EPARSE},
        {"\xc2\xb5s", -KP_EPARSE},
        {"1\xc2s", -KP_EPARSE},
        {"9223372036854775808ns", -ERANGE},
        {"9223372036854775810ns", -ERANGE},
        {"-9223372036854775809ns", -ERANGE},
        {"9223372036854775807ns1ns", -ERANGE},
        {"2562048h", -ERANGE},
        {"99999999999999999999999h", -ERANGE},
        {"9223372036.854775808s", -ERANGE},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        int64_t ns = 42;
        int r = kp_duration_parse(cases[i].in, strlen(cases[i].in), &ns);

        if (r != cases[i].r || ns != 42)
            fail_msg("%s: r=%d want %d", cases[i].in, r, cases[i].r);
    }
}

/* Go's ParseDuration error texts, which Karpenter's InvalidDoNotDisruptAnnotation event quotes:
 * the first problem Go's parser meets, strings quoted as its time package quotes them. */
static void test_parse_error(void **state)
{
    static const struct {
        const char *in, *err; /* err NULL: Go accepts it */
    } cases[] = {
        {"5m", NULL},
        {"0", NULL},
        {"+0", NULL},
        {"-5m", NULL},
        {"1.5h", NULL},
        {".5s", NULL},
        {"1h30m0.5s", NULL},
        {"-9223372036854775808ns", NULL},
        {"", "time: invalid duration \"\""},
        {"-", "time: invalid duration \"-\""},
        {".", "time: invalid duration \".\""},
        {"abc", "time: invalid duration \"abc\""},
        {"yes", "time: invalid duration \"yes\""},
        {"5", "time: missing unit in duration \"5\""},
        {"1h30", "time: missing unit in duration \"1h30\""},
        {"1.2.3s", "time: missing unit in duration \"1.2.3s\""},
        {"5d", "time: unknown unit \"d\" in duration \"5d\""},
        {"5 m", "time: unknown unit \" m\" in duration \"5 m\""},
        {"5\"d", "time: unknown unit \"\\\"d\" in duration \"5\\\"d\""},
        {"1\xc2s", "time: unknown unit \"\\xc2s\" in duration \"1\\xc2s\""},
        {"\xc2\xb5s", "time: invalid duration \"\\xc2\\xb5s\""},
        {"9223372036854775808ns", "time: invalid duration \"9223372036854775808ns\""},
        {"99999999999999999999999h", "time: invalid duration \"99999999999999999999999h\""},
        {"2562048h", "time: invalid duration \"2562048h\""},
    };
    char buf[128], small[8];

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        const char *e = kp_duration_parse_error(cases[i].in, strlen(cases[i].in), buf, sizeof(buf));

        if (!cases[i].err && e)
            fail_msg("%s: Go accepts it, got %s", cases[i].in, e);
        if (cases[i].err && (!e || strcmp(e, cases[i].err) != 0))
            fail_msg("%s: got %s, want %s", cases[i].in, e ? e : "(null)", cases[i].err);
    }
    /* Cut short, still terminated. */
    assert_string_equal(kp_duration_parse_error("abc", 3, small, sizeof(small)), "time: i");
}

static void test_format(void **state)
{
    static const struct {
        int64_t ns;
        const char *out;
    } cases[] = {
        {0, "0s"},
        {1, "1ns"},
        {1100, "1.1\xc2\xb5s"},
        {2000, "2\xc2\xb5s"},
        {2200 * KP_NSEC_PER_USEC, "2.2ms"},
        {300 * KP_NSEC_PER_MSEC, "300ms"},
        {1500 * KP_NSEC_PER_MSEC, "1.5s"},
        {3300 * KP_NSEC_PER_MSEC, "3.3s"},
        {4 * KP_NSEC_PER_MIN + 5 * KP_NSEC_PER_SEC, "4m5s"},
        {4 * KP_NSEC_PER_MIN + 5001 * KP_NSEC_PER_MSEC, "4m5.001s"},
        {5 * KP_NSEC_PER_HOUR + 6 * KP_NSEC_PER_MIN + 7001 * KP_NSEC_PER_MSEC, "5h6m7.001s"},
        {8 * KP_NSEC_PER_MIN + 1, "8m0.000000001s"},
        {KP_NSEC_PER_HOUR, "1h0m0s"},
        {90 * KP_NSEC_PER_MIN, "1h30m0s"},
        {720 * KP_NSEC_PER_HOUR, "720h0m0s"},
        {-5 * KP_NSEC_PER_MIN, "-5m0s"},
        {-1, "-1ns"},
        {INT64_MAX, "2562047h47m16.854775807s"},
        {INT64_MIN, "-2562047h47m16.854775808s"},
    };
    char buf[KP_DURATION_STRMAX];

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        int64_t back = 0;

        assert_int_equal(kp_duration_format(cases[i].ns, buf, sizeof(buf)), 0);
        if (strcmp(buf, cases[i].out) != 0)
            fail_msg("%lld: got %s want %s", (long long)cases[i].ns, buf, cases[i].out);
        assert_int_equal(kp_duration_parse(buf, strlen(buf), &back), 0);
        assert_int_equal(back, cases[i].ns);
    }
    assert_int_equal(kp_duration_format(KP_NSEC_PER_HOUR, buf, 6), -E2BIG);
    assert_int_equal(kp_duration_format(KP_NSEC_PER_HOUR, buf, 7), 0);
    assert_string_equal(buf, "1h0m0s");
}

static void test_nillable(void **state)
{
    struct kp_duration_nillable d = {.never = false, .ns = 42};
    char buf[KP_DURATION_STRMAX];

    (void)state;
    assert_int_equal(kp_duration_parse_nillable("Never", 5, &d), 0);
    assert_true(d.never);
    assert_int_equal(kp_duration_format_nillable(&d, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "Never");
    assert_int_equal(kp_duration_format_nillable(&d, buf, 5), -E2BIG);
    assert_int_equal(kp_duration_parse_nillable("720h", 4, &d), 0);
    assert_false(d.never);
    assert_int_equal(d.ns, 720 * KP_NSEC_PER_HOUR);
    assert_int_equal(kp_duration_format_nillable(&d, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "720h0m0s");
    d.ns = 7;
    assert_int_equal(kp_duration_parse_nillable("never", 5, &d), -KP_EPARSE);
    assert_int_equal(kp_duration_parse_nillable("Never ", 6, &d), -KP_EPARSE);
    assert_int_equal(d.ns, 7);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_valid), cmocka_unit_test(test_parse_invalid),
        cmocka_unit_test(test_parse_error), cmocka_unit_test(test_format),
        cmocka_unit_test(test_nillable),
    };

    return kp_test_main("duration", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
