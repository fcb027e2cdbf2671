/* DESIGN: structured logging, one JSON object (or one short text line) per write(2).
 *
 * What: kp_log_emit() turns a level, a message, the call site, the thread's scope and a field
 * list into one line,
 *   {"level":...,"time":...,"logger":"controller","message":...,"commit":...,
 *    <scope: "controller"..."reconcileID">,"caller":"file.c:12",<fields>,
 *    "error":...,"errno":...,"suppressed":...,"truncated":true}
 * (the last four only when they apply) or, for a terminal, "warn: msg key=value ...". The keys
 * up to reconcileID are Karpenter's (its zap encoder config: level, time, logger, message,
 * commit; controller-runtime's reconcile logger: the scope), in the same order. Before a
 * string reaches the line it is redacted: every registered secret is replaced and the optional
 * hook runs; then it is escaped so the line is valid JSON whatever bytes came in (control
 * characters as \u00XX, invalid UTF-8 as U+FFFD).
 *
 * Why this way:
 * - A line has a hard ceiling, KP_LOG_MAX_LINE. The parts that must survive (commit, scope,
 *   caller, error, errno, suppressed) are built first into small scratch buffers whose size is
 *   bounded because their inputs are cut (KP_LOG_META_MAX, KP_LOG_SCOPE_MAX bytes; a scope value
 *   that escapes to more than its share is cut with "..."); the room they need is reserved at
 *   the end of
 *   the line, and msg and the fields fill what is left. A string that does not fit is cut at a
 *   character boundary (never inside an escape or a UTF-8 sequence) and ends in "..."; a field
 *   that does not fit at all is left out. Either sets "truncated":true. So the line is valid
 *   JSON and complete where it matters, without a second pass.
 * - Redaction marks every byte covered by any occurrence of any secret and replaces each run of
 *   covered bytes with one "[REDACTED]". That makes the order of secrets irrelevant for the
 *   result: a secret that contains another, or two that overlap, leave no byte of either behind
 *   (replacing one secret after another could leave the tail of an overlapping one). The table
 *   is kept longest first so the scan can stop at the first match at each position.
 * - A failed allocation must not crash the caller and must never let unredacted text out: if
 *   the line buffer or a redacted copy cannot be allocated, a fixed line built on the stack says
 *   a line was lost. The rate limiter fails open instead (an untracked key's line is written),
 *   because hiding errors is worse than repeating them.
 * - Level, format and fd are atomics so kp_log_enabled() costs one relaxed load. The scope is a
 *   thread-local pointer: a reconcile sets it once and every line below it, in any module,
 *   carries the object's keys without being handed them.
 *
 * Threads: any thread may log. kp_log_lock guards the redaction table, the hook pointer and the
 * rate-limiter table; it is held only for table lookups and the redacted copies (memory, no I/O)
 * and never across the hook or write(2). kp_log_write_lock is a second lock held across the
 * write(2) loop of one line and nothing else. It is there because a write of more than PIPE_BUF
 * bytes to a pipe (stderr under a container runtime) is not atomic, and a partial write has to
 * be completed before another thread's line may start; otherwise lines of concurrent threads
 * could interleave and neither would be valid JSON. It serialises loggers only among themselves,
 * and they would wait for the same fd anyway; code that takes kp_log_lock (secrets, the limiter)
 * never waits for it. A child between fork and exec must not log (STYLE.md rule 10 already
 * keeps it to exec and _exit).
 *
 * Invariants: the redaction table holds unique values of at least KP_LOG_REDACT_MIN bytes,
 * sorted by length, longest first, each with a registration count >= 1; its array is freed when
 * it empties (so the allocation torture sees no memory held between cases). The rate-limiter
 * table holds at most KP_LOG_RL_KEYS entries, packed at the front of a static array. */
#include "base/log.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/str.h"
#include "base/time.h"

#define KP_REDACTED "[REDACTED]"
#define KP_REDACTED_LEN (sizeof(KP_REDACTED) - 1)
/* The marker that ends a value cut to fit the line. */
#define KP_LOG_CUT "..."
#define KP_LOG_CUT_LEN (sizeof(KP_LOG_CUT) - 1)
/* Bytes of src (file name), func and the error text that are kept; longer ones are cut. */
#define KP_LOG_META_MAX 128
/* Scratch space for the error/errno/suppressed part of a line: at most two escaped strings of
 * KP_LOG_META_MAX bytes (6 bytes out per byte in) plus keys and numbers. */
#define KP_LOG_SCRATCH 2048
_Static_assert(KP_LOG_SCRATCH >= 2 * (6 * KP_LOG_META_MAX + 2) + 128,
               "scratch too small for the parts of a line that are never cut");
/* Scratch space for commit, scope and caller: each scope string gets KP_LOG_SCOPE_ROOM bytes
 * (names of Kubernetes objects, at most 253 plain bytes, always fit whole). */
#define KP_LOG_SCOPE_ROOM (KP_LOG_SCOPE_MAX + 32)
#define KP_LOG_META_SCRATCH (6 * KP_LOG_SCOPE_ROOM + 2 * (6 * KP_LOG_META_MAX + 2) + 256)
_Static_assert(KP_LOG_MAX_LINE >= KP_LOG_SCRATCH + KP_LOG_META_SCRATCH + 256,
               "a line must leave room for the message after the parts that are never cut");

#ifndef KP_COMMIT
#define KP_COMMIT "unknown"
#endif
/* Karpenter's logger name for its controller process. */
#define KP_LOG_LOGGER "controller"

static atomic_int kp_log_level = KP_LOG_INFO;
static atomic_int kp_log_format = KP_LOG_FORMAT_JSON;
static atomic_int kp_log_fd = -1; /* -1: the format's own */
static atomic_uint_fast64_t kp_log_ndropped;

static const char *const kp_log_level_names[] = {
    [KP_LOG_DEBUG] = "debug", [KP_LOG_INFO] = "info", [KP_LOG_WARN] = "warn",
    [KP_LOG_ERROR] = "error", [KP_LOG_OFF] = "off",
};
/* zap's CapitalLevelEncoder, as Karpenter writes them. */
static const char *const kp_log_level_json[] = {
    [KP_LOG_DEBUG] = "DEBUG", [KP_LOG_INFO] = "INFO", [KP_LOG_WARN] = "WARN",
    [KP_LOG_ERROR] = "ERROR", [KP_LOG_OFF] = "OFF",
};

static _Thread_local const struct kp_log_scope *kp_log_scope_cur;

/* kp_log_lock guards every static below it. */
static pthread_mutex_t kp_log_lock = PTHREAD_MUTEX_INITIALIZER;
/* Held across the write(2) loop of one line only; see DESIGN. */
static pthread_mutex_t kp_log_write_lock = PTHREAD_MUTEX_INITIALIZER;

struct kp_redact_entry {
    char *s;       /* owned copy, NUL-terminated; wiped before it is freed */
    size_t len;    /* >= KP_LOG_REDACT_MIN */
    unsigned refs; /* registrations of this value */
};
static struct kp_redact_entry *kp_redact_v; /* longest first; NULL when empty */
static size_t kp_redact_n, kp_redact_cap;
static kp_log_redact_hook_fn kp_redact_hook;

struct kp_rl_entry {
    char *key;             /* owned copy */
    uint64_t hash;         /* FNV-1a of key, compared before the key */
    uint64_t window_start; /* monotonic usec when the current interval began */
    uint64_t last_used;    /* kp_rl_tick at the last line, for least-recently-used eviction */
    uint64_t dropped;      /* lines dropped and not yet reported */
    unsigned count;        /* lines let through in the current interval */
};
static struct kp_rl_entry kp_rl_v[KP_LOG_RL_KEYS];
static size_t kp_rl_n;
static uint64_t kp_rl_tick;

/* --- configuration ----------------------------------------------------------------------- */

void kp_log_set_level(enum kp_log_level level)
{
    atomic_store_explicit(&kp_log_level, (int)level, memory_order_relaxed);
}

enum kp_log_level kp_log_get_level(void)
{
    return (enum kp_log_level)atomic_load_explicit(&kp_log_level, memory_order_relaxed);
}

int kp_log_parse_level(const char *s, enum kp_log_level *ret)
{
    size_t i;

    if (!s)
        return -EINVAL;
    for (i = 0; i < KP_ARRAY_SIZE(kp_log_level_names); i++)
        if (strcmp(s, kp_log_level_names[i]) == 0) {
            *ret = (enum kp_log_level)i;
            return 0;
        }
    return -EINVAL;
}

void kp_log_set_format(enum kp_log_format format)
{
    atomic_store_explicit(&kp_log_format, (int)format, memory_order_relaxed);
}

void kp_log_set_fd(int fd)
{
    atomic_store_explicit(&kp_log_fd, fd, memory_order_relaxed);
}

void kp_log_scope_set(const struct kp_log_scope *s)
{
    kp_log_scope_cur = s;
}

const struct kp_log_scope *kp_log_scope_get(void)
{
    return kp_log_scope_cur;
}

void kp_log_new_id(char id[KP_LOG_ID_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    static atomic_uint_fast64_t counter;
    unsigned char b[16];
    size_t i, o = 0;

    if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
        uint64_t t = kp_real_usec(), n = atomic_fetch_add(&counter, 1) + 1;

        memcpy(b, &t, 8);
        memcpy(b + 8, &n, 8);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    for (i = 0; i < sizeof(b); i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            id[o++] = '-';
        id[o++] = hex[b[i] >> 4];
        id[o++] = hex[b[i] & 0xf];
    }
    id[o] = '\0';
}

uint64_t kp_log_dropped(void)
{
    return atomic_load_explicit(&kp_log_ndropped, memory_order_relaxed);
}

/* --- redaction ---------------------------------------------------------------------------- */

/* The index of the entry holding the n bytes of s, or kp_redact_n. Lock held. */
static size_t kp_redact_find_locked(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < kp_redact_n; i++)
        if (kp_redact_v[i].len == n && memcmp(kp_redact_v[i].s, s, n) == 0)
            break;
    return i;
}

int kp_log_redact_add(const char *secret)
{
    size_t len = strlen(secret), i;
    char *copy = NULL;
    int r = 0;

    if (len < KP_LOG_REDACT_MIN)
        return 0;

    pthread_mutex_lock(&kp_log_lock);
    i = kp_redact_find_locked(secret, len);
    if (i < kp_redact_n) {
        kp_redact_v[i].refs++;
        goto out;
    }
    /* Copy before growing the array: a failure after the growth would leave nothing to undo. */
    copy = kp_memdup(secret, len + 1);
    if (!copy) {
        r = -ENOMEM;
        goto out;
    }
    {
        struct kp_redact_entry *v =
            kp_grow_array(kp_redact_v, &kp_redact_cap, kp_redact_n, sizeof(*v), 8);

        if (!v) {
            r = -ENOMEM;
            goto out;
        }
        kp_redact_v = v;
    }
    for (i = 0; i < kp_redact_n && kp_redact_v[i].len >= len; i++)
        ;
    memmove(&kp_redact_v[i + 1], &kp_redact_v[i], (kp_redact_n - i) * sizeof(*kp_redact_v));
    kp_redact_v[i] = (struct kp_redact_entry){.s = copy, .len = len, .refs = 1};
    kp_redact_n++;
    copy = NULL; /* the table owns it now */
out:
    pthread_mutex_unlock(&kp_log_lock);
    if (copy) {
        kp_wipe(copy, len);
        kp_free(copy);
    }
    return r;
}

/* Wipes and frees entry i and closes the gap. Lock held. */
static void kp_redact_drop_locked(size_t i)
{
    kp_wipe(kp_redact_v[i].s, kp_redact_v[i].len);
    kp_free(kp_redact_v[i].s);
    memmove(&kp_redact_v[i], &kp_redact_v[i + 1], (kp_redact_n - i - 1) * sizeof(*kp_redact_v));
    kp_redact_n--;
    if (kp_redact_n == 0) {
        kp_free(kp_redact_v);
        kp_redact_v = NULL;
        kp_redact_cap = 0;
    }
}

void kp_log_redact_remove(const char *secret)
{
    size_t len = strlen(secret), i;

    if (len < KP_LOG_REDACT_MIN)
        return;
    pthread_mutex_lock(&kp_log_lock);
    i = kp_redact_find_locked(secret, len);
    if (i < kp_redact_n && --kp_redact_v[i].refs == 0)
        kp_redact_drop_locked(i);
    pthread_mutex_unlock(&kp_log_lock);
}

void kp_log_redact_clear(void)
{
    pthread_mutex_lock(&kp_log_lock);
    for (size_t i = 0; i < kp_redact_n; i++) {
        kp_wipe(kp_redact_v[i].s, kp_redact_v[i].len);
        kp_free(kp_redact_v[i].s);
    }
    kp_free(kp_redact_v);
    kp_redact_v = NULL;
    kp_redact_n = 0;
    kp_redact_cap = 0;
    pthread_mutex_unlock(&kp_log_lock);
}

void kp_log_set_redact_hook(kp_log_redact_hook_fn hook)
{
    pthread_mutex_lock(&kp_log_lock);
    kp_redact_hook = hook;
    pthread_mutex_unlock(&kp_log_lock);
}

/* Redacts the n bytes at s into out (when not NULL) and returns the length of the result
 * (without a terminator). Each maximal run of bytes covered by occurrences of secrets becomes
 * one KP_REDACTED. Lock held. */
static size_t kp_redact_run_locked(const char *s, size_t n, char *out)
{
    size_t i, j, o = 0, run_end = 0;
    bool in_run = false;

    for (i = 0; i < n; i++) {
        for (j = 0; j < kp_redact_n; j++) {
            const struct kp_redact_entry *e = &kp_redact_v[j];

            if (e->len <= n - i && s[i] == e->s[0] && memcmp(s + i, e->s, e->len) == 0) {
                /* Longest first: no shorter secret starting here reaches further. */
                run_end = KP_MAX(run_end, i + e->len);
                break;
            }
        }
        if (i < run_end) {
            in_run = true;
            continue;
        }
        if (in_run) {
            if (out)
                memcpy(out + o, KP_REDACTED, KP_REDACTED_LEN);
            o += KP_REDACTED_LEN;
            in_run = false;
        }
        if (out)
            out[o] = s[i];
        o++;
    }
    if (in_run) {
        if (out)
            memcpy(out + o, KP_REDACTED, KP_REDACTED_LEN);
        o += KP_REDACTED_LEN;
    }
    return o;
}

/* Redacts s. *ret_copy receives a new string, or NULL when neither a secret nor the hook could
 * change s (then s itself is the result). 0 or -ENOMEM. */
static int kp_redact(const char *s, char **ret_copy)
{
    kp_log_redact_hook_fn hook;
    size_t n = strlen(s), len = 0;
    char *copy = NULL;
    int r = 0;

    pthread_mutex_lock(&kp_log_lock);
    hook = kp_redact_hook;
    if (kp_redact_n == 0 && !hook)
        goto out;
    /* The result of a run is at most n * 10 / 8 + 10 bytes, far from overflowing size_t for
     * any string that exists in memory. */
    len = kp_redact_run_locked(s, n, NULL);
    copy = kp_malloc(len + 1);
    if (!copy) {
        r = -ENOMEM;
        goto out;
    }
    (void)kp_redact_run_locked(s, n, copy);
    copy[len] = '\0';
out:
    pthread_mutex_unlock(&kp_log_lock);
    if (r < 0)
        return r;
    /* Outside the lock: the hook is someone else's code (STYLE.md rule 9). */
    if (copy && hook)
        hook(copy, len);
    *ret_copy = copy;
    return 0;
}

char *kp_log_redact_dup(const char *s)
{
    char *copy = NULL;

    if (kp_redact(s, &copy) < 0)
        return NULL;
    return copy ? copy : kp_strdup(s);
}

/* --- rate limiter ------------------------------------------------------------------------- */

static uint64_t kp_fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* The rate-limiter slot for key, taking over the oldest slot when the table is full; NULL
 * when the key cannot be copied. Lock held. */
static struct kp_rl_entry *kp_rl_slot(const char *key, uint64_t h, uint64_t now)
{
    struct kp_rl_entry *e;
    char *copy;
    size_t i;

    for (i = 0; i < kp_rl_n; i++)
        if (kp_rl_v[i].hash == h && strcmp(kp_rl_v[i].key, key) == 0)
            return &kp_rl_v[i];
    copy = kp_strdup(key);
    if (!copy)
        return NULL;
    if (kp_rl_n < KP_LOG_RL_KEYS) {
        e = &kp_rl_v[kp_rl_n++];
    } else {
        e = &kp_rl_v[0];
        for (i = 1; i < kp_rl_n; i++)
            if (kp_rl_v[i].last_used < e->last_used)
                e = &kp_rl_v[i];
        kp_free(e->key);
    }
    *e = (struct kp_rl_entry){.key = copy, .hash = h, .window_start = now};
    return e;
}

/* True when a line under key may be written; then *ret_suppressed holds the drops to report. */
static bool kp_rl_pass(const char *key, uint64_t *ret_suppressed)
{
    uint64_t h = kp_fnv1a(key), now;
    struct kp_rl_entry *e;
    bool pass = true;

    pthread_mutex_lock(&kp_log_lock);
    /* Read under the lock so that window starts only move forward. */
    now = kp_mono_usec();
    e = kp_rl_slot(key, h, now);
    if (!e) {
        *ret_suppressed = 0; /* fail open: see log.h */
        goto out;
    }
    e->last_used = ++kp_rl_tick;
    if (now - e->window_start >= KP_LOG_RL_INTERVAL_USEC) {
        e->window_start = now;
        e->count = 0;
    }
    if (e->count >= KP_LOG_RL_BURST) {
        e->dropped++;
        atomic_fetch_add_explicit(&kp_log_ndropped, 1, memory_order_relaxed);
        pass = false;
        goto out;
    }
    e->count++;
    *ret_suppressed = e->dropped;
    e->dropped = 0;
out:
    pthread_mutex_unlock(&kp_log_lock);
    return pass;
}

void kp_log_ratelimit_reset(void)
{
    size_t i;

    pthread_mutex_lock(&kp_log_lock);
    for (i = 0; i < kp_rl_n; i++)
        kp_free(kp_rl_v[i].key);
    memset(kp_rl_v, 0, sizeof(kp_rl_v));
    kp_rl_n = 0;
    pthread_mutex_unlock(&kp_log_lock);
}

void kp_log_ratelimit_expire(void)
{
    uint64_t now;
    size_t i;

    pthread_mutex_lock(&kp_log_lock);
    now = kp_mono_usec();
    for (i = 0; i < kp_rl_n; i++) {
        kp_rl_v[i].window_start = now;
        kp_rl_v[i].count = 0;
    }
    pthread_mutex_unlock(&kp_log_lock);
}

/* --- line building ------------------------------------------------------------------------ */

enum kp_esc {
    KP_ESC_JSON, /* inside a JSON string: also '"' and '\' */
    KP_ESC_BARE, /* text format outside quotes: control characters and bad UTF-8 only */
};

/* A line under construction in p[0..len); bytes from end on are reserved for later parts. */
struct kp_line {
    char *p;
    size_t len;
    size_t end;
    bool cut; /* a value was shortened or a field left out */
};

/* The escaped form of the character at s (n > 0 bytes left) in out; returns its length and sets
 * *ret_used to the input bytes it stands for. */
static size_t kp_esc_unit(const unsigned char *s, size_t n, enum kp_esc mode, char out[6],
                          size_t *ret_used)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = s[0];
    size_t u;

    *ret_used = 1;
    if (c < 0x20 || c == 0x7f) {
        memcpy(out, "\\u00", 4);
        out[4] = hex[c >> 4];
        out[5] = hex[c & 0xf];
        return 6;
    }
    if (mode == KP_ESC_JSON && (c == '"' || c == '\\')) {
        out[0] = '\\';
        out[1] = (char)c;
        return 2;
    }
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    u = kp_utf8_len(s, n);
    if (u == 0) {
        memcpy(out, "\xef\xbf\xbd", 3); /* U+FFFD REPLACEMENT CHARACTER */
        return 3;
    }
    memcpy(out, s, u);
    *ret_used = u;
    return u;
}

/* Appends n bytes if they fit before l->end; false (line unchanged) otherwise. */
static bool kp_line_put(struct kp_line *l, const char *s, size_t n)
{
    if (n > l->end - l->len)
        return false;
    memcpy(l->p + l->len, s, n);
    l->len += n;
    return true;
}

static bool kp_line_puts(struct kp_line *l, const char *s)
{
    return kp_line_put(l, s, strlen(s));
}

/* Appends the n bytes of s escaped, in double quotes when quote. When the whole does not fit
 * and may_cut, appends the longest prefix of whole characters that leaves room for KP_LOG_CUT
 * (and the closing quote), then KP_LOG_CUT, and sets l->cut. False (line unchanged) when
 * nothing acceptable fits. */
static bool kp_line_str(struct kp_line *l, const char *s, size_t n, enum kp_esc mode, bool quote,
                        bool may_cut)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t start = l->len, close = quote ? 1 : 0, cut_at = SIZE_MAX, i = 0;

    if (quote && !kp_line_put(l, "\"", 1))
        return false;
    if (may_cut && l->end - l->len >= KP_LOG_CUT_LEN + close)
        cut_at = l->len;
    while (i < n) {
        char unit[6];
        size_t used, w = kp_esc_unit(u + i, n - i, mode, unit, &used);

        if (w + close > l->end - l->len) {
            if (cut_at == SIZE_MAX) {
                l->len = start;
                return false;
            }
            l->len = cut_at;
            (void)kp_line_put(l, KP_LOG_CUT, KP_LOG_CUT_LEN); /* room was kept for it */
            l->cut = true;
            break;
        }
        memcpy(l->p + l->len, unit, w);
        l->len += w;
        i += used;
        if (may_cut && l->end - l->len >= KP_LOG_CUT_LEN + close)
            cut_at = l->len;
    }
    if (quote)
        (void)kp_line_put(l, "\"", 1); /* room was kept for it */
    return true;
}

/* True when a text-format value must be quoted to read back unambiguously. */
static bool kp_text_needs_quotes(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, len;

    if (n == 0)
        return true;
    while (i < n) {
        if (u[i] <= ' ' || u[i] == 0x7f || u[i] == '"' || u[i] == '\\' || u[i] == '=')
            return true;
        len = kp_utf8_len(u + i, n - i);
        if (len == 0)
            return true;
        i += len;
    }
    return false;
}

/* Appends a string value in the line's format; see kp_line_str. */
static bool kp_line_value(struct kp_line *l, bool json, const char *s, bool may_cut)
{
    size_t n = strlen(s);

    if (json || kp_text_needs_quotes(s, n))
        return kp_line_str(l, s, n, KP_ESC_JSON, /* quote= */ true, may_cut);
    return kp_line_str(l, s, n, KP_ESC_BARE, /* quote= */ false, may_cut);
}

/* Appends ,"key": (JSON) or " key=" (text); false (line unchanged) when it does not fit. */
static bool kp_line_key(struct kp_line *l, bool json, const char *key)
{
    size_t start = l->len;
    bool ok;

    if (json)
        ok = kp_line_put(l, ",", 1) &&
             kp_line_str(l, key, strlen(key), KP_ESC_JSON, /* quote= */ true, false) &&
             kp_line_put(l, ":", 1);
    else
        ok = kp_line_put(l, " ", 1) &&
             kp_line_str(l, key, strlen(key), KP_ESC_BARE, /* quote= */ false, false) &&
             kp_line_put(l, "=", 1);
    if (!ok)
        l->len = start;
    return ok;
}

/* Formats a double as a JSON number that reads back to the same value: the shortest of %.15g
 * and %.17g that round-trips. NaN and infinities have no JSON form and become null. Assumes the
 * "C" locale for the decimal point; kpssh never calls setlocale(). */
static void kp_fmt_double(double d, char *buf, size_t size)
{
    if (!isfinite(d)) {
        (void)snprintf(buf, size, "null");
        return;
    }
    (void)snprintf(buf, size, "%.15g", d);
    if (strtod(buf, NULL) != d)
        (void)snprintf(buf, size, "%.17g", d);
}

/* The text of a non-string field value (or of a NULL string: null) in buf. */
static void kp_fmt_scalar(const struct kp_log_field *f, char *buf, size_t size)
{
    switch (f->type) {
    case KP_LOG_FIELD_I64:
        (void)snprintf(buf, size, "%" PRId64, f->v.i);
        break;
    case KP_LOG_FIELD_U64:
        (void)snprintf(buf, size, "%" PRIu64, f->v.u);
        break;
    case KP_LOG_FIELD_BOOL:
        (void)snprintf(buf, size, "%s", f->v.b ? "true" : "false");
        break;
    case KP_LOG_FIELD_DOUBLE:
        kp_fmt_double(f->v.d, buf, size);
        break;
    case KP_LOG_FIELD_STR:
    case KP_LOG_FIELD_END:
    default:
        (void)snprintf(buf, size, "null");
        break;
    }
}

/* Appends one field, or leaves the line unchanged and sets l->cut when it does not fit: 0.
 * -ENOMEM when the string value could not be redacted (line unchanged). */
static int kp_line_field(struct kp_line *l, bool json, const struct kp_log_field *f)
{
    size_t start = l->len;
    char *red = NULL;
    char num[64];
    bool ok;
    int r;

    if (!kp_line_key(l, json, f->key)) {
        ok = false;
    } else if (f->type == KP_LOG_FIELD_STR && f->v.s) {
        r = kp_redact(f->v.s, &red);
        if (r < 0) {
            l->len = start;
            return r;
        }
        ok = kp_line_value(l, json, red ? red : f->v.s, /* may_cut= */ true);
    } else {
        kp_fmt_scalar(f, num, sizeof(num));
        ok = kp_line_puts(l, num);
    }
    kp_free(red);
    if (!ok) {
        l->len = start;
        l->cut = true;
    }
    return 0;
}

/* The keys a scope writes, in upstream's order; kp_scope_value() gives their values. */
static const char *const kp_scope_keys[] = {
    "controller", "controllerGroup", "controllerKind", "namespace", "name", "reconcileID"};

static const char *kp_scope_value(const struct kp_log_scope *s, size_t i)
{
    switch (i) {
    case 0:
        return s->controller;
    case 1:
        return s->group;
    case 2:
        return s->kind;
    case 3:
        return s->ns;
    case 4:
        return s->name;
    default:
        return s->reconcile_id[0] ? s->reconcile_id : NULL;
    }
}

/* True when the scope writes key (so a field of that name is left out). */
static bool kp_scope_has(const struct kp_log_scope *s, const char *key)
{
    for (size_t i = 0; s && i < KP_ARRAY_SIZE(kp_scope_keys); i++)
        if (kp_scope_value(s, i) && strcmp(key, kp_scope_keys[i]) == 0)
            return true;
    return false;
}

/* ,"commit":"...",<scope>,"caller":"file.c:12" into l (JSON only). Cannot fail: see
 * KP_LOG_META_SCRATCH; a scope value is redacted like any string and cut to its room. */
static int kp_line_meta(struct kp_line *l, const struct kp_log_scope *scope, const char *file,
                        int line)
{
    const char *base = file ? strrchr(file, '/') : NULL;
    char num[16];

    base = base ? base + 1 : (file ? file : "?");
    (void)kp_line_puts(l, ",\"commit\":");
    (void)kp_line_str(l, KP_COMMIT, strnlen(KP_COMMIT, KP_LOG_META_MAX), KP_ESC_JSON, true, false);
    for (size_t i = 0; scope && i < KP_ARRAY_SIZE(kp_scope_keys); i++) {
        const char *v = kp_scope_value(scope, i);
        size_t end = l->end;
        char *red = NULL;
        int r;

        if (!v)
            continue;
        if ((r = kp_redact(v, &red)) < 0)
            return r;
        v = red ? red : v;
        (void)kp_line_key(l, true, kp_scope_keys[i]);
        l->end = KP_MIN(end, l->len + KP_LOG_SCOPE_ROOM - 32);
        (void)kp_line_str(l, v, strnlen(v, KP_LOG_SCOPE_MAX), KP_ESC_JSON, true, true);
        l->end = end;
        kp_free(red);
    }
    (void)snprintf(num, sizeof(num), ":%d\"", line);
    (void)kp_line_puts(l, ",\"caller\":\"");
    (void)kp_line_str(l, base, strnlen(base, KP_LOG_META_MAX), KP_ESC_JSON, false, false);
    (void)kp_line_puts(l, num);
    return 0;
}

/* The error, errno and suppressed parts into l. Cannot fail: see KP_LOG_SCRATCH. */
static void kp_line_tail(struct kp_line *l, bool json, int err, uint64_t suppressed)
{
    char num[64];

    if (err != 0) {
        const char *text = kp_strerror(err);

        (void)kp_line_key(l, json, "error");
        (void)kp_line_str(l, text, strnlen(text, KP_LOG_META_MAX), KP_ESC_JSON, true, false);
        if (json) {
            (void)snprintf(num, sizeof(num), ",\"errno\":%d", err);
            (void)kp_line_puts(l, num);
        }
    }
    if (suppressed > 0) {
        (void)kp_line_key(l, json, "suppressed");
        (void)snprintf(num, sizeof(num), "%" PRIu64, suppressed);
        (void)kp_line_puts(l, num);
    }
}

/* Writes all n bytes, resuming after signals and partial writes. Errors are dropped: there is
 * nowhere left to report them. */
static void kp_log_write(int fd, const char *p, size_t n)
{
    if (fd < 0)
        return;
    pthread_mutex_lock(&kp_log_write_lock);
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        n -= (size_t)w;
    }
    pthread_mutex_unlock(&kp_log_write_lock);
}

/* Appends s to buf[*n] within size (for the allocation-free lost line). */
static void kp_cat(char *buf, size_t *n, size_t size, const char *s)
{
    size_t len = strlen(s);

    if (len < size - *n) {
        memcpy(buf + *n, s, len);
        *n += len;
    }
}

/* The time as zap's ISO 8601 encoder writes it in UTC: RFC 3339 with milliseconds. */
static void kp_log_time(char ts[KP_RFC3339_MAX])
{
    if (kp_time_format_rfc3339(kp_real_usec(), ts, KP_RFC3339_MAX) < 0)
        memcpy(ts, "1970-01-01T00:00:00.000000Z", KP_RFC3339_MAX);
    /* "2006-01-02T15:04:05.123456Z" -> "2006-01-02T15:04:05.123Z" */
    memcpy(ts + 23, "Z", 2);
}

/* The fixed line written when a line could not be built; allocates nothing. */
static void kp_log_write_lost(int fd, bool json, enum kp_log_level level)
{
    char buf[256], ts[KP_RFC3339_MAX];
    size_t n = 0;

    if (json) {
        kp_log_time(ts);
        kp_cat(buf, &n, sizeof(buf), "{\"level\":\"");
        kp_cat(buf, &n, sizeof(buf), kp_log_level_json[level]);
        kp_cat(buf, &n, sizeof(buf), "\",\"time\":\"");
        kp_cat(buf, &n, sizeof(buf), ts);
        kp_cat(buf, &n, sizeof(buf),
               "\",\"logger\":\"" KP_LOG_LOGGER "\",\"message\":\"log line lost: "
               "out of memory\",\"commit\":\"" KP_COMMIT "\"}\n");
    } else {
        kp_cat(buf, &n, sizeof(buf), kp_log_level_names[level]);
        kp_cat(buf, &n, sizeof(buf), ": log line lost: out of memory\n");
    }
    kp_log_write(fd, buf, n);
}

int kp_log_emit(enum kp_log_level level, int err, const char *file, int line, const char *func,
                const char *ratelimit_key, const char *msg, const struct kp_log_field *fields)
{
    int saved_errno = errno, fd = atomic_load_explicit(&kp_log_fd, memory_order_relaxed);
    bool json = atomic_load_explicit(&kp_log_format, memory_order_relaxed) == KP_LOG_FORMAT_JSON;
    const struct kp_log_scope *scope = json ? kp_log_scope_cur : NULL;
    const char *trunc = json ? ",\"truncated\":true" : " truncated=true";
    const char *end = json ? "}\n" : "\n";
    char meta_buf[KP_LOG_META_SCRATCH], tail_buf[KP_LOG_SCRATCH], ts[KP_RFC3339_MAX];
    struct kp_line meta = {.p = meta_buf, .len = 0, .end = sizeof(meta_buf), .cut = false};
    struct kp_line tail = {.p = tail_buf, .len = 0, .end = sizeof(tail_buf), .cut = false};
    struct kp_line l = {.p = NULL, .len = 0, .end = 0, .cut = false};
    const struct kp_log_field *f;
    const char *lvl, *m;
    uint64_t suppressed = 0;
    char *red = NULL;
    bool lost = false;
    int r;

    if (fd < 0)
        fd = json ? STDOUT_FILENO : STDERR_FILENO;
    /* The level index is checked as unsigned so a stray negative value is rejected too. */
    if ((unsigned)level >= KP_LOG_OFF || !kp_log_enabled(level))
        goto out;
    lvl = json ? kp_log_level_json[level] : kp_log_level_names[level];
    if (ratelimit_key && !kp_rl_pass(ratelimit_key, &suppressed))
        goto out;

    l.p = kp_malloc(KP_LOG_MAX_LINE);
    if (!l.p) {
        lost = true;
        goto out;
    }
    (void)func; /* upstream writes no function key */
    if (json && kp_line_meta(&meta, scope, file, line) < 0) {
        lost = true; /* a scope value that could not be redacted */
        goto out;
    }
    kp_line_tail(&tail, json, err, suppressed);
    l.end = KP_LOG_MAX_LINE - meta.len - tail.len - strlen(trunc) - strlen(end);

    if (json) {
        kp_log_time(ts);
        (void)kp_line_puts(&l, "{\"level\":\"");
        (void)kp_line_puts(&l, lvl);
        (void)kp_line_puts(&l, "\",\"time\":\"");
        (void)kp_line_puts(&l, ts);
        (void)kp_line_puts(&l, "\",\"logger\":\"" KP_LOG_LOGGER "\",\"message\":");
    } else {
        (void)kp_line_puts(&l, lvl);
        (void)kp_line_puts(&l, ": ");
    }
    if (msg) {
        r = kp_redact(msg, &red);
        if (r < 0) {
            lost = true; /* never write what could not be redacted */
            goto out;
        }
        m = red ? red : msg;
        /* KP_LOG_MAX_LINE leaves room for at least the cut marker (static asserts above). */
        (void)kp_line_str(&l, m, strlen(m), json ? KP_ESC_JSON : KP_ESC_BARE, /* quote= */ json,
                          /* may_cut= */ true);
    } else {
        (void)kp_line_puts(&l, json ? "null" : "(null)");
    }

    l.end += meta.len;
    (void)kp_line_put(&l, meta.p, meta.len);
    for (f = fields; f && f->type != KP_LOG_FIELD_END && !l.cut; f++) {
        if (!f->key || kp_scope_has(scope, f->key))
            continue;
        r = kp_line_field(&l, json, f);
        if (r < 0) {
            lost = true;
            goto out;
        }
    }
    l.end = KP_LOG_MAX_LINE;
    (void)kp_line_put(&l, tail.p, tail.len);
    if (l.cut)
        (void)kp_line_puts(&l, trunc);
    (void)kp_line_puts(&l, end);
    kp_log_write(fd, l.p, l.len);
out:
    if (lost)
        kp_log_write_lost(fd, json, level);
    kp_free(red);
    kp_free(l.p);
    errno = saved_errno;
    return err;
}
