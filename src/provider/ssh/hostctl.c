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
 *                 Claimed and its Node registered --CAS--> InUse{providerID}   (SPEC 2.6)
 *                 providerID and bootstrapTokenID set, Node exists: token deleted --CAS--> cleared
 *   unclaimed: probe (pinned dial, 30 s for dial and command together)
 *                 error --CAS--> Unhealthy{lastProbeError}      (a changed key: HostKeyMismatch)
 *                 ok, kubelet inactive --CAS--> Available{observed*, TOFU pin if none}
 *                 ok, kubelet active: facts --CAS-->, then the zombie guard:
 *                   foreign (no Node with its IP, no install marker) --CAS--> Unhealthy, parked
 *                   ours --CAS--> Leaving, leave, delete the Node --CAS--> Available
 *                                 leave or Node delete failed --CAS--> Unhealthy (ZombieLeaveFailed)
 *                 ok, kubelet inactive, host Leaving (a crash mid-guard) or ZombieLeaveFailed:
 *                   delete the Nodes with its IP created before it went out of service
 *                   --CAS--> Available (a failed delete: Unhealthy, ZombieLeaveFailed kept)
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
 * never reconciled twice at once. Informer handlers only enqueue keys. Everything reached from
 * more than one thread (options, stores, recorder, observer) is immutable or thread-safe.
 * Logging: this file is the decision point for host transitions and logs each once. */
#include "provider/ssh/hostctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "k8s/obj-karpenter.h"
#include "k8s/obj-kpssh.h"
#include "k8s/obj-node.h"
#include "k8s/reconciler.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "provider/ssh/claim.h"
#include "provider/ssh/hostio.h"
#include "provider/ssh/indexes.h"
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

enum kp_hostctl_step kp_hostctl_plan(const struct kp_sshhost_view *h, int64_t now_usec,
                                     const struct kp_hostctl_timing *t, uint64_t *ret_wait_usec)
{
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
    if (h->observed_generation == h->generation && h->last_probe_usec > 0 &&
        now_usec >= h->last_probe_usec &&
        (uint64_t)(now_usec - h->last_probe_usec) < t->probe_interval_usec) {
        uint64_t left = t->probe_interval_usec - (uint64_t)(now_usec - h->last_probe_usec);

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
    /* SPEC 2.6: InUse means registered. The provider writes it when its Create sees the Node;
     * a Create that died after the join leaves the host Claimed, and this finishes the job. */
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
 * killed during the guard) or Unhealthy / ZombieLeaveFailed (the leave or the Node delete failed,
 * or a later probe failed: that keeps the reason, so the marker survives). Claimed hosts are the
 * provider's. */
static bool leave_unfinished(const struct kp_sshhost_view *h)
{
    const struct kp_condition *cur = kp_conditions_get(&h->conditions, "Ready");

    if (h->claim_name)
        return false;
    return h->state == KP_HOST_LEAVING || (h->state == KP_HOST_UNHEALTHY && cur && cur->reason &&
                                           kp_streq(cur->reason, KP_HOSTCTL_REASON_ZOMBIE_FAILED));
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
                             : leave_unfinished(h)   ? KP_HOSTCTL_REASON_ZOMBIE_FAILED
                                                     : KP_HOSTCTL_REASON_FAILED,
                             msg, in->now_usec, st);
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

enum kp_hostctl_zombie kp_hostctl_zombie_verdict(const struct kp_sshhost_view *h, bool node_found)
{
    if (node_found || (h->installed_profile && *h->installed_profile))
        return KP_HOSTCTL_ZOMBIE_OURS;
    return KP_HOSTCTL_ZOMBIE_FOREIGN;
}

/* --- the controller ------------------------------------------------------------------------- */

struct kp_ssh_hostctl {
    char *pool_ns;
    struct kp_informer *hosts_inf, *nodes_inf;
    struct kp_store *hosts, *nodes, *nodeclaims, *profiles; /* nodeclaims may be NULL */
    struct kp_events *events;
    const struct kp_ssh_observer *obs;
    struct kp_hostctl_timing t;
    uint64_t probe_timeout;
    struct kp_reconciler *rec;
    bool started; /* main thread only */
};

static void host_event(struct kp_ssh_hostctl *hc, const struct kp_sshhost_view *h, bool warning,
                       const char *reason, const char *action, const char *note)
{
    kp_hostio_event(hc->events, h, warning, reason, action, note);
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

/* The first Node in the store with InternalIP ip (its name into a new string), or NULL. */
static int node_by_ip(struct kp_ssh_hostctl *hc, const char *ip, char **ret_name)
{
    struct kp_store_list l = {0};
    int r;

    *ret_name = NULL;
    if (!ip || !*ip)
        return 0;
    if ((r = kp_store_by_index(hc->nodes, KP_SSH_INDEX_NODE_IP, ip, &l)) < 0)
        return r;
    if (l.n > 0) {
        *ret_name = kp_strdup(l.v[0]->name);
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
        if ((r = registered_pid(hc, h, &pid)) < 0 ||
            (r = node_by_ip(hc, kp_sshhost_node_ip(h), &ipnode)) < 0)
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

/* The zombie guard on host (as just written by the probe): kubelet is active and no claim. */
static int zombie_guard(struct kp_ssh_hostctl *hc, struct kp_client *c, struct kp_entry *host,
                        uint64_t *ret_requeue)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    struct kp_entry *leaving = NULL, *done = NULL;
    struct kp_claim_status st = {0};
    char *node = NULL, *msg = NULL, *why = NULL;
    int64_t now = (int64_t)kp_real_usec();
    uint64_t t0;
    int r;

    *ret_requeue = hc->t.probe_interval_usec;
    if (h->claim_name) /* claimed meanwhile: the claim holder's host now */
        return 0;
    if ((r = node_by_ip(hc, kp_sshhost_node_ip(h), &node)) < 0)
        return r;
    if (kp_hostctl_zombie_verdict(h, node != NULL) == KP_HOSTCTL_ZOMBIE_FOREIGN) {
        st.set_state = true;
        st.state = KP_HOST_UNHEALTHY;
        st.last_probe_error = KP_HOSTCTL_FOREIGN_MESSAGE;
        kp_hostctl_ready_for(h, KP_HOST_UNHEALTHY, KP_HOSTCTL_REASON_FOREIGN, st.last_probe_error,
                             now, &st);
        if (kp_hostctl_unchanged(h, &st))
            goto out; /* parked already: reported when it was parked */
        if ((r = write_status(c, host, &st, NULL)) < 0)
            goto out;
        kp_log_warn("an active kubelet kpssh did not start: host parked and left untouched",
                    KP_LF("host", h->e.name), KP_LF("address", h->address));
        host_event(hc, h, true, KP_HOSTCTL_EVENT_FOREIGN, "Park", KP_HOSTCTL_FOREIGN_MESSAGE);
        kp_ssh_observe_zombie(hc->obs, KP_SSH_ZOMBIE_PARKED_FOREIGN);
        goto out;
    }

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
               node ? "kubelet active on an unclaimed host with a Node; running leave"
                    : "kubelet active on an unclaimed host kpssh installed; running leave");
    t0 = kp_mono_usec();
    r = kp_hostio_leave(hc->profiles, c, kp_sshhost_view(leaving), hc->obs, &msg);
    memset(&st, 0, sizeof(st));
    st.set_state = true;
    if (r < 0) {
        why = kp_strjoin("zombie leave failed: ", msg ? msg : kp_strerror(r), (const char *)NULL);
        kp_log_warn_errno(r, "zombie leave failed; host Unhealthy, retried on the next probe",
                          KP_LF("host", h->e.name), KP_LF("detail", msg ? msg : ""));
        host_event(hc, h, true, KP_HOSTCTL_EVENT_ZOMBIE_FAILED, "Leave",
                   why ? why : "zombie leave failed");
        kp_ssh_observe_zombie(hc->obs, KP_SSH_ZOMBIE_LEAVE_FAILED);
        st.state = KP_HOST_UNHEALTHY;
        st.last_probe_error = why ? why : "zombie leave failed";
        kp_hostctl_ready_for(kp_sshhost_view(leaving), KP_HOST_UNHEALTHY,
                             KP_HOSTCTL_REASON_ZOMBIE_FAILED, st.last_probe_error, now, &st);
        r = write_status(c, leaving, &st, NULL);
        goto out;
    }
    /* kubelet is stopped now, so the Node cannot come back: delete it (the invoice line). */
    if (node && (r = kp_ssh_provider_delete_node(c, node)) < 0) {
        why = kp_strjoin("zombie left, but deleting Node ", node, " failed: ", kp_strerror(r),
                         (const char *)NULL);
        kp_log_error_errno(r, "zombie left but its Node was not deleted", KP_LF("host", h->e.name),
                           KP_LF("node", node));
        st.state = KP_HOST_UNHEALTHY;
        st.last_probe_error = why ? why : "zombie left, but deleting its Node failed";
        kp_hostctl_ready_for(kp_sshhost_view(leaving), KP_HOST_UNHEALTHY,
                             KP_HOSTCTL_REASON_ZOMBIE_FAILED, st.last_probe_error, now, &st);
        r = write_status(c, leaving, &st, NULL);
        goto out;
    }
    kp_ssh_observe_zombie(hc->obs, KP_SSH_ZOMBIE_LEFT);
    host_event(hc, h, false, KP_HOSTCTL_EVENT_ZOMBIE_LEFT, "Leave",
               node ? "leave ran and the Node was deleted" : "leave ran");
    st.state = KP_HOST_AVAILABLE;
    st.last_probe_error = "";
    kp_hostctl_ready_for(kp_sshhost_view(leaving), KP_HOST_AVAILABLE, NULL, NULL, now, &st);
    if ((r = write_status(c, leaving, &st, &done)) < 0)
        goto out;
    kp_log_info("zombie left; host Available", KP_LF("host", h->e.name),
                KP_LF("node_deleted", node ? node : ""),
                KP_LF("leave_ms", (kp_mono_usec() - t0) / 1000));
out:
    kp_entry_unref(done);
    kp_entry_unref(leaving);
    kp_free(node);
    kp_free(msg);
    kp_free(why);
    return r;
}

/* Dials h and runs the probe command; fills in (strings owned by *ret_msg and fp). */
static int probe_host(struct kp_ssh_hostctl *hc, struct kp_client *c,
                      const struct kp_sshhost_view *h, struct kp_probe_result *res,
                      char fp[KP_SSH_FP_SIZE], char **ret_msg, int *ret_err)
{
    struct kp_hostio_creds cr = {0};
    struct kp_ssh_capture cap;
    struct kp_ssh_target t;
    const char *why = NULL;
    uint64_t t0 = kp_mono_usec();
    int r;

    fp[0] = '\0';
    kp_ssh_capture_init(&cap);
    r = kp_hostio_load_creds(c, h, &cr, ret_msg);
    if (r < 0 && r != -EINVAL)
        goto out; /* reading the Secret failed: not the host's fault, no verdict */
    if (r == 0) {
        kp_hostio_target(h, &cr, &t);
        t.dial_timeout_usec = hc->probe_timeout;
        /* XXX: a Verified host's ForceCommand shim answers with its own built-in probe; the
         * shim's probe verb arrives with cmd/shim. Until then the same command is sent. */
        r = kp_ssh_exec_capture(&t, kp_probe_command(), kp_deadline_in(hc->probe_timeout), &cap,
                                ret_msg);
        if (cap.pin == KP_SSH_PIN_NONE && cap.fp[0])
            memcpy(fp, cap.fp, KP_SSH_FP_SIZE);
        if (r == 0 && (r = kp_probe_parse(cap.out.data, cap.out.len, res, &why)) < 0) {
            kp_free(*ret_msg);
            *ret_msg = kp_strjoin("probe output not understood: ", why ? why : kp_strerror(r),
                                  (const char *)NULL);
        }
        kp_ssh_observe_probe(hc->obs, r == 0, kp_mono_usec() - t0);
    }
    *ret_err = r;
    r = 0;
out:
    kp_ssh_capture_done(&cap);
    kp_hostio_creds_done(&cr);
    return r;
}

/* The end of an unfinished zombie leave (out->collect_node): deletes the Nodes that still carry
 * the host's address. Only Nodes created before the host's Ready condition went False (when the
 * guard took it out of service) can be the zombie's: a Node created later belongs to a join that
 * happened since, which this decision, made on a cached host, must never touch, so it is left
 * alone and logged. Each delete is fenced by the Node's uid. When a delete fails the probe's write
 * becomes Unhealthy / ZombieLeaveFailed with the error (*ret_why owns the text) and the next
 * probe tries again. */
static int collect_stale_nodes(struct kp_ssh_hostctl *hc, struct kp_client *c,
                               const struct kp_sshhost_view *h, int64_t now,
                               struct kp_hostctl_probe_outcome *out, char **ret_why)
{
    const struct kp_condition *cur = kp_conditions_get(&h->conditions, "Ready");
    int64_t since = cur && cur->status == KP_COND_FALSE ? cur->last_transition_usec : 0;
    const char *ip = kp_sshhost_node_ip(h);
    struct kp_store_list l = {0};
    unsigned deleted = 0;
    int r;

    if (!ip || !*ip || since <= 0)
        return 0;
    if ((r = kp_store_by_index(hc->nodes, KP_SSH_INDEX_NODE_IP, ip, &l)) < 0)
        return r;
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_node_view *n = kp_node_view(l.v[i]);
        struct kp_delete_opts o = {.precondition_uid = n->e.uid};
        struct kp_error e = KP_ERROR_INIT;
        char *note;

        if (n->meta.creation_usec <= 0 || n->meta.creation_usec >= since) {
            kp_log_warn("a Node with the host's address is newer than its leave; not deleted",
                        KP_LF("host", h->e.name), KP_LF("node", n->e.name));
            continue;
        }
        r = kp_client_delete(c, &KP_RES_NODE, NULL, n->e.name, &o, &e);
        kp_error_done(&e);
        if (r == -ENOENT || r == -KP_ECONFLICT)
            continue; /* gone already, or another incarnation with this name */
        if (r < 0) {
            *ret_why = kp_strjoin("zombie left, but deleting Node ", n->e.name,
                                  " failed: ", kp_strerror(r), (const char *)NULL);
            if (!*ret_why) {
                r = -ENOMEM;
                goto out;
            }
            kp_log_error_errno(r, "the Node of an earlier zombie leave was not deleted",
                               KP_LF("host", h->e.name), KP_LF("node", n->e.name));
            out->st.state = KP_HOST_UNHEALTHY;
            out->st.last_probe_error = *ret_why;
            kp_hostctl_ready_for(h, KP_HOST_UNHEALTHY, KP_HOSTCTL_REASON_ZOMBIE_FAILED, *ret_why,
                                 now, &out->st);
            r = 0;
            goto out;
        }
        deleted++;
        kp_log_info("deleted the Node an earlier zombie leave left behind",
                    KP_LF("host", h->e.name), KP_LF("node", n->e.name),
                    KP_LF("from", kp_host_state_name(h->state)));
        note = kp_strjoin("kubelet was stopped by an earlier leave; Node ", n->e.name, " deleted",
                          (const char *)NULL);
        host_event(hc, h, false, KP_HOSTCTL_EVENT_ZOMBIE_LEFT, "Leave",
                   note ? note : "Node of an earlier leave deleted");
        kp_free(note);
    }
    if (deleted > 0)
        kp_ssh_observe_zombie(hc->obs, KP_SSH_ZOMBIE_LEFT);
    r = 0;
out:
    kp_store_list_free(&l);
    return r;
}

static int reconcile_probe(struct kp_ssh_hostctl *hc, struct kp_client *c, struct kp_entry *host,
                           uint64_t *ret_requeue)
{
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    struct kp_hostctl_probe_outcome *out = NULL;
    struct kp_hostctl_probe_in in = {0};
    struct kp_probe_result res = {0};
    struct kp_entry *got = NULL;
    char fp[KP_SSH_FP_SIZE], *msg = NULL, *why = NULL;
    int r, perr = 0;

    out = kp_calloc(1, sizeof(*out));
    if (!out)
        return -ENOMEM;
    if ((r = probe_host(hc, c, h, &res, fp, &msg, &perr)) < 0)
        goto out;
    in.err = perr;
    in.err_msg = msg;
    in.res = perr == 0 ? &res : NULL;
    in.seen_fp = fp[0] ? fp : NULL;
    in.now_usec = (int64_t)kp_real_usec();
    kp_hostctl_decide_probe(h, &in, &hc->t, out);
    if (out->collect_node && (r = collect_stale_nodes(hc, c, h, in.now_usec, out, &why)) < 0)
        goto out;
    /* write_status skips an unchanged status and still hands back the host for the guard. */
    if ((r = write_status(c, host, &out->st, &got)) < 0)
        goto out;
    if (out->st.set_state && out->st.state != h->state) {
        if (out->healthy)
            kp_log_info("host probe succeeded", KP_LF("host", h->e.name),
                        KP_LF("from", kp_host_state_name(h->state)),
                        KP_LF("to", kp_host_state_name(out->st.state)),
                        KP_LF("cpus", (uint64_t)res.cpus), KP_LF("arch", out->st.observed_arch));
        else
            kp_log_warn("host probe failed", KP_LF("host", h->e.name),
                        KP_LF("from", kp_host_state_name(h->state)),
                        KP_LF("error", out->st.last_probe_error));
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
        r = zombie_guard(hc, c, got, ret_requeue);
out:
    kp_entry_unref(got);
    kp_free(msg);
    kp_free(why);
    kp_free(out);
    return r;
}

static int reconcile(void *ctx, struct kp_client *c, const char *key, uint64_t *ret_requeue)
{
    struct kp_ssh_hostctl *hc = ctx;
    struct kp_claim_status st = {0};
    struct kp_entry *host = NULL;
    const struct kp_sshhost_view *h;
    uint64_t wait = 0;
    int64_t now = (int64_t)kp_real_usec();
    int r;

    if (kp_store_get(hc->hosts, key, &host) < 0)
        return 0; /* deleted: nothing to look after */
    h = kp_sshhost_view(host);
    r = 0;
    if (!kp_streq(h->e.ns, hc->pool_ns))
        goto out;
    switch (kp_hostctl_plan(h, now, &hc->t, &wait)) {
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
    case KP_HOSTCTL_STEP_FRESH:
        *ret_requeue = wait;
        break;
    case KP_HOSTCTL_STEP_PROBE:
        r = reconcile_probe(hc, c, host, ret_requeue);
        break;
    }
out:
    kp_entry_unref(host);
    return r;
}

/* NodeClaim and Node events wake the hosts claimed under that name (Node name = NodeClaim name):
 * a deleted NodeClaim releases its host at once, a registered Node marks it InUse. */
static void wake_claimed(struct kp_ssh_hostctl *hc, const char *name)
{
    struct kp_store_list l = {0};

    if (kp_store_by_index(hc->hosts, KP_SSH_INDEX_HOST_CLAIM, name, &l) < 0)
        return;
    for (size_t i = 0; i < l.n; i++)
        (void)kp_reconciler_enqueue(hc->rec, l.v[i]->key); /* -ESHUTDOWN: stopping */
    kp_store_list_free(&l);
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
    struct kp_reconciler_opts ro = {0};
    struct kp_informer_handler wake = {
        .on_add = on_claim_add, .on_update = on_claim_update, .on_delete = on_claim_add};
    struct kp_informer_handler hh;
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
    hc->hosts_inf = o->hosts;
    hc->nodes_inf = o->nodes;
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
    if ((r = kp_ssh_index_nodes(o->nodes)) < 0 || (r = kp_ssh_index_hosts(o->hosts)) < 0)
        goto fail;
    ro.name = "sshhost";
    ro.workers = o->workers ? o->workers : KP_HOSTCTL_WORKERS;
    ro.reconcile = reconcile;
    ro.ctx = hc;
    ro.client = o->client;
    if ((r = kp_reconciler_new(&ro, &hc->rec)) < 0)
        goto fail;
    hh = kp_reconciler_handler(hc->rec);
    wake.ctx = hc;
    if ((r = kp_informer_add_handler(o->hosts, &hh)) < 0 ||
        (r = kp_informer_add_handler(o->nodes, &wake)) < 0 ||
        (o->nodeclaims && (r = kp_informer_add_handler(o->nodeclaims, &wake)) < 0))
        goto fail;
    *ret = hc;
    return 0;
fail:
    /* Take back the handlers added so far: they point at what is freed next. */
    if (hc->rec)
        (void)kp_informer_remove_handlers(o->hosts, hc->rec);
    (void)kp_informer_remove_handlers(o->nodes, hc);
    if (o->nodeclaims)
        (void)kp_informer_remove_handlers(o->nodeclaims, hc);
    kp_ssh_hostctl_free(hc);
    return r;
}

int kp_ssh_hostctl_start(struct kp_ssh_hostctl *hc)
{
    struct kp_store_list l = {0};
    int r;

    if ((r = kp_reconciler_start(hc->rec)) < 0)
        return r;
    hc->started = true;
    /* Hosts cached before our handler saw them (an informer started early) are not missed. */
    if (kp_store_list(hc->hosts, &l) == 0) {
        for (size_t i = 0; i < l.n; i++)
            (void)kp_reconciler_enqueue(hc->rec, l.v[i]->key);
        kp_store_list_free(&l);
    }
    return 0;
}

void kp_ssh_hostctl_stop(struct kp_ssh_hostctl *hc)
{
    if (!hc)
        return;
    kp_reconciler_stop(hc->rec);
    hc->started = false;
}

bool kp_ssh_hostctl_ready(struct kp_ssh_hostctl *hc)
{
    return hc && kp_reconciler_running(hc->rec) && kp_informer_synced(hc->hosts_inf) &&
           kp_informer_synced(hc->nodes_inf);
}

struct kp_ssh_hostctl *kp_ssh_hostctl_free(struct kp_ssh_hostctl *hc)
{
    if (!hc)
        return NULL;
    kp_reconciler_free(hc->rec);
    kp_free(hc->pool_ns);
    kp_free(hc);
    return NULL;
}
