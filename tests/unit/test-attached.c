/* Tests for the attached-time tally (provider/ssh/attached.h): which Nodes are kpssh's, a Node's
 * class, seconds and vCPU-seconds at a given clock, the class table (folding into "other" when
 * full), and the finished lifetimes the Node informer's delete handler adds. The counters on
 * /metrics are checked against Node lifetimes on the lab by tests/e2e/t002-cycle.sh. */
#include <stdio.h>
#include <string.h>

#include "kp-test.h"

#include "api/obj-node.h"
#include "base/alloc.h"
#include "k8s/store.h"
#include "provider/ssh/attached.h"

/* 2026-11-30T12:00:00Z */
#define CREATED_USEC 1796040000000000LL

static struct kp_entry *node(const char *provider_id, const char *class_label, const char *cpu)
{
    char json[1024], labels[256] = "", spec[256] = "", cap[128] = "";
    struct kp_entry *e = NULL;
    int r;

    if (class_label)
        (void)snprintf(labels, sizeof(labels),
                       ",\"labels\":{\"node.kubernetes.io/instance-type\":\"%s\"}", class_label);
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
    struct kp_entry *ours = node("kpssh://pool/h1", "large", "4");
    struct kp_entry *bare = node("kpssh://pool/h2", NULL, NULL);
    struct kp_entry *aws = node("aws:///us-east-1a/i-0abc", "m5.large", "2");
    struct kp_entry *none = node(NULL, "large", "4");
    const char *cls = NULL;
    double secs = -1, vsecs = -1;

    (void)state;
    assert_true(kp_ssh_node_membership(kp_node_view(ours), CREATED_USEC + 90 * 1000000LL, &cls,
                                       &secs, &vsecs));
    assert_string_equal(cls, "large");
    assert_true(secs > 89.999 && secs < 90.001);
    assert_true(vsecs > 359.999 && vsecs < 360.001);
    /* No class label: "default"; no capacity: no vCPU-seconds. */
    assert_true(kp_ssh_node_membership(kp_node_view(bare), CREATED_USEC + 1500000LL, &cls, &secs,
                                       &vsecs));
    assert_string_equal(cls, "default");
    assert_true(secs > 1.499 && secs < 1.501);
    assert_true(vsecs == 0);
    /* A clock before the creation counts nothing rather than going negative. */
    assert_true(kp_ssh_node_membership(kp_node_view(ours), CREATED_USEC - 5000000LL, &cls, &secs,
                                       &vsecs));
    assert_true(secs == 0 && vsecs == 0);
    /* Somebody else's Node, or one without a providerID yet: not counted, outputs untouched. */
    secs = vsecs = -1;
    assert_false(kp_ssh_node_membership(kp_node_view(aws), CREATED_USEC + 1000000LL, &cls, &secs,
                                        &vsecs));
    assert_false(kp_ssh_node_membership(kp_node_view(none), CREATED_USEC + 1000000LL, &cls, &secs,
                                        &vsecs));
    assert_true(secs == -1 && vsecs == -1);
    kp_entry_unref(ours);
    kp_entry_unref(bare);
    kp_entry_unref(aws);
    kp_entry_unref(none);
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
    /* The table is full but for its last row: new classes fold into "other" there. */
    kp_ssh_attached_add(rows, &n, 3, "gpu", 2, 16);
    kp_ssh_attached_add(rows, &n, 3, "arm", 3, 12);
    assert_int_equal(n, 3);
    assert_string_equal(rows[2].class_name, "other");
    assert_true(rows[2].seconds == 5 && rows[2].vcpu_seconds == 28);
    /* Known classes still add to their own rows. */
    kp_ssh_attached_add(rows, &n, 3, "large", 1, 4);
    assert_true(rows[1].seconds == 2 && rows[1].vcpu_seconds == 8);
    /* A zero-capacity table takes nothing. */
    n = 0;
    kp_ssh_attached_add(rows, &n, 0, "small", 1, 1);
    assert_int_equal(n, 0);
}

static void test_tally(void **state)
{
    struct kp_ssh_attached *a = NULL;
    struct kp_entry *ours = node("kpssh://pool/h1", "large", "4");
    struct kp_entry *aws = node("aws:///us-east-1a/i-0abc", "m5.large", "2");
    struct kp_ssh_attached_row rows[4];

    (void)state;
    assert_int_equal(kp_ssh_attached_new(&a), 0);
    assert_int_equal(kp_ssh_attached_finished(a, rows, 4), 0);
    kp_ssh_attached_node_gone(a, kp_node_view(ours), CREATED_USEC + 60 * 1000000LL);
    kp_ssh_attached_node_gone(a, kp_node_view(aws), CREATED_USEC + 60 * 1000000LL);
    kp_ssh_attached_node_gone(a, kp_node_view(ours), CREATED_USEC + 30 * 1000000LL);
    assert_int_equal(kp_ssh_attached_finished(a, rows, 4), 1);
    assert_string_equal(rows[0].class_name, "large");
    assert_true(rows[0].seconds > 89.999 && rows[0].seconds < 90.001);
    assert_true(rows[0].vcpu_seconds > 359.999 && rows[0].vcpu_seconds < 360.001);
    /* A smaller copy gets the first rows only. */
    assert_int_equal(kp_ssh_attached_finished(a, rows, 0), 0);
    a = kp_ssh_attached_free(a);
    assert_null(kp_ssh_attached_free(NULL));
    kp_entry_unref(ours);
    kp_entry_unref(aws);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_membership),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_tally),
    };

    return kp_test_main("attached", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
