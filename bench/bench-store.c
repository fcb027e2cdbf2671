/* bench-store: what reading the informer cache costs, without a server
 * (`build/<preset>/bench/bench-store [-n entries] [-i iterations]`).
 *
 * Fills a store with N small entries (default 10000) spread over N/10 index values, then times
 * per iteration:
 *   - list:        kp_store_list + kp_store_list_free (a snapshot of references),
 *   - walk:        kp_store_walk with a visitor that reads each entry's key,
 *   - by-index:    kp_store_by_index of one value (10 entries) + free, the fan-out of a handler,
 *   - walk-index:  kp_store_walk_index of the same value.
 * Figures are ns per visited entry. Run a release build for figures worth comparing; a sanitizer
 * build measures the sanitizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "base/time.h"
#include "k8s/store.h"

struct item {
    struct kp_entry e;
    const char *group;
};

static void by_group(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    emit(((const struct item *)e)->group, ctx);
}

static int add(struct kp_store *s, unsigned i, unsigned groups)
{
    char name[32], group[32];
    struct kp_pack p;
    struct item *it = NULL;
    int r;

    (void)snprintf(name, sizeof(name), "item-%u", i);
    (void)snprintf(group, sizeof(group), "g%u", i % groups);
    kp_pack_init(&p, sizeof(*it));
    for (int pass = 0; pass < 2; pass++) {
        struct item scratch = {0}, *v = &scratch;

        if (pass == 1) {
            if ((r = kp_pack_alloc(&p, &it)) < 0)
                return r;
            v = it;
        }
        kp_pack_entry(&p, &v->e, "ns", name, "uid", "1");
        v->group = kp_pack_str(&p, group);
    }
    if ((r = kp_pack_finish(&p, &it->e)) < 0 || (r = kp_store_put(s, &it->e, NULL)) < 0) {
        kp_entry_unref(&it->e);
        return r;
    }
    return 0;
}

static size_t sink;

static int visit(void *ctx, struct kp_entry *e)
{
    (void)ctx;
    sink += (unsigned char)e->key[0];
    return 0;
}

int main(int argc, char **argv)
{
    unsigned n = 10000, iters = 200;
    struct kp_store *s = NULL;
    struct kp_store_list l;
    uint64_t t0;
    double list_ns, walk_ns, ix_ns, wix_ns;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-n") == 0 && kp_safe_atou32(argv[i + 1], &n) == 0 && n >= 10)
            continue;
        if (strcmp(argv[i], "-i") == 0 && kp_safe_atou32(argv[i + 1], &iters) == 0 && iters > 0)
            continue;
        fprintf(stderr, "usage: bench-store [-n entries (>= 10)] [-i iterations]\n");
        return 2;
    }
    if (kp_store_new(&s) < 0 || kp_store_add_index(s, "group", by_group) < 0)
        return 1;
    for (unsigned i = 0; i < n; i++)
        if (add(s, i, n / 10) < 0)
            return 1;

    t0 = kp_mono_usec();
    for (unsigned k = 0; k < iters; k++) {
        if (kp_store_list(s, &l) < 0)
            return 1;
        sink += l.n;
        kp_store_list_free(&l);
    }
    list_ns = (double)(kp_mono_usec() - t0) * 1000.0 / ((double)iters * n);
    t0 = kp_mono_usec();
    for (unsigned k = 0; k < iters; k++)
        (void)kp_store_walk(s, visit, NULL);
    walk_ns = (double)(kp_mono_usec() - t0) * 1000.0 / ((double)iters * n);
    t0 = kp_mono_usec();
    for (unsigned k = 0; k < iters * 100; k++) {
        if (kp_store_by_index(s, "group", "g7", &l) < 0)
            return 1;
        sink += l.n;
        kp_store_list_free(&l);
    }
    ix_ns = (double)(kp_mono_usec() - t0) * 1000.0 / ((double)iters * 100 * 10);
    t0 = kp_mono_usec();
    for (unsigned k = 0; k < iters * 100; k++)
        (void)kp_store_walk_index(s, "group", "g7", visit, NULL);
    wix_ns = (double)(kp_mono_usec() - t0) * 1000.0 / ((double)iters * 100 * 10);

    printf("bench-store: %u entries, %u iterations (ns per entry visited)\n", n, iters);
    printf("  list        %8.2f\n  walk        %8.2f\n", list_ns, walk_ns);
    printf("  by-index    %8.2f\n  walk-index  %8.2f\n", ix_ns, wix_ns);
    kp_store_free(s);
    return sink == 0; /* keeps the visitor's reads */
}
