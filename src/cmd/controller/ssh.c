/* cmd/controller/ssh.c: the SSH provider's controllers as one entry of kpssh-controller's table
 * (controllers.h): the informers they share, the provider itself, the host controller (probe,
 * stale claims, spent tokens, zombie guard), the node-class controller and the startup taint
 * gates, and the metric families they report into.
 *
 * DESIGN: the informers are the process's (k8s/registry.h, made in main.c and started by the
 * controller set): this def asks the registry for the six it reads, so each object is listed
 * and watched once however many controllers read it (one Node informer serves the provider's
 * registration wait, the host controller's zombie guard, the taint gates and, later, the
 * core's controllers). setup builds the provider and the three controllers on them; start runs
 * after the set has started the registry and seen every informer synced, so no controller
 * decides from an empty cache; stop stops the controllers in reverse (they stop writing), and
 * the set stops the informers after every def has stopped; the event recorders are flushed by
 * free. A replica that lost its Lease and leads again runs start after stop: the informers
 * relist (they are unsynced once stopped) and the reconcilers start again on their kept queues.
 *
 * The provider (struct kp_provider) is built here too; the core's controllers, when they join
 * the table, get it from kp_controller_ssh_provider(). */
#include "cmd/controller/ssh.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "cmd/controller/controllers.h"
#include "cmd/controller/options.h"
#include "http/metrics.h"
#include "k8s/client.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "k8s/store.h"
#include "provider/ssh/attached.h"
#include "provider/ssh/hostctl.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/nodeclassctl.h"
#include "provider/ssh/observe.h"
#include "provider/ssh/provider.h"
#include "provider/ssh/taintgate.h"

enum inf_id { INF_HOSTS, INF_CLASSES, INF_PROFILES, INF_NODES, INF_NODECLAIMS, INF_PODS, INF_N };

struct ssh_state {
    const struct kp_controller_env *env;
    struct kp_informer *inf[INF_N]; /* borrowed from env->informers */
    struct kp_events *ev_hosts, *ev_classes, *ev_nodes;
    struct kp_metric *m_pool, *m_probe, *m_phase, *m_zombie, *m_gate, *m_jobs, *m_jobs_running;
    struct kp_metric *m_attached, *m_attached_vcpu;
    struct kp_ssh_attached *attached; /* attached-time sums (provider/ssh/attached.h) */
    struct kp_ssh_observer observer;
    struct kp_ssh_provider *provider;
    struct kp_ssh_hostctl *hostctl;
    struct kp_ssh_nodeclassctl *classctl;
    struct kp_ssh_taintgate *gate;
    bool started;
    /* The pool gauge's classes at the last scrape, so a class that vanished stops being
     * reported. Only the HTTP thread's collector touches it. */
    struct kp_strv pool_classes;
};

static pthread_mutex_t the_state_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ssh_state *the_state;

/* --- metrics ------------------------------------------------------------------------------- */

static void observe_probe(void *ctx, bool success, uint64_t usec)
{
    struct ssh_state *s = ctx;

    kp_histogram_observe(
        kp_metric_labels(s->m_probe, success ? "success" : "error", (const char *)NULL),
        (double)usec / 1e6);
}

static void observe_phase(void *ctx, const char *phase, bool success, uint64_t usec)
{
    struct ssh_state *s = ctx;

    kp_histogram_observe(
        kp_metric_labels(s->m_phase, phase, success ? "success" : "error", (const char *)NULL),
        (double)usec / 1e6);
}

static void observe_zombie(void *ctx, const char *action)
{
    struct ssh_state *s = ctx;

    kp_counter_inc(kp_metric_labels(s->m_zombie, action, (const char *)NULL));
}

static void observe_job(void *ctx, const char *kind, const char *result, uint64_t usec)
{
    struct ssh_state *s = ctx;

    (void)usec; /* the probe and phase histograms have the durations */
    kp_counter_inc(kp_metric_labels(s->m_jobs, kind, result, (const char *)NULL));
}

static void observe_jobs_running(void *ctx, int delta)
{
    struct ssh_state *s = ctx;

    kp_gauge_add(kp_metric_series(s->m_jobs_running), (double)delta);
}

static void observe_gate(void *ctx, const char *taint_key, uint64_t usec)
{
    struct ssh_state *s = ctx;

    (void)taint_key; /* not a label: keys come from users and would grow the series */
    kp_histogram_observe(kp_metric_series(s->m_gate), (double)usec / 1e6);
}

static const enum kp_host_state pool_states[] = {
    KP_HOST_PENDING,   KP_HOST_AVAILABLE, KP_HOST_CLAIMED,     KP_HOST_IN_USE,
    KP_HOST_UNHEALTHY, KP_HOST_LEAVING,   KP_HOST_MAINTENANCE,
};
/* In enum order, so a state indexes its own count in collect_pool(). */
_Static_assert(sizeof(pool_states) / sizeof(pool_states[0]) == KP_HOST_STATE_UNKNOWN,
               "pool_states lists every known host state, in enum order");

static const char *host_class(const struct kp_sshhost_view *h)
{
    const char *c = kp_labels_get(&h->meta.labels, KP_KPSSH_LABEL_HOST_CLASS);

    return c && *c ? c : KP_KPSSH_HOST_CLASS_DEFAULT;
}

/* The pool gauge's tally: host counts by class (index into classes) and state. */
struct pool_tally {
    struct kp_strv classes;
    size_t (*counts)[KP_ARRAY_SIZE(pool_states)];
    size_t cap; /* rows of counts */
};

/* Walk visitor (under the host store's read lock, store.h): counts one host. Classes are few;
 * a new one grows the rows (an allocation, which the lock rule allows: it does not block on
 * the store). -ENOMEM stops the walk. */
static int tally_host(void *ctx, struct kp_entry *e)
{
    struct pool_tally *t = ctx;
    const struct kp_sshhost_view *h = kp_sshhost_view(e);
    const char *cls = host_class(h);
    size_t j;

    for (j = 0; j < t->classes.n && strcmp(t->classes.v[j], cls) != 0; j++)
        ;
    if (j == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4;
        void *v = kp_reallocarray(t->counts, cap, sizeof(*t->counts));

        if (!v)
            return -ENOMEM;
        t->counts = v;
        memset(t->counts + t->cap, 0, (cap - t->cap) * sizeof(*t->counts));
        t->cap = cap;
    }
    if (j == t->classes.n && kp_strv_push(&t->classes, cls) < 0)
        return -ENOMEM;
    /* KP_HOST_STATE_UNKNOWN (a newer build's state) is not one of ours to count. */
    if (h->state < KP_ARRAY_SIZE(pool_states))
        t->counts[j][h->state]++;
    return 0;
}

/* kpssh_pool_hosts{state,class}: counted from the host cache at each scrape, in one walk over
 * the hosts (no copy of the cache). Every state of a class is reported (0 included) so a
 * dashboard's sum never loses a series; a class with no host left is hidden. */
static void collect_pool(struct kp_metrics *m, void *ctx)
{
    struct ssh_state *s = ctx;
    struct kp_store *hosts;
    struct pool_tally t = {0};
    size_t i, j;

    (void)m;
    if (!kp_registry_started(s->env->informers) || !kp_informer_synced(s->inf[INF_HOSTS]))
        return;
    hosts = kp_informer_store(s->inf[INF_HOSTS]);
    if (kp_store_walk(hosts, tally_host, &t) < 0) {
        kp_log_error("cannot count pool hosts for kpssh_pool_hosts");
        goto out;
    }
    for (i = 0; i < t.classes.n; i++)
        for (j = 0; j < KP_ARRAY_SIZE(pool_states); j++)
            kp_gauge_set(kp_metric_labels(s->m_pool, kp_host_state_name(pool_states[j]),
                                          t.classes.v[i], (const char *)NULL),
                         (double)t.counts[i][j]);
    for (i = 0; i < s->pool_classes.n; i++)
        if (!kp_strv_contains(&t.classes, s->pool_classes.v[i]))
            for (j = 0; j < KP_ARRAY_SIZE(pool_states); j++)
                kp_series_hide(kp_metric_labels(s->m_pool, kp_host_state_name(pool_states[j]),
                                                s->pool_classes.v[i], (const char *)NULL));
    kp_strv_done(&s->pool_classes);
    s->pool_classes = t.classes;
    t.classes = (struct kp_strv){0};
out:
    kp_free(t.counts);
    kp_strv_done(&t.classes);
}

/* Raises a whole-second counter to total (the tally's sums only grow). */
static void counter_raise(struct kp_series *c, double total)
{
    uint64_t want = total > 0 ? (uint64_t)total : 0, have = kp_counter_get(c);

    if (c && want > have)
        kp_counter_add(c, want - have);
}

struct live_walk {
    kp_ssh_attached_visit_fn visit;
    void *vctx;
};

static int visit_node(void *ctx, struct kp_entry *e)
{
    struct live_walk *w = ctx;
    const struct kp_node_view *n = kp_node_view(e);

    if (n)
        w->visit(w->vctx, n);
    return 0;
}

/* The live Nodes, for kp_ssh_attached_account: one walk over the Node informer's store. */
static int walk_live_nodes(void *ctx, kp_ssh_attached_visit_fn visit, void *vctx)
{
    struct ssh_state *s = ctx;
    struct live_walk w = {.visit = visit, .vctx = vctx};

    if (!kp_informer_synced(s->inf[INF_NODES]))
        return -EAGAIN; /* a relist in progress: account next time, in full */
    return kp_store_walk(kp_informer_store(s->inf[INF_NODES]), visit_node, &w);
}

/* kpssh_host_attached_seconds_total and _vcpu_seconds_total{class}: the tally's running sums
 * after adding the live Nodes' time since the last scrape (provider/ssh/attached.h). */
static void collect_attached(struct kp_metrics *m, void *ctx)
{
    struct ssh_state *s = ctx;
    struct kp_ssh_attached_row rows[KP_SSH_ATTACHED_MAX_CLASSES];
    size_t n;

    (void)m;
    n = kp_ssh_attached_account(s->attached, (int64_t)kp_real_usec(), walk_live_nodes, s, rows,
                                KP_ARRAY_SIZE(rows));
    for (size_t i = 0; i < n; i++) {
        counter_raise(kp_metric_labels(s->m_attached, rows[i].class_name, (const char *)NULL),
                      rows[i].seconds);
        counter_raise(kp_metric_labels(s->m_attached_vcpu, rows[i].class_name, (const char *)NULL),
                      rows[i].vcpu_seconds);
    }
}

/* One collector for the provider's scrape-time families: the registry cannot take a collector
 * back, so set-up adds exactly one, last. */
static void collect_all(struct kp_metrics *m, void *ctx)
{
    collect_pool(m, ctx);
    collect_attached(m, ctx);
}

static void node_gone(void *ctx, const struct kp_entry *old_e)
{
    struct ssh_state *s = ctx;
    const struct kp_node_view *n = kp_node_view(old_e);

    if (n)
        kp_ssh_attached_node_gone(s->attached, n, (int64_t)kp_real_usec());
}

static int register_metrics(struct ssh_state *s, struct kp_metrics *m)
{
    static const char *const l_pool[] = {"state", "class", NULL};
    static const char *const l_outcome[] = {"outcome", NULL};
    static const char *const l_phase[] = {"phase", "outcome", NULL};
    static const char *const l_action[] = {"action", NULL};
    static const char *const l_job[] = {"kind", "result", NULL};
    static const char *const l_class[] = {"class", NULL};
    const struct {
        struct kp_metric_opts o;
        struct kp_metric **ret;
    } fams[] = {
        {{"kpssh_pool_hosts", "SSHHosts of the pool namespace by state and host class.",
          KP_METRIC_GAUGE, l_pool, NULL, 0},
         &s->m_pool},
        {{"kpssh_host_probe_duration_seconds",
          "Wall time of one host probe (dial and probe command), by outcome.", KP_METRIC_HISTOGRAM,
          l_outcome, KP_METRICS_DURATION_BUCKETS, KP_ARRAY_SIZE(KP_METRICS_DURATION_BUCKETS)},
         &s->m_probe},
        {{"kpssh_instance_phase_duration_seconds",
          "Wall time of one install, join or leave script run over SSH, by outcome.",
          KP_METRIC_HISTOGRAM, l_phase, KP_METRICS_DURATION_BUCKETS,
          KP_ARRAY_SIZE(KP_METRICS_DURATION_BUCKETS)},
         &s->m_phase},
        {{"kpssh_host_zombie_actions_total",
          "Actions of the zombie guard: left, parked_foreign, leave_failed.", KP_METRIC_COUNTER,
          l_action, NULL, 0},
         &s->m_zombie},
        {{"kpssh_node_startup_taint_gate_seconds",
          "Time from Node creation to the removal of a startup taint by its gate.",
          KP_METRIC_HISTOGRAM, NULL, KP_METRICS_DURATION_BUCKETS,
          KP_ARRAY_SIZE(KP_METRICS_DURATION_BUCKETS)},
         &s->m_gate},
        {{"kpssh_ssh_jobs_total",
          "SSH jobs (probe, install, join, leave) that ended, by kind and result (success, "
          "error, timeout, cancelled).",
          KP_METRIC_COUNTER, l_job, NULL, 0},
         &s->m_jobs},
        {{"kpssh_ssh_jobs_in_flight", "SSH jobs running on the SSH job pool's threads now.",
          KP_METRIC_GAUGE, NULL, NULL, 0},
         &s->m_jobs_running},
        {{"kpssh_host_attached_seconds_total",
          "Seconds kpssh's Nodes existed while this replica led (what EKS Hybrid Nodes bills), "
          "whole seconds, by host class.",
          KP_METRIC_COUNTER, l_class, NULL, 0},
         &s->m_attached},
        {{"kpssh_host_attached_vcpu_seconds_total",
          "kpssh_host_attached_seconds_total weighted by each Node's vCPUs (capacity cpu), by "
          "host class.",
          KP_METRIC_COUNTER, l_class, NULL, 0},
         &s->m_attached_vcpu},
    };
    int r;

    for (size_t i = 0; i < KP_ARRAY_SIZE(fams); i++)
        if ((r = kp_metrics_register(m, &fams[i].o, fams[i].ret)) < 0)
            return r;
    /* Outcome series exist from the start, so rate() over them works before the first probe. */
    (void)kp_metric_labels(s->m_probe, "success", (const char *)NULL);
    (void)kp_metric_labels(s->m_probe, "error", (const char *)NULL);
    return 0;
}

/* --- set-up ------------------------------------------------------------------------------- */

/* The six informers, from the process's registry (typed: api/informers.h, indexes.h). */
static int get_informers(struct ssh_state *s, const char *pool)
{
    struct kp_registry *reg = s->env->informers;
    int r;

    if ((r = kp_ssh_informer_hosts(reg, pool, &s->inf[INF_HOSTS])) < 0 ||
        (r = kp_ssh_informer_nodeclasses(reg, &s->inf[INF_CLASSES])) < 0 ||
        (r = kp_ssh_informer_profiles(reg, &s->inf[INF_PROFILES])) < 0 ||
        (r = kp_informers_nodes(reg, &s->inf[INF_NODES])) < 0 ||
        (r = kp_informers_nodeclaims(reg, &s->inf[INF_NODECLAIMS])) < 0 ||
        (r = kp_informers_pods(reg, &s->inf[INF_PODS])) < 0)
        return r;
    {
        const struct kp_informer_handler h = {.on_delete = node_gone, .ctx = s};

        if ((r = kp_informer_add_handler(s->inf[INF_NODES], &h)) < 0)
            return r;
    }
    /* The provider reads Node indexes through its store alone (no skeleton of its own). */
    return kp_ssh_index_nodes(s->inf[INF_NODES]);
}

static int new_events(struct ssh_state *s, const char *component, struct kp_events **ret)
{
    struct kp_events_opts o = {.controller = component, .instance = s->env->identity};

    return kp_events_new(s->env->client, &o, ret);
}

static void ssh_free(void *state)
{
    struct ssh_state *s = state;

    if (!s)
        return;
    pthread_mutex_lock(&the_state_lock);
    if (the_state == s)
        the_state = NULL;
    pthread_mutex_unlock(&the_state_lock);
    kp_ssh_taintgate_free(s->gate);
    kp_ssh_nodeclassctl_free(s->classctl);
    kp_ssh_hostctl_free(s->hostctl);
    kp_ssh_provider_free(s->provider);
    kp_events_free(s->ev_nodes);
    kp_ssh_attached_free(s->attached);
    kp_events_free(s->ev_classes);
    kp_events_free(s->ev_hosts);
    kp_strv_done(&s->pool_classes);
    kp_free(s);
}

static int ssh_setup(const struct kp_controller_env *env, void **ret_state)
{
    const struct kp_controller_options *o = env->opts;
    const char *pool = o->pool_namespace;
    struct ssh_state *s;
    int r = -ENOMEM;

    s = kp_calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->env = env;
    s->observer = (struct kp_ssh_observer){.probe = observe_probe,
                                           .phase = observe_phase,
                                           .zombie = observe_zombie,
                                           .job = observe_job,
                                           .jobs_running = observe_jobs_running,
                                           .ctx = s};
    if ((r = register_metrics(s, env->metrics)) < 0 || (r = kp_ssh_attached_new(&s->attached)) < 0)
        goto fail;
    if ((r = get_informers(s, pool)) < 0)
        goto fail;
    if ((r = new_events(s, KP_HOSTCTL_EVENTS_COMPONENT, &s->ev_hosts)) < 0 ||
        (r = new_events(s, KP_SSH_NODECLASSCTL_COMPONENT, &s->ev_classes)) < 0 ||
        (r = new_events(s, KP_TAINTGATE_COMPONENT, &s->ev_nodes)) < 0)
        goto fail;

    {
        struct kp_ssh_provider_opts po = {
            .pool_namespace = pool,
            .bootstrap_group = o->bootstrap_group,
            .hosts = kp_informer_store(s->inf[INF_HOSTS]),
            .nodeclasses = kp_informer_store(s->inf[INF_CLASSES]),
            .profiles = kp_informer_store(s->inf[INF_PROFILES]),
            .nodes = kp_informer_store(s->inf[INF_NODES]),
            .nodeclass_informer = s->inf[INF_CLASSES],
            .profile_informer = s->inf[INF_PROFILES],
            .events = s->ev_hosts,
            .observer = &s->observer,
            /* Installs, joins and leaves of NodeClaims run on the provider's own pool, so a
             * launch never holds a core worker and never waits behind probes. */
            .job_threads = (unsigned)o->launch_concurrency,
        };
        if ((r = kp_ssh_provider_new(&po, &s->provider)) < 0)
            goto fail;
    }
    {
        struct kp_ssh_hostctl_opts ho = {
            .pool_namespace = pool,
            .client = env->client,
            .hosts = s->inf[INF_HOSTS],
            .nodes = s->inf[INF_NODES],
            .nodeclaims = s->inf[INF_NODECLAIMS],
            .nodeclasses = s->inf[INF_CLASSES],
            .profiles = s->inf[INF_PROFILES],
            .events = s->ev_hosts,
            .observer = &s->observer,
            /* Reconciles are API calls only; the SSH job pool's threads bound the dials. */
            .workers = (unsigned)o->workers,
            .ssh_workers = (unsigned)o->probe_concurrency,
            .ctx = env->ctx,
            .probe_interval_usec = o->probe_interval,
            .probe_timeout_usec = o->probe_timeout,
        };
        if ((r = kp_ssh_hostctl_new(&ho, &s->hostctl)) < 0)
            goto fail;
    }
    {
        struct kp_ssh_nodeclassctl_opts co = {
            .pool_namespace = pool,
            .client = env->client,
            .nodeclasses = s->inf[INF_CLASSES],
            .profiles = s->inf[INF_PROFILES],
            .hosts = s->inf[INF_HOSTS],
            .nodeclaims = s->inf[INF_NODECLAIMS],
            .events = s->ev_classes,
            .workers = (unsigned)o->workers,
        };
        if ((r = kp_ssh_nodeclassctl_new(&co, &s->classctl)) < 0)
            goto fail;
    }
    {
        struct kp_ssh_taintgate_opts go = {
            .client = env->client,
            .nodes = s->inf[INF_NODES],
            .pods = s->inf[INF_PODS],
            .nodeclaims = s->inf[INF_NODECLAIMS],
            .nodeclasses = s->inf[INF_CLASSES],
            .events = s->ev_nodes,
            .workers = (unsigned)o->workers,
            .gate_opened = observe_gate,
            .gate_opened_ctx = s,
        };
        if ((r = kp_ssh_taintgate_new(&go, &s->gate)) < 0)
            goto fail;
    }
    /* Last: the metrics cannot take a collector back, and it reads s at every scrape. */
    if ((r = kp_metrics_add_collector(env->metrics, collect_all, s)) < 0)
        goto fail;
    pthread_mutex_lock(&the_state_lock);
    the_state = s;
    pthread_mutex_unlock(&the_state_lock);
    *ret_state = s;
    return 0;
fail:
    /* The Node informer outlives s: take back the delete handler get_informers() added. */
    if (s->inf[INF_NODES])
        (void)kp_informer_remove_handlers(s->inf[INF_NODES], s);
    ssh_free(s);
    return r;
}

/* --- run ----------------------------------------------------------------------------------- */

static void ssh_stop(void *state)
{
    struct ssh_state *s = state;

    if (s->started) {
        kp_ssh_attached_pause(s->attached);
        kp_ssh_taintgate_stop(s->gate);
        kp_ssh_nodeclassctl_stop(s->classctl);
        kp_ssh_hostctl_stop(s->hostctl);
        kp_ssh_provider_stop(s->provider);
        s->started = false;
    }
}

/* The set has started the informers and seen them synced (controllers.h). */
static int ssh_start(void *state)
{
    struct ssh_state *s = state;
    int r;

    if ((r = kp_ssh_provider_start(s->provider, s->env->ctx)) < 0)
        return r;
    if ((r = kp_ssh_nodeclassctl_start(s->classctl)) < 0) {
        kp_ssh_provider_stop(s->provider);
        return r;
    }
    if ((r = kp_ssh_hostctl_start(s->hostctl)) < 0) {
        kp_ssh_nodeclassctl_stop(s->classctl);
        kp_ssh_provider_stop(s->provider);
        return r;
    }
    if ((r = kp_ssh_taintgate_start(s->gate)) < 0) {
        kp_ssh_hostctl_stop(s->hostctl);
        kp_ssh_nodeclassctl_stop(s->classctl);
        kp_ssh_provider_stop(s->provider);
        return r;
    }
    s->started = true;
    kp_ssh_attached_resume(s->attached, (int64_t)kp_real_usec());
    return 0;
}

/* Each controller's readiness covers the informers it reads; the provider reads the host,
 * class, profile and Node informers, which the controllers read too. */
static bool ssh_ready(void *state)
{
    struct ssh_state *s = state;

    return kp_ssh_hostctl_ready(s->hostctl) && kp_ssh_nodeclassctl_ready(s->classctl) &&
           kp_ssh_taintgate_ready(s->gate);
}

const struct kp_controller_def kp_controller_ssh = {
    .name = "ssh-provider",
    .setup = ssh_setup,
    .start = ssh_start,
    .stop = ssh_stop,
    .ready = ssh_ready,
    .free = ssh_free,
};

struct kp_provider kp_controller_ssh_provider(void)
{
    struct kp_provider p = {0};

    pthread_mutex_lock(&the_state_lock);
    if (the_state)
        p = kp_ssh_provider_as_provider(the_state->provider);
    pthread_mutex_unlock(&the_state_lock);
    return p;
}
