/* bench-scheduler: what kp_sched_solve (core/provisioning/scheduler.h) costs.
 *
 * Default mode: the cost per pending pod, and whether that grows with the pods already bound. N
 * existing nodes (default 100, three zones) are full, each holding B bound pods of the same app
 * (default 0, 10 and 100 per node); P pending pods (default 200 and 400) of that app, each with a
 * zone spread and a hostname anti-affinity to its own kind, go to new NodeClaims from one NodePool
 * with T instance types (default 20). For each B the marginal cost per pod is
 * (time(2P) - time(P)) / P: the set-up that counts bound pods once is in both runs and cancels
 * out. A scheduler that rescanned bound pods per placement would show a marginal cost growing
 * with B. Options: -N nodes, -P pods, -T types, -r repeats (default 3).
 *
 * -k PODS (repeatable): the workload of Karpenter's own BenchmarkScheduling<PODS>
 * (pkg/controllers/provisioning/scheduling, build tag test_performance), rebuilt here from its
 * rules so that scripts/bench-scheduler.sh can put both side by side: no existing nodes, one
 * NodePool with limits far out of reach, 400 instance types shaped like Karpenter's fake provider
 * (type i: i+1 CPUs, 2(i+1) GiB, 10(i+1) pods, kube-reserved 100m and 10Mi, spot in two zones and
 * on-demand in three, all at 0.1 per CPU plus 0.1 per GB), and PODS pods in five equal kinds
 * (plain, zone spread, hostname spread, zone self-affinity, hostname anti-affinity; the remainder
 * plain) with requests drawn from the same CPU and memory menus and labels from the same seven
 * values. The draws come from our own seeded generator, not Go's math/rand, so the pods are the
 * same in distribution, not one by one: node counts may differ by a few. Each size solves -r
 * times (default 1, as -benchtime 1x) over the same decoded pods; the time per Solve is the mean
 * and covers everything kp_sched_solve does (Karpenter's figure leaves out its NewTopology and
 * NewScheduler set-up). One line per size:
 *   karpenter-workload pods=P solve_ms=.. pods_per_s=.. nodeclaims=.. placed=.. price_per_h=..
 *   peak_rss_mib=.. repeats=R digest=..
 * price_per_h is the sum over NodeClaims of their cheapest option's price; peak RSS is the
 * process's so far (run one size per process to read it per size). digest is an FNV-1a hash of
 * the whole plan (plan_digest): a scheduler change meant to keep plans must keep it. Each -k
 * continues one random stream, so compare digests of runs given the same -k list. The default
 * mode's lines end with the digests of its two plans (P and 2P pods). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

/* FNV-1a 64 over everything a plan says: each claim's pool, requirements (every field of every
 * key), options, requests, pods and min_values_relaxed, then each pod's placement, relaxation
 * count and reason. Two solves of one input must print the same digest; a change to the
 * scheduler that moves any of it shows here. */
static void fnv(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * 0x100000001b3ull;
}

static void fnv_str(uint64_t *h, const char *s)
{
    fnv(h, s ? s : "(null)", strlen(s ? s : "(null)") + 1);
}

static void fnv_u64(uint64_t *h, uint64_t v)
{
    fnv(h, &v, sizeof(v));
}

static uint64_t plan_digest(const struct kp_sched_plan *plan)
{
    uint64_t h = 0xcbf29ce484222325ull;

    fnv_u64(&h, plan->n_claims);
    for (size_t c = 0; c < plan->n_claims; c++) {
        const struct kp_sched_claim *cl = &plan->claims[c];

        fnv_u64(&h, cl->pool);
        fnv_u64(&h, cl->reqs.n);
        for (size_t k = 0; k < cl->reqs.n; k++) {
            const struct kp_req *r = &cl->reqs.v[k];

            fnv_str(&h, r->key);
            fnv_u64(&h, r->complement);
            fnv_u64(&h, r->n_values);
            for (size_t v = 0; v < r->n_values; v++)
                fnv_str(&h, r->values[v]);
            fnv_u64(&h, r->has_min);
            fnv_u64(&h, r->has_max);
            fnv_u64(&h, (uint64_t)r->min);
            fnv_u64(&h, (uint64_t)r->max);
            fnv_u64(&h, r->min_values);
        }
        fnv_u64(&h, cl->n_types);
        for (size_t t = 0; t < cl->n_types; t++)
            fnv_str(&h, cl->types[t]->name);
        fnv_u64(&h, cl->n_requests);
        for (size_t q = 0; q < cl->n_requests; q++) {
            fnv_str(&h, cl->requests[q].name);
            fnv_u64(&h, (uint64_t)cl->requests[q].milli);
        }
        fnv_u64(&h, cl->n_pods);
        for (size_t p = 0; p < cl->n_pods; p++)
            fnv_u64(&h, cl->pods[p]);
        fnv_u64(&h, cl->min_values_relaxed);
    }
    fnv_u64(&h, plan->n_pods);
    for (size_t i = 0; i < plan->n_pods; i++) {
        fnv_u64(&h, (uint64_t)plan->pods[i].where);
        fnv_u64(&h, plan->pods[i].index);
        fnv_u64(&h, plan->pods[i].relaxed);
        if (plan->pods[i].error)
            fnv_str(&h, plan->pods[i].error);
    }
    return h;
}

/* Karpenter's workload (-k). A splitmix64 stream: deterministic, seeded like Karpenter's (42). */
static uint64_t k_rng = 42;

static uint32_t k_draw(uint32_t n)
{
    uint64_t z = (k_rng += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) % n);
}

enum k_kind { K_PLAIN, K_SPREAD_ZONE, K_SPREAD_HOST, K_AFFINITY_ZONE, K_ANTI_HOST };

static struct kp_entry *k_pod(unsigned i, enum k_kind kind)
{
    static const char *const values[] = {"a", "b", "c", "d", "e", "f", "g"};
    static const unsigned cpu_m[] = {100, 250, 500, 1000, 1500};
    static const unsigned mem_mi[] = {100, 256, 512, 1024, 2048, 4096};
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    struct kp_entry *e = NULL;
    const char *key = "my-label", *value = "nginx", *sel = NULL;
    char extra[512] = "";

    if (kind == K_AFFINITY_ZONE)
        key = "my-affininity"; /* sic: Karpenter's spelling */
    if (kind == K_ANTI_HOST)
        key = "app";
    else
        value = values[k_draw(7)];
    if (kind == K_SPREAD_ZONE || kind == K_SPREAD_HOST) {
        sel = values[k_draw(7)]; /* a selector drawn apart from the pod's own label */
        (void)snprintf(extra, sizeof(extra),
                       "\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"%s\","
                       "\"whenUnsatisfiable\":\"DoNotSchedule\",\"labelSelector\":{"
                       "\"matchLabels\":{\"my-label\":\"%s\"}}}],",
                       kind == K_SPREAD_ZONE ? KP_LABEL_ZONE : KP_LABEL_HOSTNAME, sel);
    } else if (kind == K_AFFINITY_ZONE || kind == K_ANTI_HOST) {
        (void)snprintf(extra, sizeof(extra),
                       "\"affinity\":{\"%s\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
                       "[{\"topologyKey\":\"%s\",\"labelSelector\":{\"matchLabels\":{\"%s\":"
                       "\"%s\"}}}]}},",
                       kind == K_AFFINITY_ZONE ? "podAffinity" : "podAntiAffinity",
                       kind == K_AFFINITY_ZONE ? KP_LABEL_ZONE : KP_LABEL_HOSTNAME, key, value);
    }
    if (kp_buf_printf(&b,
                      "{\"metadata\":{\"name\":\"k%u\",\"namespace\":\"default\",\"uid\":\"ku%u\","
                      "\"resourceVersion\":\"1\",\"labels\":{\"%s\":\"%s\"}},\"spec\":{%s"
                      "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{"
                      "\"cpu\":\"%um\",\"memory\":\"%uMi\"}}}]},\"status\":{\"phase\":"
                      "\"Pending\"}}",
                      i, i, key, value, extra, cpu_m[k_draw(5)], mem_mi[k_draw(6)]) < 0 ||
        kp_pod_decode(b.data, b.len, &e) < 0) {
        fprintf(stderr, "pod does not decode\n");
        exit(1);
    }
    kp_buf_done(&b);
    return e;
}

/* Karpenter's fake.InstanceTypes(400), as far as the scheduler sees it. */
static void k_types(struct kp_instance_types *types)
{
    static const char *const arch[] = {"amd64"};
    static const char *const os[] = {"darwin", "linux", "windows"};
    static const char *const kzones[] = {"test-zone-1", "test-zone-2", "test-zone-3"};
    static const char *const cts[] = {"on-demand", "spot"};
    static const struct {
        const char *ct, *zone;
    } offers[] = {{"spot", "test-zone-1"},
                  {"spot", "test-zone-2"},
                  {"on-demand", "test-zone-1"},
                  {"on-demand", "test-zone-2"},
                  {"on-demand", "test-zone-3"}};
    const size_t n = 400, n_offers = sizeof(offers) / sizeof(offers[0]);

    types->v = kp_calloc(n, sizeof(*types->v));
    if (!types->v)
        must(-ENOMEM);
    for (size_t i = 0; i < n; i++) {
        struct kp_instance_type *it = &types->v[types->n++];
        int64_t cpus = (int64_t)i + 1, mem = cpus * 2 * ((int64_t)1 << 30);
        bool large = cpus > 4 && mem > 8 * ((int64_t)1 << 30);
        char name[32], integer[24];
        const char *nv = name, *iv = integer, *size = large ? "large" : "small";
        const char *optional = "optional";
        /* 0.1 per CPU plus 0.1 per 1e9 bytes of memory, in micro-units */
        int64_t price = cpus * 100000 + (mem + 5000) / 10000;

        (void)snprintf(name, sizeof(name), "fake-it-%zu", i);
        (void)snprintf(integer, sizeof(integer), "%lld", (long long)cpus);
        if (!(it->name = kp_strdup(name)))
            must(-ENOMEM);
        must(kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, &nv, 1, 0));
        must(kp_reqset_add(&it->reqs, KP_LABEL_ARCH, KP_SEL_IN, arch, 1, 0));
        must(kp_reqset_add(&it->reqs, KP_LABEL_OS, KP_SEL_IN, os, 3, 0));
        must(kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, kzones, 3, 0));
        must(kp_reqset_add(&it->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, cts, 2, 0));
        must(kp_reqset_add(&it->reqs, "size", KP_SEL_IN, &size, 1, 0));
        must(kp_reqset_add(&it->reqs, "special", large ? KP_SEL_IN : KP_SEL_DOES_NOT_EXIST,
                           &optional, large ? 1 : 0, 0));
        must(kp_reqset_add(&it->reqs, "integer", KP_SEL_IN, &iv, 1, 0));
        must(kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", cpus * 1000));
        must(kp_provider_res_add(&it->capacity, &it->n_capacity, "memory", mem * 1000));
        must(kp_provider_res_add(&it->capacity, &it->n_capacity, "pods", cpus * 10 * 1000));
        must(kp_provider_res_add(&it->overhead, &it->n_overhead, "cpu", 100));
        must(kp_provider_res_add(&it->overhead, &it->n_overhead, "memory",
                                 (int64_t)10 * (1 << 20) * 1000));
        it->offerings = kp_calloc(n_offers, sizeof(*it->offerings));
        if (!it->offerings)
            must(-ENOMEM);
        for (size_t o = 0; o < n_offers; o++) {
            struct kp_offering *of = &it->offerings[it->n_offerings++];

            must(kp_reqset_add(&of->reqs, KP_LABEL_ZONE, KP_SEL_IN, &offers[o].zone, 1, 0));
            must(kp_reqset_add(&of->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &offers[o].ct, 1, 0));
            of->price_micro_usd = price;
            of->available = true;
        }
    }
}

static void karpenter_workload(uint32_t n, uint32_t repeats)
{
    static const char np_json[] =
        "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{\"name\":"
        "\"default\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{\"limits\":{\"cpu\":"
        "\"10000000\",\"memory\":\"10000000Gi\"},\"template\":{\"spec\":{\"nodeClassRef\":{"
        "\"group\":\"g\",\"kind\":\"K\",\"name\":\"default\"}}}}}";
    struct kp_instance_types types = {0};
    struct kp_entry *np = NULL, **pods = kp_calloc(n, sizeof(*pods));
    const struct kp_pod_view **views = kp_calloc(n, sizeof(*views));
    uint32_t per = n / 5, at = 0;
    uint64_t total = 0, digest = 0;
    size_t claims = 0, placed = 0;
    int64_t price = 0;
    struct rusage ru;

    if (!pods || !views)
        must(-ENOMEM);
    must(kp_nodepool_decode(np_json, sizeof(np_json) - 1, &np));
    k_types(&types);
    for (int kind = K_PLAIN; kind <= K_ANTI_HOST; kind++)
        for (uint32_t j = 0; j < per; j++, at++)
            pods[at] = k_pod(at, (enum k_kind)kind);
    while (at < n) {
        pods[at] = k_pod(at, K_PLAIN);
        at++;
    }
    for (uint32_t i = 0; i < n; i++)
        views[i] = kp_pod_view(pods[i]);
    for (uint32_t r = 0; r < repeats; r++) {
        struct kp_sched_pool pl = {kp_nodepool_view(np), types.v, types.n};
        struct kp_sched_input in = {0};
        struct kp_sched_plan plan = {0};
        uint64_t t0 = kp_mono_usec();

        in.pods = views;
        in.n_pods = n;
        in.pools = &pl;
        in.n_pools = 1;
        must(kp_sched_solve(&in, &plan));
        total += kp_mono_usec() - t0;
        if (r == 0) {
            digest = plan_digest(&plan);
            for (size_t i = 0; i < plan.n_pods; i++)
                placed += plan.pods[i].where != KP_SCHED_FAILED;
            claims = plan.n_claims;
            for (size_t c = 0; c < plan.n_claims; c++)
                if (plan.claims[c].n_types)
                    price += kp_instance_type_price(plan.claims[c].types[0]);
        }
        kp_sched_plan_done(&plan);
    }
    getrusage(RUSAGE_SELF, &ru);
    {
        double ms = (double)total / repeats / 1000.0;

        printf("karpenter-workload pods=%u solve_ms=%.3f pods_per_s=%.0f nodeclaims=%zu "
               "placed=%zu price_per_h=%.2f peak_rss_mib=%.1f repeats=%u digest=%016llx\n",
               n, ms, ms > 0 ? n / (ms / 1000.0) : 0.0, claims, placed, (double)price / 1e6,
               (double)ru.ru_maxrss / 1024.0, repeats, (unsigned long long)digest);
    }
    if (placed != n) {
        fprintf(stderr, "bench-scheduler: %zu of %u pods did not place\n", n - placed, n);
        exit(1);
    }
    for (uint32_t i = 0; i < n; i++)
        kp_entry_unref(pods[i]);
    kp_free(pods);
    kp_free(views);
    kp_instance_types_done(&types);
    kp_entry_unref(np);
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
    uint32_t k_sizes[16], n_k = 0, k_one = 0;
    bool repeats_set = false;
    int opt;

    while ((opt = getopt(argc, argv, "N:P:T:r:k:")) != -1) {
        uint32_t *to = opt == 'N'   ? &nodes
                       : opt == 'P' ? &pods
                       : opt == 'T' ? &ntypes
                       : opt == 'r' ? &repeats
                       : opt == 'k' ? &k_one
                                    : NULL;

        if (!to || kp_safe_atou32(optarg, to) < 0 || *to == 0)
            return 2;
        repeats_set |= opt == 'r';
        if (opt == 'k') {
            if (n_k == sizeof(k_sizes) / sizeof(k_sizes[0]))
                return 2;
            k_sizes[n_k++] = k_one;
        }
    }
    if (n_k) {
        for (uint32_t i = 0; i < n_k; i++)
            karpenter_workload(k_sizes[i], repeats_set ? repeats : 1);
        return 0;
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
        uint64_t digest[2] = {0, 0};

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
                if (r == 0)
                    digest[run] = plan_digest(&plan);
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
               "marginal=%7.1f us/pod digest=%016llx/%016llx\n",
               B, nodes * B, pods, per_run[0] / 1000.0, 2 * pods, per_run[1] / 1000.0,
               (per_run[1] - per_run[0]) / pods, (unsigned long long)digest[0],
               (unsigned long long)digest[1]);
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
