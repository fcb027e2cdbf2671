/* Tests for k8s/store.h: packing, references outliving replacement, index maintenance across
 * put/replace/delete, relist support, allocation failures leaving the store unchanged, and a
 * reader/writer race (also run under the tsan preset), walks (under the read lock, racing the
 * writer) and more indexes than the old fixed four. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/map.h"
#include "base/str.h"
#include "base/time.h"
#include "k8s/store.h"

struct widget {
    struct kp_entry e;
    const char *node; /* indexed */
    const char *zone; /* indexed, may be NULL */
    int gen;
};

static int widget_new_rv(const char *ns, const char *name, const char *node, const char *zone,
                         int gen, const char *rv, struct widget **ret)
{
    struct kp_pack p;
    struct widget *w;
    int r;

    kp_pack_init(&p, sizeof(*w));
    for (int pass = 0; pass < 2; pass++) {
        struct widget scratch = {0}, *v = &scratch;

        if (pass == 1) {
            r = kp_pack_alloc(&p, &w);
            if (r < 0)
                return r;
            v = w;
        }
        kp_pack_entry(&p, &v->e, ns, name, "uid-1", rv);
        v->node = kp_pack_str(&p, node);
        v->zone = kp_pack_str(&p, zone);
        v->gen = gen;
    }
    r = kp_pack_finish(&p, &w->e);
    if (r < 0) {
        kp_free(w);
        return r;
    }
    *ret = w;
    return 0;
}

static int widget_new(const char *ns, const char *name, const char *node, const char *zone, int gen,
                      struct widget **ret)
{
    return widget_new_rv(ns, name, node, zone, gen, "42", ret);
}

static void by_node(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const struct widget *w = (const struct widget *)e;

    if (w->node)
        emit(w->node, ctx);
}

static void by_zone(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const struct widget *w = (const struct widget *)e;

    if (w->zone) {
        emit(w->zone, ctx);
        emit("any-zone", ctx);
    }
}

static struct kp_store *new_store(void)
{
    struct kp_store *s = NULL;

    assert_int_equal(kp_store_new(&s), 0);
    assert_int_equal(kp_store_add_index(s, "node", by_node), 0);
    assert_int_equal(kp_store_add_index(s, "zone", by_zone), 0);
    assert_int_equal(kp_store_add_index(s, "node", by_node), -EEXIST);
    return s;
}

static void put(struct kp_store *s, const char *ns, const char *name, const char *node,
                const char *zone, int gen)
{
    struct widget *w = NULL;

    assert_int_equal(widget_new(ns, name, node, zone, gen, &w), 0);
    assert_int_equal(kp_store_put(s, &w->e, NULL), 0);
}

static size_t count_index(struct kp_store *s, const char *ix, const char *value)
{
    struct kp_store_list l = {0};
    size_t n;

    assert_int_equal(kp_store_by_index(s, ix, value, &l), 0);
    n = l.n;
    kp_store_list_free(&l);
    return n;
}

static void test_pack_and_keys(void **state)
{
    struct widget *w = NULL;

    (void)state;
    assert_int_equal(widget_new("default", "w1", "n1", NULL, 1, &w), 0);
    assert_string_equal(w->e.key, "default/w1");
    assert_string_equal(w->e.ns, "default");
    assert_string_equal(w->e.uid, "uid-1");
    assert_null(w->zone);
    assert_true(w->e.bytes >= sizeof(*w) + strlen("default/w1") + 1);
    kp_entry_unref(&w->e);
    assert_int_equal(widget_new(NULL, "node-a", NULL, NULL, 1, &w), 0);
    assert_string_equal(w->e.key, "node-a");
    assert_string_equal(w->e.ns, "");
    kp_entry_unref(&w->e);
}

/* The fingerprint ignores the resourceVersion and catches every projected change. */
static void test_content_hash(void **state)
{
    struct widget *a = NULL, *b = NULL, *c = NULL, *d = NULL;

    (void)state;
    assert_int_equal(widget_new_rv("ns", "w", "n1", "z", 1, "100", &a), 0);
    assert_int_equal(widget_new_rv("ns", "w", "n1", "z", 1, "123456789", &b), 0);
    assert_int_equal(widget_new_rv("ns", "w", "n2", "z", 1, "100", &c), 0);
    assert_int_equal(widget_new_rv("ns", "w", "n1", "z", 2, "100", &d), 0);
    assert_string_equal(b->e.rv, "123456789");
    assert_true(a->e.hash == b->e.hash);
    assert_true(a->e.hash != c->e.hash);
    assert_true(a->e.hash != d->e.hash);
    kp_entry_unref(&a->e);
    kp_entry_unref(&b->e);
    kp_entry_unref(&c->e);
    kp_entry_unref(&d->e);
}

static void test_put_get_replace_delete(void **state)
{
    struct kp_store *s = new_store();
    struct kp_entry *e = NULL, *old = NULL;

    (void)state;
    put(s, "ns", "a", "n1", "z1", 1);
    put(s, "ns", "b", "n1", NULL, 1);
    put(s, "ns", "c", "n2", "z1", 1);
    assert_int_equal(kp_store_len(s), 3);
    assert_int_equal(count_index(s, "node", "n1"), 2);
    assert_int_equal(count_index(s, "zone", "z1"), 2);
    assert_int_equal(count_index(s, "zone", "any-zone"), 2);
    assert_int_equal(count_index(s, "node", "nope"), 0);
    {
        struct kp_store_list l = {0};

        assert_int_equal(kp_store_by_index(s, "missing", "x", &l), -ENOENT);
    }

    /* A reader's reference outlives the replacement. */
    assert_int_equal(kp_store_get(s, "ns/a", &e), 0);
    assert_int_equal(((struct widget *)e)->gen, 1);
    put(s, "ns", "a", "n2", NULL, 2);
    assert_int_equal(((struct widget *)e)->gen, 1);
    assert_string_equal(((struct widget *)e)->node, "n1");
    kp_entry_unref(e);
    assert_int_equal(kp_store_get(s, "ns/a", &e), 0);
    assert_int_equal(((struct widget *)e)->gen, 2);
    kp_entry_unref(e);
    assert_int_equal(count_index(s, "node", "n1"), 1);
    assert_int_equal(count_index(s, "node", "n2"), 2);
    assert_int_equal(count_index(s, "zone", "z1"), 1);

    assert_int_equal(kp_store_delete(s, "ns/c", &old), 0);
    assert_string_equal(old->key, "ns/c");
    kp_entry_unref(old);
    assert_int_equal(kp_store_delete(s, "ns/c", NULL), -ENOENT);
    assert_int_equal(kp_store_get(s, "ns/c", &e), -ENOENT);
    assert_int_equal(count_index(s, "zone", "z1"), 0);
    assert_int_equal(count_index(s, "node", "n2"), 1);
    assert_int_equal(kp_store_len(s), 2);
    kp_store_free(s);
}

static void test_keys_not_in_and_bytes(void **state)
{
    struct kp_store *s = new_store();
    struct kp_map *keep = NULL;
    struct kp_strv gone = KP_STRV_INIT;
    struct kp_store_list all = {0};
    size_t bytes = 0;

    (void)state;
    put(s, "ns", "a", "n1", NULL, 1);
    put(s, "ns", "b", "n1", NULL, 1);
    put(s, "ns", "c", "n1", NULL, 1);
    assert_int_equal(kp_map_new(&keep), 0);
    assert_int_equal(kp_map_put(keep, "ns/b", (void *)1, NULL), 0);
    assert_int_equal(kp_store_keys_not_in(s, keep, &gone), 0);
    kp_strv_sort(&gone);
    assert_int_equal(gone.n, 2);
    assert_string_equal(gone.v[0], "ns/a");
    assert_string_equal(gone.v[1], "ns/c");
    kp_strv_done(&gone);
    kp_map_free(keep);

    assert_int_equal(kp_store_list(s, &all), 0);
    assert_int_equal(all.n, 3);
    for (size_t i = 0; i < all.n; i++)
        bytes += all.v[i]->bytes;
    assert_int_equal(kp_store_bytes(s), bytes);
    kp_store_list_free(&all);
    kp_store_free(s);
}

static void test_add_index_after_put(void **state)
{
    struct kp_store *s = new_store();

    (void)state;
    put(s, "ns", "a", "n1", NULL, 1);
    assert_int_equal(kp_store_add_index(s, "late", by_node), -EBUSY);
    kp_store_free(s);
}

/* Every allocation failure inside put leaves the store exactly as it was. */
static void test_put_failure_rolls_back(void **state)
{
    (void)state;
    for (uint64_t n = 1; n < 64; n++) {
        struct kp_store *s = new_store();
        struct widget *w = NULL;
        int r;

        put(s, "ns", "a", "n1", "z1", 1);
        assert_int_equal(widget_new("ns", "b", "n9", "z9", 1, &w), 0);
        kp_alloc_fail_at(n);
        r = kp_store_put(s, &w->e, NULL);
        kp_alloc_fail_at(0);
        if (r == 0) {
            assert_int_equal(count_index(s, "node", "n9"), 1);
            kp_store_free(s);
            return;
        }
        assert_int_equal(r, -ENOMEM);
        assert_int_equal(kp_store_len(s), 1);
        assert_int_equal(count_index(s, "node", "n9"), 0);
        assert_int_equal(count_index(s, "zone", "z9"), 0);
        assert_int_equal(count_index(s, "zone", "any-zone"), 1);
        kp_entry_unref(&w->e);
        kp_store_free(s);
    }
    fail_msg("put never succeeded");
}

/* The change notification: every put and delete moves the generation, a failed put does not, a
 * wait for a generation already gone returns at once, and a waiter wakes on another thread's
 * put well before its deadline. */
struct waiter {
    struct kp_store *s;
    uint64_t since;
    int r;
    uint64_t woke_after_usec;
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    uint64_t t0 = kp_mono_usec();

    w->r = kp_store_wait(w->s, w->since, kp_deadline_in(30 * KP_USEC_PER_SEC), NULL);
    w->woke_after_usec = kp_mono_usec() - t0;
    return NULL;
}

static void test_generation_and_wait(void **state)
{
    struct kp_store *s = new_store();
    struct waiter w = {.s = s};
    struct widget *bad = NULL;
    uint64_t g0, g, seen = 0;
    pthread_t th;

    (void)state;
    g0 = kp_store_generation(s);
    put(s, "ns", "a", "n1", "z1", 1);
    g = kp_store_generation(s);
    assert_true(g > g0);
    put(s, "ns", "a", "n1", "z1", 2); /* a replace is a change too */
    assert_true(kp_store_generation(s) > g);
    g = kp_store_generation(s);
    assert_int_equal(kp_store_delete(s, "ns/a", NULL), 0);
    assert_true(kp_store_generation(s) > g);
    g = kp_store_generation(s);
    assert_int_equal(kp_store_delete(s, "ns/a", NULL), -ENOENT);
    assert_int_equal(widget_new("ns", "b", "n9", "z9", 1, &bad), 0);
    kp_alloc_fail_at(1);
    assert_int_equal(kp_store_put(s, &bad->e, NULL), -ENOMEM);
    kp_alloc_fail_at(0);
    kp_entry_unref(&bad->e);
    assert_int_equal(kp_store_generation(s), g); /* nothing changed, nothing to wake for */

    /* Already moved on: no wait. Unchanged: the deadline. */
    assert_int_equal(kp_store_wait(s, g0, kp_deadline_in(30 * KP_USEC_PER_SEC), &seen), 0);
    assert_int_equal(seen, g);
    assert_int_equal(kp_store_wait(s, g, kp_deadline_in(20 * KP_USEC_PER_MSEC), &seen), -ETIMEDOUT);
    assert_int_equal(seen, g);

    /* Woken by another thread's put. */
    w.since = g;
    assert_int_equal(pthread_create(&th, NULL, wait_main, &w), 0);
    kp_sleep_usec(50 * KP_USEC_PER_MSEC);
    put(s, "ns", "c", "n1", "z1", 1);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(w.r, 0);
    assert_true(w.woke_after_usec < 10 * KP_USEC_PER_SEC);
    kp_store_free(s);
}

struct race {
    struct kp_store *s;
    atomic_int stop;
    atomic_int bad;
};

static void *reader(void *arg)
{
    struct race *rc = arg;

    while (!atomic_load(&rc->stop)) {
        struct kp_store_list l = {0};
        struct kp_entry *e = NULL;

        if (kp_store_get(rc->s, "ns/hot", &e) == 0) {
            const struct widget *w = (const struct widget *)e;

            /* An entry is immutable: its node always matches its generation's parity. */
            if (strcmp(w->node, (w->gen & 1) ? "odd" : "even") != 0)
                atomic_fetch_add(&rc->bad, 1);
            kp_entry_unref(e);
        }
        if (kp_store_by_index(rc->s, "node", "odd", &l) == 0)
            kp_store_list_free(&l);
    }
    return NULL;
}

static void test_reader_writer_race(void **state)
{
    static struct race rc;
    pthread_t t[2];

    (void)state;
    memset(&rc, 0, sizeof(rc));
    rc.s = new_store();
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, reader, &rc), 0);
    for (int gen = 0; gen < 5000; gen++) {
        put(rc.s, "ns", "hot", (gen & 1) ? "odd" : "even", NULL, gen);
        if (gen % 100 == 0)
            assert_int_equal(kp_store_delete(rc.s, "ns/hot", NULL), 0);
    }
    atomic_store(&rc.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&rc.bad), 0);
    kp_store_free(rc.s);
}

/* Ten indexes on one store (the old fixed limit was four), each maintained. */
static void by_gen_mod(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const struct widget *w = (const struct widget *)e;
    char v[16];

    (void)snprintf(v, sizeof(v), "%d", w->gen % 3);
    emit(v, ctx);
}

static void test_many_indexes(void **state)
{
    struct kp_store *s = NULL;
    char name[16];

    (void)state;
    assert_int_equal(kp_store_new(&s), 0);
    for (int i = 0; i < 10; i++) {
        (void)snprintf(name, sizeof(name), "ix%d", i);
        assert_int_equal(kp_store_add_index(s, name, i & 1 ? by_node : by_gen_mod), 0);
    }
    assert_int_equal(kp_store_add_index(s, "ix3", by_node), -EEXIST);
    assert_ptr_equal(kp_store_index_fn(s, "ix3"), by_node);
    assert_ptr_equal(kp_store_index_fn(s, "ix4"), by_gen_mod);
    assert_null(kp_store_index_fn(s, "ix10"));
    for (int g = 0; g < 6; g++) {
        char w[8];

        (void)snprintf(w, sizeof(w), "w%d", g);
        put(s, "ns", w, g < 4 ? "n1" : "n2", NULL, g);
    }
    for (int i = 0; i < 10; i++) {
        (void)snprintf(name, sizeof(name), "ix%d", i);
        if (i & 1) {
            assert_int_equal(count_index(s, name, "n1"), 4);
            assert_int_equal(count_index(s, name, "n2"), 2);
        } else {
            assert_int_equal(count_index(s, name, "0"), 2); /* gens 0 and 3 */
        }
    }
    assert_int_equal(kp_store_delete(s, "ns/w0", NULL), 0);
    assert_int_equal(count_index(s, "ix9", "n1"), 3);
    assert_int_equal(count_index(s, "ix8", "0"), 1);
    kp_store_free(s);
}

struct visit {
    size_t n;
    size_t stop_at; /* 0: never */
    char seen[8][16];
    struct kp_entry *kept;
};

static int visit_fn(void *ctx, struct kp_entry *e)
{
    struct visit *v = ctx;

    if (v->n < 8)
        (void)snprintf(v->seen[v->n], sizeof(v->seen[0]), "%s", e->key);
    v->n++;
    if (!v->kept)
        v->kept = kp_entry_ref(e); /* a reference outlives the walk */
    return v->stop_at && v->n == v->stop_at ? 7 : 0;
}

static bool seen(const struct visit *v, const char *key)
{
    for (size_t i = 0; i < v->n && i < 8; i++)
        if (strcmp(v->seen[i], key) == 0)
            return true;
    return false;
}

static void test_walk(void **state)
{
    struct kp_store *s = new_store();
    struct visit v = {0};
    size_t zoned;

    (void)state;
    assert_int_equal(kp_store_walk(s, visit_fn, &v), 0); /* empty: nothing visited */
    assert_int_equal(v.n, 0);
    put(s, "ns", "a", "n1", "z1", 1);
    put(s, "ns", "b", "n1", NULL, 1);
    put(s, "ns", "c", "n2", "z1", 1);

    assert_int_equal(kp_store_walk(s, visit_fn, &v), 0);
    assert_int_equal(v.n, 3);
    assert_true(seen(&v, "ns/a") && seen(&v, "ns/b") && seen(&v, "ns/c"));
    /* The reference taken in the walk keeps the entry after it is replaced and deleted. */
    assert_int_equal(kp_store_delete(s, v.kept->key, NULL), 0);
    assert_non_null(v.kept->key);
    zoned = strcmp(v.kept->key, "ns/b") == 0 ? 2 : 1; /* a and c have a zone, b has none */
    v.kept = kp_entry_unref(v.kept);

    v = (struct visit){0};
    assert_int_equal(kp_store_walk_index(s, "zone", "any-zone", visit_fn, &v), 0);
    assert_int_equal(v.n, zoned);
    kp_entry_unref(v.kept);
    v = (struct visit){0};
    assert_int_equal(kp_store_walk_index(s, "zone", "z-nowhere", visit_fn, &v), 0);
    assert_int_equal(v.n, 0);

    /* A visitor's non-zero answer stops the walk and is what the walk returns. */
    put(s, "ns", "a", "n1", "z1", 2);
    put(s, "ns", "b", "n1", NULL, 2);
    put(s, "ns", "c", "n2", "z1", 2);
    v = (struct visit){.stop_at = 2};
    assert_int_equal(kp_store_walk(s, visit_fn, &v), 7);
    assert_int_equal(v.n, 2);
    kp_entry_unref(v.kept);
    v = (struct visit){0};
    assert_int_equal(kp_store_walk_index(s, "node", "n1", visit_fn, &v), 0);
    assert_int_equal(v.n, 2);
    assert_true(seen(&v, "ns/a") && seen(&v, "ns/b"));
    kp_entry_unref(v.kept);
    v = (struct visit){0};
    assert_int_equal(kp_store_walk_index(s, "node", "nowhere", visit_fn, &v), 0);
    assert_int_equal(v.n, 0);
    assert_int_equal(kp_store_walk_index(s, "zone", "any-zone", visit_fn, &v), 0);
    assert_int_equal(v.n, 2);
    assert_true(seen(&v, "ns/a") && seen(&v, "ns/c"));
    kp_entry_unref(v.kept);
    v = (struct visit){0};
    assert_int_equal(kp_store_walk_index(s, "missing", "x", visit_fn, &v), -ENOENT);
    kp_store_free(s);
}

/* Walkers on two threads while the writer replaces and deletes: every visited entry is a
 * consistent, live one (ASan: no use after free; TSan: no race), and an index walk sees only
 * entries whose value matches. */
struct walk_race {
    struct kp_store *s;
    atomic_int stop;
    atomic_int bad;
    atomic_long visits;
};

static int race_visit(void *ctx, struct kp_entry *e)
{
    struct walk_race *rc = ctx;
    const struct widget *w = (const struct widget *)e;

    if (strcmp(w->node, (w->gen & 1) ? "odd" : "even") != 0)
        atomic_fetch_add(&rc->bad, 1);
    atomic_fetch_add(&rc->visits, 1);
    return 0;
}

static int race_visit_odd(void *ctx, struct kp_entry *e)
{
    struct walk_race *rc = ctx;

    if ((((const struct widget *)e)->gen & 1) == 0)
        atomic_fetch_add(&rc->bad, 1);
    return race_visit(ctx, e);
}

static void *walker(void *arg)
{
    struct walk_race *rc = arg;

    while (!atomic_load(&rc->stop)) {
        if (kp_store_walk(rc->s, race_visit, rc) != 0 ||
            kp_store_walk_index(rc->s, "node", "odd", race_visit_odd, rc) != 0)
            atomic_fetch_add(&rc->bad, 1);
    }
    return NULL;
}

static void test_walk_with_writer(void **state)
{
    static struct walk_race rc;
    pthread_t t[2];

    (void)state;
    memset(&rc, 0, sizeof(rc));
    rc.s = new_store();
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, walker, &rc), 0);
    for (int gen = 0; gen < 5000; gen++) {
        char name[8];

        (void)snprintf(name, sizeof(name), "w%d", gen % 7);
        put(rc.s, "ns", name, (gen & 1) ? "odd" : "even", NULL, gen);
        if (gen % 50 == 0)
            (void)kp_store_delete(rc.s, "ns/w3", NULL);
    }
    atomic_store(&rc.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&rc.bad), 0);
    assert_true(atomic_load(&rc.visits) > 0); /* the walkers did walk */
    kp_store_free(rc.s);
}

static int torture_store(void)
{
    struct kp_store *s = NULL;
    struct kp_store_list l = {0};
    struct widget *w = NULL;
    int r;

    r = kp_store_new(&s);
    if (r < 0)
        return r;
    if ((r = kp_store_add_index(s, "node", by_node)) < 0 ||
        (r = kp_store_add_index(s, "zone", by_zone)) < 0)
        goto out;
    for (int i = 0; i < 6; i++) {
        char name[8];

        snprintf(name, sizeof(name), "w%d", i);
        r = widget_new("ns", name, i & 1 ? "n1" : "n2", i & 2 ? "z" : NULL, i, &w);
        if (r < 0)
            goto out;
        r = kp_store_put(s, &w->e, NULL);
        if (r < 0) {
            kp_entry_unref(&w->e);
            goto out;
        }
    }
    r = kp_store_by_index(s, "node", "n1", &l);
    if (r < 0)
        goto out;
    r = l.n == 3 ? 0 : -EINVAL;
    kp_store_list_free(&l);
out:
    kp_store_free(s);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_and_keys),
        cmocka_unit_test(test_content_hash),
        cmocka_unit_test(test_put_get_replace_delete),
        cmocka_unit_test(test_keys_not_in_and_bytes),
        cmocka_unit_test(test_add_index_after_put),
        cmocka_unit_test(test_put_failure_rolls_back),
        cmocka_unit_test(test_reader_writer_race),
        cmocka_unit_test(test_generation_and_wait),
        cmocka_unit_test(test_many_indexes),
        cmocka_unit_test(test_walk),
        cmocka_unit_test(test_walk_with_writer),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_store),
    };

    return kp_test_main("store", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture), argc,
                        argv);
}
