/* DESIGN: `kpssh get pool [-w]`, the operator's view of the SSH host pool.
 *
 * What: parses the verb's options, finds credentials as kpssh-controller does
 * (k8s/apiconfig.h), fills informers (k8s/informer.h) of the five kinds the view reads
 * (SSHHosts of the pool namespace, SSHNodeClasses, NodeClaims, Nodes, and the bound pods that
 * have not finished), and renders a snapshot of their stores through poolview.h: once, or with
 * -w again after each change.
 *
 * Why informers for a one-shot listing too: the snapshot the first draw of -w shows and the one
 * `get pool` prints come from the same code, and the informers already list page by page and
 * keep only projections (STYLE.md section 3), so a large cluster costs the CLI what it costs the
 * controller. Before the informers start, one LIST of a single item per kind checks access, so
 * a missing CRD or a forbidden kind is a clear one-line error instead of a sync that never ends.
 *
 * Threads: the informers' handlers run on their threads and only write to an eventfd; the main
 * thread waits on that and on a signalfd (SIGINT and SIGTERM are blocked before any thread
 * starts, so no handler code runs in a signal handler), coalesces changes for
 * KP_GET_POOL_DEBOUNCE_USEC, snapshots the stores and redraws. Ctrl-C ends a watch with 0. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj.h"
#include "cmd/kpssh/poolview.h"
#include "cmd/kpssh/verbs.h"
#include "k8s/apiconfig.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/rfc3339.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "provider/ssh/obj-kpssh.h"

#define KP_GET_POOL_NS_DEFAULT "kpssh-system" /* as kpssh-controller's --pool-namespace */
#define KP_GET_POOL_NS_ENV "KPSSH_POOL_NAMESPACE"
#define KP_GET_POOL_DEBOUNCE_USEC (200 * 1000)
#define KP_GET_POOL_SYNC_USEC (60 * KP_USEC_PER_SEC)
/* Pods the view counts: bound and not finished. The builder checks the same again (and the
 * deletion timestamp, which no field selector can); this only keeps the others out of memory. */
#define KP_GET_POOL_POD_FIELDS "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"

struct get_pool_opts {
    const char *ns;
    const char *kubeconfig;
    const char *context;
    enum kp_poolview_format format;
    bool watch;
    bool no_color;
    bool color; /* --color: colour also when stdout is not a terminal */
};

enum kind_ix { K_HOSTS, K_CLASSES, K_CLAIMS, K_NODES, K_PODS, K_N };

struct kind_def {
    const struct kp_resource *res;
    kp_project_fn project;
    const char *view_kind;
    bool in_pool_ns;
    const char *fields;
};

static const struct kind_def *kind_defs(void)
{
    static struct kind_def defs[K_N];

    /* Filled at run time: the resources are extern objects, not constant expressions. */
    defs[K_HOSTS] =
        (struct kind_def){&KP_RES_SSHHOST, kp_sshhost_project, kp_kind_sshhost, true, NULL};
    defs[K_CLASSES] = (struct kind_def){&KP_RES_SSHNODECLASS, kp_sshnodeclass_project,
                                        kp_kind_sshnodeclass, false, NULL};
    defs[K_CLAIMS] =
        (struct kind_def){&KP_RES_NODECLAIM, kp_nodeclaim_project, kp_kind_nodeclaim, false, NULL};
    defs[K_NODES] = (struct kind_def){&KP_RES_NODE, kp_node_project, kp_kind_node, false, NULL};
    defs[K_PODS] =
        (struct kind_def){&KP_RES_POD, kp_pod_project, kp_kind_pod, false, KP_GET_POOL_POD_FIELDS};
    return defs;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(
        f,
        "Usage: %s get pool [options]\n"
        "\n"
        "Every SSHHost of the pool namespace with its class, state, the NodeClaim and Node\n"
        "holding it, the pods on that Node, attached vCPUs and their cost rate, and totals.\n"
        "Colours (on a terminal): green warm, amber joined, blue kpssh at work, red failed.\n"
        "\n"
        "Options:\n"
        "  -n, --namespace NS   pool namespace (default: $%s, else %s)\n"
        "  -o, --output FMT     wide, json or yaml (default: a table)\n"
        "  -w, --watch          redraw on every change until Ctrl-C\n"
        "      --no-color       no ANSI colour (also when $NO_COLOR is set or stdout is not a\n"
        "                       terminal)\n"
        "      --color          ANSI colour also when stdout is not a terminal (a pipe into\n"
        "                       a pager or a log); --no-color and $NO_COLOR win\n"
        "      --kubeconfig F   kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)\n"
        "      --context NAME   kubeconfig context (default: its current-context)\n"
        "  -h, --help           this text\n",
        prog, KP_GET_POOL_NS_ENV, KP_GET_POOL_NS_DEFAULT);
}

static int parse_opts(int argc, char **argv, const char *prog, struct get_pool_opts *o,
                      bool *ret_help)
{
    const char *env_ns = getenv(KP_GET_POOL_NS_ENV);
    const char *v;
    int i;
    size_t n;

    memset(o, 0, sizeof(*o));
    *ret_help = false;
    o->ns = env_ns && *env_ns ? env_ns : KP_GET_POOL_NS_DEFAULT;
    for (i = 0; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            *ret_help = true;
            return 0;
        } else if (strcmp(a, "-w") == 0 || strcmp(a, "--watch") == 0) {
            o->watch = true;
        } else if (strcmp(a, "--no-color") == 0) {
            o->no_color = true;
        } else if (strcmp(a, "--color") == 0) {
            o->color = true;
        } else if ((n = kp_cli_opt_is(a, "-n", "--namespace")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--namespace", n, prog, "")))
                return -EINVAL;
            if (!*v) {
                fprintf(stderr, "%s: --namespace must not be empty\n", prog);
                return -EINVAL;
            }
            o->ns = v;
        } else if ((n = kp_cli_opt_is(a, "-o", "--output")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--output", n, prog, "")))
                return -EINVAL;
            if (!*v || kp_poolview_parse_format(v, &o->format) < 0) {
                fprintf(stderr, "%s: --output must be wide, json or yaml, not \"%s\"\n", prog, v);
                return -EINVAL;
            }
        } else if ((n = kp_cli_opt_is(a, NULL, "--kubeconfig")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--kubeconfig", n, prog, "")))
                return -EINVAL;
            o->kubeconfig = v;
        } else if ((n = kp_cli_opt_is(a, NULL, "--context")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--context", n, prog, "")))
                return -EINVAL;
            o->context = v;
        } else {
            fprintf(stderr, "%s: get pool: unknown %s \"%s\" (see --help)\n", prog,
                    a[0] == '-' ? "option" : "argument", a);
            return -EINVAL;
        }
    }
    return 0;
}

/* --- the informers ---------------------------------------------------------------------------- */

struct pool_watch {
    struct kp_informer *inf[K_N];
    int efd;           /* written by every handler: "something changed" */
    struct kp_buf was; /* the last drawn view at a fixed clock: what a redraw compares */
};

static void notify(void *ctx)
{
    const struct pool_watch *w = ctx;
    uint64_t one = 1;

    /* An eventfd write only fails when the counter would overflow, and then it is non-zero
     * anyway: the wake-up the write was for is already pending. */
    (void)!write(w->efd, &one, sizeof(one));
}
static void on_add(void *ctx, const struct kp_entry *e)
{
    (void)e;
    notify(ctx);
}
static void on_update(void *ctx, const struct kp_entry *o, const struct kp_entry *n)
{
    (void)o;
    (void)n;
    notify(ctx);
}
static void on_delete(void *ctx, const struct kp_entry *e)
{
    (void)e;
    notify(ctx);
}

static int stop_at_first_page(const struct kp_list_page *page, void *userdata)
{
    (void)page;
    (void)userdata;
    return -ECANCELED;
}

/* One LIST of at most one item: the user may read the kind. Prints why not. */
static int check_access(struct kp_client *c, const struct kind_def *d, const char *ns,
                        const char *prog)
{
    struct kp_list_opts lo = {.limit = 1, .field_selector = d->fields};
    struct kp_error err;
    int r;

    kp_error_init(&err);
    r = kp_client_list(c, d->res, d->in_pool_ns ? ns : NULL, &lo, stop_at_first_page, NULL,
                       /* ret_resource_version= */ NULL, &err);
    if (r == -ECANCELED)
        r = 0;
    if (r < 0) {
        const char *hint = r == -ENOENT ? " (are kpssh's and Karpenter's CRDs installed?)" : "";

        fprintf(stderr, "%s: cannot list %s.%s%s%s: %s%s\n", prog, d->res->resource,
                *d->res->group ? d->res->group : "core", d->in_pool_ns ? " in namespace " : "",
                d->in_pool_ns ? ns : "", err.message ? err.message : kp_strerror(r), hint);
    }
    kp_error_done(&err);
    return r;
}

static void pool_watch_done(struct pool_watch *w)
{
    size_t k;

    for (k = 0; k < K_N; k++)
        if (w->inf[k])
            kp_informer_cancel(w->inf[k]);
    for (k = 0; k < K_N; k++)
        w->inf[k] = kp_informer_free(w->inf[k]);
    if (w->efd >= 0)
        close(w->efd);
    w->efd = -1;
    kp_buf_done(&w->was);
}

/* True when SIGINT or SIGTERM waits on sfd (-1: no signalfd, never). */
static bool signal_pending(int sfd)
{
    struct pollfd p = {.fd = sfd, .events = POLLIN};

    return sfd >= 0 && poll(&p, 1, 0) > 0;
}

/* Starts the informers and waits for their first lists; -ECANCELED when a signal on sfd asks to
 * stop meanwhile (the wait is sliced so Ctrl-C works against a slow API server). */
static int pool_watch_start(struct kp_client *c, const char *ns, const char *prog, int sfd,
                            struct pool_watch *w)
{
    const struct kind_def *defs = kind_defs();
    const struct kp_informer_handler h = {on_add, on_update, on_delete, w};
    uint64_t deadline;
    size_t k;
    int r;

    for (k = 0; k < K_N; k++)
        if ((r = check_access(c, &defs[k], ns, prog)) < 0)
            return r;
    if ((w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        r = -errno;
        fprintf(stderr, "%s: eventfd: %s\n", prog, kp_strerror(r));
        return r;
    }
    for (k = 0; k < K_N; k++) {
        struct kp_informer_opts io = {
            .res = defs[k].res,
            .project = defs[k].project,
            .view_kind = defs[k].view_kind,
            .ns = defs[k].in_pool_ns ? ns : NULL,
            .field_selector = defs[k].fields,
        };

        if ((r = kp_informer_new(c, &io, &w->inf[k])) < 0 ||
            (r = kp_informer_add_handler(w->inf[k], &h)) < 0 ||
            (r = kp_informer_start(w->inf[k])) < 0) {
            fprintf(stderr, "%s: cannot start watching %s: %s\n", prog, defs[k].res->resource,
                    kp_strerror(r));
            return r;
        }
    }
    deadline = kp_mono_usec() + KP_GET_POOL_SYNC_USEC;
    for (k = 0; k < K_N; k++) {
        do {
            uint64_t now = kp_mono_usec(), left = now < deadline ? deadline - now : 1;

            if (signal_pending(sfd))
                return -ECANCELED;
            r = kp_informer_wait_synced(w->inf[k], left < 100000 ? left : 100000);
        } while (r == -ETIMEDOUT && kp_mono_usec() < deadline);
        if (r < 0) {
            fprintf(stderr, "%s: %s did not list within %llu s: %s\n", prog, defs[k].res->resource,
                    (unsigned long long)(KP_GET_POOL_SYNC_USEC / KP_USEC_PER_SEC), kp_strerror(r));
            return r;
        }
    }
    return 0;
}

/* --- one draw ----------------------------------------------------------------------------------- */

struct snapshot {
    struct kp_store_list lists[K_N];
    const void **views[K_N];
};

static void snapshot_done(struct snapshot *s)
{
    size_t k;

    for (k = 0; k < K_N; k++) {
        kp_free(s->views[k]);
        kp_store_list_free(&s->lists[k]);
    }
    memset(s, 0, sizeof(*s));
}

static int snapshot_take(struct pool_watch *w, struct snapshot *s, struct kp_poolview_in *in)
{
    size_t k, i;
    int r;

    memset(s, 0, sizeof(*s));
    for (k = 0; k < K_N; k++) {
        struct kp_store_list *l = &s->lists[k];

        if ((r = kp_store_list(kp_informer_store(w->inf[k]), l)) < 0)
            return r;
        if (l->n && !(s->views[k] = kp_calloc(l->n, sizeof(*s->views[k]))))
            return -ENOMEM;
        for (i = 0; i < l->n; i++) {
            switch (k) { /* each view accessor checks the entry's kind */
            case K_HOSTS:
                s->views[k][i] = kp_sshhost_view(l->v[i]);
                break;
            case K_CLASSES:
                s->views[k][i] = kp_sshnodeclass_view(l->v[i]);
                break;
            case K_CLAIMS:
                s->views[k][i] = kp_nodeclaim_view(l->v[i]);
                break;
            case K_NODES:
                s->views[k][i] = kp_node_view(l->v[i]);
                break;
            default:
                s->views[k][i] = kp_pod_view(l->v[i]);
                break;
            }
        }
    }
    in->hosts = (const struct kp_sshhost_view *const *)s->views[K_HOSTS];
    in->n_hosts = s->lists[K_HOSTS].n;
    in->classes = (const struct kp_sshnodeclass_view *const *)s->views[K_CLASSES];
    in->n_classes = s->lists[K_CLASSES].n;
    in->claims = (const struct kp_nodeclaim_view *const *)s->views[K_CLAIMS];
    in->n_claims = s->lists[K_CLAIMS].n;
    in->nodes = (const struct kp_node_view *const *)s->views[K_NODES];
    in->n_nodes = s->lists[K_NODES].n;
    in->pods = (const struct kp_pod_view *const *)s->views[K_PODS];
    in->n_pods = s->lists[K_PODS].n;
    return 0;
}

/* Renders the stores' current state to stdout; with a header (and a cleared screen on a
 * terminal) when watching, and then only when the view differs from the last one drawn. */
static int draw(struct pool_watch *w, const struct get_pool_opts *o, bool tty, bool colour,
                const char *prog)
{
    struct kp_buf out = KP_BUF_INIT(KP_POOLVIEW_MAX_OUTPUT + 4096);
    struct kp_poolview_in in = {0};
    struct kp_poolview view = {0};
    struct snapshot snap;
    int64_t now = (int64_t)kp_real_usec();
    char ts[40] = "";
    int r;

    if ((r = snapshot_take(w, &snap, &in)) < 0 || (r = kp_poolview_build(&in, &view)) < 0)
        goto out;
    if (o->watch) {
        /* Most events change nothing the view shows (a pod's status, a Node's heartbeat):
         * no new table then. The comparison renders the chosen format at a fixed clock, so
         * ages do not count. */
        struct kp_buf is = KP_BUF_INIT(KP_POOLVIEW_MAX_OUTPUT);

        if ((r = kp_poolview_render(&view, o->ns, o->format, 0, 0, &is)) < 0) {
            kp_buf_done(&is);
            goto out;
        }
        if (w->was.data && is.len == w->was.len && memcmp(is.data, w->was.data, is.len) == 0) {
            kp_buf_done(&is);
            goto out;
        }
        kp_buf_done(&w->was);
        w->was = is;

        if (kp_rfc3339_format(now, KP_RFC3339_SECONDS, ts, sizeof(ts)) < 0)
            ts[0] = '\0';
        if (tty && (r = kp_buf_puts(&out, "\033[H\033[2J")) < 0)
            goto out;
        if (o->format == KP_POOLVIEW_YAML)
            r = kp_buf_puts(&out, "---\n");
        else if (o->format != KP_POOLVIEW_JSON)
            r = kp_buf_printf(&out, "%s get pool -n %s -w    %s\n", prog, o->ns, ts);
        if (r < 0)
            goto out;
    }
    if ((r = kp_poolview_render(&view, o->ns, o->format, colour ? KP_POOLVIEW_COLOUR : 0, now,
                                &out)) < 0)
        goto out;
    if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len)
        r = -EIO;
    if (fflush(stdout) != 0)
        r = -EIO;
out:
    if (r < 0 && r != -EIO)
        fprintf(stderr, "%s: cannot draw the pool: %s\n", prog, kp_strerror(r));
    kp_buf_done(&out);
    kp_poolview_done(&view);
    snapshot_done(&snap);
    return r;
}

/* Drains the eventfd; true when it had counted a change. */
static bool drain(int efd)
{
    uint64_t n = 0;

    return read(efd, &n, sizeof(n)) == (ssize_t)sizeof(n) && n > 0;
}

/* Redraws after each burst of changes until SIGINT or SIGTERM arrives on sfd. */
static int watch_loop(struct pool_watch *w, int sfd, const struct get_pool_opts *o, bool tty,
                      bool colour, const char *prog)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = w->efd, .events = POLLIN}};
        int n = poll(p, 2, -1);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (p[0].revents)
            return 0; /* Ctrl-C or SIGTERM: the watch ends normally */
        if (!p[1].revents || !drain(w->efd))
            continue;
        /* Coalesce: a scale-up changes several objects within a few milliseconds. */
        n = poll(p, 1, (int)(KP_GET_POOL_DEBOUNCE_USEC / 1000));
        if (n > 0)
            return 0;
        (void)drain(w->efd); /* changes in the quiet period are in this draw */
        if (draw(w, o, tty, colour, prog) < 0)
            return -EIO;
    }
}

static int get_pool(int argc, char **argv, const char *prog)
{
    struct get_pool_opts o;
    struct kp_api_config api = {0};
    struct kp_client *client = NULL;
    struct pool_watch w = {.efd = -1, .was = KP_BUF_INIT(KP_POOLVIEW_MAX_OUTPUT)};
    const char *no_color_env = getenv("NO_COLOR");
    char *msg = NULL;
    sigset_t set;
    bool help, tty, colour;
    int sfd = -1, code = KP_CLI_FAILURE, r;

    if (parse_opts(argc, argv, prog, &o, &help) < 0)
        return KP_CLI_USAGE;
    if (help) {
        usage(stdout, prog);
        return fflush(stdout) == 0 ? KP_CLI_OK : KP_CLI_FAILURE;
    }
    tty = isatty(STDOUT_FILENO) == 1;
    colour = (tty || o.color) && !o.no_color && !(no_color_env && *no_color_env);

    /* Blocked before any informer thread exists, so every thread inherits the mask and the
     * signals wait in the signalfd for the main thread. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    if (o.watch) {
        if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 ||
            (sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
            fprintf(stderr, "%s: cannot set up signal handling: %s\n", prog, strerror(errno));
            goto out;
        }
    }
    if ((r = kp_api_config_load(o.kubeconfig, o.context, getenv("KUBECONFIG"), getenv("HOME"), &api,
                                &msg)) < 0) {
        fprintf(stderr, "%s: %s\n", prog, msg ? msg : kp_strerror(r));
        goto out;
    }
    if ((r = kp_client_new(&api.topts, &client)) < 0) {
        fprintf(stderr, "%s: cannot create the API client for %s: %s\n", prog,
                api.topts.server ? api.topts.server : "?", kp_strerror(r));
        goto out;
    }
    if ((r = pool_watch_start(client, o.ns, prog, sfd, &w)) < 0) {
        if (r == -ECANCELED)
            code = KP_CLI_OK; /* Ctrl-C before the first table: a normal end */
        goto out;
    }
    if (draw(&w, &o, tty, colour, prog) < 0)
        goto out;
    if (o.watch && watch_loop(&w, sfd, &o, tty, colour, prog) < 0)
        goto out;
    code = KP_CLI_OK;
out:
    pool_watch_done(&w);
    client = kp_client_free(client);
    kp_api_config_done(&api);
    kp_free(msg);
    if (sfd >= 0)
        close(sfd);
    return code;
}

int kp_cli_get(int argc, char **argv, const char *prog)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
            printf("Usage: %s get pool [options]   (see %s get pool --help)\n", prog, prog);
            return fflush(stdout) == 0 ? KP_CLI_OK : KP_CLI_FAILURE;
        }
        fprintf(stderr, "%s: get: which resource? Try: %s get pool\n", prog, prog);
        return KP_CLI_USAGE;
    }
    if (strcmp(argv[1], "pool") == 0 || strcmp(argv[1], "pools") == 0)
        return get_pool(argc - 2, argv + 2, prog);
    fprintf(stderr, "%s: get: unknown resource \"%s\" (known: pool)\n", prog, argv[1]);
    return KP_CLI_USAGE;
}
