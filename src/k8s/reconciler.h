/* k8s/reconciler.h: a controller's work loop: a work queue of object keys and a fixed number
 * of worker threads that call one reconcile function per key.
 *
 * Informer handlers (kp_reconciler_handler()) enqueue the key of every added, updated or
 * deleted object; other code may enqueue keys directly (a node-class edit fanning out to its
 * hosts). A worker takes a key, calls the reconcile function with its own client (cloned from
 * the one given to kp_reconciler_new, STYLE.md section 4) and acts on the answer:
 *
 *   0, requeue 0        done: the key's backoff is reset (it comes back on the next event)
 *   0, requeue N usec   done for now: the key comes back after N (periodic work: the probe)
 *   -KP_ECONFLICT       an optimistic lock was lost: the key comes back after the conflict
 *                       delay (1 s by default), without growing its backoff; logged at debug
 *   any other error     logged (rate-limited per key) and retried with the key's exponential
 *                       backoff; a requeue the function asked for is honoured when sooner
 *
 * The work queue guarantees one key is never reconciled by two workers at once, so a reconcile
 * function may assume it is alone with its object.
 *
 * Each call runs inside a log scope (base/log.h): every line it logs, in whatever module,
 * carries controller (the name), controllerGroup, controllerKind, namespace, name and a
 * reconcileID fresh for the call, as controller-runtime's reconcile logger does.
 *
 * Threads: kp_reconciler_new, start, stop and free on one thread (the controller's main
 * thread); enqueue and the handlers from any thread. */
#ifndef KP_K8S_RECONCILER_H
#define KP_K8S_RECONCILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "k8s/informer.h"

struct kp_client;
struct kp_ctx;
struct kp_reconciler;

/* Reconciles the object with this key ("ns/name" or "name"). c is the worker's own client.
 * cx is this call's context: done once the call is past its deadline (the reconcile timeout),
 * the reconciler is stopping, or the parent given in the options (the process's: SIGTERM, a
 * lost Lease) is cancelled; a reconcile that finds it done starts nothing new (no SSH job, no
 * write) and returns. It lives for the call only. *ret_requeue_usec starts at 0; set it to
 * come back later. */
typedef int (*kp_reconcile_fn)(void *ctx, struct kp_client *c, const struct kp_ctx *cx,
                               const char *key, uint64_t *ret_requeue_usec);

#define KP_RECONCILER_CONFLICT_DELAY_USEC (1000000ULL)
/* The deadline of one reconcile call. Reconciles make API calls (each bounded by the client's
 * request timeout) and never wait on SSH (that runs on the provider's job pool). */
#define KP_RECONCILER_TIMEOUT_USEC (60 * 1000000ULL)

struct kp_reconciler_opts {
    const char *name;  /* for logs and thread names: "sshhost", "sshnodeclass", ... */
    const char *group; /* the reconciled kind's API group ("" core) and kind, for the logs' */
    const char *kind;  /* controllerGroup and controllerKind; NULL leaves the key out */
    unsigned workers;  /* 0: 1 */
    kp_reconcile_fn reconcile;
    void *ctx;
    struct kp_client *client;                 /* cloned once per worker; must outlive new() only */
    uint64_t conflict_delay_usec;             /* 0: KP_RECONCILER_CONFLICT_DELAY_USEC */
    const struct kp_workqueue_options *queue; /* NULL: a per-key backoff of 5 ms .. 5 min */
    uint64_t timeout_usec;                    /* 0: KP_RECONCILER_TIMEOUT_USEC */
    const struct kp_ctx *parent; /* NULL or the context every reconcile runs under; borrowed:
                                  * must outlive every stop */
};

/* A stopped reconciler. opts is copied. 0, -EINVAL (no reconcile fn or client) or -ENOMEM. */
int kp_reconciler_new(const struct kp_reconciler_opts *opts, struct kp_reconciler **ret) KP_WUR;
/* Stops (if running) and frees; accepts and returns NULL. */
struct kp_reconciler *kp_reconciler_free(struct kp_reconciler *r);

/* Starts the workers. 0 or -errno (then nothing runs). */
int kp_reconciler_start(struct kp_reconciler *r) KP_WUR;
/* Cancels the context of the reconciles in progress, refuses new keys, lets each worker finish
 * the key in hand (which sees its context done), joins them. Idempotent. A stopped
 * reconciler may start again (a replica that lost its Lease and leads again): after the
 * workers are joined the queue takes keys again, and what it held (delayed periodic work
 * included) is served by the next start. */
void kp_reconciler_stop(struct kp_reconciler *r);
/* True between start and stop. Any thread. */
bool kp_reconciler_running(struct kp_reconciler *r);

/* Enqueues key now / after delay. 0 (after stop too: the key waits for the next start),
 * -ESHUTDOWN while stop runs, -ENOMEM. */
int kp_reconciler_enqueue(struct kp_reconciler *r, const char *key);
int kp_reconciler_enqueue_after(struct kp_reconciler *r, const char *key, uint64_t delay_usec);

/* Informer handlers that enqueue the key of every added, updated and deleted entry. */
struct kp_informer_handler kp_reconciler_handler(struct kp_reconciler *r);

/* Reconcile calls so far, and those that returned an error (tests, metrics). */
struct kp_reconciler_stats {
    uint64_t reconciles;
    uint64_t errors;
    uint64_t conflicts;
    size_t depth; /* keys ready or delayed */
};
void kp_reconciler_get_stats(struct kp_reconciler *r, struct kp_reconciler_stats *ret);

#endif
