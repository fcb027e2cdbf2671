/* k8s/client.h: REST verbs on Kubernetes resources.
 *
 * A struct kp_client wraps one transport (k8s/transport.h), so it belongs to one thread at a
 * time; kp_client_clone() gives another thread its own client sharing the configuration and the
 * QPS/burst limiter. Objects go in and out as jansson trees through json/ (json_t is opaque
 * here), raw bytes through kp_client_request(). Every verb returns 0 or a negative error mapped
 * from the server's Status (k8s/status.h: -ENOENT, -EEXIST, -KP_ECONFLICT, -KP_EEXPIRED,
 * -EAGAIN, -KP_EFORBIDDEN, -KP_EUNAUTHORIZED, -KP_EINVALID, ...) or from the transport
 * (-ETIMEDOUT, -ECONNREFUSED, -KP_EAUTH, -KP_ELIMIT, ...), and takes an optional
 * struct kp_error *reterr that receives the server's account of a failure (or the client's text
 * for failures that never got an answer). reterr is written on failure only (and emptied first);
 * ret_* outputs are written on success only. Verbs do not log (STYLE.md rule 8). */
#ifndef KP_K8S_CLIENT_H
#define KP_K8S_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "k8s/status.h"
#include "k8s/transport.h"

typedef struct json_t json_t;
struct kp_buf;
struct kp_client;
struct kp_fence;
struct kp_kubeconfig_rest;

/* A resource type: enough to build its URLs. group "" is the core group (/api/v1). */
struct kp_resource {
    const char *group;    /* "", "apps", "karpenter.sh", ... */
    const char *version;  /* "v1", "v1beta1" */
    const char *resource; /* plural, lower case: "pods" */
    bool namespaced;
    const char *kind; /* "Pod" */
};

/* Declares a resource, e.g. a CRD: KP_RESOURCE("test.kpssh.dev", "v1", "widgets", true,
 * "Widget"). */
#define KP_RESOURCE(g, v, r, ns, k)                                                                \
    ((const struct kp_resource){                                                                   \
        .group = (g), .version = (v), .resource = (r), .namespaced = (ns), .kind = (k)})

extern const struct kp_resource KP_RES_POD, KP_RES_NODE, KP_RES_SECRET, KP_RES_CONFIGMAP,
    KP_RES_NAMESPACE, KP_RES_SERVICEACCOUNT, KP_RES_LEASE, KP_RES_EVENT, KP_RES_PDB,
    KP_RES_DAEMONSET, KP_RES_CSR, KP_RES_ROLE, KP_RES_ROLEBINDING, KP_RES_CRD, KP_RES_PVC,
    KP_RES_VOLUMEATTACHMENT;
/* karpenter.sh/v1 and our own API group. */
extern const struct kp_resource KP_RES_NODEPOOL, KP_RES_NODECLAIM, KP_RES_SSHHOST,
    KP_RES_SSHNODECLASS, KP_RES_SSHJOINPROFILE;

/* JSON nesting accepted in API responses (CRD schemas nest deeply; hostile input cannot). */
#define KP_CLIENT_MAX_DEPTH 256
/* Default page size of kp_client_list() and how often an expired continue token may restart
 * one list before -KP_EEXPIRED is returned. */
#define KP_CLIENT_LIST_LIMIT 500
#define KP_CLIENT_LIST_RESTARTS 3

/* --- URL building (pure; exposed for tests and for k8s/watch.c) ---------------------------- */

/* Appends the path of res to out: /api/v1 or /apis/<group>/<version>, then
 * /namespaces/<ns> when res is namespaced and ns is non-NULL, /<resource>, /<name> when name is
 * non-NULL and /<subresource> when that is non-NULL. Segments are percent-escaped. 0, -EINVAL
 * (empty segment, name "." or "..", namespace given for a cluster-scoped resource, subresource
 * without a name), -ENOMEM or -KP_ELIMIT. */
int kp_client_path(const struct kp_resource *res, const char *ns, const char *name,
                   const char *subresource, struct kp_buf *out) KP_WUR;

/* Appends "?key=value" (or "&key=value" when out already holds a '?') with both escaped.
 * value NULL appends nothing. 0, -ENOMEM or -KP_ELIMIT. */
int kp_query_add(struct kp_buf *out, const char *key, const char *value) KP_WUR;

/* Appends s percent-escaped: every byte except A-Z a-z 0-9 - . _ ~ becomes %XX. */
int kp_url_escape(struct kp_buf *out, const char *s) KP_WUR;

/* --- lifecycle ------------------------------------------------------------------------------ */

/* Fills *ret from a resolved kubeconfig (k8s/kubeconfig.h): server, CA, client certificate and
 * key, tls-server-name and insecure-skip-tls-verify (which kp_transport_new() then refuses with
 * -EPERM). The pointers are borrowed from rest, which must outlive the kp_transport_new() call
 * only (the transport copies what it keeps). The token source stays the caller's choice
 * (kp_token_file_token_fn, kp_exec_credential_token_fn or a static token), because its owner
 * must outlive every client. Other fields are zero (defaults). */
void kp_transport_opts_from_kubeconfig(const struct kp_kubeconfig_rest *rest,
                                       struct kp_transport_opts *ret);

/* A client for the calling thread. Errors of kp_transport_new(). */
int kp_client_new(const struct kp_transport_opts *opts, struct kp_client **ret) KP_WUR;
/* A client for another thread sharing c's configuration and rate limiter. 0 or -ENOMEM. */
int kp_client_clone(struct kp_client *c, struct kp_client **ret) KP_WUR;
struct kp_client *kp_client_free(struct kp_client *c);
/* Makes every later write of c (any method but GET and HEAD), and of clones made after this
 * call, check fence first and fail with -KP_ENOTLEADER, sending nothing, once it is closed
 * (k8s/fence.h). fence is borrowed and must outlive c and its clones; NULL removes it. Set it
 * on the process's first client before anything clones it. */
void kp_client_set_fence(struct kp_client *c, const struct kp_fence *fence) KP_NONNULL(1);
/* The fence of c, or NULL; for code that writes elsewhere on c's behalf (SSH phases). */
const struct kp_fence *kp_client_fence(const struct kp_client *c) KP_NONNULL(1);
/* The client's transport, for k8s/watch.c (borrowed; same thread rules as c). */
struct kp_transport *kp_client_transport(struct kp_client *c);

/* --- verbs ---------------------------------------------------------------------------------- */

/* GET one object. *ret_obj: a new reference. */
int kp_client_get(struct kp_client *c, const struct kp_resource *res, const char *ns,
                  const char *name, json_t **ret_obj, struct kp_error *reterr) KP_WUR;

/* POST obj to the collection (or, with subresource, to name/subresource: eviction,
 * serviceaccounts/<name>/token). ret_obj (optional): the server's answer. */
int kp_client_create(struct kp_client *c, const struct kp_resource *res, const char *ns,
                     const json_t *obj, json_t **ret_obj, struct kp_error *reterr) KP_WUR;
int kp_client_create_sub(struct kp_client *c, const struct kp_resource *res, const char *ns,
                         const char *name, const char *subresource, const json_t *obj,
                         json_t **ret_obj, struct kp_error *reterr) KP_WUR;

/* PUT obj over name (its metadata.resourceVersion makes it a compare-and-swap: -KP_ECONFLICT
 * when the object changed). kp_client_update_status() writes the status subresource. */
int kp_client_update(struct kp_client *c, const struct kp_resource *res, const char *ns,
                     const char *name, const json_t *obj, json_t **ret_obj,
                     struct kp_error *reterr) KP_WUR;
int kp_client_update_status(struct kp_client *c, const struct kp_resource *res, const char *ns,
                            const char *name, const json_t *obj, json_t **ret_obj,
                            struct kp_error *reterr) KP_WUR;

enum kp_patch_type {
    KP_PATCH_MERGE, /* application/merge-patch+json (RFC 7386) */
    KP_PATCH_JSON,  /* application/json-patch+json (RFC 6902): an array of operations */
};

/* PATCH name (or name/subresource when subresource is non-NULL, e.g. "status"). A merge patch
 * carrying metadata.resourceVersion is a compare-and-swap (STYLE.md section 3). */
int kp_client_patch(struct kp_client *c, const struct kp_resource *res, const char *ns,
                    const char *name, const char *subresource, enum kp_patch_type type,
                    const json_t *patch, json_t **ret_obj, struct kp_error *reterr) KP_WUR;
/* The same with the patch as bytes (a JSON patch is easiest written as text). */
int kp_client_patch_bytes(struct kp_client *c, const struct kp_resource *res, const char *ns,
                          const char *name, const char *subresource, enum kp_patch_type type,
                          const char *patch, size_t patch_len, json_t **ret_obj,
                          struct kp_error *reterr) KP_WUR;

struct kp_delete_opts {
    const char *precondition_uid;   /* delete only this incarnation */
    const char *precondition_rv;    /* delete only this version (-KP_ECONFLICT otherwise) */
    const char *propagation_policy; /* "Background", "Foreground", "Orphan"; NULL: default */
    int64_t grace_period_seconds;   /* used when has_grace_period */
    bool has_grace_period;
    bool dry_run;
};

/* DELETE name with DeleteOptions built from opts (NULL: none). */
int kp_client_delete(struct kp_client *c, const struct kp_resource *res, const char *ns,
                     const char *name, const struct kp_delete_opts *opts,
                     struct kp_error *reterr) KP_WUR;

/* Evicts a pod through policy/v1 Eviction (the API server checks PodDisruptionBudgets).
 * -EAGAIN with kp_error_is_disruption_budget(reterr) when a budget refuses it; -ENOENT when the
 * pod is gone. opts: the DeleteOptions carried in the eviction (preconditions, grace period). */
int kp_client_evict(struct kp_client *c, const char *ns, const char *pod,
                    const struct kp_delete_opts *opts, struct kp_error *reterr) KP_WUR;

struct kp_list_opts {
    const char *label_selector;
    const char *field_selector;
    const char *resource_version;       /* NULL: most recent (quorum read) */
    const char *resource_version_match; /* "Exact", "NotOlderThan"; NULL: none */
    uint32_t limit;                     /* 0: KP_CLIENT_LIST_LIMIT */
    const char *continue_token;         /* resume an earlier list from this token (the
                                         * resourceVersion options are then ignored); an
                                         * expired token restarts the list as below */
};

/* One page of a list, valid during the callback only. */
struct kp_list_page {
    json_t *items;                /* the items array (borrowed; may be empty) */
    const char *resource_version; /* the list's resourceVersion */
    const char *continue_token;   /* NULL on the last page */
    size_t page;                  /* 0 for the first page of a (re)started list */
    bool restarted;               /* true on the first page after an expired continue token
                                   * restarted the list: forget what earlier pages delivered */
    uint32_t limit;               /* the page size this page was asked for (smaller than
                                   * opts->limit once a page was over the body ceiling) */
    size_t body_bytes;            /* size of this page's response body */
};

/* Receives a page; 0 to go on, or a negative error that ends the list and is returned. */
typedef int (*kp_client_page_fn)(const struct kp_list_page *page, void *userdata);

/* Lists res in ns (NULL: all namespaces for a namespaced resource) page by page with
 * limit/continue, handing each page to fn and freeing it before the next is requested, so
 * memory is bounded by the page size. An expired continue token (410) restarts the list from
 * the beginning (at most KP_CLIENT_LIST_RESTARTS times). A page whose body is over the
 * transport's ceiling (-KP_ELIMIT) is asked for again from the same position with half the page
 * size, down to 1, and the smaller size is kept for the rest of the list (page->limit says which
 * size a page was asked for); only an object that alone is over the ceiling fails the list with
 * -KP_ELIMIT. *ret_resource_version (optional): a new string with the list's resourceVersion,
 * the point a watch continues from. */
int kp_client_list(struct kp_client *c, const struct kp_resource *res, const char *ns,
                   const struct kp_list_opts *opts, kp_client_page_fn fn, void *userdata,
                   char **ret_resource_version, struct kp_error *reterr) KP_WUR;

/* The escape hatch: any method on any path (with its query, escaped by the caller through
 * kp_client_path/kp_query_add). A non-2xx answer becomes the mapped error and reterr; a 2xx
 * answer goes to *ret_resp (optional; release with kp_http_response_done()). */
int kp_client_request(struct kp_client *c, const char *method, const char *path,
                      const char *content_type, const void *body, size_t body_len,
                      struct kp_http_response *ret_resp, struct kp_error *reterr) KP_WUR;

/* Fills reterr (optional) from a completed non-2xx response and returns the mapped error, or
 * from a transport failure r (< 0) with the transport's text and returns r. For k8s/watch.c. */
int kp_client_fail(struct kp_client *c, int r, const struct kp_http_response *resp,
                   struct kp_error *reterr);

#endif
