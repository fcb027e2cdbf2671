/* Tests for the SSHNodeClass controller's decisions (provider/ssh/nodeclassctl.h) without a
 * server: the Ready condition for every reason in its order, when a status write is needed, the
 * exact status and finalizer patches (lastTransitionTime kept while the status holds), string
 * escaping, and allocation failures. The API side is tests/integration/test-nodeclassctl.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kp-ssh-fx.h"
#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "json/json.h"
#include "api/informers.h"
#include "base/log.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "k8s/store.h"
#include "api/obj-node.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/nodeclassctl.h"

#define NS "kpssh-system"

/* A class; extra_spec is appended inside spec, status (optional) is the status object. */
static int class_decode(const char *extra_spec, const char *status, struct kp_entry **ret)
{
    char buf[4096];
    int n = snprintf(buf, sizeof(buf),
                     "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHNodeClass\","
                     "\"metadata\":{\"name\":\"edge\",\"uid\":\"u-1\",\"resourceVersion\":\"41\","
                     "\"generation\":3,\"finalizers\":[\"other/keep\"]},"
                     "\"spec\":{\"joinProfileRef\":{\"name\":\"tls\"}%s%s}%s%s}",
                     extra_spec ? "," : "", extra_spec ? extra_spec : "",
                     status ? ",\"status\":" : "", status ? status : "");

    if (n < 0 || (size_t)n >= sizeof(buf))
        return -E2BIG;
    return kp_sshnodeclass_decode(buf, (size_t)n, ret);
}

static struct kp_entry *class_new(const char *extra_spec, const char *status)
{
    struct kp_entry *e = NULL;

    assert_int_equal(class_decode(extra_spec, status, &e), 0);
    return e;
}

static int profile_decode(const char *leave, struct kp_entry **ret)
{
    char buf[2048];
    int n = snprintf(buf, sizeof(buf),
                     "{\"metadata\":{\"name\":\"tls\",\"uid\":\"p-1\",\"resourceVersion\":\"7\"},"
                     "\"spec\":{\"version\":\"2\",\"scripts\":{\"install\":\"true\\n\","
                     "\"join\":\"echo $KPSSH_VAR_x\\n\",\"leave\":\"%s\"}}}",
                     leave);

    if (n < 0 || (size_t)n >= sizeof(buf))
        return -E2BIG;
    return kp_sshjoinprofile_decode(buf, (size_t)n, ret);
}

static struct kp_entry *profile_new(const char *leave)
{
    struct kp_entry *e = NULL;

    assert_int_equal(profile_decode(leave, &e), 0);
    return e;
}

static void expect_ready(const char *extra_spec, const char *leave, size_t n_hosts,
                         enum kp_cond_status st, const char *reason, const char *msg_part)
{
    struct kp_entry *c = class_new(extra_spec, NULL);
    struct kp_entry *p = leave ? profile_new(leave) : NULL;
    struct kp_nodeclass_ready want = {0};

    assert_int_equal(kp_nodeclass_ready_compute(kp_sshnodeclass_view(c),
                                                p ? kp_sshjoinprofile_view(p) : NULL, n_hosts, NS,
                                                &want),
                     0);
    if (want.status != st || strcmp(want.reason, reason) != 0 || !strstr(want.message, msg_part))
        fail_msg("got %d %s \"%s\", want %d %s with \"%s\"", want.status, want.reason, want.message,
                 st, reason, msg_part);
    kp_nodeclass_ready_done(&want);
    kp_entry_unref(p);
    kp_entry_unref(c);
}

static void test_ready_reasons(void **state)
{
    (void)state;
    expect_ready(NULL, "systemctl stop kubelet\\n", 2, KP_COND_TRUE, KP_NODECLASS_REASON_READY, "");
    expect_ready(NULL, NULL, 2, KP_COND_FALSE, KP_NODECLASS_REASON_PROFILE_NOT_FOUND,
                 "SSHJoinProfile \"tls\" not found");
    /* Leave runs without a node class, so it may not read vars or secrets. */
    expect_ready(NULL, "echo $KPSSH_VAR_x\\n", 2, KP_COND_FALSE,
                 KP_NODECLASS_REASON_PROFILE_INVALID, "KPSSH_VAR_");
    expect_ready(NULL, "echo ${KPSSH_SECRET_token}\\n", 2, KP_COND_FALSE,
                 KP_NODECLASS_REASON_PROFILE_INVALID, "KPSSH_SECRET_");
    expect_ready("\"hostSelector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Bogus\"}]}",
                 "true\\n", 2, KP_COND_FALSE, KP_NODECLASS_REASON_SELECTOR_ERROR,
                 "spec.hostSelector");
    /* The profile is checked before the selector, as in the reference. */
    expect_ready("\"hostSelector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Bogus\"}]}",
                 NULL, 2, KP_COND_FALSE, KP_NODECLASS_REASON_PROFILE_NOT_FOUND, "not found");
    expect_ready("\"hostSelector\":{\"matchLabels\":{\"a\":\"b\"}}", "true\\n", 0, KP_COND_FALSE,
                 KP_NODECLASS_REASON_NO_HOSTS, "no SSHHosts in namespace " NS);
    /* The class's own rules come first, with the validator's report. */
    expect_ready("\"providerIDSource\":\"Magic\"", NULL, 2, KP_COND_FALSE,
                 KP_NODECLASS_REASON_INVALID, "spec.providerIDSource");
    expect_ready("\"pricePerCPUHour\":\"cheap\",\"maxPods\":70000", "true\\n", 2, KP_COND_FALSE,
                 KP_NODECLASS_REASON_INVALID, "spec.maxPods");
}

static void test_differs(void **state)
{
    struct kp_entry *p = profile_new("true\\n");
    struct kp_nodeclass_ready want = {0};
    struct kp_entry *same, *old_gen, *none, *other_msg;

    (void)state;
    same = class_new(NULL, "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                           "\"reason\":\"Ready\",\"message\":\"\",\"observedGeneration\":3,"
                           "\"lastTransitionTime\":\"2026-01-02T03:04:05Z\"}]}");
    old_gen = class_new(NULL, "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                              "\"reason\":\"Ready\",\"message\":\"\",\"observedGeneration\":2,"
                              "\"lastTransitionTime\":\"2026-01-02T03:04:05Z\"}]}");
    other_msg = class_new(NULL, "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                                "\"reason\":\"Ready\",\"message\":\"x\",\"observedGeneration\":3,"
                                "\"lastTransitionTime\":\"2026-01-02T03:04:05Z\"}]}");
    none = class_new(NULL, NULL);
    assert_int_equal(kp_sshnodeclass_view(same)->ready_observed_generation, 3);
    assert_string_equal(kp_sshnodeclass_view(other_msg)->ready_message, "x");
    assert_null(kp_sshnodeclass_view(none)->ready_message);
    assert_int_equal(kp_sshnodeclass_view(none)->ready_observed_generation, -1);

    assert_int_equal(kp_nodeclass_ready_compute(kp_sshnodeclass_view(same),
                                                kp_sshjoinprofile_view(p), 1, NS, &want),
                     0);
    assert_false(kp_nodeclass_ready_differs(kp_sshnodeclass_view(same), &want));
    assert_true(kp_nodeclass_ready_differs(kp_sshnodeclass_view(old_gen), &want));
    assert_true(kp_nodeclass_ready_differs(kp_sshnodeclass_view(other_msg), &want));
    assert_true(kp_nodeclass_ready_differs(kp_sshnodeclass_view(none), &want));
    kp_nodeclass_ready_done(&want);

    assert_int_equal(kp_nodeclass_ready_compute(kp_sshnodeclass_view(same), NULL, 1, NS, &want), 0);
    assert_true(kp_nodeclass_ready_differs(kp_sshnodeclass_view(same), &want));
    kp_nodeclass_ready_done(&want);
    kp_entry_unref(same);
    kp_entry_unref(old_gen);
    kp_entry_unref(other_msg);
    kp_entry_unref(none);
    kp_entry_unref(p);
}

static void test_status_patch(void **state)
{
    struct kp_entry *c = class_new(NULL, "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                                         "\"reason\":\"Ready\",\"message\":\"\","
                                         "\"observedGeneration\":2,"
                                         "\"lastTransitionTime\":\"2026-01-02T03:04:05Z\"}]}");
    char empty[] = "", odd[] = "a \"b\"\n\\c\x01\xc3\xa9\xe9";
    struct kp_nodeclass_ready want = {.status = KP_COND_TRUE, .reason = "Ready", .message = empty};
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    /* 2026-11-30T12:00:00.5Z */
    const uint64_t now = 1796040000ULL * 1000000ULL + 500000ULL;

    (void)state;
    /* Same status: lastTransitionTime stays; observedGeneration follows the object. */
    assert_int_equal(kp_nodeclass_status_patch(kp_sshnodeclass_view(c), "41", &want, now, &b), 0);
    assert_string_equal(kp_buf_str(&b),
                        "{\"metadata\":{\"resourceVersion\":\"41\"},\"status\":{\"conditions\":[{"
                        "\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Ready\","
                        "\"message\":\"\",\"observedGeneration\":3,"
                        "\"lastTransitionTime\":\"2026-01-02T03:04:05Z\"}]}}");
    kp_buf_reset(&b);
    /* A new status: now, at second precision; the message is escaped, its UTF-8 kept and a stray
     * Latin-1 byte replaced by U+FFFD. */
    want.status = KP_COND_FALSE;
    want.reason = "NoHosts";
    want.message = odd;
    assert_int_equal(kp_nodeclass_status_patch(kp_sshnodeclass_view(c), "41", &want, now, &b), 0);
    assert_string_equal(
        kp_buf_str(&b),
        "{\"metadata\":{\"resourceVersion\":\"41\"},\"status\":{\"conditions\":[{"
        "\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"NoHosts\","
        "\"message\":\"a \\\"b\\\"\\n\\\\c\\u0001\xc3\xa9\xef\xbf\xbd\",\"observedGeneration\":3,"
        "\"lastTransitionTime\":\"2026-11-30T12:00:00Z\"}]}}");
    {
        json_t *doc = NULL;

        assert_int_equal(kp_json_parse(kp_buf_str(&b), b.len, b.max, 0, &doc, NULL), 0);
        kp_json_unref(doc);
    }
    kp_buf_reset(&b);
    assert_int_equal(kp_nodeclass_status_patch(kp_sshnodeclass_view(c), "", &want, now, &b),
                     -EINVAL);
    kp_buf_done(&b);
    kp_entry_unref(c);
}

static void test_finalizer_patch(void **state)
{
    struct kp_entry *c = class_new(NULL, NULL);
    struct kp_buf b = KP_BUF_INIT(4096);

    (void)state;
    assert_false(kp_nodeclass_has_finalizer(kp_sshnodeclass_view(c)));
    assert_int_equal(kp_nodeclass_finalizer_patch(kp_sshnodeclass_view(c), true, &b), 0);
    assert_string_equal(kp_buf_str(&b), "{\"metadata\":{\"resourceVersion\":\"41\",\"finalizers\":"
                                        "[\"other/keep\",\"karpenter.kpssh.dev/termination\"]}}");
    kp_buf_reset(&b);
    assert_int_equal(kp_nodeclass_finalizer_patch(kp_sshnodeclass_view(c), false, &b), 0);
    assert_string_equal(kp_buf_str(&b), "{\"metadata\":{\"resourceVersion\":\"41\",\"finalizers\":"
                                        "[\"other/keep\"]}}");
    kp_buf_done(&b);
    kp_entry_unref(c);
}

static void test_host_labels(void **state)
{
    const struct kp_label a[] = {{"x", "1"}, {"y", "2"}}, b[] = {{"y", "2"}, {"x", "1"}},
                          c[] = {{"x", "1"}, {"y", "3"}};
    struct kp_labels la = {a, 2}, lb = {b, 2}, lc = {c, 2}, l1 = {a, 1};

    (void)state;
    assert_false(kp_nodeclass_host_labels_changed(&la, &lb));
    assert_true(kp_nodeclass_host_labels_changed(&la, &lc));
    assert_true(kp_nodeclass_host_labels_changed(&la, &l1));
}

/* --- torture --------------------------------------------------------------------------------- */

static int torture_compute(void)
{
    static const char *const leaves[] = {"true\\n", "echo $KPSSH_VAR_x\\n"};
    struct kp_entry *c = NULL, *bad = NULL, *p = NULL;
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    int r;

    if ((r = class_decode(NULL, NULL, &c)) < 0 ||
        (r = class_decode("\"providerIDSource\":\"Magic\"", NULL, &bad)) < 0)
        goto out;
    for (size_t i = 0; i < 2; i++) {
        struct kp_nodeclass_ready want = {0};

        p = kp_entry_unref(p);
        if ((r = profile_decode(leaves[i], &p)) < 0)
            goto out;
        for (size_t hosts = 0; hosts < 2; hosts++) {
            r = kp_nodeclass_ready_compute(kp_sshnodeclass_view(c), kp_sshjoinprofile_view(p),
                                           hosts, NS, &want);
            if (r < 0)
                goto out;
            r = kp_nodeclass_status_patch(kp_sshnodeclass_view(c), "41", &want, 1, &b);
            kp_nodeclass_ready_done(&want);
            kp_buf_reset(&b);
            if (r < 0)
                goto out;
        }
        if ((r = kp_nodeclass_ready_compute(kp_sshnodeclass_view(bad), NULL, 1, NS, &want)) < 0)
            goto out;
        kp_nodeclass_ready_done(&want);
        if ((r = kp_nodeclass_ready_compute(kp_sshnodeclass_view(c), NULL, 1, NS, &want)) < 0)
            goto out;
        kp_nodeclass_ready_done(&want);
    }
    if ((r = kp_nodeclass_finalizer_patch(kp_sshnodeclass_view(c), true, &b)) < 0)
        goto out;
out:
    kp_buf_done(&b);
    kp_entry_unref(p);
    kp_entry_unref(bad);
    kp_entry_unref(c);
    return r;
}

/* --- set-up and tear-down (the controller skeleton, k8s/controller.h) --------------------- */

/* A registration that fails half-way (the SSHHost informer, the third watched, has started)
 * leaves no handler in any informer; a controller that was made takes its handlers back when
 * freed. */
static void test_setup_rollback(void **state)
{
    struct kp_ssh_fx f;
    struct kp_ssh_nodeclassctl *ctl = NULL;
    struct kp_ssh_nodeclassctl_opts o = {0};

    (void)state;
    kp_ssh_fx_init(&f);
    o = (struct kp_ssh_nodeclassctl_opts){.pool_namespace = "pool",
                                          .client = f.c,
                                          .nodeclasses = f.classes,
                                          .profiles = f.profiles,
                                          .hosts = f.hosts,
                                          .nodeclaims = f.claims};
    assert_int_equal(kp_informer_start(f.hosts), 0);
    assert_int_equal(kp_ssh_nodeclassctl_new(&o, &ctl), -EBUSY);
    assert_null(ctl);
    kp_informer_stop(f.hosts);
    assert_int_equal(kp_ssh_fx_handlers(&f), 0);
    assert_int_equal(kp_ssh_nodeclassctl_new(&o, &ctl), 0);
    assert_int_equal(kp_ssh_fx_handlers(&f), 4);
    ctl = kp_ssh_nodeclassctl_free(ctl);
    assert_int_equal(kp_ssh_fx_handlers(&f), 0);
    kp_ssh_fx_done(&f);
}

static void not_node_ip(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    (void)e;
    emit("x", ctx);
}

/* The provider's Node indexes: asking twice is a no-op, but a name another function holds is
 * refused (the provider's lookups would read that function's keys). */
static void test_index_nodes(void **state)
{
    struct kp_ssh_fx f;
    struct kp_informer *other = NULL;
    struct kp_informer_opts o = {
        .res = &KP_RES_NODE, .project = kp_node_project, .view_kind = kp_kind_node};

    (void)state;
    kp_ssh_fx_init(&f);
    assert_int_equal(kp_ssh_index_nodes(f.nodes), 0);
    assert_int_equal(kp_ssh_index_nodes(f.nodes), 0);
    assert_ptr_equal(kp_store_index_fn(kp_informer_store(f.nodes), KP_INDEX_NODE_IP),
                     kp_index_node_ip);
    assert_int_equal(kp_informer_new(f.c, &o, &other), 0);
    assert_int_equal(kp_informer_add_index(other, KP_INDEX_NODE_IP, not_node_ip), 0);
    assert_int_equal(kp_ssh_index_nodes(other), -EEXIST);
    kp_informer_free(other);
    kp_ssh_fx_done(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_rollback),  cmocka_unit_test(test_ready_reasons),
        cmocka_unit_test(test_differs),         cmocka_unit_test(test_status_patch),
        cmocka_unit_test(test_finalizer_patch), cmocka_unit_test(test_host_labels),
        cmocka_unit_test(test_index_nodes),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_compute),
    };

    return kp_test_main("nodeclassctl", tests, KP_ARRAY_SIZE(tests), torture,
                        KP_ARRAY_SIZE(torture), argc, argv);
}
