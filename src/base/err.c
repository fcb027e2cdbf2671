/* DESIGN: error names and texts.
 *
 * errno values are named with strerrordesc_np/strerrorname_np (glibc >= 2.32), which return
 * static strings and, unlike strerror(), are thread-safe. Our own codes live in a table indexed
 * from KP_ERR_BASE. */
#include "base/err.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/macro.h"

static const struct {
    const char *name;
    const char *text;
} kp_errors[] = {
    [KP_ELIMIT - KP_ERR_BASE] = {"KP_ELIMIT", "size limit exceeded"},
    [KP_EPARSE - KP_ERR_BASE] = {"KP_EPARSE", "malformed input"},
    [KP_ECONFLICT - KP_ERR_BASE] = {"KP_ECONFLICT", "conflict: object was modified"},
    [KP_EEXPIRED - KP_ERR_BASE] = {"KP_EEXPIRED", "resource version expired"},
    [KP_EINVALID - KP_ERR_BASE] = {"KP_EINVALID", "object is invalid"},
    [KP_EFORBIDDEN - KP_ERR_BASE] = {"KP_EFORBIDDEN", "forbidden"},
    [KP_EUNAUTHORIZED - KP_ERR_BASE] = {"KP_EUNAUTHORIZED", "unauthorized"},
    [KP_EHOSTKEY - KP_ERR_BASE] = {"KP_EHOSTKEY", "host key mismatch"},
    [KP_EAUTH - KP_ERR_BASE] = {"KP_EAUTH", "authentication failed"},
    [KP_ESCRIPT - KP_ERR_BASE] = {"KP_ESCRIPT", "remote script failed"},
    [KP_ESERVER - KP_ERR_BASE] = {"KP_ESERVER", "unexpected server error"},
    [KP_ENOTREADY - KP_ERR_BASE] = {"KP_ENOTREADY", "not ready"},
    [KP_ENOTLEADER - KP_ERR_BASE] = {"KP_ENOTLEADER", "not the leader: writes are fenced"},
};

_Static_assert(KP_ARRAY_SIZE(kp_errors) == KP_ERR_END - KP_ERR_BASE, "every KP_E* needs a row");

const char *kp_errname(int r)
{
    if (r < 0)
        r = -r;
    if (r >= KP_ERR_BASE && r < KP_ERR_END)
        return kp_errors[r - KP_ERR_BASE].name;
    if (r == 0)
        return "OK";
    return strerrorname_np(r);
}

const char *kp_strerror(int r)
{
    const char *s;

    if (r < 0)
        r = -r;
    if (r >= KP_ERR_BASE && r < KP_ERR_END)
        return kp_errors[r - KP_ERR_BASE].text;
    if (r == 0)
        return "success";
    s = strerrordesc_np(r);
    return s ? s : "unknown error";
}

void kp_msg_setv(char **ret, const char *fmt, va_list ap)
{
    size_t len;
    va_list aq;
    char *s;
    int n;

    if (!ret)
        return;
    /* The arguments may point into *ret ("outer: %s", *ret): format into a new buffer first,
     * free the old text only after. */
    va_copy(aq, ap);
    n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    len = n < 0 ? 0 : KP_MIN((size_t)n, (size_t)KP_MSG_MAX);
    s = n < 0 ? NULL : kp_malloc(len + 1);
    if (s)
        (void)vsnprintf(s, len + 1, fmt, ap);
    kp_free(*ret);
    *ret = s;
    if (!s)
        return;
    if ((size_t)n > len) {
        /* Back up over continuation bytes so the cut never splits a UTF-8 character. */
        size_t cut = len - 3;

        while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
            cut--;
        memcpy(s + cut, "...", 4);
    }
}

void kp_msg_set(char **ret, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    kp_msg_setv(ret, fmt, ap);
    va_end(ap);
}
