/* api/obj-node.h: the Node projection (api/obj.h). */
#ifndef KP_API_OBJ_NODE_H
#define KP_API_OBJ_NODE_H

#include "api/obj.h"

struct kp_node_view {
    struct kp_entry e;
    struct kp_meta meta;
    /* metadata.annotations in the karpenter.sh/ domain only (do-not-sync-taints,
     * do-not-disrupt): the rest are other components' and cost memory per Node */
    struct kp_labels annotations;
    const char *provider_id;   /* spec.providerID; NULL when unset */
    const char *internal_ip;   /* first InternalIP address, or NULL */
    const char *hostname;      /* first Hostname address, or NULL */
    bool unschedulable;        /* spec.unschedulable (cordoned) */
    enum kp_cond_status ready; /* condition Ready */
    struct kp_taints taints;
    struct kp_resources capacity;
    struct kp_resources allocatable;
    struct kp_conditions conditions;
    const char *const *finalizers;
    size_t n_finalizers;
    const char *const *addresses; /* every status.addresses[].address, in order */
    size_t n_addresses;
};

int kp_node_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_node_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;

static inline const struct kp_node_view *kp_node_view(const struct kp_entry *e)
{
    return (const struct kp_node_view *)kp_obj_checked(e, kp_kind_node);
}

#endif
