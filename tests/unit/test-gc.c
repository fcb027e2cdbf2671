/* Tests for the garbage-collection decisions (core/gc/): a registered NodeClaim the provider no
 * longer lists is collected unless its Node is Ready, and never when unregistered, deleting,
 * just launched, listed or another provider's; a Node of ours (by the provider's instance list
 * or by its labels) with no NodeClaim is collected after the grace, never while a NodeClaim
 * holds its providerID or is named as the instance or the Node; and set-up / roll-back of the
 * controller. Then the executor (kp_gc_reconcile) against a loopback API server that records
 * every write, the fake provider with its List scripted and informers synced against that
 * server: which DELETEs go out, with which uid preconditions, what is counted, what is never
 * sent (caches not synced, a failed List, a Ready Node, the launch grace, a NodeClaim named for
 * the Node), and how the server's refusals come back. Objects are decoded from JSON written
 * with ' for ". */
#include "kp-test.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "k8s/rfc3339.h"
#include "k8s/store.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "core/core.h"
#include "core/gc/gc.h"
#include "core/observe.h"
#include "core/provider.h"
#include "kp-fake-api.h"
#include "kp-fake-provider.h"
#include "kp-ssh-fx.h"

#define SEC 1000000LL
#define T0 "2026-01-01T00:00:00Z"

static struct {
    struct kp_fake_provider *f;
    struct kp_provider p;
    int64_t t0;
} T;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(kp_fake_provider_new(&T.f), 0);
    T.p = kp_fake_provider_as_provider(T.f);
    assert_int_equal(kp_rfc3339_parse(T0, strlen(T0), &T.t0), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    T.f = kp_fake_provider_free(T.f);
    return 0;
}

/* Test objects decode from JSON written with ' for " (tests/lib/kp-test.h). */
#define decode(fn, ...) kp_test_decode(fn, true, __VA_ARGS__)

#define COND(type, st, at)                                                                         \
    "{'type':'" type "','status':'" st "','reason':'R','message':'','lastTransitionTime':'" at "'}"
#define REGISTERED                                                                                 \
    "'providerID':'fake://1','conditions':[" COND("Launched", "True", T0) "," COND("Registered",   \
                                                                                   "True", T0) "]"

/* A NodeClaim of node class kind (group fixed by ours) with extra metadata and a status. */
static struct kp_entry *claim(bool ours, const char *meta, const char *status)
{
    return decode(kp_nodeclaim_decode,
                  "{'metadata':{'name':'nc','uid':'nc-uid','resourceVersion':'3',"
                  "'creationTimestamp':'" T0 "'%s},'spec':{'nodeClassRef':{'group':'%s','kind':"
                  "'%s','name':'c'},'requirements':[]},'status':{%s}}",
                  meta, ours ? KP_FAKE_NODECLASS_GROUP : "karpenter.k8s.aws",
                  ours ? KP_FAKE_NODECLASS_KIND : "EC2NodeClass", status);
}

static struct kp_entry *node(const char *meta, const char *ready)
{
    return decode(kp_node_decode,
                  "{'metadata':{'name':'n1','uid':'n-uid','resourceVersion':'1',"
                  "'creationTimestamp':'" T0 "'%s},'spec':{'providerID':'fake://1'},"
                  "'status':{'conditions':[{'type':'Ready','status':'%s'}]}}",
                  meta, ready);
}

static void test_nodeclaim_plan(void **state)
{
    struct kp_entry *nc = claim(true, "", REGISTERED);
    struct kp_entry *ready = node("", "True"), *notready = node("", "False");
    struct kp_entry *e;
    int64_t later = T.t0 + 60 * SEC;

    (void)state;
#define PLAN(x, listed, n, now) kp_gc_nodeclaim_plan(&T.p, kp_nodeclaim_view(x), listed, n, now)
    /* Lost by the provider, no Node or a Node that is not Ready: collected. */
    assert_true(PLAN(nc, false, NULL, later));
    assert_true(PLAN(nc, false, kp_node_view(notready), later));
    /* The kubelet still reports Ready: kept. */
    assert_false(PLAN(nc, false, kp_node_view(ready), later));
    /* Listed: kept. */
    assert_false(PLAN(nc, true, NULL, later));
    /* Launched under 10 s ago: the list may trail the launch. */
    assert_false(PLAN(nc, false, NULL, T.t0 + 9 * SEC));
    assert_true(PLAN(nc, false, NULL, T.t0 + 10 * SEC));
    kp_entry_unref(nc);

    /* Not registered: the registration TTL's, not ours. */
    e = claim(true, "",
              "'providerID':'fake://1','conditions':[" COND("Launched", "True", T0) "," COND(
                  "Registered", "Unknown", T0) "]");
    assert_false(PLAN(e, false, NULL, later));
    kp_entry_unref(e);
    /* Deleting already. */
    e = claim(true, ",'deletionTimestamp':'" T0 "','finalizers':['x']", REGISTERED);
    assert_false(PLAN(e, false, NULL, later));
    kp_entry_unref(e);
    /* Another provider's NodeClaim. */
    e = claim(false, "", REGISTERED);
    assert_false(PLAN(e, false, NULL, later));
    kp_entry_unref(e);
#undef PLAN
    kp_entry_unref(ready);
    kp_entry_unref(notready);
}

/* The form of the fake provider's providerIDs, for the case of a provider that knows its own. */
static bool owns_fake(void *self, const char *provider_id)
{
    (void)self;
    return strncmp(provider_id, "fake://", 7) == 0;
}

static void test_node_plan(void **state)
{
    const char *labelled = ",'labels':{'karpenter.sh/nodepool':'np','test.kpssh.dev/"
                           "fakenodeclass':'c'}";
    struct kp_entry *plain = node("", "True"), *ours = node(labelled, "True");
    struct kp_entry *half = node(",'labels':{'karpenter.sh/nodepool':'np'}", "True");
    struct kp_entry *deleting =
        node(",'deletionTimestamp':'" T0 "','finalizers':['karpenter.sh/termination']", "True");
    struct kp_provider_instance inst = {.nodeclaim = (char[]){"nc"},
                                        .provider_id = (char[]){"fake://1"}};
    const uint64_t grace = 60 * SEC;
    int64_t later = T.t0 + 61 * SEC;
    struct kp_gc_node_facts none = {0}, listed = {.instance = &inst};

    (void)state;
#define PLAN(n, facts, now) kp_gc_node_plan(&T.p, kp_node_view(n), facts, now, grace)
    /* Ours by the instance list, or by the pool and node class labels: collected after grace. */
    assert_true(PLAN(plain, &listed, later));
    assert_true(PLAN(ours, &none, later));
    assert_true(kp_gc_node_labelled_ours(&T.p, kp_node_view(ours)));
    assert_false(PLAN(ours, &none, T.t0 + 59 * SEC));
    /* Neither: another controller's Node, never touched. */
    assert_false(PLAN(plain, &none, later));
    assert_false(PLAN(half, &none, later));
    assert_false(kp_gc_node_labelled_ours(&T.p, kp_node_view(half)));
    /* A provider that knows its providerIDs' form claims the pool-labelled Node by it, node
     * class label or not (a Node registered before its claim's labels reached it): collected,
     * and termination, asking the same question, lets it go. */
    {
        struct kp_provider_ops ops = *T.p.ops;
        struct kp_provider owning = {.ops = &ops, .self = T.p.self};

        ops.owns_provider_id = owns_fake;
        assert_true(kp_gc_node_labelled_ours(&owning, kp_node_view(half)));
        assert_true(kp_gc_node_plan(&owning, kp_node_view(half), &none, later, grace));
        assert_false(kp_gc_node_labelled_ours(&owning, kp_node_view(plain))); /* no pool label */
        assert_false(kp_provider_owns_provider_id(&owning, NULL));
        assert_false(kp_provider_owns_provider_id(&T.p, "fake://1")); /* no such op: never */
    }
    /* A NodeClaim with its providerID, or named as the instance says (status not written yet),
     * keeps it. */
    assert_false(
        PLAN(plain, &((struct kp_gc_node_facts){.instance = &inst, .claim_with_provider_id = true}),
             later));
    assert_false(
        PLAN(plain, &((struct kp_gc_node_facts){.instance = &inst, .claim_named = true}), later));
    /* Being deleted already: its termination runs. */
    assert_false(PLAN(deleting, &listed, later));
#undef PLAN
    kp_entry_unref(plain);
    kp_entry_unref(ours);
    kp_entry_unref(half);
    kp_entry_unref(deleting);
}

static void test_setup(void **state)
{
    struct kp_ssh_fx fx;
    struct kp_core_env env = {0};
    struct kp_gc_controller *ctl = NULL;

    (void)state;
    kp_ssh_fx_init(&fx);
    env.client = fx.c;
    env.informers = fx.reg;
    assert_int_equal(kp_gc_controller_new(&env, &ctl), -EINVAL); /* no provider */
    env.provider = &T.p;
    assert_int_equal(kp_gc_controller_new(&env, &ctl), 0);
    assert_false(kp_gc_controller_ready(ctl));
    assert_null(kp_gc_controller_free(ctl));
    assert_null(kp_gc_controller_free(NULL));
    kp_ssh_fx_done(&fx);
}

/* --- the executor ------------------------------------------------------------------------------ */

#define NC_PATH "/apis/karpenter.sh/v1/nodeclaims/"
#define NODE_PATH "/api/v1/nodes/"
/* The env's timing, away from the defaults so that the requeue and the grace show they are read. */
#define INTERVAL (30 * SEC)
#define GRACE (90 * SEC)
/* The NodePool label and the fake provider's node class label: a Node of ours by its labels. */
#define OURS "'karpenter.sh/nodepool':'np','test.kpssh.dev/fakenodeclass':'c'"

/* The provider's List: fails with r, or answers n instances (providerID, NodeClaim backed). */
static struct {
    int r;
    const char *pid[4], *claim[4];
    size_t n;
    unsigned calls;
} L;

static int scripted_list(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                         struct kp_provider_instances *ret, struct kp_provider_err *err)
{
    (void)self;
    (void)ctx;
    (void)c;
    L.calls++;
    if (L.r < 0)
        return kp_provider_err_set(err, L.r, KP_PROVIDER_ERR_RETRYABLE, NULL, "scripted");
    ret->v = kp_calloc(L.n + 1, sizeof(*ret->v));
    assert_non_null(ret->v);
    for (ret->n = 0; ret->n < L.n; ret->n++) {
        ret->v[ret->n].provider_id = kp_strdup(L.pid[ret->n]);
        ret->v[ret->n].nodeclaim = kp_strdup(L.claim[ret->n]);
    }
    return 0;
}

/* What the observer heard: karpenter_nodeclaims_disrupted_total with its last labels, and any
 * other family. */
static struct {
    unsigned disrupted, pods, other;
    char labels[128];
} M;

static void obs_count(void *ctx, enum kp_core_metric m, const char *const *labels)
{
    (void)ctx;
    if (m == KP_CM_PODS_DISRUPTION_INITIATED) {
        M.pods++;
        return;
    }
    if (m != KP_CM_NODECLAIMS_DISRUPTED) {
        M.other++;
        return;
    }
    M.disrupted++;
    (void)snprintf(M.labels, sizeof(M.labels), "%s,%s,%s,%s,%s", labels[0], labels[1], labels[2],
                   labels[3], labels[4]);
}

static const struct kp_core_observer OBS = {.count = obs_count};

static int64_t fake_now;
static uint64_t now_fn(void)
{
    return (uint64_t)fake_now;
}

/* Which informers have listed (nothing) from the server and hold their watch, as after a start. */
enum synced { SYNCED_NONE, SYNCED_CLAIMS, SYNCED_BOTH };

struct fx {
    struct kp_fake_api *api;
    struct kp_client *c;
    struct kp_registry *reg;
    struct kp_provider_ops ops; /* the fake provider's, with List scripted */
    struct kp_provider prov;
    struct kp_core_env env;
    struct kp_gc_controller *ctl;
    struct kp_informer *claims, *nodes;
    int log_fd;
};

static void sync_informer(struct kp_informer *inf)
{
    assert_int_equal(kp_informer_start(inf), 0);
    assert_int_equal(kp_informer_wait_synced(inf, 10 * SEC), 0);
}

static void fx_init(struct fx *f, enum synced synced)
{
    struct kp_transport_opts to = {.allow_plain_http = true, .timeout_usec = 5 * SEC};

    memset(f, 0, sizeof(*f));
    memset(&L, 0, sizeof(L));
    memset(&M, 0, sizeof(M));
    fake_now = T.t0 + 3600 * SEC; /* an hour after everything was made and launched */
    f->log_fd = kp_test_log_quiet();
    f->api = kp_fake_api_start();
    to.server = kp_fake_api_url(f->api);
    assert_int_equal(kp_client_new(&to, &f->c), 0);
    assert_int_equal(kp_registry_new(f->c, &f->reg), 0);
    f->ops = *T.p.ops;
    f->ops.list = scripted_list;
    f->prov.ops = &f->ops;
    f->prov.self = T.p.self;
    f->env.client = f->c;
    f->env.informers = f->reg;
    f->env.provider = &f->prov;
    f->env.observer = &OBS;
    f->env.now_usec = now_fn;
    f->env.timing.gc_interval_usec = INTERVAL;
    f->env.timing.orphan_node_grace_usec = GRACE;
    assert_int_equal(kp_gc_controller_new(&f->env, &f->ctl), 0);
    assert_int_equal(kp_informers_nodeclaims(f->reg, &f->claims), 0);
    assert_int_equal(kp_informers_nodes(f->reg, &f->nodes), 0);
    if (synced != SYNCED_NONE)
        sync_informer(f->claims);
    if (synced == SYNCED_BOTH)
        sync_informer(f->nodes);
}

static void fx_done(struct fx *f)
{
    /* Cancelled first, their held watches closed: the informers end at once. */
    kp_informer_cancel(f->claims);
    kp_informer_cancel(f->nodes);
    kp_fake_api_drop_watches(f->api);
    kp_informer_stop(f->claims);
    kp_informer_stop(f->nodes);
    f->ctl = kp_gc_controller_free(f->ctl);
    f->reg = kp_registry_free(f->reg);
    f->c = kp_client_free(f->c);
    f->api = kp_fake_api_stop(f->api);
    kp_test_log_restore(f->log_fd);
}

static void put(struct kp_informer *inf, struct kp_entry *e)
{
    assert_int_equal(kp_store_put(kp_informer_store(inf), e, NULL), 0);
}

/* A NodeClaim of ours called name (uid "<name>-uid") in NodePool np, Launched and Registered
 * since at, with status.providerID pid (NULL: not written yet). */
static struct kp_entry *xclaim(const char *name, const char *pid, const char *at)
{
    return decode(kp_nodeclaim_decode,
                  "{'metadata':{'name':'%s','uid':'%s-uid','resourceVersion':'3',"
                  "'creationTimestamp':'" T0 "','labels':{'karpenter.sh/nodepool':'np',"
                  "'karpenter.sh/capacity-type':'on-demand'}},"
                  "'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
                  "','kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[]},"
                  "'status':{%s%s%s'conditions':["
                  "{'type':'Launched','status':'True','reason':'R','message':'',"
                  "'lastTransitionTime':'%s'},"
                  "{'type':'Registered','status':'True','reason':'R','message':'',"
                  "'lastTransitionTime':'%s'}]}}",
                  name, name, pid ? "'providerID':'" : "", pid ? pid : "", pid ? "'," : "", at, at);
}

/* A Node called name (uid "<name>-uid") made at T0 with spec.providerID pid, labels (members,
 * may be "") and Ready ready. */
static struct kp_entry *xnode(const char *name, const char *pid, const char *labels,
                              const char *ready)
{
    return decode(kp_node_decode,
                  "{'metadata':{'name':'%s','uid':'%s-uid','resourceVersion':'1',"
                  "'creationTimestamp':'" T0 "','labels':{%s}},'spec':{'providerID':'%s'},"
                  "'status':{'conditions':[{'type':'Ready','status':'%s'}]}}",
                  name, name, labels, pid, ready);
}

static int run(struct fx *f, uint64_t *requeue)
{
    *requeue = 0;
    kp_fake_api_reset(f->api);
    return kp_gc_reconcile(f->ctl, f->c, /* cx= */ NULL, requeue);
}

/* The index of the request whose line is line, or -1. */
static int find(struct fx *f, const char *line)
{
    for (size_t i = 0; i < kp_fake_api_count(f->api); i++)
        if (strcmp(kp_fake_api_line(f->api, i), line) == 0)
            return (int)i;
    return -1;
}

/* Some request is line, a DELETE whose body carries the precondition uid. */
static void expect_delete(struct fx *f, const char *line, const char *uid)
{
    char want[128];
    int i = find(f, line);

    if (i < 0)
        fail_msg("no request %s among %zu", line, kp_fake_api_count(f->api));
    (void)snprintf(want, sizeof(want), "\"preconditions\":{\"uid\":\"%s\"}", uid);
    if (!strstr(kp_fake_api_body(f->api, (size_t)i), want))
        fail_msg("%s: want %s in %s", line, want, kp_fake_api_body(f->api, (size_t)i));
}

/* Before both caches have synced nothing is decided: no List, no write, a look again soon. */
static void test_exec_unsynced(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    for (enum synced s = SYNCED_NONE; s < SYNCED_BOTH; s++) {
        fx_init(&f, s);
        put(f.claims, xclaim("nc-a", "fake://a", T0));        /* lost */
        put(f.nodes, xnode("n-b", "fake://b", OURS, "True")); /* orphaned */
        assert_int_equal(run(&f, &rq), 0);
        assert_int_equal(rq, 1 * SEC);
        assert_int_equal(L.calls, 0);
        assert_int_equal(kp_fake_api_count(f.api), 0);
        assert_int_equal(M.disrupted, 0);
        fx_done(&f);
    }
}

/* A failed List decides nothing (an empty answer would collect everything); the next pass with
 * an answer does. */
static void test_exec_list_fails(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f, SYNCED_BOTH);
    put(f.claims, xclaim("nc-a", "fake://a", T0));
    put(f.nodes, xnode("n-b", "fake://b", OURS, "True"));
    L.r = -EIO;
    assert_int_equal(run(&f, &rq), -EIO);
    assert_int_equal(rq, INTERVAL);
    assert_int_equal(L.calls, 1);
    assert_int_equal(kp_fake_api_count(f.api), 0);
    assert_int_equal(M.disrupted, 0);

    L.r = 0; /* holds nothing */
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, INTERVAL);
    assert_int_equal(kp_fake_api_count(f.api), 2);
    assert_string_equal(kp_fake_api_line(f.api, 0), "DELETE " NC_PATH "nc-a"); /* claims first */
    expect_delete(&f, "DELETE " NC_PATH "nc-a", "nc-a-uid");
    expect_delete(&f, "DELETE " NODE_PATH "n-b", "n-b-uid");
    assert_int_equal(M.disrupted, 1); /* the NodeClaim only */
    fx_done(&f);
}

/* A registered NodeClaim the provider lost: deleted and counted when it has no Node or a Node
 * that is not Ready, kept while its Node is Ready; a listed one is never touched. */
static void test_exec_lost_nodeclaim(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f, SYNCED_BOTH);
    L.n = 1;
    L.pid[0] = "fake://listed";
    L.claim[0] = "nc-listed";
    put(f.claims, xclaim("nc-a", "fake://a", T0));
    put(f.claims, xclaim("nc-listed", "fake://listed", T0));

    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, INTERVAL);
    assert_int_equal(kp_fake_api_count(f.api), 1);
    expect_delete(&f, "DELETE " NC_PATH "nc-a", "nc-a-uid");
    assert_int_equal(M.disrupted, 1);
    assert_string_equal(M.labels, "garbage_collected,np,on-demand,,graceful");
    assert_int_equal(M.other, 0);

    /* The cache has its Node, Ready (an old Node of ours): the kubelet is alive; and the Node,
     * whose providerID the NodeClaim holds, is no orphan. Nothing is sent. */
    put(f.nodes, xnode("nc-a", "fake://a", OURS, "True"));
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(kp_fake_api_count(f.api), 0);
    assert_int_equal(M.disrupted, 1);

    /* Not Ready: the NodeClaim goes again; its Node stays for the NodeClaim's termination. */
    put(f.nodes, xnode("nc-a", "fake://a", OURS, "False"));
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(kp_fake_api_count(f.api), 1);
    expect_delete(&f, "DELETE " NC_PATH "nc-a", "nc-a-uid");
    assert_int_equal(M.disrupted, 2);
    assert_int_equal(L.calls, 3);
    fx_done(&f);
}

/* A collected NodeClaim whose Node (NotReady, its kubelet gone) still shows two running pods
 * bound to it and a DaemonSet's: the two are counted as disruptions initiated. */
static void test_exec_pods_counted(void **state)
{
    struct fx f;
    struct kp_informer *pods = NULL;
    uint64_t rq;
    static const char *const names[] = {"a", "b", "agent"};

    (void)state;
    fx_init(&f, SYNCED_BOTH);
    assert_int_equal(kp_informers_pods(f.reg, &pods), 0);
    put(f.claims, decode(kp_nodeclaim_decode,
                         "{'metadata':{'name':'nc-a','uid':'nc-a-uid','resourceVersion':'3',"
                         "'creationTimestamp':'" T0 "','labels':{'karpenter.sh/nodepool':'np'}},"
                         "'spec':{'nodeClassRef':{'group':'" KP_FAKE_NODECLASS_GROUP
                         "','kind':'" KP_FAKE_NODECLASS_KIND "','name':'c'},'requirements':[]},"
                         "'status':{'providerID':'fake://a','nodeName':'n-a','conditions':["
                         "{'type':'Launched','status':'True','reason':'R','message':'',"
                         "'lastTransitionTime':'" T0 "'},"
                         "{'type':'Registered','status':'True','reason':'R','message':'',"
                         "'lastTransitionTime':'" T0 "'}]}}"));
    for (size_t i = 0; i < 3; i++)
        put(pods, decode(kp_pod_decode,
                         "{'metadata':{'name':'%s','namespace':'ns','uid':'pu-%s',"
                         "'resourceVersion':'1'%s},'spec':{'nodeName':'n-a','containers':[{"
                         "'name':'c'}]},'status':{'phase':'Running'}}",
                         names[i], names[i],
                         i == 2 ? ",'ownerReferences':[{'apiVersion':'apps/v1','kind':"
                                  "'DaemonSet','name':'d','uid':'du','controller':true}]"
                                : ""));
    assert_int_equal(run(&f, &rq), 0);
    expect_delete(&f, "DELETE " NC_PATH "nc-a", "nc-a-uid");
    assert_int_equal(M.disrupted, 1);
    assert_int_equal(M.pods, 2);
    fx_done(&f);
}

/* KP_GC_LAUNCH_GRACE_USEC after Launched went True, not before: a List may trail its Create. */
static void test_exec_launch_grace(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f, SYNCED_BOTH);
    put(f.claims, xclaim("nc-a", "fake://a", T0));
    fake_now = T.t0 + KP_GC_LAUNCH_GRACE_USEC - 1;
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, INTERVAL);
    assert_int_equal(L.calls, 1);
    assert_int_equal(kp_fake_api_count(f.api), 0);
    assert_int_equal(M.disrupted, 0);
    fake_now = T.t0 + KP_GC_LAUNCH_GRACE_USEC;
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(kp_fake_api_count(f.api), 1);
    expect_delete(&f, "DELETE " NC_PATH "nc-a", "nc-a-uid");
    assert_int_equal(M.disrupted, 1);
    fx_done(&f);
}

/* The server's refusals: already gone (404) and another incarnation (409) are no errors and
 * count nothing; another failure is the pass's error, and the other deletes still go out. */
static void test_exec_delete_answers(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f, SYNCED_BOTH);
    put(f.claims, xclaim("nc-a", "fake://a", T0));
    put(f.claims, xclaim("nc-b", "fake://b", T0));
    put(f.claims, xclaim("nc-c", "fake://c", T0));
    kp_fake_api_answer(f.api, "DELETE " NC_PATH "nc-a", 404, NULL);
    kp_fake_api_answer(f.api, "DELETE " NC_PATH "nc-b", 409, NULL);
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, INTERVAL);
    assert_int_equal(kp_fake_api_count(f.api), 3);
    expect_delete(&f, "DELETE " NC_PATH "nc-a", "nc-a-uid");
    expect_delete(&f, "DELETE " NC_PATH "nc-b", "nc-b-uid");
    expect_delete(&f, "DELETE " NC_PATH "nc-c", "nc-c-uid");
    assert_int_equal(M.disrupted, 1); /* nc-c: the only one this pass deleted */

    kp_fake_api_answer(f.api, "DELETE " NC_PATH "nc-c", 500, NULL);
    assert_int_equal(run(&f, &rq), -KP_ESERVER);
    assert_int_equal(rq, INTERVAL);
    assert_int_equal(kp_fake_api_count(f.api), 3);
    assert_int_equal(M.disrupted, 1);
    fx_done(&f);
}

/* A Node of ours (by its labels, or by the provider's instance list) with no NodeClaim: deleted
 * once older than the grace, with its uid as precondition, and not counted as a NodeClaim
 * disruption; kept while a NodeClaim is named as the instance says it backs or as the Node
 * (its launch returned, its providerID not written yet); another's Node never touched. */
static void test_exec_orphan_node(void **state)
{
    struct fx f;
    uint64_t rq;

    (void)state;
    fx_init(&f, SYNCED_BOTH);
    put(f.nodes, xnode("n1", "fake://n1", OURS, "True"));
    put(f.nodes, xnode("n2", "fake://n2", "", "True"));                             /* no labels */
    put(f.nodes, xnode("n3", "fake://n3", "'karpenter.sh/nodepool':'np'", "True")); /* another's */

    fake_now = T.t0 + GRACE - 1;
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(rq, INTERVAL);
    assert_int_equal(kp_fake_api_count(f.api), 0);
    fake_now = T.t0 + GRACE;
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(kp_fake_api_count(f.api), 1);
    expect_delete(&f, "DELETE " NODE_PATH "n1", "n1-uid");
    assert_int_equal(M.disrupted, 0);
    assert_int_equal(M.other, 0);

    /* n2 is now an instance of the provider's, backing nc-2, which exists without its
     * providerID; a NodeClaim named n1 exists the same way. Both Nodes kept. */
    L.n = 1;
    L.pid[0] = "fake://n2";
    L.claim[0] = "nc-2";
    put(f.claims, xclaim("nc-2", NULL, T0));
    put(f.claims, xclaim("n1", NULL, T0));
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(kp_fake_api_count(f.api), 0);

    /* nc-2 gone: n2 is ours by the instance list alone, and goes. */
    assert_int_equal(kp_store_delete(kp_informer_store(f.claims), "nc-2", NULL), 0);
    assert_int_equal(run(&f, &rq), 0);
    assert_int_equal(kp_fake_api_count(f.api), 1);
    expect_delete(&f, "DELETE " NODE_PATH "n2", "n2-uid");

    /* Gone already or another incarnation: no error; another failure is the pass's error. */
    kp_fake_api_answer(f.api, "DELETE " NODE_PATH "n2", 404, NULL);
    assert_int_equal(run(&f, &rq), 0);
    kp_fake_api_answer(f.api, "DELETE " NODE_PATH "n2", 409, NULL);
    assert_int_equal(run(&f, &rq), 0);
    kp_fake_api_answer(f.api, "DELETE " NODE_PATH "n2", 500, NULL);
    assert_int_equal(run(&f, &rq), -KP_ESERVER);
    assert_int_equal(kp_fake_api_count(f.api), 1);
    assert_int_equal(M.disrupted, 0);
    fx_done(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nodeclaim_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_unsynced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_list_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_lost_nodeclaim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_pods_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_launch_grace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_delete_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_orphan_node, setup, teardown),
    };

    return kp_test_main("gc", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
