/* DESIGN: the controller's option table (contract in options.h).
 *
 * What: one static table of every option; a parser that applies defaults, the environment and
 * the command line in that order through the same value parser; the --help text and the
 * effective-configuration log line, both generated from the table.
 *
 * Why this way: Redis's config table and h2o's configurators show that one table keeps flags,
 * environment, help and documentation from drifting apart; docs/operations.md is the --help
 * output. Defaults are text parsed like user input, so a default outside its own bounds fails
 * the unit test rather than shipping.
 *
 * Invariants: a value is stored only after it parsed and passed its bounds; a string field is
 * replaced (old copy freed) on each later source; a secret is held in a struct kp_secret, which
 * registers it with the log redactor, and its text never enters an error message. */
#include "cmd/controller/options.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "api/duration.h"
#include "provider/ssh/token.h"

#define KP_OPT_ENV_PREFIX "KPSSH_"
#define KP_OPT_NAME_MAX 64

#define USEC_S KP_USEC_PER_SEC
#define USEC_H (3600 * KP_USEC_PER_SEC)

#define OFF(field) offsetof(struct kp_controller_options, field)
#define KP_OPT_STR(n, d, field, fl, h)                                                             \
    {                                                                                              \
        .name = (n), .type = KP_OPT_STRING, .def = (d), .flags = (fl), .offset = OFF(field),       \
        .help = (h)                                                                                \
    }
#define KP_OPT_SECRET_(n, field, h)                                                                \
    {                                                                                              \
        .name = (n), .type = KP_OPT_SECRET, .def = "", .flags = KP_OPT_SENSITIVE,                  \
        .offset = OFF(field), .help = (h)                                                          \
    }
#define KP_OPT_BOOL_(n, d, field, h)                                                               \
    {                                                                                              \
        .name = (n), .type = KP_OPT_BOOL, .def = (d), .offset = OFF(field), .help = (h)            \
    }
#define KP_OPT_UINT(n, d, lo, hi, field, h)                                                        \
    {                                                                                              \
        .name = (n), .type = KP_OPT_UINT, .def = (d), .min = (lo), .max = (hi),                    \
        .offset = OFF(field), .help = (h)                                                          \
    }
#define KP_OPT_DOUBLE_(n, d, lo, hi, field, h)                                                     \
    {                                                                                              \
        .name = (n), .type = KP_OPT_DOUBLE, .def = (d), .dmin = (lo), .dmax = (hi),                \
        .offset = OFF(field), .help = (h)                                                          \
    }
#define KP_OPT_DURATION_(n, d, lo, hi, field, h)                                                   \
    {                                                                                              \
        .name = (n), .type = KP_OPT_DURATION, .def = (d), .min = (lo), .max = (hi),                \
        .offset = OFF(field), .help = (h)                                                          \
    }
#define KP_OPT_ENUM_(n, d, ch, field, h)                                                           \
    {                                                                                              \
        .name = (n), .type = KP_OPT_ENUM, .def = (d), .choices = (ch), .offset = OFF(field),       \
        .help = (h)                                                                                \
    }

static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const log_formats[] = {"json", "text", NULL};

static const struct kp_option options[] = {
    KP_OPT_STR("kubeconfig", "", kubeconfig, 0,
               "kubeconfig file; empty: $KUBECONFIG, else the in-cluster service account, else "
               "~/.kube/config"),
    KP_OPT_STR("context", "", context, 0, "kubeconfig context; empty: its current-context"),
    KP_OPT_SECRET_("token", token,
                   "bearer token for the API server, replacing the configured credential"),
    KP_OPT_DOUBLE_("kube-client-qps", "200", 1, 100000, kube_client_qps,
                   "client-side limit of API requests per second"),
    KP_OPT_UINT("kube-client-burst", "300", 1, 100000, kube_client_burst,
                "client-side burst of API requests above the QPS limit"),
    KP_OPT_BOOL_("disable-leader-election", "false", disable_leader_election,
                 "run the controllers without holding the leader Lease (one replica only)"),
    KP_OPT_STR("leader-election-name", "kpssh-controller", leader_election_name, 0,
               "name of the leader Lease; one per installation"),
    KP_OPT_STR("leader-election-namespace", "", leader_election_namespace, 0,
               "namespace of the leader Lease; empty: the pool namespace"),
    KP_OPT_STR("pod-name", "", pod_name, 0,
               "this replica's pod name (the chart sets it from metadata.name), which reports "
               "events and starts the holder identity; empty: the host name"),
    KP_OPT_STR("leader-election-identity", "", leader_election_identity, 0,
               "this replica's holder identity; empty: --pod-name (else the host name) plus a "
               "random suffix"),
    KP_OPT_DURATION_("leader-election-lease-duration", "15s", USEC_S, USEC_H,
                     leader_election_lease_duration,
                     "how long a Lease not renewed keeps others from taking over"),
    KP_OPT_DURATION_("leader-election-renew-deadline", "10s", USEC_S, USEC_H,
                     leader_election_renew_deadline,
                     "how long the leader keeps writing while renewals fail, then stands by"),
    KP_OPT_DURATION_("leader-election-retry-period", "2s", 100 * KP_USEC_PER_MSEC, USEC_H,
                     leader_election_retry_period,
                     "interval between attempts to acquire or renew the Lease"),
    KP_OPT_STR("bind-address", "0.0.0.0", bind_address, 0,
               "numeric address the metrics and health endpoints listen on (\"::\" for IPv4 "
               "and IPv6)"),
    KP_OPT_UINT("metrics-port", "8080", 0, 65535, metrics_port,
                "port of /metrics (0: any free port, logged)"),
    KP_OPT_UINT("health-probe-port", "8081", 0, 65535, health_probe_port,
                "port of /healthz and /readyz; equal to metrics-port: one listener for all"),
    KP_OPT_ENUM_("log-level", "info", log_levels, log_level, "least severe level logged"),
    KP_OPT_ENUM_("log-format", "json", log_formats, log_format,
                 "json: one object per line; text: for humans"),
    KP_OPT_STR("pool-namespace", "kpssh-system", pool_namespace, 0,
               "namespace of the SSHHosts and of the controller's own objects"),
    KP_OPT_UINT("workers", "4", 1, 64, workers,
                "reconcile worker threads of each controller (host, node class, startup taint "
                "gate); reconciles make API calls only, SSH runs on the job pool "
                "(--probe-concurrency)"),
    KP_OPT_DURATION_("probe-interval", "2m", USEC_S, 24 * USEC_H, probe_interval,
                     "how often an unclaimed host is probed over SSH"),
    KP_OPT_DURATION_("probe-timeout", "30s", USEC_S, USEC_H, probe_timeout,
                     "deadline of one probe, dial and script together"),
    KP_OPT_UINT("probe-concurrency", "8", 1, 64, probe_concurrency,
                "threads of the SSH job pool: probes and zombie leaves running at the same time, "
                "at most half of them probes of hosts that did not answer last time"),
    KP_OPT_STR("bootstrap-group", KP_TOKEN_GROUP, bootstrap_group, 0,
               "extra group of the bootstrap tokens minted for joins (auth-extra-groups), the "
               "one the bootstrap RBAC binds: system:bootstrappers: then [a-z0-9:-], ending in "
               "[a-z0-9]"),
    KP_OPT_DURATION_("shutdown-timeout", "25s", USEC_S, USEC_H, shutdown_timeout,
                     "last-resort bound on the shutdown after SIGTERM: past it the process logs "
                     "why and exits 1 (a shutdown takes well under a second)"),
    KP_OPT_UINT("core-workers", "16", 1, 256, core_workers,
                "reconcile workers of the NodeClaim lifecycle and Node termination controllers; "
                "they make API calls only, a launch's SSH phases run on the launch pool "
                "(--launch-concurrency)"),
    KP_OPT_UINT("launch-concurrency", "16", 1, 64, launch_concurrency,
                "threads of the launch pool: installs, joins and leaves of NodeClaims running "
                "at the same time (more wait in its queue)"),
    KP_OPT_DURATION_("launch-timeout", "5m", USEC_S, 24 * USEC_H, launch_timeout,
                     "a NodeClaim not Launched this long after its Launched condition last "
                     "changed is deleted (Karpenter's launch timeout)"),
    KP_OPT_DURATION_("registration-ttl", "15m", USEC_S, 24 * USEC_H, registration_ttl,
                     "a launched NodeClaim whose Node has not registered this long after its "
                     "Registered condition last changed is deleted (Karpenter's registration TTL)"),
    KP_OPT_DURATION_("gc-interval", "2m", USEC_S, 24 * USEC_H, gc_interval,
                     "how often NodeClaims whose instance is gone, and Nodes with a providerID "
                     "of ours and no NodeClaim, are collected"),
    KP_OPT_DURATION_("orphan-node-grace", "1m", USEC_S, 24 * USEC_H, orphan_node_grace,
                     "how old a Node with a providerID of ours and no NodeClaim must be before "
                     "garbage collection deletes it (a NodeClaim may still be on its way)"),
};

const struct kp_option *kp_options_table(size_t *ret_n)
{
    *ret_n = KP_ARRAY_SIZE(options);
    return options;
}

static void *field(struct kp_controller_options *o, const struct kp_option *opt)
{
    return (char *)o + opt->offset;
}

static const void *cfield(const struct kp_controller_options *o, const struct kp_option *opt)
{
    return (const char *)o + opt->offset;
}

int kp_option_env_name(const struct kp_option *opt, struct kp_buf *out)
{
    const char *p;
    int r;

    if ((r = kp_buf_puts(out, KP_OPT_ENV_PREFIX)) < 0)
        return r;
    for (p = opt->name; *p; p++) {
        char c = *p == '-' ? '_' : *p;

        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        if ((r = kp_buf_putc(out, c)) < 0)
            return r;
    }
    return 0;
}

void kp_options_init(struct kp_controller_options *o)
{
    memset(o, 0, sizeof(*o));
}

void kp_options_done(struct kp_controller_options *o)
{
    size_t i;

    if (!o)
        return;
    for (i = 0; i < KP_ARRAY_SIZE(options); i++) {
        const struct kp_option *opt = &options[i];

        if (opt->type == KP_OPT_STRING || opt->type == KP_OPT_ENUM) {
            char **s = field(o, opt);

            *s = (kp_free(*s), NULL);
        } else if (opt->type == KP_OPT_SECRET) {
            struct kp_secret **s = field(o, opt);

            *s = kp_secret_free(*s);
        }
    }
    memset(o, 0, sizeof(*o));
}

/* Where a value came from, for error messages: "--workers", "KPSSH_WORKERS" or "default of
 * --workers". */
enum source { SRC_DEFAULT, SRC_ENV, SRC_FLAG };

static int fail(struct kp_buf *err, const struct kp_option *opt, enum source src, const char *value,
                const char *why)
{
    struct kp_buf env = KP_BUF_INIT(KP_OPT_NAME_MAX + sizeof(KP_OPT_ENV_PREFIX));
    int r;

    if (src == SRC_ENV && kp_option_env_name(opt, &env) < 0) {
        kp_buf_done(&env);
        return -ENOMEM;
    }
    if (opt->flags & KP_OPT_SENSITIVE)
        value = NULL; /* a secret is never repeated, not even in an error */
    switch (src) {
    case SRC_DEFAULT:
        r = kp_buf_printf(err, "default of --%s", opt->name);
        break;
    case SRC_ENV:
        r = kp_buf_printf(err, "%s", kp_buf_str(&env));
        break;
    default:
        r = kp_buf_printf(err, "--%s", opt->name);
        break;
    }
    kp_buf_done(&env);
    if (r == 0 && value)
        r = kp_buf_printf(err, "=\"%s\"", value);
    if (r == 0)
        r = kp_buf_printf(err, ": %s", why);
    return r < 0 ? r : -EINVAL;
}

static int parse_bool(const char *v, bool *ret)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *ret = true;
    else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *ret = false;
    else
        return -EINVAL;
    return 0;
}

static int set_value(struct kp_controller_options *o, const struct kp_option *opt, enum source src,
                     const char *v, struct kp_buf *err)
{
    struct kp_buf why = KP_BUF_INIT(256);
    int r = 0;

    switch (opt->type) {
    case KP_OPT_STRING: {
        char **s = field(o, opt);

        if (strchr(v, '\n'))
            return fail(err, opt, src, v, "must be one line");
        return kp_strset(s, v);
    }
    case KP_OPT_SECRET: {
        struct kp_secret **s = field(o, opt);
        struct kp_secret *n = NULL;

        if (!*v) {
            *s = kp_secret_free(*s);
            return 0;
        }
        if ((r = kp_secret_new(v, strlen(v), &n)) < 0)
            return r;
        kp_secret_free(*s);
        *s = n;
        return 0;
    }
    case KP_OPT_BOOL:
        if (parse_bool(v, field(o, opt)) < 0)
            return fail(err, opt, src, v, "expected true or false");
        return 0;
    case KP_OPT_UINT: {
        uint64_t u;

        if (kp_safe_atou64(v, &u) < 0)
            return fail(err, opt, src, v, "expected an unsigned integer");
        if (u < opt->min || u > opt->max) {
            r = kp_buf_printf(&why, "must be between %llu and %llu", (unsigned long long)opt->min,
                              (unsigned long long)opt->max);
            r = r < 0 ? r : fail(err, opt, src, v, kp_buf_str(&why));
            kp_buf_done(&why);
            return r;
        }
        *(uint64_t *)field(o, opt) = u;
        return 0;
    }
    case KP_OPT_DOUBLE: {
        char *end = NULL;
        double d;

        errno = 0;
        d = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(d))
            return fail(err, opt, src, v, "expected a number");
        if (d < opt->dmin || d > opt->dmax) {
            r = kp_buf_printf(&why, "must be between %g and %g", opt->dmin, opt->dmax);
            r = r < 0 ? r : fail(err, opt, src, v, kp_buf_str(&why));
            kp_buf_done(&why);
            return r;
        }
        *(double *)field(o, opt) = d;
        return 0;
    }
    case KP_OPT_DURATION: {
        char lo[KP_DURATION_STRMAX], hi[KP_DURATION_STRMAX];
        int64_t ns;
        uint64_t usec;

        if (kp_duration_parse(v, strlen(v), &ns) < 0 || ns < 0)
            return fail(err, opt, src, v, "expected a duration such as 30s, 2m or 1h30m");
        usec = (uint64_t)ns / 1000;
        if (usec < opt->min || usec > opt->max) {
            if (kp_duration_format((int64_t)opt->min * 1000, lo, sizeof(lo)) < 0 ||
                kp_duration_format((int64_t)opt->max * 1000, hi, sizeof(hi)) < 0)
                return -EINVAL; /* cannot happen: bounds are at most an hour or a day */
            r = kp_buf_printf(&why, "must be between %s and %s", lo, hi);
            r = r < 0 ? r : fail(err, opt, src, v, kp_buf_str(&why));
            kp_buf_done(&why);
            return r;
        }
        *(uint64_t *)field(o, opt) = usec;
        return 0;
    }
    case KP_OPT_ENUM: {
        size_t i;

        for (i = 0; opt->choices[i]; i++)
            if (strcmp(opt->choices[i], v) == 0)
                return kp_strset(field(o, opt), v);
        for (i = 0; opt->choices[i] && r == 0; i++)
            r = kp_buf_printf(&why, "%s%s", i ? ", " : "expected one of ", opt->choices[i]);
        r = r < 0 ? r : fail(err, opt, src, v, kp_buf_str(&why));
        kp_buf_done(&why);
        return r;
    }
    }
    return -EINVAL;
}

static const struct kp_option *find_option(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < KP_ARRAY_SIZE(options); i++)
        if (strlen(options[i].name) == len && memcmp(options[i].name, name, len) == 0)
            return &options[i];
    return NULL;
}

static int apply_env(struct kp_controller_options *o, const char *const *envp, struct kp_buf *err)
{
    struct kp_buf name = KP_BUF_INIT(KP_OPT_NAME_MAX + sizeof(KP_OPT_ENV_PREFIX));
    size_t i, j;
    int r = 0;

    for (i = 0; envp && i < KP_ARRAY_SIZE(options) && r == 0; i++) {
        kp_buf_reset(&name);
        if ((r = kp_option_env_name(&options[i], &name)) < 0 || (r = kp_buf_putc(&name, '=')) < 0)
            break;
        /* The last assignment of a name wins, as getenv's first match would not guarantee for
         * a hand-built environment; real environments hold each name once. */
        for (j = 0; envp[j] && r == 0; j++)
            if (strncmp(envp[j], name.data, name.len) == 0)
                r = set_value(o, &options[i], SRC_ENV, envp[j] + name.len, err);
    }
    kp_buf_done(&name);
    return r;
}

static int check_relations(const struct kp_controller_options *o, struct kp_buf *err)
{
    const char *msg = NULL;
    int r;

    if (o->leader_election_renew_deadline >= o->leader_election_lease_duration)
        msg = "--leader-election-renew-deadline must be shorter than "
              "--leader-election-lease-duration";
    else if (o->leader_election_retry_period >= o->leader_election_renew_deadline)
        msg = "--leader-election-retry-period must be shorter than "
              "--leader-election-renew-deadline";
    else if (o->probe_timeout >= o->probe_interval)
        msg = "--probe-timeout must be shorter than --probe-interval";
    else if (!kp_token_group_valid(o->bootstrap_group))
        /* Checked here rather than at the first join: the API server would accept the token
         * Secret and then refuse every join that uses it. */
        msg = "--bootstrap-group must be system:bootstrappers: followed by [a-z0-9:-], ending in "
              "[a-z0-9]";
    if (!msg)
        return 0;
    r = kp_buf_puts(err, msg);
    return r < 0 ? r : -EINVAL;
}

int kp_options_parse(struct kp_controller_options *o, int argc, const char *const *argv,
                     const char *const *envp, enum kp_options_action *ret_action,
                     struct kp_buf *err)
{
    enum kp_options_action action = KP_OPTIONS_RUN;
    size_t i;
    int a, r = 0;

    for (i = 0; i < KP_ARRAY_SIZE(options) && r == 0; i++)
        r = set_value(o, &options[i], SRC_DEFAULT, options[i].def, err);
    if (r == 0)
        r = apply_env(o, envp, err);
    for (a = 1; a < argc && r == 0; a++) {
        const char *arg = argv[a], *name, *eq, *value;
        const struct kp_option *opt;
        size_t len;

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            action = KP_OPTIONS_HELP;
            continue;
        }
        if (strcmp(arg, "--version") == 0) {
            action = KP_OPTIONS_VERSION;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            r = kp_buf_printf(err, "unexpected argument \"%s\" (options start with --; see --help)",
                              arg);
            r = r < 0 ? r : -EINVAL;
            break;
        }
        name = arg + 2;
        eq = strchr(name, '=');
        len = eq ? (size_t)(eq - name) : strlen(name);
        opt = find_option(name, len);
        if (!opt) {
            r = kp_buf_printf(err, "unknown option --%.*s (see --help)", (int)KP_MIN(len, 128),
                              name);
            r = r < 0 ? r : -EINVAL;
            break;
        }
        if (eq) {
            value = eq + 1;
        } else if (opt->type == KP_OPT_BOOL) {
            value = "true";
        } else if (a + 1 < argc) {
            value = argv[++a];
        } else {
            r = kp_buf_printf(err, "--%s needs a value", opt->name);
            r = r < 0 ? r : -EINVAL;
            break;
        }
        r = set_value(o, opt, SRC_FLAG, value, err);
    }
    if (r == 0 && action == KP_OPTIONS_RUN)
        r = check_relations(o, err);
    if (r < 0)
        return r;
    *ret_action = action;
    return 0;
}

static const char *type_word(const struct kp_option *opt)
{
    switch (opt->type) {
    case KP_OPT_STRING:
    case KP_OPT_SECRET:
        return "string";
    case KP_OPT_BOOL:
        return "";
    case KP_OPT_UINT:
        return "uint";
    case KP_OPT_DOUBLE:
        return "number";
    case KP_OPT_DURATION:
        return "duration";
    case KP_OPT_ENUM:
        return "choice";
    }
    return "";
}

int kp_options_help(const char *prog, struct kp_buf *out)
{
    struct kp_buf env = KP_BUF_INIT(KP_OPT_NAME_MAX + sizeof(KP_OPT_ENV_PREFIX));
    char lo[KP_DURATION_STRMAX], hi[KP_DURATION_STRMAX];
    size_t i, j;
    int r;

    r = kp_buf_printf(out,
                      "Usage: %s [--OPTION=VALUE ...]\n\n"
                      "kpssh-controller runs the kpssh controllers: it elects a leader through a "
                      "Lease,\nserves /metrics, /healthz and /readyz, and logs JSON lines to "
                      "stderr.\n"
                      "Every option may also be set through its environment variable; a flag "
                      "wins.\n\nOptions:\n",
                      prog);
    for (i = 0; i < KP_ARRAY_SIZE(options) && r == 0; i++) {
        const struct kp_option *opt = &options[i];
        const char *tw = type_word(opt);

        kp_buf_reset(&env);
        if ((r = kp_option_env_name(opt, &env)) < 0)
            break;
        r = kp_buf_printf(out, "  --%s%s%s\n      %s\n      env %s", opt->name, *tw ? " " : "", tw,
                          opt->help, kp_buf_str(&env));
        if (r == 0 && !(opt->flags & KP_OPT_SENSITIVE))
            r = kp_buf_printf(out, ", default \"%s\"", opt->def);
        if (r == 0 && opt->type == KP_OPT_UINT)
            r = kp_buf_printf(out, ", %llu..%llu", (unsigned long long)opt->min,
                              (unsigned long long)opt->max);
        if (r == 0 && opt->type == KP_OPT_DOUBLE)
            r = kp_buf_printf(out, ", %g..%g", opt->dmin, opt->dmax);
        if (r == 0 && opt->type == KP_OPT_DURATION) {
            if (kp_duration_format((int64_t)opt->min * 1000, lo, sizeof(lo)) < 0 ||
                kp_duration_format((int64_t)opt->max * 1000, hi, sizeof(hi)) < 0)
                r = -EINVAL;
            else
                r = kp_buf_printf(out, ", %s..%s", lo, hi);
        }
        for (j = 0; r == 0 && opt->type == KP_OPT_ENUM && opt->choices[j]; j++)
            r = kp_buf_printf(out, "%s%s", j ? "|" : ", one of ", opt->choices[j]);
        if (r == 0 && (opt->flags & KP_OPT_SENSITIVE))
            r = kp_buf_puts(out, ", sensitive (never logged)");
        if (r == 0)
            r = kp_buf_putc(out, '\n');
    }
    if (r == 0)
        r = kp_buf_puts(out, "  --help, -h\n      print this help and exit\n"
                             "  --version\n      print the version and exit\n");
    kp_buf_done(&env);
    return r;
}

int kp_option_format(const struct kp_controller_options *o, const struct kp_option *opt,
                     struct kp_buf *out)
{
    char d[KP_DURATION_STRMAX];

    switch (opt->type) {
    case KP_OPT_STRING:
    case KP_OPT_ENUM: {
        const char *s = *(char *const *)cfield(o, opt);

        if (opt->flags & KP_OPT_SENSITIVE)
            return kp_buf_puts(out, s && *s ? "[REDACTED]" : "");
        return kp_buf_puts(out, s ? s : "");
    }
    case KP_OPT_SECRET:
        return kp_buf_puts(out, *(struct kp_secret *const *)cfield(o, opt) ? "[REDACTED]" : "");
    case KP_OPT_BOOL:
        return kp_buf_puts(out, *(const bool *)cfield(o, opt) ? "true" : "false");
    case KP_OPT_UINT:
        return kp_buf_printf(out, "%llu", (unsigned long long)*(const uint64_t *)cfield(o, opt));
    case KP_OPT_DOUBLE:
        return kp_buf_printf(out, "%g", *(const double *)cfield(o, opt));
    case KP_OPT_DURATION:
        if (kp_duration_format((int64_t)(*(const uint64_t *)cfield(o, opt) * 1000), d, sizeof(d)) <
            0)
            return -EINVAL;
        return kp_buf_puts(out, d);
    }
    return -EINVAL;
}

int kp_options_log(const struct kp_controller_options *o)
{
    struct kp_log_field fields[KP_ARRAY_SIZE(options) + 1];
    /* One buffer per option's key and value; the field array points into them. */
    struct kp_buf keys[KP_ARRAY_SIZE(options)], values[KP_ARRAY_SIZE(options)];
    size_t i, j;
    int r = 0;

    for (i = 0; i < KP_ARRAY_SIZE(options); i++) {
        kp_buf_init(&keys[i], KP_OPT_NAME_MAX);
        kp_buf_init(&values[i], 4096);
    }
    for (i = 0; i < KP_ARRAY_SIZE(options) && r == 0; i++) {
        for (j = 0; options[i].name[j] && r == 0; j++)
            r = kp_buf_putc(&keys[i], options[i].name[j] == '-' ? '_' : options[i].name[j]);
        if (r == 0)
            r = kp_option_format(o, &options[i], &values[i]);
        fields[i] = kp_lf_str(kp_buf_str(&keys[i]), kp_buf_str(&values[i]));
    }
    fields[KP_ARRAY_SIZE(options)] = KP_LF_END;
    if (r == 0 && kp_log_enabled(KP_LOG_INFO))
        (void)kp_log_emit(KP_LOG_INFO, 0, __FILE__, __LINE__, __func__, /* ratelimit_key= */ NULL,
                          "effective configuration", fields); /* returns its err argument, 0 */
    for (i = 0; i < KP_ARRAY_SIZE(options); i++) {
        kp_buf_done(&keys[i]);
        kp_buf_done(&values[i]);
    }
    return r;
}
