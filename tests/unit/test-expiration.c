/* Tests for the NodeClaim expiration decision (core/expiration/): expired exactly at creation +
 * expireAfter, a requeue at the expiry before it, nothing for Never, no expireAfter, a deleting
 * NodeClaim or another provider's, and set-up / roll-back of the controller. Objects are decoded
 * from JSON written with ' for ". */
#include "kp-test.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "k8s/rfc3339.h"
#include "api/obj-karpenter.h"
#include "core/core.h"
#include "core/expiration/expiration.h"
#include "core/provider.h"
#include "kp-fake-provider.h"
#include "kp-ssh-fx.h"

#define SEC 1000000LL
#define T0 "2026-01-01T00:00:00Z"

static int64_t t0(void)
{
    int64_t v = 0;

    assert_int_equal(kp_rfc3339_parse(T0, strlen(T0), &v), 0);
    return v;
}

/* A NodeClaim of node class group/kind with extra metadata (leading comma) and extra spec
 * (leading comma). */
static struct kp_entry *claim(const char *group, const char *kind, const char *meta,
                              const char *spec)
{
    char buf[4096];
    struct kp_entry *e = NULL;
    int n = snprintf(buf, sizeof(buf),
                     "{'apiVersion':'karpenter.sh/v1','kind':'NodeClaim','metadata':{'name':'nc',"
                     "'uid':'nc-uid','resourceVersion':'3','creationTimestamp':'" T0 "'%s},"
                     "'spec':{'nodeClassRef':{'group':'%s','kind':'%s','name':'c'},"
                     "'requirements':[]%s}}",
                     meta, group, kind, spec);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    for (char *q = buf; *q; q++)
        if (*q == '\'')
            *q = '"';
    assert_int_equal(kp_nodeclaim_decode(buf, (size_t)n, &e), 0);
    return e;
}

static struct kp_entry *ours(const char *meta, const char *spec)
{
    return claim(KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND, meta, spec);
}

static void test_plan(void **state)
{
    struct kp_fake_provider *f = NULL;
    struct kp_provider p;
    struct kp_expiration_plan plan;
    struct kp_entry *e;
    int64_t t = t0();

    (void)state;
    assert_int_equal(kp_fake_provider_new(&f), 0);
    p = kp_fake_provider_as_provider(f);

    e = ours("", ",'expireAfter':'1h'");
    plan = kp_expiration_plan(&p, kp_nodeclaim_view(e), t + 10 * 60 * SEC);
    assert_int_equal(plan.action, KP_EXPIRATION_WAIT);
    assert_int_equal(plan.requeue_usec, 50 * 60 * SEC);
    assert_int_equal(plan.expiry_usec, t + 3600 * SEC);
    /* One microsecond before: still waiting; at the instant: expired (now >= expiry). */
    plan = kp_expiration_plan(&p, kp_nodeclaim_view(e), t + 3600 * SEC - 1);
    assert_int_equal(plan.action, KP_EXPIRATION_WAIT);
    assert_int_equal(plan.requeue_usec, 1);
    plan = kp_expiration_plan(&p, kp_nodeclaim_view(e), t + 3600 * SEC);
    assert_int_equal(plan.action, KP_EXPIRATION_DELETE);
    plan = kp_expiration_plan(&p, kp_nodeclaim_view(e), t + 90 * 24 * 3600 * SEC);
    assert_int_equal(plan.action, KP_EXPIRATION_DELETE);
    kp_entry_unref(e);

    /* Never, absent, or already deleting: nothing to do, no requeue. */
    e = ours("", ",'expireAfter':'Never'");
    assert_int_equal(kp_expiration_plan(&p, kp_nodeclaim_view(e), t + 1000 * 3600 * SEC).action,
                     KP_EXPIRATION_NONE);
    kp_entry_unref(e);
    e = ours("", "");
    assert_int_equal(kp_expiration_plan(&p, kp_nodeclaim_view(e), t + 1000 * 3600 * SEC).action,
                     KP_EXPIRATION_NONE);
    kp_entry_unref(e);
    e = ours(",'deletionTimestamp':'" T0 "','finalizers':['karpenter.sh/termination']",
             ",'expireAfter':'1h'");
    assert_int_equal(kp_expiration_plan(&p, kp_nodeclaim_view(e), t + 2 * 3600 * SEC).action,
                     KP_EXPIRATION_NONE);
    kp_entry_unref(e);
    /* Another Karpenter's NodeClaim (SPEC 2.3). */
    e = claim("karpenter.k8s.aws", "EC2NodeClass", "", ",'expireAfter':'1h'");
    assert_int_equal(kp_expiration_plan(&p, kp_nodeclaim_view(e), t + 2 * 3600 * SEC).action,
                     KP_EXPIRATION_NONE);
    kp_entry_unref(e);
    /* Zero: expired at creation. */
    e = ours("", ",'expireAfter':'0s'");
    assert_int_equal(kp_expiration_plan(&p, kp_nodeclaim_view(e), t).action, KP_EXPIRATION_DELETE);
    kp_entry_unref(e);
    kp_fake_provider_free(f);
}

static void test_setup(void **state)
{
    struct kp_ssh_fx fx;
    struct kp_fake_provider *f = NULL;
    struct kp_provider p;
    struct kp_core_env env = {0};
    struct kp_expiration_controller *ctl = NULL;
    size_t before;

    (void)state;
    kp_ssh_fx_init(&fx);
    assert_int_equal(kp_fake_provider_new(&f), 0);
    p = kp_fake_provider_as_provider(f);
    env.client = fx.c;
    env.informers = fx.reg;
    assert_int_equal(kp_expiration_controller_new(&env, &ctl), -EINVAL); /* no provider */
    env.provider = &p;
    before = kp_ssh_fx_handlers(&fx);
    assert_int_equal(kp_expiration_controller_new(&env, &ctl), 0);
    assert_int_equal(kp_ssh_fx_handlers(&fx), before + 1);
    assert_false(kp_expiration_controller_ready(ctl));
    assert_null(kp_expiration_controller_free(ctl));
    assert_int_equal(kp_ssh_fx_handlers(&fx), before);
    kp_ssh_fx_done(&fx);
    kp_fake_provider_free(f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_setup),
    };

    return kp_test_main("expiration", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
