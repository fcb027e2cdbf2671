/* provider/ssh/hostio.h: what the SSH provider and the host controller share to reach a host:
 * the key Secret (and its knownHost pre-pin), the join Secret and cluster CA of a node class,
 * the KPSSH_* environment of a phase, running one profile phase (timed and reported to the
 * observer), the dial target of a probe, and leave by install marker.
 *
 * Internal to provider/ssh/ (provider.c, hostctl.c); not for cmd/kpssh.
 *
 * Threads: the caller's, with its own client; nothing here keeps state. No logging (rule 8):
 * functions return codes and, for errors the user can fix, a message in *ret_msg (a new string
 * the caller frees; it never holds secret values). */
#ifndef KP_PROVIDER_SSH_HOSTIO_H
#define KP_PROVIDER_SSH_HOSTIO_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"
#include "provider/ssh/env.h"
#include "provider/ssh/profile.h"
#include "provider/ssh/session.h"

typedef struct json_t json_t;
struct kp_client;
struct kp_ctx;
struct kp_entry;
struct kp_events;
struct kp_instance_type;
struct kp_nodeclaim_view;
struct kp_secret;
struct kp_ssh_observer;
struct kp_sshhost_view;
struct kp_sshjoinprofile_view;
struct kp_sshnodeclass_view;
struct kp_store;

/* Ceiling of a decoded Secret value (a private key, a CA bundle, a join secret). */
#define KP_MAX_SECRET_VALUE (256u * 1024u)
#define KP_MAX_JOIN_SECRETS 64

/* Base64 (standard alphabet, padded) to bytes, as a secret. 0, -KP_EPARSE, -KP_ELIMIT,
 * -ENOMEM. Pure. */
int kp_hostio_b64_secret(const char *s, struct kp_secret **ret) KP_WUR;

/* Everything needed to dial a host: its key, its pre-pin. Zero-initialise; release with _done. */
struct kp_hostio_creds {
    struct kp_secret *key;
    struct kp_secret *known_host; /* optional */
    const struct kp_fence *fence; /* the loading client's write fence (borrowed), or NULL */
    /* The context every dial and phase with these creds runs under (borrowed, set by the
     * caller after loading; NULL: none): cancelling it ends them (session.h). */
    const struct kp_ctx *ctx;
};
void kp_hostio_creds_done(struct kp_hostio_creds *cr);

/* Reads a key Secret object (ns/name, as the API server returned it: stringData is already
 * merged into data) into cr, written only on success. data.privateKey is required; an absent
 * data.knownHost means trust on first use, but one that is present and empty or only
 * whitespace (or null, or holds a NUL byte) is refused, since with knownHost set kpssh never
 * trusts on first use. 0, -EINVAL with *ret_msg (naming the Secret and the field) or -ENOMEM.
 * Pure. */
int kp_hostio_creds_from_secret(const json_t *secret, const char *ns, const char *name,
                                struct kp_hostio_creds *cr, char **ret_msg) KP_WUR;

/* GETs the host's key Secret and reads it as above. 0; -EINVAL with *ret_msg for configuration
 * errors (no reference, Secret not found or forbidden, and those of
 * kp_hostio_creds_from_secret); other errors (a transient API failure) carry no message. */
int kp_hostio_load_creds(struct kp_client *c, const struct kp_sshhost_view *h,
                         struct kp_hostio_creds *cr, char **ret_msg) KP_WUR;

/* The join Secret's data: keys borrowed from the tree (kept in obj), values decoded.
 * Zero-initialise; release with _done. */
struct kp_hostio_join_secret {
    json_t *obj;
    struct kp_env_secret_pair pairs[KP_MAX_JOIN_SECRETS];
    struct kp_secret *vals[KP_MAX_JOIN_SECRETS];
    size_t n;
};
void kp_hostio_join_secret_done(struct kp_hostio_join_secret *js);
/* Reads the node class's joinSecretRef (none: 0 and nothing read). -EINVAL with *ret_msg for
 * configuration errors. */
int kp_hostio_load_join_secret(struct kp_client *c, const char *ns,
                               const struct kp_sshnodeclass_view *ncl,
                               struct kp_hostio_join_secret *js, char **ret_msg) KP_WUR;

/* "kpssh://<ns>/<host>": the Static providerID of an SSHHost (a new string; NULL: no memory). */
char *kp_hostio_static_provider_id(const char *ns, const char *host) KP_WUR;

/* An event about SSHHost h on recorder ev (NULL: none). Drops are the recorder's to count. */
void kp_hostio_event(struct kp_events *ev, const struct kp_sshhost_view *h, bool warning,
                     const char *reason, const char *action, const char *note);

#define KP_HOSTIO_CLUSTER_INFO_NS "kube-public"
#define KP_HOSTIO_CLUSTER_INFO "cluster-info"

/* The cluster endpoint and CA a join uses: spec.cluster of the node class, and for whatever it
 * leaves out the first cluster of the kubeconfig in kube-public/cluster-info (the reference's
 * default). *ret_ca and *ret_endpoint are new. -EINVAL with *ret_msg for configuration errors
 * (bad caBundle, cluster-info missing, forbidden or unusable); other errors are transient. */
int kp_hostio_load_cluster(struct kp_client *c, const struct kp_sshnodeclass_view *ncl,
                           struct kp_secret **ret_ca, char **ret_endpoint, char **ret_msg) KP_WUR;

/* What an install or join knows beyond the host (NULL for leave). Borrowed. */
struct kp_hostio_join_ctx {
    const struct kp_nodeclaim_view *nc;
    const struct kp_sshnodeclass_view *ncl;
    const struct kp_instance_type *it; /* labels to add, or NULL */
    const struct kp_secret *ca;
    const char *endpoint;          /* the API server URL the node joins */
    const struct kp_secret *token; /* join only */
    const struct kp_hostio_join_secret *js;
};

/* The KPSSH_* environment of phase on h. Errors of kp_env_build. Pure. */
int kp_hostio_build_env(const struct kp_sshhost_view *h, enum kp_env_phase phase,
                        const struct kp_hostio_join_ctx *jc, struct kp_env **ret,
                        char **ret_msg) KP_WUR;

/* The dial target of h with creds cr (borrowed: valid while both live). */
void kp_hostio_target(const struct kp_sshhost_view *h, const struct kp_hostio_creds *cr,
                      struct kp_ssh_target *ret);

/* Verified execution, the controller's gate: for a host with execMode Verified, checks before
 * anything is dialed that phase of profile pr can go to the host's shim: the script exists, is
 * free of templates ("{{"), carries a signature, and the signature verifies (SSHSIG, namespace
 * kpssh) by one of the host's trustedSigners over the script's exact bytes. 0 when it does or
 * when the host is Raw; -EINVAL with *ret_msg (the reference's wording) when it does not: a
 * configuration error, which releases the host Available and never marks it Unhealthy;
 * -ENOMEM. Pure apart from the allocation. */
int kp_hostio_verified_check(const struct kp_sshhost_view *h,
                             const struct kp_sshjoinprofile_view *pr, enum kp_profile_phase phase,
                             char **ret_msg) KP_WUR;

/* Runs one phase of profile pr on h with env, under the profile's timeout or ctx's deadline
 * (ctx NULL: cr->ctx, which may be NULL too), whichever comes first, and reports its wall time to obs (optional) as
 * install, join or leave. Cancelling ctx closes the connection within a poll slice (-ECANCELED;
 * the watchdog ends the remote script). 0, or the runner's errors with *ret_msg
 * (redacted). ret_fp (optional, KP_SSH_FP_SIZE bytes): the host key's fingerprint when no pin
 * existed yet (TOFU), else left alone. */
int kp_hostio_run_phase(const struct kp_ctx *ctx, const struct kp_sshhost_view *h,
                        const struct kp_hostio_creds *cr, const struct kp_sshjoinprofile_view *pr,
                        enum kp_profile_phase phase, const struct kp_env *env,
                        const struct kp_ssh_observer *obs, char **ret_msg, char *ret_fp) KP_WUR;

/* Runs leave on h with the profile its install marker names (from profiles): loads the key,
 * builds the leave environment, runs and reports the phase. 0, -ENOENT (no marker, or the
 * profile is gone) or the errors above, always with *ret_msg on failure. */
int kp_hostio_leave(const struct kp_ctx *ctx, struct kp_store *profiles, struct kp_client *c,
                    const struct kp_sshhost_view *h, const struct kp_ssh_observer *obs,
                    char **ret_msg) KP_WUR;

/* A leave in two halves, for a caller that runs the SSH half on another thread (jobs.h): the
 * API half (profile, key Secret, environment) on a reconcile worker, then the phase. */
struct kp_hostio_leave {
    struct kp_entry *profile; /* a reference on the SSHJoinProfile entry */
    struct kp_hostio_creds cr;
    struct kp_env *env;
};
/* What kp_hostio_leave does before it dials: 0 with lv filled (release with _done), or
 * -ENOENT (no marker, or the profile is gone) or the errors of the loads, with *ret_msg. */
int kp_hostio_leave_prepare(struct kp_store *profiles, struct kp_client *c,
                            const struct kp_sshhost_view *h, struct kp_hostio_leave *lv,
                            char **ret_msg) KP_WUR;
/* Runs the leave phase prepared in lv on h under ctx (NULL: none; session.h) and reports it to
 * obs. Any thread. Errors of kp_hostio_run_phase. */
int kp_hostio_leave_run(struct kp_hostio_leave *lv, const struct kp_sshhost_view *h,
                        const struct kp_ctx *ctx, const struct kp_ssh_observer *obs,
                        char **ret_msg) KP_WUR;
void kp_hostio_leave_done(struct kp_hostio_leave *lv);

#endif
