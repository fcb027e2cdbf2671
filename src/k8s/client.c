/* DESIGN: REST verbs over k8s/transport (see client.h).
 *
 * What: URL building with escaping, the verbs (get, paginated list, create, update, status
 * update, merge and JSON patch, delete with preconditions, eviction) and the raw escape hatch.
 * Each verb builds a path, encodes the body through json/, performs one buffered request and
 * either decodes the 2xx body (only when the caller asked for it) or turns the failure into the
 * one mapped error of k8s/status.h plus an optional struct kp_error.
 *
 * Why this way: the verbs are thin on purpose. Retries belong to the caller, which knows whether
 * a Conflict means "lost the race, move on" or "re-read and retry"; the client only reports
 * precisely. The exception is the paginated list: an expired continue token is the list's own
 * business (the snapshot it paged through was compacted), so it restarts and tells the callback
 * through page->restarted. So is a page over the response body ceiling (-KP_ELIMIT): the same
 * position is asked again with half the page size, down to one object, and the size reached is
 * kept for the rest of that list and reported in page->limit, so a list always makes progress
 * whatever the objects weigh (up to one object per ceiling).
 *
 * Memory: a LIST page is decoded, handed to the callback and freed before the next page is
 * requested (STYLE.md section 3); the response body buffer is released as soon as it is parsed.
 *
 * Threads: a client is owned by one thread; kp_client_clone() serves another. */
#include "k8s/client.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "json/json.h"
#include "k8s/fence.h"
#include "k8s/kubeconfig.h"

#define RES(g, v, r, ns, k)                                                                        \
    {                                                                                              \
        .group = (g), .version = (v), .resource = (r), .namespaced = (ns), .kind = (k)             \
    }

const struct kp_resource KP_RES_POD = RES("", "v1", "pods", true, "Pod");
const struct kp_resource KP_RES_NODE = RES("", "v1", "nodes", false, "Node");
const struct kp_resource KP_RES_SECRET = RES("", "v1", "secrets", true, "Secret");
const struct kp_resource KP_RES_CONFIGMAP = RES("", "v1", "configmaps", true, "ConfigMap");
const struct kp_resource KP_RES_NAMESPACE = RES("", "v1", "namespaces", false, "Namespace");
const struct kp_resource KP_RES_SERVICEACCOUNT =
    RES("", "v1", "serviceaccounts", true, "ServiceAccount");
const struct kp_resource KP_RES_LEASE = RES("coordination.k8s.io", "v1", "leases", true, "Lease");
const struct kp_resource KP_RES_EVENT = RES("events.k8s.io", "v1", "events", true, "Event");
const struct kp_resource KP_RES_PDB =
    RES("policy", "v1", "poddisruptionbudgets", true, "PodDisruptionBudget");
const struct kp_resource KP_RES_DAEMONSET = RES("apps", "v1", "daemonsets", true, "DaemonSet");
const struct kp_resource KP_RES_CSR = RES("certificates.k8s.io", "v1", "certificatesigningrequests",
                                          false, "CertificateSigningRequest");
const struct kp_resource KP_RES_ROLE =
    RES("rbac.authorization.k8s.io", "v1", "roles", true, "Role");
const struct kp_resource KP_RES_ROLEBINDING =
    RES("rbac.authorization.k8s.io", "v1", "rolebindings", true, "RoleBinding");
const struct kp_resource KP_RES_CRD = RES("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                          false, "CustomResourceDefinition");
const struct kp_resource KP_RES_PVC =
    RES("", "v1", "persistentvolumeclaims", true, "PersistentVolumeClaim");
const struct kp_resource KP_RES_VOLUMEATTACHMENT =
    RES("storage.k8s.io", "v1", "volumeattachments", false, "VolumeAttachment");
const struct kp_resource KP_RES_NODEPOOL =
    RES("karpenter.sh", "v1", "nodepools", false, "NodePool");
const struct kp_resource KP_RES_NODECLAIM =
    RES("karpenter.sh", "v1", "nodeclaims", false, "NodeClaim");
/* SSHHost lives in the pool namespace; the node class and profile are cluster-scoped
 * (deploy/crds; docs/api.md). */
const struct kp_resource KP_RES_SSHHOST =
    RES("karpenter.kpssh.dev", "v1beta1", "sshhosts", true, "SSHHost");
const struct kp_resource KP_RES_SSHNODECLASS =
    RES("karpenter.kpssh.dev", "v1beta1", "sshnodeclasses", false, "SSHNodeClass");
const struct kp_resource KP_RES_SSHJOINPROFILE =
    RES("karpenter.kpssh.dev", "v1beta1", "sshjoinprofiles", false, "SSHJoinProfile");

/* Ceiling of a request path with its query (selectors and continue tokens are small). */
#define KP_MAX_PATH ((size_t)64 * 1024)

struct kp_client {
    struct kp_transport *t;
    const struct kp_fence *fence; /* borrowed; NULL: never fenced. Clones inherit it. */
};

/* --- URL building --------------------------------------------------------------------------- */

int kp_url_escape(struct kp_buf *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int r;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            r = kp_buf_putc(out, (char)*p);
        } else {
            char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};

            r = kp_buf_append(out, esc, sizeof(esc));
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static int path_segment(struct kp_buf *out, const char *seg)
{
    int r;

    if (!seg || !seg[0] || strcmp(seg, ".") == 0 || strcmp(seg, "..") == 0)
        return -EINVAL;
    if ((r = kp_buf_putc(out, '/')) < 0)
        return r;
    return kp_url_escape(out, seg);
}

int kp_client_path(const struct kp_resource *res, const char *ns, const char *name,
                   const char *subresource, struct kp_buf *out)
{
    int r;

    if ((ns && !res->namespaced) || (subresource && !name))
        return -EINVAL;
    if (!res->group || !res->group[0]) {
        r = kp_buf_puts(out, "/api");
    } else {
        if ((r = kp_buf_puts(out, "/apis")) < 0)
            return r;
        r = path_segment(out, res->group);
    }
    if (r < 0 || (r = path_segment(out, res->version)) < 0)
        return r;
    if (ns && ((r = kp_buf_puts(out, "/namespaces")) < 0 || (r = path_segment(out, ns)) < 0))
        return r;
    if ((r = path_segment(out, res->resource)) < 0)
        return r;
    if (name && (r = path_segment(out, name)) < 0)
        return r;
    if (subresource && (r = path_segment(out, subresource)) < 0)
        return r;
    return 0;
}

int kp_query_add(struct kp_buf *out, const char *key, const char *value)
{
    int r;

    if (!value)
        return 0;
    if ((r = kp_buf_putc(out, memchr(kp_buf_str(out), '?', out->len) ? '&' : '?')) < 0 ||
        (r = kp_url_escape(out, key)) < 0 || (r = kp_buf_putc(out, '=')) < 0)
        return r;
    return kp_url_escape(out, value);
}

/* --- lifecycle ------------------------------------------------------------------------------ */

void kp_transport_opts_from_kubeconfig(const struct kp_kubeconfig_rest *rest,
                                       struct kp_transport_opts *ret)
{
    *ret = (struct kp_transport_opts){
        .server = rest->server,
        .ca_pem = rest->ca_pem,
        .ca_pem_len = rest->ca_pem_len,
        .cert_pem = rest->cert_pem,
        .cert_pem_len = rest->cert_pem_len,
        .key_pem = rest->key_pem,
        .tls_server_name = rest->tls_server_name,
        .insecure_skip_tls_verify = rest->insecure_skip_tls_verify,
    };
}

int kp_client_new(const struct kp_transport_opts *opts, struct kp_client **ret)
{
    struct kp_client *c = NULL;
    int r;

    c = kp_calloc(1, sizeof(*c));
    if (!c) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = kp_transport_new(opts, &c->t)) < 0)
        goto out;
    *ret = c;
    c = NULL;
    r = 0;
out:
    kp_client_free(c);
    return r;
}

int kp_client_clone(struct kp_client *c, struct kp_client **ret)
{
    struct kp_client *n = NULL;
    int r;

    n = kp_calloc(1, sizeof(*n));
    if (!n) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = kp_transport_clone(c->t, &n->t)) < 0)
        goto out;
    n->fence = c->fence;
    *ret = n;
    n = NULL;
    r = 0;
out:
    kp_client_free(n);
    return r;
}

struct kp_client *kp_client_free(struct kp_client *c)
{
    if (!c)
        return NULL;
    kp_transport_free(c->t);
    kp_free(c);
    return NULL;
}

struct kp_transport *kp_client_transport(struct kp_client *c)
{
    return c->t;
}

/* --- requests ------------------------------------------------------------------------------- */

int kp_client_fail(struct kp_client *c, int r, const struct kp_http_response *resp,
                   struct kp_error *reterr)
{
    struct kp_error tmp = KP_ERROR_INIT;
    int k;

    if (r < 0 || !resp) {
        const char *text = kp_transport_last_error(c->t);

        if (r >= 0)
            r = -EINVAL; /* a programmer error: no failure and no response to decode */

        if (reterr && kp_error_set_client(reterr, r, text[0] ? text : kp_strerror(r)) < 0) {
            /* Out of memory for the text: reterr still carries the error code. */
        }
        return r;
    }
    k = kp_status_decode(kp_buf_str(&resp->body), resp->body.len, (int)resp->status,
                         resp->retry_after_sec, &tmp);
    if (k < 0) {
        /* No memory to decode the Status: map the bare code. */
        tmp.code = (int)resp->status;
        k = kp_status_errno(&tmp);
        if (reterr && kp_error_set_client(reterr, k, NULL) == 0)
            reterr->code = (int)resp->status;
        kp_error_done(&tmp);
        return k;
    }
    k = tmp.errnum;
    if (reterr) {
        kp_error_done(reterr);
        *reterr = tmp;
    } else {
        kp_error_done(&tmp);
    }
    return k;
}

void kp_client_set_fence(struct kp_client *c, const struct kp_fence *fence)
{
    c->fence = fence;
}

const struct kp_fence *kp_client_fence(const struct kp_client *c)
{
    return c->fence;
}

/* GET and HEAD change nothing (a WATCH is a GET); every other verb is a write. */
static bool kp_method_is_read(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

int kp_client_request(struct kp_client *c, const char *method, const char *path,
                      const char *content_type, const void *body, size_t body_len,
                      struct kp_http_response *ret_resp, struct kp_error *reterr)
{
    struct kp_http_request req = {.method = method,
                                  .path = path,
                                  .content_type = content_type,
                                  .body = body,
                                  .body_len = body_len};
    struct kp_http_response resp;
    int r;

    /* The fence is checked here, the one door every write of ours goes through, just before
     * the request is sent: a replica that no longer holds the Lease sends nothing. */
    if (c->fence && !kp_method_is_read(method) && (r = kp_fence_check(c->fence)) < 0) {
        if (reterr && kp_error_set_client(reterr, r, kp_strerror(r)) < 0) {
            /* Out of memory for the text: reterr still carries the error code. */
        }
        return r;
    }
    kp_http_response_init(&resp);
    r = kp_transport_request(c->t, &req, &resp);
    if (r < 0 || resp.status < 200 || resp.status > 299) {
        r = kp_client_fail(c, r, &resp, reterr);
        goto out;
    }
    if (ret_resp) {
        *ret_resp = resp;
        kp_http_response_init(&resp);
    }
    r = 0;
out:
    kp_http_response_done(&resp);
    return r;
}

/* One request on a built path with an optional body; decodes the 2xx answer when ret_obj.
 * *ret_body_len (optional): the size of the 2xx body, written on success. */
static int call_sized(struct kp_client *c, const char *method, const struct kp_buf *path,
                      const char *content_type, const struct kp_buf *body, json_t **ret_obj,
                      size_t *ret_body_len, struct kp_error *reterr)
{
    struct kp_http_response resp;
    struct kp_json_error jerr;
    json_t *obj = NULL;
    int r;

    kp_http_response_init(&resp);
    r = kp_client_request(c, method, kp_buf_str(path), content_type, body ? kp_buf_str(body) : NULL,
                          body ? body->len : 0, ret_obj ? &resp : NULL, reterr);
    if (r < 0 || !ret_obj)
        goto out;
    r = kp_json_parse(kp_buf_str(&resp.body), resp.body.len, resp.body.max, KP_CLIENT_MAX_DEPTH,
                      &obj, &jerr);
    if (r < 0) {
        if (reterr && kp_error_set_client(reterr, r, r == -ENOMEM ? NULL : jerr.text) < 0) {
            /* reterr keeps the code without the text. */
        }
        goto out;
    }
    *ret_obj = obj;
    obj = NULL;
    if (ret_body_len)
        *ret_body_len = resp.body.len;
    r = 0;
out:
    kp_json_unref(obj);
    kp_http_response_done(&resp);
    return r;
}

static int call(struct kp_client *c, const char *method, const struct kp_buf *path,
                const char *content_type, const struct kp_buf *body, json_t **ret_obj,
                struct kp_error *reterr)
{
    return call_sized(c, method, path, content_type, body, ret_obj, NULL, reterr);
}

static int client_path_error(int r, struct kp_error *reterr)
{
    if (reterr && kp_error_set_client(reterr, r, "bad resource path") < 0) {
        /* reterr keeps the code. */
    }
    return r;
}

static int encode(const json_t *obj, struct kp_buf *out, struct kp_error *reterr)
{
    int r = kp_json_dump(obj, 0, out);

    if (r < 0 && reterr && kp_error_set_client(reterr, r, "cannot encode the request body") < 0) {
        /* reterr keeps the code. */
    }
    return r;
}

int kp_client_get(struct kp_client *c, const struct kp_resource *res, const char *ns,
                  const char *name, json_t **ret_obj, struct kp_error *reterr)
{
    struct kp_buf path = KP_BUF_INIT(KP_MAX_PATH);
    int r;

    if (!name) {
        r = client_path_error(-EINVAL, reterr);
        goto out;
    }
    if ((r = kp_client_path(res, ns, name, NULL, &path)) < 0) {
        r = client_path_error(r, reterr);
        goto out;
    }
    r = call(c, "GET", &path, NULL, NULL, ret_obj, reterr);
out:
    kp_buf_done(&path);
    return r;
}

static int send_obj(struct kp_client *c, const char *method, const struct kp_resource *res,
                    const char *ns, const char *name, const char *subresource,
                    const char *content_type, const json_t *obj, json_t **ret_obj,
                    struct kp_error *reterr)
{
    struct kp_buf path = KP_BUF_INIT(KP_MAX_PATH), body = KP_BUF_INIT(KP_MAX_HTTP_REQUEST);
    int r;

    if ((r = kp_client_path(res, ns, name, subresource, &path)) < 0) {
        r = client_path_error(r, reterr);
        goto out;
    }
    if ((r = encode(obj, &body, reterr)) < 0)
        goto out;
    r = call(c, method, &path, content_type, &body, ret_obj, reterr);
out:
    kp_buf_done(&path);
    kp_buf_done(&body);
    return r;
}

int kp_client_create(struct kp_client *c, const struct kp_resource *res, const char *ns,
                     const json_t *obj, json_t **ret_obj, struct kp_error *reterr)
{
    return send_obj(c, "POST", res, ns, NULL, NULL, NULL, obj, ret_obj, reterr);
}

int kp_client_create_sub(struct kp_client *c, const struct kp_resource *res, const char *ns,
                         const char *name, const char *subresource, const json_t *obj,
                         json_t **ret_obj, struct kp_error *reterr)
{
    if (!name || !subresource)
        return client_path_error(-EINVAL, reterr);
    return send_obj(c, "POST", res, ns, name, subresource, NULL, obj, ret_obj, reterr);
}

int kp_client_update(struct kp_client *c, const struct kp_resource *res, const char *ns,
                     const char *name, const json_t *obj, json_t **ret_obj, struct kp_error *reterr)
{
    if (!name)
        return client_path_error(-EINVAL, reterr);
    return send_obj(c, "PUT", res, ns, name, NULL, NULL, obj, ret_obj, reterr);
}

int kp_client_update_status(struct kp_client *c, const struct kp_resource *res, const char *ns,
                            const char *name, const json_t *obj, json_t **ret_obj,
                            struct kp_error *reterr)
{
    if (!name)
        return client_path_error(-EINVAL, reterr);
    return send_obj(c, "PUT", res, ns, name, "status", NULL, obj, ret_obj, reterr);
}

static const char *patch_content_type(enum kp_patch_type type)
{
    return type == KP_PATCH_JSON ? "application/json-patch+json" : "application/merge-patch+json";
}

int kp_client_patch(struct kp_client *c, const struct kp_resource *res, const char *ns,
                    const char *name, const char *subresource, enum kp_patch_type type,
                    const json_t *patch, json_t **ret_obj, struct kp_error *reterr)
{
    if (!name)
        return client_path_error(-EINVAL, reterr);
    return send_obj(c, "PATCH", res, ns, name, subresource, patch_content_type(type), patch,
                    ret_obj, reterr);
}

int kp_client_patch_bytes(struct kp_client *c, const struct kp_resource *res, const char *ns,
                          const char *name, const char *subresource, enum kp_patch_type type,
                          const char *patch, size_t patch_len, json_t **ret_obj,
                          struct kp_error *reterr)
{
    struct kp_buf path = KP_BUF_INIT(KP_MAX_PATH), body = KP_BUF_INIT(KP_MAX_HTTP_REQUEST);
    int r;

    if (!name || kp_client_path(res, ns, name, subresource, &path) < 0) {
        r = client_path_error(-EINVAL, reterr);
        goto out;
    }
    if ((r = kp_buf_append(&body, patch, patch_len)) < 0) {
        r = kp_client_fail(c, r, NULL, reterr);
        goto out;
    }
    r = call(c, "PATCH", &path, patch_content_type(type), &body, ret_obj, reterr);
out:
    kp_buf_done(&path);
    kp_buf_done(&body);
    return r;
}

/* Builds a DeleteOptions object (apiVersion/kind only when top is set: inside an Eviction it is
 * a plain field). */
static int delete_options(const struct kp_delete_opts *o, bool top, json_t **ret)
{
    json_t *d = NULL;
    int r;

    if ((r = kp_json_patch_new(&d)) < 0)
        goto out;
    if (top && ((r = kp_json_patch_set_str(d, KP_JSON_PATH("apiVersion"), "v1")) < 0 ||
                (r = kp_json_patch_set_str(d, KP_JSON_PATH("kind"), "DeleteOptions")) < 0))
        goto out;
    if (o) {
        if (o->precondition_uid &&
            (r = kp_json_patch_set_str(d, KP_JSON_PATH("preconditions", "uid"),
                                       o->precondition_uid)) < 0)
            goto out;
        if (o->precondition_rv &&
            (r = kp_json_patch_set_str(d, KP_JSON_PATH("preconditions", "resourceVersion"),
                                       o->precondition_rv)) < 0)
            goto out;
        if (o->propagation_policy &&
            (r = kp_json_patch_set_str(d, KP_JSON_PATH("propagationPolicy"),
                                       o->propagation_policy)) < 0)
            goto out;
        if (o->has_grace_period && (r = kp_json_patch_set_int(d, KP_JSON_PATH("gracePeriodSeconds"),
                                                              o->grace_period_seconds)) < 0)
            goto out;
        if (o->dry_run) {
            json_t *arr = NULL;
            /* dryRun is a list (["All"]); the patch builder makes objects only, so parse it. */
            if ((r = kp_json_parse("[\"All\"]", 7, 7, 0, &arr, NULL)) < 0 ||
                (r = kp_json_patch_set_steal(d, KP_JSON_PATH("dryRun"), arr)) < 0)
                goto out;
        }
    }
    *ret = d;
    d = NULL;
    r = 0;
out:
    kp_json_unref(d);
    return r;
}

int kp_client_delete(struct kp_client *c, const struct kp_resource *res, const char *ns,
                     const char *name, const struct kp_delete_opts *opts, struct kp_error *reterr)
{
    json_t *d = NULL;
    int r;

    if (!name)
        return client_path_error(-EINVAL, reterr);
    if ((r = delete_options(opts, true, &d)) < 0) {
        r = kp_client_fail(c, r, NULL, reterr);
        goto out;
    }
    r = send_obj(c, "DELETE", res, ns, name, NULL, NULL, d, NULL, reterr);
out:
    kp_json_unref(d);
    return r;
}

int kp_client_evict(struct kp_client *c, const char *ns, const char *pod,
                    const struct kp_delete_opts *opts, struct kp_error *reterr)
{
    json_t *ev = NULL, *d = NULL;
    int r;

    if (!ns || !pod)
        return client_path_error(-EINVAL, reterr);
    if ((r = kp_json_patch_new(&ev)) < 0 ||
        (r = kp_json_patch_set_str(ev, KP_JSON_PATH("apiVersion"), "policy/v1")) < 0 ||
        (r = kp_json_patch_set_str(ev, KP_JSON_PATH("kind"), "Eviction")) < 0 ||
        (r = kp_json_patch_set_str(ev, KP_JSON_PATH("metadata", "name"), pod)) < 0 ||
        (r = kp_json_patch_set_str(ev, KP_JSON_PATH("metadata", "namespace"), ns)) < 0) {
        r = kp_client_fail(c, r, NULL, reterr);
        goto out;
    }
    if (opts) {
        if ((r = delete_options(opts, false, &d)) < 0 ||
            (r = kp_json_patch_set_steal(ev, KP_JSON_PATH("deleteOptions"), d)) < 0) {
            d = NULL; /* set_steal took it even on failure */
            r = kp_client_fail(c, r, NULL, reterr);
            goto out;
        }
        d = NULL;
    }
    r = send_obj(c, "POST", &KP_RES_POD, ns, pod, "eviction", NULL, ev, NULL, reterr);
out:
    kp_json_unref(d);
    kp_json_unref(ev);
    return r;
}

/* --- list ----------------------------------------------------------------------------------- */

static int list_path(const struct kp_resource *res, const char *ns, const struct kp_list_opts *o,
                     const char *cont, uint32_t lim, struct kp_buf *path)
{
    char limit[16];
    int r;

    kp_buf_reset(path);
    (void)snprintf(limit, sizeof(limit), "%u", (unsigned)lim);
    if ((r = kp_client_path(res, ns, NULL, NULL, path)) < 0 ||
        (r = kp_query_add(path, "limit", limit)) < 0)
        return r;
    if (o && ((r = kp_query_add(path, "labelSelector", o->label_selector)) < 0 ||
              (r = kp_query_add(path, "fieldSelector", o->field_selector)) < 0))
        return r;
    if (cont)
        return kp_query_add(path, "continue", cont);
    /* resourceVersion and continue are exclusive: the token already pins the snapshot. */
    if (o && ((r = kp_query_add(path, "resourceVersion", o->resource_version)) < 0 ||
              (r = kp_query_add(path, "resourceVersionMatch", o->resource_version_match)) < 0))
        return r;
    return 0;
}

int kp_client_list(struct kp_client *c, const struct kp_resource *res, const char *ns,
                   const struct kp_list_opts *opts, kp_client_page_fn fn, void *userdata,
                   char **ret_resource_version, struct kp_error *reterr)
{
    struct kp_buf path = KP_BUF_INIT(KP_MAX_PATH);
    json_t *doc = NULL;
    char *cont = NULL, *rv = NULL;
    unsigned restarts = 0;
    uint32_t limit = opts && opts->limit ? opts->limit : KP_CLIENT_LIST_LIMIT;
    bool restarted = false;
    size_t page = 0, body_len = 0;
    int r;

    if (opts && opts->continue_token && opts->continue_token[0] &&
        !(cont = kp_strdup(opts->continue_token))) {
        r = kp_client_fail(c, -ENOMEM, NULL, reterr);
        goto out;
    }
    for (;;) {
        struct kp_list_page pg;
        const char *s;
        json_t *items = NULL;

        if ((r = list_path(res, ns, opts, cont, limit, &path)) < 0) {
            r = client_path_error(r, reterr);
            goto out;
        }
        doc = kp_json_unref(doc);
        r = call_sized(c, "GET", &path, NULL, NULL, &doc, &body_len, reterr);
        if (r == -KP_ELIMIT && limit > 1) {
            /* The page is bigger than the body ceiling: ask again from the same position for
             * half as many objects. A continue token does not pin the page size, so it is
             * reused as it is. Halving ends at one object per page, so the list always makes
             * progress unless a single object is over the ceiling. */
            limit /= 2;
            continue;
        }
        if (r == -KP_ELIMIT) {
            /* One object alone is over the ceiling; its name is in the part we refused. */
            if (reterr && kp_error_set_client(reterr, r,
                                              "a single object is larger than the response "
                                              "body ceiling (page size 1)") < 0) {
                /* reterr keeps the code. */
            }
            goto out;
        }
        if (r == -KP_EEXPIRED && cont && restarts < KP_CLIENT_LIST_RESTARTS) {
            /* The snapshot behind the continue token was compacted: start over. */
            restarts++;
            restarted = true;
            page = 0;
            kp_free(cont);
            cont = NULL;
            continue;
        }
        if (r < 0)
            goto out;
        if (kp_json_get_array(doc, "items", &items) < 0 ||
            kp_json_path_str(doc, "metadata.resourceVersion", &s) < 0) {
            r = kp_client_fail(c, -KP_EPARSE, NULL, reterr);
            goto out;
        }
        if ((r = kp_strset(&rv, s)) < 0) {
            r = kp_client_fail(c, r, NULL, reterr);
            goto out;
        }
        kp_free(cont);
        cont = NULL;
        if (kp_json_path_str(doc, "metadata.continue", &s) == 0 && s[0] && !(cont = kp_strdup(s))) {
            r = kp_client_fail(c, -ENOMEM, NULL, reterr);
            goto out;
        }
        pg = (struct kp_list_page){.items = items,
                                   .resource_version = rv,
                                   .continue_token = cont,
                                   .page = page,
                                   .restarted = restarted && page == 0,
                                   .limit = limit,
                                   .body_bytes = body_len};
        if ((r = fn(&pg, userdata)) < 0) {
            r = kp_client_fail(c, r, NULL, reterr);
            goto out;
        }
        doc = kp_json_unref(doc); /* this page is gone before the next is requested */
        page++;
        if (!cont)
            break;
    }
    if (ret_resource_version) {
        *ret_resource_version = rv;
        rv = NULL;
    }
    r = 0;
out:
    kp_json_unref(doc);
    kp_free(cont);
    kp_free(rv);
    kp_buf_done(&path);
    return r;
}
