/* k8s/rfc3339.h: RFC 3339 timestamps as Kubernetes writes and reads them.
 *
 * metav1.Time travels as "2006-01-02T15:04:05Z" (whole seconds, UTC) and metav1.MicroTime as
 * "2006-01-02T15:04:05.000000Z" (six fraction digits). We hold both as int64 microseconds since
 * the Unix epoch (negative before 1970). Years 0000..9999. Pure functions, no allocation, any
 * thread. */
#ifndef KP_K8S_RFC3339_H
#define KP_K8S_RFC3339_H

#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

/* Room for any formatted timestamp, terminator included. */
#define KP_RFC3339_STRMAX sizeof("2006-01-02T15:04:05.000000Z")

/* Parses "YYYY-MM-DDTHH:MM:SS[.F{1,9}](Z|+hh:mm|-hh:mm)" (upper-case T and Z, as Go's
 * time.RFC3339 layout demands). Invalid calendar dates (Feb 30, Feb 29 of a non-leap year,
 * month 13), hour 24, minute or second 60 (no leap seconds, as in Go) and offsets beyond
 * 23:59 are -KP_EPARSE, as is any other deviation; so is a result outside years 0000..9999
 * after the offset is applied (-ERANGE). Fraction digits below the microsecond are truncated
 * (floor), as formatting a MicroTime would. 0 or a negative error; *ret_usec only on success. */
int kp_rfc3339_parse(const char *p, size_t n, int64_t *ret_usec) KP_WUR;

enum kp_rfc3339_precision {
    KP_RFC3339_SECONDS, /* metav1.Time: "…T15:04:05Z", the fraction is truncated */
    KP_RFC3339_MICRO,   /* metav1.MicroTime: "…T15:04:05.000000Z" */
};

/* Formats usec in UTC into buf[size]. 0, -E2BIG (size < KP_RFC3339_STRMAX may not do), or
 * -ERANGE outside years 0000..9999. */
int kp_rfc3339_format(int64_t usec, enum kp_rfc3339_precision precision, char *buf,
                      size_t size) KP_WUR;

#endif
