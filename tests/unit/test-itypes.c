/* Unit tests of cmd/kpssh/itypes.c (kpssh simulate --instance-types): a good InstanceTypes
 * document becomes instance types shaped as the SSH provider's (requirement set with the
 * well-known keys, labels for single values, pods in capacity, summed overhead, micro-USD
 * prices); each malformed input is refused with -KP_EPARSE or -KP_ELIMIT and one line naming
 * the file, the item and the field; the wrapping provider answers every NodePool with the types
 * and forwards the rest. Then the parse under the allocation-failure sweep. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kp-test.h"
#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "api/obj-karpenter.h"
#include "api/requirements.h"
#include "core/provider.h"
#include "cmd/kpssh/itypes.h"

#define HEAD "apiVersion: kpssh.dev/v1alpha1\nkind: InstanceTypes\n"
#define ZONE(z) "{key: topology.kubernetes.io/zone, operator: In, values: [" z "]}"
#define CT(c) "{key: karpenter.sh/capacity-type, operator: In, values: [" c "]}"
#define OFF_OK "{requirements: [" ZONE("a") ", " CT("on-demand") "], price: 1}"
#define CAP_OK "capacity: {cpu: 1, memory: 1Gi}"
/* One item named x with the given fields after its name. */
#define ITEM(fields) HEAD "items:\n- {name: x, " fields "}\n"
#define ITEM_OK(fields) ITEM(CAP_OK ", offerings: [" OFF_OK "]" fields)

static const char good[] =
    HEAD "metadata: {name: lab}\n"
         "items:\n"
         "  - name: m.large\n"
         "    requirements:\n"
         "      - {key: example.com/family, operator: In, values: [m]}\n"
         "      - {key: kubernetes.io/arch, operator: In, values: [arm64]}\n"
         "      - {key: example.com/gen, operator: Gt, values: [\"5\"]}\n"
         "    capacity: {cpu: \"2\", memory: 8Gi, pods: 29, nvidia.com/gpu: 1}\n"
         "    overhead:\n"
         "      kubeReserved: {cpu: 100m, memory: 512Mi}\n"
         "      systemReserved: {cpu: 50m, memory: 256Mi}\n"
         "      evictionThreshold: {memory: 100Mi}\n"
         "    offerings:\n"
         "      - requirements: [" ZONE("a") ", " CT(
             "on-demand") "]\n"
                          "        price: 0.096\n"
                          "      - requirements: [" ZONE("b") ", " CT(
                              "spot") "]\n"
                                      "        price: 0.0312\n"
                                      "        available: false\n"
                                      "  - name: c.small\n"
                                      "    capacity: {cpu: 1, memory: 2Gi}\n"
                                      "    offerings: [" OFF_OK "]\n";

#define MI (1024LL * 1024 * 1000) /* 1Mi in milli-units */

static const char *label(const struct kp_instance_type *it, const char *key)
{
    return kp_provider_kv_get(it->labels, it->n_labels, key);
}

static const struct kp_req *req(const struct kp_instance_type *it, const char *key)
{
    return kp_reqset_get(&it->reqs, key);
}

static void test_good(void **state)
{
    struct kp_instance_types t = {0};
    const struct kp_instance_type *s, *m;
    char *msg = NULL;

    (void)state;
    assert_int_equal(kp_itypes_parse(good, strlen(good), "t.yaml", &t, &msg), 0);
    assert_null(msg);
    assert_int_equal(t.n, 2);
    s = &t.v[0]; /* sorted by name, as the provider's catalog */
    m = &t.v[1];
    assert_string_equal(s->name, "c.small");
    assert_string_equal(m->name, "m.large");

    /* c.small: the defaults. arch amd64, os linux; zone and capacity type from its offering. */
    assert_int_equal(s->reqs.n, 5);
    assert_string_equal(kp_req_single(req(s, KP_LABEL_INSTANCE_TYPE)), "c.small");
    assert_string_equal(kp_req_single(req(s, KP_LABEL_ARCH)), "amd64");
    assert_string_equal(kp_req_single(req(s, KP_LABEL_OS)), "linux");
    assert_string_equal(kp_req_single(req(s, KP_LABEL_ZONE)), "a");
    assert_string_equal(kp_req_single(req(s, KP_LABEL_CAPACITY_TYPE)), "on-demand");
    assert_int_equal(s->n_labels, 5);
    assert_string_equal(label(s, KP_LABEL_INSTANCE_TYPE), "c.small");
    assert_string_equal(label(s, KP_LABEL_ZONE), "a");
    assert_int_equal(kp_provider_res_get(s->capacity, s->n_capacity, "cpu", NULL), 1000);
    assert_int_equal(kp_provider_res_get(s->capacity, s->n_capacity, "memory", NULL), 2048 * MI);
    assert_int_equal(kp_provider_res_get(s->capacity, s->n_capacity, "pods", NULL), 110000);
    assert_int_equal(s->n_overhead, 0);
    assert_int_equal(kp_instance_type_allocatable(s, "cpu"), 1000);
    assert_int_equal(s->n_offerings, 1);
    assert_int_equal(s->offerings[0].price_micro_usd, 1000000);
    assert_true(s->offerings[0].available);
    assert_int_equal(s->offerings[0].reservation_capacity, 0);

    /* m.large: its own arch and keys; zone and capacity type over both offerings. */
    assert_int_equal(m->reqs.n, 7);
    assert_string_equal(kp_req_single(req(m, KP_LABEL_ARCH)), "arm64");
    assert_string_equal(kp_req_single(req(m, "example.com/family")), "m");
    assert_true(req(m, "example.com/gen")->complement);
    assert_int_equal(req(m, "example.com/gen")->min, 6);
    assert_int_equal(req(m, KP_LABEL_ZONE)->n_values, 2);
    assert_true(kp_req_has(req(m, KP_LABEL_ZONE), "a") && kp_req_has(req(m, KP_LABEL_ZONE), "b"));
    assert_true(kp_req_has(req(m, KP_LABEL_CAPACITY_TYPE), "spot"));
    assert_true(kp_req_has(req(m, KP_LABEL_CAPACITY_TYPE), "on-demand"));
    /* Labels: the single values only, so no zone or capacity type. */
    assert_int_equal(m->n_labels, 4);
    assert_string_equal(label(m, KP_LABEL_ARCH), "arm64");
    assert_string_equal(label(m, "example.com/family"), "m");
    assert_null(label(m, KP_LABEL_ZONE));
    assert_null(label(m, KP_LABEL_CAPACITY_TYPE));
    assert_int_equal(kp_provider_res_get(m->capacity, m->n_capacity, "pods", NULL), 29000);
    assert_int_equal(kp_provider_res_get(m->capacity, m->n_capacity, "nvidia.com/gpu", NULL), 1000);
    /* Overhead: the three lists summed per resource (InstanceTypeOverhead.Total()). */
    assert_int_equal(m->n_overhead, 2);
    assert_int_equal(kp_provider_res_get(m->overhead, m->n_overhead, "cpu", NULL), 150);
    assert_int_equal(kp_provider_res_get(m->overhead, m->n_overhead, "memory", NULL), 868 * MI);
    assert_int_equal(kp_instance_type_allocatable(m, "cpu"), 1850);
    assert_int_equal(kp_instance_type_allocatable(m, "memory"), (8192 - 868) * MI);
    assert_int_equal(m->n_offerings, 2);
    assert_int_equal(m->offerings[0].price_micro_usd, 96000);
    assert_true(m->offerings[0].available);
    assert_string_equal(kp_offering_value(&m->offerings[1], KP_LABEL_ZONE), "b");
    assert_string_equal(kp_offering_value(&m->offerings[1], KP_LABEL_CAPACITY_TYPE), "spot");
    assert_int_equal(m->offerings[1].price_micro_usd, 31200);
    assert_false(m->offerings[1].available);
    /* The cheapest available offering: the spot one is not available. */
    assert_int_equal(kp_instance_type_price(m), 96000);
    kp_instance_types_done(&t);
}

/* JSON is read as well; an empty list is a list of no types; prices round to the micro-dollar. */
static void test_json_and_empty(void **state)
{
    static const char json[] =
        "{\"apiVersion\": \"kpssh.dev/v1alpha1\", \"kind\": \"InstanceTypes\", \"items\": [{"
        "\"name\": \"j\", \"capacity\": {\"cpu\": \"500m\", \"memory\": \"1G\"},"
        "\"offerings\": [{\"requirements\": [{\"key\": \"topology.kubernetes.io/zone\","
        "\"operator\": \"In\", \"values\": [\"z\"]}, {\"key\": \"karpenter.sh/capacity-type\","
        "\"operator\": \"In\", \"values\": [\"spot\"]}], \"price\": 0.0000005}]}]}";
    static const char empty[] = HEAD "items: []\n";
    struct kp_instance_types t = {0};
    char *msg = NULL;

    (void)state;
    assert_int_equal(kp_itypes_parse(json, strlen(json), "t.json", &t, &msg), 0);
    assert_int_equal(t.n, 1);
    assert_int_equal(kp_provider_res_get(t.v[0].capacity, t.v[0].n_capacity, "cpu", NULL), 500);
    assert_int_equal(t.v[0].offerings[0].price_micro_usd, 1);
    kp_instance_types_done(&t);
    assert_int_equal(kp_itypes_parse(empty, strlen(empty), "t.yaml", &t, &msg), 0);
    assert_int_equal(t.n, 0);
    kp_instance_types_done(&t);
    assert_null(msg);
}

struct bad_case {
    const char *in;
    int r;
    const char *want; /* a substring of the message */
};

static const struct bad_case bad_cases[] = {
    {"", -KP_EPARSE, "t.yaml: no InstanceTypes document"},
    {"items: [", -KP_EPARSE, "t.yaml:2:1: "},
    {"apiVersion: v1\nkind: Pod\n", -KP_EPARSE,
     "t.yaml:1: document 1: kind \"Pod\" of apiVersion \"v1\" is not an instance type list (want "
     "kind InstanceTypes, apiVersion kpssh.dev/v1alpha1)"},
    {"apiVersion: kpssh.dev/v1\nkind: InstanceTypes\nitems: []\n", -KP_EPARSE,
     "of apiVersion \"kpssh.dev/v1\" is not an instance type list"},
    {"kind: InstanceTypes\nitems: []\n", -KP_EPARSE, "of apiVersion \"\" is not"},
    {HEAD "items: []\n---\n" HEAD "items: []\n", -KP_EPARSE,
     "t.yaml:5: document 2: the file must hold one InstanceTypes document, no more"},
    {"kind: List\nitems: [{kind: InstanceTypes}]\n", -KP_EPARSE,
     "document 1: the file must hold one"},
    {HEAD "spec: {}\nitems: []\n", -KP_EPARSE,
     "t.yaml:1: unknown field \"spec\" (fields: apiVersion, kind, metadata, items)"},
    {HEAD "\"bad\\nkey\": 1\nitems: []\n", -KP_EPARSE, "unknown field \"bad?key\""},
    {HEAD, -KP_EPARSE, "t.yaml:1: items: required (a list)"},
    {HEAD "items: 5\n", -KP_EPARSE, "t.yaml:1: items: must be a list"},
    {HEAD "items: [5]\n", -KP_EPARSE, "t.yaml:1: items[0]: must be a map (name, requirements"},
    {ITEM_OK(", capcity: {}"), -KP_EPARSE,
     "items[0]: unknown field \"capcity\" (fields: name, requirements, capacity, overhead, "
     "offerings)"},
    {HEAD "items: [{" CAP_OK "}]\n", -KP_EPARSE, "t.yaml:1: items[0]: name: required"},
    {HEAD "items: [{name: 5}]\n", -KP_EPARSE, "items[0]: name: must be a string"},
    {HEAD "items: [{name: \"a b\"}]\n", -KP_EPARSE, "items[0]: name: \"a b\" is not a label value"},
    {HEAD "items: [{name: \"\"}]\n", -KP_EPARSE,
     "items[0]: name: \"\" is not a label value: empty"},
    {HEAD "items:\n- {name: x, " CAP_OK ", offerings: [" OFF_OK "]}\n- {name: x, " CAP_OK
          ", offerings: [" OFF_OK "]}\n",
     -KP_EPARSE, "items[1] \"x\": name: items[0] has it too"},
    {ITEM("offerings: [" OFF_OK "]"), -KP_EPARSE,
     "items[0] \"x\": capacity: required (cpu and memory at least)"},
    {ITEM("capacity: [1]"), -KP_EPARSE,
     "items[0] \"x\": capacity: must be a map of resource names to quantities"},
    {ITEM("capacity: {cpu: lots, memory: 1Gi}"), -KP_EPARSE,
     "items[0] \"x\": capacity.cpu: \"lots\" is not a quantity"},
    {ITEM("capacity: {cpu: 1e99, memory: 1Gi}"), -KP_EPARSE, "capacity.cpu: must be a quantity"},
    {ITEM("capacity: {cpu: \"1e99\", memory: 1Gi}"), -KP_EPARSE,
     "capacity.cpu: \"1e99\" is not a quantity: out of range"},
    {ITEM("capacity: {cpu: 0.5, memory: 1Gi}"), -KP_EPARSE,
     "capacity.cpu: must be a quantity (a string such as \"500m\" or \"4Gi\", or an integer)"},
    {ITEM("capacity: {cpu: -1, memory: 1Gi}"), -KP_EPARSE, "capacity.cpu: must not be negative"},
    {ITEM("capacity: {cpu: 1}"), -KP_EPARSE, "items[0] \"x\": capacity.memory: required, above 0"},
    {ITEM("capacity: {cpu: 0, memory: 1Gi}"), -KP_EPARSE, "capacity.cpu: required, above 0"},
    {ITEM("capacity: {\"a b\": 1, cpu: 1, memory: 1Gi}"), -KP_EPARSE,
     "capacity: \"a b\" is not a resource name"},
    {ITEM_OK(", overhead: [1]"), -KP_EPARSE,
     "overhead: must be a map (kubeReserved, systemReserved, evictionThreshold)"},
    {ITEM_OK(", overhead: {kubeReservd: {}}"), -KP_EPARSE,
     "items[0] \"x\": overhead: unknown field \"kubeReservd\" (fields: kubeReserved, "
     "systemReserved, evictionThreshold)"},
    {ITEM_OK(", overhead: {systemReserved: 5}"), -KP_EPARSE,
     "overhead.systemReserved: must be a map of resource names"},
    {ITEM_OK(", overhead: {evictionThreshold: {memory: 1x}}"), -KP_EPARSE,
     "overhead.evictionThreshold.memory: \"1x\" is not a quantity"},
    {ITEM_OK(", overhead: {kubeReserved: {cpu: \"9223372036854775\"}, systemReserved: {cpu: "
             "\"9223372036854775\"}}"),
     -KP_EPARSE, "overhead.systemReserved.cpu: the sum is out of range"},
    {ITEM(CAP_OK), -KP_EPARSE, "items[0] \"x\": offerings: required (at least one)"},
    {ITEM(CAP_OK ", offerings: {}"), -KP_EPARSE, "offerings: must be a list"},
    {ITEM(CAP_OK ", offerings: []"), -KP_EPARSE, "offerings: needs at least one offering"},
    {ITEM(CAP_OK ", offerings: [5]"), -KP_EPARSE,
     "offerings[0]: must be a map (requirements, price, available)"},
    {ITEM(CAP_OK ", offerings: [{cost: 1}]"), -KP_EPARSE,
     "items[0] \"x\": offerings[0]: unknown field \"cost\" (fields: requirements, price, "
     "available)"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" CT("spot") "], price: 1}]"), -KP_EPARSE,
     "offerings[0].requirements: needs topology.kubernetes.io/zone In [one zone]"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" ZONE("a, b") ", " CT("spot") "], price: 1}]"),
     -KP_EPARSE, "offerings[0].requirements: needs topology.kubernetes.io/zone In [one zone]"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" ZONE("\"-a\"") ", " CT("spot") "], price: 1}]"),
     -KP_EPARSE, "offerings[0].requirements: zone \"-a\" is not a label value"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" ZONE("a") "], price: 1}]"), -KP_EPARSE,
     "offerings[0].requirements: needs karpenter.sh/capacity-type In [on-demand] or In [spot]"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" ZONE("a") ", " CT("reserved") "], price: 1}]"),
     -KP_EPARSE,
     "offerings[0].requirements: capacity type \"reserved\" is not on-demand or spot (reserved "
     "capacity is not modelled)"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" ZONE("a") ", " CT("spot") "]}]"), -KP_EPARSE,
     "offerings[0].price: required (US dollars per hour)"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" ZONE("a") ", " CT("spot") "], price: \"1\"}]"),
     -KP_EPARSE, "offerings[0].price: must be a number (US dollars per hour)"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" ZONE("a") ", " CT("spot") "], price: -1}]"),
     -KP_EPARSE, "offerings[0].price: -1 is not between 0 and 1000000 (US dollars per hour)"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" ZONE("a") ", " CT("spot") "], price: 2e6}]"),
     -KP_EPARSE, "offerings[0].price: 2e+06 is not between 0 and 1000000"},
    {ITEM(CAP_OK ", offerings: [{requirements: [" ZONE("a") ", " CT(
         "spot") "], price: 1, available: maybe}]"),
     -KP_EPARSE, "offerings[0].available: must be true or false"},
    {ITEM(CAP_OK ", offerings: [" OFF_OK ", " OFF_OK "]"), -KP_EPARSE,
     "offerings[1]: the same zone and capacity type as offerings[0]"},
    {ITEM_OK(", requirements: {}"), -KP_EPARSE,
     "items[0] \"x\": requirements: must be a list of {key, operator, values}"},
    {ITEM_OK(", requirements: [{key: a, operator: Near, values: [b]}]"), -KP_EPARSE,
     "items[0] \"x\": requirements[0]: unknown operator"},
    {ITEM_OK(", requirements: [{key: a, operator: In, values: [b]}, {key: \"-\", operator: "
             "Exists}]"),
     -KP_EPARSE, "items[0] \"x\": requirements[1]: "},
    {ITEM_OK(", requirements: [{key: a, operator: In, values: [b, c], minValues: 2}]"), -KP_EPARSE,
     "requirements: a: minValues belongs in a NodePool, not an instance type"},
    {ITEM_OK(", requirements: [{key: node.kubernetes.io/instance-type, operator: NotIn, values: "
             "[x]}]"),
     -KP_EPARSE, "requirements: node.kubernetes.io/instance-type leaves out \"x\" (the name)"},
    {ITEM_OK(", requirements: [" ZONE("b") "]"), -KP_EPARSE,
     "requirements: topology.kubernetes.io/zone leaves out \"a\" (offerings[0])"},
    {ITEM_OK(", requirements: [" CT("spot") "]"), -KP_EPARSE,
     "requirements: karpenter.sh/capacity-type leaves out \"on-demand\" (offerings[0])"},
};

static void test_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad_cases); i++) {
        const struct bad_case *c = &bad_cases[i];
        struct kp_instance_types t = {0};
        char *msg = NULL;
        int r = kp_itypes_parse(c->in, strlen(c->in), "t.yaml", &t, &msg);

        if (r != c->r || !msg || !strstr(msg, c->want) || strchr(msg, '\n'))
            fail_msg("case %zu: r %d (want %d), message \"%s\" (want \"%s\")", i, r, c->r,
                     msg ? msg : "(none)", c->want);
        assert_int_equal(t.n, 0); /* nothing written on failure */
        assert_null(t.v);
        kp_free(msg);
    }
}

/* Builds a document of n items (or offerings, requirements, resources of one item). */
static char *many(const char *what, size_t n)
{
    struct kp_buf b = KP_BUF_INIT(8u << 20);
    char *out = NULL;
    int r = kp_buf_puts(&b, HEAD);

    if (strcmp(what, "items") == 0) {
        r = r ? r : kp_buf_puts(&b, "items:\n");
        for (size_t i = 0; i < n && r == 0; i++)
            r = kp_buf_printf(&b, "- {name: t%zu}\n", i);
    } else if (strcmp(what, "offerings") == 0) {
        r = r ? r : kp_buf_puts(&b, "items:\n- {name: x, " CAP_OK ", offerings: [");
        for (size_t i = 0; i < n && r == 0; i++)
            r = kp_buf_printf(&b, "%s{}", i ? ", " : "");
        r = r ? r : kp_buf_puts(&b, "]}\n");
    } else if (strcmp(what, "requirements") == 0) {
        r = r ? r
              : kp_buf_puts(&b, "items:\n- {name: x, " CAP_OK ", offerings: [" OFF_OK "], "
                                "requirements: [");
        for (size_t i = 0; i < n && r == 0; i++)
            r = kp_buf_printf(&b, "%s{key: k%zu, operator: Exists}", i ? ", " : "", i);
        r = r ? r : kp_buf_puts(&b, "]}\n");
    } else {
        r = r ? r : kp_buf_puts(&b, "items:\n- {name: x, capacity: {");
        for (size_t i = 0; i < n && r == 0; i++)
            r = kp_buf_printf(&b, "%sr%zu: 1", i ? ", " : "", i);
        r = r ? r : kp_buf_puts(&b, "}}\n");
    }
    if (r == 0)
        out = kp_strdup(kp_buf_str(&b));
    kp_buf_done(&b);
    return out;
}

static void test_limits(void **state)
{
    static const struct {
        const char *what;
        size_t n;
        const char *want;
    } cases[] = {
        {"items", KP_ITYPES_MAX_ITEMS + 1, "t.yaml:1: items: 1025 instance types, at most 1024"},
        {"offerings", KP_ITYPES_MAX_OFFERINGS + 1, "offerings: 257 offerings, at most 256"},
        {"requirements", KP_ITYPES_MAX_REQUIREMENTS + 1,
         "items[0] \"x\": requirements: 65 requirements, at most 64"},
        {"resources", KP_ITYPES_MAX_RESOURCES + 1, "capacity: 65 resources, at most 64"},
    };
    struct kp_instance_types t = {0};
    char *msg = NULL, *big;

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        char *in = many(cases[i].what, cases[i].n);

        assert_non_null(in);
        assert_int_equal(kp_itypes_parse(in, strlen(in), "t.yaml", &t, &msg), -KP_ELIMIT);
        assert_non_null(msg);
        if (!strstr(msg, cases[i].want))
            fail_msg("%s: \"%s\" (want \"%s\")", cases[i].what, msg, cases[i].want);
        kp_free(msg);
        msg = NULL;
        kp_free(in);
    }
    /* The file itself: refused before it is parsed. */
    big = kp_malloc(KP_ITYPES_MAX_FILE + 1);
    assert_non_null(big);
    memset(big, ' ', KP_ITYPES_MAX_FILE + 1);
    assert_int_equal(kp_itypes_parse(big, KP_ITYPES_MAX_FILE + 1, "t.yaml", &t, &msg), -KP_ELIMIT);
    assert_string_equal(msg, "t.yaml: larger than 4194304 bytes");
    kp_free(msg);
    kp_free(big);
    assert_int_equal(t.n, 0);
}

/* --- the provider --------------------------------------------------------------------------- */

static const char *fake_name(void *self)
{
    (void)self;
    return "fake";
}

static size_t fake_classes(void *self, const struct kp_node_class_kind **ret)
{
    static const struct kp_node_class_kind kinds[] = {{"karpenter.kpssh.dev", "SSHNodeClass"}};

    (void)self;
    *ret = kinds;
    return 1;
}

static size_t fake_repair(void *self, const struct kp_repair_policy **ret)
{
    (void)self;
    *ret = NULL;
    return 0;
}

static int fake_types(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                      const struct kp_nodepool_view *np, struct kp_instance_catalog **ret,
                      struct kp_provider_err *err)
{
    (void)self;
    (void)ctx;
    (void)c;
    (void)np;
    (void)ret;
    (void)err;
    return -EIO; /* replaced: never called through the wrapper */
}

static bool fake_owns(void *self, const char *provider_id)
{
    (void)self;
    return strcmp(provider_id, "kpssh://ns/h") == 0;
}

static void test_provider(void **state)
{
    static const struct kp_provider_ops ops = {
        .name = fake_name,
        .supported_node_classes = fake_classes,
        .repair_policies = fake_repair,
        .get_instance_types = fake_types,
        .owns_provider_id = fake_owns,
    };
    struct kp_provider inner = {.ops = &ops, .self = NULL}, p;
    struct kp_nodeclass_ref ours = {"karpenter.kpssh.dev", "SSHNodeClass", "any"};
    struct kp_nodeclass_ref other = {"karpenter.k8s.aws", "EC2NodeClass", "default"};
    struct kp_instance_catalog *a = NULL, *b = NULL;
    struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
    struct kp_node_class_status st;
    struct kp_instance_types t = {0};
    struct kp_itypes_provider *ip = NULL;
    char *msg = NULL;

    (void)state;
    assert_int_equal(kp_itypes_parse(good, strlen(good), "t.yaml", &t, &msg), 0);
    assert_int_equal(kp_itypes_provider_new(&inner, &t, &ip), 0);
    assert_int_equal(t.n, 0); /* taken over */
    p = kp_itypes_provider_as_provider(ip);
    assert_string_equal(p.ops->name(p.self), "fake");
    /* Ownership is the inner provider's: the same NodePools stay ours. */
    assert_true(kp_provider_supports(&p, &ours));
    assert_false(kp_provider_supports(&p, &other));
    assert_true(kp_provider_owns_provider_id(&p, "kpssh://ns/h"));
    assert_false(kp_provider_owns_provider_id(&p, "aws:///i-1"));
    /* An optional call the inner provider lacks stays absent. */
    assert_int_equal(kp_provider_node_class_status(&p, &ours, &st), -EOPNOTSUPP);
    /* The same catalog for any NodePool. */
    assert_int_equal(p.ops->get_instance_types(p.self, NULL, NULL, NULL, &a, &err), 0);
    assert_int_equal(p.ops->get_instance_types(p.self, NULL, NULL, NULL, &b, &err), 0);
    assert_ptr_equal(a, b);
    assert_int_equal(a->n, 2);
    assert_non_null(kp_instance_catalog_find(a, "m.large"));
    ip = kp_itypes_provider_free(ip);
    assert_null(ip);
    /* The references outlive the provider. */
    assert_string_equal(b->v[0].name, "c.small");
    kp_instance_catalog_unref(a);
    kp_instance_catalog_unref(b);
    kp_provider_err_done(&err);
    assert_null(kp_itypes_provider_free(NULL));
}

static int torture_parse(void)
{
    struct kp_instance_types t = {0};
    char *msg = NULL;
    int r = kp_itypes_parse(good, strlen(good), "t.yaml", &t, &msg);

    if (r == 0 && t.n != 2)
        r = 1;
    kp_instance_types_done(&t);
    kp_free(msg);
    return r;
}

static int torture_provider(void)
{
    static const struct kp_provider_ops ops = {.name = fake_name};
    struct kp_provider inner = {.ops = &ops, .self = NULL};
    struct kp_instance_types t = {0};
    struct kp_itypes_provider *ip = NULL;
    int r = kp_itypes_parse(good, strlen(good), "t.yaml", &t, NULL);

    if (r == 0)
        r = kp_itypes_provider_new(&inner, &t, &ip);
    kp_instance_types_done(&t);
    kp_itypes_provider_free(ip);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),     cmocka_unit_test(test_json_and_empty),
        cmocka_unit_test(test_bad),      cmocka_unit_test(test_limits),
        cmocka_unit_test(test_provider),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_parse),
        KP_TORTURE(torture_provider),
    };

    return kp_test_main("itypes", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture),
                        argc, argv);
}
