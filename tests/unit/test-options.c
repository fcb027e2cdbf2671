/* Tests for cmd/controller/options.h: defaults (each within its own bounds), environment and
 * flag precedence, every value type and its errors, --help generated from the table, and the
 * effective-configuration line with sensitive values redacted. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/secret.h"
#include "cmd/controller/options.h"

#define SEC 1000000ULL

static int parse(struct kp_controller_options *o, const char *const *argv, const char *const *envp,
                 enum kp_options_action *action, struct kp_buf *err)
{
    int argc = 0;

    while (argv && argv[argc])
        argc++;
    kp_options_init(o);
    return kp_options_parse(o, argc, argv, envp, action, err);
}

/* Parses and expects a usage error whose text is exactly want. */
static void expect_error(const char *const *argv, const char *const *envp, const char *want)
{
    struct kp_controller_options o;
    struct kp_buf err = KP_BUF_INIT(4096);
    enum kp_options_action action;

    assert_int_equal(parse(&o, argv, envp, &action, &err), -EINVAL);
    assert_string_equal(kp_buf_str(&err), want);
    kp_options_done(&o);
    kp_buf_done(&err);
}

static void test_defaults(void **state)
{
    struct kp_controller_options o;
    struct kp_buf err = KP_BUF_INIT(4096);
    enum kp_options_action action = KP_OPTIONS_HELP;
    const char *argv[] = {"kpssh-controller", NULL};

    (void)state;
    assert_int_equal(parse(&o, argv, NULL, &action, &err), 0);
    assert_int_equal(action, KP_OPTIONS_RUN);
    assert_string_equal(o.kubeconfig, "");
    assert_null(o.token);
    assert_false(o.disable_leader_election);
    assert_string_equal(o.leader_election_name, "kpssh-controller");
    assert_string_equal(o.leader_election_namespace, "");
    assert_int_equal(o.leader_election_lease_duration, 15 * SEC);
    assert_int_equal(o.leader_election_renew_deadline, 10 * SEC);
    assert_int_equal(o.leader_election_retry_period, 2 * SEC);
    assert_string_equal(o.bind_address, "0.0.0.0");
    assert_int_equal(o.metrics_port, 8080);
    assert_int_equal(o.health_probe_port, 8081);
    assert_string_equal(o.log_level, "info");
    assert_string_equal(o.log_format, "json");
    assert_string_equal(o.pool_namespace, "kpssh-system");
    assert_int_equal(o.workers, 4);
    assert_int_equal(o.probe_interval, 120 * SEC);
    assert_int_equal(o.probe_timeout, 30 * SEC);
    assert_int_equal(o.probe_concurrency, 8);
    assert_true(o.kube_client_qps == 200.0);
    assert_int_equal(o.kube_client_burst, 300);
    assert_string_equal(o.bootstrap_group, "system:bootstrappers:kpssh");
    assert_string_equal(o.pod_name, "");
    kp_options_done(&o);
    kp_buf_done(&err);
}

static void test_precedence_and_forms(void **state)
{
    struct kp_controller_options o;
    struct kp_buf err = KP_BUF_INIT(4096);
    enum kp_options_action action;
    const char *argv[] = {"kpssh-controller",
                          "--workers=9",
                          "--pool-namespace",
                          "pool-b",
                          "--disable-leader-election",
                          "--probe-interval=1h30m",
                          "--kube-client-qps",
                          "12.5",
                          "--log-level=debug",
                          "--bootstrap-group",
                          "system:bootstrappers:team-b",
                          NULL};
    const char *envp[] = {"KPSSH_WORKERS=3",
                          "KPSSH_POOL_NAMESPACE=pool-a",
                          "KPSSH_CONTEXT=lab",
                          "KPSSH_METRICS_PORT=0",
                          "KPSSH_TOKEN=sekrit-token-value-123",
                          "OTHER=x",
                          "KPSSH_WORKERSX=7",
                          "KPSSH_BOOTSTRAP_GROUP=system:bootstrappers:team-a",
                          "KPSSH_POD_NAME=kpssh-7d9f-x2x",
                          "POD_NAME=not-this-one",
                          NULL};

    (void)state;
    assert_int_equal(parse(&o, argv, envp, &action, &err), 0);
    assert_int_equal(o.workers, 9);                  /* flag over env */
    assert_string_equal(o.pool_namespace, "pool-b"); /* "--name value" form */
    assert_string_equal(o.context, "lab");           /* env only */
    assert_int_equal(o.metrics_port, 0);             /* env, at the lower bound */
    assert_true(o.disable_leader_election);          /* bare boolean flag */
    assert_int_equal(o.probe_interval, 5400 * SEC);
    assert_true(o.kube_client_qps == 12.5);
    assert_string_equal(o.log_level, "debug");
    assert_string_equal(o.bootstrap_group, "system:bootstrappers:team-b"); /* flag over env */
    assert_string_equal(o.pod_name, "kpssh-7d9f-x2x");                     /* what the chart sets */
    assert_non_null(o.token);
    assert_string_equal(kp_secret_reveal(o.token), "sekrit-token-value-123");
    kp_options_done(&o);
    assert_null(o.token);

    {
        const char *a2[] = {"x", "--disable-leader-election=false", "--token=", NULL};
        const char *e2[] = {"KPSSH_DISABLE_LEADER_ELECTION=true", "KPSSH_TOKEN=abcdefghijk", NULL};

        assert_int_equal(parse(&o, a2, e2, &action, &err), 0);
        assert_false(o.disable_leader_election);
        assert_null(o.token); /* an empty flag clears the env's token */
        kp_options_done(&o);
    }
    kp_buf_done(&err);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error((const char *[]){"x", "--workers=0", NULL}, NULL,
                 "--workers=\"0\": must be between 1 and 64");
    expect_error((const char *[]){"x", "--workers", "many", NULL}, NULL,
                 "--workers=\"many\": expected an unsigned integer");
    expect_error((const char *[]){"x", NULL}, (const char *[]){"KPSSH_WORKERS=-1", NULL},
                 "KPSSH_WORKERS=\"-1\": expected an unsigned integer");
    expect_error((const char *[]){"x", "--metrics-port=65536", NULL}, NULL,
                 "--metrics-port=\"65536\": must be between 0 and 65535");
    expect_error((const char *[]){"x", "--probe-timeout=-5s", NULL}, NULL,
                 "--probe-timeout=\"-5s\": expected a duration such as 30s, 2m or 1h30m");
    expect_error((const char *[]){"x", "--probe-timeout=500ms", NULL}, NULL,
                 "--probe-timeout=\"500ms\": must be between 1s and 1h0m0s");
    expect_error((const char *[]){"x", "--kube-client-qps=0.5", NULL}, NULL,
                 "--kube-client-qps=\"0.5\": must be between 1 and 100000");
    expect_error((const char *[]){"x", "--kube-client-qps=nan", NULL}, NULL,
                 "--kube-client-qps=\"nan\": expected a number");
    expect_error((const char *[]){"x", "--log-format=xml", NULL}, NULL,
                 "--log-format=\"xml\": expected one of json, text");
    expect_error((const char *[]){"x", "--disable-leader-election=yes", NULL}, NULL,
                 "--disable-leader-election=\"yes\": expected true or false");
    expect_error((const char *[]){"x", "--no-such-thing", NULL}, NULL,
                 "unknown option --no-such-thing (see --help)");
    expect_error((const char *[]){"x", "-v", NULL}, NULL,
                 "unexpected argument \"-v\" (options start with --; see --help)");
    expect_error((const char *[]){"x", "--context", NULL}, NULL, "--context needs a value");
    expect_error((const char *[]){"x", "--pool-namespace=a\nb", NULL}, NULL,
                 "--pool-namespace=\"a\nb\": must be one line");
    expect_error((const char *[]){"x", "--leader-election-renew-deadline=15s", NULL}, NULL,
                 "--leader-election-renew-deadline must be shorter than "
                 "--leader-election-lease-duration");
    expect_error((const char *[]){"x", "--leader-election-retry-period=10s", NULL}, NULL,
                 "--leader-election-retry-period must be shorter than "
                 "--leader-election-renew-deadline");
    expect_error((const char *[]){"x", "--probe-timeout=3m", NULL}, NULL,
                 "--probe-timeout must be shorter than --probe-interval");
    /* The host controller has one worker per concurrent probe, and a reconciler at most 64. */
    expect_error((const char *[]){"x", "--probe-concurrency=65", NULL}, NULL,
                 "--probe-concurrency=\"65\": must be between 1 and 64");
    /* A group the bootstrap token authenticator refuses would fail every join. */
    {
        static const char *const bad[] = {
            "system:bootstrappers:",      "system:bootstrappers:kpssh:", "system:nodes",
            "system:bootstrappers:Kpssh", "system:bootstrappers:a_b",    "kpssh",
        };
        const char *want = "--bootstrap-group must be system:bootstrappers: followed by "
                           "[a-z0-9:-], ending in [a-z0-9]";

        for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
            char arg[128];

            assert_true(snprintf(arg, sizeof(arg), "--bootstrap-group=%s", bad[i]) > 0);
            expect_error((const char *[]){"x", arg, NULL}, NULL, want);
        }
        expect_error((const char *[]){"x", NULL},
                     (const char *[]){"KPSSH_BOOTSTRAP_GROUP=system:bootstrappers:", NULL}, want);
    }
    /* Options no code reads are not offered (the batch windows arrive with the provisioner). */
    expect_error((const char *[]){"x", "--batch-max-duration=5s", NULL}, NULL,
                 "unknown option --batch-max-duration (see --help)");
    expect_error((const char *[]){"x", "--memory-limit=1", NULL}, NULL,
                 "unknown option --memory-limit (see --help)");
}

static void test_actions(void **state)
{
    struct kp_controller_options o;
    struct kp_buf err = KP_BUF_INIT(4096);
    enum kp_options_action action;

    (void)state;
    assert_int_equal(parse(&o, (const char *[]){"x", "--help", NULL}, NULL, &action, &err), 0);
    assert_int_equal(action, KP_OPTIONS_HELP);
    kp_options_done(&o);
    assert_int_equal(parse(&o, (const char *[]){"x", "-h", NULL}, NULL, &action, &err), 0);
    assert_int_equal(action, KP_OPTIONS_HELP);
    kp_options_done(&o);
    assert_int_equal(parse(&o, (const char *[]){"x", "--version", NULL}, NULL, &action, &err), 0);
    assert_int_equal(action, KP_OPTIONS_VERSION);
    kp_options_done(&o);
    kp_buf_done(&err);
}

static void test_help_lists_every_option(void **state)
{
    struct kp_buf help = KP_BUF_INIT(1u << 20), line = KP_BUF_INIT(256), env = KP_BUF_INIT(128);
    const struct kp_option *t;
    size_t n, i;

    (void)state;
    t = kp_options_table(&n);
    assert_true(n >= 25);
    assert_int_equal(kp_options_help("kpssh-controller", &help), 0);
    for (i = 0; i < n; i++) {
        kp_buf_reset(&line);
        kp_buf_reset(&env);
        assert_int_equal(kp_buf_printf(&line, "\n  --%s", t[i].name), 0);
        assert_non_null(strstr(kp_buf_str(&help), kp_buf_str(&line)));
        assert_int_equal(kp_option_env_name(&t[i], &env), 0);
        assert_non_null(strstr(kp_buf_str(&help), kp_buf_str(&env)));
        assert_non_null(strstr(kp_buf_str(&help), t[i].help));
    }
    kp_buf_reset(&env);
    assert_int_equal(kp_option_env_name(&t[0], &env), 0);
    assert_string_equal(kp_buf_str(&env), "KPSSH_KUBECONFIG");
    assert_non_null(strstr(kp_buf_str(&help), "env KPSSH_LEADER_ELECTION_RETRY_PERIOD, default "
                                              "\"2s\", 100ms..1h0m0s\n"));
    assert_non_null(strstr(kp_buf_str(&help), "env KPSSH_TOKEN, sensitive (never logged)\n"));
    assert_non_null(strstr(kp_buf_str(&help), ", one of debug|info|warn|error\n"));
    kp_buf_done(&help);
    kp_buf_done(&line);
    kp_buf_done(&env);
}

static void test_effective_config_redacts(void **state)
{
    struct kp_controller_options o;
    struct kp_buf err = KP_BUF_INIT(4096), v = KP_BUF_INIT(256);
    enum kp_options_action action;
    const struct kp_option *t;
    const char *envp[] = {"KPSSH_TOKEN=the-bearer-token-0123456789", NULL};
    char out[16384];
    ssize_t len;
    size_t n, i;
    int fd;

    (void)state;
    assert_int_equal(
        parse(&o, (const char *[]){"x", "--probe-interval=90s", NULL}, envp, &action, &err), 0);
    t = kp_options_table(&n);
    for (i = 0; i < n; i++) {
        kp_buf_reset(&v);
        assert_int_equal(kp_option_format(&o, &t[i], &v), 0);
        if (strcmp(t[i].name, "token") == 0)
            assert_string_equal(kp_buf_str(&v), "[REDACTED]");
        if (strcmp(t[i].name, "probe-interval") == 0)
            assert_string_equal(kp_buf_str(&v), "1m30s");
        if (strcmp(t[i].name, "disable-leader-election") == 0)
            assert_string_equal(kp_buf_str(&v), "false");
    }

    fd = memfd_create("log", MFD_CLOEXEC);
    assert_true(fd >= 0);
    kp_log_set_fd(fd);
    assert_int_equal(kp_options_log(&o), 0);
    kp_log_set_fd(2);
    len = pread(fd, out, sizeof(out) - 1, 0);
    assert_true(len > 0);
    out[len] = '\0';
    close(fd);
    assert_non_null(strstr(out, "\"message\":\"effective configuration\""));
    assert_non_null(strstr(out, "\"token\":\"[REDACTED]\""));
    assert_non_null(strstr(out, "\"probe_interval\":\"1m30s\""));
    assert_non_null(strstr(out, "\"pool_namespace\":\"kpssh-system\""));
    assert_null(strstr(out, "the-bearer-token"));
    kp_options_done(&o);
    kp_buf_done(&err);
    kp_buf_done(&v);
}

static int torture_parse_help(void)
{
    struct kp_controller_options o;
    struct kp_buf err = KP_BUF_INIT(4096), help = KP_BUF_INIT(1u << 20);
    enum kp_options_action action;
    const char *argv[] = {"x", "--workers=5", "--context=c", NULL};
    const char *envp[] = {"KPSSH_TOKEN=abcdefghijklmnop", "KPSSH_POOL_NAMESPACE=p", NULL};
    int r;

    kp_options_init(&o);
    r = kp_options_parse(&o, 3, argv, envp, &action, &err);
    if (r == 0)
        r = kp_options_help("x", &help);
    kp_options_done(&o);
    kp_buf_done(&err);
    kp_buf_done(&help);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_precedence_and_forms),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_actions),
        cmocka_unit_test(test_help_lists_every_option),
        cmocka_unit_test(test_effective_config_redacts),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_parse_help),
    };

    return kp_test_main("options", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
