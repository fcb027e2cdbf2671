/* DESIGN: Pod projection.
 *
 * What the controllers need of a pod: where it runs or wants to run (nodeName, nodeSelector,
 * affinity, tolerations, topology spread, PVC names), what it costs (effective requests), and
 * what protects it from disruption (do-not-disrupt, owner, priority, grace period, phase and
 * readiness). Everything else — container images, env, probes, status details, managedFields —
 * is dropped, which is why a cached pod costs hundreds of bytes instead of kilobytes.
 *
 * Effective requests follow the scheduler: regular containers and restartable init containers
 * (sidecars) run together, and each ordinary init container runs alone next to the sidecars
 * started before it; the pod needs the larger of the two, per resource, plus its overhead. */
#include "k8s/obj-pod.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "json/json.h"
#include "k8s/quantity.h"

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

/* Adds (or with max, raises to) the quantities of a ResourceList object into a. */
static int kp_acc_merge(struct kp_acc *a, const json_t *list, bool max)
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

        if (kp_json_as_str(val, &s) < 0 ||
            kp_quantity_parse(s, strlen(s), KP_QUANTITY_ROUND_UP, &q) < 0)
            return -KP_EPARSE;
        slot = kp_acc_slot(a, k);
        if (!slot)
            return -KP_ELIMIT;
        if (max) {
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

/* The container's resources.requests object, or NULL. */
static int kp_container_requests(const json_t *c, json_t **ret)
{
    json_t *res = NULL, *req = NULL;
    int r;

    *ret = NULL;
    r = kp_json_get_object(c, "resources", &res);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    r = kp_json_get_object(res, "requests", &req);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    *ret = req;
    return 0;
}

int kp_pod_spec_requests(const json_t *spec, struct kp_pack *p, struct kp_resources *ret)
{
    struct kp_acc total = {0}, sidecars = {0}, init_max = {0};
    json_t *arr = NULL, *overhead = NULL, *req;
    struct kp_res *v, scratch = {0};
    size_t n;
    int r;

    r = kp_json_get_array(spec, "containers", &arr);
    if (r < 0)
        return -KP_EPARSE;
    n = kp_json_array_size(arr);
    for (size_t i = 0; i < n; i++) {
        if ((r = kp_container_requests(kp_json_array_at(arr, i), &req)) < 0 ||
            (r = kp_acc_merge(&total, req, false)) < 0)
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
        struct kp_acc step = {0};

        if ((r = kp_container_requests(c, &req)) < 0)
            return r;
        r = kp_json_get_str(c, "restartPolicy", &policy);
        if (r < 0 && r != -ENOENT)
            return r;
        if (policy && strcmp(policy, "Always") == 0) {
            /* A sidecar keeps running beside everything after it. */
            if ((r = kp_acc_merge(&total, req, false)) < 0 ||
                (r = kp_acc_merge(&sidecars, req, false)) < 0 ||
                (r = kp_acc_merge_acc(&init_max, &sidecars, true)) < 0)
                return r;
        } else {
            if ((r = kp_acc_merge(&step, req, false)) < 0 ||
                (r = kp_acc_merge_acc(&step, &sidecars, false)) < 0 ||
                (r = kp_acc_merge_acc(&init_max, &step, true)) < 0)
                return r;
        }
    }
    if ((r = kp_acc_merge_acc(&total, &init_max, true)) < 0)
        return r;
    r = kp_json_get_object(spec, "overhead", &overhead);
    if (r < 0 && r != -ENOENT)
        return r;
    if ((r = kp_acc_merge(&total, overhead, false)) < 0)
        return r;

    v = kp_pack_array(p, total.n, sizeof(*v));
    for (size_t i = 0; i < total.n; i++) {
        struct kp_res *x = v ? &v[i] : &scratch;

        x->name = kp_pack_str(p, total.name[i]);
        x->milli = total.v[i];
    }
    *ret = (struct kp_resources){.v = v, .n = total.n};
    return 0;
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

static int kp_pod_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_pod_view *v = view;
    json_t *spec, *status = NULL, *annotations = NULL, *ns_sel, *tol, *affinity, *na, *pa, *paa,
                  *spread, *vols, *conds;
    const char *node = NULL, *sched = NULL, *pc = NULL, *phase = NULL, *s;
    const struct kp_owner_ref *ctl;
    struct kp_conditions cv;
    int64_t grace = 30;
    bool host_net = false;
    int r;

    if ((r = kp_obj_meta(obj, true, p, &v->e, &v->meta)) < 0)
        return r;
    if (kp_json_get_object(obj, "spec", &spec) < 0)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_object(obj, "status", &status)) < 0 ||
        (r = kp_json_path_object(obj, "metadata.annotations", &annotations)) < -ENOENT)
        return r;
    if ((r = kp_obj_opt_str(spec, "nodeName", &node)) < 0 ||
        (r = kp_obj_opt_str(spec, "schedulerName", &sched)) < 0 ||
        (r = kp_obj_opt_str(spec, "priorityClassName", &pc)) < 0 ||
        (r = kp_obj_opt_str(status, "phase", &phase)) < 0)
        return r;
    if ((r = kp_obj_opt_int32(spec, "priority", 0, &v->priority)) < 0)
        return r;
    r = kp_json_get_int(spec, "terminationGracePeriodSeconds", &grace);
    if (r < 0 && r != -ENOENT)
        return r;
    v->grace_seconds = grace;
    r = kp_json_get_bool(spec, "hostNetwork", &host_net);
    if (r < 0 && r != -ENOENT)
        return r;
    v->phase = kp_pod_phase_of(phase);
    v->node_name = kp_pack_str(p, node && *node ? node : NULL);
    v->scheduler_name = kp_pack_str(p, sched);
    v->priority_class = kp_pack_str(p, pc && *pc ? pc : NULL);

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
    }
    if (annotations) {
        if (kp_json_get_str(annotations, "karpenter.sh/do-not-disrupt", &s) == 0 &&
            strcmp(s, "true") == 0)
            v->flags |= KP_POD_DO_NOT_DISRUPT;
        if (kp_json_get_str(annotations, "kubernetes.io/config.mirror", &s) == 0)
            v->flags |= KP_POD_MIRROR;
    }
    /* Arrays exist only in the copying pass; the flag does not change the size. */
    ctl = kp_pack_sizing(p) ? NULL : kp_owner_refs_controller(&v->meta.owners);
    if (ctl && strcmp(ctl->kind, "DaemonSet") == 0)
        v->flags |= KP_POD_DAEMONSET;
    if (host_net)
        v->flags |= KP_POD_HOST_NETWORK;

    if ((r = kp_pod_spec_requests(spec, p, &v->requests)) < 0)
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
    if ((r = kp_obj_opt_array(spec, "volumes", &vols)) < 0 || (r = kp_pod_pvcs(vols, p, v)) < 0)
        return r;
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
