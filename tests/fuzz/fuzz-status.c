/* DESIGN: fuzz driver for k8s/status.c (Status bodies -> struct kp_error).
 *
 * The first byte picks the HTTP status (a table of the codes the API server uses plus a few it
 * never should) and whether a Retry-After header is present; the rest is the body. Checks: decode
 * never fails except for lack of memory; the mapped error is negative and equals
 * kp_status_errno() of the result; the kept causes and strings respect their ceilings; a
 * DisruptionBudget verdict implies a retryable error; a second decode into the used error gives
 * the same answer (no state leaks between decodes). Any disagreement calls abort(). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "k8s/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const int codes[] = {200, 400, 401, 403, 404, 405, 406, 409, 410, 413,
                            415, 422, 429, 500, 502, 503, 504, 0,   99,  1000};

static void check(const struct kp_error *e)
{
    if (e->errnum >= 0 || e->errnum != kp_status_errno(e))
        abort();
    if (e->n_causes > KP_MAX_STATUS_CAUSES)
        abort();
    for (size_t i = 0; i < e->n_causes; i++) {
        const struct kp_error_cause *c = &e->causes[i];

        if ((c->type && strlen(c->type) > KP_MAX_STATUS_STRING) ||
            (c->field && strlen(c->field) > KP_MAX_STATUS_STRING) ||
            (c->message && strlen(c->message) > KP_MAX_STATUS_STRING))
            abort();
    }
    if (e->message && strlen(e->message) > KP_MAX_STATUS_STRING)
        abort();
    if (kp_error_is_disruption_budget(e) && e->errnum != -EAGAIN)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kp_error e = KP_ERROR_INIT, again = KP_ERROR_INIT;
    int status;
    uint64_t retry;

    if (size < 1)
        return 0;
    status = codes[data[0] % (sizeof(codes) / sizeof(codes[0]))];
    retry = data[0] & 0x80 ? 5 : 0;
    if (kp_status_decode((const char *)data + 1, size - 1, status, retry, &e) < 0)
        abort(); /* only -ENOMEM may fail, and the fuzzer does not inject it */
    check(&e);
    if (kp_status_decode((const char *)data + 1, size - 1, status, retry, &again) < 0 ||
        again.errnum != e.errnum || again.code != e.code || again.n_causes != e.n_causes ||
        again.retry_after_sec != e.retry_after_sec)
        abort();
    if (retry && e.retry_after_sec != retry)
        abort();
    kp_error_done(&e);
    kp_error_done(&again);
    return 0;
}
