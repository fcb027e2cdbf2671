/* Tests for k8s/informer.h without a server: how applied objects reach the store and the
 * handlers (add, update, no-op update, delete), that a bad object is skipped and counted while
 * the last good entry stays, and index maintenance through the informer. The list/watch loop
 * runs against the real API server in tests/integration/test-informer.c and against scripted
 * faults (oversized pages, 410 relists) in tests/fault. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/log.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "api/obj-pod.h"

struct counts {
    int add, update, del;
    char last[128];
};

static void on_add(void *ctx, const struct kp_entry *e)
{
    struct counts *c = ctx;

    c->add++;
    snprintf(c->last, sizeof(c->last), "add %s", e->key);
}

static void on_update(void *ctx, const struct kp_entry *o, const struct kp_entry *n)
{
    struct counts *c = ctx;

    c->update++;
    snprintf(c->last, sizeof(c->last), "update %s %s->%s", n->key, o->rv, n->rv);
}

static void on_delete(void *ctx, const struct kp_entry *e)
{
    struct counts *c = ctx;

    c->del++;
    snprintf(c->last, sizeof(c->last), "delete %s", e->key);
}

static void by_node(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const struct kp_pod_view *p = kp_pod_view(e);

    if (p->node_name)
        emit(p->node_name, ctx);
}

static json_t *pod(const char *name, const char *rv, const char *node, const char *cpu)
{
    char buf[512];
    json_t *obj = NULL;
    int n;

    n = snprintf(buf, sizeof(buf),
                 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"u-%s\","
                 "\"resourceVersion\":\"%s\"},\"spec\":{%s%s%s\"containers\":[{\"name\":\"c\","
                 "\"resources\":{\"requests\":{\"cpu\":\"%s\"}}}]}}",
                 name, name, rv, node ? "\"nodeName\":\"" : "", node ? node : "", node ? "\"," : "",
                 cpu);
    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_json_parse(buf, (size_t)n, sizeof(buf), 0, &obj, NULL), 0);
    return obj;
}

static size_t on_node(struct kp_informer *inf, const char *node)
{
    struct kp_store_list l = {0};
    size_t n;

    assert_int_equal(kp_store_by_index(kp_informer_store(inf), "node", node, &l), 0);
    n = l.n;
    kp_store_list_free(&l);
    return n;
}

static void apply(struct kp_informer *inf, enum kp_informer_op op, json_t *obj)
{
    assert_int_equal(kp_informer_apply(inf, op, obj), 0);
    kp_json_unref(obj);
}

static void test_apply_and_handlers(void **state)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};
    struct kp_informer_opts io = {.res = &KP_RES_POD, .project = kp_pod_project};
    struct kp_client *c = NULL;
    struct kp_informer *inf = NULL;
    struct counts cnt = {0};
    struct kp_informer_handler h = {on_add, on_update, on_delete, &cnt};
    struct kp_informer_stats st;
    struct kp_entry *e = NULL;
    int log_pipe[2];

    (void)state;
    /* The bad-object warning goes to a pipe so the test output stays readable. */
    assert_int_equal(pipe(log_pipe), 0);
    kp_log_set_fd(log_pipe[1]);
    assert_int_equal(kp_client_new(&to, &c), 0);
    assert_int_equal(kp_informer_new(c, &io, &inf), 0);
    kp_client_free(c); /* the informer keeps its own clone */
    assert_int_equal(kp_informer_add_index(inf, "node", by_node), 0);
    assert_int_equal(kp_informer_add_handler(inf, &h), 0);
    assert_false(kp_informer_synced(inf));

    apply(inf, KP_INFORMER_UPSERT, pod("a", "1", NULL, "1"));
    assert_int_equal(cnt.add, 1);
    assert_string_equal(cnt.last, "add ns/a");

    /* Only the resourceVersion moved: no handler runs, the store has the new version. */
    apply(inf, KP_INFORMER_UPSERT, pod("a", "2", NULL, "1"));
    assert_int_equal(cnt.update, 0);
    assert_int_equal(kp_store_get(kp_informer_store(inf), "ns/a", &e), 0);
    assert_string_equal(e->rv, "2");
    kp_entry_unref(e);

    apply(inf, KP_INFORMER_UPSERT, pod("a", "3", "n1", "1"));
    assert_int_equal(cnt.update, 1);
    assert_string_equal(cnt.last, "update ns/a 2->3");
    assert_int_equal(on_node(inf, "n1"), 1);

    /* A bad object is skipped and counted, and the good entry stays. */
    apply(inf, KP_INFORMER_UPSERT, pod("a", "4", "n2", "lots"));
    apply(inf, KP_INFORMER_UPSERT, pod("a", "5", "n2", "also-bad"));
    kp_informer_get_stats(inf, &st);
    assert_int_equal(st.bad_objects, 2);
    assert_int_equal(st.skipped, 1);
    assert_int_equal(kp_store_get(kp_informer_store(inf), "ns/a", &e), 0);
    assert_string_equal(e->rv, "3");
    kp_entry_unref(e);
    assert_int_equal(on_node(inf, "n1"), 1);

    apply(inf, KP_INFORMER_DELETE, pod("a", "6", "n1", "1"));
    assert_int_equal(cnt.del, 1);
    assert_int_equal(on_node(inf, "n1"), 0);
    assert_int_equal(kp_store_len(kp_informer_store(inf)), 0);
    /* Deleting what is not there is quiet. */
    apply(inf, KP_INFORMER_DELETE, pod("zz", "7", NULL, "1"));
    assert_int_equal(cnt.del, 1);

    kp_informer_free(inf);
    kp_log_set_fd(2);
    close(log_pipe[0]);
    close(log_pipe[1]);
}

/* A controller whose set-up failed takes back its handlers; the others keep theirs. */
static void test_remove_handlers(void **state)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};
    struct kp_informer_opts io = {.res = &KP_RES_POD, .project = kp_pod_project};
    struct kp_client *c = NULL;
    struct kp_informer *inf = NULL;
    struct counts a = {0}, b = {0};
    struct kp_informer_handler ha = {on_add, on_update, on_delete, &a};
    struct kp_informer_handler hb = {on_add, on_update, on_delete, &b};

    (void)state;
    assert_int_equal(kp_client_new(&to, &c), 0);
    assert_int_equal(kp_informer_new(c, &io, &inf), 0);
    kp_client_free(c);
    assert_int_equal(kp_informer_add_handler(inf, &ha), 0);
    assert_int_equal(kp_informer_add_handler(inf, &hb), 0);
    assert_int_equal(kp_informer_add_handler(inf, &ha), 0);
    assert_int_equal(kp_informer_remove_handlers(inf, &a), 0);
    apply(inf, KP_INFORMER_UPSERT, pod("p", "1", NULL, "1"));
    assert_int_equal(a.add, 0);
    assert_int_equal(b.add, 1);
    assert_int_equal(kp_informer_remove_handlers(inf, &a), 0); /* none left: a no-op */
    kp_informer_free(inf);
}

/* Before any list: not synced, the configured page size (or the client's default), the kind.
 * Halving and the fall out of sync during a relist need a server: tests/fault 0013, 0014, 0004. */
static void test_initial_state(void **state)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};
    struct kp_informer_opts io = {.res = &KP_RES_POD, .project = kp_pod_project, .page_size = 40};
    struct kp_client *c = NULL;
    struct kp_informer *inf = NULL;
    struct kp_informer_stats st;

    (void)state;
    assert_int_equal(kp_client_new(&to, &c), 0);
    assert_int_equal(kp_informer_new(c, &io, &inf), 0);
    assert_false(kp_informer_synced(inf));
    assert_string_equal(kp_informer_kind(inf), "Pod");
    kp_informer_get_stats(inf, &st);
    assert_int_equal(st.page_size, 40);
    assert_int_equal(st.desyncs, 0);
    assert_int_equal(st.lists, 0);
    inf = kp_informer_free(inf);
    io.page_size = 0;
    assert_int_equal(kp_informer_new(c, &io, &inf), 0);
    kp_informer_get_stats(inf, &st);
    assert_int_equal(st.page_size, KP_CLIENT_LIST_LIMIT);
    kp_informer_free(inf);
    kp_client_free(c);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_and_handlers),
        cmocka_unit_test(test_remove_handlers),
        cmocka_unit_test(test_initial_state),
    };

    return kp_test_main("informer", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
