/* provider/ssh/claim.h: the host claim lock and every other SSHHost status write of the
 * provider, each a compare-and-swap.
 *
 * The lock is status.claimRef {name, uid} of an SSHHost. Claiming is a JSON merge patch on the
 * status subresource that carries the metadata.resourceVersion we read: the API server refuses
 * it with a Conflict when anyone wrote the host since, so of two racing claimers exactly one
 * wins, and the loser moves on to its next candidate (it never retries the same host: whoever
 * changed it most likely claimed it). Later writes by the holder (install marker, token id,
 * InUse, release) are CAS writes too; on a Conflict they re-read the host and try again only
 * while the claim is still the holder's (name and uid), so a lost claim is never overwritten.
 *
 * Pure functions: any thread, no I/O. I/O functions: the caller's thread with its own client;
 * they do not log (rule 8). */
#ifndef KP_PROVIDER_SSH_CLAIM_H
#define KP_PROVIDER_SSH_CLAIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "provider/ssh/obj-kpssh.h"

typedef struct json_t json_t;
struct kp_client;
struct kp_entry;
struct kp_error;
struct kp_sshhost_view;
struct kp_sshnodeclass_view;

/* How often a holder's write re-reads and retries after a Conflict before giving up. */
#define KP_CLAIM_WRITE_TRIES 8

/* True when h's claim is held by the NodeClaim (name, uid): the names match, and the uids match
 * whenever both sides have one. The Delete fence and the resume test. */
bool kp_claim_held_by(const struct kp_sshhost_view *h, const char *name, const char *uid)
    KP_NONNULL(1, 2);

/* The claim candidates of class cls for node class nc among hosts: members of the class
 * (inventory.h kp_inventory_member), claimable (kp_inventory_claimable), of host class cls;
 * oldest creationTimestamp first, then by name. *ret_v is a new array of borrowed pointers
 * (kp_free it; NULL when none). 0 or -ENOMEM. */
int kp_claim_candidates(const struct kp_sshnodeclass_view *nc, const char *pool_ns, const char *cls,
                        const struct kp_sshhost_view *const *hosts, size_t n_hosts,
                        const struct kp_sshhost_view ***ret_v, size_t *ret_n)
    KP_NONNULL(1, 2, 3, 6, 7) KP_WUR;

/* What a holder writes into status (kp_claim_patch). Unset fields are left alone. */
struct kp_claim_status {
    enum kp_host_state state; /* written when set_state */
    bool set_state;
    const char *claim_name; /* claim: writes claimRef {name, uid} */
    const char *claim_uid;
    bool clear_claim;                 /* release: claimRef, providerID, bootstrapTokenID -> null */
    const char *installed_profile;    /* non-NULL: written */
    const char *bootstrap_token_id;   /* non-NULL: written */
    bool clear_bootstrap_token_id;    /* bootstrapTokenID -> null */
    const char *provider_id;          /* non-NULL: written */
    const char *adopted_provider_id;  /* non-NULL: adoptedProviderID written (never cleared) */
    const char *host_key_fingerprint; /* non-NULL: written */
    const char *last_probe_error;     /* non-NULL: written ("" clears it) */
    /* The host controller's probe facts (hostctl.h). */
    bool set_observed;            /* observedCapacity {cpu, memory} and observedArch */
    uint32_t observed_cpus;       /* cpu: a whole number of CPUs */
    uint64_t observed_mem_bytes;  /* memory: written in Ki when a multiple of 1024 */
    const char *observed_arch;    /* non-NULL: written */
    int64_t last_probe_usec;      /* > 0: lastProbeTime (RFC 3339, seconds) */
    bool set_observed_generation; /* observedGeneration */
    int64_t observed_generation;
    bool set_ready; /* conditions: exactly one, type Ready (replaces the list) */
    enum kp_cond_status ready_status;
    const char *ready_reason;
    const char *ready_message;
    int64_t ready_transition_usec; /* lastTransitionTime */
};

/* The merge patch for st carrying rv as the CAS precondition. Pure. *ret: a new reference.
 * 0, -ENOMEM or -EINVAL (no rv). */
int kp_claim_patch(const char *rv, const struct kp_claim_status *st, json_t **ret) KP_WUR;

/* Writes one CAS patch through a writer: the real one patches the status subresource; tests
 * pass their own. *ret_host: the host as written (a new entry). 0, -KP_ECONFLICT, others. */
typedef int (*kp_claim_write_fn)(void *ctx, const struct kp_sshhost_view *h, const json_t *patch,
                                 struct kp_entry **ret_host, struct kp_error *reterr);
/* The writer over the API: ctx is a struct kp_client *. */
int kp_claim_write_api(void *ctx, const struct kp_sshhost_view *h, const json_t *patch,
                       struct kp_entry **ret_host, struct kp_error *reterr) KP_WUR;
/* Reads a host fresh: ctx as for the writer. 0, -ENOENT, others. */
typedef int (*kp_claim_read_fn)(void *ctx, const char *ns, const char *name,
                                struct kp_entry **ret_host, struct kp_error *reterr);
int kp_claim_read_api(void *ctx, const char *ns, const char *name, struct kp_entry **ret_host,
                      struct kp_error *reterr) KP_WUR;

struct kp_claim_io {
    kp_claim_write_fn write;
    kp_claim_read_fn read;
    void *ctx;
};
/* The API-backed io over client c. */
struct kp_claim_io kp_claim_io_api(struct kp_client *c);

/* Claims a candidate for NodeClaim (name, uid): one CAS per host; a Conflict (or a host gone
 * meanwhile) moves on to the next host, never back. cands[0] (the oldest) is tried first, so
 * without contention the preferred host wins; after a lost race the scan goes on from a spot
 * that the uid picks and wraps around, so a burst of claimers spreads over the pool instead of
 * each losing to all the ones before it. *ret_host: the
 * claimed host as written; *ret_lost (optional): how many races were lost. 0, -ENOSPC when no
 * candidate could be claimed, or the first other error (then nothing is claimed). */
int kp_claim_first(const struct kp_claim_io *io, const struct kp_sshhost_view *const *cands,
                   size_t n, const char *name, const char *uid, struct kp_entry **ret_host,
                   size_t *ret_lost, struct kp_error *reterr) KP_WUR;

/* A holder's write of st on host (the caller's latest view). On a Conflict it re-reads and
 * retries (at most KP_CLAIM_WRITE_TRIES) while the claim is still (name, uid)'s. *ret_host: the
 * host as written. 0, -ESTALE when the claim is no longer held (nothing written), -ENOENT when
 * the host is gone, -KP_ECONFLICT after too many retries, others. */
int kp_claim_update(const struct kp_claim_io *io, const struct kp_sshhost_view *host,
                    const char *name, const char *uid, const struct kp_claim_status *st,
                    struct kp_entry **ret_host, struct kp_error *reterr) KP_WUR;

/* One CAS write of st on host (the caller's latest view), for writers that hold no claim (the
 * host controller on an unclaimed host): no retry, a Conflict is returned as -KP_ECONFLICT for
 * the caller to re-read and decide again. *ret_host (optional): the host as written. */
int kp_claim_cas(const struct kp_claim_io *io, const struct kp_sshhost_view *host,
                 const struct kp_claim_status *st, struct kp_entry **ret_host,
                 struct kp_error *reterr) KP_WUR;

/* Releases (name, uid)'s claim on host: state Available when healthy, else Unhealthy with
 * lastProbeError = reason; claimRef, providerID and bootstrapTokenID cleared. Errors as
 * kp_claim_update (-ESTALE: someone else holds or released it; nothing written). ret_host
 * optional. */
int kp_claim_release(const struct kp_claim_io *io, const struct kp_sshhost_view *host,
                     const char *name, const char *uid, bool healthy, const char *reason,
                     struct kp_entry **ret_host, struct kp_error *reterr) KP_WUR;

#endif
