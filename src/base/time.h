/* base/time.h: clocks, deadlines, jittered exponential backoff, RFC 3339 formatting.
 *
 * Times are uint64_t microseconds: monotonic for durations and deadlines, realtime (Unix epoch)
 * for timestamps that leave the process. Any thread. */
#ifndef KP_BASE_TIME_H
#define KP_BASE_TIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

#define KP_USEC_PER_MSEC 1000ULL
#define KP_USEC_PER_SEC 1000000ULL
#define KP_USEC_INFINITY UINT64_MAX

uint64_t kp_mono_usec(void);
uint64_t kp_real_usec(void);

/* Sleeps for usec on the monotonic clock, resuming after signals (the total stays usec). */
void kp_sleep_usec(uint64_t usec);

/* A point on the monotonic clock; KP_USEC_INFINITY means never. */
struct kp_deadline {
    uint64_t at;
};
/* A deadline usec from now (saturating: a huge usec gives infinity). */
struct kp_deadline kp_deadline_in(uint64_t usec);
static inline struct kp_deadline kp_deadline_never(void)
{
    return (struct kp_deadline){.at = KP_USEC_INFINITY};
}
bool kp_deadline_expired(struct kp_deadline d);
/* Microseconds left (0 when expired, KP_USEC_INFINITY for never). */
uint64_t kp_deadline_left_usec(struct kp_deadline d);
/* Milliseconds left, rounded up, clamped to [0, INT32_MAX]; -1 for never (poll(2) style). */
int kp_deadline_left_ms(struct kp_deadline d);
/* The earlier of two deadlines. */
struct kp_deadline kp_deadline_min(struct kp_deadline a, struct kp_deadline b);

/* Condition variables on the monotonic clock, so deadlines (monotonic) can bound their waits and a
 * wall-clock step cannot stretch or cut them. kp_cond_init_monotonic: 0 or -errno.
 * kp_cond_wait_deadline: one wait with mutex held, as pthread_cond_timedwait (spurious wake-ups
 * included, so callers loop on their predicate); 0, or -ETIMEDOUT once the deadline has passed.
 * A never deadline waits without a timeout. */
int kp_cond_init_monotonic(pthread_cond_t *cond) KP_NONNULL(1) KP_WUR;
int kp_cond_wait_deadline(pthread_cond_t *cond, pthread_mutex_t *mutex, struct kp_deadline d)
    KP_NONNULL(1, 2);

/* Exponential backoff with jitter: attempt k (0 first) waits a uniform random time in
 * [upper / 2, upper] where upper = min(base * 2^k, cap) (saturating, so a large k simply stays
 * at cap and the wait keeps its jitter there). base or cap 0 gives 0. The generator is per struct
 * (no shared state), so each owner thread uses its own; a struct is owned by one thread. */
struct kp_backoff {
    uint64_t base_usec;
    uint64_t cap_usec;
    unsigned attempt;
    uint64_t rng; /* xorshift64* state, never 0 */
};
/* Sets base and cap and seeds the generator from getrandom (falls back to the clock). */
void kp_backoff_init(struct kp_backoff *b, uint64_t base_usec, uint64_t cap_usec);
/* The next delay; advances the attempt counter. */
uint64_t kp_backoff_next(struct kp_backoff *b);
/* Back to the first attempt (after a success). */
void kp_backoff_reset(struct kp_backoff *b);

/* A uniform random number in [0, bound) from the xorshift state (bound 0 gives 0), without
 * modulo bias. A zero state (which xorshift would never leave) is first replaced by a fixed
 * non-zero one. */
uint64_t kp_rand_below(uint64_t *state, uint64_t bound);

#define KP_RFC3339_MAX sizeof("2006-01-02T15:04:05.000000Z")
/* Formats realtime usec as RFC 3339 UTC with microseconds ("…T09:00:00.123456Z") into
 * buf[size] (size >= KP_RFC3339_MAX). 0, -E2BIG (size too small) or -ERANGE (a year past 9999,
 * which RFC 3339 cannot write). buf is written only on success. */
int kp_time_format_rfc3339(uint64_t usec, char *buf, size_t size) KP_WUR;

#endif
