/* Tests for k8s/rfc3339.h: valid and invalid timestamps, offsets, fractions, calendar edges,
 * metav1.Time and metav1.MicroTime formatting, round trips across the supported years. */
#include <errno.h>
#include <string.h>

#include "kp-test.h"

#include "base/err.h"
#include "k8s/rfc3339.h"

#define SEC INT64_C(1000000)

static void test_parse_valid(void **state)
{
    static const struct {
        const char *in;
        int64_t usec;
    } cases[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"2006-01-02T15:04:05Z", INT64_C(1136214245) * SEC},
        {"2006-01-02T15:04:05.999999Z", INT64_C(1136214245) * SEC + 999999},
        {"2006-01-02T15:04:05.999999999Z", INT64_C(1136214245) * SEC + 999999},
        {"2006-01-02T15:04:05.5Z", INT64_C(1136214245) * SEC + 500000},
        {"2006-01-02T15:04:05.000001Z", INT64_C(1136214245) * SEC + 1},
        {"2006-01-02T15:04:05.0000001Z", INT64_C(1136214245) * SEC},
        {"2006-01-02T08:04:05-07:00", INT64_C(1136214245) * SEC},
        {"2006-01-02T23:34:05+08:30", INT64_C(1136214245) * SEC},
        {"2006-01-02T15:04:05+00:00", INT64_C(1136214245) * SEC},
        {"2006-01-02T15:04:05-00:00", INT64_C(1136214245) * SEC},
        {"2024-02-29T12:00:00Z", INT64_C(1709208000) * SEC},
        {"2000-02-29T00:00:00Z", INT64_C(951782400) * SEC},
        {"1969-12-31T23:59:59Z", -SEC},
        {"1969-12-31T23:59:59.5Z", -SEC / 2},
        {"0000-01-01T00:00:00Z", INT64_C(-62167219200) * SEC},
        {"9999-12-31T23:59:59.999999Z", INT64_C(253402300799) * SEC + 999999},
        {"2038-01-19T03:14:08Z", INT64_C(2147483648) * SEC},
        {"1970-01-01T01:00:00+01:00", 0},
        {"2024-12-31T23:59:59Z", INT64_C(1735689599) * SEC},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        int64_t usec = 42;
        int r = kp_rfc3339_parse(cases[i].in, strlen(cases[i].in), &usec);

        if (r != 0 || usec != cases[i].usec)
            fail_msg("%s: r=%d usec=%lld want %lld", cases[i].in, r, (long long)usec,
                     (long long)cases[i].usec);
    }
}

static void test_parse_invalid(void **state)
{
    static const struct {
        const char *in;
        int r;
    } cases[] = {
        {"", -KP_EPARSE},
        {"2006-01-02", -KP_EPARSE},
        {"2006-01-02T15:04:05", -KP_EPARSE}, /* no zone */
        {"2006-01-02 15:04:05Z", -KP_EPARSE},
        {"2006-01-02t15:04:05Z", -KP_EPARSE},
        {"2006-01-02T15:04:05z", -KP_EPARSE},
        {"2006-02-30T00:00:00Z", -KP_EPARSE}, /* Feb 30 */
        {"2023-02-29T00:00:00Z", -KP_EPARSE}, /* not a leap year */
        {"1900-02-29T00:00:00Z", -KP_EPARSE}, /* century rule */
        {"2006-13-01T00:00:00Z", -KP_EPARSE}, /* month 13 */
        {"2006-00-01T00:00:00Z", -KP_EPARSE},
        {"2006-04-31T00:00:00Z", -KP_EPARSE},
        {"2006-01-00T00:00:00Z", -KP_EPARSE},
        {"2006-01-32T00:00:00Z", -KP_EPARSE},
        {"2006-01-02T24:00:00Z", -KP_EPARSE}, /* hour 24 */
        {"2006-01-02T23:60:00Z", -KP_EPARSE},
        {"2006-12-31T23:59:60Z", -KP_EPARSE}, /* no leap seconds */
        {"2006-01-02T15:04:05.Z", -KP_EPARSE},
        {"2006-01-02T15:04:05.1234567890Z", -KP_EPARSE},
        {"2006-01-02T15:04:05+24:00", -KP_EPARSE},
        {"2006-01-02T15:04:05+01:60", -KP_EPARSE},
        {"2006-01-02T15:04:05+0100", -KP_EPARSE},
        {"2006-01-02T15:04:05+01", -KP_EPARSE},
        {"2006-01-02T15:04:05ZZ", -KP_EPARSE},
        {"2006-01-02T15:04:05Z ", -KP_EPARSE},
        {"206-01-02T15:04:05Z", -KP_EPARSE},
        {"+2006-01-02T15:04:05Z", -KP_EPARSE},
        {"2006-1-02T15:04:05Z", -KP_EPARSE},
        {"2006-01-02T15:04:5Z", -KP_EPARSE},
        {"0000-01-01T00:00:00+00:01", -ERANGE},
        {"9999-12-31T23:59:59-00:01", -ERANGE},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        int64_t usec = 42;
        int r = kp_rfc3339_parse(cases[i].in, strlen(cases[i].in), &usec);

        if (r != cases[i].r || usec != 42)
            fail_msg("%s: r=%d want %d", cases[i].in, r, cases[i].r);
    }
}

static void test_format(void **state)
{
    char buf[KP_RFC3339_STRMAX];

    (void)state;
    assert_int_equal(kp_rfc3339_format(0, KP_RFC3339_SECONDS, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
    assert_int_equal(kp_rfc3339_format(0, KP_RFC3339_MICRO, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1970-01-01T00:00:00.000000Z");
    assert_int_equal(
        kp_rfc3339_format(INT64_C(1136214245) * SEC + 999999, KP_RFC3339_SECONDS, buf, sizeof(buf)),
        0);
    assert_string_equal(buf, "2006-01-02T15:04:05Z");
    assert_int_equal(
        kp_rfc3339_format(INT64_C(1136214245) * SEC + 123456, KP_RFC3339_MICRO, buf, sizeof(buf)),
        0);
    assert_string_equal(buf, "2006-01-02T15:04:05.123456Z");
    assert_int_equal(kp_rfc3339_format(-1, KP_RFC3339_MICRO, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1969-12-31T23:59:59.999999Z");
    assert_int_equal(kp_rfc3339_format(-1, KP_RFC3339_SECONDS, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1969-12-31T23:59:59Z");
    assert_int_equal(
        kp_rfc3339_format(INT64_C(-62167219200) * SEC, KP_RFC3339_SECONDS, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "0000-01-01T00:00:00Z");
    assert_int_equal(
        kp_rfc3339_format(INT64_C(-62167219200) * SEC - 1, KP_RFC3339_MICRO, buf, sizeof(buf)),
        -ERANGE);
    assert_int_equal(
        kp_rfc3339_format(INT64_C(253402300800) * SEC, KP_RFC3339_MICRO, buf, sizeof(buf)),
        -ERANGE);
    assert_int_equal(kp_rfc3339_format(INT64_MIN, KP_RFC3339_MICRO, buf, sizeof(buf)), -ERANGE);
    assert_int_equal(kp_rfc3339_format(INT64_MAX, KP_RFC3339_MICRO, buf, sizeof(buf)), -ERANGE);
    assert_int_equal(kp_rfc3339_format(0, KP_RFC3339_SECONDS, buf, 20), -E2BIG);
    assert_int_equal(kp_rfc3339_format(0, KP_RFC3339_SECONDS, buf, 21), 0);
}

/* Every day boundary in a few centuries, plus odd microsecond values, survive both directions. */
static void test_round_trip_sweep(void **state)
{
    char buf[KP_RFC3339_STRMAX];

    (void)state;
    for (int64_t day = -719528; day < 2932897; day += 37) {
        int64_t usec = day * 86400 * SEC + (day % 86400) * SEC + (day & 0xfffff), back = 0;

        if (kp_rfc3339_format(usec, KP_RFC3339_MICRO, buf, sizeof(buf)) == -ERANGE)
            continue;
        assert_int_equal(kp_rfc3339_parse(buf, strlen(buf), &back), 0);
        assert_int_equal(back, usec);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_valid),
        cmocka_unit_test(test_parse_invalid),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_round_trip_sweep),
    };

    return kp_test_main("rfc3339", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
