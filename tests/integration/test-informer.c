/* Integration: an informer under churn against the real kube-apiserver. Several writer threads
 * create, relabel and delete pods while the informer lists and watches; when the writers stop,
 * the informer's store must converge to exactly the server's state (same keys, same
 * resourceVersions), its handlers must have seen every key that still exists, and indexes must
 * agree with a fresh list. A second informer started afterwards must sync from a plain list.
 *
 * Big pods: BIG_PODS pods carrying a BIG_ANNOTATION-byte annotation make one default page (500
 * items) of about 37 MB, over the client's 32 MiB body ceiling (KP_MAX_HTTP_BODY). An informer
 * with the default page size must still sync, by halving its page size; the test prints the
 * page size reached and the list time. The sizes stay inside the lab's own limits: the API
 * server takes 256 KiB of annotations per object and etcd (default --max-request-bytes) 1.5 MiB
 * per object. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kp-lab.h"
#include "kp-test.h"

#include "base/alloc.h"
#include "base/map.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "api/obj-pod.h"
#include "k8s/status.h"

#define WRITERS 3
#define OPS_PER_WRITER 120
#define KEYS_PER_WRITER 25
#define BIG_PODS 150
#define BIG_ANNOTATION (250 * 1000)

static struct kp_lab lab;
static char ns[64];

struct seen {
    pthread_mutex_t lock;
    struct kp_map *added; /* keys ever added */
    atomic_int adds, updates, deletes;
};

static void on_add(void *ctx, const struct kp_entry *e)
{
    struct seen *s = ctx;

    pthread_mutex_lock(&s->lock);
    if (kp_map_put(s->added, e->key, (void *)1, NULL) < 0)
        abort();
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add(&s->adds, 1);
}

static void on_update(void *ctx, const struct kp_entry *o, const struct kp_entry *n)
{
    struct seen *s = ctx;

    (void)o;
    (void)n;
    atomic_fetch_add(&s->updates, 1);
}

static void on_delete(void *ctx, const struct kp_entry *e)
{
    struct seen *s = ctx;

    (void)e;
    atomic_fetch_add(&s->deletes, 1);
}

static void by_label_group(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const char *g = kp_labels_get(&kp_pod_view(e)->meta.labels, "group");

    if (g)
        emit(g, ctx);
}

static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    struct kp_client *c = kp_lab_admin_client(&lab);
    uint64_t rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);

    for (int op = 0; op < OPS_PER_WRITER; op++) {
        struct kp_error e = KP_ERROR_INIT;
        char name[64];
        json_t *body;
        int r, k;

        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        k = (int)(rng % KEYS_PER_WRITER);
        snprintf(name, sizeof(name), "w%d-p%d", id, k);
        switch ((rng >> 20) % 3) {
        case 0:
            body = kp_lab_json("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
                               "\"%s\",\"labels\":{\"group\":\"g%d\"}},\"spec\":{\"containers\":"
                               "[{\"name\":\"c\",\"image\":\"pause\",\"resources\":{\"requests\":"
                               "{\"cpu\":\"%dm\"}}}]}}",
                               name, k % 3, 10 + k);
            r = kp_client_create(c, &KP_RES_POD, ns, body, NULL, &e);
            kp_json_unref(body);
            if (r < 0 && r != -EEXIST)
                kp_lab_check(r, &e, "create pod");
            break;
        case 1:
            body = kp_lab_json("{\"metadata\":{\"labels\":{\"group\":\"g%d\",\"op\":\"o%d\"}}}",
                               (int)((rng >> 40) % 3), op);
            r = kp_client_patch(c, &KP_RES_POD, ns, name, NULL, KP_PATCH_MERGE, body, NULL, &e);
            kp_json_unref(body);
            if (r < 0 && r != -ENOENT)
                kp_lab_check(r, &e, "patch pod");
            break;
        default: {
            struct kp_delete_opts d = {.has_grace_period = true, .grace_period_seconds = 0};

            r = kp_client_delete(c, &KP_RES_POD, ns, name, &d, &e);
            if (r < 0 && r != -ENOENT)
                kp_lab_check(r, &e, "delete pod");
            break;
        }
        }
        kp_error_done(&e);
    }
    kp_client_free(c);
    return NULL;
}

struct server_state {
    struct kp_map *rv; /* key -> rv string (owned) */
};

static int collect(const struct kp_list_page *pg, void *userdata)
{
    struct server_state *st = userdata;

    for (size_t i = 0; i < kp_json_array_size(pg->items); i++) {
        const json_t *o = kp_json_array_at(pg->items, i);
        const char *name, *rv;
        char key[256];

        if (kp_json_path_str(o, "metadata.name", &name) < 0 ||
            kp_json_path_str(o, "metadata.resourceVersion", &rv) < 0)
            return -EINVAL;
        snprintf(key, sizeof(key), "%s/%s", ns, name);
        if (kp_map_put(st->rv, key, kp_strdup(rv), NULL) < 0)
            return -ENOMEM;
    }
    return 0;
}

static void free_state(struct server_state *st)
{
    size_t it = 0;
    void *v;

    while (kp_map_next(st->rv, &it, NULL, &v))
        kp_free(v);
    kp_map_free(st->rv);
}

/* True when the store holds exactly the server's pods at the server's versions. */
static bool store_matches(struct kp_client *c, struct kp_store *store, size_t *ret_n)
{
    struct server_state st = {0};
    struct kp_store_list all = {0};
    bool same;

    assert_int_equal(kp_map_new(&st.rv), 0);
    assert_int_equal(kp_client_list(c, &KP_RES_POD, ns, NULL, collect, &st, NULL, NULL), 0);
    assert_int_equal(kp_store_list(store, &all), 0);
    same = all.n == kp_map_size(st.rv);
    for (size_t i = 0; same && i < all.n; i++) {
        const char *rv = kp_map_get(st.rv, all.v[i]->key);

        same = rv && strcmp(rv, all.v[i]->rv) == 0;
    }
    *ret_n = all.n;
    kp_store_list_free(&all);
    free_state(&st);
    return same;
}

static void test_informer_churn(void **state)
{
    struct kp_client *c = kp_lab_admin_client(&lab);
    struct kp_informer_opts io = {
        .res = &KP_RES_POD, .project = kp_pod_project, .ns = ns, .page_size = 17};
    static struct seen seen;
    struct kp_informer_handler h = {on_add, on_update, on_delete, &seen};
    struct kp_informer *inf = NULL, *late = NULL;
    struct kp_informer_stats st;
    pthread_t w[WRITERS];
    size_t n = 0;
    bool ok = false;

    (void)state;
    pthread_mutex_init(&seen.lock, NULL);
    assert_int_equal(kp_map_new(&seen.added), 0);
    assert_int_equal(kp_informer_new(c, &io, &inf), 0);
    assert_int_equal(kp_informer_add_index(inf, "group", by_label_group), 0);
    assert_int_equal(kp_informer_add_handler(inf, &h), 0);
    assert_int_equal(kp_informer_start(inf), 0);
    assert_int_equal(kp_informer_wait_synced(inf, 30 * KP_USEC_PER_SEC), 0);

    for (int i = 0; i < WRITERS; i++)
        assert_int_equal(pthread_create(&w[i], NULL, writer, (void *)(intptr_t)i), 0);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(w[i], NULL);

    /* Converge: the watch delivers the last events within moments. */
    for (int i = 0; i < 300 && !ok; i++) {
        ok = store_matches(c, kp_informer_store(inf), &n);
        if (!ok)
            kp_sleep_usec(100 * 1000);
    }
    assert_true(ok);
    kp_informer_get_stats(inf, &st);
    printf("# informer: %zu pods at the end, %llu events, %llu lists, %llu unchanged updates, "
           "adds=%d updates=%d deletes=%d\n",
           n, (unsigned long long)st.events, (unsigned long long)st.lists,
           (unsigned long long)st.skipped, atomic_load(&seen.adds), atomic_load(&seen.updates),
           atomic_load(&seen.deletes));
    assert_int_equal(st.bad_objects, 0);
    assert_true(st.events > 0);

    /* Every surviving key was announced by on_add at least once. */
    {
        struct kp_store_list all = {0};

        assert_int_equal(kp_store_list(kp_informer_store(inf), &all), 0);
        for (size_t i = 0; i < all.n; i++)
            assert_true(kp_map_contains(seen.added, all.v[i]->key));
        kp_store_list_free(&all);
    }
    /* The index agrees with the labels of the cached pods. */
    for (int g = 0; g < 3; g++) {
        struct kp_store_list l = {0};
        char v[8];

        snprintf(v, sizeof(v), "g%d", g);
        assert_int_equal(kp_store_by_index(kp_informer_store(inf), "group", v, &l), 0);
        for (size_t i = 0; i < l.n; i++)
            assert_string_equal(kp_labels_get(&kp_pod_view(l.v[i])->meta.labels, "group"), v);
        kp_store_list_free(&l);
    }

    /* Stopped and started again (a replica that leads again), the informer keeps its store and
     * announces every entry once more, unchanged ones as updates: controllers that dropped work
     * when they stopped see each object again. */
    {
        int before = atomic_load(&seen.adds) + atomic_load(&seen.updates);
        size_t len;

        kp_informer_stop(inf);
        len = kp_store_len(kp_informer_store(inf));
        assert_int_equal(kp_informer_start(inf), 0);
        assert_int_equal(kp_informer_wait_synced(inf, 30 * KP_USEC_PER_SEC), 0);
        printf("# restart: %zu entries kept, %d announced again\n", len,
               atomic_load(&seen.adds) + atomic_load(&seen.updates) - before);
        assert_true(atomic_load(&seen.adds) + atomic_load(&seen.updates) - before >= (int)len);
    }

    /* A fresh informer syncs to the same state from a plain list. */
    assert_int_equal(kp_informer_new(c, &io, &late), 0);
    assert_int_equal(kp_informer_start(late), 0);
    assert_int_equal(kp_informer_wait_synced(late, 30 * KP_USEC_PER_SEC), 0);
    assert_true(store_matches(c, kp_informer_store(late), &n));

    kp_informer_free(late);
    kp_informer_free(inf);
    kp_map_free(seen.added);
    pthread_mutex_destroy(&seen.lock);
    kp_client_free(c);
}

/* Creates BIG_PODS pods whose annotations weigh BIG_ANNOTATION bytes each, in ns. */
static void create_big_pods(struct kp_client *c)
{
    char *fill = kp_malloc(BIG_ANNOTATION + 1);

    assert_non_null(fill);
    memset(fill, 'x', BIG_ANNOTATION);
    fill[BIG_ANNOTATION] = '\0';
    for (int i = 0; i < BIG_PODS; i++) {
        struct kp_error e = KP_ERROR_INIT;
        json_t *body;
        int r;

        body = kp_lab_json("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
                           "\"big-%d\",\"annotations\":{\"kpssh.dev/filler\":\"%s\"}},"
                           "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"pause\"}]}}",
                           i, fill);
        r = kp_client_create(c, &KP_RES_POD, ns, body, NULL, &e);
        kp_json_unref(body);
        kp_lab_check(r, &e, "create big pod");
        kp_error_done(&e);
    }
    kp_free(fill);
}

/* One default page of these pods is over the body ceiling: the informer must sync anyway. */
static void test_informer_big_pods(void **state)
{
    struct kp_client *c = kp_lab_admin_client(&lab);
    struct kp_informer_opts io = {.res = &KP_RES_POD, .project = kp_pod_project, .ns = ns};
    struct kp_informer *inf = NULL;
    struct kp_informer_stats st;
    uint64_t t0;

    (void)state;
    create_big_pods(c);
    assert_int_equal(kp_informer_new(c, &io, &inf), 0);
    t0 = kp_mono_usec();
    assert_int_equal(kp_informer_start(inf), 0);
    /* The controller's own start-up limit (cmd/controller/ssh.c). */
    assert_int_equal(kp_informer_wait_synced(inf, 120 * KP_USEC_PER_SEC), 0);
    kp_informer_get_stats(inf, &st);
    printf("# big pods: %d pods of %d annotation bytes; page size %u (from %u), list %.1f s, "
           "synced after %.1f s, %llu lists\n",
           BIG_PODS, BIG_ANNOTATION, (unsigned)st.page_size, (unsigned)KP_CLIENT_LIST_LIMIT,
           (double)st.list_usec / 1e6, (double)(kp_mono_usec() - t0) / 1e6,
           (unsigned long long)st.lists);
    assert_int_equal(kp_store_len(kp_informer_store(inf)), BIG_PODS);
    assert_true(st.page_size < KP_CLIENT_LIST_LIMIT);
    assert_true(st.page_size * (uint64_t)BIG_ANNOTATION < KP_MAX_HTTP_BODY);
    assert_true(kp_informer_synced(inf));
    kp_informer_free(inf);
    kp_client_free(c);
}

static int setup(void **state)
{
    (void)state;
    kp_lab_setup_namespace(&lab, "kp-informer", ns, sizeof(ns));
    return 0;
}

/* Its own namespace prefix: the churn test's namespace may still be terminating. */
static int setup_big(void **state)
{
    (void)state;
    kp_lab_setup_namespace(&lab, "kp-informer-big", ns, sizeof(ns));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kp_lab_teardown_namespace(&lab, ns);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_informer_churn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_informer_big_pods, setup_big, teardown),
    };

    return kp_test_main("integration-informer", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
