/* tests/unit/test-jobs.c: the SSH job pool (provider/ssh/jobs.h) with fake jobs.
 *
 * A fake job blocks until its "gate" opens or its context ends, and records why it ended; the
 * done callback records the keys it was handed, as a reconciler's enqueue would. */
#include "kp-test.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/macro.h"
#include "base/str.h"
#include "base/time.h"
#include "provider/ssh/jobs.h"
#include "provider/ssh/observe.h"

#define WAIT_USEC (10 * KP_USEC_PER_SEC)

struct world {
    pthread_mutex_t mu;
    char done_keys[64][32];
    unsigned n_done;
    atomic_int running, max_running, max_slow;
    atomic_int slow_running;
    atomic_bool gate; /* jobs return when it opens */
    atomic_int freed;
    atomic_int observed_end, in_flight;
};

struct fake {
    struct world *w;
    bool slow;
    int answer;
    int ended_by; /* kp_ctx_err when the context ended it, else 0 */
};

static void on_done(void *owner, const char *key)
{
    struct world *w = owner;

    pthread_mutex_lock(&w->mu);
    if (w->n_done < 64)
        (void)snprintf(w->done_keys[w->n_done++], 32, "%s", key);
    pthread_mutex_unlock(&w->mu);
}

static void bump_max(atomic_int *max, int n)
{
    int m = atomic_load(max);

    while (n > m && !atomic_compare_exchange_weak(max, &m, n))
        ;
}

static int fake_run(void *arg, const struct kp_ctx *ctx)
{
    struct fake *f = arg;
    struct world *w = f->w;
    int n = atomic_fetch_add(&w->running, 1) + 1;
    struct kp_deadline dl = kp_deadline_in(WAIT_USEC);

    bump_max(&w->max_running, n);
    if (f->slow)
        bump_max(&w->max_slow, atomic_fetch_add(&w->slow_running, 1) + 1);
    while (!atomic_load(&w->gate) && !kp_ctx_done(ctx) && !kp_deadline_expired(dl))
        usleep(1000);
    f->ended_by = kp_ctx_err(ctx);
    if (f->slow)
        atomic_fetch_sub(&w->slow_running, 1);
    atomic_fetch_sub(&w->running, 1);
    return f->ended_by ? f->ended_by : f->answer;
}

static void fake_free(void *arg)
{
    struct fake *f = arg;

    atomic_fetch_add(&f->w->freed, 1);
    kp_free(f);
}

static void obs_job(void *ctx, const char *kind, const char *result, uint64_t usec)
{
    struct world *w = ctx;

    (void)kind;
    (void)result;
    (void)usec;
    atomic_fetch_add(&w->observed_end, 1);
}

static void obs_running(void *ctx, int delta)
{
    struct world *w = ctx;

    atomic_fetch_add(&w->in_flight, delta);
}

static struct fake *fake_new(struct world *w, bool slow, int answer)
{
    struct fake *f = kp_calloc(1, sizeof(*f));

    assert_non_null(f);
    f->w = w;
    f->slow = slow;
    f->answer = answer;
    return f;
}

static int submit(struct kp_ssh_jobs *p, struct world *w, const char *key, bool slow, int answer,
                  uint64_t timeout_usec)
{
    struct fake *f = fake_new(w, slow, answer);
    struct kp_ssh_job_spec spec = {
        .key = key,
        .kind = KP_SSH_JOB_PROBE,
        .flags = slow ? KP_SSH_JOB_SLOW : 0,
        .timeout_usec = timeout_usec,
        .fn = fake_run,
        .free_arg = fake_free,
        .arg = f,
    };
    int r = kp_ssh_jobs_submit(p, &spec);

    if (r < 0)
        kp_free(f); /* refused: still ours */
    return r;
}

static unsigned n_done(struct world *w)
{
    unsigned n;

    pthread_mutex_lock(&w->mu);
    n = w->n_done;
    pthread_mutex_unlock(&w->mu);
    return n;
}

static void wait_done(struct world *w, unsigned n)
{
    struct kp_deadline dl = kp_deadline_in(WAIT_USEC);

    while (n_done(w) < n && !kp_deadline_expired(dl))
        usleep(1000);
    assert_int_equal(n_done(w), n);
}

static void wait_running(struct world *w, int n)
{
    struct kp_deadline dl = kp_deadline_in(WAIT_USEC);

    while (atomic_load(&w->running) < n && !kp_deadline_expired(dl))
        usleep(1000);
    assert_int_equal(atomic_load(&w->running), n);
}

static struct kp_ssh_jobs *pool_new(struct world *w, unsigned threads, unsigned queue_max,
                                    const struct kp_ctx *parent, const struct kp_ssh_observer *o)
{
    struct kp_ssh_jobs_opts opts = {.name = "test",
                                    .threads = threads,
                                    .queue_max = queue_max,
                                    .done = on_done,
                                    .owner = w,
                                    .observer = o};
    struct kp_ssh_jobs *p = NULL;

    assert_int_equal(kp_ssh_jobs_new(&opts, &p), 0);
    assert_int_equal(kp_ssh_jobs_start(p, parent), 0);
    return p;
}

static void world_init(struct world *w)
{
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->mu, NULL);
}

/* One job per key: queued, running or unread, a second submit is refused; after take, the key
 * is free again. A finished job's end enqueues its key, and take hands back its result. */
static void test_dedupe_and_result(void **state)
{
    struct world w;
    struct kp_ssh_jobs *p;
    enum kp_ssh_job_kind kind = KP_SSH_JOB_LEAVE;
    void *arg = NULL;
    int res = 1;

    (void)state;
    world_init(&w);
    p = pool_new(&w, 2, 0, NULL, NULL);
    assert_int_equal(kp_ssh_jobs_take(p, "h1", NULL, NULL, NULL), -ENOENT);
    assert_int_equal(submit(p, &w, "h1", false, -EIO, 0), 0);
    assert_int_equal(submit(p, &w, "h1", false, 0, 0), -EEXIST); /* in flight */
    wait_running(&w, 1);
    assert_int_equal(kp_ssh_jobs_take(p, "h1", NULL, NULL, NULL), -EINPROGRESS);
    assert_int_equal(n_done(&w), 0);
    atomic_store(&w.gate, true);
    wait_done(&w, 1);
    assert_string_equal(w.done_keys[0], "h1");
    assert_int_equal(submit(p, &w, "h1", false, 0, 0), -EEXIST); /* unread result */
    assert_int_equal(kp_ssh_jobs_take(p, "h1", &kind, &arg, &res), 0);
    assert_int_equal(kind, KP_SSH_JOB_PROBE);
    assert_int_equal(res, -EIO);
    assert_non_null(arg);
    fake_free(arg);
    assert_int_equal(kp_ssh_jobs_take(p, "h1", NULL, NULL, NULL), -ENOENT);
    assert_int_equal(submit(p, &w, "h1", false, 0, 0), 0); /* free again */
    wait_done(&w, 2);
    /* take with no arg output: the pool frees it. */
    assert_int_equal(kp_ssh_jobs_take(p, "h1", NULL, NULL, &res), 0);
    assert_int_equal(res, 0);
    assert_int_equal(atomic_load(&w.freed), 2);
    kp_ssh_jobs_free(p);
}

/* At most queue_max jobs wait; the next is refused with -EAGAIN (its arg stays the caller's),
 * and at most `threads` run at once. */
static void test_bound(void **state)
{
    struct world w;
    struct kp_ssh_jobs *p;
    struct kp_ssh_jobs_stats st;
    char key[16];

    (void)state;
    world_init(&w);
    p = pool_new(&w, 2, 3, NULL, NULL);
    for (unsigned i = 0; i < 2; i++) {
        (void)snprintf(key, sizeof(key), "run%u", i);
        assert_int_equal(submit(p, &w, key, false, 0, 0), 0);
    }
    wait_running(&w, 2);
    for (unsigned i = 0; i < 3; i++) {
        (void)snprintf(key, sizeof(key), "q%u", i);
        assert_int_equal(submit(p, &w, key, false, 0, 0), 0);
    }
    assert_int_equal(submit(p, &w, "one-too-many", false, 0, 0), -EAGAIN);
    kp_ssh_jobs_get_stats(p, &st);
    assert_int_equal(st.queued, 3);
    assert_int_equal(st.running, 2);
    assert_int_equal(st.refused_full, 1);
    atomic_store(&w.gate, true);
    wait_done(&w, 5);
    assert_int_equal(atomic_load(&w.max_running), 2);
    kp_ssh_jobs_free(p); /* frees the five unread results */
    assert_int_equal(atomic_load(&w.freed), 5);
}

/* Slow jobs run at most slow_max (half the threads) at once, and normal jobs queued behind
 * them run on the other threads meanwhile. */
static void test_slow_lane(void **state)
{
    struct world w;
    struct kp_ssh_jobs *p;
    char key[16];

    (void)state;
    world_init(&w);
    p = pool_new(&w, 4, 0, NULL, NULL);
    for (unsigned i = 0; i < 10; i++) {
        (void)snprintf(key, sizeof(key), "dead%u", i);
        assert_int_equal(submit(p, &w, key, true, -ETIMEDOUT, 0), 0);
    }
    wait_running(&w, 2); /* two slow ones; the other eight wait */
    usleep(20000);
    assert_int_equal(atomic_load(&w.running), 2);
    assert_int_equal(submit(p, &w, "live", false, 0, 0), 0);
    wait_running(&w, 3); /* the live host is probed beside them */
    assert_int_equal(atomic_load(&w.slow_running), 2);
    atomic_store(&w.gate, true);
    wait_done(&w, 11);
    assert_int_equal(atomic_load(&w.max_slow), 2);
    kp_ssh_jobs_free(p);
}

/* Cancelling the parent (SIGTERM, a lost Lease) ends every running job at once; stop cancels
 * too, drops what is queued and unread without a done callback, and the pool may start again. */
static void test_cancel_and_stop(void **state)
{
    struct world w;
    struct kp_ssh_jobs *p;
    struct kp_ctx parent;
    struct kp_ssh_observer o = {.job = obs_job, .jobs_running = obs_running};
    int res = 0;
    uint64_t t0;

    (void)state;
    world_init(&w);
    o.ctx = &w;
    kp_ctx_init(&parent, NULL, kp_deadline_never());
    p = pool_new(&w, 1, 0, &parent, &o);
    assert_int_equal(submit(p, &w, "a", false, 0, 0), 0);
    assert_int_equal(submit(p, &w, "b", false, 0, 0), 0); /* queued behind a */
    wait_running(&w, 1);
    assert_int_equal(atomic_load(&w.in_flight), 1);
    t0 = kp_mono_usec();
    kp_ctx_cancel(&parent);
    wait_done(&w, 2); /* a ends cancelled; b starts under a cancelled parent and ends too */
    assert_true(kp_mono_usec() - t0 < 5 * KP_USEC_PER_SEC);
    assert_int_equal(kp_ssh_jobs_take(p, "a", NULL, NULL, &res), 0);
    assert_int_equal(res, -ECANCELED);
    assert_int_equal(atomic_load(&w.observed_end), 2);
    assert_int_equal(atomic_load(&w.in_flight), 0);
    kp_ssh_jobs_stop(p); /* b's unread result goes */
    assert_int_equal(atomic_load(&w.freed), 2);
    assert_int_equal(submit(p, &w, "c", false, 0, 0), -ESHUTDOWN);

    /* Started again under a live parent: stop cancels the running job and drops the queued. */
    kp_ctx_init(&parent, NULL, kp_deadline_never());
    assert_int_equal(kp_ssh_jobs_start(p, &parent), 0);
    assert_int_equal(submit(p, &w, "d", false, 0, 0), 0);
    assert_int_equal(submit(p, &w, "e", false, 0, 0), 0);
    wait_running(&w, 1);
    t0 = kp_mono_usec();
    kp_ssh_jobs_stop(p);
    assert_true(kp_mono_usec() - t0 < 5 * KP_USEC_PER_SEC);
    assert_int_equal(atomic_load(&w.running), 0);
    assert_int_equal(atomic_load(&w.freed), 4);
    assert_int_equal(n_done(&w), 2); /* no callback for what stop dropped */
    kp_ssh_jobs_free(p);
}

/* A job's timeout is its context's deadline; forget drops a queued job and cancels a running
 * one, whose end then calls nobody. */
static void test_timeout_and_forget(void **state)
{
    struct world w;
    struct kp_ssh_jobs *p;
    int res = 0;

    (void)state;
    world_init(&w);
    p = pool_new(&w, 1, 0, NULL, NULL);
    assert_int_equal(submit(p, &w, "slowpoke", false, 0, 30 * KP_USEC_PER_MSEC), 0);
    wait_done(&w, 1);
    assert_int_equal(kp_ssh_jobs_take(p, "slowpoke", NULL, NULL, &res), 0);
    assert_int_equal(res, -ETIMEDOUT);
    assert_string_equal(kp_ssh_job_result_name(res), KP_SSH_JOB_RESULT_TIMEOUT);

    assert_int_equal(submit(p, &w, "gone", false, 0, 0), 0);
    assert_int_equal(submit(p, &w, "queued", false, 0, 0), 0);
    wait_running(&w, 1);
    kp_ssh_jobs_forget(p, "queued");
    assert_int_equal(atomic_load(&w.freed), 2);
    kp_ssh_jobs_forget(p, "gone");
    {
        struct kp_deadline dl = kp_deadline_in(WAIT_USEC);

        while (atomic_load(&w.freed) < 3 && !kp_deadline_expired(dl))
            usleep(1000);
    }
    assert_int_equal(atomic_load(&w.freed), 3);
    assert_int_equal(n_done(&w), 1);
    assert_int_equal(kp_ssh_jobs_take(p, "gone", NULL, NULL, NULL), -ENOENT);
    assert_int_equal(submit(p, &w, "gone", false, 0, 0), 0); /* the key is free again */
    atomic_store(&w.gate, true);
    wait_done(&w, 2);
    kp_ssh_jobs_free(p);
}

/* A key whose jobs come in several kinds (the launch pool's install, join and leave):
 * take_kind takes only its kind and describes another; cancel keeps a running job on its key
 * (submit refused) until it has ended, which calls done as usual; an absolute deadline counts
 * the time a job waited in the queue. */
static void test_kinds_cancel_deadline(void **state)
{
    struct world w;
    struct kp_ssh_jobs *p;
    struct fake *f = NULL;
    enum kp_ssh_job_kind other = KP_SSH_JOB_KIND_N;
    bool finished = true;
    void *arg = NULL;
    int res = 0;

    (void)state;
    world_init(&w);
    p = pool_new(&w, 1, 0, NULL, NULL);
    f = fake_new(&w, false, 0);
    {
        struct kp_ssh_job_spec spec = {.key = "nc/1",
                                       .kind = KP_SSH_JOB_JOIN,
                                       .fn = fake_run,
                                       .free_arg = fake_free,
                                       .arg = f};

        assert_int_equal(kp_ssh_jobs_submit(p, &spec), 0);
    }
    wait_running(&w, 1);
    assert_int_equal(kp_ssh_jobs_peek(p, "nc/1", &other, &finished), 0);
    assert_int_equal(other, KP_SSH_JOB_JOIN);
    assert_false(finished);
    assert_int_equal(kp_ssh_jobs_peek(p, "nc/2", NULL, NULL), -ENOENT);
    finished = true;
    other = KP_SSH_JOB_KIND_N;
    assert_int_equal(
        kp_ssh_jobs_take_kind(p, "nc/1", KP_SSH_JOB_LEAVE, &arg, &res, &other, &finished), -EBUSY);
    assert_int_equal(other, KP_SSH_JOB_JOIN);
    assert_false(finished);
    assert_int_equal(kp_ssh_jobs_take_kind(p, "nc/1", KP_SSH_JOB_JOIN, &arg, &res, NULL, NULL),
                     -EINPROGRESS);
    /* Cancelled: still the key's until it ends; then done is called and its result read. */
    kp_ssh_jobs_cancel(p, "nc/1");
    wait_done(&w, 1);
    assert_int_equal(atomic_load(&w.freed), 0);
    assert_int_equal(
        kp_ssh_jobs_take_kind(p, "nc/1", KP_SSH_JOB_LEAVE, &arg, &res, &other, &finished), -EBUSY);
    assert_true(finished);
    assert_int_equal(kp_ssh_jobs_take_kind(p, "nc/1", KP_SSH_JOB_JOIN, &arg, &res, NULL, NULL), 0);
    assert_int_equal(res, -ECANCELED);
    assert_ptr_equal(arg, f);
    assert_int_equal(kp_ssh_jobs_peek(p, "nc/1", NULL, NULL), -ENOENT);
    fake_free(arg);
    assert_int_equal(kp_ssh_jobs_take_kind(p, "nc/1", KP_SSH_JOB_JOIN, &arg, &res, NULL, NULL),
                     -ENOENT);

    /* A queued job cancelled is dropped: it never ran, and nobody is told. */
    assert_int_equal(submit(p, &w, "busy", false, 0, 0), 0);
    assert_int_equal(submit(p, &w, "waiting", false, 0, 0), 0);
    wait_running(&w, 1);
    kp_ssh_jobs_cancel(p, "waiting");
    assert_int_equal(atomic_load(&w.freed), 2);
    assert_int_equal(kp_ssh_jobs_take(p, "waiting", NULL, NULL, NULL), -ENOENT);

    /* An absolute deadline that passes while the job waits in the queue ends it at once. */
    f = fake_new(&w, false, 0);
    {
        struct kp_ssh_job_spec spec = {.key = "late",
                                       .kind = KP_SSH_JOB_INSTALL,
                                       .deadline = kp_deadline_in(20 * KP_USEC_PER_MSEC),
                                       .fn = fake_run,
                                       .free_arg = fake_free,
                                       .arg = f};

        assert_int_equal(kp_ssh_jobs_submit(p, &spec), 0);
    }
    usleep(50 * 1000);
    atomic_store(&w.gate, true); /* "busy" ends; "late" starts past its deadline */
    wait_done(&w, 3);
    assert_int_equal(kp_ssh_jobs_take(p, "late", NULL, NULL, &res), 0);
    assert_int_equal(res, -ETIMEDOUT);
    assert_int_equal(kp_ssh_jobs_take(p, "busy", NULL, NULL, &res), 0);
    assert_int_equal(res, 0);
    kp_ssh_jobs_free(p);
}

static void test_invalid(void **state)
{
    struct kp_ssh_jobs_opts o = {0};
    struct kp_ssh_jobs *p = NULL;
    struct kp_ssh_job_spec spec = {.key = "k"};
    struct world w;

    (void)state;
    world_init(&w);
    assert_int_equal(kp_ssh_jobs_new(&o, &p), -EINVAL); /* no done callback */
    o.done = on_done;
    o.threads = KP_SSH_JOBS_MAX_THREADS + 1;
    assert_int_equal(kp_ssh_jobs_new(&o, &p), -EINVAL);
    o.threads = 1;
    assert_int_equal(kp_ssh_jobs_new(&o, &p), 0);
    assert_int_equal(submit(p, &w, "k", false, 0, 0), -ESHUTDOWN); /* not started */
    assert_int_equal(kp_ssh_jobs_start(p, NULL), 0);
    assert_int_equal(kp_ssh_jobs_start(p, NULL), -EALREADY);
    assert_int_equal(kp_ssh_jobs_submit(p, &spec), -EINVAL); /* no fn */
    assert_string_equal(kp_ssh_job_kind_name(KP_SSH_JOB_JOIN), "join");
    assert_string_equal(kp_ssh_job_result_name(-KP_ENOTLEADER), KP_SSH_JOB_RESULT_CANCELLED);
    assert_string_equal(kp_ssh_job_result_name(-EIO), KP_SSH_JOB_RESULT_ERROR);
    assert_null(kp_ssh_jobs_free(p));
    assert_null(kp_ssh_jobs_free(NULL));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_dedupe_and_result),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_slow_lane),
        cmocka_unit_test(test_cancel_and_stop),
        cmocka_unit_test(test_timeout_and_forget),
        cmocka_unit_test(test_kinds_cancel_deadline),
    };

    return kp_test_main("jobs", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
