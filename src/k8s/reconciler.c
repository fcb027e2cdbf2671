/* k8s/reconciler.c: workers over a work queue (reconciler.h).
 *
 * DESIGN: each worker owns one client clone, made in start() on the main thread so a clone that
 * cannot be made fails start() instead of leaving a worker without a client. Workers block in
 * kp_workqueue_get(); stop() shuts the queue (getters return -ESHUTDOWN at once, the key in hand
 * is finished), joins every worker and frees the clones. The outcome of a reconcile call maps to
 * the queue as the header's table says; the queue's own dedup and dirty marking give the "never
 * two workers on one key" guarantee.
 *
 * Contexts: start() sets up run_ctx under the options' parent; stop() cancels it before it
 * shuts the queue, so a reconcile in progress sees its context done at once and returns
 * instead of starting more work. Each call gets a context of its own on the worker's stack,
 * under run_ctx, with the reconcile timeout. */
#include "k8s/reconciler.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/str.h"
#include "k8s/client.h"
#include "k8s/workqueue.h"

#define KP_RECONCILER_MAX_WORKERS 64
#define KP_RECONCILER_BACKOFF_BASE_USEC (5ULL * 1000)
#define KP_RECONCILER_BACKOFF_CAP_USEC (5ULL * 60 * 1000 * 1000)

struct worker {
    struct kp_reconciler *r;
    struct kp_client *c;
    pthread_t thread;
    bool joinable;
};

struct kp_reconciler {
    char *name;
    char *group, *kind; /* NULL: not given */
    kp_reconcile_fn fn;
    void *ctx;
    struct kp_client *client; /* our clone of opts->client: each start() clones the workers'
                               * from it, so a restart never needs the caller's client */
    uint64_t conflict_delay;
    uint64_t timeout;
    const struct kp_ctx *parent;
    struct kp_ctx run_ctx; /* under parent; set up by start, cancelled by stop */
    struct kp_workqueue *q;
    struct worker *workers;
    unsigned n_workers;
    atomic_bool running;
    atomic_uint_fast64_t reconciles, errors, conflicts;
};

int kp_reconciler_new(const struct kp_reconciler_opts *opts, struct kp_reconciler **ret)
{
    struct kp_workqueue_options qo = {
        .backoff_base_usec = KP_RECONCILER_BACKOFF_BASE_USEC,
        .backoff_cap_usec = KP_RECONCILER_BACKOFF_CAP_USEC,
    };
    struct kp_reconciler *r;
    int e;

    if (!opts || !opts->reconcile || !opts->client || opts->workers > KP_RECONCILER_MAX_WORKERS)
        return -EINVAL;
    r = kp_calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->fn = opts->reconcile;
    r->ctx = opts->ctx;
    r->n_workers = opts->workers ? opts->workers : 1;
    r->conflict_delay =
        opts->conflict_delay_usec ? opts->conflict_delay_usec : KP_RECONCILER_CONFLICT_DELAY_USEC;
    r->timeout = opts->timeout_usec ? opts->timeout_usec : KP_RECONCILER_TIMEOUT_USEC;
    r->parent = opts->parent;
    kp_ctx_init(&r->run_ctx, r->parent, kp_deadline_never());
    atomic_init(&r->running, false);
    atomic_init(&r->reconciles, 0);
    atomic_init(&r->errors, 0);
    atomic_init(&r->conflicts, 0);
    r->name = kp_strdup(opts->name ? opts->name : "reconciler");
    r->group = opts->group ? kp_strdup(opts->group) : NULL;
    r->kind = opts->kind ? kp_strdup(opts->kind) : NULL;
    r->workers = kp_calloc(r->n_workers, sizeof(*r->workers));
    if (!r->name || !r->workers || (opts->group && !r->group) || (opts->kind && !r->kind)) {
        kp_reconciler_free(r);
        return -ENOMEM;
    }
    if ((e = kp_client_clone(opts->client, &r->client)) < 0) {
        kp_reconciler_free(r);
        return e;
    }
    e = kp_workqueue_new(opts->queue ? opts->queue : &qo, &r->q);
    if (e < 0) {
        kp_reconciler_free(r);
        return e;
    }
    *ret = r;
    return 0;
}

/* A key that cannot be put back (only -ENOMEM while running) would stop being reconciled until
 * its object changes again: say so loudly (the scope names the key). -ESHUTDOWN is the stop in
 * progress. */
static void requeue_check(int e)
{
    if (e < 0 && e != -ESHUTDOWN)
        kp_log_error_errno(e, "cannot requeue a key; it waits for its next change");
}

/* The scope of one reconcile of key ("ns/name" or "name"); ns_buf holds the namespace. */
static void scope_init(const struct kp_reconciler *r, const char *key, char *ns_buf, size_t size,
                       struct kp_log_scope *ret)
{
    const char *slash = strchr(key, '/');
    size_t n = slash ? KP_MIN((size_t)(slash - key), size - 1) : 0;

    memcpy(ns_buf, key, n);
    ns_buf[n] = '\0';
    *ret = (struct kp_log_scope){.controller = r->name,
                                 .group = r->group,
                                 .kind = r->kind,
                                 .ns = ns_buf,
                                 .name = slash ? slash + 1 : key};
    kp_log_new_id(ret->reconcile_id);
}

/* One reconcile call and its outcome; runs in the key's log scope, so its lines name the
 * controller and the object without fields of their own. */
static void handle_scoped(struct kp_reconciler *r, struct kp_client *c, const char *key)
{
    uint64_t requeue = 0;
    struct kp_ctx cx;
    int e;

    atomic_fetch_add(&r->reconciles, 1);
    kp_ctx_init(&cx, &r->run_ctx, kp_deadline_in(r->timeout));
    e = r->fn(r->ctx, c, &cx, key, &requeue);
    if (e >= 0) {
        kp_workqueue_forget(r->q, key);
        if (requeue)
            requeue_check(kp_workqueue_add_after(r->q, key, requeue));
        return;
    }
    if (e == -KP_ECONFLICT) {
        /* Someone wrote the object since we read it: our cache will catch up within the
         * delay. Not a failure of the object, so its backoff does not grow. */
        atomic_fetch_add(&r->conflicts, 1);
        kp_log_debug("optimistic lock lost; retrying");
        requeue_check(kp_workqueue_add_after(
            r->q, key, requeue && requeue < r->conflict_delay ? requeue : r->conflict_delay));
        return;
    }
    atomic_fetch_add(&r->errors, 1);
    kp_log_error_errno_rl(key, e, "reconcile failed; retrying with backoff",
                          KP_LF("failures", kp_workqueue_failures(r->q, key)));
    requeue_check(kp_workqueue_add_rate_limited(r->q, key));
    if (requeue) /* the earlier of the two wins */
        requeue_check(kp_workqueue_add_after(r->q, key, requeue));
}

static void handle(struct kp_reconciler *r, struct kp_client *c, const char *key)
{
    struct kp_log_scope scope;
    char ns[KP_LOG_SCOPE_MAX];

    scope_init(r, key, ns, sizeof(ns), &scope);
    kp_log_scope_set(&scope);
    handle_scoped(r, c, key);
    kp_log_scope_set(NULL);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const char *key;

    while (kp_workqueue_get(w->r->q, &key) == 0) {
        handle(w->r, w->c, key);
        kp_workqueue_done(w->r->q, key);
    }
    return NULL;
}

static void join_workers(struct kp_reconciler *r)
{
    unsigned i;

    kp_workqueue_shutdown(r->q);
    for (i = 0; i < r->n_workers; i++) {
        if (r->workers[i].joinable)
            pthread_join(r->workers[i].thread, NULL);
        r->workers[i].joinable = false;
        r->workers[i].c = kp_client_free(r->workers[i].c);
    }
    kp_workqueue_wait_idle(r->q);
}

int kp_reconciler_start(struct kp_reconciler *r)
{
    char tname[32];
    unsigned i;
    int e;

    if (atomic_load(&r->running))
        return -EALREADY;
    /* No worker runs: the context may be set up afresh for this run. */
    kp_ctx_init(&r->run_ctx, r->parent, kp_deadline_never());
    for (i = 0; i < r->n_workers; i++) {
        r->workers[i].r = r;
        if ((e = kp_client_clone(r->client, &r->workers[i].c)) < 0)
            goto fail;
    }
    for (i = 0; i < r->n_workers; i++) {
        if ((e = -pthread_create(&r->workers[i].thread, NULL, worker_main, &r->workers[i])) < 0)
            goto fail;
        r->workers[i].joinable = true;
        /* Thread names are at most 15 bytes: a prefix of the name and the worker number. */
        (void)snprintf(tname, sizeof(tname), "%.10s/%u", r->name, i % 100);
        tname[15] = '\0';
        (void)pthread_setname_np(r->workers[i].thread, tname);
    }
    atomic_store(&r->running, true);
    return 0;
fail:
    join_workers(r);
    return e;
}

void kp_reconciler_stop(struct kp_reconciler *r)
{
    if (!r || !atomic_exchange(&r->running, false))
        return;
    kp_ctx_cancel(&r->run_ctx);
    join_workers(r);
    /* Idle and without workers: the queue may collect keys again for a later start. */
    kp_workqueue_reopen(r->q);
}

bool kp_reconciler_running(struct kp_reconciler *r)
{
    return atomic_load(&r->running);
}

struct kp_reconciler *kp_reconciler_free(struct kp_reconciler *r)
{
    if (!r)
        return NULL;
    kp_reconciler_stop(r);
    if (r->q) {
        kp_workqueue_shutdown(r->q);
        kp_workqueue_wait_idle(r->q);
        kp_workqueue_free(r->q);
    }
    if (r->workers)
        for (unsigned i = 0; i < r->n_workers; i++)
            kp_client_free(r->workers[i].c);
    kp_free(r->workers);
    kp_client_free(r->client);
    kp_free(r->name);
    kp_free(r->group);
    kp_free(r->kind);
    kp_free(r);
    return NULL;
}

int kp_reconciler_enqueue(struct kp_reconciler *r, const char *key)
{
    return kp_workqueue_add(r->q, key);
}

int kp_reconciler_enqueue_after(struct kp_reconciler *r, const char *key, uint64_t delay_usec)
{
    return kp_workqueue_add_after(r->q, key, delay_usec);
}

static void on_add(void *ctx, const struct kp_entry *e)
{
    struct kp_reconciler *r = ctx;
    int x = kp_reconciler_enqueue(r, e->key);

    if (x < 0 && x != -ESHUTDOWN)
        kp_log_warn_rl("reconciler-enqueue", "cannot enqueue a key", KP_LF("controller", r->name),
                       KP_LF("key", e->key), KP_LF("error", kp_strerror(x)));
}

static void on_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    (void)old_e;
    on_add(ctx, new_e);
}

struct kp_informer_handler kp_reconciler_handler(struct kp_reconciler *r)
{
    return (struct kp_informer_handler){
        .on_add = on_add, .on_update = on_update, .on_delete = on_add, .ctx = r};
}

void kp_reconciler_get_stats(struct kp_reconciler *r, struct kp_reconciler_stats *ret)
{
    struct kp_workqueue_stats qs;

    kp_workqueue_get_stats(r->q, &qs);
    *ret = (struct kp_reconciler_stats){
        .reconciles = atomic_load(&r->reconciles),
        .errors = atomic_load(&r->errors),
        .conflicts = atomic_load(&r->conflicts),
        .depth = qs.depth + qs.delayed,
    };
}
