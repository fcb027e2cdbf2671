/* Tests for the built-in projections (api/obj-*.c): every kept field of realistic objects, the
 * scheduler's effective-request rule with sidecars, fingerprints that ignore the
 * resourceVersion, rejection of malformed objects, and allocation failures. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/err.h"
#include "api/indexes.h"
#include "api/obj-misc.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"

#define MI (1024LL * 1024 * 1000) /* one MiB in milli-bytes */

static struct kp_entry *decode_file(const char *name,
                                    int (*decode)(const char *, size_t, struct kp_entry **))
{
    struct kp_entry *e = NULL;
    size_t n;
    char *data = kp_test_read_data(name, &n);

    assert_int_equal(decode(data, n, &e), 0);
    kp_free(data);
    return e;
}

static void test_pod_full(void **state)
{
    struct kp_entry *e = decode_file("objects/pod-full.json", kp_pod_decode);
    const struct kp_pod_view *p = kp_pod_view(e);
    struct kp_labels web = {.v = (const struct kp_label[]){{"app", "web"}}, .n = 1};
    struct kp_labels other = {.v = (const struct kp_label[]){{"app", "db"}}, .n = 1};

    (void)state;
    assert_string_equal(e->key, "shop/web-7d4b9c8f6d-x2x9k");
    assert_string_equal(e->rv, "48213");
    assert_string_equal(e->uid, "6f1c2a0e-3c55-4d0b-9a4e-1f2d3c4b5a69");
    assert_null(p->node_name);
    assert_string_equal(p->priority_class, "high");
    assert_int_equal(p->priority, 1000);
    assert_int_equal(p->grace_seconds, 45);
    assert_int_equal(p->phase, KP_POD_PENDING);
    assert_true(p->flags & KP_POD_UNSCHEDULABLE);
    assert_true(p->flags & KP_POD_DO_NOT_DISRUPT);
    assert_false(p->flags & KP_POD_READY);
    assert_false(p->flags & KP_POD_DAEMONSET);
    assert_string_equal(kp_labels_get(&p->meta.labels, "tier"), "frontend");
    assert_string_equal(kp_owner_refs_controller(&p->meta.owners)->kind, "ReplicaSet");
    assert_int_equal(p->meta.creation_usec, 1796025600000000LL);

    /* max(containers + sidecar, biggest init step) + overhead: see the fixture. */
    assert_int_equal(kp_resources_get(&p->requests, "cpu", NULL), 2010);
    assert_int_equal(kp_resources_get(&p->requests, "memory", NULL), 2120 * MI);
    assert_int_equal(kp_resources_get(&p->requests, "ephemeral-storage", NULL), 1024 * MI);
    /* Limits: only the app container has any; overhead joins the limited resources only. */
    assert_int_equal(p->limits.n, 2);
    assert_int_equal(kp_resources_get(&p->limits, "cpu", NULL), 1010);
    assert_int_equal(kp_resources_get(&p->limits, "memory", NULL), 520 * MI);
    assert_string_equal(p->owner_kind, "ReplicaSet");
    assert_string_equal(p->owner_name, "web-7d4b9c8f6d");
    assert_string_equal(p->do_not_disrupt, "true");
    assert_int_equal(p->n_host_ports, 0);
    assert_int_equal(p->meta.deletion_usec, 0);
    assert_true(kp_pod_provisionable(p));
    assert_true(kp_pod_reschedulable(p));

    assert_string_equal(kp_labels_get(&p->node_selector, "kubernetes.io/arch"), "amd64");
    assert_int_equal(p->tolerations.n, 2);
    assert_true(p->tolerations.v[0].exists);
    assert_int_equal(p->tolerations.v[0].seconds, 300);
    assert_int_equal(p->tolerations.v[1].effect, KP_TAINT_NO_SCHEDULE);
    {
        struct kp_taint t = {
            .key = "karpenter.kpssh.dev/pool", .value = "edge", .effect = KP_TAINT_NO_SCHEDULE};
        struct kp_taint u = {
            .key = "karpenter.kpssh.dev/pool", .value = "core", .effect = KP_TAINT_NO_SCHEDULE};

        assert_true(kp_tolerations_tolerate(&p->tolerations, &t));
        assert_false(kp_tolerations_tolerate(&p->tolerations, &u));
    }

    assert_int_equal(p->n_required, 2);
    assert_int_equal(p->required[0].exprs.n, 2);
    assert_int_equal(p->required[1].fields.n, 1);
    {
        struct kp_labels ok = {
            .v = (const struct kp_label[]){{"karpenter.sh/capacity-type", "on-demand"},
                                           {"karpenter.kpssh.dev/cpu", "4"}},
            .n = 2};
        struct kp_labels small = {
            .v = (const struct kp_label[]){{"karpenter.sh/capacity-type", "on-demand"},
                                           {"karpenter.kpssh.dev/cpu", "2"}},
            .n = 2};

        assert_true(kp_reqs_match(&p->required[0].exprs, &ok));
        assert_false(kp_reqs_match(&p->required[0].exprs, &small));
    }
    assert_int_equal(p->n_preferred, 1);
    assert_int_equal(p->preferred[0].weight, 50);
    assert_int_equal(p->n_anti_affinity, 1);
    assert_string_equal(p->anti_affinity[0].topology_key, "kubernetes.io/hostname");
    assert_true(kp_reqs_match(&p->anti_affinity[0].selector, &web));
    assert_false(kp_reqs_match(&p->anti_affinity[0].selector, &other));
    assert_int_equal(p->n_preferred_anti_affinity, 1);
    assert_int_equal(p->preferred_anti_affinity[0].weight, 10);
    assert_int_equal(p->preferred_anti_affinity[0].n_namespaces, 2);
    assert_string_equal(p->preferred_anti_affinity[0].namespaces[1], "ops");
    assert_int_equal(p->n_affinity, 0);

    assert_int_equal(p->n_spread, 1);
    assert_int_equal(p->spread[0].max_skew, 2);
    assert_int_equal(p->spread[0].min_domains, 3);
    assert_true(p->spread[0].do_not_schedule);
    assert_true(p->spread[0].honor_node_affinity);
    assert_true(p->spread[0].honor_node_taints);
    assert_string_equal(p->spread[0].match_label_keys[0], "pod-template-hash");
    assert_int_equal(p->n_pvc_claims, 1);
    assert_string_equal(p->pvc_claims[0], "web-data");
    kp_entry_unref(e);
}

static void test_pod_minimal(void **state)
{
    struct kp_entry *e = decode_file("objects/pod-minimal.json", kp_pod_decode);
    const struct kp_pod_view *p = kp_pod_view(e);

    (void)state;
    assert_int_equal(p->requests.n, 0);
    assert_int_equal(p->grace_seconds, 30);
    assert_int_equal(p->n_required, 0);
    assert_null(p->scheduler_name);
    assert_null(p->owner_kind);
    assert_null(p->do_not_disrupt);
    assert_int_equal(p->limits.n, 0);
    assert_false(kp_pod_provisionable(p)); /* kube-scheduler has not tried it */
    kp_entry_unref(e);
}

static struct kp_entry *decode_str(const char *json)
{
    struct kp_entry *e = NULL;

    assert_int_equal(kp_pod_decode(json, strlen(json), &e), 0);
    return e;
}

#define POD_HEAD "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\""

/* containerPorts with a hostPort, of regular containers only; protocol and IP defaults. */
static void test_pod_host_ports(void **state)
{
    struct kp_entry *e = decode_str(
        POD_HEAD
        "},\"spec\":{\"initContainers\":[{\"name\":\"i\",\"ports\":[{\"containerPort\":1,"
        "\"hostPort\":1}]}],\"containers\":[{\"name\":\"a\",\"ports\":[{\"containerPort\":"
        "80,\"hostPort\":8080},{\"containerPort\":9090},{\"containerPort\":53,\"hostPort\":"
        "53,\"protocol\":\"UDP\",\"hostIP\":\"10.0.0.1\"}]},{\"name\":\"b\"}]}}");
    const struct kp_pod_view *p = kp_pod_view(e);
    struct kp_host_port any_tcp = {.ip = "0.0.0.0", .port = 8080, .protocol = KP_PROTO_TCP},
                        v6_any = {.ip = "::", .port = 53, .protocol = KP_PROTO_UDP},
                        other_ip = {.ip = "10.0.0.2", .port = 53, .protocol = KP_PROTO_UDP},
                        same_ip = {.ip = "10.0.0.1", .port = 53, .protocol = KP_PROTO_UDP},
                        tcp53 = {.ip = "10.0.0.1", .port = 53, .protocol = KP_PROTO_TCP},
                        v6a = {.ip = "fd00::1", .port = 1}, v6b = {.ip = "fd00:0::1", .port = 1};

    (void)state;
    assert_int_equal(p->n_host_ports, 2);
    assert_null(p->host_ports[0].ip);
    assert_int_equal(p->host_ports[0].port, 8080);
    assert_int_equal(p->host_ports[0].protocol, KP_PROTO_TCP);
    assert_string_equal(p->host_ports[1].ip, "10.0.0.1");
    assert_int_equal(p->host_ports[1].protocol, KP_PROTO_UDP);
    /* Karpenter's HostPort.Matches. */
    assert_true(kp_host_port_conflicts(&p->host_ports[0], &any_tcp));
    assert_true(kp_host_port_conflicts(&p->host_ports[1], &v6_any));
    assert_true(kp_host_port_conflicts(&p->host_ports[1], &same_ip));
    assert_false(kp_host_port_conflicts(&p->host_ports[1], &other_ip));
    assert_false(kp_host_port_conflicts(&p->host_ports[1], &tcp53));
    assert_false(kp_host_port_conflicts(&p->host_ports[0], &p->host_ports[1]));
    assert_true(kp_host_port_conflicts(&v6a, &v6b));
    kp_entry_unref(e);
}

/* Pod-level resources replace cpu/memory totals; limits get overhead only where limited;
 * sidecar limits add like their requests. */
static void test_pod_level_resources(void **state)
{
    struct kp_entry *e = decode_str(
        POD_HEAD
        "},\"spec\":{\"resources\":{\"requests\":{\"cpu\":\"3\",\"example.com/x\":\"9\"},"
        "\"limits\":{\"memory\":\"1Gi\"}},\"overhead\":{\"cpu\":\"100m\",\"memory\":\"1Mi\"},"
        "\"initContainers\":[{\"name\":\"s\",\"restartPolicy\":\"Always\",\"resources\":"
        "{\"limits\":{\"cpu\":\"1\"},\"requests\":{\"cpu\":\"1\"}}}],\"containers\":[{\"name\":"
        "\"a\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"2Gi\"},\"limits\":"
        "{\"cpu\":\"2\"}}}]}}");
    const struct kp_pod_view *p = kp_pod_view(e);
    bool found = true;

    (void)state;
    /* cpu: pod-level 3 replaces 1 + 1, then overhead; memory: containers' 2Gi + overhead. */
    assert_int_equal(kp_resources_get(&p->requests, "cpu", NULL), 3100);
    assert_int_equal(kp_resources_get(&p->requests, "memory", NULL), 2049 * MI);
    (void)kp_resources_get(&p->requests, "example.com/x", &found);
    assert_false(found); /* not a pod-level resource: ignored */
    /* limits: cpu 2 + sidecar 1 + overhead; memory from pod level + overhead. */
    assert_int_equal(kp_resources_get(&p->limits, "cpu", NULL), 3100);
    assert_int_equal(kp_resources_get(&p->limits, "memory", NULL), 1025 * MI);
    kp_entry_unref(e);
}

/* Owner flags need apiVersion and kind of any owner reference, as Karpenter's IsOwnedBy. */
static void test_pod_owners(void **state)
{
    struct kp_entry *ds = decode_str(
        POD_HEAD ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\","
                 "\"name\":\"fluent\",\"uid\":\"u\"}]},\"spec\":{\"containers\":[]}}");
    struct kp_entry *old = decode_str(
        POD_HEAD ",\"ownerReferences\":[{\"apiVersion\":\"extensions/v1beta1\",\"kind\":"
                 "\"DaemonSet\",\"name\":\"x\",\"uid\":\"u\",\"controller\":true}]},\"spec\":"
                 "{\"containers\":[]}}");
    struct kp_entry *sts = decode_str(
        POD_HEAD
        ",\"deletionTimestamp\":\"2026-11-30T08:00:00Z\",\"ownerReferences\":[{"
        "\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"name\":\"db\",\"uid\":\"u\","
        "\"controller\":true}]},\"spec\":{\"nodeName\":\"n1\",\"containers\":[]}}");
    struct kp_entry *mirror = decode_str(
        POD_HEAD ",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":"
                 "\"n1\",\"uid\":\"u\",\"controller\":true}]},\"spec\":{\"containers\":[]},"
                 "\"status\":{\"nominatedNodeName\":\"n2\",\"conditions\":[{\"type\":"
                 "\"PodScheduled\",\"status\":\"False\",\"reason\":\"Unschedulable\"}]}}");

    (void)state;
    assert_true(kp_pod_view(ds)->flags & KP_POD_DAEMONSET);
    assert_null(kp_pod_view(ds)->owner_kind); /* not the controller reference */
    assert_false(kp_pod_reschedulable(kp_pod_view(ds)));
    assert_false(kp_pod_view(old)->flags & KP_POD_DAEMONSET);
    assert_string_equal(kp_pod_view(old)->owner_kind, "DaemonSet");
    assert_true(kp_pod_view(sts)->flags & KP_POD_STATEFULSET);
    assert_string_equal(kp_pod_view(sts)->owner_name, "db");
    assert_true(kp_pod_terminating(kp_pod_view(sts)));
    assert_false(kp_pod_active(kp_pod_view(sts)));
    assert_true(kp_pod_reschedulable(kp_pod_view(sts))); /* terminating StatefulSet pod */
    assert_true(kp_pod_view(mirror)->flags & KP_POD_NODE_OWNED);
    assert_true(kp_pod_view(mirror)->flags & KP_POD_PREEMPTING);
    assert_false(kp_pod_provisionable(kp_pod_view(mirror)));
    assert_false(kp_pod_reschedulable(kp_pod_view(mirror)));
    kp_entry_unref(ds);
    kp_entry_unref(old);
    kp_entry_unref(sts);
    kp_entry_unref(mirror);
}

/* Pods of one template share their spec-derived block; another spec gets its own; the cache
 * empties when the last pod goes. */
static void test_pod_shapes_shared(void **state)
{
    struct kp_entry *a = decode_str(
        POD_HEAD ",\"uid\":\"a\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\","
                 "\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],\"volumes\":[{\"name\":\"d\","
                 "\"persistentVolumeClaim\":{\"claimName\":\"data-0\"}}]}}");
    struct kp_entry *b = decode_str(
        "{\"metadata\":{\"name\":\"p2\",\"namespace\":\"d\",\"uid\":\"b\"},\"spec\":{\"nodeName\":\"n2\",\"containers\":[{\"name\":"
        "\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],\"volumes\":[{\"name\":"
        "\"d\",\"persistentVolumeClaim\":{\"claimName\":\"data-1\"}}]}}");
    struct kp_entry *c = decode_str(
        "{\"metadata\":{\"name\":\"p3\",\"namespace\":\"d\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":"
        "{\"cpu\":\"2\"}}}]}}");
    const struct kp_pod_view *pa = kp_pod_view(a), *pb = kp_pod_view(b), *pc = kp_pod_view(c);
    size_t n = 0, bytes = 0;

    (void)state;
    assert_non_null(pa->shape);
    assert_ptr_equal(pa->shape, pb->shape);
    assert_ptr_equal(pa->requests.v, pb->requests.v);
    assert_string_equal(pb->node_name, "n2");
    assert_string_equal(pb->pvc_claims[0], "data-1"); /* PVC names are the pod's own */
    assert_true(pa->shape != pc->shape);
    assert_int_equal(kp_resources_get(&pc->requests, "cpu", NULL), 2000);
    kp_pod_shapes_stats(&n, &bytes);
    assert_int_equal(n, 2);
    assert_true(bytes > 0);
    kp_entry_unref(a);
    assert_int_equal(kp_resources_get(&pb->requests, "cpu", NULL), 1000); /* b keeps it */
    kp_entry_unref(b);
    kp_entry_unref(c);
    kp_pod_shapes_stats(&n, &bytes);
    assert_int_equal(n, 0);
    assert_int_equal(bytes, 0);
}

/* In-place resize: status resources count while they exceed the spec (max per resource), only
 * status when the resize is infeasible; a status equal to the spec keeps the shared block. */
static void test_pod_resize_requests(void **state)
{
#define RESIZE_POD(status)                                                                         \
    POD_HEAD "},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":"   \
             "\"500m\",\"memory\":\"1Gi\"}}}]},\"status\":{" status "}}"
    struct kp_entry *down = decode_str(
        RESIZE_POD("\"containerStatuses\":[{\"name\":\"c\",\"allocatedResources\":{\"cpu\":\"2\"},"
                   "\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"512Mi\"}}}]"));
    struct kp_entry *infeasible = decode_str(RESIZE_POD(
        "\"conditions\":[{\"type\":\"PodResizePending\",\"status\":\"True\",\"reason\":"
        "\"Infeasible\"}],\"containerStatuses\":[{\"name\":\"c\",\"resources\":{\"requests\":"
        "{\"cpu\":\"250m\"}}}]"));
    struct kp_entry *same = decode_str(
        RESIZE_POD("\"containerStatuses\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":"
                   "\"500m\",\"memory\":\"1Gi\"}}}]"));
    struct kp_entry *none = decode_str(RESIZE_POD("\"phase\":\"Running\""));
#undef RESIZE_POD
    const struct kp_pod_view *d = kp_pod_view(down), *inf = kp_pod_view(infeasible);

    (void)state;
    assert_int_equal(kp_resources_get(&d->requests, "cpu", NULL), 2000);
    assert_int_equal(kp_resources_get(&d->requests, "memory", NULL), 1024 * MI);
    assert_int_equal(kp_resources_get(&inf->requests, "cpu", NULL), 250);
    assert_int_equal(kp_resources_get(&inf->requests, "memory", NULL), 0);
    assert_ptr_equal(kp_pod_view(same)->requests.v, kp_pod_view(none)->requests.v);
    assert_int_equal(kp_resources_get(&kp_pod_view(same)->requests, "cpu", NULL), 500);
    kp_entry_unref(down);
    kp_entry_unref(infeasible);
    kp_entry_unref(same);
    kp_entry_unref(none);
}

/* karpenter.sh/do-not-disrupt: "true", a positive duration from startTime, or ignored. */
static void test_pod_do_not_disrupt(void **state)
{
    const int64_t start = 1796025600000000LL; /* 2026-11-30T08:00:00Z */
    struct kp_entry *dur = decode_str(
        POD_HEAD ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"5m\"}},\"spec\":{"
                 "\"containers\":[]},\"status\":{\"startTime\":\"2026-11-30T08:00:00Z\"}}");
    struct kp_entry *nostart =
        decode_str(POD_HEAD ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"1h\"}},\"spec\":{"
                            "\"containers\":[]}}");
    struct kp_entry *bad =
        decode_str(POD_HEAD ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"-5m\"}},\"spec\":{"
                            "\"containers\":[]}}");
    struct kp_entry *yes = decode_str(
        POD_HEAD ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\"}},\"spec\":{"
                 "\"containers\":[]}}");

    (void)state;
    assert_int_equal(kp_pod_view(dur)->start_usec, start);
    assert_int_equal(kp_pod_view(dur)->do_not_disrupt_ns, 300 * 1000000000LL);
    assert_true(kp_pod_do_not_disrupt_active(kp_pod_view(dur), start + 299 * 1000000LL));
    assert_false(kp_pod_do_not_disrupt_active(kp_pod_view(dur), start + 300 * 1000000LL));
    assert_true(kp_pod_do_not_disrupt_active(kp_pod_view(nostart), start));
    assert_false(kp_pod_do_not_disrupt_active(kp_pod_view(bad), start));
    assert_string_equal(kp_pod_view(bad)->do_not_disrupt, "-5m");
    assert_false(kp_pod_view(bad)->flags & KP_POD_DO_NOT_DISRUPT);
    assert_true(kp_pod_do_not_disrupt_active(kp_pod_view(yes), start + 1000000000000LL));
    kp_entry_unref(dur);
    kp_entry_unref(nostart);
    kp_entry_unref(bad);
    kp_entry_unref(yes);
}

/* Karpenter's HasDRARequirements from each place a claim can be named, and Ready=False kept
 * apart from Ready Unknown (PDBs that always allow unhealthy pods read it). */
static void test_pod_dra_and_ready(void **state)
{
    static const struct {
        const char *spec;
        bool dra;
    } cases[] = {
        {"{\"containers\":[]}", false},
        {"{\"containers\":[],\"resourceClaims\":[]}", false},
        {"{\"containers\":[],\"resourceClaims\":[{\"name\":\"gpu\","
         "\"resourceClaimTemplateName\":\"gpu-t\"}]}",
         true},
        {"{\"containers\":[{\"name\":\"c\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}]}",
         true},
        {"{\"containers\":[{\"name\":\"c\",\"resources\":{\"claims\":[]}}]}", false},
        {"{\"initContainers\":[{\"name\":\"i\",\"resources\":{\"claims\":[{\"name\":"
         "\"gpu\"}]}}],\"containers\":[]}",
         true},
        /* Ephemeral containers are not looked at, as in Karpenter. */
        {"{\"containers\":[],\"ephemeralContainers\":[{\"name\":\"e\",\"resources\":{"
         "\"claims\":[{\"name\":\"gpu\"}]}}]}",
         false},
    };
    static const struct {
        const char *status;
        uint32_t want; /* of KP_POD_READY | KP_POD_READY_FALSE */
    } ready[] = {
        {"{}", 0},
        {"{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}", KP_POD_READY_FALSE},
        {"{\"conditions\":[{\"type\":\"Ready\",\"status\":\"Unknown\"}]}", 0},
        {"{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}", KP_POD_READY},
    };
    char json[1024];

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_entry *e;

        assert_true(snprintf(json, sizeof(json), POD_HEAD "},\"spec\":%s}", cases[i].spec) > 0);
        e = decode_str(json);
        if (!!(kp_pod_view(e)->flags & KP_POD_DRA) != cases[i].dra)
            fail_msg("case %zu: DRA flag %d", i, !cases[i].dra);
        kp_entry_unref(e);
    }
    for (size_t i = 0; i < KP_ARRAY_SIZE(ready); i++) {
        struct kp_entry *e;

        assert_true(snprintf(json, sizeof(json),
                             POD_HEAD "},\"spec\":{\"containers\":[]},\"status\":%s}",
                             ready[i].status) > 0);
        e = decode_str(json);
        assert_int_equal(kp_pod_view(e)->flags & (KP_POD_READY | KP_POD_READY_FALSE),
                         ready[i].want);
        kp_entry_unref(e);
    }
}

/* What the provisioner's PVC checks read: storage class, Lost, bind-completed. */
static void test_pvc_fields(void **state)
{
    static const struct {
        const char *json, *volume, *sc;
        bool lost, bound_mark;
    } cases[] = {
        {"{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\",\"annotations\":{"
         "\"pv.kubernetes.io/bind-completed\":\"yes\"}},\"spec\":{\"volumeName\":\"pv1\","
         "\"storageClassName\":\"local\"},\"status\":{\"phase\":\"Bound\"}}",
         "pv1", "local", false, true},
        {"{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\"},\"spec\":{\"volumeName\":"
         "\"pv1\",\"storageClassName\":\"\"},\"status\":{\"phase\":\"Lost\"}}",
         "pv1", NULL, true, false},
        {"{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\",\"annotations\":{\"a\":"
         "\"b\"}},\"spec\":{}}",
         NULL, NULL, false, false},
        {"{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\"}}", NULL, NULL, false, false},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_entry *e = NULL;
        const struct kp_pvc_view *v;

        assert_int_equal(kp_pvc_decode(cases[i].json, strlen(cases[i].json), &e), 0);
        v = kp_pvc_view(e);
        if (cases[i].volume)
            assert_string_equal(v->volume_name, cases[i].volume);
        else
            assert_null(v->volume_name);
        if (cases[i].sc)
            assert_string_equal(v->storage_class, cases[i].sc);
        else
            assert_null(v->storage_class);
        assert_int_equal(v->lost, cases[i].lost);
        assert_int_equal(v->bind_completed, cases[i].bound_mark);
        kp_entry_unref(e);
    }
}

/* Same content with another resourceVersion: equal fingerprints; a changed request: not. */
static void test_pod_fingerprint(void **state)
{
    const char *a = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"resourceVersion\":\"1\","
                    "\"managedFields\":[{\"manager\":\"x\"}]},\"spec\":{\"containers\":[{\"name\":"
                    "\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]}}";
    const char *b = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"resourceVersion\":\"99\","
                    "\"managedFields\":[{\"manager\":\"y\"}]},\"spec\":{\"containers\":[{\"name\":"
                    "\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]}}";
    const char *c = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"resourceVersion\":\"1\"},"
                    "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":"
                    "{\"cpu\":\"2\"}}}]}}";
    struct kp_entry *ea = NULL, *eb = NULL, *ec = NULL;

    (void)state;
    assert_int_equal(kp_pod_decode(a, strlen(a), &ea), 0);
    assert_int_equal(kp_pod_decode(b, strlen(b), &eb), 0);
    assert_int_equal(kp_pod_decode(c, strlen(c), &ec), 0);
    assert_true(ea->hash == eb->hash);
    assert_true(ea->hash != ec->hash);
    kp_entry_unref(ea);
    kp_entry_unref(eb);
    kp_entry_unref(ec);
}

static void test_pod_rejects(void **state)
{
    static const char *const bad[] = {
        "[]",
        "{}",
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[]}}", /* no namespace */
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"}}",          /* no spec */
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[{\"resources\":"
        "{\"requests\":{\"cpu\":\"lots\"}}}]}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[],"
        "\"tolerations\":[{\"operator\":\"Sometimes\"}]}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[],"
        "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
        "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"k\",\"operator\":\"Gt\","
        "\"values\":[\"x\"]}]}]}}}}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"creationTimestamp\":\"yesterday\"},"
        "\"spec\":{\"containers\":[]}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[{\"ports\":"
        "[{\"containerPort\":1,\"hostPort\":70000}]}]}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[{\"ports\":"
        "[{\"containerPort\":1,\"hostPort\":1,\"protocol\":\"ICMP\"}]}]}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[],"
        "\"resourceClaims\":{\"name\":\"gpu\"}}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[{"
        "\"resources\":{\"claims\":\"gpu\"}}]}}",
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        struct kp_entry *e = NULL;
        int r = kp_pod_decode(bad[i], strlen(bad[i]), &e);

        if (r != -KP_EPARSE)
            fail_msg("case %zu: expected -KP_EPARSE, got %d", i, r);
        assert_null(e);
    }
}

static void test_node(void **state)
{
    struct kp_entry *e = decode_file("objects/node.json", kp_node_decode);
    const struct kp_node_view *n = kp_node_view(e);

    (void)state;
    assert_string_equal(e->key, "host-1");
    assert_string_equal(e->ns, "");
    assert_string_equal(n->provider_id, "kpssh://kpssh-system/host-1");
    assert_string_equal(n->internal_ip, "10.213.0.11");
    assert_string_equal(n->hostname, "host-1");
    assert_int_equal(n->ready, KP_COND_TRUE);
    assert_int_equal(n->taints.n, 2);
    assert_null(n->taints.v[0].value);
    assert_int_equal(n->taints.v[1].effect, KP_TAINT_NO_EXECUTE);
    assert_int_equal(kp_resources_get(&n->capacity, "cpu", NULL), 4000);
    assert_int_equal(kp_resources_get(&n->allocatable, "cpu", NULL), 3800);
    assert_int_equal(kp_resources_get(&n->capacity, "pods", NULL), 110000);
    assert_int_equal(kp_resources_get(&n->allocatable, "memory", NULL), 7531040LL * 1024000);
    assert_int_equal(n->n_finalizers, 1);
    assert_string_equal(n->finalizers[0], "karpenter.sh/termination");
    assert_int_equal(n->n_addresses, 2);
    assert_string_equal(kp_labels_get(&n->meta.labels, "karpenter.sh/nodepool"), "default");
    kp_entry_unref(e);
}

struct emitted {
    const char *v[8];
    size_t n;
};

static void collect(const char *value, void *ctx)
{
    struct emitted *em = ctx;

    assert_true(em->n < KP_ARRAY_SIZE(em->v));
    em->v[em->n++] = value;
}

/* The node-ip index files a Node under every address, each once, not only its first InternalIP:
 * adoption and the host controller accept a host's node IP in any of them. */
static void test_node_ip_index(void **state)
{
    static const char doc[] =
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\","
        "\"uid\":\"u\",\"resourceVersion\":\"1\"},\"status\":{\"addresses\":["
        "{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"},"
        "{\"type\":\"InternalIP\",\"address\":\"10.0.0.6\"},"
        "{\"type\":\"ExternalIP\",\"address\":\"203.0.113.9\"},"
        "{\"type\":\"Hostname\",\"address\":\"10.0.0.5\"}]}}";
    struct emitted em = {0};
    struct kp_entry *e = NULL;

    (void)state;
    assert_int_equal(kp_node_decode(doc, sizeof(doc) - 1, &e), 0);
    kp_index_node_ip(e, collect, &em);
    assert_int_equal(em.n, 3);
    assert_string_equal(em.v[0], "10.0.0.5");
    assert_string_equal(em.v[1], "10.0.0.6");
    assert_string_equal(em.v[2], "203.0.113.9");
    kp_entry_unref(e);
}

/* A heartbeat (lastHeartbeatTime, message) changes nothing we keep. */
static void test_node_heartbeat_same_fingerprint(void **state)
{
    size_t n;
    char *data = kp_test_read_data("objects/node.json", &n);
    struct kp_entry *a = NULL, *b = NULL;
    char *hb;

    (void)state;
    assert_int_equal(kp_node_decode(data, n, &a), 0);
    while ((hb = strstr(data, "08:10:00Z")))
        memcpy(hb, "08:15:00Z", 9);
    assert_int_equal(kp_node_decode(data, n, &b), 0);
    assert_true(a->hash == b->hash);
    kp_entry_unref(a);
    kp_entry_unref(b);
    kp_free(data);
}

static void test_pdb_daemonset_lease(void **state)
{
    struct kp_entry *e = decode_file("objects/pdb.json", kp_pdb_decode);
    const struct kp_pdb_view *pdb = (const struct kp_pdb_view *)e;
    struct kp_labels web = {.v = (const struct kp_label[]){{"app", "web"}}, .n = 1};
    const struct kp_daemonset_view *ds;
    const struct kp_lease_view *l;

    (void)state;
    assert_true(pdb->max_unavailable.set);
    assert_true(pdb->max_unavailable.percent);
    assert_int_equal(pdb->max_unavailable.value, 25);
    assert_false(pdb->min_available.set);
    assert_int_equal(pdb->disruptions_allowed, 1);
    assert_true(pdb->always_allow_unhealthy);
    assert_true(kp_reqs_match(&pdb->selector, &web));
    kp_entry_unref(e);

    e = decode_file("objects/daemonset.json", kp_daemonset_decode);
    ds = (const struct kp_daemonset_view *)e;
    assert_int_equal(kp_resources_get(&ds->requests, "cpu", NULL), 100);
    assert_int_equal(ds->tolerations.n, 1);
    assert_true(ds->tolerations.v[0].exists);
    assert_null(ds->tolerations.v[0].key);
    kp_entry_unref(e);

    e = decode_file("objects/lease.json", kp_lease_decode);
    l = (const struct kp_lease_view *)e;
    assert_string_equal(l->holder, "pod-a_1234");
    assert_int_equal(l->duration_seconds, 15);
    assert_int_equal(l->transitions, 2);
    assert_int_equal(l->renew_usec - l->acquire_usec, 10500000);
    kp_entry_unref(e);
}

/* A DaemonSet's template is not defaulted by the API server as a pod is: a container's limit
 * stands in for a request it does not set (an init container's too), host ports are kept, and
 * a template with DRA claims says so. */
static void test_daemonset_template(void **state)
{
    static const char dra[] =
        "{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"d\",\"uid\":\"u\"},\"spec\":{"
        "\"template\":{\"spec\":{\"resourceClaims\":[{\"name\":\"g\"}],\"containers\":[]}}}}";
    struct kp_entry *e = decode_file("objects/daemonset-template.json", kp_daemonset_decode);
    const struct kp_daemonset_view *ds = kp_daemonset_view(e);

    (void)state;
    /* containers: 200m (limit) + 50m (request, not its 1-CPU limit); the init container's
     * 2-CPU limit is its request and the larger step */
    assert_int_equal(kp_resources_get(&ds->requests, "cpu", NULL), 2000);
    /* 256Mi (limit) + 64Mi (the second container's limit, no memory request) */
    assert_int_equal(kp_resources_get(&ds->requests, "memory", NULL), 320 * MI);
    assert_int_equal(ds->n_host_ports, 1);
    assert_int_equal(ds->host_ports[0].port, 9100);
    assert_int_equal(ds->host_ports[0].protocol, KP_PROTO_TCP);
    assert_null(ds->host_ports[0].ip);
    assert_string_equal(ds->node_selector.v[0].value, "linux");
    assert_int_equal(ds->tolerations.n, 1);
    assert_false(ds->dra);
    kp_entry_unref(e);

    assert_int_equal(kp_daemonset_decode(dra, strlen(dra), &e), 0);
    assert_true(kp_daemonset_view(e)->dra);
    assert_int_equal(kp_daemonset_view(e)->requests.n, 0);
    kp_entry_unref(e);
}

/* The fixture is read with the C library's allocator, so the sweep's failure points fall only
 * on the decoder's own allocations. */
static char *read_fixture_plain(const char *rel, size_t *ret_len)
{
    char path[4096];
    size_t cap = 1 << 16, len = 0, n;
    char *data = malloc(cap);
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", kp_test_data_dir(), rel);
    f = fopen(path, "re");
    if (!f || !data) {
        if (f)
            fclose(f);
        free(data);
        return NULL;
    }
    while ((n = fread(data + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            char *bigger = realloc(data, cap * 2);

            if (!bigger) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    *ret_len = len;
    return data;
}

static int torture_pod(void)
{
    struct kp_entry *e = NULL;
    size_t n = 0;
    char *data = read_fixture_plain("objects/pod-full.json", &n);
    int r;

    if (!data)
        return -EIO;
    r = kp_pod_decode(data, n, &e);
    kp_entry_unref(e);
    free(data);
    return r;
}

/* Every projection stamps its kind; reading an entry as another kind's view aborts at once
 * instead of reading garbage (the layouts differ). */
static void test_view_kind_checked(void **state)
{
    const char node[] = "{\"metadata\":{\"name\":\"n1\",\"uid\":\"u\","
                        "\"resourceVersion\":\"1\"}}";
    struct kp_entry *e = NULL;
    int status = 0;
    pid_t pid;

    (void)state;
    assert_int_equal(kp_node_decode(node, strlen(node), &e), 0);
    assert_ptr_equal(e->kind, kp_kind_node);
    assert_ptr_equal(kp_node_view(e), (const void *)e);
    assert_null(kp_node_view(NULL));
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)kp_pod_view(e); /* a Node read as a Pod */
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    kp_entry_unref(e);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_full),
        cmocka_unit_test(test_pod_minimal),
        cmocka_unit_test(test_pod_host_ports),
        cmocka_unit_test(test_pod_level_resources),
        cmocka_unit_test(test_pod_owners),
        cmocka_unit_test(test_pod_do_not_disrupt),
        cmocka_unit_test(test_pod_dra_and_ready),
        cmocka_unit_test(test_pvc_fields),
        cmocka_unit_test(test_pod_shapes_shared),
        cmocka_unit_test(test_pod_resize_requests),
        cmocka_unit_test(test_pod_fingerprint),
        cmocka_unit_test(test_pod_rejects),
        cmocka_unit_test(test_node),
        cmocka_unit_test(test_node_heartbeat_same_fingerprint),
        cmocka_unit_test(test_node_ip_index),
        cmocka_unit_test(test_pdb_daemonset_lease),
        cmocka_unit_test(test_daemonset_template),
        cmocka_unit_test(test_view_kind_checked),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_pod),
    };

    return kp_test_main("obj", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture), argc,
                        argv);
}
