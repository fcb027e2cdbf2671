/* tests/unit/test-termination.c: the Node termination controller (core/termination/).
 *
 * Three layers. The drain predicates (which pods a drain waits on) and the
 * storage projections, as pure functions of decoded objects. The plan (kp_termination_plan),
 * one assertion block per transition of Karpenter's Node termination: ignore, cascade, the not-Ready fast
 * path, the deadline, taint, drain and the minimum drain time, volume detachment and the
 * deadline that skips it, Delete until NOT_FOUND, the finalizer; plus an exhaustive check of
 * the release order (the finalizer never goes while a NodeClaim's machine may still run). And
 * the executor (kp_termination_reconcile) against a loopback HTTP server that records every
 * request, a scripted provider and informer stores fed directly: which writes go out, with
 * which preconditions, in which order, and which metrics are counted. */
#include "kp-test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "k8s/store.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/termination/drain.h"
#include "core/termination/termination.h"

#define SEC 1000000LL
/* 2026-11-30T12:00:00Z */
#define NOW (1796040000LL * SEC)

#define DELETING "\"deletionTimestamp\":\"2026-11-30T11:59:00Z\""
#define FIN "\"finalizers\":[\"karpenter.sh/termination\"]"
/* The NodePool label and the fake provider's NodeClass label: a Node of ours without a NodeClaim.
 * NODEPOOL_ONLY is another Karpenter's (the NodePool label alone). */
#define NODECLASS_LABEL "test.kpssh.dev/fakenodeclass"
#define POOL                                                                                       \
    "\"labels\":{\"karpenter.sh/nodepool\":\"default\",\"topology.kubernetes.io/zone\":\"z1\","    \
    "\"" NODECLASS_LABEL "\":\"c\"}"
#define NODEPOOL_ONLY "\"labels\":{\"karpenter.sh/nodepool\":\"default\"}"
#define POOL_LB                                                                                    \
    "\"labels\":{\"karpenter.sh/nodepool\":\"default\",\"topology.kubernetes.io/zone\":\"z1\","    \
    "\"" NODECLASS_LABEL "\":\"c\","                                                               \
    "\"node.kubernetes.io/exclude-from-external-load-balancers\":\"karpenter\"}"
#define DISRUPTED "{\"key\":\"karpenter.sh/disrupted\",\"effect\":\"NoSchedule\"}"
#define TGP(ts) "\"annotations\":{\"karpenter.sh/nodeclaim-termination-timestamp\":\"" ts "\"}"

static const struct kp_core_timing T = {
    .delete_retry_usec = 5 * SEC, .drain_retry_usec = 1 * SEC, .min_drain_usec = 5 * SEC};

/* --- fixtures ------------------------------------------------------------------------------ */

/* A Node n1 (uid nu1, rv rv) with extra metadata members, taints (JSON array text, may be
 * "") and Ready status ("True", "False"). */
static struct kp_entry *node_rv(const char *rv, const char *meta, const char *taints,
                                const char *ready)
{
    char buf[4096];
    struct kp_entry *e = NULL;
    int n = snprintf(buf, sizeof(buf),
                     "{\"metadata\":{\"name\":\"n1\",\"uid\":\"nu1\",\"resourceVersion\":\"%s\","
                     "\"creationTimestamp\":\"2026-11-30T10:00:00Z\"%s%s},"
                     "\"spec\":{\"providerID\":\"fake://n1\"%s%s%s},"
                     "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
                     rv, *meta ? "," : "", meta, *taints ? ",\"taints\":[" : "", taints,
                     *taints ? "]" : "", ready);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_node_decode(buf, (size_t)n, &e), 0);
    return e;
}

static struct kp_entry *node(const char *meta, const char *taints, const char *ready)
{
    return node_rv("10", meta, taints, ready);
}

/* A NodeClaim nc1 (uid ncu1) of node class kind `kind`, launched as fake://n1 on n1, with extra
 * metadata members and status conditions (JSON array text, may be ""). */
static struct kp_entry *claim_rv(const char *rv, const char *kind, const char *meta,
                                 const char *conds)
{
    char buf[4096];
    struct kp_entry *e = NULL;
    int n = snprintf(
        buf, sizeof(buf),
        "{\"metadata\":{\"name\":\"nc1\",\"uid\":\"ncu1\",\"resourceVersion\":\"%s\","
        "\"generation\":1,\"labels\":{\"karpenter.sh/nodepool\":\"default\"}%s%s},"
        "\"spec\":{\"nodeClassRef\":{\"group\":\"test.kpssh.dev\",\"kind\":\"%s\",\"name\":\"c\"},"
        "\"requirements\":[]},"
        "\"status\":{\"providerID\":\"fake://n1\",\"nodeName\":\"n1\",\"conditions\":[%s]}}",
        rv, *meta ? "," : "", meta, kind, conds);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_nodeclaim_decode(buf, (size_t)n, &e), 0);
    return e;
}

static struct kp_entry *claim(const char *meta, const char *conds)
{
    return claim_rv("20", "FakeNodeClass", meta, conds);
}

/* A pod default/name bound to n1 with extra metadata and spec members and a phase. */
static struct kp_entry *pod(const char *name, const char *meta, const char *spec, const char *phase)
{
    char buf[4096];
    struct kp_entry *e = NULL;
    int n = snprintf(buf, sizeof(buf),
                     "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"u-%s\","
                     "\"resourceVersion\":\"1\"%s%s},"
                     "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\"}]%s%s},"
                     "\"status\":{\"phase\":\"%s\"}}",
                     name, name, *meta ? "," : "", meta, *spec ? "," : "", spec, phase);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_pod_decode(buf, (size_t)n, &e), 0);
    return e;
}

/* A VolumeAttachment name of pv (NULL: an inline volume) on node. */
static struct kp_entry *va(const char *name, const char *node_name, const char *pv)
{
    char buf[1024];
    struct kp_entry *e = NULL;
    int n;

    if (pv)
        n = snprintf(buf, sizeof(buf),
                     "{\"metadata\":{\"name\":\"%s\",\"uid\":\"v\",\"resourceVersion\":\"1\"},"
                     "\"spec\":{\"attacher\":\"csi\",\"nodeName\":\"%s\","
                     "\"source\":{\"persistentVolumeName\":\"%s\"}},"
                     "\"status\":{\"attached\":true}}",
                     name, node_name, pv);
    else
        n = snprintf(buf, sizeof(buf),
                     "{\"metadata\":{\"name\":\"%s\",\"uid\":\"v\",\"resourceVersion\":\"1\"},"
                     "\"spec\":{\"attacher\":\"csi\",\"nodeName\":\"%s\",\"source\":"
                     "{\"inlineVolumeSpec\":{}}}}",
                     name, node_name);
    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_volumeattachment_decode(buf, (size_t)n, &e), 0);
    return e;
}

#define NV(e) kp_node_view(e)
#define NCV(e) kp_nodeclaim_view(e)
#define PV(e) kp_pod_view(e)
#define VAV(e) kp_volumeattachment_view(e)

/* A deleting, managed, untainted Node with a live, supported NodeClaim: the start. */
static struct kp_term_in in_for(struct kp_entry *n, struct kp_entry *nc)
{
    struct kp_term_in in = {0};

    in.node = NV(n);
    in.nodeclaim = nc ? NCV(nc) : NULL;
    in.nodeclaim_supported = nc != NULL;
    in.node_labelled_ours = kp_labels_get(&NV(n)->meta.labels, NODECLASS_LABEL) != NULL;
    in.now_usec = NOW;
    return in;
}

static const struct kp_term_cond *cond(const struct kp_term_action *a, const char *type)
{
    for (size_t i = 0; i < a->n_conds; i++)
        if (strcmp(a->conds[i].type, type) == 0)
            return &a->conds[i];
    return NULL;
}

static void assert_cond(const struct kp_term_action *a, const char *type, enum kp_cond_status st,
                        const char *reason)
{
    const struct kp_term_cond *c = cond(a, type);

    assert_non_null(c);
    assert_int_equal(c->status, st);
    if (reason)
        assert_string_equal(c->reason, reason);
}

/* --- drain predicates ---------------------------------------------------------------------- */

/* Karpenter's forced path: with a termination deadline, a pod is deleted rather than waited on
 * once its own grace period would carry it past the deadline, or when it is already terminating
 * with a deletion time after it; without a deadline, never. */
static void test_needs_force(void **state)
{
    struct kp_entry *p = pod("web", "", "\"terminationGracePeriodSeconds\":30", "Running");
    struct kp_entry *t;

    (void)state;
    assert_false(kp_drain_pod_needs_force(PV(p), 0, NOW));
    assert_false(kp_drain_pod_needs_force(PV(p), NOW + 31 * SEC, NOW));
    assert_false(kp_drain_pod_needs_force(PV(p), NOW + 30 * SEC, NOW)); /* exactly its grace */
    assert_true(kp_drain_pod_needs_force(PV(p), NOW + 29 * SEC, NOW));
    assert_true(kp_drain_pod_needs_force(PV(p), NOW - SEC, NOW)); /* past the deadline */
    kp_entry_unref(p);
    /* Terminating: kubelet finishes at its deletion time (deletionTimestamp is that moment). */
    t = pod("old", "\"deletionTimestamp\":\"2026-12-01T12:00:40Z\"",
            "\"terminationGracePeriodSeconds\":0", "Running");
    assert_true(kp_drain_pod_needs_force(PV(t), PV(t)->meta.deletion_usec - SEC,
                                         PV(t)->meta.deletion_usec - 10 * SEC));
    assert_false(kp_drain_pod_needs_force(PV(t), PV(t)->meta.deletion_usec + 10 * SEC,
                                          PV(t)->meta.deletion_usec - 10 * SEC));
    kp_entry_unref(t);
}

static void test_drainable(void **state)
{
    struct kp_entry *p;

    (void)state;
    p = pod("web", "", "", "Running");
    assert_true(kp_drain_pod_waiting_eviction(PV(p), NOW));
    assert_true(kp_drain_pod_drainable(PV(p), NOW));
    kp_entry_unref(p);

    /* Terminal: not waited on, though "drainable" (its volumes still count). */
    p = pod("job", "", "", "Succeeded");
    assert_false(kp_drain_pod_waiting_eviction(PV(p), NOW));
    assert_true(kp_drain_pod_drainable(PV(p), NOW));
    kp_entry_unref(p);
    p = pod("job", "", "", "Failed");
    assert_false(kp_drain_pod_waiting_eviction(PV(p), NOW));
    kp_entry_unref(p);

    /* Tolerates karpenter.sh/disrupted:NoSchedule: by key, by Exists on every key, by an
     * empty effect; a NoExecute-only toleration does not. */
    p = pod("ds", "",
            "\"tolerations\":[{\"key\":\"karpenter.sh/disrupted\",\"operator\":\"Exists\","
            "\"effect\":\"NoSchedule\"}]",
            "Running");
    assert_true(kp_drain_pod_tolerates_disrupted(PV(p)));
    assert_false(kp_drain_pod_waiting_eviction(PV(p), NOW));
    assert_false(kp_drain_pod_drainable(PV(p), NOW));
    kp_entry_unref(p);
    p = pod("eq", "",
            "\"tolerations\":[{\"key\":\"karpenter.sh/disrupted\",\"operator\":\"Equal\","
            "\"effect\":\"NoSchedule\"}]",
            "Running");
    assert_false(kp_drain_pod_waiting_eviction(PV(p), NOW)); /* Equal to the empty value */
    kp_entry_unref(p);
    p = pod("cordon", "",
            "\"tolerations\":[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":"
            "\"Exists\",\"effect\":\"NoSchedule\"}]",
            "Running");
    assert_true(kp_drain_pod_waiting_eviction(PV(p), NOW)); /* another key: waited on */
    kp_entry_unref(p);
    p = pod("ds", "", "\"tolerations\":[{\"operator\":\"Exists\"}]", "Running");
    assert_false(kp_drain_pod_waiting_eviction(PV(p), NOW));
    kp_entry_unref(p);
    p = pod("x", "",
            "\"tolerations\":[{\"key\":\"karpenter.sh/disrupted\",\"operator\":\"Exists\","
            "\"effect\":\"NoExecute\"}]",
            "Running");
    assert_true(kp_drain_pod_waiting_eviction(PV(p), NOW));
    kp_entry_unref(p);

    /* Static pods: owned by the Node, or mirror-annotated. */
    p = pod("static",
            "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\","
            "\"name\":\"n1\",\"uid\":\"nu1\",\"controller\":true}]",
            "", "Running");
    assert_true(kp_drain_pod_owned_by_node(PV(p)));
    assert_false(kp_drain_pod_waiting_eviction(PV(p), NOW));
    kp_entry_unref(p);
    p = pod("mirror", "\"annotations\":{\"kubernetes.io/config.mirror\":\"abc\"}", "", "Running");
    assert_false(kp_drain_pod_waiting_eviction(PV(p), NOW));
    kp_entry_unref(p);
    p = pod("rs",
            "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
            "\"name\":\"r\",\"uid\":\"r1\",\"controller\":true}]",
            "", "Running");
    assert_true(kp_drain_pod_waiting_eviction(PV(p), NOW));
    kp_entry_unref(p);

    /* Terminating: waited on for a minute past its deletionTimestamp, then stuck. */
    p = pod("t", "\"deletionTimestamp\":\"2026-11-30T11:59:30Z\"", "", "Running");
    assert_false(kp_drain_pod_stuck_terminating(PV(p), NOW));
    assert_true(kp_drain_pod_waiting_eviction(PV(p), NOW));
    assert_true(kp_drain_pod_stuck_terminating(PV(p), NOW + 31 * SEC));
    assert_false(kp_drain_pod_waiting_eviction(PV(p), NOW + 31 * SEC));
    kp_entry_unref(p);

    /* do-not-disrupt is waited on (never evicted, but the drain stalls). */
    p = pod("dnd", "\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\"}", "", "Running");
    assert_true(kp_drain_pod_waiting_eviction(PV(p), NOW));
    kp_entry_unref(p);
}

static void test_drain_count(void **state)
{
    struct kp_entry *a = pod("a", "", "", "Running"), *b = pod("b", "", "", "Pending"),
                    *c = pod("c", "", "", "Succeeded");
    const struct kp_pod_view *pods[] = {PV(a), PV(b), PV(c)};
    struct kp_drain_input in = {.pods = pods, .n_pods = 3, .now_usec = NOW};
    struct kp_drain_result r;

    (void)state;
    assert_int_equal(kp_drainer_wait.ops->drain(kp_drainer_wait.self, NULL, NULL, &in, &r), 0);
    assert_false(r.drained);
    assert_int_equal(r.waiting, 2);
    assert_string_equal(r.message, "2 pods are waiting to be evicted");
    in.n_pods = 0;
    kp_drain_count(&in, &r);
    assert_true(r.drained);
    assert_int_equal(r.waiting, 0);
    assert_string_equal(r.message, "");
    kp_entry_unref(a);
    kp_entry_unref(b);
    kp_entry_unref(c);
}

static void test_storage_projections(void **state)
{
    struct kp_entry *e = NULL;
    const char *bad = "{\"metadata\":{\"name\":\"v\"},\"spec\":{\"attacher\":\"csi\"}}";
    const char *pvc = "{\"metadata\":{\"name\":\"data\",\"namespace\":\"default\"},"
                      "\"spec\":{\"volumeName\":\"pv1\"}}";
    const char *unbound = "{\"metadata\":{\"name\":\"data\",\"namespace\":\"default\"},"
                          "\"spec\":{}}";

    (void)state;
    e = va("va1", "n1", "pv1");
    assert_string_equal(VAV(e)->e.key, "va1");
    assert_string_equal(VAV(e)->node_name, "n1");
    assert_string_equal(VAV(e)->pv_name, "pv1");
    assert_true(VAV(e)->attached);
    kp_entry_unref(e);
    e = va("va2", "n1", NULL);
    assert_null(VAV(e)->pv_name);
    assert_false(VAV(e)->attached);
    kp_entry_unref(e);
    e = NULL;
    assert_int_equal(kp_volumeattachment_decode(bad, strlen(bad), &e), -KP_EPARSE);
    assert_null(e);

    assert_int_equal(kp_pvc_decode(pvc, strlen(pvc), &e), 0);
    assert_string_equal(e->key, "default/data");
    assert_string_equal(kp_pvc_view(e)->volume_name, "pv1");
    kp_entry_unref(e);
    assert_int_equal(kp_pvc_decode(unbound, strlen(unbound), &e), 0);
    assert_null(kp_pvc_view(e)->volume_name);
    kp_entry_unref(e);
}

/* --- the plan ------------------------------------------------------------------------------ */

static void test_plan_ignore(void **state)
{
    struct kp_entry *n, *nc = claim("", "");
    struct kp_term_in in;
    struct kp_term_action a;

    (void)state;
    n = node(FIN "," POOL, "", "True"); /* not deleting */
    in = in_for(n, nc);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_IGNORE);
    kp_entry_unref(n);

    n = node(DELETING "," POOL, "", "True"); /* no finalizer */
    in = in_for(n, nc);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_IGNORE);
    kp_entry_unref(n);

    /* Not managed: no nodepool label and the NodeClaim is another provider's (or none). */
    n = node(DELETING "," FIN, "", "True");
    in = in_for(n, nc);
    in.nodeclaim_supported = false;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_IGNORE);
    assert_string_equal(a.why, "not managed");
    in = in_for(n, NULL);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_IGNORE);
    /* Managed by its supported NodeClaim alone. */
    in = in_for(n, nc);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DELETE_NODECLAIM);
    kp_entry_unref(n);

    /* Managed by its labels alone (no NodeClaim: a duplicate, or never persisted): the NodePool
     * label and our NodeClass label. */
    n = node(DELETING "," FIN "," POOL, "", "True");
    in = in_for(n, NULL);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_TAINT);
    kp_entry_unref(n);

    /* The NodePool label and the finalizer alone are another Karpenter's Node: left alone. */
    n = node(DELETING "," FIN "," NODEPOOL_ONLY, "", "True");
    in = in_for(n, NULL);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_IGNORE);
    assert_string_equal(a.why, "not managed");
    kp_entry_unref(n);
    kp_entry_unref(nc);
}

static void test_plan_cascade_and_fast_path(void **state)
{
    struct kp_entry *n = node(DELETING "," FIN "," POOL, "", "False");
    struct kp_entry *nc = claim("", ""), *gone = claim(DELETING, "");
    struct kp_term_in in = in_for(n, nc);
    struct kp_term_action a;

    (void)state;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DELETE_NODECLAIM);
    in.nodeclaim_deleted = true;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_GET_INSTANCE); /* not Ready: ask */
    /* An already deleting NodeClaim is not deleted again. */
    in = in_for(n, gone);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_GET_INSTANCE);
    in.instance = KP_TERM_GONE;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_REMOVE_FINALIZER);
    assert_int_equal(a.n_conds, 0); /* the fast path records nothing */
    in.instance = KP_TERM_PRESENT;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_TAINT);
    kp_entry_unref(n);

    /* A Ready Node is never asked about: its kubelet proves the machine runs. */
    n = node(DELETING "," FIN "," POOL, "", "True");
    in = in_for(n, gone);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_TAINT);
    kp_entry_unref(n);
    kp_entry_unref(nc);
    kp_entry_unref(gone);
}

static void test_plan_deadline(void **state)
{
    struct kp_entry *n = node(DELETING "," FIN "," POOL, "", "True");
    struct kp_entry *nc = claim(DELETING "," TGP("2026-11-30T12:10:00Z"), "");
    struct kp_entry *bad = claim(DELETING "," TGP("soon"), "");
    struct kp_term_in in = in_for(n, nc);
    struct kp_term_action a;

    (void)state;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_TAINT);
    assert_int_equal(a.deadline_usec, NOW + 600 * SEC);
    assert_int_equal(a.n_events, 1);
    assert_true(a.events[0].warning);
    assert_string_equal(a.events[0].reason, "TerminationGracePeriodExpiring");
    assert_string_equal(a.events[0].note, "All pods will be deleted by 2026-11-30T12:10:00Z");
    in = in_for(n, bad);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_FAIL);
    assert_int_equal(a.error, -KP_EPARSE);
    assert_int_equal(a.n_events, 1); /* the event still says what the annotation holds */
    kp_entry_unref(n);
    kp_entry_unref(nc);
    kp_entry_unref(bad);
}

static void test_plan_taint(void **state)
{
    struct kp_entry *nc = claim(DELETING, "");
    struct kp_entry *n;
    struct kp_term_in in;
    struct kp_term_action a;

    (void)state;
    n = node(DELETING "," FIN "," POOL, "", "True");
    assert_true(kp_termination_needs_taint(NV(n)));
    kp_entry_unref(n);
    n = node(DELETING "," FIN "," POOL, DISRUPTED, "True"); /* no label */
    assert_true(kp_termination_needs_taint(NV(n)));
    kp_entry_unref(n);
    n = node(DELETING "," FIN "," POOL_LB,
             "{\"key\":\"karpenter.sh/disrupted\",\"effect\":\"NoExecute\"}", "True");
    assert_true(kp_termination_needs_taint(NV(n))); /* same key, other effect */
    kp_entry_unref(n);
    n = node(DELETING "," FIN ",\"labels\":{\"karpenter.sh/nodepool\":\"default\","
                      "\"node.kubernetes.io/exclude-from-external-load-balancers\":\"other\"}",
             DISRUPTED, "True");
    assert_true(kp_termination_needs_taint(NV(n))); /* label of another value */
    kp_entry_unref(n);

    n = node(DELETING "," FIN "," POOL_LB, DISRUPTED, "True");
    assert_false(kp_termination_needs_taint(NV(n)));
    in = in_for(n, nc);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DRAIN);
    kp_entry_unref(n);

    /* Once this reconcile's patch went through, it goes on with the old cache. */
    n = node(DELETING "," FIN "," POOL, "", "True");
    in = in_for(n, nc);
    in.tainted = true;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DRAIN);
    kp_entry_unref(n);
    kp_entry_unref(nc);
}

#define DRAINING_AT(ts)                                                                            \
    "{\"type\":\"Drained\",\"status\":\"Unknown\",\"reason\":\"Draining\",\"message\":"            \
    "\"Draining\",\"lastTransitionTime\":\"" ts "\"}"
#define DRAINED                                                                                    \
    "{\"type\":\"Drained\",\"status\":\"True\",\"reason\":\"Drained\","                            \
    "\"lastTransitionTime\":\"2026-11-30T11:59:50Z\"}"

static void test_plan_drain(void **state)
{
    struct kp_entry *n = node(DELETING "," FIN "," POOL_LB, DISRUPTED, "True");
    struct kp_entry *fresh = claim(DELETING, "");
    struct kp_entry *draining = claim(DELETING, DRAINING_AT("2026-11-30T11:59:57Z"));
    struct kp_entry *long_ago = claim(DELETING, DRAINING_AT("2026-11-30T11:59:55Z"));
    struct kp_drain_result busy = {.drained = false, .waiting = 2}, done = {.drained = true};
    struct kp_term_in in = in_for(n, fresh);
    struct kp_term_action a;

    (void)state;
    (void)snprintf(busy.message, sizeof(busy.message), "2 pods are waiting to be evicted");
    /* Draining begins: the drainer is asked, Drained=Unknown/Draining is on the way. */
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DRAIN);
    assert_cond(&a, "Drained", KP_COND_UNKNOWN, "Draining");
    assert_string_equal(cond(&a, "Drained")->message, "Draining");

    /* Pods left: FailedDraining, poll. */
    in.drain = &busy;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_WAIT);
    assert_int_equal(a.requeue_usec, T.drain_retry_usec);
    assert_cond(&a, "Drained", KP_COND_UNKNOWN, "Draining");
    assert_int_equal(a.n_events, 1);
    assert_true(a.events[0].warning);
    assert_string_equal(a.events[0].reason, "FailedDraining");
    assert_string_equal(a.events[0].note, "Failed to drain node, 2 pods are waiting to be evicted");

    /* Empty at once: still the minimum drain time from when Draining began. */
    in.drain = &done;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_WAIT);
    assert_string_equal(a.why, "minimum drain time");
    assert_cond(&a, "Drained", KP_COND_UNKNOWN, "Draining");
    in = in_for(n, draining); /* began 3 s ago */
    in.drain = &done;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_WAIT);
    assert_int_equal(a.n_conds, 0); /* Unknown already: nothing to write */
    in = in_for(n, long_ago);       /* began 5 s ago */
    in.drain = &done;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DELETE_INSTANCE);
    assert_cond(&a, "Drained", KP_COND_TRUE, "Drained");
    assert_cond(&a, "VolumesDetached", KP_COND_TRUE, "VolumesDetached");

    /* Drained True stays; pods that show up after are still waited on. */
    kp_entry_unref(draining);
    draining = claim(DELETING, DRAINED);
    in = in_for(n, draining);
    in.drain = &busy;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_WAIT);
    assert_null(cond(&a, "Drained"));
    in.drain = &done;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DELETE_INSTANCE);

    /* Without a NodeClaim: no conditions, no minimum drain time, no Delete. */
    in = in_for(n, NULL);
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DRAIN);
    assert_int_equal(a.n_conds, 0);
    in.drain = &done;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_REMOVE_FINALIZER);
    assert_int_equal(a.n_conds, 0);
    kp_entry_unref(n);
    kp_entry_unref(fresh);
    kp_entry_unref(draining);
    kp_entry_unref(long_ago);
}

static void test_plan_volumes(void **state)
{
    struct kp_entry *n = node(DELETING "," FIN "," POOL_LB, DISRUPTED, "True");
    struct kp_entry *nc = claim(DELETING, DRAINED);
    struct kp_entry *tgp = claim(DELETING "," TGP("2026-11-30T11:59:59Z"), DRAINED);
    struct kp_entry *later = claim(DELETING "," TGP("2026-11-30T12:00:00Z"), DRAINED);
    struct kp_entry *vas[7];
    const struct kp_volumeattachment_view *vav[7];
    const char *skip[] = {"pv0"};
    struct kp_drain_result done = {.drained = true};
    struct kp_term_in in = in_for(n, nc);
    struct kp_term_action a;

    (void)state;
    for (size_t i = 0; i < 7; i++) {
        char name[16], pv[16];

        (void)snprintf(name, sizeof(name), "va%zu", i);
        (void)snprintf(pv, sizeof(pv), "pv%zu", i);
        vas[i] = va(name, "n1", i == 6 ? NULL : pv); /* va6: an inline volume */
        vav[i] = VAV(vas[i]);
    }
    in.drain = &done;
    in.attachments = vav;
    in.n_attachments = 2; /* va0, va1 */
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_WAIT);
    assert_int_equal(a.requeue_usec, T.drain_retry_usec);
    assert_cond(&a, "VolumesDetached", KP_COND_UNKNOWN, "AwaitingVolumeDetachment");
    assert_int_equal(a.n_events, 1);
    assert_false(a.events[0].warning);
    assert_string_equal(a.events[0].reason, "AwaitingVolumeDetachment");
    assert_string_equal(a.events[0].note,
                        "Awaiting deletion of bound volumeattachments (va0, va1)");

    /* pv0 is a staying pod's: va0 does not block; nor does an inline volume. */
    in.skip_pvs = skip;
    in.n_skip_pvs = 1;
    kp_termination_plan(&in, &T, &a);
    assert_string_equal(a.events[0].note, "Awaiting deletion of bound volumeattachments (va1)");
    in.attachments = &vav[6];
    in.n_attachments = 1;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DELETE_INSTANCE);
    assert_cond(&a, "VolumesDetached", KP_COND_TRUE, NULL);

    /* Five names, then a count (upstream's pretty.Slice). */
    in.skip_pvs = NULL;
    in.n_skip_pvs = 0;
    in.attachments = vav;
    in.n_attachments = 7;
    kp_termination_plan(&in, &T, &a);
    assert_string_equal(a.events[0].note, "Awaiting deletion of bound volumeattachments (va0, "
                                          "va1, va2, va3, va4 and 1 other(s))");

    /* Past the deadline the wait is skipped and recorded; at the deadline it is not yet. */
    in = in_for(n, tgp);
    in.drain = &done;
    in.attachments = vav;
    in.n_attachments = 1;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DELETE_INSTANCE);
    assert_cond(&a, "VolumesDetached", KP_COND_FALSE, "TerminationGracePeriodElapsed");
    assert_int_equal(a.n_events, 1); /* TerminationGracePeriodExpiring only */
    in = in_for(n, later);
    in.drain = &done;
    in.attachments = vav;
    in.n_attachments = 1;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_WAIT);
    assert_int_equal(a.n_events, 2);
    assert_string_equal(a.events[0].reason, "TerminationGracePeriodExpiring");
    assert_string_equal(a.events[1].reason, "AwaitingVolumeDetachment");
    for (size_t i = 0; i < 7; i++)
        kp_entry_unref(vas[i]);
    kp_entry_unref(n);
    kp_entry_unref(nc);
    kp_entry_unref(tgp);
    kp_entry_unref(later);
}

static void test_plan_instance(void **state)
{
    struct kp_entry *n = node(DELETING "," FIN "," POOL_LB, DISRUPTED, "True");
    struct kp_entry *nc = claim(DELETING, DRAINED);
    struct kp_drain_result done = {.drained = true};
    struct kp_term_in in = in_for(n, nc);
    struct kp_term_action a;

    (void)state;
    in.drain = &done;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_DELETE_INSTANCE);
    assert_null(cond(&a, "InstanceTerminating"));
    /* Delete returned 0: releasing (the SSH leave ran); ask again until NOT_FOUND. */
    in.deleted = KP_TERM_DELETED;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_WAIT);
    assert_int_equal(a.requeue_usec, T.delete_retry_usec);
    assert_cond(&a, "InstanceTerminating", KP_COND_TRUE, "InstanceTerminating");
    in.deleted = KP_TERM_GONE;
    kp_termination_plan(&in, &T, &a);
    assert_int_equal(a.verb, KP_TERM_REMOVE_FINALIZER);
    assert_cond(&a, "InstanceTerminating", KP_COND_TRUE, NULL);
    assert_cond(&a, "Drained", KP_COND_TRUE, NULL);
    assert_cond(&a, "VolumesDetached", KP_COND_TRUE, NULL);
    kp_entry_unref(n);
    kp_entry_unref(nc);
}

/* EKS Hybrid Nodes / SSH: over every combination of what a reconcile can have learned, the
 * finalizer of a Node with a NodeClaim goes only once the provider said NOT_FOUND (to Delete, or
 * to Get on the not-Ready fast path). */
static void test_plan_release_order(void **state)
{
    const char *readies[] = {"True", "False"};
    const enum kp_term_answer answers[] = {KP_TERM_ASK, KP_TERM_GONE, KP_TERM_PRESENT,
                                           KP_TERM_DELETED};
    struct kp_drain_result busy = {.drained = false, .waiting = 1}, done = {.drained = true};
    const struct kp_drain_result *drains[] = {NULL, &busy, &done};
    struct kp_entry *claims[] = {claim("", ""), claim(DELETING, ""), claim(DELETING, DRAINED),
                                 claim(DELETING "," TGP("2026-11-30T11:00:00Z"), DRAINED)};
    struct kp_entry *v = va("va1", "n1", "pv1");
    const struct kp_volumeattachment_view *vav[] = {VAV(v)};
    unsigned finalizer = 0;

    (void)state;
    for (size_t r = 0; r < 2; r++) {
        struct kp_entry *n = node(DELETING "," FIN "," POOL_LB, DISRUPTED, readies[r]);

        for (size_t c = 0; c < KP_ARRAY_SIZE(claims); c++)
            for (size_t i = 0; i < 4; i++)
                for (size_t d = 0; d < 4; d++)
                    for (size_t dr = 0; dr < 3; dr++)
                        for (size_t nva = 0; nva < 2; nva++) {
                            struct kp_term_in in = in_for(n, claims[c]);
                            struct kp_term_action a;

                            in.nodeclaim_deleted = true;
                            in.instance = answers[i];
                            in.deleted = answers[d];
                            in.drain = drains[dr];
                            in.attachments = vav;
                            in.n_attachments = nva;
                            kp_termination_plan(&in, &T, &a);
                            if (a.verb != KP_TERM_REMOVE_FINALIZER)
                                continue;
                            finalizer++;
                            assert_true(
                                in.deleted == KP_TERM_GONE ||
                                (in.instance == KP_TERM_GONE && NV(n)->ready != KP_COND_TRUE));
                        }
        kp_entry_unref(n);
    }
    assert_true(finalizer > 0); /* the property was exercised */
    for (size_t c = 0; c < KP_ARRAY_SIZE(claims); c++)
        kp_entry_unref(claims[c]);
    kp_entry_unref(v);
}

/* --- the executor: a recording API server ------------------------------------------------- */

#define JOURNAL_MAX 32

/* What happened, in order: the server's requests ("PATCH /api/v1/nodes/n1") and the provider's
 * calls ("provider delete"), with the request bodies alongside. */
static struct {
    pthread_mutex_t mu;
    char line[JOURNAL_MAX][128];
    char body[JOURNAL_MAX][2048];
    size_t n;
} J = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void journal(const char *line, const char *body)
{
    pthread_mutex_lock(&J.mu);
    if (J.n < JOURNAL_MAX) {
        (void)snprintf(J.line[J.n], sizeof(J.line[0]), "%s", line);
        (void)snprintf(J.body[J.n], sizeof(J.body[0]), "%s", body ? body : "");
        J.n++;
    }
    pthread_mutex_unlock(&J.mu);
}

static void journal_reset(void)
{
    pthread_mutex_lock(&J.mu);
    J.n = 0;
    pthread_mutex_unlock(&J.mu);
}

/* The index of the first entry starting with prefix at or after from, or -1. */
static int journal_find(const char *prefix, size_t from)
{
    for (size_t i = from; i < J.n; i++)
        if (strncmp(J.line[i], prefix, strlen(prefix)) == 0)
            return (int)i;
    return -1;
}

/* The status the server answers a request line with: 0 means 200. */
static atomic_int conflict_on_node_patch;
/* How the server answers an eviction (an HTTP code; 0: 201 Created), and how many it saw. */
static atomic_int evict_answer;
static atomic_int evictions_seen;

struct server {
    int lfd;
    uint16_t port;
    pthread_t thread;
    atomic_bool stop;
};

static void say(int fd, const char *s)
{
    size_t n = strlen(s);

    while (n > 0) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);

        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

static void respond(int fd, const char *status, const char *body)
{
    char head[256];

    (void)snprintf(head, sizeof(head),
                   "HTTP/1.1 %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                   "Content-Length: %zu\r\n\r\n",
                   status, strlen(body));
    say(fd, head);
    say(fd, body);
}

/* The Eviction API's answers (Kubernetes' pkg/registry/core/pod/storage/eviction.go). */
static void evict_respond(int fd, int code)
{
    switch (code) {
    case 0:
        respond(fd, "201 Created",
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\",\"code\":201}");
        break;
    case 429:
        respond(fd, "429 Too Many Requests",
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                "\"message\":\"Cannot evict pod as it would violate the pod's disruption budget.\","
                "\"reason\":\"TooManyRequests\",\"details\":{\"causes\":[{\"reason\":"
                "\"DisruptionBudget\",\"message\":\"The disruption budget web needs 1 healthy "
                "pods and has 1 currently\"}]},\"code\":429}");
        break;
    case 500:
        respond(fd, "500 Internal Server Error",
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                "\"message\":\"" KP_EVICT_MULTIPLE_PDBS_MESSAGE "\",\"reason\":"
                "\"InternalError\",\"code\":500}");
        break;
    case 404:
        respond(fd, "404 Not Found",
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                "\"reason\":\"NotFound\",\"code\":404}");
        break;
    case 409:
        respond(fd, "409 Conflict",
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                "\"reason\":\"Conflict\",\"code\":409}");
        break;
    default:
        respond(fd, "503 Service Unavailable",
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                "\"reason\":\"ServiceUnavailable\",\"code\":503}");
        break;
    }
}

static size_t read_request(int fd, char *buf, size_t size)
{
    size_t len = 0;

    while (len < size - 1) {
        ssize_t k = read(fd, buf + len, size - 1 - len);
        char *end;

        if (k <= 0)
            break;
        len += (size_t)k;
        buf[len] = '\0';
        if ((end = strstr(buf, "\r\n\r\n"))) {
            const char *cl = strcasestr(buf, "Content-Length:");
            size_t want = 0;

            if (cl && cl < end)
                for (cl += 15; *cl == ' ' || (*cl >= '0' && *cl <= '9'); cl++)
                    if (*cl != ' ')
                        want = want * 10 + (size_t)(*cl - '0');
            if (len >= (size_t)(end + 4 - buf) + want)
                break;
        }
    }
    buf[len] = '\0';
    return len;
}

static void *server_main(void *arg)
{
    struct server *s = arg;

    while (!atomic_load(&s->stop)) {
        char req[8192], line[128];
        const char *body, *sp;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        bool conflict;

        if (fd < 0)
            continue;
        if (atomic_load(&s->stop)) {
            close(fd);
            break;
        }
        read_request(fd, req, sizeof(req));
        /* "METHOD /path" without the query and the protocol. */
        sp = strchr(req, ' ');
        sp = sp ? strpbrk(sp + 1, " ?") : NULL;
        (void)snprintf(line, sizeof(line), "%.*s", sp ? (int)(sp - req) : 0, req);
        body = strstr(req, "\r\n\r\n");
        journal(line, body ? body + 4 : "");
        conflict =
            strcmp(line, "PATCH /api/v1/nodes/n1") == 0 && atomic_load(&conflict_on_node_patch);
        if (strncmp(line, "POST ", 5) == 0 && strstr(line, "/eviction")) {
            atomic_fetch_add(&evictions_seen, 1);
            evict_respond(fd, atomic_load(&evict_answer));
        } else if (conflict)
            respond(fd, "409 Conflict",
                    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                    "\"reason\":\"Conflict\",\"code\":409}");
        else
            respond(fd, "200 OK", "{}");
        close(fd);
    }
    return NULL;
}

static void server_start(struct server *s)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);

    memset(s, 0, sizeof(*s));
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->lfd, 8), 0);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
}

static void server_stop(struct server *s)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(s->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd;

    atomic_store(&s->stop, true);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* wake accept() */
    if (fd >= 0) {
        (void)connect(fd, (struct sockaddr *)&a, sizeof(a));
        close(fd);
    }
    pthread_join(s->thread, NULL);
    close(s->lfd);
}

/* --- the executor: a scripted provider and an observer ------------------------------------- */

static struct {
    enum kp_provider_err_kind get_kind, delete_kind; /* NONE: 0 */
    int delete_r;
    unsigned gets, deletes;
} P;

static const char *sp_name(void *self)
{
    (void)self;
    return "scripted";
}

static size_t sp_classes(void *self, const struct kp_node_class_kind **ret)
{
    static const struct kp_node_class_kind k[] = {{"test.kpssh.dev", "FakeNodeClass"}};

    (void)self;
    *ret = k;
    return 1;
}

static int sp_get(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                  const char *provider_id, struct kp_provider_instance *ret,
                  struct kp_provider_err *err)
{
    (void)self;
    (void)ctx;
    (void)c;
    (void)provider_id;
    P.gets++;
    journal("provider get", NULL);
    if (P.get_kind == KP_PROVIDER_ERR_NOT_FOUND)
        return kp_provider_err_set(err, -ENOENT, KP_PROVIDER_ERR_NOT_FOUND, NULL, "gone");
    memset(ret, 0, sizeof(*ret));
    return 0;
}

static int sp_delete(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, struct kp_provider_err *err)
{
    (void)self;
    (void)ctx;
    (void)c;
    (void)nc;
    P.deletes++;
    journal(P.delete_kind == KP_PROVIDER_ERR_NOT_FOUND ? "provider delete: not found"
                                                       : "provider delete",
            NULL);
    if (P.delete_kind != KP_PROVIDER_ERR_NONE)
        return kp_provider_err_set(err, P.delete_r, P.delete_kind, NULL, "scripted");
    return 0;
}

static const struct kp_provider_ops sp_ops = {
    .name = sp_name, .supported_node_classes = sp_classes, .get = sp_get, .delete = sp_delete};

static struct {
    unsigned drained, terminated, termination_duration, lifetime;
    unsigned pods_drained, eviction_requests;
    char drained_reason[64], eviction_codes[128]; /* the last reason; every code, in order */
    char terminated_labels[64];
    double termination_seconds, lifetime_seconds;
} M;

static void obs_count(void *ctx, enum kp_core_metric m, const char *const *labels)
{
    (void)ctx;
    if (m == KP_CM_NODES_DRAINED) {
        assert_string_equal(labels[0], "default");
        M.drained++;
    } else if (m == KP_CM_PODS_DRAINED) {
        (void)snprintf(M.drained_reason, sizeof(M.drained_reason), "%s", labels[0]);
        M.pods_drained++;
    } else if (m == KP_CM_PODS_EVICTION_REQUESTS) {
        size_t n = strlen(M.eviction_codes);

        (void)snprintf(M.eviction_codes + n, sizeof(M.eviction_codes) - n, "%s%s", n ? "," : "",
                       labels[0]);
        M.eviction_requests++;
    } else if (m == KP_CM_NODES_TERMINATED) {
        (void)snprintf(M.terminated_labels, sizeof(M.terminated_labels), "%s,%s", labels[0],
                       labels[1]);
        M.terminated++;
    }
}

static void obs_observe(void *ctx, enum kp_core_metric m, const char *const *labels, double v)
{
    (void)ctx;
    assert_string_equal(labels[0], "default");
    if (m == KP_CM_NODES_TERMINATION_DURATION) {
        M.termination_duration++;
        M.termination_seconds = v;
    } else if (m == KP_CM_NODES_LIFETIME_DURATION) {
        M.lifetime++;
        M.lifetime_seconds = v;
    }
}

static const struct kp_core_observer OBS = {.count = obs_count, .observe = obs_observe};

static int64_t fake_now;
static uint64_t now_fn(void)
{
    return (uint64_t)fake_now;
}

struct fx {
    struct server srv;
    struct kp_client *c;
    struct kp_registry *reg;
    struct kp_provider prov;
    struct kp_core_env env;
    struct kp_termination_controller *tc;
    struct kp_store *nodes, *claims, *pods, *vas, *pvcs;
    int log_fd;
};

static void fx_init(struct fx *f)
{
    char url[64];
    struct kp_transport_opts to = {.allow_plain_http = true, .timeout_usec = 5 * SEC};
    struct kp_informer *inf;

    memset(f, 0, sizeof(*f));
    memset(&P, 0, sizeof(P));
    memset(&M, 0, sizeof(M));
    atomic_store(&conflict_on_node_patch, 0);
    atomic_store(&evict_answer, 0);
    atomic_store(&evictions_seen, 0);
    journal_reset();
    fake_now = NOW;
    f->log_fd = kp_test_log_quiet();
    server_start(&f->srv);
    (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)f->srv.port);
    to.server = url;
    assert_int_equal(kp_client_new(&to, &f->c), 0);
    assert_int_equal(kp_registry_new(f->c, &f->reg), 0);
    f->prov.ops = &sp_ops;
    f->env.client = f->c;
    f->env.informers = f->reg;
    f->env.provider = &f->prov;
    f->env.observer = &OBS;
    f->env.timing = T;
    f->env.now_usec = now_fn;
    assert_int_equal(kp_termination_controller_new(&f->env, &f->tc), 0);
    assert_int_equal(kp_informers_nodes(f->reg, &inf), 0);
    f->nodes = kp_informer_store(inf);
    assert_int_equal(kp_informers_nodeclaims(f->reg, &inf), 0);
    f->claims = kp_informer_store(inf);
    assert_int_equal(kp_informers_pods(f->reg, &inf), 0);
    f->pods = kp_informer_store(inf);
    assert_int_equal(kp_informers_volumeattachments(f->reg, &inf), 0);
    f->vas = kp_informer_store(inf);
    assert_int_equal(kp_informers_pvcs(f->reg, &inf), 0);
    f->pvcs = kp_informer_store(inf);
}

static void fx_done(struct fx *f)
{
    f->tc = kp_termination_controller_free(f->tc);
    f->reg = kp_registry_free(f->reg);
    f->c = kp_client_free(f->c);
    server_stop(&f->srv);
    kp_test_log_restore(f->log_fd);
}

static void put(struct kp_store *s, struct kp_entry *e)
{
    assert_int_equal(kp_store_put(s, e, NULL), 0);
}

static int run(struct fx *f, uint64_t *requeue)
{
    *requeue = 0;
    journal_reset();
    return kp_termination_reconcile(f->tc, f->c, NULL, "n1", requeue);
}

#define ALL_CONDS_TRUE                                                                             \
    "{\"type\":\"Drained\",\"status\":\"True\",\"reason\":\"Drained\",\"message\":\"\","           \
    "\"observedGeneration\":1,\"lastTransitionTime\":\"2026-11-30T12:00:06Z\"},"                   \
    "{\"type\":\"VolumesDetached\",\"status\":\"True\",\"reason\":\"VolumesDetached\","            \
    "\"message\":\"\",\"observedGeneration\":1,\"lastTransitionTime\":\"2026-11-30T12:00:06Z\"},"  \
    "{\"type\":\"InstanceTerminating\",\"status\":\"True\",\"reason\":\"InstanceTerminating\","    \
    "\"message\":\"\",\"observedGeneration\":1,\"lastTransitionTime\":\"2026-11-30T12:00:06Z\"}"

/* The whole walk over three reconciles, the clock moving, the caches updated as the API server
 * would; the Node's finalizer goes only in the reconcile after Delete said NOT_FOUND. */
static void test_exec_walk(void **state)
{
    struct fx f;
    uint64_t rq;
    int i;

    (void)state;
    fx_init(&f);
    put(f.nodes,
        node(DELETING ",\"finalizers\":[\"karpenter.sh/termination\",\"other/keep\"]," POOL,
             "{\"key\":\"karpenter.sh/disrupted\",\"effect\":\"NoExecute\"},"
             "{\"key\":\"dedicated\",\"value\":\"gpu\",\"effect\":\"NoSchedule\"}",
             "True"));
    put(f.claims, claim_rv("20", "FakeNodeClass", "", ""));

    /* 1: cascade, taint, Draining; the minimum drain time holds it. */
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, T.drain_retry_usec);
    assert_int_equal(J.n, 3);
    assert_string_equal(J.line[0], "DELETE /apis/karpenter.sh/v1/nodeclaims/nc1");
    assert_non_null(strstr(J.body[0], "\"uid\":\"ncu1\""));
    assert_string_equal(J.line[1], "PATCH /api/v1/nodes/n1");
    assert_non_null(strstr(J.body[1], "\"resourceVersion\":\"10\""));
    assert_non_null(strstr(J.body[1], "\"node.kubernetes.io/exclude-from-external-load-"
                                      "balancers\":\"karpenter\""));
    /* The NoExecute copy replaced, the other taint kept. */
    assert_null(strstr(J.body[1], "NoExecute"));
    assert_non_null(strstr(J.body[1], "\"key\":\"dedicated\""));
    assert_non_null(strstr(J.body[1], "\"value\":\"gpu\""));
    assert_non_null(
        strstr(J.body[1], "{\"key\":\"karpenter.sh/disrupted\",\"effect\":\"NoSchedule\"}"));
    assert_string_equal(J.line[2], "PATCH /apis/karpenter.sh/v1/nodeclaims/nc1/status");
    assert_non_null(strstr(J.body[2], "\"resourceVersion\":\"20\""));
    assert_non_null(strstr(J.body[2], "\"type\":\"Drained\""));
    assert_non_null(strstr(J.body[2], "\"reason\":\"Draining\""));
    assert_int_equal(P.gets, 0); /* Ready: never asked */
    assert_int_equal(P.deletes, 0);
    assert_int_equal(M.drained, 0);

    /* The caches catch up: tainted Node, deleting NodeClaim, Draining since NOW. */
    put(f.nodes,
        node_rv("11",
                DELETING ",\"finalizers\":[\"karpenter.sh/termination\",\"other/keep\"]," POOL_LB,
                DISRUPTED, "True"));
    put(f.claims, claim_rv("21", "FakeNodeClass", DELETING, DRAINING_AT("2026-11-30T12:00:00Z")));
    fake_now = NOW + 2 * SEC;
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, T.drain_retry_usec);
    assert_int_equal(J.n, 0); /* nothing changed: nothing written */

    /* 2: past the minimum drain time: Drained, no volumes, Delete (the leave runs) -> 0. */
    fake_now = NOW + 6 * SEC;
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, T.delete_retry_usec);
    assert_int_equal(P.deletes, 1);
    assert_int_equal(J.n, 2);
    assert_string_equal(J.line[0], "provider delete");
    assert_string_equal(J.line[1], "PATCH /apis/karpenter.sh/v1/nodeclaims/nc1/status");
    assert_non_null(strstr(J.body[1], "\"resourceVersion\":\"21\""));
    assert_non_null(strstr(J.body[1], "\"type\":\"InstanceTerminating\",\"status\":\"True\""));
    assert_int_equal(journal_find("PATCH /api/v1/nodes/n1", 0), -1); /* the Node stays */
    assert_int_equal(M.drained, 1);
    assert_int_equal(M.terminated, 0);

    /* 3: Delete says NOT_FOUND: the machine is released; now, and only now, the finalizer. */
    put(f.claims, claim_rv("22", "FakeNodeClass", DELETING, ALL_CONDS_TRUE));
    P.delete_kind = KP_PROVIDER_ERR_NOT_FOUND;
    P.delete_r = -ENOENT;
    fake_now = NOW + 11 * SEC;
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, 0);
    i = journal_find("provider delete: not found", 0);
    assert_true(i >= 0);
    assert_int_equal(journal_find("PATCH /api/v1/nodes/n1", 0), i + 1);
    assert_int_equal(J.n, 2); /* conditions unchanged: no status write */
    assert_non_null(strstr(J.body[1], "\"finalizers\":[\"other/keep\"]"));
    assert_non_null(strstr(J.body[1], "\"resourceVersion\":\"11\""));
    assert_int_equal(M.drained, 1); /* not again */
    assert_int_equal(M.terminated, 1);
    assert_string_equal(M.terminated_labels, "default,z1");
    assert_int_equal(M.termination_duration, 1);
    assert_true(M.termination_seconds > 70.5 && M.termination_seconds < 71.5); /* 11:59:00 */
    assert_int_equal(M.lifetime, 1);
    assert_true(M.lifetime_seconds > 7210.5 && M.lifetime_seconds < 7211.5); /* 10:00:00 */
    fx_done(&f);
}

/* Not Ready and the provider says the machine is gone: the finalizer at once, nothing else. */
static void test_exec_fast_path(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    put(f.nodes, node(DELETING "," FIN "," POOL, "", "False"));
    put(f.claims, claim(DELETING, ""));
    P.get_kind = KP_PROVIDER_ERR_NOT_FOUND;
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(P.gets, 1);
    assert_int_equal(P.deletes, 0);
    assert_int_equal(J.n, 2);
    assert_string_equal(J.line[0], "provider get");
    assert_string_equal(J.line[1], "PATCH /api/v1/nodes/n1");
    assert_non_null(strstr(J.body[1], "\"finalizers\":[]"));
    assert_int_equal(M.terminated, 1);
    fx_done(&f);
}

/* Every write is a CAS: a lost race on the taint stops the reconcile (the key comes back). */
static void test_exec_conflict(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    put(f.nodes, node(DELETING "," FIN "," POOL, "", "True"));
    put(f.claims, claim(DELETING, ""));
    atomic_store(&conflict_on_node_patch, 1);
    assert_int_equal(run(&f, &rq), -KP_ECONFLICT);
    assert_int_equal(J.n, 1);
    assert_string_equal(J.line[0], "PATCH /api/v1/nodes/n1");
    fx_done(&f);
}

/* A Delete that fails keeps the Node (and its finalizer); what the walk found is recorded. */
static void test_exec_delete_error(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    put(f.nodes, node(DELETING "," FIN "," POOL_LB, DISRUPTED, "True"));
    put(f.claims, claim(DELETING, DRAINING_AT("2026-11-30T11:00:00Z")));
    P.delete_kind = KP_PROVIDER_ERR_RETRYABLE;
    P.delete_r = -EAGAIN;
    assert_int_equal(run(&f, &rq), -EAGAIN);
    assert_int_equal(P.deletes, 1);
    assert_int_equal(journal_find("PATCH /api/v1/nodes/n1", 0), -1);
    assert_int_equal(journal_find("PATCH /apis/karpenter.sh/v1/nodeclaims/nc1/status", 0), 1);
    assert_non_null(strstr(J.body[1], "\"type\":\"Drained\",\"status\":\"True\""));
    assert_null(strstr(J.body[1], "InstanceTerminating"));
    assert_int_equal(M.drained, 1);
    fx_done(&f);
}

/* Pods from the by-node index: a drainable pod holds the drain; a pod that stays (tolerates the
 * taint) neither holds it nor, through its PVC, lets its volume's attachment block. */
static void test_exec_pods_and_volumes(void **state)
{
    const char *pvc = "{\"metadata\":{\"name\":\"data\",\"namespace\":\"default\","
                      "\"resourceVersion\":\"1\"},\"spec\":{\"volumeName\":\"pv1\"}}";
    struct kp_entry *e = NULL;
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    put(f.nodes, node(DELETING "," FIN "," POOL_LB, DISRUPTED, "True"));
    put(f.claims, claim(DELETING, DRAINING_AT("2026-11-30T11:00:00Z")));
    put(f.pods, pod("web", "", "", "Running"));
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, T.drain_retry_usec);
    assert_int_equal(P.deletes, 0);
    /* Draining already recorded; the default drainer evicts the pod, this incarnation only. */
    assert_int_equal(J.n, 1);
    assert_int_equal(journal_find("POST /api/v1/namespaces/default/pods/web/eviction", 0), 0);
    assert_non_null(strstr(J.body[0], "\"preconditions\":{\"uid\":\"u-web\"}"));
    assert_string_equal(M.eviction_codes, "200");
    assert_int_equal(M.pods_drained, 1);

    /* web leaves; a DaemonSet-like pod that tolerates the taint stays with its volume. */
    assert_int_equal(kp_store_delete(f.pods, "default/web", NULL), 0);
    put(f.pods, pod("agent", "",
                    "\"tolerations\":[{\"operator\":\"Exists\"}],\"volumes\":[{\"name\":\"d\","
                    "\"persistentVolumeClaim\":{\"claimName\":\"data\"}}]",
                    "Running"));
    assert_int_equal(kp_pvc_decode(pvc, strlen(pvc), &e), 0);
    put(f.pvcs, e);
    put(f.vas, va("va-agent", "n1", "pv1"));
    put(f.vas, va("va-other-node", "n2", "pv9"));
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, T.delete_retry_usec); /* got to Delete */
    assert_int_equal(P.deletes, 1);

    /* A volume of nobody's that stays attached blocks, with the event's reason. */
    put(f.vas, va("va-orphan", "n1", "pv2"));
    P.deletes = 0;
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, T.drain_retry_usec);
    assert_int_equal(P.deletes, 0);
    assert_int_equal(journal_find("PATCH /apis/karpenter.sh/v1/nodeclaims/nc1/status", 0), 0);
    assert_non_null(strstr(J.body[0], "\"reason\":\"AwaitingVolumeDetachment\""));
    fx_done(&f);
}

/* Two NodeClaims claim the Node's providerID: no single source of truth, so neither is deleted
 * nor handed to the provider, and the Node (managed by its label) goes once drained. */
static void test_exec_duplicate_nodeclaims(void **state)
{
    const char *second = "{\"metadata\":{\"name\":\"nc2\",\"uid\":\"ncu2\","
                         "\"resourceVersion\":\"30\"},\"spec\":{\"nodeClassRef\":{\"group\":"
                         "\"test.kpssh.dev\",\"kind\":\"FakeNodeClass\",\"name\":\"c\"},"
                         "\"requirements\":[]},\"status\":{\"providerID\":\"fake://n1\"}}";
    struct kp_entry *e = NULL;
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    put(f.nodes, node(DELETING "," FIN "," POOL_LB, DISRUPTED, "True"));
    put(f.claims, claim("", ""));
    assert_int_equal(kp_nodeclaim_decode(second, strlen(second), &e), 0);
    put(f.claims, e);
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, 0);
    assert_int_equal(P.deletes, 0);
    assert_int_equal(J.n, 1);
    assert_string_equal(J.line[0], "PATCH /api/v1/nodes/n1");
    assert_non_null(strstr(J.body[0], "\"finalizers\":[]"));
    fx_done(&f);
}

/* Not ours (no nodepool label, another provider's node class), or gone: nothing happens. */
static void test_exec_not_managed(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    assert_int_equal(run(&f, &rq), 0); /* no such Node */
    put(f.nodes, node(DELETING "," FIN, "", "False"));
    put(f.claims, claim_rv("20", "OtherNodeClass", "", ""));
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, 0);
    assert_int_equal(J.n, 0);
    assert_int_equal(P.gets + P.deletes, 0);
    fx_done(&f);
}

/* The drain is the drainer's: another one plugs in, and its failure is the reconcile's. */
static int failing_drain(void *self, struct kp_client *c, const struct kp_ctx *cx,
                         const struct kp_drain_input *in, struct kp_drain_result *ret)
{
    unsigned *calls = self;

    (void)c;
    (void)cx;
    (void)ret;
    assert_string_equal(in->node->e.name, "n1");
    assert_int_equal(in->deadline_usec, NOW + 600 * SEC);
    (*calls)++;
    return -EIO;
}

static void test_exec_drainer(void **state)
{
    static const struct kp_drainer_ops ops = {.drain = failing_drain};
    unsigned calls = 0;
    const struct kp_drainer d = {.ops = &ops, .self = &calls};
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    kp_termination_controller_set_drainer(f.tc, &d);
    put(f.nodes, node(DELETING "," FIN "," POOL_LB, DISRUPTED, "True"));
    put(f.claims, claim(DELETING "," TGP("2026-11-30T12:10:00Z"), ""));
    assert_int_equal(run(&f, &rq), -EIO);
    assert_int_equal(calls, 1);
    /* Draining began even so. */
    assert_int_equal(journal_find("PATCH /apis/karpenter.sh/v1/nodeclaims/nc1/status", 0), 0);
    assert_non_null(strstr(J.body[0], "\"reason\":\"Draining\""));
    fx_done(&f);
}

/* --- the evicting drainer ------------------------------------------------------------------ */

#define DS_OWNER                                                                                   \
    "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"d\","      \
    "\"uid\":\"d1\",\"controller\":true}]"
#define CRITICAL "\"priorityClassName\":\"system-node-critical\""

/* kubelet's shutdown order: ordinary pods, DaemonSet pods, critical pods, critical DaemonSet
 * pods; "critical" is one of the two system priority classes by name, nothing else. */
static void test_drain_groups(void **state)
{
    struct kp_entry *v[5];

    (void)state;
    v[0] = pod("a", "", "", "Running");
    v[1] = pod("b", DS_OWNER, "", "Running");
    v[2] = pod("c", "", CRITICAL, "Running");
    v[3] = pod("d", DS_OWNER, "\"priorityClassName\":\"system-cluster-critical\"", "Running");
    v[4] = pod("e", "", "\"priorityClassName\":\"high\",\"priority\":1000000", "Running");
    assert_int_equal(kp_drain_group(PV(v[0])), 0);
    assert_int_equal(kp_drain_group(PV(v[1])), 1);
    assert_int_equal(kp_drain_group(PV(v[2])), 2);
    assert_int_equal(kp_drain_group(PV(v[3])), 3);
    assert_int_equal(kp_drain_group(PV(v[4])), 0);
    for (size_t i = 0; i < KP_ARRAY_SIZE(v); i++)
        kp_entry_unref(v[i]);
}

/* The plan for pods[0..n) with deadline (0: none); verbs into out. */
static struct kp_drain_result plan(struct kp_entry **pods, size_t n, int64_t deadline,
                                   enum kp_drain_verb *out)
{
    const struct kp_pod_view *pv[16];
    struct kp_entry *nd = node(DELETING, DISRUPTED, "True");
    struct kp_drain_result r;
    struct kp_drain_input in = {
        .node = NV(nd), .n_pods = n, .deadline_usec = deadline, .now_usec = NOW};

    assert_true(n <= KP_ARRAY_SIZE(pv));
    for (size_t i = 0; i < n; i++)
        pv[i] = pods[i] ? PV(pods[i]) : NULL;
    in.pods = pv;
    memset(&r, 0, sizeof(r));
    kp_drain_plan(&in, out, &r);
    kp_entry_unref(nd);
    return r;
}

/* Only the first group still holding a pod is evicted; terminating and do-not-disrupt pods of
 * it are waited on, not evicted; pods a drain does not wait on are skipped and not counted. */
static void test_drain_plan_groups(void **state)
{
    enum { WEB, DS, CRIT, DND, TERM, DONE, TOL, STATIC, N };
    struct kp_entry *v[N];
    enum kp_drain_verb vb[N];
    struct kp_drain_result r;

    (void)state;
    v[WEB] = pod("web", "", "", "Running");
    v[DS] = pod("ds", DS_OWNER, "", "Running");
    v[CRIT] = pod("crit", "", CRITICAL, "Running");
    v[DND] =
        pod("dnd", "\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\"}", "", "Running");
    v[TERM] = pod("term", "\"deletionTimestamp\":\"2026-11-30T12:00:20Z\"", "", "Running");
    v[DONE] = pod("done", "", "", "Succeeded");
    v[TOL] = pod("tol", "", "\"tolerations\":[{\"operator\":\"Exists\"}]", "Running");
    v[STATIC] =
        pod("static", "\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"}", "", "Running");
    r = plan(v, N, 0, vb);
    assert_int_equal(vb[WEB], KP_DRAIN_EVICT);
    assert_int_equal(vb[DS], KP_DRAIN_WAIT);
    assert_int_equal(vb[CRIT], KP_DRAIN_WAIT);
    assert_int_equal(vb[DND], KP_DRAIN_WAIT);
    assert_int_equal(vb[TERM], KP_DRAIN_WAIT);
    assert_int_equal(vb[DONE], KP_DRAIN_SKIP);
    assert_int_equal(vb[TOL], KP_DRAIN_SKIP);
    assert_int_equal(vb[STATIC], KP_DRAIN_SKIP);
    assert_false(r.drained);
    assert_int_equal(r.waiting, 5);
    assert_string_equal(r.message, "5 pods are waiting to be evicted");

    /* web gone: group 0 still holds dnd and term, so the DaemonSet pod waits. */
    kp_entry_unref(v[WEB]);
    v[WEB] = NULL;
    r = plan(v, N, 0, vb);
    assert_int_equal(vb[DS], KP_DRAIN_WAIT);
    assert_int_equal(vb[DND], KP_DRAIN_WAIT);
    assert_int_equal(r.waiting, 4);

    /* Group 0 empty: the DaemonSet pod goes, the critical one waits for it. */
    kp_entry_unref(v[DND]);
    kp_entry_unref(v[TERM]);
    v[DND] = v[TERM] = NULL;
    r = plan(v, N, 0, vb);
    assert_int_equal(vb[DS], KP_DRAIN_EVICT);
    assert_int_equal(vb[CRIT], KP_DRAIN_WAIT);

    /* Then the critical pod. */
    kp_entry_unref(v[DS]);
    v[DS] = NULL;
    r = plan(v, N, 0, vb);
    assert_int_equal(vb[CRIT], KP_DRAIN_EVICT);
    assert_int_equal(r.waiting, 1);

    kp_entry_unref(v[CRIT]);
    v[CRIT] = NULL;
    r = plan(v, N, 0, vb);
    assert_true(r.drained);
    assert_int_equal(r.waiting, 0);
    assert_string_equal(r.message, "");
    for (size_t i = 0; i < N; i++)
        kp_entry_unref(v[i]);
}

/* Past the deadline minus its own grace period a pod is deleted whatever its group, PDB or
 * do-not-disrupt; the rest keep the graceful order. */
static void test_drain_plan_force(void **state)
{
    struct kp_entry *v[4];
    enum kp_drain_verb vb[4];
    struct kp_drain_result r;

    (void)state;
    v[0] = pod("quick", "", "\"terminationGracePeriodSeconds\":5", "Running");
    v[1] = pod("crit", "", CRITICAL, "Running"); /* 30 s grace */
    v[2] = pod("dnd", "\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\"}", "", "Running");
    v[3] = pod("ds", DS_OWNER ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\"}",
               "\"terminationGracePeriodSeconds\":5", "Running");
    r = plan(v, 4, NOW + 10 * SEC, vb);
    assert_int_equal(vb[0], KP_DRAIN_EVICT); /* 5 s fit before the deadline */
    assert_int_equal(vb[1], KP_DRAIN_FORCE);
    assert_int_equal(vb[2], KP_DRAIN_FORCE);
    assert_int_equal(vb[3], KP_DRAIN_WAIT); /* group 1, and do-not-disrupt */
    assert_int_equal(r.waiting, 4);
    /* Already terminating: granted its time, forced only when kubelet would finish it after
     * the deadline (its own grace period no longer counts). */
    {
        struct kp_entry *t[2] = {
            pod("going", "\"deletionTimestamp\":\"2026-11-30T12:00:20Z\"", "", "Running"),
            pod("late", "\"deletionTimestamp\":\"2026-11-30T12:00:40Z\"", "", "Running")};
        enum kp_drain_verb tv[2];

        r = plan(t, 2, NOW + 25 * SEC, tv);
        assert_int_equal(tv[0], KP_DRAIN_WAIT);
        assert_int_equal(tv[1], KP_DRAIN_FORCE);
        assert_int_equal(r.waiting, 2);
        kp_entry_unref(t[0]);
        kp_entry_unref(t[1]);
    }
    /* Past the deadline: everything. */
    r = plan(v, 4, NOW - SEC, vb);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(vb[i], KP_DRAIN_FORCE);
    /* No deadline: never forced; do-not-disrupt waits. */
    r = plan(v, 4, 0, vb);
    assert_int_equal(vb[1], KP_DRAIN_WAIT);
    assert_int_equal(vb[2], KP_DRAIN_WAIT);
    for (size_t i = 0; i < 4; i++)
        kp_entry_unref(v[i]);
}

/* One drain() call of d over pods with the claim (NULL: none) and deadline; the result. */
static struct kp_drain_result evict_call(struct fx *f, struct kp_evict_drainer *d,
                                         struct kp_entry **pods, size_t n, struct kp_entry *nc,
                                         int64_t deadline)
{
    const struct kp_pod_view *pv[80];
    struct kp_entry *nd = node(DELETING, DISRUPTED, "True");
    const struct kp_drainer dr = kp_evict_drainer(d);
    struct kp_drain_result r;
    struct kp_drain_input in = {.node = NV(nd),
                                .nodeclaim = nc ? NCV(nc) : NULL,
                                .n_pods = n,
                                .deadline_usec = deadline,
                                .now_usec = fake_now,
                                .observer = &OBS};

    assert_true(n <= KP_ARRAY_SIZE(pv));
    for (size_t i = 0; i < n; i++)
        pv[i] = PV(pods[i]);
    in.pods = pv;
    memset(&r, 0, sizeof(r));
    journal_reset();
    assert_int_equal(dr.ops->drain(dr.self, f->c, NULL, &in, &r), 0);
    kp_entry_unref(nd);
    return r;
}

/* An eviction that succeeds is counted (code 200, drained with the NodeClaim's disruption
 * reason) and not repeated while the cache catches up; a PDB refusal is retried with a
 * doubling backoff; 404 forgets the pod. */
static void test_evict_exec(void **state)
{
    struct kp_evict_drainer *d = NULL;
    struct kp_entry *web = pod("web", "", "", "Running");
    struct kp_entry *nc = claim(DELETING, "{\"type\":\"DisruptionReason\",\"status\":\"True\","
                                          "\"reason\":\"Underutilized\",\"message\":\"x\"}");
    struct kp_drain_result r;
    struct fx f;

    (void)state;
    fx_init(&f);
    assert_int_equal(kp_evict_drainer_new(&d), 0);
    r = evict_call(&f, d, &web, 1, nc, 0);
    assert_false(r.drained);
    assert_int_equal(r.waiting, 1);
    assert_int_equal(journal_find("POST /api/v1/namespaces/default/pods/web/eviction", 0), 0);
    assert_non_null(strstr(J.body[0], "\"kind\":\"Eviction\""));
    assert_non_null(strstr(J.body[0], "\"preconditions\":{\"uid\":\"u-web\"}"));
    assert_string_equal(M.eviction_codes, "200");
    assert_string_equal(M.drained_reason, "Underutilized");
    /* The cache still shows it running: not evicted again until it has had time to settle. */
    fake_now += SEC;
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(J.n, 0);
    fake_now += KP_EVICT_SETTLE_USEC;
    (void)evict_call(&f, d, &web, 1, NULL, 0);
    assert_int_equal(J.n, 1);
    assert_string_equal(M.drained_reason, ""); /* no NodeClaim: no reason */

    /* A PDB says no: counted by code, retried after 100 ms, then after 200 ms. */
    atomic_store(&evict_answer, 429);
    fake_now += KP_EVICT_SETTLE_USEC;
    M.eviction_codes[0] = '\0';
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(J.n, 1);
    assert_string_equal(M.eviction_codes, "429");
    fake_now += 50 * 1000;
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(J.n, 0);
    fake_now += 60 * 1000;
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(J.n, 1);
    fake_now += 150 * 1000;
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(J.n, 0);
    fake_now += 60 * 1000;
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(J.n, 1);
    assert_string_equal(M.eviction_codes, "429,429,429");
    assert_int_equal(M.pods_drained, 2); /* refusals drain nothing */

    /* Several PDBs (a 500 with that message), then a server error: retried the same way. */
    atomic_store(&evict_answer, 500);
    fake_now += KP_EVICT_BACKOFF_MAX_USEC;
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(J.n, 1);
    atomic_store(&evict_answer, 503);
    fake_now += KP_EVICT_BACKOFF_MAX_USEC;
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(J.n, 1);
    assert_string_equal(M.eviction_codes, "429,429,429,500,503");
    assert_int_equal(kp_evict_drainer_tracked(d), 1);

    /* Gone (404) or another incarnation (409): forgotten. */
    atomic_store(&evict_answer, 404);
    fake_now += KP_EVICT_BACKOFF_MAX_USEC;
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(kp_evict_drainer_tracked(d), 0);
    atomic_store(&evict_answer, 409);
    (void)evict_call(&f, d, &web, 1, nc, 0);
    assert_int_equal(J.n, 1);
    assert_int_equal(kp_evict_drainer_tracked(d), 0);
    assert_int_equal(M.pods_drained, 2);

    d = kp_evict_drainer_free(d);
    kp_entry_unref(web);
    kp_entry_unref(nc);
    fx_done(&f);
}

/* Past the deadline: a delete with this pod's uid and a grace period ending at the deadline (at
 * least 1 s), counted as drained; no eviction. */
static void test_evict_force(void **state)
{
    struct kp_evict_drainer *d = NULL;
    struct kp_entry *p[2] = {pod("web", "", "", "Running"),
                             pod("late",
                                 "\"annotations\":{\"karpenter.sh/do-not-disrupt\":"
                                 "\"true\"}",
                                 "", "Running")};
    struct fx f;

    (void)state;
    fx_init(&f);
    assert_int_equal(kp_evict_drainer_new(&d), 0);
    (void)evict_call(&f, d, p, 2, NULL, NOW + 10 * SEC);
    assert_int_equal(J.n, 2);
    assert_int_equal(atomic_load(&evictions_seen), 0);
    assert_int_equal(journal_find("DELETE /api/v1/namespaces/default/pods/web", 0), 0);
    assert_non_null(strstr(J.body[0], "\"gracePeriodSeconds\":10"));
    assert_non_null(strstr(J.body[0], "\"uid\":\"u-web\""));
    assert_int_equal(journal_find("DELETE /api/v1/namespaces/default/pods/late", 0), 1);
    assert_int_equal(M.pods_drained, 2);
    /* Not again while the cache catches up; past the deadline, 1 s. */
    fake_now += SEC;
    (void)evict_call(&f, d, p, 2, NULL, NOW + 10 * SEC);
    assert_int_equal(J.n, 0);
    fake_now = NOW + 30 * SEC;
    (void)evict_call(&f, d, p, 2, NULL, NOW + 10 * SEC);
    assert_int_equal(J.n, 2);
    assert_non_null(strstr(J.body[0], "\"gracePeriodSeconds\":1"));
    d = kp_evict_drainer_free(d);
    kp_entry_unref(p[0]);
    kp_entry_unref(p[1]);
    fx_done(&f);
}

/* At most KP_EVICT_MAX_CALLS calls per drain; the rest at the next. Pods the drainer has not
 * seen for 10 minutes are forgotten. */
static void test_evict_bounds(void **state)
{
    struct kp_evict_drainer *d = NULL;
    struct kp_entry *p[80];
    struct kp_entry *other = pod("other", "", "", "Running");
    struct kp_drain_result r;
    struct fx f;

    (void)state;
    fx_init(&f);
    for (size_t i = 0; i < KP_ARRAY_SIZE(p); i++) {
        char name[16];

        (void)snprintf(name, sizeof(name), "p%zu", i);
        p[i] = pod(name, "", "", "Running");
    }
    assert_int_equal(kp_evict_drainer_new(&d), 0);
    r = evict_call(&f, d, p, KP_ARRAY_SIZE(p), NULL, 0);
    assert_int_equal(r.waiting, 80);
    assert_int_equal(atomic_load(&evictions_seen), (int)KP_EVICT_MAX_CALLS);
    (void)evict_call(&f, d, p, KP_ARRAY_SIZE(p), NULL, 0);
    assert_int_equal(atomic_load(&evictions_seen), 80);
    assert_int_equal(kp_evict_drainer_tracked(d), 80);
    fake_now += 11 * 60 * SEC;
    (void)evict_call(&f, d, &other, 1, NULL, 0);
    assert_int_equal(kp_evict_drainer_tracked(d), 1);
    d = kp_evict_drainer_free(d);
    for (size_t i = 0; i < KP_ARRAY_SIZE(p); i++)
        kp_entry_unref(p[i]);
    kp_entry_unref(other);
    fx_done(&f);
}

/* Set-up: refuses an env without a provider; registers on the shared informers and takes its
 * handlers back when freed. */
static void test_setup(void **state)
{
    struct kp_informer *nodes, *claims;
    struct fx f;
    struct kp_core_env bad;
    struct kp_termination_controller *tc = NULL;
    size_t before;

    (void)state;
    fx_init(&f);
    bad = f.env;
    bad.provider = NULL;
    assert_int_equal(kp_termination_controller_new(&bad, &tc), -EINVAL);
    assert_null(tc);
    assert_int_equal(kp_informers_nodes(f.reg, &nodes), 0);
    assert_int_equal(kp_informers_nodeclaims(f.reg, &claims), 0);
    before = kp_informer_handler_count(nodes) + kp_informer_handler_count(claims);
    assert_int_equal(before, 2); /* f.tc's: Node keys, NodeClaims mapped to their Node */
    assert_false(kp_termination_controller_ready(f.tc)); /* not started */
    f.tc = kp_termination_controller_free(f.tc);
    assert_int_equal(kp_informer_handler_count(nodes) + kp_informer_handler_count(claims), 0);
    assert_null(kp_termination_controller_free(NULL));
    fx_done(&f);
}

/* --- allocation failure sweep ------------------------------------------------------------ */

static struct kp_entry *dec(int (*fn)(const char *, size_t, struct kp_entry **), const char *s)
{
    struct kp_entry *e = NULL;

    return fn(s, strlen(s), &e) < 0 ? NULL : e;
}

/* 0 or the store's error; e is the store's or dropped either way. */
static int put_quiet(struct kp_store *s, struct kp_entry *e)
{
    int r;

    if (!e)
        return -ENOMEM;
    if ((r = kp_store_put(s, e, NULL)) < 0)
        kp_entry_unref(e);
    return r;
}

/* Two reconciles of a drained Node whose only pod stays with its volume: gather (pods, PVCs,
 * attachments), the drainer, Delete, the status write, then the finalizer, each allocation
 * failing in turn. No cmocka assertions: every failure must come back as an error. */
static int torture_reconcile(void)
{
    static const char node_json[] =
        "{\"metadata\":{\"name\":\"n1\",\"uid\":\"nu1\",\"resourceVersion\":\"10\","
        "\"creationTimestamp\":\"2026-11-30T10:00:00Z\"," DELETING "," FIN "," POOL_LB "},"
        "\"spec\":{\"providerID\":\"fake://n1\",\"taints\":[" DISRUPTED "]},"
        "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";
    static const char claim_json[] =
        "{\"metadata\":{\"name\":\"nc1\",\"uid\":\"ncu1\",\"resourceVersion\":\"20\","
        "\"generation\":1," DELETING "},"
        "\"spec\":{\"nodeClassRef\":{\"group\":\"test.kpssh.dev\",\"kind\":\"FakeNodeClass\","
        "\"name\":\"c\"},\"requirements\":[]},"
        "\"status\":{\"providerID\":\"fake://n1\",\"nodeName\":\"n1\",\"conditions\":[" DRAINING_AT(
            "2026-11-30T11:00:00Z") "]}}";
    static const char pod_json[] =
        "{\"metadata\":{\"name\":\"agent\",\"namespace\":\"default\",\"uid\":\"pa\","
        "\"resourceVersion\":\"1\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":"
        "\"c\"}],\"tolerations\":[{\"operator\":\"Exists\"}],\"volumes\":[{\"name\":\"d\","
        "\"persistentVolumeClaim\":{\"claimName\":\"data\"}}]},\"status\":{\"phase\":"
        "\"Running\"}}";
    static const char pvc_json[] =
        "{\"metadata\":{\"name\":\"data\",\"namespace\":\"default\",\"resourceVersion\":"
        "\"1\"},\"spec\":{\"volumeName\":\"pv1\"}}";
    static const char va_json[] =
        "{\"metadata\":{\"name\":\"va1\",\"resourceVersion\":\"1\"},\"spec\":{\"attacher\":"
        "\"csi\",\"nodeName\":\"n1\",\"source\":{\"persistentVolumeName\":\"pv1\"}}}";
    static struct server srv; /* one for the whole sweep; its thread ends with the process */
    static bool started;
    char url[64];
    struct kp_transport_opts to = {.allow_plain_http = true, .timeout_usec = 5 * SEC};
    struct kp_client *c = NULL;
    struct kp_registry *reg = NULL;
    struct kp_provider prov = {.ops = &sp_ops};
    struct kp_core_env env = {0};
    struct kp_termination_controller *tc = NULL;
    struct kp_informer *nodes, *claims, *pods, *vas, *pvcs;
    uint64_t rq = 0;
    int r;

    if (!started) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof(a);

        srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (srv.lfd < 0 || bind(srv.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
            listen(srv.lfd, 8) < 0 || getsockname(srv.lfd, (struct sockaddr *)&a, &alen) < 0)
            return -EIO;
        srv.port = ntohs(a.sin_port);
        if (pthread_create(&srv.thread, NULL, server_main, &srv) != 0)
            return -EIO;
        started = true;
    }
    memset(&P, 0, sizeof(P));
    fake_now = NOW;
    (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)srv.port);
    to.server = url;
    if ((r = kp_client_new(&to, &c)) < 0)
        return r;
    if ((r = kp_registry_new(c, &reg)) < 0)
        goto out;
    env.client = c;
    env.informers = reg;
    env.provider = &prov;
    env.observer = &OBS;
    env.timing = T;
    env.now_usec = now_fn;
    if ((r = kp_termination_controller_new(&env, &tc)) < 0 ||
        (r = kp_informers_nodes(reg, &nodes)) < 0 ||
        (r = kp_informers_nodeclaims(reg, &claims)) < 0 ||
        (r = kp_informers_pods(reg, &pods)) < 0 ||
        (r = kp_informers_volumeattachments(reg, &vas)) < 0 ||
        (r = kp_informers_pvcs(reg, &pvcs)) < 0)
        goto out;
    if ((r = put_quiet(kp_informer_store(nodes), dec(kp_node_decode, node_json))) < 0 ||
        (r = put_quiet(kp_informer_store(claims), dec(kp_nodeclaim_decode, claim_json))) < 0 ||
        (r = put_quiet(kp_informer_store(pods), dec(kp_pod_decode, pod_json))) < 0 ||
        (r = put_quiet(kp_informer_store(pvcs), dec(kp_pvc_decode, pvc_json))) < 0 ||
        (r = put_quiet(kp_informer_store(vas), dec(kp_volumeattachment_decode, va_json))) < 0)
        goto out;
    if ((r = kp_termination_reconcile(tc, c, NULL, "n1", &rq)) < 0)
        goto out;
    /* The walk must reach Delete, unless an injected failure changed what the caches hold
     * (jansson may drop a member when an allocation fails while it parses). */
    if (!kp_alloc_failed() && (rq != T.delete_retry_usec || P.deletes != 1)) {
        r = 1; /* a wrong answer, not a failure */
        goto out;
    }
    P.delete_kind = KP_PROVIDER_ERR_NOT_FOUND;
    P.delete_r = -ENOENT;
    r = kp_termination_reconcile(tc, c, NULL, "n1", &rq);
out:
    kp_termination_controller_free(tc);
    kp_registry_free(reg);
    kp_client_free(c);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needs_force),
        cmocka_unit_test(test_drainable),
        cmocka_unit_test(test_drain_count),
        cmocka_unit_test(test_storage_projections),
        cmocka_unit_test(test_plan_ignore),
        cmocka_unit_test(test_plan_cascade_and_fast_path),
        cmocka_unit_test(test_plan_deadline),
        cmocka_unit_test(test_plan_taint),
        cmocka_unit_test(test_plan_drain),
        cmocka_unit_test(test_plan_volumes),
        cmocka_unit_test(test_plan_instance),
        cmocka_unit_test(test_plan_release_order),
        cmocka_unit_test(test_exec_walk),
        cmocka_unit_test(test_exec_fast_path),
        cmocka_unit_test(test_exec_conflict),
        cmocka_unit_test(test_exec_delete_error),
        cmocka_unit_test(test_exec_pods_and_volumes),
        cmocka_unit_test(test_exec_duplicate_nodeclaims),
        cmocka_unit_test(test_exec_not_managed),
        cmocka_unit_test(test_exec_drainer),
        cmocka_unit_test(test_drain_groups),
        cmocka_unit_test(test_drain_plan_groups),
        cmocka_unit_test(test_drain_plan_force),
        cmocka_unit_test(test_evict_exec),
        cmocka_unit_test(test_evict_force),
        cmocka_unit_test(test_evict_bounds),
        cmocka_unit_test(test_setup),
    };

    static const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_reconcile),
    };

    return kp_test_main("termination", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases),
                        argc, argv);
}
