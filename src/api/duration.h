/* api/duration.h: Go time.Duration strings, and Karpenter's "Never".
 *
 * Kubernetes and Karpenter objects carry durations as Go writes them ("1h30m0s", "720h",
 * "300ms"). We parse them to int64 nanoseconds and format them byte for byte as Go's
 * Duration.String() does. Pure functions, no allocation, any thread. */
#ifndef KP_API_DURATION_H
#define KP_API_DURATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

#define KP_NSEC_PER_USEC INT64_C(1000)
#define KP_NSEC_PER_MSEC INT64_C(1000000)
#define KP_NSEC_PER_SEC INT64_C(1000000000)
#define KP_NSEC_PER_MIN (60 * KP_NSEC_PER_SEC)
#define KP_NSEC_PER_HOUR (60 * KP_NSEC_PER_MIN)

/* Room for any formatted duration, terminator included ("-2562047h47m16.854775808s"). */
#define KP_DURATION_STRMAX 32

/* Parses the n bytes at p as Go's time.ParseDuration does: an optional sign, then one or more
 * <number><unit> with number = digits, digits.digits, .digits or digits. and unit one of ns, us,
 * µs (U+00B5), μs (U+03BC), ms, s, m, h; the bare "0" (optionally signed) needs no unit. 0,
 * -KP_EPARSE (empty, missing or unknown unit, no digits, spaces) or -ERANGE (beyond int64
 * nanoseconds; -9223372036854775808ns itself is accepted, as Go does). Fractions are truncated
 * exactly to the nanosecond; Go multiplies them in float64, which can differ by 1ns for
 * fractions with more than about 15 significant digits. */
int kp_duration_parse(const char *p, size_t n, int64_t *ret_ns) KP_WUR;

/* The error text Go's time.ParseDuration gives for the n bytes at p, written into buf[size] (cut
 * short when it does not fit): "time: invalid duration \"x\"", "time: missing unit in duration
 * \"5\"" or "time: unknown unit \"d\" in duration \"5d\"", the strings quoted as Go's time
 * package quotes them (\" and \\ escaped, bytes below 0x20 or from 0x80 up as \xNN, 0x7f as
 * it is). Follows Go's parser step by step, so the first problem Go meets is the one named (an
 * overflow is "invalid duration"). Returns buf, or NULL when p parses. Pure. */
const char *kp_duration_parse_error(const char *p, size_t n, char *buf, size_t size) KP_NONNULL(3);

/* Writes ns as Go's Duration.String() does ("0s", "1.5s", "1h0m0s", "300ms", "2µs", "-5m0s")
 * into buf[size]. 0 or -E2BIG (size >= KP_DURATION_STRMAX always suffices). */
int kp_duration_format(int64_t ns, char *buf, size_t size) KP_WUR;

/* Karpenter's NillableDuration: the literal "Never" means no limit (e.g. expireAfter,
 * consolidateAfter); anything else is a Go duration. */
struct kp_duration_nillable {
    bool never; /* true: infinite; ns is then 0 */
    int64_t ns;
};

/* "Never" (exactly, case-sensitive) or kp_duration_parse(). Same errors. */
int kp_duration_parse_nillable(const char *p, size_t n, struct kp_duration_nillable *ret) KP_WUR;
/* "Never" or kp_duration_format(). 0 or -E2BIG. */
int kp_duration_format_nillable(const struct kp_duration_nillable *d, char *buf,
                                size_t size) KP_WUR;

#endif
