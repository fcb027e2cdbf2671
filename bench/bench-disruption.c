/* bench-disruption: what one consolidation pass costs at pool scale, so that the simulation
 * stays far inside Karpenter's timeouts (3 min for single-node consolidation, 1 min for
 * multi-node; our target is 1 s each on one core). Run a sanitizer-free build for figures worth
 * quoting (`cmake --preset plain`): the dev preset measures ASan.
 *
 *   build/<preset>/bench/bench-disruption [-N nodes] [-P pods] [-r repeats]
 *
 * A synthetic cluster of N Nodes with their NodeClaims (default 1,000; initialized,
 * Consolidatable, labelled with instance type, capacity type, zone and NodePool) over four
 * NodePools (WhenEmptyOrUnderutilized, consolidateAfter 0s, budget 100%) and three instance
 * classes (4, 8 and 16 cpu at 0.2, 0.4 and 0.8 $/h, three zones, on-demand) carries P bound pods
 * (default 10,000) of 50 apps. It is fed to a detached cluster state and to pod and NodePool
 * stores as the informers would, and the provider is tests/lib's fake with that catalog. Two
 * scenarios:
 *
 *   packed  every node's cpu is exactly full (P/N pods each, give or take 4), so no
 *           candidate's pods fit elsewhere and no replacement is cheaper: the search tries every
 *           candidate and decides nothing. This is the worst case and the figure the 1 s target
 *           is about.
 *   mixed   60% packed; 20% light (one pod bigger than any free room or smaller class: 7 of 8
 *           cpu, or 14 of 16); 20% underutilised (4 of 8 cpu in 8-16 small pods, which fit in the
 *           others' free room). Candidates are taken fewest pods first, so the light nodes and
 *           the packed nodes with few pods are tried before the first underutilised one: the
 *           time to the first decision after many failed trials.
 *
 * For each scenario one pass is timed as the controller runs it (disruption.c's pass_gather and
 * consolidation_single): gather (cluster-state snapshot, NodePool and pods per node,
 * kp_dnode_count_pods), candidates (kp_consolidation_candidates), build (kp_sim_build) and
 * search (kp_consolidation_single); the best of -r repeats (default 3), and the search's time
 * per candidate tried. Then one more walk makes the search's trials one by one through the
 * public calls (kp_sim_prepare, kp_sched_solve, kp_consolidation_decide), each timed, plus the
 * same solve with no pod to place: that splits a trial into prepare, solve (and how much of it
 * is the solver's set-up and tear-down over every remaining node) and decide. Multi-node
 * consolidation is the second entry of searches[] (kp_consolidation_multi). Peak RSS is getrusage's ru_maxrss over the whole run. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "base/time.h"
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

#define T0 "2026-01-01T00:00:00Z"
#define MAX_JSON (1u << 16)

/* The instance classes: cpu in milli, memory 4 GiB per cpu, 110 pods. */
static const struct {
    const char *name;
    int64_t cpu_milli;
    int64_t price_micro_usd;
} classes[] = {
    {"c-small", 4000, 200000},
    {"c-medium", 8000, 400000},
    {"c-large", 16000, 800000},
};
#define N_CLASSES (sizeof(classes) / sizeof(classes[0]))
enum { SMALL, MEDIUM, LARGE };
#define PODS_PER_NODE 110u

static const char *const zones[] = {"zone-a", "zone-b", "zone-c"};
static const char *const pools[] = {"general", "web", "batch", "infra"};
#define N_POOLS (sizeof(pools) / sizeof(pools[0]))

enum scenario { SCENARIO_PACKED, SCENARIO_MIXED };
static const char *const scenario_names[] = {"packed", "mixed"};

/* One node of a scenario: its class and the cpu of each of its pods. */
struct node_plan {
    unsigned cls;
    uint32_t n_pods;
    int64_t cpu_used; /* split evenly over n_pods, the remainder on the first ones */
};

/* The cluster the searches read, as the controller's caches would hold it. */
struct bench {
    struct kp_fake_provider *fake;
    struct kp_provider provider;
    struct kp_core_env env;
    struct kp_cluster_state *state;
    struct kp_store *pods, *nodepools;
    struct kp_sim_sources src;
};

static int64_t now_usec; /* T0 + 30 days: after every NodeClaim's creation */

static uint64_t bench_clock(void)
{
    return (uint64_t)now_usec;
}

static void must(int r, const char *what)
{
    if (r < 0) {
        fprintf(stderr, "bench-disruption: %s: %s\n", what, kp_strerror(r));
        exit(1);
    }
}

/* Decodes the JSON fmt makes, written with ' for " for readability. */
static struct kp_entry *decode(int (*fn)(const char *, size_t, struct kp_entry **), const char *fmt,
                               ...) KP_PRINTF(2, 3);
static struct kp_entry *decode(int (*fn)(const char *, size_t, struct kp_entry **), const char *fmt,
                               ...)
{
    struct kp_buf b = KP_BUF_INIT(MAX_JSON);
    struct kp_entry *e = NULL;
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = kp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    must(r, "formatting an object");
    for (size_t i = 0; i < b.len; i++)
        if (b.data[i] == '\'')
            b.data[i] = '"';
    if (fn(b.data, b.len, &e) < 0) {
        fprintf(stderr, "bench-disruption: does not decode: %.*s\n", (int)b.len, b.data);
        exit(1);
    }
    kp_buf_done(&b);
    return e;
}

/* The catalog every NodePool gets: each class in every zone, on-demand. */
static void publish_types(struct kp_fake_provider *f)
{
    static const char *const ct = KP_CAPACITY_TYPE_ON_DEMAND;
    struct kp_instance_types t = {0};

    if (!(t.v = kp_calloc(N_CLASSES, sizeof(*t.v))))
        must(-ENOMEM, "types");
    for (size_t i = 0; i < N_CLASSES; i++) {
        struct kp_instance_type *it = &t.v[t.n++];
        const char *name = classes[i].name;

        if (!(it->name = kp_strdup(name)) ||
            !(it->offerings = kp_calloc(sizeof(zones) / sizeof(zones[0]), sizeof(*it->offerings))))
            must(-ENOMEM, "types");
        must(kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, &name, 1, 0), "reqs");
        must(kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, zones, 3, 0), "reqs");
        must(kp_reqset_add(&it->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1, 0), "reqs");
        must(kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", classes[i].cpu_milli),
             "capacity");
        must(kp_provider_res_add(&it->capacity, &it->n_capacity, "memory",
                                 classes[i].cpu_milli * 4 * (1LL << 30)),
             "capacity");
        must(kp_provider_res_add(&it->capacity, &it->n_capacity, "pods", PODS_PER_NODE * 1000),
             "capacity");
        for (size_t z = 0; z < 3; z++) {
            struct kp_offering *o = &it->offerings[it->n_offerings++];

            must(kp_reqset_add(&o->reqs, KP_LABEL_ZONE, KP_SEL_IN, &zones[z], 1, 0), "offering");
            must(kp_reqset_add(&o->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1, 0), "offering");
            o->price_micro_usd = classes[i].price_micro_usd;
            o->available = true;
        }
    }
    must(kp_fake_provider_publish(f, &t), "publish");
}

/* Spreads total pods over the nodes idx[0..n) (packed: cpu exactly full), base per node with
 * +-(k % 5) between the two nodes of each pair k, so the pod counts (and the candidates' order)
 * vary while the total stays. -EINVAL when a count would leave [1, PODS_PER_NODE]. */
static int spread_packed(struct node_plan *plan, const size_t *idx, size_t n, uint64_t total)
{
    uint64_t base = n ? total / n : 0, rem = n ? total % n : 0;

    if (n == 0)
        return total ? -EINVAL : 0;
    if (base < 5 || base + 5 > PODS_PER_NODE)
        return -EINVAL;
    for (size_t k = 0; k < n; k++) {
        struct node_plan *p = &plan[idx[k]];

        p->cls = idx[k] % N_CLASSES;
        p->n_pods = (uint32_t)(base + (k < rem));
        p->cpu_used = classes[p->cls].cpu_milli;
    }
    for (size_t k = 0; k + 1 < n; k += 2) {
        uint32_t d = (uint32_t)((k / 2) % 5);

        plan[idx[k]].n_pods += d;
        plan[idx[k + 1]].n_pods -= d;
    }
    return 0;
}

/* What each node holds in scenario sc. 0 or -EINVAL (P does not suit N for it). */
static int plan_nodes(enum scenario sc, uint32_t nodes, uint32_t pods, struct node_plan *plan)
{
    size_t *packed = kp_calloc(nodes, sizeof(*packed)), n_packed = 0;
    uint64_t left = pods;
    int r;

    if (!packed)
        return -ENOMEM;
    for (uint32_t i = 0; i < nodes; i++) {
        unsigned kind = i % 10;

        if (sc == SCENARIO_PACKED || kind < 6) {
            packed[n_packed++] = i;
        } else if (kind < 8) { /* light: one pod no free room and no smaller class holds */
            plan[i].cls = (i / 10) % 2 ? LARGE : MEDIUM;
            plan[i].n_pods = 1;
            plan[i].cpu_used = classes[plan[i].cls].cpu_milli * 7 / 8;
        } else { /* underutilised: half a medium in 8-16 small pods */
            plan[i].cls = MEDIUM;
            plan[i].n_pods = 8 + (i / 10) % 9;
            plan[i].cpu_used = classes[MEDIUM].cpu_milli / 2;
        }
        if (plan[i].n_pods) {
            if (left < plan[i].n_pods) {
                kp_free(packed);
                return -EINVAL;
            }
            left -= plan[i].n_pods;
        }
    }
    r = spread_packed(plan, packed, n_packed, left);
    kp_free(packed);
    return r;
}

static struct kp_entry *nodepool(const char *name)
{
    return decode(kp_nodepool_decode,
                  "{'metadata':{'name':'%s','uid':'%s-uid','resourceVersion':'1',"
                  "'creationTimestamp':'" T0 "'},'spec':{'disruption':{'consolidationPolicy':"
                  "'WhenEmptyOrUnderutilized','consolidateAfter':'0s','budgets':[{'nodes':"
                  "'100%%'}]},'template':{'spec':{'nodeClassRef':{'group':'%s','kind':'%s',"
                  "'name':'default'},'requirements':[]}}},'status':{'conditions':[{'type':"
                  "'Ready','status':'True','reason':'Ready','lastTransitionTime':'" T0 "'}]}}",
                  name, name, KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND);
}

/* Node i and its NodeClaim into the cluster state. */
static void add_node(struct bench *b, uint32_t i, const struct node_plan *p)
{
    const char *pool = pools[i % N_POOLS], *zone = zones[i % 3], *cls = classes[p->cls].name;
    int64_t cpu = classes[p->cls].cpu_milli;
    char created[40];
    struct kp_entry *nc, *node;

    /* Older NodeClaims first among equal costs: one second apart. */
    must(kp_rfc3339_format(now_usec - 30 * 86400LL * 1000000 + (int64_t)i * 1000000,
                           KP_RFC3339_SECONDS, created, sizeof(created)),
         "time");
    nc = decode(kp_nodeclaim_decode,
                "{'metadata':{'name':'nc-%05u','uid':'nc-%05u-uid','resourceVersion':'2',"
                "'creationTimestamp':'%s','labels':{'%s':'%s','%s':'%s','%s':'%s','%s':'%s'}},"
                "'spec':{'nodeClassRef':{'group':'%s','kind':'%s','name':'default'},"
                "'requirements':[]},'status':{'providerID':'%snode-%05u','nodeName':'node-%05u',"
                "'capacity':{'cpu':'%lldm','memory':'%lldGi','pods':'%u'},"
                "'allocatable':{'cpu':'%lldm','memory':'%lldGi','pods':'%u'},'conditions':["
                "{'type':'Launched','status':'True','reason':'Launched','lastTransitionTime':'%s'},"
                "{'type':'Registered','status':'True','reason':'R','lastTransitionTime':'%s'},"
                "{'type':'Initialized','status':'True','reason':'I','lastTransitionTime':'%s'},"
                "{'type':'Consolidatable','status':'True','reason':'C','lastTransitionTime':'%s'}"
                "]}}",
                i, i, created, KP_CORE_LABEL_NODEPOOL, pool, KP_LABEL_INSTANCE_TYPE, cls,
                KP_LABEL_ZONE, zone, KP_LABEL_CAPACITY_TYPE, KP_CAPACITY_TYPE_ON_DEMAND,
                KP_FAKE_NODECLASS_GROUP, KP_FAKE_NODECLASS_KIND, KP_FAKE_PROVIDER_ID_SCHEME, i, i,
                (long long)cpu, (long long)cpu * 4 / 1000, PODS_PER_NODE, (long long)cpu,
                (long long)cpu * 4 / 1000, PODS_PER_NODE, created, created, created, created);
    node = decode(kp_node_decode,
                  "{'metadata':{'name':'node-%05u','uid':'node-%05u-uid','resourceVersion':'3',"
                  "'creationTimestamp':'%s','labels':{'%s':'%s','%s':'%s','%s':'%s','%s':'%s',"
                  "'%s':'true','%s':'true','%s':'node-%05u'}},'spec':{'providerID':'%snode-%05u'},"
                  "'status':{'capacity':{'cpu':'%lldm','memory':'%lldGi','pods':'%u'},"
                  "'allocatable':{'cpu':'%lldm','memory':'%lldGi','pods':'%u'},"
                  "'conditions':[{'type':'Ready','status':'True'}]}}",
                  i, i, created, KP_CORE_LABEL_NODEPOOL, pool, KP_LABEL_INSTANCE_TYPE, cls,
                  KP_LABEL_ZONE, zone, KP_LABEL_CAPACITY_TYPE, KP_CAPACITY_TYPE_ON_DEMAND,
                  KP_CORE_LABEL_REGISTERED, KP_CORE_LABEL_INITIALIZED, KP_LABEL_HOSTNAME, i,
                  KP_FAKE_PROVIDER_ID_SCHEME, i, (long long)cpu, (long long)cpu * 4 / 1000,
                  PODS_PER_NODE, (long long)cpu, (long long)cpu * 4 / 1000, PODS_PER_NODE);
    kp_cluster_state_nodeclaim_event(b->state, NULL, nc);
    kp_cluster_state_node_event(b->state, NULL, node);
    kp_entry_unref(nc); /* the state keeps its own references */
    kp_entry_unref(node);
}

/* Pod number k (k-th of node i, its cpu in milli, memory 2 MiB per milli-cpu) into the store
 * and the cluster state. */
static void add_pod(struct bench *b, uint32_t k, uint32_t i, int64_t cpu)
{
    struct kp_entry *e = decode(
        kp_pod_decode,
        "{'metadata':{'name':'app%02u-%06u','namespace':'bench','uid':'pod-%06u-uid',"
        "'resourceVersion':'4','creationTimestamp':'" T0 "','labels':{'app':'app%02u'},"
        "'ownerReferences':[{'apiVersion':'apps/v1','kind':'ReplicaSet','name':'app%02u-rs',"
        "'uid':'rs-%02u-uid','controller':true}]},'spec':{'nodeName':'node-%05u',"
        "'containers':[{'name':'c','resources':{'requests':{'cpu':'%lldm','memory':'%lldMi'}}}]},"
        "'status':{'phase':'Running','startTime':'" T0 "'}}",
        k % 50, k, k, k % 50, k % 50, k % 50, i, (long long)cpu, (long long)cpu * 2);

    kp_cluster_state_pod_event(b->state, NULL, e);
    must(kp_store_put(b->pods, e, NULL), "pod store");
}

static void bench_init(struct bench *b, enum scenario sc, uint32_t nodes, uint32_t pods)
{
    struct node_plan *plan = kp_calloc(nodes, sizeof(*plan));
    uint32_t k = 0;

    memset(b, 0, sizeof(*b));
    if (!plan)
        must(-ENOMEM, "plan");
    if (plan_nodes(sc, nodes, pods, plan) < 0) {
        fprintf(stderr, "bench-disruption: %u pods do not suit %u nodes in scenario %s\n", pods,
                nodes, scenario_names[sc]);
        exit(2);
    }
    must(kp_fake_provider_new(&b->fake), "provider");
    publish_types(b->fake);
    b->provider = kp_fake_provider_as_provider(b->fake);
    b->env.provider = &b->provider;
    b->env.now_usec = bench_clock;
    must(kp_cluster_state_new_detached(&b->env, &b->state), "cluster state");
    kp_cluster_state_set_informers_synced(b->state, true);
    must(kp_store_new(&b->pods), "store");
    must(kp_store_new(&b->nodepools), "store");
    /* The index the controllers register on the shared pod informer (disruption.c). */
    must(kp_store_add_index(b->pods, KP_INDEX_POD_NODE, kp_index_pod_node), "index");
    for (size_t i = 0; i < N_POOLS; i++)
        must(kp_store_put(b->nodepools, nodepool(pools[i]), NULL), "nodepool store");
    for (uint32_t i = 0; i < nodes; i++) {
        const struct node_plan *p = &plan[i];

        add_node(b, i, p);
        for (uint32_t j = 0; j < p->n_pods; j++) {
            int64_t cpu = p->cpu_used / p->n_pods + (j < (uint32_t)(p->cpu_used % p->n_pods));

            add_pod(b, k++, i, cpu);
        }
    }
    b->src = (struct kp_sim_sources){.env = &b->env, .pods = b->pods, .nodepools = b->nodepools};
    kp_free(plan);
}

static void bench_done(struct bench *b)
{
    b->state = kp_cluster_state_free(b->state);
    b->pods = kp_store_free(b->pods);
    b->nodepools = kp_store_free(b->nodepools);
    b->fake = kp_fake_provider_free(b->fake);
}

/* One pass's view, as disruption.c's pass_gather builds it. */
struct view {
    struct kp_state_snapshot *snap;
    struct kp_dnode *v;
    struct kp_entry **np; /* NodePool entry per state node (references) */
    size_t n;
};

static void view_done(struct view *w)
{
    for (size_t i = 0; w->np && i < w->n; i++)
        kp_entry_unref(w->np[i]);
    kp_free(w->np);
    kp_free(w->v);
    w->snap = kp_state_snapshot_free(w->snap);
    memset(w, 0, sizeof(*w));
}

static void view_gather(struct bench *b, struct view *w)
{
    memset(w, 0, sizeof(*w));
    must(kp_cluster_state_snapshot(b->state, &w->snap), "snapshot");
    w->n = w->snap->n;
    w->v = kp_calloc(w->n + 1, sizeof(*w->v));
    w->np = kp_calloc(w->n + 1, sizeof(*w->np));
    if (!w->v || !w->np)
        must(-ENOMEM, "view");
    for (size_t i = 0; i < w->n; i++) {
        const struct kp_state_node *sn = &w->snap->v[i];
        const struct kp_pod_view *blocking = NULL, **pv;
        struct kp_store_list l = {0};

        w->v[i].sn = sn;
        if (!sn->node || !sn->nodeclaim)
            continue;
        if (sn->nodepool && kp_store_get(b->nodepools, sn->nodepool, &w->np[i]) == 0)
            w->v[i].np = kp_nodepool_view(w->np[i]);
        if (!kp_emptiness_wants(&w->v[i]))
            continue;
        must(kp_store_by_index(b->pods, KP_INDEX_POD_NODE, sn->node_name, &l), "pods of node");
        if (!(pv = kp_calloc(l.n + 1, sizeof(*pv))))
            must(-ENOMEM, "pods of node");
        for (size_t j = 0; j < l.n; j++)
            pv[j] = kp_pod_view(l.v[j]);
        kp_dnode_count_pods(&w->v[i], pv, l.n, now_usec, &blocking);
        kp_free(pv);
        kp_store_list_free(&l);
    }
}

/* What a search reports. Times in microseconds. */
struct figures {
    uint64_t gather, candidates, build, search;
    size_t n_cand, tried;
    int found;
    enum kp_consolidation_verdict verdict;
    char name[64]; /* the node decided on ("" when none) */
    /* The Unconsolidatable sentences, grouped by their first 24 characters. */
    struct {
        char why[96];
        size_t n;
    } why[4];
    size_t n_why;
};

static void told(void *ctx, const struct kp_dnode *d, const char *why)
{
    struct figures *f = ctx;
    size_t k;

    (void)d;
    f->tried++;
    for (k = 0; k < f->n_why; k++)
        if (strncmp(f->why[k].why, why, 24) == 0)
            break;
    if (k == f->n_why) {
        if (k == sizeof(f->why) / sizeof(f->why[0]))
            return;
        (void)snprintf(f->why[k].why, sizeof(f->why[k].why), "%s", why);
        f->n_why++;
    }
    f->why[k].n++;
}

/* Single-node consolidation's pass as disruption.c runs it. */
static void search_single(struct bench *b, struct figures *f)
{
    struct kp_consolidation_decision dec;
    struct kp_sim sim;
    struct view w;
    size_t *cand, idx = 0;
    uint64_t t0 = kp_mono_usec(), t1, t2, t3;
    int r;

    view_gather(b, &w);
    t1 = kp_mono_usec();
    if (!(cand = kp_calloc(w.n + 1, sizeof(*cand))))
        must(-ENOMEM, "candidates");
    f->n_cand = kp_consolidation_candidates(w.v, w.n, NULL, now_usec, NULL, NULL, cand);
    t2 = kp_mono_usec();
    must(kp_sim_build(&b->src, w.snap, /* c= */ NULL, /* cx= */ NULL, &sim), "sim build");
    t3 = kp_mono_usec();
    r = kp_consolidation_single(&sim, w.v, w.n, cand, f->n_cand, now_usec, told, f,
                                /* stop= */ NULL, &idx, &dec);
    must(r, "single-node consolidation");
    f->search = kp_mono_usec() - t3;
    f->gather = t1 - t0;
    f->candidates = t2 - t1;
    f->build = t3 - t2;
    f->found = r;
    if (r == 1) {
        f->tried++;
        f->verdict = dec.verdict;
        (void)snprintf(f->name, sizeof(f->name), "%s", w.v[idx].sn->name);
    }
    kp_consolidation_decision_done(&dec);
    kp_sim_done(&sim);
    kp_free(cand);
    view_done(&w);
}

/* Multi-node consolidation's search as disruption.c runs it: the binary search over at most
 * 100 candidates, each trial one simulation with all of its prefix moving. tried counts the
 * trials (log2 of the candidates, about 7). */
static void search_multi(struct bench *b, struct figures *f)
{
    struct kp_consolidation_decision dec;
    struct kp_sim sim;
    struct view w;
    size_t *cand = NULL, *set = NULL, n_set = 0;
    uint64_t t0 = kp_mono_usec(), t1, t2, t3;
    int r;

    view_gather(b, &w);
    t1 = kp_mono_usec();
    if (!(cand = kp_calloc(w.n + 1, sizeof(*cand))) || !(set = kp_calloc(w.n + 1, sizeof(*set))))
        must(-ENOMEM, "candidates");
    f->n_cand = kp_consolidation_candidates(w.v, w.n, NULL, now_usec, NULL, NULL, cand);
    t2 = kp_mono_usec();
    must(kp_sim_build(&b->src, w.snap, /* c= */ NULL, /* cx= */ NULL, &sim), "sim build");
    t3 = kp_mono_usec();
    r = kp_consolidation_multi(&sim, w.v, w.n, cand, f->n_cand, now_usec, /* stop= */ NULL, set,
                               &n_set, &dec);
    must(r, "multi-node consolidation");
    f->search = kp_mono_usec() - t3;
    f->gather = t1 - t0;
    f->candidates = t2 - t1;
    f->build = t3 - t2;
    f->found = r;
    /* The binary search's trials: ceil(log2(min(candidates, 100))). */
    for (size_t span = f->n_cand < 100 ? f->n_cand : 100; span > 1; span = (span + 1) / 2)
        f->tried++;
    if (r == 1) {
        f->verdict = dec.verdict;
        (void)snprintf(f->name, sizeof(f->name), "%zu nodes from %s", n_set, w.v[set[0]].sn->name);
    }
    kp_consolidation_decision_done(&dec);
    kp_sim_done(&sim);
    kp_free(set);
    kp_free(cand);
    view_done(&w);
}

/* The searches of a pass. */
static const struct search {
    const char *name;
    void (*run)(struct bench *b, struct figures *f);
} searches[] = {
    {"single-node pass", search_single},
    {"multi-node search", search_multi},
};

/* Splits the single-node search's per-candidate cost: the trials kp_consolidation_single makes
 * (its try_one; every budget here allows all), each call timed on its own. */
struct split {
    uint64_t prepare, solve, setup, decide; /* summed over the trials */
    size_t tried;
};

static void split_single(struct bench *b, struct split *ret)
{
    struct kp_sim sim;
    struct view w;
    size_t *cand, n_cand;

    memset(ret, 0, sizeof(*ret));
    view_gather(b, &w);
    if (!(cand = kp_calloc(w.n + 1, sizeof(*cand))))
        must(-ENOMEM, "candidates");
    n_cand = kp_consolidation_candidates(w.v, w.n, NULL, now_usec, NULL, NULL, cand);
    must(kp_sim_build(&b->src, w.snap, NULL, NULL, &sim), "sim build");
    for (size_t k = 0; k < n_cand; k++) {
        const struct kp_dnode *d = &w.v[cand[k]];
        struct kp_consolidation_decision dec;
        struct kp_sched_input in, none;
        struct kp_sched_plan empty;
        struct kp_sim_run run;
        int64_t price = -1;
        uint64_t t0 = kp_mono_usec(), t1, t2, t3;

        must(kp_sim_prepare(&sim, &cand[k], 1, now_usec, &run, &in), "prepare");
        t1 = kp_mono_usec();
        must(kp_sched_solve(&in, &run.plan), "solve");
        t2 = kp_mono_usec();
        for (size_t q = 0; q < sim.n_pools; q++)
            if (kp_streq(sim.pools[q].np->e.name, d->sn->nodepool))
                price = kp_node_price(sim.pools[q].types, sim.pools[q].n_types,
                                      &kp_node_view(d->sn->node)->meta.labels);
        must(kp_consolidation_decide(&in, &run.plan, &d->sn->node_name, 1, price, &dec), "decide");
        t3 = kp_mono_usec();
        /* The same solve with no pod to place: what it costs before and after placing any. */
        none = in;
        none.n_pods = 0;
        must(kp_sched_solve(&none, &empty), "solve");
        kp_sched_plan_done(&empty);
        ret->setup += kp_mono_usec() - t3;
        ret->decide += t3 - t2;
        ret->solve += t2 - t1;
        ret->prepare += t1 - t0;
        ret->tried++;
        kp_sim_run_done(&run);
        if (dec.verdict != KP_CONSOL_NOTHING) {
            kp_consolidation_decision_done(&dec);
            break;
        }
        kp_consolidation_decision_done(&dec);
    }
    kp_sim_done(&sim);
    kp_free(cand);
    view_done(&w);
}

static const char *verdict_name(const struct figures *f)
{
    if (!f->found)
        return "none";
    return f->verdict == KP_CONSOL_DELETE ? "delete" : "replace";
}

static void run_scenario(enum scenario sc, uint32_t nodes, uint32_t pods, uint32_t repeats)
{
    struct bench b;
    struct split sp;
    uint64_t t0 = kp_mono_usec(), setup;

    bench_init(&b, sc, nodes, pods);
    setup = kp_mono_usec() - t0;
    printf("scenario=%s (cluster fed in %.0f ms)\n", scenario_names[sc], (double)setup / 1000.0);
    for (size_t s = 0; s < sizeof(searches) / sizeof(searches[0]); s++) {
        struct figures best = {0};
        uint64_t best_total = UINT64_MAX, total;

        for (uint32_t r = 0; r < repeats; r++) {
            struct figures f = {0};

            searches[s].run(&b, &f);
            total = f.gather + f.candidates + f.build + f.search;
            if (total < best_total) {
                best_total = total;
                best = f;
            }
        }
        printf("  %s: %8.1f ms  (gather %.1f, candidates %.1f, build %.1f, search %.1f ms)\n",
               searches[s].name, (double)best_total / 1000.0, (double)best.gather / 1000.0,
               (double)best.candidates / 1000.0, (double)best.build / 1000.0,
               (double)best.search / 1000.0);
        printf("    candidates=%zu tried=%zu decision=%s%s%s per-candidate=%.0f us\n", best.n_cand,
               best.tried, verdict_name(&best), best.name[0] ? " " : "", best.name,
               best.tried ? (double)best.search / (double)best.tried : 0.0);
        for (size_t k = 0; k < best.n_why; k++)
            printf("    %zu x \"%s\"\n", best.why[k].n, best.why[k].why);
    }
    split_single(&b, &sp);
    if (sp.tried)
        printf("  single-node trial, mean of %zu: prepare %.0f us, solve %.0f us (of which "
               "%.0f us with no pod to place), decide %.1f us\n",
               sp.tried, (double)sp.prepare / (double)sp.tried, (double)sp.solve / (double)sp.tried,
               (double)sp.setup / (double)sp.tried, (double)sp.decide / (double)sp.tried);
    bench_done(&b);
}

int main(int argc, char **argv)
{
    uint32_t nodes = 1000, pods = 10000, repeats = 3;
    struct rusage ru;
    int opt;

    while ((opt = getopt(argc, argv, "N:P:r:")) != -1) {
        uint32_t *to = opt == 'N' ? &nodes : opt == 'P' ? &pods : opt == 'r' ? &repeats : NULL;

        if (!to || kp_safe_atou32(optarg, to) < 0 || *to == 0) {
            fprintf(stderr, "usage: bench-disruption [-N nodes] [-P pods] [-r repeats]\n");
            return 2;
        }
    }
    must(kp_rfc3339_parse(T0, strlen(T0), &now_usec), "time");
    now_usec += 30 * 86400LL * 1000000;
    printf("nodes=%u pods=%u pools=%zu classes=%zu repeats=%u (best of repeats)\n", nodes, pods,
           N_POOLS, N_CLASSES, repeats);
    run_scenario(SCENARIO_PACKED, nodes, pods, repeats);
    run_scenario(SCENARIO_MIXED, nodes, pods, repeats);
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS: %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
    return 0;
}
