/* DESIGN: unit tests for k8s/exec-credential.c.
 *
 * Parsing is tested from literal ExecCredential documents. Running is tested with
 * tests/data/exec/plugin.sh, whose behaviour is chosen by environment entries in the
 * kubeconfig's exec.env (so the test process's own environment stays untouched), and which
 * counts its runs in a file so the cache can be observed. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "k8s/exec-credential.h"
#include "k8s/kubeconfig.h"
#include "kp-test.h"
#include "yaml/yaml.h"

#define V1 "client.authentication.k8s.io/v1"
#define IN(lit) lit, sizeof(lit) - 1

static void test_parse(void **state)
{
    struct kp_exec_status *st = NULL;
    struct kp_yaml_error err = {0};

    (void)state;
    assert_int_equal(kp_exec_credential_parse(IN("{\"apiVersion\":\"" V1 "\",\"kind\":"
                                                 "\"ExecCredential\",\"status\":{\"token\":"
                                                 "\"t0k3n\",\"expirationTimestamp\":"
                                                 "\"2030-01-02T03:04:05Z\"}}"),
                                              V1, &st, &err),
                     0);
    assert_string_equal(kp_secret_reveal(st->token), "t0k3n");
    assert_int_equal(st->expires_usec, INT64_C(1893553445000000));
    assert_null(st->cert_pem);
    kp_exec_status_free(st);

    st = NULL;
    assert_int_equal(kp_exec_credential_parse(IN("apiVersion: " V1 "\nkind: ExecCredential\n"
                                                 "status:\n  clientCertificateData: CERT\n"
                                                 "  clientKeyData: KEY\n"),
                                              V1, &st, &err),
                     0);
    assert_string_equal(st->cert_pem, "CERT");
    assert_string_equal(kp_secret_reveal(st->key_pem), "KEY");
    assert_null(st->token);
    assert_int_equal(st->expires_usec, 0);
    kp_exec_status_free(st);

    st = NULL;
    assert_int_equal(kp_exec_credential_parse(IN("{\"apiVersion\":\"client.authentication.k8s.io/"
                                                 "v1beta1\",\"kind\":\"ExecCredential\","
                                                 "\"status\":{\"token\":\"x\"}}"),
                                              V1, &st, &err),
                     -KP_EPARSE);
    assert_string_equal(err.text, "exec plugin output:1:15: apiVersion must be " V1
                                  ", the version the kubeconfig asked for");
    assert_int_equal(kp_exec_credential_parse(IN("{\"apiVersion\":\"" V1 "\",\"kind\":"
                                                 "\"ExecCredential\",\"status\":{}}"),
                                              V1, &st, &err),
                     -KP_EPARSE);
    assert_non_null(strstr(err.text, "neither a token nor a client certificate"));
    assert_int_equal(kp_exec_credential_parse(IN("{\"apiVersion\":\"" V1 "\",\"kind\":"
                                                 "\"ExecCredential\",\"status\":{\"token\":"
                                                 "\"x\",\"expirationTimestamp\":\"soon\"}}"),
                                              V1, &st, &err),
                     -KP_EPARSE);
    assert_non_null(strstr(err.text, "expirationTimestamp: not an RFC 3339 time"));
    assert_int_equal(kp_exec_credential_parse(IN("{\"apiVersion\":\"" V1 "\",\"kind\":"
                                                 "\"ExecCredential\",\"status\":{"
                                                 "\"clientKeyData\":\"k\"}}"),
                                              V1, &st, &err),
                     -KP_EPARSE);
    assert_int_equal(kp_exec_credential_parse(IN("not json"), V1, &st, &err), -KP_EPARSE);
    assert_int_equal(kp_exec_credential_parse(IN(""), V1, &st, &err), -KP_EPARSE);
    assert_null(st);
}

/* Writable copies: the rest struct's fields are owned (non-const) pointers. */
static char v1_buf[] = V1;
static char hint_buf[] = "see https://example/install";
static char server_buf[] = "https://k:6443";
static char ca_buf[] = "CA";

struct fixture {
    struct kp_kubeconfig_rest rest;
    struct kp_exec_config cfg;
    char count_file[256];
};

static void fixture_init(struct fixture *f, const char *mode, const char *exp)
{
    char buf[1024];
    const char *tmp = getenv("TMPDIR");
    int fd;

    memset(f, 0, sizeof(*f));
    assert_true(snprintf(f->count_file, sizeof(f->count_file), "%s/kp-exec-count-XXXXXX",
                         tmp ? tmp : "/tmp") < (int)sizeof(f->count_file));
    fd = mkstemp(f->count_file);
    assert_true(fd >= 0);
    close(fd);
    f->cfg.api_version = v1_buf;
    assert_true(snprintf(buf, sizeof(buf), "%s/exec/plugin.sh", kp_test_data_dir()) <
                (int)sizeof(buf));
    f->cfg.command = kp_strdup(buf);
    assert_int_equal(kp_strv_push(&f->cfg.env, mode), 0);
    assert_true(snprintf(buf, sizeof(buf), "KP_PLUGIN_COUNT=%s", f->count_file) < (int)sizeof(buf));
    assert_int_equal(kp_strv_push(&f->cfg.env, buf), 0);
    if (exp) {
        assert_true(snprintf(buf, sizeof(buf), "KP_PLUGIN_EXP=%s", exp) < (int)sizeof(buf));
        assert_int_equal(kp_strv_push(&f->cfg.env, buf), 0);
    }
    assert_int_equal(kp_strv_push(&f->cfg.env, "KP_PLUGIN_SUFFIX=0123456789"), 0);
    f->cfg.install_hint = hint_buf;
    f->cfg.interactive = KP_EXEC_INTERACTIVE_IF_AVAILABLE;
    f->rest.server = server_buf;
    f->rest.exec = &f->cfg;
}

static void fixture_done(struct fixture *f)
{
    kp_free(f->cfg.command);
    kp_strv_done(&f->cfg.env);
    unlink(f->count_file);
}

static void test_run_and_cache(void **state)
{
    struct fixture f;
    struct kp_exec_credential *c = NULL;
    struct kp_exec_status *st = NULL;
    struct kp_secret *tok = NULL;
    struct kp_yaml_error err = {0};

    (void)state;
    fixture_init(&f, "KP_PLUGIN_MODE=token", NULL);
    assert_int_equal(kp_exec_credential_new(&f.rest, NULL, &c), 0);
    assert_int_equal(kp_exec_credential_get(c, false, &st, &err), 0);
    assert_string_equal(kp_secret_reveal(st->token), "plugin-token-0123456789");
    st = kp_exec_status_free(st);
    /* Cached: no second run until refresh is asked. */
    assert_int_equal(kp_exec_credential_token_fn(c, false, &tok), 0);
    assert_string_equal(kp_secret_reveal(tok), "plugin-token-0123456789");
    tok = kp_secret_free(tok);
    assert_int_equal(kp_exec_credential_runs(c), 1);
    assert_int_equal(kp_exec_credential_token_fn(c, true, &tok), 0);
    tok = kp_secret_free(tok);
    assert_int_equal(kp_exec_credential_runs(c), 2);
    kp_exec_credential_free(c);
    fixture_done(&f);

    /* An expired credential is not reused. */
    fixture_init(&f, "KP_PLUGIN_MODE=token", "2001-01-01T00:00:00Z");
    assert_int_equal(kp_exec_credential_new(&f.rest, NULL, &c), 0);
    assert_int_equal(kp_exec_credential_token_fn(c, false, &tok), 0);
    tok = kp_secret_free(tok);
    assert_int_equal(kp_exec_credential_token_fn(c, false, &tok), 0);
    tok = kp_secret_free(tok);
    assert_int_equal(kp_exec_credential_runs(c), 2);
    kp_exec_credential_free(c);
    fixture_done(&f);
}

static void test_failures(void **state)
{
    struct kp_exec_credential_opts opts = {.timeout_usec = KP_USEC_PER_SEC / 5};
    struct fixture f;
    struct kp_exec_credential *c = NULL;
    struct kp_exec_status *st = NULL;
    struct kp_yaml_error err = {0};

    (void)state;
    fixture_init(&f, "KP_PLUGIN_MODE=fail", NULL);
    assert_int_equal(kp_exec_credential_new(&f.rest, NULL, &c), 0);
    assert_int_equal(kp_exec_credential_get(c, false, &st, &err), -EIO);
    assert_non_null(strstr(err.text, "failed with exit status 2: line one of the failure?"
                                     "credentials expired: please log in; "
                                     "see https://example/install"));
    kp_exec_credential_free(c);
    fixture_done(&f);

    fixture_init(&f, "KP_PLUGIN_MODE=sleep", NULL);
    assert_int_equal(kp_exec_credential_new(&f.rest, &opts, &c), 0);
    assert_int_equal(kp_exec_credential_get(c, false, &st, &err), -ETIMEDOUT);
    assert_non_null(strstr(err.text, "did not finish in time"));
    kp_exec_credential_free(c);
    fixture_done(&f);

    /* The plugin sees KUBERNETES_EXEC_INFO with the cluster when provideClusterInfo is set. */
    fixture_init(&f, "KP_PLUGIN_MODE=info", NULL);
    f.cfg.provide_cluster_info = true;
    f.rest.ca_pem = ca_buf;
    f.rest.ca_pem_len = 2;
    assert_int_equal(kp_exec_credential_new(&f.rest, NULL, &c), 0);
    assert_int_equal(kp_exec_credential_get(c, false, &st, &err), -EIO);
    assert_non_null(strstr(err.text, "{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\","
                                     "\"spec\":{\"interactive\":false,\"cluster\":{\"server\":"
                                     "\"https://k:6443\",\"certificate-authority-data\":"
                                     "\"Q0E=\"}}}"));
    kp_exec_credential_free(c);
    fixture_done(&f);

    fixture_init(&f, "KP_PLUGIN_MODE=token", NULL);
    f.cfg.interactive = KP_EXEC_INTERACTIVE_ALWAYS;
    assert_int_equal(kp_exec_credential_new(&f.rest, NULL, &c), 0);
    assert_int_equal(kp_exec_credential_get(c, false, &st, &err), -EPERM);
    kp_exec_credential_free(c);
    f.cfg.interactive = KP_EXEC_INTERACTIVE_NEVER;
    kp_free(f.cfg.command);
    f.cfg.command = kp_strdup("kp-no-such-plugin");
    assert_int_equal(kp_exec_credential_new(&f.rest, NULL, &c), 0);
    assert_int_equal(kp_exec_credential_get(c, false, &st, &err), -ENOENT);
    assert_string_equal(err.text, "exec plugin: \"kp-no-such-plugin\" was not found; "
                                  "see https://example/install");
    assert_null(st);
    kp_exec_credential_free(c);
    fixture_done(&f);
}

static int torture_parse(void)
{
    static const char doc[] = "{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\","
                              "\"status\":{\"token\":\"abcdefghijk\",\"clientCertificateData\":"
                              "\"C\",\"clientKeyData\":\"K\",\"expirationTimestamp\":"
                              "\"2030-01-02T03:04:05Z\"}}";
    struct kp_exec_status *st = NULL;
    int r;

    r = kp_exec_credential_parse(doc, sizeof(doc) - 1, V1, &st, NULL);
    kp_exec_status_free(st);
    return r;
}

static int torture_run(void)
{
    /* Built without allocating: the sweep fails allocations from the first one on. */
    static char cmd[1024], mode[] = "KP_PLUGIN_MODE=token";
    static char *env[] = {mode, NULL};
    struct kp_exec_config cfg = {.api_version = v1_buf,
                                 .command = cmd,
                                 .env = {.v = env, .n = 1, .cap = 1},
                                 .provide_cluster_info = true};
    struct kp_kubeconfig_rest rest = {.server = server_buf, .exec = &cfg};
    struct kp_exec_credential *c = NULL;
    struct kp_exec_status *st = NULL;
    int r;

    if (snprintf(cmd, sizeof(cmd), "%s/exec/plugin.sh", kp_test_data_dir()) >= (int)sizeof(cmd))
        return -E2BIG;
    r = kp_exec_credential_new(&rest, NULL, &c);
    if (r == 0)
        r = kp_exec_credential_get(c, false, &st, NULL);
    kp_exec_status_free(st);
    kp_exec_credential_free(c);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_run_and_cache),
        cmocka_unit_test(test_failures),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_parse),
        KP_TORTURE(torture_run),
    };

    return kp_test_main("exec-credential", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases),
                        argc, argv);
}
