/* base/buf.h: growable byte buffer with a hard ceiling.
 *
 * Invariants: len <= max; when data != NULL, data[len] == '\0' (the terminator is not counted
 * in len and does not count against max), so the contents can be used as a C string when they
 * hold no NUL. A buffer is owned by one thread at a time. Growth past max fails with -KP_ELIMIT
 * and, per STYLE.md rule 6, releases the buffer's memory (the contents are then gone: the
 * caller was about to hold more than it promised to). -ENOMEM leaves contents, length and
 * terminator exactly as they were. When both could apply, printf may report -ENOMEM first (it
 * allocates before it knows the length). truncated is cleared by reset, done, steal and a
 * consume that empties the buffer. p may be NULL when n is 0. */
#ifndef KP_BASE_BUF_H
#define KP_BASE_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"

struct kp_buf {
    char *data;     /* NULL until the first append */
    size_t len;     /* bytes held, excluding the terminator */
    size_t cap;     /* bytes allocated, including room for the terminator */
    size_t max;     /* ceiling for len */
    bool truncated; /* set by kp_buf_append_tail when it dropped old bytes */
};

#define KP_BUF_INIT(maximum)                                                                       \
    {                                                                                              \
        .data = NULL, .len = 0, .cap = 0, .max = (maximum), .truncated = false                     \
    }

/* Sets up an empty buffer with ceiling max. No allocation. */
void kp_buf_init(struct kp_buf *b, size_t max);
/* Releases the contents; the buffer is empty afterwards and may be reused with the same max. */
void kp_buf_done(struct kp_buf *b);
/* Empties the buffer but keeps its allocation (the terminator stays valid). */
void kp_buf_reset(struct kp_buf *b);

/* Makes room for n more bytes. 0, -ENOMEM, or -KP_ELIMIT (len + n > max; buffer released). */
int kp_buf_reserve(struct kp_buf *b, size_t n) KP_WUR;
/* Appends n bytes. 0, -ENOMEM or -KP_ELIMIT (buffer released). */
int kp_buf_append(struct kp_buf *b, const void *p, size_t n) KP_WUR;
int kp_buf_puts(struct kp_buf *b, const char *s) KP_WUR;
int kp_buf_putc(struct kp_buf *b, char c) KP_WUR;
/* Appends formatted text. 0, -ENOMEM, -KP_ELIMIT (buffer released) or -EINVAL (bad format). */
int kp_buf_printf(struct kp_buf *b, const char *fmt, ...) KP_PRINTF(2, 3) KP_WUR;
int kp_buf_vprintf(struct kp_buf *b, const char *fmt, va_list ap) KP_PRINTF(2, 0) KP_WUR;

/* Appends n bytes but keeps only the last max bytes: older bytes are dropped from the front and
 * b->truncated is set. For captured output where the tail matters. 0 or -ENOMEM. */
int kp_buf_append_tail(struct kp_buf *b, const void *p, size_t n) KP_WUR;

/* Drops the first n bytes (n > len drops all). For stream framing. */
void kp_buf_consume(struct kp_buf *b, size_t n);
/* Shortens the contents to n bytes (no-op when n >= len). */
void kp_buf_truncate(struct kp_buf *b, size_t n);

/* Hands the contents to the caller as a NUL-terminated string (an empty buffer gives ""), and
 * leaves the buffer empty. *ret_len (optional) receives the length. NULL on -ENOMEM only. */
char *kp_buf_steal(struct kp_buf *b, size_t *ret_len) KP_WUR;

/* Wipes the contents with kp_wipe() and releases them, for buffers that held secrets. */
void kp_buf_wipe(struct kp_buf *b);

/* The contents as a string: "" for an empty buffer, never NULL. Valid until the next change. */
const char *kp_buf_str(const struct kp_buf *b);

#endif
