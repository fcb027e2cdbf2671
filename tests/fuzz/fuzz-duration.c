/* Fuzz driver for api/duration.h. Properties (abort on violation): parse writes nothing on
 * failure; format of any parsed value fits KP_DURATION_STRMAX and parses back to the same
 * nanoseconds; the formatted text is a fixed point; the nillable form agrees; Go's error text
 * comes for every value the grammar refuses and for none that parses away from the int64
 * limits. The first 8 bytes are also formatted as a raw int64 so the formatter sees every value, not only parsed ones. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/duration.h"
#include "base/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(int64_t ns)
{
    char a[KP_DURATION_STRMAX], b[KP_DURATION_STRMAX];
    int64_t back = 0;

    if (kp_duration_format(ns, a, sizeof(a)) != 0)
        abort();
    if (kp_duration_parse(a, strlen(a), &back) != 0 || back != ns)
        abort();
    if (kp_duration_format(back, b, sizeof(b)) != 0 || strcmp(a, b) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    struct kp_duration_nillable nd = {.never = false, .ns = 99};
    int64_t ns = 42, raw;
    int r, rn;

    r = kp_duration_parse(p, size, &ns);
    if (r < 0 && ns != 42)
        abort();
    if (r == 0)
        check_round_trip(ns);
    rn = kp_duration_parse_nillable(p, size, &nd);
    if (rn == 0 && !nd.never && (r != 0 || nd.ns != ns))
        abort();
    if (rn < 0 && (r != rn || nd.ns != 99))
        abort();
    /* Go's error text: only for what the grammar refuses (a value that parses far from the
     * int64 limits, where Go's float64 fraction cannot tip it over, has none), and always a
     * terminated string inside its buffer. */
    {
        char err[64];
        const char *e = kp_duration_parse_error(p, size, err, sizeof(err));

        if (r == -KP_EPARSE && !e)
            abort();
        if (r == 0 && ns > -(INT64_C(1) << 62) && ns < (INT64_C(1) << 62) && e)
            abort();
        if (e && (e != err || strlen(err) >= sizeof(err)))
            abort();
    }
    if (size >= sizeof(raw)) {
        memcpy(&raw, data, sizeof(raw));
        check_round_trip(raw);
    }
    return 0;
}
