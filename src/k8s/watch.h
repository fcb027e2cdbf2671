/* k8s/watch.h: Kubernetes watch streams.
 *
 * Three layers, each usable alone:
 *   - the framer: bytes of a watch body in arbitrary splits -> complete event lines, each
 *     bounded by KP_MAX_WATCH_FRAME (pure, fuzzed by tests/fuzz/fuzz-watch-frame.c);
 *   - the event decoder: one line -> type + object (pure);
 *   - struct kp_watch: a watch that keeps going. It tracks the last resourceVersion (from events
 *     and bookmarks), asks for bookmarks, sets a randomised server-side timeout (5-10 minutes,
 *     like client-go) plus a client idle deadline so a silently dead stream is noticed, and
 *     reconnects with jittered backoff after errors and after the server closes the stream. When
 *     the resourceVersion is too old (410 Gone / Expired, as an HTTP status or an ERROR event) it
 *     stops with -KP_EEXPIRED: the caller relists and calls kp_watch_set_resource_version().
 *
 * Threads: a struct kp_watch and the client it uses belong to one thread; the handler runs on it.
 * Only the cancel flag may be set from another thread. */
#ifndef KP_K8S_WATCH_H
#define KP_K8S_WATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/macro.h"

typedef struct json_t json_t;
struct kp_client;
struct kp_error;
struct kp_resource;
struct kp_watch;

/* Ceiling of one watch event line. etcd refuses values over 1.5 MiB; an event wraps one object,
 * so 4 MiB leaves room for JSON escaping and managedFields. */
#define KP_MAX_WATCH_FRAME (4u << 20)

/* Server-side watch timeout, drawn uniformly per request (client-go: 5-10 minutes). */
#define KP_WATCH_TIMEOUT_MIN_SEC 300
#define KP_WATCH_TIMEOUT_MAX_SEC 600
/* The idle deadline beyond the server-side timeout: a stream silent for longer than
 * timeoutSeconds plus this is dead (the server would have closed it). */
#define KP_WATCH_IDLE_GRACE_USEC (30 * 1000000ULL)
/* Reconnect backoff after errors. */
#define KP_WATCH_BACKOFF_BASE_USEC (800 * 1000ULL)
#define KP_WATCH_BACKOFF_CAP_USEC (30 * 1000000ULL)

/* --- framer --------------------------------------------------------------------------------- */

struct kp_watch_framer {
    struct kp_buf line; /* an incomplete line carried over between chunks */
};

/* Receives one complete line (without its '\n' or a trailing '\r'; never empty). The bytes are
 * valid during the call only. 0 to go on, a negative error to stop. */
typedef int (*kp_watch_line_fn)(const char *p, size_t n, void *userdata);

/* max_frame 0: KP_MAX_WATCH_FRAME. No allocation. */
void kp_watch_framer_init(struct kp_watch_framer *f, size_t max_frame);
void kp_watch_framer_done(struct kp_watch_framer *f);

/* Feeds n bytes and calls fn for each line they complete. Lines that lie wholly inside the
 * chunk are handed over without copying. 0, fn's error, -KP_ELIMIT (a line longer than the
 * ceiling; the framer is then reset and the stream must be abandoned) or -ENOMEM. */
int kp_watch_framer_feed(struct kp_watch_framer *f, const char *p, size_t n, kp_watch_line_fn fn,
                         void *userdata) KP_WUR;

/* True when an incomplete line is buffered (a stream that ended here was cut). */
bool kp_watch_framer_pending(const struct kp_watch_framer *f);

/* --- events --------------------------------------------------------------------------------- */

enum kp_watch_event_type {
    KP_WATCH_ADDED,
    KP_WATCH_MODIFIED,
    KP_WATCH_DELETED,
    KP_WATCH_BOOKMARK,
    KP_WATCH_ERROR,
};

struct kp_watch_event {
    enum kp_watch_event_type type;
    json_t *object;               /* owned by the event; the handler borrows it */
    const char *resource_version; /* object's metadata.resourceVersion (borrowed), or NULL */
};

/* Decodes one event line {"type": ..., "object": {...}}. 0, -KP_EPARSE (not an event, unknown
 * type, object missing or not an object, ADDED/MODIFIED/DELETED/BOOKMARK without
 * metadata.resourceVersion), -KP_ELIMIT (n > KP_MAX_WATCH_FRAME or too deep) or -ENOMEM.
 * *ret written on success only; release with kp_watch_event_done(). Pure. */
int kp_watch_event_decode(const char *p, size_t n, struct kp_watch_event *ret) KP_WUR;
void kp_watch_event_done(struct kp_watch_event *ev);

/* The name of an event type ("ADDED", ...). */
const char *kp_watch_event_type_name(enum kp_watch_event_type t);

/* --- watch ---------------------------------------------------------------------------------- */

struct kp_watch_opts {
    const char *label_selector;
    const char *field_selector;
    const char *resource_version; /* where to start (from a list); NULL or "": now */
    bool no_bookmarks;            /* bookmarks are requested unless set */
    uint32_t timeout_seconds;     /* 0: random in [KP_WATCH_TIMEOUT_MIN_SEC, ..._MAX_SEC] */
    uint64_t idle_usec;           /* 0: timeout_seconds + KP_WATCH_IDLE_GRACE_USEC */
    const atomic_bool *cancel;    /* optional; checked about once a second */
};

/* Receives each ADDED, MODIFIED, DELETED and BOOKMARK event in order (ERROR events are handled
 * by the watch). The resourceVersion is recorded after the handler returns 0, so an event the
 * handler refused is delivered again after a reconnect. 0 to go on, a negative error to stop. */
typedef int (*kp_watch_event_fn)(const struct kp_watch_event *ev, void *userdata);

/* Creates a watch of res in ns (NULL: all namespaces / cluster-scoped) on client c, which must
 * outlive it. opts is copied. 0, -EINVAL or -ENOMEM. */
int kp_watch_new(struct kp_client *c, const struct kp_resource *res, const char *ns,
                 const struct kp_watch_opts *opts, struct kp_watch **ret) KP_WUR;
struct kp_watch *kp_watch_free(struct kp_watch *w);

/* The last resourceVersion delivered (or set), NULL when none. Valid until the next call. */
const char *kp_watch_resource_version(const struct kp_watch *w);
/* Continue from rv (after a relist). 0 or -ENOMEM. */
int kp_watch_set_resource_version(struct kp_watch *w, const char *rv) KP_WUR;

/* One watch request: streams events to fn until the server ends the stream (0), the idle
 * deadline passes (-ETIMEDOUT), the resourceVersion has expired (-KP_EEXPIRED), fn fails (its
 * error), the stream breaks or the request fails (mapped errors as in k8s/client.h), or cancel
 * (-ECANCELED). *ret_events (optional) counts the events delivered. reterr as in client.h. */
int kp_watch_once(struct kp_watch *w, kp_watch_event_fn fn, void *userdata, size_t *ret_events,
                  struct kp_error *reterr) KP_WUR;

/* Watches until something only the caller can handle: reconnects after the server closes the
 * stream (at once, unless it closed within a second without an event) and after retryable failures (connection errors, timeouts, idle deadline,
 * 429/5xx, a cut or oversized frame: jittered exponential backoff, honouring Retry-After).
 * Returns -KP_EEXPIRED (relist, set the resourceVersion, call again), -ECANCELED, fn's error,
 * or a failure that retrying cannot fix (-KP_EFORBIDDEN, -KP_EUNAUTHORIZED, -ENOENT, -EINVAL,
 * -KP_EAUTH, ...). */
int kp_watch_run(struct kp_watch *w, kp_watch_event_fn fn, void *userdata,
                 struct kp_error *reterr) KP_WUR;

#endif
