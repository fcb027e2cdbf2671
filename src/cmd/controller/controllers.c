/* DESIGN: the set of controllers run while leading (contract in controllers.h).
 *
 * The set drives the process's informer registry around the controllers: start starts it and
 * waits for every informer to sync before the first controller starts, stop stops it after the
 * last controller has stopped (their workers are joined by then, so none reads a cache that a
 * restart is about to relist). The informer metrics are the set's too: they cover every
 * informer in the registry, whichever controller asked for it.
 *
 * The set is built and driven by the main thread; the HTTP thread only calls
 * kp_controller_set_ready(), which reads the atomic `started` and the controllers' own ready
 * functions. States are freed only by kp_controller_set_free(), after the HTTP server has
 * stopped, so a readiness check racing a stop never touches freed memory. */
#include "cmd/controller/controllers.h"

#include <errno.h>
#include <stdatomic.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/macro.h"
#include "cmd/controller/core.h"
#include "cmd/controller/ssh.h"
#include "http/metrics.h"
#include "k8s/informer.h"
#include "k8s/registry.h"

/* Controllers of this binary, each a def whose functions adapt its layer's API. The SSH
 * provider's come first: the core's controllers use its provider (kp_controller_ssh_provider()),
 * and stop before it. */
const struct kp_controller_def *const kp_controller_defs[] = {
    &kp_controller_ssh,
    &kp_controller_core,
};
const size_t kp_controller_defs_count = KP_ARRAY_SIZE(kp_controller_defs);

struct kp_controller_set {
    const struct kp_controller_def *const *defs;
    const struct kp_controller_env *env;
    size_t n;
    struct kp_metric *m_synced, *m_page;
    void **states;
    size_t started_n; /* how many started, in order (main thread) */
    atomic_bool started;
};

/* kpssh_informer_synced{kind} and kpssh_informer_list_page_size{kind}, read from the
 * registry's informers at each scrape. Informers not running (before start, on a standby
 * replica) report synced 0 and no page size. The registry's informers are all made during
 * set-up, before the HTTP server that scrapes starts. */
static void collect_informers(struct kp_metrics *m, void *ctx)
{
    struct kp_controller_set *s = ctx;
    struct kp_registry *reg = s->env->informers;
    bool started = kp_registry_started(reg);

    (void)m;
    for (size_t i = 0; i < kp_registry_count(reg); i++) {
        struct kp_informer *inf = kp_registry_at(reg, i);
        const char *kind = kp_informer_kind(inf);
        struct kp_informer_stats st;

        if (!started) {
            kp_gauge_set(kp_metric_labels(s->m_synced, kind, (const char *)NULL), 0.0);
            continue;
        }
        kp_informer_get_stats(inf, &st);
        kp_gauge_set(kp_metric_labels(s->m_synced, kind, (const char *)NULL),
                     kp_informer_synced(inf) ? 1.0 : 0.0);
        kp_gauge_set(kp_metric_labels(s->m_page, kind, (const char *)NULL), (double)st.page_size);
    }
}

static int register_metrics(struct kp_controller_set *s, struct kp_metrics *m)
{
    static const char *const l_kind[] = {"kind", NULL};
    const struct kp_metric_opts synced = {
        "kpssh_informer_synced",
        "1 while the informer of a kind holds a complete list kept current by its watch, 0 "
        "before the first list and while it relists.",
        KP_METRIC_GAUGE,
        l_kind,
        NULL,
        0};
    const struct kp_metric_opts page = {
        "kpssh_informer_list_page_size",
        "Page size the informer of a kind lists with (halved when a page was over the "
        "response body ceiling).",
        KP_METRIC_GAUGE,
        l_kind,
        NULL,
        0};
    int r;

    if ((r = kp_metrics_register(m, &synced, &s->m_synced)) < 0 ||
        (r = kp_metrics_register(m, &page, &s->m_page)) < 0)
        return r;
    return kp_metrics_add_collector(m, collect_informers, s);
}

int kp_controller_set_new(const struct kp_controller_def *const *defs, size_t n,
                          const struct kp_controller_env *env, struct kp_controller_set **ret)
{
    struct kp_controller_set *s = NULL;
    size_t i;
    int r = -ENOMEM;

    s = kp_calloc(1, sizeof(*s));
    if (!s)
        goto out;
    atomic_init(&s->started, false);
    s->defs = defs;
    s->env = env;
    if (!env->informers) {
        r = -EINVAL;
        goto out;
    }
    if (n && !(s->states = kp_calloc(n, sizeof(*s->states))))
        goto out;
    for (i = 0; i < n; i++) {
        /* Count it first, so a failure frees the states of the ones set up before it. */
        s->n = i + 1;
        if (defs[i]->setup && (r = defs[i]->setup(env, &s->states[i])) < 0) {
            s->n = i;
            kp_log_error_errno(r, "controller setup failed", KP_LF("controller", defs[i]->name));
            goto out;
        }
    }
    if (env->metrics && (r = register_metrics(s, env->metrics)) < 0) {
        kp_log_error_errno(r, "cannot register the informer metrics");
        goto out;
    }
    *ret = s;
    s = NULL;
    r = 0;
out:
    kp_controller_set_free(s);
    return r;
}

struct kp_controller_set *kp_controller_set_free(struct kp_controller_set *s)
{
    size_t i;

    if (!s)
        return NULL;
    for (i = s->n; i-- > 0;)
        if (s->defs[i]->free)
            s->defs[i]->free(s->states[i]);
    kp_free(s->states);
    kp_free(s);
    return NULL;
}

static void stop_started(struct kp_controller_set *s)
{
    while (s->started_n > 0) {
        size_t i = --s->started_n;

        kp_log_info("stopping controller", KP_LF("controller", s->defs[i]->name));
        if (s->defs[i]->stop)
            s->defs[i]->stop(s->states[i]);
    }
}

int kp_controller_set_start(struct kp_controller_set *s)
{
    const char *kind = NULL;
    size_t i;
    int r;

    if ((r = kp_registry_start(s->env->informers, KP_CONTROLLER_SYNC_TIMEOUT_USEC, s->env->ctx,
                               &kind)) < 0)
        return kp_log_error_errno(r, "informer did not sync", KP_LF("kind", kind ? kind : ""));
    for (i = 0; i < s->n; i++) {
        if ((r = s->defs[i]->start(s->states[i])) < 0) {
            kp_log_error_errno(r, "controller start failed", KP_LF("controller", s->defs[i]->name));
            stop_started(s);
            kp_registry_stop(s->env->informers);
            return r;
        }
        s->started_n = i + 1;
        kp_log_info("controller started", KP_LF("controller", s->defs[i]->name));
    }
    atomic_store(&s->started, true);
    return 0;
}

void kp_controller_set_stop(struct kp_controller_set *s)
{
    /* Readiness stops asking the controllers first; a check already running may still call
     * ready() on a stopping state, which stays allocated until kp_controller_set_free(). */
    atomic_store(&s->started, false);
    stop_started(s);
    kp_registry_stop(s->env->informers);
}

bool kp_controller_set_ready(void *set)
{
    struct kp_controller_set *s = set;
    size_t i;

    if (!atomic_load(&s->started))
        return true;
    if (!kp_registry_synced(s->env->informers))
        return false;
    for (i = 0; i < s->n; i++)
        if (s->defs[i]->ready && !s->defs[i]->ready(s->states[i]))
            return false;
    return true;
}

bool kp_controller_set_started(const struct kp_controller_set *s)
{
    return atomic_load(&s->started);
}
