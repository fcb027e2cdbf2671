/* tests/unit/test-consolidation.c: consolidation's searches (core/disruption/consolidation.h)
 * over real simulations, one table row per situation: single-node consolidation, multi-node
 * consolidation, the decision for a given set of nodes, the re-check a command gets at its
 * validation, and what a pass does with replacements in flight (kp_replace_decide).
 *
 * Each row is a small cluster: NodePools, nodes of the fake provider's catalog with the pods
 * bound to them, pending pods. The fixture puts the objects in stores as the informers would,
 * gathers the kp_dnode array as the controller does (kp_dnode_count_pods over the node's pods),
 * builds the simulation (kp_sim_build with the fake provider) and asks the search; the row says
 * what must come out: which nodes, DELETE or REPLACE, the replacement's options in order, and
 * every Unconsolidatable sentence, word for word.
 *
 * The catalog: c1, c2, c4, c8 with 1, 2, 4, 8 CPUs at 100, 200, 400, 800 micro-USD an hour, one
 * on-demand offering in zone z1 each. */
#include "kp-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/str.h"
#include "k8s/rfc3339.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/disruption/consolidation.h"
#include "core/disruption/disruption.h"
#include "core/provider.h"
#include "core/provisioning/scheduler.h"
#include "core/provisioning/simulation.h"
#include "core/state/cluster.h"
#include "kp-fake-provider.h"

#define SEC 1000000LL
#define T0 "2026-01-01T00:00:00Z"
#define MAXN 128 /* nodes of a world: the 100-candidate cap needs more than 100 */
#define MAXP 8   /* pods per node in a row */

#define decode(fn, ...) kp_test_decode(fn, true, __VA_ARGS__)

#define COND(type, st)                                                                             \
    "{'type':'" type "','status':'" st "','reason':'R','lastTransitionTime':'" T0 "'}"
#define CONSOLIDATABLE COND("Initialized", "True") "," COND("Consolidatable", "True")

static int64_t t0, now;

/* --- the world: stores, fake provider, state nodes, simulation --------------------------------- */

/* A NodePool of a row: name, disruption budget (NULL: 100%), template requirements (JSON list
 * members, ' quoted) and weight. */
struct pspec {
    const char *name, *budget, *reqs;
    int weight;
};

/* A node of a row: name, NodePool, instance type, the CPU (millicores) of each pod bound to
 * it (0 ends), and what differs from a Consolidatable node created at T0 with pods of
 * priority 0. */
struct nspec {
    const char *name, *pool, *type;
    int cpu[MAXP];
    int created_sec;         /* NodeClaim creationTimestamp: T0 + this */
    const char *expire;      /* NodeClaim expireAfter (NULL: none) */
    int priority;            /* of its pods */
    bool do_not_disrupt;     /* its first pod has karpenter.sh/do-not-disrupt: "true" */
    bool pdb;                /* a PDB blocks its pods' eviction (the sentence node_pods sets) */
    bool not_consolidatable; /* no Consolidatable condition: no candidate, a destination */
    bool uninitialized;      /* a Node not initialized yet */
    bool inflight;           /* a NodeClaim without a Node yet */
    bool deleting;           /* being deleted (so marked for deletion): its pods move */
};

struct world {
    struct kp_store *pods, *pools;
    struct kp_fake_provider *fp;
    struct kp_provider prov;
    struct kp_core_env env;
    struct kp_sim_sources src;
    struct kp_state_node sn[MAXN];
    struct kp_dnode d[MAXN];
    char *blocking[MAXN];
    struct kp_state_snapshot snap;
    struct kp_entry *held[3 * MAXN + 8];
    size_t n, n_held, n_pending;
    struct kp_sim sim;
    bool built;
    char told[2048]; /* Unconsolidatable sentences: "node: why|node: why" */
};

static int setup(void **state)
{
    (void)state;
    assert_int_equal(kp_rfc3339_parse(T0, strlen(T0), &t0), 0);
    now = t0 + 3600 * SEC;
    return 0;
}

static struct kp_entry *hold(struct world *w, struct kp_entry *e)
{
    assert_true(w->n_held < KP_ARRAY_SIZE(w->held));
    w->held[w->n_held++] = e;
    return e;
}

static void put(struct kp_store *s, struct kp_entry *e)
{
    assert_int_equal(kp_store_put(s, e, /* ret_old= */ NULL), 0);
}

static void add_in(struct kp_reqset *s, const char *key, const char *value)
{
    assert_int_equal(kp_reqset_add(s, key, KP_SEL_IN, &value, 1, 0), 0);
}

/* Publishes the catalog of the header comment. */
static void publish(struct world *w)
{
    static const struct {
        const char *name;
        int64_t cpu, price;
    } cat[] = {{"c1", 1000, 100}, {"c2", 2000, 200}, {"c4", 4000, 400}, {"c8", 8000, 800}};
    struct kp_instance_types t = {0};

    t.v = kp_calloc(KP_ARRAY_SIZE(cat), sizeof(*t.v));
    assert_non_null(t.v);
    for (size_t i = 0; i < KP_ARRAY_SIZE(cat); i++) {
        struct kp_instance_type *it = &t.v[t.n++];
        struct kp_offering *o;

        it->name = kp_strdup(cat[i].name);
        assert_non_null(it->name);
        add_in(&it->reqs, KP_LABEL_INSTANCE_TYPE, cat[i].name);
        add_in(&it->reqs, KP_LABEL_CAPACITY_TYPE, KP_CAPACITY_TYPE_ON_DEMAND);
        add_in(&it->reqs, KP_LABEL_ZONE, "z1");
        assert_int_equal(kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", cat[i].cpu), 0);
        assert_int_equal(kp_provider_res_add(&it->capacity, &it->n_capacity, "pods", 110000), 0);
        it->offerings = kp_calloc(1, sizeof(*it->offerings));
        assert_non_null(it->offerings);
        it->n_offerings = 1;
        o = &it->offerings[0];
        add_in(&o->reqs, KP_LABEL_ZONE, "z1");
        add_in(&o->reqs, KP_LABEL_CAPACITY_TYPE, KP_CAPACITY_TYPE_ON_DEMAND);
        o->price_micro_usd = cat[i].price;
        o->available = true;
    }
    assert_int_equal(kp_fake_provider_publish(w->fp, &t), 0);
}

static struct world *world_new(void)
{
    struct world *w = kp_calloc(1, sizeof(*w));

    assert_non_null(w);
    assert_int_equal(kp_store_new(&w->pods), 0);
    assert_int_equal(kp_store_new(&w->pools), 0);
    assert_int_equal(kp_store_add_index(w->pods, KP_INDEX_POD_NODE, kp_index_pod_node), 0);
    assert_int_equal(kp_fake_provider_new(&w->fp), 0);
    publish(w);
    w->prov = kp_fake_provider_as_provider(w->fp);
    w->env.provider = &w->prov;
    w->src = (struct kp_sim_sources){.env = &w->env, .pods = w->pods, .nodepools = w->pools};
    return w;
}

static void world_free(struct world *w)
{
    if (w->built)
        kp_sim_done(&w->sim);
    for (size_t i = 0; i < w->n; i++)
        kp_free(w->blocking[i]);
    for (size_t i = 0; i < w->n_held; i++)
        kp_entry_unref(w->held[i]);
    kp_store_free(w->pods);
    kp_store_free(w->pools);
    kp_fake_provider_free(w->fp);
    kp_free(w);
}

static void world_pool(struct world *w, const struct pspec *p)
{
    put(w->pools,
        decode(
            kp_nodepool_decode,
            "{'metadata':{'name':'%s','uid':'%s-uid','resourceVersion':'1'},"
            "'spec':{'weight':%d,'disruption':{'consolidateAfter':'0s',"
            "'budgets':[{'nodes':'%s'}]},'template':{'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
            "','kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},"
            "'requirements':[%s]}}},'status':{'conditions':[" COND("Ready", "True") "]}}",
            p->name, p->name, p->weight, p->budget ? p->budget : "100%", p->reqs ? p->reqs : ""));
}

/* A pod of cpu millicores, bound to node (NULL: pending, marked Unschedulable). */
static void world_pod(struct world *w, const char *node, int i, int cpu, int priority, bool dnd)
{
    char name[64];

    if (node)
        (void)snprintf(name, sizeof(name), "%s-%d", node, i);
    else
        (void)snprintf(name, sizeof(name), "pending-%zu", w->n_pending++);
    put(w->pods,
        decode(kp_pod_decode,
               "{'metadata':{'name':'%s','namespace':'default','uid':'%s-uid',"
               "'resourceVersion':'1','creationTimestamp':'" T0 "','ownerReferences':[{"
               "'apiVersion':'apps/v1','kind':'ReplicaSet','name':'o','uid':'o',"
               "'controller':true}]%s},'spec':{%s%s%s'priority':%d,'containers':[{'name':'c',"
               "'resources':{'requests':{'cpu':'%dm'}}}]},'status':{'phase':'%s'%s}}",
               name, name, dnd ? ",'annotations':{'karpenter.sh/do-not-disrupt':'true'}" : "",
               node ? "'nodeName':'" : "", node ? node : "", node ? "'," : "", priority, cpu,
               node ? "Running" : "Pending",
               node ? ""
                    : ",'conditions':[{'type':'PodScheduled','status':'False','reason':"
                      "'Unschedulable'}]"));
}

/* A Ready Node of instance type type (c1 .. c8: its CPUs) and NodePool pool, with
 * annotations (JSON members, ' quoted). */
static struct kp_entry *node_entry(struct world *w, const char *name, const char *type,
                                   const char *pool, const char *annotations)
{
    int cpu = type[1] - '0';

    return hold(
        w, decode(kp_node_decode,
                  "{'metadata':{'name':'%s','uid':'%s-n','resourceVersion':'1',"
                  "'creationTimestamp':'" T0 "','annotations':{%s},"
                  "'labels':{'node.kubernetes.io/instance-type':'%s',"
                  "'karpenter.sh/capacity-type':'on-demand','topology.kubernetes.io/zone':'z1',"
                  "'karpenter.sh/nodepool':'%s','kubernetes.io/hostname':'%s'}},"
                  "'spec':{'providerID':'fake://%s'},'status':{'conditions':[{'type':'Ready',"
                  "'status':'True'}],'allocatable':{'cpu':'%d','pods':'110'},"
                  "'capacity':{'cpu':'%d','pods':'110'}}}",
                  name, name, annotations, type, pool, name, name, cpu, cpu));
}

static void world_node(struct world *w, const struct nspec *s)
{
    struct kp_state_node *sn = &w->sn[w->n];
    const struct kp_nodeclaim_view *nc;
    const struct kp_node_view *nv;
    char created[40];
    int64_t at = t0 + (int64_t)s->created_sec * SEC;

    assert_true(w->n < MAXN);
    assert_int_equal(kp_rfc3339_format(at, KP_RFC3339_SECONDS, created, sizeof(created)), 0);
    memset(sn, 0, sizeof(*sn));
    sn->nodeclaim =
        hold(w, decode(kp_nodeclaim_decode,
                       "{'metadata':{'name':'%s','uid':'%s-nc','resourceVersion':'3',"
                       "'creationTimestamp':'%s','labels':{'karpenter.sh/nodepool':'%s'}},"
                       "'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
                       "','kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[]%s%s%s},"
                       "'status':{'providerID':'fake://%s','conditions':[%s]}}",
                       s->name, s->name, created, s->pool, s->expire ? ",'expireAfter':'" : "",
                       s->expire ? s->expire : "", s->expire ? "'" : "", s->name,
                       s->not_consolidatable ? COND("Initialized", "True") : CONSOLIDATABLE));
    sn->node = node_entry(w, s->name, s->type, s->pool, "");
    nc = kp_nodeclaim_view(sn->nodeclaim);
    nv = kp_node_view(sn->node);
    sn->provider_id = nc->provider_id;
    sn->name = sn->node_name = nv->e.name;
    sn->nodeclaim_name = nc->e.name;
    sn->nodepool = nc->nodepool;
    sn->flags = KP_STATE_NODE_MANAGED | KP_STATE_NODE_REGISTERED | KP_STATE_NODE_INITIALIZED;
    /* An in-flight NodeClaim's resources come from its status; the Node's stand in for them. */
    sn->allocatable = nv->allocatable;
    sn->capacity = nv->capacity;
    if (s->uninitialized || s->inflight)
        sn->flags &= ~(uint32_t)(KP_STATE_NODE_INITIALIZED | KP_STATE_NODE_REGISTERED);
    if (s->deleting)
        sn->flags |= KP_STATE_NODE_DELETING | KP_STATE_NODE_MARKED_FOR_DELETION;
    if (s->inflight) {
        sn->node = NULL;
        sn->node_name = NULL;
        sn->name = nc->e.name;
    }
    for (int i = 0; i < MAXP && s->cpu[i]; i++)
        world_pod(w, s->name, i, s->cpu[i], s->priority, s->do_not_disrupt && i == 0);
    if (s->pdb)
        assert_non_null(w->blocking[w->n] = kp_strdup("pdb prevents pod evictions"));
    w->n++;
}

/* The kp_dnode of every state node, as the controller's pass gathers them. */
static void world_gather(struct world *w)
{
    for (size_t i = 0; i < w->n; i++) {
        struct kp_dnode *d = &w->d[i];
        struct kp_store_list l = {0};
        const struct kp_pod_view *pv[MAXP + 1], *blocking = NULL;
        struct kp_entry *np = NULL;
        char *pdb = w->blocking[i];

        memset(d, 0, sizeof(*d));
        d->sn = &w->sn[i];
        if (kp_store_get(w->pools, w->sn[i].nodepool, &np) == 0)
            d->np = kp_nodepool_view(hold(w, np));
        if (w->sn[i].node_name)
            assert_int_equal(kp_store_by_index(w->pods, KP_INDEX_POD_NODE, w->sn[i].node_name, &l),
                             0);
        assert_true(l.n <= MAXP);
        for (size_t k = 0; k < l.n; k++)
            pv[k] = kp_pod_view(l.v[k]);
        kp_dnode_count_pods(d, pv, l.n, now, &blocking);
        d->blocking_pod = blocking ? "default/blocking" : NULL;
        d->blocking_pdb = pdb;
        d->walked = true;
        kp_store_list_free(&l);
    }
}

/* (Re)builds the simulation over the state nodes as they are now. */
static void world_build(struct world *w)
{
    if (w->built)
        kp_sim_done(&w->sim);
    world_gather(w);
    w->snap = (struct kp_state_snapshot){.v = w->sn, .n = w->n, .taken_usec = now};
    assert_int_equal(kp_sim_build(&w->src, &w->snap, /* c= */ NULL, /* cx= */ NULL, &w->sim), 0);
    w->built = true;
}

static size_t world_find(const struct world *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (kp_streq(w->sn[i].name, name))
            return i;
    fail_msg("no node %s", name);
    return 0;
}

static void told_cb(void *ctx, const struct kp_dnode *d, const char *why)
{
    struct world *w = ctx;
    size_t len = strlen(w->told);

    (void)snprintf(w->told + len, sizeof(w->told) - len, "%s%s: %s", len ? "|" : "", d->sn->name,
                   why);
}

/* "a,b,c": the names of v[idx[0..n)]. */
static const char *names(const struct world *w, const size_t *idx, size_t n, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "", w->sn[idx[i]].name);
    return buf;
}

/* "c1,c2": the decision's replacement options. */
static const char *type_names(const struct kp_consolidation_decision *dec, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < dec->n_types && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "", dec->types[i]->name);
    return buf;
}

/* "a-0,b-0": the pods of the REPLACE's one new NodeClaim. */
static const char *claim_pods(const struct kp_consolidation_decision *dec, char *buf, size_t size)
{
    const struct kp_sched_claim *c = &dec->run.plan.claims[0];
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < c->n_pods && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "",
                                dec->in.pods[c->pods[i]]->e.name);
    return buf;
}

static const char *verdict_name(enum kp_consolidation_verdict v)
{
    return v == KP_CONSOL_DELETE ? "DELETE" : v == KP_CONSOL_REPLACE ? "REPLACE" : "NOTHING";
}

/* --- the rows -------------------------------------------------------------------------------- */

enum search {
    SINGLE = 0, /* kp_consolidation_candidates, then kp_consolidation_single */
    MULTI,      /* kp_consolidation_candidates, then kp_consolidation_multi */
    SET,        /* kp_consolidation_set over the nodes named in .set */
};

struct row {
    const char *name;
    enum search search;
    struct pspec pools[3]; /* none named: one pool "np" with no requirements */
    struct nspec nodes[8];
    int pending[4];  /* CPU of pending pods (0 ends) */
    const char *set; /* SET: "a,b" ("" : no node) */
    /* expected */
    const char *order; /* the candidates in consolidation order (NULL: not checked) */
    int found;         /* what single and multi return */
    enum kp_consolidation_verdict verdict;
    const char *picked; /* the nodes of the command ("" when none) */
    const char *types;  /* REPLACE: its options in order */
    const char *pool;   /* REPLACE: the replacement's NodePool (NULL: not checked) */
    const char *moved;  /* REPLACE: the pods on the replacement (NULL: not checked) */
    const char *told;   /* Unconsolidatable sentences, "node: why|..." ("" none) */
    const char *why;    /* SET: the NOTHING's sentence */
};

#define REQ_TYPES(vals)                                                                            \
    "{'key':'node.kubernetes.io/instance-type','operator':'In','values':[" vals "]}"
#define REQ_NOT_TYPES(vals)                                                                        \
    "{'key':'node.kubernetes.io/instance-type','operator':'NotIn','values':[" vals "]}"
#define CHEAPER "Can't replace with a cheaper node"

/* Not const: cmocka hands each row to its test as a void *. */
static struct row rows[] = {
    /* --- single-node consolidation -------------------------------------------------------- */
    {.name = "single: a node whose pods fit elsewhere is deleted",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .order = "a,b",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .told = ""},
    {.name = "single: pods that fit nowhere else: replaced by a strictly cheaper type",
     .nodes = {{.name = "a", .pool = "np", .type = "c4", .cpu = {1500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {1800}}},
     .order = "a,b",
     .found = 1,
     .verdict = KP_CONSOL_REPLACE,
     .picked = "a",
     .types = "c2", /* c4 fits too, but costs the same */
     .pool = "np",
     .moved = "a-0",
     .told = ""},
    {.name = "single: every cheaper type that holds the pods is an option, cheapest first",
     .nodes = {{.name = "a", .pool = "np", .type = "c8", .cpu = {900}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {1800}}},
     .found = 1,
     .verdict = KP_CONSOL_REPLACE,
     .picked = "a",
     .types = "c1,c2,c4",
     .told = ""},
    {.name = "single: a replacement of the same price is no saving",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {1500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {1800}}},
     .found = 0,
     .picked = "",
     .told = "a: " CHEAPER "|b: " CHEAPER},
    {.name = "single: only dearer types allowed: nothing",
     .pools = {{.name = "np", .budget = NULL, .reqs = REQ_TYPES("'c4','c8'")}},
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {1500}},
               {.name = "b", .pool = "np", .type = "c4", .cpu = {3800}}},
     .found = 0,
     .picked = "",
     .told = "a: " CHEAPER "|b: " CHEAPER},
    {.name = "single: a pod that fits nowhere blocks, with the scheduler's reason",
     .pools = {{.name = "np", .budget = NULL, .reqs = REQ_TYPES("'c1'")}},
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {1500}},
               {.name = "b", .pool = "np", .type = "c1", .cpu = {900}}},
     .found = 0,
     .picked = "",
     .told = "a: not all pods would schedule, default/a-0 => SCHEDFAIL|b: " CHEAPER},
    {.name = "single: the first candidate that fails is told, the next one is taken",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {1800}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "c", .pool = "np", .type = "c2", .cpu = {1000}}},
     .order = "a,b,c",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "b",
     .told = "a: " CHEAPER},
    {.name = "single: a node with a do-not-disrupt pod is no candidate, but takes pods",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}, .do_not_disrupt = true},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .order = "b",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "b",
     .told = ""},
    {.name = "single: a node whose pods a PDB holds is no candidate",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}, .pdb = true},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .order = "b",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "b",
     .told = ""},
    {.name = "single: an empty node is Emptiness's, not a candidate, but takes pods",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {0}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {1500}}},
     .order = "b",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "b",
     .told = ""},
    {.name = "single: a node not yet Consolidatable is no candidate",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {100}, .not_consolidatable = true},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .order = "b",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "b",
     .told = ""},
    {.name = "single: no candidate at all",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}, .do_not_disrupt = true}},
     .order = "",
     .found = 0,
     .picked = "",
     .told = ""},
    {.name = "single: a pool whose budget is spent is passed over, silently",
     .pools = {{.name = "np", .budget = "0"}, {.name = "other"}},
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "other", .type = "c2", .cpu = {500}}},
     .order = "a,b",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "b",
     .told = ""},
    {.name = "single: a candidate priced in its own pool, replaced from the pool that fits",
     .pools = {{.name = "big", .budget = NULL, .reqs = REQ_TYPES("'c4','c8'")},
               {.name = "small", .budget = NULL, .reqs = REQ_TYPES("'c1','c2'"), .weight = 10}},
     .nodes = {{.name = "a", .pool = "big", .type = "c4", .cpu = {1500}},
               {.name = "b", .pool = "small", .type = "c4", .cpu = {3900}}},
     .found = 1,
     .verdict = KP_CONSOL_REPLACE,
     .picked = "a",
     .types = "c2",
     .pool = "small",
     .told = ""},
    {.name = "single: the heavier pool without cheaper types wins the pods: nothing",
     .pools = {{.name = "big", .budget = NULL, .reqs = REQ_TYPES("'c4','c8'"), .weight = 10},
               {.name = "small", .budget = NULL, .reqs = REQ_TYPES("'c1','c2'")}},
     .nodes = {{.name = "a", .pool = "big", .type = "c4", .cpu = {1500}},
               {.name = "b", .pool = "small", .type = "c4", .cpu = {3900}}},
     .found = 0,
     .picked = "",
     .told = "a: " CHEAPER "|b: " CHEAPER},
    {.name = "single: the replacement must meet the NodePool's requirements",
     .pools = {{.name = "np", .budget = NULL, .reqs = REQ_NOT_TYPES("'c2'")}},
     .nodes = {{.name = "a", .pool = "np", .type = "c4", .cpu = {1500}},
               {.name = "b", .pool = "np", .type = "c4", .cpu = {3900}}},
     .found = 0,
     .picked = "",
     .told = "a: " CHEAPER "|b: " CHEAPER},
    {.name = "single: pods that would land on a Node not initialized: no decision on that",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {0}, .uninitialized = true}},
     .order = "a",
     .found = 0,
     .picked = "",
     .told = "a: would schedule against uninitialized node/b"},
    {.name = "single: pods that would land on a NodeClaim in flight: no decision on that",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {0}, .inflight = true}},
     .order = "a",
     .found = 0,
     .picked = "",
     .told = "a: would schedule against uninitialized nodeclaim/b"},
    {.name = "single: pods of a node being deleted may land on a NodeClaim in flight",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "c", .pool = "np", .type = "c4", .cpu = {100}, .not_consolidatable = true},
               {.name = "x", .pool = "np", .type = "c4", .cpu = {3950}, .deleting = true},
               {.name = "y", .pool = "np", .type = "c4", .cpu = {0}, .inflight = true}},
     .order = "a",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .told = ""},
    {.name = "single: a pending pod that fits nowhere does not matter",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .pending = {20000},
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .told = ""},
    {.name = "single: pending pods take the room first: a cheaper replacement instead",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .pending = {1400},
     .found = 1,
     .verdict = KP_CONSOL_REPLACE,
     .picked = "a",
     .types = "c1",
     .moved = "a-0",
     .told = ""},
    {.name = "single: pods that need two new nodes: nothing",
     .nodes = {{.name = "a", .pool = "np", .type = "c8", .cpu = {1500, 7000}},
               {.name = "b", .pool = "np", .type = "c8", .cpu = {7900}}},
     .found = 0,
     .picked = "",
     .order = "b,a", /* a has two pods */
     .told = "b: " CHEAPER "|a: Can't remove without creating 2 candidates"},

    /* Candidate order: Karpenter's DisruptionCost (v1.0-v1.13), lowest first: the eviction
     * costs of the pods times the lifetime left, then the oldest NodeClaim, then the name. */
    {.name = "order: fewest pods first",
     .nodes = {{.name = "a", .pool = "np", .type = "c4", .cpu = {100, 100}},
               {.name = "b", .pool = "np", .type = "c4", .cpu = {100}},
               {.name = "c", .pool = "np", .type = "c4", .cpu = {100}}},
     .order = "b,c,a",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "b",
     .told = ""},
    {.name = "order: on equal cost the older NodeClaim first",
     .nodes = {{.name = "a", .pool = "np", .type = "c4", .cpu = {100}, .created_sec = 20},
               {.name = "b", .pool = "np", .type = "c4", .cpu = {100}, .created_sec = 10}},
     .order = "b,a",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "b",
     .told = ""},
    {.name = "order: a high-priority pod costs more than two ordinary ones",
     .nodes = {{.name = "a", .pool = "np", .type = "c4", .cpu = {100}, .priority = 1 << 26},
               {.name = "b", .pool = "np", .type = "c4", .cpu = {100, 100}}},
     .order = "b,a",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "b",
     .told = ""},
    {.name = "order: a node near its expiry costs less",
     .nodes = {{.name = "a", .pool = "np", .type = "c4", .cpu = {100}},
               {.name = "z", .pool = "np", .type = "c4", .cpu = {100}, .expire = "2h"}},
     .order = "z,a",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "z",
     .told = ""},

    /* --- multi-node consolidation --------------------------------------------------------- */
    {.name = "multi: every candidate deleted when their pods fit elsewhere",
     .search = MULTI,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "c", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "d", .pool = "np", .type = "c8", .cpu = {100}, .not_consolidatable = true}},
     .order = "a,b,c",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b,c"},
    {.name = "multi: the largest prefix that fits is taken; a candidate left out takes pods",
     .search = MULTI,
     .pools = {{.name = "np", .budget = NULL, .reqs = REQ_TYPES("'c2'")}},
     .nodes =
         {{.name = "a", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "b", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "c", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "e", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "d", .pool = "np", .type = "c4", .cpu = {2800}, .not_consolidatable = true}},
     .order = "a,b,c,e",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b,c"}, /* c's pod goes to e; all four would need a c2 of their own type */
    {.name = "multi: the first probe fails: the search shrinks to two",
     .search = MULTI,
     .pools = {{.name = "np", .budget = NULL, .reqs = REQ_TYPES("'c2'")}},
     .nodes =
         {{.name = "a", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "b", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "c", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "e", .pool = "np", .type = "c2", .cpu = {600, 600, 600}},
          {.name = "d", .pool = "np", .type = "c4", .cpu = {2800}, .not_consolidatable = true}},
     .order = "a,b,c,e",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b"},
    {.name = "multi: a large set that fails falls back to fewer candidates",
     .search = MULTI,
     .pools = {{.name = "np", .budget = NULL, .reqs = REQ_TYPES("'c2'")}},
     .nodes =
         {{.name = "a", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "b", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "c", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "d", .pool = "np", .type = "c4", .cpu = {2800}, .not_consolidatable = true}},
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b"},
    {.name = "multi: three nodes into one cheaper, of another type than theirs",
     .search = MULTI,
     .nodes =
         {{.name = "a", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "b", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "c", .pool = "np", .type = "c2", .cpu = {600}},
          {.name = "d", .pool = "np", .type = "c4", .cpu = {2800}, .not_consolidatable = true}},
     .found = 1,
     .verdict = KP_CONSOL_REPLACE,
     .picked = "a,b,c",
     .types = "c1", /* c2 and c4 are cheaper than 600 too, but c2 is theirs */
     .moved = "c-0"},
    {.name = "multi: one replacement strictly cheaper than the sum, not their own type",
     .search = MULTI,
     .nodes =
         {{.name = "a", .pool = "np", .type = "c4", .cpu = {900}},
          {.name = "b", .pool = "np", .type = "c4", .cpu = {900}},
          {.name = "d", .pool = "np", .type = "c2", .cpu = {1900}, .not_consolidatable = true}},
     .found = 1,
     .verdict = KP_CONSOL_REPLACE,
     .picked = "a,b",
     .types = "c2",
     .moved = "a-0,b-0"},
    {.name = "multi: a replacement only of the candidates' own price: nothing",
     .search = MULTI,
     .nodes =
         {{.name = "a", .pool = "np", .type = "c4", .cpu = {1500}},
          {.name = "b", .pool = "np", .type = "c4", .cpu = {1500}},
          {.name = "d", .pool = "np", .type = "c2", .cpu = {1900}, .not_consolidatable = true}},
     .found = 0,
     .picked = ""},
    {.name = "multi: two new nodes needed: nothing",
     .search = MULTI,
     .nodes =
         {{.name = "a", .pool = "np", .type = "c8", .cpu = {7000}},
          {.name = "b", .pool = "np", .type = "c8", .cpu = {7000}},
          {.name = "d", .pool = "np", .type = "c2", .cpu = {1900}, .not_consolidatable = true}},
     .found = 0,
     .picked = ""},
    {.name = "multi: one candidate is single-node consolidation's",
     .search = MULTI,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "d", .pool = "np", .type = "c8", .cpu = {100}, .not_consolidatable = true}},
     .order = "a",
     .found = 0,
     .picked = ""},
    {.name = "multi: the pool's budget caps the candidates",
     .search = MULTI,
     .pools = {{.name = "np", .budget = "2"}},
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "c", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "d", .pool = "np", .type = "c8", .cpu = {100}, .not_consolidatable = true}},
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b"},
    {.name = "multi: budgets per pool, candidates of several pools together",
     .search = MULTI,
     .pools = {{.name = "np", .budget = "1"}, {.name = "other"}},
     .nodes =
         {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
          {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
          {.name = "c", .pool = "other", .type = "c2", .cpu = {300}},
          {.name = "d", .pool = "other", .type = "c8", .cpu = {100}, .not_consolidatable = true}},
     .order = "a,b,c",
     .found = 1,
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,c"},

    /* --- one set's decision (kp_consolidation_set) ---------------------------------------- */
    {.name = "set: no node at all deletes nothing, and that is a DELETE",
     .search = SET,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}}},
     .set = "",
     .verdict = KP_CONSOL_DELETE},
    {.name = "set: no node, a pending pod needing a node: no replacement for nothing",
     .search = SET,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {1900}}},
     .pending = {500},
     .set = "",
     .verdict = KP_CONSOL_NOTHING,
     .why = CHEAPER},
    {.name = "set: one node whose pods fit elsewhere",
     .search = SET,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .set = "a",
     .verdict = KP_CONSOL_DELETE},
    {.name = "set: one node, the replacement carries its pods",
     .search = SET,
     .nodes = {{.name = "a", .pool = "np", .type = "c4", .cpu = {300, 200}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {1900}}},
     .set = "a",
     .verdict = KP_CONSOL_REPLACE,
     .types = "c1,c2",
     .moved = "a-0,a-1"},
    {.name = "set: two nodes, the replacement carries the pods of both",
     .search = SET,
     .nodes = {{.name = "a", .pool = "np", .type = "c4", .cpu = {300}},
               {.name = "b", .pool = "np", .type = "c4", .cpu = {200}},
               {.name = "c", .pool = "np", .type = "c2", .cpu = {1900}}},
     .set = "a,b",
     .verdict = KP_CONSOL_REPLACE,
     .types = "c1,c2",
     .moved = "a-0,b-0"},
    {.name = "set: two nodes, only their own type would do: nothing",
     .search = SET,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {900}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {900}},
               {.name = "c", .pool = "np", .type = "c2", .cpu = {1900}}},
     .set = "a,b",
     .verdict = KP_CONSOL_NOTHING,
     .why = CHEAPER},
    {.name = "set: a do-not-disrupt pod stays put, so its node is deleted under it",
     .search = SET,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {1500}, .do_not_disrupt = true},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {1900}}},
     .set = "a",
     .verdict = KP_CONSOL_DELETE},
    {.name = "set: a pod that fits nowhere",
     .search = SET,
     .pools = {{.name = "np", .budget = NULL, .reqs = REQ_TYPES("'c1'")}},
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {1500}},
               {.name = "b", .pool = "np", .type = "c1", .cpu = {900}}},
     .set = "a",
     .verdict = KP_CONSOL_NOTHING,
     .why = "not all pods would schedule, default/a-0 => SCHEDFAIL"},
};

/* The scheduler's sentence for a pod no pool's types can hold: rows write SCHEDFAIL for it. */
static char schedfail[256];

/* The row's text with SCHEDFAIL replaced by the scheduler's sentence. */
static const char *expand(const char *s, char *buf, size_t size)
{
    const char *at = s ? strstr(s, "SCHEDFAIL") : NULL;

    if (!at)
        return s;
    (void)snprintf(buf, size, "%.*s%s%s", (int)(at - s), s, schedfail, at + strlen("SCHEDFAIL"));
    return buf;
}

static void world_of(struct world *w, const struct row *r)
{
    static const struct pspec dflt = {.name = "np"};

    if (!r->pools[0].name)
        world_pool(w, &dflt);
    for (size_t i = 0; i < KP_ARRAY_SIZE(r->pools) && r->pools[i].name; i++)
        world_pool(w, &r->pools[i]);
    for (size_t i = 0; i < KP_ARRAY_SIZE(r->nodes) && r->nodes[i].name; i++)
        world_node(w, &r->nodes[i]);
    for (size_t i = 0; i < KP_ARRAY_SIZE(r->pending) && r->pending[i]; i++)
        world_pod(w, NULL, 0, r->pending[i], 0, false);
    world_build(w);
}

static void check_replace(const struct row *r, const struct kp_consolidation_decision *dec)
{
    char got[512];

    if (r->verdict != KP_CONSOL_REPLACE)
        return;
    assert_string_equal(type_names(dec, got, sizeof(got)), r->types);
    assert_int_equal(dec->run.plan.n_claims, 1);
    if (r->pool)
        assert_string_equal(dec->in.pools[dec->run.plan.claims[0].pool].np->e.name, r->pool);
    if (r->moved)
        assert_string_equal(claim_pods(dec, got, sizeof(got)), r->moved);
}

static void run_row(const struct row *r)
{
    struct world *w = world_new();
    struct kp_consolidation_decision dec = {0};
    size_t cand[MAXN], n_cand, idx[MAXN], n_idx = 0, one = 0;
    char got[512], want[512];
    int found;

    world_of(w, r);
    n_cand = kp_consolidation_candidates(w->d, w->n, NULL, now, NULL, NULL, cand);
    if (r->order)
        assert_string_equal(names(w, cand, n_cand, got, sizeof(got)), r->order);
    switch (r->search) {
    case SINGLE:
        found = kp_consolidation_single(&w->sim, w->d, w->n, cand, n_cand, now, told_cb, w,
                                        /* stop= */ NULL, &one, &dec);
        n_idx = found > 0;
        idx[0] = one;
        break;
    case MULTI:
        found = kp_consolidation_multi(&w->sim, w->d, w->n, cand, n_cand, now, /* stop= */ NULL,
                                       idx, &n_idx, &dec);
        break;
    case SET:
        for (const char *p = r->set; *p; p += p[1] ? 2 : 1) {
            char nm[2] = {p[0], '\0'};

            idx[n_idx++] = world_find(w, nm);
        }
        found = kp_consolidation_set(&w->sim, w->d, idx, n_idx, now, &dec);
        break;
    }
    if (r->search == SET) {
        assert_int_equal(found, 0);
        if (dec.verdict != r->verdict)
            fail_msg("%s: %s (%s)", r->name, verdict_name(dec.verdict), dec.why);
        if (r->why)
            assert_string_equal(dec.why, expand(r->why, want, sizeof(want)));
        check_replace(r, &dec);
        goto out;
    }
    if (found != r->found || (found > 0 && dec.verdict != r->verdict))
        fail_msg("%s: found %d, %s, told \"%s\"", r->name, found, verdict_name(dec.verdict),
                 w->told);
    assert_string_equal(names(w, idx, found > 0 ? n_idx : 0, got, sizeof(got)), r->picked);
    if (found > 0)
        check_replace(r, &dec);
    if (r->told)
        assert_string_equal(w->told, expand(r->told, want, sizeof(want)));
out:
    kp_consolidation_decision_done(&dec);
    world_free(w);
}

static void test_row(void **state)
{
    run_row(*state);
}

/* The sentence SCHEDFAIL stands for: what the scheduler says of a 1500m pod when the only type
 * has 1 CPU, asked directly (a row must not pass by echoing whatever the search said). */
static void learn_schedfail(void)
{
    struct world *w = world_new();
    static const struct pspec np = {.name = "np", .reqs = REQ_TYPES("'c1'")};
    struct kp_sim_run run;
    struct kp_sched_input in;

    world_pool(w, &np);
    world_pod(w, NULL, 0, 1500, 0, false);
    world_build(w);
    assert_int_equal(kp_sim_prepare(&w->sim, NULL, 0, now, &run, &in), 0);
    assert_int_equal(kp_sched_solve(&in, &run.plan), 0);
    assert_int_equal(run.plan.pods[0].where, KP_SCHED_FAILED);
    assert_non_null(run.plan.pods[0].error);
    (void)snprintf(schedfail, sizeof(schedfail), "%s", run.plan.pods[0].error);
    kp_sim_run_done(&run);
    world_free(w);
}

/* --- the cap of 100 ---------------------------------------------------------------------------- */

/* 102 candidates whose pods all fit on one big node: the search takes the first 100 in
 * consolidation order, never more. */
static void test_multi_cap(void **state)
{
    struct world *w = world_new();
    static const struct pspec np = {.name = "np"};
    struct nspec big = {
        .name = "big", .pool = "np", .type = "c8", .cpu = {50}, .not_consolidatable = true};
    struct kp_consolidation_decision dec;
    size_t cand[MAXN], n_cand, idx[MAXN], n_idx = 0;
    char name[16];

    (void)state;
    world_pool(w, &np);
    world_node(w, &big);
    for (int i = 0; i < 102; i++) {
        struct nspec s = {.name = name, .pool = "np", .type = "c1", .cpu = {50}};

        (void)snprintf(name, sizeof(name), "n%03d", i);
        /* The names are copied into the decoded objects; the buffer is reused. */
        world_node(w, &s);
    }
    world_build(w);
    n_cand = kp_consolidation_candidates(w->d, w->n, NULL, now, NULL, NULL, cand);
    assert_int_equal(n_cand, 102);
    assert_int_equal(
        kp_consolidation_multi(&w->sim, w->d, w->n, cand, n_cand, now, NULL, idx, &n_idx, &dec), 1);
    assert_int_equal(n_idx, 100); /* Karpenter's cap, whatever the macro says */
    assert_int_equal(dec.verdict, KP_CONSOL_DELETE);
    assert_string_equal(w->sn[idx[0]].name, "n000");
    assert_string_equal(w->sn[idx[99]].name, "n099");
    kp_consolidation_decision_done(&dec);
    world_free(w);
}

/* A search told to stop before it starts finds nothing, and says so cleanly. */
static void test_stop(void **state)
{
    struct world *w = world_new();
    static const struct row r = {
        .nodes = {
            {.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
            {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
            {.name = "d", .pool = "np", .type = "c8", .cpu = {100}, .not_consolidatable = true}}};
    struct kp_ctx cx;
    struct kp_consolidation_decision dec;
    size_t cand[MAXN], n_cand, idx[MAXN], n_idx = 7, one = 7;

    (void)state;
    world_of(w, &r);
    kp_ctx_init(&cx, /* parent= */ NULL, kp_deadline_never());
    kp_ctx_cancel(&cx);
    n_cand = kp_consolidation_candidates(w->d, w->n, NULL, now, NULL, NULL, cand);
    assert_int_equal(n_cand, 2);
    assert_int_equal(kp_consolidation_single(&w->sim, w->d, w->n, cand, n_cand, now, told_cb, w,
                                             &cx, &one, &dec),
                     0);
    assert_int_equal(dec.verdict, KP_CONSOL_NOTHING);
    assert_int_equal(
        kp_consolidation_multi(&w->sim, w->d, w->n, cand, n_cand, now, &cx, idx, &n_idx, &dec), 0);
    assert_int_equal(n_idx, 0);
    assert_string_equal(w->told, "");
    world_free(w);
}

/* The search's time limit firing mid-way (its context cancelled while it runs): told about
 * the first candidate, single-node consolidation stops there and does not take the second,
 * which it would have taken with time left. */
static struct kp_ctx midway_cx;

static void told_then_stop(void *ctx, const struct kp_dnode *d, const char *why)
{
    told_cb(ctx, d, why);
    kp_ctx_cancel(&midway_cx);
}

static void test_stop_midway(void **state)
{
    struct world *w = world_new();
    static const struct row r = {
        .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {1800}},
                  {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
                  {.name = "c", .pool = "np", .type = "c2", .cpu = {1000}}}};
    struct kp_consolidation_decision dec;
    size_t cand[MAXN], n_cand, one = 7;

    (void)state;
    world_of(w, &r);
    n_cand = kp_consolidation_candidates(w->d, w->n, NULL, now, NULL, NULL, cand);
    assert_int_equal(n_cand, 3);
    /* With time: a is told why not, b is taken (the table's row says the same). */
    kp_ctx_init(&midway_cx, /* parent= */ NULL, kp_deadline_never());
    assert_int_equal(kp_consolidation_single(&w->sim, w->d, w->n, cand, n_cand, now, told_cb, w,
                                             &midway_cx, &one, &dec),
                     1);
    assert_string_equal(w->sn[one].name, "b");
    kp_consolidation_decision_done(&dec);
    /* The limit fires while a is simulated: nothing is taken, a is still told. */
    w->told[0] = '\0';
    one = 7;
    assert_int_equal(kp_consolidation_single(&w->sim, w->d, w->n, cand, n_cand, now, told_then_stop,
                                             w, &midway_cx, &one, &dec),
                     0);
    assert_int_equal(one, 7);
    assert_int_equal(dec.verdict, KP_CONSOL_NOTHING);
    assert_string_equal(w->told, "a: Can't replace with a cheaper node");
    world_free(w);
}

/* --- validation: the re-check a command gets before it acts -------------------------------- */

enum change {
    NO_CHANGE = 0,
    NODE_DO_NOT_DISRUPT, /* the Node got karpenter.sh/do-not-disrupt: "true" */
    POD_DO_NOT_DISRUPT,  /* a new pod with the annotation landed on the node */
    PDB_BLOCKS,          /* a PDB now allows no eviction of its pods */
    DELETING,            /* someone deleted the node */
    MARKED,              /* another command marked it */
    NOMINATED,           /* the provisioner nominated it for a pending pod */
    GONE,                /* the node left the cluster state */
    BUDGET_ZERO,         /* its NodePool's budget became 0 */
    OTHER_DISRUPTING,    /* another node of its pool started disrupting */
    NEW_POD,             /* a new pod of .cpu landed on node .at */
};

struct vrow {
    const char *name;
    enum search search; /* SINGLE or MULTI: how the command was found */
    struct pspec pools[2];
    struct nspec nodes[6];
    enum kp_consolidation_verdict verdict; /* of the command */
    const char *picked;
    enum change change;
    const char *at; /* the node changed */
    int cpu;
    const char *outcome; /* "valid", or the ConsolidationRejected reason */
};

static struct vrow vrows[] = {
    {.name = "validation: nothing changed: the single-node command holds",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .outcome = "valid"},
    {.name = "validation: nothing changed: the multi-node command holds",
     .search = MULTI,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "d", .pool = "np", .type = "c8", .cpu = {100}, .not_consolidatable = true}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b",
     .outcome = "valid"},
    {.name = "validation: the Node got do-not-disrupt: churn",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .change = NODE_DO_NOT_DISRUPT,
     .at = "a",
     .outcome = "churn"},
    {.name = "validation: a do-not-disrupt pod arrived: churn",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .change = POD_DO_NOT_DISRUPT,
     .at = "a",
     .cpu = 100,
     .outcome = "churn"},
    {.name = "validation: a PDB now blocks its pods: churn",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .change = PDB_BLOCKS,
     .at = "a",
     .outcome = "churn"},
    {.name = "validation: the node is being deleted: churn",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .change = DELETING,
     .at = "a",
     .outcome = "churn"},
    {.name = "validation: one node of a multi-node command was marked: churn",
     .search = MULTI,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "d", .pool = "np", .type = "c8", .cpu = {100}, .not_consolidatable = true}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b",
     .change = MARKED,
     .at = "b",
     .outcome = "churn"},
    {.name = "validation: the node was nominated: churn",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .change = NOMINATED,
     .at = "a",
     .outcome = "churn"},
    {.name = "validation: a node of the command is gone: churn",
     .search = MULTI,
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "d", .pool = "np", .type = "c8", .cpu = {100}, .not_consolidatable = true}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b",
     .change = GONE,
     .at = "b",
     .outcome = "churn"},
    {.name = "validation: the pool's budget became 0: budget",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .change = BUDGET_ZERO,
     .outcome = "budget"},
    {.name = "validation: another node disrupting leaves too little budget for two: budget",
     .search = MULTI,
     .pools = {{.name = "np", .budget = "2"}},
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
               {.name = "d", .pool = "np", .type = "c8", .cpu = {100}, .not_consolidatable = true},
               {.name = "e", .pool = "np", .type = "c2", .cpu = {0}, .not_consolidatable = true}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b",
     .change = OTHER_DISRUPTING,
     .at = "e",
     .outcome = "budget"},
    {.name = "validation: a new pod that still leaves room: valid",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .change = NEW_POD,
     .at = "b",
     .cpu = 900,
     .outcome = "valid"},
    {.name = "validation: a new pod takes the room the pods needed: scheduling",
     .nodes = {{.name = "a", .pool = "np", .type = "c2", .cpu = {500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {500}}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a",
     .change = NEW_POD,
     .at = "b",
     .cpu = 1200,
     .outcome = "scheduling"},
    {.name = "validation: a REPLACE whose cheaper option still holds the pods: valid",
     .nodes = {{.name = "a", .pool = "np", .type = "c4", .cpu = {1500}},
               {.name = "b", .pool = "np", .type = "c2", .cpu = {1800}}},
     .verdict = KP_CONSOL_REPLACE,
     .picked = "a",
     .change = NEW_POD,
     .at = "b",
     .cpu = 100,
     .outcome = "valid"},
    {.name = "validation: a multi-node DELETE that now needs a replacement: scheduling",
     .search = MULTI,
     .nodes =
         {{.name = "a", .pool = "np", .type = "c2", .cpu = {300}},
          {.name = "b", .pool = "np", .type = "c2", .cpu = {300}},
          {.name = "d", .pool = "np", .type = "c2", .cpu = {1000}, .not_consolidatable = true}},
     .verdict = KP_CONSOL_DELETE,
     .picked = "a,b",
     .change = NEW_POD,
     .at = "d",
     .cpu = 500,
     .outcome = "scheduling"},
};

/* Applies v's change to w (before it is built again). */
static void change(struct world *w, const struct vrow *v)
{
    size_t i = v->at ? world_find(w, v->at) : 0;
    struct pspec zero = {.name = "np", .budget = "0"};

    switch (v->change) {
    case NO_CHANGE:
        break;
    case NODE_DO_NOT_DISRUPT:
        w->sn[i].node = node_entry(w, w->sn[i].name, v->nodes[i].type, v->nodes[i].pool,
                                   "'karpenter.sh/do-not-disrupt':'true'");
        break;
    case POD_DO_NOT_DISRUPT:
        world_pod(w, w->sn[i].name, 7, v->cpu, 0, true);
        break;
    case PDB_BLOCKS:
        assert_non_null(w->blocking[i] = kp_strdup("pdb prevents pod evictions"));
        break;
    case DELETING:
        w->sn[i].flags |= KP_STATE_NODE_DELETING;
        break;
    case MARKED:
    case OTHER_DISRUPTING:
        w->sn[i].flags |= KP_STATE_NODE_MARKED_FOR_DELETION;
        break;
    case NOMINATED:
        w->sn[i].flags |= KP_STATE_NODE_NOMINATED;
        break;
    case GONE:
        kp_free(w->blocking[i]);
        memmove(&w->sn[i], &w->sn[i + 1], (w->n - i - 1) * sizeof(w->sn[0]));
        memmove(&w->blocking[i], &w->blocking[i + 1], (w->n - i - 1) * sizeof(w->blocking[0]));
        w->blocking[--w->n] = NULL;
        break;
    case BUDGET_ZERO:
        world_pool(w, &zero);
        break;
    case NEW_POD:
        world_pod(w, w->sn[i].name, 7, v->cpu, 0, false);
        break;
    }
}

/* What the controller's validation concludes: the re-check, then (single) the search over the
 * command's node alone, or (multi) the set's decision; a verdict other than the command's is
 * "scheduling", as rejected() words it. */
static const char *validate(struct world *w, const char *const *pids, size_t n_cmd,
                            enum search search, enum kp_consolidation_verdict verdict)
{
    bool only[MAXN] = {false};
    size_t cand[MAXN], n_cand = 0, one = 0;
    struct kp_consolidation_decision dec;
    enum kp_consolidation_verdict now_verdict = KP_CONSOL_NOTHING;

    for (size_t i = 0; i < w->n; i++)
        for (size_t k = 0; k < n_cmd; k++)
            only[i] = only[i] || kp_streq(w->sn[i].provider_id, pids[k]);
    switch (kp_consolidation_recheck(w->d, w->n, only, n_cmd, now, cand, &n_cand)) {
    case KP_CONSOL_CHECK_CHURN:
        return "churn";
    case KP_CONSOL_CHECK_BUDGET:
        return "budget";
    case KP_CONSOL_CHECK_VALID:
        break;
    }
    assert_int_equal(n_cand, n_cmd);
    if (search == SINGLE) {
        int r = kp_consolidation_single(&w->sim, w->d, w->n, cand, n_cand, now, NULL, NULL, NULL,
                                        &one, &dec);

        assert_true(r >= 0);
        if (r > 0)
            now_verdict = dec.verdict;
    } else {
        assert_int_equal(kp_consolidation_set(&w->sim, w->d, cand, n_cand, now, &dec), 0);
        now_verdict = dec.verdict;
    }
    kp_consolidation_decision_done(&dec);
    return now_verdict == verdict ? "valid" : "scheduling";
}

static void test_validation(void **state)
{
    const struct vrow *v = *state;
    struct world *w = world_new();
    struct row r = {.search = v->search};
    struct kp_consolidation_decision dec;
    size_t cand[MAXN], n_cand, idx[MAXN], n_idx = 0;
    const char *pids[MAXN];
    char got[256];
    int found;

    memcpy(r.pools, v->pools, sizeof(v->pools));
    memcpy(r.nodes, v->nodes, sizeof(v->nodes));
    world_of(w, &r);
    n_cand = kp_consolidation_candidates(w->d, w->n, NULL, now, NULL, NULL, cand);
    if (v->search == SINGLE) {
        found = kp_consolidation_single(&w->sim, w->d, w->n, cand, n_cand, now, NULL, NULL, NULL,
                                        &idx[0], &dec);
        n_idx = 1;
    } else
        found =
            kp_consolidation_multi(&w->sim, w->d, w->n, cand, n_cand, now, NULL, idx, &n_idx, &dec);
    assert_int_equal(found, 1);
    assert_int_equal(dec.verdict, v->verdict);
    assert_string_equal(names(w, idx, n_idx, got, sizeof(got)), v->picked);
    kp_consolidation_decision_done(&dec);
    /* The command keeps providerIDs: they point into entries the world holds to the end. */
    for (size_t k = 0; k < n_idx; k++)
        pids[k] = w->sn[idx[k]].provider_id;
    change(w, v);
    world_build(w);
    assert_string_equal(validate(w, pids, n_idx, v->search, v->verdict), v->outcome);
    world_free(w);
}

/* --- replacements in flight (kp_replace_decide) ------------------------------------------------ */

#define MISSING KP_REPLACE_SEEN_MISSING
#define LAUNCHING KP_REPLACE_SEEN_LAUNCHING
#define READY KP_REPLACE_SEEN_INITIALIZED
#define GOING KP_REPLACE_SEEN_DELETING
#define MIN (60 * SEC)

struct rrow {
    const char *name;
    size_t n_cand;
    enum kp_replace_seen seen[3];
    size_t n_repl, in_state;
    bool marked;
    int64_t elapsed;
    /* expected */
    enum kp_replace_action action;
    bool mark, unmark;
    uint64_t requeue;
    bool forceful; /* an expiry's command */
};

static struct rrow rrows[] = {
    {"replacing: the candidates went away by themselves: forget",
     0,
     {LAUNCHING},
     1,
     1,
     true,
     5 * SEC,
     KP_REPLACE_FORGET,
     false,
     false,
     1 * SEC,
     false},
    {"replacing: just created, not in the cache yet: wait",
     1,
     {MISSING},
     1,
     0,
     false,
     5 * SEC,
     KP_REPLACE_WAIT,
     false,
     false,
     1 * SEC,
     false},
    {"replacing: not in the cache at 30 s exactly: still wait",
     1,
     {MISSING},
     1,
     0,
     false,
     30 * SEC,
     KP_REPLACE_WAIT,
     false,
     false,
     1 * SEC,
     false},
    {"replacing: still not in the cache after 30 s: roll back",
     1,
     {MISSING},
     1,
     0,
     false,
     30 * SEC + 1,
     KP_REPLACE_ROLLBACK,
     false,
     false,
     10 * SEC,
     false},
    {"replacing: in the cluster state: the candidate is marked, wait",
     1,
     {LAUNCHING},
     1,
     1,
     false,
     10 * SEC,
     KP_REPLACE_WAIT,
     true,
     false,
     1 * SEC,
     false},
    {"replacing: in the cache, not yet in the state: no mark",
     1,
     {LAUNCHING},
     1,
     0,
     false,
     10 * SEC,
     KP_REPLACE_WAIT,
     false,
     false,
     1 * SEC,
     false},
    {"replacing: marked already, after 30 s: wait, polled every 5 s",
     1,
     {LAUNCHING},
     1,
     1,
     true,
     45 * SEC,
     KP_REPLACE_WAIT,
     false,
     false,
     5 * SEC,
     false},
    {"replacing: Initialized: delete the candidate",
     1,
     {READY},
     1,
     1,
     true,
     2 * MIN,
     KP_REPLACE_DELETE,
     false,
     false,
     1 * SEC,
     false},
    {"replacing: Initialized in the same pass it reached the state: mark and delete",
     1,
     {READY},
     1,
     1,
     false,
     2 * MIN,
     KP_REPLACE_DELETE,
     true,
     false,
     1 * SEC,
     false},
    {"replacing: the replacement is being deleted: roll back, unmarking",
     1,
     {GOING},
     1,
     1,
     true,
     2 * MIN,
     KP_REPLACE_ROLLBACK,
     false,
     true,
     10 * SEC,
     false},
    {"replacing: deleted before the mark: roll back, nothing to unmark",
     1,
     {GOING},
     1,
     1,
     false,
     10 * SEC,
     KP_REPLACE_ROLLBACK,
     false,
     false,
     10 * SEC,
     false},
    {"replacing: not Initialized at 10 min exactly: still wait",
     1,
     {LAUNCHING},
     1,
     1,
     true,
     10 * MIN,
     KP_REPLACE_WAIT,
     false,
     false,
     5 * SEC,
     false},
    {"replacing: not Initialized after 10 min: roll back",
     1,
     {LAUNCHING},
     1,
     1,
     true,
     10 * MIN + 1,
     KP_REPLACE_ROLLBACK,
     false,
     true,
     10 * SEC,
     false},
    {"replacing: timed out as it reached the state: marked and unmarked at once",
     1,
     {LAUNCHING},
     1,
     1,
     false,
     10 * MIN + 1,
     KP_REPLACE_ROLLBACK,
     true,
     true,
     10 * SEC,
     false},
    {"replacing: Initialized late, within twice the timeout: still delete",
     1,
     {READY},
     1,
     1,
     true,
     15 * MIN,
     KP_REPLACE_DELETE,
     false,
     false,
     1 * SEC,
     false},
    {"replacing: deletes failing past twice the timeout: roll back",
     1,
     {READY},
     1,
     1,
     true,
     20 * MIN + 1,
     KP_REPLACE_ROLLBACK,
     false,
     true,
     10 * SEC,
     false},
    {"replacing: one of two replacements Initialized: wait",
     2,
     {READY, LAUNCHING},
     2,
     2,
     true,
     2 * MIN,
     KP_REPLACE_WAIT,
     false,
     false,
     5 * SEC,
     false},
    {"replacing: one of two replacements not in the state: no mark",
     2,
     {READY, LAUNCHING},
     2,
     1,
     false,
     20 * SEC,
     KP_REPLACE_WAIT,
     false,
     false,
     1 * SEC,
     false},
    {"replacing: both replacements Initialized: delete",
     2,
     {READY, READY},
     2,
     2,
     true,
     2 * MIN,
     KP_REPLACE_DELETE,
     false,
     false,
     1 * SEC,
     false},
    {"replacing: one of two replacements deleted: roll back",
     2,
     {READY, GOING},
     2,
     2,
     true,
     2 * MIN,
     KP_REPLACE_ROLLBACK,
     false,
     true,
     10 * SEC,
     false},
    /* An expiry's command: a failure deletes the expired node anyway. */
    {"expiry: launching at 2 min: wait as any command",
     1,
     {LAUNCHING},
     1,
     1,
     true,
     2 * MIN,
     KP_REPLACE_WAIT,
     false,
     false,
     5 * SEC,
     true},
    {"expiry: the replacement Initialized: delete",
     1,
     {READY},
     1,
     1,
     true,
     2 * MIN,
     KP_REPLACE_DELETE,
     false,
     false,
     1 * SEC,
     true},
    {"expiry: not Initialized after 10 min: delete without it",
     1,
     {LAUNCHING},
     1,
     1,
     true,
     10 * MIN + 1,
     KP_REPLACE_DELETE,
     false,
     false,
     1 * SEC,
     true},
    {"expiry: the replacement deleted before the mark: marked, deleted without it",
     1,
     {GOING},
     1,
     1,
     false,
     10 * SEC,
     KP_REPLACE_DELETE,
     true,
     false,
     1 * SEC,
     true},
    {"expiry: the replacement never reached the cache: marked, deleted without it",
     1,
     {MISSING},
     1,
     0,
     false,
     30 * SEC + 1,
     KP_REPLACE_DELETE,
     true,
     false,
     1 * SEC,
     true},
    {"expiry: deletes failing past twice the timeout: roll back, the expiration controller's turn",
     1,
     {READY},
     1,
     1,
     true,
     20 * MIN + 1,
     KP_REPLACE_ROLLBACK,
     false,
     true,
     10 * SEC,
     true},
    {"expiry: the candidate went away: forget",
     0,
     {LAUNCHING},
     1,
     1,
     true,
     5 * SEC,
     KP_REPLACE_FORGET,
     false,
     false,
     1 * SEC,
     true},
};

static void test_replace_decide(void **state)
{
    const struct rrow *r = *state;
    struct kp_replace_step s = kp_replace_decide(r->n_cand, r->seen, r->n_repl, r->in_state,
                                                 r->marked, r->elapsed, r->forceful);

    if (s.action != r->action || s.mark != r->mark || s.unmark != r->unmark ||
        s.requeue_usec != r->requeue)
        fail_msg("%s: action %d mark %d unmark %d requeue %llu", r->name, (int)s.action, s.mark,
                 s.unmark, (unsigned long long)s.requeue_usec);
}

/* The "consolidated" memo: set at 1000 s with change count 7 and catalog versions summing to 40. */
static void test_memo(void **state)
{
    static const struct {
        const char *name;
        bool set;
        uint64_t changes, catalogs;
        int64_t now;
        bool holds;
    } m[] = {
        {"never set", false, 7, 40, 1000 * SEC, false},
        {"nothing changed, at once", true, 7, 40, 1000 * SEC, true},
        {"nothing changed, a minute later", true, 7, 40, 1060 * SEC, true},
        {"nothing changed, just under 5 min", true, 7, 40, 1000 * SEC + 300 * SEC - 1, true},
        {"nothing changed, 5 min: look again", true, 7, 40, 1300 * SEC, false},
        {"one event since", true, 8, 40, 1001 * SEC, false},
        {"a catalog republished since", true, 7, 41, 1001 * SEC, false},
        {"the clock went back", true, 7, 40, 999 * SEC, false},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(m); i++) {
        struct kp_consolidated_memo memo = {
            .set = m[i].set, .changes = 7, .catalogs = 40, .at_usec = 1000 * SEC};

        if (kp_consolidated_memo_holds(&memo, m[i].changes, m[i].catalogs, m[i].now) != m[i].holds)
            fail_msg("%s: want %s", m[i].name, m[i].holds ? "holds" : "does not hold");
    }
}

int main(void)
{
    struct CMUnitTest tests[KP_ARRAY_SIZE(rows) + KP_ARRAY_SIZE(vrows) + KP_ARRAY_SIZE(rrows) + 4];
    size_t n = 0;
    int fd, rc;

    /* One cmocka test per row, named by it, so a failure names its situation. */
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++)
        tests[n++] = (struct CMUnitTest){
            .name = rows[i].name, .test_func = test_row, .initial_state = &rows[i]};
    for (size_t i = 0; i < KP_ARRAY_SIZE(vrows); i++)
        tests[n++] = (struct CMUnitTest){
            .name = vrows[i].name, .test_func = test_validation, .initial_state = &vrows[i]};
    for (size_t i = 0; i < KP_ARRAY_SIZE(rrows); i++)
        tests[n++] = (struct CMUnitTest){
            .name = rrows[i].name, .test_func = test_replace_decide, .initial_state = &rrows[i]};
    tests[n++] =
        (struct CMUnitTest){.name = "multi: at most 100 candidates", .test_func = test_multi_cap};
    tests[n++] =
        (struct CMUnitTest){.name = "searches end when told to stop", .test_func = test_stop};
    tests[n++] = (struct CMUnitTest){.name = "single: a time limit firing mid-way takes nothing",
                                     .test_func = test_stop_midway};
    tests[n++] = (struct CMUnitTest){.name = "the consolidated memo", .test_func = test_memo};
    assert_int_equal(kp_rfc3339_parse(T0, strlen(T0), &t0), 0);
    now = t0 + 3600 * SEC;
    learn_schedfail();
    fd = kp_test_log_quiet(); /* "no instance types" and the like are not this test's output */
    rc = cmocka_run_group_tests(tests, setup, NULL);
    kp_test_log_restore(fd);
    return rc;
}
