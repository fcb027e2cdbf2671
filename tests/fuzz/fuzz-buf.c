/* DESIGN: fuzz driver for struct kp_buf (base/buf.h).
 *
 * The input is a program: its first byte picks the ceiling (0..127, or a multiple of 4 up to
 * 508), then each byte is an operation, followed by the operand bytes that operation takes.
 * Beside the real buffer the driver keeps a model, a plain array holding what the buffer should
 * hold, updated by the rules of buf.h alone. After every operation it checks the header's
 * invariants (len <= max; data[len] == '\0' when data is set; no data means empty; cap > len)
 * and that the contents equal the model, and calls abort() on any difference.
 *
 * One operation arms kp_alloc_fail_at() so that a later allocation fails. After -ENOMEM the
 * invariants must still hold and appends, printf and reserve must have left the contents as they
 * were (all or nothing); append_tail is only held to the invariants, since buf.h promises no
 * more there, and the model takes over what the buffer kept. At the end the buffer is released
 * and the count of live allocations must be where it started: the driver leaks nothing and
 * catches a buffer that does. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MODEL_MAX 512

enum op {
    OP_APPEND,
    OP_PUTS,
    OP_PUTC,
    OP_PRINTF,
    OP_APPEND_TAIL,
    OP_CONSUME,
    OP_TRUNCATE,
    OP_RESET,
    OP_DONE,
    OP_WIPE,
    OP_STEAL,
    OP_RESERVE,
    OP_FAIL_ALLOC,
    OP_REINIT,
    OP_STR,
    OP_COUNT,
};

/* Which value b->truncated must have, when the model knows. */
enum trunc_state { TRUNC_NO, TRUNC_YES, TRUNC_UNKNOWN };

struct model {
    char bytes[MODEL_MAX];
    size_t len;
    enum trunc_state trunc;
};

struct input {
    const uint8_t *p;
    size_t left;
};

static uint8_t take_byte(struct input *in)
{
    uint8_t c = 0;

    if (in->left) {
        c = *in->p++;
        in->left--;
    }
    return c;
}

/* Up to n operand bytes from the input; *ret_n receives how many there were. */
static const char *take_bytes(struct input *in, size_t n, size_t *ret_n)
{
    const char *p = (const char *)in->p;

    n = n < in->left ? n : in->left;
    in->p += n;
    in->left -= n;
    *ret_n = n;
    return p;
}

static void fail(const char *what, const struct kp_buf *b, const struct model *m, int r)
{
    fprintf(stderr, "fuzz-buf: %s (r=%d len=%zu cap=%zu max=%zu data=%p model_len=%zu)\n", what, r,
            b->len, b->cap, b->max, (void *)b->data, m->len);
    abort();
}

static void check(const struct kp_buf *b, const struct model *m, int r)
{
    if (b->len > b->max)
        fail("len > max", b, m, r);
    if (!b->data && b->len != 0)
        fail("no data but len > 0", b, m, r);
    if (b->data && (b->cap <= b->len || b->data[b->len] != '\0'))
        fail("terminator missing", b, m, r);
    if (b->len != m->len || (m->len && memcmp(b->data, m->bytes, m->len) != 0))
        fail("contents differ from the model", b, m, r);
    if (strncmp(kp_buf_str(b), m->bytes, m->len) != 0 || kp_buf_str(b)[strnlen(m->bytes, m->len)])
        fail("kp_buf_str differs from the model", b, m, r);
    if (m->trunc != TRUNC_UNKNOWN && b->truncated != (m->trunc == TRUNC_YES))
        fail("truncated flag wrong", b, m, r);
}

static void model_clear(struct model *m)
{
    m->len = 0;
    m->trunc = TRUNC_UNKNOWN;
}

/* The model after an all-or-nothing append of n bytes that returned r. */
static void model_append(struct kp_buf *b, struct model *m, const char *p, size_t n, int r)
{
    /* An injected failure may come first even when the ceiling would have been crossed (printf
     * allocates before it knows the length); buf.h does not rank the two errors. */
    if (r == -ENOMEM && kp_alloc_failed())
        return; /* contents must be unchanged */
    if (m->len + n > b->max) {
        if (r != -KP_ELIMIT)
            fail("append past the ceiling did not fail with -KP_ELIMIT", b, m, r);
        if (b->data)
            fail("-KP_ELIMIT did not release the buffer", b, m, r);
        model_clear(m);
        return;
    }
    if (r != 0)
        fail("append within the ceiling failed", b, m, r);
    memcpy(m->bytes + m->len, p, n);
    m->len += n;
}

static void do_tail(struct kp_buf *b, struct model *m, const char *p, size_t n)
{
    int r = kp_buf_append_tail(b, p, n);
    size_t total = m->len + n, drop;

    if (r == -ENOMEM && kp_alloc_failed()) {
        /* Only the invariants are promised: adopt what the buffer kept. */
        if (b->len > b->max || (b->data && b->data[b->len] != '\0') || (!b->data && b->len))
            fail("append_tail broke an invariant on -ENOMEM", b, m, r);
        if (b->len)
            memcpy(m->bytes, b->data, b->len);
        m->len = b->len;
        m->trunc = TRUNC_UNKNOWN;
        return;
    }
    if (r != 0)
        fail("append_tail failed", b, m, r);
    if (total <= b->max) {
        memcpy(m->bytes + m->len, p, n);
        m->len = total;
        return;
    }
    drop = total - b->max;
    if (drop >= m->len) {
        memcpy(m->bytes, p + (drop - m->len), b->max);
    } else {
        memmove(m->bytes, m->bytes + drop, m->len - drop);
        memcpy(m->bytes + m->len - drop, p, n);
    }
    m->len = b->max;
    m->trunc = TRUNC_YES;
}

static void run_op(struct kp_buf *b, struct model *m, struct input *in)
{
    enum op op = (enum op)(take_byte(in) % OP_COUNT);
    char tmp[256];
    const char *p;
    size_t n, k;
    char *s;
    int r = 0;

    switch (op) {
    case OP_APPEND:
        p = take_bytes(in, take_byte(in) % 48, &n);
        r = kp_buf_append(b, p, n);
        model_append(b, m, p, n, r);
        break;
    case OP_PUTS:
        p = take_bytes(in, take_byte(in) % 48, &n);
        memcpy(tmp, p, n);
        tmp[n] = '\0';
        r = kp_buf_puts(b, tmp);
        model_append(b, m, tmp, strlen(tmp), r);
        break;
    case OP_PUTC:
        tmp[0] = (char)take_byte(in);
        r = kp_buf_putc(b, tmp[0]);
        model_append(b, m, tmp, 1, r);
        break;
    case OP_PRINTF: {
        unsigned v = take_byte(in);
        int len;

        p = take_bytes(in, take_byte(in) % 64, &n);
        /* A width from the input makes long outputs from short programs. */
        len = snprintf(tmp, sizeof(tmp), "%.*s<%*u>", (int)n, p, (int)(v % 100), v);
        if (len < 0 || (size_t)len >= sizeof(tmp))
            abort();
        r = kp_buf_printf(b, "%.*s<%*u>", (int)n, p, (int)(v % 100), v);
        model_append(b, m, tmp, (size_t)len, r);
        break;
    }
    case OP_APPEND_TAIL:
        p = take_bytes(in, take_byte(in) % 160, &n);
        do_tail(b, m, p, n);
        break;
    case OP_CONSUME:
        k = take_byte(in);
        k = k == 255 ? SIZE_MAX : k;
        kp_buf_consume(b, k);
        if (k >= m->len) {
            /* buf.h leaves the flag's fate open when everything goes. */
            model_clear(m);
        } else {
            memmove(m->bytes, m->bytes + k, m->len - k);
            m->len -= k;
        }
        break;
    case OP_TRUNCATE:
        k = take_byte(in);
        k = k == 255 ? SIZE_MAX : k;
        kp_buf_truncate(b, k);
        if (k < m->len)
            m->len = k;
        break;
    case OP_RESET:
        kp_buf_reset(b);
        model_clear(m);
        break;
    case OP_DONE:
        kp_buf_done(b);
        model_clear(m);
        if (b->data || b->cap)
            fail("kp_buf_done kept memory", b, m, 0);
        break;
    case OP_WIPE:
        kp_buf_wipe(b);
        model_clear(m);
        if (b->data)
            fail("kp_buf_wipe kept memory", b, m, 0);
        break;
    case OP_STEAL:
        n = SIZE_MAX;
        s = kp_buf_steal(b, &n);
        if (!s) {
            if (!kp_alloc_failed() || n != SIZE_MAX)
                fail("kp_buf_steal failed", b, m, 0);
            break;
        }
        if (n != m->len || (n && memcmp(s, m->bytes, n) != 0) || s[n] != '\0')
            fail("stolen string differs from the model", b, m, 0);
        kp_free(s);
        model_clear(m);
        if (b->len != 0)
            fail("buffer not empty after kp_buf_steal", b, m, 0);
        break;
    case OP_RESERVE:
        k = take_byte(in);
        k = k & 0x80 ? SIZE_MAX - (k & 0x7f) : k;
        r = kp_buf_reserve(b, k);
        if (k > b->max || m->len + k > b->max) {
            if (r != -KP_ELIMIT || b->data)
                fail("reserve past the ceiling did not fail and release", b, m, r);
            model_clear(m);
        } else if (r == 0) {
            if (!b->data || b->cap < m->len + k + 1)
                fail("reserve did not make room", b, m, r);
        } else if (r != -ENOMEM || !kp_alloc_failed()) {
            fail("reserve within the ceiling failed", b, m, r);
        }
        break;
    case OP_FAIL_ALLOC:
        kp_alloc_fail_at(1 + take_byte(in) % 4);
        break;
    case OP_REINIT:
        kp_buf_done(b);
        kp_buf_init(b, take_byte(in) % 128);
        model_clear(m);
        m->trunc = TRUNC_NO;
        break;
    case OP_STR:
        break;
    case OP_COUNT:
        abort();
    }
    check(b, m, r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {.p = data, .left = size};
    struct model m = {.len = 0, .trunc = TRUNC_NO};
    struct kp_buf b;
    int64_t live = kp_alloc_live();
    uint8_t c = take_byte(&in);
    unsigned ops = 0;

    kp_buf_init(&b, c & 1 ? c >> 1 : (size_t)(c >> 1) * 4);
    check(&b, &m, 0);
    while (in.left > 0 && ops++ < 4096)
        run_op(&b, &m, &in);
    kp_alloc_fail_at(0);
    kp_buf_done(&b);
    if (kp_alloc_live() != live) {
        fprintf(stderr, "fuzz-buf: %lld allocations leaked\n", (long long)(kp_alloc_live() - live));
        abort();
    }
    return 0;
}
