/* DESIGN: the envelope parser (format and contract in envelope.h).
 *
 * What: one pass over the input splits it into lines and remembers, for each known field, where
 * its last value starts and ends (slices into the input, no copies). The verdicts then follow
 * the reference shim's order, so a given bad envelope gets the same exit code from both. Only
 * script and signature are decoded here; parameters wait until the signature has been checked,
 * again as the reference does (a tampered envelope is "signature rejected", whatever else is
 * wrong with it).
 *
 * Why so strict: the input comes from the network through sshd and the shim runs as root. A
 * value is taken byte for byte (no trimming, no CR tolerance), base64 must be standard and
 * padded, and anything unexpected in a field we use is "malformed" rather than guessed at.
 * Unknown lines are still ignored, as the format promises, so a later controller may add
 * fields an older shim skips.
 *
 * Invariants: every decoded buffer has its ceiling from shim.h; the input is only read. */
#include "cmd/shim/envelope.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/err.h"
#include "base/str.h"

struct slice {
    const char *p; /* NULL: the field did not appear */
    size_t n;
};

static const char *const kp_phase_names[] = {
    [KP_SHIM_PHASE_PROBE] = "probe",         [KP_SHIM_PHASE_INSTALL] = "install",
    [KP_SHIM_PHASE_JOIN] = "join",           [KP_SHIM_PHASE_LEAVE] = "leave",
    [KP_SHIM_PHASE_UNINSTALL] = "uninstall",
};

const char *kp_shim_phase_name(enum kp_shim_phase phase)
{
    if ((size_t)phase >= KP_ARRAY_SIZE(kp_phase_names))
        return "?";
    return kp_phase_names[phase];
}

void kp_envelope_init(struct kp_envelope *e)
{
    memset(e, 0, sizeof(*e));
    kp_buf_init(&e->script, KP_SHIM_MAX_SCRIPT);
    kp_buf_init(&e->sig, KP_SHIM_MAX_SIG);
}

void kp_envelope_done(struct kp_envelope *e)
{
    if (!e)
        return;
    kp_buf_done(&e->script);
    kp_buf_done(&e->sig);
    e->params_b64 = NULL;
    e->params_b64_len = 0;
}

void kp_shim_params_init(struct kp_shim_params *p)
{
    memset(p, 0, sizeof(*p));
    kp_buf_init(&p->text, KP_SHIM_MAX_PARAMS);
}

void kp_shim_params_done(struct kp_shim_params *p)
{
    if (!p)
        return;
    kp_buf_wipe(&p->text); /* values may be join secrets */
    kp_free(p->env);
    p->env = NULL;
    p->n = 0;
}

/* When line (n bytes) starts with "name: ", its value goes to *out (last occurrence wins). */
static bool take_field(const char *line, size_t n, const char *name, struct slice *out)
{
    size_t k = strlen(name);

    if (n < k + 2 || memcmp(line, name, k) != 0 || line[k] != ':' || line[k + 1] != ' ')
        return false;
    out->p = line + k + 2;
    out->n = n - k - 2;
    return true;
}

static enum kp_shim_exit why(char **ret_msg, enum kp_shim_exit code, const char *reason)
{
    kp_msg_set(ret_msg, "%s", reason);
    return code;
}

/* Standard padded base64 into out: KP_SHIM_OK, KP_SHIM_MALFORMED (bad text or over the
 * ceiling) or KP_SHIM_INTERNAL (out of memory). */
static enum kp_shim_exit decode(struct slice s, struct kp_buf *out)
{
    int r;

    if (s.n % 4 != 0)
        return KP_SHIM_MALFORMED;
    r = kp_base64_decode(s.p, s.n, 0, out);
    if (r == -ENOMEM)
        return KP_SHIM_INTERNAL;
    return r < 0 ? KP_SHIM_MALFORMED : KP_SHIM_OK;
}

enum kp_shim_exit kp_envelope_parse(const char *p, size_t n, struct kp_envelope *e, char **ret_msg)
{
    struct slice version = {0}, phase = {0}, params = {0}, sig = {0}, script = {0};
    enum kp_shim_exit x;
    size_t i = 0;
    bool known = false;

    if (n > KP_SHIM_MAX_ENVELOPE)
        return why(ret_msg, KP_SHIM_MALFORMED, "envelope is larger than 2 MiB");
    if (n > 0 && memchr(p, '\0', n))
        return why(ret_msg, KP_SHIM_MALFORMED, "envelope holds a NUL byte");
    while (i < n) {
        const char *line = p + i, *nl = memchr(line, '\n', n - i);
        size_t len = nl ? (size_t)(nl - line) : n - i;

        i += len + (nl ? 1 : 0);
        (void)(take_field(line, len, "kpssh-envelope", &version) ||
               take_field(line, len, "phase", &phase) ||
               take_field(line, len, "params-b64", &params) ||
               take_field(line, len, "sig-b64", &sig) ||
               take_field(line, len, "script-b64", &script)); /* anything else is ignored */
    }
    if (!version.p)
        return why(ret_msg, KP_SHIM_MALFORMED, "no 'kpssh-envelope: 1' line (not an envelope)");
    if (!kp_memeq_str(version.p, version.n, "1"))
        return why(ret_msg, KP_SHIM_MALFORMED, "envelope version is not 1");
    if (!phase.p || phase.n == 0)
        return why(ret_msg, KP_SHIM_MALFORMED, "envelope has no phase");
    for (size_t k = 0; k < KP_ARRAY_SIZE(kp_phase_names); k++) {
        if (kp_memeq_str(phase.p, phase.n, kp_phase_names[k])) {
            e->phase = (enum kp_shim_phase)k;
            known = true;
            break;
        }
    }
    if (!known)
        return why(ret_msg, KP_SHIM_UNKNOWN_PHASE, "unknown phase");
    if (e->phase == KP_SHIM_PHASE_PROBE)
        return KP_SHIM_OK; /* unsigned by design: its output is the shim's own */
    if (!sig.p || sig.n == 0)
        return why(ret_msg, KP_SHIM_MALFORMED, "envelope has no sig-b64");
    if (!script.p || script.n == 0)
        return why(ret_msg, KP_SHIM_MALFORMED, "envelope has no script-b64");
    x = decode(script, &e->script);
    if (x != KP_SHIM_OK)
        return why(ret_msg, x,
                   x == KP_SHIM_INTERNAL ? "out of memory"
                                         : "script-b64 is not base64 of at most 256 KiB");
    x = decode(sig, &e->sig);
    if (x != KP_SHIM_OK)
        return why(ret_msg, x,
                   x == KP_SHIM_INTERNAL ? "out of memory"
                                         : "sig-b64 is not base64 of at most 16 KiB");
    e->params_b64 = params.p && params.n ? params.p : NULL;
    e->params_b64_len = e->params_b64 ? params.n : 0;
    return KP_SHIM_OK;
}

static bool name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* Checked entries ("NAME=value", no NUL inside) compared bytewise, for qsort. */
static int cmp_entry(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;

    return strcmp(x, y);
}

static bool same_name(const char *a, const char *b)
{
    size_t k = (size_t)(strchr(a, '=') - a);

    return strncmp(a, b, k + 1) == 0;
}

enum kp_shim_exit kp_envelope_params(const struct kp_envelope *e, struct kp_shim_params *ret,
                                     char **ret_msg)
{
    struct slice s = {.p = e->params_b64, .n = e->params_b64_len};
    const char **sorted = NULL;
    enum kp_shim_exit x;
    size_t lines = 1, n = 0, i = 0, alloc;
    char *t;

    if (!s.p) {
        ret->env = kp_calloc(1, sizeof(*ret->env));
        return ret->env ? KP_SHIM_OK : why(ret_msg, KP_SHIM_INTERNAL, "out of memory");
    }
    x = decode(s, &ret->text);
    if (x != KP_SHIM_OK)
        return why(ret_msg, x,
                   x == KP_SHIM_INTERNAL ? "out of memory"
                                         : "params-b64 is not base64 of at most 64 KiB");
    t = ret->text.data;
    for (size_t k = 0; k < ret->text.len; k++)
        lines += t[k] == '\n';
    if (kp_add_overflow(lines, (size_t)1, &alloc))
        return why(ret_msg, KP_SHIM_INTERNAL, "out of memory");
    ret->env = kp_calloc(alloc, sizeof(*ret->env));
    if (!ret->env)
        return why(ret_msg, KP_SHIM_INTERNAL, "out of memory");
    while (i < ret->text.len) {
        char *line = t + i, *nl = memchr(line, '\n', ret->text.len - i);
        size_t len = nl ? (size_t)(nl - line) : ret->text.len - i, k;
        char *eq;

        i += len + (nl ? 1 : 0);
        if (len == 0)
            continue;
        eq = memchr(line, '=', len);
        if (!eq)
            return why(ret_msg, KP_SHIM_BAD_PARAM, "a parameter line has no '='");
        if (!kp_startswith(line, "KPSSH_") || (size_t)(eq - line) <= strlen("KPSSH_"))
            return why(ret_msg, KP_SHIM_BAD_PARAM,
                       "a parameter name is not KPSSH_ followed by at least one character");
        for (k = 0; line + k < eq; k++)
            if (!name_char(line[k]))
                return why(ret_msg, KP_SHIM_BAD_PARAM,
                           "a parameter name holds a character outside [A-Za-z0-9_]");
        if (memchr(eq, '\0', len - (size_t)(eq - line)))
            return why(ret_msg, KP_SHIM_BAD_PARAM, "a parameter value holds a NUL byte");
        if (nl)
            *nl = '\0';
        ret->env[n++] = line;
    }
    ret->n = n;
    if (n > 1) {
        sorted = kp_memdup(ret->env, n * sizeof(*sorted));
        if (!sorted)
            return why(ret_msg, KP_SHIM_INTERNAL, "out of memory");
        /* Strings sharing the prefix "NAME=" are adjacent in byte order, so one pass finds any
         * name given twice. */
        qsort(sorted, n, sizeof(*sorted), cmp_entry);
        for (size_t k = 1; k < n; k++) {
            if (same_name(sorted[k - 1], sorted[k])) {
                kp_free(sorted);
                return why(ret_msg, KP_SHIM_BAD_PARAM, "a parameter name appears twice");
            }
        }
        kp_free(sorted);
    }
    return KP_SHIM_OK;
}
