/* k8s/incluster.h: the configuration a pod gets from Kubernetes, and a token file that rotates.
 *
 * In a pod the API server is at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT and the
 * service account's token, CA bundle and namespace are files under
 * /var/run/secrets/kubernetes.io/serviceaccount. Bound service-account tokens expire (an hour
 * by default) and the kubelet rewrites the file well before that, so the token is never read
 * once and kept: struct kp_token_file re-reads it when it changed. */
#ifndef KP_K8S_INCLUSTER_H
#define KP_K8S_INCLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "base/time.h"

struct kp_secret;
struct kp_yaml_error;
struct kp_token_file;

#define KP_INCLUSTER_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/* A token file is re-read at least this often even when stat shows no change. */
#define KP_TOKEN_FILE_RECHECK_USEC (60 * KP_USEC_PER_SEC)

struct kp_incluster_config {
    char *server; /* "https://host:port", IPv6 hosts in brackets */
    char *ca_pem; /* ca.crt */
    size_t ca_pem_len;
    char *namespace;  /* the namespace file, or "default" when it is absent */
    char *token_file; /* path of the token file, for kp_token_file_new() */
};

/* Builds the in-cluster configuration from host and port (the two environment values; NULL
 * when unset) and the files under root + KP_INCLUSTER_SA_DIR (root NULL or "" for the real
 * root; tests pass a directory). -ENOENT when not in a cluster (host or port unset, token or CA
 * missing), -KP_EPARSE for a bad port or host, -KP_ELIMIT, -ENOMEM; reterr says which. The
 * token is checked to exist and be readable but is not kept. Any thread. */
int kp_incluster_load(const char *root, const char *host, const char *port,
                      struct kp_incluster_config **ret, struct kp_yaml_error *reterr) KP_WUR;
/* The same with host and port from the environment (getenv: start-up only, not thread-safe
 * against setenv). */
int kp_incluster_load_env(const char *root, struct kp_incluster_config **ret,
                          struct kp_yaml_error *reterr) KP_WUR;
struct kp_incluster_config *kp_incluster_config_free(struct kp_incluster_config *c);

/* A bearer token kept in a file (service-account token, kubeconfig tokenFile). The file is
 * read at creation; later gets stat it and re-read when device, inode, size or mtime changed,
 * when KP_TOKEN_FILE_RECHECK_USEC passed since the last read, or when refresh is asked (after
 * a 401). Leading and trailing whitespace is dropped; an empty token is -KP_EPARSE.
 * Thread-safe: any thread may get (an internal lock guards the cached token). */
int kp_token_file_new(const char *path, struct kp_token_file **ret) KP_WUR;
struct kp_token_file *kp_token_file_free(struct kp_token_file *tf);
/* 0 and a new copy of the current token in *ret_token (the caller frees it), or the error of
 * the re-read; when a re-read fails but a token was read before, the old token is returned
 * (the kubelet may be mid-rotation) unless refresh was asked. */
int kp_token_file_get(struct kp_token_file *tf, bool refresh, struct kp_secret **ret_token) KP_WUR;
/* kp_token_file_get with the signature of kp_transport_token_fn (userdata is the token file). */
int kp_token_file_token_fn(void *userdata, bool refresh, struct kp_secret **ret_token) KP_WUR;

#endif
