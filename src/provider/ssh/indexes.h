/* provider/ssh/indexes.h: the store indexes the SSH provider's controllers share.
 *
 * Several controllers read the same informers (one Node informer for the provider, the host
 * controller and the startup taint gate), so the indexes are defined once here. Each
 * kp_ssh_index_* call adds its indexes to an informer that has not started and is idempotent:
 * a second call (another controller asking for the same index) is a no-op. */
#ifndef KP_PROVIDER_SSH_INDEXES_H
#define KP_PROVIDER_SSH_INDEXES_H

#include "base/macro.h"

struct kp_informer;

/* Nodes: by status InternalIP address (every one), and by spec.providerID. */
#define KP_SSH_INDEX_NODE_IP "internal-ip"
#define KP_SSH_INDEX_NODE_PROVIDER_ID "provider-id"
/* NodeClaims: by spec.nodeClassRef.name, for NodeClaims whose nodeClassRef is an SSHNodeClass. */
#define KP_SSH_INDEX_NODECLAIM_CLASS "nodeclass"
/* Pods: by spec.nodeName (bound pods only). */
#define KP_SSH_INDEX_POD_NODE "node"
/* SSHHosts: by status.claimRef.name (claimed hosts only). */
#define KP_SSH_INDEX_HOST_CLAIM "claim"
/* SSHHosts: by address key (inventory.h kp_inventory_address_key). */
#define KP_SSH_INDEX_HOST_ADDRESS "address"

/* 0, or an error of kp_informer_add_index() other than -EEXIST. */
int kp_ssh_index_nodes(struct kp_informer *nodes) KP_WUR;
int kp_ssh_index_nodeclaims(struct kp_informer *nodeclaims) KP_WUR;
int kp_ssh_index_pods(struct kp_informer *pods) KP_WUR;
int kp_ssh_index_hosts(struct kp_informer *hosts) KP_WUR;

#endif
