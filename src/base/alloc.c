/* DESIGN: allocation wrapper with failure injection.
 *
 * Why: curl's torture tests showed that the only way to know every allocation failure is handled
 * is to fail each one in turn. The counters are C11 atomics so worker threads can allocate
 * freely; the failure trigger is a countdown that one test thread arms. kp_alloc_live() counts
 * successful allocations minus frees of non-NULL pointers, which lets the torture runner detect
 * a leak per iteration without waiting for LeakSanitizer at exit. */
#include "base/alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint_fast64_t kp_calls;
static atomic_int_fast64_t kp_live;
static atomic_uint_fast64_t kp_fail_countdown; /* 0: disarmed; 1: the next call fails */
static atomic_int kp_fail_fired;

/* True when this allocation must fail. */
static int kp_alloc_should_fail(void)
{
    uint_fast64_t c;

    atomic_fetch_add_explicit(&kp_calls, 1, memory_order_relaxed);
    c = atomic_load_explicit(&kp_fail_countdown, memory_order_relaxed);
    while (c != 0) {
        if (atomic_compare_exchange_weak(&kp_fail_countdown, &c, c - 1)) {
            if (c == 1) {
                atomic_store(&kp_fail_fired, 1);
                errno = ENOMEM;
                return 1;
            }
            return 0;
        }
    }
    return 0;
}

static void kp_alloc_track(const void *p)
{
    if (p)
        atomic_fetch_add_explicit(&kp_live, 1, memory_order_relaxed);
}

void *kp_malloc(size_t size)
{
    void *p;

    if (kp_alloc_should_fail())
        return NULL;
    p = malloc(size ? size : 1);
    kp_alloc_track(p);
    return p;
}

void *kp_calloc(size_t nmemb, size_t size)
{
    size_t total;
    void *p;

    if (kp_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (kp_alloc_should_fail())
        return NULL;
    p = calloc(1, total ? total : 1);
    kp_alloc_track(p);
    return p;
}

void *kp_realloc(void *ptr, size_t size)
{
    void *p;

    if (!ptr)
        return kp_malloc(size);
    if (kp_alloc_should_fail())
        return NULL;
    /* A successful realloc of a live pointer leaves the live count unchanged. */
    p = realloc(ptr, size ? size : 1);
    return p;
}

void *kp_reallocarray(void *ptr, size_t nmemb, size_t size)
{
    size_t total;

    if (kp_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return kp_realloc(ptr, total);
}

void *kp_grow_array(void *v, size_t *cap, size_t n, size_t size, size_t first)
{
    size_t ncap;
    void *nv;

    if (n < *cap)
        return v;
    if (*cap == 0)
        ncap = first ? first : 1;
    else if (kp_mul_overflow(*cap, 2, &ncap)) {
        errno = ENOMEM;
        return NULL;
    }
    nv = kp_reallocarray(v, ncap, size);
    if (nv)
        *cap = ncap;
    return nv;
}

void kp_free(void *ptr)
{
    if (!ptr)
        return;
    atomic_fetch_sub_explicit(&kp_live, 1, memory_order_relaxed);
    free(ptr);
}

void *kp_memdup(const void *p, size_t n)
{
    void *q = kp_malloc(n);

    if (q && n)
        memcpy(q, p, n);
    return q;
}

char *kp_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *q = kp_malloc(len + 1);

    if (!q)
        return NULL;
    memcpy(q, s, len);
    q[len] = '\0';
    return q;
}

char *kp_strdup(const char *s)
{
    return kp_strndup(s, strlen(s));
}

void kp_wipe(void *p, size_t n)
{
    if (p && n)
        explicit_bzero(p, n);
}

void kp_alloc_fail_at(uint64_t n)
{
    atomic_store(&kp_fail_fired, 0);
    atomic_store(&kp_fail_countdown, n);
}

int kp_alloc_failed(void)
{
    return atomic_load(&kp_fail_fired);
}

uint64_t kp_alloc_calls(void)
{
    return atomic_load(&kp_calls);
}

int64_t kp_alloc_live(void)
{
    return atomic_load(&kp_live);
}
