/* api/obj-misc.h: the smaller built-in projections: PodDisruptionBudget, DaemonSet, Lease. */
#ifndef KP_API_OBJ_MISC_H
#define KP_API_OBJ_MISC_H

#include "api/obj-pod.h"
#include "api/obj.h"

/* policy/v1 PodDisruptionBudget. minAvailable/maxUnavailable are an int or a percentage. */
struct kp_intstr {
    bool set;
    bool percent; /* value is a percentage */
    int32_t value;
};
struct kp_pdb_view {
    struct kp_entry e;
    struct kp_meta meta;
    struct kp_reqs selector; /* absent selector matches nothing */
    struct kp_intstr min_available;
    struct kp_intstr max_unavailable;
    int32_t disruptions_allowed; /* status.disruptionsAllowed */
    int32_t current_healthy, desired_healthy, expected_pods;
    bool always_allow_unhealthy; /* unhealthyPodEvictionPolicy: AlwaysAllow */
};
int kp_pdb_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_pdb_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;
static inline const struct kp_pdb_view *kp_pdb_view(const struct kp_entry *e)
{
    return (const struct kp_pdb_view *)kp_obj_checked(e, kp_kind_pdb);
}

/* apps/v1 DaemonSet: what a new node will run (Karpenter counts daemon overhead per node, from
 * the pod template as its PodForDaemonSet reads it). */
struct kp_daemonset_view {
    struct kp_entry e;
    struct kp_meta meta;
    /* Effective requests of the pod template, a container's limit standing in for a request
     * it does not set (kp_pod_template_requests). */
    struct kp_resources requests;
    struct kp_labels node_selector; /* template nodeSelector */
    struct kp_tolerations tolerations;
    const struct kp_node_term *required; /* template required node affinity terms (ORed) */
    size_t n_required;
    const struct kp_host_port *host_ports; /* template containers' hostPorts */
    size_t n_host_ports;
    bool dra; /* the template has Dynamic Resource Allocation claims (HasDRARequirements) */
};
int kp_daemonset_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_daemonset_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;
static inline const struct kp_daemonset_view *kp_daemonset_view(const struct kp_entry *e)
{
    return (const struct kp_daemonset_view *)kp_obj_checked(e, kp_kind_daemonset);
}

/* coordination.k8s.io/v1 Lease. */
struct kp_lease_view {
    struct kp_entry e;
    const char *holder;       /* spec.holderIdentity, NULL when free */
    int32_t duration_seconds; /* spec.leaseDurationSeconds */
    int64_t acquire_usec, renew_usec;
    int32_t transitions; /* spec.leaseTransitions */
};
int kp_lease_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_lease_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;

#endif
