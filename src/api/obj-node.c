/* DESIGN: Node projection.
 *
 * Kept: identity (providerID, addresses — the SSH provider adopts nodes by InternalIP), what
 * scheduling needs (labels, taints, allocatable, unschedulable), health (conditions without
 * their messages or heartbeat times, so heartbeats do not change the fingerprint) and
 * finalizers (termination), and the annotations of the karpenter.sh/ domain (Karpenter's
 * per-Node switches). Dropped: images, daemon endpoints, nodeInfo, volumes, heartbeats. */
#include "api/obj-node.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "base/str.h"
#include "json/json.h"

static bool keep_karpenter_annotation(const char *key)
{
    return kp_startswith(key, "karpenter.sh/") != NULL;
}

static int kp_node_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_node_view *v = view;
    json_t *spec = NULL, *status = NULL, *x = NULL, *fin = NULL, *addrs = NULL;
    const char *pid = NULL, *ip = NULL, *host = NULL;
    const struct kp_condition *ready;
    const char **av, *scratch = NULL;
    size_t n;
    int r;

    if ((r = kp_obj_meta(obj, false, p, &v->e, &v->meta)) < 0)
        return r;
    r = kp_json_path_object(obj, "metadata.annotations", &x);
    if ((r < 0 && r != -ENOENT) ||
        (r = kp_obj_labels(x, keep_karpenter_annotation, p, &v->annotations)) < 0)
        return r;
    x = NULL;
    r = kp_json_get_object(obj, "spec", &spec);
    if (r < 0 && r != -ENOENT)
        return r;
    r = kp_json_get_object(obj, "status", &status);
    if (r < 0 && r != -ENOENT)
        return r;
    if (spec) {
        r = kp_json_get_str(spec, "providerID", &pid);
        if (r < 0 && r != -ENOENT)
            return r;
        r = kp_json_get_bool(spec, "unschedulable", &v->unschedulable);
        if (r < 0 && r != -ENOENT)
            return r;
        x = NULL;
        r = kp_json_get_array(spec, "taints", &x);
        if ((r < 0 && r != -ENOENT) || (r = kp_obj_taints(x, p, &v->taints)) < 0)
            return r;
    }
    v->provider_id = kp_pack_str(p, pid && *pid ? pid : NULL);
    r = kp_json_path_array(obj, "metadata.finalizers", &fin);
    if ((r < 0 && r != -ENOENT) ||
        (r = kp_obj_strings(fin, p, &v->finalizers, &v->n_finalizers)) < 0)
        return r;
    if (!status)
        return 0;
    x = NULL;
    r = kp_json_get_object(status, "capacity", &x);
    if ((r < 0 && r != -ENOENT) || (r = kp_obj_resources(x, p, &v->capacity)) < 0)
        return r;
    x = NULL;
    r = kp_json_get_object(status, "allocatable", &x);
    if ((r < 0 && r != -ENOENT) || (r = kp_obj_resources(x, p, &v->allocatable)) < 0)
        return r;
    x = NULL;
    r = kp_json_get_array(status, "conditions", &x);
    if ((r < 0 && r != -ENOENT) || (r = kp_obj_conditions(x, p, &v->conditions)) < 0)
        return r;
    ready = kp_pack_sizing(p) ? NULL : kp_conditions_get(&v->conditions, "Ready");
    v->ready = ready ? ready->status : KP_COND_UNKNOWN;

    r = kp_json_get_array(status, "addresses", &addrs);
    if (r < 0 && r != -ENOENT)
        return r;
    n = kp_json_array_size(addrs);
    av = kp_pack_array(p, n, sizeof(*av));
    for (size_t i = 0; i < n; i++) {
        const json_t *a = kp_json_array_at(addrs, i);
        const char *type, *addr;
        char *copy;

        if (kp_json_get_str(a, "type", &type) < 0 || kp_json_get_str(a, "address", &addr) < 0)
            return -KP_EPARSE;
        copy = kp_pack_str(p, addr);
        *(av ? &av[i] : &scratch) = copy;
        if (!ip && strcmp(type, "InternalIP") == 0)
            ip = addr;
        if (!host && strcmp(type, "Hostname") == 0)
            host = addr;
    }
    v->addresses = av;
    v->n_addresses = n;
    v->internal_ip = kp_pack_str(p, ip);
    v->hostname = kp_pack_str(p, host);
    return 0;
}

int kp_node_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_node, sizeof(struct kp_node_view), kp_node_fill, ret);
}

int kp_node_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_node, sizeof(struct kp_node_view), kp_node_fill, ret);
}
