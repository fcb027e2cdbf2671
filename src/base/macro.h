/* base/macro.h: compiler attributes, array and overflow helpers.
 *
 * GNU attributes enter the code only through these macros (STYLE.md section 2), so a compiler
 * without them needs one edit here. No statement expressions, no cleanup attribute. */
#ifndef KP_BASE_MACRO_H
#define KP_BASE_MACRO_H

#include <stddef.h>

#if defined(__GNUC__) || defined(__clang__)
#define KP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define KP_NONNULL(...) __attribute__((nonnull(__VA_ARGS__)))
#define KP_WUR __attribute__((warn_unused_result))
#define KP_UNUSED __attribute__((unused))
#define KP_NORETURN __attribute__((noreturn))
#define KP_MALLOC __attribute__((malloc))
#define KP_SENTINEL __attribute__((sentinel))
#define KP_LIKELY(x) __builtin_expect(!!(x), 1)
#define KP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define KP_PRINTF(fmt, args)
#define KP_NONNULL(...)
#define KP_WUR
#define KP_UNUSED
#define KP_NORETURN
#define KP_MALLOC
#define KP_SENTINEL
#define KP_LIKELY(x) (x)
#define KP_UNLIKELY(x) (x)
#endif

#define KP_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The struct that holds *ptr as its member `member`. */
#define KP_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Checked size arithmetic: true when the result overflowed (and *res is then unspecified). */
#define kp_add_overflow(a, b, res) __builtin_add_overflow((a), (b), (res))
#define kp_mul_overflow(a, b, res) __builtin_mul_overflow((a), (b), (res))

#define KP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KP_MAX(a, b) ((a) > (b) ? (a) : (b))

#define KP_STRINGIFY_(x) #x
#define KP_STRINGIFY(x) KP_STRINGIFY_(x)

#endif
