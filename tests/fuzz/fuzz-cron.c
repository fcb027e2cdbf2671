/* Fuzz driver for the cron schedules of core/disruption/budget.h. The input, up to its first NUL,
 * is a schedule; it is also tried as a budget's nodes value. Properties (abort on violation):
 * a refused schedule leaves the output untouched and gives a message; an accepted one sets only
 * bits within each field's range, at least one per field, and parses the same twice; each next
 * hit from a few starts (fixed ones and one derived from the input) is -1 or a minute boundary
 * after the start, within six years, that the schedule matches by libc's calendar (gmtime_r),
 * no minute of the day after the start matches before it, and the search from just before it
 * finds it again; budget evaluation never fails for a valid
 * schedule and a valid duration; a percentage never exceeds the node count; nothing leaks
 * (LeakSanitizer). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "core/disruption/budget.h"
#include "api/obj-karpenter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SPAN_SEC (7 * 366 * INT64_C(86400)) /* beyond robfig's six calendar years */
#define SCAN_SEC INT64_C(86400)             /* minute-by-minute check after each start */

static uint64_t bits(unsigned lo, unsigned hi)
{
    return (~UINT64_C(0) >> (63 - hi)) & (~UINT64_C(0) << lo);
}

static bool matches(const struct kp_cron *c, int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    bool dom, dow;

    if (!gmtime_r(&tt, &tm))
        abort();
    if (tm.tm_sec != 0 || !(c->minute >> tm.tm_min & 1) || !(c->hour >> tm.tm_hour & 1) ||
        !(c->month >> (tm.tm_mon + 1) & 1))
        return false;
    dom = c->dom >> tm.tm_mday & 1;
    dow = c->dow >> tm.tm_wday & 1;
    return c->dom_star || c->dow_star ? dom && dow : dom || dow;
}

/* The first minute boundary after t (floor division, t may be negative). */
static int64_t minute_after(int64_t t)
{
    return (t / 60 - (t % 60 < 0) + 1) * 60;
}

static void check_next(const struct kp_cron *c, int64_t after)
{
    int64_t next = kp_cron_next(c, after);

    /* No minute of the first day after the start that comes before next matches. */
    for (int64_t t = minute_after(after); t < after + SCAN_SEC && (next == -1 || t < next); t += 60)
        if (matches(c, t))
            abort();
    if (next == -1)
        return;
    if (next <= after || next - after > SPAN_SEC || next % 60 != 0 || !matches(c, next))
        abort();
    if (kp_cron_next(c, next - 1) != next)
        abort();
}

static void check_schedule(const char *text)
{
    static const int64_t starts[] = {
        INT64_C(1735689600), /* 2025-01-01 */
        INT64_C(4012934400), /* 2097-03-01: 2100 is no leap year */
        INT64_C(-18489600),  /* 1969-06-01 */
        INT64_C(1767225599), /* 2025-12-31T23:59:59 */
        INT64_C(951782399),  /* 2000-02-28T23:59:59 */
    };
    struct kp_cron c, again;
    char *why = NULL;
    uint64_t h = 1469598103934665603u;
    int r;

    memset(&c, 0x5a, sizeof(c));
    r = kp_cron_parse(text, &c, &why);
    if (r < 0) {
        const unsigned char *p = (const unsigned char *)&c;

        if (!why)
            abort();
        for (size_t i = 0; i < sizeof(c); i++)
            if (p[i] != 0x5a)
                abort();
        kp_free(why);
        return;
    }
    if (r != 0 || why)
        abort();
    if ((c.minute & ~bits(0, 59)) || (c.hour & ~bits(0, 23)) || (c.dom & ~bits(1, 31)) ||
        (c.month & ~bits(1, 12)) || (c.dow & ~bits(0, 6)))
        abort();
    if (!c.minute || !c.hour || !c.dom || !c.month || !c.dow)
        abort();
    memset(&again, 0, sizeof(again));
    if (kp_cron_parse(text, &again, NULL) != 0 || c.minute != again.minute ||
        c.hour != again.hour || c.dom != again.dom || c.month != again.month ||
        c.dow != again.dow || c.dom_star != again.dom_star || c.dow_star != again.dow_star)
        abort();
    for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++)
        check_next(&c, starts[i]);
    /* One start chosen by the input: FNV-1a of the text, spread over 1970-2200. */
    for (const char *s = text; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    check_next(&c, (int64_t)(h % (INT64_C(7258118400))));
    {
        struct kp_budget b = {.nodes = "10%", .schedule = text, .duration = "1h30m"};
        bool active;

        if (kp_budget_active(&b, starts[0], &active) != 0)
            abort();
        if (kp_budget_allowed(&b, 1, KP_DISRUPT_EMPTY, 10, starts[0]) !=
            (active ? 1 : KP_BUDGET_UNLIMITED))
            abort();
    }
}

static void check_value(const char *text)
{
    int64_t v = kp_budget_value(text, 1000);
    size_t n = strlen(text);

    if (v < -1)
        abort();
    if (v >= 0 && n > 0 && text[n - 1] == '%' && v > 1000)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = kp_malloc(size + 1);

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    check_schedule(text);
    check_value(text);
    kp_free(text);
    return 0;
}
