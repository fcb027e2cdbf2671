/* DESIGN: `kpssh profile lint|sign|verify`, the author's side of verified execution.
 *
 * What: lint checks an SSHJoinProfile manifest against the script contract (template-free
 * scripts, a leave script without per-class values, the controller's own profile validator, and
 * shellcheck when it is installed); sign runs `ssh-keygen -Y sign -n kpssh` over each script's
 * exact bytes and writes the manifest back with spec.signatures set; verify checks each
 * signature with the controller's verifier (provider/ssh/sshsig.h) against a signers file.
 *
 * Why this way: the manifest is read with yaml/ (positions for file:line messages, and the
 * scripts' bytes exactly as the API server will store them) and checked with the same functions
 * the controller runs (kp_profile_validate_view, kp_sshsig_verify), so "lint passes" and "verify
 * passes" mean what the controller will decide. sign edits the manifest as text rather than
 * re-emitting it: only the lines of spec.signatures are replaced or added, so comments, key
 * order and quoting survive, and a generated manifest stays diffable against its source. The
 * edit is then re-read and every script compared byte for byte with the original, so a layout
 * the text edit does not understand fails loudly instead of changing what was signed. Signing
 * uses ssh-keygen itself (through kp_spawn), so passphrases, ssh-agent and security keys work
 * as they do for the operator by hand; the private key never passes through kpssh.
 *
 * Threads: the main thread only. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/spawn.h"
#include "base/str.h"
#include "base/time.h"
#include "k8s/store.h"
#include "yaml/yaml.h"
#include "provider/ssh/knownhosts.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/profile.h"
#include "provider/ssh/sshsig.h"
#include "cmd/kpssh/manifest.h"
#include "cmd/kpssh/verbs.h"

#define PROF_NAMESPACE "kpssh"
#define PROF_MAX_SIGNERS (1u << 20)
#define PROF_MAX_MSG (64u * 1024u)
#define PROF_MAX_TOOL_OUTPUT (1u << 20)

static const char *const phases[KP_PROFILE_PHASES] = {"install", "join", "leave", "uninstall"};

struct prof_text {
    const struct kp_yaml_node *key, *node; /* NULL when absent */
    const char *data;
    size_t len;
};

/* One SSHJoinProfile read from a file. */
struct prof {
    const char *file;
    struct kp_buf text;
    struct kp_yaml_doc *doc;
    size_t docix;
    const struct kp_yaml_node *root, *spec, *scripts, *sigs;
    struct prof_text script[KP_PROFILE_PHASES], sig[KP_PROFILE_PHASES];
};

static void prof_done(struct prof *p)
{
    p->doc = kp_yaml_doc_free(p->doc);
    kp_buf_done(&p->text);
}

static int write_file(const char *path, const char *p, size_t n)
{
    int fd = strcmp(path, "-") == 0 ? STDOUT_FILENO
                                    : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int r = 0;

    if (fd < 0)
        return -errno;
    while (n > 0) {
        ssize_t k = write(fd, p, n);

        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            r = -errno;
            break;
        }
        p += k;
        n -= (size_t)k;
    }
    if (fd != STDOUT_FILENO && close(fd) < 0 && r == 0)
        r = -errno;
    return r;
}

static void get_text(const struct kp_yaml_node *map, const char *name, struct prof_text *t)
{
    memset(t, 0, sizeof(*t));
    for (size_t i = 0; map && i < kp_yaml_len(map); i++) {
        const struct kp_yaml_node *k = kp_yaml_map_key_at(map, i);
        const char *s = NULL;

        if (kp_yaml_get_cstr(k, &s) < 0 || strcmp(s, name) != 0)
            continue;
        t->key = k;
        t->node = kp_yaml_map_value_at(map, i);
        if (kp_yaml_is_null(t->node) || kp_yaml_get_str(t->node, &t->data, &t->len) < 0)
            t->data = NULL;
    }
}

/* Parses the one SSHJoinProfile of text (already read into p->text). 0, or -1 after printing
 * "prog: file: ..." to stderr. */
static int prof_parse(struct prof *p, const char *prog)
{
    struct kp_yaml_error err;
    size_t found = 0;
    int r;

    r = kp_yaml_parse(p->text.data ? p->text.data : "", p->text.len, p->file, KP_MANIFEST_MAX_FILE,
                      KP_YAML_ALL_DOCUMENTS, &p->doc, &err);
    if (r < 0) {
        fprintf(stderr, "%s: %s\n", prog, err.text);
        return -1;
    }
    for (size_t i = 0; i < kp_yaml_doc_count(p->doc); i++) {
        const struct kp_yaml_node *root = kp_yaml_doc_root(p->doc, i);
        const char *kind = NULL;

        if (kp_yaml_get_cstr(kp_yaml_map_get(root, "kind"), &kind) < 0 ||
            strcmp(kind, "SSHJoinProfile") != 0)
            continue;
        if (found++ == 0) {
            p->docix = i;
            p->root = root;
        }
    }
    if (found != 1) {
        fprintf(stderr, "%s: %s: expected one SSHJoinProfile, found %zu\n", prog, p->file, found);
        return -1;
    }
    p->spec = kp_yaml_map_get(p->root, "spec");
    if (!p->spec || kp_yaml_type(p->spec) != KP_YAML_MAPPING) {
        fprintf(stderr, "%s: %s:%u: the SSHJoinProfile has no spec mapping\n", prog, p->file,
                kp_yaml_line(p->root));
        return -1;
    }
    p->scripts = kp_yaml_map_get(p->spec, "scripts");
    p->sigs = kp_yaml_map_get(p->spec, "signatures");
    if (p->scripts && kp_yaml_type(p->scripts) != KP_YAML_MAPPING)
        p->scripts = NULL;
    if (p->sigs && kp_yaml_type(p->sigs) != KP_YAML_MAPPING)
        p->sigs = NULL;
    for (size_t i = 0; i < KP_PROFILE_PHASES; i++) {
        get_text(p->scripts, phases[i], &p->script[i]);
        get_text(p->sigs, phases[i], &p->sig[i]);
    }
    return 0;
}

/* Reads and parses file. 0 or -1 after printing why. */
static int prof_load(struct prof *p, const char *file, const char *prog)
{
    int r;

    memset(p, 0, sizeof(*p));
    p->file = file;
    kp_buf_init(&p->text, KP_MANIFEST_MAX_FILE);
    r = kp_manifest_read_file(file, &p->text);
    if (r < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, file, kp_strerror(r));
        return -1;
    }
    return prof_parse(p, prog);
}

/* The start of 1-based line `line` in p[n], or n past the end. */
static size_t line_start(const char *p, size_t n, unsigned line)
{
    size_t o = 0;

    for (unsigned l = 1; l < line && o < n; l++) {
        const char *nl = memchr(p + o, '\n', n - o);

        o = nl ? (size_t)(nl - p) + 1 : n;
    }
    return o;
}

/* Where line `sline` (1-based) of a script sits in the file: for a block scalar the content
 * starts on the line after the indicator, at the indentation of that line; for any other
 * scalar we only know the node's own position. */
static void script_pos(const struct prof *p, const struct prof_text *t, unsigned sline,
                       unsigned scol, unsigned *ret_line, unsigned *ret_col)
{
    const char *s = p->text.data;
    size_t o, ind = 0;

    if (kp_yaml_style(t->node) != KP_YAML_BLOCK) {
        *ret_line = kp_yaml_line(t->node);
        *ret_col = kp_yaml_col(t->node);
        return;
    }
    o = line_start(s, p->text.len, kp_yaml_line(t->node) + 1);
    while (o + ind < p->text.len && s[o + ind] == ' ')
        ind++;
    *ret_line = kp_yaml_line(t->node) + sline;
    *ret_col = (unsigned)ind + scol;
}

/* --- lint ---------------------------------------------------------------------------------- */

struct lint {
    const struct prof *p;
    unsigned problems;
    bool reported[KP_PROFILE_PHASES]; /* a script already has a message of ours */
};

static void lint_at(struct lint *l, const struct prof_text *t, size_t off, const char *fmt, ...)
    KP_PRINTF(4, 5);
static void lint_at(struct lint *l, const struct prof_text *t, size_t off, const char *fmt, ...)
{
    unsigned sline = 1, scol = 1, line, col;
    va_list ap;

    for (size_t i = 0; i < off; i++) {
        if (t->data[i] == '\n') {
            sline++;
            scol = 1;
        } else {
            scol++;
        }
    }
    script_pos(l->p, t, sline, scol, &line, &col);
    printf("%s:%u:%u: ", l->p->file, line, col);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (kp_yaml_style(t->node) != KP_YAML_BLOCK)
        printf(" (script line %u)", sline);
    putchar('\n');
    l->problems++;
}

/* The contract checks on bytes: every "{{" in any script, every KPSSH_VAR_/KPSSH_SECRET_ in
 * leave; each occurrence reported where it is. */
static void lint_contract(struct lint *l)
{
    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++) {
        const struct prof_text *t = &l->p->script[ph];

        for (size_t i = 0; t->data && i + 1 < t->len; i++) {
            if (t->data[i] == '{' && t->data[i + 1] == '{') {
                lint_at(l, t, i,
                        "spec.scripts.%s: \"{{\": verified execution requires template-free "
                        "scripts; pass values as KPSSH_VAR_* environment instead",
                        phases[ph]);
                l->reported[ph] = true;
                i++;
            }
        }
        if (ph != KP_PROFILE_LEAVE)
            continue;
        for (size_t i = 0; t->data && i < t->len; i++) {
            static const char *const banned[] = {"KPSSH_VAR_", "KPSSH_SECRET_"};

            for (size_t b = 0; b < KP_ARRAY_SIZE(banned); b++) {
                size_t n = strlen(banned[b]), e = i + n;

                if (t->len - i < n || memcmp(t->data + i, banned[b], n) != 0)
                    continue;
                while (e < t->len && e - i < 64 &&
                       (t->data[e] == '_' || (t->data[e] >= 'A' && t->data[e] <= 'Z') ||
                        (t->data[e] >= 'a' && t->data[e] <= 'z') ||
                        (t->data[e] >= '0' && t->data[e] <= '9')))
                    e++;
                lint_at(l, t, i,
                        "spec.scripts.leave: mentions %.*s: leave runs without a node class, so "
                        "it gets no KPSSH_VAR_* or KPSSH_SECRET_* values; keep it self-contained",
                        (int)(e - i), t->data + i);
                l->reported[ph] = true;
                i = e - 1;
            }
        }
    }
}

/* The node a dotted field path names, or its nearest ancestor that exists. */
static const struct kp_yaml_node *path_node(const struct prof *p, const char *path, size_t n)
{
    const struct kp_yaml_node *at = p->root, *next;
    char name[64];
    size_t i = 0;

    while (i < n) {
        size_t e = i;

        while (e < n && path[e] != '.')
            e++;
        if (e - i >= sizeof(name))
            break;
        memcpy(name, path + i, e - i);
        name[e - i] = '\0';
        next = kp_yaml_type(at) == KP_YAML_MAPPING ? kp_yaml_map_get(at, name) : NULL;
        if (!next)
            break;
        at = next;
        i = e + 1;
    }
    return at;
}

/* The controller's own validator, each problem at the position of the field it names. */
struct lint_obj {
    struct lint *l;
    size_t doc;
    int r;
};

static int lint_on_object(const struct kp_manifest_obj *o, void *ctx, char **ret_msg)
{
    struct lint_obj *lo = ctx;
    struct kp_buf msg = KP_BUF_INIT(PROF_MAX_MSG);
    struct kp_entry *e = NULL;
    const char *s;
    int r;

    (void)ret_msg;
    if (o->doc != lo->doc + 1)
        return 0;
    r = kp_sshjoinprofile_decode(o->json, o->len, &e);
    if (r < 0) {
        printf("%s:%u: the SSHJoinProfile does not decode: %s\n", lo->l->p->file, o->line,
               kp_strerror(r));
        lo->l->problems++;
        return 0;
    }
    r = kp_profile_validate_view(kp_sshjoinprofile_view(e), &msg);
    if (r < 0) {
        lo->r = r;
        goto out;
    }
    s = kp_buf_str(&msg);
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s), plen = 0;
        const struct kp_yaml_node *n;
        bool skip = false;

        while (plen < len && s[plen] != ':' && s[plen] != ' ')
            plen++;
        for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++) {
            char field[32];

            (void)snprintf(field, sizeof(field), "spec.scripts.%s", phases[ph]);
            if (lo->l->reported[ph] && strlen(field) == plen && memcmp(s, field, plen) == 0)
                skip = true; /* said already, with the exact place */
        }
        if (!skip) {
            n = path_node(lo->l->p, s, plen);
            printf("%s:%u:%u: %.*s\n", lo->l->p->file, kp_yaml_line(n), kp_yaml_col(n), (int)len,
                   s);
            lo->l->problems++;
        }
        s += len + (nl ? 1 : 0);
    }
out:
    kp_buf_done(&msg);
    kp_entry_unref(e);
    return 0;
}

/* A private temporary directory; path receives it. 0 or -errno. */
static int make_tmpdir(char path[256], const char *what)
{
    const char *tmp = getenv("TMPDIR");

    if (!tmp || tmp[0] != '/')
        tmp = "/tmp";
    if ((size_t)snprintf(path, 256, "%s/kpssh-%s-XXXXXX", tmp, what) >= 256)
        return -ENAMETOOLONG;
    return mkdtemp(path) ? 0 : -errno;
}

static int tmp_write(const char *dir, const char *name, const char *p, size_t n, char out[320])
{
    if ((size_t)snprintf(out, 320, "%s/%s", dir, name) >= 320)
        return -ENAMETOOLONG;
    return write_file(out, p, n);
}

/* shellcheck on each script, its findings mapped to manifest lines. 0, or -1 after printing
 * why shellcheck could not run. */
static int lint_shellcheck(struct lint *l, const char *prog)
{
    char dir[256] = "", path[320], *sc = NULL;
    int ret = 0, r;

    if (kp_spawn_find_program("shellcheck", NULL, &sc) < 0) {
        fprintf(stderr, "%s: note: shellcheck is not installed; scripts were not checked with it\n",
                prog);
        return 0;
    }
    if ((r = make_tmpdir(dir, "lint")) < 0) {
        fprintf(stderr, "%s: temporary directory: %s\n", prog, kp_strerror(r));
        ret = -1;
        goto out;
    }
    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++) {
        const struct prof_text *t = &l->p->script[ph];
        const char *argv[] = {sc, "-f", "gcc", "-s", "bash", path, NULL};
        struct kp_spawn_opts o = {.argv = argv,
                                  .timeout_usec = 120 * KP_USEC_PER_SEC,
                                  .max_stdout = PROF_MAX_TOOL_OUTPUT,
                                  .stderr_tail = 4096};
        struct kp_spawn_result res;
        const char *s;

        if (!t->data || t->len == 0)
            continue;
        if ((r = tmp_write(dir, phases[ph], t->data, t->len, path)) < 0) {
            fprintf(stderr, "%s: %s: %s\n", prog, path, kp_strerror(r));
            ret = -1;
            goto out;
        }
        r = kp_spawn_run(&o, &res);
        (void)unlink(path); /* best effort: the directory goes below and says if it cannot */
        if (r < 0) {
            fprintf(stderr, "%s: shellcheck: %s\n", prog, kp_strerror(r));
            ret = -1;
            goto out;
        }
        if (res.end != KP_SPAWN_EXITED || (res.status != 0 && res.status != 1)) {
            fprintf(stderr, "%s: shellcheck failed on spec.scripts.%s: %s\n", prog, phases[ph],
                    kp_buf_str(&res.err));
            kp_spawn_result_done(&res);
            ret = -1;
            goto out;
        }
        /* "<path>:<line>:<col>: <severity>: <text> [SCnnnn]" per finding. */
        for (s = kp_buf_str(&res.out); *s;) {
            const char *nl = strchr(s, '\n');
            size_t len = nl ? (size_t)(nl - s) : strlen(s), pl = strlen(path);
            unsigned sl = 0, scol = 0, line, col;
            int used = 0;

            if (len > pl && memcmp(s, path, pl) == 0 &&
                sscanf(s + pl, ":%u:%u: %n", &sl, &scol, &used) == 2 && used > 0 &&
                (size_t)used <= len - pl) {
                script_pos(l->p, t, sl, scol, &line, &col);
                printf("%s:%u:%u: spec.scripts.%s: shellcheck %.*s\n", l->p->file, line, col,
                       phases[ph], (int)(len - pl - (size_t)used), s + pl + used);
                l->problems++;
            }
            s += len + (nl ? 1 : 0);
        }
        kp_spawn_result_done(&res);
    }
out:
    if (dir[0] && rmdir(dir) < 0)
        fprintf(stderr, "%s: cannot remove %s: %s\n", prog, dir, strerror(errno));
    kp_free(sc);
    return ret;
}

/* --- sign --------------------------------------------------------------------------------- */

/* Signs n bytes with ssh-keygen into *sig (armoured, as ssh-keygen writes it). 0, or -1 after
 * printing why. */
static int sign_one(const char *dir, const char *phase, const char *p, size_t n, const char *key,
                    const char *prog, struct kp_buf *sig)
{
    char path[320], sigpath[336];
    const char *argv[] = {"ssh-keygen", "-q", "-Y",           "sign", "-f",
                          key,          "-n", PROF_NAMESPACE, path,   NULL};
    /* A passphrase prompt goes to the terminal; give the operator time to answer it. */
    struct kp_spawn_opts o = {.argv = argv,
                              .timeout_usec = 600 * KP_USEC_PER_SEC,
                              .max_stdout = PROF_MAX_TOOL_OUTPUT,
                              .stderr_tail = 4096};
    struct kp_spawn_result res;
    int r, ret = -1;

    if ((r = tmp_write(dir, phase, p, n, path)) < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, kp_strerror(r));
        return -1;
    }
    (void)snprintf(sigpath, sizeof(sigpath), "%s.sig", path);
    r = kp_spawn_run(&o, &res);
    if (r < 0) {
        fprintf(stderr, "%s: ssh-keygen: %s\n", prog, kp_strerror(r));
        goto out;
    }
    if (res.end != KP_SPAWN_EXITED || res.status != 0) {
        fprintf(stderr, "%s: ssh-keygen -Y sign failed for spec.scripts.%s: %s\n", prog, phase,
                kp_buf_str(&res.err));
        kp_spawn_result_done(&res);
        goto out;
    }
    kp_spawn_result_done(&res);
    if ((r = kp_manifest_read_file(sigpath, sig)) < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, sigpath, kp_strerror(r));
        goto out;
    }
    ret = 0;
out:
    (void)unlink(sigpath); /* may not exist when ssh-keygen failed */
    (void)unlink(path);
    return ret;
}

/* Is line at o (up to n) blank or a comment? */
static bool line_is_filler(const char *s, size_t o, size_t n)
{
    while (o < n && (s[o] == ' ' || s[o] == '\t' || s[o] == '\r'))
        o++;
    return o >= n || s[o] == '\n' || s[o] == '#';
}

/* The offset where the lines of the last value under spec end: the first line after spec's key
 * that starts in column 0 with content (a root key, "---" or "..."), else the end of the text;
 * then backed up over blank and comment lines. */
static size_t spec_end(const struct prof *p, unsigned from_line)
{
    const char *s = p->text.data;
    size_t n = p->text.len, o = line_start(s, n, from_line + 1);

    while (o < n) {
        const char *nl = memchr(s + o, '\n', n - o);

        if (s[o] != ' ' && s[o] != '\t' && s[o] != '\n' && s[o] != '\r' && s[o] != '#')
            return o;
        o = nl ? (size_t)(nl - s) + 1 : n;
    }
    return n;
}

/* Moves end back over whole blank or comment lines (never before floor). */
static size_t back_over_filler(const char *s, size_t floor, size_t end)
{
    while (end > floor) {
        size_t b = end - 1; /* the '\n' ending the previous line */

        while (b > floor && s[b - 1] != '\n')
            b--;
        if (!line_is_filler(s, b, end))
            break;
        end = b;
    }
    return end;
}

/* Writes the manifest with a new spec.signatures block into out. 0, or -1 after printing. */
static int sign_edit(const struct prof *p, struct kp_buf sigs[KP_PROFILE_PHASES], const char *prog,
                     struct kp_buf *out)
{
    const char *s = p->text.data;
    size_t n = p->text.len, cut_from, cut_to, floor;
    const struct kp_yaml_node *spec_key = NULL, *first;
    unsigned ind, step = 2;
    int r = 0;

    for (size_t i = 0; i < kp_yaml_len(p->root); i++)
        if (kp_yaml_map_value_at(p->root, i) == p->spec)
            spec_key = kp_yaml_map_key_at(p->root, i);
    first = kp_yaml_map_key_at(p->spec, 0);
    if (!spec_key || !first || kp_yaml_line(first) <= kp_yaml_line(spec_key)) {
        fprintf(stderr,
                "%s: %s: spec must be a block mapping (one key per line) for sign to edit it\n",
                prog, p->file);
        return -1;
    }
    ind = kp_yaml_col(first) - 1;
    if (p->scripts && kp_yaml_len(p->scripts) > 0 &&
        kp_yaml_col(kp_yaml_map_key_at(p->scripts, 0)) > kp_yaml_col(first))
        step = kp_yaml_col(kp_yaml_map_key_at(p->scripts, 0)) - kp_yaml_col(first);
    floor = line_start(s, n, kp_yaml_line(first));
    cut_from = cut_to = back_over_filler(s, floor, spec_end(p, kp_yaml_line(spec_key)));
    for (size_t i = 0; i < kp_yaml_len(p->spec); i++) {
        const struct kp_yaml_node *k = kp_yaml_map_key_at(p->spec, i);
        const char *name = NULL;

        if (kp_yaml_get_cstr(k, &name) < 0 || strcmp(name, "signatures") != 0)
            continue;
        if (kp_yaml_col(k) != kp_yaml_col(first)) {
            fprintf(stderr, "%s: %s:%u: spec.signatures is not laid out one key per line\n", prog,
                    p->file, kp_yaml_line(k));
            return -1;
        }
        cut_from = line_start(s, n, kp_yaml_line(k));
        if (i + 1 < kp_yaml_len(p->spec)) {
            size_t next = line_start(s, n, kp_yaml_line(kp_yaml_map_key_at(p->spec, i + 1)));

            cut_to = back_over_filler(s, cut_from, next);
        }
    }
    /* A last line without its newline gets one before the block. */
    if ((r = kp_buf_append(out, s, cut_from)) < 0)
        goto out;
    if (cut_from > 0 && s[cut_from - 1] != '\n' && (r = kp_buf_putc(out, '\n')) < 0)
        goto out;
    if ((r = kp_buf_printf(out, "%*ssignatures:\n", (int)ind, "")) < 0)
        goto out;
    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++) {
        const char *q;

        if (!sigs[ph].data)
            continue;
        if ((r = kp_buf_printf(out, "%*s%s: |\n", (int)(ind + step), "", phases[ph])) < 0)
            goto out;
        for (q = sigs[ph].data; *q;) {
            const char *nl = strchr(q, '\n');
            size_t len = nl ? (size_t)(nl - q) : strlen(q);

            if (len > 0 &&
                (r = kp_buf_printf(out, "%*s%.*s\n", (int)(ind + 2 * step), "", (int)len, q)) < 0)
                goto out;
            q += len + (nl ? 1 : 0);
        }
    }
    r = kp_buf_append(out, s + cut_to, n - cut_to);
out:
    if (r < 0) {
        fprintf(stderr, "%s: %s\n", prog, kp_strerror(r));
        return -1;
    }
    return 0;
}

/* Re-reads the edited manifest: every script must be byte-identical and every new signature in
 * place. 0 or -1 after printing. */
static int sign_recheck(const struct prof *orig, struct kp_buf *edited,
                        struct kp_buf sigs[KP_PROFILE_PHASES], const char *prog)
{
    struct prof q;
    int ret = -1;

    memset(&q, 0, sizeof(q));
    q.file = orig->file;
    q.text = *edited; /* borrowed: not released below */
    if (prof_parse(&q, prog) < 0)
        goto out;
    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++) {
        const struct prof_text *a = &orig->script[ph], *b = &q.script[ph];

        if ((a->data == NULL) != (b->data == NULL) || a->len != b->len ||
            (a->data && memcmp(a->data, b->data, a->len) != 0) ||
            (sigs[ph].data && (!q.sig[ph].data || q.sig[ph].len != sigs[ph].len ||
                               memcmp(q.sig[ph].data, sigs[ph].data, sigs[ph].len) != 0))) {
            fprintf(stderr,
                    "%s: %s: editing the manifest would change spec.scripts.%s or "
                    "spec.signatures.%s; add the signatures by hand (nothing was written)\n",
                    prog, orig->file, phases[ph], phases[ph]);
            goto out;
        }
    }
    ret = 0;
out:
    q.doc = kp_yaml_doc_free(q.doc);
    return ret;
}

/* "ED25519 SHA256:..." style naming of the signer of an armoured signature, into out. */
static void signer_name(const char *armored, size_t n, char *out, size_t size)
{
    struct kp_sshsig s;
    char fp[KP_SSH_FP_SIZE];
    uint32_t tlen;

    (void)snprintf(out, size, "an unreadable key");
    if (kp_sshsig_parse(armored, n, &s, NULL) < 0)
        return;
    if (s.publickey.len >= 4 && kp_ssh_fingerprint(s.publickey.data, s.publickey.len, fp) == 0) {
        const unsigned char *b = s.publickey.data;

        tlen = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
        if (tlen <= s.publickey.len - 4 && tlen < 64)
            (void)snprintf(out, size, "%.*s key %s", (int)tlen, (const char *)b + 4, fp);
    }
    kp_sshsig_done(&s);
}

/* --- the verbs ------------------------------------------------------------------------------ */

struct prof_opts {
    const char *file, *key, *out, *signers;
};

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "Usage: %s profile lint -f FILE\n"
            "       %s profile sign -f FILE --key KEYFILE [-o OUT]\n"
            "       %s profile verify -f FILE --signers FILE\n"
            "\n"
            "The author's side of verified execution for an SSHJoinProfile manifest.\n"
            "  lint    the script contract: template-free scripts (no {{), a leave script\n"
            "          without KPSSH_VAR_*/KPSSH_SECRET_*, the controller's profile checks,\n"
            "          and shellcheck on each script when it is installed\n"
            "  sign    ssh-keygen -Y sign -n kpssh over each script's exact bytes (KEYFILE may\n"
            "          be a public key whose private half is in ssh-agent); writes the manifest\n"
            "          with spec.signatures set, everything else unchanged, to OUT (default\n"
            "          stdout)\n"
            "  verify  checks each signature as the controller does against FILE of OpenSSH\n"
            "          public key lines (the format of SSHHost spec.trustedSigners)\n"
            "\n"
            "Options:\n"
            "  -f, --filename FILE  the SSHJoinProfile manifest (- for stdin)\n"
            "      --key KEYFILE    sign: the signing key, as for ssh-keygen -f\n"
            "  -o, --output OUT     sign: where to write the signed manifest (- for stdout)\n"
            "      --signers FILE   verify: trusted signers, one public key line each\n"
            "  -h, --help           this text\n",
            prog, prog, prog);
}

/* 0, 1 for --help, or -1 after a usage message. */
static int parse_opts(int argc, char **argv, const char *prog, const char *verb,
                      struct prof_opts *o)
{
    char what[32];

    (void)snprintf(what, sizeof(what), "profile %s: ", verb);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        size_t n;

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            return 1;
        } else if ((n = kp_cli_opt_is(a, "-f", "--filename")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--filename", n, prog, what)))
                return -1;
            o->file = v;
        } else if (strcmp(verb, "sign") == 0 && (n = kp_cli_opt_is(a, NULL, "--key")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--key", n, prog, what)))
                return -1;
            o->key = v;
        } else if (strcmp(verb, "sign") == 0 && (n = kp_cli_opt_is(a, "-o", "--output")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--output", n, prog, what)))
                return -1;
            o->out = v;
        } else if (strcmp(verb, "verify") == 0 && (n = kp_cli_opt_is(a, NULL, "--signers")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--signers", n, prog, what)))
                return -1;
            o->signers = v;
        } else {
            fprintf(stderr, "%s: %sunknown option or argument \"%s\" (see --help)\n", prog, what,
                    a);
            return -1;
        }
    }
    if (!o->file || (strcmp(verb, "sign") == 0 && !o->key) ||
        (strcmp(verb, "verify") == 0 && !o->signers)) {
        fprintf(stderr, "%s: %sneeds -f FILE%s (see --help)\n", prog, what,
                strcmp(verb, "sign") == 0     ? " and --key KEYFILE"
                : strcmp(verb, "verify") == 0 ? " and --signers FILE"
                                              : "");
        return -1;
    }
    return 0;
}

static int cmd_lint(const struct prof_opts *o, const char *prog)
{
    struct prof p;
    struct lint l;
    struct lint_obj lo;
    char *msg = NULL;
    int r, code = KP_CLI_FAILURE;
    unsigned nscripts = 0;

    if (prof_load(&p, o->file, prog) < 0)
        goto out;
    memset(&l, 0, sizeof(l));
    l.p = &p;
    lint_contract(&l);
    lo.l = &l;
    lo.doc = p.docix;
    lo.r = 0;
    r = kp_manifest_each(p.text.data, p.text.len, p.file, lint_on_object, &lo, &msg);
    if (r == 0)
        r = lo.r;
    if (r < 0) {
        fprintf(stderr, "%s: %s\n", prog, msg ? msg : kp_strerror(r));
        goto out;
    }
    if (lint_shellcheck(&l, prog) < 0)
        goto out;
    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++)
        nscripts += p.script[ph].data ? 1u : 0u;
    if (l.problems > 0) {
        printf("%s: %u problem%s\n", p.file, l.problems, l.problems == 1 ? "" : "s");
        goto out;
    }
    printf("%s: ok (%u scripts)\n", p.file, nscripts);
    code = KP_CLI_OK;
out:
    kp_free(msg);
    prof_done(&p);
    return fflush(stdout) == 0 ? code : KP_CLI_FAILURE;
}

static int cmd_sign(const struct prof_opts *o, const char *prog)
{
    struct kp_buf sigs[KP_PROFILE_PHASES], out = KP_BUF_INIT(KP_MANIFEST_MAX_FILE + 64 * 1024);
    struct prof p;
    char dir[256] = "", who[128] = "";
    int r, code = KP_CLI_FAILURE;
    bool any = false;

    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++)
        kp_buf_init(&sigs[ph], KP_MAX_SSHSIG_ARMOUR);
    if (prof_load(&p, o->file, prog) < 0)
        goto out;
    if ((r = make_tmpdir(dir, "sign")) < 0) {
        fprintf(stderr, "%s: temporary directory: %s\n", prog, kp_strerror(r));
        dir[0] = '\0';
        goto out;
    }
    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++) {
        const struct prof_text *t = &p.script[ph];

        if (!t->data)
            continue;
        if (sign_one(dir, phases[ph], t->data, t->len, o->key, prog, &sigs[ph]) < 0)
            goto out;
        any = true;
    }
    if (!any) {
        fprintf(stderr, "%s: %s: the profile has no scripts to sign\n", prog, p.file);
        goto out;
    }
    if (sign_edit(&p, sigs, prog, &out) < 0 || sign_recheck(&p, &out, sigs, prog) < 0)
        goto out;
    r = write_file(o->out ? o->out : "-", out.data, out.len);
    if (r < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, o->out ? o->out : "stdout", kp_strerror(r));
        goto out;
    }
    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++) {
        if (sigs[ph].data && !who[0])
            signer_name(sigs[ph].data, sigs[ph].len, who, sizeof(who));
    }
    fprintf(stderr, "%s: signed", prog);
    for (size_t ph = 0, k = 0; ph < KP_PROFILE_PHASES; ph++)
        if (sigs[ph].data)
            fprintf(stderr, "%s %s", k++ ? "," : "", phases[ph]);
    fprintf(stderr, " with %s (namespace %s)\n", who, PROF_NAMESPACE);
    code = KP_CLI_OK;
out:
    if (dir[0] && rmdir(dir) < 0)
        fprintf(stderr, "%s: cannot remove %s: %s\n", prog, dir, strerror(errno));
    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++)
        kp_buf_done(&sigs[ph]);
    kp_buf_done(&out);
    prof_done(&p);
    return code;
}

static int cmd_verify(const struct prof_opts *o, const char *prog)
{
    struct kp_buf signers = KP_BUF_INIT(PROF_MAX_SIGNERS);
    struct prof p;
    const char *trusted[1];
    char who[128];
    int r, code = KP_CLI_FAILURE;
    unsigned bad = 0;

    memset(&p, 0, sizeof(p));
    if ((r = kp_manifest_read_file(o->signers, &signers)) < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, o->signers, kp_strerror(r));
        goto out;
    }
    trusted[0] = kp_buf_str(&signers);
    if (prof_load(&p, o->file, prog) < 0)
        goto out;
    for (size_t ph = 0; ph < KP_PROFILE_PHASES; ph++) {
        const struct prof_text *t = &p.script[ph], *s = &p.sig[ph];
        char *msg = NULL;

        if (!t->data && !s->data)
            continue;
        if (!t->data) {
            printf("%s: FAILED: spec.signatures.%s is set but spec.scripts.%s is not\n", phases[ph],
                   phases[ph], phases[ph]);
            bad++;
            continue;
        }
        if (!s->data) {
            printf("%s: FAILED: no signature (spec.signatures.%s)\n", phases[ph], phases[ph]);
            bad++;
            continue;
        }
        r = kp_sshsig_verify(s->data, s->len, t->data, t->len, PROF_NAMESPACE, trusted, 1, &msg);
        if (r == -EINVAL) {
            printf("%s: %s: %s\n", phases[ph], o->signers, msg ? msg : kp_strerror(r));
            kp_free(msg);
            goto out;
        }
        if (r < 0) {
            printf("%s: FAILED: %s\n", phases[ph], msg ? msg : kp_strerror(r));
            bad++;
        } else {
            signer_name(s->data, s->len, who, sizeof(who));
            printf("%s: verified, signed by %s\n", phases[ph], who);
        }
        kp_free(msg);
    }
    code = bad == 0 ? KP_CLI_OK : KP_CLI_FAILURE;
out:
    kp_buf_done(&signers);
    prof_done(&p);
    return fflush(stdout) == 0 ? code : KP_CLI_FAILURE;
}

int kp_cli_profile(int argc, char **argv, const char *prog)
{
    struct prof_opts o = {NULL, NULL, NULL, NULL};
    const char *verb = argc > 1 ? argv[1] : NULL;
    int r;

    if (!verb || strcmp(verb, "-h") == 0 || strcmp(verb, "--help") == 0) {
        usage(verb ? stdout : stderr, prog);
        return verb ? KP_CLI_OK : KP_CLI_USAGE;
    }
    if (strcmp(verb, "lint") != 0 && strcmp(verb, "sign") != 0 && strcmp(verb, "verify") != 0) {
        fprintf(stderr, "%s: profile: unknown command \"%s\" (lint, sign, verify)\n", prog, verb);
        return KP_CLI_USAGE;
    }
    r = parse_opts(argc - 1, argv + 1, prog, verb, &o);
    if (r != 0) {
        if (r > 0)
            usage(stdout, prog);
        return r > 0 ? KP_CLI_OK : KP_CLI_USAGE;
    }
    if (strcmp(verb, "lint") == 0)
        return cmd_lint(&o, prog);
    if (strcmp(verb, "sign") == 0)
        return cmd_sign(&o, prog);
    return cmd_verify(&o, prog);
}
