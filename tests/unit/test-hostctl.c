/* tests/unit/test-hostctl.c: the host controller's decisions (provider/ssh/hostctl.h) as pure
 * functions of an SSHHost projection and what the I/O found: maintenance, the staleness guard,
 * stale claims, InUse on registration, token collection, probe outcomes (TOFU, MITM, capacity
 * drift, the Ready condition), the zombie verdict and the write-skipping rule; and the status
 * patch those decisions produce (claim.h). The I/O half runs against the lab in
 * tests/integration/test-hostctl.c. */
#include "kp-ssh-fx.h"
#include "kp-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "json/json.h"
#include "api/informers.h"
#include "base/log.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/obj-kpssh.h"
#include "k8s/store.h"
#include "provider/ssh/claim.h"
#include "provider/ssh/hostctl.h"
#include "provider/ssh/probe.h"

#define SEC 1000000LL
/* 2026-11-30T12:00:00Z */
#define NOW (1796040000LL * SEC)

static const struct kp_hostctl_timing T = {
    .probe_interval_usec = 120 * SEC,
    .claimed_recheck_usec = 300 * SEC,
    .token_recheck_usec = 30 * SEC,
};

/* An SSHHost with these extra metadata members (after name/namespace; may be ""), spec capacity
 * cpu/memory, and status members (may be ""). NULL when it does not decode (torture). */
static struct kp_entry *mk(const char *meta, const char *cpu, const char *mem, const char *status)
{
    char buf[4096];
    struct kp_entry *e = NULL;
    int n;

    n = snprintf(buf, sizeof(buf),
                 "{\"metadata\":{\"name\":\"h1\",\"namespace\":\"kpssh-system\",\"uid\":\"u1\","
                 "\"resourceVersion\":\"7\",\"generation\":3%s%s},"
                 "\"spec\":{\"address\":\"10.0.0.1\",\"sshKeySecretRef\":{\"name\":\"k\"},"
                 "\"capacity\":{\"cpu\":\"%s\",\"memory\":\"%s\"}},"
                 "\"status\":{%s}}",
                 *meta ? "," : "", meta, cpu, mem, status);
    if (n < 0 || (size_t)n >= sizeof(buf) || kp_sshhost_decode(buf, (size_t)n, &e) < 0)
        return NULL;
    return e;
}

static struct kp_entry *host(const char *meta, const char *status)
{
    struct kp_entry *e = mk(meta, "2", "4Gi", status);

    assert_non_null(e);
    return e;
}

#define H(e) kp_sshhost_view(e)
#define MAINT "\"annotations\":{\"karpenter.kpssh.dev/maintenance\":\"\"}"
#define CLAIM "\"claimRef\":{\"name\":\"nc1\",\"uid\":\"ncu1\"}"

static void test_plan(void **state)
{
    struct kp_entry *e;
    uint64_t wait = 1;

    (void)state;
    e = host(MAINT, "\"state\":\"Available\"");
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_MAINTENANCE_ENTER);
    kp_entry_unref(e);
    e = host(MAINT, "\"state\":\"Unhealthy\"");
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_MAINTENANCE_ENTER);
    kp_entry_unref(e);
    e = host(MAINT, "\"state\":\"Maintenance\"");
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_PARKED);
    kp_entry_unref(e);
    e = host("", "\"state\":\"Maintenance\"");
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_MAINTENANCE_EXIT);
    kp_entry_unref(e);
    /* The claim wins over the annotation: the holder finishes first. */
    e = host(MAINT, "\"state\":\"InUse\"," CLAIM);
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_CLAIMED);
    kp_entry_unref(e);
    e = host("", "\"state\":\"Leaving\"," CLAIM); /* the provider's Delete */
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_CLAIMED);
    kp_entry_unref(e);
    e = host("", "\"state\":\"Claimed\""); /* no claimRef: checked (and released) */
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_CLAIMED);
    kp_entry_unref(e);

    /* Staleness guard. */
    e = host("", "\"state\":\"Available\",\"observedGeneration\":3,"
                 "\"lastProbeTime\":\"2026-11-30T11:59:30Z\"");
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_FRESH);
    assert_int_equal(wait, 90 * SEC);
    assert_int_equal(kp_hostctl_plan(H(e), NOW + 89 * SEC + 500000, &T, &wait),
                     KP_HOSTCTL_STEP_FRESH);
    assert_int_equal(wait, KP_HOSTCTL_SOON_USEC); /* at least 1 s */
    assert_int_equal(kp_hostctl_plan(H(e), NOW + 91 * SEC, &T, &wait), KP_HOSTCTL_STEP_PROBE);
    kp_entry_unref(e);
    e = host("", "\"state\":\"Available\",\"observedGeneration\":2,"
                 "\"lastProbeTime\":\"2026-11-30T11:59:30Z\""); /* spec edited */
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_PROBE);
    kp_entry_unref(e);
    e = host("", ""); /* never probed */
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_PROBE);
    kp_entry_unref(e);
    e = host("", "\"state\":\"Unhealthy\",\"observedGeneration\":3,"
                 "\"lastProbeTime\":\"2026-11-30T12:00:10Z\""); /* clock skew: in the future */
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_PROBE);
    kp_entry_unref(e);

    /* A value the controller cannot hold (1Ei is past 64-bit milli-units) refuses the host before
     * any dial, fresh or not, Pending or not; maintenance and a claim still come first. */
    e = mk("", "2", "1Ei",
           "\"state\":\"Available\",\"observedGeneration\":3,"
           "\"lastProbeTime\":\"2026-11-30T11:59:30Z\"");
    assert_non_null(e);
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_INVALID);
    kp_entry_unref(e);
    e = mk("", "2", "1Ei", "\"state\":\"Pending\"");
    assert_non_null(e);
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_INVALID);
    kp_entry_unref(e);
    e = mk(MAINT, "2", "1Ei", "\"state\":\"Available\"");
    assert_non_null(e);
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_MAINTENANCE_ENTER);
    kp_entry_unref(e);
    e = mk("", "2", "1Ei", "\"state\":\"InUse\"," CLAIM);
    assert_non_null(e);
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_CLAIMED);
    kp_entry_unref(e);
}

static void test_claimed(void **state)
{
    struct kp_hostctl_claim_action a;
    struct kp_hostctl_claim_in in = {.nodeclaim_found = true, .nodeclaim_uid = "ncu1"};
    struct kp_entry *e;

    (void)state;
    e = host("", "\"state\":\"InUse\"," CLAIM ",\"providerID\":\"kpssh://kpssh-system/h1\"");
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_RECHECK);
    assert_int_equal(a.requeue_usec, T.claimed_recheck_usec);

    in.nodeclaim_found = false;
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_RELEASE_STALE);
    assert_string_equal(a.why, "NodeClaim no longer exists");
    assert_int_equal(a.requeue_usec, KP_HOSTCTL_SOON_USEC);

    in.nodeclaim_found = true;
    in.nodeclaim_uid = "another";
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_RELEASE_STALE);
    assert_string_equal(a.why, "NodeClaim name was reused by a different object");
    in.nodeclaim_uid = NULL; /* a side without a uid: the name decides */
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_RECHECK);
    kp_entry_unref(e);

    /* Claimed whose Node registered: InUse (InUse means registered); never re-marked. */
    e = host("", "\"state\":\"Claimed\"," CLAIM ",\"bootstrapTokenID\":\"abc123\"");
    in.nodeclaim_uid = "ncu1";
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_RECHECK); /* not registered yet */
    assert_int_equal(a.requeue_usec, T.claimed_recheck_usec);
    in.registered_pid = "kpssh://kpssh-system/h1";
    in.node_exists = true;
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_MARK_IN_USE);
    assert_int_equal(a.requeue_usec, T.token_recheck_usec); /* the token is collected next */
    kp_entry_unref(e);

    /* Token hygiene: only with providerID AND token id, and only once the Node exists. */
    e = host("", "\"state\":\"InUse\"," CLAIM ",\"bootstrapTokenID\":\"abc123\","
                 "\"providerID\":\"kpssh://kpssh-system/h1\"");
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_COLLECT_TOKEN);
    in.registered_pid = NULL;
    in.node_exists = false;
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_RECHECK);
    assert_int_equal(a.requeue_usec, T.token_recheck_usec);
    kp_entry_unref(e);
    e = host("", "\"state\":\"Claimed\"," CLAIM ",\"bootstrapTokenID\":\"abc123\"");
    in.node_exists = true; /* Create still running (no providerID): hands off */
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_RECHECK);
    kp_entry_unref(e);

    e = host("", "\"state\":\"InUse\"");
    kp_hostctl_decide_claimed(H(e), &in, &T, &a);
    assert_int_equal(a.verb, KP_HOSTCTL_CLAIM_RELEASE_STALE);
    kp_entry_unref(e);
}

static void test_probe_outcomes(void **state)
{
    struct kp_hostctl_probe_outcome *o = kp_calloc(1, sizeof(*o));
    struct kp_probe_result res = {.cpus = 2, .mem_bytes = 4ULL << 30, .machine = "x86_64"};
    struct kp_hostctl_probe_in in = {.res = &res, .now_usec = NOW, .seen_fp = "SHA256:new"};
    struct kp_entry *e;

    (void)state;
    assert_non_null(o);
    /* First success: Available, pinned, observed, Ready True. */
    e = host("", "\"state\":\"Pending\"");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_true(o->write && o->healthy);
    assert_true(o->st.set_state);
    assert_int_equal(o->st.state, KP_HOST_AVAILABLE);
    assert_string_equal(o->st.host_key_fingerprint, "SHA256:new");
    assert_true(o->st.set_observed);
    assert_int_equal(o->st.observed_cpus, 2);
    assert_string_equal(o->st.observed_arch, "amd64");
    assert_int_equal(o->st.last_probe_usec, NOW);
    assert_int_equal(o->st.observed_generation, 3);
    assert_string_equal(o->st.last_probe_error, "");
    assert_true(o->st.set_ready);
    assert_int_equal(o->st.ready_status, KP_COND_TRUE);
    assert_string_equal(o->st.ready_reason, KP_HOSTCTL_REASON_SUCCEEDED);
    assert_int_equal(o->st.ready_transition_usec, NOW);
    assert_false(o->capacity_drift);
    assert_false(o->zombie_check);
    assert_int_equal(o->requeue_usec, T.probe_interval_usec);
    kp_entry_unref(e);

    /* A pinned host is never re-pinned; the condition keeps its transition time. */
    e = host("", "\"state\":\"Available\",\"hostKeyFingerprint\":\"SHA256:old\","
                 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":"
                 "\"ProbeSucceeded\",\"lastTransitionTime\":\"2026-11-30T10:00:00Z\"}]");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_null(o->st.host_key_fingerprint);
    assert_int_equal(o->st.ready_transition_usec, NOW - 2 * 3600 * SEC);
    kp_entry_unref(e);

    /* Changed key: Unhealthy, MITM text kept, HostKeyMismatch, no facts, no pin. */
    e = host("", "\"state\":\"Available\",\"hostKeyFingerprint\":\"SHA256:old\"");
    in.err = -KP_EHOSTKEY;
    in.err_msg = "host key mismatch for 10.0.0.1:22: possible man-in-the-middle";
    in.res = NULL;
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_false(o->healthy);
    assert_int_equal(o->st.state, KP_HOST_UNHEALTHY);
    assert_string_equal(o->st.last_probe_error, in.err_msg);
    assert_string_equal(o->st.ready_reason, KP_HOSTCTL_REASON_HOSTKEY);
    assert_int_equal(o->st.ready_status, KP_COND_FALSE);
    assert_string_equal(o->st.ready_message, in.err_msg);
    assert_null(o->st.host_key_fingerprint);
    assert_false(o->st.set_observed);
    kp_entry_unref(e);
    in.err = -ETIMEDOUT;
    in.err_msg = NULL;
    e = host("", "\"state\":\"Available\"");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_string_equal(o->st.ready_reason, KP_HOSTCTL_REASON_FAILED);
    assert_string_equal(o->st.last_probe_error, kp_strerror(-ETIMEDOUT));
    kp_entry_unref(e);

    /* Recovery from Unhealthy clears the error. */
    in.err = 0;
    in.res = &res;
    e = host("", "\"state\":\"Unhealthy\",\"lastProbeError\":\"x\"");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_int_equal(o->st.state, KP_HOST_AVAILABLE);
    assert_string_equal(o->st.last_probe_error, "");
    assert_false(o->collect_node); /* an ordinary failure left no Node behind */
    kp_entry_unref(e);

    /* An interrupted zombie leave: Leaving (killed mid-guard) or LeaveUnfinished (the leave ran,
     * the Node delete failed), kubelet now stopped. The stale Node is collected before the host
     * is Available. */
    e = host("", "\"state\":\"Leaving\"");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_true(o->collect_node);
    assert_int_equal(o->st.state, KP_HOST_AVAILABLE);
    kp_entry_unref(e);
    e = host("", "\"state\":\"Unhealthy\",\"lastProbeError\":\"zombie left, but deleting Node\","
                 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":"
                 "\"LeaveUnfinished\",\"lastTransitionTime\":\"2026-11-30T10:00:00Z\"}]");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_true(o->collect_node);
    kp_entry_unref(e);
    /* A leave that failed never ran: kubelet stopped since by somebody else lets no Node go. */
    e = host("", "\"state\":\"Unhealthy\",\"lastProbeError\":\"zombie leave failed: x\","
                 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":"
                 "\"ZombieLeaveFailed\",\"lastTransitionTime\":\"2026-11-30T10:00:00Z\"}]");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_false(o->collect_node);
    assert_int_equal(o->st.state, KP_HOST_AVAILABLE);
    kp_entry_unref(e);
    /* Claimed hosts are the provider's: never (they are not probed either). */
    e = host("", "\"state\":\"Leaving\",\"claimRef\":{\"name\":\"nc\",\"uid\":\"u\"}");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_false(o->collect_node);
    kp_entry_unref(e);
    /* A probe failure decides nothing about Nodes, and keeps the marker: the unfinished leave
     * shows as LeaveUnfinished until a probe finds kubelet stopped and collects the Node. */
    in.err = -ETIMEDOUT;
    in.res = NULL;
    e = host("", "\"state\":\"Leaving\"");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_false(o->collect_node);
    assert_int_equal(o->st.state, KP_HOST_UNHEALTHY);
    assert_string_equal(o->st.ready_reason, KP_HOSTCTL_REASON_LEAVE_UNFINISHED);
    kp_entry_unref(e);
    e = host("", "\"state\":\"Unhealthy\",\"lastProbeError\":\"zombie left, but\","
                 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":"
                 "\"LeaveUnfinished\",\"lastTransitionTime\":\"2026-11-30T10:00:00Z\"}]");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_string_equal(o->st.ready_reason, KP_HOSTCTL_REASON_LEAVE_UNFINISHED);
    assert_int_equal(o->st.ready_transition_usec, NOW - 2 * 3600 * SEC); /* still False since */
    /* Failing for two hours: backed off to the cap, not probed every interval. */
    assert_int_equal(o->requeue_usec, KP_HOSTCTL_BACKOFF_MAX_USEC);
    kp_entry_unref(e);
    /* An ordinary Unhealthy host stays ProbeFailed. */
    e = host("", "\"state\":\"Unhealthy\",\"lastProbeError\":\"x\"");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_string_equal(o->st.ready_reason, KP_HOSTCTL_REASON_FAILED);
    kp_entry_unref(e);
    in.err = 0;
    in.res = &res;

    /* Kubelet active: facts only, the guard decides the state. */
    res.kubelet_active = true;
    e = host("", "\"state\":\"Available\",\"installedProfile\":\"p@1\"");
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_true(o->zombie_check);
    assert_false(o->collect_node); /* the guard runs the whole leave instead */
    assert_false(o->st.set_state);
    assert_null(o->st.last_probe_error);
    assert_true(o->st.set_observed);
    kp_entry_unref(e);
    res.kubelet_active = false;
    kp_free(o);
}

static void test_capacity_drift(void **state)
{
    struct kp_hostctl_probe_outcome *o = kp_calloc(1, sizeof(*o));
    struct kp_probe_result res = {.cpus = 2, .mem_bytes = 2ULL << 30, .machine = "aarch64"};
    struct kp_hostctl_probe_in in = {.res = &res, .now_usec = NOW};
    struct kp_entry *e;

    (void)state;
    assert_non_null(o);
    e = mk("", "4", "4Gi", "\"state\":\"Available\"");
    assert_non_null(e);
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_true(o->capacity_drift);
    assert_non_null(strstr(o->drift_note, "cpu: observed 2000m < spec 4000m"));
    assert_non_null(strstr(o->drift_note, "memory: observed"));
    assert_string_equal(o->st.observed_arch, "arm64");
    kp_entry_unref(e);
    /* Already short last time: no new event. */
    e = mk("", "4", "4Gi",
           "\"state\":\"Available\",\"observedCapacity\":{\"cpu\":\"2\",\"memory\":\"2Gi\"}");
    assert_non_null(e);
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_false(o->capacity_drift);
    assert_string_equal(o->drift_note, "");
    kp_entry_unref(e);
    /* Enough: none. */
    e = mk("", "2", "2Gi", "\"state\":\"Available\"");
    assert_non_null(e);
    kp_hostctl_decide_probe(H(e), &in, &T, o);
    assert_false(o->capacity_drift);
    kp_entry_unref(e);
    kp_free(o);
}

static void test_zombie_and_unchanged(void **state)
{
    struct kp_claim_status st = {0};
    struct kp_entry *e;

    (void)state;
    e = host("", "\"state\":\"Available\"");
    assert_int_equal(kp_hostctl_zombie_verdict(H(e), false), KP_HOSTCTL_ZOMBIE_FOREIGN);
    assert_int_equal(kp_hostctl_zombie_verdict(H(e), true), KP_HOSTCTL_ZOMBIE_OURS);
    kp_entry_unref(e);
    e = host("", "\"state\":\"Available\",\"installedProfile\":\"tls-bootstrap@1\"");
    assert_int_equal(kp_hostctl_zombie_verdict(H(e), false), KP_HOSTCTL_ZOMBIE_OURS);
    kp_entry_unref(e);

    /* A parked foreign host is not written again. */
    e = host(
        "",
        "\"state\":\"Unhealthy\",\"observedGeneration\":3,\"lastProbeError\":\"" KP_HOSTCTL_FOREIGN_MESSAGE
        "\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
        "\"False\",\"reason\":\"ForeignKubelet\",\"lastTransitionTime\":"
        "\"2026-11-30T10:00:00Z\"}]");
    st.set_state = true;
    st.state = KP_HOST_UNHEALTHY;
    st.last_probe_error = KP_HOSTCTL_FOREIGN_MESSAGE;
    kp_hostctl_ready_for(H(e), KP_HOST_UNHEALTHY, KP_HOSTCTL_REASON_FOREIGN, st.last_probe_error,
                         NOW, &st);
    assert_true(kp_hostctl_unchanged(H(e), &st));
    st.last_probe_error = "zombie leave failed: x";
    assert_false(kp_hostctl_unchanged(H(e), &st));
    kp_entry_unref(e);

    /* Maintenance exit onto a host already Pending/AwaitingProbe: skipped. */
    e = host("", "\"state\":\"Pending\",\"observedGeneration\":3,\"conditions\":[{\"type\":"
                 "\"Ready\",\"status\":\"Unknown\",\"reason\":\"AwaitingProbe\","
                 "\"lastTransitionTime\":\"2026-11-30T10:00:00Z\"}]");
    memset(&st, 0, sizeof(st));
    st.set_state = true;
    st.state = KP_HOST_PENDING;
    kp_hostctl_ready_for(H(e), KP_HOST_PENDING, NULL, NULL, NOW, &st);
    assert_true(kp_hostctl_unchanged(H(e), &st));
    st.clear_claim = true; /* nothing to clear */
    assert_true(kp_hostctl_unchanged(H(e), &st));
    st.state = KP_HOST_MAINTENANCE;
    assert_false(kp_hostctl_unchanged(H(e), &st));
    kp_entry_unref(e);
}

/* Pending is probed at once however recently it was probed (maintenance exit, a released
 * claim); a failing host backs off by how long it has been failing; a host refused for its
 * address is probed at once when the caller found the older host gone. */
static void test_schedule(void **state)
{
    struct kp_entry *e;
    uint64_t wait = 1;

    (void)state;
    e = host("", "\"state\":\"Pending\",\"observedGeneration\":3,"
                 "\"lastProbeTime\":\"2026-11-30T11:59:50Z\"");
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_PROBE);
    assert_true(kp_hostctl_suspect(H(e)));
    kp_entry_unref(e);
    e = host("", "\"state\":\"Unhealthy\",\"observedGeneration\":3,"
                 "\"lastProbeTime\":\"2026-11-30T11:59:50Z\",\"conditions\":[{\"type\":\"Ready\","
                 "\"status\":\"False\",\"reason\":\"DuplicateAddress\","
                 "\"lastTransitionTime\":\"2026-11-30T10:00:00Z\"}]");
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_PROBE);
    kp_entry_unref(e);

    /* Healthy: the interval, and never a suspect. */
    e = host("", "\"state\":\"Available\",\"observedGeneration\":3,"
                 "\"lastProbeTime\":\"2026-11-30T11:59:30Z\",\"conditions\":[{\"type\":\"Ready\","
                 "\"status\":\"True\",\"reason\":\"ProbeSucceeded\","
                 "\"lastTransitionTime\":\"2026-11-30T10:00:00Z\"}]");
    assert_int_equal(kp_hostctl_probe_period(H(e), &T), 120 * SEC);
    assert_false(kp_hostctl_suspect(H(e)));
    kp_entry_unref(e);
    /* Failing for 1 min at its last probe: still the interval. */
    e = host("", "\"state\":\"Unhealthy\",\"observedGeneration\":3,"
                 "\"lastProbeTime\":\"2026-11-30T11:59:30Z\",\"conditions\":[{\"type\":\"Ready\","
                 "\"status\":\"False\",\"reason\":\"ProbeFailed\","
                 "\"lastTransitionTime\":\"2026-11-30T11:58:30Z\"}]");
    assert_int_equal(kp_hostctl_probe_period(H(e), &T), 120 * SEC);
    assert_true(kp_hostctl_suspect(H(e)));
    kp_entry_unref(e);
    /* Failing for 5 min: 5 min; the plan waits for it. */
    e = host("", "\"state\":\"Unhealthy\",\"observedGeneration\":3,"
                 "\"lastProbeTime\":\"2026-11-30T11:59:30Z\",\"conditions\":[{\"type\":\"Ready\","
                 "\"status\":\"False\",\"reason\":\"ProbeFailed\","
                 "\"lastTransitionTime\":\"2026-11-30T11:54:30Z\"}]");
    assert_int_equal(kp_hostctl_probe_period(H(e), &T), 300 * SEC);
    assert_int_equal(kp_hostctl_plan(H(e), NOW, &T, &wait), KP_HOSTCTL_STEP_FRESH);
    assert_int_equal(wait, 270 * SEC);
    kp_entry_unref(e);
    /* Failing for hours: the cap; a host key mismatch backs off the same way. */
    e = host("", "\"state\":\"Unhealthy\",\"observedGeneration\":3,"
                 "\"lastProbeTime\":\"2026-11-30T11:59:30Z\",\"conditions\":[{\"type\":\"Ready\","
                 "\"status\":\"False\",\"reason\":\"HostKeyMismatch\","
                 "\"lastTransitionTime\":\"2026-11-30T01:00:00Z\"}]");
    assert_int_equal(kp_hostctl_probe_period(H(e), &T), KP_HOSTCTL_BACKOFF_MAX_USEC);
    kp_entry_unref(e);
    /* A parked foreign kubelet answered its probe: no backoff. */
    e = host("", "\"state\":\"Unhealthy\",\"observedGeneration\":3,"
                 "\"lastProbeTime\":\"2026-11-30T11:59:30Z\",\"conditions\":[{\"type\":\"Ready\","
                 "\"status\":\"False\",\"reason\":\"ForeignKubelet\","
                 "\"lastTransitionTime\":\"2026-11-30T01:00:00Z\"}]");
    assert_int_equal(kp_hostctl_probe_period(H(e), &T), 120 * SEC);
    kp_entry_unref(e);
    /* A cap below the interval is the interval. */
    {
        struct kp_hostctl_timing t2 = T;

        t2.backoff_max_usec = 10 * SEC;
        e = host("", "\"state\":\"Unhealthy\",\"observedGeneration\":3,"
                     "\"lastProbeTime\":\"2026-11-30T11:59:30Z\",\"conditions\":[{\"type\":"
                     "\"Ready\",\"status\":\"False\",\"reason\":\"ProbeFailed\","
                     "\"lastTransitionTime\":\"2026-11-30T01:00:00Z\"}]");
        assert_int_equal(kp_hostctl_probe_period(H(e), &t2), 120 * SEC);
        kp_entry_unref(e);
    }
}

/* Which Nodes with the host's address are kpssh's: the static providerID of this host (not of
 * another host or namespace), the one it backs, the one its last adopting join took over. */
static void test_node_ours(void **state)
{
    struct kp_entry *e;

    (void)state;
    e = host("", "\"state\":\"Available\"");
    assert_true(kp_hostctl_node_ours(H(e), "kpssh://kpssh-system/h1"));
    assert_false(kp_hostctl_node_ours(H(e), "kpssh://kpssh-system/h10"));
    assert_false(kp_hostctl_node_ours(H(e), "kpssh://kpssh-system/h"));
    assert_false(kp_hostctl_node_ours(H(e), "kpssh://other/h1"));
    assert_false(kp_hostctl_node_ours(H(e), "kpssh://kpssh-systemx/h1"));
    assert_false(kp_hostctl_node_ours(H(e), "kind://docker/kind/worker"));
    assert_false(kp_hostctl_node_ours(H(e), ""));
    assert_false(kp_hostctl_node_ours(H(e), NULL));
    kp_entry_unref(e);
    e = host("", "\"state\":\"Available\",\"adoptedProviderID\":\"eks-hybrid:///r/c/mi-1\"");
    assert_true(kp_hostctl_node_ours(H(e), "eks-hybrid:///r/c/mi-1"));
    assert_false(kp_hostctl_node_ours(H(e), "eks-hybrid:///r/c/mi-2"));
    kp_entry_unref(e);
    e = host("", "\"state\":\"InUse\",\"providerID\":\"eks-hybrid:///r/c/mi-3\"," CLAIM);
    assert_true(kp_hostctl_node_ours(H(e), "eks-hybrid:///r/c/mi-3"));
    kp_entry_unref(e);
}

/* The patch a probe writes: probe facts, the Ready condition, the CAS precondition. */
static int probe_patch(json_t **ret)
{
    struct kp_hostctl_probe_outcome *o = kp_calloc(1, sizeof(*o));
    struct kp_probe_result res = {.cpus = 2, .mem_bytes = 4194304ULL * 1024, .machine = "x86_64"};
    struct kp_hostctl_probe_in in = {.res = &res, .now_usec = NOW, .seen_fp = "SHA256:abc"};
    struct kp_entry *e = mk("", "2", "4Gi", "\"state\":\"Pending\"");
    int r = -ENOMEM;

    if (o && e) {
        kp_hostctl_decide_probe(H(e), &in, &T, o);
        r = kp_claim_patch(e->rv, &o->st, ret);
    }
    kp_entry_unref(e);
    kp_free(o);
    return r;
}

static void test_patch(void **state)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    json_t *p = NULL;

    (void)state;
    assert_int_equal(probe_patch(&p), 0);
    assert_int_equal(kp_json_dump(p, KP_JSON_SORT_KEYS, &b), 0);
    assert_string_equal(
        kp_buf_str(&b),
        "{\"metadata\":{\"resourceVersion\":\"7\"},\"status\":{\"conditions\":[{"
        "\"lastTransitionTime\":\"2026-11-30T12:00:00.000000Z\",\"message\":\"Available\","
        "\"observedGeneration\":3,\"reason\":\"ProbeSucceeded\",\"status\":\"True\","
        "\"type\":\"Ready\"}],\"hostKeyFingerprint\":\"SHA256:abc\",\"lastProbeError\":null,"
        "\"lastProbeTime\":\"2026-11-30T12:00:00.000000Z\",\"observedArch\":\"amd64\","
        "\"observedCapacity\":{\"cpu\":\"2\",\"memory\":\"4194304Ki\"},"
        "\"observedGeneration\":3,\"state\":\"Available\"}}");
    kp_buf_done(&b);
    kp_json_unref(p);
}

static int torture_patch(void)
{
    json_t *p = NULL;
    int r = probe_patch(&p);

    kp_json_unref(p);
    return r;
}

/* --- set-up and tear-down (the controller skeleton, k8s/controller.h) --------------------- */

/* A registration that fails half-way (the NodeClaim informer, the last one, has started) leaves
 * no handler in any informer; a controller that was made takes its handlers back when freed. */
static void test_setup_rollback(void **state)
{
    struct kp_ssh_fx f;
    struct kp_ssh_hostctl *hc = NULL;
    struct kp_ssh_hostctl_opts o = {0};

    (void)state;
    kp_ssh_fx_init(&f);
    o = (struct kp_ssh_hostctl_opts){.pool_namespace = "pool",
                                     .client = f.c,
                                     .hosts = f.hosts,
                                     .nodes = f.nodes,
                                     .nodeclaims = f.claims,
                                     .profiles = f.profiles,
                                     .workers = 2};
    assert_int_equal(kp_informer_start(f.claims), 0);
    assert_int_equal(kp_ssh_hostctl_new(&o, &hc), -EBUSY);
    assert_null(hc);
    kp_informer_stop(f.claims);
    assert_int_equal(kp_ssh_fx_handlers(&f), 0);
    assert_int_equal(kp_ssh_hostctl_new(&o, &hc), 0);
    assert_int_equal(kp_ssh_fx_handlers(&f), 4);
    hc = kp_ssh_hostctl_free(hc);
    assert_int_equal(kp_ssh_fx_handlers(&f), 0);
    kp_ssh_fx_done(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_rollback), cmocka_unit_test(test_plan),
        cmocka_unit_test(test_claimed),        cmocka_unit_test(test_probe_outcomes),
        cmocka_unit_test(test_capacity_drift), cmocka_unit_test(test_zombie_and_unchanged),
        cmocka_unit_test(test_schedule),       cmocka_unit_test(test_node_ours),
        cmocka_unit_test(test_patch),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_patch),
    };

    return kp_test_main("hostctl", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
