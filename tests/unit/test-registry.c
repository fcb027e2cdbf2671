/* Tests for k8s/registry.h (with api/informers.h, its typed accessors): one informer per
 * resource and namespace, typed lookups (the Pod informer is never handed out or read as
 * Nodes), handlers and indexes past the old fixed limits (8 and 4), and what a started registry
 * or informer refuses. Lists and watches against a real server: tests/integration. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kp-test.h"

#include "api/informers.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "base/ctx.h"
#include "base/log.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"

/* Nothing listens on port 9: informers that start fail their lists and retry. */
static struct kp_client *client_new(void)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};
    struct kp_client *c = NULL;

    assert_int_equal(kp_client_new(&to, &c), 0);
    return c;
}

static json_t *pod(const char *name, const char *node)
{
    char buf[512];
    json_t *obj = NULL;
    int n = snprintf(buf, sizeof(buf),
                     "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"u-%s\","
                     "\"resourceVersion\":\"1\"},\"spec\":{\"nodeName\":\"%s\","
                     "\"containers\":[{\"name\":\"c\"}]}}",
                     name, name, node);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_json_parse(buf, (size_t)n, sizeof(buf), 0, &obj, NULL), 0);
    return obj;
}

static void apply_pod(struct kp_informer *inf, const char *name, const char *node)
{
    json_t *obj = pod(name, node);

    assert_int_equal(kp_informer_apply(inf, KP_INFORMER_UPSERT, obj), 0);
    kp_json_unref(obj);
}

/* Runs fn(arg) in a child and asserts that it aborted. */
static void expect_abort(void (*fn)(void *), void *arg)
{
    int status = 0;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        kp_log_set_fd(open("/dev/null", O_WRONLY | O_CLOEXEC)); /* its log line is expected */
        fn(arg);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

static void test_shared_and_typed(void **state)
{
    struct kp_client *c = client_new();
    struct kp_registry *reg = NULL;
    struct kp_informer *pods = NULL, *again = NULL, *nodes = NULL, *inf = NULL;
    struct kp_informer_opts o = {0};

    (void)state;
    assert_int_equal(kp_registry_new(c, &reg), 0);
    assert_int_equal(kp_informers_pods(reg, &pods), 0);
    assert_int_equal(kp_informers_pods(reg, &again), 0);
    assert_ptr_equal(pods, again); /* one informer per resource and namespace */
    assert_int_equal(kp_informers_nodes(reg, &nodes), 0);
    assert_ptr_not_equal(pods, nodes);
    assert_ptr_equal(kp_informer_view_kind(pods), kp_kind_pod);
    assert_int_equal(kp_registry_count(reg), 2);
    assert_ptr_equal(kp_registry_at(reg, 0), pods);
    assert_null(kp_registry_at(reg, 2));

    /* The Pod resource asked for as Nodes: refused, whichever way it is asked. */
    o = (struct kp_informer_opts){
        .res = &KP_RES_POD, .project = kp_node_project, .view_kind = kp_kind_node};
    assert_int_equal(kp_registry_informer(reg, &o, &inf), -EPROTOTYPE);
    o.view_kind = kp_kind_pod; /* the right tag, another kind's projection */
    assert_int_equal(kp_registry_informer(reg, &o, &inf), -EPROTOTYPE);
    o = (struct kp_informer_opts){
        .res = &KP_RES_NODE, .project = kp_node_project, .view_kind = kp_kind_pod};
    assert_int_equal(kp_registry_informer(reg, &o, &inf), -EPROTOTYPE);
    assert_null(inf);
    /* Untyped or filtered informers are not the registry's. */
    o = (struct kp_informer_opts){.res = &KP_RES_POD, .project = kp_pod_project};
    assert_int_equal(kp_registry_informer(reg, &o, &inf), -EINVAL);
    o.view_kind = kp_kind_pod;
    o.label_selector = "app=x";
    assert_int_equal(kp_registry_informer(reg, &o, &inf), -EINVAL);
    /* Another namespace is another informer; the same one is shared. */
    o.label_selector = NULL;
    o.ns = "team-a";
    assert_int_equal(kp_registry_informer(reg, &o, &inf), 0);
    assert_ptr_not_equal(inf, pods);
    assert_int_equal(kp_registry_informer(reg, &o, &again), 0);
    assert_ptr_equal(inf, again);
    assert_int_equal(kp_registry_count(reg), 3);

    kp_registry_free(reg);
    kp_client_free(c);
}

static struct kp_informer *abort_pods;

static void read_pod_as_node(void *arg)
{
    struct kp_entry *e = NULL;

    (void)arg;
    apply_pod(abort_pods, "p", "n1");
    if (kp_store_get(kp_informer_store(abort_pods), "ns/p", &e) == 0)
        (void)kp_node_view(e); /* a Pod read as a Node */
}

static void project_wrong_kind(void *arg)
{
    struct kp_informer *inf = arg;

    apply_pod(inf, "p", "n1"); /* a Pod projection in an informer that says Node */
}

/* What the registry hands out is read as its own kind only: the view accessor aborts on an
 * entry of the Pod informer read as a Node, and an informer whose projection stamps another
 * kind than it was registered with aborts at its first object. */
static void test_wrong_kind_aborts(void **state)
{
    struct kp_client *c = client_new();
    struct kp_registry *reg = NULL;
    struct kp_informer *inf = NULL;
    struct kp_informer_opts o = {
        .res = &KP_RES_NODE, .project = kp_pod_project, .view_kind = kp_kind_node};

    (void)state;
    assert_int_equal(kp_registry_new(c, &reg), 0);
    assert_int_equal(kp_informers_pods(reg, &abort_pods), 0);
    expect_abort(read_pod_as_node, NULL);
    assert_int_equal(kp_informer_new(c, &o, &inf), 0);
    expect_abort(project_wrong_kind, inf);
    kp_informer_free(inf);
    kp_registry_free(reg);
    kp_client_free(c);
}

static int calls[20];

static void by_node(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const char *node = kp_pod_view(e)->node_name;

    if (node)
        emit(node, ctx);
}

static void on_add(void *ctx, const struct kp_entry *e)
{
    (void)e;
    calls[(int *)ctx - calls]++;
}

static void test_many_handlers_and_indexes(void **state)
{
    struct kp_client *c = client_new();
    struct kp_registry *reg = NULL;
    struct kp_informer *pods = NULL;
    struct kp_store_list l = {0};
    char name[16];

    (void)state;
    memset(calls, 0, sizeof(calls));
    assert_int_equal(kp_registry_new(c, &reg), 0);
    assert_int_equal(kp_informers_pods(reg, &pods), 0);
    for (int i = 0; i < 20; i++) {
        struct kp_informer_handler h = {.on_add = on_add, .ctx = &calls[i]};

        assert_int_equal(kp_informer_add_handler(pods, &h), 0);
    }
    for (int i = 0; i < 10; i++) {
        (void)snprintf(name, sizeof(name), "node-%d", i);
        assert_int_equal(kp_informer_add_index(pods, name, by_node), 0);
    }
    assert_int_equal(kp_informer_add_index(pods, "node-3", by_node), -EEXIST);
    assert_int_equal(kp_informer_handler_count(pods), 20);
    apply_pod(pods, "a", "n1");
    apply_pod(pods, "b", "n2");
    for (int i = 0; i < 20; i++)
        assert_int_equal(calls[i], 2);
    for (int i = 0; i < 10; i++) {
        (void)snprintf(name, sizeof(name), "node-%d", i);
        assert_int_equal(kp_store_by_index(kp_informer_store(pods), name, "n2", &l), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.v[0]->key, "ns/b");
        kp_store_list_free(&l);
    }
    kp_registry_free(reg);
    kp_client_free(c);
}

static void *cancel_soon(void *arg)
{
    kp_sleep_usec(300 * 1000);
    kp_ctx_cancel(arg);
    return NULL;
}

/* A registry started once makes no new informer, even after a stop (it would start late and
 * unsynced, and the metrics collector walks a fixed array); a started informer takes no
 * handler or index; a registry whose informers do not sync in time says which kind and leaves
 * them stopped, ready for a later start. */
static void test_after_start(void **state)
{
    struct kp_client *c = client_new();
    struct kp_registry *reg = NULL;
    struct kp_informer *pods = NULL, *nodes = NULL, *again = NULL;
    struct kp_informer_handler h = {.on_add = on_add, .ctx = &calls[0]};
    const char *kind = NULL;
    int log_fd;

    (void)state;
    /* The informer's list failures go to /dev/null so the test output stays readable. */
    log_fd = kp_test_log_quiet();
    assert_int_equal(kp_registry_new(c, &reg), 0);
    assert_int_equal(kp_registry_start(reg, 0, NULL, &kind), 0); /* nothing to sync */
    assert_true(kp_registry_started(reg));
    assert_true(kp_registry_synced(reg));
    assert_int_equal(kp_registry_start(reg, 0, NULL, &kind), -EALREADY);
    assert_int_equal(kp_informers_pods(reg, &pods), -EBUSY);
    kp_registry_stop(reg);
    assert_false(kp_registry_started(reg));
    assert_false(kp_registry_synced(reg));
    assert_int_equal(kp_informers_pods(reg, &pods), -EBUSY); /* sealed at the first start */
    assert_int_equal(kp_registry_count(reg), 0);
    kp_registry_free(reg);

    assert_int_equal(kp_registry_new(c, &reg), 0);
    assert_int_equal(kp_informers_pods(reg, &pods), 0);

    assert_int_equal(kp_informer_start(pods), 0);
    assert_int_equal(kp_informer_add_handler(pods, &h), -EBUSY);
    assert_int_equal(kp_informer_add_index(pods, "node", by_node), -EBUSY);
    assert_int_equal(kp_informer_remove_handlers(pods, &calls[0]), -EBUSY);
    kp_informer_stop(pods);

    assert_int_equal(kp_registry_start(reg, 200 * 1000, NULL, &kind), -ETIMEDOUT);
    assert_string_equal(kind, "Pod");
    assert_false(kp_registry_started(reg));
    /* A term that ends (its Lease lost) ends the wait for the sync long before the timeout. */
    {
        struct kp_ctx term;
        pthread_t t;
        uint64_t t0 = kp_mono_usec();

        kind = NULL;
        kp_ctx_init(&term, NULL, kp_deadline_never());
        assert_int_equal(pthread_create(&t, NULL, cancel_soon, &term), 0);
        assert_int_equal(kp_registry_start(reg, 60 * KP_USEC_PER_SEC, &term, &kind), -ECANCELED);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_true(kp_mono_usec() - t0 < 10 * KP_USEC_PER_SEC);
        assert_string_equal(kind, "Pod");
        assert_false(kp_registry_started(reg));
    }
    assert_int_equal(kp_informer_add_handler(pods, &h), 0); /* stopped again */
    assert_int_equal(kp_informers_pods(reg, &again), 0);    /* made before: still handed out */
    assert_ptr_equal(again, pods);
    assert_int_equal(kp_informers_nodes(reg, &nodes), -EBUSY); /* a failed start seals too */
    assert_int_equal(kp_registry_count(reg), 1);
    kp_registry_free(reg);
    kp_client_free(c);
    kp_test_log_restore(log_fd);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_and_typed),
        cmocka_unit_test(test_wrong_kind_aborts),
        cmocka_unit_test(test_many_handlers_and_indexes),
        cmocka_unit_test(test_after_start),
    };

    return kp_test_main("registry", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
