/* tests/integration/test-crash.c: crash convergence of Karpenter's core and the SSH provider in
 * kpssh-controller.
 *
 * Two processes run, and both are killed with SIGKILL at random moments and started again:
 *   kpssh-controller  the real binary (KPSSH_CONTROLLER_BIN) with a short Lease: the core's
 *                   NodeClaim lifecycle and Node termination controllers launch, register and
 *                   terminate; the host controller probes the two pool hosts, releases stale
 *                   claims and collects spent tokens. It is killed every 0.5 .. 6 s, at every
 *                   step of a cycle: the finalizer write, the claim, the token mint, the join,
 *                   the registration sync, the Node's termination, the leave, the release.
 *   the driver      this binary run as `itest-crash --driver`, playing the provisioner's part for
 *                   CRASH_CYCLES cycles over real NodeClaim objects: create a NodeClaim, wait
 *                   until it is Registered, delete it, wait until it is gone. It keeps no state of
 *                   its own (a progress ConfigMap counts the cycles). Killed with every fourth
 *                   controller kill; a restarted driver sometimes deletes an unfinished launch at
 *                   once, so the core must release a host whose launch it had begun.
 *
 * Done means: every cycle completes, and within the convergence bound every host is Available
 * with no claim and no token id, and no bootstrap-token Secret, Node or NodeClaim of the test is
 * left (no finalizer stuck). The join script registers the Node through the API (as
 * test-provider.c's race profile does) so a cycle takes seconds, not a kubelet's TLS bootstrap.
 *
 * Figures printed: kills of each process, cycles, wall time, time to converge after the last
 * cycle. Seed: KP_CRASH_SEED (default: from the clock), printed so a failure can be replayed.
 * KP_CRASH_ABANDON=1 makes every restarted driver delete an unfinished launch (by default half of
 * them do), to exercise that path on purpose: the un-synced Node such a launch left must go with
 * the host's release, not stay behind as the next claim's second Node. */
#include "kp-lab.h"
#include "kp-test.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "k8s/status.h"
#include "k8s/store.h"

#define NS "kpssh-crash"
#define CLASS "crash"
#define PROGRESS "crash-progress"
#define FINALIZER "karpenter.sh/termination"
#define CRASH_CYCLES 20
#define CRASH_KILLS 30 /* at most this many controller kills; the driver dies with every fourth */
#define HOST_FIRST 141
#define N_HOSTS 2
#define CONVERGE_SECONDS 150

static struct {
    struct kp_lab lab;
    struct kp_client *c;
    char *admin_token, *repo, *kubeconfig, *workdir;
    uint64_t rng;
    pid_t ctl, drv;    /* the parent's children while they run, else 0 */
    struct kp_buf why; /* the first leftover count_leftovers() saw */
    bool clean;        /* the test cleaned up after itself */
} T;

/* --- small helpers ------------------------------------------------------------------------- */

/* Deletes an object and waits until it is gone (finalizers included). */
static void delete_wait(const struct kp_resource *res, const char *ns, const char *name)
{
    struct kp_error e = KP_ERROR_INIT;
    int r = kp_client_delete(T.c, res, ns, name, NULL, &e);

    if (r != -ENOENT)
        kp_lab_check(r, &e, "delete");
    kp_error_done(&e);
    for (int i = 0; i < 300; i++) {
        json_t *o = NULL;

        if (kp_client_get(T.c, res, ns, name, &o, NULL) == -ENOENT)
            return;
        kp_json_unref(o);
        kp_sleep_usec(100 * KP_USEC_PER_MSEC);
    }
    fail_msg("%s %s was not deleted in 30 s", res->kind, name);
}

static int atoi_lab(void)
{
    const char *s = getenv("KPSSH_LAB_ID");
    uint32_t id = 0;

    if (s && kp_safe_atou32(s, &id) < 0)
        fail_msg("bad KPSSH_LAB_ID %s", s);
    return (int)id;
}

static uint64_t rnd(uint64_t below)
{
    return kp_rand_below(&T.rng, below);
}

/* --- the driver: a NodeClaim user that survives SIGKILL ------------------------------------ */

/* cycles done, and the ConfigMap's resourceVersion for the CAS that bumps it. */
static unsigned progress_get(char *rv, size_t rv_size)
{
    struct kp_error e = KP_ERROR_INIT;
    const char *s = NULL, *v = NULL;
    json_t *o = NULL;
    uint32_t n = 0;

    kp_lab_check(kp_client_get(T.c, &KP_RES_CONFIGMAP, NS, PROGRESS, &o, &e), &e, "progress");
    assert_int_equal(kp_json_pathv_str(o, KP_JSON_PATH("data", "done"), &s), 0);
    assert_int_equal(kp_safe_atou32(s, &n), 0);
    assert_int_equal(kp_json_pathv_str(o, KP_JSON_PATH("metadata", "resourceVersion"), &v), 0);
    assert_int_equal(kp_strscpy(rv, rv_size, v), 0);
    kp_json_unref(o);
    return n;
}

static void progress_bump(unsigned done, const char *rv)
{
    struct kp_error e = KP_ERROR_INIT;
    char num[16];
    json_t *p = NULL;

    (void)snprintf(num, sizeof(num), "%u", done + 1);
    assert_int_equal(kp_json_patch_new(&p), 0);
    kp_lab_set(p, KP_JSON_PATH("metadata", "resourceVersion"), rv);
    kp_lab_set(p, KP_JSON_PATH("data", "done"), num);
    kp_lab_check(
        kp_client_patch(T.c, &KP_RES_CONFIGMAP, NS, PROGRESS, NULL, KP_PATCH_MERGE, p, NULL, &e),
        &e, "progress bump");
    kp_json_unref(p);
}

/* The NodeClaim as the server has it (projected), or NULL when it does not exist. */
static struct kp_entry *nodeclaim_get(const char *name)
{
    struct kp_error e = KP_ERROR_INIT;
    struct kp_entry *v = NULL;
    json_t *o = NULL;
    int r = kp_client_get(T.c, &KP_RES_NODECLAIM, NULL, name, &o, &e);

    if (r == -ENOENT) {
        kp_error_done(&e);
        return NULL;
    }
    kp_lab_check(r, &e, "get nodeclaim");
    assert_int_equal(kp_nodeclaim_project(o, &v), 0);
    kp_json_unref(o);
    return v;
}

/* A NodeClaim as the provisioner would make it: no finalizer (the core's lifecycle controller
 * adds it before it launches). */
static void nodeclaim_create(const char *name)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *o = kp_lab_obj_new("karpenter.sh/v1", "NodeClaim", NULL, name);
    int r;

    /* The labels the provisioner gives every NodeClaim (Karpenter's NodeClaim template): the
     * Node inherits them at registration, and they make it a managed Node whose termination
     * finalizer the core lets go even when its NodeClaim went first. */
    kp_lab_set(o, KP_JSON_PATH("metadata", "labels", "karpenter.sh/nodepool"), "crash");
    kp_lab_set(o, KP_JSON_PATH("metadata", "labels", KP_KPSSH_GROUP "/sshnodeclass"), CLASS);
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "group"), KP_KPSSH_GROUP);
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "kind"), "SSHNodeClass");
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "name"), CLASS);
    assert_int_equal(
        kp_json_patch_set_steal(o, KP_JSON_PATH("spec", "requirements"),
                                kp_lab_json("[{\"key\":\"karpenter.sh/capacity-type\","
                                            "\"operator\":\"In\",\"values\":[\"on-demand\"]}]")),
        0);
    kp_lab_set(o, KP_JSON_PATH("spec", "resources", "requests", "cpu"), "100m");
    r = kp_client_create(T.c, &KP_RES_NODECLAIM, NULL, o, NULL, &e);
    if (r != -EEXIST)
        kp_lab_check(r, &e, "create nodeclaim");
    kp_error_done(&e);
    kp_json_unref(o);
}

static void nodeclaim_delete(const char *name)
{
    struct kp_error e = KP_ERROR_INIT;
    int r = kp_client_delete(T.c, &KP_RES_NODECLAIM, NULL, name, NULL, &e);

    if (r != -ENOENT)
        kp_lab_check(r, &e, "delete nodeclaim");
    kp_error_done(&e);
}

static bool registered(const struct kp_nodeclaim_view *nc)
{
    const struct kp_condition *c = kp_conditions_get(&nc->conditions, "Registered");

    return c && c->status == KP_COND_TRUE;
}

/* One cycle, resumable from whatever the cluster shows: create the NodeClaim, wait until the core
 * has launched it and its Node registered, delete it, wait until the core has let it go. A driver
 * restarted by a kill sometimes deletes an unfinished launch at once (the provisioner would, when
 * its pods went away): the core must then release whatever that launch had claimed. */
static void driver_cycle(unsigned n, bool fresh_start)
{
    char name[32];
    struct kp_entry *e;
    bool gone = false;

    (void)snprintf(name, sizeof(name), "crash-%02u", n);
    if (!(e = nodeclaim_get(name))) {
        nodeclaim_create(name);
        print_message("# driver: created %s\n", name);
        e = nodeclaim_get(name);
        assert_non_null(e);
    }
    if (fresh_start && !kp_nodeclaim_view(e)->meta.deletion_usec &&
        !registered(kp_nodeclaim_view(e)) && (getenv("KP_CRASH_ABANDON") || rnd(2) == 0)) {
        print_message("# driver: deleting the unfinished launch of %s\n", name);
        nodeclaim_delete(name);
    }
    for (int i = 0; i < 1800 && e && !kp_nodeclaim_view(e)->meta.deletion_usec &&
                    !registered(kp_nodeclaim_view(e));
         i++) {
        kp_entry_unref(e);
        kp_sleep_usec(100 * KP_USEC_PER_MSEC);
        e = nodeclaim_get(name);
    }
    if (e && !kp_nodeclaim_view(e)->meta.deletion_usec) {
        if (!registered(kp_nodeclaim_view(e)))
            fail_msg("%s never registered", name);
        print_message("# driver: %s registered (node %s), deleting it\n", name,
                      kp_nodeclaim_view(e)->node_name ? kp_nodeclaim_view(e)->node_name : "?");
        nodeclaim_delete(name);
    }
    kp_entry_unref(e);
    for (int i = 0; i < 1800; i++) {
        if (!(e = nodeclaim_get(name))) {
            gone = true;
            break;
        }
        kp_entry_unref(e);
        kp_sleep_usec(100 * KP_USEC_PER_MSEC);
    }
    if (!gone)
        fail_msg("%s was never released", name);
    print_message("# driver: %s gone\n", name);
}

static void test_driver(void **state)
{
    char rv[64];
    unsigned done;
    bool first = true;

    (void)state;
    while ((done = progress_get(rv, sizeof(rv))) < CRASH_CYCLES) {
        driver_cycle(done, first);
        first = false;
        progress_bump(done, rv);
    }
}

/* --- the parent: set-up, kills, convergence -------------------------------------------------- */

static pid_t start(const char *const *argv, const char *log)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int r;

    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600), 0);
    assert_int_equal(posix_spawn_file_actions_adddup2(&fa, 1, 2), 0);
    {
        /* posix_spawn's argv is char *const[] for historical reasons; it does not write it. */
        union {
            const char *const *c;
            char *const *m;
        } av = {.c = argv};

        r = posix_spawn(&pid, argv[0], &fa, NULL, av.m, environ);
    }
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        fail_msg("cannot start %s: %s", argv[0], strerror(r));
    return pid;
}

/* Waits for pid at most usec; its exit status, or -1 when it is still running. */
static int wait_for(pid_t pid, uint64_t usec)
{
    uint64_t end = kp_mono_usec() + usec;
    int st;

    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);

        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        assert_int_equal(w, 0);
        if (kp_mono_usec() >= end)
            return -1;
        kp_sleep_usec(50 * KP_USEC_PER_MSEC);
    }
}

/* SIGKILLs *pid, reaps it and clears *pid. */
static void kill_wait(pid_t *pid)
{
    assert_int_equal(kill(*pid, SIGKILL), 0);
    assert_int_not_equal(wait_for(*pid, 10 * KP_USEC_PER_SEC), -1);
    *pid = 0;
}

static pid_t start_controller(void)
{
    char *bin = getenv("KPSSH_CONTROLLER_BIN");
    char port_m[16], port_h[16], *log;
    pid_t pid;

    if (!bin || !*bin)
        fail_msg("KPSSH_CONTROLLER_BIN is not set (ctest sets it for integration tests)");
    (void)snprintf(port_m, sizeof(port_m), "%d", 31005 + 10 * atoi_lab());
    (void)snprintf(port_h, sizeof(port_h), "%d", 31006 + 10 * atoi_lab());
    {
        const char *argv[] = {bin,
                              "--kubeconfig",
                              T.kubeconfig,
                              "--pool-namespace",
                              NS,
                              "--leader-election-name",
                              "kpssh-crash",
                              "--leader-election-lease-duration",
                              "4s",
                              "--leader-election-renew-deadline",
                              "3s",
                              "--leader-election-retry-period",
                              "500ms",
                              "--probe-interval",
                              "10s",
                              "--probe-timeout",
                              "5s",
                              "--metrics-port",
                              port_m,
                              "--health-probe-port",
                              port_h,
                              NULL};

        log = kp_strjoin(T.workdir, "/controller.log", (const char *)NULL);
        pid = start(argv, log);
        kp_free(log);
    }
    return pid;
}

/* What is left of the test's cycles: hosts not Available or still holding something, token
 * Secrets, Nodes and NodeClaims. A description of the first leftover into buf; 0 when none. */
struct leftovers {
    unsigned n;
    struct kp_buf *why;
};

static void leftover(struct leftovers *l, const char *fmt, ...) KP_PRINTF(2, 3);
static void leftover(struct leftovers *l, const char *fmt, ...)
{
    va_list ap;

    if (l->n++)
        return;
    va_start(ap, fmt);
    assert_int_equal(kp_buf_vprintf(l->why, fmt, ap), 0);
    va_end(ap);
}

static int host_page(const struct kp_list_page *page, void *ud)
{
    for (size_t i = 0; i < kp_json_array_size(page->items); i++) {
        struct kp_entry *e = NULL;
        const struct kp_sshhost_view *h;

        assert_int_equal(kp_sshhost_project(kp_json_array_at(page->items, i), &e), 0);
        h = kp_sshhost_view(e);
        if (h->state != KP_HOST_AVAILABLE || h->claim_name || h->bootstrap_token_id ||
            h->provider_id)
            leftover(ud, "host %s is %s (or holds a claim or token)", h->e.name,
                     kp_host_state_name(h->state));
        kp_entry_unref(e);
    }
    return 0;
}

static int named_page(const struct kp_list_page *page, void *ud)
{
    for (size_t i = 0; i < kp_json_array_size(page->items); i++) {
        const char *name = NULL, *desc = NULL, *kind = NULL;
        json_t *it = kp_json_array_at(page->items, i);

        assert_int_equal(kp_json_pathv_str(it, KP_JSON_PATH("metadata", "name"), &name), 0);
        if (kp_json_pathv_str(it, KP_JSON_PATH("kind"), &kind) < 0)
            kind = NULL;
        if (kp_startswith(name, "crash-"))
            leftover(ud, "%s %s is left", kind ? kind : "object", name);
        /* Bootstrap tokens name their NodeClaim in the (base64) description. */
        if (kp_json_pathv_str(it, KP_JSON_PATH("data", "description"), &desc) == 0) {
            struct kp_buf d = KP_BUF_INIT(4096);

            if (kp_base64_decode(desc, strlen(desc), 0, &d) == 0 &&
                strstr(kp_buf_str(&d), "nodeclaim crash-"))
                leftover(ud, "bootstrap token %s (%s) is left", name, kp_buf_str(&d));
            kp_buf_done(&d);
        }
    }
    return 0;
}

static unsigned count_leftovers(struct kp_buf *why)
{
    struct leftovers l = {.n = 0, .why = why};
    struct kp_list_opts tok = {.field_selector = "type=bootstrap.kubernetes.io/token"};
    struct kp_error e = KP_ERROR_INIT;

    kp_buf_truncate(why, 0);
    kp_lab_check(kp_client_list(T.c, &KP_RES_SSHHOST, NS, NULL, host_page, &l, NULL, &e), &e,
                 "list hosts");
    kp_lab_check(kp_client_list(T.c, &KP_RES_SECRET, "kube-system", &tok, named_page, &l, NULL, &e),
                 &e, "list tokens");
    kp_lab_check(kp_client_list(T.c, &KP_RES_NODE, NULL, NULL, named_page, &l, NULL, &e), &e,
                 "list nodes");
    kp_lab_check(kp_client_list(T.c, &KP_RES_NODECLAIM, NULL, NULL, named_page, &l, NULL, &e), &e,
                 "list nodeclaims");
    return l.n;
}

/* The join registers the Node through the API as a kubelet would (test-provider.c's race
 * profile), so a cycle costs seconds. */
static const char join_sh[] =
    "body=$(printf '{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\"},"
    "\"spec\":{\"providerID\":\"%s\"}}' \"$KPSSH_NODE_NAME\" \"$KPSSH_PROVIDER_ID\")\n"
    "printf '%s' \"$KPSSH_CLUSTER_CA_B64\" | base64 -d > /tmp/kpssh-crash-ca.crt\n"
    "code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert /tmp/kpssh-crash-ca.crt "
    "-H \"Authorization: Bearer $KPSSH_VAR_adminToken\" -H 'Content-Type: application/json' "
    "-X POST \"$KPSSH_CLUSTER_ENDPOINT/api/v1/nodes\" -d \"$body\")\n"
    "case $code in 201|409) ;; *) echo \"node create: HTTP $code\" >&2; exit 1 ;; esac\n";

static int setup(void **state)
{
    const char *seed = getenv("KP_CRASH_SEED");

    (void)state;
    kp_lab_load(&T.lab);
    T.c = kp_lab_admin_client(&T.lab);
    T.kubeconfig = kp_strjoin(T.lab.dir, "/pki/admin.kubeconfig", (const char *)NULL);
    T.repo = kp_strdup(getenv("KP_REPO") ? getenv("KP_REPO") : ".");
    T.admin_token = kp_lab_admin_token(&T.lab);
    T.rng = kp_mono_usec();
    if (seed && kp_safe_atou64(seed, &T.rng) < 0)
        fail_msg("bad KP_CRASH_SEED %s", seed);
    T.rng ^= (uint64_t)getpid() << 32;
    T.why = (struct kp_buf)KP_BUF_INIT(4096);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    T.c = kp_client_free(T.c);
    kp_free(T.kubeconfig);
    kp_free(T.repo);
    kp_free(T.workdir);
    if (T.admin_token)
        kp_wipe(T.admin_token, strlen(T.admin_token));
    kp_free(T.admin_token);
    kp_lab_done(&T.lab);
    return 0;
}

/* Strips a cluster-scoped object's finalizers and deletes it, quietly: it may not exist. */
static void let_go(const struct kp_resource *res, const char *name)
{
    json_t *p = kp_lab_json("{\"metadata\":{\"finalizers\":null}}");

    if (kp_client_patch(T.c, res, NULL, name, NULL, KP_PATCH_MERGE, p, NULL, NULL) == 0 &&
        kp_client_delete(T.c, res, NULL, name, NULL, NULL) < 0)
        print_message("# %s %s: not deleted\n", res->kind, name);
    kp_json_unref(p);
}

/* The parent's teardown: whatever a failed run left must not outlive it. A controller still
 * running would act on the NodeClaims of the tests that come after (NodeClaims are cluster
 * scoped, and so is the core's view), and a NodeClaim held by our finalizer would wait forever. */
static int teardown_parent(void **state)
{
    pid_t *kids[] = {&T.drv, &T.ctl};

    for (size_t i = 0; i < KP_ARRAY_SIZE(kids); i++)
        if (*kids[i] > 0 && kill(*kids[i], SIGKILL) == 0) {
            (void)waitpid(*kids[i], NULL, 0);
            *kids[i] = 0;
        }
    for (unsigned i = 0; T.c && !T.clean && i < CRASH_CYCLES; i++) {
        char name[32];

        (void)snprintf(name, sizeof(name), "crash-%02u", i);
        let_go(&KP_RES_NODECLAIM, name);
    }
    if (T.c && !T.clean) {
        const struct kp_resource *res[] = {&KP_RES_SSHNODECLASS, &KP_RES_SSHJOINPROFILE};
        const char *names[] = {CLASS, "crash"};

        for (size_t i = 0; i < KP_ARRAY_SIZE(res); i++)
            let_go(res[i], names[i]);
    }
    for (unsigned i = 0; T.c && !T.clean && i < N_HOSTS; i++)
        (void)kp_lab_host_sh(&T.lab, "del", HOST_FIRST + i);
    kp_buf_done(&T.why);
    return teardown(state);
}

static void objects(void)
{
    char *ca;
    json_t *o;

    kp_lab_apply_crds(&T.lab);
    kp_lab_ensure_namespace(T.c, NS);
    kp_lab_key_secret(&T.lab, T.c, NS, "crash-key");

    o = kp_lab_obj_new("v1", "ConfigMap", NS, PROGRESS);
    kp_lab_set(o, KP_JSON_PATH("data", "done"), "0");
    kp_lab_create_or_replace(T.c, &KP_RES_CONFIGMAP, NS, o);

    o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHJoinProfile", NULL, "crash");
    kp_lab_set(o, KP_JSON_PATH("spec", "version"), "1");
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "install"), "mkdir -p /var/lib/kpssh\n");
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "join"), join_sh);
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "leave"), "true\n");
    kp_lab_create_or_replace(T.c, &KP_RES_SSHJOINPROFILE, NULL, o);

    o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHNodeClass", NULL, CLASS);
    ca = kp_lab_base64(T.lab.ca, T.lab.ca_len);
    kp_lab_set(o, KP_JSON_PATH("spec", "hostSelector", "matchLabels", KP_KPSSH_LABEL_HOST_CLASS),
               CLASS);
    kp_lab_set(o, KP_JSON_PATH("spec", "joinProfileRef", "name"), "crash");
    kp_lab_set(o, KP_JSON_PATH("spec", "cluster", "endpoint"), T.lab.api_url);
    kp_lab_set(o, KP_JSON_PATH("spec", "cluster", "caBundle"), ca);
    kp_lab_set(o, KP_JSON_PATH("spec", "vars", "adminToken"), T.admin_token);
    kp_free(ca);
    kp_lab_create_or_replace(T.c, &KP_RES_SSHNODECLASS, NULL, o);

    for (unsigned i = 0; i < N_HOSTS; i++) {
        char name[32], *ip;

        assert_int_equal(kp_lab_host_sh(&T.lab, "add", HOST_FIRST + i), 0);
        (void)snprintf(name, sizeof(name), "crash-host-%u", i);
        ip = kp_lab_host_ip(&T.lab, HOST_FIRST + i);
        o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHHost", NS, name);
        kp_lab_set(o, KP_JSON_PATH("metadata", "labels", KP_KPSSH_LABEL_HOST_CLASS), CLASS);
        kp_lab_set(o, KP_JSON_PATH("spec", "address"), ip);
        kp_lab_set(o, KP_JSON_PATH("spec", "sshKeySecretRef", "name"), "crash-key");
        kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "cpu"), "2");
        kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "memory"), "2Gi");
        kp_lab_create_or_replace(T.c, &KP_RES_SSHHOST, NS, o);
        kp_free(ip);
    }
}

static pid_t start_driver(void)
{
    char *log = kp_strjoin(T.workdir, "/driver.log", (const char *)NULL);
    const char *argv[] = {"/proc/self/exe", "--driver", NULL};
    pid_t pid = start(argv, log);

    kp_free(log);
    return pid;
}

static void dump_logs(void)
{
    static const char *const files[] = {"/driver.log", "/controller.log"};

    for (size_t i = 0; i < KP_ARRAY_SIZE(files); i++) {
        char *path = kp_strjoin(T.workdir, files[i], (const char *)NULL);
        size_t len = 0;
        char *s = kp_lab_read_file(path, &len);
        size_t from = len > 6000 ? len - 6000 : 0;

        print_message("# --- last of %s ---\n%s\n", files[i], s + from);
        kp_free(s);
        kp_free(path);
    }
}

/* The last lines of the controller's log that name what (a stuck NodeClaim), each cut to 400
 * bytes: the tail of the log alone is mostly start-ups. */
static void dump_lines_about(const char *what)
{
    char *path = kp_strjoin(T.workdir, "/controller.log", (const char *)NULL);
    char *s = kp_lab_read_file(path, NULL);
    const char *lines[60];
    size_t n = 0;

    for (char *p = s, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        if ((nl = strchr(p, '\n')))
            *nl = '\0';
        if (strstr(p, what))
            lines[n++ % KP_ARRAY_SIZE(lines)] = p;
        if (!nl)
            break;
    }
    print_message("# --- the controller's last %zu lines about %s (of %zu; all in %s) ---\n",
                  n < KP_ARRAY_SIZE(lines) ? n : KP_ARRAY_SIZE(lines), what, n, T.workdir);
    for (size_t i = n > KP_ARRAY_SIZE(lines) ? n - KP_ARRAY_SIZE(lines) : 0; i < n; i++)
        print_message("%.400s\n", lines[i % KP_ARRAY_SIZE(lines)]);
    kp_free(s);
    kp_free(path);
}

static unsigned count_in(const char *s, const char *what)
{
    unsigned n = 0;

    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* What the kills interrupted, from the driver's log: launches deleted before they finished. */
static void driver_summary(void)
{
    char *path = kp_strjoin(T.workdir, "/driver.log", (const char *)NULL);
    char *s = kp_lab_read_file(path, NULL);

    print_message("# driver: %u cycles registered, %u unfinished launches deleted\n",
                  count_in(s, " registered (node "), count_in(s, "deleting the unfinished launch"));
    kp_free(s);
    kp_free(path);
}

static void remove_workdir(void)
{
    static const char *const files[] = {"/driver.log", "/controller.log"};

    for (size_t i = 0; i < KP_ARRAY_SIZE(files); i++) {
        char *path = kp_strjoin(T.workdir, files[i], (const char *)NULL);

        (void)unlink(path);
        kp_free(path);
    }
    (void)rmdir(T.workdir);
}

static void test_crash_convergence(void **state)
{
    unsigned driver_kills = 0, controller_kills = 0, left;
    uint64_t t0, t_cycles, t_conv;
    int st = -1;

    (void)state;
    {
        char tmpl[] = "/tmp/kpssh-crash-XXXXXX"; /* the two processes' logs */

        assert_non_null(mkdtemp(tmpl));
        T.workdir = kp_strdup(tmpl);
        assert_non_null(T.workdir);
    }
    print_message("# seed %llu (KP_CRASH_SEED replays it)\n", (unsigned long long)T.rng);
    objects();
    T.ctl = start_controller();
    /* The controller's probe makes the pool Available. */
    for (int i = 0; i < 120; i++) {
        if (count_leftovers(&T.why) == 0)
            break;
        kp_sleep_usec(KP_USEC_PER_SEC);
    }
    if (count_leftovers(&T.why) != 0) {
        dump_logs();
        fail_msg("the pool never became Available: %s", kp_buf_str(&T.why));
    }

    t0 = kp_mono_usec();
    T.drv = start_driver();
    while (controller_kills < CRASH_KILLS) {
        /* 0.5 .. 6 s into a controller's run: its start-up (the Lease of the killed one expires
         * after 4 s), launches, registrations, terminations and every step between them. */
        st = wait_for(T.drv, 500 * KP_USEC_PER_MSEC + rnd(5500) * KP_USEC_PER_MSEC);
        if (st >= 0)
            break;
        kill_wait(&T.ctl);
        controller_kills++;
        if (controller_kills % 4 == 0) {
            kill_wait(&T.drv);
            driver_kills++;
            T.drv = start_driver();
        }
        T.ctl = start_controller();
    }
    if (st < 0)
        st = wait_for(T.drv, 600 * KP_USEC_PER_SEC);
    if (st >= 0)
        T.drv = 0; /* reaped */
    t_cycles = kp_mono_usec() - t0;
    if (st != 0) {
        char rv[64], name[32];

        if (st < 0)
            kill_wait(&T.drv);
        dump_logs();
        (void)snprintf(name, sizeof(name), "crash-%02u", progress_get(rv, sizeof(rv)));
        dump_lines_about(name);
        fail_msg("the driver did not finish its cycles: status %d", st);
    }
    /* Convergence: the host controller releases what the kills left claimed. */
    t0 = kp_mono_usec();
    for (int i = 0; i < CONVERGE_SECONDS; i++) {
        if ((left = count_leftovers(&T.why)) == 0)
            break;
        kp_sleep_usec(KP_USEC_PER_SEC);
    }
    t_conv = kp_mono_usec() - t0;
    print_message("# %u cycles in %.1f s with %u driver kills and %u controller kills; converged "
                  "%.1f s after the last cycle\n",
                  CRASH_CYCLES, t_cycles / 1e6, driver_kills, controller_kills, t_conv / 1e6);
    driver_summary();
    if (left) {
        dump_logs();
        fail_msg("not converged after %d s: %u leftovers, first: %s", CONVERGE_SECONDS, left,
                 kp_buf_str(&T.why));
    }
    /* The converged pool as the controller's /metrics shows it. */
    {
        char url[64], *out = NULL;
        const char *argv[] = {"curl", "-sS", "--max-time", "5", url, NULL};
        bool pool = false, probes = false;

        (void)snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", 31005 + 10 * atoi_lab());
        for (int i = 0; i < 60 && !(pool && probes); i++) { /* a restarted controller re-syncs */
            kp_free(out);
            out = NULL;
            if (kp_lab_run(argv, 10 * KP_USEC_PER_SEC, KP_LAB_RUN_QUIET, &out) == 0) {
                pool = strstr(out, "\nkpssh_pool_hosts{state=\"Available\",class=\"" CLASS
                                   "\"} 2\n") != NULL;
                probes = strstr(out, "\nkpssh_host_probe_duration_seconds_count{outcome="
                                     "\"success\"} 0\n") == NULL &&
                         strstr(out, "\nkpssh_host_probe_duration_seconds_count{outcome="
                                     "\"success\"} ") != NULL;
            }
            if (!(pool && probes))
                kp_sleep_usec(500 * KP_USEC_PER_MSEC);
        }
        if (!pool || !probes)
            fail_msg("/metrics: pool gauge %s, probe histogram %s:\n%s", pool ? "ok" : "wrong",
                     probes ? "ok" : "empty", out ? out : "(no answer)");
        kp_free(out);
    }
    /* Clean up while the controller runs: it lets go of the class's finalizer. */
    delete_wait(&KP_RES_SSHNODECLASS, NULL, CLASS);
    delete_wait(&KP_RES_SSHJOINPROFILE, NULL, "crash");
    assert_int_equal(kill(T.ctl, SIGTERM), 0);
    assert_int_equal(wait_for(T.ctl, 30 * KP_USEC_PER_SEC), 0);
    T.ctl = 0;
    for (unsigned i = 0; i < N_HOSTS; i++)
        (void)kp_lab_host_sh(&T.lab, "del", HOST_FIRST + i);
    T.clean = true;
    remove_workdir();
}

int main(int argc, char **argv)
{
    const struct CMUnitTest driver[] = {
        cmocka_unit_test_setup_teardown(test_driver, setup, teardown),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_crash_convergence, setup, teardown_parent),
    };

    if (argc > 1 && strcmp(argv[1], "--driver") == 0)
        return kp_test_main("crash-driver", driver, KP_ARRAY_SIZE(driver), NULL, 0, 1, argv);
    return kp_test_main("crash", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
