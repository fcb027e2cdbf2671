/* Tests for the garbage-collection decisions (core/gc/): a registered NodeClaim the provider no
 * longer lists is collected unless its Node is Ready, and never when unregistered, deleting,
 * just launched, listed or another provider's; a Node of ours (by the provider's instance list
 * or by its labels) with no NodeClaim is collected after the grace, never while a NodeClaim
 * holds its providerID or is named as the instance or the Node; and set-up / roll-back of the
 * controller. Objects are decoded from JSON written with ' for ". */
#include "kp-test.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "k8s/rfc3339.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "core/core.h"
#include "core/gc/gc.h"
#include "core/provider.h"
#include "kp-fake-provider.h"
#include "kp-ssh-fx.h"

#define SEC 1000000LL
#define T0 "2026-01-01T00:00:00Z"

static struct {
    struct kp_fake_provider *f;
    struct kp_provider p;
    int64_t t0;
} T;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(kp_fake_provider_new(&T.f), 0);
    T.p = kp_fake_provider_as_provider(T.f);
    assert_int_equal(kp_rfc3339_parse(T0, strlen(T0), &T.t0), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    T.f = kp_fake_provider_free(T.f);
    return 0;
}

/* Test objects decode from JSON written with ' for " (tests/lib/kp-test.h). */
#define decode(fn, ...) kp_test_decode(fn, true, __VA_ARGS__)

#define COND(type, st, at)                                                                         \
    "{'type':'" type "','status':'" st "','reason':'R','message':'','lastTransitionTime':'" at "'}"
#define REGISTERED                                                                                 \
    "'providerID':'fake://1','conditions':[" COND("Launched", "True", T0) "," COND("Registered",   \
                                                                                   "True", T0) "]"

/* A NodeClaim of node class kind (group fixed by ours) with extra metadata and a status. */
static struct kp_entry *claim(bool ours, const char *meta, const char *status)
{
    return decode(kp_nodeclaim_decode,
                  "{'metadata':{'name':'nc','uid':'nc-uid','resourceVersion':'3',"
                  "'creationTimestamp':'" T0 "'%s},'spec':{'nodeClassRef':{'group':'%s','kind':"
                  "'%s','name':'c'},'requirements':[]},'status':{%s}}",
                  meta, ours ? KP_FAKE_NODECLASS_GROUP : "karpenter.k8s.aws",
                  ours ? KP_FAKE_NODECLASS_KIND : "EC2NodeClass", status);
}

static struct kp_entry *node(const char *meta, const char *ready)
{
    return decode(kp_node_decode,
                  "{'metadata':{'name':'n1','uid':'n-uid','resourceVersion':'1',"
                  "'creationTimestamp':'" T0 "'%s},'spec':{'providerID':'fake://1'},"
                  "'status':{'conditions':[{'type':'Ready','status':'%s'}]}}",
                  meta, ready);
}

static void test_nodeclaim_plan(void **state)
{
    struct kp_entry *nc = claim(true, "", REGISTERED);
    struct kp_entry *ready = node("", "True"), *notready = node("", "False");
    struct kp_entry *e;
    int64_t later = T.t0 + 60 * SEC;

    (void)state;
#define PLAN(x, listed, n, now) kp_gc_nodeclaim_plan(&T.p, kp_nodeclaim_view(x), listed, n, now)
    /* Lost by the provider, no Node or a Node that is not Ready: collected. */
    assert_true(PLAN(nc, false, NULL, later));
    assert_true(PLAN(nc, false, kp_node_view(notready), later));
    /* The kubelet still reports Ready: kept. */
    assert_false(PLAN(nc, false, kp_node_view(ready), later));
    /* Listed: kept. */
    assert_false(PLAN(nc, true, NULL, later));
    /* Launched under 10 s ago: the list may trail the launch. */
    assert_false(PLAN(nc, false, NULL, T.t0 + 9 * SEC));
    assert_true(PLAN(nc, false, NULL, T.t0 + 10 * SEC));
    kp_entry_unref(nc);

    /* Not registered: the registration TTL's, not ours. */
    e = claim(true, "",
              "'providerID':'fake://1','conditions':[" COND("Launched", "True", T0) "," COND(
                  "Registered", "Unknown", T0) "]");
    assert_false(PLAN(e, false, NULL, later));
    kp_entry_unref(e);
    /* Deleting already. */
    e = claim(true, ",'deletionTimestamp':'" T0 "','finalizers':['x']", REGISTERED);
    assert_false(PLAN(e, false, NULL, later));
    kp_entry_unref(e);
    /* Another provider's NodeClaim. */
    e = claim(false, "", REGISTERED);
    assert_false(PLAN(e, false, NULL, later));
    kp_entry_unref(e);
#undef PLAN
    kp_entry_unref(ready);
    kp_entry_unref(notready);
}

/* The form of the fake provider's providerIDs, for the case of a provider that knows its own. */
static bool owns_fake(void *self, const char *provider_id)
{
    (void)self;
    return strncmp(provider_id, "fake://", 7) == 0;
}

static void test_node_plan(void **state)
{
    const char *labelled = ",'labels':{'karpenter.sh/nodepool':'np','test.kpssh.dev/"
                           "fakenodeclass':'c'}";
    struct kp_entry *plain = node("", "True"), *ours = node(labelled, "True");
    struct kp_entry *half = node(",'labels':{'karpenter.sh/nodepool':'np'}", "True");
    struct kp_entry *deleting =
        node(",'deletionTimestamp':'" T0 "','finalizers':['karpenter.sh/termination']", "True");
    struct kp_provider_instance inst = {.nodeclaim = (char[]){"nc"},
                                        .provider_id = (char[]){"fake://1"}};
    const uint64_t grace = 60 * SEC;
    int64_t later = T.t0 + 61 * SEC;
    struct kp_gc_node_facts none = {0}, listed = {.instance = &inst};

    (void)state;
#define PLAN(n, facts, now) kp_gc_node_plan(&T.p, kp_node_view(n), facts, now, grace)
    /* Ours by the instance list, or by the pool and node class labels: collected after grace. */
    assert_true(PLAN(plain, &listed, later));
    assert_true(PLAN(ours, &none, later));
    assert_true(kp_gc_node_labelled_ours(&T.p, kp_node_view(ours)));
    assert_false(PLAN(ours, &none, T.t0 + 59 * SEC));
    /* Neither: another controller's Node, never touched. */
    assert_false(PLAN(plain, &none, later));
    assert_false(PLAN(half, &none, later));
    assert_false(kp_gc_node_labelled_ours(&T.p, kp_node_view(half)));
    /* A provider that knows its providerIDs' form claims the pool-labelled Node by it, node
     * class label or not (a Node registered before its claim's labels reached it): collected,
     * and termination, asking the same question, lets it go. */
    {
        struct kp_provider_ops ops = *T.p.ops;
        struct kp_provider owning = {.ops = &ops, .self = T.p.self};

        ops.owns_provider_id = owns_fake;
        assert_true(kp_gc_node_labelled_ours(&owning, kp_node_view(half)));
        assert_true(kp_gc_node_plan(&owning, kp_node_view(half), &none, later, grace));
        assert_false(kp_gc_node_labelled_ours(&owning, kp_node_view(plain))); /* no pool label */
        assert_false(kp_provider_owns_provider_id(&owning, NULL));
        assert_false(kp_provider_owns_provider_id(&T.p, "fake://1")); /* no such op: never */
    }
    /* A NodeClaim with its providerID, or named as the instance says (status not written yet),
     * keeps it. */
    assert_false(
        PLAN(plain, &((struct kp_gc_node_facts){.instance = &inst, .claim_with_provider_id = true}),
             later));
    assert_false(
        PLAN(plain, &((struct kp_gc_node_facts){.instance = &inst, .claim_named = true}), later));
    /* Being deleted already: its termination runs. */
    assert_false(PLAN(deleting, &listed, later));
#undef PLAN
    kp_entry_unref(plain);
    kp_entry_unref(ours);
    kp_entry_unref(half);
    kp_entry_unref(deleting);
}

static void test_setup(void **state)
{
    struct kp_ssh_fx fx;
    struct kp_core_env env = {0};
    struct kp_gc_controller *ctl = NULL;

    (void)state;
    kp_ssh_fx_init(&fx);
    env.client = fx.c;
    env.informers = fx.reg;
    assert_int_equal(kp_gc_controller_new(&env, &ctl), -EINVAL); /* no provider */
    env.provider = &T.p;
    assert_int_equal(kp_gc_controller_new(&env, &ctl), 0);
    assert_false(kp_gc_controller_ready(ctl));
    assert_null(kp_gc_controller_free(ctl));
    assert_null(kp_gc_controller_free(NULL));
    kp_ssh_fx_done(&fx);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nodeclaim_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setup, setup, teardown),
    };

    return kp_test_main("gc", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
