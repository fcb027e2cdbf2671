/* api/quantity.h: Kubernetes resource.Quantity as an exact integer of milli-units.
 *
 * A quantity is "<sign><digits>[.<digits>]<suffix>" with decimal SI suffixes (n u m "" k M G T P
 * E), binary SI suffixes (Ki Mi Gi Ti Pi Ei) or a decimal exponent (e3, E-2). We keep the value
 * as int64 milli-units, which covers |value| <= 9223372036854775.807 units (about 9.2P, or 8Pi
 * bytes): every CPU and memory figure a node autoscaler meets. Values outside that range are
 * -ERANGE, never silently capped (Kubernetes caps BinarySI at 2^63-1 units; we cannot hold
 * that many milli-units and say so instead).
 *
 * Like Kubernetes we remember which of the three formats the input used, because the canonical
 * text depends on it: "1Gi" stays "1Gi", "1e3" stays "1e3", "1000" becomes "1k".
 *
 * Sub-milli precision ("1n", "0.0001"): Kubernetes keeps nano-units internally and rounds up at
 * the milli scale when asked for MilliValue(). By default we refuse such input with -ERANGE so
 * nothing is rounded behind the caller's back; with KP_QUANTITY_ROUND_UP the value is rounded
 * to the next milli-unit toward +infinity (ceiling), which is exactly MilliValue()'s result.
 *
 * All functions are pure, allocate nothing and may be called from any thread. */
#ifndef KP_API_QUANTITY_H
#define KP_API_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

/* Inputs longer than this are refused with -KP_ELIMIT (canonical quantities are < 30 bytes). */
#define KP_QUANTITY_MAX_LEN 128
/* Room for any formatted quantity, terminator included ("-9223372036854775807m"). */
#define KP_QUANTITY_STRMAX 32

enum kp_quantity_format {
    KP_QUANTITY_DECIMAL_SI = 0,   /* "", k, M, ... and m, u, n: the default */
    KP_QUANTITY_BINARY_SI,        /* Ki, Mi, ... */
    KP_QUANTITY_DECIMAL_EXPONENT, /* 1e3, 5E-3 */
};

/* A plain value type; copy it freely. The zero value is 0 in DecimalSI. milli is never
 * INT64_MIN (so negation is always defined). */
struct kp_quantity {
    int64_t milli;
    enum kp_quantity_format format;
};

enum kp_quantity_parse_flags {
    KP_QUANTITY_ROUND_UP = 1 << 0, /* round sub-milli values up (ceiling), as MilliValue() does */
};

/* Parses the n bytes at p. 0; -KP_EPARSE for malformed text (empty, bare sign, no digits,
 * unknown suffix, spaces); -ERANGE when the value does not fit, or has sub-milli precision
 * without KP_QUANTITY_ROUND_UP; -KP_ELIMIT when n > KP_QUANTITY_MAX_LEN. Like Kubernetes,
 * "1." and ".5" are accepted, and a BinarySI value below one unit is kept as DecimalSI. */
int kp_quantity_parse(const char *p, size_t n, enum kp_quantity_parse_flags flags,
                      struct kp_quantity *ret) KP_WUR;

/* Writes the canonical text Kubernetes would write (Quantity.String()) into buf[size]: the
 * smallest integer mantissa with an exponent that is a multiple of 3 for the decimal formats
 * ("1500m", "2", "1500k", "1e3"), powers of 1024 for BinarySI ("1Gi", "1536Mi"), and DecimalSI
 * for BinarySI values that are below 1024 in magnitude or not whole units. Zero is "0".
 * 0, or -E2BIG when size is too small (size >= KP_QUANTITY_STRMAX always suffices). */
int kp_quantity_format(const struct kp_quantity *q, char *buf, size_t size) KP_WUR;

/* a + b, a - b, a * k. The result keeps a's format, or takes b's when a is zero (as
 * Quantity.Add does). 0 or -ERANGE on overflow (outputs untouched). */
int kp_quantity_add(struct kp_quantity a, struct kp_quantity b, struct kp_quantity *ret) KP_WUR;
int kp_quantity_sub(struct kp_quantity a, struct kp_quantity b, struct kp_quantity *ret) KP_WUR;
int kp_quantity_mul(struct kp_quantity a, int64_t k, struct kp_quantity *ret) KP_WUR;

/* -1, 0 or 1 as a <, ==, > b; the format plays no part. */
int kp_quantity_cmp(struct kp_quantity a, struct kp_quantity b);

/* The value in whole units rounded up (ceiling), as Quantity.Value() does: bytes for memory. */
int64_t kp_quantity_value(struct kp_quantity q);

/* A quantity of whole units (e.g. bytes) or of milli-units. -ERANGE when it does not fit. */
int kp_quantity_from_units(int64_t units, enum kp_quantity_format format,
                           struct kp_quantity *ret) KP_WUR;

#endif
