/* DESIGN: fuzz driver for the shim's envelope parser (cmd/shim/envelope.h).
 *
 * The input is what arrives on the shim's stdin. Both stages run (header and decode, then the
 * parameters, which the shim reaches only after a good signature), and every result is checked
 * against the header's promises: only the protocol's verdicts; a reason whenever the verdict is
 * not OK; on success a known phase, decoded script and signature within their ceilings and
 * empty only for probe; every parameter entry KPSSH_<at least one of [A-Za-z0-9_]>=<no NUL>
 * with no name twice; and no allocation left live after release. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cmd/shim/envelope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(const char *s)
{
    const char *eq = strchr(s, '=');

    if (!eq || strncmp(s, "KPSSH_", 6) != 0 || eq - s <= 6)
        abort();
    for (const char *c = s; c < eq; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
              *c == '_'))
            abort();
    if (strchr(s, '\n'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t live = kp_alloc_live();
    struct kp_envelope e;
    struct kp_shim_params p;
    char *why = NULL;
    enum kp_shim_exit x;

    kp_envelope_init(&e);
    x = kp_envelope_parse((const char *)data, size, &e, &why);
    if (x != KP_SHIM_OK && x != KP_SHIM_MALFORMED && x != KP_SHIM_UNKNOWN_PHASE &&
        x != KP_SHIM_INTERNAL)
        abort();
    if (x != KP_SHIM_OK && !why)
        abort();
    if (x == KP_SHIM_OK) {
        if (!*kp_shim_phase_name(e.phase) || strcmp(kp_shim_phase_name(e.phase), "?") == 0)
            abort();
        if (e.script.len > KP_SHIM_MAX_SCRIPT || e.sig.len > KP_SHIM_MAX_SIG)
            abort();
        if ((e.phase == KP_SHIM_PHASE_PROBE) != (e.script.len == 0) ||
            (e.phase == KP_SHIM_PHASE_PROBE) != (e.sig.len == 0))
            abort();
        if (e.params_b64 && (e.params_b64 < (const char *)data ||
                             e.params_b64 + e.params_b64_len > (const char *)data + size))
            abort();
        kp_shim_params_init(&p);
        x = kp_envelope_params(&e, &p, &why);
        if (x != KP_SHIM_OK && x != KP_SHIM_MALFORMED && x != KP_SHIM_BAD_PARAM &&
            x != KP_SHIM_INTERNAL)
            abort();
        if (x != KP_SHIM_OK && !why)
            abort();
        if (x == KP_SHIM_OK) {
            if (!p.env || p.env[p.n] || p.text.len > KP_SHIM_MAX_PARAMS)
                abort();
            for (size_t i = 0; i < p.n; i++) {
                check_entry(p.env[i]);
                for (size_t j = 0; j < i; j++)
                    if (strcspn(p.env[i], "=") == strcspn(p.env[j], "=") &&
                        strncmp(p.env[i], p.env[j], strcspn(p.env[i], "=")) == 0)
                        abort();
            }
        }
        kp_shim_params_done(&p);
    }
    kp_free(why);
    kp_envelope_done(&e);
    if (kp_alloc_live() != live)
        abort();
    return 0;
}
