/* core/disruption/budget.c: NodePool disruption budgets and cron schedules (contract in
 * budget.h).
 *
 * DESIGN
 *
 * What: Karpenter's budget arithmetic (a NodePool's allowed disruptions by reason) and the
 * cron schedules that open a budget's windows, reimplemented from documented behaviour: the
 * karpenter.sh/v1 API reference and robfig/cron v3's ParseStandard grammar and Next() results,
 * which is what Karpenter evaluates schedules with (in UTC). No code is copied.
 *
 * Why a module of pure functions over explicit times: whether a budget is active depends only
 * on its text and the instant, so taking now as an argument lets tests pin the edges of every
 * window (a hit at now counts, a hit exactly duration ago does not) and lets the disruption
 * controller evaluate all budgets of a pool at one instant. Nothing is cached: a schedule is a
 * few hundred bytes at most and parses in microseconds, and re-parsing on each evaluation means
 * a NodePool edit takes effect without any invalidation.
 *
 * Schedules: each field becomes a 64-bit mask (bit i = value i), plus robfig's "star" flag for
 * day-of-month and day-of-week, because the day rule depends on it: both restricted, either
 * may match (classic cron); otherwise both must (the unrestricted one always does). Like
 * robfig, a star with a step above 1 (every other day, say) counts as restricted. The parser
 * is a single forward pass over at most KP_CRON_MAX_TEXT bytes with no recursion and no
 * allocation but the error message. It is stricter than robfig where robfig is lax by accident
 * rather than by design (empty list elements, "*-5"); a schedule refused here makes its budget
 * allow 0, which is the safe direction. Time zone prefixes are refused: Karpenter prepends its
 * own "TZ=UTC ", so a user's prefix becomes a sixth field there too.
 *
 * Next hit: plain civil-calendar arithmetic (day counts from 1970-01-01 and back, proleptic
 * Gregorian), no libc time functions, so TZ and locale cannot change an answer. The search
 * walks forward from the first minute boundary after the start and, at each level, jumps to
 * the next candidate instead of stepping minute by minute: a month not in the mask skips to
 * the next month that is, a day that does not match skips the day, an hour not in the mask the
 * rest of the hour. A day is visited at most once, so the walk is bounded by the days of six
 * years. Like robfig, it gives up (-1) once it passes the end of the fifth year after the
 * start's year, which is what makes "0 0 30 2 *" answer at all.
 *
 * Budgets: Karpenter's rules, including its edge cases: a budget that applies but cannot be
 * evaluated contributes 0 (fail closed); an inactive budget contributes no limit; a schedule
 * that never hits makes its budget always active (robfig returns the zero time, which is not
 * after now); percentages round up, so a small pool can still move one node at a time.
 *
 * Threads: pure functions, no globals but constant tables; any thread. */
#include "core/disruption/budget.h"

#include <errno.h>
#include <string.h>

#include "api/duration.h"
#include "api/obj-karpenter.h"
#include "base/err.h"
#include "base/str.h"

/* --- schedules: parsing ------------------------------------------------------------------- */

struct kp_cron_field {
    const char *what;         /* for messages: "minute field ..." */
    unsigned min, max;        /* inclusive value range */
    const char *const *names; /* three-letter names of min, min + 1, ..., or NULL */
    const char *name_kind;    /* "month" or "day" name, for messages */
};

static const char *const kp_cron_months[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                             "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const kp_cron_days[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

enum { KP_CRON_MINUTE, KP_CRON_HOUR, KP_CRON_DOM, KP_CRON_MONTH, KP_CRON_DOW, KP_CRON_FIELDS };

static const struct kp_cron_field kp_cron_fields[KP_CRON_FIELDS] = {
    [KP_CRON_MINUTE] = {"minute", 0, 59, NULL, NULL},
    [KP_CRON_HOUR] = {"hour", 0, 23, NULL, NULL},
    [KP_CRON_DOM] = {"day-of-month", 1, 31, NULL, NULL},
    [KP_CRON_MONTH] = {"month", 1, 12, kp_cron_months, "month"},
    [KP_CRON_DOW] = {"day-of-week", 0, 6, kp_cron_days, "day"},
};

/* robfig's descriptors, as the five fields they stand for. */
static const struct {
    const char *name;
    const char *fields;
} kp_cron_macros[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

/* Go's strings.Fields separators, ASCII part (Go also splits at U+0085 and U+00A0). */
static bool kp_cron_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static char kp_cron_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Where the first byte c is in the n bytes at p, or n. */
static size_t kp_cron_find(const char *p, size_t n, char c)
{
    const char *hit = memchr(p, c, n);

    return hit ? (size_t)(hit - p) : n;
}

/* The context of every message about one field: its name and its whole text. */
struct kp_cron_ctx {
    const struct kp_cron_field *f;
    const char *text;
    size_t len;
    char **ret_why;
};

/* One value (a number or, where the field has them, a name) of element elem: 0 or -EINVAL with
 * the message set. */
static int kp_cron_value(const struct kp_cron_ctx *cx, const char *p, size_t n, const char *elem,
                         size_t elem_n, unsigned *ret)
{
    const struct kp_cron_field *f = cx->f;
    uint64_t v;
    int r;

    if (n == 0) {
        kp_msg_set(cx->ret_why, "%s field \"%.*s\": missing value in \"%.*s\"", f->what,
                   (int)cx->len, cx->text, (int)elem_n, elem);
        return -EINVAL;
    }
    if (memchr(p, '*', n) || memchr(p, '?', n)) {
        kp_msg_set(cx->ret_why,
                   "%s field \"%.*s\": '*' and '?' cannot be a range bound in \"%.*s\"", f->what,
                   (int)cx->len, cx->text, (int)elem_n, elem);
        return -EINVAL;
    }
    if (f->names && n == 3) {
        for (unsigned i = 0; i <= f->max - f->min; i++) {
            const char *name = f->names[i];

            if (kp_cron_lower(p[0]) == name[0] && kp_cron_lower(p[1]) == name[1] &&
                kp_cron_lower(p[2]) == name[2]) {
                *ret = f->min + i;
                return 0;
            }
        }
    }
    r = kp_parse_u64(p, n, &v);
    if (r == -EINVAL) {
        kp_msg_set(cx->ret_why, "%s field \"%.*s\": \"%.*s\" is not a number%s%s%s", f->what,
                   (int)cx->len, cx->text, (int)n, p, f->names ? " or " : "",
                   f->names ? f->name_kind : "", f->names ? " name" : "");
        return -EINVAL;
    }
    if (r < 0 || v < f->min || v > f->max) {
        kp_msg_set(cx->ret_why, "%s field \"%.*s\": value %.*s out of range %u-%u", f->what,
                   (int)cx->len, cx->text, (int)n, p, f->min, f->max);
        return -EINVAL;
    }
    *ret = (unsigned)v;
    return 0;
}

/* One list element: [*|?|N|N-M][/S]. Adds its values to *bits; sets *star for a "*" or "?" with
 * no step above 1 (robfig's star bit). 0 or -EINVAL with the message set. */
static int kp_cron_element(const struct kp_cron_ctx *cx, const char *p, size_t n, uint64_t *bits,
                           bool *star)
{
    const struct kp_cron_field *f = cx->f;
    size_t slash = kp_cron_find(p, n, '/'), dash;
    size_t range_n = slash;
    unsigned start, end;
    uint64_t step = 1;
    bool is_star = false;
    int r;

    if (n == 0) {
        kp_msg_set(cx->ret_why, "%s field \"%.*s\": empty list element", f->what, (int)cx->len,
                   cx->text);
        return -EINVAL;
    }
    if (slash < n) {
        const char *s = p + slash + 1;
        size_t sn = n - slash - 1;

        if (kp_cron_find(s, sn, '/') < sn) {
            kp_msg_set(cx->ret_why, "%s field \"%.*s\": more than one '/' in \"%.*s\"", f->what,
                       (int)cx->len, cx->text, (int)n, p);
            return -EINVAL;
        }
        r = kp_parse_u64(s, sn, &step);
        if (r == -EINVAL) {
            kp_msg_set(cx->ret_why, "%s field \"%.*s\": step \"%.*s\" is not a number", f->what,
                       (int)cx->len, cx->text, (int)sn, s);
            return -EINVAL;
        }
        if (r < 0)
            step = UINT64_MAX; /* beyond any range: selects the start alone */
        if (step == 0) {
            kp_msg_set(cx->ret_why, "%s field \"%.*s\": step 0 in \"%.*s\" must be at least 1",
                       f->what, (int)cx->len, cx->text, (int)n, p);
            return -EINVAL;
        }
    }
    if (range_n == 1 && (p[0] == '*' || p[0] == '?')) {
        is_star = true;
        start = f->min;
        end = f->max;
    } else {
        dash = kp_cron_find(p, range_n, '-');
        if (dash < range_n &&
            kp_cron_find(p + dash + 1, range_n - dash - 1, '-') < range_n - dash - 1) {
            kp_msg_set(cx->ret_why, "%s field \"%.*s\": more than one '-' in \"%.*s\"", f->what,
                       (int)cx->len, cx->text, (int)n, p);
            return -EINVAL;
        }
        if ((r = kp_cron_value(cx, p, dash, p, n, &start)) < 0)
            return r;
        if (dash < range_n) {
            if ((r = kp_cron_value(cx, p + dash + 1, range_n - dash - 1, p, n, &end)) < 0)
                return r;
        } else {
            end = slash < n ? f->max : start; /* "N/S" means "N-max/S" */
        }
        if (start > end) {
            kp_msg_set(cx->ret_why, "%s field \"%.*s\": range \"%.*s\" starts after it ends",
                       f->what, (int)cx->len, cx->text, (int)range_n, p);
            return -EINVAL;
        }
    }
    for (unsigned v = start;;) {
        *bits |= UINT64_C(1) << v;
        if (end - v < step)
            break;
        v += (unsigned)step; /* step <= end - v < 64 here */
    }
    if (is_star && step == 1)
        *star = true;
    return 0;
}

/* One field: a comma list of elements. 0 or -EINVAL with the message set. */
static int kp_cron_field_parse(const struct kp_cron_field *f, const char *p, size_t n,
                               uint64_t *ret_bits, bool *ret_star, char **ret_why)
{
    struct kp_cron_ctx cx = {.f = f, .text = p, .len = n, .ret_why = ret_why};
    uint64_t bits = 0;
    bool star = false;
    size_t i = 0;
    int r;

    for (;;) {
        size_t e = kp_cron_find(p + i, n - i, ',');

        if ((r = kp_cron_element(&cx, p + i, e, &bits, &star)) < 0)
            return r;
        i += e;
        if (i == n)
            break;
        i++; /* the comma; an element after it is required, even at the end */
    }
    *ret_bits = bits;
    *ret_star = star;
    return 0;
}

int kp_cron_parse(const char *text, struct kp_cron *ret, char **ret_why)
{
    struct kp_cron c = {0};
    const char *field[KP_CRON_FIELDS] = {NULL};
    size_t field_n[KP_CRON_FIELDS] = {0};
    size_t n, nfields = 0, i;
    const char *p;
    bool unused_star;
    int r;

    if (!text) {
        kp_msg_set(ret_why, "no schedule");
        return -EINVAL;
    }
    n = strnlen(text, KP_CRON_MAX_TEXT + 1);
    if (n > KP_CRON_MAX_TEXT) {
        kp_msg_set(ret_why, "schedule is longer than %u bytes", KP_CRON_MAX_TEXT);
        return -EINVAL;
    }
    p = text;
    while (n > 0 && kp_cron_blank(p[0])) {
        p++;
        n--;
    }
    while (n > 0 && kp_cron_blank(p[n - 1]))
        n--;
    if (n == 0) {
        kp_msg_set(ret_why, "empty schedule");
        return -EINVAL;
    }
    if ((n >= 3 && memcmp(p, "TZ=", 3) == 0) || (n >= 8 && memcmp(p, "CRON_TZ=", 8) == 0)) {
        kp_msg_set(ret_why, "schedule \"%.*s\": time zones are not supported, schedules are in UTC",
                   (int)n, p);
        return -EINVAL;
    }
    if (p[0] == '@') {
        const char *fields = NULL;

        for (i = 0; i < KP_ARRAY_SIZE(kp_cron_macros) && !fields; i++)
            if (kp_memeq_str(p, n, kp_cron_macros[i].name))
                fields = kp_cron_macros[i].fields;
        if (!fields) {
            kp_msg_set(ret_why,
                       "unknown macro \"%.*s\": use @yearly, @annually, @monthly, @weekly, "
                       "@daily, @midnight or @hourly",
                       (int)n, p);
            return -EINVAL;
        }
        p = fields;
        n = strlen(fields);
    }
    for (i = 0; i < n;) {
        size_t start;

        while (i < n && kp_cron_blank(p[i]))
            i++;
        if (i == n)
            break;
        start = i;
        while (i < n && !kp_cron_blank(p[i]))
            i++;
        if (nfields < KP_CRON_FIELDS) {
            field[nfields] = p + start;
            field_n[nfields] = i - start;
        }
        nfields++;
    }
    if (nfields != KP_CRON_FIELDS) {
        kp_msg_set(ret_why,
                   "schedule \"%.*s\": expected 5 fields (minute hour day-of-month month "
                   "day-of-week), found %zu%s",
                   (int)n, p, nfields, nfields == 6 ? " (seconds are not supported)" : "");
        return -EINVAL;
    }
    if ((r = kp_cron_field_parse(&kp_cron_fields[KP_CRON_MINUTE], field[0], field_n[0], &c.minute,
                                 &unused_star, ret_why)) < 0 ||
        (r = kp_cron_field_parse(&kp_cron_fields[KP_CRON_HOUR], field[1], field_n[1], &c.hour,
                                 &unused_star, ret_why)) < 0 ||
        (r = kp_cron_field_parse(&kp_cron_fields[KP_CRON_DOM], field[2], field_n[2], &c.dom,
                                 &c.dom_star, ret_why)) < 0 ||
        (r = kp_cron_field_parse(&kp_cron_fields[KP_CRON_MONTH], field[3], field_n[3], &c.month,
                                 &unused_star, ret_why)) < 0 ||
        (r = kp_cron_field_parse(&kp_cron_fields[KP_CRON_DOW], field[4], field_n[4], &c.dow,
                                 &c.dow_star, ret_why)) < 0)
        return r;
    *ret = c;
    return 0;
}

/* --- schedules: the next hit --------------------------------------------------------------- */

#define KP_SEC_PER_DAY INT64_C(86400)

/* Floor division and modulo for a positive divisor. */
static int64_t kp_floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b < 0);
}

static int64_t kp_floor_mod(int64_t a, int64_t b)
{
    return a - kp_floor_div(a, b) * b;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar. The year is counted from
 * March so that the leap day ends it; 400 years (an era) are 146097 days. */
static int64_t kp_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    int64_t era, yoe, doy, doe;

    if (m <= 2)
        y--;
    era = kp_floor_div(y, 400);
    yoe = y - era * 400;                                            /* 0-399 */
    doy = (153 * (int64_t)(m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* 0-365, from March 1 */
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;                    /* 0-146096 */
    return era * 146097 + doe - 719468;                             /* 719468: 0000-03-01 */
}

/* The inverse of kp_days_from_civil. */
static void kp_civil_from_days(int64_t z, int64_t *ret_y, unsigned *ret_m, unsigned *ret_d)
{
    int64_t era, doe, yoe, doy, mp;

    z += 719468;
    era = kp_floor_div(z, 146097);
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *ret_d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    *ret_m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    *ret_y = yoe + era * 400 + (*ret_m <= 2);
}

static bool kp_leap_year(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned kp_days_in_month(int64_t y, unsigned m)
{
    static const unsigned days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    return m == 2 && kp_leap_year(y) ? 29 : days[m - 1];
}

/* The smallest value v with from <= v <= max whose bit is set in mask, or max + 1. */
static unsigned kp_mask_next(uint64_t mask, unsigned from, unsigned max)
{
    for (unsigned v = from; v <= max; v++)
        if (mask >> v & 1)
            return v;
    return max + 1;
}

static bool kp_cron_day_matches(const struct kp_cron *c, int64_t days, unsigned d)
{
    unsigned wd = (unsigned)kp_floor_mod(days + 4, 7); /* 1970-01-01 was a Thursday */
    bool dom = c->dom >> d & 1, dow = c->dow >> wd & 1;

    if (c->dom_star || c->dow_star)
        return dom && dow;
    return dom || dow;
}

/* Moves y-m-d to the next day. */
static void kp_civil_next_day(int64_t *y, unsigned *m, unsigned *d)
{
    if (++*d <= kp_days_in_month(*y, *m))
        return;
    *d = 1;
    if (++*m > 12) {
        *m = 1;
        ++*y;
    }
}

/* A hard stop for a struct kp_cron not made by kp_cron_parse (an empty mask): more iterations
 * than the walk can take over six years of days. */
#define KP_CRON_MAX_STEPS 100000u

int64_t kp_cron_next(const struct kp_cron *c, int64_t after_sec)
{
    int64_t t, days, y, limit;
    unsigned m, d, hh, mm, steps = 0;

    if (after_sec < KP_CRON_MIN_SEC || after_sec > KP_CRON_MAX_SEC)
        return -1;
    /* robfig starts at the next whole second and stops past the fifth year after its year. */
    kp_civil_from_days(kp_floor_div(after_sec + 1, KP_SEC_PER_DAY), &limit, &m, &d);
    limit += KP_CRON_YEARS;
    t = after_sec - kp_floor_mod(after_sec, 60) + 60;
    days = kp_floor_div(t, KP_SEC_PER_DAY);
    kp_civil_from_days(days, &y, &m, &d);
    hh = (unsigned)(kp_floor_mod(t, KP_SEC_PER_DAY) / 3600);
    mm = (unsigned)(kp_floor_mod(t, 3600) / 60);
    /* Each pass either returns or moves y-m-d hh:mm forward to the next candidate: the next
     * month in the mask, the next day, the next hour in the mask. */
    while (steps++ < KP_CRON_MAX_STEPS && y <= limit) {
        unsigned h, min;

        if (!(c->month >> m & 1)) {
            unsigned next = kp_mask_next(c->month, m + 1, 12);

            if (next > 12) {
                next = kp_mask_next(c->month, 1, 12);
                if (next > 12)
                    return -1; /* no month at all */
                y++;
            }
            m = next;
            d = 1;
            hh = mm = 0;
            continue;
        }
        days = kp_days_from_civil(y, m, d);
        h = kp_cron_day_matches(c, days, d) ? kp_mask_next(c->hour, hh, 23) : 24;
        if (h > 23) {
            kp_civil_next_day(&y, &m, &d);
            hh = mm = 0;
            continue;
        }
        if (h != hh) {
            hh = h;
            mm = 0;
        }
        min = kp_mask_next(c->minute, mm, 59);
        if (min > 59) {
            mm = 0;
            if (++hh > 23) {
                kp_civil_next_day(&y, &m, &d);
                hh = 0;
            }
            continue;
        }
        return days * KP_SEC_PER_DAY + (int64_t)hh * 3600 + (int64_t)min * 60;
    }
    return -1;
}

/* --- budgets ------------------------------------------------------------------------------ */

int kp_budget_active(const struct kp_budget *b, int64_t now_sec, bool *ret_active)
{
    struct kp_cron c;
    int64_t ns, secs, after, next;

    if (!b->schedule && !b->duration) {
        *ret_active = true;
        return 0;
    }
    if (!b->schedule || !b->duration)
        return -EINVAL;
    if (now_sec < KP_CRON_MIN_SEC || now_sec > KP_CRON_MAX_SEC)
        return -ERANGE;
    if (kp_cron_parse(b->schedule, &c, /* ret_why= */ NULL) < 0)
        return -EINVAL;
    if (kp_duration_parse(b->duration, strlen(b->duration), &ns) < 0 || ns < 0)
        return -EINVAL;
    /* A hit h counts when now - duration < h. Hits are whole seconds, so that is
     * h > now - ceil(duration in seconds): kp_cron_next's "strictly after". */
    secs = ns / KP_NSEC_PER_SEC + (ns % KP_NSEC_PER_SEC != 0);
    /* A window reaching before year 1 is searched from year 1 (a duration of centuries). */
    after = now_sec - secs < KP_CRON_MIN_SEC ? KP_CRON_MIN_SEC : now_sec - secs;
    next = kp_cron_next(&c, after);
    /* -1: no hit in robfig's span, where Karpenter sees the zero time, not after now. */
    *ret_active = next < 0 || next <= now_sec;
    return 0;
}

int64_t kp_budget_value(const char *nodes, int64_t num_nodes)
{
    size_t n;
    uint64_t v;

    if (!nodes)
        return -1;
    n = strlen(nodes);
    if (n > 0 && nodes[n - 1] == '%') {
        if (kp_parse_u64(nodes, n - 1, &v) < 0 || v > 100 || num_nodes < 0)
            return -1;
        /* ceil(num_nodes * v / 100) without overflow: num_nodes = 100q + r, and q * v <=
         * num_nodes because v <= 100. */
        return num_nodes / 100 * (int64_t)v + (num_nodes % 100 * (int64_t)v + 99) / 100;
    }
    if (kp_parse_u64(nodes, n, &v) < 0 || v > (uint64_t)INT64_MAX)
        return -1;
    return (int64_t)v;
}

int64_t kp_budget_allowed(const struct kp_budget *v, size_t n, uint32_t reason, int64_t num_nodes,
                          int64_t now_sec)
{
    int64_t allowed = KP_BUDGET_UNLIMITED;

    for (size_t i = 0; i < n; i++) {
        const struct kp_budget *b = &v[i];
        bool active = false;
        int64_t val = -1;

        if (b->reasons != 0 && !(b->reasons & reason))
            continue;
        if (kp_budget_active(b, now_sec, &active) == 0) {
            if (!active)
                continue;
            val = kp_budget_value(b->nodes, num_nodes);
        }
        /* A budget that cannot be evaluated (val -1) fails closed, as Karpenter's does. */
        allowed = KP_MIN(allowed, KP_MAX(val, 0));
    }
    return allowed;
}

int64_t kp_budget_remaining(int64_t allowed, int64_t disrupting)
{
    if (allowed == KP_BUDGET_UNLIMITED)
        return KP_BUDGET_UNLIMITED;
    if (allowed < 0)
        allowed = 0;
    if (disrupting < 0)
        disrupting = 0;
    return allowed > disrupting ? allowed - disrupting : 0;
}
