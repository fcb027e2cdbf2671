/* core/provisioning/batcher.c: the provisioner's trigger batcher (contract in batcher.h).
 *
 * DESIGN
 *
 * What: Karpenter's Batcher (pkg/controllers/provisioning/batcher.go) as a state machine over
 * explicit times, plus a small mutex-and-condvar wrapper that turns it into a blocking wait.
 *
 * Why this way: Karpenter's batcher is a buffered channel of size one (the "armed" trigger), a
 * set of elements seen since the last Wait ended, and two timers (idle, reset on each trigger;
 * max, from the start of the window). Each of those maps onto a field here: armed, seen, and the
 * two instants last_usec and opened_usec whose sums with idle and max are the deadlines. With
 * the clock taken out, every rule is a branch a unit test can reach with chosen times, and the
 * blocking wrapper only sleeps until kp_batcher_deadline() and asks kp_batcher_due() again.
 *
 * Karpenter details kept:
 *  - a window opens when the consumer receives the first trigger: a trigger that came while the
 *    consumer was busy with a round opens the next window only when the consumer next waits;
 *  - a key seen once in a cycle (from the last close to the next) is ignored after, even if it
 *    came while the consumer was busy;
 *  - a trigger for a new key resets the idle deadline; the max deadline never moves;
 *  - the window closes at whichever deadline comes first (a tie closes it too).
 * A trigger after the window's deadline but before the consumer took the batch goes to the next
 * window (Karpenter: Wait has returned, the element set is about to be cleared, the channel is
 * left armed).
 *
 * Threads: struct kp_batcher is its owner's; struct kp_batch_waiter takes its lock around each
 * call into it and never holds it while the consumer runs a round. */
#include "core/provisioning/batcher.h"

#include <errno.h>
#include <string.h>

#include "base/map.h"
#include "base/time.h"

void kp_batcher_init(struct kp_batcher *b, uint64_t idle_usec, uint64_t max_usec)
{
    memset(b, 0, sizeof(*b));
    b->idle_usec = idle_usec ? idle_usec : KP_BATCH_IDLE_DEFAULT_USEC;
    b->max_usec = max_usec ? max_usec : KP_BATCH_MAX_DEFAULT_USEC;
    b->state = KP_BATCH_BUSY;
}

void kp_batcher_done(struct kp_batcher *b)
{
    if (!b)
        return;
    b->seen = kp_map_free(b->seen);
}

static uint64_t kp_sat_add(uint64_t a, uint64_t b)
{
    uint64_t r;

    return kp_add_overflow(a, b, &r) ? KP_USEC_INFINITY : r;
}

uint64_t kp_batcher_deadline(const struct kp_batcher *b)
{
    if (b->state != KP_BATCH_OPEN)
        return KP_USEC_INFINITY;
    return KP_MIN(kp_sat_add(b->last_usec, b->idle_usec), kp_sat_add(b->opened_usec, b->max_usec));
}

bool kp_batcher_due(const struct kp_batcher *b, uint64_t now_usec)
{
    return b->state == KP_BATCH_OPEN && now_usec >= kp_batcher_deadline(b);
}

/* Whether key was seen this cycle; remembers it when not (best effort, batcher.h). */
static bool kp_batcher_seen(struct kp_batcher *b, const char *key)
{
    if (!key)
        return false;
    if (b->seen && kp_map_contains(b->seen, key))
        return true;
    if ((b->seen && kp_map_size(b->seen) >= KP_BATCH_MAX_KEYS) ||
        (!b->seen && kp_map_new(&b->seen) < 0) || kp_map_put(b->seen, key, b, NULL) < 0) {
        b->seen_overflow = true; /* not remembered: a repeat will count again, nothing is lost */
        return false;
    }
    return false;
}

enum kp_batch_trigger kp_batcher_trigger(struct kp_batcher *b, const char *key, uint64_t now_usec)
{
    if (b->state == KP_BATCH_OPEN && kp_batcher_due(b, now_usec)) {
        /* Past the deadline the batch is the consumer's already; the key would be forgotten
         * at close, so it is not remembered, only armed. A key of this window stays a
         * duplicate, as in Karpenter, where the element check comes first. */
        if (key && b->seen && kp_map_contains(b->seen, key))
            return KP_BATCH_DUPLICATE;
        b->armed = true;
        b->n_late++;
        return KP_BATCH_LATE;
    }
    if (kp_batcher_seen(b, key))
        return KP_BATCH_DUPLICATE;
    b->n_triggers++;
    switch (b->state) {
    case KP_BATCH_OPEN:
        b->last_usec = now_usec;
        return KP_BATCH_EXTENDED;
    case KP_BATCH_WAITING:
        b->state = KP_BATCH_OPEN;
        b->opened_usec = now_usec;
        b->last_usec = now_usec;
        return KP_BATCH_OPENED;
    case KP_BATCH_BUSY:
    default:
        b->armed = true;
        return KP_BATCH_ARMED;
    }
}

enum kp_batch_state kp_batcher_wait_begin(struct kp_batcher *b, uint64_t now_usec)
{
    if (b->state != KP_BATCH_BUSY)
        return b->state;
    if (b->armed) {
        b->armed = false;
        b->state = KP_BATCH_OPEN;
        b->opened_usec = now_usec;
        b->last_usec = now_usec;
    } else {
        b->state = KP_BATCH_WAITING;
    }
    return b->state;
}

size_t kp_batcher_close(struct kp_batcher *b)
{
    size_t n = b->state == KP_BATCH_OPEN ? b->n_triggers : 0;

    if (b->state == KP_BATCH_OPEN) {
        /* Only late triggers can have armed an open window; they count in the next one. */
        b->n_triggers = b->n_late;
        b->n_late = 0;
    }
    b->seen = kp_map_free(b->seen);
    b->seen_overflow = false;
    b->state = KP_BATCH_BUSY;
    b->opened_usec = 0;
    b->last_usec = 0;
    return n;
}

/* --- the blocking wrapper ----------------------------------------------------------------- */

int kp_batch_waiter_init(struct kp_batch_waiter *w, uint64_t idle_usec, uint64_t max_usec)
{
    int r;

    memset(w, 0, sizeof(*w));
    if ((r = pthread_mutex_init(&w->lock, NULL)) != 0)
        return -r;
    if ((r = kp_cond_init_monotonic(&w->cond)) < 0) {
        pthread_mutex_destroy(&w->lock);
        return r;
    }
    kp_batcher_init(&w->b, idle_usec, max_usec);
    return 0;
}

void kp_batch_waiter_done(struct kp_batch_waiter *w)
{
    if (!w)
        return;
    kp_batcher_done(&w->b);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
}

enum kp_batch_trigger kp_batch_waiter_trigger(struct kp_batch_waiter *w, const char *key)
{
    enum kp_batch_trigger t;

    pthread_mutex_lock(&w->lock);
    t = kp_batcher_trigger(&w->b, key, kp_mono_usec());
    pthread_mutex_unlock(&w->lock);
    /* Only an opened window changes what the consumer waits for: an extension moves the
     * deadline later, which it finds when it wakes at the earlier one. */
    if (t == KP_BATCH_OPENED)
        pthread_cond_broadcast(&w->cond);
    return t;
}

bool kp_batch_waiter_wait(struct kp_batch_waiter *w, uint64_t first_wait_usec, size_t *ret_n)
{
    struct kp_deadline first = kp_deadline_in(first_wait_usec);
    bool ok = false;
    size_t n;

    pthread_mutex_lock(&w->lock);
    (void)kp_batcher_wait_begin(&w->b, kp_mono_usec()); /* the new state is read below */
    while (!w->stopped && w->b.state == KP_BATCH_WAITING) {
        if (kp_cond_wait_deadline(&w->cond, &w->lock, first) == -ETIMEDOUT &&
            w->b.state == KP_BATCH_WAITING)
            break;
    }
    while (!w->stopped && w->b.state == KP_BATCH_OPEN && !kp_batcher_due(&w->b, kp_mono_usec())) {
        struct kp_deadline d = {.at = kp_batcher_deadline(&w->b)};

        (void)kp_cond_wait_deadline(&w->cond, &w->lock, d); /* the loop re-reads the clock */
    }
    if (!w->stopped && w->b.state == KP_BATCH_OPEN)
        ok = true;
    n = kp_batcher_close(&w->b); /* a wait that saw no trigger also ends here */
    pthread_mutex_unlock(&w->lock);
    if (ok && ret_n)
        *ret_n = n;
    return ok;
}

void kp_batch_waiter_stop(struct kp_batch_waiter *w)
{
    pthread_mutex_lock(&w->lock);
    w->stopped = true;
    pthread_mutex_unlock(&w->lock);
    pthread_cond_broadcast(&w->cond);
}
