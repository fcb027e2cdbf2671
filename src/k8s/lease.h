/* k8s/lease.h: leader election on a coordination.k8s.io/v1 Lease.
 *
 * The rules client-go's leader election follows, so a kpssh controller and any tool that
 * understands Leases agree on who leads:
 *  - A candidate takes the Lease when it does not exist, when its holder is empty, or when the
 *    holder has not renewed for leaseDurationSeconds as *observed locally* (the time since this
 *    process last saw the Lease change, on the monotonic clock; clocks of other machines are
 *    never compared with ours).
 *  - Every write is a compare-and-swap on the Lease's resourceVersion; a Conflict means another
 *    candidate moved first.
 *  - The leader renews every retry period; if it cannot renew for the renew deadline (counted
 *    on the monotonic clock from the start of the last successful attempt) it has lost the
 *    lease and must stop acting. It does not try again past that deadline: another candidate
 *    may take the Lease lease-duration after it last saw it change, so the leader's writes stop
 *    at the renew deadline, before that can happen (the fence, k8s/fence.h).
 *  - On clean shutdown the leader releases: holderIdentity cleared, duration 1 s, so a
 *    successor takes over at once.
 * Threads: a struct kp_leader and its client belong to one thread (the main thread), except
 * while a keeper thread runs (kp_leader_keep_start() to kp_leader_keep_stop()): then the keeper
 * owns it and other threads call only kp_leader_keep_lost() and kp_leader_keep_status(). */
#ifndef KP_K8S_LEASE_H
#define KP_K8S_LEASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_client;
struct kp_error;
struct kp_ctx;
struct kp_fence;
struct kp_leader;

#define KP_LEASE_DURATION_USEC (15 * 1000000ULL)
#define KP_LEASE_RENEW_DEADLINE_USEC (10 * 1000000ULL)
#define KP_LEASE_RETRY_USEC (2 * 1000000ULL)

struct kp_leader_opts {
    const char *ns;               /* Lease namespace */
    const char *name;             /* Lease name (one per install) */
    const char *identity;         /* this candidate, unique: e.g. "<pod>_<random>" */
    uint64_t lease_usec;          /* 0: KP_LEASE_DURATION_USEC */
    uint64_t renew_deadline_usec; /* 0: KP_LEASE_RENEW_DEADLINE_USEC */
    uint64_t retry_usec;          /* 0: KP_LEASE_RETRY_USEC */
};

/* A candidate using a clone of c. opts is copied. 0, -EINVAL (renew deadline not shorter than
 * the lease, missing names) or -ENOMEM. */
int kp_leader_new(struct kp_client *c, const struct kp_leader_opts *opts,
                  struct kp_leader **ret) KP_WUR;
struct kp_leader *kp_leader_free(struct kp_leader *l);

/* One attempt to acquire or renew. 0 with *ret_leader telling whether we hold the lease now,
 * or a negative error (the API call failed; *ret_leader untouched). */
int kp_leader_try(struct kp_leader *l, bool *ret_leader, struct kp_error *reterr) KP_WUR;

/* Blocks until this candidate leads (0) or cancel becomes true (-ECANCELED). Retries every
 * retry period with jitter. */
int kp_leader_acquire(struct kp_leader *l, const atomic_bool *cancel) KP_WUR;

/* Renews while leading, on the calling thread. Returns 0 when cancel becomes true (still
 * leader: release next), or -KP_ENOTREADY when the lease was lost (renewal failed for the renew
 * deadline, or another holder took it): stop acting at once. */
int kp_leader_keep(struct kp_leader *l, const atomic_bool *cancel) KP_WUR;

/* Starts the keeper thread of a leader (the last kp_leader_try() made us leader): it renews as
 * kp_leader_keep() does, and keeps fence (borrowed, optional) open until the renew deadline of
 * the last successful renewal, opening it before this returns. When the lease is lost (another
 * holder, or the renew deadline passed) it closes the fence first, then cancels loss_ctx
 * (borrowed, optional: the term's context, so whatever runs under it stops without waiting for
 * the main thread, a start-up blocked in its informers' sync included), then writes 1 to
 * notify_fd (an eventfd; -1 for none) and ends. 0, -EALREADY (running), -EINVAL (not leading)
 * or the error of pthread_create (fence closed). Main thread. */
int kp_leader_keep_start(struct kp_leader *l, struct kp_fence *fence, struct kp_ctx *loss_ctx,
                         int notify_fd) KP_WUR;
/* Stops and joins the keeper (a no-op when none runs). True when we still lead (release or
 * start a new keeper next; the fence stays open until the deadline), false when the keeper lost
 * the lease (fence closed). Main thread. */
bool kp_leader_keep_stop(struct kp_leader *l);
/* True once the running (or last) keeper lost the lease. Any thread. */
bool kp_leader_keep_lost(struct kp_leader *l);
/* 0 or the error of the keeper's last renewal attempt. Any thread. */
int kp_leader_keep_status(struct kp_leader *l);

/* What kp_leader_release found. */
enum kp_leader_release {
    KP_LEADER_RELEASED,    /* we held the Lease and gave it up (holder cleared, duration 1 s) */
    KP_LEADER_NOT_LEADING, /* we were not leading: nothing read or written */
    KP_LEADER_TAKEN,       /* another identity holds it, or nobody (kp_leader_observed_holder
                            * says which): left untouched */
    KP_LEADER_GONE,        /* the Lease does not exist */
};

/* Gives the lease up if we still hold it; a Lease another identity holds is never written. 0
 * with *ret_result (optional) saying which of the above happened, or the API error (still
 * counted as leader then: the lease expires on its own). After it returns 0 we do not lead. */
int kp_leader_release(struct kp_leader *l, enum kp_leader_release *ret_result) KP_WUR;

bool kp_leader_is_leader(const struct kp_leader *l);
/* The holder last observed (may be us), or NULL. Valid until the next call. */
const char *kp_leader_observed_holder(const struct kp_leader *l);

#endif
