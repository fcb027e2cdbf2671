/* core/conds.h: editing an object's status conditions as Karpenter's condition sets do, and
 * rendering them for a compare-and-swap status write.
 *
 * A merge patch replaces the whole conditions list, so a controller that sets one condition
 * must send every other one as it was: kp_condset_init() copies the cached list (type, status,
 * reason, message, observedGeneration, lastTransitionTime), the setters edit it, and
 * kp_condset_json() renders the full list. lastTransitionTime moves only when a condition's
 * status changes (metav1.Time, second precision); every set condition is stamped with the
 * object's generation. kp_condset_changed() says whether anything differs from the cache, so a
 * reconcile that finds nothing to do writes nothing.
 *
 * The root condition (Ready) follows its dependents, as in Karpenter: True when every dependent
 * is True; otherwise False when some dependent is False, else Unknown, with the first such
 * dependent's reason and message. A dependent that is absent counts as Unknown.
 *
 * A condset is owned by one thread; it copies what it keeps, so the cached entry may go. */
#ifndef KP_CORE_CONDS_H
#define KP_CORE_CONDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "api/obj.h"

typedef struct json_t json_t;

struct kp_condset_item {
    char *type;
    enum kp_cond_status status;
    char *reason;  /* never NULL once set */
    char *message; /* never NULL once set */
    int64_t observed_generation;
    int64_t last_transition_usec;
};

struct kp_condset {
    struct kp_condset_item *v;
    size_t n;
    int64_t generation;
    int64_t now_usec;
    bool changed;
};

/* Copies cached (may be NULL: none) into cs. 0 or -ENOMEM (cs is then empty and valid). */
int kp_condset_init(struct kp_condset *cs, const struct kp_conditions *cached, int64_t generation,
                    int64_t now_usec) KP_NONNULL(1) KP_WUR;
void kp_condset_done(struct kp_condset *cs);

/* The condition of type, or NULL. */
const struct kp_condset_item *kp_condset_get(const struct kp_condset *cs, const char *type)
    KP_NONNULL(1, 2);
/* Whether type is there with status True. */
bool kp_condset_is_true(const struct kp_condset *cs, const char *type) KP_NONNULL(1, 2);

/* Sets type to status with reason and message (NULL: "" for the message; a NULL or empty reason
 * is the type for True and "AwaitingReconciliation" otherwise, as Karpenter's condition sets do). Marks the set changed when any field differs.
 * 0 or -ENOMEM. */
int kp_condset_set(struct kp_condset *cs, const char *type, enum kp_cond_status status,
                   const char *reason, const char *message) KP_NONNULL(1, 2) KP_WUR;
/* Removes type (Karpenter clears Drifted and Consolidatable this way). */
void kp_condset_clear(struct kp_condset *cs, const char *type) KP_NONNULL(1, 2);
/* Recomputes root from deps[0..n) (see the top). 0 or -ENOMEM. */
int kp_condset_root(struct kp_condset *cs, const char *root, const char *const *deps, size_t n)
    KP_NONNULL(1, 2) KP_WUR;
static inline bool kp_condset_changed(const struct kp_condset *cs)
{
    return cs->changed;
}

/* The whole list as a JSON array (a new reference in *ret), in the cached order with new types
 * appended. 0 or -ENOMEM. */
int kp_condset_json(const struct kp_condset *cs, json_t **ret) KP_NONNULL(1, 2) KP_WUR;

/* The NodeClaim's living conditions (Launched, Registered, Initialized) under Ready. */
extern const char *const kp_nodeclaim_ready_deps[3];

#endif
