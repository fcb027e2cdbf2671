/* DESIGN: event recorder (see events.h for the semantics).
 *
 * emit() runs on the caller's thread and does only bookkeeping under one mutex: redact the note,
 * find or start the series for (object, type, reason, action, note), apply the per-object token
 * bucket, and queue a write. The worker thread owns the client and performs the writes: a POST
 * for a new Event, a merge patch of `series` for a repeat. Series counted between patches are
 * written when the worker next finds them dirty and the patch interval has passed.
 *
 * Bounded memory: the queue holds at most KP_EVENTS_QUEUE_MAX writes; the series and bucket
 * tables at most KP_EVENTS_CACHE_MAX entries each (expired ones are swept when full; if none
 * has expired the table is cleared, which at worst starts new series early).
 *
 * Threads: callers of emit (any), the worker (one). `lock` guards everything but the client. */
#include "k8s/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/list.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/rfc3339.h"
#include "k8s/status.h"

#define KP_EVENTS_CACHE_MAX 4096
#define KP_EVENTS_WORKER_TICK_USEC (2 * KP_USEC_PER_SEC)

struct kp_series {
    char *ns, *name;     /* the Event object, once created (name NULL until then) */
    uint64_t first_usec; /* monotonic */
    uint64_t last_patch_usec;
    int64_t last_seen_real; /* realtime usec of the latest occurrence */
    uint32_t count;         /* occurrences so far */
    uint32_t written;       /* count last written to the server */
    bool creating;          /* a create is queued or in flight */
};

struct kp_bucket {
    double tokens;
    uint64_t at;
};

enum kp_event_job_kind { KP_JOB_CREATE, KP_JOB_PATCH };

struct kp_event_job {
    struct kp_list link;
    enum kp_event_job_kind kind;
    char *series_key;
    json_t *body; /* create: the Event */
};

struct kp_events {
    struct kp_client *client; /* worker only */
    char *controller, *instance;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct kp_list queue;
    size_t queued;
    bool busy, stopping;
    struct kp_map *series;  /* key -> struct kp_series */
    struct kp_map *buckets; /* object uid or ns/name -> struct kp_bucket */
    struct kp_events_stats stats;
};

static void kp_series_free(struct kp_series *s)
{
    if (!s)
        return;
    kp_free(s->ns);
    kp_free(s->name);
    kp_free(s);
}

static void kp_job_free(struct kp_event_job *j)
{
    if (!j)
        return;
    kp_free(j->series_key);
    kp_json_unref(j->body);
    kp_free(j);
}

/* Empties a table of kp_free-able values (or series). */
static void kp_table_clear(struct kp_map *m, bool series)
{
    struct kp_strv keys = KP_STRV_INIT;
    const char *k;
    size_t it = 0;

    while (kp_map_next(m, &it, &k, NULL))
        if (kp_strv_push(&keys, k) < 0)
            break;
    for (size_t i = 0; i < keys.n; i++) {
        void *v = kp_map_remove(m, keys.v[i]);

        if (series)
            kp_series_free(v);
        else
            kp_free(v);
    }
    kp_strv_done(&keys);
}

/* Drops expired series (or everything, when none expired) so a new one fits. Lock held. */
static void kp_series_sweep(struct kp_events *ev, uint64_t now)
{
    struct kp_strv old = KP_STRV_INIT;
    const char *k;
    void *v;
    size_t it = 0;

    while (kp_map_next(ev->series, &it, &k, &v)) {
        struct kp_series *s = v;

        if (now - s->first_usec > KP_EVENTS_SERIES_WINDOW_USEC && !s->creating &&
            s->written == s->count && kp_strv_push(&old, k) < 0)
            break;
    }
    for (size_t i = 0; i < old.n; i++)
        kp_series_free(kp_map_remove(ev->series, old.v[i]));
    if (old.n == 0)
        kp_table_clear(ev->series, true);
    kp_strv_done(&old);
}

/* Takes a token from the object's bucket. Lock held. */
static bool kp_bucket_take(struct kp_events *ev, const char *obj, uint64_t now)
{
    struct kp_bucket *b = kp_map_get(ev->buckets, obj);

    if (!b) {
        if (kp_map_size(ev->buckets) >= KP_EVENTS_CACHE_MAX)
            kp_table_clear(ev->buckets, false);
        b = kp_calloc(1, sizeof(*b));
        if (!b || kp_map_put(ev->buckets, obj, b, NULL) < 0) {
            kp_free(b);
            return true; /* cannot track: let it through rather than lose it */
        }
        b->tokens = KP_EVENTS_BURST;
        b->at = now;
    }
    b->tokens += (double)(now - b->at) / (double)KP_EVENTS_REFILL_USEC;
    if (b->tokens > KP_EVENTS_BURST)
        b->tokens = KP_EVENTS_BURST;
    b->at = now;
    if (b->tokens < 1.0)
        return false;
    b->tokens -= 1.0;
    return true;
}

static int kp_events_body(struct kp_events *ev, const struct kp_event_ref *ref,
                          enum kp_event_type type, const char *reason, const char *action,
                          const char *note, const char *ns, json_t **ret)
{
    char now[KP_RFC3339_STRMAX], name[320];
    int64_t real = (int64_t)kp_real_usec();
    json_t *b = NULL;
    int r;

    if ((r = kp_rfc3339_format(real, KP_RFC3339_MICRO, now, sizeof(now))) < 0)
        return r;
    /* <object>.<hex of the time in ns>, as client-go names events. */
    if (snprintf(name, sizeof(name), "%.240s.%llx", ref->name,
                 (unsigned long long)real * 1000ULL) >= (int)sizeof(name))
        return -ENAMETOOLONG;
    if ((r = kp_json_patch_new(&b)) < 0)
        return r;
    if ((r = kp_json_patch_set_str(b, KP_JSON_PATH("apiVersion"), "events.k8s.io/v1")) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("kind"), "Event")) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("metadata", "name"), name)) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("metadata", "namespace"), ns)) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("eventTime"), now)) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("reportingController"), ev->controller)) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("reportingInstance"), ev->instance)) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("action"), action)) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("reason"), reason)) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("note"), note)) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("type"),
                                   type == KP_EVENT_WARNING ? "Warning" : "Normal")) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("regarding", "kind"), ref->kind)) < 0 ||
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("regarding", "name"), ref->name)) < 0)
        goto fail;
    if (ref->api_version && (r = kp_json_patch_set_str(b, KP_JSON_PATH("regarding", "apiVersion"),
                                                       ref->api_version)) < 0)
        goto fail;
    if (ref->ns && *ref->ns &&
        (r = kp_json_patch_set_str(b, KP_JSON_PATH("regarding", "namespace"), ref->ns)) < 0)
        goto fail;
    if (ref->uid && (r = kp_json_patch_set_str(b, KP_JSON_PATH("regarding", "uid"), ref->uid)) < 0)
        goto fail;
    *ret = b;
    return 0;
fail:
    kp_json_unref(b);
    return r;
}

static int kp_events_queue_job(struct kp_events *ev, enum kp_event_job_kind kind,
                               const char *series_key, json_t *body)
{
    struct kp_event_job *j;

    if (ev->queued >= KP_EVENTS_QUEUE_MAX) {
        ev->stats.dropped_queue++;
        kp_json_unref(body);
        return -ENOBUFS;
    }
    j = kp_calloc(1, sizeof(*j));
    if (!j || !(j->series_key = kp_strdup(series_key))) {
        kp_free(j);
        kp_json_unref(body);
        return -ENOMEM;
    }
    j->kind = kind;
    j->body = body;
    kp_list_add_tail(&ev->queue, &j->link);
    ev->queued++;
    pthread_cond_broadcast(&ev->cond);
    return 0;
}

int kp_events_emit(struct kp_events *ev, const struct kp_event_ref *ref, enum kp_event_type type,
                   const char *reason, const char *action, const char *note)
{
    struct kp_buf key = KP_BUF_INIT(4096);
    struct kp_series *s;
    json_t *body = NULL;
    char *clean = NULL;
    const char *ns, *obj;
    uint64_t now = kp_mono_usec();
    int r = 0;

    if (!ref || !ref->kind || !ref->name || !reason || !action || !note)
        return -EINVAL;
    clean = kp_log_redact_dup(note);
    if (!clean)
        return -ENOMEM;
    if (strlen(clean) > KP_EVENTS_NOTE_MAX)
        clean[KP_EVENTS_NOTE_MAX] = '\0';
    ns = ref->ns && *ref->ns ? ref->ns : "default";
    obj = ref->uid ? ref->uid : ref->name;
    r = kp_buf_printf(&key, "%s|%s/%s|%d|%s|%s|%s", obj, ns, ref->name, (int)type, reason, action,
                      clean);
    if (r < 0)
        goto out;

    pthread_mutex_lock(&ev->lock);
    s = kp_map_get(ev->series, kp_buf_str(&key));
    if (s && now - s->first_usec > KP_EVENTS_SERIES_WINDOW_USEC && !s->creating &&
        s->written == s->count) {
        kp_series_free(kp_map_remove(ev->series, kp_buf_str(&key)));
        s = NULL; /* too old to extend: a new Event */
    }
    if (s) {
        s->count++;
        s->last_seen_real = (int64_t)kp_real_usec();
        pthread_cond_broadcast(&ev->cond); /* the worker patches when the interval allows */
        pthread_mutex_unlock(&ev->lock);
        goto out;
    }
    if (!kp_bucket_take(ev, obj, now)) {
        ev->stats.dropped_rate++;
        pthread_mutex_unlock(&ev->lock);
        goto out;
    }
    if (kp_map_size(ev->series) >= KP_EVENTS_CACHE_MAX)
        kp_series_sweep(ev, now);
    s = kp_calloc(1, sizeof(*s));
    if (!s || kp_map_put(ev->series, kp_buf_str(&key), s, NULL) < 0) {
        kp_free(s);
        pthread_mutex_unlock(&ev->lock);
        r = -ENOMEM;
        goto out;
    }
    s->first_usec = now;
    s->last_patch_usec = now;
    s->count = 1;
    s->creating = true;
    r = kp_events_body(ev, ref, type, reason, action, clean, ns, &body);
    if (r == 0)
        r = kp_events_queue_job(ev, KP_JOB_CREATE, kp_buf_str(&key), body);
    if (r < 0)
        kp_series_free(kp_map_remove(ev->series, kp_buf_str(&key)));
    pthread_mutex_unlock(&ev->lock);
out:
    kp_buf_done(&key);
    kp_free(clean);
    return r;
}

/* --- worker --------------------------------------------------------------------------------- */

static void kp_events_do_create(struct kp_events *ev, struct kp_event_job *j)
{
    struct kp_error err = KP_ERROR_INIT;
    const char *ns = NULL, *name = NULL;
    struct kp_series *s;
    int r;

    if (kp_json_path_str(j->body, "metadata.namespace", &ns) < 0 ||
        kp_json_path_str(j->body, "metadata.name", &name) < 0)
        return;
    r = kp_client_create(ev->client, &KP_RES_EVENT, ns, j->body, NULL, &err);
    pthread_mutex_lock(&ev->lock);
    s = kp_map_get(ev->series, j->series_key);
    if (r < 0) {
        ev->stats.failed++;
        if (s)
            kp_series_free(kp_map_remove(ev->series, j->series_key));
    } else {
        ev->stats.created++;
        if (s) {
            s->creating = false;
            s->written = 1;
            if (kp_strset(&s->ns, ns) < 0 || kp_strset(&s->name, name) < 0)
                kp_series_free(kp_map_remove(ev->series, j->series_key));
        }
    }
    pthread_mutex_unlock(&ev->lock);
    if (r < 0)
        kp_log_warn_rl("event-create", "cannot record an event", KP_LF("event", name),
                       KP_LF("error", err.message ? err.message : kp_strerror(r)));
    kp_error_done(&err);
}

/* Patches one series whose count moved, if the interval allows. Returns true if it wrote. */
static bool kp_events_patch_one(struct kp_events *ev, bool force)
{
    char ns[256], name[320], when[KP_RFC3339_STRMAX];
    struct kp_error err = KP_ERROR_INIT;
    struct kp_series *found = NULL;
    json_t *patch = NULL;
    uint64_t now = kp_mono_usec();
    uint32_t count = 0;
    const char *key = NULL;
    size_t it = 0;
    void *v;
    int r;

    pthread_mutex_lock(&ev->lock);
    while (kp_map_next(ev->series, &it, &key, &v)) {
        struct kp_series *s = v;

        if (s->creating || !s->name || s->count == s->written)
            continue;
        if (!force && now - s->last_patch_usec < KP_EVENTS_SERIES_PATCH_USEC)
            continue;
        found = s;
        break;
    }
    if (found) {
        count = found->count;
        found->written = count;
        found->last_patch_usec = now;
        if (kp_strscpy(ns, sizeof(ns), found->ns) < 0 ||
            kp_strscpy(name, sizeof(name), found->name) < 0 ||
            kp_rfc3339_format(found->last_seen_real, KP_RFC3339_MICRO, when, sizeof(when)) < 0)
            found = NULL;
    }
    pthread_mutex_unlock(&ev->lock);
    if (!found)
        return false;
    r = kp_json_patch_new(&patch);
    if (r == 0 && (r = kp_json_patch_set_int(patch, KP_JSON_PATH("series", "count"), count)) == 0 &&
        (r = kp_json_patch_set_str(patch, KP_JSON_PATH("series", "lastObservedTime"), when)) == 0)
        r = kp_client_patch(ev->client, &KP_RES_EVENT, ns, name, NULL, KP_PATCH_MERGE, patch, NULL,
                            &err);
    pthread_mutex_lock(&ev->lock);
    if (r < 0)
        ev->stats.failed++;
    else
        ev->stats.patched++;
    pthread_mutex_unlock(&ev->lock);
    kp_json_unref(patch);
    kp_error_done(&err);
    return true;
}

static void *kp_events_main(void *arg)
{
    struct kp_events *ev = arg;

    pthread_mutex_lock(&ev->lock);
    for (;;) {
        struct kp_event_job *j = NULL;

        if (!kp_list_empty(&ev->queue)) {
            j = KP_LIST_ENTRY(ev->queue.next, struct kp_event_job, link);
            kp_list_del(&j->link);
            ev->queued--;
            ev->busy = true;
            pthread_mutex_unlock(&ev->lock);
            kp_events_do_create(ev, j);
            kp_job_free(j);
            pthread_mutex_lock(&ev->lock);
            ev->busy = false;
            pthread_cond_broadcast(&ev->cond);
            continue;
        }
        {
            bool stopping = ev->stopping, wrote;

            ev->busy = true;
            pthread_mutex_unlock(&ev->lock);
            /* On the way out, write every pending count without waiting for the interval. */
            do
                wrote = kp_events_patch_one(ev, stopping);
            while (wrote && stopping);
            pthread_mutex_lock(&ev->lock);
            ev->busy = false;
            pthread_cond_broadcast(&ev->cond);
            if (stopping)
                break;
            if (wrote)
                continue;
        }
        if (kp_list_empty(&ev->queue) && !ev->stopping)
            (void)kp_cond_wait_deadline(&ev->cond, &ev->lock,
                                        kp_deadline_in(KP_EVENTS_WORKER_TICK_USEC));
    }
    pthread_mutex_unlock(&ev->lock);
    return NULL;
}

int kp_events_new(struct kp_client *c, const struct kp_events_opts *opts, struct kp_events **ret)
{
    struct kp_events *ev;
    int r;

    if (!opts || !opts->controller || !opts->instance)
        return -EINVAL;
    ev = kp_calloc(1, sizeof(*ev));
    if (!ev)
        return -ENOMEM;
    kp_list_init(&ev->queue);
    ev->controller = kp_strdup(opts->controller);
    ev->instance = kp_strdup(opts->instance);
    r = (ev->controller && ev->instance) ? 0 : -ENOMEM;
    if (r == 0)
        r = kp_map_new(&ev->series);
    if (r == 0)
        r = kp_map_new(&ev->buckets);
    if (r == 0)
        r = kp_client_clone(c, &ev->client);
    if (r == 0)
        r = kp_cond_init_monotonic(&ev->cond);
    if (r < 0)
        goto fail;
    pthread_mutex_init(&ev->lock, NULL);
    r = pthread_create(&ev->thread, NULL, kp_events_main, ev);
    if (r != 0) {
        r = -r;
        pthread_cond_destroy(&ev->cond);
        pthread_mutex_destroy(&ev->lock);
        goto fail;
    }
    *ret = ev;
    return 0;
fail:
    kp_client_free(ev->client);
    kp_map_free(ev->series);
    kp_map_free(ev->buckets);
    kp_free(ev->controller);
    kp_free(ev->instance);
    kp_free(ev);
    return r;
}

int kp_events_flush(struct kp_events *ev, uint64_t timeout_usec)
{
    struct kp_deadline d = kp_deadline_in(timeout_usec);
    int r = 0;

    pthread_mutex_lock(&ev->lock);
    while (!kp_list_empty(&ev->queue) || ev->busy) {
        if (kp_deadline_expired(d)) {
            r = -ETIMEDOUT;
            break;
        }
        (void)kp_cond_wait_deadline(&ev->cond, &ev->lock, d);
    }
    pthread_mutex_unlock(&ev->lock);
    return r;
}

struct kp_events *kp_events_free(struct kp_events *ev)
{
    struct kp_list *pos, *tmp;

    if (!ev)
        return NULL;
    if (kp_events_flush(ev, 5 * KP_USEC_PER_SEC) < 0)
        kp_log_warn("events still queued at shutdown are dropped");
    pthread_mutex_lock(&ev->lock);
    ev->stopping = true;
    pthread_cond_broadcast(&ev->cond);
    pthread_mutex_unlock(&ev->lock);
    pthread_join(ev->thread, NULL);
    KP_LIST_FOREACH_SAFE (pos, tmp, &ev->queue) {
        kp_list_del(pos);
        kp_job_free(KP_LIST_ENTRY(pos, struct kp_event_job, link));
    }
    kp_table_clear(ev->series, true);
    kp_table_clear(ev->buckets, false);
    kp_map_free(ev->series);
    kp_map_free(ev->buckets);
    kp_client_free(ev->client);
    kp_free(ev->controller);
    kp_free(ev->instance);
    pthread_cond_destroy(&ev->cond);
    pthread_mutex_destroy(&ev->lock);
    kp_free(ev);
    return NULL;
}

void kp_events_get_stats(struct kp_events *ev, struct kp_events_stats *ret)
{
    pthread_mutex_lock(&ev->lock);
    *ret = ev->stats;
    pthread_mutex_unlock(&ev->lock);
}
