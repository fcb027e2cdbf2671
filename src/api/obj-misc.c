/* DESIGN: the smaller built-in projections (PodDisruptionBudget, DaemonSet, Lease).
 *
 * PDBs are read by disruption and termination (may this pod be evicted now?), DaemonSets by
 * provisioning (what every new node will also run), Leases by leader election. Each keeps only
 * the fields those decisions read. */
#include "api/obj-misc.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "base/str.h"
#include "json/json.h"
#include "k8s/rfc3339.h"

/* Member by member: struct assignment may leave garbage in padding, which the entry's
 * fingerprint would hash. */
static void kp_intstr_set(struct kp_intstr *x, bool set, bool percent, int32_t value)
{
    x->set = set;
    x->percent = percent;
    x->value = value;
}

/* An IntOrString field: 5 or "25%". */
static int kp_intstr(const json_t *obj, const char *key, struct kp_intstr *ret)
{
    const char *s;
    int64_t v;
    uint32_t pct;
    size_t n;

    kp_intstr_set(ret, false, false, 0);
    if (kp_json_get_int(obj, key, &v) == 0) {
        if (v < 0 || v > INT32_MAX)
            return -KP_EPARSE;
        kp_intstr_set(ret, true, false, (int32_t)v);
        return 0;
    }
    if (kp_json_get_str(obj, key, &s) < 0)
        return 0; /* absent (a wrong type also reads as absent: the server validated it) */
    n = strlen(s);
    if (n < 2 || s[n - 1] != '%' || kp_parse_u32(s, n - 1, &pct) < 0 || pct > 100) {
        /* A plain integer in a string is accepted as a count, as the API server does. */
        if (kp_parse_u32(s, n, &pct) < 0 || pct > INT32_MAX)
            return -KP_EPARSE;
        kp_intstr_set(ret, true, false, (int32_t)pct);
        return 0;
    }
    kp_intstr_set(ret, true, true, (int32_t)pct);
    return 0;
}

static int kp_pdb_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_pdb_view *v = view;
    json_t *spec, *status = NULL, *sel = NULL;
    const char *policy = NULL;
    int r;

    if ((r = kp_obj_meta(obj, true, p, &v->e, &v->meta)) < 0)
        return r;
    if (kp_json_get_object(obj, "spec", &spec) < 0)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_object(spec, "selector", &sel)) < 0 ||
        (r = kp_obj_label_selector(sel, p, &v->selector)) < 0 ||
        (r = kp_intstr(spec, "minAvailable", &v->min_available)) < 0 ||
        (r = kp_intstr(spec, "maxUnavailable", &v->max_unavailable)) < 0 ||
        (r = kp_obj_opt_str(spec, "unhealthyPodEvictionPolicy", &policy)) < 0 ||
        (r = kp_obj_opt_object(obj, "status", &status)) < 0)
        return r;
    v->always_allow_unhealthy = policy && strcmp(policy, "AlwaysAllow") == 0;
    if (status &&
        ((r = kp_obj_opt_int32(status, "disruptionsAllowed", 0, &v->disruptions_allowed)) < 0 ||
         (r = kp_obj_opt_int32(status, "currentHealthy", 0, &v->current_healthy)) < 0 ||
         (r = kp_obj_opt_int32(status, "desiredHealthy", 0, &v->desired_healthy)) < 0 ||
         (r = kp_obj_opt_int32(status, "expectedPods", 0, &v->expected_pods)) < 0))
        return r;
    return 0;
}

int kp_pdb_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_pdb, sizeof(struct kp_pdb_view), kp_pdb_fill, ret);
}

int kp_pdb_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_pdb, sizeof(struct kp_pdb_view), kp_pdb_fill, ret);
}

static int kp_daemonset_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_daemonset_view *v = view;
    json_t *spec, *ns_sel = NULL, *tol = NULL;
    int r;

    if ((r = kp_obj_meta(obj, true, p, &v->e, &v->meta)) < 0)
        return r;
    if (kp_json_pathv(obj, KP_JSON_PATH("spec", "template", "spec"), &spec) < 0 ||
        kp_json_typeof(spec) != KP_JSON_OBJECT)
        return -KP_EPARSE;
    if ((r = kp_pod_template_requests(spec, p, &v->requests)) < 0 ||
        (r = kp_pod_spec_host_ports(spec, p, &v->host_ports, &v->n_host_ports)) < 0 ||
        (r = kp_pod_spec_dra(spec, &v->dra)) < 0 ||
        (r = kp_obj_opt_object(spec, "nodeSelector", &ns_sel)) < 0 ||
        (r = kp_obj_labels(ns_sel, NULL, p, &v->node_selector)) < 0 ||
        (r = kp_obj_opt_array(spec, "tolerations", &tol)) < 0 ||
        (r = kp_obj_tolerations(tol, p, &v->tolerations)) < 0 ||
        (r = kp_pod_spec_required_terms(spec, p, &v->required, &v->n_required)) < 0)
        return r;
    return 0;
}

int kp_daemonset_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_daemonset, sizeof(struct kp_daemonset_view),
                          kp_daemonset_fill, ret);
}

int kp_daemonset_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_daemonset, sizeof(struct kp_daemonset_view),
                         kp_daemonset_fill, ret);
}

static int kp_lease_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_lease_view *v = view;
    struct kp_meta meta;
    json_t *spec = NULL;
    const char *holder = NULL;
    int r;

    if ((r = kp_obj_meta(obj, true, p, &v->e, &meta)) < 0 ||
        (r = kp_obj_opt_object(obj, "spec", &spec)) < 0)
        return r;
    if (spec &&
        ((r = kp_obj_opt_str(spec, "holderIdentity", &holder)) < 0 ||
         (r = kp_obj_opt_int32(spec, "leaseDurationSeconds", 0, &v->duration_seconds)) < 0 ||
         (r = kp_obj_opt_int32(spec, "leaseTransitions", 0, &v->transitions)) < 0 ||
         (r = kp_obj_time(spec, "acquireTime", &v->acquire_usec)) < 0 ||
         (r = kp_obj_time(spec, "renewTime", &v->renew_usec)) < 0))
        return r;
    v->holder = kp_pack_str(p, holder && *holder ? holder : NULL);
    return 0;
}

int kp_lease_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_lease, sizeof(struct kp_lease_view), kp_lease_fill, ret);
}

int kp_lease_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_lease, sizeof(struct kp_lease_view), kp_lease_fill, ret);
}
