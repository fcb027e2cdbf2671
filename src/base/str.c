/* DESIGN: string helpers, strict number parsers and the owned string vector.
 *
 * What: the small string tools every layer uses, and the number parsers that every other parser
 * in the tree (quantities, resourceVersions, ports, exit codes, envelope lengths) builds on.
 *
 * Why strict parsers instead of strtoull: strto* skip leading whitespace, accept a sign on
 * unsigned types (strtoull("-1") is UINT64_MAX), honour the locale, need a NUL terminator and
 * report overflow through errno. Each of those has turned a hostile byte string into a wrong
 * number in some C code base. The parsers here take (ptr, len), accept exactly the grammar in
 * base/str.h and nothing else, and never write their output on failure.
 *
 * Error precedence: a parser looks at every byte before it decides. Any byte outside the grammar
 * makes the answer -EINVAL even when the digits before it already overflowed; -ERANGE means the
 * input was well formed and only its value was too large. That keeps the answer independent of
 * where in a long input the bad byte sits, which the fuzz driver checks.
 *
 * Memory: only base/alloc.h, so the torture sweep can fail every allocation made here. A strv
 * keeps its vector NULL-terminated whenever v is not NULL; kp_strv_consume() owns its argument
 * from the moment it is called and frees it on failure, so a caller can write
 * `r = kp_strv_consume(&sv, kp_strdup(x))` only after checking the dup for NULL.
 *
 * Threads: every function is reentrant; a struct kp_strv belongs to its caller's thread. */
#include "base/str.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

bool kp_streq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

const char *kp_startswith(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);

    if (strncmp(s, prefix, n) != 0)
        return NULL;
    return s + n;
}

bool kp_endswith(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);

    if (lx > ls)
        return false;
    return memcmp(s + ls - lx, suffix, lx) == 0;
}

bool kp_memeq_str(const char *p, size_t n, const char *s)
{
    /* strnlen bounds the scan of s by n + 1, so a long s costs nothing extra. */
    if (n == SIZE_MAX || strnlen(s, n + 1) != n)
        return false;
    return n == 0 || memcmp(p, s, n) == 0;
}

int kp_strscpy(char *dst, size_t size, const char *src)
{
    size_t len;

    assert(size > 0);
    if (size == 0)
        return -E2BIG;
    len = strnlen(src, size);
    if (len == size) {
        memcpy(dst, src, size - 1);
        dst[size - 1] = '\0';
        return -E2BIG;
    }
    memcpy(dst, src, len + 1);
    return 0;
}

char *kp_strjoin(const char *first, ...)
{
    va_list ap;
    const char *s;
    size_t total = 1, off = 0;
    char *out;

    /* Two passes over the arguments: size first (overflow-checked), then copy. */
    va_start(ap, first);
    for (s = first; s; s = va_arg(ap, const char *)) {
        if (kp_add_overflow(total, strlen(s), &total)) {
            va_end(ap);
            errno = ENOMEM;
            return NULL;
        }
    }
    va_end(ap);

    out = kp_malloc(total);
    if (!out)
        return NULL;

    va_start(ap, first);
    for (s = first; s; s = va_arg(ap, const char *)) {
        size_t n = strlen(s);

        memcpy(out + off, s, n);
        off += n;
    }
    va_end(ap);
    out[off] = '\0';
    return out;
}

int kp_strset(char **dst, const char *src)
{
    char *copy = NULL;

    if (src) {
        copy = kp_strdup(src);
        if (!copy)
            return -ENOMEM;
    }
    kp_free(*dst);
    *dst = copy;
    return 0;
}

size_t kp_utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t need, i;

    if (c < 0x80)
        return 1;
    if (c < 0xc2)
        return 0;
    if (c < 0xe0) {
        need = 2;
    } else if (c < 0xf0) {
        need = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c < 0xf5) {
        need = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (n < need || s[1] < lo || s[1] > hi)
        return 0;
    for (i = 2; i < need; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return need;
}

char *kp_utf8_scrub(const char *s)
{
    size_t n = strlen(s), out_len = 0, i, u;
    char *out;

    /* Each bad byte becomes three: the worst case is 3n + 1. */
    if (n > (SIZE_MAX - 1) / 3)
        return NULL;
    out = kp_malloc(3 * n + 1);
    if (!out)
        return NULL;
    for (i = 0; i < n; i += u ? u : 1) {
        u = kp_utf8_len((const unsigned char *)s + i, n - i);
        if (u == 0) {
            memcpy(out + out_len, "\xef\xbf\xbd", 3); /* U+FFFD REPLACEMENT CHARACTER */
            out_len += 3;
        } else {
            memcpy(out + out_len, s + i, u);
            out_len += u;
        }
    }
    out[out_len] = '\0';
    return out;
}

/* Accumulates decimal digits into *ret_val. 0, -EINVAL for an empty run or a non-digit byte,
 * -ERANGE when the value passed limit. */
static int parse_dec(const char *p, size_t n, uint64_t limit, uint64_t *ret_val)
{
    uint64_t v = 0;
    bool over = false;
    size_t i;

    if (!p || n == 0)
        return -EINVAL;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        uint64_t d;

        if (c < '0' || c > '9')
            return -EINVAL;
        if (over)
            continue;
        d = (uint64_t)c - '0';
        if (v > (limit - d) / 10)
            over = true;
        else
            v = v * 10 + d;
    }
    if (over)
        return -ERANGE;
    *ret_val = v;
    return 0;
}

int kp_parse_u64(const char *p, size_t n, uint64_t *ret)
{
    uint64_t v;
    int r;

    r = parse_dec(p, n, UINT64_MAX, &v);
    if (r < 0)
        return r;
    *ret = v;
    return 0;
}

int kp_parse_u32(const char *p, size_t n, uint32_t *ret)
{
    uint64_t v;
    int r;

    r = parse_dec(p, n, UINT32_MAX, &v);
    if (r < 0)
        return r;
    *ret = (uint32_t)v;
    return 0;
}

int kp_parse_i64(const char *p, size_t n, int64_t *ret)
{
    /* The magnitude of INT64_MIN, which has no positive int64_t counterpart. */
    const uint64_t min_mag = (uint64_t)INT64_MAX + 1;
    bool neg = false;
    uint64_t mag;
    int r;

    if (!p || n == 0)
        return -EINVAL;
    if (p[0] == '-' || p[0] == '+') {
        neg = p[0] == '-';
        p++;
        n--;
    }
    r = parse_dec(p, n, neg ? min_mag : (uint64_t)INT64_MAX, &mag);
    if (r < 0)
        return r;
    if (!neg)
        *ret = (int64_t)mag;
    else if (mag == min_mag)
        *ret = INT64_MIN;
    else
        *ret = -(int64_t)mag;
    return 0;
}

int kp_parse_x64(const char *p, size_t n, uint64_t *ret)
{
    uint64_t v = 0;
    bool over = false;
    size_t i;

    if (!p || n == 0)
        return -EINVAL;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        uint64_t d;

        if (c >= '0' && c <= '9')
            d = (uint64_t)c - '0';
        else if (c >= 'a' && c <= 'f')
            d = (uint64_t)c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = (uint64_t)c - 'A' + 10;
        else
            return -EINVAL;
        if (over)
            continue;
        if (v > UINT64_MAX >> 4)
            over = true;
        else
            v = (v << 4) | d;
    }
    if (over)
        return -ERANGE;
    *ret = v;
    return 0;
}

int kp_safe_atou32(const char *s, uint32_t *ret)
{
    return kp_parse_u32(s, strlen(s), ret);
}

int kp_safe_atou64(const char *s, uint64_t *ret)
{
    return kp_parse_u64(s, strlen(s), ret);
}

int kp_safe_atoi64(const char *s, int64_t *ret)
{
    return kp_parse_i64(s, strlen(s), ret);
}

int kp_strv_consume(struct kp_strv *sv, char *s)
{
    int r;

    /* Room for the new entry and the terminator: cap >= n + 2. */
    if (sv->n + 2 > sv->cap) {
        size_t ncap;
        char **nv;

        if (kp_mul_overflow(sv->cap, (size_t)2, &ncap)) {
            r = -ENOMEM;
            goto out;
        }
        if (ncap < 8)
            ncap = 8;
        nv = kp_reallocarray(sv->v, ncap, sizeof(*nv));
        if (!nv) {
            r = -ENOMEM;
            goto out;
        }
        sv->v = nv;
        sv->cap = ncap;
    }
    sv->v[sv->n++] = s;
    sv->v[sv->n] = NULL;
    s = NULL; /* the vector owns it now */
    r = 0;
out:
    kp_free(s);
    return r;
}

int kp_strv_push(struct kp_strv *sv, const char *s)
{
    char *copy = kp_strdup(s);

    if (!copy)
        return -ENOMEM;
    return kp_strv_consume(sv, copy);
}

static int strv_cmp(const void *a, const void *b)
{
    const char *const *x = a;
    const char *const *y = b;

    return strcmp(*x, *y);
}

void kp_strv_sort(struct kp_strv *sv)
{
    if (sv->n > 1)
        qsort(sv->v, sv->n, sizeof(*sv->v), strv_cmp);
}

bool kp_strv_contains(const struct kp_strv *sv, const char *s)
{
    size_t i;

    if (!s)
        return false;
    for (i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return true;
    return false;
}

void kp_strv_done(struct kp_strv *sv)
{
    size_t i;

    for (i = 0; i < sv->n; i++)
        kp_free(sv->v[i]);
    kp_free(sv->v);
    sv->v = NULL;
    sv->n = 0;
    sv->cap = 0;
}

bool kp_sorted_find(const void *base, size_t n, size_t size, size_t key_off, const char *key,
                    size_t *ret_pos)
{
    const unsigned char *b = base;
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *k;
        int c;

        memcpy(&k, b + mid * size + key_off, sizeof(k));
        c = strcmp(k, key);
        if (c == 0) {
            *ret_pos = mid;
            return true;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *ret_pos = lo;
    return false;
}
