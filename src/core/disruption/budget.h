/* core/disruption/budget.h: NodePool disruption budgets and their cron schedules (karpenter.sh/v1
 * spec.disruption.budgets).
 *
 * A NodePool lists budgets; each caps how many of the pool's nodes may be disrupting at once,
 * as a count ("5") or a percentage of the pool's nodes ("10%", rounded up). A budget may name
 * the reasons it applies to (none named: every reason) and may be active only in windows: a
 * cron schedule (UTC) opens a window at each hit, and the window lasts duration. For a reason,
 * the pool may disrupt the minimum over the budgets that apply to it and are active now; a
 * budget that cannot be evaluated counts as 0 (fail closed).
 *
 * The schedule syntax is what Karpenter accepts, that is robfig/cron v3's ParseStandard:
 *
 *   minute hour day-of-month month day-of-week      (5 fields, separated by blanks)
 *
 *   field         values   names
 *   minute        0-59
 *   hour          0-23
 *   day-of-month  1-31
 *   month         1-12     JAN-DEC (any case)
 *   day-of-week   0-6      SUN-SAT (any case); 0 is Sunday, 7 is refused
 *
 * Each field is a comma list of elements: "*" or "?" (every value), "N", "N-M" (inclusive,
 * N <= M), each optionally followed by "/S" (every S-th value from the start, S >= 1), where
 * "N/S" means "N-max/S". Macros: @yearly and @annually (0 0 1 1 *), @monthly (0 0 1 * *),
 * @weekly (0 0 * * 0), @daily and @midnight (0 0 * * *), @hourly (0 * * * *). The day matches
 * as robfig's does: when both day-of-month and day-of-week are restricted, either may match;
 * when one is unrestricted (an element "*" or "?" without a step above 1), both must.
 *
 * Counting the nodes is the caller's job, not this module's: num_nodes is the pool's managed,
 * initialized nodes that are not InstanceTerminating; "disrupting" is the pool's nodes whose
 * Node is not Ready or that are being deleted or marked for deletion.
 *
 * Times are Unix seconds in UTC, always passed in: no clock, no time zone, no locale, no I/O,
 * no globals. Every function may be called from any thread. */
#ifndef KP_CORE_DISRUPTION_BUDGET_H
#define KP_CORE_DISRUPTION_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_budget;

/* Longest schedule text kp_cron_parse() accepts, in bytes, terminator excluded. */
#define KP_CRON_MAX_TEXT 256u
/* A cron schedule with no hit within the year of the start and the five years after it (such
 * as "0 0 30 2 *") has no next hit (robfig's limit). */
#define KP_CRON_YEARS 5
/* kp_cron_next() answers for after_sec in [KP_CRON_MIN_SEC, KP_CRON_MAX_SEC]: years 1 to 9999
 * (0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z). */
#define KP_CRON_MIN_SEC INT64_C(-62135596800)
#define KP_CRON_MAX_SEC INT64_C(253402300799)

/* "No budget limits this": kp_budget_allowed() and kp_budget_remaining(). */
#define KP_BUDGET_UNLIMITED INT64_MAX

/* A parsed schedule. Bit i of a mask stands for value i of its field (day-of-week 0 is
 * Sunday); only bits within a field's range are ever set. */
struct kp_cron {
    uint64_t minute; /* bits 0-59 */
    uint64_t hour;   /* bits 0-23 */
    uint64_t dom;    /* bits 1-31 */
    uint64_t month;  /* bits 1-12 */
    uint64_t dow;    /* bits 0-6 */
    /* The field is unrestricted (robfig's star bit: some element is "*" or "?" with no step
     * above 1). Both false: a day matches when dom or dow does; else when both do. */
    bool dom_star, dow_star;
};

/* Parses a schedule (syntax above). Blanks (space, tab, newline, CR, VT, FF) before and after
 * it are ignored, as Karpenter's evaluation trims them. 0 with *ret filled, or -EINVAL when
 * text is NULL, empty, longer than KP_CRON_MAX_TEXT, a time zone prefix (TZ=, CRON_TZ=), a
 * macro other than those above (@every too), not exactly 5 fields, or a field with an empty
 * element, an unknown name, a value out of range, a range whose start is after its end, a step
 * of 0, more than one '-' or '/', or a '*' used as a range bound. Stricter than robfig in two
 * places, which fail closed: empty list elements ("1,,2"), and "*-5" (robfig ignores "-5").
 * On failure ret_why, when not NULL, receives a new message saying which field is wrong and
 * why, such as `minute field "61": value 61 out of range 0-59` (kp_msg_set() contract: the
 * caller kp_free()s it; *ret_why holds NULL or such a string on entry). Reads text up to its
 * terminator or KP_CRON_MAX_TEXT + 1 bytes, whichever comes first; no recursion; allocates only
 * the message. */
int kp_cron_parse(const char *text, struct kp_cron *ret, char **ret_why) KP_NONNULL(2) KP_WUR;

/* The first minute boundary strictly after after_sec (Unix seconds, UTC) that c matches, or -1
 * when there is none before the year of after_sec + 1s plus KP_CRON_YEARS ends, or when
 * after_sec is outside [KP_CRON_MIN_SEC, KP_CRON_MAX_SEC]. Skips whole months, days, hours
 * and minutes that cannot match: at most a few thousand steps. */
int64_t kp_cron_next(const struct kp_cron *c, int64_t after_sec) KP_NONNULL(1);

/* Whether budget b is active at now_sec. No schedule and no duration: always active. With
 * both: active when a hit of the schedule lies in (now - duration, now], that is when
 * kp_cron_next(schedule, now - duration) <= now; a hit exactly duration ago no longer counts,
 * a hit at now does. A schedule with no hit in its search span (kp_cron_next() is -1, such as
 * Feb 30) makes the budget always active, as in Karpenter (robfig answers the zero time, which
 * is not after now). duration is a Go duration (kp_duration_parse(), to the nanosecond).
 * 0 with *ret_active set, or -EINVAL when only one of schedule and duration is set (the CRD
 * forbids it), the schedule does not parse, or the duration does not parse or is negative;
 * -ERANGE when both are set and now_sec is outside [KP_CRON_MIN_SEC, KP_CRON_MAX_SEC]. */
int kp_budget_active(const struct kp_budget *b, int64_t now_sec, bool *ret_active)
    KP_NONNULL(1, 3) KP_WUR;

/* The node count that nodes allows out of num_nodes: an integer ("5": 5) as written, or a
 * percentage from 0% to 100% ("10%") of num_nodes rounded up (5% of 10 nodes: 1; 0%: 0; any
 * percentage of 0 nodes: 0). Digits only, leading zeros allowed. -1 when nodes is NULL, empty,
 * signed, not a number, above 100%, beyond int64, or num_nodes is negative with a percentage:
 * the caller fails closed. */
int64_t kp_budget_value(const char *nodes, int64_t num_nodes);

/* How many nodes of a pool with num_nodes nodes the budgets v[0..n) allow to be disrupting at
 * now_sec for reason (one enum kp_disruption_reasons bit): the minimum of kp_budget_value()
 * over the budgets that apply to reason (reasons 0, or reasons & reason) and are active. An
 * inactive budget allows any number; a budget that applies but whose schedule, duration or
 * nodes cannot be evaluated (kp_budget_active() or kp_budget_value() fails) allows 0 (fail
 * closed). KP_BUDGET_UNLIMITED when no budget applies and is active. v may be NULL when n is
 * 0. The caller passes the NodePool's budgets as projected (the default [{nodes: "10%"}] when
 * it set none). */
int64_t kp_budget_allowed(const struct kp_budget *v, size_t n, uint32_t reason, int64_t num_nodes,
                          int64_t now_sec);

/* How many more nodes may start disrupting: allowed - disrupting, at least 0;
 * KP_BUDGET_UNLIMITED stays KP_BUDGET_UNLIMITED. A negative allowed or disrupting counts as 0. */
int64_t kp_budget_remaining(int64_t allowed, int64_t disrupting);

#endif
