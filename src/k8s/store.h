/* k8s/store.h: the informer cache: immutable, refcounted projections of one kind of object,
 * keyed by "namespace/name" (or "name" for cluster-scoped kinds), with secondary indexes.
 *
 * An entry is one allocation holding a struct that begins with struct kp_entry and carries the
 * few fields controllers read (STYLE.md section 3), never a JSON tree. Entries never change once
 * published: an update publishes a new entry and drops the store's reference to the old one, so
 * a worker holding a reference keeps a consistent snapshot for as long as it likes.
 *
 * Indexes are functions from an entry to zero or more string values (pods -> node name,
 * nodes -> providerID, ...); kp_store_by_index() returns every entry with a given value.
 *
 * Threads: writes come from the informer thread; reads from any thread. A read-write lock
 * guards the maps; it is never held while calling out, except for index functions, which must
 * be pure, and walk visitors, which follow the rule at kp_store_walk. */
#ifndef KP_K8S_STORE_H
#define KP_K8S_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "base/time.h"

struct kp_entry {
    atomic_uint refs;
    const char *key; /* "ns/name" or "name"; points into the same allocation */
    const char *ns;  /* "" for cluster-scoped */
    const char *name;
    const char *uid;
    const char *rv; /* resourceVersion */
    size_t bytes;   /* size of the allocation, for the cache benchmark */
    uint64_t hash;  /* content fingerprint without the rv: equal means nothing we keep changed */
    /* The kind the entry was projected as (api/obj.h: one tag per projection, compared by
     * address), or NULL for an entry made some other way. */
    const char *kind;
    void (*destroy)(struct kp_entry *e); /* frees the allocation; NULL means kp_free(e) */
};

/* Reference counting. kp_entry_unref frees at zero; both accept NULL; unref returns NULL. */
struct kp_entry *kp_entry_ref(struct kp_entry *e);
struct kp_entry *kp_entry_unref(struct kp_entry *e);

/* Index function: calls emit(value, ctx) for each value of e (none is fine). Pure. */
typedef void (*kp_index_emit_fn)(const char *value, void *ctx);
typedef void (*kp_index_fn)(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);
/* emit(value, ctx) unless value is NULL or "": the rule of an index over one optional field. */
void kp_index_emit_if(const char *value, kp_index_emit_fn emit, void *ctx);

struct kp_store;

/* 0 or -ENOMEM. */
int kp_store_new(struct kp_store **ret) KP_WUR;
/* Drops every entry reference; accepts and returns NULL. */
struct kp_store *kp_store_free(struct kp_store *s);

/* Adds a named index before the first entry is stored; there is no fixed limit on their number
 * (each costs a map and a pass of its function per put). 0, -EEXIST, -EBUSY (store not empty)
 * or -ENOMEM. Start-up only. */
int kp_store_add_index(struct kp_store *s, const char *name, kp_index_fn fn) KP_WUR;
/* The function of the index called name, or NULL when there is none. Any thread. */
kp_index_fn kp_store_index_fn(struct kp_store *s, const char *name);

/* Publishes e under e->key, taking over the caller's reference. The replaced entry, if any, is
 * handed back in *ret_old (a reference the caller drops) or dropped when ret_old is NULL.
 * 0 or -ENOMEM (then the store is unchanged and e is still the caller's). */
int kp_store_put(struct kp_store *s, struct kp_entry *e, struct kp_entry **ret_old) KP_WUR;
/* Removes key; *ret_old as above. 0 or -ENOENT. */
int kp_store_delete(struct kp_store *s, const char *key, struct kp_entry **ret_old);

/* *ret_entry receives a new reference. 0 or -ENOENT. Any thread. */
int kp_store_get(struct kp_store *s, const char *key, struct kp_entry **ret_entry) KP_WUR;

/* A snapshot array of references; release it with kp_store_list_free(). */
struct kp_store_list {
    struct kp_entry **v;
    size_t n;
};
/* Every entry (index NULL) or the entries whose index `index` has value `value`.
 * 0, -ENOENT (no such index) or -ENOMEM. Any thread. */
int kp_store_list(struct kp_store *s, struct kp_store_list *ret) KP_WUR;
int kp_store_by_index(struct kp_store *s, const char *index, const char *value,
                      struct kp_store_list *ret) KP_WUR;
void kp_store_list_free(struct kp_store_list *l);

/* Walks: visit(ctx, e) for every entry (kp_store_walk) or for the entries whose index `index`
 * has value `value` (kp_store_walk_index), in no particular order, without copying anything.
 * A visitor returns 0 to go on; any other value stops the walk and is returned (use a positive
 * value for "found, stop", a negative error for a failure). kp_store_walk_index returns -ENOENT
 * when there is no such index (so a visitor should not use -ENOENT itself).
 *
 * Lock rule: the visitor runs under the store's read lock. e is not const only so that a
 * reference can be taken; the entry is as immutable as ever. The visitor may read e and
 * anything e points to, take a reference (kp_entry_ref) to keep e past the walk, take other locks that never wait
 * on this store (a work queue's: kp_reconciler_enqueue is fine), and read other stores. It must
 * not call any function of this store (a get, a list, another walk: a writer queued between two
 * read locks deadlocks them), must not write (the informer thread would wait for the walk, and
 * the walk for it), and must not block or do I/O: the informer thread's next put waits for it.
 * Any thread. */
typedef int (*kp_store_visit_fn)(void *ctx, struct kp_entry *e);
int kp_store_walk(struct kp_store *s, kp_store_visit_fn visit, void *ctx);
int kp_store_walk_index(struct kp_store *s, const char *index, const char *value,
                        kp_store_visit_fn visit, void *ctx);

/* Keys of entries not in `keep` (a map used as a set), for the informer's relist: whatever the
 * fresh LIST did not return was deleted while we were not watching. *ret is a NULL-terminated
 * array of owned strings (free with kp_strv_done semantics: see base/str.h kp_strv). */
struct kp_map;
struct kp_strv;
int kp_store_keys_not_in(struct kp_store *s, const struct kp_map *keep, struct kp_strv *ret) KP_WUR;

/* Change notification, for a thread that waits for something to appear in the cache (the
 * provider waiting for its Node to register) without polling:
 *
 *   uint64_t seen = kp_store_generation(s);
 *   while (!found_in(s)) kp_store_wait(s, seen, deadline, &seen);
 *
 * The generation counts every put and delete. kp_store_wait returns at once when it differs from
 * `since`, else when it changes or the deadline passes (0 or -ETIMEDOUT); *ret_gen (optional)
 * receives the generation seen. Any thread. */
uint64_t kp_store_generation(struct kp_store *s);
int kp_store_wait(struct kp_store *s, uint64_t since, struct kp_deadline deadline,
                  uint64_t *ret_gen);

size_t kp_store_len(struct kp_store *s);
/* Sum of entry bytes, for the benchmark and a metric. */
size_t kp_store_bytes(struct kp_store *s);

/* Packing helper for projections: one function fills a view twice, first to size it, then to
 * copy into a single allocation, so the sizing and copying logic cannot drift apart:
 *
 *   static int pod_fill(const json_t *obj, struct kp_pack *p, struct kp_pod_view *v);
 *   struct kp_pod_view scratch = {0}, *v;
 *   kp_pack_init(&p, sizeof(*v));
 *   r = pod_fill(obj, &p, &scratch);          sizing pass: validates, counts bytes
 *   r = kp_pack_alloc(&p, &v);                one zeroed allocation
 *   (void)pod_fill(obj, &p, v);               copying pass: same decisions, real copies
 *
 * In the sizing pass (kp_pack_sizing() true) kp_pack_str and kp_pack_array return NULL and only
 * count; fill functions write array elements to a scratch element when the array is NULL.
 * Copying more than was sized aborts: a programmer error that would otherwise corrupt memory. */
struct kp_pack {
    size_t head;        /* size of the fixed struct */
    size_t total;       /* bytes counted by the sizing pass */
    char *base;         /* the allocation; NULL while sizing */
    size_t used;        /* copying cursor */
    const char *rv_src; /* resourceVersion, copied last by kp_pack_finish */
    bool overflow;
};
void kp_pack_init(struct kp_pack *p, size_t head);
static inline bool kp_pack_sizing(const struct kp_pack *p)
{
    return p->base == NULL;
}
/* Sizing: counts s; copying: returns the packed copy. NULL stays NULL and costs nothing. */
char *kp_pack_str(struct kp_pack *p, const char *s);
/* Sizing: counts n elements of size bytes; copying: returns them zeroed and 8-byte aligned
 * (NULL when n is 0). */
void *kp_pack_array(struct kp_pack *p, size_t n, size_t size);
/* Allocates what the sizing pass counted; *ret (a pointer to a pointer) receives the zeroed
 * head and the pack switches to copying. 0, -ENOMEM or -EOVERFLOW. */
int kp_pack_alloc(struct kp_pack *p, void *ret) KP_WUR;
/* The common header: key ("ns/name" or "name"), ns ("" when NULL), name, uid, bytes and
 * refs = 1; rv is counted now and copied by kp_pack_finish. Counts in the sizing pass, fills e
 * in the copying pass. name must not be NULL. */
void kp_pack_entry(struct kp_pack *p, struct kp_entry *e, const char *ns, const char *name,
                   const char *uid, const char *rv) KP_NONNULL(1, 2, 4);
/* Ends the copying pass: copies rv to the tail of the block and computes e->hash, a keyed
 * fingerprint of everything between the entry header and rv (pointers taken relative to the
 * block), so two projections of the same content hash equal whatever their resourceVersion.
 * 0 or -ENOMEM. */
int kp_pack_finish(struct kp_pack *p, struct kp_entry *e) KP_WUR;

#endif
