/* tests/lib/kp-lab.h: what integration tests share to talk to the test lab (tests/lab).
 *
 * kp_lab_load() reads "$KPSSH_LAB_DIR/env.sh" (written by tests/lab/up.sh) and the admin
 * credentials it names; every failure is a cmocka failure with a message saying what is
 * missing, never a skip. */
#ifndef KP_TESTS_KP_LAB_H
#define KP_TESTS_KP_LAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "k8s/informer.h" /* kp_project_fn */

typedef struct json_t json_t;
struct kp_client;
struct kp_error;
struct kp_informer;
struct kp_resource;
struct kp_secret;

struct kp_lab {
    char *dir;      /* KPSSH_LAB_DIR */
    char *api_url;  /* KPSSH_LAB_API_URL */
    char *etcd_url; /* KPSSH_LAB_ETCD_URL */
    char *kubectl;  /* KPSSH_LAB_KUBECTL */
    char *bin;      /* KPSSH_LAB_BIN */
    char *host_sh;  /* KPSSH_LAB_HOST_SH: tests/lab/host.sh, which drives the lab hosts */
    char *gateway;  /* KPSSH_LAB_GATEWAY: the bridge's address; host i is .(10 + i) beside it */
    char *ca, *cert;
    size_t ca_len, cert_len;
    struct kp_secret *key;
    /* How long one host.sh run of kp_lab_host_sh/_exec may take. kp_lab_load sets 300 s; a test
     * may shorten it after loading. */
    uint64_t host_timeout_usec;
};

/* Loads the lab description; fails the test when the lab is not up. */
void kp_lab_load(struct kp_lab *lab);
void kp_lab_done(struct kp_lab *lab);

/* The value of `export NAME=value` in env.sh (a new string), or NULL. */
char *kp_lab_env(const struct kp_lab *lab, const char *name);

/* The same, but fails the test when env.sh does not set name. */
char *kp_lab_env_need(const struct kp_lab *lab, const char *name);

/* A client with the admin identity (cmocka-fails on error). */
struct kp_client *kp_lab_admin_client(const struct kp_lab *lab);

/* Parses printf-formatted JSON (cmocka-fails on bad JSON). Caller unrefs. */
json_t *kp_lab_json(const char *fmt, ...) KP_PRINTF(1, 2);

/* Fails the test with the server's account when r < 0. */
void kp_lab_check(int r, const struct kp_error *e, const char *what);

/* Creates a namespace "<prefix>-<pid>" and waits for its default ServiceAccount; the name goes
 * to out[size]. */
void kp_lab_namespace(struct kp_client *c, const char *prefix, char *out, size_t size);

/* Group set-up and tear-down for tests that work in a namespace of their own: load the lab and
 * create "<prefix>-<pid>" (name to ns[size]); delete it (in the background) and unload. */
void kp_lab_setup_namespace(struct kp_lab *lab, const char *prefix, char *ns, size_t size);
void kp_lab_teardown_namespace(struct kp_lab *lab, const char *ns);

/* Reads a whole file (cmocka-fails on error); caller kp_free()s it. */
char *kp_lab_read_file(const char *path, size_t *ret_len);

/* The standard, padded base64 of n bytes at p (base/base64.h), as a new string (cmocka-fails on
 * error); caller kp_free()s it. */
char *kp_lab_base64(const void *p, size_t n);

/* --- API objects ------------------------------------------------------------------------- */

/* A new object {apiVersion, kind, metadata: {name, namespace (when ns is not NULL)}} built with
 * kp_json_patch_*, to be filled with kp_lab_set() (cmocka-fails on error). Caller unrefs. */
json_t *kp_lab_obj_new(const char *api_version, const char *kind, const char *ns, const char *name);

/* Sets the string at path in o (a kp_json_patch_new() tree), making the objects on the way
 * (cmocka-fails on error). */
void kp_lab_set(json_t *o, const char *const *path, const char *v);

/* Creates obj (takes it) in ns, replacing what is there under its metadata.name: the old object
 * is deleted and the create retried every 100 ms for 10 s while the name is still taken. After
 * 2 s the old object's finalizers are removed, since a finalizer whose controller is gone (an
 * earlier test on the same lab) would hold it forever. cmocka-fails on any other error. */
void kp_lab_create_or_replace(struct kp_client *c, const struct kp_resource *res, const char *ns,
                              json_t *obj);

/* --- informers ----------------------------------------------------------------------------- */

/* A stopped informer over res in ns (NULL: all namespaces, or cluster-scoped) projecting with
 * project, for a controller to add its handlers to before it is started (cmocka-fails on error).
 * Caller frees it with kp_informer_free(). */
struct kp_informer *kp_lab_informer_new(struct kp_client *c, const struct kp_resource *res,
                                        const char *ns, kp_project_fn project);

/* The same, started and synced: cmocka-fails unless it syncs within 60 s. */
struct kp_informer *kp_lab_informer(struct kp_client *c, const struct kp_resource *res,
                                    const char *ns, kp_project_fn project);

/* Waits at most timeout_usec, polling every 25 ms, for inf's store to hold key ("ns/name" or
 * "name"), at resourceVersion rv when rv is not NULL. Returns whether it did. */
bool kp_lab_cached(struct kp_informer *inf, const char *key, const char *rv, uint64_t timeout_usec);

/* Waits for inf's store to hold key; fails the test when it does not within 15 s. */
void kp_lab_wait_cached(struct kp_informer *inf, const char *key);

/* SSHHost ns/name read from the API (not a cache) and projected; a new entry. cmocka-fails when
 * it cannot be read. */
struct kp_entry *kp_lab_sshhost_get(struct kp_client *c, const char *ns, const char *name);

/* --- events -------------------------------------------------------------------------------- */

/* How many events.k8s.io Events in ns are about the object name with this reason (an Event whose
 * series counts repeats is one). cmocka-fails when the list fails. */
unsigned kp_lab_events_count(struct kp_client *c, const char *ns, const char *name,
                             const char *reason);

/* --- programs and lab hosts ---------------------------------------------------------------- */

enum kp_lab_run_flags {
    KP_LAB_RUN_QUIET = 1 << 0, /* a failure is only the returned status: nothing printed */
    KP_LAB_RUN_MUST = 1 << 1,  /* fail the test unless the program exits 0 */
};

/* Creates namespace ns unless it exists. cmocka-fails on other errors. */
void kp_lab_ensure_namespace(struct kp_client *c, const char *ns);

/* Creates (or replaces) Secret ns/name holding the lab's controller SSH key (KPSSH_LAB_SSH_KEY)
 * as privateKey: what an SSHHost's sshKeySecretRef names. */
void kp_lab_key_secret(const struct kp_lab *lab, struct kp_client *c, const char *ns,
                       const char *name);

/* Applies the repository's CRDs (deploy/crds under $KP_REPO, server-side, as the chart installs
 * them) through tests/lab/crds.sh, which first lets any CRD delete in progress finish, and waits
 * until every CRD is established. cmocka-fails on error. */
void kp_lab_apply_crds(const struct kp_lab *lab);

/* The admin bearer token of the lab (KPSSH_LAB_ADMIN_TOKEN_FILE's first line), a new string the
 * caller wipes and frees. cmocka-fails when it cannot be read. */
char *kp_lab_admin_token(const struct kp_lab *lab);

/* Runs argv (argv[0] a path, or a name looked up in $PATH; kp_spawn's clean child) for at most
 * timeout_usec. Returns its exit status, or -1 when it did not exit on its own (a signal, the
 * timeout). With ret_out, *ret_out gets its stdout (a new string; caller kp_free()s it). A
 * non-zero status is printed as one "# " line with the tail of stderr, unless KP_LAB_RUN_QUIET;
 * with KP_LAB_RUN_MUST it fails the test instead. cmocka-fails when argv cannot be started. */
int kp_lab_run(const char *const *argv, uint64_t timeout_usec, enum kp_lab_run_flags flags,
               char **ret_out);

/* Runs `host.sh VERB I` for lab host i (tests/lab/README.md lists the verbs) under
 * lab->host_timeout_usec; its exit status, a failure also printed. */
int kp_lab_host_sh(const struct kp_lab *lab, const char *verb, unsigned i);

/* Runs cmd with `sh -c` as root inside lab host i under lab->host_timeout_usec; its exit status,
 * quietly: tests poll with it and a non-zero status is often the answer they want. */
int kp_lab_host_exec(const struct kp_lab *lab, unsigned i, const char *cmd);

/* Lab host i's address on the lab bridge (a new string; caller kp_free()s it). */
char *kp_lab_host_ip(const struct kp_lab *lab, unsigned i);

#endif
