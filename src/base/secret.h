/* base/secret.h: a secret value (bootstrap token, join-secret value, private key).
 *
 * struct kp_secret has no format specifier and no accessor that returns a plain char * except
 * kp_secret_reveal(), which is the one place to grep for when auditing where a secret goes.
 * kp_secret_free() wipes before it frees. Creating a secret of KP_LOG_REDACT_MIN or more bytes
 * registers it with the log redactor; freeing unregisters it. */
#ifndef KP_BASE_SECRET_H
#define KP_BASE_SECRET_H

#include <stddef.h>

#include "base/macro.h"

struct kp_secret;

/* Copies n bytes of p into a new secret (NUL-terminated internally). 0 or -ENOMEM. */
int kp_secret_new(const void *p, size_t n, struct kp_secret **ret) KP_WUR;
/* Wipes and frees; accepts and returns NULL. */
struct kp_secret *kp_secret_free(struct kp_secret *s);
/* The bytes and their length; valid while s lives. */
const char *kp_secret_reveal(const struct kp_secret *s);
size_t kp_secret_len(const struct kp_secret *s);

#endif
