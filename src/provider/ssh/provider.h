/* provider/ssh/provider.h: the SSH provider behind core/provider.h: Create claims a host of
 * the cheapest fitting class, installs (once per <profile>@<version>), mints a bootstrap token,
 * joins over SSH and returns when the join script has exited 0 (the NodeClaim is Launched; the
 * host controller marks the host InUse when its Node registers, and the core waits for that);
 * Delete (fenced by claimRef name and uid) runs leave, collects the token and returns the host to
 * the warm pool. Get, List, the instance-type catalog (one instance type per host class of an
 * SSHNodeClass, republished when the SSHHosts or SSHNodeClasses change), drift, the supported
 * node class (karpenter.kpssh.dev/SSHNodeClass) and repair policies complete the vtable. The
 * state machine is in provider.c's DESIGN block.
 *
 * The provider reads SSHHosts, SSHNodeClasses, SSHJoinProfiles and (optionally) Nodes from
 * informer stores (the caller runs the informers) and writes through the calling worker's client: SSHHost status
 * (every write a CAS, claim.h), bootstrap-token Secrets in kube-system, and GETs of the key and
 * join Secrets at use time (no Secret informer, so RBAC can stay a namespaced `get`).
 *
 * Threads: any number of workers may call the ops at once, each with its own client; the
 * provider's own state is immutable after kp_ssh_provider_new() but for the published catalogs,
 * which a mutex guards. */
#ifndef KP_PROVIDER_SSH_PROVIDER_H
#define KP_PROVIDER_SSH_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "core/provider.h"

struct kp_client;
struct kp_ctx;
struct kp_events;
struct kp_informer;
struct kp_nodeclaim_view;
struct kp_ssh_observer;
struct kp_sshnodeclass_view;
struct kp_store;

#define KP_SSH_PROVIDER_NAME "ssh"
#define KP_SSH_PROVIDER_ID_SCHEME "kpssh://"
#define KP_SSH_ANNOTATION_NODECLASS_HASH "karpenter.kpssh.dev/nodeclass-hash"
#define KP_SSH_ANNOTATION_NODECLASS_HASH_VERSION "karpenter.kpssh.dev/nodeclass-hash-version"
#define KP_SSH_NODECLASS_HASH_VERSION "v1"
/* Adopt mode only (Static Create returns at join exit): the wait for the adopting Node when the
 * options leave it 0, and how often it asks the API server when it has no Node store. With a
 * store it wakes on the store's change notification (and every 200 ms to look at its ctx). */
#define KP_SSH_REGISTRATION_TIMEOUT_USEC (5 * 60 * 1000000ULL)
#define KP_SSH_REGISTRATION_POLL_USEC (1000000ULL)

struct kp_ssh_provider_opts {
    const char *pool_namespace; /* SSHHosts and their Secrets live here */
    /* auth-extra-groups of the bootstrap tokens minted for joins (token.h); NULL:
     * KP_TOKEN_GROUP. Copied. */
    const char *bootstrap_group;
    struct kp_store *hosts;       /* SSHHost projections (borrowed; must outlive the provider) */
    struct kp_store *nodeclasses; /* SSHNodeClass projections */
    struct kp_store *profiles;    /* SSHJoinProfile projections */
    struct kp_events *events;     /* optional: events on SSHHosts */
    /* optional: Node projections from an informer whose indexes include kp_ssh_index_nodes()
     * (indexes.h). Registration reads it; without it, registration asks the API server. */
    struct kp_store *nodes;
    const struct kp_ssh_observer *observer; /* optional: phase timings (observe.h) */
    /* optional: the informers behind nodeclasses and profiles, for watch_drift (without them
     * the core polls drift) */
    struct kp_informer *nodeclass_informer, *profile_informer;
    uint64_t registration_timeout_usec; /* Adopt only */
    uint64_t registration_poll_usec;
    /* Threads of the provider's SSH job pool (jobs.h), at most KP_SSH_JOBS_MAX_THREADS. With a
     * pool (the controller's), a Create's install and join and a Delete's leave run on it and
     * the calls answer IN_PROGRESS and "releasing" while they run (core/provider.h), once
     * kp_ssh_provider_start() has started it. 0: they run on the caller's thread, and the calls
     * return when they are done (tools, tests). */
    unsigned job_threads;
};

/* Node repair (core/provider.h repair_policies): a Node whose Ready condition has been False or
 * Unknown this long is replaced, the toleration Karpenter's own providers use. */
#define KP_SSH_REPAIR_TOLERATION_USEC (30 * 60 * 1000000ULL)

struct kp_ssh_provider;

/* 0, -EINVAL (missing namespace or store, invalid bootstrap group) or -ENOMEM. */
int kp_ssh_provider_new(const struct kp_ssh_provider_opts *opts,
                        struct kp_ssh_provider **ret) KP_WUR;
struct kp_ssh_provider *kp_ssh_provider_free(struct kp_ssh_provider *p);
/* Starts the job pool's threads under parent (the process's context: SIGTERM and a lost Lease
 * cancel what runs); a no-op without a pool. 0, -EALREADY or -errno. */
int kp_ssh_provider_start(struct kp_ssh_provider *p, const struct kp_ctx *parent) KP_WUR;
/* Stops the pool: what runs is cancelled and waited for, unread results are dropped (a claim
 * stays resumable: the next Create or Delete submits again). Idempotent. */
void kp_ssh_provider_stop(struct kp_ssh_provider *p);
/* The provider as the core sees it (borrowed; valid while p lives). */
struct kp_provider kp_ssh_provider_as_provider(struct kp_ssh_provider *p);

/* Where a Create's wall time went, for tests, benches and the phase histogram. */
struct kp_ssh_create_report {
    uint64_t claim_usec;        /* readiness checks, resume lookup, CAS claim */
    uint64_t install_usec;      /* 0 when the marker matched (warm host) */
    uint64_t token_usec;        /* mint + record the id on the host */
    uint64_t join_usec;         /* the join script over SSH */
    uint64_t registration_usec; /* Adopt only: join exit -> the adopting Node; 0 for Static */
    bool resumed;               /* an earlier Create's claim was found by claimRef */
    bool installed;             /* install ran */
    size_t races_lost;          /* claim CAS conflicts on the way */
    char host[254];             /* the SSHHost name */
};

/* Create with a report (optional). Same contract as kp_provider_ops.create (ctx may be NULL). */
int kp_ssh_provider_create(struct kp_ssh_provider *p, const struct kp_ctx *ctx, struct kp_client *c,
                           const struct kp_nodeclaim_view *nc, struct kp_provider_instance *ret,
                           struct kp_ssh_create_report *report, struct kp_provider_err *err) KP_WUR;

/* The join-affecting hash of a node class (vars, joinSecretRef, providerIDSource, cluster): 16
 * hex digits of SHA-256 over their canonical JSON, into ret (17 bytes). Pure. 0, -ENOMEM. */
int kp_ssh_nodeclass_hash(const struct kp_sshnodeclass_view *nc, char ret[17]) KP_WUR;

/* For tests and tools: deletes the Node the core would delete after Delete (the Node object is
 * the core's job). An absent Node is success. */
int kp_ssh_provider_delete_node(struct kp_client *c, const char *name) KP_WUR;

#endif
