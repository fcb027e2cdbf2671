/* tests/unit/test-drift.c: nodeclaim.disruption's Drifted decision (core/disruption/marking.h,
 * kp_drift_plan), one table row per situation.
 *
 * Each row is a NodeClaim of NodePool "np" and that NodePool, told by the JSON fragments that
 * differ from a launched, undrifted pair; the provider's answer when it is asked; and what the
 * plan must end with. The runner plans as the reconcile does: first without the provider, then,
 * only when the core finds nothing, again with the provider's answer. */
#include "kp-test.h"

#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "api/obj-karpenter.h"
#include "core/core.h"
#include "core/disruption/marking.h"
#include "core/provider.h"

#define T0 "2026-01-01T00:00:00Z"
#define decode(fn, ...) kp_test_decode(fn, true, __VA_ARGS__)

#define COND(type, st, reason, msg)                                                                \
    "{'type':'" type "','status':'" st "','reason':'" reason "','message':'" msg                   \
    "','lastTransitionTime':'" T0 "'}"
#define LAUNCHED COND("Launched", "True", "Launched", "")
#define NOT_LAUNCHED COND("Launched", "Unknown", "LaunchFailed", "")
#define DRIFTED(reason) COND("Drifted", "True", reason, reason)

#define HASH(h, v)                                                                                 \
    "'karpenter.sh/nodepool-hash':'" h "','karpenter.sh/nodepool-hash-version':'" v "'"
#define REQ(key, op, vals) "{'key':'" key "','operator':'" op "','values':[" vals "]}"
#define EXISTS(key, op) "{'key':'" key "','operator':'" op "'}"
#define ZONE "topology.kubernetes.io/zone"

struct drift_case {
    const char *name;
    /* NodePool: metadata.annotations and spec.template.spec.requirements (inside the braces) */
    const char *np_ann;
    const char *np_reqs;
    /* NodeClaim: its nodepool label (NULL: "np"; "" : none), other labels, annotations,
     * conditions (NULL: LAUNCHED), extra metadata fields */
    const char *pool;
    const char *labels;
    const char *ann;
    const char *conds;
    const char *meta;
    /* what is_drifted answers, when asked (NULL: not drifted) */
    const char *provider;
    /* expected */
    bool asks;
    enum kp_drift_action action;
    const char *reason; /* SET's, and any plan that keeps a drifted claim drifted */
    bool requeue;       /* KP_DRIFT_REQUEUE_USEC, else none */
};

/* Not const: cmocka hands each row to its test as a void *. */
static struct drift_case cases[] = {
    /* Who is looked at: a launched NodeClaim of this pool that is not being deleted. */
    {.name = "not launched, no condition: nothing",
     .ann = HASH("1", "v3"),
     .np_ann = HASH("2", "v3"),
     .conds = NOT_LAUNCHED,
     .action = KP_DRIFT_KEEP},
    {.name = "not launched, drifted: condition removed",
     .conds = NOT_LAUNCHED "," DRIFTED("NodePoolDrifted"),
     .action = KP_DRIFT_CLEAR},
    {.name = "no Launched condition at all, drifted: condition removed",
     .conds = DRIFTED("ProfileDrift"),
     .action = KP_DRIFT_CLEAR},
    {.name = "another pool's claim: no action",
     .pool = "other",
     .ann = HASH("1", "v3"),
     .np_ann = HASH("2", "v3"),
     .conds = LAUNCHED "," DRIFTED("NodePoolDrifted"),
     .action = KP_DRIFT_KEEP},
    {.name = "no nodepool label: no action",
     .pool = "",
     .ann = HASH("1", "v3"),
     .np_ann = HASH("2", "v3"),
     .action = KP_DRIFT_KEEP},
    {.name = "being deleted: no action",
     .meta = ",'deletionTimestamp':'" T0 "','finalizers':['karpenter.sh/termination']",
     .ann = HASH("1", "v3"),
     .np_ann = HASH("2", "v3"),
     .action = KP_DRIFT_KEEP},
    {.name = "invalid NodePool requirements: left alone",
     .np_reqs = EXISTS(ZONE, "Bogus"),
     .conds = LAUNCHED "," DRIFTED("RequirementsDrifted"),
     .action = KP_DRIFT_KEEP},

    /* 1. Static drift by the hash annotations. */
    {.name = "hashes differ, same version: NodePoolDrifted",
     .ann = HASH("1", "v3"),
     .np_ann = HASH("2", "v3"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_NODEPOOL,
     .requeue = true},
    {.name = "hashes differ, versions differ: not static drift",
     .ann = HASH("1", "v2"),
     .np_ann = HASH("2", "v3"),
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "hashes equal: not drifted",
     .ann = HASH("7", "v3"),
     .np_ann = HASH("7", "v3"),
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "no hash on the NodeClaim: not static drift",
     .np_ann = HASH("2", "v3"),
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "no hash version on the NodePool: not static drift",
     .ann = HASH("1", "v3"),
     .np_ann = "'karpenter.sh/nodepool-hash':'2'",
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "no hash version on the NodeClaim: not static drift",
     .ann = "'karpenter.sh/nodepool-hash':'1'",
     .np_ann = HASH("2", "v3"),
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "static drift comes before requirements drift",
     .ann = HASH("1", "v3"),
     .np_ann = HASH("2", "v3"),
     .labels = ",'" ZONE "':'a'",
     .np_reqs = REQ(ZONE, "In", "'b'"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_NODEPOOL,
     .requeue = true},

    /* 2. Requirements drift: the NodePool's requirements against the NodeClaim's labels. */
    {.name = "requirement narrowed past the label: RequirementsDrifted",
     .labels = ",'" ZONE "':'a'",
     .np_reqs = REQ(ZONE, "In", "'b'"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_REQUIREMENTS,
     .requeue = true},
    {.name = "requirement narrowed but still holding the label: not drifted",
     .labels = ",'" ZONE "':'a'",
     .np_reqs = REQ(ZONE, "In", "'a'"),
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "requirement widened: never drifts",
     .labels = ",'" ZONE "':'a'",
     .np_reqs = REQ(ZONE, "In", "'a','b','c'"),
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "a required key the node has no label for: drifted",
     .np_reqs = REQ("example.com/team", "In", "'x'"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_REQUIREMENTS,
     .requeue = true},
    {.name = "well-known keys are not excused: a zone requirement on an unzoned claim drifts",
     .np_reqs = REQ(ZONE, "In", "'a'"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_REQUIREMENTS,
     .requeue = true},
    {.name = "Exists on a missing label: drifted",
     .np_reqs = EXISTS("example.com/gpu", "Exists"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_REQUIREMENTS,
     .requeue = true},
    {.name = "NotIn on a missing label: not drifted",
     .np_reqs = REQ("example.com/team", "NotIn", "'x'"),
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "DoesNotExist on a missing label: not drifted",
     .np_reqs = EXISTS("example.com/gpu", "DoesNotExist"),
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "NotIn now excluding the label's value: drifted",
     .labels = ",'example.com/team':'x'",
     .np_reqs = REQ("example.com/team", "NotIn", "'x'"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_REQUIREMENTS,
     .requeue = true},
    {.name = "DoesNotExist on a present label: drifted",
     .labels = ",'example.com/gpu':'yes'",
     .np_reqs = EXISTS("example.com/gpu", "DoesNotExist"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_REQUIREMENTS,
     .requeue = true},
    {.name = "Gt still met: not drifted",
     .labels = ",'example.com/cores':'8'",
     .np_reqs = REQ("example.com/cores", "Gt", "'4'"),
     .asks = true,
     .action = KP_DRIFT_KEEP,
     .requeue = true},
    {.name = "Gt raised above the label: drifted",
     .labels = ",'example.com/cores':'8'",
     .np_reqs = REQ("example.com/cores", "Gt", "'16'"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_REQUIREMENTS,
     .requeue = true},
    {.name = "requirements drift comes before the provider",
     .np_reqs = REQ("example.com/team", "In", "'x'"),
     .provider = KP_PROVIDER_DRIFT_PROFILE,
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_REQUIREMENTS,
     .requeue = true},

    /* 4. The provider, asked last. */
    {.name = "provider: ProfileDrift",
     .provider = KP_PROVIDER_DRIFT_PROFILE,
     .asks = true,
     .action = KP_DRIFT_SET,
     .reason = KP_PROVIDER_DRIFT_PROFILE,
     .requeue = true},
    {.name = "provider: NodeClassDrift",
     .provider = KP_PROVIDER_DRIFT_NODECLASS,
     .asks = true,
     .action = KP_DRIFT_SET,
     .reason = KP_PROVIDER_DRIFT_NODECLASS,
     .requeue = true},

    /* Keeping and removing the condition. */
    {.name = "already marked with the same reason: nothing to write",
     .ann = HASH("1", "v3"),
     .np_ann = HASH("2", "v3"),
     .conds = LAUNCHED "," DRIFTED("NodePoolDrifted"),
     .action = KP_DRIFT_KEEP,
     .reason = KP_DRIFT_REASON_NODEPOOL,
     .requeue = true},
    {.name = "marked with the reason but another message: rewritten",
     .ann = HASH("1", "v3"),
     .np_ann = HASH("2", "v3"),
     .conds = LAUNCHED "," COND("Drifted", "True", "NodePoolDrifted", "old"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_NODEPOOL,
     .requeue = true},
    {.name = "the reason changes: rewritten",
     .conds = LAUNCHED "," DRIFTED("NodePoolDrifted"),
     .provider = KP_PROVIDER_DRIFT_PROFILE,
     .asks = true,
     .action = KP_DRIFT_SET,
     .reason = KP_PROVIDER_DRIFT_PROFILE,
     .requeue = true},
    {.name = "hash made equal again: condition removed",
     .ann = HASH("2", "v3"),
     .np_ann = HASH("2", "v3"),
     .conds = LAUNCHED "," DRIFTED("NodePoolDrifted"),
     .asks = true,
     .action = KP_DRIFT_CLEAR,
     .requeue = true},
    {.name = "requirement widened back: condition removed",
     .labels = ",'" ZONE "':'a'",
     .np_reqs = REQ(ZONE, "In", "'a','b'"),
     .conds = LAUNCHED "," DRIFTED("RequirementsDrifted"),
     .asks = true,
     .action = KP_DRIFT_CLEAR,
     .requeue = true},
    {.name = "provider no longer drifted: condition removed",
     .conds = LAUNCHED "," DRIFTED("ProfileDrift"),
     .asks = true,
     .action = KP_DRIFT_CLEAR,
     .requeue = true},
    {.name = "a False Drifted (written by someone else) is replaced when drifted",
     .np_reqs = REQ("example.com/team", "In", "'x'"),
     .conds = LAUNCHED "," COND("Drifted", "False", "X", "X"),
     .action = KP_DRIFT_SET,
     .reason = KP_DRIFT_REASON_REQUIREMENTS,
     .requeue = true},
};

static struct kp_entry *nodepool(const struct drift_case *c)
{
    return decode(kp_nodepool_decode,
                  "{'metadata':{'name':'np','uid':'np-uid','resourceVersion':'1',"
                  "'annotations':{%s}},"
                  "'spec':{'template':{'spec':{'nodeClassRef':{'group':'karpenter.kpssh.dev',"
                  "'kind':'SSHNodeClass','name':'c'},'requirements':[%s]}}}}",
                  c->np_ann ? c->np_ann : "", c->np_reqs ? c->np_reqs : "");
}

static struct kp_entry *nodeclaim(const struct drift_case *c)
{
    char pool[128] = "";

    if (!c->pool || *c->pool)
        (void)snprintf(pool, sizeof(pool), "'karpenter.sh/nodepool':'%s'",
                       c->pool ? c->pool : "np");
    return decode(kp_nodeclaim_decode,
                  "{'metadata':{'name':'a','uid':'a-uid','resourceVersion':'3',"
                  "'creationTimestamp':'" T0 "','labels':{%s%s},'annotations':{%s}%s},"
                  "'spec':{'nodeClassRef':{'group':'karpenter.kpssh.dev','kind':'SSHNodeClass',"
                  "'name':'c'},'requirements':[]},"
                  "'status':{'providerID':'kpssh://p/a','conditions':[%s]}}",
                  pool, c->labels ? c->labels : "", c->ann ? c->ann : "", c->meta ? c->meta : "",
                  c->conds ? c->conds : LAUNCHED);
}

static const char *action_name(enum kp_drift_action a)
{
    static const char *const names[] = {"KEEP", "SET", "CLEAR", "ASK_PROVIDER"};

    return (size_t)a < KP_ARRAY_SIZE(names) ? names[a] : "?";
}

static void run_case(const struct drift_case *c)
{
    struct kp_entry *np = nodepool(c), *nc = nodeclaim(c);
    struct kp_drift_plan plan;
    bool asked = false;

    assert_int_equal(kp_drift_plan(kp_nodeclaim_view(nc), kp_nodepool_view(np), false, NULL, &plan),
                     0);
    if (plan.action == KP_DRIFT_ASK_PROVIDER) {
        asked = true;
        assert_int_equal(
            kp_drift_plan(kp_nodeclaim_view(nc), kp_nodepool_view(np), true, c->provider, &plan),
            0);
        assert_int_not_equal(plan.action, KP_DRIFT_ASK_PROVIDER);
    }
    if (asked != c->asks || plan.action != c->action || !kp_streq(plan.reason, c->reason) ||
        plan.requeue_usec != (c->requeue ? KP_DRIFT_REQUEUE_USEC : 0))
        fail_msg("%s: asked %d, action %s, reason %s, requeue %llu", c->name, asked,
                 action_name(plan.action), plan.reason ? plan.reason : "(none)",
                 (unsigned long long)plan.requeue_usec);
    kp_entry_unref(np);
    kp_entry_unref(nc);
}

static void test_drift_case(void **state)
{
    run_case(*state);
}

/* A core reason stands whatever the provider would say, so the provider is never asked then
 * (an API call saved, as upstream saves it). */
static void test_drift_core_reason_wins(void **state)
{
    const struct drift_case c = {.ann = HASH("1", "v3"), .np_ann = HASH("2", "v3")};
    struct kp_entry *np = nodepool(&c), *nc = nodeclaim(&c);
    struct kp_drift_plan plan;

    (void)state;
    assert_int_equal(kp_drift_plan(kp_nodeclaim_view(nc), kp_nodepool_view(np), true,
                                   KP_PROVIDER_DRIFT_NODECLASS, &plan),
                     0);
    assert_int_equal(plan.action, KP_DRIFT_SET);
    assert_string_equal(plan.reason, KP_DRIFT_REASON_NODEPOOL);
    kp_entry_unref(np);
    kp_entry_unref(nc);
}

int main(void)
{
    struct CMUnitTest tests[KP_ARRAY_SIZE(cases) + 1];

    /* One cmocka test per row, named by it, so a failure names its situation. */
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++)
        tests[i] = (struct CMUnitTest){
            .name = cases[i].name, .test_func = test_drift_case, .initial_state = &cases[i]};
    tests[KP_ARRAY_SIZE(cases)] = (struct CMUnitTest){.name = "test_drift_core_reason_wins",
                                                      .test_func = test_drift_core_reason_wins};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
