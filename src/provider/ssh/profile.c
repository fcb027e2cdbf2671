/* DESIGN: SSHJoinProfile validation (provider/ssh/profile.h).
 *
 * What: the checks that decide whether an SSHNodeClass may use a profile, the timeout grammar,
 * and the install-cache marker.
 *
 * Why this way: a profile is the one object that turns into root shell on every host, and the
 * message a user gets when it is refused lands in an SSHNodeClass condition, far from the YAML
 * they edited. So each refusal names the field, gives line:column for script problems, and says
 * what to write instead. Checks run in a fixed order (required scripts, sizes, bytes, templates,
 * the leave contract, version, timeouts, signatures) and the first problem wins, so the message
 * is stable for a given object.
 *
 * The leave contract is checked on bytes, not on bash syntax: a leave script that *mentions*
 * KPSSH_VAR_ or KPSSH_SECRET_ anywhere, comments included, is invalid. Parsing bash to tell a
 * comment from an expansion would be a second, worse bash; and a mention in a comment is a
 * sign the author expected the value to be there.
 *
 * Threads: none; pure, any thread. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/profile.h"

/* How much of an offending identifier a message quotes. */
#define KP_PROFILE_QUOTE_MAX 64u

static const char *const phase_names[KP_PROFILE_PHASES] = {"install", "join", "leave", "uninstall"};

const char *kp_profile_phase_name(enum kp_profile_phase phase)
{
    return (unsigned)phase < KP_PROFILE_PHASES ? phase_names[phase] : NULL;
}

static int profile_fail(char **ret_msg, const char *fmt, ...) KP_PRINTF(2, 3);

/* Sets the ProfileInvalid message (base/err.h) and returns -EINVAL: the verdict stands even
 * when the text cannot be allocated. */
static int profile_fail(char **ret_msg, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    kp_msg_setv(ret_msg, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static bool is_ident(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* 1-based line and column of offset off in p. */
static void line_col(const char *p, size_t off, size_t *ret_line, size_t *ret_col)
{
    size_t i, line = 1, col = 1;

    for (i = 0; i < off; i++) {
        if (p[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    *ret_line = line;
    *ret_col = col;
}

/* Offset of the first occurrence of needle in (p, n), or n when absent. */
static size_t find(const char *p, size_t n, const char *needle)
{
    const char *hit = memmem(p, n, needle, strlen(needle));

    return hit ? (size_t)(hit - p) : n;
}

/* --- templates --------------------------------------------------------------------------- */

/* The reference's template fields and what a kpssh script reads instead. */
static const struct {
    const char *field;
    const char *env;
} template_fields[] = {
    {"Vars", "KPSSH_VAR_<key>"},
    {"Secrets", "KPSSH_SECRET_<KEY>"},
    {"ClusterEndpoint", "KPSSH_CLUSTER_ENDPOINT"},
    {"ClusterCACert", "KPSSH_CLUSTER_CA_B64"},
    {"BootstrapToken", "KPSSH_BOOTSTRAP_TOKEN"},
    {"NodeName", "KPSSH_NODE_NAME"},
    {"ProviderID", "KPSSH_PROVIDER_ID"},
    {"NodeLabels", "KPSSH_NODE_LABELS"},
    {"RegisterWithTaints", "KPSSH_TAINTS"},
    {"HostAddress", "KPSSH_HOST_ADDRESS"},
    {"NodeAddress", "KPSSH_NODE_ADDRESS"},
};

/* Finds `{{ .Field` (with optional spaces and a trim marker) naming one of the reference's
 * template fields. A script may well contain other `{{` (a kubectl go-template, a Helm value);
 * only these names are certain to be a leftover template. Returns the index into
 * template_fields and the offset of the `{{`, or -1. */
static int find_template(const char *p, size_t n, size_t *ret_off)
{
    size_t off = 0, i, j;

    while (off + 2 <= n) {
        size_t at = find(p + off, n - off, "{{");

        if (at == n - off)
            break;
        at += off;
        j = at + 2;
        while (j < n && (p[j] == ' ' || p[j] == '\t' || p[j] == '-'))
            j++;
        if (j < n && p[j] == '.') {
            j++;
            for (i = 0; i < KP_ARRAY_SIZE(template_fields); i++) {
                size_t fl = strlen(template_fields[i].field);

                if (n - j >= fl && memcmp(p + j, template_fields[i].field, fl) == 0 &&
                    (j + fl == n || !is_ident(p[j + fl]))) {
                    *ret_off = at;
                    return (int)i;
                }
            }
        }
        off = at + 2;
    }
    return -1;
}

/* --- durations --------------------------------------------------------------------------- */

int kp_profile_parse_duration(const char *s, size_t n, uint32_t *ret_seconds)
{
    uint64_t total = 0;
    size_t i = 0;

    if (n == 0)
        return -EINVAL;
    while (i < n) {
        uint64_t num = 0, mult, part;
        size_t start = i;

        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (kp_mul_overflow(num, (uint64_t)10, &num) ||
                kp_add_overflow(num, (uint64_t)(s[i] - '0'), &num))
                return -ERANGE;
            i++;
        }
        if (i == start || i == n)
            return -EINVAL; /* a unit needs a number, a number needs a unit */
        switch (s[i]) {
        case 's':
            mult = 1;
            break;
        case 'm':
            mult = 60;
            break;
        case 'h':
            mult = 3600;
            break;
        default:
            return -EINVAL;
        }
        i++;
        if (kp_mul_overflow(num, mult, &part) || kp_add_overflow(total, part, &total))
            return -ERANGE;
    }
    if (total > UINT32_MAX)
        return -ERANGE;
    *ret_seconds = (uint32_t)total;
    return 0;
}

int kp_profile_timeout(const struct kp_profile_spec *p, enum kp_profile_phase phase,
                       uint32_t *ret_seconds)
{
    static const uint32_t defaults[KP_PROFILE_UNINSTALL] = {
        KP_PROFILE_TIMEOUT_INSTALL_DEFAULT,
        KP_PROFILE_TIMEOUT_JOIN_DEFAULT,
        KP_PROFILE_TIMEOUT_LEAVE_DEFAULT,
    };
    const struct kp_profile_text *t;
    uint32_t secs;
    int r;

    if ((unsigned)phase >= KP_PROFILE_PHASES)
        return -EINVAL;
    if (phase == KP_PROFILE_UNINSTALL)
        phase = KP_PROFILE_LEAVE;
    t = &p->timeouts[phase];
    if (!t->data || t->len == 0) {
        *ret_seconds = defaults[phase];
        return 0;
    }
    if ((r = kp_profile_parse_duration(t->data, t->len, &secs)) < 0)
        return -EINVAL;
    /* The reference falls back to the default for a zero duration ("0s"); so do we. */
    *ret_seconds = secs ? secs : defaults[phase];
    return 0;
}

/* --- validation -------------------------------------------------------------------------- */

/* The CRD's maxLength for a timeout. */
#define KP_MAX_PROFILE_TIMEOUT 32u

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The CRD's rule: the trimmed text starts and ends with the SSHSIG armour lines. Whether the
 * signature verifies is the runner's check (sshsig), at dial time. */
static bool armored(const char *p, size_t n)
{
    static const char begin[] = "-----BEGIN SSH SIGNATURE-----";
    static const char end[] = "-----END SSH SIGNATURE-----";

    while (n && is_space(*p)) {
        p++;
        n--;
    }
    while (n && is_space(p[n - 1]))
        n--;
    return n >= sizeof(begin) - 1 + sizeof(end) - 1 && memcmp(p, begin, sizeof(begin) - 1) == 0 &&
           memcmp(p + n - (sizeof(end) - 1), end, sizeof(end) - 1) == 0;
}

static bool version_ok(const char *v)
{
    size_t n = strlen(v), i;

    if (n == 0 || n > KP_MAX_PROFILE_VERSION)
        return false;
    for (i = 0; i < n; i++) {
        char c = v[i];

        if (!is_ident(c) && c != '.' && c != '-')
            return false;
    }
    return true;
}

static int check_script(const struct kp_profile_spec *p, enum kp_profile_phase ph, char **ret_msg)
{
    const struct kp_profile_text *s = &p->scripts[ph];
    const char *name = phase_names[ph];
    const char *nul;
    size_t off, line, col;
    int t;

    if (!s->data) {
        if (ph == KP_PROFILE_UNINSTALL)
            return 0;
        return profile_fail(ret_msg,
                            "spec.scripts.%s is missing: every profile needs install, "
                            "join and leave scripts (an install with nothing to do can "
                            "be `exit 0`)",
                            name);
    }
    if (s->len == 0)
        return profile_fail(ret_msg,
                            "spec.scripts.%s is empty: write the script, or `exit 0` "
                            "when the phase has nothing to do",
                            name);
    if (s->len > KP_MAX_PROFILE_SCRIPT)
        return profile_fail(ret_msg,
                            "spec.scripts.%s is %zu bytes, more than the limit of %u "
                            "(256 KiB): move large payloads to the host or a download",
                            name, s->len, KP_MAX_PROFILE_SCRIPT);
    nul = memchr(s->data, '\0', s->len);
    if (nul) {
        line_col(s->data, (size_t)(nul - s->data), &line, &col);
        return profile_fail(ret_msg,
                            "spec.scripts.%s:%zu:%zu: the script holds a NUL byte, "
                            "which bash cannot run",
                            name, line, col);
    }
    t = find_template(s->data, s->len, &off);
    if (t >= 0) {
        line_col(s->data, off, &line, &col);
        return profile_fail(ret_msg,
                            "spec.scripts.%s:%zu:%zu: {{ .%s }} is a template, but "
                            "kpssh profiles are plain scripts: read \"$%s\" from the "
                            "environment instead",
                            name, line, col, template_fields[t].field, template_fields[t].env);
    }
    return 0;
}

/* The leave contract: leave runs with no node class in hand (a release, the zombie guard), so a
 * leave script may not use KPSSH_VAR_* or KPSSH_SECRET_*, and one that mentions either makes the
 * profile invalid (docs/join-profiles.md). */
static int check_leave(const struct kp_profile_spec *p, char **ret_msg)
{
    static const char *const banned[] = {"KPSSH_VAR_", "KPSSH_SECRET_"};
    const struct kp_profile_text *s = &p->scripts[KP_PROFILE_LEAVE];
    size_t best = s->len, i, end, line, col;

    for (i = 0; i < KP_ARRAY_SIZE(banned); i++) {
        size_t at = find(s->data, s->len, banned[i]);

        if (at < best)
            best = at;
    }
    if (best == s->len)
        return 0;
    end = best;
    while (end < s->len && is_ident(s->data[end]) && end - best < KP_PROFILE_QUOTE_MAX)
        end++;
    line_col(s->data, best, &line, &col);
    return profile_fail(ret_msg,
                        "spec.scripts.leave:%zu:%zu: leave mentions %.*s, but leave runs "
                        "without a node class (on release and from the zombie guard), "
                        "so no KPSSH_VAR_* or KPSSH_SECRET_* is ever set there; only "
                        "KPSSH_HOST_ADDRESS and KPSSH_NODE_ADDRESS have values. Make "
                        "leave self-contained, or have join record what leave needs on "
                        "the host",
                        line, col, (int)(end - best), s->data + best);
}

int kp_profile_validate(const struct kp_profile_spec *p, char **ret_msg)
{
    enum kp_profile_phase ph;
    uint32_t secs;
    int r;

    for (ph = KP_PROFILE_INSTALL; ph < KP_PROFILE_PHASES; ph++) {
        if ((r = check_script(p, ph, ret_msg)) < 0)
            return r;
    }
    if ((r = check_leave(p, ret_msg)) < 0)
        return r;
    if (p->version && p->version[0] != '\0' && !version_ok(p->version))
        return profile_fail(ret_msg,
                            "spec.version \"%.*s\" is invalid: use 1 to 63 of "
                            "A-Z a-z 0-9 . _ - (for example \"1\" or \"2024.06-rc1\")",
                            (int)KP_MIN(strlen(p->version), (size_t)KP_PROFILE_QUOTE_MAX),
                            p->version);
    for (ph = KP_PROFILE_INSTALL; ph < KP_PROFILE_UNINSTALL; ph++) {
        const struct kp_profile_text *t = &p->timeouts[ph];

        if (!t->data)
            continue;
        r = kp_profile_parse_duration(t->data, t->len, &secs);
        if (r == -ERANGE)
            return profile_fail(ret_msg, "spec.timeouts.%s is too long: stay below 136 years",
                                phase_names[ph]);
        if (r < 0)
            return profile_fail(ret_msg,
                                "spec.timeouts.%s \"%.*s\" is not a duration: write "
                                "whole numbers with s, m or h, such as 90s, 10m or "
                                "1h30m (no fractions, no ms, no bare numbers)",
                                phase_names[ph], (int)KP_MIN(t->len, (size_t)KP_PROFILE_QUOTE_MAX),
                                t->data);
    }
    for (ph = KP_PROFILE_INSTALL; ph < KP_PROFILE_PHASES; ph++) {
        if (p->signatures[ph].data && p->signatures[ph].len > KP_MAX_PROFILE_SIGNATURE)
            return profile_fail(ret_msg,
                                "spec.signatures.%s is %zu bytes, more than the limit of "
                                "%u: it should be one armored SSH SIGNATURE block",
                                phase_names[ph], p->signatures[ph].len, KP_MAX_PROFILE_SIGNATURE);
    }
    return 0;
}

int kp_profile_marker(const struct kp_profile_spec *p, char **ret_marker)
{
    const char *v = p->version && p->version[0] != '\0' ? p->version : "1";
    char *m;

    if (!p->name || p->name[0] == '\0')
        return -EINVAL;
    m = kp_strjoin(p->name, "@", v, (const char *)NULL);
    if (!m)
        return -ENOMEM;
    *ret_marker = m;
    return 0;
}

/* --- the cached projection ------------------------------------------------------------------ */

/* The phase enums of both headers must agree, as the copy below indexes one by the other. */
_Static_assert((int)KP_SJP_INSTALL == (int)KP_PROFILE_INSTALL &&
                   (int)KP_SJP_UNINSTALL == (int)KP_PROFILE_UNINSTALL &&
                   (int)KP_SJP_PHASES == (int)KP_PROFILE_PHASES,
               "SSHJoinProfile phases differ between provider/ssh/obj-kpssh.h and profile.h");

void kp_profile_spec_from_view(const struct kp_sshjoinprofile_view *v, struct kp_profile_spec *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->name = v->e.name;
    ret->version = v->version;
    for (size_t i = 0; i < KP_PROFILE_PHASES; i++) {
        ret->scripts[i].data = v->scripts[i].data;
        ret->scripts[i].len = v->scripts[i].len;
        ret->signatures[i].data = v->signatures[i].data;
        ret->signatures[i].len = v->signatures[i].len;
    }
    for (size_t i = 0; i < KP_PROFILE_UNINSTALL; i++) {
        ret->timeouts[i].data = v->timeouts[i].data;
        ret->timeouts[i].len = v->timeouts[i].len;
    }
}

/* A line of the view report. 0 or the kp_buf error. */
static int view_line(struct kp_buf *msg, const char *line)
{
    int r;

    if (!msg)
        return 0;
    r = kp_buf_puts(msg, line);
    if (r == 0)
        r = kp_buf_putc(msg, '\n');
    return r;
}

int kp_profile_validate_view(const struct kp_sshjoinprofile_view *v, struct kp_buf *msg)
{
    static const char *const sig_paths[KP_PROFILE_PHASES] = {
        "spec.signatures.install", "spec.signatures.join", "spec.signatures.leave",
        "spec.signatures.uninstall"};
    struct kp_profile_spec spec;
    char *why = NULL;
    int r, q = 0, count = 0;

    kp_profile_spec_from_view(v, &spec);
    r = kp_profile_validate(&spec, &why);
    if (r < 0 && r != -EINVAL)
        goto out;
    if (r == -EINVAL) {
        count++;
        q = view_line(msg, why ? why : "spec: invalid profile");
    }
    /* The CRD's syntax rules that the runner's contract check leaves alone: the runner verifies
     * signatures itself (sshsig) when a Verified host needs them, so an unarmoured signature
     * fails there too, but the report should name it now. */
    for (size_t i = 0; i < KP_PROFILE_PHASES && q == 0; i++) {
        const struct kp_profile_text *sig = &spec.signatures[i];

        if (!sig->data || sig->len > KP_MAX_PROFILE_SIGNATURE || armored(sig->data, sig->len))
            continue;
        count++;
        if (msg && (q = kp_buf_printf(msg,
                                      "%s: signatures must be armored SSHSIG text from "
                                      "ssh-keygen -Y sign -n kpssh, from -----BEGIN SSH "
                                      "SIGNATURE----- to -----END SSH SIGNATURE-----\n",
                                      sig_paths[i])) < 0)
            break;
    }
    if (q == 0 && spec.signatures[KP_PROFILE_UNINSTALL].data &&
        !spec.scripts[KP_PROFILE_UNINSTALL].data) {
        count++;
        q = view_line(msg, "spec.signatures.uninstall: signatures.uninstall is set but "
                           "scripts.uninstall is not; remove the signature or add the script");
    }
    for (size_t i = 0; i < KP_PROFILE_UNINSTALL && q == 0; i++) {
        if (!spec.timeouts[i].data || spec.timeouts[i].len <= KP_MAX_PROFILE_TIMEOUT)
            continue;
        count++;
        if (msg)
            q = kp_buf_printf(msg, "spec.timeouts.%s: must be at most %u characters\n",
                              phase_names[i], KP_MAX_PROFILE_TIMEOUT);
    }
    r = q < 0 ? q : count;
out:
    kp_free(why);
    return r;
}
