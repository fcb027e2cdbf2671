/* k8s/informer.h: list + watch of one kind into a store of projections, with event handlers.
 *
 * An informer keeps a struct kp_store (k8s/store.h) equal to the server's state of one kind:
 * it lists (paginated, each page projected and dropped), then watches from the list's
 * resourceVersion, and relists when the watch says the version expired (410) or fails in a way
 * a reconnect cannot fix; while it must relist it is not synced. A LIST page over the response
 * body ceiling is asked for again with half the page size (k8s/client.h), and the informer
 * remembers the size reached for later lists. Objects that fail to project are skipped, logged
 * once per object and counted; the rest of the cache keeps working. Handlers run on the
 * informer's thread and must only enqueue keys (k8s/workqueue.h). An update whose projection
 * fingerprint is unchanged (only unprojected fields or the resourceVersion moved) calls no
 * handler, except during the first list after each start: a restarted informer (a replica that
 * leads again) announces every entry, as an update with old equal to new when nothing changed,
 * so controllers that stopped with work in hand see each object again.
 *
 * Threads: each informer runs one thread of its own (started by kp_informer_start) with its own
 * client. Store reads, kp_informer_synced and the stats are for any thread. */
#ifndef KP_K8S_INFORMER_H
#define KP_K8S_INFORMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "k8s/store.h"

typedef struct json_t json_t;
struct kp_client;
struct kp_resource;
struct kp_informer;

/* Projects one decoded object into a new entry (obj-<kind>.c). */
typedef int (*kp_project_fn)(const json_t *obj, struct kp_entry **ret);

struct kp_informer_opts {
    const struct kp_resource *res;
    kp_project_fn project;
    /* Optional: the kind tag project() stamps on its entries (api/obj.h kp_kind_*, compared
     * by address). When set, an entry of another kind aborts the process at once, and the
     * registry (k8s/registry.h) matches lookups on it. */
    const char *view_kind;
    const char *ns; /* NULL: all namespaces (or cluster-scoped) */
    const char *label_selector;
    const char *field_selector;
    uint32_t page_size;             /* largest page asked for; 0: the client's default. A page
                                     * over the body ceiling halves the size used (see
                                     * kp_informer_stats.page_size) */
    uint32_t watch_timeout_seconds; /* 0: k8s/watch.h's randomised default */
    uint64_t watch_idle_usec;       /* 0: k8s/watch.h's default (timeout + grace) */
};

/* Handlers; any may be NULL. Entries are borrowed for the call (take a reference to keep one). */
struct kp_informer_handler {
    void (*on_add)(void *ctx, const struct kp_entry *e);
    void (*on_update)(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e);
    void (*on_delete)(void *ctx, const struct kp_entry *old_e);
    void *ctx;
};

struct kp_informer_stats {
    uint64_t lists;       /* full lists done (the first one included) */
    uint64_t events;      /* watch events applied */
    uint64_t bad_objects; /* objects skipped because they did not project */
    uint64_t skipped;     /* updates that changed nothing projected */
    uint64_t desyncs;     /* times the informer fell out of sync to relist */
    uint32_t page_size;   /* page size the next list starts with */
    uint64_t list_usec;   /* wall time of the last complete list */
};

/* A stopped informer listing/watching through a clone of c (c must outlive the call only).
 * opts is copied. 0, -EINVAL or -ENOMEM. */
int kp_informer_new(struct kp_client *c, const struct kp_informer_opts *opts,
                    struct kp_informer **ret) KP_WUR;
/* Stops (if running) and frees; accepts and returns NULL. */
struct kp_informer *kp_informer_free(struct kp_informer *inf);

/* Before start only (-EBUSY after). Neither has a fixed limit: the handler array grows.
 * add_index: errors of kp_store_add_index; add_handler: 0, -EBUSY or -ENOMEM. */
int kp_informer_add_index(struct kp_informer *inf, const char *name, kp_index_fn fn) KP_WUR;
int kp_informer_add_handler(struct kp_informer *inf, const struct kp_informer_handler *h) KP_WUR;
/* Before start only: drops every handler whose ctx is ctx (a controller whose set-up failed
 * takes back what it added). 0 or -EBUSY. */
int kp_informer_remove_handlers(struct kp_informer *inf, const void *ctx);

/* Starts the thread. 0 or -errno. */
int kp_informer_start(struct kp_informer *inf) KP_WUR;
/* Asks the thread to stop and joins it. Idempotent. The store keeps what it held, but the
 * informer is no longer synced: a later kp_informer_start() lists afresh, announces every
 * entry to the handlers (see above) and syncs again. */
void kp_informer_stop(struct kp_informer *inf);
/* Asks a running informer's thread to stop, without waiting: its request in progress notices
 * within about a second (curl's progress callback), so a caller stopping several informers
 * cancels them all first and then stops (joins) each, and their ends overlap. Idempotent;
 * kp_informer_stop must still follow. The starting thread. */
void kp_informer_cancel(struct kp_informer *inf);

/* True while the store reflects a complete list and the watch that followed it: false until
 * the first list has been applied in full, false again from the moment the informer must list
 * anew (410 Gone, a watch failure that a reconnect cannot fix) until that list completes. Each
 * change is logged once with the kind. Any thread. */
bool kp_informer_synced(struct kp_informer *inf);
/* The kind of the informer's resource ("Pod"); static. Any thread. */
const char *kp_informer_kind(const struct kp_informer *inf);
/* What the informer was made with: its view kind tag (NULL when none was given), projection,
 * resource and namespace (NULL: all). Any thread. */
const char *kp_informer_view_kind(const struct kp_informer *inf);
kp_project_fn kp_informer_project(const struct kp_informer *inf);
const struct kp_resource *kp_informer_resource(const struct kp_informer *inf);
const char *kp_informer_namespace(const struct kp_informer *inf);
/* Handlers registered now (tests: a failed set-up must leave none behind). Main thread. */
size_t kp_informer_handler_count(const struct kp_informer *inf);
/* Waits until synced (the current state: after a fall out of sync, until the relist is done),
 * at most timeout_usec. 0 or -ETIMEDOUT. */
int kp_informer_wait_synced(struct kp_informer *inf, uint64_t timeout_usec) KP_WUR;

/* The store (owned by the informer; valid until it is freed). */
struct kp_store *kp_informer_store(struct kp_informer *inf);
void kp_informer_get_stats(struct kp_informer *inf, struct kp_informer_stats *ret);

/* Applies one object as the watch or list would (tests and the fault tier drive this). */
enum kp_informer_op { KP_INFORMER_UPSERT, KP_INFORMER_DELETE };
int kp_informer_apply(struct kp_informer *inf, enum kp_informer_op op, const json_t *obj) KP_WUR;

#endif
