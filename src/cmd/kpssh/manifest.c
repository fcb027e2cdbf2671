/* cmd/kpssh/manifest.c: manifests as JSON text per object (manifest.h).
 *
 * DESIGN
 *
 * Why text and not a jansson tree: cmd/kpssh does not include jansson (the layer check allows
 * only json/'s glue), and the api/ decoders take JSON bytes anyway; writing the tree out as text
 * is one short recursive walk, bounded by the object ceiling of api/obj.h. */
#include "cmd/kpssh/manifest.h"

#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "api/obj.h"
#include "yaml/yaml.h"

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool json_number(const char *s)
{
    const char *p = s;

    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return false;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return *p == '\0';
}

/* A JSON number the decoder takes: an integer within int64, or a finite real. Anything else
 * (12345678901234567890, 1e999) stays a string, which is what a projection reading a quantity or
 * a name wants anyway. */
static bool json_number_fits(const struct kp_yaml_node *n, const char *s)
{
    int64_t v;
    double d;
    char *end = NULL;

    if (!json_number(s))
        return false;
    if (!strpbrk(s, ".eE"))
        return kp_yaml_get_int(n, &v) == 0;
    errno = 0;
    d = strtod(s, &end);
    return errno == 0 && end && *end == '\0' && isfinite(d);
}

static int put_string(struct kp_buf *out, const char *s)
{
    int r = kp_buf_putc(out, '"');

    for (; r == 0 && *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            r = kp_buf_printf(out, "\\%c", c);
        else if (c < 0x20)
            r = kp_buf_printf(out, "\\u%04x", c);
        else
            r = kp_buf_putc(out, (char)c);
    }
    return r == 0 ? kp_buf_putc(out, '"') : r;
}

static int put_node(struct kp_buf *out, const struct kp_yaml_node *n, const char *file,
                    char **ret_msg)
{
    const char *s = NULL;
    bool b;
    int r = 0;

    switch (kp_yaml_type(n)) {
    case KP_YAML_MAPPING:
        r = kp_buf_putc(out, '{');
        for (size_t i = 0; r == 0 && i < kp_yaml_len(n); i++) {
            if (kp_yaml_get_cstr(kp_yaml_map_key_at(n, i), &s) < 0) {
                kp_msg_set(ret_msg, "%s:%u:%u: a key must be a string", file,
                           kp_yaml_line(kp_yaml_map_key_at(n, i)),
                           kp_yaml_col(kp_yaml_map_key_at(n, i)));
                return -KP_EPARSE;
            }
            if ((i && (r = kp_buf_putc(out, ',')) < 0) || (r = put_string(out, s)) < 0 ||
                (r = kp_buf_putc(out, ':')) < 0)
                return r;
            r = put_node(out, kp_yaml_map_value_at(n, i), file, ret_msg);
        }
        return r == 0 ? kp_buf_putc(out, '}') : r;
    case KP_YAML_SEQUENCE:
        r = kp_buf_putc(out, '[');
        for (size_t i = 0; r == 0 && i < kp_yaml_len(n); i++) {
            if (i && (r = kp_buf_putc(out, ',')) < 0)
                return r;
            r = put_node(out, kp_yaml_seq_at(n, i), file, ret_msg);
        }
        return r == 0 ? kp_buf_putc(out, ']') : r;
    case KP_YAML_SCALAR:
        break;
    }
    if (kp_yaml_style(n) == KP_YAML_PLAIN) {
        if (kp_yaml_is_null(n))
            return kp_buf_puts(out, "null");
        if (kp_yaml_get_bool(n, &b) == 0)
            return kp_buf_puts(out, b ? "true" : "false");
    }
    if (kp_yaml_get_cstr(n, &s) < 0) {
        kp_msg_set(ret_msg, "%s:%u:%u: a string holds a NUL byte", file, kp_yaml_line(n),
                   kp_yaml_col(n));
        return -KP_EPARSE;
    }
    if (kp_yaml_style(n) == KP_YAML_PLAIN && json_number_fits(n, s))
        return kp_buf_puts(out, s);
    return put_string(out, s);
}

static int emit(const struct kp_yaml_node *n, const char *file, size_t doc, size_t item,
                kp_manifest_fn fn, void *ctx, char **ret_msg)
{
    struct kp_buf out = KP_BUF_INIT(KP_MAX_OBJECT_BYTES);
    struct kp_manifest_obj o = {.file = file, .doc = doc, .item = item, .line = kp_yaml_line(n)};
    int r;

    if (kp_yaml_type(n) != KP_YAML_MAPPING) {
        kp_msg_set(ret_msg, "%s:%u:%u: document %zu%s: expected an object (a mapping), not %s",
                   file, kp_yaml_line(n), kp_yaml_col(n), doc, item ? " (a List item)" : "",
                   kp_yaml_describe(n));
        return -KP_EPARSE;
    }
    if ((r = put_node(&out, n, file, ret_msg)) < 0) {
        if (r == -KP_ELIMIT)
            kp_msg_set(ret_msg, "%s:%u: document %zu: object larger than %u bytes", file, o.line,
                       doc, (unsigned)KP_MAX_OBJECT_BYTES);
        goto out;
    }
    o.json = out.data;
    o.len = out.len;
    r = fn(&o, ctx, ret_msg);
out:
    kp_buf_done(&out);
    return r;
}

static bool is_list(const struct kp_yaml_node *root)
{
    const struct kp_yaml_node *k = kp_yaml_map_get(root, "kind");
    const char *s = NULL;

    return k && kp_yaml_get_cstr(k, &s) == 0 && strcmp(s, "List") == 0;
}

int kp_manifest_each(const char *p, size_t len, const char *file, kp_manifest_fn fn, void *ctx,
                     char **ret_msg)
{
    struct kp_yaml_error yerr = {0};
    struct kp_yaml_doc *doc = NULL;
    int r;

    r = kp_yaml_parse(p ? p : "", p ? len : 0, file, KP_MANIFEST_MAX_FILE, KP_YAML_ALL_DOCUMENTS,
                      &doc, &yerr);
    if (r < 0) {
        kp_msg_set(ret_msg, "%s", yerr.text[0] ? yerr.text : kp_strerror(r));
        return r;
    }
    for (size_t d = 0; d < kp_yaml_doc_count(doc) && r == 0; d++) {
        const struct kp_yaml_node *root = kp_yaml_doc_root(doc, d);
        const struct kp_yaml_node *items;

        if (!root || kp_yaml_is_null(root))
            continue;
        if (kp_yaml_type(root) != KP_YAML_MAPPING || !is_list(root)) {
            r = emit(root, file, d + 1, 0, fn, ctx, ret_msg);
            continue;
        }
        items = kp_yaml_map_get(root, "items");
        if (items && kp_yaml_is_null(items))
            continue;
        if (!items || kp_yaml_type(items) != KP_YAML_SEQUENCE) {
            kp_msg_set(ret_msg, "%s:%u:%u: document %zu: a List needs an items sequence", file,
                       kp_yaml_line(root), kp_yaml_col(root), d + 1);
            r = -KP_EPARSE;
            break;
        }
        for (size_t i = 0; i < kp_yaml_len(items) && r == 0; i++)
            r = emit(kp_yaml_seq_at(items, i), file, d + 1, i + 1, fn, ctx, ret_msg);
    }
    kp_yaml_doc_free(doc);
    return r;
}

int kp_manifest_read_file(const char *path, struct kp_buf *out)
{
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    char chunk[65536];
    int r = 0;

    if (fd < 0)
        return -errno;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            break;
        }
        if (n == 0)
            break;
        if ((r = kp_buf_append(out, chunk, (size_t)n)) < 0)
            break;
    }
    if (fd != STDIN_FILENO)
        close(fd);
    return r;
}
