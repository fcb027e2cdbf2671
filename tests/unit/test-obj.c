/* Tests for the built-in projections (k8s/obj-*.c): every kept field of realistic objects, the
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
#include "k8s/obj-misc.h"
#include "k8s/obj-node.h"
#include "k8s/obj-pod.h"

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
    kp_entry_unref(e);
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
        cmocka_unit_test(test_pod_fingerprint),
        cmocka_unit_test(test_pod_rejects),
        cmocka_unit_test(test_node),
        cmocka_unit_test(test_node_heartbeat_same_fingerprint),
        cmocka_unit_test(test_pdb_daemonset_lease),
        cmocka_unit_test(test_view_kind_checked),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_pod),
    };

    return kp_test_main("obj", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture), argc,
                        argv);
}
