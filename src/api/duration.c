/* DESIGN: Go duration strings.
 *
 * What: kp_duration_parse follows the grammar of Go's time.ParseDuration and
 * kp_duration_format reproduces Duration.String() (facts from the Go documentation and its
 * observable output, no code copied). The magnitude is accumulated as uint64 so that
 * -9223372036854775808ns, the one value whose magnitude exceeds INT64_MAX, parses as in Go.
 *
 * Why exact fractions: Go scales a fraction in float64. We compute floor(fraction * unit) with
 * integers, digit by digit from the last one (floor((d*u + floor(y)) / 10) equals
 * floor((d*u + y) / 10) for integer d*u), which is exact for any length and never overflows
 * because the running value stays below the unit.
 *
 * Threads: pure, no allocation, no globals. */
#include "api/duration.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/str.h"

#define KP_DURATION_MAG_MAX ((uint64_t)1 << 63) /* |INT64_MIN| */

static bool kp_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The nanoseconds per unit named by the n bytes at s, or 0 when unknown. */
static uint64_t kp_duration_unit(const char *s, size_t n)
{
    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {
        {"ns", 1},           {"us", 1000},      {"\xc2\xb5s", 1000}, /* U+00B5 MICRO SIGN */
        {"\xce\xbcs", 1000}, /* U+03BC GREEK SMALL LETTER MU */
        {"ms", 1000000},     {"s", 1000000000}, {"m", 60000000000},  {"h", 3600000000000},
    };

    for (size_t i = 0; i < KP_ARRAY_SIZE(units); i++)
        if (kp_memeq_str(s, n, units[i].name))
            return units[i].ns;
    return 0;
}

int kp_duration_parse(const char *p, size_t n, int64_t *ret_ns)
{
    uint64_t total = 0;
    bool neg = false;
    size_t i = 0;

    if (!p || n == 0)
        return -KP_EPARSE;
    if (p[0] == '-' || p[0] == '+') {
        neg = p[0] == '-';
        i++;
    }
    if (n - i == 1 && p[i] == '0') {
        *ret_ns = 0;
        return 0;
    }
    if (i == n)
        return -KP_EPARSE;
    while (i < n) {
        uint64_t v = 0, unit, frac = 0;
        size_t int_start, frac_start = 0, frac_n = 0, unit_start;
        bool range = false;

        int_start = i;
        for (; i < n && kp_is_digit(p[i]); i++) {
            /* Keep scanning after an overflow so the error is -ERANGE only for valid syntax. */
            if (v > (UINT64_MAX - 9) / 10)
                range = true;
            else
                v = v * 10 + (uint64_t)(p[i] - '0');
        }
        if (i < n && p[i] == '.') {
            i++;
            frac_start = i;
            while (i < n && kp_is_digit(p[i]))
                i++;
            frac_n = i - frac_start;
        }
        if (i - int_start == 0 || (i - int_start == 1 && p[int_start] == '.'))
            return -KP_EPARSE; /* no digits at all */
        unit_start = i;
        while (i < n && p[i] != '.' && !kp_is_digit(p[i]))
            i++;
        unit = kp_duration_unit(p + unit_start, i - unit_start);
        if (unit == 0)
            return -KP_EPARSE;
        if (range || v > KP_DURATION_MAG_MAX / unit)
            return -ERANGE;
        v *= unit;
        for (size_t k = frac_n; k-- > 0;)
            frac = ((uint64_t)(p[frac_start + k] - '0') * unit + frac) / 10;
        if (kp_add_overflow(v, frac, &v) || v > KP_DURATION_MAG_MAX)
            return -ERANGE;
        if (kp_add_overflow(total, v, &total) || total > KP_DURATION_MAG_MAX)
            return -ERANGE;
    }
    if (!neg && total > (uint64_t)INT64_MAX)
        return -ERANGE;
    /* Two's complement conversion of a magnitude up to 2^63, defined for INT64_MIN too. */
    *ret_ns = neg ? (int64_t)(0 - total) : (int64_t)total;
    return 0;
}

/* Writes "<int>[.<frac>]" for v / 10^prec with trailing zeros of the fraction dropped, at the
 * end of the scratch area that ends at *w (moving *w back). */
static void kp_put_frac(char **w, uint64_t v, int prec)
{
    uint64_t ip = v, frac;
    uint64_t pow = 1;
    bool printed = false;

    for (int k = 0; k < prec; k++)
        pow *= 10;
    ip = v / pow;
    frac = v % pow;
    for (int k = 0; k < prec; k++) {
        char digit = (char)('0' + frac % 10);

        frac /= 10;
        if (digit != '0' || printed) {
            *--*w = digit;
            printed = true;
        }
    }
    if (printed)
        *--*w = '.';
    do {
        *--*w = (char)('0' + ip % 10);
        ip /= 10;
    } while (ip);
}

static void kp_put_uint(char **w, uint64_t v)
{
    do {
        *--*w = (char)('0' + v % 10);
        v /= 10;
    } while (v);
}

static void kp_put_str(char **w, const char *s)
{
    size_t len = strlen(s);

    *w -= len;
    memcpy(*w, s, len);
}

int kp_duration_format(int64_t ns, char *buf, size_t size)
{
    char scratch[KP_DURATION_STRMAX]; /* our own digits, bounded: not outside data */
    char *end = scratch + sizeof(scratch);
    char *w = end;
    uint64_t u = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
    size_t len;

    if (u == 0) {
        kp_put_str(&w, "0s");
    } else if (u < 1000) {
        kp_put_str(&w, "ns");
        kp_put_uint(&w, u);
    } else if (u < 1000000) {
        kp_put_str(&w, "\xc2\xb5s");
        kp_put_frac(&w, u, 3);
    } else if (u < 1000000000) {
        kp_put_str(&w, "ms");
        kp_put_frac(&w, u, 6);
    } else {
        uint64_t secs = u / 1000000000;

        kp_put_str(&w, "s");
        /* Seconds within the minute plus the nanosecond fraction. */
        kp_put_frac(&w, (secs % 60) * 1000000000 + u % 1000000000, 9);
        secs /= 60;
        if (secs > 0) {
            kp_put_str(&w, "m");
            kp_put_uint(&w, secs % 60);
            secs /= 60;
            if (secs > 0) {
                kp_put_str(&w, "h");
                kp_put_uint(&w, secs);
            }
        }
    }
    if (ns < 0)
        *--w = '-';
    len = (size_t)(end - w);
    if (len + 1 > size)
        return -E2BIG;
    memcpy(buf, w, len);
    buf[len] = '\0';
    return 0;
}

int kp_duration_parse_nillable(const char *p, size_t n, struct kp_duration_nillable *ret)
{
    int64_t ns = 0;
    int r;

    if (p && kp_memeq_str(p, n, "Never")) {
        ret->never = true;
        ret->ns = 0;
        return 0;
    }
    r = kp_duration_parse(p, n, &ns);
    if (r < 0)
        return r;
    ret->never = false;
    ret->ns = ns;
    return 0;
}

int kp_duration_format_nillable(const struct kp_duration_nillable *d, char *buf, size_t size)
{
    if (!d->never)
        return kp_duration_format(d->ns, buf, size);
    if (size < sizeof("Never"))
        return -E2BIG;
    memcpy(buf, "Never", sizeof("Never"));
    return 0;
}
