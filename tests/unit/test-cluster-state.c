/* Tests for core/state/cluster.h: the sums of a node's bound pods after bind, unbind, terminal
 * phase, delete and a move between nodes; a NodeClaim before its Node and the reverse; Karpenter's
 * synced rule; no double counting when an update repeats; host ports, DaemonSet sums, the
 * uninitialized node's capacity from its NodeClaim, marks, the observer report; and the
 * registration on the shared informers (events fed through kp_informer_apply, no server).
 *
 * Most tests feed decoded entries straight to the event functions of a detached state, with
 * (old, new) pairs as the informer would pass them. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/err.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/observe.h"
#include "core/state/cluster.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "kp-fake-provider.h"

#define MI (1024LL * 1024 * 1000) /* one MiB in milli-bytes */
#define PID(n) "fake://" n

/* Test objects decode from JSON (tests/lib/kp-test.h). */
#define decode(fn, ...) kp_test_decode(fn, false, __VA_ARGS__)

/* A managed, registered and initialized Node unless labels say otherwise. */
static struct kp_entry *node(const char *name, const char *pid, const char *labels,
                             const char *alloc)
{
    return decode(kp_node_decode,
                  "{\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%s\",\"resourceVersion\":\"1\","
                  "\"labels\":{%s}},\"spec\":{%s%s%s},\"status\":{\"capacity\":{%s},"
                  "\"allocatable\":{%s}}}",
                  name, name, labels, pid ? "\"providerID\":\"" : "", pid ? pid : "",
                  pid ? "\"" : "", alloc, alloc);
}

#define NODE_LABELS                                                                                \
    "\"karpenter.sh/nodepool\":\"np\",\"node.kubernetes.io/instance-type\":\"small\","             \
    "\"karpenter.sh/registered\":\"true\",\"karpenter.sh/initialized\":\"true\""
#define ALLOC "\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\""

static struct kp_entry *claim(const char *name, const char *pid, const char *extra_meta,
                              const char *alloc, const char *conds)
{
    return decode(kp_nodeclaim_decode,
                  "{\"metadata\":{\"name\":\"%s\",\"uid\":\"c-%s\",\"resourceVersion\":\"1\","
                  "\"labels\":{\"karpenter.sh/nodepool\":\"np\"}%s},\"spec\":{\"nodeClassRef\":"
                  "{\"group\":\"" KP_FAKE_NODECLASS_GROUP "\",\"kind\":\"" KP_FAKE_NODECLASS_KIND
                  "\",\"name\":\"d\"},\"requirements\":[]},\"status\":{%s%s%s\"capacity\":{%s},"
                  "\"allocatable\":{%s},\"conditions\":[%s]}}",
                  name, name, extra_meta, pid ? "\"providerID\":\"" : "", pid ? pid : "",
                  pid ? "\"," : "", alloc, alloc, conds);
}

/* A running pod bound to node (NULL: unbound) requesting cpu/memory; extra goes in spec. */
static struct kp_entry *pod(const char *name, const char *node_name, const char *cpu,
                            const char *phase, const char *extra_meta, const char *extra_spec)
{
    return decode(kp_pod_decode,
                  "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"p-%s\","
                  "\"resourceVersion\":\"1\"%s},\"spec\":{%s%s%s\"containers\":[{\"name\":\"c\","
                  "\"resources\":{\"requests\":{\"cpu\":\"%s\",\"memory\":\"1Gi\"},\"limits\":"
                  "{\"memory\":\"2Gi\"}}}]%s},\"status\":{\"phase\":\"%s\"}}",
                  name, name, extra_meta, node_name ? "\"nodeName\":\"" : "",
                  node_name ? node_name : "", node_name ? "\"," : "", cpu, extra_spec, phase);
}

static struct kp_cluster_state *state_new(void)
{
    struct kp_cluster_state *s = NULL;

    assert_int_equal(kp_cluster_state_new_detached(NULL, &s), 0);
    kp_cluster_state_set_informers_synced(s, true);
    return s;
}

/* Feeding helpers: the informer's (old, new) with the caller's references dropped after. */
static void put(void (*ev)(struct kp_cluster_state *, const struct kp_entry *,
                           const struct kp_entry *),
                struct kp_cluster_state *s, struct kp_entry **cur, struct kp_entry *e)
{
    ev(s, *cur, e);
    kp_entry_unref(*cur);
    *cur = e;
}

static void gone(void (*ev)(struct kp_cluster_state *, const struct kp_entry *,
                            const struct kp_entry *),
                 struct kp_cluster_state *s, struct kp_entry **cur)
{
    ev(s, *cur, NULL);
    *cur = kp_entry_unref(*cur);
}

#define NODE_EV kp_cluster_state_node_event
#define CLAIM_EV kp_cluster_state_nodeclaim_event
#define POD_EV kp_cluster_state_pod_event

/* The one state node of pid, as a snapshot the caller frees. */
static struct kp_state_snapshot *get(struct kp_cluster_state *s, const char *pid)
{
    struct kp_state_snapshot *snap = NULL;

    assert_int_equal(kp_cluster_state_get_by_provider_id(s, pid, &snap), 0);
    assert_int_equal(snap->n, 1);
    return snap;
}

static int64_t req(const struct kp_state_node *n, const char *res)
{
    return kp_resources_get(&n->pod_requests, res, NULL);
}

/* Bind, update, unbind, terminal phase, delete: the node's sums follow exactly. */
static void test_pod_lifecycle_sums(void **state)
{
    struct kp_cluster_state *s = state_new();
    struct kp_entry *n1 = NULL, *a = NULL, *b = NULL;
    struct kp_state_snapshot *snap;
    struct kp_res avail[8];
    size_t na;

    (void)state;
    put(NODE_EV, s, &n1, node("n1", PID("n1"), NODE_LABELS, ALLOC));
    put(POD_EV, s, &a, pod("a", NULL, "500m", "Pending", "", ""));
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 0);
    assert_int_equal(snap->v[0].pod_requests.n, 0);
    snap = kp_state_snapshot_free(snap);

    put(POD_EV, s, &a, pod("a", "n1", "500m", "Pending", "", "")); /* bound */
    put(POD_EV, s, &b, pod("b", "n1", "1", "Running", "", ""));
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 2);
    assert_int_equal(req(&snap->v[0], "cpu"), 1500);
    assert_int_equal(req(&snap->v[0], "memory"), 2048 * MI);
    assert_int_equal(req(&snap->v[0], "pods"), 2000); /* RequestsForPods counts pods: 1 each */
    assert_int_equal(kp_resources_get(&snap->v[0].pod_limits, "memory", NULL), 4096 * MI);
    na = kp_state_node_available(&snap->v[0], avail, KP_ARRAY_SIZE(avail));
    assert_int_equal(na, 3);
    for (size_t i = 0; i < na; i++)
        if (strcmp(avail[i].name, "cpu") == 0)
            assert_int_equal(avail[i].milli, 2500);
    snap = kp_state_snapshot_free(snap);

    /* An in-place change of requests replaces the share, it does not add a second. */
    put(POD_EV, s, &b, pod("b", "n1", "2", "Running", "", ""));
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 2);
    assert_int_equal(req(&snap->v[0], "cpu"), 2500);
    snap = kp_state_snapshot_free(snap);

    /* Terminal: Succeeded pods hold nothing; a terminating (deleted, still running) one does. */
    put(POD_EV, s, &b, pod("b", "n1", "2", "Succeeded", "", ""));
    put(POD_EV, s, &a,
        pod("a", "n1", "500m", "Running", ",\"deletionTimestamp\":\"2026-11-30T08:00:00Z\"", ""));
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 1);
    assert_int_equal(req(&snap->v[0], "cpu"), 500);
    snap = kp_state_snapshot_free(snap);

    /* Unbound again (a re-used name), then deleted. */
    put(POD_EV, s, &a, pod("a", NULL, "500m", "Pending", "", ""));
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 0);
    assert_int_equal(req(&snap->v[0], "cpu"), 0);
    snap = kp_state_snapshot_free(snap);
    put(POD_EV, s, &a, pod("a", "n1", "500m", "Running", "", ""));
    gone(POD_EV, s, &a);
    gone(POD_EV, s, &b);
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 0);
    assert_int_equal(snap->v[0].pod_requests.n, 0);
    assert_int_equal(snap->v[0].pod_limits.n, 0);
    snap = kp_state_snapshot_free(snap);
    gone(NODE_EV, s, &n1);
    assert_int_equal(kp_cluster_state_node_count(s), 0);
    kp_cluster_state_free(s);
}

/* The same update (or an add for a pod already counted) delivered twice counts once. */
static void test_repeated_update_counts_once(void **state)
{
    struct kp_cluster_state *s = state_new();
    struct kp_entry *n1 = NULL, *a = pod("a", "n1", "1", "Running", "", "");
    struct kp_state_snapshot *snap;

    (void)state;
    put(NODE_EV, s, &n1, node("n1", PID("n1"), NODE_LABELS, ALLOC));
    POD_EV(s, NULL, a);
    POD_EV(s, NULL, a);
    POD_EV(s, a, a);
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 1);
    assert_int_equal(req(&snap->v[0], "cpu"), 1000);
    snap = kp_state_snapshot_free(snap);
    /* A repeated delete takes nothing more away. */
    POD_EV(s, a, NULL);
    POD_EV(s, a, NULL);
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 0);
    snap = kp_state_snapshot_free(snap);
    kp_entry_unref(a);
    gone(NODE_EV, s, &n1);
    kp_cluster_state_free(s);
}

/* A pod whose name moves to another node leaves the first node's sums. Pods bound before their
 * Node is known are counted when it arrives. */
static void test_pod_moves_and_early_pods(void **state)
{
    struct kp_cluster_state *s = state_new();
    struct kp_entry *n1 = NULL, *n2 = NULL, *a = NULL, *early = NULL;
    struct kp_state_snapshot *snap;

    (void)state;
    put(POD_EV, s, &early, pod("early", "n2", "250m", "Running", "", ""));
    put(NODE_EV, s, &n1, node("n1", PID("n1"), NODE_LABELS, ALLOC));
    put(POD_EV, s, &a, pod("a", "n1", "1", "Running", "", ""));
    assert_int_equal(kp_cluster_state_node_count(s), 1);
    put(NODE_EV, s, &n2, node("n2", PID("n2"), NODE_LABELS, ALLOC));
    snap = get(s, PID("n2"));
    assert_int_equal(snap->v[0].pods, 1);
    assert_int_equal(req(&snap->v[0], "cpu"), 250);
    snap = kp_state_snapshot_free(snap);

    put(POD_EV, s, &a, pod("a", "n2", "1", "Running", "", ""));
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 0);
    assert_int_equal(req(&snap->v[0], "cpu"), 0);
    snap = kp_state_snapshot_free(snap);
    assert_int_equal(kp_cluster_state_get_by_node_name(s, "n2", &snap), 0);
    assert_string_equal(snap->v[0].provider_id, PID("n2"));
    assert_int_equal(snap->v[0].pods, 2);
    assert_int_equal(req(&snap->v[0], "cpu"), 1250);
    snap = kp_state_snapshot_free(snap);

    /* A Node deleted and re-created under its name finds its pods' sums still there. */
    {
        struct kp_entry *again = NULL;

        gone(NODE_EV, s, &n2);
        assert_int_equal(kp_cluster_state_get_by_node_name(s, "n2", &snap), -ENOENT);
        put(NODE_EV, s, &again, node("n2", PID("n2b"), NODE_LABELS, ALLOC));
        snap = get(s, PID("n2b"));
        assert_int_equal(snap->v[0].pods, 2);
        snap = kp_state_snapshot_free(snap);
        gone(NODE_EV, s, &again);
    }
    gone(POD_EV, s, &a);
    gone(POD_EV, s, &early);
    gone(NODE_EV, s, &n1);
    assert_int_equal(kp_cluster_state_node_count(s), 0);
    kp_cluster_state_free(s);
}

/* NodeClaim first, then its Node (and the reverse): one state node joining both; an
 * uninitialized node's capacity comes from the NodeClaim where the Node has none. */
static void test_claim_and_node_join(void **state)
{
    struct kp_cluster_state *s = state_new();
    struct kp_entry *c1 = NULL, *n1 = NULL, *c2 = NULL, *n2 = NULL;
    struct kp_state_snapshot *snap;
    const struct kp_state_node *x;

    (void)state;
    /* 1: claim before node. */
    put(CLAIM_EV, s, &c1, claim("c1", PID("h1"), "", ALLOC ",\"example.com/gpu\":\"1\"", ""));
    snap = get(s, PID("h1"));
    x = &snap->v[0];
    assert_true(x->flags & KP_STATE_NODE_MANAGED);
    assert_false(x->flags & KP_STATE_NODE_REGISTERED);
    assert_false(x->flags & KP_STATE_NODE_INITIALIZED);
    assert_null(x->node);
    assert_string_equal(x->name, "c1");
    assert_string_equal(x->nodepool, "np");
    assert_int_equal(kp_resources_get(&x->allocatable, "cpu", NULL), 4000);
    snap = kp_state_snapshot_free(snap);

    /* The Node registers (not yet initialized): its zero cpu and missing gpu come from the
     * claim, its own memory stays. */
    put(NODE_EV, s, &n1,
        node("h1", PID("h1"),
             "\"karpenter.sh/nodepool\":\"np\",\"node.kubernetes.io/instance-type\":\"small\","
             "\"karpenter.sh/registered\":\"true\"",
             "\"cpu\":\"0\",\"memory\":\"4Gi\""));
    assert_int_equal(kp_cluster_state_node_count(s), 1);
    snap = get(s, PID("h1"));
    x = &snap->v[0];
    assert_non_null(x->node);
    assert_non_null(x->nodeclaim);
    assert_string_equal(x->name, "h1");
    assert_true(x->flags & KP_STATE_NODE_REGISTERED);
    assert_false(x->flags & KP_STATE_NODE_INITIALIZED);
    assert_int_equal(kp_resources_get(&x->allocatable, "cpu", NULL), 4000);
    assert_int_equal(kp_resources_get(&x->allocatable, "memory", NULL), 4096 * MI);
    assert_int_equal(kp_resources_get(&x->allocatable, "example.com/gpu", NULL), 1000);
    snap = kp_state_snapshot_free(snap);
    /* Initialized: the Node's own lists only. */
    put(NODE_EV, s, &n1, node("h1", PID("h1"), NODE_LABELS, "\"cpu\":\"0\",\"memory\":\"4Gi\""));
    snap = get(s, PID("h1"));
    assert_true(snap->v[0].flags & KP_STATE_NODE_INITIALIZED);
    assert_int_equal(kp_resources_get(&snap->v[0].allocatable, "cpu", NULL), 0);
    assert_int_equal(snap->v[0].allocatable.n, 2);
    snap = kp_state_snapshot_free(snap);

    /* 2: node before claim. */
    put(NODE_EV, s, &n2, node("h2", PID("h2"), NODE_LABELS, ALLOC));
    snap = get(s, PID("h2"));
    assert_false(snap->v[0].flags & KP_STATE_NODE_MANAGED);
    assert_true(snap->v[0].flags & KP_STATE_NODE_INITIALIZED); /* unmanaged counts as such */
    snap = kp_state_snapshot_free(snap);
    put(CLAIM_EV, s, &c2, claim("c2", PID("h2"), "", ALLOC, ""));
    assert_int_equal(kp_cluster_state_node_count(s), 2);
    snap = get(s, PID("h2"));
    assert_true(snap->v[0].flags & KP_STATE_NODE_MANAGED);
    assert_string_equal(snap->v[0].nodeclaim_name, "c2");
    assert_string_equal(snap->v[0].node_name, "h2");
    snap = kp_state_snapshot_free(snap);

    /* The claim goes: the Node stays alone; the Node goes: nothing is left. */
    gone(CLAIM_EV, s, &c2);
    snap = get(s, PID("h2"));
    assert_null(snap->v[0].nodeclaim);
    snap = kp_state_snapshot_free(snap);
    gone(NODE_EV, s, &n2);
    gone(NODE_EV, s, &n1);
    snap = get(s, PID("h1"));
    assert_null(snap->v[0].node);
    assert_string_equal(snap->v[0].name, "c1");
    snap = kp_state_snapshot_free(snap);
    gone(CLAIM_EV, s, &c1);
    assert_int_equal(kp_cluster_state_node_count(s), 0);
    kp_cluster_state_free(s);
}

/* Synced: informers synced, no NodeClaim without a providerID, and before the first sync every
 * Node in the state (a managed Node without instance-type label or providerID waits). */
static void test_synced(void **state)
{
    struct kp_cluster_state *s = NULL;
    struct kp_entry *c1 = NULL, *bare = NULL;

    (void)state;
    assert_int_equal(kp_cluster_state_new_detached(NULL, &s), 0);
    assert_false(kp_cluster_state_synced(s)); /* informers not synced */
    kp_cluster_state_set_informers_synced(s, true);
    assert_true(kp_cluster_state_synced(s)); /* empty and informers synced */
    kp_cluster_state_free(s);

    assert_int_equal(kp_cluster_state_new_detached(NULL, &s), 0);
    kp_cluster_state_set_informers_synced(s, true);
    put(NODE_EV, s, &bare,
        node("bare", NULL, "\"karpenter.sh/nodepool\":\"np\"", ALLOC)); /* waits */
    assert_int_equal(kp_cluster_state_node_count(s), 0);
    assert_false(kp_cluster_state_synced(s));
    put(NODE_EV, s, &bare, node("bare", PID("bare"), "\"karpenter.sh/nodepool\":\"np\"", ALLOC));
    assert_false(kp_cluster_state_synced(s)); /* still no instance-type label */
    put(NODE_EV, s, &bare, node("bare", PID("bare"), NODE_LABELS, ALLOC));
    assert_int_equal(kp_cluster_state_node_count(s), 1);
    assert_true(kp_cluster_state_synced(s));

    /* A launching NodeClaim (no providerID) unsyncs until it has one. */
    put(CLAIM_EV, s, &c1, claim("c1", NULL, "", ALLOC, ""));
    assert_false(kp_cluster_state_synced(s));
    put(CLAIM_EV, s, &c1, claim("c1", NULL, "", ALLOC, "")); /* repeated: counted once */
    put(CLAIM_EV, s, &c1, claim("c1", PID("n1"), "", ALLOC, ""));
    assert_true(kp_cluster_state_synced(s));
    put(CLAIM_EV, s, &c1, claim("c1", NULL, "", ALLOC, ""));
    assert_false(kp_cluster_state_synced(s));
    gone(CLAIM_EV, s, &c1); /* deleted before it launched */
    assert_true(kp_cluster_state_synced(s));

    /* After the first sync a waiting Node no longer holds it back (upstream stops checking). */
    {
        struct kp_entry *late = NULL;

        put(NODE_EV, s, &late, node("late", NULL, "\"karpenter.sh/nodepool\":\"np\"", ALLOC));
        assert_true(kp_cluster_state_synced(s));
        gone(NODE_EV, s, &late);
    }
    kp_cluster_state_set_informers_synced(s, false);
    assert_false(kp_cluster_state_synced(s));
    gone(NODE_EV, s, &bare);
    kp_cluster_state_free(s);
}

static uint64_t fake_now = 1796025600000000ULL;

static uint64_t fake_clock(void)
{
    return fake_now;
}

/* Deleting and marks: Karpenter's Deleted() and MarkedForDeletion(), and nomination against
 * the env's clock. */
static void test_deleting_and_marks(void **state)
{
    struct kp_core_env env = {.now_usec = fake_clock};
    struct kp_cluster_state *s = NULL;
    struct kp_entry *c1 = NULL, *c2 = NULL, *n3 = NULL;
    struct kp_state_snapshot *snap = NULL;
    int64_t now = 0;

    (void)state;
    assert_int_equal(kp_cluster_state_new_detached(&env, &s), 0);
    put(CLAIM_EV, s, &c1, claim("c1", PID("h1"), "", ALLOC, ""));
    put(CLAIM_EV, s, &c2,
        claim("c2", PID("h2"), "", ALLOC,
              "{\"type\":\"InstanceTerminating\",\"status\":\"True\",\"reason\":\"x\"}"));
    put(NODE_EV, s, &n3, node("h3", NULL, "", ALLOC)); /* unmanaged, no providerID: keyed by name */
    snap = get(s, PID("h2"));
    assert_true(snap->v[0].flags & KP_STATE_NODE_DELETING);
    assert_true(snap->v[0].flags & KP_STATE_NODE_MARKED_FOR_DELETION);
    snap = kp_state_snapshot_free(snap);
    snap = get(s, "h3");
    assert_int_equal(snap->v[0].flags & KP_STATE_NODE_DELETING, 0);
    snap = kp_state_snapshot_free(snap);

    snap = get(s, PID("h1"));
    assert_int_equal(snap->v[0].flags & KP_STATE_NODE_MARKED_FOR_DELETION, 0);
    now = snap->taken_usec;
    assert_int_equal(now, (int64_t)fake_now);
    snap = kp_state_snapshot_free(snap);
    assert_int_equal(kp_cluster_state_mark_for_deletion(s, PID("h1"), true), 0);
    assert_int_equal(kp_cluster_state_nominate(s, PID("h1"), now + 20 * 1000000LL), 0);
    assert_int_equal(kp_cluster_state_mark_for_deletion(s, PID("nope"), true), -ENOENT);
    snap = get(s, PID("h1"));
    assert_true(snap->v[0].flags & KP_STATE_NODE_MARKED_FOR_DELETION);
    assert_false(snap->v[0].flags & KP_STATE_NODE_DELETING);
    assert_true(snap->v[0].flags & KP_STATE_NODE_NOMINATED);
    snap = kp_state_snapshot_free(snap);
    assert_int_equal(kp_cluster_state_mark_for_deletion(s, PID("h1"), false), 0);
    fake_now += 20 * 1000000ULL; /* the nomination window ends */
    snap = get(s, PID("h1"));
    assert_int_equal(
        snap->v[0].flags & (KP_STATE_NODE_MARKED_FOR_DELETION | KP_STATE_NODE_NOMINATED), 0);
    snap = kp_state_snapshot_free(snap);
    /* A NodeClaim being deleted. */
    put(CLAIM_EV, s, &c1,
        claim("c1", PID("h1"), ",\"deletionTimestamp\":\"2026-11-30T08:00:00Z\"", ALLOC, ""));
    snap = get(s, PID("h1"));
    assert_true(snap->v[0].flags & KP_STATE_NODE_DELETING);
    snap = kp_state_snapshot_free(snap);

    assert_int_equal(kp_cluster_state_snapshot(s, &snap), 0);
    assert_int_equal(snap->n, 3);
    snap = kp_state_snapshot_free(snap);
    gone(CLAIM_EV, s, &c1);
    gone(CLAIM_EV, s, &c2);
    gone(NODE_EV, s, &n3);
    kp_cluster_state_free(s);
}

/* DaemonSet pods count in both sums; host ports of all pods are listed per node. */
static void test_daemonsets_and_host_ports(void **state)
{
    struct kp_cluster_state *s = state_new();
    struct kp_entry *n1 = NULL, *ds = NULL, *web = NULL;
    struct kp_state_snapshot *snap, *kept;
    struct kp_host_port want = {.ip = NULL, .port = 9100, .protocol = KP_PROTO_TCP};

    (void)state;
    put(NODE_EV, s, &n1, node("n1", PID("n1"), NODE_LABELS, ALLOC));
    put(POD_EV, s, &ds,
        decode(kp_pod_decode,
               "{\"metadata\":{\"name\":\"ds\",\"namespace\":\"ns\",\"ownerReferences\":[{"
               "\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"exporter\",\"uid\":"
               "\"d\",\"controller\":true}]},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{"
               "\"name\":\"c\",\"ports\":[{\"containerPort\":9100,\"hostPort\":9100}],"
               "\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}]},\"status\":{\"phase\":"
               "\"Running\"}}"));
    put(POD_EV, s, &web,
        decode(kp_pod_decode,
               "{\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\"},\"spec\":{\"nodeName\":"
               "\"n1\",\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,"
               "\"hostPort\":8080,\"hostIP\":\"10.0.0.1\"},{\"containerPort\":53,\"hostPort\":53,"
               "\"protocol\":\"UDP\"}],\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]},"
               "\"status\":{\"phase\":\"Running\"}}"));
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].pods, 2);
    assert_int_equal(snap->v[0].daemon_pods, 1);
    assert_int_equal(req(&snap->v[0], "cpu"), 1100);
    assert_int_equal(kp_resources_get(&snap->v[0].daemon_requests, "cpu", NULL), 100);
    assert_int_equal(kp_resources_get(&snap->v[0].daemon_requests, "pods", NULL), 1000);
    assert_int_equal(snap->v[0].n_host_ports, 3);
    {
        bool hit = false;

        for (size_t i = 0; i < snap->v[0].n_host_ports; i++)
            hit = hit || kp_host_port_conflicts(&snap->v[0].host_ports[i], &want);
        assert_true(hit);
    }
    kept = snap; /* a snapshot outlives later changes */

    gone(POD_EV, s, &web);
    snap = get(s, PID("n1"));
    assert_int_equal(snap->v[0].n_host_ports, 1);
    assert_int_equal(snap->v[0].host_ports[0].port, 9100);
    assert_null(snap->v[0].host_ports[0].ip);
    snap = kp_state_snapshot_free(snap);
    gone(POD_EV, s, &ds);
    gone(NODE_EV, s, &n1);
    kp_cluster_state_free(s);
    /* Everything the old snapshot shows is its own. */
    assert_int_equal(kept->v[0].n_host_ports, 3);
    assert_string_equal(kept->v[0].node_name, "n1");
    assert_int_equal(kp_resources_get(&kept->v[0].allocatable, "cpu", NULL), 4000);
    kp_state_snapshot_free(kept);
}

/* NodeClaims of node classes the provider does not serve are not tracked (nor unsync). */
static void test_unmanaged_claims_ignored(void **state)
{
    struct kp_fake_provider *fp = NULL;
    struct kp_provider prov;
    struct kp_core_env env = {0};
    struct kp_cluster_state *s = NULL;
    struct kp_entry *other = NULL, *ours = NULL;

    (void)state;
    assert_int_equal(kp_fake_provider_new(&fp), 0);
    prov = kp_fake_provider_as_provider(fp);
    env.provider = &prov;
    assert_int_equal(kp_cluster_state_new_detached(&env, &s), 0);
    kp_cluster_state_set_informers_synced(s, true);
    put(CLAIM_EV, s, &other,
        decode(kp_nodeclaim_decode,
               "{\"metadata\":{\"name\":\"o\"},\"spec\":{\"nodeClassRef\":{\"group\":"
               "\"karpenter.k8s.aws\",\"kind\":\"EC2NodeClass\",\"name\":\"d\"},"
               "\"requirements\":[]}}"));
    assert_true(kp_cluster_state_synced(s));
    put(CLAIM_EV, s, &ours, claim("c", PID("h"), "", ALLOC, ""));
    assert_int_equal(kp_cluster_state_node_count(s), 1);
    gone(CLAIM_EV, s, &other);
    gone(CLAIM_EV, s, &ours);
    kp_cluster_state_free(s);
    kp_fake_provider_free(fp);
}

/* Writers on two threads (as the Pod and Node informers are) while a reader takes snapshots:
 * the sums come out exact (run under the tsan preset for races). */
struct feeder {
    struct kp_cluster_state *s;
    struct kp_entry **pods;
    size_t n;
};

static void *feed(void *arg)
{
    struct feeder *f = arg;

    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < f->n; i++)
            POD_EV(f->s, NULL, f->pods[i]);
    return NULL;
}

static void test_concurrent_writers_and_readers(void **state)
{
    enum { PER = 200 };
    struct kp_cluster_state *s = state_new();
    struct kp_entry *pa[PER], *pb[PER], *n1 = NULL;
    struct feeder fa, fb;
    pthread_t ta, tb;
    char name[32];

    (void)state;
    for (size_t i = 0; i < PER; i++) {
        (void)snprintf(name, sizeof(name), "a%zu", i);
        pa[i] = pod(name, "n1", "10m", "Running", "", "");
        (void)snprintf(name, sizeof(name), "b%zu", i);
        pb[i] = pod(name, "n1", "20m", "Running", "", "");
    }
    fa = (struct feeder){s, pa, PER};
    fb = (struct feeder){s, pb, PER};
    assert_int_equal(pthread_create(&ta, NULL, feed, &fa), 0);
    assert_int_equal(pthread_create(&tb, NULL, feed, &fb), 0);
    put(NODE_EV, s, &n1, node("n1", PID("n1"), NODE_LABELS, ALLOC));
    for (int i = 0; i < 50; i++) {
        struct kp_state_snapshot *snap = NULL;

        assert_int_equal(kp_cluster_state_snapshot(s, &snap), 0);
        for (size_t k = 0; k < snap->n; k++)
            assert_true(snap->v[k].pods <= 2 * PER);
        kp_state_snapshot_free(snap);
    }
    assert_int_equal(pthread_join(ta, NULL), 0);
    assert_int_equal(pthread_join(tb, NULL), 0);
    {
        struct kp_state_snapshot *snap = get(s, PID("n1"));

        assert_int_equal(snap->v[0].pods, 2 * PER);
        assert_int_equal(req(&snap->v[0], "cpu"), PER * 10 + PER * 20);
        kp_state_snapshot_free(snap);
    }
    for (size_t i = 0; i < PER; i++) {
        kp_entry_unref(pa[i]);
        kp_entry_unref(pb[i]);
    }
    gone(NODE_EV, s, &n1);
    kp_cluster_state_free(s);
}

struct gauges {
    double synced, nodes;
    int calls;
};

static void on_gauge(void *ctx, enum kp_core_metric m, const char *const *labels, double v)
{
    struct gauges *g = ctx;

    assert_null(labels[0]); /* both families have no labels */
    if (m == KP_CM_CLUSTER_STATE_SYNCED)
        g->synced = v;
    else if (m == KP_CM_CLUSTER_STATE_NODE_COUNT)
        g->nodes = v;
    g->calls++;
}

static void test_report(void **state)
{
    struct gauges g = {-1, -1, 0};
    struct kp_core_observer obs = {.gauge = on_gauge, .ctx = &g};
    struct kp_core_env env = {.observer = &obs};
    struct kp_cluster_state *s = NULL;
    struct kp_entry *n1 = NULL;

    (void)state;
    assert_int_equal(kp_cluster_state_new_detached(&env, &s), 0);
    kp_cluster_state_report(s);
    assert_int_equal(g.calls, 2);
    assert_true(g.synced == 0.0);
    assert_true(g.nodes == 0.0);
    kp_cluster_state_set_informers_synced(s, true);
    put(NODE_EV, s, &n1, node("n1", PID("n1"), NODE_LABELS, ALLOC));
    kp_cluster_state_report(s);
    assert_true(g.synced == 1.0);
    assert_true(g.nodes == 1.0);
    gone(NODE_EV, s, &n1);
    kp_cluster_state_free(s);
}

/* Registered on the shared informers: events applied to them reach the state; free takes the
 * handlers back out. */
static void test_registers_on_informers(void **state)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};
    struct kp_client *c = NULL;
    struct kp_registry *reg = NULL;
    struct kp_informer *nodes = NULL, *pods = NULL, *claims = NULL;
    struct kp_core_env env = {0};
    struct kp_cluster_state *s = NULL;
    struct kp_state_snapshot *snap = NULL;
    json_t *obj = NULL;
    static const char n1[] =
        "{\"metadata\":{\"name\":\"n1\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{"
        "\"providerID\":\"fake://n1\"},\"status\":{\"allocatable\":{\"cpu\":\"2\"}}}";
    static const char p1[] =
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":"
        "\"1\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"resources\":{"
        "\"requests\":{\"cpu\":\"1\"}}}]}}";

    (void)state;
    assert_int_equal(kp_client_new(&to, &c), 0);
    assert_int_equal(kp_registry_new(c, &reg), 0);
    env.informers = reg;
    assert_int_equal(kp_cluster_state_new(&env, &s), 0);
    assert_int_equal(kp_informers_nodes(reg, &nodes), 0);
    assert_int_equal(kp_informers_pods(reg, &pods), 0);
    assert_int_equal(kp_informers_nodeclaims(reg, &claims), 0);
    assert_int_equal(kp_informer_handler_count(nodes), 1);
    assert_int_equal(kp_informer_handler_count(pods), 1);
    assert_int_equal(kp_informer_handler_count(claims), 1);

    assert_int_equal(kp_json_parse(n1, sizeof(n1) - 1, sizeof(n1), 0, &obj, NULL), 0);
    assert_int_equal(kp_informer_apply(nodes, KP_INFORMER_UPSERT, obj), 0);
    kp_json_unref(obj);
    assert_int_equal(kp_json_parse(p1, sizeof(p1) - 1, sizeof(p1), 0, &obj, NULL), 0);
    assert_int_equal(kp_informer_apply(pods, KP_INFORMER_UPSERT, obj), 0);
    assert_false(kp_cluster_state_synced(s)); /* the informers have not listed */
    assert_int_equal(kp_cluster_state_get_by_node_name(s, "n1", &snap), 0);
    assert_int_equal(snap->v[0].pods, 1);
    assert_int_equal(req(&snap->v[0], "cpu"), 1000);
    snap = kp_state_snapshot_free(snap);
    assert_int_equal(kp_informer_apply(pods, KP_INFORMER_DELETE, obj), 0);
    kp_json_unref(obj);
    assert_int_equal(kp_cluster_state_get_by_node_name(s, "n1", &snap), 0);
    assert_int_equal(snap->v[0].pods, 0);
    snap = kp_state_snapshot_free(snap);

    kp_cluster_state_free(s);
    assert_int_equal(kp_informer_handler_count(nodes), 0);
    assert_int_equal(kp_informer_handler_count(pods), 0);
    assert_int_equal(kp_informer_handler_count(claims), 0);
    kp_registry_free(reg);
    kp_client_free(c);
}

/* Allocation failures while feeding: no crash, no leak, and a state that lost an update says
 * so by never reporting synced. */
static int torture_feed(void)
{
    struct kp_cluster_state *s = NULL;
    struct kp_entry *n1 = NULL, *c1 = NULL, *a = NULL, *b = NULL;
    struct kp_state_snapshot *snap = NULL;
    static const char nj[] = "{\"metadata\":{\"name\":\"n1\",\"labels\":{" NODE_LABELS
                             "}},\"spec\":{\"providerID\":\"fake://n1\"},\"status\":{"
                             "\"allocatable\":{\"cpu\":\"2\"}}}";
    static const char cj[] = "{\"metadata\":{\"name\":\"c1\"},\"spec\":{\"nodeClassRef\":{"
                             "\"kind\":\"K\",\"name\":\"d\"},\"requirements\":[]},\"status\":{"
                             "\"providerID\":\"fake://n1\"}}";
    static const char aj[] = "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"},\"spec\":{"
                             "\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"ports\":[{"
                             "\"containerPort\":1,\"hostPort\":1}],\"resources\":{\"requests\":"
                             "{\"cpu\":\"1\",\"example.com/x\":\"1\"}}}]}}";
    static const char bj[] = "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"},\"spec\":{"
                             "\"nodeName\":\"n2\",\"containers\":[{\"name\":\"c\"}]}}";
    int r;

    if ((r = kp_cluster_state_new_detached(NULL, &s)) < 0)
        return r;
    if ((r = kp_node_decode(nj, sizeof(nj) - 1, &n1)) < 0 ||
        (r = kp_nodeclaim_decode(cj, sizeof(cj) - 1, &c1)) < 0 ||
        (r = kp_pod_decode(aj, sizeof(aj) - 1, &a)) < 0 ||
        (r = kp_pod_decode(bj, sizeof(bj) - 1, &b)) < 0)
        goto out;
    kp_cluster_state_set_informers_synced(s, true);
    POD_EV(s, NULL, a);
    NODE_EV(s, NULL, n1);
    CLAIM_EV(s, NULL, c1);
    POD_EV(s, a, b);
    POD_EV(s, b, a);
    r = kp_cluster_state_snapshot(s, &snap);
    if (r == 0 && !kp_cluster_state_synced(s)) {
        /* Unsynced with every informer synced: only a lost update explains it. The sums may
         * be short, but must never be negative. */
        for (size_t i = 0; i < snap->n; i++)
            if (snap->v[i].pods > 1)
                abort();
    }
    snap = kp_state_snapshot_free(snap);
    POD_EV(s, a, NULL);
    CLAIM_EV(s, c1, NULL);
    NODE_EV(s, n1, NULL);
out:
    kp_entry_unref(n1);
    kp_entry_unref(c1);
    kp_entry_unref(a);
    kp_entry_unref(b);
    kp_cluster_state_free(s);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_lifecycle_sums),
        cmocka_unit_test(test_repeated_update_counts_once),
        cmocka_unit_test(test_pod_moves_and_early_pods),
        cmocka_unit_test(test_claim_and_node_join),
        cmocka_unit_test(test_synced),
        cmocka_unit_test(test_deleting_and_marks),
        cmocka_unit_test(test_daemonsets_and_host_ports),
        cmocka_unit_test(test_unmanaged_claims_ignored),
        cmocka_unit_test(test_concurrent_writers_and_readers),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_registers_on_informers),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_feed),
    };

    return kp_test_main("cluster-state", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases),
                        argc, argv);
}
