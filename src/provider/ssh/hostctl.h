/* provider/ssh/hostctl.h: the SSH host controller: one reconcile per SSHHost of the pool, with
 * bounded concurrency, that keeps each host's status true to the machine behind it.
 *
 *   maintenance   the maintenance annotation on an unclaimed host parks it (Maintenance, never
 *                 probed); removing the annotation releases it (Pending, probed at once)
 *   claimed       (claimRef set, whatever the state) never dialed: the NodeClaim must still exist
 *                 with the claimed uid, else the claim is stale and released (token deleted,
 *                 claimRef/providerID/bootstrapTokenID cleared, Pending); a host left Claimed
 *                 whose Node registered becomes InUse; a spent bootstrap token
 *                 (providerID and bootstrapTokenID both set, the Node exists) is deleted
 *   unclaimed     probed over SSH (pinned key, TOFU on first success) at most once per probe
 *                 interval: observed capacity and arch, CapacityDrift on a new shortfall,
 *                 Available or Unhealthy, and the zombie guard when kubelet is active
 *
 * Every SSHHost status write is a CAS (claim.h) and is skipped when nothing it carries changed.
 * The decisions are pure functions below (unit-tested in tests/unit/test-hostctl.c); the
 * controller around them does the I/O. docs/operations.md ("The host controller: states,
 * probe, zombie guard") describes the behaviour for operators.
 *
 * Threads: kp_ssh_hostctl_new/start/stop/free on the controller's main thread; reconciles run on
 * the controller's own workers (k8s/reconciler.h), each with its own client, and never wait on
 * SSH: probes and zombie leaves are jobs of the controller's SSH job pool (jobs.h, ssh_workers
 * threads), whose end enqueues the host's key; the reconcile that takes the result decides on
 * it. The informer handlers it installs only enqueue keys. The pure functions: any thread. */
#ifndef KP_PROVIDER_SSH_HOSTCTL_H
#define KP_PROVIDER_SSH_HOSTCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "provider/ssh/claim.h"

struct kp_client;
struct kp_ctx;
struct kp_events;
struct kp_informer;
struct kp_probe_result;
struct kp_ssh_observer;
struct kp_sshhost_view;

/* Defaults of the options left 0. */
#define KP_HOSTCTL_WORKERS 4
#define KP_HOSTCTL_SSH_WORKERS 8
#define KP_HOSTCTL_PROBE_INTERVAL_USEC (120 * 1000000ULL)
#define KP_HOSTCTL_PROBE_TIMEOUT_USEC (30 * 1000000ULL)
#define KP_HOSTCTL_CLAIMED_RECHECK_USEC (300 * 1000000ULL)
#define KP_HOSTCTL_TOKEN_RECHECK_USEC (30 * 1000000ULL)
/* After a stale claim is released or maintenance ends: look again this soon. */
#define KP_HOSTCTL_SOON_USEC (1000000ULL)
/* A host whose last probe failed is probed again after as long as it has been failing: at least
 * one probe interval, at most this (or the interval, when that is longer). A dead host costs a
 * probe timeout each time, so this keeps many of them from crowding out the rest. */
#define KP_HOSTCTL_BACKOFF_MAX_USEC (600 * 1000000ULL)

/* The reporting component of the controller's events (the caller creates the recorder). */
#define KP_HOSTCTL_EVENTS_COMPONENT "kpssh-hostprobe"

/* Reasons of the SSHHost Ready condition. True only for ProbeSucceeded. */
#define KP_HOSTCTL_REASON_SUCCEEDED "ProbeSucceeded"        /* True: Available, Claimed, InUse */
#define KP_HOSTCTL_REASON_AWAITING "AwaitingProbe"          /* Unknown: Pending */
#define KP_HOSTCTL_REASON_FAILED "ProbeFailed"              /* False: unreachable, probe error */
#define KP_HOSTCTL_REASON_HOSTKEY "HostKeyMismatch"         /* False: possible man-in-the-middle */
#define KP_HOSTCTL_REASON_MAINTENANCE "Maintenance"         /* False: parked by annotation */
#define KP_HOSTCTL_REASON_LEAVING "Leaving"                 /* False: leave in progress */
#define KP_HOSTCTL_REASON_FOREIGN "ForeignKubelet"          /* False: kubelet kpssh did not start */
#define KP_HOSTCTL_REASON_ZOMBIE_FAILED "ZombieLeaveFailed" /* False: the leave script failed */
/* False: a zombie leave started (Leaving) or ran, and deleting its Node is not confirmed yet. */
#define KP_HOSTCTL_REASON_LEAVE_UNFINISHED "LeaveUnfinished"
#define KP_HOSTCTL_REASON_DUPLICATE "DuplicateAddress" /* False: an older SSHHost has the address */
/* False: the spec holds a value kpssh cannot use (kp_sshhost_validate), e.g. a capacity beyond
 * 64-bit milli-units saved before the CRD bounded it; the message lists each field. */
#define KP_HOSTCTL_REASON_INVALID "InvalidSpec"

/* Event reasons on SSHHosts. */
#define KP_HOSTCTL_EVENT_CAPACITY_DRIFT "CapacityDrift"
#define KP_HOSTCTL_EVENT_ZOMBIE "ZombieKubelet"
#define KP_HOSTCTL_EVENT_ZOMBIE_LEFT "ZombieLeft"
#define KP_HOSTCTL_EVENT_ZOMBIE_FAILED "ZombieLeaveFailed"
#define KP_HOSTCTL_EVENT_FOREIGN "ForeignKubelet"
#define KP_HOSTCTL_EVENT_STALE_CLAIM "StaleClaimReleased"
#define KP_HOSTCTL_EVENT_DUPLICATE "DuplicateAddress"
#define KP_HOSTCTL_EVENT_INVALID KP_HOSTCTL_REASON_INVALID
/* On each change of a probed host's state: into Unhealthy (Warning, reason = the Ready reason:
 * ProbeFailed or HostKeyMismatch) and back to Available (Normal). The recorder rate-limits. */
#define KP_HOSTCTL_EVENT_PROBE_FAILED KP_HOSTCTL_REASON_FAILED
#define KP_HOSTCTL_EVENT_PROBE_SUCCEEDED KP_HOSTCTL_REASON_SUCCEEDED

/* --- the controller -------------------------------------------------------------------------- */

struct kp_ssh_hostctl_opts {
    const char *pool_namespace; /* required: the SSHHosts (and their key Secrets) live here */
    struct kp_client *client;   /* required: cloned per worker; must outlive new() only */
    /* Informers, not yet started (the caller starts them after new(), stops them before
     * free()); new() adds its indexes (indexes.h) and handlers. hosts, nodes and profiles are
     * required; nodeclaims is optional (without it every claim check is an API GET);
     * nodeclasses is accepted for symmetry with the other controllers and not read. */
    struct kp_informer *hosts, *nodes, *nodeclaims, *nodeclasses, *profiles;
    struct kp_events *events;               /* optional; reporting KP_HOSTCTL_EVENTS_COMPONENT */
    const struct kp_ssh_observer *observer; /* optional: probe, phase and zombie reports */
    unsigned workers;                       /* reconcile workers; 0: KP_HOSTCTL_WORKERS */
    unsigned ssh_workers; /* SSH job pool threads (probes, leaves); 0: KP_HOSTCTL_SSH_WORKERS */
    /* The process's context (borrowed; NULL: none): once it is cancelled (SIGTERM, a lost
     * Lease) no reconcile starts a job and the running jobs end within a poll slice. */
    const struct kp_ctx *ctx;
    uint64_t probe_interval_usec;  /* 0: KP_HOSTCTL_PROBE_INTERVAL_USEC */
    uint64_t probe_timeout_usec;   /* 0: KP_HOSTCTL_PROBE_TIMEOUT_USEC (dial + command) */
    uint64_t claimed_recheck_usec; /* 0: KP_HOSTCTL_CLAIMED_RECHECK_USEC */
    uint64_t token_recheck_usec;   /* 0: KP_HOSTCTL_TOKEN_RECHECK_USEC */
};

struct kp_ssh_hostctl;

/* A stopped controller (on the skeleton of k8s/controller.h). opts is copied (the pointers in
 * it are borrowed: the informers, events and observer must outlive the controller). On an error
 * nothing stays registered. 0, -EINVAL (a required option missing), -ENOMEM, or an informer
 * error (-EBUSY when an informer already started). */
int kp_ssh_hostctl_new(const struct kp_ssh_hostctl_opts *o, struct kp_ssh_hostctl **ret) KP_WUR;
/* Starts the workers; every host already cached is enqueued. 0 or -errno. */
int kp_ssh_hostctl_start(struct kp_ssh_hostctl *h) KP_WUR;
/* Cancels the SSH jobs (a session on a host that never answers ends within a poll slice;
 * their results are dropped), then lets each reconcile worker finish the host in hand (API
 * calls only) and joins them. Idempotent. */
void kp_ssh_hostctl_stop(struct kp_ssh_hostctl *h);
/* True while started and the informers it watches (hosts, Nodes, NodeClaims when given) have
 * synced. Any thread. */
bool kp_ssh_hostctl_ready(struct kp_ssh_hostctl *h);
/* Stops, takes its handlers back out of the informers and frees; accepts and returns NULL.
 * Stop the informers first (their handlers point here), free them after. */
struct kp_ssh_hostctl *kp_ssh_hostctl_free(struct kp_ssh_hostctl *h);

/* --- decisions (pure: no I/O, any thread; views borrowed) ------------------------------------ */

struct kp_hostctl_timing {
    uint64_t probe_interval_usec, claimed_recheck_usec, token_recheck_usec;
    uint64_t backoff_max_usec; /* 0: KP_HOSTCTL_BACKOFF_MAX_USEC */
};

/* How long after its last probe h is due again: the probe interval, or for a host whose last
 * probe failed (Ready False with ProbeFailed or HostKeyMismatch since failing_since_usec) the
 * time it has been failing, clamped to [interval, max(interval, backoff max)]. */
uint64_t kp_hostctl_probe_period(const struct kp_sshhost_view *h, const struct kp_hostctl_timing *t)
    KP_NONNULL(1, 2);

/* True when h's last probe did not succeed (Pending, Unhealthy, never probed): its probe may
 * cost a whole probe timeout, so it runs in the SSH job pool's slow lane (at most half its
 * threads), and hosts that answer keep their schedule however many do not. */
bool kp_hostctl_suspect(const struct kp_sshhost_view *h) KP_NONNULL(1);

/* Step one: what a reconcile of h does at wall-clock time now_usec. */
enum kp_hostctl_step {
    KP_HOSTCTL_STEP_MAINTENANCE_ENTER, /* unclaimed, annotated: write Maintenance */
    KP_HOSTCTL_STEP_MAINTENANCE_EXIT,  /* Maintenance, annotation gone: write Pending */
    KP_HOSTCTL_STEP_PARKED,            /* Maintenance and annotated: nothing, no requeue */
    KP_HOSTCTL_STEP_CLAIMED,           /* claimRef set (or a claimed state): check the claim */
    KP_HOSTCTL_STEP_INVALID,           /* unclaimed, spec fails kp_sshhost_validate: refuse */
    KP_HOSTCTL_STEP_FRESH,             /* probed this generation within the interval: wait */
    KP_HOSTCTL_STEP_PROBE,             /* probe over SSH */
};
/* *ret_wait_usec: for FRESH, the rest of the interval (at least 1 s). */
enum kp_hostctl_step kp_hostctl_plan(const struct kp_sshhost_view *h, int64_t now_usec,
                                     const struct kp_hostctl_timing *t, uint64_t *ret_wait_usec)
    KP_NONNULL(1, 3, 4);

/* The Ready condition that goes with a state (reason_hint overrides the reason of a False one:
 * HostKeyMismatch, ForeignKubelet, ZombieLeaveFailed; NULL: the state's own). last_error is the
 * message of a False condition where the state has one (Unhealthy). Fills the set_ready fields of
 * st (message strings are static or borrowed from last_error/h), keeping the condition's
 * lastTransitionTime from h when status and reason are unchanged, else now_usec. */
void kp_hostctl_ready_for(const struct kp_sshhost_view *h, enum kp_host_state state,
                          const char *reason_hint, const char *last_error, int64_t now_usec,
                          struct kp_claim_status *st) KP_NONNULL(1, 6);

/* True when writing st would change nothing h already says (so the write is skipped). */
bool kp_hostctl_unchanged(const struct kp_sshhost_view *h, const struct kp_claim_status *st)
    KP_NONNULL(1, 2);

/* Step two, for a claimed host: what the claim check found. */
struct kp_hostctl_claim_in {
    bool nodeclaim_found;       /* the NodeClaim named by claimRef exists (confirmed by a GET) */
    const char *nodeclaim_uid;  /* its uid */
    const char *registered_pid; /* providerID of its registered Node, or NULL */
    bool node_exists;           /* a Node with the host's node IP or the claim's name exists */
};
enum kp_hostctl_claim_verb {
    KP_HOSTCTL_CLAIM_RELEASE_STALE, /* why: the reason; then requeue KP_HOSTCTL_SOON_USEC */
    KP_HOSTCTL_CLAIM_MARK_IN_USE,   /* Claimed and registered: InUse + providerID */
    KP_HOSTCTL_CLAIM_COLLECT_TOKEN, /* delete the token, clear bootstrapTokenID */
    KP_HOSTCTL_CLAIM_RECHECK,       /* nothing to do; requeue_usec */
};
struct kp_hostctl_claim_action {
    enum kp_hostctl_claim_verb verb;
    const char *why;       /* RELEASE_STALE: a static explanation */
    uint64_t requeue_usec; /* when to look again after the action */
};
void kp_hostctl_decide_claimed(const struct kp_sshhost_view *h,
                               const struct kp_hostctl_claim_in *in,
                               const struct kp_hostctl_timing *t,
                               struct kp_hostctl_claim_action *ret) KP_NONNULL(1, 2, 3, 4);

/* Step three, for a probed (unclaimed) host: what the probe found. */
struct kp_hostctl_probe_in {
    int err;                           /* 0, or the probe's error (-KP_EHOSTKEY, -ETIMEDOUT...) */
    const char *err_msg;               /* its text (redacted), or NULL */
    const struct kp_probe_result *res; /* when err is 0 */
    const char *seen_fp;               /* the host key seen when no pin existed (TOFU), or NULL */
    int64_t now_usec;
};
#define KP_HOSTCTL_NOTE_MAX 256
struct kp_hostctl_probe_outcome {
    struct kp_claim_status st; /* the write: strings borrowed from h, in and drift_note */
    bool write;                /* false: nothing changed (never after a probe: lastProbeTime) */
    bool capacity_drift;       /* emit CapacityDrift with drift_note (a new shortfall) */
    char drift_note[KP_HOSTCTL_NOTE_MAX];
    bool zombie_check; /* kubelet active on an unclaimed host: run the zombie guard */
    bool collect_node; /* a zombie leave ended without its Node deletion (a crash, a failed
                        * delete) and kubelet is stopped: delete the Nodes with the host's
                        * address that predate the leave before the host is Available again */
    bool healthy;      /* the probe succeeded */
    uint64_t requeue_usec;
};
void kp_hostctl_decide_probe(const struct kp_sshhost_view *h, const struct kp_hostctl_probe_in *in,
                             const struct kp_hostctl_timing *t,
                             struct kp_hostctl_probe_outcome *ret) KP_NONNULL(1, 2, 3, 4);

/* True when a Node with providerID pid is kpssh's for h: pid is h's static providerID
 * (kpssh://<pool-ns>/<host>), the one it backs now, or the one its last adopting join took
 * over (status.adoptedProviderID). A Node with h's address and any other providerID (or none)
 * belongs to somebody else and is never deleted. */
bool kp_hostctl_node_ours(const struct kp_sshhost_view *h, const char *pid) KP_NONNULL(1);

/* Deletes h's Nodes once a leave has run (kubelet is known stopped): those in nodes (indexed by
 * kp_ssh_index_nodes) with h's address or one of its providerIDs that are ours
 * (kp_hostctl_node_ours), not being deleted already, and created before since_usec (when the
 * leave took the host out of service: a Node created later belongs to a join that happened since,
 * which a decision made on a cached host must never touch). A Node with another providerID is
 * somebody else's. Both kinds are left alone and logged. Each delete is fenced by the Node's uid.
 * what names the leave in messages ("zombie", "host"). *ret_deleted: how many went. On a failed
 * delete *ret_why owns "<what> left, but deleting Node ... failed: ..." and 0 is returned, the
 * Nodes after it left for the next try. */
int kp_hostctl_delete_our_nodes(struct kp_store *nodes, struct kp_client *c,
                                const struct kp_sshhost_view *h, int64_t since_usec,
                                const char *what, unsigned *ret_deleted, char **ret_why) KP_WUR
    KP_NONNULL(1, 2, 3, 5, 6, 7);

/* The zombie guard's verdict on an unclaimed host whose kubelet is active: ours (a Node with its
 * node IP is ours by kp_hostctl_node_ours, or kpssh installed a profile there: leave it, delete
 * our Nodes) or foreign (neither: park it, touch nothing). A leave that finds no install marker
 * turns the verdict into foreign too. */
enum kp_hostctl_zombie { KP_HOSTCTL_ZOMBIE_OURS, KP_HOSTCTL_ZOMBIE_FOREIGN };
enum kp_hostctl_zombie kp_hostctl_zombie_verdict(const struct kp_sshhost_view *h,
                                                 bool our_node_found) KP_NONNULL(1);

/* The lastProbeError of a parked foreign kubelet. */
#define KP_HOSTCTL_FOREIGN_MESSAGE                                                                 \
    "kubelet is active but kpssh cannot attribute it: no Node with this host's address has a "     \
    "providerID of kpssh's and no profile was installed by kpssh; it may belong to another "       \
    "cluster, so the host is parked and left untouched (stop that kubelet or delete this SSHHost)"

/* The lastProbeError of a host refused because an older SSHHost has its address (written with
 * that host's name into a buffer of this size). */
#define KP_HOSTCTL_DUPLICATE_MESSAGE_MAX 640
/* The InvalidSpec message: the validator's lines, cut to fit a condition message. */
#define KP_HOSTCTL_INVALID_MESSAGE_MAX 1024

#endif
