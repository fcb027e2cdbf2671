/* bench-informer: what the informer cache costs, measured against the real kube-apiserver of
 * the test lab (tests/lab/up.sh first; then `build/<preset>/bench/bench-informer`), or offline
 * (-o: no lab, see below).
 *
 * Creates N realistic pods (default 10000: a Deployment-style pod with two containers, owner
 * reference, labels, the two default tolerations, a node selector, and for one pod in ten an
 * anti-affinity and a topology spread constraint) and M nodes (default 1000, with capacity,
 * allocatable, conditions, addresses, labels, taints), then starts an informer on each kind and
 * reports, per kind:
 *   - cache bytes per object (sum of entry allocations / objects; for pods with the shared
 *     shape blocks their entries point into),
 *   - resident memory growth per object (RSS after sync minus before, / objects),
 *   - list decode throughput (objects/s and MiB/s of JSON from LIST to synced store),
 *   - watch apply throughput for a burst of label patches (events/s).
 * Pods use an unknown schedulerName and nodes are cordoned, so the control plane leaves them
 * alone. Everything created is deleted at the end.
 *
 * Offline mode (-o) needs no server: it generates the objects as JSON (pods of Deployments as a
 * real cluster holds them: two containers with requests and limits, env, volume mounts,
 * probes, volumes, the default tolerations, node and pod anti-affinity, a zone spread,
 * managedFields and a Running status, bound round-robin to the nodes; Nodes as above; one
 * launched NodeClaim per Node), applies them to the shared Pod, Node and NodeClaim informers of
 * a registry exactly as a LIST would (kp_informer_apply: decode, project, store, handlers), with
 * the core's cluster state (core/state/cluster.h) registered on them, and reports
 *   - bytes/pod (projection): the store's entry bytes per pod, and JSON bytes per pod,
 *   - the same per Node and NodeClaim,
 *   - rss_kib for the pods, nodes and nodeclaims held in stores plus the cluster state (RSS
 *     after minus RSS before, malloc_trim'ed), and the cluster state's share of it,
 *   - decode+project+store throughput, and the time of a full cluster-state snapshot.
 *
 * Options: -p pods, -n nodes (and NodeClaims), -w writer threads (default 4), -k keep objects,
 * -o offline. */
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
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/state/cluster.h"
#include "k8s/registry.h"
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
    if (res == &KP_RES_POD) {
        size_t n_shapes, shape_bytes;

        /* Pods of one template share a block (api/obj-pod.c): count it too. */
        kp_pod_shapes_stats(&n_shapes, &shape_bytes);
        bytes += shape_bytes;
    }
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

/* --- offline mode -------------------------------------------------------------------------- */

/* A JSON object from a format; exits on failure (a bench bug). */
static json_t *jsonf(const char *fmt, ...) KP_PRINTF(1, 2);
static json_t *jsonf(const char *fmt, ...)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    json_t *v = NULL;
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = kp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (r < 0 || kp_json_parse(kp_buf_str(&b), b.len, b.max, 0, &v, NULL) < 0) {
        fprintf(stderr, "bad bench JSON: %.200s\n", kp_buf_str(&b));
        exit(1);
    }
    atomic_fetch_add(&json_bytes, b.len);
    kp_buf_done(&b);
    return v;
}

/* A Deployment's pod as the API server returns it in a LIST. */
static json_t *realistic_pod(unsigned i, unsigned n_nodes)
{
    unsigned app = i % 50;

    return jsonf(
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"app%u-7d4b9c8f6d-%05u\","
        "\"generateName\":\"app%u-7d4b9c8f6d-\",\"namespace\":\"team-%u\",\"uid\":"
        "\"6f1c2a0e-3c55-4d0b-9a4e-%012u\",\"resourceVersion\":\"%u\",\"creationTimestamp\":"
        "\"2026-11-30T08:00:00Z\",\"labels\":{\"app\":\"app%u\",\"app.kubernetes.io/name\":"
        "\"app%u\",\"app.kubernetes.io/part-of\":\"shop\",\"pod-template-hash\":\"7d4b9c8f6d\","
        "\"version\":\"v1.2.3\"},\"annotations\":{\"kubectl.kubernetes.io/restartedAt\":"
        "\"2026-11-29T10:00:00Z\",\"prometheus.io/scrape\":\"true\",\"prometheus.io/port\":"
        "\"9090\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
        "\"name\":\"app%u-7d4b9c8f6d\",\"uid\":\"0a4c9d1e-5f6a-4b7c-8d9e-%012u\",\"controller\":"
        "true,\"blockOwnerDeletion\":true}],\"managedFields\":[{\"manager\":"
        "\"kube-controller-manager\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":"
        "\"2026-11-30T08:00:00Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{"
        "\"f:generateName\":{},\"f:labels\":{\".\":{},\"f:app\":{},\"f:pod-template-hash\":{},"
        "\"f:version\":{}},\"f:ownerReferences\":{\".\":{},\"k:{\\\"uid\\\":\\\"x\\\"}\":{}}},"
        "\"f:spec\":{\"f:affinity\":{},\"f:containers\":{\"k:{\\\"name\\\":\\\"app\\\"}\":{\".\":{},"
        "\"f:env\":{},\"f:image\":{},\"f:ports\":{},\"f:resources\":{}},\"k:{\\\"name\\\":"
        "\\\"proxy\\\"}\":{\".\":{},\"f:image\":{},\"f:resources\":{}}},\"f:tolerations\":{},"
        "\"f:topologySpreadConstraints\":{},\"f:volumes\":{}}}},{\"manager\":\"kubelet\","
        "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-11-30T08:00:05Z\","
        "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:status\":{\"f:conditions\":{},"
        "\"f:containerStatuses\":{},\"f:hostIP\":{},\"f:phase\":{},\"f:podIP\":{},"
        "\"f:podIPs\":{},\"f:startTime\":{}}},\"subresource\":\"status\"}]},"
        "\"spec\":{\"nodeName\":\"kp-bench-node-%04u\",\"schedulerName\":\"default-scheduler\","
        "\"priority\":0,\"terminationGracePeriodSeconds\":30,\"serviceAccountName\":\"app%u\","
        "\"restartPolicy\":\"Always\",\"dnsPolicy\":\"ClusterFirst\",\"enableServiceLinks\":true,"
        "\"nodeSelector\":{\"kubernetes.io/os\":\"linux\"},\"containers\":[{\"name\":\"app\","
        "\"image\":\"registry.example/shop/app%u:1.2.3\",\"imagePullPolicy\":\"IfNotPresent\","
        "\"ports\":[{\"name\":\"http\",\"containerPort\":8080,\"protocol\":\"TCP\"},{\"name\":"
        "\"metrics\",\"containerPort\":9090,\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"MODE\","
        "\"value\":\"prod\"},{\"name\":\"LOG_LEVEL\",\"value\":\"info\"},{\"name\":\"POD_NAME\","
        "\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.name\"}}},"
        "{\"name\":\"DB_PASSWORD\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"app%u-db\",\"key\":"
        "\"password\"}}}],\"resources\":{\"requests\":{\"cpu\":\"250m\",\"memory\":\"256Mi\"},"
        "\"limits\":{\"cpu\":\"1\",\"memory\":\"512Mi\"}},\"volumeMounts\":[{\"name\":\"config\","
        "\"mountPath\":\"/etc/app\",\"readOnly\":true},{\"name\":\"kube-api-access-x2x9k\","
        "\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\",\"readOnly\":true}],"
        "\"readinessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":8080,\"scheme\":"
        "\"HTTP\"},\"periodSeconds\":10,\"timeoutSeconds\":1,\"successThreshold\":1,"
        "\"failureThreshold\":3},\"livenessProbe\":{\"httpGet\":{\"path\":\"/livez\",\"port\":"
        "8080,\"scheme\":\"HTTP\"},\"periodSeconds\":10,\"timeoutSeconds\":1,"
        "\"successThreshold\":1,\"failureThreshold\":3},\"terminationMessagePath\":"
        "\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\"},{\"name\":\"proxy\","
        "\"image\":\"registry.example/mesh/proxy:2.1\",\"args\":[\"proxy\",\"--port=15001\"],"
        "\"resources\":{\"requests\":{\"cpu\":\"50m\",\"memory\":\"64Mi\"},\"limits\":"
        "{\"memory\":\"128Mi\"}},\"volumeMounts\":[{\"name\":\"kube-api-access-x2x9k\","
        "\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\",\"readOnly\":true}]}],"
        "\"volumes\":[{\"name\":\"config\",\"configMap\":{\"name\":\"app%u\",\"defaultMode\":"
        "420}},{\"name\":\"kube-api-access-x2x9k\",\"projected\":{\"sources\":[{"
        "\"serviceAccountToken\":{\"expirationSeconds\":3607,\"path\":\"token\"}},{\"configMap\":"
        "{\"name\":\"kube-root-ca.crt\",\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}]}},"
        "{\"downwardAPI\":{\"items\":[{\"path\":\"namespace\",\"fieldRef\":{\"apiVersion\":\"v1\","
        "\"fieldPath\":\"metadata.namespace\"}}]}}],\"defaultMode\":420}}],\"tolerations\":[{"
        "\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
        "\"tolerationSeconds\":300},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":"
        "\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],\"affinity\":{"
        "\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
        "[{\"matchExpressions\":[{\"key\":\"karpenter.sh/capacity-type\",\"operator\":\"In\","
        "\"values\":[\"on-demand\"]}]}]}},\"podAntiAffinity\":{"
        "\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":100,\"podAffinityTerm\":{"
        "\"labelSelector\":{\"matchLabels\":{\"app\":\"app%u\"}},\"topologyKey\":"
        "\"kubernetes.io/hostname\"}}]}},\"topologySpreadConstraints\":[{\"maxSkew\":1,"
        "\"topologyKey\":\"topology.kubernetes.io/zone\",\"whenUnsatisfiable\":\"ScheduleAnyway\","
        "\"labelSelector\":{\"matchLabels\":{\"app\":\"app%u\"}},\"matchLabelKeys\":["
        "\"pod-template-hash\"]}]},\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":"
        "\"Initialized\",\"status\":\"True\",\"lastTransitionTime\":\"2026-11-30T08:00:02Z\"},"
        "{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2026-11-30T08:00:05Z\"},"
        "{\"type\":\"ContainersReady\",\"status\":\"True\",\"lastTransitionTime\":"
        "\"2026-11-30T08:00:05Z\"},{\"type\":\"PodScheduled\",\"status\":\"True\","
        "\"lastTransitionTime\":\"2026-11-30T08:00:00Z\"}],\"hostIP\":\"10.100.%u.%u\",\"podIP\":"
        "\"10.200.%u.%u\",\"podIPs\":[{\"ip\":\"10.200.%u.%u\"}],\"startTime\":"
        "\"2026-11-30T08:00:01Z\",\"qosClass\":\"Burstable\",\"containerStatuses\":[{\"name\":"
        "\"app\",\"ready\":true,\"restartCount\":0,\"image\":\"registry.example/shop/app:1.2.3\","
        "\"imageID\":\"registry.example/shop/app@sha256:4f2a9c1d0b7e6a35\",\"containerID\":"
        "\"containerd://9a4e1f2d3c4b5a69\",\"started\":true,\"state\":{\"running\":{\"startedAt\":"
        "\"2026-11-30T08:00:03Z\"}}},{\"name\":\"proxy\",\"ready\":true,\"restartCount\":0,"
        "\"image\":\"registry.example/mesh/proxy:2.1\",\"imageID\":"
        "\"registry.example/mesh/proxy@sha256:0a4c9d1e5f6a\",\"containerID\":"
        "\"containerd://0f1a2b3c4d5e\",\"started\":true,\"state\":{\"running\":{\"startedAt\":"
        "\"2026-11-30T08:00:03Z\"}}}]}}",
        app, i, app, app % 7, i, 1000 + i, app, app, app, i, i % n_nodes, app, app, app, app, app,
        app, (i % n_nodes) / 256, (i % n_nodes) % 256, (i / 256) % 256, i % 256, (i / 256) % 256,
        i % 256);
}

static json_t *offline_node(unsigned i)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    json_t *n = make_node(i);

    if (kp_json_dump(n, 0, &b) == 0) /* make_node does not count its bytes: measure them */
        atomic_fetch_add(&json_bytes, b.len);
    kp_buf_done(&b);
    return n;
}

static json_t *offline_nodeclaim(unsigned i)
{
    return jsonf(
        "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":{\"name\":"
        "\"default-%05u\",\"uid\":\"c3d1e2f4-5a6b-4c7d-8e9f-%012u\",\"resourceVersion\":\"%u\","
        "\"generation\":1,\"creationTimestamp\":\"2026-11-02T10:00:00Z\",\"finalizers\":["
        "\"karpenter.sh/termination\"],\"labels\":{\"karpenter.sh/nodepool\":\"default\","
        "\"karpenter.sh/capacity-type\":\"on-demand\",\"kubernetes.io/arch\":\"amd64\","
        "\"node.kubernetes.io/instance-type\":\"ssh-4c8g\",\"topology.kubernetes.io/zone\":"
        "\"pool\"},\"annotations\":{\"karpenter.sh/nodepool-hash\":\"6821555240594823858\","
        "\"karpenter.sh/nodepool-hash-version\":\"v3\"},\"ownerReferences\":[{\"apiVersion\":"
        "\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"name\":\"default\",\"uid\":"
        "\"0b5c9c7e-93a1-4a62-8f3e-0d6f2f1f6a11\",\"blockOwnerDeletion\":true}]},\"spec\":{"
        "\"expireAfter\":\"720h\",\"nodeClassRef\":{\"group\":\"karpenter.kpssh.dev\",\"kind\":"
        "\"SSHNodeClass\",\"name\":\"default\"},\"requirements\":[{\"key\":"
        "\"kubernetes.io/arch\",\"operator\":\"In\",\"values\":[\"amd64\"]},{\"key\":"
        "\"karpenter.sh/nodepool\",\"operator\":\"In\",\"values\":[\"default\"]},{\"key\":"
        "\"node.kubernetes.io/instance-type\",\"operator\":\"In\",\"values\":[\"ssh-4c8g\"]}],"
        "\"resources\":{\"requests\":{\"cpu\":\"3\",\"memory\":\"6Gi\",\"pods\":\"10\"}}},"
        "\"status\":{\"providerID\":\"kpssh://kpssh-system/host-%04u\",\"nodeName\":"
        "\"kp-bench-node-%04u\",\"imageID\":\"debian-12\",\"capacity\":{\"cpu\":\"4\","
        "\"memory\":\"8145440Ki\",\"pods\":\"110\",\"ephemeral-storage\":\"20Gi\"},"
        "\"allocatable\":{\"cpu\":\"3800m\",\"memory\":\"7531040Ki\",\"pods\":\"110\","
        "\"ephemeral-storage\":\"18Gi\"},\"conditions\":[{\"type\":\"Launched\",\"status\":"
        "\"True\",\"reason\":\"Launched\",\"message\":\"\",\"lastTransitionTime\":"
        "\"2026-11-02T10:00:01Z\"},{\"type\":\"Registered\",\"status\":\"True\",\"reason\":"
        "\"Registered\",\"message\":\"\",\"lastTransitionTime\":\"2026-11-02T10:00:41Z\"},"
        "{\"type\":\"Initialized\",\"status\":\"True\",\"reason\":\"Initialized\",\"message\":"
        "\"\",\"lastTransitionTime\":\"2026-11-02T10:00:52Z\"},{\"type\":\"Ready\",\"status\":"
        "\"True\",\"reason\":\"Ready\",\"message\":\"\",\"lastTransitionTime\":"
        "\"2026-11-02T10:00:52Z\"}]}}",
        i, i, 5000 + i, i, i);
}

/* Applies count objects made by make(i) to inf as a LIST would; returns the CPU seconds. */
static double offline_apply(struct kp_informer *inf, unsigned count, json_t *(*make)(unsigned))
{
    double cpu0 = cpu_seconds();

    for (unsigned i = 0; i < count; i++) {
        json_t *obj = make(i);

        if (kp_informer_apply(inf, KP_INFORMER_UPSERT, obj) < 0) {
            fprintf(stderr, "apply failed\n");
            exit(1);
        }
        kp_json_unref(obj);
    }
    return cpu_seconds() - cpu0;
}

static json_t *offline_pod(unsigned i)
{
    return realistic_pod(i, nnodes);
}

/* Prints the figures of one kind; extra_bytes are shared blocks its entries point into (the
 * pods' shapes), counted in the per-object figure. */
static void offline_report(const char *what, const char *one, struct kp_informer *inf,
                           unsigned long long json, double cpu, size_t extra_bytes)
{
    struct kp_store *st = kp_informer_store(inf);
    size_t n = kp_store_len(st), bytes = kp_store_bytes(st) + extra_bytes;
    struct kp_informer_stats stats;

    kp_informer_get_stats(inf, &stats);
    printf("%-10s objects=%zu bad=%llu\n", what, n, (unsigned long long)stats.bad_objects);
    printf("%-10s bytes/%s (projection): %.0f\n", what, one, n ? (double)bytes / (double)n : 0.0);
    printf("%-10s JSON bytes per object: %.0f\n", what, n ? (double)json / (double)n : 0.0);
    printf("%-10s decode+project+store: %.0f objects per CPU-second (%.1f MiB of JSON/s)\n", what,
           cpu > 0 ? (double)n / cpu : 0.0, cpu > 0 ? (double)json / 1048576.0 / cpu : 0.0);
}

/* Feeds every entry of inf's store to a state through ev, as the informer's adds would. */
static void offline_feed(struct kp_cluster_state *cs, struct kp_informer *inf,
                         void (*ev)(struct kp_cluster_state *, const struct kp_entry *,
                                    const struct kp_entry *))
{
    struct kp_store_list l = {0};

    if (kp_store_list(kp_informer_store(inf), &l) < 0) {
        fprintf(stderr, "list failed\n");
        exit(1);
    }
    for (size_t i = 0; i < l.n; i++)
        ev(cs, NULL, l.v[i]);
    kp_store_list_free(&l);
}

static int offline(void)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};
    struct kp_client *c = NULL;
    struct kp_registry *reg = NULL;
    struct kp_informer *pods = NULL, *nodes = NULL, *claims = NULL;
    struct kp_core_env env = {0};
    struct kp_cluster_state *cs = NULL, *second = NULL;
    struct kp_state_snapshot *snap = NULL;
    size_t n_shapes = 0, shape_bytes = 0;
    long rss0, rss1, rss2;
    double cpu;
    uint64_t t0;

    if (kp_client_new(&to, &c) < 0 || kp_registry_new(c, &reg) < 0) {
        fprintf(stderr, "cannot make a registry\n");
        return 1;
    }
    env.informers = reg;
    if (kp_informers_pods(reg, &pods) < 0 || kp_informers_nodes(reg, &nodes) < 0 ||
        kp_informers_nodeclaims(reg, &claims) < 0 || kp_cluster_state_new(&env, &cs) < 0) {
        fprintf(stderr, "cannot make the informers and the cluster state\n");
        return 1;
    }
    malloc_trim(0);
    rss0 = rss_kib();

    /* The real path: each object decoded, projected, stored, and handed to the cluster state
     * by the informers' handlers. */
    atomic_store(&json_bytes, 0);
    cpu = offline_apply(nodes, nnodes, offline_node);
    offline_report("nodes", "node", nodes, atomic_load(&json_bytes), cpu, 0);
    atomic_store(&json_bytes, 0);
    cpu = offline_apply(claims, nnodes, offline_nodeclaim);
    offline_report("nodeclaims", "nodeclaim", claims, atomic_load(&json_bytes), cpu, 0);
    atomic_store(&json_bytes, 0);
    cpu = offline_apply(pods, npods, offline_pod);
    kp_pod_shapes_stats(&n_shapes, &shape_bytes);
    offline_report("pods", "pod", pods, atomic_load(&json_bytes), cpu, shape_bytes);
    printf("pods       shared shapes: %zu, %zu bytes (included above)\n", n_shapes, shape_bytes);
    malloc_trim(0);
    rss1 = rss_kib();

    printf("cluster state: %zu state nodes\n", kp_cluster_state_node_count(cs));
    t0 = kp_mono_usec();
    if (kp_cluster_state_snapshot(cs, &snap) < 0) {
        fprintf(stderr, "snapshot failed\n");
        return 1;
    }
    {
        uint64_t pods_counted = 0;

        for (size_t i = 0; i < snap->n; i++)
            pods_counted += snap->v[i].pods;
        printf("cluster state: snapshot of %zu nodes (%llu pods counted) in %.2f ms\n", snap->n,
               (unsigned long long)pods_counted, (double)(kp_mono_usec() - t0) / 1e3);
    }
    snap = kp_state_snapshot_free(snap);

    /* The headline: what the stores and the state hold once the JSON is gone. */
    if (npods == 10000 && nnodes == 1000)
        printf("rss_kib 10k pods/1k nodes/1k nodeclaims: %ld\n", rss1 - rss0);
    else
        printf("rss_kib %u pods/%u nodes/%u nodeclaims: %ld\n", npods, nnodes, nnodes, rss1 - rss0);

    /* The cluster state's share of that: a second state fed the same entries (references, no
     * copies), measured by what it adds. */
    if (kp_cluster_state_new_detached(NULL, &second) < 0) {
        fprintf(stderr, "cannot make a second state\n");
        return 1;
    }
    offline_feed(second, nodes, kp_cluster_state_node_event);
    offline_feed(second, claims, kp_cluster_state_nodeclaim_event);
    offline_feed(second, pods, kp_cluster_state_pod_event);
    malloc_trim(0);
    rss2 = rss_kib();
    printf("rss_kib cluster state share: %ld (%.0f bytes per pod)\n", rss2 - rss1,
           npods ? (double)(rss2 - rss1) * 1024.0 / npods : 0.0);
    kp_cluster_state_free(second);
    kp_cluster_state_free(cs);
    kp_registry_free(reg);
    kp_client_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    struct kp_client *c;
    bool keep = false, off = false;
    int opt;

    while ((opt = getopt(argc, argv, "p:n:w:ko")) != -1) {
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
        case 'o':
            off = true;
            break;
        default:
            fprintf(stderr, "usage: %s [-p pods] [-n nodes] [-w writers] [-k] [-o]\n", argv[0]);
            return 2;
        }
    }
    if (off)
        return offline();
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
