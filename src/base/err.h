/* base/err.h: error codes.
 *
 * A fallible function returns 0 (or a documented non-negative count), -errno, or -KP_E* from
 * the range below, which starts above every errno value Linux defines. kp_strerror() names
 * both kinds. */
#ifndef KP_BASE_ERR_H
#define KP_BASE_ERR_H

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

#endif
