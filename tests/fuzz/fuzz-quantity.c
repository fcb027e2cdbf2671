/* Fuzz driver for api/quantity.h. Properties checked (abort on violation):
 *  - parse never crashes, and writes nothing on failure;
 *  - ROUND_UP accepts everything strict parsing accepts, with the same value, and is never below
 *    the exact value (ceiling);
 *  - format(q) succeeds within KP_QUANTITY_STRMAX and parses back to the same milli-units; the
 *    canonical text is a fixed point after one round (format(parse(s)) == s for s =
 *    format(parse(format(q)))). Not after zero rounds: like Kubernetes, a BinarySI value that
 *    is not a multiple of 1024 prints without suffix ("312.5Ki" -> "320000"), which reads back
 *    as DecimalSI and then prints as "320k";
 *  - add/sub agree with each other when they succeed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_canonical(const struct kp_quantity *q)
{
    char a[KP_QUANTITY_STRMAX], b[KP_QUANTITY_STRMAX], c[KP_QUANTITY_STRMAX];
    struct kp_quantity back, again;

    if (kp_quantity_format(q, a, sizeof(a)) != 0)
        abort();
    if (kp_quantity_parse(a, strlen(a), 0, &back) != 0)
        abort();
    if (back.milli != q->milli)
        abort();
    if (q->format != KP_QUANTITY_BINARY_SI && back.format == q->format)
        if (kp_quantity_format(&back, b, sizeof(b)) != 0 || strcmp(a, b) != 0)
            abort();
    if (kp_quantity_format(&back, b, sizeof(b)) != 0)
        abort();
    if (kp_quantity_parse(b, strlen(b), 0, &again) != 0 || again.milli != q->milli)
        abort();
    if (kp_quantity_format(&again, c, sizeof(c)) != 0 || strcmp(b, c) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    struct kp_quantity q = {.milli = 12345, .format = KP_QUANTITY_DECIMAL_EXPONENT};
    struct kp_quantity up = q, sum, diff;
    int r, ru;

    r = kp_quantity_parse(p, size, 0, &q);
    ru = kp_quantity_parse(p, size, KP_QUANTITY_ROUND_UP, &up);
    if (r < 0 && (q.milli != 12345 || q.format != KP_QUANTITY_DECIMAL_EXPONENT))
        abort();
    if (r == 0 && (ru != 0 || up.milli != q.milli || up.format != q.format))
        abort();
    if (r == 0)
        check_canonical(&q);
    if (ru == 0) {
        check_canonical(&up);
        if (kp_quantity_add(up, up, &sum) == 0) {
            if (kp_quantity_sub(sum, up, &diff) != 0 || diff.milli != up.milli)
                abort();
            check_canonical(&sum);
        }
        if (kp_quantity_cmp(up, up) != 0)
            abort();
    }
    return 0;
}
