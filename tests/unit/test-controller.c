/* Tests for k8s/controller.h, the controller skeleton: a registration that fails half-way
 * leaves no handler behind in any informer once the skeleton is freed, shared indexes are
 * accepted only with the same function, the key handler feeds the reconciler, and readiness
 * is started && workers running && every informer read synced, across a stop and a restart. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kp-test.h"

#include "api/indexes.h"
#include "api/informers.h"
#include "base/log.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/informer.h"
#include "k8s/registry.h"

struct fixture {
    struct kp_client *c;
    struct kp_registry *reg;
    struct kp_informer *pods, *nodes, *claims;
    int log_fd;
};

static atomic_int reconciles;
static char last_key[64];

static int reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                     uint64_t *ret_requeue)
{
    (void)ctx;
    (void)c;
    (void)cx;
    (void)ret_requeue;
    (void)snprintf(last_key, sizeof(last_key), "%s", key);
    atomic_fetch_add(&reconciles, 1);
    return 0;
}

static void on_add(void *ctx, const struct kp_entry *e)
{
    (void)ctx;
    (void)e;
}

static void other_index(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    (void)e;
    emit("x", ctx);
}

static void fixture_init(struct fixture *f)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};

    memset(f, 0, sizeof(*f));
    /* Informers started here fail their lists (nothing on port 9): keep the output readable. */
    f->log_fd = kp_test_log_quiet();
    assert_int_equal(kp_client_new(&to, &f->c), 0);
    assert_int_equal(kp_registry_new(f->c, &f->reg), 0);
    assert_int_equal(kp_informers_pods(f->reg, &f->pods), 0);
    assert_int_equal(kp_informers_nodes(f->reg, &f->nodes), 0);
    assert_int_equal(kp_informers_nodeclaims(f->reg, &f->claims), 0);
}

static void fixture_done(struct fixture *f)
{
    f->reg = kp_registry_free(f->reg);
    f->c = kp_client_free(f->c);
    kp_test_log_restore(f->log_fd);
}

static struct kp_controller *skeleton_new(struct fixture *f, void *ctx)
{
    struct kp_controller_opts o = {
        .name = "test", .client = f->c, .reconcile = reconcile, .ctx = ctx, .workers = 2};
    struct kp_controller *ctl = NULL;

    assert_int_equal(kp_controller_new(&o, &ctl), 0);
    return ctl;
}

/* The third registration fails (its informer has started): freeing the skeleton takes back the
 * two handlers it did add, and another controller's handler on the same informer stays. */
static void test_rollback(void **state)
{
    struct fixture f;
    struct kp_controller *ctl;
    int mine, other;
    struct kp_informer_handler h = {.on_add = on_add, .ctx = &mine};
    struct kp_informer_handler ho = {.on_add = on_add, .ctx = &other};

    (void)state;
    fixture_init(&f);
    assert_int_equal(kp_informer_add_handler(f.nodes, &ho), 0);
    ctl = skeleton_new(&f, &mine);
    assert_int_equal(kp_controller_watch_keys(ctl, f.pods), 0);
    assert_int_equal(kp_controller_watch(ctl, f.nodes, &h), 0);
    assert_int_equal(kp_informer_handler_count(f.pods), 1);
    assert_int_equal(kp_informer_handler_count(f.nodes), 2);
    assert_int_equal(kp_informer_start(f.claims), 0);
    assert_int_equal(kp_controller_watch(ctl, f.claims, &h), -EBUSY);
    kp_informer_stop(f.claims);
    ctl = kp_controller_free(ctl);
    assert_int_equal(kp_informer_handler_count(f.pods), 0);
    assert_int_equal(kp_informer_handler_count(f.nodes), 1); /* the other controller's */
    assert_int_equal(kp_informer_handler_count(f.claims), 0);
    fixture_done(&f);
}

/* Two controllers share an index by name and function; another function under the same name
 * is refused. */
static void test_shared_index(void **state)
{
    struct fixture f;
    struct kp_controller *a, *b;
    int ca, cb;

    (void)state;
    fixture_init(&f);
    a = skeleton_new(&f, &ca);
    b = skeleton_new(&f, &cb);
    assert_int_equal(kp_controller_add_index(a, f.pods, KP_INDEX_POD_NODE, kp_index_pod_node), 0);
    assert_int_equal(kp_controller_add_index(b, f.pods, KP_INDEX_POD_NODE, kp_index_pod_node), 0);
    assert_int_equal(kp_controller_add_index(b, f.pods, KP_INDEX_POD_NODE, other_index), -EEXIST);
    assert_ptr_equal(kp_store_index_fn(kp_informer_store(f.pods), KP_INDEX_POD_NODE),
                     kp_index_pod_node);
    kp_controller_free(b);
    kp_controller_free(a);
    fixture_done(&f);
}

static bool wait_reconciles(int n)
{
    for (int i = 0; i < 500 && atomic_load(&reconciles) < n; i++)
        kp_sleep_usec(10 * KP_USEC_PER_MSEC);
    return atomic_load(&reconciles) >= n;
}

/* The key handler feeds the workers; readiness follows start, the workers and the informers'
 * sync (never synced here: no server), and a stopped skeleton starts again. */
static void test_keys_and_readiness(void **state)
{
    const char doc[] = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\","
                       "\"resourceVersion\":\"1\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}";
    struct fixture f;
    struct kp_controller *ctl, *bare;
    json_t *obj = NULL;
    int ctx;

    (void)state;
    atomic_store(&reconciles, 0);
    fixture_init(&f);
    ctl = skeleton_new(&f, &ctx);
    bare = skeleton_new(&f, &ctx);
    assert_int_equal(kp_controller_watch_keys(ctl, f.pods), 0);
    assert_null(kp_controller_events(ctl)); /* no recorder asked for */
    assert_false(kp_controller_ready(ctl));
    assert_false(kp_controller_ready(NULL));

    assert_int_equal(kp_controller_start(ctl), 0);
    assert_int_equal(kp_controller_start(ctl), 0); /* started already: a no-op */
    assert_int_equal(kp_json_parse(doc, strlen(doc), sizeof(doc), 0, &obj, NULL), 0);
    assert_int_equal(kp_informer_apply(f.pods, KP_INFORMER_UPSERT, obj), 0);
    kp_json_unref(obj);
    assert_true(wait_reconciles(1));
    assert_string_equal(last_key, "ns/p");
    assert_false(kp_controller_ready(ctl)); /* the Pod informer never synced */

    /* A skeleton that reads no informer is ready once its workers run, and again after a
     * stop and a start. */
    assert_false(kp_controller_ready(bare));
    assert_int_equal(kp_controller_start(bare), 0);
    assert_true(kp_controller_ready(bare));
    kp_controller_stop(bare);
    assert_false(kp_controller_ready(bare));
    assert_int_equal(kp_controller_start(bare), 0);
    assert_true(kp_controller_ready(bare));

    kp_controller_free(bare);
    kp_controller_free(ctl);
    fixture_done(&f);
}

/* The recorder the skeleton makes exists before its workers do: a reconcile that runs at once
 * (its key queued before the start) sees it. The controllers read it there, at the point of
 * use, and keep no copy of their own set after the start. */
static _Atomic(struct kp_controller *) events_ctl;
static atomic_int events_seen; /* 1: the recorder was there, -1: it was not */

static int reconcile_events(void *ctx, struct kp_client *c, const struct kp_ctx *cx,
                            const char *key, uint64_t *ret_requeue)
{
    struct kp_controller *ctl = atomic_load(&events_ctl);

    (void)ctx;
    (void)c;
    (void)cx;
    (void)key;
    (void)ret_requeue;
    atomic_store(&events_seen, ctl && kp_controller_events(ctl) ? 1 : -1);
    return 0;
}

static void test_events_before_workers(void **state)
{
    struct fixture f;
    struct kp_controller_opts o = {.name = "test",
                                   .reconcile = reconcile_events,
                                   .workers = 2,
                                   .events_component = "test-controller"};
    struct kp_controller *ctl = NULL;

    (void)state;
    fixture_init(&f);
    o.client = f.c;
    atomic_store(&events_seen, 0);
    assert_int_equal(kp_controller_new(&o, &ctl), 0);
    atomic_store(&events_ctl, ctl);
    assert_null(kp_controller_events(ctl)); /* made at the first start */
    assert_int_equal(kp_reconciler_enqueue(kp_controller_reconciler(ctl), "k"), 0);
    assert_int_equal(kp_controller_start(ctl), 0);
    for (int i = 0; i < 500 && atomic_load(&events_seen) == 0; i++)
        kp_sleep_usec(10 * KP_USEC_PER_MSEC);
    assert_int_equal(atomic_load(&events_seen), 1);
    kp_controller_free(ctl);
    atomic_store(&events_ctl, NULL);
    fixture_done(&f);
}

/* Freeing a skeleton whose informer still runs would leave its handlers pointing at freed
 * memory: it aborts instead (the order is kp_registry_stop, the controllers, the registry). */
static void free_while_running(void *arg)
{
    struct fixture *f = arg;
    int mine;
    struct kp_controller *ctl = skeleton_new(f, &mine);

    if (kp_controller_watch_keys(ctl, f->pods) < 0 || kp_informer_start(f->pods) < 0)
        return; /* exits 0: the parent's assertion fails */
    kp_controller_free(ctl);
}

static void test_free_while_running_aborts(void **state)
{
    struct fixture f;
    int status = 0;
    pid_t pid;

    (void)state;
    fixture_init(&f);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        free_while_running(&f);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    assert_int_equal(kp_informer_handler_count(f.pods), 0); /* the parent's own: untouched */
    fixture_done(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rollback),
        cmocka_unit_test(test_shared_index),
        cmocka_unit_test(test_keys_and_readiness),
        cmocka_unit_test(test_events_before_workers),
        cmocka_unit_test(test_free_while_running_aborts),
    };

    return kp_test_main("controller", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
