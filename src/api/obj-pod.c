/* DESIGN: Pod projection.
 *
 * What the controllers need of a pod: where it runs or wants to run (nodeName, nodeSelector,
 * affinity, tolerations, topology spread, PVC names, host ports), what it costs (effective
 * requests and limits), and what protects it from disruption (do-not-disrupt, owners, priority,
 * grace period, phase, readiness, deletion time). Everything else — container images, env,
 * probes, status details, managedFields — is dropped, which is why a cached pod costs hundreds
 * of bytes instead of kilobytes (bench/bench-informer.c measures it).
 *
 * Effective requests follow the scheduler (Kubernetes' resourcehelper.PodRequests, which
 * Karpenter's resources.Ceiling calls): regular containers and restartable init containers
 * (sidecars) run together, and each ordinary init container runs alone next to the sidecars
 * started before it; the pod needs the larger of the two, per resource; pod-level
 * spec.resources replace the containers' total for the resources they may set; then overhead.
 * Limits aggregate the same way, with overhead added only where a limit exists (PodLimits).
 * In-place resize: Karpenter counts requests with UseStatusResources, so a running container
 * counts the max of its spec, its status resources.requests and its allocatedResources (only
 * the last two when the resize is infeasible), for regular containers and sidecars. A pod whose
 * status differs so gets its own requests array; the rest keep the shared shape's (below).
 *
 * Ownership is kept as Karpenter tests it: a DaemonSet, StatefulSet or Node owner is any owner
 * reference with that apiVersion and kind (flags), and the controller reference's kind and name
 * are kept for logs, metrics and the disruption controller's messages. */
#include "api/obj-pod.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/map.h"
#include "json/json.h"
#include "api/duration.h"
#include "api/quantity.h"

#define KP_POD_MAX_RESOURCES 32

/* Per-resource accumulator over names borrowed from the JSON tree. */
struct kp_acc {
    const char *name[KP_POD_MAX_RESOURCES];
    int64_t v[KP_POD_MAX_RESOURCES];
    size_t n;
};

static int64_t *kp_acc_slot(struct kp_acc *a, const char *name)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->name[i], name) == 0)
            return &a->v[i];
    if (a->n == KP_POD_MAX_RESOURCES)
        return NULL;
    a->name[a->n] = name;
    a->v[a->n] = 0;
    return &a->v[a->n++];
}

/* How kp_acc_merge folds a ResourceList into an accumulator. */
enum kp_acc_op {
    KP_ACC_SUM, /* adds each quantity */
    KP_ACC_MAX, /* raises each to the quantity */
    /* Sets only the names a does not hold yet (the API server's defaulting of a container's
     * requests from its limits); a name it holds is neither parsed nor changed. */
    KP_ACC_MISSING,
};

/* Folds the quantities of a ResourceList object into a, as op says. */
static int kp_acc_merge(struct kp_acc *a, const json_t *list, enum kp_acc_op op)
{
    struct kp_json_iter it = KP_JSON_ITER_INIT;
    const char *k;
    json_t *val;

    if (!list)
        return 0;
    if (kp_json_typeof(list) != KP_JSON_OBJECT)
        return -KP_EPARSE;
    while (kp_json_object_next(list, &it, &k, &val)) {
        struct kp_quantity q;
        const char *s;
        int64_t *slot;
        bool have = false;

        for (size_t i = 0; op == KP_ACC_MISSING && i < a->n && !have; i++)
            have = strcmp(a->name[i], k) == 0;
        if (have)
            continue;
        if (kp_json_as_str(val, &s) < 0 ||
            kp_quantity_parse(s, strlen(s), KP_QUANTITY_ROUND_UP, &q) < 0)
            return -KP_EPARSE;
        slot = kp_acc_slot(a, k);
        if (!slot)
            return -KP_ELIMIT;
        if (op == KP_ACC_MISSING) {
            *slot = q.milli; /* a new slot: an object's keys are unique */
        } else if (op == KP_ACC_MAX) {
            if (q.milli > *slot)
                *slot = q.milli;
        } else if (kp_add_overflow(*slot, q.milli, slot)) {
            return -ERANGE;
        }
    }
    return 0;
}

static int kp_acc_merge_acc(struct kp_acc *a, const struct kp_acc *b, bool max)
{
    for (size_t i = 0; i < b->n; i++) {
        int64_t *slot = kp_acc_slot(a, b->name[i]);

        if (!slot)
            return -KP_ELIMIT;
        if (max) {
            if (b->v[i] > *slot)
                *slot = b->v[i];
        } else if (kp_add_overflow(*slot, b->v[i], slot)) {
            return -ERANGE;
        }
    }
    return 0;
}

/* The container's resources.<field> object ("requests" or "limits"), or NULL. */
static int kp_container_resources(const json_t *c, const char *field, json_t **ret)
{
    json_t *res = NULL, *list = NULL;
    int r;

    *ret = NULL;
    if (kp_json_typeof(c) != KP_JSON_OBJECT)
        return -KP_EPARSE;
    r = kp_json_get_object(c, "resources", &res);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    r = kp_json_get_object(res, field, &list);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    *ret = list;
    return 0;
}

/* The resources a pod-level spec.resources may set (Kubernetes' IsSupportedPodLevelResource). */
static bool kp_pod_level_resource(const char *name)
{
    return strcmp(name, "cpu") == 0 || strcmp(name, "memory") == 0 ||
           strncmp(name, "hugepages-", 10) == 0;
}

/* Pod-level spec.resources.<field>: each supported resource replaces the containers' total. */
static int kp_acc_pod_level(struct kp_acc *a, const json_t *spec, const char *field)
{
    struct kp_json_iter it = KP_JSON_ITER_INIT;
    json_t *list = NULL, *val;
    const char *k;
    int r;

    if ((r = kp_container_resources(spec, field, &list)) < 0)
        return r;
    if (!list)
        return 0;
    while (kp_json_object_next(list, &it, &k, &val)) {
        struct kp_quantity q;
        const char *s;
        int64_t *slot;

        if (!kp_pod_level_resource(k))
            continue;
        if (kp_json_as_str(val, &s) < 0 ||
            kp_quantity_parse(s, strlen(s), KP_QUANTITY_ROUND_UP, &q) < 0)
            return -KP_EPARSE;
        if (!(slot = kp_acc_slot(a, k)))
            return -KP_ELIMIT;
        *slot = q.milli;
    }
    return 0;
}

/* Overhead for limits: added only to resources that already have a limit (PodLimits). */
static int kp_acc_overhead_existing(struct kp_acc *a, const json_t *overhead)
{
    struct kp_acc o = {0};
    int r;

    if ((r = kp_acc_merge(&o, overhead, KP_ACC_SUM)) < 0)
        return r;
    for (size_t i = 0; i < o.n; i++)
        for (size_t j = 0; j < a->n; j++)
            if (strcmp(a->name[j], o.name[i]) == 0 && kp_add_overflow(a->v[j], o.v[i], &a->v[j]))
                return -ERANGE;
    return 0;
}

/* What an in-place resize changes in the requests: the pod's status (NULL: spec only). */
struct kp_resize {
    const json_t *status;
    bool infeasible; /* the resize cannot happen: count what the kubelet runs, not the spec */
};

/* The status entry of the container called name, or NULL. */
static const json_t *kp_container_status(const json_t *status, const char *name)
{
    static const char *const lists[] = {"containerStatuses", "initContainerStatuses"};

    for (size_t l = 0; l < KP_ARRAY_SIZE(lists); l++) {
        json_t *arr = NULL;

        if (kp_json_get_array(status, lists[l], &arr) < 0)
            continue;
        for (size_t i = 0; i < kp_json_array_size(arr); i++) {
            const json_t *cs = kp_json_array_at(arr, i);
            const char *n = NULL;

            if (kp_json_typeof(cs) == KP_JSON_OBJECT && kp_json_get_str(cs, "name", &n) == 0 &&
                strcmp(n, name) == 0)
                return cs;
        }
    }
    return NULL;
}

/* The amounts container c counts with, into out: its spec's resources.<field>; with
 * limits_default, a limit stands in for a request the container does not set (what the API
 * server's defaulting does to a pod, but not to a pod template); with rs, while the status
 * reports resources for it, Kubernetes' determineContainerReqs: the max of spec, status
 * resources.requests and allocatedResources (without the spec when the resize is infeasible). */
static int kp_container_acc(const json_t *c, const char *field, bool limits_default,
                            const struct kp_resize *rs, struct kp_acc *out)
{
    json_t *req = NULL, *lim = NULL, *res = NULL, *sreq = NULL, *alloc = NULL;
    const json_t *cs;
    const char *name = NULL;
    int r;

    if ((r = kp_container_resources(c, field, &req)) < 0 ||
        (r = kp_acc_merge(out, req, KP_ACC_SUM)) < 0)
        return r;
    if (limits_default && ((r = kp_container_resources(c, "limits", &lim)) < 0 ||
                           (r = kp_acc_merge(out, lim, KP_ACC_MISSING)) < 0))
        return r;
    if (!rs || kp_json_get_str(c, "name", &name) < 0 ||
        !(cs = kp_container_status(rs->status, name)))
        return 0;
    if (kp_json_get_object(cs, "resources", &res) < 0)
        return 0; /* no resources reported: the spec stands */
    if ((r = kp_obj_opt_object(res, "requests", &sreq)) < 0 ||
        (r = kp_obj_opt_object(cs, "allocatedResources", &alloc)) < 0)
        return r;
    if (rs->infeasible)
        out->n = 0;
    if ((r = kp_acc_merge(out, sreq, KP_ACC_MAX)) < 0 ||
        (r = kp_acc_merge(out, alloc, KP_ACC_MAX)) < 0)
        return r;
    return 0;
}

/* The aggregation Kubernetes' resourcehelper.PodRequests / PodLimits share, over field, into
 * total (names borrowed from the tree); limits_default as in kp_container_acc. */
static int kp_pod_aggregate(const json_t *spec, const char *field, bool limits_default,
                            const struct kp_resize *rs, struct kp_acc *total)
{
    struct kp_acc sidecars = {0}, init_max = {0};
    json_t *arr = NULL, *overhead = NULL;
    bool limits = strcmp(field, "limits") == 0;
    size_t n;
    int r;

    r = kp_json_get_array(spec, "containers", &arr);
    if (r < 0)
        return -KP_EPARSE;
    n = kp_json_array_size(arr);
    for (size_t i = 0; i < n; i++) {
        struct kp_acc one = {0};

        if ((r = kp_container_acc(kp_json_array_at(arr, i), field, limits_default, rs, &one)) < 0 ||
            (r = kp_acc_merge_acc(total, &one, false)) < 0)
            return r;
    }
    arr = NULL;
    r = kp_json_get_array(spec, "initContainers", &arr);
    if (r < 0 && r != -ENOENT)
        return r;
    n = kp_json_array_size(arr);
    for (size_t i = 0; i < n; i++) {
        const json_t *c = kp_json_array_at(arr, i);
        const char *policy = NULL;
        struct kp_acc step = {0}, one = {0};
        bool sidecar;

        if (kp_json_typeof(c) != KP_JSON_OBJECT)
            return -KP_EPARSE;
        r = kp_json_get_str(c, "restartPolicy", &policy);
        if (r < 0 && r != -ENOENT)
            return r;
        sidecar = policy && strcmp(policy, "Always") == 0;
        /* Only sidecars follow a resize; an ordinary init container has run to completion. */
        if ((r = kp_container_acc(c, field, limits_default, sidecar ? rs : NULL, &one)) < 0)
            return r;
        if (sidecar) {
            /* A sidecar keeps running beside everything after it: it joins the total, and the
             * step it starts in needs every sidecar so far (itself included). */
            if ((r = kp_acc_merge_acc(total, &one, false)) < 0 ||
                (r = kp_acc_merge_acc(&sidecars, &one, false)) < 0 ||
                (r = kp_acc_merge_acc(&init_max, &sidecars, true)) < 0)
                return r;
        } else {
            /* An ordinary init container runs alone, next to the sidecars started before it. */
            if ((r = kp_acc_merge_acc(&step, &one, false)) < 0 ||
                (r = kp_acc_merge_acc(&step, &sidecars, false)) < 0 ||
                (r = kp_acc_merge_acc(&init_max, &step, true)) < 0)
                return r;
        }
    }
    if ((r = kp_acc_merge_acc(total, &init_max, true)) < 0 ||
        (r = kp_acc_pod_level(total, spec, field)) < 0)
        return r;
    r = kp_json_get_object(spec, "overhead", &overhead);
    if (r < 0 && r != -ENOENT)
        return r;
    r = limits ? kp_acc_overhead_existing(total, overhead)
               : kp_acc_merge(total, overhead, KP_ACC_SUM);
    return r < 0 ? r : 0;
}

static void kp_acc_pack(const struct kp_acc *a, struct kp_pack *p, struct kp_resources *ret)
{
    struct kp_res *v = kp_pack_array(p, a->n, sizeof(*v)), scratch = {0};

    for (size_t i = 0; i < a->n; i++) {
        struct kp_res *x = v ? &v[i] : &scratch;

        x->name = kp_pack_str(p, a->name[i]);
        x->milli = a->v[i];
    }
    *ret = (struct kp_resources){.v = v, .n = a->n};
}

static bool kp_acc_equal(const struct kp_acc *a, const struct kp_acc *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        bool found = false;

        for (size_t j = 0; j < b->n && !found; j++)
            found = strcmp(a->name[i], b->name[j]) == 0 && a->v[i] == b->v[j];
        if (!found)
            return false;
    }
    return true;
}

static int kp_pod_spec_aggregate(const json_t *spec, const char *field, bool limits_default,
                                 struct kp_pack *p, struct kp_resources *ret)
{
    struct kp_acc total = {0};
    int r;

    if ((r = kp_pod_aggregate(spec, field, limits_default, NULL, &total)) < 0)
        return r;
    kp_acc_pack(&total, p, ret);
    return 0;
}

/* The resize is infeasible: condition PodResizePending with reason Infeasible (Kubernetes
 * 1.33+), or the older status.resize "Infeasible". */
static bool kp_resize_infeasible(const json_t *status)
{
    json_t *conds = NULL;
    const char *s = NULL;

    if (kp_json_get_str(status, "resize", &s) == 0 && strcmp(s, "Infeasible") == 0)
        return true;
    if (kp_json_get_array(status, "conditions", &conds) < 0)
        return false;
    for (size_t i = 0; i < kp_json_array_size(conds); i++) {
        const json_t *c = kp_json_array_at(conds, i);
        const char *type = NULL, *reason = NULL;

        if (kp_json_typeof(c) == KP_JSON_OBJECT && kp_json_get_str(c, "type", &type) == 0 &&
            strcmp(type, "PodResizePending") == 0 && kp_json_get_str(c, "reason", &reason) == 0 &&
            strcmp(reason, "Infeasible") == 0)
            return true;
    }
    return false;
}

/* Requests that differ from the spec's because of an in-place resize (Karpenter's Ceiling uses
 * UseStatusResources), packed into the pod's own block: *ret_set says whether they differ. Most
 * pods' status matches their spec and they keep the shared shape's requests. */
static int kp_pod_resize_requests(const json_t *spec, const json_t *status, struct kp_pack *p,
                                  struct kp_resources *ret, bool *ret_set)
{
    struct kp_acc spec_total = {0}, total = {0};
    struct kp_resize rs = {.status = status};
    int r;

    *ret_set = false;
    if (!status)
        return 0;
    rs.infeasible = kp_resize_infeasible(status);
    if ((r = kp_pod_aggregate(spec, "requests", false, NULL, &spec_total)) < 0 ||
        (r = kp_pod_aggregate(spec, "requests", false, &rs, &total)) < 0)
        return r;
    if (kp_acc_equal(&spec_total, &total))
        return 0;
    kp_acc_pack(&total, p, ret);
    *ret_set = true;
    return 0;
}

int kp_pod_spec_requests(const json_t *spec, struct kp_pack *p, struct kp_resources *ret)
{
    return kp_pod_spec_aggregate(spec, "requests", false, p, ret);
}

int kp_pod_template_requests(const json_t *spec, struct kp_pack *p, struct kp_resources *ret)
{
    return kp_pod_spec_aggregate(spec, "requests", true, p, ret);
}

int kp_pod_spec_limits(const json_t *spec, struct kp_pack *p, struct kp_resources *ret)
{
    return kp_pod_spec_aggregate(spec, "limits", false, p, ret);
}

static int kp_protocol_of(const char *s, enum kp_protocol *ret)
{
    if (!s || strcmp(s, "TCP") == 0)
        *ret = KP_PROTO_TCP;
    else if (strcmp(s, "UDP") == 0)
        *ret = KP_PROTO_UDP;
    else if (strcmp(s, "SCTP") == 0)
        *ret = KP_PROTO_SCTP;
    else
        return -KP_EPARSE; /* the API server admits no other value */
    return 0;
}

int kp_pod_spec_host_ports(const json_t *spec, struct kp_pack *p, const struct kp_host_port **ret,
                           size_t *ret_n)
{
    struct kp_host_port *out = NULL, scratch = {0};
    json_t *cs = NULL;
    size_t count = 0, k = 0;
    int r;

    r = kp_json_get_array(spec, "containers", &cs);
    if (r < 0)
        return -KP_EPARSE;
    /* Two walks: count, then fill, so the array is sized exactly. */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            out = kp_pack_array(p, count, sizeof(*out));
        for (size_t i = 0; i < kp_json_array_size(cs); i++) {
            json_t *ports = NULL;

            if ((r = kp_obj_opt_array(kp_json_array_at(cs, i), "ports", &ports)) < 0)
                return r;
            for (size_t j = 0; j < kp_json_array_size(ports); j++) {
                const json_t *cp = kp_json_array_at(ports, j);
                const char *proto = NULL, *ip = NULL;
                int64_t host_port = 0;
                struct kp_host_port *x;

                if (kp_json_typeof(cp) != KP_JSON_OBJECT)
                    return -KP_EPARSE;
                r = kp_json_get_int(cp, "hostPort", &host_port);
                if (r < 0 && r != -ENOENT)
                    return r;
                if (host_port < 0 || host_port > 65535)
                    return -KP_EPARSE;
                if (host_port == 0)
                    continue;
                if (pass == 0) {
                    count++;
                    continue;
                }
                x = out ? &out[k] : &scratch;
                k++;
                if ((r = kp_obj_opt_str(cp, "protocol", &proto)) < 0 ||
                    (r = kp_obj_opt_str(cp, "hostIP", &ip)) < 0 ||
                    (r = kp_protocol_of(proto && *proto ? proto : NULL, &x->protocol)) < 0)
                    return r;
                x->port = (int32_t)host_port;
                x->ip = kp_pack_str(p, ip && *ip ? ip : NULL);
            }
        }
    }
    *ret = out;
    *ret_n = count;
    return 0;
}

/* An IP as 16 bytes (IPv4 mapped), as Go's net.IP compares them. false: not an IP. */
static bool kp_ip_parse(const char *s, unsigned char out[16])
{
    unsigned char v4[4];

    if (inet_pton(AF_INET6, s, out) == 1)
        return true;
    if (inet_pton(AF_INET, s, v4) != 1)
        return false;
    memset(out, 0, 10);
    out[10] = 0xff;
    out[11] = 0xff;
    memcpy(out + 12, v4, 4);
    return true;
}

static bool kp_ip_unspecified(const char *s, const unsigned char ip[16], bool parsed)
{
    static const unsigned char zero[16], v4zero[16] = {[10] = 0xff, [11] = 0xff};

    if (!s)
        return true;
    return parsed && (memcmp(ip, zero, 16) == 0 || memcmp(ip, v4zero, 16) == 0);
}

bool kp_host_port_conflicts(const struct kp_host_port *a, const struct kp_host_port *b)
{
    unsigned char ia[16] = {0}, ib[16] = {0};
    bool pa, pb;

    if (a->protocol != b->protocol || a->port != b->port)
        return false;
    pa = a->ip && kp_ip_parse(a->ip, ia);
    pb = b->ip && kp_ip_parse(b->ip, ib);
    if (kp_ip_unspecified(a->ip, ia, pa) || kp_ip_unspecified(b->ip, ib, pb))
        return true;
    if (pa && pb)
        return memcmp(ia, ib, 16) == 0;
    return pa == pb && strcmp(a->ip, b->ip) == 0;
}

/* A NodeSelectorTerm (matchExpressions, matchFields). */
static int kp_node_term(const json_t *term, struct kp_pack *p, struct kp_node_term *x)
{
    json_t *exprs, *fields;
    int r;

    if (kp_json_typeof(term) != KP_JSON_OBJECT)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_array(term, "matchExpressions", &exprs)) < 0 ||
        (r = kp_obj_opt_array(term, "matchFields", &fields)) < 0 ||
        (r = kp_obj_node_requirements(exprs, p, &x->exprs)) < 0 ||
        (r = kp_obj_node_requirements(fields, p, &x->fields)) < 0)
        return r;
    return 0;
}

static int kp_required_terms(const json_t *na, struct kp_pack *p, const struct kp_node_term **ret,
                             size_t *ret_n)
{
    struct kp_node_term *terms, scratch = {0};
    json_t *req, *arr;
    size_t n;
    int r;

    if ((r = kp_obj_opt_object(na, "requiredDuringSchedulingIgnoredDuringExecution", &req)) < 0 ||
        (r = kp_obj_opt_array(req, "nodeSelectorTerms", &arr)) < 0)
        return r;
    n = kp_json_array_size(arr);
    terms = kp_pack_array(p, n, sizeof(*terms));
    for (size_t i = 0; i < n; i++) {
        r = kp_node_term(kp_json_array_at(arr, i), p, terms ? &terms[i] : &scratch);
        if (r < 0)
            return r;
    }
    *ret = terms;
    *ret_n = n;
    return 0;
}

int kp_pod_spec_required_terms(const json_t *spec, struct kp_pack *p,
                               const struct kp_node_term **ret, size_t *ret_n)
{
    json_t *affinity, *na;
    int r;

    if ((r = kp_obj_opt_object(spec, "affinity", &affinity)) < 0 ||
        (r = kp_obj_opt_object(affinity, "nodeAffinity", &na)) < 0)
        return r;
    return kp_required_terms(na, p, ret, ret_n);
}

static int kp_node_affinity(const json_t *na, struct kp_pack *p, struct kp_pod_view *v)
{
    struct kp_node_term *terms, scratch = {0};
    json_t *pref;
    size_t n;
    int r;

    if ((r = kp_required_terms(na, p, &v->required, &v->n_required)) < 0)
        return r;

    if ((r = kp_obj_opt_array(na, "preferredDuringSchedulingIgnoredDuringExecution", &pref)) < 0)
        return r;
    n = kp_json_array_size(pref);
    terms = kp_pack_array(p, n, sizeof(*terms));
    for (size_t i = 0; i < n; i++) {
        const json_t *pt = kp_json_array_at(pref, i);
        struct kp_node_term *x = terms ? &terms[i] : &scratch;
        json_t *preference;

        if ((r = kp_json_get_object(pt, "preference", &preference)) < 0 ||
            (r = kp_node_term(preference, p, x)) < 0 ||
            (r = kp_obj_opt_int32(pt, "weight", 0, &x->weight)) < 0)
            return r == -ENOENT ? -KP_EPARSE : r;
    }
    v->preferred = terms;
    v->n_preferred = n;
    return 0;
}

static int kp_pod_term(const json_t *t, int32_t weight, struct kp_pack *p, struct kp_pod_term *x)
{
    json_t *sel, *nssel, *nss;
    const char *key;
    int r;

    if (kp_json_typeof(t) != KP_JSON_OBJECT)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_object(t, "labelSelector", &sel)) < 0 ||
        (r = kp_obj_opt_object(t, "namespaceSelector", &nssel)) < 0 ||
        (r = kp_obj_opt_array(t, "namespaces", &nss)) < 0 ||
        (r = kp_json_get_str(t, "topologyKey", &key)) < 0 ||
        (r = kp_obj_label_selector(sel, p, &x->selector)) < 0 ||
        (r = kp_obj_label_selector(nssel, p, &x->ns_selector)) < 0 ||
        (r = kp_obj_strings(nss, p, &x->namespaces, &x->n_namespaces)) < 0)
        return r == -ENOENT ? -KP_EPARSE : r;
    x->topology_key = kp_pack_str(p, key);
    x->weight = weight;
    return 0;
}

/* Required terms are PodAffinityTerm objects; preferred ones wrap one with a weight. */
static int kp_pod_terms(const json_t *arr, bool preferred, struct kp_pack *p,
                        const struct kp_pod_term **ret, size_t *ret_n)
{
    size_t n = kp_json_array_size(arr);
    struct kp_pod_term *terms = kp_pack_array(p, n, sizeof(*terms)), scratch = {0};
    int r;

    for (size_t i = 0; i < n; i++) {
        const json_t *t = kp_json_array_at(arr, i);
        int32_t weight = 0;
        json_t *inner = NULL;

        if (preferred) {
            if ((r = kp_json_get_object(t, "podAffinityTerm", &inner)) < 0 ||
                (r = kp_obj_opt_int32(t, "weight", 0, &weight)) < 0)
                return -KP_EPARSE;
            t = inner;
        }
        r = kp_pod_term(t, weight, p, terms ? &terms[i] : &scratch);
        if (r < 0)
            return r;
    }
    *ret = terms;
    *ret_n = n;
    return 0;
}

static int kp_pod_affinity(const json_t *pa, struct kp_pack *p, const struct kp_pod_term **req,
                           size_t *n_req, const struct kp_pod_term **pref, size_t *n_pref)
{
    json_t *a, *b;
    int r;

    if ((r = kp_obj_opt_array(pa, "requiredDuringSchedulingIgnoredDuringExecution", &a)) < 0 ||
        (r = kp_obj_opt_array(pa, "preferredDuringSchedulingIgnoredDuringExecution", &b)) < 0 ||
        (r = kp_pod_terms(a, false, p, req, n_req)) < 0 ||
        (r = kp_pod_terms(b, true, p, pref, n_pref)) < 0)
        return r;
    return 0;
}

static int kp_pod_spread(const json_t *arr, struct kp_pack *p, struct kp_pod_view *v)
{
    size_t n = kp_json_array_size(arr);
    struct kp_spread *s = kp_pack_array(p, n, sizeof(*s)), scratch = {0};
    int r;

    for (size_t i = 0; i < n; i++) {
        const json_t *c = kp_json_array_at(arr, i);
        struct kp_spread *x = s ? &s[i] : &scratch;
        const char *key, *when, *nap = NULL, *ntp = NULL;
        json_t *sel, *mlk;

        if ((r = kp_json_get_str(c, "topologyKey", &key)) < 0 ||
            (r = kp_json_get_str(c, "whenUnsatisfiable", &when)) < 0 ||
            (r = kp_obj_opt_int32(c, "maxSkew", 1, &x->max_skew)) < 0 ||
            (r = kp_obj_opt_int32(c, "minDomains", 0, &x->min_domains)) < 0 ||
            (r = kp_obj_opt_object(c, "labelSelector", &sel)) < 0 ||
            (r = kp_obj_opt_array(c, "matchLabelKeys", &mlk)) < 0 ||
            (r = kp_obj_label_selector(sel, p, &x->selector)) < 0 ||
            (r = kp_obj_strings(mlk, p, &x->match_label_keys, &x->n_match_label_keys)) < 0)
            return r == -ENOENT ? -KP_EPARSE : r;
        r = kp_json_get_str(c, "nodeAffinityPolicy", &nap);
        if (r < 0 && r != -ENOENT)
            return r;
        r = kp_json_get_str(c, "nodeTaintsPolicy", &ntp);
        if (r < 0 && r != -ENOENT)
            return r;
        x->do_not_schedule = strcmp(when, "DoNotSchedule") == 0;
        x->honor_node_affinity = !nap || strcmp(nap, "Honor") == 0;
        x->honor_node_taints = ntp && strcmp(ntp, "Honor") == 0;
        x->topology_key = kp_pack_str(p, key);
    }
    v->spread = s;
    v->n_spread = n;
    return 0;
}

static int kp_pod_pvcs(const json_t *vols, struct kp_pack *p, struct kp_pod_view *v)
{
    size_t n = 0, total = kp_json_array_size(vols), k = 0;
    const char **names, *scratch = NULL;

    for (size_t i = 0; i < total; i++)
        if (kp_json_pathv_str(kp_json_array_at(vols, i),
                              KP_JSON_PATH("persistentVolumeClaim", "claimName"), &scratch) == 0)
            n++;
    names = kp_pack_array(p, n, sizeof(*names));
    for (size_t i = 0; i < total && k < n; i++) {
        const char *claim;

        if (kp_json_pathv_str(kp_json_array_at(vols, i),
                              KP_JSON_PATH("persistentVolumeClaim", "claimName"), &claim) < 0)
            continue;
        *(names ? &names[k] : &scratch) = kp_pack_str(p, claim);
        k++;
    }
    v->pvc_claims = names;
    v->n_pvc_claims = n;
    return 0;
}

static enum kp_pod_phase kp_pod_phase_of(const char *s)
{
    if (!s || strcmp(s, "Pending") == 0)
        return KP_POD_PENDING;
    if (strcmp(s, "Running") == 0)
        return KP_POD_RUNNING;
    if (strcmp(s, "Succeeded") == 0)
        return KP_POD_SUCCEEDED;
    if (strcmp(s, "Failed") == 0)
        return KP_POD_FAILED;
    return KP_POD_UNKNOWN;
}

/* --- shared shapes ---------------------------------------------------------------------------
 * The spec-derived part of a pod (everything but nodeName and the PVC names) is the same for
 * every pod of a ReplicaSet, DaemonSet or Job template. It is projected into a "shape" entry
 * of its own, and identical shapes are shared: the pod's view fields point into the one shape
 * its entry holds a reference on. The table below finds a shape by its content fingerprint
 * (kp_pack_finish's keyed SipHash, the same equality the store trusts to skip updates; a
 * collision among the shapes of a cluster, ~2^-64 per pair, is accepted as the store accepts
 * it). It holds no references: a shape leaves it when its last pod goes. */

static const char kp_kind_pod_shape[] = "PodShape";

static pthread_mutex_t kp_shapes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kp_map *kp_shapes; /* hash hex -> shape entry; NULL while empty */
static size_t kp_shapes_bytes;

static void kp_shape_key(const struct kp_entry *e, char key[17])
{
    static const char hex[] = "0123456789abcdef";

    for (int i = 0; i < 16; i++)
        key[i] = hex[(e->hash >> (60 - 4 * i)) & 0xf];
    key[16] = '\0';
}

static void kp_shape_destroy(struct kp_entry *e)
{
    char key[17];

    kp_shape_key(e, key);
    pthread_mutex_lock(&kp_shapes_lock);
    if (kp_shapes && kp_map_get(kp_shapes, key) == e)
        (void)kp_map_remove(kp_shapes, key);
    kp_shapes_bytes -= e->bytes;
    if (kp_shapes && kp_map_size(kp_shapes) == 0)
        kp_shapes = kp_map_free(kp_shapes); /* nothing cached: nothing allocated */
    pthread_mutex_unlock(&kp_shapes_lock);
    kp_free(e);
}

/* A reference on e unless its last one is being dropped right now. */
static bool kp_shape_try_ref(struct kp_entry *e)
{
    unsigned n = atomic_load(&e->refs);

    while (n != 0)
        if (atomic_compare_exchange_weak(&e->refs, &n, n + 1))
            return true;
    return false;
}

void kp_pod_shapes_stats(size_t *ret_count, size_t *ret_bytes)
{
    pthread_mutex_lock(&kp_shapes_lock);
    *ret_count = kp_shapes ? kp_map_size(kp_shapes) : 0;
    *ret_bytes = kp_shapes_bytes;
    pthread_mutex_unlock(&kp_shapes_lock);
}

/* Whether the array at key of obj (absent: no) has an element; a wrong type is -KP_EPARSE. */
static int kp_nonempty_array(const json_t *obj, const char *key, bool *ret)
{
    json_t *arr;
    int r;

    if ((r = kp_obj_opt_array(obj, key, &arr)) < 0)
        return r;
    *ret = kp_json_array_size(arr) > 0;
    return 0;
}

int kp_pod_spec_dra(const json_t *spec, bool *ret)
{
    static const char *const lists[] = {"initContainers", "containers"};
    bool any = false;
    int r;

    if ((r = kp_nonempty_array(spec, "resourceClaims", &any)) < 0)
        return r;
    for (size_t l = 0; l < KP_ARRAY_SIZE(lists) && !any; l++) {
        json_t *arr;

        if ((r = kp_obj_opt_array(spec, lists[l], &arr)) < 0)
            return r;
        for (size_t i = 0; i < kp_json_array_size(arr) && !any; i++) {
            json_t *res;

            if ((r = kp_obj_opt_object(kp_json_array_at(arr, i), "resources", &res)) < 0 ||
                (r = kp_nonempty_array(res, "claims", &any)) < 0)
                return r;
        }
    }
    *ret = any;
    return 0;
}

/* The spec-derived fields, into v (a whole pod view; a shape uses only these fields). */
static int kp_pod_spec_fill(const json_t *spec, struct kp_pack *p, struct kp_pod_view *v)
{
    json_t *ns_sel, *tol, *affinity, *na, *pa, *paa, *spread;
    const char *sched = NULL, *pc = NULL;
    int64_t grace = 30;
    bool host_net = false, dra = false;
    int r;

    if ((r = kp_obj_opt_str(spec, "schedulerName", &sched)) < 0 ||
        (r = kp_obj_opt_str(spec, "priorityClassName", &pc)) < 0 ||
        (r = kp_obj_opt_int32(spec, "priority", 0, &v->priority)) < 0)
        return r;
    r = kp_json_get_int(spec, "terminationGracePeriodSeconds", &grace);
    if (r < 0 && r != -ENOENT)
        return r;
    v->grace_seconds = grace;
    r = kp_json_get_bool(spec, "hostNetwork", &host_net);
    if (r < 0 && r != -ENOENT)
        return r;
    v->flags = host_net ? KP_POD_HOST_NETWORK : 0;
    if ((r = kp_pod_spec_dra(spec, &dra)) < 0)
        return r;
    if (dra)
        v->flags |= KP_POD_DRA;
    v->scheduler_name = kp_pack_str(p, sched);
    v->priority_class = kp_pack_str(p, pc && *pc ? pc : NULL);
    if ((r = kp_pod_spec_requests(spec, p, &v->requests)) < 0 ||
        (r = kp_pod_spec_limits(spec, p, &v->limits)) < 0 ||
        (r = kp_pod_spec_host_ports(spec, p, &v->host_ports, &v->n_host_ports)) < 0)
        return r;
    if ((r = kp_obj_opt_object(spec, "nodeSelector", &ns_sel)) < 0 ||
        (r = kp_obj_labels(ns_sel, NULL, p, &v->node_selector)) < 0)
        return r;
    if ((r = kp_obj_opt_array(spec, "tolerations", &tol)) < 0 ||
        (r = kp_obj_tolerations(tol, p, &v->tolerations)) < 0)
        return r;
    if ((r = kp_obj_opt_object(spec, "affinity", &affinity)) < 0 ||
        (r = kp_obj_opt_object(affinity, "nodeAffinity", &na)) < 0 ||
        (r = kp_obj_opt_object(affinity, "podAffinity", &pa)) < 0 ||
        (r = kp_obj_opt_object(affinity, "podAntiAffinity", &paa)) < 0 ||
        (r = kp_node_affinity(na, p, v)) < 0 ||
        (r = kp_pod_affinity(pa, p, &v->affinity, &v->n_affinity, &v->preferred_affinity,
                             &v->n_preferred_affinity)) < 0 ||
        (r = kp_pod_affinity(paa, p, &v->anti_affinity, &v->n_anti_affinity,
                             &v->preferred_anti_affinity, &v->n_preferred_anti_affinity)) < 0)
        return r;
    if ((r = kp_obj_opt_array(spec, "topologySpreadConstraints", &spread)) < 0 ||
        (r = kp_pod_spread(spread, p, v)) < 0)
        return r;
    return 0;
}

static int kp_pod_shape_fill(const json_t *spec, struct kp_pack *p, void *view)
{
    struct kp_pod_view *v = view;

    kp_pack_entry(p, &v->e, NULL, "pod-shape", NULL, NULL);
    return kp_pod_spec_fill(spec, p, v);
}

/* The shared shape of spec: an equal one already cached, or a new one now cached. *ret is a
 * new reference. 0, -ENOMEM, or the projection's errors. */
static int kp_pod_shape_get(const json_t *spec, struct kp_entry **ret)
{
    struct kp_entry *e = NULL, *have;
    char key[17];
    int r;

    r = kp_obj_project(spec, kp_kind_pod_shape, sizeof(struct kp_pod_view), kp_pod_shape_fill, &e);
    if (r < 0)
        return r;
    kp_shape_key(e, key);
    pthread_mutex_lock(&kp_shapes_lock);
    have = kp_shapes ? kp_map_get(kp_shapes, key) : NULL;
    if (have && kp_shape_try_ref(have)) {
        pthread_mutex_unlock(&kp_shapes_lock);
        kp_free(e); /* never shared: a plain block */
        *ret = have;
        return 0;
    }
    if ((!kp_shapes && kp_map_new(&kp_shapes) < 0) || kp_map_put(kp_shapes, key, e, NULL) < 0) {
        if (kp_shapes && kp_map_size(kp_shapes) == 0)
            kp_shapes = kp_map_free(kp_shapes);
        pthread_mutex_unlock(&kp_shapes_lock);
        kp_free(e);
        return -ENOMEM;
    }
    e->destroy = kp_shape_destroy;
    kp_shapes_bytes += e->bytes;
    pthread_mutex_unlock(&kp_shapes_lock);
    *ret = e;
    return 0;
}

/* A pod entry drops its shape with itself. */
static void kp_pod_destroy(struct kp_entry *e)
{
    struct kp_pod_view *v = (struct kp_pod_view *)e;

    kp_entry_unref(v->shape);
    kp_free(e);
}

/* Points v's spec-derived fields at shape's (fields only: the flags are merged). */
static void kp_pod_take_shape(struct kp_pod_view *v, struct kp_entry *shape)
{
    const struct kp_pod_view *sv = (const struct kp_pod_view *)shape;

    v->shape = shape;
    v->scheduler_name = sv->scheduler_name;
    v->priority_class = sv->priority_class;
    v->priority = sv->priority;
    v->grace_seconds = sv->grace_seconds;
    v->flags |= sv->flags;
    v->requests = sv->requests;
    v->limits = sv->limits;
    v->host_ports = sv->host_ports;
    v->n_host_ports = sv->n_host_ports;
    v->node_selector = sv->node_selector;
    v->tolerations = sv->tolerations;
    v->required = sv->required;
    v->n_required = sv->n_required;
    v->preferred = sv->preferred;
    v->n_preferred = sv->n_preferred;
    v->affinity = sv->affinity;
    v->n_affinity = sv->n_affinity;
    v->anti_affinity = sv->anti_affinity;
    v->n_anti_affinity = sv->n_anti_affinity;
    v->preferred_affinity = sv->preferred_affinity;
    v->n_preferred_affinity = sv->n_preferred_affinity;
    v->preferred_anti_affinity = sv->preferred_anti_affinity;
    v->n_preferred_anti_affinity = sv->n_preferred_anti_affinity;
    v->spread = sv->spread;
    v->n_spread = sv->n_spread;
}

/* Whether any owner reference has exactly this apiVersion and kind (Karpenter's IsOwnedBy). */
static bool kp_owned_by(const struct kp_owner_refs *o, const char *api_version, const char *kind)
{
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->v[i].api_version, api_version) == 0 && strcmp(o->v[i].kind, kind) == 0)
            return true;
    return false;
}

static int kp_pod_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_pod_view *v = view;
    json_t *spec, *status = NULL, *annotations = NULL, *vols, *conds;
    const char *node = NULL, *phase = NULL, *nominated = NULL, *s;
    const char *dnd = NULL;
    const struct kp_owner_ref *ctl;
    struct kp_resources resized = {0};
    bool have_resized = false;
    struct kp_conditions cv;
    int r;

    if ((r = kp_obj_meta(obj, true, p, &v->e, &v->meta)) < 0)
        return r;
    if (kp_json_get_object(obj, "spec", &spec) < 0)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_object(obj, "status", &status)) < 0 ||
        (r = kp_json_path_object(obj, "metadata.annotations", &annotations)) < -ENOENT)
        return r;
    if ((r = kp_obj_opt_str(spec, "nodeName", &node)) < 0 ||
        (r = kp_obj_opt_str(status, "phase", &phase)) < 0 ||
        (r = kp_obj_opt_str(status, "nominatedNodeName", &nominated)) < 0 ||
        (r = kp_obj_time(status, "startTime", &v->start_usec)) < 0)
        return r;
    v->phase = kp_pod_phase_of(phase);
    v->node_name = kp_pack_str(p, node && *node ? node : NULL);

    /* Conditions are read, not kept: only two facts of them matter. */
    v->flags = 0;
    if ((r = kp_obj_opt_array(status, "conditions", &conds)) < 0)
        return r;
    {
        struct kp_pack probe;

        kp_pack_init(&probe, 0); /* sizing-only pack: reads without storing */
        if ((r = kp_obj_conditions(conds, &probe, &cv)) < 0)
            return r;
    }
    for (size_t i = 0; i < kp_json_array_size(conds); i++) {
        const json_t *c = kp_json_array_at(conds, i);
        const char *type = NULL, *st = NULL, *reason = NULL;

        if (kp_obj_opt_str(c, "type", &type) < 0 || kp_obj_opt_str(c, "status", &st) < 0 ||
            kp_obj_opt_str(c, "reason", &reason) < 0)
            return -KP_EPARSE;
        if (!type || !st)
            continue;
        if (strcmp(type, "PodScheduled") == 0 && strcmp(st, "False") == 0 && reason &&
            strcmp(reason, "Unschedulable") == 0)
            v->flags |= KP_POD_UNSCHEDULABLE;
        if (strcmp(type, "Ready") == 0 && strcmp(st, "True") == 0)
            v->flags |= KP_POD_READY;
        if (strcmp(type, "Ready") == 0 && strcmp(st, "False") == 0)
            v->flags |= KP_POD_READY_FALSE;
    }
    if (annotations) {
        r = kp_json_get_str(annotations, "karpenter.sh/do-not-disrupt", &dnd);
        if (r < 0 && r != -ENOENT)
            return -KP_EPARSE;
        if (kp_json_get_str(annotations, "kubernetes.io/config.mirror", &s) == 0)
            v->flags |= KP_POD_MIRROR;
    }
    v->do_not_disrupt = kp_pack_str(p, dnd);
    v->do_not_disrupt_ns = 0;
    if (dnd && strcmp(dnd, "true") == 0) {
        v->flags |= KP_POD_DO_NOT_DISRUPT;
    } else if (dnd) {
        int64_t ns;

        /* Since Karpenter v1.12 a positive Go duration protects for that long after start. */
        if (kp_duration_parse(dnd, strlen(dnd), &ns) == 0 && ns > 0)
            v->do_not_disrupt_ns = ns;
    }
    if (nominated && *nominated)
        v->flags |= KP_POD_PREEMPTING;
    /* Arrays exist only in the copying pass; flags and pointers into them do not change the
     * size. */
    if (!kp_pack_sizing(p)) {
        if (kp_owned_by(&v->meta.owners, "apps/v1", "DaemonSet"))
            v->flags |= KP_POD_DAEMONSET;
        if (kp_owned_by(&v->meta.owners, "apps/v1", "StatefulSet"))
            v->flags |= KP_POD_STATEFULSET;
        if (kp_owned_by(&v->meta.owners, "v1", "Node"))
            v->flags |= KP_POD_NODE_OWNED;
        ctl = kp_owner_refs_controller(&v->meta.owners);
        v->owner_kind = ctl ? ctl->kind : NULL;
        v->owner_name = ctl ? ctl->name : NULL;
    }
    /* PVC names stay with the pod: a StatefulSet's pods differ in them alone. */
    if ((r = kp_obj_opt_array(spec, "volumes", &vols)) < 0 || (r = kp_pod_pvcs(vols, p, v)) < 0)
        return r;
    if ((r = kp_pod_resize_requests(spec, status, p, &resized, &have_resized)) < 0)
        return r;

    /* Last, so nothing can fail after the shape is taken: the sizing pass only validates the
     * spec (into a scratch view), the copying pass shares or makes the shape. */
    if (kp_pack_sizing(p)) {
        struct kp_pod_view scratch;
        struct kp_pack probe;

        memset(&scratch, 0, sizeof(scratch));
        kp_pack_init(&probe, 0);
        return kp_pod_spec_fill(spec, &probe, &scratch);
    } else {
        struct kp_entry *shape = NULL;

        if ((r = kp_pod_shape_get(spec, &shape)) < 0)
            return r;
        kp_pod_take_shape(v, shape);
        v->e.destroy = kp_pod_destroy;
        if (have_resized)
            v->requests = resized; /* the pod's own, in its block */
    }
    return 0;
}

int kp_pod_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_pod, sizeof(struct kp_pod_view), kp_pod_fill, ret);
}

int kp_pod_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_pod, sizeof(struct kp_pod_view), kp_pod_fill, ret);
}

bool kp_pod_provisionable(const struct kp_pod_view *p)
{
    return (p->flags & KP_POD_UNSCHEDULABLE) && !p->node_name && !(p->flags & KP_POD_PREEMPTING) &&
           !(p->flags & (KP_POD_DAEMONSET | KP_POD_NODE_OWNED));
}

bool kp_pod_reschedulable(const struct kp_pod_view *p)
{
    return (kp_pod_active(p) || ((p->flags & KP_POD_STATEFULSET) && kp_pod_terminating(p))) &&
           !(p->flags & (KP_POD_DAEMONSET | KP_POD_NODE_OWNED));
}

bool kp_pod_do_not_disrupt_active(const struct kp_pod_view *p, int64_t now_usec)
{
    if (p->flags & KP_POD_DO_NOT_DISRUPT)
        return true;
    if (p->do_not_disrupt_ns <= 0)
        return false; /* absent, or a value Karpenter ignores */
    if (!p->start_usec)
        return true; /* no start time: fail safe */
    return (now_usec - p->start_usec) < p->do_not_disrupt_ns / KP_NSEC_PER_USEC;
}
