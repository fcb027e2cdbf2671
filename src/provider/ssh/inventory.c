/* provider/ssh/inventory.c: instance types from host classes (inventory.h).
 *
 * DESIGN: the core asks for instance types on every scheduling pass, so this is a pure function of
 * one node class and a snapshot of the SSHHost store: no API calls, no caching of its own. Classes
 * are gathered in one pass over the hosts (a small array of class names with their running minimum
 * capacity, arch and availability), then each class becomes one struct kp_instance_type (what each
 * number means for users: docs/api.md, SSHHost capacity and SSHNodeClass kubeReserved and maxPods).
 * An offering is available only for a host the claim path would take (no maintenance annotation),
 * so the core never launches for a host it cannot get. Pure; any thread. */
#include "provider/ssh/inventory.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/str.h"
#include "core/provider.h"
#include "api/obj-karpenter.h"
#include "api/requirements.h"
#include "provider/ssh/obj-kpssh.h"

bool kp_inventory_member(const struct kp_sshnodeclass_view *nc, const char *pool_ns,
                         const struct kp_sshhost_view *h)
{
    return kp_streq(h->e.ns, pool_ns) && kp_sshnodeclass_selects(nc, &h->meta.labels);
}

bool kp_inventory_claimable(const struct kp_sshhost_view *h)
{
    return h->state == KP_HOST_AVAILABLE && !h->claim_name && !h->maintenance;
}

void kp_inventory_address_key(const struct kp_sshhost_view *h, char *buf, size_t size)
{
    size_t i = 0;

    buf[0] = '\0';
    if (!h->address || !*h->address || size == 0)
        return;
    for (; h->address[i] && i + 1 < size; i++)
        buf[i] = (char)tolower((unsigned char)h->address[i]);
    buf[i] = '\0';
    if (i < size)
        (void)snprintf(buf + i, size - i, ":%" PRId32, h->port);
}

bool kp_inventory_same_address(const struct kp_sshhost_view *a, const struct kp_sshhost_view *b)
{
    if (a == b || (kp_streq(a->e.ns, b->e.ns) && kp_streq(a->e.name, b->e.name)))
        return false;
    return a->address && b->address && a->port == b->port &&
           strcasecmp(a->address, b->address) == 0;
}

/* True when a was created before b (ties: by name, then namespace). */
static bool older(const struct kp_sshhost_view *a, const struct kp_sshhost_view *b)
{
    int c;

    if (a->meta.creation_usec != b->meta.creation_usec)
        return a->meta.creation_usec < b->meta.creation_usec;
    c = strcmp(a->e.name ? a->e.name : "", b->e.name ? b->e.name : "");
    if (c == 0)
        c = strcmp(a->e.ns ? a->e.ns : "", b->e.ns ? b->e.ns : "");
    return c < 0;
}

const struct kp_sshhost_view *kp_inventory_duplicate_of(const struct kp_sshhost_view *h,
                                                        const struct kp_sshhost_view *const *hosts,
                                                        size_t n)
{
    const struct kp_sshhost_view *first = NULL;

    for (size_t i = 0; i < n; i++)
        if (kp_inventory_same_address(h, hosts[i]) && older(hosts[i], h) &&
            (!first || older(hosts[i], first)))
            first = hosts[i];
    return first;
}

const char *kp_inventory_arch(const char *observed)
{
    if (!observed)
        return NULL;
    if (kp_streq(observed, "amd64") || kp_streq(observed, "x86_64"))
        return "amd64";
    if (kp_streq(observed, "arm64") || kp_streq(observed, "aarch64"))
        return "arm64";
    return NULL;
}

/* One class while gathering: borrowed pointers into the host views. */
struct klass {
    const char *name;
    const struct kp_sshhost_view *first; /* the first member: its resource names are the set */
    size_t members;
    const char *arch; /* normalised; NULL until a probed member is seen */
    const char *bad_arch;
    bool mixed;
    bool available;
};

static int klass_cmp(const void *a, const void *b)
{
    return strcmp(((const struct klass *)a)->name, ((const struct klass *)b)->name);
}

static bool host_usable(const struct kp_sshhost_view *h)
{
    return kp_resources_get(&h->capacity, "cpu", NULL) > 0 &&
           kp_resources_get(&h->capacity, "memory", NULL) > 0;
}

static int skip(struct kp_strv *skipped, const char *cls, const char *why, const char *what)
{
    char *line;
    int r;

    if (!skipped)
        return 0;
    line = kp_strjoin(cls, ": ", why, what ? what : "", (const char *)NULL);
    if (!line)
        return -ENOMEM;
    r = kp_strv_consume(skipped, line);
    return r;
}

/* Builds the type of class k over the hosts. 0, -ENOMEM. */
static int build_type(const struct kp_sshnodeclass_view *nc, const char *pool_ns,
                      const struct kp_sshhost_view *const *hosts, size_t n_hosts,
                      const struct klass *k, struct kp_instance_type *it)
{
    const struct kp_resources *first = &k->first->capacity;
    int64_t cpu = 0;
    int r;

    memset(it, 0, sizeof(*it));
    it->name = kp_strdup(k->name);
    if (!it->name)
        return -ENOMEM;
    for (size_t i = 0; i < first->n; i++) {
        const char *res = first->v[i].name;
        int64_t min = first->v[i].milli;
        bool everywhere = true;

        if (kp_streq(res, "pods"))
            continue; /* below */
        for (size_t j = 0; j < n_hosts && everywhere; j++) {
            const struct kp_sshhost_view *h = hosts[j];
            bool found;
            int64_t v;

            if (!kp_inventory_member(nc, pool_ns, h) || !host_usable(h) ||
                !kp_streq(kp_sshhost_class(h), k->name))
                continue;
            v = kp_resources_get(&h->capacity, res, &found);
            if (!found)
                everywhere = false;
            else if (v < min)
                min = v;
        }
        if (!everywhere)
            continue;
        if (kp_streq(res, "cpu"))
            cpu = min;
        if ((r = kp_provider_res_add(&it->capacity, &it->n_capacity, res, min)) < 0)
            return r;
    }
    {
        int64_t pods = KP_SSHNODECLASS_MAX_PODS_DEFAULT * 1000LL;
        bool all_pods = true;
        int64_t min_pods = INT64_MAX;

        if (nc->max_pods > 0)
            pods = (int64_t)nc->max_pods * 1000;
        else {
            for (size_t j = 0; j < n_hosts; j++) {
                const struct kp_sshhost_view *h = hosts[j];
                bool found;
                int64_t v;

                if (!kp_inventory_member(nc, pool_ns, h) || !host_usable(h) ||
                    !kp_streq(kp_sshhost_class(h), k->name))
                    continue;
                v = kp_resources_get(&h->capacity, "pods", &found);
                if (!found)
                    all_pods = false;
                else if (v < min_pods)
                    min_pods = v;
            }
            if (all_pods && min_pods != INT64_MAX)
                pods = min_pods;
        }
        if ((r = kp_provider_res_add(&it->capacity, &it->n_capacity, "pods", pods)) < 0)
            return r;
    }
    if (nc->kube_reserved.n == 0) {
        if ((r = kp_provider_res_add(&it->overhead, &it->n_overhead, "cpu",
                                     KP_INVENTORY_KUBE_RESERVED_CPU_MILLI)) < 0 ||
            (r = kp_provider_res_add(&it->overhead, &it->n_overhead, "memory",
                                     KP_INVENTORY_KUBE_RESERVED_MEM_MILLI)) < 0)
            return r;
    } else {
        for (size_t i = 0; i < nc->kube_reserved.n; i++)
            if ((r = kp_provider_res_add(&it->overhead, &it->n_overhead,
                                         nc->kube_reserved.v[i].name,
                                         nc->kube_reserved.v[i].milli)) < 0)
                return r;
    }
    if ((r = kp_provider_kv_add(&it->labels, &it->n_labels, KP_LABEL_INSTANCE_TYPE, k->name)) < 0 ||
        (r = kp_provider_kv_add(&it->labels, &it->n_labels, KP_LABEL_ARCH, k->arch)) < 0 ||
        (r = kp_provider_kv_add(&it->labels, &it->n_labels, KP_LABEL_OS, KP_INVENTORY_OS)) < 0 ||
        (r = kp_provider_kv_add(&it->labels, &it->n_labels, KP_LABEL_ZONE, KP_INVENTORY_ZONE)) <
            0 ||
        (r = kp_provider_kv_add(&it->labels, &it->n_labels, KP_LABEL_CAPACITY_TYPE,
                                KP_CAPACITY_TYPE_ON_DEMAND)) < 0)
        return r;
    {
        const char *name = k->name, *arch = k->arch, *os = KP_INVENTORY_OS;
        const char *zone = KP_INVENTORY_ZONE, *ct = KP_CAPACITY_TYPE_ON_DEMAND;

        /* One zone and one capacity type per class today, so the type's sets and its
         * offering's are single values; the sets are what the scheduler intersects. */
        if ((r = kp_reqset_add(&it->reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, &name, 1, 0)) < 0 ||
            (r = kp_reqset_add(&it->reqs, KP_LABEL_ARCH, KP_SEL_IN, &arch, 1, 0)) < 0 ||
            (r = kp_reqset_add(&it->reqs, KP_LABEL_OS, KP_SEL_IN, &os, 1, 0)) < 0 ||
            (r = kp_reqset_add(&it->reqs, KP_LABEL_ZONE, KP_SEL_IN, &zone, 1, 0)) < 0 ||
            (r = kp_reqset_add(&it->reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1, 0)) < 0)
            return r;
        it->offerings = kp_calloc(1, sizeof(*it->offerings));
        if (!it->offerings)
            return -ENOMEM;
        it->n_offerings = 1;
        if ((r = kp_reqset_add(&it->offerings[0].reqs, KP_LABEL_ZONE, KP_SEL_IN, &zone, 1, 0)) <
                0 ||
            (r = kp_reqset_add(&it->offerings[0].reqs, KP_LABEL_CAPACITY_TYPE, KP_SEL_IN, &ct, 1,
                               0)) < 0)
            return r;
    }
    /* micro-USD per vCPU-hour x milli-vCPU / 1000; cpu and price are small (the CRD bounds the
     * price's text to 32 characters, a host's cpu to what a machine has). */
    it->offerings[0].price_micro_usd = nc->price_micro_usd * cpu / 1000;
    it->offerings[0].available = k->available;
    return 0;
}

int kp_inventory_instance_types(const struct kp_sshnodeclass_view *nc, const char *pool_ns,
                                const struct kp_sshhost_view *const *hosts, size_t n_hosts,
                                struct kp_instance_types *ret, struct kp_strv *ret_skipped)
{
    struct kp_instance_types out = {0};
    struct kp_strv skipped = KP_STRV_INIT;
    struct klass *cls = NULL;
    size_t ncls = 0;
    int r;

    if (nc->price_micro_usd < 0)
        return -EINVAL;
    cls = kp_calloc(n_hosts ? n_hosts : 1, sizeof(*cls));
    if (!cls)
        return -ENOMEM;
    for (size_t i = 0; i < n_hosts; i++) {
        const struct kp_sshhost_view *h = hosts[i];
        const char *name, *arch;
        struct klass *k = NULL;

        if (!kp_inventory_member(nc, pool_ns, h) || !host_usable(h))
            continue;
        name = kp_sshhost_class(h);
        for (size_t j = 0; j < ncls && !k; j++)
            if (kp_streq(cls[j].name, name))
                k = &cls[j];
        if (!k) {
            k = &cls[ncls++];
            k->name = name;
            k->first = h;
        }
        k->members++;
        if (kp_inventory_claimable(h))
            k->available = true;
        if (!h->observed_arch || !*h->observed_arch)
            continue; /* not probed yet: says nothing about the arch */
        arch = kp_inventory_arch(h->observed_arch);
        if (!arch)
            k->bad_arch = h->observed_arch;
        else if (k->arch && !kp_streq(k->arch, arch))
            k->mixed = true;
        else
            k->arch = arch;
    }
    qsort(cls, ncls, sizeof(*cls), klass_cmp);

    out.v = kp_calloc(ncls ? ncls : 1, sizeof(*out.v));
    if (!out.v) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < ncls; i++) {
        const struct klass *k = &cls[i];

        if (k->bad_arch) {
            if ((r = skip(&skipped, k->name, "unsupported arch ", k->bad_arch)) < 0)
                goto out;
            continue;
        }
        if (k->mixed) {
            if ((r = skip(&skipped, k->name, "hosts of mixed arch", NULL)) < 0)
                goto out;
            continue;
        }
        if (!k->arch) {
            if ((r = skip(&skipped, k->name, "no host probed yet (arch unknown)", NULL)) < 0)
                goto out;
            continue;
        }
        r = build_type(nc, pool_ns, hosts, n_hosts, k, &out.v[out.n]);
        out.n++; /* counted even when half built, so _done frees it */
        if (r < 0)
            goto out;
    }
    *ret = out;
    out = (struct kp_instance_types){0};
    if (ret_skipped) {
        kp_strv_done(ret_skipped);
        *ret_skipped = skipped;
        skipped = (struct kp_strv)KP_STRV_INIT;
    }
    r = 0;
out:
    kp_instance_types_done(&out);
    kp_strv_done(&skipped);
    kp_free(cls);
    return r;
}

bool kp_inventory_fits(const struct kp_instance_type *it, const struct kp_nodeclaim_view *nc)
{
    struct kp_reqset want;
    bool ok = false;

    /* An amount too large to hold is kept aside in requests.bad, not in v: it fits nothing. */
    if (nc->requests.n_bad > 0)
        return false;
    if (kp_reqset_from_nodeclaim(nc, &want) < 0)
        return false; /* refused by the projection, or out of memory: not a fit to claim on */
    /* The type's set must meet the claim's, and so must one available offering's. Keys the
     * type does not define (karpenter.sh/nodepool, ...) are the core's and constrain nothing. */
    if (kp_reqset_intersects(&want, &it->reqs, NULL, 0))
        for (size_t i = 0; i < it->n_offerings && !ok; i++)
            ok = it->offerings[i].available &&
                 kp_reqset_intersects(&want, &it->offerings[i].reqs, NULL, 0);
    kp_reqset_done(&want);
    if (!ok)
        return false;
    for (size_t i = 0; i < nc->requests.n; i++) {
        const struct kp_res *rq = &nc->requests.v[i];

        if (rq->milli > 0 && rq->milli > kp_instance_type_allocatable(it, rq->name))
            return false;
    }
    return true;
}
