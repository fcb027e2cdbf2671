/* api/obj-karpenter.h: projections of karpenter.sh/v1 NodePool and NodeClaim (api/obj.h), their
 * validation against the CRD rules, and the validation report shared by every CRD projection.
 *
 * Projections are lenient about *values* and strict about *shapes*: a field of the wrong JSON
 * type, an unparsable quantity or timestamp refuses the object (-KP_EPARSE, as a typed client
 * would), but a value the CRD's patterns, enums or CEL rules would refuse is projected as it is
 * (durations keep their text, enums map to an UNKNOWN value, an invalid requirement list is kept
 * as an error message) so that kp_<kind>_validate() can say what is wrong. Such an object can
 * exist: it was written before a CRD upgrade, or while another controller owned the CRDs.
 * Consumers validate first and leave an invalid object alone (a NodePool then reports
 * ValidationSucceeded=False with the report as its message).
 *
 * All functions are pure; any thread. */
#ifndef KP_API_OBJ_KARPENTER_H
#define KP_API_OBJ_KARPENTER_H

#include "base/macro.h"
#include "api/duration.h"
#include "api/obj.h"

struct kp_buf;

/* --- validation reports ---------------------------------------------------------------------
 * A validator appends one line per problem to a caller's buffer,
 * "<field path>: <what is wrong, and what to write instead>\n", in field order, so the report is
 * stable for a given object. At most KP_VALID_MAX_LINES lines are written; further problems are
 * counted and summarised in one last line. */
#define KP_VALID_MAX_LINES 20u
/* A ceiling that always holds a full report (20 lines of at most 512 bytes, plus the summary). */
#define KP_MAX_VALID_REPORT (12u * 1024u)

struct kp_valid {
    struct kp_buf *msg; /* where lines go; NULL only counts */
    unsigned count;     /* problems found */
    int err;            /* first error appending to msg (-ENOMEM, -KP_ELIMIT), else 0 */
};
/* Starts a report into msg (may be NULL). */
void kp_valid_init(struct kp_valid *c, struct kp_buf *msg);
/* Records one problem; fmt writes the whole line without its newline, path first. A line longer
 * than 512 bytes is cut. */
void kp_valid_add(struct kp_valid *c, const char *fmt, ...) KP_PRINTF(2, 3);
/* Ends the report: the number of problems (0: valid) or c->err. */
int kp_valid_end(struct kp_valid *c) KP_WUR;

/* Value checks shared by the CRD validators (provider/ssh/obj-kpssh.c too). */
/* A Kubernetes duration of the CRD pattern ^([0-9]+(s|m|h))+$ ("90s", "1h30m"); "Never" too when
 * nillable. */
bool kp_valid_duration(const char *s, bool nillable);
/* An IPv4 or IPv6 literal as CEL's isIP() accepts it: no zone, no IPv4-mapped IPv6, no leading
 * zeros. */
bool kp_valid_ip(const char *s);
/* The Node taint key grammar (a qualified name: optional DNS subdomain prefix and '/', then a
 * name of at most 63 characters). */
bool kp_valid_qualified_name(const char *s);

/* One line per amount of r that kpssh cannot hold (struct kp_res_bad), naming path.<name>, the
 * value and the limit. */
void kp_valid_resources(struct kp_valid *c, const char *path, const struct kp_resources *r);

/* --- shared parts --------------------------------------------------------------------------- */

/* {group, kind, name} of a NodeClass. */
struct kp_nodeclass_ref {
    const char *group; /* NULL when absent */
    const char *kind;
    const char *name;
};
/* Whether ref names the node class kind (group, kind); the version is not compared, as in
 * Karpenter. Coexistence is by nodeClassRef: a provider acts only on the NodePools and NodeClaims
 * whose ref names a node class it supports (core/provider.h). */
bool kp_nodeclass_ref_is(const struct kp_nodeclass_ref *ref, const char *group, const char *kind)
    KP_NONNULL(1, 2, 3);

/* A duration field as written. text NULL: absent. valid false: the text is not a Go duration
 * (then never and ns are 0); the CRD pattern is stricter still (kp_valid_duration). */
struct kp_obj_duration {
    const char *text;
    bool valid;
    bool never; /* "Never" (nillable fields only) */
    int64_t ns;
};

/* The template spec a NodePool stamps onto NodeClaims, and a NodeClaim's own spec. */
struct kp_nodeclaim_spec {
    struct kp_nodeclass_ref node_class_ref;
    /* requirements; when the list fails the CRD rules the selector builder checks (bad key,
     * operator, value count, minValues) it is kept empty and reqs_error says why, with the index
     * of the offending entry: "spec.template.spec.requirements[2]: ..." */
    struct kp_reqs requirements;
    const char *reqs_error;
    struct kp_taints taints;
    struct kp_taints startup_taints;
    struct kp_obj_duration expire_after;             /* nillable; the CRD default is 720h */
    struct kp_obj_duration termination_grace_period; /* absent: wait forever */
};

/* --- NodePool -------------------------------------------------------------------------------- */

enum kp_consolidation_policy {
    KP_CONSOLIDATE_WHEN_EMPTY_OR_UNDERUTILIZED = 0, /* the default */
    KP_CONSOLIDATE_WHEN_EMPTY,
    KP_CONSOLIDATE_BALANCED,
    KP_CONSOLIDATE_UNKNOWN, /* a value this build does not know: validation reports it */
};

enum kp_disruption_reasons {
    KP_DISRUPT_UNDERUTILIZED = 1 << 0,
    KP_DISRUPT_EMPTY = 1 << 1,
    KP_DISRUPT_DRIFTED = 1 << 2,
    KP_DISRUPT_UNKNOWN = 1 << 3, /* some listed reason is none of the others */
    /* Node repair (Karpenter v1.15: repair of unhealthy nodes is paced by the budgets that list
     * it or list no reason). */
    KP_DISRUPT_UNHEALTHY = 1 << 4,
};

struct kp_budget {
    const char *nodes;    /* "10%" or "5" as written (the CRD default is "10%") */
    const char *schedule; /* cron text; NULL when absent */
    const char *duration; /* NULL when absent */
    uint32_t reasons;     /* enum kp_disruption_reasons; 0: the budget applies to every reason */
};

struct kp_nodepool_view {
    struct kp_entry e;
    struct kp_meta meta;
    int64_t generation;           /* metadata.generation, for conditions' observedGeneration */
    struct kp_labels annotations; /* metadata.annotations in the karpenter.sh/ domain only */
    struct kp_labels tmpl_labels; /* spec.template.metadata.labels */
    struct kp_labels tmpl_annotations;
    struct kp_nodeclaim_spec tmpl; /* spec.template.spec */
    enum kp_consolidation_policy consolidation_policy;
    struct kp_obj_duration consolidate_after; /* nillable; absent means 0s */
    const struct kp_budget *budgets;          /* absent: the default [{nodes: "10%"}] */
    size_t n_budgets;
    bool budgets_set; /* false: budgets holds the default */
    struct kp_resources limits;
    int32_t weight;   /* 0 when absent */
    int64_t replicas; /* static pools (alpha); -1 when absent */
    /* status */
    struct kp_conditions conditions;
    struct kp_resources resources;
    int64_t nodes;
    int64_t node_class_observed_generation;
};

int kp_nodepool_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_nodepool_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;
static inline const struct kp_nodepool_view *kp_nodepool_view(const struct kp_entry *e)
{
    return (const struct kp_nodepool_view *)kp_obj_checked(e, kp_kind_nodepool);
}
/* The CRD rules plus Karpenter's runtime validation of labels, taints and requirements
 * (the NodePool's ValidationSucceeded condition). Report as above. */
int kp_nodepool_validate(const struct kp_nodepool_view *v, struct kp_buf *msg) KP_NONNULL(1) KP_WUR;

/* --- NodeClaim ------------------------------------------------------------------------------- */

struct kp_nodeclaim_view {
    struct kp_entry e;
    struct kp_meta meta; /* labels, owners (the NodePool), deletion time */
    int64_t generation;
    const char *nodepool;         /* label karpenter.sh/nodepool (points into meta.labels) */
    struct kp_labels annotations; /* all but kubectl's last-applied-configuration */
    const char *const *finalizers;
    size_t n_finalizers;
    struct kp_nodeclaim_spec spec;
    struct kp_resources requests; /* spec.resources.requests */
    /* status */
    const char *provider_id; /* NULL until launched */
    const char *node_name;
    const char *image_id;
    struct kp_resources capacity;
    struct kp_resources allocatable;
    struct kp_conditions conditions; /* Launched, Registered, Initialized, Ready, Drifted, ... */
    int64_t last_pod_event_usec;     /* 0 when absent */
};

int kp_nodeclaim_project(const json_t *obj, struct kp_entry **ret) KP_WUR;
int kp_nodeclaim_decode(const char *p, size_t n, struct kp_entry **ret) KP_WUR;
static inline const struct kp_nodeclaim_view *kp_nodeclaim_view(const struct kp_entry *e)
{
    return (const struct kp_nodeclaim_view *)kp_obj_checked(e, kp_kind_nodeclaim);
}
int kp_nodeclaim_validate(const struct kp_nodeclaim_view *v, struct kp_buf *msg)
    KP_NONNULL(1) KP_WUR;

#endif
