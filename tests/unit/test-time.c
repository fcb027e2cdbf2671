/* DESIGN: unit tests for base/time.c.
 *
 * Clock readings are only compared with bounds that hold however slowly the test runs (under
 * valgrind or TSan), never with expected speeds (STYLE.md rule 14). The random parts are checked
 * for their bounds over many draws and for reaching both ends of a range; with thousands of
 * draws the chance of a false failure is far below 2^-100. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/time.h"
#include "kp-test.h"

static void test_clocks(void **state)
{
    uint64_t a, b, r;

    (void)state;
    a = kp_mono_usec();
    b = kp_mono_usec();
    assert_true(b >= a);
    r = kp_real_usec();
    assert_true(r > 1577836800ULL * KP_USEC_PER_SEC); /* after 2020-01-01 */

    a = kp_mono_usec();
    kp_sleep_usec(2000);
    b = kp_mono_usec();
    assert_true(b - a >= 2000);
    kp_sleep_usec(0);
}

static void test_deadline_basic(void **state)
{
    struct kp_deadline d, e;

    (void)state;
    d = kp_deadline_in(0);
    assert_true(kp_deadline_expired(d));
    assert_int_equal(kp_deadline_left_usec(d), 0);
    assert_int_equal(kp_deadline_left_ms(d), 0);

    d = kp_deadline_in(3600 * KP_USEC_PER_SEC);
    assert_false(kp_deadline_expired(d));
    assert_true(kp_deadline_left_usec(d) <= 3600 * KP_USEC_PER_SEC);
    assert_true(kp_deadline_left_ms(d) > 0);
    assert_true(kp_deadline_left_ms(d) <= 3600 * 1000);

    e = kp_deadline_in(60 * KP_USEC_PER_SEC);
    assert_true(kp_deadline_min(d, e).at == e.at);
    assert_true(kp_deadline_min(e, d).at == e.at);
    assert_true(kp_deadline_min(kp_deadline_never(), e).at == e.at);
    assert_true(kp_deadline_min(e, kp_deadline_never()).at == e.at);
}

static void test_deadline_never_and_saturation(void **state)
{
    struct kp_deadline d;

    (void)state;
    d = kp_deadline_never();
    assert_false(kp_deadline_expired(d));
    assert_true(kp_deadline_left_usec(d) == KP_USEC_INFINITY);
    assert_int_equal(kp_deadline_left_ms(d), -1);

    /* Anything that would wrap past the top of the clock is "never", not the past. */
    d = kp_deadline_in(KP_USEC_INFINITY);
    assert_true(d.at == KP_USEC_INFINITY);
    d = kp_deadline_in(KP_USEC_INFINITY - 1);
    assert_true(d.at == KP_USEC_INFINITY);
    assert_false(kp_deadline_expired(d));
    d = kp_deadline_in(KP_USEC_INFINITY - kp_mono_usec() / 2);
    assert_true(d.at == KP_USEC_INFINITY);

    /* A huge but finite deadline clamps to INT32_MAX milliseconds. */
    d = kp_deadline_in((uint64_t)INT32_MAX * 1000 * 10);
    assert_true(d.at != KP_USEC_INFINITY);
    assert_int_equal(kp_deadline_left_ms(d), INT32_MAX);
}

/* ceil((at - now) / 1000) for a now sampled before and after the call brackets the result. */
static void test_deadline_left_ms_rounds_up(void **state)
{
    int i;

    (void)state;
    for (i = 0; i < 200; i++) {
        uint64_t before = kp_mono_usec(), after, offset = 3600 * KP_USEC_PER_SEC + 1 + (uint64_t)i;
        struct kp_deadline d = {.at = before + offset};
        int ms = kp_deadline_left_ms(d);
        uint64_t lo, hi;

        after = kp_mono_usec();
        lo = (d.at - after + 999) / 1000;
        hi = (d.at - before + 999) / 1000;
        assert_true((uint64_t)ms >= lo);
        assert_true((uint64_t)ms <= hi);
    }
    /* One microsecond left is one millisecond for poll(2), not zero. */
    {
        struct kp_deadline d = {.at = kp_mono_usec() + 1};
        int ms = kp_deadline_left_ms(d);

        assert_true(ms == 1 || (ms == 0 && kp_deadline_expired(d)));
    }
}

static void check_range(struct kp_backoff *b, uint64_t upper, int draws)
{
    int i;

    for (i = 0; i < draws; i++) {
        unsigned attempt = b->attempt;
        uint64_t v = kp_backoff_next(b);

        b->attempt = attempt; /* stay on this attempt */
        assert_true(v >= upper / 2);
        assert_true(v <= upper);
    }
}

static void test_backoff_bounds_and_growth(void **state)
{
    const uint64_t base = 100 * KP_USEC_PER_MSEC, cap = 10 * KP_USEC_PER_SEC;
    struct kp_backoff b;
    uint64_t upper = base;
    unsigned k;

    (void)state;
    kp_backoff_init(&b, base, cap);
    assert_int_equal(b.attempt, 0);
    assert_true(b.rng != 0);
    for (k = 0; k < 12; k++) {
        uint64_t v;

        check_range(&b, KP_MIN(upper, cap), 500);
        v = kp_backoff_next(&b);
        assert_true(v >= KP_MIN(upper, cap) / 2 && v <= KP_MIN(upper, cap));
        assert_int_equal(b.attempt, k + 1);
        upper *= 2;
    }
    /* Far past the cap the wait stays in [cap/2, cap] and spans it. */
    {
        uint64_t lo = UINT64_MAX, hi = 0;
        int i;

        for (i = 0; i < 20000; i++) {
            uint64_t v = kp_backoff_next(&b);

            assert_true(v >= cap / 2 && v <= cap);
            lo = KP_MIN(lo, v);
            hi = KP_MAX(hi, v);
        }
        assert_true(lo < cap / 2 + cap / 100);
        assert_true(hi > cap - cap / 100);
    }
    /* The attempt counter saturates instead of wrapping. */
    assert_true(b.attempt <= 64);
    b.attempt = 1000;
    check_range(&b, cap, 100);

    kp_backoff_reset(&b);
    assert_int_equal(b.attempt, 0);
    check_range(&b, base, 1000);
}

static void test_backoff_edges(void **state)
{
    struct kp_backoff b;
    int i;

    (void)state;
    kp_backoff_init(&b, 0, 1000);
    for (i = 0; i < 10; i++)
        assert_int_equal(kp_backoff_next(&b), 0);

    kp_backoff_init(&b, 1000, 0);
    for (i = 0; i < 10; i++)
        assert_int_equal(kp_backoff_next(&b), 0);

    /* base above cap: the cap wins from the first attempt. */
    kp_backoff_init(&b, 5000, 3000);
    check_range(&b, 3000, 1000);

    /* base 1: attempt 0 waits 0 or 1. */
    kp_backoff_init(&b, 1, 1000);
    check_range(&b, 1, 100);

    /* Nothing overflows at the top of the type. */
    kp_backoff_init(&b, UINT64_MAX, UINT64_MAX);
    for (i = 0; i < 100; i++)
        assert_true(kp_backoff_next(&b) >= UINT64_MAX / 2);
    kp_backoff_init(&b, UINT64_MAX / 3, UINT64_MAX);
    for (i = 0; i < 100; i++)
        assert_true(kp_backoff_next(&b) >= (UINT64_MAX / 3) / 2);

    /* Two generators are seeded independently. */
    {
        struct kp_backoff c;

        kp_backoff_init(&b, 1, 1);
        kp_backoff_init(&c, 1, 1);
        assert_true(b.rng != c.rng);
    }
}

static void test_rand_below(void **state)
{
    uint64_t s = 12345, seen = 0, v;
    int i;

    (void)state;
    assert_int_equal(kp_rand_below(&s, 0), 0);
    for (i = 0; i < 100; i++)
        assert_int_equal(kp_rand_below(&s, 1), 0);
    for (i = 0; i < 10000; i++) {
        v = kp_rand_below(&s, 7);
        assert_true(v < 7);
        seen |= 1ULL << v;
    }
    assert_int_equal(seen, 0x7f);

    /* The worst case for rejection (about half the outputs rejected) still terminates. */
    for (i = 0; i < 10000; i++)
        assert_true(kp_rand_below(&s, (1ULL << 63) + 1) <= (1ULL << 63));
    for (i = 0; i < 1000; i++)
        assert_true(kp_rand_below(&s, UINT64_MAX) < UINT64_MAX);

    /* A zero state does not get stuck at zero. */
    s = 0;
    seen = 0;
    for (i = 0; i < 100; i++)
        seen |= kp_rand_below(&s, 1000);
    assert_true(s != 0);
    assert_true(seen != 0);
}

/* The mean of many draws below 1000 sits near 499.5: a crude check that nothing is skewed. */
static void test_rand_below_is_not_skewed(void **state)
{
    uint64_t s = 987654321, sum = 0, hist[3] = {0, 0, 0};
    int i;

    (void)state;
    for (i = 0; i < 100000; i++)
        sum += kp_rand_below(&s, 1000);
    assert_true(sum / 100000 >= 490 && sum / 100000 <= 510);

    /* bound = 3 * 2^62 makes plain "r % bound" give 0..2^62 twice as often as the rest. */
    for (i = 0; i < 30000; i++)
        hist[kp_rand_below(&s, 3ULL << 62) >> 62]++;
    for (i = 0; i < 3; i++)
        assert_true(hist[i] > 9000 && hist[i] < 11000);
}

static void check_rfc3339(uint64_t usec, const char *want)
{
    char buf[KP_RFC3339_MAX];

    assert_int_equal(kp_time_format_rfc3339(usec, buf, sizeof(buf)), 0);
    assert_string_equal(buf, want);
}

static void test_rfc3339_known_instants(void **state)
{
    (void)state;
    check_rfc3339(0, "1970-01-01T00:00:00.000000Z");
    check_rfc3339(1, "1970-01-01T00:00:00.000001Z");
    check_rfc3339(999999, "1970-01-01T00:00:00.999999Z");
    check_rfc3339(1234567890ULL * KP_USEC_PER_SEC + 10, "2009-02-13T23:31:30.000010Z");
    check_rfc3339(951782400ULL * KP_USEC_PER_SEC + 123456, "2000-02-29T00:00:00.123456Z");
    check_rfc3339(1709164800ULL * KP_USEC_PER_SEC, "2024-02-29T00:00:00.000000Z");
    /* The day of the 2016 leap second: POSIX time has no :60, so the last second is :59. */
    check_rfc3339(1483228799ULL * KP_USEC_PER_SEC + 500000, "2016-12-31T23:59:59.500000Z");
    check_rfc3339(4102444799ULL * KP_USEC_PER_SEC, "2099-12-31T23:59:59.000000Z");
    check_rfc3339(253402300799ULL * KP_USEC_PER_SEC + 999999, "9999-12-31T23:59:59.999999Z");
}

static void test_rfc3339_errors(void **state)
{
    char buf[64];

    (void)state;
    memset(buf, 'x', sizeof(buf));
    assert_int_equal(kp_time_format_rfc3339(0, buf, KP_RFC3339_MAX - 1), -E2BIG);
    assert_int_equal(kp_time_format_rfc3339(0, buf, 0), -E2BIG);
    assert_int_equal(buf[0], 'x'); /* untouched on failure */
    assert_int_equal(kp_time_format_rfc3339(253402300800ULL * KP_USEC_PER_SEC, buf, sizeof(buf)),
                     -ERANGE);
    assert_int_equal(kp_time_format_rfc3339(UINT64_MAX, buf, sizeof(buf)), -ERANGE);
    assert_int_equal(buf[0], 'x');
    assert_int_equal(kp_time_format_rfc3339(0, buf, KP_RFC3339_MAX), 0);
    assert_int_equal(strlen(buf), KP_RFC3339_MAX - 1);
    assert_int_equal(kp_time_format_rfc3339(kp_real_usec(), buf, sizeof(buf)), 0);
    assert_int_equal(strlen(buf), KP_RFC3339_MAX - 1);
    assert_int_equal(buf[KP_RFC3339_MAX - 2], 'Z');
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_deadline_basic),
        cmocka_unit_test(test_deadline_never_and_saturation),
        cmocka_unit_test(test_deadline_left_ms_rounds_up),
        cmocka_unit_test(test_backoff_bounds_and_growth),
        cmocka_unit_test(test_backoff_edges),
        cmocka_unit_test(test_rand_below),
        cmocka_unit_test(test_rand_below_is_not_skewed),
        cmocka_unit_test(test_rfc3339_known_instants),
        cmocka_unit_test(test_rfc3339_errors),
    };

    return kp_test_main("time", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
