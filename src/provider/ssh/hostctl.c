/* provider/ssh/hostctl.c: the SSH host controller (hostctl.h).
 *
 * DESIGN
 *
 * What: the "hostprobe" half of a host's life. The provider moves hosts while it holds their
 * claim; this controller looks after every host the rest of the time, and after claims nobody
 * holds any more. One reconcile per SSHHost key, on the workers of a k8s/reconciler.h loop:
 *
 *   annotated, unclaimed, not Maintenance  --CAS--> Maintenance            (not probed after)
 *   Maintenance, annotation gone           --CAS--> Pending                (probed next)
 *   claimRef set: NodeClaim gone / uid differs --CAS--> Pending, claim cleared, token deleted
 *                 Claimed and its Node registered --CAS--> InUse{providerID}   (not at join exit)
 *                 providerID and bootstrapTokenID set, Node exists: token deleted --CAS--> cleared
 *   unclaimed, an older SSHHost has its address:port --CAS--> Unhealthy (DuplicateAddress),
 *                 never dialed; the older one's deletion wakes it
 *   unclaimed: probe (pinned dial, 30 s for dial and command together)
 *                 error --CAS--> Unhealthy{lastProbeError}      (a changed key: HostKeyMismatch)
 *                 ok, kubelet inactive --CAS--> Available{observed*, TOFU pin if none}
 *                 ok, kubelet active: facts --CAS-->, then the zombie guard:
 *                   foreign (no Node of ours with its IP, no install marker) --CAS--> parked
 *                   ours --CAS--> Leaving, leave, delete our Nodes --CAS--> Available
 *                                 no install marker --CAS--> parked (ForeignKubelet)
 *                                 leave failed --CAS--> Unhealthy (ZombieLeaveFailed)
 *                                 Node delete failed --CAS--> Unhealthy (LeaveUnfinished)
 *                 ok, kubelet inactive, host Leaving (a crash mid-guard) or LeaveUnfinished:
 *                   delete our Nodes with its IP created before it went out of service
 *                   --CAS--> Available (a failed delete: Unhealthy, LeaveUnfinished kept)
 *
 * Whose Node: a Node is ours only by its providerID (the host's kpssh://<ns>/<name>, the one it
 * backs, the one its last adopting join took over); an address is not proof, since an SSHHost
 * made by mistake for a machine with its own kubelet shares that machine's address. A Node that
 * is not ours is never deleted, and Nodes go only after a leave that ran.
 *
 * When: a host that answers is probed once per interval; one whose probes fail, after as long as
 * it has been failing (at least an interval, at most KP_HOSTCTL_BACKOFF_MAX_USEC), read from the
 * Ready condition's transition time so a restart keeps the backoff. A probe of a host that did
 * not answer last time may cost the whole timeout, so those run in the slow lane of the SSH job
 * pool (at most half its threads, jobs.h): however many hosts are dead, the other half keeps the
 * live ones on schedule. Pending is probed at once.
 *
 * Where SSH runs: never on a reconcile worker. A reconcile that wants a probe reads the key
 * Secret (an API call), submits a probe job under the host's key and returns; the zombie guard
 * writes Leaving and submits a leave job likewise. A job's end enqueues the key; the next
 * reconcile takes the result and decides on it against the host as it is then (a probe result
 * for a host claimed meanwhile is dropped; a leave result is finished only on a host still
 * Leaving). While a host's job runs, its reconciles do nothing, so the reconcile workers stay
 * free for stale-claim release, InUse marking and maintenance of the other hosts however many
 * hosts hang. Before the pool, a reconcile worker held each probe for its whole timeout and
 * stop() waited for them: eight hung hosts stalled the controller for 30 s; the suspect lane
 * of half the workers that bounded it then is now the pool's slow lane.
 *
 * Why this way: decisions are pure functions of (the host's projection, what the I/O found), so
 * the rules are unit-tested without a server and the I/O functions stay thin. Every write is a
 * CAS on the resourceVersion of the projection the decision was made on (claim.h): if anyone
 * wrote the host since (the provider claiming it, an operator), the write is refused, the
 * reconciler brings the key back after its conflict delay, and the next decision is made on the
 * new state. So a probe can never undo a claim, and a zombie leave can never start on a host the
 * provider just claimed: Leaving is entered by CAS from the probed version.
 *
 * The staleness guard (observedGeneration == generation and lastProbeTime younger than the
 * interval: wait for the remainder) keeps our own status writes, which come back as watch events,
 * from probing in a loop; a spec edit bumps the generation and probes at once.
 *
 * Claim checks read the NodeClaim informer, but a verdict of "stale" is confirmed with a GET
 * before anything is released: a cache that lags behind a fresh NodeClaim must never cost a
 * launch its host. Node lookups read the Node informer through the shared indexes (indexes.h).
 *
 * Threads: reconciles run on the reconciler's workers, each with its own client; one key is
 * never reconciled twice at once. SSH jobs run on the pool's threads with what the reconcile
 * gave them (a host entry reference, loaded creds): no client, no store access, no write. Informer handlers only enqueue keys. Everything reached from
 * more than one thread (options, stores, recorder, observer) is immutable or thread-safe.
 * Logging: this file is the decision point for host transitions and logs each once. */
#include "provider/ssh/hostctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "api/obj-node.h"
#include "k8s/reconciler.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "provider/ssh/claim.h"
#include "provider/ssh/hostio.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/inventory.h"
#include "provider/ssh/jobs.h"
#include "provider/ssh/observe.h"
#include "provider/ssh/probe.h"
#include "provider/ssh/provider.h"
#include "provider/ssh/runner.h"
#include "provider/ssh/session.h"
#include "provider/ssh/token.h"

/* --- decisions ------------------------------------------------------------------------------- */

static bool claimed_state(enum kp_host_state s)
{
    return s == KP_HOST_CLAIMED || s == KP_HOST_IN_USE;
}

static bool ready_reason_is(const struct kp_sshhost_view *h, const char *reason)
{
    const struct kp_condition *cur = kp_conditions_get(&h->conditions, "Ready");

    return cur && cur->status == KP_COND_FALSE && cur->reason && kp_streq(cur->reason, reason);
}

/* The Ready reasons of a probe that failed (the ones the backoff applies to). */
static bool failing(const struct kp_sshhost_view *h)
{
    return h->state == KP_HOST_UNHEALTHY &&
           (ready_reason_is(h, KP_HOSTCTL_REASON_FAILED) ||
            ready_reason_is(h, KP_HOSTCTL_REASON_HOSTKEY) ||
            ready_reason_is(h, KP_HOSTCTL_REASON_LEAVE_UNFINISHED));
}

/* The backoff of a host failing since since_usec, as seen at now_usec. */
static uint64_t backoff(const struct kp_hostctl_timing *t, int64_t since_usec, int64_t now_usec)
{
    uint64_t max = t->backoff_max_usec ? t->backoff_max_usec : KP_HOSTCTL_BACKOFF_MAX_USEC;
    uint64_t d = since_usec > 0 && now_usec > since_usec ? (uint64_t)(now_usec - since_usec) : 0;

    if (max < t->probe_interval_usec)
        max = t->probe_interval_usec;
    return d < t->probe_interval_usec ? t->probe_interval_usec : d > max ? max : d;
}

uint64_t kp_hostctl_probe_period(const struct kp_sshhost_view *h, const struct kp_hostctl_timing *t)
{
    const struct kp_condition *cur = kp_conditions_get(&h->conditions, "Ready");

    if (!failing(h) || !cur)
        return t->probe_interval_usec;
    /* How long it had been failing at its last probe. */
    return backoff(t, cur->last_transition_usec, h->last_probe_usec);
}

bool kp_hostctl_suspect(const struct kp_sshhost_view *h)
{
    const struct kp_condition *cur = kp_conditions_get(&h->conditions, "Ready");

    return !cur || cur->status != KP_COND_TRUE;
}

enum kp_hostctl_step kp_hostctl_plan(const struct kp_sshhost_view *h, int64_t now_usec,
                                     const struct kp_hostctl_timing *t, uint64_t *ret_wait_usec)
{
    uint64_t period;

    *ret_wait_usec = 0;
    /* The claim is the lock: whatever else the host says, its holder decides, and we only check
     * that the holder still exists. A claimed state without a claimRef is checked here too
     * (and released: nobody can hold it). */
    if (h->claim_name || claimed_state(h->state))
        return KP_HOSTCTL_STEP_CLAIMED;
    if (h->maintenance)
        return h->state == KP_HOST_MAINTENANCE ? KP_HOSTCTL_STEP_PARKED
                                               : KP_HOSTCTL_STEP_MAINTENANCE_ENTER;
    if (h->state == KP_HOST_MAINTENANCE)
        return KP_HOSTCTL_STEP_MAINTENANCE_EXIT;
    /* A spec the controller cannot use is refused before anything dials the host, and looked at
     * again on every event (the edit that fixes it is one). */
    if (kp_sshhost_validate(h, NULL) != 0)
        return KP_HOSTCTL_STEP_INVALID;
    /* Pending (out of maintenance, a released claim) is probed at once, whenever it was probed
     * last; so is a host that was refused for its address (the caller found the older host
     * gone, or it would not have asked). */
    if (h->state == KP_HOST_PENDING || ready_reason_is(h, KP_HOSTCTL_REASON_DUPLICATE))
        return KP_HOSTCTL_STEP_PROBE;
    period = kp_hostctl_probe_period(h, t);
    if (h->observed_generation == h->generation && h->last_probe_usec > 0 &&
        now_usec >= h->last_probe_usec && (uint64_t)(now_usec - h->last_probe_usec) < period) {
        uint64_t left = period - (uint64_t)(now_usec - h->last_probe_usec);

        *ret_wait_usec = left < KP_HOSTCTL_SOON_USEC ? KP_HOSTCTL_SOON_USEC : left;
        return KP_HOSTCTL_STEP_FRESH;
    }
    return KP_HOSTCTL_STEP_PROBE;
}

void kp_hostctl_ready_for(const struct kp_sshhost_view *h, enum kp_host_state state,
                          const char *reason_hint, const char *last_error, int64_t now_usec,
                          struct kp_claim_status *st)
{
    const struct kp_condition *cur = kp_conditions_get(&h->conditions, "Ready");
    enum kp_cond_status status;
    const char *reason, *message;

    switch (state) {
    case KP_HOST_AVAILABLE:
    case KP_HOST_CLAIMED:
    case KP_HOST_IN_USE:
        status = KP_COND_TRUE;
        reason = KP_HOSTCTL_REASON_SUCCEEDED;
        message = kp_host_state_name(state);
        break;
    case KP_HOST_UNHEALTHY:
        status = KP_COND_FALSE;
        reason = reason_hint ? reason_hint : KP_HOSTCTL_REASON_FAILED;
        message = last_error && *last_error ? last_error : "the last probe failed";
        break;
    case KP_HOST_MAINTENANCE:
        status = KP_COND_FALSE;
        reason = KP_HOSTCTL_REASON_MAINTENANCE;
        message = "parked by the " KP_KPSSH_ANNOTATION_MAINTENANCE " annotation";
        break;
    case KP_HOST_LEAVING:
        status = KP_COND_FALSE;
        reason = KP_HOSTCTL_REASON_LEAVING;
        message = "leaving the cluster";
        break;
    case KP_HOST_PENDING:
    case KP_HOST_STATE_UNKNOWN:
    default:
        status = KP_COND_UNKNOWN;
        reason = KP_HOSTCTL_REASON_AWAITING;
        message = "no successful probe yet";
        break;
    }
    st->set_ready = true;
    st->ready_status = status;
    st->ready_reason = reason;
    st->ready_message = message;
    st->ready_transition_usec = cur && cur->status == status && kp_streq(cur->reason, reason) &&
                                        cur->last_transition_usec > 0
                                    ? cur->last_transition_usec
                                    : now_usec;
    if (!st->set_observed_generation) {
        st->set_observed_generation = true;
        st->observed_generation = h->generation;
    }
}

static bool str_differs(const char *want, const char *have)
{
    /* "" clears: equal to absent. */
    if (!want)
        return false;
    if (!*want)
        return have && *have;
    return !kp_streq(want, have);
}

bool kp_hostctl_unchanged(const struct kp_sshhost_view *h, const struct kp_claim_status *st)
{
    if (st->set_state && st->state != h->state)
        return false;
    if (st->claim_name || (st->clear_claim && (h->claim_name || h->provider_id)))
        return false;
    if ((st->clear_claim || st->clear_bootstrap_token_id) && h->bootstrap_token_id)
        return false;
    if (str_differs(st->installed_profile, h->installed_profile) ||
        str_differs(st->bootstrap_token_id, h->bootstrap_token_id) ||
        str_differs(st->provider_id, h->provider_id) ||
        str_differs(st->host_key_fingerprint, h->host_key_fingerprint) ||
        str_differs(st->last_probe_error, h->last_probe_error))
        return false;
    if (st->set_observed) {
        bool fc = false, fm = false;
        int64_t cpu = kp_resources_get(&h->observed_capacity, "cpu", &fc);
        int64_t mem = kp_resources_get(&h->observed_capacity, "memory", &fm);

        if (!fc || !fm || cpu != (int64_t)st->observed_cpus * 1000 ||
            mem != (int64_t)st->observed_mem_bytes * 1000 ||
            str_differs(st->observed_arch, h->observed_arch))
            return false;
    }
    if (st->last_probe_usec > 0 && st->last_probe_usec / 1000000 != h->last_probe_usec / 1000000)
        return false;
    if (st->set_observed_generation && st->observed_generation != h->observed_generation)
        return false;
    if (st->set_ready) {
        const struct kp_condition *cur = kp_conditions_get(&h->conditions, "Ready");

        if (!cur || cur->status != st->ready_status || !kp_streq(cur->reason, st->ready_reason))
            return false;
    }
    return true;
}

void kp_hostctl_decide_claimed(const struct kp_sshhost_view *h,
                               const struct kp_hostctl_claim_in *in,
                               const struct kp_hostctl_timing *t,
                               struct kp_hostctl_claim_action *ret)
{
    *ret = (struct kp_hostctl_claim_action){.verb = KP_HOSTCTL_CLAIM_RECHECK,
                                            .requeue_usec = t->claimed_recheck_usec};
    if (!h->claim_name) {
        ret->verb = KP_HOSTCTL_CLAIM_RELEASE_STALE;
        ret->why = "host is in a claimed state without a claimRef";
        ret->requeue_usec = KP_HOSTCTL_SOON_USEC;
        return;
    }
    if (!in->nodeclaim_found) {
        ret->verb = KP_HOSTCTL_CLAIM_RELEASE_STALE;
        ret->why = "NodeClaim no longer exists";
        ret->requeue_usec = KP_HOSTCTL_SOON_USEC;
        return;
    }
    if (h->claim_uid && *h->claim_uid && in->nodeclaim_uid && *in->nodeclaim_uid &&
        !kp_streq(h->claim_uid, in->nodeclaim_uid)) {
        ret->verb = KP_HOSTCTL_CLAIM_RELEASE_STALE;
        ret->why = "NodeClaim name was reused by a different object";
        ret->requeue_usec = KP_HOSTCTL_SOON_USEC;
        return;
    }
    /* InUse means registered (the Node exists), not a join that exited 0. The provider writes
     * it when its Create sees the Node; a Create that died after the join leaves the host
     * Claimed, and this finishes the job. */
    if (h->state == KP_HOST_CLAIMED && in->registered_pid && *in->registered_pid) {
        ret->verb = KP_HOSTCTL_CLAIM_MARK_IN_USE;
        ret->requeue_usec = h->bootstrap_token_id ? t->token_recheck_usec : t->claimed_recheck_usec;
        return;
    }
    /* Token hygiene only once the providerID is written: that happens after the join, so Create
     * is done with the token (collecting earlier would race Create's own writes). */
    if (h->provider_id && *h->provider_id && h->bootstrap_token_id && *h->bootstrap_token_id) {
        if (in->node_exists)
            ret->verb = KP_HOSTCTL_CLAIM_COLLECT_TOKEN;
        else
            ret->requeue_usec = t->token_recheck_usec;
    }
}

/* Appends "<what>: observed X < spec Y" to note when observed < spec; true when short. */
static bool shortfall(const struct kp_sshhost_view *h, const char *what, int64_t observed_milli,
                      char *note, size_t size)
{
    bool found = false;
    int64_t spec = kp_resources_get(&h->capacity, what, &found);
    size_t used = strlen(note);

    if (!found || observed_milli >= spec)
        return false;
    if (used < size)
        (void)snprintf(note + used, size - used, "%s%s: observed %" PRId64 "m < spec %" PRId64 "m",
                       used ? "; " : "", what, observed_milli, spec);
    return true;
}

/* True when the status's observed capacity already fell short of the spec. */
static bool was_short(const struct kp_sshhost_view *h)
{
    static const char *const res[] = {"cpu", "memory"};

    for (size_t i = 0; i < 2; i++) {
        bool fo = false, fs = false;
        int64_t o = kp_resources_get(&h->observed_capacity, res[i], &fo);
        int64_t s = kp_resources_get(&h->capacity, res[i], &fs);

        if (fo && fs && o < s)
            return true;
    }
    return false;
}

/* A zombie leave that has not finished deleting its Node: the host is Leaving (the controller was
 * killed during the guard) or Unhealthy / LeaveUnfinished (the leave ran and the Node delete
 * failed, or a later probe failed: that keeps the reason, so the marker survives). A leave that
 * failed (ZombieLeaveFailed) is not one: only a leave that ran lets Nodes go. Claimed hosts are
 * the provider's. */
static bool leave_unfinished(const struct kp_sshhost_view *h)
{
    if (h->claim_name)
        return false;
    return h->state == KP_HOST_LEAVING || (h->state == KP_HOST_UNHEALTHY &&
                                           ready_reason_is(h, KP_HOSTCTL_REASON_LEAVE_UNFINISHED));
}

void kp_hostctl_decide_probe(const struct kp_sshhost_view *h, const struct kp_hostctl_probe_in *in,
                             const struct kp_hostctl_timing *t,
                             struct kp_hostctl_probe_outcome *ret)
{
    struct kp_claim_status *st = &ret->st;
    enum kp_host_state state;

    memset(ret, 0, sizeof(*ret));
    ret->requeue_usec = t->probe_interval_usec;
    st->last_probe_usec = in->now_usec > 0 ? in->now_usec : 1;
    st->set_observed_generation = true;
    st->observed_generation = h->generation;
    if (in->err < 0 || !in->res) {
        const char *msg = in->err_msg && *in->err_msg ? in->err_msg : kp_strerror(in->err);

        state = KP_HOST_UNHEALTHY;
        st->state = state;
        st->set_state = true;
        st->last_probe_error = msg;
        kp_hostctl_ready_for(h, state,
                             in->err == -KP_EHOSTKEY ? KP_HOSTCTL_REASON_HOSTKEY
                             : leave_unfinished(h)   ? KP_HOSTCTL_REASON_LEAVE_UNFINISHED
                                                     : KP_HOSTCTL_REASON_FAILED,
                             msg, in->now_usec, st);
        /* Backed off by how long it has been failing (the condition's transition time). */
        ret->requeue_usec = backoff(t, st->ready_transition_usec, in->now_usec);
        ret->write = !kp_hostctl_unchanged(h, st);
        return;
    }
    ret->healthy = true;
    st->set_observed = true;
    st->observed_cpus = in->res->cpus;
    st->observed_mem_bytes = in->res->mem_bytes;
    st->observed_arch = kp_probe_arch(in->res->machine);
    /* TOFU: pin on the first success, never over an existing pin (a changed key fails the dial
     * with -KP_EHOSTKEY and never gets here). */
    if (in->seen_fp && *in->seen_fp && !(h->host_key_fingerprint && *h->host_key_fingerprint))
        st->host_key_fingerprint = in->seen_fp;
    {
        bool now_short = false;

        ret->drift_note[0] = '\0';
        now_short |= shortfall(h, "cpu", (int64_t)in->res->cpus * 1000, ret->drift_note,
                               sizeof(ret->drift_note));
        now_short |= shortfall(h, "memory", (int64_t)in->res->mem_bytes * 1000, ret->drift_note,
                               sizeof(ret->drift_note));
        ret->capacity_drift = now_short && !was_short(h);
        if (!ret->capacity_drift)
            ret->drift_note[0] = '\0';
    }
    if (in->res->kubelet_active) {
        /* The facts are written as they are; the guard decides the state from the result. */
        const struct kp_condition *cur = kp_conditions_get(&h->conditions, "Ready");

        ret->zombie_check = true;
        kp_hostctl_ready_for(h, h->state, cur && cur->status == KP_COND_FALSE ? cur->reason : NULL,
                             h->last_probe_error, in->now_usec, st);
    } else {
        /* kubelet is stopped now: the Node an unfinished leave left behind goes before the host
         * is Available (and claimable) again. */
        ret->collect_node = leave_unfinished(h);
        state = KP_HOST_AVAILABLE;
        st->state = state;
        st->set_state = true;
        st->last_probe_error = "";
        kp_hostctl_ready_for(h, state, NULL, NULL, in->now_usec, st);
    }
    ret->write = !kp_hostctl_unchanged(h, st);
}

bool kp_hostctl_node_ours(const struct kp_sshhost_view *h, const char *pid)
{
    const char *rest;
    size_t ns_len;

    if (!pid || !*pid)
        return false;
    if ((h->provider_id && kp_streq(pid, h->provider_id)) ||
        (h->adopted_provider_id && kp_streq(pid, h->adopted_provider_id)))
        return true;
    /* kpssh://<pool-ns>/<host> */
    rest = kp_startswith(pid, KP_SSH_PROVIDER_ID_SCHEME);
    if (!rest || !h->e.ns || !h->e.name)
        return false;
    ns_len = strlen(h->e.ns);
    return strncmp(rest, h->e.ns, ns_len) == 0 && rest[ns_len] == '/' &&
           kp_streq(rest + ns_len + 1, h->e.name);
}

enum kp_hostctl_zombie kp_hostctl_zombie_verdict(const struct kp_sshhost_view *h,
                                                 bool our_node_found)
{
    if (our_node_found || (h->installed_profile && *h->installed_profile))
        return KP_HOSTCTL_ZOMBIE_OURS;
    return KP_HOSTCTL_ZOMBIE_FOREIGN;
}

/* --- the controller ------------------------------------------------------------------------- */

struct kp_ssh_hostctl {
    char *pool_ns;
    struct kp_store *hosts, *nodes, *nodeclaims, *profiles; /* nodeclaims may be NULL */
    struct kp_events *events;
    const struct kp_ssh_observer *obs;
    struct kp_hostctl_timing t;
    uint64_t probe_timeout;
    struct kp_controller *base; /* reconciler, handlers, readiness */
    struct kp_reconciler *rec;  /* base's, for the handlers' and the jobs' enqueues */
    /* Probes and zombie leaves run here, never on the reconcile workers; a job's end enqueues
     * its host's key on rec. Probes of suspect hosts (kp_hostctl_suspect) run in the pool's
     * slow lane, so the other threads keep probing the hosts that answer. */
    struct kp_ssh_jobs *jobs;
    const struct kp_ctx *ctx; /* the process's (borrowed), or NULL */
    uint64_t retry_usec;      /* a host whose job the full queue refused looks again this soon */
    bool started;             /* main thread only */
};

static void host_event(struct kp_ssh_hostctl *hc, const struct kp_sshhost_view *h, bool warning,
                       const char *reason, const char *action, const char *note)
{
    kp_hostio_event(hc->events, h, warning, reason, action, note);
}

/* Submits an SSH job for key. The pool owns arg whatever the answer (a refused one is freed
 * here). Queued: the job's end enqueues the key, so *ret_requeue is cleared. A full queue is
 * no error: the key comes back after retry_usec. A pool that is stopping: nothing to do. */
static int submit(struct kp_ssh_hostctl *hc, const char *key, enum kp_ssh_job_kind kind, bool slow,
                  kp_ssh_job_fn fn, kp_ssh_job_free_fn free_arg, void *arg, uint64_t *ret_requeue)
{
    struct kp_ssh_job_spec spec = {
        .key = key,
        .kind = kind,
        .flags = slow ? KP_SSH_JOB_SLOW : 0,
        /* The job's own context deadline: a probe's timeout; a leave is bounded by its
         * profile's timeout inside the phase. */
        .timeout_usec = kind == KP_SSH_JOB_PROBE ? hc->probe_timeout : 0,
        .fn = fn,
        .free_arg = free_arg,
        .arg = arg,
    };
    int r = kp_ssh_jobs_submit(hc->jobs, &spec);

    if (r == 0) {
        *ret_requeue = 0;
        return 0;
    }
    free_arg(arg);
    switch (r) {
    case -EAGAIN:
        kp_log_warn_rl("hostctl-jobs-full", "SSH job queue full; host retried shortly",
                       KP_LF("host", key), KP_LF("job", kp_ssh_job_kind_name(kind)));
        *ret_requeue = hc->retry_usec;
        return 0;
    case -EEXIST: /* cannot happen: the reconcile took this key's job first */
        *ret_requeue = hc->retry_usec;
        return 0;
    case -ESHUTDOWN:
        return 0;
    default:
        return r;
    }
}

/* Writes st on host by CAS unless it changes nothing. *ret_host (optional): the host as written
 * (or a new reference to host when skipped). -KP_ECONFLICT when someone wrote it since. */
static int write_status(struct kp_client *c, struct kp_entry *host,
                        const struct kp_claim_status *st, struct kp_entry **ret_host)
{
    struct kp_claim_io io = kp_claim_io_api(c);
    struct kp_error e = KP_ERROR_INIT;
    int r;

    if (kp_hostctl_unchanged(kp_sshhost_view(host), st)) {
        if (ret_host)
            *ret_host = kp_entry_ref(host);
        return 0;
    }
    r = kp_claim_cas(&io, kp_sshhost_view(host), st, ret_host, &e);
    if (r < 0 && r != -KP_ECONFLICT && r != -ENOENT)
        kp_log_warn_errno(r, "host status write failed", KP_LF("host", host->name),
                          KP_LF("detail", e.message ? e.message : ""));
    kp_error_done(&e);
    return r == -ENOENT ? 0 : r; /* deleted meanwhile: nothing left to do */
}

/* The first Node in the store with h's node IP (its name into a new string), or NULL; with
 * ours_only, the first that is ours by kp_hostctl_node_ours. */
static int node_by_ip(struct kp_ssh_hostctl *hc, const struct kp_sshhost_view *h, bool ours_only,
                      char **ret_name)
{
    const char *ip = kp_sshhost_node_ip(h);
    struct kp_store_list l = {0};
    int r;

    *ret_name = NULL;
    if (!ip || !*ip)
        return 0;
    if ((r = kp_store_by_index(hc->nodes, KP_SSH_INDEX_NODE_IP, ip, &l)) < 0)
        return r;
    for (size_t i = 0; i < l.n && !*ret_name; i++) {
        if (ours_only && !kp_hostctl_node_ours(h, kp_node_view(l.v[i])->provider_id))
            continue;
        *ret_name = kp_strdup(l.v[i]->name);
        if (!*ret_name)
            r = -ENOMEM;
    }
    kp_store_list_free(&l);
    return r;
}

/* Does the NodeClaim name (with the claim's uid) exist? The informer answers "yes" alone; a
 * "no" or another uid is confirmed by a GET, because a lagging cache must never release the
 * host of a NodeClaim that was just created. *ret_uid: a new string or NULL. */
static int nodeclaim_lookup(struct kp_ssh_hostctl *hc, struct kp_client *c,
                            const struct kp_sshhost_view *h, bool *ret_found, char **ret_uid)
{
    struct kp_error e = KP_ERROR_INIT;
    struct kp_entry *ne = NULL;
    const char *uid = NULL;
    json_t *obj = NULL;
    int r;

    *ret_found = false;
    *ret_uid = NULL;
    if (hc->nodeclaims && kp_store_get(hc->nodeclaims, h->claim_name, &ne) == 0) {
        const char *cached = ne->uid;

        if (!h->claim_uid || !*h->claim_uid || !cached || !*cached ||
            kp_streq(cached, h->claim_uid)) {
            *ret_found = true;
            *ret_uid = cached ? kp_strdup(cached) : NULL;
            r = cached && !*ret_uid ? -ENOMEM : 0;
            kp_entry_unref(ne);
            return r;
        }
        kp_entry_unref(ne);
    }
    r = kp_client_get(c, &KP_RES_NODECLAIM, NULL, h->claim_name, &obj, &e);
    if (r == -ENOENT) {
        r = 0;
        goto out;
    }
    if (r < 0)
        goto out;
    *ret_found = true;
    if (kp_json_pathv_str(obj, KP_JSON_PATH("metadata", "uid"), &uid) == 0 && uid) {
        *ret_uid = kp_strdup(uid);
        if (!*ret_uid)
            r = -ENOMEM;
    }
out:
    kp_json_unref(obj);
    kp_error_done(&e);
    return r;
}

/* The providerID of the registered Node of h's claim (Node name = NodeClaim name), or NULL: a
 * Node of that name whose providerID is h's, the static one, or which has h's node IP (an
 * adopted providerID). */
static int registered_pid(struct kp_ssh_hostctl *hc, const struct kp_sshhost_view *h,
                          char **ret_pid)
{
    struct kp_entry *ne = NULL;
    const struct kp_node_view *nv;
    char *static_pid = NULL;
    bool ours = false;
    int r = 0;

    *ret_pid = NULL;
    if (kp_store_get(hc->nodes, h->claim_name, &ne) < 0)
        return 0;
    nv = kp_node_view(ne);
    if (!nv->provider_id || !*nv->provider_id)
        goto out;
    static_pid = kp_hostio_static_provider_id(h->e.ns, h->e.name);
    if (!static_pid) {
        r = -ENOMEM;
        goto out;
    }
    ours = kp_streq(nv->provider_id, static_pid) || kp_streq(nv->provider_id, h->provider_id);
    for (size_t i = 0; !ours && i < nv->n_addresses; i++)
        ours = kp_streq(nv->addresses[i], kp_sshhost_node_ip(h));
    if (ours) {
        *ret_pid = kp_strdup(nv->provider_id);
        if (!*ret_pid)
            r = -ENOMEM;
    }
out:
    kp_free(static_pid);
    kp_entry_unref(ne);
    return r;
}

static int reconcile_claimed(struct kp_ssh_hostctl *hc, struct kp_client *c, struct kp_entry *host,
                             uint64_t *ret_requeue)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    struct kp_hostctl_claim_in in = {0};
    struct kp_hostctl_claim_action act;
    struct kp_claim_status st = {0};
    struct kp_error e = KP_ERROR_INIT;
    char *uid = NULL, *pid = NULL, *ipnode = NULL;
    int64_t now = (int64_t)kp_real_usec();
    int r = 0;

    if (h->claim_name) {
        if ((r = nodeclaim_lookup(hc, c, h, &in.nodeclaim_found, &uid)) < 0)
            goto out; /* no verdict without an answer: retried with backoff */
        in.nodeclaim_uid = uid;
        if ((r = registered_pid(hc, h, &pid)) < 0 || (r = node_by_ip(hc, h, false, &ipnode)) < 0)
            goto out;
        in.registered_pid = pid;
        in.node_exists = pid || ipnode;
        if (!in.node_exists) {
            struct kp_entry *ne = NULL;

            in.node_exists = kp_store_get(hc->nodes, h->claim_name, &ne) == 0;
            kp_entry_unref(ne);
        }
    }
    kp_hostctl_decide_claimed(h, &in, &hc->t, &act);
    switch (act.verb) {
    case KP_HOSTCTL_CLAIM_RELEASE_STALE:
        if (h->bootstrap_token_id && kp_token_delete(c, h->bootstrap_token_id, &e) < 0)
            kp_log_warn("bootstrap token of a stale claim not deleted; it expires on its own",
                        KP_LF("host", h->e.name), KP_LF("token_id", h->bootstrap_token_id));
        st.set_state = true;
        st.state = KP_HOST_PENDING;
        st.clear_claim = true;
        kp_hostctl_ready_for(h, KP_HOST_PENDING, NULL, NULL, now, &st);
        if ((r = write_status(c, host, &st, NULL)) < 0)
            goto out;
        kp_log_info("releasing host with stale claimRef", KP_LF("host", h->e.name),
                    KP_LF("nodeclaim", h->claim_name ? h->claim_name : ""),
                    KP_LF("reason", act.why));
        host_event(hc, h, true, KP_HOSTCTL_EVENT_STALE_CLAIM, "Release", act.why);
        break;
    case KP_HOSTCTL_CLAIM_MARK_IN_USE:
        st.set_state = true;
        st.state = KP_HOST_IN_USE;
        st.provider_id = pid;
        kp_hostctl_ready_for(h, KP_HOST_IN_USE, NULL, NULL, now, &st);
        if ((r = write_status(c, host, &st, NULL)) < 0)
            goto out;
        kp_log_info("claimed host's Node registered; host InUse", KP_LF("host", h->e.name),
                    KP_LF("nodeclaim", h->claim_name), KP_LF("provider_id", pid));
        break;
    case KP_HOSTCTL_CLAIM_COLLECT_TOKEN:
        if ((r = kp_token_delete(c, h->bootstrap_token_id, &e)) < 0) {
            kp_log_warn_errno(r, "spent bootstrap token not deleted; retrying",
                              KP_LF("host", h->e.name), KP_LF("token_id", h->bootstrap_token_id));
            goto out;
        }
        st.clear_bootstrap_token_id = true;
        if ((r = write_status(c, host, &st, NULL)) < 0)
            goto out;
        kp_log_info("spent bootstrap token collected", KP_LF("host", h->e.name),
                    KP_LF("token_id", h->bootstrap_token_id));
        break;
    case KP_HOSTCTL_CLAIM_RECHECK:
        break;
    }
    *ret_requeue = act.requeue_usec;
out:
    kp_error_done(&e);
    kp_free(uid);
    kp_free(pid);
    kp_free(ipnode);
    return r;
}

/* Appends to l the Nodes of index idx with value v that l does not hold yet. */
static int gather(struct kp_store *nodes, const char *idx, const char *v, struct kp_store_list *l)
{
    struct kp_store_list more = {0};
    int r;

    if (!v || !*v)
        return 0;
    if ((r = kp_store_by_index(nodes, idx, v, &more)) < 0)
        return r;
    if (more.n > 0) {
        struct kp_entry **v2 = kp_reallocarray(l->v, l->n + more.n, sizeof(*v2));

        if (!v2) {
            kp_store_list_free(&more);
            return -ENOMEM;
        }
        l->v = v2;
    }
    for (size_t i = 0; i < more.n; i++) {
        bool dup = false;

        for (size_t j = 0; j < l->n && !dup; j++)
            dup = l->v[j] == more.v[i];
        if (dup)
            continue;
        l->v[l->n++] = more.v[i];
        more.v[i] = NULL; /* moved */
    }
    kp_store_list_free(&more);
    return r;
}

int kp_hostctl_delete_our_nodes(struct kp_store *nodes, struct kp_client *c,
                                const struct kp_sshhost_view *h, int64_t since_usec,
                                const char *what, unsigned *ret_deleted, char **ret_why)
{
    struct kp_store_list l = {0};
    char *spid = NULL;
    int r;

    *ret_deleted = 0;
    *ret_why = NULL;
    if (since_usec <= 0)
        return 0;
    if (h->e.ns && h->e.name &&
        !(spid =
              kp_strjoin(KP_SSH_PROVIDER_ID_SCHEME, h->e.ns, "/", h->e.name, (const char *)NULL)))
        return -ENOMEM;
    if ((r = gather(nodes, KP_SSH_INDEX_NODE_IP, kp_sshhost_node_ip(h), &l)) < 0 ||
        (r = gather(nodes, KP_SSH_INDEX_NODE_PROVIDER_ID, spid, &l)) < 0 ||
        (r = gather(nodes, KP_SSH_INDEX_NODE_PROVIDER_ID, h->provider_id, &l)) < 0 ||
        (r = gather(nodes, KP_SSH_INDEX_NODE_PROVIDER_ID, h->adopted_provider_id, &l)) < 0)
        goto out;
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_node_view *n = kp_node_view(l.v[i]);
        struct kp_delete_opts o = {.precondition_uid = n->e.uid};
        struct kp_error e = KP_ERROR_INIT;

        if (!kp_hostctl_node_ours(h, n->provider_id)) {
            kp_log_warn("a Node with the host's address is not kpssh's; not deleted",
                        KP_LF("host", h->e.name), KP_LF("node", n->e.name),
                        KP_LF("provider_id", n->provider_id ? n->provider_id : ""));
            continue;
        }
        if (n->meta.deletion_usec != 0)
            continue; /* on its way already (its termination is the core's) */
        if (n->meta.creation_usec <= 0 || n->meta.creation_usec >= since_usec) {
            kp_log_warn("a Node of the host is newer than its leave; not deleted",
                        KP_LF("host", h->e.name), KP_LF("node", n->e.name));
            continue;
        }
        r = kp_client_delete(c, &KP_RES_NODE, NULL, n->e.name, &o, &e);
        kp_error_done(&e);
        if (r == -ENOENT || r == -KP_ECONFLICT)
            continue; /* gone already, or another incarnation with this name */
        if (r < 0) {
            *ret_why = kp_strjoin(what, " left, but deleting Node ", n->e.name,
                                  " failed: ", kp_strerror(r), (const char *)NULL);
            kp_log_error_errno(r, "a host left but its Node was not deleted",
                               KP_LF("host", h->e.name), KP_LF("node", n->e.name));
            r = *ret_why ? 0 : -ENOMEM;
            goto out;
        }
        (*ret_deleted)++;
        kp_log_info("deleted the Node of a host that left", KP_LF("host", h->e.name),
                    KP_LF("node", n->e.name), KP_LF("leave", what),
                    KP_LF("from", kp_host_state_name(h->state)));
    }
    r = 0;
out:
    kp_free(spid);
    kp_store_list_free(&l);
    return r;
}

/* Writes host Unhealthy with Ready reason and why as lastProbeError, unless it says so already.
 * *ret_written: whether it was written now (the caller reports it once, then). */
static int write_unhealthy(struct kp_client *c, struct kp_entry *host, const char *reason,
                           const char *why, int64_t now, bool *ret_written)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    struct kp_claim_status st = {0};
    int r;

    *ret_written = false;
    st.set_state = true;
    st.state = KP_HOST_UNHEALTHY;
    st.last_probe_error = why;
    kp_hostctl_ready_for(h, KP_HOST_UNHEALTHY, reason, why, now, &st);
    if (kp_hostctl_unchanged(h, &st))
        return 0;
    if ((r = write_status(c, host, &st, NULL)) < 0)
        return r;
    *ret_written = true;
    return 0;
}

/* Parks host as a foreign kubelet (why: the lastProbeError), once: a host parked already is
 * not reported again. */
static int park_foreign(struct kp_ssh_hostctl *hc, struct kp_client *c, struct kp_entry *host,
                        const char *why, int64_t now)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    bool written;
    int r;

    if ((r = write_unhealthy(c, host, KP_HOSTCTL_REASON_FOREIGN, why, now, &written)) < 0 ||
        !written)
        return r;
    kp_log_warn("an active kubelet kpssh did not start: host parked and left untouched",
                KP_LF("host", h->e.name), KP_LF("address", h->address), KP_LF("why", why));
    host_event(hc, h, true, KP_HOSTCTL_EVENT_FOREIGN, "Park", why);
    kp_ssh_observe_zombie(hc->obs, KP_SSH_ZOMBIE_PARKED_FOREIGN);
    return 0;
}

/* A zombie leave on a pool thread (leave_job_run): what the guard prepared, and what the
 * leave said. */
struct leave_job {
    struct kp_entry *host; /* the host as written Leaving */
    struct kp_hostio_leave lv;
    const struct kp_ssh_observer *obs;
    int64_t since_usec; /* when the guard took the host out of service */
    uint64_t t0;        /* monotonic, when the guard started */
    char *msg;          /* the leave's error text */
};

static void leave_job_free(void *arg)
{
    struct leave_job *j = arg;

    if (!j)
        return;
    kp_hostio_leave_done(&j->lv);
    kp_entry_unref(j->host);
    kp_free(j->msg);
    kp_free(j);
}

static int leave_job_run(void *arg, const struct kp_ctx *ctx)
{
    struct leave_job *j = arg;

    return kp_hostio_leave_run(&j->lv, kp_sshhost_view(j->host), ctx, j->obs, &j->msg);
}

/* What comes after a zombie leave that ended with r (msg: its text) on leaving, the host as it
 * is now (Leaving): park it (no install marker), Unhealthy (the leave failed, or a Node delete
 * did), or delete our Nodes from before since_usec and Available. */
static int zombie_left(struct kp_ssh_hostctl *hc, struct kp_client *c, struct kp_entry *leaving,
                       int r, const char *msg, int64_t since_usec, uint64_t t0,
                       uint64_t *ret_requeue)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(leaving);
    struct kp_claim_status st = {0};
    struct kp_entry *done = NULL;
    int64_t now = (int64_t)kp_real_usec();
    unsigned deleted = 0;
    char *why = NULL;

    *ret_requeue = hc->t.probe_interval_usec;
    st.set_state = true;
    if (r == -ENOENT && !(h->installed_profile && *h->installed_profile)) {
        /* No install marker: kpssh never installed this kubelet and has nothing to leave with,
         * whatever Node it registered: somebody else's machine, touched no further. */
        r = park_foreign(hc, c, leaving,
                         "kubelet is active but kpssh has no install marker for this host, so it "
                         "did not start that kubelet and cannot leave with it; the host is parked "
                         "and no Node is touched (stop that kubelet or delete this SSHHost)",
                         now);
        goto out;
    }
    if (r < 0) {
        why = kp_strjoin("zombie leave failed: ", msg ? msg : kp_strerror(r), (const char *)NULL);
        kp_log_warn_errno(r, "zombie leave failed; host Unhealthy, retried on the next probe",
                          KP_LF("host", h->e.name), KP_LF("detail", msg ? msg : ""));
        host_event(hc, h, true, KP_HOSTCTL_EVENT_ZOMBIE_FAILED, "Leave",
                   why ? why : "zombie leave failed");
        kp_ssh_observe_zombie(hc->obs, KP_SSH_ZOMBIE_LEAVE_FAILED);
        st.state = KP_HOST_UNHEALTHY;
        st.last_probe_error = why ? why : "zombie leave failed";
        kp_hostctl_ready_for(h, KP_HOST_UNHEALTHY, KP_HOSTCTL_REASON_ZOMBIE_FAILED,
                             st.last_probe_error, now, &st);
        r = write_status(c, leaving, &st, NULL);
        goto out;
    }
    /* kubelet is stopped now, so our Nodes cannot come back: delete them (the invoice line). */
    if ((r = kp_hostctl_delete_our_nodes(hc->nodes, c, h, since_usec, "zombie", &deleted, &why)) <
        0)
        goto out;
    if (why) {
        st.state = KP_HOST_UNHEALTHY;
        st.last_probe_error = why;
        kp_hostctl_ready_for(h, KP_HOST_UNHEALTHY, KP_HOSTCTL_REASON_LEAVE_UNFINISHED, why, now,
                             &st);
        r = write_status(c, leaving, &st, NULL);
        goto out;
    }
    kp_ssh_observe_zombie(hc->obs, KP_SSH_ZOMBIE_LEFT);
    host_event(hc, h, false, KP_HOSTCTL_EVENT_ZOMBIE_LEFT, "Leave",
               deleted ? "leave ran and the Node was deleted" : "leave ran");
    st.state = KP_HOST_AVAILABLE;
    st.last_probe_error = "";
    kp_hostctl_ready_for(h, KP_HOST_AVAILABLE, NULL, NULL, now, &st);
    if ((r = write_status(c, leaving, &st, &done)) < 0)
        goto out;
    kp_log_info("zombie left; host Available", KP_LF("host", h->e.name),
                KP_LF("nodes_deleted", (uint64_t)deleted),
                KP_LF("leave_ms", (kp_mono_usec() - t0) / 1000));
out:
    kp_entry_unref(done);
    kp_free(why);
    return r;
}

/* The zombie guard on host (as just written by the probe): kubelet is active and no claim.
 * Foreign: parked here. Ours: Leaving by CAS, then the leave is a job of the pool; its end
 * brings the key back, and the reconcile that takes its result finishes (zombie_left). */
static int zombie_guard(struct kp_ssh_hostctl *hc, struct kp_client *c, const struct kp_ctx *cx,
                        struct kp_entry *host, uint64_t *ret_requeue)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    struct kp_entry *leaving = NULL;
    struct kp_claim_status st = {0};
    struct leave_job *job = NULL;
    char *node = NULL;
    int64_t now = (int64_t)kp_real_usec();
    uint64_t t0 = kp_mono_usec();
    int r;

    *ret_requeue = hc->t.probe_interval_usec;
    if (h->claim_name) /* claimed meanwhile: the claim holder's host now */
        return 0;
    if ((r = node_by_ip(hc, h, true, &node)) < 0)
        return r;
    if (kp_hostctl_zombie_verdict(h, node != NULL) == KP_HOSTCTL_ZOMBIE_FOREIGN) {
        r = park_foreign(hc, c, host, KP_HOSTCTL_FOREIGN_MESSAGE, now);
        goto out;
    }
    if (kp_ctx_done(cx)) /* stopping: no leave starts; the next leader's probe finds it again */
        goto out;

    /* Ours: Leaving by CAS from the version the probe wrote, so a claim that raced us wins. */
    st.set_state = true;
    st.state = KP_HOST_LEAVING;
    kp_hostctl_ready_for(h, KP_HOST_LEAVING, NULL, NULL, now, &st);
    if ((r = write_status(c, host, &st, &leaving)) < 0 || !leaving)
        goto out;
    kp_log_warn("zombie membership detected: kubelet active on an unclaimed host; leaving",
                KP_LF("host", h->e.name), KP_LF("node", node ? node : ""),
                KP_LF("installed_profile", h->installed_profile ? h->installed_profile : ""));
    host_event(hc, h, true, KP_HOSTCTL_EVENT_ZOMBIE, "Leave",
               node ? "kubelet active on an unclaimed host with a Node of kpssh's; running leave"
                    : "kubelet active on an unclaimed host kpssh installed; running leave");
    job = kp_calloc(1, sizeof(*job));
    if (!job) {
        r = -ENOMEM;
        goto out;
    }
    job->obs = hc->obs;
    job->since_usec = now;
    job->t0 = t0;
    job->host = kp_entry_ref(leaving);
    r = kp_hostio_leave_prepare(hc->profiles, c, kp_sshhost_view(leaving), &job->lv, &job->msg);
    if (r < 0) { /* nothing to leave with (or its Secret): decided without a dial */
        r = zombie_left(hc, c, leaving, r, job->msg, now, t0, ret_requeue);
        goto out;
    }
    r = submit(hc, h->e.key, KP_SSH_JOB_LEAVE, false, leave_job_run, leave_job_free, job,
               ret_requeue);
    job = NULL; /* submit owns it, whatever it answered */
out:
    leave_job_free(job);
    kp_entry_unref(leaving);
    kp_free(node);
    return r;
}

/* A probe on a pool thread: the host as submitted, its creds (loaded by the reconcile), and
 * what the probe found. */
struct probe_job {
    struct kp_entry *host;
    struct kp_hostio_creds cr;
    uint64_t timeout_usec;
    const struct kp_ssh_observer *obs;
    struct kp_probe_result res;
    char fp[KP_SSH_FP_SIZE]; /* the host key seen when no pin existed (TOFU) */
    char *msg;               /* the probe's error text */
};

static void probe_job_free(void *arg)
{
    struct probe_job *j = arg;

    if (!j)
        return;
    kp_hostio_creds_done(&j->cr);
    kp_entry_unref(j->host);
    kp_free(j->msg);
    kp_free(j);
}

/* Dials the host and runs the probe command under ctx (the job's: the probe timeout under the
 * process's). Returns the probe's verdict (0 or its error, text in j->msg). */
static int probe_job_run(void *arg, const struct kp_ctx *ctx)
{
    struct probe_job *j = arg;
    const struct kp_sshhost_view *h = kp_sshhost_view(j->host);
    struct kp_ssh_capture cap;
    struct kp_ssh_target t;
    char *why = NULL;
    uint64_t t0 = kp_mono_usec();
    int r;

    j->fp[0] = '\0';
    kp_ssh_capture_init(&cap);
    j->cr.ctx = ctx;
    kp_hostio_target(h, &j->cr, &t);
    t.dial_timeout_usec = j->timeout_usec;
    /* A Verified host's login runs kpssh-shim whatever the command (sshd's ForceCommand): it
     * gets the probe envelope, and the shim answers with the same four lines. */
    if (h->exec_mode == KP_EXEC_VERIFIED)
        r = kp_ssh_probe_shim(&t, h->shim_command ? h->shim_command : KP_SSHHOST_SHIM_DEFAULT,
                              kp_deadline_in(j->timeout_usec), &cap, &j->msg);
    else
        r = kp_ssh_exec_capture(&t, kp_probe_command(), kp_deadline_in(j->timeout_usec), &cap,
                                &j->msg);
    if (cap.pin == KP_SSH_PIN_NONE && cap.fp[0])
        memcpy(j->fp, cap.fp, KP_SSH_FP_SIZE);
    if (r == 0 && (r = kp_probe_parse(cap.out.data, cap.out.len, &j->res, &why)) < 0) {
        kp_msg_set(&j->msg, "probe output not understood: %s", why ? why : kp_strerror(r));
        kp_free(why);
    }
    /* A probe cut short by a shutdown or a lost Lease says nothing about the host. */
    if (r != -ECANCELED && r != -KP_ENOTLEADER)
        kp_ssh_observe_probe(j->obs, r == 0, kp_mono_usec() - t0);
    kp_ssh_capture_done(&cap);
    return r;
}

/* The end of an unfinished zombie leave (out->collect_node): kubelet is stopped, so the Nodes of
 * ours that predate the leave (the host's Ready condition going False, when the guard took it out
 * of service) go before the host is Available again (kp_hostctl_delete_our_nodes). When a delete fails the
 * probe's write becomes Unhealthy / LeaveUnfinished with the error (*ret_why owns the text) and
 * the next probe tries again. */
static int collect_stale_nodes(struct kp_ssh_hostctl *hc, struct kp_client *c,
                               const struct kp_sshhost_view *h, int64_t now,
                               struct kp_hostctl_probe_outcome *out, char **ret_why)
{
    const struct kp_condition *cur = kp_conditions_get(&h->conditions, "Ready");
    int64_t since = cur && cur->status == KP_COND_FALSE ? cur->last_transition_usec : 0;
    unsigned deleted = 0;
    int r;

    if ((r = kp_hostctl_delete_our_nodes(hc->nodes, c, h, since, "zombie", &deleted, ret_why)) < 0)
        return r;
    if (*ret_why) {
        out->st.state = KP_HOST_UNHEALTHY;
        out->st.last_probe_error = *ret_why;
        kp_hostctl_ready_for(h, KP_HOST_UNHEALTHY, KP_HOSTCTL_REASON_LEAVE_UNFINISHED, *ret_why,
                             now, &out->st);
        return 0;
    }
    if (deleted > 0) {
        host_event(hc, h, false, KP_HOSTCTL_EVENT_ZOMBIE_LEFT, "Leave",
                   "kubelet was stopped by an earlier leave; its Node was deleted");
        kp_ssh_observe_zombie(hc->obs, KP_SSH_ZOMBIE_LEFT);
    }
    return 0;
}

/* Starts a probe of host: its creds are read here (an API call), the dial and the command run
 * on the pool. A key Secret that is missing or unusable is the probe's verdict without a dial
 * (*ret_verdict set, with *ret_msg); other read errors are returned (no verdict). */
static int start_probe(struct kp_ssh_hostctl *hc, struct kp_client *c, struct kp_entry *host,
                       uint64_t *ret_requeue, bool *ret_verdict, int *ret_err, char **ret_msg)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    struct probe_job *job;
    int r;

    *ret_verdict = false;
    job = kp_calloc(1, sizeof(*job));
    if (!job)
        return -ENOMEM;
    r = kp_hostio_load_creds(c, h, &job->cr, ret_msg);
    if (r < 0) {
        probe_job_free(job);
        if (r != -EINVAL)
            return r; /* reading the Secret failed: not the host's fault, no verdict */
        *ret_verdict = true;
        *ret_err = r;
        return 0;
    }
    job->host = kp_entry_ref(host);
    job->timeout_usec = hc->probe_timeout;
    job->obs = hc->obs;
    return submit(hc, h->e.key, KP_SSH_JOB_PROBE, kp_hostctl_suspect(h), probe_job_run,
                  probe_job_free, job, ret_requeue);
}

/* The probe's verdict on host (the host as it is now): err and msg, and when err is 0 the
 * result in res and the TOFU fingerprint in fp (or ""). Writes what it found, then runs the
 * zombie guard when kubelet is active. */
static int probe_verdict(struct kp_ssh_hostctl *hc, struct kp_client *c, const struct kp_ctx *cx,
                         struct kp_entry *host, int perr, const char *msg,
                         const struct kp_probe_result *res, const char *fp, uint64_t *ret_requeue)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    struct kp_hostctl_probe_outcome *out = NULL;
    struct kp_hostctl_probe_in in = {0};
    struct kp_entry *got = NULL;
    char *why = NULL;
    int r;

    out = kp_calloc(1, sizeof(*out));
    if (!out) {
        r = -ENOMEM;
        goto out;
    }
    in.err = perr;
    in.err_msg = msg;
    in.res = perr == 0 ? res : NULL;
    in.seen_fp = fp && fp[0] ? fp : NULL;
    in.now_usec = (int64_t)kp_real_usec();
    kp_hostctl_decide_probe(h, &in, &hc->t, out);
    if (out->collect_node && (r = collect_stale_nodes(hc, c, h, in.now_usec, out, &why)) < 0)
        goto out;
    /* write_status skips an unchanged status and still hands back the host for the guard. */
    if ((r = write_status(c, host, &out->st, &got)) < 0)
        goto out;
    if (out->st.set_state && out->st.state != h->state) {
        if (out->healthy) {
            kp_log_info("host probe succeeded", KP_LF("host", h->e.name),
                        KP_LF("from", kp_host_state_name(h->state)),
                        KP_LF("to", kp_host_state_name(out->st.state)),
                        KP_LF("cpus", (uint64_t)(res ? res->cpus : 0)),
                        KP_LF("arch", out->st.observed_arch));
            if (h->state == KP_HOST_UNHEALTHY && out->st.state == KP_HOST_AVAILABLE)
                host_event(hc, h, false, KP_HOSTCTL_EVENT_PROBE_SUCCEEDED, "Probe",
                           "probe succeeded again; host Available");
        } else {
            kp_log_warn("host probe failed", KP_LF("host", h->e.name),
                        KP_LF("from", kp_host_state_name(h->state)),
                        KP_LF("error", out->st.last_probe_error));
            host_event(hc, h, true, out->st.ready_reason, "Probe", out->st.last_probe_error);
        }
    }
    if (out->st.host_key_fingerprint)
        kp_log_info("host key pinned on first use", KP_LF("host", h->e.name),
                    KP_LF("fingerprint", out->st.host_key_fingerprint));
    if (out->capacity_drift) {
        kp_log_warn("host has less capacity than its spec says", KP_LF("host", h->e.name),
                    KP_LF("detail", out->drift_note));
        host_event(hc, h, true, KP_HOSTCTL_EVENT_CAPACITY_DRIFT, "Probe", out->drift_note);
    }
    *ret_requeue = out->requeue_usec;
    if (out->zombie_check && got)
        r = zombie_guard(hc, c, cx, got, ret_requeue);
out:
    kp_entry_unref(got);
    kp_free(why);
    kp_free(out);
    return r;
}

/* A host due for a probe: the verdict of the probe job that ended (job, its result r), or a
 * new probe job. Nothing is dialed here. */
static int reconcile_probe(struct kp_ssh_hostctl *hc, struct kp_client *c, const struct kp_ctx *cx,
                           struct kp_entry *host, struct probe_job *job, int jr,
                           uint64_t *ret_requeue)
{
    char *msg = NULL;
    bool verdict = false;
    int r, perr = 0;

    if (job)
        return probe_verdict(hc, c, cx, host, jr, job->msg, &job->res, job->fp, ret_requeue);
    if (kp_ctx_done(cx)) /* stopping: no new probe */
        return 0;
    r = start_probe(hc, c, host, ret_requeue, &verdict, &perr, &msg);
    if (r == 0 && verdict)
        r = probe_verdict(hc, c, cx, host, perr, msg, NULL, NULL, ret_requeue);
    kp_free(msg);
    return r;
}

/* The host h's address belongs to, when that is another, older SSHHost (a new reference in
 * *ret_first), else NULL. */
static int duplicate_of(struct kp_ssh_hostctl *hc, const struct kp_sshhost_view *h,
                        struct kp_entry **ret_first)
{
    char key[KP_INVENTORY_ADDRESS_KEY_MAX];
    const struct kp_sshhost_view **v = NULL;
    const struct kp_sshhost_view *first;
    struct kp_store_list l = {0};
    int r;

    *ret_first = NULL;
    kp_inventory_address_key(h, key, sizeof(key));
    if (!key[0])
        return 0;
    if ((r = kp_store_by_index(hc->hosts, KP_SSH_INDEX_HOST_ADDRESS, key, &l)) < 0)
        return r;
    if (l.n > 1) {
        v = kp_calloc(l.n, sizeof(*v));
        if (!v) {
            r = -ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < l.n; i++)
            v[i] = kp_sshhost_view(l.v[i]);
        first = kp_inventory_duplicate_of(h, v, l.n);
        for (size_t i = 0; first && i < l.n; i++)
            if (v[i] == first)
                *ret_first = kp_entry_ref(l.v[i]);
    }
out:
    kp_free(v);
    kp_store_list_free(&l);
    return r;
}

/* Refuses host, whose address belongs to the older SSHHost first: Unhealthy / DuplicateAddress
 * with a message and an event that name first. It is never probed nor claimed while first
 * exists; deleting first wakes it. */
static int refuse_duplicate(struct kp_ssh_hostctl *hc, struct kp_client *c, struct kp_entry *host,
                            const struct kp_sshhost_view *first, int64_t now)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    char msg[KP_HOSTCTL_DUPLICATE_MESSAGE_MAX];
    bool written;
    int r;

    (void)snprintf(msg, sizeof(msg),
                   "address %s port %" PRId32 " is already used by SSHHost %s/%s, created before "
                   "this one; an address is one machine, so this host is never probed or claimed "
                   "while that one exists (delete one of the two)",
                   h->address, h->port, first->e.ns, first->e.name);
    if ((r = write_unhealthy(c, host, KP_HOSTCTL_REASON_DUPLICATE, msg, now, &written)) < 0 ||
        !written)
        return r;
    kp_log_warn("SSHHost refused: its address belongs to an older SSHHost",
                KP_LF("host", h->e.name), KP_LF("address", h->address),
                KP_LF("port", (uint64_t)h->port), KP_LF("older", first->e.name));
    host_event(hc, h, true, KP_HOSTCTL_EVENT_DUPLICATE, "Refuse", msg);
    return 0;
}

/* Refuses host, whose spec fails kp_sshhost_validate: Unhealthy / InvalidSpec with the
 * validator's lines as message, and one event per change. It is never probed nor claimed until
 * the spec is fixed. */
static int refuse_invalid(struct kp_ssh_hostctl *hc, struct kp_client *c, struct kp_entry *host,
                          int64_t now)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    struct kp_buf lines = KP_BUF_INIT(KP_HOSTCTL_INVALID_MESSAGE_MAX);
    char msg[KP_HOSTCTL_INVALID_MESSAGE_MAX];
    bool written;
    int r, n;

    /* The validator cuts its report at the buffer's ceiling; what fits is enough to act on. */
    n = kp_sshhost_validate(h, &lines);
    if (n == -ENOMEM) {
        r = n;
        goto out;
    }
    (void)snprintf(msg, sizeof(msg),
                   "the spec holds values kpssh cannot use, so the host is "
                   "never probed or claimed until they are fixed: %s",
                   kp_buf_str(&lines));
    /* One line per problem in the report; a condition message reads better on one line. */
    for (char *p = msg; *p; p++)
        if (*p == '\n')
            *p = p[1] ? ';' : '\0';
    if ((r = write_unhealthy(c, host, KP_HOSTCTL_REASON_INVALID, msg, now, &written)) < 0 ||
        !written)
        goto out;
    kp_log_warn("SSHHost refused: its spec holds values kpssh cannot use", KP_LF("host", h->e.name),
                KP_LF("problems", kp_buf_str(&lines)));
    host_event(hc, h, true, KP_HOSTCTL_EVENT_INVALID, "Refuse", msg);
out:
    kp_buf_done(&lines);
    return r;
}

static void job_free(enum kp_ssh_job_kind kind, void *job)
{
    if (kind == KP_SSH_JOB_LEAVE)
        leave_job_free(job);
    else
        probe_job_free(job);
}

static int reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                     uint64_t *ret_requeue)
{
    struct kp_ssh_hostctl *hc = ctx;
    struct kp_claim_status st = {0};
    struct kp_entry *host = NULL;
    const struct kp_sshhost_view *h;
    enum kp_hostctl_step step;
    enum kp_ssh_job_kind kind = KP_SSH_JOB_PROBE;
    void *job = NULL;
    uint64_t wait = 0;
    int64_t now = (int64_t)kp_real_usec();
    bool in_flight;
    int r, jr = 0;

    if (kp_store_get(hc->hosts, key, &host) < 0) {
        kp_ssh_jobs_forget(hc->jobs, key); /* deleted: a job for it is moot */
        return 0;
    }
    h = kp_sshhost_view(host);
    r = 0;
    if (!kp_streq(h->e.ns, hc->pool_ns))
        goto out;
    /* A job for this host that has ended is decided on below, against the host as it is now;
     * one that has not ended brings the key back when it does. */
    r = kp_ssh_jobs_take(hc->jobs, key, &kind, &job, &jr);
    in_flight = r == -EINPROGRESS;
    r = 0;
    if (job && (jr == -ECANCELED || jr == -KP_ENOTLEADER)) {
        /* Cut short by a shutdown or a lost Lease: it says nothing about the host. */
        job_free(kind, job);
        job = NULL;
    }
    if (job && kind == KP_SSH_JOB_LEAVE) {
        struct leave_job *lj = job;

        /* The leave ran on the host as written Leaving; finish it unless the host has moved on
         * since (a claim, an operator's edit): then it is decided afresh. */
        if (h->state == KP_HOST_LEAVING && !h->claim_name) {
            r = zombie_left(hc, c, host, jr, lj->msg, lj->since_usec, lj->t0, ret_requeue);
            goto out;
        }
        leave_job_free(job);
        job = NULL;
    }
    step = kp_hostctl_plan(h, now, &hc->t, &wait);
    if (in_flight) {
        /* The job goes on while the host still wants it: a probe while a probe is due, a leave
         * while Leaving (never cut short here: kubelet may be half stopped). A host claimed
         * or parked meanwhile is decided now, and its probe is moot: cancelled. */
        if (step == KP_HOSTCTL_STEP_PROBE || step == KP_HOSTCTL_STEP_FRESH ||
            h->state == KP_HOST_LEAVING)
            goto out;
        kp_ssh_jobs_forget(hc->jobs, key);
    }
    switch (step) {
    case KP_HOSTCTL_STEP_MAINTENANCE_ENTER:
        st.set_state = true;
        st.state = KP_HOST_MAINTENANCE;
        kp_hostctl_ready_for(h, KP_HOST_MAINTENANCE, NULL, NULL, now, &st);
        if ((r = write_status(c, host, &st, NULL)) == 0)
            kp_log_info("host parked for maintenance", KP_LF("host", h->e.name),
                        KP_LF("from", kp_host_state_name(h->state)));
        break;
    case KP_HOSTCTL_STEP_MAINTENANCE_EXIT:
        st.set_state = true;
        st.state = KP_HOST_PENDING;
        kp_hostctl_ready_for(h, KP_HOST_PENDING, NULL, NULL, now, &st);
        if ((r = write_status(c, host, &st, NULL)) == 0) {
            kp_log_info("maintenance over; host Pending until probed", KP_LF("host", h->e.name));
            *ret_requeue = KP_HOSTCTL_SOON_USEC;
        }
        break;
    case KP_HOSTCTL_STEP_PARKED:
        break;
    case KP_HOSTCTL_STEP_CLAIMED:
        r = reconcile_claimed(hc, c, host, ret_requeue);
        break;
    case KP_HOSTCTL_STEP_INVALID:
        r = refuse_invalid(hc, c, host, now);
        break;
    case KP_HOSTCTL_STEP_FRESH:
    case KP_HOSTCTL_STEP_PROBE: {
        struct kp_entry *first = NULL;

        /* An unclaimed host whose address an older SSHHost has is refused before anything
         * dials it. */
        if ((r = duplicate_of(hc, h, &first)) < 0)
            break;
        if (first)
            r = refuse_duplicate(hc, c, host, kp_sshhost_view(first), now);
        else if (step == KP_HOSTCTL_STEP_FRESH)
            *ret_requeue = wait;
        else
            r = reconcile_probe(hc, c, cx, host, job, jr, ret_requeue);
        kp_entry_unref(first);
        break;
    }
    }
out:
    /* A probe's result the host no longer wants (claimed, parked, probed meanwhile) goes. */
    if (job)
        job_free(kind, job);
    kp_entry_unref(host);
    return r;
}

/* Walk visitor: enqueue one host. Under the host store's read lock (store.h): the work queue's
 * lock never waits on a store. */
static int enqueue_host(void *ctx, struct kp_entry *e)
{
    (void)kp_reconciler_enqueue(ctx, e->key); /* -ESHUTDOWN: stopping */
    return 0;
}

/* A job ended (on a pool thread): its host is reconciled with the result. */
static void job_done(void *owner, const char *key)
{
    struct kp_ssh_hostctl *hc = owner;
    int r = kp_reconciler_enqueue(hc->rec, key);

    if (r < 0 && r != -ESHUTDOWN)
        kp_log_error_errno(r, "an SSH job ended but its host cannot be enqueued",
                           KP_LF("host", key));
}

/* NodeClaim and Node events wake the hosts claimed under that name (Node name = NodeClaim name):
 * a deleted NodeClaim releases its host at once, a registered Node marks it InUse. */
static void wake_claimed(struct kp_ssh_hostctl *hc, const char *name)
{
    (void)kp_store_walk_index(hc->hosts, KP_SSH_INDEX_HOST_CLAIM, name, enqueue_host, hc->rec);
}

/* A host deleted: the hosts refused for its address look again (spec.address is immutable). */
static void wake_address(struct kp_ssh_hostctl *hc, const struct kp_entry *e)
{
    char key[KP_INVENTORY_ADDRESS_KEY_MAX];

    kp_inventory_address_key(kp_sshhost_view(e), key, sizeof(key));
    if (key[0])
        (void)kp_store_walk_index(hc->hosts, KP_SSH_INDEX_HOST_ADDRESS, key, enqueue_host, hc->rec);
}

static void on_host_delete(void *ctx, const struct kp_entry *e)
{
    wake_address(ctx, e);
}

static void on_claim_add(void *ctx, const struct kp_entry *e)
{
    wake_claimed(ctx, e->name);
}

static void on_claim_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    (void)old_e;
    wake_claimed(ctx, new_e->name);
}

int kp_ssh_hostctl_new(const struct kp_ssh_hostctl_opts *o, struct kp_ssh_hostctl **ret)
{
    struct kp_controller_opts co = {0};
    struct kp_informer_handler wake = {
        .on_add = on_claim_add, .on_update = on_claim_update, .on_delete = on_claim_add};
    struct kp_informer_handler addr = {.on_delete = on_host_delete};
    struct kp_ssh_hostctl *hc;
    int r;

    if (!o->pool_namespace || !*o->pool_namespace || !o->client || !o->hosts || !o->nodes ||
        !o->profiles)
        return -EINVAL;
    hc = kp_calloc(1, sizeof(*hc));
    if (!hc)
        return -ENOMEM;
    hc->pool_ns = kp_strdup(o->pool_namespace);
    if (!hc->pool_ns) {
        r = -ENOMEM;
        goto fail;
    }
    hc->hosts = kp_informer_store(o->hosts);
    hc->nodes = kp_informer_store(o->nodes);
    hc->profiles = kp_informer_store(o->profiles);
    hc->nodeclaims = o->nodeclaims ? kp_informer_store(o->nodeclaims) : NULL;
    hc->events = o->events;
    hc->obs = o->observer;
    hc->t.probe_interval_usec =
        o->probe_interval_usec ? o->probe_interval_usec : KP_HOSTCTL_PROBE_INTERVAL_USEC;
    hc->t.claimed_recheck_usec =
        o->claimed_recheck_usec ? o->claimed_recheck_usec : KP_HOSTCTL_CLAIMED_RECHECK_USEC;
    hc->t.token_recheck_usec =
        o->token_recheck_usec ? o->token_recheck_usec : KP_HOSTCTL_TOKEN_RECHECK_USEC;
    hc->probe_timeout =
        o->probe_timeout_usec ? o->probe_timeout_usec : KP_HOSTCTL_PROBE_TIMEOUT_USEC;
    co.name = "sshhost";
    co.group = "karpenter.kpssh.dev";
    co.kind = "SSHHost";
    co.workers = o->workers ? o->workers : KP_HOSTCTL_WORKERS;
    hc->retry_usec = hc->probe_timeout / 4;
    if (hc->retry_usec < KP_HOSTCTL_SOON_USEC)
        hc->retry_usec = KP_HOSTCTL_SOON_USEC;
    hc->ctx = o->ctx;
    {
        struct kp_ssh_jobs_opts jo = {
            .name = "sshhost",
            .threads = o->ssh_workers ? o->ssh_workers : KP_HOSTCTL_SSH_WORKERS,
            .done = job_done,
            .owner = hc,
            .observer = o->observer,
        };

        if ((r = kp_ssh_jobs_new(&jo, &hc->jobs)) < 0)
            goto fail;
    }
    co.parent = o->ctx;
    co.reconcile = reconcile;
    co.ctx = hc;
    co.client = o->client;
    co.events = o->events; /* the caller's recorder or none: this controller makes none */
    if ((r = kp_controller_new(&co, &hc->base)) < 0)
        goto fail;
    hc->rec = kp_controller_reconciler(hc->base);
    if ((r = kp_controller_add_index(hc->base, o->nodes, KP_INDEX_NODE_IP, kp_index_node_ip)) < 0 ||
        (r = kp_controller_add_index(hc->base, o->nodes, KP_INDEX_NODE_PROVIDER_ID,
                                     kp_index_node_provider_id)) < 0 ||
        (r = kp_controller_add_index(hc->base, o->hosts, KP_SSH_INDEX_HOST_CLAIM,
                                     kp_ssh_index_host_claim)) < 0 ||
        (r = kp_controller_add_index(hc->base, o->hosts, KP_SSH_INDEX_HOST_ADDRESS,
                                     kp_ssh_index_host_address)) < 0)
        goto fail;
    wake.ctx = hc;
    addr.ctx = hc;
    if ((r = kp_controller_watch_keys(hc->base, o->hosts)) < 0 ||
        (r = kp_controller_watch(hc->base, o->hosts, &addr)) < 0 ||
        (r = kp_controller_watch(hc->base, o->nodes, &wake)) < 0 ||
        (o->nodeclaims && (r = kp_controller_watch(hc->base, o->nodeclaims, &wake)) < 0))
        goto fail;
    *ret = hc;
    return 0;
fail:
    kp_ssh_hostctl_free(hc); /* the skeleton takes back the handlers it added */
    return r;
}

int kp_ssh_hostctl_start(struct kp_ssh_hostctl *hc)
{
    int r;

    if ((r = kp_ssh_jobs_start(hc->jobs, hc->ctx)) < 0)
        return r;
    if ((r = kp_controller_start(hc->base)) < 0) {
        kp_ssh_jobs_stop(hc->jobs);
        return r;
    }
    hc->started = true;
    /* Hosts cached before our handler saw them (an informer started early) are not missed. */
    (void)kp_store_walk(hc->hosts, enqueue_host, hc->rec); /* the visitor never stops it */
    return 0;
}

void kp_ssh_hostctl_stop(struct kp_ssh_hostctl *hc)
{
    if (!hc)
        return;
    /* The jobs first: cancelled, they end within a poll slice, and the reconciles that take
     * their keys meanwhile find nothing to decide on (and start nothing: the pool refuses). */
    kp_ssh_jobs_stop(hc->jobs);
    kp_controller_stop(hc->base);
    hc->started = false;
}

bool kp_ssh_hostctl_ready(struct kp_ssh_hostctl *hc)
{
    return hc && kp_controller_ready(hc->base);
}

struct kp_ssh_hostctl *kp_ssh_hostctl_free(struct kp_ssh_hostctl *hc)
{
    if (!hc)
        return NULL;
    kp_ssh_jobs_stop(hc->jobs);
    hc->base = kp_controller_free(hc->base);
    kp_ssh_jobs_free(hc->jobs);
    kp_free(hc->pool_ns);
    kp_free(hc);
    return NULL;
}
