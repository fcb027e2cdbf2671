/* tests/integration/test-termination.c: the Node termination controller
 * (core/termination/termination.h) against the lab's real kube-apiserver, with karpenter.sh/v1's
 * CRDs from deploy/crds and a scripted provider in this process. No kubelet: Nodes and
 * NodeClaims are written through the API as their owners would, and each carries a second
 * finalizer of the test's ("test.kpssh.dev/hold") so that what the controller left behind can be
 * read after it let go.
 *
 *   label only   a Node managed by its karpenter.sh/nodepool label alone (no NodeClaim) is
 *                tainted karpenter.sh/disrupted:NoSchedule, labelled out of the load balancers,
 *                and loses karpenter.sh/termination (the test's finalizer kept).
 *   with claim   deleting the Node deletes its NodeClaim; Drained, VolumesDetached and
 *                InstanceTerminating become True; the provider's Delete is called until it
 *                answers NOT_FOUND, and at every call the Node still holds the finalizer (the
 *                EKS Hybrid Nodes order: the machine is released before the Node can go). */
#include "kp-lab.h"
#include "kp-test.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/registry.h"
#include "k8s/status.h"
#include "core/provider.h"
#include "core/termination/termination.h"

#define WAIT_SECONDS 30
#define HOLD "test.kpssh.dev/hold"

static struct {
    struct kp_lab lab;
    char px[32]; /* name prefix of the test's cluster-scoped objects */
    struct kp_client *c;
    struct kp_registry *reg;
    struct kp_provider prov;
    struct kp_core_env env;
    struct kp_termination_controller *tc;
    /* The scripted provider: Get always finds the machine; Delete answers 0 (releasing) on its
     * first call, NOT_FOUND after. */
    atomic_uint gets, deletes, deletes_without_finalizer;
    char node2[64];
} T;

/* --- the scripted provider ----------------------------------------------------------------- */

static const char *sp_name(void *self)
{
    (void)self;
    return "scripted";
}

static size_t sp_classes(void *self, const struct kp_node_class_kind **ret)
{
    static const struct kp_node_class_kind k[] = {{"test.kpssh.dev", "FakeNodeClass"}};

    (void)self;
    *ret = k;
    return 1;
}

static int sp_get(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                  const char *provider_id, struct kp_provider_instance *ret,
                  struct kp_provider_err *err)
{
    (void)self;
    (void)ctx;
    (void)c;
    (void)provider_id;
    (void)err;
    atomic_fetch_add(&T.gets, 1);
    memset(ret, 0, sizeof(*ret));
    return 0;
}

/* Whether Node name, read from the API, still has karpenter.sh/termination (the only field
 * where that string can appear). Worker thread: no cmocka assertions here. */
static bool node_has_finalizer(struct kp_client *c, const char *name)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    json_t *obj = NULL;
    bool has;

    if (kp_client_get(c, &KP_RES_NODE, NULL, name, &obj, NULL) < 0)
        return false;
    has = kp_json_dump(obj, 0, &b) == 0 && strstr(kp_buf_str(&b), "\"karpenter.sh/termination\"");
    kp_buf_done(&b);
    kp_json_unref(obj);
    return has;
}

static int sp_delete(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, struct kp_provider_err *err)
{
    unsigned n = atomic_fetch_add(&T.deletes, 1);

    (void)self;
    (void)ctx;
    (void)nc;
    /* The order under test: while the machine is being released the Node must still be there,
     * held by the termination finalizer. c is the calling worker's own client. */
    if (!node_has_finalizer(c, T.node2))
        atomic_fetch_add(&T.deletes_without_finalizer, 1);
    if (n == 0)
        return 0; /* releasing: the SSH provider's leave ran */
    return kp_provider_err_set(err, -ENOENT, KP_PROVIDER_ERR_NOT_FOUND, NULL, "released");
}

static const struct kp_provider_ops sp_ops = {
    .name = sp_name, .supported_node_classes = sp_classes, .get = sp_get, .delete = sp_delete};

/* --- helpers ------------------------------------------------------------------------------- */

static void make(const struct kp_resource *res, json_t *obj)
{
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_check(kp_client_create(T.c, res, NULL, obj, NULL, &e), &e, res->kind);
    kp_error_done(&e);
    kp_json_unref(obj);
}

static void patch(const struct kp_resource *res, const char *name, const char *sub,
                  const char *body)
{
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_check(kp_client_patch_bytes(T.c, res, NULL, name, sub, KP_PATCH_MERGE, body,
                                       strlen(body), NULL, &e),
                 &e, name);
    kp_error_done(&e);
}

static void delete (const struct kp_resource *res, const char *name)
{
    struct kp_error e = KP_ERROR_INIT;
    int r = kp_client_delete(T.c, res, NULL, name, NULL, &e);

    kp_lab_check(r == -ENOENT ? 0 : r, &e, name);
    kp_error_done(&e);
}

/* The object as compact JSON text (a new string), or NULL when it is gone. */
static char *read_text(const struct kp_resource *res, const char *name)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    json_t *obj = NULL;
    char *s;

    if (kp_client_get(T.c, res, NULL, name, &obj, NULL) < 0)
        return NULL;
    assert_int_equal(kp_json_dump(obj, 0, &b), 0);
    kp_json_unref(obj);
    s = kp_strdup(kp_buf_str(&b));
    kp_buf_done(&b);
    assert_non_null(s);
    return s;
}

/* Waits until name's JSON text holds every needle; returns the text (caller frees). */
static char *wait_text(const struct kp_resource *res, const char *name, const char *const *needles)
{
    for (int i = 0; i < WAIT_SECONDS * 10; i++) {
        char *s = read_text(res, name);
        bool all = s != NULL;

        for (size_t k = 0; all && needles[k]; k++)
            all = strstr(s, needles[k]) != NULL;
        if (all)
            return s;
        kp_free(s);
        kp_sleep_usec(100000);
    }
    fail_msg("%s %s never showed %s", res->kind, name, needles[0]);
    return NULL;
}

/* The status of NodeClaim name's condition type as the API holds it ("" when absent). */
static const char *cond_status(const char *name, const char *type)
{
    static char out[16];
    struct kp_error e = KP_ERROR_INIT;
    json_t *obj = NULL, *conds = NULL;

    out[0] = '\0';
    kp_lab_check(kp_client_get(T.c, &KP_RES_NODECLAIM, NULL, name, &obj, &e), &e, name);
    kp_error_done(&e);
    if (kp_json_path_array(obj, "status.conditions", &conds) == 0)
        for (size_t i = 0; i < kp_json_array_size(conds); i++) {
            const char *t = NULL, *st = NULL;
            json_t *c = kp_json_array_at(conds, i);

            if (kp_json_get_str(c, "type", &t) == 0 && strcmp(t, type) == 0 &&
                kp_json_get_str(c, "status", &st) == 0)
                (void)snprintf(out, sizeof(out), "%s", st);
        }
    kp_json_unref(obj);
    return out;
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

static json_t *node_obj(const char *name)
{
    return kp_lab_json(
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\","
        "\"finalizers\":[\"karpenter.sh/termination\",\"" HOLD "\"],"
        "\"labels\":{\"karpenter.sh/nodepool\":\"default\",\"test.kpssh.dev/fakenodeclass\":\"c\"}},"
        "\"spec\":{\"providerID\":\"fake://%s\"}}",
        name, name);
}

/* --- tests --------------------------------------------------------------------------------- */

static void test_label_only(void **state)
{
    char name[64], *s;

    (void)state;
    (void)snprintf(name, sizeof(name), "%s-n1", T.px);
    make(&KP_RES_NODE, node_obj(name));
    delete (&KP_RES_NODE, name);
    /* Our finalizer gone means every step before it ran: the taint and label are there. */
    s = wait_text(&KP_RES_NODE, name, NEEDLES("\"finalizers\":[\"" HOLD "\"]"));
    assert_non_null(strstr(s, "\"key\":\"karpenter.sh/disrupted\""));
    assert_non_null(strstr(s, "\"effect\":\"NoSchedule\""));
    assert_non_null(
        strstr(s, "\"node.kubernetes.io/exclude-from-external-load-balancers\":\"karpenter\""));
    assert_true(atomic_load(&T.gets) >= 1);       /* not Ready: the provider was asked */
    assert_int_equal(atomic_load(&T.deletes), 0); /* no NodeClaim: nothing to release */
    kp_free(s);
    patch(&KP_RES_NODE, name, NULL, "{\"metadata\":{\"finalizers\":null}}");
}

static void test_with_claim(void **state)
{
    char claim[64], body[512], *s;

    (void)state;
    (void)snprintf(T.node2, sizeof(T.node2), "%s-n2", T.px);
    (void)snprintf(claim, sizeof(claim), "%s-nc", T.px);
    make(
        &KP_RES_NODECLAIM,
        kp_lab_json(
            "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\","
            "\"metadata\":{\"name\":\"%s\",\"finalizers\":[\"" HOLD "\"],"
            "\"labels\":{\"karpenter.sh/nodepool\":\"default\",\"test.kpssh.dev/fakenodeclass\":\"c\"}},"
            "\"spec\":{\"nodeClassRef\":{\"group\":\"test.kpssh.dev\",\"kind\":"
            "\"FakeNodeClass\",\"name\":\"c\"},\"requirements\":[]}}",
            claim));
    (void)snprintf(body, sizeof(body),
                   "{\"status\":{\"providerID\":\"fake://%s\",\"nodeName\":\"%s\"}}", T.node2,
                   T.node2);
    patch(&KP_RES_NODECLAIM, claim, "status", body);
    make(&KP_RES_NODE, node_obj(T.node2));
    delete (&KP_RES_NODE, T.node2);

    /* The cascade: the NodeClaim is being deleted (the test's finalizer holds it). */
    s = wait_text(&KP_RES_NODECLAIM, claim, NEEDLES("\"deletionTimestamp\""));
    kp_free(s);
    s = wait_text(&KP_RES_NODE, T.node2, NEEDLES("\"finalizers\":[\"" HOLD "\"]"));
    kp_free(s);
    assert_true(atomic_load(&T.deletes) >= 2); /* 0 (releasing), then NOT_FOUND */
    assert_int_equal(atomic_load(&T.deletes_without_finalizer), 0);
    assert_string_equal(cond_status(claim, "Drained"), "True");
    assert_string_equal(cond_status(claim, "VolumesDetached"), "True");
    assert_string_equal(cond_status(claim, "InstanceTerminating"), "True");
    patch(&KP_RES_NODE, T.node2, NULL, "{\"metadata\":{\"finalizers\":null}}");
    patch(&KP_RES_NODECLAIM, claim, NULL, "{\"metadata\":{\"finalizers\":null}}");
}

static int setup(void **state)
{
    const char *kind = NULL;

    (void)state;
    kp_lab_load(&T.lab);
    (void)snprintf(T.px, sizeof(T.px), "term%d", (int)getpid());
    T.c = kp_lab_admin_client(&T.lab);
    kp_lab_apply_crds(&T.lab);
    assert_int_equal(kp_registry_new(T.c, &T.reg), 0);
    T.prov.ops = &sp_ops;
    T.env.client = T.c;
    T.env.informers = T.reg;
    T.env.provider = &T.prov;
    T.env.workers = 2;
    /* Short polls so the test does not wait on Karpenter's 1 s / 5 s / 5 s. */
    T.env.timing.drain_retry_usec = 200000;
    T.env.timing.min_drain_usec = 1000000;
    T.env.timing.delete_retry_usec = 200000;
    assert_int_equal(kp_termination_controller_new(&T.env, &T.tc), 0);
    assert_int_equal(kp_registry_start(T.reg, 60 * KP_USEC_PER_SEC, NULL, &kind), 0);
    assert_int_equal(kp_termination_controller_start(T.tc), 0);
    for (int i = 0; i < 100 && !kp_termination_controller_ready(T.tc); i++)
        kp_sleep_usec(100000);
    assert_true(kp_termination_controller_ready(T.tc));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kp_termination_controller_stop(T.tc);
    kp_registry_stop(T.reg); /* the controller's handlers point into it: stop, then free */
    T.tc = kp_termination_controller_free(T.tc);
    T.reg = kp_registry_free(T.reg);
    T.c = kp_client_free(T.c);
    kp_lab_done(&T.lab);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_only),
        cmocka_unit_test(test_with_claim),
    };

    (void)argc;
    (void)argv;
    return cmocka_run_group_tests_name("termination", tests, setup, teardown);
}
