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
 * mode's lines end with the digests of its two plans (P and 2P pods).
 *
 * -p PODS (repeatable): the workload of Karpenter's BenchmarkRespectPreferences, or with -i (for
 * every -p) of BenchmarkIgnorePreferences (PREFERENCE_POLICY=Ignore), both
 * makePreferencePods(4000): on the same NodePool and types as -k, PODS identical pods labelled
 * app=nginx whose only constraints are preferences (zone test-zone-1; no other app=nginx pod in
 * the zone, weight 10; none on the host, weight 1) and whose one request is the one Karpenter's
 * seeded stream gives them (p_pod), so these pods are Karpenter's pod for pod. Lines are headed
 * preferences-respect or preferences-ignore, with the fields above.
 *
 * -b: a big existing cluster, kpssh's own case (big_cluster): 1,000 existing nodes of the 400
 * types, sized to 10,000 bound pods of 100 apps (plain, hostname spread, hostname
 * anti-affinity) that the Solve must count, and 2,000 pending pods of the same apps, which go to
 * existing nodes where they fit and to new NodeClaims otherwise (the run fails unless both
 * happen). Target: 100 ms per Solve or less (reported, not gated). One line:
 *   big-cluster nodes=1000 bound=10000 pods=2000 solve_ms=.. pods_per_s=.. nodeclaims=..
 *   on_existing=.. on_new=.. placed=.. price_per_h=.. peak_rss_mib=.. repeats=R digest=..
 * price_per_h counts the new NodeClaims only. -b draws from its own stream (seed 42), so its
 * digest does not depend on the other options. -k, -p and -b may be combined (run in that
 * order); -r applies to each. */
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

/* Karpenter's randomCPU and randomMemory menus. */
static const unsigned k_cpu_m[] = {100, 250, 500, 1000, 1500};
static const unsigned k_mem_mi[] = {100, 256, 512, 1024, 2048, 4096};

enum k_kind { K_PLAIN, K_SPREAD_ZONE, K_SPREAD_HOST, K_AFFINITY_ZONE, K_ANTI_HOST };

/* Karpenter's makeDiversePods builders: makeGenericPods, makeTopologySpreadPods (zone, hostname),
 * makePodAffinityPods (zone) and makePodAntiAffinityPods (hostname), one pod of the given kind. */
static struct kp_entry *k_pod(unsigned i, enum k_kind kind)
{
    static const char *const values[] = {"a", "b", "c", "d", "e", "f", "g"};
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
                      i, i, key, value, extra, k_cpu_m[k_draw(5)], k_mem_mi[k_draw(6)]) < 0 ||
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

/* The NodePool of Karpenter's setupScheduler: test.NodePool with cpu and memory limits far out
 * of reach. */
static const char k_np_json[] =
    "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{\"name\":"
    "\"default\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{\"limits\":{\"cpu\":"
    "\"10000000\",\"memory\":\"10000000Gi\"},\"template\":{\"spec\":{\"nodeClassRef\":{"
    "\"group\":\"g\",\"kind\":\"K\",\"name\":\"default\"}}}}}";

/* Solves one workload of Karpenter's kind (-k, -p, -b) repeats times over the same pods and
 * existing nodes, with that NodePool offering types, and prints its line (the top comment),
 * headed by label. Exits when a pod did not place, as Karpenter's benchmark fails on any
 * PodError. *ret_on_existing (optional) gets the first Solve's placements on existing nodes. */
static void k_solve(const char *label, const struct kp_pod_view *const *views, uint32_t n,
                    const struct kp_sched_node *nodes, size_t n_nodes,
                    const struct kp_instance_types *types, bool ignore_prefs, uint32_t repeats,
                    size_t *ret_on_existing)
{
    struct kp_entry *np = NULL;
    uint64_t total = 0, digest = 0;
    size_t claims = 0, placed = 0, on_existing = 0;
    int64_t price = 0;
    struct rusage ru;
    double ms;

    must(kp_nodepool_decode(k_np_json, sizeof(k_np_json) - 1, &np));
    for (uint32_t r = 0; r < repeats; r++) {
        struct kp_sched_pool pl = {kp_nodepool_view(np), types->v, types->n};
        struct kp_sched_input in = {0};
        struct kp_sched_plan plan = {0};
        uint64_t t0 = kp_mono_usec();

        in.pods = views;
        in.n_pods = n;
        in.nodes = nodes;
        in.n_nodes = n_nodes;
        in.pools = &pl;
        in.n_pools = 1;
        in.ignore_preferences = ignore_prefs;
        must(kp_sched_solve(&in, &plan));
        total += kp_mono_usec() - t0;
        if (r == 0) {
            digest = plan_digest(&plan);
            for (size_t i = 0; i < plan.n_pods; i++) {
                placed += plan.pods[i].where != KP_SCHED_FAILED;
                on_existing += plan.pods[i].where == KP_SCHED_NODE;
            }
            claims = plan.n_claims;
            for (size_t c = 0; c < plan.n_claims; c++)
                if (plan.claims[c].n_types)
                    price += kp_instance_type_price(plan.claims[c].types[0]);
        }
        kp_sched_plan_done(&plan);
    }
    getrusage(RUSAGE_SELF, &ru);
    ms = (double)total / repeats / 1000.0;
    printf("%s pods=%u solve_ms=%.3f pods_per_s=%.0f nodeclaims=%zu ", label, n, ms,
           ms > 0 ? n / (ms / 1000.0) : 0.0, claims);
    if (n_nodes)
        printf("on_existing=%zu on_new=%zu ", on_existing, placed - on_existing);
    printf("placed=%zu price_per_h=%.2f peak_rss_mib=%.1f repeats=%u digest=%016llx\n", placed,
           (double)price / 1e6, (double)ru.ru_maxrss / 1024.0, repeats, (unsigned long long)digest);
    if (placed != n) {
        fprintf(stderr, "bench-scheduler: %s: %zu of %u pods did not place\n", label, n - placed,
                n);
        exit(1);
    }
    if (ret_on_existing)
        *ret_on_existing = on_existing;
    kp_entry_unref(np);
}

static void free_pods(struct kp_entry **pods, const struct kp_pod_view **views, size_t n)
{
    for (size_t i = 0; i < n; i++)
        kp_entry_unref(pods[i]);
    kp_free(pods);
    kp_free(views);
}

/* -k: Karpenter's makeDiversePods(n), a fifth of each kind, the remainder plain. */
static void karpenter_workload(uint32_t n, uint32_t repeats)
{
    struct kp_instance_types types = {0};
    struct kp_entry **pods = kp_calloc(n, sizeof(*pods));
    const struct kp_pod_view **views = kp_calloc(n, sizeof(*views));
    uint32_t per = n / 5, at = 0;

    if (!pods || !views)
        must(-ENOMEM);
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
    k_solve("karpenter-workload", views, n, /* nodes= */ NULL, 0, &types,
            /* ignore_prefs= */ false, repeats, /* ret_on_existing= */ NULL);
    free_pods(pods, views, n);
    kp_instance_types_done(&types);
}

/* -p: Karpenter's makePreferencePods(n), which its BenchmarkRespectPreferences and (with -i,
 * PREFERENCE_POLICY=Ignore) BenchmarkIgnorePreferences solve at n = 4000. Every pod is labelled
 * app=nginx and has only preferences: zone test-zone-1 (node affinity, weight 1), no other
 * app=nginx pod in its zone (anti-affinity, weight 10; only three pods can have that) and none
 * on its host (anti-affinity, weight 1). Respect tries each pod with its preferences required and
 * drops them one failed attempt at a time in Karpenter's order; Ignore drops them all.
 *
 * test.Pods builds every pod from one PodOptions value, whose randomCPU() and randomMemory()
 * ran once: all pods share one request. In a process that runs only this benchmark (the script
 * runs each in its own), Go's math/rand seeded 42 draws menu entries 0 and 5 first, 100m and
 * 4096Mi. We take that draw instead of one from our stream: it alone decides the workload
 * (Ignore plans about 20 NodeClaims for 4,000 pods of 100m and 4096Mi; pods of 100m and 100Mi
 * would fit on two), and so both sides place the very same pods. */
static struct kp_entry *p_pod(unsigned i)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    struct kp_entry *e = NULL;

    if (kp_buf_printf(
            &b,
            "{\"metadata\":{\"name\":\"p%u\",\"namespace\":\"default\",\"uid\":\"pu%u\","
            "\"resourceVersion\":\"1\",\"labels\":{\"app\":\"nginx\"}},\"spec\":{\"affinity\":{"
            "\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":1,"
            "\"preference\":{\"matchExpressions\":[{\"key\":\"%s\",\"operator\":\"In\","
            "\"values\":[\"test-zone-1\"]}]}}]},\"podAntiAffinity\":{"
            "\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":10,"
            "\"podAffinityTerm\":{\"topologyKey\":\"%s\",\"labelSelector\":{\"matchLabels\":{"
            "\"app\":\"nginx\"}}}},{\"weight\":1,\"podAffinityTerm\":{\"topologyKey\":\"%s\","
            "\"labelSelector\":{\"matchLabels\":{\"app\":\"nginx\"}}}}]}},\"containers\":[{"
            "\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"%um\",\"memory\":\"%uMi\"}}}]},"
            "\"status\":{\"phase\":\"Pending\"}}",
            i, i, KP_LABEL_ZONE, KP_LABEL_ZONE, KP_LABEL_HOSTNAME, k_cpu_m[0], k_mem_mi[5]) < 0 ||
        kp_pod_decode(b.data, b.len, &e) < 0) {
        fprintf(stderr, "pod does not decode\n");
        exit(1);
    }
    kp_buf_done(&b);
    return e;
}

static void preference_workload(uint32_t n, bool ignore_prefs, uint32_t repeats)
{
    struct kp_instance_types types = {0};
    struct kp_entry **pods = kp_calloc(n, sizeof(*pods));
    const struct kp_pod_view **views = kp_calloc(n, sizeof(*views));

    if (!pods || !views)
        must(-ENOMEM);
    k_types(&types);
    for (uint32_t i = 0; i < n; i++) {
        pods[i] = p_pod(i);
        views[i] = kp_pod_view(pods[i]);
    }
    k_solve(ignore_prefs ? "preferences-ignore" : "preferences-respect", views, n,
            /* nodes= */ NULL, 0, &types, ignore_prefs, repeats, /* ret_on_existing= */ NULL);
    free_pods(pods, views, n);
    kp_instance_types_done(&types);
}

/* -b: a big existing cluster, kpssh's own case (Karpenter has no such benchmark), built from
 * the rules of Karpenter's benchmark pods: B_APPS apps ("Deployments"), each with one request
 * drawn from Karpenter's menus; app a is plain when a % 3 is 0, has a hostname topology spread
 * (maxSkew 1, DoNotSchedule) over its own pods when 1, and a required hostname anti-affinity to
 * its own pods when 2. B_NODES existing nodes of the 400 fake types, in their three zones, hold
 * B_PER_NODE bound pods each: slot j of node n runs app (n + 11j) % B_APPS, so a node holds ten
 * different apps and each app runs once on a hundred nodes, meeting every spread and
 * anti-affinity. A node is the smallest type that fits its pods, as Karpenter sizes a
 * NodeClaim, so its headroom is what rounding up to a type left. B_PENDING pending pods are
 * twenty more replicas of each app; about five in six fit in that headroom. The Solve has to
 * count the bound pods in every spread and anti-affinity (inverse ones included), put pending
 * pods on existing nodes where they fit and their app allows, and the rest on new NodeClaims;
 * the run fails unless both happen. */
#define B_APPS 100u
#define B_NODES 1000u
#define B_PER_NODE 10u
#define B_PENDING 2000u

static struct kp_entry *b_pod(unsigned i, unsigned app, unsigned cpu_m, unsigned mem_mi,
                              const char *node)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    struct kp_entry *e = NULL;
    char extra[512] = "";

    if (app % 3 == 1)
        (void)snprintf(extra, sizeof(extra),
                       "\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"%s\","
                       "\"whenUnsatisfiable\":\"DoNotSchedule\",\"labelSelector\":{"
                       "\"matchLabels\":{\"app\":\"app-%02u\"}}}],",
                       KP_LABEL_HOSTNAME, app);
    else if (app % 3 == 2)
        (void)snprintf(extra, sizeof(extra),
                       "\"affinity\":{\"podAntiAffinity\":{"
                       "\"requiredDuringSchedulingIgnoredDuringExecution\":[{\"topologyKey\":"
                       "\"%s\",\"labelSelector\":{\"matchLabels\":{\"app\":\"app-%02u\"}}}]}},",
                       KP_LABEL_HOSTNAME, app);
    if (kp_buf_printf(&b,
                      "{\"metadata\":{\"name\":\"%c%u\",\"namespace\":\"default\",\"uid\":"
                      "\"%cu%u\",\"resourceVersion\":\"1\",\"labels\":{\"app\":\"app-%02u\"}},"
                      "\"spec\":{%s%s%s%s\"containers\":[{\"name\":\"c\",\"resources\":{"
                      "\"requests\":{\"cpu\":\"%um\",\"memory\":\"%uMi\"}}}]},\"status\":{"
                      "\"phase\":\"%s\"}}",
                      node ? 'b' : 'q', i, node ? 'b' : 'q', i, app, extra,
                      node ? "\"nodeName\":\"" : "", node ? node : "", node ? "\"," : "", cpu_m,
                      mem_mi, node ? "Running" : "Pending") < 0 ||
        kp_pod_decode(b.data, b.len, &e) < 0) {
        fprintf(stderr, "pod does not decode\n");
        exit(1);
    }
    kp_buf_done(&b);
    return e;
}

static void big_cluster(uint32_t repeats)
{
    static const char *const res[] = {"cpu", "memory", "pods"};
    struct kp_instance_types types = {0};
    struct kp_sched_node *nodes = kp_calloc(B_NODES, sizeof(*nodes));
    struct kp_label(*labels)[7] = kp_calloc(B_NODES, sizeof(*labels));
    struct kp_res(*alloc)[3] = kp_calloc(B_NODES, sizeof(*alloc));
    struct kp_res(*cap)[3] = kp_calloc(B_NODES, sizeof(*cap));
    char(*names)[16] = kp_calloc(B_NODES, sizeof(*names));
    struct kp_entry **bound = kp_calloc((size_t)B_NODES * B_PER_NODE, sizeof(*bound));
    const struct kp_pod_view **bviews = kp_calloc((size_t)B_NODES * B_PER_NODE, sizeof(*bviews));
    struct kp_entry **pend = kp_calloc(B_PENDING, sizeof(*pend));
    const struct kp_pod_view **pviews = kp_calloc(B_PENDING, sizeof(*pviews));
    unsigned cpu_m[B_APPS], mem_mi[B_APPS];
    uint64_t saved_rng = k_rng;
    size_t on_existing = 0;
    char label[64];

    if (!nodes || !labels || !alloc || !cap || !names || !bound || !bviews || !pend || !pviews)
        must(-ENOMEM);
    /* Its own stream from the seed, so that its digest does not depend on the -k before it. */
    k_rng = 42;
    k_types(&types);
    for (unsigned a = 0; a < B_APPS; a++) {
        cpu_m[a] = k_cpu_m[k_draw(5)];
        mem_mi[a] = k_mem_mi[k_draw(6)];
    }
    for (unsigned n = 0; n < B_NODES; n++) {
        int64_t need[3] = {0, 0, (int64_t)B_PER_NODE * 1000};
        const struct kp_instance_type *it = NULL;
        size_t t = 0;

        (void)snprintf(names[n], sizeof(names[n]), "node-%04u", n);
        for (unsigned j = 0; j < B_PER_NODE; j++) {
            unsigned app = (n + 11 * j) % B_APPS;
            size_t k = (size_t)n * B_PER_NODE + j;

            need[0] += cpu_m[app];
            need[1] += (int64_t)mem_mi[app] * (1 << 20) * 1000;
            bound[k] = b_pod((unsigned)k, app, cpu_m[app], mem_mi[app], names[n]);
            bviews[k] = kp_pod_view(bound[k]);
        }
        while (t < types.n && (kp_instance_type_allocatable(&types.v[t], res[0]) < need[0] ||
                               kp_instance_type_allocatable(&types.v[t], res[1]) < need[1] ||
                               kp_instance_type_allocatable(&types.v[t], res[2]) < need[2]))
            t++;
        if (t == types.n)
            must(-ERANGE);
        it = &types.v[t];
        for (size_t r = 0; r < 3; r++) {
            alloc[n][r] = (struct kp_res){res[r], kp_instance_type_allocatable(it, res[r])};
            cap[n][r] = (struct kp_res){res[r], 0};
            for (size_t c = 0; c < it->n_capacity; c++)
                if (!strcmp(it->capacity[c].name, res[r]))
                    cap[n][r].milli = it->capacity[c].milli;
        }
        /* In key order, as a Node's labels come. */
        labels[n][0] = (struct kp_label){KP_LABEL_CAPACITY_TYPE, "on-demand"};
        labels[n][1] = (struct kp_label){"karpenter.sh/nodepool", "default"};
        labels[n][2] = (struct kp_label){KP_LABEL_ARCH, "amd64"};
        labels[n][3] = (struct kp_label){KP_LABEL_HOSTNAME, names[n]};
        labels[n][4] = (struct kp_label){KP_LABEL_OS, "linux"};
        labels[n][5] = (struct kp_label){KP_LABEL_INSTANCE_TYPE, it->name};
        labels[n][6] = (struct kp_label){KP_LABEL_ZONE, n % 3 == 0   ? "test-zone-1"
                                                        : n % 3 == 1 ? "test-zone-2"
                                                                     : "test-zone-3"};
        nodes[n].name = names[n];
        nodes[n].nodepool = "default";
        nodes[n].initialized = true;
        nodes[n].labels.v = labels[n];
        nodes[n].labels.n = 7;
        nodes[n].allocatable.v = alloc[n];
        nodes[n].allocatable.n = 3;
        nodes[n].capacity.v = cap[n];
        nodes[n].capacity.n = 3;
        nodes[n].pods = &bviews[(size_t)n * B_PER_NODE];
        nodes[n].n_pods = B_PER_NODE;
    }
    for (unsigned i = 0; i < B_PENDING; i++) {
        pend[i] = b_pod(i, i % B_APPS, cpu_m[i % B_APPS], mem_mi[i % B_APPS], /* node= */ NULL);
        pviews[i] = kp_pod_view(pend[i]);
    }
    k_rng = saved_rng;
    (void)snprintf(label, sizeof(label), "big-cluster nodes=%u bound=%u", B_NODES,
                   B_NODES * B_PER_NODE);
    k_solve(label, pviews, B_PENDING, nodes, B_NODES, &types, /* ignore_prefs= */ false, repeats,
            &on_existing);
    if (on_existing == 0 || on_existing == B_PENDING) {
        fprintf(stderr,
                "bench-scheduler: big-cluster: %s pending pods went to existing nodes; "
                "the workload is meant to need both existing nodes and new NodeClaims\n",
                on_existing ? "all" : "no");
        exit(1);
    }
    free_pods(bound, bviews, (size_t)B_NODES * B_PER_NODE);
    free_pods(pend, pviews, B_PENDING);
    kp_free(nodes);
    kp_free(labels);
    kp_free(alloc);
    kp_free(cap);
    kp_free(names);
    kp_instance_types_done(&types);
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
    uint32_t k_sizes[16], n_k = 0, p_sizes[16], n_p = 0, one = 0;
    bool repeats_set = false, ignore_prefs = false, big = false;
    int opt;

    while ((opt = getopt(argc, argv, "N:P:T:r:k:p:ib")) != -1) {
        uint32_t *to = opt == 'N'   ? &nodes
                       : opt == 'P' ? &pods
                       : opt == 'T' ? &ntypes
                       : opt == 'r' ? &repeats
                       : opt == 'k' ? &one
                       : opt == 'p' ? &one
                                    : NULL;
        uint32_t *sizes = opt == 'k' ? k_sizes : p_sizes, *n_sizes = opt == 'k' ? &n_k : &n_p;

        if (opt == 'i' || opt == 'b') {
            ignore_prefs |= opt == 'i';
            big |= opt == 'b';
            continue;
        }
        if (!to || kp_safe_atou32(optarg, to) < 0 || *to == 0)
            return 2;
        repeats_set |= opt == 'r';
        if (opt == 'k' || opt == 'p') {
            if (*n_sizes == sizeof(k_sizes) / sizeof(k_sizes[0]))
                return 2;
            sizes[(*n_sizes)++] = one;
        }
    }
    if (ignore_prefs && !n_p)
        return 2;
    if (n_k || n_p || big) {
        for (uint32_t i = 0; i < n_k; i++)
            karpenter_workload(k_sizes[i], repeats_set ? repeats : 1);
        for (uint32_t i = 0; i < n_p; i++)
            preference_workload(p_sizes[i], ignore_prefs, repeats_set ? repeats : 1);
        if (big)
            big_cluster(repeats_set ? repeats : 1);
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
