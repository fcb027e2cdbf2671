/* Tests for the attached-time tally (provider/ssh/attached.h): which Nodes are kpssh's (also an
 * adopting join's), a Node's class, seconds and vCPU-seconds over a span, the class table (one
 * row kept for "other"), and the integration over time: nothing before leading or while standing
 * by, scrape to scrape for live Nodes, the rest of a deleted Node's life, a failed walk. The counters on
 * /metrics are checked against Node lifetimes on the lab by tests/e2e/t002-cycle.sh. */
#include <stdio.h>
#include <string.h>

#include "kp-test.h"

#include <errno.h>

#include "api/obj-node.h"
#include "base/alloc.h"
#include "core/core.h"
#include "k8s/store.h"
#include "provider/ssh/attached.h"

/* 2026-11-30T12:00:00Z */
#define CREATED_USEC 1796040000000000LL

static struct kp_entry *node(const char *provider_id, const char *class_label, const char *cpu,
                             bool nodeclass_label)
{
    char json[1024], labels[256] = "", spec[256] = "", cap[128] = "";
    struct kp_entry *e = NULL;
    int r;

    if (class_label)
        (void)snprintf(labels, sizeof(labels),
                       ",\"labels\":{\"node.kubernetes.io/instance-type\":\"%s\"%s}", class_label,
                       nodeclass_label ? ",\"karpenter.kpssh.dev/sshnodeclass\":\"pool\"" : "");
    if (provider_id)
        (void)snprintf(spec, sizeof(spec), "\"spec\":{\"providerID\":\"%s\"},", provider_id);
    if (cpu)
        (void)snprintf(cap, sizeof(cap), "\"status\":{\"capacity\":{\"cpu\":\"%s\"}},", cpu);
    (void)snprintf(json, sizeof(json),
                   "{%s%s\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\",\"resourceVersion\":\"1\","
                   "\"creationTimestamp\":\"2026-11-30T12:00:00Z\"%s}}",
                   spec, cap, labels);
    r = kp_node_decode(json, strlen(json), &e);
    if (r < 0)
        fail_msg("decode failed (%d): %s", r, json);
    return e;
}

static void test_membership(void **state)
{
    struct kp_entry *ours = node("kpssh://pool/h1", "large", "4", false);
    struct kp_entry *bare = node("kpssh://pool/h2", NULL, NULL, false);
    struct kp_entry *adopted = node("eks-hybrid:///us-west-2/c1/mi-0abc", "small", "2", true);
    struct kp_entry *aws = node("aws:///us-east-1a/i-0abc", "m5.large", "2", false);
    struct kp_entry *none = node(NULL, "large", "4", false);
    const char *cls = NULL;
    double secs = -1, vsecs = -1;

    (void)state;
    assert_true(kp_ssh_node_membership(kp_node_view(ours), 0, CREATED_USEC + 90 * 1000000LL, &cls,
                                       &secs, &vsecs));
    assert_string_equal(cls, "large");
    assert_true(secs > 89.999 && secs < 90.001);
    assert_true(vsecs > 359.999 && vsecs < 360.001);
    /* From a later since: only the time after it. */
    assert_true(kp_ssh_node_membership(kp_node_view(ours), CREATED_USEC + 60 * 1000000LL,
                                       CREATED_USEC + 90 * 1000000LL, &cls, &secs, &vsecs));
    assert_true(secs > 29.999 && secs < 30.001);
    /* No class label: "default"; no capacity: no vCPU-seconds. */
    assert_true(kp_ssh_node_membership(kp_node_view(bare), 0, CREATED_USEC + 1500000LL, &cls, &secs,
                                       &vsecs));
    assert_string_equal(cls, "default");
    assert_true(secs > 1.499 && secs < 1.501);
    assert_true(vsecs == 0);
    /* An adopting join's Node: someone else's providerID, kpssh's NodeClass label. */
    assert_true(kp_ssh_node_membership(kp_node_view(adopted), 0, CREATED_USEC + 10 * 1000000LL,
                                       &cls, &secs, &vsecs));
    assert_string_equal(cls, "small");
    assert_true(vsecs > 19.999 && vsecs < 20.001);
    /* A clock before the creation counts nothing rather than going negative. */
    assert_true(kp_ssh_node_membership(kp_node_view(ours), 0, CREATED_USEC - 5000000LL, &cls, &secs,
                                       &vsecs));
    assert_true(secs == 0 && vsecs == 0);
    /* Somebody else's Node, or one without a providerID yet: not counted, outputs untouched. */
    secs = vsecs = -1;
    assert_false(kp_ssh_node_membership(kp_node_view(aws), 0, CREATED_USEC + 1000000LL, &cls, &secs,
                                        &vsecs));
    assert_false(kp_ssh_node_membership(kp_node_view(none), 0, CREATED_USEC + 1000000LL, &cls,
                                        &secs, &vsecs));
    assert_true(secs == -1 && vsecs == -1);
    kp_entry_unref(ours);
    kp_entry_unref(bare);
    kp_entry_unref(adopted);
    kp_entry_unref(aws);
    kp_entry_unref(none);
}

static void test_nodeclass_label(void **state)
{
    char buf[128];

    (void)state;
    /* attached.c spells the label out; it must be the one core stamps at launch. */
    assert_true(kp_core_nodeclass_label("karpenter.kpssh.dev", "SSHNodeClass", buf, sizeof(buf)));
    assert_string_equal(buf, "karpenter.kpssh.dev/sshnodeclass");
}

static void test_add(void **state)
{
    struct kp_ssh_attached_row rows[3];
    size_t n = 0;

    (void)state;
    kp_ssh_attached_add(rows, &n, 3, "small", 10, 20);
    kp_ssh_attached_add(rows, &n, 3, "large", 1, 4);
    kp_ssh_attached_add(rows, &n, 3, "small", 5, 10);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].class_name, "small");
    assert_true(rows[0].seconds == 15 && rows[0].vcpu_seconds == 30);
    assert_string_equal(rows[1].class_name, "large");
    /* One row is kept for "other": new classes share it from now on. */
    kp_ssh_attached_add(rows, &n, 3, "gpu", 2, 16);
    kp_ssh_attached_add(rows, &n, 3, "arm", 3, 12);
    assert_int_equal(n, 3);
    assert_string_equal(rows[2].class_name, "other");
    assert_true(rows[2].seconds == 5 && rows[2].vcpu_seconds == 28);
    /* A class really named "other" joins that row; known classes keep theirs. */
    kp_ssh_attached_add(rows, &n, 3, "other", 1, 1);
    kp_ssh_attached_add(rows, &n, 3, "large", 1, 4);
    assert_int_equal(n, 3);
    assert_true(rows[2].seconds == 6 && rows[2].vcpu_seconds == 29);
    assert_true(rows[1].seconds == 2 && rows[1].vcpu_seconds == 8);
    /* "other" first: a row of its own, and later classes still get theirs while there is room. */
    n = 0;
    kp_ssh_attached_add(rows, &n, 3, "other", 1, 1);
    kp_ssh_attached_add(rows, &n, 3, "a", 1, 1);
    kp_ssh_attached_add(rows, &n, 3, "b", 1, 1);
    kp_ssh_attached_add(rows, &n, 3, "c", 1, 1);
    assert_int_equal(n, 3);
    assert_string_equal(rows[1].class_name, "a");
    assert_string_equal(rows[2].class_name, "b");
    assert_true(rows[0].seconds == 2);
    /* A zero-capacity table takes nothing. */
    n = 0;
    kp_ssh_attached_add(rows, &n, 0, "small", 1, 1);
    assert_int_equal(n, 0);
}

/* The live Nodes a test hands to kp_ssh_attached_account. */
struct fake_nodes {
    struct kp_entry *v[4];
    size_t n;
    int fail; /* returned instead of walking when non-zero */
};

static int walk_fake(void *ctx, kp_ssh_attached_visit_fn visit, void *vctx)
{
    struct fake_nodes *f = ctx;

    if (f->fail)
        return f->fail;
    for (size_t i = 0; i < f->n; i++)
        visit(vctx, kp_node_view(f->v[i]));
    return 0;
}

#define AT(s) (CREATED_USEC + (int64_t)(s)*1000000LL)

static void test_tally(void **state)
{
    struct kp_ssh_attached *a = NULL;
    struct kp_entry *ours = node("kpssh://pool/h1", "large", "4", false);
    struct kp_entry *aws = node("aws:///us-east-1a/i-0abc", "m5.large", "2", false);
    struct fake_nodes live = {.v = {ours, aws}, .n = 2};
    struct kp_ssh_attached_row rows[4];

    (void)state;
    assert_int_equal(kp_ssh_attached_new(&a), 0);
    /* Not leading yet: nothing counts. */
    assert_int_equal(kp_ssh_attached_account(a, AT(10), walk_fake, &live, rows, 4), 0);
    kp_ssh_attached_node_gone(a, kp_node_view(ours), AT(10));
    assert_int_equal(kp_ssh_attached_account(a, AT(10), walk_fake, &live, rows, 4), 0);
    /* Leading from t=20: a scrape at 50 counts 30 s of the live kpssh Node, none of AWS's. */
    kp_ssh_attached_resume(a, AT(20));
    assert_int_equal(kp_ssh_attached_account(a, AT(50), walk_fake, &live, rows, 4), 1);
    assert_string_equal(rows[0].class_name, "large");
    assert_true(rows[0].seconds > 29.999 && rows[0].seconds < 30.001);
    assert_true(rows[0].vcpu_seconds > 119.999 && rows[0].vcpu_seconds < 120.001);
    /* A failed walk adds nothing and keeps the last accounting: the next one adds it all. */
    live.fail = -ENOMEM;
    assert_int_equal(kp_ssh_attached_account(a, AT(60), walk_fake, &live, rows, 4), 1);
    assert_true(rows[0].seconds > 29.999 && rows[0].seconds < 30.001);
    live.fail = 0;
    /* The Node goes at 70: the 20 s since the last accounting (50). */
    live.n = 0;
    kp_ssh_attached_node_gone(a, kp_node_view(ours), AT(70));
    assert_int_equal(kp_ssh_attached_account(a, AT(80), walk_fake, &live, rows, 4), 1);
    assert_true(rows[0].seconds > 49.999 && rows[0].seconds < 50.001);
    /* Standing by from 80 to 200 with the Node back: nothing; leading again from 200, a scrape
     * at 210 adds 10 s, not the standby. */
    live.v[0] = ours;
    live.n = 1;
    kp_ssh_attached_pause(a);
    kp_ssh_attached_node_gone(a, kp_node_view(ours), AT(150));
    assert_int_equal(kp_ssh_attached_account(a, AT(190), walk_fake, &live, rows, 4), 1);
    assert_true(rows[0].seconds > 49.999 && rows[0].seconds < 50.001);
    kp_ssh_attached_resume(a, AT(200));
    assert_int_equal(kp_ssh_attached_account(a, AT(210), walk_fake, &live, rows, 4), 1);
    assert_true(rows[0].seconds > 59.999 && rows[0].seconds < 60.001);
    /* A smaller copy gets the first rows only. */
    assert_int_equal(kp_ssh_attached_account(a, AT(210), walk_fake, &live, rows, 0), 0);
    a = kp_ssh_attached_free(a);
    assert_null(kp_ssh_attached_free(NULL));
    kp_entry_unref(ours);
    kp_entry_unref(aws);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_membership),
        cmocka_unit_test(test_nodeclass_label),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_tally),
    };

    return kp_test_main("attached", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
