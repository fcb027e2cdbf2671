/* Tests for the provider contract's catalog and ownership (core/provider.c) and the SSH
 * provider's side of it (provider/ssh/provider.c) over in-memory stores, no lab: a catalog is
 * shared (the same reference until something changes), republished under a new version when the
 * hosts or node classes change what can be launched, kept (same version) when a change does not,
 * and a reader holding the old one can still read it after the republish (ASan would see a
 * use-after-free). Ownership by declared node class kinds, the repair policies, and ops that end
 * at once on a cancelled or expired context. */
#include "kp-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "base/time.h"
#include "core/provider.h"
#include "k8s/store.h"
#include "api/obj-karpenter.h"
#include "api/requirements.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/provider.h"

#define NS "kpssh-system"

static struct {
    struct kp_store *hosts, *classes, *profiles;
    struct kp_ssh_provider *sp;
    struct kp_provider prov;
} T;

static struct kp_entry *decode(int (*fn)(const char *, size_t, struct kp_entry **), const char *s)
{
    struct kp_entry *e = NULL;

    assert_int_equal(fn(s, strlen(s), &e), 0);
    return e;
}

/* SSHHost name of class cls with cpu cores, Available (or claimed when claimed), at rv. */
static void put_host(const char *name, const char *cls, unsigned cpu, bool claimed, unsigned rv)
{
    char buf[2048];
    int n = snprintf(buf, sizeof(buf),
                     "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHHost\","
                     "\"metadata\":{\"name\":\"%s\",\"namespace\":\"" NS "\",\"uid\":\"u-%s\","
                     "\"resourceVersion\":\"%u\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
                     "\"labels\":{\"" KP_KPSSH_LABEL_HOST_CLASS "\":\"%s\"}},"
                     "\"spec\":{\"address\":\"10.0.0.1\",\"sshKeySecretRef\":{\"name\":\"k\"},"
                     "\"capacity\":{\"cpu\":\"%u\",\"memory\":\"4Gi\"}},"
                     "\"status\":{\"state\":\"%s\",\"observedArch\":\"amd64\"%s}}",
                     name, name, rv, cls, cpu, claimed ? "Claimed" : "Available",
                     claimed ? ",\"claimRef\":{\"name\":\"nc\",\"uid\":\"x\"}" : "");

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_store_put(T.hosts, decode(kp_sshhost_decode, buf), NULL), 0);
}

static void put_class(const char *name, const char *price)
{
    char buf[1024];
    int n = snprintf(buf, sizeof(buf),
                     "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHNodeClass\","
                     "\"metadata\":{\"name\":\"%s\",\"uid\":\"u\",\"resourceVersion\":\"1\"},"
                     "\"spec\":{\"joinProfileRef\":{\"name\":\"p\"}%s%s%s}}",
                     name, price ? ",\"pricePerCPUHour\":\"" : "", price ? price : "",
                     price ? "\"" : "");

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_store_put(T.classes, decode(kp_sshnodeclass_decode, buf), NULL), 0);
}

static struct kp_entry *nodepool(const char *group, const char *kind, const char *cls)
{
    char buf[1024];
    int n = snprintf(buf, sizeof(buf),
                     "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":"
                     "{\"name\":\"np\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{"
                     "\"template\":{\"spec\":{\"nodeClassRef\":{\"group\":\"%s\",\"kind\":\"%s\","
                     "\"name\":\"%s\"},\"requirements\":[]}}}}",
                     group, kind, cls);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    return decode(kp_nodepool_decode, buf);
}

static int setup(void **state)
{
    struct kp_ssh_provider_opts po = {0};

    (void)state;
    memset(&T, 0, sizeof(T));
    assert_int_equal(kp_store_new(&T.hosts), 0);
    assert_int_equal(kp_store_new(&T.classes), 0);
    assert_int_equal(kp_store_new(&T.profiles), 0);
    po.pool_namespace = NS;
    po.hosts = T.hosts;
    po.nodeclasses = T.classes;
    po.profiles = T.profiles;
    assert_int_equal(kp_ssh_provider_new(&po, &T.sp), 0);
    T.prov = kp_ssh_provider_as_provider(T.sp);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    T.sp = kp_ssh_provider_free(T.sp);
    T.hosts = kp_store_free(T.hosts);
    T.classes = kp_store_free(T.classes);
    T.profiles = kp_store_free(T.profiles);
    return 0;
}

static struct kp_instance_catalog *get(const struct kp_entry *np)
{
    struct kp_instance_catalog *cat = NULL;
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;

    assert_int_equal(
        T.prov.ops->get_instance_types(T.prov.self, NULL, NULL, kp_nodepool_view(np), &cat, &err),
        0);
    assert_non_null(cat);
    kp_provider_err_done(&err);
    return cat;
}

static void test_catalog_shared_and_versioned(void **state)
{
    struct kp_entry *np = nodepool(KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND, "snc");
    struct kp_instance_catalog *a, *b, *c, *d;
    const struct kp_instance_type *it;

    (void)state;
    put_class("snc", "0.5");
    put_host("h1", "small", 2, false, 1);
    put_host("h2", "big", 8, false, 1);

    a = get(np);
    assert_true(a->version > 0);
    assert_int_equal(a->n, 2);
    /* Nothing changed: the same published catalog, not a copy. */
    b = get(np);
    assert_ptr_equal(a, b);
    b = kp_instance_catalog_unref(b);

    /* A write that changes nothing the catalog shows (a new resourceVersion): same version. */
    put_host("h1", "small", 2, false, 2);
    b = get(np);
    assert_ptr_equal(a, b);
    assert_int_equal(b->version, a->version);
    b = kp_instance_catalog_unref(b);

    /* The last small host is claimed: its offering is no longer available -> republished. */
    put_host("h1", "small", 2, true, 3);
    c = get(np);
    assert_ptr_not_equal(a, c);
    assert_true(c->version > a->version);
    it = kp_instance_catalog_find(c, "small");
    assert_non_null(it);
    assert_false(it->offerings[0].available);
    /* The reader of the old catalog still reads it as it was. */
    it = kp_instance_catalog_find(a, "small");
    assert_non_null(it);
    assert_true(it->offerings[0].available);
    assert_string_equal(kp_req_single(kp_reqset_get(&it->reqs, KP_LABEL_INSTANCE_TYPE)), "small");
    a = kp_instance_catalog_unref(a); /* the last reference to the old one */

    /* A node class change (price) republishes too; versions only grow. */
    put_class("snc", "0.75");
    d = get(np);
    assert_true(d->version > c->version);
    assert_int_equal(kp_instance_catalog_find(d, "big")->offerings[0].price_micro_usd, 6000000);
    kp_instance_catalog_unref(c);
    kp_instance_catalog_unref(d);
    kp_entry_unref(np);
}

/* A node class deleted then created again: N, then 0, then a version above N (a reader that saw
 * the 0 must see the recreated class's catalog as new, even when it equals the old one). */
static void test_catalog_class_recreated(void **state)
{
    struct kp_entry *np = nodepool(KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND, "snc");
    struct kp_instance_catalog *a, *b, *c;
    struct kp_entry *old = NULL;

    (void)state;
    put_class("snc", NULL);
    put_host("h1", "small", 2, false, 1);
    a = get(np);
    assert_true(a->version > 0);
    assert_int_equal(kp_store_delete(T.classes, "snc", &old), 0);
    kp_entry_unref(old);
    b = get(np);
    assert_int_equal(b->version, 0);
    put_class("snc", NULL);
    c = get(np);
    assert_int_equal(c->n, a->n);
    assert_true(c->version > a->version);
    kp_instance_catalog_unref(a);
    kp_instance_catalog_unref(b);
    kp_instance_catalog_unref(c);
    kp_entry_unref(np);
}

static void test_catalog_empty(void **state)
{
    struct kp_entry *foreign = nodepool("karpenter.k8s.aws", "EC2NodeClass", "snc");
    struct kp_entry *missing = nodepool(KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND, "nope");
    struct kp_instance_catalog *cat;

    (void)state;
    put_class("snc", NULL);
    put_host("h1", "small", 2, false, 1);
    cat = get(foreign);
    assert_int_equal(cat->n, 0);
    assert_int_equal(cat->version, 0);
    kp_instance_catalog_unref(cat);
    cat = get(missing);
    assert_int_equal(cat->n, 0);
    assert_int_equal(cat->version, 0);
    kp_instance_catalog_unref(cat);
    kp_entry_unref(foreign);
    kp_entry_unref(missing);
}

static void test_node_classes_and_repair(void **state)
{
    const struct kp_node_class_kind *k = NULL;
    const struct kp_repair_policy *rp = NULL;
    struct kp_entry *ours = nodepool(KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND, "snc");
    struct kp_entry *other_kind = nodepool(KP_KPSSH_GROUP, "OtherNodeClass", "snc");
    struct kp_entry *foreign = nodepool("karpenter.k8s.aws", "EC2NodeClass", "snc");
    size_t n;

    (void)state;
    assert_int_equal(T.prov.ops->supported_node_classes(T.prov.self, &k), 1);
    assert_string_equal(k[0].group, "karpenter.kpssh.dev");
    assert_string_equal(k[0].kind, "SSHNodeClass");
    assert_true(kp_provider_supports(&T.prov, &kp_nodepool_view(ours)->tmpl.node_class_ref));
    assert_false(kp_provider_supports(&T.prov, &kp_nodepool_view(other_kind)->tmpl.node_class_ref));
    assert_false(kp_provider_supports(&T.prov, &kp_nodepool_view(foreign)->tmpl.node_class_ref));

    n = T.prov.ops->repair_policies(T.prov.self, &rp);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(rp[i].condition_type, "Ready");
        assert_int_equal(rp[i].toleration_usec, 30 * 60 * KP_USEC_PER_SEC);
    }
    assert_string_equal(rp[0].condition_status, "False");
    assert_string_equal(rp[1].condition_status, "Unknown");

    /* The providerIDs of its own form: kpssh://<this pool namespace>/<one host name>. */
    assert_true(kp_provider_owns_provider_id(&T.prov, "kpssh://" NS "/h1"));
    assert_false(kp_provider_owns_provider_id(&T.prov, "kpssh://" NS "/"));
    assert_false(kp_provider_owns_provider_id(&T.prov, "kpssh://" NS "/h1/x"));
    assert_false(kp_provider_owns_provider_id(&T.prov, "kpssh://" NS "x/h1"));
    assert_false(kp_provider_owns_provider_id(&T.prov, "kpssh://other-pool/h1"));
    assert_false(kp_provider_owns_provider_id(&T.prov, "kpssh://" NS));
    assert_false(kp_provider_owns_provider_id(&T.prov, "eks-hybrid:///us-west-2/c/mi-1"));
    assert_false(kp_provider_owns_provider_id(&T.prov, ""));
    kp_entry_unref(ours);
    kp_entry_unref(other_kind);
    kp_entry_unref(foreign);
}

/* A context that is already done ends every blocking op before it does anything (no client is
 * needed to find that out), with RETRYABLE and the context's error. */
static void test_ops_honour_ctx(void **state)
{
    struct kp_entry *np = nodepool(KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND, "snc");
    struct kp_entry *nc;
    struct kp_ctx cancelled, expired;
    struct kp_provider_instance inst = {0};
    struct kp_provider_instances all = {0};
    struct kp_instance_catalog *cat = NULL;
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    const char *drift = NULL;
    const char *claim = "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":"
                        "{\"name\":\"nc\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{"
                        "\"nodeClassRef\":{\"group\":\"karpenter.kpssh.dev\",\"kind\":"
                        "\"SSHNodeClass\",\"name\":\"snc\"},\"requirements\":[]},"
                        "\"status\":{\"providerID\":\"kpssh://" NS "/h1\"}}";

    (void)state;
    put_class("snc", NULL);
    put_host("h1", "small", 2, false, 1);
    nc = decode(kp_nodeclaim_decode, claim);
    kp_ctx_init(&cancelled, NULL, kp_deadline_never());
    kp_ctx_cancel(&cancelled);
    kp_ctx_init(&expired, NULL, kp_deadline_in(0));

    assert_int_equal(
        kp_ssh_provider_create(T.sp, &cancelled, NULL, kp_nodeclaim_view(nc), &inst, NULL, &err),
        -ECANCELED);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_RETRYABLE);
    assert_non_null(strstr(err.message, "cancelled"));
    assert_int_equal(
        T.prov.ops->create(T.prov.self, &expired, NULL, kp_nodeclaim_view(nc), &inst, &err),
        -ETIMEDOUT);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_RETRYABLE);
    assert_int_equal(
        T.prov.ops->delete (T.prov.self, &cancelled, NULL, kp_nodeclaim_view(nc), &err),
        -ECANCELED);
    assert_int_equal(
        T.prov.ops->get(T.prov.self, &cancelled, NULL, "kpssh://" NS "/h1", &inst, &err),
        -ECANCELED);
    assert_int_equal(T.prov.ops->list(T.prov.self, &expired, NULL, &all, &err), -ETIMEDOUT);
    assert_int_equal(T.prov.ops->get_instance_types(T.prov.self, &cancelled, NULL,
                                                    kp_nodepool_view(np), &cat, &err),
                     -ECANCELED);
    assert_null(cat);
    assert_int_equal(
        T.prov.ops->is_drifted(T.prov.self, &expired, NULL, kp_nodeclaim_view(nc), &drift, &err),
        -ETIMEDOUT);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_RETRYABLE);
    /* A live context lets the same calls through. */
    {
        struct kp_ctx live;

        kp_ctx_init(&live, &cancelled, kp_deadline_never());
        assert_int_equal(kp_provider_ctx_check(&live, NULL, "x"), -ECANCELED); /* the parent */
        kp_ctx_init(&live, NULL, kp_deadline_in(60 * KP_USEC_PER_SEC));
        assert_int_equal(T.prov.ops->get_instance_types(T.prov.self, &live, NULL,
                                                        kp_nodepool_view(np), &cat, &err),
                         0);
        assert_int_equal(cat->n, 1);
        kp_instance_catalog_unref(cat);
    }
    kp_provider_err_done(&err);
    kp_entry_unref(nc);
    kp_entry_unref(np);
}

/* A request too large to hold fits no type, and Create says it is the user's to fix (with the
 * validator's text), before any host is looked at. */
static void test_create_refuses_unholdable_request(void **state)
{
    struct kp_entry *nc;
    struct kp_provider_instance inst = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    const char *claim = "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":"
                        "{\"name\":\"nc\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{"
                        "\"nodeClassRef\":{\"group\":\"karpenter.kpssh.dev\",\"kind\":"
                        "\"SSHNodeClass\",\"name\":\"snc\"},\"requirements\":[],"
                        "\"resources\":{\"requests\":{\"memory\":\"1Ei\"}}}}";

    (void)state;
    put_class("snc", NULL);
    put_host("h1", "small", 2, false, 1);
    nc = decode(kp_nodeclaim_decode, claim);
    assert_int_equal(kp_nodeclaim_view(nc)->requests.n_bad, 1);
    assert_int_equal(
        T.prov.ops->create(T.prov.self, NULL, NULL, kp_nodeclaim_view(nc), &inst, &err), -EINVAL);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_CREATE);
    assert_string_equal(err.reason, KP_PROVIDER_REASON_CONFIG);
    assert_non_null(strstr(err.message, "spec.resources.requests"));
    assert_null(strchr(err.message, '\n'));
    kp_provider_err_done(&err);
    kp_entry_unref(nc);
}

/* The new message may be built from the old one (read before it is freed: ASan would see it). */
static void test_err_set_from_itself(void **state)
{
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;

    (void)state;
    kp_provider_err_set(&err, -EIO, KP_PROVIDER_ERR_RETRYABLE, NULL, "%s", "inner");
    assert_int_equal(
        kp_provider_err_set(&err, -EIO, KP_PROVIDER_ERR_RETRYABLE, NULL, "outer: %s", err.message),
        -EIO);
    assert_string_equal(err.message, "outer: inner");
    kp_provider_err_done(&err);
}

/* The core's half: a catalog outlives its publisher's reference while a reader holds it. */
static void test_catalog_refcount(void **state)
{
    struct kp_instance_types t = {0};
    struct kp_instance_catalog *cat = NULL, *held;
    const char *zone = "z1";

    (void)state;
    t.v = kp_calloc(1, sizeof(*t.v));
    assert_non_null(t.v);
    t.n = 1;
    t.v[0].name = kp_strdup("x");
    assert_int_equal(kp_reqset_add(&t.v[0].reqs, KP_LABEL_ZONE, KP_SEL_IN, &zone, 1, 0), 0);
    assert_int_equal(kp_instance_catalog_new(&t, 7, &cat), 0);
    assert_null(t.v); /* taken over */
    held = kp_instance_catalog_ref(cat);
    cat = kp_instance_catalog_unref(cat);
    assert_null(cat);
    assert_int_equal(held->version, 7);
    assert_string_equal(kp_instance_catalog_find(held, "x")->name, "x");
    assert_null(kp_instance_catalog_find(held, "y"));
    assert_null(kp_instance_catalog_unref(held));
    assert_null(kp_instance_catalog_ref(NULL));
    assert_null(kp_instance_catalog_unref(NULL));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_catalog_shared_and_versioned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_catalog_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_catalog_class_recreated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_classes_and_repair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ops_honour_ctx, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_refuses_unholdable_request, setup, teardown),
        cmocka_unit_test(test_err_set_from_itself),
        cmocka_unit_test(test_catalog_refcount),
    };

    return kp_test_main("catalog", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
