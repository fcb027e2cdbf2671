/* DESIGN: the storage projections node termination reads (obj-storage.h).
 *
 * What: VolumeAttachment {name, spec.nodeName, spec.source.persistentVolumeName,
 * status.attached} and PersistentVolumeClaim {namespace/name, spec.volumeName}. Why so little:
 * termination only asks "which attachments still name this Node, and whose volume is each";
 * keeping the rest (attach errors, CSI driver, access modes) would cost memory per object in a
 * cluster-wide informer for nothing. Invariants: as every projection (api/obj.h), strings point
 * into the entry and the fill writes members one by one. Pure; any thread. */
#include "api/obj-storage.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "json/json.h"

/* NULL or "". */
static bool empty(const char *s)
{
    return !s || !*s;
}

const char kp_kind_volumeattachment[] = "VolumeAttachment", kp_kind_pvc[] = "PersistentVolumeClaim";

static int va_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_volumeattachment_view *v = view;
    json_t *spec, *source = NULL, *status = NULL;
    const char *node = NULL, *pv = NULL;
    bool attached = false;
    int r;

    if ((r = kp_obj_meta(obj, false, p, &v->e, &v->meta)) < 0)
        return r;
    if (kp_json_get_object(obj, "spec", &spec) < 0)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_str(spec, "nodeName", &node)) < 0 ||
        (r = kp_obj_opt_object(spec, "source", &source)) < 0 ||
        (r = kp_obj_opt_str(source, "persistentVolumeName", &pv)) < 0 ||
        (r = kp_obj_opt_object(obj, "status", &status)) < 0)
        return r;
    if (empty(node))
        return -KP_EPARSE; /* required by the API: an attachment is always to some Node */
    if (status && kp_json_get_bool(status, "attached", &attached) < 0)
        attached = false; /* absent: the external attacher has not answered yet */
    v->node_name = kp_pack_str(p, node);
    v->pv_name = kp_pack_str(p, empty(pv) ? NULL : pv);
    v->attached = attached;
    return 0;
}

int kp_volumeattachment_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_volumeattachment, sizeof(struct kp_volumeattachment_view),
                          va_fill, ret);
}

int kp_volumeattachment_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_volumeattachment, sizeof(struct kp_volumeattachment_view),
                         va_fill, ret);
}

static int pvc_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_pvc_view *v = view;
    json_t *spec = NULL, *status = NULL, *annotations = NULL;
    const char *vol = NULL, *sc = NULL, *phase = NULL, *s;
    int r;

    if ((r = kp_obj_meta(obj, true, p, &v->e, &v->meta)) < 0 ||
        (r = kp_obj_opt_object(obj, "spec", &spec)) < 0 ||
        (r = kp_obj_opt_str(spec, "volumeName", &vol)) < 0 ||
        (r = kp_obj_opt_str(spec, "storageClassName", &sc)) < 0 ||
        (r = kp_obj_opt_object(obj, "status", &status)) < 0 ||
        (r = kp_obj_opt_str(status, "phase", &phase)) < 0 ||
        (r = kp_json_path_object(obj, "metadata.annotations", &annotations)) < -ENOENT)
        return r;
    v->volume_name = kp_pack_str(p, empty(vol) ? NULL : vol);
    v->storage_class = kp_pack_str(p, empty(sc) ? NULL : sc);
    v->lost = phase && strcmp(phase, "Lost") == 0;
    /* Any value counts, as for kube-scheduler's binder: the key's presence is the mark. */
    v->bind_completed =
        annotations && kp_json_get_str(annotations, "pv.kubernetes.io/bind-completed", &s) == 0;
    return 0;
}

int kp_pvc_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_pvc, sizeof(struct kp_pvc_view), pvc_fill, ret);
}

int kp_pvc_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_pvc, sizeof(struct kp_pvc_view), pvc_fill, ret);
}
