/* provider/ssh/env.h: the KPSSH_* environment a phase script receives.
 *
 * Profiles are not templates (docs/join-profiles.md): every per-node value reaches a script as an
 * exported KPSSH_* variable. This module turns the typed facts the provider holds (node class,
 * NodeClaim, SSHHost, cluster info, bootstrap token, join Secret) into that environment, plus the
 * list of secret values the runner must scrub from anything it keeps. docs/join-profiles.md has the
 * table users read; the contract is the reference's, with these names:
 *
 *   KPSSH_CLUSTER_ENDPOINT  install, join    https:// URL of the API server
 *   KPSSH_CLUSTER_CA_B64    install, join    base64 (standard, padded) of the CA bundle (PEM)
 *   KPSSH_BOOTSTRAP_TOKEN   join             <id>.<secret>, a secret value
 *   KPSSH_NODE_NAME         install, join    NodeClaim name
 *   KPSSH_PROVIDER_ID       install, join    kpssh://<pool-ns>/<host> (Static); "" (Adopt)
 *   KPSSH_HOST_ADDRESS      every phase      SSHHost spec.address
 *   KPSSH_NODE_ADDRESS      every phase      spec.nodeAddress, else spec.address
 *   KPSSH_NODE_LABELS       install, join    k=v,... of the labels kubelet may set on itself
 *   KPSSH_TAINTS            install, join    karpenter.sh/unregistered:NoExecute,k=v:Effect,...
 *   KPSSH_VAR_<key>         install, join    node-class vars, key as written
 *   KPSSH_SECRET_<KEY>      install, join    join Secret data, key upper-cased, '-' '.' -> '_'
 *
 * The nine fixed names are always present (empty when a phase has no value for them), so a
 * script running under `set -u` can test them; KPSSH_VAR_* and KPSSH_SECRET_* exist only in
 * install and join. Leave and uninstall run without a node class in hand (release path, zombie
 * guard), so they carry values only in the two address variables.
 *
 * Everything here is pure: no I/O, no globals, any thread. */
#ifndef KP_PROVIDER_SSH_ENV_H
#define KP_PROVIDER_SSH_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"

struct kp_secret;

/* The phases the environment differs for. */
enum kp_env_phase {
    KP_ENV_INSTALL = 0,
    KP_ENV_JOIN,
    KP_ENV_LEAVE,
    KP_ENV_UNINSTALL, /* manual/repair only; same environment as leave */
};

enum kp_env_provider_id_source {
    KP_ENV_PROVIDER_ID_STATIC = 0, /* kubelet gets --provider-id kpssh://<pool-ns>/<host> */
    KP_ENV_PROVIDER_ID_ADOPT,      /* the profile's own identity (e.g. eks-hybrid:///...) */
};

/* A label, a node-class var. */
struct kp_env_pair {
    const char *key;
    const char *value;
};

/* A NodeClaim taint; value NULL or "" gives `key:Effect`. effect is NoSchedule,
 * PreferNoSchedule or NoExecute. */
struct kp_env_taint {
    const char *key;
    const char *value;
    const char *effect;
};

/* One data entry of the join Secret. */
struct kp_env_secret_pair {
    const char *key;
    const struct kp_secret *value;
};

/* What the caller knows. Strings are borrowed for the duration of the call only. Fields a phase
 * does not use are ignored (leave reads only the addresses); NULL and "" mean "not set". */
struct kp_env_input {
    enum kp_env_phase phase;
    const char *cluster_endpoint; /* must start with https:// */
    const void *cluster_ca;       /* CA bundle bytes (PEM), encoded here */
    size_t cluster_ca_len;
    const struct kp_secret *bootstrap_token; /* join only: <6 [a-z0-9]>.<16 [a-z0-9]> */
    const char *node_name;                   /* NodeClaim name */
    enum kp_env_provider_id_source provider_id_source;
    const char *pool_namespace;       /* SSHHost namespace, for the Static provider id */
    const char *host_name;            /* SSHHost metadata.name */
    const char *host_address;         /* SSHHost spec.address (required, every phase) */
    const char *node_address;         /* spec.nodeAddress; NULL or "" = host_address */
    const struct kp_env_pair *labels; /* NodeClaim labels; filtered here */
    size_t nlabels;
    const struct kp_env_taint *taints; /* NodeClaim spec.taints, in order */
    size_t ntaints;
    const struct kp_env_pair *vars; /* SSHNodeClass spec.vars */
    size_t nvars;
    const struct kp_env_secret_pair *secrets; /* joinSecretRef data */
    size_t nsecrets;
};

/* The built environment: variables sorted by name (bytewise), each either a plain value or a
 * secret; and the values to redact, longest first. Immutable once built; owned by one thread
 * at a time (it holds no references, so handing it to the runner's thread is a plain move). */
struct kp_env;

#define KP_ENV_TAINT_UNREGISTERED "karpenter.sh/unregistered:NoExecute"

/* Builds the environment for in->phase. 0, -ENOMEM, or -EINVAL when the input breaks the
 * contract (missing required value, a var key that is not an identifier, two Secret keys that
 * map to one name, a Secret value holding a NUL byte, a malformed token, taint or label, ...).
 * On -EINVAL, *ret_msg (optional) receives a message naming the offending key(s) that a user can
 * act on (never a secret value), owned by the caller (kp_free); it is left untouched otherwise.
 * On success *ret_env holds the new environment. */
int kp_env_build(const struct kp_env_input *in, struct kp_env **ret_env, char **ret_msg)
    KP_NONNULL(1, 2) KP_WUR;

/* Wipes secret values and frees; accepts and returns NULL. */
struct kp_env *kp_env_free(struct kp_env *env);

/* Number of variables; the index order is the sorted order. */
size_t kp_env_size(const struct kp_env *env) KP_NONNULL(1);
/* Name of variable i (< size), valid while env lives. */
const char *kp_env_name(const struct kp_env *env, size_t i) KP_NONNULL(1);
/* True when variable i holds a secret value. */
bool kp_env_is_secret(const struct kp_env *env, size_t i) KP_NONNULL(1);
/* Plain value of variable i, or NULL when it is a secret (use kp_env_secret then). */
const char *kp_env_value(const struct kp_env *env, size_t i) KP_NONNULL(1);
/* Secret value of variable i, or NULL when it is plain. Read it with kp_secret_reveal(). */
const struct kp_secret *kp_env_secret(const struct kp_env *env, size_t i) KP_NONNULL(1);
/* Index of the variable called name, or -ENOENT. */
int kp_env_find(const struct kp_env *env, const char *name) KP_NONNULL(1, 2) KP_WUR;

/* Values a runner must redact from captured output, errors and logs: the bootstrap token, its
 * secret half, and every join Secret value of KP_LOG_REDACT_MIN bytes or more; distinct, longest
 * first (so a value containing another is replaced whole). Valid while env lives. */
size_t kp_env_redact_size(const struct kp_env *env) KP_NONNULL(1);
const struct kp_secret *kp_env_redact_at(const struct kp_env *env, size_t i) KP_NONNULL(1);
/* The same list as an array of kp_env_redact_size() entries (NULL when empty), in the shape
 * struct kp_ssh_phase.secrets takes. Valid while env lives. */
const struct kp_secret *const *kp_env_redact_array(const struct kp_env *env) KP_NONNULL(1);

/* The env name a join Secret key maps to (KPSSH_SECRET_ + key upper-cased, '-' and '.' -> '_'),
 * newly allocated in *ret_name. -EINVAL when key is empty or holds a byte other than
 * [A-Za-z0-9._-] (the Kubernetes Secret key alphabet). Pure; for kpssh lint and tests. */
int kp_env_secret_name(const char *key, char **ret_name) KP_NONNULL(1, 2) KP_WUR;

/* True when kubelet may set the label key on its own Node under the NodeRestriction admission
 * plugin: keys outside the kubernetes.io and k8s.io namespaces (and their subdomains) pass,
 * except [*.]node-restriction.kubernetes.io; inside them only the kubelet's own well-known labels
 * and the [*.]kubelet.kubernetes.io and [*.]node.kubernetes.io namespaces pass. */
bool kp_env_label_kubelet_settable(const char *key) KP_NONNULL(1);

#endif
