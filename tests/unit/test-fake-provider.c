/* Tests for the fake provider (tests/lib/kp-fake-provider.h): that it keeps the contract the
 * core will be tested against. Create picks the cheapest available offering compatible with the
 * NodeClaim's requirement set (In [a b] and per-offering zone), is idempotent per name and uid,
 * answers InsufficientCapacity when nothing fits and injected failures once; Delete is fenced;
 * a published catalog is shared by reference and a held one survives the next publish; a
 * cancelled Create in flight ends within moments. */
#include "kp-test.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/str.h"
#include "base/time.h"
#include "core/provider.h"
#include "kp-fake-provider.h"
#include "api/obj-karpenter.h"
#include "api/requirements.h"

static struct kp_entry *claim(const char *name, const char *uid, const char *reqs)
{
    char buf[2048];
    struct kp_entry *e = NULL;
    int n = snprintf(buf, sizeof(buf),
                     "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":"
                     "{\"name\":\"%s\",\"uid\":\"%s\",\"resourceVersion\":\"1\"},\"spec\":{"
                     "\"nodeClassRef\":{\"group\":\"" KP_FAKE_NODECLASS_GROUP
                     "\",\"kind\":\"" KP_FAKE_NODECLASS_KIND
                     "\",\"name\":\"x\"},\"requirements\":[%s]}}",
                     name, uid, reqs);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_nodeclaim_decode(buf, (size_t)n, &e), 0);
    return e;
}

/* Type name, offered in zones a (price pa) and b (price pb); pb < 0: no zone b offering. */
static void add_type(struct kp_instance_types *t, const char *name, int64_t pa, int64_t pb,
                     bool b_available)
{
    struct kp_instance_type *it;
    const char *zones[] = {"a", "b"}, *ct = "on-demand";

    t->v = kp_reallocarray(t->v, t->n + 1, sizeof(*t->v));
    assert_non_null(t->v);
    it = &t->v[t->n++];
    memset(it, 0, sizeof(*it));
    it->name = kp_strdup(name);
    assert_int_equal(kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, &name, 1, 0), 0);
    assert_int_equal(kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, zones, pb < 0 ? 1 : 2, 0),
                     0);
    assert_int_equal(kp_provider_kv_add(&it->labels, &it->n_labels, KP_LABEL_INSTANCE_TYPE, name),
                     0);
    assert_int_equal(kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", 4000), 0);
    it->offerings = kp_calloc(2, sizeof(*it->offerings));
    assert_non_null(it->offerings);
    for (size_t i = 0; i < (pb < 0 ? 1u : 2u); i++) {
        struct kp_offering *o = &it->offerings[it->n_offerings++];

        assert_int_equal(kp_reqset_add(&o->reqs, KP_LABEL_ZONE, KP_SEL_IN, &zones[i], 1, 0), 0);
        assert_int_equal(kp_reqset_add(&o->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1, 0), 0);
        o->price_micro_usd = i ? pb : pa;
        o->available = i ? b_available : true;
    }
}

static void test_create_picks_and_fences(void **state)
{
    struct kp_fake_provider *f = NULL;
    struct kp_provider p;
    struct kp_instance_types t = {0};
    struct kp_provider_instance in = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_entry *c1, *c1_again, *c1_old, *c2, *c3;

    (void)state;
    assert_int_equal(kp_fake_provider_new(&f), 0);
    p = kp_fake_provider_as_provider(f);
    add_type(&t, "small", 100, 50, false); /* zone b is cheaper but unavailable */
    add_type(&t, "big", 400, 300, true);
    assert_int_equal(kp_fake_provider_publish(f, &t), 0);

    /* instance-type In [small big]: small in zone a (its zone b offering is unavailable). */
    c1 = claim("c1", "u1",
               "{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"In\","
               "\"values\":[\"small\",\"big\"]}");
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c1), &in, &err), 0);
    assert_string_equal(in.instance_type, "small");
    assert_string_equal(kp_provider_kv_get(in.labels, in.n_labels, KP_LABEL_ZONE), "a");
    assert_string_equal(in.provider_id, "fake://c1");
    kp_provider_instance_done(&in);
    /* Idempotent: the same NodeClaim gets the same instance. */
    c1_again = claim("c1", "u1", "");
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c1_again), &in, &err), 0);
    assert_string_equal(in.instance_type, "small");
    assert_int_equal(kp_fake_provider_instances(f), 1);
    kp_provider_instance_done(&in);

    /* zone In [b]: only big has an available zone-b offering. */
    c2 = claim("c2", "u2",
               "{\"key\":\"topology.kubernetes.io/zone\",\"operator\":\"In\",\"values\":[\"b\"]}");
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c2), &in, &err), 0);
    assert_string_equal(in.instance_type, "big");
    assert_string_equal(kp_provider_kv_get(in.labels, in.n_labels, KP_LABEL_ZONE), "b");
    kp_provider_instance_done(&in);
    /* Nothing in zone c. */
    c3 = claim("c3", "u3",
               "{\"key\":\"topology.kubernetes.io/zone\",\"operator\":\"In\",\"values\":[\"c\"]}");
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c3), &in, &err), -ENOSPC);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY);
    /* An injected failure, once. */
    kp_fake_provider_fail_next_create(f, -KP_ESCRIPT, KP_PROVIDER_ERR_CREATE,
                                      KP_PROVIDER_REASON_JOIN_FAILED);
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c3), &in, &err),
                     -KP_ESCRIPT);
    assert_string_equal(err.reason, "JoinFailed");
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c3), &in, &err), -ENOSPC);

    /* Delete is fenced by uid. */
    c1_old = claim("c1", "an-older-uid", "");
    assert_int_equal(p.ops->delete (p.self, NULL, NULL, kp_nodeclaim_view(c1_old), &err), -ENOENT);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_NOT_FOUND);
    assert_int_equal(p.ops->get(p.self, NULL, NULL, "fake://c1", &in, &err), 0);
    kp_provider_instance_done(&in);
    assert_int_equal(p.ops->delete (p.self, NULL, NULL, kp_nodeclaim_view(c1), &err), 0);
    assert_int_equal(p.ops->get(p.self, NULL, NULL, "fake://c1", &in, &err), -ENOENT);
    {
        struct kp_provider_instances all = {0};

        assert_int_equal(p.ops->list(p.self, NULL, NULL, &all, &err), 0);
        assert_int_equal(all.n, 1);
        assert_string_equal(all.v[0].nodeclaim, "c2");
        kp_provider_instances_done(&all);
    }
    assert_int_equal(atomic_load(&kp_fake_provider_calls(f)->create), 6);
    kp_provider_err_done(&err);
    kp_entry_unref(c1);
    kp_entry_unref(c1_again);
    kp_entry_unref(c1_old);
    kp_entry_unref(c2);
    kp_entry_unref(c3);
    kp_fake_provider_free(f);
}

static void test_catalog_by_reference(void **state)
{
    struct kp_fake_provider *f = NULL;
    struct kp_provider p;
    struct kp_instance_types t = {0};
    struct kp_instance_catalog *a = NULL, *b = NULL;
    struct kp_entry *np = NULL;
    const char *pool = "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{"
                       "\"name\":\"np\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{"
                       "\"template\":{\"spec\":{\"nodeClassRef\":{\"group\":"
                       "\"" KP_FAKE_NODECLASS_GROUP "\",\"kind\":\"" KP_FAKE_NODECLASS_KIND
                       "\",\"name\":\"x\"},\"requirements\":[]}}}}";

    (void)state;
    assert_int_equal(kp_fake_provider_new(&f), 0);
    p = kp_fake_provider_as_provider(f);
    assert_int_equal(kp_nodepool_decode(pool, strlen(pool), &np), 0);
    assert_true(kp_provider_supports(&p, &kp_nodepool_view(np)->tmpl.node_class_ref));
    add_type(&t, "small", 100, -1, false);
    assert_int_equal(kp_fake_provider_publish(f, &t), 0);
    assert_int_equal(p.ops->get_instance_types(p.self, NULL, NULL, kp_nodepool_view(np), &a, NULL),
                     0);
    assert_int_equal(p.ops->get_instance_types(p.self, NULL, NULL, kp_nodepool_view(np), &b, NULL),
                     0);
    assert_ptr_equal(a, b);
    b = kp_instance_catalog_unref(b);
    add_type(&t, "big", 400, -1, false);
    assert_int_equal(kp_fake_provider_publish(f, &t), 0);
    assert_int_equal(p.ops->get_instance_types(p.self, NULL, NULL, kp_nodepool_view(np), &b, NULL),
                     0);
    assert_true(b->version > a->version);
    assert_int_equal(a->n, 1); /* still the old one, whole */
    assert_string_equal(a->v[0].name, "small");
    assert_int_equal(b->n, 1);
    assert_string_equal(b->v[0].name, "big");
    kp_instance_catalog_unref(a);
    kp_instance_catalog_unref(b);
    kp_entry_unref(np);
    kp_fake_provider_free(f);
}

struct canceller {
    struct kp_ctx *ctx;
};

static void *cancel_main(void *arg)
{
    kp_sleep_usec(100 * 1000);
    kp_ctx_cancel(((struct canceller *)arg)->ctx);
    return NULL;
}

static void test_create_cancelled(void **state)
{
    struct kp_fake_provider *f = NULL;
    struct kp_provider p;
    struct kp_instance_types t = {0};
    struct kp_provider_instance in = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_entry *c = claim("c", "u", "");
    struct kp_ctx ctx;
    struct canceller cl = {&ctx};
    pthread_t th;
    uint64_t t0;

    (void)state;
    assert_int_equal(kp_fake_provider_new(&f), 0);
    p = kp_fake_provider_as_provider(f);
    add_type(&t, "small", 100, -1, false);
    assert_int_equal(kp_fake_provider_publish(f, &t), 0);
    kp_fake_provider_set_create_delay(f, 30 * KP_USEC_PER_SEC);
    kp_ctx_init(&ctx, NULL, kp_deadline_never());
    assert_int_equal(pthread_create(&th, NULL, cancel_main, &cl), 0);
    t0 = kp_mono_usec();
    assert_int_equal(p.ops->create(p.self, &ctx, NULL, kp_nodeclaim_view(c), &in, &err),
                     -ECANCELED);
    assert_true(kp_mono_usec() - t0 < 5 * KP_USEC_PER_SEC);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_RETRYABLE);
    assert_int_equal(kp_fake_provider_instances(f), 0);
    kp_provider_err_done(&err);
    kp_entry_unref(c);
    kp_fake_provider_free(f);
}

/* A NodeClaim with this nodeClassRef group/kind and these requests (a JSON object's body). */
static struct kp_entry *claim_with(const char *name, const char *group, const char *kind,
                                   const char *requests)
{
    char buf[2048];
    struct kp_entry *e = NULL;
    int n = snprintf(buf, sizeof(buf),
                     "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":"
                     "{\"name\":\"%s\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{"
                     "\"nodeClassRef\":{\"group\":\"%s\",\"kind\":\"%s\",\"name\":\"x\"},"
                     "\"requirements\":[],\"resources\":{\"requests\":{%s}}}}",
                     name, group, kind, requests);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_nodeclaim_decode(buf, (size_t)n, &e), 0);
    return e;
}

/* The contract the fake claims: an equal publish keeps catalog and version; Create honours the
 * requests and the nodeClassRef; both Ready=False and Ready=Unknown are repaired. */
static void test_keeps_the_contract(void **state)
{
    struct kp_fake_provider *f = NULL;
    struct kp_provider p;
    struct kp_instance_types t = {0}, same = {0};
    struct kp_instance_catalog *a = NULL, *b = NULL;
    struct kp_provider_instance in = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    const struct kp_repair_policy *rp;
    struct kp_entry *np = NULL, *c;
    const char *pool = "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{"
                       "\"name\":\"np\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{"
                       "\"template\":{\"spec\":{\"nodeClassRef\":{\"group\":"
                       "\"" KP_FAKE_NODECLASS_GROUP "\",\"kind\":\"" KP_FAKE_NODECLASS_KIND
                       "\",\"name\":\"x\"},\"requirements\":[]}}}}";
    size_t n;
    bool unknown = false;

    (void)state;
    assert_int_equal(kp_fake_provider_new(&f), 0);
    p = kp_fake_provider_as_provider(f);
    assert_int_equal(kp_nodepool_decode(pool, strlen(pool), &np), 0);
    add_type(&t, "small", 100, -1, false);
    add_type(&t, "big", 400, -1, false);
    t.v[1].capacity[0].milli = 8000; /* big: 8 cpu, small: 4 */
    add_type(&same, "small", 100, -1, false);
    add_type(&same, "big", 400, -1, false);
    same.v[1].capacity[0].milli = 8000;
    assert_int_equal(kp_fake_provider_publish(f, &t), 0);
    assert_int_equal(p.ops->get_instance_types(p.self, NULL, NULL, kp_nodepool_view(np), &a, NULL),
                     0);
    assert_int_equal(kp_fake_provider_publish(f, &same), 0);
    assert_int_equal(same.n, 0); /* taken over either way */
    assert_int_equal(p.ops->get_instance_types(p.self, NULL, NULL, kp_nodepool_view(np), &b, NULL),
                     0);
    assert_ptr_equal(a, b);
    assert_int_equal(a->version, b->version);

    /* 6 cpu: only big holds it, though small is cheaper. */
    c = claim_with("c1", KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND, "\"cpu\":\"6\"");
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c), &in, &err), 0);
    assert_string_equal(in.instance_type, "big");
    kp_provider_instance_done(&in);
    kp_entry_unref(c);
    /* 16 cpu: nothing holds it. */
    c = claim_with("c2", KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND, "\"cpu\":\"16\"");
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c), &in, &err), -ENOSPC);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY);
    kp_entry_unref(c);
    /* Too large to hold, or another node class kind: the user's to fix. */
    c = claim_with("c3", KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND, "\"memory\":\"1Ei\"");
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c), &in, &err), -EINVAL);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_CREATE);
    assert_string_equal(err.reason, KP_PROVIDER_REASON_CONFIG);
    kp_entry_unref(c);
    c = claim_with("c4", "karpenter.k8s.aws", "EC2NodeClass", "");
    assert_int_equal(p.ops->create(p.self, NULL, NULL, kp_nodeclaim_view(c), &in, &err), -EINVAL);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_CREATE);
    kp_entry_unref(c);
    assert_int_equal(kp_fake_provider_instances(f), 1);

    n = p.ops->repair_policies(p.self, &rp);
    for (size_t i = 0; i < n; i++)
        unknown |=
            kp_streq(rp[i].condition_type, "Ready") && kp_streq(rp[i].condition_status, "Unknown");
    assert_true(unknown);

    kp_provider_err_done(&err);
    kp_instance_catalog_unref(a);
    kp_instance_catalog_unref(b);
    kp_entry_unref(np);
    kp_fake_provider_free(f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_picks_and_fences),
        cmocka_unit_test(test_catalog_by_reference),
        cmocka_unit_test(test_create_cancelled),
        cmocka_unit_test(test_keeps_the_contract),
    };

    return kp_test_main("fake-provider", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
