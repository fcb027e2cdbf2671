/* DESIGN: fuzz driver for the strict number parsers of base/str.h.
 *
 * Each input is parsed whole, and line by line ('\n' separates), by every kp_parse_* and
 * kp_safe_ato* function. Each answer is checked against a reference written a different way: it
 * works on the text, not on arithmetic. It classifies the bytes, strips leading zeros and
 * compares the remaining digits with the decimal (or hex) text of the type's maximum, so an
 * overflow check in the parser that is off by one shows up as a disagreement. A success is then
 * checked by formatting the parsed value with snprintf and comparing it with the canonical digits.
 * Failures must leave the output untouched. Any disagreement calls abort().
 * The helpers that take C strings (kp_memeq_str, kp_strscpy, kp_startswith, kp_endswith) get a
 * few cheap consistency checks on the same bytes. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SENT_U64 UINT64_C(0x5a5a5a5a5a5a5a5a)
#define SENT_U32 UINT32_C(0x5a5a5a5a)
#define SENT_I64 INT64_C(0x5a5a5a5a5a5a5a5a)

/* Longest canonical text the reference hands back: 20 decimal digits, a sign, a terminator. */
#define CANON_MAX 32

static void die(const char *what, const char *p, size_t n, int r, int want)
{
    fprintf(stderr, "fuzz-number: %s disagrees (r=%d, reference %d) on %zu bytes:", what, r, want,
            n);
    for (size_t i = 0; i < n && i < 64; i++)
        fprintf(stderr, " %02x", (unsigned char)p[i]);
    fprintf(stderr, "\n");
    abort();
}

/* The reference for an unsigned number in base 10 or 16: 0, -EINVAL or -ERANGE, and on 0 the
 * canonical digits (no leading zeros, lower case) in canon. max is the type's maximum written in
 * the same base. */
static int ref_unsigned(const char *p, size_t n, int base, const char *max, char *canon)
{
    static const char hex[] = "0123456789abcdef";
    size_t i, start, k, maxlen = strlen(max);

    if (n == 0)
        return -EINVAL;
    for (i = 0; i < n; i++) {
        const char *d =
            memchr(hex, p[i] >= 'A' && p[i] <= 'F' ? p[i] - 'A' + 'a' : p[i], (size_t)base);

        if (!d || p[i] == '\0')
            return -EINVAL;
    }
    for (start = 0; start < n && p[start] == '0'; start++)
        ;
    k = n - start;
    if (k == 0) {
        memcpy(canon, "0", 2);
        return 0;
    }
    if (k > maxlen)
        return -ERANGE;
    for (i = 0; i < k; i++) {
        char c = p[start + i];

        canon[i] = c >= 'A' && c <= 'F' ? (char)(c - 'A' + 'a') : c;
    }
    canon[k] = '\0';
    if (k == maxlen && strcmp(canon, max) > 0)
        return -ERANGE;
    return 0;
}

static int ref_i64(const char *p, size_t n, char *canon)
{
    bool neg = false;
    int r;

    if (n > 0 && (p[0] == '-' || p[0] == '+')) {
        neg = p[0] == '-';
        p++;
        n--;
    }
    r = ref_unsigned(p, n, 10, neg ? "9223372036854775808" : "9223372036854775807", canon + 1);
    if (r < 0)
        return r;
    if (neg && strcmp(canon + 1, "0") != 0)
        canon[0] = '-';
    else
        memmove(canon, canon + 1, strlen(canon + 1) + 1);
    return 0;
}

static void check_parsers(const char *p, size_t n)
{
    char canon[CANON_MAX], text[CANON_MAX];
    uint64_t u64 = SENT_U64, x64 = SENT_U64;
    uint32_t u32 = SENT_U32;
    int64_t i64 = SENT_I64;
    int r, want, r64;

    want = ref_unsigned(p, n, 10, "18446744073709551615", canon);
    r64 = r = kp_parse_u64(p, n, &u64);
    if (r != want)
        die("kp_parse_u64", p, n, r, want);
    if (r == 0) {
        snprintf(text, sizeof(text), "%" PRIu64, u64);
        if (strcmp(text, canon) != 0)
            die("kp_parse_u64 value", p, n, r, want);
    } else if (u64 != SENT_U64) {
        die("kp_parse_u64 wrote on failure", p, n, r, want);
    }

    want = ref_unsigned(p, n, 10, "4294967295", canon);
    r = kp_parse_u32(p, n, &u32);
    if (r != want)
        die("kp_parse_u32", p, n, r, want);
    if (r == 0) {
        snprintf(text, sizeof(text), "%" PRIu32, u32);
        if (strcmp(text, canon) != 0 || u32 != u64)
            die("kp_parse_u32 value", p, n, r, want);
    } else if (u32 != SENT_U32) {
        die("kp_parse_u32 wrote on failure", p, n, r, want);
    }
    /* u32 and u64 agree on what is malformed; a u64 success above UINT32_MAX is a range error. */
    if ((r64 == -EINVAL) != (r == -EINVAL) || (r64 == 0 && u64 > UINT32_MAX && r != -ERANGE))
        die("kp_parse_u32 vs kp_parse_u64", p, n, r, r64);

    want = ref_i64(p, n, canon);
    r = kp_parse_i64(p, n, &i64);
    if (r != want)
        die("kp_parse_i64", p, n, r, want);
    if (r == 0) {
        snprintf(text, sizeof(text), "%" PRId64, i64);
        if (strcmp(text, canon) != 0)
            die("kp_parse_i64 value", p, n, r, want);
        if (r64 == 0 && (uint64_t)i64 != u64)
            die("kp_parse_i64 vs kp_parse_u64", p, n, r, r64);
    } else if (i64 != SENT_I64) {
        die("kp_parse_i64 wrote on failure", p, n, r, want);
    }

    want = ref_unsigned(p, n, 16, "ffffffffffffffff", canon);
    r = kp_parse_x64(p, n, &x64);
    if (r != want)
        die("kp_parse_x64", p, n, r, want);
    if (r == 0) {
        snprintf(text, sizeof(text), "%" PRIx64, x64);
        if (strcmp(text, canon) != 0)
            die("kp_parse_x64 value", p, n, r, want);
    } else if (x64 != SENT_U64) {
        die("kp_parse_x64 wrote on failure", p, n, r, want);
    }
    /* Decimal digits are hex digits too. */
    if (r64 != -EINVAL && r == -EINVAL)
        die("kp_parse_x64 vs kp_parse_u64", p, n, r, r64);
}

/* The same bytes as a C string: the kp_safe_ato* functions see the part before the first NUL. */
static void check_cstring(const char *p, size_t n)
{
    char *s = kp_strndup(p, n), small[8];
    size_t len;
    uint64_t a = SENT_U64, b = SENT_U64;
    uint32_t c = SENT_U32, d = SENT_U32;
    int64_t e = SENT_I64, f = SENT_I64;
    int r1, r2;

    if (!s)
        abort();
    len = strlen(s);

    r1 = kp_safe_atou64(s, &a);
    r2 = kp_parse_u64(s, len, &b);
    if (r1 != r2 || a != b)
        die("kp_safe_atou64", p, n, r1, r2);
    r1 = kp_safe_atou32(s, &c);
    r2 = kp_parse_u32(s, len, &d);
    if (r1 != r2 || c != d)
        die("kp_safe_atou32", p, n, r1, r2);
    r1 = kp_safe_atoi64(s, &e);
    r2 = kp_parse_i64(s, len, &f);
    if (r1 != r2 || e != f)
        die("kp_safe_atoi64", p, n, r1, r2);

    if (kp_memeq_str(p, n, s) != (len == n))
        die("kp_memeq_str", p, n, 0, 0);
    if (!kp_startswith(s, s) || *kp_startswith(s, s) != '\0' || !kp_endswith(s, s))
        die("kp_startswith/kp_endswith", p, n, 0, 0);
    if (len > 0 && (kp_startswith(s, s + 1) != NULL) != (strncmp(s, s + 1, len - 1) == 0))
        die("kp_startswith shifted", p, n, 0, 0);

    memset(small, 'X', sizeof(small));
    r1 = kp_strscpy(small, sizeof(small), s);
    if (r1 != (len < sizeof(small) ? 0 : -E2BIG) || strncmp(small, s, sizeof(small) - 1) != 0 ||
        strlen(small) != KP_MIN(len, sizeof(small) - 1))
        die("kp_strscpy", p, n, r1, 0);
    kp_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    size_t start = 0, i;

    check_parsers(p, size);
    check_cstring(p, size);
    /* Each line on its own, so one input can hold many numbers (and the dictionary's tokens
     * combine). */
    for (i = 0; i <= size; i++) {
        if (i == size || p[i] == '\n') {
            if (start > 0 || i < size) {
                check_parsers(p + start, i - start);
                if (i - start <= 64)
                    check_cstring(p + start, i - start);
            }
            start = i + 1;
        }
    }
    return 0;
}
