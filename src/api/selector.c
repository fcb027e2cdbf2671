/* DESIGN: label selectors and node selector requirements.
 *
 * What: three builders (string form, LabelSelector JSON, NodeSelectorRequirement JSON) feed one
 * requirement list; one matcher serves them all. The string grammar, the error texts for label
 * keys and values and the matching rules follow the Kubernetes documentation and the observable
 * behaviour of labels.Parse (facts, not code): "=" with nothing after it means the empty value,
 * "in ()" means the set {""}, empty list items are empty values, a trailing comma after a
 * requirement is an error, and ">"/"<" values must be integers.
 *
 * Why one representation: scheduling simulation (core/) asks the same question of a pod's
 * nodeSelector, its node affinity and a NodePool's requirements: "do these labels satisfy
 * this conjunction?". Keeping values sorted lets matching binary-search them and makes the
 * string form canonical (the fuzz driver checks parse -> format -> parse).
 *
 * Ownership: the selector owns one allocation per key and per value; building either hands a
 * complete selector out or frees everything (goto out). Threads: a built selector is
 * immutable, so matching is safe from any number of threads. */
#include "api/selector.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/map.h"
#include "base/str.h"

struct kp_selector {
    struct kp_requirement *reqs;
    size_t n, cap;
};

struct kp_slice {
    const char *p;
    size_t n;
};

/* --- label syntax ------------------------------------------------------------------------- */

static bool kp_is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool kp_is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])? */
static bool kp_label_name_chars_ok(const char *p, size_t n)
{
    if (n == 0 || !kp_is_alnum(p[0]) || !kp_is_alnum(p[n - 1]))
        return false;
    for (size_t i = 1; i + 1 < n; i++)
        if (!kp_is_alnum(p[i]) && p[i] != '-' && p[i] != '_' && p[i] != '.')
            return false;
    return true;
}

/* RFC 1123 subdomain: dot-separated labels of [a-z0-9]([-a-z0-9]*[a-z0-9])?. */
static bool kp_dns_subdomain_ok(const char *p, size_t n)
{
    size_t start = 0;

    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '.') {
            if (!kp_is_lower_alnum(p[i]) && p[i] != '-')
                return false;
            continue;
        }
        /* A label p[start..i) ends here. */
        if (i == start || !kp_is_lower_alnum(p[start]) || !kp_is_lower_alnum(p[i - 1]))
            return false;
        start = i + 1;
    }
    return true;
}

/* What is wrong with the label key p[n] (a static sentence), or NULL when it is valid. */
static const char *label_key_problem(const char *p, size_t n)
{
    const char *slash = p ? memchr(p, '/', n) : NULL;
    const char *name = p;
    size_t name_n = n;

    if (!p || n == 0)
        return "name part must be non-empty";
    if (slash) {
        size_t prefix_n = (size_t)(slash - p);

        name = slash + 1;
        name_n = n - prefix_n - 1;
        if (memchr(name, '/', name_n))
            return "a qualified name must consist of an optional DNS subdomain "
                   "prefix, a '/' and a name part";
        if (prefix_n == 0)
            return "prefix part must be non-empty";
        if (prefix_n > 253)
            return "prefix part must be no more than 253 characters";
        if (!kp_dns_subdomain_ok(p, prefix_n))
            return "prefix part must be a lowercase RFC 1123 subdomain: "
                   "lowercase alphanumeric characters, '-' or '.', starting and "
                   "ending with an alphanumeric character";
    }
    if (name_n == 0)
        return "name part must be non-empty";
    if (name_n > 63)
        return "name part must be no more than 63 characters";
    if (!kp_label_name_chars_ok(name, name_n))
        return "name part must consist of alphanumeric characters, '-', '_' or "
               "'.', and must start and end with an alphanumeric character";
    return NULL;
}

/* What is wrong with the label value p[n] (a static sentence), or NULL when it is valid. */
static const char *label_value_problem(const char *p, size_t n)
{
    if (n == 0)
        return NULL;
    if (!p)
        return "label value missing";
    if (n > 63)
        return "label value must be no more than 63 characters";
    if (!kp_label_name_chars_ok(p, n))
        return "a valid label value must be an empty string or consist of "
               "alphanumeric characters, '-', '_' or '.', and must start and "
               "end with an alphanumeric character";
    return NULL;
}

/* 0 for no problem; otherwise -EINVAL with why in *ret_msg. */
static int invalid(const char *why, char **ret_msg)
{
    if (!why)
        return 0;
    kp_msg_set(ret_msg, "%s", why);
    return -EINVAL;
}

int kp_label_validate_key(const char *p, size_t n, char **ret_msg)
{
    return invalid(label_key_problem(p, n), ret_msg);
}

int kp_label_validate_value(const char *p, size_t n, char **ret_msg)
{
    return invalid(label_value_problem(p, n), ret_msg);
}

/* --- building ----------------------------------------------------------------------------- */

static void kp_requirement_done(struct kp_requirement *r)
{
    for (size_t i = 0; i < r->n_values; i++)
        kp_free(r->values[i]);
    kp_free(r->values);
    kp_free(r->key);
    memset(r, 0, sizeof(*r));
}

struct kp_selector *kp_selector_free(struct kp_selector *s)
{
    if (!s)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        kp_requirement_done(&s->reqs[i]);
    kp_free(s->reqs);
    kp_free(s);
    return NULL;
}

static int kp_selector_new(struct kp_selector **ret)
{
    struct kp_selector *s = kp_calloc(1, sizeof(*s));

    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

static int kp_set_err(struct kp_selector_error *reterr, size_t pos, const char *msg, int r)
{
    if (reterr) {
        reterr->pos = pos;
        reterr->msg = msg;
    }
    return r;
}

static int kp_cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int kp_cmp_slice(const void *a, const void *b)
{
    const struct kp_slice *x = a, *y = b;
    int c = memcmp(x->p, y->p, KP_MIN(x->n, y->n));

    if (c != 0)
        return c;
    return (x->n > y->n) - (x->n < y->n);
}

/* Validates and appends one requirement; values are slices into the caller's input. pos is for
 * reterr. check_values: validate values as label values (label selectors, not node
 * requirements). */
static int kp_selector_add(struct kp_selector *s, struct kp_slice key, enum kp_selector_op op,
                           struct kp_slice *values, size_t n_values, uint32_t min_values,
                           bool check_values, size_t pos, struct kp_selector_error *reterr)
{
    struct kp_requirement req = {0};
    const char *why = NULL;
    size_t unique = 0;
    int r;

    if (s->n >= KP_SELECTOR_MAX_REQS)
        return kp_set_err(reterr, pos, "too many requirements", -KP_ELIMIT);
    if (n_values > KP_SELECTOR_MAX_VALUES)
        return kp_set_err(reterr, pos, "too many values", -KP_ELIMIT);
    if ((why = label_key_problem(key.p, key.n)))
        return kp_set_err(reterr, pos, why, -EINVAL);
    switch (op) {
    case KP_SEL_IN:
    case KP_SEL_NOT_IN:
        if (n_values == 0)
            return kp_set_err(reterr, pos, "for 'in', 'notin' operators, values set can't be empty",
                              -EINVAL);
        break;
    case KP_SEL_EQUALS:
    case KP_SEL_NOT_EQUALS:
        if (n_values != 1)
            return kp_set_err(reterr, pos, "exact-match compatibility requires one single value",
                              -EINVAL);
        break;
    case KP_SEL_EXISTS:
    case KP_SEL_DOES_NOT_EXIST:
        if (n_values != 0)
            return kp_set_err(reterr, pos, "values set must be empty for exists and does not exist",
                              -EINVAL);
        break;
    case KP_SEL_GT:
    case KP_SEL_LT:
    case KP_SEL_GTE:
    case KP_SEL_LTE:
        if (n_values != 1)
            return kp_set_err(reterr, pos,
                              "for 'Gt', 'Lt', 'Gte', 'Lte' operators, exactly one "
                              "value is required",
                              -EINVAL);
        if (kp_parse_i64(values[0].p, values[0].n, &req.bound) < 0)
            return kp_set_err(reterr, pos,
                              "for 'Gt', 'Lt', 'Gte', 'Lte' operators, the value "
                              "must be an integer",
                              -EINVAL);
        break;
    default:
        return kp_set_err(reterr, pos, "unknown operator", -EINVAL);
    }
    if (min_values > 0) {
        if (min_values > KP_SELECTOR_MIN_VALUES_MAX)
            return kp_set_err(reterr, pos, "minValues must be between 1 and 50", -EINVAL);
        if (op == KP_SEL_IN && n_values < min_values)
            return kp_set_err(reterr, pos,
                              "requirements with 'minValues' must have at least "
                              "that many values specified in the 'values' field",
                              -EINVAL);
    }
    for (size_t i = 0; i < n_values; i++) {
        if (check_values && (why = label_value_problem(values[i].p, values[i].n)))
            return kp_set_err(reterr, pos, why, -EINVAL);
        if (memchr(values[i].p, '\0', values[i].n))
            return kp_set_err(reterr, pos, "value holds a NUL byte", -EINVAL);
    }
    if (memchr(key.p, '\0', key.n))
        return kp_set_err(reterr, pos, "key holds a NUL byte", -EINVAL);

    if (n_values > 1)
        qsort(values, n_values, sizeof(values[0]), kp_cmp_slice);
    req.op = op;
    req.min_values = min_values;
    req.key = kp_strndup(key.p, key.n);
    if (!req.key) {
        r = -ENOMEM;
        goto out;
    }
    if (n_values > 0) {
        req.values = kp_calloc(n_values, sizeof(char *));
        if (!req.values) {
            r = -ENOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i < n_values; i++) {
        if (unique > 0 && kp_cmp_slice(&values[i], &values[i - 1]) == 0)
            continue;
        req.values[unique] = kp_strndup(values[i].p, values[i].n);
        if (!req.values[unique]) {
            r = -ENOMEM;
            goto out;
        }
        req.n_values = ++unique;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        struct kp_requirement *v = kp_reallocarray(s->reqs, cap, sizeof(*v));

        if (!v) {
            r = -ENOMEM;
            goto out;
        }
        s->reqs = v;
        s->cap = cap;
    }
    s->reqs[s->n++] = req;
    memset(&req, 0, sizeof(req)); /* the selector owns it now */
    r = 0;
out:
    kp_requirement_done(&req);
    return r;
}

/* Total order on content, so sorting is deterministic whatever qsort does with ties. */
static int kp_cmp_requirement(const void *a, const void *b)
{
    const struct kp_requirement *x = a, *y = b;
    int c = strcmp(x->key, y->key);

    if (c != 0)
        return c;
    if (x->op != y->op)
        return x->op < y->op ? -1 : 1;
    for (size_t i = 0; i < x->n_values && i < y->n_values; i++) {
        c = strcmp(x->values[i], y->values[i]);
        if (c != 0)
            return c;
    }
    if (x->n_values != y->n_values)
        return x->n_values < y->n_values ? -1 : 1;
    return (x->min_values > y->min_values) - (x->min_values < y->min_values);
}

static void kp_selector_sort(struct kp_selector *s)
{
    if (s->n > 1)
        qsort(s->reqs, s->n, sizeof(s->reqs[0]), kp_cmp_requirement);
}

/* --- the string form ---------------------------------------------------------------------- */

enum kp_tok {
    KP_TOK_END,
    KP_TOK_IDENT,
    KP_TOK_NOT,    /* ! */
    KP_TOK_EQ,     /* = or == */
    KP_TOK_NEQ,    /* != */
    KP_TOK_COMMA,  /* , */
    KP_TOK_LPAREN, /* ( */
    KP_TOK_RPAREN, /* ) */
    KP_TOK_GT,     /* > */
    KP_TOK_LT,     /* < */
};

struct kp_lexer {
    const char *p;
    size_t n, i;
    struct kp_slice text; /* of the last token */
    size_t pos;           /* of the last token */
};

static bool kp_sel_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool kp_sel_special(char c)
{
    return c == '!' || c == '=' || c == ',' || c == '(' || c == ')' || c == '<' || c == '>';
}

static enum kp_tok kp_lex(struct kp_lexer *lx)
{
    const char *p = lx->p;
    size_t start;

    while (lx->i < lx->n && kp_sel_space(p[lx->i]))
        lx->i++;
    start = lx->i;
    lx->pos = start;
    lx->text.p = p + start;
    lx->text.n = 0;
    if (lx->i >= lx->n)
        return KP_TOK_END;
    if (kp_sel_special(p[start])) {
        char c = p[lx->i++];
        bool eq_next = lx->i < lx->n && p[lx->i] == '=';

        lx->text.n = 1;
        switch (c) {
        case '!':
            if (eq_next) {
                lx->i++;
                lx->text.n = 2;
                return KP_TOK_NEQ;
            }
            return KP_TOK_NOT;
        case '=':
            if (eq_next) {
                lx->i++;
                lx->text.n = 2;
            }
            return KP_TOK_EQ;
        case ',':
            return KP_TOK_COMMA;
        case '(':
            return KP_TOK_LPAREN;
        case ')':
            return KP_TOK_RPAREN;
        case '>':
            return KP_TOK_GT;
        default:
            return KP_TOK_LT;
        }
    }
    while (lx->i < lx->n && !kp_sel_space(p[lx->i]) && !kp_sel_special(p[lx->i]))
        lx->i++;
    lx->text.n = lx->i - start;
    return KP_TOK_IDENT;
}

static enum kp_tok kp_peek(const struct kp_lexer *lx)
{
    struct kp_lexer copy = *lx;

    return kp_lex(&copy);
}

struct kp_slices {
    struct kp_slice *v;
    size_t n, cap;
};

static int kp_slices_push(struct kp_slices *sv, struct kp_slice s)
{
    if (sv->n >= KP_SELECTOR_MAX_VALUES)
        return -KP_ELIMIT;
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 4;
        struct kp_slice *v = kp_reallocarray(sv->v, cap, sizeof(*v));

        if (!v)
            return -ENOMEM;
        sv->v = v;
        sv->cap = cap;
    }
    sv->v[sv->n++] = s;
    return 0;
}

/* "(" [item] ("," [item])* ")" where an absent item is the empty value. */
static int kp_parse_list(struct kp_lexer *lx, struct kp_slices *values,
                         struct kp_selector_error *reterr)
{
    enum kp_tok t = kp_lex(lx);
    int r;

    if (t != KP_TOK_LPAREN)
        return kp_set_err(reterr, lx->pos, "expected '(' after 'in' or 'notin'", -KP_EPARSE);
    for (;;) {
        struct kp_slice item = {.p = "", .n = 0};

        t = kp_lex(lx);
        if (t == KP_TOK_IDENT) {
            item = lx->text;
            t = kp_lex(lx);
        }
        if (t != KP_TOK_COMMA && t != KP_TOK_RPAREN)
            return kp_set_err(reterr, lx->pos, "expected ',', ')' or a value", -KP_EPARSE);
        r = kp_slices_push(values, item);
        if (r < 0)
            return r == -KP_ELIMIT ? kp_set_err(reterr, lx->pos, "too many values", r) : r;
        if (t == KP_TOK_RPAREN)
            return 0;
    }
}

/* One requirement at the lexer's position; the caller handles the separator after it. */
static int kp_parse_requirement(struct kp_lexer *lx, struct kp_selector *s,
                                struct kp_selector_error *reterr)
{
    struct kp_slices values = {0};
    struct kp_slice key;
    enum kp_selector_op op;
    enum kp_tok t = kp_lex(lx);
    size_t pos = lx->pos;
    int r;

    if (t == KP_TOK_NOT) {
        if (kp_lex(lx) != KP_TOK_IDENT) {
            r = kp_set_err(reterr, lx->pos, "expected a key after '!'", -KP_EPARSE);
            goto out;
        }
        r = kp_selector_add(s, lx->text, KP_SEL_DOES_NOT_EXIST, NULL, 0, 0, true, pos, reterr);
        goto out;
    }
    if (t != KP_TOK_IDENT) {
        r = kp_set_err(reterr, lx->pos, "expected a key or '!'", -KP_EPARSE);
        goto out;
    }
    key = lx->text;
    t = kp_peek(lx);
    if (t == KP_TOK_END || t == KP_TOK_COMMA) {
        r = kp_selector_add(s, key, KP_SEL_EXISTS, NULL, 0, 0, true, pos, reterr);
        goto out;
    }
    t = kp_lex(lx);
    switch (t) {
    case KP_TOK_EQ:
    case KP_TOK_NEQ:
    case KP_TOK_GT:
    case KP_TOK_LT: {
        struct kp_slice value = {.p = "", .n = 0};
        enum kp_tok next = kp_peek(lx);

        op = t == KP_TOK_EQ    ? KP_SEL_EQUALS
             : t == KP_TOK_NEQ ? KP_SEL_NOT_EQUALS
             : t == KP_TOK_GT  ? KP_SEL_GT
                               : KP_SEL_LT;
        if (next == KP_TOK_IDENT) {
            (void)kp_lex(lx); /* the token peeked at: its text is the value */
            value = lx->text;
        } else if (next != KP_TOK_END && next != KP_TOK_COMMA) {
            (void)kp_lex(lx);
            r = kp_set_err(reterr, lx->pos, "expected a value", -KP_EPARSE);
            goto out;
        }
        r = kp_slices_push(&values, value);
        if (r < 0)
            goto out;
        break;
    }
    case KP_TOK_IDENT:
        if (kp_memeq_str(lx->text.p, lx->text.n, "in")) {
            op = KP_SEL_IN;
        } else if (kp_memeq_str(lx->text.p, lx->text.n, "notin")) {
            op = KP_SEL_NOT_IN;
        } else {
            r = kp_set_err(reterr, lx->pos, "expected an operator: =, ==, !=, in, notin, >, <",
                           -KP_EPARSE);
            goto out;
        }
        r = kp_parse_list(lx, &values, reterr);
        if (r < 0)
            goto out;
        break;
    default:
        r = kp_set_err(reterr, lx->pos, "expected an operator: =, ==, !=, in, notin, >, <",
                       -KP_EPARSE);
        goto out;
    }
    r = kp_selector_add(s, key, op, values.v, values.n, 0, true, pos, reterr);
out:
    kp_free(values.v);
    return r;
}

int kp_selector_parse(const char *p, size_t n, struct kp_selector **ret,
                      struct kp_selector_error *reterr)
{
    struct kp_lexer lx = {.p = p, .n = n, .i = 0};
    struct kp_selector *s = NULL;
    int r;

    if (n > KP_SELECTOR_MAX_LEN) {
        r = kp_set_err(reterr, KP_SELECTOR_MAX_LEN, "selector longer than its ceiling", -KP_ELIMIT);
        goto out;
    }
    if (!p && n > 0) {
        r = -EINVAL;
        goto out;
    }
    if (!p)
        lx.p = "";
    r = kp_selector_new(&s);
    if (r < 0)
        goto out;
    if (kp_peek(&lx) != KP_TOK_END) {
        for (;;) {
            enum kp_tok t;

            r = kp_parse_requirement(&lx, s, reterr);
            if (r < 0)
                goto out;
            t = kp_lex(&lx);
            if (t == KP_TOK_END)
                break;
            if (t != KP_TOK_COMMA) {
                r = kp_set_err(reterr, lx.pos, "expected ',' or the end", -KP_EPARSE);
                goto out;
            }
        }
    }
    kp_selector_sort(s);
    *ret = s;
    s = NULL;
    r = 0;
out:
    kp_selector_free(s);
    return r;
}

/* --- JSON forms --------------------------------------------------------------------------- */

static int kp_op_from_name(const char *name, bool node, enum kp_selector_op *ret)
{
    static const struct {
        const char *name;
        enum kp_selector_op op;
        bool node_only;
    } ops[] = {
        {"In", KP_SEL_IN, false},         {"NotIn", KP_SEL_NOT_IN, false},
        {"Exists", KP_SEL_EXISTS, false}, {"DoesNotExist", KP_SEL_DOES_NOT_EXIST, false},
        {"Gt", KP_SEL_GT, true},          {"Lt", KP_SEL_LT, true},
        {"Gte", KP_SEL_GTE, true},        {"Lte", KP_SEL_LTE, true},
    };

    for (size_t i = 0; i < KP_ARRAY_SIZE(ops); i++) {
        if (strcmp(name, ops[i].name) == 0 && (node || !ops[i].node_only)) {
            *ret = ops[i].op;
            return 0;
        }
    }
    return -EINVAL;
}

static int kp_add_map_entries(struct kp_selector *s, const json_t *map, size_t *pos,
                              struct kp_selector_error *reterr)
{
    struct kp_json_iter it = KP_JSON_ITER_INIT;
    const char *key;
    json_t *value;
    int r;

    if (kp_json_typeof(map) != KP_JSON_OBJECT)
        return kp_set_err(reterr, *pos, "matchLabels must be an object", -KP_EPARSE);
    while (kp_json_object_next(map, &it, &key, &value)) {
        struct kp_slice k = {.p = key, .n = strlen(key)};
        struct kp_slice v;
        const char *str;

        if (kp_json_as_str(value, &str) < 0)
            return kp_set_err(reterr, *pos, "label values must be strings", -KP_EPARSE);
        v.p = str;
        v.n = strlen(str);
        r = kp_selector_add(s, k, KP_SEL_EQUALS, &v, 1, 0, true, *pos, reterr);
        if (r < 0)
            return r;
        (*pos)++;
    }
    return 0;
}

/* Appends the requirement objects of array (matchExpressions or node requirements). */
static int kp_add_expressions(struct kp_selector *s, const json_t *array, bool node, size_t *pos,
                              struct kp_selector_error *reterr)
{
    struct kp_slice *values = NULL;
    int r = 0;

    if (kp_json_typeof(array) != KP_JSON_ARRAY) {
        r = kp_set_err(reterr, *pos, "requirements must be an array", -KP_EPARSE);
        goto out;
    }
    for (size_t i = 0; i < kp_json_array_size(array); i++, (*pos)++) {
        const json_t *e = kp_json_array_at(array, i);
        const char *key = NULL, *opname = NULL;
        json_t *vals = NULL;
        enum kp_selector_op op;
        int64_t min_values = 0;
        size_t nv;

        if (kp_json_get_str(e, "key", &key) < 0) {
            r = kp_set_err(reterr, *pos, "requirement without a string 'key'", -KP_EPARSE);
            goto out;
        }
        if (kp_json_get_str(e, "operator", &opname) < 0) {
            r = kp_set_err(reterr, *pos, "requirement without a string 'operator'", -KP_EPARSE);
            goto out;
        }
        if (kp_op_from_name(opname, node, &op) < 0) {
            r = kp_set_err(reterr, *pos, "unknown operator", -EINVAL);
            goto out;
        }
        r = kp_json_get_array(e, "values", &vals);
        if (r == -KP_EPARSE) {
            r = kp_set_err(reterr, *pos, "'values' must be an array of strings", r);
            goto out;
        }
        nv = kp_json_array_size(vals);
        if (nv > KP_SELECTOR_MAX_VALUES) {
            r = kp_set_err(reterr, *pos, "too many values", -KP_ELIMIT);
            goto out;
        }
        if (node) {
            r = kp_json_get_int(e, "minValues", &min_values);
            if (r == -KP_EPARSE || (r == 0 && (min_values < 1 || min_values > UINT32_MAX))) {
                r = kp_set_err(reterr, *pos, "minValues must be between 1 and 50",
                               r == 0 ? -EINVAL : r);
                goto out;
            }
        }
        kp_free(values);
        values = nv ? kp_calloc(nv, sizeof(*values)) : NULL;
        if (nv && !values) {
            r = -ENOMEM;
            goto out;
        }
        for (size_t k = 0; k < nv; k++) {
            const char *str;

            if (kp_json_as_str(kp_json_array_at(vals, k), &str) < 0) {
                r = kp_set_err(reterr, *pos, "'values' must be an array of strings", -KP_EPARSE);
                goto out;
            }
            values[k].p = str;
            values[k].n = strlen(str);
        }
        r = kp_selector_add(s, (struct kp_slice){.p = key, .n = strlen(key)}, op, values, nv,
                            (uint32_t)min_values, !node, *pos, reterr);
        if (r < 0)
            goto out;
    }
    r = 0;
out:
    kp_free(values);
    return r;
}

int kp_selector_from_json(const json_t *label_selector, struct kp_selector **ret,
                          struct kp_selector_error *reterr)
{
    struct kp_selector *s = NULL;
    json_t *labels = NULL, *exprs = NULL;
    size_t pos = 0;
    int r;

    if (!label_selector || kp_json_typeof(label_selector) != KP_JSON_OBJECT) {
        r = kp_set_err(reterr, 0, "a label selector must be an object", -KP_EPARSE);
        goto out;
    }
    r = kp_selector_new(&s);
    if (r < 0)
        goto out;
    r = kp_json_get_object(label_selector, "matchLabels", &labels);
    if (r == 0)
        r = kp_add_map_entries(s, labels, &pos, reterr);
    else if (r == -KP_EPARSE)
        r = kp_set_err(reterr, 0, "matchLabels must be an object", r);
    else
        r = 0;
    if (r < 0)
        goto out;
    r = kp_json_get_array(label_selector, "matchExpressions", &exprs);
    if (r == 0)
        r = kp_add_expressions(s, exprs, false, &pos, reterr);
    else if (r == -KP_EPARSE)
        r = kp_set_err(reterr, pos, "matchExpressions must be an array", r);
    else
        r = 0;
    if (r < 0)
        goto out;
    kp_selector_sort(s);
    *ret = s;
    s = NULL;
out:
    kp_selector_free(s);
    return r;
}

int kp_selector_from_map_json(const json_t *map, struct kp_selector **ret,
                              struct kp_selector_error *reterr)
{
    struct kp_selector *s = NULL;
    size_t pos = 0;
    int r;

    if (!map) {
        r = kp_set_err(reterr, 0, "matchLabels must be an object", -KP_EPARSE);
        goto out;
    }
    r = kp_selector_new(&s);
    if (r < 0)
        goto out;
    r = kp_add_map_entries(s, map, &pos, reterr);
    if (r < 0)
        goto out;
    kp_selector_sort(s);
    *ret = s;
    s = NULL;
out:
    kp_selector_free(s);
    return r;
}

int kp_selector_from_node_requirements(const json_t *array, struct kp_selector **ret,
                                       struct kp_selector_error *reterr)
{
    struct kp_selector *s = NULL;
    size_t pos = 0;
    int r;

    if (!array) {
        r = kp_set_err(reterr, 0, "requirements must be an array", -KP_EPARSE);
        goto out;
    }
    r = kp_selector_new(&s);
    if (r < 0)
        goto out;
    r = kp_add_expressions(s, array, true, &pos, reterr);
    if (r < 0)
        goto out;
    kp_selector_sort(s);
    *ret = s;
    s = NULL;
out:
    kp_selector_free(s);
    return r;
}

/* --- queries and matching ----------------------------------------------------------------- */

size_t kp_selector_count(const struct kp_selector *s)
{
    return s ? s->n : 0;
}

const struct kp_requirement *kp_selector_at(const struct kp_selector *s, size_t i)
{
    return s && i < s->n ? &s->reqs[i] : NULL;
}

bool kp_selector_is_empty(const struct kp_selector *s)
{
    return kp_selector_count(s) == 0;
}

static bool kp_values_contain(const struct kp_requirement *r, const char *v)
{
    return bsearch(&v, r->values, r->n_values, sizeof(char *), kp_cmp_cstr) != NULL;
}

/* value is NULL when the label is absent. */
static bool kp_requirement_matches(const struct kp_requirement *r, const char *value)
{
    int64_t v;

    switch (r->op) {
    case KP_SEL_IN:
    case KP_SEL_EQUALS:
        return value && kp_values_contain(r, value);
    case KP_SEL_NOT_IN:
    case KP_SEL_NOT_EQUALS:
        return !value || !kp_values_contain(r, value);
    case KP_SEL_EXISTS:
        return value != NULL;
    case KP_SEL_DOES_NOT_EXIST:
        return value == NULL;
    case KP_SEL_GT:
    case KP_SEL_LT:
    case KP_SEL_GTE:
    case KP_SEL_LTE:
        if (!value || kp_parse_i64(value, strlen(value), &v) < 0)
            return false;
        return r->op == KP_SEL_GT    ? v > r->bound
               : r->op == KP_SEL_LT  ? v < r->bound
               : r->op == KP_SEL_GTE ? v >= r->bound
                                     : v <= r->bound;
    default:
        return false;
    }
}

bool kp_requirements_match(const struct kp_requirement *reqs, size_t nreqs,
                           const struct kp_label *labels, size_t n)
{
    for (size_t i = 0; i < nreqs; i++) {
        const struct kp_requirement *r = &reqs[i];
        const char *value = NULL;

        for (size_t k = 0; k < n; k++) {
            if (labels[k].key && strcmp(labels[k].key, r->key) == 0) {
                value = labels[k].value ? labels[k].value : "";
                break;
            }
        }
        if (!kp_requirement_matches(r, value))
            return false;
    }
    return true;
}

bool kp_selector_matches(const struct kp_selector *s, const struct kp_label *labels, size_t n)
{
    /* NULL-tolerant like the other queries: no selector, no requirements. */
    return kp_requirements_match(s ? s->reqs : NULL, kp_selector_count(s), labels, n);
}

bool kp_selector_matches_map(const struct kp_selector *s, const struct kp_map *labels)
{
    for (size_t i = 0; i < kp_selector_count(s); i++) {
        const struct kp_requirement *r = &s->reqs[i];
        const char *value = labels ? kp_map_get(labels, r->key) : NULL;

        if (!kp_requirement_matches(r, value))
            return false;
    }
    return true;
}

int kp_selector_format(const struct kp_selector *s, struct kp_buf *out)
{
    int r = 0;

    for (size_t i = 0; i < kp_selector_count(s); i++) {
        const struct kp_requirement *q = &s->reqs[i];
        const char *op = NULL;

        if (q->op == KP_SEL_GTE || q->op == KP_SEL_LTE || q->min_values > 0)
            return -EOPNOTSUPP;
        if (i > 0 && (r = kp_buf_putc(out, ',')) < 0)
            return r;
        if (q->op == KP_SEL_DOES_NOT_EXIST && (r = kp_buf_putc(out, '!')) < 0)
            return r;
        if ((r = kp_buf_puts(out, q->key)) < 0)
            return r;
        switch (q->op) {
        case KP_SEL_EQUALS:
            op = "=";
            break;
        case KP_SEL_NOT_EQUALS:
            op = "!=";
            break;
        case KP_SEL_IN:
            op = " in (";
            break;
        case KP_SEL_NOT_IN:
            op = " notin (";
            break;
        case KP_SEL_GT:
            op = ">";
            break;
        case KP_SEL_LT:
            op = "<";
            break;
        default:
            continue; /* Exists, DoesNotExist: the key says it all */
        }
        if ((r = kp_buf_puts(out, op)) < 0)
            return r;
        for (size_t k = 0; k < q->n_values; k++) {
            /* Node requirement values are not validated and may not survive the string form. */
            if (label_value_problem(q->values[k], strlen(q->values[k])))
                return -EOPNOTSUPP;
            if (k > 0 && (r = kp_buf_putc(out, ',')) < 0)
                return r;
            if ((r = kp_buf_puts(out, q->values[k])) < 0)
                return r;
        }
        if ((q->op == KP_SEL_IN || q->op == KP_SEL_NOT_IN) && (r = kp_buf_putc(out, ')')) < 0)
            return r;
    }
    return 0;
}
