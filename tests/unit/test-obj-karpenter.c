/* Tests for the karpenter.sh/v1 projections (api/obj-karpenter.c): every kept field of a NodePool
 * and a NodeClaim as the API server returns them (defaults applied), the nodeClassRef ownership test,
 * fingerprints that ignore the resourceVersion and condition re-stamps, lenient projection of
 * objects the CRD would refuse, the exact validation reports, and allocation failures. Prints
 * the cache bytes of a typical NodeClaim (the figure bench/ would report; see the end). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"

#define MI (1024LL * 1024 * 1000) /* one MiB in milli-bytes */
#define GI (1024 * MI)

static struct kp_entry *decode_file(const char *name,
                                    int (*decode)(const char *, size_t, struct kp_entry **))
{
    struct kp_entry *e = NULL;
    size_t n;
    char *data = kp_test_read_data(name, &n);

    assert_int_equal(decode(data, n, &e), 0);
    kp_free(data);
    return e;
}

/* Replaces every occurrence of from by to (same length) in s. */
static void patch(char *s, const char *from, const char *to)
{
    char *at;

    assert_int_equal(strlen(from), strlen(to));
    assert_non_null(strstr(s, from));
    while ((at = strstr(s, from)))
        memcpy(at, to, strlen(to));
}

static void test_nodepool_full(void **state)
{
    struct kp_entry *e = decode_file("objects/nodepool.json", kp_nodepool_decode);
    const struct kp_nodepool_view *v = kp_nodepool_view(e);
    struct kp_labels ok = {
        .v = (const struct kp_label[]){{"kubernetes.io/arch", "arm64"},
                                       {"karpenter.sh/capacity-type", "on-demand"},
                                       {"node.kubernetes.io/instance-type", "large"},
                                       {"karpenter.kpssh.dev/cpu", "4"}},
        .n = 4};
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);

    (void)state;
    assert_string_equal(e->key, "ssh-general");
    assert_string_equal(e->ns, "");
    assert_string_equal(e->rv, "918273");
    assert_int_equal(v->generation, 3);
    assert_true(kp_nodepool_is_ours(v));
    /* Own annotations: only the karpenter.sh domain (no last-applied copy). */
    assert_int_equal(v->annotations.n, 2);
    assert_string_equal(kp_labels_get(&v->annotations, "karpenter.sh/nodepool-hash"),
                        "6821555240594823858");
    assert_string_equal(kp_labels_get(&v->tmpl_labels, "karpenter.kpssh.dev/managed"), "true");
    assert_string_equal(kp_labels_get(&v->tmpl_annotations, "example.com/owner"), "platform");
    assert_string_equal(v->tmpl.node_class_ref.name, "default");
    assert_null(v->tmpl.reqs_error);
    assert_int_equal(v->tmpl.requirements.n, 4);
    assert_true(kp_reqs_match(&v->tmpl.requirements, &ok));
    for (size_t i = 0; i < v->tmpl.requirements.n; i++)
        if (strcmp(v->tmpl.requirements.v[i].key, "node.kubernetes.io/instance-type") == 0)
            assert_int_equal(v->tmpl.requirements.v[i].min_values, 1);
    assert_int_equal(v->tmpl.taints.n, 1);
    assert_string_equal(v->tmpl.taints.v[0].value, "edge");
    assert_int_equal(v->tmpl.startup_taints.n, 1);
    assert_int_equal(v->tmpl.startup_taints.v[0].effect, KP_TAINT_NO_SCHEDULE);
    assert_string_equal(v->tmpl.expire_after.text, "720h");
    assert_true(v->tmpl.expire_after.valid);
    assert_false(v->tmpl.expire_after.never);
    assert_int_equal(v->tmpl.expire_after.ns, 720 * KP_NSEC_PER_HOUR);
    assert_int_equal(v->tmpl.termination_grace_period.ns, 48 * KP_NSEC_PER_HOUR);
    assert_int_equal(v->consolidation_policy, KP_CONSOLIDATE_WHEN_EMPTY_OR_UNDERUTILIZED);
    assert_int_equal(v->consolidate_after.ns, 5 * KP_NSEC_PER_MIN);
    assert_true(v->budgets_set);
    assert_int_equal(v->n_budgets, 2);
    assert_string_equal(v->budgets[0].nodes, "10%");
    assert_null(v->budgets[0].schedule);
    assert_int_equal(v->budgets[0].reasons, 0);
    assert_string_equal(v->budgets[1].nodes, "0");
    assert_string_equal(v->budgets[1].schedule, "0 9 * * mon-fri");
    assert_string_equal(v->budgets[1].duration, "8h");
    assert_int_equal(v->budgets[1].reasons, KP_DISRUPT_DRIFTED | KP_DISRUPT_UNDERUTILIZED);
    assert_int_equal(kp_resources_get(&v->limits, "cpu", NULL), 64000);
    assert_int_equal(kp_resources_get(&v->limits, "memory", NULL), 256 * GI);
    assert_int_equal(v->weight, 10);
    assert_int_equal(v->replicas, -1);
    assert_int_equal(kp_conditions_get(&v->conditions, "Ready")->status, KP_COND_TRUE);
    assert_int_equal(kp_resources_get(&v->resources, "nodes", NULL), 2000);
    assert_int_equal(v->nodes, 2);
    assert_int_equal(v->node_class_observed_generation, 1);
    assert_int_equal(kp_nodepool_validate(v, &msg), 0);
    assert_int_equal(msg.len, 0);
    kp_buf_done(&msg);
    kp_entry_unref(e);
}

/* Another Karpenter's pool: projected, valid, not ours; defaults as the types define them. */
static void test_nodepool_minimal(void **state)
{
    struct kp_entry *e = decode_file("objects/nodepool-minimal.json", kp_nodepool_decode);
    const struct kp_nodepool_view *v = kp_nodepool_view(e);

    (void)state;
    assert_false(kp_nodepool_is_ours(v));
    assert_false(v->budgets_set);
    assert_int_equal(v->n_budgets, 1);
    assert_string_equal(v->budgets[0].nodes, "10%");
    assert_null(v->tmpl.expire_after.text);
    assert_null(v->consolidate_after.text);
    assert_int_equal(v->weight, 0);
    assert_int_equal(v->tmpl_labels.n, 0);
    assert_int_equal(v->conditions.n, 0);
    assert_int_equal(kp_nodepool_validate(v, NULL), 0);
    kp_entry_unref(e);
}

/* The resourceVersion and managedFields change nothing we keep; a new weight does. A condition's
 * message and observedGeneration are kept (the core rewrites the whole conditions list from the
 * cache, core/conds.h), so a re-stamp is a change. */
static void test_nodepool_fingerprint(void **state)
{
    size_t n;
    char *data = kp_test_read_data("objects/nodepool.json", &n);
    struct kp_entry *a = NULL, *b = NULL, *c = NULL;

    (void)state;
    assert_int_equal(kp_nodepool_decode(data, n, &a), 0);
    patch(data, "\"918273\"", "\"918999\"");
    patch(data, "kubectl-client-side-apply", "kubectl-server-side-apply");
    assert_int_equal(kp_nodepool_decode(data, n, &b), 0);
    assert_string_equal(b->rv, "918999");
    assert_true(a->hash == b->hash);
    assert_int_equal(a->bytes, b->bytes);
    patch(data, "\"weight\":10", "\"weight\":20");
    assert_int_equal(kp_nodepool_decode(data, n, &c), 0);
    assert_true(a->hash != c->hash);
    kp_entry_unref(a);
    kp_entry_unref(b);
    kp_entry_unref(c);
    kp_free(data);
}

static void expect_report(const struct kp_buf *msg, int r, const char *expected)
{
    int lines = 0;

    for (const char *p = expected; *p; p++)
        lines += *p == '\n';
    if (r != lines || strcmp(kp_buf_str(msg), expected) != 0) {
        print_error("got %d problems:\n%s", r, kp_buf_str(msg));
        fail_msg("got %d problems:\n%s\nexpected %d:\n%s", r, kp_buf_str(msg), lines, expected);
    }
}

/* An object the CRD would refuse still projects, and the report says what to fix. */
static void test_nodepool_invalid(void **state)
{
    struct kp_entry *e = decode_file("objects/nodepool-invalid.json", kp_nodepool_decode);
    const struct kp_nodepool_view *v = kp_nodepool_view(e);
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);

    (void)state;
    assert_false(v->tmpl.expire_after.valid); /* "30d": not even a Go duration */
    assert_true(v->consolidate_after.valid);  /* "1.5m": Go parses it, the CRD pattern refuses */
    assert_int_equal(v->consolidation_policy, KP_CONSOLIDATE_UNKNOWN);
    expect_report(
        &msg, kp_nodepool_validate(v, &msg),
        "spec.template.metadata.labels: label \"karpenter.sh/nodepool\" is restricted (Karpenter "
        "sets it on each node)\n"
        "spec.template.metadata.labels: key \"karpenter.sh/custom\": label domain \"karpenter.sh\" "
        "is restricted (only karpenter.sh/capacity-type may be set)\n"
        "spec.template.metadata.labels[\"ok\"]: value \"bad value!\": a valid label value must "
        "be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character\n"
        "spec.template.spec.nodeClassRef.group: \"karpenter.kpssh.dev/v1beta1\" may not contain "
        "'/': give the API group only, without a version\n"
        "spec.template.spec.nodeClassRef.kind: kind may not be empty: give the node class's "
        "kind, such as SSHNodeClass\n"
        "spec.template.spec.requirements: key \"karpenter.kpssh.dev/cpu\": requirements operator "
        "'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value (Gt has -1)\n"
        "spec.template.spec.requirements: key \"karpenter.sh/capacity-type\": no value is "
        "on-demand, spot or reserved, so no instance type can match (SSH hosts are on-demand)\n"
        "spec.template.spec.taints[1].key: \"bad key\" is not a valid taint key: use an optional "
        "DNS prefix and '/', then up to 63 of A-Z a-z 0-9 - _ .\n"
        "spec.template.spec.taints: taint \"a:NoSchedule\" appears more than once across taints "
        "and startupTaints\n"
        "spec.template.spec.expireAfter: \"30d\" is not a duration: write whole numbers with s, "
        "m or h, such as 30s, 10m or 720h, or Never\n"
        "spec.template.spec.terminationGracePeriod: \"Never\" is not a duration: write whole "
        "numbers with s, m or h, such as 30s, 10m or 720h\n"
        "spec.disruption.consolidationPolicy: must be WhenEmpty, WhenEmptyOrUnderutilized or "
        "Balanced\n"
        "spec.disruption.consolidateAfter: \"1.5m\" is not a duration: write whole numbers with "
        "s, m or h, such as 30s, 10m or 720h, or Never\n"
        "spec.disruption.budgets[0].nodes: \"150%\" must be a node count such as 5 or a "
        "percentage from 0% to 100% such as 10%\n"
        "spec.disruption.budgets[1]: 'schedule' must be set with 'duration'\n"
        "spec.disruption.budgets[2].duration: \"30s\" must be hours and minutes such as 8h, 30m "
        "or 1h30m\n"
        "spec.disruption.budgets[2].reasons: each reason must be Underutilized, Empty, "
        "Drifted or Unhealthy\n"
        "spec.weight: 'weight' is not supported on static NodePools (spec.replicas)\n"
        "spec.limits: only 'limits.nodes' is supported on static NodePools (spec.replicas)\n");
    kp_buf_done(&msg);
    kp_entry_unref(e);
}

/* Karpenter v1.15's budget reason Unhealthy (node repair) has its own bit and is valid; a NodePool
 * that limits repair (the only reason the newest CRD adds) must not be reported as wrong. */
static void test_budget_reason_unhealthy(void **state)
{
    const char *obj =
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"disruption\":{\"budgets\":[{\"nodes\":"
        "\"1\",\"reasons\":[\"Unhealthy\"]},{\"nodes\":\"10%\",\"reasons\":[\"Empty\","
        "\"Unhealthy\"]}]},\"template\":{\"spec\":{\"nodeClassRef\":{\"group\":"
        "\"karpenter.kpssh.dev\",\"kind\":\"SSHNodeClass\",\"name\":\"d\"},"
        "\"requirements\":[]}}}}";
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    struct kp_entry *e = NULL;
    const struct kp_nodepool_view *v;

    (void)state;
    assert_int_equal(kp_nodepool_decode(obj, strlen(obj), &e), 0);
    v = kp_nodepool_view(e);
    assert_int_equal(v->n_budgets, 2);
    assert_int_equal(v->budgets[0].reasons, KP_DISRUPT_UNHEALTHY);
    assert_int_equal(v->budgets[1].reasons, KP_DISRUPT_EMPTY | KP_DISRUPT_UNHEALTHY);
    assert_int_equal(kp_nodepool_validate(v, &msg), 0);
    assert_int_equal(msg.len, 0);
    kp_buf_done(&msg);
    kp_entry_unref(e);
}

/* A requirement list the selector builder refuses (In with fewer values than minValues) is kept
 * as a message naming the entry, not a decoding failure. */
static void test_requirements_error_kept(void **state)
{
    const char *obj =
        "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"nodeClassRef\":{\"group\":\"karpenter.kpssh."
        "dev\",\"kind\":\"SSHNodeClass\",\"name\":\"d\"},\"requirements\":[{\"key\":\"a\","
        "\"operator\":\"Exists\"},{\"key\":\"b\",\"operator\":\"In\",\"values\":[\"x\"],"
        "\"minValues\":3}]}}";
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    struct kp_entry *e = NULL;
    const struct kp_nodeclaim_view *v;
    int r;

    (void)state;
    assert_int_equal(kp_nodeclaim_decode(obj, strlen(obj), &e), 0);
    v = kp_nodeclaim_view(e);
    assert_int_equal(v->spec.requirements.n, 0);
    assert_non_null(v->spec.reqs_error);
    assert_true(kp_startswith(v->spec.reqs_error, "spec.requirements[1]: "));
    r = kp_nodeclaim_validate(v, &msg);
    assert_int_equal(r, 1);
    assert_true(kp_startswith(kp_buf_str(&msg), "spec.requirements[1]: "));
    kp_buf_done(&msg);
    kp_entry_unref(e);
}

static void test_nodeclaim(void **state)
{
    struct kp_entry *e = decode_file("objects/nodeclaim.json", kp_nodeclaim_decode);
    const struct kp_nodeclaim_view *v = kp_nodeclaim_view(e);

    (void)state;
    assert_string_equal(e->key, "ssh-general-x7k2p");
    assert_true(kp_nodeclaim_is_ours(v));
    assert_string_equal(v->nodepool, "ssh-general");
    assert_string_equal(kp_owner_refs_controller(&v->meta.owners) ? "ctl" : "none", "none");
    assert_string_equal(v->meta.owners.v[0].kind, "NodePool");
    assert_int_equal(v->annotations.n, 5); /* all but last-applied-configuration */
    assert_string_equal(kp_labels_get(&v->annotations, "karpenter.kpssh.dev/nodeclass-hash"),
                        "4f2a9c1d0b7e6a35");
    assert_null(kp_labels_get(&v->annotations, "kubectl.kubernetes.io/last-applied-configuration"));
    assert_int_equal(v->n_finalizers, 1);
    assert_string_equal(v->finalizers[0], "karpenter.sh/termination");
    assert_int_equal(v->meta.deletion_usec, 0);
    assert_int_equal(v->spec.requirements.n, 5);
    assert_int_equal(kp_resources_get(&v->requests, "cpu", NULL), 1350);
    assert_int_equal(kp_resources_get(&v->requests, "memory", NULL), 1280 * MI);
    assert_int_equal(v->spec.taints.n, 1);
    assert_int_equal(v->spec.startup_taints.n, 1);
    assert_int_equal(v->spec.expire_after.ns, 720 * KP_NSEC_PER_HOUR);
    assert_int_equal(v->spec.termination_grace_period.ns, 48 * KP_NSEC_PER_HOUR);
    assert_string_equal(v->provider_id, "kpssh://kpssh-system/edge-03");
    assert_string_equal(v->node_name, "edge-03");
    assert_string_equal(v->image_id, "debian-12");
    assert_int_equal(kp_resources_get(&v->capacity, "memory", NULL), 4 * GI);
    assert_int_equal(kp_resources_get(&v->allocatable, "cpu", NULL), 1920);
    assert_int_equal(kp_conditions_get(&v->conditions, "Registered")->status, KP_COND_TRUE);
    assert_int_equal(kp_conditions_get(&v->conditions, "Consolidatable")->status, KP_COND_TRUE);
    assert_null(kp_conditions_get(&v->conditions, "Drifted"));
    assert_int_equal(v->last_pod_event_usec,
                     kp_conditions_get(&v->conditions, "Initialized")->last_transition_usec);
    assert_int_equal(kp_nodeclaim_validate(v, NULL), 0);
    /* The figure bench/ would report: cache bytes of a typical NodeClaim. */
    print_message("cache bytes per NodeClaim (typical, tests/data/objects/nodeclaim.json): %zu\n",
                  e->bytes);
    assert_true(e->bytes < 4096);
    kp_entry_unref(e);
}

/* Being deleted: deletionTimestamp kept; a new resourceVersion changes nothing; a new condition
 * status does. */
static void test_nodeclaim_fingerprint(void **state)
{
    size_t n;
    char *data = kp_test_read_data("objects/nodeclaim.json", &n);
    struct kp_entry *a = NULL, *b = NULL, *c = NULL;

    (void)state;
    assert_int_equal(kp_nodeclaim_decode(data, n, &a), 0);
    patch(data, "\"918400\"", "\"918401\"");
    assert_int_equal(kp_nodeclaim_decode(data, n, &b), 0);
    assert_true(a->hash == b->hash);
    patch(data, "\"reason\":\"Consolidatable\",\"status\":\"True\"",
          "\"reason\":\"Consolidatable\",\"status\":\"Unkn\"");
    assert_int_equal(kp_nodeclaim_decode(data, n, &c), 0);
    assert_true(a->hash != c->hash);
    kp_entry_unref(a);
    kp_entry_unref(b);
    kp_entry_unref(c);
    kp_free(data);
}

/* Shapes a typed client could not decode are refused. */
static void test_rejects(void **state)
{
    static const char *const bad_pools[] = {
        "{\"metadata\":{\"name\":\"p\"}}", /* no spec */
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{}}",
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"x\"},\"spec\":{\"template\":{\"spec\":{}}}}",
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"template\":{\"spec\":{\"requirements\":{}}}}}",
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"template\":{\"spec\":{\"expireAfter\":720}}}}",
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"template\":{\"spec\":{}},\"limits\":{\"cpu\":"
        "\"lots\"}}}",
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"template\":{\"spec\":{}},\"disruption\":{"
        "\"budgets\":[\"10%\"]}}}",
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"template\":{\"spec\":{\"taints\":[{\"key\":"
        "\"a\",\"effect\":\"Sometimes\"}]}}}}",
    };
    static const char *const bad_claims[] = {
        "{\"metadata\":{\"name\":\"c\"}}",
        "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"requirements\":[{\"key\":1}]}}",
        "{\"metadata\":{\"name\":\"c\"},\"spec\":{},\"status\":{\"lastPodEventTime\":\"now\"}}",
        "{\"metadata\":{\"name\":\"c\"},\"spec\":{},\"status\":{\"providerID\":7}}",
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad_pools); i++) {
        struct kp_entry *e = NULL;
        int r = kp_nodepool_decode(bad_pools[i], strlen(bad_pools[i]), &e);

        if (r != -KP_EPARSE)
            fail_msg("pool case %zu: expected -KP_EPARSE, got %d", i, r);
        assert_null(e);
    }
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad_claims); i++) {
        struct kp_entry *e = NULL;
        int r = kp_nodeclaim_decode(bad_claims[i], strlen(bad_claims[i]), &e);

        if (r != -KP_EPARSE)
            fail_msg("claim case %zu: expected -KP_EPARSE, got %d", i, r);
        assert_null(e);
    }
}

static void test_value_checks(void **state)
{
    (void)state;
    assert_true(kp_valid_duration("720h", false));
    assert_true(kp_valid_duration("1h30m10s", false));
    assert_true(kp_valid_duration("Never", true));
    assert_false(kp_valid_duration("Never", false));
    assert_false(kp_valid_duration("", false));
    assert_false(kp_valid_duration("5", false));
    assert_false(kp_valid_duration("1.5h", false));
    assert_false(kp_valid_duration("300ms", false));
    assert_true(kp_valid_ip("10.0.0.1"));
    assert_true(kp_valid_ip("fd00::21"));
    assert_false(kp_valid_ip("010.0.0.1"));
    assert_false(kp_valid_ip("::ffff:10.0.0.1"));
    assert_false(kp_valid_ip("fe80::1%eth0"));
    assert_false(kp_valid_ip("host.example"));
    assert_false(kp_valid_ip(""));
}

/* At most KP_VALID_MAX_LINES lines, then a summary; the count is the full count. */
static void test_report_cap(void **state)
{
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    struct kp_valid c;
    const char *last;

    (void)state;
    kp_valid_init(&c, &msg);
    for (int i = 0; i < 25; i++)
        kp_valid_add(&c, "spec.x[%d]: bad", i);
    assert_int_equal(kp_valid_end(&c), 25);
    last = strrchr(kp_buf_str(&msg), 's');
    assert_non_null(strstr(kp_buf_str(&msg), "spec.x[19]: bad\n... and 5 more problems\n"));
    assert_null(strstr(kp_buf_str(&msg), "spec.x[20]"));
    (void)last;
    kp_buf_done(&msg);
}

/* Torture cases read their fixture once with the C library's allocator, outside the
 * allocation-failure window: kp_alloc_fail_at(0) inside a case would disarm the sweep, and
 * kp_test_read_data's own allocations would be failed instead of the code under test. The copies
 * stay reachable until exit. */
static const char *fixture(const char *name, size_t *ret_len)
{
    static struct {
        const char *name;
        char *data;
        size_t len;
    } cache[8];
    char path[512];
    FILE *f;
    size_t i;

    for (i = 0; i < KP_ARRAY_SIZE(cache) && cache[i].name; i++)
        if (strcmp(cache[i].name, name) == 0)
            break;
    assert_true(i < KP_ARRAY_SIZE(cache));
    if (!cache[i].name) {
        long n;

        assert_true(snprintf(path, sizeof(path), "%s/%s", kp_test_data_dir(), name) <
                    (int)sizeof(path));
        f = fopen(path, "rbe");
        assert_non_null(f);
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        assert_true(n > 0);
        rewind(f);
        cache[i].data = malloc((size_t)n + 1);
        assert_non_null(cache[i].data);
        assert_int_equal(fread(cache[i].data, 1, (size_t)n, f), (size_t)n);
        cache[i].data[n] = '\0';
        cache[i].len = (size_t)n;
        cache[i].name = name;
        (void)fclose(f);
    }
    *ret_len = cache[i].len;
    return cache[i].data;
}

static int torture_decode(const char *name, int (*decode)(const char *, size_t, struct kp_entry **),
                          int (*validate)(const struct kp_entry *, struct kp_buf *))
{
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    struct kp_entry *e = NULL;
    size_t n;
    const char *data = fixture(name, &n);
    int r;

    r = decode(data, n, &e);
    if (r == 0) {
        r = validate(e, &msg);
        r = r < 0 ? r : 0;
    }
    kp_buf_done(&msg);
    kp_entry_unref(e);
    return r;
}

static int validate_pool(const struct kp_entry *e, struct kp_buf *msg)
{
    return kp_nodepool_validate(kp_nodepool_view(e), msg);
}

static int validate_claim(const struct kp_entry *e, struct kp_buf *msg)
{
    return kp_nodeclaim_validate(kp_nodeclaim_view(e), msg);
}

static int torture_nodepool(void)
{
    return torture_decode("objects/nodepool.json", kp_nodepool_decode, validate_pool);
}

static int torture_nodepool_invalid(void)
{
    return torture_decode("objects/nodepool-invalid.json", kp_nodepool_decode, validate_pool);
}

static int torture_nodeclaim(void)
{
    return torture_decode("objects/nodeclaim.json", kp_nodeclaim_decode, validate_claim);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodepool_full),
        cmocka_unit_test(test_nodepool_minimal),
        cmocka_unit_test(test_nodepool_fingerprint),
        cmocka_unit_test(test_nodepool_invalid),
        cmocka_unit_test(test_budget_reason_unhealthy),
        cmocka_unit_test(test_requirements_error_kept),
        cmocka_unit_test(test_nodeclaim),
        cmocka_unit_test(test_nodeclaim_fingerprint),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_value_checks),
        cmocka_unit_test(test_report_cap),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_nodepool),
        KP_TORTURE(torture_nodepool_invalid),
        KP_TORTURE(torture_nodeclaim),
    };

    return kp_test_main("obj-karpenter", tests, KP_ARRAY_SIZE(tests), torture,
                        KP_ARRAY_SIZE(torture), argc, argv);
}
