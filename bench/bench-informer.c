/* bench-informer: what the informer cache costs, measured against the real kube-apiserver of
 * the test lab (tests/lab/up.sh first; then `build/<preset>/bench/bench-informer`).
 *
 * Creates N realistic pods (default 10000: a Deployment-style pod with two containers, owner
 * reference, labels, the two default tolerations, a node selector, and for one pod in ten an
 * anti-affinity and a topology spread constraint) and M nodes (default 1000, with capacity,
 * allocatable, conditions, addresses, labels, taints), then starts an informer on each kind and
 * reports, per kind:
 *   - cache bytes per object (sum of entry allocations / objects),
 *   - resident memory growth per object (RSS after sync minus before, / objects),
 *   - list decode throughput (objects/s and MiB/s of JSON from LIST to synced store),
 *   - watch apply throughput for a burst of label patches (events/s).
 * Pods use an unknown schedulerName and nodes are cordoned, so the control plane leaves them
 * alone. Everything created is deleted at the end.
 *
 * Options: -p pods, -n nodes, -w writer threads (default 4), -k keep objects. */
#include <errno.h>
#include <malloc.h>
#include <sys/resource.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kp-lab.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/obj-node.h"
#include "k8s/obj-pod.h"
#include "k8s/status.h"

static struct kp_lab lab;
static char ns[64];
static unsigned npods = 10000, nnodes = 1000, nwriters = 4;
static atomic_uint next_item;
static atomic_ullong json_bytes;

static char owner_uid[64];

/* CPU seconds (user + system) this process has used. */
static double cpu_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static long rss_kib(void)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/status", "re");
    long kib = -1;

    if (!f)
        return -1;
    while (fgets(buf, sizeof(buf), f))
        if (strncmp(buf, "VmRSS:", 6) == 0)
            kib = strtol(buf + 6, NULL, 10);
    fclose(f);
    return kib;
}

static json_t *make_pod(unsigned i)
{
    unsigned app = i % 50;
    bool fancy = i % 10 == 0;

    return kp_lab_json(
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"app%u-7d4b9c8f6d-%05u\","
        "\"labels\":{\"app\":\"app%u\",\"pod-template-hash\":\"7d4b9c8f6d\",\"team\":\"t%u\"},"
        "\"annotations\":{\"kubectl.kubernetes.io/restartedAt\":\"2026-11-29T10:00:00Z\"},"
        "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":"
        "\"kp-bench-owner\",\"uid\":\"%s\",\"controller\":true,"
        "\"blockOwnerDeletion\":true}]},"
        "\"spec\":{\"schedulerName\":\"kp-bench-nobody\",\"nodeSelector\":{\"kubernetes.io/os\":"
        "\"linux\"},\"containers\":[{\"name\":\"app\",\"image\":\"registry.example/app%u:1.2.3\","
        "\"ports\":[{\"containerPort\":8080}],\"env\":[{\"name\":\"MODE\",\"value\":\"prod\"}],"
        "\"resources\":{\"requests\":{\"cpu\":\"250m\",\"memory\":\"256Mi\"},\"limits\":{\"cpu\":"
        "\"1\",\"memory\":\"512Mi\"}},\"readinessProbe\":{\"httpGet\":{\"path\":\"/healthz\","
        "\"port\":8080}}},{\"name\":\"sidecar\",\"image\":\"registry.example/proxy:2\","
        "\"resources\":{\"requests\":{\"cpu\":\"50m\",\"memory\":\"64Mi\"}}}],"
        "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\","
        "\"effect\":\"NoExecute\",\"tolerationSeconds\":300},{\"key\":"
        "\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
        "\"tolerationSeconds\":300}]%s}}",
        app, i, app, app % 7, owner_uid, app,
        fancy ? ",\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
                "Execution\":[{\"labelSelector\":{\"matchLabels\":{\"app\":\"x\"}},\"topologyKey"
                "\":\"kubernetes.io/hostname\"}]}},\"topologySpreadConstraints\":[{\"maxSkew\":1,"
                "\"topologyKey\":\"topology.kubernetes.io/zone\",\"whenUnsatisfiable\":"
                "\"ScheduleAnyway\",\"labelSelector\":{\"matchLabels\":{\"app\":\"x\"}}}]"
              : "");
}

static json_t *make_node(unsigned i)
{
    return kp_lab_json(
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"kp-bench-node-%04u\","
        "\"labels\":{\"kubernetes.io/hostname\":\"kp-bench-node-%04u\",\"kubernetes.io/arch\":"
        "\"amd64\",\"kubernetes.io/os\":\"linux\",\"karpenter.sh/nodepool\":\"default\","
        "\"karpenter.sh/capacity-type\":\"on-demand\",\"topology.kubernetes.io/zone\":\"pool\","
        "\"node.kubernetes.io/instance-type\":\"ssh-4c8g\",\"karpenter.kpssh.dev/managed\":"
        "\"true\",\"kp-bench\":\"true\"}},\"spec\":{\"unschedulable\":true,\"providerID\":"
        "\"kpssh://kpssh-system/host-%04u\",\"taints\":[{\"key\":\"kp-bench\",\"effect\":"
        "\"NoSchedule\"}]},\"status\":{\"capacity\":{\"cpu\":\"4\",\"memory\":\"8145440Ki\","
        "\"pods\":\"110\",\"ephemeral-storage\":\"20Gi\"},\"allocatable\":{\"cpu\":\"3800m\","
        "\"memory\":\"7531040Ki\",\"pods\":\"110\",\"ephemeral-storage\":\"18Gi\"},"
        "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\","
        "\"message\":\"kubelet is posting ready status\",\"lastHeartbeatTime\":"
        "\"2026-11-30T08:00:00Z\",\"lastTransitionTime\":\"2026-11-30T08:00:00Z\"},{\"type\":"
        "\"MemoryPressure\",\"status\":\"False\",\"reason\":\"KubeletHasSufficientMemory\","
        "\"lastHeartbeatTime\":\"2026-11-30T08:00:00Z\",\"lastTransitionTime\":"
        "\"2026-11-30T08:00:00Z\"}],\"addresses\":[{\"type\":\"InternalIP\",\"address\":"
        "\"10.%u.%u.%u\"},{\"type\":\"Hostname\",\"address\":\"kp-bench-node-%04u\"}],"
        "\"nodeInfo\":{\"kubeletVersion\":\"v1.36.3\",\"architecture\":\"amd64\","
        "\"operatingSystem\":\"linux\"}}}",
        i, i, i, 100 + i / 65536, (i / 256) % 256, i % 256, i);
}

struct job {
    bool nodes;
    unsigned count;
};

static void *writer(void *arg)
{
    const struct job *j = arg;
    struct kp_client *c = kp_lab_admin_client(&lab);

    for (;;) {
        unsigned i = atomic_fetch_add(&next_item, 1);
        struct kp_error e = KP_ERROR_INIT;
        json_t *obj;
        int r;

        if (i >= j->count)
            break;
        obj = j->nodes ? make_node(i) : make_pod(i);
        r = j->nodes ? kp_client_create(c, &KP_RES_NODE, NULL, obj, NULL, &e)
                     : kp_client_create(c, &KP_RES_POD, ns, obj, NULL, &e);
        if (r < 0 && r != -EEXIST) {
            fprintf(stderr, "create failed: %s: %s\n", kp_strerror(r), e.message ? e.message : "");
            exit(1);
        }
        kp_error_done(&e);
        kp_json_unref(obj);
    }
    kp_client_free(c);
    return NULL;
}

static void create_all(bool nodes, unsigned count)
{
    pthread_t t[16];
    struct job j = {.nodes = nodes, .count = count};
    uint64_t t0 = kp_mono_usec();

    atomic_store(&next_item, 0);
    for (unsigned i = 0; i < nwriters; i++)
        pthread_create(&t[i], NULL, writer, &j);
    for (unsigned i = 0; i < nwriters; i++)
        pthread_join(t[i], NULL);
    printf("created %u %s in %.1f s\n", count, nodes ? "nodes" : "pods",
           (double)(kp_mono_usec() - t0) / 1e6);
}

/* Sums the JSON size of a list, to report decode throughput in bytes. */
static int measure_page(const struct kp_list_page *pg, void *userdata)
{
    struct kp_buf b = KP_BUF_INIT(64u << 20);

    (void)userdata;
    if (kp_json_dump(pg->items, 0, &b) == 0)
        atomic_fetch_add(&json_bytes, b.len);
    kp_buf_done(&b);
    return 0;
}

static void measure(const char *what, const struct kp_resource *res, kp_project_fn project,
                    const char *where, const char *selector, unsigned expect)
{
    struct kp_client *c = kp_lab_admin_client(&lab);
    struct kp_informer_opts io = {
        .res = res, .project = project, .ns = where, .label_selector = selector};
    struct kp_informer *inf = NULL;
    struct kp_informer_stats st;
    long before, after;
    uint64_t t0, dt;
    double cpu0, cpu;
    size_t n, bytes;

    atomic_store(&json_bytes, 0);
    if (kp_client_list(c, res, where, &(struct kp_list_opts){.label_selector = selector},
                       measure_page, NULL, NULL, NULL) < 0) {
        fprintf(stderr, "list failed\n");
        exit(1);
    }
    malloc_trim(0);
    before = rss_kib();
    cpu0 = cpu_seconds();
    t0 = kp_mono_usec();
    if (kp_informer_new(c, &io, &inf) < 0 || kp_informer_start(inf) < 0 ||
        kp_informer_wait_synced(inf, 600 * KP_USEC_PER_SEC) < 0) {
        fprintf(stderr, "informer did not sync\n");
        exit(1);
    }
    dt = kp_mono_usec() - t0;
    cpu = cpu_seconds() - cpu0;
    /* Steady state: what the cache holds once the transient page trees are returned. */
    malloc_trim(0);
    after = rss_kib();
    n = kp_store_len(kp_informer_store(inf));
    bytes = kp_store_bytes(kp_informer_store(inf));
    kp_informer_get_stats(inf, &st);
    printf("%-5s objects=%zu (expected %u) bad=%llu\n", what, n, expect,
           (unsigned long long)st.bad_objects);
    printf("%-5s cache bytes per object: %.0f\n", what, n ? (double)bytes / (double)n : 0.0);
    printf("%-5s JSON bytes per object as listed: %.0f\n", what,
           n ? (double)atomic_load(&json_bytes) / (double)n : 0.0);
    printf("%-5s RSS growth per object: %.0f bytes (RSS %ld -> %ld KiB)\n", what,
           n ? (double)(after - before) * 1024.0 / (double)n : 0.0, before, after);
    printf("%-5s list to synced store: %.2f s wall (API server included), %.0f objects/s\n", what,
           (double)dt / 1e6, (double)n / ((double)dt / 1e6));
    printf("%-5s our CPU for it: %.2f s = %.0f objects and %.1f MiB of JSON per CPU-second\n", what,
           cpu, (double)n / cpu, (double)atomic_load(&json_bytes) / 1048576.0 / cpu);

    /* Watch throughput: a burst of label patches, timed until every event is applied. */
    if (res == &KP_RES_POD) {
        unsigned burst = npods < 2000 ? npods : 2000;
        uint64_t events0 = st.events;

        t0 = kp_mono_usec();
        for (unsigned i = 0; i < burst; i++) {
            char name[64];
            json_t *p = kp_lab_json("{\"metadata\":{\"labels\":{\"bench\":\"b%u\"}}}", i);

            snprintf(name, sizeof(name), "app%u-7d4b9c8f6d-%05u", i % 50, i);
            if (kp_client_patch(c, res, ns, name, NULL, KP_PATCH_MERGE, p, NULL, NULL) < 0)
                exit(1);
            kp_json_unref(p);
        }
        do {
            kp_sleep_usec(20000);
            kp_informer_get_stats(inf, &st);
        } while (st.events - events0 < burst && kp_mono_usec() - t0 < 300 * KP_USEC_PER_SEC);
        dt = kp_mono_usec() - t0;
        printf("%-5s watch: %u patches written and applied in %.2f s (%.0f events/s end to end,"
               " bounded by the single writer)\n",
               what, burst, (double)dt / 1e6, burst / ((double)dt / 1e6));
    }
    kp_informer_free(inf);
    kp_client_free(c);
}

int main(int argc, char **argv)
{
    struct kp_client *c;
    bool keep = false;
    int opt;

    while ((opt = getopt(argc, argv, "p:n:w:k")) != -1) {
        switch (opt) {
        case 'p':
            npods = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'n':
            nnodes = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'w':
            nwriters = (unsigned)strtoul(optarg, NULL, 10);
            if (nwriters < 1 || nwriters > 16)
                nwriters = 4;
            break;
        case 'k':
            keep = true;
            break;
        default:
            fprintf(stderr, "usage: %s [-p pods] [-n nodes] [-w writers] [-k]\n", argv[0]);
            return 2;
        }
    }
    kp_lab_load(&lab);
    c = kp_lab_admin_client(&lab);
    kp_lab_namespace(c, "kp-bench", ns, sizeof(ns));
    {
        /* The pods' owner must exist, or the garbage collector deletes them. */
        json_t *cm = kp_lab_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                                 "{\"name\":\"kp-bench-owner\"}}");
        json_t *got = NULL;
        const char *uid;

        if (kp_client_create(c, &KP_RES_CONFIGMAP, ns, cm, &got, NULL) < 0 ||
            kp_json_path_str(got, "metadata.uid", &uid) < 0 ||
            kp_strscpy(owner_uid, sizeof(owner_uid), uid) < 0) {
            fprintf(stderr, "cannot create the owner ConfigMap\n");
            return 1;
        }
        kp_json_unref(cm);
        kp_json_unref(got);
    }
    create_all(false, npods);
    create_all(true, nnodes);
    measure("pods", &KP_RES_POD, kp_pod_project, ns, NULL, npods);
    measure("nodes", &KP_RES_NODE, kp_node_project, NULL, "kp-bench=true", nnodes);
    if (!keep) {
        struct kp_delete_opts d = {.propagation_policy = "Background"};

        if (kp_client_delete(c, &KP_RES_NAMESPACE, NULL, ns, &d, NULL) < 0)
            fprintf(stderr, "could not delete %s\n", ns);
        for (unsigned i = 0; i < nnodes; i++) {
            char name[64];

            snprintf(name, sizeof(name), "kp-bench-node-%04u", i);
            if (kp_client_delete(c, &KP_RES_NODE, NULL, name, NULL, NULL) < 0)
                fprintf(stderr, "could not delete node %s\n", name);
        }
    }
    kp_client_free(c);
    kp_lab_done(&lab);
    return 0;
}
