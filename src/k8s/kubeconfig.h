/* k8s/kubeconfig.h: kubeconfig files, merged the way kubectl merges them, resolved into what a
 * REST client needs.
 *
 * Two steps. Loading parses one or more files into a struct kp_kubeconfig (kp_kubeconfig_add()
 * is pure over (ptr, len) and fuzzed); the merge keeps, for every cluster, user and context
 * name, the entry from the first file that defines it, and current-context from the first file
 * that sets it. Resolving picks a context (current-context or an explicit --context), follows
 * it to its cluster and user, checks them and reads the files they name (CA, client
 * certificate and key, relative paths taken from the directory of the kubeconfig that named
 * them), producing a struct kp_kubeconfig_rest of plain bytes.
 *
 * Errors: -KP_EPARSE for content that is wrong, -ENOENT for names or files that are missing,
 * -KP_ELIMIT past a ceiling, -ENOMEM. The struct kp_yaml_error filled on failure reads
 * "file:line:col: what is wrong", e.g.
 *   kubeconfig:14:7: context "x" names user "y", which is not defined
 *
 * Threads: a struct kp_kubeconfig is built by one thread and read-only afterwards; resolving
 * may then run on any thread. Nothing here logs. */
#ifndef KP_K8S_KUBECONFIG_H
#define KP_K8S_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"
#include "base/str.h"

struct kp_kubeconfig;
struct kp_secret;
struct kp_yaml_error;

/* Ceilings: one kubeconfig file, one PEM file, one token file. */
#define KP_MAX_KUBECONFIG (4u << 20)
#define KP_MAX_PEM_FILE (1u << 20)
#define KP_MAX_TOKEN_FILE (64u << 10)

enum kp_exec_interactive {
    KP_EXEC_INTERACTIVE_NEVER = 0,
    KP_EXEC_INTERACTIVE_IF_AVAILABLE,
    KP_EXEC_INTERACTIVE_ALWAYS,
};

/* users[].user.exec: an exec credential plugin (client.authentication.k8s.io). */
struct kp_exec_config {
    char *api_version; /* client.authentication.k8s.io/v1 or /v1beta1 */
    char *command;     /* as written; a relative path with '/' is made relative to the
                          * kubeconfig's directory, a bare name is looked up in PATH later */
    struct kp_strv args;
    struct kp_strv env; /* "NAME=value" */
    char *install_hint; /* NULL when absent */
    bool provide_cluster_info;
    enum kp_exec_interactive interactive;
};

/* Everything a REST client needs, resolved. Plain data: the caller owns every field and frees
 * the whole with kp_kubeconfig_rest_free(). */
struct kp_kubeconfig_rest {
    char *context, *cluster, *user; /* names; user is NULL for a context without one */
    char *server;                   /* clusters[].cluster.server */
    char *tls_server_name;          /* NULL when absent */
    char *proxy_url;                /* reported only: kpssh does not use proxies (XXX) */
    char *namespace;                /* the context's namespace, "default" when unset */
    char *ca_pem;                   /* CA bundle bytes; NULL: use the system trust store */
    size_t ca_pem_len;
    /* Reported so the transport can refuse it: kpssh always verifies TLS. */
    bool insecure_skip_tls_verify;
    char *cert_pem; /* client certificate; NULL when none */
    size_t cert_pem_len;
    struct kp_secret *key_pem; /* client key; set exactly when cert_pem is */
    struct kp_secret *token;   /* users[].user.token, or NULL */
    /* users[].user.tokenFile as an absolute or cwd-relative path, or NULL. When both token and
     * token_file are set, the file wins (it is re-read as it rotates), as in client-go. */
    char *token_file;
    struct kp_exec_config *exec; /* NULL unless users[].user.exec is set */
};

enum kp_kubeconfig_flags {
    /* Refuse to read any file a kubeconfig names (certificate-authority, client-certificate,
     * client-key): for fuzzing and for callers that want bytes only. */
    KP_KUBECONFIG_NO_FILES = 1 << 0,
};

/* An empty configuration. 0 or -ENOMEM. */
int kp_kubeconfig_new(struct kp_kubeconfig **ret) KP_WUR;
/* Accepts and returns NULL. */
struct kp_kubeconfig *kp_kubeconfig_free(struct kp_kubeconfig *kc);

/* Parses one kubeconfig document of len bytes (at most KP_MAX_KUBECONFIG) and merges it into
 * kc behind the files added before it. filename is for messages and is the base of relative
 * paths in the document. On failure kc is unchanged. Pure: no I/O. */
int kp_kubeconfig_add(struct kp_kubeconfig *kc, const char *p, size_t len, const char *filename,
                      struct kp_yaml_error *reterr) KP_WUR;
/* Reads path and adds it. -ENOENT when the file does not exist (callers merging KUBECONFIG
 * skip those), other -errno when it cannot be read, or kp_kubeconfig_add's errors. */
int kp_kubeconfig_add_file(struct kp_kubeconfig *kc, const char *path,
                           struct kp_yaml_error *reterr) KP_WUR;

/* kubectl's loading rules: an explicit path (--kubeconfig) is the only file read and must
 * exist; otherwise a non-empty kubeconfig_env ($KUBECONFIG) is a ':'-separated list merged in
 * order, empty entries, repeated entries and missing files skipped; otherwise
 * home/.kube/config. -ENOENT when no file at all could be read. */
int kp_kubeconfig_load(const char *explicit_path, const char *kubeconfig_env, const char *home,
                       struct kp_kubeconfig **ret, struct kp_yaml_error *reterr) KP_WUR;

/* The merged current-context, or NULL. */
const char *kp_kubeconfig_current_context(const struct kp_kubeconfig *kc);

/* Resolves context (NULL: current-context) into a new *ret. Errors as described above. */
int kp_kubeconfig_resolve(const struct kp_kubeconfig *kc, const char *context,
                          enum kp_kubeconfig_flags flags, struct kp_kubeconfig_rest **ret,
                          struct kp_yaml_error *reterr) KP_WUR;
/* Resolves one cluster alone (no context, no user): server, TLS server name and CA of the
 * cluster named cluster, or with NULL of the first cluster by name, which is how a
 * kube-public/cluster-info kubeconfig (clusters only) is read. Fills the cluster fields of a
 * new *ret and namespace "default". Errors as kp_kubeconfig_resolve(). */
int kp_kubeconfig_resolve_cluster(const struct kp_kubeconfig *kc, const char *cluster,
                                  enum kp_kubeconfig_flags flags, struct kp_kubeconfig_rest **ret,
                                  struct kp_yaml_error *reterr) KP_WUR;
/* Frees every field (secrets are wiped); accepts and returns NULL. */
struct kp_kubeconfig_rest *kp_kubeconfig_rest_free(struct kp_kubeconfig_rest *rest);

/* Copies and frees of an exec configuration (the exec credential source keeps its own copy). */
int kp_exec_config_dup(const struct kp_exec_config *src, struct kp_exec_config **ret) KP_WUR;
struct kp_exec_config *kp_exec_config_free(struct kp_exec_config *c);

/* Reads a whole regular file of at most max bytes (shared with incluster.c and
 * exec-credential.c). 0 and a new NUL-terminated buffer in *ret (length in *ret_len), or
 * -errno, -KP_ELIMIT. */
int kp_read_file_bounded(const char *path, size_t max, char **ret, size_t *ret_len) KP_WUR;

#endif
