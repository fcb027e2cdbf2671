/* provider/ssh/jobs.c: the bounded SSH job pool (jobs.h).
 *
 * DESIGN
 *
 * What: a fixed set of threads running SSH jobs (probe, install, join, leave) that reconciles
 * submit under their object's key, so a reconcile worker never waits on a host. Each job ends
 * by storing its result under its key and calling the owner's done callback with the key (the
 * owner enqueues it on its reconciler); the next reconcile of the key takes the result.
 *
 * State, under one mutex: a map key -> job (every job that exists: queued, running or finished
 * and unread; that map is the per-key dedup) and a FIFO of queued jobs. A thread takes the
 * first queued job it may run: any normal job, or a slow one while fewer than slow_max slow
 * jobs run; so a queue head of slow jobs never blocks a normal job behind it, and a full slow
 * lane leaves the other threads to the hosts that answer. The queue is bounded (queue_max);
 * running jobs are bounded by the threads; finished ones by the keys their owner has (each is
 * taken on the key's next reconcile, or forgotten when the object goes).
 *
 * Why results are kept here and not handed to the owner directly: the owner's reconcile must
 * run on its own worker with its own client, and after a key's object changed the result must
 * meet the object as it is now, not as it was when the job was submitted. So the job only
 * wakes the key; the decision is made by a reconcile, the same pure functions as before.
 *
 * Cancellation: each job has a context under the pool's parent (the process's: SIGTERM, a lost
 * Lease) with its own timeout, started when the job starts running (a long wait in the queue
 * does not eat its time). forget and stop cancel a running job's context; the job function
 * passes the context down to its session (session.h), which notices within one poll slice.
 *
 * Threads: the mutex guards the map, the queue, the counters and every job's state; it is never
 * held while a job runs or while the done callback or the observer is called. A job's arg is
 * touched only by the thread running it until it is finished, then only by whoever takes it.
 * start/stop/free on the owner's main thread. */
#include "provider/ssh/jobs.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/list.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "base/time.h"
#include "provider/ssh/observe.h"

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_FINISHED };

struct job {
    struct kp_list link; /* in the queue while JOB_QUEUED */
    char *key;
    enum kp_ssh_job_kind kind;
    unsigned flags;
    uint64_t timeout_usec;
    struct kp_deadline deadline; /* .at 0: none */
    kp_ssh_job_fn fn;
    kp_ssh_job_free_fn free_arg;
    void *arg;
    enum job_state state;
    bool forgotten; /* running when forgotten: freed at its end, no callback */
    int result;
    struct kp_ctx ctx; /* valid while JOB_RUNNING */
};

struct kp_ssh_jobs {
    char *name;
    unsigned n_threads, queue_max, slow_max;
    kp_ssh_job_done_fn done;
    void *owner;
    const struct kp_ssh_observer *obs;

    pthread_mutex_t lock;
    pthread_cond_t cond; /* a job queued, a slow job ended, or stopping */
    pthread_cond_t idle; /* a running job ended (stop waits for none running) */
    struct kp_map *jobs; /* key -> struct job: every job that exists */
    struct kp_list queue;
    size_t queued, running, running_slow, finished;
    uint64_t submitted, refused_full, completed;
    bool running_pool, stopping;
    const struct kp_ctx *parent;
    pthread_t *threads;
    unsigned started; /* threads created (main thread only) */
};

const char *kp_ssh_job_kind_name(enum kp_ssh_job_kind kind)
{
    switch (kind) {
    case KP_SSH_JOB_PROBE:
        return "probe";
    case KP_SSH_JOB_INSTALL:
        return "install";
    case KP_SSH_JOB_JOIN:
        return "join";
    case KP_SSH_JOB_LEAVE:
        return "leave";
    case KP_SSH_JOB_KIND_N:
        break;
    }
    return "unknown";
}

const char *kp_ssh_job_result_name(int result)
{
    if (result >= 0)
        return KP_SSH_JOB_RESULT_SUCCESS;
    if (result == -ETIMEDOUT)
        return KP_SSH_JOB_RESULT_TIMEOUT;
    if (result == -ECANCELED || result == -KP_ENOTLEADER)
        return KP_SSH_JOB_RESULT_CANCELLED;
    return KP_SSH_JOB_RESULT_ERROR;
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    if (j->free_arg && j->arg)
        j->free_arg(j->arg);
    kp_free(j->key);
    kp_free(j);
}

int kp_ssh_jobs_new(const struct kp_ssh_jobs_opts *o, struct kp_ssh_jobs **ret)
{
    struct kp_ssh_jobs *p;

    if (!o || !o->done || o->threads > KP_SSH_JOBS_MAX_THREADS)
        return -EINVAL;
    p = kp_calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->n_threads = o->threads ? o->threads : KP_SSH_JOBS_THREADS;
    p->queue_max = o->queue_max ? o->queue_max : KP_SSH_JOBS_QUEUE_MAX;
    p->slow_max = o->slow_max ? o->slow_max : (p->n_threads > 1 ? p->n_threads / 2 : 1);
    if (p->slow_max > p->n_threads)
        p->slow_max = p->n_threads;
    p->done = o->done;
    p->owner = o->owner;
    p->obs = o->observer;
    kp_list_init(&p->queue);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    pthread_cond_init(&p->idle, NULL);
    p->name = kp_strdup(o->name ? o->name : "ssh");
    p->threads = kp_calloc(p->n_threads, sizeof(*p->threads));
    if (!p->name || !p->threads || kp_map_new(&p->jobs) < 0) {
        kp_ssh_jobs_free(p);
        return -ENOMEM;
    }
    *ret = p;
    return 0;
}

/* The first queued job this thread may run, unlinked and marked running; NULL when none may
 * run now. Under the lock. */
static struct job *pick(struct kp_ssh_jobs *p)
{
    struct kp_list *pos;

    KP_LIST_FOREACH (pos, &p->queue) {
        struct job *j = KP_LIST_ENTRY(pos, struct job, link);
        bool slow = j->flags & KP_SSH_JOB_SLOW;

        if (slow && p->running_slow >= p->slow_max)
            continue;
        kp_list_del(&j->link);
        p->queued--;
        p->running++;
        if (slow)
            p->running_slow++;
        j->state = JOB_RUNNING;
        {
            struct kp_deadline d =
                j->timeout_usec ? kp_deadline_in(j->timeout_usec) : kp_deadline_never();

            if (j->deadline.at)
                d = kp_deadline_min(d, j->deadline);
            kp_ctx_init(&j->ctx, p->parent, d);
        }
        return j;
    }
    return NULL;
}

static void *thread_main(void *arg)
{
    struct kp_ssh_jobs *p = arg;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        struct job *j;
        uint64_t t0;
        bool drop;
        int r;

        if (p->stopping)
            break;
        if (!(j = pick(p))) {
            pthread_cond_wait(&p->cond, &p->lock);
            continue;
        }
        pthread_mutex_unlock(&p->lock);
        if (p->obs && p->obs->jobs_running)
            p->obs->jobs_running(p->obs->ctx, +1);
        t0 = kp_mono_usec();
        r = j->fn(j->arg, &j->ctx);
        if (p->obs && p->obs->jobs_running)
            p->obs->jobs_running(p->obs->ctx, -1);
        if (p->obs && p->obs->job)
            p->obs->job(p->obs->ctx, kp_ssh_job_kind_name(j->kind), kp_ssh_job_result_name(r),
                        kp_mono_usec() - t0);
        pthread_mutex_lock(&p->lock);
        p->running--;
        if (j->flags & KP_SSH_JOB_SLOW) {
            p->running_slow--;
            pthread_cond_broadcast(&p->cond); /* a slow job waiting may run now */
        }
        p->completed++;
        drop = j->forgotten || p->stopping;
        if (drop) {
            job_free(j); /* forget or stop took it out of the map already */
        } else {
            j->state = JOB_FINISHED;
            j->result = r;
            p->finished++;
        }
        pthread_cond_broadcast(&p->idle);
        if (!drop) {
            /* The key may be taken (and a new job for it submitted) as soon as the lock is
             * released, so the callback gets a copy of the key, not the job's. */
            char *key = kp_strdup(j->key);

            pthread_mutex_unlock(&p->lock);
            if (key)
                p->done(p->owner, key);
            else
                kp_log_error("SSH job ended but its key cannot be enqueued (out of memory)",
                             KP_LF("pool", p->name));
            kp_free(key);
            pthread_mutex_lock(&p->lock);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int kp_ssh_jobs_start(struct kp_ssh_jobs *p, const struct kp_ctx *parent)
{
    char tname[32];
    int r = 0;

    pthread_mutex_lock(&p->lock);
    if (p->running_pool) {
        pthread_mutex_unlock(&p->lock);
        return -EALREADY;
    }
    p->parent = parent;
    p->stopping = false;
    p->running_pool = true;
    pthread_mutex_unlock(&p->lock);
    for (p->started = 0; p->started < p->n_threads; p->started++) {
        if ((r = -pthread_create(&p->threads[p->started], NULL, thread_main, p)) < 0)
            break;
        (void)snprintf(tname, sizeof(tname), "%.8s-ssh/%u", p->name, p->started % 100);
        tname[15] = '\0';
        (void)pthread_setname_np(p->threads[p->started], tname);
    }
    if (r < 0)
        kp_ssh_jobs_stop(p);
    return r;
}

/* Takes j out of the map and frees it, or marks it forgotten when it runs. Under the lock. */
static void drop_job(struct kp_ssh_jobs *p, struct job *j)
{
    (void)kp_map_remove(p->jobs, j->key);
    switch (j->state) {
    case JOB_QUEUED:
        kp_list_del(&j->link);
        p->queued--;
        job_free(j);
        break;
    case JOB_RUNNING:
        j->forgotten = true;
        kp_ctx_cancel(&j->ctx);
        break;
    case JOB_FINISHED:
        p->finished--;
        job_free(j);
        break;
    }
}

void kp_ssh_jobs_stop(struct kp_ssh_jobs *p)
{
    size_t it = 0, n = 0;
    struct job **all = NULL;
    const char *key;
    void *v;

    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    if (!p->running_pool) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    p->stopping = true;
    /* Every job goes: collect first, since removing from the map moves its entries. */
    all = kp_calloc(kp_map_size(p->jobs) + 1, sizeof(*all));
    while (all && kp_map_next(p->jobs, &it, &key, &v))
        all[n++] = v;
    for (size_t i = 0; i < n; i++)
        drop_job(p, all[i]);
    if (!all) { /* out of memory: cancel in place; the threads free them as they end */
        it = 0;
        while (kp_map_next(p->jobs, &it, &key, &v))
            if (((struct job *)v)->state == JOB_RUNNING)
                kp_ctx_cancel(&((struct job *)v)->ctx);
    }
    pthread_cond_broadcast(&p->cond);
    while (p->running > 0)
        pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
    kp_free(all);
    for (unsigned i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    p->started = 0;
    pthread_mutex_lock(&p->lock);
    /* Whatever is left (the out-of-memory path above) goes now that nothing runs. */
    while (kp_map_size(p->jobs) > 0) {
        it = 0;
        if (!kp_map_next(p->jobs, &it, &key, &v))
            break;
        drop_job(p, v);
    }
    p->running_pool = false;
    p->parent = NULL;
    pthread_mutex_unlock(&p->lock);
}

struct kp_ssh_jobs *kp_ssh_jobs_free(struct kp_ssh_jobs *p)
{
    if (!p)
        return NULL;
    kp_ssh_jobs_stop(p);
    kp_map_free(p->jobs);
    kp_free(p->threads);
    kp_free(p->name);
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    kp_free(p);
    return NULL;
}

int kp_ssh_jobs_submit(struct kp_ssh_jobs *p, const struct kp_ssh_job_spec *spec)
{
    struct job *j = NULL;
    int r;

    if (!spec || !spec->key || !*spec->key || !spec->fn)
        return -EINVAL;
    pthread_mutex_lock(&p->lock);
    if (!p->running_pool || p->stopping) {
        r = -ESHUTDOWN;
        goto out;
    }
    if (kp_map_contains(p->jobs, spec->key)) {
        r = -EEXIST;
        goto out;
    }
    if (p->queued >= p->queue_max) {
        p->refused_full++;
        r = -EAGAIN;
        goto out;
    }
    j = kp_calloc(1, sizeof(*j));
    if (!j || !(j->key = kp_strdup(spec->key))) {
        r = -ENOMEM;
        goto out;
    }
    j->kind = spec->kind;
    j->flags = spec->flags;
    j->timeout_usec = spec->timeout_usec;
    j->deadline = spec->deadline;
    j->fn = spec->fn;
    j->state = JOB_QUEUED;
    kp_list_init(&j->link);
    if ((r = kp_map_put(p->jobs, j->key, j, NULL)) < 0)
        goto out;
    /* From here on the pool owns the arg. */
    j->free_arg = spec->free_arg;
    j->arg = spec->arg;
    kp_list_add_tail(&p->queue, &j->link);
    p->queued++;
    p->submitted++;
    j = NULL;
    pthread_cond_broadcast(&p->cond);
    r = 0;
out:
    pthread_mutex_unlock(&p->lock);
    if (j) {
        kp_free(j->key);
        kp_free(j);
    }
    return r;
}

/* take and take_kind: j (key's, or NULL) under the lock, which this releases. */
static int take_unlock(struct kp_ssh_jobs *p, struct job *j, enum kp_ssh_job_kind *ret_kind,
                       void **ret_arg, int *ret_result)
{
    if (!j) {
        pthread_mutex_unlock(&p->lock);
        return -ENOENT;
    }
    if (j->state != JOB_FINISHED) {
        pthread_mutex_unlock(&p->lock);
        return -EINPROGRESS;
    }
    (void)kp_map_remove(p->jobs, j->key);
    p->finished--;
    pthread_mutex_unlock(&p->lock);
    if (ret_kind)
        *ret_kind = j->kind;
    if (ret_result)
        *ret_result = j->result;
    if (ret_arg) {
        *ret_arg = j->arg;
        j->arg = NULL; /* the caller's now */
    }
    job_free(j);
    return 0;
}

int kp_ssh_jobs_take(struct kp_ssh_jobs *p, const char *key, enum kp_ssh_job_kind *ret_kind,
                     void **ret_arg, int *ret_result)
{
    pthread_mutex_lock(&p->lock);
    return take_unlock(p, kp_map_get(p->jobs, key), ret_kind, ret_arg, ret_result);
}

int kp_ssh_jobs_take_kind(struct kp_ssh_jobs *p, const char *key, enum kp_ssh_job_kind kind,
                          void **ret_arg, int *ret_result, enum kp_ssh_job_kind *ret_other,
                          bool *ret_other_finished)
{
    struct job *j;

    pthread_mutex_lock(&p->lock);
    j = kp_map_get(p->jobs, key);
    if (j && j->kind != kind) {
        if (ret_other)
            *ret_other = j->kind;
        if (ret_other_finished)
            *ret_other_finished = j->state == JOB_FINISHED;
        pthread_mutex_unlock(&p->lock);
        return -EBUSY;
    }
    return take_unlock(p, j, NULL, ret_arg, ret_result);
}

int kp_ssh_jobs_peek(struct kp_ssh_jobs *p, const char *key, enum kp_ssh_job_kind *ret_kind,
                     bool *ret_finished)
{
    struct job *j;

    pthread_mutex_lock(&p->lock);
    j = kp_map_get(p->jobs, key);
    if (j && ret_kind)
        *ret_kind = j->kind;
    if (j && ret_finished)
        *ret_finished = j->state == JOB_FINISHED;
    pthread_mutex_unlock(&p->lock);
    return j ? 0 : -ENOENT;
}

void kp_ssh_jobs_cancel(struct kp_ssh_jobs *p, const char *key)
{
    struct job *j;

    pthread_mutex_lock(&p->lock);
    if ((j = kp_map_get(p->jobs, key))) {
        if (j->state == JOB_QUEUED)
            drop_job(p, j);
        else if (j->state == JOB_RUNNING)
            kp_ctx_cancel(&j->ctx);
    }
    pthread_mutex_unlock(&p->lock);
}

void kp_ssh_jobs_forget(struct kp_ssh_jobs *p, const char *key)
{
    struct job *j;

    pthread_mutex_lock(&p->lock);
    if ((j = kp_map_get(p->jobs, key)))
        drop_job(p, j);
    pthread_mutex_unlock(&p->lock);
}

void kp_ssh_jobs_get_stats(struct kp_ssh_jobs *p, struct kp_ssh_jobs_stats *ret)
{
    pthread_mutex_lock(&p->lock);
    *ret = (struct kp_ssh_jobs_stats){
        .queued = p->queued,
        .running = p->running,
        .running_slow = p->running_slow,
        .finished = p->finished,
        .submitted = p->submitted,
        .refused_full = p->refused_full,
        .completed = p->completed,
    };
    pthread_mutex_unlock(&p->lock);
}
