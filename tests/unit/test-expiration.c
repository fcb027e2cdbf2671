/* Tests for the NodeClaim expiration decision (core/expiration/): expired exactly at creation +
 * expireAfter, a requeue at the expiry before it, nothing for Never, no expireAfter, a deleting
 * NodeClaim or another provider's, and set-up / roll-back of the controller. Then the executor
 * (kp_expiration_reconcile) against a loopback API server that records every write
 * (kp-fake-api.h), over a store fed by hand and a fake clock: one DELETE with the uid
 * precondition, not repeated while the cache lags (a new incarnation is deleted on its own), the
 * requeue at the expiry, nothing for Never, and the server's refusals. Objects are decoded from
 * JSON written with ' for ". */
#include "kp-test.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "k8s/rfc3339.h"
#include "k8s/store.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/expiration/expiration.h"
#include "core/observe.h"
#include "core/provider.h"
#include "kp-fake-api.h"
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

/* --- the executor ------------------------------------------------------------------------------ */

#define NC_LINE "DELETE /apis/karpenter.sh/v1/nodeclaims/nc"
#define DELETING ",'deletionTimestamp':'" T0 "','finalizers':['karpenter.sh/termination']"

/* What the observer heard: karpenter_nodeclaims_disrupted_total with its last labels, and any
 * other family. */
static struct {
    unsigned disrupted, pods, other;
    char labels[128], pod_labels[128];
} M;

static void obs_count(void *ctx, enum kp_core_metric m, const char *const *labels)
{
    (void)ctx;
    if (m == KP_CM_PODS_DISRUPTION_INITIATED) {
        M.pods++;
        (void)snprintf(M.pod_labels, sizeof(M.pod_labels), "%s,%s,%s,%s,%s", labels[0], labels[1],
                       labels[2], labels[3], labels[4]);
        return;
    }
    if (m != KP_CM_NODECLAIMS_DISRUPTED) {
        M.other++;
        return;
    }
    M.disrupted++;
    (void)snprintf(M.labels, sizeof(M.labels), "%s,%s,%s,%s,%s", labels[0], labels[1], labels[2],
                   labels[3], labels[4]);
}

static const struct kp_core_observer OBS = {.count = obs_count};

static int64_t fake_now;
static uint64_t now_fn(void)
{
    return (uint64_t)fake_now;
}

struct fx {
    struct kp_fake_api *api;
    struct kp_client *c;
    struct kp_registry *reg;
    struct kp_fake_provider *fp;
    struct kp_provider prov;
    struct kp_core_env env;
    struct kp_expiration_controller *ctl;
    struct kp_store *claims, *pods;
    int log_fd;
};

/* The controller reads only its NodeClaim store (no sync to wait for): the informer never
 * starts, the test fills the store. */
static void fx_init(struct fx *f)
{
    struct kp_transport_opts to = {.allow_plain_http = true, .timeout_usec = 5 * SEC};
    struct kp_informer *inf = NULL;

    memset(f, 0, sizeof(*f));
    memset(&M, 0, sizeof(M));
    fake_now = t0();
    f->log_fd = kp_test_log_quiet();
    f->api = kp_fake_api_start();
    to.server = kp_fake_api_url(f->api);
    assert_int_equal(kp_client_new(&to, &f->c), 0);
    assert_int_equal(kp_registry_new(f->c, &f->reg), 0);
    assert_int_equal(kp_fake_provider_new(&f->fp), 0);
    f->prov = kp_fake_provider_as_provider(f->fp);
    f->env.client = f->c;
    f->env.informers = f->reg;
    f->env.provider = &f->prov;
    f->env.observer = &OBS;
    f->env.now_usec = now_fn;
    assert_int_equal(kp_expiration_controller_new(&f->env, &f->ctl), 0);
    assert_int_equal(kp_informers_nodeclaims(f->reg, &inf), 0);
    f->claims = kp_informer_store(inf);
    assert_int_equal(kp_informers_pods(f->reg, &inf), 0);
    f->pods = kp_informer_store(inf);
}

static void fx_done(struct fx *f)
{
    f->ctl = kp_expiration_controller_free(f->ctl);
    f->reg = kp_registry_free(f->reg);
    f->c = kp_client_free(f->c);
    f->api = kp_fake_api_stop(f->api);
    f->fp = kp_fake_provider_free(f->fp);
    kp_test_log_restore(f->log_fd);
}

/* NodeClaim nc of ours, incarnation uid, made at T0 in NodePool np with spec.expireAfter after
 * and extra metadata (leading comma, may be ""). */
static struct kp_entry *xclaim(const char *uid, const char *after, const char *meta)
{
    return kp_test_decode(kp_nodeclaim_decode, true,
                          "{'metadata':{'name':'nc','uid':'%s','resourceVersion':'3',"
                          "'creationTimestamp':'" T0 "','labels':{'karpenter.sh/nodepool':'np',"
                          "'karpenter.sh/capacity-type':'spot'}%s},"
                          "'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP "',"
                          "'kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[],"
                          "'expireAfter':'%s'}}",
                          uid, meta, after);
}

static void put(struct fx *f, struct kp_entry *e)
{
    assert_int_equal(kp_store_put(f->claims, e, NULL), 0);
}

/* One reconcile of key; the requeue it asked for in *requeue (0: none). */
static int run(struct fx *f, const char *key, uint64_t *requeue)
{
    *requeue = 0;
    kp_fake_api_reset(f->api);
    return kp_expiration_reconcile(f->ctl, f->c, /* cx= */ NULL, key, requeue);
}

/* The only request is the DELETE of nc with the precondition uid. */
static void expect_one_delete(struct fx *f, const char *uid)
{
    char want[128];

    assert_int_equal(kp_fake_api_count(f->api), 1);
    assert_string_equal(kp_fake_api_line(f->api, 0), NC_LINE);
    (void)snprintf(want, sizeof(want), "\"preconditions\":{\"uid\":\"%s\"}", uid);
    if (!strstr(kp_fake_api_body(f->api, 0), want))
        fail_msg("want %s in %s", want, kp_fake_api_body(f->api, 0));
}

/* Expired: deleted once and counted once, however often the key comes back before the cache
 * shows the deletion; another incarnation under the name is deleted on its own. */
static void test_exec_expired_once(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    put(&f, xclaim("u1", "1h", ""));
    fake_now = t0() + 3600 * SEC;
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(rq, 0);
    expect_one_delete(&f, "u1");
    assert_int_equal(M.disrupted, 1);
    assert_string_equal(M.labels, "expired,np,spot,,graceful");
    assert_int_equal(M.other, 0);

    /* The cache still shows it undeleted: remembered, nothing sent or counted again. */
    fake_now += SEC;
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(rq, 0);
    assert_int_equal(kp_fake_api_count(f.api), 0);
    assert_int_equal(M.disrupted, 1);

    /* The cache jumps to a new incarnation (recreated meanwhile, made at T0 in this test's world,
     * so expired too): the memory is per uid, so it is deleted and counted. */
    put(&f, xclaim("u2", "1h", ""));
    assert_int_equal(run(&f, "nc", &rq), 0);
    expect_one_delete(&f, "u2");
    assert_int_equal(M.disrupted, 2);

    /* Being deleted, then gone: nothing sent. */
    put(&f, xclaim("u2", "1h", DELETING));
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(kp_store_delete(f.claims, "nc", NULL), 0);
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(kp_fake_api_count(f.api), 0);
    assert_int_equal(M.disrupted, 2);
    /* Gone, it was forgotten (the memory does not keep every NodeClaim ever expired): the only
     * way to see that is the same uid coming back. */
    put(&f, xclaim("u2", "1h", ""));
    assert_int_equal(run(&f, "nc", &rq), 0);
    expect_one_delete(&f, "u2");
    fx_done(&f);
}

/* Before its expiry: requeued for that instant, nothing sent. Never, another provider's or a
 * NodeClaim not in the cache: nothing at all. */
/* A pod bound to node (running), owned by a DaemonSet when ds. */
static struct kp_entry *xpod(const char *name, const char *node, bool ds)
{
    return kp_test_decode(kp_pod_decode, true,
                          "{'metadata':{'name':'%s','namespace':'ns','uid':'pu-%s',"
                          "'resourceVersion':'1'%s},'spec':{'nodeName':'%s','containers':[{"
                          "'name':'c'}]},'status':{'phase':'Running'}}",
                          name, name,
                          ds ? ",'ownerReferences':[{'apiVersion':'apps/v1','kind':'DaemonSet',"
                               "'name':'d','uid':'du','controller':true}]"
                             : "",
                          node);
}

/* The expired NodeClaim's Node still runs its pods: the reschedulable ones (not the DaemonSet's,
 * not another Node's) are counted as disruptions initiated, with the NodeClaim's labels. */
static void test_exec_pods_counted(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    put(&f, kp_test_decode(kp_nodeclaim_decode, true,
                           "{'metadata':{'name':'nc','uid':'u1','resourceVersion':'3',"
                           "'creationTimestamp':'" T0 "','labels':{'karpenter.sh/nodepool':'np',"
                           "'karpenter.sh/capacity-type':'spot'}},"
                           "'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP "',"
                           "'kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[],"
                           "'expireAfter':'1h'},'status':{'nodeName':'n1'}}"));
    assert_int_equal(kp_store_put(f.pods, xpod("a", "n1", false), NULL), 0);
    assert_int_equal(kp_store_put(f.pods, xpod("b", "n1", false), NULL), 0);
    assert_int_equal(kp_store_put(f.pods, xpod("agent", "n1", true), NULL), 0);
    assert_int_equal(kp_store_put(f.pods, xpod("elsewhere", "n2", false), NULL), 0);
    fake_now = t0() + 3600 * SEC;
    assert_int_equal(run(&f, "nc", &rq), 0);
    expect_one_delete(&f, "u1");
    assert_int_equal(M.disrupted, 1);
    assert_int_equal(M.pods, 2);
    assert_string_equal(M.pod_labels, "expired,np,spot,,graceful");
    fx_done(&f);
}

static void test_exec_wait_and_never(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    put(&f, xclaim("u1", "1h", ""));
    fake_now = t0() + 10 * 60 * SEC;
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(rq, 50 * 60 * SEC);
    fake_now = t0() + 3600 * SEC - 1;
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(rq, 1);
    assert_int_equal(kp_fake_api_count(f.api), 0);

    put(&f, xclaim("u1", "Never", ""));
    fake_now = t0() + 1000 * 3600 * SEC;
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(rq, 0);
    put(&f, claim("karpenter.k8s.aws", "EC2NodeClass", "", ",'expireAfter':'1h'"));
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(rq, 0);
    assert_int_equal(run(&f, "other", &rq), 0);
    assert_int_equal(rq, 0);
    assert_int_equal(kp_fake_api_count(f.api), 0);
    assert_int_equal(M.disrupted, 0);
    fx_done(&f);
}

/* The server's refusals. Already gone (404): done, nothing counted. Another incarnation (409):
 * the conflict comes back for a quick retry, nothing counted or remembered. Another failure:
 * its error, for the backoff. The next accepted delete counts once. */
static void test_exec_delete_answers(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    put(&f, xclaim("u1", "1h", ""));
    fake_now = t0() + 2 * 3600 * SEC;
    kp_fake_api_answer(f.api, NC_LINE, 404, NULL);
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(rq, 0);
    expect_one_delete(&f, "u1");
    assert_int_equal(M.disrupted, 0);

    kp_fake_api_answer(f.api, NC_LINE, 409, NULL);
    assert_int_equal(run(&f, "nc", &rq), -KP_ECONFLICT);
    expect_one_delete(&f, "u1");
    assert_int_equal(M.disrupted, 0);

    kp_fake_api_answer(f.api, NC_LINE, 500, NULL);
    assert_int_equal(run(&f, "nc", &rq), -KP_ESERVER);
    expect_one_delete(&f, "u1");
    assert_int_equal(M.disrupted, 0);

    kp_fake_api_answer(f.api, NC_LINE, 200, "{}");
    assert_int_equal(run(&f, "nc", &rq), 0);
    expect_one_delete(&f, "u1");
    assert_int_equal(M.disrupted, 1);
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(kp_fake_api_count(f.api), 0);
    assert_int_equal(M.disrupted, 1);
    fx_done(&f);
}

/* kp_expiration_replace_wait: the rest of the 15 min grace past the expiry when the disruption
 * loop replaces and pods need a place; 0 otherwise. */
static void test_replace_wait(void **state)
{
    static const int64_t X = 1000 * SEC, G = (int64_t)KP_EXPIRATION_REPLACE_GRACE_USEC;
    static const struct {
        const char *name;
        enum kp_expiration_action action;
        int64_t now;
        bool replaces;
        uint32_t pods;
        uint64_t want;
    } rows[] = {
        {"expired at once, pods, replaces: the whole grace", KP_EXPIRATION_DELETE, X, true, 2,
         (uint64_t)G},
        {"a minute in: the rest", KP_EXPIRATION_DELETE, X + 60 * SEC, true, 1,
         (uint64_t)(G - 60 * SEC)},
        {"just before the end: 1 usec", KP_EXPIRATION_DELETE, X + G - 1, true, 1, 1},
        {"the grace over: delete", KP_EXPIRATION_DELETE, X + G, true, 1, 0},
        {"no pod to place: delete", KP_EXPIRATION_DELETE, X, true, 0, 0},
        {"no disruption loop: delete", KP_EXPIRATION_DELETE, X, false, 3, 0},
        {"not expired: no wait of this kind", KP_EXPIRATION_WAIT, X - SEC, true, 3, 0},
        {"not ours: none", KP_EXPIRATION_NONE, X, true, 3, 0},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        struct kp_expiration_plan plan = {.action = rows[i].action, .expiry_usec = X};
        uint64_t w = kp_expiration_replace_wait(&plan, rows[i].now, rows[i].replaces, rows[i].pods);

        if (w != rows[i].want)
            fail_msg("%s: %llu, want %llu", rows[i].name, (unsigned long long)w,
                     (unsigned long long)rows[i].want);
    }
    /* An expiry at the end of time: no grace overflows into the past. */
    {
        struct kp_expiration_plan plan = {.action = KP_EXPIRATION_DELETE, .expiry_usec = INT64_MAX};

        assert_int_equal(kp_expiration_replace_wait(&plan, INT64_MAX, true, 1), 0);
    }
}

/* NodeClaim nc (incarnation uid) of NodePool np made at T0, expiring after 1h, on Node n1. */
static struct kp_entry *xclaim_on_n1(const char *uid)
{
    return kp_test_decode(kp_nodeclaim_decode, true,
                          "{'metadata':{'name':'nc','uid':'%s','resourceVersion':'3',"
                          "'creationTimestamp':'" T0 "','labels':{'karpenter.sh/nodepool':'np'}},"
                          "'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP "',"
                          "'kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[],"
                          "'expireAfter':'1h'},'status':{'nodeName':'n1'}}",
                          uid);
}

/* With the disruption loop beside it: an expired NodeClaim whose Node runs a reschedulable pod
 * is not deleted but requeued at the end of the grace (the loop replaces it first); a DaemonSet
 * pod alone needs no place, so that one goes at once; at the end of the grace the delete comes
 * whatever the pods. */
static void test_exec_replaces_first(void **state)
{
    struct fx f;
    uint64_t rq;
    const int64_t expiry = t0() + 3600 * SEC;

    (void)state;
    fx_init(&f);
    f.env.expiry_replaces = true;
    put(&f, xclaim_on_n1("u1"));
    assert_int_equal(kp_store_put(f.pods, xpod("agent", "n1", true), NULL), 0);
    assert_int_equal(kp_store_put(f.pods, xpod("a", "n1", false), NULL), 0);
    fake_now = expiry + 60 * SEC;
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(rq, KP_EXPIRATION_REPLACE_GRACE_USEC - 60 * SEC);
    assert_int_equal(kp_fake_api_count(f.api), 0);
    assert_int_equal(M.disrupted, 0);

    /* The grace is over and the loop has not deleted it: the delete, counted with its pod. */
    fake_now = expiry + (int64_t)KP_EXPIRATION_REPLACE_GRACE_USEC;
    assert_int_equal(run(&f, "nc", &rq), 0);
    assert_int_equal(rq, 0);
    expect_one_delete(&f, "u1");
    assert_int_equal(M.disrupted, 1);
    assert_int_equal(M.pods, 1);

    /* Only the DaemonSet pod left on a new incarnation: nothing to place, deleted at once. */
    assert_int_equal(kp_store_delete(f.pods, "ns/a", NULL), 0);
    put(&f, xclaim_on_n1("u2"));
    assert_int_equal(run(&f, "nc", &rq), 0);
    expect_one_delete(&f, "u2");
    fx_done(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_setup),
        cmocka_unit_test(test_exec_expired_once),
        cmocka_unit_test(test_exec_pods_counted),
        cmocka_unit_test(test_exec_wait_and_never),
        cmocka_unit_test(test_exec_delete_answers),
        cmocka_unit_test(test_replace_wait),
        cmocka_unit_test(test_exec_replaces_first),
    };

    return kp_test_main("expiration", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
