/* api/informers.c: the typed registry accessors (informers.h). */
#include "api/informers.h"

#include "api/obj-karpenter.h"
#include "api/obj-misc.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"

int kp_informers_nodes(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_NODE, kp_node_project, kp_kind_node, NULL, ret);
}

int kp_informers_pods(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_POD, kp_pod_project, kp_kind_pod, NULL, ret);
}

int kp_informers_nodeclaims(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_NODECLAIM, kp_nodeclaim_project, kp_kind_nodeclaim, NULL,
                             ret);
}

int kp_informers_nodepools(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_NODEPOOL, kp_nodepool_project, kp_kind_nodepool, NULL,
                             ret);
}

int kp_informers_volumeattachments(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_VOLUMEATTACHMENT, kp_volumeattachment_project,
                             kp_kind_volumeattachment, NULL, ret);
}

int kp_informers_pvcs(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_PVC, kp_pvc_project, kp_kind_pvc, NULL, ret);
}

int kp_informers_pdbs(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_PDB, kp_pdb_project, kp_kind_pdb, NULL, ret);
}

int kp_informers_daemonsets(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_DAEMONSET, kp_daemonset_project, kp_kind_daemonset, NULL,
                             ret);
}
