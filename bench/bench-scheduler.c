/* bench-scheduler: what kp_sched_solve (core/provisioning/scheduler.h) costs per pending pod, and
 * whether that grows with the pods already bound. N existing nodes (default 100, three zones) are
 * full, each holding B bound pods of the same app (default 0, 10 and 100 per node); P pending pods
 * (default 200 and 400) of that app, each with a zone spread and a hostname anti-affinity to its
 * own kind, go to new NodeClaims from one NodePool with T instance types (default 20). For each B
 * the marginal cost per pod is (time(2P) - time(P)) / P: the set-up that counts bound pods once is
 * in both runs and cancels out. A scheduler that rescanned bound pods per placement would show a
 * marginal cost growing with B. Options: -N nodes, -P pods, -T types, -r repeats (default 3). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/str.h"
#include "base/time.h"
#include "api/obj-karpenter.h"
#include "api/obj-pod.h"
#include "core/provider.h"
#include "core/provisioning/scheduler.h"

static const char *const zones[] = {"a", "b", "c"};

static struct kp_entry *pod(unsigned i, const char *node)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    struct kp_entry *e = NULL;

    if (kp_buf_printf(
            &b,
            "{\"metadata\":{\"name\":\"p%u%s\",\"namespace\":\"ns\",\"uid\":\"u%u%s\","
            "\"resourceVersion\":\"1\",\"labels\":{\"app\":\"w\"}},\"spec\":{%s%s%s"
            "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"100m\","
            "\"memory\":\"128Mi\"}}}],\"topologySpreadConstraints\":[{\"maxSkew\":1,"
            "\"topologyKey\":\"topology.kubernetes.io/zone\",\"whenUnsatisfiable\":"
            "\"DoNotSchedule\",\"labelSelector\":{\"matchLabels\":{\"app\":\"w\"}}}],"
            "\"affinity\":{\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":"
            "[{\"weight\":1,\"podAffinityTerm\":{\"topologyKey\":\"kubernetes.io/hostname\","
            "\"labelSelector\":{\"matchLabels\":{\"app\":\"w\"}}}}]}}},\"status\":{\"phase\":"
            "\"%s\"}}",
            i, node ? node : "", i, node ? node : "", node ? "\"nodeName\":\"" : "",
            node ? node : "", node ? "\"," : "", node ? "Running" : "Pending") < 0 ||
        kp_pod_decode(b.data, b.len, &e) < 0) {
        fprintf(stderr, "pod does not decode\n");
        exit(1);
    }
    kp_buf_done(&b);
    return e;
}

static void must(int r)
{
    if (r < 0) {
        fprintf(stderr, "bench-scheduler: %s\n", strerror(-r));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    uint32_t nodes = 100, pods = 200, ntypes = 20, repeats = 3;
    static const uint32_t bound_per_node[] = {0, 10, 100};
    static const char np_json[] =
        "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{\"name\":\"d\","
        "\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{\"template\":{\"spec\":{"
        "\"nodeClassRef\":{\"group\":\"g\",\"kind\":\"K\",\"name\":\"c\"}}}}}";
    struct kp_instance_types types = {0};
    struct kp_entry *np = NULL;
    int opt;

    while ((opt = getopt(argc, argv, "N:P:T:r:")) != -1) {
        uint32_t *to = opt == 'N'   ? &nodes
                       : opt == 'P' ? &pods
                       : opt == 'T' ? &ntypes
                       : opt == 'r' ? &repeats
                                    : NULL;

        if (!to || kp_safe_atou32(optarg, to) < 0 || *to == 0)
            return 2;
    }
    must(kp_nodepool_decode(np_json, sizeof(np_json) - 1, &np));
    types.v = kp_calloc(ntypes, sizeof(*types.v));
    if (!types.v)
        must(-ENOMEM);
    for (uint32_t i = 0; i < ntypes; i++) {
        struct kp_instance_type *it = &types.v[types.n++];
        char name[32];
        const char *nv = name;

        (void)snprintf(name, sizeof(name), "t%02u", i);
        if (!(it->name = kp_strdup(name)))
            must(-ENOMEM);
        must(kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, &nv, 1, 0));
        must(kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, zones, 3, 0));
        must(kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", 1000 * (2 + i)));
        must(kp_provider_res_add(&it->capacity, &it->n_capacity, "memory", (int64_t)(4 + i) << 40));
        must(kp_provider_res_add(&it->capacity, &it->n_capacity, "pods", 110000));
        it->offerings = kp_calloc(3, sizeof(*it->offerings));
        if (!it->offerings)
            must(-ENOMEM);
        for (size_t z = 0; z < 3; z++) {
            struct kp_offering *o = &it->offerings[it->n_offerings++];

            must(kp_reqset_add(&o->reqs, KP_LABEL_ZONE, KP_SEL_IN, &zones[z], 1, 0));
            o->price_micro_usd = 1000 * (1 + i) + (int64_t)z;
            o->available = true;
        }
    }
    printf("nodes=%u types=%u pods=%u/%u repeats=%u\n", nodes, ntypes, pods, 2 * pods, repeats);
    for (size_t bi = 0; bi < sizeof(bound_per_node) / sizeof(bound_per_node[0]); bi++) {
        uint32_t B = bound_per_node[bi];
        struct kp_sched_node *nv = kp_calloc(nodes, sizeof(*nv));
        struct kp_label(*labels)[2] = kp_calloc(nodes, sizeof(*labels));
        char(*names)[16] = kp_calloc(nodes, sizeof(*names));
        struct kp_entry **bound = kp_calloc((size_t)nodes * B + 1, sizeof(*bound));
        const struct kp_pod_view **bviews = kp_calloc((size_t)nodes * B + 1, sizeof(*bviews));
        struct kp_entry **pend = kp_calloc(2 * pods, sizeof(*pend));
        const struct kp_pod_view **pviews = kp_calloc(2 * pods, sizeof(*pviews));
        static const struct kp_res full[] = {{"cpu", 0}, {"pods", 0}};
        double per_run[2] = {0, 0};

        if (!nv || !labels || !names || !bound || !bviews || !pend || !pviews)
            must(-ENOMEM);
        for (uint32_t n = 0; n < nodes; n++) {
            (void)snprintf(names[n], sizeof(names[n]), "n%04u", n);
            labels[n][0] = (struct kp_label){"kubernetes.io/hostname", names[n]};
            labels[n][1] = (struct kp_label){KP_LABEL_ZONE, zones[n % 3]};
            nv[n].name = names[n];
            nv[n].initialized = true;
            nv[n].labels.v = labels[n];
            nv[n].labels.n = 2;
            nv[n].allocatable.v = full;
            nv[n].allocatable.n = 2;
            nv[n].pods = &bviews[(size_t)n * B];
            nv[n].n_pods = B;
            for (uint32_t j = 0; j < B; j++) {
                size_t k = (size_t)n * B + j;

                bound[k] = pod((unsigned)k, names[n]);
                bviews[k] = kp_pod_view(bound[k]);
            }
        }
        for (uint32_t i = 0; i < 2 * pods; i++) {
            pend[i] = pod(i, NULL);
            pviews[i] = kp_pod_view(pend[i]);
        }
        for (int run = 0; run < 2; run++) {
            uint64_t best = UINT64_MAX;

            for (uint32_t r = 0; r < repeats; r++) {
                struct kp_sched_pool pl = {kp_nodepool_view(np), types.v, types.n};
                struct kp_sched_input in = {0};
                struct kp_sched_plan plan = {0};
                uint64_t t0 = kp_mono_usec(), dt;

                in.pods = pviews;
                in.n_pods = run ? 2 * pods : pods;
                in.nodes = nv;
                in.n_nodes = nodes;
                in.pools = &pl;
                in.n_pools = 1;
                must(kp_sched_solve(&in, &plan));
                dt = kp_mono_usec() - t0;
                if (dt < best)
                    best = dt;
                for (size_t i = 0; i < plan.n_pods; i++)
                    if (plan.pods[i].where == KP_SCHED_FAILED) {
                        fprintf(stderr, "pod %zu failed: %s\n", i, plan.pods[i].error);
                        exit(1);
                    }
                kp_sched_plan_done(&plan);
            }
            per_run[run] = (double)best;
        }
        printf("bound/node=%-4u bound=%-6u solve(%u)=%8.1f ms solve(%u)=%8.1f ms "
               "marginal=%7.1f us/pod\n",
               B, nodes * B, pods, per_run[0] / 1000.0, 2 * pods, per_run[1] / 1000.0,
               (per_run[1] - per_run[0]) / pods);
        for (size_t k = 0; k < (size_t)nodes * B; k++)
            kp_entry_unref(bound[k]);
        for (uint32_t i = 0; i < 2 * pods; i++)
            kp_entry_unref(pend[i]);
        kp_free(nv);
        kp_free(labels);
        kp_free(names);
        kp_free(bound);
        kp_free(bviews);
        kp_free(pend);
        kp_free(pviews);
    }
    kp_instance_types_done(&types);
    kp_entry_unref(np);
    return 0;
}
