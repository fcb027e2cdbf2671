/* Tests for the provisioning scheduler (core/provisioning/scheduler.c): one case per behaviour,
 * each asserting the plan — which pod landed on which node or new NodeClaim, the NodeClaim's
 * instance-type options in price order and narrowed requirements, and the reason a pod failed.
 * Pods and NodePools are decoded from JSON through their real projections; instance types,
 * nodes and DaemonSets are built as values. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/err.h"
#include "api/obj-karpenter.h"
#include "api/obj-pod.h"
#include "core/provider.h"
#include "core/provisioning/scheduler.h"

#define GI (1073741824LL * 1000)
#define MAXP 320
#define MAXN 12

/* --- fixture -------------------------------------------------------------------------------- */

static struct {
    struct kp_entry *e[2 * MAXP];
    size_t n_e;
    const struct kp_pod_view *pods[MAXP];
    size_t n_pods;
    struct kp_instance_types types[4];
    struct kp_sched_pool pools[4];
    size_t n_pools;
    struct kp_sched_node nodes[MAXN];
    size_t n_nodes;
    struct kp_label labels[MAXN][8];
    struct kp_res alloc[MAXN][3];
    struct kp_taint taints[MAXN][2];
    const struct kp_pod_view *bound[MAXN][8];
    struct kp_sched_daemon ds[4];
    size_t n_ds;
    struct kp_host_port ds_port[4];
    struct kp_res ds_req[4][2];
    size_t max_types;
    bool ignore_preferences;
    bool best_effort;
    const char *ns; /* namespace of the pods mkpod makes (NULL: "ns") */
    struct kp_sched_plan plan;
} F;

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kp_sched_plan_done(&F.plan);
    for (size_t i = 0; i < F.n_e; i++)
        F.e[i] = kp_entry_unref(F.e[i]);
    for (size_t i = 0; i < 4; i++)
        kp_instance_types_done(&F.types[i]);
    return 0;
}

static struct kp_entry *decode(int (*fn)(const char *, size_t, struct kp_entry **), const char *fmt,
                               ...) KP_PRINTF(2, 3);
static struct kp_entry *decode(int (*fn)(const char *, size_t, struct kp_entry **), const char *fmt,
                               ...)
{
    char buf[4096];
    struct kp_entry *e = NULL;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(buf));
    if (fn(buf, (size_t)n, &e) != 0)
        fail_msg("does not decode: %s", buf);
    assert_true(F.n_e < KP_ARRAY_SIZE(F.e));
    F.e[F.n_e++] = e;
    return e;
}

/* A pod in namespace ns requesting cpu and memory; labels is the inside of a JSON object, spec
 * more spec members (each with a leading comma), node the node it is bound to (NULL: pending,
 * and then it is one of the pods to place). */
static const struct kp_pod_view *mkpod(const char *name, const char *node, const char *cpu,
                                       const char *mem, const char *labels, const char *spec)
{
    struct kp_entry *e = decode(
        kp_pod_decode,
        "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"u-%s\","
        "\"resourceVersion\":\"1\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
        "\"labels\":{%s}},\"spec\":{%s%s%s\"containers\":[{\"name\":\"c\",\"resources\":"
        "{\"requests\":{\"cpu\":\"%s\",\"memory\":\"%s\"}}}]%s},\"status\":{\"phase\":\"%s\"}}",
        name, F.ns ? F.ns : "ns", name, labels ? labels : "", node ? "\"nodeName\":\"" : "",
        node ? node : "", node ? "\"," : "", cpu, mem, spec ? spec : "",
        node ? "Running" : "Pending");
    const struct kp_pod_view *p = kp_pod_view(e);

    if (!node) {
        assert_true(F.n_pods < MAXP);
        F.pods[F.n_pods++] = p;
    }
    return p;
}

static const struct kp_pod_view *pod(const char *name, const char *cpu, const char *labels,
                                     const char *spec)
{
    return mkpod(name, NULL, cpu, "1Gi", labels, spec);
}

/* A NodePool: spec members (leading comma) and template spec members (leading comma). */
static size_t pool(const char *name, const char *spec, const char *tmpl)
{
    struct kp_entry *e = decode(
        kp_nodepool_decode,
        "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{\"name\":"
        "\"%s\",\"uid\":\"np-%s\",\"resourceVersion\":\"1\"},\"spec\":{\"template\":"
        "{\"spec\":{\"nodeClassRef\":{\"group\":\"g\",\"kind\":\"K\",\"name\":\"c\"}%s}}%s}}",
        name, name, tmpl ? tmpl : "", spec ? spec : "");
    size_t i = F.n_pools++;

    F.pools[i].np = kp_nodepool_view(e);
    return i;
}

static void add_in(struct kp_reqset *s, const char *key, const char *value)
{
    assert_int_equal(kp_reqset_add(s, key, KP_SEL_IN, &value, 1, 0), 0);
}

/* An instance type of pool p with cpu (cores) and memory (GiB), 110 pods, one on-demand
 * offering per zone in zones ("a,b") at price; extra is "key=value" or NULL. */
static struct kp_instance_type *itype(size_t p, const char *name, int64_t cpu, int64_t mem,
                                      int64_t price, const char *zones, const char *extra)
{
    struct kp_instance_types *t = &F.types[p];
    struct kp_instance_type *it;
    char zbuf[64];
    const char *zv[8];
    size_t nz = 0;

    t->v = kp_reallocarray(t->v, t->n + 1, sizeof(*t->v));
    assert_non_null(t->v);
    it = &t->v[t->n++];
    memset(it, 0, sizeof(*it));
    it->name = kp_strdup(name);
    assert_non_null(it->name);
    (void)snprintf(zbuf, sizeof(zbuf), "%s", zones);
    for (char *z = zbuf, *c; z && *z; z = c) {
        c = strchr(z, ',');
        if (c)
            *c++ = '\0';
        zv[nz++] = z;
    }
    add_in(&it->reqs, KP_LABEL_INSTANCE_TYPE, name);
    add_in(&it->reqs, KP_LABEL_CAPACITY_TYPE, KP_CAPACITY_TYPE_ON_DEMAND);
    add_in(&it->reqs, KP_LABEL_ARCH, "amd64");
    assert_int_equal(kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, zv, nz, 0), 0);
    if (extra) {
        char kb[64];
        char *eq;

        (void)snprintf(kb, sizeof(kb), "%s", extra);
        eq = strchr(kb, '=');
        assert_non_null(eq);
        *eq = '\0';
        add_in(&it->reqs, kb, eq + 1);
    }
    assert_int_equal(kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", cpu * 1000), 0);
    assert_int_equal(kp_provider_res_add(&it->capacity, &it->n_capacity, "memory", mem * GI), 0);
    assert_int_equal(kp_provider_res_add(&it->capacity, &it->n_capacity, "pods", 110000), 0);
    it->offerings = kp_calloc(nz ? nz : 1, sizeof(*it->offerings));
    assert_non_null(it->offerings);
    for (size_t i = 0; i < nz; i++) {
        struct kp_offering *o = &it->offerings[it->n_offerings++];

        add_in(&o->reqs, KP_LABEL_ZONE, zv[i]);
        add_in(&o->reqs, KP_LABEL_CAPACITY_TYPE, KP_CAPACITY_TYPE_ON_DEMAND);
        o->price_micro_usd = price;
        o->available = true;
    }
    F.pools[p].types = t->v;
    F.pools[p].n_types = t->n;
    return it;
}

/* An initialized node in zone with cpu cores and mem GiB (110 pods) of nodepool (NULL:
 * unmanaged). */
static struct kp_sched_node *node(const char *name, const char *nodepool, const char *zone,
                                  int64_t cpu, int64_t mem)
{
    size_t i = F.n_nodes++;
    struct kp_sched_node *n = &F.nodes[i];
    size_t nl = 0;

    assert_true(i < MAXN);
    n->name = name;
    n->nodepool = nodepool;
    n->initialized = true;
    F.labels[i][nl++] = (struct kp_label){KP_LABEL_HOSTNAME, name};
    F.labels[i][nl++] = (struct kp_label){KP_LABEL_ZONE, zone};
    if (nodepool)
        F.labels[i][nl++] = (struct kp_label){"karpenter.sh/nodepool", nodepool};
    n->labels.v = F.labels[i];
    n->labels.n = nl;
    F.alloc[i][0] = (struct kp_res){"cpu", cpu * 1000};
    F.alloc[i][1] = (struct kp_res){"memory", mem * GI};
    F.alloc[i][2] = (struct kp_res){"pods", 110000};
    n->allocatable.v = F.alloc[i];
    n->allocatable.n = 3;
    n->capacity = n->allocatable;
    n->pods = F.bound[i];
    return n;
}

static void node_label(struct kp_sched_node *n, const char *key, const char *value)
{
    size_t i = (size_t)(n - F.nodes);

    F.labels[i][n->labels.n++] = (struct kp_label){key, value};
}

static void node_taint(struct kp_sched_node *n, const char *key, enum kp_taint_effect eff,
                       bool startup)
{
    size_t i = (size_t)(n - F.nodes);

    F.taints[i][0] = (struct kp_taint){key, NULL, eff};
    n->taints.v = F.taints[i];
    n->taints.n = 1;
    if (startup)
        n->startup_taints = n->taints;
}

/* A pod bound to n. */
static const struct kp_pod_view *bind(struct kp_sched_node *n, const char *name, const char *cpu,
                                      const char *labels, const char *spec)
{
    size_t i = (size_t)(n - F.nodes);
    const struct kp_pod_view *p = mkpod(name, n->name, cpu, "1Gi", labels, spec);

    F.bound[i][n->n_pods++] = p;
    return p;
}

static struct kp_sched_daemon *daemon(const char *name, int64_t cpu_milli)
{
    size_t i = F.n_ds++;
    struct kp_sched_daemon *d = &F.ds[i];

    d->name = name;
    F.ds_req[i][0] = (struct kp_res){"cpu", cpu_milli};
    d->requests.v = F.ds_req[i];
    d->requests.n = 1;
    return d;
}

static void solve(void)
{
    struct kp_sched_input in = {0};

    kp_sched_plan_done(&F.plan);
    in.pods = F.pods;
    in.n_pods = F.n_pods;
    in.nodes = F.nodes;
    in.n_nodes = F.n_nodes;
    in.pools = F.pools;
    in.n_pools = F.n_pools;
    in.daemons = F.ds;
    in.n_daemons = F.n_ds;
    in.max_instance_types = F.max_types;
    in.ignore_preferences = F.ignore_preferences;
    in.min_values_best_effort = F.best_effort;
    assert_int_equal(kp_sched_solve(&in, &F.plan), 0);
    assert_int_equal(F.plan.n_pods, F.n_pods);
}

/* --- plan readers --------------------------------------------------------------------------- */

static size_t pidx(const char *name)
{
    for (size_t i = 0; i < F.n_pods; i++)
        if (strcmp(F.pods[i]->e.name, name) == 0)
            return i;
    fail_msg("no pod %s", name);
    return 0;
}

static const struct kp_sched_result *res(const char *name)
{
    return &F.plan.pods[pidx(name)];
}

/* "node:<name>", "claim:<index>" or "failed". */
static const char *where(const char *name)
{
    static char buf[64];
    const struct kp_sched_result *r = res(name);

    switch (r->where) {
    case KP_SCHED_NODE:
        (void)snprintf(buf, sizeof(buf), "node:%s", F.nodes[r->index].name);
        break;
    case KP_SCHED_CLAIM:
        (void)snprintf(buf, sizeof(buf), "claim:%zu", r->index);
        break;
    default:
        (void)snprintf(buf, sizeof(buf), "failed");
    }
    return buf;
}

static const char *error(const char *name)
{
    const struct kp_sched_result *r = res(name);

    assert_int_equal(r->where, KP_SCHED_FAILED);
    assert_non_null(r->error);
    return r->error;
}

#define assert_error(pod_, needle_)                                                                \
    do {                                                                                           \
        const char *e_ = error(pod_);                                                              \
        if (!strstr(e_, needle_))                                                                  \
            fail_msg("%s: error \"%s\" lacks \"%s\"", pod_, e_, needle_);                          \
    } while (0)

/* The claim's options, space separated. */
static const char *opts(size_t c)
{
    static char buf[256];
    size_t len = 0;

    assert_true(c < F.plan.n_claims);
    buf[0] = '\0';
    for (size_t i = 0; i < F.plan.claims[c].n_types; i++)
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? " " : "",
                                F.plan.claims[c].types[i]->name);
    return buf;
}

static const char *creq(size_t c, const char *key)
{
    static char buf[KP_REQSET_WHY_SIZE];
    const struct kp_req *r;

    assert_true(c < F.plan.n_claims);
    r = kp_reqset_get(&F.plan.claims[c].reqs, key);
    if (!r)
        return "(none)";
    kp_req_format(r, buf, sizeof(buf));
    return buf;
}

static int64_t creqs(size_t c, const char *name)
{
    for (size_t i = 0; i < F.plan.claims[c].n_requests; i++)
        if (strcmp(F.plan.claims[c].requests[i].name, name) == 0)
            return F.plan.claims[c].requests[i].milli;
    return 0;
}

/* The names of claim c's pods, space separated, in placement order. */
static const char *cpods(size_t c)
{
    static char buf[256];
    size_t len = 0;

    assert_true(c < F.plan.n_claims);
    buf[0] = '\0';
    for (size_t i = 0; i < F.plan.claims[c].n_pods; i++)
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? " " : "",
                                F.pods[F.plan.claims[c].pods[i]]->e.name);
    return buf;
}

#define SPREAD(key, skew, when, app)                                                               \
    ",\"topologySpreadConstraints\":[{\"maxSkew\":" #skew ",\"topologyKey\":\"" key                \
    "\",\"whenUnsatisfiable\":\"" when "\",\"labelSelector\":{\"matchLabels\":{\"app\":\"" app     \
    "\"}}}]"
#define ANTI(key, app)                                                                             \
    ",\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{"    \
    "\"topologyKey\":\"" key "\",\"labelSelector\":{\"matchLabels\":{\"app\":\"" app "\"}}}]}}"
#define AFFINITY(key, app)                                                                         \
    ",\"affinity\":{\"podAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{"        \
    "\"topologyKey\":\"" key "\",\"labelSelector\":{\"matchLabels\":{\"app\":\"" app "\"}}}]}}"
#define ZONE "topology.kubernetes.io/zone"
#define HOST "kubernetes.io/hostname"

/* --- step 1: requirements, taints, resources, ports, order, limits, minValues ---------------- */

/* One pod, one pool: a new claim whose options are in price order, whose requests are the
 * pod's plus pods: 1, and whose requirements name the pool and the options. */
static void test_new_claim_price_order(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "big", 8, 32, 400, "a", NULL);
    itype(p, "small", 2, 8, 100, "a", NULL);
    itype(p, "mid-b", 4, 16, 200, "a", NULL);
    itype(p, "mid-a", 4, 16, 200, "a", NULL);
    pod("web", "1", NULL, NULL);
    solve();
    assert_string_equal(where("web"), "claim:0");
    assert_int_equal(F.plan.n_claims, 1);
    assert_string_equal(opts(0), "small mid-a mid-b big");
    assert_int_equal(creqs(0, "cpu"), 1000);
    assert_int_equal(creqs(0, "pods"), 1000);
    assert_int_equal(creqs(0, "memory"), GI);
    assert_string_equal(creq(0, "karpenter.sh/nodepool"), "karpenter.sh/nodepool In [default]");
    assert_string_equal(creq(0, KP_LABEL_INSTANCE_TYPE),
                        KP_LABEL_INSTANCE_TYPE " In [big mid-a mid-b small]");
    assert_string_equal(creq(0, KP_LABEL_CAPACITY_TYPE), KP_LABEL_CAPACITY_TYPE " In [on-demand]");
    /* The hostname placeholder used for topology does not leak into the plan. */
    assert_string_equal(creq(0, HOST), "(none)");
    assert_int_equal(F.plan.claims[0].pool, p);
}

/* An instance type whose only offering is unavailable is not an option; one too small is not. */
static void test_unavailable_and_too_small(void **state)
{
    size_t p;
    struct kp_instance_type *it;

    (void)state;
    p = pool("default", NULL, NULL);
    it = itype(p, "cheap", 4, 16, 50, "a", NULL);
    it->offerings[0].available = false;
    itype(p, "tiny", 1, 2, 10, "a", NULL);
    itype(p, "ok", 4, 16, 100, "a", NULL);
    pod("web", "2", NULL, NULL);
    solve();
    assert_string_equal(opts(0), "ok");
}

/* Options are ordered by their cheapest offering compatible with the claim: a type cheap only
 * in zone b is dear for a claim held to zone a. */
static void test_price_by_compatible_offering(void **state)
{
    struct kp_instance_type *it;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    it = itype(p, "split", 4, 16, 500, "a,b", NULL);
    it->offerings[1].price_micro_usd = 100; /* zone b */
    itype(p, "flat", 4, 16, 300, "a,b", NULL);
    pod("any", "3", NULL, NULL); /* too big to share a 4-cpu claim with in-a */
    pod("in-a", "2", NULL, ",\"nodeSelector\":{\"" ZONE "\":\"a\"}");
    solve();
    assert_string_equal(opts(res("any")->index), "split flat");
    assert_string_equal(opts(res("in-a")->index), "flat split");
}

/* Every operator of node affinity, against an instance type label (table-driven). */
static void test_operators(void **state)
{
    static const struct {
        const char *expr;
        const char *want; /* options, or NULL: fails */
    } cases[] = {
        {"\"operator\":\"In\",\"values\":[\"5\"]", "g5"},
        {"\"operator\":\"NotIn\",\"values\":[\"5\"]", "g3 g7"},
        {"\"operator\":\"Exists\"", "g3 g5 g7"},
        {"\"operator\":\"DoesNotExist\"", NULL},
        {"\"operator\":\"Gt\",\"values\":[\"4\"]", "g5 g7"},
        {"\"operator\":\"Lt\",\"values\":[\"5\"]", "g3"},
        {"\"operator\":\"Gte\",\"values\":[\"5\"]", "g5 g7"},
        {"\"operator\":\"Lte\",\"values\":[\"5\"]", "g3 g5"},
        {"\"operator\":\"In\",\"values\":[\"9\"]", NULL},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        char spec[512];
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL,
                 ",\"requirements\":[{\"key\":\"kp.dev/gen\",\"operator\":"
                 "\"Exists\"}]");
        itype(p, "g3", 4, 16, 100, "a", "kp.dev/gen=3");
        itype(p, "g5", 4, 16, 200, "a", "kp.dev/gen=5");
        itype(p, "g7", 4, 16, 300, "a", "kp.dev/gen=7");
        (void)snprintf(spec, sizeof(spec),
                       ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
                       "Execution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":"
                       "\"kp.dev/gen\",%s}]}]}}}",
                       cases[i].expr);
        pod("web", "1", NULL, spec);
        solve();
        if (cases[i].want) {
            if (strcmp(where("web"), "claim:0") != 0)
                fail_msg("case %zu (%s): %s", i, cases[i].expr, where("web"));
            assert_string_equal(opts(0), cases[i].want);
        } else {
            assert_string_equal(where("web"), "failed");
        }
    }
}

/* A custom label the pool does not define cannot be required; a well-known one can, and narrows
 * the claim. */
static void test_undefined_labels(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "m", 4, 16, 100, "a,b", NULL);
    pod("custom", "1", NULL, ",\"nodeSelector\":{\"team\":\"x\"}");
    pod("zonal", "1", NULL, ",\"nodeSelector\":{\"" ZONE "\":\"b\"}");
    solve();
    assert_error("custom", "incompatible with nodepool \"default\", incompatible requirements");
    assert_error("custom", "team");
    assert_string_equal(where("zonal"), "claim:0");
    assert_string_equal(creq(0, ZONE), ZONE " In [b]");
}

/* A template label is a requirement the pod may select on. */
static void test_template_labels(void **state)
{
    struct kp_entry *e;

    (void)state;
    pool("teamx", NULL, NULL);
    e = decode(kp_nodepool_decode,
               "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{\"name\":"
               "\"labelled\",\"uid\":\"np-l\",\"resourceVersion\":\"1\"},\"spec\":{\"template\":"
               "{\"metadata\":{\"labels\":{\"team\":\"x\"}},\"spec\":{\"nodeClassRef\":{\"group\":"
               "\"g\",\"kind\":\"K\",\"name\":\"c\"}}}}}");
    F.pools[F.n_pools++].np = kp_nodepool_view(e);
    itype(0, "m", 4, 16, 100, "a", NULL);
    itype(1, "m", 4, 16, 100, "a", NULL);
    pod("custom", "1", NULL, ",\"nodeSelector\":{\"team\":\"x\"}");
    solve();
    assert_string_equal(where("custom"), "claim:0");
    assert_int_equal(F.plan.claims[0].pool, 1);
    assert_string_equal(creq(0, "team"), "team In [x]");
}

/* Pool taints must be tolerated (NoSchedule); startup taints never need to be. */
static void test_pool_taints(void **state)
{
    size_t p;

    (void)state;
    p = pool("gpu", NULL,
             ",\"taints\":[{\"key\":\"gpu\",\"effect\":\"NoSchedule\"}],\"startupTaints\":[{"
             "\"key\":\"init\",\"effect\":\"NoSchedule\"}]");
    itype(p, "m", 4, 16, 100, "a", NULL);
    pod("plain", "1", NULL, NULL);
    pod("tolerant", "1", NULL,
        ",\"tolerations\":[{\"key\":\"gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]");
    pod("any", "1", NULL, ",\"tolerations\":[{\"operator\":\"Exists\"}]");
    solve();
    assert_error("plain", "did not tolerate taint gpu:NoSchedule");
    assert_string_equal(where("tolerant"), "claim:0");
    assert_string_equal(where("any"), "claim:0");
}

/* Existing nodes come first, initialized before not, then by name; a full node is skipped. */
static void test_existing_first_fit(void **state)
{
    struct kp_sched_node *b, *a, *u;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "m", 4, 16, 100, "a", NULL);
    u = node("a-uninit", "default", "a", 4, 16);
    u->initialized = false;
    b = node("b", "default", "a", 4, 16);
    a = node("a", "default", "a", 4, 16);
    bind(a, "resident", "3", NULL, NULL);
    (void)b;
    pod("p1", "2", NULL, NULL);
    pod("p2", "2", NULL, NULL);
    pod("p3", "2", NULL, NULL);
    pod("p4", "2", NULL, NULL);
    pod("p5", "1", NULL, NULL);
    solve();
    /* a has 1 cpu left: p5 (smallest, last) lands there; b takes two, the uninitialized one
     * two more. */
    assert_string_equal(where("p1"), "node:b");
    assert_string_equal(where("p2"), "node:b");
    assert_string_equal(where("p3"), "node:a-uninit");
    assert_string_equal(where("p4"), "node:a-uninit");
    assert_string_equal(where("p5"), "node:a");
    assert_int_equal(F.plan.n_claims, 0);
}

/* A node's pods allocatable is a resource like any: each pod counts one. */
static void test_pods_resource(void **state)
{
    struct kp_sched_node *n;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "m", 4, 16, 100, "a", NULL);
    n = node("n", "default", "a", 8, 32);
    F.alloc[0][2].milli = 2000; /* max pods 2 */
    bind(n, "resident", "100m", NULL, NULL);
    pod("p1", "100m", NULL, NULL);
    pod("p2", "100m", NULL, NULL);
    solve();
    assert_string_equal(where("p1"), "node:n");
    assert_string_equal(where("p2"), "claim:0");
}

/* Node taints: NoSchedule must be tolerated; an uninitialized managed node's startup and known
 * ephemeral taints are ignored; an existing node's custom label satisfies a selector. */
static void test_existing_taints_labels(void **state)
{
    struct kp_sched_node *t, *s, *e, *l;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "m", 4, 16, 100, "a", NULL);
    t = node("a-tainted", "default", "a", 4, 16);
    node_taint(t, "dedicated", KP_TAINT_NO_SCHEDULE, false);
    s = node("b-starting", "default", "a", 1, 16);
    s->initialized = false;
    node_taint(s, "init", KP_TAINT_NO_SCHEDULE, true);
    e = node("c-notready", "default", "a", 1, 16);
    e->initialized = false;
    node_taint(e, "node.kubernetes.io/not-ready", KP_TAINT_NO_SCHEDULE, false);
    l = node("d-labelled", "default", "a", 3, 16);
    node_label(l, "team", "x");
    pod("p1", "1", NULL, NULL);
    pod("p2", "1", NULL, NULL);
    pod("p3", "1", NULL, ",\"nodeSelector\":{\"team\":\"x\"}");
    pod("p4", "500m", NULL, NULL);
    pod("p5", "600m", NULL, NULL);
    solve();
    /* Initialized nodes first: a-tainted is refused, d-labelled takes the first pods. */
    assert_string_equal(where("p1"), "node:d-labelled");
    assert_string_equal(where("p2"), "node:d-labelled");
    assert_string_equal(where("p3"), "node:d-labelled");
    /* Startup taints and known ephemeral taints of uninitialized nodes are ignored. */
    assert_string_equal(where("p5"), "node:b-starting");
    assert_string_equal(where("p4"), "node:c-notready");
}

/* In-flight NodeClaims take pods before new claims are made. */
static void test_inflight(void **state)
{
    struct kp_sched_input in = {0};
    struct kp_sched_node *n;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "m", 4, 16, 100, "a", NULL);
    n = node("claim-1", "default", "a", 2, 8);
    n->initialized = false;
    F.n_nodes = 0; /* passed as in-flight below */
    pod("p1", "1", NULL, NULL);
    pod("p2", "1", NULL, NULL);
    in.pods = F.pods;
    in.n_pods = F.n_pods;
    in.inflight = F.nodes;
    in.n_inflight = 1;
    in.pools = F.pools;
    in.n_pools = F.n_pools;
    assert_int_equal(kp_sched_solve(&in, &F.plan), 0);
    assert_int_equal(F.plan.pods[0].where, KP_SCHED_NODE);
    assert_int_equal(F.plan.pods[0].index, 0);
    /* 2 cpu: one pod of 1 cpu plus... both fit exactly. */
    assert_int_equal(F.plan.pods[1].where, KP_SCHED_NODE);
    assert_int_equal(F.plan.n_claims, 0);
}

/* Pods pack onto one claim while some option still fits the summed requests; the options
 * narrow as they do. Larger pods are placed first. */
static void test_bin_packing(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c2", 2, 64, 100, "a", NULL);
    itype(p, "c4", 4, 64, 200, "a", NULL);
    pod("small", "1", NULL, NULL);
    pod("large", "2", NULL, NULL);
    pod("mid", "1", NULL, NULL);
    solve();
    assert_int_equal(F.plan.n_claims, 1);
    /* Equal requests fall back to uid order. */
    assert_string_equal(cpods(0), "large mid small");
    assert_string_equal(opts(0), "c4");
    assert_int_equal(creqs(0, "cpu"), 4000);
    assert_int_equal(creqs(0, "pods"), 3000);
}

/* Allocatable is capacity minus overhead (kube-reserved). */
static void test_overhead(void **state)
{
    struct kp_instance_type *it;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    it = itype(p, "c2", 2, 8, 100, "a", NULL);
    assert_int_equal(kp_provider_res_add(&it->overhead, &it->n_overhead, "cpu", 500), 0);
    itype(p, "c4", 4, 8, 200, "a", NULL);
    pod("web", "2", NULL, NULL);
    solve();
    assert_string_equal(opts(0), "c4");
}

/* DaemonSet overhead counts per instance type, only for DaemonSets that would run there, and
 * the least overhead of the options joins the claim's requests. */
static void test_daemonset_overhead(void **state)
{
    struct kp_sched_daemon *d;
    size_t p;

    (void)state;
    p = pool("default", NULL, ",\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]");
    itype(p, "c2", 2, 8, 100, "a", NULL);
    itype(p, "c4", 4, 8, 200, "a", NULL);
    d = daemon("logs", 500);
    d->tolerations.v = (const struct kp_toleration[]){{"t", NULL, true, KP_TAINT_ANY, -1}};
    d->tolerations.n = 1;
    daemon("untolerating", 1000);
    pod("web", "2", NULL, ",\"tolerations\":[{\"key\":\"t\",\"operator\":\"Exists\"}]");
    solve();
    assert_string_equal(opts(0), "c4");
    assert_int_equal(creqs(0, "cpu"), 2500);
    assert_int_equal(creqs(0, "pods"), 2000);
}

/* DaemonSets whose affinity excludes an instance type cost nothing there. */
static void test_daemonset_affinity(void **state)
{
    const struct kp_pod_view *tmpl;
    struct kp_sched_daemon *d;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c2", 2, 8, 100, "a", NULL);
    /* The template's required node affinity, projected as a pod's (bound, so not placed). */
    tmpl =
        mkpod("tmpl", "elsewhere", "0", "0", NULL,
              ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
              "Execution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"" KP_LABEL_ARCH
              "\",\"operator\":\"In\",\"values\":[\"arm64\"]}]}]}}}");
    d = daemon("arm-only", 1000);
    d->required = tmpl->required;
    d->n_required = tmpl->n_required;
    pod("web", "2", NULL, NULL);
    solve();
    assert_string_equal(opts(0), "c2");
    assert_int_equal(creqs(0, "cpu"), 2000);
}

/* On an existing node, a compatible DaemonSet whose pod is not there yet keeps its requests
 * free; once its pod is bound, only the pod counts. */
static void test_daemonset_existing_node(void **state)
{
    static const char owned[] = "\"app\":\"logs\"},\"ownerReferences\":[{\"apiVersion\":"
                                "\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"logs\","
                                "\"uid\":\"d1\"}],\"annotations\":{\"x\":\"y\"";
    size_t p;

    (void)state;
    for (int bound = 0; bound < 2; bound++) {
        struct kp_sched_node *n;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, NULL);
        itype(p, "c4", 4, 16, 100, "a", NULL);
        n = node("n", "default", "a", 2, 16);
        daemon("logs", 1000);
        if (bound) {
            const struct kp_pod_view *dp = bind(n, "logs-n", "1", owned, NULL);

            assert_true(dp->flags & KP_POD_DAEMONSET);
        }
        pod("web", "900m", NULL, NULL);
        solve();
        /* Not bound: 1 cpu is kept for the daemon, 1 is left. Bound: its pod holds that cpu
         * and nothing more is kept (no double count). Either way 900m fits. */
        assert_string_equal(where("web"), "node:n");
    }
    /* A pod that needs more than what the missing daemon leaves. */
    teardown(NULL);
    setup(NULL);
    p = pool("default", NULL, NULL);
    itype(p, "c4", 4, 16, 100, "a", NULL);
    node("n", "default", "a", 2, 16);
    daemon("logs", 1000);
    pod("big", "1500m", NULL, NULL);
    solve();
    assert_string_equal(where("big"), "claim:0");
}

/* A pod with one container asking for host port 80 (bound to node, or pending). */
static const struct kp_pod_view *port_pod(const char *name, const char *node)
{
    struct kp_entry *e = decode(
        kp_pod_decode,
        "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"u-%s\",\"resource"
        "Version\":\"1\"},\"spec\":{%s%s%s\"containers\":[{\"name\":\"c\",\"ports\":[{"
        "\"containerPort\":80,\"hostPort\":80}],\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]},"
        "\"status\":{\"phase\":\"%s\"}}",
        name, name, node ? "\"nodeName\":\"" : "", node ? node : "", node ? "\"," : "",
        node ? "Running" : "Pending");
    const struct kp_pod_view *p = kp_pod_view(e);

    if (!node)
        F.pods[F.n_pods++] = p;
    return p;
}

/* Host ports: two pods asking for one port cannot share a node or a claim; a DaemonSet's port
 * rules out the instance types it runs on. */
static void test_host_ports(void **state)
{
    struct kp_sched_node *n;
    struct kp_sched_daemon *d;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "m", 8, 32, 100, "a", NULL);
    n = node("n", "default", "a", 8, 32);
    F.bound[0][n->n_pods++] = port_pod("resident", "n");
    port_pod("h1", NULL);
    port_pod("h2", NULL);
    pod("free", "1", NULL, NULL);
    solve();
    assert_string_equal(where("free"), "node:n");
    assert_string_equal(where("h1"), "claim:0");
    assert_string_equal(where("h2"), "claim:1");

    /* The same with a DaemonSet holding port 80 on every new node: no claim can take them. */
    d = daemon("proxy", 100);
    F.ds_port[0] = (struct kp_host_port){NULL, 80, KP_PROTO_TCP};
    d->host_ports = &F.ds_port[0];
    d->n_host_ports = 1;
    solve();
    assert_error("h1", "host port conflict with daemonsets");
    assert_string_equal(where("free"), "node:n");
}

/* NodePool limits: existing capacity counts, and each new claim takes the largest capacity of
 * its options off what is left (pessimistic). */
static void test_limits(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", ",\"limits\":{\"cpu\":\"12\"}", NULL);
    itype(p, "c2", 2, 8, 100, "a", NULL);
    itype(p, "c4", 4, 8, 200, "a", NULL);
    node("n", "default", "a", 4, 8);
    F.alloc[0][0].milli = 0; /* no room on it, but its capacity counts */
    F.nodes[0].capacity.v = (const struct kp_res[]){{"cpu", 4000}};
    F.nodes[0].capacity.n = 1;
    pod("p1", "1500m", NULL, NULL);
    pod("p2", "1500m", NULL, NULL);
    pod("p3", "1500m", NULL, NULL);
    solve();
    /* 12 - 4 = 8 left. p1 opens a claim [c2 c4] (-4 → 4 left), p2 cannot share it (3 cpu over c2,
     * c4 would fit: it does share). */
    assert_string_equal(where("p1"), "claim:0");
    assert_string_equal(where("p2"), "claim:0");
    assert_string_equal(opts(0), "c4");
    /* p3: 4 cpu left, c2 and c4 within; a second claim, leaving 0. */
    assert_string_equal(where("p3"), "claim:1");
    assert_string_equal(opts(1), "c2 c4");
}

static void test_limits_exceeded(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", ",\"limits\":{\"cpu\":\"3\"}", NULL);
    itype(p, "c4", 4, 8, 200, "a", NULL);
    pod("p1", "1", NULL, NULL);
    solve();
    assert_error("p1", "all available instance types exceed limits for nodepool");
}

static void test_node_limit(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", ",\"limits\":{\"nodes\":\"1\"}", NULL);
    itype(p, "c2", 2, 8, 100, "a", NULL);
    pod("p1", "2", NULL, NULL);
    pod("p2", "2", NULL, NULL);
    solve();
    assert_string_equal(where("p1"), "claim:0");
    assert_error("p2", "node limits have been exhausted for nodepool");
}

/* NodePools are tried by weight, heaviest first, then by name descending; a pod that one pool
 * refuses falls through to the next, and a pod all refuse names each reason. */
static void test_weight_order(void **state)
{
    size_t light, heavy, same;

    (void)state;
    light = pool("a-light", ",\"weight\":10", NULL);
    heavy = pool("b-heavy", ",\"weight\":50",
                 ",\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]");
    same = pool("z-light", ",\"weight\":10", NULL);
    itype(light, "m", 4, 16, 100, "a", NULL);
    itype(heavy, "m", 4, 16, 100, "a", NULL);
    itype(same, "m", 4, 16, 100, "a", NULL);
    pod("tolerant", "2", NULL, ",\"tolerations\":[{\"key\":\"t\",\"operator\":\"Exists\"}]");
    pod("plain", "3", NULL, NULL);
    pod("huge", "64", NULL, NULL);
    solve();
    assert_int_equal(F.plan.claims[res("tolerant")->index].pool, heavy);
    assert_int_equal(F.plan.claims[res("plain")->index].pool, same);
    assert_error("huge", "incompatible with nodepool \"b-heavy\", did not tolerate taint t");
    assert_error("huge", "; incompatible with nodepool \"z-light\", no instance type has enough");
    assert_error("huge", "; incompatible with nodepool \"a-light\"");
}

/* minValues: the options must keep that many distinct values of the key. */
static void test_min_values(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL,
             ",\"requirements\":[{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":"
             "\"Exists\",\"minValues\":2}]");
    itype(p, "c2", 2, 8, 100, "a", NULL);
    itype(p, "c4", 4, 8, 200, "a", NULL);
    itype(p, "c8", 8, 8, 400, "a", NULL);
    pod("fits-two", "3", NULL, NULL);
    pod("fits-one", "6", NULL, NULL);
    solve();
    assert_string_equal(where("fits-two"), "claim:0");
    assert_string_equal(opts(0), "c4 c8");
    assert_error("fits-one", "minValues requirement is not met for label "
                             "node.kubernetes.io/instance-type");
}

/* Cutting the options to max_instance_types must not break minValues. */
static void test_min_values_truncation(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL,
             ",\"requirements\":[{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":"
             "\"Exists\",\"minValues\":2}]");
    itype(p, "c2", 2, 8, 100, "a", NULL);
    itype(p, "c4", 4, 8, 200, "a", NULL);
    pod("web", "1", NULL, NULL);
    F.max_types = 2;
    solve();
    assert_string_equal(opts(0), "c2 c4");
    F.max_types = 1;
    solve();
    assert_int_equal(F.plan.n_claims, 0);
    assert_error("web", "minValues cannot be met by the 1 cheapest instance types");
}

/* MIN_VALUES_POLICY=BestEffort: minValues is lowered to what the options meet, and the claim
 * says so; a claim that meets it is not marked. */
static void test_min_values_best_effort(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL,
             ",\"requirements\":[{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":"
             "\"Exists\",\"minValues\":2},{\"key\":\"kp.dev/gen\",\"operator\":\"Gte\","
             "\"values\":[\"3\"],\"minValues\":3}]");
    itype(p, "c2", 2, 8, 100, "a", "kp.dev/gen=3");
    itype(p, "c4", 4, 8, 200, "a", "kp.dev/gen=4");
    itype(p, "c8", 8, 8, 400, "a", "kp.dev/gen=4");
    F.best_effort = true;
    pod("fits-one", "6", NULL, NULL);
    pod("fits-all", "1", NULL, NULL);
    solve();
    assert_string_equal(where("fits-one"), "claim:0");
    assert_string_equal(opts(0), "c8");
    assert_true(F.plan.claims[0].min_values_relaxed);
    assert_int_equal(kp_reqset_get(&F.plan.claims[0].reqs, KP_LABEL_INSTANCE_TYPE)->min_values, 1);
    /* The rebuilt set keeps its bound. */
    assert_string_equal(creq(0, "kp.dev/gen"), "kp.dev/gen Exists Gte 3");
    assert_int_equal(kp_reqset_get(&F.plan.claims[0].reqs, "kp.dev/gen")->min_values, 1);
    /* fits-all could join c8's claim (fewest pods first) */
    assert_string_equal(where("fits-all"), "claim:0");
    /* Strict: two gen values can never make three, so the pool itself is unusable. */
    F.best_effort = false;
    solve();
    assert_error("fits-one", "nodepool requirements filtered out all available instance types");
    assert_error("fits-all", "nodepool requirements filtered out all available instance types");
}

/* A pool whose requirements leave no instance type is skipped. */
static void test_pool_filtered_out(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL,
             ",\"requirements\":[{\"key\":\"kubernetes.io/arch\",\"operator\":\"In\",\"values\":"
             "[\"arm64\"]}]");
    itype(p, "m", 4, 16, 100, "a", NULL);
    pod("web", "1", NULL, NULL);
    solve();
    assert_error("web", "nodepool requirements filtered out all available instance types");
    teardown(NULL);
    setup(NULL);
    pod("web", "1", NULL, NULL);
    solve();
    assert_error("web", "no nodepools found");
}

/* Unsupported features are refused, not guessed. */
static void test_refused(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "m", 4, 16, 100, "a", NULL);
    pod("fields", "1", NULL,
        ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
        "{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":"
        "\"In\",\"values\":[\"n\"]}]}]}}}");
    pod("nssel", "1", NULL,
        ",\"affinity\":{\"podAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{"
        "\"topologyKey\":\"" ZONE "\",\"labelSelector\":{},\"namespaceSelector\":{"
        "\"matchLabels\":{\"x\":\"y\"}}}]}}");
    pod("ok", "1", NULL, NULL);
    /* A term without a topology key (the API refuses it; a view might still carry one). */
    {
        static struct kp_pod_view v;
        static struct kp_pod_term t;
        const struct kp_pod_view *a =
            mkpod("nokey-src", "elsewhere", "1", "1Gi", NULL, ANTI(HOST, "x"));

        memcpy(&v, a, sizeof(v));
        t = a->anti_affinity[0];
        t.topology_key = "";
        v.anti_affinity = &t;
        F.pods[F.n_pods++] = &v;
    }
    solve();
    assert_error("nokey-src", "has no topologyKey");
    assert_error("fields", "matchFields is not supported");
    assert_error("nssel", "namespaceSelector with expressions is not supported");
    assert_string_equal(where("ok"), "claim:0");
}

/* The same input gives the same plan. */
static void test_deterministic(void **state)
{
    char first[1024], second[1024];
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "m", 4, 16, 100, "a,b,c", NULL);
    itype(p, "n", 4, 16, 100, "a,b,c", NULL);
    for (int i = 0; i < 6; i++) {
        char name[16];

        (void)snprintf(name, sizeof(name), "w%d", i);
        mkpod(name, NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    }
    solve();
    first[0] = '\0';
    for (size_t c = 0; c < F.plan.n_claims; c++)
        (void)snprintf(first + strlen(first), sizeof(first) - strlen(first), "%s|%s|%s;", cpods(c),
                       opts(c), creq(c, ZONE));
    solve();
    second[0] = '\0';
    for (size_t c = 0; c < F.plan.n_claims; c++)
        (void)snprintf(second + strlen(second), sizeof(second) - strlen(second), "%s|%s|%s;",
                       cpods(c), opts(c), creq(c, ZONE));
    assert_string_equal(first, second);
}

/* The plan as text: each claim's pods, options and zone, then each pod's place by name. */
static void plan_text(char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (size_t c = 0; c < F.plan.n_claims; c++)
        len +=
            (size_t)snprintf(buf + len, size - len, "[%s|%s|%s]", cpods(c), opts(c), creq(c, ZONE));
    /* Pods by name (names are unique), so the text does not depend on input order. */
    for (const char *prev = NULL;;) {
        size_t i = SIZE_MAX;

        for (size_t j = 0; j < F.n_pods; j++)
            if ((!prev || strcmp(F.pods[j]->e.name, prev) > 0) &&
                (i == SIZE_MAX || strcmp(F.pods[j]->e.name, F.pods[i]->e.name) < 0))
                i = j;
        if (i == SIZE_MAX)
            break;
        prev = F.pods[i]->e.name;
        if (F.plan.pods[i].where == KP_SCHED_NODE)
            len += (size_t)snprintf(buf + len, size - len, " %s@%s", prev,
                                    F.nodes[F.plan.pods[i].index].name);
    }
    assert_true(len < size);
}

/* The order of pods, nodes and pools in the input does not change the plan (the orders are
 * total and none of them is input order unless everything else ties). */
static void test_input_order(void **state)
{
    char first[2048], second[2048];
    struct kp_sched_node tmpn;
    struct kp_sched_pool tmpp;
    size_t a, b;

    (void)state;
    a = pool("a-pool", ",\"weight\":5", NULL);
    b = pool("b-pool", ",\"weight\":5", NULL);
    itype(a, "m", 2, 8, 100, "a,b", NULL);
    itype(b, "m", 2, 8, 100, "a,b", NULL);
    node("n1", "a-pool", "a", 1, 8);
    node("n2", "b-pool", "b", 1, 8);
    for (int i = 0; i < 8; i++) {
        static char names[8][16];

        (void)snprintf(names[i], sizeof(names[i]), "p%d", i);
        mkpod(names[i], NULL, i % 2 ? "500m" : "1", "1Gi", "\"app\":\"w\"",
              SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    }
    solve();
    plan_text(first, sizeof(first));
    /* Reverse the pods, swap the nodes and the pools. */
    for (size_t i = 0; i < F.n_pods / 2; i++) {
        const struct kp_pod_view *t = F.pods[i];

        F.pods[i] = F.pods[F.n_pods - 1 - i];
        F.pods[F.n_pods - 1 - i] = t;
    }
    tmpn = F.nodes[0];
    F.nodes[0] = F.nodes[1];
    F.nodes[1] = tmpn;
    tmpp = F.pools[0];
    F.pools[0] = F.pools[1];
    F.pools[1] = tmpp;
    solve();
    plan_text(second, sizeof(second));
    /* Claims name pods and pools' types by name, so only pool indices differ: compare text. */
    assert_string_equal(first, second);
}

/* --- step 2: topology spread, pod affinity and anti-affinity ------------------------------- */

/* Zone spread, maxSkew 1, over the zones the pool can launch into: claims alternate zones
 * (least count first, ties by zone name). */
static void test_spread_zone(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b", NULL);
    for (int i = 0; i < 4; i++) {
        char name[8];

        (void)snprintf(name, sizeof(name), "w%d", i);
        mkpod(name, NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    }
    solve();
    assert_int_equal(F.plan.n_claims, 4);
    assert_string_equal(creq(0, ZONE), ZONE " In [a]");
    assert_string_equal(creq(1, ZONE), ZONE " In [b]");
    assert_string_equal(creq(2, ZONE), ZONE " In [a]");
    assert_string_equal(creq(3, ZONE), ZONE " In [b]");
}

/* Bound pods count: with two web pods in zone a already, the next two go to b. */
static void test_spread_counts_existing(void **state)
{
    struct kp_sched_node *n;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b", NULL);
    n = node("n", "default", "a", 2, 8);
    bind(n, "old1", "1", "\"app\":\"w\"", NULL);
    bind(n, "old2", "1", "\"app\":\"w\"", NULL);
    bind(n, "other", "0", "\"app\":\"x\"", NULL);
    mkpod("w1", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    mkpod("w2", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    mkpod("w3", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    solve();
    assert_string_equal(creq(res("w1")->index, ZONE), ZONE " In [b]");
    assert_string_equal(creq(res("w2")->index, ZONE), ZONE " In [b]");
    /* 2 and 2 now: the third may go to either; the least name wins. */
    assert_string_equal(creq(res("w3")->index, ZONE), ZONE " In [a]");
}

/* An existing node in a zone that would break the skew is passed over. */
static void test_spread_existing_node(void **state)
{
    struct kp_sched_node *a;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b", NULL);
    a = node("n-a", "default", "a", 8, 8);
    bind(a, "old", "1", "\"app\":\"w\"", NULL);
    mkpod("w1", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    mkpod("w2", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    solve();
    /* w1 on n-a would make a:2 b:0; it opens a claim in b, after which n-a takes w2. */
    assert_string_equal(where("w1"), "claim:0");
    assert_string_equal(creq(0, ZONE), ZONE " In [b]");
    assert_string_equal(where("w2"), "node:n-a");
}

/* Hostname spread: each new claim is a domain of its own, counted from 0. */
static void test_spread_hostname(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "big", 16, 64, 100, "a", NULL);
    mkpod("w1", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(HOST, 1, "DoNotSchedule", "w"));
    mkpod("w2", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(HOST, 1, "DoNotSchedule", "w"));
    mkpod("w3", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(HOST, 2, "DoNotSchedule", "w"));
    solve();
    assert_string_equal(where("w1"), "claim:0");
    assert_string_equal(where("w2"), "claim:1");
    /* maxSkew 2 lets a second one share. */
    assert_string_equal(where("w3"), "claim:0");
}

/* A type in nz zones z00, z01, ... (one offering each), for more zones than itype takes. */
static void itype_zones(size_t p, const char *name, int64_t cpu, int64_t price, size_t nz)
{
    static char zones[100][24];
    const char *zv[100];
    struct kp_instance_type *it = itype(p, name, cpu, 8, price, "z00", NULL);

    assert_true(nz <= 100);
    for (size_t i = 0; i < nz; i++) {
        (void)snprintf(zones[i], sizeof(zones[i]), "z%02zu", i);
        zv[i] = zones[i];
    }
    kp_reqset_remove(&it->reqs, KP_LABEL_ZONE);
    assert_int_equal(kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, zv, nz, 0), 0);
    for (size_t i = 0; i < it->n_offerings; i++)
        kp_reqset_done(&it->offerings[i].reqs);
    kp_free(it->offerings);
    it->n_offerings = 0;
    it->offerings = kp_calloc(nz, sizeof(*it->offerings));
    assert_non_null(it->offerings);
    for (size_t i = 0; i < nz; i++) {
        struct kp_offering *o = &it->offerings[it->n_offerings++];

        add_in(&o->reqs, KP_LABEL_ZONE, zv[i]);
        add_in(&o->reqs, KP_LABEL_CAPACITY_TYPE, KP_CAPACITY_TYPE_ON_DEMAND);
        o->price_micro_usd = price;
        o->available = true;
    }
}

/* ZONES beyond its classes and words: zone spread over 70 zones opens one claim per zone (70
 * zone sets, more than ZONE_CLASSES, so some claims are loose), then the next 210 pods fill
 * those claims round the zones, never a new claim, since every claim's zone stays feasible. */
static void test_spread_zone_many(void **state)
{
    size_t p, per_claim[70] = {0};

    (void)state;
    p = pool("default", NULL, NULL);
    itype_zones(p, "c4", 4, 100, 70);
    for (int i = 0; i < 280; i++) {
        char name[8];

        (void)snprintf(name, sizeof(name), "w%03d", i);
        mkpod(name, NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    }
    solve();
    assert_int_equal(F.plan.n_claims, 70);
    for (size_t c = 0; c < 70; c++) {
        char want[64];

        (void)snprintf(want, sizeof(want), ZONE " In [z%02zu]", c);
        assert_string_equal(creq(c, ZONE), want);
    }
    for (size_t i = 0; i < F.plan.n_pods; i++) {
        assert_int_equal(F.plan.pods[i].where, KP_SCHED_CLAIM);
        per_claim[F.plan.pods[i].index]++;
    }
    for (size_t c = 0; c < 70; c++)
        assert_int_equal(per_claim[c], 4);
}

/* 100 two-CPU pods fill 50 claims of a 5-CPU type two by two; 100 one-CPU pods with hostname
 * anti-affinity (spec) then take the last CPU of each of those 50 (each claim untaken until
 * then), and the other 50 need a claim each: 100 in all, none relaxed. */
static void anti_hostname_many(const char *spec)
{
    size_t p = pool("default", NULL, NULL);

    itype(p, "c5", 5, 64, 100, "a", NULL);
    for (int i = 0; i < 100; i++) {
        char name[8];

        (void)snprintf(name, sizeof(name), "p%03d", i);
        mkpod(name, NULL, "2", "1Gi", "\"app\":\"p\"", NULL);
        (void)snprintf(name, sizeof(name), "w%03d", i);
        mkpod(name, NULL, "1", "1Gi", "\"app\":\"w\"", spec);
    }
    solve();
    assert_int_equal(F.plan.n_claims, 100);
    for (int i = 0; i < 100; i++) {
        char name[8];
        const struct kp_sched_result *r;

        (void)snprintf(name, sizeof(name), "w%03d", i);
        r = res(name);
        assert_int_equal(r->where, KP_SCHED_CLAIM);
        assert_int_equal(r->relaxed, 0);
        assert_int_equal(F.plan.claims[r->index].n_pods, i < 50 ? 3 : 1);
    }
}

/* HOSTS over more than one word of claims, for required hostname anti-affinity. */
static void test_anti_hostname_many(void **state)
{
    (void)state;
    anti_hostname_many(ANTI(HOST, "w"));
}

/* The same with the anti-affinity preferred: while the preference is in force it refuses a
 * taken claim as the required one does (HOSTS), and a new claim always meets it. */
static void test_anti_hostname_preferred_many(void **state)
{
    (void)state;
    anti_hostname_many(
        ",\"affinity\":{\"podAntiAffinity\":{\"preferredDuringSchedulingIgnored"
        "DuringExecution\":[{\"weight\":1,\"podAffinityTerm\":{\"topologyKey\":\"" HOST
        "\",\"labelSelector\":{\"matchLabels\":{\"app\":\"w\"}}}}]}}");
}

/* An existing node without the label a pod's hard topology needs is no place for it (Karpenter's
 * ExistingNode.CanAdd: the node's requirements must be compatible with the topology's, and a key
 * the node has no value for is not): pod affinity and a DoNotSchedule spread over a custom key
 * of the pool go to the node that has the label, never the one without. */
static void test_existing_node_lacks_topology_label(void **state)
{
    static const char *const specs[] = {
        AFFINITY("kp.dev/rack", "db"),
        SPREAD("kp.dev/rack", 1, "DoNotSchedule", "w"),
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(specs); i++) {
        size_t p;
        struct kp_sched_node *b;

        if (i) {
            teardown(NULL);
            setup(NULL);
        }
        p = pool("default", NULL,
                 ",\"requirements\":[{\"key\":\"kp.dev/rack\",\"operator\":\"In\","
                 "\"values\":[\"r1\",\"r2\"]}]");
        itype(p, "c4", 4, 16, 100, "a", NULL);
        node("n-a", "default", "a", 8, 32);
        b = node("n-b", "default", "a", 8, 32);
        node_label(b, "kp.dev/rack", "r1");
        bind(b, "db", "0", "\"app\":\"db\"", NULL);
        mkpod("p", NULL, "1", "1Gi", "\"app\":\"w\"", specs[i]);
        solve();
        if (strcmp(where("p"), "node:n-b") != 0)
            fail_msg("%s: the pod went to %s", i ? "spread" : "affinity", where("p"));
    }
}

/* minDomains above the domains there are makes the global minimum 0. */
static void test_spread_min_domains(void **state)
{
    struct kp_sched_node *a, *b;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b", NULL);
    a = node("n-a", "default", "a", 8, 8);
    b = node("n-b", "default", "b", 8, 8);
    bind(a, "old-a", "1", "\"app\":\"w\"", NULL);
    bind(b, "old-b", "1", "\"app\":\"w\"", NULL);
    mkpod("loose", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    mkpod("strict", NULL, "1", "1Gi", "\"app\":\"w\"",
          ",\"topologySpreadConstraints\":[{\"maxSkew\":1,\"minDomains\":3,\"topologyKey\":\"" ZONE
          "\",\"whenUnsatisfiable\":\"DoNotSchedule\",\"labelSelector\":{\"matchLabels\":"
          "{\"app\":\"w\"}}}]");
    solve();
    assert_string_equal(where("loose"), "node:n-a");
    assert_error("strict", "unsatisfiable topology spread constraint, key=" ZONE);
}

/* A DoNotSchedule spread that cannot be met fails; ScheduleAnyway is relaxed. */
static void test_spread_unsatisfiable(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL,
             ",\"requirements\":[{\"key\":\"" ZONE "\",\"operator\":\"In\",\"values\":[\"a\"]}]");
    itype(p, "c1", 1, 8, 100, "a,b", NULL);
    node("n-b", NULL, "b", 0, 0); /* zone b exists, but nothing can launch there */
    mkpod("hard1", NULL, "1", "1Gi", "\"app\":\"h\"", SPREAD(ZONE, 1, "DoNotSchedule", "h"));
    mkpod("hard2", NULL, "1", "1Gi", "\"app\":\"h\"", SPREAD(ZONE, 1, "DoNotSchedule", "h"));
    mkpod("soft1", NULL, "1", "1Gi", "\"app\":\"s\"", SPREAD(ZONE, 1, "ScheduleAnyway", "s"));
    /* Two ScheduleAnyway constraints: the first (zone, unsatisfiable) goes first, and the
     * hostname one, which holds, is kept. */
    mkpod("soft2", NULL, "1", "1Gi", "\"app\":\"s\"",
          ",\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"" ZONE "\","
          "\"whenUnsatisfiable\":\"ScheduleAnyway\",\"labelSelector\":{\"matchLabels\":{"
          "\"app\":\"s\"}}},{\"maxSkew\":1,\"topologyKey\":\"" HOST "\",\"whenUnsatisfiable\":"
          "\"ScheduleAnyway\",\"labelSelector\":{\"matchLabels\":{\"app\":\"s\"}}}]");
    solve();
    assert_string_equal(where("hard1"), "claim:0");
    assert_error("hard2", "unsatisfiable topology spread constraint");
    assert_string_equal(where("soft1"), "claim:1");
    assert_int_equal(res("soft1")->relaxed, 0);
    assert_int_equal(res("soft2")->where, KP_SCHED_CLAIM);
    assert_int_equal(res("soft2")->relaxed, 1);
    /* The hostname spread still held: soft2 did not join soft1's claim. */
    assert_int_not_equal(res("soft2")->index, res("soft1")->index);
}

/* Hostname anti-affinity: one per node, existing matching pods included. */
static void test_anti_affinity_hostname(void **state)
{
    struct kp_sched_node *n, *m;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "big", 16, 64, 100, "a", NULL);
    n = node("n", "default", "a", 16, 64);
    m = node("m", "default", "a", 16, 64);
    bind(n, "old", "1", "\"app\":\"db\"", NULL);
    (void)m;
    mkpod("db1", NULL, "1", "1Gi", "\"app\":\"db\"", ANTI(HOST, "db"));
    mkpod("db2", NULL, "1", "1Gi", "\"app\":\"db\"", ANTI(HOST, "db"));
    mkpod("db3", NULL, "1", "1Gi", "\"app\":\"db\"", ANTI(HOST, "db"));
    solve();
    assert_string_equal(where("db1"), "node:m");
    assert_string_equal(where("db2"), "claim:0");
    assert_string_equal(where("db3"), "claim:1");
}

/* Zone anti-affinity blocks the zone of a matching pod, and a claim that could land in several
 * zones blocks all of them. */
static void test_anti_affinity_zone(void **state)
{
    struct kp_sched_node *n;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b,c", NULL);
    n = node("n", "default", "a", 0, 8);
    bind(n, "old", "0", "\"app\":\"db\"", NULL);
    mkpod("db1", NULL, "1", "1Gi", "\"app\":\"db\"", ANTI(ZONE, "db"));
    mkpod("db2", NULL, "1", "1Gi", "\"app\":\"db\"", ANTI(ZONE, "db"));
    mkpod("db3", NULL, "1", "1Gi", "\"app\":\"db\"", ANTI(ZONE, "db"));
    solve();
    /* db1 may go to b or c: its claim keeps both, which blocks both for db2. */
    assert_string_equal(creq(0, ZONE), ZONE " In [b c]");
    assert_error("db2", "unsatisfiable pod anti-affinity constraint, key=" ZONE);
    assert_error("db3", "pod anti-affinity");
}

/* A bound pod's anti-affinity keeps the pods it selects out of its domain (inverse), and a
 * batch pod's does too once it is placed. */
static void test_inverse_anti_affinity(void **state)
{
    struct kp_sched_node *n, *m;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "big", 16, 64, 100, "a", NULL);
    n = node("n", "default", "a", 16, 64);
    m = node("o", "default", "a", 1, 64);
    bind(n, "loner", "1", "\"app\":\"loner\"", ANTI(HOST, "web"));
    (void)m;
    mkpod("web", NULL, "1", "1Gi", "\"app\":\"web\"", NULL);
    mkpod("web2", NULL, "1", "1Gi", "\"app\":\"web\"", NULL);
    mkpod("shy", NULL, "2", "1Gi", "\"app\":\"shy\"", ANTI(HOST, "web"));
    solve();
    /* shy (largest, first) may join loner: n holds no web pod. */
    assert_string_equal(where("shy"), "node:n");
    /* web cannot join loner or shy on n: o takes one, the other a new claim. */
    assert_string_equal(where("web"), "node:o");
    assert_string_equal(where("web2"), "claim:0");
}

/* Zone affinity to a bound pod narrows the claim to that pod's zone; hostname affinity puts the
 * pod on that node. */
static void test_affinity(void **state)
{
    struct kp_sched_node *n;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b,c", NULL);
    n = node("n", "default", "b", 1, 8);
    bind(n, "db", "1", "\"app\":\"db\"", NULL);
    mkpod("near", NULL, "1", "1Gi", "\"app\":\"web\"", AFFINITY(ZONE, "db"));
    mkpod("lost", NULL, "1", "1Gi", "\"app\":\"web\"", AFFINITY(ZONE, "cache"));
    solve();
    assert_string_equal(creq(res("near")->index, ZONE), ZONE " In [b]");
    assert_error("lost", "unsatisfiable pod affinity constraint, key=" ZONE);
}

static void test_affinity_hostname_existing(void **state)
{
    struct kp_sched_node *n, *m;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c8", 8, 8, 100, "a", NULL);
    m = node("a-first", "default", "a", 8, 8);
    n = node("b-db", "default", "a", 8, 8);
    bind(n, "db", "1", "\"app\":\"db\"", NULL);
    (void)m;
    mkpod("near", NULL, "1", "1Gi", "\"app\":\"web\"", AFFINITY(HOST, "db"));
    solve();
    assert_string_equal(where("near"), "node:b-db");
}

/* Pods with affinity to their own kind bootstrap: the first lands anywhere, the rest follow. */
static void test_self_affinity(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c8", 8, 8, 100, "a,b", NULL);
    mkpod("g1", NULL, "1", "1Gi", "\"app\":\"g\"", AFFINITY(ZONE, "g"));
    mkpod("g2", NULL, "1", "1Gi", "\"app\":\"g\"", AFFINITY(ZONE, "g"));
    mkpod("h1", NULL, "1", "1Gi", "\"app\":\"h\"", AFFINITY(HOST, "h"));
    mkpod("h2", NULL, "1", "1Gi", "\"app\":\"h\"", AFFINITY(HOST, "h"));
    solve();
    assert_string_equal(creq(res("g1")->index, ZONE), ZONE " In [a]");
    assert_int_equal(res("g2")->index, res("g1")->index);
    assert_int_equal(res("h2")->where, KP_SCHED_CLAIM);
    assert_int_equal(res("h2")->index, res("h1")->index);
}

/* nodeAffinityPolicy: by default (Honor) pods on nodes the pod's node selection excludes are
 * not counted; with Ignore they are. */
static void test_spread_node_affinity_policy(void **state)
{
    static const char *const policy[] = {"Honor", "Ignore"};

    (void)state;
    for (size_t k = 0; k < 2; k++) {
        struct kp_sched_node *n;
        char spec[512];
        struct kp_entry *e;

        teardown(NULL);
        setup(NULL);
        e = decode(kp_nodepool_decode,
                   "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{"
                   "\"name\":\"x\",\"uid\":\"np-x\",\"resourceVersion\":\"1\"},\"spec\":{"
                   "\"template\":{\"metadata\":{\"labels\":{\"team\":\"x\"}},\"spec\":{"
                   "\"nodeClassRef\":{\"group\":\"g\",\"kind\":\"K\",\"name\":\"c\"}}}}}");
        F.pools[F.n_pools++].np = kp_nodepool_view(e);
        itype(0, "c1", 1, 8, 100, "a,b", NULL);
        n = node("other-team", NULL, "a", 0, 8); /* no team label */
        bind(n, "o1", "0", "\"app\":\"w\"", NULL);
        bind(n, "o2", "0", "\"app\":\"w\"", NULL);
        (void)snprintf(spec, sizeof(spec),
                       ",\"nodeSelector\":{\"team\":\"x\"},\"topologySpreadConstraints\":[{"
                       "\"maxSkew\":1,\"topologyKey\":\"" ZONE "\",\"whenUnsatisfiable\":"
                       "\"DoNotSchedule\",\"nodeAffinityPolicy\":\"%s\",\"labelSelector\":{"
                       "\"matchLabels\":{\"app\":\"w\"}}}]",
                       policy[k]);
        mkpod("w1", NULL, "1", "1Gi", "\"app\":\"w\"", spec);
        solve();
        assert_string_equal(creq(res("w1")->index, ZONE), k == 0 ? ZONE " In [a]" : ZONE " In [b]");
    }
}

/* nodeTaintsPolicy Honor: zones only a pool the pod does not tolerate can launch into are not
 * domains; with the default (Ignore) they are, count 0 forever, and hold the skew down. */
static void test_spread_node_taints_policy(void **state)
{
    static const char *const policy[] = {"Ignore", "Honor"};

    (void)state;
    for (size_t k = 0; k < 2; k++) {
        char spec[512];
        size_t plain, tainted;

        teardown(NULL);
        setup(NULL);
        plain = pool("plain", NULL, NULL);
        tainted = pool("tainted", NULL, ",\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]");
        itype(plain, "c1", 1, 8, 100, "a,b", NULL);
        itype(tainted, "c1", 1, 8, 100, "c", NULL);
        (void)snprintf(spec, sizeof(spec),
                       ",\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"" ZONE
                       "\",\"whenUnsatisfiable\":\"DoNotSchedule\",\"nodeTaintsPolicy\":\"%s\","
                       "\"labelSelector\":{\"matchLabels\":{\"app\":\"w\"}}}]",
                       policy[k]);
        mkpod("w1", NULL, "1", "1Gi", "\"app\":\"w\"", spec);
        mkpod("w2", NULL, "1", "1Gi", "\"app\":\"w\"", spec);
        mkpod("w3", NULL, "1", "1Gi", "\"app\":\"w\"", spec);
        solve();
        assert_string_equal(creq(res("w1")->index, ZONE), ZONE " In [a]");
        assert_string_equal(creq(res("w2")->index, ZONE), ZONE " In [b]");
        if (k == 0) /* the spread asks for zone c, which plain cannot launch into */
            assert_error("w3", "\"plain\", no instance type met the scheduling requirements");
        else
            assert_string_equal(creq(res("w3")->index, ZONE), ZONE " In [a]");
    }
}

/* matchLabelKeys: the pod's own value of each key joins the selector, so another revision's pods
 * are not counted. */
static void test_spread_match_label_keys(void **state)
{
    static const char *const keys[] = {"", ",\"matchLabelKeys\":[\"rev\"]"};

    (void)state;
    for (size_t k = 0; k < 2; k++) {
        struct kp_sched_node *n;
        char spec[512];
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, NULL);
        itype(p, "c1", 1, 8, 100, "a,b", NULL);
        n = node("n-a", "default", "a", 8, 8);
        bind(n, "old1", "1", "\"app\":\"w\",\"rev\":\"1\"", NULL);
        bind(n, "old2", "1", "\"app\":\"w\",\"rev\":\"1\"", NULL);
        (void)snprintf(spec, sizeof(spec),
                       ",\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"" ZONE
                       "\",\"whenUnsatisfiable\":\"DoNotSchedule\",\"labelSelector\":{"
                       "\"matchLabels\":{\"app\":\"w\"}}%s}]",
                       keys[k]);
        mkpod("new", NULL, "1", "1Gi", "\"app\":\"w\",\"rev\":\"2\"", spec);
        solve();
        if (k == 0)
            assert_string_equal(creq(res("new")->index, ZONE), ZONE " In [b]");
        else
            assert_string_equal(where("new"), "node:n-a");
    }
}

/* A batch pod's anti-affinity, once it is placed, keeps the pods it selects off its claim. */
static void test_batch_inverse_anti_affinity(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "big", 16, 64, 100, "a", NULL);
    mkpod("shy", NULL, "2", "1Gi", "\"app\":\"shy\"", ANTI(HOST, "web"));
    mkpod("web", NULL, "1", "1Gi", "\"app\":\"web\"", NULL);
    mkpod("other", NULL, "1", "1Gi", "\"app\":\"other\"", NULL);
    solve();
    assert_string_equal(where("shy"), "claim:0");
    assert_string_equal(where("web"), "claim:1");
    /* A pod shy does not select may share with it (fewest pods first: claim 1 has one pod too,
     * and claim 0 was opened first). */
    assert_string_equal(where("other"), "claim:0");
}

/* An existing node's PreferNoSchedule taint is tolerated after relaxation when some pool has
 * one too. */
static void test_relax_prefer_no_schedule_node(void **state)
{
    struct kp_sched_node *n;
    size_t p;

    (void)state;
    p = pool("soft", NULL, ",\"taints\":[{\"key\":\"spot\",\"effect\":\"PreferNoSchedule\"}]");
    itype(p, "c1", 1, 8, 100, "a", NULL);
    n = node("n", NULL, "a", 4, 8);
    node_taint(n, "other", KP_TAINT_PREFER_NO_SCHEDULE, false);
    pod("web", "1", NULL, NULL);
    solve();
    assert_string_equal(where("web"), "node:n");
    assert_int_equal(res("web")->relaxed, 1);
}

/* Invariants over a larger batch: hostname anti-affinity gives every pod a host of its own
 * (existing nodes first), and a zone spread ends within its skew, counting bound pods. */
static void test_batch_invariants(void **state)
{
    static char names[MAXP][16], nnames[MAXN][16];
    size_t p, used[MAXN + MAXP], zone_count[3] = {0, 0, 0};
    static const char *const zones[] = {"a", "b", "c"};

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c2", 2, 8, 100, "a,b,c", NULL);
    itype(p, "c8", 8, 32, 300, "a,b,c", NULL);
    for (size_t i = 0; i < 10; i++) {
        struct kp_sched_node *n;

        (void)snprintf(nnames[i], sizeof(nnames[i]), "node-%02zu", i);
        n = node(nnames[i], "default", zones[i % 3], 4, 16);
        bind(n, "busy", "1", "\"app\":\"other\"", NULL);
        if (i < 2)
            bind(n, "old-spread", "0", "\"app\":\"z\"", NULL); /* zones a and b: 1 each */
    }
    for (size_t i = 0; i < 24; i++) {
        (void)snprintf(names[i], sizeof(names[i]), "anti-%02zu", i);
        mkpod(names[i], NULL, "500m", "1Gi", "\"app\":\"anti\"", ANTI(HOST, "anti"));
    }
    for (size_t i = 24; i < 54; i++) {
        (void)snprintf(names[i], sizeof(names[i]), "z-%02zu", i);
        mkpod(names[i], NULL, "250m", "256Mi", "\"app\":\"z\"",
              SPREAD(ZONE, 1, "DoNotSchedule", "z"));
    }
    solve();
    memset(used, 0, sizeof(used));
    for (size_t i = 0; i < 24; i++) {
        const struct kp_sched_result *r = &F.plan.pods[i];
        size_t slot;

        assert_int_not_equal(r->where, KP_SCHED_FAILED);
        slot = r->where == KP_SCHED_NODE ? r->index : MAXN + r->index;
        assert_int_equal(used[slot], 0);
        used[slot] = 1;
    }
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(used[i], 1); /* every existing node took one */
    zone_count[0] = zone_count[1] = 1;
    for (size_t i = 24; i < 54; i++) {
        const struct kp_sched_result *r = &F.plan.pods[i];
        const char *z;

        assert_int_not_equal(r->where, KP_SCHED_FAILED);
        if (r->where == KP_SCHED_NODE) {
            z = kp_labels_get(&F.nodes[r->index].labels, ZONE);
        } else {
            const struct kp_req *zr = kp_reqset_get(&F.plan.claims[r->index].reqs, ZONE);

            assert_non_null(zr);
            z = kp_req_single(zr);
        }
        assert_non_null(z);
        zone_count[z[0] - 'a']++;
    }
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            assert_true(zone_count[a] <= zone_count[b] + 1);
    assert_int_equal(zone_count[0] + zone_count[1] + zone_count[2], 32);
}

/* Terms select pods in the pod's own namespace, the namespaces they list, or all of them with
 * an empty namespaceSelector; spreads count their own namespace only. */
static void test_namespaces(void **state)
{
    static const struct {
        const char *term_ns; /* members added to the affinity term */
        const char *want;    /* zone of the claim, or NULL: fails */
    } cases[] = {
        {"", NULL},
        {",\"namespaces\":[\"other\"]", ZONE " In [b]"},
        {",\"namespaceSelector\":{}", ZONE " In [b]"},
    };

    (void)state;
    for (size_t k = 0; k < KP_ARRAY_SIZE(cases); k++) {
        struct kp_sched_node *n;
        char spec[512];
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, NULL);
        itype(p, "c1", 1, 8, 100, "a,b", NULL);
        n = node("n", NULL, "b", 0, 8);
        F.ns = "other";
        bind(n, "db", "0", "\"app\":\"db\"", NULL);
        F.ns = NULL;
        (void)snprintf(spec, sizeof(spec),
                       ",\"affinity\":{\"podAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
                       "Execution\":[{\"topologyKey\":\"" ZONE "\",\"labelSelector\":{"
                       "\"matchLabels\":{\"app\":\"db\"}}%s}]}}",
                       cases[k].term_ns);
        pod("web", "1", NULL, spec);
        solve();
        if (cases[k].want)
            assert_string_equal(creq(res("web")->index, ZONE), cases[k].want);
        else
            assert_error("web", "unsatisfiable pod affinity constraint");
    }
    /* A spread does not count the other namespace's pods: a:0 b:0 (not a:1), least name. */
    teardown(NULL);
    setup(NULL);
    itype(pool("default", NULL, NULL), "c1", 1, 8, 100, "a,b", NULL);
    node("n", NULL, "a", 0, 8);
    F.ns = "other";
    bind(&F.nodes[0], "w-other", "0", "\"app\":\"w\"", NULL);
    F.ns = NULL;
    mkpod("w", NULL, "1", "1Gi", "\"app\":\"w\"", SPREAD(ZONE, 1, "DoNotSchedule", "w"));
    solve();
    assert_string_equal(creq(0, ZONE), ZONE " In [a]");
}

/* Terminating pods hold their resources but count for no topology. */
static void test_terminating_bound_pod(void **state)
{
    static const char terminating[] = "\"app\":\"w\"},\"deletionTimestamp\":"
                                      "\"2026-01-01T00:00:01Z\",\"annotations\":{\"x\":\"y\"";
    struct kp_sched_node *n;
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b", NULL);
    n = node("n", NULL, "a", 2, 8);
    assert_true(kp_pod_terminating(bind(n, "leaving", "1", terminating, NULL)));
    mkpod("w1", NULL, "1", "1Gi", "\"app\":\"w\"", ANTI(ZONE, "w"));
    mkpod("w2", NULL, "1", "1Gi", "\"app\":\"w\"", ANTI(ZONE, "w"));
    solve();
    /* The leaving pod does not repel w1 from zone a, and w1 fits in the 1 cpu it leaves. */
    assert_string_equal(where("w1"), "node:n");
    /* w2 has no room on n, and w1 now keeps it out of zone a. */
    assert_string_equal(creq(res("w2")->index, ZONE), ZONE " In [b]");
}

/* --- step 3: preference relaxation (preferences.go) ----------------------------------------- */

#define PREFER_ZONE(w, z)                                                                          \
    "{\"weight\":" #w ",\"preference\":{\"matchExpressions\":[{\"key\":\"" ZONE                    \
    "\",\"operator\":\"In\",\"values\":[\"" z "\"]}]}}"

/* The heaviest preferred node-affinity term is required until relaxed; then the next. */
static void test_relax_preferred_node_affinity(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b", NULL);
    pod("likes-b", "1", NULL,
        ",\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[" PREFER_ZONE(
            1, "a") "," PREFER_ZONE(50, "b") "]}}");
    pod("likes-z", "1", NULL,
        ",\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[" PREFER_ZONE(
            1, "a") "," PREFER_ZONE(50, "z") "]}}");
    solve();
    assert_string_equal(creq(res("likes-b")->index, ZONE), ZONE " In [b]");
    assert_int_equal(res("likes-b")->relaxed, 0);
    /* z is nowhere: dropped, then the lighter preference a holds. */
    assert_string_equal(creq(res("likes-z")->index, ZONE), ZONE " In [a]");
    assert_int_equal(res("likes-z")->relaxed, 1);
}

/* Required node-affinity terms are ORed: the first is dropped while more than one is left. */
static void test_relax_required_terms(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b", NULL);
    pod("web", "1", NULL,
        ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
        "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"" ZONE "\",\"operator\":\"In\","
        "\"values\":[\"z\"]}]},{\"matchExpressions\":[{\"key\":\"" ZONE "\",\"operator\":\"In\","
        "\"values\":[\"b\"]}]},{\"matchExpressions\":[{\"key\":\"" ZONE "\",\"operator\":\"In\","
        "\"values\":[\"y\"]}]}]}}}");
    pod("never", "1", NULL,
        ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
        "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"" ZONE "\",\"operator\":\"In\","
        "\"values\":[\"z\"]}]},{\"matchExpressions\":[{\"key\":\"" ZONE "\",\"operator\":\"In\","
        "\"values\":[\"y\"]}]}]}}}");
    solve();
    assert_string_equal(creq(res("web")->index, ZONE), ZONE " In [b]");
    assert_int_equal(res("web")->relaxed, 1);
    /* The last term is never dropped. */
    assert_error("never", "no instance type met the scheduling requirements");
    assert_int_equal(res("never")->relaxed, 0);
}

/* Preferred pod affinity goes before preferred anti-affinity, which goes before preferred node
 * affinity: a pod whose every preference fails needs three steps, and keeps none. */
static void test_relax_order(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c1", 1, 8, 100, "a,b", NULL);
    node("n", "default", "a", 0, 0);
    bind(&F.nodes[0], "cache", "0", "\"app\":\"cache\"", NULL);
    pod("picky", "1", "\"app\":\"picky\"",
        ",\"affinity\":{\"podAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{"
        "\"weight\":10,\"podAffinityTerm\":{\"topologyKey\":\"" ZONE "\",\"labelSelector\":{"
        "\"matchLabels\":{\"app\":\"nothing\"}}}}]},\"podAntiAffinity\":{\"preferredDuringSchedul"
        "ingIgnoredDuringExecution\":[{\"weight\":10,\"podAffinityTerm\":{\"topologyKey\":\"" ZONE
        "\",\"labelSelector\":{\"matchLabels\":{\"app\":\"cache\"}}}}]},\"nodeAffinity\":{"
        "\"preferredDuringSchedulingIgnoredDuringExecution\":[" PREFER_ZONE(5, "a") "]}}");
    pod("near-cache", "1", "\"app\":\"x\"",
        ",\"affinity\":{\"podAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{"
        "\"weight\":10,\"podAffinityTerm\":{\"topologyKey\":\"" ZONE "\",\"labelSelector\":{"
        "\"matchLabels\":{\"app\":\"cache\"}}}}]}}");
    solve();
    /* picky: no "nothing" pod anywhere (relax 1), anti-affinity to cache rules out a and its
     * preference for a conflicts with that: relax 2 drops the anti-affinity, and a holds. */
    assert_string_equal(creq(res("picky")->index, ZONE), ZONE " In [a]");
    assert_int_equal(res("picky")->relaxed, 2);
    /* A preferred affinity that can be met is kept. */
    assert_string_equal(creq(res("near-cache")->index, ZONE), ZONE " In [a]");
    assert_int_equal(res("near-cache")->relaxed, 0);
}

/* PreferNoSchedule taints must be tolerated at first; the toleration is added as the last step,
 * and only when some NodePool has such a taint. */
static void test_relax_prefer_no_schedule(void **state)
{
    struct kp_sched_node *n;
    size_t p;

    (void)state;
    p = pool("soft", NULL, ",\"taints\":[{\"key\":\"spot\",\"effect\":\"PreferNoSchedule\"}]");
    itype(p, "c1", 1, 8, 100, "a", NULL);
    pod("web", "1", NULL, NULL);
    solve();
    assert_string_equal(where("web"), "claim:0");
    assert_int_equal(res("web")->relaxed, 1);

    teardown(NULL);
    setup(NULL);
    p = pool("hard", NULL, ",\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]");
    itype(p, "c1", 1, 8, 100, "a", NULL);
    n = node("n", NULL, "a", 4, 8);
    node_taint(n, "spot", KP_TAINT_PREFER_NO_SCHEDULE, false);
    pod("web", "1", NULL, NULL);
    solve();
    /* No pool has a PreferNoSchedule taint: the toleration is never added. */
    assert_error("web", "did not tolerate taint t:NoSchedule");
}

/* PREFERENCE_POLICY=Ignore: preferences play no part from the start, so nothing is relaxed. */
static void test_ignore_preferences(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c4", 4, 8, 100, "a,b", NULL);
    pod("likes-b", "1", "\"app\":\"s\"",
        ",\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[" PREFER_ZONE(
            50, "b") "]}}" SPREAD(HOST, 1, "ScheduleAnyway", "s"));
    pod("next", "1", "\"app\":\"s\"", SPREAD(HOST, 1, "ScheduleAnyway", "s"));
    F.ignore_preferences = true;
    solve();
    /* Neither the zone preference nor the hostname spread counts: one claim, any zone. */
    assert_string_equal(creq(0, ZONE), "(none)");
    assert_int_equal(F.plan.n_claims, 1);
    assert_string_equal(cpods(0), "likes-b next");
    assert_int_equal(res("likes-b")->relaxed, 0);
    assert_int_equal(res("next")->relaxed, 0);
    /* Respect (the default): zone b, and the spread keeps them apart. */
    F.ignore_preferences = false;
    solve();
    assert_string_equal(creq(res("likes-b")->index, ZONE), ZONE " In [b]");
    assert_int_equal(F.plan.n_claims, 2);
}

/* A pod that fails goes to the back of the queue and is tried again after the others, with its
 * preferences restored: here it needs a pod placed after it. */
static void test_requeue(void **state)
{
    size_t p;

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c8", 8, 8, 100, "a,b", NULL);
    /* follower is larger, so first, and needs leader's zone. */
    mkpod("follower", NULL, "2", "1Gi", "\"app\":\"f\"", AFFINITY(ZONE, "leader"));
    mkpod("leader", NULL, "1", "1Gi", "\"app\":\"leader\"",
          ",\"nodeSelector\":{\"" ZONE "\":\"b\"}");
    solve();
    assert_string_equal(creq(res("leader")->index, ZONE), ZONE " In [b]");
    assert_int_equal(res("follower")->where, KP_SCHED_CLAIM);
    assert_int_equal(res("follower")->index, res("leader")->index);
    assert_null(res("follower")->error);
}

/* --- behaviour tables: one row per behaviour, each asserting the plan ----------------------- */

/* The place of pod name in words: "claim:<n> <options>", "node:<name>" or "failed". */
static const char *place(const char *name)
{
    static char buf[320];
    const struct kp_sched_result *r = res(name);

    if (r->where == KP_SCHED_CLAIM)
        (void)snprintf(buf, sizeof(buf), "claim:%zu %s", r->index, opts(r->index));
    else
        (void)snprintf(buf, sizeof(buf), "%s", where(name));
    return buf;
}

/* One row's expectations for pod name: its place; when it is on a claim, the claim's
 * requirement on key (if key) and the relaxation steps; when it failed, a part of the reason. */
static void check_row(const char *what, const char *name, const char *want, const char *key,
                      const char *req, const char *why, int relaxed)
{
    const struct kp_sched_result *r = res(name);
    const char *got = place(name);

    if (strcmp(got, want) != 0)
        fail_msg("%s: %s is \"%s\", want \"%s\"%s%s", what, name, got, want, r->error ? ": " : "",
                 r->error ? r->error : "");
    if (r->where == KP_SCHED_FAILED) {
        if (why && !strstr(r->error, why))
            fail_msg("%s: reason \"%s\" lacks \"%s\"", what, r->error, why);
        return;
    }
    if (key && r->where == KP_SCHED_CLAIM && strcmp(creq(r->index, key), req) != 0)
        fail_msg("%s: claim has \"%s\", want \"%s\"", what, creq(r->index, key), req);
    if ((int)r->relaxed != relaxed)
        fail_msg("%s: relaxed %d, want %d", what, r->relaxed, relaxed);
}

#define Q(v) "\"" v "\""
#define EX(key, op, vals) "{\"key\":\"" key "\",\"operator\":\"" op "\",\"values\":[" vals "]}"
#define EXN(key, op) "{\"key\":\"" key "\",\"operator\":\"" op "\"}"
#define SEL(key, value) ",\"nodeSelector\":{\"" key "\":\"" value "\"}"
#define NODE_AFF(terms)                                                                            \
    ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"        \
    "\"nodeSelectorTerms\":[" terms "]}}}"
#define TERM(exprs) "{\"matchExpressions\":[" exprs "]}"
#define NA(exprs) NODE_AFF(TERM(exprs))
#define NA_PREFER(w, exprs)                                                                        \
    ",\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{"      \
    "\"weight\":" #w ",\"preference\":{\"matchExpressions\":[" exprs "]}}]}}"
#define POOL_REQS(exprs) ",\"requirements\":[" exprs "]"
#define GEN "kp.dev/gen"
#define ARCH KP_LABEL_ARCH
#define CAP KP_LABEL_CAPACITY_TYPE
#define ITYPE KP_LABEL_INSTANCE_TYPE

/* Node selectors, node affinity (each operator, ANDed expressions, ORed terms, preferred
 * terms) and NodePool requirements against a catalog of c2 (amd64, zones a b, gen 3), c4
 * (amd64, a b c, gen 5) and r8 (arm64, c, gen 7), cheapest first. The pool defines gen unless
 * the row gives its own template. */
static void test_requirements_table(void **state)
{
    static const struct {
        const char *what, *tmpl, *spec, *want, *key, *req, *why;
        int relaxed;
    } rows[] = {
        {"no requirements: every type", NULL, NULL, "claim:0 c2 c4 r8", ZONE, "(none)", NULL, 0},
        {"selector zone a", NULL, SEL(ZONE, "a"), "claim:0 c2 c4", ZONE, ZONE " In [a]", NULL, 0},
        {"selector zone c", NULL, SEL(ZONE, "c"), "claim:0 c4 r8", ZONE, ZONE " In [c]", NULL, 0},
        {"selector zone nowhere", NULL, SEL(ZONE, "z"), "failed", NULL, NULL,
         "no instance type met the scheduling requirements", 0},
        {"selector arch arm64", NULL, SEL(ARCH, "arm64"), "claim:0 r8", ARCH, ARCH " In [arm64]",
         NULL, 0},
        {"selector arch amd64", NULL, SEL(ARCH, "amd64"), "claim:0 c2 c4", ARCH, ARCH " In [amd64]",
         NULL, 0},
        {"selector capacity-type on-demand", NULL, SEL(CAP, "on-demand"), "claim:0 c2 c4 r8", CAP,
         CAP " In [on-demand]", NULL, 0},
        {"selector capacity-type spot: no offering", NULL, SEL(CAP, "spot"), "failed", NULL, NULL,
         "no instance type", 0},
        {"selector instance type", NULL, SEL(ITYPE, "c4"), "claim:0 c4", ITYPE, ITYPE " In [c4]",
         NULL, 0},
        {"selector nodepool label", NULL, SEL("karpenter.sh/nodepool", "default"),
         "claim:0 c2 c4 r8", NULL, NULL, NULL, 0},
        {"selector other nodepool", NULL, SEL("karpenter.sh/nodepool", "other"), "failed", NULL,
         NULL, "incompatible requirements", 0},
        {"instance type NotIn", NULL, NA(EX(ITYPE, "NotIn", Q("c2"))), "claim:0 c4 r8", NULL, NULL,
         NULL, 0},
        {"instance type In two", NULL, NA(EX(ITYPE, "In", Q("c2") "," Q("r8"))), "claim:0 c2 r8",
         NULL, NULL, NULL, 0},
        {"zone In two", NULL, NA(EX(ZONE, "In", Q("b") "," Q("c"))), "claim:0 c2 c4 r8", ZONE,
         ZONE " In [b c]", NULL, 0},
        {"zone NotIn a b", NULL, NA(EX(ZONE, "NotIn", Q("a") "," Q("b"))), "claim:0 c4 r8", NULL,
         NULL, NULL, 0},
        {"zone Exists", NULL, NA(EXN(ZONE, "Exists")), "claim:0 c2 c4 r8", NULL, NULL, NULL, 0},
        {"zone DoesNotExist", NULL, NA(EXN(ZONE, "DoesNotExist")), "failed", NULL, NULL, NULL, 0},
        {"arch NotIn amd64", NULL, NA(EX(ARCH, "NotIn", Q("amd64"))), "claim:0 r8", NULL, NULL,
         NULL, 0},
        {"capacity-type NotIn on-demand", NULL, NA(EX(CAP, "NotIn", Q("on-demand"))), "failed",
         NULL, NULL, NULL, 0},
        {"custom In two", NULL, NA(EX(GEN, "In", Q("3") "," Q("7"))), "claim:0 c2 r8", NULL, NULL,
         NULL, 0},
        {"custom NotIn every value", NULL, NA(EX(GEN, "NotIn", Q("3") "," Q("5") "," Q("7"))),
         "failed", NULL, NULL, NULL, 0},
        {"custom Gt", NULL, NA(EX(GEN, "Gt", Q("3"))), "claim:0 c4 r8", NULL, NULL, NULL, 0},
        {"custom Gt above all", NULL, NA(EX(GEN, "Gt", Q("7"))), "failed", NULL, NULL, NULL, 0},
        {"custom Lt", NULL, NA(EX(GEN, "Lt", Q("7"))), "claim:0 c2 c4", NULL, NULL, NULL, 0},
        {"custom Lt below all", NULL, NA(EX(GEN, "Lt", Q("3"))), "failed", NULL, NULL, NULL, 0},
        {"custom Gte boundary", NULL, NA(EX(GEN, "Gte", Q("7"))), "claim:0 r8", NULL, NULL, NULL,
         0},
        {"custom Lte boundary", NULL, NA(EX(GEN, "Lte", Q("3"))), "claim:0 c2", NULL, NULL, NULL,
         0},
        {"custom Gt and Lt ANDed", NULL, NA(EX(GEN, "Gt", Q("3")) "," EX(GEN, "Lt", Q("7"))),
         "claim:0 c4", NULL, NULL, NULL, 0},
        {"zone and arch ANDed", NULL, NA(EX(ZONE, "In", Q("c")) "," EX(ARCH, "In", Q("amd64"))),
         "claim:0 c4", ZONE, ZONE " In [c]", NULL, 0},
        {"ANDed expressions that exclude each other", NULL,
         NA(EX(ZONE, "In", Q("a")) "," EX(ARCH, "In", Q("arm64"))), "failed", NULL, NULL, NULL, 0},
        {"ORed terms: the first that can be met", NULL,
         NODE_AFF(TERM(EX(ARCH, "In", Q("arm64"))) "," TERM(EX(GEN, "In", Q("3")))), "claim:0 r8",
         NULL, NULL, NULL, 0},
        {"ORed terms: the first dropped, the second met", NULL,
         NODE_AFF(TERM(EX(ZONE, "In", Q("z"))) "," TERM(EX(GEN, "In", Q("3")))), "claim:0 c2", NULL,
         NULL, NULL, 1},
        {"selector and affinity both apply", NULL, SEL(ZONE, "a") NA(EX(GEN, "In", Q("5"))),
         "claim:0 c4", ZONE, ZONE " In [a]", NULL, 0},
        {"selector and affinity that conflict", NULL, SEL(ZONE, "a") NA(EX(ZONE, "In", Q("c"))),
         "failed", NULL, NULL, NULL, 0},
        {"custom key the pool does not define", NULL, SEL("team", "x"), "failed", NULL, NULL,
         "incompatible requirements", 0},
        {"custom key the pool does not define, NotIn", NULL, NA(EX("team", "NotIn", Q("x"))),
         "claim:0 c2 c4 r8", NULL, NULL, NULL, 0},
        {"custom key the pool does not define, DoesNotExist", NULL, NA(EXN("team", "DoesNotExist")),
         "claim:0 c2 c4 r8", NULL, NULL, NULL, 0},
        {"well-known key the types do not define", NULL, SEL(KP_LABEL_OS, "linux"),
         "claim:0 c2 c4 r8", KP_LABEL_OS, KP_LABEL_OS " In [linux]", NULL, 0},
        {"custom key the pool restricts, matching", POOL_REQS(EX("team", "In", Q("x"))),
         SEL("team", "x"), "claim:0 c2 c4 r8", "team", "team In [x]", NULL, 0},
        {"custom key the pool restricts, other value", POOL_REQS(EX("team", "In", Q("x"))),
         SEL("team", "y"), "failed", NULL, NULL, "incompatible requirements", 0},
        {"custom key the pool restricts, NotIn another", POOL_REQS(EX("team", "In", Q("x"))),
         NA(EX("team", "NotIn", Q("y"))), "claim:0 c2 c4 r8", "team", "team In [x]", NULL, 0},
        {"custom key the pool restricts, DoesNotExist", POOL_REQS(EX("team", "In", Q("x"))),
         NA(EXN("team", "DoesNotExist")), "failed", NULL, NULL, NULL, 0},
        {"pool restricts zone, pod asks another", POOL_REQS(EX(ZONE, "In", Q("a"))), SEL(ZONE, "c"),
         "failed", NULL, NULL, "incompatible requirements", 0},
        {"pool restricts zone, pod narrows it", POOL_REQS(EX(ZONE, "In", Q("a") "," Q("b"))),
         NA(EX(ZONE, "NotIn", Q("a"))), "claim:0 c2 c4", ZONE, ZONE " In [b]", NULL, 0},
        {"pool restricts zone: types elsewhere drop", POOL_REQS(EX(ZONE, "In", Q("a") "," Q("b"))),
         NULL, "claim:0 c2 c4", ZONE, ZONE " In [a b]", NULL, 0},
        {"pool restricts arch", POOL_REQS(EX(ARCH, "In", Q("arm64"))), NULL, "claim:0 r8", NULL,
         NULL, NULL, 0},
        {"pool NotIn instance type", POOL_REQS(EX(ITYPE, "NotIn", Q("c2"))), NULL, "claim:0 c4 r8",
         NULL, NULL, NULL, 0},
        {"pool asks spot, catalog has none", POOL_REQS(EX(CAP, "In", Q("spot"))), NULL, "failed",
         NULL, NULL, "nodepool requirements filtered out all available instance types", 0},
        {"pool Gt and pod Lt", POOL_REQS(EX(GEN, "Gt", Q("3"))), NA(EX(GEN, "Lt", Q("7"))),
         "claim:0 c4", NULL, NULL, NULL, 0},
        {"preferred zone met", NULL, NA_PREFER(10, EX(ZONE, "In", Q("c"))), "claim:0 c4 r8", ZONE,
         ZONE " In [c]", NULL, 0},
        {"preferred zone nowhere: relaxed away", NULL, NA_PREFER(10, EX(ZONE, "In", Q("z"))),
         "claim:0 c2 c4 r8", ZONE, "(none)", NULL, 1},
        {"preferred term against the required one: relaxed", NULL,
         SEL(ARCH, "amd64") NA_PREFER(10, EX(ARCH, "In", Q("arm64"))), "claim:0 c2 c4", NULL, NULL,
         NULL, 1},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        struct kp_instance_type *r8;
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, rows[i].tmpl ? rows[i].tmpl : POOL_REQS(EXN(GEN, "Exists")));
        itype(p, "c2", 2, 8, 100, "a,b", GEN "=3");
        itype(p, "c4", 4, 16, 200, "a,b,c", GEN "=5");
        r8 = itype(p, "r8", 8, 32, 400, "c", GEN "=7");
        kp_reqset_remove(&r8->reqs, ARCH);
        add_in(&r8->reqs, ARCH, "arm64");
        pod("p", "1", NULL, rows[i].spec);
        solve();
        check_row(rows[i].what, "p", rows[i].want, rows[i].key, rows[i].req, rows[i].why,
                  rows[i].relaxed);
    }
}

/* Taints and tolerations: the pool's taints against the pod's tolerations. */
static void test_taints_table(void **state)
{
#define TAINT(k, v, eff) "{\"key\":\"" k "\",\"value\":\"" v "\",\"effect\":\"" eff "\"}"
#define TOL(...) ",\"tolerations\":[" __VA_ARGS__ "]"
    static const struct {
        const char *what, *taints, *startup, *spec, *want, *why;
        int relaxed;
    } rows[] = {
        {"NoSchedule, no toleration", TAINT("t", "v", "NoSchedule"), NULL, NULL, "failed",
         "did not tolerate taint t=v:NoSchedule", 0},
        {"Equal key, value and effect", TAINT("t", "v", "NoSchedule"), NULL,
         TOL("{\"key\":\"t\",\"operator\":\"Equal\",\"value\":\"v\",\"effect\":\"NoSchedule\"}"),
         "claim:0 m", NULL, 0},
        {"Equal is the default operator", TAINT("t", "v", "NoSchedule"), NULL,
         TOL("{\"key\":\"t\",\"value\":\"v\",\"effect\":\"NoSchedule\"}"), "claim:0 m", NULL, 0},
        {"Equal, other value", TAINT("t", "v", "NoSchedule"), NULL,
         TOL("{\"key\":\"t\",\"operator\":\"Equal\",\"value\":\"w\",\"effect\":\"NoSchedule\"}"),
         "failed", "did not tolerate taint t=v:NoSchedule", 0},
        {"Equal, empty effect matches every effect", TAINT("t", "v", "NoSchedule"), NULL,
         TOL("{\"key\":\"t\",\"operator\":\"Equal\",\"value\":\"v\"}"), "claim:0 m", NULL, 0},
        {"Equal, other effect", TAINT("t", "v", "NoSchedule"), NULL,
         TOL("{\"key\":\"t\",\"operator\":\"Equal\",\"value\":\"v\",\"effect\":\"NoExecute\"}"),
         "failed", "did not tolerate", 0},
        {"Exists on the key, any value", TAINT("t", "v", "NoSchedule"), NULL,
         TOL("{\"key\":\"t\",\"operator\":\"Exists\"}"), "claim:0 m", NULL, 0},
        {"Exists on another key", TAINT("t", "v", "NoSchedule"), NULL,
         TOL("{\"key\":\"u\",\"operator\":\"Exists\"}"), "failed", "did not tolerate", 0},
        {"Exists with no key tolerates everything", TAINT("t", "v", "NoSchedule"), NULL,
         TOL("{\"operator\":\"Exists\"}"), "claim:0 m", NULL, 0},
        {"Exists with no key, one effect only", TAINT("t", "v", "NoSchedule"), NULL,
         TOL("{\"operator\":\"Exists\",\"effect\":\"NoExecute\"}"), "failed", "did not tolerate",
         0},
        {"NoExecute, no toleration", TAINT("t", "v", "NoExecute"), NULL, NULL, "failed",
         "did not tolerate taint t=v:NoExecute", 0},
        {"NoExecute tolerated; tolerationSeconds plays no part", TAINT("t", "v", "NoExecute"), NULL,
         TOL("{\"key\":\"t\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
             "\"tolerationSeconds\":30}"),
         "claim:0 m", NULL, 0},
        {"PreferNoSchedule untolerated: relaxed", TAINT("t", "v", "PreferNoSchedule"), NULL, NULL,
         "claim:0 m", NULL, 1},
        {"PreferNoSchedule tolerated: not relaxed", TAINT("t", "v", "PreferNoSchedule"), NULL,
         TOL("{\"key\":\"t\",\"operator\":\"Exists\"}"), "claim:0 m", NULL, 0},
        {"PreferNoSchedule is tolerated last, after a preferred term",
         TAINT("t", "v", "PreferNoSchedule"), NULL, NA_PREFER(10, EX(ZONE, "In", Q("z"))),
         "claim:0 m", NULL, 2},
        {"startup taints need no toleration", NULL, TAINT("init", "x", "NoSchedule"), NULL,
         "claim:0 m", NULL, 0},
        {"two taints, one tolerated",
         TAINT("a", "1", "NoSchedule") "," TAINT("b", "2", "NoExecute"), NULL,
         TOL("{\"key\":\"a\",\"operator\":\"Exists\"}"), "failed",
         "did not tolerate taint b=2:NoExecute", 0},
        {"two taints, both tolerated",
         TAINT("a", "1", "NoSchedule") "," TAINT("b", "2", "NoExecute"), NULL,
         TOL("{\"key\":\"a\",\"operator\":\"Exists\"},{\"key\":\"b\",\"operator\":\"Exists\"}"),
         "claim:0 m", NULL, 0},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        char tmpl[512];
        size_t p;

        teardown(NULL);
        setup(NULL);
        (void)snprintf(tmpl, sizeof(tmpl), "%s%s%s%s%s%s", rows[i].taints ? ",\"taints\":[" : "",
                       rows[i].taints ? rows[i].taints : "", rows[i].taints ? "]" : "",
                       rows[i].startup ? ",\"startupTaints\":[" : "",
                       rows[i].startup ? rows[i].startup : "", rows[i].startup ? "]" : "");
        p = pool("default", NULL, tmpl);
        itype(p, "m", 4, 16, 100, "a", NULL);
        pod("p", "1", NULL, rows[i].spec);
        solve();
        check_row(rows[i].what, "p", rows[i].want, NULL, NULL, rows[i].why, rows[i].relaxed);
    }
#undef TAINT
#undef TOL
}

/* A pending pod with the given spec members, which name its containers (no leading comma). */
static const struct kp_pod_view *rpod(const char *name, const char *spec)
{
    struct kp_entry *e = decode(kp_pod_decode,
                                "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":"
                                "\"u-%s\",\"resourceVersion\":\"1\"},\"spec\":{%s},\"status\":{"
                                "\"phase\":\"Pending\"}}",
                                name, name, spec);
    const struct kp_pod_view *p = kp_pod_view(e);

    assert_true(F.n_pods < MAXP);
    F.pods[F.n_pods++] = p;
    return p;
}

/* Resource fit against c2 (2 cpu, 8Gi), c4 (4, 16Gi) and c8 (8, 32Gi, 2 kp.dev/gpu): exact
 * boundaries, containers summed, init containers and sidecars, pod overhead, limits as
 * requests, resources no type has. */
static void test_resources_table(void **state)
{
#define C(req) "{\"name\":\"c\",\"resources\":{\"requests\":{" req "}}}"
#define C2(req) "{\"name\":\"d\",\"resources\":{\"requests\":{" req "}}}"
#define INIT(req) "{\"name\":\"i\",\"resources\":{\"requests\":{" req "}}}"
#define SIDECAR(req)                                                                               \
    "{\"name\":\"s\",\"restartPolicy\":\"Always\",\"resources\":{\"requests\":{" req "}}}"
#define CONTAINERS(...) "\"containers\":[" __VA_ARGS__ "]"
#define INITS(...) "\"initContainers\":[" __VA_ARGS__ "],"
    static const struct {
        const char *what, *spec, *want, *why;
        int64_t cpu; /* the claim's cpu request, or 0: not checked */
    } rows[] = {
        {"cpu exactly a type's capacity", CONTAINERS(C("\"cpu\":\"2\"")), "claim:0 c2 c4 c8", NULL,
         2000},
        {"cpu 1m over", CONTAINERS(C("\"cpu\":\"2001m\"")), "claim:0 c4 c8", NULL, 2001},
        {"memory exactly a type's capacity", CONTAINERS(C("\"memory\":\"8Gi\"")),
         "claim:0 c2 c4 c8", NULL, 0},
        {"memory 1 byte over", CONTAINERS(C("\"memory\":\"8589934593\"")), "claim:0 c4 c8", NULL,
         0},
        {"containers are summed", CONTAINERS(C("\"cpu\":\"1\"") "," C2("\"cpu\":\"1500m\"")),
         "claim:0 c4 c8", NULL, 2500},
        {"an init container larger than the containers",
         INITS(INIT("\"cpu\":\"3\"")) CONTAINERS(C("\"cpu\":\"1\"")), "claim:0 c4 c8", NULL, 3000},
        {"an init container smaller than the containers",
         INITS(INIT("\"cpu\":\"1\"")) CONTAINERS(C("\"cpu\":\"1500m\"")), "claim:0 c2 c4 c8", NULL,
         1500},
        {"a sidecar runs beside the containers",
         INITS(SIDECAR("\"cpu\":\"1\"")) CONTAINERS(C("\"cpu\":\"1500m\"")), "claim:0 c4 c8", NULL,
         2500},
        {"an init container runs beside the sidecars before it",
         INITS(SIDECAR("\"cpu\":\"1\"") "," INIT("\"cpu\":\"1500m\""))
             CONTAINERS(C("\"cpu\":\"500m\"")),
         "claim:0 c4 c8", NULL, 2500},
        {"an init container before a sidecar runs alone",
         INITS(INIT("\"cpu\":\"1500m\"") "," SIDECAR("\"cpu\":\"1\""))
             CONTAINERS(C("\"cpu\":\"500m\"")),
         "claim:0 c2 c4 c8", NULL, 1500},
        {"pod overhead is added",
         "\"overhead\":{\"cpu\":\"500m\"}," CONTAINERS(C("\"cpu\":\"1600m\"")), "claim:0 c4 c8",
         NULL, 2100},
        /* The API server copies limits into requests; the projection of a pod does not. */
        {"a limit alone is not a request",
         CONTAINERS("{\"name\":\"c\",\"resources\":{\"limits\":{\"cpu\":\"3\"}}}"),
         "claim:0 c2 c4 c8", NULL, 0},
        {"an extended resource one type has", CONTAINERS(C("\"kp.dev/gpu\":\"1\"")), "claim:0 c8",
         NULL, 0},
        {"more of an extended resource than any type has", CONTAINERS(C("\"kp.dev/gpu\":\"3\"")),
         "failed", "no instance type has enough resources", 0},
        {"an extended resource no type has", CONTAINERS(C("\"nvidia.com/gpu\":\"1\"")), "failed",
         "no instance type has enough resources", 0},
        {"more cpu than any type", CONTAINERS(C("\"cpu\":\"9\"")), "failed",
         "no instance type has enough resources", 0},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        struct kp_instance_type *c8;
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, NULL);
        itype(p, "c2", 2, 8, 100, "a", NULL);
        itype(p, "c4", 4, 16, 200, "a", NULL);
        c8 = itype(p, "c8", 8, 32, 400, "a", NULL);
        assert_int_equal(kp_provider_res_add(&c8->capacity, &c8->n_capacity, "kp.dev/gpu", 2000),
                         0);
        rpod("p", rows[i].spec);
        solve();
        check_row(rows[i].what, "p", rows[i].want, NULL, NULL, rows[i].why, 0);
        if (rows[i].cpu && creqs(0, "cpu") != rows[i].cpu)
            fail_msg("%s: claim cpu %lld, want %lld", rows[i].what, (long long)creqs(0, "cpu"),
                     (long long)rows[i].cpu);
    }
#undef C
#undef C2
#undef INIT
#undef SIDECAR
#undef CONTAINERS
#undef INITS
}

/* Host ports: two 1-cpu pods, each with one port, and room for both on one claim; they share
 * it unless the ports conflict (same port and protocol, and an unspecified or equal host IP). */
static void test_host_ports_table(void **state)
{
    static const struct {
        const char *what, *a, *b;
        bool apart;
    } rows[] = {
        {"same port and protocol", "\"hostPort\":80", "\"hostPort\":80", true},
        {"same port, TCP and UDP", "\"hostPort\":80", "\"hostPort\":80,\"protocol\":\"UDP\"",
         false},
        {"same port, explicit TCP and default", "\"hostPort\":80,\"protocol\":\"TCP\"",
         "\"hostPort\":80", true},
        {"same port, both SCTP", "\"hostPort\":80,\"protocol\":\"SCTP\"",
         "\"hostPort\":80,\"protocol\":\"SCTP\"", true},
        {"other port", "\"hostPort\":80", "\"hostPort\":81", false},
        {"two host IPs", "\"hostPort\":80,\"hostIP\":\"10.0.0.1\"",
         "\"hostPort\":80,\"hostIP\":\"10.0.0.2\"", false},
        {"one host IP twice", "\"hostPort\":80,\"hostIP\":\"10.0.0.1\"",
         "\"hostPort\":80,\"hostIP\":\"10.0.0.1\"", true},
        {"a host IP and none", "\"hostPort\":80,\"hostIP\":\"10.0.0.1\"", "\"hostPort\":80", true},
        {"a host IP and 0.0.0.0", "\"hostPort\":80,\"hostIP\":\"10.0.0.1\"",
         "\"hostPort\":80,\"hostIP\":\"0.0.0.0\"", true},
        {"a host IP and ::", "\"hostPort\":80,\"hostIP\":\"10.0.0.1\"",
         "\"hostPort\":80,\"hostIP\":\"::\"", true},
        {"container ports without host ports", "\"name\":\"x\"", "\"name\":\"x\"", false},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        char spec[512];
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, NULL);
        itype(p, "m", 8, 32, 100, "a", NULL);
        (void)snprintf(spec, sizeof(spec),
                       "\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,%s}],"
                       "\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]",
                       rows[i].a);
        rpod("p1", spec);
        (void)snprintf(spec, sizeof(spec),
                       "\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,%s}],"
                       "\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]",
                       rows[i].b);
        rpod("p2", spec);
        solve();
        check_row(rows[i].what, "p1", "claim:0 m", NULL, NULL, NULL, 0);
        check_row(rows[i].what, "p2", rows[i].apart ? "claim:1 m" : "claim:0 m", NULL, NULL, NULL,
                  0);
    }
}

/* DaemonSet overhead: a 1500m pod against c2 (2 cpu) and c4 (4 cpu), one DaemonSet built from
 * a template pod's selector, tolerations, required affinity and ports. A DaemonSet counts on a
 * type when it tolerates the pool's taints (PreferNoSchedule always, startup taints never
 * matter) and its required terms are compatible with the pool and the type. */
static void test_daemonset_table(void **state)
{
#define TOL_T ",\"tolerations\":[{\"key\":\"t\",\"operator\":\"Exists\"}]"
#define PORT80 "\"ports\":[{\"containerPort\":80,\"hostPort\":80}],"
    static const struct {
        const char *what, *tmpl, *ds_spec; /* ds_spec NULL: no DaemonSet */
        int64_t ds_cpu;
        const char *pod_spec, *want, *why;
        int64_t cpu; /* the claim's cpu request */
    } rows[] = {
        {"no DaemonSet", NULL, NULL, 0, NULL, "claim:0 c2 c4", NULL, 1500},
        {"overhead that just fits", NULL, "", 500, NULL, "claim:0 c2 c4", NULL, 2000},
        {"overhead 1m too much for c2", NULL, "", 501, NULL, "claim:0 c4", NULL, 2001},
        {"overhead too large for any type", NULL, "", 2600, NULL, "failed",
         "no instance type has enough resources (with daemonset overhead)", 0},
        {"a pool taint the DaemonSet does not tolerate",
         ",\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]", "", 1000, TOL_T,
         "claim:0 c2 c4", NULL, 1500},
        {"a pool taint the DaemonSet tolerates",
         ",\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]", TOL_T, 1000, TOL_T,
         "claim:0 c4", NULL, 2500},
        {"a PreferNoSchedule pool taint does not keep it off",
         ",\"taints\":[{\"key\":\"t\",\"effect\":\"PreferNoSchedule\"}]", "", 1000, TOL_T,
         "claim:0 c4", NULL, 2500},
        {"a startup taint does not keep it off",
         ",\"startupTaints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]", "", 1000, NULL,
         "claim:0 c4", NULL, 2500},
        {"required affinity the types do not meet", NULL, NA(EX(ARCH, "In", Q("arm64"))), 1000,
         NULL, "claim:0 c2 c4", NULL, 1500},
        {"required affinity the types meet", NULL, NA(EX(ARCH, "In", Q("amd64"))), 1000, NULL,
         "claim:0 c4", NULL, 2500},
        {"a selector on a label the pool does not define", NULL, SEL("team", "x"), 1000, NULL,
         "claim:0 c2 c4", NULL, 1500},
        {"a selector on a label the pool defines", POOL_REQS(EX("team", "In", Q("x"))),
         SEL("team", "x"), 1000, NULL, "claim:0 c4", NULL, 2500},
        /* Overhead is per pool and type, as upstream, not per claim. */
        {"a selector on a zone the claim is then held out of", NULL, SEL(ZONE, "b"), 1000,
         SEL(ZONE, "a"), "claim:0 c4", NULL, 2500},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, rows[i].tmpl);
        itype(p, "c2", 2, 8, 100, "a,b", NULL);
        itype(p, "c4", 4, 16, 200, "a,b", NULL);
        if (rows[i].ds_spec) {
            const struct kp_pod_view *t =
                mkpod("ds-tmpl", "elsewhere", "0", "0", NULL, rows[i].ds_spec);
            struct kp_sched_daemon *d = daemon("ds", rows[i].ds_cpu);

            d->node_selector = t->node_selector;
            d->tolerations = t->tolerations;
            d->required = t->required;
            d->n_required = t->n_required;
        }
        pod("p", "1500m", NULL, rows[i].pod_spec);
        solve();
        check_row(rows[i].what, "p", rows[i].want, NULL, NULL, rows[i].why, 0);
        if (rows[i].cpu && creqs(0, "cpu") != rows[i].cpu)
            fail_msg("%s: claim cpu %lld, want %lld", rows[i].what, (long long)creqs(0, "cpu"),
                     (long long)rows[i].cpu);
    }
#undef TOL_T
#undef PORT80
}

/* DaemonSet host ports: a pod asking for one host port against a DaemonSet holding another (or
 * none) on the types it runs on: amd64 m4 and, where the row says, arm64 r4 too. The pod
 * tolerates the taint t; the DaemonSet does not. */
static void test_daemonset_ports_table(void **state)
{
    static const struct {
        const char *what, *tmpl, *ds_port, *ds_spec, *pod_port;
        bool arm;
        const char *want, *why;
    } rows[] = {
        {"the same port", NULL, "\"hostPort\":80", "", "\"hostPort\":80", false, "failed",
         "host port conflict with daemonsets"},
        {"another port", NULL, "\"hostPort\":80", "", "\"hostPort\":81", false, "claim:0 m4", NULL},
        {"another protocol", NULL, "\"hostPort\":80", "", "\"hostPort\":80,\"protocol\":\"UDP\"",
         false, "claim:0 m4", NULL},
        {"a DaemonSet kept off by the pool's taint",
         ",\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]", "\"hostPort\":80", "",
         "\"hostPort\":80", false, "claim:0 m4", NULL},
        {"a DaemonSet kept off by its affinity", NULL, "\"hostPort\":80",
         NA(EX(ARCH, "In", Q("arm64"))), "\"hostPort\":80", false, "claim:0 m4", NULL},
        {"only the types the DaemonSet runs on are ruled out", NULL, "\"hostPort\":80",
         NA(EX(ARCH, "In", Q("amd64"))), "\"hostPort\":80", true, "claim:0 r4", NULL},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        const struct kp_pod_view *t;
        struct kp_sched_daemon *d;
        struct kp_entry *e;
        char spec[512];
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, rows[i].tmpl);
        itype(p, "m4", 4, 16, 100, "a", NULL);
        if (rows[i].arm) {
            struct kp_instance_type *r4 = itype(p, "r4", 4, 16, 200, "a", NULL);

            kp_reqset_remove(&r4->reqs, ARCH);
            add_in(&r4->reqs, ARCH, "arm64");
        }
        e = decode(kp_pod_decode,
                   "{\"metadata\":{\"name\":\"ds-tmpl\",\"namespace\":\"ns\",\"uid\":\"u-ds\","
                   "\"resourceVersion\":\"1\"},\"spec\":{\"nodeName\":\"elsewhere\","
                   "\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,%s}]}]%s},"
                   "\"status\":{\"phase\":\"Running\"}}",
                   rows[i].ds_port, rows[i].ds_spec);
        t = kp_pod_view(e);
        d = daemon("ds", 100);
        d->tolerations = t->tolerations;
        d->required = t->required;
        d->n_required = t->n_required;
        d->host_ports = t->host_ports;
        d->n_host_ports = t->n_host_ports;
        (void)snprintf(spec, sizeof(spec),
                       "\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,%s}],"
                       "\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],\"tolerations\":[{"
                       "\"key\":\"t\",\"operator\":\"Exists\"}]",
                       rows[i].pod_port);
        rpod("p", spec);
        solve();
        check_row(rows[i].what, "p", rows[i].want, NULL, NULL, rows[i].why, 0);
    }
}

/* NodePool order, limits and minValues: pools a-pool and b-pool, each with c2 (2 cpu, 8Gi) and
 * c4 (4 cpu, 16Gi); which pool's claim the pod gets, with which options. */
static void test_pools_table(void **state)
{
#define W10 ",\"weight\":10"
#define MINV(n) POOL_REQS("{\"key\":\"" ITYPE "\",\"operator\":\"Exists\",\"minValues\":" #n "}")
    static const struct {
        const char *what, *spec_a, *tmpl_a, *spec_b, *tmpl_b, *cpu, *want, *why;
    } rows[] = {
        {"equal weights: name descending", NULL, NULL, NULL, NULL, "1", "b-pool c2 c4", NULL},
        {"the heavier pool first", W10, NULL, NULL, NULL, "1", "a-pool c2 c4", NULL},
        {"heavier of two weights", ",\"weight\":20", NULL, W10, NULL, "1", "a-pool c2 c4", NULL},
        {"a heavier pool whose taint the pod does not tolerate", W10,
         ",\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]", NULL, NULL, "1", "b-pool c2 c4",
         NULL},
        {"a heavier pool whose requirements exclude the pod", W10,
         POOL_REQS(EX(ZONE, "In", Q("b"))), NULL, NULL, "1", "b-pool c2 c4", NULL},
        {"a cpu limit equal to the largest type", W10 ",\"limits\":{\"cpu\":\"4\"}", NULL, NULL,
         NULL, "1", "a-pool c2 c4", NULL},
        {"a cpu limit below the largest type", W10 ",\"limits\":{\"cpu\":\"3\"}", NULL, NULL, NULL,
         "1", "a-pool c2", NULL},
        {"a cpu limit below every type", W10 ",\"limits\":{\"cpu\":\"1\"}", NULL, NULL, NULL, "1",
         "b-pool c2 c4", NULL},
        {"a memory limit", W10 ",\"limits\":{\"memory\":\"8Gi\"}", NULL, NULL, NULL, "1",
         "a-pool c2", NULL},
        {"a limit on a resource the types lack", W10 ",\"limits\":{\"kp.dev/gpu\":\"0\"}", NULL,
         NULL, NULL, "1", "a-pool c2 c4", NULL},
        {"a node limit of 0", W10 ",\"limits\":{\"nodes\":\"0\"}", NULL, NULL, NULL, "1",
         "b-pool c2 c4", NULL},
        {"every pool over its limit", ",\"limits\":{\"cpu\":\"1\"}", NULL,
         ",\"limits\":{\"cpu\":\"1\"}", NULL, "1", "failed",
         "all available instance types exceed limits for nodepool"},
        {"the limit leaves types too small for the pod", W10 ",\"limits\":{\"cpu\":\"3\"}", NULL,
         NULL, NULL, "3", "b-pool c4", NULL},
        {"minValues met", W10, MINV(2), NULL, NULL, "1", "a-pool c2 c4", NULL},
        {"minValues the pod would break: next pool", W10, MINV(2), NULL, NULL, "3", "b-pool c4",
         NULL},
        {"minValues above the catalog: pool skipped", W10, MINV(3), NULL, NULL, "1", "b-pool c2 c4",
         NULL},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        char got[320];
        size_t a, b;

        teardown(NULL);
        setup(NULL);
        a = pool("a-pool", rows[i].spec_a, rows[i].tmpl_a);
        b = pool("b-pool", rows[i].spec_b, rows[i].tmpl_b);
        itype(a, "c2", 2, 8, 100, "a,b", NULL);
        itype(a, "c4", 4, 16, 200, "a,b", NULL);
        itype(b, "c2", 2, 8, 100, "a,b", NULL);
        itype(b, "c4", 4, 16, 200, "a,b", NULL);
        pod("p", rows[i].cpu, NULL, SEL(ZONE, "a"));
        solve();
        if (res("p")->where == KP_SCHED_CLAIM)
            (void)snprintf(got, sizeof(got), "%s %s",
                           F.pools[F.plan.claims[res("p")->index].pool].np->e.name,
                           opts(res("p")->index));
        else
            (void)snprintf(got, sizeof(got), "%s", where("p"));
        if (strcmp(got, rows[i].want) != 0)
            fail_msg("%s: \"%s\", want \"%s\"%s%s", rows[i].what, got, rows[i].want,
                     res("p")->error ? ": " : "", res("p")->error ? res("p")->error : "");
        if (rows[i].why)
            assert_error("p", rows[i].why);
    }
#undef W10
#undef MINV
}

/* minValues, Strict and BestEffort, against c2 (gen 3), c4 (gen 4) and c8 (gen 4): the options,
 * whether the claim says it lowered a minValues, or the reason the pod failed. */
static void test_min_values_table(void **state)
{
#define MV(key, n) "{\"key\":\"" key "\",\"operator\":\"Exists\",\"minValues\":" #n "}"
    static const struct {
        const char *what, *reqs, *cpu;
        bool best_effort;
        size_t max_types;
        const char *want, *why;
        bool relaxed;
    } rows[] = {
        {"minValues 1 is always met", MV(ITYPE, 1), "3", false, 0, "claim:0 c4 c8", NULL, false},
        {"minValues equal to what fits", MV(ITYPE, 2), "3", false, 0, "claim:0 c4 c8", NULL, false},
        {"Strict: more than what fits", MV(ITYPE, 3), "3", false, 0, "failed",
         "minValues requirement is not met for label " ITYPE, false},
        {"BestEffort: lowered to what fits", MV(ITYPE, 3), "3", true, 0, "claim:0 c4 c8", NULL,
         true},
        {"BestEffort, met: not marked", MV(ITYPE, 3), "1", true, 0, "claim:0 c2 c4 c8", NULL,
         false},
        {"Strict: distinct values of a custom key", MV(GEN, 2), "3", false, 0, "failed",
         "minValues requirement is not met for label " GEN, false},
        {"BestEffort: distinct values of a custom key", MV(GEN, 2), "3", true, 0, "claim:0 c4 c8",
         NULL, true},
        {"a custom key met by the cheaper types", MV(GEN, 2), "1", false, 0, "claim:0 c2 c4 c8",
         NULL, false},
        {"Strict: the cut to the cheapest breaks it", MV(ITYPE, 2), "1", false, 1, "failed",
         "minValues cannot be met by the 1 cheapest instance types", false},
        {"the cut keeps enough", MV(ITYPE, 2), "1", false, 2, "claim:0 c2 c4", NULL, false},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        char tmpl[256];
        size_t p;

        teardown(NULL);
        setup(NULL);
        (void)snprintf(tmpl, sizeof(tmpl), ",\"requirements\":[%s]", rows[i].reqs);
        p = pool("default", NULL, tmpl);
        itype(p, "c2", 2, 8, 100, "a", GEN "=3");
        itype(p, "c4", 4, 8, 200, "a", GEN "=4");
        itype(p, "c8", 8, 8, 400, "a", GEN "=4");
        F.best_effort = rows[i].best_effort;
        F.max_types = rows[i].max_types;
        pod("p", rows[i].cpu, NULL, NULL);
        solve();
        check_row(rows[i].what, "p", rows[i].want, NULL, NULL, rows[i].why, 0);
        if (F.plan.n_claims && F.plan.claims[0].min_values_relaxed != rows[i].relaxed)
            fail_msg("%s: min_values_relaxed %d, want %d", rows[i].what,
                     F.plan.claims[0].min_values_relaxed, rows[i].relaxed);
    }
#undef MV
}

/* Topology and affinity against one existing node n-a in zone a (8 cpu free) holding the pod
 * "old" (app=w unless the row says, with the row's spec); the pool launches c4 into a, b and c.
 * The pending pod p (1 cpu, app=w unless the row says) has the row's spec. */
static void test_topology_table(void **state)
{
#define PREF_AFF(kind, w, key, app)                                                                \
    ",\"affinity\":{\"" kind "\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{"          \
    "\"weight\":" #w ",\"podAffinityTerm\":{\"topologyKey\":\"" key "\",\"labelSelector\":{"       \
    "\"matchLabels\":{\"app\":\"" app "\"}}}}]}}"
#define PREF_AFF_AND_ZONE(kind, key, app, z)                                                       \
    ",\"affinity\":{\"" kind "\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{"          \
    "\"weight\":10,\"podAffinityTerm\":{\"topologyKey\":\"" key "\",\"labelSelector\":{"           \
    "\"matchLabels\":{\"app\":\"" app "\"}}}}]},\"nodeAffinity\":{\"preferredDuring"               \
    "SchedulingIgnoredDuringExecution\":[" PREFER_ZONE(5, z) "]}}"
#define WL "\"app\":\"w\""
    static const struct {
        const char *what, *old_labels, *old_spec, *labels, *spec, *want, *zone, *why;
        int relaxed;
    } rows[] = {
        {"no constraint: the existing node", WL, NULL, WL, NULL, "node:n-a", NULL, NULL, 0},
        {"zone spread skew 1 leaves zone a", WL, NULL, WL, SPREAD(ZONE, 1, "DoNotSchedule", "w"),
         "claim:0 c4", ZONE " In [b]", NULL, 0},
        {"zone spread skew 2 allows zone a", WL, NULL, WL, SPREAD(ZONE, 2, "DoNotSchedule", "w"),
         "node:n-a", NULL, NULL, 0},
        {"ScheduleAnyway is kept while it can be met", WL, NULL, WL,
         SPREAD(ZONE, 1, "ScheduleAnyway", "w"), "claim:0 c4", ZONE " In [b]", NULL, 0},
        {"a spread selecting no pod", WL, NULL, WL, SPREAD(ZONE, 1, "DoNotSchedule", "x"),
         "node:n-a", NULL, NULL, 0},
        /* a:1 b:0 c:0, and p adds to no count: zone a keeps the skew at 1. */
        {"a spread that does not select the pod itself", WL, NULL, "\"app\":\"v\"",
         SPREAD(ZONE, 1, "DoNotSchedule", "w"), "node:n-a", NULL, NULL, 0},
        {"a zone spread the pod's selector confines to zone a", WL, NULL, WL,
         SEL(ZONE, "a") SPREAD(ZONE, 1, "DoNotSchedule", "w"), "node:n-a", NULL, NULL, 0},
        {"hostname spread skew 1: a new node", WL, NULL, WL, SPREAD(HOST, 1, "DoNotSchedule", "w"),
         "claim:0 c4", "(none)", NULL, 0},
        {"hostname spread skew 2: the existing node", WL, NULL, WL,
         SPREAD(HOST, 2, "DoNotSchedule", "w"), "node:n-a", NULL, NULL, 0},
        {"zone anti-affinity: the other zones", WL, NULL, WL, ANTI(ZONE, "w"), "claim:0 c4",
         ZONE " In [b c]", NULL, 0},
        {"hostname anti-affinity: a new node", WL, NULL, WL, ANTI(HOST, "w"), "claim:0 c4",
         "(none)", NULL, 0},
        {"anti-affinity to pods of another namespace", WL, NULL, WL,
         ",\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
         "[{\"topologyKey\":\"" HOST "\",\"namespaces\":[\"other\"],\"labelSelector\":{"
         "\"matchLabels\":{\"app\":\"w\"}}}]}}",
         "node:n-a", NULL, NULL, 0},
        {"zone affinity: the existing node", "\"app\":\"db\"", NULL, WL, AFFINITY(ZONE, "db"),
         "node:n-a", NULL, NULL, 0},
        {"hostname affinity: the existing node", "\"app\":\"db\"", NULL, WL, AFFINITY(HOST, "db"),
         "node:n-a", NULL, NULL, 0},
        {"affinity to pods there are none of", WL, NULL, WL, AFFINITY(ZONE, "db"), "failed", NULL,
         "unsatisfiable pod affinity constraint", 0},
        {"a bound pod's hostname anti-affinity repels", "\"app\":\"old\"", ANTI(HOST, "w"), WL,
         NULL, "claim:0 c4", "(none)", NULL, 0},
        {"a bound pod's zone anti-affinity repels from its zone", "\"app\":\"old\"",
         ANTI(ZONE, "w"), WL, NULL, "claim:0 c4", ZONE " In [b c]", NULL, 0},
        {"a bound pod's anti-affinity spares pods it does not select", "\"app\":\"old\"",
         ANTI(HOST, "w"), "\"app\":\"v\"", NULL, "node:n-a", NULL, NULL, 0},
        {"a bound pod's preferred anti-affinity is not enforced inversely", "\"app\":\"old\"",
         PREF_AFF("podAntiAffinity", 10, HOST, "w"), WL, NULL, "node:n-a", NULL, NULL, 0},
        {"an empty spread selector selects every pod", "\"app\":\"other\"", NULL, WL,
         ",\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"" ZONE "\","
         "\"whenUnsatisfiable\":\"DoNotSchedule\",\"labelSelector\":{}}]",
         "claim:0 c4", ZONE " In [b]", NULL, 0},
        {"a spread without a selector selects none", "\"app\":\"other\"", NULL, WL,
         ",\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"" ZONE "\","
         "\"whenUnsatisfiable\":\"DoNotSchedule\"}]",
         "node:n-a", NULL, NULL, 0},
        {"a spread over a key no pool or node has", WL, NULL, WL,
         SPREAD("kp.dev/rack", 1, "DoNotSchedule", "w"), "failed", NULL,
         "unsatisfiable topology spread constraint, key=kp.dev/rack", 0},
        {"anti-affinity over a key no pool or node has", WL, NULL, WL, ANTI("kp.dev/rack", "w"),
         "failed", NULL, "unsatisfiable pod anti-affinity constraint, key=kp.dev/rack", 0},
        {"affinity by matchExpressions In", "\"app\":\"db\"", NULL, WL,
         ",\"affinity\":{\"podAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{"
         "\"topologyKey\":\"" ZONE
         "\",\"labelSelector\":{\"matchExpressions\":[" EX("app", "In", Q("db")) "]}}]}}",
         "node:n-a", NULL, NULL, 0},
        {"anti-affinity by matchExpressions NotIn", "\"app\":\"db\"", NULL, WL,
         ",\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\""
         ":[{\"topologyKey\":\"" ZONE
         "\",\"labelSelector\":{\"matchExpressions\":[" EX("app", "NotIn", Q("w")) "]}}]}}",
         "claim:0 c4", ZONE " In [b c]", NULL, 0},
        {"anti-affinity by matchExpressions DoesNotExist", "\"app\":\"db\"", NULL, WL,
         ",\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\""
         ":[{\"topologyKey\":\"" ZONE
         "\",\"labelSelector\":{\"matchExpressions\":[" EXN("tier", "DoesNotExist") "]}}]}}",
         "claim:0 c4", ZONE " In [b c]", NULL, 0},
        {"preferred zone anti-affinity met", WL, NULL, WL,
         PREF_AFF("podAntiAffinity", 10, ZONE, "w"), "claim:0 c4", ZONE " In [b c]", NULL, 0},
        {"preferred hostname anti-affinity met", WL, NULL, WL,
         PREF_AFF("podAntiAffinity", 10, HOST, "w"), "claim:0 c4", "(none)", NULL, 0},
        {"preferred affinity to no pod: relaxed", WL, NULL, WL,
         PREF_AFF("podAffinity", 10, ZONE, "db"), "node:n-a", NULL, NULL, 1},
        {"preferred pod affinity goes before preferred node affinity", WL, NULL, WL,
         PREF_AFF_AND_ZONE("podAffinity", ZONE, "w", "b"), "claim:0 c4", ZONE " In [b]", NULL, 1},
        {"preferred anti-affinity goes before preferred node affinity", WL, NULL, WL,
         PREF_AFF_AND_ZONE("podAntiAffinity", ZONE, "w", "a"), "node:n-a", NULL, NULL, 1},
        {"preferred node affinity goes before a ScheduleAnyway spread", WL, NULL, WL,
         ",\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":"
         "[" PREFER_ZONE(5, "a") "]}}" SPREAD(ZONE, 1, "ScheduleAnyway", "w"),
         "claim:0 c4", ZONE " In [b]", NULL, 1},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        struct kp_sched_node *n;
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, NULL);
        itype(p, "c4", 4, 16, 100, "a,b,c", NULL);
        n = node("n-a", "default", "a", 8, 32);
        bind(n, "old", "0", rows[i].old_labels, rows[i].old_spec);
        mkpod("p", NULL, "1", "1Gi", rows[i].labels, rows[i].spec);
        solve();
        check_row(rows[i].what, "p", rows[i].want, rows[i].zone ? ZONE : NULL,
                  rows[i].zone ? rows[i].zone : NULL, rows[i].why, rows[i].relaxed);
    }
#undef PREF_AFF
#undef PREF_AFF_AND_ZONE
#undef WL
}

/* Existing nodes: one node n-a in zone a labelled team=x (8 cpu free), with the row's taint;
 * the pool defines team In [x y] and launches c4 into a and b. Against a node every key the pod
 * requires must be a label (NotIn and DoesNotExist excepted) and intersect; its taints must be
 * tolerated, except the startup and known ephemeral ones of a managed node not yet
 * initialized. The pool also defines disk In [ssd], which the node lacks. */
static void test_existing_node_table(void **state)
{
    static const struct {
        const char *what, *taint;
        enum kp_taint_effect effect;
        bool startup, uninit;
        const char *spec, *want, *key, *req;
    } rows[] = {
        {"no requirement", NULL, 0, false, false, NULL, "node:n-a", NULL, NULL},
        {"a selector on the node's label", NULL, 0, false, false, SEL("team", "x"), "node:n-a",
         NULL, NULL},
        {"a selector on another value: a claim", NULL, 0, false, false, SEL("team", "y"),
         "claim:0 c4", "team", "team In [y]"},
        {"NotIn another value", NULL, 0, false, false, NA(EX("team", "NotIn", Q("y"))), "node:n-a",
         NULL, NULL},
        {"NotIn the node's value: a claim", NULL, 0, false, false, NA(EX("team", "NotIn", Q("x"))),
         "claim:0 c4", "team", "team In [y]"},
        {"the node's zone", NULL, 0, false, false, SEL(ZONE, "a"), "node:n-a", NULL, NULL},
        {"another zone: a claim", NULL, 0, false, false, SEL(ZONE, "b"), "claim:0 c4", ZONE,
         ZONE " In [b]"},
        {"zone NotIn another", NULL, 0, false, false, NA(EX(ZONE, "NotIn", Q("b"))), "node:n-a",
         NULL, NULL},
        {"the node's hostname", NULL, 0, false, false, SEL(HOST, "n-a"), "node:n-a", NULL, NULL},
        {"a label the node lacks and the pool defines: a claim", NULL, 0, false, false,
         NA(EXN("disk", "Exists")), "claim:0 c4", "disk", "disk In [ssd]"},
        {"DoesNotExist on a label the node lacks", NULL, 0, false, false,
         NA(EXN("disk", "DoesNotExist")), "node:n-a", NULL, NULL},
        {"an untolerated NoSchedule taint: a claim", "dedicated", KP_TAINT_NO_SCHEDULE, false,
         false, NULL, "claim:0 c4", NULL, NULL},
        {"a tolerated NoSchedule taint", "dedicated", KP_TAINT_NO_SCHEDULE, false, false,
         ",\"tolerations\":[{\"key\":\"dedicated\",\"operator\":\"Exists\"}]", "node:n-a", NULL,
         NULL},
        {"an untolerated NoExecute taint: a claim", "dedicated", KP_TAINT_NO_EXECUTE, false, false,
         NULL, "claim:0 c4", NULL, NULL},
        {"PreferNoSchedule with no pool that has one: a claim", "soft", KP_TAINT_PREFER_NO_SCHEDULE,
         false, false, NULL, "claim:0 c4", NULL, NULL},
        {"a startup taint of an uninitialized node is ignored", "starting", KP_TAINT_NO_SCHEDULE,
         true, true, NULL, "node:n-a", NULL, NULL},
        {"a startup taint of an initialized node counts", "starting", KP_TAINT_NO_SCHEDULE, true,
         false, NULL, "claim:0 c4", NULL, NULL},
        {"a known ephemeral taint of an uninitialized node is ignored",
         "node.kubernetes.io/not-ready", KP_TAINT_NO_SCHEDULE, false, true, NULL, "node:n-a", NULL,
         NULL},
        {"any other taint of an uninitialized node counts", "dedicated", KP_TAINT_NO_SCHEDULE,
         false, true, NULL, "claim:0 c4", NULL, NULL},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        struct kp_sched_node *n;
        size_t p;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL,
                 POOL_REQS(EX("team", "In", Q("x") "," Q("y")) "," EX("disk", "In", Q("ssd"))));
        itype(p, "c4", 4, 16, 100, "a,b", NULL);
        n = node("n-a", "default", "a", 8, 32);
        node_label(n, "team", "x");
        if (rows[i].taint)
            node_taint(n, rows[i].taint, rows[i].effect, rows[i].startup);
        n->initialized = !rows[i].uninit;
        pod("p", "1", NULL, rows[i].spec);
        solve();
        check_row(rows[i].what, "p", rows[i].want, rows[i].key, rows[i].req, NULL, 0);
    }
}

/* Topology over a batch: n pods p0, p1, ... (1 cpu, app=w, the row's spec) against the pool's
 * c1 (1 cpu: one pod per claim) or c4, offered on demand in the row's zones (and spot where the
 * row says); each pod's place and the claim's requirement on the row's key, in pod order. */
static void test_topology_batch_table(void **state)
{
#define MIN_DOMAINS(n)                                                                             \
    ",\"topologySpreadConstraints\":[{\"maxSkew\":1,\"minDomains\":" #n ",\"topologyKey\":\"" ZONE \
    "\",\"whenUnsatisfiable\":\"DoNotSchedule\",\"labelSelector\":{\"matchLabels\":{\"app\":"      \
    "\"w\"}}}]"
    static const struct {
        const char *what, *tmpl, *type, *zones;
        bool spot;
        const char *spec;
        int n;
        const char *key, *want;
    } rows[] = {
        {"zone spread over three zones", NULL, "c1", "a,b,c", false,
         SPREAD(ZONE, 1, "DoNotSchedule", "w"), 4, ZONE,
         "c0 In [a], c1 In [b], c2 In [c], c3 In [a]"},
        {"zone spread with skew 2 still takes the least count", NULL, "c1", "a,b", false,
         SPREAD(ZONE, 2, "DoNotSchedule", "w"), 3, ZONE, "c0 In [a], c1 In [b], c2 In [a]"},
        {"zone spread over the zones the pool allows", POOL_REQS(EX(ZONE, "In", Q("b") "," Q("c"))),
         "c1", "a,b,c", false, SPREAD(ZONE, 1, "DoNotSchedule", "w"), 3, ZONE,
         "c0 In [b], c1 In [c], c2 In [b]"},
        {"ScheduleAnyway over one allowed zone holds", POOL_REQS(EX(ZONE, "In", Q("a"))), "c1",
         "a,b", false, SPREAD(ZONE, 1, "ScheduleAnyway", "w"), 2, ZONE, "c0 In [a], c1 In [a]"},
        {"spread over capacity type", NULL, "c1", "a", true, SPREAD(CAP, 1, "DoNotSchedule", "w"),
         3, CAP, "c0 In [on-demand], c1 In [spot], c2 In [on-demand]"},
        {"spread over a custom key the pool defines",
         POOL_REQS(EX("kp.dev/rack", "In", Q("r1") "," Q("r2"))), "c1", "a", false,
         SPREAD("kp.dev/rack", 1, "DoNotSchedule", "w"), 3, "kp.dev/rack",
         "c0 In [r1], c1 In [r2], c2 In [r1]"},
        {"minDomains above the zones there are", NULL, "c1", "a,b", false, MIN_DOMAINS(3), 3, ZONE,
         "c0 In [a], c1 In [b], failed"},
        {"minDomains met", NULL, "c1", "a,b", false, MIN_DOMAINS(2), 3, ZONE,
         "c0 In [a], c1 In [b], c2 In [a]"},
        {"hostname spread: a claim each", NULL, "c4", "a", false,
         SPREAD(HOST, 1, "DoNotSchedule", "w"), 3, ZONE, "c0 (none), c1 (none), c2 (none)"},
        {"hostname anti-affinity: a claim each", NULL, "c4", "a", false, ANTI(HOST, "w"), 3, ZONE,
         "c0 (none), c1 (none), c2 (none)"},
        {"no constraint: one claim", NULL, "c4", "a", false, NULL, 3, ZONE,
         "c0 (none), c0 (none), c0 (none)"},
        {"zone self-affinity follows the first pod", NULL, "c1", "a,b", false, AFFINITY(ZONE, "w"),
         3, ZONE, "c0 In [a], c1 In [a], c2 In [a]"},
        {"hostname self-affinity shares the first claim", NULL, "c4", "a,b", false,
         AFFINITY(HOST, "w"), 3, ZONE, "c0 (none), c0 (none), c0 (none)"},
        {"hostname self-affinity with no room left", NULL, "c1", "a", false, AFFINITY(HOST, "w"), 2,
         ZONE, "c0 (none), failed"},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(rows); i++) {
        static char names[8][16];
        char got[512];
        size_t p, len = 0;
        struct kp_instance_type *it;

        teardown(NULL);
        setup(NULL);
        p = pool("default", NULL, rows[i].tmpl);
        it = itype(p, rows[i].type, strcmp(rows[i].type, "c1") == 0 ? 1 : 4, 16, 100, rows[i].zones,
                   NULL);
        if (rows[i].spot) {
            /* One more offering, spot, in the type's first zone. */
            const char *z = kp_req_single(kp_reqset_get(&it->offerings[0].reqs, ZONE));
            struct kp_offering *o;

            it->offerings =
                kp_reallocarray(it->offerings, it->n_offerings + 1, sizeof(*it->offerings));
            assert_non_null(it->offerings);
            o = &it->offerings[it->n_offerings++];
            memset(o, 0, sizeof(*o));
            add_in(&o->reqs, ZONE, z);
            add_in(&o->reqs, CAP, "spot");
            o->price_micro_usd = 100;
            o->available = true;
            kp_reqset_remove(&it->reqs, CAP);
            assert_int_equal(kp_reqset_add(&it->reqs, CAP, KP_SEL_IN,
                                           (const char *[]){"on-demand", "spot"}, 2, 0),
                             0);
        }
        for (int k = 0; k < rows[i].n; k++) {
            (void)snprintf(names[k], sizeof(names[k]), "p%d", k);
            mkpod(names[k], NULL, "1", "1Gi", "\"app\":\"w\"", rows[i].spec);
        }
        solve();
        got[0] = '\0';
        for (int k = 0; k < rows[i].n; k++) {
            const struct kp_sched_result *r = res(names[k]);
            const char *req = "";
            size_t kl = strlen(rows[i].key);

            if (r->where == KP_SCHED_CLAIM) {
                req = creq(r->index, rows[i].key);
                if (strncmp(req, rows[i].key, kl) == 0 && req[kl] == ' ')
                    req += kl + 1;
                len += (size_t)snprintf(got + len, sizeof(got) - len, "%sc%zu %s", k ? ", " : "",
                                        r->index, req);
            } else {
                len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s", k ? ", " : "",
                                        where(names[k]));
            }
        }
        if (strcmp(got, rows[i].want) != 0)
            fail_msg("%s: \"%s\", want \"%s\"", rows[i].what, got, rows[i].want);
    }
#undef MIN_DOMAINS
}

/* --- prepared nodes (kp_sched_prepare_nodes) ----------------------------------------------- */

/* a and b are the same plan, byte for byte as far as the caller can read it: every pod's place,
 * relaxation and reason; every claim's pool, options, requests, pods and requirements. */
static void assert_plans_equal(const struct kp_sched_plan *a, const struct kp_sched_plan *b)
{
    assert_int_equal(a->n_pods, b->n_pods);
    for (size_t i = 0; i < a->n_pods; i++) {
        const struct kp_sched_result *x = &a->pods[i], *y = &b->pods[i];

        assert_int_equal(x->where, y->where);
        assert_int_equal(x->index, y->index);
        assert_int_equal(x->relaxed, y->relaxed);
        if (x->error || y->error) {
            assert_non_null(x->error);
            assert_non_null(y->error);
            assert_string_equal(x->error, y->error);
        }
    }
    assert_int_equal(a->n_claims, b->n_claims);
    for (size_t c = 0; c < a->n_claims; c++) {
        const struct kp_sched_claim *x = &a->claims[c], *y = &b->claims[c];

        assert_int_equal(x->pool, y->pool);
        assert_int_equal(x->min_values_relaxed, y->min_values_relaxed);
        assert_int_equal(x->n_types, y->n_types);
        for (size_t i = 0; i < x->n_types; i++)
            assert_ptr_equal(x->types[i], y->types[i]);
        assert_int_equal(x->n_requests, y->n_requests);
        for (size_t i = 0; i < x->n_requests; i++) {
            assert_string_equal(x->requests[i].name, y->requests[i].name);
            assert_int_equal(x->requests[i].milli, y->requests[i].milli);
        }
        assert_int_equal(x->n_pods, y->n_pods);
        for (size_t i = 0; i < x->n_pods; i++)
            assert_int_equal(x->pods[i], y->pods[i]);
        assert_int_equal(x->reqs.n, y->reqs.n);
        for (size_t i = 0; i < x->reqs.n; i++) {
            char fx[KP_REQSET_WHY_SIZE], fy[KP_REQSET_WHY_SIZE];

            kp_req_format(&x->reqs.v[i], fx, sizeof(fx));
            kp_req_format(&y->reqs.v[i], fy, sizeof(fy));
            assert_string_equal(fx, fy);
            assert_int_equal(x->reqs.v[i].min_values, y->reqs.v[i].min_values);
        }
    }
}

#define PREP_EXISTING 8u /* F.nodes[0..8) are nodes, the rest in-flight claims */

/* One consolidation-like trial: the nodes not in excl are destinations, and the pods bound to
 * the excluded ones move along with the pending ones. The plan without prepared state and the
 * plan with it must be equal. Returns how many pods landed on existing nodes. */
static size_t prep_trial(const struct kp_sched_prepared *prep, const bool *excl)
{
    struct kp_sched_node nodes[MAXN], infl[MAXN];
    const struct kp_pod_view *pods[MAXP + MAXN * 8];
    size_t prep_of[MAXN], n_nodes = 0, n_infl = 0, n_pods = 0, on_nodes = 0;
    struct kp_sched_input in = {0};
    struct kp_sched_plan old = {0}, new = {0};

    for (size_t i = 0; i < F.n_pods; i++)
        pods[n_pods++] = F.pods[i];
    for (size_t i = 0; i < F.n_nodes; i++) {
        if (excl[i]) {
            for (size_t j = 0; j < F.nodes[i].n_pods; j++)
                pods[n_pods++] = F.nodes[i].pods[j];
            continue;
        }
        if (i < PREP_EXISTING)
            nodes[n_nodes++] = F.nodes[i];
        else
            infl[n_infl++] = F.nodes[i];
    }
    for (size_t i = 0, k = 0; i < F.n_nodes; i++)
        if (!excl[i]) {
            /* Input order (nodes, then in-flight) is the prepared order: i itself. */
            prep_of[k++] = i;
        }
    in.pods = pods;
    in.n_pods = n_pods;
    in.nodes = nodes;
    in.n_nodes = n_nodes;
    in.inflight = infl;
    in.n_inflight = n_infl;
    in.pools = F.pools;
    in.n_pools = F.n_pools;
    in.daemons = F.ds;
    in.n_daemons = F.n_ds;
    assert_int_equal(kp_sched_solve(&in, &old), 0);
    in.prepared = prep;
    in.prepared_of = prep_of;
    assert_int_equal(kp_sched_solve(&in, &new), 0);
    assert_plans_equal(&old, &new);
    for (size_t i = 0; i < old.n_pods; i++)
        on_nodes += old.pods[i].where == KP_SCHED_NODE && old.pods[i].index < n_nodes;
    kp_sched_plan_done(&old);
    kp_sched_plan_done(&new);
    return on_nodes;
}

/* The plan over prepared nodes, with any of them left out, equals the plan that sets every
 * node up itself: topology spread and (inverse) anti-affinity counts leave the excluded nodes'
 * bound pods out, DaemonSet room, host ports, taints, uninitialized nodes, in-flight claims and
 * the node order all hold, and placements never write into the shared state (later trials
 * would differ). A mismatched map is refused. */
static void test_prepared_equivalence(void **state)
{
    static const char *const zones[] = {"a", "b", "c"};
    static const char *const names[] = {"n-h", "n-c", "n-a", "n-f",  "n-b",
                                        "n-g", "n-e", "n-d", "ic-2", "ic-1"};
    static char pnames[MAXP][16];
    struct kp_sched_prepared *prep = NULL;
    struct kp_sched_input in = {0};
    struct kp_sched_plan plan = {0};
    bool excl[MAXN];
    size_t p, q, placed = 0, bad_map[MAXN];

    (void)state;
    p = pool("default", NULL, NULL);
    itype(p, "c2", 2, 8, 100, "a,b,c", NULL);
    itype(p, "c8", 8, 32, 300, "a,b,c", NULL);
    q = pool("tainted", ",\"weight\":10",
             ",\"taints\":[{\"key\":\"soft\",\"effect\":\"PreferNoSchedule\"}]");
    itype(q, "c4", 4, 16, 150, "a,b", NULL);
    daemon("logs", 100);
    for (size_t i = 0; i < KP_ARRAY_SIZE(names); i++) {
        struct kp_sched_node *n =
            node(names[i], i == 3 ? NULL : "default", zones[i % 3], i % 2 ? 4 : 3, 16);

        if (i >= PREP_EXISTING || i == 5)
            n->initialized = false;
        if (i == 5)
            node_taint(n, "starting", KP_TAINT_NO_SCHEDULE, true);
        if (i == 6)
            node_taint(n, "dedicated", KP_TAINT_NO_SCHEDULE, false);
        if (i < PREP_EXISTING)
            bind(n, "busy", "1", "\"app\":\"other\"", NULL);
    }
    bind(&F.nodes[0], "loner", "500m", "\"app\":\"loner\"", ANTI(HOST, "web"));
    bind(&F.nodes[1], "z-old", "250m", "\"app\":\"z\"", SPREAD(ZONE, 1, "DoNotSchedule", "z"));
    bind(&F.nodes[4], "z-old2", "250m", "\"app\":\"z\"", SPREAD(ZONE, 1, "DoNotSchedule", "z"));
    bind(&F.nodes[4], "db-old", "500m", "\"app\":\"db\"", ANTI(ZONE, "db"));
    F.bound[2][F.nodes[2].n_pods++] = port_pod("resident", "n-a");
    for (size_t i = 0; i < 6; i++) {
        (void)snprintf(pnames[i], sizeof(pnames[i]), "z-%zu", i);
        mkpod(pnames[i], NULL, "500m", "512Mi", "\"app\":\"z\"",
              SPREAD(ZONE, 1, "DoNotSchedule", "z"));
    }
    for (size_t i = 6; i < 10; i++) {
        (void)snprintf(pnames[i], sizeof(pnames[i]), "web-%zu", i);
        mkpod(pnames[i], NULL, "1", "1Gi", "\"app\":\"web\"", NULL);
    }
    for (size_t i = 10; i < 13; i++) {
        (void)snprintf(pnames[i], sizeof(pnames[i]), "anti-%zu", i);
        mkpod(pnames[i], NULL, "500m", "1Gi", "\"app\":\"anti\"", ANTI(HOST, "anti"));
    }
    mkpod("db-1", NULL, "1", "1Gi", "\"app\":\"db\"", ANTI(ZONE, "db"));
    mkpod("db-2", NULL, "1", "1Gi", "\"app\":\"db\"", ANTI(ZONE, "db"));
    mkpod("near-z", NULL, "250m", "256Mi", "\"app\":\"near\"", AFFINITY(ZONE, "z"));
    mkpod("tolerant", NULL, "250m", "256Mi", NULL,
          ",\"tolerations\":[{\"key\":\"dedicated\",\"operator\":\"Exists\"}]");
    port_pod("h1", NULL);
    port_pod("h2", NULL);

    assert_int_equal(kp_sched_prepare_nodes(F.nodes, PREP_EXISTING, &F.nodes[PREP_EXISTING],
                                            F.n_nodes - PREP_EXISTING, F.ds, F.n_ds, &prep),
                     0);
    memset(excl, 0, sizeof(excl));
    placed += prep_trial(prep, excl);
    for (size_t i = 0; i < F.n_nodes; i++) {
        excl[i] = true;
        placed += prep_trial(prep, excl);
        excl[i] = false;
    }
    excl[1] = excl[4] = true; /* both bound z pods move: the spread counts start from zero */
    placed += prep_trial(prep, excl);
    excl[0] = excl[2] = excl[8] = true;
    placed += prep_trial(prep, excl);
    for (size_t i = 0; i < F.n_nodes; i++)
        excl[i] = true;
    placed += prep_trial(prep, excl);
    assert_true(placed > 0); /* existing nodes took pods: copy on write ran */

    /* The identity map (NULL) over the whole set, and the refusals. */
    in.pods = F.pods;
    in.n_pods = F.n_pods;
    in.nodes = F.nodes;
    in.n_nodes = PREP_EXISTING;
    in.inflight = &F.nodes[PREP_EXISTING];
    in.n_inflight = F.n_nodes - PREP_EXISTING;
    in.pools = F.pools;
    in.n_pools = F.n_pools;
    in.daemons = F.ds;
    in.n_daemons = F.n_ds;
    in.prepared = prep;
    assert_int_equal(kp_sched_solve(&in, &plan), 0);
    kp_sched_plan_done(&plan);
    for (size_t i = 0; i < F.n_nodes; i++)
        bad_map[i] = i;
    bad_map[1] = 0; /* not increasing */
    in.prepared_of = bad_map;
    assert_int_equal(kp_sched_solve(&in, &plan), -EINVAL);
    bad_map[1] = 1;
    in.n_nodes = 2;
    in.nodes = &F.nodes[1]; /* nodes 1, 2 claimed to be prepared 0, 1 */
    assert_int_equal(kp_sched_solve(&in, &plan), -EINVAL);
    in.nodes = F.nodes;
    in.prepared_of = NULL;
    in.n_nodes = PREP_EXISTING;
    in.n_daemons = 0; /* not the daemons it was prepared with */
    assert_int_equal(kp_sched_solve(&in, &plan), -EINVAL);
    prep = kp_sched_prepared_free(prep);
    assert_null(prep);
}

/* --- allocation failures ------------------------------------------------------------------- */

static int torture_scene(bool best_effort)
{
    /* The fixture asserts; build the same scene without it, every allocation checked. */
    struct kp_instance_types t = {0};
    struct kp_sched_pool pl = {0};
    struct kp_sched_input in = {0};
    struct kp_sched_plan plan = {0};
    struct kp_entry *np = NULL, *pe[3] = {NULL, NULL, NULL};
    const struct kp_pod_view *pods[3];
    const char *zones[] = {"a", "b"};
    static const char np_json[] =
        "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{\"name\":\"d\","
        "\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{\"limits\":{\"cpu\":\"100\"},"
        "\"template\":{\"spec\":{\"nodeClassRef\":{\"group\":\"g\",\"kind\":\"K\",\"name\":\"c\"},"
        "\"requirements\":[{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"Exists\","
        "\"minValues\":%d}]}}}}";
    static const char pod_json[] =
        "{\"metadata\":{\"name\":\"w%d\",\"namespace\":\"ns\",\"uid\":\"u%d\",\"resourceVersion\":"
        "\"1\",\"labels\":{\"app\":\"w\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":"
        "{\"requests\":{\"cpu\":\"1\"}}}],\"topologySpreadConstraints\":[{\"maxSkew\":1,"
        "\"topologyKey\":\"topology.kubernetes.io/zone\",\"whenUnsatisfiable\":\"ScheduleAnyway\","
        "\"labelSelector\":{\"matchLabels\":{\"app\":\"w\"}}}],\"affinity\":{\"podAntiAffinity\":"
        "{\"requiredDuringSchedulingIgnoredDuringExecution\":[{\"topologyKey\":\"kubernetes.io/"
        "hostname\",\"labelSelector\":{\"matchLabels\":{\"app\":\"w\"}}}]}}},\"status\":{"
        "\"phase\":\"Pending\"}}";
    struct kp_instance_type *it;
    int rc;

    char np_buf[1024];
    int np_n = snprintf(np_buf, sizeof(np_buf), np_json, best_effort ? 2 : 1);

    if ((rc = kp_nodepool_decode(np_buf, (size_t)np_n, &np)) < 0)
        goto out;
    for (int i = 0; i < 3; i++) {
        char buf[1024];
        int n = snprintf(buf, sizeof(buf), pod_json, i, i);

        if ((rc = kp_pod_decode(buf, (size_t)n, &pe[i])) < 0)
            goto out;
        pods[i] = kp_pod_view(pe[i]);
    }
    rc = -ENOMEM;
    t.v = kp_calloc(1, sizeof(*t.v));
    if (!t.v)
        goto out;
    t.n = 1;
    it = &t.v[0];
    if (!(it->name = kp_strdup("m")))
        goto out;
    it->offerings = kp_calloc(2, sizeof(*it->offerings));
    if (!it->offerings)
        goto out;
    if ((rc = kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, (const char *[]){"m"}, 1,
                            0)) < 0 ||
        (rc = kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, zones, 2, 0)) < 0 ||
        (rc = kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", 4000)) < 0 ||
        (rc = kp_provider_res_add(&it->capacity, &it->n_capacity, "pods", 110000)) < 0)
        goto out;
    for (size_t i = 0; i < 2; i++) {
        it->n_offerings++;
        it->offerings[i].available = true;
        it->offerings[i].price_micro_usd = 100;
        if ((rc = kp_reqset_add(&it->offerings[i].reqs, KP_LABEL_ZONE, KP_SEL_IN, &zones[i], 1,
                                0)) < 0)
            goto out;
    }
    pl.np = kp_nodepool_view(np);
    pl.types = t.v;
    pl.n_types = t.n;
    in.pods = pods;
    in.n_pods = 3;
    in.pools = &pl;
    in.n_pools = 1;
    in.min_values_best_effort = best_effort;
    if ((rc = kp_sched_solve(&in, &plan)) < 0)
        goto out;
    rc = plan.n_claims == 3 ? 0 : -EPROTO;
out:
    kp_sched_plan_done(&plan);
    kp_instance_types_done(&t);
    kp_entry_unref(np);
    for (int i = 0; i < 3; i++)
        kp_entry_unref(pe[i]);
    return rc;
}

static int torture_solve(void)
{
    return torture_scene(false);
}

/* The same with a minValues the catalog cannot meet, relaxed under BestEffort. */
static int torture_solve_best_effort(void)
{
    return torture_scene(true);
}

/* The prepared path: kp_sched_prepare_nodes over two nodes, then a solve with the first left out
 * whose pods (and the pending ones) land on the second, so its used resources and host ports are
 * copied before they change; bound required anti-affinity and a DaemonSet's room included. */
static int torture_solve_prepared(void)
{
    static const char pod_json[] =
        "{\"metadata\":{\"name\":\"p%d\",\"namespace\":\"ns\",\"uid\":\"u%d\",\"resourceVersion\":"
        "\"1\",\"labels\":{\"app\":\"w\"}},\"spec\":{%s%s%s\"containers\":[{\"name\":\"c\","
        "\"ports\":[{\"containerPort\":80,\"hostPort\":%d}],\"resources\":{\"requests\":{\"cpu\":"
        "\"1\"}}}],\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
        "Execution\":[{\"topologyKey\":\"kubernetes.io/hostname\",\"labelSelector\":{"
        "\"matchLabels\":{\"app\":\"x\"}}}]}}},\"status\":{\"phase\":\"%s\"}}";
    static const char *const bound_to[] = {"n0", "n1", NULL, NULL};
    static const struct kp_label labels[2][2] = {
        {{KP_LABEL_HOSTNAME, "n0"}, {KP_LABEL_ZONE, "a"}},
        {{KP_LABEL_HOSTNAME, "n1"}, {KP_LABEL_ZONE, "a"}},
    };
    static const struct kp_res alloc[] = {{"cpu", 8000}, {"pods", 110000}};
    static const struct kp_res ds_req[] = {{"cpu", 100}};
    struct kp_sched_daemon ds = {.name = "ds", .requests = {.v = ds_req, .n = 1}};
    struct kp_entry *pe[4] = {NULL, NULL, NULL, NULL};
    const struct kp_pod_view *views[4], *bound[2][1], *pods[3];
    struct kp_sched_node nodes[2];
    struct kp_sched_prepared *prep = NULL;
    struct kp_sched_input in = {0};
    struct kp_sched_plan plan = {0};
    const size_t prep_of[] = {1};
    int rc;

    for (int i = 0; i < 4; i++) {
        char buf[2048];
        int n = snprintf(buf, sizeof(buf), pod_json, i, i, bound_to[i] ? "\"nodeName\":\"" : "",
                         bound_to[i] ? bound_to[i] : "", bound_to[i] ? "\"," : "", 80 + i,
                         bound_to[i] ? "Running" : "Pending");

        if ((rc = kp_pod_decode(buf, (size_t)n, &pe[i])) < 0)
            goto out;
        views[i] = kp_pod_view(pe[i]);
    }
    memset(nodes, 0, sizeof(nodes));
    for (size_t i = 0; i < 2; i++) {
        bound[i][0] = views[i];
        nodes[i].name = labels[i][0].value;
        nodes[i].nodepool = NULL;
        nodes[i].initialized = true;
        nodes[i].labels = (struct kp_labels){.v = labels[i], .n = 2};
        nodes[i].allocatable = (struct kp_resources){.v = alloc, .n = 2};
        nodes[i].capacity = nodes[i].allocatable;
        nodes[i].pods = bound[i];
        nodes[i].n_pods = 1;
    }
    if ((rc = kp_sched_prepare_nodes(nodes, 2, /* inflight= */ NULL, 0, &ds, 1, &prep)) < 0)
        goto out;
    pods[0] = views[2];
    pods[1] = views[3];
    pods[2] = views[0]; /* n0's pod moves */
    in.pods = pods;
    in.n_pods = 3;
    in.nodes = &nodes[1];
    in.n_nodes = 1;
    in.daemons = &ds;
    in.n_daemons = 1;
    in.prepared = prep;
    in.prepared_of = prep_of;
    if ((rc = kp_sched_solve(&in, &plan)) < 0)
        goto out;
    rc = 0;
    for (size_t i = 0; i < plan.n_pods; i++)
        if (plan.pods[i].where != KP_SCHED_NODE || plan.pods[i].index != 0)
            rc = -EPROTO;
out:
    kp_sched_plan_done(&plan);
    kp_sched_prepared_free(prep);
    for (int i = 0; i < 4; i++)
        kp_entry_unref(pe[i]);
    return rc;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        T(test_new_claim_price_order),
        T(test_unavailable_and_too_small),
        T(test_price_by_compatible_offering),
        T(test_operators),
        T(test_undefined_labels),
        T(test_template_labels),
        T(test_pool_taints),
        T(test_existing_first_fit),
        T(test_pods_resource),
        T(test_existing_taints_labels),
        T(test_inflight),
        T(test_bin_packing),
        T(test_overhead),
        T(test_daemonset_overhead),
        T(test_daemonset_affinity),
        T(test_daemonset_existing_node),
        T(test_host_ports),
        T(test_limits),
        T(test_limits_exceeded),
        T(test_node_limit),
        T(test_weight_order),
        T(test_min_values),
        T(test_min_values_truncation),
        T(test_min_values_best_effort),
        T(test_pool_filtered_out),
        T(test_refused),
        T(test_deterministic),
        T(test_input_order),
        T(test_spread_zone),
        T(test_spread_counts_existing),
        T(test_spread_existing_node),
        T(test_spread_hostname),
        T(test_spread_zone_many),
        T(test_anti_hostname_many),
        T(test_anti_hostname_preferred_many),
        T(test_existing_node_lacks_topology_label),
        T(test_spread_min_domains),
        T(test_spread_unsatisfiable),
        T(test_anti_affinity_hostname),
        T(test_anti_affinity_zone),
        T(test_inverse_anti_affinity),
        T(test_affinity),
        T(test_affinity_hostname_existing),
        T(test_self_affinity),
        T(test_spread_node_taints_policy),
        T(test_spread_node_affinity_policy),
        T(test_spread_match_label_keys),
        T(test_batch_inverse_anti_affinity),
        T(test_relax_prefer_no_schedule_node),
        T(test_batch_invariants),
        T(test_namespaces),
        T(test_terminating_bound_pod),
        T(test_relax_preferred_node_affinity),
        T(test_relax_required_terms),
        T(test_relax_order),
        T(test_relax_prefer_no_schedule),
        T(test_ignore_preferences),
        T(test_requeue),
        T(test_requirements_table),
        T(test_taints_table),
        T(test_resources_table),
        T(test_host_ports_table),
        T(test_daemonset_table),
        T(test_daemonset_ports_table),
        T(test_pools_table),
        T(test_min_values_table),
        T(test_topology_table),
        T(test_existing_node_table),
        T(test_topology_batch_table),
        T(test_prepared_equivalence),
#undef T
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_solve),
        KP_TORTURE(torture_solve_best_effort),
        KP_TORTURE(torture_solve_prepared),
    };

    return kp_test_main("scheduler", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
