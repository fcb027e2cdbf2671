/* Tests for core/provisioning/batcher.h: the batcher's state machine driven by scripts of
 * triggers, waits, due checks and closes at chosen times (one script per rule of batcher.c's
 * DESIGN block), the remembered-key ceiling, allocation failures (a trigger is never lost), and
 * the blocking wrapper's outcomes (no timing is asserted). */
#include "kp-test.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/time.h"
#include "core/provisioning/batcher.h"

#define MS 1000ULL
#define INF KP_USEC_INFINITY

enum step_op {
    END = 0,
    TRIGGER,  /* key at t: want trigger result */
    BEGIN,    /* wait_begin at t: want state */
    DUE,      /* due at t: want bool */
    DEADLINE, /* want deadline (t unused) */
    CLOSE,    /* want count */
};

struct step {
    enum step_op op;
    const char *key;
    uint64_t t;    /* microseconds */
    uint64_t want; /* enum value, bool, deadline or count */
};

struct script {
    const char *name;
    uint64_t idle, max; /* 0: defaults */
    struct step steps[24];
};

static const struct script scripts[] = {
    {"a trigger while busy arms; the window opens when the consumer waits",
     0,
     0,
     {{TRIGGER, "a", 100 * MS, KP_BATCH_ARMED},
      {DUE, NULL, 5000 * MS, false},
      {DEADLINE, NULL, 0, INF},
      {BEGIN, NULL, 3000 * MS, KP_BATCH_OPEN},
      {DEADLINE, NULL, 0, 4000 * MS},
      {DUE, NULL, 3999 * MS, false},
      {DUE, NULL, 4000 * MS, true},
      {CLOSE, NULL, 0, 1}}},
    {"waiting with nothing armed; a trigger opens the window at its own time",
     0,
     0,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {DUE, NULL, 50000 * MS, false},
      {TRIGGER, "a", 2000 * MS, KP_BATCH_OPENED},
      {DEADLINE, NULL, 0, 3000 * MS},
      {DUE, NULL, 2999 * MS, false},
      {DUE, NULL, 3000 * MS, true}, /* the idle deadline itself closes it */
      {CLOSE, NULL, 0, 1}}},
    {"a new key pushes the idle deadline to idle after it",
     0,
     0,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {TRIGGER, "a", 0, KP_BATCH_OPENED},
      {TRIGGER, "b", 500 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "c", 1200 * MS, KP_BATCH_EXTENDED},
      {DEADLINE, NULL, 0, 2200 * MS},
      {DUE, NULL, 2199 * MS, false},
      {DUE, NULL, 2200 * MS, true},
      {CLOSE, NULL, 0, 3}}},
    {"a repeated key neither extends nor counts",
     0,
     0,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {TRIGGER, "a", 0, KP_BATCH_OPENED},
      {TRIGGER, "a", 900 * MS, KP_BATCH_DUPLICATE},
      {DEADLINE, NULL, 0, 1000 * MS},
      {DUE, NULL, 1000 * MS, true},
      {CLOSE, NULL, 0, 1}}},
    {"triggers that keep coming are cut at max after the window opened",
     0,
     0,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {TRIGGER, "p0", 0, KP_BATCH_OPENED},
      {TRIGGER, "p1", 900 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p2", 1800 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p3", 2700 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p4", 3600 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p5", 4500 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p6", 5400 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p7", 6300 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p8", 7200 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p9", 8100 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p10", 9000 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "p11", 9900 * MS, KP_BATCH_EXTENDED},
      {DEADLINE, NULL, 0, 10000 * MS},
      {DUE, NULL, 9999 * MS, false},
      {DUE, NULL, 10000 * MS, true},
      {CLOSE, NULL, 0, 12}}},
    {"the durations given replace the defaults",
     200 * MS,
     700 * MS,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {TRIGGER, "a", 0, KP_BATCH_OPENED},
      {DEADLINE, NULL, 0, 200 * MS},
      {TRIGGER, "b", 150 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "c", 300 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "d", 450 * MS, KP_BATCH_EXTENDED},
      {TRIGGER, "e", 600 * MS, KP_BATCH_EXTENDED},
      {DEADLINE, NULL, 0, 700 * MS},
      {CLOSE, NULL, 0, 5}}},
    {"a trigger after the deadline goes to the next window",
     0,
     0,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {TRIGGER, "a", 0, KP_BATCH_OPENED},
      {TRIGGER, "b", 1000 * MS, KP_BATCH_LATE},
      {TRIGGER, "a", 1100 * MS, KP_BATCH_DUPLICATE}, /* still this window's key */
      {TRIGGER, "c", 1200 * MS, KP_BATCH_LATE},
      {CLOSE, NULL, 0, 1},
      {BEGIN, NULL, 1500 * MS, KP_BATCH_OPEN},
      {DEADLINE, NULL, 0, 2500 * MS},
      {TRIGGER, "b", 1600 * MS, KP_BATCH_EXTENDED}, /* a late key was not remembered */
      {CLOSE, NULL, 0, 3}}},                        /* b and c (late), then b again */
    {"a key seen while the consumer was busy is a duplicate in the window it opens",
     0,
     0,
     {{TRIGGER, "a", 0, KP_BATCH_ARMED},
      {TRIGGER, "a", 10 * MS, KP_BATCH_DUPLICATE},
      {BEGIN, NULL, 500 * MS, KP_BATCH_OPEN},
      {TRIGGER, "a", 1400 * MS, KP_BATCH_DUPLICATE},
      {DEADLINE, NULL, 0, 1500 * MS},
      {CLOSE, NULL, 0, 1}}},
    {"keys are forgotten when a window closes",
     0,
     0,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {TRIGGER, "a", 0, KP_BATCH_OPENED},
      {CLOSE, NULL, 0, 1},
      {TRIGGER, "a", 2000 * MS, KP_BATCH_ARMED},
      {BEGIN, NULL, 2500 * MS, KP_BATCH_OPEN},
      {CLOSE, NULL, 0, 1}}},
    {"a trigger without a key is never a duplicate",
     0,
     0,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {TRIGGER, NULL, 0, KP_BATCH_OPENED},
      {TRIGGER, NULL, 800 * MS, KP_BATCH_EXTENDED},
      {DEADLINE, NULL, 0, 1800 * MS},
      {CLOSE, NULL, 0, 2}}},
    {"giving up a wait that saw no trigger leaves the batcher busy",
     0,
     0,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {CLOSE, NULL, 0, 0},
      {TRIGGER, "a", 1000 * MS, KP_BATCH_ARMED},
      {BEGIN, NULL, 4000 * MS, KP_BATCH_OPEN},
      {DEADLINE, NULL, 0, 5000 * MS}}},
    {"waiting again while waiting or open changes nothing",
     0,
     0,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {BEGIN, NULL, 100 * MS, KP_BATCH_WAITING},
      {TRIGGER, "a", 200 * MS, KP_BATCH_OPENED},
      {BEGIN, NULL, 900 * MS, KP_BATCH_OPEN},
      {DEADLINE, NULL, 0, 1200 * MS}}},
    {"closing with no window open counts nothing and keeps an armed trigger",
     0,
     0,
     {{TRIGGER, "a", 0, KP_BATCH_ARMED},
      {CLOSE, NULL, 0, 0},
      {BEGIN, NULL, 100 * MS, KP_BATCH_OPEN},
      {CLOSE, NULL, 0, 1}}},
    {"deadlines saturate instead of wrapping",
     INF - 1,
     INF - 1,
     {{BEGIN, NULL, 0, KP_BATCH_WAITING},
      {TRIGGER, "a", 5, KP_BATCH_OPENED},
      {DEADLINE, NULL, 0, INF},
      {DUE, NULL, INF - 1, false}}},
};

static const char *state_name(uint64_t s)
{
    static const char *const names[] = {"BUSY", "WAITING", "OPEN"};

    return s < KP_ARRAY_SIZE(names) ? names[s] : "?";
}

static void test_scripts(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(scripts); i++) {
        const struct script *sc = &scripts[i];
        struct kp_batcher b;

        kp_batcher_init(&b, sc->idle, sc->max);
        for (size_t j = 0; j < KP_ARRAY_SIZE(sc->steps) && sc->steps[j].op != END; j++) {
            const struct step *st = &sc->steps[j];
            uint64_t got = 0;

            switch (st->op) {
            case TRIGGER:
                got = kp_batcher_trigger(&b, st->key, st->t);
                break;
            case BEGIN:
                got = kp_batcher_wait_begin(&b, st->t);
                break;
            case DUE:
                got = kp_batcher_due(&b, st->t);
                break;
            case DEADLINE:
                got = kp_batcher_deadline(&b);
                break;
            case CLOSE:
                got = kp_batcher_close(&b);
                break;
            case END:
                break;
            }
            if (got != st->want) {
                print_error("script \"%s\", step %zu: got %llu, want %llu (state %s)\n", sc->name,
                            j, (unsigned long long)got, (unsigned long long)st->want,
                            state_name(b.state));
                kp_batcher_done(&b);
                fail();
            }
        }
        kp_batcher_done(&b);
    }
}

static void test_defaults(void **state)
{
    struct kp_batcher b;

    (void)state;
    kp_batcher_init(&b, 0, 0);
    assert_int_equal(b.idle_usec, 1000 * MS);
    assert_int_equal(b.max_usec, 10000 * MS);
    assert_int_equal(b.state, KP_BATCH_BUSY);
    kp_batcher_done(&b);
    kp_batcher_done(NULL);
}

/* Past KP_BATCH_MAX_KEYS keys are not remembered: a repeat of one counts again (it extends
 * the window), while one remembered before the ceiling stays a duplicate. */
static void test_key_ceiling(void **state)
{
    struct kp_batcher b;
    char key[32];

    (void)state;
    kp_batcher_init(&b, 0, 0);
    assert_int_equal(kp_batcher_wait_begin(&b, 0), KP_BATCH_WAITING);
    for (unsigned i = 0; i < KP_BATCH_MAX_KEYS; i++) {
        assert_true(snprintf(key, sizeof(key), "uid-%u", i) > 0);
        assert_int_equal(kp_batcher_trigger(&b, key, 1),
                         i == 0 ? KP_BATCH_OPENED : KP_BATCH_EXTENDED);
    }
    assert_false(b.seen_overflow);
    assert_int_equal(kp_batcher_trigger(&b, "uid-over", 2), KP_BATCH_EXTENDED);
    assert_true(b.seen_overflow);
    assert_int_equal(kp_batcher_trigger(&b, "uid-over", 3), KP_BATCH_EXTENDED);
    assert_int_equal(kp_batcher_trigger(&b, "uid-7", 4), KP_BATCH_DUPLICATE);
    assert_int_equal(kp_batcher_close(&b), (size_t)KP_BATCH_MAX_KEYS + 2);
    assert_false(b.seen_overflow);
    kp_batcher_done(&b);
}

/* A random walk (fixed seed) of triggers over 8 keys, waits and closes at increasing times,
 * checked against the rules stated in batcher.h rather than against a second implementation:
 * a window closes no later than max after it opened and no earlier than idle after its last
 * counting trigger unless max came first; a duplicate is a key seen since the last close; a
 * trigger opens a window only while the consumer waits; close counts what counted. */
static void test_random_walk(void **state)
{
    const uint64_t idle = 300 * MS, max = 2000 * MS;
    uint64_t rng = 0x9e3779b97f4a7c15ULL, now = 0, last = 0, counted = 0, late = 0;
    bool seen[8] = {false}, late_seen[8] = {false};
    struct kp_batcher b;

    (void)state;
    kp_batcher_init(&b, idle, max);
    for (int step = 0; step < 20000; step++) {
        uint64_t r;

        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        r = rng % 100;
        now += (rng >> 8) % (200 * MS);
        if (r < 70) {
            unsigned k = (unsigned)((rng >> 40) % 8);
            char key[4] = {'k', (char)('0' + k), 0, 0};
            enum kp_batch_state before = b.state;
            bool was_due = kp_batcher_due(&b, now);
            enum kp_batch_trigger t = kp_batcher_trigger(&b, key, now);

            if (t == KP_BATCH_DUPLICATE) {
                assert_true(seen[k]);
                continue;
            }
            assert_false(seen[k] && !late_seen[k] && !was_due);
            if (was_due) {
                assert_int_equal(t, KP_BATCH_LATE);
                late++;
                late_seen[k] = true;
                continue;
            }
            seen[k] = true;
            counted++;
            assert_int_equal(t, before == KP_BATCH_BUSY      ? KP_BATCH_ARMED
                                : before == KP_BATCH_WAITING ? KP_BATCH_OPENED
                                                             : KP_BATCH_EXTENDED);
            if (t != KP_BATCH_ARMED)
                last = now;
        } else if (r < 85) {
            if (kp_batcher_wait_begin(&b, now) == KP_BATCH_OPEN && b.opened_usec == now)
                last = now;
        } else if (b.state == KP_BATCH_OPEN) {
            uint64_t d = kp_batcher_deadline(&b);

            assert_true(d <= b.opened_usec + max);
            assert_true(d == b.opened_usec + max || d == last + idle);
            assert_true(d >= last);
            if (!kp_batcher_due(&b, now))
                continue;
            assert_int_equal(kp_batcher_close(&b), counted);
            counted = late;
            late = 0;
            memset(seen, 0, sizeof(seen));
            memset(late_seen, 0, sizeof(late_seen));
        }
    }
    kp_batcher_done(&b);
}

/* Every allocation of a cycle may fail: each trigger still counts, nothing leaks. */
static int torture_triggers(void)
{
    struct kp_batcher b;
    size_t n;

    kp_batcher_init(&b, 0, 0);
    if (kp_batcher_trigger(&b, "a", 0) != KP_BATCH_ARMED ||
        kp_batcher_wait_begin(&b, 10) != KP_BATCH_OPEN)
        goto bad;
    if (kp_batcher_trigger(&b, "b", 20) != KP_BATCH_EXTENDED ||
        kp_batcher_trigger(&b, "c", 30) != KP_BATCH_EXTENDED)
        goto bad;
    /* "a" is a duplicate unless its copy failed; either answer is allowed, a crash is not. */
    (void)kp_batcher_trigger(&b, "a", 40);
    n = kp_batcher_close(&b);
    if (n < 3 || n > 4)
        goto bad;
    kp_batcher_done(&b);
    return 0;
bad:
    kp_batcher_done(&b);
    return 1; /* positive: the sweep reports a wrong answer, not a failed allocation */
}

/* --- the blocking wrapper ----------------------------------------------------------------- */

static void test_waiter_armed(void **state)
{
    struct kp_batch_waiter w;
    size_t n = 0;

    (void)state;
    assert_int_equal(kp_batch_waiter_init(&w, 1 * MS, 5 * MS), 0);
    assert_int_equal(kp_batch_waiter_trigger(&w, "a"), KP_BATCH_ARMED);
    assert_int_equal(kp_batch_waiter_trigger(&w, "b"), KP_BATCH_ARMED);
    assert_int_equal(kp_batch_waiter_trigger(&w, "a"), KP_BATCH_DUPLICATE);
    assert_true(kp_batch_waiter_wait(&w, KP_BATCH_FIRST_WAIT_USEC, &n));
    assert_int_equal(n, 2);
    assert_int_equal(w.b.state, KP_BATCH_BUSY);
    /* The keys went with the batch. */
    assert_int_equal(kp_batch_waiter_trigger(&w, "a"), KP_BATCH_ARMED);
    kp_batch_waiter_done(&w);
    kp_batch_waiter_done(NULL);
}

static void test_waiter_nothing(void **state)
{
    struct kp_batch_waiter w;
    size_t n = 99;

    (void)state;
    assert_int_equal(kp_batch_waiter_init(&w, 1 * MS, 5 * MS), 0);
    assert_false(kp_batch_waiter_wait(&w, 1 * MS, &n));
    assert_int_equal(n, 99); /* untouched */
    assert_int_equal(w.b.state, KP_BATCH_BUSY);
    kp_batch_waiter_done(&w);
}

struct trigger_thread {
    struct kp_batch_waiter *w;
    int n;
};

static void *trigger_main(void *arg)
{
    struct trigger_thread *t = arg;
    char key[16];

    for (int i = 0; i < t->n; i++) {
        assert_true(snprintf(key, sizeof(key), "k%d", i) > 0);
        (void)kp_batch_waiter_trigger(t->w, key); /* outcome depends on timing */
        kp_sleep_usec(200);
    }
    return NULL;
}

/* Triggers from another thread wake a consumer that waits for the first one. */
static void test_waiter_wakes(void **state)
{
    struct kp_batch_waiter w;
    struct trigger_thread t = {&w, 5};
    pthread_t th;
    size_t n = 0;

    (void)state;
    assert_int_equal(kp_batch_waiter_init(&w, 20 * MS, 100 * MS), 0);
    assert_int_equal(pthread_create(&th, NULL, trigger_main, &t), 0);
    assert_true(kp_batch_waiter_wait(&w, 60 * KP_USEC_PER_SEC, &n));
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(n >= 1 && n <= 5);
    kp_batch_waiter_done(&w);
}

static void *stop_main(void *arg)
{
    kp_sleep_usec(2 * MS);
    kp_batch_waiter_stop(arg);
    return NULL;
}

/* Stop ends a wait, whether it waits for a first trigger or on an open window, and every later
 * one. */
static void test_waiter_stop(void **state)
{
    struct kp_batch_waiter w;
    pthread_t th;

    (void)state;
    assert_int_equal(kp_batch_waiter_init(&w, 3600 * KP_USEC_PER_SEC, 3600 * KP_USEC_PER_SEC), 0);
    assert_int_equal(kp_batch_waiter_trigger(&w, "a"), KP_BATCH_ARMED);
    assert_int_equal(pthread_create(&th, NULL, stop_main, &w), 0);
    assert_false(kp_batch_waiter_wait(&w, 3600 * KP_USEC_PER_SEC, NULL)); /* open window */
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(kp_batch_waiter_trigger(&w, "b"), KP_BATCH_ARMED);
    assert_false(kp_batch_waiter_wait(&w, 3600 * KP_USEC_PER_SEC, NULL));
    kp_batch_waiter_done(&w);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scripts),      cmocka_unit_test(test_random_walk),
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_key_ceiling),
        cmocka_unit_test(test_waiter_armed), cmocka_unit_test(test_waiter_nothing),
        cmocka_unit_test(test_waiter_wakes), cmocka_unit_test(test_waiter_stop),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_triggers),
    };

    return kp_test_main("batcher", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
