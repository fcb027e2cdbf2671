/* api/obj.h: the compact value types projections are made of, and the decoding helpers the
 * obj-<kind>.c projectors share.
 *
 * Everything here lives inside one packed entry (k8s/store.h): strings and arrays point into
 * the entry's own allocation, so a projection is freed with its entry and costs one malloc.
 * Label selectors and node selector terms are kept as packed arrays of struct kp_requirement
 * (api/selector.h), validated and canonicalised by the selector builder at projection time.
 *
 * Fill code writes struct members one by one, never by struct assignment into the block: a
 * struct copy may carry stack garbage in its padding, and the entry's fingerprint hashes the
 * block's bytes (k8s/store.h kp_pack_finish). tests/fuzz/fuzz-objects.c checks that decoding
 * the same bytes twice gives the same fingerprint.
 *
 * All functions are pure; any thread. */
#ifndef KP_API_OBJ_H
#define KP_API_OBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "api/selector.h"
#include "k8s/store.h"

typedef struct json_t json_t;

/* Largest object accepted from a LIST page or WATCH frame, before decoding. */
#define KP_MAX_OBJECT_BYTES (2u << 20)

/* A label (or nodeSelector, or annotation) list; struct kp_label is selector.h's pair. */
struct kp_labels {
    const struct kp_label *v;
    size_t n;
};
/* The value for key, or NULL. */
const char *kp_labels_get(const struct kp_labels *l, const char *key);

/* Resource amounts in milli-units (cpu "500m" is 500; memory "1Ki" is 1024000). */
struct kp_res {
    const char *name;
    int64_t milli;
};
/* An amount kpssh cannot hold (beyond KP_RES_HOLD_MAX in size), kept by name and text so a
 * validator can say so instead of the object vanishing (kp_obj_resources_keep). */
struct kp_res_bad {
    const char *name;
    const char *value; /* as written ("1Ei", or an integer's digits) */
};
struct kp_resources {
    const struct kp_res *v;
    size_t n;
    const struct kp_res_bad *bad; /* kp_obj_resources_keep only; not in v */
    size_t n_bad;
};
/* The largest amount, in units, every projection holds; what the CRDs' CEL bounds and the
 * validators' messages name. int64 milli-units reach 9223372036854775.807 units, and 8Pi
 * (9007199254740992) is the round number below that. */
#define KP_RES_HOLD_MAX_TEXT "8Pi"
#define KP_RES_HOLD_MAX_UNITS 9007199254740992LL
/* The amount of name, or 0 when absent; *ret_found (optional) says which. */
int64_t kp_resources_get(const struct kp_resources *r, const char *name, bool *ret_found);

enum kp_taint_effect {
    KP_TAINT_ANY = 0, /* tolerations only: an empty effect tolerates every effect */
    KP_TAINT_NO_SCHEDULE,
    KP_TAINT_PREFER_NO_SCHEDULE,
    KP_TAINT_NO_EXECUTE,
};
/* "NoSchedule", "PreferNoSchedule", "NoExecute"; "" for KP_TAINT_ANY. */
const char *kp_taint_effect_name(enum kp_taint_effect e);
struct kp_taint {
    const char *key;
    const char *value; /* NULL when absent */
    enum kp_taint_effect effect;
};
struct kp_taints {
    const struct kp_taint *v;
    size_t n;
};

struct kp_toleration {
    const char *key; /* NULL or "" with Exists tolerates every key */
    const char *value;
    bool exists; /* operator Exists (else Equal) */
    enum kp_taint_effect effect;
    int64_t seconds; /* tolerationSeconds, -1 when absent */
};
struct kp_tolerations {
    const struct kp_toleration *v;
    size_t n;
};
/* True when one toleration tolerates the taint (Kubernetes' ToleratesTaint). */
bool kp_tolerations_tolerate(const struct kp_tolerations *tl, const struct kp_taint *t);

enum kp_cond_status {
    KP_COND_UNKNOWN = 0,
    KP_COND_TRUE,
    KP_COND_FALSE,
};
struct kp_condition {
    const char *type;
    enum kp_cond_status status;
    const char *reason;
    const char *message;          /* NULL when absent */
    int64_t observed_generation;  /* 0 when absent */
    int64_t last_transition_usec; /* 0 when absent */
};
struct kp_conditions {
    const struct kp_condition *v;
    size_t n;
};
/* The condition of the given type, or NULL. */
const struct kp_condition *kp_conditions_get(const struct kp_conditions *c, const char *type);
/* The name of a condition status as the API spells it: "True", "False" or "Unknown". */
const char *kp_cond_status_name(enum kp_cond_status s);
/* A one-element conditions list for a status merge patch (a merge patch replaces the whole list):
 * [{type, status, reason, message, observedGeneration, lastTransitionTime}]. reason and message
 * NULL are written as "Unknown" and ""; last_transition is the caller's RFC 3339 text. 0, -ENOMEM
 * or -EINVAL. *ret holds a new reference. */
int kp_conditions_patch_one(const char *type, enum kp_cond_status status, const char *reason,
                            const char *message, int64_t observed_generation,
                            const char *last_transition, json_t **ret) KP_NONNULL(1, 6, 7) KP_WUR;

struct kp_owner_ref {
    const char *api_version;
    const char *kind;
    const char *name;
    const char *uid;
    bool controller;
};
struct kp_owner_refs {
    const struct kp_owner_ref *v;
    size_t n;
};
/* The controller owner reference, or NULL. */
const struct kp_owner_ref *kp_owner_refs_controller(const struct kp_owner_refs *o);

/* A conjunction of requirements (a label selector, or one node selector term's expressions).
 * present distinguishes an absent selector (matches nothing, for pod affinity and PDBs) from
 * an empty one (matches everything). */
struct kp_reqs {
    const struct kp_requirement *v;
    size_t n;
    bool present;
};
/* True when every requirement holds for labels (absent selector: false). */
bool kp_reqs_match(const struct kp_reqs *r, const struct kp_labels *labels);

/* The common metadata every projection keeps, beyond kp_entry's key/uid/rv. */
struct kp_meta {
    int64_t creation_usec;
    int64_t deletion_usec; /* 0 unless being deleted */
    struct kp_labels labels;
    struct kp_owner_refs owners;
};

/* --- decoding helpers for obj-<kind>.c (both pack passes) --------------------------------- */

/* The common header and metadata: name (required), namespace (required iff namespaced), uid,
 * resourceVersion, timestamps, labels, ownerReferences. -KP_EPARSE when required fields are
 * missing or mistyped. */
int kp_obj_meta(const json_t *obj, bool namespaced, struct kp_pack *p, struct kp_entry *e,
                struct kp_meta *m) KP_WUR;
/* A string map (labels, nodeSelector); absent gives n = 0. keep (optional) filters keys. */
int kp_obj_labels(const json_t *map, bool (*keep)(const char *key), struct kp_pack *p,
                  struct kp_labels *ret) KP_WUR;
/* A ResourceList ({"cpu": "500m", ...}); quantities rounded up at milli precision. */
int kp_obj_resources(const json_t *map, struct kp_pack *p, struct kp_resources *ret) KP_WUR;
/* The same, for the kinds whose validators report problems (kpssh's and karpenter.sh's): an
 * amount beyond KP_RES_HOLD_MAX_UNITS in size goes into bad instead of refusing the object, so
 * the object stays visible and kp_valid_resources() can name the field and the limit. */
int kp_obj_resources_keep(const json_t *map, struct kp_pack *p, struct kp_resources *ret) KP_WUR;
int kp_obj_taints(const json_t *arr, struct kp_pack *p, struct kp_taints *ret) KP_WUR;
int kp_obj_tolerations(const json_t *arr, struct kp_pack *p, struct kp_tolerations *ret) KP_WUR;
int kp_obj_conditions(const json_t *arr, struct kp_pack *p, struct kp_conditions *ret) KP_WUR;
/* A metav1.LabelSelector object (absent: present = false). */
int kp_obj_label_selector(const json_t *sel, struct kp_pack *p, struct kp_reqs *ret) KP_WUR;
/* An array of NodeSelectorRequirement (absent: empty, present). */
int kp_obj_node_requirements(const json_t *arr, struct kp_pack *p, struct kp_reqs *ret) KP_WUR;
/* Optional members: absent (or obj NULL) gives NULL / the default; a wrong type is an error. */
int kp_obj_opt_str(const json_t *obj, const char *key, const char **ret) KP_WUR;
int kp_obj_opt_object(const json_t *obj, const char *key, json_t **ret) KP_WUR;
int kp_obj_opt_array(const json_t *obj, const char *key, json_t **ret) KP_WUR;
int kp_obj_opt_int32(const json_t *obj, const char *key, int32_t dflt, int32_t *ret) KP_WUR;
/* A string array; absent gives n = 0. */
int kp_obj_strings(const json_t *arr, struct kp_pack *p, const char *const **ret_v,
                   size_t *ret_n) KP_WUR;
/* An RFC 3339 timestamp string at key of obj, in microseconds; absent is 0. */
int kp_obj_time(const json_t *obj, const char *key, int64_t *ret_usec) KP_WUR;

/* Kind tags: each projection stamps its entries with one, and each view accessor
 * (kp_sshhost_view() and the like) checks it, so an entry of the wrong store is never read as
 * another kind's view (the layouts differ: that would read garbage). */
extern const char kp_kind_node[], kp_kind_pod[], kp_kind_nodepool[], kp_kind_nodeclaim[],
    kp_kind_sshhost[], kp_kind_sshnodeclass[], kp_kind_sshjoinprofile[], kp_kind_pdb[],
    kp_kind_daemonset[], kp_kind_lease[];

/* Logs which kind was read as which and aborts: a programmer error, caught where it happens. */
KP_NORETURN void kp_obj_kind_mismatch(const struct kp_entry *e, const char *want);

/* e, after checking that it was projected as kind (NULL passes). Any thread. */
static inline const struct kp_entry *kp_obj_checked(const struct kp_entry *e, const char *kind)
{
    if (e && e->kind != kind)
        kp_obj_kind_mismatch(e, kind);
    return e;
}

/* Projects with fill() in two passes (k8s/store.h kp_pack) into one allocation of head bytes,
 * stamped with kind. *ret is a new entry with one reference. Errors of fill, -ENOMEM,
 * -EOVERFLOW. */
int kp_obj_project(const json_t *obj, const char *kind, size_t head,
                   int (*fill)(const json_t *obj, struct kp_pack *p, void *view),
                   struct kp_entry **ret) KP_WUR;
/* Decodes n bytes of JSON (at most KP_MAX_OBJECT_BYTES) and projects it. */
int kp_obj_decode(const char *data, size_t n, const char *kind, size_t head,
                  int (*fill)(const json_t *obj, struct kp_pack *p, void *view),
                  struct kp_entry **ret) KP_WUR;

#endif
