/* DESIGN: unit tests for base/buf.c, written against the contract in base/buf.h.
 *
 * After every operation the tests check the header's invariants (len <= max; data[len] == '\0'
 * whenever data is set; an unset data means an empty buffer) through check_buf(), including
 * after failures: a -ENOMEM must leave a buffer that is still valid and still holds what it held,
 * and a -KP_ELIMIT must leave it released (STYLE.md rule 6) but reusable with the same ceiling.
 * Allocation failures are injected with kp_alloc_fail_at(); the torture cases repeat whole
 * scenarios with each allocation failing in turn and report a broken invariant as a positive
 * return, which the sweep treats as a failure. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "kp-test.h"

/* test_reserve_huge asks for an allocation close to SIZE_MAX on purpose. Plain malloc returns
 * NULL for that; ASan's allocator aborts instead unless told to behave like malloc. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

/* True when b satisfies every invariant buf.h states. */
static bool buf_ok(const struct kp_buf *b)
{
    if (b->len > b->max)
        return false;
    if (!b->data)
        return b->len == 0 && kp_buf_str(b)[0] == '\0';
    if (b->cap <= b->len || b->data[b->len] != '\0')
        return false;
    return kp_buf_str(b) == b->data;
}

static void check_buf(const struct kp_buf *b)
{
    if (!buf_ok(b))
        fail_msg("buffer invariant broken: data=%p len=%zu cap=%zu max=%zu", (void *)b->data,
                 b->len, b->cap, b->max);
}

/* The contents equal the n bytes at p (which may hold NULs). */
static void check_contents(const struct kp_buf *b, const void *p, size_t n)
{
    check_buf(b);
    assert_int_equal(b->len, n);
    if (n)
        assert_memory_equal(b->data, p, n);
}

#define check_str(b, s) check_contents((b), (s), strlen(s))

/* A buffer released by -KP_ELIMIT: empty, no memory, same ceiling. */
static void check_released(const struct kp_buf *b, size_t max)
{
    check_buf(b);
    assert_null(b->data);
    assert_int_equal(b->len, 0);
    assert_int_equal(b->max, max);
    assert_string_equal(kp_buf_str(b), "");
}

/* --- set-up and plain appends ------------------------------------------------------------- */

static void test_init(void **state)
{
    struct kp_buf a = KP_BUF_INIT(16);
    struct kp_buf b;

    (void)state;
    assert_null(a.data);
    assert_int_equal(a.len, 0);
    assert_int_equal(a.cap, 0);
    assert_int_equal(a.max, 16);
    assert_false(a.truncated);
    assert_string_equal(kp_buf_str(&a), "");

    memset(&b, 0xa5, sizeof(b));
    kp_buf_init(&b, 32);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.max, 32);
    assert_false(b.truncated);
    assert_string_equal(kp_buf_str(&b), "");

    /* done on a buffer that never allocated is harmless, twice. */
    kp_buf_done(&b);
    kp_buf_done(&b);
    check_released(&b, 32);
}

static void test_append(void **state)
{
    struct kp_buf b = KP_BUF_INIT(1024);
    int64_t live = kp_alloc_live();

    (void)state;
    assert_int_equal(kp_buf_append(&b, "abc", 3), 0);
    check_str(&b, "abc");
    assert_int_equal(kp_buf_puts(&b, "def"), 0);
    check_str(&b, "abcdef");
    assert_int_equal(kp_buf_putc(&b, 'g'), 0);
    check_str(&b, "abcdefg");
    assert_int_equal(kp_buf_puts(&b, ""), 0);
    check_str(&b, "abcdefg");
    assert_string_equal(kp_buf_str(&b), "abcdefg");

    /* Embedded NULs count in len and survive; the terminator is one past them. */
    assert_int_equal(kp_buf_append(&b, "x\0y", 3), 0);
    assert_int_equal(kp_buf_putc(&b, '\0'), 0);
    check_contents(&b, "abcdefgx\0y\0", 11);
    assert_string_equal(kp_buf_str(&b), "abcdefgx");

    kp_buf_done(&b);
    check_released(&b, 1024);
    assert_int_equal(kp_alloc_live(), live);
}

static void test_append_zero(void **state)
{
    struct kp_buf b = KP_BUF_INIT(4);

    (void)state;
    assert_int_equal(kp_buf_append(&b, "", 0), 0);
    check_buf(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(kp_buf_str(&b), "");

    /* At the ceiling, nothing more still fits. */
    assert_int_equal(kp_buf_append(&b, "abcd", 4), 0);
    assert_int_equal(kp_buf_append(&b, "zz", 0), 0);
    assert_int_equal(kp_buf_puts(&b, ""), 0);
    check_str(&b, "abcd");
    kp_buf_done(&b);
}

static void test_growth(void **state)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    char chunk[251];
    size_t i, total = 0;

    (void)state;
    /* Many odd-sized appends: each keeps every earlier byte in place. */
    for (i = 0; i < 2000; i++) {
        size_t n = 1 + i % sizeof(chunk);

        memset(chunk, 'a' + (int)(i % 26), n);
        assert_int_equal(kp_buf_append(&b, chunk, n), 0);
        total += n;
        check_buf(&b);
        assert_int_equal(b.len, total);
    }
    total = 0;
    for (i = 0; i < 2000; i++) {
        size_t n = 1 + i % sizeof(chunk), j;

        for (j = 0; j < n; j++)
            assert_int_equal(b.data[total + j], 'a' + (int)(i % 26));
        total += n;
    }
    kp_buf_done(&b);
}

/* --- the ceiling -------------------------------------------------------------------------- */

static void test_ceiling_exact(void **state)
{
    struct kp_buf b = KP_BUF_INIT(8);
    int64_t live = kp_alloc_live();

    (void)state;
    assert_int_equal(kp_buf_append(&b, "12345678", 8), 0);
    check_str(&b, "12345678");

    /* One byte past the ceiling fails and releases everything. */
    assert_int_equal(kp_buf_append(&b, "9", 1), -KP_ELIMIT);
    check_released(&b, 8);
    assert_int_equal(kp_alloc_live(), live);

    /* The buffer is usable again, with the same ceiling. */
    assert_int_equal(kp_buf_puts(&b, "again"), 0);
    check_str(&b, "again");
    assert_int_equal(kp_buf_puts(&b, "123"), 0);
    assert_int_equal(kp_buf_putc(&b, 'x'), -KP_ELIMIT);
    check_released(&b, 8);

    /* A single append larger than the ceiling on an empty buffer. */
    assert_int_equal(kp_buf_append(&b, "123456789", 9), -KP_ELIMIT);
    check_released(&b, 8);

    assert_int_equal(kp_buf_puts(&b, "abcd"), 0);
    assert_int_equal(kp_buf_puts(&b, "efghi"), -KP_ELIMIT);
    check_released(&b, 8);

    assert_int_equal(kp_buf_puts(&b, "abcd"), 0);
    assert_int_equal(kp_buf_printf(&b, "%d", 12345), -KP_ELIMIT);
    check_released(&b, 8);
    assert_int_equal(kp_alloc_live(), live);
}

static void test_ceiling_zero(void **state)
{
    struct kp_buf b = KP_BUF_INIT(0);

    (void)state;
    assert_int_equal(kp_buf_append(&b, "", 0), 0);
    check_buf(&b);
    assert_int_equal(kp_buf_printf(&b, "%s", ""), 0);
    check_buf(&b);
    assert_string_equal(kp_buf_str(&b), "");
    assert_int_equal(kp_buf_putc(&b, 'x'), -KP_ELIMIT);
    check_released(&b, 0);
    assert_int_equal(kp_buf_printf(&b, "x"), -KP_ELIMIT);
    check_released(&b, 0);
    assert_int_equal(kp_buf_reserve(&b, 1), -KP_ELIMIT);
    check_released(&b, 0);
    kp_buf_done(&b);
}

static void test_reserve(void **state)
{
    struct kp_buf b = KP_BUF_INIT(100);

    (void)state;
    assert_int_equal(kp_buf_reserve(&b, 0), 0);
    check_buf(&b);
    assert_int_equal(b.len, 0);

    assert_int_equal(kp_buf_reserve(&b, 40), 0);
    check_buf(&b);
    assert_non_null(b.data);
    assert_int_equal(b.len, 0);
    assert_true(b.cap >= 41);

    assert_int_equal(kp_buf_puts(&b, "hello"), 0);
    assert_int_equal(kp_buf_reserve(&b, 95), 0);
    check_str(&b, "hello");
    assert_true(b.cap >= 101);
    /* Reserved room is usable without further allocation. */
    {
        char *before = b.data;
        char fill[95];

        memset(fill, '.', sizeof(fill));
        assert_int_equal(kp_buf_append(&b, fill, sizeof(fill)), 0);
        assert_ptr_equal(b.data, before);
        assert_int_equal(b.len, 100);
        check_buf(&b);
    }
    kp_buf_truncate(&b, 5);
    assert_int_equal(kp_buf_reserve(&b, 96), -KP_ELIMIT);
    check_released(&b, 100);
    kp_buf_done(&b);
}

static void test_reserve_huge(void **state)
{
    struct kp_buf b = KP_BUF_INIT(100);
    struct kp_buf u = KP_BUF_INIT(SIZE_MAX);
    int r;

    (void)state;
    /* len + n wraps around: must be caught, not taken for a small request. */
    assert_int_equal(kp_buf_puts(&b, "12345"), 0);
    assert_int_equal(kp_buf_reserve(&b, SIZE_MAX), -KP_ELIMIT);
    check_released(&b, 100);
    assert_int_equal(kp_buf_puts(&b, "12345"), 0);
    assert_int_equal(kp_buf_reserve(&b, SIZE_MAX - 4), -KP_ELIMIT); /* 5 + n == 0 mod 2^64 */
    check_released(&b, 100);
    assert_int_equal(kp_buf_puts(&b, "12345"), 0);
    assert_int_equal(kp_buf_append(&b, "x", SIZE_MAX - 4), -KP_ELIMIT);
    check_released(&b, 100);

    /* Without a real ceiling, a request the allocator cannot meet is -ENOMEM, and the
     * contents are kept. */
    assert_int_equal(kp_buf_puts(&u, "keep"), 0);
    r = kp_buf_reserve(&u, SIZE_MAX / 2);
    assert_int_equal(r, -ENOMEM);
    check_str(&u, "keep");
    r = kp_buf_reserve(&u, SIZE_MAX - 5);
    assert_true(r == -ENOMEM || r == -KP_ELIMIT);
    check_buf(&u);
    r = kp_buf_reserve(&u, SIZE_MAX - 4); /* len + n + terminator wraps */
    assert_true(r == -ENOMEM || r == -KP_ELIMIT);
    check_buf(&u);
    kp_buf_done(&u);
}

/* --- printf ------------------------------------------------------------------------------- */

static int call_vprintf(struct kp_buf *b, const char *fmt, ...) KP_PRINTF(2, 3);
static int call_vprintf(struct kp_buf *b, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = kp_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

static void test_printf(void **state)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    char big[10000];
    size_t i;

    (void)state;
    assert_int_equal(kp_buf_printf(&b, "%s-%d-%zu", "host", -7, (size_t)42), 0);
    check_str(&b, "host--7-42");
    assert_int_equal(kp_buf_printf(&b, "%s", ""), 0);
    check_str(&b, "host--7-42");
    assert_int_equal(call_vprintf(&b, "[%04x]", 0xbeefu), 0);
    check_str(&b, "host--7-42[beef]");
    kp_buf_reset(&b);

    /* Output far larger than any first allocation: must grow and format again. */
    memset(big, 'q', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(kp_buf_printf(&b, "<%s>", big), 0);
    check_buf(&b);
    assert_int_equal(b.len, sizeof(big) + 1);
    assert_int_equal(b.data[0], '<');
    assert_int_equal(b.data[b.len - 1], '>');
    for (i = 1; i < b.len - 1; i++)
        assert_int_equal(b.data[i], 'q');

    /* Many small printfs, each on top of what is there. */
    kp_buf_done(&b);
    for (i = 0; i < 1000; i++)
        assert_int_equal(kp_buf_printf(&b, "%zu,", i), 0);
    check_buf(&b);
    assert_memory_equal(b.data, "0,1,2,", 6);
    assert_string_equal(b.data + b.len - 8, "998,999,");
    kp_buf_done(&b);
}

static void test_printf_ceiling(void **state)
{
    struct kp_buf b = KP_BUF_INIT(10);

    (void)state;
    /* Exactly max bytes fit; one more is -KP_ELIMIT and releases the buffer. */
    assert_int_equal(kp_buf_printf(&b, "%05d", 42), 0);
    assert_int_equal(kp_buf_printf(&b, "%5s", "x"), 0);
    check_str(&b, "00042    x");
    kp_buf_truncate(&b, 9);
    assert_int_equal(kp_buf_printf(&b, "%d", 10), -KP_ELIMIT);
    check_released(&b, 10);
    assert_int_equal(kp_buf_printf(&b, "%s", "01234567890"), -KP_ELIMIT);
    check_released(&b, 10);
    assert_int_equal(call_vprintf(&b, "%s", "0123456789"), 0);
    check_str(&b, "0123456789");
    kp_buf_done(&b);
}

static void test_printf_einval(void **state)
{
    /* In the C locale a wide character outside ASCII cannot be converted: vsnprintf fails with
     * EILSEQ, which the buffer reports as a bad format and survives. */
    static const wchar_t bad[] = {(wchar_t)0xe9, 0};
    struct kp_buf b = KP_BUF_INIT(64);

    (void)state;
    assert_int_equal(kp_buf_puts(&b, "before"), 0);
    assert_int_equal(kp_buf_printf(&b, "%ls", bad), -EINVAL);
    check_str(&b, "before");
    kp_buf_done(&b);
}

/* --- append_tail -------------------------------------------------------------------------- */

static void test_append_tail(void **state)
{
    struct kp_buf b = KP_BUF_INIT(8);

    (void)state;
    assert_int_equal(kp_buf_append_tail(&b, "abc", 3), 0);
    check_str(&b, "abc");
    assert_false(b.truncated);
    assert_int_equal(kp_buf_append_tail(&b, "defgh", 5), 0); /* exactly full */
    check_str(&b, "abcdefgh");
    assert_false(b.truncated);
    assert_int_equal(kp_buf_append_tail(&b, "", 0), 0);
    check_str(&b, "abcdefgh");
    assert_false(b.truncated);
    assert_int_equal(kp_buf_append_tail(&b, "ij", 2), 0);
    check_str(&b, "cdefghij");
    assert_true(b.truncated);
    /* The whole old content goes when the new bytes alone fill the buffer. */
    assert_int_equal(kp_buf_append_tail(&b, "ABCDEFGH", 8), 0);
    check_str(&b, "ABCDEFGH");
    assert_true(b.truncated);
    /* A plain append still honours the ceiling. */
    assert_int_equal(kp_buf_putc(&b, 'x'), -KP_ELIMIT);
    check_released(&b, 8);
    kp_buf_done(&b);

    /* One append larger than max into an empty buffer keeps its last max bytes. */
    kp_buf_init(&b, 4);
    assert_int_equal(kp_buf_append_tail(&b, "0123456789abc", 13), 0);
    check_str(&b, "9abc");
    assert_true(b.truncated);
    kp_buf_done(&b);

    /* Exactly max bytes into an empty buffer drop nothing. */
    kp_buf_init(&b, 4);
    assert_int_equal(kp_buf_append_tail(&b, "wxyz", 4), 0);
    check_str(&b, "wxyz");
    assert_false(b.truncated);
    kp_buf_done(&b);

    /* Embedded NULs are bytes like any other. */
    kp_buf_init(&b, 4);
    assert_int_equal(kp_buf_append_tail(&b, "a\0b\0c\0", 6), 0);
    check_contents(&b, "b\0c\0", 4);
    assert_true(b.truncated);
    kp_buf_done(&b);
}

static void test_append_tail_max_zero(void **state)
{
    struct kp_buf b = KP_BUF_INIT(0);

    (void)state;
    assert_int_equal(kp_buf_append_tail(&b, "", 0), 0);
    check_buf(&b);
    assert_false(b.truncated);
    assert_int_equal(kp_buf_append_tail(&b, "abc", 3), 0);
    check_buf(&b);
    assert_int_equal(b.len, 0);
    assert_true(b.truncated);
    kp_buf_done(&b);
}

static void test_append_tail_stream(void **state)
{
    /* Captured output in odd chunks: the buffer always holds the last 25 bytes of the stream. */
    static const char text[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    struct kp_buf b = KP_BUF_INIT(25);
    char stream[4096];
    size_t slen = 0, i;

    (void)state;
    for (i = 0; i < 300; i++) {
        size_t off = (i * 7) % 26, n = i % 11; /* off + n <= 36 */

        assert_true(slen + n <= sizeof(stream));
        assert_int_equal(kp_buf_append_tail(&b, text + off, n), 0);
        memcpy(stream + slen, text + off, n);
        slen += n;
        if (slen <= 25) {
            check_contents(&b, stream, slen);
            assert_false(b.truncated);
        } else {
            check_contents(&b, stream + slen - 25, 25);
            assert_true(b.truncated);
        }
    }
    kp_buf_done(&b);
}

/* --- consume, truncate, reset ------------------------------------------------------------- */

static void test_consume(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64);
    char full[64];

    (void)state;
    kp_buf_consume(&b, 0); /* never allocated */
    kp_buf_consume(&b, 5);
    check_buf(&b);
    assert_int_equal(b.len, 0);

    assert_int_equal(kp_buf_puts(&b, "abcdef"), 0);
    kp_buf_consume(&b, 0);
    check_str(&b, "abcdef");
    kp_buf_consume(&b, 2);
    check_str(&b, "cdef");
    kp_buf_consume(&b, 3);
    check_str(&b, "f");
    kp_buf_consume(&b, 1);
    check_str(&b, "");

    assert_int_equal(kp_buf_puts(&b, "line1\nline2\n"), 0);
    kp_buf_consume(&b, 6);
    check_str(&b, "line2\n");
    kp_buf_consume(&b, 100); /* more than len: drops everything */
    check_str(&b, "");
    kp_buf_consume(&b, SIZE_MAX);
    check_str(&b, "");

    /* Room freed by consume is usable up to the ceiling again. */
    memset(full, '7', sizeof(full));
    assert_int_equal(kp_buf_append(&b, full, sizeof(full)), 0);
    kp_buf_consume(&b, 60);
    check_str(&b, "7777");
    assert_int_equal(kp_buf_append(&b, full, sizeof(full) - 4), 0);
    assert_int_equal(b.len, 64);
    check_buf(&b);
    kp_buf_done(&b);
}

static void test_truncate(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64);

    (void)state;
    kp_buf_truncate(&b, 0); /* never allocated */
    kp_buf_truncate(&b, 10);
    check_buf(&b);
    assert_int_equal(b.len, 0);

    assert_int_equal(kp_buf_puts(&b, "abcdef"), 0);
    kp_buf_truncate(&b, 10);
    check_str(&b, "abcdef");
    kp_buf_truncate(&b, 6);
    check_str(&b, "abcdef");
    kp_buf_truncate(&b, 3);
    check_str(&b, "abc");
    assert_int_equal(kp_buf_puts(&b, "XY"), 0);
    check_str(&b, "abcXY");
    kp_buf_truncate(&b, 0);
    check_str(&b, "");
    assert_non_null(b.data);
    kp_buf_done(&b);
}

static void test_reset(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64);
    char *data;
    size_t cap;

    (void)state;
    kp_buf_reset(&b); /* never allocated */
    check_buf(&b);

    assert_int_equal(kp_buf_puts(&b, "some text"), 0);
    data = b.data;
    cap = b.cap;
    kp_buf_reset(&b);
    check_str(&b, "");
    /* The allocation is kept, with a valid terminator. */
    assert_ptr_equal(b.data, data);
    assert_int_equal(b.cap, cap);
    assert_int_equal(b.data[0], '\0');
    assert_int_equal(b.max, 64);
    assert_int_equal(kp_buf_puts(&b, "new"), 0);
    assert_ptr_equal(b.data, data);
    check_str(&b, "new");
    kp_buf_done(&b);
}

/* --- steal, wipe, done -------------------------------------------------------------------- */

static void test_steal(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64);
    int64_t live = kp_alloc_live();
    size_t len = 12345;
    char *s;

    (void)state;
    /* An empty buffer still gives an owned "" (never NULL except on -ENOMEM). */
    s = kp_buf_steal(&b, &len);
    assert_non_null(s);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    check_released(&b, 64);
    kp_free(s);

    assert_int_equal(kp_buf_puts(&b, "payload"), 0);
    s = kp_buf_steal(&b, &len);
    assert_non_null(s);
    assert_string_equal(s, "payload");
    assert_int_equal(len, 7);
    /* The buffer is empty, owns nothing, and can be used again. */
    check_buf(&b);
    assert_int_equal(b.len, 0);
    assert_ptr_not_equal(b.data, s);
    assert_string_equal(kp_buf_str(&b), "");
    assert_int_equal(kp_buf_puts(&b, "second"), 0);
    assert_string_equal(s, "payload");
    kp_free(s);

    /* ret_len is optional; embedded NULs are kept and counted. */
    kp_buf_reset(&b);
    assert_int_equal(kp_buf_append(&b, "a\0b", 3), 0);
    s = kp_buf_steal(&b, &len);
    assert_non_null(s);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "a\0b", 4);
    kp_free(s);
    assert_int_equal(kp_buf_puts(&b, "x"), 0);
    s = kp_buf_steal(&b, NULL);
    assert_non_null(s);
    assert_string_equal(s, "x");
    kp_free(s);

    /* After a reset, stealing gives "" and the kept allocation. */
    assert_int_equal(kp_buf_puts(&b, "gone"), 0);
    kp_buf_reset(&b);
    s = kp_buf_steal(&b, &len);
    assert_non_null(s);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    kp_free(s);

    kp_buf_done(&b);
    assert_int_equal(kp_alloc_live(), live);
}

static void test_steal_enomem(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64);
    int64_t live = kp_alloc_live();
    size_t len = 99;
    char *s;

    (void)state;
    /* Only an empty, never-allocated buffer needs memory to steal from. */
    kp_alloc_fail_at(1);
    s = kp_buf_steal(&b, &len);
    kp_alloc_fail_at(0);
    if (s) {
        /* An implementation that makes "" without allocating is fine if kp_free() takes it. */
        assert_string_equal(s, "");
        kp_free(s);
    } else {
        assert_int_equal(len, 99); /* ret_ output untouched on failure */
    }
    check_released(&b, 64);
    assert_int_equal(kp_alloc_live(), live);
}

static void test_wipe(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64);
    int64_t live = kp_alloc_live();

    (void)state;
    kp_buf_wipe(&b); /* never allocated */
    check_released(&b, 64);
    assert_int_equal(kp_buf_puts(&b, "s3cr3t-t0ken-value"), 0);
    kp_buf_consume(&b, 3); /* stale bytes now lie past len: wipe must still release cleanly */
    kp_buf_wipe(&b);
    check_released(&b, 64);
    assert_int_equal(kp_alloc_live(), live);
    assert_int_equal(kp_buf_puts(&b, "reuse"), 0);
    check_str(&b, "reuse");
    kp_buf_wipe(&b);
    check_released(&b, 64);
}

static void test_done(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64);
    int64_t live = kp_alloc_live();

    (void)state;
    assert_int_equal(kp_buf_puts(&b, "abc"), 0);
    kp_buf_done(&b);
    check_released(&b, 64);
    assert_int_equal(b.cap, 0);
    assert_int_equal(kp_alloc_live(), live);
    kp_buf_done(&b);
    assert_int_equal(kp_buf_puts(&b, "def"), 0);
    check_str(&b, "def");
    kp_buf_done(&b);
    assert_int_equal(kp_alloc_live(), live);
}

/* --- allocation failures keep the buffer valid and intact ---------------------------------- */

/* Fills b with known bytes up to its allocation (len + 1 == cap), so that any further append
 * has to grow it. */
static void fill_to_cap(struct kp_buf *b)
{
    while (!b->data || b->len + 1 < b->cap)
        assert_int_equal(kp_buf_putc(b, (char)('a' + b->len % 26)), 0);
    check_buf(b);
}

static void check_pattern(const struct kp_buf *b, size_t len)
{
    size_t i;

    check_buf(b);
    assert_int_equal(b->len, len);
    for (i = 0; i < len; i++)
        assert_int_equal(b->data[i], 'a' + (int)(i % 26));
}

static void test_enomem_append(void **state)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    char more[300];
    size_t len;

    (void)state;
    memset(more, 'Z', sizeof(more));
    fill_to_cap(&b);
    len = b.len;
    kp_alloc_fail_at(1);
    assert_int_equal(kp_buf_append(&b, more, sizeof(more)), -ENOMEM);
    assert_true(kp_alloc_failed());
    kp_alloc_fail_at(0);
    check_pattern(&b, len);

    fill_to_cap(&b);
    len = b.len;
    kp_alloc_fail_at(1);
    assert_int_equal(kp_buf_putc(&b, 'Z'), -ENOMEM);
    kp_alloc_fail_at(0);
    check_pattern(&b, len);

    kp_alloc_fail_at(1);
    assert_int_equal(kp_buf_reserve(&b, 1000), -ENOMEM);
    kp_alloc_fail_at(0);
    check_pattern(&b, len);

    /* The first allocation of a fresh buffer. */
    kp_buf_done(&b);
    kp_alloc_fail_at(1);
    assert_int_equal(kp_buf_puts(&b, "x"), -ENOMEM);
    kp_alloc_fail_at(0);
    check_released(&b, 1 << 20);
    kp_buf_done(&b);
}

static void test_enomem_printf(void **state)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    size_t len, fill;

    (void)state;
    /* The formatted text does not fit in what is allocated, and growing fails: the buffer must
     * keep its old contents and its terminator (nothing of a partial first pass may show).
     * Tried with the allocation full, nearly full and mostly empty. */
    for (fill = 0; fill < 3; fill++) {
        kp_buf_done(&b);
        fill_to_cap(&b);
        kp_buf_truncate(&b, fill == 0 ? b.len : fill == 1 ? b.len - 2 : 3);
        len = b.len;
        kp_alloc_fail_at(1);
        assert_int_equal(kp_buf_printf(&b, "%0*d", (int)(b.cap + 10), 7), -ENOMEM);
        assert_true(kp_alloc_failed());
        kp_alloc_fail_at(0);
        check_pattern(&b, len);
        assert_int_equal(strlen(kp_buf_str(&b)), len);

        assert_int_equal(kp_buf_printf(&b, "%s", "!"), 0);
        assert_int_equal(b.data[len], '!');
        check_buf(&b);
    }

    kp_buf_done(&b);
    kp_alloc_fail_at(1);
    assert_int_equal(kp_buf_printf(&b, "%d", 1), -ENOMEM);
    kp_alloc_fail_at(0);
    check_released(&b, 1 << 20);
    kp_buf_done(&b);
}

static void test_enomem_append_tail(void **state)
{
    struct kp_buf b = KP_BUF_INIT(4096);
    char more[4096];

    (void)state;
    /* buf.h promises only -ENOMEM here; the buffer must still be valid afterwards. */
    memset(more, 'Z', sizeof(more));
    fill_to_cap(&b);
    kp_alloc_fail_at(1);
    assert_int_equal(kp_buf_append_tail(&b, more, 200), -ENOMEM);
    kp_alloc_fail_at(0);
    check_buf(&b);

    kp_buf_reset(&b);
    fill_to_cap(&b);
    kp_alloc_fail_at(1);
    assert_int_equal(kp_buf_append_tail(&b, more, sizeof(more)), -ENOMEM);
    kp_alloc_fail_at(0);
    check_buf(&b);

    kp_buf_reset(&b);
    fill_to_cap(&b);
    kp_alloc_fail_at(1);
    assert_int_equal(kp_buf_append_tail(&b, more, 4000), -ENOMEM);
    kp_alloc_fail_at(0);
    check_buf(&b);
    kp_buf_done(&b);
}

/* --- torture cases: no cmocka asserts; 0, a negative error, or 1 for a wrong result -------- */

static int torture_buf_build(void)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    char *s = NULL;
    size_t len = 0, i;
    int r;

    for (i = 0; i < 200; i++) {
        r = kp_buf_printf(&b, "%zu:%s;", i, i % 3 ? "pod" : "node");
        if (!buf_ok(&b))
            r = 1;
        if (r != 0)
            goto out;
    }
    r = kp_buf_append(&b, "tail\0x", 6);
    if (r == 0)
        r = kp_buf_putc(&b, '!');
    if (r == 0)
        r = kp_buf_puts(&b, "end");
    if (!buf_ok(&b))
        r = 1;
    if (r != 0)
        goto out;
    kp_buf_consume(&b, 7);
    kp_buf_truncate(&b, b.len - 1);
    s = kp_buf_steal(&b, &len);
    if (!s) {
        r = -ENOMEM;
        goto out;
    }
    if (strncmp(s, "1:pod;2:pod;3:node;", 19) != 0 || memcmp(s + len - 9, "tail\0x!en", 9) != 0 ||
        s[len] != '\0')
        r = 1;
out:
    kp_free(s);
    kp_buf_done(&b);
    return r;
}

static int torture_buf_tail(void)
{
    struct kp_buf b = KP_BUF_INIT(100);
    char line[64];
    int i, n, r = 0;

    for (i = 0; i < 100; i++) {
        n = snprintf(line, sizeof(line), "output line %d\n", i);
        if (n < 0 || (size_t)n >= sizeof(line)) {
            r = 1;
            goto out;
        }
        r = kp_buf_append_tail(&b, line, (size_t)n);
        if (!buf_ok(&b))
            r = 1;
        if (r != 0)
            goto out;
    }
    if (b.len != 100 || !b.truncated || strcmp(b.data + b.len - 15, "output line 99\n") != 0)
        r = 1;
out:
    kp_buf_done(&b);
    return r;
}

static int torture_buf_steal_empty(void)
{
    struct kp_buf b = KP_BUF_INIT(8);
    char *s;
    size_t len = 1;

    s = kp_buf_steal(&b, &len);
    if (!s)
        return buf_ok(&b) ? -ENOMEM : 1;
    len = s[0] == '\0' && len == 0 ? 0 : 1;
    kp_free(s);
    return (int)len;
}

static int torture_buf_limit(void)
{
    struct kp_buf b = KP_BUF_INIT(32);
    int r;

    r = kp_buf_puts(&b, "0123456789");
    if (r < 0)
        goto out;
    r = kp_buf_printf(&b, "%s%s", "0123456789", "0123456789");
    if (r < 0)
        goto out;
    /* The ceiling is not an allocation failure: it must be reported the same on every run. */
    r = kp_buf_printf(&b, "%s", "0123456789");
    if (r != -KP_ELIMIT || b.data || b.len) {
        r = 1;
        goto out;
    }
    r = kp_buf_puts(&b, "fresh");
    if (r == 0 && strcmp(kp_buf_str(&b), "fresh") != 0)
        r = 1;
out:
    kp_buf_done(&b);
    return r;
}

int main(int argc, char **argv)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_append),
        cmocka_unit_test(test_append_zero),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_ceiling_exact),
        cmocka_unit_test(test_ceiling_zero),
        cmocka_unit_test(test_reserve),
        cmocka_unit_test(test_reserve_huge),
        cmocka_unit_test(test_printf),
        cmocka_unit_test(test_printf_ceiling),
        cmocka_unit_test(test_printf_einval),
        cmocka_unit_test(test_append_tail),
        cmocka_unit_test(test_append_tail_max_zero),
        cmocka_unit_test(test_append_tail_stream),
        cmocka_unit_test(test_consume),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_steal),
        cmocka_unit_test(test_steal_enomem),
        cmocka_unit_test(test_wipe),
        cmocka_unit_test(test_done),
        cmocka_unit_test(test_enomem_append),
        cmocka_unit_test(test_enomem_printf),
        cmocka_unit_test(test_enomem_append_tail),
    };
    static const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_buf_build),
        KP_TORTURE(torture_buf_tail),
        KP_TORTURE(torture_buf_steal_empty),
        KP_TORTURE(torture_buf_limit),
    };

    return kp_test_main("buf", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
