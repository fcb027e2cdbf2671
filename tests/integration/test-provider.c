/* tests/integration/test-provider.c: the SSH provider (provider/ssh/provider.h) driven directly
 * through its vtable against the lab: a real kube-apiserver with our CRDs from deploy/crds, real
 * sshd hosts, and hollow kubelets that TLS-bootstrap with the token the provider mints.
 *
 *   lifecycle  host 1, the shipped tls-bootstrap join and leave scripts verbatim: Create -> Node
 *              Ready with our providerID, labels and taints, token collected, host InUse;
 *              Delete -> leave ran (kubelet disabled), host Available; second Create is warm
 *              (install skipped); a stale Delete after the host was re-claimed is fenced off.
 *              The shipped install script is replaced by a lab-safe one: it apt-installs
 *              containerd and kubelet into directories the lab shares with the real machine
 *              (tests/integration/test-profiles.sh runs it in a sandbox against stand-ins).
 *   config     a node class whose key Secret is missing: ConfigurationError, host Available.
 *   launch     a join whose Node registers seconds after the script exits: Create is back
 *              before the Node (it returns at launch), the host is Claimed with its providerID
 *              and the host controller's verdict, once the Node is there, is InUse.
 *   adopt      Adopt's Create still waits for the Node (the providerID is the Node's): cut
 *              short by a deadline (RETRYABLE, claim kept), then resumed to InUse.
 *   cancel     a Create in flight (a one-minute join) cancelled through its ctx, then resumed
 *              under a deadline: each ends within moments, RETRYABLE, the claim kept; a
 *              Delete cancelled in its leave stays Leaving and claimed, the next one releases.
 *   catalog    get_instance_types hands out one shared reference until a host changes the
 *              offering, then a new version; the held one stays readable.
 *   race       20 extra lab hosts, 40 concurrent Creates (threads, one client clone each) of a
 *              profile whose join registers the Node through the API instead of a kubelet:
 *              exactly 20 succeed on 20 distinct hosts, the rest fail InsufficientCapacity,
 *              zero double claims. Rounds: KP_PROVIDER_RACE_ROUNDS (default 25, about 80 s).
 *
 * Create wall time is printed split into claim / install / token / join / registration. */
#include "kp-lab.h"
#include "kp-test.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "core/provider.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "api/obj-node.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "base/ctx.h"
#include "provider/ssh/hostctl.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/observe.h"
#include "provider/ssh/provider.h"

#define POOL_NS "kpssh-system"
#define RACE_FIRST 101 /* lab host indices of the race hosts */
#define RACE_HOSTS 20
#define RACE_CREATES 40
#define LAB_HOST 1
#define LATE_HOST 130 /* lab host indices of the launch and cancel tests' hosts */
#define SLOW_HOST 131
#define LATE_REGISTRATION_S 5
#define ADOPT_REGISTRATION_S 2
#define KP_STR_(x) #x
#define KP_STR(x) KP_STR_(x)

static struct {
    struct kp_lab lab;
    struct kp_client *c;
    char *admin_token, *repo;
    struct kp_informer *inf_hosts, *inf_classes, *inf_profiles, *inf_nodes;
    struct kp_ssh_provider *sp;
    struct kp_provider prov;
    unsigned serial;
    bool race_hosts_added[RACE_HOSTS];
    bool late_added, slow_added;
} T;

/* Phase reports (observe.h): how many of each phase ran, and how many failed. */
static struct {
    atomic_uint install, join, leave, failed;
} P;

static void obs_phase(void *ctx, const char *phase, bool ok, uint64_t usec)
{
    (void)ctx;
    (void)usec;
    if (kp_streq(phase, KP_SSH_PHASE_INSTALL))
        atomic_fetch_add(&P.install, 1);
    else if (kp_streq(phase, KP_SSH_PHASE_JOIN))
        atomic_fetch_add(&P.join, 1);
    else if (kp_streq(phase, KP_SSH_PHASE_LEAVE))
        atomic_fetch_add(&P.leave, 1);
    if (!ok)
        atomic_fetch_add(&P.failed, 1);
}

static const struct kp_ssh_observer observer = {.phase = obs_phase};

/* --- API objects ---------------------------------------------------------------------------- */

static void profile(const char *name, const char *install, const char *join, const char *leave)
{
    json_t *o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHJoinProfile", NULL, name);

    kp_lab_set(o, KP_JSON_PATH("spec", "version"), "1");
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "install"), install);
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "join"), join);
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "leave"), leave);
    kp_lab_set(o, KP_JSON_PATH("spec", "timeouts", "join"), "3m");
    kp_lab_create_or_replace(T.c, &KP_RES_SSHJOINPROFILE, NULL, o);
}

static void nodeclass(const char *name, const char *cls, const char *prof, const char *key_var)
{
    json_t *o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHNodeClass", NULL, name);
    char *ca = kp_lab_base64(T.lab.ca, T.lab.ca_len);

    kp_lab_set(o, KP_JSON_PATH("spec", "hostSelector", "matchLabels", KP_KPSSH_LABEL_HOST_CLASS),
               cls);
    kp_lab_set(o, KP_JSON_PATH("spec", "joinProfileRef", "name"), prof);
    kp_lab_set(o, KP_JSON_PATH("spec", "cluster", "endpoint"), T.lab.api_url);
    kp_lab_set(o, KP_JSON_PATH("spec", "cluster", "caBundle"), ca);
    kp_lab_set(o, KP_JSON_PATH("spec", "vars", "clusterDNS"), "10.0.0.10");
    kp_lab_set(o, KP_JSON_PATH("spec", "vars", "bootstrapWait"), "120");
    if (key_var)
        kp_lab_set(o, KP_JSON_PATH("spec", "vars", "adminToken"), key_var);
    kp_free(ca);
    kp_lab_create_or_replace(T.c, &KP_RES_SSHNODECLASS, NULL, o);
}

/* An SSHHost for lab host i, made Available as a successful probe would. */
static void sshhost(const char *name, unsigned i, const char *cls, const char *key_secret)
{
    json_t *o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHHost", POOL_NS, name);
    json_t *p = NULL;
    struct kp_error e = KP_ERROR_INIT;
    char *ip = kp_lab_host_ip(&T.lab, i);

    kp_lab_set(o, KP_JSON_PATH("metadata", "labels", KP_KPSSH_LABEL_HOST_CLASS), cls);
    kp_lab_set(o, KP_JSON_PATH("spec", "address"), ip);
    kp_lab_set(o, KP_JSON_PATH("spec", "sshKeySecretRef", "name"), key_secret);
    kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "cpu"), "2");
    kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "memory"), "4Gi");
    kp_lab_create_or_replace(T.c, &KP_RES_SSHHOST, POOL_NS, o);
    assert_int_equal(kp_json_patch_new(&p), 0);
    kp_lab_set(p, KP_JSON_PATH("status", "state"), "Available");
    kp_lab_set(p, KP_JSON_PATH("status", "observedArch"), "amd64");
    kp_lab_check(
        kp_client_patch(T.c, &KP_RES_SSHHOST, POOL_NS, name, "status", KP_PATCH_MERGE, p, NULL, &e),
        &e, "host status");
    kp_json_unref(p);
    kp_free(ip);
}

static struct kp_entry *host_get(const char *name)
{
    return kp_lab_sshhost_get(T.c, POOL_NS, name);
}

/* Waits until the informer's copy of host name is claimable (what the next Create reads). */
static void wait_cached_available(const char *name)
{
    char key[300];

    (void)snprintf(key, sizeof(key), POOL_NS "/%s", name);
    for (int i = 0; i < 300; i++) {
        struct kp_entry *e = NULL;
        bool ok = false;

        if (kp_store_get(kp_informer_store(T.inf_hosts), key, &e) == 0) {
            const struct kp_sshhost_view *h = kp_sshhost_view(e);

            ok = h->state == KP_HOST_AVAILABLE && !h->claim_name;
        }
        kp_entry_unref(e);
        if (ok)
            return;
        kp_sleep_usec(50 * 1000);
    }
    fail_msg("host %s never showed Available in the cache", name);
}

/* A NodeClaim as the core would hand it over; provider_id set for Delete. */
static struct kp_entry *nodeclaim(const char *name, const char *uid, const char *nodeclass_name,
                                  const char *provider_id)
{
    struct kp_entry *e = NULL;
    json_t *o = kp_lab_obj_new("karpenter.sh/v1", "NodeClaim", NULL, name);

    kp_lab_set(o, KP_JSON_PATH("metadata", "uid"), uid);
    kp_lab_set(o, KP_JSON_PATH("metadata", "resourceVersion"), "1");
    kp_lab_set(o, KP_JSON_PATH("metadata", "labels", "karpenter.sh/nodepool"), "prov");
    kp_lab_set(o, KP_JSON_PATH("metadata", "labels", "team"), "storage");
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "group"), KP_KPSSH_GROUP);
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "kind"), "SSHNodeClass");
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "name"), nodeclass_name);
    kp_lab_set(o, KP_JSON_PATH("spec", "resources", "requests", "cpu"), "100m");
    {
        json_t *taints = kp_lab_json("[{\"key\":\"karpenter.kpssh.dev/pool\",\"effect\":"
                                     "\"NoSchedule\"}]");

        assert_int_equal(kp_json_patch_set_steal(o, KP_JSON_PATH("spec", "taints"), taints), 0);
    }
    if (provider_id)
        kp_lab_set(o, KP_JSON_PATH("status", "providerID"), provider_id);
    assert_int_equal(kp_nodeclaim_project(o, &e), 0);
    kp_json_unref(o);
    return e;
}

static void uid_for(char *buf, size_t n)
{
    (void)snprintf(buf, n, "uid-%d-%u-%llu", (int)getpid(), ++T.serial,
                   (unsigned long long)kp_mono_usec());
}

static struct kp_entry *node_get(const char *name)
{
    struct kp_entry *n = NULL;
    json_t *o = NULL;

    if (kp_client_get(T.c, &KP_RES_NODE, NULL, name, &o, NULL) < 0)
        return NULL;
    assert_int_equal(kp_node_project(o, &n), 0);
    kp_json_unref(o);
    return n;
}

static bool wait_node_ready(const char *name, int seconds)
{
    for (int i = 0; i < seconds * 2; i++) {
        struct kp_entry *n = node_get(name);
        bool ready = n && kp_node_view(n)->ready == KP_COND_TRUE;

        kp_entry_unref(n);
        if (ready)
            return true;
        kp_sleep_usec(500 * 1000);
    }
    return false;
}

/* The bootstrap-token Secrets of kube-system whose description names this NodeClaim. */
struct tok_count {
    const char *want;
    unsigned n;
};

static int tok_page(const struct kp_list_page *page, void *ud)
{
    struct tok_count *t = ud;

    for (size_t i = 0; i < kp_json_array_size(page->items); i++) {
        const char *d = NULL;
        json_t *it = kp_json_array_at(page->items, i);

        if (kp_json_pathv_str(it, KP_JSON_PATH("data", "description"), &d) == 0) {
            char *want = kp_lab_base64(t->want, strlen(t->want));

            if (kp_streq(d, want))
                t->n++;
            kp_free(want);
        }
    }
    return 0;
}

static unsigned tokens_for(const char *nodeclaim_name)
{
    struct kp_list_opts lo = {.field_selector = "type=bootstrap.kubernetes.io/token"};
    char *want = kp_strjoin("kpssh nodeclaim ", nodeclaim_name, (const char *)NULL);
    struct tok_count t = {.want = want, .n = 0};
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_check(kp_client_list(T.c, &KP_RES_SECRET, "kube-system", &lo, tok_page, &t, NULL, &e),
                 &e, "list tokens");
    kp_free(want);
    return t.n;
}

static void print_report(const char *what, const struct kp_ssh_create_report *r)
{
    print_message(
        "# create %-12s host %-10s claim %6.0f ms | install %6.0f ms | token %5.0f ms | "
        "join %6.0f ms | registration %6.0f ms | total %6.0f ms\n",
        what, r->host, r->claim_usec / 1e3, r->install_usec / 1e3, r->token_usec / 1e3,
        r->join_usec / 1e3, r->registration_usec / 1e3,
        (r->claim_usec + r->install_usec + r->token_usec + r->join_usec + r->registration_usec) /
            1e3);
}

/* --- fixture ------------------------------------------------------------------------------------ */

static char *read_repo_file(const char *rel)
{
    char *path = kp_strjoin(T.repo, "/", rel, (const char *)NULL);
    char *s;

    assert_non_null(path);
    s = kp_lab_read_file(path, NULL);
    kp_free(path);
    return s;
}

/* The race profile's join registers the Node through the API, as a kubelet would, so the race
 * exercises the claim lock and the whole Create path without 20 hollow kubelets. */
static const char race_join[] =
    "body=$(printf '{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\","
    "\"labels\":{\"kpssh-test\":\"race\"}},\"spec\":{\"providerID\":\"%s\"}}' "
    "\"$KPSSH_NODE_NAME\" \"$KPSSH_PROVIDER_ID\")\n"
    "printf '%s' \"$KPSSH_CLUSTER_CA_B64\" | base64 -d > /tmp/kpssh-race-ca.crt\n"
    "code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert /tmp/kpssh-race-ca.crt "
    "-H \"Authorization: Bearer $KPSSH_VAR_adminToken\" -H 'Content-Type: application/json' "
    "-X POST \"$KPSSH_CLUSTER_ENDPOINT/api/v1/nodes\" -d \"$body\")\n"
    "case $code in 201|409) ;; *) echo \"node create: HTTP $code\" >&2; exit 1 ;; esac\n";

/* A join that exits at once and registers the Node a few seconds later from a detached
 * process, as a kubelet finishing its TLS bootstrap after the script would. */
static const char late_join[] =
    "body=$(printf '{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\"},"
    "\"spec\":{\"providerID\":\"%s\"}}' \"$KPSSH_NODE_NAME\" \"$KPSSH_PROVIDER_ID\")\n"
    "printf '%s' \"$KPSSH_CLUSTER_CA_B64\" | base64 -d > /tmp/kpssh-late-ca.crt\n"
    "setsid sh -c \"sleep " KP_STR(
        LATE_REGISTRATION_S) "; curl -sS -o /dev/null "
                             "--cacert /tmp/kpssh-late-ca.crt -H 'Authorization: Bearer $KPSSH_VAR_adminToken' "
                             "-H 'Content-Type: application/json' -X POST '$KPSSH_CLUSTER_ENDPOINT/api/v1/nodes' "
                             "-d '$body'\" </dev/null >/dev/null 2>&1 &\n";

/* An Adopt join: the node agent picks its own providerID; the Node (InternalIP = the host's node
 * address) registers ADOPT_REGISTRATION_S after the script exits. */
static const char adopt_join[] =
    "body=$(printf '{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\"},"
    "\"spec\":{\"providerID\":\"adopted:///lab/%s\"},\"status\":{\"addresses\":[{\"type\":"
    "\"InternalIP\",\"address\":\"%s\"}]}}' \"$KPSSH_NODE_NAME\" \"$KPSSH_NODE_NAME\" "
    "\"$KPSSH_NODE_ADDRESS\")\n"
    "printf '%s' \"$KPSSH_CLUSTER_CA_B64\" | base64 -d > /tmp/kpssh-adopt-ca.crt\n"
    "setsid sh -c \"sleep " KP_STR(
        ADOPT_REGISTRATION_S) "; curl -sS -o /dev/null "
                              "--cacert /tmp/kpssh-adopt-ca.crt -H 'Authorization: Bearer $KPSSH_VAR_adminToken' "
                              "-H 'Content-Type: application/json' -X POST '$KPSSH_CLUSTER_ENDPOINT/api/v1/nodes' "
                              "-d '$body'\" </dev/null >/dev/null 2>&1 &\n";

/* A join that takes a minute: only a cancel or a deadline ends it early. */
static const char slow_join[] = "sleep 60\n";
/* A leave that takes a few seconds: long enough to cancel a Delete in. */
static const char slow_leave[] = "sleep 5\n";

static const char lab_install[] =
    "# lab-safe install: the shipped one installs packages into directories the lab\n"
    "# shares with the real machine; the lab host already has kubelet and systemctl.\n"
    "mkdir -p /var/lib/kpssh\n"
    "date +%s >> /var/lib/kpssh/install-runs\n"
    "systemctl disable --now kubelet >/dev/null 2>&1 || true\n";

/* The provider's stores and observer, as every provider here uses them. */
static void provider_opts(struct kp_ssh_provider_opts *po)
{
    po->pool_namespace = POOL_NS;
    po->hosts = kp_informer_store(T.inf_hosts);
    po->nodeclasses = kp_informer_store(T.inf_classes);
    po->profiles = kp_informer_store(T.inf_profiles);
    po->nodes = kp_informer_store(T.inf_nodes);
    po->observer = &observer;
}

static int setup(void **state)
{
    char *join, *leave;
    struct kp_ssh_provider_opts po = {0};

    (void)state;
    kp_lab_load(&T.lab);
    T.c = kp_lab_admin_client(&T.lab);
    T.repo = kp_strdup(getenv("KP_REPO") ? getenv("KP_REPO") : ".");
    T.admin_token = kp_lab_admin_token(&T.lab);

    kp_lab_apply_crds(&T.lab); /* as the chart installs them */
    kp_lab_ensure_namespace(T.c, POOL_NS);
    kp_lab_key_secret(&T.lab, T.c, POOL_NS, "prov-key");

    /* Profiles: the shipped tls-bootstrap join and leave verbatim; a race profile. */
    join = read_repo_file("profiles/tls-bootstrap/join.sh");
    leave = read_repo_file("profiles/tls-bootstrap/leave.sh");
    profile("tls-bootstrap", lab_install, join, leave);
    kp_free(join);
    kp_free(leave);
    profile("prov-race", "true\n", race_join, "true\n");
    profile("prov-late", "true\n", late_join, "true\n");
    profile("prov-slow", "true\n", slow_join, slow_leave);
    profile("prov-adopt", "true\n", adopt_join, "true\n");

    nodeclass("prov-lab", "prov-lab", "tls-bootstrap", NULL);
    nodeclass("prov-race", "prov-race", "prov-race", T.admin_token);
    nodeclass("prov-nokey", "prov-nokey", "prov-race", T.admin_token);
    nodeclass("prov-late", "prov-late", "prov-late", T.admin_token);
    nodeclass("prov-slow", "prov-slow", "prov-slow", NULL);
    /* Adopt, selecting the launch test's host class. */
    nodeclass("prov-adopt", "prov-late", "prov-adopt", T.admin_token);
    {
        json_t *p = kp_lab_json("{\"spec\":{\"providerIDSource\":\"Adopt\"}}");
        struct kp_error e = KP_ERROR_INIT;

        kp_lab_check(kp_client_patch(T.c, &KP_RES_SSHNODECLASS, NULL, "prov-adopt", NULL,
                                     KP_PATCH_MERGE, p, NULL, &e),
                     &e, "prov-adopt Adopt");
        kp_json_unref(p);
    }
    sshhost("lab-1", LAB_HOST, "prov-lab", "prov-key");
    sshhost("nokey-1", 2, "prov-nokey", "no-such-secret");

    T.inf_hosts = kp_lab_informer(T.c, &KP_RES_SSHHOST, POOL_NS, kp_sshhost_project);
    T.inf_classes = kp_lab_informer(T.c, &KP_RES_SSHNODECLASS, NULL, kp_sshnodeclass_project);
    T.inf_profiles = kp_lab_informer(T.c, &KP_RES_SSHJOINPROFILE, NULL, kp_sshjoinprofile_project);
    kp_lab_wait_cached(T.inf_classes, "prov-lab");
    kp_lab_wait_cached(T.inf_classes, "prov-race");
    kp_lab_wait_cached(T.inf_classes, "prov-nokey");
    kp_lab_wait_cached(T.inf_profiles, "tls-bootstrap");
    kp_lab_wait_cached(T.inf_profiles, "prov-race");
    kp_lab_wait_cached(T.inf_profiles, "prov-late");
    kp_lab_wait_cached(T.inf_profiles, "prov-slow");
    kp_lab_wait_cached(T.inf_classes, "prov-late");
    kp_lab_wait_cached(T.inf_classes, "prov-slow");
    kp_lab_wait_cached(T.inf_classes, "prov-adopt");
    kp_lab_wait_cached(T.inf_profiles, "prov-adopt");
    wait_cached_available("lab-1");
    wait_cached_available("nokey-1");
    /* Registration reads the Node informer through the shared indexes, as in the controller. */
    T.inf_nodes = kp_lab_informer_new(T.c, &KP_RES_NODE, NULL, kp_node_project);
    assert_int_equal(kp_ssh_index_nodes(T.inf_nodes), 0);
    assert_int_equal(kp_informer_start(T.inf_nodes), 0);
    assert_int_equal(kp_informer_wait_synced(T.inf_nodes, 60 * KP_USEC_PER_SEC), 0);

    provider_opts(&po);
    po.registration_timeout_usec = 180 * KP_USEC_PER_SEC;
    po.registration_poll_usec = 250 * KP_USEC_PER_MSEC;
    assert_int_equal(kp_ssh_provider_new(&po, &T.sp), 0);
    T.prov = kp_ssh_provider_as_provider(T.sp);
    assert_string_equal(T.prov.ops->name(T.prov.self), "ssh");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (unsigned i = 0; i < RACE_HOSTS; i++)
        if (T.race_hosts_added[i])
            (void)kp_lab_host_sh(&T.lab, "del", RACE_FIRST + i);
    if (T.late_added)
        (void)kp_lab_host_sh(&T.lab, "del", LATE_HOST);
    if (T.slow_added)
        (void)kp_lab_host_sh(&T.lab, "del", SLOW_HOST);
    /* Leave host 1 as the lab made it. */
    (void)kp_lab_host_exec(&T.lab, LAB_HOST,
                           "systemctl disable --now kubelet containerd >/dev/null 2>&1; rm -rf "
                           "/var/lib/kpssh/* /etc/kubernetes/* /var/lib/kubelet/* "
                           "/etc/systemd/system/kubelet.service.d");
    T.sp = kp_ssh_provider_free(T.sp);
    T.inf_hosts = kp_informer_free(T.inf_hosts);
    T.inf_classes = kp_informer_free(T.inf_classes);
    T.inf_profiles = kp_informer_free(T.inf_profiles);
    T.inf_nodes = kp_informer_free(T.inf_nodes);
    T.c = kp_client_free(T.c);
    kp_free(T.repo);
    if (T.admin_token)
        kp_wipe(T.admin_token, strlen(T.admin_token));
    kp_free(T.admin_token);
    kp_lab_done(&T.lab);
    return 0;
}

/* --- tests ---------------------------------------------------------------------------------------- */

/* The host controller's verdict on a launched host h whose Node has registered with pid: mark it
 * InUse (hostctl.h; what its reconcile then writes is test-hostctl.c's). */
static void assert_hostctl_marks_in_use(const struct kp_entry *h, const char *uid, const char *pid)
{
    struct kp_hostctl_timing t = {.claimed_recheck_usec = KP_USEC_PER_SEC,
                                  .token_recheck_usec = KP_USEC_PER_SEC};
    struct kp_hostctl_claim_in in = {
        .nodeclaim_found = true, .nodeclaim_uid = uid, .registered_pid = pid, .node_exists = true};
    struct kp_hostctl_claim_action act;

    kp_hostctl_decide_claimed(kp_sshhost_view(h), &in, &t, &act);
    assert_int_equal(act.verb, KP_HOSTCTL_CLAIM_MARK_IN_USE);
}

static void test_lifecycle(void **state)
{
    struct kp_provider_instance inst = {0}, got = {0};
    struct kp_provider_instances all = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_ssh_create_report rep;
    struct kp_entry *a = NULL, *a_del = NULL, *b = NULL, *b_del = NULL, *h, *n;
    const char *drift = "x";
    char uid_a[64], uid_b[64];
    int r;

    (void)state;
    /* Cold Create: install, token, join, registration. */
    uid_for(uid_a, sizeof(uid_a));
    a = nodeclaim("prov-a", uid_a, "prov-lab", NULL);
    r = kp_ssh_provider_create(T.sp, NULL, T.c, kp_nodeclaim_view(a), &inst, &rep, &err);
    if (r < 0)
        fail_msg("Create A: %s [%s/%s] %s", kp_strerror(r), kp_provider_err_kind_name(err.kind),
                 err.reason, err.message ? err.message : "");
    print_report("cold", &rep);
    assert_true(rep.installed);
    assert_false(rep.resumed);
    assert_string_equal(rep.host, "lab-1");
    assert_string_equal(inst.provider_id, "kpssh://" POOL_NS "/lab-1");
    assert_string_equal(inst.nodeclaim, "prov-a");
    assert_string_equal(inst.instance_type, "prov-lab");
    assert_string_equal(kp_provider_kv_get(inst.labels, inst.n_labels, KP_LABEL_ZONE), "pool");
    assert_string_equal(kp_provider_kv_get(inst.labels, inst.n_labels, KP_LABEL_CAPACITY_TYPE),
                        "on-demand");
    assert_non_null(
        kp_provider_kv_get(inst.annotations, inst.n_annotations, KP_SSH_ANNOTATION_NODECLASS_HASH));
    assert_int_equal(kp_provider_res_get(inst.capacity, inst.n_capacity, "cpu", NULL), 2000);
    assert_int_equal(kp_provider_res_get(inst.allocatable, inst.n_allocatable, "cpu", NULL), 1920);

    /* The Node: Ready, our providerID, labels and taints. */
    assert_true(wait_node_ready("prov-a", 120));
    n = node_get("prov-a");
    assert_non_null(n);
    assert_string_equal(kp_node_view(n)->provider_id, "kpssh://" POOL_NS "/lab-1");
    assert_string_equal(kp_labels_get(&kp_node_view(n)->meta.labels, "team"), "storage");
    assert_string_equal(kp_labels_get(&kp_node_view(n)->meta.labels, "karpenter.sh/nodepool"),
                        "prov");
    {
        bool unreg = false, pool = false;

        for (size_t i = 0; i < kp_node_view(n)->taints.n; i++) {
            const struct kp_taint *t = &kp_node_view(n)->taints.v[i];

            unreg |=
                kp_streq(t->key, "karpenter.sh/unregistered") && t->effect == KP_TAINT_NO_EXECUTE;
            pool |=
                kp_streq(t->key, "karpenter.kpssh.dev/pool") && t->effect == KP_TAINT_NO_SCHEDULE;
        }
        assert_true(unreg);
        assert_true(pool);
    }
    /* Launched, not InUse: Create wrote the providerID at join exit and left the host Claimed
     * with its token; InUse and the token's collection are the host controller's once the Node
     * is there (its verdict on this very host, below; test-hostctl.c runs the I/O). TOFU pin
     * written, marker recorded. */
    h = host_get("lab-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_CLAIMED);
    assert_string_equal(kp_sshhost_view(h)->claim_name, "prov-a");
    assert_string_equal(kp_sshhost_view(h)->claim_uid, uid_a);
    assert_string_equal(kp_sshhost_view(h)->installed_profile, "tls-bootstrap@1");
    assert_string_equal(kp_sshhost_view(h)->provider_id, "kpssh://" POOL_NS "/lab-1");
    assert_non_null(kp_sshhost_view(h)->bootstrap_token_id);
    assert_non_null(kp_sshhost_view(h)->host_key_fingerprint);
    assert_hostctl_marks_in_use(h, uid_a, "kpssh://" POOL_NS "/lab-1");
    kp_entry_unref(h);
    kp_entry_unref(n);
    assert_int_equal(tokens_for("prov-a"), 1);

    /* Get, List, drift. */
    a_del = nodeclaim("prov-a", uid_a, "prov-lab", inst.provider_id);
    assert_int_equal(T.prov.ops->get(T.prov.self, NULL, T.c, inst.provider_id, &got, &err), 0);
    assert_string_equal(got.nodeclaim, "prov-a");
    kp_provider_instance_done(&got);
    assert_int_equal(T.prov.ops->list(T.prov.self, NULL, T.c, &all, &err), 0);
    {
        unsigned mine = 0;

        for (size_t i = 0; i < all.n; i++)
            mine += kp_streq(all.v[i].nodeclaim, "prov-a");
        assert_int_equal(mine, 1);
    }
    kp_provider_instances_done(&all);
    assert_int_equal(
        T.prov.ops->is_drifted(T.prov.self, NULL, T.c, kp_nodeclaim_view(a_del), &drift, &err), 0);
    assert_null(drift);
    /* A second Create of the same NodeClaim resumes and returns the same instance. */
    kp_provider_instance_done(&inst);
    assert_int_equal(
        kp_ssh_provider_create(T.sp, NULL, T.c, kp_nodeclaim_view(a), &inst, &rep, &err), 0);
    assert_true(rep.resumed);
    assert_string_equal(inst.provider_id, "kpssh://" POOL_NS "/lab-1");
    kp_provider_instance_done(&inst);

    /* Delete: leave ran, kubelet disabled, token gone, host Available and warm. */
    r = T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(a_del), &err);
    if (r < 0)
        fail_msg("Delete A: %s %s", kp_strerror(r), err.message ? err.message : "");
    assert_int_not_equal(kp_lab_host_exec(&T.lab, LAB_HOST, "systemctl is-enabled kubelet"), 0);
    assert_int_not_equal(kp_lab_host_exec(&T.lab, LAB_HOST, "systemctl is-active kubelet"), 0);
    h = host_get("lab-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_AVAILABLE);
    assert_null(kp_sshhost_view(h)->claim_name);
    assert_null(kp_sshhost_view(h)->provider_id);
    assert_string_equal(kp_sshhost_view(h)->installed_profile, "tls-bootstrap@1");
    kp_entry_unref(h);
    assert_int_equal(tokens_for("prov-a"), 0);
    assert_int_equal(kp_ssh_provider_delete_node(T.c, "prov-a"), 0); /* the core's part */
    wait_cached_available("lab-1");

    /* Warm Create on the same host: install skipped. */
    uid_for(uid_b, sizeof(uid_b));
    b = nodeclaim("prov-b", uid_b, "prov-lab", NULL);
    r = kp_ssh_provider_create(T.sp, NULL, T.c, kp_nodeclaim_view(b), &inst, &rep, &err);
    if (r < 0)
        fail_msg("Create B: %s %s", kp_strerror(r), err.message ? err.message : "");
    print_report("warm", &rep);
    assert_false(rep.installed);
    assert_int_equal(rep.install_usec, 0);
    assert_string_equal(rep.host, "lab-1");
    assert_int_equal(
        kp_lab_host_exec(&T.lab, LAB_HOST, "test \"$(wc -l < /var/lib/kpssh/install-runs)\" -eq 1"),
        0);
    assert_true(wait_node_ready("prov-b", 120));

    /* The fence: a stale, retried Delete of A must not touch B's node. */
    kp_provider_err_done(&err);
    r = T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(a_del), &err);
    assert_int_equal(r, -ENOENT);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_NOT_FOUND);
    assert_int_equal(kp_lab_host_exec(&T.lab, LAB_HOST, "systemctl is-active kubelet"), 0);
    h = host_get("lab-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_CLAIMED); /* no host controller here */
    assert_string_equal(kp_sshhost_view(h)->claim_name, "prov-b");
    kp_entry_unref(h);
    n = node_get("prov-b");
    assert_non_null(n);
    kp_entry_unref(n);
    /* A Delete with the right name but the uid of a dead NodeClaim is fenced too. */
    {
        struct kp_entry *b_old =
            nodeclaim("prov-b", "uid-of-an-earlier-prov-b", "prov-lab", inst.provider_id);

        assert_int_equal(
            T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(b_old), &err), -ENOENT);
        kp_entry_unref(b_old);
    }

    b_del = nodeclaim("prov-b", uid_b, "prov-lab", inst.provider_id);
    assert_int_equal(T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(b_del), &err),
                     0);
    assert_int_not_equal(kp_lab_host_exec(&T.lab, LAB_HOST, "systemctl is-enabled kubelet"), 0);
    assert_int_equal(kp_ssh_provider_delete_node(T.c, "prov-b"), 0);
    /* Deleting again: gone. */
    assert_int_equal(T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(b_del), &err),
                     -ENOENT);
    assert_int_equal(tokens_for("prov-b"), 0);
    /* Every phase was timed and reported: cold install, two joins, two leaves. */
    assert_int_equal(atomic_load(&P.install), 1);
    assert_int_equal(atomic_load(&P.join), 2);
    assert_int_equal(atomic_load(&P.leave), 2);
    assert_int_equal(atomic_load(&P.failed), 0);

    kp_provider_instance_done(&inst);
    kp_provider_err_done(&err);
    kp_entry_unref(a);
    kp_entry_unref(a_del);
    kp_entry_unref(b);
    kp_entry_unref(b_del);
}

static void test_config_error(void **state)
{
    struct kp_provider_instance inst = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_entry *nc, *h;
    char uid[64];
    int r;

    (void)state;
    uid_for(uid, sizeof(uid));
    nc = nodeclaim("prov-nokey", uid, "prov-nokey", NULL);
    r = T.prov.ops->create(T.prov.self, NULL, T.c, kp_nodeclaim_view(nc), &inst, &err);
    assert_true(r < 0);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_CREATE);
    assert_string_equal(err.reason, KP_PROVIDER_REASON_CONFIG);
    assert_non_null(strstr(err.message, "no-such-secret"));
    assert_non_null(strstr(err.message, "not found")); /* not errno text */
    h = host_get("nokey-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_AVAILABLE); /* config: host is fine */
    assert_null(kp_sshhost_view(h)->claim_name);
    kp_entry_unref(h);
    kp_provider_err_done(&err);
    kp_entry_unref(nc);

    /* The node class's Ready condition gates Create: False is NodeClassNotReady with the
     * condition's reason and message, Unknown is a create error the core retries. */
    nodeclass("prov-gate", "prov-gate", "prov-race", T.admin_token);
    for (int pass = 0; pass < 2; pass++) {
        struct kp_error e = KP_ERROR_INIT;
        json_t *st =
            kp_lab_json("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\","
                        "\"reason\":\"%s\",\"message\":\"profile nope not found\","
                        "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}",
                        pass ? "Unknown" : "False", pass ? "AwaitingReconcile" : "ProfileNotFound");

        kp_lab_check(kp_client_patch(T.c, &KP_RES_SSHNODECLASS, NULL, "prov-gate", "status",
                                     KP_PATCH_MERGE, st, NULL, &e),
                     &e, "node class status");
        kp_json_unref(st);
        for (int i = 0; i < 200; i++) { /* until the cache has the condition */
            struct kp_entry *c = NULL;
            const struct kp_condition *rc = NULL;

            if (kp_store_get(kp_informer_store(T.inf_classes), "prov-gate", &c) == 0)
                rc = kp_conditions_get(&kp_sshnodeclass_view(c)->conditions, "Ready");
            r = rc && rc->status == (pass ? KP_COND_UNKNOWN : KP_COND_FALSE);
            kp_entry_unref(c);
            if (r)
                break;
            kp_sleep_usec(25 * KP_USEC_PER_MSEC);
        }
        uid_for(uid, sizeof(uid));
        nc = nodeclaim("prov-gated", uid, "prov-gate", NULL);
        r = T.prov.ops->create(T.prov.self, NULL, T.c, kp_nodeclaim_view(nc), &inst, &err);
        assert_int_equal(r, -KP_ENOTREADY);
        if (!pass) {
            assert_int_equal(err.kind, KP_PROVIDER_ERR_NODECLASS_NOT_READY);
            assert_string_equal(err.reason, "ProfileNotFound");
            assert_non_null(strstr(err.message, "profile nope not found"));
        } else {
            assert_int_equal(err.kind, KP_PROVIDER_ERR_CREATE);
            assert_string_equal(err.reason, KP_PROVIDER_REASON_READINESS_UNKNOWN);
        }
        kp_provider_err_done(&err);
        kp_entry_unref(nc);
    }
    kp_lab_check(kp_client_delete(T.c, &KP_RES_SSHNODECLASS, NULL, "prov-gate", NULL, NULL), NULL,
                 "delete prov-gate");

    /* No node class at all: insufficient capacity (the core deletes the NodeClaim). */
    uid_for(uid, sizeof(uid));
    nc = nodeclaim("prov-noclass", uid, "no-such-class", NULL);
    r = T.prov.ops->create(T.prov.self, NULL, T.c, kp_nodeclaim_view(nc), &inst, &err);
    assert_int_equal(r, -ENOSPC);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY);
    kp_provider_err_done(&err);
    kp_entry_unref(nc);
}

/* A node class without spec.cluster joins with the endpoint and CA of kube-public/cluster-info
 * (the reference's default); without that ConfigMap, Create is a configuration error that names
 * it, and the host stays Available. */
static void cluster_info_put(bool present)
{
    struct kp_error e = KP_ERROR_INIT;
    int r = kp_client_delete(T.c, &KP_RES_CONFIGMAP, "kube-public", "cluster-info", NULL, &e);

    if (r != -ENOENT)
        kp_lab_check(r, &e, "delete cluster-info");
    kp_error_done(&e);
    if (present) {
        char *ca = kp_lab_base64(T.lab.ca, T.lab.ca_len);
        char *kc = kp_strjoin("apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n"
                              "    certificate-authority-data: ",
                              ca, "\n    server: ", T.lab.api_url,
                              "\ncontexts: null\ncurrent-context: \"\"\nusers: null\n",
                              (const char *)NULL);
        json_t *o = kp_lab_obj_new("v1", "ConfigMap", "kube-public", "cluster-info");

        kp_lab_set(o, KP_JSON_PATH("data", "kubeconfig"), kc);
        kp_lab_create_or_replace(T.c, &KP_RES_CONFIGMAP, "kube-public", o);
        kp_free(kc);
        kp_free(ca);
    }
}

/* data.kubeconfig of kube-public/cluster-info (a new string), or NULL when there is none. */
static char *cluster_info_kubeconfig(void)
{
    json_t *o = NULL;
    const char *kc = NULL;
    char *s = NULL;
    int r = kp_client_get(T.c, &KP_RES_CONFIGMAP, "kube-public", "cluster-info", &o, NULL);

    if (r == -ENOENT)
        return NULL;
    assert_int_equal(r, 0);
    if (kp_json_pathv_str(o, KP_JSON_PATH("data", "kubeconfig"), &kc) == 0) {
        s = kp_strdup(kc);
        assert_non_null(s);
    }
    kp_json_unref(o);
    return s;
}

static void test_cluster_info(void **state)
{
    struct kp_provider_instance inst = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_entry *nc, *h, *n;
    json_t *o =
        kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHNodeClass", NULL, "prov-ci");
    char uid[64];
    char *lab_kc = cluster_info_kubeconfig(); /* the lab's own, from tests/lab/up.sh */
    int r;

    (void)state;
    kp_lab_set(o, KP_JSON_PATH("spec", "hostSelector", "matchLabels", KP_KPSSH_LABEL_HOST_CLASS),
               "prov-ci");
    kp_lab_set(o, KP_JSON_PATH("spec", "joinProfileRef", "name"), "prov-race");
    kp_lab_set(o, KP_JSON_PATH("spec", "vars", "adminToken"), T.admin_token);
    kp_lab_create_or_replace(T.c, &KP_RES_SSHNODECLASS, NULL, o);
    sshhost("ci-1", 3, "prov-ci", "prov-key"); /* host 2 is nokey-1's: one address, one host */
    kp_lab_wait_cached(T.inf_classes, "prov-ci");
    wait_cached_available("ci-1");

    cluster_info_put(false);
    uid_for(uid, sizeof(uid));
    nc = nodeclaim("prov-ci-a", uid, "prov-ci", NULL);
    r = T.prov.ops->create(T.prov.self, NULL, T.c, kp_nodeclaim_view(nc), &inst, &err);
    assert_true(r < 0);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_CREATE);
    assert_string_equal(err.reason, KP_PROVIDER_REASON_CONFIG);
    assert_non_null(strstr(err.message, "kube-public/cluster-info"));
    h = host_get("ci-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_AVAILABLE);
    assert_null(kp_sshhost_view(h)->claim_name);
    kp_entry_unref(h);
    kp_provider_err_done(&err);
    kp_entry_unref(nc);

    cluster_info_put(true);
    wait_cached_available("ci-1");
    uid_for(uid, sizeof(uid));
    nc = nodeclaim("prov-ci-b", uid, "prov-ci", NULL);
    r = T.prov.ops->create(T.prov.self, NULL, T.c, kp_nodeclaim_view(nc), &inst, &err);
    if (r < 0)
        fail_msg("Create with cluster-info: %s [%s/%s] %s", kp_strerror(r),
                 kp_provider_err_kind_name(err.kind), err.reason, err.message ? err.message : "");
    /* The join reached the API server at cluster-info's endpoint with its CA. */
    n = node_get("prov-ci-b");
    assert_non_null(n);
    assert_string_equal(kp_node_view(n)->provider_id, inst.provider_id);
    kp_entry_unref(n);
    kp_entry_unref(nc);
    nc = nodeclaim("prov-ci-b", uid, "prov-ci", inst.provider_id);
    assert_int_equal(T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(nc), &err), 0);
    assert_int_equal(kp_ssh_provider_delete_node(T.c, "prov-ci-b"), 0);
    kp_provider_instance_done(&inst);
    kp_provider_err_done(&err);
    kp_entry_unref(nc);
    /* Give the lab its own cluster-info back: tests after this one read it (test-rbac.c). */
    cluster_info_put(false);
    if (lab_kc) {
        o = kp_lab_obj_new("v1", "ConfigMap", "kube-public", "cluster-info");
        kp_lab_set(o, KP_JSON_PATH("data", "kubeconfig"), lab_kc);
        kp_lab_create_or_replace(T.c, &KP_RES_CONFIGMAP, "kube-public", o);
        kp_free(lab_kc);
    }
}

struct racer {
    pthread_t th;
    struct kp_client *c;
    struct kp_entry *nc;
    int r;
    struct kp_provider_err err;
    struct kp_provider_instance inst;
    struct kp_ssh_create_report rep;
};

static void *race_main(void *arg)
{
    struct racer *rc = arg;

    rc->r = kp_ssh_provider_create(T.sp, NULL, rc->c, kp_nodeclaim_view(rc->nc), &rc->inst,
                                   &rc->rep, &rc->err);
    return NULL;
}

/* Create returns at launch (the join script exited), not at registration: with a join whose
 * Node registers LATE_REGISTRATION_S after the script exits, Create is back before the Node
 * exists, the host is Claimed with its providerID and token, and once the Node appears the
 * host controller's verdict is InUse. The old contract waited for the Node inside Create. */
static void test_launch_before_registration(void **state)
{
    struct kp_provider_instance inst = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_ssh_create_report rep;
    struct kp_entry *nc, *nc_del, *h, *n = NULL;
    char uid[64];
    uint64_t t0, create_usec, node_usec = 0;
    int r;

    (void)state;
    if (kp_lab_host_sh(&T.lab, "add", LATE_HOST) != 0)
        fail_msg("host.sh add %u failed", LATE_HOST);
    T.late_added = true;
    sshhost("late-1", LATE_HOST, "prov-late", "prov-key");
    wait_cached_available("late-1");
    uid_for(uid, sizeof(uid));
    nc = nodeclaim("prov-late-a", uid, "prov-late", NULL);

    t0 = kp_mono_usec();
    r = kp_ssh_provider_create(T.sp, NULL, T.c, kp_nodeclaim_view(nc), &inst, &rep, &err);
    create_usec = kp_mono_usec() - t0;
    if (r < 0)
        fail_msg("Create: %s %s", kp_strerror(r), err.message ? err.message : "");
    n = node_get("prov-late-a");
    assert_null(n); /* launched, not registered */
    assert_true(create_usec < LATE_REGISTRATION_S * KP_USEC_PER_SEC);
    assert_int_equal(rep.registration_usec, 0);
    assert_string_equal(inst.provider_id, "kpssh://" POOL_NS "/late-1");
    h = host_get("late-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_CLAIMED);
    assert_string_equal(kp_sshhost_view(h)->provider_id, inst.provider_id);
    assert_non_null(kp_sshhost_view(h)->bootstrap_token_id);

    /* The Node comes later; the core would wait for it, here the test does. */
    for (int i = 0; i < 60 && !n; i++) {
        kp_sleep_usec(250 * 1000);
        n = node_get("prov-late-a");
    }
    assert_non_null(n);
    node_usec = kp_mono_usec() - t0;
    assert_string_equal(kp_node_view(n)->provider_id, inst.provider_id);
    assert_hostctl_marks_in_use(h, uid, kp_node_view(n)->provider_id);
    print_message("# launch: Create returned in %.0f ms (join %.0f ms); the Node registered "
                  "%.0f ms after Create began\n",
                  create_usec / 1e3, rep.join_usec / 1e3, node_usec / 1e3);
    kp_entry_unref(n);
    kp_entry_unref(h);

    /* A resumed Create of the launched claim answers the same instance, without a new join. */
    kp_provider_instance_done(&inst);
    assert_int_equal(
        kp_ssh_provider_create(T.sp, NULL, T.c, kp_nodeclaim_view(nc), &inst, &rep, &err), 0);
    assert_true(rep.resumed);
    assert_int_equal(rep.join_usec, 0);
    assert_string_equal(inst.provider_id, "kpssh://" POOL_NS "/late-1");

    nc_del = nodeclaim("prov-late-a", uid, "prov-late", inst.provider_id);
    assert_int_equal(T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(nc_del), &err),
                     0);
    assert_int_equal(kp_ssh_provider_delete_node(T.c, "prov-late-a"), 0);
    assert_int_equal(tokens_for("prov-late-a"), 0);
    kp_provider_instance_done(&inst);
    kp_provider_err_done(&err);
    kp_entry_unref(nc);
    kp_entry_unref(nc_del);
}

/* Adopt is the one mode whose Create waits for the Node, since the providerID is the Node's own:
 * under a deadline shorter than the registration the wait ends RETRYABLE with the claim kept;
 * resumed without one, Create returns the adopted providerID and writes InUse itself. */
static void test_adopt_waits(void **state)
{
    struct kp_provider_instance inst = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_ssh_create_report rep;
    struct kp_entry *nc, *nc_del, *h;
    struct kp_ctx ctx;
    char uid[64];
    uint64_t t0, took;
    int r;

    (void)state;
    assert_true(T.late_added); /* the launch test's host */
    wait_cached_available("late-1");
    uid_for(uid, sizeof(uid));
    nc = nodeclaim("prov-adopt-a", uid, "prov-adopt", NULL);

    kp_ctx_init(&ctx, NULL, kp_deadline_in(ADOPT_REGISTRATION_S * KP_USEC_PER_SEC / 2));
    t0 = kp_mono_usec();
    r = kp_ssh_provider_create(T.sp, &ctx, T.c, kp_nodeclaim_view(nc), &inst, &rep, &err);
    took = kp_mono_usec() - t0;
    print_message("# adopt: under a %d ms deadline Create ended after %.0f ms: %s\n",
                  ADOPT_REGISTRATION_S * 500, took / 1e3, err.message ? err.message : "");
    assert_int_equal(r, -ETIMEDOUT);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_RETRYABLE);
    h = host_get("late-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_CLAIMED);
    assert_string_equal(kp_sshhost_view(h)->claim_name, "prov-adopt-a");
    kp_entry_unref(h);

    kp_provider_err_done(&err);
    r = kp_ssh_provider_create(T.sp, NULL, T.c, kp_nodeclaim_view(nc), &inst, &rep, &err);
    if (r < 0)
        fail_msg("Create: %s %s", kp_strerror(r), err.message ? err.message : "");
    assert_true(rep.resumed);
    assert_true(rep.registration_usec > 0);
    assert_string_equal(inst.provider_id, "adopted:///lab/prov-adopt-a");
    h = host_get("late-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_IN_USE);
    assert_string_equal(kp_sshhost_view(h)->provider_id, "adopted:///lab/prov-adopt-a");
    assert_null(kp_sshhost_view(h)->bootstrap_token_id);
    kp_entry_unref(h);
    print_message("# adopt: resumed Create waited %.0f ms for the adopting Node\n",
                  rep.registration_usec / 1e3);

    nc_del = nodeclaim("prov-adopt-a", uid, "prov-adopt", inst.provider_id);
    assert_int_equal(T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(nc_del), &err),
                     0);
    assert_int_equal(kp_ssh_provider_delete_node(T.c, "prov-adopt-a"), 0);
    assert_int_equal(tokens_for("prov-adopt-a"), 0);
    kp_provider_instance_done(&inst);
    kp_provider_err_done(&err);
    kp_entry_unref(nc);
    kp_entry_unref(nc_del);
}

struct canceller {
    struct kp_ctx *ctx;
    uint64_t after_usec;
};

static void *cancel_main(void *arg)
{
    struct canceller *cl = arg;

    kp_sleep_usec(cl->after_usec);
    kp_ctx_cancel(cl->ctx);
    return NULL;
}

/* A Create in flight (its join runs a minute) ends within moments of its context being
 * cancelled, or of its deadline, with RETRYABLE; the claim stays so the next Create resumes.
 * A Delete cancelled in its leave keeps the host Leaving and claimed; the next one gives it back. */
static void test_create_cancelled(void **state)
{
    struct kp_provider_instance inst = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct canceller cl;
    struct kp_ctx ctx;
    struct kp_entry *nc, *h;
    pthread_t th;
    char uid[64];
    uint64_t t0, took;
    int r;

    (void)state;
    if (kp_lab_host_sh(&T.lab, "add", SLOW_HOST) != 0)
        fail_msg("host.sh add %u failed", SLOW_HOST);
    T.slow_added = true;
    sshhost("slow-1", SLOW_HOST, "prov-slow", "prov-key");
    wait_cached_available("slow-1");
    uid_for(uid, sizeof(uid));
    nc = nodeclaim("prov-slow-a", uid, "prov-slow", NULL);

    /* Cancelled 1.5 s in. */
    kp_ctx_init(&ctx, NULL, kp_deadline_never());
    cl.ctx = &ctx;
    cl.after_usec = 1500 * KP_USEC_PER_MSEC;
    assert_int_equal(pthread_create(&th, NULL, cancel_main, &cl), 0);
    t0 = kp_mono_usec();
    r = T.prov.ops->create(T.prov.self, &ctx, T.c, kp_nodeclaim_view(nc), &inst, &err);
    took = kp_mono_usec() - t0;
    assert_int_equal(pthread_join(th, NULL), 0);
    print_message("# cancel: Create ended %.0f ms after it began (cancelled at 1500 ms): %s\n",
                  took / 1e3, err.message ? err.message : "");
    assert_int_equal(r, -ECANCELED);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_RETRYABLE);
    assert_true(took < 5 * KP_USEC_PER_SEC);
    h = host_get("slow-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_CLAIMED);
    assert_string_equal(kp_sshhost_view(h)->claim_name, "prov-slow-a");
    assert_null(kp_sshhost_view(h)->provider_id); /* never launched */
    kp_entry_unref(h);

    /* Resumed under a 2 s deadline: the same claim, ended by the deadline. */
    kp_provider_err_done(&err);
    kp_ctx_init(&ctx, NULL, kp_deadline_in(2 * KP_USEC_PER_SEC));
    t0 = kp_mono_usec();
    r = T.prov.ops->create(T.prov.self, &ctx, T.c, kp_nodeclaim_view(nc), &inst, &err);
    took = kp_mono_usec() - t0;
    print_message("# deadline: Create ended %.0f ms after it began (deadline 2000 ms)\n",
                  took / 1e3);
    assert_int_equal(r, -ETIMEDOUT);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_RETRYABLE);
    assert_true(took < 6 * KP_USEC_PER_SEC);

    /* A Delete cancelled during its leave is RETRYABLE, not done: the host stays Leaving and
     * claimed, so the next Delete resumes the leave. */
    kp_provider_err_done(&err);
    kp_ctx_init(&ctx, NULL, kp_deadline_never());
    cl.after_usec = 1000 * KP_USEC_PER_MSEC;
    assert_int_equal(pthread_create(&th, NULL, cancel_main, &cl), 0);
    t0 = kp_mono_usec();
    r = T.prov.ops->delete (T.prov.self, &ctx, T.c, kp_nodeclaim_view(nc), &err);
    took = kp_mono_usec() - t0;
    assert_int_equal(pthread_join(th, NULL), 0);
    print_message("# cancel: Delete ended %.0f ms after it began (cancelled at 1000 ms): %s\n",
                  took / 1e3, err.message ? err.message : "");
    assert_int_equal(r, -ECANCELED);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_RETRYABLE);
    assert_true(took < 4 * KP_USEC_PER_SEC);
    h = host_get("slow-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_LEAVING);
    assert_string_equal(kp_sshhost_view(h)->claim_name, "prov-slow-a");
    kp_entry_unref(h);

    kp_provider_err_done(&err);
    assert_int_equal(T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(nc), &err), 0);
    h = host_get("slow-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_AVAILABLE);
    assert_null(kp_sshhost_view(h)->claim_name);
    kp_entry_unref(h);
    assert_int_equal(tokens_for("prov-slow-a"), 0);
    kp_provider_err_done(&err);
    kp_entry_unref(nc);
}

/* --- the launch pool ------------------------------------------------------------------------- */

/* What the pool provider's progress watcher has been told. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    unsigned told;
    char last[64];
} W = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, ""};

static void on_progress(void *ctx, const char *nodeclaim)
{
    (void)ctx;
    pthread_mutex_lock(&W.mu);
    W.told++;
    (void)snprintf(W.last, sizeof(W.last), "%s", nodeclaim);
    pthread_cond_broadcast(&W.cond);
    pthread_mutex_unlock(&W.mu);
}

static unsigned told(void)
{
    unsigned n;

    pthread_mutex_lock(&W.mu);
    n = W.told;
    pthread_mutex_unlock(&W.mu);
    return n;
}

/* Waits until the watcher has been told more than `seen` times (60 s at most); checks the name. */
static void wait_told(unsigned seen, const char *name)
{
    struct kp_deadline d = kp_deadline_in(60 * KP_USEC_PER_SEC);

    pthread_mutex_lock(&W.mu);
    while (W.told <= seen && !kp_deadline_expired(d))
        (void)kp_cond_wait_deadline(&W.cond, &W.mu, d);
    if (W.told <= seen) {
        pthread_mutex_unlock(&W.mu);
        fail_msg("the launch pool told nothing within 60 s (waiting for %s)", name);
    }
    assert_string_equal(W.last, name);
    pthread_mutex_unlock(&W.mu);
}

/* One call on the pool provider: it must answer without waiting for a host. */
static int timed_create(struct kp_provider *pp, struct kp_entry *nc,
                        struct kp_provider_instance *inst, struct kp_provider_err *err)
{
    uint64_t t0 = kp_mono_usec(), took;
    int r;

    kp_provider_err_done(err);
    r = pp->ops->create(pp->self, NULL, T.c, kp_nodeclaim_view(nc), inst, err);
    took = kp_mono_usec() - t0;
    print_message("# pool: Create answered %s in %.0f ms\n", r == 0 ? "launched" : kp_strerror(r),
                  took / 1e3);
    assert_true(took < 3 * KP_USEC_PER_SEC);
    return r;
}

static int timed_delete(struct kp_provider *pp, struct kp_entry *nc, struct kp_provider_err *err)
{
    uint64_t t0 = kp_mono_usec(), took;
    int r;

    kp_provider_err_done(err);
    r = pp->ops->delete (pp->self, NULL, T.c, kp_nodeclaim_view(nc), err);
    took = kp_mono_usec() - t0;
    print_message("# pool: Delete answered %s in %.0f ms\n", r == 0 ? "releasing" : kp_strerror(r),
                  took / 1e3);
    assert_true(took < 3 * KP_USEC_PER_SEC);
    return r;
}

static enum kp_host_state host_state(const char *name, char **ret_claim)
{
    struct kp_entry *h = host_get(name);
    enum kp_host_state st = kp_sshhost_view(h)->state;

    if (ret_claim)
        *ret_claim =
            kp_sshhost_view(h)->claim_name ? kp_strdup(kp_sshhost_view(h)->claim_name) : NULL;
    kp_entry_unref(h);
    return st;
}

/* The provider as the controller runs it, with a launch pool: Create and Delete never hold the
 * caller for an SSH phase. A cold launch is three short Creates (claim + install submitted;
 * marker + token + join submitted; providerID), each brought by the pool's notice; a Delete is
 * two (Leaving + leave submitted; release). A Delete during a running join cancels it: the
 * 60-second join ends at once (its end brings the NodeClaim back, and only then does the leave
 * start), and its host is left and released within seconds. */
static void test_pool(void **state)
{
    struct kp_ssh_provider_opts po = {0};
    struct kp_ssh_provider *sp = NULL;
    struct kp_provider pp;
    struct kp_provider_instance inst = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_entry *a = NULL, *b = NULL;
    unsigned seen, install0 = atomic_load(&P.install), join0 = atomic_load(&P.join),
                   leave0 = atomic_load(&P.leave), answers = 0;
    char uid[64], *claim = NULL;
    uint64_t t0;
    int r;

    (void)state;
    if (!T.slow_added) { /* the cancel test adds it; alone, this test does */
        if (kp_lab_host_sh(&T.lab, "add", SLOW_HOST) != 0)
            fail_msg("host.sh add %u failed", SLOW_HOST);
        T.slow_added = true;
        sshhost("slow-1", SLOW_HOST, "prov-slow", "prov-key");
    }
    profile("prov-pool", "sleep 1\n", "sleep 1\n", "sleep 1\n");
    nodeclass("prov-pool", "prov-slow", "prov-pool", NULL);
    kp_lab_wait_cached(T.inf_profiles, "prov-pool");
    kp_lab_wait_cached(T.inf_classes, "prov-pool");
    wait_cached_available("slow-1");

    provider_opts(&po);
    po.job_threads = 2;
    assert_int_equal(kp_ssh_provider_new(&po, &sp), 0);
    pp = kp_ssh_provider_as_provider(sp);
    assert_int_equal(pp.ops->watch_progress(pp.self, on_progress, &W), 0);
    /* Not started: nothing can run, and the claim waits for the next call. */
    uid_for(uid, sizeof(uid));
    a = nodeclaim("prov-pool-a", uid, "prov-pool", NULL);
    r = timed_create(&pp, a, &inst, &err);
    assert_int_equal(r, -ECANCELED);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_RETRYABLE);
    assert_int_equal(kp_ssh_provider_start(sp, NULL), 0);

    /* A cold launch: install, then join, each on the pool. */
    for (;;) {
        seen = told();
        r = timed_create(&pp, a, &inst, &err);
        if (r == 0)
            break;
        if (r != -EINPROGRESS)
            fail_msg("pool Create: %s [%s] %s", kp_strerror(r), kp_provider_err_kind_name(err.kind),
                     err.message ? err.message : "");
        assert_int_equal(err.kind, KP_PROVIDER_ERR_IN_PROGRESS);
        assert_true(++answers <= 2);
        assert_int_equal(host_state("slow-1", &claim), KP_HOST_CLAIMED);
        assert_string_equal(claim, "prov-pool-a");
        kp_free(claim);
        claim = NULL;
        wait_told(seen, "prov-pool-a");
    }
    assert_int_equal(answers, 2); /* install, join */
    assert_string_equal(inst.provider_id, "kpssh://" POOL_NS "/slow-1");
    assert_int_equal(atomic_load(&P.install) - install0, 1);
    assert_int_equal(atomic_load(&P.join) - join0, 1);
    {
        struct kp_entry *h = host_get("slow-1");

        assert_string_equal(kp_sshhost_view(h)->installed_profile, "prov-pool@1");
        assert_string_equal(kp_sshhost_view(h)->provider_id, "kpssh://" POOL_NS "/slow-1");
        assert_non_null(kp_sshhost_view(h)->bootstrap_token_id);
        kp_entry_unref(h);
    }
    assert_int_equal(tokens_for("prov-pool-a"), 1);
    /* Launched: a further Create answers from the host, without a job. */
    kp_provider_instance_done(&inst);
    assert_int_equal(timed_create(&pp, a, &inst, &err), 0);
    kp_provider_instance_done(&inst);

    /* Delete: Leaving and the leave submitted; the next call after it ended releases. */
    kp_entry_unref(a);
    a = nodeclaim("prov-pool-a", uid, "prov-pool", "kpssh://" POOL_NS "/slow-1");
    seen = told();
    assert_int_equal(timed_delete(&pp, a, &err), 0);
    assert_int_equal(host_state("slow-1", NULL), KP_HOST_LEAVING);
    assert_int_equal(timed_delete(&pp, a, &err), 0); /* still leaving: nothing new starts */
    wait_told(seen, "prov-pool-a");
    assert_int_equal(atomic_load(&P.leave) - leave0, 1);
    /* The call that releases the host says the instance is gone, so the Node may go at once. */
    assert_int_equal(timed_delete(&pp, a, &err), -ENOENT);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_NOT_FOUND);
    assert_int_equal(host_state("slow-1", NULL), KP_HOST_AVAILABLE);
    assert_int_equal(tokens_for("prov-pool-a"), 0);
    assert_int_equal(timed_delete(&pp, a, &err), -ENOENT);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_NOT_FOUND);
    wait_cached_available("slow-1");

    /* A Delete during a 60-second join (prov-slow: its install runs first, the marker being
     * prov-pool's now) cancels it; leave follows on the next call. */
    uid_for(uid, sizeof(uid));
    b = nodeclaim("prov-pool-b", uid, "prov-slow", NULL);
    seen = told();
    assert_int_equal(timed_create(&pp, b, &inst, &err), -EINPROGRESS); /* install */
    wait_told(seen, "prov-pool-b");
    assert_int_equal(timed_create(&pp, b, &inst, &err), -EINPROGRESS); /* join, 60 s */
    sleep(1);
    t0 = kp_mono_usec();
    seen = told();
    assert_int_equal(timed_delete(&pp, b, &err), 0); /* the join is cancelled */
    assert_int_equal(host_state("slow-1", NULL), KP_HOST_CLAIMED);
    /* The cancelled join keeps the key until its session has closed, then tells. */
    wait_told(seen, "prov-pool-b");
    print_message("# pool: the cancelled join ended %.0f ms after the Delete\n",
                  (kp_mono_usec() - t0) / 1e3);
    seen = told();
    assert_int_equal(timed_delete(&pp, b, &err), 0); /* Leaving, leave submitted */
    assert_int_equal(host_state("slow-1", NULL), KP_HOST_LEAVING);
    wait_told(seen, "prov-pool-b");
    assert_int_equal(timed_delete(&pp, b, &err), -ENOENT);
    print_message("# pool: the 60 s join cancelled, host left and released %.1f s after the "
                  "first Delete\n",
                  (kp_mono_usec() - t0) / 1e6);
    assert_true(kp_mono_usec() - t0 < 20 * KP_USEC_PER_SEC);
    assert_int_equal(host_state("slow-1", NULL), KP_HOST_AVAILABLE);
    assert_int_equal(tokens_for("prov-pool-b"), 0);

    kp_ssh_provider_stop(sp);
    pp.ops->unwatch_progress(pp.self, &W);
    sp = kp_ssh_provider_free(sp);
    kp_provider_err_done(&err);
    kp_entry_unref(a);
    kp_entry_unref(b);
}

/* The catalog against the lab's informer stores: one reference per get while nothing changes,
 * a new version once a host of the class changes availability, the old one still readable. */
static void test_catalog(void **state)
{
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_instance_catalog *a = NULL, *b = NULL;
    json_t *o = kp_lab_obj_new("karpenter.sh/v1", "NodePool", NULL, "prov");
    struct kp_entry *np = NULL;
    const struct kp_instance_type *it;

    (void)state;
    kp_lab_set(o, KP_JSON_PATH("metadata", "uid"), "np-uid");
    kp_lab_set(o, KP_JSON_PATH("metadata", "resourceVersion"), "1");
    kp_lab_set(o, KP_JSON_PATH("spec", "template", "spec", "nodeClassRef", "group"),
               KP_KPSSH_GROUP);
    kp_lab_set(o, KP_JSON_PATH("spec", "template", "spec", "nodeClassRef", "kind"), "SSHNodeClass");
    kp_lab_set(o, KP_JSON_PATH("spec", "template", "spec", "nodeClassRef", "name"), "prov-lab");
    assert_int_equal(kp_nodepool_project(o, &np), 0);
    kp_json_unref(o);
    wait_cached_available("lab-1");
    assert_int_equal(
        T.prov.ops->get_instance_types(T.prov.self, NULL, T.c, kp_nodepool_view(np), &a, &err), 0);
    assert_int_equal(
        T.prov.ops->get_instance_types(T.prov.self, NULL, T.c, kp_nodepool_view(np), &b, &err), 0);
    assert_ptr_equal(a, b);
    b = kp_instance_catalog_unref(b);
    it = kp_instance_catalog_find(a, "prov-lab");
    assert_non_null(it);
    assert_true(it->offerings[0].available);
    assert_string_equal(kp_offering_value(&it->offerings[0], KP_LABEL_ZONE), "pool");
    {
        /* Maintenance takes the class's only host out of the offering. */
        json_t *p = NULL;
        struct kp_error e = KP_ERROR_INIT;

        assert_int_equal(kp_json_patch_new(&p), 0);
        kp_lab_set(p, KP_JSON_PATH("metadata", "annotations", KP_KPSSH_ANNOTATION_MAINTENANCE),
                   "catalog test");
        kp_lab_check(kp_client_patch(T.c, &KP_RES_SSHHOST, POOL_NS, "lab-1", NULL, KP_PATCH_MERGE,
                                     p, NULL, &e),
                     &e, "maintenance on");
        kp_json_unref(p);
    }
    for (int i = 0; i < 100; i++) {
        b = kp_instance_catalog_unref(b);
        assert_int_equal(
            T.prov.ops->get_instance_types(T.prov.self, NULL, T.c, kp_nodepool_view(np), &b, &err),
            0);
        if (b->version != a->version)
            break;
        kp_sleep_usec(50 * 1000);
    }
    assert_true(b->version > a->version);
    assert_false(kp_instance_catalog_find(b, "prov-lab")->offerings[0].available);
    assert_true(it->offerings[0].available); /* the held catalog is as it was */
    {
        json_t *p = kp_lab_json("{\"metadata\":{\"annotations\":{\"" KP_KPSSH_ANNOTATION_MAINTENANCE
                                "\":null}}}");
        struct kp_error e = KP_ERROR_INIT;

        kp_lab_check(kp_client_patch(T.c, &KP_RES_SSHHOST, POOL_NS, "lab-1", NULL, KP_PATCH_MERGE,
                                     p, NULL, &e),
                     &e, "maintenance off");
        kp_json_unref(p);
    }
    print_message("# catalog: version %llu -> %llu on a maintenance annotation\n",
                  (unsigned long long)a->version, (unsigned long long)b->version);
    kp_instance_catalog_unref(a);
    kp_instance_catalog_unref(b);
    kp_provider_err_done(&err);
    kp_entry_unref(np);
}

static void test_race(void **state)
{
    static struct racer rc[RACE_CREATES];
    const char *rounds_env = getenv("KP_PROVIDER_RACE_ROUNDS");
    unsigned rounds = 25; /* the bar; KP_PROVIDER_RACE_ROUNDS=3 for a quick run */
    uint64_t worst = 0, lost_ok = 0, lost_all = 0, n_ok = 0, n_all = 0;

    (void)state;
    if (rounds_env && kp_safe_atou32(rounds_env, &rounds) < 0)
        fail_msg("bad KP_PROVIDER_RACE_ROUNDS");
    for (unsigned i = 0; i < RACE_HOSTS; i++) {
        char name[32];

        if (kp_lab_host_sh(&T.lab, "add", RACE_FIRST + i) != 0)
            fail_msg("host.sh add %u failed", RACE_FIRST + i);
        T.race_hosts_added[i] = true;
        (void)snprintf(name, sizeof(name), "race-%u", RACE_FIRST + i);
        sshhost(name, RACE_FIRST + i, "prov-race", "prov-key");
    }
    for (unsigned round = 1; round <= rounds; round++) {
        unsigned ok = 0, nocap = 0, other = 0, dup = 0;
        uint64_t t0;
        char hosts[RACE_HOSTS][32];
        size_t nhosts = 0;

        for (unsigned i = 0; i < RACE_HOSTS; i++) {
            char name[32];

            (void)snprintf(name, sizeof(name), "race-%u", RACE_FIRST + i);
            wait_cached_available(name);
        }
        for (unsigned i = 0; i < RACE_CREATES; i++) {
            char name[64], uid[64];

            memset(&rc[i], 0, sizeof(rc[i]));
            rc[i].err = (struct kp_provider_err)KP_PROVIDER_ERR_INIT;
            (void)snprintf(name, sizeof(name), "race-r%u-c%u", round, i);
            uid_for(uid, sizeof(uid));
            rc[i].nc = nodeclaim(name, uid, "prov-race", NULL);
            assert_int_equal(kp_client_clone(T.c, &rc[i].c), 0);
        }
        t0 = kp_mono_usec();
        for (unsigned i = 0; i < RACE_CREATES; i++)
            assert_int_equal(pthread_create(&rc[i].th, NULL, race_main, &rc[i]), 0);
        for (unsigned i = 0; i < RACE_CREATES; i++)
            assert_int_equal(pthread_join(rc[i].th, NULL), 0);
        t0 = kp_mono_usec() - t0;
        if (t0 > worst)
            worst = t0;
        for (unsigned i = 0; i < RACE_CREATES; i++) {
            lost_all += rc[i].rep.races_lost;
            n_all++;
            if (rc[i].r == 0) {
                lost_ok += rc[i].rep.races_lost;
                n_ok++;
                ok++;
                for (size_t j = 0; j < nhosts; j++)
                    dup += kp_streq(hosts[j], rc[i].rep.host);
                if (nhosts < RACE_HOSTS)
                    assert_int_equal(kp_strscpy(hosts[nhosts++], sizeof(hosts[0]), rc[i].rep.host),
                                     0);
            } else if (rc[i].err.kind == KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY)
                nocap++;
            else {
                other++;
                print_message("# racer %u: %s [%s] %s\n", i, kp_strerror(rc[i].r),
                              kp_provider_err_kind_name(rc[i].err.kind),
                              rc[i].err.message ? rc[i].err.message : "");
            }
        }
        /* The server's view: every race host claimed once, by a winner. */
        for (unsigned i = 0; i < RACE_HOSTS; i++) {
            char name[32];
            struct kp_entry *h;
            unsigned holders = 0;

            (void)snprintf(name, sizeof(name), "race-%u", RACE_FIRST + i);
            h = host_get(name);
            for (unsigned j = 0; j < RACE_CREATES; j++)
                holders += rc[j].r == 0 && kp_streq(rc[j].rep.host, name) &&
                           kp_streq(kp_sshhost_view(h)->claim_name, rc[j].nc->name) &&
                           kp_streq(kp_sshhost_view(h)->claim_uid, rc[j].nc->uid);
            if (holders != 1 || kp_sshhost_view(h)->state != KP_HOST_CLAIMED ||
                !kp_sshhost_view(h)->provider_id)
                fail_msg("round %u: host %s has %u winning holders, state %s", round, name, holders,
                         kp_host_state_name(kp_sshhost_view(h)->state));
            kp_entry_unref(h);
        }
        print_message("# race round %u: %u ok on %zu distinct hosts, %u insufficient capacity, "
                      "%u other, %u double claims, %.0f ms\n",
                      round, ok, nhosts, nocap, other, dup, t0 / 1e3);
        assert_int_equal(ok, RACE_HOSTS);
        assert_int_equal(nhosts, RACE_HOSTS);
        assert_int_equal(dup, 0);
        assert_int_equal(nocap, RACE_CREATES - RACE_HOSTS);
        assert_int_equal(other, 0);
        if (round == 1)
            for (unsigned i = 0; i < RACE_CREATES; i++)
                if (rc[i].r == 0) {
                    print_report("race", &rc[i].rep);
                    break;
                }
        /* Give every host back through Delete, as the core would, and drop the Nodes. */
        for (unsigned i = 0; i < RACE_CREATES; i++) {
            if (rc[i].r == 0) {
                struct kp_entry *del =
                    nodeclaim(rc[i].nc->name, rc[i].nc->uid, "prov-race", rc[i].inst.provider_id);
                struct kp_provider_err e2 = KP_PROVIDER_ERR_INIT;
                int r = T.prov.ops->delete (T.prov.self, NULL, T.c, kp_nodeclaim_view(del), &e2);

                if (r < 0)
                    fail_msg("race delete %s: %s", rc[i].nc->name, e2.message ? e2.message : "");
                assert_int_equal(kp_ssh_provider_delete_node(T.c, rc[i].nc->name), 0);
                kp_provider_err_done(&e2);
                kp_entry_unref(del);
                assert_int_equal(tokens_for(rc[i].nc->name), 0);
            }
            kp_provider_instance_done(&rc[i].inst);
            kp_provider_err_done(&rc[i].err);
            kp_entry_unref(rc[i].nc);
            kp_client_free(rc[i].c);
        }
    }
    print_message("# race: %u rounds passed, slowest round %.0f ms\n", rounds, worst / 1e3);
    /* A Create that wins loses a race for each host it tried first; one that finds the pool
     * full has lost to every host. */
    print_message("# race: lost CAS rounds per Create: %.2f for the %llu that won a host, %.2f "
                  "over all %llu\n",
                  n_ok ? (double)lost_ok / (double)n_ok : 0.0, (unsigned long long)n_ok,
                  n_all ? (double)lost_all / (double)n_all : 0.0, (unsigned long long)n_all);
}

/* A key Secret whose knownHost is present but blank (a templated Secret with an empty variable):
 * Create refuses it as a configuration error naming the field, the host is released Available,
 * nothing runs on it and no host key is pinned on first use. */
static void test_blank_pin(void **state)
{
    struct kp_provider_instance inst = {0};
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_entry *nc, *h;
    char *key_path = kp_lab_env_need(&T.lab, "KPSSH_LAB_SSH_KEY");
    char *pem = kp_lab_read_file(key_path, NULL);
    json_t *o = kp_lab_obj_new("v1", "Secret", POOL_NS, "prov-blank-pin");
    unsigned installs = atomic_load(&P.install);
    char uid[64];
    int r;

    (void)state;
    kp_lab_set(o, KP_JSON_PATH("stringData", "privateKey"), pem);
    kp_lab_set(o, KP_JSON_PATH("stringData", "knownHost"), " \n");
    kp_wipe(pem, strlen(pem));
    kp_free(pem);
    kp_free(key_path);
    kp_lab_create_or_replace(T.c, &KP_RES_SECRET, POOL_NS, o);
    nodeclass("prov-blank-pin", "prov-blank-pin", "prov-race", T.admin_token);
    /* Host 2 is nokey-1's (test_config_error is done with it): one address, one SSHHost, so
     * nokey-1 goes first, from the API and from the provider's cache. */
    r = kp_client_delete(T.c, &KP_RES_SSHHOST, POOL_NS, "nokey-1", NULL, NULL);
    assert_true(r == 0 || r == -ENOENT);
    for (int k = 0;; k++) {
        struct kp_entry *old = NULL;

        if (kp_store_get(kp_informer_store(T.inf_hosts), POOL_NS "/nokey-1", &old) < 0)
            break;
        kp_entry_unref(old);
        if (k > 300)
            fail_msg("nokey-1 never left the host cache");
        kp_sleep_usec(50 * KP_USEC_PER_MSEC);
    }
    sshhost("blank-pin-1", 2, "prov-blank-pin", "prov-blank-pin");
    kp_lab_wait_cached(T.inf_classes, "prov-blank-pin");
    wait_cached_available("blank-pin-1");

    uid_for(uid, sizeof(uid));
    nc = nodeclaim("prov-blank-pin", uid, "prov-blank-pin", NULL);
    r = T.prov.ops->create(T.prov.self, NULL, T.c, kp_nodeclaim_view(nc), &inst, &err);
    assert_true(r < 0);
    assert_int_equal(err.kind, KP_PROVIDER_ERR_CREATE);
    assert_string_equal(err.reason, KP_PROVIDER_REASON_CONFIG);
    assert_non_null(strstr(err.message, "data.knownHost is present but empty"));
    h = host_get("blank-pin-1");
    assert_int_equal(kp_sshhost_view(h)->state, KP_HOST_AVAILABLE);
    assert_null(kp_sshhost_view(h)->claim_name);
    assert_null(kp_sshhost_view(h)->host_key_fingerprint); /* never trusted on first use */
    kp_entry_unref(h);
    assert_int_equal(atomic_load(&P.install), installs); /* nothing ran on the host */
    kp_provider_err_done(&err);
    kp_entry_unref(nc);
    /* Best effort: the lab goes away after the run anyway. */
    r = kp_client_delete(T.c, &KP_RES_SSHHOST, POOL_NS, "blank-pin-1", NULL, NULL);
    r |= kp_client_delete(T.c, &KP_RES_SSHNODECLASS, NULL, "prov-blank-pin", NULL, NULL);
    r |= kp_client_delete(T.c, &KP_RES_SECRET, POOL_NS, "prov-blank-pin", NULL, NULL);
    (void)r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),    cmocka_unit_test(test_config_error),
        cmocka_unit_test(test_cluster_info), cmocka_unit_test(test_launch_before_registration),
        cmocka_unit_test(test_adopt_waits),  cmocka_unit_test(test_create_cancelled),
        cmocka_unit_test(test_pool),         cmocka_unit_test(test_catalog),
        cmocka_unit_test(test_race),         cmocka_unit_test(test_blank_pin),
    };
    int r;

    (void)argc;
    (void)argv;
    kp_log_set_level(KP_LOG_WARN);
    r = cmocka_run_group_tests_name("provider", tests, setup, teardown);
    return r;
}
