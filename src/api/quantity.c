/* DESIGN: resource.Quantity parse and canonical format in int64 milli-units.
 *
 * What: kp_quantity_parse turns "1.5Gi", "250m", "1e3" into an exact integer of milli-units
 * plus the input's format; kp_quantity_format writes the text Kubernetes' Quantity.String()
 * would. Facts taken from the Kubernetes documentation and apimachinery's behaviour (not its
 * code): suffix sets, the leading-zero/"1."/".5" leniency, BinarySI below one unit becoming
 * DecimalSI, canonical mantissa/exponent selection, and MilliValue()'s ceiling.
 *
 * Why exact arithmetic: a quantity is digits D, a power of ten and a power of two
 * (value = D * 10^e * 2^b). For "1.5Gi" that is 15 * 10^-1 * 2^30; floating point would get
 * many such values wrong by one, and one byte off is a different canonical string. So the
 * digits go into a small fixed-size big integer (input is capped at KP_QUANTITY_MAX_LEN bytes,
 * which bounds its size), get multiplied by 2^b and scaled by 10^(e+3), and any non-zero
 * remainder of the final division marks the value as finer than a milli-unit.
 *
 * Threads: pure functions, no allocation, no globals. */
#include "api/quantity.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/str.h"

/* Enough 32-bit limbs for 128 decimal digits times 2^60 times 10^24 (about 570 bits). */
#define KP_BN_LIMBS 24

struct kp_bn {
    uint32_t limb[KP_BN_LIMBS]; /* little-endian */
};

static bool kp_bn_is_zero(const struct kp_bn *a)
{
    for (size_t i = 0; i < KP_BN_LIMBS; i++)
        if (a->limb[i])
            return false;
    return true;
}

/* a = a * mul + add; false when the result no longer fits. */
static bool kp_bn_mul_add(struct kp_bn *a, uint32_t mul, uint32_t add)
{
    uint64_t carry = add;

    for (size_t i = 0; i < KP_BN_LIMBS; i++) {
        uint64_t t = (uint64_t)a->limb[i] * mul + carry;

        a->limb[i] = (uint32_t)t;
        carry = t >> 32;
    }
    return carry == 0;
}

/* a = a / div; returns the remainder. */
static uint32_t kp_bn_div(struct kp_bn *a, uint32_t div)
{
    uint64_t rem = 0;

    for (size_t i = KP_BN_LIMBS; i-- > 0;) {
        uint64_t t = (rem << 32) | a->limb[i];

        a->limb[i] = (uint32_t)(t / div);
        rem = t % div;
    }
    return (uint32_t)rem;
}

/* True when a fits in 64 bits; *ret receives it. */
static bool kp_bn_to_u64(const struct kp_bn *a, uint64_t *ret)
{
    for (size_t i = 2; i < KP_BN_LIMBS; i++)
        if (a->limb[i])
            return false;
    *ret = ((uint64_t)a->limb[1] << 32) | a->limb[0];
    return true;
}

static bool kp_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Decodes the suffix s[0..n): sets the power of ten, the power of two and the format. */
static int kp_quantity_suffix(const char *s, size_t n, int64_t *ret_e10, unsigned *ret_b2,
                              enum kp_quantity_format *ret_format)
{
    static const struct {
        const char *name;
        int e10;
        unsigned b2;
        enum kp_quantity_format format;
    } table[] = {
        {"", 0, 0, KP_QUANTITY_DECIMAL_SI},   {"n", -9, 0, KP_QUANTITY_DECIMAL_SI},
        {"u", -6, 0, KP_QUANTITY_DECIMAL_SI}, {"m", -3, 0, KP_QUANTITY_DECIMAL_SI},
        {"k", 3, 0, KP_QUANTITY_DECIMAL_SI},  {"M", 6, 0, KP_QUANTITY_DECIMAL_SI},
        {"G", 9, 0, KP_QUANTITY_DECIMAL_SI},  {"T", 12, 0, KP_QUANTITY_DECIMAL_SI},
        {"P", 15, 0, KP_QUANTITY_DECIMAL_SI}, {"E", 18, 0, KP_QUANTITY_DECIMAL_SI},
        {"Ki", 0, 10, KP_QUANTITY_BINARY_SI}, {"Mi", 0, 20, KP_QUANTITY_BINARY_SI},
        {"Gi", 0, 30, KP_QUANTITY_BINARY_SI}, {"Ti", 0, 40, KP_QUANTITY_BINARY_SI},
        {"Pi", 0, 50, KP_QUANTITY_BINARY_SI}, {"Ei", 0, 60, KP_QUANTITY_BINARY_SI},
    };
    const char *d;
    size_t nd;
    bool neg = false;
    int64_t e;
    int r;

    for (size_t i = 0; i < KP_ARRAY_SIZE(table); i++) {
        if (kp_memeq_str(s, n, table[i].name)) {
            *ret_e10 = table[i].e10;
            *ret_b2 = table[i].b2;
            *ret_format = table[i].format;
            return 0;
        }
    }
    /* A decimal exponent: e or E, an optional sign, at least one digit. */
    if (n < 2 || (s[0] != 'e' && s[0] != 'E'))
        return -KP_EPARSE;
    d = s + 1;
    nd = n - 1;
    if (d[0] == '+' || d[0] == '-') {
        neg = d[0] == '-';
        d++;
        nd--;
    }
    if (nd == 0)
        return -KP_EPARSE;
    for (size_t i = 0; i < nd; i++)
        if (!kp_is_digit(d[i]))
            return -KP_EPARSE;
    r = kp_parse_i64(d, nd, &e);
    if (r < 0 && r != -ERANGE)
        return -KP_EPARSE;
    /* Any exponent this large over- or underflows anyway; the cap keeps the caller's arithmetic
     * on it defined (e.g. "1e0009223372036854775807" parses as INT64_MAX, not -ERANGE). */
    if (r == -ERANGE || e > INT64_MAX / 4)
        e = INT64_MAX / 4;
    *ret_e10 = neg ? -e : e;
    *ret_b2 = 0;
    *ret_format = KP_QUANTITY_DECIMAL_EXPONENT;
    return 0;
}

int kp_quantity_parse(const char *p, size_t n, enum kp_quantity_parse_flags flags,
                      struct kp_quantity *ret)
{
    enum kp_quantity_format format = KP_QUANTITY_DECIMAL_SI;
    struct kp_bn bn;
    const char *int_p, *frac_p = NULL;
    size_t i = 0, int_n, frac_n = 0;
    bool neg = false, inexact = false;
    int64_t e10 = 0, milli;
    unsigned b2 = 0;
    uint64_t mag;
    int r;

    if (n > KP_QUANTITY_MAX_LEN)
        return -KP_ELIMIT;
    if (n == 0 || !p)
        return -KP_EPARSE;
    if (p[0] == '+' || p[0] == '-') {
        neg = p[0] == '-';
        i++;
    }
    int_p = p + i;
    while (i < n && kp_is_digit(p[i]))
        i++;
    int_n = (size_t)(p + i - int_p);
    if (i < n && p[i] == '.') {
        i++;
        frac_p = p + i;
        while (i < n && kp_is_digit(p[i]))
            i++;
        frac_n = (size_t)(p + i - frac_p);
    }
    /* Kubernetes reads "+", "-" and "." as zero; we want at least one digit. */
    if (int_n + frac_n == 0)
        return -KP_EPARSE;
    r = kp_quantity_suffix(p + i, n - i, &e10, &b2, &format);
    if (r < 0)
        return r;

    /* bn = all digits; value = bn * 10^(e10 - frac_n) * 2^b2, in milli-units: + 3. */
    memset(&bn, 0, sizeof(bn));
    for (size_t k = 0; k < int_n; k++)
        if (!kp_bn_mul_add(&bn, 10, (uint32_t)(int_p[k] - '0')))
            return -ERANGE;
    for (size_t k = 0; k < frac_n; k++)
        if (!kp_bn_mul_add(&bn, 10, (uint32_t)(frac_p[k] - '0')))
            return -ERANGE;
    e10 = e10 + 3 - (int64_t)frac_n; /* |e10| <= INT64_MAX / 4 + 131: no overflow */
    if (!kp_bn_is_zero(&bn)) {
        for (unsigned k = 0; k < b2; k += 10)
            if (!kp_bn_mul_add(&bn, 1024, 0))
                return -ERANGE;
        for (; e10 > 0; e10--) {
            /* 10^20 > 2^64: once past 64 bits more factors cannot bring the value back. */
            if (!kp_bn_mul_add(&bn, 10, 0) || !kp_bn_to_u64(&bn, &mag))
                return -ERANGE;
        }
        for (; e10 < 0 && !kp_bn_is_zero(&bn); e10++)
            if (kp_bn_div(&bn, 10) != 0)
                inexact = true;
    }
    if (!kp_bn_to_u64(&bn, &mag) || mag > (uint64_t)INT64_MAX)
        return -ERANGE;
    if (inexact) {
        if (!(flags & KP_QUANTITY_ROUND_UP))
            return -ERANGE;
        /* Ceiling: a positive value moves up one milli-unit, a negative one toward zero. */
        if (!neg) {
            if (mag == (uint64_t)INT64_MAX)
                return -ERANGE;
            mag++;
        }
    }
    milli = neg ? -(int64_t)mag : (int64_t)mag;
    /* Kubernetes keeps a BinarySI value below one unit as DecimalSI ("0.5Ki" is 512, fine; but a
     * fraction of a byte has no binary spelling). */
    if (format == KP_QUANTITY_BINARY_SI && milli != 0 && milli > -1000 && milli < 1000)
        format = KP_QUANTITY_DECIMAL_SI;
    ret->milli = milli;
    ret->format = format;
    return 0;
}

int kp_quantity_format(const struct kp_quantity *q, char *buf, size_t size)
{
    static const char *const dec_suffix[] = {"m", "", "k", "M", "G", "T", "P", "E"};
    static const char *const bin_suffix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    enum kp_quantity_format format = q->format;
    const char *sign = q->milli < 0 ? "-" : "";
    /* |milli| as unsigned; milli is never INT64_MIN, but stay defined if it is. */
    uint64_t mag = q->milli < 0 ? 0 - (uint64_t)q->milli : (uint64_t)q->milli;
    int w;

    if (size == 0)
        return -E2BIG;
    if (mag == 0) {
        w = snprintf(buf, size, "0");
        return w < 0 || (size_t)w >= size ? -E2BIG : 0;
    }
    if (format == KP_QUANTITY_BINARY_SI && (mag < 1024000 || mag % 1000 != 0))
        format = KP_QUANTITY_DECIMAL_SI;
    if (format == KP_QUANTITY_BINARY_SI) {
        uint64_t units = mag / 1000;
        unsigned k = 0;

        while (units >= 1024 && units % 1024 == 0 && k + 1 < KP_ARRAY_SIZE(bin_suffix)) {
            units /= 1024;
            k++;
        }
        w = snprintf(buf, size, "%s%llu%s", sign, (unsigned long long)units, bin_suffix[k]);
    } else {
        int exp = -3;
        int adjust;

        while (mag >= 10 && mag % 10 == 0) {
            mag /= 10;
            exp++;
        }
        /* Back down to a multiple of three. Only factors of ten just removed are put back, so
         * this cannot overflow. */
        adjust = ((exp % 3) + 3) % 3;
        for (int k = 0; k < adjust; k++)
            mag *= 10;
        exp -= adjust;
        if (format == KP_QUANTITY_DECIMAL_EXPONENT) {
            if (exp == 0)
                w = snprintf(buf, size, "%s%llu", sign, (unsigned long long)mag);
            else
                w = snprintf(buf, size, "%s%llue%d", sign, (unsigned long long)mag, exp);
        } else {
            /* exp is in [-3, 15] for an int64 of milli-units. */
            w = snprintf(buf, size, "%s%llu%s", sign, (unsigned long long)mag,
                         dec_suffix[(exp + 3) / 3]);
        }
    }
    return w < 0 || (size_t)w >= size ? -E2BIG : 0;
}

static enum kp_quantity_format kp_quantity_result_format(struct kp_quantity a, struct kp_quantity b)
{
    return a.milli == 0 ? b.format : a.format;
}

int kp_quantity_add(struct kp_quantity a, struct kp_quantity b, struct kp_quantity *ret)
{
    int64_t m;

    if (kp_add_overflow(a.milli, b.milli, &m) || m == INT64_MIN)
        return -ERANGE;
    ret->format = kp_quantity_result_format(a, b);
    ret->milli = m;
    return 0;
}

int kp_quantity_sub(struct kp_quantity a, struct kp_quantity b, struct kp_quantity *ret)
{
    int64_t m;

    if (b.milli == INT64_MIN || kp_add_overflow(a.milli, -b.milli, &m) || m == INT64_MIN)
        return -ERANGE;
    ret->format = kp_quantity_result_format(a, b);
    ret->milli = m;
    return 0;
}

int kp_quantity_mul(struct kp_quantity a, int64_t k, struct kp_quantity *ret)
{
    int64_t m;

    if (kp_mul_overflow(a.milli, k, &m) || m == INT64_MIN)
        return -ERANGE;
    ret->format = a.format;
    ret->milli = m;
    return 0;
}

int kp_quantity_cmp(struct kp_quantity a, struct kp_quantity b)
{
    return (a.milli > b.milli) - (a.milli < b.milli);
}

int64_t kp_quantity_value(struct kp_quantity q)
{
    int64_t v = q.milli / 1000;

    /* C division truncates toward zero; the ceiling differs only for positive remainders. */
    if (q.milli % 1000 > 0)
        v++;
    return v;
}

int kp_quantity_from_units(int64_t units, enum kp_quantity_format format, struct kp_quantity *ret)
{
    int64_t m;

    if (kp_mul_overflow(units, (int64_t)1000, &m) || m == INT64_MIN)
        return -ERANGE;
    ret->milli = m;
    ret->format = format;
    return 0;
}
