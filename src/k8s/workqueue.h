/* k8s/workqueue.h: the controllers' work queue of object keys.
 *
 * Semantics (those controllers written against client-go expect):
 *  - A key is in the queue at most once: adding a queued key is a no-op (dedup).
 *  - A key is never handed to two workers at once: adding a key that a worker is processing
 *    marks it dirty, and kp_workqueue_done() puts it back in the queue afterwards.
 *  - kp_workqueue_add_after() delays an add; of several pending delays for a key the earliest
 *    wins.
 *  - kp_workqueue_add_rate_limited() delays by the larger of the key's exponential backoff
 *    (base * 2^failures, capped) and the global token bucket (qps, burst);
 *    kp_workqueue_forget() resets the key's backoff after a success.
 *  - kp_workqueue_shutdown() stops handing out work at once (getters return -ESHUTDOWN) and
 *    refuses adds; kp_workqueue_wait_idle() then waits for in-flight keys to be done.
 * Keys are copied. Every function may be called from any thread; the queue has one mutex and
 * never calls out while holding it. */
#ifndef KP_K8S_WORKQUEUE_H
#define KP_K8S_WORKQUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_workqueue;

struct kp_workqueue_options {
    uint64_t backoff_base_usec; /* first per-key retry delay (default 5 ms) */
    uint64_t backoff_cap_usec;  /* longest per-key retry delay (default 1000 s) */
    double qps;     /* global bucket refill rate (default 10); < 0 disables the bucket */
    unsigned burst; /* global bucket size (default 100) */
};

struct kp_workqueue_stats {
    size_t depth;      /* keys ready in the queue */
    size_t processing; /* keys handed out and not yet done */
    size_t delayed;    /* keys waiting for a delayed add */
    uint64_t adds;     /* add calls that queued or dirtied a key */
    uint64_t retries;  /* rate-limited adds */
};

/* opts may be NULL for the defaults; zero fields take the defaults. 0 or -ENOMEM. */
int kp_workqueue_new(const struct kp_workqueue_options *opts, struct kp_workqueue **ret) KP_WUR;
/* Frees the queue; call after shutdown and wait_idle. Accepts and returns NULL. */
struct kp_workqueue *kp_workqueue_free(struct kp_workqueue *q);

/* 0, -ESHUTDOWN after shutdown, or -ENOMEM. */
int kp_workqueue_add(struct kp_workqueue *q, const char *key) KP_WUR;
int kp_workqueue_add_after(struct kp_workqueue *q, const char *key, uint64_t delay_usec) KP_WUR;
int kp_workqueue_add_rate_limited(struct kp_workqueue *q, const char *key) KP_WUR;
/* Resets the key's backoff. */
void kp_workqueue_forget(struct kp_workqueue *q, const char *key);
/* Rate-limited adds of key since its last forget. */
unsigned kp_workqueue_failures(struct kp_workqueue *q, const char *key);

/* Blocks until a key is ready. *ret_key points at the queue's copy, valid until the caller
 * passes it to kp_workqueue_done(), which it must. 0 or -ESHUTDOWN. */
int kp_workqueue_get(struct kp_workqueue *q, const char **ret_key) KP_WUR;
/* Marks key finished; re-queues it if it was added while processing. */
void kp_workqueue_done(struct kp_workqueue *q, const char *key);

void kp_workqueue_shutdown(struct kp_workqueue *q);
/* Undoes kp_workqueue_shutdown() once no key is in flight (after kp_workqueue_wait_idle()):
 * adds and gets work again. Keys queued or delayed before the shutdown are still there, and so
 * is a key added again while a worker held it, when that worker finished after the shutdown. */
void kp_workqueue_reopen(struct kp_workqueue *q);
/* Waits until no key is being processed. */
void kp_workqueue_wait_idle(struct kp_workqueue *q);

void kp_workqueue_get_stats(struct kp_workqueue *q, struct kp_workqueue_stats *ret);

#endif
