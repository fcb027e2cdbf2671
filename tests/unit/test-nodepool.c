/* Tests for the NodePool controller's decisions (core/nodepool/): the template hash and its
 * inclusion rules (reordered taints hash the same; requirements, weight, limits, disruption and
 * replicas never change it), the hash-version plan for NodeClaims, the registration-health
 * buffer and its condition rules, the usage counter (capacity sources, what does not count),
 * the conditions (validation, node class readiness, Ready, UnsupportedFields), the status
 * patch, the fake provider's node_class_status, and set-up / roll-back of the controller on the
 * shared informers. Objects are decoded from JSON written with ' for " (readability). */
#include "kp-test.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "json/json.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "k8s/rfc3339.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "core/conds.h"
#include "core/core.h"
#include "core/nodepool/hash.h"
#include "core/nodepool/health.h"
#include "core/nodepool/nodepool.h"
#include "core/provider.h"
#include "kp-fake-provider.h"
#include "kp-ssh-fx.h"

#define GI (1024LL * 1024 * 1024 * 1000) /* one GiB in milli-bytes */
#define SEC 1000000LL
#define T0 "2026-01-01T00:00:00Z"

static int64_t t0(void)
{
    int64_t v = 0;

    assert_int_equal(kp_rfc3339_parse(T0, strlen(T0), &v), 0);
    return v;
}

/* Test objects decode from JSON written with ' for " (tests/lib/kp-test.h). */
#define decode(fn, ...) kp_test_decode(fn, true, __VA_ARGS__)

#define REQS "'requirements':[{'key':'kubernetes.io/arch','operator':'In','values':['amd64']}]"
#define REF                                                                                        \
    "'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP "','kind':'" KP_FAKE_NODECLASS_KIND        \
    "','name':'c'}"

/* A NodePool "np": own annotations, template metadata, template spec after nodeClassRef (with
 * its leading comma, requirements included), spec after the template, status. */
static struct kp_entry *pool(const char *ann, const char *tmeta, const char *tspec,
                             const char *spec, const char *status)
{
    return decode(kp_nodepool_decode,
                  "{'apiVersion':'karpenter.sh/v1','kind':'NodePool','metadata':{'name':'np',"
                  "'uid':'np-uid','resourceVersion':'7','generation':2,'creationTimestamp':'" T0
                  "','annotations':{%s}},'spec':{'template':{'metadata':{%s},'spec':{" REF
                  "%s}}%s},'status':{%s}}",
                  ann, tmeta, tspec, spec, status);
}

static struct kp_entry *pool_t(const char *tspec)
{
    return pool("", "", tspec, "", "");
}

static void hash_of(struct kp_entry *e, char out[KP_NODEPOOL_HASH_MAX])
{
    kp_nodepool_hash(kp_nodepool_view(e), out);
    kp_entry_unref(e);
}

static void assert_same(struct kp_entry *a, struct kp_entry *b)
{
    char x[KP_NODEPOOL_HASH_MAX], y[KP_NODEPOOL_HASH_MAX];

    hash_of(a, x);
    hash_of(b, y);
    assert_string_equal(x, y);
}

static void assert_differ(struct kp_entry *a, struct kp_entry *b)
{
    char x[KP_NODEPOOL_HASH_MAX], y[KP_NODEPOOL_HASH_MAX];

    hash_of(a, x);
    hash_of(b, y);
    assert_string_not_equal(x, y);
}

#define T_A "{'key':'a','value':'1','effect':'NoSchedule'}"
#define T_B "{'key':'b','effect':'NoExecute'}"

static void test_hash_sets(void **state)
{
    char h[KP_NODEPOOL_HASH_MAX];

    (void)state;
    /* Reordered taints, startup taints and labels hash the same. */
    assert_same(pool_t("," REQS ",'taints':[" T_A "," T_B "]"),
                pool_t("," REQS ",'taints':[" T_B "," T_A "]"));
    assert_same(pool_t("," REQS ",'startupTaints':[" T_A "," T_B "]"),
                pool_t("," REQS ",'startupTaints':[" T_B "," T_A "]"));
    assert_same(pool("", "'labels':{'x':'1','y':'2'}", "," REQS, "", ""),
                pool("", "'labels':{'y':'2','x':'1'}", "," REQS, "", ""));
    /* An empty list is the zero value: the same as none. */
    assert_same(pool_t("," REQS ",'taints':[]"), pool_t("," REQS));
    /* The same taint as a taint or as a startup taint, the same pair as a label or an
     * annotation: different fields, different hashes. */
    assert_differ(pool_t("," REQS ",'taints':[" T_A "]"),
                  pool_t("," REQS ",'startupTaints':[" T_A "]"));
    assert_differ(pool("", "'labels':{'x':'1'}", "," REQS, "", ""),
                  pool("", "'annotations':{'x':'1'}", "," REQS, "", ""));
    /* Decimal text, as Karpenter writes it. */
    hash_of(pool_t("," REQS), h);
    assert_true(strlen(h) > 0 && strspn(h, "0123456789") == strlen(h));
}

static void test_hash_excluded(void **state)
{
    (void)state;
    /* Requirements never drift a node. */
    assert_same(pool_t("," REQS),
                pool_t(",'requirements':[{'key':'kubernetes.io/arch','operator':'In',"
                       "'values':['arm64','amd64']},{'key':'karpenter.sh/capacity-type',"
                       "'operator':'In','values':['on-demand']}]"));
    /* Nor do the behavioural fields outside the template. */
    assert_same(pool_t("," REQS),
                pool("", "", "," REQS,
                     ",'weight':50,'limits':{'cpu':'100'},'disruption':{'consolidateAfter':"
                     "'30s','consolidationPolicy':'WhenEmpty','budgets':[{'nodes':'1'}]}",
                     ""));
    assert_same(pool_t("," REQS), pool("", "", "," REQS, ",'replicas':3", ""));
    /* Nor the NodePool's own status or annotations. */
    assert_same(pool_t("," REQS),
                pool("'karpenter.sh/nodepool-hash':'1'", "", "," REQS, "", "'nodes':3"));
    /* Durations by value, not by text. */
    assert_same(pool_t("," REQS ",'expireAfter':'1h'"), pool_t("," REQS ",'expireAfter':'60m'"));
    /* Never is nil: no expiry, the zero value. */
    assert_same(pool_t("," REQS ",'expireAfter':'Never'"), pool_t("," REQS));
}

static void test_hash_included(void **state)
{
    (void)state;
    assert_differ(pool_t("," REQS ",'taints':[" T_A "]"),
                  pool_t("," REQS ",'taints':[{'key':'a','value':'2','effect':'NoSchedule'}]"));
    assert_differ(pool_t("," REQS ",'taints':[" T_A "]"),
                  pool_t("," REQS ",'taints':[{'key':'a','value':'1','effect':'NoExecute'}]"));
    assert_differ(pool_t("," REQS ",'startupTaints':[" T_A "]"), pool_t("," REQS));
    assert_differ(pool("", "'labels':{'x':'1'}", "," REQS, "", ""),
                  pool("", "'labels':{'x':'2'}", "," REQS, "", ""));
    assert_differ(pool("", "'annotations':{'x':'1'}", "," REQS, "", ""), pool_t("," REQS));
    assert_differ(pool_t("," REQS ",'expireAfter':'1h'"), pool_t("," REQS ",'expireAfter':'2h'"));
    assert_differ(pool_t("," REQS ",'expireAfter':'0s'"), pool_t("," REQS));
    assert_differ(pool_t("," REQS ",'terminationGracePeriod':'1h'"), pool_t("," REQS));
    assert_differ(
        pool_t("," REQS),
        decode(kp_nodepool_decode,
               "{'metadata':{'name':'np','uid':'u','resourceVersion':'1'},"
               "'spec':{'template':{'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
               "','kind':'" KP_FAKE_NODECLASS_KIND "','name':'other'}," REQS "}}}}"));
}

static void test_hash_stale(void **state)
{
    char h[KP_NODEPOOL_HASH_MAX], ann[128];
    struct kp_entry *e;

    (void)state;
    hash_of(pool_t("," REQS), h);
    e = pool_t("," REQS);
    assert_true(kp_nodepool_hash_stale(kp_nodepool_view(e), h));
    kp_entry_unref(e);
    (void)snprintf(
        ann, sizeof(ann),
        "'karpenter.sh/nodepool-hash':'%s','karpenter.sh/nodepool-hash-version':'" KP_NODEPOOL_HASH_VERSION
        "'",
        h);
    e = pool(ann, "", "," REQS, "", "");
    assert_false(kp_nodepool_hash_stale(kp_nodepool_view(e), h));
    kp_entry_unref(e);
    (void)snprintf(ann, sizeof(ann),
                   "'karpenter.sh/nodepool-hash':'%s','karpenter.sh/nodepool-hash-version':'v2'",
                   h);
    e = pool(ann, "", "," REQS, "", "");
    assert_true(kp_nodepool_hash_stale(kp_nodepool_view(e), h));
    kp_entry_unref(e);
}

/* A NodeClaim "nc" of pool np: metadata after labels (leading comma), spec after nodeClassRef
 * (leading comma), status. */
static struct kp_entry *claim(const char *meta, const char *spec, const char *status)
{
    return decode(kp_nodeclaim_decode,
                  "{'apiVersion':'karpenter.sh/v1','kind':'NodeClaim','metadata':{'name':'nc',"
                  "'uid':'nc-uid','resourceVersion':'3','generation':1,'creationTimestamp':'" T0
                  "','labels':{'karpenter.sh/nodepool':'np'},'ownerReferences':[{'apiVersion':"
                  "'karpenter.sh/v1','kind':'NodePool','name':'np','uid':'np-uid'}]%s},"
                  "'spec':{" REF "," REQS "%s},'status':{%s}}",
                  meta, spec, status);
}

static void test_nodeclaim_hash_plan(void **state)
{
    struct kp_entry *e;
    struct kp_nodeclaim_hash_plan p;

    (void)state;
    e = claim(",'annotations':{'karpenter.sh/nodepool-hash-version':'" KP_NODEPOOL_HASH_VERSION
              "','karpenter.sh/nodepool-hash':'1'}",
              "", "");
    p = kp_nodeclaim_hash_plan(kp_nodeclaim_view(e));
    assert_false(p.write);
    kp_entry_unref(e);
    e = claim(",'annotations':{'karpenter.sh/nodepool-hash-version':'v2'}", "", "");
    p = kp_nodeclaim_hash_plan(kp_nodeclaim_view(e));
    assert_true(p.write);
    assert_true(p.set_hash);
    kp_entry_unref(e);
    /* Drifted stays drifted: the version moves, the old hash stays. */
    e = claim("", "",
              "'conditions':[{'type':'Drifted','status':'True','reason':'NodePoolDrifted',"
              "'message':'','lastTransitionTime':'" T0 "'}]");
    p = kp_nodeclaim_hash_plan(kp_nodeclaim_view(e));
    assert_true(p.write);
    assert_false(p.set_hash);
    kp_entry_unref(e);
}

/* --- registration health ------------------------------------------------------------------- */

static void test_health_tracker(void **state)
{
    struct kp_np_health_tracker t = {0};

    (void)state;
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_UNKNOWN);
    kp_np_health_insert(&t, false);
    /* One failure is 1/4 of the buffer: below the half that makes it unhealthy. */
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_HEALTHY);
    kp_np_health_insert(&t, false);
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_UNHEALTHY);
    kp_np_health_insert(&t, true);
    kp_np_health_insert(&t, true);
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_UNHEALTHY);
    /* The fifth outcome pushes out the first failure. */
    kp_np_health_insert(&t, true);
    assert_int_equal(t.n, KP_NP_HEALTH_BUFFER);
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_HEALTHY);
    kp_np_health_seed(&t, KP_NP_HEALTH_UNHEALTHY);
    assert_int_equal(t.n, 2);
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_UNHEALTHY);
    kp_np_health_seed(&t, KP_NP_HEALTH_HEALTHY);
    assert_int_equal(t.n, 1);
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_HEALTHY);
    kp_np_health_seed(&t, KP_NP_HEALTH_UNKNOWN);
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_UNKNOWN);
}

#define COND(type, st, reason, at)                                                                 \
    "{'type':'" type "','status':'" st "','reason':'" reason "','message':'m " type "',"           \
    "'lastTransitionTime':'" at "'}"

static void test_registration_outcome(void **state)
{
    struct kp_core_timing tm = {0};
    struct kp_entry *launched, *registered, *del_early, *del_launch, *del_reg, *del_reg_early;
    const char *reason = NULL, *message = NULL;

    (void)state;
    kp_core_timing_defaults(&tm);
    launched = claim(
        "", "",
        "'providerID':'fake://1','conditions':[" COND("Launched", "True", "Launched", T0) "," COND(
            "Registered", "Unknown", "NodeNotFound", T0) "]");
    registered = claim(
        "", "",
        "'providerID':'fake://1','conditions':[" COND("Launched", "True", "Launched", T0) "," COND(
            "Registered", "True", "Registered", "2026-01-01T00:01:00Z") "]");
    /* Deleted 1 min after launch failed: before the 5 min launch timeout. */
    del_early = claim(",'deletionTimestamp':'2026-01-01T00:01:00Z','finalizers':['x']", "",
                      "'conditions':[" COND("Launched", "False", "JoinFailed", T0) "]");
    del_launch = claim(",'deletionTimestamp':'2026-01-01T00:06:00Z','finalizers':['x']", "",
                       "'conditions':[" COND("Launched", "False", "JoinFailed", T0) "]");
    del_reg = claim(
        ",'deletionTimestamp':'2026-01-01T00:16:00Z','finalizers':['x']", "",
        "'providerID':'fake://1','conditions':[" COND("Launched", "True", "Launched", T0) "," COND(
            "Registered", "Unknown", "NodeNotFound", T0) "]");
    del_reg_early = claim(
        ",'deletionTimestamp':'2026-01-01T00:10:00Z','finalizers':['x']", "",
        "'providerID':'fake://1','conditions':[" COND("Launched", "True", "Launched", T0) "," COND(
            "Registered", "Unknown", "NodeNotFound", T0) "]");

#define OUT(a, b) kp_nodeclaim_registration_outcome(a, kp_nodeclaim_view(b), &tm, &reason, &message)
    /* First sight is no moment of decision (a restart lists everything). */
    assert_int_equal(OUT(NULL, registered), KP_NP_OUTCOME_NONE);
    assert_int_equal(OUT(kp_nodeclaim_view(launched), registered), KP_NP_OUTCOME_SUCCESS);
    assert_int_equal(OUT(kp_nodeclaim_view(registered), registered), KP_NP_OUTCOME_NONE);
    assert_int_equal(OUT(kp_nodeclaim_view(launched), del_early), KP_NP_OUTCOME_NONE);
    assert_int_equal(OUT(kp_nodeclaim_view(launched), del_launch), KP_NP_OUTCOME_FAILURE);
    assert_string_equal(reason, "JoinFailed");
    assert_string_equal(message, "m Launched");
    assert_int_equal(OUT(kp_nodeclaim_view(launched), del_reg_early), KP_NP_OUTCOME_NONE);
    assert_int_equal(OUT(kp_nodeclaim_view(launched), del_reg), KP_NP_OUTCOME_FAILURE);
    assert_string_equal(reason, KP_NP_REASON_REGISTRATION_FAILED);
    assert_string_equal(message, "Failed to register node");
    /* Already deleting before: counted once, at the start of the deletion. */
    assert_int_equal(OUT(kp_nodeclaim_view(del_reg), del_reg), KP_NP_OUTCOME_NONE);
#undef OUT
    kp_entry_unref(launched);
    kp_entry_unref(registered);
    kp_entry_unref(del_early);
    kp_entry_unref(del_launch);
    kp_entry_unref(del_reg);
    kp_entry_unref(del_reg_early);
}

static void condset_of(struct kp_condset *cs, struct kp_entry *e)
{
    const struct kp_nodepool_view *np = kp_nodepool_view(e);

    assert_int_equal(kp_condset_init(cs, &np->conditions, np->generation, t0() + 3600 * SEC), 0);
}

static void assert_cond(const struct kp_condset *cs, const char *type, enum kp_cond_status st,
                        const char *reason)
{
    const struct kp_condset_item *it = kp_condset_get(cs, type);

    if (!it)
        fail_msg("no condition %s", type);
    assert_int_equal(it->status, st);
    if (reason)
        assert_string_equal(it->reason, reason);
}

static void test_health_rules(void **state)
{
    struct kp_np_health_tracker t = {0};
    struct kp_condset cs;
    struct kp_entry *e;

    (void)state;
    /* No condition yet: Unknown, buffer empty. */
    e = pool("", "", "," REQS, "", "'nodeClassObservedGeneration':5");
    condset_of(&cs, e);
    assert_int_equal(kp_np_health_sync(&t, &cs, kp_nodepool_view(e), 5), 0);
    assert_cond(&cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_UNKNOWN, NULL);
    /* One failure: the buffer is still healthy, the condition stays. */
    assert_int_equal(kp_np_health_apply(&t, &cs, false, "JoinFailed", "boom"), 0);
    assert_cond(&cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_UNKNOWN, NULL);
    assert_int_equal(kp_np_health_apply(&t, &cs, false, "JoinFailed", "boom"), 0);
    assert_cond(&cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_FALSE, "JoinFailed");
    assert_string_equal(kp_condset_get(&cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY)->message, "boom");
    /* Successes while half the buffer failed keep it False. */
    assert_int_equal(kp_np_health_apply(&t, &cs, true, NULL, NULL), 0);
    assert_int_equal(kp_np_health_apply(&t, &cs, true, NULL, NULL), 0);
    assert_cond(&cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_FALSE, NULL);
    assert_int_equal(kp_np_health_apply(&t, &cs, true, NULL, NULL), 0);
    assert_cond(&cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_TRUE,
                KP_NP_COND_NODE_REGISTRATION_HEALTHY);
    kp_condset_done(&cs);
    kp_entry_unref(e);

    /* After a restart, a False condition seeds an unhealthy buffer: one success is not enough. */
    t = (struct kp_np_health_tracker){0};
    e = pool("", "", "," REQS, "",
             "'nodeClassObservedGeneration':5,'conditions':[{'type':'NodeRegistrationHealthy',"
             "'status':'False','reason':'JoinFailed','message':'x','observedGeneration':2,"
             "'lastTransitionTime':'" T0 "'}]");
    condset_of(&cs, e);
    assert_int_equal(kp_np_health_sync(&t, &cs, kp_nodepool_view(e), 5), 0);
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_UNHEALTHY);
    assert_false(kp_condset_changed(&cs));
    assert_int_equal(kp_np_health_apply(&t, &cs, true, NULL, NULL), 0);
    assert_cond(&cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_FALSE, NULL);
    kp_condset_done(&cs);
    /* A node class generation change resets it to Unknown. */
    condset_of(&cs, e);
    assert_int_equal(kp_np_health_sync(&t, &cs, kp_nodepool_view(e), 6), 0);
    assert_cond(&cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_UNKNOWN, NULL);
    assert_int_equal(kp_np_health_status(&t), KP_NP_HEALTH_UNKNOWN);
    kp_condset_done(&cs);
    kp_entry_unref(e);

    /* So does a NodePool generation change (the condition was observed at generation 1). */
    t = (struct kp_np_health_tracker){0};
    e = pool("", "", "," REQS, "",
             "'nodeClassObservedGeneration':5,'conditions':[{'type':'NodeRegistrationHealthy',"
             "'status':'True','reason':'NodeRegistrationHealthy','message':'',"
             "'observedGeneration':1,'lastTransitionTime':'" T0 "'}]");
    condset_of(&cs, e);
    assert_int_equal(kp_np_health_sync(&t, &cs, kp_nodepool_view(e), 5), 0);
    assert_cond(&cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_UNKNOWN, NULL);
    kp_condset_done(&cs);
    kp_entry_unref(e);
}

/* --- usage ------------------------------------------------------------------------------------ */

static struct kp_entry *node(const char *labels, const char *capacity)
{
    return decode(kp_node_decode,
                  "{'apiVersion':'v1','kind':'Node','metadata':{'name':'n','uid':'n-uid',"
                  "'resourceVersion':'1','creationTimestamp':'" T0 "','labels':{%s}},"
                  "'spec':{'providerID':'fake://1'},'status':{'capacity':{%s}}}",
                  labels, capacity);
}

static void test_usage(void **state)
{
    struct kp_np_usage u;
    struct kp_entry *unlaunched, *launched, *deleting, *terminating, *n_init, *n_raw;

    (void)state;
    unlaunched = claim("", "", "'capacity':{'cpu':'4','memory':'8Gi'}");
    launched = claim("", "",
                     "'providerID':'fake://1','capacity':{'cpu':'4','memory':'8Gi',"
                     "'pods':'110'}");
    deleting = claim(",'deletionTimestamp':'" T0 "','finalizers':['x']", "",
                     "'providerID':'fake://1','capacity':{'cpu':'4'}");
    terminating = claim("", "",
                        "'providerID':'fake://1','capacity':{'cpu':'4'},'conditions':[" COND(
                            "InstanceTerminating", "True", "InstanceTerminating", T0) "]");
    n_init = node("'karpenter.sh/initialized':'true'", "'cpu':'2','memory':'4Gi'");
    n_raw = node("", "'cpu':'0','memory':'4Gi','example.com/gpu':'1'");

    kp_nodepool_usage_init(&u);
    /* The base resources are always listed, at 0. */
    assert_int_equal(u.n, 5);
    assert_int_equal(kp_nodepool_usage_get(&u, "ephemeral-storage"), 0);
    /* Not launched, deleting, or its instance terminating: nothing. */
    kp_nodepool_usage_add(&u, kp_nodeclaim_view(unlaunched), NULL);
    kp_nodepool_usage_add(&u, kp_nodeclaim_view(deleting), NULL);
    kp_nodepool_usage_add(&u, kp_nodeclaim_view(terminating), NULL);
    assert_int_equal(kp_nodepool_usage_get(&u, "nodes"), 0);
    assert_int_equal(kp_nodepool_usage_get(&u, "cpu"), 0);
    /* Launched, no Node: the NodeClaim's capacity, and one node. */
    kp_nodepool_usage_add(&u, kp_nodeclaim_view(launched), NULL);
    assert_int_equal(kp_nodepool_usage_get(&u, "nodes"), 1000);
    assert_int_equal(kp_nodepool_usage_get(&u, "cpu"), 4000);
    assert_int_equal(kp_nodepool_usage_get(&u, "memory"), 8 * GI);
    assert_int_equal(kp_nodepool_usage_get(&u, "pods"), 110000);
    /* An initialized Node: its capacity alone (capacity, not allocatable, as Karpenter's). */
    kp_nodepool_usage_init(&u);
    kp_nodepool_usage_add(&u, kp_nodeclaim_view(launched), kp_node_view(n_init));
    assert_int_equal(kp_nodepool_usage_get(&u, "cpu"), 2000);
    assert_int_equal(kp_nodepool_usage_get(&u, "memory"), 4 * GI);
    assert_int_equal(kp_nodepool_usage_get(&u, "pods"), 0);
    /* A Node not yet initialized: its amounts, the NodeClaim's where the Node has zero or none. */
    kp_nodepool_usage_init(&u);
    kp_nodepool_usage_add(&u, kp_nodeclaim_view(launched), kp_node_view(n_raw));
    assert_int_equal(kp_nodepool_usage_get(&u, "cpu"), 4000);
    assert_int_equal(kp_nodepool_usage_get(&u, "memory"), 4 * GI);
    assert_int_equal(kp_nodepool_usage_get(&u, "pods"), 110000);
    assert_int_equal(kp_nodepool_usage_get(&u, "example.com/gpu"), 1000);
    /* Two of them add up. */
    kp_nodepool_usage_add(&u, kp_nodeclaim_view(launched), NULL);
    assert_int_equal(kp_nodepool_usage_get(&u, "nodes"), 2000);
    assert_int_equal(kp_nodepool_usage_get(&u, "cpu"), 8000);

    kp_entry_unref(unlaunched);
    kp_entry_unref(launched);
    kp_entry_unref(deleting);
    kp_entry_unref(terminating);
    kp_entry_unref(n_init);
    kp_entry_unref(n_raw);
}

/* --- conditions and the status patch ----------------------------------------------------------- */

static void test_conditions(void **state)
{
    struct kp_node_class_status ready = {.found = true, .generation = 1, .ready = KP_COND_TRUE};
    char reason[] = "NoHosts", message[] = "no hosts";
    struct kp_node_class_status not_ready = {
        .found = true, .ready = KP_COND_FALSE, .reason = reason, .message = message};
    struct kp_node_class_status gone = {.found = false};
    struct kp_node_class_status deleting = {.found = true, .deleting = true, .ready = KP_COND_TRUE};
    struct kp_node_class_status unknown = {.found = true, .ready = KP_COND_UNKNOWN};
    struct kp_entry *ok = pool_t("," REQS);
    struct kp_entry *bad = pool("", "'labels':{'karpenter.sh/custom':'x'}", "," REQS, "", "");
    struct kp_entry *stat = pool("", "", "," REQS, ",'replicas':2", "");
    struct kp_entry *bal =
        pool("", "", "," REQS, ",'disruption':{'consolidationPolicy':'Balanced'}", "");
    struct kp_condset cs;

    (void)state;
    condset_of(&cs, ok);
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(ok), &ready), 0);
    assert_cond(&cs, KP_NP_COND_VALIDATION_SUCCEEDED, KP_COND_TRUE,
                KP_NP_COND_VALIDATION_SUCCEEDED);
    assert_cond(&cs, KP_NP_COND_NODE_CLASS_READY, KP_COND_TRUE, KP_NP_COND_NODE_CLASS_READY);
    assert_cond(&cs, KP_NP_COND_READY, KP_COND_TRUE, NULL);
    assert_null(kp_condset_get(&cs, KP_NP_COND_UNSUPPORTED_FIELDS));
    /* The class's own reason and message when it is not Ready. */
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(ok), &not_ready), 0);
    assert_cond(&cs, KP_NP_COND_NODE_CLASS_READY, KP_COND_FALSE, "NoHosts");
    assert_string_equal(kp_condset_get(&cs, KP_NP_COND_NODE_CLASS_READY)->message, "no hosts");
    assert_cond(&cs, KP_NP_COND_READY, KP_COND_FALSE, "NoHosts");
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(ok), &gone), 0);
    assert_cond(&cs, KP_NP_COND_NODE_CLASS_READY, KP_COND_FALSE, KP_NP_REASON_NODECLASS_NOT_FOUND);
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(ok), &deleting), 0);
    assert_cond(&cs, KP_NP_COND_NODE_CLASS_READY, KP_COND_FALSE,
                KP_NP_REASON_NODECLASS_TERMINATING);
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(ok), &unknown), 0);
    assert_cond(&cs, KP_NP_COND_NODE_CLASS_READY, KP_COND_FALSE,
                KP_NP_REASON_NODECLASS_READINESS_UNKNOWN);
    /* A provider that cannot tell: readiness unknown, never assumed. */
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(ok), NULL), 0);
    assert_cond(&cs, KP_NP_COND_NODE_CLASS_READY, KP_COND_FALSE,
                KP_NP_REASON_NODECLASS_READINESS_UNKNOWN);
    kp_condset_done(&cs);

    /* Validation failure: its report is the message, and Ready follows. */
    condset_of(&cs, bad);
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(bad), &ready), 0);
    assert_cond(&cs, KP_NP_COND_VALIDATION_SUCCEEDED, KP_COND_FALSE,
                KP_NP_REASON_VALIDATION_FAILED);
    assert_non_null(strstr(kp_condset_get(&cs, KP_NP_COND_VALIDATION_SUCCEEDED)->message,
                           "karpenter.sh/custom"));
    assert_cond(&cs, KP_NP_COND_READY, KP_COND_FALSE, KP_NP_REASON_VALIDATION_FAILED);
    kp_condset_done(&cs);

    /* A static pool: reported, Ready left to its upstream dependents; gone once replicas is. */
    condset_of(&cs, stat);
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(stat), &ready), 0);
    assert_cond(&cs, KP_NP_COND_UNSUPPORTED_FIELDS, KP_COND_TRUE, KP_NP_REASON_STATIC_UNSUPPORTED);
    assert_non_null(
        strstr(kp_condset_get(&cs, KP_NP_COND_UNSUPPORTED_FIELDS)->message, "spec.replicas"));
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(ok), &ready), 0);
    assert_null(kp_condset_get(&cs, KP_NP_COND_UNSUPPORTED_FIELDS));
    kp_condset_done(&cs);

    /* Balanced: accepted, consolidated as WhenEmptyOrUnderutilized, and said so. */
    condset_of(&cs, bal);
    assert_int_equal(kp_nodepool_conditions(&cs, kp_nodepool_view(bal), &ready), 0);
    assert_cond(&cs, KP_NP_COND_UNSUPPORTED_FIELDS, KP_COND_TRUE,
                KP_NP_REASON_BALANCED_UNSUPPORTED);
    assert_non_null(strstr(kp_condset_get(&cs, KP_NP_COND_UNSUPPORTED_FIELDS)->message,
                           "consolidationPolicy: Balanced"));
    assert_cond(&cs, KP_NP_COND_READY, KP_COND_TRUE, NULL);
    kp_condset_done(&cs);
    kp_entry_unref(bal);

    kp_entry_unref(ok);
    kp_entry_unref(bad);
    kp_entry_unref(stat);
}

static char *dump(const json_t *j)
{
    struct kp_buf b = KP_BUF_INIT(64 * 1024);

    assert_int_equal(kp_json_dump(j, 0, &b), 0);
    return kp_buf_steal(&b, NULL);
}

static void test_status_patch(void **state)
{
    struct kp_entry *same = pool("", "", "," REQS, "",
                                 "'nodes':1,'nodeClassObservedGeneration':4,'resources':{'cpu':"
                                 "'4','memory':'0','pods':'0','ephemeral-storage':'0','nodes':"
                                 "'1'}");
    struct kp_entry *stale =
        pool("", "", "," REQS, "", "'nodes':3,'resources':{'cpu':'4','example.com/old':'1'}");
    struct kp_entry *launched = claim("", "", "'providerID':'fake://1','capacity':{'cpu':'4'}");
    struct kp_condset cs;
    struct kp_np_usage u;
    json_t *p = NULL;
    char *text;

    (void)state;
    kp_nodepool_usage_init(&u);
    kp_nodepool_usage_add(&u, kp_nodeclaim_view(launched), NULL);

    /* Nothing differs: no patch at all. */
    condset_of(&cs, same);
    assert_int_equal(kp_nodepool_status_patch(kp_nodepool_view(same), &cs, &u, true, 4, &p), 0);
    assert_null(p);
    /* Only the class generation moved. */
    assert_int_equal(kp_nodepool_status_patch(kp_nodepool_view(same), &cs, &u, true, 5, &p), 0);
    assert_non_null(p);
    text = dump(p);
    assert_string_equal(text, "{\"status\":{\"nodeClassObservedGeneration\":5}}");
    kp_free(text);
    p = kp_json_unref(p);
    kp_condset_done(&cs);

    /* Stale resources: the whole map, the old key nulled, nodes from the count. */
    condset_of(&cs, stale);
    assert_int_equal(kp_nodepool_status_patch(kp_nodepool_view(stale), &cs, &u, false, 0, &p), 0);
    assert_non_null(p);
    text = dump(p);
    assert_non_null(strstr(text, "\"example.com/old\":null"));
    assert_non_null(strstr(text, "\"cpu\":\"4\""));
    assert_non_null(strstr(text, "\"memory\":\"0\""));
    assert_non_null(strstr(text, "\"nodes\":1"));
    assert_null(strstr(text, "conditions"));
    assert_null(strstr(text, "nodeClassObservedGeneration"));
    kp_free(text);
    p = kp_json_unref(p);
    /* Changed conditions go in whole. */
    assert_int_equal(kp_condset_set(&cs, KP_NP_COND_READY, KP_COND_TRUE, NULL, NULL), 0);
    assert_int_equal(kp_nodepool_status_patch(kp_nodepool_view(stale), &cs, &u, false, 0, &p), 0);
    text = dump(p);
    assert_non_null(strstr(text, "\"conditions\":[{\"type\":\"Ready\""));
    kp_free(text);
    kp_json_unref(p);
    kp_condset_done(&cs);

    kp_entry_unref(same);
    kp_entry_unref(stale);
    kp_entry_unref(launched);
}

/* --- provider and set-up ---------------------------------------------------------------------- */

static void test_fake_node_class_status(void **state)
{
    struct kp_fake_provider *f = NULL;
    struct kp_provider p;
    struct kp_node_class_status st = {0};
    const struct kp_nodeclass_ref mine = {KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND, "c"};
    const struct kp_nodeclass_ref other = {"karpenter.k8s.aws", "EC2NodeClass", "c"};
    char reason[] = "NoHosts", message[] = "none";
    const struct kp_node_class_status want = {
        .generation = 3, .ready = KP_COND_FALSE, .reason = reason, .message = message};

    (void)state;
    assert_int_equal(kp_fake_provider_new(&f), 0);
    p = kp_fake_provider_as_provider(f);
    assert_int_equal(kp_provider_node_class_status(&p, &mine, &st), 0);
    assert_false(st.found);
    assert_int_equal(kp_fake_provider_set_node_class(f, "c", &want), 0);
    assert_int_equal(kp_provider_node_class_status(&p, &mine, &st), 0);
    assert_true(st.found);
    assert_int_equal(st.generation, 3);
    assert_int_equal(st.ready, KP_COND_FALSE);
    assert_string_equal(st.reason, "NoHosts");
    assert_string_equal(st.message, "none");
    kp_node_class_status_done(&st);
    /* Another provider's kind is never found here. */
    assert_int_equal(kp_provider_node_class_status(&p, &other, &st), 0);
    assert_false(st.found);
    assert_int_equal(kp_fake_provider_set_node_class(f, "c", NULL), 0);
    assert_int_equal(kp_provider_node_class_status(&p, &mine, &st), 0);
    assert_false(st.found);
    kp_fake_provider_free(f);
}

static void test_setup(void **state)
{
    struct kp_ssh_fx fx;
    struct kp_fake_provider *f = NULL;
    struct kp_provider p;
    struct kp_core_env env = {0};
    struct kp_nodepool_controller *ctl = NULL;
    size_t before;

    (void)state;
    kp_ssh_fx_init(&fx);
    assert_int_equal(kp_fake_provider_new(&f), 0);
    p = kp_fake_provider_as_provider(f);
    assert_int_equal(kp_nodepool_controller_new(&env, &ctl), -EINVAL);
    env.client = fx.c;
    env.informers = fx.reg;
    env.provider = &p;
    before = kp_ssh_fx_handlers(&fx);
    assert_int_equal(kp_nodepool_controller_new(&env, &ctl), 0);
    assert_true(kp_ssh_fx_handlers(&fx) > before);
    assert_false(kp_nodepool_controller_ready(ctl));
    assert_false(kp_nodepool_controller_ready(NULL));
    ctl = kp_nodepool_controller_free(ctl);
    assert_null(ctl);
    /* Freed, it takes its handlers back out of the shared informers. */
    assert_int_equal(kp_ssh_fx_handlers(&fx), before);
    assert_null(kp_nodepool_controller_free(NULL));
    kp_ssh_fx_done(&fx);
    kp_fake_provider_free(f);
}

/* The whole status decision under allocation failure: every step ends in 0 or -ENOMEM, and
 * nothing leaks. No cmocka assertions (a torture case must release what it holds). */
static int torture_status(void)
{
    static const char np_json[] =
        "{\"metadata\":{\"name\":\"np\",\"uid\":\"u\",\"resourceVersion\":\"1\","
        "\"generation\":2},\"spec\":{\"replicas\":1,\"template\":{\"metadata\":{\"labels\":"
        "{\"karpenter.sh/bad\":\"x\"}},\"spec\":{\"nodeClassRef\":{\"group\":\"g\","
        "\"kind\":\"k\",\"name\":\"c\"},\"requirements\":[]}}},\"status\":{\"resources\":"
        "{\"example.com/old\":\"1\"}}}";
    char reason[] = "NoHosts", message[] = "none";
    struct kp_node_class_status cls = {.found = true,
                                       .generation = 3,
                                       .ready = KP_COND_FALSE,
                                       .reason = reason,
                                       .message = message};
    struct kp_np_health_tracker t = {0};
    struct kp_condset cs = {0};
    struct kp_entry *e = NULL;
    struct kp_np_usage u;
    json_t *patch = NULL;
    int r;

    if ((r = kp_nodepool_decode(np_json, sizeof(np_json) - 1, &e)) < 0)
        return r;
    kp_nodepool_usage_init(&u);
    if ((r = kp_condset_init(&cs, &kp_nodepool_view(e)->conditions, 2, 0)) < 0 ||
        (r = kp_np_health_sync(&t, &cs, kp_nodepool_view(e), 3)) < 0 ||
        (r = kp_np_health_apply(&t, &cs, false, "JoinFailed", "boom")) < 0 ||
        (r = kp_np_health_apply(&t, &cs, false, "JoinFailed", "boom")) < 0 ||
        (r = kp_nodepool_conditions(&cs, kp_nodepool_view(e), &cls)) < 0 ||
        (r = kp_nodepool_status_patch(kp_nodepool_view(e), &cs, &u, true, 3, &patch)) < 0)
        goto out;
    r = patch ? 0 : -EINVAL;
out:
    kp_json_unref(patch);
    kp_condset_done(&cs);
    kp_entry_unref(e);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_sets),
        cmocka_unit_test(test_hash_excluded),
        cmocka_unit_test(test_hash_included),
        cmocka_unit_test(test_hash_stale),
        cmocka_unit_test(test_nodeclaim_hash_plan),
        cmocka_unit_test(test_health_tracker),
        cmocka_unit_test(test_registration_outcome),
        cmocka_unit_test(test_health_rules),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_conditions),
        cmocka_unit_test(test_status_patch),
        cmocka_unit_test(test_fake_node_class_status),
        cmocka_unit_test(test_setup),
    };

    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_status),
    };

    return kp_test_main("nodepool", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture),
                        argc, argv);
}
