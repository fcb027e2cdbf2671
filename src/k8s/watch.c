/* DESIGN: watch framing, event decoding and the reconnecting watch (see watch.h).
 *
 * What: the API server sends a watch as one long HTTP body holding one JSON event per line
 * ({"type":"ADDED","object":{...}}\n). The framer cuts the byte stream, split however TCP and
 * chunked encoding split it, into those lines; the decoder turns a line into a typed event; the
 * watch loop runs requests and keeps the resourceVersion.
 *
 * Why this way: the framer and decoder are pure so they can be fuzzed, and so a fault-tier test
 * can drive them with hostile splits. A line wholly inside one chunk is handed over in place;
 * only a line that spans chunks is copied, into a buffer whose ceiling is KP_MAX_WATCH_FRAME,
 * so a stream that never sends a newline costs at most one frame of memory.
 *
 * The resourceVersion moves only after the handler accepted an event; on reconnect the watch
 * resumes from it, so nothing is lost and at most the refused event repeats. A 410 (as status or
 * as an ERROR event carrying a Status) means the server no longer has history from that point:
 * only a relist can resynchronise, which is the caller's job (it owns the cache), so the watch
 * returns -KP_EEXPIRED. The server-side timeout is randomised per request so that many watches
 * started together do not all reconnect at once; the client idle deadline is the same timeout
 * plus a grace period, which only a dead connection can exceed.
 *
 * Threads: a watch runs on its client's thread; fn runs there too. */
#include "k8s/watch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/status.h"
#include "k8s/transport.h"

/* --- framer --------------------------------------------------------------------------------- */

void kp_watch_framer_init(struct kp_watch_framer *f, size_t max_frame)
{
    kp_buf_init(&f->line, max_frame ? max_frame : KP_MAX_WATCH_FRAME);
}

void kp_watch_framer_done(struct kp_watch_framer *f)
{
    kp_buf_done(&f->line);
}

bool kp_watch_framer_pending(const struct kp_watch_framer *f)
{
    return f->line.len > 0;
}

static int emit(const char *p, size_t n, kp_watch_line_fn fn, void *userdata)
{
    if (n > 0 && p[n - 1] == '\r')
        n--;
    if (n == 0)
        return 0;
    return fn(p, n, userdata);
}

int kp_watch_framer_feed(struct kp_watch_framer *f, const char *p, size_t n, kp_watch_line_fn fn,
                         void *userdata)
{
    size_t max = f->line.max;
    int r;

    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) : n;

        if (f->line.len == 0 && nl) {
            /* A whole line inside this chunk: no copy. */
            if (k > max) {
                r = -KP_ELIMIT;
                goto fail;
            }
            if ((r = emit(p, k, fn, userdata)) < 0)
                goto fail;
        } else {
            /* kp_buf_append refuses past the ceiling with -KP_ELIMIT (and frees the line). */
            if ((r = kp_buf_append(&f->line, p, k)) < 0)
                goto fail;
            if (nl) {
                r = emit(f->line.data, f->line.len, fn, userdata);
                kp_buf_reset(&f->line);
                if (r < 0)
                    goto fail;
            }
        }
        if (!nl)
            break;
        p = nl + 1;
        n -= k + 1;
    }
    return 0;
fail:
    kp_buf_done(&f->line);
    return r;
}

/* --- events --------------------------------------------------------------------------------- */

static const char *const type_names[] = {
    [KP_WATCH_ADDED] = "ADDED",     [KP_WATCH_MODIFIED] = "MODIFIED",
    [KP_WATCH_DELETED] = "DELETED", [KP_WATCH_BOOKMARK] = "BOOKMARK",
    [KP_WATCH_ERROR] = "ERROR",
};

const char *kp_watch_event_type_name(enum kp_watch_event_type t)
{
    return (size_t)t < KP_ARRAY_SIZE(type_names) ? type_names[t] : "UNKNOWN";
}

int kp_watch_event_decode(const char *p, size_t n, struct kp_watch_event *ret)
{
    json_t *doc = NULL, *obj = NULL;
    const char *type, *rv = NULL;
    size_t t;
    int r;

    if ((r = kp_json_parse(p, n, KP_MAX_WATCH_FRAME, KP_CLIENT_MAX_DEPTH, &doc, NULL)) < 0)
        goto out;
    if (kp_json_typeof(doc) != KP_JSON_OBJECT || kp_json_get_str(doc, "type", &type) < 0 ||
        kp_json_get_object(doc, "object", &obj) < 0) {
        r = -KP_EPARSE;
        goto out;
    }
    for (t = 0; t < KP_ARRAY_SIZE(type_names); t++)
        if (strcmp(type, type_names[t]) == 0)
            break;
    if (t == KP_ARRAY_SIZE(type_names)) {
        r = -KP_EPARSE;
        goto out;
    }
    if (t != KP_WATCH_ERROR) {
        if (kp_json_path_str(obj, "metadata.resourceVersion", &rv) < 0 || !rv[0]) {
            r = -KP_EPARSE;
            goto out;
        }
    }
    /* Keep the object alive on its own; the envelope goes. */
    *ret = (struct kp_watch_event){
        .type = (enum kp_watch_event_type)t, .object = kp_json_ref(obj), .resource_version = rv};
    r = 0;
out:
    kp_json_unref(doc);
    return r;
}

void kp_watch_event_done(struct kp_watch_event *ev)
{
    if (!ev)
        return;
    ev->object = kp_json_unref(ev->object);
    ev->resource_version = NULL;
}

/* --- watch ---------------------------------------------------------------------------------- */

struct kp_watch {
    struct kp_client *c;
    struct kp_resource res;
    char *group, *version, *resource, *kind; /* res points into these */
    char *ns;
    char *label_selector;
    char *field_selector;
    char *rv;
    bool bookmarks;
    uint32_t timeout_seconds; /* 0: random per request */
    uint64_t idle_usec;       /* 0: derived per request */
    const atomic_bool *cancel;
    struct kp_backoff backoff;
    uint64_t rng;
    bool handler_failed; /* the last kp_watch_once() ended because fn failed */
};

/* State of one request while chunks arrive. */
struct stream {
    struct kp_watch *w;
    struct kp_watch_framer framer;
    kp_watch_event_fn fn;
    void *userdata;
    size_t events;
    int expired;             /* an ERROR event said 410: -KP_EEXPIRED */
    struct kp_error *reterr; /* where an ERROR event's Status goes */
    int error_event;         /* the mapped error of an ERROR event, 0 when none */
    int handler_error;       /* fn's error, 0 when none */
};

struct kp_watch *kp_watch_free(struct kp_watch *w)
{
    if (!w)
        return NULL;
    kp_free(w->group);
    kp_free(w->version);
    kp_free(w->resource);
    kp_free(w->kind);
    kp_free(w->ns);
    kp_free(w->label_selector);
    kp_free(w->field_selector);
    kp_free(w->rv);
    kp_free(w);
    return NULL;
}

int kp_watch_new(struct kp_client *c, const struct kp_resource *res, const char *ns,
                 const struct kp_watch_opts *opts, struct kp_watch **ret)
{
    struct kp_watch *w = NULL;
    int r;

    if ((ns && !res->namespaced) || !res->version || !res->resource) {
        r = -EINVAL;
        goto out;
    }
    w = kp_calloc(1, sizeof(*w));
    if (!w) {
        r = -ENOMEM;
        goto out;
    }
    w->c = c;
    if ((r = kp_strset(&w->group, res->group ? res->group : "")) < 0 ||
        (r = kp_strset(&w->version, res->version)) < 0 ||
        (r = kp_strset(&w->resource, res->resource)) < 0 ||
        (r = kp_strset(&w->kind, res->kind)) < 0 || (r = kp_strset(&w->ns, ns)) < 0)
        goto out;
    w->res = (struct kp_resource){.group = w->group,
                                  .version = w->version,
                                  .resource = w->resource,
                                  .namespaced = res->namespaced,
                                  .kind = w->kind};
    if (opts) {
        if ((r = kp_strset(&w->label_selector, opts->label_selector)) < 0 ||
            (r = kp_strset(&w->field_selector, opts->field_selector)) < 0)
            goto out;
        if (opts->resource_version && opts->resource_version[0] &&
            (r = kp_strset(&w->rv, opts->resource_version)) < 0)
            goto out;
        w->bookmarks = !opts->no_bookmarks;
        w->timeout_seconds = opts->timeout_seconds;
        w->idle_usec = opts->idle_usec;
        w->cancel = opts->cancel;
    } else {
        w->bookmarks = true;
    }
    kp_backoff_init(&w->backoff, KP_WATCH_BACKOFF_BASE_USEC, KP_WATCH_BACKOFF_CAP_USEC);
    w->rng = kp_mono_usec() | 1;
    *ret = w;
    w = NULL;
    r = 0;
out:
    kp_watch_free(w);
    return r;
}

const char *kp_watch_resource_version(const struct kp_watch *w)
{
    return w->rv;
}

int kp_watch_set_resource_version(struct kp_watch *w, const char *rv)
{
    return kp_strset(&w->rv, rv && rv[0] ? rv : NULL);
}

static int on_line(const char *p, size_t n, void *userdata)
{
    struct stream *s = userdata;
    struct kp_watch_event ev;
    int r;

    if ((r = kp_watch_event_decode(p, n, &ev)) < 0)
        return r;
    if (ev.type == KP_WATCH_ERROR) {
        struct kp_error tmp = KP_ERROR_INIT;

        r = kp_status_from_json(ev.object, /* http_status= */ 0, &tmp);
        if (r == 0) {
            r = tmp.errnum;
            if (s->reterr) {
                kp_error_done(s->reterr);
                *s->reterr = tmp;
                kp_error_init(&tmp);
            }
        }
        kp_error_done(&tmp);
        s->error_event = r;
        /* The server ends the stream after an ERROR event; stop reading now. */
        goto out;
    }
    if ((r = s->fn(&ev, s->userdata)) < 0) {
        s->handler_error = r;
        goto out;
    }
    s->events++;
    if ((r = kp_strset(&s->w->rv, ev.resource_version)) < 0)
        goto out;
    r = 0;
out:
    kp_watch_event_done(&ev);
    return r;
}

static int on_chunk(const char *p, size_t n, void *userdata)
{
    struct stream *s = userdata;

    return kp_watch_framer_feed(&s->framer, p, n, on_line, s);
}

static int watch_path(struct kp_watch *w, uint32_t timeout, struct kp_buf *path)
{
    char tbuf[16];
    int r;

    (void)snprintf(tbuf, sizeof(tbuf), "%u", (unsigned)timeout);
    if ((r = kp_client_path(&w->res, w->ns, NULL, NULL, path)) < 0 ||
        (r = kp_query_add(path, "watch", "1")) < 0 ||
        (r = kp_query_add(path, "resourceVersion", w->rv)) < 0 ||
        (r = kp_query_add(path, "allowWatchBookmarks", w->bookmarks ? "true" : NULL)) < 0 ||
        (r = kp_query_add(path, "timeoutSeconds", tbuf)) < 0 ||
        (r = kp_query_add(path, "labelSelector", w->label_selector)) < 0 ||
        (r = kp_query_add(path, "fieldSelector", w->field_selector)) < 0)
        return r;
    return 0;
}

int kp_watch_once(struct kp_watch *w, kp_watch_event_fn fn, void *userdata, size_t *ret_events,
                  struct kp_error *reterr)
{
    struct kp_buf path = KP_BUF_INIT((size_t)64 * 1024);
    struct kp_http_response resp;
    struct stream s = {.w = w, .fn = fn, .userdata = userdata, .reterr = reterr};
    struct kp_http_request req = {.method = "GET", .cancel = w->cancel};
    uint32_t timeout = w->timeout_seconds;
    uint64_t idle = w->idle_usec;
    int r;

    kp_http_response_init(&resp);
    kp_watch_framer_init(&s.framer, KP_MAX_WATCH_FRAME);
    if (timeout == 0)
        timeout = KP_WATCH_TIMEOUT_MIN_SEC +
                  (uint32_t)kp_rand_below(&w->rng,
                                          KP_WATCH_TIMEOUT_MAX_SEC - KP_WATCH_TIMEOUT_MIN_SEC + 1);
    if (idle == 0)
        idle = (uint64_t)timeout * KP_USEC_PER_SEC + KP_WATCH_IDLE_GRACE_USEC;
    if ((r = watch_path(w, timeout, &path)) < 0) {
        r = kp_client_fail(w->c, r, NULL, reterr);
        goto out;
    }
    req.path = kp_buf_str(&path);
    kp_http_response_done(&resp);
    w->handler_failed = false;
    r = kp_transport_stream(kp_client_transport(w->c), &req, idle, on_chunk, &s, &resp);
    if (s.handler_error < 0) {
        w->handler_failed = true;
        r = kp_client_fail(w->c, s.handler_error, NULL, reterr);
        goto out;
    }
    if (s.error_event < 0) {
        /* An ERROR event ended the stream; reterr already holds its Status. */
        r = s.error_event;
        goto out;
    }
    if (r < 0 && resp.status != 0 && (resp.status < 200 || resp.status > 299))
        r = 0; /* the failure is in the status; decode it below */
    if (r < 0) {
        r = kp_client_fail(w->c, r, NULL, reterr);
        goto out;
    }
    if (resp.status < 200 || resp.status > 299) {
        r = kp_client_fail(w->c, 0, &resp, reterr);
        goto out;
    }
    if (kp_watch_framer_pending(&s.framer)) {
        /* The server closed the stream in the middle of an event. */
        r = kp_client_fail(w->c, -ECONNRESET, NULL, reterr);
        goto out;
    }
    r = 0;
out:
    if (ret_events)
        *ret_events = s.events;
    kp_watch_framer_done(&s.framer);
    kp_http_response_done(&resp);
    kp_buf_done(&path);
    return r;
}

static bool retryable(int r)
{
    switch (r) {
    case -ETIMEDOUT:
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -EHOSTUNREACH:
    case -EAGAIN:
    case -EIO:
    case -KP_ESERVER:
    case -KP_ELIMIT:
    case -KP_EPARSE:
        return true;
    default:
        return false;
    }
}

/* Sleeps for usec in slices so a cancel is noticed within a second. */
static int sleep_cancellable(const atomic_bool *cancel, uint64_t usec)
{
    struct kp_deadline d = kp_deadline_in(usec);

    while (!kp_deadline_expired(d)) {
        if (cancel && atomic_load(cancel))
            return -ECANCELED;
        kp_sleep_usec(KP_MIN(kp_deadline_left_usec(d), KP_USEC_PER_SEC));
    }
    return 0;
}

int kp_watch_run(struct kp_watch *w, kp_watch_event_fn fn, void *userdata, struct kp_error *reterr)
{
    struct kp_error err = KP_ERROR_INIT;
    size_t events;
    uint64_t delay, started;
    int r;

    for (;;) {
        if (w->cancel && atomic_load(w->cancel)) {
            r = -ECANCELED;
            break;
        }
        kp_error_done(&err);
        started = kp_mono_usec();
        r = kp_watch_once(w, fn, userdata, &events, &err);
        if (events > 0)
            kp_backoff_reset(&w->backoff);
        /* The server-side timeout ended the stream: resume at once. But a stream that ended
         * within a second without an event is a server going away (or refusing quietly), and
         * reconnecting at once would spin against it: back off as after an error. */
        if (r == 0 && (events > 0 || kp_mono_usec() - started >= KP_USEC_PER_SEC))
            continue;
        if (r < 0 && (w->handler_failed || !retryable(r)))
            break;
        delay = kp_backoff_next(&w->backoff);
        if (err.retry_after_sec > 0)
            delay = KP_MAX(delay, err.retry_after_sec * KP_USEC_PER_SEC);
        if ((r = sleep_cancellable(w->cancel, delay)) < 0)
            break;
    }
    if (reterr && r < 0) {
        kp_error_done(reterr);
        *reterr = err;
        kp_error_init(&err);
    }
    kp_error_done(&err);
    return r;
}
