/* DESIGN: bounded growable buffer.
 *
 * What: the one container for outside bytes (HTTP bodies, watch frames, SSH output, files).
 * Why: a peer that sends more than we expect must cost us a clean -KP_ELIMIT, never memory we
 * did not budget, so every buffer carries its ceiling and checks it before growing. Growth
 * doubles the allocation (amortised O(1) appends) but never past max + 1. The terminator is
 * kept after every change so the contents can be handed to string functions without a copy.
 * Threads: a buffer belongs to one thread at a time; nothing here is shared. */
#include "base/buf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"

/* The smallest first allocation; avoids a string of tiny reallocs for short contents. */
#define KP_BUF_MIN_CAP 64

void kp_buf_init(struct kp_buf *b, size_t max)
{
    *b = (struct kp_buf)KP_BUF_INIT(max);
}

void kp_buf_done(struct kp_buf *b)
{
    kp_free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->truncated = false;
}

void kp_buf_wipe(struct kp_buf *b)
{
    kp_wipe(b->data, b->cap);
    kp_buf_done(b);
}

void kp_buf_reset(struct kp_buf *b)
{
    b->len = 0;
    b->truncated = false;
    if (b->data)
        b->data[0] = '\0';
}

/* Grows the allocation so that `need` bytes plus the terminator fit. need <= max is checked by
 * the caller. */
static int kp_buf_grow(struct kp_buf *b, size_t need)
{
    size_t want, limit;
    char *p;

    if (need < b->cap)
        return 0;
    /* need <= max < SIZE_MAX, so need + 1 and max + 1 cannot overflow unless max == SIZE_MAX. */
    if (kp_add_overflow(b->max, (size_t)1, &limit))
        limit = SIZE_MAX;
    want = b->cap ? b->cap : KP_BUF_MIN_CAP;
    while (want <= need) {
        if (kp_mul_overflow(want, (size_t)2, &want)) {
            want = limit;
            break;
        }
    }
    if (want > limit)
        want = limit;
    p = kp_realloc(b->data, want);
    if (!p)
        return -ENOMEM;
    if (!b->data)
        p[0] = '\0';
    b->data = p;
    b->cap = want;
    return 0;
}

int kp_buf_reserve(struct kp_buf *b, size_t n)
{
    size_t need;

    if (kp_add_overflow(b->len, n, &need) || need > b->max) {
        kp_buf_wipe(b); /* it may hold a secret: released as kp_buf_wipe() would */
        return -KP_ELIMIT;
    }
    return kp_buf_grow(b, need);
}

int kp_buf_append(struct kp_buf *b, const void *p, size_t n)
{
    int r;

    if (n == 0)
        return kp_buf_reserve(b, 0);
    r = kp_buf_reserve(b, n);
    if (r < 0)
        return r;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int kp_buf_puts(struct kp_buf *b, const char *s)
{
    return kp_buf_append(b, s, strlen(s));
}

int kp_buf_putc(struct kp_buf *b, char c)
{
    return kp_buf_append(b, &c, 1);
}

int kp_buf_vprintf(struct kp_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    size_t room;
    int n, r;

    /* Format into whatever room exists first; only a second pass if it did not fit. */
    r = kp_buf_reserve(b, 0);
    if (r < 0)
        return r;
    room = b->cap - b->len;
    va_copy(ap2, ap);
    n = vsnprintf(b->data + b->len, room, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        b->data[b->len] = '\0';
        return -EINVAL;
    }
    if ((size_t)n >= room) {
        r = kp_buf_reserve(b, (size_t)n);
        if (r < 0) {
            /* The first pass wrote a prefix over the terminator; put it back. */
            if (b->data)
                b->data[b->len] = '\0';
            return r;
        }
        n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        if (n < 0) {
            b->data[b->len] = '\0';
            return -EINVAL;
        }
    }
    b->len += (size_t)n;
    return 0;
}

int kp_buf_printf(struct kp_buf *b, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = kp_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

int kp_buf_append_tail(struct kp_buf *b, const void *p, size_t n)
{
    const char *src = p;
    size_t total, keep;
    int r;

    if (b->max == 0) {
        if (n > 0)
            b->truncated = true;
        return 0;
    }
    /* Grow to the final size first, so a failed allocation leaves the contents untouched. */
    if (kp_add_overflow(b->len, n, &total) || total > b->max)
        total = b->max;
    r = kp_buf_grow(b, total);
    if (r < 0)
        return r;
    if (n >= b->max) {
        /* The new bytes alone fill the buffer: keep their tail. */
        if (n > b->max || b->len > 0)
            b->truncated = true;
        src += n - b->max;
        n = b->max;
        b->len = 0;
    } else if (b->len + n > b->max) {
        keep = b->max - n;
        memmove(b->data, b->data + (b->len - keep), keep);
        b->len = keep;
        b->truncated = true;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

void kp_buf_consume(struct kp_buf *b, size_t n)
{
    if (n >= b->len) {
        kp_buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

void kp_buf_truncate(struct kp_buf *b, size_t n)
{
    if (n >= b->len)
        return;
    b->len = n;
    b->data[n] = '\0';
}

char *kp_buf_steal(struct kp_buf *b, size_t *ret_len)
{
    char *s;

    if (!b->data) {
        s = kp_strdup("");
        if (!s)
            return NULL;
    } else {
        s = b->data;
    }
    if (ret_len)
        *ret_len = b->len;
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->truncated = false;
    return s;
}

const char *kp_buf_str(const struct kp_buf *b)
{
    return b->data ? b->data : "";
}
