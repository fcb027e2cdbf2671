/* Tests for k8s/reconciler.h: every outcome of a reconcile call maps to the queue as the header
 * says (done, requeue after, conflict delay without backoff growth, error with backoff), keys
 * from informer handlers arrive, one key is never reconciled twice at once with several workers,
 * and stop joins the workers with the key in hand finished. The client is never used for I/O
 * here (a reconcile function gets it; these ones ignore it). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/time.h"
#include "k8s/client.h"
#include "k8s/reconciler.h"
#include "k8s/store.h"
#include "k8s/workqueue.h"

struct script {
    pthread_mutex_t mu;
    int calls_a, calls_b;
    int answer_a;             /* what reconciling "a" returns */
    uint64_t requeue_a;       /* and the requeue it asks for */
    uint64_t first_a, last_a; /* monotonic times of the first and last call for "a" */
    atomic_int inside;        /* workers inside reconcile for "hot" right now */
    atomic_int max_inside;
    atomic_int hot_calls;
    struct kp_client *seen_client;
    bool client_differs;
};

static int reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                     uint64_t *ret_requeue)
{
    struct script *s = ctx;

    (void)cx;

    pthread_mutex_lock(&s->mu);
    if (s->seen_client && s->seen_client != c)
        s->client_differs = true;
    s->seen_client = c;
    pthread_mutex_unlock(&s->mu);
    if (strcmp(key, "hot") == 0) {
        int n = atomic_fetch_add(&s->inside, 1) + 1;
        int m = atomic_load(&s->max_inside);

        while (n > m && !atomic_compare_exchange_weak(&s->max_inside, &m, n))
            ;
        usleep(2000);
        atomic_fetch_sub(&s->inside, 1);
        atomic_fetch_add(&s->hot_calls, 1);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    if (strcmp(key, "a") == 0) {
        uint64_t now = kp_mono_usec();

        if (!s->calls_a++)
            s->first_a = now;
        s->last_a = now;
        *ret_requeue = s->requeue_a;
        pthread_mutex_unlock(&s->mu);
        return s->answer_a;
    }
    s->calls_b++;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static struct kp_client *new_client(void)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};
    struct kp_client *c = NULL;

    assert_int_equal(kp_client_new(&to, &c), 0);
    return c;
}

static struct kp_reconciler *new_reconciler(struct script *s, unsigned workers)
{
    struct kp_workqueue_options q = {
        .backoff_base_usec = 1000, .backoff_cap_usec = 4000, .qps = -1};
    struct kp_client *c = new_client();
    struct kp_reconciler_opts o = {
        .name = "test",
        .workers = workers,
        .reconcile = reconcile,
        .ctx = s,
        .client = c,
        .conflict_delay_usec = 20000,
        .queue = &q,
    };
    struct kp_reconciler *r = NULL;

    assert_int_equal(kp_reconciler_new(&o, &r), 0);
    assert_int_equal(kp_reconciler_start(r), 0);
    kp_client_free(c); /* start cloned it once per worker */
    return r;
}

static int calls_a(struct script *s)
{
    int n;

    pthread_mutex_lock(&s->mu);
    n = s->calls_a;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void wait_calls_a(struct script *s, int n)
{
    for (int i = 0; i < 10000 && calls_a(s) < n; i++)
        usleep(1000);
    assert_true(calls_a(s) >= n);
}

static void test_invalid(void **state)
{
    struct kp_reconciler_opts o = {.reconcile = reconcile};
    struct kp_reconciler *r = NULL;

    (void)state;
    assert_int_equal(kp_reconciler_new(&o, &r), -EINVAL);
    assert_int_equal(kp_reconciler_new(NULL, &r), -EINVAL);
    assert_null(kp_reconciler_free(NULL));
}

static void test_done_and_requeue(void **state)
{
    struct script s = {.mu = PTHREAD_MUTEX_INITIALIZER, .requeue_a = 30000};
    struct kp_reconciler *r = new_reconciler(&s, 2);
    struct kp_reconciler_stats st;

    (void)state;
    assert_int_equal(kp_reconciler_enqueue(r, "a"), 0);
    assert_int_equal(kp_reconciler_enqueue(r, "b"), 0);
    /* "a" asked to come back after 30 ms: it does, on its own. */
    wait_calls_a(&s, 3);
    pthread_mutex_lock(&s.mu);
    assert_true(s.last_a - s.first_a >= 2 * 30000 - 1000);
    assert_int_equal(s.calls_b, 1);
    pthread_mutex_unlock(&s.mu);
    kp_reconciler_get_stats(r, &st);
    assert_true(st.reconciles >= 4);
    assert_int_equal(st.errors, 0);
    kp_reconciler_stop(r);
    assert_false(kp_reconciler_running(r));
    kp_reconciler_stop(r); /* idempotent */
    kp_reconciler_free(r);
}

/* A replica that lost its Lease stops its reconcilers and, leading again, starts them again:
 * keys enqueued while stopped (an informer relisting before the workers start) are served by
 * the next start, and the periodic work queued before the stop resumes. */
static void test_restart(void **state)
{
    struct script s = {.mu = PTHREAD_MUTEX_INITIALIZER, .requeue_a = 30000};
    struct kp_reconciler *r = new_reconciler(&s, 2);
    int before;

    (void)state;
    assert_int_equal(kp_reconciler_enqueue(r, "a"), 0);
    wait_calls_a(&s, 1);
    kp_reconciler_stop(r);
    assert_false(kp_reconciler_running(r));
    before = calls_a(&s);
    assert_int_equal(kp_reconciler_enqueue(r, "b"), 0);
    usleep(100 * 1000); /* nothing runs while stopped */
    pthread_mutex_lock(&s.mu);
    assert_int_equal(s.calls_b, 0);
    assert_int_equal(s.calls_a, before);
    pthread_mutex_unlock(&s.mu);
    assert_int_equal(kp_reconciler_start(r), 0);
    assert_true(kp_reconciler_running(r));
    wait_calls_a(&s, before + 2); /* "a" came back on its own after the restart */
    for (int i = 0; i < 10000; i++) {
        pthread_mutex_lock(&s.mu);
        before = s.calls_b;
        pthread_mutex_unlock(&s.mu);
        if (before)
            break;
        usleep(1000);
    }
    assert_int_equal(before, 1);
    kp_reconciler_free(r);
}

static void test_conflict_delay(void **state)
{
    struct script s = {.mu = PTHREAD_MUTEX_INITIALIZER, .answer_a = -KP_ECONFLICT};
    struct kp_reconciler *r = new_reconciler(&s, 1);
    struct kp_reconciler_stats st;

    (void)state;
    assert_int_equal(kp_reconciler_enqueue(r, "a"), 0);
    wait_calls_a(&s, 3);
    kp_reconciler_stop(r);
    pthread_mutex_lock(&s.mu);
    /* Two conflict delays of 20 ms at least between the first and third call. */
    assert_true(s.last_a - s.first_a >= 2 * 20000 - 1000);
    pthread_mutex_unlock(&s.mu);
    kp_reconciler_get_stats(r, &st);
    assert_true(st.conflicts >= 2);
    assert_int_equal(st.errors, 0);
    kp_reconciler_free(r);
}

static void test_error_backoff(void **state)
{
    struct script s = {.mu = PTHREAD_MUTEX_INITIALIZER, .answer_a = -EIO};
    struct kp_reconciler *r = new_reconciler(&s, 1);
    struct kp_reconciler_stats st;
    int log_pipe[2];

    (void)state;
    assert_int_equal(pipe(log_pipe), 0);
    kp_log_set_fd(log_pipe[1]);
    assert_int_equal(kp_reconciler_enqueue(r, "a"), 0);
    /* Backoff 1, 2, 4, 4 ms ...: retried without anyone enqueueing it again. */
    wait_calls_a(&s, 5);
    kp_reconciler_stop(r);
    kp_log_set_fd(2);
    close(log_pipe[0]);
    close(log_pipe[1]);
    kp_reconciler_get_stats(r, &st);
    assert_true(st.errors >= 5);
    kp_reconciler_free(r);
}

static void test_handler_and_one_at_a_time(void **state)
{
    struct script s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct kp_reconciler *r = new_reconciler(&s, 4);
    struct kp_informer_handler h = kp_reconciler_handler(r);
    struct {
        struct kp_entry e;
    } hot = {.e = {.key = "hot"}};

    (void)state;
    for (int i = 0; i < 300; i++) {
        if (i % 3 == 0)
            h.on_add(h.ctx, &hot.e);
        else if (i % 3 == 1)
            h.on_update(h.ctx, &hot.e, &hot.e);
        else
            h.on_delete(h.ctx, &hot.e);
        usleep(100);
    }
    for (int i = 0; i < 2000; i++) {
        struct kp_reconciler_stats st;

        kp_reconciler_get_stats(r, &st);
        if (!st.depth && !atomic_load(&s.inside))
            break;
        usleep(1000);
    }
    kp_reconciler_stop(r);
    assert_true(atomic_load(&s.hot_calls) >= 1);
    assert_int_equal(atomic_load(&s.max_inside), 1);
    kp_reconciler_free(r);
}

/* Three keys, three workers: each reconcile of a "k" key waits (bounded) until two different
 * clients have been seen, which only happens when two workers hold keys at once, each with its
 * own clone. Deterministic however loaded the machine is: the wait ends when the second worker
 * arrives, not after a fixed sleep. */
static int distinct_clients(struct script *s)
{
    int n;

    pthread_mutex_lock(&s->mu);
    n = s->client_differs ? 2 : (s->seen_client ? 1 : 0);
    pthread_mutex_unlock(&s->mu);
    return n;
}

static int reconcile_wait(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                          uint64_t *ret_requeue)
{
    struct script *s = ctx;

    (void)cx;
    (void)key;
    (void)ret_requeue;
    pthread_mutex_lock(&s->mu);
    if (s->seen_client && s->seen_client != c)
        s->client_differs = true;
    if (!s->seen_client)
        s->seen_client = c;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < 10000 && distinct_clients(s) < 2; i++)
        usleep(1000);
    return 0;
}

static void test_workers_have_own_clients(void **state)
{
    struct script s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct kp_client *c = new_client();
    struct kp_reconciler_opts o = {
        .name = "clients", .workers = 3, .reconcile = reconcile_wait, .ctx = &s, .client = c};
    struct kp_reconciler *r = NULL;

    (void)state;
    assert_int_equal(kp_reconciler_new(&o, &r), 0);
    assert_int_equal(kp_reconciler_start(r), 0);
    kp_client_free(c);
    assert_int_equal(kp_reconciler_enqueue(r, "k0"), 0);
    assert_int_equal(kp_reconciler_enqueue(r, "k1"), 0);
    assert_int_equal(kp_reconciler_enqueue(r, "k2"), 0);
    for (int i = 0; i < 10000 && distinct_clients(&s) < 2; i++)
        usleep(1000);
    kp_reconciler_stop(r);
    kp_reconciler_free(r);
    assert_true(s.client_differs);
}

/* A reconcile that waits for its context to end (at most 10 s) and records why it ended. */
struct ctx_script {
    atomic_int entered;
    atomic_int why; /* kp_ctx_err at the end */
};

static int reconcile_until_done(void *ctx, struct kp_client *c, const struct kp_ctx *cx,
                                const char *key, uint64_t *ret_requeue)
{
    struct ctx_script *s = ctx;

    (void)c;
    (void)key;
    (void)ret_requeue;
    atomic_fetch_add(&s->entered, 1);
    for (int i = 0; i < 10000 && !kp_ctx_done(cx); i++)
        usleep(1000);
    atomic_store(&s->why, kp_ctx_err(cx));
    return 0;
}

static struct kp_reconciler *ctx_reconciler(struct ctx_script *s, const struct kp_ctx *parent,
                                            uint64_t timeout_usec)
{
    struct kp_client *c = new_client();
    struct kp_reconciler_opts o = {.name = "ctx",
                                   .workers = 1,
                                   .reconcile = reconcile_until_done,
                                   .ctx = s,
                                   .client = c,
                                   .timeout_usec = timeout_usec,
                                   .parent = parent};
    struct kp_reconciler *r = NULL;

    assert_int_equal(kp_reconciler_new(&o, &r), 0);
    assert_int_equal(kp_reconciler_start(r), 0);
    kp_client_free(c);
    return r;
}

static void wait_entered(struct ctx_script *s, int n)
{
    for (int i = 0; i < 10000 && atomic_load(&s->entered) < n; i++)
        usleep(1000);
    assert_int_equal(atomic_load(&s->entered), n);
}

/* stop() cancels the reconcile in hand: it returns at once (not after its 10 s), -ECANCELED. */
static void test_ctx_cancelled_by_stop(void **state)
{
    struct ctx_script s = {0};
    struct kp_reconciler *r = ctx_reconciler(&s, NULL, 0);
    uint64_t t0;

    (void)state;
    assert_int_equal(kp_reconciler_enqueue(r, "k"), 0);
    wait_entered(&s, 1);
    t0 = kp_mono_usec();
    kp_reconciler_stop(r);
    assert_int_equal(atomic_load(&s.why), -ECANCELED);
    assert_true(kp_mono_usec() - t0 < 5 * KP_USEC_PER_SEC);
    /* A restart runs under a fresh context: the next reconcile is not born cancelled. */
    assert_int_equal(kp_reconciler_start(r), 0);
    atomic_store(&s.why, 1);
    assert_int_equal(kp_reconciler_enqueue(r, "k2"), 0);
    wait_entered(&s, 2);
    usleep(20000);
    assert_int_equal(atomic_load(&s.why), 1); /* still waiting: its context is live */
    kp_reconciler_free(r);
    assert_int_equal(atomic_load(&s.why), -ECANCELED);
}

/* The parent (the process's context) cancels every reconcile under it. */
static void test_ctx_parent_cancel(void **state)
{
    struct ctx_script s = {0};
    struct kp_ctx parent;
    struct kp_reconciler *r;

    (void)state;
    kp_ctx_init(&parent, NULL, kp_deadline_never());
    r = ctx_reconciler(&s, &parent, 0);
    atomic_store(&s.why, 1);
    assert_int_equal(kp_reconciler_enqueue(r, "k"), 0);
    wait_entered(&s, 1);
    kp_ctx_cancel(&parent);
    for (int i = 0; i < 10000 && atomic_load(&s.why) == 1; i++)
        usleep(1000);
    assert_int_equal(atomic_load(&s.why), -ECANCELED);
    kp_reconciler_free(r);
}

/* Each reconcile has the reconcile timeout as its deadline. */
static void test_ctx_deadline(void **state)
{
    struct ctx_script s = {0};
    struct kp_reconciler *r = ctx_reconciler(&s, NULL, 30 * KP_USEC_PER_MSEC);

    (void)state;
    atomic_store(&s.why, 1);
    assert_int_equal(kp_reconciler_enqueue(r, "k"), 0);
    wait_entered(&s, 1);
    for (int i = 0; i < 10000 && atomic_load(&s.why) == 1; i++)
        usleep(1000);
    assert_int_equal(atomic_load(&s.why), -ETIMEDOUT);
    kp_reconciler_free(r);
}

/* Each reconcile runs in a log scope naming the controller, the kind and the object, with a
 * reconcileID fresh for every call; the worker's scope is cleared after the call. */
struct scope_seen {
    pthread_mutex_t mu;
    int calls;
    char ids[2][KP_LOG_ID_SIZE];
};

/* The worker's scope when its thread ends (after its last reconcile): 1 set, -1 cleared. */
static pthread_key_t scope_key;
static atomic_int scope_at_exit;

static void scope_exit(void *arg)
{
    (void)arg;
    atomic_store(&scope_at_exit, kp_log_scope_get() ? 1 : -1);
}

static int reconcile_logs(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                          uint64_t *ret_requeue)
{
    struct scope_seen *s = ctx;
    const struct kp_log_scope *sc = kp_log_scope_get();

    (void)pthread_setspecific(scope_key, s); /* scope_exit runs on this worker as it ends */
    (void)c;
    (void)cx;
    (void)key;
    (void)ret_requeue;
    kp_log_info("inside", KP_LF("name", "shadowed"));
    pthread_mutex_lock(&s->mu);
    if (s->calls < 2 && sc)
        memcpy(s->ids[s->calls], sc->reconcile_id, KP_LOG_ID_SIZE);
    s->calls++;
    pthread_mutex_unlock(&s->mu);
    return s->calls == 1 ? -EIO : 0; /* the reconciler's own failure line is in scope too */
}

static void test_log_scope(void **state)
{
    struct kp_workqueue_options q = {
        .backoff_base_usec = 1000, .backoff_cap_usec = 4000, .qps = -1};
    struct scope_seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct kp_client *c = new_client();
    struct kp_reconciler_opts o = {.name = "sshhost",
                                   .group = "karpenter.kpssh.dev",
                                   .kind = "SSHHost",
                                   .reconcile = reconcile_logs,
                                   .ctx = &s,
                                   .client = c,
                                   .queue = &q};
    struct kp_reconciler *r = NULL;
    int fd = memfd_create("kp-test-reconciler-log", 0);
    char buf[8192], *line, *nl;
    int lines = 0, failed = 0;
    ssize_t n;

    (void)state;
    assert_int_equal(pthread_key_create(&scope_key, scope_exit), 0);
    atomic_store(&scope_at_exit, 0);
    assert_true(fd >= 0);
    kp_log_set_fd(fd);
    assert_int_equal(kp_reconciler_new(&o, &r), 0);
    assert_int_equal(kp_reconciler_start(r), 0);
    kp_client_free(c);
    assert_int_equal(kp_reconciler_enqueue(r, "pool/h7"), 0);
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&s.mu);
        n = s.calls;
        pthread_mutex_unlock(&s.mu);
        if (n >= 2)
            break;
        usleep(1000);
    }
    kp_reconciler_stop(r); /* joins the worker: scope_exit has run */
    kp_reconciler_free(r);
    kp_log_set_fd(-1);
    assert_int_equal(atomic_load(&scope_at_exit), -1); /* cleared on the worker after the call */
    assert_int_equal(pthread_key_delete(scope_key), 0);
    assert_true(s.calls >= 2);
    assert_int_equal(strlen(s.ids[0]), 36);
    assert_int_equal(strlen(s.ids[1]), 36);
    assert_string_not_equal(s.ids[0], s.ids[1]);

    n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    for (line = buf; *line; line = nl + 1) {
        char want[128];

        nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        lines++;
        assert_non_null(strstr(line, "\"controller\":\"sshhost\",\"controllerGroup\":"
                                     "\"karpenter.kpssh.dev\",\"controllerKind\":\"SSHHost\","
                                     "\"namespace\":\"pool\",\"name\":\"h7\",\"reconcileID\":\""));
        assert_null(strstr(line, "shadowed"));
        if (strstr(line, "reconcile failed")) {
            (void)snprintf(want, sizeof(want), "\"reconcileID\":\"%s\"", s.ids[0]);
            failed++;
            assert_non_null(strstr(line, want));
        }
    }
    assert_true(lines >= 3); /* two "inside" and the failure */
    assert_int_equal(failed, 1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_done_and_requeue),
        cmocka_unit_test(test_restart),
        cmocka_unit_test(test_conflict_delay),
        cmocka_unit_test(test_error_backoff),
        cmocka_unit_test(test_handler_and_one_at_a_time),
        cmocka_unit_test(test_workers_have_own_clients),
        cmocka_unit_test(test_ctx_cancelled_by_stop),
        cmocka_unit_test(test_ctx_parent_cancel),
        cmocka_unit_test(test_ctx_deadline),
        cmocka_unit_test(test_log_scope),
    };

    return kp_test_main("reconciler", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
