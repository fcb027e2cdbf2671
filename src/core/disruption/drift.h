/* core/disruption/drift.h: Karpenter's Drift disruption method, as pure
 * functions the disruption loop (disruption.h) calls with a simulation from
 * core/provisioning/simulation.h. Marking NodeClaims Drifted is marking.h's.
 *
 * Candidates: disruption candidates (kp_disruption_blocked) of a dynamic NodePool whose
 * NodeClaim is Drifted=True. Drift is an eventual method: a NodeClaim with a
 * terminationGracePeriod stays a candidate despite a do-not-disrupt pod or a blocking PDB (the
 * grace period will force the pods out). Order: nodes without reschedulable pods first, then the oldest Drifted
 * transition, then the NodeClaim's name.
 *
 * For the first candidate whose NodePool's Drifted budget allows one more, the simulation takes
 * it away: when every running pod finds a place (existing initialized nodes or new NodeClaims,
 * any number, no price filter) the command is to create those NodeClaims, wait until they are
 * Initialized, then delete the candidate; otherwise the candidate gets DisruptionBlocked with
 * the scheduling error and the next one is tried. No 15 s validation (upstream has none for
 * drift). Pure: no I/O, no clock, no lock. */
#ifndef KP_CORE_DISRUPTION_DRIFT_H
#define KP_CORE_DISRUPTION_DRIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "core/provisioning/simulation.h"

struct kp_ctx;
struct kp_dnode;

#define KP_DISRUPTION_REASON_DRIFTED "Drifted"

/* Whether d is a Drift candidate at now (see the top). */
bool kp_drift_candidate(const struct kp_dnode *d, int64_t now_usec) KP_NONNULL(1);

/* The Drift candidates among v[0..n) in the order above, into ret_idx (room for n). */
size_t kp_drift_candidates(const struct kp_dnode *v, size_t n, int64_t now_usec, size_t *ret_idx)
    KP_NONNULL(4);

/* The command Drift found: the candidate and the simulation whose plan's claims are its
 * replacements (0..n; the plan's input lives in the build). */
struct kp_drift_command {
    size_t idx;
    struct kp_sim_run run;
    struct kp_sched_input in;
};
void kp_drift_command_done(struct kp_drift_command *c);

/* Told of a candidate whose pods would not all find a place, with the first error. */
typedef void (*kp_drift_blocked_fn)(void *ctx, const struct kp_dnode *d, const char *why);

/* The Drift search over cand[0..n_cand) (kp_drift_candidates; v one for one with sim's
 * snapshot), each within its NodePool's Drifted budget counted over v. 1 found (*ret), 0 none,
 * or a negative error. stop (may be NULL) ends the search when done. */
int kp_drift_search(struct kp_sim *sim, const struct kp_dnode *v, size_t n, const size_t *cand,
                    size_t n_cand, int64_t now_usec, kp_drift_blocked_fn fn, void *ctx,
                    const struct kp_ctx *stop, struct kp_drift_command *ret)
    KP_NONNULL(1, 10) KP_WUR;

#endif
