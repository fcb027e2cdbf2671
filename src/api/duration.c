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

/* --- Go's error texts ------------------------------------------------------------------------ */

/* Appends s[0..n) quoted as Go's time.quote does to buf[*len..size). */
static void go_time_quote(const char *s, size_t n, char *buf, size_t size, size_t *len)
{
    static const char hex[] = "0123456789abcdef";
    char one[5];

    for (size_t i = 0; i <= n + 1; i++) {
        size_t k = 0;

        if (i == 0 || i == n + 1) {
            one[k++] = '"';
        } else {
            unsigned char c = (unsigned char)s[i - 1];

            if (c < 0x20 || c >= 0x80) {
                /* Go escapes each byte of a non-ASCII rune the same way. */
                one[k++] = '\\';
                one[k++] = 'x';
                one[k++] = hex[c >> 4];
                one[k++] = hex[c & 0xf];
            } else {
                if (c == '"' || c == '\\')
                    one[k++] = '\\';
                one[k++] = (char)c;
            }
        }
        for (size_t j = 0; j < k && *len + 1 < size; j++)
            buf[(*len)++] = one[j];
    }
    if (size)
        buf[*len < size ? *len : size - 1] = '\0';
}

static void go_append(const char *text, char *buf, size_t size, size_t *len)
{
    for (; *text && *len + 1 < size; text++)
        buf[(*len)++] = *text;
    if (size)
        buf[*len < size ? *len : size - 1] = '\0';
}

static uint64_t go_unit(const char *u, size_t n)
{
    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {
        {"ns", 1},       {"us", 1000},      {"\xc2\xb5s", 1000},       {"\xce\xbcs", 1000},
        {"ms", 1000000}, {"s", 1000000000}, {"m", 60ULL * 1000000000}, {"h", 3600ULL * 1000000000}};

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strlen(units[i].name) == n && memcmp(units[i].name, u, n) == 0)
            return units[i].ns;
    return 0;
}

enum go_dur_err { GO_DUR_OK = 0, GO_DUR_INVALID, GO_DUR_MISSING_UNIT, GO_DUR_UNKNOWN_UNIT };

/* Go's ParseDuration (src/time/format.go), only to learn which error it returns: the unknown
 * unit in *ret_unit / *ret_unit_n. */
static enum go_dur_err go_parse_duration(const char *s, size_t n, const char **ret_unit,
                                         size_t *ret_unit_n)
{
    const uint64_t big = 1ULL << 63;
    uint64_t d = 0;
    size_t i = 0;
    bool neg = false;

    if (n > 0 && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (n - i == 1 && s[i] == '0')
        return GO_DUR_OK;
    if (i == n)
        return GO_DUR_INVALID;
    while (i < n) {
        uint64_t v = 0, f = 0, unit;
        double scale = 1;
        bool pre, post = false, overflow = false;
        size_t start, u;

        if (!(s[i] == '.' || (s[i] >= '0' && s[i] <= '9')))
            return GO_DUR_INVALID;
        for (start = i; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (v > big / 10)
                return GO_DUR_INVALID;
            v = v * 10 + (uint64_t)(s[i] - '0');
            if (v > big)
                return GO_DUR_INVALID;
        }
        pre = i != start;
        if (i < n && s[i] == '.') {
            for (start = ++i; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
                uint64_t y;

                if (overflow)
                    continue;
                if (f > (big - 1) / 10) {
                    overflow = true;
                    continue;
                }
                y = f * 10 + (uint64_t)(s[i] - '0');
                if (y > big) {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10;
            }
            post = i != start;
        }
        if (!pre && !post)
            return GO_DUR_INVALID;
        for (u = i; i < n && s[i] != '.' && !(s[i] >= '0' && s[i] <= '9'); i++)
            ;
        if (i == u)
            return GO_DUR_MISSING_UNIT;
        if (!(unit = go_unit(s + u, i - u))) {
            *ret_unit = s + u;
            *ret_unit_n = i - u;
            return GO_DUR_UNKNOWN_UNIT;
        }
        if (v > big / unit)
            return GO_DUR_INVALID;
        v *= unit;
        if (f > 0) {
            v += (uint64_t)((double)f * ((double)unit / scale));
            if (v > big)
                return GO_DUR_INVALID;
        }
        d += v;
        if (d > big)
            return GO_DUR_INVALID;
    }
    if (!neg && d > big - 1)
        return GO_DUR_INVALID;
    return GO_DUR_OK;
}

const char *kp_duration_parse_error(const char *p, size_t n, char *buf, size_t size)
{
    const char *unit = NULL;
    size_t unit_n = 0, len = 0;

    switch (go_parse_duration(p, n, &unit, &unit_n)) {
    case GO_DUR_OK:
        return NULL;
    case GO_DUR_INVALID:
        go_append("time: invalid duration ", buf, size, &len);
        break;
    case GO_DUR_MISSING_UNIT:
        go_append("time: missing unit in duration ", buf, size, &len);
        break;
    case GO_DUR_UNKNOWN_UNIT:
        go_append("time: unknown unit ", buf, size, &len);
        go_time_quote(unit, unit_n, buf, size, &len);
        go_append(" in duration ", buf, size, &len);
        break;
    }
    go_time_quote(p, n, buf, size, &len);
    return buf;
}
