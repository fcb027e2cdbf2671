/* core/nodepool/hash.c: the NodePool template hash (hash.h).
 *
 * DESIGN: the hash is FNV-1a 64 over a canonical serialization of the hashed fields, so it is
 * the same in every process and build (no seed, no pointer, no padding byte ever enters it):
 *
 *   field     := tag byte, then the field's content; an absent or zero field is not written
 *                at all (Karpenter's IgnoreZeroValue), so adding an empty list changes nothing
 *   string    := its length as 8 bytes little-endian, then its bytes (no two lists of strings
 *                serialize the same)
 *   set       := the element count of distinct elements, then the 64-bit FNV-1a hash of each
 *                element's own serialization, sorted and deduplicated, as 8 bytes each: order
 *                never matters (Karpenter's SlicesAsSets; maps are sets of pairs)
 *   duration  := the parsed value in nanoseconds as 8 bytes (text that does not parse: its
 *                text, under another tag, so an invalid value still hashes apart)
 *
 * Tags: 'L' template labels, 'A' template annotations, 'T' taints, 'S' startupTaints, 'C'
 * nodeClassRef (group, kind, name), 'E'/'e' expireAfter, 'G'/'g' terminationGracePeriod.
 * expireAfter "Never" is nil in Karpenter and so absent here. Sets are bounded by the CRD (at
 * most a few hundred elements); the element hashes are sorted in a fixed-size stack array
 * when they fit, else on the heap, else (out of memory) unsorted-but-XOR-combined, which is
 * order-independent too, so the function never fails.
 *
 * Threads: pure; any thread. */
#include "core/nodepool/hash.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "api/obj-karpenter.h"
#include "core/core.h"

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL
#define STACK_ELEMS 64

struct fnv {
    uint64_t h;
};

static void fnv_init(struct fnv *f)
{
    f->h = FNV_OFFSET;
}

static void fnv_bytes(struct fnv *f, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        f->h ^= b[i];
        f->h *= FNV_PRIME;
    }
}

static void fnv_u64(struct fnv *f, uint64_t v)
{
    unsigned char b[8];

    for (size_t i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    fnv_bytes(f, b, sizeof(b));
}

static void fnv_str(struct fnv *f, const char *s)
{
    size_t n = s ? strlen(s) : 0;

    fnv_u64(f, n);
    fnv_bytes(f, s ? s : "", n);
}

static void fnv_tag(struct fnv *f, char tag)
{
    fnv_bytes(f, &tag, 1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Feeds the set of element hashes v[0..n) into f (sorted, deduplicated; v is reordered). */
static void fnv_set(struct fnv *f, uint64_t *v, size_t n)
{
    size_t k = 0;

    qsort(v, n, sizeof(*v), cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || v[i] != v[i - 1])
            v[k++] = v[i];
    fnv_u64(f, k);
    for (size_t i = 0; i < k; i++)
        fnv_u64(f, v[i]);
}

/* The hash of one element, computed by elem(ctx, i, &f). */
typedef void (*elem_fn)(const void *ctx, size_t i, struct fnv *f);

static uint64_t elem_hash(elem_fn elem, const void *ctx, size_t i)
{
    struct fnv e;

    fnv_init(&e);
    elem(ctx, i, &e);
    return e.h;
}

/* Writes field tag as the set of n elements (nothing when n is 0). */
static void hash_set(struct fnv *f, char tag, elem_fn elem, const void *ctx, size_t n)
{
    uint64_t stack[STACK_ELEMS], *v = stack;

    if (n == 0)
        return;
    fnv_tag(f, tag);
    if (n > STACK_ELEMS && !(v = kp_calloc(n, sizeof(*v)))) {
        /* Out of memory: XOR of the element hashes is order-independent as well. It differs
         * from the sorted form, which only matters if memory runs out for one NodePool and not
         * the next time: the next reconcile writes the right value again. */
        uint64_t x = 0;

        for (size_t i = 0; i < n; i++)
            x ^= elem_hash(elem, ctx, i);
        fnv_u64(f, x);
        return;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = elem_hash(elem, ctx, i);
    fnv_set(f, v, n);
    if (v != stack)
        kp_free(v);
}

static void label_elem(const void *ctx, size_t i, struct fnv *f)
{
    const struct kp_labels *l = ctx;

    fnv_str(f, l->v[i].key);
    fnv_str(f, l->v[i].value);
}

static void taint_elem(const void *ctx, size_t i, struct fnv *f)
{
    const struct kp_taints *t = ctx;

    fnv_str(f, t->v[i].key);
    fnv_str(f, t->v[i].value); /* NULL and "" are both the zero value */
    fnv_str(f, kp_taint_effect_name(t->v[i].effect));
}

static void hash_duration(struct fnv *f, char tag, char invalid_tag,
                          const struct kp_obj_duration *d)
{
    if (!d->text || d->never)
        return; /* absent, or Never (nil in Karpenter): the zero value */
    if (!d->valid) {
        fnv_tag(f, invalid_tag);
        fnv_str(f, d->text);
        return;
    }
    fnv_tag(f, tag);
    fnv_u64(f, (uint64_t)d->ns);
}

void kp_nodepool_hash(const struct kp_nodepool_view *np, char ret[KP_NODEPOOL_HASH_MAX])
{
    const struct kp_nodeclaim_spec *t = &np->tmpl;
    const struct kp_nodeclass_ref *ref = &t->node_class_ref;
    struct fnv f;

    fnv_init(&f);
    hash_set(&f, 'L', label_elem, &np->tmpl_labels, np->tmpl_labels.n);
    hash_set(&f, 'A', label_elem, &np->tmpl_annotations, np->tmpl_annotations.n);
    hash_set(&f, 'T', taint_elem, &t->taints, t->taints.n);
    hash_set(&f, 'S', taint_elem, &t->startup_taints, t->startup_taints.n);
    if ((ref->group && *ref->group) || (ref->kind && *ref->kind) || (ref->name && *ref->name)) {
        fnv_tag(&f, 'C');
        fnv_str(&f, ref->group);
        fnv_str(&f, ref->kind);
        fnv_str(&f, ref->name);
    }
    hash_duration(&f, 'E', 'e', &t->expire_after);
    hash_duration(&f, 'G', 'g', &t->termination_grace_period);
    (void)snprintf(ret, KP_NODEPOOL_HASH_MAX, "%" PRIu64, f.h);
}

bool kp_nodepool_hash_stale(const struct kp_nodepool_view *np, const char *hash)
{
    return !kp_streq(kp_labels_get(&np->annotations, KP_CORE_ANN_NODEPOOL_HASH), hash) ||
           !kp_streq(kp_labels_get(&np->annotations, KP_CORE_ANN_NODEPOOL_HASH_VERSION),
                     KP_NODEPOOL_HASH_VERSION);
}

struct kp_nodeclaim_hash_plan kp_nodeclaim_hash_plan(const struct kp_nodeclaim_view *nc)
{
    struct kp_nodeclaim_hash_plan p = {0};

    if (kp_streq(kp_labels_get(&nc->annotations, KP_CORE_ANN_NODEPOOL_HASH_VERSION),
                 KP_NODEPOOL_HASH_VERSION))
        return p;
    p.write = true;
    p.set_hash = kp_conditions_get(&nc->conditions, "Drifted") == NULL;
    return p;
}
