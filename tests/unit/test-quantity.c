/* Tests for api/quantity.h: parse tables (valid, invalid, range), canonical formatting as
 * Kubernetes' Quantity.String() writes it, rounding with KP_QUANTITY_ROUND_UP, arithmetic
 * overflow. Cases marked "k8s" are taken from Kubernetes' documented behaviour. */
#include <errno.h>
#include <string.h>

#include "kp-test.h"

#include "base/err.h"
#include "api/quantity.h"

struct qcase {
    const char *in;
    int64_t milli;
    enum kp_quantity_format format;
    const char *canonical;
};

static const struct qcase valid[] = {
    {"0", 0, KP_QUANTITY_DECIMAL_SI, "0"},
    {"-0", 0, KP_QUANTITY_DECIMAL_SI, "0"},
    {"0Ki", 0, KP_QUANTITY_BINARY_SI, "0"},
    {"1", 1000, KP_QUANTITY_DECIMAL_SI, "1"},
    {"+1", 1000, KP_QUANTITY_DECIMAL_SI, "1"},
    {"100m", 100, KP_QUANTITY_DECIMAL_SI, "100m"},    /* k8s: cpu requests */
    {"1500m", 1500, KP_QUANTITY_DECIMAL_SI, "1500m"}, /* k8s */
    {"2000m", 2000, KP_QUANTITY_DECIMAL_SI, "2"},     /* k8s */
    {"1.5", 1500, KP_QUANTITY_DECIMAL_SI, "1500m"},   /* k8s */
    {"0.1", 100, KP_QUANTITY_DECIMAL_SI, "100m"},     /* k8s: 0.1 cpu == 100m */
    {".5", 500, KP_QUANTITY_DECIMAL_SI, "500m"},      /* k8s accepts a missing integer part */
    {"1.", 1000, KP_QUANTITY_DECIMAL_SI, "1"},        /* k8s accepts "1." */
    {"001", 1000, KP_QUANTITY_DECIMAL_SI, "1"},
    {"1000", 1000000, KP_QUANTITY_DECIMAL_SI, "1k"}, /* k8s */
    {"1500", 1500000, KP_QUANTITY_DECIMAL_SI, "1500"},
    {"1500000", 1500000000, KP_QUANTITY_DECIMAL_SI, "1500k"},
    {"1.5M", 1500000000, KP_QUANTITY_DECIMAL_SI, "1500k"},
    {"128974848", 128974848000, KP_QUANTITY_DECIMAL_SI, "128974848"}, /* k8s docs example */
    {"129M", 129000000000, KP_QUANTITY_DECIMAL_SI, "129M"},           /* k8s docs example */
    {"123Mi", 128974848000, KP_QUANTITY_BINARY_SI, "123Mi"},          /* k8s docs example */
    {"129e6", 129000000000, KP_QUANTITY_DECIMAL_EXPONENT, "129e6"},   /* k8s docs example */
    {"1e3", 1000000, KP_QUANTITY_DECIMAL_EXPONENT, "1e3"},
    {"1E3", 1000000, KP_QUANTITY_DECIMAL_EXPONENT, "1e3"},
    {"1e+3", 1000000, KP_QUANTITY_DECIMAL_EXPONENT, "1e3"},
    {"1.5e3", 1500000, KP_QUANTITY_DECIMAL_EXPONENT, "1500"},
    {"5e-3", 5, KP_QUANTITY_DECIMAL_EXPONENT, "5e-3"},
    {"1e0", 1000, KP_QUANTITY_DECIMAL_EXPONENT, "1"},
    {"1k", 1000000, KP_QUANTITY_DECIMAL_SI, "1k"},
    {"1G", INT64_C(1000000000000), KP_QUANTITY_DECIMAL_SI, "1G"},
    {"1T", INT64_C(1000000000000000), KP_QUANTITY_DECIMAL_SI, "1T"},
    {"1P", INT64_C(1000000000000000000), KP_QUANTITY_DECIMAL_SI, "1P"},
    {"1000000u", 1000, KP_QUANTITY_DECIMAL_SI, "1"},
    {"1000000000n", 1000, KP_QUANTITY_DECIMAL_SI, "1"},
    {"5000u", 5, KP_QUANTITY_DECIMAL_SI, "5m"},
    {"1Ki", 1024000, KP_QUANTITY_BINARY_SI, "1Ki"},
    {"1024", 1024000, KP_QUANTITY_DECIMAL_SI, "1024"},
    {"1Gi", INT64_C(1073741824000), KP_QUANTITY_BINARY_SI, "1Gi"},      /* k8s */
    {"1024Mi", INT64_C(1073741824000), KP_QUANTITY_BINARY_SI, "1Gi"},   /* k8s */
    {"1.5Gi", INT64_C(1610612736000), KP_QUANTITY_BINARY_SI, "1536Mi"}, /* k8s */
    {"0.5Gi", INT64_C(536870912000), KP_QUANTITY_BINARY_SI, "512Mi"},
    {"0.5Ki", 512000, KP_QUANTITY_BINARY_SI, "512"},     /* below 1024: DecimalSI text */
    {"0.1Ki", 102400, KP_QUANTITY_BINARY_SI, "102400m"}, /* k8s: not whole: DecimalSI */
    {"0.0005Ki", 512, KP_QUANTITY_DECIMAL_SI, "512m"},   /* k8s: below one unit: DecimalSI */
    {"1Ti", INT64_C(1099511627776000), KP_QUANTITY_BINARY_SI, "1Ti"},
    {"1Pi", INT64_C(1125899906842624000), KP_QUANTITY_BINARY_SI, "1Pi"},
    {"8Pi", INT64_C(9007199254740992000), KP_QUANTITY_BINARY_SI, "8Pi"},
    {"-1Ki", -1024000, KP_QUANTITY_BINARY_SI, "-1Ki"},
    {"-1.5", -1500, KP_QUANTITY_DECIMAL_SI, "-1500m"},
    {"-100m", -100, KP_QUANTITY_DECIMAL_SI, "-100m"},
    {"9223372036854775807m", INT64_MAX, KP_QUANTITY_DECIMAL_SI, "9223372036854775807m"},
    {"-9223372036854775807m", -INT64_MAX, KP_QUANTITY_DECIMAL_SI, "-9223372036854775807m"},
    {"0.000000000000000000000000000000000000000000000000000000000000", 0, KP_QUANTITY_DECIMAL_SI,
     "0"},
    {"0e-100000000000000000000000", 0, KP_QUANTITY_DECIMAL_EXPONENT, "0"},
    {"0e99999999999999999999999", 0, KP_QUANTITY_DECIMAL_EXPONENT, "0"},
    {"1100.000000000000000000000000000000000m", 1100, KP_QUANTITY_DECIMAL_SI, "1100m"},
};

static void test_parse_valid(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(valid); i++) {
        struct kp_quantity q = {.milli = 42, .format = KP_QUANTITY_DECIMAL_SI};
        char buf[KP_QUANTITY_STRMAX];
        int r = kp_quantity_parse(valid[i].in, strlen(valid[i].in), 0, &q);

        if (r != 0)
            fail_msg("%s: %d", valid[i].in, r);
        if (q.milli != valid[i].milli || q.format != valid[i].format)
            fail_msg("%s: got %lld/%d, want %lld/%d", valid[i].in, (long long)q.milli, q.format,
                     (long long)valid[i].milli, valid[i].format);
        assert_int_equal(kp_quantity_format(&q, buf, sizeof(buf)), 0);
        if (strcmp(buf, valid[i].canonical) != 0)
            fail_msg("%s: formatted %s, want %s", valid[i].in, buf, valid[i].canonical);
    }
}

static void test_parse_invalid(void **state)
{
    static const struct {
        const char *in;
        int r;
    } bad[] = {
        {"", -KP_EPARSE},
        {"+", -KP_EPARSE},
        {"-", -KP_EPARSE},
        {".", -KP_EPARSE},
        {"m", -KP_EPARSE},
        {"Ki", -KP_EPARSE},
        {"1K", -KP_EPARSE},
        {"1KB", -KP_EPARSE},
        {"1 Gi", -KP_EPARSE},
        {" 1", -KP_EPARSE},
        {"1 ", -KP_EPARSE},
        {"1e", -KP_EPARSE},
        {"1e+", -KP_EPARSE},
        {"1e1.5", -KP_EPARSE},
        {"1.2.3", -KP_EPARSE},
        {"--1", -KP_EPARSE},
        {"1ki", -KP_EPARSE},
        {"1mi", -KP_EPARSE},
        {"0x10", -KP_EPARSE},
        {"1Gib", -KP_EPARSE},
        {"1i", -KP_EPARSE},
        {"1E", -ERANGE},
        {"10P", -ERANGE},
        {"16Pi", -ERANGE},
        {"1Ei", -ERANGE},
        {"1e16", -ERANGE},
        {"9223372036854775808m", -ERANGE},
        {"1n", -ERANGE},
        {"0.0001", -ERANGE},
        {"1u", -ERANGE},
        {"1e-4", -ERANGE},
        {"1.0001", -ERANGE},
        {"1e999999999999999999999", -ERANGE},
        {"1e-100000000000000000000000", -ERANGE},
        /* Leading zeros make INT64_MAX parse exactly; it must still be capped (fuzz finding). */
        {"1e000000000000000000000000000009223372036854775807", -ERANGE},
        {"1e9223372036854775807", -ERANGE},
        {"1e-9223372036854775807", -ERANGE},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        struct kp_quantity q = {.milli = 42, .format = KP_QUANTITY_BINARY_SI};
        int r = kp_quantity_parse(bad[i].in, strlen(bad[i].in), 0, &q);

        if (r != bad[i].r)
            fail_msg("%s: got %d, want %d", bad[i].in, r, bad[i].r);
        assert_int_equal(q.milli, 42); /* untouched on error */
    }
}

static void test_round_up(void **state)
{
    static const struct {
        const char *in;
        int64_t milli;
    } cases[] = {
        {"1n", 1},           {"1u", 1},
        {"0.0001", 1},       {"1.0001", 1001},
        {"-1n", 0},          {"-1.5m", -1},
        {"999999n", 1},      {"1000001n", 2},
        {"1m", 1},           {"0.1Ki", 102400},
        {"0.001Ki", 1024},   {"0.0001Ki", 103},
        {"-0.0001Ki", -102}, {"1e-100000000000000000000000", 1},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_quantity q;

        assert_int_equal(
            kp_quantity_parse(cases[i].in, strlen(cases[i].in), KP_QUANTITY_ROUND_UP, &q), 0);
        if (q.milli != cases[i].milli)
            fail_msg("%s: got %lld want %lld", cases[i].in, (long long)q.milli,
                     (long long)cases[i].milli);
    }
}

static void test_limits(void **state)
{
    char big[KP_QUANTITY_MAX_LEN + 2];
    struct kp_quantity q;

    (void)state;
    memset(big, '0', sizeof(big));
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(kp_quantity_parse(big, strlen(big), 0, &q), -KP_ELIMIT);
    assert_int_equal(kp_quantity_parse(big, KP_QUANTITY_MAX_LEN, 0, &q), 0);
    assert_int_equal(q.milli, 0);
    /* Not NUL-terminated: only n bytes are read. */
    assert_int_equal(kp_quantity_parse("12Gi", 2, 0, &q), 0);
    assert_int_equal(q.milli, 12000);
}

static void test_format_small_buffer(void **state)
{
    struct kp_quantity q = {.milli = 1500, .format = KP_QUANTITY_DECIMAL_SI};
    char buf[KP_QUANTITY_STRMAX];

    (void)state;
    assert_int_equal(kp_quantity_format(&q, buf, 5), -E2BIG);
    assert_int_equal(kp_quantity_format(&q, buf, 6), 0);
    assert_string_equal(buf, "1500m");
    assert_int_equal(kp_quantity_format(&q, buf, 0), -E2BIG);
    q.milli = -INT64_MAX;
    assert_int_equal(kp_quantity_format(&q, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "-9223372036854775807m");
}

static void test_arithmetic(void **state)
{
    struct kp_quantity a, b, c;
    char buf[KP_QUANTITY_STRMAX];

    (void)state;
    assert_int_equal(kp_quantity_parse("1Gi", 3, 0, &a), 0);
    assert_int_equal(kp_quantity_parse("512Mi", 5, 0, &b), 0);
    assert_int_equal(kp_quantity_add(a, b, &c), 0);
    assert_int_equal(kp_quantity_format(&c, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1536Mi");
    assert_int_equal(kp_quantity_sub(a, b, &c), 0);
    assert_int_equal(kp_quantity_format(&c, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "512Mi");
    assert_int_equal(kp_quantity_cmp(a, b), 1);
    assert_int_equal(kp_quantity_cmp(b, a), -1);
    assert_int_equal(kp_quantity_cmp(a, a), 0);

    /* A zero receiver takes the other operand's format (Quantity.Add). */
    a = (struct kp_quantity){0};
    assert_int_equal(kp_quantity_add(a, b, &c), 0);
    assert_int_equal(c.format, KP_QUANTITY_BINARY_SI);

    /* Overflow is reported, outputs untouched. */
    a.milli = INT64_MAX;
    b.milli = 1;
    c.milli = 7;
    assert_int_equal(kp_quantity_add(a, b, &c), -ERANGE);
    assert_int_equal(c.milli, 7);
    a.milli = -INT64_MAX;
    assert_int_equal(kp_quantity_sub(a, b, &c), -ERANGE);
    b.milli = INT64_MIN;
    assert_int_equal(kp_quantity_sub(a, b, &c), -ERANGE);
    a.milli = INT64_MAX / 2 + 1;
    assert_int_equal(kp_quantity_mul(a, 2, &c), -ERANGE);
    a.milli = 250;
    assert_int_equal(kp_quantity_mul(a, 4, &c), 0);
    assert_int_equal(c.milli, 1000);

    /* Value() rounds up. */
    assert_int_equal(kp_quantity_value((struct kp_quantity){.milli = 1001}), 2);
    assert_int_equal(kp_quantity_value((struct kp_quantity){.milli = 1000}), 1);
    assert_int_equal(kp_quantity_value((struct kp_quantity){.milli = -1500}), -1);
    assert_int_equal(kp_quantity_from_units(1073741824, KP_QUANTITY_BINARY_SI, &c), 0);
    assert_int_equal(kp_quantity_format(&c, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1Gi");
    assert_int_equal(kp_quantity_from_units(INT64_MAX / 999, KP_QUANTITY_DECIMAL_SI, &c), -ERANGE);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_valid),
        cmocka_unit_test(test_parse_invalid),
        cmocka_unit_test(test_round_up),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_format_small_buffer),
        cmocka_unit_test(test_arithmetic),
    };

    return kp_test_main("quantity", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
