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

#include "base/alloc.h"
#include "k8s/rfc3339.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/disruption/consolidation.h"
#include "core/disruption/disruption.h"
#include "core/disruption/drift.h"
#include "core/disruption/budget.h"
#include "core/disruption/marking.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/provisioning/scheduler.h"
#include "core/state/cluster.h"
#include "kp-fake-provider.h"

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
                        "pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/web-1)");
    d->blocking_pod = NULL;

    d->np = NULL;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "NodePool not found (NodePool=np)");
    d->np = kp_nodepool_view(np);
    sn_of(&f, d)->nodepool = NULL;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "node doesn't have required label (label=karpenter.sh/nodepool)");
    sn_of(&f, d)->nodepool = "np";

    saved = d->sn->nodeclaim;
    sn_of(&f, d)->nodeclaim = NULL;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "node isn't managed by karpenter");
    sn_of(&f, d)->nodeclaim = saved;
    saved = d->sn->node;
    sn_of(&f, d)->node = NULL;
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "nodeclaim does not have an associated node");
    sn_of(&f, d)->node = saved;

    /* The node annotation counts only as exactly "true". */
    sn_of(&f, d)->node = keep(&f, node("a", "True", "'karpenter.sh/do-not-disrupt':'true'"));
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "disruption is blocked through the \"karpenter.sh/do-not-disrupt\" "
                        "annotation");
    sn_of(&f, d)->node = keep(&f, node("a", "True", "'karpenter.sh/do-not-disrupt':'yes'"));
    assert_null(kp_disruption_blocked(d, t0, buf, sizeof(buf)));

    /* A PDB that allows no eviction now: its sentence (kp_pdbs_block_eviction's), after the
     * do-not-disrupt pod's. */
    d->blocking_pdb = "pdb prevents pod evictions (PodDisruptionBudget=[default/web])";
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "pdb prevents pod evictions (PodDisruptionBudget=[default/web])");
    d->blocking_pod = "default/keep";
    assert_string_equal(kp_disruption_blocked(d, t0, buf, sizeof(buf)),
                        "pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/keep)");
    /* The events' message: upstream's Blocked event writes the sentence capitalised, the same
     * on the Node and the NodeClaim, with no prefix. */
    {
        char note[256];

        assert_string_equal(
            kp_disruption_blocked_note(kp_disruption_blocked(d, t0, buf, sizeof(buf)), note,
                                       sizeof(note)),
            "Pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/keep)");
        d->blocking_pod = NULL;
        assert_string_equal(kp_disruption_blocked_note(
                                kp_disruption_blocked(d, t0, buf, sizeof(buf)), note, sizeof(note)),
                            "Pdb prevents pod evictions (PodDisruptionBudget=[default/web])");
        assert_string_equal(
            kp_disruption_blocked_note("NodePool not found (NodePool=np)", note, sizeof(note)),
            "NodePool not found (NodePool=np)");
        assert_string_equal(kp_disruption_blocked_note("", note, sizeof(note)), "");
    }
    d->blocking_pod = d->blocking_pdb = NULL;
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

/* What kp_disruption_report_budgets reports: gauges through the observer (as "family
 * nodepool reason = value" lines) and the NodePools' DisruptionBlocked sentences. */
struct rec {
    char lines[16][160];
    size_t n;
};

static void rec_gauge(void *ctx, enum kp_core_metric m, const char *const *labels, double v)
{
    struct rec *r = ctx;

    assert_true(r->n < KP_ARRAY_SIZE(r->lines));
    (void)snprintf(r->lines[r->n++], sizeof(r->lines[0]), "%s %s %s = %g",
                   kp_core_metric_defs[m].name, labels[0], labels[1], v);
}

static void rec_blocked(void *ctx, const struct kp_nodepool_view *np, const char *note)
{
    struct rec *r = ctx;

    assert_true(r->n < KP_ARRAY_SIZE(r->lines));
    (void)snprintf(r->lines[r->n++], sizeof(r->lines[0]), "DisruptionBlocked %s: %s", np->e.name,
                   note);
}

/* Upstream's budget mapping, per reason: allowed_disruptions is the budgets' allowance (before
 * the disrupting nodes are taken off), nodes_consuming_budgets the NotReady or disrupting nodes,
 * both labelled with the DisruptionReason as written ("Empty"); a NodePool with nodes whose
 * budgets allow none for the reason gets DisruptionBlocked with upstream's sentence, for any
 * reason (Emptiness, Drift and both consolidations alike). */
static void test_budget_report(void **state)
{
    struct fx f = {0};
    struct kp_entry *open =
        keep(&f, nodepool("open", "'consolidateAfter':'0s','budgets':[{'nodes':'2'}]", ""));
    struct kp_entry *shut =
        keep(&f, nodepool("shut",
                          "'consolidateAfter':'0s','budgets':[{'nodes':'0','reasons':['Empty',"
                          "'Drifted','Underutilized']}]",
                          ""));
    struct kp_entry *idle = keep(&f, nodepool("idle", "'budgets':[{'nodes':'0'}]", ""));
    struct rec r = {0};
    struct kp_core_observer o = {.gauge = rec_gauge, .ctx = &r};
    static const struct {
        uint32_t bit;
        const char *name;
    } reasons[] = {{KP_DISRUPT_EMPTY, "Empty"},
                   {KP_DISRUPT_DRIFTED, "Drifted"},
                   {KP_DISRUPT_UNDERUTILIZED, "Underutilized"}};
    char want[160];

    (void)state;
    add(&f, "o0", T0, EMPTY_OK, open, "True");
    add(&f, "o1", T0, EMPTY_OK, open, "False"); /* NotReady: consumes one */
    add(&f, "s0", T0, EMPTY_OK, shut, "True");
    sn_of(&f, add(&f, "i0", T0, EMPTY_OK, idle, "True"))->flags &= ~KP_STATE_NODE_INITIALIZED;
    for (size_t k = 0; k < KP_ARRAY_SIZE(reasons); k++) {
        memset(&r, 0, sizeof(r));
        kp_disruption_report_budgets(f.d, f.n, reasons[k].bit, reasons[k].name, t0, &o, rec_blocked,
                                     &r);
        assert_int_equal(r.n, 7);
        (void)snprintf(want, sizeof(want), "karpenter_nodepools_allowed_disruptions open %s = 2",
                       reasons[k].name);
        assert_string_equal(r.lines[0], want);
        (void)snprintf(want, sizeof(want),
                       "karpenter_nodepools_nodes_consuming_budgets open %s = 1", reasons[k].name);
        assert_string_equal(r.lines[1], want);
        (void)snprintf(want, sizeof(want), "karpenter_nodepools_allowed_disruptions shut %s = 0",
                       reasons[k].name);
        assert_string_equal(r.lines[2], want);
        (void)snprintf(want, sizeof(want),
                       "karpenter_nodepools_nodes_consuming_budgets shut %s = 0", reasons[k].name);
        assert_string_equal(r.lines[3], want);
        (void)snprintf(want, sizeof(want),
                       "DisruptionBlocked shut: No allowed disruptions for disruption reason %s "
                       "due to blocking budget",
                       reasons[k].name);
        assert_string_equal(r.lines[4], want);
        /* idle has no node its budgets count (i0 is not initialized): no event. */
        (void)snprintf(want, sizeof(want), "karpenter_nodepools_allowed_disruptions idle %s = 0",
                       reasons[k].name);
        assert_string_equal(r.lines[5], want);
    }
    /* Budgets that name other reasons do not limit this one: the pool's node count stands. */
    memset(&r, 0, sizeof(r));
    fx_done(&f);
    memset(&f, 0, sizeof(f));
    shut = keep(&f, nodepool("shut", "'budgets':[{'nodes':'0','reasons':['Drifted']}]", ""));
    add(&f, "s0", T0, EMPTY_OK, shut, "True");
    kp_disruption_report_budgets(f.d, f.n, KP_DISRUPT_EMPTY, "Empty", t0, &o, rec_blocked, &r);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.lines[0], "karpenter_nodepools_allowed_disruptions shut Empty = 1");
    /* No observer and no callback: nothing to report to, nothing breaks. */
    kp_disruption_report_budgets(f.d, f.n, KP_DISRUPT_EMPTY, "Empty", t0, NULL, NULL, NULL);
    fx_done(&f);
}

/* Karpenter's InvalidDoNotDisruptAnnotation message, for a value it ignores: not "true" and not
 * a positive Go duration (pkg/utils/pod/events.go, scheduling.go). */
static void test_invalid_do_not_disrupt(void **state)
{
    static const struct {
        const char *value, *note; /* note NULL: no event */
    } cases[] = {
        {NULL, NULL},
        {"true", NULL},
        {"5m", NULL},
        {"abc", "Invalid karpenter.sh/do-not-disrupt annotation: failed to parse \"abc\" as a "
                "duration: time: invalid duration \"abc\", ignoring annotation"},
        {"5d", "Invalid karpenter.sh/do-not-disrupt annotation: failed to parse \"5d\" as a "
               "duration: time: unknown unit \"d\" in duration \"5d\", ignoring annotation"},
        {"30", "Invalid karpenter.sh/do-not-disrupt annotation: failed to parse \"30\" as a "
               "duration: time: missing unit in duration \"30\", ignoring annotation"},
        {"0s", "Invalid karpenter.sh/do-not-disrupt annotation: duration \"0s\" must be positive, "
               "ignoring annotation"},
        {"-5m", "Invalid karpenter.sh/do-not-disrupt annotation: duration \"-5m\" must be "
                "positive, ignoring annotation"},
        {"True", "Invalid karpenter.sh/do-not-disrupt annotation: failed to parse \"True\" as a "
                 "duration: time: invalid duration \"True\", ignoring annotation"},
    };
    char meta[128], buf[512];

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_entry *p;
        const char *got;

        if (cases[i].value)
            (void)snprintf(meta, sizeof(meta),
                           ",'annotations':{'karpenter.sh/do-not-disrupt':'%s'}", cases[i].value);
        else
            meta[0] = '\0';
        p = pod("n", "ReplicaSet", meta, "Running");
        got = kp_disruption_invalid_do_not_disrupt(kp_pod_view(p), buf, sizeof(buf));
        if (!cases[i].note && got)
            fail_msg("%s: unexpected %s", cases[i].value, got);
        if (cases[i].note && (!got || strcmp(got, cases[i].note) != 0))
            fail_msg("%s: got %s", cases[i].value, got ? got : "(null)");
        kp_entry_unref(p);
    }
}

/* Karpenter's DoNotDisruptUntil and DoNotDisruptGracePeriodElapsed events for a duration the
 * pod's start time counts from; none for "true", an invalid value or a pod not started. */
static void test_do_not_disrupt_events(void **state)
{
    static const struct {
        const char *value, *start, *reason, *note;
    } cases[] = {
        {"true", "2026-01-01T00:00:00Z", NULL, NULL},
        {"abc", "2026-01-01T00:00:00Z", NULL, NULL},
        {"30m", NULL, NULL, NULL},
        {"30m", "2026-01-01T00:00:00Z", "DoNotDisruptUntil",
         "The karpenter.sh/do-not-disrupt grace period will elapse at 2026-01-01T00:30:00Z"},
        {"1h30m15.5s", "2026-01-01T00:00:00Z", "DoNotDisruptUntil",
         "The karpenter.sh/do-not-disrupt grace period will elapse at 2026-01-01T01:30:15Z"},
        {"10m", "2026-01-01T00:00:00Z", "DoNotDisruptGracePeriodElapsed",
         "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable"},
        /* Exactly at the end: no longer active (age < duration is the test). */
        {"20m", "2026-01-01T00:00:00Z", "DoNotDisruptGracePeriodElapsed",
         "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable"},
    };
    int64_t now;
    char buf[256];

    (void)state;
    assert_int_equal(kp_rfc3339_parse("2026-01-01T00:20:00Z", 20, &now), 0);
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_entry *p = decode(
            kp_pod_decode,
            "{'metadata':{'name':'p','namespace':'default','uid':'p-uid','resourceVersion':'1',"
            "'annotations':{'karpenter.sh/do-not-disrupt':'%s'}},'spec':{'nodeName':'n',"
            "'containers':[{'name':'c'}]},'status':{'phase':'Running'%s%s%s}}",
            cases[i].value, cases[i].start ? ",'startTime':'" : "",
            cases[i].start ? cases[i].start : "", cases[i].start ? "'" : "");
        const char *got = kp_disruption_do_not_disrupt_event(kp_pod_view(p), now, buf, sizeof(buf));

        if (!cases[i].reason && got)
            fail_msg("case %zu: unexpected %s", i, got);
        if (cases[i].reason) {
            if (!got || strcmp(got, cases[i].reason) != 0)
                fail_msg("case %zu: got %s", i, got ? got : "(null)");
            assert_string_equal(buf, cases[i].note);
        }
        kp_entry_unref(p);
    }
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

/* --- single-node consolidation (consolidation.h) ------------------------------------------- */

#define LABELS_OK                                                                                  \
    "'node.kubernetes.io/instance-type':'small','karpenter.sh/capacity-type':'on-demand',"         \
    "'topology.kubernetes.io/zone':'z1'"

/* Gives d's Node the labels (JSON members, ' quoted). */
static void relabel(struct fx *f, struct kp_dnode *d, const char *labels)
{
    struct kp_state_node *sn = sn_of(f, d);

    sn->node = keep(f, decode(kp_node_decode,
                              "{'metadata':{'name':'%s','uid':'x','resourceVersion':'1',"
                              "'labels':{%s}},'spec':{'providerID':'kpssh://p/%s'},"
                              "'status':{'conditions':[{'type':'Ready','status':'True'}]}}",
                              sn->name, labels, sn->name));
}

/* Who consolidation wants, and the Unconsolidatable sentences (silent for what is no news). */
static void test_consolidation_unwanted(void **state)
{
    struct fx f = {0};
    struct kp_entry *np = keep(&f, nodepool("np", "'consolidateAfter':'30s'", ""));
    struct kp_entry *never = keep(&f, nodepool("never", "'consolidateAfter':'Never'", ""));
    struct kp_entry *we =
        keep(&f, nodepool("we", "'consolidateAfter':'0s','consolidationPolicy':'WhenEmpty'", ""));
    struct kp_entry *stat =
        keep(&f, nodepool("static", "'consolidateAfter':'0s'", "'replicas':2,"));
    struct kp_dnode *ok = add(&f, "a", T0, EMPTY_OK, np, "True");
    struct kp_dnode *empty = add(&f, "b", T0, EMPTY_OK, np, "True");
    struct kp_dnode *quiet = add(&f, "c", T0, INITIALIZED, np, "True");
    struct kp_dnode *off = add(&f, "d", T0, EMPTY_OK, never, "True");
    struct kp_dnode *when_empty = add(&f, "e", T0, EMPTY_OK, we, "True");
    struct kp_dnode *st = add(&f, "g", T0, EMPTY_OK, stat, "True");
    struct kp_dnode *bare = add(&f, "h", T0, EMPTY_OK, np, "True");
    char buf[256];
    bool silent;

    (void)state;
    for (size_t i = 0; i < f.n; i++) {
        if (&f.d[i] != bare)
            relabel(&f, &f.d[i], LABELS_OK);
        f.d[i].reschedulable = &f.d[i] == empty ? 0 : 1;
    }
    assert_null(kp_consolidation_unwanted(ok, buf, sizeof(buf), &silent));
    assert_non_null(kp_consolidation_unwanted(empty, buf, sizeof(buf), &silent));
    assert_true(silent); /* Emptiness's */
    assert_non_null(kp_consolidation_unwanted(quiet, buf, sizeof(buf), &silent));
    assert_true(silent); /* not Consolidatable yet */
    assert_non_null(kp_consolidation_unwanted(st, buf, sizeof(buf), &silent));
    assert_true(silent);
    assert_string_equal(kp_consolidation_unwanted(off, buf, sizeof(buf), &silent),
                        "NodePool \"never\" has consolidation disabled");
    assert_false(silent);
    assert_string_equal(
        kp_consolidation_unwanted(when_empty, buf, sizeof(buf), &silent),
        "NodePool \"we\" has consolidation policy WhenEmpty, but node is not empty");
    assert_string_equal(kp_consolidation_unwanted(bare, buf, sizeof(buf), &silent),
                        "Instance Type \"\" not found");
    relabel(&f, bare, "'node.kubernetes.io/instance-type':'small'");
    assert_string_equal(kp_consolidation_unwanted(bare, buf, sizeof(buf), &silent),
                        "Node does not have label \"karpenter.sh/capacity-type\"");
    relabel(&f, bare,
            "'node.kubernetes.io/instance-type':'small','karpenter.sh/capacity-type':'on-demand'");
    assert_string_equal(kp_consolidation_unwanted(bare, buf, sizeof(buf), &silent),
                        "Node does not have label \"topology.kubernetes.io/zone\"");
    assert_false(silent);
    fx_done(&f);
}

/* EvictionCost = clamp(1 + priority / 2^25, -10, 10); lifetime remaining of expireAfter. */
static void test_disruption_costs(void **state)
{
    struct kp_entry *p0 = pod("n", "ReplicaSet", "", "Running");
    struct kp_entry *hi = decode(kp_pod_decode,
                                 "{'metadata':{'name':'h','namespace':'d','uid':'h',"
                                 "'resourceVersion':'1'},'spec':{'priority':%d,"
                                 "'containers':[{'name':'c'}]}}",
                                 1 << 25);
    struct kp_entry *top =
        decode(kp_pod_decode, "{'metadata':{'name':'t','namespace':'d','uid':'t',"
                              "'resourceVersion':'1'},'spec':{'priority':"
                              "1000000000,'containers':[{'name':'c'}]}}");
    struct kp_entry *low =
        decode(kp_pod_decode, "{'metadata':{'name':'l','namespace':'d','uid':'l',"
                              "'resourceVersion':'1'},'spec':{'priority':"
                              "-1000000000,'containers':[{'name':'c'}]}}");
    struct kp_entry *nc = decode(
        kp_nodeclaim_decode,
        "{'metadata':{'name':'x','uid':'x','resourceVersion':'1','creationTimestamp':'" T0 "'},"
        "'spec':{'nodeClassRef':{'group':'g','kind':'K','name':'c'},'requirements':[],"
        "'expireAfter':'720h'}}");
    struct kp_entry *forever = decode(
        kp_nodeclaim_decode,
        "{'metadata':{'name':'y','uid':'y','resourceVersion':'1','creationTimestamp':'" T0 "'},"
        "'spec':{'nodeClassRef':{'group':'g','kind':'K','name':'c'},'requirements':[],"
        "'expireAfter':'Never'}}");

    (void)state;
    assert_true(kp_eviction_cost(kp_pod_view(p0)) == 1.0);
    assert_true(kp_eviction_cost(kp_pod_view(hi)) == 2.0);
    assert_true(kp_eviction_cost(kp_pod_view(top)) == 10.0);
    assert_true(kp_eviction_cost(kp_pod_view(low)) == -10.0);
    assert_true(kp_lifetime_remaining(kp_nodeclaim_view(nc), t0) == 1.0);
    assert_true(kp_lifetime_remaining(kp_nodeclaim_view(nc), t0 + 360LL * 3600 * SEC) == 0.5);
    assert_true(kp_lifetime_remaining(kp_nodeclaim_view(nc), t0 + 800LL * 3600 * SEC) == 0.0);
    assert_true(kp_lifetime_remaining(kp_nodeclaim_view(forever), t0 + 800LL * 3600 * SEC) == 1.0);
    kp_entry_unref(p0);
    kp_entry_unref(hi);
    kp_entry_unref(top);
    kp_entry_unref(low);
    kp_entry_unref(nc);
    kp_entry_unref(forever);
}

/* An instance type name with one on-demand offering in zone z1 at price (micro-USD/h). */
static void itype(struct kp_instance_type *it, const char *name, int64_t price)
{
    const char *z = "z1", *ct = "on-demand";

    memset(it, 0, sizeof(*it));
    it->name = (char *)(uintptr_t)name; /* never freed: kp_reqset_done only below */
    it->offerings = kp_calloc(1, sizeof(*it->offerings));
    assert_non_null(it->offerings);
    it->n_offerings = 1;
    it->offerings[0].available = true;
    it->offerings[0].price_micro_usd = price;
    assert_int_equal(kp_reqset_add(&it->offerings[0].reqs, KP_LABEL_ZONE, KP_SEL_IN, &z, 1, 0), 0);
    assert_int_equal(
        kp_reqset_add(&it->offerings[0].reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1, 0), 0);
}

static void itype_done(struct kp_instance_type *it)
{
    kp_reqset_done(&it->offerings[0].reqs);
    kp_free(it->offerings);
}

/* The price of a node: its type's offering in its zone and capacity type; -1 when unknown. */
static void test_node_price(void **state)
{
    struct kp_instance_type t[2];
    struct kp_entry *n = node("n", "True", "");
    struct kp_entry *labelled =
        decode(kp_node_decode, "{'metadata':{'name':'n','uid':'u',"
                               "'resourceVersion':'1','labels':{" LABELS_OK "}}}");
    struct kp_entry *other_zone = decode(
        kp_node_decode, "{'metadata':{'name':'n','uid':'u','resourceVersion':'1','labels':{"
                        "'node.kubernetes.io/instance-type':'small','karpenter.sh/capacity-type':"
                        "'on-demand','topology.kubernetes.io/zone':'z9'}}}");

    (void)state;
    itype(&t[0], "large", 400);
    itype(&t[1], "small", 100);
    assert_int_equal(kp_node_price(t, 2, &kp_node_view(labelled)->meta.labels), 100);
    assert_int_equal(kp_node_price(t, 1, &kp_node_view(labelled)->meta.labels), -1);
    assert_int_equal(kp_node_price(t, 2, &kp_node_view(other_zone)->meta.labels), -1);
    assert_int_equal(kp_node_price(t, 2, &kp_node_view(n)->meta.labels), -1);
    assert_int_equal(kp_node_price(NULL, 0, &kp_node_view(labelled)->meta.labels), -1);
    itype_done(&t[0]);
    itype_done(&t[1]);
    kp_entry_unref(n);
    kp_entry_unref(labelled);
    kp_entry_unref(other_zone);
}

/* The decision from a simulation: DELETE when every running pod fits on initialized nodes with
 * no new NodeClaim; pending pods that fit nowhere do not matter; REPLACE only with options
 * strictly cheaper than the candidate; otherwise nothing, with Karpenter's sentence. */
static void test_consolidation_decide(void **state)
{
    struct kp_entry *run = pod("gone", "ReplicaSet", "", "Running");
    struct kp_entry *pend = pod(NULL, "ReplicaSet", "", "Pending");
    const struct kp_pod_view *pods[2] = {kp_pod_view(run), kp_pod_view(pend)};
    struct kp_sched_node nodes[2] = {{.name = "n1", .initialized = true},
                                     {.name = "n2", .initialized = false}};
    struct kp_sched_node inflight[1] = {{.name = "nc9"}};
    struct kp_sched_input in = {.pods = pods,
                                .n_pods = 2,
                                .nodes = nodes,
                                .n_nodes = 2,
                                .inflight = inflight,
                                .n_inflight = 1};
    struct kp_sched_result res[2];
    struct kp_instance_type t[3];
    const struct kp_instance_type *opts[3] = {&t[0], &t[1], &t[2]};
    struct kp_sched_claim claims[2] = {{.types = opts, .n_types = 3}, {.types = opts}};
    struct kp_sched_plan plan = {.claims = claims, .n_claims = 0, .pods = res, .n_pods = 2};
    struct kp_consolidation_decision d;
    char too_big[] = "too big", no_room[] = "no room";
    const char *moving[] = {"gone"}, *others[] = {"other"};

    (void)state;
    itype(&t[0], "tiny", 50);
    itype(&t[1], "small", 100);
    itype(&t[2], "large", 400);
    memset(res, 0, sizeof(res));
    res[0] = (struct kp_sched_result){.where = KP_SCHED_NODE, .index = 0};
    res[1] = (struct kp_sched_result){.where = KP_SCHED_FAILED, .error = too_big};
    assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, 100, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_DELETE); /* the pending pod's failure does not count */
    kp_consolidation_decision_done(&d);

    res[0] = (struct kp_sched_result){.where = KP_SCHED_FAILED, .error = no_room};
    assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, 100, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_NOTHING);
    assert_string_equal(d.why, "not all pods would schedule, default/p => no room");

    res[0] = (struct kp_sched_result){.where = KP_SCHED_NODE, .index = 1};
    assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, 100, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_NOTHING);
    assert_string_equal(d.why, "would schedule against uninitialized node/n2");

    res[0] = (struct kp_sched_result){.where = KP_SCHED_NODE, .index = 2};
    assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, 100, &d), 0);
    assert_string_equal(d.why, "would schedule against uninitialized nodeclaim/nc9");
    /* A pod of a node already being deleted (not one of those taken away) may land there. */
    assert_int_equal(kp_consolidation_decide(&in, &plan, others, 1, 100, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_DELETE);
    res[0] = (struct kp_sched_result){.where = KP_SCHED_NODE, .index = 1};
    assert_int_equal(kp_consolidation_decide(&in, &plan, others, 1, 100, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_DELETE);
    res[0] = (struct kp_sched_result){.where = KP_SCHED_FAILED, .error = no_room};
    assert_int_equal(kp_consolidation_decide(&in, &plan, others, 1, 100, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_NOTHING); /* but it must fit somewhere */

    res[0] = (struct kp_sched_result){.where = KP_SCHED_CLAIM, .index = 0};
    plan.n_claims = 2;
    assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, 100, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_NOTHING);
    assert_string_equal(d.why, "Can't remove without creating 2 candidates");

    /* One claim: only the options strictly cheaper than the candidate remain. */
    plan.n_claims = 1;
    assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, 400, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_REPLACE);
    assert_int_equal(d.n_types, 2);
    assert_string_equal(d.types[0]->name, "tiny");
    assert_string_equal(d.types[1]->name, "small");
    kp_consolidation_decision_done(&d);
    assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, 50, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_NOTHING); /* equal is not cheaper */
    assert_string_equal(d.why, "Can't replace with a cheaper node");
    assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, -1, &d), 0);
    assert_int_equal(d.verdict, KP_CONSOL_NOTHING); /* unknown price: no replacement */
    /* minValues 3 on the instance type: two cheaper options are not enough to launch. */
    {
        const char *names[] = {"tiny", "small", "large"};

        assert_int_equal(
            kp_reqset_add(&claims[0].reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, names, 3, 3), 0);
        assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, 400, &d), 0);
        assert_int_equal(d.verdict, KP_CONSOL_NOTHING);
        assert_string_equal(d.why, "Filtering by price: minValues requirement is not met");
        assert_int_equal(kp_consolidation_decide(&in, &plan, moving, 1, 500, &d), 0);
        assert_int_equal(d.verdict, KP_CONSOL_REPLACE); /* all three cheaper: it still holds */
        kp_consolidation_decision_done(&d);
        kp_reqset_done(&claims[0].reqs);
    }
    for (size_t i = 0; i < 3; i++)
        itype_done(&t[i]);
    kp_entry_unref(run);
    kp_entry_unref(pend);
}

/* --- the Drift method (drift.h) -------------------------------------------------------------- */

#define DRIFTED_AT(at) COND("Drifted", "True", at)

/* Drift candidates: Drifted=True disruption candidates of dynamic pools; a do-not-disrupt pod
 * holds a node unless its NodeClaim has a terminationGracePeriod (drift is eventual). */
static void test_drift_candidates(void **state)
{
    struct fx f = {0};
    struct kp_entry *np = keep(&f, nodepool("np", "'consolidateAfter':'30s'", ""));
    struct kp_entry *stat =
        keep(&f, nodepool("static", "'consolidateAfter':'0s'", "'replicas':2,"));
    struct kp_dnode *old =
        add(&f, "a", T0, INITIALIZED "," DRIFTED_AT("2026-01-01T00:05:00Z"), np, "True");
    struct kp_dnode *young =
        add(&f, "b", T0, INITIALIZED "," DRIFTED_AT("2026-01-01T00:09:00Z"), np, "True");
    struct kp_dnode *empty =
        add(&f, "c", T0, INITIALIZED "," DRIFTED_AT("2026-01-01T00:09:30Z"), np, "True");
    struct kp_dnode *fine = add(&f, "d", T0, INITIALIZED, np, "True");
    struct kp_dnode *st = add(&f, "e", T0, INITIALIZED "," DRIFTED_AT(T0), stat, "True");
    struct kp_dnode *held = add(&f, "g", T0, INITIALIZED "," DRIFTED_AT(T0), np, "True");
    struct kp_dnode *graced = add(&f, "h", T0, INITIALIZED "," DRIFTED_AT(T0), np, "True");
    size_t idx[8], n;

    (void)state;
    old->reschedulable = young->reschedulable = held->reschedulable = graced->reschedulable = 1;
    held->blocking_pod = graced->blocking_pod = "default/keep";
    sn_of(&f, graced)->nodeclaim = keep(
        &f, decode(kp_nodeclaim_decode,
                   "{'metadata':{'name':'h','uid':'h-uid','resourceVersion':'3',"
                   "'creationTimestamp':'" T0 "','labels':{'karpenter.sh/nodepool':'np'}},"
                   "'spec':{'nodeClassRef':{'group':'karpenter.kpssh.dev','kind':'SSHNodeClass',"
                   "'name':'c'},'requirements':[],'terminationGracePeriod':'1h'},"
                   "'status':{'providerID':'kpssh://p/h','conditions':[" INITIALIZED
                   "," DRIFTED_AT(T0) "]}}"));
    assert_true(kp_drift_candidate(old, t0));
    assert_false(kp_drift_candidate(fine, t0));  /* not drifted */
    assert_false(kp_drift_candidate(st, t0));    /* static NodePool */
    assert_false(kp_drift_candidate(held, t0));  /* do-not-disrupt pod */
    assert_true(kp_drift_candidate(graced, t0)); /* ... unless a terminationGracePeriod forces */
    sn_of(&f, young)->flags |= KP_STATE_NODE_NOMINATED;
    assert_false(kp_drift_candidate(young, t0)); /* the other candidate rules hold */
    sn_of(&f, young)->flags &= ~(uint32_t)KP_STATE_NODE_NOMINATED;
    n = kp_drift_candidates(f.d, f.n, t0, idx);
    assert_int_equal(n, 4);
    assert_ptr_equal(&f.d[idx[0]], empty);  /* no reschedulable pod: first */
    assert_ptr_equal(&f.d[idx[1]], graced); /* then the oldest Drifted transition, then name */
    assert_ptr_equal(&f.d[idx[2]], old);
    assert_ptr_equal(&f.d[idx[3]], young);
    fx_done(&f);
}

/* An expiring NodeClaim of node class group/kind for state node d, made at T0 with
 * spec.expireAfter after. */
static void expiring_as(struct fx *f, struct kp_dnode *d, const char *after, const char *group,
                        const char *kind)
{
    const char *name = d->sn->name;

    sn_of(f, d)->nodeclaim =
        keep(f, decode(kp_nodeclaim_decode,
                       "{'metadata':{'name':'%s','uid':'%s-uid','resourceVersion':'3',"
                       "'creationTimestamp':'" T0 "','labels':{'karpenter.sh/nodepool':'np'}},"
                       "'spec':{'nodeClassRef':{'group':'%s','kind':'%s','name':'c'},"
                       "'requirements':[],'expireAfter':'%s'},"
                       "'status':{'providerID':'kpssh://p/%s','conditions':[" INITIALIZED "]}}",
                       name, name, group, kind, after, name));
}

/* The same, of the fake provider's class. */
static void expiring(struct fx *f, struct kp_dnode *d, const char *after)
{
    expiring_as(f, d, after, KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND);
}

/* kp_expiry_candidates at T0 + 1h: expired nodes whose pods need a place, while more than the
 * replacement timeout and a pass of the 15 min grace is left (expired less than 4 min 50 s
 * ago), soonest expiry first, then by name; do-not-disrupt does not hold them. */
static void test_expiry_candidates(void **state)
{
    struct fx f = {0};
    struct kp_entry *np = keep(&f, nodepool("np", "'consolidateAfter':'30s'", ""));
    struct kp_dnode *a = add(&f, "a", T0, INITIALIZED, np, "True");      /* expired 1 min ago */
    struct kp_dnode *b = add(&f, "b", T0, INITIALIZED, np, "True");      /* 3 min ago */
    struct kp_dnode *b2 = add(&f, "b2", T0, INITIALIZED, np, "True");    /* 3 min ago too */
    struct kp_dnode *idle = add(&f, "c", T0, INITIALIZED, np, "True");   /* no pod */
    struct kp_dnode *young = add(&f, "d", T0, INITIALIZED, np, "True");  /* not expired */
    struct kp_dnode *late = add(&f, "e", T0, INITIALIZED, np, "True");   /* 4 min 51 s ago */
    struct kp_dnode *marked = add(&f, "g", T0, INITIALIZED, np, "True"); /* marked */
    struct kp_dnode *never = add(&f, "h", T0, INITIALIZED, np, "True");
    struct kp_fake_provider *fp = NULL;
    struct kp_provider p;
    size_t idx[8], n;

    (void)state;
    assert_int_equal(kp_fake_provider_new(&fp), 0);
    p = kp_fake_provider_as_provider(fp);
    expiring(&f, a, "59m");
    expiring(&f, b, "57m");
    expiring(&f, b2, "57m");
    expiring(&f, idle, "50m");
    expiring(&f, young, "2h");
    expiring(&f, late, "55m9s");
    expiring(&f, marked, "50m");
    expiring(&f, never, "Never");
    for (size_t i = 0; i < f.n; i++)
        f.d[i].reschedulable = 1;
    idle->reschedulable = 0;
    a->blocking_pod = "default/keep"; /* forceful: no do-not-disrupt holds an expiry */
    sn_of(&f, marked)->flags |= KP_STATE_NODE_MARKED_FOR_DELETION;
    n = kp_expiry_candidates(&p, f.d, f.n, t0 + 3600 * SEC, idx);
    assert_int_equal(n, 3);
    assert_ptr_equal(&f.d[idx[0]], b);
    assert_ptr_equal(&f.d[idx[1]], b2);
    assert_ptr_equal(&f.d[idx[2]], a);
    /* Expired 4 min 49 s ago: still one. */
    expiring(&f, late, "55m11s");
    n = kp_expiry_candidates(&p, f.d, f.n, t0 + 3600 * SEC, idx);
    assert_int_equal(n, 4);
    assert_ptr_equal(&f.d[idx[0]], late);
    /* Another provider's NodeClaim is not ours to expire. */
    expiring_as(&f, b, "57m", "karpenter.k8s.aws", "EC2NodeClass");
    assert_int_equal(kp_expiry_candidates(&p, f.d, f.n, t0 + 3600 * SEC, idx), 3);
    kp_fake_provider_free(fp);
    fx_done(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_sentences),
        cmocka_unit_test(test_emptiness_wants),
        cmocka_unit_test(test_pool_counts),
        cmocka_unit_test(test_select_order),
        cmocka_unit_test(test_select_budgets),
        cmocka_unit_test(test_select_schedule),
        cmocka_unit_test(test_select_skips_blocked),
        cmocka_unit_test(test_select_only_the_command),
        cmocka_unit_test(test_pod_events),
        cmocka_unit_test(test_pod_event_dedupe),
        cmocka_unit_test(test_consolidatable_plan),
        cmocka_unit_test(test_consolidation_unwanted),
        cmocka_unit_test(test_disruption_costs),
        cmocka_unit_test(test_node_price),
        cmocka_unit_test(test_consolidation_decide),
        cmocka_unit_test(test_drift_candidates),
        cmocka_unit_test(test_expiry_candidates),
        cmocka_unit_test(test_budget_report),
        cmocka_unit_test(test_invalid_do_not_disrupt),
        cmocka_unit_test(test_do_not_disrupt_events),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
