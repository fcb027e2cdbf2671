/* k8s/events.h: Kubernetes Events (events.k8s.io/v1) with de-duplication into series and rate
 * limiting, so a reconciler can report what it does without flooding the API server.
 *
 *   kp_events_emit(ev, &(struct kp_event_ref){"SSHHost", "karpenter.kpssh.dev/v1beta1",
 *                  "kpssh-system", "h7", uid}, KP_EVENT_WARNING, "HostKeyMismatch",
 *                  "Probe", "host key changed: ...");
 *
 * Semantics:
 *  - The first occurrence of (object, type, reason, action, note) creates an Event.
 *  - Repeats within KP_EVENTS_SERIES_WINDOW_USEC become a series: the count grows locally and
 *    the Event's series {count, lastObservedTime} is patched at most every
 *    KP_EVENTS_SERIES_PATCH_USEC. A repeat after the window starts a new Event.
 *  - Per object, at most KP_EVENTS_BURST events may be written at once, refilled at one per
 *    KP_EVENTS_REFILL_USEC (client-go's spam filter figures); excess events are dropped and
 *    counted.
 *  - Notes pass through the log redactor (base/log.h): secrets never reach an Event.
 *  - kp_events_emit never blocks on the API server: it queues, and a worker thread writes.
 *    A full queue drops (counted).
 * Threads: kp_events_emit from any thread; one worker thread owned by the recorder. */
#ifndef KP_K8S_EVENTS_H
#define KP_K8S_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_client;
struct kp_events;

#define KP_EVENTS_SERIES_WINDOW_USEC (10 * 60 * 1000000ULL)
#define KP_EVENTS_SERIES_PATCH_USEC (30 * 1000000ULL)
#define KP_EVENTS_BURST 25
#define KP_EVENTS_REFILL_USEC (300 * 1000000ULL)
#define KP_EVENTS_QUEUE_MAX 1024
#define KP_EVENTS_NOTE_MAX 1024 /* the API server's limit for note */

enum kp_event_type {
    KP_EVENT_NORMAL,
    KP_EVENT_WARNING,
};

/* The object an event is about ("regarding"). Strings are copied by emit. */
struct kp_event_ref {
    const char *kind;
    const char *api_version;
    const char *ns; /* NULL or "" for cluster-scoped objects (their events go to "default") */
    const char *name;
    const char *uid;
};

struct kp_events_opts {
    const char *controller; /* reportingController, e.g. "karpenter.kpssh.dev/controller" */
    const char *instance;   /* reportingInstance, e.g. the pod name */
};

struct kp_events_stats {
    uint64_t created, patched, dropped_rate, dropped_queue, failed;
};

/* Starts a recorder writing through a clone of c. 0, -EINVAL, -ENOMEM or -errno. */
int kp_events_new(struct kp_client *c, const struct kp_events_opts *opts,
                  struct kp_events **ret) KP_WUR;
/* Writes what is queued (bounded by a few seconds), stops the worker, frees. NULL-tolerant. */
struct kp_events *kp_events_free(struct kp_events *ev);

/* Queues an event. Never blocks on I/O. 0, -ENOBUFS (queue full, dropped), -EINVAL or -ENOMEM.
 * Rate-limited drops return 0 (they are expected) and are counted. */
int kp_events_emit(struct kp_events *ev, const struct kp_event_ref *regarding,
                   enum kp_event_type type, const char *reason, const char *action,
                   const char *note);

/* Waits until the queue is empty and the worker idle, at most timeout_usec. 0 or -ETIMEDOUT. */
int kp_events_flush(struct kp_events *ev, uint64_t timeout_usec) KP_WUR;

void kp_events_get_stats(struct kp_events *ev, struct kp_events_stats *ret);

#endif
