/* tests/unit/test-inventory.c: instance types from host classes (provider/ssh/inventory.h),
 * driven by tables of SSHHost and SSHNodeClass projections decoded from JSON. */
#include "kp-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/str.h"
#include "core/provider.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/inventory.h"
#include "api/requirements.h"

#define NS "kpssh-system"
#define MI (1024LL * 1024 * 1000) /* 1Mi in milli-units */

/* A host row: class NULL means no label; arch NULL means not probed. */
struct hrow {
    const char *name, *ns, *cls, *arch, *state;
    const char *capacity; /* JSON object body */
    bool claimed, maintenance;
    const char *created;
};

static struct kp_entry *host(const struct hrow *h)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    struct kp_buf labels = KP_BUF_INIT(1024);
    struct kp_entry *e = NULL;

    if (h->cls)
        assert_int_equal(kp_buf_printf(&labels, "\"" KP_KPSSH_LABEL_HOST_CLASS "\":\"%s\"", h->cls),
                         0);
    assert_int_equal(
        kp_buf_printf(
            &b,
            "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHHost\","
            "\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"u-%s\","
            "\"resourceVersion\":\"1\",\"creationTimestamp\":\"%s\","
            "\"labels\":{%s}%s},"
            "\"spec\":{\"address\":\"10.0.0.1\",\"sshKeySecretRef\":{\"name\":\"k\"},"
            "\"capacity\":{%s}},"
            "\"status\":{\"state\":\"%s\"%s%s%s%s}}",
            h->name, h->ns ? h->ns : NS, h->name, h->created ? h->created : "2026-01-01T00:00:00Z",
            labels.len ? kp_buf_str(&labels) : "",
            h->maintenance ? ",\"annotations\":{\"" KP_KPSSH_ANNOTATION_MAINTENANCE "\":\"\"}" : "",
            h->capacity, h->state ? h->state : "Available",
            h->claimed ? ",\"claimRef\":{\"name\":\"nc\",\"uid\":\"x\"}" : "",
            h->arch ? ",\"observedArch\":\"" : "", h->arch ? h->arch : "", h->arch ? "\"" : ""),
        0);
    assert_int_equal(kp_sshhost_decode(b.data, b.len, &e), 0);
    kp_buf_done(&b);
    kp_buf_done(&labels);
    return e;
}

static struct kp_entry *nodeclass(const char *spec_extra)
{
    char buf[4096];
    struct kp_entry *e = NULL;
    int n = snprintf(buf, sizeof(buf),
                     "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHNodeClass\","
                     "\"metadata\":{\"name\":\"snc\",\"uid\":\"u\",\"resourceVersion\":\"1\"},"
                     "\"spec\":{\"joinProfileRef\":{\"name\":\"p\"}%s}}",
                     spec_extra ? spec_extra : "");

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_sshnodeclass_decode(buf, (size_t)n, &e), 0);
    return e;
}

struct fixture {
    struct kp_entry *nc;
    struct kp_entry *h[16];
    const struct kp_sshhost_view *hv[16];
    size_t n;
    struct kp_instance_types types;
    struct kp_strv skipped;
};

static void run(struct fixture *f, const char *nc_extra, const struct hrow *rows, size_t n)
{
    memset(f, 0, sizeof(*f));
    f->skipped = (struct kp_strv)KP_STRV_INIT;
    f->nc = nodeclass(nc_extra);
    for (size_t i = 0; i < n; i++) {
        f->h[i] = host(&rows[i]);
        f->hv[i] = kp_sshhost_view(f->h[i]);
    }
    f->n = n;
    assert_int_equal(kp_inventory_instance_types(kp_sshnodeclass_view(f->nc), NS, f->hv, f->n,
                                                 &f->types, &f->skipped),
                     0);
}

static void done(struct fixture *f)
{
    kp_instance_types_done(&f->types);
    kp_strv_done(&f->skipped);
    for (size_t i = 0; i < f->n; i++)
        kp_entry_unref(f->h[i]);
    kp_entry_unref(f->nc);
}

static const struct kp_instance_type *type(const struct fixture *f, const char *name)
{
    for (size_t i = 0; i < f->types.n; i++)
        if (kp_streq(f->types.v[i].name, name))
            return &f->types.v[i];
    return NULL;
}

static int64_t cap(const struct kp_instance_type *it, const char *res, bool *found)
{
    return kp_provider_res_get(it->capacity, it->n_capacity, res, found);
}

static void test_min_and_drop(void **state)
{
    const struct hrow rows[] = {
        {"a", NULL, "big", "amd64", NULL,
         "\"cpu\":\"8\",\"memory\":\"16Gi\",\"nvidia.com/gpu\":\"1\"", false, false, NULL},
        {"b", NULL, "big", "x86_64", NULL, "\"cpu\":\"6\",\"memory\":\"32Gi\"", false, false, NULL},
        {"c", NULL, NULL, "arm64", NULL, "\"cpu\":\"2\",\"memory\":\"2Gi\",\"pods\":\"30\"", false,
         false, NULL},
        {"d", NULL, "", "aarch64", "Claimed", "\"cpu\":\"4\",\"memory\":\"4Gi\",\"pods\":\"50\"",
         true, false, NULL},
    };
    struct fixture f;
    const struct kp_instance_type *big, *def;
    bool found;

    (void)state;
    run(&f, ",\"pricePerCPUHour\":\"0.5\"", rows, KP_ARRAY_SIZE(rows));
    assert_int_equal(f.types.n, 2);
    assert_string_equal(f.types.v[0].name, "big"); /* sorted by name */
    big = type(&f, "big");
    def = type(&f, "default");
    assert_non_null(big);
    assert_non_null(def);
    assert_int_equal(cap(big, "cpu", NULL), 6000);
    assert_int_equal(cap(big, "memory", NULL), 16LL * 1024 * MI);
    (void)cap(big, "nvidia.com/gpu", &found);
    assert_false(found); /* missing on b: dropped */
    assert_int_equal(cap(big, "pods", NULL), 110000);
    assert_string_equal(kp_provider_kv_get(big->labels, big->n_labels, KP_LABEL_ARCH), "amd64");
    assert_string_equal(kp_provider_kv_get(big->labels, big->n_labels, KP_LABEL_INSTANCE_TYPE),
                        "big");
    assert_string_equal(kp_provider_kv_get(big->labels, big->n_labels, KP_LABEL_ZONE), "pool");
    assert_string_equal(kp_provider_kv_get(big->labels, big->n_labels, KP_LABEL_CAPACITY_TYPE),
                        "on-demand");
    assert_string_equal(kp_provider_kv_get(big->labels, big->n_labels, KP_LABEL_OS), "linux");
    assert_int_equal(big->n_offerings, 1);
    assert_int_equal(big->offerings[0].price_micro_usd, 3000000); /* 6 cpu x $0.50 */
    assert_true(big->offerings[0].available);
    assert_int_equal(kp_instance_type_price(big), 3000000);
    /* default overhead: 80m, 300Mi */
    assert_int_equal(kp_instance_type_allocatable(big, "cpu"), 5920);
    assert_int_equal(kp_instance_type_allocatable(big, "memory"), 16LL * 1024 * MI - 300 * MI);
    /* c (no label) and d ("" label) are both class default; pods min over both 30/50 */
    assert_int_equal(cap(def, "cpu", NULL), 2000);
    assert_int_equal(cap(def, "pods", NULL), 30000);
    assert_string_equal(kp_provider_kv_get(def->labels, def->n_labels, KP_LABEL_ARCH), "arm64");
    assert_true(def->offerings[0].available); /* c is Available */
    done(&f);
}

static void test_arch_rules(void **state)
{
    const struct hrow rows[] = {
        {"m1", NULL, "mixed", "amd64", NULL, "\"cpu\":\"2\",\"memory\":\"2Gi\"", false, false,
         NULL},
        {"m2", NULL, "mixed", "arm64", NULL, "\"cpu\":\"2\",\"memory\":\"2Gi\"", false, false,
         NULL},
        {"r1", NULL, "riscv", "riscv64", NULL, "\"cpu\":\"2\",\"memory\":\"2Gi\"", false, false,
         NULL},
        {"n1", NULL, "fresh", NULL, "Pending", "\"cpu\":\"2\",\"memory\":\"2Gi\"", false, false,
         NULL},
        /* one unprobed member does not hide the class when another is probed */
        {"p1", NULL, "part", NULL, "Pending", "\"cpu\":\"2\",\"memory\":\"2Gi\"", false, false,
         NULL},
        {"p2", NULL, "part", "amd64", NULL, "\"cpu\":\"4\",\"memory\":\"2Gi\"", false, false, NULL},
        /* zero cpu: ignored entirely */
        {"z1", NULL, "zero", "amd64", NULL, "\"cpu\":\"0\",\"memory\":\"2Gi\"", false, false, NULL},
    };
    struct fixture f;

    (void)state;
    run(&f, NULL, rows, KP_ARRAY_SIZE(rows));
    assert_int_equal(f.types.n, 1);
    assert_non_null(type(&f, "part"));
    assert_int_equal(cap(type(&f, "part"), "cpu", NULL), 2000);
    assert_int_equal(f.skipped.n, 3);
    assert_true(kp_strv_contains(&f.skipped, "mixed: hosts of mixed arch"));
    assert_true(kp_strv_contains(&f.skipped, "riscv: unsupported arch riscv64"));
    assert_true(kp_strv_contains(&f.skipped, "fresh: no host probed yet (arch unknown)"));
    done(&f);
}

static void test_availability(void **state)
{
    const struct hrow rows[] = {
        /* class a: only a claimed host and one in maintenance (state still Available) */
        {"a1", NULL, "a", "amd64", "Claimed", "\"cpu\":\"2\",\"memory\":\"2Gi\"", true, false,
         NULL},
        {"a2", NULL, "a", "amd64", "Available", "\"cpu\":\"2\",\"memory\":\"2Gi\"", false, true,
         NULL},
        {"a3", NULL, "a", "amd64", "Unhealthy", "\"cpu\":\"2\",\"memory\":\"2Gi\"", false, false,
         NULL},
        /* class b: an Available host in another namespace does not count */
        {"b1", "other", "b", "amd64", "Available", "\"cpu\":\"2\",\"memory\":\"2Gi\"", false, false,
         NULL},
        {"b2", NULL, "b", "amd64", "InUse", "\"cpu\":\"2\",\"memory\":\"2Gi\"", true, false, NULL},
        {"c1", NULL, "c", "amd64", "Available", "\"cpu\":\"2\",\"memory\":\"2Gi\"", false, false,
         NULL},
    };
    struct fixture f;

    (void)state;
    run(&f, NULL, rows, KP_ARRAY_SIZE(rows));
    assert_int_equal(f.types.n, 3);
    assert_false(type(&f, "a")->offerings[0].available);
    assert_int_equal(kp_instance_type_price(type(&f, "a")), -1);
    assert_false(type(&f, "b")->offerings[0].available);
    assert_true(type(&f, "c")->offerings[0].available);
    /* default price 0.02 x 2 cpu */
    assert_int_equal(type(&f, "c")->offerings[0].price_micro_usd, 40000);
    done(&f);
}

static void test_selector_maxpods_reserved(void **state)
{
    const struct hrow rows[] = {
        {"s1", NULL, "gpu", "amd64", NULL, "\"cpu\":\"16\",\"memory\":\"64Gi\",\"pods\":\"20\"",
         false, false, NULL},
        {"s2", NULL, "cpu", "amd64", NULL, "\"cpu\":\"4\",\"memory\":\"8Gi\"", false, false, NULL},
    };
    struct fixture f;
    const struct kp_instance_type *it;

    (void)state;
    run(&f,
        ",\"hostSelector\":{\"matchLabels\":{\"" KP_KPSSH_LABEL_HOST_CLASS "\":\"gpu\"}},"
        "\"maxPods\":64,\"kubeReserved\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"}",
        rows, KP_ARRAY_SIZE(rows));
    assert_int_equal(f.types.n, 1);
    it = type(&f, "gpu");
    assert_non_null(it);
    assert_int_equal(cap(it, "pods", NULL), 64000); /* maxPods overrides the host's 20 */
    assert_int_equal(kp_instance_type_allocatable(it, "cpu"), 15500);
    assert_int_equal(kp_instance_type_allocatable(it, "memory"), 63LL * 1024 * MI);
    done(&f);
}

static struct kp_entry *nodeclaim(const char *reqs, const char *requests)
{
    char buf[4096];
    struct kp_entry *e = NULL;
    int n = snprintf(buf, sizeof(buf),
                     "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\","
                     "\"metadata\":{\"name\":\"nc\",\"uid\":\"u\",\"resourceVersion\":\"1\"},"
                     "\"spec\":{\"nodeClassRef\":{\"group\":\"karpenter.kpssh.dev\","
                     "\"kind\":\"SSHNodeClass\",\"name\":\"snc\"},\"requirements\":[%s],"
                     "\"resources\":{\"requests\":{%s}}}}",
                     reqs, requests);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_nodeclaim_decode(buf, (size_t)n, &e), 0);
    return e;
}

static void test_fits(void **state)
{
    const struct hrow rows[] = {
        {"s1", NULL, "small", "amd64", NULL, "\"cpu\":\"2\",\"memory\":\"4Gi\"", false, false,
         NULL},
    };
    static const struct {
        const char *reqs, *requests;
        bool fits;
    } cases[] = {
        {"", "", true},
        {"{\"key\":\"karpenter.sh/nodepool\",\"operator\":\"In\",\"values\":[\"p\"]}", "", true},
        {"{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"In\",\"values\":[\"small\"]}",
         "\"cpu\":\"1\"", true},
        {"{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"In\",\"values\":[\"big\"]}",
         "", false},
        {"{\"key\":\"topology.kubernetes.io/zone\",\"operator\":\"In\",\"values\":[\"eu-1a\"]}", "",
         false},
        {"{\"key\":\"kubernetes.io/arch\",\"operator\":\"NotIn\",\"values\":[\"arm64\"]}", "",
         true},
        {"{\"key\":\"karpenter.sh/capacity-type\",\"operator\":\"In\",\"values\":[\"spot\"]}", "",
         false},
        {"", "\"cpu\":\"1950m\"", false}, /* allocatable 1920m */
        {"", "\"cpu\":\"1920m\",\"memory\":\"3Gi\"", true},
        {"", "\"nvidia.com/gpu\":\"1\"", false},
        /* Too large to hold: kept aside in requests.bad, and it fits nothing. */
        {"", "\"memory\":\"1Ei\"", false},
        {"", "\"cpu\":\"1\",\"memory\":\"1Ei\"", false},
        /* Requirement sets: In [a b] meets In [b]; two-valued sets on the offering's keys. */
        {"{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"In\",\"values\":[\"big\","
         "\"small\"]}",
         "", true},
        {"{\"key\":\"karpenter.sh/capacity-type\",\"operator\":\"In\",\"values\":[\"spot\","
         "\"on-demand\"]}",
         "", true},
        {"{\"key\":\"topology.kubernetes.io/zone\",\"operator\":\"NotIn\",\"values\":[\"pool\"]}",
         "", false},
        {"{\"key\":\"kubernetes.io/arch\",\"operator\":\"DoesNotExist\"}", "", false},
        {"{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"Exists\"}", "", true},
    };
    struct fixture f;

    (void)state;
    run(&f, NULL, rows, KP_ARRAY_SIZE(rows));
    assert_int_equal(f.types.n, 1);
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_entry *nc = nodeclaim(cases[i].reqs, cases[i].requests);

        if (kp_inventory_fits(&f.types.v[0], kp_nodeclaim_view(nc)) != cases[i].fits)
            fail_msg("case %zu: reqs [%s] requests {%s}: want fits=%d", i, cases[i].reqs,
                     cases[i].requests, cases[i].fits);
        kp_entry_unref(nc);
    }
    done(&f);
}

/* A type whose only offering is unavailable (its one host is claimed) backs no new claim. */
static void test_fits_needs_available_offering(void **state)
{
    const struct hrow rows[] = {
        {"s1", NULL, "small", "amd64", "InUse", "\"cpu\":\"2\",\"memory\":\"4Gi\"", true, false,
         NULL},
    };
    struct kp_entry *nc = nodeclaim("", "");
    struct fixture f;

    (void)state;
    run(&f, NULL, rows, KP_ARRAY_SIZE(rows));
    assert_int_equal(f.types.n, 1);
    assert_false(f.types.v[0].offerings[0].available);
    assert_false(kp_inventory_fits(&f.types.v[0], kp_nodeclaim_view(nc)));
    kp_entry_unref(nc);
    done(&f);
}

/* The type's requirement set and its offering's: what the scheduler intersects. */
static void test_type_requirements(void **state)
{
    const struct hrow rows[] = {
        {"s1", NULL, "small", "arm64", NULL, "\"cpu\":\"2\",\"memory\":\"4Gi\"", false, false,
         NULL},
    };
    const struct kp_instance_type *it;
    struct fixture f;

    (void)state;
    run(&f, NULL, rows, KP_ARRAY_SIZE(rows));
    it = &f.types.v[0];
    assert_string_equal(kp_req_single(kp_reqset_get(&it->reqs, KP_LABEL_INSTANCE_TYPE)), "small");
    assert_string_equal(kp_req_single(kp_reqset_get(&it->reqs, KP_LABEL_ARCH)), "arm64");
    assert_string_equal(kp_req_single(kp_reqset_get(&it->reqs, KP_LABEL_OS)), "linux");
    assert_string_equal(kp_req_single(kp_reqset_get(&it->reqs, KP_LABEL_ZONE)), "pool");
    assert_string_equal(kp_req_single(kp_reqset_get(&it->reqs, KP_LABEL_CAPACITY_TYPE)),
                        "on-demand");
    assert_int_equal(it->offerings[0].reqs.n, 2);
    assert_string_equal(kp_offering_value(&it->offerings[0], KP_LABEL_ZONE), "pool");
    assert_string_equal(kp_offering_value(&it->offerings[0], KP_LABEL_CAPACITY_TYPE), "on-demand");
    assert_null(kp_offering_value(&it->offerings[0], KP_LABEL_ARCH));
    /* The labels an instance gets are the type's single values. */
    for (size_t i = 0; i < it->n_labels; i++)
        assert_string_equal(kp_req_single(kp_reqset_get(&it->reqs, it->labels[i].key)),
                            it->labels[i].value);
    done(&f);
}

static void test_claimable(void **state)
{
    static const struct {
        struct hrow h;
        bool claimable;
    } cases[] = {
        {{"h", NULL, NULL, "amd64", "Available", "\"cpu\":\"1\",\"memory\":\"1Gi\"", false, false,
          NULL},
         true},
        {{"h", NULL, NULL, "amd64", "Available", "\"cpu\":\"1\",\"memory\":\"1Gi\"", true, false,
          NULL},
         false},
        {{"h", NULL, NULL, "amd64", "Available", "\"cpu\":\"1\",\"memory\":\"1Gi\"", false, true,
          NULL},
         false},
        {{"h", NULL, NULL, "amd64", "Pending", "\"cpu\":\"1\",\"memory\":\"1Gi\"", false, false,
          NULL},
         false},
        {{"h", NULL, NULL, "amd64", "Unhealthy", "\"cpu\":\"1\",\"memory\":\"1Gi\"", false, false,
          NULL},
         false},
        {{"h", NULL, NULL, "amd64", "Maintenance", "\"cpu\":\"1\",\"memory\":\"1Gi\"", false, false,
          NULL},
         false},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        struct kp_entry *e = host(&cases[i].h);

        assert_int_equal(kp_inventory_claimable(kp_sshhost_view(e)), cases[i].claimable);
        kp_entry_unref(e);
    }
    assert_string_equal(kp_inventory_arch("x86_64"), "amd64");
    assert_null(kp_inventory_arch("armv7l"));
    assert_null(kp_inventory_arch(NULL));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_min_and_drop),
        cmocka_unit_test(test_arch_rules),
        cmocka_unit_test(test_availability),
        cmocka_unit_test(test_selector_maxpods_reserved),
        cmocka_unit_test(test_fits),
        cmocka_unit_test(test_fits_needs_available_offering),
        cmocka_unit_test(test_type_requirements),
        cmocka_unit_test(test_claimable),
    };
    return kp_test_main("inventory", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
