/* Tests for the disruption controller's executor (core/disruption/disruption.c): its pass
 * (kp_disruption_reconcile) against a loopback API server that records every write
 * (kp-fake-api.h), over stores fed by hand, a detached cluster state fed the same objects, the
 * fake provider, a fake clock and a recording observer; the controller's events go to a second
 * loopback server, so the first one's record holds the writes alone.
 *
 * Emptiness of one empty node: nothing written on the pass that finds it; after the validation
 * delay the karpenter.sh/disrupted:NoSchedule taint (under the Node's cached resourceVersion),
 * DisruptionReason=Empty on the NodeClaim's status (under its resourceVersion), the DELETE with
 * the NodeClaim's uid, counted once with Karpenter's labels and told by DisruptionTerminating
 * events. Then the races and refusals: a Conflict on the taint (nothing else sent, nothing
 * counted, the mark taken back), a DELETE refused with 500 (the taint taken off again, under the
 * resourceVersion the taint's answer gave the Node when there is one, the mark back, nothing
 * counted), a DELETE answered NotFound (done, uncounted, no DisruptionTerminating); nodes that may
 * not be disrupted (a do-not-disrupt pod or Node annotation, also one that reaches the cache
 * during the validation delay): no write at all. Drift with a replacement: taint, reason and the
 * replacement's create (its body), the node marked once the replacement is in the state and
 * deleted only once it is Initialized; a replacement deleted first rolls the command back.
 * Single-node consolidation's REPLACE with a NodeClaim narrowed to the cheaper type. Expiry: the
 * replacement first despite do-not-disrupt, the expired node deleted even when its replacement
 * fails, at once when its pod fits elsewhere, and left to the expiration controller when too
 * little of its grace is left. The clean-up of a taint and a condition no command holds. Objects
 * are decoded from JSON written with ' for ". */
#include "kp-test.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "k8s/client.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "k8s/rfc3339.h"
#include "k8s/store.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/disruption/disruption.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/provisioning/scheduler.h"
#include "core/state/cluster.h"
#include "kp-fake-api.h"
#include "kp-fake-provider.h"

#define SEC 1000000LL
#define T0 "2026-01-01T00:00:00Z"
/* When the passes run: an hour after everything was made (RFC 3339 for the conditions). */
#define NOW "2026-01-01T01:00:00Z"
#define LATER "2026-01-01T01:00:15Z" /* NOW + the validation delay */

#define NC_PATH "/apis/karpenter.sh/v1/nodeclaims/"
#define NODE_PATH "/api/v1/nodes/"
#define EVENTS_LINE "POST /apis/events.k8s.io/v1/namespaces/default/events"

/* Test objects decode from JSON written with ' for " (tests/lib/kp-test.h). */
#define decode(fn, ...) kp_test_decode(fn, true, __VA_ARGS__)

#define COND(type, st)                                                                             \
    "{'type':'" type "','status':'" st "','reason':'R','message':'','observedGeneration':1,"       \
    "'lastTransitionTime':'" T0 "'}"

/* What the observer heard: karpenter_nodeclaims_disrupted_total with its last labels,
 * karpenter_pods_disruption_initiated_total, the decisions, and the failed validations. */
static struct {
    unsigned disrupted, pods, decisions, failed_validations, queue_failures;
    char labels[160], decision[96];
} M;

static void obs_count(void *ctx, enum kp_core_metric m, const char *const *labels)
{
    (void)ctx;
    switch (m) {
    case KP_CM_NODECLAIMS_DISRUPTED:
        M.disrupted++;
        (void)snprintf(M.labels, sizeof(M.labels), "%s,%s,%s,%s,%s", labels[0], labels[1],
                       labels[2], labels[3], labels[4]);
        break;
    case KP_CM_PODS_DISRUPTION_INITIATED:
        M.pods++;
        break;
    case KP_CM_VOLUNTARY_DISRUPTION_DECISIONS:
        M.decisions++;
        (void)snprintf(M.decision, sizeof(M.decision), "%s,%s,%s", labels[0], labels[1], labels[2]);
        break;
    case KP_CM_VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS:
        M.failed_validations++;
        break;
    case KP_CM_VOLUNTARY_DISRUPTION_QUEUE_FAILURES:
        M.queue_failures++;
        break;
    default:
        break;
    }
}

static const struct kp_core_observer OBS = {.count = obs_count};

static int64_t fake_now;
static uint64_t now_fn(void)
{
    return (uint64_t)fake_now;
}

struct fx {
    struct kp_fake_api *api, *evapi; /* the writes; the events */
    struct kp_client *c, *evc;
    struct kp_events *events;
    struct kp_registry *reg;
    struct kp_fake_provider *fp;
    struct kp_provider prov;
    struct kp_core_env env;
    struct kp_cluster_state *cluster;
    struct kp_disruption_controller *ctl;
    struct kp_informer *nodes, *claims, *pools, *pods;
    int log_fd;
};

static void fx_init(struct fx *f)
{
    struct kp_transport_opts to = {.allow_plain_http = true, .timeout_usec = 5 * SEC};
    struct kp_events_opts eo = {.controller = "karpenter", .instance = "test"};

    memset(f, 0, sizeof(*f));
    memset(&M, 0, sizeof(M));
    assert_int_equal(kp_rfc3339_parse(NOW, strlen(NOW), &fake_now), 0);
    f->log_fd = kp_test_log_quiet();
    f->api = kp_fake_api_start();
    f->evapi = kp_fake_api_start();
    to.server = kp_fake_api_url(f->api);
    assert_int_equal(kp_client_new(&to, &f->c), 0);
    to.server = kp_fake_api_url(f->evapi);
    assert_int_equal(kp_client_new(&to, &f->evc), 0);
    assert_int_equal(kp_events_new(f->evc, &eo, &f->events), 0);
    assert_int_equal(kp_registry_new(f->c, &f->reg), 0);
    assert_int_equal(kp_fake_provider_new(&f->fp), 0);
    f->prov = kp_fake_provider_as_provider(f->fp);
    f->env.client = f->c;
    f->env.informers = f->reg;
    f->env.provider = &f->prov;
    f->env.observer = &OBS;
    f->env.now_usec = now_fn;
    f->env.events = f->events;
    /* Fed by hand below (the informers never start: the stores and the state are the test's). */
    assert_int_equal(kp_cluster_state_new_detached(&f->env, &f->cluster), 0);
    kp_cluster_state_set_informers_synced(f->cluster, true);
    f->env.cluster = f->cluster;
    assert_int_equal(kp_disruption_controller_new(&f->env, &f->ctl), 0);
    assert_int_equal(kp_informers_nodes(f->reg, &f->nodes), 0);
    assert_int_equal(kp_informers_nodeclaims(f->reg, &f->claims), 0);
    assert_int_equal(kp_informers_nodepools(f->reg, &f->pools), 0);
    assert_int_equal(kp_informers_pods(f->reg, &f->pods), 0);
}

static void fx_done(struct fx *f)
{
    f->ctl = kp_disruption_controller_free(f->ctl);
    f->cluster = kp_cluster_state_free(f->cluster);
    f->reg = kp_registry_free(f->reg);
    f->events = kp_events_free(f->events);
    f->evc = kp_client_free(f->evc);
    f->c = kp_client_free(f->c);
    f->fp = kp_fake_provider_free(f->fp);
    f->evapi = kp_fake_api_stop(f->evapi);
    f->api = kp_fake_api_stop(f->api);
    kp_test_log_restore(f->log_fd);
}

static void put(struct kp_informer *inf, struct kp_entry *e)
{
    assert_int_equal(kp_store_put(kp_informer_store(inf), e, NULL), 0);
}

/* The NodePool np of the fake provider's node class, Ready: consolidation when empty or
 * underutilized, every node may go at once. */
static void add_pool(struct fx *f)
{
    put(f->pools, decode(kp_nodepool_decode,
                         "{'metadata':{'name':'np','uid':'np-uid','resourceVersion':'1'},"
                         "'spec':{'disruption':{'consolidationPolicy':'WhenEmptyOrUnderutilized',"
                         "'consolidateAfter':'0s','budgets':[{'nodes':'100%%'}]},"
                         "'template':{'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
                         "','kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[]}}},"
                         "'status':{'conditions':[" COND("Ready", "True") "]}}"));
}

/* A Node n1 (uid n1-uid, resourceVersion rv: 7 as first seen) of NodePool np, registered and initialized, Ready,
 * with extra metadata and spec (each with a leading comma, may be ""). */
static struct kp_entry *xnode(const char *rv, const char *meta, const char *spec)
{
    return decode(kp_node_decode,
                  "{'metadata':{'name':'n1','uid':'n1-uid','resourceVersion':'%s',"
                  "'creationTimestamp':'" T0 "','labels':{'karpenter.sh/nodepool':'np',"
                  "'karpenter.sh/registered':'true','karpenter.sh/initialized':'true',"
                  "'karpenter.sh/capacity-type':'on-demand',"
                  "'node.kubernetes.io/instance-type':'small','topology.kubernetes.io/zone':'z1',"
                  "'kubernetes.io/hostname':'n1'}%s},"
                  "'spec':{'providerID':'fake://n1'%s},"
                  "'status':{'capacity':{'cpu':'2','memory':'4Gi','pods':'110'},"
                  "'allocatable':{'cpu':'2','memory':'4Gi','pods':'110'},"
                  "'conditions':[{'type':'Ready','status':'True'}]}}",
                  rv, meta, spec);
}

#define BASE_CONDS                                                                                 \
    COND("Launched", "True")                                                                       \
    "," COND("Registered", "True") "," COND("Initialized", "True") "," COND("Consolidatable",      \
                                                                            "True")

/* Its NodeClaim nc1 (uid nc1-uid, resourceVersion rv: 3 as first seen) with conditions conds (BASE_CONDS:
 * launched, registered, initialized and Consolidatable) and extra spec (leading comma, may be
 * ""). */
static struct kp_entry *xclaim_spec(const char *rv, const char *conds, const char *spec)
{
    return decode(kp_nodeclaim_decode,
                  "{'metadata':{'name':'nc1','uid':'nc1-uid','resourceVersion':'%s',"
                  "'generation':1,'creationTimestamp':'" T0 "',"
                  "'labels':{'karpenter.sh/nodepool':'np','karpenter.sh/capacity-type':"
                  "'on-demand','node.kubernetes.io/instance-type':'small'}},"
                  "'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
                  "','kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[]%s},"
                  "'status':{'providerID':'fake://n1','nodeName':'n1',"
                  "'capacity':{'cpu':'2','memory':'4Gi','pods':'110'},"
                  "'allocatable':{'cpu':'2','memory':'4Gi','pods':'110'},"
                  "'conditions':[%s]}}",
                  rv, spec, conds);
}

static struct kp_entry *xclaim(const char *rv, const char *conds)
{
    return xclaim_spec(rv, conds, "");
}

/* spec.taints with the disrupted taint alone, and the DisruptionReason condition, as the
 * executor's writes leave them. */
#define TAINTED ",'taints':[{'key':'karpenter.sh/disrupted','effect':'NoSchedule'}]"
#define DISRUPTED(reason)                                                                          \
    "{'type':'DisruptionReason','status':'True','reason':'" reason "','message':'" reason          \
    "','observedGeneration':1,'lastTransitionTime':'" T0 "'}"

/* The informer's update: e replaces its store's entry, and the state hears of it. */
static void update(struct fx *f, struct kp_informer *inf, struct kp_entry *e,
                   void (*event)(struct kp_cluster_state *, const struct kp_entry *,
                                 const struct kp_entry *))
{
    struct kp_entry *old = NULL;

    assert_int_equal(kp_store_put(kp_informer_store(inf), e, &old), 0);
    event(f->cluster, old, e);
    kp_entry_unref(old);
}

/* Node n1 (with node_meta and node_spec) and NodeClaim nc1 (with conds) in the stores and in the state. */
static void add_node_with(struct fx *f, const char *node_meta, const char *node_spec,
                          const char *conds)
{
    struct kp_entry *n = xnode("7", node_meta, node_spec), *nc = xclaim("3", conds);

    kp_cluster_state_nodeclaim_event(f->cluster, NULL, nc);
    kp_cluster_state_node_event(f->cluster, NULL, n);
    put(f->claims, nc);
    put(f->nodes, n);
}

/* The empty node: with no pod bound, n1 and nc1 as above. */
static void add_node(struct fx *f, const char *node_meta)
{
    add_node_with(f, node_meta, "", BASE_CONDS);
}

/* A running ReplicaSet pod default/p bound to n1, with annotations (members, may be ""). */
static void add_pod(struct fx *f, const char *annotations)
{
    struct kp_entry *p =
        decode(kp_pod_decode,
               "{'metadata':{'name':'p','namespace':'default','uid':'p-uid','resourceVersion':'1',"
               "'creationTimestamp':'" T0 "','annotations':{%s},'ownerReferences':[{'apiVersion':"
               "'apps/v1','kind':'ReplicaSet','name':'o','uid':'o','controller':true}]},"
               "'spec':{'nodeName':'n1','containers':[{'name':'c','resources':{'requests':"
               "{'cpu':'100m'}}}]},'status':{'phase':'Running','startTime':'" T0 "'}}",
               annotations);

    kp_cluster_state_pod_event(f->cluster, NULL, p);
    put(f->pods, p);
}

/* One pass at the fake clock's now, its writes recorded afresh; the events it queued are
 * written before it returns. */
static int run(struct fx *f, uint64_t *requeue)
{
    int r;

    *requeue = 0;
    kp_fake_api_reset(f->api);
    kp_fake_api_reset(f->evapi);
    r = kp_disruption_reconcile(f->ctl, f->c, /* cx= */ NULL, requeue);
    assert_int_equal(kp_events_flush(f->events, 5 * SEC), 0);
    return r;
}

/* Exactly n requests were recorded (each one printed when not). */
static void expect_count(struct fx *f, size_t n)
{
    size_t have = kp_fake_api_count(f->api);

    if (have == n)
        return;
    for (size_t i = 0; i < have; i++)
        print_error("request %zu: %s %s\n", i, kp_fake_api_line(f->api, i),
                    kp_fake_api_body(f->api, i));
    fail_msg("%zu requests, want %zu", have, n);
}

/* The first pass finds the empty node and writes nothing (the validation delay); the clock then
 * moves past the delay. */
static void first_pass(struct fx *f)
{
    uint64_t rq;

    assert_int_equal(run(f, &rq), 0);
    assert_int_equal(rq, KP_DISRUPTION_VALIDATION_USEC);
    expect_count(f, 0);
    assert_int_equal(M.disrupted, 0);
    fake_now += (int64_t)KP_DISRUPTION_VALIDATION_USEC;
}

/* Request i is line with body body, exactly. */
static void expect(struct fx *f, size_t i, const char *line, const char *body)
{
    if (i >= kp_fake_api_count(f->api))
        fail_msg("no request %zu (%s): %zu recorded", i, line, kp_fake_api_count(f->api));
    assert_string_equal(kp_fake_api_line(f->api, i), line);
    assert_string_equal(kp_fake_api_body(f->api, i), body);
}

/* The Events written to the events server with reason on an object of kind, and whose note is
 * note (NULL: any). */
static unsigned events_with(struct fx *f, const char *reason, const char *kind, const char *note)
{
    char want_reason[96], want_kind[64], want_note[640];
    unsigned k = 0;

    (void)snprintf(want_reason, sizeof(want_reason), "\"reason\":\"%s\"", reason);
    (void)snprintf(want_kind, sizeof(want_kind), "\"kind\":\"%s\"", kind);
    (void)snprintf(want_note, sizeof(want_note), "\"note\":\"%s\"", note ? note : "");
    for (size_t i = 0; i < kp_fake_api_count(f->evapi); i++) {
        const char *b = kp_fake_api_body(f->evapi, i);

        if (strcmp(kp_fake_api_line(f->evapi, i), EVENTS_LINE) == 0 && strstr(b, want_reason) &&
            strstr(b, want_kind) && (!note || strstr(b, want_note)))
            k++;
    }
    return k;
}

static unsigned events_of(struct fx *f, const char *reason, const char *kind)
{
    return events_with(f, reason, kind, NULL);
}

/* Whether the state has n1 marked for deletion. */
static bool marked(struct fx *f)
{
    struct kp_state_snapshot *s = NULL;
    bool m;

    assert_int_equal(kp_cluster_state_get_by_provider_id(f->cluster, "fake://n1", &s), 0);
    m = s->v[0].flags & KP_STATE_NODE_MARKED_FOR_DELETION;
    kp_state_snapshot_free(s);
    return m;
}

#define TAINT_PATCH                                                                                \
    "{\"spec\":{\"taints\":[{\"key\":\"karpenter.sh/disrupted\",\"effect\":\"NoSchedule\"}]},"     \
    "\"metadata\":{\"resourceVersion\":\"7\"}}"
#define UNTAINT_PATCH "{\"spec\":{\"taints\":[]},\"metadata\":{\"resourceVersion\":\"7\"}}"
#define DELETE_BODY                                                                                \
    "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"preconditions\":{\"uid\":\"nc1-uid\"}}"

/* The conditions of xclaim as the status patch writes them back, and that patch: conds with
 * DisruptionReason=True for reason (since at) appended, under the NodeClaim's resourceVersion. */
#define CONDJ(type)                                                                                \
    "{\"type\":\"" type "\",\"status\":\"True\",\"reason\":\"R\",\"message\":\"\","                \
    "\"observedGeneration\":1,\"lastTransitionTime\":\"" T0 "\"}"
#define BASE_CONDJ                                                                                 \
    CONDJ("Launched") "," CONDJ("Registered") "," CONDJ("Initialized") "," CONDJ("Consolidatable")
#define CONDS_PATCH_RV(conds, rv)                                                                  \
    "{\"status\":{\"conditions\":[" conds "]},\"metadata\":{\"resourceVersion\":\"" rv "\"}}"
#define CONDS_PATCH(conds) CONDS_PATCH_RV(conds, "3")
#define REASON_PATCH_OF(conds, reason, at)                                                         \
    CONDS_PATCH(conds ",{\"type\":\"DisruptionReason\",\"status\":\"True\",\"reason\":\"" reason   \
                      "\",\"message\":\"" reason "\",\"observedGeneration\":1,"                    \
                      "\"lastTransitionTime\":\"" at "\"}")
#define REASON_PATCH REASON_PATCH_OF(BASE_CONDJ, "Empty", LATER)

/* 1. Emptiness of one empty node: taint, DisruptionReason, DELETE with the uid; counted once. */
static void test_empty_node(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    add_pool(&f);
    add_node(&f, "");
    first_pass(&f);
    assert_false(marked(&f));

    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, 1 * SEC);
    expect_count(&f, 3);
    expect(&f, 0, "PATCH " NODE_PATH "n1", TAINT_PATCH);
    expect(&f, 1, "PATCH " NC_PATH "nc1/status", REASON_PATCH);
    expect(&f, 2, "DELETE " NC_PATH "nc1", DELETE_BODY);
    assert_true(marked(&f));
    assert_int_equal(M.disrupted, 1);
    assert_string_equal(M.labels, "empty,np,on-demand,when_empty_or_underutilized,graceful");
    assert_int_equal(M.pods, 0); /* nothing to reschedule */
    assert_int_equal(M.decisions, 1);
    assert_string_equal(M.decision, "delete,empty,empty");
    assert_int_equal(events_with(&f, "DisruptionTerminating", "Node", "Disrupting Node: Empty"), 1);
    assert_int_equal(
        events_with(&f, "DisruptionTerminating", "NodeClaim", "Disrupting NodeClaim: Empty"), 1);

    /* The command is done: the next pass (the cache not caught up yet: the node still there,
     * marked) writes nothing and counts nothing more. */
    fake_now += 1 * SEC;
    assert_int_equal(run(&f, &rq), 0);
    expect_count(&f, 0);
    assert_int_equal(M.disrupted, 1);
    fx_done(&f);
}

/* 2. The Node changed since the cache saw it: the taint patch is refused with a Conflict. Nothing
 * else is sent, nothing counted, the mark taken back; the next pass decides again. */
static void test_taint_conflict(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    add_pool(&f);
    add_node(&f, "");
    kp_fake_api_answer(f.api, "PATCH " NODE_PATH "n1", 409, NULL);
    first_pass(&f);

    assert_int_equal(run(&f, &rq), 0); /* a lost race is no error */
    assert_int_equal(rq, 1 * SEC);
    expect_count(&f, 1);
    expect(&f, 0, "PATCH " NODE_PATH "n1", TAINT_PATCH);
    assert_false(marked(&f));
    assert_int_equal(M.disrupted, 0);
    assert_int_equal(M.decisions, 0);
    assert_int_equal(events_of(&f, "DisruptionTerminating", "Node"), 0);
    assert_int_equal(events_of(&f, "DisruptionTerminating", "NodeClaim"), 0);

    /* The command is dropped: the next pass finds the node again and waits anew. */
    first_pass(&f);
    fx_done(&f);
}

/* 3. The DELETE fails (500) after the taint and the condition: the taint is taken off again (a
 * second patch; the taint's answer, "{}", names no resourceVersion, so under the cached one) and
 * the mark taken back; DisruptionReason is left to the clean-up, as the cache has not seen it
 * yet; nothing counted. */
static void test_delete_fails(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    add_pool(&f);
    add_node(&f, "");
    kp_fake_api_answer(f.api, "DELETE " NC_PATH "nc1", 500, NULL);
    first_pass(&f);

    assert_int_equal(run(&f, &rq), -KP_ESERVER); /* the pass's error: retried with backoff */
    expect_count(&f, 4);
    expect(&f, 0, "PATCH " NODE_PATH "n1", TAINT_PATCH);
    expect(&f, 1, "PATCH " NC_PATH "nc1/status", REASON_PATCH);
    expect(&f, 2, "DELETE " NC_PATH "nc1", DELETE_BODY);
    expect(&f, 3, "PATCH " NODE_PATH "n1", UNTAINT_PATCH);
    assert_false(marked(&f));
    assert_int_equal(M.disrupted, 0);
    assert_int_equal(M.decisions, 0);
    assert_int_equal(events_of(&f, "DisruptionTerminating", "Node"), 0);
    assert_int_equal(events_of(&f, "DisruptionTerminating", "NodeClaim"), 0);
    fx_done(&f);
}

/* 3b. As the real server does, the taint's answer gives the Node its new resourceVersion (8):
 * the undo, in the same pass, comes before the cache has seen the taint, so it must carry 8, not
 * the cached 7 (which the server would refuse with a Conflict, leaving the node tainted until a
 * later pass's clean-up). */
static void test_delete_fails_undo_rv(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    add_pool(&f);
    add_node(&f, "");
    kp_fake_api_answer(f.api, "PATCH " NODE_PATH "n1", 200,
                       "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\","
                       "\"uid\":\"n1-uid\",\"resourceVersion\":\"8\"}}");
    kp_fake_api_answer(f.api, "DELETE " NC_PATH "nc1", 500, NULL);
    first_pass(&f);

    assert_int_equal(run(&f, &rq), -KP_ESERVER);
    expect_count(&f, 4);
    expect(&f, 0, "PATCH " NODE_PATH "n1", TAINT_PATCH);
    expect(&f, 1, "PATCH " NC_PATH "nc1/status", REASON_PATCH);
    expect(&f, 2, "DELETE " NC_PATH "nc1", DELETE_BODY);
    expect(&f, 3, "PATCH " NODE_PATH "n1",
           "{\"spec\":{\"taints\":[]},\"metadata\":{\"resourceVersion\":\"8\"}}");
    assert_false(marked(&f));
    assert_int_equal(M.disrupted, 0);
    fx_done(&f);
}

/* 4. The NodeClaim was deleted meanwhile by someone else (NotFound): done, not counted, and no
 * DisruptionTerminating, as Karpenter ignores NotFound before its metric. Nothing is rolled
 * back: the node is going anyway. */
static void test_delete_not_found(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    add_pool(&f);
    add_node(&f, "");
    kp_fake_api_answer(f.api, "DELETE " NC_PATH "nc1", 404, NULL);
    first_pass(&f);

    assert_int_equal(run(&f, &rq), 0);
    expect_count(&f, 3);
    expect(&f, 0, "PATCH " NODE_PATH "n1", TAINT_PATCH);
    expect(&f, 1, "PATCH " NC_PATH "nc1/status", REASON_PATCH);
    expect(&f, 2, "DELETE " NC_PATH "nc1", DELETE_BODY);
    assert_true(marked(&f));
    assert_int_equal(M.disrupted, 0);
    assert_int_equal(M.pods, 0);
    assert_int_equal(M.decisions, 1); /* the command's decision was made, as upstream counts it */
    assert_string_equal(M.decision, "delete,empty,empty");
    assert_int_equal(events_of(&f, "DisruptionTerminating", "Node"), 0);
    assert_int_equal(events_of(&f, "DisruptionTerminating", "NodeClaim"), 0);
    fx_done(&f);
}

/* 6. A node that may not be disrupted: a pod with karpenter.sh/do-not-disrupt, or the Node's own
 * annotation. No write on either pass (nor past the validation delay), and DisruptionBlocked on
 * the Node and the NodeClaim says why. */
static void test_do_not_disrupt(void **state)
{
    static const char *const why[] = {
        "Pod has \\\"karpenter.sh/do-not-disrupt\\\" annotation (Pod=default/p)",
        "Disruption is blocked through the \\\"karpenter.sh/do-not-disrupt\\\" annotation",
    };

    (void)state;
    for (int node_ann = 0; node_ann < 2; node_ann++) {
        struct fx f;
        uint64_t rq;

        fx_init(&f);
        add_pool(&f);
        add_node(&f, node_ann ? ",'annotations':{'karpenter.sh/do-not-disrupt':'true'}" : "");
        if (!node_ann)
            add_pod(&f, "'karpenter.sh/do-not-disrupt':'true'");
        for (int pass = 0; pass < 2; pass++) {
            assert_int_equal(run(&f, &rq), 0);
            assert_int_equal(rq, KP_DISRUPTION_POLL_USEC);
            expect_count(&f, 0);
            if (pass == 0) { /* the recorder folds the repeats of the next pass */
                assert_int_equal(events_with(&f, "DisruptionBlocked", "Node", why[node_ann]), 1);
                assert_int_equal(events_with(&f, "DisruptionBlocked", "NodeClaim", why[node_ann]),
                                 1);
            }
            fake_now += (int64_t)KP_DISRUPTION_VALIDATION_USEC;
        }
        assert_false(marked(&f));
        assert_int_equal(M.disrupted, 0);
        assert_int_equal(M.decisions, 0);
        fx_done(&f);
    }
}

/* The Node's do-not-disrupt annotation arrives during the validation delay and the cache has it
 * before the state does: the fresh Node wins, nothing is written, the mark taken back. */
static void test_do_not_disrupt_late(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    add_pool(&f);
    add_node(&f, "");
    first_pass(&f);
    put(f.nodes, xnode("7", ",'annotations':{'karpenter.sh/do-not-disrupt':'true'}", ""));

    assert_int_equal(run(&f, &rq), 0);
    expect_count(&f, 0);
    assert_false(marked(&f));
    assert_int_equal(M.disrupted, 0);
    assert_int_equal(M.decisions, 0);
    fx_done(&f);
}

/* Instance type type (cpu millicores, 110 pods) into t, on-demand in zone z1 at price. */
static void add_type(struct kp_instance_types *t, const char *type, int64_t cpu, int64_t price)
{
    static const char *const ct = KP_CAPACITY_TYPE_ON_DEMAND, *const zone = "z1";
    struct kp_instance_type *it;
    struct kp_offering *o;

    it = &t->v[t->n++];
    assert_non_null(it->name = kp_strdup(type));
    assert_int_equal(kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, &type, 1, 0), 0);
    assert_int_equal(kp_reqset_add(&it->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1, 0), 0);
    assert_int_equal(kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, &zone, 1, 0), 0);
    assert_int_equal(kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", cpu), 0);
    assert_int_equal(kp_provider_res_add(&it->capacity, &it->n_capacity, "pods", 110000), 0);
    assert_non_null(it->offerings = kp_calloc(1, sizeof(*it->offerings)));
    it->n_offerings = 1;
    o = &it->offerings[0];
    assert_int_equal(kp_reqset_add(&o->reqs, KP_LABEL_ZONE, KP_SEL_IN, &zone, 1, 0), 0);
    assert_int_equal(kp_reqset_add(&o->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1, 0), 0);
    o->price_micro_usd = price;
    o->available = true;
}

/* The catalog: one instance type "small" (2 CPUs, 110 pods), on-demand in zone z1. */
static void publish(struct fx *f)
{
    struct kp_instance_types t = {0};

    assert_non_null(t.v = kp_calloc(1, sizeof(*t.v)));
    add_type(&t, "small", 2000, 100);
    assert_int_equal(kp_fake_provider_publish(f->fp, &t), 0);
}

/* The replacement NodeClaim np-r (uid np-r-uid) as the cache sees it, Initialized or not. */
static struct kp_entry *xreplacement(bool initialized)
{
    return decode(
        kp_nodeclaim_decode,
        "{'metadata':{'name':'np-r','uid':'np-r-uid','resourceVersion':'%s',"
        "'generation':1,'creationTimestamp':'" LATER "',"
        "'labels':{'karpenter.sh/nodepool':'np'}},"
        "'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
        "','kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[]},"
        "'status':{'providerID':'fake://r','conditions':[" COND("Launched", "True") "%s]}}",
        initialized ? "2" : "1", initialized ? "," COND("Initialized", "True") : "");
}

#define DRIFT_CONDS BASE_CONDS "," COND("Drifted", "True")
#define DRIFT_CONDJ BASE_CONDJ "," CONDJ("Drifted")
#define CREATE_LINE "POST /apis/karpenter.sh/v1/nodeclaims"
/* The replacement: NodePool np's template (its labels, hash annotations and owner) with the
 * plan's requirements (the pool, on-demand, the one type that fits) and the pod's requests. */
#define CREATE_BODY                                                                                 \
    "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":{\"generateName\":"    \
    "\"np-\",\"labels\":{\"karpenter.sh/nodepool\":\"np\",\"test.kpssh.dev/fakenodeclass\":\"c\"}," \
    "\"annotations\":{\"karpenter.sh/nodepool-hash\":\"14447127798636869918\","                     \
    "\"karpenter.sh/nodepool-hash-version\":\"v3\"},\"ownerReferences\":[{\"apiVersion\":"          \
    "\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"name\":\"np\",\"uid\":\"np-uid\","                 \
    "\"blockOwnerDeletion\":true}]},\"spec\":{\"requirements\":[{\"key\":"                          \
    "\"karpenter.sh/capacity-type\",\"operator\":\"In\",\"values\":[\"on-demand\"]},{\"key\":"      \
    "\"karpenter.sh/nodepool\",\"operator\":\"In\",\"values\":[\"np\"]},{\"key\":"                  \
    "\"node.kubernetes.io/instance-type\",\"operator\":\"In\",\"values\":[\"small\"]}],"            \
    "\"resources\":{\"requests\":{\"cpu\":\"100m\",\"pods\":\"1\"}},\"nodeClassRef\":{\"group\":"   \
    "\"test.kpssh.dev\",\"kind\":\"FakeNodeClass\",\"name\":\"c\"}}}"

/* A drifted n1 whose pod needs a new node, the catalog to launch one, and the server's answer to
 * the create; the first pass (Drift acts at once, no validation delay) taints n1, sets
 * DisruptionReason=Drifted and creates the replacement, and deletes nothing. */
static void drift_begin(struct fx *f)
{
    uint64_t rq;

    publish(f);
    add_pool(f);
    add_node_with(f, "", "", DRIFT_CONDS);
    add_pod(f, "");
    kp_fake_api_answer(f->api, CREATE_LINE, 201,
                       "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\","
                       "\"metadata\":{\"name\":\"np-r\",\"uid\":\"np-r-uid\"}}");
    assert_int_equal(run(f, &rq), 0);
    assert_int_equal(rq, 1 * SEC);
    expect_count(f, 3);
    expect(f, 0, "PATCH " NODE_PATH "n1", TAINT_PATCH);
    expect(f, 1, "PATCH " NC_PATH "nc1/status", REASON_PATCH_OF(DRIFT_CONDJ, "Drifted", NOW));
    expect(f, 2, CREATE_LINE, CREATE_BODY);
    assert_false(marked(f)); /* not before the replacement is in the state */
    assert_int_equal(M.disrupted, 0);
    assert_int_equal(M.decisions, 1); /* counted when the command starts, as upstream */
    assert_string_equal(M.decision, "replace,drifted,");
    assert_int_equal(events_of(f, "DisruptionLaunching", "Node"), 1);
    assert_int_equal(events_of(f, "DisruptionLaunching", "NodeClaim"), 1);
}

/* One more pass a second later that writes nothing and waits for the replacement. */
static void waits(struct fx *f)
{
    uint64_t rq;

    fake_now += 1 * SEC;
    assert_int_equal(run(f, &rq), 0);
    expect_count(f, 0);
    assert_int_equal(events_of(f, "DisruptionTerminating", "NodeClaim"), 0);
}

/* The command's replacement reaches the cache and the state, launching: the candidate n1 is
 * marked and kept; once it is Initialized, the next pass deletes nc1 (and nothing else). */
static void replacement_completes(struct fx *f)
{
    struct kp_entry *launching = xreplacement(false), *ready = xreplacement(true);
    uint64_t rq;

    kp_cluster_state_nodeclaim_event(f->cluster, NULL, launching);
    put(f->claims, kp_entry_ref(launching));
    waits(f);
    assert_true(marked(f));
    waits(f);
    assert_int_equal(M.disrupted, 0);
    kp_cluster_state_nodeclaim_event(f->cluster, launching, ready);
    put(f->claims, ready);
    kp_entry_unref(launching);
    fake_now += 1 * SEC;
    assert_int_equal(run(f, &rq), 0);
    expect_count(f, 1);
    expect(f, 0, "DELETE " NC_PATH "nc1", DELETE_BODY);
}

/* The replacement np-r as the cache sees it once it is being deleted (before it was Initialized). */
static struct kp_entry *xreplacement_gone(void)
{
    return decode(
        kp_nodeclaim_decode,
        "{'metadata':{'name':'np-r','uid':'np-r-uid','resourceVersion':'2','generation':1,"
        "'creationTimestamp':'" NOW "','deletionTimestamp':'" NOW "','finalizers':['x'],"
        "'labels':{'karpenter.sh/nodepool':'np'}},'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
        "','kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[]},"
        "'status':{'providerID':'fake://r','conditions':[" COND("Launched", "True") "]}}");
}

/* 5. Drift of a node whose pod needs new capacity: the replacement is created first; the node is
 * marked once the replacement is in the state and deleted only once it is Initialized. */
static void test_drift_replace(void **state)
{
    struct fx f;

    (void)state;
    fx_init(&f);
    drift_begin(&f);

    /* Not in the cache yet: wait, unmarked. */
    waits(&f);
    assert_false(marked(&f));
    assert_int_equal(events_of(&f, "DisruptionWaitingReadiness", "Node"), 1);
    /* Then launching (marked, kept), then Initialized: now the old NodeClaim goes, counted as
     * drifted (no consolidation policy). */
    replacement_completes(&f);
    assert_int_equal(M.disrupted, 1);
    assert_string_equal(M.labels, "drifted,np,on-demand,,graceful");
    assert_int_equal(M.pods, 1); /* its one pod */
    assert_int_equal(events_of(&f, "DisruptionTerminating", "Node"), 1);
    assert_int_equal(events_of(&f, "DisruptionTerminating", "NodeClaim"), 1);

    /* Done: nothing is created, deleted or counted again. */
    waits(&f);
    assert_int_equal(M.disrupted, 1);
    assert_int_equal(M.decisions, 1);
    fx_done(&f);
}

/* The replacement is deleted before it is Initialized: the command is rolled back (the taint
 * off, DisruptionReason cleared, both under the cached resourceVersions), the old node is not
 * deleted, and the failure is counted. */
static void test_drift_replace_fails(void **state)
{
    struct fx f;
    uint64_t rq;
    struct kp_entry *gone = xreplacement_gone();

    (void)state;
    fx_init(&f);
    drift_begin(&f);
    /* The cache has caught up with the writes: the taint (rv 8), DisruptionReason (rv 4). */
    update(&f, f.nodes, xnode("8", "", TAINTED), kp_cluster_state_node_event);
    update(&f, f.claims, xclaim("4", DRIFT_CONDS "," DISRUPTED("Drifted")),
           kp_cluster_state_nodeclaim_event);
    kp_cluster_state_nodeclaim_event(f.cluster, NULL, gone);
    put(f.claims, gone);
    fake_now += 1 * SEC;
    assert_int_equal(run(&f, &rq), 0);
    expect_count(&f, 2);
    expect(&f, 0, "PATCH " NODE_PATH "n1",
           "{\"spec\":{\"taints\":[]},\"metadata\":{\"resourceVersion\":\"8\"}}");
    expect(&f, 1, "PATCH " NC_PATH "nc1/status", CONDS_PATCH_RV(DRIFT_CONDJ, "4"));
    assert_false(marked(&f));
    assert_int_equal(M.disrupted, 0);
    assert_int_equal(M.queue_failures, 1);
    fx_done(&f);
}

/* 9. Single-node consolidation's REPLACE: n1 ("small", 2 CPUs at 300) holds one 100m pod, and
 * "tiny" (1 CPU at 100) would hold it for less. The first pass finds it and writes nothing; after
 * the validation delay the second simulation agrees: taint, DisruptionReason=Underutilized and
 * one NodeClaim narrowed to the cheaper type; n1 is deleted once that is Initialized, counted
 * with its consolidation policy. */
static void test_consolidation_replace(void **state)
{
    struct fx f;
    uint64_t rq;
    struct kp_instance_types t = {0};
    const char *body;

    (void)state;
    fx_init(&f);
    assert_non_null(t.v = kp_calloc(2, sizeof(*t.v)));
    add_type(&t, "small", 2000, 300);
    add_type(&t, "tiny", 1000, 100);
    assert_int_equal(kp_fake_provider_publish(f.fp, &t), 0);
    add_pool(&f);
    add_node(&f, "");
    add_pod(&f, "");
    kp_fake_api_answer(f.api, CREATE_LINE, 201,
                       "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\","
                       "\"metadata\":{\"name\":\"np-r\",\"uid\":\"np-r-uid\"}}");
    first_pass(&f);

    assert_int_equal(run(&f, &rq), 0);
    expect_count(&f, 3);
    expect(&f, 0, "PATCH " NODE_PATH "n1", TAINT_PATCH);
    expect(&f, 1, "PATCH " NC_PATH "nc1/status",
           REASON_PATCH_OF(BASE_CONDJ, "Underutilized", LATER));
    assert_string_equal(kp_fake_api_line(f.api, 2), CREATE_LINE);
    body = kp_fake_api_body(f.api, 2);
    if (!strstr(body, "{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"In\","
                      "\"values\":[\"tiny\"]}") ||
        !strstr(body, "\"requests\":{\"cpu\":\"100m\",\"pods\":\"1\"}"))
        fail_msg("the replacement is not narrowed to tiny with the pod's requests: %s", body);
    assert_int_equal(M.decisions, 1);
    assert_string_equal(M.decision, "replace,underutilized,single");
    assert_int_equal(
        events_with(&f, "DisruptionLaunching", "NodeClaim", "Launching NodeClaim: Underutilized"),
        1);
    assert_int_equal(M.disrupted, 0);

    replacement_completes(&f);
    assert_int_equal(M.disrupted, 1);
    assert_string_equal(M.labels,
                        "underutilized,np,on-demand,when_empty_or_underutilized,graceful");
    assert_int_equal(M.pods, 1);
    assert_int_equal(M.decisions, 1);
    fx_done(&f);
}

/* An n1 that expired two minutes ago (made at T0, expireAfter 58m; the pass runs at T0 + 1h),
 * with a do-not-disrupt annotation on the Node, and its pod, which needs a new node; the
 * catalog and the server's answer to the create. The first pass replaces it first, as the
 * expiration controller leaves it to do: taint, DisruptionReason=Expired and the replacement's
 * create, nothing deleted, no voluntary decision counted. */
static void expiry_begin(struct fx *f)
{
    struct kp_entry *n = xnode("7", ",'annotations':{'karpenter.sh/do-not-disrupt':'true'}", ""),
                    *nc = xclaim_spec("3", BASE_CONDS, ",'expireAfter':'58m'");
    uint64_t rq;

    publish(f);
    add_pool(f);
    kp_cluster_state_nodeclaim_event(f->cluster, NULL, nc);
    kp_cluster_state_node_event(f->cluster, NULL, n);
    put(f->claims, nc);
    put(f->nodes, n);
    add_pod(f, "");
    kp_fake_api_answer(f->api, CREATE_LINE, 201,
                       "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\","
                       "\"metadata\":{\"name\":\"np-r\",\"uid\":\"np-r-uid\"}}");
    assert_int_equal(run(f, &rq), 0);
    assert_int_equal(rq, 1 * SEC);
    expect_count(f, 3);
    expect(f, 0, "PATCH " NODE_PATH "n1", TAINT_PATCH);
    expect(f, 1, "PATCH " NC_PATH "nc1/status", REASON_PATCH_OF(BASE_CONDJ, "Expired", NOW));
    expect(f, 2, CREATE_LINE, CREATE_BODY);
    assert_int_equal(M.disrupted, 0);
    assert_int_equal(M.decisions, 0); /* expiry is no voluntary disruption */
    assert_int_equal(events_with(f, "DisruptionLaunching", "Node", "Launching NodeClaim: Expired"),
                     1);
}

/* 6. Expiry of a node whose pod needs a place: despite the Node's do-not-disrupt annotation, the
 * replacement comes first and the expired NodeClaim is deleted once it is Initialized, counted
 * as expired. */
static void test_expiry_replace(void **state)
{
    struct fx f;

    (void)state;
    fx_init(&f);
    expiry_begin(&f);
    replacement_completes(&f);
    assert_int_equal(M.disrupted, 1);
    assert_string_equal(M.labels, "expired,np,on-demand,,graceful");
    assert_int_equal(M.pods, 1);
    assert_int_equal(M.decisions, 0);
    assert_int_equal(
        events_with(&f, "DisruptionTerminating", "NodeClaim", "Disrupting NodeClaim: Expired"), 1);
    waits(&f);
    assert_int_equal(M.disrupted, 1);
    fx_done(&f);
}

/* 7. The replacement of an expired node is deleted before it is Initialized: no roll-back, the
 * expired NodeClaim goes anyway (expiry is forceful), and no queue failure is counted. */
static void test_expiry_replace_fails(void **state)
{
    struct fx f;
    uint64_t rq;
    struct kp_entry *gone = xreplacement_gone();

    (void)state;
    fx_init(&f);
    expiry_begin(&f);
    kp_cluster_state_nodeclaim_event(f.cluster, NULL, gone);
    put(f.claims, gone);
    fake_now += 1 * SEC;
    assert_int_equal(run(&f, &rq), 0);
    expect_count(&f, 1);
    expect(&f, 0, "DELETE " NC_PATH "nc1", DELETE_BODY);
    assert_true(marked(&f)); /* before the delete: the clean-up keeps off its taint */
    assert_int_equal(M.disrupted, 1);
    assert_int_equal(M.queue_failures, 0);
    fx_done(&f);
}

/* 7b. An expired node's delete keeps failing (500) with its replacement never Initialized:
 * past twice the replacement timeout the command is rolled back and left to the expiration
 * controller, with no voluntary queue failure counted. A NodeClaim someone else deleted
 * meanwhile is neither deleted again nor counted. */
static void test_expiry_gives_up(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    expiry_begin(&f);
    kp_fake_api_answer(f.api, "DELETE " NC_PATH "nc1", 500, NULL);
    fake_now += (int64_t)KP_DISRUPTION_REPLACE_TIMEOUT_USEC + 1 * SEC;
    assert_int_equal(run(&f, &rq), -KP_ESERVER);
    expect_count(&f, 1);
    expect(&f, 0, "DELETE " NC_PATH "nc1", DELETE_BODY);
    assert_int_equal(M.disrupted, 0);
    fake_now += (int64_t)KP_DISRUPTION_REPLACE_TIMEOUT_USEC;
    assert_int_equal(run(&f, &rq), 0);
    /* The taint off (DisruptionReason too, were it in the cache already). */
    expect_count(&f, 1);
    expect(&f, 0, "PATCH " NODE_PATH "n1", UNTAINT_PATCH);
    assert_int_equal(M.queue_failures, 0);
    assert_int_equal(M.disrupted, 0);
    fx_done(&f);

    /* Deleted by the expiration controller while the command waited, and the cache has seen it
     * before the cluster state: once the replacement is Initialized, nothing is sent or
     * counted. */
    fx_init(&f);
    expiry_begin(&f);
    {
        struct kp_entry *ready = xreplacement(true);

        kp_cluster_state_nodeclaim_event(f.cluster, NULL, ready);
        put(f.claims, ready);
    }
    put(f.claims, decode(kp_nodeclaim_decode,
                         "{'metadata':{'name':'nc1','uid':'nc1-uid','resourceVersion':'5',"
                         "'generation':1,'creationTimestamp':'" T0 "','deletionTimestamp':'" NOW
                         "','finalizers':['karpenter.sh/termination'],"
                         "'labels':{'karpenter.sh/nodepool':'np'}},'spec':{'nodeClassRef':{"
                         "'group':'" KP_FAKE_NODECLASS_GROUP "','kind':'" KP_FAKE_NODECLASS_KIND
                         "','name':'c'},'requirements':[],'expireAfter':'58m'},"
                         "'status':{'providerID':'fake://n1','nodeName':'n1'}}"));
    fake_now += 1 * SEC;
    assert_int_equal(run(&f, &rq), 0);
    expect_count(&f, 0);
    assert_int_equal(M.disrupted, 0);
    fx_done(&f);
}

/* 8. An expired node whose pod fits on another node: no replacement, deleted on the first pass
 * (taint, DisruptionReason=Expired, DELETE). One that expired too long ago for a replacement to
 * finish within the expiration controller's grace is left to that controller: nothing written. */
static void test_expiry_fits_elsewhere(void **state)
{
    struct fx f;
    uint64_t rq;
    struct kp_entry *n2 = decode(
        kp_node_decode,
        "{'metadata':{'name':'n2','uid':'n2-uid','resourceVersion':'1','creationTimestamp':'" T0
        "','labels':{'karpenter.sh/nodepool':'np','karpenter.sh/registered':'true',"
        "'karpenter.sh/initialized':'true','karpenter.sh/capacity-type':'on-demand',"
        "'node.kubernetes.io/instance-type':'small','topology.kubernetes.io/zone':'z1',"
        "'kubernetes.io/hostname':'n2'}},'spec':{'providerID':'fake://n2'},"
        "'status':{'capacity':{'cpu':'2','memory':'4Gi','pods':'110'},"
        "'allocatable':{'cpu':'2','memory':'4Gi','pods':'110'},"
        "'conditions':[{'type':'Ready','status':'True'}]}}");
    struct kp_entry *nc2 = decode(
        kp_nodeclaim_decode,
        "{'metadata':{'name':'nc2','uid':'nc2-uid','resourceVersion':'1','generation':1,"
        "'creationTimestamp':'" NOW "','labels':{'karpenter.sh/nodepool':'np',"
        "'karpenter.sh/capacity-type':'on-demand','node.kubernetes.io/instance-type':'small'}},"
        "'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
        "','kind':'" KP_FAKE_NODECLASS_KIND
        "','name':'c'},'requirements':[]},'status':{'providerID':'fake://n2','nodeName':'n2',"
        "'capacity':{'cpu':'2','memory':'4Gi','pods':'110'},"
        "'allocatable':{'cpu':'2','memory':'4Gi','pods':'110'},'conditions':[" COND(
            "Launched", "True") "," COND("Registered", "True") "," COND("Initialized",
                                                                        "True") "]}}");
    struct kp_entry *n = xnode("7", "", ""),
                    *nc = xclaim_spec("3", BASE_CONDS, ",'expireAfter':'58m'");

    (void)state;
    fx_init(&f);
    publish(&f);
    add_pool(&f);
    kp_cluster_state_nodeclaim_event(f.cluster, NULL, nc2);
    kp_cluster_state_node_event(f.cluster, NULL, n2);
    put(f.claims, nc2);
    put(f.nodes, n2);
    kp_cluster_state_nodeclaim_event(f.cluster, NULL, nc);
    kp_cluster_state_node_event(f.cluster, NULL, n);
    put(f.claims, nc);
    put(f.nodes, n);
    add_pod(&f, "");
    assert_int_equal(run(&f, &rq), 0);
    expect_count(&f, 3);
    expect(&f, 0, "PATCH " NODE_PATH "n1", TAINT_PATCH);
    expect(&f, 1, "PATCH " NC_PATH "nc1/status", REASON_PATCH_OF(BASE_CONDJ, "Expired", NOW));
    expect(&f, 2, "DELETE " NC_PATH "nc1", DELETE_BODY);
    assert_int_equal(M.disrupted, 1);
    assert_string_equal(M.labels, "expired,np,on-demand,,graceful");
    assert_int_equal(M.decisions, 0);
    fx_done(&f);

    /* Expired 20 min ago (expireAfter 40m): past what a command could finish in the grace. */
    fx_init(&f);
    publish(&f);
    add_pool(&f);
    n = xnode("7", "", "");
    nc = xclaim_spec("3", BASE_CONDS, ",'expireAfter':'40m'");
    kp_cluster_state_nodeclaim_event(f.cluster, NULL, nc);
    kp_cluster_state_node_event(f.cluster, NULL, n);
    put(f.claims, nc);
    put(f.nodes, n);
    add_pod(&f, "'karpenter.sh/do-not-disrupt':'true'");
    assert_int_equal(run(&f, &rq), 0);
    expect_count(&f, 0);
    assert_int_equal(M.disrupted, 0);
    fx_done(&f);
}

/* Clean-up (step 1): a Node left tainted and a NodeClaim left with DisruptionReason (a crash
 * between the taint and the delete) that no command holds: the taint comes off and the condition
 * is cleared, each under its cached resourceVersion; the node is then an Emptiness candidate
 * like any other (nothing more written on this pass). */
static void test_cleanup(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f);
    add_pool(&f);
    add_node_with(&f, "",
                  ",'taints':[{'key':'karpenter.sh/disrupted','effect':'NoSchedule'},"
                  "{'key':'other','value':'v','effect':'NoExecute'}]",
                  BASE_CONDS "," DISRUPTED("Empty"));
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, KP_DISRUPTION_VALIDATION_USEC);
    expect_count(&f, 2);
    expect(&f, 0, "PATCH " NODE_PATH "n1",
           "{\"spec\":{\"taints\":[{\"key\":\"other\",\"value\":\"v\",\"effect\":\"NoExecute\"}]},"
           "\"metadata\":{\"resourceVersion\":\"7\"}}");
    expect(&f, 1, "PATCH " NC_PATH "nc1/status", CONDS_PATCH(BASE_CONDJ));
    assert_false(marked(&f));
    assert_int_equal(M.disrupted, 0);
    fx_done(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_node),
        cmocka_unit_test(test_taint_conflict),
        cmocka_unit_test(test_delete_fails),
        cmocka_unit_test(test_delete_fails_undo_rv),
        cmocka_unit_test(test_delete_not_found),
        cmocka_unit_test(test_do_not_disrupt),
        cmocka_unit_test(test_do_not_disrupt_late),
        cmocka_unit_test(test_drift_replace),
        cmocka_unit_test(test_drift_replace_fails),
        cmocka_unit_test(test_expiry_replace),
        cmocka_unit_test(test_expiry_replace_fails),
        cmocka_unit_test(test_expiry_gives_up),
        cmocka_unit_test(test_expiry_fits_elsewhere),
        cmocka_unit_test(test_consolidation_replace),
        cmocka_unit_test(test_cleanup),
    };

    return kp_test_main("disruption-exec", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
