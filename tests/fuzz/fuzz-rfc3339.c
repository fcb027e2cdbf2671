/* Fuzz driver for k8s/rfc3339.h. Properties (abort on violation): parse writes nothing on
 * failure; a parsed time formats in both precisions, the micro form parses back to the same
 * microseconds, the seconds form to the value floored to the second; the first 8 bytes as a
 * raw int64 either format and round-trip or are -ERANGE. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/rfc3339.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(int64_t usec)
{
    char buf[KP_RFC3339_STRMAX];
    int64_t back = 0, floor_sec;
    int r = kp_rfc3339_format(usec, KP_RFC3339_MICRO, buf, sizeof(buf));

    if (r == -ERANGE)
        return;
    if (r != 0 || kp_rfc3339_parse(buf, strlen(buf), &back) != 0 || back != usec)
        abort();
    if (kp_rfc3339_format(usec, KP_RFC3339_SECONDS, buf, sizeof(buf)) != 0)
        abort();
    floor_sec = usec - ((usec % 1000000) + 1000000) % 1000000;
    if (kp_rfc3339_parse(buf, strlen(buf), &back) != 0 || back != floor_sec)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t usec = 42, raw;
    int r = kp_rfc3339_parse((const char *)data, size, &usec);

    if (r < 0 && usec != 42)
        abort();
    if (r == 0)
        check_round_trip(usec);
    if (size >= sizeof(raw)) {
        memcpy(&raw, data, sizeof(raw));
        check_round_trip(raw);
    }
    return 0;
}
