/* k8s/fence.h: the write fence of a leader-elected process.
 *
 * A replica may write (to the API server, or to a host over SSH) only while it holds the leader
 * Lease. Holding it is a matter of time: a renewal that succeeded at monotonic time T (taken
 * before the request was sent) lets us act until T + renew deadline, and no longer, because
 * another candidate may take the Lease once it has seen no change for the lease duration. The
 * fence is that instant, published as one atomic: writers compare the clock with it before
 * they start, so a keeper thread that hangs in a request cannot leave the fence open past the
 * deadline. Closing it early (lease taken, shutdown) is storing 0.
 *
 * Threads: any thread may read or set a fence; it is one C11 atomic. Its owner (the process's
 * main) keeps it alive until every client that points to it is freed. */
#ifndef KP_K8S_FENCE_H
#define KP_K8S_FENCE_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/macro.h"

#define KP_FENCE_OPEN UINT64_MAX /* never closes: leader election disabled */
#define KP_FENCE_CLOSED 0

struct kp_fence {
    atomic_uint_least64_t until; /* monotonic usec: writes allowed while kp_mono_usec() < until */
};

/* Initialises f closed (KP_FENCE_CLOSED) or open until the given monotonic time. */
void kp_fence_init(struct kp_fence *f, uint64_t until) KP_NONNULL(1);
/* Moves the deadline (later on a renewal, KP_FENCE_CLOSED on loss). Any thread. */
void kp_fence_set(struct kp_fence *f, uint64_t until) KP_NONNULL(1);
/* 0 while writes are allowed (f NULL: no fence), else -KP_ENOTLEADER. Any thread; no I/O. */
int kp_fence_check(const struct kp_fence *f) KP_WUR;

#endif
