/* api/selector.h: label selectors and node selector requirements.
 *
 * One type serves three Kubernetes shapes, because they share matching semantics:
 *  - the string form of labels.Parse: "a=b,c!=d,e in (x,y),f notin (z),g,!h,n>5";
 *  - metav1.LabelSelector JSON: matchLabels + matchExpressions (In, NotIn, Exists,
 *    DoesNotExist);
 *  - NodeSelectorRequirement arrays (In, NotIn, Exists, DoesNotExist, Gt, Lt) as NodePools and
 *    NodeClaims carry them, with Karpenter's Gte/Lte and minValues.
 * A selector is a conjunction of requirements; an empty one matches every label set (a nil
 * LabelSelector, which matches nothing, is the caller's to spot before building one).
 *
 * A selector is immutable once built; several threads may match against it at once. Building
 * allocates; matching does not. Requirements are kept sorted by key (then operator and values)
 * and values of In/NotIn are sorted and de-duplicated, as Kubernetes does, so the string form is
 * canonical. */
#ifndef KP_API_SELECTOR_H
#define KP_API_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "json/json.h"

struct kp_buf;
struct kp_map;
struct kp_selector;

enum kp_selector_op {
    KP_SEL_IN,
    KP_SEL_NOT_IN,
    KP_SEL_EXISTS,
    KP_SEL_DOES_NOT_EXIST,
    KP_SEL_EQUALS,     /* "=" and "==", and matchLabels entries */
    KP_SEL_NOT_EQUALS, /* "!=" */
    KP_SEL_GT,         /* integer comparisons: the label must parse as int64 */
    KP_SEL_LT,
    KP_SEL_GTE, /* Karpenter only */
    KP_SEL_LTE, /* Karpenter only */
};

/* One requirement, read-only for callers (the selector owns all memory). */
struct kp_requirement {
    char *key;
    enum kp_selector_op op;
    char **values;       /* sorted, unique; none for EXISTS/DOES_NOT_EXIST, one for the rest */
    size_t n_values;     /* except IN/NOT_IN, which have one or more */
    int64_t bound;       /* GT/LT/GTE/LTE: values[0] as an integer; else 0 */
    uint32_t min_values; /* Karpenter minValues; 0 when unset */
};

/* A label as matching sees it; pointers are borrowed. */
struct kp_label {
    const char *key;
    const char *value;
};

/* Why building failed: a static message and where. For the string form pos is the byte
 * offset; for JSON forms it is the index of the offending requirement (matchLabels entries
 * first). */
struct kp_selector_error {
    size_t pos;
    const char *msg;
};

/* Limits on what we accept from outside: string form length, requirements, values each. */
#define KP_SELECTOR_MAX_LEN (64u * 1024)
#define KP_SELECTOR_MAX_REQS 1024
#define KP_SELECTOR_MAX_VALUES 1024
/* Karpenter's bounds for minValues. */
#define KP_SELECTOR_MIN_VALUES_MAX 50

/* Parses the string form (labels.Parse). Whitespace around tokens is ignored; "" or only
 * whitespace is the empty selector. 0; -KP_EPARSE (syntax), -EINVAL (invalid key or value, wrong
 * number of values, non-integer for > or <), -KP_ELIMIT (past the limits above), -ENOMEM.
 * ret_err (optional) explains -KP_EPARSE, -EINVAL and -KP_ELIMIT. *ret is a new selector. */
int kp_selector_parse(const char *p, size_t n, struct kp_selector **ret,
                      struct kp_selector_error *ret_err) KP_WUR;

/* Builds from a metav1.LabelSelector object (matchLabels and/or matchExpressions; both absent or
 * {} is the empty selector). Wrong JSON types are -KP_EPARSE; unknown operators, bad keys or
 * values, values given to Exists/DoesNotExist or missing for In/NotIn are -EINVAL. */
int kp_selector_from_json(const json_t *label_selector, struct kp_selector **ret,
                          struct kp_selector_error *ret_err) KP_WUR;

/* Builds from a plain string map such as pod.spec.nodeSelector: every entry is key=value. */
int kp_selector_from_map_json(const json_t *map, struct kp_selector **ret,
                              struct kp_selector_error *ret_err) KP_WUR;

/* Builds from an array of NodeSelectorRequirement objects ({key, operator, values, minValues});
 * operators In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte. Gt/Lt/Gte/Lte take exactly one
 * int64 value. minValues must be 1..50, and In with minValues needs at least that many values
 * (Karpenter's CRD rules). Keys are validated as label keys; values are not (the API server
 * does not validate them either, and an odd value simply never matches). */
int kp_selector_from_node_requirements(const json_t *array, struct kp_selector **ret,
                                       struct kp_selector_error *ret_err) KP_WUR;

/* Frees; accepts and returns NULL. */
struct kp_selector *kp_selector_free(struct kp_selector *s);

size_t kp_selector_count(const struct kp_selector *s);
/* The i-th requirement (NULL when out of range); valid while s lives. */
const struct kp_requirement *kp_selector_at(const struct kp_selector *s, size_t i);
bool kp_selector_is_empty(const struct kp_selector *s);

/* True when every requirement holds for the labels (n pairs; a key should appear once, the first
 * occurrence wins). NotIn, NotEquals and DoesNotExist hold for an absent key; Gt/Lt/Gte/Lte need
 * the label present and an int64. No allocation; any thread. */
bool kp_selector_matches(const struct kp_selector *s, const struct kp_label *labels, size_t n);
/* The same over a bare array of requirements, as projections keep them packed (api/obj.h). */
bool kp_requirements_match(const struct kp_requirement *reqs, size_t nreqs,
                           const struct kp_label *labels, size_t n);
/* The same over a kp_map whose values are NUL-terminated strings. */
bool kp_selector_matches_map(const struct kp_selector *s, const struct kp_map *labels);

/* Appends the canonical string form ("a=b,c in (x,y),!d") to out. 0, -ENOMEM, -KP_ELIMIT, or
 * -EOPNOTSUPP when a requirement has no string form (Gte, Lte, minValues). */
int kp_selector_format(const struct kp_selector *s, struct kp_buf *out) KP_WUR;

/* Label syntax (validation.IsQualifiedName / IsValidLabelValue). 0 or -EINVAL with what is
 * wrong in *ret_msg (base/err.h). */
int kp_label_validate_key(const char *p, size_t n, char **ret_msg) KP_WUR;
int kp_label_validate_value(const char *p, size_t n, char **ret_msg) KP_WUR;

#endif
