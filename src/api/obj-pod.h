/* api/obj-pod.h: the Pod projection: what scheduling simulation, disruption and termination
 * read of a pod, packed into one entry (k8s/store.h, api/obj.h), and the pod predicates of
 * Karpenter's pkg/utils/pod that read only the projection.
 *
 * Metadata (struct kp_meta) keeps every label (PDB and topology selectors match them), every
 * owner reference and the deletion timestamp. All functions are pure; any thread. */
#ifndef KP_API_OBJ_POD_H
#define KP_API_OBJ_POD_H

#include "api/obj.h"

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
    /* Ownership as Karpenter's IsOwnedBy* reads it: ANY owner reference (controller or not)
     * with exactly that apiVersion and kind. */
    KP_POD_DAEMONSET = 1 << 4, /* owned by apps/v1 DaemonSet */
    KP_POD_HOST_NETWORK = 1 << 5,
    KP_POD_STATEFULSET = 1 << 6, /* owned by apps/v1 StatefulSet */
    KP_POD_NODE_OWNED = 1 << 7,  /* owned by v1 Node: the mirror of a static pod */
    KP_POD_PREEMPTING = 1 << 8,  /* status.nominatedNodeName set (IsPreempting) */
    /* Karpenter's HasDRARequirements: spec.resourceClaims, or resources.claims of a container or
     * init container, non-empty (Dynamic Resource Allocation, which kpssh does not model). */
    KP_POD_DRA = 1 << 9,
    KP_POD_READY_FALSE = 1 << 10, /* condition Ready=False (not Unknown, not absent): PDBs with
                                   * unhealthyPodEvictionPolicy AlwaysAllow let it go */
};

/* A host port a container asks for (containerPort with hostPort != 0; regular containers
 * only, as Karpenter's GetHostPorts). */
enum kp_protocol {
    KP_PROTO_TCP = 0, /* the default */
    KP_PROTO_UDP,
    KP_PROTO_SCTP,
};
struct kp_host_port {
    const char *ip; /* hostIP as written; NULL when unset, which means 0.0.0.0 */
    int32_t port;   /* hostPort, 1..65535 */
    enum kp_protocol protocol;
};
/* Karpenter's HostPort.Matches: same protocol and port, and equal IPs or either one
 * unspecified (unset, 0.0.0.0 or ::). IPs compare as addresses ("::1" equals "0::1"); text that
 * is no IP compares as text. */
bool kp_host_port_conflicts(const struct kp_host_port *a, const struct kp_host_port *b)
    KP_NONNULL(1, 2);

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
    int64_t start_usec;    /* status.startTime; 0 when absent */
    /* The controller owner reference's kind and name ("ReplicaSet", "web-7d4b9c8f6d"), NULL
     * when there is none; they point into meta.owners. */
    const char *owner_kind;
    const char *owner_name;
    /* Annotation karpenter.sh/do-not-disrupt as written (NULL when absent), and its value as a
     * positive Go duration in nanoseconds (0 when it is "true", invalid or not positive): see
     * kp_pod_do_not_disrupt_active(). */
    const char *do_not_disrupt;
    int64_t do_not_disrupt_ns;
    /* Effective requests as the scheduler counts them (Kubernetes' resourcehelper.PodRequests):
     * per resource, the larger of (regular containers plus restartable init containers) and the
     * biggest init container step (that container plus the sidecars started before it); then
     * pod-level spec.resources.requests replace cpu, memory and hugepages-*; plus overhead.
     * While an in-place resize is pending, a running container counts the max of its spec and
     * the resources its status reports (Karpenter's UseStatusResources; obj-pod.c). Requests
     * do not include Karpenter's "pods: 1": callers that sum pods add it. */
    struct kp_resources requests;
    /* Effective limits (PodLimits): the same aggregation over limits, pod-level limits
     * replacing as above, overhead added only to resources that have a limit. */
    struct kp_resources limits;
    const struct kp_host_port *host_ports;
    size_t n_host_ports;
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
    /* The shared block the spec-derived fields above point into (obj-pod.c: pods of one
     * template share it); the entry holds a reference on it. Readers never need it. */
    struct kp_entry *shape;
};

/* Pieces of a pod spec, shared with the DaemonSet projection (pack passes as in api/obj.h). */
int kp_pod_spec_requests(const json_t *spec, struct kp_pack *p, struct kp_resources *ret) KP_WUR;
/* The effective requests of a pod template, which the API server has not defaulted: a
 * container's limit stands in for a request it does not set (Karpenter's PodForDaemonSet). */
int kp_pod_template_requests(const json_t *spec, struct kp_pack *p,
                             struct kp_resources *ret) KP_WUR;
/* The containerPorts of the regular containers that have a hostPort (GetHostPorts). */
int kp_pod_spec_host_ports(const json_t *spec, struct kp_pack *p, const struct kp_host_port **ret,
                           size_t *ret_n) KP_WUR;
/* Karpenter's HasDRARequirements: pod-level resourceClaims, or claims of any regular or init
 * container's resources (ephemeral containers are not looked at, as in Karpenter). */
int kp_pod_spec_dra(const json_t *spec, bool *ret) KP_WUR;
int kp_pod_spec_limits(const json_t *spec, struct kp_pack *p, struct kp_resources *ret) KP_WUR;
int kp_pod_spec_required_terms(const json_t *spec, struct kp_pack *p,
                               const struct kp_node_term **ret, size_t *ret_n) KP_WUR;

/* How many distinct pod shapes are cached and their bytes (the benchmark adds them to the
 * pods' own bytes). Any thread. */
void kp_pod_shapes_stats(size_t *ret_count, size_t *ret_bytes) KP_NONNULL(1, 2);

/* Projects a decoded Pod. 0, -KP_EPARSE (malformed or missing required fields), -ENOMEM. */
int kp_pod_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
/* Decodes JSON bytes (at most KP_MAX_OBJECT_BYTES) and projects them. */
int kp_pod_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;

static inline const struct kp_pod_view *kp_pod_view(const struct kp_entry *e)
{
    return (const struct kp_pod_view *)kp_obj_checked(e, kp_kind_pod);
}

/* Karpenter's pod predicates (pkg/utils/pod). */
/* Phase Succeeded or Failed. */
static inline bool kp_pod_terminal(const struct kp_pod_view *p)
{
    return p->phase == KP_POD_SUCCEEDED || p->phase == KP_POD_FAILED;
}
/* Has a deletion timestamp. */
static inline bool kp_pod_terminating(const struct kp_pod_view *p)
{
    return p->meta.deletion_usec != 0;
}
/* Neither terminal nor terminating. */
static inline bool kp_pod_active(const struct kp_pod_view *p)
{
    return !kp_pod_terminal(p) && !kp_pod_terminating(p);
}
/* IsProvisionable: PodScheduled=False/Unschedulable, unbound, not preempting, not owned by a
 * DaemonSet or a Node. */
bool kp_pod_provisionable(const struct kp_pod_view *p) KP_NONNULL(1);
/* IsReschedulable: active (or a terminating StatefulSet pod), not owned by a DaemonSet or a
 * Node. */
bool kp_pod_reschedulable(const struct kp_pod_view *p) KP_NONNULL(1);
/* IsDoNotDisruptActive at now_usec: "true" is active; a positive duration is active while
 * now - status.startTime < duration (no startTime: active); any other value is not (the caller
 * emits InvalidDoNotDisruptAnnotation: do_not_disrupt non-NULL, do_not_disrupt_ns 0 and no
 * KP_POD_DO_NOT_DISRUPT flag). */
bool kp_pod_do_not_disrupt_active(const struct kp_pod_view *p, int64_t now_usec) KP_NONNULL(1);

#endif
