/* base/err.h: error codes, and the one way to hand back error text.
 *
 * A fallible function returns 0 (or a documented non-negative count), -errno, or -KP_E* from
 * the range below, which starts above every errno value Linux defines. kp_strerror() names
 * both kinds.
 *
 * Error text: a function that can say why it failed, in words a user can act on, takes a last
 * parameter `char **ret_msg` (optional: NULL means the caller does not want it). On failure it
 * may set *ret_msg to a new string the caller frees with kp_free(); *ret_msg must hold NULL or
 * such a string on entry (a second message replaces the first). It is set with kp_msg_set() and
 * nothing else, so every message is bounded (KP_MSG_MAX) and an allocation failure only loses
 * the text, never the verdict (the return value). struct kp_error (k8s/status.h) is not error
 * text: it is the API server's Status, structured, and stays for that. */
#ifndef KP_BASE_ERR_H
#define KP_BASE_ERR_H

#include <stdarg.h>

#include "base/macro.h"

enum {
    KP_ERR_BASE = 4096,
    KP_ELIMIT = KP_ERR_BASE, /* input or output crossed its ceiling */
    KP_EPARSE,               /* malformed input: bytes that do not follow the format */
    KP_ECONFLICT,            /* optimistic lock lost (HTTP 409 Conflict): someone else won */
    KP_EEXPIRED,             /* resourceVersion or continue token too old (410 Gone) */
    KP_EINVALID,             /* the server rejected the object as invalid (422) */
    KP_EFORBIDDEN,           /* authenticated but not authorised (403) */
    KP_EUNAUTHORIZED,        /* not authenticated (401) */
    KP_EHOSTKEY,             /* SSH host key does not match the pin: possible MITM */
    KP_EAUTH,                /* SSH or TLS authentication failed */
    KP_ESCRIPT,              /* a remote script ran and exited non-zero */
    KP_ESERVER,              /* the server answered with an unexpected error status */
    KP_ENOTREADY,            /* a prerequisite is not ready yet; try again later */
    KP_ENOTLEADER,           /* refused: this replica does not hold the leader Lease (fenced) */
    KP_ERR_END,
};

/* A static string naming r (negative or positive, errno or KP_E*); never NULL. Any thread. */
const char *kp_strerror(int r);

/* The symbolic name of r, e.g. "ENOENT" or "KP_ECONFLICT", or NULL when unknown. Any thread. */
const char *kp_errname(int r);

/* Bytes an error text keeps; longer text is cut at a character boundary and ends in "...". */
#define KP_MSG_MAX 8192u
/* Replaces *ret (freed) with a new string formatted from fmt; *ret is NULL when that string
 * cannot be allocated. ret NULL: does nothing (the caller did not ask for the text). Any
 * thread. */
void kp_msg_set(char **ret, const char *fmt, ...) KP_PRINTF(2, 3);
void kp_msg_setv(char **ret, const char *fmt, va_list ap) KP_PRINTF(2, 0);

#endif
