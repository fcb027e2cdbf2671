/* Tests for the startup taint gate's decisions (provider/ssh/taintgate.h) without a server:
 * which keys mature (podsReady counting, nodeCondition matching, keys not in the NodeClaim's
 * startupTaints or not on the Node left alone, invalid gates never opening), the NodeClaim
 * owner lookup, and the exact Node patch (other taints kept whole, every effect of a removed key
 * dropped). The API side is tests/integration/test-taintgate.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kp-ssh-fx.h"
#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "json/json.h"
#include "api/informers.h"
#include "base/log.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "provider/ssh/indexes.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "provider/ssh/taintgate.h"

typedef int (*decode_fn)(const char *, size_t, struct kp_entry **);

static struct kp_entry *decode(decode_fn fn, const char *json)
{
    struct kp_entry *e = NULL;
    int r = fn(json, strlen(json), &e);

    if (r < 0)
        fail_msg("decode failed (%d): %s", r, json);
    return e;
}

/* Node n1 owned by NodeClaim c1, tainted with the three gate keys plus one more. */
static const char node_json[] =
    "{\"metadata\":{\"name\":\"n1\",\"uid\":\"nu\",\"resourceVersion\":\"5\","
    "\"creationTimestamp\":\"2026-11-30T12:00:00Z\",\"ownerReferences\":[{\"apiVersion\":"
    "\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"name\":\"c1\",\"uid\":\"cu\"}]},"
    "\"spec\":{\"taints\":[{\"key\":\"example.com/cni\",\"effect\":\"NoExecute\"},"
    "{\"key\":\"example.com/storage\",\"effect\":\"NoSchedule\"},"
    "{\"key\":\"example.com/gpu\",\"effect\":\"NoSchedule\"},"
    "{\"key\":\"example.com/not-startup\",\"effect\":\"NoSchedule\"}]},"
    "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
    "{\"type\":\"StorageReady\",\"status\":\"False\"}]}}";

static const char claim_json[] =
    "{\"metadata\":{\"name\":\"c1\",\"uid\":\"cu\",\"resourceVersion\":\"3\"},"
    "\"spec\":{\"nodeClassRef\":{\"group\":\"karpenter.kpssh.dev\",\"kind\":\"SSHNodeClass\","
    "\"name\":\"edge\"},\"requirements\":[],"
    "\"startupTaints\":[{\"key\":\"example.com/cni\",\"effect\":\"NoExecute\"},"
    "{\"key\":\"example.com/storage\",\"effect\":\"NoSchedule\"},"
    "{\"key\":\"example.com/absent\",\"effect\":\"NoSchedule\"}]},"
    "\"status\":{\"nodeName\":\"n1\"}}";

/* Gates: 0 cni podsReady (2 pods app=cni in kube-system), 1 storage nodeCondition
 * StorageReady=True, 2 gpu nodeCondition Ready (open, but not in startupTaints), 3 absent (not on
 * the Node), 4 not-startup nodeCondition Ready (open, on the Node, not in startupTaints). */
static const char class_json[] =
    "{\"metadata\":{\"name\":\"edge\",\"uid\":\"eu\",\"resourceVersion\":\"9\",\"generation\":1},"
    "\"spec\":{\"joinProfileRef\":{\"name\":\"p\"},\"startupTaintGates\":["
    "{\"taintKey\":\"example.com/cni\",\"removeWhen\":{\"podsReady\":{\"namespace\":"
    "\"kube-system\",\"selector\":{\"matchLabels\":{\"app\":\"cni\"}},\"minReady\":2}}},"
    "{\"taintKey\":\"example.com/storage\",\"removeWhen\":{\"nodeCondition\":{\"type\":"
    "\"StorageReady\"}}},"
    "{\"taintKey\":\"example.com/gpu\",\"removeWhen\":{\"nodeCondition\":{\"type\":\"Ready\"}}},"
    "{\"taintKey\":\"example.com/absent\",\"removeWhen\":{\"nodeCondition\":{\"type\":"
    "\"Ready\"}}},"
    "{\"taintKey\":\"example.com/not-startup\",\"removeWhen\":{\"nodeCondition\":{\"type\":"
    "\"Ready\"}}}]}}";

static struct kp_entry *pod(const char *name, const char *ns, const char *app, const char *node,
                            bool ready, bool deleting)
{
    char buf[1024];
    int n = snprintf(buf, sizeof(buf),
                     "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"u-%s\","
                     "\"resourceVersion\":\"1\",\"labels\":{\"app\":\"%s\"}%s},"
                     "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"c\"}]},"
                     "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\","
                     "\"status\":\"%s\"}]}}",
                     name, ns, name, app,
                     deleting ? ",\"deletionTimestamp\":\"2026-11-30T12:01:00Z\"" : "", node,
                     ready ? "True" : "False");

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    return decode(kp_pod_decode, buf);
}

static void test_owner(void **state)
{
    struct kp_entry *n = decode(kp_node_decode, node_json);
    struct kp_entry *bare = decode(kp_node_decode, "{\"metadata\":{\"name\":\"x\",\"uid\":\"u\","
                                                   "\"ownerReferences\":[{\"apiVersion\":"
                                                   "\"karpenter.sh/v1beta1\",\"kind\":"
                                                   "\"NodeClaim\",\"name\":\"old\",\"uid\":\"o\"}]}"
                                                   "}");

    (void)state;
    assert_string_equal(kp_taintgate_owner_claim(kp_node_view(n)), "c1");
    assert_null(kp_taintgate_owner_claim(kp_node_view(bare)));
    kp_entry_unref(bare);
    kp_entry_unref(n);
}

static void test_evaluate(void **state)
{
    struct kp_entry *n = decode(kp_node_decode, node_json);
    struct kp_entry *c = decode(kp_nodeclaim_decode, claim_json);
    struct kp_entry *k = decode(kp_sshnodeclass_decode, class_json);
    struct kp_entry *p[6];
    const struct kp_pod_view *pv[6];
    struct kp_taintgate_verdict v;

    (void)state;
    p[0] = pod("cni-a", "kube-system", "cni", "n1", true, false);
    p[1] = pod("cni-b", "kube-system", "cni", "n1", false, false); /* not Ready */
    p[2] = pod("cni-c", "default", "cni", "n1", true, false);      /* other namespace */
    p[3] = pod("cni-d", "kube-system", "cni", "n2", true, false);  /* other node */
    p[4] = pod("cni-e", "kube-system", "cni", "n1", true, true);   /* deleting */
    p[5] = pod("other", "kube-system", "dns", "n1", true, false);  /* selector misses */
    for (size_t i = 0; i < 6; i++)
        pv[i] = kp_pod_view(p[i]);

    /* Only cni and storage are startup taints on the Node: gpu and not-startup are not in the
     * NodeClaim's startupTaints (even though their gates are open), absent is not on the Node.
     * cni has 1 countable Ready pod of 2; StorageReady is False. */
    kp_taintgate_evaluate(kp_node_view(n), kp_nodeclaim_view(c), kp_sshnodeclass_view(k), pv, 6,
                          &v);
    assert_int_equal(v.open, 0);
    assert_int_equal(v.pending, 0x3);

    /* A second Ready pod opens cni. */
    kp_entry_unref(p[1]);
    p[1] = pod("cni-b", "kube-system", "cni", "n1", true, false);
    pv[1] = kp_pod_view(p[1]);
    kp_taintgate_evaluate(kp_node_view(n), kp_nodeclaim_view(c), kp_sshnodeclass_view(k), pv, 6,
                          &v);
    assert_int_equal(v.open, 0x1);
    assert_int_equal(v.pending, 0x2);

    /* No pods at all: cni closed again. */
    kp_taintgate_evaluate(kp_node_view(n), kp_nodeclaim_view(c), kp_sshnodeclass_view(k), NULL, 0,
                          &v);
    assert_int_equal(v.open, 0);
    assert_int_equal(v.pending, 0x3);

    /* The node condition appears: storage opens. */
    {
        char buf[sizeof(node_json)];
        struct kp_entry *n2;
        char *at;

        memcpy(buf, node_json, sizeof(buf));
        at = strstr(buf, "\"StorageReady\",\"status\":\"False\"");
        assert_non_null(at);
        memcpy(strstr(at, "False"), "True\" ", 6);
        n2 = decode(kp_node_decode, buf);
        kp_taintgate_evaluate(kp_node_view(n2), kp_nodeclaim_view(c), kp_sshnodeclass_view(k), pv,
                              6, &v);
        assert_int_equal(v.open, 0x3);
        assert_int_equal(v.pending, 0);
        kp_entry_unref(n2);
    }
    for (size_t i = 0; i < 6; i++)
        kp_entry_unref(p[i]);
    kp_entry_unref(k);
    kp_entry_unref(c);
    kp_entry_unref(n);
}

static void test_condition_status(void **state)
{
    struct kp_entry *n = decode(kp_node_decode, node_json);
    struct kp_taint_gate g = {.taint_key = "k",
                              .kind = KP_GATE_NODE_CONDITION,
                              .condition_type = "StorageReady",
                              .condition_status = "False"};

    (void)state;
    assert_true(kp_taintgate_open(&g, kp_node_view(n), NULL, 0));
    g.condition_status = "Unknown";
    assert_false(kp_taintgate_open(&g, kp_node_view(n), NULL, 0));
    g.condition_type = "Missing";
    g.condition_status = "Unknown";
    assert_false(kp_taintgate_open(&g, kp_node_view(n), NULL, 0)); /* missing: closed */
    g.kind = KP_GATE_BOTH;
    g.condition_type = "Ready";
    g.condition_status = "True";
    assert_false(kp_taintgate_open(&g, kp_node_view(n), NULL, 0));
    g.kind = KP_GATE_PODS_READY; /* without a selector: never */
    assert_false(kp_taintgate_open(&g, kp_node_view(n), NULL, 0));
    kp_entry_unref(n);
}

static void test_patch(void **state)
{
    json_t *t = NULL;
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    static const char taints[] =
        "[{\"key\":\"a\",\"effect\":\"NoSchedule\"},"
        "{\"key\":\"node.kubernetes.io/unreachable\",\"effect\":\"NoExecute\","
        "\"timeAdded\":\"2026-11-30T12:00:00Z\"},"
        "{\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoExecute\"},{\"key\":\"b\",\"effect\":"
        "\"NoSchedule\"}]";
    const char *const keys[] = {"a", "zzz"};
    size_t removed = 99;

    (void)state;
    assert_int_equal(kp_json_parse(taints, strlen(taints), 1 << 16, 0, &t, NULL), 0);
    assert_int_equal(kp_taintgate_patch(t, "77", keys, 2, &b, &removed), 0);
    assert_int_equal(removed, 2);
    assert_string_equal(kp_buf_str(&b),
                        "{\"metadata\":{\"resourceVersion\":\"77\"},\"spec\":{\"taints\":["
                        "{\"key\":\"node.kubernetes.io/unreachable\",\"effect\":\"NoExecute\","
                        "\"timeAdded\":\"2026-11-30T12:00:00Z\"},"
                        "{\"key\":\"b\",\"effect\":\"NoSchedule\"}]}}");
    kp_buf_reset(&b);
    assert_int_equal(kp_taintgate_patch(t, "77", keys + 1, 1, &b, &removed), 0);
    assert_int_equal(removed, 0);
    kp_buf_reset(&b);
    assert_int_equal(kp_taintgate_patch(t, "", keys, 1, &b, &removed), -EINVAL);
    kp_buf_done(&b);
    kp_json_unref(t);
}

static int torture_patch(void)
{
    static const char taints[] = "[{\"key\":\"a\",\"effect\":\"NoSchedule\"},{\"key\":\"b\","
                                 "\"effect\":\"NoSchedule\",\"value\":\"v\"}]";
    const char *const keys[] = {"a"};
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    json_t *t = NULL;
    size_t removed = 0;
    int r;

    if ((r = kp_json_parse(taints, strlen(taints), 1 << 16, 0, &t, NULL)) < 0)
        goto out;
    r = kp_taintgate_patch(t, "1", keys, 1, &b, &removed);
out:
    kp_buf_done(&b);
    kp_json_unref(t);
    return r;
}

/* --- set-up and tear-down (the controller skeleton, k8s/controller.h) --------------------- */

/* A registration that fails half-way (the NodeClass informer, the last one, has started) leaves
 * no handler in any informer; a controller that was made takes its handlers back when freed. */
static void test_setup_rollback(void **state)
{
    struct kp_ssh_fx f;
    struct kp_ssh_taintgate *tg = NULL;
    struct kp_ssh_taintgate_opts o = {0};

    (void)state;
    kp_ssh_fx_init(&f);
    o = (struct kp_ssh_taintgate_opts){.client = f.c,
                                       .nodes = f.nodes,
                                       .pods = f.pods,
                                       .nodeclaims = f.claims,
                                       .nodeclasses = f.classes};
    assert_int_equal(kp_informer_start(f.classes), 0);
    assert_int_equal(kp_ssh_taintgate_new(&o, &tg), -EBUSY);
    assert_null(tg);
    kp_informer_stop(f.classes);
    assert_int_equal(kp_ssh_fx_handlers(&f), 0);
    assert_int_equal(kp_ssh_taintgate_new(&o, &tg), 0);
    assert_int_equal(kp_ssh_fx_handlers(&f), 4);
    assert_false(kp_ssh_taintgate_ready(tg)); /* not started */
    tg = kp_ssh_taintgate_free(tg);
    assert_int_equal(kp_ssh_fx_handlers(&f), 0);
    kp_ssh_fx_done(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_rollback), cmocka_unit_test(test_owner),
        cmocka_unit_test(test_evaluate),       cmocka_unit_test(test_condition_status),
        cmocka_unit_test(test_patch),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_patch),
    };

    return kp_test_main("taintgate", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture),
                        argc, argv);
}
