/* api/requirements.h: requirement sets, the value type of Karpenter's scheduling maths.
 *
 * A requirement set maps a label key to the set of values a node may have for it. Each key's set
 * is either a finite set of values (In [a b]; the empty set is DoesNotExist) or a complement (every
 * value but these: NotIn [a b]; no values excluded is Exists), and a complement may be narrowed
 * further to integers within bounds (Gt, Lt, Gte, Lte). Adding a requirement for a key that is
 * already there intersects the two, so a set built from several sources (NodePool requirements,
 * template labels, pod requirements, an instance type) is their conjunction.
 *
 * The semantics are Karpenter's (pkg/scheduling/requirement.go, requirements.go): a key that
 * is absent is unconstrained; Intersects asks, key by key over the keys both sides define,
 * whether some value satisfies both (two "not this" sets, NotIn or DoesNotExist, always get
 * along); Compatible additionally refuses a key the incoming side requires that this side does
 * not define, unless the key is in an allow list (the well-known labels a provider fills in at
 * launch).
 *
 * Values are kept sorted and unique, keys sorted, so equal sets compare equal field by field and
 * lookups binary-search. A set owns its memory; it is a plain value: build it, then read it from
 * any number of threads. Building allocates and may fail (-ENOMEM, -KP_ELIMIT past the limits
 * below, -EINVAL for an integer operator given a non-integer); reading never allocates. */
#ifndef KP_API_REQUIREMENTS_H
#define KP_API_REQUIREMENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "api/selector.h"

struct kp_labels;
struct kp_nodeclaim_view;
struct kp_nodepool_view;

/* Ceilings: keys in a set, values in one key's set (a union of complements can grow). */
#define KP_REQSET_MAX_KEYS 1024u
#define KP_REQSET_MAX_VALUES 4096u
/* A reason text always fits this (longer texts are cut). */
#define KP_REQSET_WHY_SIZE 512u

/* One key's set. Read-only for callers. Invariant: a non-complement set has no bounds (values
 * outside them were dropped when it was made). */
struct kp_req {
    char *key;
    bool complement; /* true: every value except values[] (and within the bounds) */
    char **values;   /* sorted, unique */
    size_t n_values;
    bool has_min;        /* complement only: the value must be an integer >= min */
    bool has_max;        /* ... and <= max */
    int64_t min, max;    /* inclusive (Gt 5 is min 6) */
    uint32_t min_values; /* Karpenter minValues; the larger one survives an intersection */
    bool packed;         /* values and its strings are one allocation (freed as one) */
};

struct kp_reqset {
    struct kp_req *v; /* sorted by key */
    size_t n;
};
#define KP_REQSET_INIT                                                                             \
    {                                                                                              \
        NULL, 0                                                                                    \
    }

void kp_reqset_done(struct kp_reqset *s);

/* Intersects s's set for key with the one op and values describe: In/Equals and NotIn/NotEquals
 * take any number of values (In [] is DoesNotExist), Exists and DoesNotExist none, Gt/Lt/Gte/Lte
 * exactly one integer. 0, -EINVAL, -ENOMEM or -KP_ELIMIT; s is unchanged on failure. */
int kp_reqset_add(struct kp_reqset *s, const char *key, enum kp_selector_op op,
                  const char *const *values, size_t n_values, uint32_t min_values)
    KP_NONNULL(1, 2) KP_WUR;
/* The same for each of a packed requirement list (api/obj.h, as NodePools and NodeClaims keep
 * them), and for labels (each key In [value]). */
int kp_reqset_add_requirements(struct kp_reqset *s, const struct kp_requirement *v, size_t n)
    KP_NONNULL(1) KP_WUR;
int kp_reqset_add_labels(struct kp_reqset *s, const struct kp_labels *l) KP_NONNULL(1, 2) KP_WUR;
/* s := s ∩ other. Errors as kp_reqset_add; s is unchanged on failure. */
int kp_reqset_intersect(struct kp_reqset *s, const struct kp_reqset *other) KP_NONNULL(1, 2) KP_WUR;
/* Drops key's set from s (nothing when s does not constrain key). Never fails. */
void kp_reqset_remove(struct kp_reqset *s, const char *key) KP_NONNULL(1, 2);
/* A deep copy into *ret (initialised here). */
int kp_reqset_copy(const struct kp_reqset *s, struct kp_reqset *ret) KP_NONNULL(1, 2) KP_WUR;

/* What a NodePool asks of its nodes: its template's requirements, its template labels (key In
 * [value]) and karpenter.sh/nodepool In [name]. A requirement list the projection refused
 * (reqs_error) is -EINVAL. *ret is initialised here and filled on success only. */
int kp_reqset_from_nodepool(const struct kp_nodepool_view *np, struct kp_reqset *ret)
    KP_NONNULL(1, 2) KP_WUR;
/* A NodeClaim's spec requirements. */
int kp_reqset_from_nodeclaim(const struct kp_nodeclaim_view *nc, struct kp_reqset *ret)
    KP_NONNULL(1, 2) KP_WUR;

/* key's set, or NULL when s does not constrain key. */
const struct kp_req *kp_reqset_get(const struct kp_reqset *s, const char *key) KP_NONNULL(1, 2);
/* Whether value is in r's set. */
bool kp_req_has(const struct kp_req *r, const char *value) KP_NONNULL(1, 2);
/* The operator r reads as: In (finite, non-empty), DoesNotExist (empty), NotIn (a complement
 * excluding some values) or Exists (any other complement, bounds or not). */
enum kp_selector_op kp_req_operator(const struct kp_req *r) KP_NONNULL(1);
/* The value when r is In with exactly one value, else NULL. */
const char *kp_req_single(const struct kp_req *r) KP_NONNULL(1);
/* Writes r as text ("zone In [a b]", "cpu Gte 4", ...) into buf, cut to size. */
void kp_req_format(const struct kp_req *r, char *buf, size_t size) KP_NONNULL(1, 2);

/* Whether every key both a and b constrain has a value both allow (two NotIn/DoesNotExist sets
 * always pass). When not, and why is non-NULL, why receives the first failing key and both sets,
 * cut to why_size. No allocation. */
bool kp_reqset_intersects(const struct kp_reqset *a, const struct kp_reqset *b, char *why,
                          size_t why_size) KP_NONNULL(1, 2);
/* kp_reqset_intersects, and every key incoming requires (anything but NotIn/DoesNotExist) is
 * one s defines, unless it is in allow_undefined (NULL-terminated; NULL: none). */
bool kp_reqset_compatible(const struct kp_reqset *s, const struct kp_reqset *incoming,
                          const char *const *allow_undefined, char *why, size_t why_size)
    KP_NONNULL(1, 2);
/* Field-by-field equality (sets are canonical, so this is set equality). */
bool kp_reqset_equal(const struct kp_reqset *a, const struct kp_reqset *b) KP_NONNULL(1, 2);

/* The labels Karpenter lets a NodeClaim leave undefined because the provider sets them at
 * launch (zone, region, instance type, arch, os, capacity type, nodepool, Windows build);
 * NULL-terminated, for kp_reqset_compatible. */
extern const char *const kp_reqset_well_known_labels[];

#endif
