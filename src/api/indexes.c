/* api/indexes.c: the shared indexes of the built-in kinds (indexes.h). Each reads its entry
 * through the checked view accessor, so an index put on the wrong kind's store aborts at the
 * first entry instead of reading another layout. */
#include "api/indexes.h"

#include "base/str.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"

void kp_index_node_ip(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const struct kp_node_view *nv = kp_node_view(e);

    /* Every address, each once (the store would file a repeated one twice). */
    for (size_t i = 0; i < nv->n_addresses; i++) {
        bool seen = false;

        for (size_t j = 0; j < i && !seen; j++)
            seen = kp_streq(nv->addresses[j], nv->addresses[i]);
        if (!seen)
            kp_index_emit_if(nv->addresses[i], emit, ctx);
    }
}

void kp_index_node_provider_id(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    kp_index_emit_if(kp_node_view(e)->provider_id, emit, ctx);
}

void kp_index_pod_node(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    kp_index_emit_if(kp_pod_view(e)->node_name, emit, ctx);
}

void kp_index_nodeclaim_nodepool(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    kp_index_emit_if(kp_nodeclaim_view(e)->nodepool, emit, ctx);
}

void kp_index_nodeclaim_provider_id(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    kp_index_emit_if(kp_nodeclaim_view(e)->provider_id, emit, ctx);
}

void kp_index_volumeattachment_node(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    kp_index_emit_if(kp_volumeattachment_view(e)->node_name, emit, ctx);
}
