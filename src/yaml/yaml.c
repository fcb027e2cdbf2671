/* DESIGN: libyaml events -> position-keeping node tree.
 *
 * What: the one place that includes <yaml.h>. kp_yaml_parse() drives libyaml's event parser
 * and builds nodes bottom-up: a container is attached to its parent when its END event
 * arrives, so its subtree size ("weight") is known by then. An alias points at the anchored
 * node (a DAG, no copy) and costs the anchored node's weight against KP_YAML_MAX_NODES; that
 * bounds the work of every later walk over the tree, which is what a "billion laughs" document
 * attacks. Anchors register when their node is complete, so an alias can never refer to one
 * of its own ancestors: the tree has no cycles.
 *
 * Why a tree and not events: configuration checks need to look things up by key in any order
 * and still report the position of what they looked at (STYLE.md rule 12).
 *
 * Memory: every node is linked into the document's allocation list and freed with it, which
 * makes shared (aliased) nodes and error paths simple. libyaml's own allocator cannot be
 * redirected to kp_malloc, so allocation torture covers our tree building only; libyaml's
 * buffers are bounded by the input ceiling we check before it sees a byte.
 *
 * Threads: a parse uses only its own state; a finished document is immutable and readable
 * from any thread. */
#include "yaml/yaml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/map.h"
#include "base/str.h"

struct kp_yaml_node {
    struct kp_yaml_node *next_alloc; /* the document's list of every node */
    const char *file;                /* the document's file name */
    uint64_t weight;                 /* nodes reachable through this one, aliases expanded */
    char *str;                       /* scalar text, NUL-terminated */
    size_t len;                      /* scalar length */
    struct kp_yaml_node **kids;      /* sequence items, or mapping key, value, key, value... */
    size_t nkids, cap;
    unsigned line, col;
    enum kp_yaml_type type;
    enum kp_yaml_style style;
};

struct kp_yaml_doc {
    char *file;
    struct kp_yaml_node *all;
    struct kp_yaml_node **roots;
    size_t nroots, cap;
};

/* Parse state. stack[i] is an open container; anchors[i] its anchor name (or NULL). */
struct builder {
    struct kp_yaml_doc *doc;
    struct kp_map *anchors; /* name -> completed node, per document */
    struct kp_yaml_node *stack[KP_YAML_MAX_DEPTH];
    char *stack_anchor[KP_YAML_MAX_DEPTH];
    unsigned depth;
    uint64_t total; /* nodes so far, aliases counted at their weight */
    unsigned docs_seen;
    bool keep; /* building the current document */
    enum kp_yaml_flags flags;
    struct kp_yaml_error *err;
};

static void sanitize(char *s)
{
    /* Messages quote outside text (keys, names); keep control characters out of them so a
     * crafted name cannot forge extra lines in a terminal or a log. */
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

void kp_yaml_errorf(struct kp_yaml_error *err, const struct kp_yaml_node *n, const char *file,
                    const char *fmt, ...)
{
    va_list ap;
    int off;

    if (!err)
        return;
    if (n) {
        err->line = n->line;
        err->col = n->col;
        off = snprintf(err->text, sizeof(err->text), "%s:%u:%u: ", n->file ? n->file : "<input>",
                       n->line, n->col);
    } else {
        err->line = 0;
        err->col = 0;
        off = snprintf(err->text, sizeof(err->text), "%s: ", file ? file : "<input>");
    }
    if (off < 0)
        off = 0;
    if ((size_t)off < sizeof(err->text)) {
        va_start(ap, fmt);
        (void)vsnprintf(err->text + off, sizeof(err->text) - (size_t)off, fmt, ap);
        va_end(ap);
    }
    sanitize(err->text);
}

static void error_at(struct builder *b, unsigned line, unsigned col, const char *fmt, ...)
    KP_PRINTF(4, 5);

static void error_at(struct builder *b, unsigned line, unsigned col, const char *fmt, ...)
{
    va_list ap;
    int off;

    if (!b->err)
        return;
    b->err->line = line;
    b->err->col = col;
    off = snprintf(b->err->text, sizeof(b->err->text), "%s:%u:%u: ", b->doc->file, line, col);
    if (off < 0)
        off = 0;
    if ((size_t)off < sizeof(b->err->text)) {
        va_start(ap, fmt);
        (void)vsnprintf(b->err->text + off, sizeof(b->err->text) - (size_t)off, fmt, ap);
        va_end(ap);
    }
    sanitize(b->err->text);
}

struct kp_yaml_doc *kp_yaml_doc_free(struct kp_yaml_doc *doc)
{
    struct kp_yaml_node *n, *next;

    if (!doc)
        return NULL;
    for (n = doc->all; n; n = next) {
        next = n->next_alloc;
        kp_free(n->str);
        kp_free(n->kids);
        kp_free(n);
    }
    kp_free(doc->roots);
    kp_free(doc->file);
    kp_free(doc);
    return NULL;
}

static int append_ptr(struct kp_yaml_node ***arr, size_t *n, size_t *cap, struct kp_yaml_node *p)
{
    struct kp_yaml_node **a;
    size_t want;

    if (*n == *cap) {
        want = *cap ? *cap * 2 : 4;
        a = kp_reallocarray(*arr, want, sizeof(**arr));
        if (!a)
            return -ENOMEM;
        *arr = a;
        *cap = want;
    }
    (*arr)[(*n)++] = p;
    return 0;
}

static int count_nodes(struct builder *b, uint64_t add, const yaml_mark_t *m)
{
    if (kp_add_overflow(b->total, add, &b->total) || b->total > KP_YAML_MAX_NODES) {
        error_at(b, (unsigned)m->line + 1, (unsigned)m->column + 1,
                 "document expands to more than %u nodes (aliases count at their full size)",
                 KP_YAML_MAX_NODES);
        return -KP_ELIMIT;
    }
    return 0;
}

static int new_node(struct builder *b, enum kp_yaml_type type, const yaml_mark_t *m,
                    struct kp_yaml_node **ret)
{
    struct kp_yaml_node *n;
    int r;

    r = count_nodes(b, 1, m);
    if (r < 0)
        return r;
    n = kp_calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->type = type;
    n->file = b->doc->file;
    n->weight = 1;
    n->line = (unsigned)m->line + 1;
    n->col = (unsigned)m->column + 1;
    n->next_alloc = b->doc->all;
    b->doc->all = n;
    *ret = n;
    return 0;
}

/* Attaches a finished node (or an alias target) to the open container or as a root. */
static int attach(struct builder *b, struct kp_yaml_node *n, const yaml_mark_t *m)
{
    struct kp_yaml_node *parent;
    struct kp_yaml_doc *d = b->doc;

    if (b->depth == 0)
        return append_ptr(&d->roots, &d->nroots, &d->cap, n);
    parent = b->stack[b->depth - 1];
    if (parent->type == KP_YAML_MAPPING && parent->nkids % 2 == 0 && n->type != KP_YAML_SCALAR) {
        error_at(b, (unsigned)m->line + 1, (unsigned)m->column + 1,
                 "mapping keys must be scalars, not %s", kp_yaml_describe(n));
        return -KP_EPARSE;
    }
    return append_ptr(&parent->kids, &parent->nkids, &parent->cap, n);
}

static int register_anchor(struct builder *b, const char *name, struct kp_yaml_node *n)
{
    int r;

    if (!name)
        return 0;
    if (!b->anchors) {
        r = kp_map_new(&b->anchors);
        if (r < 0)
            return r;
    }
    /* A redefined anchor replaces the earlier one for later aliases, as the spec says. */
    return kp_map_put(b->anchors, name, n, /* ret_old= */ NULL);
}

static int key_cmp(const void *a, const void *b)
{
    const struct kp_yaml_node *x = *(struct kp_yaml_node *const *)a;
    const struct kp_yaml_node *y = *(struct kp_yaml_node *const *)b;
    int c;

    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    c = memcmp(x->str, y->str, x->len);
    if (c)
        return c;
    /* Equal keys: earlier position first, so the message names the later one. */
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x->col < y->col ? -1 : (x->col > y->col ? 1 : 0);
}

/* Sorting a copy of the keys keeps the check O(n log n) for huge mappings. */
static int check_duplicate_keys(struct builder *b, const struct kp_yaml_node *map)
{
    struct kp_yaml_node **keys = NULL;
    size_t npairs = map->nkids / 2, i;
    int r = 0;

    if (npairs < 2)
        return 0;
    keys = kp_reallocarray(NULL, npairs, sizeof(*keys));
    if (!keys)
        return -ENOMEM;
    for (i = 0; i < npairs; i++)
        keys[i] = map->kids[2 * i];
    qsort(keys, npairs, sizeof(*keys), key_cmp);
    for (i = 1; i < npairs; i++) {
        if (keys[i]->len == keys[i - 1]->len &&
            memcmp(keys[i]->str, keys[i - 1]->str, keys[i]->len) == 0) {
            error_at(b, keys[i]->line, keys[i]->col, "duplicate key \"%s\" (first at %u:%u)",
                     keys[i]->str, keys[i - 1]->line, keys[i - 1]->col);
            r = -KP_EPARSE;
            goto out;
        }
    }
out:
    kp_free(keys);
    return r;
}

static bool tag_is_str(const yaml_char_t *tag)
{
    return tag && strcmp((const char *)tag, YAML_STR_TAG) == 0;
}

static int on_scalar(struct builder *b, const yaml_event_t *e)
{
    struct kp_yaml_node *n = NULL;
    size_t len = e->data.scalar.length;
    int r;

    r = new_node(b, KP_YAML_SCALAR, &e->start_mark, &n);
    if (r < 0)
        return r;
    n->str = kp_malloc(len + 1);
    if (!n->str)
        return -ENOMEM;
    if (len)
        memcpy(n->str, e->data.scalar.value, len);
    n->str[len] = '\0';
    n->len = len;
    switch (e->data.scalar.style) {
    case YAML_SINGLE_QUOTED_SCALAR_STYLE:
    case YAML_DOUBLE_QUOTED_SCALAR_STYLE:
        n->style = KP_YAML_QUOTED;
        break;
    case YAML_LITERAL_SCALAR_STYLE:
    case YAML_FOLDED_SCALAR_STYLE:
        n->style = KP_YAML_BLOCK;
        break;
    default:
        n->style = KP_YAML_PLAIN;
        break;
    }
    if (tag_is_str(e->data.scalar.tag))
        n->style = KP_YAML_QUOTED;
    r = attach(b, n, &e->start_mark);
    if (r < 0)
        return r;
    return register_anchor(b, (const char *)e->data.scalar.anchor, n);
}

static int on_start(struct builder *b, const yaml_event_t *e, enum kp_yaml_type type)
{
    const yaml_char_t *anchor =
        type == KP_YAML_MAPPING ? e->data.mapping_start.anchor : e->data.sequence_start.anchor;
    struct kp_yaml_node *n = NULL;
    int r;

    if (b->depth >= KP_YAML_MAX_DEPTH) {
        error_at(b, (unsigned)e->start_mark.line + 1, (unsigned)e->start_mark.column + 1,
                 "nested more than %d levels deep", KP_YAML_MAX_DEPTH);
        return -KP_ELIMIT;
    }
    r = new_node(b, type, &e->start_mark, &n);
    if (r < 0)
        return r;
    b->stack_anchor[b->depth] = NULL;
    if (anchor) {
        b->stack_anchor[b->depth] = kp_strdup((const char *)anchor);
        if (!b->stack_anchor[b->depth])
            return -ENOMEM;
    }
    b->stack[b->depth++] = n;
    return 0;
}

static int on_end(struct builder *b, const yaml_event_t *e)
{
    struct kp_yaml_node *n;
    char *anchor;
    size_t i;
    int r;

    if (b->depth == 0)
        return -KP_EPARSE; /* libyaml never does this */
    n = b->stack[b->depth - 1];
    for (i = 0; i < n->nkids; i++)
        if (kp_add_overflow(n->weight, n->kids[i]->weight, &n->weight))
            n->weight = UINT64_MAX;
    if (n->type == KP_YAML_MAPPING) {
        r = check_duplicate_keys(b, n);
        if (r < 0)
            return r;
    }
    /* Pop before attaching: the parent is now the top of the stack. */
    anchor = b->stack_anchor[b->depth - 1];
    b->stack_anchor[b->depth - 1] = NULL;
    b->depth--;
    r = attach(b, n, &e->start_mark);
    if (r >= 0)
        r = register_anchor(b, anchor, n);
    kp_free(anchor);
    return r;
}

static int on_alias(struct builder *b, const yaml_event_t *e)
{
    struct kp_yaml_node *target = NULL;
    const char *name = (const char *)e->data.alias.anchor;
    int r;

    if (b->anchors)
        target = kp_map_get(b->anchors, name);
    if (!target) {
        error_at(b, (unsigned)e->start_mark.line + 1, (unsigned)e->start_mark.column + 1,
                 "alias \"*%s\" names no anchor defined before it", name);
        return -KP_EPARSE;
    }
    r = count_nodes(b, target->weight, &e->start_mark);
    if (r < 0)
        return r;
    return attach(b, target, &e->start_mark);
}

static int on_event(struct builder *b, const yaml_event_t *e)
{
    switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
        b->docs_seen++;
        b->keep = b->docs_seen == 1 || (b->flags & KP_YAML_ALL_DOCUMENTS);
        /* Anchors are scoped to their document. */
        b->anchors = kp_map_free(b->anchors);
        return 0;
    case YAML_SCALAR_EVENT:
        return b->keep ? on_scalar(b, e) : 0;
    case YAML_SEQUENCE_START_EVENT:
        return b->keep ? on_start(b, e, KP_YAML_SEQUENCE) : 0;
    case YAML_MAPPING_START_EVENT:
        return b->keep ? on_start(b, e, KP_YAML_MAPPING) : 0;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return b->keep ? on_end(b, e) : 0;
    case YAML_ALIAS_EVENT:
        return b->keep ? on_alias(b, e) : 0;
    default:
        return 0;
    }
}

int kp_yaml_parse(const char *p, size_t len, const char *filename, size_t max_bytes,
                  enum kp_yaml_flags flags, struct kp_yaml_doc **ret_doc,
                  struct kp_yaml_error *reterr)
{
    struct builder b = {.flags = flags, .err = reterr};
    struct kp_yaml_doc *doc = NULL;
    yaml_parser_t parser;
    yaml_event_t event;
    bool parser_ready = false, done = false;
    int r;

    if (!filename)
        filename = "<input>";
    if (len > max_bytes) {
        kp_yaml_errorf(reterr, NULL, filename, "%zu bytes is more than the limit of %zu", len,
                       max_bytes);
        r = -KP_ELIMIT;
        goto out;
    }
    doc = kp_calloc(1, sizeof(*doc));
    if (!doc) {
        r = -ENOMEM;
        goto out;
    }
    doc->file = kp_strdup(filename);
    if (!doc->file) {
        r = -ENOMEM;
        goto out;
    }
    b.doc = doc;
    if (!yaml_parser_initialize(&parser)) {
        r = -ENOMEM;
        goto out;
    }
    parser_ready = true;
    yaml_parser_set_input_string(&parser, (const unsigned char *)(len ? p : ""), len);
    while (!done) {
        if (!yaml_parser_parse(&parser, &event)) {
            if (parser.error == YAML_MEMORY_ERROR) {
                r = -ENOMEM;
                goto out;
            }
            if (parser.context)
                error_at(&b, (unsigned)parser.problem_mark.line + 1,
                         (unsigned)parser.problem_mark.column + 1, "%s %s (at %u:%u)",
                         parser.problem ? parser.problem : "syntax error", parser.context,
                         (unsigned)parser.context_mark.line + 1,
                         (unsigned)parser.context_mark.column + 1);
            else
                error_at(&b, (unsigned)parser.problem_mark.line + 1,
                         (unsigned)parser.problem_mark.column + 1, "%s",
                         parser.problem ? parser.problem : "syntax error");
            r = -KP_EPARSE;
            goto out;
        }
        done = event.type == YAML_STREAM_END_EVENT;
        r = on_event(&b, &event);
        yaml_event_delete(&event);
        if (r < 0) {
            if (r == -ENOMEM)
                kp_yaml_errorf(reterr, NULL, filename, "out of memory");
            goto out;
        }
    }
    *ret_doc = doc;
    doc = NULL;
    r = 0;
out:
    while (b.depth > 0)
        kp_free(b.stack_anchor[--b.depth]);
    kp_map_free(b.anchors);
    if (parser_ready)
        yaml_parser_delete(&parser);
    kp_yaml_doc_free(doc);
    return r;
}

size_t kp_yaml_doc_count(const struct kp_yaml_doc *doc)
{
    return doc ? doc->nroots : 0;
}

const struct kp_yaml_node *kp_yaml_doc_root(const struct kp_yaml_doc *doc, size_t i)
{
    return doc && i < doc->nroots ? doc->roots[i] : NULL;
}

const char *kp_yaml_doc_file(const struct kp_yaml_doc *doc)
{
    return doc->file;
}

enum kp_yaml_type kp_yaml_type(const struct kp_yaml_node *n)
{
    return n->type;
}

enum kp_yaml_style kp_yaml_style(const struct kp_yaml_node *n)
{
    return n->style;
}

unsigned kp_yaml_line(const struct kp_yaml_node *n)
{
    return n->line;
}

unsigned kp_yaml_col(const struct kp_yaml_node *n)
{
    return n->col;
}

const char *kp_yaml_file(const struct kp_yaml_node *n)
{
    return n->file;
}

const char *kp_yaml_describe(const struct kp_yaml_node *n)
{
    if (!n)
        return "nothing";
    switch (n->type) {
    case KP_YAML_SEQUENCE:
        return "a sequence";
    case KP_YAML_MAPPING:
        return "a mapping";
    default:
        return kp_yaml_is_null(n) ? "null" : "a scalar";
    }
}

size_t kp_yaml_len(const struct kp_yaml_node *n)
{
    if (!n)
        return 0;
    if (n->type == KP_YAML_MAPPING)
        return n->nkids / 2;
    return n->type == KP_YAML_SEQUENCE ? n->nkids : 0;
}

const struct kp_yaml_node *kp_yaml_seq_at(const struct kp_yaml_node *n, size_t i)
{
    if (!n || n->type != KP_YAML_SEQUENCE || i >= n->nkids)
        return NULL;
    return n->kids[i];
}

const struct kp_yaml_node *kp_yaml_map_key_at(const struct kp_yaml_node *n, size_t i)
{
    if (!n || n->type != KP_YAML_MAPPING || i >= n->nkids / 2)
        return NULL;
    return n->kids[2 * i];
}

const struct kp_yaml_node *kp_yaml_map_value_at(const struct kp_yaml_node *n, size_t i)
{
    if (!n || n->type != KP_YAML_MAPPING || i >= n->nkids / 2)
        return NULL;
    return n->kids[2 * i + 1];
}

const struct kp_yaml_node *kp_yaml_map_get(const struct kp_yaml_node *n, const char *key)
{
    size_t i, klen = strlen(key);

    if (!n || n->type != KP_YAML_MAPPING)
        return NULL;
    for (i = 0; i + 1 < n->nkids; i += 2) {
        const struct kp_yaml_node *k = n->kids[i];

        if (k->len == klen && memcmp(k->str, key, klen) == 0)
            return n->kids[i + 1];
    }
    return NULL;
}

bool kp_yaml_is_null(const struct kp_yaml_node *n)
{
    if (!n || n->type != KP_YAML_SCALAR || n->style != KP_YAML_PLAIN)
        return false;
    return n->len == 0 || strcmp(n->str, "~") == 0 || strcmp(n->str, "null") == 0 ||
           strcmp(n->str, "Null") == 0 || strcmp(n->str, "NULL") == 0;
}

int kp_yaml_get_str(const struct kp_yaml_node *n, const char **ret, size_t *ret_len)
{
    if (!n || n->type != KP_YAML_SCALAR || kp_yaml_is_null(n))
        return -KP_EPARSE;
    *ret = n->str;
    if (ret_len)
        *ret_len = n->len;
    return 0;
}

int kp_yaml_get_cstr(const struct kp_yaml_node *n, const char **ret)
{
    const char *s;
    size_t len;
    int r;

    r = kp_yaml_get_str(n, &s, &len);
    if (r < 0)
        return r;
    if (memchr(s, '\0', len))
        return -KP_EPARSE;
    *ret = s;
    return 0;
}

int kp_yaml_get_bool(const struct kp_yaml_node *n, bool *ret)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
                                      "YES",  "on",   "On",   "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No",
                                     "NO",    "off",   "Off",   "OFF"};
    size_t i;

    if (!n || n->type != KP_YAML_SCALAR || n->style != KP_YAML_PLAIN)
        return -KP_EPARSE;
    for (i = 0; i < KP_ARRAY_SIZE(yes); i++) {
        if (strcmp(n->str, yes[i]) == 0) {
            *ret = true;
            return 0;
        }
        if (strcmp(n->str, no[i]) == 0) {
            *ret = false;
            return 0;
        }
    }
    return -KP_EPARSE;
}

int kp_yaml_get_int(const struct kp_yaml_node *n, int64_t *ret)
{
    const char *s;
    uint64_t u;
    int64_t v;
    int r;

    if (!n || n->type != KP_YAML_SCALAR || n->style != KP_YAML_PLAIN || n->len == 0)
        return -KP_EPARSE;
    s = n->str;
    if (n->len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        r = kp_parse_x64(s + 2, n->len - 2, &u);
        if (r < 0)
            return r == -ERANGE ? r : -KP_EPARSE;
        if (u > INT64_MAX)
            return -ERANGE;
        *ret = (int64_t)u;
        return 0;
    }
    r = kp_parse_i64(s, n->len, &v);
    if (r < 0)
        return r == -ERANGE ? r : -KP_EPARSE;
    *ret = v;
    return 0;
}
