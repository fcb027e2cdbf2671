/* DESIGN: Karpenter's drainable-pod rules and the waiting drainer (drain.h).
 *
 * What: the predicates of pkg/utils/pod (IsTerminal, IsStuckTerminating, IsOwnedByNode,
 * ToleratesDisruptedNoScheduleTaint, IsDrainable, IsWaitingEviction) over the pod projection,
 * and kp_drainer_wait, which counts the pods a drain waits on and evicts nothing, but deletes
 * the pods the termination deadline has run out for. Why a vtable:
 * eviction (PDB-aware, grouped by priority, forced at the deadline) is a separate piece of work
 * that plugs in without touching the termination controller's decisions. Threads: pure; the
 * drainer keeps no state, so any number of workers may call it at once. */
#include "core/termination/drain.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/obj-pod.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "core/core.h"
#include "k8s/client.h"
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
    /* Already terminating, but kubelet would finish it only after the deadline. */
    if (p->meta.deletion_usec && p->meta.deletion_usec > deadline_usec)
        return true;
    /* Its own grace period would carry it past the deadline if it were evicted now. */
    return now_usec > deadline_usec - grace;
}

/* Deletes pod p (uid precondition) with a grace period that ends at the deadline, at least 1 s:
 * Karpenter's forced deletion of a pod the termination grace period has run out for. 0 also
 * when the pod is already gone; a failure is logged and retried at the next reconcile. */
static int force_delete(struct kp_client *c, const struct kp_pod_view *p, int64_t deadline_usec,
                        int64_t now_usec)
{
    int64_t left = (deadline_usec - now_usec) / 1000000LL;
    struct kp_delete_opts o = {.precondition_uid = p->e.uid,
                               .grace_period_seconds = left > 1 ? left : 1,
                               .has_grace_period = true};
    struct kp_error e = KP_ERROR_INIT;
    int r = kp_client_delete(c, &KP_RES_POD, p->e.ns, p->e.name, &o, &e);

    if (r == -ENOENT || r == -KP_ECONFLICT)
        r = 0; /* gone, or another incarnation: nothing of this pod left to wait on */
    if (r < 0)
        kp_log_warn_errno(r, "cannot delete pod past the termination grace period",
                          KP_LF("namespace", p->e.ns), KP_LF("name", p->e.name),
                          KP_LF("detail", e.message ? e.message : ""));
    else
        kp_log_info("deleted pod past the termination grace period", KP_LF("namespace", p->e.ns),
                    KP_LF("name", p->e.name));
    kp_error_done(&e);
    return r;
}

/* Counts what the drain waits on; with a termination deadline, first deletes the pods it has
 * run out for (semantics §3.5's forced path, the one part of eviction this drainer does: without
 * it a Node whose pods nobody moves would wait for ever, and the NodeClaim's
 * terminationGracePeriod would mean nothing). */
static int wait_drain(void *self, struct kp_client *c, const struct kp_ctx *cx,
                      const struct kp_drain_input *in, struct kp_drain_result *ret)
{
    (void)self;
    for (size_t i = 0; i < in->n_pods && c; i++) {
        const struct kp_pod_view *p = in->pods[i];

        if (kp_ctx_err(cx) < 0)
            break;
        if (p && kp_drain_pod_waiting_eviction(p, in->now_usec) &&
            kp_drain_pod_needs_force(p, in->deadline_usec, in->now_usec))
            (void)force_delete(c, p, in->deadline_usec, in->now_usec); /* logged; retried */
    }
    kp_drain_count(in, ret);
    return 0;
}

static const struct kp_drainer_ops wait_ops = {.drain = wait_drain};
const struct kp_drainer kp_drainer_wait = {.ops = &wait_ops, .self = NULL};
