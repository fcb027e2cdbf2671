/* provider/ssh/token.h: bootstrap tokens for joins.
 *
 * One token per join: a Secret bootstrap-token-<id> in kube-system, type
 * bootstrap.kubernetes.io/token, usable for authentication (and signing, so the lab's and
 * kubeadm's cluster-info JWS works), in one extra group (auth-extra-groups: the controller's
 * --bootstrap-group, default KP_TOKEN_GROUP, which the bootstrap RBAC binds), expiring after one
 * hour. The provider records the id on the SSHHost before the join runs and deletes the Secret
 * once the Node exists (or the join failed), so tokens are collected, never left to expire.
 *
 * The token value `<id>.<secret>` lives in a struct kp_secret and never reaches a log. The
 * Secret object sent to the API server necessarily carries it; that tree is freed at once.
 * Threads: the caller's, with its own client. No logging. */
#ifndef KP_PROVIDER_SSH_TOKEN_H
#define KP_PROVIDER_SSH_TOKEN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"

typedef struct json_t json_t;
struct kp_client;
struct kp_error;
struct kp_secret;

#define KP_TOKEN_NAMESPACE "kube-system"
#define KP_TOKEN_GROUP "system:bootstrappers:kpssh"
#define KP_TOKEN_TTL_USEC (3600ULL * 1000000ULL)
#define KP_TOKEN_ID_LEN 6
#define KP_TOKEN_SECRET_LEN 16
#define KP_TOKEN_ID_SIZE (KP_TOKEN_ID_LEN + 1)

/* True when id is 6 characters of [a-z0-9]. */
bool kp_token_id_valid(const char *id);

/* True when group is one the API server accepts in a bootstrap token's auth-extra-groups:
 * "system:bootstrappers:" followed by at most 256 of [a-z0-9:-], the last of [a-z0-9] (the
 * bootstrap token authenticator refuses any other token at authentication time, so every join
 * with it would fail). Pure. */
bool kp_token_group_valid(const char *group);

/* A fresh random token: ret_id (NUL-terminated) and *ret_token = "<id>.<secret>". 0, -ENOMEM or
 * -errno from getrandom. */
int kp_token_generate(char ret_id[KP_TOKEN_ID_SIZE], struct kp_secret **ret_token) KP_WUR;

/* The Secret object for token, in group (kp_token_group_valid), expiring at now_usec + TTL,
 * described as for nodeclaim. Pure. *ret: a new reference (it holds the secret: unref it
 * promptly). 0, -EINVAL (bad token or group), -ENOMEM. */
int kp_token_secret_object(const struct kp_secret *token, const char *group, const char *nodeclaim,
                           uint64_t now_usec, json_t **ret) KP_WUR;

/* Creates the Secret of a token made by kp_token_generate(). The provider records the token id
 * on the host first and creates the Secret second, so a crash between the two leaves an id
 * without a Secret (harmless) rather than a Secret nobody knows about. 0, -EEXIST (the id is
 * taken: generate another), or the client's errors. */
int kp_token_create(struct kp_client *c, const struct kp_secret *token, const char *group,
                    const char *nodeclaim, struct kp_error *reterr) KP_WUR;

/* Generates and creates a token Secret (a new id on the rare id collision). 0 or the client's
 * errors. Outputs as kp_token_generate. */
int kp_token_mint(struct kp_client *c, const char *group, const char *nodeclaim,
                  char ret_id[KP_TOKEN_ID_SIZE], struct kp_secret **ret_token,
                  struct kp_error *reterr) KP_WUR;

/* Deletes the token Secret of id; an absent one is success. 0, -EINVAL (bad id), or the
 * client's errors. */
int kp_token_delete(struct kp_client *c, const char *id, struct kp_error *reterr) KP_WUR;

#endif
