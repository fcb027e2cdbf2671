/* DESIGN: fuzz driver for the probe output parser (provider/ssh/probe.h).
 *
 * The input is what a host printed for the probe command. Every result is checked against the
 * header's promises: success only with 1..KP_PROBE_MAX_CPUS CPUs, a memory size that is a
 * multiple of 1024 within bounds, a machine name of [A-Za-z0-9_.-] that fits its array, and an
 * architecture the normaliser returns non-empty; failure always with a reason, -KP_ELIMIT exactly
 * when the input is over the ceiling, and the output untouched. The parser allocates nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "provider/ssh/probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kp_probe_result res, before;
    char *why = NULL;
    int64_t live = kp_alloc_live();
    size_t len;
    int r;

    memset(&res, 0xa5, sizeof(res));
    before = res;
    r = kp_probe_parse((const char *)data, size, &res, &why);
    if (r == 0) {
        if (res.cpus == 0 || res.cpus > KP_PROBE_MAX_CPUS)
            abort();
        if (res.mem_bytes == 0 || res.mem_bytes % 1024 ||
            res.mem_bytes / 1024 > KP_PROBE_MAX_MEM_KB)
            abort();
        len = strnlen(res.machine, sizeof(res.machine));
        if (len == 0 || len == sizeof(res.machine))
            abort();
        for (size_t i = 0; i < len; i++) {
            char c = res.machine[i];

            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-'))
                abort();
        }
        if (!*kp_probe_arch(res.machine))
            abort();
    } else {
        if (!why || (r != -KP_EPARSE && r != -KP_ELIMIT))
            abort();
        if ((r == -KP_ELIMIT) != (size > KP_MAX_PROBE_OUTPUT))
            abort();
        if (memcmp(&res, &before, sizeof(res)) != 0)
            abort();
    }
    kp_free(why); /* an owned message (base/err.h) */
    if (kp_alloc_live() != live)
        abort();
    return 0;
}
