/* Tests for api/selector.h: string-form grammar (valid and invalid), canonical formatting,
 * LabelSelector and NodeSelectorRequirement JSON, matching semantics (absent keys, integer
 * comparisons), label key/value validation texts, and allocation-failure torture. */
#include <errno.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/map.h"
#include "json/json.h"
#include "api/selector.h"

static struct kp_selector *parse_ok(const char *s)
{
    struct kp_selector *sel = NULL;
    struct kp_selector_error e = {0};
    int r = kp_selector_parse(s, strlen(s), &sel, &e);

    if (r != 0)
        fail_msg("parse '%s': %d at %zu: %s", s, r, e.pos, e.msg ? e.msg : "?");
    return sel;
}

static json_t *json_ok(const char *s)
{
    json_t *v = NULL;

    assert_int_equal(kp_json_parse(s, strlen(s), 1 << 20, 0, &v, NULL), 0);
    return v;
}

static void test_parse_format(void **state)
{
    static const struct {
        const char *in, *canonical;
    } cases[] = {
        {"", ""},
        {"   ", ""},
        {"a=b", "a=b"},
        {"a==b", "a=b"},
        {"a=", "a="},
        {"a!=b", "a!=b"},
        {"a!=", "a!="},
        {" a = b , c != d ", "a=b,c!=d"},
        {"x", "x"},
        {"!x", "!x"},
        {"! x", "!x"},
        {"e in (y,x)", "e in (x,y)"},
        {"e in (x,x,y)", "e in (x,y)"},
        {"e in ( x , y )", "e in (x,y)"},
        {"e in ()", "e in ()"},
        {"e in (,x)", "e in (,x)"},
        {"e in (x,)", "e in (,x)"},
        {"e notin (z)", "e notin (z)"},
        {"a=b,c!=d,e in (x,y),f notin (z),g,!h", "a=b,c!=d,e in (x,y),f notin (z),g,!h"},
        {"z=1,a=2", "a=2,z=1"},
        {"n>5", "n>5"},
        {"n<10,n>5", "n>5,n<10"},
        {"n > 007", "n>007"},
        {"karpenter.sh/nodepool=default", "karpenter.sh/nodepool=default"},
        {"node.kubernetes.io/instance-type in (m5.large,c5.xlarge)",
         "node.kubernetes.io/instance-type in (c5.xlarge,m5.large)"},
        {"in", "in"},
        {"a in (in,notin)", "a in (in,notin)"},
        {"A_b.c-D=V_1.x-Y", "A_b.c-D=V_1.x-Y"},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_selector *sel = parse_ok(cases[i].in);
        struct kp_buf out = KP_BUF_INIT(4096);

        assert_int_equal(kp_selector_format(sel, &out), 0);
        if (strcmp(kp_buf_str(&out), cases[i].canonical) != 0)
            fail_msg("'%s': got '%s' want '%s'", cases[i].in, kp_buf_str(&out), cases[i].canonical);
        kp_buf_done(&out);
        kp_selector_free(sel);
    }
}

static void test_parse_invalid(void **state)
{
    static const struct {
        const char *in;
        int r;
    } cases[] = {
        {",", -KP_EPARSE},         {"a=b,", -KP_EPARSE},     {",a=b", -KP_EPARSE},
        {"a=b,,c=d", -KP_EPARSE},  {"a b", -KP_EPARSE},      {"a=b=c", -KP_EPARSE},
        {"a in x", -KP_EPARSE},    {"a in (x", -KP_EPARSE},  {"a in (x y)", -KP_EPARSE},
        {"a in (x))", -KP_EPARSE}, {"a in (!)", -KP_EPARSE}, {"a notin", -KP_EPARSE},
        {"!", -KP_EPARSE},         {"!a=b", -KP_EPARSE},     {"!!a", -KP_EPARSE},
        {"=b", -KP_EPARSE},        {"(a)", -KP_EPARSE},      {"a>", -EINVAL},
        {"a>b", -EINVAL},          {"a<-1", -EINVAL}, /* as in Kubernetes: the value must also be a valid label value */
        {"a>=5", -KP_EPARSE},      {"a=(b)", -KP_EPARSE},    {"-a=b", -EINVAL},
        {"a-=b", -EINVAL},         {"a=b-", -EINVAL},        {"a=-b", -EINVAL},
        {"a/b/c=d", -EINVAL},      {"/b=c", -EINVAL},        {"a/=c", -EINVAL},
        {"A.com/b=c", -EINVAL},    {"a..com/b=c", -EINVAL},  {"-a.com/b=c", -EINVAL},
        {"a.com-/b=c", -EINVAL},   {"a=\xc3\xa9", -EINVAL},  {"a in (x,y z)", -KP_EPARSE},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_selector *sel = NULL;
        struct kp_selector_error e = {0};
        int r = kp_selector_parse(cases[i].in, strlen(cases[i].in), &sel, &e);

        if (r != cases[i].r)
            fail_msg("'%s': got %d want %d", cases[i].in, r, cases[i].r);
        assert_null(sel);
        assert_non_null(e.msg);
    }
}

static void test_validate(void **state)
{
    char name63[64], name64[65], prefix[300];
    char *why = NULL;

    (void)state;
    memset(name63, 'a', 63);
    name63[63] = '\0';
    memset(name64, 'a', 64);
    name64[64] = '\0';
    assert_int_equal(kp_label_validate_key(name63, 63, &why), 0);
    assert_int_equal(kp_label_validate_key(name64, 64, &why), -EINVAL);
    assert_string_equal(why, "name part must be no more than 63 characters");
    assert_int_equal(kp_label_validate_value(name63, 63, &why), 0);
    assert_int_equal(kp_label_validate_value(name64, 64, &why), -EINVAL);
    assert_string_equal(why, "label value must be no more than 63 characters");
    assert_int_equal(kp_label_validate_value("", 0, &why), 0);
    assert_int_equal(kp_label_validate_key("", 0, &why), -EINVAL);
    assert_string_equal(why, "name part must be non-empty");
    /* A 253-byte prefix is fine, 254 is not. */
    for (int i = 0; i < 253; i++)
        prefix[i] = (i % 2) ? '.' : 'a';
    prefix[252] = 'a';
    prefix[253] = '/';
    prefix[254] = 'x';
    assert_int_equal(kp_label_validate_key(prefix, 255, &why), 0);
    memmove(prefix + 1, prefix, 255);
    prefix[0] = 'b';
    assert_int_equal(kp_label_validate_key(prefix, 256, &why), -EINVAL);
    assert_string_equal(why, "prefix part must be no more than 253 characters");
    assert_int_equal(kp_label_validate_key("Example.com/x", 13, &why), -EINVAL);
    assert_non_null(strstr(why, "RFC 1123"));
    assert_int_equal(kp_label_validate_key("kubernetes.io/hostname", 22, NULL), 0);
    assert_int_equal(kp_label_validate_key("a_b", 3, NULL), 0);
    assert_int_equal(kp_label_validate_key("_ab", 3, &why), -EINVAL);
    assert_non_null(strstr(why, "alphanumeric"));
    assert_int_equal(kp_label_validate_value("a b", 3, NULL), -EINVAL);
    kp_free(why);
}

static void test_match(void **state)
{
    const struct kp_label labels[] = {
        {"app", "web"}, {"tier", "frontend"}, {"karpenter.sh/nodepool", "default"},
        {"cpu", "8"},   {"weird", "x8"},      {"empty", ""},
    };
    static const struct {
        const char *sel;
        bool match;
    } cases[] = {
        {"", true},
        {"app=web", true},
        {"app==web", true},
        {"app=db", false},
        {"app!=db", true},
        {"app!=web", false},
        {"missing!=x", true},
        {"missing=x", false},
        {"app in (db,web)", true},
        {"app in (db)", false},
        {"missing in (x)", false},
        {"app notin (web)", false},
        {"missing notin (web)", true},
        {"app", true},
        {"missing", false},
        {"!missing", true},
        {"!app", false},
        {"empty", true},
        {"empty=", true},
        {"empty in ()", true},
        {"app in ()", false},
        {"cpu>7", true},
        {"cpu>8", false},
        {"cpu<9", true},
        {"cpu<8", false},
        {"weird>1", false},
        {"missing<1", false},
        {"app=web,tier=frontend,karpenter.sh/nodepool in (default)", true},
        {"app=web,tier=backend", false},
    };
    struct kp_map *m = NULL;

    (void)state;
    assert_int_equal(kp_map_new(&m), 0);
    for (size_t i = 0; i < KP_ARRAY_SIZE(labels); i++)
        assert_int_equal(kp_map_put(m, labels[i].key, (void *)(uintptr_t)labels[i].value, NULL), 0);
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_selector *sel = parse_ok(cases[i].sel);

        if (kp_selector_matches(sel, labels, KP_ARRAY_SIZE(labels)) != cases[i].match)
            fail_msg("'%s' should %smatch", cases[i].sel, cases[i].match ? "" : "not ");
        if (kp_selector_matches_map(sel, m) != cases[i].match)
            fail_msg("map: '%s' should %smatch", cases[i].sel, cases[i].match ? "" : "not ");
        kp_selector_free(sel);
    }
    kp_map_free(m);
    assert_true(kp_selector_matches(NULL, NULL, 0));
    assert_null(kp_selector_free(NULL));
}

static void test_label_selector_json(void **state)
{
    const struct kp_label labels[] = {{"app", "web"}, {"env", "prod"}};
    json_t *v = json_ok("{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":["
                        "{\"key\":\"env\",\"operator\":\"In\",\"values\":[\"prod\",\"stage\"]},"
                        "{\"key\":\"gone\",\"operator\":\"DoesNotExist\"},"
                        "{\"key\":\"app\",\"operator\":\"Exists\",\"values\":[]}]}");
    struct kp_selector *sel = NULL;
    struct kp_selector_error e = {0};
    struct kp_buf out = KP_BUF_INIT(1024);
    static const struct {
        const char *json;
        int r;
    } bad[] = {
        {"[]", -KP_EPARSE},
        {"{\"matchLabels\":[]}", -KP_EPARSE},
        {"{\"matchLabels\":{\"a\":1}}", -KP_EPARSE},
        {"{\"matchLabels\":{\"a b\":\"c\"}}", -EINVAL},
        {"{\"matchExpressions\":{}}", -KP_EPARSE},
        {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}", -EINVAL},
        {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[]}]}", -EINVAL},
        {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\",\"values\":[\"x\"]}]}",
         -EINVAL},
        {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Gt\",\"values\":[\"1\"]}]}",
         -EINVAL},
        {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"in\",\"values\":[\"1\"]}]}",
         -EINVAL},
        {"{\"matchExpressions\":[{\"operator\":\"In\",\"values\":[\"1\"]}]}", -KP_EPARSE},
        {"{\"matchExpressions\":[{\"key\":\"a\",\"values\":[\"1\"]}]}", -KP_EPARSE},
        {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[1]}]}", -KP_EPARSE},
        {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":\"x\"}]}",
         -KP_EPARSE},
        {"{\"matchExpressions\":[7]}", -KP_EPARSE},
    };

    (void)state;
    assert_int_equal(kp_selector_from_json(v, &sel, &e), 0);
    assert_int_equal(kp_selector_count(sel), 4);
    assert_true(kp_selector_matches(sel, labels, 2));
    assert_false(kp_selector_matches(sel, labels, 1));
    assert_int_equal(kp_selector_format(sel, &out), 0);
    assert_string_equal(kp_buf_str(&out), "app,app=web,env in (prod,stage),!gone");
    kp_buf_done(&out);
    sel = kp_selector_free(sel);
    v = kp_json_unref(v);

    v = json_ok("{}");
    assert_int_equal(kp_selector_from_json(v, &sel, &e), 0);
    assert_true(kp_selector_is_empty(sel));
    sel = kp_selector_free(sel);
    v = kp_json_unref(v);

    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        v = json_ok(bad[i].json);
        e.msg = NULL;
        if (kp_selector_from_json(v, &sel, &e) != bad[i].r)
            fail_msg("%s: want %d", bad[i].json, bad[i].r);
        assert_null(sel);
        assert_non_null(e.msg);
        v = kp_json_unref(v);
    }
    assert_int_equal(kp_selector_from_json(NULL, &sel, &e), -KP_EPARSE);

    v = json_ok("{\"kubernetes.io/os\":\"linux\",\"disk\":\"ssd\"}");
    assert_int_equal(kp_selector_from_map_json(v, &sel, &e), 0);
    assert_int_equal(kp_selector_count(sel), 2);
    assert_string_equal(kp_selector_at(sel, 0)->key, "disk");
    assert_null(kp_selector_at(sel, 2));
    sel = kp_selector_free(sel);
    v = kp_json_unref(v);
}

static void test_node_requirements(void **state)
{
    const struct kp_label node[] = {
        {"karpenter.sh/capacity-type", "on-demand"},
        {"karpenter.k8s.aws/instance-cpu", "16"},
        {"kubernetes.io/arch", "amd64"},
    };
    json_t *v = json_ok(
        "[{\"key\":\"karpenter.sh/capacity-type\",\"operator\":\"In\",\"values\":[\"spot\","
        "\"on-demand\"],\"minValues\":2},"
        "{\"key\":\"karpenter.k8s.aws/instance-cpu\",\"operator\":\"Gte\",\"values\":[\"16\"]},"
        "{\"key\":\"karpenter.k8s.aws/instance-cpu\",\"operator\":\"Lt\",\"values\":[\"64\"]},"
        "{\"key\":\"kubernetes.io/arch\",\"operator\":\"NotIn\",\"values\":[\"arm64\"]},"
        "{\"key\":\"karpenter.k8s.aws/instance-gpu\",\"operator\":\"DoesNotExist\"}]");
    struct kp_selector *sel = NULL;
    struct kp_selector_error e = {0};
    struct kp_buf out = KP_BUF_INIT(1024);
    const struct kp_requirement *req;
    static const struct {
        const char *json;
        int r;
    } bad[] = {
        {"{}", -KP_EPARSE},
        {"[{\"key\":\"a\",\"operator\":\"Gt\",\"values\":[\"x\"]}]", -EINVAL},
        {"[{\"key\":\"a\",\"operator\":\"Gt\",\"values\":[\"1\",\"2\"]}]", -EINVAL},
        {"[{\"key\":\"a\",\"operator\":\"Lte\",\"values\":[]}]", -EINVAL},
        {"[{\"key\":\"a\",\"operator\":\"Gte\",\"values\":[\"99999999999999999999\"]}]", -EINVAL},
        {"[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"x\"],\"minValues\":2}]", -EINVAL},
        {"[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"x\"],\"minValues\":0}]", -EINVAL},
        {"[{\"key\":\"a\",\"operator\":\"Exists\",\"minValues\":51}]", -EINVAL},
        {"[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"x\"],\"minValues\":\"1\"}]",
         -KP_EPARSE},
        {"[{\"key\":\"a b\",\"operator\":\"Exists\"}]", -EINVAL},
        {"[{\"key\":\"a\",\"operator\":\"Equals\",\"values\":[\"x\"]}]", -EINVAL},
    };

    (void)state;
    assert_int_equal(kp_selector_from_node_requirements(v, &sel, &e), 0);
    assert_int_equal(kp_selector_count(sel), 5);
    assert_true(kp_selector_matches(sel, node, KP_ARRAY_SIZE(node)));
    req = kp_selector_at(sel, 3);
    assert_string_equal(req->key, "karpenter.sh/capacity-type");
    assert_int_equal(req->min_values, 2);
    assert_int_equal(req->n_values, 2);
    assert_string_equal(req->values[0], "on-demand");
    req = kp_selector_at(sel, 0); /* same key: sorted by operator */
    assert_int_equal(req->op, KP_SEL_LT);
    assert_int_equal(req->bound, 64);
    assert_int_equal(kp_selector_format(sel, &out), -EOPNOTSUPP);
    kp_buf_done(&out);
    sel = kp_selector_free(sel);
    v = kp_json_unref(v);

    /* Gte/Lte boundaries; values are not label-validated for node requirements. */
    v = json_ok("[{\"key\":\"n\",\"operator\":\"Gte\",\"values\":[\"-5\"]},"
                "{\"key\":\"n\",\"operator\":\"Lte\",\"values\":[\"5\"]},"
                "{\"key\":\"z\",\"operator\":\"NotIn\",\"values\":[\"a b\"]}]");
    assert_int_equal(kp_selector_from_node_requirements(v, &sel, &e), 0);
    {
        const struct kp_label at[] = {{"n", "-5"}}, in[] = {{"n", "0"}}, hi[] = {{"n", "5"}},
                              out1[] = {{"n", "6"}}, out2[] = {{"n", "-6"}}, nan[] = {{"n", "x"}};

        assert_true(kp_selector_matches(sel, at, 1));
        assert_true(kp_selector_matches(sel, in, 1));
        assert_true(kp_selector_matches(sel, hi, 1));
        assert_false(kp_selector_matches(sel, out1, 1));
        assert_false(kp_selector_matches(sel, out2, 1));
        assert_false(kp_selector_matches(sel, nan, 1));
        assert_false(kp_selector_matches(sel, NULL, 0));
    }
    sel = kp_selector_free(sel);
    v = kp_json_unref(v);

    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        v = json_ok(bad[i].json);
        if (kp_selector_from_node_requirements(v, &sel, &e) != bad[i].r)
            fail_msg("%s: want %d", bad[i].json, bad[i].r);
        assert_null(sel);
        v = kp_json_unref(v);
    }
}

/* --- torture ------------------------------------------------------------------------------- */

static int torture_parse(void)
{
    static const char s[] = "a=b,c!=d,e in (x,y,x),f notin (z),g,!h,n>5,karpenter.sh/np=x";
    struct kp_selector *sel = NULL;
    struct kp_buf out = KP_BUF_INIT(4096);
    int r;

    r = kp_selector_parse(s, sizeof(s) - 1, &sel, NULL);
    if (r < 0)
        goto out;
    r = kp_selector_format(sel, &out);
out:
    kp_buf_done(&out);
    kp_selector_free(sel);
    return r;
}

static int torture_json(void)
{
    static const char doc[] =
        "{\"ls\":{\"matchLabels\":{\"a\":\"b\",\"c\":\"d\"},\"matchExpressions\":[{\"key\":\"e\","
        "\"operator\":\"In\",\"values\":[\"x\",\"y\"]}]},\"reqs\":[{\"key\":\"k\",\"operator\":"
        "\"Gt\",\"values\":[\"3\"]},{\"key\":\"t\",\"operator\":\"In\",\"values\":[\"a\",\"b\"],"
        "\"minValues\":2}]}";
    struct kp_selector *a = NULL, *b = NULL;
    json_t *v = NULL, *ls = NULL, *reqs = NULL;
    int r;

    r = kp_json_parse(doc, sizeof(doc) - 1, 1 << 20, 0, &v, NULL);
    if (r < 0)
        goto out;
    r = kp_json_get_object(v, "ls", &ls);
    if (r < 0)
        goto out;
    r = kp_json_get_array(v, "reqs", &reqs);
    if (r < 0)
        goto out;
    r = kp_selector_from_json(ls, &a, NULL);
    if (r < 0)
        goto out;
    r = kp_selector_from_node_requirements(reqs, &b, NULL);
out:
    kp_selector_free(a);
    kp_selector_free(b);
    kp_json_unref(v);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_format),
        cmocka_unit_test(test_parse_invalid),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_label_selector_json),
        cmocka_unit_test(test_node_requirements),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_parse),
        KP_TORTURE(torture_json),
    };

    return kp_test_main("selector", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture),
                        argc, argv);
}
