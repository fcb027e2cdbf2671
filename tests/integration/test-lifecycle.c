/* tests/integration/test-lifecycle.c: the NodeClaim lifecycle controller (core/lifecycle)
 * against the lab's real kube-apiserver with karpenter.sh/v1's CRDs from deploy/crds. No SSH and
 * no kubelet: the provider is a small one of this file (launching is recording), and the Node is
 * written through the API as a kubelet would register it (with karpenter.sh/unregistered) and
 * report Ready (status subresource).
 *
 *   lifecycle  a NodeClaim gets the finalizer and Launched=True with the provider's providerID
 *              and labels; the registering Node gets finalizer, ownerRef, the claim's labels and
 *              taints, loses karpenter.sh/unregistered and is labelled registered; the claim is
 *              Registered with status.nodeName; once the Node is Ready and its startup taint is
 *              removed, the Node is labelled initialized and the claim is Initialized and Ready.
 *   deletion   deleting the claim deletes its Node first (held by our finalizer, which the Node's
 *              termination owns: the test releases it), then the instance, then the claim goes.
 *              Its terminationGracePeriod puts karpenter.sh/nodeclaim-termination-timestamp on
 *              it, with the TerminationGracePeriodExpiring event.
 *   capacity   a launch without capacity deletes the claim (event InsufficientCapacityError).
 *   foreign    a claim of another node class is never touched. */
#include "kp-lab.h"
#include "kp-test.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "k8s/status.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "core/core.h"
#include "core/lifecycle/lifecycle.h"
#include "core/provider.h"

#define WAIT_SECONDS 30
#define GROUP "lifecycle.test.kpssh.dev"
#define KIND "TestNodeClass"

/* --- a provider that launches by remembering ---------------------------------------------------- */

static struct {
    pthread_mutex_t mu;
    char held[4][128]; /* NodeClaim uids with an instance */
    size_t n;
    atomic_uint creates, deletes;
} P = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *p_name(void *self)
{
    (void)self;
    return "itest";
}

static size_t p_classes(void *self, const struct kp_node_class_kind **ret)
{
    static const struct kp_node_class_kind k[] = {{GROUP, KIND}};

    (void)self;
    *ret = k;
    return 1;
}

static size_t p_repair(void *self, const struct kp_repair_policy **ret)
{
    (void)self;
    *ret = NULL;
    return 0;
}

static int p_create(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                    const struct kp_nodeclaim_view *nc, struct kp_provider_instance *ret,
                    struct kp_provider_err *err)
{
    struct kp_provider_instance in = {0};
    int r;

    (void)self;
    (void)ctx;
    (void)c;
    atomic_fetch_add(&P.creates, 1);
    if (kp_endswith(nc->e.name, "-ice"))
        return kp_provider_err_set(err, -ENOSPC, KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY, NULL,
                                   "no free host fits");
    in.provider_id = kp_strjoin("itest://", nc->e.name, (const char *)NULL);
    in.nodeclaim = kp_strdup(nc->e.name);
    if (!in.provider_id || !in.nodeclaim ||
        (r = kp_provider_kv_add(&in.labels, &in.n_labels, KP_LABEL_ZONE, "rack-1")) < 0 ||
        (r = kp_provider_kv_add(&in.labels, &in.n_labels, KP_LABEL_CAPACITY_TYPE, "on-demand")) <
            0 ||
        (r = kp_provider_res_add(&in.capacity, &in.n_capacity, "cpu", 2000)) < 0 ||
        (r = kp_provider_res_add(&in.allocatable, &in.n_allocatable, "cpu", 1900)) < 0) {
        kp_provider_instance_done(&in);
        return -ENOMEM;
    }
    pthread_mutex_lock(&P.mu);
    /* uids are 36 characters: they always fit. */
    if (P.n < 4 && kp_strscpy(P.held[P.n], sizeof(P.held[0]), nc->e.uid) >= 0)
        P.n++;
    pthread_mutex_unlock(&P.mu);
    *ret = in;
    return 0;
}

static int p_delete(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                    const struct kp_nodeclaim_view *nc, struct kp_provider_err *err)
{
    int r = -ENOENT;

    (void)self;
    (void)ctx;
    (void)c;
    atomic_fetch_add(&P.deletes, 1);
    pthread_mutex_lock(&P.mu);
    for (size_t i = 0; i < P.n; i++)
        if (kp_streq(P.held[i], nc->e.uid)) {
            P.held[i][0] = '\0';
            r = 0;
        }
    pthread_mutex_unlock(&P.mu);
    return r == 0 ? 0 : kp_provider_err_set(err, -ENOENT, KP_PROVIDER_ERR_NOT_FOUND, NULL, "gone");
}

static const struct kp_provider_ops p_ops = {
    .name = p_name,
    .supported_node_classes = p_classes,
    .repair_policies = p_repair,
    .create = p_create,
    .delete = p_delete,
};

/* --- fixture ------------------------------------------------------------------------------------- */

static struct {
    struct kp_lab lab;
    char px[32];
    struct kp_client *c;
    struct kp_registry *reg;
    struct kp_informer *claims, *nodes;
    struct kp_provider prov;
    struct kp_core_env env;
    struct kp_lifecycle_controller *ctl;
} T;

static char *name(const char *suffix)
{
    char *s = kp_strjoin(T.px, "-", suffix, (const char *)NULL);

    assert_non_null(s);
    return s;
}

static json_t *get(const struct kp_resource *res, const char *n)
{
    json_t *o = NULL;
    int r = kp_client_get(T.c, res, NULL, n, &o, NULL);

    if (r == -ENOENT)
        return NULL;
    assert_int_equal(r, 0);
    return o;
}

static void create(const struct kp_resource *res, json_t *obj)
{
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_check(kp_client_create(T.c, res, NULL, obj, NULL, &e), &e, res->kind);
    kp_error_done(&e);
    kp_json_unref(obj);
}

static void patch(const struct kp_resource *res, const char *n, const char *sub, json_t *p)
{
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_check(kp_client_patch(T.c, res, NULL, n, sub, KP_PATCH_MERGE, p, NULL, &e), &e, n);
    kp_error_done(&e);
    kp_json_unref(p);
}

static void del(const struct kp_resource *res, const char *n)
{
    struct kp_error e = KP_ERROR_INIT;
    int r = kp_client_delete(T.c, res, NULL, n, NULL, &e);

    if (r != -ENOENT)
        kp_lab_check(r, &e, n);
    kp_error_done(&e);
}

static void nodeclaim(const char *n, const char *group, const char *tgp)
{
    create(&KP_RES_NODECLAIM,
           kp_lab_json("{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":"
                       "{\"name\":\"%s\",\"labels\":{\"karpenter.sh/nodepool\":\"np\",\"team\":"
                       "\"a\"}},\"spec\":{\"nodeClassRef\":{\"group\":\"%s\",\"kind\":\"" KIND
                       "\",\"name\":\"c\"},\"requirements\":[{\"key\":\"kubernetes.io/arch\","
                       "\"operator\":\"In\",\"values\":[\"amd64\"]}],\"taints\":[{\"key\":"
                       "\"dedicated\",\"value\":\"a\",\"effect\":\"NoSchedule\"}],"
                       "\"startupTaints\":[{\"key\":\"example.com/agent\",\"effect\":"
                       "\"NoSchedule\"}]%s%s%s}}",
                       n, group, tgp ? ",\"terminationGracePeriod\":\"" : "", tgp ? tgp : "",
                       tgp ? "\"" : ""));
}

/* The status of condition type on o ("" when absent). */
static const char *cond(const json_t *o, const char *type)
{
    json_t *conds = NULL;

    if (kp_json_path_array(o, "status.conditions", &conds) == 0)
        for (size_t i = 0; i < kp_json_array_size(conds); i++) {
            json_t *c = kp_json_array_at(conds, i);
            const char *t = NULL, *st = NULL;

            if (kp_json_get_str(c, "type", &t) == 0 && kp_streq(t, type) &&
                kp_json_get_str(c, "status", &st) == 0)
                return st;
        }
    return "";
}

static bool has_str(const json_t *o, const char *path, const char *s)
{
    json_t *arr = NULL;

    if (kp_json_path_array(o, path, &arr) == 0)
        for (size_t i = 0; i < kp_json_array_size(arr); i++) {
            const char *v = NULL;

            if (kp_json_as_str(kp_json_array_at(arr, i), &v) == 0 && kp_streq(v, s))
                return true;
        }
    return false;
}

static bool has_taint(const json_t *node, const char *key)
{
    json_t *arr = NULL;

    if (kp_json_path_array(node, "spec.taints", &arr) == 0)
        for (size_t i = 0; i < kp_json_array_size(arr); i++) {
            const char *k = NULL;

            if (kp_json_get_str(kp_json_array_at(arr, i), "key", &k) == 0 && kp_streq(k, key))
                return true;
        }
    return false;
}

static const char *label(const json_t *o, const char *key)
{
    json_t *l = NULL;
    const char *v = NULL;

    if (kp_json_path_object(o, "metadata.labels", &l) < 0 || kp_json_get_str(l, key, &v) < 0)
        return NULL;
    return v;
}

/* Waits until cond_fn(object) holds; fails with what was last seen. */
static void wait_for(const struct kp_resource *res, const char *n, bool (*fn)(const json_t *),
                     const char *what)
{
    for (int i = 0; i < WAIT_SECONDS * 10; i++) {
        json_t *o = get(res, n);
        bool ok = fn(o);

        kp_json_unref(o);
        if (ok)
            return;
        kp_sleep_usec(100 * 1000);
    }
    fail_msg("%s %s: never %s", res->kind, n, what);
}

static bool launched(const json_t *o)
{
    const char *pid = NULL;

    return o && has_str(o, "metadata.finalizers", KP_CORE_FINALIZER) &&
           kp_streq(cond(o, "Launched"), "True") && kp_streq(cond(o, "Registered"), "Unknown") &&
           kp_json_path_str(o, "status.providerID", &pid) == 0 && kp_startswith(pid, "itest://") &&
           kp_streq(label(o, KP_LABEL_ZONE), "rack-1") && kp_streq(label(o, "team"), "a");
}

static bool registered(const json_t *o)
{
    const char *nn = NULL;

    return o && kp_streq(cond(o, "Registered"), "True") &&
           kp_json_path_str(o, "status.nodeName", &nn) == 0 && kp_startswith(nn, T.px);
}

static bool node_synced(const json_t *o)
{
    json_t *owners = NULL;
    const char *kind = NULL;

    return o && has_str(o, "metadata.finalizers", KP_CORE_FINALIZER) &&
           !has_taint(o, KP_CORE_TAINT_UNREGISTERED) && has_taint(o, "dedicated") &&
           has_taint(o, "example.com/agent") &&
           kp_streq(label(o, KP_CORE_LABEL_REGISTERED), "true") &&
           kp_streq(label(o, "team"), "a") && kp_streq(label(o, KP_LABEL_ZONE), "rack-1") &&
           kp_json_path_array(o, "metadata.ownerReferences", &owners) == 0 &&
           kp_json_get_str(kp_json_array_at(owners, 0), "kind", &kind) == 0 &&
           kp_streq(kind, "NodeClaim");
}

static bool initialized(const json_t *o)
{
    return o && kp_streq(cond(o, "Initialized"), "True") && kp_streq(cond(o, "Ready"), "True");
}

static bool node_initialized(const json_t *o)
{
    return o && kp_streq(label(o, KP_CORE_LABEL_INITIALIZED), "true");
}

static bool node_deleting(const json_t *o)
{
    const char *ts = NULL;

    return o && kp_json_path_str(o, "metadata.deletionTimestamp", &ts) == 0;
}

static bool gone(const json_t *o)
{
    return o == NULL;
}

static bool tgp_annotated(const json_t *o)
{
    json_t *a = NULL;
    const char *v = NULL;

    return o && kp_json_path_object(o, "metadata.annotations", &a) == 0 &&
           kp_json_get_str(a, KP_CORE_ANN_TERMINATION_TIMESTAMP, &v) == 0 && strlen(v) == 20;
}

/* Events of cluster-scoped objects go to "default". */
static void wait_event(const char *n, const char *reason)
{
    for (int i = 0; i < WAIT_SECONDS * 10; i++) {
        if (kp_lab_events_count(T.c, "default", n, reason) > 0)
            return;
        kp_sleep_usec(100 * 1000);
    }
    fail_msg("no %s event about %s", reason, n);
}

static void test_lifecycle_and_deletion(void **state)
{
    char *nc = name("a"), *nd = name("a-node");
    char *pid = kp_strjoin("itest://", nc, (const char *)NULL);
    unsigned creates;

    (void)state;
    nodeclaim(nc, GROUP, "1h");
    wait_for(&KP_RES_NODECLAIM, nc, launched, "launched");
    creates = atomic_load(&P.creates);

    /* The kubelet registers with the unregistered taint. */
    create(&KP_RES_NODE,
           kp_lab_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\","
                       "\"labels\":{\"kubernetes.io/hostname\":\"%s\"}},\"spec\":{\"providerID\":"
                       "\"%s\",\"taints\":[{\"key\":\"" KP_CORE_TAINT_UNREGISTERED
                       "\",\"effect\":\"NoExecute\"}]}}",
                       nd, nd, pid));
    wait_for(&KP_RES_NODE, nd, node_synced, "synced");
    wait_for(&KP_RES_NODECLAIM, nc, registered, "registered");

    /* Ready, and the startup taint's owner removes it: initialized. */
    patch(&KP_RES_NODE, nd, "status",
          kp_lab_json("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                      "\"reason\":\"KubeletReady\",\"message\":\"ok\"}],\"allocatable\":{\"cpu\":"
                      "\"2\",\"pods\":\"10\"}}}"));
    patch(&KP_RES_NODE, nd, NULL,
          kp_lab_json("{\"spec\":{\"taints\":[{\"key\":\"dedicated\",\"value\":\"a\","
                      "\"effect\":\"NoSchedule\"}]}}"));
    wait_for(&KP_RES_NODE, nd, node_initialized, "labelled initialized");
    wait_for(&KP_RES_NODECLAIM, nc, initialized, "initialized");
    /* Launched once, however many reconciles the writes caused. */
    assert_int_equal(atomic_load(&P.creates), creates);

    /* Deletion: the Node first (our finalizer holds it for the Node's termination, which the
     * test plays by releasing it), then the instance, then the claim. */
    del(&KP_RES_NODECLAIM, nc);
    wait_for(&KP_RES_NODE, nd, node_deleting, "deleting");
    wait_for(&KP_RES_NODECLAIM, nc, tgp_annotated, "annotated with its termination time");
    assert_int_equal(atomic_load(&P.deletes), 0);
    wait_event(nc, KP_LIFECYCLE_EVENT_TGP_EXPIRING);
    patch(&KP_RES_NODE, nd, NULL, kp_lab_json("{\"metadata\":{\"finalizers\":null}}"));
    wait_for(&KP_RES_NODE, nd, gone, "gone");
    wait_for(&KP_RES_NODECLAIM, nc, gone, "gone");
    assert_true(atomic_load(&P.deletes) >= 2); /* until NotFound */
    kp_free(pid);
    kp_free(nd);
    kp_free(nc);
}

static void test_insufficient_capacity(void **state)
{
    char *nc = name("x-ice");
    unsigned creates = atomic_load(&P.creates);

    (void)state;
    nodeclaim(nc, GROUP, NULL);
    /* Deleted by the launch, released by its finalizer (nothing was launched), and tried once:
     * the reconcile the finalizer's own watch event brings must not launch again. */
    wait_for(&KP_RES_NODECLAIM, nc, gone, "gone");
    wait_event(nc, KP_LIFECYCLE_EVENT_INSUFFICIENT_CAPACITY);
    assert_int_equal(atomic_load(&P.creates) - creates, 1);
    kp_free(nc);
}

static bool untouched(const json_t *o)
{
    json_t *conds = NULL;

    return o && !has_str(o, "metadata.finalizers", KP_CORE_FINALIZER) &&
           (kp_json_path_array(o, "status.conditions", &conds) < 0 ||
            kp_json_array_size(conds) == 0);
}

static void test_foreign(void **state)
{
    char *nc = name("foreign");
    json_t *o;

    (void)state;
    nodeclaim(nc, "other.example.com", NULL);
    kp_sleep_usec(2 * 1000 * 1000); /* time enough for a reconcile to act, which it must not */
    o = get(&KP_RES_NODECLAIM, nc);
    assert_true(untouched(o));
    kp_json_unref(o);
    del(&KP_RES_NODECLAIM, nc);
    kp_free(nc);
}

static int setup(void **state)
{
    const char *kind = NULL;

    (void)state;
    kp_lab_load(&T.lab);
    (void)snprintf(T.px, sizeof(T.px), "lc%d", (int)getpid());
    T.c = kp_lab_admin_client(&T.lab);
    kp_lab_apply_crds(&T.lab);
    assert_int_equal(kp_registry_new(T.c, &T.reg), 0);
    T.prov = (struct kp_provider){.ops = &p_ops, .self = NULL};
    T.env =
        (struct kp_core_env){.client = T.c, .informers = T.reg, .provider = &T.prov, .workers = 2};
    assert_int_equal(kp_lifecycle_controller_new(&T.env, &T.ctl), 0);
    if (kp_registry_start(T.reg, 60 * KP_USEC_PER_SEC, NULL, &kind) < 0)
        fail_msg("informer of %s did not sync", kind ? kind : "?");
    assert_int_equal(kp_lifecycle_controller_start(T.ctl), 0);
    for (int i = 0; i < 100 && !kp_lifecycle_controller_ready(T.ctl); i++)
        kp_sleep_usec(50 * 1000);
    assert_true(kp_lifecycle_controller_ready(T.ctl));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kp_lifecycle_controller_stop(T.ctl);
    kp_registry_stop(T.reg);
    T.ctl = kp_lifecycle_controller_free(T.ctl);
    T.reg = kp_registry_free(T.reg);
    T.c = kp_client_free(T.c);
    kp_lab_done(&T.lab);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle_and_deletion),
        cmocka_unit_test(test_insufficient_capacity),
        cmocka_unit_test(test_foreign),
    };

    (void)argc;
    (void)argv;
    kp_log_set_level(KP_LOG_WARN);
    return cmocka_run_group_tests_name("lifecycle", tests, setup, teardown);
}
