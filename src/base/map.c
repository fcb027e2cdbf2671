/* DESIGN: string-keyed hash map.
 *
 * What: open addressing with linear probing and backward-shift deletion (no tombstones, so a
 * long-lived map under churn — an informer index — never degrades). Why SipHash with a random
 * per-map key: keys are object names chosen by whoever writes to the API server; a fixed hash
 * would let them pile every key into one probe run. Load factor stays at or below 3/4; capacity
 * is a power of two. Each slot caches the full hash so probing compares strings only on a hash
 * match. Threads: none of its own; the owner serialises access. */
#include "base/map.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "base/alloc.h"
#include "base/time.h"

#define KP_MAP_MIN_CAP 8

struct kp_map_slot {
    char *key; /* NULL: empty */
    void *value;
    uint64_t hash;
};

struct kp_map {
    struct kp_map_slot *slots;
    size_t cap; /* power of two, or 0 before the first insert */
    size_t size;
    uint8_t key[16];
};

static inline uint64_t kp_rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

#define KP_SIPROUND                                                                                \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = kp_rotl(v1, 13);                                                                      \
        v1 ^= v0;                                                                                  \
        v0 = kp_rotl(v0, 32);                                                                      \
        v2 += v3;                                                                                  \
        v3 = kp_rotl(v3, 16);                                                                      \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = kp_rotl(v3, 21);                                                                      \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = kp_rotl(v1, 17);                                                                      \
        v1 ^= v2;                                                                                  \
        v2 = kp_rotl(v2, 32);                                                                      \
    } while (0)

static uint64_t kp_load_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint64_t kp_siphash24(const void *data, size_t n, const uint8_t key[16])
{
    const uint8_t *p = data;
    uint64_t k0 = kp_load_le64(key), k1 = kp_load_le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    uint64_t b = (uint64_t)n << 56, m;
    size_t i, tail = n & 7;

    for (i = 0; i + 8 <= n; i += 8) {
        m = kp_load_le64(p + i);
        v3 ^= m;
        KP_SIPROUND;
        KP_SIPROUND;
        v0 ^= m;
    }
    for (size_t j = 0; j < tail; j++)
        b |= (uint64_t)p[i + j] << (8 * j);
    v3 ^= b;
    KP_SIPROUND;
    KP_SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    KP_SIPROUND;
    KP_SIPROUND;
    KP_SIPROUND;
    KP_SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

int kp_map_new(struct kp_map **ret)
{
    struct kp_map *m;

    m = kp_calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    if (getrandom(m->key, sizeof(m->key), GRND_NONBLOCK) != (ssize_t)sizeof(m->key)) {
        /* Early boot without entropy: a clock-derived key still differs per process. */
        uint64_t t = kp_mono_usec() ^ (kp_real_usec() << 1) ^ (uint64_t)(uintptr_t)m;

        memcpy(m->key, &t, sizeof(t));
        t = kp_rotl(t, 29) * 0x9e3779b97f4a7c15ULL;
        memcpy(m->key + 8, &t, sizeof(t));
    }
    *ret = m;
    return 0;
}

struct kp_map *kp_map_free(struct kp_map *m)
{
    if (!m)
        return NULL;
    for (size_t i = 0; i < m->cap; i++)
        kp_free(m->slots[i].key);
    kp_free(m->slots);
    kp_free(m);
    return NULL;
}

static uint64_t kp_map_hash(const struct kp_map *m, const char *key)
{
    return kp_siphash24(key, strlen(key), m->key);
}

/* The slot holding key, or SIZE_MAX. */
static size_t kp_map_find(const struct kp_map *m, const char *key, uint64_t h)
{
    size_t mask, i;

    if (m->cap == 0)
        return SIZE_MAX;
    mask = m->cap - 1;
    for (i = (size_t)h & mask;; i = (i + 1) & mask) {
        const struct kp_map_slot *s = &m->slots[i];

        if (!s->key)
            return SIZE_MAX;
        if (s->hash == h && strcmp(s->key, key) == 0)
            return i;
    }
}

/* Places an entry known to be absent; the table has a free slot. */
static void kp_map_place(struct kp_map_slot *slots, size_t cap, struct kp_map_slot e)
{
    size_t i, mask = cap - 1;

    for (i = (size_t)e.hash & mask; slots[i].key; i = (i + 1) & mask)
        ;
    slots[i] = e;
}

static int kp_map_resize(struct kp_map *m, size_t cap)
{
    struct kp_map_slot *slots;

    slots = kp_calloc(cap, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            kp_map_place(slots, cap, m->slots[i]);
    kp_free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int kp_map_put(struct kp_map *m, const char *key, void *value, void **ret_old)
{
    uint64_t h = kp_map_hash(m, key);
    size_t i = kp_map_find(m, key, h);
    struct kp_map_slot e;
    int r;

    if (i != SIZE_MAX) {
        if (ret_old)
            *ret_old = m->slots[i].value;
        m->slots[i].value = value;
        return 0;
    }
    /* Keep size + 1 <= 3/4 cap. */
    if (m->cap == 0 || (m->size + 1) * 4 > m->cap * 3) {
        size_t cap;

        if (m->cap == 0)
            cap = KP_MAP_MIN_CAP;
        else if (kp_mul_overflow(m->cap, (size_t)2, &cap))
            return -ENOMEM;
        r = kp_map_resize(m, cap);
        if (r < 0)
            return r;
    }
    e.key = kp_strdup(key);
    if (!e.key)
        return -ENOMEM;
    e.value = value;
    e.hash = h;
    kp_map_place(m->slots, m->cap, e);
    m->size++;
    if (ret_old)
        *ret_old = NULL;
    return 0;
}

void *kp_map_get(const struct kp_map *m, const char *key)
{
    size_t i = kp_map_find(m, key, kp_map_hash(m, key));

    return i == SIZE_MAX ? NULL : m->slots[i].value;
}

bool kp_map_contains(const struct kp_map *m, const char *key)
{
    return kp_map_find(m, key, kp_map_hash(m, key)) != SIZE_MAX;
}

void *kp_map_remove(struct kp_map *m, const char *key)
{
    size_t i = kp_map_find(m, key, kp_map_hash(m, key));
    size_t mask, j;
    void *value;

    if (i == SIZE_MAX)
        return NULL;
    value = m->slots[i].value;
    kp_free(m->slots[i].key);
    m->slots[i].key = NULL;
    m->size--;
    /* Backward-shift: pull later members of the probe run into the hole when their home slot
     * does not lie cyclically in (hole, current]. */
    mask = m->cap - 1;
    for (j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t home = (size_t)m->slots[j].hash & mask;
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);

        if (stays)
            continue;
        m->slots[i] = m->slots[j];
        m->slots[j].key = NULL;
        i = j;
    }
    return value;
}

size_t kp_map_size(const struct kp_map *m)
{
    return m->size;
}

bool kp_map_next(const struct kp_map *m, size_t *it, const char **ret_key, void **ret_value)
{
    while (*it < m->cap) {
        const struct kp_map_slot *s = &m->slots[(*it)++];

        if (s->key) {
            if (ret_key)
                *ret_key = s->key;
            if (ret_value)
                *ret_value = s->value;
            return true;
        }
    }
    return false;
}
