/* api/informers.h: typed access to the process's shared informers of the built-in kinds
 * (k8s/registry.h). Each accessor asks the registry for the kind's informer over all
 * namespaces, with the kind's projection and view tag, so every controller that reads Nodes
 * gets the one Node informer, and its entries are always kp_node_view()s.
 *
 * Returns 0 and a borrowed informer (owned by the registry), or the errors of
 * kp_registry_informer(): -EBUSY once the registry has started and the informer did not exist,
 * -EPROTOTYPE when the registry holds the resource under another projection. Main thread,
 * during set-up. */
#ifndef KP_API_INFORMERS_H
#define KP_API_INFORMERS_H

#include "base/macro.h"

struct kp_informer;
struct kp_registry;

int kp_informers_nodes(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;
int kp_informers_pods(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;
int kp_informers_nodeclaims(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;
int kp_informers_nodepools(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;
/* storage.k8s.io/v1 VolumeAttachments and v1 PersistentVolumeClaims (api/obj-storage.h). */
int kp_informers_volumeattachments(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;
int kp_informers_pvcs(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;
/* policy/v1 PodDisruptionBudgets (api/obj-misc.h). */
int kp_informers_pdbs(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;
/* apps/v1 DaemonSets (api/obj-misc.h): the pods every new node will also run. */
int kp_informers_daemonsets(struct kp_registry *reg, struct kp_informer **ret) KP_WUR;

#endif
