/* DESIGN: clocks, deadlines, jittered backoff, RFC 3339 timestamps.
 *
 * What: every duration in kpssh is uint64_t microseconds. Durations and deadlines use
 * CLOCK_MONOTONIC, so a wall-clock step (NTP, an operator's `date -s`) cannot fire or postpone
 * a timeout; only timestamps that leave the process (logs, Kubernetes times) use CLOCK_REALTIME.
 *
 * Why this way: all arithmetic saturates at KP_USEC_INFINITY instead of wrapping, so "now plus a
 * huge timeout from a config file" becomes "never" rather than a deadline in the past.
 * kp_deadline_left_ms() rounds up: poll(2) with a timeout rounded down would wake up just before
 * the deadline, find it not yet expired and spin with a 0 ms timeout.
 *
 * Backoff: the jitter spreads retries of many hosts or workers that failed together (an API
 * server restart) so they do not come back in lockstep. Each struct kp_backoff carries its own
 * xorshift64* generator, seeded once from getrandom(2); it is not cryptographic and does not need
 * to be, it only decorrelates. kp_rand_below() rejects the top partial range of the generator's
 * output, so every value below bound is equally likely (no modulo bias).
 *
 * Threads: every function may be called from any thread; a struct kp_backoff and the state of
 * kp_rand_below() belong to one thread at a time. No global mutable state. */
#include "base/time.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* The fixed non-zero state that replaces a zero xorshift state (2^64 / golden ratio). */
#define KP_RNG_FALLBACK 0x9e3779b97f4a7c15ULL

static uint64_t kp_clock_usec(clockid_t id)
{
    struct timespec ts;

    /* clock_gettime cannot fail for these two clocks on Linux with a valid pointer. */
    if (clock_gettime(id, &ts) < 0 || ts.tv_sec < 0)
        return 0;
    /* Both parts are non-negative here, so the casts to unsigned are exact. */
    return (uint64_t)ts.tv_sec * KP_USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t kp_mono_usec(void)
{
    return kp_clock_usec(CLOCK_MONOTONIC);
}

uint64_t kp_real_usec(void)
{
    return kp_clock_usec(CLOCK_REALTIME);
}

void kp_sleep_usec(uint64_t usec)
{
    struct timespec at;
    uint64_t sec;

    if (usec == 0 || clock_gettime(CLOCK_MONOTONIC, &at) < 0)
        return;
    /* An absolute wake-up time makes resuming after EINTR keep the original total. Seconds are
     * capped at 2^40 (some 35000 years) so that tv_sec cannot overflow time_t. */
    sec = KP_MIN(usec / KP_USEC_PER_SEC, 1ULL << 40);
    at.tv_sec += (time_t)sec;
    at.tv_nsec += (long)(usec % KP_USEC_PER_SEC) * 1000;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    /* clock_nanosleep returns the error number rather than setting errno. */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
        ;
}

int kp_cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int r;

    if ((r = pthread_condattr_init(&attr)) != 0)
        return -r;
    r = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (r == 0)
        r = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return -r;
}

int kp_cond_wait_deadline(pthread_cond_t *cond, pthread_mutex_t *mutex, struct kp_deadline d)
{
    struct timespec ts;

    if (d.at == KP_USEC_INFINITY) {
        (void)pthread_cond_wait(cond, mutex);
        return 0;
    }
    if (kp_deadline_expired(d))
        return -ETIMEDOUT;
    ts.tv_sec = (time_t)(d.at / KP_USEC_PER_SEC);
    ts.tv_nsec = (long)(d.at % KP_USEC_PER_SEC) * 1000;
    return pthread_cond_timedwait(cond, mutex, &ts) == ETIMEDOUT ? -ETIMEDOUT : 0;
}

struct kp_deadline kp_deadline_in(uint64_t usec)
{
    uint64_t at;

    if (usec == KP_USEC_INFINITY || kp_add_overflow(kp_mono_usec(), usec, &at))
        return kp_deadline_never();
    return (struct kp_deadline){.at = at};
}

bool kp_deadline_expired(struct kp_deadline d)
{
    return d.at != KP_USEC_INFINITY && kp_mono_usec() >= d.at;
}

uint64_t kp_deadline_left_usec(struct kp_deadline d)
{
    uint64_t now;

    if (d.at == KP_USEC_INFINITY)
        return KP_USEC_INFINITY;
    now = kp_mono_usec();
    return now >= d.at ? 0 : d.at - now;
}

int kp_deadline_left_ms(struct kp_deadline d)
{
    uint64_t left, ms;

    if (d.at == KP_USEC_INFINITY)
        return -1;
    left = kp_deadline_left_usec(d);
    ms = left / KP_USEC_PER_MSEC + (left % KP_USEC_PER_MSEC != 0);
    /* Clamped to INT32_MAX first, so the narrowing cast is exact. */
    return (int)KP_MIN(ms, (uint64_t)INT32_MAX);
}

struct kp_deadline kp_deadline_min(struct kp_deadline a, struct kp_deadline b)
{
    return a.at <= b.at ? a : b;
}

/* splitmix64 finaliser: spreads a weak seed (a clock reading) over all 64 bits. */
static uint64_t kp_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t kp_xorshift64s(uint64_t *state)
{
    uint64_t x = *state;

    if (x == 0)
        x = KP_RNG_FALLBACK;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dULL;
}

void kp_backoff_init(struct kp_backoff *b, uint64_t base_usec, uint64_t cap_usec)
{
    uint64_t seed = 0;
    ssize_t n;

    /* GRND_NONBLOCK: early at boot the pool may not be ready; a clock-derived seed is good
     * enough to decorrelate retries, and blocking start-up for it would not be. */
    do
        n = getrandom(&seed, sizeof(seed), GRND_NONBLOCK);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(seed))
        seed = kp_mix64(kp_mono_usec() ^ (kp_real_usec() << 20) ^ (uint64_t)(uintptr_t)b);

    b->base_usec = base_usec;
    b->cap_usec = cap_usec;
    b->attempt = 0;
    b->rng = seed ? seed : KP_RNG_FALLBACK;
}

uint64_t kp_backoff_next(struct kp_backoff *b)
{
    uint64_t upper = b->base_usec, lower;
    unsigned k;

    /* base * 2^k, saturating: stop doubling once past the cap (or at the top of the type). */
    for (k = 0; k < b->attempt && upper < b->cap_usec; k++)
        upper = upper > UINT64_MAX / 2 ? UINT64_MAX : upper * 2;
    upper = KP_MIN(upper, b->cap_usec);
    lower = upper / 2;
    /* The counter stops growing once it no longer matters, so it can never wrap. */
    if (b->attempt < 64)
        b->attempt++;
    if (upper == 0)
        return 0;
    /* upper - lower + 1 <= 2^63 + 1: no overflow. */
    return lower + kp_rand_below(&b->rng, upper - lower + 1);
}

void kp_backoff_reset(struct kp_backoff *b)
{
    b->attempt = 0;
}

uint64_t kp_rand_below(uint64_t *state, uint64_t bound)
{
    uint64_t threshold, r;

    if (bound == 0)
        return 0;
    /* 2^64 mod bound: outputs below it belong to an incomplete last range of bound values, so
     * they are rejected; the rest map onto [0, bound) uniformly. At most half are rejected. */
    threshold = (0 - bound) % bound;
    do
        r = kp_xorshift64s(state);
    while (r < threshold);
    return r % bound;
}

int kp_time_format_rfc3339(uint64_t usec, char *buf, size_t size)
{
    char tmp[64];
    struct tm tm;
    time_t sec;
    int n;

    if (size < KP_RFC3339_MAX)
        return -E2BIG;
    /* 253402300799 is 9999-12-31T23:59:59Z, the last second with a four-digit year. */
    if (usec / KP_USEC_PER_SEC > 253402300799ULL)
        return -ERANGE;
    sec = (time_t)(usec / KP_USEC_PER_SEC);
    if (!gmtime_r(&sec, &tm))
        return -ERANGE;
    n = snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (unsigned)(usec % KP_USEC_PER_SEC));
    if (n < 0 || (size_t)n >= size)
        return -E2BIG;
    memcpy(buf, tmp, (size_t)n + 1);
    return 0;
}
