/* provider/ssh/indexes.h: the SSH provider's store indexes and its shared informers.
 *
 * Indexes of the built-in kinds that any controller may use (pods by node, Nodes by address and
 * providerID) are api/indexes.h's; the KP_SSH_INDEX_* names of those below are the same indexes
 * under their older names, so the provider's lookups read unchanged. What is kpssh's own lives
 * here: SSHHosts by claim and by address, NodeClaims of an SSHNodeClass by class. Controllers
 * add them with kp_controller_add_index(); kp_ssh_index_nodes() is for the provider, which
 * reads the Node store without a skeleton of its own. */
#ifndef KP_PROVIDER_SSH_INDEXES_H
#define KP_PROVIDER_SSH_INDEXES_H

#include "base/macro.h"
#include "api/indexes.h"

struct kp_informer;
struct kp_registry;

/* Nodes: by their first status InternalIP address, and by spec.providerID (api/indexes.h). */
#define KP_SSH_INDEX_NODE_IP KP_INDEX_NODE_IP
#define KP_SSH_INDEX_NODE_PROVIDER_ID KP_INDEX_NODE_PROVIDER_ID
/* Pods: by spec.nodeName (bound pods only; api/indexes.h). */
#define KP_SSH_INDEX_POD_NODE KP_INDEX_POD_NODE
/* NodeClaims: by spec.nodeClassRef.name, for NodeClaims whose nodeClassRef is an SSHNodeClass. */
#define KP_SSH_INDEX_NODECLAIM_CLASS "nodeclass"
/* SSHHosts: by status.claimRef.name (claimed hosts only). */
#define KP_SSH_INDEX_HOST_CLAIM "claim"
/* SSHHosts: by address key (inventory.h kp_inventory_address_key). */
#define KP_SSH_INDEX_HOST_ADDRESS "address"

/* The index functions of the kpssh indexes, for kp_controller_add_index(). Pure. */
void kp_ssh_index_nodeclaim_class(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);
void kp_ssh_index_host_claim(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);
void kp_ssh_index_host_address(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx);

/* Adds the Node indexes to an informer that has not started; idempotent when the index of the
 * name is already there with the same function (another controller asked for it). 0, -EEXIST
 * (the name is taken by another function), or another error of kp_informer_add_index(). */
int kp_ssh_index_nodes(struct kp_informer *nodes) KP_WUR;

/* The process's informers of the kpssh kinds (k8s/registry.h, typed like api/informers.h):
 * SSHHosts of pool_ns, SSHNodeClasses and SSHJoinProfiles (cluster-scoped). Borrowed; errors of
 * kp_registry_informer(). Main thread, during set-up. */
int kp_ssh_informer_hosts(struct kp_registry *reg, const char *pool_ns,
                          struct kp_informer **ret) KP_WUR;
int kp_ssh_informer_nodeclasses(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;
int kp_ssh_informer_profiles(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;

#endif
