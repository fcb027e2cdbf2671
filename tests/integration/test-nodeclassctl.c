/* tests/integration/test-nodeclassctl.c: the SSHNodeClass controller and the startup taint gate
 * (provider/ssh/nodeclassctl.h, taintgate.h) running against the lab's real kube-apiserver with
 * our CRDs and karpenter.sh/v1's from deploy/crds. No SSH and no kubelet: SSHHosts, NodeClaims,
 * Nodes and Pods are written through the API (pod and node status through the status
 * subresource), as their owners would.
 *
 *   readiness  a class naming a missing profile is Ready=False/ProfileNotFound and has the
 *              termination finalizer; creating the profile makes it True; a leave script that
 *              mentions KPSSH_VAR_ makes it ProfileInvalid; a selector matching no host is
 *              NoHosts until a host gets the label; events are written on transitions.
 *   finalizer  deleting a class a NodeClaim references leaves it (deletionTimestamp set) until
 *              the NodeClaim is deleted, then it disappears.
 *   gates      a Node owned by a NodeClaim of a class with two gates keeps both startup taints
 *              while the gates are closed; a Ready pod matching podsReady removes one (event
 *              StartupTaintRemoved on the Node, latency callback), the node condition the other;
 *              a taint not in the NodeClaim's startupTaints stays. */
#include "kp-lab.h"
#include "kp-test.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "k8s/status.h"
#include "provider/ssh/nodeclassctl.h"
#include "provider/ssh/taintgate.h"

#define WAIT_SECONDS 30

static struct {
    struct kp_lab lab;
    char ns[64]; /* the pool namespace, and the pods' */
    char px[32]; /* name prefix of cluster-scoped objects */
    struct kp_client *c;
    struct kp_informer *classes, *profiles, *hosts, *claims, *nodes, *pods;
    struct kp_ssh_nodeclassctl *ncc;
    struct kp_ssh_taintgate *tg;
    atomic_uint opened;
    atomic_ullong opened_usec;
} T;

/* --- helpers ------------------------------------------------------------------------------------- */

static char *name(const char *suffix)
{
    char *s = kp_strjoin(T.px, "-", suffix, (const char *)NULL);

    assert_non_null(s);
    return s;
}

static void create(const struct kp_resource *res, const char *ns, json_t *obj, char **ret_uid)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *out = NULL;
    const char *uid = NULL;

    kp_lab_check(kp_client_create(T.c, res, ns, obj, &out, &e), &e, res->kind);
    if (ret_uid) {
        assert_int_equal(kp_json_path_str(out, "metadata.uid", &uid), 0);
        *ret_uid = kp_strdup(uid);
    }
    kp_error_done(&e);
    kp_json_unref(out);
    kp_json_unref(obj);
}

static void patch(const struct kp_resource *res, const char *ns, const char *n, const char *sub,
                  json_t *p)
{
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_check(kp_client_patch(T.c, res, ns, n, sub, KP_PATCH_MERGE, p, NULL, &e), &e, n);
    kp_error_done(&e);
    kp_json_unref(p);
}

static void del(const struct kp_resource *res, const char *ns, const char *n)
{
    struct kp_error e = KP_ERROR_INIT;
    int r = kp_client_delete(T.c, res, ns, n, NULL, &e);

    if (r != -ENOENT)
        kp_lab_check(r, &e, n);
    kp_error_done(&e);
}

static json_t *get(const struct kp_resource *res, const char *ns, const char *n)
{
    json_t *o = NULL;
    int r = kp_client_get(T.c, res, ns, n, &o, NULL);

    if (r == -ENOENT)
        return NULL;
    assert_int_equal(r, 0);
    return o;
}

static void profile(const char *n, const char *leave)
{
    create(&KP_RES_SSHJOINPROFILE, NULL,
           kp_lab_json("{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":"
                       "\"SSHJoinProfile\",\"metadata\":{\"name\":\"%s\"},\"spec\":{\"scripts\":{"
                       "\"install\":\"true\\n\",\"join\":\"true\\n\",\"leave\":\"%s\"}}}",
                       n, leave),
           NULL);
}

/* A class selecting hosts labelled kpssh-test=<sel>; gates: JSON text of startupTaintGates. */
static void nodeclass(const char *n, const char *prof, const char *sel, const char *gates)
{
    create(&KP_RES_SSHNODECLASS, NULL,
           kp_lab_json("{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHNodeClass\","
                       "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"joinProfileRef\":{\"name\":"
                       "\"%s\"},\"hostSelector\":{\"matchLabels\":{\"kpssh-test\":\"%s\"}}%s%s}}",
                       n, prof, sel, gates ? ",\"startupTaintGates\":" : "", gates ? gates : ""),
           NULL);
}

static void sshhost(const char *n, const char *label)
{
    create(&KP_RES_SSHHOST, T.ns,
           kp_lab_json("{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHHost\","
                       "\"metadata\":{\"name\":\"%s\",\"labels\":{\"kpssh-test\":\"%s\"}},"
                       "\"spec\":{\"address\":\"10.213.250.1\",\"sshKeySecretRef\":{\"name\":"
                       "\"k\"},\"capacity\":{\"cpu\":\"2\",\"memory\":\"1Gi\"}}}",
                       n, label),
           NULL);
}

static char *nodeclaim(const char *n, const char *cls, const char *startup_taints)
{
    char *uid = NULL;

    create(&KP_RES_NODECLAIM, NULL,
           kp_lab_json("{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":"
                       "{\"name\":\"%s\"},\"spec\":{\"nodeClassRef\":{\"group\":"
                       "\"karpenter.kpssh.dev\",\"kind\":\"SSHNodeClass\",\"name\":\"%s\"},"
                       "\"requirements\":[{\"key\":\"kubernetes.io/arch\",\"operator\":\"In\","
                       "\"values\":[\"amd64\"]}]%s%s}}",
                       n, cls, startup_taints ? ",\"startupTaints\":" : "",
                       startup_taints ? startup_taints : ""),
           &uid);
    return uid;
}

/* The Ready condition's status and reason of class n ("" when absent); NULL when the class is
 * gone. Caller frees. */
static char *ready_of(const char *n, bool *ret_finalizer, bool *ret_deleting)
{
    json_t *o = get(&KP_RES_SSHNODECLASS, NULL, n), *conds = NULL, *fins = NULL;
    char *out;

    if (!o)
        return NULL;
    out = kp_strdup("");
    if (kp_json_path_array(o, "status.conditions", &conds) == 0)
        for (size_t i = 0; i < kp_json_array_size(conds); i++) {
            json_t *c = kp_json_array_at(conds, i);
            const char *type = NULL, *st = NULL, *reason = NULL;

            if (kp_json_get_str(c, "type", &type) == 0 && kp_streq(type, "Ready") &&
                kp_json_get_str(c, "status", &st) == 0 &&
                kp_json_get_str(c, "reason", &reason) == 0) {
                kp_free(out);
                out = kp_strjoin(st, "/", reason, (const char *)NULL);
            }
        }
    if (ret_finalizer) {
        *ret_finalizer = false;
        if (kp_json_path_array(o, "metadata.finalizers", &fins) == 0)
            for (size_t i = 0; i < kp_json_array_size(fins); i++) {
                const char *f = NULL;

                if (kp_json_as_str(kp_json_array_at(fins, i), &f) == 0 &&
                    kp_streq(f, KP_SSH_NODECLASS_FINALIZER))
                    *ret_finalizer = true;
            }
    }
    if (ret_deleting) {
        const char *ts = NULL;

        *ret_deleting = kp_json_path_str(o, "metadata.deletionTimestamp", &ts) == 0;
    }
    kp_json_unref(o);
    assert_non_null(out);
    return out;
}

static void wait_ready(const char *n, const char *want)
{
    char *got = NULL;

    for (int i = 0; i < WAIT_SECONDS * 10; i++) {
        kp_free(got);
        got = ready_of(n, NULL, NULL);
        if (got && strcmp(got, want) == 0) {
            kp_free(got);
            return;
        }
        kp_sleep_usec(100 * 1000);
    }
    fail_msg("class %s: Ready is \"%s\", want \"%s\"", n, got ? got : "(gone)", want);
}

/* Whether Node n still carries a taint with key. */
static bool node_has_taint(const char *n, const char *key)
{
    json_t *o = get(&KP_RES_NODE, NULL, n), *taints = NULL;
    bool found = false;

    assert_non_null(o);
    if (kp_json_path_array(o, "spec.taints", &taints) == 0)
        for (size_t i = 0; i < kp_json_array_size(taints); i++) {
            const char *k = NULL;

            if (kp_json_get_str(kp_json_array_at(taints, i), "key", &k) == 0 && kp_streq(k, key))
                found = true;
        }
    kp_json_unref(o);
    return found;
}

static void wait_taint_gone(const char *n, const char *key)
{
    for (int i = 0; i < WAIT_SECONDS * 10; i++) {
        if (!node_has_taint(n, key))
            return;
        kp_sleep_usec(100 * 1000);
    }
    fail_msg("node %s still has taint %s", n, key);
}

/* Events (events.k8s.io/v1) in ns about object n with reason. */
struct ev_count {
    const char *name, *reason, *controller;
    unsigned n;
};

static int ev_page(const struct kp_list_page *page, void *ud)
{
    struct ev_count *ec = ud;

    for (size_t i = 0; i < kp_json_array_size(page->items); i++) {
        json_t *it = kp_json_array_at(page->items, i);
        const char *n = NULL, *reason = NULL, *ctl = NULL;

        if (kp_json_path_str(it, "regarding.name", &n) == 0 && kp_streq(n, ec->name) &&
            kp_json_get_str(it, "reason", &reason) == 0 && kp_streq(reason, ec->reason) &&
            kp_json_get_str(it, "reportingController", &ctl) == 0 && kp_streq(ctl, ec->controller))
            ec->n++;
    }
    return 0;
}

static void wait_event(const char *ns, const char *n, const char *reason, const char *controller)
{
    static const struct kp_resource events = {.group = "events.k8s.io",
                                              .version = "v1",
                                              .resource = "events",
                                              .namespaced = true,
                                              .kind = "Event"};
    struct ev_count ec = {.name = n, .reason = reason, .controller = controller};

    for (int i = 0; i < WAIT_SECONDS * 5; i++) {
        struct kp_error e = KP_ERROR_INIT;

        ec.n = 0;
        kp_lab_check(kp_client_list(T.c, &events, ns, NULL, ev_page, &ec, NULL, &e), &e,
                     "list events");
        kp_error_done(&e);
        if (ec.n > 0)
            return;
        kp_sleep_usec(200 * 1000);
    }
    fail_msg("no %s event %s on %s", controller, reason, n);
}

/* --- tests ---------------------------------------------------------------------------------------- */

static void test_readiness(void **state)
{
    char *cls = name("ready"), *prof = name("prof"), *sel = name("sel"), *none = name("none"),
         *h1 = name("h1"), *h2 = name("h2");
    bool fin = false;
    char *got;

    (void)state;
    sshhost(h1, sel);
    nodeclass(cls, prof, sel, NULL);
    wait_ready(cls, "False/ProfileNotFound");
    got = ready_of(cls, &fin, NULL);
    assert_true(fin);
    kp_free(got);
    wait_event("default", cls, KP_NODECLASS_REASON_PROFILE_NOT_FOUND,
               KP_SSH_NODECLASSCTL_COMPONENT);

    /* The profile appears: the profile handler fans out to the class. */
    profile(prof, "systemctl disable --now kubelet\\n");
    wait_ready(cls, "True/Ready");

    /* Leave runs without a node class: a leave script reading a node-class var invalidates
     * every class using it. */
    patch(&KP_RES_SSHJOINPROFILE, NULL, prof, NULL,
          kp_lab_json("{\"spec\":{\"scripts\":{\"leave\":\"echo $KPSSH_VAR_x\\n\"}}}"));
    wait_ready(cls, "False/ProfileInvalid");
    patch(&KP_RES_SSHJOINPROFILE, NULL, prof, NULL,
          kp_lab_json("{\"spec\":{\"scripts\":{\"leave\":\"true\\n\"}}}"));
    wait_ready(cls, "True/Ready");

    /* A selector matching no host, until a host is labelled for it. */
    patch(&KP_RES_SSHNODECLASS, NULL, cls, NULL,
          kp_lab_json("{\"spec\":{\"hostSelector\":{\"matchLabels\":{\"kpssh-test\":\"%s\"}}}}",
                      none));
    wait_ready(cls, "False/NoHosts");
    wait_event("default", cls, KP_NODECLASS_REASON_NO_HOSTS, KP_SSH_NODECLASSCTL_COMPONENT);
    sshhost(h2, none);
    wait_ready(cls, "True/Ready");
    del(&KP_RES_SSHHOST, T.ns, h2);
    wait_ready(cls, "False/NoHosts");

    del(&KP_RES_SSHNODECLASS, NULL, cls);
    for (int i = 0; i < WAIT_SECONDS * 10 && (got = ready_of(cls, NULL, NULL)); i++) {
        kp_free(got);
        kp_sleep_usec(100 * 1000);
    }
    got = ready_of(cls, NULL, NULL);
    if (got)
        fail_msg("class %s not deleted", cls);
    del(&KP_RES_SSHJOINPROFILE, NULL, prof);
    del(&KP_RES_SSHHOST, T.ns, h1);
    kp_free(cls);
    kp_free(prof);
    kp_free(sel);
    kp_free(none);
    kp_free(h1);
    kp_free(h2);
}

static void test_finalizer(void **state)
{
    char *cls = name("fin"), *claim = name("fin-claim"), *uid;
    bool fin = false, deleting = false;
    char *got;

    (void)state;
    nodeclass(cls, "absent-profile", "nothing", NULL);
    uid = nodeclaim(claim, cls, NULL);
    wait_ready(cls, "False/ProfileNotFound");
    del(&KP_RES_SSHNODECLASS, NULL, cls);
    /* Held: the NodeClaim still references the class. */
    kp_sleep_usec(2 * KP_USEC_PER_SEC);
    got = ready_of(cls, &fin, &deleting);
    assert_non_null(got);
    assert_true(fin);
    assert_true(deleting);
    kp_free(got);

    del(&KP_RES_NODECLAIM, NULL, claim);
    for (int i = 0; i < WAIT_SECONDS * 10 && (got = ready_of(cls, NULL, NULL)); i++) {
        kp_free(got);
        kp_sleep_usec(100 * 1000);
    }
    got = ready_of(cls, NULL, NULL);
    if (got)
        fail_msg("class %s still exists after its NodeClaim went", cls);
    kp_free(uid);
    kp_free(cls);
    kp_free(claim);
}

static void test_gates(void **state)
{
    char *cls = name("gate"), *claim = name("gate-claim"), *node = name("gate-node"),
         *app = name("cni"), *uid, *gates, *pod = name("cni-pod");
    json_t *o;

    (void)state;
    gates = kp_strjoin("[{\"taintKey\":\"example.com/cni\",\"removeWhen\":{\"podsReady\":{"
                       "\"namespace\":\"",
                       T.ns, "\",\"selector\":{\"matchLabels\":{\"app\":\"", app,
                       "\"}}}}},{\"taintKey\":\"example.com/storage\",\"removeWhen\":{"
                       "\"nodeCondition\":{\"type\":\"StorageReady\"}}},"
                       "{\"taintKey\":\"example.com/other\",\"removeWhen\":{\"nodeCondition\":{"
                       "\"type\":\"StorageReady\"}}}]",
                       (const char *)NULL);
    assert_non_null(gates);
    nodeclass(cls, "absent-profile", "nothing", gates);
    uid = nodeclaim(claim, cls,
                    "[{\"key\":\"example.com/cni\",\"effect\":\"NoSchedule\"},"
                    "{\"key\":\"example.com/storage\",\"effect\":\"NoSchedule\"}]");
    /* The Node as the core registers it: owned by its NodeClaim, startup taints merged in. The
     * third key has an open-able gate but is not a startup taint of the NodeClaim: it stays. */
    o = kp_lab_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\","
                    "\"ownerReferences\":[{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":"
                    "\"NodeClaim\",\"name\":\"%s\",\"uid\":\"%s\"}]},\"spec\":{\"taints\":["
                    "{\"key\":\"example.com/cni\",\"effect\":\"NoSchedule\"},"
                    "{\"key\":\"example.com/storage\",\"effect\":\"NoSchedule\"},"
                    "{\"key\":\"example.com/other\",\"effect\":\"NoSchedule\"}]}}",
                    node, claim, uid);
    create(&KP_RES_NODE, NULL, o, NULL);
    patch(&KP_RES_NODECLAIM, NULL, claim, "status",
          kp_lab_json("{\"status\":{\"nodeName\":\"%s\"}}", node));

    /* Closed: nothing happens. */
    kp_sleep_usec(2 * KP_USEC_PER_SEC);
    assert_true(node_has_taint(node, "example.com/cni"));
    assert_true(node_has_taint(node, "example.com/storage"));
    assert_int_equal(atomic_load(&T.opened), 0);

    /* A pod bound to the node turns Ready: podsReady opens. */
    create(&KP_RES_POD, T.ns,
           kp_lab_json("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
                       "\"labels\":{\"app\":\"%s\"}},\"spec\":{\"nodeName\":\"%s\","
                       "\"tolerations\":[{\"operator\":\"Exists\"}],"
                       "\"containers\":[{\"name\":\"c\",\"image\":\"none\"}]}}",
                       pod, app, node),
           NULL);
    kp_sleep_usec(1 * KP_USEC_PER_SEC);
    assert_true(node_has_taint(node, "example.com/cni")); /* bound but not Ready */
    patch(&KP_RES_POD, T.ns, pod, "status",
          kp_lab_json("{\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\","
                      "\"status\":\"True\"}]}}"));
    wait_taint_gone(node, "example.com/cni");
    assert_true(node_has_taint(node, "example.com/storage"));
    wait_event("default", node, KP_TAINTGATE_EVENT_REASON, KP_TAINTGATE_COMPONENT);
    assert_int_equal(atomic_load(&T.opened), 1);

    /* The node condition appears: nodeCondition opens; the non-startup key stays. */
    patch(&KP_RES_NODE, NULL, node, "status",
          kp_lab_json("{\"status\":{\"conditions\":[{\"type\":\"StorageReady\",\"status\":"
                      "\"True\",\"reason\":\"Test\",\"message\":\"\"}]}}"));
    wait_taint_gone(node, "example.com/storage");
    kp_sleep_usec(1 * KP_USEC_PER_SEC);
    assert_true(node_has_taint(node, "example.com/other"));
    assert_int_equal(atomic_load(&T.opened), 2);
    print_message("# last gate opened %.1f s after the Node was created\n",
                  (double)atomic_load(&T.opened_usec) / 1e6);

    del(&KP_RES_POD, T.ns, pod);
    del(&KP_RES_NODE, NULL, node);
    del(&KP_RES_NODECLAIM, NULL, claim);
    del(&KP_RES_SSHNODECLASS, NULL, cls);
    kp_free(gates);
    kp_free(uid);
    kp_free(cls);
    kp_free(claim);
    kp_free(node);
    kp_free(app);
    kp_free(pod);
}

/* --- fixture ------------------------------------------------------------------------------------ */

static void on_opened(void *ctx, const char *key, uint64_t usec)
{
    (void)ctx;
    (void)key;
    atomic_fetch_add(&T.opened, 1);
    atomic_store(&T.opened_usec, usec);
}

static int setup(void **state)
{
    struct kp_ssh_nodeclassctl_opts no = {0};
    struct kp_ssh_taintgate_opts to = {0};
    struct kp_informer *all[6];

    (void)state;
    kp_lab_setup_namespace(&T.lab, "nodeclass", T.ns, sizeof(T.ns));
    (void)snprintf(T.px, sizeof(T.px), "nc%d", (int)getpid());
    T.c = kp_lab_admin_client(&T.lab);
    kp_lab_apply_crds(&T.lab);

    T.classes = kp_lab_informer_new(T.c, &KP_RES_SSHNODECLASS, NULL, kp_sshnodeclass_project);
    T.profiles = kp_lab_informer_new(T.c, &KP_RES_SSHJOINPROFILE, NULL, kp_sshjoinprofile_project);
    T.hosts = kp_lab_informer_new(T.c, &KP_RES_SSHHOST, T.ns, kp_sshhost_project);
    T.claims = kp_lab_informer_new(T.c, &KP_RES_NODECLAIM, NULL, kp_nodeclaim_project);
    T.nodes = kp_lab_informer_new(T.c, &KP_RES_NODE, NULL, kp_node_project);
    T.pods = kp_lab_informer_new(T.c, &KP_RES_POD, T.ns, kp_pod_project);

    no.pool_namespace = T.ns;
    no.client = T.c;
    no.nodeclasses = T.classes;
    no.profiles = T.profiles;
    no.hosts = T.hosts;
    no.nodeclaims = T.claims;
    no.workers = 2;
    assert_int_equal(kp_ssh_nodeclassctl_new(&no, &T.ncc), 0);
    to.client = T.c;
    to.nodes = T.nodes;
    to.pods = T.pods;
    to.nodeclaims = T.claims;
    to.nodeclasses = T.classes;
    to.gate_opened = on_opened;
    to.workers = 2;
    assert_int_equal(kp_ssh_taintgate_new(&to, &T.tg), 0);

    all[0] = T.classes;
    all[1] = T.profiles;
    all[2] = T.hosts;
    all[3] = T.claims;
    all[4] = T.nodes;
    all[5] = T.pods;
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(kp_informer_start(all[i]), 0);
    assert_int_equal(kp_ssh_nodeclassctl_start(T.ncc), 0);
    assert_int_equal(kp_ssh_taintgate_start(T.tg), 0);
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(kp_informer_wait_synced(all[i], 60 * KP_USEC_PER_SEC), 0);
    assert_true(kp_ssh_nodeclassctl_ready(T.ncc));
    assert_true(kp_ssh_taintgate_ready(T.tg));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kp_ssh_nodeclassctl_stop(T.ncc);
    kp_ssh_taintgate_stop(T.tg);
    /* Informers stop first (their handlers point into the controllers), and are freed last:
     * a controller's free takes its handlers back out of them. */
    kp_informer_stop(T.classes);
    kp_informer_stop(T.profiles);
    kp_informer_stop(T.hosts);
    kp_informer_stop(T.claims);
    kp_informer_stop(T.nodes);
    kp_informer_stop(T.pods);
    T.ncc = kp_ssh_nodeclassctl_free(T.ncc);
    T.tg = kp_ssh_taintgate_free(T.tg);
    T.classes = kp_informer_free(T.classes);
    T.profiles = kp_informer_free(T.profiles);
    T.hosts = kp_informer_free(T.hosts);
    T.claims = kp_informer_free(T.claims);
    T.nodes = kp_informer_free(T.nodes);
    T.pods = kp_informer_free(T.pods);
    T.c = kp_client_free(T.c);
    kp_lab_teardown_namespace(&T.lab, T.ns);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readiness),
        cmocka_unit_test(test_finalizer),
        cmocka_unit_test(test_gates),
    };

    (void)argc;
    (void)argv;
    kp_log_set_level(KP_LOG_WARN);
    return cmocka_run_group_tests_name("nodeclassctl", tests, setup, teardown);
}
