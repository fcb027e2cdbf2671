/* Fuzz driver: every built-in projection decoder over the same bytes. Each must either refuse
 * the input or produce an entry whose fields are consistent (key built from ns and name, every
 * array of the length it claims) and whose fingerprint does not depend on the address it was
 * packed at (decoding twice gives equal hashes). Pods, DaemonSets and PVCs have their arrays
 * walked in full. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/obj-misc.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(const struct kp_entry *e)
{
    size_t nl = strlen(e->name);

    if (!*e->ns) {
        if (strcmp(e->key, e->name) != 0)
            abort();
    } else if (strncmp(e->key, e->ns, strlen(e->ns)) != 0 ||
               strcmp(e->key + strlen(e->ns) + 1, e->name) != 0 || nl == 0) {
        abort();
    }
}

static void run(int (*decode)(const char *, size_t, struct kp_entry **), const uint8_t *data,
                size_t size)
{
    struct kp_entry *a = NULL, *b = NULL;

    if (decode((const char *)data, size, &a) < 0)
        return;
    check_entry(a);
    if (decode((const char *)data, size, &b) < 0 || a->hash != b->hash || a->bytes != b->bytes)
        abort();
    kp_entry_unref(a);
    kp_entry_unref(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kp_entry *e = NULL;

    run(kp_pod_decode, data, size);
    run(kp_node_decode, data, size);
    run(kp_pdb_decode, data, size);
    run(kp_daemonset_decode, data, size);
    run(kp_lease_decode, data, size);
    run(kp_volumeattachment_decode, data, size);
    run(kp_pvc_decode, data, size);
    /* A pod's arrays are walked in full: sizes must match what was packed. */
    if (kp_pod_decode((const char *)data, size, &e) == 0) {
        const struct kp_pod_view *p = kp_pod_view(e);
        size_t total = 0;

        for (size_t i = 0; i < p->requests.n; i++)
            total += strlen(p->requests.v[i].name);
        for (size_t i = 0; i < p->n_required; i++)
            for (size_t j = 0; j < p->required[i].exprs.n; j++)
                total += strlen(p->required[i].exprs.v[j].key);
        for (size_t i = 0; i < p->limits.n; i++)
            total += strlen(p->limits.v[i].name);
        for (size_t i = 0; i < p->n_host_ports; i++)
            total += p->host_ports[i].ip ? strlen(p->host_ports[i].ip) : 0;
        if (p->owner_kind)
            total += strlen(p->owner_kind) + strlen(p->owner_name);
        if (p->do_not_disrupt)
            total += strlen(p->do_not_disrupt);
        for (size_t i = 0; i < p->tolerations.n; i++)
            total += p->tolerations.v[i].key ? strlen(p->tolerations.v[i].key) : 0;
        if (total > size)
            abort();
        kp_entry_unref(e);
    }
    /* So are a DaemonSet's: what the scheduler reads of every template. */
    if (kp_daemonset_decode((const char *)data, size, &e) == 0) {
        const struct kp_daemonset_view *d = kp_daemonset_view(e);
        size_t total = 0;

        for (size_t i = 0; i < d->requests.n; i++)
            total += strlen(d->requests.v[i].name);
        for (size_t i = 0; i < d->node_selector.n; i++)
            total += strlen(d->node_selector.v[i].key);
        for (size_t i = 0; i < d->tolerations.n; i++)
            total += d->tolerations.v[i].key ? strlen(d->tolerations.v[i].key) : 0;
        for (size_t i = 0; i < d->n_required; i++)
            for (size_t j = 0; j < d->required[i].exprs.n; j++)
                total += strlen(d->required[i].exprs.v[j].key);
        for (size_t i = 0; i < d->n_host_ports; i++) {
            if (d->host_ports[i].port < 1 || d->host_ports[i].port > 65535)
                abort();
            total += d->host_ports[i].ip ? strlen(d->host_ports[i].ip) : 0;
        }
        if (total > size)
            abort();
        kp_entry_unref(e);
    }
    /* A PVC's strings point into its own block and come from the input. */
    if (kp_pvc_decode((const char *)data, size, &e) == 0) {
        const struct kp_pvc_view *c = kp_pvc_view(e);
        size_t total = (c->volume_name ? strlen(c->volume_name) : 0) +
                       (c->storage_class ? strlen(c->storage_class) : 0);

        if (total > size || (c->storage_class && !*c->storage_class))
            abort();
        kp_entry_unref(e);
    }
    return 0;
}
