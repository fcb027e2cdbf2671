/* tests/integration/test-hostctl.c: the SSH host controller (provider/ssh/hostctl.h) running
 * against the lab: a real kube-apiserver with our CRDs, the lab's sshd hosts 1..3, informers,
 * an event recorder, and shortened intervals (probe every 2 s, 5 s timeout).
 *
 *   pool         three hosts Pending -> Available: TOFU pins, observed capacity and arch, Ready
 *                True; host 3's spec claims 4 CPUs, so it gets one CapacityDrift event
 *   maintenance  the annotation parks host 2 (Maintenance, lastProbeTime frozen); removing it
 *                brings it back through Pending to Available
 *   claims       host 1 claimed for a real NodeClaim with a minted bootstrap token: its Node
 *                registers -> InUse with the providerID, the spent token is collected; the
 *                NodeClaim is force-deleted -> stale-claim release -> Pending -> Available
 *   zombie       host 1 (install marker, a Node with its InternalIP) "reboots" with kubelet
 *                enabled -> Leaving -> leave ran -> Node deleted -> Available
 *   zombie_resume  host 1 left Leaving with its Node still there (a kill between leave and the
 *                Node delete) -> the next probe deletes the Node -> Available; a Node with the
 *                same address created after the leave started is not touched
 *   foreign      host 2 (no marker, no Node) with an active kubelet -> Unhealthy/ForeignKubelet,
 *                kubelet untouched
 *   foreign_node host 2 (no marker) with its own Node (another providerID): ForeignKubelet, and
 *                the Node survives the owner restarting that kubelet; with kpssh's providerID
 *                but no marker: parked too (no leave)
 *   rekey        host 3 gets a new host key -> Unhealthy with a man-in-the-middle error, never
 *                re-pinned; clearing status.hostKeyFingerprint (the operator's fix) re-pins
 *   unreachable  host 3 cut off -> Unhealthy (event ProbeFailed); healed -> Available (event
 *                ProbeSucceeded)
 *
 * Probe durations and the zombie guard's wall time are printed. The kubelet of these scenarios
 * is the lab's systemctl stand-in running `sleep`: the guard only asks `systemctl is-active`. */
#include "kp-lab.h"
#include "kp-test.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "k8s/rfc3339.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "api/obj-node.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "provider/ssh/hostctl.h"
#include "provider/ssh/observe.h"
#include "provider/ssh/token.h"

#define NHOSTS 3
#define PROFILE "hostctl-zombie"
#define WAIT_SECONDS 60

static struct {
    struct kp_lab lab;
    char ns[64];
    struct kp_client *c;
    char *key_path, *repo;
    struct kp_informer *inf_hosts, *inf_nodes, *inf_claims, *inf_profiles;
    struct kp_events *events;
    struct kp_ssh_hostctl *hc;
    unsigned serial;
} T;

/* --- the observer ------------------------------------------------------------------------- */

static struct {
    atomic_uint_fast64_t probes_ok, probes_err, probe_usec, probe_max;
    atomic_uint_fast64_t leaves, left, parked, leave_failed;
} O;

static void obs_probe(void *ctx, bool ok, uint64_t usec)
{
    uint_fast64_t max;

    (void)ctx;
    atomic_fetch_add(ok ? &O.probes_ok : &O.probes_err, 1);
    if (ok)
        atomic_fetch_add(&O.probe_usec, usec);
    max = atomic_load(&O.probe_max);
    while (ok && usec > max && !atomic_compare_exchange_weak(&O.probe_max, &max, usec))
        ;
}

static void obs_phase(void *ctx, const char *phase, bool ok, uint64_t usec)
{
    (void)ctx;
    (void)ok;
    (void)usec;
    if (kp_streq(phase, KP_SSH_PHASE_LEAVE))
        atomic_fetch_add(&O.leaves, 1);
}

static void obs_zombie(void *ctx, const char *action)
{
    (void)ctx;
    if (kp_streq(action, KP_SSH_ZOMBIE_LEFT))
        atomic_fetch_add(&O.left, 1);
    else if (kp_streq(action, KP_SSH_ZOMBIE_PARKED_FOREIGN))
        atomic_fetch_add(&O.parked, 1);
    else if (kp_streq(action, KP_SSH_ZOMBIE_LEAVE_FAILED))
        atomic_fetch_add(&O.leave_failed, 1);
}

static const struct kp_ssh_observer observer = {
    .probe = obs_probe, .phase = obs_phase, .zombie = obs_zombie};

/* --- lab helpers --------------------------------------------------------------------------- */

static char *host_name(unsigned i)
{
    char buf[32];

    (void)snprintf(buf, sizeof(buf), "hc-%u", i);
    return kp_strdup(buf);
}

/* Host i's static providerID, kpssh://<pool-ns>/hc-<i>: what its kubelet registers with. */
static char *static_pid(unsigned i)
{
    char buf[128];

    (void)snprintf(buf, sizeof(buf), "kpssh://%s/hc-%u", T.ns, i);
    return kp_strdup(buf);
}

/* --- API helpers -------------------------------------------------------------------------- */

static void create(const struct kp_resource *res, const char *ns, json_t *obj, json_t **ret)
{
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_check(kp_client_create(T.c, res, ns, obj, ret, &e), &e, "create");
    kp_error_done(&e);
    kp_json_unref(obj);
}

static void patch_status(const struct kp_resource *res, const char *ns, const char *name, json_t *p)
{
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_check(kp_client_patch(T.c, res, ns, name, "status", KP_PATCH_MERGE, p, NULL, &e), &e,
                 "status patch");
    kp_error_done(&e);
    kp_json_unref(p);
}

static void delete_obj(const struct kp_resource *res, const char *ns, const char *name)
{
    int r = kp_client_delete(T.c, res, ns, name, NULL, NULL);

    assert_true(r == 0 || r == -ENOENT);
}

static struct kp_entry *host_get(unsigned i)
{
    char *name = host_name(i);
    struct kp_entry *h = kp_lab_sshhost_get(T.c, T.ns, name);

    kp_free(name);
    return h;
}

#define HV(e) kp_sshhost_view(e)

/* Polls host i from the API until state (and, with a substring, lastProbeError containing it);
 * fails after WAIT_SECONDS. Returns the host. saw_leaving (optional) notes a Leaving seen. */
static struct kp_entry *wait_state(unsigned i, enum kp_host_state want, const char *err_sub,
                                   bool *saw_leaving)
{
    struct kp_deadline dl = kp_deadline_in(WAIT_SECONDS * KP_USEC_PER_SEC);
    enum kp_host_state last = KP_HOST_STATE_UNKNOWN;

    for (;;) {
        struct kp_entry *h = host_get(i);

        last = HV(h)->state;
        if (saw_leaving && last == KP_HOST_LEAVING)
            *saw_leaving = true;
        if (last == want &&
            (!err_sub || (HV(h)->last_probe_error && strstr(HV(h)->last_probe_error, err_sub))))
            return h;
        if (kp_deadline_expired(dl))
            fail_msg("host hc-%u: want %s%s%s, still %s (lastProbeError: %s)", i,
                     kp_host_state_name(want), err_sub ? " with " : "", err_sub ? err_sub : "",
                     kp_host_state_name(last),
                     HV(h)->last_probe_error ? HV(h)->last_probe_error : "-");
        kp_entry_unref(h);
        kp_sleep_usec(100 * KP_USEC_PER_MSEC);
    }
}

static const char *ready_reason(const struct kp_sshhost_view *h, enum kp_cond_status *ret)
{
    const struct kp_condition *c = kp_conditions_get(&h->conditions, "Ready");

    assert_non_null(c);
    *ret = c->status;
    return c->reason;
}

/* Events about host i with this reason (events.k8s.io, the pool namespace), once the recorder
 * has written what it queued. */
static unsigned events_for(unsigned i, const char *reason)
{
    char *name = host_name(i);
    unsigned n;

    assert_int_equal(kp_events_flush(T.events, 10 * KP_USEC_PER_SEC), 0);
    n = kp_lab_events_count(T.c, T.ns, name, reason);
    kp_free(name);
    return n;
}

/* events_for once at least n are there (at most 10 s): the controller emits an event after the
 * status write a test waits for, so the two are seen in either order. */
static unsigned events_at_least(unsigned i, const char *reason, unsigned n)
{
    uint64_t until = kp_mono_usec() + 10 * KP_USEC_PER_SEC;
    unsigned got;

    while ((got = events_for(i, reason)) < n && kp_mono_usec() < until)
        kp_sleep_usec(100 * KP_USEC_PER_MSEC);
    return got;
}

/* A Node as a kubelet would register it (spec.providerID, an InternalIP), through the API. */
static void node_create(const char *name, const char *provider_id, const char *ip)
{
    json_t *o = kp_lab_obj_new("v1", "Node", NULL, name);

    kp_lab_set(o, KP_JSON_PATH("metadata", "labels", "kpssh-test"), "hostctl");
    if (provider_id)
        kp_lab_set(o, KP_JSON_PATH("spec", "providerID"), provider_id);
    delete_obj(&KP_RES_NODE, NULL, name);
    create(&KP_RES_NODE, NULL, o, NULL);
    if (ip)
        patch_status(&KP_RES_NODE, NULL, name,
                     kp_lab_json("{\"status\":{\"addresses\":[{\"type\":\"InternalIP\","
                                 "\"address\":\"%s\"}]}}",
                                 ip));
}

static bool node_exists(const char *name)
{
    json_t *o = NULL;
    int r = kp_client_get(T.c, &KP_RES_NODE, NULL, name, &o, NULL);

    kp_json_unref(o);
    return r == 0;
}

static bool token_exists(const char *id)
{
    char name[64];
    json_t *o = NULL;
    int r;

    (void)snprintf(name, sizeof(name), "bootstrap-token-%s", id);
    r = kp_client_get(T.c, &KP_RES_SECRET, KP_TOKEN_NAMESPACE, name, &o, NULL);
    kp_json_unref(o);
    return r == 0;
}

/* Waits until the controller's host cache holds host i's current server version (a status
 * patch of ours must not race a write based on an older read). Best effort: after 5 s the test
 * goes on without it. */
static void wait_cached(unsigned i, const char *rv)
{
    char *name = host_name(i), key[128];

    (void)snprintf(key, sizeof(key), "%s/%s", T.ns, name);
    (void)kp_lab_cached(T.inf_hosts, key, rv, 5 * KP_USEC_PER_SEC);
    kp_free(name);
}

/* Writes status (a JSON object, stolen) on host i the way a controller does: a merge patch with
 * the resourceVersion just read as its precondition. The host controller writes lastProbeTime on
 * every probe, so a lost race is normal: read again and retry, as any CAS writer must. */
static void host_status_cas(unsigned i, json_t *status)
{
    char *name = host_name(i);

    for (unsigned attempt = 0;; attempt++) {
        struct kp_error e = KP_ERROR_INIT;
        struct kp_entry *h = host_get(i);
        json_t *p;
        int r;

        wait_cached(i, h->rv);
        p = kp_lab_json("{\"metadata\":{\"resourceVersion\":\"%s\"}}", h->rv);
        assert_int_equal(kp_json_patch_set_steal(p, KP_JSON_PATH("status"), kp_json_ref(status)),
                         0);
        kp_entry_unref(h);
        r = kp_client_patch(T.c, &KP_RES_SSHHOST, T.ns, name, "status", KP_PATCH_MERGE, p, NULL,
                            &e);
        kp_json_unref(p);
        if (r == -KP_ECONFLICT && attempt < 20) {
            kp_error_done(&e);
            continue;
        }
        kp_lab_check(r, &e, "host status CAS");
        kp_error_done(&e);
        break;
    }
    kp_json_unref(status);
    kp_free(name);
}

/* --- fixture ------------------------------------------------------------------------------- */

static void sshhost(unsigned i, const char *cpu)
{
    char *name = host_name(i), *ip = kp_lab_host_ip(&T.lab, i);
    json_t *o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHHost", T.ns, name);

    kp_lab_set(o, KP_JSON_PATH("spec", "address"), ip);
    kp_lab_set(o, KP_JSON_PATH("spec", "sshKeySecretRef", "name"), "hc-key");
    kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "cpu"), cpu);
    kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "memory"), "4Gi");
    create(&KP_RES_SSHHOST, T.ns, o, NULL);
    kp_free(name);
    kp_free(ip);
}

static const char leave_script[] = "systemctl disable --now kubelet >/dev/null 2>&1 || true\n"
                                   "mkdir -p /var/lib/kpssh\n"
                                   "date +%s >> /var/lib/kpssh/hostctl-left\n";

/* A host as the lab made it: no kubelet unit or drop-in, no marker. */
static const char host_reset[] = "systemctl disable --now kubelet >/dev/null 2>&1; rm -rf "
                                 "/etc/systemd/system/kubelet.service "
                                 "/etc/systemd/system/kubelet.service.d "
                                 "/var/lib/kpssh/hostctl-left";

/* A kubelet unit the lab's systemctl runs as a plain daemon. */
static const char kubelet_unit[] =
    "rm -rf /etc/systemd/system/kubelet.service.d && mkdir -p /etc/systemd/system && "
    "printf '[Service]\\nExecStart=/bin/sleep 100000\\n' > /etc/systemd/system/kubelet.service";

static int setup(void **state)
{
    struct kp_ssh_hostctl_opts ho = {0};
    struct kp_events_opts eo = {.controller = KP_HOSTCTL_EVENTS_COMPONENT, .instance = "itest"};
    char *pem;
    json_t *o;

    (void)state;
    kp_lab_setup_namespace(&T.lab, "hostctl", T.ns, sizeof(T.ns));
    T.lab.host_timeout_usec = 120 * KP_USEC_PER_SEC;
    T.c = kp_lab_admin_client(&T.lab);
    T.key_path = kp_lab_env_need(&T.lab, "KPSSH_LAB_SSH_KEY");
    T.repo = kp_strdup(getenv("KP_REPO") ? getenv("KP_REPO") : ".");
    kp_lab_apply_crds(&T.lab);
    /* Hosts as the lab made them: no kubelet unit, no marker. */
    for (unsigned i = 1; i <= NHOSTS; i++)
        (void)kp_lab_host_exec(&T.lab, i, host_reset);

    pem = kp_lab_read_file(T.key_path, NULL);
    o = kp_lab_obj_new("v1", "Secret", T.ns, "hc-key");
    kp_lab_set(o, KP_JSON_PATH("stringData", "privateKey"), pem);
    kp_wipe(pem, strlen(pem));
    kp_free(pem);
    create(&KP_RES_SECRET, T.ns, o, NULL);

    o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHJoinProfile", NULL, PROFILE);
    kp_lab_set(o, KP_JSON_PATH("spec", "version"), "1");
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "install"), "true\n");
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "join"), "true\n");
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "leave"), leave_script);
    kp_lab_set(o, KP_JSON_PATH("spec", "timeouts", "leave"), "60s");
    delete_obj(&KP_RES_SSHJOINPROFILE, NULL, PROFILE);
    for (int k = 0; k < 50; k++) { /* until an old one is gone */
        json_t *old = NULL;

        if (kp_client_get(T.c, &KP_RES_SSHJOINPROFILE, NULL, PROFILE, &old, NULL) == -ENOENT)
            break;
        kp_json_unref(old);
        kp_sleep_usec(100 * KP_USEC_PER_MSEC);
    }
    create(&KP_RES_SSHJOINPROFILE, NULL, o, NULL);

    /* Host 3 claims more CPUs than the lab host has: one CapacityDrift. */
    sshhost(1, "2");
    sshhost(2, "2");
    sshhost(3, "4");

    T.inf_hosts = kp_lab_informer_new(T.c, &KP_RES_SSHHOST, T.ns, kp_sshhost_project);
    T.inf_nodes = kp_lab_informer_new(T.c, &KP_RES_NODE, NULL, kp_node_project);
    T.inf_claims = kp_lab_informer_new(T.c, &KP_RES_NODECLAIM, NULL, kp_nodeclaim_project);
    T.inf_profiles =
        kp_lab_informer_new(T.c, &KP_RES_SSHJOINPROFILE, NULL, kp_sshjoinprofile_project);
    assert_int_equal(kp_events_new(T.c, &eo, &T.events), 0);

    ho.pool_namespace = T.ns;
    ho.client = T.c;
    ho.hosts = T.inf_hosts;
    ho.nodes = T.inf_nodes;
    ho.nodeclaims = T.inf_claims;
    ho.profiles = T.inf_profiles;
    ho.events = T.events;
    ho.observer = &observer;
    ho.probe_interval_usec = 2 * KP_USEC_PER_SEC;
    ho.probe_timeout_usec = 5 * KP_USEC_PER_SEC;
    ho.claimed_recheck_usec = 2 * KP_USEC_PER_SEC;
    ho.token_recheck_usec = 1 * KP_USEC_PER_SEC;
    assert_int_equal(kp_ssh_hostctl_new(&ho, &T.hc), 0);
    assert_false(kp_ssh_hostctl_ready(T.hc));
    assert_int_equal(kp_informer_start(T.inf_hosts), 0);
    assert_int_equal(kp_informer_start(T.inf_nodes), 0);
    assert_int_equal(kp_informer_start(T.inf_claims), 0);
    assert_int_equal(kp_informer_start(T.inf_profiles), 0);
    assert_int_equal(kp_informer_wait_synced(T.inf_hosts, 60 * KP_USEC_PER_SEC), 0);
    assert_int_equal(kp_informer_wait_synced(T.inf_nodes, 60 * KP_USEC_PER_SEC), 0);
    assert_int_equal(kp_informer_wait_synced(T.inf_claims, 60 * KP_USEC_PER_SEC), 0);
    assert_int_equal(kp_informer_wait_synced(T.inf_profiles, 60 * KP_USEC_PER_SEC), 0);
    assert_int_equal(kp_ssh_hostctl_start(T.hc), 0);
    assert_true(kp_ssh_hostctl_ready(T.hc));
    return 0;
}

static int teardown(void **state)
{
    uint64_t ok = atomic_load(&O.probes_ok);

    (void)state;
    kp_ssh_hostctl_stop(T.hc);
    kp_informer_stop(T.inf_hosts);
    kp_informer_stop(T.inf_nodes);
    kp_informer_stop(T.inf_claims);
    kp_informer_stop(T.inf_profiles);
    T.hc = kp_ssh_hostctl_free(T.hc);
    print_message("# probes: %llu ok (mean %.1f ms, max %.1f ms), %llu failed\n",
                  (unsigned long long)ok, ok ? atomic_load(&O.probe_usec) / 1e3 / (double)ok : 0.0,
                  atomic_load(&O.probe_max) / 1e3, (unsigned long long)atomic_load(&O.probes_err));
    /* Give the lab back as it was: hosts up and reachable, no kubelet, known_hosts current. */
    (void)kp_lab_host_sh(&T.lab, "heal", 3);
    for (unsigned i = 1; i <= NHOSTS; i++)
        (void)kp_lab_host_exec(&T.lab, i, host_reset);
    {
        const char *argv[] = {T.lab.host_sh, "known-hosts", NULL};

        (void)kp_lab_run(argv, T.lab.host_timeout_usec, 0, NULL);
    }
    if (T.c) { /* best effort: the lab goes away after the run anyway */
        int r = kp_client_delete(T.c, &KP_RES_SSHJOINPROFILE, NULL, PROFILE, NULL, NULL);

        r |= kp_client_delete(T.c, &KP_RES_NODE, NULL, "hc-zombie", NULL, NULL);
        r |= kp_client_delete(T.c, &KP_RES_NODE, NULL, "hc-foreign", NULL, NULL);
        r |= kp_client_delete(T.c, &KP_RES_NODE, NULL, "hc-nc1", NULL, NULL);
        r |= kp_client_delete(T.c, &KP_RES_NODECLAIM, NULL, "hc-nc1", NULL, NULL);
        (void)r;
    }
    T.events = kp_events_free(T.events);
    T.inf_hosts = kp_informer_free(T.inf_hosts);
    T.inf_nodes = kp_informer_free(T.inf_nodes);
    T.inf_claims = kp_informer_free(T.inf_claims);
    T.inf_profiles = kp_informer_free(T.inf_profiles);
    T.c = kp_client_free(T.c);
    kp_free(T.key_path);
    kp_free(T.repo);
    kp_lab_teardown_namespace(&T.lab, T.ns);
    return 0;
}

/* --- scenarios ------------------------------------------------------------------------------ */

static void test_pool(void **state)
{
    uint64_t t0 = kp_mono_usec();

    (void)state;
    for (unsigned i = 1; i <= NHOSTS; i++) {
        struct kp_entry *h = wait_state(i, KP_HOST_AVAILABLE, NULL, NULL);
        const struct kp_sshhost_view *v = HV(h);
        enum kp_cond_status st;
        bool found = false;

        assert_non_null(v->host_key_fingerprint);
        assert_non_null(kp_startswith(v->host_key_fingerprint, "SHA256:"));
        assert_int_equal(kp_resources_get(&v->observed_capacity, "cpu", &found), 2000);
        assert_true(found);
        assert_int_equal(kp_resources_get(&v->observed_capacity, "memory", &found),
                         4096LL * 1024 * 1024 * 1000);
        assert_string_equal(v->observed_arch, "amd64");
        assert_int_equal(v->observed_generation, v->generation);
        assert_true(v->last_probe_usec > 0);
        assert_null(v->last_probe_error);
        assert_string_equal(ready_reason(v, &st), KP_HOSTCTL_REASON_SUCCEEDED);
        assert_int_equal(st, KP_COND_TRUE);
        kp_entry_unref(h);
    }
    print_message("# pool of %d Pending -> Available in %.0f ms\n", NHOSTS,
                  (kp_mono_usec() - t0) / 1e3);
    assert_int_equal(events_at_least(3, KP_HOSTCTL_EVENT_CAPACITY_DRIFT, 1), 1);
    assert_int_equal(events_for(1, KP_HOSTCTL_EVENT_CAPACITY_DRIFT), 0);
    /* A few more probes: still one drift event (only the transition into shortfall counts). */
    kp_sleep_usec(5 * KP_USEC_PER_SEC);
    assert_int_equal(events_for(3, KP_HOSTCTL_EVENT_CAPACITY_DRIFT), 1);
}

static void test_maintenance(void **state)
{
    struct kp_entry *h;
    enum kp_cond_status st;
    int64_t frozen;
    char *name = host_name(2);
    json_t *p = kp_lab_json("{\"metadata\":{\"annotations\":{\"" KP_KPSSH_ANNOTATION_MAINTENANCE
                            "\":\"disk swap\"}}}");
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    kp_lab_check(
        kp_client_patch(T.c, &KP_RES_SSHHOST, T.ns, name, NULL, KP_PATCH_MERGE, p, NULL, &e), &e,
        "annotate");
    kp_json_unref(p);
    h = wait_state(2, KP_HOST_MAINTENANCE, NULL, NULL);
    assert_string_equal(ready_reason(HV(h), &st), KP_HOSTCTL_REASON_MAINTENANCE);
    assert_int_equal(st, KP_COND_FALSE);
    frozen = HV(h)->last_probe_usec;
    kp_entry_unref(h);
    /* Three probe intervals: not probed (lastProbeTime frozen), still parked. */
    kp_sleep_usec(6 * KP_USEC_PER_SEC);
    h = host_get(2);
    assert_int_equal(HV(h)->state, KP_HOST_MAINTENANCE);
    assert_int_equal(HV(h)->last_probe_usec, frozen);
    kp_entry_unref(h);

    p = kp_lab_json("{\"metadata\":{\"annotations\":{\"" KP_KPSSH_ANNOTATION_MAINTENANCE
                    "\":null}}}");
    kp_lab_check(
        kp_client_patch(T.c, &KP_RES_SSHHOST, T.ns, name, NULL, KP_PATCH_MERGE, p, NULL, &e), &e,
        "unannotate");
    kp_json_unref(p);
    h = wait_state(2, KP_HOST_AVAILABLE, NULL, NULL);
    assert_true(HV(h)->last_probe_usec > frozen);
    kp_entry_unref(h);
    kp_error_done(&e);
    kp_free(name);
}

static void test_claims(void **state)
{
    struct kp_error e = KP_ERROR_INIT;
    struct kp_secret *token = NULL;
    struct kp_entry *h;
    char tok_id[KP_TOKEN_ID_SIZE], pid[256];
    const char *uid = NULL;
    json_t *nc = NULL, *o;
    char *name = host_name(1);
    enum kp_cond_status st;
    uint64_t t0;

    (void)state;
    /* A NodeClaim as the core would create it. */
    o = kp_lab_obj_new("karpenter.sh/v1", "NodeClaim", NULL, "hc-nc1");
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "group"), KP_KPSSH_GROUP);
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "kind"), "SSHNodeClass");
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "name"), "hc");
    assert_int_equal(
        kp_json_patch_set_steal(o, KP_JSON_PATH("spec", "requirements"), kp_lab_json("[]")), 0);
    delete_obj(&KP_RES_NODECLAIM, NULL, "hc-nc1");
    create(&KP_RES_NODECLAIM, NULL, o, &nc);
    assert_int_equal(kp_json_pathv_str(nc, KP_JSON_PATH("metadata", "uid"), &uid), 0);

    /* Claim host 1 the way Create does, with a live token recorded, and crash "after join". */
    kp_lab_check(kp_token_mint(T.c, KP_TOKEN_GROUP, "hc-nc1", tok_id, &token, &e), &e, "mint");
    kp_secret_free(token);
    host_status_cas(1, kp_lab_json("{\"state\":\"Claimed\",\"claimRef\":{\"name\":\"hc-nc1\","
                                   "\"uid\":\"%s\"},\"bootstrapTokenID\":\"%s\"}",
                                   uid, tok_id));
    /* Not registered yet: the claim is left alone (claimed hosts are never dialed). */
    kp_sleep_usec(3 * KP_USEC_PER_SEC);
    h = host_get(1);
    assert_int_equal(HV(h)->state, KP_HOST_CLAIMED);
    assert_string_equal(HV(h)->bootstrap_token_id, tok_id);
    kp_entry_unref(h);
    assert_true(token_exists(tok_id));

    /* The Node registers (as the kubelet would, with the static providerID): InUse (InUse means registered),
     * then the spent token is collected. */
    (void)snprintf(pid, sizeof(pid), "kpssh://%s/%s", T.ns, name);
    t0 = kp_mono_usec();
    node_create("hc-nc1", pid, NULL);
    h = wait_state(1, KP_HOST_IN_USE, NULL, NULL);
    print_message("# Node registered -> InUse in %.0f ms\n", (kp_mono_usec() - t0) / 1e3);
    assert_string_equal(HV(h)->provider_id, pid);
    assert_string_equal(ready_reason(HV(h), &st), KP_HOSTCTL_REASON_SUCCEEDED);
    kp_entry_unref(h);
    for (int k = 0; k < 300; k++) {
        h = host_get(1);
        if (!HV(h)->bootstrap_token_id)
            break;
        h = kp_entry_unref(h);
        kp_sleep_usec(100 * KP_USEC_PER_MSEC);
    }
    assert_non_null(h);
    assert_null(HV(h)->bootstrap_token_id);
    assert_int_equal(HV(h)->state, KP_HOST_IN_USE);
    kp_entry_unref(h);
    assert_false(token_exists(tok_id));

    /* Force-delete the NodeClaim: the claim is stale and released, the host probed back. */
    t0 = kp_mono_usec();
    delete_obj(&KP_RES_NODECLAIM, NULL, "hc-nc1");
    h = wait_state(1, KP_HOST_AVAILABLE, NULL, NULL);
    print_message("# NodeClaim deleted -> host released and Available in %.0f ms\n",
                  (kp_mono_usec() - t0) / 1e3);
    assert_null(HV(h)->claim_name);
    assert_null(HV(h)->provider_id);
    assert_null(HV(h)->bootstrap_token_id);
    kp_entry_unref(h);
    assert_true(events_at_least(1, KP_HOSTCTL_EVENT_STALE_CLAIM, 1) >= 1);
    delete_obj(&KP_RES_NODE, NULL, "hc-nc1");
    kp_json_unref(nc);
    kp_error_done(&e);
    kp_free(name);
}

static void test_zombie(void **state)
{
    struct kp_entry *h;
    char *ip = kp_lab_host_ip(&T.lab, 1), *name = host_name(1), *pid = static_pid(1);
    bool saw_leaving = false;
    uint64_t t0, wall;
    unsigned left0 = (unsigned)atomic_load(&O.left);

    (void)state;
    /* A warm host: kpssh installed its profile here once. */
    host_status_cas(1, kp_lab_json("{\"installedProfile\":\"" PROFILE "@1\"}"));
    /* Its old Node is still there (the core has not collected it) ... */
    node_create("hc-zombie", pid, ip);
    /* ... and it reboots with kubelet enabled. */
    assert_int_equal(kp_lab_host_exec(&T.lab, 1, kubelet_unit), 0);
    assert_int_equal(kp_lab_host_exec(&T.lab, 1, "systemctl enable kubelet"), 0);
    t0 = kp_mono_usec();
    assert_int_equal(kp_lab_host_sh(&T.lab, "reboot", 1), 0);
    for (int k = 0; k < 100 && kp_lab_host_exec(&T.lab, 1, "systemctl is-active kubelet") != 0; k++)
        kp_sleep_usec(100 * KP_USEC_PER_MSEC);
    assert_int_equal(kp_lab_host_exec(&T.lab, 1, "systemctl is-active kubelet"), 0);

    /* Leaving -> leave ran -> Node deleted -> Available. */
    for (;;) {
        h = host_get(1);
        saw_leaving |= HV(h)->state == KP_HOST_LEAVING;
        if (kp_lab_host_exec(&T.lab, 1, "test -s /var/lib/kpssh/hostctl-left") == 0 &&
            !node_exists("hc-zombie") && HV(h)->state == KP_HOST_AVAILABLE)
            break;
        if (kp_mono_usec() - t0 > WAIT_SECONDS * KP_USEC_PER_SEC)
            fail_msg("zombie guard did not finish: state %s, error %s",
                     kp_host_state_name(HV(h)->state),
                     HV(h)->last_probe_error ? HV(h)->last_probe_error : "-");
        kp_entry_unref(h);
        kp_sleep_usec(50 * KP_USEC_PER_MSEC);
    }
    wall = kp_mono_usec() - t0;
    kp_entry_unref(h);
    print_message("# zombie guard: reboot -> Leaving%s -> leave -> Node deleted -> Available in "
                  "%.0f ms\n",
                  saw_leaving ? " (seen)" : " (too brief to poll)", wall / 1e3);
    assert_int_not_equal(kp_lab_host_exec(&T.lab, 1, "systemctl is-active kubelet"), 0);
    assert_int_not_equal(kp_lab_host_exec(&T.lab, 1, "systemctl is-enabled kubelet"), 0);
    assert_int_equal(events_at_least(1, KP_HOSTCTL_EVENT_ZOMBIE, 1), 1);
    assert_int_equal(events_at_least(1, KP_HOSTCTL_EVENT_ZOMBIE_LEFT, 1), 1);
    assert_int_equal(atomic_load(&O.left), left0 + 1);
    assert_true(atomic_load(&O.leaves) >= 1);
    /* And it stays Available: the next probes find kubelet inactive. */
    kp_sleep_usec(4 * KP_USEC_PER_SEC);
    h = host_get(1);
    assert_int_equal(HV(h)->state, KP_HOST_AVAILABLE);
    kp_entry_unref(h);
    kp_free(ip);
    kp_free(name);
    kp_free(pid);
}

/* Waits until the controller's Node cache has name with InternalIP ip. */
static void wait_node_ip_cached(const char *name, const char *ip)
{
    struct kp_deadline dl = kp_deadline_in(WAIT_SECONDS * KP_USEC_PER_SEC);

    for (;;) {
        struct kp_entry *e = NULL;
        bool ok = kp_store_get(kp_informer_store(T.inf_nodes), name, &e) == 0 &&
                  kp_streq(kp_node_view(e)->internal_ip, ip);

        kp_entry_unref(e);
        if (ok)
            return;
        if (kp_deadline_expired(dl))
            fail_msg("Node %s with InternalIP %s never reached the cache", name, ip);
        kp_sleep_usec(50 * KP_USEC_PER_MSEC);
    }
}

/* The controller was killed after the zombie leave and before it deleted the Node (or the delete
 * failed): the host is Leaving with kubelet stopped and the Node still there. The next probe
 * deletes that Node first, then makes the host Available. A Node with the same address created
 * after the host went out of service cannot be the zombie's (it would be a newer join's) and
 * stays. */
static void test_zombie_resume(void **state)
{
    struct kp_entry *h;
    char *ip = kp_lab_host_ip(&T.lab, 1), since[KP_RFC3339_STRMAX], *pid = static_pid(1);
    unsigned left0 = (unsigned)atomic_load(&O.left);
    unsigned events0 = events_for(1, KP_HOSTCTL_EVENT_ZOMBIE_LEFT);
    uint64_t t0;

    (void)state;
    assert_int_not_equal(kp_lab_host_exec(&T.lab, 1, "systemctl is-active kubelet"), 0);
    node_create("hc-zombie-rest", pid, ip);
    node_create("hc-zombie-other", "kind://docker/other/worker", ip); /* not ours: never */
    /* Node timestamps have second precision: the leave starts a second later, and the newer
     * Node a second after that. */
    kp_sleep_usec(1100 * KP_USEC_PER_MSEC);
    assert_int_equal(
        kp_rfc3339_format((int64_t)kp_real_usec(), KP_RFC3339_SECONDS, since, sizeof(since)), 0);
    kp_sleep_usec(1100 * KP_USEC_PER_MSEC);
    node_create("hc-zombie-newer", pid, ip);
    wait_node_ip_cached("hc-zombie-rest", ip);
    wait_node_ip_cached("hc-zombie-newer", ip);
    t0 = kp_mono_usec();
    host_status_cas(1, kp_lab_json("{\"state\":\"Leaving\",\"conditions\":[{\"type\":\"Ready\","
                                   "\"status\":\"False\",\"reason\":\"Leaving\",\"message\":"
                                   "\"leaving the cluster\",\"lastTransitionTime\":\"%s\"}]}",
                                   since));
    h = wait_state(1, KP_HOST_AVAILABLE, NULL, NULL);
    kp_entry_unref(h);
    assert_false(node_exists("hc-zombie-rest"));
    print_message("# interrupted zombie leave: Leaving -> Node deleted -> Available in %.0f ms\n",
                  (kp_mono_usec() - t0) / 1e3);
    assert_true(node_exists("hc-zombie-newer"));
    assert_true(node_exists("hc-zombie-other"));
    delete_obj(&KP_RES_NODE, NULL, "hc-zombie-newer");
    delete_obj(&KP_RES_NODE, NULL, "hc-zombie-other");
    assert_int_equal(events_at_least(1, KP_HOSTCTL_EVENT_ZOMBIE_LEFT, events0 + 1), events0 + 1);
    assert_int_equal(atomic_load(&O.left), left0 + 1);
    /* Nothing was run on the host: kubelet stays stopped. */
    assert_int_not_equal(kp_lab_host_exec(&T.lab, 1, "systemctl is-active kubelet"), 0);
    kp_free(ip);
    kp_free(pid);
}

static void test_foreign(void **state)
{
    struct kp_entry *h;
    enum kp_cond_status st;

    (void)state;
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, kubelet_unit), 0);
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl enable --now kubelet"), 0);
    h = wait_state(2, KP_HOST_UNHEALTHY, "cannot attribute", NULL);
    assert_string_equal(ready_reason(HV(h), &st), KP_HOSTCTL_REASON_FOREIGN);
    assert_int_equal(st, KP_COND_FALSE);
    kp_entry_unref(h);
    assert_int_equal(events_at_least(2, KP_HOSTCTL_EVENT_FOREIGN, 1), 1);
    assert_true(atomic_load(&O.parked) >= 1);
    /* Never touched: still running and enabled a few probes later, still parked. */
    kp_sleep_usec(5 * KP_USEC_PER_SEC);
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl is-active kubelet"), 0);
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl is-enabled kubelet"), 0);
    assert_int_not_equal(kp_lab_host_exec(&T.lab, 2, "test -e /var/lib/kpssh/hostctl-left"), 0);
    h = host_get(2);
    assert_int_equal(HV(h)->state, KP_HOST_UNHEALTHY);
    kp_entry_unref(h);
    assert_int_equal(events_for(2, KP_HOSTCTL_EVENT_FOREIGN), 1);
    /* Its owner stops it: the host recovers. */
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl disable --now kubelet"), 0);
    h = wait_state(2, KP_HOST_AVAILABLE, NULL, NULL);
    kp_entry_unref(h);
}

/* An SSHHost created by mistake for a machine that runs its own kubelet and has its own Node
 * (another providerID, no install marker): the Node is not kpssh's, so the host is a foreign
 * kubelet, parked, and neither the kubelet nor the Node is ever touched, not even when the owner
 * restarts that kubelet (a probe that finds it stopped makes the host Available, and must not
 * take the Node with it). A Node with kpssh's providerID but no install marker is parked too:
 * kpssh has nothing to leave with. */
static void test_foreign_node(void **state)
{
    struct kp_entry *h;
    enum kp_cond_status st;
    char *ip = kp_lab_host_ip(&T.lab, 2), *pid = static_pid(2);
    unsigned parked0 = (unsigned)atomic_load(&O.parked);
    unsigned leaves0 = (unsigned)atomic_load(&O.leaves);

    (void)state;
    node_create("hc-foreign", "kind://docker/owner/worker-7", ip);
    wait_node_ip_cached("hc-foreign", ip);
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, kubelet_unit), 0);
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl enable --now kubelet"), 0);
    h = wait_state(2, KP_HOST_UNHEALTHY, "cannot attribute", NULL);
    assert_string_equal(ready_reason(HV(h), &st), KP_HOSTCTL_REASON_FOREIGN);
    kp_entry_unref(h);
    /* The same event as in the foreign test: one Event, its series counts the repeat. */
    assert_true(events_at_least(2, KP_HOSTCTL_EVENT_FOREIGN, 1) >= 1);
    assert_int_equal((unsigned)atomic_load(&O.parked), parked0 + 1);
    /* The owner restarts its kubelet: stopped long enough for a probe to see it. */
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl stop kubelet"), 0);
    h = wait_state(2, KP_HOST_AVAILABLE, NULL, NULL);
    kp_entry_unref(h);
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl start kubelet"), 0);
    h = wait_state(2, KP_HOST_UNHEALTHY, "cannot attribute", NULL);
    kp_entry_unref(h);
    kp_sleep_usec(4 * KP_USEC_PER_SEC); /* two more probes */
    assert_true(node_exists("hc-foreign"));
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl is-active kubelet"), 0);
    assert_int_not_equal(kp_lab_host_exec(&T.lab, 2, "test -e /var/lib/kpssh/hostctl-left"), 0);
    assert_int_equal((unsigned)atomic_load(&O.leaves), leaves0);
    assert_true((unsigned)atomic_load(&O.parked) >= parked0 + 2);
    print_message("# foreign Node with the host's address: parked, Node and kubelet untouched\n");

    /* kpssh's providerID on the Node, but no install marker: nothing to leave with. */
    delete_obj(&KP_RES_NODE, NULL, "hc-foreign");
    node_create("hc-foreign", pid, ip);
    wait_node_ip_cached("hc-foreign", ip);
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl stop kubelet"), 0);
    h = wait_state(2, KP_HOST_AVAILABLE, NULL, NULL);
    kp_entry_unref(h);
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl start kubelet"), 0);
    h = wait_state(2, KP_HOST_UNHEALTHY, "no install marker", NULL);
    assert_string_equal(ready_reason(HV(h), &st), KP_HOSTCTL_REASON_FOREIGN);
    kp_entry_unref(h);
    kp_sleep_usec(3 * KP_USEC_PER_SEC);
    assert_true(node_exists("hc-foreign"));
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl is-active kubelet"), 0);

    delete_obj(&KP_RES_NODE, NULL, "hc-foreign");
    assert_int_equal(kp_lab_host_exec(&T.lab, 2, "systemctl disable --now kubelet"), 0);
    h = wait_state(2, KP_HOST_AVAILABLE, NULL, NULL);
    kp_entry_unref(h);
    kp_free(ip);
    kp_free(pid);
}

static void test_rekey(void **state)
{
    struct kp_entry *h;
    enum kp_cond_status st;
    char *old_fp, *name = host_name(3);

    (void)state;
    h = host_get(3);
    old_fp = kp_strdup(HV(h)->host_key_fingerprint);
    assert_non_null(old_fp);
    kp_entry_unref(h);
    assert_int_equal(kp_lab_host_sh(&T.lab, "rekey", 3), 0);
    h = wait_state(3, KP_HOST_UNHEALTHY, "man-in-the-middle", NULL);
    assert_string_equal(ready_reason(HV(h), &st), KP_HOSTCTL_REASON_HOSTKEY);
    assert_string_equal(HV(h)->host_key_fingerprint, old_fp); /* never re-pinned */
    kp_entry_unref(h);
    kp_sleep_usec(4 * KP_USEC_PER_SEC);
    h = host_get(3);
    assert_int_equal(HV(h)->state, KP_HOST_UNHEALTHY);
    assert_string_equal(HV(h)->host_key_fingerprint, old_fp);
    kp_entry_unref(h);
    /* The operator confirms the new key by clearing the pin with the command docs/operations.md
     * gives (a merge patch, no precondition): pinned again on the next probe. */
    patch_status(&KP_RES_SSHHOST, T.ns, name,
                 kp_lab_json("{\"status\":{\"hostKeyFingerprint\":null}}"));
    h = wait_state(3, KP_HOST_AVAILABLE, NULL, NULL);
    assert_non_null(HV(h)->host_key_fingerprint);
    assert_string_not_equal(HV(h)->host_key_fingerprint, old_fp);
    kp_entry_unref(h);
    kp_free(old_fp);
    kp_free(name);
}

static void test_unreachable(void **state)
{
    struct kp_entry *h;
    enum kp_cond_status st;
    uint64_t t0;

    (void)state;
    t0 = kp_mono_usec();
    assert_int_equal(kp_lab_host_sh(&T.lab, "cut", 3), 0);
    h = wait_state(3, KP_HOST_UNHEALTHY, NULL, NULL);
    print_message("# cut -> Unhealthy in %.0f ms: %s\n", (kp_mono_usec() - t0) / 1e3,
                  HV(h)->last_probe_error);
    assert_string_equal(ready_reason(HV(h), &st), KP_HOSTCTL_REASON_FAILED);
    kp_entry_unref(h);
    t0 = kp_mono_usec();
    assert_int_equal(kp_lab_host_sh(&T.lab, "heal", 3), 0);
    h = wait_state(3, KP_HOST_AVAILABLE, NULL, NULL);
    print_message("# heal -> Available in %.0f ms\n", (kp_mono_usec() - t0) / 1e3);
    assert_null(HV(h)->last_probe_error);
    kp_entry_unref(h);
    /* Each change of state is an event: Warning ProbeFailed, then Normal ProbeSucceeded. */
    assert_true(events_at_least(3, KP_HOSTCTL_EVENT_PROBE_FAILED, 1) >= 1);
    assert_true(events_at_least(3, KP_HOSTCTL_EVENT_PROBE_SUCCEEDED, 1) >= 1);

    /* Stopped outright (connection refused, then back after boot). */
    assert_int_equal(kp_lab_host_sh(&T.lab, "stop", 2), 0);
    h = wait_state(2, KP_HOST_UNHEALTHY, NULL, NULL);
    kp_entry_unref(h);
    assert_int_equal(kp_lab_host_sh(&T.lab, "start", 2), 0);
    h = wait_state(2, KP_HOST_AVAILABLE, NULL, NULL);
    kp_entry_unref(h);
}

/* --- key Secret mistakes ------------------------------------------------------------------
 *
 *   key_missing  a host whose spec.sshKeySecretRef names no Secret -> Unhealthy, saying
 *                "not found" (not errno text); once the Secret exists -> Available
 *   pin_blank    a key Secret whose knownHost is present but blank (a templated Secret with
 *                an empty variable) -> Unhealthy with that message, never pinned; removing
 *                knownHost (the operator's choice of TOFU) -> Available, pinned
 *
 * Each runs on a lab host of its own (KEY_HOST_FIRST..), added for the test and deleted after
 * (and before, in case a failed run left it; lab/down removes every host in any case), so
 * nothing here shares an address with hosts 1..3. */

#define KEY_HOST_FIRST 161

/* A key Secret named name for the lab key; knownHost as stringData when known_host is set. */
static void key_secret(const char *name, const char *known_host)
{
    char *pem = kp_lab_read_file(T.key_path, NULL);
    json_t *o = kp_lab_obj_new("v1", "Secret", T.ns, name);

    kp_lab_set(o, KP_JSON_PATH("stringData", "privateKey"), pem);
    if (known_host)
        kp_lab_set(o, KP_JSON_PATH("stringData", "knownHost"), known_host);
    kp_wipe(pem, strlen(pem));
    kp_free(pem);
    create(&KP_RES_SECRET, T.ns, o, NULL);
}

/* Lab host i (added now) as SSHHost hc-<i> whose key Secret is secret_name. */
static void key_host_add(unsigned i, const char *secret_name)
{
    char *name = host_name(i), *ip;
    json_t *o;

    if (kp_lab_host_sh(&T.lab, "add", i) != 0)
        fail_msg("host.sh add %u failed", i);
    ip = kp_lab_host_ip(&T.lab, i);
    o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHHost", T.ns, name);
    kp_lab_set(o, KP_JSON_PATH("spec", "address"), ip);
    kp_lab_set(o, KP_JSON_PATH("spec", "sshKeySecretRef", "name"), secret_name);
    kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "cpu"), "2");
    kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "memory"), "4Gi");
    create(&KP_RES_SSHHOST, T.ns, o, NULL);
    kp_free(name);
    kp_free(ip);
}

/* The SSHHost and the lab host go (either may be gone already). */
static void key_host_del(unsigned i)
{
    char *name = host_name(i);

    delete_obj(&KP_RES_SSHHOST, T.ns, name);
    (void)kp_lab_host_sh(&T.lab, "del", i);
    kp_free(name);
}

/* Host i stays Unhealthy with err_sub and unpinned over a few more probes. */
static void stays_unhealthy_unpinned(unsigned i, const char *err_sub)
{
    struct kp_entry *h;

    kp_sleep_usec(5 * KP_USEC_PER_SEC); /* two probe intervals */
    h = host_get(i);
    assert_int_equal(HV(h)->state, KP_HOST_UNHEALTHY);
    assert_non_null(HV(h)->last_probe_error);
    assert_non_null(strstr(HV(h)->last_probe_error, err_sub));
    assert_null(HV(h)->host_key_fingerprint);
    kp_entry_unref(h);
}

static void key_missing_cleanup(void)
{
    key_host_del(KEY_HOST_FIRST);
    delete_obj(&KP_RES_SECRET, T.ns, "hc-missing-key");
}

static void test_key_missing(void **state)
{
    const unsigned i = KEY_HOST_FIRST;
    struct kp_entry *h;
    enum kp_cond_status st;
    char want[128];

    (void)state;
    key_missing_cleanup(); /* what a failed earlier run left */
    key_host_add(i, "hc-missing-key");
    (void)snprintf(want, sizeof(want), "SSH key Secret %s/hc-missing-key not found", T.ns);
    h = wait_state(i, KP_HOST_UNHEALTHY, want, NULL);
    print_message("# missing key Secret: %s\n", HV(h)->last_probe_error);
    assert_null(strstr(HV(h)->last_probe_error, "No such file"));
    assert_non_null(strstr(HV(h)->last_probe_error, "spec.sshKeySecretRef"));
    assert_string_equal(ready_reason(HV(h), &st), KP_HOSTCTL_REASON_FAILED);
    assert_int_equal(st, KP_COND_FALSE);
    kp_entry_unref(h);
    stays_unhealthy_unpinned(i, "not found");
    /* The operator creates the Secret: the next probe dials and pins. */
    key_secret("hc-missing-key", NULL);
    h = wait_state(i, KP_HOST_AVAILABLE, NULL, NULL);
    assert_null(HV(h)->last_probe_error);
    assert_non_null(HV(h)->host_key_fingerprint);
    kp_entry_unref(h);
    key_missing_cleanup();
}

static void pin_blank_cleanup(void)
{
    key_host_del(KEY_HOST_FIRST + 1);
    delete_obj(&KP_RES_SECRET, T.ns, "hc-blank-pin");
}

static void test_pin_blank(void **state)
{
    static const char unpin[] = "{\"data\":{\"knownHost\":null}}";
    const unsigned i = KEY_HOST_FIRST + 1;
    struct kp_error e = KP_ERROR_INIT;
    struct kp_entry *h;
    char want[256];

    (void)state;
    pin_blank_cleanup(); /* what a failed earlier run left */
    /* As a templated Secret with an empty variable comes out: knownHost: "   ". */
    key_secret("hc-blank-pin", "   ");
    key_host_add(i, "hc-blank-pin");
    (void)snprintf(want, sizeof(want),
                   "SSH key Secret %s/hc-blank-pin: data.knownHost is present but empty; remove "
                   "it to trust on first use, or set the host's key",
                   T.ns);
    h = wait_state(i, KP_HOST_UNHEALTHY, want, NULL);
    assert_null(HV(h)->host_key_fingerprint); /* never trusted on first use */
    kp_entry_unref(h);
    stays_unhealthy_unpinned(i, "data.knownHost is present but empty");
    /* The operator removes knownHost, choosing trust on first use: pinned on the next probe. */
    kp_lab_check(kp_client_patch_bytes(T.c, &KP_RES_SECRET, T.ns, "hc-blank-pin", NULL,
                                       KP_PATCH_MERGE, unpin, sizeof(unpin) - 1, NULL, &e),
                 &e, "remove knownHost");
    kp_error_done(&e);
    h = wait_state(i, KP_HOST_AVAILABLE, NULL, NULL);
    assert_non_null(HV(h)->host_key_fingerprint);
    kp_entry_unref(h);
    pin_blank_cleanup();
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),          cmocka_unit_test(test_maintenance),
        cmocka_unit_test(test_claims),        cmocka_unit_test(test_zombie),
        cmocka_unit_test(test_zombie_resume), cmocka_unit_test(test_foreign),
        cmocka_unit_test(test_foreign_node),  cmocka_unit_test(test_rekey),
        cmocka_unit_test(test_unreachable),   cmocka_unit_test(test_key_missing),
        cmocka_unit_test(test_pin_blank),
    };

    (void)argc;
    (void)argv;
    return cmocka_run_group_tests_name("hostctl", tests, setup, teardown);
}
