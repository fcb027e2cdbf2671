/* Fuzz driver for api/requirements.h. The input is two selectors in the string form of
 * api/selector.h, separated by the first newline ("zone in (a,b),cpu>3\nzone notin (b)"); each
 * becomes a requirement set. Properties (abort on violation): intersection is commutative and
 * idempotent, and for every key and every value drawn from either input (plus "8" and "") a
 * value is in A ∩ B exactly when it is in both; Intersects is symmetric, agrees with a
 * non-empty intersection on every common key (two NotIn/DoesNotExist sets aside), and always
 * explains a failure within the reason buffer; Compatible implies Intersects; copies compare
 * equal; nothing leaks (LeakSanitizer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/requirements.h"
#include "api/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int build(const char *p, size_t n, struct kp_reqset *ret)
{
    struct kp_selector *sel = NULL;
    int r;

    *ret = (struct kp_reqset)KP_REQSET_INIT;
    if (kp_selector_parse(p, n, &sel, NULL) < 0)
        return -1;
    r = kp_selector_count(sel)
            ? kp_reqset_add_requirements(ret, kp_selector_at(sel, 0), kp_selector_count(sel))
            : 0;
    kp_selector_free(sel);
    return r;
}

static bool has(const struct kp_reqset *s, const char *key, const char *v)
{
    const struct kp_req *r = kp_reqset_get(s, key);

    return !r || kp_req_has(r, v); /* an absent key allows everything */
}

static void check_values(const struct kp_reqset *a, const struct kp_reqset *b,
                         const struct kp_reqset *ab, const struct kp_reqset *src)
{
    for (size_t i = 0; i < src->n; i++) {
        const char *key = src->v[i].key;
        const char *extra[] = {"8", "", "-1"};

        for (size_t j = 0; j < src->v[i].n_values + 3; j++) {
            const char *v =
                j < src->v[i].n_values ? src->v[i].values[j] : extra[j - src->v[i].n_values];

            if (has(ab, key, v) != (has(a, key, v) && has(b, key, v)))
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *nl = memchr(data, '\n', size);
    size_t na = nl ? (size_t)(nl - p) : size;
    struct kp_reqset a, b, ab = KP_REQSET_INIT, ba = KP_REQSET_INIT, aa = KP_REQSET_INIT;
    char why[KP_REQSET_WHY_SIZE];
    bool x, y;

    if (build(p, na, &a) < 0) {
        kp_reqset_done(&a);
        return 0;
    }
    if (build(nl ? nl + 1 : "", nl ? size - na - 1 : 0, &b) < 0)
        goto out;
    if (kp_reqset_copy(&a, &ab) < 0 || kp_reqset_intersect(&ab, &b) < 0 ||
        kp_reqset_copy(&b, &ba) < 0 || kp_reqset_intersect(&ba, &a) < 0 ||
        kp_reqset_copy(&a, &aa) < 0)
        goto out; /* past a limit: nothing to check */
    if (!kp_reqset_equal(&aa, &a))
        abort();
    if (kp_reqset_intersect(&aa, &a) < 0)
        goto out;
    if (!kp_reqset_equal(&aa, &a) || !kp_reqset_equal(&ab, &ba))
        abort();
    check_values(&a, &b, &ab, &a);
    check_values(&a, &b, &ab, &b);

    why[0] = '\0';
    x = kp_reqset_intersects(&a, &b, why, sizeof(why));
    y = kp_reqset_intersects(&b, &a, NULL, 0);
    if (x != y || (!x && (!why[0] || strlen(why) >= sizeof(why))))
        abort();
    /* Intersects holds when every common key's intersection allows some value; a key set that
     * lost every value is a failure unless both sides only said "not this". */
    {
        bool expect = true;

        for (size_t i = 0; i < a.n; i++) {
            const struct kp_req *rb = kp_reqset_get(&b, a.v[i].key);
            const struct kp_req *r = kp_reqset_get(&ab, a.v[i].key);
            enum kp_selector_op oa = kp_req_operator(&a.v[i]), ob;

            if (!rb)
                continue;
            ob = kp_req_operator(rb);
            if (kp_req_operator(r) == KP_SEL_DOES_NOT_EXIST &&
                !((oa == KP_SEL_NOT_IN || oa == KP_SEL_DOES_NOT_EXIST) &&
                  (ob == KP_SEL_NOT_IN || ob == KP_SEL_DOES_NOT_EXIST)))
                expect = false;
        }
        /* A complement narrowed to a range with no listed value may still look non-empty:
         * only the direction "empty intersection => no intersects" is exact. */
        if (!expect && x)
            abort();
    }
    if (kp_reqset_compatible(&a, &b, NULL, why, sizeof(why)) && !x)
        abort();
out:
    kp_reqset_done(&a);
    kp_reqset_done(&b);
    kp_reqset_done(&ab);
    kp_reqset_done(&ba);
    kp_reqset_done(&aa);
    return 0;
}
