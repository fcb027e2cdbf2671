/* tests/unit/test-simulation.c: what core/provisioning/simulation.h feeds pod selection from
 * the caches, for now the PodDisruptionBudgets: a build lists them once, and a prepared input
 * leaves out a deleting node's pod that a PDB fully blocks; a build without a PDB store moves
 * every reschedulable pod. Then the same under the allocation-failure sweep. */
#include "kp-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/obj-misc.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/provisioning/simulation.h"
#include "core/state/cluster.h"

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

/* Built once in main(), before the sweep (decoding and stores are other modules' to torture). */
static struct fx fixture;

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
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_simulate),
    };
    int rc;

    if (fx_make(&fixture) < 0) {
        fprintf(stderr, "simulation: cannot build the fixture\n");
        fx_free(&fixture);
        return 1;
    }
    rc = kp_test_main("simulation", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                      argv);
    fx_free(&fixture);
    return rc;
}
