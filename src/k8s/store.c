/* DESIGN: informer cache store (see store.h for the contract).
 *
 * Why refcounted immutable entries: workers read while the informer thread writes; handing out
 * references to entries that never change means no reader ever sees a half-updated object and
 * no lock is held while a reconciler works. Why one allocation per entry (kp_pack): the cache
 * is the controller's main memory cost, and a projection with its strings in one block costs one
 * malloc header and no pointers to chase (STYLE.md section 3).
 *
 * Indexes map a value to a bucket of borrowed entry pointers; the primary map holds the one
 * reference the store owns. A put inserts the new entry into every index first, then into the
 * primary map, and only then takes the old entry out of the indexes, so an allocation failure at
 * any step can be rolled back without touching what readers see.
 *
 * Walks (kp_store_walk) hand the visitor borrowed pointers while the read lock is held: no array
 * is allocated, which is what a fan-out from an informer handler (enqueue the key of every
 * match) wants. The price is the visitor rule in store.h: it runs under the lock, so it must be
 * short and must not touch this store again. kp_store_list copies references once into one
 * array, for callers that need the entries after the lock is gone (a reconcile that does I/O).
 *
 * Threads: one writer (the informer thread) and any number of readers under a rwlock. */
#include "k8s/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/alloc.h"
#include "base/map.h"
#include "base/str.h"
#include "base/time.h"

struct kp_bucket {
    struct kp_entry **v;
    size_t n, cap;
};

struct kp_index {
    char *name;
    kp_index_fn fn;
    struct kp_map *values; /* value -> struct kp_bucket */
};

struct kp_store {
    pthread_rwlock_t lock;
    struct kp_map *entries; /* key -> struct kp_entry (one reference) */
    struct kp_index *idx;   /* grown by kp_store_add_index, start-up only */
    size_t nidx, idx_cap;
    size_t bytes;
    /* Change notification (kp_store_wait): gen counts puts and deletes under gen_lock. */
    pthread_mutex_t gen_lock;
    pthread_cond_t gen_cond;
    uint64_t gen;
};

struct kp_entry *kp_entry_ref(struct kp_entry *e)
{
    if (e)
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    return e;
}

struct kp_entry *kp_entry_unref(struct kp_entry *e)
{
    if (!e)
        return NULL;
    if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) {
        if (e->destroy)
            e->destroy(e);
        else
            kp_free(e);
    }
    return NULL;
}

int kp_store_new(struct kp_store **ret)
{
    struct kp_store *s;
    int r;

    s = kp_calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    r = kp_map_new(&s->entries);
    if (r < 0) {
        kp_free(s);
        return r;
    }
    if ((r = kp_cond_init_monotonic(&s->gen_cond)) < 0) {
        kp_map_free(s->entries);
        kp_free(s);
        return r;
    }
    pthread_rwlock_init(&s->lock, NULL);
    pthread_mutex_init(&s->gen_lock, NULL);
    *ret = s;
    return 0;
}

/* After a change is visible to readers: wake whoever waits for one. */
static void kp_store_changed(struct kp_store *s)
{
    pthread_mutex_lock(&s->gen_lock);
    s->gen++;
    pthread_cond_broadcast(&s->gen_cond);
    pthread_mutex_unlock(&s->gen_lock);
}

uint64_t kp_store_generation(struct kp_store *s)
{
    uint64_t g;

    pthread_mutex_lock(&s->gen_lock);
    g = s->gen;
    pthread_mutex_unlock(&s->gen_lock);
    return g;
}

int kp_store_wait(struct kp_store *s, uint64_t since, struct kp_deadline deadline,
                  uint64_t *ret_gen)
{
    int r = 0;

    pthread_mutex_lock(&s->gen_lock);
    while (s->gen == since) {
        if (kp_cond_wait_deadline(&s->gen_cond, &s->gen_lock, deadline) == -ETIMEDOUT &&
            s->gen == since) {
            r = -ETIMEDOUT;
            break;
        }
    }
    if (ret_gen)
        *ret_gen = s->gen;
    pthread_mutex_unlock(&s->gen_lock);
    return r;
}

static void kp_bucket_free(void *v)
{
    struct kp_bucket *b = v;

    if (!b)
        return;
    kp_free(b->v);
    kp_free(b);
}

struct kp_store *kp_store_free(struct kp_store *s)
{
    size_t it = 0;
    void *v;

    if (!s)
        return NULL;
    while (kp_map_next(s->entries, &it, NULL, &v))
        kp_entry_unref(v);
    kp_map_free(s->entries);
    for (size_t i = 0; i < s->nidx; i++) {
        it = 0;
        while (kp_map_next(s->idx[i].values, &it, NULL, &v))
            kp_bucket_free(v);
        kp_map_free(s->idx[i].values);
        kp_free(s->idx[i].name);
    }
    kp_free(s->idx);
    pthread_rwlock_destroy(&s->lock);
    pthread_cond_destroy(&s->gen_cond);
    pthread_mutex_destroy(&s->gen_lock);
    kp_free(s);
    return NULL;
}

/* The index called name, or NULL. Lock held. */
static struct kp_index *kp_store_index_locked(struct kp_store *s, const char *name)
{
    for (size_t i = 0; i < s->nidx; i++)
        if (strcmp(s->idx[i].name, name) == 0)
            return &s->idx[i];
    return NULL;
}

int kp_store_add_index(struct kp_store *s, const char *name, kp_index_fn fn)
{
    struct kp_index *ix;
    int r = 0;

    pthread_rwlock_wrlock(&s->lock);
    if (kp_map_size(s->entries) > 0) {
        r = -EBUSY;
        goto out;
    }
    if (kp_store_index_locked(s, name)) {
        r = -EEXIST;
        goto out;
    }
    {
        struct kp_index *v = kp_grow_array(s->idx, &s->idx_cap, s->nidx, sizeof(*v), 4);

        if (!v) {
            r = -ENOMEM;
            goto out;
        }
        s->idx = v;
    }
    ix = &s->idx[s->nidx];
    ix->name = kp_strdup(name);
    if (!ix->name) {
        r = -ENOMEM;
        goto out;
    }
    r = kp_map_new(&ix->values);
    if (r < 0) {
        kp_free(ix->name);
        ix->name = NULL;
        goto out;
    }
    ix->fn = fn;
    s->nidx++;
out:
    pthread_rwlock_unlock(&s->lock);
    return r;
}

/* Index maintenance: emit callbacks carry one of these. */
struct kp_ix_op {
    struct kp_index *ix;
    struct kp_entry *e;
    int r;        /* first error of an insert pass */
    size_t done;  /* values inserted so far (for rollback) */
    size_t limit; /* remove pass: stop after this many values (SIZE_MAX: all) */
};

static void kp_ix_insert(const char *value, void *ctx)
{
    struct kp_ix_op *op = ctx;
    struct kp_bucket *b;

    if (op->r < 0)
        return;
    b = kp_map_get(op->ix->values, value);
    if (!b) {
        b = kp_calloc(1, sizeof(*b));
        if (!b || kp_map_put(op->ix->values, value, b, NULL) < 0) {
            kp_free(b);
            op->r = -ENOMEM;
            return;
        }
    }
    {
        struct kp_entry **v = kp_grow_array(b->v, &b->cap, b->n, sizeof(*v), 4);

        if (!v) {
            if (b->n == 0)
                kp_bucket_free(kp_map_remove(op->ix->values, value));
            op->r = -ENOMEM;
            return;
        }
        b->v = v;
    }
    b->v[b->n++] = op->e;
    op->done++;
}

static void kp_ix_remove(const char *value, void *ctx)
{
    struct kp_ix_op *op = ctx;
    struct kp_bucket *b;

    if (op->done >= op->limit)
        return;
    op->done++;
    b = kp_map_get(op->ix->values, value);
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++) {
        if (b->v[i] == op->e) {
            b->v[i] = b->v[--b->n];
            break;
        }
    }
    if (b->n == 0)
        kp_bucket_free(kp_map_remove(op->ix->values, value));
}

/* Removes e from indexes [0, nidx); with limit, only its first `limit` values of index nidx-1
 * (rollback of a partial insert). */
static void kp_store_unindex(struct kp_store *s, struct kp_entry *e, size_t nidx, size_t limit)
{
    for (size_t i = 0; i < nidx; i++) {
        struct kp_ix_op op = {.ix = &s->idx[i], .e = e, .limit = SIZE_MAX};

        if (i == nidx - 1)
            op.limit = limit;
        s->idx[i].fn(e, kp_ix_remove, &op);
    }
}

int kp_store_put(struct kp_store *s, struct kp_entry *e, struct kp_entry **ret_old)
{
    struct kp_entry *old = NULL;
    size_t i;
    int r = 0;

    pthread_rwlock_wrlock(&s->lock);
    for (i = 0; i < s->nidx; i++) {
        struct kp_ix_op op = {.ix = &s->idx[i], .e = e};

        s->idx[i].fn(e, kp_ix_insert, &op);
        if (op.r < 0) {
            r = op.r;
            /* Undo this index's partial insert and every earlier index. */
            kp_store_unindex(s, e, i + 1, op.done);
            goto out;
        }
    }
    r = kp_map_put(s->entries, e->key, e, (void **)&old);
    if (r < 0) {
        kp_store_unindex(s, e, s->nidx, SIZE_MAX);
        goto out;
    }
    s->bytes += e->bytes;
    if (old) {
        kp_store_unindex(s, old, s->nidx, SIZE_MAX);
        s->bytes -= old->bytes;
    }
out:
    pthread_rwlock_unlock(&s->lock);
    if (r == 0) {
        kp_store_changed(s);
        if (ret_old)
            *ret_old = old;
        else
            kp_entry_unref(old);
    }
    return r;
}

int kp_store_delete(struct kp_store *s, const char *key, struct kp_entry **ret_old)
{
    struct kp_entry *old;

    pthread_rwlock_wrlock(&s->lock);
    old = kp_map_remove(s->entries, key);
    if (old) {
        kp_store_unindex(s, old, s->nidx, SIZE_MAX);
        s->bytes -= old->bytes;
    }
    pthread_rwlock_unlock(&s->lock);
    if (!old)
        return -ENOENT;
    kp_store_changed(s);
    if (ret_old)
        *ret_old = old;
    else
        kp_entry_unref(old);
    return 0;
}

int kp_store_get(struct kp_store *s, const char *key, struct kp_entry **ret_entry)
{
    struct kp_entry *e;

    pthread_rwlock_rdlock(&s->lock);
    e = kp_entry_ref(kp_map_get(s->entries, key));
    pthread_rwlock_unlock(&s->lock);
    if (!e)
        return -ENOENT;
    *ret_entry = e;
    return 0;
}

void kp_store_list_free(struct kp_store_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        kp_entry_unref(l->v[i]);
    kp_free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Copies n borrowed pointers into a list of references. Lock held. */
static int kp_store_snapshot(struct kp_entry *const *src, size_t n, struct kp_store_list *ret)
{
    struct kp_store_list l = {0};

    l.v = kp_calloc(n ? n : 1, sizeof(*l.v));
    if (!l.v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        l.v[i] = kp_entry_ref(src[i]);
    l.n = n;
    *ret = l;
    return 0;
}

int kp_store_list(struct kp_store *s, struct kp_store_list *ret)
{
    struct kp_store_list l = {0};
    size_t it = 0;
    void *v;
    int r = 0;

    /* One array, filled straight from the map: the entries are copied once under the lock. */
    pthread_rwlock_rdlock(&s->lock);
    l.v = kp_calloc(kp_map_size(s->entries) ? kp_map_size(s->entries) : 1, sizeof(*l.v));
    if (!l.v) {
        r = -ENOMEM;
        goto out;
    }
    while (kp_map_next(s->entries, &it, NULL, &v))
        l.v[l.n++] = kp_entry_ref(v);
    *ret = l;
out:
    pthread_rwlock_unlock(&s->lock);
    return r;
}

int kp_store_by_index(struct kp_store *s, const char *index, const char *value,
                      struct kp_store_list *ret)
{
    struct kp_index *ix;
    struct kp_bucket *b;
    int r = -ENOENT;

    pthread_rwlock_rdlock(&s->lock);
    if ((ix = kp_store_index_locked(s, index))) {
        b = kp_map_get(ix->values, value);
        r = kp_store_snapshot(b ? b->v : NULL, b ? b->n : 0, ret);
    }
    pthread_rwlock_unlock(&s->lock);
    return r;
}

int kp_store_walk(struct kp_store *s, kp_store_visit_fn visit, void *ctx)
{
    size_t it = 0;
    void *v;
    int r = 0;

    pthread_rwlock_rdlock(&s->lock);
    while (r == 0 && kp_map_next(s->entries, &it, NULL, &v))
        r = visit(ctx, v);
    pthread_rwlock_unlock(&s->lock);
    return r;
}

int kp_store_walk_index(struct kp_store *s, const char *index, const char *value,
                        kp_store_visit_fn visit, void *ctx)
{
    struct kp_index *ix;
    struct kp_bucket *b;
    int r = -ENOENT;

    pthread_rwlock_rdlock(&s->lock);
    if ((ix = kp_store_index_locked(s, index))) {
        r = 0;
        b = kp_map_get(ix->values, value);
        for (size_t i = 0; b && i < b->n && r == 0; i++)
            r = visit(ctx, b->v[i]);
    }
    pthread_rwlock_unlock(&s->lock);
    return r;
}

kp_index_fn kp_store_index_fn(struct kp_store *s, const char *name)
{
    struct kp_index *ix;
    kp_index_fn fn;

    pthread_rwlock_rdlock(&s->lock);
    ix = kp_store_index_locked(s, name);
    fn = ix ? ix->fn : NULL;
    pthread_rwlock_unlock(&s->lock);
    return fn;
}

int kp_store_keys_not_in(struct kp_store *s, const struct kp_map *keep, struct kp_strv *ret)
{
    struct kp_strv out = KP_STRV_INIT;
    const char *key;
    size_t it = 0;
    int r = 0;

    pthread_rwlock_rdlock(&s->lock);
    while (kp_map_next(s->entries, &it, &key, NULL)) {
        if (kp_map_contains(keep, key))
            continue;
        r = kp_strv_push(&out, key);
        if (r < 0)
            break;
    }
    pthread_rwlock_unlock(&s->lock);
    if (r < 0) {
        kp_strv_done(&out);
        return r;
    }
    *ret = out;
    return 0;
}

size_t kp_store_len(struct kp_store *s)
{
    size_t n;

    pthread_rwlock_rdlock(&s->lock);
    n = kp_map_size(s->entries);
    pthread_rwlock_unlock(&s->lock);
    return n;
}

size_t kp_store_bytes(struct kp_store *s)
{
    size_t n;

    pthread_rwlock_rdlock(&s->lock);
    n = s->bytes;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

/* --- packing ---------------------------------------------------------------------------- */

#define KP_PACK_ALIGN 8

/* Process-random key for entry fingerprints, so content cannot be crafted to collide. */
static uint8_t kp_pack_hash_key[16];

static void kp_pack_hash_key_init(void)
{
    if (getrandom(kp_pack_hash_key, sizeof(kp_pack_hash_key), 0) != sizeof(kp_pack_hash_key)) {
        uint64_t t = kp_mono_usec() ^ (kp_real_usec() << 7);

        memcpy(kp_pack_hash_key, &t, sizeof(t));
    }
}

void kp_pack_init(struct kp_pack *p, size_t head)
{
    *p = (struct kp_pack){.head = head, .total = head};
}

static void kp_pack_add(struct kp_pack *p, size_t n)
{
    if (kp_add_overflow(p->total, n, &p->total))
        p->overflow = true;
}

/* The sizing and copying passes disagreeing is a programmer error that would corrupt memory. */
static void kp_pack_check(const struct kp_pack *p, size_t at, size_t n)
{
    if (at > p->total || n > p->total - at)
        abort();
}

int kp_pack_alloc(struct kp_pack *p, void *ret)
{
    if (p->overflow)
        return -EOVERFLOW;
    p->base = kp_calloc(1, p->total);
    if (!p->base)
        return -ENOMEM;
    p->used = p->head;
    *(void **)ret = p->base;
    return 0;
}

char *kp_pack_str(struct kp_pack *p, const char *s)
{
    char *d;
    size_t n;

    if (!s)
        return NULL;
    n = strlen(s) + 1;
    if (kp_pack_sizing(p)) {
        kp_pack_add(p, n);
        return NULL;
    }
    kp_pack_check(p, p->used, n);
    d = p->base + p->used;
    memcpy(d, s, n);
    p->used += n;
    return d;
}

void *kp_pack_array(struct kp_pack *p, size_t n, size_t size)
{
    size_t bytes, at;

    if (n == 0)
        return NULL;
    if (kp_mul_overflow(n, size, &bytes)) {
        p->overflow = true;
        return NULL;
    }
    if (kp_pack_sizing(p)) {
        /* Room for alignment padding too. */
        kp_pack_add(p, bytes);
        kp_pack_add(p, KP_PACK_ALIGN - 1);
        return NULL;
    }
    at = (p->used + KP_PACK_ALIGN - 1) & ~(size_t)(KP_PACK_ALIGN - 1);
    kp_pack_check(p, at, bytes);
    p->used = at + bytes;
    return p->base + at;
}

void kp_pack_entry(struct kp_pack *p, struct kp_entry *e, const char *ns, const char *name,
                   const char *uid, const char *rv)
{
    size_t a, b = strlen(name); /* name is required (KP_NONNULL); measure it before use */
    char *k;

    if (!ns)
        ns = "";
    e->ns = kp_pack_str(p, ns);
    e->name = kp_pack_str(p, name);
    e->uid = kp_pack_str(p, uid);
    p->rv_src = rv;
    if (rv && kp_pack_sizing(p))
        kp_pack_add(p, strlen(rv) + 1);
    if (!*ns) {
        e->key = e->name; /* a cluster-scoped key is the name itself */
    } else {
        a = strlen(ns);
        if (kp_pack_sizing(p)) {
            kp_pack_add(p, a + 1);
            kp_pack_add(p, b + 1);
        } else {
            kp_pack_check(p, p->used, a + b + 2);
            k = p->base + p->used;
            memcpy(k, ns, a);
            k[a] = '/';
            memcpy(k + a + 1, name, b + 1);
            p->used += a + b + 2;
            e->key = k;
        }
    }
    e->bytes = p->total;
    atomic_init(&e->refs, 1);
}

int kp_pack_finish(struct kp_pack *p, struct kp_entry *e)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    uintptr_t lo = (uintptr_t)p->base, hi = lo + p->total;
    size_t start = sizeof(struct kp_entry), end = p->used, words;
    uint64_t *tmp;

    e->rv = kp_pack_str(p, p->rv_src); /* after `end`: the rv is not part of the content */
    /* Hash a copy in which every word that points into the block is made relative to it, so
     * identical content at different addresses hashes equal. Strings are hashed as bytes; a
     * text word that happens to equal an address inside the block is normalised the same way in
     * both copies, so it cannot make different content look equal. */
    words = (end - start + 7) / 8;
    tmp = kp_calloc(words ? words : 1, sizeof(*tmp));
    if (!tmp)
        return -ENOMEM;
    memcpy(tmp, p->base + start, end - start);
    for (size_t i = 0; i < words; i++)
        if (tmp[i] >= lo && tmp[i] < hi)
            tmp[i] -= lo;
    pthread_once(&once, kp_pack_hash_key_init);
    e->hash = kp_siphash24(tmp, end - start, kp_pack_hash_key);
    kp_free(tmp);
    return 0;
}

void kp_index_emit_if(const char *value, kp_index_emit_fn emit, void *ctx)
{
    if (value && *value)
        emit(value, ctx);
}
