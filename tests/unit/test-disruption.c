/* Unit tests of the disruption loop's pure decisions (core/disruption/disruption.h) and of the
 * pod-event and Consolidatable marking (core/disruption/marking.h): candidate rules with their
 * DisruptionBlocked sentences, the budget counts, what Emptiness wants, the command's order and
 * budgets, which pod changes are pod events, the dedupe window, and the Consolidatable plan.
 * Objects are decoded from JSON (single quotes for readability) as the informers would. */
#include "kp-test.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "k8s/rfc3339.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/disruption/disruption.h"
#include "core/disruption/marking.h"
#include "core/state/cluster.h"

#define SEC 1000000LL
#define T0 "2026-01-01T00:00:00Z"

static int64_t t0;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(kp_rfc3339_parse(T0, strlen(T0), &t0), 0);
    return 0;
}

/* Test objects decode from JSON written with ' for " (tests/lib/kp-test.h). */
#define decode(fn, ...) kp_test_decode(fn, true, __VA_ARGS__)

#define COND(type, st, at)                                                                         \
    "{'type':'" type "','status':'" st "','reason':'R','lastTransitionTime':'" at "'}"
#define INITIALIZED COND("Initialized", "True", T0)
#define CONSOLIDATABLE COND("Consolidatable", "True", T0)

/* A NodeClaim of NodePool np created at `created`, with status conditions conds and extra
 * status fields. */
static struct kp_entry *claim(const char *name, const char *np, const char *created,
                              const char *conds, const char *status)
{
    return decode(kp_nodeclaim_decode,
                  "{'metadata':{'name':'%s','uid':'%s-uid','resourceVersion':'3',"
                  "'creationTimestamp':'%s','labels':{'karpenter.sh/nodepool':'%s'}},"
                  "'spec':{'nodeClassRef':{'group':'karpenter.kpssh.dev','kind':'SSHNodeClass',"
                  "'name':'c'},'requirements':[]},"
                  "'status':{'providerID':'kpssh://p/%s','conditions':[%s]%s}}",
                  name, name, created, np, name, conds, status);
}

static struct kp_entry *node(const char *name, const char *ready, const char *annotations)
{
    return decode(kp_node_decode,
                  "{'metadata':{'name':'%s','uid':'%s-uid','resourceVersion':'1',"
                  "'creationTimestamp':'" T0 "','annotations':{%s}},"
                  "'spec':{'providerID':'kpssh://p/%s'},"
                  "'status':{'conditions':[{'type':'Ready','status':'%s'}]}}",
                  name, name, annotations, name, ready);
}

/* A NodePool with a disruption block (its JSON fields) and optional replicas. */
static struct kp_entry *nodepool(const char *name, const char *disruption, const char *extra)
{
    return decode(kp_nodepool_decode,
                  "{'metadata':{'name':'%s','uid':'%s-uid','resourceVersion':'1'},"
                  "'spec':{%s'disruption':{%s},'template':{'spec':{'nodeClassRef':{'group':"
                  "'karpenter.kpssh.dev','kind':'SSHNodeClass','name':'c'},'requirements':[]}}}}",
                  name, name, extra, disruption);
}

static struct kp_entry *pod(const char *node_name, const char *owner, const char *extra_meta,
                            const char *phase)
{
    return decode(kp_pod_decode,
                  "{'metadata':{'name':'p','namespace':'default','uid':'p-uid',"
                  "'resourceVersion':'1','ownerReferences':[{'apiVersion':'apps/v1','kind':'%s',"
                  "'name':'o','uid':'o','controller':true}]%s},'spec':{%s%s%s'containers':[{"
                  "'name':'c'}]},'status':{'phase':'%s'}}",
                  owner, extra_meta, node_name ? "'nodeName':'" : "", node_name ? node_name : "",
                  node_name ? "'," : "", phase);
}

/* A fixture of up to 8 state nodes and what disruption knows of them. */
struct fx {
    struct kp_state_node sn[8];
    struct kp_dnode d[8];
    struct kp_entry *e[32];
    size_t n, ne;
};

static struct kp_entry *keep(struct fx *f, struct kp_entry *e)
{
    assert_true(f->ne < KP_ARRAY_SIZE(f->e));
    f->e[f->ne++] = e;
    return e;
}

/* Adds a managed, initialized state node of NodePool np_e (may be NULL: none). */
static struct kp_dnode *add(struct fx *f, const char *name, const char *created, const char *conds,
                            struct kp_entry *np_e, const char *ready)
{
    struct kp_state_node *sn = &f->sn[f->n];
    struct kp_dnode *d = &f->d[f->n];
    const struct kp_nodeclaim_view *nc;

    assert_true(f->n < KP_ARRAY_SIZE(f->sn));
    memset(sn, 0, sizeof(*sn));
    memset(d, 0, sizeof(*d));
    sn->nodeclaim = keep(f, claim(name, np_e ? np_e->name : "gone", created, conds, ""));
    sn->node = keep(f, node(name, ready, ""));
    nc = kp_nodeclaim_view(sn->nodeclaim);
    sn->provider_id = nc->provider_id;
    sn->name = sn->node_name = kp_node_view(sn->node)->e.name;
    sn->nodeclaim_name = nc->e.name;
    sn->nodepool = nc->nodepool;
    sn->flags = KP_STATE_NODE_MANAGED | KP_STATE_NODE_REGISTERED | KP_STATE_NODE_INITIALIZED;
    d->sn = sn;
    d->np = np_e ? kp_nodepool_view(np_e) : NULL;
    f->n++;
    return d;
}

/* The fixture's own (writable) state node behind d. */
static struct kp_state_node *sn_of(struct fx *f, const struct kp_dnode *d)
{
    return &f->sn[d - f->d];
}

static void fx_done(struct fx *f)
{
    for (size_t i = 0; i < f->ne; i++)
        kp_entry_unref(f->e[i]);
}

#define EMPTY_OK INITIALIZED "," CONSOLIDATABLE

/* --- candidates ------------------------------------------------------------------------------- */

static void test_blocked_sentences(void **state)
{
    struct fx f = {0};
    struct kp_entry *np = keep(&f, nodepool("np", "'consolidateAfter':'0s'", ""));
    struct kp_dnode *d = add(&f, "a", T0, EMPTY_OK, np, "True");
    struct kp_entry *saved;
    char buf[256];

    (void)state;
    assert_null(kp_disruption_blocked(d, t0, buf, sizeof(buf)));

    sn_of(&f, d)->flags &= ~(uint32_t)KP_STATE_NODE_INITIALIZED;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)), "node isn't initialized");
    sn_of(&f, d)->flags |= KP_STATE_NODE_INITIALIZED | KP_STATE_NODE_MARKED_FOR_DELETION;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "node is deleting or marked for deletion");
    sn_of(&f, d)->flags &= ~(uint32_t)KP_STATE_NODE_MARKED_FOR_DELETION;
    sn_of(&f, d)->flags |= KP_STATE_NODE_DELETING;
    assert_non_null(kp_disruption_blocked(d, t0, buf, sizeof(buf)));
    sn_of(&f, d)->flags &= ~(uint32_t)KP_STATE_NODE_DELETING;
    sn_of(&f, d)->flags |= KP_STATE_NODE_NOMINATED;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "node is nominated for a pending pod");
    sn_of(&f, d)->flags &= ~(uint32_t)KP_STATE_NODE_NOMINATED;

    d->blocking_pod = "default/web-1";
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "pod \"default/web-1\" has \"karpenter.sh/do-not-disrupt\" annotation");
    d->blocking_pod = NULL;

    d->np = NULL;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "nodepool \"np\" not found");
    d->np = kp_nodepool_view(np);
    sn_of(&f, d)->nodepool = NULL;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "node doesn't have required label \"karpenter.sh/nodepool\"");
    sn_of(&f, d)->nodepool = "np";

    saved = d->sn->nodeclaim;
    sn_of(&f, d)->nodeclaim = NULL;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "state node doesn't contain both a node and a nodeclaim");
    sn_of(&f, d)->nodeclaim = saved;

    /* The node annotation counts only as exactly "true". */
    sn_of(&f, d)->node = keep(&f, node("a", "True", "'karpenter.sh/do-not-disrupt':'true'"));
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "disruption is blocked through the \"karpenter.sh/do-not-disrupt\" "
                        "annotation");
    sn_of(&f, d)->node = keep(&f, node("a", "True", "'karpenter.sh/do-not-disrupt':'yes'"));
    assert_null(kp_disruption_blocked(d, t0, buf, sizeof(buf)));
    fx_done(&f);
}

static void test_emptiness_wants(void **state)
{
    struct fx f = {0};
    struct kp_entry *np = keep(&f, nodepool("np", "'consolidateAfter':'30s'", ""));
    struct kp_entry *never = keep(&f, nodepool("never", "'consolidateAfter':'Never'", ""));
    struct kp_entry *stat =
        keep(&f, nodepool("static", "'consolidateAfter':'0s'", "'replicas':2,"));
    struct kp_entry *when_empty =
        keep(&f, nodepool("we", "'consolidateAfter':'0s','consolidationPolicy':'WhenEmpty'", ""));
    struct kp_dnode *ok = add(&f, "a", T0, EMPTY_OK, np, "True");
    struct kp_dnode *busy = add(&f, "b", T0, EMPTY_OK, np, "True");
    struct kp_dnode *quiet = add(&f, "c", T0, INITIALIZED, np, "True");
    struct kp_dnode *off = add(&f, "d", T0, EMPTY_OK, never, "True");
    struct kp_dnode *st = add(&f, "e", T0, EMPTY_OK, stat, "True");
    struct kp_dnode *we = add(&f, "g", T0, EMPTY_OK, when_empty, "True");

    (void)state;
    busy->reschedulable = 1;
    assert_true(kp_emptiness_wants(ok));
    assert_false(kp_emptiness_wants(busy));  /* a reschedulable pod: not empty */
    assert_false(kp_emptiness_wants(quiet)); /* not Consolidatable (yet) */
    assert_false(kp_emptiness_wants(off));   /* consolidateAfter Never */
    assert_false(kp_emptiness_wants(st));    /* static NodePool */
    assert_true(kp_emptiness_wants(we));     /* every policy allows emptiness */
    fx_done(&f);
}

/* --- budgets ---------------------------------------------------------------------------------- */

static void test_pool_counts(void **state)
{
    struct fx f = {0};
    struct kp_entry *np = keep(&f, nodepool("np", "", ""));
    struct kp_entry *other = keep(&f, nodepool("other", "", ""));
    int64_t nodes, disrupting;

    (void)state;
    add(&f, "a", T0, EMPTY_OK, np, "True");
    add(&f, "b", T0, EMPTY_OK, np, "False"); /* NotReady: disrupting */
    sn_of(&f, add(&f, "c", T0, EMPTY_OK, np, "True"))->flags |= KP_STATE_NODE_MARKED_FOR_DELETION;
    sn_of(&f, add(&f, "d", T0, EMPTY_OK, np, "True"))->flags &=
        ~(uint32_t)KP_STATE_NODE_INITIALIZED;
    add(&f, "e", T0, EMPTY_OK "," COND("InstanceTerminating", "True", T0), np, "True");
    add(&f, "g", T0, EMPTY_OK, other, "False");
    kp_disruption_pool_counts(f.d, f.n, "np", &nodes, &disrupting);
    /* d is not initialized and e's instance is terminating: neither counts. */
    assert_int_equal(nodes, 3);
    assert_int_equal(disrupting, 2);
    kp_disruption_pool_counts(f.d, f.n, "other", &nodes, &disrupting);
    assert_int_equal(nodes, 1);
    assert_int_equal(disrupting, 1);
    kp_disruption_pool_counts(f.d, f.n, "none", &nodes, &disrupting);
    assert_int_equal(nodes, 0);
    assert_int_equal(disrupting, 0);
    fx_done(&f);
}

static void test_select_order(void **state)
{
    struct fx f = {0};
    struct kp_entry *np =
        keep(&f, nodepool("np", "'consolidateAfter':'0s','budgets':[{'nodes':'100%'}]", ""));
    size_t idx[8], n;
    bool blocked;

    (void)state;
    add(&f, "young", "2026-01-01T00:00:09Z", EMPTY_OK, np, "True");
    add(&f, "busy", "2026-01-01T00:00:00Z", EMPTY_OK, np, "True")->reschedulable = 2;
    add(&f, "old-b", "2026-01-01T00:00:01Z", EMPTY_OK, np, "True");
    add(&f, "old-a", "2026-01-01T00:00:01Z", EMPTY_OK, np, "True");
    n = kp_emptiness_select(f.d, f.n, NULL, t0 + 60 * SEC, idx, &blocked);
    /* Oldest NodeClaim first, then by name; the busy node is not empty. */
    assert_int_equal(n, 3);
    assert_string_equal(f.d[idx[0]].sn->name, "old-a");
    assert_string_equal(f.d[idx[1]].sn->name, "old-b");
    assert_string_equal(f.d[idx[2]].sn->name, "young");
    assert_false(blocked);
    fx_done(&f);
}

static void test_select_budgets(void **state)
{
    struct fx f = {0};
    /* The default budget: 10% of 10 nodes rounds up to 1. */
    struct kp_entry *dflt = keep(&f, nodepool("dflt", "'consolidateAfter':'0s'", ""));
    struct kp_entry *two =
        keep(&f, nodepool("two", "'consolidateAfter':'0s','budgets':[{'nodes':'2'}]", ""));
    struct kp_entry *zero =
        keep(&f, nodepool("zero", "'consolidateAfter':'0s','budgets':[{'nodes':'0'}]", ""));
    size_t idx[8], n;
    bool blocked;
    char name[8];

    (void)state;
    for (int i = 0; i < 4; i++) {
        (void)snprintf(name, sizeof(name), "d%d", i);
        add(&f, name, T0, EMPTY_OK, dflt, "True");
    }
    add(&f, "t0", T0, EMPTY_OK, two, "True");
    add(&f, "t1", T0, EMPTY_OK, two, "True");
    add(&f, "t2", T0, EMPTY_OK, two, "False"); /* NotReady: already consumes one */
    add(&f, "z0", T0, EMPTY_OK, zero, "True");
    n = kp_emptiness_select(f.d, f.n, NULL, t0, idx, &blocked);
    /* dflt: ceil(10% of 4) = 1; two: 2 allowed, 1 disrupting -> 1 more; zero: none. */
    assert_int_equal(n, 2);
    assert_string_equal(f.d[idx[0]].sn->name, "d0");
    assert_string_equal(f.d[idx[1]].sn->name, "t0");
    assert_true(blocked);
    fx_done(&f);
}

static void test_select_schedule(void **state)
{
    struct fx f = {0};
    /* A budget of 0 that is active from 00:00 for an hour each day: empty nodes wait. */
    struct kp_entry *np =
        keep(&f, nodepool("np",
                          "'consolidateAfter':'0s','budgets':[{'nodes':'0','schedule':'0 0 * * *',"
                          "'duration':'1h'},{'nodes':'100%'}]",
                          ""));
    size_t idx[8];
    bool blocked;

    (void)state;
    add(&f, "a", T0, EMPTY_OK, np, "True");
    assert_int_equal(kp_emptiness_select(f.d, f.n, NULL, t0 + 30 * 60 * SEC, idx, &blocked), 0);
    assert_true(blocked);
    /* After the window: the 100% budget alone. */
    assert_int_equal(kp_emptiness_select(f.d, f.n, NULL, t0 + 61 * 60 * SEC, idx, &blocked), 1);
    assert_false(blocked);
    fx_done(&f);
}

static void test_select_skips_blocked(void **state)
{
    struct fx f = {0};
    struct kp_entry *np =
        keep(&f, nodepool("np", "'consolidateAfter':'0s','budgets':[{'nodes':'100%'}]", ""));
    size_t idx[8];

    (void)state;
    add(&f, "a", T0, EMPTY_OK, np, "True")->blocking_pod = "default/db-0";
    sn_of(&f, add(&f, "b", T0, EMPTY_OK, np, "True"))->flags |= KP_STATE_NODE_NOMINATED;
    add(&f, "c", T0, EMPTY_OK, NULL, "True");
    assert_int_equal(kp_emptiness_select(f.d, f.n, NULL, t0, idx, NULL), 0);
    fx_done(&f);
}

static void test_select_only_the_command(void **state)
{
    struct fx f = {0};
    struct kp_entry *np =
        keep(&f, nodepool("np", "'consolidateAfter':'0s','budgets':[{'nodes':'1'}]", ""));
    const bool only[] = {false, true};
    size_t idx[8];

    (void)state;
    add(&f, "older", "2026-01-01T00:00:00Z", EMPTY_OK, np, "True");
    add(&f, "cmd", "2026-01-01T00:00:05Z", EMPTY_OK, np, "True");
    /* Unrestricted, the older node takes the pool's one disruption. */
    assert_int_equal(kp_emptiness_select(f.d, f.n, NULL, t0, idx, NULL), 1);
    assert_string_equal(f.d[idx[0]].sn->name, "older");
    /* Validating a command of "cmd" alone: the older node cannot spend its budget. */
    assert_int_equal(kp_emptiness_select(f.d, f.n, only, t0, idx, NULL), 1);
    assert_string_equal(f.d[idx[0]].sn->name, "cmd");
    fx_done(&f);
}

/* --- marking ---------------------------------------------------------------------------------- */

static void test_pod_events(void **state)
{
    struct kp_entry *unbound = pod(NULL, "ReplicaSet", "", "Pending");
    struct kp_entry *bound = pod("n1", "ReplicaSet", "", "Running");
    struct kp_entry *moved = pod("n2", "ReplicaSet", "", "Running");
    struct kp_entry *done = pod("n1", "ReplicaSet", "", "Succeeded");
    struct kp_entry *going = pod("n1", "ReplicaSet", ",'deletionTimestamp':'" T0 "'", "Running");
    struct kp_entry *ds_unbound = pod(NULL, "DaemonSet", "", "Pending");
    struct kp_entry *ds = pod("n1", "DaemonSet", "", "Running");
#define EV(o, n) kp_podevents_is_event((o) ? kp_pod_view(o) : NULL, (n) ? kp_pod_view(n) : NULL)

    (void)state;
    assert_true(EV(unbound, bound)); /* bound */
    assert_true(EV(bound, moved));   /* bound elsewhere */
    assert_true(EV(bound, done));    /* terminal */
    assert_true(EV(bound, going));   /* terminating */
    assert_true(EV(bound, NULL));    /* gone while running */
    assert_false(EV(going, NULL));   /* its terminating was the event */
    assert_false(EV(bound, bound));  /* nothing changed */
    assert_false(EV(NULL, bound));   /* listed at start-up */
    assert_false(EV(unbound, unbound));
    assert_false(EV(ds_unbound, ds)); /* DaemonSet pods never count */
    assert_false(EV(ds, NULL));
#undef EV
    kp_entry_unref(unbound);
    kp_entry_unref(bound);
    kp_entry_unref(moved);
    kp_entry_unref(done);
    kp_entry_unref(going);
    kp_entry_unref(ds_unbound);
    kp_entry_unref(ds);
}

static void test_pod_event_dedupe(void **state)
{
    struct kp_entry *never = claim("a", "np", T0, "", "");
    struct kp_entry *stamped = claim("a", "np", T0, "", ",'lastPodEventTime':'" T0 "'");

    (void)state;
    assert_int_equal(kp_podevents_wait(kp_nodeclaim_view(never), t0), 0);
    assert_int_equal(kp_podevents_wait(kp_nodeclaim_view(stamped), t0 + 4 * SEC), 6 * SEC);
    assert_int_equal(kp_podevents_wait(kp_nodeclaim_view(stamped), t0 + 10 * SEC), 0);
    kp_entry_unref(never);
    kp_entry_unref(stamped);
}

static void test_consolidatable_plan(void **state)
{
    struct kp_entry *np = nodepool("np", "'consolidateAfter':'30s'", "");
    struct kp_entry *zero = nodepool("zero", "'consolidateAfter':'0s'", "");
    struct kp_entry *never = nodepool("never", "'consolidateAfter':'Never'", "");
    struct kp_entry *stat = nodepool("static", "'consolidateAfter':'0s'", "'replicas':1,");
    struct kp_entry *fresh = claim("a", "np", T0, INITIALIZED, "");
    struct kp_entry *marked = claim("a", "np", T0, INITIALIZED "," CONSOLIDATABLE, "");
    struct kp_entry *busy = claim("a", "np", T0, INITIALIZED "," CONSOLIDATABLE,
                                  ",'lastPodEventTime':'2026-01-01T00:01:00Z'");
    struct kp_entry *uninit = claim("a", "np", T0, CONSOLIDATABLE, "");
    struct kp_consolidatable_plan p;
#define PLAN(c, pool, now) kp_consolidatable_plan(kp_nodeclaim_view(c), kp_nodepool_view(pool), now)

    (void)state;
    /* Counted from the Initialized transition: not before 30 s, then set once. */
    p = PLAN(fresh, np, t0 + 10 * SEC);
    assert_int_equal(p.action, KP_CONSOLIDATABLE_KEEP);
    assert_int_equal(p.requeue_usec, 20 * SEC);
    assert_int_equal(PLAN(fresh, np, t0 + 30 * SEC).action, KP_CONSOLIDATABLE_SET);
    assert_int_equal(PLAN(marked, np, t0 + 31 * SEC).action, KP_CONSOLIDATABLE_KEEP);
    /* A pod event restarts the clock: the condition goes until 30 s after it. */
    p = PLAN(busy, np, t0 + 70 * SEC);
    assert_int_equal(p.action, KP_CONSOLIDATABLE_CLEAR);
    assert_int_equal(p.requeue_usec, 20 * SEC);
    assert_int_equal(PLAN(busy, np, t0 + 90 * SEC).action, KP_CONSOLIDATABLE_KEEP);
    /* 0s: at once; Never and not initialized: no condition; static pools: left alone. */
    assert_int_equal(PLAN(fresh, zero, t0).action, KP_CONSOLIDATABLE_SET);
    assert_int_equal(PLAN(marked, never, t0).action, KP_CONSOLIDATABLE_CLEAR);
    assert_int_equal(PLAN(fresh, never, t0).action, KP_CONSOLIDATABLE_KEEP);
    assert_int_equal(PLAN(uninit, zero, t0).action, KP_CONSOLIDATABLE_CLEAR);
    assert_int_equal(PLAN(fresh, stat, t0 + 100 * SEC).action, KP_CONSOLIDATABLE_KEEP);
#undef PLAN
    kp_entry_unref(np);
    kp_entry_unref(zero);
    kp_entry_unref(never);
    kp_entry_unref(stat);
    kp_entry_unref(fresh);
    kp_entry_unref(marked);
    kp_entry_unref(busy);
    kp_entry_unref(uninit);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_sentences),    cmocka_unit_test(test_emptiness_wants),
        cmocka_unit_test(test_pool_counts),          cmocka_unit_test(test_select_order),
        cmocka_unit_test(test_select_budgets),       cmocka_unit_test(test_select_schedule),
        cmocka_unit_test(test_select_skips_blocked), cmocka_unit_test(test_select_only_the_command),
        cmocka_unit_test(test_pod_events),           cmocka_unit_test(test_pod_event_dedupe),
        cmocka_unit_test(test_consolidatable_plan),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
