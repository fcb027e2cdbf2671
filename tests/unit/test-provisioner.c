/* tests/unit/test-provisioner.c: the NodeClaim the provisioner creates for a planned claim
 * (kp_provisioner_nodeclaim): Karpenter's NodeClaimTemplate, field by field, and an object the
 * NodeClaim projection and validation accept as it is. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "json/json.h"
#include "api/obj-karpenter.h"
#include "api/requirements.h"
#include "core/core.h"
#include "core/nodepool/hash.h"
#include "core/provider.h"
#include "core/provisioning/provisioner.h"
#include "core/provisioning/scheduler.h"

static const char POOL[] =
    "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{\"name\":\"general\","
    "\"uid\":\"np-uid\",\"resourceVersion\":\"7\"},\"spec\":{\"template\":{\"metadata\":"
    "{\"labels\":{\"team\":\"web\"},\"annotations\":{\"example.com/owner\":\"ops\"}},\"spec\":"
    "{\"nodeClassRef\":{\"group\":\"karpenter.kpssh.dev\",\"kind\":\"SSHNodeClass\",\"name\":"
    "\"rack-a\"},\"taints\":[{\"key\":\"dedicated\",\"value\":\"web\",\"effect\":\"NoSchedule\"}],"
    "\"startupTaints\":[{\"key\":\"example.com/agent\",\"effect\":\"NoExecute\"}],"
    "\"expireAfter\":\"720h\",\"terminationGracePeriod\":\"48h\",\"requirements\":[{\"key\":"
    "\"karpenter.sh/capacity-type\",\"operator\":\"In\",\"values\":[\"on-demand\"]}]}}}}";

static struct kp_entry *pool_entry(const char *json)
{
    struct kp_entry *e = NULL;

    assert_int_equal(kp_nodepool_decode(json, strlen(json), &e), 0);
    return e;
}

static void add(struct kp_reqset *s, const char *key, enum kp_selector_op op, const char *const *v,
                size_t n, uint32_t min_values)
{
    assert_int_equal(kp_reqset_add(s, key, op, v, n, min_values), 0);
}

static const char *str_at(const json_t *o, const char *const *path)
{
    const char *s = NULL;

    if (kp_json_pathv_str(o, path, &s) < 0)
        return NULL;
    return s;
}

/* The requirement entry of key with operator op, or NULL. */
static json_t *req_of(const json_t *o, const char *key, const char *op)
{
    json_t *arr = NULL;

    assert_int_equal(kp_json_path_array(o, "spec.requirements", &arr), 0);
    for (size_t i = 0; kp_json_array_at(arr, i); i++) {
        json_t *e = kp_json_array_at(arr, i);
        const char *k = NULL, *p = NULL;

        if (kp_json_get_str(e, "key", &k) == 0 && kp_json_get_str(e, "operator", &p) == 0 &&
            strcmp(k, key) == 0 && strcmp(p, op) == 0)
            return e;
    }
    return NULL;
}

static void test_template(void **state)
{
    struct kp_entry *pe = pool_entry(POOL), *back = NULL;
    const struct kp_nodepool_view *np = kp_nodepool_view(pe);
    struct kp_sched_claim c = {0};
    struct kp_sched_res req[] = {
        {"cpu", 1500}, {"memory", 2 * 1073741824LL * 1000}, {"pods", 3000}};
    const char *types[] = {"rack-a-big", "rack-a-small"};
    const char *zone[] = {"dc1"};
    const char *notin[] = {"arm64"};
    const char *region[] = {"eu", "us"};
    char hash[KP_NODEPOOL_HASH_MAX];
    struct kp_buf dump = KP_BUF_INIT(1 << 16), msg = KP_BUF_INIT(4096);
    json_t *o = NULL, *e;
    int64_t mv = 0;

    (void)state;
    add(&c.reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, types, 2, 2);
    add(&c.reqs, KP_LABEL_ZONE, KP_SEL_IN, zone, 1, 0);
    add(&c.reqs, KP_LABEL_ARCH, KP_SEL_NOT_IN, notin, 1, 0);
    add(&c.reqs, "example.com/rack", KP_SEL_IN, (const char *[]){"r7"}, 1, 0);
    add(&c.reqs, "example.com/region", KP_SEL_IN, region, 2, 0);
    add(&c.reqs, "example.com/gen", KP_SEL_GT, (const char *[]){"3"}, 1, 0);
    add(&c.reqs, "example.com/any", KP_SEL_EXISTS, NULL, 0, 0);
    add(&c.reqs, KP_CORE_LABEL_REGISTERED, KP_SEL_IN, (const char *[]){"true"}, 1, 0);
    c.requests = req;
    c.n_requests = KP_ARRAY_SIZE(req);
    c.min_values_relaxed = true;

    assert_int_equal(kp_provisioner_nodeclaim(np, &c, &o), 0);
    assert_int_equal(kp_json_dump(o, 0, &dump), 0);

    assert_string_equal(str_at(o, KP_JSON_PATH("apiVersion")), "karpenter.sh/v1");
    assert_string_equal(str_at(o, KP_JSON_PATH("kind")), "NodeClaim");
    assert_string_equal(str_at(o, KP_JSON_PATH("metadata", "generateName")), "general-");
    /* labels: template, ours, and the custom ones the requirements pin to one value */
    assert_string_equal(str_at(o, KP_JSON_PATH("metadata", "labels", "team")), "web");
    assert_string_equal(str_at(o, KP_JSON_PATH("metadata", "labels", "karpenter.sh/nodepool")),
                        "general");
    assert_string_equal(
        str_at(o, KP_JSON_PATH("metadata", "labels", "karpenter.kpssh.dev/sshnodeclass")),
        "rack-a");
    assert_string_equal(str_at(o, KP_JSON_PATH("metadata", "labels", "example.com/rack")), "r7");
    /* a finite set pins its first value (deterministic); a complement pins none */
    assert_string_equal(str_at(o, KP_JSON_PATH("metadata", "labels", "example.com/region")), "eu");
    assert_null(str_at(o, KP_JSON_PATH("metadata", "labels", "example.com/gen")));
    assert_null(str_at(o, KP_JSON_PATH("metadata", "labels", "example.com/any")));
    assert_null(str_at(o, KP_JSON_PATH("metadata", "labels", KP_LABEL_ZONE))); /* well-known */
    assert_null(str_at(o, KP_JSON_PATH("metadata", "labels", KP_CORE_LABEL_REGISTERED)));
    /* annotations */
    kp_nodepool_hash(np, hash);
    assert_string_equal(
        str_at(o, KP_JSON_PATH("metadata", "annotations", "karpenter.sh/nodepool-hash")), hash);
    assert_string_equal(
        str_at(o, KP_JSON_PATH("metadata", "annotations", "karpenter.sh/nodepool-hash-version")),
        KP_NODEPOOL_HASH_VERSION);
    assert_string_equal(str_at(o, KP_JSON_PATH("metadata", "annotations", "example.com/owner")),
                        "ops");
    assert_string_equal(
        str_at(o, KP_JSON_PATH("metadata", "annotations", KP_PROVISIONER_ANN_MIN_VALUES_RELAXED)),
        "true");
    /* owner */
    assert_non_null(strstr(kp_buf_str(&dump),
                           "\"ownerReferences\":[{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":"
                           "\"NodePool\",\"name\":\"general\",\"uid\":\"np-uid\","
                           "\"blockOwnerDeletion\":true}]"));
    /* spec */
    assert_string_equal(str_at(o, KP_JSON_PATH("spec", "resources", "requests", "cpu")), "1500m");
    assert_string_equal(str_at(o, KP_JSON_PATH("spec", "resources", "requests", "memory")), "2Gi");
    assert_string_equal(str_at(o, KP_JSON_PATH("spec", "resources", "requests", "pods")), "3");
    assert_string_equal(str_at(o, KP_JSON_PATH("spec", "nodeClassRef", "name")), "rack-a");
    assert_string_equal(str_at(o, KP_JSON_PATH("spec", "expireAfter")), "720h");
    assert_string_equal(str_at(o, KP_JSON_PATH("spec", "terminationGracePeriod")), "48h");
    assert_non_null(strstr(kp_buf_str(&dump), "\"taints\":[{\"key\":\"dedicated\",\"value\":"
                                              "\"web\",\"effect\":\"NoSchedule\"}]"));
    assert_non_null(strstr(kp_buf_str(&dump), "\"startupTaints\":[{\"key\":"
                                              "\"example.com/agent\",\"effect\":\"NoExecute\"}]"));
    /* requirements: In with minValues, NotIn, the bound as Gte (Gt 3 is Gte 4), Exists; no
     * simulation key */
    assert_non_null(e = req_of(o, KP_LABEL_INSTANCE_TYPE, "In"));
    assert_int_equal(kp_json_get_int(e, "minValues", &mv), 0);
    assert_int_equal(mv, 2);
    assert_non_null(req_of(o, KP_LABEL_ARCH, "NotIn"));
    assert_non_null(e = req_of(o, "example.com/gen", "Gte"));
    assert_non_null(strstr(kp_buf_str(&dump), "\"key\":\"example.com/gen\",\"operator\":\"Gte\","
                                              "\"values\":[\"4\"]"));
    assert_non_null(req_of(o, "example.com/any", "Exists"));
    assert_null(req_of(o, KP_CORE_LABEL_REGISTERED, "In"));

    /* The object is a NodeClaim our projection takes and our validation passes (the name the
     * API server would give it stands in for generateName). */
    assert_int_equal(kp_json_patch_set_str(o, KP_JSON_PATH("metadata", "name"), "general-x7k2q"),
                     0);
    assert_int_equal(kp_nodeclaim_project(o, &back), 0);
    if (kp_nodeclaim_validate(kp_nodeclaim_view(back), &msg) != 0)
        fail_msg("validation refused the NodeClaim: %s", kp_buf_str(&msg));
    assert_int_equal(kp_nodeclaim_view(back)->spec.requirements.n, 7);
    assert_string_equal(kp_nodeclaim_view(back)->nodepool, "general");

    kp_entry_unref(back);
    kp_buf_done(&dump);
    kp_buf_done(&msg);
    kp_json_unref(o);
    kp_reqset_done(&c.reqs);
    kp_entry_unref(pe);
}

/* A NodePool without a template's extras: no taints, no TGP, no relaxed annotation, no owner
 * uid invented. */
static void test_minimal(void **state)
{
    struct kp_entry *pe = pool_entry(
        "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":{\"name\":\"p\","
        "\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{\"template\":{\"spec\":{"
        "\"nodeClassRef\":{\"group\":\"karpenter.kpssh.dev\",\"kind\":\"SSHNodeClass\","
        "\"name\":\"c\"},\"requirements\":[]}}}}");
    struct kp_sched_claim c = {0};
    struct kp_buf dump = KP_BUF_INIT(1 << 14);
    json_t *o = NULL;

    (void)state;
    add(&c.reqs, KP_LABEL_INSTANCE_TYPE, KP_SEL_IN, (const char *[]){"c"}, 1, 0);
    assert_int_equal(kp_provisioner_nodeclaim(kp_nodepool_view(pe), &c, &o), 0);
    assert_int_equal(kp_json_dump(o, 0, &dump), 0);
    assert_null(strstr(kp_buf_str(&dump), "taints"));
    assert_null(strstr(kp_buf_str(&dump), "terminationGracePeriod"));
    assert_null(strstr(kp_buf_str(&dump), KP_PROVISIONER_ANN_MIN_VALUES_RELAXED));
    assert_null(strstr(kp_buf_str(&dump), "\"resources\""));
    assert_non_null(strstr(kp_buf_str(&dump), "\"requirements\":[{\"key\":"
                                              "\"node.kubernetes.io/instance-type\",\"operator\":"
                                              "\"In\",\"values\":[\"c\"]}]"));
    kp_buf_done(&dump);
    kp_json_unref(o);
    kp_reqset_done(&c.reqs);
    kp_entry_unref(pe);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_template),
        cmocka_unit_test(test_minimal),
    };

    return kp_test_main("unit-provisioner", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
