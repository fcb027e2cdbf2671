/* DESIGN: fuzz driver for cmd/kpssh/itypes.c (what `kpssh simulate --instance-types` reads).
 *
 * Parses the input as an InstanceTypes document. Checks: the answer is 0, -KP_EPARSE,
 * -KP_ELIMIT or -ENOMEM; a refusal other than -ENOMEM comes with a one-line message and leaves
 * the output untouched; an accepted document gives types the scheduler may trust: sorted by
 * unique name, within the ceilings, each with instance type In [its name], cpu, memory and pods
 * in capacity, one to KP_ITYPES_MAX_OFFERINGS offerings each with one zone and one capacity type
 * its type's set admits, and a price within bounds. Then the types go into the wrapping provider,
 * whose catalog must hold them all. Any broken promise calls abort(). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "api/requirements.h"
#include "core/provider.h"
#include "cmd/kpssh/itypes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *fake_name(void *self)
{
    (void)self;
    return "fuzz";
}

static void check_type(const struct kp_instance_type *it)
{
    const struct kp_req *name = kp_reqset_get(&it->reqs, KP_LABEL_INSTANCE_TYPE);

    if (!it->name || !name || !kp_req_single(name) || strcmp(kp_req_single(name), it->name) != 0)
        abort();
    if (kp_provider_res_get(it->capacity, it->n_capacity, "cpu", NULL) <= 0 ||
        kp_provider_res_get(it->capacity, it->n_capacity, "memory", NULL) <= 0 ||
        kp_provider_res_get(it->capacity, it->n_capacity, "pods", NULL) < 0)
        abort();
    if (it->n_offerings == 0 || it->n_offerings > KP_ITYPES_MAX_OFFERINGS)
        abort();
    for (size_t i = 0; i < it->n_offerings; i++) {
        const struct kp_offering *of = &it->offerings[i];
        const char *zone = kp_offering_value(of, KP_LABEL_ZONE);
        const char *ct = kp_offering_value(of, KP_LABEL_CAPACITY_TYPE);

        if (!zone || !ct || of->price_micro_usd < 0 ||
            of->price_micro_usd > (int64_t)KP_ITYPES_MAX_PRICE_USD * 1000000)
            abort();
        if (!kp_req_has(kp_reqset_get(&it->reqs, KP_LABEL_ZONE), zone) ||
            !kp_req_has(kp_reqset_get(&it->reqs, KP_LABEL_CAPACITY_TYPE), ct))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct kp_provider_ops ops = {.name = fake_name};
    struct kp_provider inner = {.ops = &ops, .self = NULL};
    struct kp_instance_types t = {0};
    struct kp_itypes_provider *ip = NULL;
    char *msg = NULL;
    int r;

    if (size > (1u << 20))
        return 0;
    r = kp_itypes_parse((const char *)data, size, "fuzz", &t, &msg);
    if (r != 0 && r != -KP_EPARSE && r != -KP_ELIMIT && r != -ENOMEM)
        abort();
    if (r < 0) {
        if ((r != -ENOMEM && !msg) || (msg && strchr(msg, '\n')) || t.v || t.n)
            abort();
        kp_free(msg);
        return 0;
    }
    if (msg || t.n > KP_ITYPES_MAX_ITEMS || !kp_instance_types_equal(&t, &t))
        abort();
    for (size_t i = 0; i < t.n; i++) {
        check_type(&t.v[i]);
        if (i > 0 && strcmp(t.v[i - 1].name, t.v[i].name) >= 0)
            abort();
    }
    if (kp_itypes_provider_new(&inner, &t, &ip) == 0) {
        struct kp_provider p = kp_itypes_provider_as_provider(ip);
        struct kp_instance_catalog *cat = NULL;

        if (p.ops->get_instance_types(p.self, NULL, NULL, NULL, &cat, NULL) < 0 || !cat)
            abort();
        for (size_t i = 0; i < cat->n; i++)
            if (kp_instance_catalog_find(cat, cat->v[i].name) != &cat->v[i])
                abort();
        kp_instance_catalog_unref(cat);
    }
    kp_itypes_provider_free(ip);
    kp_instance_types_done(&t);
    return 0;
}
