/* k8s/obj-pod.h: the Pod projection: what scheduling simulation, disruption and termination
 * read of a pod, packed into one entry (k8s/store.h, k8s/obj.h). */
#ifndef KP_K8S_OBJ_POD_H
#define KP_K8S_OBJ_POD_H

#include "k8s/obj.h"

enum kp_pod_phase {
    KP_POD_PENDING = 0,
    KP_POD_RUNNING,
    KP_POD_SUCCEEDED,
    KP_POD_FAILED,
    KP_POD_UNKNOWN,
};

enum kp_pod_flags {
    KP_POD_UNSCHEDULABLE = 1 << 0,  /* condition PodScheduled=False, reason Unschedulable */
    KP_POD_READY = 1 << 1,          /* condition Ready=True */
    KP_POD_DO_NOT_DISRUPT = 1 << 2, /* annotation karpenter.sh/do-not-disrupt: "true" */
    KP_POD_MIRROR = 1 << 3,         /* annotation kubernetes.io/config.mirror (static pod) */
    KP_POD_DAEMONSET = 1 << 4,      /* controlled by a DaemonSet */
    KP_POD_HOST_NETWORK = 1 << 5,
};

/* One term of required or preferred node affinity: matchExpressions and matchFields. */
struct kp_node_term {
    struct kp_reqs exprs;
    struct kp_reqs fields;
    int32_t weight; /* preferred terms only */
};

/* One pod (anti-)affinity term. */
struct kp_pod_term {
    struct kp_reqs selector;    /* labelSelector (absent: matches nothing) */
    struct kp_reqs ns_selector; /* namespaceSelector (absent: present = false) */
    const char *const *namespaces;
    size_t n_namespaces;
    const char *topology_key;
    int32_t weight; /* preferred terms only */
};

struct kp_spread {
    int32_t max_skew;
    const char *topology_key;
    bool do_not_schedule; /* whenUnsatisfiable: DoNotSchedule (else ScheduleAnyway) */
    struct kp_reqs selector;
    int32_t min_domains;      /* 0 when unset */
    bool honor_node_affinity; /* nodeAffinityPolicy Honor (the default) */
    bool honor_node_taints;   /* nodeTaintsPolicy Honor (default Ignore) */
    const char *const *match_label_keys;
    size_t n_match_label_keys;
};

struct kp_pod_view {
    struct kp_entry e;
    struct kp_meta meta;
    const char *node_name;      /* spec.nodeName; NULL while unbound */
    const char *scheduler_name; /* NULL means default-scheduler */
    const char *priority_class;
    int32_t priority;
    enum kp_pod_phase phase;
    uint32_t flags;        /* enum kp_pod_flags */
    int64_t grace_seconds; /* terminationGracePeriodSeconds (30 when unset) */
    /* Effective requests as the scheduler counts them: the larger of (regular containers plus
     * restartable init containers) and the biggest init container step, plus overhead. */
    struct kp_resources requests;
    struct kp_labels node_selector;
    struct kp_tolerations tolerations;
    const struct kp_node_term *required; /* requiredDuringScheduling node selector terms (ORed) */
    size_t n_required;
    const struct kp_node_term *preferred;
    size_t n_preferred;
    const struct kp_pod_term *affinity; /* required pod affinity terms */
    size_t n_affinity;
    const struct kp_pod_term *anti_affinity; /* required pod anti-affinity terms */
    size_t n_anti_affinity;
    const struct kp_pod_term *preferred_affinity;
    size_t n_preferred_affinity;
    const struct kp_pod_term *preferred_anti_affinity;
    size_t n_preferred_anti_affinity;
    const struct kp_spread *spread;
    size_t n_spread;
    const char *const *pvc_claims; /* persistentVolumeClaim names of the pod's volumes */
    size_t n_pvc_claims;
};

/* Pieces of a pod spec, shared with the DaemonSet projection (pack passes as in k8s/obj.h). */
int kp_pod_spec_requests(const json_t *spec, struct kp_pack *p, struct kp_resources *ret) KP_WUR;
int kp_pod_spec_required_terms(const json_t *spec, struct kp_pack *p,
                               const struct kp_node_term **ret, size_t *ret_n) KP_WUR;

/* Projects a decoded Pod. 0, -KP_EPARSE (malformed or missing required fields), -ENOMEM. */
int kp_pod_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
/* Decodes JSON bytes (at most KP_MAX_OBJECT_BYTES) and projects them. */
int kp_pod_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;

static inline const struct kp_pod_view *kp_pod_view(const struct kp_entry *e)
{
    return (const struct kp_pod_view *)kp_obj_checked(e, kp_kind_pod);
}

#endif
