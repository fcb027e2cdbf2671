/* DESIGN: unit tests for k8s/kubeconfig.c.
 *
 * Files under tests/data/kubeconfig: a valid one covering every field we resolve, two that
 * overlap to check kubectl's merge rules, and broken ones whose exact messages (with
 * file:line:col) are checked. Torture cases parse, merge and resolve from memory while each
 * allocation fails in turn. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/secret.h"
#include "k8s/kubeconfig.h"
#include "kp-test.h"
#include "yaml/yaml.h"

static char *data_path(const char *name)
{
    static char buf[1024];

    assert_true(snprintf(buf, sizeof(buf), "%s/kubeconfig/%s", kp_test_data_dir(), name) <
                (int)sizeof(buf));
    return buf;
}

static struct kp_kubeconfig *load_one(const char *name)
{
    struct kp_kubeconfig *kc = NULL;
    struct kp_yaml_error err = {0};
    int r = kp_kubeconfig_load(data_path(name), NULL, NULL, &kc, &err);

    if (r != 0)
        fail_msg("load %s: %d %s", name, r, err.text);
    return kc;
}

static struct kp_kubeconfig_rest *resolve_ok(struct kp_kubeconfig *kc, const char *ctx)
{
    struct kp_kubeconfig_rest *rest = NULL;
    struct kp_yaml_error err = {0};
    int r = kp_kubeconfig_resolve(kc, ctx, 0, &rest, &err);

    if (r != 0)
        fail_msg("resolve %s: %d %s", ctx ? ctx : "(current)", r, err.text);
    return rest;
}

static void test_valid(void **state)
{
    struct kp_kubeconfig *kc = load_one("valid.yaml");
    struct kp_kubeconfig_rest *rest;

    (void)state;
    assert_string_equal(kp_kubeconfig_current_context(kc), "dev");
    rest = resolve_ok(kc, NULL);
    assert_string_equal(rest->context, "dev");
    assert_string_equal(rest->server, "https://[::1]:6443");
    assert_string_equal(rest->namespace, "team-a");
    assert_string_equal(rest->proxy_url, "http://proxy:3128");
    assert_non_null(rest->ca_pem);
    assert_non_null(strstr(rest->ca_pem, "Y2EtZm9yLXRlc3RzCg=="));
    assert_non_null(strstr(rest->cert_pem, "Y2xpZW50Cg=="));
    assert_non_null(strstr(kp_secret_reveal(rest->key_pem), "PRIVATE KEY"));
    assert_null(rest->token);
    assert_null(rest->exec);
    assert_false(rest->insecure_skip_tls_verify);
    kp_kubeconfig_rest_free(rest);

    rest = resolve_ok(kc, "prod");
    assert_string_equal(rest->server, "https://prod.example:6443");
    assert_string_equal(rest->tls_server_name, "api.prod.example");
    assert_string_equal(rest->namespace, "default");
    assert_non_null(strstr(rest->ca_pem, "BEGIN CERTIFICATE"));
    assert_non_null(rest->exec);
    assert_string_equal(rest->exec->api_version, "client.authentication.k8s.io/v1beta1");
    assert_string_equal(rest->exec->command, "aws");
    assert_int_equal(rest->exec->args.n, 4);
    assert_string_equal(rest->exec->args.v[3], "c1");
    assert_int_equal(rest->exec->env.n, 1);
    assert_string_equal(rest->exec->env.v[0], "AWS_PROFILE=prod");
    assert_string_equal(rest->exec->install_hint, "install the aws CLI");
    assert_true(rest->exec->provide_cluster_info);
    assert_int_equal(rest->exec->interactive, KP_EXEC_INTERACTIVE_IF_AVAILABLE);
    kp_kubeconfig_rest_free(rest);

    rest = resolve_ok(kc, "lab");
    assert_true(rest->insecure_skip_tls_verify);
    assert_null(rest->ca_pem);
    assert_true(kp_endswith(rest->token_file, "/kubeconfig/token"));
    kp_kubeconfig_rest_free(rest);

    rest = resolve_ok(kc, "anon");
    assert_null(rest->user);
    assert_null(rest->token);
    kp_kubeconfig_rest_free(rest);
    kp_kubeconfig_free(kc);
}

static void test_merge(void **state)
{
    struct kp_kubeconfig *kc = NULL;
    struct kp_kubeconfig_rest *rest;
    struct kp_yaml_error err = {0};
    char env[4096];

    (void)state;
    /* Missing files and empty entries are skipped; a repeated file is read once. */
    assert_true(snprintf(env, sizeof(env),
                         ":%s/kubeconfig/nope.yaml:%s/kubeconfig/merge-a.yaml::"
                         "%s/kubeconfig/merge-b.yaml:%s/kubeconfig/merge-a.yaml",
                         kp_test_data_dir(), kp_test_data_dir(), kp_test_data_dir(),
                         kp_test_data_dir()) < (int)sizeof(env));
    assert_int_equal(kp_kubeconfig_load(NULL, env, "/nonexistent", &kc, &err), 0);
    /* current-context from the first file that sets it. */
    assert_string_equal(kp_kubeconfig_current_context(kc), "a-ctx");
    rest = resolve_ok(kc, NULL);
    /* The first definition of a name wins, whole. */
    assert_string_equal(rest->server, "https://from-a:6443");
    assert_string_equal(kp_secret_reveal(rest->token), "token-from-file-a");
    kp_kubeconfig_rest_free(rest);
    /* Names only the later file defines are there; its user entry is still file a's. */
    rest = resolve_ok(kc, "b-ctx");
    assert_string_equal(rest->server, "https://only-b:6443");
    assert_string_equal(kp_secret_reveal(rest->token), "token-from-file-a");
    kp_kubeconfig_rest_free(rest);
    kp_kubeconfig_free(kc);

    kc = NULL;
    assert_int_equal(kp_kubeconfig_load(NULL, "/nonexistent/a:/nonexistent/b", NULL, &kc, &err),
                     -ENOENT);
    assert_null(kc);
    assert_string_equal(err.text, "KUBECONFIG: none of the files exists");
    /* Empty KUBECONFIG means ~/.kube/config. */
    assert_int_equal(kp_kubeconfig_load(NULL, "", "/nonexistent", &kc, &err), -ENOENT);
    assert_string_equal(err.text,
                        "/nonexistent/.kube/config: cannot read: No such file or directory");
    /* An explicit file must exist. */
    assert_int_equal(kp_kubeconfig_load("/nonexistent/x", "ignored", NULL, &kc, &err), -ENOENT);
}

static void expect_load_error(const char *name, int code, const char *msg)
{
    struct kp_kubeconfig *kc = NULL;
    struct kp_yaml_error err = {0};
    char want[1024];

    assert_int_equal(kp_kubeconfig_load(data_path(name), NULL, NULL, &kc, &err), code);
    assert_null(kc);
    assert_true(snprintf(want, sizeof(want), "%s%s", data_path(name), msg) < (int)sizeof(want));
    assert_string_equal(err.text, want);
}

static void expect_resolve_error(const char *name, const char *ctx, int code, const char *msg)
{
    struct kp_kubeconfig *kc = load_one(name);
    struct kp_kubeconfig_rest *rest = NULL;
    struct kp_yaml_error err = {0};
    char want[1024];

    assert_int_equal(kp_kubeconfig_resolve(kc, ctx, 0, &rest, &err), code);
    assert_null(rest);
    assert_true(snprintf(want, sizeof(want), "%s%s", data_path(name), msg) < (int)sizeof(want));
    assert_string_equal(err.text, want);
    kp_kubeconfig_free(kc);
}

static void test_broken(void **state)
{
    (void)state;
    expect_resolve_error("broken-missing-user.yaml", NULL, -ENOENT,
                         ":10:11: context \"x\" names user \"y\", which is not defined");
    expect_load_error("broken-not-mapping.yaml", -KP_EPARSE,
                      ":3:12: cluster \"c\": cluster: expected a mapping, got a sequence");
    expect_load_error("broken-duplicate.yaml", -KP_EPARSE,
                      ":4:9: cluster \"c\" is defined twice (first at 2:3)");
    expect_load_error("broken-syntax.yaml", -KP_EPARSE,
                      ":4:1: did not find expected ',' or '}' while parsing a flow mapping "
                      "(at 3:12)");
    expect_resolve_error("broken-current.yaml", NULL, -ENOENT,
                         ":1:18: current-context names context \"nowhere\", which is not "
                         "defined");
    expect_resolve_error("broken-exec.yaml", NULL, -KP_EPARSE,
                         ":9:7: exec: interactiveMode is required for "
                         "client.authentication.k8s.io/v1");
    expect_resolve_error("broken-auth-provider.yaml", NULL, -KP_EPARSE,
                         ":9:7: user \"u\": auth-provider: auth-provider plugins are not "
                         "supported; use an exec plugin");
    expect_resolve_error("valid.yaml", "missing", -ENOENT, ": context \"missing\" is not defined");
}

static void test_from_memory(void **state)
{
    static const char doc[] = "current-context: c\n"
                              "clusters:\n"
                              "- name: k\n"
                              "  cluster:\n"
                              "    server: https://k\n"
                              "    certificate-authority: /etc/ca.pem\n"
                              "contexts:\n"
                              "- name: c\n"
                              "  context: {cluster: k}\n";
    static const char bad64[] = "current-context: c\n"
                                "clusters: [{name: k, cluster: {server: s, "
                                "certificate-authority-data: \"@@@\"}}]\n"
                                "contexts: [{name: c, context: {cluster: k}}]\n";
    struct kp_kubeconfig *kc = NULL;
    struct kp_kubeconfig_rest *rest = NULL;
    struct kp_yaml_error err = {0};

    (void)state;
    assert_int_equal(kp_kubeconfig_new(&kc), 0);
    assert_int_equal(kp_kubeconfig_add(kc, doc, sizeof(doc) - 1, "mem", &err), 0);
    assert_int_equal(kp_kubeconfig_resolve(kc, NULL, KP_KUBECONFIG_NO_FILES, &rest, &err), -EPERM);
    assert_string_equal(err.text, "mem:6:28: certificate-authority: files may not be read here");
    assert_int_equal(kp_kubeconfig_add(kc, bad64, sizeof(bad64) - 1, "mem2", &err), 0);
    kp_kubeconfig_free(kc);

    kc = NULL;
    assert_int_equal(kp_kubeconfig_new(&kc), 0);
    assert_int_equal(kp_kubeconfig_add(kc, bad64, sizeof(bad64) - 1, "mem2", &err), 0);
    assert_int_equal(kp_kubeconfig_resolve(kc, NULL, 0, &rest, &err), -KP_EPARSE);
    assert_string_equal(err.text, "mem2:2:71: certificate-authority-data: not valid base64");
    /* A top level that is no mapping, and an empty document. */
    assert_int_equal(kp_kubeconfig_add(kc, "- a\n", 4, "seq", &err), -KP_EPARSE);
    assert_string_equal(err.text, "seq:1:1: expected a mapping, got a sequence");
    assert_int_equal(kp_kubeconfig_add(kc, "", 0, "empty", &err), 0);
    kp_kubeconfig_free(kc);
}

/* kube-public/cluster-info carries a kubeconfig of clusters only, often one named "". */
static void test_resolve_cluster(void **state)
{
    static const char info[] = "apiVersion: v1\n"
                               "kind: Config\n"
                               "clusters:\n"
                               "- name: zeta\n"
                               "  cluster: {server: \"https://z:6443\"}\n"
                               "- name: \"\"\n"
                               "  cluster:\n"
                               "    certificate-authority-data: aGVsbG8=\n"
                               "    server: https://10.0.0.1:6443\n"
                               "contexts: null\n"
                               "current-context: \"\"\n"
                               "users: null\n"
                               "preferences: {}\n";
    struct kp_kubeconfig *kc = NULL;
    struct kp_kubeconfig_rest *rest = NULL;
    struct kp_yaml_error err = {0};

    (void)state;
    assert_int_equal(kp_kubeconfig_new(&kc), 0);
    assert_int_equal(kp_kubeconfig_resolve_cluster(kc, NULL, 0, &rest, &err), -ENOENT);
    assert_string_equal(err.text, "kubeconfig: no cluster is defined");
    if (kp_kubeconfig_add(kc, info, sizeof(info) - 1, "cluster-info", &err) < 0)
        fail_msg("%s", err.text);
    /* First by name: "" sorts before "zeta". */
    assert_int_equal(kp_kubeconfig_resolve_cluster(kc, NULL, KP_KUBECONFIG_NO_FILES, &rest, &err),
                     0);
    assert_string_equal(rest->cluster, "");
    assert_string_equal(rest->server, "https://10.0.0.1:6443");
    assert_int_equal(rest->ca_pem_len, 5);
    assert_memory_equal(rest->ca_pem, "hello", 5);
    assert_null(rest->user);
    rest = kp_kubeconfig_rest_free(rest);
    assert_int_equal(kp_kubeconfig_resolve_cluster(kc, "zeta", 0, &rest, &err), 0);
    assert_string_equal(rest->server, "https://z:6443");
    assert_null(rest->ca_pem);
    rest = kp_kubeconfig_rest_free(rest);
    assert_int_equal(kp_kubeconfig_resolve_cluster(kc, "nope", 0, &rest, &err), -ENOENT);
    assert_string_equal(err.text, "cluster-info: cluster \"nope\" is not defined");
    kp_kubeconfig_free(kc);
}

/* --- torture ------------------------------------------------------------------------------ */

static const char torture_a[] =
    "current-context: c\n"
    "clusters:\n"
    "- name: k\n"
    "  cluster: {server: https://k, certificate-authority-data: Y2EK, tls-server-name: n}\n"
    "users:\n"
    "- name: u\n"
    "  user:\n"
    "    token: abcdefghijklmnop\n"
    "    client-certificate-data: Y2VydAo=\n"
    "    client-key-data: a2V5Cg==\n"
    "    exec:\n"
    "      apiVersion: client.authentication.k8s.io/v1\n"
    "      command: ./bin/plugin\n"
    "      args: [a, b]\n"
    "      env: [{name: A, value: b}]\n"
    "      interactiveMode: Never\n"
    "contexts:\n"
    "- name: c\n"
    "  context: {cluster: k, user: u, namespace: ns}\n";
static const char torture_b[] = "current-context: other\n"
                                "clusters: [{name: k, cluster: {server: https://b}}, "
                                "{name: k2, cluster: {server: https://k2}}]\n"
                                "contexts: [{name: c2, context: {cluster: k2}}]\n";

static int torture_resolve(void)
{
    struct kp_kubeconfig *kc = NULL;
    struct kp_kubeconfig_rest *rest = NULL;
    struct kp_exec_config *copy = NULL;
    int r;

    r = kp_kubeconfig_new(&kc);
    if (r < 0)
        goto out;
    if ((r = kp_kubeconfig_add(kc, torture_a, sizeof(torture_a) - 1, "/cfg/a", NULL)) < 0 ||
        (r = kp_kubeconfig_add(kc, torture_b, sizeof(torture_b) - 1, "/cfg/b", NULL)) < 0 ||
        (r = kp_kubeconfig_resolve(kc, NULL, KP_KUBECONFIG_NO_FILES, &rest, NULL)) < 0 ||
        (r = kp_exec_config_dup(rest->exec, &copy)) < 0)
        goto out;
    r = strcmp(rest->server, "https://k") == 0 && strcmp(copy->command, "/cfg/./bin/plugin") == 0
            ? 0
            : -EINVAL;
    rest = kp_kubeconfig_rest_free(rest);
    if (r == 0)
        r = kp_kubeconfig_resolve(kc, "c2", 0, &rest, NULL);
out:
    kp_exec_config_free(copy);
    kp_kubeconfig_rest_free(rest);
    kp_kubeconfig_free(kc);
    return r;
}

static int torture_load_files(void)
{
    struct kp_kubeconfig *kc = NULL;
    struct kp_kubeconfig_rest *rest = NULL;
    char env[2048];
    int r;

    if (snprintf(env, sizeof(env), "%s/kubeconfig/merge-b.yaml:%s/kubeconfig/valid.yaml",
                 kp_test_data_dir(), kp_test_data_dir()) >= (int)sizeof(env))
        return -E2BIG;
    r = kp_kubeconfig_load(NULL, env, NULL, &kc, NULL);
    if (r == 0)
        r = kp_kubeconfig_resolve(kc, "dev", 0, &rest, NULL);
    kp_kubeconfig_rest_free(rest);
    kp_kubeconfig_free(kc);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),           cmocka_unit_test(test_merge),
        cmocka_unit_test(test_broken),          cmocka_unit_test(test_from_memory),
        cmocka_unit_test(test_resolve_cluster),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_resolve),
        KP_TORTURE(torture_load_files),
    };

    return kp_test_main("kubeconfig", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases),
                        argc, argv);
}
