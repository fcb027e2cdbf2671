/* api/indexes.h: store indexes of the built-in kinds that any controller may share: pods by
 * node, Nodes by address and providerID, NodeClaims by NodePool and providerID,
 * VolumeAttachments by node.
 *
 * Each index is a name and a pure function (k8s/store.h kp_index_fn). A controller registers
 * the ones it reads on the shared informer (api/informers.h) with kp_controller_add_index()
 * (k8s/controller.h), which accepts an index already there with the same function, so the SSH
 * provider's controllers and the core's can ask for the same index and the store keeps one.
 * Indexes particular to one provider (SSHHosts by address, NodeClaims of an SSHNodeClass) live
 * with that provider (provider/ssh/indexes.h).
 *
 * Index functions run under the store's write lock: they only read the entry. Any thread. */
#ifndef KP_API_INDEXES_H
#define KP_API_INDEXES_H

#include "k8s/store.h"

/* Nodes: by every status.addresses address (InternalIP, ExternalIP, ...: what adoption and the
 * host controller match a host's node IP against), and by spec.providerID. The index keeps its
 * old name. */
#define KP_INDEX_NODE_IP "internal-ip"
#define KP_INDEX_NODE_PROVIDER_ID "provider-id"
void kp_index_node_ip(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);
void kp_index_node_provider_id(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);

/* Pods: by spec.nodeName (bound pods only). */
#define KP_INDEX_POD_NODE "node"
void kp_index_pod_node(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);

/* NodeClaims: by label karpenter.sh/nodepool, and by status.providerID (launched ones). */
#define KP_INDEX_NODECLAIM_NODEPOOL "nodepool"
#define KP_INDEX_NODECLAIM_PROVIDER_ID "provider-id"
void kp_index_nodeclaim_nodepool(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);
void kp_index_nodeclaim_provider_id(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);

/* VolumeAttachments: by spec.nodeName (what a terminating Node waits on). */
#define KP_INDEX_VOLUMEATTACHMENT_NODE "node"
void kp_index_volumeattachment_node(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);

#endif
