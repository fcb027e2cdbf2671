/* DESIGN: kpssh's own Kubernetes client (k8s/client) running as the Helm chart's ServiceAccount
 * with nothing but the chart's RBAC, against the lab's real kube-apiserver.
 *
 * Set-up installs deploy/charts/kpssh with the lab's helm into a namespace of its own (pool
 * namespace separate), applying deploy/crds first when the lab has no kpssh CRDs, and asks the
 * TokenRequest API for a token of the chart's ServiceAccount. The client built on that token
 * then makes the controller's calls and gets 0, and out-of-scope calls get -KP_EFORBIDDEN with
 * the server's 403 (from RBAC, or from the chart's admission policies where RBAC cannot draw the
 * line). tests/integration/test-chart.sh covers the full matrix through kubectl; this test shows
 * the same boundary holds for the client kpssh-controller is built on. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/status.h"
#include "k8s/transport.h"
#include "kp-lab.h"
#include "kp-test.h"

#define RELEASE "kpssh-rbac" /* also the ServiceAccount (the chart's full name) */

/* SSHHost is namespaced (deploy/crds); declared here so the test does not depend on the scope
 * k8s/client.c's KP_RES_SSHHOST was given before the CRDs existed. */
static const struct kp_resource sshhosts =
    KP_RESOURCE("karpenter.kpssh.dev", "v1beta1", "sshhosts", true, "SSHHost");

static struct {
    struct kp_lab lab;
    struct kp_client *admin, *sa;
    char ns[64], pool[64], other[64];
    char *repo, *kubeconfig, *helm, *token;
    bool applied_crds;
} t;

struct fixed_token {
    const char *token;
};
static struct fixed_token tok;

static int fixed_token_fn(void *userdata, bool refresh, struct kp_secret **ret)
{
    struct fixed_token *f = userdata;

    (void)refresh;
    return kp_secret_new(f->token, strlen(f->token), ret);
}

static char *strf(const char *fmt, ...) KP_PRINTF(1, 2);
static char *strf(const char *fmt, ...)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    va_list ap;
    char *s;

    va_start(ap, fmt);
    assert_int_equal(kp_buf_vprintf(&b, fmt, ap), 0);
    va_end(ap);
    s = kp_strdup(kp_buf_str(&b));
    assert_non_null(s);
    kp_buf_done(&b);
    return s;
}

/* PATCH with a merge patch given as a string. */
static int patch(const struct kp_resource *res, const char *ns, const char *name, const char *sub,
                 const char *body, json_t **ret, struct kp_error *e)
{
    return kp_client_patch_bytes(t.sa, res, ns, name, sub, KP_PATCH_MERGE, body, strlen(body), ret,
                                 e);
}

static void admin_create(const struct kp_resource *res, const char *ns, const char *fmt, ...)
    KP_PRINTF(3, 4);
static void admin_create(const struct kp_resource *res, const char *ns, const char *fmt, ...)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    struct kp_error e = KP_ERROR_INIT;
    json_t *obj;
    va_list ap;
    int r;

    va_start(ap, fmt);
    assert_int_equal(kp_buf_vprintf(&b, fmt, ap), 0);
    va_end(ap);
    obj = kp_lab_json("%s", kp_buf_str(&b));
    r = kp_client_create(t.admin, res, ns, obj, NULL, &e);
    if (r != -EEXIST)
        kp_lab_check(r, &e, res->kind);
    kp_json_unref(obj);
    kp_buf_done(&b);
    kp_error_done(&e);
}

/* Deletes as admin, whatever is left (tear-down). */
static void del(const struct kp_resource *res, const char *ns, const char *name)
{
    struct kp_error e = KP_ERROR_INIT;
    int r = kp_client_delete(t.admin, res, ns, name, NULL, &e);

    if (r < 0 && r != -ENOENT)
        print_message("# tear-down: delete %s %s: %s\n", res->resource, name, kp_strerror(r));
    kp_error_done(&e);
}

static int count_page(const struct kp_list_page *page, void *userdata)
{
    size_t *n = userdata;

    *n += kp_json_array_size(page->items);
    return 0;
}

/* The kpssh CRDs exist (applied from deploy/crds when the lab has none) and are served. */
static void ensure_crds(void)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *got = NULL;
    int r = kp_client_get(t.admin, &KP_RES_CRD, NULL, "sshhosts.karpenter.kpssh.dev", &got, &e);

    kp_json_unref(got);
    if (r == -ENOENT) {
        char *dir = strf("%s/deploy/crds", t.repo);
        const char *argv[] = {t.lab.kubectl,   "--kubeconfig", t.kubeconfig, "apply",
                              "--server-side", "-f",           dir,          NULL};

        kp_lab_run(argv, 300 * KP_USEC_PER_SEC, KP_LAB_RUN_MUST, NULL);
        kp_free(dir);
        t.applied_crds = true;
    } else {
        kp_lab_check(r, &e, "get CRD");
    }
    /* Established: the kinds are served (a list answers instead of 404). */
    for (int i = 0; i < 300; i++) {
        size_t n = 0;

        kp_error_done(&e);
        r = kp_client_list(t.admin, &KP_RES_SSHNODECLASS, NULL, NULL, count_page, &n, NULL, &e);
        if (r == 0)
            r = kp_client_list(t.admin, &sshhosts, NULL, NULL, count_page, &n, NULL, &e);
        if (r == 0)
            break;
        kp_sleep_usec(100 * 1000);
    }
    kp_lab_check(r, &e, "kpssh CRDs served");
    kp_error_done(&e);
}

static void test_setup(void **state)
{
    struct kp_error e = KP_ERROR_INIT;
    struct kp_transport_opts o;
    json_t *treq, *tresp = NULL, *got = NULL;
    const char *s = NULL;
    char *chart, *pool_set;
    int r;

    (void)state;
    kp_lab_load(&t.lab);
    t.admin = kp_lab_admin_client(&t.lab);
    t.repo = kp_strdup(getenv("KP_REPO") ? getenv("KP_REPO") : ".");
    t.kubeconfig = kp_lab_env_need(&t.lab, "KUBECONFIG");
    t.helm = strf("%s/helm", t.lab.bin);
    kp_lab_namespace(t.admin, RELEASE, t.ns, sizeof(t.ns));
    kp_lab_namespace(t.admin, "kpssh-rbac-pool", t.pool, sizeof(t.pool));
    kp_lab_namespace(t.admin, "kpssh-rbac-other", t.other, sizeof(t.other));
    ensure_crds();

    chart = strf("%s/deploy/charts/kpssh", t.repo);
    pool_set = strf("poolNamespace=%s", t.pool);
    {
        const char *argv[] = {t.helm,       "--kubeconfig",
                              t.kubeconfig, "install",
                              RELEASE,      chart,
                              "-n",         t.ns,
                              "--set",      pool_set,
                              "--set",      "crds.install=false",
                              "--set",      "crds.karpenter=never",
                              NULL};
        kp_lab_run(argv, 300 * KP_USEC_PER_SEC, KP_LAB_RUN_MUST, NULL);
    }
    kp_free(chart);
    kp_free(pool_set);

    /* Objects the calls act on, written as admin. */
    admin_create(&KP_RES_SECRET, t.pool,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"pool-key\"},"
                 "\"stringData\":{\"privateKey\":\"%s\"}}",
                 "not-a-key");
    admin_create(&KP_RES_SECRET, t.other,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"%s\"},"
                 "\"stringData\":{\"k\":\"v\"}}",
                 "elsewhere");
    admin_create(&sshhosts, t.pool,
                 "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHHost\","
                 "\"metadata\":{\"name\":\"h1\"},\"spec\":{\"address\":\"%s\","
                 "\"sshKeySecretRef\":{\"name\":\"pool-key\"},"
                 "\"capacity\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}}}",
                 "10.213.251.21");
    admin_create(&KP_RES_SSHJOINPROFILE, NULL,
                 "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHJoinProfile\","
                 "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"scripts\":{\"install\":\"true\","
                 "\"join\":\"true\",\"leave\":\"true\"}}}",
                 RELEASE);
    admin_create(&KP_RES_SSHNODECLASS, NULL,
                 "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHNodeClass\","
                 "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"joinProfileRef\":{\"name\":"
                 "\"kpssh-rbac\"}}}",
                 RELEASE);

    treq = kp_lab_json("{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\","
                       "\"spec\":{\"expirationSeconds\":%s}}",
                       "900");
    r = kp_client_create_sub(t.admin, &KP_RES_SERVICEACCOUNT, t.ns, RELEASE, "token", treq, &tresp,
                             &e);
    kp_lab_check(r, &e, "token request");
    kp_json_unref(treq);
    assert_int_equal(kp_json_path_str(tresp, "status.token", &s), 0);
    t.token = kp_strdup(s);
    kp_json_unref(tresp);

    tok.token = t.token;
    o = (struct kp_transport_opts){.server = t.lab.api_url,
                                   .ca_pem = t.lab.ca,
                                   .ca_pem_len = t.lab.ca_len,
                                   .token = fixed_token_fn,
                                   .token_userdata = &tok};
    assert_int_equal(kp_client_new(&o, &t.sa), 0);
    /* RBAC changes take a moment to reach the authorizer's cache, and each binding arrives on
     * its own: wait until one grant of the ClusterRole and of each namespaced Role that can be
     * read without side effects is in force (under load the Roles lag the ClusterRole). */
    {
        static const struct {
            const struct kp_resource *res;
            int ns; /* 0: the pool namespace, 1: kube-public */
            const char *name;
        } first[] = {{&sshhosts, 0, "h1"},
                     {&KP_RES_SECRET, 0, "pool-key"},
                     {&KP_RES_CONFIGMAP, 1, "cluster-info"}};

        for (size_t k = 0; k < KP_ARRAY_SIZE(first); k++) {
            for (int i = 0; i < 300; i++) {
                kp_error_done(&e);
                got = NULL;
                r = kp_client_get(t.sa, first[k].res, first[k].ns ? "kube-public" : t.pool,
                                  first[k].name, &got, &e);
                if (r != -KP_EFORBIDDEN)
                    break;
                kp_sleep_usec(100 * 1000);
            }
            kp_lab_check(r, &e, "first call as the ServiceAccount");
            got = kp_json_unref(got);
        }
    }
    kp_error_done(&e);
}

/* --- the calls the controller makes: 0 ----------------------------------------------------- */

static void test_allowed(void **state)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *got = NULL, *token;
    size_t n = 0;
    int r;

    (void)state;
    assert_non_null(t.sa);
    r = kp_client_list(t.sa, &sshhosts, NULL, NULL, count_page, &n, NULL, &e);
    kp_lab_check(r, &e, "list sshhosts (all namespaces)");
    assert_true(n >= 1);
    r = kp_client_list(t.sa, &KP_RES_POD, NULL, NULL, count_page, &n, NULL, &e);
    kp_lab_check(r, &e, "list pods");
    r = kp_client_list(t.sa, &KP_RES_NODECLAIM, NULL, NULL, count_page, &n, NULL, &e);
    kp_lab_check(r, &e, "list nodeclaims");
    /* The provisioner's and consolidation's shared DaemonSet informer (overhead). */
    r = kp_client_list(t.sa, &KP_RES_DAEMONSET, NULL, NULL, count_page, &n, NULL, &e);
    kp_lab_check(r, &e, "list daemonsets (all namespaces)");

    r = patch(&sshhosts, t.pool, "h1", "status", "{\"status\":{\"state\":\"Available\"}}", &got,
              &e);
    kp_lab_check(r, &e, "patch sshhosts/status");
    got = kp_json_unref(got);

    r = kp_client_get(t.sa, &KP_RES_SECRET, t.pool, "pool-key", &got, &e);
    kp_lab_check(r, &e, "get a Secret in the pool namespace");
    got = kp_json_unref(got);

    r = kp_client_get(t.sa, &KP_RES_CONFIGMAP, "kube-public", "cluster-info", &got, &e);
    kp_lab_check(r, &e, "get kube-public/cluster-info");
    got = kp_json_unref(got);

    token = kp_lab_json(
        "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
        "\"bootstrap-token-kprbac\"},\"type\":\"bootstrap.kubernetes.io/token\",\"stringData\":"
        "{\"token-id\":\"kprbac\",\"token-secret\":\"0123456789abcdef\","
        "\"usage-bootstrap-authentication\":\"true\",\"auth-extra-groups\":\"%s\","
        "\"expiration\":\"2099-01-01T00:00:00Z\"}}",
        "system:bootstrappers:kpssh");
    r = kp_client_create(t.sa, &KP_RES_SECRET, "kube-system", token, NULL, &e);
    kp_lab_check(r, &e, "create a bootstrap token");
    kp_json_unref(token);
    r = kp_client_delete(t.sa, &KP_RES_SECRET, "kube-system", "bootstrap-token-kprbac", NULL, &e);
    kp_lab_check(r, &e, "delete the bootstrap token");
    kp_error_done(&e);
}

/* --- out of scope: -KP_EFORBIDDEN with the server's 403 ------------------------------------ */

static void expect_forbidden(int r, const struct kp_error *e, const char *what, const char *part)
{
    if (r != -KP_EFORBIDDEN)
        fail_msg("%s: want -KP_EFORBIDDEN, got %s (%d) message=%s", what, kp_strerror(r), r,
                 e->message ? e->message : "-");
    assert_int_equal(e->code, 403);
    if (part && (!e->message || !strstr(e->message, part)))
        fail_msg("%s: message lacks \"%s\": %s", what, part, e->message ? e->message : "-");
}

static void test_denied(void **state)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *got = NULL, *obj;
    int r, tries = 0;

    (void)state;
    assert_non_null(t.sa);
    r = kp_client_get(t.sa, &KP_RES_SECRET, t.other, "elsewhere", &got, &e);
    expect_forbidden(r, &e, "get a Secret in another namespace", "system:serviceaccount:");

    r = patch(&sshhosts, t.pool, "h1", NULL, "{\"spec\":{\"port\":2222}}", NULL, &e);
    expect_forbidden(r, &e, "patch an SSHHost spec", "sshhosts");

    obj = kp_lab_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\"}}",
                      "kpssh-rbac");
    r = kp_client_create(t.sa, &KP_RES_NODE, NULL, obj, NULL, &e);
    expect_forbidden(r, &e, "create a Node", "nodes");
    kp_json_unref(obj);

    r = patch(&KP_RES_SSHJOINPROFILE, NULL, RELEASE, NULL, "{\"spec\":{\"version\":\"2\"}}", NULL,
              &e);
    expect_forbidden(r, &e, "patch an SSHJoinProfile", "sshjoinprofiles");

    /* RBAC allows patching SSHNodeClasses (finalizer); the chart's admission policy refuses a
     * spec change from this identity. A policy the chart just installed takes a moment before
     * the API server enforces it, so this retries for up to 30 s, and every attempt is a real
     * change: once one patch has gone through, repeating the same value would change nothing,
     * and the policy rightly lets an unchanged spec pass. */
    for (int i = 0; i < 30; i++) {
        char body[64];

        kp_error_done(&e);
        (void)snprintf(body, sizeof(body), "{\"spec\":{\"pricePerCPUHour\":\"9.%d\"}}", i + 1);
        r = patch(&KP_RES_SSHNODECLASS, NULL, RELEASE, NULL, body, NULL, &e);
        tries++;
        if (r == -KP_EFORBIDDEN)
            break; /* anything else (a transient 5xx too) is tried again */
        kp_sleep_usec(KP_USEC_PER_SEC);
    }
    print_message("# spec guard in force after %d attempt(s)\n", tries);
    expect_forbidden(r, &e, "patch an SSHNodeClass spec", "may change only the metadata");

    /* RBAC cannot limit create by name in kube-system; the admission policy does. A Secret
     * created before the policy was in force is removed (as admin) and the create tried again. */
    obj = kp_lab_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"%s\"},"
                      "\"stringData\":{\"k\":\"v\"}}",
                      "kpssh-rbac-plain");
    for (int i = 0; i < 30; i++) {
        kp_error_done(&e);
        r = kp_client_create(t.sa, &KP_RES_SECRET, "kube-system", obj, NULL, &e);
        if (r == -KP_EFORBIDDEN)
            break;
        if (r == 0 || r == -EEXIST)
            del(&KP_RES_SECRET, "kube-system", "kpssh-rbac-plain");
        kp_sleep_usec(KP_USEC_PER_SEC);
    }
    expect_forbidden(r, &e, "create a plain Secret in kube-system", "own bootstrap tokens");
    kp_json_unref(obj);
    kp_error_done(&e);
}

static void test_teardown(void **state)
{
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    t.sa = kp_client_free(t.sa);
    {
        const char *argv[] = {t.helm,  "--kubeconfig", t.kubeconfig, "uninstall",
                              RELEASE, "-n",           t.ns,         NULL};
        kp_lab_run(argv, 300 * KP_USEC_PER_SEC, KP_LAB_RUN_MUST, NULL);
    }
    del(&KP_RES_SSHNODECLASS, NULL, RELEASE);
    del(&KP_RES_SSHJOINPROFILE, NULL, RELEASE);
    del(&sshhosts, t.pool, "h1");
    del(&KP_RES_SECRET, "kube-system", "bootstrap-token-kprbac");
    del(&KP_RES_NAMESPACE, NULL, t.ns);
    del(&KP_RES_NAMESPACE, NULL, t.pool);
    del(&KP_RES_NAMESPACE, NULL, t.other);
    if (t.applied_crds) {
        char *dir = strf("%s/deploy/crds", t.repo);
        const char *argv[] = {t.lab.kubectl, "--kubeconfig", t.kubeconfig,         "delete", "-f",
                              dir,           "--wait=true",  "--ignore-not-found", NULL};
        (void)kp_lab_run(argv, 300 * KP_USEC_PER_SEC, KP_LAB_RUN_QUIET, NULL);
        kp_free(dir);
    }
    kp_error_done(&e);
    t.admin = kp_client_free(t.admin);
    if (t.token) {
        kp_wipe(t.token, strlen(t.token));
        kp_free(t.token);
    }
    kp_free(t.repo);
    kp_free(t.kubeconfig);
    kp_free(t.helm);
    kp_lab_done(&t.lab);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup),
        cmocka_unit_test(test_allowed),
        cmocka_unit_test(test_denied),
        cmocka_unit_test(test_teardown),
    };

    return kp_test_main("integration-rbac", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
