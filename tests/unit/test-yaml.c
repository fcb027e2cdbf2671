/* DESIGN: unit tests for yaml/yaml.c.
 *
 * Each test parses a small literal document and checks the tree, the positions and the typed
 * accessors, or the exact error text (file:line:col: message) and code for a broken one. The
 * torture cases rebuild trees with anchors, aliases and several documents while each of our
 * allocations fails in turn (libyaml's own allocations are outside the sweep). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "kp-test.h"
#include "yaml/yaml.h"

#define MAX (1u << 20)
#define IN(lit) lit, sizeof(lit) - 1

static struct kp_yaml_doc *parse_ok(const char *text, enum kp_yaml_flags flags)
{
    struct kp_yaml_doc *doc = NULL;
    struct kp_yaml_error err = {0};
    int r = kp_yaml_parse(text, strlen(text), "t.yaml", MAX, flags, &doc, &err);

    if (r != 0)
        fail_msg("parse failed (%d): %s", r, err.text);
    return doc;
}

static void parse_fails(const char *text, int code, const char *msg)
{
    struct kp_yaml_doc *doc = NULL;
    struct kp_yaml_error err = {0};
    int r = kp_yaml_parse(text, strlen(text), "t.yaml", MAX, 0, &doc, &err);

    assert_int_equal(r, code);
    assert_null(doc);
    if (!strstr(err.text, msg))
        fail_msg("error text \"%s\" does not contain \"%s\"", err.text, msg);
}

static void test_tree_and_positions(void **state)
{
    struct kp_yaml_doc *doc;
    const struct kp_yaml_node *root, *n, *seq;
    const char *s;

    (void)state;
    doc = parse_ok("a: 1\n"
                   "b:\n"
                   "  - x\n"
                   "  - {c: d}\n"
                   "e: \"quoted\"\n",
                   0);
    assert_int_equal(kp_yaml_doc_count(doc), 1);
    root = kp_yaml_doc_root(doc, 0);
    assert_int_equal(kp_yaml_type(root), KP_YAML_MAPPING);
    assert_int_equal(kp_yaml_len(root), 3);
    assert_string_equal(kp_yaml_file(root), "t.yaml");
    seq = kp_yaml_map_get(root, "b");
    assert_non_null(seq);
    assert_int_equal(kp_yaml_type(seq), KP_YAML_SEQUENCE);
    assert_int_equal(kp_yaml_line(seq), 3);
    assert_int_equal(kp_yaml_col(seq), 3);
    assert_int_equal(kp_yaml_len(seq), 2);
    n = kp_yaml_seq_at(seq, 1);
    assert_int_equal(kp_yaml_type(n), KP_YAML_MAPPING);
    assert_int_equal(kp_yaml_line(n), 4);
    assert_int_equal(kp_yaml_col(n), 5);
    n = kp_yaml_map_get(n, "c");
    assert_int_equal(kp_yaml_col(n), 9);
    assert_int_equal(kp_yaml_get_cstr(n, &s), 0);
    assert_string_equal(s, "d");
    assert_null(kp_yaml_seq_at(seq, 2));
    assert_null(kp_yaml_map_get(root, "zz"));
    assert_null(kp_yaml_map_get(seq, "a"));
    n = kp_yaml_map_key_at(root, 2);
    assert_int_equal(kp_yaml_get_cstr(n, &s), 0);
    assert_string_equal(s, "e");
    n = kp_yaml_map_value_at(root, 2);
    assert_int_equal(kp_yaml_style(n), KP_YAML_QUOTED);
    assert_int_equal(kp_yaml_line(n), 5);
    assert_int_equal(kp_yaml_col(n), 4);
    kp_yaml_doc_free(doc);
}

static void test_scalars(void **state)
{
    struct kp_yaml_doc *doc;
    const struct kp_yaml_node *root;
    const char *s;
    size_t len;
    bool b;
    int64_t v;

    (void)state;
    doc = parse_ok("t: true\n"
                   "y: yes\n"
                   "f: False\n"
                   "qt: \"true\"\n"
                   "i: -42\n"
                   "h: 0x1F\n"
                   "qi: '123'\n"
                   "s: !!str 77\n"
                   "big: 99999999999999999999\n"
                   "n1:\n"
                   "n2: ~\n"
                   "n3: null\n"
                   "qn: \"\"\n"
                   "nul: \"a\\0b\"\n"
                   "lit: |\n"
                   "  line\n",
                   0);
    root = kp_yaml_doc_root(doc, 0);
    assert_int_equal(kp_yaml_get_bool(kp_yaml_map_get(root, "t"), &b), 0);
    assert_true(b);
    assert_int_equal(kp_yaml_get_bool(kp_yaml_map_get(root, "y"), &b), 0);
    assert_true(b);
    assert_int_equal(kp_yaml_get_bool(kp_yaml_map_get(root, "f"), &b), 0);
    assert_false(b);
    /* A quoted "true" is a string, not a boolean. */
    assert_int_equal(kp_yaml_get_bool(kp_yaml_map_get(root, "qt"), &b), -KP_EPARSE);
    assert_int_equal(kp_yaml_get_cstr(kp_yaml_map_get(root, "qt"), &s), 0);
    assert_string_equal(s, "true");
    assert_int_equal(kp_yaml_get_int(kp_yaml_map_get(root, "i"), &v), 0);
    assert_int_equal(v, -42);
    assert_int_equal(kp_yaml_get_int(kp_yaml_map_get(root, "h"), &v), 0);
    assert_int_equal(v, 31);
    v = 5;
    assert_int_equal(kp_yaml_get_int(kp_yaml_map_get(root, "qi"), &v), -KP_EPARSE);
    assert_int_equal(kp_yaml_get_int(kp_yaml_map_get(root, "s"), &v), -KP_EPARSE);
    assert_int_equal(v, 5);
    assert_int_equal(kp_yaml_style(kp_yaml_map_get(root, "s")), KP_YAML_QUOTED);
    assert_int_equal(kp_yaml_get_int(kp_yaml_map_get(root, "big"), &v), -ERANGE);
    assert_int_equal(kp_yaml_get_int(kp_yaml_map_get(root, "t"), &v), -KP_EPARSE);
    assert_true(kp_yaml_is_null(kp_yaml_map_get(root, "n1")));
    assert_true(kp_yaml_is_null(kp_yaml_map_get(root, "n2")));
    assert_true(kp_yaml_is_null(kp_yaml_map_get(root, "n3")));
    assert_false(kp_yaml_is_null(kp_yaml_map_get(root, "qn")));
    assert_int_equal(kp_yaml_get_str(kp_yaml_map_get(root, "n1"), &s, &len), -KP_EPARSE);
    assert_int_equal(kp_yaml_get_str(kp_yaml_map_get(root, "qn"), &s, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(kp_yaml_get_str(kp_yaml_map_get(root, "nul"), &s, &len), 0);
    assert_int_equal(len, 3);
    assert_int_equal(kp_yaml_get_cstr(kp_yaml_map_get(root, "nul"), &s), -KP_EPARSE);
    assert_int_equal(kp_yaml_style(kp_yaml_map_get(root, "lit")), KP_YAML_BLOCK);
    assert_int_equal(kp_yaml_get_cstr(kp_yaml_map_get(root, "lit"), &s), 0);
    assert_string_equal(s, "line\n");
    assert_int_equal(kp_yaml_get_cstr(root, &s), -KP_EPARSE);
    assert_string_equal(kp_yaml_describe(root), "a mapping");
    assert_string_equal(kp_yaml_describe(kp_yaml_map_get(root, "n1")), "null");
    kp_yaml_doc_free(doc);
}

static void test_anchors(void **state)
{
    struct kp_yaml_doc *doc;
    const struct kp_yaml_node *root, *a, *b;
    const char *s;

    (void)state;
    doc = parse_ok("base: &b {x: 1}\n"
                   "copy: *b\n"
                   "s: &v hello\n"
                   "t: *v\n",
                   0);
    root = kp_yaml_doc_root(doc, 0);
    a = kp_yaml_map_get(root, "base");
    b = kp_yaml_map_get(root, "copy");
    assert_ptr_equal(a, b);
    assert_int_equal(kp_yaml_get_cstr(kp_yaml_map_get(root, "t"), &s), 0);
    assert_string_equal(s, "hello");
    kp_yaml_doc_free(doc);

    parse_fails("a: *nope\n", -KP_EPARSE, "t.yaml:1:4: alias \"*nope\" names no anchor");
    /* An anchor cannot be used inside itself: no cycles. */
    parse_fails("a: &x [1, *x]\n", -KP_EPARSE, "names no anchor");
}

static void test_billion_laughs(void **state)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    int i, j;

    (void)state;
    assert_int_equal(kp_buf_puts(&b, "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"), 0);
    for (i = 1; i < 10; i++) {
        assert_int_equal(kp_buf_printf(&b, "a%d: &a%d [", i, i), 0);
        for (j = 0; j < 9; j++)
            assert_int_equal(kp_buf_printf(&b, "%s*a%d", j ? ", " : "", i - 1), 0);
        assert_int_equal(kp_buf_puts(&b, "]\n"), 0);
    }
    parse_fails(kp_buf_str(&b), -KP_ELIMIT, "more than 1048576 nodes");
    kp_buf_done(&b);
}

static void test_depth_limit(void **state)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    int i;

    (void)state;
    for (i = 0; i < KP_YAML_MAX_DEPTH; i++)
        assert_int_equal(kp_buf_putc(&b, '['), 0);
    for (i = 0; i < KP_YAML_MAX_DEPTH; i++)
        assert_int_equal(kp_buf_putc(&b, ']'), 0);
    kp_yaml_doc_free(parse_ok(kp_buf_str(&b), 0));
    kp_buf_reset(&b);
    for (i = 0; i <= KP_YAML_MAX_DEPTH; i++)
        assert_int_equal(kp_buf_putc(&b, '['), 0);
    for (i = 0; i <= KP_YAML_MAX_DEPTH; i++)
        assert_int_equal(kp_buf_putc(&b, ']'), 0);
    parse_fails(kp_buf_str(&b), -KP_ELIMIT, "t.yaml:1:65: nested more than 64 levels deep");
    kp_buf_done(&b);
}

static void test_documents(void **state)
{
    static const char text[] = "a: 1\n---\nb: 2\n---\n- c\n";
    struct kp_yaml_doc *doc;
    struct kp_yaml_error err;

    (void)state;
    doc = parse_ok(text, 0);
    assert_int_equal(kp_yaml_doc_count(doc), 1);
    assert_non_null(kp_yaml_map_get(kp_yaml_doc_root(doc, 0), "a"));
    kp_yaml_doc_free(doc);
    doc = parse_ok(text, KP_YAML_ALL_DOCUMENTS);
    assert_int_equal(kp_yaml_doc_count(doc), 3);
    assert_non_null(kp_yaml_map_get(kp_yaml_doc_root(doc, 1), "b"));
    assert_int_equal(kp_yaml_line(kp_yaml_doc_root(doc, 2)), 5);
    assert_null(kp_yaml_doc_root(doc, 3));
    kp_yaml_doc_free(doc);
    doc = parse_ok("", 0);
    assert_int_equal(kp_yaml_doc_count(doc), 0);
    assert_null(kp_yaml_doc_root(doc, 0));
    kp_yaml_doc_free(doc);
    /* A syntax error in a later document fails the parse even when only the first is kept. */
    parse_fails("a: 1\n---\nb: [\n", -KP_EPARSE, "t.yaml:");
    /* Anchors do not cross documents. */
    assert_int_equal(kp_yaml_parse(IN("a: &x 1\n---\nb: *x\n"), "t.yaml", MAX,
                                   KP_YAML_ALL_DOCUMENTS, &doc, &err),
                     -KP_EPARSE);
    assert_string_equal(err.text, "t.yaml:3:4: alias \"*x\" names no anchor defined before it");
}

static void test_errors(void **state)
{
    struct kp_yaml_doc *doc = NULL;
    struct kp_yaml_error err = {0};

    (void)state;
    parse_fails("a: 1\nb: 2\na: 3\n", -KP_EPARSE, "t.yaml:3:1: duplicate key \"a\" (first at 1:1)");
    parse_fails("? [a]\n: 1\n", -KP_EPARSE, "mapping keys must be scalars, not a sequence");
    parse_fails("a: [1, 2\n", -KP_EPARSE, "t.yaml:2:1: did not find expected ',' or ']'");
    parse_fails("a:\n\tb: 1\n", -KP_EPARSE, "t.yaml:2:1:");
    parse_fails("a: b: c\n", -KP_EPARSE, "t.yaml:1:5: mapping values are not allowed");
    /* Control characters in a quoted key do not reach the message. */
    parse_fails("\"x\\ny\": 1\n\"x\\ny\": 2\n", -KP_EPARSE, "duplicate key \"x?y\"");
    assert_int_equal(kp_yaml_parse("a: 1\n", 5, "big.yaml", 4, 0, &doc, &err), -KP_ELIMIT);
    assert_string_equal(err.text, "big.yaml: 5 bytes is more than the limit of 4");
    assert_int_equal(err.line, 0);
    assert_null(doc);
    /* Not NUL-terminated input: the length is what counts. */
    assert_int_equal(kp_yaml_parse("a: 1XXXX", 4, NULL, MAX, 0, &doc, &err), 0);
    assert_string_equal(kp_yaml_doc_file(doc), "<input>");
    kp_yaml_doc_free(doc);
}

static void test_json(void **state)
{
    struct kp_yaml_doc *doc;
    const struct kp_yaml_node *n;
    const char *s;

    (void)state;
    doc = parse_ok("{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"a\\/b\\u00e9\",\"n\":1}}",
                   0);
    n = kp_yaml_map_get(kp_yaml_map_get(kp_yaml_doc_root(doc, 0), "status"), "token");
    assert_int_equal(kp_yaml_get_cstr(n, &s), 0);
    assert_string_equal(s, "a/b\xc3\xa9");
    kp_yaml_doc_free(doc);
}

static void test_errorf(void **state)
{
    struct kp_yaml_doc *doc = parse_ok("a:\n  b: 1\n", 0);
    const struct kp_yaml_node *n = kp_yaml_map_get(kp_yaml_doc_root(doc, 0), "a");
    struct kp_yaml_error err;

    (void)state;
    kp_yaml_errorf(&err, n, NULL, "expected %s", "a sequence");
    assert_string_equal(err.text, "t.yaml:2:3: expected a sequence");
    assert_int_equal(err.line, 2);
    assert_int_equal(err.col, 3);
    kp_yaml_errorf(&err, NULL, "f", "no %s", "position");
    assert_string_equal(err.text, "f: no position");
    kp_yaml_errorf(NULL, n, NULL, "ignored");
    kp_yaml_doc_free(doc);
}

/* --- torture ------------------------------------------------------------------------------ */

static int torture_parse(void)
{
    static const char text[] = "base: &b {x: [1, 2, {y: z}], w: \"q\"}\n"
                               "copies: [*b, *b, *b]\n"
                               "k1: v1\nk2: v2\nk3: v3\nk4: v4\nk5: v5\n"
                               "---\n"
                               "- second\n";
    struct kp_yaml_doc *doc = NULL;
    int r;

    r = kp_yaml_parse(text, sizeof(text) - 1, "t.yaml", MAX, KP_YAML_ALL_DOCUMENTS, &doc, NULL);
    if (r < 0)
        return r;
    r = kp_yaml_doc_count(doc) == 2 ? 0 : -EINVAL;
    kp_yaml_doc_free(doc);
    return r;
}

static int torture_errors(void)
{
    static const char text[] = "a: &x [1, 2]\nb: *x\na: 3\n";
    struct kp_yaml_doc *doc = NULL;
    int r;

    r = kp_yaml_parse(text, sizeof(text) - 1, "t.yaml", MAX, 0, &doc, NULL);
    kp_yaml_doc_free(doc);
    return r == -KP_EPARSE ? 0 : (r < 0 ? r : -EINVAL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_and_positions),
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_anchors),
        cmocka_unit_test(test_billion_laughs),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_errorf),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_parse),
        KP_TORTURE(torture_errors),
    };

    return kp_test_main("yaml", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
