/* k8s/controller.h: the skeleton every controller is built on: a reconciler (k8s/reconciler.h),
 * the informer handlers that feed it, the informers its readiness waits for, and the event
 * recorder it reports with.
 *
 * A controller's new() makes one with kp_controller_new(), then registers what it reads:
 *
 *   kp_controller_watch_keys(base, inf)     enqueue the key of every event of inf
 *   kp_controller_watch(base, inf, &h)      h's callbacks (fan-out to other keys)
 *   kp_controller_read(base, inf)           inf is read from the cache only
 *   kp_controller_add_index(base, inf, ...) an index the controller's lookups use
 *
 * Every informer named by these counts for readiness: kp_controller_ready() is true while the
 * controller is started, its workers run and each of those informers is synced. On a failed
 * registration the controller's new() frees the skeleton, which takes back every handler it
 * added (kp_informer_remove_handlers by each handler's ctx), so a failed set-up leaves nothing
 * behind in the shared informers. Indexes are not taken back: a store cannot drop one, and an
 * index is harmless (and shared) without its controller.
 *
 * Start makes the event recorder when the options ask for one and give none (reportingInstance:
 * the host name, which is the pod name in a pod), then starts the workers; stop joins them and
 * leaves the queue for a later start (a replica that leads again). Free runs in reverse: stop,
 * handlers out of the informers, reconciler, own recorder.
 *
 * Threads: new, the registrations, start, stop and free on the main thread, before the
 * informers start (registrations) and after they have stopped (free: their handlers point
 * here). ready() from any thread. */
#ifndef KP_K8S_CONTROLLER_H
#define KP_K8S_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"
#include "k8s/informer.h"
#include "k8s/reconciler.h"

struct kp_client;
struct kp_controller;
struct kp_events;
struct kp_workqueue_options;

struct kp_controller_opts {
    const char *name;         /* the reconciler's, for logs and threads: "sshhost" */
    const char *group;        /* the reconciled kind's API group ("" for core), for logs */
    const char *kind;         /* the reconciled kind ("SSHHost"), for logs */
    struct kp_client *client; /* cloned per worker (and for the own recorder); must outlive
                               * start() */
    kp_reconcile_fn reconcile;
    void *ctx;        /* reconcile's ctx: the controller that embeds this skeleton */
    unsigned workers; /* 0: 1 */
    /* The context each reconcile's runs under (reconciler.h; borrowed, must outlive the
     * skeleton), e.g. the process's; NULL: none. */
    const struct kp_ctx *parent;
    /* The deadline of one reconcile call (reconciler.h); 0: KP_RECONCILER_TIMEOUT_USEC. A
     * controller whose reconciles wait on a provider (a launch that joins a host) sets more. */
    uint64_t timeout_usec;
    /* The queue's per-key backoff and global bucket (k8s/workqueue.h; copied at new()); NULL:
     * the reconciler's default. */
    const struct kp_workqueue_options *queue;
    /* The recorder: events if given (borrowed); else, when events_component is set, one the
     * skeleton makes at the first start with that reportingController; else none. */
    struct kp_events *events;
    const char *events_component;
};

/* A stopped skeleton with no registrations. opts is copied (its strings must be static or
 * outlive the skeleton). 0, -EINVAL (no name, client or reconcile) or -ENOMEM. */
int kp_controller_new(const struct kp_controller_opts *o, struct kp_controller **ret) KP_WUR;
/* Stops, takes its handlers back out of the informers, frees; accepts and returns NULL.
 * The informers must have stopped (kp_registry_stop()): aborts on one still running. */
struct kp_controller *kp_controller_free(struct kp_controller *ctl);

/* Registrations, before the informers start. Each returns 0, -EBUSY (the informer has started:
 * its handlers and indexes are fixed), -ENOMEM, or the errors named. */
int kp_controller_watch_keys(struct kp_controller *ctl, struct kp_informer *inf) KP_WUR;
int kp_controller_watch(struct kp_controller *ctl, struct kp_informer *inf,
                        const struct kp_informer_handler *h) KP_WUR;
int kp_controller_read(struct kp_controller *ctl, struct kp_informer *inf) KP_WUR;
/* Adds index name to inf, or accepts the one already there when it has the same function (two
 * controllers sharing an index). -EEXIST when inf has an index of that name with another
 * function. */
int kp_controller_add_index(struct kp_controller *ctl, struct kp_informer *inf, const char *name,
                            kp_index_fn fn) KP_WUR;

/* Makes the recorder if due (first start), then starts the workers. 0 (also when started) or
 * -errno (then nothing runs). */
int kp_controller_start(struct kp_controller *ctl) KP_WUR;
/* Lets the workers finish the key in hand and joins them. Idempotent; startable again. */
void kp_controller_stop(struct kp_controller *ctl);
/* Started, workers running, and every registered informer synced. Any thread; NULL: false. */
bool kp_controller_ready(struct kp_controller *ctl);

/* The reconciler (enqueue from handlers) and the recorder (NULL before the first start when
 * the skeleton makes its own, and when there is none). Borrowed. */
struct kp_reconciler *kp_controller_reconciler(struct kp_controller *ctl);
struct kp_events *kp_controller_events(struct kp_controller *ctl);

#endif
