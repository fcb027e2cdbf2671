/* api/obj-storage.h: projections of the storage objects node termination waits on (api/obj.h):
 * storage.k8s.io/v1 VolumeAttachment (cluster-scoped) and v1 PersistentVolumeClaim.
 *
 * Karpenter's termination waits until the attach-detach controller has deleted the
 * VolumeAttachments of a terminating Node (Karpenter's termination waits for them), except those whose
 * PersistentVolume belongs to a pod that is not drained (pod -> PVC -> spec.volumeName ->
 * VolumeAttachment.spec.source.persistentVolumeName): the PVC projection exists for that
 * lookup, and for the provisioner's PVC checks of a pending pod (core/provisioning/pods.h:
 * deleting, Lost, bound without bind-completed, unbound without a storage class). Each keeps
 * only what those decisions read. All functions are pure; any thread. */
#ifndef KP_API_OBJ_STORAGE_H
#define KP_API_OBJ_STORAGE_H

#include "api/obj.h"

extern const char kp_kind_volumeattachment[], kp_kind_pvc[];

struct kp_volumeattachment_view {
    struct kp_entry e;
    struct kp_meta meta;
    const char *node_name; /* spec.nodeName (required by the API) */
    const char *pv_name;   /* spec.source.persistentVolumeName; NULL for inline volumes */
    bool attached;         /* status.attached */
};
/* Projects a decoded VolumeAttachment. 0, -KP_EPARSE (no name or spec.nodeName), -ENOMEM. */
int kp_volumeattachment_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_volumeattachment_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;
static inline const struct kp_volumeattachment_view *
kp_volumeattachment_view(const struct kp_entry *e)
{
    return (const struct kp_volumeattachment_view *)kp_obj_checked(e, kp_kind_volumeattachment);
}

struct kp_pvc_view {
    struct kp_entry e;
    struct kp_meta meta;
    const char *volume_name;   /* spec.volumeName; NULL while unbound */
    const char *storage_class; /* spec.storageClassName; NULL when unset or "" */
    bool lost;                 /* status.phase Lost: its PersistentVolume is gone */
    bool bind_completed;       /* annotation pv.kubernetes.io/bind-completed present */
};
/* Projects a decoded PersistentVolumeClaim. 0, -KP_EPARSE, -ENOMEM. */
int kp_pvc_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_pvc_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;
static inline const struct kp_pvc_view *kp_pvc_view(const struct kp_entry *e)
{
    return (const struct kp_pvc_view *)kp_obj_checked(e, kp_kind_pvc);
}

#endif
