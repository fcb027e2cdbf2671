/* DESIGN: karpenter.sh/v1 NodePool and NodeClaim projections, and CRD-rule validation.
 *
 * What: the fields the core reads of the two Karpenter kinds (the same karpenter.sh/v1 CRDs as
 * upstream, so a user's NodePool YAML works unchanged), packed into one entry each (api/obj.h), and
 * validators that repeat the CRD's OpenAPI and CEL rules plus Karpenter's runtime checks of labels,
 * taints and requirements.
 *
 * Why lenient projection plus a separate validator: the API server enforces the CRD at write
 * time, but an object can predate the CRD we ship (written under another Karpenter's CRD, or
 * before an upgrade tightened a pattern). Refusing to project it would make it invisible, and
 * the controller could then neither skip it visibly nor tell the user why; upstream instead
 * reports such a NodePool ValidationSucceeded=False. So the projection refuses only what a typed
 * client could not decode (wrong JSON types, bad quantities or timestamps), and keeps the text of
 * pattern-governed fields for the validator to quote.
 *
 * Kept: NodePool template (labels, annotations, taints, startupTaints, requirements with
 * minValues, nodeClassRef, expireAfter, terminationGracePeriod), disruption (policy,
 * consolidateAfter, budgets), limits, weight, replicas, status conditions/resources/nodes; its
 * own annotations only in the karpenter.sh/ domain (the nodepool-hash for drift). NodeClaim:
 * labels, annotations (all but kubectl's last-applied copy: they are merged onto the Node),
 * finalizers, the whole spec, and status identity, capacity, conditions and lastPodEventTime.
 * Dropped: managedFields, condition messages and observedGenerations (a re-stamp of the same
 * condition must not change the fingerprint), everything else.
 *
 * Invariants: fill functions decide the same way in both pack passes (k8s/store.h) and write
 * members one by one (api/obj.h). Threads: pure; any thread. */
#include "api/obj-karpenter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/alloc.h"
#include "base/err.h"
#include "base/str.h"
#include "json/json.h"
#include "api/obj-karpenter.h"

#define KP_VALID_MAX_LINE 512u

/* --- validation reports ---------------------------------------------------------------------- */

void kp_valid_init(struct kp_valid *c, struct kp_buf *msg)
{
    c->msg = msg;
    c->count = 0;
    c->err = 0;
}

void kp_valid_add(struct kp_valid *c, const char *fmt, ...)
{
    const char *text;
    char *line = NULL;
    va_list ap;
    int r;

    c->count++;
    if (!c->msg || c->err || c->count > KP_VALID_MAX_LINES)
        return;
    va_start(ap, fmt);
    kp_msg_setv(&line, fmt, ap);
    va_end(ap);
    if (!line) {
        c->err = -ENOMEM;
        return;
    }
    text = line;
    if (strlen(line) > KP_VALID_MAX_LINE) /* every quote is cut short, so only a bug gets here */
        text = "(a problem whose description is too long to show)";
    r = kp_buf_puts(c->msg, text);
    if (r == 0)
        r = kp_buf_putc(c->msg, '\n');
    if (r < 0)
        c->err = r;
    kp_free(line);
}

void kp_valid_resources(struct kp_valid *c, const char *path, const struct kp_resources *r)
{
    for (size_t i = 0; i < r->n_bad; i++)
        kp_valid_add(
            c,
            "%s.%.63s: \"%.63s\" is more than kpssh can hold: amounts must be at most " KP_RES_HOLD_MAX_TEXT
            " (%lld) in size (kpssh counts in 64-bit milli-units)",
            path, r->bad[i].name, r->bad[i].value, (long long)KP_RES_HOLD_MAX_UNITS);
}

int kp_valid_end(struct kp_valid *c)
{
    int r;

    if (c->err)
        return c->err;
    if (c->msg && c->count > KP_VALID_MAX_LINES) {
        r = kp_buf_printf(c->msg, "... and %u more problems\n", c->count - KP_VALID_MAX_LINES);
        if (r < 0)
            return r;
    }
    return (int)KP_MIN(c->count, (unsigned)INT32_MAX);
}

static bool empty(const char *s)
{
    return !s || !*s;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool kp_valid_duration(const char *s, bool nillable)
{
    size_t i = 0;

    if (nillable && strcmp(s, "Never") == 0)
        return true;
    if (!*s)
        return false;
    while (s[i]) {
        size_t start = i;

        while (is_digit(s[i]))
            i++;
        if (i == start || (s[i] != 's' && s[i] != 'm' && s[i] != 'h'))
            return false;
        i++;
    }
    return true;
}

bool kp_valid_ip(const char *s)
{
    unsigned char buf[16];

    if (inet_pton(AF_INET, s, buf) == 1)
        return true;
    /* CEL's isIP() (Go's netip) refuses zones and IPv4-mapped IPv6 literals; inet_pton refuses
     * zones already, and dotted quads inside an IPv6 literal are the mapped form. */
    if (strchr(s, '.'))
        return false;
    return inet_pton(AF_INET6, s, buf) == 1;
}

bool kp_valid_qualified_name(const char *s)
{
    return kp_label_validate_key(s, strlen(s), /* ret_msg= */ NULL) == 0;
}

/* ^((100|[0-9]{1,2})%|[0-9]+)$ */
static bool valid_budget_nodes(const char *s)
{
    size_t n = strlen(s), i;

    if (n == 0)
        return false;
    if (s[n - 1] == '%') {
        if (n - 1 == 3)
            return memcmp(s, "100", 3) == 0;
        if (n - 1 < 1 || n - 1 > 2)
            return false;
        n--;
    }
    for (i = 0; i < n; i++)
        if (!is_digit(s[i]))
            return false;
    return true;
}

/* ^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$: hours and minutes only, as Go prints them. */
static bool valid_budget_duration(const char *s)
{
    size_t n = strlen(s), i = 0, units = 0;
    char last = 0;

    if (n >= 2 && kp_endswith(s, "0s"))
        n -= 2;
    if (n == 0)
        return false;
    while (i < n) {
        size_t start = i;

        while (i < n && is_digit(s[i]))
            i++;
        if (i == start || i == n || (s[i] != 'h' && s[i] != 'm'))
            return false;
        if (last == s[i] || (last == 'm' && s[i] == 'h'))
            return false;
        last = s[i++];
        units++;
    }
    return units <= 2;
}

/* A cron macro or at least five whitespace-separated fields, which is what the CRD's pattern
 * accepts; the disruption controller's cron parser is the full check. */
static bool valid_schedule(const char *s)
{
    static const char *const macros[] = {"@annually", "@yearly",   "@monthly", "@weekly",
                                         "@daily",    "@midnight", "@hourly"};
    size_t fields = 0;
    bool in = false;

    for (size_t i = 0; i < KP_ARRAY_SIZE(macros); i++)
        if (strcmp(s, macros[i]) == 0)
            return true;
    for (; *s; s++) {
        bool space = *s == ' ' || *s == '\t';

        if (!space && !in)
            fields++;
        in = !space;
    }
    return fields >= 5;
}

/* --- decoding -------------------------------------------------------------------------------- */

static bool keep_karpenter_annotation(const char *key)
{
    return kp_startswith(key, "karpenter.sh/") != NULL;
}

static bool keep_annotation(const char *key)
{
    return strcmp(key, "kubectl.kubernetes.io/last-applied-configuration") != 0;
}

/* Member by member (api/obj.h: no struct assignment into the block). */
static void duration_set(struct kp_obj_duration *d, const char *text, bool valid, bool never,
                         int64_t ns)
{
    d->text = text;
    d->valid = valid;
    d->never = never;
    d->ns = ns;
}

static int obj_duration(const json_t *obj, const char *key, bool nillable, struct kp_pack *p,
                        struct kp_obj_duration *ret)
{
    struct kp_duration_nillable d = {0};
    const char *s = NULL;
    int r;

    if ((r = kp_obj_opt_str(obj, key, &s)) < 0)
        return r;
    if (!s) {
        duration_set(ret, NULL, true, false, 0);
        return 0;
    }
    if (nillable)
        r = kp_duration_parse_nillable(s, strlen(s), &d);
    else
        r = kp_duration_parse(s, strlen(s), &d.ns);
    if (r < 0)
        d = (struct kp_duration_nillable){0};
    duration_set(ret, kp_pack_str(p, s), r == 0, d.never, d.ns);
    return 0;
}

static int obj_nodeclass_ref(const json_t *spec, struct kp_pack *p, struct kp_nodeclass_ref *ret)
{
    const char *g = NULL, *k = NULL, *n = NULL;
    json_t *ref = NULL;
    int r;

    if ((r = kp_obj_opt_object(spec, "nodeClassRef", &ref)) < 0 ||
        (r = kp_obj_opt_str(ref, "group", &g)) < 0 || (r = kp_obj_opt_str(ref, "kind", &k)) < 0 ||
        (r = kp_obj_opt_str(ref, "name", &n)) < 0)
        return r;
    ret->group = kp_pack_str(p, g);
    ret->kind = kp_pack_str(p, k);
    ret->name = kp_pack_str(p, n);
    return 0;
}

/* Requirements, or the reason the CRD would refuse them (see kp_nodeclaim_spec). The selector
 * is built once more than kp_obj_node_requirements() needs, to catch its message; NodePools are
 * few and NodeClaims change rarely, so the second build is cheap where it happens. */
static int obj_requirements(const json_t *arr, const char *path, struct kp_pack *p,
                            struct kp_reqs *ret, const char **ret_error)
{
    struct kp_selector_error err = {0};
    struct kp_selector *s = NULL;
    char text[320]; /* our path and a static message of selector.c: no outside bytes */
    int r;

    *ret_error = NULL;
    if (arr && kp_json_typeof(arr) != KP_JSON_NULL) {
        r = kp_selector_from_node_requirements(arr, &s, &err);
        kp_selector_free(s);
        if (r == -EINVAL || r == -KP_ELIMIT) {
            (void)snprintf(text, sizeof(text), "%s[%zu]: %s", path, err.pos,
                           err.msg ? err.msg : "invalid requirement");
            *ret_error = kp_pack_str(p, text);
            return kp_obj_node_requirements(NULL, p, ret);
        }
        if (r < 0)
            return r == -ENOMEM ? r : -KP_EPARSE;
    }
    return kp_obj_node_requirements(arr, p, ret);
}

static int obj_claim_spec(const json_t *spec, const char *reqs_path, struct kp_pack *p,
                          struct kp_nodeclaim_spec *ret)
{
    json_t *reqs = NULL, *taints = NULL, *startup = NULL;
    int r;

    if ((r = obj_nodeclass_ref(spec, p, &ret->node_class_ref)) < 0 ||
        (r = kp_obj_opt_array(spec, "requirements", &reqs)) < 0 ||
        (r = obj_requirements(reqs, reqs_path, p, &ret->requirements, &ret->reqs_error)) < 0 ||
        (r = kp_obj_opt_array(spec, "taints", &taints)) < 0 ||
        (r = kp_obj_taints(taints, p, &ret->taints)) < 0 ||
        (r = kp_obj_opt_array(spec, "startupTaints", &startup)) < 0 ||
        (r = kp_obj_taints(startup, p, &ret->startup_taints)) < 0 ||
        (r = obj_duration(spec, "expireAfter", true, p, &ret->expire_after)) < 0 ||
        (r = obj_duration(spec, "terminationGracePeriod", false, p,
                          &ret->termination_grace_period)) < 0)
        return r;
    return 0;
}

static int obj_generation(const json_t *obj, int64_t *ret)
{
    int r = kp_json_path_int(obj, "metadata.generation", ret);

    if (r == -ENOENT) {
        *ret = 0;
        return 0;
    }
    return r;
}

static int obj_annotations(const json_t *obj, bool (*keep)(const char *), struct kp_pack *p,
                           struct kp_labels *ret)
{
    json_t *a = NULL;
    int r = kp_json_path_object(obj, "metadata.annotations", &a);

    if (r < 0 && r != -ENOENT)
        return r;
    return kp_obj_labels(a, keep, p, ret);
}

static int obj_int64(const json_t *obj, const char *key, int64_t dflt, int64_t *ret)
{
    int r;

    if (!obj) {
        *ret = dflt;
        return 0;
    }
    r = kp_json_get_int(obj, key, ret);
    if (r == -ENOENT) {
        *ret = dflt;
        return 0;
    }
    return r;
}

/* --- NodePool -------------------------------------------------------------------------------- */

static void budget_set(struct kp_budget *b, const char *nodes, const char *schedule,
                       const char *duration, uint32_t reasons)
{
    b->nodes = nodes;
    b->schedule = schedule;
    b->duration = duration;
    b->reasons = reasons;
}

static int obj_budgets(const json_t *disruption, struct kp_pack *p, struct kp_nodepool_view *v)
{
    struct kp_budget *bv, scratch = {0};
    json_t *arr = NULL;
    size_t n;
    int r;

    if ((r = kp_obj_opt_array(disruption, "budgets", &arr)) < 0)
        return r;
    v->budgets_set = arr != NULL;
    if (!arr) {
        bv = kp_pack_array(p, 1, sizeof(*bv));
        budget_set(bv ? bv : &scratch, kp_pack_str(p, "10%"), NULL, NULL, 0);
        v->budgets = bv;
        v->n_budgets = 1;
        return 0;
    }
    n = kp_json_array_size(arr);
    bv = kp_pack_array(p, n, sizeof(*bv));
    for (size_t i = 0; i < n; i++) {
        const json_t *b = kp_json_array_at(arr, i);
        const char *nodes = NULL, *sched = NULL, *dur = NULL;
        json_t *reasons = NULL;
        uint32_t bits = 0;

        if (kp_json_typeof(b) != KP_JSON_OBJECT)
            return -KP_EPARSE;
        if ((r = kp_obj_opt_str(b, "nodes", &nodes)) < 0 ||
            (r = kp_obj_opt_str(b, "schedule", &sched)) < 0 ||
            (r = kp_obj_opt_str(b, "duration", &dur)) < 0 ||
            (r = kp_obj_opt_array(b, "reasons", &reasons)) < 0)
            return r;
        for (size_t j = 0; j < kp_json_array_size(reasons); j++) {
            const char *s;

            if (kp_json_as_str(kp_json_array_at(reasons, j), &s) < 0)
                return -KP_EPARSE;
            if (strcmp(s, "Underutilized") == 0)
                bits |= KP_DISRUPT_UNDERUTILIZED;
            else if (strcmp(s, "Empty") == 0)
                bits |= KP_DISRUPT_EMPTY;
            else if (strcmp(s, "Drifted") == 0)
                bits |= KP_DISRUPT_DRIFTED;
            else if (strcmp(s, "Unhealthy") == 0)
                bits |= KP_DISRUPT_UNHEALTHY;
            else
                bits |= KP_DISRUPT_UNKNOWN;
        }
        budget_set(bv ? &bv[i] : &scratch, kp_pack_str(p, nodes ? nodes : "10%"),
                   kp_pack_str(p, sched), kp_pack_str(p, dur), bits);
    }
    v->budgets = bv;
    v->n_budgets = n;
    return 0;
}

static int kp_nodepool_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_nodepool_view *v = view;
    json_t *spec = NULL, *tmpl = NULL, *tmeta = NULL, *tspec = NULL, *x = NULL;
    json_t *disruption = NULL, *status = NULL;
    const char *policy = NULL;
    int32_t weight = 0;
    int r;

    if ((r = kp_obj_meta(obj, false, p, &v->e, &v->meta)) < 0 ||
        (r = obj_generation(obj, &v->generation)) < 0 ||
        (r = obj_annotations(obj, keep_karpenter_annotation, p, &v->annotations)) < 0)
        return r;
    if (kp_json_get_object(obj, "spec", &spec) < 0 ||
        kp_json_get_object(spec, "template", &tmpl) < 0)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_object(tmpl, "metadata", &tmeta)) < 0 ||
        (r = kp_obj_opt_object(tmeta, "labels", &x)) < 0 ||
        (r = kp_obj_labels(x, NULL, p, &v->tmpl_labels)) < 0 ||
        (r = kp_obj_opt_object(tmeta, "annotations", &x)) < 0 ||
        (r = kp_obj_labels(x, NULL, p, &v->tmpl_annotations)) < 0)
        return r;
    if (kp_json_get_object(tmpl, "spec", &tspec) < 0)
        return -KP_EPARSE;
    if ((r = obj_claim_spec(tspec, "spec.template.spec.requirements", p, &v->tmpl)) < 0)
        return r;

    if ((r = kp_obj_opt_object(spec, "disruption", &disruption)) < 0 ||
        (r = kp_obj_opt_str(disruption, "consolidationPolicy", &policy)) < 0 ||
        (r = obj_duration(disruption, "consolidateAfter", true, p, &v->consolidate_after)) < 0 ||
        (r = obj_budgets(disruption, p, v)) < 0)
        return r;
    if (!policy || strcmp(policy, "WhenEmptyOrUnderutilized") == 0)
        v->consolidation_policy = KP_CONSOLIDATE_WHEN_EMPTY_OR_UNDERUTILIZED;
    else if (strcmp(policy, "WhenEmpty") == 0)
        v->consolidation_policy = KP_CONSOLIDATE_WHEN_EMPTY;
    else if (strcmp(policy, "Balanced") == 0)
        v->consolidation_policy = KP_CONSOLIDATE_BALANCED;
    else
        v->consolidation_policy = KP_CONSOLIDATE_UNKNOWN;

    if ((r = kp_obj_opt_object(spec, "limits", &x)) < 0 ||
        (r = kp_obj_resources_keep(x, p, &v->limits)) < 0 ||
        (r = kp_obj_opt_int32(spec, "weight", 0, &weight)) < 0 ||
        (r = obj_int64(spec, "replicas", -1, &v->replicas)) < 0)
        return r;
    v->weight = weight;

    if ((r = kp_obj_opt_object(obj, "status", &status)) < 0 ||
        (r = kp_obj_opt_array(status, "conditions", &x)) < 0 ||
        (r = kp_obj_conditions(x, p, &v->conditions)) < 0 ||
        (r = kp_obj_opt_object(status, "resources", &x)) < 0 ||
        (r = kp_obj_resources_keep(x, p, &v->resources)) < 0 ||
        (r = obj_int64(status, "nodes", 0, &v->nodes)) < 0 ||
        (r = obj_int64(status, "nodeClassObservedGeneration", 0,
                       &v->node_class_observed_generation)) < 0)
        return r;
    return 0;
}

int kp_nodepool_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_nodepool, sizeof(struct kp_nodepool_view), kp_nodepool_fill,
                          ret);
}

int kp_nodepool_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_nodepool, sizeof(struct kp_nodepool_view), kp_nodepool_fill,
                         ret);
}

bool kp_nodeclass_ref_is(const struct kp_nodeclass_ref *ref, const char *group, const char *kind)
{
    return kp_streq(ref->group, group) && kp_streq(ref->kind, kind);
}

/* --- NodeClaim ------------------------------------------------------------------------------- */

static int kp_nodeclaim_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_nodeclaim_view *v = view;
    json_t *spec = NULL, *status = NULL, *x = NULL, *fin = NULL;
    const char *pid = NULL, *node = NULL, *image = NULL;
    int r;

    if ((r = kp_obj_meta(obj, false, p, &v->e, &v->meta)) < 0 ||
        (r = obj_generation(obj, &v->generation)) < 0 ||
        (r = obj_annotations(obj, keep_annotation, p, &v->annotations)) < 0)
        return r;
    v->nodepool =
        kp_pack_sizing(p) ? NULL : kp_labels_get(&v->meta.labels, "karpenter.sh/nodepool");
    r = kp_json_path_array(obj, "metadata.finalizers", &fin);
    if ((r < 0 && r != -ENOENT) ||
        (r = kp_obj_strings(fin, p, &v->finalizers, &v->n_finalizers)) < 0)
        return r;
    if (kp_json_get_object(obj, "spec", &spec) < 0)
        return -KP_EPARSE;
    if ((r = obj_claim_spec(spec, "spec.requirements", p, &v->spec)) < 0)
        return r;
    r = kp_json_path_object(spec, "resources.requests", &x);
    if ((r < 0 && r != -ENOENT) || (r = kp_obj_resources_keep(x, p, &v->requests)) < 0)
        return r;

    if ((r = kp_obj_opt_object(obj, "status", &status)) < 0 ||
        (r = kp_obj_opt_str(status, "providerID", &pid)) < 0 ||
        (r = kp_obj_opt_str(status, "nodeName", &node)) < 0 ||
        (r = kp_obj_opt_str(status, "imageID", &image)) < 0 ||
        (r = kp_obj_opt_object(status, "capacity", &x)) < 0 ||
        (r = kp_obj_resources_keep(x, p, &v->capacity)) < 0 ||
        (r = kp_obj_opt_object(status, "allocatable", &x)) < 0 ||
        (r = kp_obj_resources_keep(x, p, &v->allocatable)) < 0 ||
        (r = kp_obj_opt_array(status, "conditions", &x)) < 0 ||
        (r = kp_obj_conditions(x, p, &v->conditions)) < 0)
        return r;
    if (status && (r = kp_obj_time(status, "lastPodEventTime", &v->last_pod_event_usec)) < 0)
        return r;
    v->provider_id = kp_pack_str(p, pid && *pid ? pid : NULL);
    v->node_name = kp_pack_str(p, node && *node ? node : NULL);
    v->image_id = kp_pack_str(p, image && *image ? image : NULL);
    return 0;
}

int kp_nodeclaim_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_nodeclaim, sizeof(struct kp_nodeclaim_view),
                          kp_nodeclaim_fill, ret);
}

int kp_nodeclaim_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_nodeclaim, sizeof(struct kp_nodeclaim_view),
                         kp_nodeclaim_fill, ret);
}

/* --- validation ------------------------------------------------------------------------------ */

#define KP_MAX_TEMPLATE_LABELS 100u
#define KP_MAX_REQUIREMENTS 100u
#define KP_MAX_BUDGETS 50u

/* The domain of a key ("karpenter.sh" for "karpenter.sh/x" and "a.karpenter.sh/x"), as the CRD's
 * self.find("^([^/]+)").endsWith("karpenter.sh") sees it. */
static bool in_karpenter_domain(const char *key)
{
    const char *slash = strchr(key, '/');
    size_t n = slash ? (size_t)(slash - key) : strlen(key);

    return n >= 12 && memcmp(key + n - 12, "karpenter.sh", 12) == 0;
}

/* The karpenter.sh keys a NodePool template may use, and a NodeClaim (which also carries the
 * nodepool requirement a pod may ask for). */
static bool karpenter_key_allowed(const char *key, bool claim)
{
    return strcmp(key, "karpenter.sh/capacity-type") == 0 ||
           (claim && strcmp(key, "karpenter.sh/nodepool") == 0);
}

static void check_label_key(struct kp_valid *c, const char *path, const char *key, bool claim)
{
    char *why = NULL;

    if (kp_label_validate_key(key, strlen(key), &why) < 0)
        kp_valid_add(c, "%s: key \"%.63s\": %s", path, key, why ? why : "invalid");
    else if (strcmp(key, "kubernetes.io/hostname") == 0 ||
             (!claim && strcmp(key, "karpenter.sh/nodepool") == 0))
        kp_valid_add(c, "%s: label \"%s\" is restricted (Karpenter sets it on each node)", path,
                     key);
    else if (in_karpenter_domain(key) && !karpenter_key_allowed(key, claim))
        kp_valid_add(c,
                     "%s: key \"%.63s\": label domain \"karpenter.sh\" is restricted (only "
                     "karpenter.sh/capacity-type may be set)",
                     path, key);
    kp_free(why);
}

static void check_labels(struct kp_valid *c, const char *path, const struct kp_labels *l)
{
    char *why = NULL;

    if (l->n > KP_MAX_TEMPLATE_LABELS)
        kp_valid_add(c, "%s: must have at most %u entries, has %zu", path, KP_MAX_TEMPLATE_LABELS,
                     l->n);
    for (size_t i = 0; i < l->n; i++) {
        const char *val = l->v[i].value;

        check_label_key(c, path, l->v[i].key, false);
        if (kp_label_validate_value(val, strlen(val), &why) < 0)
            kp_valid_add(c, "%s[\"%.63s\"]: value \"%.63s\": %s", path, l->v[i].key, val,
                         why ? why : "invalid");
    }
    kp_free(why);
}

static const char *op_name(enum kp_selector_op op)
{
    switch (op) {
    case KP_SEL_GT:
        return "Gt";
    case KP_SEL_LT:
        return "Lt";
    case KP_SEL_GTE:
        return "Gte";
    case KP_SEL_LTE:
        return "Lte";
    default:
        return "In";
    }
}

static void check_requirements(struct kp_valid *c, const char *path,
                               const struct kp_nodeclaim_spec *s, bool claim)
{
    char *why = NULL;

    if (s->reqs_error) {
        kp_valid_add(c, "%s", s->reqs_error);
        return;
    }
    if (s->requirements.n > KP_MAX_REQUIREMENTS)
        kp_valid_add(c, "%s: must have at most %u entries, has %zu", path, KP_MAX_REQUIREMENTS,
                     s->requirements.n);
    for (size_t i = 0; i < s->requirements.n; i++) {
        const struct kp_requirement *q = &s->requirements.v[i];
        bool is_ct = strcmp(q->key, "karpenter.sh/capacity-type") == 0, ct_known = !is_ct;

        check_label_key(c, path, q->key, claim);
        if ((q->op == KP_SEL_GT || q->op == KP_SEL_LT || q->op == KP_SEL_GTE ||
             q->op == KP_SEL_LTE) &&
            q->bound < 0)
            kp_valid_add(c,
                         "%s: key \"%s\": requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must "
                         "have a single positive integer value (%s has %lld)",
                         path, q->key, op_name(q->op), (long long)q->bound);
        for (size_t j = 0; j < q->n_values; j++) {
            const char *val = q->values[j];

            /* Gt, Lt, Gte and Lte values are integers, checked above. */
            if ((q->op == KP_SEL_IN || q->op == KP_SEL_NOT_IN) &&
                kp_label_validate_value(val, strlen(val), &why) < 0)
                kp_valid_add(c, "%s: key \"%.63s\": value \"%.63s\": %s", path, q->key, val,
                             why ? why : "invalid");
            if (is_ct && (strcmp(val, "on-demand") == 0 || strcmp(val, "spot") == 0 ||
                          strcmp(val, "reserved") == 0))
                ct_known = true;
        }
        if (!claim && q->op == KP_SEL_IN && !ct_known)
            kp_valid_add(c,
                         "%s: key \"karpenter.sh/capacity-type\": no value is on-demand, spot or "
                         "reserved, so no instance type can match (SSH hosts are on-demand)",
                         path);
    }
    kp_free(why);
}

static void check_taint_list(struct kp_valid *c, const char *path, const struct kp_taints *t)
{
    char *why = NULL;

    for (size_t i = 0; i < t->n; i++) {
        const char *v = t->v[i].value;

        if (!kp_valid_qualified_name(t->v[i].key))
            kp_valid_add(c,
                         "%s[%zu].key: \"%.63s\" is not a valid taint key: use an optional DNS "
                         "prefix and '/', then up to 63 of A-Z a-z 0-9 - _ .",
                         path, i, t->v[i].key);
        if (v && *v && kp_label_validate_value(v, strlen(v), &why) < 0)
            kp_valid_add(c, "%s[%zu].value: \"%.63s\": %s", path, i, v, why ? why : "invalid");
    }
    kp_free(why);
}

/* No key+effect twice across taints and startupTaints. */
static void check_taint_dups(struct kp_valid *c, const char *path,
                             const struct kp_nodeclaim_spec *s)
{
    size_t n = s->taints.n + s->startup_taints.n;

    for (size_t i = 0; i < n; i++) {
        const struct kp_taint *a =
            i < s->taints.n ? &s->taints.v[i] : &s->startup_taints.v[i - s->taints.n];

        for (size_t j = i + 1; j < n; j++) {
            const struct kp_taint *b =
                j < s->taints.n ? &s->taints.v[j] : &s->startup_taints.v[j - s->taints.n];

            if (a->effect == b->effect && strcmp(a->key, b->key) == 0) {
                kp_valid_add(c,
                             "%s: taint \"%.63s:%s\" appears more than once across taints and "
                             "startupTaints",
                             path, a->key, kp_taint_effect_name(a->effect));
                break;
            }
        }
    }
}

static void check_duration(struct kp_valid *c, const char *path, const struct kp_obj_duration *d,
                           bool nillable)
{
    if (d->text && !kp_valid_duration(d->text, nillable))
        kp_valid_add(c,
                     "%s: \"%.63s\" is not a duration: write whole numbers with s, m or h, such "
                     "as 30s, 10m or 720h%s",
                     path, d->text, nillable ? ", or Never" : "");
    else if (d->text && !d->valid) /* the grammar holds but the value does not fit */
        kp_valid_add(c,
                     "%s: \"%.63s\" is longer than kpssh can hold: durations must be at most "
                     "2562047h (about 292 years, Go's time.Duration)%s",
                     path, d->text, nillable ? "; write Never for no limit" : "");
}

static void check_claim_spec(struct kp_valid *c, const char *prefix,
                             const struct kp_nodeclaim_spec *s, bool claim)
{
    const struct kp_nodeclass_ref *ref = &s->node_class_ref;
    char path[64]; /* prefix is one of two constants below */

    if (empty(ref->group))
        kp_valid_add(c,
                     "%s.nodeClassRef.group: group may not be empty: give the node class's API "
                     "group, such as karpenter.kpssh.dev",
                     prefix);
    else if (strchr(ref->group, '/'))
        kp_valid_add(c,
                     "%s.nodeClassRef.group: \"%.63s\" may not contain '/': give the API group "
                     "only, without a version",
                     prefix, ref->group);
    if (empty(ref->kind))
        kp_valid_add(c,
                     "%s.nodeClassRef.kind: kind may not be empty: give the node class's kind, "
                     "such as SSHNodeClass",
                     prefix);
    if (empty(ref->name))
        kp_valid_add(c, "%s.nodeClassRef.name: name may not be empty", prefix);

    (void)snprintf(path, sizeof(path), "%s.requirements", prefix);
    check_requirements(c, path, s, claim);
    (void)snprintf(path, sizeof(path), "%s.taints", prefix);
    check_taint_list(c, path, &s->taints);
    (void)snprintf(path, sizeof(path), "%s.startupTaints", prefix);
    check_taint_list(c, path, &s->startup_taints);
    (void)snprintf(path, sizeof(path), "%s.taints", prefix);
    check_taint_dups(c, path, s);
    (void)snprintf(path, sizeof(path), "%s.expireAfter", prefix);
    check_duration(c, path, &s->expire_after, true);
    (void)snprintf(path, sizeof(path), "%s.terminationGracePeriod", prefix);
    check_duration(c, path, &s->termination_grace_period, false);
}

int kp_nodepool_validate(const struct kp_nodepool_view *v, struct kp_buf *msg)
{
    struct kp_valid c;

    kp_valid_init(&c, msg);
    check_labels(&c, "spec.template.metadata.labels", &v->tmpl_labels);
    check_claim_spec(&c, "spec.template.spec", &v->tmpl, false);
    if (v->consolidation_policy == KP_CONSOLIDATE_UNKNOWN)
        kp_valid_add(&c, "spec.disruption.consolidationPolicy: must be WhenEmpty, "
                         "WhenEmptyOrUnderutilized or Balanced");
    check_duration(&c, "spec.disruption.consolidateAfter", &v->consolidate_after, true);
    if (v->n_budgets > KP_MAX_BUDGETS)
        kp_valid_add(&c, "spec.disruption.budgets: must have at most %u entries, has %zu",
                     KP_MAX_BUDGETS, v->n_budgets);
    for (size_t i = 0; i < v->n_budgets; i++) {
        const struct kp_budget *b = &v->budgets[i];

        if (!valid_budget_nodes(b->nodes))
            kp_valid_add(&c,
                         "spec.disruption.budgets[%zu].nodes: \"%.63s\" must be a node count "
                         "such as 5 or a percentage from 0%% to 100%% such as 10%%",
                         i, b->nodes);
        if (b->schedule && !valid_schedule(b->schedule))
            kp_valid_add(&c,
                         "spec.disruption.budgets[%zu].schedule: \"%.63s\" must be a cron "
                         "expression of five fields (UTC) or @yearly, @monthly, @weekly, "
                         "@daily, @midnight, @hourly",
                         i, b->schedule);
        if (b->duration && !valid_budget_duration(b->duration))
            kp_valid_add(&c,
                         "spec.disruption.budgets[%zu].duration: \"%.63s\" must be hours and "
                         "minutes such as 8h, 30m or 1h30m",
                         i, b->duration);
        if (!b->schedule != !b->duration)
            kp_valid_add(&c,
                         "spec.disruption.budgets[%zu]: 'schedule' must be set with "
                         "'duration'",
                         i);
        if (b->reasons & KP_DISRUPT_UNKNOWN)
            kp_valid_add(&c,
                         "spec.disruption.budgets[%zu].reasons: each reason must be "
                         "Underutilized, Empty, Drifted or Unhealthy",
                         i);
    }
    kp_valid_resources(&c, "spec.limits", &v->limits);
    if (v->weight < 0 || v->weight > 100)
        kp_valid_add(&c, "spec.weight: %d must be between 1 and 100", (int)v->weight);
    if (v->replicas < -1)
        kp_valid_add(&c, "spec.replicas: must not be negative");
    if (v->replicas >= 0) {
        if (v->weight != 0)
            kp_valid_add(&c, "spec.weight: 'weight' is not supported on static NodePools "
                             "(spec.replicas)");
        for (size_t i = 0; i < v->limits.n; i++)
            if (strcmp(v->limits.v[i].name, "nodes") != 0) {
                kp_valid_add(&c, "spec.limits: only 'limits.nodes' is supported on static "
                                 "NodePools (spec.replicas)");
                break;
            }
    }
    kp_valid_resources(&c, "status.resources", &v->resources);
    return kp_valid_end(&c);
}

int kp_nodeclaim_validate(const struct kp_nodeclaim_view *v, struct kp_buf *msg)
{
    struct kp_valid c;

    kp_valid_init(&c, msg);
    check_claim_spec(&c, "spec", &v->spec, true);
    kp_valid_resources(&c, "spec.resources.requests", &v->requests);
    kp_valid_resources(&c, "status.capacity", &v->capacity);
    kp_valid_resources(&c, "status.allocatable", &v->allocatable);
    return kp_valid_end(&c);
}
