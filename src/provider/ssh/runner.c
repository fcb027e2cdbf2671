/* DESIGN: the phase runner (runner.h).
 *
 * What: turns a phase (script, KPSSH_* variables, secrets, deadline) into one stdin stream and
 * one fixed command line, runs it over a fresh session, and turns the outcome into a return
 * code and an error text a user can act on without ever seeing a secret.
 *
 * Why this way:
 * - The stream is built and checked completely before dialing: a bad variable name is a
 *   configuration error, and refusing it must not depend on the host being up (and must not
 *   cost a connection). The buffer that holds it is sized once (no realloc leaving copies of
 *   secret values behind) and wiped after use.
 * - Quoting is single quotes with ' written as '\'' : inside single quotes bash interprets
 *   nothing, so any byte but NUL is safe, newlines included. Names are restricted to
 *   KPSSH_[A-Za-z0-9_]+, which is both what the shim accepts (rule 11) and what keeps a profile
 *   from setting the variables bash or the loader act on (BASH_ENV, LD_PRELOAD, PATH, IFS).
 * - sshd sends no signal to a command without a pty when the client goes away; the command
 *   only notices if it reads stdin or writes output. A pty would merge stderr into stdout and
 *   echo the script. So the preamble starts a small watchdog, detached so that a script's own
 *   `wait` does not wait for it: it finds the sshd process above the shell, and when that
 *   process is gone (the connection closed, e.g. by our deadline) it sends HUP and TERM, then
 *   KILL, to the shell's process group. It polls once a second and exits when the shell does.
 *   Without an sshd ancestor (some unusual login setup) it does nothing.
 * - Redaction works on values, longest first, so a token and its secret half both disappear.
 *   The captured tails are redacted in place before the caller sees them, because the caller
 *   may relay stderr into logs and events; a tail that was truncated first loses as many
 *   leading bytes as the longest secret has minus one, so no secret survives in part.
 *
 * Threads: no shared state; each call uses its own session on the caller's thread. */
#include "provider/ssh/runner.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/secret.h"
#include "k8s/fence.h"

#define KP_RUNNER_ERRTEXT_MAX (8 * 1024)
#define KP_REDACTED "[REDACTED]"

static const char kp_preamble_head[] = "set -euo pipefail\n";

/* The hang-up watchdog (see DESIGN). It runs with its own stdio on /dev/null so it never holds
 * the channel's streams open, ignores the signals it sends, and reads /proc with builtins only.
 * In the subshell $$ and $PPID still name the phase's shell and that shell's parent. */
static const char kp_preamble_watchdog[] =
    "( ( exec </dev/null >/dev/null 2>&1; trap '' HUP TERM INT; set +eu\n"
    "  m=$$; a=$PPID\n"
    "  while [ \"${a:-0}\" -gt 1 ]; do\n"
    "    read -r c < \"/proc/$a/comm\" || exit 0\n"
    "    case $c in sshd*) break ;; esac\n"
    "    read -r s < \"/proc/$a/stat\" || exit 0; s=${s##*) }; set -- $s; a=$2\n"
    "  done\n"
    "  [ \"${a:-0}\" -gt 1 ] || exit 0\n"
    "  read -r s < \"/proc/$m/stat\" || exit 0; s=${s##*) }; set -- $s; g=$3\n"
    "  while [ -e \"/proc/$m\" ]; do\n"
    "    if [ ! -e \"/proc/$a\" ]; then\n"
    "      kill -HUP -- \"-$g\"; kill -TERM -- \"-$g\"; sleep 2; kill -KILL -- \"-$g\"; exit 0\n"
    "    fi\n"
    "    sleep 1\n"
    "  done ) & )\n";

bool kp_ssh_env_name_ok(const char *name)
{
    size_t n;

    if (!name || strncmp(name, "KPSSH_", 6) != 0)
        return false;
    n = strlen(name);
    if (n == 6 || n > KP_SSH_ENV_NAME_MAX)
        return false;
    for (size_t i = 6; i < n; i++) {
        char c = name[i];

        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

/* A printable rendering of an untrusted name for error texts: at most 64 bytes, anything but
 * printable ASCII as '?'. */
static void kp_runner_safe_name(const char *name, char out[68])
{
    size_t i = 0;

    for (; name && name[i] && i < 64; i++)
        out[i] = (name[i] >= 0x20 && name[i] < 0x7f) ? name[i] : '?';
    if (name && name[i])
        out[i++] = '.', out[i++] = '.', out[i++] = '.';
    out[i] = '\0';
}

static const char *kp_var_value(const struct kp_ssh_var *v, size_t *ret_len)
{
    if (v->secret) {
        *ret_len = kp_secret_len(v->secret);
        return kp_secret_reveal(v->secret);
    }
    *ret_len = strlen(v->value);
    return v->value;
}

static int kp_var_cmp(const void *a, const void *b)
{
    const struct kp_ssh_var *const *x = a, *const *y = b;

    return strcmp((*x)->name, (*y)->name);
}

/* Validates vars and returns them sorted by name in a new array (kp_free it). */
static int kp_vars_sorted(const struct kp_ssh_var *vars, size_t n,
                          const struct kp_ssh_var ***ret_sorted, char **ret_msg)
{
    const struct kp_ssh_var **sorted = NULL;
    char safe[68];
    int r;

    sorted = kp_calloc(n ? n : 1, sizeof(*sorted));
    if (!sorted) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const struct kp_ssh_var *v = &vars[i];
        const char *val;
        size_t len;

        if (!kp_ssh_env_name_ok(v->name)) {
            kp_runner_safe_name(v->name, safe);
            kp_msg_set(ret_msg,
                       "environment variable name \"%s\" is not allowed (names must "
                       "match ^KPSSH_[A-Za-z0-9_]+$)",
                       safe);
            r = -EINVAL;
            goto out;
        }
        if (!v->value == !v->secret) {
            kp_msg_set(ret_msg, "environment variable %s needs exactly one value", v->name);
            r = -EINVAL;
            goto out;
        }
        val = kp_var_value(v, &len);
        if (memchr(val, '\0', len)) {
            kp_msg_set(ret_msg, "environment variable %s has a NUL byte in its value", v->name);
            r = -EINVAL;
            goto out;
        }
        sorted[i] = v;
    }
    if (n > 1)
        qsort(sorted, n, sizeof(*sorted), kp_var_cmp);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
            kp_msg_set(ret_msg, "environment variable %s is given twice", sorted[i]->name);
            r = -EINVAL;
            goto out;
        }
    }
    *ret_sorted = sorted;
    sorted = NULL;
    r = 0;
out:
    kp_free(sorted);
    return r;
}

int kp_ssh_phase_validate(const struct kp_ssh_phase *ph, char **ret_msg)
{
    const struct kp_ssh_var **sorted = NULL;
    char *why = NULL;
    const char *name = (ph->name && *ph->name) ? ph->name : "unnamed";
    int r;

    if (!ph->name || !*ph->name || !ph->script || ph->script_len == 0) {
        kp_msg_set(ret_msg, "%s phase: no script to run", name);
        r = -EINVAL;
        goto out;
    }
    if (ph->script_len > KP_MAX_PHASE_SCRIPT) {
        kp_msg_set(ret_msg, "%s phase: script of %zu bytes exceeds the %u-byte limit", name,
                   ph->script_len, (unsigned)KP_MAX_PHASE_SCRIPT);
        r = -KP_ELIMIT;
        goto out;
    }
    if (memchr(ph->script, '\0', ph->script_len)) {
        kp_msg_set(ret_msg, "%s phase: script holds a NUL byte", name);
        r = -EINVAL;
        goto out;
    }
    if ((r = kp_vars_sorted(ph->vars, ph->nvars, &sorted, &why)) < 0) {
        kp_msg_set(ret_msg, "%s phase: %s", name, why ? why : kp_strerror(r));
        goto out;
    }
    r = 0;
out:
    kp_free(why);
    kp_free(sorted);
    return r;
}

static size_t kp_quoted_len(const char *p, size_t n)
{
    size_t q = 0;

    for (size_t i = 0; i < n; i++)
        if (p[i] == '\'')
            q++;
    return n + 3 * q; /* each ' becomes '\'' */
}

int kp_ssh_preamble(const struct kp_ssh_var *vars, size_t nvars, struct kp_buf *out)
{
    const struct kp_ssh_var **sorted = NULL;
    size_t total = sizeof(kp_preamble_head) - 1 + sizeof(kp_preamble_watchdog) - 1;
    int r;

    if ((r = kp_vars_sorted(vars, nvars, &sorted, /* ret_msg= */ NULL)) < 0)
        goto out;
    /* Size everything first: one allocation, so no realloc leaves a copy of a secret behind. */
    for (size_t i = 0; i < nvars; i++) {
        size_t len, line;
        const char *val = kp_var_value(sorted[i], &len);

        line = sizeof("export ='\n") + strlen(sorted[i]->name) + kp_quoted_len(val, len);
        if (kp_add_overflow(total, line, &total)) {
            r = -KP_ELIMIT;
            goto out;
        }
    }
    if ((r = kp_buf_reserve(out, total)) < 0 || (r = kp_buf_puts(out, kp_preamble_head)) < 0 ||
        (r = kp_buf_puts(out, kp_preamble_watchdog)) < 0)
        goto out;
    for (size_t i = 0; i < nvars; i++) {
        size_t len, start = 0;
        const char *val = kp_var_value(sorted[i], &len);

        if ((r = kp_buf_printf(out, "export %s='", sorted[i]->name)) < 0)
            goto out;
        for (size_t k = 0; k <= len; k++) {
            if (k < len && val[k] != '\'')
                continue;
            if ((r = kp_buf_append(out, val + start, k - start)) < 0)
                goto out;
            if (k < len && (r = kp_buf_puts(out, "'\\''")) < 0)
                goto out;
            start = k + 1;
        }
        if ((r = kp_buf_puts(out, "'\n")) < 0)
            goto out;
    }
    r = 0;
out:
    kp_free(sorted);
    return r;
}

static const char *const kp_envelope_phases[] = {"probe", "install", "join", "leave", "uninstall"};

/* Appends "<field>: <base64 of p[n]>\n". */
static int kp_envelope_field(struct kp_buf *out, const char *field, const void *p, size_t n)
{
    int r;

    if ((r = kp_buf_printf(out, "%s: ", field)) < 0 || (r = kp_base64_encode(p, n, 0, out)) < 0 ||
        (r = kp_buf_putc(out, '\n')) < 0)
        return r;
    return 0;
}

int kp_ssh_envelope(const char *phase, const struct kp_ssh_var *vars, size_t nvars,
                    const char *script, size_t script_len, const char *sig, size_t sig_len,
                    struct kp_buf *out, char **ret_msg)
{
    const struct kp_ssh_var **sorted = NULL;
    struct kp_buf params = KP_BUF_INIT(KP_ENVELOPE_MAX_PARAMS);
    bool known = false, probe = phase && strcmp(phase, "probe") == 0;
    size_t params_len = 0, total;
    char *why = NULL;
    int r;

    for (size_t i = 0; phase && i < KP_ARRAY_SIZE(kp_envelope_phases); i++)
        known = known || strcmp(phase, kp_envelope_phases[i]) == 0;
    if (!known) {
        kp_msg_set(ret_msg, "envelope: unknown phase \"%s\"", phase ? phase : "");
        r = -EINVAL;
        goto out;
    }
    if (probe ? (nvars || script || sig)
              : (!script || !script_len || !sig || !sig_len || memchr(script, '\0', script_len))) {
        kp_msg_set(ret_msg,
                   probe ? "envelope: a probe carries no script, signature or variables"
                         : "envelope: %s needs a script (no NUL byte) and its signature",
                   phase);
        r = -EINVAL;
        goto out;
    }
    if ((r = kp_vars_sorted(vars, nvars, &sorted, &why)) < 0) {
        kp_msg_set(ret_msg, "envelope: %s", why ? why : kp_strerror(r));
        goto out;
    }
    /* Sized first, then written into buffers reserved once: no realloc leaves a copy of a
     * secret value behind (as kp_ssh_preamble). */
    for (size_t i = 0; i < nvars; i++) {
        size_t len;
        const char *val = kp_var_value(sorted[i], &len);

        if (memchr(val, '\n', len)) {
            kp_msg_set(ret_msg,
                       "envelope: variable %s holds a newline, which a Verified host's shim "
                       "cannot take (one variable per line)",
                       sorted[i]->name);
            r = -EINVAL;
            goto out;
        }
        params_len += strlen(sorted[i]->name) + len + 2; /* each under 1 MiB: no overflow */
        if (params_len > KP_ENVELOPE_MAX_PARAMS) {
            kp_msg_set(ret_msg,
                       "envelope: the variables take more than the %u bytes a Verified host's "
                       "shim accepts",
                       (unsigned)KP_ENVELOPE_MAX_PARAMS);
            r = -EINVAL;
            goto out;
        }
    }
    total = sizeof("kpssh-envelope: 1\nphase: \n") + strlen(phase) + sizeof("params-b64: \n") +
            kp_base64_encoded_len(params_len, 0);
    if (!probe)
        total += sizeof("sig-b64: \n") + kp_base64_encoded_len(sig_len, 0) +
                 sizeof("script-b64: \n") + kp_base64_encoded_len(script_len, 0);
    if ((r = kp_buf_reserve(&params, params_len)) < 0 || (r = kp_buf_reserve(out, total)) < 0)
        goto out;
    for (size_t i = 0; i < nvars; i++) {
        size_t len;
        const char *val = kp_var_value(sorted[i], &len);

        if ((r = kp_buf_puts(&params, sorted[i]->name)) < 0 ||
            (r = kp_buf_putc(&params, '=')) < 0 || (r = kp_buf_append(&params, val, len)) < 0 ||
            (r = kp_buf_putc(&params, '\n')) < 0)
            goto out;
    }
    if ((r = kp_buf_printf(out, "kpssh-envelope: 1\nphase: %s\n", phase)) < 0)
        goto out;
    if (params.len && (r = kp_envelope_field(out, "params-b64", params.data, params.len)) < 0)
        goto out;
    if (!probe && ((r = kp_envelope_field(out, "sig-b64", sig, sig_len)) < 0 ||
                   (r = kp_envelope_field(out, "script-b64", script, script_len)) < 0))
        goto out;
    r = 0;
out:
    if (r == -KP_ELIMIT || r == -ENOMEM)
        kp_msg_set(ret_msg, "envelope: %s",
                   r == -KP_ELIMIT ? "variables and script exceed the input limit"
                                   : kp_strerror(r));
    kp_buf_wipe(&params);
    kp_free(sorted);
    kp_free(why);
    return r;
}

const char *kp_ssh_phase_command(const char *user)
{
    if (!user || !*user || strcmp(user, "root") == 0)
        return "bash -s";
    /* -n: fail at once instead of prompting for a password nobody will type. */
    return "sudo -n bash -s";
}

struct kp_redact_item {
    const char *p;
    size_t n;
};

static int kp_redact_item_cmp(const void *a, const void *b)
{
    const struct kp_redact_item *x = a, *y = b;
    int c;

    if (x->n != y->n)
        return x->n > y->n ? -1 : 1; /* longest first */
    c = memcmp(x->p, y->p, x->n);
    return c;
}

static bool kp_is_token_shaped(const char *p, size_t n)
{
    if (n != 23 || p[6] != '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (i == 6)
            continue;
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9')))
            return false;
    }
    return true;
}

static void kp_redact_push(struct kp_redact_item *items, size_t *n, const char *p, size_t len)
{
    if (len < KP_LOG_REDACT_MIN)
        return;
    items[(*n)++] = (struct kp_redact_item){p, len};
    /* A bootstrap token "<id>.<secret>": its secret half alone is a secret too. */
    if (kp_is_token_shaped(p, len))
        items[(*n)++] = (struct kp_redact_item){p + 7, 16};
}

/* The values to redact for ph, longest first, in a new array (kp_free it). */
static int kp_redact_items(const struct kp_ssh_phase *ph, struct kp_redact_item **ret,
                           size_t *ret_n)
{
    struct kp_redact_item *items;
    size_t n = 0, cap;

    if (kp_add_overflow(ph->nsecrets, ph->nvars, &cap) || kp_mul_overflow(cap, (size_t)2, &cap))
        return -ENOMEM;
    items = kp_calloc(cap ? cap : 1, sizeof(*items));
    if (!items)
        return -ENOMEM;
    for (size_t i = 0; i < ph->nsecrets; i++)
        if (ph->secrets[i])
            kp_redact_push(items, &n, kp_secret_reveal(ph->secrets[i]),
                           kp_secret_len(ph->secrets[i]));
    for (size_t i = 0; i < ph->nvars; i++)
        if (ph->vars[i].secret)
            kp_redact_push(items, &n, kp_secret_reveal(ph->vars[i].secret),
                           kp_secret_len(ph->vars[i].secret));
    if (n > 1)
        qsort(items, n, sizeof(*items), kp_redact_item_cmp);
    *ret = items;
    *ret_n = n;
    return 0;
}

int kp_ssh_redact(const char *p, size_t n, bool cut_front, const struct kp_ssh_phase *ph,
                  struct kp_buf *out)
{
    struct kp_redact_item *items = NULL;
    struct kp_buf cur, next;
    size_t nitems = 0, limit;
    int r;

    /* "[REDACTED]" is longer than a secret of 8 or 9 bytes: leave room for that growth. */
    if (kp_mul_overflow(n, (size_t)2, &limit) || kp_add_overflow(limit, (size_t)64, &limit))
        return -KP_ELIMIT;
    kp_buf_init(&cur, limit);
    kp_buf_init(&next, limit);
    if ((r = kp_redact_items(ph, &items, &nitems)) < 0)
        goto out;
    if (cut_front && nitems > 0) {
        size_t drop = KP_MIN(items[0].n - 1, n);

        p += drop;
        n -= drop;
    }
    if ((r = kp_buf_append(&cur, p, n)) < 0)
        goto out;
    for (size_t i = 0; i < nitems; i++) {
        const char *s = kp_buf_str(&cur), *end = s + cur.len, *hit;

        if (!memmem(s, cur.len, items[i].p, items[i].n))
            continue;
        kp_buf_reset(&next);
        while ((hit = memmem(s, (size_t)(end - s), items[i].p, items[i].n))) {
            if ((r = kp_buf_append(&next, s, (size_t)(hit - s))) < 0 ||
                (r = kp_buf_puts(&next, KP_REDACTED)) < 0)
                goto out;
            s = hit + items[i].n;
        }
        if ((r = kp_buf_append(&next, s, (size_t)(end - s))) < 0)
            goto out;
        /* Swap: the text with this secret gone becomes the current one. */
        kp_buf_wipe(&cur);
        cur = next;
        kp_buf_init(&next, limit);
    }
    r = kp_buf_append(out, kp_buf_str(&cur), cur.len);
out:
    kp_buf_wipe(&cur);
    kp_buf_wipe(&next);
    kp_free(items);
    return r;
}

/* Redacts one capture stream in place, keeping its tail within its ceiling. */
static int kp_redact_stream(struct kp_buf *b, const struct kp_ssh_phase *ph)
{
    struct kp_buf tmp;
    bool truncated = b->truncated;
    size_t limit;
    int r;

    if (b->len == 0)
        return 0;
    if (kp_mul_overflow(b->len, (size_t)2, &limit) || kp_add_overflow(limit, (size_t)64, &limit))
        return -KP_ELIMIT;
    kp_buf_init(&tmp, limit);
    r = kp_ssh_redact(b->data, b->len, truncated, ph, &tmp);
    kp_buf_wipe(b);
    if (r == 0)
        r = kp_buf_append_tail(b, kp_buf_str(&tmp), tmp.len);
    b->truncated = b->truncated || truncated;
    kp_buf_wipe(&tmp);
    return r;
}

/* The last KP_PHASE_ERROR_TAIL characters of already-redacted stderr, trimmed, not starting
 * inside a UTF-8 sequence. */
static const char *kp_stderr_tail(const struct kp_buf *err, size_t *ret_len, bool *ret_cut)
{
    const char *s = kp_buf_str(err);
    size_t len = err->len, start = 0;

    while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' '))
        len--;
    if (len > KP_PHASE_ERROR_TAIL)
        start = len - KP_PHASE_ERROR_TAIL;
    while (start < len && ((unsigned char)s[start] & 0xc0) == 0x80)
        start++;
    *ret_len = len - start;
    *ret_cut = start > 0 || err->truncated;
    return s + start;
}

/* Builds the final error text from an outcome ("<what><detail>") and redacts it once more. */
static void kp_phase_errtext_detail(char **ret_msg, const struct kp_ssh_phase *ph,
                                    const struct kp_ssh_capture *cap, const char *what,
                                    const char *detail)
{
    struct kp_buf b = KP_BUF_INIT(KP_RUNNER_ERRTEXT_MAX),
                  red = KP_BUF_INIT(KP_RUNNER_ERRTEXT_MAX * 2 + 64);
    const char *tail = NULL;
    size_t tlen = 0;
    bool cut = false;
    int r;

    if (!ret_msg)
        return;
    if (cap)
        tail = kp_stderr_tail(&cap->err, &tlen, &cut);
    r = kp_buf_printf(&b, "%s phase: %s%s", ph->name ? ph->name : "unnamed", what, detail);
    if (r == 0 && tlen > 0)
        r = kp_buf_printf(&b, ": %s%.*s", cut ? "..." : "", (int)tlen, tail);
    if (r == 0)
        r = kp_ssh_redact(kp_buf_str(&b), b.len, false, ph, &red);
    kp_free(*ret_msg);
    *ret_msg = r < 0 ? NULL : kp_buf_steal(&red, NULL);
    kp_buf_wipe(&b);
    kp_buf_wipe(&red);
}

/* What kpssh-shim's exit codes mean (its documented protocol, cmd/shim). */
static const char *kp_shim_exit_text(int status)
{
    switch (status) {
    case 1:
        return "internal error on the host";
    case 2:
        return "signature rejected";
    case 3:
        return "bad parameter";
    case 4:
        return "malformed envelope";
    case 5:
        return "unknown phase";
    case 10:
        return "signed script failed";
    default:
        return "unexpected exit status";
    }
}

/* How a command that did not exit 0 ended, for an error text: who ("script", "command",
 * "kpssh-shim") killed by a signal or without a status, the shim's own code explained, or who
 * exited with status N. */
static void kp_exit_what(const struct kp_ssh_capture *cap, const char *who, bool shim, char *what,
                         size_t size)
{
    if (cap->exit_signal)
        (void)snprintf(what, size, "%s killed by signal %s", who, cap->exit_signal);
    else if (cap->exit_status < 0)
        (void)snprintf(what, size, "%s ended without an exit status", who);
    else if (shim)
        (void)snprintf(what, size, "kpssh-shim exited %d (%s)", cap->exit_status,
                       kp_shim_exit_text(cap->exit_status));
    else
        (void)snprintf(what, size, "%s exited with status %d", who, cap->exit_status);
}

static void kp_phase_errtext(char **ret_msg, const struct kp_ssh_phase *ph,
                             const struct kp_ssh_capture *cap, const char *what)
{
    kp_phase_errtext_detail(ret_msg, ph, cap, what, "");
}

int kp_ssh_run_phase(const struct kp_ssh_target *t, const struct kp_ssh_phase *ph,
                     struct kp_ssh_capture *cap, char **ret_msg)
{
    struct kp_buf stream = KP_BUF_INIT(KP_MAX_PHASE_INPUT);
    struct kp_ssh_session *s = NULL;
    char *err = NULL, what[96];
    int r, rr;

    if ((r = kp_ssh_phase_validate(ph, ret_msg)) < 0)
        goto out; /* its text already names the phase */
    /* A replica that no longer holds the Lease starts no phase: another may be starting the
     * same host's. Checked before the dial and again just before the script is sent. */
    if ((r = kp_fence_check(t->fence)) < 0) {
        kp_phase_errtext(ret_msg, ph, NULL, "not the leader: phase not started");
        goto out;
    }
    if (ph->shim) {
        if ((r = kp_ssh_envelope(ph->name, ph->vars, ph->nvars, ph->script, ph->script_len,
                                 ph->signature, ph->signature_len, &stream, &err)) < 0) {
            kp_phase_errtext(ret_msg, ph, NULL, err ? err : kp_strerror(r));
            goto out;
        }
    } else if ((r = kp_ssh_preamble(ph->vars, ph->nvars, &stream)) < 0 ||
               (r = kp_buf_append(&stream, ph->script, ph->script_len)) < 0) {
        kp_phase_errtext(ret_msg, ph, NULL,
                         r == -KP_ELIMIT ? "environment and script exceed the 1 MiB input limit"
                                         : kp_strerror(r));
        goto out;
    }
    if ((r = kp_ssh_connect(t, ph->deadline, &s, &err)) < 0) {
        kp_phase_errtext(ret_msg, ph, NULL, err ? err : kp_strerror(r));
        goto out;
    }
    memcpy(cap->fp, kp_ssh_session_fingerprint(s), KP_SSH_FP_SIZE);
    cap->pin = kp_ssh_session_pin(s);
    if ((r = kp_fence_check(t->fence)) < 0) {
        kp_phase_errtext(ret_msg, ph, NULL, "not the leader: phase not started");
        goto out;
    }

    r = kp_ssh_exec(s, ph->shim ? ph->shim : kp_ssh_phase_command(t->user), stream.data, stream.len,
                    ph->deadline, cap, &err);
    /* The caller may relay what was captured: scrub it whatever happened. */
    if ((rr = kp_redact_stream(&cap->out, ph)) < 0 || (rr = kp_redact_stream(&cap->err, ph)) < 0)
        r = r < 0 ? r : rr;
    if (r == -ETIMEDOUT) {
        /* The session's text says how far the exec got (see kp_ssh_exec_timeout). */
        kp_phase_errtext_detail(ret_msg, ph, cap,
                                "script timed out: ", err ? err : "connection closed");
        goto out;
    }
    if (r < 0) {
        kp_phase_errtext(ret_msg, ph, cap, err ? err : kp_strerror(r));
        goto out;
    }
    if (cap->exit_status != 0) {
        kp_exit_what(cap, "script", ph->shim != NULL, what, sizeof(what));
        kp_phase_errtext(ret_msg, ph, cap, what);
        r = -KP_ESCRIPT;
        goto out;
    }
    r = 0;
out:
    kp_buf_wipe(&stream);
    kp_ssh_session_free(s);
    kp_free(err);
    return r;
}

/* One short exchange: dial, run command with input (may be empty), capture. who names the
 * program in error texts ("command", "kpssh-shim"); shim codes are explained when is_shim. */
static int kp_exec_short(const struct kp_ssh_target *t, const char *command, const char *input,
                         size_t input_len, struct kp_deadline deadline, struct kp_ssh_capture *cap,
                         bool is_shim, char **ret_msg)
{
    static const struct kp_ssh_phase probe = {.name = "probe"};
    const char *who = is_shim ? "kpssh-shim" : "command";
    struct kp_ssh_session *s = NULL;
    char *err = NULL, what[96];
    int r;

    if ((r = kp_ssh_connect(t, deadline, &s, &err)) < 0) {
        kp_phase_errtext(ret_msg, &probe, NULL, err ? err : kp_strerror(r));
        goto out;
    }
    memcpy(cap->fp, kp_ssh_session_fingerprint(s), KP_SSH_FP_SIZE);
    cap->pin = kp_ssh_session_pin(s);
    r = kp_ssh_exec(s, command, input, input_len, deadline, cap, &err);
    if (r == -ETIMEDOUT) {
        (void)snprintf(what, sizeof(what), "%s timed out: ", who);
        kp_phase_errtext_detail(ret_msg, &probe, cap, what, err ? err : "connection closed");
        goto out;
    }
    if (r < 0) {
        kp_phase_errtext(ret_msg, &probe, cap, err ? err : kp_strerror(r));
        goto out;
    }
    if (cap->exit_status != 0) {
        kp_exit_what(cap, who, is_shim, what, sizeof(what));
        kp_phase_errtext(ret_msg, &probe, cap, what);
        r = -KP_ESCRIPT;
        goto out;
    }
    r = 0;
out:
    kp_ssh_session_free(s);
    kp_free(err);
    return r;
}

int kp_ssh_exec_capture(const struct kp_ssh_target *t, const char *command,
                        struct kp_deadline deadline, struct kp_ssh_capture *cap, char **ret_msg)
{
    size_t len = command ? strnlen(command, KP_MAX_PROBE_COMMAND + 1) : 0;

    if (len == 0 || len > KP_MAX_PROBE_COMMAND) {
        kp_msg_set(ret_msg, "probe: command is empty or longer than %u bytes",
                   (unsigned)KP_MAX_PROBE_COMMAND);
        return -EINVAL;
    }
    return kp_exec_short(t, command, /* input= */ NULL, 0, deadline, cap, false, ret_msg);
}

int kp_ssh_probe_shim(const struct kp_ssh_target *t, const char *shim, struct kp_deadline deadline,
                      struct kp_ssh_capture *cap, char **ret_msg)
{
    static const char envelope[] = "kpssh-envelope: 1\nphase: probe\n";
    size_t len = shim ? strnlen(shim, KP_MAX_PROBE_COMMAND + 1) : 0;

    if (len == 0 || len > KP_MAX_PROBE_COMMAND) {
        kp_msg_set(ret_msg, "probe: shim command is empty or longer than %u bytes",
                   (unsigned)KP_MAX_PROBE_COMMAND);
        return -EINVAL;
    }
    return kp_exec_short(t, shim, envelope, sizeof(envelope) - 1, deadline, cap, true, ret_msg);
}
