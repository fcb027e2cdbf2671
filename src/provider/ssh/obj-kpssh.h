/* provider/ssh/obj-kpssh.h: projections of our own kinds in karpenter.kpssh.dev/v1beta1 (SSHHost,
 * SSHNodeClass, SSHJoinProfile; field names as in deploy/crds and docs/api.md), and the
 * CRD-rule validation of SSHHost and SSHNodeClass. SSHJoinProfile is validated by
 * provider/ssh/profile.h kp_profile_validate_view(), which owns the profile contract.
 *
 * Projections are lenient about values and strict about JSON shapes, as described in
 * api/obj-karpenter.h; validation reports use struct kp_valid from there.
 *
 * All functions are pure; any thread. */
#ifndef KP_PROVIDER_SSH_OBJ_KPSSH_H
#define KP_PROVIDER_SSH_OBJ_KPSSH_H

#include "base/macro.h"
#include "api/obj-karpenter.h"
#include "api/obj.h"

struct kp_buf;

#define KP_KPSSH_GROUP "karpenter.kpssh.dev"
#define KP_KPSSH_VERSION "v1beta1"
#define KP_KPSSH_NODECLASS_KIND "SSHNodeClass"
/* SSHHost class membership (one class = one instance type); missing or empty means "default". */
#define KP_KPSSH_LABEL_HOST_CLASS KP_KPSSH_GROUP "/host-class"
#define KP_KPSSH_HOST_CLASS_DEFAULT "default"
/* Presence alone parks a host; the value is ignored. */
#define KP_KPSSH_ANNOTATION_MAINTENANCE KP_KPSSH_GROUP "/maintenance"

/* Coexistence is by nodeClassRef: kpssh acts on a NodePool or NodeClaim only when its
 * nodeClassRef is {group: karpenter.kpssh.dev, kind: SSHNodeClass}, and another Karpenter in the
 * cluster acts on the others (docs/installation.md, "Coexistence"). */
bool kp_nodepool_is_ours(const struct kp_nodepool_view *v) KP_NONNULL(1);
bool kp_nodeclaim_is_ours(const struct kp_nodeclaim_view *v) KP_NONNULL(1);

/* --- SSHHost (namespaced, pool namespace) ----------------------------------------------------- */

enum kp_host_state {
    KP_HOST_PENDING = 0, /* also "" and absent */
    KP_HOST_AVAILABLE,
    KP_HOST_CLAIMED,
    KP_HOST_IN_USE,
    KP_HOST_UNHEALTHY,
    KP_HOST_LEAVING,
    KP_HOST_MAINTENANCE,
    KP_HOST_STATE_UNKNOWN, /* a value this build does not know */
};
/* "Pending", "Available", ...; "Unknown" for KP_HOST_STATE_UNKNOWN. */
const char *kp_host_state_name(enum kp_host_state s);

enum kp_exec_mode {
    KP_EXEC_RAW = 0, /* the default */
    KP_EXEC_VERIFIED,
    KP_EXEC_UNKNOWN,
};

#define KP_SSHHOST_PORT_DEFAULT 22
#define KP_SSHHOST_USER_DEFAULT "root"
#define KP_SSHHOST_SHIM_DEFAULT "/opt/kpssh/kpssh-shim"

struct kp_sshhost_view {
    struct kp_entry e;
    struct kp_meta meta; /* labels: host class and what SSHNodeClass.hostSelector matches */
    int64_t generation;
    bool maintenance; /* the maintenance annotation is present */
    /* spec */
    const char *address;      /* required; NULL only in an invalid object */
    int32_t port;             /* 22 when absent */
    const char *user;         /* "root" when absent */
    const char *key_secret;   /* spec.sshKeySecretRef.name; NULL when absent */
    const char *node_address; /* NULL when absent: use address (kp_sshhost_node_ip) */
    struct kp_resources capacity;
    enum kp_exec_mode exec_mode;
    const char *const *trusted_signers; /* authorized_keys lines */
    size_t n_trusted_signers;
    const char *shim_command; /* NULL when absent: KP_SSHHOST_SHIM_DEFAULT */
    /* status */
    enum kp_host_state state;
    struct kp_conditions conditions;
    const char *claim_name;         /* status.claimRef.name: the claim lock; NULL when free */
    const char *claim_uid;          /* status.claimRef.uid */
    const char *installed_profile;  /* "<profile>@<version>" */
    const char *bootstrap_token_id; /* in-flight join's token id */
    const char *provider_id;        /* the providerID the host backs */
    /* The providerID the last adopting join took over (providerIDSource Adopt). Kept after the
     * claim is released, so the zombie guard can tell this host's own Node from a foreign one. */
    const char *adopted_provider_id;
    const char *host_key_fingerprint; /* TOFU pin, "SHA256:..." */
    struct kp_resources observed_capacity;
    const char *observed_arch;
    int64_t observed_generation;
    int64_t last_probe_usec;
    const char *last_probe_error;
};

int kp_sshhost_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_sshhost_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;
static inline const struct kp_sshhost_view *kp_sshhost_view(const struct kp_entry *e)
{
    return (const struct kp_sshhost_view *)kp_obj_checked(e, kp_kind_sshhost);
}
/* The host class: the host-class label, or "default" when missing or empty. Never NULL. */
const char *kp_sshhost_class(const struct kp_sshhost_view *v) KP_NONNULL(1);
/* The address kubelet uses (--node-ip): nodeAddress when set, else address. */
const char *kp_sshhost_node_ip(const struct kp_sshhost_view *v) KP_NONNULL(1);
/* CRD rules: address 1..253; port 1..65535; user <= 32; sshKeySecretRef.name set; nodeAddress
 * <= 45 and an IP literal; capacity with cpu and memory; execMode Raw or Verified; at most 16
 * trustedSigners, at least one when Verified; shimCommand <= 1024; status state, claimRef.name
 * 1..253, bootstrapTokenID <= 6. Report as in api/obj-karpenter.h. */
int kp_sshhost_validate(const struct kp_sshhost_view *v, struct kp_buf *msg) KP_NONNULL(1) KP_WUR;

/* --- SSHNodeClass (cluster-scoped) ------------------------------------------------------------ */

enum kp_provider_id_source {
    KP_PROVIDER_ID_STATIC = 0, /* the default: kpssh://<pool-ns>/<host> via --provider-id */
    KP_PROVIDER_ID_ADOPT,      /* match the Node by InternalIP and adopt its providerID */
    KP_PROVIDER_ID_UNKNOWN,
};

enum kp_gate_kind {
    KP_GATE_NONE = 0, /* removeWhen names neither (invalid) */
    KP_GATE_PODS_READY,
    KP_GATE_NODE_CONDITION,
    KP_GATE_BOTH, /* removeWhen names both (invalid) */
};

/* One startup taint gate: remove taint_key once its condition holds. */
struct kp_taint_gate {
    const char *taint_key;
    enum kp_gate_kind kind;
    /* podsReady */
    const char *pods_namespace;
    struct kp_reqs pods_selector;    /* present = false when absent; empty when invalid */
    const char *pods_selector_error; /* why the selector failed to build, or NULL */
    int32_t min_ready;               /* 1 when absent */
    /* nodeCondition */
    const char *condition_type;
    const char *condition_status; /* "True" when absent */
};

#define KP_SSHNODECLASS_PRICE_DEFAULT "0.02"
#define KP_SSHNODECLASS_MAX_PODS_DEFAULT 110

struct kp_sshnodeclass_view {
    struct kp_entry e;
    struct kp_meta meta;
    int64_t generation;
    const char *const *finalizers;
    size_t n_finalizers;
    /* spec.hostSelector: present = false when absent, which selects every host of the pool
     * namespace (kp_sshnodeclass_selects); an invalid selector is kept empty and
     * host_selector_error says why (reason SelectorError) */
    struct kp_reqs host_selector;
    const char *host_selector_error;
    const char *join_profile; /* spec.joinProfileRef.name */
    struct kp_labels vars;    /* spec.vars, exported as KPSSH_VAR_<key> */
    const char *join_secret;  /* spec.joinSecretRef.name; NULL when absent */
    bool join_secret_set;     /* joinSecretRef present (even with an empty name) */
    enum kp_provider_id_source provider_id_source;
    const char *price_per_cpu_hour; /* text as written; "0.02" when absent */
    int64_t price_micro_usd;        /* the same in micro-USD per vCPU-hour; -1 when invalid */
    struct kp_resources kube_reserved;
    int32_t max_pods; /* 0 when absent: KP_SSHNODECLASS_MAX_PODS_DEFAULT */
    bool cluster_set; /* spec.cluster present */
    const char *cluster_endpoint;
    const char *cluster_ca_bundle;     /* base64 text, as KPSSH_CLUSTER_CA_B64 wants it */
    const struct kp_taint_gate *gates; /* spec.startupTaintGates */
    size_t n_gates;
    /* status */
    struct kp_conditions conditions;
    /* The Ready condition's message and observedGeneration (NULL and -1 when absent), so the
     * node-class controller can tell an unchanged status from one it must rewrite. */
    const char *ready_message;
    int64_t ready_observed_generation;
};

int kp_sshnodeclass_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_sshnodeclass_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;
static inline const struct kp_sshnodeclass_view *kp_sshnodeclass_view(const struct kp_entry *e)
{
    return (const struct kp_sshnodeclass_view *)kp_obj_checked(e, kp_kind_sshnodeclass);
}
/* True when the class selects a host with these labels (an absent selector selects all; an
 * invalid one selects none). */
bool kp_sshnodeclass_selects(const struct kp_sshnodeclass_view *v,
                             const struct kp_labels *host_labels) KP_NONNULL(1, 2);
/* CRD rules: joinProfileRef.name set; at most 64 vars, keys ^[A-Za-z_][A-Za-z0-9_]*$, values
 * <= 2048; joinSecretRef.name set when present; providerIDSource Static or Adopt;
 * pricePerCPUHour ^[0-9]+(\.[0-9]+)?$; kubeReserved keys cpu, memory, ephemeral-storage; maxPods
 * 1..65535; cluster.endpoint ^https://.+$ <= 253, caBundle base64 <= 65536; at most 16
 * startupTaintGates with unique valid taint keys and exactly one of podsReady (namespace 1..63,
 * non-empty selector, minReady >= 1) or nodeCondition (type 1..316, status True, False or
 * Unknown); the host selector builds. */
int kp_sshnodeclass_validate(const struct kp_sshnodeclass_view *v, struct kp_buf *msg)
    KP_NONNULL(1) KP_WUR;

/* --- SSHJoinProfile (cluster-scoped) ---------------------------------------------------------- */

enum kp_sjp_phase {
    KP_SJP_INSTALL = 0,
    KP_SJP_JOIN,
    KP_SJP_LEAVE,
    KP_SJP_UNINSTALL,
    KP_SJP_PHASES,
};

/* A string field with its length; data NULL when absent. */
struct kp_sjp_text {
    const char *data;
    size_t len;
};

/* The script bytes are kept in the cache: the runner needs them for every install, join and
 * leave, and must run exactly the bytes whose version it records as installed; fetching them per
 * job would add an API round trip and a window in which the profile changes under the marker.
 * The cost is bounded by the CRD (4 scripts of at most 256 KiB and 4 signatures of at most
 * 16 KiB); shipped profiles are a few KiB each and a cluster has a handful of profiles. */
struct kp_sshjoinprofile_view {
    struct kp_entry e;
    int64_t creation_usec;
    int64_t generation;
    const char *version; /* spec.version; NULL when absent (means "1") */
    struct kp_sjp_text scripts[KP_SJP_PHASES];
    struct kp_sjp_text timeouts[KP_SJP_UNINSTALL]; /* install, join, leave */
    struct kp_sjp_text signatures[KP_SJP_PHASES];
};

int kp_sshjoinprofile_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_sshjoinprofile_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;
static inline const struct kp_sshjoinprofile_view *kp_sshjoinprofile_view(const struct kp_entry *e)
{
    return (const struct kp_sshjoinprofile_view *)kp_obj_checked(e, kp_kind_sshjoinprofile);
}

#endif
