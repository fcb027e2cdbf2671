/* Tests for the NodeClaim lifecycle (core/lifecycle): every transition of the pure plan
 * (finalizer, launch and its error mapping, registration, initialization, liveness, Ready,
 * deletion with its TGP annotation, Nodes, instance and finalizer), the bodies of the writes
 * (the Node's registration sync, the launch's metadata, the status), and the executor over stores
 * fed by hand and the fake provider, with a client whose server is not there: what happens before
 * the first write (the launch cache: a lost status write never launches twice; an un-launched
 * deleting claim still gets its instance released; a cancelled reconcile launches nothing;
 * claims of another provider are left alone), and set-up that takes its handlers back. */
#include "kp-test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "k8s/rfc3339.h"
#include "k8s/store.h"
#include "k8s/transport.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "core/core.h"
#include "core/lifecycle/lifecycle.h"
#include "core/observe.h"
#include "core/provider.h"
#include "api/requirements.h"
#include "kp-fake-provider.h"

#define SEC 1000000LL
#define T0 "2026-01-01T00:00:00Z" /* creation; conditions' transitions */
#define GROUP_KIND                                                                                 \
    "\"group\":\"" KP_FAKE_NODECLASS_GROUP "\",\"kind\":\"" KP_FAKE_NODECLASS_KIND "\""

/* T0 without cmocka (the torture case); 0 cannot happen for a constant. */
static int64_t t0_usec_quiet(void)
{
    int64_t t = 0;

    return kp_rfc3339_parse(T0, strlen(T0), &t) < 0 ? 0 : t;
}

static int64_t t0_usec(void)
{
    int64_t t = 0;

    assert_int_equal(kp_rfc3339_parse(T0, strlen(T0), &t), 0);
    return t;
}

/* --- fixtures ---------------------------------------------------------------------------------- */

struct ncopt {
    const char *name, *uid;
    bool finalizer;
    const char *deletion;    /* RFC 3339 or NULL */
    const char *conds;       /* the inside of status.conditions */
    const char *pid;         /* status.providerID */
    const char *labels;      /* the inside of metadata.labels */
    const char *annotations; /* the inside of metadata.annotations */
    const char *taints, *startup;
    const char *requests; /* the inside of spec.resources.requests */
    const char *tgp;
    const char *group; /* a foreign node class group */
    int generation;
    bool owned; /* an ownerReference to NodePool np (uid npu) */
};

/* The claim's JSON into buf[size]; its length. */
static size_t claim_json(const struct ncopt *o, const char *rv, char *buf, size_t size)
{
    int n = snprintf(
        buf, size,
        "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":{"
        "\"name\":\"%s\",\"uid\":\"%s\",\"resourceVersion\":\"%s\",\"generation\":%d,"
        "\"creationTimestamp\":\"" T0 "\"%s%s%s\"labels\":{\"karpenter.sh/nodepool\":\"np\"%s%s},"
        "\"annotations\":{%s},\"finalizers\":[%s]%s},"
        "\"spec\":{\"nodeClassRef\":{\"group\":\"%s\",\"kind\":\"" KP_FAKE_NODECLASS_KIND
        "\",\"name\":\"c\"},\"requirements\":[],\"taints\":[%s],\"startupTaints\":[%s],"
        "\"resources\":{\"requests\":{%s}}%s%s%s},"
        "\"status\":{\"conditions\":[%s]%s%s%s}}",
        o->name ? o->name : "nc", o->uid ? o->uid : "u1", rv, o->generation ? o->generation : 1,
        o->deletion ? ",\"deletionTimestamp\":\"" : "", o->deletion ? o->deletion : "",
        o->deletion ? "\"," : ",", o->labels ? "," : "", o->labels ? o->labels : "",
        o->annotations ? o->annotations : "", o->finalizer ? "\"karpenter.sh/termination\"" : "",
        o->owned ? ",\"ownerReferences\":[{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":"
                   "\"NodePool\",\"name\":\"np\",\"uid\":\"npu\"}]"
                 : "",
        o->group ? o->group : KP_FAKE_NODECLASS_GROUP, o->taints ? o->taints : "",
        o->startup ? o->startup : "", o->requests ? o->requests : "",
        o->tgp ? ",\"terminationGracePeriod\":\"" : "", o->tgp ? o->tgp : "", o->tgp ? "\"" : "",
        o->conds ? o->conds : "", o->pid ? ",\"providerID\":\"" : "", o->pid ? o->pid : "",
        o->pid ? "\"" : "");

    /* No cmocka assertion here: the torture case uses it too. 0 when it does not fit. */
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

static struct kp_entry *claim(const struct ncopt *o)
{
    char buf[8192];
    struct kp_entry *e = NULL;
    size_t n = claim_json(o, "7", buf, sizeof(buf));

    assert_true(n > 0);
    assert_int_equal(kp_nodeclaim_decode(buf, n, &e), 0);
    return e;
}

struct nodeopt {
    const char *name, *pid;
    bool not_ready;
    const char *taints, *labels, *annotations, *allocatable, *deletion, *owners;
    const char *created; /* NULL: T0 */
};

static struct kp_entry *node(const struct nodeopt *o)
{
    char buf[8192];
    struct kp_entry *e = NULL;
    int n = snprintf(
        buf, sizeof(buf),
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"uid\":\"nu-%s\","
        "\"resourceVersion\":\"3\",\"creationTimestamp\":\"%s\"%s%s%s,\"labels\":{%s},"
        "\"annotations\":{%s},\"ownerReferences\":[%s],\"finalizers\":[\"other/f\"]},"
        "\"spec\":{\"providerID\":\"%s\",\"taints\":[%s]},"
        "\"status\":{\"allocatable\":{%s},\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
        o->name ? o->name : "n1", o->name ? o->name : "n1", o->created ? o->created : T0,
        o->deletion ? ",\"deletionTimestamp\":\"" : "", o->deletion ? o->deletion : "",
        o->deletion ? "\"" : "", o->labels ? o->labels : "", o->annotations ? o->annotations : "",
        o->owners ? o->owners : "", o->pid ? o->pid : "fake://nc", o->taints ? o->taints : "",
        o->allocatable ? o->allocatable : "\"cpu\":\"4\"", o->not_ready ? "False" : "True");

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_node_decode(buf, (size_t)n, &e), 0);
    return e;
}

#define CONDM(type, status, reason, msg)                                                           \
    "{\"type\":\"" type "\",\"status\":\"" status "\",\"reason\":\"" reason "\","                  \
    "\"message\":\"" msg "\",\"observedGeneration\":1,\"lastTransitionTime\":\"" T0 "\"}"
#define COND(type, status, reason) CONDM(type, status, reason, "")
#define NOT_FOUND "Node not registered with cluster"
#define LAUNCHED COND("Launched", "True", "Launched")
#define REGISTERED COND("Registered", "True", "Registered")
#define INITIALIZED COND("Initialized", "True", "Initialized")
#define READY COND("Ready", "True", "Ready")
#define UNREG_TAINT "{\"key\":\"karpenter.sh/unregistered\",\"effect\":\"NoExecute\"}"

/* One plan of claim c with nodes (NULL-terminated entries), now = T0 + after. */
struct plan {
    struct kp_core_timing timing;
    struct kp_lifecycle_in in;
    struct kp_lifecycle_action a;
    const struct kp_node_view *nv[4];
};

static void plan(struct plan *p, const struct kp_entry *c, struct kp_entry *const *nodes,
                 int64_t after)
{
    size_t n = 0;

    memset(&p->timing, 0, sizeof(p->timing));
    memset(&p->in, 0, sizeof(p->in));
    kp_core_timing_defaults(&p->timing);
    p->in.nc = kp_nodeclaim_view(c);
    for (; nodes && nodes[n]; n++)
        p->nv[n] = kp_node_view(nodes[n]);
    p->in.nodes = p->nv;
    p->in.n_nodes = n;
    p->in.now_usec = t0_usec() + after;
    p->in.timing = &p->timing;
    assert_int_equal(kp_lifecycle_plan(&p->in, &p->a), 0);
}

static void replan(struct plan *p)
{
    kp_lifecycle_action_done(&p->a);
    assert_int_equal(kp_lifecycle_plan(&p->in, &p->a), 0);
}

static void expect_cond(const struct plan *p, const char *type, enum kp_cond_status st,
                        const char *reason)
{
    const struct kp_condset_item *it = kp_condset_get(&p->a.cs, type);

    assert_non_null(it);
    if (it->status != st || !kp_streq(it->reason, reason))
        fail_msg("%s: want %s/%s, have %s/%s (%s)", type, kp_cond_status_name(st), reason,
                 kp_cond_status_name(it->status), it->reason, it->message);
}

static void expect_verb(const struct plan *p, enum kp_lc_verb v)
{
    if (p->a.verb != v)
        fail_msg("want %s, have %s", kp_lc_verb_name(v), kp_lc_verb_name(p->a.verb));
}

/* The instance the fake provider would launch, for plans that have one. */
static void instance(struct kp_provider_instance *in, const char *pid)
{
    memset(in, 0, sizeof(*in));
    in->nodeclaim = kp_strdup("nc");
    in->provider_id = kp_strdup(pid);
    in->instance_type = kp_strdup("small");
    assert_int_equal(kp_provider_kv_add(&in->labels, &in->n_labels, KP_LABEL_ZONE, "z2"), 0);
    assert_int_equal(
        kp_provider_kv_add(&in->labels, &in->n_labels, KP_LABEL_INSTANCE_TYPE, "small"), 0);
    assert_int_equal(kp_provider_kv_add(&in->annotations, &in->n_annotations, "a/hash", "new"), 0);
    assert_int_equal(kp_provider_res_add(&in->capacity, &in->n_capacity, "cpu", 2000), 0);
    assert_int_equal(kp_provider_res_add(&in->capacity, &in->n_capacity, "memory",
                                         4LL * 1024 * 1024 * 1024 * 1000),
                     0);
}

/* --- plan: launch -------------------------------------------------------------------------------- */

static void test_finalizer_first(void **state)
{
    struct kp_entry *c = claim(&(struct ncopt){0});
    struct plan p = {0};

    (void)state;
    plan(&p, c, NULL, 0);
    expect_verb(&p, KP_LC_ADD_FINALIZER);
    kp_lifecycle_action_done(&p.a);
    kp_entry_unref(c);
}

static void test_launch(void **state)
{
    struct kp_entry *c = claim(&(struct ncopt){.finalizer = true});
    struct kp_provider_instance in;
    struct plan p = {0};

    (void)state;
    plan(&p, c, NULL, 0);
    expect_verb(&p, KP_LC_LAUNCH);
    /* No Launched condition yet: the whole launch timeout. */
    assert_int_equal(p.a.launch_budget_usec, 5 * 60 * SEC);

    instance(&in, "fake://nc");
    p.in.launched = &in;
    replan(&p);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    assert_true(p.a.write_launch);
    assert_false(p.a.launch_failed);
    expect_cond(&p, KP_NC_COND_LAUNCHED, KP_COND_TRUE, "Launched");
    /* No Node yet: the registration TTL starts now, and the reconcile comes back at its end. */
    expect_cond(&p, KP_NC_COND_REGISTERED, KP_COND_UNKNOWN, "NodeNotFound");
    assert_string_equal(kp_condset_get(&p.a.cs, KP_NC_COND_REGISTERED)->message,
                        "Node not registered with cluster");
    expect_cond(&p, KP_NC_COND_INITIALIZED, KP_COND_UNKNOWN, "AwaitingReconciliation");
    expect_cond(&p, KP_NC_COND_READY, KP_COND_UNKNOWN, "NodeNotFound");
    assert_int_equal(p.a.requeue_usec, 15 * 60 * SEC);
    assert_string_equal(kp_lifecycle_provider_id(p.in.nc, &in), "fake://nc");
    assert_null(kp_lifecycle_provider_id(p.in.nc, NULL));
    kp_provider_instance_done(&in);
    kp_lifecycle_action_done(&p.a);
    kp_entry_unref(c);
}

static void test_launch_errors(void **state)
{
    struct kp_entry *c = claim(&(struct ncopt){.finalizer = true});
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct plan p = {0};
    char long_msg[400];
    const struct kp_condset_item *it;

    (void)state;
    plan(&p, c, NULL, 0);
    p.in.create_err = &err;

    err.kind = KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY;
    replan(&p);
    expect_verb(&p, KP_LC_DELETE);
    assert_string_equal(p.a.reason, KP_CM_REASON_INSUFFICIENT_CAPACITY);

    err.kind = KP_PROVIDER_ERR_NODECLASS_NOT_READY;
    replan(&p);
    expect_verb(&p, KP_LC_DELETE);
    assert_string_equal(p.a.reason, KP_CM_REASON_NODECLASS_NOT_READY);

    /* A CreateError names its reason; the message is cut at 300 characters plus "...". */
    memset(long_msg, 'x', sizeof(long_msg) - 1);
    long_msg[sizeof(long_msg) - 1] = '\0';
    (void)kp_provider_err_set(&err, -5, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_JOIN_FAILED,
                              "%s", long_msg);
    replan(&p);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    assert_true(p.a.launch_failed);
    assert_false(p.a.write_launch);
    expect_cond(&p, KP_NC_COND_LAUNCHED, KP_COND_UNKNOWN, KP_PROVIDER_REASON_JOIN_FAILED);
    it = kp_condset_get(&p.a.cs, KP_NC_COND_LAUNCHED);
    assert_int_equal(strlen(it->message), 303);
    assert_string_equal(it->message + 300, "...");
    /* The launch timeout counts from now, so the claim comes back before it. */
    assert_int_equal(p.a.requeue_usec, 5 * 60 * SEC);

    /* Anything else is Karpenter's LaunchFailed. */
    (void)kp_provider_err_set(&err, -EAGAIN, KP_PROVIDER_ERR_RETRYABLE, NULL, "api down");
    replan(&p);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    expect_cond(&p, KP_NC_COND_LAUNCHED, KP_COND_UNKNOWN, "LaunchFailed");
    assert_string_equal(kp_condset_get(&p.a.cs, KP_NC_COND_LAUNCHED)->message, "api down");
    kp_provider_err_done(&err);
    kp_lifecycle_action_done(&p.a);
    kp_entry_unref(c);
}

static void test_launch_timeout(void **state)
{
    struct kp_entry *c =
        claim(&(struct ncopt){.finalizer = true,
                              .conds = COND("Launched", "Unknown", "LaunchFailed") "," COND(
                                  "Registered", "Unknown", "NodeNotFound")});
    struct plan p = {0};

    (void)state;
    /* Within the timeout: launch again, for no longer than what is left of it (a join that
     * hangs is cut off when the claim is due to die). Past it: delete, no further launch. */
    plan(&p, c, NULL, 4 * 60 * SEC);
    expect_verb(&p, KP_LC_LAUNCH);
    assert_int_equal(p.a.launch_budget_usec, 60 * SEC);
    kp_lifecycle_action_done(&p.a);
    plan(&p, c, NULL, 5 * 60 * SEC);
    expect_verb(&p, KP_LC_DELETE);
    assert_string_equal(p.a.reason, KP_CM_REASON_LAUNCH_TIMEOUT);
    kp_lifecycle_action_done(&p.a);
    kp_entry_unref(c);
}

static void test_registration_ttl(void **state)
{
    struct kp_entry *c = claim(&(struct ncopt){
        .finalizer = true,
        .pid = "fake://nc",
        .conds = LAUNCHED "," CONDM("Registered", "Unknown", "NodeNotFound", NOT_FOUND) "," CONDM(
            "Initialized", "Unknown", "AwaitingReconciliation",
            "object is awaiting reconciliation") "," CONDM("Ready", "Unknown", "NodeNotFound",
                                                           NOT_FOUND)});
    struct plan p = {0};

    (void)state;
    plan(&p, c, NULL, 10 * 60 * SEC);
    expect_verb(&p, KP_LC_NONE); /* nothing changed: no write, back at the deadline */
    assert_int_equal(p.a.requeue_usec, 5 * 60 * SEC);
    kp_lifecycle_action_done(&p.a);
    plan(&p, c, NULL, 15 * 60 * SEC);
    expect_verb(&p, KP_LC_DELETE);
    assert_string_equal(p.a.reason, KP_CM_REASON_REGISTRATION_TIMEOUT);
    kp_lifecycle_action_done(&p.a);
    kp_entry_unref(c);
}

/* --- plan: registration and initialization --------------------------------------------------------- */

static void test_register(void **state)
{
    struct kp_entry *c =
        claim(&(struct ncopt){.finalizer = true, .pid = "fake://nc", .conds = LAUNCHED});
    struct kp_entry *n = node(&(struct nodeopt){.taints = UNREG_TAINT});
    struct kp_entry *bare = node(&(struct nodeopt){0});
    struct kp_entry *n2 = node(&(struct nodeopt){.name = "n2"});
    struct plan p = {0};

    (void)state;
    plan(&p, c, (struct kp_entry *[]){n, NULL}, SEC);
    expect_verb(&p, KP_LC_SYNC_NODE);
    assert_ptr_equal(p.a.node, kp_node_view(n));
    assert_false(p.a.taint_missing);

    p.in.node_synced = true;
    replan(&p);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    assert_true(p.a.registered_now);
    assert_string_equal(p.a.node_name, "n1");
    expect_cond(&p, KP_NC_COND_REGISTERED, KP_COND_TRUE, "Registered");
    /* The cached Node still has the unregistered taint: initialization waits for the event. */
    expect_cond(&p, KP_NC_COND_INITIALIZED, KP_COND_UNKNOWN, "KnownEphemeralTaintsExist");
    assert_string_equal(kp_condset_get(&p.a.cs, KP_NC_COND_INITIALIZED)->message,
                        "KnownEphemeralTaint \"karpenter.sh/unregistered:NoExecute\" still exists");
    assert_int_equal(p.a.requeue_usec, 0); /* registered: liveness is done */
    kp_lifecycle_action_done(&p.a);

    /* A Node that came without the taint and without the registered label. */
    plan(&p, c, (struct kp_entry *[]){bare, NULL}, SEC);
    expect_verb(&p, KP_LC_SYNC_NODE);
    assert_true(p.a.taint_missing);
    kp_lifecycle_action_done(&p.a);

    plan(&p, c, (struct kp_entry *[]){bare, n2, NULL}, SEC);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    expect_cond(&p, KP_NC_COND_REGISTERED, KP_COND_FALSE, "MultipleNodesFound");
    expect_cond(&p, KP_NC_COND_READY, KP_COND_FALSE, "MultipleNodesFound");
    kp_lifecycle_action_done(&p.a);
    kp_entry_unref(n2);
    kp_entry_unref(bare);
    kp_entry_unref(n);
    kp_entry_unref(c);
}

static void expect_init(const struct ncopt *co, const struct nodeopt *no, const char *reason,
                        const char *message)
{
    struct kp_entry *c = claim(co);
    struct kp_entry *n = node(no);
    struct plan p = {0};

    plan(&p, c, (struct kp_entry *[]){n, NULL}, SEC);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    expect_cond(&p, KP_NC_COND_INITIALIZED, KP_COND_UNKNOWN, reason);
    assert_string_equal(kp_condset_get(&p.a.cs, KP_NC_COND_INITIALIZED)->message, message);
    expect_cond(&p, KP_NC_COND_READY, KP_COND_UNKNOWN, reason);
    kp_lifecycle_action_done(&p.a);
    kp_entry_unref(n);
    kp_entry_unref(c);
}

static void test_initialize(void **state)
{
    const struct ncopt co = {
        .finalizer = true,
        .pid = "fake://nc",
        .conds = LAUNCHED "," REGISTERED,
        .startup = "{\"key\":\"s/x\",\"effect\":\"NoSchedule\"}",
        .requests = "\"cpu\":\"1\",\"example.com/gpu\":\"1\",\"example.com/zero\":\"0\""};
    const char *alloc = "\"cpu\":\"4\",\"example.com/gpu\":\"1\"";
    struct kp_entry *c, *n, *labelled;
    struct plan p = {0};

    (void)state;
    expect_init(&co, &(struct nodeopt){.not_ready = true, .allocatable = alloc}, "NodeNotReady",
                "Node status is NotReady");
    expect_init(&co,
                &(struct nodeopt){.allocatable = alloc,
                                  .taints = "{\"key\":\"s/x\",\"value\":\"v\",\"effect\":"
                                            "\"NoSchedule\"}"},
                "StartupTaintsExist", "StartupTaint \"s/x=v:NoSchedule\" still exists");
    expect_init(&co,
                &(struct nodeopt){.allocatable = alloc,
                                  .taints = "{\"key\":\"readiness.k8s.io/net\",\"effect\":"
                                            "\"NoSchedule\"}"},
                "KnownEphemeralTaintsExist",
                "KnownEphemeralTaint \"readiness.k8s.io/net:NoSchedule\" still exists");
    expect_init(&co, &(struct nodeopt){.allocatable = "\"cpu\":\"4\",\"example.com/gpu\":\"0\""},
                "ResourceNotRegistered",
                "Resource \"example.com/gpu\" was requested but not registered");

    /* All clear: the Node is labelled first, then the claim is Initialized and Ready. */
    c = claim(&co);
    n = node(&(struct nodeopt){
        .allocatable = alloc,
        .taints = "{\"key\":\"s/x\",\"effect\":\"NoExecute\"}" /* another effect: not it */});
    plan(&p, c, (struct kp_entry *[]){n, NULL}, SEC);
    expect_verb(&p, KP_LC_LABEL_INITIALIZED);
    assert_ptr_equal(p.a.node, kp_node_view(n));
    p.in.node_labeled = true;
    replan(&p);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    assert_true(p.a.initialized_now);
    expect_cond(&p, KP_NC_COND_INITIALIZED, KP_COND_TRUE, "Initialized");
    expect_cond(&p, KP_NC_COND_READY, KP_COND_TRUE, "Ready");
    kp_lifecycle_action_done(&p.a);

    /* A Node already labelled (a status write lost after the label) is not labelled again. */
    labelled = node(
        &(struct nodeopt){.allocatable = alloc, .labels = "\"karpenter.sh/initialized\":\"true\""});
    plan(&p, c, (struct kp_entry *[]){labelled, NULL}, SEC);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    assert_true(p.a.initialized_now);
    kp_lifecycle_action_done(&p.a);
    kp_entry_unref(labelled);
    kp_entry_unref(n);
    kp_entry_unref(c);
}

static void test_steady_and_generation(void **state)
{
    const char *all = LAUNCHED "," REGISTERED "," INITIALIZED "," READY;
    struct kp_entry *c =
        claim(&(struct ncopt){.finalizer = true, .pid = "fake://nc", .conds = all});
    struct kp_entry *c2 = claim(
        &(struct ncopt){.finalizer = true, .pid = "fake://nc", .conds = all, .generation = 2});
    struct kp_entry *n = node(&(struct nodeopt){0});
    struct plan p = {0};

    (void)state;
    /* Known conditions are never re-decided, even with the Node gone. */
    plan(&p, c, NULL, 3600 * SEC);
    expect_verb(&p, KP_LC_NONE);
    assert_int_equal(p.a.requeue_usec, 0);
    kp_lifecycle_action_done(&p.a);
    plan(&p, c, (struct kp_entry *[]){n, NULL}, SEC);
    expect_verb(&p, KP_LC_NONE);
    kp_lifecycle_action_done(&p.a);
    /* A new generation re-stamps them: one write, nothing else changes. */
    plan(&p, c2, (struct kp_entry *[]){n, NULL}, SEC);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    assert_false(p.a.registered_now || p.a.initialized_now || p.a.write_launch);
    assert_int_equal(kp_condset_get(&p.a.cs, KP_NC_COND_LAUNCHED)->observed_generation, 2);
    assert_int_equal(kp_condset_get(&p.a.cs, KP_NC_COND_LAUNCHED)->last_transition_usec, t0_usec());
    kp_lifecycle_action_done(&p.a);
    kp_entry_unref(n);
    kp_entry_unref(c2);
    kp_entry_unref(c);
}

/* --- plan: deletion ------------------------------------------------------------------------------- */

static void test_finalize(void **state)
{
    const char *del = "2026-01-01T00:10:00Z";
    struct kp_entry *gone = claim(&(struct ncopt){.deletion = del, .conds = REGISTERED});
    struct kp_entry *tgp = claim(&(struct ncopt){.finalizer = true, .deletion = del, .tgp = "1h"});
    struct kp_entry *c = claim(
        &(struct ncopt){.finalizer = true,
                        .deletion = del,
                        .pid = "fake://nc",
                        .tgp = "1h",
                        .annotations = "\"karpenter.sh/nodeclaim-termination-timestamp\":\"x\"",
                        .conds = LAUNCHED "," REGISTERED});
    struct kp_entry *unlaunched = claim(&(struct ncopt){.finalizer = true, .deletion = del});
    struct kp_entry *live = node(&(struct nodeopt){0});
    struct kp_entry *dying = node(&(struct nodeopt){.name = "n2", .deletion = del});
    struct plan p = {0};
    int64_t d = 0;

    (void)state;
    plan(&p, gone, NULL, 0);
    expect_verb(&p, KP_LC_NONE); /* not ours to finish */
    kp_lifecycle_action_done(&p.a);

    plan(&p, tgp, NULL, 0);
    expect_verb(&p, KP_LC_ANNOTATE_TGP);
    assert_int_equal(kp_rfc3339_parse(del, strlen(del), &d), 0);
    assert_int_equal(p.a.tgp_deadline_usec, d + 3600 * SEC);
    kp_lifecycle_action_done(&p.a);

    plan(&p, c, (struct kp_entry *[]){dying, live, NULL}, 0);
    expect_verb(&p, KP_LC_DELETE_NODES);
    kp_lifecycle_action_done(&p.a);
    plan(&p, c, (struct kp_entry *[]){dying, NULL}, 0);
    expect_verb(&p, KP_LC_WAIT_NODES);
    assert_int_equal(p.a.requeue_usec, 5 * SEC);
    kp_lifecycle_action_done(&p.a);

    plan(&p, c, NULL, 0);
    expect_verb(&p, KP_LC_DELETE_INSTANCE);
    p.in.instance = KP_LC_INSTANCE_TERMINATING;
    replan(&p);
    expect_verb(&p, KP_LC_WRITE_STATUS);
    expect_cond(&p, KP_NC_COND_INSTANCE_TERMINATING, KP_COND_TRUE, "InstanceTerminating");
    assert_int_equal(p.a.requeue_usec, 5 * SEC);
    p.in.instance = KP_LC_INSTANCE_GONE;
    replan(&p);
    expect_verb(&p, KP_LC_REMOVE_FINALIZER);
    kp_lifecycle_action_done(&p.a);

    /* Un-launched: the provider is still asked (a Create may have got an instance). */
    plan(&p, unlaunched, NULL, 0);
    expect_verb(&p, KP_LC_DELETE_INSTANCE);
    p.in.instance = KP_LC_INSTANCE_GONE;
    replan(&p);
    expect_verb(&p, KP_LC_REMOVE_FINALIZER);
    kp_lifecycle_action_done(&p.a);

    kp_entry_unref(dying);
    kp_entry_unref(live);
    kp_entry_unref(unlaunched);
    kp_entry_unref(c);
    kp_entry_unref(tgp);
    kp_entry_unref(gone);
}

/* --- helpers and bodies ----------------------------------------------------------------------------- */

static void test_helpers(void **state)
{
    const struct kp_taint yes[] = {
        {.key = "node.kubernetes.io/not-ready", .effect = KP_TAINT_NO_EXECUTE},
        {.key = "node.kubernetes.io/unreachable", .effect = KP_TAINT_NO_SCHEDULE},
        {.key = "node.cloudprovider.kubernetes.io/uninitialized",
         .value = "true",
         .effect = KP_TAINT_NO_SCHEDULE},
        {.key = "readiness.k8s.io/anything", .effect = KP_TAINT_NO_EXECUTE},
    };
    const struct kp_taint no[] = {
        {.key = "node.kubernetes.io/unreachable", .effect = KP_TAINT_NO_EXECUTE},
        {.key = "karpenter.sh/unregistered", .effect = KP_TAINT_NO_SCHEDULE},
        {.key = "readiness.k8s.io", .effect = KP_TAINT_NO_SCHEDULE},
    };
    struct kp_entry *g = claim(&(struct ncopt){0});
    struct kp_entry *f = claim(&(struct ncopt){.tgp = "0s"});
    struct kp_entry *e = claim(&(struct ncopt){.tgp = "10m"});
    char msg[320], *t;

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(yes); i++)
        assert_true(kp_lifecycle_ephemeral_taint(&yes[i]));
    for (size_t i = 0; i < KP_ARRAY_SIZE(no); i++)
        assert_false(kp_lifecycle_ephemeral_taint(&no[i]));
    assert_string_equal(kp_core_termination_mode(kp_nodeclaim_view(g)), "graceful");
    assert_string_equal(kp_core_termination_mode(kp_nodeclaim_view(f)), "forceful");
    assert_string_equal(kp_core_termination_mode(kp_nodeclaim_view(e)), "eventual");

    memset(msg, 'a', 300);
    msg[300] = '\0';
    t = kp_lifecycle_truncate(msg);
    assert_string_equal(t, msg); /* 300 is kept whole */
    kp_free(t);
    /* A cut that would split "é" backs up to the character before it. */
    msg[299] = '\xc3';
    msg[300] = '\xa9';
    msg[301] = '\0';
    t = kp_lifecycle_truncate(msg);
    assert_int_equal(strlen(t), 299 + 3);
    assert_string_equal(t + 299, "...");
    kp_free(t);
    t = kp_lifecycle_truncate(NULL);
    assert_string_equal(t, "");
    kp_free(t);
    kp_entry_unref(e);
    kp_entry_unref(f);
    kp_entry_unref(g);
}

static char *dump(const json_t *j)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    char *s;

    assert_int_equal(kp_json_dump(j, KP_JSON_SORT_KEYS, &b), 0);
    s = kp_strdup(kp_buf_str(&b));
    kp_buf_done(&b);
    return s;
}

static void test_node_patch(void **state)
{
    struct kp_entry *c = claim(&(struct ncopt){
        .pid = "fake://nc",
        .labels = "\"a\":\"claim\"",
        .annotations = "\"x/y\":\"1\"",
        .taints = "{\"key\":\"t/a\",\"effect\":\"NoSchedule\"},{\"key\":\"t/b\",\"value\":\"v\","
                  "\"effect\":\"NoExecute\"}",
        .startup = "{\"key\":\"s/x\",\"effect\":\"NoSchedule\"}"});
    struct kp_entry *n = node(&(struct nodeopt){
        .labels = "\"a\":\"node\",\"keep\":\"1\"",
        .taints = UNREG_TAINT ",{\"key\":\"t/a\",\"value\":\"old\",\"effect\":\"NoSchedule\"}",
        .owners = "{\"apiVersion\":\"v1\",\"kind\":\"X\",\"name\":\"o\",\"uid\":\"ou\","
                  "\"controller\":true}"});
    struct kp_entry *nosync = node(&(struct nodeopt){
        .labels = "\"karpenter.sh/do-not-sync-taints\":\"true\"", .taints = UNREG_TAINT});
    struct kp_entry *nosync_ann = node(&(struct nodeopt){
        .annotations = "\"karpenter.sh/do-not-sync-taints\":\"true\",\"other/ann\":\"x\""});
    json_t *j = NULL;
    char *s;

    (void)state;
    assert_int_equal(kp_lifecycle_node_patch(kp_nodeclaim_view(c), NULL, kp_node_view(n), &j), 0);
    s = dump(j);
    /* Existing taint kept (by key and effect, its value too), the claim's others and its
     * startup taint added, the unregistered taint gone; the claim's label wins; the foreign
     * owner is kept; ours blocks owner deletion. */
    assert_non_null(
        strstr(s, "\"taints\":[{\"effect\":\"NoSchedule\",\"key\":\"t/a\",\"value\":\"old\"},"
                  "{\"effect\":\"NoExecute\",\"key\":\"t/b\",\"value\":\"v\"},"
                  "{\"effect\":\"NoSchedule\",\"key\":\"s/x\"}]"));
    assert_non_null(strstr(s, "\"finalizers\":[\"other/f\",\"karpenter.sh/termination\"]"));
    assert_non_null(strstr(s, "\"labels\":{\"a\":\"claim\",\"karpenter.sh/nodepool\":\"np\","
                              "\"karpenter.sh/registered\":\"true\"}"));
    assert_non_null(strstr(s, "\"annotations\":{\"x/y\":\"1\"}"));
    assert_non_null(strstr(
        s, "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"controller\":true,\"kind\":\"X\","
           "\"name\":\"o\",\"uid\":\"ou\"},{\"apiVersion\":\"karpenter.sh/v1\","
           "\"blockOwnerDeletion\":true,\"kind\":\"NodeClaim\",\"name\":\"nc\",\"uid\":\"u1\"}]"));
    assert_null(strstr(s, "unregistered"));
    kp_free(s);
    kp_json_unref(j);

    /* do-not-sync-taints (the label Karpenter reads, or the annotation): only the unregistered
     * taint goes. */
    assert_int_equal(kp_lifecycle_node_patch(kp_nodeclaim_view(c), NULL, kp_node_view(nosync), &j),
                     0);
    s = dump(j);
    assert_non_null(strstr(s, "\"taints\":[]"));
    kp_free(s);
    kp_json_unref(j);
    assert_int_equal(
        kp_lifecycle_node_patch(kp_nodeclaim_view(c), NULL, kp_node_view(nosync_ann), &j), 0);
    s = dump(j);
    assert_non_null(strstr(s, "\"taints\":[]"));
    kp_free(s);
    kp_json_unref(j);
    /* The Node projection keeps only the karpenter.sh/ annotations. */
    assert_int_equal(kp_node_view(nosync_ann)->annotations.n, 1);

    kp_entry_unref(nosync_ann);
    kp_entry_unref(nosync);
    kp_entry_unref(n);
    kp_entry_unref(c);
}

static void test_launch_and_status_patch(void **state)
{
    struct kp_entry *c = claim(&(struct ncopt){.finalizer = true,
                                               .labels = "\"topology.kubernetes.io/zone\":\"z1\"",
                                               .annotations = "\"a/hash\":\"old\""});
    struct kp_entry *same =
        claim(&(struct ncopt){.finalizer = true,
                              .labels = "\"topology.kubernetes.io/zone\":\"z1\","
                                        "\"node.kubernetes.io/instance-type\":\"small\","
                                        "\"test.kpssh.dev/fakenodeclass\":\"c\"",
                              .annotations = "\"a/hash\":\"new\""});
    struct kp_provider_instance in;
    struct plan p = {0};
    json_t *j = NULL;
    char *s;

    (void)state;
    instance(&in, "fake://nc");
    assert_int_equal(kp_lifecycle_launch_patch(kp_nodeclaim_view(c), &in, &j), 0);
    s = dump(j);
    /* The claim's own zone wins; the provider's instance type and annotation are taken; the
     * NodeClass label is stamped (it tells our Nodes from another Karpenter's). */
    assert_string_equal(s, "{\"metadata\":{\"annotations\":{\"a/hash\":\"new\"},\"labels\":{"
                           "\"node.kubernetes.io/instance-type\":\"small\","
                           "\"test.kpssh.dev/fakenodeclass\":\"c\"}}}");
    kp_free(s);
    kp_json_unref(j);
    assert_int_equal(kp_lifecycle_launch_patch(kp_nodeclaim_view(same), &in, &j), 0);
    assert_null(j); /* nothing to change */

    /* Launched and registered in one reconcile: the Node gets the launch's labels and
     * annotations from the launch itself (they reach the claim only at the reconcile's end). */
    {
        struct kp_entry *n = node(&(struct nodeopt){0});

        assert_int_equal(kp_lifecycle_node_patch(kp_nodeclaim_view(c), &in, kp_node_view(n), &j),
                         0);
        s = dump(j);
        assert_non_null(strstr(s, "\"node.kubernetes.io/instance-type\":\"small\""));
        assert_non_null(strstr(s, "\"test.kpssh.dev/fakenodeclass\":\"c\""));
        assert_non_null(strstr(s, "\"topology.kubernetes.io/zone\":\"z1\""));
        assert_non_null(strstr(s, "\"a/hash\":\"new\""));
        kp_free(s);
        kp_json_unref(j);
        assert_int_equal(kp_lifecycle_node_patch(kp_nodeclaim_view(c), NULL, kp_node_view(n), &j),
                         0);
        s = dump(j);
        assert_null(strstr(s, "fakenodeclass")); /* without the launch: the claim's alone */
        kp_free(s);
        kp_json_unref(j);
        kp_entry_unref(n);
    }

    plan(&p, c, NULL, 0);
    p.in.launched = &in;
    replan(&p);
    assert_int_equal(kp_lifecycle_status_patch(&p.a, &in, &j), 0);
    s = dump(j);
    assert_non_null(strstr(s, "\"providerID\":\"fake://nc\""));
    assert_non_null(strstr(s, "\"capacity\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}"));
    assert_null(strstr(s, "allocatable")); /* none reported: left out */
    assert_non_null(strstr(s, "\"type\":\"Launched\""));
    assert_null(strstr(s, "nodeName"));
    kp_free(s);
    kp_json_unref(j);
    kp_lifecycle_action_done(&p.a);
    kp_provider_instance_done(&in);
    kp_entry_unref(same);
    kp_entry_unref(c);
}

/* --- the executor, up to its first write ------------------------------------------------------------ */

static int64_t fake_now;
static uint64_t now_fn(void)
{
    return (uint64_t)fake_now;
}

struct counts {
    unsigned disrupted, terminated, nodes_created;
    unsigned outcomes, registered;
    char outcome_pool_uid[64], outcome_reason[64];
    bool outcome_launched;
};

static void outcome_cb(void *ctx, const struct kp_lifecycle_outcome *o)
{
    struct counts *k = ctx;

    k->outcomes++;
    k->registered += o->registered;
    k->outcome_launched = o->launched;
    (void)snprintf(k->outcome_pool_uid, sizeof(k->outcome_pool_uid), "%s",
                   o->nodepool_uid ? o->nodepool_uid : "");
    (void)snprintf(k->outcome_reason, sizeof(k->outcome_reason), "%s", o->reason ? o->reason : "");
}
static void count_cb(void *ctx, enum kp_core_metric m, const char *const *labels)
{
    struct counts *k = ctx;

    (void)labels;
    if (m == KP_CM_NODECLAIMS_DISRUPTED)
        k->disrupted++;
    else if (m == KP_CM_NODECLAIMS_TERMINATED)
        k->terminated++;
    else if (m == KP_CM_NODES_CREATED)
        k->nodes_created++;
}

static struct {
    struct kp_client *c;
    struct kp_registry *reg;
    struct kp_informer *claims, *nodes;
    struct kp_fake_provider *fp;
    struct kp_provider prov;
    struct counts counts;
    struct kp_core_observer obs;
    struct kp_core_env env;
    struct kp_lifecycle_controller *ctl;
    int log_fd;
} X;

static void add_type(struct kp_instance_types *t)
{
    struct kp_instance_type *it;
    const char *name = "small", *zone = "z1", *ct = "on-demand";

    t->v = kp_calloc(1, sizeof(*t->v));
    assert_non_null(t->v);
    t->n = 1;
    it = &t->v[0];
    it->name = kp_strdup(name);
    assert_int_equal(kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, &name, 1, 0), 0);
    assert_int_equal(kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, &zone, 1, 0), 0);
    assert_int_equal(kp_provider_res_add(&it->capacity, &it->n_capacity, "cpu", 4000), 0);
    it->offerings = kp_calloc(1, sizeof(*it->offerings));
    assert_non_null(it->offerings);
    it->n_offerings = 1;
    assert_int_equal(kp_reqset_add(&it->offerings[0].reqs, KP_LABEL_ZONE, KP_SEL_IN, &zone, 1, 0),
                     0);
    assert_int_equal(
        kp_reqset_add(&it->offerings[0].reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1, 0), 0);
    it->offerings[0].available = true;
}

static int setup(void **state)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};
    struct kp_instance_types t = {0};

    (void)state;
    memset(&X, 0, sizeof(X));
    X.log_fd = kp_test_log_quiet();
    fake_now = t0_usec() + SEC;
    assert_int_equal(kp_client_new(&to, &X.c), 0);
    assert_int_equal(kp_registry_new(X.c, &X.reg), 0);
    assert_int_equal(kp_informers_nodeclaims(X.reg, &X.claims), 0);
    assert_int_equal(kp_informers_nodes(X.reg, &X.nodes), 0);
    assert_int_equal(kp_fake_provider_new(&X.fp), 0);
    add_type(&t);
    assert_int_equal(kp_fake_provider_publish(X.fp, &t), 0);
    X.prov = kp_fake_provider_as_provider(X.fp);
    X.obs = (struct kp_core_observer){.count = count_cb, .ctx = &X.counts};
    X.env = (struct kp_core_env){.client = X.c,
                                 .informers = X.reg,
                                 .provider = &X.prov,
                                 .observer = &X.obs,
                                 .workers = 2,
                                 .now_usec = now_fn};
    assert_int_equal(kp_lifecycle_controller_new(&X.env, &X.ctl), 0);
    kp_lifecycle_controller_on_outcome(X.ctl, outcome_cb, &X.counts);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    X.ctl = kp_lifecycle_controller_free(X.ctl);
    X.reg = kp_registry_free(X.reg);
    X.c = kp_client_free(X.c);
    X.fp = kp_fake_provider_free(X.fp);
    kp_test_log_restore(X.log_fd);
    return 0;
}

static void put(struct kp_informer *inf, struct kp_entry *e)
{
    assert_int_equal(kp_store_put(kp_informer_store(inf), e, NULL), 0);
}

static int reconcile(const struct kp_ctx *cx, uint64_t *requeue)
{
    return kp_lifecycle_reconcile(X.ctl, X.c, cx, "nc", requeue);
}

static void test_exec_launch_cached(void **state)
{
    const struct kp_fake_provider_calls *calls = kp_fake_provider_calls(X.fp);
    uint64_t requeue = 0;

    (void)state;
    put(X.claims, claim(&(struct ncopt){.finalizer = true}));
    /* Launched, then the status write fails (no server): the launch is remembered. */
    assert_true(reconcile(NULL, &requeue) < 0);
    assert_int_equal(atomic_load(&calls->create), 1);
    assert_int_equal(kp_fake_provider_instances(X.fp), 1);
    /* The retry writes from the cache: no second Create. */
    assert_true(reconcile(NULL, &requeue) < 0);
    assert_int_equal(atomic_load(&calls->create), 1);

    /* Deleted before the status ever said Launched: the instance is released all the same. */
    put(X.claims, claim(&(struct ncopt){.finalizer = true, .deletion = "2026-01-01T00:00:01Z"}));
    assert_true(reconcile(NULL, &requeue) < 0); /* InstanceTerminating's write fails */
    assert_int_equal(atomic_load(&calls->delete), 1);
    assert_int_equal(kp_fake_provider_instances(X.fp), 0);
    (void)state;
}

static void test_exec_not_ours_and_cancelled(void **state)
{
    const struct kp_fake_provider_calls *calls = kp_fake_provider_calls(X.fp);
    struct kp_ctx cancelled;
    uint64_t requeue = 7;

    (void)state;
    assert_int_equal(reconcile(NULL, &requeue), 0); /* no such claim */
    assert_int_equal(requeue, 0);
    put(X.claims, claim(&(struct ncopt){.finalizer = true, .group = "other.example.com"}));
    assert_int_equal(reconcile(NULL, &requeue), 0);
    put(X.claims,
        claim(&(struct ncopt){
            .finalizer = true, .group = "other.example.com", .deletion = "2026-01-01T00:00:01Z"}));
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(atomic_load(&calls->create) + atomic_load(&calls->delete), 0);

    kp_ctx_init(&cancelled, NULL, kp_deadline_never());
    kp_ctx_cancel(&cancelled);
    put(X.claims, claim(&(struct ncopt){.finalizer = true}));
    assert_int_equal(reconcile(&cancelled, &requeue), -ECANCELED);
    assert_int_equal(atomic_load(&calls->create), 0);
}

static void test_exec_insufficient_capacity(void **state)
{
    const struct kp_fake_provider_calls *calls = kp_fake_provider_calls(X.fp);
    uint64_t requeue = 0;

    (void)state;
    put(X.claims, claim(&(struct ncopt){.finalizer = true}));
    kp_fake_provider_fail_next_create(X.fp, -ENOSPC, KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY, NULL);
    /* The delete cannot reach the server: not counted as disrupted. */
    assert_true(reconcile(NULL, &requeue) < 0);
    assert_int_equal(atomic_load(&calls->create), 1);
    assert_int_equal(X.counts.disrupted, 0);
    assert_int_equal(kp_fake_provider_instances(X.fp), 0);
}

static void test_setup_rollback(void **state)
{
    struct kp_lifecycle_controller *ctl = NULL;
    size_t before = kp_informer_handler_count(X.nodes) + kp_informer_handler_count(X.claims);
    struct kp_core_env bad = X.env;

    (void)state;
    assert_int_equal(kp_lifecycle_controller_new(&X.env, &ctl), 0);
    assert_true(kp_informer_handler_count(X.nodes) + kp_informer_handler_count(X.claims) > before);
    assert_false(kp_lifecycle_controller_ready(ctl));
    ctl = kp_lifecycle_controller_free(ctl);
    assert_null(ctl);
    assert_int_equal(kp_informer_handler_count(X.nodes) + kp_informer_handler_count(X.claims),
                     before);
    bad.provider = NULL;
    assert_int_equal(kp_lifecycle_controller_new(&bad, &ctl), -EINVAL);
    assert_null(kp_lifecycle_controller_free(NULL));
    kp_lifecycle_controller_stop(NULL);
    assert_false(kp_lifecycle_controller_ready(NULL));
}

/* --- the executor against a scripted API server --------------------------------------------------
 * A loopback HTTP/1.1 server that answers requests in order from a script of (status, body) and
 * records each request as "METHOD path body". Every answer closes its connection, so the order
 * is exact. Enough of the API server for the executor's writes; what a real server does beyond
 * that is the integration tier's. */

#define API_MAX 16

struct api {
    int fd;
    uint16_t port;
    pthread_t th;
    atomic_bool stop;
    pthread_mutex_t mu;
    int status[API_MAX];
    char *body[API_MAX];
    size_t n_script, next;
    char *req[API_MAX];
    size_t n_req;
};

/* Reads one request (headers and a Content-Length body) from fd into a new string. */
static char *read_request(int fd)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    char chunk[4096], *out = NULL;
    size_t need = 0;
    bool headers = false;

    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        const char *end, *cl;

        if (n <= 0 || kp_buf_append(&b, chunk, (size_t)n) < 0)
            break;
        if (!headers && (end = strstr(kp_buf_str(&b), "\r\n\r\n"))) {
            headers = true;
            cl = strcasestr(kp_buf_str(&b), "\r\nContent-Length:");
            need = (size_t)(end - kp_buf_str(&b)) + 4;
            if (cl && cl < end)
                need += (size_t)strtoul(cl + 17, NULL, 10);
        }
        if (headers && b.len >= need)
            break;
    }
    if (headers)
        out = kp_strdup(kp_buf_str(&b));
    kp_buf_done(&b);
    return out;
}

/* "METHOD path body" of a raw request. */
static char *summarise(const char *raw)
{
    const char *sp1 = strchr(raw, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    const char *body = strstr(raw, "\r\n\r\n");
    char *path, *out;

    if (!sp1 || !sp2 || !body)
        return kp_strdup("?");
    path = kp_strndup(raw, (size_t)(sp2 - raw));
    out = kp_strjoin(path ? path : "?", " ", body + 4, (const char *)NULL);
    kp_free(path);
    return out;
}

static void *api_main(void *arg)
{
    struct api *a = arg;

    while (!atomic_load(&a->stop)) {
        struct pollfd pfd = {.fd = a->fd, .events = POLLIN};
        char head[256], *raw;
        const char *body;
        int c, status;

        if (poll(&pfd, 1, 50) <= 0)
            continue;
        if ((c = accept4(a->fd, NULL, NULL, SOCK_CLOEXEC)) < 0)
            continue;
        raw = read_request(c);
        pthread_mutex_lock(&a->mu);
        if (raw && a->n_req < API_MAX)
            a->req[a->n_req++] = summarise(raw);
        status = a->next < a->n_script ? a->status[a->next] : 500;
        body = a->next < a->n_script ? a->body[a->next] : "{}";
        a->next++;
        (void)snprintf(head, sizeof(head),
                       "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                       status, strlen(body));
        if (write(c, head, strlen(head)) < 0 || write(c, body, strlen(body)) < 0)
            (void)0; /* the client's error shows in the test */
        pthread_mutex_unlock(&a->mu);
        kp_free(raw);
        close(c);
    }
    return NULL;
}

static void api_start(struct api *a)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);

    memset(a, 0, sizeof(*a));
    pthread_mutex_init(&a->mu, NULL);
    a->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(a->fd >= 0);
    assert_int_equal(bind(a->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(a->fd, 8), 0);
    assert_int_equal(getsockname(a->fd, (struct sockaddr *)&sin, &len), 0);
    a->port = ntohs(sin.sin_port);
    assert_int_equal(pthread_create(&a->th, NULL, api_main, a), 0);
}

/* The next answer: status and body (copied). */
static void api_answer(struct api *a, int status, const char *body)
{
    pthread_mutex_lock(&a->mu);
    assert_true(a->n_script < API_MAX);
    a->status[a->n_script] = status;
    a->body[a->n_script++] = kp_strdup(body);
    pthread_mutex_unlock(&a->mu);
}

/* Request i ("METHOD path body"); cmocka-fails when there are not that many. */
static const char *api_req(struct api *a, size_t i)
{
    const char *r;

    pthread_mutex_lock(&a->mu);
    r = i < a->n_req ? a->req[i] : NULL;
    pthread_mutex_unlock(&a->mu);
    if (!r)
        fail_msg("no request %zu", i);
    return r;
}

static size_t api_count(struct api *a)
{
    size_t n;

    pthread_mutex_lock(&a->mu);
    n = a->n_req;
    pthread_mutex_unlock(&a->mu);
    return n;
}

static void api_stop(struct api *a)
{
    atomic_store(&a->stop, true);
    pthread_join(a->th, NULL);
    close(a->fd);
    for (size_t i = 0; i < a->n_script; i++)
        kp_free(a->body[i]);
    for (size_t i = 0; i < a->n_req; i++)
        kp_free(a->req[i]);
    pthread_mutex_destroy(&a->mu);
}

static struct api A;

/* The fixture of setup(), with the client pointed at A. */
static int setup_api(void **state)
{
    api_start(&A);
    setup(state);
    X.c = kp_client_free(X.c);
    {
        char url[64];
        struct kp_transport_opts to = {.server = url, .allow_plain_http = true};

        (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)A.port);
        assert_int_equal(kp_client_new(&to, &X.c), 0);
    }
    return 0;
}

static int teardown_api(void **state)
{
    teardown(state);
    api_stop(&A);
    return 0;
}

static void expect_req(size_t i, const char *method_path, const char *needle)
{
    const char *r = api_req(&A, i);

    if (!kp_startswith(r, method_path) || (needle && !strstr(r, needle)))
        fail_msg("request %zu: want %s ... %s, have %s", i, method_path, needle ? needle : "", r);
}

#define NC_PATH "/apis/karpenter.sh/v1/nodeclaims/nc"

static void test_api_launch(void **state)
{
    char body[8192];
    uint64_t requeue = 0;

    (void)state;
    put(X.claims, claim(&(struct ncopt){.finalizer = true}));
    /* The metadata patch answers the claim at rv 8, which the status write must carry. */
    claim_json(&(struct ncopt){.finalizer = true}, "8", body, sizeof(body));
    api_answer(&A, 200, body);
    api_answer(&A, 200, body);
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(api_count(&A), 2);
    expect_req(0, "PATCH " NC_PATH " ", "\"resourceVersion\":\"7\"");
    expect_req(0, "PATCH " NC_PATH " ", "\"topology.kubernetes.io/zone\":\"z1\"");
    expect_req(1, "PATCH " NC_PATH "/status ", "\"resourceVersion\":\"8\"");
    expect_req(1, "PATCH " NC_PATH "/status ", "\"providerID\":\"fake://nc\"");
    expect_req(1, "PATCH " NC_PATH "/status ", "\"type\":\"Launched\",\"status\":\"True\"");
    assert_int_equal(requeue, 15 * 60 * SEC); /* the registration TTL */
}

static void test_api_launch_deadline(void **state)
{
    struct kp_ctx cx;
    uint64_t requeue = 0;

    (void)state;
    put(X.claims, claim(&(struct ncopt){.finalizer = true}));
    /* The launch outlives the reconcile's deadline: a failed launch, written as such. */
    kp_fake_provider_set_create_delay(X.fp, 30 * SEC);
    kp_ctx_init(&cx, NULL, kp_deadline_in(300 * 1000));
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(&cx, &requeue), -ETIMEDOUT);
    assert_int_equal(api_count(&A), 1);
    expect_req(0, "PATCH " NC_PATH "/status ",
               "\"type\":\"Launched\",\"status\":\"Unknown\",\"reason\":\"LaunchFailed\"");
    assert_int_equal(kp_fake_provider_instances(X.fp), 0);
}

/* A launched, registered claim being deleted (at T0 + 1 s), whose instance the fake provider
 * holds and whose Node n1 (created at T0) is still there. */
static void put_deleting_claim(void)
{
    struct kp_provider_instance in = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_entry *launch = claim(&(struct ncopt){.finalizer = true});

    assert_int_equal(
        X.prov.ops->create(X.prov.self, NULL, NULL, kp_nodeclaim_view(launch), &in, &err), 0);
    kp_provider_instance_done(&in);
    kp_provider_err_done(&err);
    kp_entry_unref(launch);
    put(X.claims, claim(&(struct ncopt){.finalizer = true,
                                        .pid = "fake://nc",
                                        .deletion = "2026-01-01T00:00:01Z",
                                        .conds = LAUNCHED "," REGISTERED}));
    put(X.nodes, node(&(struct nodeopt){0}));
}

/* A provider that launches on its own threads (the SSH provider's launch pool): IN_PROGRESS
 * writes and counts nothing and comes back after the poll; the provider's notice reaches the
 * controller (watch_progress), and the Create it brings launches as usual. */
static void test_api_launch_in_progress(void **state)
{
    const struct kp_fake_provider_calls *calls = kp_fake_provider_calls(X.fp);
    char body[8192];
    uint64_t requeue = 0;

    (void)state;
    put(X.claims, claim(&(struct ncopt){.finalizer = true}));
    kp_fake_provider_fail_next_create(X.fp, -EINPROGRESS, KP_PROVIDER_ERR_IN_PROGRESS, NULL);
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(atomic_load(&calls->create), 1);
    assert_int_equal(api_count(&A), 0);
    assert_int_equal(requeue, KP_PROVIDER_PROGRESS_POLL_USEC);
    assert_int_equal(kp_fake_provider_instances(X.fp), 0);
    assert_int_equal(X.counts.disrupted, 0);
    assert_int_equal(kp_fake_provider_progress(X.fp, "nc"), 1);

    claim_json(&(struct ncopt){.finalizer = true}, "8", body, sizeof(body));
    api_answer(&A, 200, body);
    api_answer(&A, 200, body);
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(atomic_load(&calls->create), 2);
    assert_int_equal(api_count(&A), 2);
    expect_req(1, "PATCH " NC_PATH "/status ", "\"type\":\"Launched\",\"status\":\"True\"");

    /* Freed, the controller is no longer told. */
    X.ctl = kp_lifecycle_controller_free(X.ctl);
    assert_int_equal(kp_fake_provider_progress(X.fp, "nc"), 0);
}

/* A providerID names a host: once a deleting claim's leave released the host, the next claim's
 * join registers a Node with the same providerID before that claim has made it its own. The
 * deleting claim deletes only Nodes the API server created before its deletion. */
static void test_api_delete_spares_next_node(void **state)
{
    const struct kp_fake_provider_calls *calls = kp_fake_provider_calls(X.fp);
    uint64_t requeue = 0;

    (void)state;
    put_deleting_claim();
    put(X.nodes, node(&(struct nodeopt){.name = "next", .created = "2026-01-01T00:00:09Z"}));
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(api_count(&A), 1);
    expect_req(0, "DELETE /api/v1/nodes/n1 ", "\"uid\":\"nu-n1\"");
    /* Its own Node gone, the next claim's is not waited for: the instance is released. */
    assert_int_equal(kp_store_delete(kp_informer_store(X.nodes), "n1", NULL), 0);
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(api_count(&A), 2);
    expect_req(1, "PATCH " NC_PATH "/status ", "\"InstanceTerminating\",\"status\":\"True\"");
    assert_int_equal(atomic_load(&calls->delete), 1);
}

static void test_api_register(void **state)
{
    uint64_t requeue = 0;

    (void)state;
    put(X.claims, claim(&(struct ncopt){.finalizer = true,
                                        .pid = "fake://nc",
                                        .labels = "\"topology.kubernetes.io/zone\":\"z1\"",
                                        .conds = LAUNCHED,
                                        .owned = true}));
    put(X.nodes, node(&(struct nodeopt){.taints = UNREG_TAINT}));
    /* A lost status race: the Node is synced, nothing is counted. */
    api_answer(&A, 200, "{}");
    api_answer(&A, 409, "{\"kind\":\"Status\",\"code\":409,\"reason\":\"Conflict\"}");
    assert_int_equal(reconcile(NULL, &requeue), -KP_ECONFLICT);
    expect_req(0, "PATCH /api/v1/nodes/n1 ", "\"resourceVersion\":\"3\"");
    expect_req(0, "PATCH /api/v1/nodes/n1 ", "\"karpenter.sh/registered\":\"true\"");
    expect_req(1, "PATCH " NC_PATH "/status ", "\"nodeName\":\"n1\"");
    assert_int_equal(X.counts.nodes_created, 0);
    /* Again: this time the status write goes through, and the Node is counted once. */
    api_answer(&A, 200, "{}");
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(api_count(&A), 4);
    expect_req(3, "PATCH " NC_PATH "/status ", "\"type\":\"Registered\",\"status\":\"True\"");
    assert_int_equal(X.counts.nodes_created, 1);
    /* The NodePool's registration health hears of it once, with the owner's uid. */
    assert_int_equal(X.counts.outcomes, 1);
    assert_int_equal(X.counts.registered, 1);
    assert_string_equal(X.counts.outcome_pool_uid, "npu");
}

static void test_api_timeout_outcome(void **state)
{
    uint64_t requeue = 0;

    (void)state;
    /* Never launched, 5 minutes on: deleted for launch_timeout, reported with Launched's
     * reason for the NodePool's condition. */
    fake_now = t0_usec() + 5 * 60 * SEC;
    put(X.claims,
        claim(&(struct ncopt){
            .finalizer = true, .owned = true, .conds = COND("Launched", "Unknown", "JoinFailed")}));
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    expect_req(0, "DELETE " NC_PATH " ", "\"uid\":\"u1\"");
    assert_int_equal(X.counts.disrupted, 1);
    assert_int_equal(X.counts.outcomes, 1);
    assert_int_equal(X.counts.registered, 0);
    assert_false(X.counts.outcome_launched);
    assert_string_equal(X.counts.outcome_reason, "JoinFailed");
    assert_int_equal(atomic_load(&kp_fake_provider_calls(X.fp)->create), 0);
}

/* The same claim deleted meanwhile by someone else (404): done, and nothing counted, since
 * Karpenter ignores NotFound before its metrics. */
static void test_api_timeout_gone(void **state)
{
    uint64_t requeue = 0;

    (void)state;
    fake_now = t0_usec() + 5 * 60 * SEC;
    put(X.claims,
        claim(&(struct ncopt){
            .finalizer = true, .owned = true, .conds = COND("Launched", "Unknown", "JoinFailed")}));
    api_answer(&A, 404, "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    expect_req(0, "DELETE " NC_PATH " ", "\"uid\":\"u1\"");
    assert_int_equal(X.counts.disrupted, 0);
    assert_int_equal(X.counts.outcomes, 0);
}

static void test_api_insufficient_capacity(void **state)
{
    const struct kp_fake_provider_calls *calls = kp_fake_provider_calls(X.fp);
    uint64_t requeue = 0;

    (void)state;
    put(X.claims, claim(&(struct ncopt){.finalizer = true}));
    kp_fake_provider_fail_next_create(X.fp, -ENOSPC, KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY, NULL);
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(api_count(&A), 1);
    expect_req(0, "DELETE " NC_PATH " ", "\"uid\":\"u1\"");
    assert_int_equal(X.counts.disrupted, 1);
    assert_int_equal(X.counts.outcomes, 0); /* not a registration outcome */
    /* The cache has not seen the deletion yet (an earlier write's event came first): held,
     * no second launch, nothing counted twice. */
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(requeue, 1000000);
    assert_int_equal(atomic_load(&calls->create), 1);
    assert_int_equal(X.counts.disrupted, 1);
    /* Once it has, the deletion path runs (the un-launched claim's Delete, then the finalizer). */
    put(X.claims, claim(&(struct ncopt){.finalizer = true, .deletion = "2026-01-01T00:00:01Z"}));
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    assert_int_equal(atomic_load(&calls->delete), 1);
    expect_req(1, "PATCH " NC_PATH " ", "\"finalizers\":[]");
    assert_int_equal(X.counts.terminated, 1);
}

static void test_api_delete(void **state)
{
    const struct kp_fake_provider_calls *calls = kp_fake_provider_calls(X.fp);
    uint64_t requeue = 0;

    (void)state;
    /* The instance exists (launched earlier); the claim is deleted with a live Node. */
    put_deleting_claim();
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    expect_req(0, "DELETE /api/v1/nodes/n1 ", "\"uid\":\"nu-n1\"");
    assert_int_equal(atomic_load(&calls->delete), 0); /* Nodes first */
    /* The Node is gone: Delete releases the instance, InstanceTerminating is written. */
    assert_int_equal(kp_store_delete(kp_informer_store(X.nodes), "n1", NULL), 0);
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    expect_req(1, "PATCH " NC_PATH "/status ", "\"InstanceTerminating\",\"status\":\"True\"");
    assert_int_equal(requeue, 5 * SEC);
    assert_int_equal(kp_fake_provider_instances(X.fp), 0);
    /* Then NotFound: the finalizer goes, and the claim is counted as terminated. */
    api_answer(&A, 200, "{}");
    assert_int_equal(reconcile(NULL, &requeue), 0);
    expect_req(2, "PATCH " NC_PATH " ", "\"finalizers\":[]");
    assert_int_equal(X.counts.terminated, 1);
    assert_int_equal(atomic_load(&calls->delete), 2);
}

/* --- torture: every allocation of a launch-to-registration pass may fail ------------------------- */

static int torture_plan_and_bodies(void)
{
    char buf[8192];
    const char *nj = "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\","
                     "\"uid\":\"nu\",\"resourceVersion\":\"3\",\"labels\":{\"a\":\"b\"},"
                     "\"annotations\":{\"karpenter.sh/x\":\"y\"}},\"spec\":{\"providerID\":"
                     "\"fake://nc\",\"taints\":[" UNREG_TAINT "]},\"status\":{\"conditions\":"
                     "[{\"type\":\"Ready\",\"status\":\"True\"}]}}";
    struct kp_entry *c = NULL, *n = NULL;
    struct kp_provider_instance in = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_core_timing t = {0};
    struct kp_lifecycle_in li = {0};
    struct kp_lifecycle_action a = {0};
    const struct kp_node_view *nv[1];
    json_t *j = NULL;
    char *cut = NULL;
    size_t len = claim_json(&(struct ncopt){.finalizer = true,
                                            .labels = "\"x\":\"y\"",
                                            .annotations = "\"a/b\":\"c\"",
                                            .taints = "{\"key\":\"t\",\"effect\":\"NoSchedule\"}",
                                            .startup = "{\"key\":\"s\",\"effect\":\"NoSchedule\"}"},
                            "7", buf, sizeof(buf));
    int r;

    kp_core_timing_defaults(&t);
    if ((r = kp_nodeclaim_decode(buf, len, &c)) < 0 || (r = kp_node_decode(nj, strlen(nj), &n)) < 0)
        goto out;
    in.provider_id = kp_strdup("fake://nc");
    if (!in.provider_id ||
        (r = kp_provider_kv_add(&in.labels, &in.n_labels, KP_LABEL_ZONE, "z")) < 0 ||
        (r = kp_provider_kv_add(&in.annotations, &in.n_annotations, "h/v", "1")) < 0 ||
        (r = kp_provider_res_add(&in.capacity, &in.n_capacity, "memory", 1024000)) < 0) {
        r = r < 0 ? r : -ENOMEM;
        goto out;
    }
    nv[0] = kp_node_view(n);
    li = (struct kp_lifecycle_in){.nc = kp_nodeclaim_view(c),
                                  .nodes = nv,
                                  .n_nodes = 1,
                                  .now_usec = t0_usec_quiet(),
                                  .timing = &t};
    /* A failed launch, a launch, a registration: each plan allocates conditions. */
    if ((r = kp_provider_err_set(&err, -5, KP_PROVIDER_ERR_CREATE, "JoinFailed", "%s", "x")) != -5)
        goto out;
    li.create_err = &err;
    if ((r = kp_lifecycle_plan(&li, &a)) < 0)
        goto out;
    kp_lifecycle_action_done(&a);
    li.create_err = NULL;
    li.launched = &in;
    li.node_synced = true;
    if ((r = kp_lifecycle_plan(&li, &a)) < 0 || (r = kp_lifecycle_status_patch(&a, &in, &j)) < 0)
        goto out;
    kp_json_unref(j);
    j = NULL;
    if ((r = kp_lifecycle_launch_patch(li.nc, &in, &j)) < 0)
        goto out;
    kp_json_unref(j);
    j = NULL;
    if ((r = kp_lifecycle_node_patch(li.nc, NULL, nv[0], &j)) < 0)
        goto out;
    memset(buf, 'm', 400);
    buf[400] = '\0';
    r = (cut = kp_lifecycle_truncate(buf)) ? 0 : -ENOMEM;
out:
    kp_free(cut);
    kp_json_unref(j);
    kp_lifecycle_action_done(&a);
    kp_provider_err_done(&err);
    kp_provider_instance_done(&in);
    kp_entry_unref(n);
    kp_entry_unref(c);
    return r < 0 ? r : 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finalizer_first),
        cmocka_unit_test(test_launch),
        cmocka_unit_test(test_launch_errors),
        cmocka_unit_test(test_launch_timeout),
        cmocka_unit_test(test_registration_ttl),
        cmocka_unit_test(test_register),
        cmocka_unit_test(test_initialize),
        cmocka_unit_test(test_steady_and_generation),
        cmocka_unit_test(test_finalize),
        cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_node_patch),
        cmocka_unit_test(test_launch_and_status_patch),
        cmocka_unit_test_setup_teardown(test_exec_launch_cached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_not_ours_and_cancelled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_insufficient_capacity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setup_rollback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_launch, setup_api, teardown_api),
        cmocka_unit_test_setup_teardown(test_api_launch_deadline, setup_api, teardown_api),
        cmocka_unit_test_setup_teardown(test_api_launch_in_progress, setup_api, teardown_api),
        cmocka_unit_test_setup_teardown(test_api_register, setup_api, teardown_api),
        cmocka_unit_test_setup_teardown(test_api_timeout_outcome, setup_api, teardown_api),
        cmocka_unit_test_setup_teardown(test_api_timeout_gone, setup_api, teardown_api),
        cmocka_unit_test_setup_teardown(test_api_insufficient_capacity, setup_api, teardown_api),
        cmocka_unit_test_setup_teardown(test_api_delete, setup_api, teardown_api),
        cmocka_unit_test_setup_teardown(test_api_delete_spares_next_node, setup_api, teardown_api),
    };

    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_plan_and_bodies),
    };

    return kp_test_main("lifecycle", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
