/* DESIGN: Karpenter's drainable-pod rules and the two drainers (drain.h).
 *
 * What: the predicates of pkg/utils/pod (IsTerminal, IsStuckTerminating, IsOwnedByNode,
 * ToleratesDisruptedNoScheduleTaint, IsDrainable, IsWaitingEviction) over the pod projection;
 * the drain plan (Terminator.Drain plus the eviction queue's choice per pod) as a pure function;
 * and two executors of it.
 *
 * Why no eviction queue: upstream hands pods to a separate rate-limited queue whose workers
 * evict, and the termination reconcile polls every second. Here the termination reconcile runs
 * the plan and makes the calls itself, bounded (KP_EVICT_MAX_CALLS per call) and paced per pod
 * by the state below, which stands in for the queue's per-item backoff and its "already
 * evicted" memory: without it a cache that has not yet seen a pod terminating would make every
 * reconcile evict it again, counting metrics and events twice. One Node is drained by one
 * worker at a time (the workqueue never runs a key twice at once), so the only sharing is the
 * pacing map, behind the drainer's lock, never held across a call to the API server.
 *
 * State lifetime: an entry is made when a pod is first acted on, dropped when the pod is gone
 * (404) or replaced (409), and otherwise swept when no drain has seen the pod for
 * KP_EVICT_FORGET_USEC (its Node finished, or the pod went away by itself). */
#include "core/termination/drain.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "core/core.h"
#include "core/observe.h"
#include "k8s/client.h"
#include "k8s/events.h"
#include "k8s/status.h"

bool kp_drain_pod_tolerates_disrupted(const struct kp_pod_view *p)
{
    const struct kp_taint t = {
        .key = KP_CORE_TAINT_DISRUPTED, .value = NULL, .effect = KP_TAINT_NO_SCHEDULE};

    return kp_tolerations_tolerate(&p->tolerations, &t);
}

bool kp_drain_pod_owned_by_node(const struct kp_pod_view *p)
{
    /* Karpenter asks for an owner reference {v1, Node}; kubelet's mirror pods carry both that
     * and the config.mirror annotation, and either alone means the API cannot delete it. */
    if (p->flags & KP_POD_MIRROR)
        return true;
    for (size_t i = 0; i < p->meta.owners.n; i++) {
        const struct kp_owner_ref *o = &p->meta.owners.v[i];

        if (o->kind && strcmp(o->kind, "Node") == 0 && o->api_version &&
            strcmp(o->api_version, "v1") == 0)
            return true;
    }
    return false;
}

bool kp_drain_pod_terminal(const struct kp_pod_view *p)
{
    return p->phase == KP_POD_SUCCEEDED || p->phase == KP_POD_FAILED;
}

bool kp_drain_pod_stuck_terminating(const struct kp_pod_view *p, int64_t now_usec)
{
    /* deletionTimestamp is the deletion time plus the grace period: a minute past it, kubelet
     * has had its chance. */
    return p->meta.deletion_usec > 0 &&
           now_usec - p->meta.deletion_usec > KP_DRAIN_STUCK_TERMINATING_USEC;
}

bool kp_drain_pod_drainable(const struct kp_pod_view *p, int64_t now_usec)
{
    return !kp_drain_pod_tolerates_disrupted(p) && !kp_drain_pod_stuck_terminating(p, now_usec) &&
           !kp_drain_pod_owned_by_node(p);
}

bool kp_drain_pod_waiting_eviction(const struct kp_pod_view *p, int64_t now_usec)
{
    return !kp_drain_pod_terminal(p) && kp_drain_pod_drainable(p, now_usec);
}

void kp_drain_count(const struct kp_drain_input *in, struct kp_drain_result *ret)
{
    size_t n = 0;

    for (size_t i = 0; i < in->n_pods; i++)
        if (in->pods[i] && kp_drain_pod_waiting_eviction(in->pods[i], in->now_usec))
            n++;
    ret->waiting = n;
    ret->drained = n == 0;
    ret->message[0] = '\0';
    if (n)
        (void)snprintf(ret->message, sizeof(ret->message), "%zu pods are waiting to be evicted", n);
}

bool kp_drain_pod_needs_force(const struct kp_pod_view *p, int64_t deadline_usec, int64_t now_usec)
{
    int64_t grace = p->grace_seconds > 0 ? p->grace_seconds * 1000000LL : 0;

    if (deadline_usec <= 0)
        return false;
    /* Already terminating: forced only when kubelet would finish it after the deadline (its
     * own grace period no longer matters, it has been granted). */
    if (p->meta.deletion_usec)
        return p->meta.deletion_usec > deadline_usec;
    /* Its own grace period would carry it past the deadline if it were evicted now. */
    return now_usec > deadline_usec - grace;
}

/* The reason a drain names in its Evicted events and karpenter_pods_drained_total: the
 * NodeClaim's DisruptionReason when True, else "Forceful Termination"; "" without a NodeClaim
 * (Karpenter's evictionReason). */
static const char *evict_reason(const struct kp_drain_input *in)
{
    const struct kp_condition *dr;

    if (!in->nodeclaim)
        return "";
    dr = kp_conditions_get(&in->nodeclaim->conditions, KP_NC_COND_DISRUPTION_REASON);
    if (dr && dr->status == KP_COND_TRUE && dr->reason && *dr->reason)
        return dr->reason;
    return "Forceful Termination";
}

static void pod_event(const struct kp_drain_input *in, const struct kp_pod_view *p,
                      const char *reason, const char *action, const char *note)
{
    const struct kp_event_ref ref = {
        .kind = "Pod", .api_version = "v1", .ns = p->e.ns, .name = p->e.name, .uid = p->e.uid};

    if (in->events)
        (void)kp_events_emit(in->events, &ref, KP_EVENT_NORMAL, reason, action, note);
}

/* Deletes pod p (uid precondition) with a grace period that ends at the deadline, at least 1 s:
 * Karpenter's forced deletion of a pod the termination grace period has run out for, with its
 * Disrupted event on the pod. 0 also when the pod is already gone (-ENOENT is returned through
 * *ret_gone); a failure is logged and retried. */
/* Now, read again: a drain's calls take time, and a grace period or a pacing stamp computed
 * from the reconcile's start would be off by all of it. */
static int64_t drain_now(const struct kp_drain_input *in)
{
    return in->clock ? (int64_t)in->clock() : in->now_usec;
}

static int force_delete(struct kp_client *c, const struct kp_drain_input *in,
                        const struct kp_pod_view *p, bool *ret_gone)
{
    int64_t left = (in->deadline_usec - drain_now(in)) / 1000000LL;
    struct kp_delete_opts o = {.precondition_uid = p->e.uid,
                               .grace_period_seconds = left > 1 ? left : 1,
                               .has_grace_period = true};
    struct kp_error e = KP_ERROR_INIT;
    char when[64] = "", note[512];
    time_t secs = (time_t)(in->deadline_usec / 1000000LL);
    struct tm tm;
    int r;

    *ret_gone = false;
    if (gmtime_r(&secs, &tm))
        (void)strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S +0000 UTC", &tm);
    (void)snprintf(note, sizeof(note),
                   "Deleting the pod to accommodate the terminationTime %s of the node. The pod "
                   "was granted %lld seconds of grace-period of its %lld "
                   "terminationGracePeriodSeconds. This bypasses the PDB of the pod and the "
                   "do-not-disrupt annotation.",
                   when, (long long)o.grace_period_seconds, (long long)p->grace_seconds);
    pod_event(in, p, "Disrupted", "Delete", note);
    r = kp_client_delete(c, &KP_RES_POD, p->e.ns, p->e.name, &o, &e);
    if (r == -ENOENT || r == -KP_ECONFLICT) {
        *ret_gone = true; /* gone, or another incarnation: nothing of this pod left */
        r = 0;
    } else if (r < 0) {
        kp_log_warn_errno(r, "cannot delete pod past the termination grace period",
                          KP_LF("namespace", p->e.ns), KP_LF("name", p->e.name),
                          KP_LF("detail", e.message ? e.message : ""));
    } else {
        kp_log_info("deleted pod past the termination grace period", KP_LF("namespace", p->e.ns),
                    KP_LF("name", p->e.name), KP_LF("grace_seconds", o.grace_period_seconds));
        kp_core_count(in->observer, KP_CM_PODS_DRAINED, KP_CM_LABELS(evict_reason(in)));
    }
    kp_error_done(&e);
    return r;
}

/* Counts what the drain waits on; with a termination deadline, first deletes the pods it has
 * run out for (Karpenter's forced path, the one part of eviction this drainer does: without
 * it a Node whose pods nobody moves would wait for ever, and the NodeClaim's
 * terminationGracePeriod would mean nothing). */
static int wait_drain(void *self, struct kp_client *c, const struct kp_ctx *cx,
                      const struct kp_drain_input *in, struct kp_drain_result *ret)
{
    (void)self;
    for (size_t i = 0; i < in->n_pods && c; i++) {
        const struct kp_pod_view *p = in->pods[i];
        bool gone;

        if (kp_ctx_err(cx) < 0)
            break;
        if (p && kp_drain_pod_waiting_eviction(p, in->now_usec) &&
            kp_drain_pod_needs_force(p, in->deadline_usec, in->now_usec))
            (void)force_delete(c, in, p, &gone); /* logged; retried */
    }
    kp_drain_count(in, ret);
    return 0;
}

static const struct kp_drainer_ops wait_ops = {.drain = wait_drain};
const struct kp_drainer kp_drainer_wait = {.ops = &wait_ops, .self = NULL};

/* --- the evicting drainer ------------------------------------------------------------------ */

/* A pod no drain has seen for this long is forgotten (its Node is gone or it left by itself). */
#define KP_EVICT_FORGET_USEC (10 * 60 * 1000000LL)
/* How often the sweep for such pods runs at most. */
#define KP_EVICT_SWEEP_USEC (60 * 1000000LL)

unsigned kp_drain_group(const struct kp_pod_view *p)
{
    bool critical = kp_streq(p->priority_class, "system-cluster-critical") ||
                    kp_streq(p->priority_class, "system-node-critical");
    bool daemon = (p->flags & KP_POD_DAEMONSET) != 0;

    return (critical ? 2u : 0u) + (daemon ? 1u : 0u);
}

void kp_drain_plan(const struct kp_drain_input *in, enum kp_drain_verb *verbs,
                   struct kp_drain_result *ret)
{
    unsigned first = KP_DRAIN_GROUPS;

    /* Past the deadline, deletion does not wait for earlier groups: a PDB on an ordinary pod
     * must not hold up a critical pod whose time has run out. */
    for (size_t i = 0; i < in->n_pods; i++) {
        const struct kp_pod_view *p = in->pods[i];
        unsigned g;

        verbs[i] = KP_DRAIN_SKIP;
        if (!p || !kp_drain_pod_waiting_eviction(p, in->now_usec))
            continue;
        if (kp_drain_pod_needs_force(p, in->deadline_usec, in->now_usec)) {
            verbs[i] = KP_DRAIN_FORCE;
            continue;
        }
        verbs[i] = KP_DRAIN_WAIT;
        if ((g = kp_drain_group(p)) < first)
            first = g;
    }
    /* The first group still holding a pod is evicted; a terminating pod is already on its way
     * and a do-not-disrupt pod is only waited on. */
    for (size_t i = 0; i < in->n_pods && first < KP_DRAIN_GROUPS; i++) {
        const struct kp_pod_view *p = in->pods[i];

        if (verbs[i] == KP_DRAIN_WAIT && kp_drain_group(p) == first && kp_pod_active(p) &&
            !kp_pod_do_not_disrupt_active(p, in->now_usec))
            verbs[i] = KP_DRAIN_EVICT;
    }
    kp_drain_count(in, ret);
}

/* Pacing of one pod, keyed by uid in the drainer's map. */
struct pace {
    int64_t next_evict_usec; /* no eviction before this */
    int64_t next_force_usec; /* no forced deletion before this */
    int64_t seen_usec;       /* the last drain that saw the pod */
    unsigned evict_failures; /* consecutive failures (each verb's backoff exponent) */
    unsigned force_failures;
};

struct kp_evict_drainer {
    pthread_mutex_t mu; /* guards pods and swept_usec */
    struct kp_map *pods;
    int64_t swept_usec;
};

int kp_evict_drainer_new(struct kp_evict_drainer **ret)
{
    struct kp_evict_drainer *d = kp_calloc(1, sizeof(*d));
    int r;

    if (!d)
        return -ENOMEM;
    if ((r = kp_map_new(&d->pods)) < 0) {
        kp_free(d);
        return r;
    }
    pthread_mutex_init(&d->mu, NULL);
    *ret = d;
    return 0;
}

static void free_all(struct kp_map *m)
{
    size_t it = 0;
    const char *k;
    void *v;

    while (kp_map_next(m, &it, &k, &v))
        kp_free(v);
}

struct kp_evict_drainer *kp_evict_drainer_free(struct kp_evict_drainer *d)
{
    if (!d)
        return NULL;
    free_all(d->pods);
    kp_map_free(d->pods);
    pthread_mutex_destroy(&d->mu);
    kp_free(d);
    return NULL;
}

size_t kp_evict_drainer_tracked(struct kp_evict_drainer *d)
{
    size_t n;

    pthread_mutex_lock(&d->mu);
    n = kp_map_size(d->pods);
    pthread_mutex_unlock(&d->mu);
    return n;
}

/* Drops the pods no drain has seen for KP_EVICT_FORGET_USEC. Under d->mu. */
static void sweep(struct kp_evict_drainer *d, int64_t now_usec)
{
    const char *stale[32];
    size_t n;

    if (now_usec - d->swept_usec < KP_EVICT_SWEEP_USEC)
        return;
    d->swept_usec = now_usec;
    do { /* removal shifts entries: collect a batch, remove it, look again */
        size_t it = 0;
        const char *k;
        void *v;

        n = 0;
        while (n < KP_ARRAY_SIZE(stale) && kp_map_next(d->pods, &it, &k, &v))
            if (now_usec - ((struct pace *)v)->seen_usec > KP_EVICT_FORGET_USEC)
                stale[n++] = k;
        for (size_t i = 0; i < n; i++) {
            char *key = kp_strdup(stale[i]); /* removing frees the map's copy */

            if (!key)
                return; /* out of memory: the next sweep tries again */
            kp_free(kp_map_remove(d->pods, key));
            kp_free(key);
        }
    } while (n == KP_ARRAY_SIZE(stale));
}

/* Whether uid may be acted on with verb now; notes that a drain saw it. -ENOMEM: not now. */
static int pace_due(struct kp_evict_drainer *d, const char *uid, enum kp_drain_verb verb,
                    int64_t now_usec, bool *ret_due)
{
    struct pace *pc;
    int r = 0;

    *ret_due = false;
    pthread_mutex_lock(&d->mu);
    sweep(d, now_usec);
    pc = kp_map_get(d->pods, uid);
    if (!pc) {
        if (!(pc = kp_calloc(1, sizeof(*pc)))) {
            r = -ENOMEM;
            goto out;
        }
        if ((r = kp_map_put(d->pods, uid, pc, NULL)) < 0) {
            kp_free(pc);
            goto out;
        }
    }
    pc->seen_usec = now_usec;
    *ret_due = now_usec >= (verb == KP_DRAIN_FORCE ? pc->next_force_usec : pc->next_evict_usec);
out:
    pthread_mutex_unlock(&d->mu);
    return r;
}

enum outcome {
    OUT_DONE,  /* evicted or deleted: settle */
    OUT_GONE,  /* 404 or 409: forget the pod */
    OUT_RETRY, /* refused or failed: back off */
};

static void pace_after(struct kp_evict_drainer *d, const char *uid, enum kp_drain_verb verb,
                       enum outcome o, int64_t now_usec)
{
    struct pace *pc;

    pthread_mutex_lock(&d->mu);
    pc = kp_map_get(d->pods, uid);
    if (pc && o == OUT_GONE) {
        kp_free(kp_map_remove(d->pods, uid));
    } else if (pc) {
        bool force = verb == KP_DRAIN_FORCE;
        unsigned *failures = force ? &pc->force_failures : &pc->evict_failures;
        int64_t *next = force ? &pc->next_force_usec : &pc->next_evict_usec;
        int64_t wait = KP_EVICT_BACKOFF_BASE_USEC;

        if (o == OUT_DONE) {
            *failures = 0;
            *next = now_usec + KP_EVICT_SETTLE_USEC;
        } else {
            for (unsigned i = 0; i < *failures && wait < KP_EVICT_BACKOFF_MAX_USEC; i++)
                wait *= 2;
            if (wait > KP_EVICT_BACKOFF_MAX_USEC)
                wait = KP_EVICT_BACKOFF_MAX_USEC;
            if (*failures < 64)
                (*failures)++;
            *next = now_usec + wait;
        }
    }
    pthread_mutex_unlock(&d->mu);
}

/* One Eviction API call for p (uid precondition) and what follows from its answer (semantics
 * §3.5): the request counted by code; 200 an Evicted event and a drained pod; 404 and 409 the
 * pod is gone or another; 429 (a PDB) or the several-PDBs refusal a FailedDraining event on the
 * Node and a retry; anything else a retry. */
static enum outcome evict_one(struct kp_client *c, const struct kp_drain_input *in,
                              const struct kp_pod_view *p)
{
    const struct kp_delete_opts o = {.precondition_uid = p->e.uid};
    struct kp_error e = KP_ERROR_INIT;
    enum outcome out = OUT_RETRY;
    char code[16], note[512];
    int r = kp_client_evict(c, p->e.ns, p->e.name, &o, &e);
    bool several = e.message && strcmp(e.message, KP_EVICT_MULTIPLE_PDBS_MESSAGE) == 0;

    if (r >= 0) {
        kp_core_count(in->observer, KP_CM_PODS_EVICTION_REQUESTS, KP_CM_LABELS("200"));
        (void)snprintf(note, sizeof(note), "Evicted pod: %s", evict_reason(in));
        pod_event(in, p, "Evicted", "Evict", note);
        kp_core_count(in->observer, KP_CM_PODS_DRAINED, KP_CM_LABELS(evict_reason(in)));
        kp_log_info("evicted pod", KP_LF("namespace", p->e.ns), KP_LF("name", p->e.name),
                    KP_LF("Node", in->node->e.name));
        out = OUT_DONE;
        goto done;
    }
    if (e.code > 0) {
        (void)snprintf(code, sizeof(code), "%d", e.code);
        kp_core_count(in->observer, KP_CM_PODS_EVICTION_REQUESTS, KP_CM_LABELS(code));
    }
    if (r == -ENOENT || r == -KP_ECONFLICT || e.code == 404 || e.code == 409) {
        out = OUT_GONE;
    } else if (e.code == 429 || several) {
        const struct kp_event_ref ref = {.kind = "Node",
                                         .api_version = "v1",
                                         .ns = NULL,
                                         .name = in->node->e.name,
                                         .uid = in->node->e.uid};

        (void)snprintf(note, sizeof(note), "Failed to drain node, %s (Pod=%s/%s)",
                       several ? "eviction does not support multiple PDBs"
                               : "evicting pod violates a PDB",
                       p->e.ns, p->e.name);
        if (in->events)
            (void)kp_events_emit(in->events, &ref, KP_EVENT_WARNING, "FailedDraining", "Terminate",
                                 note);
    } else {
        kp_log_warn_errno(r, "cannot evict pod", KP_LF("namespace", p->e.ns),
                          KP_LF("name", p->e.name), KP_LF("detail", e.message ? e.message : ""));
    }
done:
    kp_error_done(&e);
    return out;
}

static int evict_drain(void *self, struct kp_client *c, const struct kp_ctx *cx,
                       const struct kp_drain_input *in, struct kp_drain_result *ret)
{
    struct kp_evict_drainer *d = self;
    enum kp_drain_verb *verbs = kp_calloc(in->n_pods ? in->n_pods : 1, sizeof(*verbs));
    unsigned calls = 0;
    int r = 0;

    if (!verbs)
        return -ENOMEM;
    kp_drain_plan(in, verbs, ret);
    for (size_t i = 0; i < in->n_pods && c && calls < KP_EVICT_MAX_CALLS; i++) {
        const struct kp_pod_view *p = in->pods[i];
        enum outcome o;
        bool due, gone;

        if (verbs[i] != KP_DRAIN_EVICT && verbs[i] != KP_DRAIN_FORCE)
            continue;
        if (!p->e.uid || !*p->e.uid)
            continue; /* no uid, no precondition: never evict or delete blind */
        if ((r = kp_ctx_err(cx)) < 0)
            break;
        if ((r = pace_due(d, p->e.uid, verbs[i], drain_now(in), &due)) < 0)
            break;
        if (!due)
            continue;
        calls++;
        if (verbs[i] == KP_DRAIN_FORCE)
            o = force_delete(c, in, p, &gone) < 0 ? OUT_RETRY : gone ? OUT_GONE : OUT_DONE;
        else
            o = evict_one(c, in, p);
        pace_after(d, p->e.uid, verbs[i], o, drain_now(in));
    }
    kp_free(verbs);
    /* Stopping is not a failure of the drain: the answer stands, the next reconcile goes on. */
    return r == -ENOMEM ? r : 0;
}

static const struct kp_drainer_ops evict_ops = {.drain = evict_drain};

struct kp_drainer kp_evict_drainer(struct kp_evict_drainer *d)
{
    return (struct kp_drainer){.ops = &evict_ops, .self = d};
}
