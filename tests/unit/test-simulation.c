/* tests/unit/test-simulation.c: what core/provisioning/simulation.h feeds the scheduler from
 * the caches. PodDisruptionBudgets: a build lists them once, and a prepared input leaves out a
 * deleting node's pod that a PDB fully blocks; a build without a PDB store moves every
 * reschedulable pod. DaemonSets: a build lists them once into every prepared input (sorted,
 * DRA templates left out), and the plan sizes a new NodeClaim with the overhead of those that
 * tolerate its NodePool's taints. Then the same under the allocation-failure sweep. */
#include "kp-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/obj-misc.h"
#include "api/obj-pod.h"
#include "api/obj-karpenter.h"
#include "core/core.h"
#include "core/provider.h"
#include "core/provisioning/simulation.h"
#include "core/state/cluster.h"
#include "kp-fake-provider.h"

/* A running pod bound to n1; %s names it, %s adds labels. */
#define BOUND_POD_FMT                                                                              \
    "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"d\",\"uid\":\"u-%s\"%s},"                      \
    "\"spec\":{\"nodeName\":\"n1\",\"containers\":[]},\"status\":{\"phase\":\"Running\","          \
    "\"startTime\":\"2026-11-30T08:00:00Z\",\"conditions\":[{\"type\":\"Ready\",\"status\":"       \
    "\"True\"}]}}"
#define NOW 1796026200000000LL /* 2026-11-30T08:10:00Z */

static const char *const pdb_json[] = {
    /* fully blocking, selects "web" */
    "{\"metadata\":{\"name\":\"web\",\"namespace\":\"d\"},\"spec\":{\"maxUnavailable\":0,"
    "\"selector\":{\"matchLabels\":{\"app\":\"web\"}}}}",
    /* the same in another namespace, listed after it by name but before it by namespace */
    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"c\"},\"spec\":{\"maxUnavailable\":0,"
    "\"selector\":{}}}",
};

struct fx {
    struct kp_store *pods, *pools, *pdbs;
    struct kp_state_node node;
    struct kp_state_snapshot snap;
    struct kp_core_env env;
};

static int put(struct kp_store *s, int (*decode)(const char *, size_t, struct kp_entry **),
               const char *json)
{
    struct kp_entry *e = NULL;
    int r;

    if ((r = decode(json, strlen(json), &e)) < 0)
        return r;
    if ((r = kp_store_put(s, e, /* ret_old= */ NULL)) < 0)
        kp_entry_unref(e);
    return r;
}

static int fx_make(struct fx *f)
{
    static const char *const pods[][2] = {{"web", ",\"labels\":{\"app\":\"web\"}"}, {"free", ""}};
    char json[1024];
    int r;

    memset(f, 0, sizeof(*f));
    if ((r = kp_store_new(&f->pods)) < 0 || (r = kp_store_new(&f->pools)) < 0 ||
        (r = kp_store_new(&f->pdbs)) < 0 ||
        (r = kp_store_add_index(f->pods, KP_INDEX_POD_NODE, kp_index_pod_node)) < 0)
        return r;
    for (size_t i = 0; i < KP_ARRAY_SIZE(pods); i++) {
        (void)snprintf(json, sizeof(json), BOUND_POD_FMT, pods[i][0], pods[i][0], pods[i][1]);
        if ((r = put(f->pods, kp_pod_decode, json)) < 0)
            return r;
    }
    for (size_t i = 0; i < KP_ARRAY_SIZE(pdb_json); i++)
        if ((r = put(f->pdbs, kp_pdb_decode, pdb_json[i])) < 0)
            return r;
    /* One node, being deleted: its pods are the round's deleting pods. No Node or NodeClaim
     * entry is needed for that, and no NodePool: nothing else is built. */
    f->node.provider_id = "kpssh://n1";
    f->node.name = "n1";
    f->node.node_name = "n1";
    f->node.flags = KP_STATE_NODE_MARKED_FOR_DELETION;
    f->snap.v = &f->node;
    f->snap.n = 1;
    return 0;
}

static void fx_free(struct fx *f)
{
    kp_store_free(f->pods);
    kp_store_free(f->pools);
    kp_store_free(f->pdbs);
}

/* Builds and prepares over f with or without its PDB store: 0 and the pods selected and not
 * reschedulable (*ret_pods, *ret_not_resched), or a negative error (allocation). */
static int simulate(struct fx *f, bool with_pdbs, size_t *ret_pods, size_t *ret_not_resched,
                    size_t *ret_n_pdbs)
{
    struct kp_sim_sources src = {.env = &f->env,
                                 .pods = f->pods,
                                 .nodepools = f->pools,
                                 .pvcs = NULL,
                                 .pdbs = with_pdbs ? f->pdbs : NULL};
    struct kp_sim sim;
    struct kp_sim_run run;
    struct kp_sched_input in;
    int r;

    memset(&run, 0, sizeof(run));
    if ((r = kp_sim_build(&src, &f->snap, /* c= */ NULL, /* cx= */ NULL, &sim)) < 0)
        goto out;
    if ((r = kp_sim_prepare(&sim, /* moving= */ NULL, 0, NOW, &run, &in)) < 0)
        goto out;
    *ret_pods = in.n_pods;
    *ret_not_resched = run.sel.not_resched;
    *ret_n_pdbs = sim.n_pdbs;
    /* The build's PDBs are sorted: namespace "c" before "d". */
    if (sim.n_pdbs == 2 && strcmp(sim.pdbs[0]->e.key, "c/a") != 0)
        r = 1;
out:
    kp_sim_run_done(&run);
    kp_sim_done(&sim);
    return r;
}

static void test_pdbs_hold_deleting_pods(void **state)
{
    struct fx f;
    size_t pods = 0, not_resched = 0, n_pdbs = 0;

    (void)state;
    assert_int_equal(fx_make(&f), 0);
    assert_int_equal(simulate(&f, true, &pods, &not_resched, &n_pdbs), 0);
    assert_int_equal(n_pdbs, 2);
    assert_int_equal(pods, 1); /* "free" moves; "web" waits for its PDB */
    assert_int_equal(not_resched, 1);
    /* No PDB store: no PDBs, both move. */
    assert_int_equal(simulate(&f, false, &pods, &not_resched, &n_pdbs), 0);
    assert_int_equal(n_pdbs, 0);
    assert_int_equal(pods, 2);
    assert_int_equal(not_resched, 0);
    fx_free(&f);
}

/* --- DaemonSet overhead ------------------------------------------------------------------ */

/* A pod kube-scheduler marked Unschedulable, 1.5 CPU, tolerating the "dedicated" taint. */
static const char pending_pod[] =
    "{\"metadata\":{\"name\":\"app\",\"namespace\":\"d\",\"uid\":\"u-app\"},\"spec\":{"
    "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1500m\"}}}],"
    "\"tolerations\":[{\"key\":\"dedicated\",\"operator\":\"Exists\"}]},\"status\":{"
    "\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"False\","
    "\"reason\":\"Unschedulable\"}]}}";

/* A Ready NodePool of the fake provider's class; %s: its template's taints. */
#define POOL_FMT                                                                                   \
    "{\"metadata\":{\"name\":\"pool\",\"uid\":\"u-pool\"},\"spec\":{\"template\":{\"spec\":{"      \
    "\"nodeClassRef\":{\"group\":\"" KP_FAKE_NODECLASS_GROUP                                       \
    "\",\"kind\":\"" KP_FAKE_NODECLASS_KIND                                                        \
    "\",\"name\":\"default\"},\"requirements\":[]%s}}},\"status\":{"                               \
    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Ready\","                \
    "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}"

/* One CPU each, tolerating nothing; "b-gpu" has a DRA claim; listed out of order. */
static const char *const ds_json[] = {
    "{\"metadata\":{\"name\":\"b-gpu\",\"namespace\":\"kube-system\",\"uid\":\"u-g\"},"
    "\"spec\":{\"template\":{\"spec\":{\"resourceClaims\":[{\"name\":\"g\"}],"
    "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]}}}}",
    "{\"metadata\":{\"name\":\"agent\",\"namespace\":\"kube-system\",\"uid\":\"u-a\"},"
    "\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
    "\"limits\":{\"cpu\":\"1\"}}}]}}}}",
    ("{\"metadata\":{\"name\":\"a-logs\",\"namespace\":\"kube-system\",\"uid\":\"u-l\"},"
     "\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}"),
};

struct dfx {
    struct kp_fake_provider *fake;
    struct kp_provider provider;
    struct kp_core_env env;
    struct kp_store *pods, *plain, *tainted, *daemonsets;
    struct kp_state_snapshot snap; /* no nodes: the pod needs a new NodeClaim */
};

/* Two on-demand instance types: "small" (2 CPU, cheaper) and "big" (4 CPU). */
static int publish_types(struct kp_fake_provider *f)
{
    static const struct {
        const char *name;
        int64_t cpu, price;
    } classes[] = {{"small", 2000, 20000}, {"big", 4000, 40000}};
    static const char *const ct = KP_CAPACITY_TYPE_ON_DEMAND, *const zone = "z1";
    struct kp_instance_types t = {0};
    int r = -ENOMEM;

    if (!(t.v = kp_calloc(KP_ARRAY_SIZE(classes), sizeof(*t.v))))
        return -ENOMEM;
    for (size_t i = 0; i < KP_ARRAY_SIZE(classes); i++) {
        struct kp_instance_type *it = &t.v[t.n++];
        const char *name = classes[i].name;

        if (!(it->name = kp_strdup(name)) ||
            !(it->offerings = kp_calloc(1, sizeof(*it->offerings))))
            goto out;
        it->n_offerings = 1;
        it->offerings[0].price_micro_usd = classes[i].price;
        it->offerings[0].available = true;
        if ((r = kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, &name, 1, 0)) < 0 ||
            (r = kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, &zone, 1, 0)) < 0 ||
            (r = kp_reqset_add(&it->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1, 0)) < 0 ||
            (r = kp_reqset_add(&it->offerings[0].reqs, KP_LABEL_ZONE, KP_SEL_IN, &zone, 1, 0)) <
                0 ||
            (r = kp_reqset_add(&it->offerings[0].reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1,
                               0)) < 0 ||
            (r = kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", classes[i].cpu)) < 0 ||
            (r = kp_provider_res_add(&it->capacity, &it->n_capacity, "pods", 110000)) < 0)
            goto out;
        r = -ENOMEM;
    }
    r = kp_fake_provider_publish(f, &t);
out:
    kp_instance_types_done(&t);
    return r;
}

static int dfx_make(struct dfx *f)
{
    char json[1024];
    int r;

    memset(f, 0, sizeof(*f));
    if ((r = kp_fake_provider_new(&f->fake)) < 0 || (r = publish_types(f->fake)) < 0)
        return r;
    f->provider = kp_fake_provider_as_provider(f->fake);
    f->env.provider = &f->provider;
    if ((r = kp_store_new(&f->pods)) < 0 || (r = kp_store_new(&f->plain)) < 0 ||
        (r = kp_store_new(&f->tainted)) < 0 || (r = kp_store_new(&f->daemonsets)) < 0 ||
        (r = kp_store_add_index(f->pods, KP_INDEX_POD_NODE, kp_index_pod_node)) < 0 ||
        (r = put(f->pods, kp_pod_decode, pending_pod)) < 0)
        return r;
    (void)snprintf(json, sizeof(json), POOL_FMT, "");
    if ((r = put(f->plain, kp_nodepool_decode, json)) < 0)
        return r;
    (void)snprintf(json, sizeof(json), POOL_FMT,
                   ",\"taints\":[{\"key\":\"dedicated\",\"value\":\"infra\","
                   "\"effect\":\"NoSchedule\"}]");
    if ((r = put(f->tainted, kp_nodepool_decode, json)) < 0)
        return r;
    for (size_t i = 0; i < KP_ARRAY_SIZE(ds_json); i++)
        if ((r = put(f->daemonsets, kp_daemonset_decode, ds_json[i])) < 0)
            return r;
    return 0;
}

static void dfx_free(struct dfx *f)
{
    kp_store_free(f->pods);
    kp_store_free(f->plain);
    kp_store_free(f->tainted);
    kp_store_free(f->daemonsets);
    kp_fake_provider_free(f->fake);
}

/* What one round over f plans with pools and daemonsets (NULL: no DaemonSet store). */
struct doutcome {
    size_t n_daemons; /* the prepared input's */
    size_t n_claims;
    char first_type[16]; /* the first claim's cheapest option */
    size_t n_types;
    int64_t cpu; /* the first claim's requests */
};

static int dplan(struct dfx *f, struct kp_store *pools, struct kp_store *daemonsets,
                 struct doutcome *ret)
{
    struct kp_sim_sources src = {
        .env = &f->env, .pods = f->pods, .nodepools = pools, .daemonsets = daemonsets};
    struct kp_sim sim;
    struct kp_sim_run run;
    struct kp_sched_input in;
    int r;

    memset(&run, 0, sizeof(run));
    memset(ret, 0, sizeof(*ret));
    if ((r = kp_sim_build(&src, &f->snap, /* c= */ NULL, /* cx= */ NULL, &sim)) < 0 ||
        (r = kp_sim_prepare(&sim, /* moving= */ NULL, 0, NOW, &run, &in)) < 0 ||
        (r = kp_sched_solve(&in, &run.plan)) < 0)
        goto out;
    ret->n_daemons = in.n_daemons;
    /* Every input borrows the build's daemons, the same array its prepared nodes were set up
     * with (kp_sched_solve refuses a mismatch), in namespace/name order. */
    if (in.daemons != sim.daemons || in.n_daemons != sim.n_daemons ||
        (in.n_daemons == 2 && (strcmp(in.daemons[0].name, "kube-system/a-logs") != 0 ||
                               strcmp(in.daemons[1].name, "kube-system/agent") != 0))) {
        r = 1;
        goto out;
    }
    ret->n_claims = run.plan.n_claims;
    if (run.plan.n_claims) {
        const struct kp_sched_claim *c = &run.plan.claims[0];

        (void)snprintf(ret->first_type, sizeof(ret->first_type), "%s",
                       c->n_types ? c->types[0]->name : "");
        ret->n_types = c->n_types;
        for (size_t i = 0; i < c->n_requests; i++)
            if (strcmp(c->requests[i].name, "cpu") == 0)
                ret->cpu = c->requests[i].milli;
    }
out:
    kp_sim_run_done(&run);
    kp_sim_done(&sim);
    return r;
}

/* The build hands its DaemonSets to every prepared input; the DRA one is left out. */
static void test_daemonsets_fed(void **state)
{
    struct dfx f;
    struct doutcome o;

    (void)state;
    assert_int_equal(dfx_make(&f), 0);
    assert_int_equal(dplan(&f, f.plain, f.daemonsets, &o), 0);
    assert_int_equal(o.n_daemons, 2);
    assert_int_equal(dplan(&f, f.plain, NULL, &o), 0);
    assert_int_equal(o.n_daemons, 0);
    dfx_free(&f);
}

/* The pod alone fits "small" (2 CPU); with the 1-CPU agent every new node runs it needs "big",
 * and the claim's requests carry the overhead. */
static void test_daemonset_overhead_changes_plan(void **state)
{
    struct dfx f;
    struct doutcome o;

    (void)state;
    assert_int_equal(dfx_make(&f), 0);
    assert_int_equal(dplan(&f, f.plain, NULL, &o), 0);
    assert_int_equal(o.n_claims, 1);
    assert_string_equal(o.first_type, "small");
    assert_int_equal(o.n_types, 2);
    assert_int_equal(o.cpu, 1500);
    assert_int_equal(dplan(&f, f.plain, f.daemonsets, &o), 0);
    assert_int_equal(o.n_claims, 1);
    assert_string_equal(o.first_type, "big");
    assert_int_equal(o.n_types, 1);
    assert_int_equal(o.cpu, 2500); /* 1.5 + the agent's limit-defaulted 1 + a-logs' nothing */
    dfx_free(&f);
}

/* A DaemonSet pod running on node n1, controlled by the DaemonSet named ds with uid dsuid,
 * made at created, requesting cpu. */
static int put_ds_pod(struct dfx *f, const char *name, const char *ds, const char *dsuid,
                      const char *created, const char *cpu)
{
    char json[768];

    (void)snprintf(json, sizeof(json),
                   "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"kube-system\",\"uid\":"
                   "\"pu-%s\",\"creationTimestamp\":\"%s\",\"ownerReferences\":[{"
                   "\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"%s\","
                   "\"uid\":\"%s\",\"controller\":true}]},\"spec\":{\"nodeName\":\"n1\","
                   "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":"
                   "\"%s\"}}}]},\"status\":{\"phase\":\"Running\"}}",
                   name, name, created, ds, dsuid, cpu);
    return put(f->pods, kp_pod_decode, json);
}

/* The agent's pods say what it really requests (a webhook or VPA changed it): the newest pod it
 * controls sizes it, not its template's 1 CPU limit. An older pod and a newer one of another
 * DaemonSet incarnation (another uid) do not count: 1.5 + 0.1 fits the small type. */
static void test_daemonset_sized_by_newest_pod(void **state)
{
    struct dfx f;
    struct doutcome o;

    (void)state;
    assert_int_equal(dfx_make(&f), 0);
    assert_int_equal(put_ds_pod(&f, "agent-old", "agent", "u-a", "2026-01-01T00:00:00Z", "3"), 0);
    assert_int_equal(put_ds_pod(&f, "agent-new", "agent", "u-a", "2026-01-02T00:00:00Z", "100m"),
                     0);
    assert_int_equal(put_ds_pod(&f, "agent-gone", "agent", "u-old", "2026-01-03T00:00:00Z", "3"),
                     0);
    assert_int_equal(dplan(&f, f.plain, f.daemonsets, &o), 0);
    assert_int_equal(o.n_claims, 1);
    assert_string_equal(o.first_type, "small");
    assert_int_equal(o.cpu, 1600);
    dfx_free(&f);
}

/* A NodePool tainted dedicated=infra:NoSchedule: the agent does not tolerate it, so it would
 * not run on the new node and costs it nothing. */
static void test_daemonset_not_tolerating_pool(void **state)
{
    struct dfx f;
    struct doutcome o;

    (void)state;
    assert_int_equal(dfx_make(&f), 0);
    assert_int_equal(dplan(&f, f.tainted, f.daemonsets, &o), 0);
    assert_int_equal(o.n_daemons, 2);
    assert_int_equal(o.n_claims, 1);
    assert_string_equal(o.first_type, "small");
    assert_int_equal(o.n_types, 2);
    assert_int_equal(o.cpu, 1500);
    dfx_free(&f);
}

/* Built once in main(), before the sweep (decoding and stores are other modules' to torture). */
static struct fx fixture;
static struct dfx dfixture;

static int torture_daemonsets(void)
{
    struct doutcome o;
    int r = dplan(&dfixture, dfixture.plain, dfixture.daemonsets, &o);

    if (r == 0 &&
        (o.n_daemons != 2 || o.n_claims != 1 || strcmp(o.first_type, "big") != 0 || o.cpu != 2500))
        r = 1;
    return r;
}

static int torture_simulate(void)
{
    size_t pods = 0, not_resched = 0, n_pdbs = 0;
    int r = simulate(&fixture, true, &pods, &not_resched, &n_pdbs);

    if (r == 0 && (pods != 1 || not_resched != 1 || n_pdbs != 2))
        r = 1; /* positive: a wrong answer, not a failed allocation */
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pdbs_hold_deleting_pods),
        cmocka_unit_test(test_daemonsets_fed),
        cmocka_unit_test(test_daemonset_overhead_changes_plan),
        cmocka_unit_test(test_daemonset_sized_by_newest_pod),
        cmocka_unit_test(test_daemonset_not_tolerating_pool),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_simulate),
        KP_TORTURE(torture_daemonsets),
    };
    int rc;

    if (fx_make(&fixture) < 0 || dfx_make(&dfixture) < 0) {
        fprintf(stderr, "simulation: cannot build the fixture\n");
        fx_free(&fixture);
        dfx_free(&dfixture);
        return 1;
    }
    rc = kp_test_main("simulation", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                      argv);
    fx_free(&fixture);
    dfx_free(&dfixture);
    return rc;
}
