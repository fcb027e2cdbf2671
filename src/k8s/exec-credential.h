/* k8s/exec-credential.h: exec credential plugins (client.authentication.k8s.io v1, v1beta1).
 *
 * A kubeconfig user may name a program that prints an ExecCredential JSON object with a bearer
 * token or a client certificate and key, optionally with an expiry (EKS users run
 * "aws eks get-token" this way). kp_exec_credential runs the plugin through kp_spawn_run()
 * (STYLE.md rule 10) with a deadline and bounded output, parses what it printed, and caches the
 * credential until shortly before it expires or until the server refuses it.
 *
 * Errors: -ENOENT (plugin not found), -ETIMEDOUT, -KP_ELIMIT (too much output), -EIO (the
 * plugin failed), -KP_EPARSE (bad output), -EPERM (the plugin needs a terminal we do not
 * have), -ENOMEM. The struct kp_yaml_error text then says what happened and carries the tail
 * of the plugin's stderr (with every registered secret redacted) and the installHint. */
#ifndef KP_K8S_EXEC_CREDENTIAL_H
#define KP_K8S_EXEC_CREDENTIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "base/time.h"

struct kp_secret;
struct kp_yaml_error;
struct kp_kubeconfig_rest;
struct kp_exec_credential;

#define KP_MAX_EXEC_OUTPUT (1u << 20)
#define KP_EXEC_STDERR_TAIL 4096
#define KP_EXEC_TIMEOUT_USEC (60 * KP_USEC_PER_SEC)
/* A cached credential is renewed this long before its expirationTimestamp. */
#define KP_EXEC_EXPIRY_SKEW_USEC (30 * KP_USEC_PER_SEC)

/* What a plugin returned. The caller owns it and frees it with kp_exec_status_free(). */
struct kp_exec_status {
    struct kp_secret *token; /* status.token, or NULL */
    char *cert_pem;          /* status.clientCertificateData, or NULL */
    size_t cert_pem_len;
    struct kp_secret *key_pem; /* status.clientKeyData; set exactly when cert_pem is */
    int64_t expires_usec;      /* status.expirationTimestamp (Unix usec), 0 when absent */
};

/* Parses a plugin's stdout: an ExecCredential of apiVersion api_version (the one the
 * kubeconfig asked for) with a token and/or a certificate and key. Pure over (ptr, len),
 * fuzzed. 0 and a new *ret, or -KP_EPARSE, -KP_ELIMIT, -ENOMEM with reterr set. */
int kp_exec_credential_parse(const char *p, size_t len, const char *api_version,
                             struct kp_exec_status **ret, struct kp_yaml_error *reterr) KP_WUR;
struct kp_exec_status *kp_exec_status_free(struct kp_exec_status *s);

struct kp_exec_credential_opts {
    uint64_t timeout_usec; /* 0: KP_EXEC_TIMEOUT_USEC */
    const char *path;      /* search path for a bare command; NULL: $PATH */
    bool interactive;      /* a terminal is available (CLI); the controller passes false */
};

/* A credential source for rest->exec (which must be set), with rest's cluster as the
 * KUBERNETES_EXEC_INFO cluster when provideClusterInfo is set. Copies what it needs from rest.
 * opts may be NULL. 0, -EINVAL (no exec in rest), -ENOMEM. */
int kp_exec_credential_new(const struct kp_kubeconfig_rest *rest,
                           const struct kp_exec_credential_opts *opts,
                           struct kp_exec_credential **ret) KP_WUR;
struct kp_exec_credential *kp_exec_credential_free(struct kp_exec_credential *c);

/* A copy of the current credential in *ret (the caller frees it), running the plugin when
 * nothing is cached, the cached one is within KP_EXEC_EXPIRY_SKEW_USEC of expiry, or refresh
 * is set (after a 401). Thread-safe: concurrent callers wait for one plugin run. */
int kp_exec_credential_get(struct kp_exec_credential *c, bool refresh, struct kp_exec_status **ret,
                           struct kp_yaml_error *reterr) KP_WUR;
/* The token of kp_exec_credential_get as a kp_transport_token_fn (userdata is the source).
 * A certificate-only credential gives *ret_token = NULL. */
int kp_exec_credential_token_fn(void *userdata, bool refresh, struct kp_secret **ret_token) KP_WUR;
/* How many times the plugin ran (tests, metrics). */
uint64_t kp_exec_credential_runs(struct kp_exec_credential *c);

#endif
