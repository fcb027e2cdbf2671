/* Integration: configuration as users write it, against the real kube-apiserver.
 *
 * A kubeconfig whose user runs an exec credential plugin (client.authentication.k8s.io/v1), as
 * EKS users run `aws eks get-token`: the plugin is found relative to the kubeconfig, run once,
 * its token used and cached. A plugin that first hands out a stale token gets asked again after
 * the server's 401, and the retried request succeeds. KUBECONFIG with two files merges the way
 * kubectl does (the context comes from the second file; the first file's entry of the same
 * name wins). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kp-lab.h"
#include "kp-test.h"

#include "base/alloc.h"
#include "base/secret.h"
#include "base/str.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/exec-credential.h"
#include "k8s/kubeconfig.h"
#include "k8s/status.h"
#include "yaml/yaml.h"

static struct kp_lab lab;
static char dir[256];
static char *token;

static void write_file(const char *name, int mode, const char *fmt, ...) KP_PRINTF(3, 4);
static void write_file(const char *name, int mode, const char *fmt, ...)
{
    char path[512];
    va_list ap;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "we");
    assert_non_null(f);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, (mode_t)mode), 0);
}

/* A plugin that prints `stale` on its first run when asked to, the lab's token afterwards, and
 * counts its runs in a file. */
static void write_plugin(const char *name, bool stale_first)
{
    write_file(
        name, 0755,
        "#!/bin/sh\n"
        "set -eu\n"
        "d=$(dirname \"$0\")\n"
        "n=$(cat \"$d/%s.runs\" 2>/dev/null || echo 0)\n"
        "n=$((n + 1)); echo $n > \"$d/%s.runs\"\n"
        "tok='%s'\n"
        "if [ %d = 1 ] && [ $n = 1 ]; then tok=stale-token-0000; fi\n"
        "# the cluster arrives in KUBERNETES_EXEC_INFO when provideClusterInfo is set\n"
        "case \"${KUBERNETES_EXEC_INFO:-}\" in *'\"server\"'*) ;; *) echo no-info >&2; exit 3;; esac\n"
        "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
        "\"ExecCredential\",\"status\":{\"token\":\"%%s\"}}' \"$tok\"\n",
        name, name, token, stale_first ? 1 : 0);
}

static int runs(const char *name)
{
    char path[512], *s;
    uint32_t n = 0;

    snprintf(path, sizeof(path), "%s/%s.runs", dir, name);
    s = kp_lab_read_file(path, NULL);
    s[strcspn(s, "\n")] = '\0';
    assert_int_equal(kp_safe_atou32(s, &n), 0);
    kp_free(s);
    return (int)n;
}

static void write_kubeconfig(const char *file, const char *context, const char *plugin)
{
    char *ca = kp_lab_env(&lab, "KPSSH_LAB_CA");

    write_file(file, 0600,
               "apiVersion: v1\n"
               "kind: Config\n"
               "current-context: %s\n"
               "clusters:\n"
               "- name: lab\n"
               "  cluster:\n"
               "    server: %s\n"
               "    certificate-authority: %s\n"
               "contexts:\n"
               "- name: %s\n"
               "  context: {cluster: lab, user: %s-user, namespace: kube-system}\n"
               "users:\n"
               "- name: %s-user\n"
               "  user:\n"
               "    exec:\n"
               "      apiVersion: client.authentication.k8s.io/v1\n"
               "      command: ./%s\n"
               "      args: [\"--cluster\", \"lab\"]\n"
               "      provideClusterInfo: true\n"
               "      interactiveMode: Never\n"
               "      installHint: the plugin is written by the test\n",
               context, lab.api_url, ca, context, context, context, plugin);
    kp_free(ca);
}

/* Resolves the current context of $KUBECONFIG-style kubeconfig_env and gets a namespace with
 * it; returns the error of resolving or of the request (the resolve message goes to
 * ret_msg[size] when given). */
static int list_with(const char *kubeconfig_env, struct kp_exec_credential **ret_cred,
                     char *ret_msg, size_t size)
{
    struct kp_kubeconfig *kc = NULL;
    struct kp_kubeconfig_rest *rest = NULL;
    struct kp_exec_credential *cred = NULL;
    struct kp_transport_opts o;
    struct kp_yaml_error yerr;
    struct kp_client *c = NULL;
    struct kp_error e = KP_ERROR_INIT;
    json_t *ns = NULL;
    int r;

    r = kp_kubeconfig_load(NULL, kubeconfig_env, "/nonexistent", &kc, &yerr);
    if (r < 0)
        fail_msg("load: %s", yerr.text);
    *ret_cred = NULL;
    r = kp_kubeconfig_resolve(kc, NULL, 0, &rest, &yerr);
    if (r < 0) {
        if (!ret_msg)
            fail_msg("resolve: %s", yerr.text);
        snprintf(ret_msg, size, "%s", yerr.text);
        kp_kubeconfig_free(kc);
        return r;
    }
    assert_non_null(rest->exec);
    assert_string_equal(rest->namespace, "kube-system");
    assert_int_equal(kp_exec_credential_new(rest, NULL, &cred), 0);
    kp_transport_opts_from_kubeconfig(rest, &o);
    o.token = kp_exec_credential_token_fn;
    o.token_userdata = cred;
    assert_int_equal(kp_client_new(&o, &c), 0);
    r = kp_client_get(c, &KP_RES_NAMESPACE, NULL, rest->namespace, &ns, &e);
    kp_json_unref(ns);
    kp_error_done(&e);
    kp_client_free(c);
    kp_kubeconfig_rest_free(rest);
    kp_kubeconfig_free(kc);
    *ret_cred = cred;
    return r;
}

static void test_exec_plugin(void **state)
{
    struct kp_exec_credential *cred = NULL;
    char env[600];

    (void)state;
    write_plugin("get-token", false);
    write_kubeconfig("exec.yaml", "lab-exec", "get-token");
    snprintf(env, sizeof(env), "%s/exec.yaml", dir);
    assert_int_equal(list_with(env, &cred, NULL, 0), 0);
    assert_int_equal(runs("get-token"), 1);
    assert_int_equal(kp_exec_credential_runs(cred), 1);
    kp_exec_credential_free(cred);
}

static void test_exec_refresh_after_401(void **state)
{
    struct kp_exec_credential *cred = NULL;
    char env[600];

    (void)state;
    write_plugin("stale-token", true);
    write_kubeconfig("stale.yaml", "lab-stale", "stale-token");
    snprintf(env, sizeof(env), "%s/stale.yaml", dir);
    /* First token is refused (401); the transport asks the plugin again and retries. */
    assert_int_equal(list_with(env, &cred, NULL, 0), 0);
    assert_int_equal(runs("stale-token"), 2);
    kp_exec_credential_free(cred);
}

static void test_kubeconfig_merge(void **state)
{
    struct kp_exec_credential *cred = NULL;
    char env[1200];

    (void)state;
    write_plugin("merge-token", false);
    /* The first file names no current-context and defines lab-merge-user in a form that does
     * not resolve (v1 requires interactiveMode); the second sets current-context and its own,
     * valid lab-merge-user. The first file's entry wins, so resolving fails and names the first
     * file. With the order swapped the second file's entry wins and the request succeeds. */
    write_file("first.yaml", 0600,
               "apiVersion: v1\nkind: Config\nusers:\n- name: lab-merge-user\n  user:\n"
               "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
               "      command: ./no-such-plugin\n      installHint: install no-such-plugin\n");
    write_kubeconfig("second.yaml", "lab-merge", "merge-token");
    snprintf(env, sizeof(env), "%s/first.yaml:%s/missing.yaml::%s/second.yaml", dir, dir, dir);
    {
        char msg[512] = "";

        assert_true(list_with(env, &cred, msg, sizeof(msg)) < 0);
        assert_non_null(strstr(msg, "first.yaml"));
    }
    snprintf(env, sizeof(env), "%s/second.yaml:%s/first.yaml", dir, dir);
    assert_int_equal(list_with(env, &cred, NULL, 0), 0);
    kp_exec_credential_free(cred);
}

static int setup(void **state)
{
    (void)state;
    kp_lab_load(&lab);
    token = kp_lab_admin_token(&lab);
    snprintf(dir, sizeof(dir), "%s/kubeconfig-test-%ld", lab.dir, (long)getpid());
    assert_int_equal(mkdir(dir, 0700), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kp_wipe(token, strlen(token));
    kp_free(token);
    kp_lab_done(&lab);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_plugin),
        cmocka_unit_test(test_exec_refresh_after_401),
        cmocka_unit_test(test_kubeconfig_merge),
    };

    return _cmocka_run_group_tests("integration-kubeconfig", tests, KP_ARRAY_SIZE(tests), setup,
                                   teardown)
               ? 1
               : 0;
}
