/* cmd/controller/core.c: Karpenter's core as one entry of kpssh-controller's table
 * (controllers.h): the cluster state, the NodeClaim lifecycle, Node termination, NodePool,
 * garbage-collection, expiration, provisioning, pod-event, Consolidatable and disruption
 * controllers, on the SSH provider's provider, with Karpenter's metric families.
 *
 * DESIGN: the core's layer knows nothing of this process. It is built from one struct
 * kp_core_env (core/core.h), which this entry fills from the process's: the shared informer
 * registry, the main client, the leadership term's context, the options (timing, workers), the
 * provider the SSH entry built before this one (kp_controller_ssh_provider(): the SSH entry is
 * first in the table, so it is set up first and stopped last), one event recorder reporting as
 * component "karpenter" (Karpenter's events are API: users filter on it), and an observer that
 * turns the core's reports into the families of core/observe.h, registered here from the core's
 * own table so names and labels live in one place.
 *
 * Order: start runs the controllers in dependency order (the cluster state has been fed since
 * the informers started; lifecycle before termination, so a NodeClaim registered at start-up
 * gets its Node finalizer before a termination looks at it); stop runs in reverse. Each
 * controller's stop joins its workers, whose reconciles run under the term context that the
 * process cancelled before calling stop (a launch in a join ends within the SSH poll slice). */
#include "cmd/controller/core.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/macro.h"
#include "cmd/controller/controllers.h"
#include "cmd/controller/options.h"
#include "cmd/controller/ssh.h"
#include "core/core.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/state/cluster.h"
#include "core/disruption/disruption.h"
#include "core/disruption/marking.h"
#include "core/expiration/expiration.h"
#include "core/gc/gc.h"
#include "core/lifecycle/lifecycle.h"
#include "core/nodepool/nodepool.h"
#include "core/provisioning/provisioner.h"
#include "core/termination/termination.h"
#include "http/metrics.h"
#include "k8s/events.h"

/* Karpenter's events are reported by this component. */
#define CORE_EVENTS_COMPONENT "karpenter"

struct core_state {
    const struct kp_controller_env *env;
    struct kp_provider provider;
    struct kp_core_env core;
    struct kp_core_observer observer;
    struct kp_metric *m[KP_CM_N];
    struct kp_events *events;
    /* The core's one view of Nodes, NodeClaims and bound pods (core/state), fed by informer
     * handlers from the moment the informers start; the provisioner and disruption read it. */
    struct kp_cluster_state *cluster;
    void *ctl[12];    /* core_rows' controllers, by index */
    size_t started_n; /* how many of them started, in order */
};

/* --- metrics: the core's table as families of the process's registry ------------------------ */

static void obs_count(void *ctx, enum kp_core_metric m, const char *const *labels)
{
    struct core_state *s = ctx;

    kp_counter_inc(kp_metric_labelv(s->m[m], labels));
}

static void obs_observe(void *ctx, enum kp_core_metric m, const char *const *labels, double v)
{
    struct core_state *s = ctx;

    kp_histogram_observe(kp_metric_labelv(s->m[m], labels), v);
}

static void obs_gauge(void *ctx, enum kp_core_metric m, const char *const *labels, double v)
{
    struct core_state *s = ctx;
    struct kp_series *series = kp_core_metric_defs[m].n_labels ? kp_metric_labelv(s->m[m], labels)
                                                               : kp_metric_series(s->m[m]);

    kp_gauge_set(series, v);
}

static void obs_hide(void *ctx, enum kp_core_metric m, const char *const *labels)
{
    struct core_state *s = ctx;

    if (kp_core_metric_defs[m].n_labels)
        kp_series_hide(kp_metric_labelv(s->m[m], labels));
}

static int register_metrics(struct core_state *s, struct kp_metrics *m)
{
    int r;

    for (size_t i = 0; i < KP_CM_N; i++) {
        const struct kp_core_metric_def *d = &kp_core_metric_defs[i];
        struct kp_metric_opts o = {
            .name = d->name,
            .help = d->help,
            .type = d->type == KP_CM_COUNTER ? KP_METRIC_COUNTER
                    : d->type == KP_CM_GAUGE ? KP_METRIC_GAUGE
                                             : KP_METRIC_HISTOGRAM,
            .labels = d->n_labels ? d->labels : NULL,
        };

        if (d->type == KP_CM_HISTOGRAM) {
            o.buckets = d->buckets;
            o.nbuckets = d->n_buckets;
        }
        if ((r = kp_metrics_register(m, &o, &s->m[i])) < 0)
            return kp_log_error_errno(r, "cannot register a core metric family",
                                      KP_LF("metric", d->name));
    }
    /* Made now, so a scrape shows them at 0 before the first count; a series that cannot be
     * made is only counted as dropped (http/metrics.h) and made again on its first count. */
    for (size_t i = 0; i < KP_CM_INITIAL_SERIES_N; i++)
        (void)kp_metric_labelv(s->m[kp_core_initial_series[i].metric],
                               kp_core_initial_series[i].labels);
    return 0;
}

/* --- the core's controllers, in start order -------------------------------------------------- */

/* Each core controller has the same five functions (core/core.h); CORE_ROW adapts one to the
 * rows below. */
struct core_row {
    const char *name;
    int (*make)(const struct kp_core_env *env, void **ret);
    int (*start)(void *ctl);
    void (*stop)(void *ctl);
    bool (*ready)(void *ctl);
    void (*free)(void *ctl);
};

#define CORE_ROW(name)                                                                             \
    static int name##_make(const struct kp_core_env *env, void **ret)                              \
    {                                                                                              \
        struct kp_##name##_controller *ctl = NULL;                                                 \
        int r = kp_##name##_controller_new(env, &ctl);                                             \
                                                                                                   \
        if (r >= 0)                                                                                \
            *ret = ctl;                                                                            \
        return r;                                                                                  \
    }                                                                                              \
    static int name##_start(void *ctl)                                                             \
    {                                                                                              \
        return kp_##name##_controller_start(ctl);                                                  \
    }                                                                                              \
    static void name##_stop(void *ctl)                                                             \
    {                                                                                              \
        kp_##name##_controller_stop(ctl);                                                          \
    }                                                                                              \
    static bool name##_ready(void *ctl)                                                            \
    {                                                                                              \
        return kp_##name##_controller_ready(ctl);                                                  \
    }                                                                                              \
    static void name##_free(void *ctl)                                                             \
    {                                                                                              \
        (void)kp_##name##_controller_free(ctl);                                                    \
    }
#define CORE_ROW_REF(name)                                                                         \
    {                                                                                              \
#name, name##_make, name##_start, name##_stop, name##_ready, name##_free                   \
    }

CORE_ROW(lifecycle)
CORE_ROW(termination)
CORE_ROW(nodepool)
CORE_ROW(gc)
CORE_ROW(expiration)
CORE_ROW(provisioner)
CORE_ROW(podevents)
CORE_ROW(consolidation)
CORE_ROW(disruption)

static const struct core_row core_rows[] = {
    CORE_ROW_REF(lifecycle), CORE_ROW_REF(termination),   CORE_ROW_REF(nodepool),
    CORE_ROW_REF(gc),        CORE_ROW_REF(expiration),    CORE_ROW_REF(provisioner),
    CORE_ROW_REF(podevents), CORE_ROW_REF(consolidation), CORE_ROW_REF(disruption),
};
#define CORE_N KP_ARRAY_SIZE(core_rows)
_Static_assert(CORE_N <= KP_ARRAY_SIZE(((struct core_state *)0)->ctl), "room for every row");

/* karpenter_cluster_state_synced and _node_count, read from the cluster state at each scrape. */
static void collect_state(struct kp_metrics *m, void *ctx)
{
    struct core_state *s = ctx;

    (void)m;
    kp_cluster_state_report(s->cluster);
}

/* --- set-up and run -------------------------------------------------------------------------- */

static void core_free(void *state)
{
    struct core_state *s = state;

    if (!s)
        return;
    for (size_t i = CORE_N; i-- > 0;)
        if (s->ctl[i])
            core_rows[i].free(s->ctl[i]);
    /* After the informers stopped (free runs after the set stopped the registry). */
    kp_cluster_state_free(s->cluster);
    kp_events_free(s->events);
    kp_free(s);
}

static int core_setup(const struct kp_controller_env *env, void **ret_state)
{
    const struct kp_controller_options *o = env->opts;
    struct core_state *s;
    int r = -ENOMEM;

    if (!(s = kp_calloc(1, sizeof(*s))))
        return -ENOMEM;
    s->env = env;
    /* The SSH entry comes first in the table: its provider exists by now. */
    s->provider = kp_controller_ssh_provider();
    if (!s->provider.ops) {
        r = kp_log_error_errno(-EINVAL, "the core needs the SSH provider, which is not set up");
        goto fail;
    }
    s->observer = (struct kp_core_observer){
        .count = obs_count, .observe = obs_observe, .gauge = obs_gauge, .hide = obs_hide, .ctx = s};
    if ((r = register_metrics(s, env->metrics)) < 0)
        goto fail;
    {
        struct kp_events_opts eo = {.controller = CORE_EVENTS_COMPONENT, .instance = env->identity};

        if ((r = kp_events_new(env->client, &eo, &s->events)) < 0)
            goto fail;
    }
    s->core = (struct kp_core_env){
        .client = env->client,
        .informers = env->informers,
        .provider = &s->provider,
        .observer = &s->observer,
        .events = s->events,
        .parent = env->ctx,
        .timing = {.launch_timeout_usec = o->launch_timeout,
                   .registration_ttl_usec = o->registration_ttl,
                   .gc_interval_usec = o->gc_interval,
                   .orphan_node_grace_usec = o->orphan_node_grace},
        .workers = (unsigned)o->core_workers,
        /* The disruption row below runs: it replaces expiring nodes first. */
        .expiry_replaces = true,
    };
    kp_core_timing_defaults(&s->core.timing);
    if ((r = kp_cluster_state_new(&s->core, &s->cluster)) < 0) {
        kp_log_error_errno(r, "cannot set up the cluster state");
        goto fail;
    }
    s->core.cluster = s->cluster;
    for (size_t i = 0; i < CORE_N; i++)
        if ((r = core_rows[i].make(&s->core, &s->ctl[i])) < 0) {
            kp_log_error_errno(r, "core controller setup failed",
                               KP_LF("controller", core_rows[i].name));
            goto fail;
        }
    /* Last: the metrics cannot take a collector back, and it reads s at every scrape. */
    if ((r = kp_metrics_add_collector(env->metrics, collect_state, s)) < 0)
        goto fail;
    *ret_state = s;
    return 0;
fail:
    core_free(s);
    return r;
}

static void core_stop(void *state)
{
    struct core_state *s = state;

    while (s->started_n > 0) {
        s->started_n--;
        core_rows[s->started_n].stop(s->ctl[s->started_n]);
    }
}

static int core_start(void *state)
{
    struct core_state *s = state;
    int r;

    for (size_t i = 0; i < CORE_N; i++) {
        if ((r = core_rows[i].start(s->ctl[i])) < 0) {
            kp_log_error_errno(r, "core controller start failed",
                               KP_LF("controller", core_rows[i].name));
            core_stop(s);
            return r;
        }
        s->started_n = i + 1;
    }
    return 0;
}

static bool core_ready(void *state)
{
    struct core_state *s = state;

    for (size_t i = 0; i < CORE_N; i++)
        if (!core_rows[i].ready(s->ctl[i]))
            return false;
    return true;
}

const struct kp_controller_def kp_controller_core = {
    .name = "karpenter-core",
    .setup = core_setup,
    .start = core_start,
    .stop = core_stop,
    .ready = core_ready,
    .free = core_free,
};
