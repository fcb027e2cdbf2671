/* Unit tests of cmd/kpssh/manifest.c: how YAML and JSON manifests become one JSON text per
 * object (scalar typing as sigs.k8s.io/yaml does it for manifests, numbers JSON cannot hold kept
 * as strings), how documents and List items are counted, and the refusals with their positions.
 * Then the same walk under the allocation-failure sweep. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kp-test.h"
#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "cmd/kpssh/manifest.h"

/* What the walk saw: every object as "doc.item:json\n". */
struct seen {
    struct kp_buf out;
};

static int collect(const struct kp_manifest_obj *o, void *ctx, char **ret_msg)
{
    struct seen *s = ctx;

    (void)ret_msg;
    return kp_buf_printf(&s->out, "%zu.%zu@%u:%s\n", o->doc, o->item, o->line, o->json);
}

/* Walks text; 0 and *ret (owned) the collected lines, or the error with *ret_msg. */
static int walk(const char *text, char **ret, char **ret_msg)
{
    struct seen s = {.out = KP_BUF_INIT(1u << 20)};
    int r = kp_manifest_each(text, strlen(text), "m.yaml", collect, &s, ret_msg);

    if (r == 0 && !(*ret = kp_strdup(s.out.data ? s.out.data : "")))
        r = -ENOMEM;
    kp_buf_done(&s.out);
    return r;
}

static void test_scalars(void **state)
{
    char *got = NULL, *msg = NULL;

    (void)state;
    assert_int_equal(walk("kind: Pod\n"
                          "a: 1\nb: -2.5e3\nc: '3'\nd: 012\ne: 0x10\nf: 1e999\n"
                          "g: 123456789012345678901234567890\n"
                          "h: true\ni: yes\nj: \"no\"\nk: ~\nl:\nm: null\nn: 1.5\n"
                          "o: \"tab\\there \\\"q\\\" \\\\\"\np: [1, x, {y: z}]\nq: {}\n",
                          &got, &msg),
                     0);
    assert_string_equal(got,
                        "1.0@1:{\"kind\":\"Pod\",\"a\":1,\"b\":-2.5e3,\"c\":\"3\",\"d\":\"012\","
                        "\"e\":\"0x10\",\"f\":\"1e999\","
                        "\"g\":\"123456789012345678901234567890\",\"h\":true,\"i\":true,"
                        "\"j\":\"no\",\"k\":null,\"l\":null,\"m\":null,\"n\":1.5,"
                        "\"o\":\"tab\\u0009here \\\"q\\\" \\\\\",\"p\":[1,\"x\",{\"y\":\"z\"}],"
                        "\"q\":{}}\n");
    kp_free(got);
    assert_null(msg);
}

static void test_documents_and_lists(void **state)
{
    char *got = NULL, *msg = NULL;

    (void)state;
    /* An empty document is skipped but counted; a List's items are numbered from 1; JSON is
     * YAML; an empty List holds nothing. */
    assert_int_equal(
        walk("---\nkind: A\n---\n---\n"
             "{\"kind\": \"List\", \"items\": [{\"kind\": \"B\"}, {\"kind\": \"C\"}]}\n"
             "---\nkind: List\nitems: []\n---\nkind: List\nitems:\n",
             &got, &msg),
        0);
    assert_string_equal(got, "1.0@2:{\"kind\":\"A\"}\n"
                             "3.1@5:{\"kind\":\"B\"}\n"
                             "3.2@5:{\"kind\":\"C\"}\n");
    kp_free(got);
    assert_int_equal(walk("", &got, &msg), 0);
    assert_string_equal(got, "");
    kp_free(got);
}

static void test_refusals(void **state)
{
    char *got = NULL, *msg = NULL;

    (void)state;
    assert_int_equal(walk("kind: A\n---\n- 1\n", &got, &msg), -KP_EPARSE);
    assert_non_null(msg);
    assert_string_equal(msg,
                        "m.yaml:3:1: document 2: expected an object (a mapping), not a sequence");
    kp_free(msg);
    msg = NULL;
    assert_int_equal(walk("kind: List\nitems: [{kind: A}, 5]\n", &got, &msg), -KP_EPARSE);
    assert_non_null(strstr(msg, "m.yaml:2:"));
    assert_non_null(strstr(msg, "document 1 (a List item): expected an object"));
    kp_free(msg);
    msg = NULL;
    assert_int_equal(walk("kind: List\nitems: 3\n", &got, &msg), -KP_EPARSE);
    assert_non_null(strstr(msg, "a List needs an items sequence"));
    kp_free(msg);
    msg = NULL;
    assert_int_equal(walk("a: {b\n", &got, &msg), -KP_EPARSE);
    assert_non_null(strstr(msg, "m.yaml:"));
    kp_free(msg);
    msg = NULL;
    assert_int_equal(walk("a: \"x\\0y\"\n", &got, &msg), -KP_EPARSE);
    assert_non_null(strstr(msg, "NUL"));
    kp_free(msg);
}

/* A callback's error ends the walk and comes back as it is. */
static int stop(const struct kp_manifest_obj *o, void *ctx, char **ret_msg)
{
    size_t *calls = ctx;

    (void)o;
    (*calls)++;
    kp_msg_set(ret_msg, "stopped");
    return -ECANCELED;
}

static void test_callback_error(void **state)
{
    const char *text = "kind: A\n---\nkind: B\n";
    size_t calls = 0;
    char *msg = NULL;

    (void)state;
    assert_int_equal(kp_manifest_each(text, strlen(text), "m", stop, &calls, &msg), -ECANCELED);
    assert_int_equal(calls, 1);
    assert_string_equal(msg, "stopped");
    kp_free(msg);
}

static int torture_walk(void)
{
    char *got = NULL, *msg = NULL;
    int r = walk("---\nkind: A\nspec: {x: [1, 2, {y: \"z\"}], b: yes}\n---\n"
                 "kind: List\nitems: [{kind: B}, {kind: C, n: 1.5}]\n",
                 &got, &msg);

    if (r == 0 && strncmp(got, "1.0@2:", 6) != 0)
        r = 1;
    kp_free(got);
    kp_free(msg);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_documents_and_lists),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_callback_error),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_walk),
    };

    return kp_test_main("manifest", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture),
                        argc, argv);
}
