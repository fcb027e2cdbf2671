/* cmd/controller/ssh.c: the SSH provider's controllers as one entry of kpssh-controller's table
 * (controllers.h): the informers they share, the provider itself, the host controller (probe,
 * stale claims, spent tokens, zombie guard), the node-class controller and the startup taint
 * gates, and the metric families they report into.
 *
 * DESIGN: one def owns everything the provider layer shares, so each object is listed and
 * watched once (one Node informer serves the provider's registration wait, the host
 * controller's zombie guard and the taint gates). setup builds, start runs, in this order:
 * informers (started, then waited on until synced, so no controller decides from an empty
 * cache), then the reconcilers. stop runs in reverse: reconcilers first (they stop writing),
 * then informers, then the event recorders are flushed by free. A replica that lost its Lease
 * and leads again runs start after stop: informers relist (they are unsynced once stopped) and
 * the reconcilers start again on their kept queues.
 *
 * The provider (struct kp_provider) is built here too; the core's controllers, when they join
 * the table, get it from kp_controller_ssh_provider(). */
#include "cmd/controller/ssh.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
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
#include "k8s/obj-karpenter.h"
#include "k8s/obj-kpssh.h"
#include "k8s/obj-node.h"
#include "k8s/obj-pod.h"
#include "k8s/store.h"
#include "provider/ssh/hostctl.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/nodeclassctl.h"
#include "provider/ssh/observe.h"
#include "provider/ssh/provider.h"
#include "provider/ssh/taintgate.h"

#define KP_SSH_SYNC_TIMEOUT_USEC (120 * KP_USEC_PER_SEC)

enum inf_id { INF_HOSTS, INF_CLASSES, INF_PROFILES, INF_NODES, INF_NODECLAIMS, INF_PODS, INF_N };
static const char *const inf_names[INF_N] = {"sshhosts", "sshnodeclasses", "sshjoinprofiles",
                                             "nodes",    "nodeclaims",     "pods"};
/* The kind label of the informer metrics: the resources' kinds, as the informers log them. */
static const char *const inf_kinds[INF_N] = {"SSHHost", "SSHNodeClass", "SSHJoinProfile",
                                             "Node",    "NodeClaim",    "Pod"};

struct ssh_state {
    const struct kp_controller_env *env;
    struct kp_informer *inf[INF_N];
    struct kp_events *ev_hosts, *ev_classes, *ev_nodes;
    struct kp_metric *m_pool, *m_probe, *m_phase, *m_zombie, *m_gate;
    struct kp_metric *m_synced, *m_page;
    struct kp_ssh_observer observer;
    struct kp_ssh_provider *provider;
    struct kp_ssh_hostctl *hostctl;
    struct kp_ssh_nodeclassctl *classctl;
    struct kp_ssh_taintgate *gate;
    atomic_bool informers_started; /* read by the metrics collector on the HTTP thread */
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

/* kpssh_pool_hosts{state,class}: counted from the host cache at each scrape, in one pass over
 * the hosts. Every state of a class is reported (0 included) so a dashboard's sum never loses a
 * series; a class with no host left is hidden. */
static void collect_pool(struct kp_metrics *m, void *ctx)
{
    struct ssh_state *s = ctx;
    struct kp_store_list l = {0};
    struct kp_strv classes = {0};
    size_t(*counts)[KP_ARRAY_SIZE(pool_states)] = NULL;
    size_t i, j;

    (void)m;
    if (!atomic_load(&s->informers_started) || !kp_informer_synced(s->inf[INF_HOSTS]))
        return;
    if (kp_store_list(kp_informer_store(s->inf[INF_HOSTS]), &l) < 0 ||
        (l.n && !(counts = kp_calloc(l.n, sizeof(*counts))))) {
        kp_log_error("cannot count pool hosts for kpssh_pool_hosts");
        goto out;
    }
    for (i = 0; i < l.n; i++) {
        const struct kp_sshhost_view *h = kp_sshhost_view(l.v[i]);
        const char *cls = host_class(h);

        for (j = 0; j < classes.n && strcmp(classes.v[j], cls) != 0; j++)
            ;
        if (j == classes.n && kp_strv_push(&classes, cls) < 0)
            goto out;
        /* KP_HOST_STATE_UNKNOWN (a newer build's state) is not one of ours to count. */
        if (h->state < KP_ARRAY_SIZE(pool_states))
            counts[j][h->state]++;
    }
    for (i = 0; i < classes.n; i++)
        for (j = 0; j < KP_ARRAY_SIZE(pool_states); j++)
            kp_gauge_set(kp_metric_labels(s->m_pool, kp_host_state_name(pool_states[j]),
                                          classes.v[i], (const char *)NULL),
                         (double)counts[i][j]);
    for (i = 0; i < s->pool_classes.n; i++)
        if (!kp_strv_contains(&classes, s->pool_classes.v[i]))
            for (j = 0; j < KP_ARRAY_SIZE(pool_states); j++)
                kp_series_hide(kp_metric_labels(s->m_pool, kp_host_state_name(pool_states[j]),
                                                s->pool_classes.v[i], (const char *)NULL));
    kp_strv_done(&s->pool_classes);
    s->pool_classes = classes;
    classes = (struct kp_strv){0};
out:
    kp_free(counts);
    kp_strv_done(&classes);
    kp_store_list_free(&l);
}

/* kpssh_informer_synced{kind} and kpssh_informer_list_page_size{kind}, read from the informers
 * at each scrape. Informers not running (before start, on a standby replica) report synced 0
 * and no page size; informers_started also orders the reads after set-up's writes of inf[]. */
static void collect_informers(struct kp_metrics *m, void *ctx)
{
    struct ssh_state *s = ctx;
    bool started = atomic_load(&s->informers_started);

    (void)m;
    for (size_t i = 0; i < INF_N; i++) {
        const char *kind = inf_kinds[i];
        struct kp_informer_stats st;

        if (!started) {
            kp_gauge_set(kp_metric_labels(s->m_synced, kind, (const char *)NULL), 0.0);
            continue;
        }
        kp_informer_get_stats(s->inf[i], &st);
        kp_gauge_set(kp_metric_labels(s->m_synced, kind, (const char *)NULL),
                     kp_informer_synced(s->inf[i]) ? 1.0 : 0.0);
        kp_gauge_set(kp_metric_labels(s->m_page, kind, (const char *)NULL), (double)st.page_size);
    }
}

static int register_metrics(struct ssh_state *s, struct kp_metrics *m)
{
    static const char *const l_pool[] = {"state", "class", NULL};
    static const char *const l_outcome[] = {"outcome", NULL};
    static const char *const l_phase[] = {"phase", "outcome", NULL};
    static const char *const l_action[] = {"action", NULL};
    static const char *const l_kind[] = {"kind", NULL};
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
        {{"kpssh_informer_synced",
          "1 while the informer of a kind holds a complete list kept current by its watch, 0 "
          "before the first list and while it relists.",
          KP_METRIC_GAUGE, l_kind, NULL, 0},
         &s->m_synced},
        {{"kpssh_informer_list_page_size",
          "Page size the informer of a kind lists with (halved when a page was over the "
          "response body ceiling).",
          KP_METRIC_GAUGE, l_kind, NULL, 0},
         &s->m_page},
    };
    int r;

    for (size_t i = 0; i < KP_ARRAY_SIZE(fams); i++)
        if ((r = kp_metrics_register(m, &fams[i].o, fams[i].ret)) < 0)
            return r;
    /* Outcome series exist from the start, so rate() over them works before the first probe. */
    (void)kp_metric_labels(s->m_probe, "success", (const char *)NULL);
    (void)kp_metric_labels(s->m_probe, "error", (const char *)NULL);
    if ((r = kp_metrics_add_collector(m, collect_informers, s)) < 0)
        return r;
    return kp_metrics_add_collector(m, collect_pool, s);
}

/* --- set-up ------------------------------------------------------------------------------- */

static int new_informer(struct ssh_state *s, enum inf_id id, const struct kp_resource *res,
                        kp_project_fn project, const char *ns)
{
    struct kp_informer_opts o = {.res = res, .project = project, .ns = ns};

    return kp_informer_new(s->env->client, &o, &s->inf[id]);
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
    for (size_t i = 0; i < INF_N; i++)
        kp_informer_free(s->inf[i]);
    kp_events_free(s->ev_nodes);
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
    atomic_init(&s->informers_started, false);
    s->observer = (struct kp_ssh_observer){
        .probe = observe_probe, .phase = observe_phase, .zombie = observe_zombie, .ctx = s};
    if ((r = register_metrics(s, env->metrics)) < 0)
        goto fail;
    if ((r = new_informer(s, INF_HOSTS, &KP_RES_SSHHOST, kp_sshhost_project, pool)) < 0 ||
        (r = new_informer(s, INF_CLASSES, &KP_RES_SSHNODECLASS, kp_sshnodeclass_project, NULL)) <
            0 ||
        (r = new_informer(s, INF_PROFILES, &KP_RES_SSHJOINPROFILE, kp_sshjoinprofile_project,
                          NULL)) < 0 ||
        (r = new_informer(s, INF_NODES, &KP_RES_NODE, kp_node_project, NULL)) < 0 ||
        (r = new_informer(s, INF_NODECLAIMS, &KP_RES_NODECLAIM, kp_nodeclaim_project, NULL)) < 0 ||
        (r = new_informer(s, INF_PODS, &KP_RES_POD, kp_pod_project, NULL)) < 0)
        goto fail;
    if ((r = kp_ssh_index_nodes(s->inf[INF_NODES])) < 0 ||
        (r = kp_ssh_index_hosts(s->inf[INF_HOSTS])) < 0 ||
        (r = kp_ssh_index_nodeclaims(s->inf[INF_NODECLAIMS])) < 0 ||
        (r = kp_ssh_index_pods(s->inf[INF_PODS])) < 0)
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
            .events = s->ev_hosts,
            .observer = &s->observer,
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
            /* A host controller worker probes in its own thread, so its worker count is the
             * probe concurrency; --workers would only blur what bounds the SSH dials. */
            .workers = (unsigned)o->probe_concurrency,
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
    pthread_mutex_lock(&the_state_lock);
    the_state = s;
    pthread_mutex_unlock(&the_state_lock);
    *ret_state = s;
    return 0;
fail:
    ssh_free(s);
    return r;
}

/* --- run ----------------------------------------------------------------------------------- */

static void stop_informers(struct ssh_state *s)
{
    for (size_t i = INF_N; i-- > 0;)
        kp_informer_stop(s->inf[i]);
    atomic_store(&s->informers_started, false);
}

static void ssh_stop(void *state)
{
    struct ssh_state *s = state;

    if (s->started) {
        kp_ssh_taintgate_stop(s->gate);
        kp_ssh_nodeclassctl_stop(s->classctl);
        kp_ssh_hostctl_stop(s->hostctl);
        s->started = false;
    }
    stop_informers(s);
}

static int ssh_start(void *state)
{
    struct ssh_state *s = state;
    size_t i;
    int r;

    for (i = 0; i < INF_N; i++)
        if ((r = kp_informer_start(s->inf[i])) < 0)
            goto fail;
    atomic_store(&s->informers_started, true);
    for (i = 0; i < INF_N; i++)
        if ((r = kp_informer_wait_synced(s->inf[i], KP_SSH_SYNC_TIMEOUT_USEC)) < 0) {
            kp_log_error_errno(r, "informer did not sync", KP_LF("informer", inf_names[i]));
            goto fail;
        }
    if ((r = kp_ssh_nodeclassctl_start(s->classctl)) < 0)
        goto fail;
    if ((r = kp_ssh_hostctl_start(s->hostctl)) < 0) {
        kp_ssh_nodeclassctl_stop(s->classctl);
        goto fail;
    }
    if ((r = kp_ssh_taintgate_start(s->gate)) < 0) {
        kp_ssh_hostctl_stop(s->hostctl);
        kp_ssh_nodeclassctl_stop(s->classctl);
        goto fail;
    }
    s->started = true;
    return 0;
fail:
    stop_informers(s);
    return r;
}

static bool ssh_ready(void *state)
{
    struct ssh_state *s = state;

    for (size_t i = 0; i < INF_N; i++)
        if (!kp_informer_synced(s->inf[i]))
            return false;
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
