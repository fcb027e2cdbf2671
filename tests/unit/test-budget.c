/* Tests for core/disruption/budget.h: the cron grammar (each form, names, macros, the day-of-month
 * / day-of-week rule, steps, every refusal and its message), the next hit across month, year and
 * leap-year boundaries and robfig's five-year limit, checked also against a minute-by-minute
 * search over gmtime_r, and the budget rules (activity windows at their exact edges, rounding,
 * reasons, failing closed, remaining). Timestamps were computed with `date -u -d ... +%s`. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kp-test.h"

#include "api/obj-karpenter.h"
#include "base/alloc.h"
#include "core/disruption/budget.h"

/* Bits lo..hi of a mask. */
#define BITS(lo, hi) ((~UINT64_C(0) >> (63 - (hi))) & (~UINT64_C(0) << (lo)))
#define BIT(v) (UINT64_C(1) << (v))

/* Fixed instants (UTC). */
#define T_2025_01_01 INT64_C(1735689600)      /* Wed */
#define T_2025_01_31_1200 INT64_C(1738324800) /* Fri */
#define T_2025_02_01 INT64_C(1738368000)
#define T_2025_03_10_1230 INT64_C(1741609800) /* Mon */
#define T_2025_03_11_1230 INT64_C(1741696200)
#define T_2025_04_01 INT64_C(1743465600)
#define T_2025_05_31 INT64_C(1748649600)
#define T_2025_06_01 INT64_C(1748736000) /* Sun */
#define T_2025_06_02 INT64_C(1748822400) /* Mon */
#define T_2025_06_02_0859_59 INT64_C(1748854799)
#define T_2025_06_02_0900 INT64_C(1748854800)
#define T_2025_06_02_1000 INT64_C(1748858400)
#define T_2025_06_02_1000_01 INT64_C(1748858401)
#define T_2025_06_02_1200 INT64_C(1748865600)
#define T_2025_06_02_1205 INT64_C(1748865900)
#define T_2025_06_02_1215 INT64_C(1748866500)
#define T_2025_06_02_1300 INT64_C(1748869200)
#define T_2025_06_02_1659_59 INT64_C(1748883599)
#define T_2025_06_02_1700 INT64_C(1748883600)
#define T_2025_06_03 INT64_C(1748908800) /* Tue */
#define T_2025_06_04 INT64_C(1748995200) /* Wed */
#define T_2025_06_06 INT64_C(1749168000) /* Fri */
#define T_2025_06_07 INT64_C(1749254400) /* Sat */
#define T_2025_06_08 INT64_C(1749340800) /* Sun */
#define T_2025_06_09 INT64_C(1749427200) /* Mon */
#define T_2025_06_13 INT64_C(1749772800) /* Fri */
#define T_2025_06_15 INT64_C(1749945600)
#define T_2025_06_20 INT64_C(1750377600) /* Fri */
#define T_2025_10_31_2359 INT64_C(1761955140)
#define T_2025_11_01 INT64_C(1761955200)
#define T_2025_12_31_2359 INT64_C(1767225540)
#define T_2025_12_31_2359_59 INT64_C(1767225599)
#define T_2026_01_01 INT64_C(1767225600)
#define T_2024_02_29_1200 INT64_C(1709208000)
#define T_2028_02_29 INT64_C(1835395200)
#define T_1999_01_01 INT64_C(915148800)
#define T_2000_02_29 INT64_C(951782400)
#define T_2095_03_01 INT64_C(3949776000)
#define T_2096_02_29 INT64_C(3981312000)
#define T_2096_03_01 INT64_C(3981398400)
#define T_2097_03_01 INT64_C(4012934400)
#define T_1898_03_01 INT64_C(-2266963200)
#define T_1899_01_01 INT64_C(-2240524800)
#define T_1904_02_29 INT64_C(-2077747200)
#define T_1969_06_01 INT64_C(-18489600)

static struct kp_cron parse_ok(const char *text)
{
    struct kp_cron c;
    char *why = NULL;
    int r = kp_cron_parse(text, &c, &why);

    if (r != 0)
        print_error("kp_cron_parse(\"%s\"): %d %s\n", text, r, why ? why : "(no message)");
    kp_free(why);
    assert_int_equal(r, 0);
    return c;
}

/* Parsing fails with -EINVAL, leaves *ret alone, and says exactly want. */
static void parse_fails(const char *text, const char *want)
{
    struct kp_cron c;
    char *why = NULL;

    memset(&c, 0xa5, sizeof(c));
    assert_int_equal(kp_cron_parse(text, &c, &why), -EINVAL);
    assert_non_null(why);
    if (strcmp(why, want) != 0)
        print_error("kp_cron_parse(\"%s\"): got \"%s\"\n", text ? text : "(null)", why);
    assert_string_equal(why, want);
    kp_free(why);
    for (size_t i = 0; i < sizeof(c); i++)
        assert_int_equal(((unsigned char *)&c)[i], 0xa5);
    /* Without a message pointer, the same verdict. */
    assert_int_equal(kp_cron_parse(text, &c, NULL), -EINVAL);
}

/* Field by field: the struct has padding. */
static void assert_cron_equal(const struct kp_cron *a, const struct kp_cron *b)
{
    assert_true(a->minute == b->minute);
    assert_true(a->hour == b->hour);
    assert_true(a->dom == b->dom);
    assert_true(a->month == b->month);
    assert_true(a->dow == b->dow);
    assert_int_equal(a->dom_star, b->dom_star);
    assert_int_equal(a->dow_star, b->dow_star);
}

static int64_t next_of(const char *text, int64_t after)
{
    struct kp_cron c = parse_ok(text);

    return kp_cron_next(&c, after);
}

/* --- parsing: accepted forms -------------------------------------------------------------- */

static void test_parse_all_stars(void **state)
{
    struct kp_cron c = parse_ok("* * * * *");

    (void)state;
    assert_true(c.minute == BITS(0, 59));
    assert_true(c.hour == BITS(0, 23));
    assert_true(c.dom == BITS(1, 31));
    assert_true(c.month == BITS(1, 12));
    assert_true(c.dow == BITS(0, 6));
    assert_true(c.dom_star);
    assert_true(c.dow_star);
}

static void test_parse_single_values(void **state)
{
    struct kp_cron c = parse_ok("5 4 3 2 1");

    (void)state;
    assert_true(c.minute == BIT(5));
    assert_true(c.hour == BIT(4));
    assert_true(c.dom == BIT(3));
    assert_true(c.month == BIT(2));
    assert_true(c.dow == BIT(1));
    assert_false(c.dom_star);
    assert_false(c.dow_star);
    c = parse_ok("59 23 31 12 6");
    assert_true(c.minute == BIT(59) && c.hour == BIT(23) && c.dom == BIT(31));
    assert_true(c.month == BIT(12) && c.dow == BIT(6));
    c = parse_ok("00 007 01 1 0"); /* leading zeros, as strconv.Atoi reads them */
    assert_true(c.minute == BIT(0) && c.hour == BIT(7) && c.dom == BIT(1) && c.dow == BIT(0));
}

static void test_parse_ranges_and_lists(void **state)
{
    struct kp_cron c = parse_ok("1-5 9-17 1,15 1-3,6 1-5");

    (void)state;
    assert_true(c.minute == BITS(1, 5));
    assert_true(c.hour == BITS(9, 17));
    assert_true(c.dom == (BIT(1) | BIT(15)));
    assert_true(c.month == (BITS(1, 3) | BIT(6)));
    assert_true(c.dow == BITS(1, 5));
    c = parse_ok("7-7 0,0,0 5-6,1-2 12 0-6"); /* one-value ranges, repeats, overlaps */
    assert_true(c.minute == BIT(7) && c.hour == BIT(0));
    assert_true(c.dom == (BITS(1, 2) | BITS(5, 6)));
    assert_true(c.dow == BITS(0, 6));
    assert_false(c.dow_star); /* 0-6 is every day, but not a star */
}

static void test_parse_steps(void **state)
{
    struct kp_cron c = parse_ok("*/15 10-20/5 5/10 */3 1-5/2");

    (void)state;
    assert_true(c.minute == (BIT(0) | BIT(15) | BIT(30) | BIT(45)));
    assert_true(c.hour == (BIT(10) | BIT(15) | BIT(20)));
    assert_true(c.dom == (BIT(5) | BIT(15) | BIT(25))); /* N/S is N-max/S */
    assert_true(c.month == (BIT(1) | BIT(4) | BIT(7) | BIT(10)));
    assert_true(c.dow == (BIT(1) | BIT(3) | BIT(5)));
    c = parse_ok("*/59 */100 */1 1/1 0/7");
    assert_true(c.minute == (BIT(0) | BIT(59)));
    assert_true(c.hour == BIT(0)); /* a step past the range selects the start alone */
    assert_true(c.dom == BITS(1, 31));
    assert_true(c.month == BITS(1, 12));
    assert_true(c.dow == BIT(0));
    c = parse_ok("0 0 1 1 */99999999999999999999999"); /* any step size, even past uint64 */
    assert_true(c.dow == BIT(0));
}

/* robfig's star bit: "*" or "?" with step 1, anywhere in the list; a larger step clears it. */
static void test_parse_star_flags(void **state)
{
    struct kp_cron c;

    (void)state;
    c = parse_ok("0 0 ? * ?");
    assert_true(c.dom == BITS(1, 31) && c.dow == BITS(0, 6));
    assert_true(c.dom_star && c.dow_star);
    c = parse_ok("0 0 */1 * */1");
    assert_true(c.dom_star && c.dow_star);
    c = parse_ok("0 0 */2 * ?/2");
    assert_false(c.dom_star);
    assert_false(c.dow_star);
    assert_true(c.dow == (BIT(0) | BIT(2) | BIT(4) | BIT(6)));
    c = parse_ok("0 0 5,* * 1,*");
    assert_true(c.dom_star && c.dow_star);
    c = parse_ok("0 0 1-31 * 0-6");
    assert_false(c.dom_star || c.dow_star);
}

static void test_parse_month_names(void **state)
{
    static const char *const names[] = {"JAN", "feb", "Mar", "aPR", "MAY", "jun",
                                        "JUL", "aug", "SEP", "oct", "NOV", "dec"};
    struct kp_cron c;
    char text[64];

    (void)state;
    for (unsigned i = 0; i < KP_ARRAY_SIZE(names); i++) {
        assert_true(snprintf(text, sizeof(text), "0 0 1 %s *", names[i]) > 0);
        c = parse_ok(text);
        assert_true(c.month == BIT(i + 1));
    }
    c = parse_ok("0 0 1 jan-MAR,6,Oct-dec/2 *");
    assert_true(c.month == (BITS(1, 3) | BIT(6) | BIT(10) | BIT(12)));
    c = parse_ok("0 0 1 FEB/3 *");
    assert_true(c.month == (BIT(2) | BIT(5) | BIT(8) | BIT(11)));
}

static void test_parse_day_names(void **state)
{
    static const char *const names[] = {"SUN", "mon", "Tue", "WED", "thu", "Fri", "sAT"};
    struct kp_cron c;
    char text[64];

    (void)state;
    for (unsigned i = 0; i < KP_ARRAY_SIZE(names); i++) {
        assert_true(snprintf(text, sizeof(text), "0 0 * * %s", names[i]) > 0);
        c = parse_ok(text);
        assert_true(c.dow == BIT(i));
    }
    c = parse_ok("0 0 * * MON-FRI");
    assert_true(c.dow == BITS(1, 5));
    c = parse_ok("0 0 * * sun,sat");
    assert_true(c.dow == (BIT(0) | BIT(6)));
    c = parse_ok("0 0 * * 1-fri");
    assert_true(c.dow == BITS(1, 5));
}

static void test_parse_macros(void **state)
{
    static const struct {
        const char *macro, *same;
    } cases[] = {
        {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
        {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"}, {" @daily\t", "0 0 * * *"},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_cron a = parse_ok(cases[i].macro), b = parse_ok(cases[i].same);

        assert_cron_equal(&a, &b);
    }
}

static void test_parse_blanks(void **state)
{
    struct kp_cron a = parse_ok("30 6 * * 1-5"), b;

    (void)state;
    b = parse_ok("  30\t6  *\t\t* 1-5 \n");
    assert_cron_equal(&a, &b);
    b = parse_ok("\r\v\f30 6 * * 1-5");
    assert_cron_equal(&a, &b);
}

static void test_parse_longest(void **state)
{
    char text[KP_CRON_MAX_TEXT + 1];
    struct kp_cron c;

    (void)state;
    /* Exactly KP_CRON_MAX_TEXT bytes: "0 0 * * *" padded with spaces. */
    memset(text, ' ', KP_CRON_MAX_TEXT);
    memcpy(text, "0 0 * * *", 9);
    text[KP_CRON_MAX_TEXT] = '\0';
    c = parse_ok(text);
    assert_true(c.minute == BIT(0));
}

/* --- parsing: refusals -------------------------------------------------------------------- */

static void test_refuse_empty(void **state)
{
    (void)state;
    parse_fails(NULL, "no schedule");
    parse_fails("", "empty schedule");
    parse_fails(" \t\n ", "empty schedule");
}

static void test_refuse_too_long(void **state)
{
    char text[KP_CRON_MAX_TEXT + 2];

    (void)state;
    memset(text, ' ', KP_CRON_MAX_TEXT + 1);
    memcpy(text, "0 0 * * *", 9);
    text[KP_CRON_MAX_TEXT + 1] = '\0';
    parse_fails(text, "schedule is longer than 256 bytes");
}

static void test_refuse_time_zones(void **state)
{
    (void)state;
    parse_fails(
        "TZ=UTC 0 0 * * *",
        "schedule \"TZ=UTC 0 0 * * *\": time zones are not supported, schedules are in UTC");
    parse_fails("CRON_TZ=Europe/Paris 0 0 * * *",
                "schedule \"CRON_TZ=Europe/Paris 0 0 * * *\": time zones are not supported, "
                "schedules are in UTC");
}

static void test_refuse_unknown_macros(void **state)
{
    (void)state;
    parse_fails("@every 5m", "unknown macro \"@every 5m\": use @yearly, @annually, @monthly, "
                             "@weekly, @daily, @midnight or @hourly");
    parse_fails("@DAILY", "unknown macro \"@DAILY\": use @yearly, @annually, @monthly, @weekly, "
                          "@daily, @midnight or @hourly");
    parse_fails("@daily 0", "unknown macro \"@daily 0\": use @yearly, @annually, @monthly, "
                            "@weekly, @daily, @midnight or @hourly");
    parse_fails("@", "unknown macro \"@\": use @yearly, @annually, @monthly, @weekly, @daily, "
                     "@midnight or @hourly");
}

static void test_refuse_field_count(void **state)
{
    (void)state;
    parse_fails("* * * *", "schedule \"* * * *\": expected 5 fields (minute hour day-of-month "
                           "month day-of-week), found 4");
    parse_fails("0 * * * * *", "schedule \"0 * * * * *\": expected 5 fields (minute hour "
                               "day-of-month month day-of-week), found 6 (seconds are not "
                               "supported)");
    parse_fails("1 2 3 4 5 6 7", "schedule \"1 2 3 4 5 6 7\": expected 5 fields (minute hour "
                                 "day-of-month month day-of-week), found 7");
    parse_fails("daily", "schedule \"daily\": expected 5 fields (minute hour day-of-month month "
                         "day-of-week), found 1");
}

static void test_refuse_out_of_range(void **state)
{
    (void)state;
    parse_fails("61 * * * *", "minute field \"61\": value 61 out of range 0-59");
    parse_fails("0-60 * * * *", "minute field \"0-60\": value 60 out of range 0-59");
    parse_fails("0 24 * * *", "hour field \"24\": value 24 out of range 0-23");
    parse_fails("0 0 0 * *", "day-of-month field \"0\": value 0 out of range 1-31");
    parse_fails("0 0 1,32 * *", "day-of-month field \"1,32\": value 32 out of range 1-31");
    parse_fails("0 0 * 0 *", "month field \"0\": value 0 out of range 1-12");
    parse_fails("0 0 * 13 *", "month field \"13\": value 13 out of range 1-12");
    parse_fails("0 0 * * 99999999999999999999",
                "day-of-week field \"99999999999999999999\": value 99999999999999999999 out of "
                "range 0-6");
    parse_fails("0 0 * * 70/2", "day-of-week field \"70/2\": value 70 out of range 0-6");
}

/* robfig's day-of-week range is 0-6: Sunday is 0 only, and 7 is refused. */
static void test_refuse_dow_seven(void **state)
{
    (void)state;
    parse_fails("0 0 * * 7", "day-of-week field \"7\": value 7 out of range 0-6");
    parse_fails("0 0 * * 1-7", "day-of-week field \"1-7\": value 7 out of range 0-6");
}

static void test_refuse_steps(void **state)
{
    (void)state;
    parse_fails("*/0 * * * *", "minute field \"*/0\": step 0 in \"*/0\" must be at least 1");
    parse_fails("0 1-5/00 * * *", "hour field \"1-5/00\": step 0 in \"1-5/00\" must be at least 1");
    parse_fails("*/x * * * *", "minute field \"*/x\": step \"x\" is not a number");
    parse_fails("5/ * * * *", "minute field \"5/\": step \"\" is not a number");
    parse_fails("*/-1 * * * *", "minute field \"*/-1\": step \"-1\" is not a number");
    parse_fails("*/2/3 * * * *", "minute field \"*/2/3\": more than one '/' in \"*/2/3\"");
    parse_fails("0 0 * JAN/FEB *", "month field \"JAN/FEB\": step \"FEB\" is not a number");
}

static void test_refuse_reversed_range(void **state)
{
    (void)state;
    parse_fails("0 5-2 * * *", "hour field \"5-2\": range \"5-2\" starts after it ends");
    parse_fails("0 0 * DEC-JAN *",
                "month field \"DEC-JAN\": range \"DEC-JAN\" starts after it ends");
    parse_fails("0 0 * * FRI-MON/2",
                "day-of-week field \"FRI-MON/2\": range \"FRI-MON\" starts after it ends");
}

static void test_refuse_malformed_elements(void **state)
{
    (void)state;
    parse_fails("1,,2 * * * *", "minute field \"1,,2\": empty list element");
    parse_fails("1, * * * *", "minute field \"1,\": empty list element");
    parse_fails(",1 * * * *", "minute field \",1\": empty list element");
    parse_fails("1-2-3 * * * *", "minute field \"1-2-3\": more than one '-' in \"1-2-3\"");
    parse_fails("-5 * * * *", "minute field \"-5\": missing value in \"-5\"");
    parse_fails("5- * * * *", "minute field \"5-\": missing value in \"5-\"");
    parse_fails("/5 * * * *", "minute field \"/5\": missing value in \"/5\"");
    parse_fails("*-5 * * * *",
                "minute field \"*-5\": '*' and '?' cannot be a range bound in \"*-5\"");
    parse_fails("0 0 5-? * *",
                "day-of-month field \"5-?\": '*' and '?' cannot be a range bound in \"5-?\"");
    parse_fails("** * * * *", "minute field \"**\": '*' and '?' cannot be a range bound in \"**\"");
}

static void test_refuse_not_numbers(void **state)
{
    (void)state;
    parse_fails("abc * * * *", "minute field \"abc\": \"abc\" is not a number");
    parse_fails("+5 * * * *", "minute field \"+5\": \"+5\" is not a number");
    parse_fails("0 0 1.5 * *", "day-of-month field \"1.5\": \"1.5\" is not a number");
    parse_fails("JAN * * * *", "minute field \"JAN\": \"JAN\" is not a number"); /* no names */
    parse_fails("0 0 * * JAN", "day-of-week field \"JAN\": \"JAN\" is not a number or day name");
    parse_fails("0 0 * MON *", "month field \"MON\": \"MON\" is not a number or month name");
    parse_fails("0 0 * january *",
                "month field \"january\": \"january\" is not a number or month name");
    parse_fails("0 0 * * monday",
                "day-of-week field \"monday\": \"monday\" is not a number or day name");
    parse_fails("0 0 * * L", "day-of-week field \"L\": \"L\" is not a number or day name");
}

/* The text ends at its terminator even inside a field; parsing reads nothing after it. */
static void test_parse_stops_at_nul(void **state)
{
    static const char text[] = "0 0 * * 1\0garbage";
    struct kp_cron c = parse_ok(text);

    (void)state;
    assert_true(c.dow == BIT(1));
}

/* --- the next hit ------------------------------------------------------------------------- */

static void test_next_strictly_after(void **state)
{
    (void)state;
    /* From a minute boundary, the next one; from inside a minute, its end. */
    assert_int_equal(next_of("* * * * *", T_2025_06_02_1200), T_2025_06_02_1200 + 60);
    assert_int_equal(next_of("* * * * *", T_2025_06_02_1200 + 30), T_2025_06_02_1200 + 60);
    assert_int_equal(next_of("* * * * *", T_2025_06_02_1200 - 1), T_2025_06_02_1200);
    assert_int_equal(next_of("0 12 * * *", T_2025_06_02_1200 - 1), T_2025_06_02_1200);
    assert_int_equal(next_of("0 12 * * *", T_2025_06_02_1200), T_2025_06_02_1200 + 86400);
}

static void test_next_minutes_and_hours(void **state)
{
    (void)state;
    assert_int_equal(next_of("*/15 * * * *", T_2025_06_02_1200), T_2025_06_02_1215);
    assert_int_equal(next_of("5 * * * *", T_2025_06_02_1200), T_2025_06_02_1205);
    assert_int_equal(next_of("0 * * * *", T_2025_06_02_1205), T_2025_06_02_1300);
    assert_int_equal(next_of("30 12 * * *", T_2025_03_10_1230), T_2025_03_11_1230);
    assert_int_equal(next_of("0 9-17 * * *", T_2025_06_02_1659_59), T_2025_06_02_1700);
    assert_int_equal(next_of("0 9 * * *", T_2025_06_02_1000), T_2025_06_02_0900 + 86400);
    assert_int_equal(next_of("@hourly", T_2025_06_02_1205), T_2025_06_02_1300);
}

static void test_next_month_boundaries(void **state)
{
    (void)state;
    assert_int_equal(next_of("0 0 1 * *", T_2025_01_31_1200), T_2025_02_01);
    assert_int_equal(next_of("@monthly", T_2025_10_31_2359), T_2025_11_01);
    /* April has no 31st: the next 31st is May's. */
    assert_int_equal(next_of("0 0 31 * *", T_2025_04_01), T_2025_05_31);
    /* A month not in the mask is skipped whole. */
    assert_int_equal(next_of("0 0 * JUN *", T_2025_01_01), T_2025_06_01);
    assert_int_equal(next_of("0 0 * 11 *", T_2025_10_31_2359), T_2025_11_01);
}

static void test_next_year_boundaries(void **state)
{
    (void)state;
    assert_int_equal(next_of("* * * * *", T_2025_12_31_2359), T_2026_01_01);
    assert_int_equal(next_of("* * * * *", T_2025_12_31_2359_59), T_2026_01_01);
    assert_int_equal(next_of("@yearly", T_2025_06_15), T_2026_01_01);
    assert_int_equal(next_of("@annually", T_2025_12_31_2359_59), T_2026_01_01);
    assert_int_equal(next_of("59 23 31 12 *", T_2025_01_01), T_2025_12_31_2359);
    assert_int_equal(next_of("0 0 * JAN *", T_2025_06_15), T_2026_01_01);
}

static void test_next_leap_years(void **state)
{
    (void)state;
    assert_int_equal(next_of("0 0 29 2 *", T_2025_01_01), T_2028_02_29);
    assert_int_equal(next_of("0 0 29 FEB *", T_2024_02_29_1200), T_2028_02_29);
    /* 2000 is a leap year: divisible by 400. */
    assert_int_equal(next_of("0 0 29 2 *", T_1999_01_01), T_2000_02_29);
    assert_int_equal(next_of("0 0 29 2 *", T_2095_03_01), T_2096_02_29);
    assert_int_equal(next_of("0 0 1 3 *", T_2096_02_29), T_2096_03_01);
}

/* robfig gives up once the search passes the fifth year after the start's year. */
static void test_next_five_year_limit(void **state)
{
    (void)state;
    /* 2100 is no leap year: after 2096 the next Feb 29 is in 2104. */
    assert_int_equal(next_of("0 0 29 2 *", T_2096_03_01), -1);
    assert_int_equal(next_of("0 0 29 2 *", T_2097_03_01), -1);
    /* 1900 is no leap year either: 1904 is 5 years after 1899 (found), 6 after 1898 (not). */
    assert_int_equal(next_of("0 0 29 2 *", T_1899_01_01), T_1904_02_29);
    assert_int_equal(next_of("0 0 29 2 *", T_1898_03_01), -1);
}

static void test_next_never(void **state)
{
    (void)state;
    assert_int_equal(next_of("0 0 30 2 *", T_2025_01_01), -1);
    assert_int_equal(next_of("0 0 31 4,6,9,11 *", T_2025_01_01), -1);
    assert_int_equal(next_of("0 0 30,31 FEB *", T_2025_01_01), -1);
}

/* Both restricted: either matches. */
static void test_next_dom_dow_or(void **state)
{
    (void)state;
    /* June 2025: Sun 1, Fri 6, Fri 13, Fri 20. */
    assert_int_equal(next_of("0 0 13 * FRI", T_2025_06_01), T_2025_06_06);
    assert_int_equal(next_of("0 0 13 * FRI", T_2025_06_06), T_2025_06_13);
    assert_int_equal(next_of("0 0 13 * FRI", T_2025_06_13), T_2025_06_20);
    /* A dom star with a step counts as restricted: odd days or Mondays. */
    assert_int_equal(next_of("0 0 */2 * MON", T_2025_06_01), T_2025_06_02);
    assert_int_equal(next_of("0 0 2-31/2 * SAT", T_2025_06_02), T_2025_06_04);
}

/* One a star: both must match (the star always does). */
static void test_next_dom_dow_and(void **state)
{
    (void)state;
    assert_int_equal(next_of("0 0 * * FRI", T_2025_06_01), T_2025_06_06);
    assert_int_equal(next_of("0 0 13 * *", T_2025_06_01), T_2025_06_13);
    assert_int_equal(next_of("0 0 13 * ?", T_2025_06_01), T_2025_06_13);
    /* A star with step 1 is still a star: Mondays only, not every day. */
    assert_int_equal(next_of("0 0 */1 * MON", T_2025_06_03), T_2025_06_09);
    assert_int_equal(next_of("0 0 1-31 * MON", T_2025_06_03), T_2025_06_04); /* no star: OR */
    assert_int_equal(next_of("@weekly", T_2025_06_04), T_2025_06_08);
    assert_int_equal(next_of("0 0 * * 6", T_2025_06_03), T_2025_06_07);
}

static void test_next_before_1970(void **state)
{
    (void)state;
    assert_int_equal(next_of("0 0 1 1 *", T_1969_06_01), 0);
    assert_int_equal(next_of("* * * * *", -1), 0);
    assert_int_equal(next_of("* * * * *", -61), -60);
    assert_int_equal(next_of("* * * * *", -60), 0);
}

static void test_next_domain(void **state)
{
    struct kp_cron c = parse_ok("* * * * *");

    (void)state;
    assert_int_equal(kp_cron_next(&c, INT64_MAX), -1);
    assert_int_equal(kp_cron_next(&c, INT64_MIN), -1);
    assert_int_equal(kp_cron_next(&c, KP_CRON_MIN_SEC - 1), -1);
    assert_int_equal(kp_cron_next(&c, KP_CRON_MAX_SEC + 1), -1);
    assert_int_equal(kp_cron_next(&c, KP_CRON_MIN_SEC), KP_CRON_MIN_SEC + 60);
    assert_int_equal(kp_cron_next(&c, KP_CRON_MAX_SEC), KP_CRON_MAX_SEC + 1);
}

/* A struct not made by the parser: an empty mask never matches, and the walk still ends. */
static void test_next_empty_masks(void **state)
{
    struct kp_cron c = parse_ok("* * * * *");

    (void)state;
    c.month = 0;
    assert_int_equal(kp_cron_next(&c, T_2025_01_01), -1);
    c = parse_ok("* * * * *");
    c.minute = 0;
    assert_int_equal(kp_cron_next(&c, T_2025_01_01), -1);
    c = parse_ok("0 0 1 * 1");
    c.dom = c.dow = 0;
    assert_int_equal(kp_cron_next(&c, T_2025_01_01), -1);
}

/* Whether c matches the minute starting at t, by gmtime_r. */
static bool ref_matches(const struct kp_cron *c, time_t t)
{
    struct tm tm;
    bool dom, dow;

    assert_non_null(gmtime_r(&t, &tm));
    if (!(c->minute >> tm.tm_min & 1) || !(c->hour >> tm.tm_hour & 1) ||
        !(c->month >> (tm.tm_mon + 1) & 1))
        return false;
    dom = c->dom >> tm.tm_mday & 1;
    dow = c->dow >> tm.tm_wday & 1;
    return c->dom_star || c->dow_star ? dom && dow : dom || dow;
}

/* kp_cron_next against a minute-by-minute search with libc's calendar, for schedules that hit
 * at least once in 62 days, from starts spread over several years. */
static void test_next_against_reference(void **state)
{
    static const char *const schedules[] = {
        "* * * * *",       "*/7 * * * *",          "59 23 * * *",
        "0 0 1 * *",       "0 0 13 * FRI",         "0 0 */2 * MON",
        "15 3 * * SUN",    "0 0 31 * *",           "30 */5 1-7 * 2",
        "0 12 * * */3",    "1,31 10-12 15-17 * *", "0 0 1,15 * *",
        "45 22 28-31 * *", "0 0 * 1,3,5,7 6",      "@daily",
        "@weekly"};
    static const int64_t starts[] = {T_2025_01_31_1200,    T_2024_02_29_1200 - 7,
                                     T_2025_12_31_2359_59, T_2096_02_29 - 86400,
                                     T_1969_06_01 + 59,    T_2000_02_29 - 1};

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(schedules); i++) {
        struct kp_cron c = parse_ok(schedules[i]);

        for (size_t k = 0; k < KP_ARRAY_SIZE(starts); k++) {
            /* The first minute boundary after the start (C division truncates toward 0). */
            int64_t t = (starts[k] / 60 + 1) * 60, want = -1;

            if (starts[k] < 0 && starts[k] % 60 != 0)
                t = (starts[k] / 60) * 60;
            for (int64_t end = t + 62 * 86400; t < end; t += 60) {
                if (ref_matches(&c, (time_t)t)) {
                    want = t;
                    break;
                }
            }
            assert_int_not_equal(want, -1);
            if (kp_cron_next(&c, starts[k]) != want)
                print_error("\"%s\" after %lld\n", schedules[i], (long long)starts[k]);
            assert_int_equal(kp_cron_next(&c, starts[k]), want);
        }
    }
}

/* --- budgets: activity -------------------------------------------------------------------- */

static bool active_at(const char *schedule, const char *duration, int64_t now)
{
    struct kp_budget b = {.nodes = "1", .schedule = schedule, .duration = duration};
    bool active = false;

    assert_int_equal(kp_budget_active(&b, now, &active), 0);
    return active;
}

static void test_active_without_schedule(void **state)
{
    struct kp_budget b = {.nodes = "10%"};
    bool active = false;

    (void)state;
    assert_int_equal(kp_budget_active(&b, T_2025_01_01, &active), 0);
    assert_true(active);
}

/* A window of 8h from 09:00: a hit at now counts, a hit exactly duration ago does not. */
static void test_active_window_edges(void **state)
{
    (void)state;
    assert_false(active_at("0 9 * * *", "8h", T_2025_06_02_0859_59));
    assert_true(active_at("0 9 * * *", "8h", T_2025_06_02_0900));
    assert_true(active_at("0 9 * * *", "8h", T_2025_06_02_1200));
    assert_true(active_at("0 9 * * *", "8h", T_2025_06_02_1659_59));
    assert_false(active_at("0 9 * * *", "8h", T_2025_06_02_1700));
    assert_false(active_at("0 9 * * *", "8h0m0s", T_2025_06_02_1700));
    assert_true(active_at("0 9 * * *", "8h0m1s", T_2025_06_02_1700));
    /* Weekdays only: Sunday 09:00 is no hit. */
    assert_false(active_at("0 9 * * MON-FRI", "8h", T_2025_06_08 + 10 * 3600));
    assert_true(active_at("0 9 * * MON-FRI", "8h", T_2025_06_09 + 10 * 3600));
}

/* Go durations to the nanosecond: a hit counts while now - duration < hit. */
static void test_active_subsecond_duration(void **state)
{
    (void)state;
    assert_true(active_at("0 9 * * *", "1h0.5s", T_2025_06_02_1000));
    assert_false(active_at("0 9 * * *", "1h0.5s", T_2025_06_02_1000_01));
    assert_true(active_at("0 9 * * *", "3600000000001ns", T_2025_06_02_1000));
    assert_false(active_at("0 9 * * *", "3599999999999ns", T_2025_06_02_1000));
}

/* A window that spans midnight and the last hit of several within it. */
static void test_active_across_midnight(void **state)
{
    (void)state;
    assert_true(active_at("0 22 * * *", "4h", T_2025_06_02 + 3600));      /* 01:00 */
    assert_false(active_at("0 22 * * *", "4h", T_2025_06_02 + 2 * 3600)); /* 02:00 */
    assert_true(active_at("*/10 * * * *", "10m", T_2025_06_02_1205));
    assert_true(active_at("@hourly", "1h", T_2025_06_02_1205));
}

static void test_active_zero_duration(void **state)
{
    (void)state;
    assert_false(active_at("0 9 * * *", "0s", T_2025_06_02_0900));
    assert_false(active_at("* * * * *", "0", T_2025_06_02_0900));
}

/* Karpenter: robfig's zero time for a schedule that never hits is not after now: active. */
static void test_active_never_hitting_schedule(void **state)
{
    (void)state;
    assert_true(active_at("0 0 30 2 *", "1h", T_2025_01_01));
    assert_true(active_at("0 0 31 4 *", "10m", T_2025_06_02_1200));
}

static void test_active_invalid(void **state)
{
    struct kp_budget b = {.nodes = "1"};
    bool active = true;

    (void)state;
    b.schedule = "0 9 * * *";
    assert_int_equal(kp_budget_active(&b, T_2025_01_01, &active), -EINVAL); /* no duration */
    b.schedule = NULL;
    b.duration = "1h";
    assert_int_equal(kp_budget_active(&b, T_2025_01_01, &active), -EINVAL); /* no schedule */
    b.schedule = "0 9 * * 7";
    assert_int_equal(kp_budget_active(&b, T_2025_01_01, &active), -EINVAL);
    b.schedule = "0 9 * * *";
    b.duration = "1d";
    assert_int_equal(kp_budget_active(&b, T_2025_01_01, &active), -EINVAL);
    b.duration = "-1h";
    assert_int_equal(kp_budget_active(&b, T_2025_01_01, &active), -EINVAL);
    b.duration = "";
    assert_int_equal(kp_budget_active(&b, T_2025_01_01, &active), -EINVAL);
    assert_true(active); /* never written on failure */
}

/* An instant outside the calendar's domain is refused, and no arithmetic overflows. */
static void test_active_extreme_now(void **state)
{
    struct kp_budget b = {.nodes = "1", .schedule = "* * * * *", .duration = "1h"};
    bool active = false;

    (void)state;
    assert_int_equal(kp_budget_active(&b, INT64_MIN, &active), -ERANGE);
    assert_int_equal(kp_budget_active(&b, INT64_MAX, &active), -ERANGE);
    assert_int_equal(kp_budget_active(&b, KP_CRON_MAX_SEC + 1, &active), -ERANGE);
    assert_int_equal(kp_budget_allowed(&b, 1, KP_DISRUPT_EMPTY, 10, INT64_MAX), 0);
    /* The longest Go duration reaches back before year 1: searched from year 1. */
    assert_true(active_at("* * * * *", "2562047h47m16.854775807s", T_2025_01_01));
    assert_true(active_at("0 0 2 1 *", "24h", KP_CRON_MIN_SEC + 86400));
    b.schedule = NULL;
    b.duration = NULL;
    assert_int_equal(kp_budget_active(&b, INT64_MAX, &active), 0); /* no window: no calendar */
    assert_true(active);
}

/* --- budgets: values ---------------------------------------------------------------------- */

static void test_value_integers(void **state)
{
    (void)state;
    assert_int_equal(kp_budget_value("5", 100), 5);
    assert_int_equal(kp_budget_value("0", 100), 0);
    assert_int_equal(kp_budget_value("007", 0), 7);
    assert_int_equal(kp_budget_value("500", 3), 500); /* not capped by the pool */
    assert_int_equal(kp_budget_value("9223372036854775807", 1), INT64_MAX);
}

static void test_value_percentages_round_up(void **state)
{
    (void)state;
    assert_int_equal(kp_budget_value("10%", 10), 1);
    assert_int_equal(kp_budget_value("5%", 10), 1); /* 0.5 rounds up */
    assert_int_equal(kp_budget_value("10%", 15), 2);
    assert_int_equal(kp_budget_value("10%", 1), 1);
    assert_int_equal(kp_budget_value("33%", 100), 33);
    assert_int_equal(kp_budget_value("33%", 101), 34);
    assert_int_equal(kp_budget_value("1%", 1), 1);
    assert_int_equal(kp_budget_value("0%", 1000), 0);
    assert_int_equal(kp_budget_value("100%", 0), 0);
    assert_int_equal(kp_budget_value("10%", 0), 0);
    assert_int_equal(kp_budget_value("100%", 7), 7);
    assert_int_equal(kp_budget_value("05%", 20), 1);
    assert_int_equal(kp_budget_value("100%", INT64_MAX), INT64_MAX);
    assert_int_equal(kp_budget_value("50%", INT64_MAX), INT64_MAX / 2 + 1);
    assert_int_equal(kp_budget_value("99%", INT64_MAX), INT64_C(9131138316486228049));
}

static void test_value_invalid(void **state)
{
    static const char *const bad[] = {"",      "%",   "-1",   "-10%", "+5",   "101%",
                                      "1000%", "1.5", "abc",  " 5",   "5 ",   "10%%",
                                      "%10",   "5x",  "10 %", "1e3",  "0x10", "\xef\xbc\x91"};

    (void)state;
    assert_int_equal(kp_budget_value(NULL, 10), -1);
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        if (kp_budget_value(bad[i], 10) != -1)
            print_error("\"%s\" accepted\n", bad[i]);
        assert_int_equal(kp_budget_value(bad[i], 10), -1);
    }
    assert_int_equal(kp_budget_value("99999999999999999999", 10), -1);
    assert_int_equal(kp_budget_value("9223372036854775808", 10), -1);
    assert_int_equal(kp_budget_value("10%", -1), -1);
    assert_int_equal(kp_budget_value("3", -1), 3);
}

/* --- budgets: allowed and remaining ------------------------------------------------------- */

static void test_allowed_default_budget(void **state)
{
    const struct kp_budget def[] = {{.nodes = "10%"}};

    (void)state;
    assert_int_equal(kp_budget_allowed(def, 1, KP_DISRUPT_EMPTY, 10, T_2025_01_01), 1);
    assert_int_equal(kp_budget_allowed(def, 1, KP_DISRUPT_DRIFTED, 25, T_2025_01_01), 3);
    assert_int_equal(kp_budget_allowed(def, 1, KP_DISRUPT_UNDERUTILIZED, 0, T_2025_01_01), 0);
}

static void test_allowed_minimum(void **state)
{
    const struct kp_budget v[] = {{.nodes = "20%"}, {.nodes = "3"}, {.nodes = "50%"}};

    (void)state;
    assert_int_equal(kp_budget_allowed(v, 3, KP_DISRUPT_EMPTY, 100, T_2025_01_01), 3);
    assert_int_equal(kp_budget_allowed(v, 3, KP_DISRUPT_EMPTY, 10, T_2025_01_01), 2);
    assert_int_equal(kp_budget_allowed(v, 1, KP_DISRUPT_EMPTY, 10, T_2025_01_01), 2);
}

static void test_allowed_reasons(void **state)
{
    const struct kp_budget v[] = {
        {.nodes = "0", .reasons = KP_DISRUPT_DRIFTED},
        {.nodes = "2", .reasons = KP_DISRUPT_EMPTY | KP_DISRUPT_UNDERUTILIZED},
        {.nodes = "5"},
    };

    (void)state;
    assert_int_equal(kp_budget_allowed(v, 3, KP_DISRUPT_DRIFTED, 100, T_2025_01_01), 0);
    assert_int_equal(kp_budget_allowed(v, 3, KP_DISRUPT_EMPTY, 100, T_2025_01_01), 2);
    assert_int_equal(kp_budget_allowed(v, 3, KP_DISRUPT_UNDERUTILIZED, 100, T_2025_01_01), 2);
    assert_int_equal(kp_budget_allowed(v, 3, KP_DISRUPT_UNHEALTHY, 100, T_2025_01_01), 5);
    /* Only budgets naming a reason: another reason is not limited at all. */
    assert_int_equal(kp_budget_allowed(v, 2, KP_DISRUPT_UNHEALTHY, 100, T_2025_01_01),
                     KP_BUDGET_UNLIMITED);
}

/* Business hours block drift; outside them the always-on budget rules. */
static void test_allowed_scheduled(void **state)
{
    const struct kp_budget v[] = {
        {.nodes = "0", .schedule = "0 9 * * MON-FRI", .duration = "8h"},
        {.nodes = "10%"},
    };

    (void)state;
    assert_int_equal(kp_budget_allowed(v, 2, KP_DISRUPT_DRIFTED, 30, T_2025_06_02_1200), 0);
    assert_int_equal(kp_budget_allowed(v, 2, KP_DISRUPT_DRIFTED, 30, T_2025_06_02_1700), 3);
    assert_int_equal(kp_budget_allowed(v, 2, KP_DISRUPT_DRIFTED, 30, T_2025_06_07 + 12 * 3600), 3);
    /* An inactive budget alone: unlimited. */
    assert_int_equal(kp_budget_allowed(v, 1, KP_DISRUPT_DRIFTED, 30, T_2025_06_02_1700),
                     KP_BUDGET_UNLIMITED);
}

static void test_allowed_unlimited(void **state)
{
    const struct kp_budget v[] = {{.nodes = "1", .reasons = KP_DISRUPT_EMPTY}};

    (void)state;
    assert_int_equal(kp_budget_allowed(NULL, 0, KP_DISRUPT_EMPTY, 10, T_2025_01_01),
                     KP_BUDGET_UNLIMITED);
    assert_int_equal(kp_budget_allowed(v, 1, KP_DISRUPT_DRIFTED, 10, T_2025_01_01),
                     KP_BUDGET_UNLIMITED);
}

/* A budget that applies but cannot be evaluated allows 0; one that does not apply is ignored. */
static void test_allowed_fails_closed(void **state)
{
    const struct kp_budget bad_schedule[] = {
        {.nodes = "10", .schedule = "0 9 * * 7", .duration = "8h"}, {.nodes = "50%"}};
    const struct kp_budget half[] = {{.nodes = "10", .schedule = "0 9 * * *"}};
    const struct kp_budget bad_duration[] = {
        {.nodes = "10", .schedule = "@daily", .duration = "x"}};
    const struct kp_budget bad_nodes[] = {{.nodes = "ten"}, {.nodes = "5"}};
    const struct kp_budget null_nodes[] = {{.nodes = NULL}};
    const struct kp_budget other_reason[] = {
        {.nodes = "10", .schedule = "bad", .duration = "1h", .reasons = KP_DISRUPT_DRIFTED},
        {.nodes = "4"}};

    (void)state;
    assert_int_equal(kp_budget_allowed(bad_schedule, 2, KP_DISRUPT_EMPTY, 100, T_2025_01_01), 0);
    assert_int_equal(kp_budget_allowed(half, 1, KP_DISRUPT_EMPTY, 100, T_2025_01_01), 0);
    assert_int_equal(kp_budget_allowed(bad_duration, 1, KP_DISRUPT_EMPTY, 100, T_2025_01_01), 0);
    assert_int_equal(kp_budget_allowed(bad_nodes, 2, KP_DISRUPT_EMPTY, 100, T_2025_01_01), 0);
    assert_int_equal(kp_budget_allowed(null_nodes, 1, KP_DISRUPT_EMPTY, 100, T_2025_01_01), 0);
    assert_int_equal(kp_budget_allowed(other_reason, 2, KP_DISRUPT_EMPTY, 100, T_2025_01_01), 4);
    assert_int_equal(kp_budget_allowed(other_reason, 2, KP_DISRUPT_DRIFTED, 100, T_2025_01_01), 0);
}

static void test_remaining(void **state)
{
    (void)state;
    assert_int_equal(kp_budget_remaining(5, 2), 3);
    assert_int_equal(kp_budget_remaining(5, 5), 0);
    assert_int_equal(kp_budget_remaining(2, 5), 0); /* over budget: clamped */
    assert_int_equal(kp_budget_remaining(0, 0), 0);
    assert_int_equal(kp_budget_remaining(KP_BUDGET_UNLIMITED, 1000), KP_BUDGET_UNLIMITED);
    assert_int_equal(kp_budget_remaining(KP_BUDGET_UNLIMITED, 0), KP_BUDGET_UNLIMITED);
    assert_int_equal(kp_budget_remaining(-1, 0), 0);
    assert_int_equal(kp_budget_remaining(3, -7), 3);
    assert_int_equal(kp_budget_remaining(INT64_MAX - 1, INT64_MIN), INT64_MAX - 1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_all_stars),
        cmocka_unit_test(test_parse_single_values),
        cmocka_unit_test(test_parse_ranges_and_lists),
        cmocka_unit_test(test_parse_steps),
        cmocka_unit_test(test_parse_star_flags),
        cmocka_unit_test(test_parse_month_names),
        cmocka_unit_test(test_parse_day_names),
        cmocka_unit_test(test_parse_macros),
        cmocka_unit_test(test_parse_blanks),
        cmocka_unit_test(test_parse_longest),
        cmocka_unit_test(test_refuse_empty),
        cmocka_unit_test(test_refuse_too_long),
        cmocka_unit_test(test_refuse_time_zones),
        cmocka_unit_test(test_refuse_unknown_macros),
        cmocka_unit_test(test_refuse_field_count),
        cmocka_unit_test(test_refuse_out_of_range),
        cmocka_unit_test(test_refuse_dow_seven),
        cmocka_unit_test(test_refuse_steps),
        cmocka_unit_test(test_refuse_reversed_range),
        cmocka_unit_test(test_refuse_malformed_elements),
        cmocka_unit_test(test_refuse_not_numbers),
        cmocka_unit_test(test_parse_stops_at_nul),
        cmocka_unit_test(test_next_strictly_after),
        cmocka_unit_test(test_next_minutes_and_hours),
        cmocka_unit_test(test_next_month_boundaries),
        cmocka_unit_test(test_next_year_boundaries),
        cmocka_unit_test(test_next_leap_years),
        cmocka_unit_test(test_next_five_year_limit),
        cmocka_unit_test(test_next_never),
        cmocka_unit_test(test_next_dom_dow_or),
        cmocka_unit_test(test_next_dom_dow_and),
        cmocka_unit_test(test_next_before_1970),
        cmocka_unit_test(test_next_domain),
        cmocka_unit_test(test_next_empty_masks),
        cmocka_unit_test(test_next_against_reference),
        cmocka_unit_test(test_active_without_schedule),
        cmocka_unit_test(test_active_window_edges),
        cmocka_unit_test(test_active_subsecond_duration),
        cmocka_unit_test(test_active_across_midnight),
        cmocka_unit_test(test_active_zero_duration),
        cmocka_unit_test(test_active_never_hitting_schedule),
        cmocka_unit_test(test_active_invalid),
        cmocka_unit_test(test_active_extreme_now),
        cmocka_unit_test(test_value_integers),
        cmocka_unit_test(test_value_percentages_round_up),
        cmocka_unit_test(test_value_invalid),
        cmocka_unit_test(test_allowed_default_budget),
        cmocka_unit_test(test_allowed_minimum),
        cmocka_unit_test(test_allowed_reasons),
        cmocka_unit_test(test_allowed_scheduled),
        cmocka_unit_test(test_allowed_unlimited),
        cmocka_unit_test(test_allowed_fails_closed),
        cmocka_unit_test(test_remaining),
    };

    return kp_test_main("budget", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
