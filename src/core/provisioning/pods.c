/* core/provisioning/pods.c: a provisioning round's pods (contract in pods.h).
 *
 * DESIGN
 *
 * What: Karpenter's pod selection for one round, over projections: IsProvisionable
 * (pkg/utils/pod/scheduling.go), Validate (pkg/controllers/provisioning/provisioner.go with
 * ValidateRequirement and IsRestrictedLabel of pkg/apis/v1), the scheduler's DRA refusal,
 * IsCurrentlyReschedulable (pkg/utils/pdb/pdb.go) for the pods of deleting Nodes, and the PDB
 * half of a disruption candidate's check (CanEvictPods of the same file), which disruption
 * calls.
 *
 * Why this way: the provisioner reads these answers once per round for every pending pod, and
 * every rule is one Karpenter states in a few lines; as pure functions of the cached
 * projections they run without the API server and each rule has a unit test of its own. The
 * caller (the provisioner controller) does the I/O: it records the refusals in cluster state,
 * publishes the FailedScheduling events and sets the ignored-pods gauge.
 *
 * Validation, rule by rule (Karpenter's order; every problem is reported, joined by "; ", as
 * multierr does):
 *  - the pod's requirements (nodeSelector, the heaviest preferred node affinity term and the
 *    first required term, intersected key by key as NewPodRequirements does) leave
 *    karpenter.sh/nodepool DoesNotExist: "configured to not run on a Karpenter provisioned
 *    node", which also silences the event even when other problems are reported with it;
 *  - each nodeSelector entry (as key In [value]) and each expression of each required term:
 *    a restricted key (kubernetes.io/hostname, or a key in the karpenter.sh domain or a
 *    subdomain of it that is not well known), after Karpenter's key normalisation
 *    (beta.kubernetes.io/arch -> kubernetes.io/arch and the like); karpenter.sh/capacity-type
 *    In with none of on-demand, spot, reserved; a value that is no valid label value; a
 *    Gt/Lt/Gte/Lte bound below zero;
 *  - a required term with matchFields;
 *  - with a PVC lookup, the first claim that is missing, being deleted, Lost, bound without
 *    pv.kubernetes.io/bind-completed, or unbound without a storage class (Karpenter stops at
 *    its first failing claim too; its PersistentVolume, StorageClass and CSI driver checks need
 *    projections kpssh does not keep and are not made).
 * Operators, key syntax and In without values are the API server's to refuse (and the
 * projection's: such a pod never reaches the cache), so they are not checked twice.
 *
 * Messages follow Karpenter's text, including Go's formatting of the lists it prints ("[a b]",
 * and "map[on-demand:{} reserved:{} spot:{}]" for the set of known capacity types), so they
 * read the same in events and logs as Karpenter's. Two differences: values appear sorted (the
 * projection keeps them canonical) and nodeSelector entries in the projection's order, where
 * Go's map order is random.
 *
 * PDBs: pdb.go has one matcher, isEvictable, with two modes (a PDB blocks when it allows zero
 * disruptions right now, or when its spec blocks every disruption for good); so has this file
 * (kp_pdb_blockers), and one function matches a PDB to a pod (kp_pdbs_matching). A list in
 * kp_pdbs_sort's order is searched by namespace; any other order is still answered right, by
 * looking at every PDB (the order is checked once per call).
 *
 * Threads: pure, any thread. */
#include "core/provisioning/pods.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "api/obj-misc.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"
#include "api/requirements.h"
#include "core/termination/drain.h"

#define KP_NODEPOOL_KEY "karpenter.sh/nodepool"
#define KP_CAPACITY_TYPE_KEY "karpenter.sh/capacity-type"

static const char kp_msg_avoids[] = "configured to not run on a Karpenter provisioned node";
static const char kp_msg_dra[] = "pod has Dynamic Resource Allocation requirements that are not "
                                 "yet supported by Karpenter";
static const char kp_msg_match_fields[] = "node selector term with matchFields is not supported";
/* IsRestrictedLabel's text; the lists are Go's sets.List of WellKnownLabels and
 * RestrictedLabelDomains (sorted). */
static const char kp_msg_restricted_tail[] =
    " is not allowed as it might interfere with the internal provisioning logic; specify a well "
    "known label: [karpenter.sh/capacity-type karpenter.sh/nodepool kubernetes.io/arch "
    "kubernetes.io/os node.kubernetes.io/instance-type node.kubernetes.io/windows-build "
    "topology.kubernetes.io/region topology.kubernetes.io/zone], or a custom label that does not "
    "use a restricted domain: [karpenter.sh]";

enum kp_podsel_skip kp_podsel_provisionable(const struct kp_pod_view *p)
{
    if (!(p->flags & KP_POD_UNSCHEDULABLE))
        return KP_PODSEL_NOT_UNSCHEDULABLE;
    if (p->node_name)
        return KP_PODSEL_BOUND;
    if (p->flags & KP_POD_PREEMPTING)
        return KP_PODSEL_PREEMPTING;
    if (p->flags & KP_POD_DAEMONSET)
        return KP_PODSEL_DAEMONSET;
    if (p->flags & KP_POD_NODE_OWNED)
        return KP_PODSEL_STATIC;
    return KP_PODSEL_PROVISIONABLE;
}

const char *kp_podsel_skip_name(enum kp_podsel_skip s)
{
    switch (s) {
    case KP_PODSEL_PROVISIONABLE:
        return "provisionable";
    case KP_PODSEL_NOT_UNSCHEDULABLE:
        return "not marked unschedulable by kube-scheduler";
    case KP_PODSEL_BOUND:
        return "bound to a node";
    case KP_PODSEL_PREEMPTING:
        return "nominated to a node (preempting)";
    case KP_PODSEL_DAEMONSET:
        return "owned by a DaemonSet";
    case KP_PODSEL_STATIC:
        return "owned by a node (static pod)";
    }
    return "unknown";
}

/* --- validation --------------------------------------------------------------------------- */

/* The problems found so far, joined by "; ". A failed append only loses text (the verdict is
 * kept in count), as base/err.h's messages do. */
struct kp_why {
    struct kp_buf buf;
    unsigned count; /* problems found */
    bool cut;       /* some text was lost (past the ceiling, or memory) */
};

static void KP_PRINTF(2, 3) kp_why_add(struct kp_why *w, const char *fmt, ...)
{
    va_list ap;

    if (w->count++ > 0 && kp_buf_puts(&w->buf, "; ") < 0) {
        w->cut = true;
        return;
    }
    va_start(ap, fmt);
    if (kp_buf_vprintf(&w->buf, fmt, ap) < 0)
        w->cut = true; /* the text so far stands, the rest is dropped */
    va_end(ap);
}

/* Karpenter's NormalizedLabels: old names a pod may still use for well-known labels. */
static const char *kp_normalized_key(const char *key)
{
    static const char *const map[][2] = {
        {"failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone"},
        {"beta.kubernetes.io/arch", "kubernetes.io/arch"},
        {"beta.kubernetes.io/os", "kubernetes.io/os"},
        {"beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type"},
        {"failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region"},
    };

    for (size_t i = 0; i < KP_ARRAY_SIZE(map); i++)
        if (strcmp(key, map[i][0]) == 0)
            return map[i][1];
    return key;
}

static bool kp_well_known(const char *key)
{
    for (const char *const *k = kp_reqset_well_known_labels; *k; k++)
        if (strcmp(key, *k) == 0)
            return true;
    return false;
}

/* Karpenter's IsRestrictedLabel. */
static bool kp_restricted(const char *key)
{
    const char *slash = strchr(key, '/');
    static const char dom[] = "karpenter.sh";
    size_t n, d = sizeof(dom) - 1;

    if (kp_well_known(key))
        return false;
    n = slash ? (size_t)(slash - key) : 0; /* no prefix: the domain is "" */
    if ((n == d && memcmp(key, dom, d) == 0) ||
        (n > d && key[n - d - 1] == '.' && memcmp(key + n - d, dom, d) == 0))
        return true;
    return strcmp(key, "kubernetes.io/hostname") == 0;
}

static bool kp_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Kubernetes' IsValidLabelValue, with its messages. */
static void kp_check_value(struct kp_why *w, const char *key, const char *v)
{
    size_t n = strlen(v);
    bool chars = true;

    if (n > 63)
        kp_why_add(w, "invalid value %s for key %s, must be no more than 63 characters", v, key);
    if (n > 0) {
        chars = kp_alnum(v[0]) && kp_alnum(v[n - 1]);
        for (size_t i = 1; chars && i + 1 < n; i++)
            chars = kp_alnum(v[i]) || v[i] == '-' || v[i] == '_' || v[i] == '.';
    }
    if (!chars)
        kp_why_add(w,
                   "invalid value %s for key %s, a valid label must be an empty string or consist "
                   "of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                   "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
                   "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                   v, key);
}

static const char *kp_op_name(enum kp_selector_op op)
{
    switch (op) {
    case KP_SEL_IN:
    case KP_SEL_EQUALS:
        return "In";
    case KP_SEL_NOT_IN:
    case KP_SEL_NOT_EQUALS:
        return "NotIn";
    case KP_SEL_EXISTS:
        return "Exists";
    case KP_SEL_DOES_NOT_EXIST:
        return "DoesNotExist";
    case KP_SEL_GT:
        return "Gt";
    case KP_SEL_LT:
        return "Lt";
    case KP_SEL_GTE:
        return "Gte";
    case KP_SEL_LTE:
        return "Lte";
    }
    return "?";
}

/* Go's %v of a []string: "[a b c]". */
static void kp_go_list(struct kp_buf *b, const char *const *v, size_t n)
{
    int r = kp_buf_putc(b, '[');

    for (size_t i = 0; r == 0 && i < n; i++)
        r = kp_buf_printf(b, "%s%s", i ? " " : "", v[i]);
    if (r == 0)
        r = kp_buf_putc(b, ']');
    (void)r; /* a cut list only shortens the message */
}

/* Karpenter's validateWellKnownValues for the one key with known values. */
static void kp_check_capacity_type(struct kp_why *w, const char *key, enum kp_selector_op op,
                                   const char *const *values, size_t n)
{
    struct kp_buf list = KP_BUF_INIT(KP_MSG_MAX);

    if (strcmp(key, KP_CAPACITY_TYPE_KEY) != 0 || (op != KP_SEL_IN && op != KP_SEL_EQUALS))
        return;
    for (size_t i = 0; i < n; i++)
        if (strcmp(values[i], "on-demand") == 0 || strcmp(values[i], "spot") == 0 ||
            strcmp(values[i], "reserved") == 0)
            return;
    /* Every value is unknown, so Karpenter's "got" list is the values again. */
    kp_go_list(&list, values, n);
    kp_why_add(w,
               "no valid values found in %s for %s, expected one of: map[on-demand:{} "
               "reserved:{} spot:{}], got: %s",
               kp_buf_str(&list), key, kp_buf_str(&list));
    kp_buf_done(&list);
}

/* Karpenter's ValidateRequirement, less what the API server already guarantees (DESIGN). */
static void kp_check_requirement(struct kp_why *w, const char *raw_key, enum kp_selector_op op,
                                 const char *const *values, size_t n, int64_t bound)
{
    const char *key = kp_normalized_key(raw_key);

    if (kp_restricted(key))
        kp_why_add(w, "using label %s%s", key, kp_msg_restricted_tail);
    kp_check_capacity_type(w, key, op, values, n);
    for (size_t i = 0; i < n; i++)
        kp_check_value(w, key, values[i]);
    if ((op == KP_SEL_GT || op == KP_SEL_LT || op == KP_SEL_GTE || op == KP_SEL_LTE) && bound < 0)
        kp_why_add(w, "key %s with operator %s must have a single positive integer value", key,
                   kp_op_name(op));
}

static void kp_check_requirements(struct kp_why *w, const struct kp_reqs *r)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct kp_requirement *q = &r->v[i];

        kp_check_requirement(w, q->key, q->op, (const char *const *)q->values, q->n_values,
                             q->bound);
    }
}

/* Adds the requirements of r on key to s. -ENOMEM, or 1 when s cannot hold them (a limit or
 * a value the set refuses): the caller then stops looking, see kp_avoids_karpenter. */
static int kp_add_key(struct kp_reqset *s, const struct kp_reqs *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct kp_requirement *q = &r->v[i];
        int rc;

        if (strcmp(q->key, key) != 0)
            continue;
        rc = kp_reqset_add(s, q->key, q->op, (const char *const *)q->values, q->n_values, 0);
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return 1;
    }
    return 0;
}

/* Karpenter's validateKarpenterManagedLabelCanExist: whether NewPodRequirements (nodeSelector,
 * the heaviest preferred term, the first required term) leaves karpenter.sh/nodepool with
 * operator DoesNotExist: an explicit DoesNotExist, or In sets whose intersection is empty. 1, 0
 * or -ENOMEM. A set the requirement maths refuses (past its limits, which only huge NotIn
 * unions reach) is a complement, never DoesNotExist, so it answers 0. */
static int kp_avoids_karpenter(const struct kp_pod_view *p)
{
    struct kp_reqset s = KP_REQSET_INIT;
    const char *v = kp_labels_get(&p->node_selector, KP_NODEPOOL_KEY);
    const struct kp_node_term *heaviest = NULL;
    const struct kp_req *req;
    int r = 0, avoids = 0;

    if (v && (r = kp_reqset_add(&s, KP_NODEPOOL_KEY, KP_SEL_IN, &v, 1, 0)) < 0)
        goto out;
    /* Karpenter sorts the preferred terms by weight (not stably) and takes the first; of equal
     * weights we take the first written. */
    for (size_t i = 0; i < p->n_preferred; i++)
        if (!heaviest || p->preferred[i].weight > heaviest->weight)
            heaviest = &p->preferred[i];
    if (heaviest && (r = kp_add_key(&s, &heaviest->exprs, KP_NODEPOOL_KEY)) != 0)
        goto out;
    if (p->n_required > 0 && (r = kp_add_key(&s, &p->required[0].exprs, KP_NODEPOOL_KEY)) != 0)
        goto out;
    req = kp_reqset_get(&s, KP_NODEPOOL_KEY);
    avoids = req && kp_req_operator(req) == KP_SEL_DOES_NOT_EXIST;
out:
    kp_reqset_done(&s);
    /* Any other failure is a set the maths could not hold: not DoesNotExist (above). */
    return r == -ENOMEM ? r : avoids;
}

/* Karpenter's ValidatePersistentVolumeClaims, as far as the PVC projection reaches (pods.h):
 * the first failing claim, with its text. */
static void kp_check_pvcs(struct kp_why *w, const struct kp_pod_view *p,
                          const struct kp_podsel_pvcs *pvcs)
{
    for (size_t i = 0; i < p->n_pvc_claims; i++) {
        const struct kp_pvc_view *c = pvcs->get(pvcs->ctx, p->e.ns, p->pvc_claims[i]);

        if (!c) {
            /* The API server's NotFound text, as Karpenter's Get returns it. */
            kp_why_add(w,
                       "getting persistent volume claim, persistentvolumeclaims \"%s\" not found",
                       p->pvc_claims[i]);
            return;
        }
        if (c->meta.deletion_usec != 0) {
            kp_why_add(w, "persistentvolumeclaim is being deleted");
            return;
        }
        if (c->lost) {
            kp_why_add(w, "persistentvolumeclaim bound to non-existent persistentvolume");
            return;
        }
        if (c->volume_name && !c->bind_completed) {
            /* kube-scheduler binds such a claim as Immediate and waits for the mark. */
            kp_why_add(w, "pvc is considered unbound because it does not contain annotation");
            return;
        }
        if (!c->volume_name && !c->storage_class) {
            kp_why_add(w, "unbound pvc must define a storage class");
            return;
        }
    }
}

int kp_podsel_validate(const struct kp_pod_view *p, const struct kp_podsel_pvcs *pvcs,
                       char **ret_msg)
{
    struct kp_why w = {.buf = KP_BUF_INIT(KP_MSG_MAX), .count = 0, .cut = false};
    int avoids, verdict;

    if ((avoids = kp_avoids_karpenter(p)) < 0)
        return avoids;
    if (avoids)
        kp_why_add(&w, "%s", kp_msg_avoids);
    for (size_t i = 0; i < p->node_selector.n; i++) {
        const char *val = p->node_selector.v[i].value;

        kp_check_requirement(&w, p->node_selector.v[i].key, KP_SEL_IN, &val, 1, 0);
    }
    for (size_t i = 0; i < p->n_required; i++) {
        if (p->required[i].fields.n > 0)
            kp_why_add(&w, "%s", kp_msg_match_fields);
        kp_check_requirements(&w, &p->required[i].exprs);
    }
    if (pvcs)
        kp_check_pvcs(&w, p, pvcs);
    if (avoids)
        verdict = KP_PODSEL_AVOIDS_KARPENTER;
    else if (w.count > 0)
        verdict = KP_PODSEL_INVALID;
    else if (p->flags & KP_POD_DRA)
        verdict = KP_PODSEL_DRA;
    else
        verdict = KP_PODSEL_VALID;
    if (verdict == KP_PODSEL_DRA)
        kp_msg_set(ret_msg, "%s", kp_msg_dra);
    else if (verdict != KP_PODSEL_VALID && !(w.cut && !*kp_buf_str(&w.buf)))
        kp_msg_set(ret_msg, "%s", kp_buf_str(&w.buf)); /* no text at all: *ret_msg stays NULL */
    kp_buf_done(&w.buf);
    return verdict;
}

/* --- PodDisruptionBudgets ------------------------------------------------------------------ */

static int kp_pdb_cmp(const struct kp_pdb_view *a, const struct kp_pdb_view *b)
{
    int c = strcmp(a->e.ns, b->e.ns);

    return c != 0 ? c : strcmp(a->e.name, b->e.name);
}

static int kp_pdb_qsort_cmp(const void *a, const void *b)
{
    return kp_pdb_cmp(*(const struct kp_pdb_view *const *)a, *(const struct kp_pdb_view *const *)b);
}

void kp_pdbs_sort(const struct kp_pdb_view **pdbs, size_t n)
{
    if (n > 1)
        qsort(pdbs, n, sizeof(*pdbs), kp_pdb_qsort_cmp);
}

/* A caller's PDBs, and whether they are in kp_pdbs_sort's order (checked once per call, O(n),
 * so an unsorted list costs time, never a wrong answer). */
struct kp_pdbs {
    const struct kp_pdb_view *const *v;
    size_t n;
    bool sorted;
};

static struct kp_pdbs kp_pdbs_of(const struct kp_pdb_view *const *v, size_t n)
{
    struct kp_pdbs s = {.v = v, .n = v ? n : 0, .sorted = true};

    for (size_t i = 1; i < s.n && s.sorted; i++)
        s.sorted = kp_pdb_cmp(v[i - 1], v[i]) <= 0;
    return s;
}

/* The first index whose PDB may be in namespace ns: the lower bound of ns when sorted, else 0
 * (the caller's loop then skips other namespaces and stops at the first one after ns only when
 * sorted). */
static size_t kp_pdbs_first(const struct kp_pdbs *s, const char *ns)
{
    size_t lo = 0, hi = s->n;

    if (!s->sorted)
        return 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (strcmp(s->v[mid]->e.ns, ns) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Calls visit on each PDB that selects p, in the order of s, until visit returns false. The one
 * place a PDB is matched to a pod: namespace, then selector (absent: nothing, kp_reqs_match). */
static void kp_pdbs_matching(const struct kp_pdbs *s, const struct kp_pod_view *p,
                             bool (*visit)(void *ctx, const struct kp_pdb_view *b), void *ctx)
{
    for (size_t i = kp_pdbs_first(s, p->e.ns); i < s->n; i++) {
        const struct kp_pdb_view *b = s->v[i];

        if (strcmp(b->e.ns, p->e.ns) != 0) {
            if (s->sorted)
                break; /* past the pod's namespace */
            continue;
        }
        if (kp_reqs_match(&b->selector, &p->meta.labels) && !visit(ctx, b))
            return;
    }
}

/* Karpenter's IsEvictable: whether a drain would call the Eviction API for p at all. */
static bool kp_evictable(const struct kp_pod_view *p, int64_t now_usec)
{
    return kp_pod_active(p) && !kp_drain_pod_tolerates_disrupted(p) &&
           !(p->flags & KP_POD_NODE_OWNED) && !kp_pod_do_not_disrupt_active(p, now_usec);
}

/* What makes a PDB refuse an eviction, pdb.go's evictionBlocker. */
enum kp_pdb_blocker {
    KP_PDB_ZERO_DISRUPTIONS, /* CanEvictPods: status.disruptionsAllowed is 0 right now */
    KP_PDB_FULLY_BLOCKING,   /* IsCurrentlyReschedulable: the spec never allows a disruption */
};

/* pdb.go's isFullyBlocking: maxUnavailable 0 or "0%", or minAvailable "100%". (The projection
 * reads a string "0" as the count 0; the API server refuses such a string, so it never
 * differs from Karpenter's test of the int 0 or the string "0%".) */
static bool kp_pdb_fully_blocking(const struct kp_pdb_view *b)
{
    return (b->max_unavailable.set && b->max_unavailable.value == 0) ||
           (b->min_available.set && b->min_available.percent && b->min_available.value == 100);
}

struct kp_match_count {
    const struct kp_pdb_view *first;
    size_t n;
};

static bool kp_count_visit(void *ctx, const struct kp_pdb_view *b)
{
    struct kp_match_count *m = ctx;

    if (m->n++ == 0)
        m->first = b;
    return m->n < 2; /* two are enough to know */
}

/* Karpenter's isEvictable (pdb.go) in the given mode: how many PDBs stand in the way of p's
 * eviction. 0: none (or p is never evicted, so none matters); 1: one selects p and refuses in
 * this mode (*ret_pdb); 2: several select p, which the Eviction API refuses whatever they allow
 * (kubernetes pkg/registry/core/pod/storage/eviction.go). */
static size_t kp_pdb_blockers(const struct kp_pdbs *s, const struct kp_pod_view *p,
                              enum kp_pdb_blocker mode, int64_t now_usec,
                              const struct kp_pdb_view **ret_pdb)
{
    struct kp_match_count m = {NULL, 0};
    bool blocks = false;

    if (!kp_evictable(p, now_usec))
        return 0; /* never evicted, so no PDB stands in its way */
    kp_pdbs_matching(s, p, kp_count_visit, &m);
    if (m.n != 1)
        return m.n;
    /* A PDB that always lets unhealthy pods go does not hold a pod that is not Ready. */
    if (m.first->always_allow_unhealthy && (p->flags & KP_POD_READY_FALSE))
        return 0;
    switch (mode) {
    case KP_PDB_ZERO_DISRUPTIONS:
        blocks = m.first->disruptions_allowed == 0;
        break;
    case KP_PDB_FULLY_BLOCKING:
        blocks = kp_pdb_fully_blocking(m.first);
        break;
    }
    if (!blocks)
        return 0;
    *ret_pdb = m.first;
    return 1;
}

static bool kp_reschedulable(const struct kp_pod_view *p, const struct kp_pdbs *s, int64_t now_usec)
{
    const struct kp_pdb_view *b = NULL;
    /* IsDisruptable: a pod that is no longer active is disruptable whatever it says. */
    bool disruptable = !kp_pod_active(p) || !kp_pod_do_not_disrupt_active(p, now_usec);

    return kp_pod_reschedulable(p) && disruptable &&
           kp_pdb_blockers(s, p, KP_PDB_FULLY_BLOCKING, now_usec, &b) == 0;
}

bool kp_podsel_reschedulable(const struct kp_pod_view *p, const struct kp_pdb_view *const *pdbs,
                             size_t n_pdbs, int64_t now_usec)
{
    /* One pod: checking the order costs as much as looking at every PDB. */
    struct kp_pdbs s = {.v = pdbs, .n = pdbs ? n_pdbs : 0, .sorted = false};

    return kp_reschedulable(p, &s, now_usec);
}

/* Appends to the NUL-terminated text in buf[size] at *off; what does not fit is cut. */
static void KP_PRINTF(4, 5) kp_put(char *buf, size_t size, size_t *off, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*off + 1 >= size)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *off, size - *off, fmt, ap);
    va_end(ap);
    if (n < 0)
        buf[*off] = '\0';
    else
        *off = (size_t)n >= size - *off ? size - 1 : *off + (size_t)n;
}

struct kp_keys_out {
    char *buf;
    size_t size, off, n;
};

static bool kp_keys_visit(void *ctx, const struct kp_pdb_view *b)
{
    struct kp_keys_out *o = ctx;

    kp_put(o->buf, o->size, &o->off, "%s%s", o->n++ > 0 ? " " : "", b->e.key);
    return true;
}

const char *kp_pdbs_block_eviction(const struct kp_pod_view *const *pods, size_t n,
                                   const struct kp_pdb_view *const *pdbs, size_t n_pdbs,
                                   int64_t now_usec, char *buf, size_t size)
{
    struct kp_pdbs s = kp_pdbs_of(pdbs, n_pdbs);

    for (size_t i = 0; pods && i < n; i++) {
        const struct kp_pdb_view *b = NULL;
        struct kp_keys_out o = {.buf = buf, .size = size, .off = 0, .n = 0};
        size_t k = kp_pdb_blockers(&s, pods[i], KP_PDB_ZERO_DISRUPTIONS, now_usec, &b);

        if (k == 0)
            continue;
        if (size == 0)
            return "";
        buf[0] = '\0';
        /* serrors.Wrap's "<message> (<key>=<value>)" with a []client.ObjectKey value (pods.h). */
        if (k == 1) {
            kp_put(buf, size, &o.off, "%s (PodDisruptionBudget=[%s])", KP_PDB_MSG_PREVENTS,
                   b->e.key);
            return buf;
        }
        kp_put(buf, size, &o.off, "%s (PodDisruptionBudget(s)=[", KP_PDB_MSG_MULTIPLE);
        kp_pdbs_matching(&s, pods[i], kp_keys_visit, &o);
        kp_put(buf, size, &o.off, "])");
        return buf;
    }
    return NULL;
}

/* --- the round ---------------------------------------------------------------------------- */

void kp_podsel_round_done(struct kp_podsel_round *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_refused; i++)
        kp_free(r->refused[i].message);
    kp_free(r->refused);
    kp_free(r->pods);
    memset(r, 0, sizeof(*r));
}

static void kp_refuse(struct kp_podsel_round *r, const struct kp_pod_view *p,
                      enum kp_podsel_verdict v, bool from_deleting, char *msg)
{
    struct kp_podsel_refused *x = &r->refused[r->n_refused++];

    x->pod = p;
    x->verdict = v;
    x->from_deleting = from_deleting;
    x->message = msg;
}

int kp_podsel_select(const struct kp_podsel_input *in, struct kp_podsel_round *ret)
{
    struct kp_podsel_round r;
    struct kp_pdbs pdbs = kp_pdbs_of(in->pdbs, in->n_pdbs);
    size_t total;
    int rc;

    memset(&r, 0, sizeof(r));
    memset(ret, 0, sizeof(*ret));
    if (kp_add_overflow(in->n_pending, in->n_deleting, &total))
        return -ENOMEM;
    /* Both arrays are sized for every candidate, so appending below cannot fail; never empty,
     * so they exist whatever the counts (and the analyzers can see it). */
    r.pods = kp_calloc(KP_MAX(total, (size_t)1), sizeof(*r.pods));
    r.refused = kp_calloc(KP_MAX(total, (size_t)1), sizeof(*r.refused));
    if (!r.pods || !r.refused) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < in->n_pending; i++) {
        const struct kp_pod_view *p = in->pending[i];
        char *msg = NULL;

        if (kp_podsel_provisionable(p) != KP_PODSEL_PROVISIONABLE) {
            r.skipped++;
            continue;
        }
        if ((rc = kp_podsel_validate(p, in->pvcs, &msg)) < 0)
            goto out;
        if (rc == KP_PODSEL_VALID) {
            r.pods[r.n_pods++] = p;
            continue;
        }
        if (rc == KP_PODSEL_AVOIDS_KARPENTER || rc == KP_PODSEL_INVALID)
            r.ignored++;
        kp_refuse(&r, p, (enum kp_podsel_verdict)rc, false, msg);
    }
    r.n_pending = r.n_pods;
    for (size_t i = 0; i < in->n_deleting; i++) {
        const struct kp_pod_view *p = in->deleting[i];
        char *msg = NULL;

        if (!kp_reschedulable(p, &pdbs, in->now_usec)) {
            r.not_resched++;
            continue;
        }
        /* Karpenter validates pending pods only; its scheduler refuses DRA pods from both. */
        if (p->flags & KP_POD_DRA) {
            kp_msg_set(&msg, "%s", kp_msg_dra);
            kp_refuse(&r, p, KP_PODSEL_DRA, true, msg);
            continue;
        }
        r.pods[r.n_pods++] = p;
    }
    *ret = r;
    memset(&r, 0, sizeof(r)); /* the caller owns it now */
    rc = 0;
out:
    kp_podsel_round_done(&r);
    return rc;
}
