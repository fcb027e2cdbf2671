/* DESIGN: kpssh-controller's main (STYLE.md section 4: the main thread owns start-up, signals,
 * the leader Lease and the orderly shutdown).
 *
 * Flow: options (table in options.c) -> logging -> effective configuration logged -> API
 * configuration (--kubeconfig / $KUBECONFIG, else in-cluster with a rotating token file, else
 * ~/.kube/config; exec credential plugins and token files as the kubeconfig says) -> clients ->
 * metrics and readiness checks -> controller setup -> HTTP endpoints -> the main loop.
 *
 * The main loop is one poll(2) on a signalfd and the Lease keeper's eventfd, with a timeout of
 * one Lease retry period. SIGTERM, SIGINT and SIGHUP are blocked in every thread (the mask is
 * set before any thread exists, so libmicrohttpd's and libcurl's threads inherit it) and read
 * from the signalfd: no code runs in a signal handler. SIGPIPE is ignored.
 *   - not leading: one acquire attempt per tick (kp_leader_try, jittered). On success start the
 *     keeper thread (kp_leader_keep_start), which renews from then on and opens the write
 *     fence, then the controllers; their start blocks while the informers sync, and the keeper
 *     keeps the Lease meanwhile. A failure to start releases the Lease, exit 1.
 *   - leading: nothing to do but wait. The keeper closes the fence by the renew deadline when
 *     renewals fail (an API server restart) or another holder appears, and wakes this loop,
 *     which stops the controllers and stands by again: the process stays up and contends.
 *   - a signal: stop the controllers (the keeper still renews), stop the keeper, close the
 *     fence, release the Lease if held, exit 0.
 * The fence (k8s/fence.h) is a deadline every clone of the main client checks before a write
 * and the SSH phases check before they start, so nothing is written once another replica
 * could lead, even while the controllers are still stopping.
 * Contexts (base/ctx.h): the process context is cancelled by the signal, and under it the
 * context of a leadership term is set up afresh before each start and cancelled by a lost
 * Lease. The controllers get the term's (kp_controller_env.ctx), so the moment either happens
 * every SSH job ends within a poll slice and no reconcile starts another, before stop is even
 * called: a host that hangs cannot hold the shutdown or a stand-down.
 * Shutdown is bounded: after the signal a watchdog thread waits --shutdown-timeout for the rest
 * of the shutdown; only if that passes does it log why and end the process (exit 1). With the
 * contexts it is a last resort: the stop itself takes well under a second.
 *
 * Exit codes (docs/operations.md): 0 clean shutdown; 1 start-up or runtime failure; 2 usage
 * error (bad option or value). (3, "leader Lease lost", is retired.) */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "cmd/controller/controllers.h"
#include "cmd/controller/options.h"
#include "http/health.h"
#include "http/metrics.h"
#include "http/server.h"
#include "k8s/apiconfig.h"
#include "k8s/client.h"
#include "k8s/fence.h"
#include "k8s/lease.h"
#include "k8s/registry.h"
#include "k8s/status.h"

enum {
    KP_EXIT_OK = 0,
    KP_EXIT_FAILURE = 1,
    KP_EXIT_USAGE = 2,
    /* 3 meant "leader Lease lost" until a lost Lease became a return to standby; it is not
     * reused, so an old alert on it stays meaningful. */
};

#define KP_IDENTITY_MAX 253

/* The shutdown watchdog (see DESIGN): started once the loop ends, disarmed before main returns. */
static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC */
    uint64_t usec;
    bool started, disarmed;
} watchdog = {.mu = PTHREAD_MUTEX_INITIALIZER};
#define KP_LEADER_TIMEOUT_MAX_USEC (5 * KP_USEC_PER_SEC)

/* State the HTTP thread reads (readiness checks, collectors): atomics only. */
struct shared {
    atomic_bool api_ok;      /* the last API call of the main loop succeeded */
    atomic_bool election_ok; /* leader election has completed a round (or is disabled) */
    atomic_bool leading;     /* this replica holds the Lease (or election is disabled) */
    struct kp_controller_set *controllers;
    struct kp_series *is_leader; /* kpssh_leader_election_is_leader */
    struct kp_series *log_dropped;
    uint64_t log_dropped_seen; /* collector's last reading (renders are serialised) */
};

static int static_token_fn(void *userdata, bool refresh, struct kp_secret **ret_token)
{
    const struct kp_secret *s = userdata;

    (void)refresh; /* a fixed token cannot be refreshed; the 401 stands */
    return kp_secret_new(kp_secret_reveal(s), kp_secret_len(s), ret_token);
}

/* Fills c from a kubeconfig (explicit path, $KUBECONFIG or home) or the in-cluster service
 * account (k8s/apiconfig.h). Logs the reason of a failure (this is the decision point) and
 * returns it. */
static int api_config_load(const struct kp_controller_options *o, struct kp_api_config *c)
{
    char *msg = NULL;
    int r;

    r = kp_api_config_load(o->kubeconfig, o->context, getenv("KUBECONFIG"), getenv("HOME"), c,
                           &msg);
    if (r < 0)
        (void)kp_log_error_errno(r, "cannot configure the API client",
                                 KP_LF("detail", msg ? msg : ""));
    kp_free(msg);
    return r;
}

/* "<--pod-name or host name>_<8 hex digits>": unique even when two replicas share a name. */
static int make_identity(const char *pod, char **ret)
{
    char host[256] = ""; /* HOST_NAME_MAX is 64 on Linux */
    uint32_t rnd = 0;
    struct kp_buf b = KP_BUF_INIT(KP_IDENTITY_MAX);
    int r;

    if (!pod || !*pod) {
        if (gethostname(host, sizeof(host) - 1) == 0 && *host)
            pod = host;
        else
            pod = "kpssh-controller";
    }
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        rnd = (uint32_t)(kp_mono_usec() ^ (uint64_t)getpid());
    r = kp_buf_printf(&b, "%.*s_%08x", 200, pod, rnd);
    if (r == 0 && !(*ret = kp_buf_steal(&b, NULL)))
        r = -ENOMEM;
    kp_buf_done(&b);
    return r;
}

static bool check_api(void *ctx)
{
    return atomic_load(&((struct shared *)ctx)->api_ok);
}

static bool check_election(void *ctx)
{
    return atomic_load(&((struct shared *)ctx)->election_ok);
}

/* Leading: every controller started and ready. Standby: nothing to wait for. */
static bool check_controllers(void *ctx)
{
    struct shared *sh = ctx;

    if (!atomic_load(&sh->leading))
        return true;
    return kp_controller_set_started(sh->controllers) && kp_controller_set_ready(sh->controllers);
}

static void collect_main(struct kp_metrics *m, void *ctx)
{
    struct shared *sh = ctx;
    uint64_t dropped = kp_log_dropped();

    (void)m;
    kp_gauge_set(sh->is_leader, atomic_load(&sh->leading) ? 1 : 0);
    kp_counter_add(sh->log_dropped, dropped - sh->log_dropped_seen);
    sh->log_dropped_seen = dropped;
}

static int register_metrics(struct kp_metrics *m, struct shared *sh)
{
    struct kp_metric *f = NULL;
    int r;

    if ((r = kp_metrics_add_process(m)) < 0)
        return r;
    r = kp_metrics_register(
        m,
        &(struct kp_metric_opts){.name = "kpssh_build_info",
                                 .help = "Always 1; the version label says which build runs.",
                                 .type = KP_METRIC_GAUGE,
                                 .labels = (const char *const[]){"version", NULL}},
        &f);
    if (r < 0)
        return r;
    kp_gauge_set(kp_metric_labels(f, KP_VERSION, (const char *)NULL), 1);
    r = kp_metrics_register(
        m,
        &(struct kp_metric_opts){.name = "kpssh_leader_election_is_leader",
                                 .help = "1 while this replica holds the leader Lease, else 0.",
                                 .type = KP_METRIC_GAUGE},
        &f);
    if (r < 0)
        return r;
    sh->is_leader = kp_metric_series(f);
    r = kp_metrics_register(
        m,
        &(struct kp_metric_opts){.name = "kpssh_log_dropped_lines_total",
                                 .help = "Log lines dropped by the rate limiter.",
                                 .type = KP_METRIC_COUNTER},
        &f);
    if (r < 0)
        return r;
    sh->log_dropped = kp_metric_series(f);
    return kp_metrics_add_collector(m, collect_main, sh);
}

static int start_http(const struct kp_controller_options *o, struct kp_metrics *m,
                      struct kp_health *h, struct kp_http_server **ret_a,
                      struct kp_http_server **ret_b)
{
    bool one = o->metrics_port == o->health_probe_port && o->metrics_port != 0;
    struct kp_http_server_opts so = {.address = o->bind_address, .metrics = m, .health = h};
    int r;

    so.port = (uint16_t)o->metrics_port;
    so.endpoints = KP_HTTP_METRICS | (one ? KP_HTTP_PROBES : 0);
    if ((r = kp_http_server_start(&so, ret_a)) < 0)
        return kp_log_error_errno(r, "cannot serve metrics", KP_LF("address", o->bind_address),
                                  KP_LF("port", o->metrics_port));
    kp_log_info("serving http", KP_LF("address", o->bind_address),
                KP_LF("port", (unsigned)kp_http_server_port(*ret_a)),
                KP_LF("endpoints", one ? "/metrics /healthz /readyz" : "/metrics"));
    if (one)
        return 0;
    so.port = (uint16_t)o->health_probe_port;
    so.endpoints = KP_HTTP_PROBES;
    if ((r = kp_http_server_start(&so, ret_b)) < 0)
        return kp_log_error_errno(r, "cannot serve health probes",
                                  KP_LF("address", o->bind_address),
                                  KP_LF("port", o->health_probe_port));
    kp_log_info("serving http", KP_LF("address", o->bind_address),
                KP_LF("port", (unsigned)kp_http_server_port(*ret_b)),
                KP_LF("endpoints", "/healthz /readyz"));
    return 0;
}

/* Blocks the shutdown signals in this thread (and every thread created later) and returns a
 * signalfd that reads them. */
static int setup_signals(void)
{
    struct sigaction sa = {.sa_handler = SIG_IGN};
    sigset_t set;
    int fd;

    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPIPE, &sa, NULL) < 0)
        return -errno;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
        return -EINVAL;
    fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

enum wake { WAKE_TIMEOUT, WAKE_SIGNAL, WAKE_LEASE_LOST };

/* Waits up to usec for a signal (its number in *ret_sig) or the keeper's loss notice on efd
 * (drained). */
static enum wake wait_event(int sfd, int efd, uint64_t usec, int *ret_sig)
{
    struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = efd, .events = POLLIN}};
    struct signalfd_siginfo si;
    uint64_t n;

    if (poll(p, efd >= 0 ? 2 : 1, kp_deadline_left_ms(kp_deadline_in(usec))) <= 0)
        return WAKE_TIMEOUT; /* timeout or EINTR: the caller's next tick looks again */
    if ((p[0].revents & POLLIN) && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        *ret_sig = (int)si.ssi_signo;
        return WAKE_SIGNAL;
    }
    if (efd >= 0 && (p[1].revents & POLLIN) && read(efd, &n, sizeof(n)) == (ssize_t)sizeof(n))
        return WAKE_LEASE_LOST;
    return WAKE_TIMEOUT;
}

static void *watchdog_main(void *arg)
{
    struct timespec until;
    uint64_t t;
    int r = 0;

    (void)arg;
    t = kp_mono_usec() + watchdog.usec;
    until.tv_sec = (time_t)(t / KP_USEC_PER_SEC);
    until.tv_nsec = (long)(t % KP_USEC_PER_SEC) * 1000;
    pthread_mutex_lock(&watchdog.mu);
    while (!watchdog.disarmed && r != ETIMEDOUT)
        r = pthread_cond_timedwait(&watchdog.cond, &watchdog.mu, &until);
    if (!watchdog.disarmed) {
        /* The last resort: something did not stop in time. Writes are fenced already when the
         * controllers got as far as the Lease; otherwise the Lease expires on its own. */
        kp_log_error("shutdown did not finish within --shutdown-timeout; exiting now",
                     KP_LF("timeout_ms", watchdog.usec / KP_USEC_PER_MSEC), KP_LF("code", 1));
        _exit(1);
    }
    pthread_mutex_unlock(&watchdog.mu);
    return NULL;
}

/* Arms the watchdog for usec. A watchdog that cannot start is logged: the shutdown goes on. */
static void watchdog_arm(uint64_t usec)
{
    pthread_condattr_t ca;
    int r;

    watchdog.usec = usec;
    pthread_condattr_init(&ca);
    (void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* kp_mono_usec's clock */
    pthread_cond_init(&watchdog.cond, &ca);
    pthread_condattr_destroy(&ca);
    if ((r = pthread_create(&watchdog.thread, NULL, watchdog_main, NULL)) != 0) {
        kp_log_error_errno(-r, "cannot start the shutdown watchdog; shutting down without it");
        pthread_cond_destroy(&watchdog.cond);
        return;
    }
    watchdog.started = true;
}

static void watchdog_disarm(void)
{
    if (!watchdog.started)
        return;
    pthread_mutex_lock(&watchdog.mu);
    watchdog.disarmed = true;
    pthread_cond_signal(&watchdog.cond);
    pthread_mutex_unlock(&watchdog.mu);
    pthread_join(watchdog.thread, NULL);
    pthread_cond_destroy(&watchdog.cond);
    watchdog.started = false;
}

/* One API round-trip for controllers running without election: GET /version. */
static bool api_ping(struct kp_client *c)
{
    struct kp_http_response resp;
    struct kp_error err = KP_ERROR_INIT;
    int r;

    kp_http_response_init(&resp);
    r = kp_client_request(c, "GET", "/version", NULL, NULL, 0, &resp, &err);
    if (r < 0)
        kp_log_warn_rl("api-ping", "API server not reachable",
                       KP_LF("error", err.message ? err.message : kp_strerror(r)));
    kp_http_response_done(&resp);
    kp_error_done(&err);
    return r == 0;
}

struct run {
    const struct kp_controller_options *o;
    struct shared *sh;
    struct kp_client *client;
    struct kp_leader *leader; /* NULL when election is disabled */
    struct kp_fence *fence;   /* the write fence every clone of client checks */
    struct kp_ctx *proc;      /* cancelled by a signal */
    struct kp_ctx *term;      /* under proc: one leadership term, cancelled by its end */
    const char *lease_ns;
    int sfd;
    int efd; /* eventfd the Lease keeper writes on loss; -1 without election */
};

static int start_controllers(struct run *run)
{
    int r;

    atomic_store(&run->sh->leading, true);
    r = kp_controller_set_start(run->sh->controllers);
    if (r < 0)
        return kp_log_error_errno(r, "cannot start the controllers");
    kp_log_info("controllers started", KP_LF("count", kp_controller_defs_count));
    return 0;
}

/* Leadership ended without our consent (the keeper closed the fence and woke us): stop every
 * controller, which can no longer write anyway, and stand by. The Lease is not touched. */
static void stand_down(struct run *run)
{
    const char *holder;

    /* First of all: no SSH job goes on and no reconcile starts one (the fence is closed
     * already, so they could not write anyway). */
    kp_ctx_cancel(run->term);
    (void)kp_leader_keep_stop(run->leader); /* joins; the keeper has ended already */
    holder = kp_leader_observed_holder(run->leader);
    kp_log_error("leader Lease lost; writes fenced, stopping the controllers and standing by",
                 KP_LF("lease", run->o->leader_election_name),
                 KP_LF("holder", holder ? holder : ""));
    /* Not leading from this instant (the metric, readiness), even though stopping the
     * controllers takes a few seconds: the informers' watches end one after another. */
    atomic_store(&run->sh->leading, false);
    kp_controller_set_stop(run->sh->controllers);
    kp_log_info("standing by", KP_LF("lease", run->o->leader_election_name));
}

/* The main loop; returns the exit code. */
static int run_loop(struct run *run)
{
    const struct kp_controller_options *o = run->o;
    struct kp_backoff jitter;
    uint64_t wait = 0;
    bool leading = false;
    int sig = 0, code = KP_EXIT_OK;

    kp_backoff_init(&jitter, o->leader_election_retry_period, o->leader_election_retry_period);
    if (!run->leader) {
        atomic_store(&run->sh->election_ok, true);
        if (start_controllers(run) < 0)
            return KP_EXIT_FAILURE;
        leading = true;
    }
    for (;;) {
        struct kp_error err = KP_ERROR_INIT;
        bool is_leader = false;
        enum wake w;
        int r;

        w = wait_event(run->sfd, run->efd, wait, &sig);
        if (w == WAKE_SIGNAL)
            break;
        wait = o->leader_election_retry_period;
        if (!run->leader) {
            if (!atomic_load(&run->sh->api_ok))
                atomic_store(&run->sh->api_ok, api_ping(run->client));
            continue;
        }
        if (leading) {
            /* The keeper renews; this thread only watches for its loss notice. */
            atomic_store(&run->sh->api_ok, kp_leader_keep_status(run->leader) == 0);
            if (w == WAKE_LEASE_LOST || kp_leader_keep_lost(run->leader)) {
                stand_down(run);
                leading = false;
            }
            continue;
        }
        r = kp_leader_try(run->leader, &is_leader, &err);
        atomic_store(&run->sh->api_ok, r == 0);
        if (r == 0)
            atomic_store(&run->sh->election_ok, true);
        else
            kp_log_warn_rl("lease", "cannot read or write the leader Lease",
                           KP_LF("lease", o->leader_election_name),
                           KP_LF("namespace", run->lease_ns),
                           KP_LF("error", err.message ? err.message : kp_strerror(r)));
        kp_error_done(&err);
        if (r == 0 && is_leader) {
            kp_log_info("became leader", KP_LF("lease", o->leader_election_name),
                        KP_LF("namespace", run->lease_ns),
                        KP_LF("identity", o->leader_election_identity));
            /* The keeper renews from here on, on its own thread, so a start-up that blocks
             * while the informers sync (minutes with a large cluster) keeps the Lease. */
            /* A fresh term: nothing runs under the last one's context any more (its stop joined
             * everything). Made before the keeper starts, so a loss it sees at once is not
             * forgotten: it cancels the term, which ends even a start-up that blocks in the
             * informers' sync. */
            kp_ctx_init(run->term, run->proc, kp_deadline_never());
            if ((r = kp_leader_keep_start(run->leader, run->fence, run->term, run->efd)) < 0) {
                (void)kp_log_error_errno(r, "cannot start the Lease keeper");
                code = KP_EXIT_FAILURE;
                break;
            }
            leading = true;
            if (start_controllers(run) < 0) {
                /* A start that failed because the Lease went while it blocked (the API server
                 * went away during the sync: the keeper cancelled the term, which ends the
                 * sync's wait) is a loss like any other, not a failure. */
                if (kp_leader_keep_lost(run->leader)) {
                    stand_down(run);
                    leading = false;
                    continue;
                }
                code = KP_EXIT_FAILURE;
                break;
            }
            continue;
        }
        if (r == 0)
            kp_log_debug("standing by", KP_LF("holder", kp_leader_observed_holder(run->leader)
                                                            ? kp_leader_observed_holder(run->leader)
                                                            : ""));
        /* client-go jitters the retry period by up to 1.2x so candidates do not move in step. */
        wait = o->leader_election_retry_period +
               kp_rand_below(&jitter.rng, o->leader_election_retry_period / 5 + 1);
    }

    if (sig > 0)
        kp_log_info("shutting down", KP_LF("signal", strsignal(sig)));
    /* Every SSH job ends within a poll slice and no reconcile starts another; the rest of the
     * shutdown is bounded by the watchdog, a last resort. */
    kp_ctx_cancel(run->proc);
    watchdog_arm(o->shutdown_timeout);
    /* Controllers stop first, while the keeper still renews: what they finish is written under
     * a Lease we hold. Then the keeper, then the fence, and only then the release. */
    kp_controller_set_stop(run->sh->controllers);
    atomic_store(&run->sh->leading, false);
    if (run->leader && leading && kp_leader_keep_stop(run->leader)) {
        enum kp_leader_release rel = KP_LEADER_NOT_LEADING;
        int r;
        const char *holder;

        kp_fence_set(run->fence, KP_FENCE_CLOSED);
        r = kp_leader_release(run->leader, &rel);
        holder = kp_leader_observed_holder(run->leader);
        /* Say what happened: a Lease that another replica took over is not ours to release. */
        if (r < 0)
            kp_log_warn_errno(r, "cannot release the leader Lease; it expires on its own",
                              KP_LF("lease", o->leader_election_name));
        else if (rel == KP_LEADER_RELEASED)
            kp_log_info("released the leader Lease", KP_LF("lease", o->leader_election_name));
        else if (rel == KP_LEADER_TAKEN && holder)
            kp_log_info("the leader Lease already belongs to another replica; nothing to release",
                        KP_LF("lease", o->leader_election_name), KP_LF("holder", holder));
        else if (rel == KP_LEADER_TAKEN)
            kp_log_info("the leader Lease no longer names this replica; nothing to release",
                        KP_LF("lease", o->leader_election_name));
        else if (rel == KP_LEADER_GONE)
            kp_log_info("the leader Lease is gone; nothing to release",
                        KP_LF("lease", o->leader_election_name));
    }
    return code;
}

int main(int argc, char **argv)
{
    struct kp_controller_options o;
    struct kp_buf err = KP_BUF_INIT(4096), text = KP_BUF_INIT(1u << 20);
    struct kp_api_config api;
    struct shared sh;
    struct kp_fence fence;
    struct kp_ctx proc_ctx, term_ctx;
    struct run run = {.o = &o,
                      .sh = &sh,
                      .fence = &fence,
                      .proc = &proc_ctx,
                      .term = &term_ctx,
                      .sfd = -1,
                      .efd = -1};
    struct kp_client *client = NULL, *lclient = NULL;
    struct kp_leader *leader = NULL;
    struct kp_metrics *metrics = NULL;
    struct kp_health *health = NULL;
    struct kp_http_server *http_a = NULL, *http_b = NULL;
    struct kp_controller_env env;
    struct kp_registry *informers = NULL;
    enum kp_options_action action = KP_OPTIONS_RUN;
    enum kp_log_level level = KP_LOG_INFO;
    int code = KP_EXIT_FAILURE, r;

    memset(&api, 0, sizeof(api));
    memset(&sh, 0, sizeof(sh));
    atomic_init(&sh.api_ok, false);
    atomic_init(&sh.election_ok, false);
    atomic_init(&sh.leading, false);
    kp_options_init(&o);
    kp_fence_init(&fence, KP_FENCE_CLOSED);
    kp_ctx_init(&proc_ctx, NULL, kp_deadline_never());
    kp_ctx_init(&term_ctx, &proc_ctx, kp_deadline_never());

    /* Signals first: every thread created from here on inherits the blocked mask. */
    run.sfd = setup_signals();
    if (run.sfd < 0) {
        (void)kp_log_error_errno(run.sfd, "cannot set up signal handling");
        goto out;
    }

    r = kp_options_parse(&o, argc, (const char *const *)argv, (const char *const *)environ, &action,
                         &err);
    if (r < 0) {
        fprintf(stderr, "kpssh-controller: %s\n",
                r == -ENOMEM ? "out of memory" : kp_buf_str(&err));
        code = r == -ENOMEM ? KP_EXIT_FAILURE : KP_EXIT_USAGE;
        goto out;
    }
    if (action == KP_OPTIONS_HELP) {
        if (kp_options_help("kpssh-controller", &text) == 0)
            fputs(kp_buf_str(&text), stdout);
        code = fflush(stdout) == 0 ? KP_EXIT_OK : KP_EXIT_FAILURE;
        goto out;
    }
    if (action == KP_OPTIONS_VERSION) {
        printf("kpssh-controller %s\n", KP_VERSION);
        code = fflush(stdout) == 0 ? KP_EXIT_OK : KP_EXIT_FAILURE;
        goto out;
    }

    if (kp_log_parse_level(o.log_level, &level) < 0)
        level = KP_LOG_INFO; /* cannot happen: the table allows only parseable levels */
    kp_log_set_level(level);
    kp_log_set_format(strcmp(o.log_format, "text") == 0 ? KP_LOG_FORMAT_TEXT : KP_LOG_FORMAT_JSON);
    if (!*o.leader_election_identity) {
        char *id = NULL;

        if ((r = make_identity(o.pod_name, &id)) < 0) {
            (void)kp_log_error_errno(r, "cannot make a leader-election identity");
            goto out;
        }
        kp_free(o.leader_election_identity);
        o.leader_election_identity = id;
    }
    run.lease_ns = *o.leader_election_namespace ? o.leader_election_namespace : o.pool_namespace;
    kp_log_info("starting kpssh-controller", KP_LF("version", KP_VERSION),
                KP_LF("identity", o.leader_election_identity));
    if ((r = kp_options_log(&o)) < 0) {
        (void)kp_log_error_errno(r, "cannot log the effective configuration");
        goto out;
    }

    if (api_config_load(&o, &api) < 0)
        goto out;
    if (o.token) {
        api.topts.token = static_token_fn;
        api.topts.token_userdata = o.token;
    }
    api.topts.qps = o.kube_client_qps;
    api.topts.burst = (unsigned)o.kube_client_burst;
    if ((r = kp_client_new(&api.topts, &client)) < 0) {
        (void)kp_log_error_errno(r, "cannot create the API client",
                                 KP_LF("server", api.topts.server));
        goto out;
    }
    kp_log_info("API client ready", KP_LF("server", api.topts.server), KP_LF("source", api.source));
    run.client = client;
    /* Every clone of client (informers, workers, event recorders) is made after this and
     * inherits the fence: without election it never closes; with it, it is open only while
     * the Lease keeper vouches for the Lease. */
    if (o.disable_leader_election)
        kp_fence_set(&fence, KP_FENCE_OPEN);
    kp_client_set_fence(client, &fence);

    if (!o.disable_leader_election) {
        /* The Lease gets a client of its own: no client-side rate limit (controllers' traffic
         * must never delay a renewal) and a request deadline well inside the renew deadline,
         * so a hung request cannot outlast the Lease. */
        struct kp_transport_opts lo = api.topts;

        lo.qps = 0;
        lo.timeout_usec = KP_MIN(o.leader_election_renew_deadline / 2, KP_LEADER_TIMEOUT_MAX_USEC);
        if ((r = kp_client_new(&lo, &lclient)) < 0) {
            (void)kp_log_error_errno(r, "cannot create the leader-election client");
            goto out;
        }
        r = kp_leader_new(lclient,
                          &(struct kp_leader_opts){
                              .ns = run.lease_ns,
                              .name = o.leader_election_name,
                              .identity = o.leader_election_identity,
                              .lease_usec = o.leader_election_lease_duration,
                              .renew_deadline_usec = o.leader_election_renew_deadline,
                              .retry_usec = o.leader_election_retry_period,
                          },
                          &leader);
        if (r < 0) {
            (void)kp_log_error_errno(r, "cannot set up leader election");
            goto out;
        }
        run.leader = leader;
        run.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (run.efd < 0) {
            (void)kp_log_error_errno(-errno, "cannot create the Lease keeper's eventfd");
            goto out;
        }
    }

    if ((r = kp_metrics_new(&metrics)) < 0 || (r = register_metrics(metrics, &sh)) < 0) {
        (void)kp_log_error_errno(r, "cannot set up metrics");
        goto out;
    }
    /* The informers are the process's: every controller's setup registers on this one
     * registry, and the controller set starts and stops it around them. */
    if ((r = kp_registry_new(client, &informers)) < 0) {
        (void)kp_log_error_errno(r, "cannot set up the informers");
        goto out;
    }
    env = (struct kp_controller_env){.client = client,
                                     .metrics = metrics,
                                     .informers = informers,
                                     .opts = &o,
                                     .identity = o.leader_election_identity,
                                     .ctx = &term_ctx};
    if (kp_controller_set_new(kp_controller_defs, kp_controller_defs_count, &env, &sh.controllers) <
        0)
        goto out; /* logged by the set with the controller's name */
    if ((r = kp_health_new(&health)) < 0 ||
        (r = kp_health_add_check(health, "apiserver", check_api, &sh)) < 0 ||
        (r = kp_health_add_check(health, "leader-election", check_election, &sh)) < 0 ||
        (r = kp_health_add_check(health, "controllers", check_controllers, &sh)) < 0) {
        (void)kp_log_error_errno(r, "cannot set up readiness checks");
        goto out;
    }
    if (start_http(&o, metrics, health, &http_a, &http_b) < 0)
        goto out;

    code = run_loop(&run);
    kp_log_info("exiting", KP_LF("code", code));

out:
    /* Order: the HTTP threads read the shared state, the set and the registry, so they stop
     * first; then the controllers' states, the Lease, the clients and what they borrowed. */
    http_b = kp_http_server_free(http_b);
    http_a = kp_http_server_free(http_a);
    health = kp_health_free(health);
    sh.controllers = kp_controller_set_free(sh.controllers);
    informers = kp_registry_free(informers); /* after the controllers: handlers point there */
    metrics = kp_metrics_free(metrics);
    leader = kp_leader_free(leader);
    lclient = kp_client_free(lclient);
    client = kp_client_free(client);
    kp_api_config_done(&api);
    kp_options_done(&o);
    kp_buf_done(&err);
    kp_buf_done(&text);
    if (run.sfd >= 0)
        close(run.sfd);
    if (run.efd >= 0)
        close(run.efd);
    watchdog_disarm();
    return code;
}
