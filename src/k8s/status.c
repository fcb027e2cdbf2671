/* DESIGN: Status decoding and the one error mapping of STYLE.md rule 4 (see status.h).
 *
 * What: a pure decoder from response bytes (or a decoded watch ERROR object) to struct
 * kp_error, plus the reason/code -> error table. k8s/client.c and k8s/watch.c call it for every
 * non-2xx answer, so the table exists once.
 *
 * Why this way: callers branch on one negative error code, but an operator needs the server's
 * words, and some callers need the details (Invalid's field causes, the DisruptionBudget cause of
 * a refused eviction, Retry-After). So the mapping result and the decoded Status travel
 * together. Every field is optional and every type is checked: a Status from a misbehaving
 * proxy or an old server must never crash or mislead the decoder. A field of the wrong type is
 * ignored, not fatal; strings are capped at KP_MAX_STATUS_STRING and causes at
 * KP_MAX_STATUS_CAUSES, so a hostile body costs bounded memory.
 *
 * Threads: pure functions; a kp_error belongs to its caller's thread. */
#include "k8s/status.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "json/json.h"

void kp_error_init(struct kp_error *e)
{
    memset(e, 0, sizeof(*e));
}

void kp_error_done(struct kp_error *e)
{
    if (!e)
        return;
    kp_free(e->reason);
    kp_free(e->message);
    kp_free(e->details_name);
    kp_free(e->details_group);
    kp_free(e->details_kind);
    kp_free(e->details_uid);
    for (size_t i = 0; i < e->n_causes; i++) {
        kp_free(e->causes[i].type);
        kp_free(e->causes[i].field);
        kp_free(e->causes[i].message);
    }
    kp_free(e->causes);
    kp_error_init(e);
}

int kp_error_set_client(struct kp_error *e, int errnum, const char *message)
{
    kp_error_done(e);
    e->errnum = errnum;
    if (message) {
        e->message = kp_strdup(message);
        if (!e->message)
            return -ENOMEM;
    }
    return 0;
}

static const struct {
    int code;
    const char *reason;
} code_reasons[] = {
    {400, "BadRequest"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "NotFound"},
    {405, "MethodNotAllowed"},
    {406, "NotAcceptable"},
    {409, "Conflict"},
    {410, "Gone"},
    {413, "RequestEntityTooLarge"},
    {415, "UnsupportedMediaType"},
    {422, "Invalid"},
    {429, "TooManyRequests"},
    {500, "InternalError"},
    {503, "ServiceUnavailable"},
    {504, "Timeout"},
};

const char *kp_status_reason_for_code(int code)
{
    for (size_t i = 0; i < KP_ARRAY_SIZE(code_reasons); i++)
        if (code_reasons[i].code == code)
            return code_reasons[i].reason;
    return NULL;
}

static const struct {
    const char *reason;
    int errnum;
} reason_errors[] = {
    {"NotFound", -ENOENT},
    {"AlreadyExists", -EEXIST},
    {"Conflict", -KP_ECONFLICT},
    {"Gone", -KP_EEXPIRED},
    {"Expired", -KP_EEXPIRED},
    {"Invalid", -KP_EINVALID},
    {"Forbidden", -KP_EFORBIDDEN},
    {"Unauthorized", -KP_EUNAUTHORIZED},
    {"TooManyRequests", -EAGAIN},
    {"ServiceUnavailable", -EAGAIN},
    {"ServerTimeout", -EAGAIN},
    {"Timeout", -ETIMEDOUT},
    {"BadRequest", -EINVAL},
    {"MethodNotAllowed", -EOPNOTSUPP},
    {"RequestEntityTooLarge", -E2BIG},
    {"UnsupportedMediaType", -EPROTO},
    {"NotAcceptable", -EPROTO},
    {"InternalError", -KP_ESERVER},
};

int kp_status_errno(const struct kp_error *e)
{
    if (e->reason)
        for (size_t i = 0; i < KP_ARRAY_SIZE(reason_errors); i++)
            if (strcmp(e->reason, reason_errors[i].reason) == 0)
                return reason_errors[i].errnum;
    /* An unknown or missing reason: the code decides. 429 and 503 are retryable whatever
     * reason a server or proxy wrote. */
    switch (e->code) {
    case 429:
    case 503:
        return -EAGAIN;
    default:
        break;
    }
    if (e->code > 0) {
        const char *r = kp_status_reason_for_code(e->code);

        if (r)
            for (size_t i = 0; i < KP_ARRAY_SIZE(reason_errors); i++)
                if (strcmp(r, reason_errors[i].reason) == 0)
                    return reason_errors[i].errnum;
    }
    return -KP_ESERVER;
}

bool kp_error_has_reason(const struct kp_error *e, const char *r)
{
    return e->reason && strcmp(e->reason, r) == 0;
}

bool kp_error_is_disruption_budget(const struct kp_error *e)
{
    if (e->code != 429 && !kp_error_has_reason(e, "TooManyRequests"))
        return false;
    for (size_t i = 0; i < e->n_causes; i++)
        if (kp_streq(e->causes[i].type, "DisruptionBudget"))
            return true;
    return false;
}

/* A copy of the string at obj.key when it is a string; absent or another type leaves *ret NULL.
 * Strings are cut at KP_MAX_STATUS_STRING. 0 or -ENOMEM. */
static int copy_str(const json_t *obj, const char *key, char **ret)
{
    const char *s;

    *ret = NULL;
    if (!obj || kp_json_get_str(obj, key, &s) < 0)
        return 0;
    *ret = kp_strndup(s, KP_MAX_STATUS_STRING);
    return *ret ? 0 : -ENOMEM;
}

/* A printable excerpt of a body that is not a Status: control bytes become spaces, the length is
 * capped, and an ellipsis marks a cut. */
static int excerpt(const char *p, size_t n, char **ret)
{
    struct kp_buf b = KP_BUF_INIT(KP_STATUS_EXCERPT + 8);
    size_t i, k = KP_MIN(n, (size_t)KP_STATUS_EXCERPT);
    int r;

    for (i = 0; i < k; i++) {
        unsigned char c = (unsigned char)p[i];

        if ((r = kp_buf_putc(&b, c < 0x20 || c == 0x7f ? ' ' : (char)c)) < 0)
            goto out;
    }
    while (b.len > 0 && b.data[b.len - 1] == ' ')
        kp_buf_truncate(&b, b.len - 1);
    if (k < n && (r = kp_buf_puts(&b, "...")) < 0)
        goto out;
    *ret = kp_buf_steal(&b, NULL);
    r = *ret ? 0 : -ENOMEM;
out:
    kp_buf_done(&b);
    return r;
}

static int decode_causes(const json_t *details, struct kp_error *e)
{
    json_t *arr;
    size_t n, k;

    if (kp_json_get_array(details, "causes", &arr) < 0)
        return 0;
    n = kp_json_array_size(arr);
    k = KP_MIN(n, (size_t)KP_MAX_STATUS_CAUSES);
    if (k == 0)
        return 0;
    e->causes = kp_calloc(k, sizeof(*e->causes));
    if (!e->causes)
        return -ENOMEM;
    for (size_t i = 0; i < k; i++) {
        const json_t *c = kp_json_array_at(arr, i);
        struct kp_error_cause *dst = &e->causes[e->n_causes];

        if (!c || kp_json_typeof(c) != KP_JSON_OBJECT) {
            e->causes_dropped++;
            continue;
        }
        e->n_causes++;
        if (copy_str(c, "reason", &dst->type) < 0 || copy_str(c, "field", &dst->field) < 0 ||
            copy_str(c, "message", &dst->message) < 0)
            return -ENOMEM;
    }
    e->causes_dropped += n - k;
    return 0;
}

/* Fills an empty e from a Status object. */
static int from_status(const json_t *st, int http_status, struct kp_error *e)
{
    json_t *details = NULL;
    int64_t code, retry;
    int r;

    e->is_status = true;
    e->code = http_status;
    if (kp_json_get_int(st, "code", &code) == 0 && code >= 100 && code <= 999 && http_status == 0)
        e->code = (int)code;
    if ((r = copy_str(st, "reason", &e->reason)) < 0 ||
        (r = copy_str(st, "message", &e->message)) < 0)
        return r;
    /* An empty reason is as good as none. */
    if (e->reason && e->reason[0] == '\0') {
        kp_free(e->reason);
        e->reason = NULL;
    }
    if (kp_json_get_object(st, "details", &details) == 0) {
        if ((r = copy_str(details, "name", &e->details_name)) < 0 ||
            (r = copy_str(details, "group", &e->details_group)) < 0 ||
            (r = copy_str(details, "kind", &e->details_kind)) < 0 ||
            (r = copy_str(details, "uid", &e->details_uid)) < 0 ||
            (r = decode_causes(details, e)) < 0)
            return r;
        if (kp_json_get_int(details, "retryAfterSeconds", &retry) == 0 && retry > 0)
            e->retry_after_sec = (uint64_t)retry;
    }
    return 0;
}

static bool is_status_object(const json_t *v)
{
    const char *kind;

    return v && kp_json_typeof(v) == KP_JSON_OBJECT && kp_json_get_str(v, "kind", &kind) == 0 &&
           strcmp(kind, "Status") == 0;
}

static int finish(struct kp_error *e, int http_status, uint64_t retry_after_header)
{
    if (e->code == 0)
        e->code = http_status;
    if (!e->reason && e->code > 0) {
        const char *r = kp_status_reason_for_code(e->code);

        if (r && !(e->reason = kp_strdup(r)))
            return -ENOMEM;
    }
    if (retry_after_header > 0)
        e->retry_after_sec = retry_after_header;
    e->errnum = kp_status_errno(e);
    return 0;
}

int kp_status_from_json(const json_t *status, int http_status, struct kp_error *e)
{
    struct kp_error tmp = KP_ERROR_INIT;
    int r;

    if (status && kp_json_typeof(status) == KP_JSON_OBJECT) {
        if ((r = from_status(status, http_status, &tmp)) < 0)
            goto out;
        /* Objects without kind (some watch ERROR events) still carry Status fields. */
        tmp.is_status = is_status_object(status);
    } else {
        tmp.code = http_status;
    }
    if ((r = finish(&tmp, http_status, 0)) < 0)
        goto out;
    kp_error_done(e);
    *e = tmp;
    kp_error_init(&tmp);
    r = 0;
out:
    kp_error_done(&tmp);
    return r;
}

int kp_status_decode(const char *p, size_t n, int http_status, uint64_t retry_after_header,
                     struct kp_error *e)
{
    struct kp_error tmp = KP_ERROR_INIT;
    json_t *doc = NULL;
    int r;

    if (n > 0 && n <= KP_MAX_STATUS_BODY) {
        r = kp_json_parse(p, n, KP_MAX_STATUS_BODY, /* max_depth= */ 0, &doc, NULL);
        if (r == -ENOMEM)
            goto out;
    }
    if (doc && is_status_object(doc)) {
        if ((r = from_status(doc, http_status, &tmp)) < 0)
            goto out;
    } else if (n > 0) {
        if ((r = excerpt(p, n, &tmp.message)) < 0)
            goto out;
        if (tmp.message[0] == '\0') {
            kp_free(tmp.message);
            tmp.message = NULL;
        }
    }
    if ((r = finish(&tmp, http_status, retry_after_header)) < 0)
        goto out;
    kp_error_done(e);
    *e = tmp;
    kp_error_init(&tmp);
    r = 0;
out:
    kp_json_unref(doc);
    kp_error_done(&tmp);
    return r;
}
