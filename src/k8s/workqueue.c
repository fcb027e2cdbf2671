/* DESIGN: work queue of keys.
 *
 * What: a FIFO of keys with dedup, a processing set, delayed adds and rate limiting, for the
 * reconcile workers (STYLE.md section 4: informers enqueue keys, never objects).
 *
 * How: one record per key in a map, alive while the key is queued, processing, delayed or has a
 * backoff count. Flags on the record are the whole state machine:
 *   dirty       the key needs processing (it is queued, or will be when its worker is done)
 *   queued      the record is on the ready list (implies dirty and not processing)
 *   processing  a worker holds it
 * Delayed adds go to a binary min-heap of (time, record); a record keeps the earliest pending
 * time, and heap entries that no longer match it are stale and skipped when popped. There is no
 * timer thread: a getter with nothing ready sleeps until the earliest heap entry is due and moves
 * due entries to the ready list itself.
 *
 * Threads: any. One mutex guards everything; two condition variables (on CLOCK_MONOTONIC)
 * wake getters and idle-waiters. Nothing is called out while the mutex is held. */
#include "k8s/workqueue.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/list.h"
#include "base/map.h"
#include "base/time.h"

#define KP_WQ_DEFAULT_BASE_USEC (5 * KP_USEC_PER_MSEC)
#define KP_WQ_DEFAULT_CAP_USEC (1000 * KP_USEC_PER_SEC)
#define KP_WQ_DEFAULT_QPS 10.0
#define KP_WQ_DEFAULT_BURST 100

struct kp_wq_item {
    char *key;
    struct kp_list link; /* on the ready list while queued */
    bool dirty, queued, processing;
    uint64_t delay_at;  /* earliest pending delayed add, 0 for none */
    unsigned heap_refs; /* heap entries pointing here, stale ones included */
    unsigned failures;  /* rate-limited adds since the last forget */
};

struct kp_wq_delay {
    uint64_t at;
    struct kp_wq_item *item;
};

struct kp_workqueue {
    pthread_mutex_t lock;
    pthread_cond_t ready_cond; /* a key became ready, a delay got earlier, or shutdown */
    pthread_cond_t idle_cond;  /* processing dropped to zero */
    struct kp_map *items;      /* key -> struct kp_wq_item */
    struct kp_list ready;
    size_t nready, nprocessing;
    struct kp_wq_delay *heap;
    size_t nheap, heap_cap;
    bool shutting_down;
    struct kp_workqueue_options opts;
    double tokens;        /* global bucket level */
    uint64_t bucket_usec; /* when tokens was last brought up to date */
    uint64_t adds, retries;
};

int kp_workqueue_new(const struct kp_workqueue_options *opts, struct kp_workqueue **ret)
{
    struct kp_workqueue *q = NULL;
    int r;

    q = kp_calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    r = kp_map_new(&q->items);
    if (r == 0 && (r = kp_cond_init_monotonic(&q->ready_cond)) < 0)
        kp_map_free(q->items);
    if (r == 0 && (r = kp_cond_init_monotonic(&q->idle_cond)) < 0) {
        pthread_cond_destroy(&q->ready_cond);
        kp_map_free(q->items);
    }
    if (r < 0) {
        kp_free(q);
        return r;
    }
    if (opts)
        q->opts = *opts;
    if (q->opts.backoff_base_usec == 0)
        q->opts.backoff_base_usec = KP_WQ_DEFAULT_BASE_USEC;
    if (q->opts.backoff_cap_usec == 0)
        q->opts.backoff_cap_usec = KP_WQ_DEFAULT_CAP_USEC;
    if (q->opts.qps == 0)
        q->opts.qps = KP_WQ_DEFAULT_QPS;
    if (q->opts.burst == 0)
        q->opts.burst = KP_WQ_DEFAULT_BURST;
    q->tokens = q->opts.burst;
    q->bucket_usec = kp_mono_usec();
    kp_list_init(&q->ready);
    pthread_mutex_init(&q->lock, NULL);
    *ret = q;
    return 0;
}

struct kp_workqueue *kp_workqueue_free(struct kp_workqueue *q)
{
    size_t it = 0;
    void *v;

    if (!q)
        return NULL;
    while (kp_map_next(q->items, &it, NULL, &v)) {
        struct kp_wq_item *item = v;

        kp_free(item->key);
        kp_free(item);
    }
    kp_map_free(q->items);
    kp_free(q->heap);
    pthread_cond_destroy(&q->ready_cond);
    pthread_cond_destroy(&q->idle_cond);
    pthread_mutex_destroy(&q->lock);
    kp_free(q);
    return NULL;
}

/* Drops the record when nothing refers to it any more. Lock held. */
static void kp_wq_maybe_release(struct kp_workqueue *q, struct kp_wq_item *item)
{
    if (item->dirty || item->processing || item->delay_at || item->heap_refs || item->failures)
        return;
    (void)kp_map_remove(q->items, item->key);
    kp_free(item->key);
    kp_free(item);
}

/* The record for key, created when absent. NULL on -ENOMEM. Lock held. */
static struct kp_wq_item *kp_wq_item(struct kp_workqueue *q, const char *key)
{
    struct kp_wq_item *item = kp_map_get(q->items, key);

    if (item)
        return item;
    item = kp_calloc(1, sizeof(*item));
    if (!item)
        return NULL;
    item->key = kp_strdup(key);
    if (!item->key || kp_map_put(q->items, key, item, NULL) < 0) {
        kp_free(item->key);
        kp_free(item);
        return NULL;
    }
    kp_list_init(&item->link);
    return item;
}

/* Marks the record dirty and queues it unless a worker holds it. Lock held. */
static void kp_wq_mark_dirty(struct kp_workqueue *q, struct kp_wq_item *item)
{
    if (item->dirty)
        return;
    item->dirty = true;
    q->adds++;
    if (item->processing)
        return;
    item->queued = true;
    kp_list_add_tail(&q->ready, &item->link);
    q->nready++;
    pthread_cond_signal(&q->ready_cond);
}

int kp_workqueue_add(struct kp_workqueue *q, const char *key)
{
    struct kp_wq_item *item;
    int r = 0;

    pthread_mutex_lock(&q->lock);
    if (q->shutting_down) {
        r = -ESHUTDOWN;
        goto out;
    }
    item = kp_wq_item(q, key);
    if (!item) {
        r = -ENOMEM;
        goto out;
    }
    kp_wq_mark_dirty(q, item);
out:
    pthread_mutex_unlock(&q->lock);
    return r;
}

/* Heap order helpers. Lock held. */
static void kp_wq_heap_swap(struct kp_workqueue *q, size_t a, size_t b)
{
    struct kp_wq_delay t = q->heap[a];

    q->heap[a] = q->heap[b];
    q->heap[b] = t;
}

static int kp_wq_heap_push(struct kp_workqueue *q, uint64_t at, struct kp_wq_item *item)
{
    size_t i;

    if (q->nheap == q->heap_cap) {
        size_t cap = q->heap_cap ? q->heap_cap * 2 : 16;
        struct kp_wq_delay *h = kp_reallocarray(q->heap, cap, sizeof(*h));

        if (!h)
            return -ENOMEM;
        q->heap = h;
        q->heap_cap = cap;
    }
    i = q->nheap++;
    q->heap[i] = (struct kp_wq_delay){.at = at, .item = item};
    item->heap_refs++;
    while (i > 0 && q->heap[(i - 1) / 2].at > q->heap[i].at) {
        kp_wq_heap_swap(q, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return 0;
}

static struct kp_wq_delay kp_wq_heap_pop(struct kp_workqueue *q)
{
    struct kp_wq_delay top = q->heap[0];
    size_t i = 0;

    q->heap[0] = q->heap[--q->nheap];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;

        if (l < q->nheap && q->heap[l].at < q->heap[m].at)
            m = l;
        if (r < q->nheap && q->heap[r].at < q->heap[m].at)
            m = r;
        if (m == i)
            break;
        kp_wq_heap_swap(q, i, m);
        i = m;
    }
    top.item->heap_refs--;
    return top;
}

/* Schedules an add at monotonic time `at`. Lock held. */
static int kp_wq_schedule(struct kp_workqueue *q, struct kp_wq_item *item, uint64_t at)
{
    int r;

    if (item->delay_at && item->delay_at <= at)
        return 0; /* an earlier add is already pending */
    r = kp_wq_heap_push(q, at, item);
    if (r < 0)
        return r;
    item->delay_at = at;
    /* A sleeping getter may be waiting for a later time. */
    pthread_cond_broadcast(&q->ready_cond);
    return 0;
}

/* Moves every due delayed add to the ready list; returns the next pending time or 0. */
static uint64_t kp_wq_promote_due(struct kp_workqueue *q, uint64_t now)
{
    while (q->nheap > 0 && q->heap[0].at <= now) {
        struct kp_wq_delay d = kp_wq_heap_pop(q);

        if (d.item->delay_at == d.at) {
            d.item->delay_at = 0;
            kp_wq_mark_dirty(q, d.item);
        }
        kp_wq_maybe_release(q, d.item);
    }
    return q->nheap > 0 ? q->heap[0].at : 0;
}

int kp_workqueue_add_after(struct kp_workqueue *q, const char *key, uint64_t delay_usec)
{
    struct kp_wq_item *item;
    int r = 0;

    if (delay_usec == 0)
        return kp_workqueue_add(q, key);
    pthread_mutex_lock(&q->lock);
    if (q->shutting_down) {
        r = -ESHUTDOWN;
        goto out;
    }
    item = kp_wq_item(q, key);
    if (!item) {
        r = -ENOMEM;
        goto out;
    }
    r = kp_wq_schedule(q, item, kp_deadline_in(delay_usec).at);
    kp_wq_maybe_release(q, item);
out:
    pthread_mutex_unlock(&q->lock);
    return r;
}

/* The global bucket's delay for one more token, taking it. Lock held. */
static uint64_t kp_wq_bucket_reserve(struct kp_workqueue *q, uint64_t now)
{
    double wait;

    if (q->opts.qps < 0)
        return 0;
    q->tokens += (double)(now - q->bucket_usec) / (double)KP_USEC_PER_SEC * q->opts.qps;
    if (q->tokens > q->opts.burst)
        q->tokens = q->opts.burst;
    q->bucket_usec = now;
    q->tokens -= 1.0;
    if (q->tokens >= 0)
        return 0;
    wait = -q->tokens / q->opts.qps * (double)KP_USEC_PER_SEC;
    return (uint64_t)wait;
}

/* The key's backoff for its n-th failure: base * 2^n, capped. */
static uint64_t kp_wq_backoff(const struct kp_workqueue *q, unsigned failures)
{
    uint64_t d = q->opts.backoff_base_usec;

    for (unsigned i = 0; i < failures; i++) {
        if (d >= q->opts.backoff_cap_usec / 2)
            return q->opts.backoff_cap_usec;
        d *= 2;
    }
    return KP_MIN(d, q->opts.backoff_cap_usec);
}

int kp_workqueue_add_rate_limited(struct kp_workqueue *q, const char *key)
{
    struct kp_wq_item *item;
    uint64_t now, delay;
    int r = 0;

    pthread_mutex_lock(&q->lock);
    if (q->shutting_down) {
        r = -ESHUTDOWN;
        goto out;
    }
    item = kp_wq_item(q, key);
    if (!item) {
        r = -ENOMEM;
        goto out;
    }
    now = kp_mono_usec();
    delay = KP_MAX(kp_wq_backoff(q, item->failures), kp_wq_bucket_reserve(q, now));
    if (item->failures < UINT32_MAX)
        item->failures++;
    q->retries++;
    r = kp_wq_schedule(q, item, now + delay);
    if (r < 0)
        kp_wq_maybe_release(q, item);
out:
    pthread_mutex_unlock(&q->lock);
    return r;
}

void kp_workqueue_forget(struct kp_workqueue *q, const char *key)
{
    struct kp_wq_item *item;

    pthread_mutex_lock(&q->lock);
    item = kp_map_get(q->items, key);
    if (item) {
        item->failures = 0;
        kp_wq_maybe_release(q, item);
    }
    pthread_mutex_unlock(&q->lock);
}

unsigned kp_workqueue_failures(struct kp_workqueue *q, const char *key)
{
    struct kp_wq_item *item;
    unsigned n = 0;

    pthread_mutex_lock(&q->lock);
    item = kp_map_get(q->items, key);
    if (item)
        n = item->failures;
    pthread_mutex_unlock(&q->lock);
    return n;
}

int kp_workqueue_get(struct kp_workqueue *q, const char **ret_key)
{
    struct kp_wq_item *item;
    uint64_t next;
    int r = 0;

    pthread_mutex_lock(&q->lock);
    for (;;) {
        if (q->shutting_down) {
            r = -ESHUTDOWN;
            goto out;
        }
        next = kp_wq_promote_due(q, kp_mono_usec());
        if (q->nready > 0)
            break;
        (void)kp_cond_wait_deadline(&q->ready_cond, &q->lock,
                                    next == 0 ? kp_deadline_never()
                                              : (struct kp_deadline){.at = next});
    }
    item = KP_LIST_ENTRY(q->ready.next, struct kp_wq_item, link);
    kp_list_del(&item->link);
    q->nready--;
    item->queued = false;
    item->dirty = false;
    item->processing = true;
    q->nprocessing++;
    *ret_key = item->key;
out:
    pthread_mutex_unlock(&q->lock);
    return r;
}

void kp_workqueue_done(struct kp_workqueue *q, const char *key)
{
    struct kp_wq_item *item;

    pthread_mutex_lock(&q->lock);
    item = kp_map_get(q->items, key);
    if (item && item->processing) {
        item->processing = false;
        q->nprocessing--;
        /* Queued even while shutting down: get() hands out nothing then, and a reopened queue
         * serves it. Left out, the key would stay dirty and never queued, and every later add
         * would take it for queued already: wedged for good (a replica leading again). */
        if (item->dirty) {
            item->queued = true;
            kp_list_add_tail(&q->ready, &item->link);
            q->nready++;
            pthread_cond_signal(&q->ready_cond);
        }
        if (q->nprocessing == 0)
            pthread_cond_broadcast(&q->idle_cond);
        kp_wq_maybe_release(q, item);
    }
    pthread_mutex_unlock(&q->lock);
}

void kp_workqueue_shutdown(struct kp_workqueue *q)
{
    pthread_mutex_lock(&q->lock);
    q->shutting_down = true;
    pthread_cond_broadcast(&q->ready_cond);
    pthread_mutex_unlock(&q->lock);
}

void kp_workqueue_reopen(struct kp_workqueue *q)
{
    pthread_mutex_lock(&q->lock);
    q->shutting_down = false;
    pthread_mutex_unlock(&q->lock);
}

void kp_workqueue_wait_idle(struct kp_workqueue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->nprocessing > 0)
        pthread_cond_wait(&q->idle_cond, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

void kp_workqueue_get_stats(struct kp_workqueue *q, struct kp_workqueue_stats *ret)
{
    size_t delayed = 0, it = 0;
    void *v;

    pthread_mutex_lock(&q->lock);
    while (kp_map_next(q->items, &it, NULL, &v))
        if (((struct kp_wq_item *)v)->delay_at)
            delayed++;
    *ret = (struct kp_workqueue_stats){
        .depth = q->nready,
        .processing = q->nprocessing,
        .delayed = delayed,
        .adds = q->adds,
        .retries = q->retries,
    };
    pthread_mutex_unlock(&q->lock);
}
