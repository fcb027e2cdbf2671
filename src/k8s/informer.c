/* DESIGN: informer (see informer.h).
 *
 * Loop of the informer thread:
 *   1. LIST page by page; project each item and publish it; remember its key in `seen`. A list
 *      restarted after an expired continue token starts `seen` afresh.
 *   2. Delete from the store every key the list did not return (deleted while unwatched).
 *   3. Mark synced; WATCH from the list's resourceVersion, applying events as they come.
 *   4. On 410 (-KP_EEXPIRED) go to 1 at once; on other failures wait (jittered backoff) and go
 *      to 1, since a watch that cannot continue leaves the cache possibly behind. Either way the
 *      informer is marked out of sync first: its cache may miss changes until the relist is
 *      done, and readiness (kp_informer_synced) must say so. Each change of `synced` is logged
 *      once, with the kind.
 *
 * Page size: a page over the response body ceiling makes kp_client_list() halve the page size
 * and ask again from the same position (k8s/client.c). The informer keeps the size that list
 * reached as its own page size for later lists, so a relist does not pay again for the pages it
 * had to throw away (up to 32 MiB each). It grows back slowly: after a list whose pages all
 * stayed under a quarter of the ceiling it doubles, up to opts.page_size, so a page at the new
 * size most likely stays under half of it; after any list that had to shrink it stays put. A
 * single object over the ceiling cannot be listed at all: that is logged as an error and
 * retried with the usual backoff (the API server's own limits make it rare: etcd refuses
 * objects over 1.5 MiB by default).
 *
 * Bad objects: a projection that fails is counted and logged once per key (a small set of keys
 * already reported, cleared when the object projects again or is deleted); an existing entry for
 * that key is kept, since a stale view is safer for CAS-guarded writers than a vanished one.
 *
 * XXX: STYLE.md section 4 plans one curl multi handle for every LIST and WATCH; each informer
 * has a thread and an easy handle instead, which is simpler and costs one thread per watched
 * kind (about ten). Revisit if the thread count matters.
 *
 * Threads: the informer thread owns the client, the watch and the bad-key set; `lock` guards
 * synced and the stats for readers; the store has its own lock. */
#include "k8s/informer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/status.h"
#include "k8s/watch.h"

/* Bad keys remembered for log-once; past this the set is cleared (and may log again). */
#define KP_INFORMER_MAX_BAD_KEYS 4096

struct kp_informer {
    struct kp_informer_opts opts;
    char *ns, *label_selector, *field_selector; /* owned copies of the opts strings */
    struct kp_client *client;
    struct kp_store *store;
    struct kp_informer_handler *handlers; /* grown before start; read by the informer thread */
    size_t nhandlers, handlers_cap;
    struct kp_map *bad_keys; /* informer thread only */
    pthread_t thread;
    bool running;
    atomic_bool cancel;
    pthread_mutex_t lock;
    pthread_cond_t synced_cond;
    bool synced;
    struct kp_informer_stats stats; /* stats.page_size: written by the informer thread */
    uint32_t page_max;              /* opts.page_size or the client's default */
    /* Set by start, cleared by the informer thread once a list is in: until then an unchanged
     * entry is announced anyway (see kp_informer_start). */
    bool replay;
};

static char *kp_dup_opt(const char *s, int *r)
{
    char *d;

    if (!s)
        return NULL;
    d = kp_strdup(s);
    if (!d)
        *r = -ENOMEM;
    return d;
}

int kp_informer_new(struct kp_client *c, const struct kp_informer_opts *opts,
                    struct kp_informer **ret)
{
    struct kp_informer *inf;
    int r = 0;

    if (!opts || !opts->res || !opts->project)
        return -EINVAL;
    inf = kp_calloc(1, sizeof(*inf));
    if (!inf)
        return -ENOMEM;
    inf->opts = *opts;
    inf->ns = kp_dup_opt(opts->ns, &r);
    inf->label_selector = kp_dup_opt(opts->label_selector, &r);
    inf->field_selector = kp_dup_opt(opts->field_selector, &r);
    inf->opts.ns = inf->ns;
    inf->opts.label_selector = inf->label_selector;
    inf->opts.field_selector = inf->field_selector;
    if (r == 0)
        r = kp_client_clone(c, &inf->client);
    if (r == 0)
        r = kp_store_new(&inf->store);
    if (r == 0)
        r = kp_map_new(&inf->bad_keys);
    if (r == 0)
        r = kp_cond_init_monotonic(&inf->synced_cond);
    if (r < 0) {
        kp_map_free(inf->bad_keys);
        kp_store_free(inf->store);
        kp_client_free(inf->client);
        kp_free(inf->ns);
        kp_free(inf->label_selector);
        kp_free(inf->field_selector);
        kp_free(inf);
        return r;
    }
    atomic_init(&inf->cancel, false);
    pthread_mutex_init(&inf->lock, NULL);
    inf->page_max = opts->page_size ? opts->page_size : KP_CLIENT_LIST_LIMIT;
    inf->stats.page_size = inf->page_max;
    *ret = inf;
    return 0;
}

struct kp_informer *kp_informer_free(struct kp_informer *inf)
{
    if (!inf)
        return NULL;
    kp_informer_stop(inf);
    kp_map_free(inf->bad_keys);
    kp_store_free(inf->store);
    kp_client_free(inf->client);
    kp_free(inf->handlers);
    kp_free(inf->ns);
    kp_free(inf->label_selector);
    kp_free(inf->field_selector);
    pthread_cond_destroy(&inf->synced_cond);
    pthread_mutex_destroy(&inf->lock);
    kp_free(inf);
    return NULL;
}

int kp_informer_add_index(struct kp_informer *inf, const char *name, kp_index_fn fn)
{
    if (inf->running)
        return -EBUSY;
    return kp_store_add_index(inf->store, name, fn);
}

int kp_informer_add_handler(struct kp_informer *inf, const struct kp_informer_handler *h)
{
    if (inf->running)
        return -EBUSY;
    {
        struct kp_informer_handler *v =
            kp_grow_array(inf->handlers, &inf->handlers_cap, inf->nhandlers, sizeof(*v), 8);

        if (!v)
            return -ENOMEM;
        inf->handlers = v;
    }
    inf->handlers[inf->nhandlers++] = *h;
    return 0;
}

int kp_informer_remove_handlers(struct kp_informer *inf, const void *ctx)
{
    size_t i, n = 0;

    if (inf->running)
        return -EBUSY;
    for (i = 0; i < inf->nhandlers; i++)
        if (inf->handlers[i].ctx != ctx)
            inf->handlers[n++] = inf->handlers[i];
    inf->nhandlers = n;
    return 0;
}

struct kp_store *kp_informer_store(struct kp_informer *inf)
{
    return inf->store;
}

bool kp_informer_synced(struct kp_informer *inf)
{
    bool s;

    pthread_mutex_lock(&inf->lock);
    s = inf->synced;
    pthread_mutex_unlock(&inf->lock);
    return s;
}

const char *kp_informer_kind(const struct kp_informer *inf)
{
    return inf->opts.res->kind;
}

const char *kp_informer_view_kind(const struct kp_informer *inf)
{
    return inf->opts.view_kind;
}

kp_project_fn kp_informer_project(const struct kp_informer *inf)
{
    return inf->opts.project;
}

const struct kp_resource *kp_informer_resource(const struct kp_informer *inf)
{
    return inf->opts.res;
}

const char *kp_informer_namespace(const struct kp_informer *inf)
{
    return inf->opts.ns;
}

size_t kp_informer_handler_count(const struct kp_informer *inf)
{
    return inf->nhandlers;
}

int kp_informer_wait_synced(struct kp_informer *inf, uint64_t timeout_usec)
{
    struct kp_deadline d = kp_deadline_in(timeout_usec);
    int r = 0;

    pthread_mutex_lock(&inf->lock);
    while (!inf->synced) {
        if (kp_cond_wait_deadline(&inf->synced_cond, &inf->lock, d) == -ETIMEDOUT) {
            r = inf->synced ? 0 : -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&inf->lock);
    return r;
}

void kp_informer_get_stats(struct kp_informer *inf, struct kp_informer_stats *ret)
{
    pthread_mutex_lock(&inf->lock);
    *ret = inf->stats;
    pthread_mutex_unlock(&inf->lock);
}

static void kp_informer_count(struct kp_informer *inf, uint64_t *field)
{
    pthread_mutex_lock(&inf->lock);
    (*field)++;
    pthread_mutex_unlock(&inf->lock);
}

/* "ns/name" or "name" of a raw object, for objects that do not project. NULL when absent. */
static char *kp_informer_raw_key(const json_t *obj)
{
    const char *ns = NULL, *name = NULL;

    if (kp_json_path_str(obj, "metadata.name", &name) < 0)
        return NULL;
    if (kp_json_path_str(obj, "metadata.namespace", &ns) < 0 || !*ns)
        return kp_strdup(name);
    return kp_strjoin(ns, "/", name, (char *)NULL);
}

static void kp_informer_bad(struct kp_informer *inf, const json_t *obj, int r)
{
    char *key = kp_informer_raw_key(obj);

    kp_informer_count(inf, &inf->stats.bad_objects);
    if (key && kp_map_contains(inf->bad_keys, key)) {
        kp_free(key);
        return;
    }
    kp_log_warn("skipping an object that does not decode", KP_LF("kind", inf->opts.res->kind),
                KP_LF("object", key ? key : "(unnamed)"), KP_LF("error", kp_strerror(r)));
    if (key) {
        if (kp_map_size(inf->bad_keys) >= KP_INFORMER_MAX_BAD_KEYS) {
            kp_map_free(inf->bad_keys);
            inf->bad_keys = NULL;
            if (kp_map_new(&inf->bad_keys) < 0)
                inf->bad_keys = NULL;
        }
        if (!inf->bad_keys || kp_map_put(inf->bad_keys, key, (void *)1, NULL) < 0)
            kp_log_debug("bad-key set full; the object may be reported again");
    }
    kp_free(key);
}

static void kp_informer_forget_bad(struct kp_informer *inf, const char *key)
{
    if (inf->bad_keys)
        (void)kp_map_remove(inf->bad_keys, key);
}

static void kp_informer_notify(struct kp_informer *inf, const struct kp_entry *old_e,
                               const struct kp_entry *new_e)
{
    for (size_t i = 0; i < inf->nhandlers; i++) {
        const struct kp_informer_handler *h = &inf->handlers[i];

        if (!old_e && new_e && h->on_add)
            h->on_add(h->ctx, new_e);
        else if (old_e && new_e && h->on_update)
            h->on_update(h->ctx, old_e, new_e);
        else if (old_e && !new_e && h->on_delete)
            h->on_delete(h->ctx, old_e);
    }
}

/* Publishes a projection of obj and tells the handlers, unless it equals the stored entry. During
 * a relist, seen collects the key (a bad object's too, so its last good entry is kept). An
 * object that does not project is counted and logged once, never fatal; only -ENOMEM is. */
static int kp_informer_upsert(struct kp_informer *inf, const json_t *obj, struct kp_map *seen)
{
    struct kp_entry *e = NULL, *old = NULL;
    int r;

    r = inf->opts.project(obj, &e);
    if (r == -ENOMEM)
        return r;
    if (r == 0 && inf->opts.view_kind && e->kind != inf->opts.view_kind) {
        /* The informer was built with a projection of another kind than it says it holds:
         * readers would take its entries for the wrong view. A programmer error: stop here. */
        kp_log_error("informer projected an entry of the wrong kind",
                     KP_LF("kind", inf->opts.res->kind), KP_LF("view", inf->opts.view_kind),
                     KP_LF("entry_kind", e->kind ? e->kind : "(none)"));
        abort();
    }
    if (r < 0) {
        kp_informer_bad(inf, obj, r);
        /* Keep a previously good entry: mark it seen so a relist does not drop it. */
        if (seen) {
            char *key = kp_informer_raw_key(obj);

            if (key && kp_map_put(seen, key, (void *)1, NULL) < 0)
                r = -ENOMEM;
            kp_free(key);
            if (r == -ENOMEM)
                return r;
        }
        return 0;
    }
    if (seen && (r = kp_map_put(seen, e->key, (void *)1, NULL)) < 0) {
        kp_entry_unref(e);
        return r;
    }
    kp_informer_forget_bad(inf, e->key);
    kp_entry_ref(e); /* one for the store, one for the handlers below */
    r = kp_store_put(inf->store, e, &old);
    if (r < 0) {
        kp_entry_unref(e);
        kp_entry_unref(e);
        return r;
    }
    if (old && old->hash == e->hash &&
        strcmp(old->uid ? old->uid : "", e->uid ? e->uid : "") == 0 && !(seen && inf->replay))
        kp_informer_count(inf, &inf->stats.skipped);
    else
        kp_informer_notify(inf, old, e);
    kp_entry_unref(old);
    kp_entry_unref(e);
    return 0;
}

static int kp_informer_delete_key(struct kp_informer *inf, const char *key)
{
    struct kp_entry *old = NULL;

    kp_informer_forget_bad(inf, key);
    if (kp_store_delete(inf->store, key, &old) < 0)
        return 0; /* never had it (it never projected, or a relist already dropped it) */
    kp_informer_notify(inf, old, NULL);
    kp_entry_unref(old);
    return 0;
}

int kp_informer_apply(struct kp_informer *inf, enum kp_informer_op op, const json_t *obj)
{
    char *key;
    int r;

    if (op == KP_INFORMER_UPSERT)
        return kp_informer_upsert(inf, obj, NULL);
    key = kp_informer_raw_key(obj);
    if (!key)
        return -KP_EPARSE;
    r = kp_informer_delete_key(inf, key);
    kp_free(key);
    return r;
}

/* --- list ----------------------------------------------------------------------------------- */

struct kp_list_ctx {
    struct kp_informer *inf;
    struct kp_map *seen;
    uint32_t limit;        /* smallest page size a page was asked for */
    size_t max_body_bytes; /* largest page body */
};

static int kp_informer_page(const struct kp_list_page *page, void *userdata)
{
    struct kp_list_ctx *lc = userdata;
    size_t n = kp_json_array_size(page->items);
    int r;

    lc->limit = KP_MIN(lc->limit, page->limit);
    lc->max_body_bytes = KP_MAX(lc->max_body_bytes, page->body_bytes);

    if (page->restarted) {
        struct kp_map *fresh = NULL;

        r = kp_map_new(&fresh);
        if (r < 0)
            return r;
        kp_map_free(lc->seen);
        lc->seen = fresh;
    }
    for (size_t i = 0; i < n; i++) {
        r = kp_informer_upsert(lc->inf, kp_json_array_at(page->items, i), lc->seen);
        if (r < 0)
            return r;
    }
    return 0;
}

static uint32_t kp_informer_page_size(struct kp_informer *inf)
{
    uint32_t n;

    pthread_mutex_lock(&inf->lock);
    n = inf->stats.page_size;
    pthread_mutex_unlock(&inf->lock);
    return n;
}

/* Picks the page size of the next list from what this one saw (DESIGN above). r: the list's
 * result; -KP_ELIMIT means halving got to one object per page and that was still too big. */
static void kp_informer_adapt_page(struct kp_informer *inf, uint32_t asked,
                                   const struct kp_list_ctx *lc, int r)
{
    bool complete = r == 0;
    uint32_t next = asked;

    if (r == -KP_ELIMIT && asked > 1) {
        next = 1;
        kp_log_warn("list page over the response body ceiling; page size reduced",
                    KP_LF("kind", inf->opts.res->kind), KP_LF("page_size", (unsigned)next),
                    KP_LF("was", (unsigned)asked));
    } else if (lc->limit < asked) {
        next = lc->limit;
        kp_log_warn("list page over the response body ceiling; page size reduced",
                    KP_LF("kind", inf->opts.res->kind), KP_LF("page_size", (unsigned)next),
                    KP_LF("was", (unsigned)asked));
    } else if (complete && asked < inf->page_max &&
               lc->max_body_bytes <= kp_transport_max_body(kp_client_transport(inf->client)) / 4) {
        next = asked > inf->page_max / 2 ? inf->page_max : asked * 2;
        kp_log_info("list pages small again; page size raised", KP_LF("kind", inf->opts.res->kind),
                    KP_LF("page_size", (unsigned)next));
    }
    pthread_mutex_lock(&inf->lock);
    inf->stats.page_size = next;
    pthread_mutex_unlock(&inf->lock);
}

/* Lists everything and reconciles the store with it. *ret_rv: the list's resourceVersion. */
static int kp_informer_relist(struct kp_informer *inf, char **ret_rv, struct kp_error *err)
{
    uint32_t asked = kp_informer_page_size(inf);
    struct kp_list_opts lo = {
        .label_selector = inf->opts.label_selector,
        .field_selector = inf->opts.field_selector,
        .limit = asked,
    };
    struct kp_list_ctx lc = {.inf = inf, .limit = asked};
    struct kp_strv gone = KP_STRV_INIT;
    uint64_t t0 = kp_mono_usec();
    char *rv = NULL;
    int r;

    r = kp_map_new(&lc.seen);
    if (r < 0)
        return r;
    r = kp_client_list(inf->client, inf->opts.res, inf->opts.ns, &lo, kp_informer_page, &lc, &rv,
                       err);
    /* A failed list keeps what it learnt about the page size too: the retry starts there. */
    kp_informer_adapt_page(inf, asked, &lc, r);
    if (r < 0)
        goto out;
    r = kp_store_keys_not_in(inf->store, lc.seen, &gone);
    if (r < 0)
        goto out;
    for (size_t i = 0; i < gone.n; i++)
        (void)kp_informer_delete_key(inf, gone.v[i]);
    pthread_mutex_lock(&inf->lock);
    inf->stats.lists++;
    inf->stats.list_usec = kp_mono_usec() - t0;
    pthread_mutex_unlock(&inf->lock);
    *ret_rv = rv;
    rv = NULL;
out:
    kp_strv_done(&gone);
    kp_map_free(lc.seen);
    kp_free(rv);
    return r;
}

/* --- watch ---------------------------------------------------------------------------------- */

static int kp_informer_event(const struct kp_watch_event *ev, void *userdata)
{
    struct kp_informer *inf = userdata;
    int r = 0;

    switch (ev->type) {
    case KP_WATCH_ADDED:
    case KP_WATCH_MODIFIED:
        r = kp_informer_apply(inf, KP_INFORMER_UPSERT, ev->object);
        break;
    case KP_WATCH_DELETED:
        r = kp_informer_apply(inf, KP_INFORMER_DELETE, ev->object);
        if (r == -KP_EPARSE)
            r = 0; /* a delete of an unnamed object: nothing we could hold */
        break;
    case KP_WATCH_BOOKMARK:
    case KP_WATCH_ERROR:
        return 0;
    }
    if (r == 0)
        kp_informer_count(inf, &inf->stats.events);
    return r;
}

/* The list is applied: synced, and say so once. */
static void kp_informer_set_synced(struct kp_informer *inf)
{
    struct kp_informer_stats st;
    bool was;

    pthread_mutex_lock(&inf->lock);
    was = inf->synced;
    if (!inf->synced) {
        inf->synced = true;
        pthread_cond_broadcast(&inf->synced_cond);
    }
    st = inf->stats;
    pthread_mutex_unlock(&inf->lock);
    if (!was)
        kp_log_info("informer in sync", KP_LF("kind", inf->opts.res->kind),
                    KP_LF("objects", kp_store_len(inf->store)),
                    KP_LF("list_ms", st.list_usec / KP_USEC_PER_MSEC),
                    KP_LF("page_size", (unsigned)st.page_size));
}

/* The cache may now fall behind the server until a relist completes: not synced, said once.
 * why: the failure that ended the watch. */
static void kp_informer_set_unsynced(struct kp_informer *inf, int why, const char *message)
{
    bool was;

    pthread_mutex_lock(&inf->lock);
    was = inf->synced;
    if (was) {
        inf->synced = false;
        inf->stats.desyncs++;
    }
    pthread_mutex_unlock(&inf->lock);
    if (was)
        kp_log_warn("informer out of sync; relisting", KP_LF("kind", inf->opts.res->kind),
                    KP_LF("error", message ? message : kp_strerror(why)));
}

/* Sleeps up to usec, waking early on cancel. */
static void kp_informer_sleep(struct kp_informer *inf, uint64_t usec)
{
    struct kp_deadline d = kp_deadline_in(usec);

    while (!atomic_load(&inf->cancel) && !kp_deadline_expired(d))
        kp_sleep_usec(KP_MIN(kp_deadline_left_usec(d), 100 * KP_USEC_PER_MSEC));
}

static void *kp_informer_main(void *arg)
{
    struct kp_informer *inf = arg;
    struct kp_backoff backoff;
    struct kp_watch *w = NULL;
    struct kp_watch_opts wo = {
        .label_selector = inf->opts.label_selector,
        .field_selector = inf->opts.field_selector,
        .timeout_seconds = inf->opts.watch_timeout_seconds,
        .idle_usec = inf->opts.watch_idle_usec,
        .cancel = &inf->cancel,
    };
    int r;

    kp_backoff_init(&backoff, 800 * KP_USEC_PER_MSEC, 30 * KP_USEC_PER_SEC);
    r = kp_watch_new(inf->client, inf->opts.res, inf->opts.ns, &wo, &w);
    if (r < 0) {
        kp_log_error_errno(r, "informer cannot start", KP_LF("kind", inf->opts.res->kind));
        return NULL;
    }
    while (!atomic_load(&inf->cancel)) {
        struct kp_error err = KP_ERROR_INIT;
        char *rv = NULL;

        r = kp_informer_relist(inf, &rv, &err);
        if (r == 0)
            r = kp_watch_set_resource_version(w, rv);
        kp_free(rv);
        if (r < 0) {
            /* The server's Retry-After (429, 503) is a floor under our own backoff. */
            uint64_t wait =
                KP_MAX(kp_backoff_next(&backoff), err.retry_after_sec * (uint64_t)KP_USEC_PER_SEC);

            if (!atomic_load(&inf->cancel) && r == -KP_ELIMIT)
                /* Halving reached one object per page: nothing smaller to ask for. */
                kp_log_error(
                    "list cannot make progress: one object is over the response body "
                    "ceiling; retrying",
                    KP_LF("kind", inf->opts.res->kind),
                    KP_LF("ceiling_bytes", kp_transport_max_body(kp_client_transport(inf->client))),
                    KP_LF("error", err.message ? err.message : kp_strerror(r)));
            else if (!atomic_load(&inf->cancel))
                kp_log_warn_rl(inf->opts.res->resource, "list failed; retrying",
                               KP_LF("kind", inf->opts.res->kind),
                               KP_LF("error", err.message ? err.message : kp_strerror(r)));
            kp_error_done(&err);
            kp_informer_sleep(inf, wait);
            continue;
        }
        inf->replay = false;
        kp_informer_set_synced(inf);
        kp_backoff_reset(&backoff);
        r = kp_watch_run(w, kp_informer_event, inf, &err);
        if (r == -ECANCELED || atomic_load(&inf->cancel)) {
            kp_error_done(&err);
            continue; /* leave */
        }
        kp_informer_set_unsynced(inf, r, err.message);
        if (r == -KP_EEXPIRED) {
            kp_error_done(&err);
            continue; /* relist at once */
        }
        kp_error_done(&err); /* kp_informer_set_unsynced() logged it */
        kp_informer_sleep(inf, kp_backoff_next(&backoff));
    }
    kp_watch_free(w);
    return NULL;
}

int kp_informer_start(struct kp_informer *inf)
{
    int r;

    if (inf->running)
        return -EALREADY;
    atomic_store(&inf->cancel, false);
    /* The store survives a stop, so the first list of a later start would announce only what
     * changed meanwhile. Its controllers, though, may have dropped work when they stopped (a
     * replica that lost its Lease mid-launch): that list announces every entry, unchanged ones
     * as an update with old equal to new, as a new informer's adds would. */
    inf->replay = true;
    r = pthread_create(&inf->thread, NULL, kp_informer_main, inf);
    if (r != 0)
        return -r;
    inf->running = true;
    return 0;
}

void kp_informer_cancel(struct kp_informer *inf)
{
    if (inf->running)
        atomic_store(&inf->cancel, true);
}

void kp_informer_stop(struct kp_informer *inf)
{
    if (!inf->running)
        return;
    atomic_store(&inf->cancel, true);
    pthread_join(inf->thread, NULL);
    inf->running = false;
    /* Nothing keeps the cache current now: a restart must not count as synced before its new
     * list is in. */
    pthread_mutex_lock(&inf->lock);
    inf->synced = false;
    pthread_mutex_unlock(&inf->lock);
}
