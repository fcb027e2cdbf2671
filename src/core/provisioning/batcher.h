/* core/provisioning/batcher.h: the provisioner's trigger batcher (Karpenter's
 * pkg/controllers/provisioning/batcher.go).
 *
 * Pod and Node triggers arrive one by one; the provisioner wants them in windows, so one
 * scheduling round sees every pod of a burst. A trigger opens a window; each further trigger
 * for a key not yet seen in this cycle pushes the window's end out to idle after it; the
 * window closes when idle passes with no new trigger, or at max after it opened, whichever
 * comes first (Karpenter's BATCH_IDLE_DURATION 1 s and BATCH_MAX_DURATION 10 s).
 *
 * struct kp_batcher is the whole decision as a clock-free state machine: every call that
 * depends on time takes now (microseconds on the monotonic clock, kp_mono_usec()), so tests
 * drive it with made-up times and never sleep. Its three states follow the one consumer (the
 * provisioner's loop) through Karpenter's Wait():
 *
 *   BUSY     the consumer is running a round (or has not started waiting). A trigger is
 *            remembered ("armed") and opens a window only when the consumer next waits, at
 *            that moment, as Karpenter's buffered trigger channel does.
 *   WAITING  the consumer waits for a first trigger: a trigger opens the window at its time.
 *   OPEN     a window is open: kp_batcher_due() says when it has closed; kp_batcher_close()
 *            takes it and returns to BUSY.
 *
 * Keys (a pod's UID, a Node's name) are remembered from the first trigger until the window's
 * close, and a repeated key neither opens nor extends anything (Karpenter's element set,
 * cleared at the end of each Wait). At most KP_BATCH_MAX_KEYS keys are remembered per cycle;
 * past that, or when remembering fails for memory, a key counts as new every time, which only
 * extends the window as far as max allows: a trigger is never lost.
 *
 * Threads: a struct kp_batcher has no lock; its owner serialises calls (one thread, or the
 * mutex of struct kp_batch_waiter below, which adds the blocking wait). */
#ifndef KP_CORE_PROVISIONING_BATCHER_H
#define KP_CORE_PROVISIONING_BATCHER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_map;

/* Karpenter's defaults; kp_batcher_init takes the caller's (options arrive with the provisioner). */
#define KP_BATCH_IDLE_DEFAULT_USEC (1000000ULL)
#define KP_BATCH_MAX_DEFAULT_USEC (10000000ULL)
/* How long the consumer waits for a first trigger before it goes round its loop once (Karpenter
 * waits 1 s, then returns to refresh its context); for kp_batch_waiter_wait(). */
#define KP_BATCH_FIRST_WAIT_USEC (1000000ULL)
/* Distinct keys remembered per cycle. */
#define KP_BATCH_MAX_KEYS 65536u

enum kp_batch_state {
    KP_BATCH_BUSY = 0,
    KP_BATCH_WAITING,
    KP_BATCH_OPEN,
};

/* What one trigger did. */
enum kp_batch_trigger {
    KP_BATCH_DUPLICATE = 0, /* key already seen this cycle: nothing changes */
    KP_BATCH_ARMED,         /* consumer busy: a window opens when it next waits */
    KP_BATCH_OPENED,        /* a window opened at now */
    KP_BATCH_EXTENDED,      /* the open window now ends idle after now (or at max) */
    KP_BATCH_LATE,          /* the open window had already closed: armed for the next one */
};

struct kp_batcher {
    uint64_t idle_usec, max_usec;
    enum kp_batch_state state;
    bool armed;           /* BUSY/WAITING only: a trigger came since the last close */
    uint64_t opened_usec; /* OPEN: when the window opened */
    uint64_t last_usec;   /* OPEN: the last trigger that counted */
    size_t n_triggers;    /* triggers that counted (not duplicates) since the last close */
    size_t n_late;        /* OPEN: KP_BATCH_LATE triggers, which count in the next window */
    struct kp_map *seen;  /* keys of this cycle; NULL until the first */
    bool seen_overflow;   /* a key was not remembered this cycle (KP_BATCH_MAX_KEYS, memory) */
};

/* Sets up an idle batcher in BUSY state. idle or max 0 are taken as Karpenter's defaults. */
void kp_batcher_init(struct kp_batcher *b, uint64_t idle_usec, uint64_t max_usec) KP_NONNULL(1);
/* Releases the remembered keys; b may be initialised again. NULL-safe. */
void kp_batcher_done(struct kp_batcher *b);

/* A trigger for key (NULL: a trigger with no key, never a duplicate) at now. Never fails. */
enum kp_batch_trigger kp_batcher_trigger(struct kp_batcher *b, const char *key, uint64_t now_usec)
    KP_NONNULL(1);
/* The consumer starts waiting at now: BUSY becomes OPEN (window opened at now) when a trigger
 * is armed, else WAITING. In OPEN or WAITING nothing changes. Returns the new state. */
enum kp_batch_state kp_batcher_wait_begin(struct kp_batcher *b, uint64_t now_usec) KP_NONNULL(1);
/* Whether the open window has closed at now (no new trigger for idle, or max since it opened).
 * False unless OPEN. */
bool kp_batcher_due(const struct kp_batcher *b, uint64_t now_usec) KP_NONNULL(1);
/* When the open window closes if nothing else arrives: min(last + idle, opened + max);
 * KP_USEC_INFINITY unless OPEN. */
uint64_t kp_batcher_deadline(const struct kp_batcher *b) KP_NONNULL(1);
/* The consumer takes the batch (or, from WAITING, gives up waiting): forgets this cycle's keys
 * and goes BUSY. A trigger that came after the deadline (KP_BATCH_LATE) stays armed. Returns
 * how many triggers counted in the window just closed (0 when none was open). */
size_t kp_batcher_close(struct kp_batcher *b) KP_NONNULL(1);

/* --- a blocking wrapper ------------------------------------------------------------------- */

/* A kp_batcher behind a mutex, with a condition variable on the monotonic clock, for a
 * provisioner thread that blocks until a batch is ready while informer callbacks trigger it.
 * The lock is never held across anything but the state machine. Any thread may trigger and
 * stop; one consumer thread waits. */
struct kp_batch_waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct kp_batcher b; /* under lock */
    bool stopped;        /* under lock */
};

/* 0 or -errno (the condition variable). Durations as kp_batcher_init. */
int kp_batch_waiter_init(struct kp_batch_waiter *w, uint64_t idle_usec, uint64_t max_usec)
    KP_NONNULL(1) KP_WUR;
/* NULL-safe; no thread may use w any more. */
void kp_batch_waiter_done(struct kp_batch_waiter *w);
/* kp_batcher_trigger at kp_mono_usec(), waking the consumer when it changed the window. */
enum kp_batch_trigger kp_batch_waiter_trigger(struct kp_batch_waiter *w, const char *key)
    KP_NONNULL(1);
/* Waits up to first_wait_usec for a first trigger, then until the window closes. True with a
 * batch taken (kp_batcher_close, its trigger count in *ret_n when non-NULL); false when no
 * trigger came in time or kp_batch_waiter_stop() was called. */
bool kp_batch_waiter_wait(struct kp_batch_waiter *w, uint64_t first_wait_usec, size_t *ret_n)
    KP_NONNULL(1);
/* Makes every present and future wait return false. */
void kp_batch_waiter_stop(struct kp_batch_waiter *w) KP_NONNULL(1);

#endif
