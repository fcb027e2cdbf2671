/* Tests for json/json.h: bounded decode (ceilings, depth, duplicates, NUL), typed getters on
 * wrong types and missing keys, dotted and vector paths, encode ceilings, merge patches, and
 * allocation-failure torture over jansson (routed to kp_malloc). */
#include <errno.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "json/json.h"

#define MAXB (1u << 20)

static json_t *parse_ok(const char *s)
{
    json_t *v = NULL;
    struct kp_json_error e;

    if (kp_json_parse(s, strlen(s), MAXB, 0, &v, &e) != 0)
        fail_msg("parse %s: %s", s, e.text);
    return v;
}

static void test_parse_errors(void **state)
{
    static const char *const bad[] = {
        "",
        "{",
        "{\"a\":1,}",
        "[1,2",
        "nul",
        "{\"a\":1}x",
        "{\"a\":1,\"a\":2}",
        "\"a\\u0000b\"",
        "{\"a\\u0000\":1}",
        "'a'",
        "[1e999999]",
        "123456789012345678901234567890",
        "{a:1}",
        "[\"\x80\"]",
    };
    struct kp_json_error e;
    json_t *v = NULL;

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        memset(&e, 0, sizeof(e));
        if (kp_json_parse(bad[i], strlen(bad[i]), MAXB, 0, &v, &e) != -KP_EPARSE)
            fail_msg("accepted %s", bad[i]);
        assert_null(v);
        assert_true(e.text[0] != '\0');
    }
    /* Position information: line 2, column of the offending byte. */
    assert_int_equal(kp_json_parse("{\n  \"a\": x}", 11, MAXB, 0, &v, &e), -KP_EPARSE);
    assert_int_equal(e.line, 2);
    assert_true(e.column > 0);
    /* A raw NUL byte inside the buffer. */
    assert_int_equal(kp_json_parse("[1,\0 2]", 7, MAXB, 0, &v, &e), -KP_EPARSE);
}

static void test_parse_limits(void **state)
{
    struct kp_buf deep = KP_BUF_INIT(1 << 16);
    struct kp_json_error e;
    json_t *v = NULL;

    (void)state;
    assert_int_equal(kp_json_parse("[1,2,3]", 7, 6, 0, &v, &e), -KP_ELIMIT);
    assert_int_equal(kp_json_parse("[1,2,3]", 7, 7, 0, &v, &e), 0);
    v = kp_json_unref(v);
    assert_int_equal(kp_json_parse("[[[1]]]", 7, 100, 3, &v, &e), 0);
    v = kp_json_unref(v);
    assert_int_equal(kp_json_parse("[[[1]]]", 7, 100, 2, &v, &e), -KP_ELIMIT);
    assert_int_equal(e.position, 2);
    /* Brackets inside strings do not count. */
    assert_int_equal(kp_json_parse("[\"[[[[\\\"[[[\"]", 13, 100, 1, &v, &e), 0);
    v = kp_json_unref(v);
    for (int i = 0; i < 5000; i++)
        assert_int_equal(kp_buf_putc(&deep, '['), 0);
    assert_int_equal(kp_json_parse(deep.data, deep.len, MAXB, 100000, &v, &e), -KP_ELIMIT);
    assert_int_equal(kp_json_parse(deep.data, deep.len, MAXB, 0, &v, &e), -KP_ELIMIT);
    kp_buf_done(&deep);
    assert_int_equal(kp_json_parse(NULL, 0, MAXB, 0, &v, &e), -KP_EPARSE);
    /* Any top-level value is accepted. */
    assert_int_equal(kp_json_parse("42", 2, MAXB, 0, &v, &e), 0);
    assert_int_equal(kp_json_typeof(v), KP_JSON_INTEGER);
    v = kp_json_unref(v);
}

static void test_getters(void **state)
{
    json_t *v = parse_ok("{\"metadata\":{\"name\":\"n1\",\"labels\":{\"karpenter.sh/nodepool\":"
                         "\"default\"},\"generation\":7,\"deleted\":null},\"spec\":{\"x\":true,"
                         "\"f\":1.5,\"arr\":[1,\"two\",{\"k\":3}]},\"s\":\"str\"}");
    const char *s = NULL;
    int64_t i = 0;
    bool b = false;
    json_t *o = NULL, *a = NULL;

    (void)state;
    assert_int_equal(kp_json_path_str(v, "metadata.name", &s), 0);
    assert_string_equal(s, "n1");
    assert_int_equal(kp_json_path_int(v, "metadata.generation", &i), 0);
    assert_int_equal(i, 7);
    assert_int_equal(kp_json_path_bool(v, "spec.x", &b), 0);
    assert_true(b);
    assert_int_equal(kp_json_path_object(v, "metadata.labels", &o), 0);
    assert_int_equal(kp_json_get_str(o, "karpenter.sh/nodepool", &s), 0);
    assert_string_equal(s, "default");
    assert_int_equal(
        kp_json_pathv_str(v, KP_JSON_PATH("metadata", "labels", "karpenter.sh/nodepool"), &s), 0);
    assert_string_equal(s, "default");
    assert_int_equal(kp_json_path_array(v, "spec.arr", &a), 0);
    assert_int_equal(kp_json_array_size(a), 3);
    assert_int_equal(kp_json_as_int(kp_json_array_at(a, 0), &i), 0);
    assert_int_equal(i, 1);
    assert_int_equal(kp_json_as_str(kp_json_array_at(a, 1), &s), 0);
    assert_string_equal(s, "two");
    assert_int_equal(kp_json_get_int(kp_json_array_at(a, 2), "k", &i), 0);
    assert_int_equal(i, 3);
    assert_null(kp_json_array_at(a, 3));
    assert_null(kp_json_array_at(v, 0));
    assert_int_equal(kp_json_array_size(v), 0);
    assert_int_equal(kp_json_array_size(NULL), 0);

    /* Missing, null, wrong type: nothing written. */
    s = "unchanged";
    i = 99;
    assert_int_equal(kp_json_path_str(v, "metadata.missing", &s), -ENOENT);
    assert_int_equal(kp_json_path_str(v, "metadata.deleted", &s), -ENOENT);
    assert_int_equal(kp_json_path_str(v, "nope.name", &s), -ENOENT);
    assert_int_equal(kp_json_path_str(v, "metadata.generation", &s), -KP_EPARSE);
    assert_int_equal(kp_json_path_str(v, "s.deeper", &s), -KP_EPARSE);
    assert_int_equal(kp_json_path_int(v, "spec.f", &i), -KP_EPARSE);
    assert_int_equal(kp_json_path_int(v, "metadata.name", &i), -KP_EPARSE);
    assert_int_equal(kp_json_path_bool(v, "metadata.name", &b), -KP_EPARSE);
    assert_int_equal(kp_json_path_object(v, "spec.arr", &o), -KP_EPARSE);
    assert_int_equal(kp_json_path_array(v, "spec", &a), -KP_EPARSE);
    assert_int_equal(kp_json_path_str(v, "", &s), -EINVAL);
    assert_int_equal(kp_json_path_str(v, "metadata..name", &s), -EINVAL);
    assert_int_equal(kp_json_path_str(v, "metadata.", &s), -EINVAL);
    assert_int_equal(kp_json_path_str(v, NULL, &s), -EINVAL);
    assert_int_equal(kp_json_get_str(NULL, "a", &s), -ENOENT);
    assert_int_equal(kp_json_get_str(a, "a", &s), -KP_EPARSE);
    assert_int_equal(kp_json_get_str(v, NULL, &s), -EINVAL);
    assert_int_equal(kp_json_as_str(NULL, &s), -ENOENT);
    assert_int_equal(kp_json_as_bool(kp_json_array_at(a, 0), &b), -KP_EPARSE);
    assert_int_equal(kp_json_pathv_str(v, KP_JSON_PATH("metadata", "nope"), &s), -ENOENT);
    assert_int_equal(kp_json_pathv_str(NULL, KP_JSON_PATH("metadata"), &s), -ENOENT);
    assert_string_equal(s, "unchanged");
    assert_int_equal(i, 99);
    v = kp_json_unref(v);
}

/* Integers and reals both read as numbers; a string, a boolean or null does not. */
static void test_number(void **state)
{
    json_t *v = parse_ok("[2, 0.04, -1.5e3, \"0.04\", true, null]");
    double d = 99;

    (void)state;
    assert_int_equal(kp_json_as_number(kp_json_array_at(v, 0), &d), 0);
    assert_true(d == 2.0);
    assert_int_equal(kp_json_as_number(kp_json_array_at(v, 1), &d), 0);
    assert_true(d == 0.04);
    assert_int_equal(kp_json_as_number(kp_json_array_at(v, 2), &d), 0);
    assert_true(d == -1500.0);
    d = 99;
    assert_int_equal(kp_json_as_number(kp_json_array_at(v, 3), &d), -KP_EPARSE);
    assert_int_equal(kp_json_as_number(kp_json_array_at(v, 4), &d), -KP_EPARSE);
    assert_int_equal(kp_json_as_number(kp_json_array_at(v, 5), &d), -ENOENT);
    assert_int_equal(kp_json_as_number(NULL, &d), -ENOENT);
    assert_true(d == 99);
    v = kp_json_unref(v);
}

static void test_iterate(void **state)
{
    json_t *v = parse_ok("{\"a\":1,\"b\":2,\"c\":3}");
    struct kp_json_iter it = KP_JSON_ITER_INIT;
    const char *key;
    json_t *val;
    int64_t sum = 0, x;
    size_t n = 0;

    (void)state;
    while (kp_json_object_next(v, &it, &key, &val)) {
        assert_int_equal(kp_json_as_int(val, &x), 0);
        sum += x;
        n++;
    }
    assert_int_equal(n, 3);
    assert_int_equal(sum, 6);
    assert_false(kp_json_object_next(v, &it, &key, &val)); /* stays at the end */
    it = (struct kp_json_iter)KP_JSON_ITER_INIT;
    assert_false(kp_json_object_next(NULL, &it, &key, &val));
    v = kp_json_unref(v);
}

static void test_dump(void **state)
{
    json_t *v = parse_ok("{\"b\":[1,true,null],\"a\":\"x\\\"y\",\"c\":{}}");
    struct kp_buf out = KP_BUF_INIT(1024);
    struct kp_buf small = KP_BUF_INIT(10);

    (void)state;
    assert_int_equal(kp_json_dump(v, KP_JSON_SORT_KEYS, &out), 0);
    assert_string_equal(kp_buf_str(&out), "{\"a\":\"x\\\"y\",\"b\":[1,true,null],\"c\":{}}");
    kp_buf_reset(&out);
    assert_int_equal(kp_json_dump(v, KP_JSON_SORT_KEYS | KP_JSON_PRETTY, &out), 0);
    assert_non_null(strstr(kp_buf_str(&out), "\n  \"a\": "));
    assert_int_equal(kp_json_dump(v, 0, &small), -KP_ELIMIT);
    assert_int_equal(small.len, 0);
    assert_int_equal(kp_json_dump(NULL, 0, &out), -EINVAL);
    kp_buf_done(&out);
    kp_buf_done(&small);
    v = kp_json_unref(v);
    assert_null(kp_json_ref(NULL));
}

static void test_patch(void **state)
{
    struct kp_buf out = KP_BUF_INIT(4096);
    json_t *p = NULL, *old_doc, *new_doc, *d = NULL;

    (void)state;
    assert_int_equal(kp_json_patch_new(&p), 0);
    assert_int_equal(kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "resourceVersion"), "42"),
                     0);
    assert_int_equal(
        kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "labels", "karpenter.sh/nodepool"), "np"),
        0);
    assert_int_equal(kp_json_patch_set_null(p, KP_JSON_PATH("metadata", "annotations", "gone")), 0);
    assert_int_equal(kp_json_patch_set_int(p, KP_JSON_PATH("spec", "replicas"), 3), 0);
    assert_int_equal(kp_json_patch_set_bool(p, KP_JSON_PATH("spec", "unschedulable"), true), 0);
    assert_int_equal(kp_json_patch_set_steal(p, KP_JSON_PATH("spec", "taints"), parse_ok("[]")), 0);
    /* An intermediate that is not an object. */
    assert_int_equal(kp_json_patch_set_int(p, KP_JSON_PATH("spec", "replicas", "x"), 1),
                     -KP_EPARSE);
    assert_int_equal(kp_json_patch_set_int(p, KP_JSON_PATH(NULL), 1), -EINVAL);
    assert_int_equal(kp_json_patch_set_str(p, KP_JSON_PATH("a"), NULL), -EINVAL);
    assert_int_equal(kp_json_patch_set_steal(p, KP_JSON_PATH("a"), NULL), -EINVAL);
    assert_int_equal(kp_json_dump(p, KP_JSON_SORT_KEYS, &out), 0);
    assert_string_equal(
        kp_buf_str(&out),
        "{\"metadata\":{\"annotations\":{\"gone\":null},\"labels\":{\"karpenter."
        "sh/nodepool\":\"np\"},\"resourceVersion\":\"42\"},\"spec\":{\"replicas\":3,"
        "\"taints\":[],\"unschedulable\":true}}");
    p = kp_json_unref(p);

    old_doc = parse_ok("{\"a\":1,\"b\":{\"c\":2,\"d\":3,\"n\":null},\"e\":[1],\"f\":\"same\"}");
    new_doc = parse_ok("{\"a\":1,\"b\":{\"c\":5,\"n\":null,\"z\":null},\"e\":[1,2],\"f\":\"same\","
                       "\"g\":{\"h\":true}}");
    assert_int_equal(kp_json_merge_patch_diff(old_doc, new_doc, &d), 0);
    kp_buf_reset(&out);
    assert_int_equal(kp_json_dump(d, KP_JSON_SORT_KEYS, &out), 0);
    assert_string_equal(kp_buf_str(&out),
                        "{\"b\":{\"c\":5,\"d\":null},\"e\":[1,2],\"g\":{\"h\":true}}");
    d = kp_json_unref(d);
    assert_int_equal(kp_json_merge_patch_diff(old_doc, old_doc, &d), 0);
    kp_buf_reset(&out);
    assert_int_equal(kp_json_dump(d, 0, &out), 0);
    assert_string_equal(kp_buf_str(&out), "{}");
    d = kp_json_unref(d);
    assert_int_equal(kp_json_merge_patch_diff(NULL, old_doc, &d), 0);
    assert_true(kp_json_equal(d, old_doc));
    d = kp_json_unref(d);
    assert_int_equal(kp_json_merge_patch_diff(old_doc, kp_json_array_at(new_doc, 0), &d), 0);
    d = kp_json_unref(d);
    d = parse_ok("[]");
    assert_int_equal(kp_json_merge_patch_diff(old_doc, d, &d), -EINVAL); /* d untouched */
    d = kp_json_unref(d);
    kp_buf_done(&out);
    kp_json_unref(old_doc);
    kp_json_unref(new_doc);
}

/* --- torture ------------------------------------------------------------------------------- */

static const char torture_doc[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{\"a\":"
    "\"b\",\"c\":\"d\"},\"resourceVersion\":\"9\"},\"status\":{\"capacity\":{\"cpu\":\"4\","
    "\"memory\":\"16Gi\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";

static int torture_parse_dump(void)
{
    struct kp_buf out = KP_BUF_INIT(1 << 16);
    json_t *v = NULL, *w = NULL;
    const char *s;
    int r;

    r = kp_json_parse(torture_doc, sizeof(torture_doc) - 1, MAXB, 0, &v, NULL);
    if (r < 0)
        goto out;
    r = kp_json_path_str(v, "status.capacity.memory", &s);
    if (r < 0)
        goto out;
    r = kp_json_dump(v, KP_JSON_SORT_KEYS, &out);
    if (r < 0)
        goto out;
    r = kp_json_parse(out.data, out.len, MAXB, 0, &w, NULL);
    if (r < 0)
        goto out;
    r = kp_json_equal(v, w) ? 0 : -EINVAL;
out:
    kp_buf_done(&out);
    kp_json_unref(v);
    kp_json_unref(w);
    return r;
}

static const char torture_new[] =
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n2\",\"labels\":{\"a\":\"c\"}}}";

static int torture_patch(void)
{
    struct kp_buf out = KP_BUF_INIT(1 << 16);
    json_t *p = NULL, *old_doc = NULL, *new_doc = NULL, *d = NULL;
    int r;

    r = kp_json_patch_new(&p);
    if (r < 0)
        goto out;
    r = kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "labels", "x.io/y"), "z");
    if (r < 0)
        goto out;
    r = kp_json_patch_set_null(p, KP_JSON_PATH("metadata", "annotations", "q"));
    if (r < 0)
        goto out;
    r = kp_json_patch_set_int(p, KP_JSON_PATH("spec", "n"), 5);
    if (r < 0)
        goto out;
    r = kp_json_dump(p, KP_JSON_SORT_KEYS, &out);
    if (r < 0)
        goto out;
    r = kp_json_parse(torture_doc, sizeof(torture_doc) - 1, MAXB, 0, &old_doc, NULL);
    if (r < 0)
        goto out;
    r = kp_json_parse(torture_new, strlen(torture_new), MAXB, 0, &new_doc, NULL);
    if (r < 0)
        goto out;
    r = kp_json_merge_patch_diff(old_doc, new_doc, &d);
    if (r < 0)
        goto out;
    r = kp_json_dump(d, 0, &out);
out:
    kp_buf_done(&out);
    kp_json_unref(p);
    kp_json_unref(old_doc);
    kp_json_unref(new_doc);
    kp_json_unref(d);
    return r;
}

/* Text that is not UTF-8 (a host's stderr, say) is stored, not refused: bad bytes become U+FFFD. */
static void test_patch_bad_utf8(void **state)
{
    struct kp_buf out = KP_BUF_INIT(4096);
    json_t *p = NULL;

    (void)state;
    assert_int_equal(kp_json_patch_new(&p), 0);
    assert_int_equal(kp_json_patch_set_str(p, KP_JSON_PATH("status", "lastProbeError"),
                                           "motd: caf\xe9 \xc3\xa9"),
                     0);
    assert_int_equal(kp_json_dump(p, 0, &out), 0);
    assert_string_equal(kp_buf_str(&out),
                        "{\"status\":{\"lastProbeError\":\"motd: caf\xef\xbf\xbd \xc3\xa9\"}}");
    kp_json_unref(p);
    kp_buf_done(&out);
}

/* Our idea of valid UTF-8 (kp_utf8_len) agrees with jansson's: every string of one or two bytes
 * and every three- and four-byte lead with boundary continuations is stored verbatim exactly
 * when kp_utf8_scrub leaves it unchanged. */
static void test_utf8_agrees_with_jansson(void **state)
{
    static const unsigned char cont[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90,
                                         0x9f, 0xa0, 0xbf, 0xc0, 0xff};
    unsigned char s[5];
    size_t checked = 0;

    (void)state;
    for (unsigned a = 1; a < 256; a++) {
        for (unsigned b = 0; b < 256; b++) {
            for (size_t ci = 0; ci < KP_ARRAY_SIZE(cont) * KP_ARRAY_SIZE(cont) + 1; ci++) {
                json_t *p = NULL;
                const char *got = NULL;
                char *clean;
                bool verbatim;

                s[0] = (unsigned char)a;
                s[1] = (unsigned char)b;
                s[2] = s[3] = s[4] = 0;
                if (ci > 0) {
                    if (a < 0xe0 || b == 0)
                        break; /* three and four bytes only after their leads */
                    s[2] = cont[(ci - 1) % KP_ARRAY_SIZE(cont)];
                    s[3] = a >= 0xf0 ? cont[(ci - 1) / KP_ARRAY_SIZE(cont)] : 0;
                    if (s[2] == 0 || (a < 0xf0 && ci > KP_ARRAY_SIZE(cont)))
                        continue;
                }
                assert_int_equal(kp_json_patch_new(&p), 0);
                assert_int_equal(kp_json_patch_set_str(p, KP_JSON_PATH("v"), (const char *)s), 0);
                assert_int_equal(kp_json_get_str(p, "v", &got), 0);
                clean = kp_utf8_scrub((const char *)s);
                assert_non_null(clean);
                verbatim = strcmp(got, (const char *)s) == 0;
                if (verbatim != (strcmp(clean, (const char *)s) == 0))
                    fail_msg("%02x %02x %02x %02x: jansson %s, kp_utf8_scrub %s", s[0], s[1], s[2],
                             s[3], verbatim ? "valid" : "invalid",
                             strcmp(clean, (const char *)s) == 0 ? "valid" : "invalid");
                kp_free(clean);
                kp_json_unref(p);
                checked++;
            }
        }
    }
    print_message("# %zu strings checked against jansson\n", checked);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),   cmocka_unit_test(test_parse_limits),
        cmocka_unit_test(test_getters),        cmocka_unit_test(test_iterate),
        cmocka_unit_test(test_dump),           cmocka_unit_test(test_patch),
        cmocka_unit_test(test_patch_bad_utf8), cmocka_unit_test(test_utf8_agrees_with_jansson),
        cmocka_unit_test(test_number),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_parse_dump),
        KP_TORTURE(torture_patch),
    };

    return kp_test_main("json", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture), argc,
                        argv);
}
