/* Tests for core/provisioning/pods.h: one table row per rule of Karpenter's IsProvisionable,
 * Validate (with the exact messages), DRA refusal and IsCurrentlyReschedulable, each pod built
 * from JSON through the real projection; then a whole round's selection and its allocation
 * failures. */
#include "kp-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "api/obj-misc.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"
#include "core/provisioning/pods.h"

/* A pending pod kube-scheduler gave up on; each %s adds members to metadata, spec and status. */
#define POD_FMT                                                                                    \
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"uid\":\"u1\"%s},"                         \
    "\"spec\":{\"containers\":[]%s},"                                                              \
    "\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","                \
    "\"status\":\"False\",\"reason\":\"Unschedulable\"}]%s}}"
/* The same, with the whole status given. */
#define POD_FMT_STATUS                                                                             \
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"uid\":\"u1\"%s},"                         \
    "\"spec\":{\"containers\":[]%s},\"status\":%s}"

#define REQUIRED(terms)                                                                            \
    ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"        \
    "\"nodeSelectorTerms\":[" terms "]}}}"
#define EXPR(key, op, values)                                                                      \
    "{\"key\":\"" key "\",\"operator\":\"" op "\",\"values\":[" values "]}"
#define TERM(exprs) "{\"matchExpressions\":[" exprs "]}"

/* Karpenter's texts the cases expect. */
#define RESTRICTED(key)                                                                            \
    "using label " key " is not allowed as it might interfere with the internal provisioning "     \
    "logic; specify a well known label: [karpenter.sh/capacity-type karpenter.sh/nodepool "        \
    "kubernetes.io/arch kubernetes.io/os node.kubernetes.io/instance-type "                        \
    "node.kubernetes.io/windows-build topology.kubernetes.io/region "                              \
    "topology.kubernetes.io/zone], or a custom label that does not use a restricted domain: "      \
    "[karpenter.sh]"
#define AVOIDS "configured to not run on a Karpenter provisioned node"
#define MATCH_FIELDS "node selector term with matchFields is not supported"
#define DRA                                                                                        \
    "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"
#define BAD_VALUE(v, key)                                                                          \
    "invalid value " v " for key " key ", a valid label must be an empty string or consist of "    \
    "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "       \
    "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "        \
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"

#define V63 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static struct kp_entry *pod(const char *meta, const char *spec, const char *status, bool whole)
{
    char json[8192];
    struct kp_entry *e = NULL;
    int n = snprintf(json, sizeof(json), whole ? POD_FMT_STATUS : POD_FMT, meta, spec, status);

    assert_true(n > 0 && (size_t)n < sizeof(json));
    if (kp_pod_decode(json, (size_t)n, &e) < 0)
        fail_msg("pod does not decode: %s", json);
    return e;
}

/* --- IsProvisionable ---------------------------------------------------------------------- */

static const struct {
    const char *name, *meta, *spec, *status;
    bool whole_status;
    enum kp_podsel_skip want;
} provisionable[] = {
    {"pending and marked Unschedulable", "", "", "", false, KP_PODSEL_PROVISIONABLE},
    {"no PodScheduled condition", "", "", "{\"phase\":\"Pending\"}", true,
     KP_PODSEL_NOT_UNSCHEDULABLE},
    {"PodScheduled=False for another reason", "", "",
     "{\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"False\",\"reason\":"
     "\"SchedulerError\"}]}",
     true, KP_PODSEL_NOT_UNSCHEDULABLE},
    {"bound", "", ",\"nodeName\":\"n1\"", "", false, KP_PODSEL_BOUND},
    {"nominated (preempting)", "", "", ",\"nominatedNodeName\":\"n2\"", false,
     KP_PODSEL_PREEMPTING},
    {"owned by a DaemonSet",
     ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"ds\","
     "\"uid\":\"d1\",\"controller\":true}]",
     "", "", false, KP_PODSEL_DAEMONSET},
    {"any DaemonSet owner reference counts, controller or not",
     ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"ds\","
     "\"uid\":\"d1\"}]",
     "", "", false, KP_PODSEL_DAEMONSET},
    {"a DaemonSet of another apiVersion does not",
     ",\"ownerReferences\":[{\"apiVersion\":\"extensions/v1beta1\",\"kind\":\"DaemonSet\","
     "\"name\":\"ds\",\"uid\":\"d1\",\"controller\":true}]",
     "", "", false, KP_PODSEL_PROVISIONABLE},
    {"owned by a Node (static pod)",
     ",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\","
     "\"uid\":\"n\",\"controller\":true}]",
     "", "", false, KP_PODSEL_STATIC},
    {"being deleted is not a reason (nor in Karpenter)",
     ",\"deletionTimestamp\":\"2026-11-30T08:00:00Z\",\"finalizers\":[\"x\"]", "", "", false,
     KP_PODSEL_PROVISIONABLE},
    {"checks run in Karpenter's order: unschedulable first", "", ",\"nodeName\":\"n1\"",
     "{\"nominatedNodeName\":\"n2\"}", true, KP_PODSEL_NOT_UNSCHEDULABLE},
    {"checks run in Karpenter's order: bound before preempting", "", ",\"nodeName\":\"n1\"",
     ",\"nominatedNodeName\":\"n2\"", false, KP_PODSEL_BOUND},
};

static void test_provisionable(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(provisionable); i++) {
        struct kp_entry *e = pod(provisionable[i].meta, provisionable[i].spec,
                                 provisionable[i].status, provisionable[i].whole_status);
        enum kp_podsel_skip got = kp_podsel_provisionable(kp_pod_view(e));

        kp_entry_unref(e);
        if (got != provisionable[i].want)
            fail_msg("\"%s\": got %s, want %s", provisionable[i].name, kp_podsel_skip_name(got),
                     kp_podsel_skip_name(provisionable[i].want));
    }
    assert_string_equal(kp_podsel_skip_name(KP_PODSEL_PREEMPTING),
                        "nominated to a node (preempting)");
}

/* --- Validate ----------------------------------------------------------------------------- */

static const struct {
    const char *name, *spec;
    enum kp_podsel_verdict want;
    const char *msg; /* exact; NULL for VALID */
} validate[] = {
    {"no constraints", "", KP_PODSEL_VALID, NULL},
    {"custom labels and well-known ones",
     ",\"nodeSelector\":{\"team\":\"a\",\"kubernetes.io/arch\":\"amd64\"}" REQUIRED(
         TERM(EXPR("topology.kubernetes.io/zone", "In", "\"z1\",\"z2\""))),
     KP_PODSEL_VALID, NULL},
    {"required nodepool DoesNotExist",
     REQUIRED(TERM("{\"key\":\"karpenter.sh/nodepool\",\"operator\":\"DoesNotExist\"}")),
     KP_PODSEL_AVOIDS_KARPENTER, AVOIDS},
    {"nodepool DoesNotExist in the heaviest preferred term",
     ",\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":["
     "{\"weight\":1,\"preference\":" TERM(EXPR(
         "team", "In",
         "\"a\"")) "},"
                   "{\"weight\":50,\"preference\":{\"matchExpressions\":[{\"key\":\"karpenter.sh/nodepool\","
                   "\"operator\":\"DoesNotExist\"}]}}]}}",
     KP_PODSEL_AVOIDS_KARPENTER, AVOIDS},
    {"nodepool DoesNotExist in a lighter preferred term only",
     ",\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":["
     "{\"weight\":1,\"preference\":{\"matchExpressions\":[{\"key\":\"karpenter.sh/nodepool\","
     "\"operator\":\"DoesNotExist\"}]}},"
     "{\"weight\":50,\"preference\":" TERM(EXPR("team", "In", "\"a\"")) "}]}}",
     KP_PODSEL_VALID, NULL},
    {"nodeSelector and required affinity disagree on the nodepool",
     ",\"nodeSelector\":{\"karpenter.sh/nodepool\":\"a\"}" REQUIRED(
         TERM(EXPR("karpenter.sh/nodepool", "In", "\"b\""))),
     KP_PODSEL_AVOIDS_KARPENTER, AVOIDS},
    {"nodepool DoesNotExist in the second required term only",
     REQUIRED(TERM(EXPR("team", "In", "\"a\"")) ",{\"matchExpressions\":[{\"key\":"
                                                "\"karpenter.sh/nodepool\",\"operator\":"
                                                "\"DoesNotExist\"}]}"),
     KP_PODSEL_VALID, NULL},
    {"nodepool NotIn", REQUIRED(TERM(EXPR("karpenter.sh/nodepool", "NotIn", "\"gpu\""))),
     KP_PODSEL_VALID, NULL},
    {"nodeSelector on kubernetes.io/hostname",
     ",\"nodeSelector\":{\"kubernetes.io/hostname\":\"h1\"}", KP_PODSEL_INVALID,
     RESTRICTED("kubernetes.io/hostname")},
    {"required affinity on kubernetes.io/hostname",
     REQUIRED(TERM(EXPR("kubernetes.io/hostname", "In", "\"h1\""))), KP_PODSEL_INVALID,
     RESTRICTED("kubernetes.io/hostname")},
    {"preferred affinity on kubernetes.io/hostname is not validated",
     ",\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":["
     "{\"weight\":1,\"preference\":" TERM(EXPR("kubernetes.io/hostname", "In", "\"h1\"")) "}]}}",
     KP_PODSEL_VALID, NULL},
    {"a karpenter.sh key that is not well known",
     REQUIRED(TERM("{\"key\":\"karpenter.sh/initialized\",\"operator\":\"Exists\"}")),
     KP_PODSEL_INVALID, RESTRICTED("karpenter.sh/initialized")},
    {"a key in a subdomain of karpenter.sh", ",\"nodeSelector\":{\"x.karpenter.sh/y\":\"z\"}",
     KP_PODSEL_INVALID, RESTRICTED("x.karpenter.sh/y")},
    {"a domain that only ends in karpenter.sh", ",\"nodeSelector\":{\"notkarpenter.sh/y\":\"z\"}",
     KP_PODSEL_VALID, NULL},
    {"a known capacity type", ",\"nodeSelector\":{\"karpenter.sh/capacity-type\":\"reserved\"}",
     KP_PODSEL_VALID, NULL},
    {"only unknown capacity types",
     REQUIRED(TERM(EXPR("karpenter.sh/capacity-type", "In", "\"cheap\",\"free\""))),
     KP_PODSEL_INVALID,
     "no valid values found in [cheap free] for karpenter.sh/capacity-type, expected one of: "
     "map[on-demand:{} reserved:{} spot:{}], got: [cheap free]"},
    {"one known capacity type among unknown ones",
     REQUIRED(TERM(EXPR("karpenter.sh/capacity-type", "In", "\"cheap\",\"spot\""))),
     KP_PODSEL_VALID, NULL},
    {"unknown capacity types under NotIn",
     REQUIRED(TERM(EXPR("karpenter.sh/capacity-type", "NotIn", "\"cheap\""))), KP_PODSEL_VALID,
     NULL},
    {"matchFields", REQUIRED("{\"matchFields\":[" EXPR("metadata.name", "In", "\"n1\"") "]}"),
     KP_PODSEL_INVALID, MATCH_FIELDS},
    {"a value that is no label value", REQUIRED(TERM(EXPR("team", "In", "\"a b\""))),
     KP_PODSEL_INVALID, BAD_VALUE("a b", "team")},
    {"a value longer than 63 characters", REQUIRED(TERM(EXPR("team", "In", "\"" V63 "a\""))),
     KP_PODSEL_INVALID, "invalid value " V63 "a for key team, must be no more than 63 characters"},
    {"a value of 63 characters", REQUIRED(TERM(EXPR("team", "In", "\"" V63 "\""))), KP_PODSEL_VALID,
     NULL},
    {"old key names are normalised first",
     REQUIRED(TERM(EXPR("beta.kubernetes.io/arch", "In", "\"-x\""))), KP_PODSEL_INVALID,
     BAD_VALUE("-x", "kubernetes.io/arch")},
    /* "-1" is no label value either, and Karpenter says both. */
    {"a negative Gt bound", REQUIRED(TERM(EXPR("cores", "Gt", "\"-1\""))), KP_PODSEL_INVALID,
     BAD_VALUE("-1", "cores") "; key cores with operator Gt must have a single positive integer "
                              "value"},
    {"a Lt bound of zero", REQUIRED(TERM(EXPR("cores", "Lt", "\"0\""))), KP_PODSEL_VALID, NULL},
    {"every problem is reported, in order",
     ",\"nodeSelector\":{\"kubernetes.io/hostname\":\"h1\"}" REQUIRED("{\"matchFields\":[" EXPR(
         "metadata.name", "In", "\"n1\"") "],"
                                          "\"matchExpressions\":[" EXPR("team", "In",
                                                                        "\"a b\"") "]}"),
     KP_PODSEL_INVALID,
     RESTRICTED("kubernetes.io/hostname") "; " MATCH_FIELDS "; " BAD_VALUE("a b", "team")},
    {"avoiding Karpenter wins the verdict, the other problems stay in the text",
     ",\"nodeSelector\":{\"kubernetes.io/hostname\":\"h1\"}" REQUIRED(
         TERM("{\"key\":\"karpenter.sh/nodepool\",\"operator\":\"DoesNotExist\"}")),
     KP_PODSEL_AVOIDS_KARPENTER, AVOIDS "; " RESTRICTED("kubernetes.io/hostname")},
    {"DRA claims", ",\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"c\"}]",
     KP_PODSEL_DRA, DRA},
    {"validation comes before the DRA refusal",
     ",\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"c\"}],"
     "\"nodeSelector\":{\"kubernetes.io/hostname\":\"h1\"}",
     KP_PODSEL_INVALID, RESTRICTED("kubernetes.io/hostname")},
};

static void test_validate(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(validate); i++) {
        struct kp_entry *e = pod("", validate[i].spec, "", false);
        char *msg = NULL;
        int got = kp_podsel_validate(kp_pod_view(e), /* pvcs= */ NULL, &msg);

        kp_entry_unref(e);
        if (got != (int)validate[i].want) {
            print_error("\"%s\": verdict %d, want %d (%s)\n", validate[i].name, got,
                        validate[i].want, msg ? msg : "no message");
            kp_free(msg);
            fail();
        }
        if (!validate[i].msg ? msg != NULL : !msg || strcmp(msg, validate[i].msg) != 0) {
            print_error("\"%s\":\n got  %s\n want %s\n", validate[i].name, msg ? msg : "(null)",
                        validate[i].msg ? validate[i].msg : "(null)");
            kp_free(msg);
            fail();
        }
        kp_free(msg);
    }
    assert_false(kp_podsel_verdict_has_event(KP_PODSEL_AVOIDS_KARPENTER));
    assert_true(kp_podsel_verdict_has_event(KP_PODSEL_INVALID));
    assert_true(kp_podsel_verdict_has_event(KP_PODSEL_DRA));
}

/* --- ValidatePersistentVolumeClaims ------------------------------------------------------ */

#define PVC_FMT                                                                                    \
    "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"%s},\"spec\":{%s},\"status\":{%s}}"
#define VOLUMES(v) ",\"volumes\":[" v "]"
#define CLAIM(vol, claim)                                                                          \
    "{\"name\":\"" vol "\",\"persistentVolumeClaim\":{\"claimName\":\"" claim "\"}}"
#define BIND_MARK ",\"annotations\":{\"pv.kubernetes.io/bind-completed\":\"yes\"}"

/* The claims every case can see. */
static const struct {
    const char *name, *ns, *meta, *spec, *status;
} pvc_defs[] = {
    {"bound", "d", BIND_MARK, "\"volumeName\":\"pv1\",\"storageClassName\":\"local\"",
     "\"phase\":\"Bound\""},
    {"deleting", "d", ",\"deletionTimestamp\":\"2026-11-30T08:00:00Z\"" BIND_MARK,
     "\"volumeName\":\"pv2\"", "\"phase\":\"Bound\""},
    {"lost", "d", BIND_MARK, "\"volumeName\":\"pv3\"", "\"phase\":\"Lost\""},
    {"no-mark", "d", "", "\"volumeName\":\"pv4\"", "\"phase\":\"Pending\""},
    {"waiting", "d", "", "\"storageClassName\":\"local\"", "\"phase\":\"Pending\""},
    {"no-class", "d", "", "\"storageClassName\":\"\"", "\"phase\":\"Pending\""},
    {"elsewhere", "other", BIND_MARK, "\"volumeName\":\"pv5\"", "\"phase\":\"Bound\""},
};

struct pvc_set {
    struct kp_entry *e[KP_ARRAY_SIZE(pvc_defs)];
};

static const struct kp_pvc_view *pvc_get(void *ctx, const char *ns, const char *name)
{
    const struct pvc_set *set = ctx;

    for (size_t i = 0; i < KP_ARRAY_SIZE(set->e); i++)
        if (strcmp(set->e[i]->ns, ns) == 0 && strcmp(set->e[i]->name, name) == 0)
            return kp_pvc_view(set->e[i]);
    return NULL;
}

static const struct {
    const char *name, *spec;
    enum kp_podsel_verdict want;
    const char *msg;
} pvc_cases[] = {
    {"no claims", VOLUMES("{\"name\":\"tmp\",\"emptyDir\":{}}"), KP_PODSEL_VALID, NULL},
    {"a bound claim with the bind-completed mark", VOLUMES(CLAIM("v", "bound")), KP_PODSEL_VALID,
     NULL},
    {"an unbound claim with a storage class", VOLUMES(CLAIM("v", "waiting")), KP_PODSEL_VALID,
     NULL},
    {"a missing claim", VOLUMES(CLAIM("v", "gone")), KP_PODSEL_INVALID,
     "getting persistent volume claim, persistentvolumeclaims \"gone\" not found"},
    {"a claim of that name in another namespace only", VOLUMES(CLAIM("v", "elsewhere")),
     KP_PODSEL_INVALID,
     "getting persistent volume claim, persistentvolumeclaims \"elsewhere\" not found"},
    {"a claim being deleted", VOLUMES(CLAIM("v", "deleting")), KP_PODSEL_INVALID,
     "persistentvolumeclaim is being deleted"},
    {"a Lost claim", VOLUMES(CLAIM("v", "lost")), KP_PODSEL_INVALID,
     "persistentvolumeclaim bound to non-existent persistentvolume"},
    {"a bound claim without the mark", VOLUMES(CLAIM("v", "no-mark")), KP_PODSEL_INVALID,
     "pvc is considered unbound because it does not contain annotation"},
    {"an unbound claim without a storage class", VOLUMES(CLAIM("v", "no-class")), KP_PODSEL_INVALID,
     "unbound pvc must define a storage class"},
    {"only the first failing claim is reported",
     VOLUMES(CLAIM("a", "bound") "," CLAIM("b", "lost") "," CLAIM("c", "no-class")),
     KP_PODSEL_INVALID, "persistentvolumeclaim bound to non-existent persistentvolume"},
    {"claim problems join the others",
     ",\"nodeSelector\":{\"kubernetes.io/hostname\":\"h1\"}" VOLUMES(CLAIM("v", "lost")),
     KP_PODSEL_INVALID,
     RESTRICTED("kubernetes.io/hostname") "; persistentvolumeclaim bound to non-existent "
                                          "persistentvolume"},
};

static void test_validate_pvcs(void **state)
{
    struct pvc_set set;
    const struct kp_podsel_pvcs pvcs = {pvc_get, &set};

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(pvc_defs); i++) {
        char json[1024];
        int n = snprintf(json, sizeof(json), PVC_FMT, pvc_defs[i].name, pvc_defs[i].ns,
                         pvc_defs[i].meta, pvc_defs[i].spec, pvc_defs[i].status);

        set.e[i] = NULL;
        assert_true(n > 0 && (size_t)n < sizeof(json));
        assert_int_equal(kp_pvc_decode(json, (size_t)n, &set.e[i]), 0);
    }
    for (size_t i = 0; i < KP_ARRAY_SIZE(pvc_cases); i++) {
        struct kp_entry *e = pod("", pvc_cases[i].spec, "", false);
        char *msg = NULL;
        int got = kp_podsel_validate(kp_pod_view(e), &pvcs, &msg);
        bool msg_ok = !pvc_cases[i].msg ? msg == NULL : msg && strcmp(msg, pvc_cases[i].msg) == 0;

        if (got != (int)pvc_cases[i].want || !msg_ok) {
            print_error("\"%s\": verdict %d (want %d)\n got  %s\n want %s\n", pvc_cases[i].name,
                        got, pvc_cases[i].want, msg ? msg : "(null)",
                        pvc_cases[i].msg ? pvc_cases[i].msg : "(null)");
            kp_free(msg);
            kp_entry_unref(e);
            fail();
        }
        /* Without a lookup no claim is checked (the last case has another problem). */
        assert_int_equal(kp_podsel_validate(kp_pod_view(e), NULL, NULL),
                         i + 1 < KP_ARRAY_SIZE(pvc_cases) ? KP_PODSEL_VALID : KP_PODSEL_INVALID);
        kp_free(msg);
        kp_entry_unref(e);
    }
    /* A round hands its lookup on. */
    {
        struct kp_entry *e = pod("", VOLUMES(CLAIM("v", "gone")), "", false);
        const struct kp_pod_view *pv = kp_pod_view(e);
        struct kp_podsel_input in = {.pending = &pv, .n_pending = 1, .pvcs = &pvcs};
        struct kp_podsel_round r;

        assert_int_equal(kp_podsel_select(&in, &r), 0);
        assert_int_equal(r.n_pods, 0);
        assert_int_equal(r.ignored, 1);
        assert_int_equal(r.refused[0].verdict, KP_PODSEL_INVALID);
        kp_podsel_round_done(&r);
        in.pvcs = NULL;
        assert_int_equal(kp_podsel_select(&in, &r), 0);
        assert_int_equal(r.n_pods, 1);
        kp_podsel_round_done(&r);
        kp_entry_unref(e);
    }
    for (size_t i = 0; i < KP_ARRAY_SIZE(set.e); i++)
        kp_entry_unref(set.e[i]);
}

/* --- IsCurrentlyReschedulable ------------------------------------------------------------- */

#define NOW 1796026200000000LL /* 2026-11-30T08:10:00Z */
#define RUNNING_STATUS                                                                             \
    "{\"phase\":\"Running\",\"startTime\":\"2026-11-30T08:00:00Z\",\"conditions\":[{\"type\":"     \
    "\"Ready\",\"status\":\"True\"}]}"
#define STS_OWNER                                                                                  \
    ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"name\":\"db\","  \
    "\"uid\":\"s1\",\"controller\":true}]"
#define PDB_FMT                                                                                    \
    "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},\"spec\":{%s,\"selector\":"              \
    "{\"matchLabels\":{\"app\":\"%s\"}}},\"status\":{\"disruptionsAllowed\":0}}"

struct pdb_spec {
    const char *ns, *spec, *app;
};

static const struct {
    const char *name, *meta, *spec, *status;
    struct pdb_spec pdbs[2];
    bool want;
} resched[] = {
    {"a running pod", "", "", RUNNING_STATUS, {{NULL, NULL, NULL}}, true},
    {"owned by a DaemonSet",
     ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"ds\","
     "\"uid\":\"d1\"}]",
     "",
     RUNNING_STATUS,
     {{NULL, NULL, NULL}},
     false},
    {"owned by a Node",
     ",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\","
     "\"uid\":\"n\"}]",
     "",
     RUNNING_STATUS,
     {{NULL, NULL, NULL}},
     false},
    {"terminal", "", "", "{\"phase\":\"Succeeded\"}", {{NULL, NULL, NULL}}, false},
    {"terminating",
     ",\"deletionTimestamp\":\"2026-11-30T08:09:00Z\"",
     "",
     RUNNING_STATUS,
     {{NULL, NULL, NULL}},
     false},
    {"a terminating StatefulSet pod",
     ",\"deletionTimestamp\":\"2026-11-30T08:09:00Z\"" STS_OWNER,
     "",
     RUNNING_STATUS,
     {{NULL, NULL, NULL}},
     true},
    {"do-not-disrupt",
     ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\"}",
     "",
     RUNNING_STATUS,
     {{NULL, NULL, NULL}},
     false},
    {"do-not-disrupt for longer than it has run",
     ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"15m\"}",
     "",
     RUNNING_STATUS,
     {{NULL, NULL, NULL}},
     false},
    {"do-not-disrupt for less than it has run",
     ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"5m\"}",
     "",
     RUNNING_STATUS,
     {{NULL, NULL, NULL}},
     true},
    {"do-not-disrupt on a pod no longer active",
     ",\"deletionTimestamp\":\"2026-11-30T08:09:00Z\",\"annotations\":{\"karpenter.sh/"
     "do-not-disrupt\":\"true\"}" STS_OWNER,
     "",
     RUNNING_STATUS,
     {{NULL, NULL, NULL}},
     true},
    {"a PDB with maxUnavailable 0",
     ",\"labels\":{\"app\":\"web\"}",
     "",
     RUNNING_STATUS,
     {{"d", "\"maxUnavailable\":0", "web"}},
     false},
    {"a PDB with maxUnavailable 0%",
     ",\"labels\":{\"app\":\"web\"}",
     "",
     RUNNING_STATUS,
     {{"d", "\"maxUnavailable\":\"0%\"", "web"}},
     false},
    {"a PDB with minAvailable 100%",
     ",\"labels\":{\"app\":\"web\"}",
     "",
     RUNNING_STATUS,
     {{"d", "\"minAvailable\":\"100%\"", "web"}},
     false},
    {"a PDB that allows no disruption now but is not fully blocking",
     ",\"labels\":{\"app\":\"web\"}",
     "",
     RUNNING_STATUS,
     {{"d", "\"minAvailable\":1", "web"}},
     true},
    {"a blocking PDB in another namespace",
     ",\"labels\":{\"app\":\"web\"}",
     "",
     RUNNING_STATUS,
     {{"other", "\"maxUnavailable\":0", "web"}},
     true},
    {"a blocking PDB that selects other pods",
     ",\"labels\":{\"app\":\"web\"}",
     "",
     RUNNING_STATUS,
     {{"d", "\"maxUnavailable\":0", "db"}},
     true},
    {"two PDBs select it",
     ",\"labels\":{\"app\":\"web\"}",
     "",
     RUNNING_STATUS,
     {{"d", "\"minAvailable\":1", "web"}, {"d", "\"maxUnavailable\":\"50%\"", "web"}},
     false},
    {"a blocking PDB that always lets unready pods go, pod Ready=False",
     ",\"labels\":{\"app\":\"web\"}",
     "",
     "{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}",
     {{"d", "\"maxUnavailable\":0,\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\"", "web"}},
     true},
    {"the same PDB, pod Ready=Unknown",
     ",\"labels\":{\"app\":\"web\"}",
     "",
     "{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"Unknown\"}]}",
     {{"d", "\"maxUnavailable\":0,\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\"", "web"}},
     false},
    {"a blocking PDB, pod tolerates the disrupted taint (never evicted)",
     ",\"labels\":{\"app\":\"web\"}",
     ",\"tolerations\":[{\"key\":\"karpenter.sh/disrupted\",\"operator\":\"Exists\"}]",
     RUNNING_STATUS,
     {{"d", "\"maxUnavailable\":0", "web"}},
     true},
};

static struct kp_entry *pdb(const struct pdb_spec *s, int i)
{
    char json[1024], name[16];
    struct kp_entry *e = NULL;
    int n;

    assert_true(snprintf(name, sizeof(name), "pdb%d", i) > 0);
    n = snprintf(json, sizeof(json), PDB_FMT, name, s->ns, s->spec, s->app);
    assert_true(n > 0 && (size_t)n < sizeof(json));
    if (kp_pdb_decode(json, (size_t)n, &e) < 0)
        fail_msg("pdb does not decode: %s", json);
    return e;
}

static void test_reschedulable(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(resched); i++) {
        struct kp_entry *e = pod(resched[i].meta, resched[i].spec, resched[i].status, true);
        struct kp_entry *pe[2] = {NULL, NULL};
        const struct kp_pdb_view *pv[2];
        size_t n = 0;
        bool got;

        for (int j = 0; j < 2 && resched[i].pdbs[j].ns; j++) {
            pe[j] = pdb(&resched[i].pdbs[j], j);
            pv[n++] = (const struct kp_pdb_view *)pe[j];
        }
        got = kp_podsel_reschedulable(kp_pod_view(e), pv, n, NOW);
        kp_entry_unref(e);
        kp_entry_unref(pe[0]);
        kp_entry_unref(pe[1]);
        if (got != resched[i].want)
            fail_msg("\"%s\": got %d, want %d", resched[i].name, got, resched[i].want);
    }
}

/* --- CanEvictPods: a disruption candidate's PDB check ------------------------------------ */

/* A PDB with the whole spec given and status.disruptionsAllowed. */
#define PDB_SPEC_FMT                                                                               \
    "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},\"spec\":{%s},"                          \
    "\"status\":{\"disruptionsAllowed\":%d}}"
#define SEL_WEB "\"selector\":{\"matchLabels\":{\"app\":\"web\"}}"
#define SEL_DB "\"selector\":{\"matchLabels\":{\"app\":\"db\"}}"
#define WEB ",\"labels\":{\"app\":\"web\"}"
#define PREVENTS(key) "pdb prevents pod evictions (PodDisruptionBudget=[" key "])"
#define MULTIPLE(keys) "eviction does not support multiple PDBs (PodDisruptionBudget(s)=[" keys "])"
#define UNREADY_STATUS                                                                             \
    "{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}"

struct evict_pdb {
    const char *name, *ns, *spec;
    int allowed;
};

static struct kp_entry *pdb_full(const struct evict_pdb *s)
{
    char json[1024];
    struct kp_entry *e = NULL;
    int n = snprintf(json, sizeof(json), PDB_SPEC_FMT, s->name, s->ns, s->spec, s->allowed);

    assert_true(n > 0 && (size_t)n < sizeof(json));
    if (kp_pdb_decode(json, (size_t)n, &e) < 0)
        fail_msg("pdb does not decode: %s", json);
    return e;
}

static const struct {
    const char *name, *meta, *spec, *status;
    struct evict_pdb pdbs[3];
    const char *want; /* NULL: not blocked */
} evict[] = {
    {"no PDB", WEB, "", RUNNING_STATUS, {{NULL, NULL, NULL, 0}}, NULL},
    {"one PDB that allows no disruption now",
     WEB,
     "",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB ",\"minAvailable\":2", 0}},
     PREVENTS("d/web")},
    {"one PDB that allows a disruption",
     WEB,
     "",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB ",\"minAvailable\":2", 1}},
     NULL},
    {"a fully blocking spec that still reports a disruption allowed (status is what counts)",
     WEB,
     "",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB ",\"maxUnavailable\":0", 1}},
     NULL},
    {"two PDBs select it, both allowing disruptions",
     WEB,
     "",
     RUNNING_STATUS,
     {{"web-a", "d", SEL_WEB ",\"minAvailable\":1", 3},
      {"web-b", "d", "\"selector\":{},\"maxUnavailable\":\"50%\"", 3}},
     MULTIPLE("d/web-a d/web-b")},
    {"three PDBs select it, listed in the order given",
     WEB,
     "",
     RUNNING_STATUS,
     {{"c", "d", SEL_WEB ",\"minAvailable\":1", 3},
      {"a", "d", SEL_WEB ",\"minAvailable\":1", 3},
      {"b", "d", SEL_WEB ",\"minAvailable\":1", 3}},
     MULTIPLE("d/c d/a d/b")},
    {"AlwaysAllow, pod Ready=False",
     WEB,
     "",
     UNREADY_STATUS,
     {{"web", "d", SEL_WEB ",\"minAvailable\":2,\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\"",
       0}},
     NULL},
    {"AlwaysAllow, pod Ready=True",
     WEB,
     "",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB ",\"minAvailable\":2,\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\"",
       0}},
     PREVENTS("d/web")},
    {"IfHealthyBudget, pod Ready=False",
     WEB,
     "",
     UNREADY_STATUS,
     {{"web", "d", SEL_WEB ",\"minAvailable\":2,\"unhealthyPodEvictionPolicy\":\"IfHealthyBudget\"",
       0}},
     PREVENTS("d/web")},
    {"AlwaysAllow does not help a pod two PDBs select",
     WEB,
     "",
     UNREADY_STATUS,
     {{"a", "d", SEL_WEB ",\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\",\"minAvailable\":1", 1},
      {"b", "d", SEL_WEB ",\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\",\"minAvailable\":1", 1}},
     MULTIPLE("d/a d/b")},
    {"a PDB of another namespace",
     WEB,
     "",
     RUNNING_STATUS,
     {{"web", "other", SEL_WEB ",\"minAvailable\":2", 0}},
     NULL},
    {"a PDB of another namespace and one of the pod's: not several",
     WEB,
     "",
     RUNNING_STATUS,
     {{"web", "other", SEL_WEB ",\"minAvailable\":2", 0},
      {"web", "d", SEL_WEB ",\"minAvailable\":2", 3}},
     NULL},
    {"a PDB that selects other pods",
     WEB,
     "",
     RUNNING_STATUS,
     {{"db", "d", SEL_DB ",\"minAvailable\":2", 0}},
     NULL},
    {"an empty selector selects every pod of its namespace (LabelSelectorAsSelector)",
     "",
     "",
     RUNNING_STATUS,
     {{"all", "d", "\"selector\":{},\"minAvailable\":2", 0}},
     PREVENTS("d/all")},
    {"an absent selector selects no pod",
     WEB,
     "",
     RUNNING_STATUS,
     {{"none", "d", "\"minAvailable\":2", 0}},
     NULL},
    {"terminal pod", WEB, "", "{\"phase\":\"Failed\"}", {{"web", "d", SEL_WEB, 0}}, NULL},
    {"terminating pod",
     WEB ",\"deletionTimestamp\":\"2026-11-30T08:09:00Z\"",
     "",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB, 0}},
     NULL},
    {"pod tolerating karpenter.sh/disrupted",
     WEB,
     ",\"tolerations\":[{\"key\":\"karpenter.sh/disrupted\",\"operator\":\"Exists\","
     "\"effect\":\"NoSchedule\"}]",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB, 0}},
     NULL},
    {"mirror pod (owned by a Node)",
     WEB ",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\","
         "\"uid\":\"n\",\"controller\":true}]",
     "",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB, 0}},
     NULL},
    {"pod with an active do-not-disrupt",
     WEB ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\"}",
     "",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB, 0}},
     NULL},
    {"pod whose do-not-disrupt has run out",
     WEB ",\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"5m\"}",
     "",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB, 0}},
     PREVENTS("d/web")},
    {"a DaemonSet pod is evicted like any other",
     WEB ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":"
         "\"ds\",\"uid\":\"d1\",\"controller\":true}]",
     "",
     RUNNING_STATUS,
     {{"web", "d", SEL_WEB, 0}},
     PREVENTS("d/web")},
};

static void test_block_eviction(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(evict); i++) {
        struct kp_entry *e = pod(evict[i].meta, evict[i].spec, evict[i].status, true);
        struct kp_entry *pe[3] = {NULL, NULL, NULL};
        const struct kp_pdb_view *pv[3];
        const struct kp_pod_view *p = kp_pod_view(e);
        char buf[256];
        const char *got;
        size_t n = 0;

        for (size_t j = 0; j < 3 && evict[i].pdbs[j].name; j++) {
            pe[j] = pdb_full(&evict[i].pdbs[j]);
            pv[n++] = kp_pdb_view(pe[j]);
        }
        got = kp_pdbs_block_eviction(&p, 1, pv, n, NOW, buf, sizeof(buf));
        if (!evict[i].want != !got || (got && strcmp(got, evict[i].want) != 0))
            fail_msg("\"%s\": got \"%s\", want \"%s\"", evict[i].name, got ? got : "(null)",
                     evict[i].want ? evict[i].want : "(null)");
        kp_entry_unref(e);
        for (size_t j = 0; j < 3; j++)
            kp_entry_unref(pe[j]);
    }
}

/* A node's pods: the first blocked pod in their order speaks; an unblocked node says NULL. */
static void test_block_eviction_pods(void **state)
{
    static const struct evict_pdb specs[] = {
        {"web", "d", SEL_WEB ",\"minAvailable\":1", 0},
        {"db", "d", SEL_DB ",\"minAvailable\":1", 0},
        {"db-too", "d", SEL_DB ",\"maxUnavailable\":1", 0},
    };
    struct kp_entry *pe[3], *pods[3];
    const struct kp_pdb_view *pv[3];
    const struct kp_pod_view *p[3];
    char buf[256];

    (void)state;
    for (size_t j = 0; j < 3; j++) {
        pe[j] = pdb_full(&specs[j]);
        pv[j] = kp_pdb_view(pe[j]);
    }
    pods[0] = pod(",\"labels\":{\"app\":\"free\"}", "", RUNNING_STATUS, true);
    pods[1] = pod(",\"labels\":{\"app\":\"db\"}", "", RUNNING_STATUS, true);
    pods[2] = pod(WEB, "", RUNNING_STATUS, true);
    for (size_t j = 0; j < 3; j++)
        p[j] = kp_pod_view(pods[j]);

    assert_null(kp_pdbs_block_eviction(p, 1, pv, 3, NOW, buf, sizeof(buf)));
    assert_string_equal(kp_pdbs_block_eviction(p, 3, pv, 3, NOW, buf, sizeof(buf)),
                        MULTIPLE("d/db d/db-too"));
    assert_string_equal(kp_pdbs_block_eviction(p + 2, 1, pv, 3, NOW, buf, sizeof(buf)),
                        PREVENTS("d/web"));
    /* Sorted (namespace, name), the several PDBs come in name order. */
    kp_pdbs_sort(pv, 3);
    assert_string_equal(pv[0]->e.name, "db");
    assert_string_equal(pv[1]->e.name, "db-too");
    assert_string_equal(pv[2]->e.name, "web");
    assert_string_equal(kp_pdbs_block_eviction(p, 3, pv, 3, NOW, buf, sizeof(buf)),
                        MULTIPLE("d/db d/db-too"));
    /* No pods, no PDBs. */
    assert_null(kp_pdbs_block_eviction(NULL, 0, pv, 3, NOW, buf, sizeof(buf)));
    assert_null(kp_pdbs_block_eviction(p, 3, NULL, 0, NOW, buf, sizeof(buf)));
    /* A small buffer cuts the sentence; no buffer still says "blocked". */
    assert_string_equal(kp_pdbs_block_eviction(p + 2, 1, pv, 3, NOW, buf, 11), "pdb preven");
    assert_string_equal(kp_pdbs_block_eviction(p, 3, pv, 3, NOW, buf, 45),
                        "eviction does not support multiple PDBs (Pod");
    assert_string_equal(kp_pdbs_block_eviction(p, 3, pv, 3, NOW, buf, 1), "");
    assert_non_null(kp_pdbs_block_eviction(p, 3, pv, 3, NOW, buf, 0));
    for (size_t j = 0; j < 3; j++) {
        kp_entry_unref(pe[j]);
        kp_entry_unref(pods[j]);
    }
}

/* Sorted lists are searched by namespace: the pod's PDBs are found between other namespaces'
 * (before, after, and none at all), and an unsorted list gives the same answers. */
static void test_pdbs_sorted_lookup(void **state)
{
    static const struct evict_pdb specs[] = {
        {"z", "zz", "\"selector\":{},\"maxUnavailable\":0", 0},
        {"web", "d", SEL_WEB ",\"maxUnavailable\":0", 0},
        {"a", "a", "\"selector\":{},\"maxUnavailable\":0", 0},
        {"b", "a", "\"selector\":{},\"maxUnavailable\":0", 0},
        {"c", "c", "\"selector\":{},\"maxUnavailable\":0", 0},
        {"all", "e", "\"selector\":{},\"maxUnavailable\":0", 0},
    };
    struct kp_entry *pe[KP_ARRAY_SIZE(specs)], *web, *other;
    const struct kp_pdb_view *pv[KP_ARRAY_SIZE(specs)];
    const struct kp_pod_view *p;
    char buf[256];

    (void)state;
    for (size_t j = 0; j < KP_ARRAY_SIZE(specs); j++) {
        pe[j] = pdb_full(&specs[j]);
        pv[j] = kp_pdb_view(pe[j]);
    }
    web = pod(WEB, "", RUNNING_STATUS, true);
    other = pod(",\"labels\":{\"app\":\"other\"}", "", RUNNING_STATUS, true);
    for (int sorted = 0; sorted < 2; sorted++) {
        if (sorted)
            kp_pdbs_sort(pv, KP_ARRAY_SIZE(pv));
        p = kp_pod_view(web);
        assert_string_equal(
            kp_pdbs_block_eviction(&p, 1, pv, KP_ARRAY_SIZE(pv), NOW, buf, sizeof(buf)),
            PREVENTS("d/web"));
        assert_false(kp_podsel_reschedulable(p, pv, KP_ARRAY_SIZE(pv), NOW));
        p = kp_pod_view(other);
        assert_null(kp_pdbs_block_eviction(&p, 1, pv, KP_ARRAY_SIZE(pv), NOW, buf, sizeof(buf)));
        assert_true(kp_podsel_reschedulable(p, pv, KP_ARRAY_SIZE(pv), NOW));
        /* Only the PDBs of namespaces before the pod's ("a", "c"): none of them is its. */
        assert_null(kp_pdbs_block_eviction(&p, 1, pv, sorted ? 3 : 0, NOW, buf, sizeof(buf)));
        /* Only those after it ("e", "zz"), whose empty selectors would select it. */
        p = kp_pod_view(web);
        assert_null(kp_pdbs_block_eviction(&p, 1, pv + 4, sorted ? 2 : 0, NOW, buf, sizeof(buf)));
    }
    assert_string_equal(pv[0]->e.key, "a/a");
    assert_string_equal(pv[1]->e.key, "a/b");
    assert_string_equal(pv[2]->e.key, "c/c");
    assert_string_equal(pv[3]->e.key, "d/web");
    assert_string_equal(pv[4]->e.key, "e/all");
    assert_string_equal(pv[5]->e.key, "zz/z");
    kp_entry_unref(web);
    kp_entry_unref(other);
    for (size_t j = 0; j < KP_ARRAY_SIZE(specs); j++)
        kp_entry_unref(pe[j]);
}

/* --- the round ---------------------------------------------------------------------------- */

struct round_fx {
    struct kp_entry *pending[6], *deleting[3], *pdb;
};

static int round_fx_make(struct round_fx *fx)
{
    static const char *const pend[][2] = {
        {"", ""}, /* valid */
        {",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":"
         "\"ds\",\"uid\":\"d1\"}]",
         ""},                                                          /* skipped */
        {"", ",\"nodeSelector\":{\"kubernetes.io/hostname\":\"h1\"}"}, /* invalid */
        {"", REQUIRED(TERM("{\"key\":\"karpenter.sh/nodepool\",\"operator\":\"DoesNotExist\"}"))},
        {"", ",\"resourceClaims\":[{\"name\":\"g\",\"resourceClaimName\":\"c\"}]"}, /* DRA */
        {",\"labels\":{\"app\":\"web\"}", ""},                                      /* valid */
    };
    static const char *const del[][2] = {
        {",\"labels\":{\"app\":\"web\"}", ""}, /* blocked by the PDB */
        {"", ""},                              /* reschedulable */
        {"", ",\"resourceClaims\":[{\"name\":\"g\",\"resourceClaimName\":\"c\"}]"}, /* DRA */
    };
    static const char pdb_json[] =
        "{\"metadata\":{\"name\":\"web\",\"namespace\":\"d\"},\"spec\":{\"maxUnavailable\":0,"
        "\"selector\":{\"matchLabels\":{\"app\":\"web\"}}}}";
    char json[4096];
    int r, n;

    memset(fx, 0, sizeof(*fx));
    for (size_t i = 0; i < KP_ARRAY_SIZE(pend); i++) {
        n = snprintf(json, sizeof(json), POD_FMT, pend[i][0], pend[i][1], "");
        if ((r = kp_pod_decode(json, (size_t)n, &fx->pending[i])) < 0)
            return r;
    }
    for (size_t i = 0; i < KP_ARRAY_SIZE(del); i++) {
        n = snprintf(json, sizeof(json), POD_FMT_STATUS, del[i][0], del[i][1], RUNNING_STATUS);
        if ((r = kp_pod_decode(json, (size_t)n, &fx->deleting[i])) < 0)
            return r;
    }
    return kp_pdb_decode(pdb_json, sizeof(pdb_json) - 1, &fx->pdb);
}

static void round_fx_free(struct round_fx *fx)
{
    for (size_t i = 0; i < KP_ARRAY_SIZE(fx->pending); i++)
        kp_entry_unref(fx->pending[i]);
    for (size_t i = 0; i < KP_ARRAY_SIZE(fx->deleting); i++)
        kp_entry_unref(fx->deleting[i]);
    kp_entry_unref(fx->pdb);
}

static int round_select(struct round_fx *fx, struct kp_podsel_round *ret)
{
    const struct kp_pod_view *pend[6], *del[3];
    const struct kp_pdb_view *pdbs[1] = {(const struct kp_pdb_view *)fx->pdb};
    struct kp_podsel_input in = {.pending = pend,
                                 .n_pending = 6,
                                 .deleting = del,
                                 .n_deleting = 3,
                                 .pdbs = pdbs,
                                 .n_pdbs = 1,
                                 .now_usec = NOW,
                                 .pvcs = NULL};

    for (size_t i = 0; i < 6; i++)
        pend[i] = kp_pod_view(fx->pending[i]);
    for (size_t i = 0; i < 3; i++)
        del[i] = kp_pod_view(fx->deleting[i]);
    return kp_podsel_select(&in, ret);
}

static void test_round(void **state)
{
    struct round_fx fx;
    struct kp_podsel_round r;

    (void)state;
    assert_int_equal(round_fx_make(&fx), 0);
    assert_int_equal(round_select(&fx, &r), 0);
    assert_int_equal(r.n_pods, 3);
    assert_int_equal(r.n_pending, 2);
    assert_ptr_equal(r.pods[0], kp_pod_view(fx.pending[0]));
    assert_ptr_equal(r.pods[1], kp_pod_view(fx.pending[5])); /* a PDB does not hold pending pods */
    assert_ptr_equal(r.pods[2], kp_pod_view(fx.deleting[1]));
    assert_int_equal(r.skipped, 1);
    assert_int_equal(r.not_resched, 1);
    assert_int_equal(r.ignored, 2);
    assert_int_equal(r.n_refused, 4);
    assert_ptr_equal(r.refused[0].pod, kp_pod_view(fx.pending[2]));
    assert_int_equal(r.refused[0].verdict, KP_PODSEL_INVALID);
    assert_string_equal(r.refused[0].message, RESTRICTED("kubernetes.io/hostname"));
    assert_int_equal(r.refused[1].verdict, KP_PODSEL_AVOIDS_KARPENTER);
    assert_int_equal(r.refused[2].verdict, KP_PODSEL_DRA);
    assert_false(r.refused[2].from_deleting);
    assert_ptr_equal(r.refused[3].pod, kp_pod_view(fx.deleting[2]));
    assert_int_equal(r.refused[3].verdict, KP_PODSEL_DRA);
    assert_true(r.refused[3].from_deleting);
    assert_string_equal(r.refused[3].message, DRA);
    kp_podsel_round_done(&r);
    assert_null(r.pods);
    kp_podsel_round_done(NULL);

    {
        struct kp_podsel_input empty = {0};

        assert_int_equal(kp_podsel_select(&empty, &r), 0);
        assert_int_equal(r.n_pods, 0);
        assert_int_equal(r.n_refused, 0);
        kp_podsel_round_done(&r);
    }
    round_fx_free(&fx);
}

/* Built once in main(), before the sweep: decoding is the projection's to torture (and jansson
 * does not survive every failed allocation inside its parser), selecting is this module's. */
static struct round_fx round_fixture;

static int torture_round(void)
{
    struct kp_podsel_round r;
    int rc;

    if ((rc = round_select(&round_fixture, &r)) == 0) {
        if (r.n_pods != 3 || r.n_refused != 4 || r.ignored != 2 || r.skipped != 1)
            rc = 1; /* positive: the sweep reports a wrong answer, not a failed allocation */
        kp_podsel_round_done(&r);
    }
    return rc;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_provisionable),      cmocka_unit_test(test_validate),
        cmocka_unit_test(test_validate_pvcs),      cmocka_unit_test(test_reschedulable),
        cmocka_unit_test(test_block_eviction),     cmocka_unit_test(test_block_eviction_pods),
        cmocka_unit_test(test_pdbs_sorted_lookup), cmocka_unit_test(test_round),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_round),
    };

    int rc;

    if (round_fx_make(&round_fixture) < 0) {
        fprintf(stderr, "provpods: cannot build the round fixture\n");
        return 1;
    }
    rc = kp_test_main("provpods", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                      argv);
    round_fx_free(&round_fixture);
    return rc;
}
