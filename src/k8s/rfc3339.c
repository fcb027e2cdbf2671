/* DESIGN: RFC 3339 timestamps without libc's time zone machinery.
 *
 * What: a strict parser for the one layout Kubernetes uses and a formatter for metav1.Time and
 * metav1.MicroTime. Calendar arithmetic is the proleptic Gregorian days-from-civil algorithm
 * (public domain arithmetic, written out here), so there is no timegm(), no TZ and no locale:
 * the parser is a pure function over (ptr, len) as STYLE.md rule 13 asks.
 *
 * Why strict: we only read what the API server wrote, and the API server writes one layout.
 * Accepting lower-case t/z, spaces or leap seconds would accept things Go's time.Parse refuses.
 *
 * Threads: pure, no allocation, no globals. */
#include "k8s/rfc3339.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/err.h"

#define KP_USEC_PER_SEC_I INT64_C(1000000)
#define KP_SEC_PER_DAY INT64_C(86400)
/* 0000-01-01T00:00:00Z and 10000-01-01T00:00:00Z in seconds since the epoch. */
#define KP_RFC3339_MIN_SEC INT64_C(-62167219200)
#define KP_RFC3339_END_SEC INT64_C(253402300800)

static bool kp_is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int kp_days_in_month(int64_t y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    return m == 2 && kp_is_leap(y) ? 29 : days[m - 1];
}

/* Days since 1970-01-01 of a proleptic Gregorian date (m 1..12, d 1..31). */
static int64_t kp_days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void kp_civil_from_days(int64_t z, int64_t *ret_y, int *ret_m, int *ret_d)
{
    int64_t era, doe, yoe, y, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    y = yoe + era * 400;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *ret_d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *ret_m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *ret_y = y + (*ret_m <= 2);
}

/* Reads exactly k digits at p[*i]; false when any is not a digit or input ends. */
static bool kp_digits(const char *p, size_t n, size_t *i, size_t k, int *ret)
{
    int v = 0;

    if (n - *i < k)
        return false;
    for (size_t j = 0; j < k; j++) {
        char c = p[*i + j];

        if (c < '0' || c > '9')
            return false;
        v = v * 10 + (c - '0');
    }
    *i += k;
    *ret = v;
    return true;
}

static bool kp_expect(const char *p, size_t n, size_t *i, char c)
{
    if (*i >= n || p[*i] != c)
        return false;
    (*i)++;
    return true;
}

int kp_rfc3339_parse(const char *p, size_t n, int64_t *ret_usec)
{
    int year, mon, day, hour, min, sec, oh = 0, om = 0;
    int64_t usec = 0, secs, offset = 0;
    size_t i = 0;

    if (!p)
        return -KP_EPARSE;
    if (!kp_digits(p, n, &i, 4, &year) || !kp_expect(p, n, &i, '-') ||
        !kp_digits(p, n, &i, 2, &mon) || !kp_expect(p, n, &i, '-') ||
        !kp_digits(p, n, &i, 2, &day) || !kp_expect(p, n, &i, 'T') ||
        !kp_digits(p, n, &i, 2, &hour) || !kp_expect(p, n, &i, ':') ||
        !kp_digits(p, n, &i, 2, &min) || !kp_expect(p, n, &i, ':') || !kp_digits(p, n, &i, 2, &sec))
        return -KP_EPARSE;
    if (mon < 1 || mon > 12 || day < 1 || day > kp_days_in_month(year, mon) || hour > 23 ||
        min > 59 || sec > 59)
        return -KP_EPARSE;
    if (i < n && p[i] == '.') {
        size_t k = 0;

        i++;
        for (; i < n && p[i] >= '0' && p[i] <= '9'; i++, k++) {
            if (k >= 9)
                return -KP_EPARSE;
            if (k < 6)
                usec = usec * 10 + (p[i] - '0');
        }
        if (k == 0)
            return -KP_EPARSE;
        for (; k < 6; k++)
            usec *= 10;
    }
    if (i >= n)
        return -KP_EPARSE;
    if (p[i] == 'Z') {
        i++;
    } else if (p[i] == '+' || p[i] == '-') {
        int sign = p[i] == '-' ? -1 : 1;

        i++;
        if (!kp_digits(p, n, &i, 2, &oh) || !kp_expect(p, n, &i, ':') ||
            !kp_digits(p, n, &i, 2, &om) || oh > 23 || om > 59)
            return -KP_EPARSE;
        offset = sign * ((int64_t)oh * 3600 + (int64_t)om * 60);
    } else {
        return -KP_EPARSE;
    }
    if (i != n)
        return -KP_EPARSE;
    secs = kp_days_from_civil(year, mon, day) * KP_SEC_PER_DAY + hour * 3600 + min * 60 + sec;
    /* Local time minus the offset is UTC. */
    secs -= offset;
    if (secs < KP_RFC3339_MIN_SEC || secs >= KP_RFC3339_END_SEC)
        return -ERANGE;
    *ret_usec = secs * KP_USEC_PER_SEC_I + usec;
    return 0;
}

int kp_rfc3339_format(int64_t usec, enum kp_rfc3339_precision precision, char *buf, size_t size)
{
    int64_t secs, sod, days, y;
    int64_t frac;
    int m, d, w;

    /* Floor division: a negative usec still has a fraction in [0, 1 s). */
    secs = usec / KP_USEC_PER_SEC_I;
    frac = usec % KP_USEC_PER_SEC_I;
    if (frac < 0) {
        frac += KP_USEC_PER_SEC_I;
        secs--;
    }
    if (secs < KP_RFC3339_MIN_SEC || secs >= KP_RFC3339_END_SEC)
        return -ERANGE;
    days = secs / KP_SEC_PER_DAY;
    sod = secs % KP_SEC_PER_DAY;
    if (sod < 0) {
        sod += KP_SEC_PER_DAY;
        days--;
    }
    kp_civil_from_days(days, &y, &m, &d);
    if (precision == KP_RFC3339_MICRO)
        w = snprintf(buf, size, "%04lld-%02d-%02dT%02d:%02d:%02d.%06lldZ", (long long)y, m, d,
                     (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60), (long long)frac);
    else
        w = snprintf(buf, size, "%04lld-%02d-%02dT%02d:%02d:%02dZ", (long long)y, m, d,
                     (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60));
    return w < 0 || (size_t)w >= size ? -E2BIG : 0;
}
