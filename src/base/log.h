/* base/log.h: structured logging, one JSON object per line, in the keys Karpenter writes.
 *
 *   kp_log_info("host claimed", KP_LF("host", name), KP_LF("attempt", n));
 *   return kp_log_error_errno(r, "claim failed", KP_LF("host", name));
 *   {"level":"ERROR","time":"2026-11-30T09:00:00.123Z","logger":"controller",
 *    "message":"claim failed","commit":"25b688a","controller":"sshhost",
 *    "controllerGroup":"karpenter.kpssh.dev","controllerKind":"SSHHost","namespace":"pool",
 *    "name":"h7","reconcileID":"0f5c…","caller":"claim.c:88","host":"h7",
 *    "error":"conflict: ...","errno":-4098}
 *
 * The first keys are those of Karpenter's zap configuration (level in capitals, time as
 * RFC 3339 UTC with milliseconds, logger, message, commit) and of controller-runtime's
 * reconcile logger (controller, controllerGroup, controllerKind, namespace, name, reconcileID),
 * so log queries written for upstream work here. The controller keys appear while the thread
 * runs inside a scope (kp_log_scope_set(): the reconciler sets one around each reconcile).
 * commit is the build's git commit (KP_COMMIT, "unknown" outside a git checkout).
 *
 * The macros evaluate neither the message nor the fields when the level is filtered out.
 * Every string value (message included) passes through the redaction step before it is written:
 * each registered secret (kp_log_redact_add) is replaced by "[REDACTED]", longest first (every
 * byte covered by any occurrence of any secret is removed; overlapping or adjacent occurrences
 * become one "[REDACTED]"), and an optional hook may scrub further. Strings are escaped so every
 * line is valid JSON: '"' and '\' by backslash, control characters and DEL as \u00XX, bytes that
 * are not valid UTF-8 as U+FFFD. Doubles that are NaN or infinite are written as null.
 * Lines are written with one write(2) each (a partial write is completed under a lock, so lines
 * of concurrent threads never interleave) and are capped at KP_LOG_MAX_LINE bytes including the
 * newline: long values are cut at a character boundary and end in "...", fields that no longer
 * fit are left out, and the line then carries "truncated":true; it stays valid JSON, and
 * commit, the scope's keys, caller, error, errno and suppressed are always kept (a scope value
 * longer than KP_LOG_SCOPE_MAX bytes is cut). A field whose key is one the scope writes is left
 * out, so every key appears once.
 * If a line cannot be built for lack of memory, a fixed line saying a log line was lost is
 * written instead (never the unredacted text). Logging preserves errno.
 * Any thread may log; configuration calls belong to start-up (main thread) or tests.
 * The process must ignore SIGPIPE if the log fd may be a pipe whose reader can go away. */
#ifndef KP_BASE_LOG_H
#define KP_BASE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

#define KP_LOG_MAX_LINE (16 * 1024)
/* Secrets shorter than this are not registered for redaction (too likely to match by chance);
 * the same rule applies to join-secret values throughout kpssh. */
#define KP_LOG_REDACT_MIN 8

enum kp_log_level {
    KP_LOG_DEBUG = 0,
    KP_LOG_INFO,
    KP_LOG_WARN,
    KP_LOG_ERROR,
    KP_LOG_OFF,
};

enum kp_log_format {
    KP_LOG_FORMAT_JSON = 0, /* controller: one JSON object per line, on stdout */
    KP_LOG_FORMAT_TEXT,     /* terminals: "level: msg key=value ... error=\"...\"" on stderr
                             * (level in lower case; no time, logger, commit, scope, caller or
                             * errno); a value is quoted and escaped as in JSON when it
                             * is empty or holds a space, '"', '\\', '=' or a control character;
                             * msg is never quoted but its control characters are escaped. */
};

enum kp_log_field_type {
    KP_LOG_FIELD_END = 0,
    KP_LOG_FIELD_STR,
    KP_LOG_FIELD_I64,
    KP_LOG_FIELD_U64,
    KP_LOG_FIELD_BOOL,
    KP_LOG_FIELD_DOUBLE,
};

struct kp_log_field {
    const char *key; /* stable snake_case */
    enum kp_log_field_type type;
    union {
        const char *s; /* NULL is written as null */
        int64_t i;
        uint64_t u;
        bool b;
        double d;
    } v;
};

/* Field constructors; KP_LF picks one by the value's type. The literals true and false are
 * ints in C11 (<stdbool.h> defines them as 1 and 0), so KP_LF("ready", true) writes 1: use a
 * variable of type bool or kp_lf_bool(). NULL has no string type: use
 * kp_lf_str() for a string that may be NULL. */
static inline struct kp_log_field kp_lf_str(const char *k, const char *v)
{
    return (struct kp_log_field){.key = k, .type = KP_LOG_FIELD_STR, .v.s = v};
}
static inline struct kp_log_field kp_lf_i64(const char *k, int64_t v)
{
    return (struct kp_log_field){.key = k, .type = KP_LOG_FIELD_I64, .v.i = v};
}
static inline struct kp_log_field kp_lf_u64(const char *k, uint64_t v)
{
    return (struct kp_log_field){.key = k, .type = KP_LOG_FIELD_U64, .v.u = v};
}
static inline struct kp_log_field kp_lf_bool(const char *k, bool v)
{
    return (struct kp_log_field){.key = k, .type = KP_LOG_FIELD_BOOL, .v.b = v};
}
static inline struct kp_log_field kp_lf_double(const char *k, double v)
{
    return (struct kp_log_field){.key = k, .type = KP_LOG_FIELD_DOUBLE, .v.d = v};
}

#if defined(__CPPCHECK__)
/* cppcheck cannot parse _Generic; give it a call of the same shape. */
#define KP_LF(k, v) kp_lf_i64((k), (int64_t)sizeof(v))
#else
#define KP_LF(k, v)                                                                                \
    _Generic((v),                                                                                \
        char *: kp_lf_str,                                                                       \
        const char *: kp_lf_str,                                                                 \
        bool: kp_lf_bool,                                                                        \
        signed char: kp_lf_i64,                                                                  \
        short: kp_lf_i64,                                                                        \
        unsigned char: kp_lf_u64,                                                                \
        unsigned short: kp_lf_u64,                                                               \
        int: kp_lf_i64,                                                                          \
        long: kp_lf_i64,                                                                         \
        long long: kp_lf_i64,                                                                    \
        unsigned: kp_lf_u64,                                                                     \
        unsigned long: kp_lf_u64,                                                                \
        unsigned long long: kp_lf_u64,                                                           \
        float: kp_lf_double,                                                                     \
        double: kp_lf_double)(k, v)
#endif
#define KP_LF_END ((struct kp_log_field){.key = NULL, .type = KP_LOG_FIELD_END})

/* Configuration (start-up or tests). Default: INFO, JSON, and the format's own fd: stdout (1)
 * for JSON, as upstream writes it, stderr (2) for text. */
void kp_log_set_level(enum kp_log_level level);
enum kp_log_level kp_log_get_level(void);
/* Parses "debug", "info", "warn", "error", "off". 0 or -EINVAL. */
int kp_log_parse_level(const char *s, enum kp_log_level *ret) KP_WUR;
void kp_log_set_format(enum kp_log_format format);
/* Lines go to fd (not owned) whatever the format; -1 goes back to the format's own fd. */
void kp_log_set_fd(int fd);

/* The object a thread is working on, written into each of its lines (JSON only) as
 * controller-runtime does for a reconcile. Any member may be NULL (then the key is left out);
 * ns (namespace) is "" for a cluster-scoped object, as upstream writes it. */
#define KP_LOG_ID_SIZE sizeof("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx")
#define KP_LOG_SCOPE_MAX 256
struct kp_log_scope {
    const char *controller; /* "sshhost" */
    const char *group;      /* controllerGroup: "karpenter.kpssh.dev" ("" for the core group) */
    const char *kind;       /* controllerKind: "SSHHost" */
    const char *ns;         /* namespace */
    const char *name;
    char reconcile_id[KP_LOG_ID_SIZE]; /* "" leaves reconcileID out */
};
/* Makes *s the calling thread's scope until the next call (NULL: none). The pointer is kept,
 * not the strings: *s and its strings must stay valid until the scope is cleared. */
void kp_log_scope_set(const struct kp_log_scope *s);
const struct kp_log_scope *kp_log_scope_get(void);
/* A fresh random UUID (version 4) in id, for reconcile_id. Cannot fail: without getrandom(2)
 * it falls back to the clock and a counter (still unique within the process). */
void kp_log_new_id(char id[KP_LOG_ID_SIZE]);

/* Registers a secret value so it is never written: every occurrence in any logged string is
 * replaced by "[REDACTED]". Values shorter than KP_LOG_REDACT_MIN are ignored (returns 0).
 * The value is copied; kp_log_redact_remove() forgets (and wipes) the copy. Registrations are
 * counted: a value added twice (two secrets that happen to be equal) stays registered until it
 * has been removed twice. Removing a value that is not registered does nothing. 0 or -ENOMEM.
 * Any thread. */
int kp_log_redact_add(const char *secret) KP_WUR KP_NONNULL(1);
void kp_log_redact_remove(const char *secret) KP_NONNULL(1);
/* Forgets every registered secret (tests, shutdown). */
void kp_log_redact_clear(void);

/* An extra scrubber run on every string after the registered secrets (log lines and
 * kp_log_redact_dup): it may rewrite s in place (never lengthening it; it may shorten it by
 * writing a NUL). It is called without any lock held, from whichever thread logs, so it must be
 * thread-safe. NULL removes it. For modules with patterns rather than values. */
typedef void (*kp_log_redact_hook_fn)(char *s, size_t len);
void kp_log_set_redact_hook(kp_log_redact_hook_fn hook);

/* Copies s into a new string with every registered secret replaced (and the hook applied), for
 * text that leaves the process by other ways than the log (events, conditions, error texts).
 * The caller frees it with kp_free(). NULL on -ENOMEM. Any thread. */
char *kp_log_redact_dup(const char *s) KP_WUR KP_NONNULL(1);

static inline bool kp_log_enabled(enum kp_log_level level)
{
    return level >= kp_log_get_level();
}

/* Writes one line. fields ends with KP_LF_END. Returns err (so callers can `return` it).
 * err != 0 adds "error" and "errno" after the fields. Use the macros below rather than calling
 * this directly. */
int kp_log_emit(enum kp_log_level level, int err, const char *file, int line, const char *func,
                const char *ratelimit_key, const char *msg, const struct kp_log_field *fields);

#if defined(__CPPCHECK__)
/* cppcheck cannot parse the field array's compound literal inside a conditional. */
#define KP__LOG(level, err, rlkey, msg, ...)                                                       \
    kp_log_emit((level), (err), __FILE__, __LINE__, __func__, (rlkey), (msg), NULL)
#else
#define KP__LOG(level, err, rlkey, msg, ...)                                                       \
    (kp_log_enabled(level) ? kp_log_emit((level), (err), __FILE__, __LINE__, __func__, (rlkey),    \
                                         (msg), (const struct kp_log_field[]){__VA_ARGS__})        \
                           : (err))
#endif

#define kp_log_debug(...) ((void)KP__LOG(KP_LOG_DEBUG, 0, NULL, __VA_ARGS__, KP_LF_END))
#define kp_log_info(...) ((void)KP__LOG(KP_LOG_INFO, 0, NULL, __VA_ARGS__, KP_LF_END))
#define kp_log_warn(...) ((void)KP__LOG(KP_LOG_WARN, 0, NULL, __VA_ARGS__, KP_LF_END))
#define kp_log_error(...) ((void)KP__LOG(KP_LOG_ERROR, 0, NULL, __VA_ARGS__, KP_LF_END))
/* These add "error" (kp_strerror(r)) and "errno" (r) and return r. */
#define kp_log_warn_errno(r, ...) KP__LOG(KP_LOG_WARN, (r), NULL, __VA_ARGS__, KP_LF_END)
#define kp_log_error_errno(r, ...) KP__LOG(KP_LOG_ERROR, (r), NULL, __VA_ARGS__, KP_LF_END)

/* Rate-limited variants: at most KP_LOG_RL_BURST lines per key per KP_LOG_RL_INTERVAL_USEC;
 * the first line let through after a drop carries "suppressed": <count dropped> (last, after
 * error and errno). The key names the repeating thing, e.g. "probe-fail/h7". At most
 * KP_LOG_RL_KEYS keys are tracked; the least recently used is forgotten first (with its count of
 * drops not yet reported). If a new key cannot be tracked for lack of memory, its line is let
 * through: the limiter fails open rather than hiding errors. */
#define KP_LOG_RL_BURST 5
#define KP_LOG_RL_INTERVAL_USEC (60ULL * 1000 * 1000)
#define KP_LOG_RL_KEYS 1024
#define kp_log_warn_rl(key, ...) ((void)KP__LOG(KP_LOG_WARN, 0, (key), __VA_ARGS__, KP_LF_END))
#define kp_log_error_rl(key, ...) ((void)KP__LOG(KP_LOG_ERROR, 0, (key), __VA_ARGS__, KP_LF_END))
#define kp_log_error_errno_rl(key, r, ...) KP__LOG(KP_LOG_ERROR, (r), (key), __VA_ARGS__, KP_LF_END)

/* Lines dropped by the rate limiter since start-up (for a metric). Any thread. */
uint64_t kp_log_dropped(void);

/* Test hooks (the interval is a minute, too long to wait for in a unit test).
 * kp_log_ratelimit_reset() forgets every key and frees the table's memory (tests, shutdown).
 * kp_log_ratelimit_expire() ends the current interval of every key now, as if
 * KP_LOG_RL_INTERVAL_USEC had passed, keeping each key's count of unreported drops. */
void kp_log_ratelimit_reset(void);
void kp_log_ratelimit_expire(void);

#endif
