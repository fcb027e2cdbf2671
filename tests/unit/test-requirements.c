/* Tests for requirement sets (api/requirements.c): each operator's set, intersections of every
 * pairing (finite/complement, bounds, empty ranges), Karpenter's Intersects and Compatible
 * rules with their reasons, a NodePool's set (requirements, template labels, its own name), an
 * instance type with In [a b] against per-offering sets, and every allocation failing in turn. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/err.h"
#include "api/obj-karpenter.h"
#include "api/requirements.h"

#define V(...) ((const char *const[]){__VA_ARGS__})

static void add(struct kp_reqset *s, const char *key, enum kp_selector_op op, const char *const *v,
                size_t n)
{
    assert_int_equal(kp_reqset_add(s, key, op, v, n, 0), 0);
}

static const char *fmt(const struct kp_reqset *s, const char *key)
{
    static char buf[KP_REQSET_WHY_SIZE];
    const struct kp_req *r = kp_reqset_get(s, key);

    if (!r)
        return "(none)";
    kp_req_format(r, buf, sizeof(buf));
    return buf;
}

/* kp_reqset_remove drops one key and keeps the others sorted; an absent key is a no-op. */
static void test_remove(void **state)
{
    struct kp_reqset s = KP_REQSET_INIT;

    (void)state;
    add(&s, "a", KP_SEL_IN, V("1"), 1);
    add(&s, "b", KP_SEL_IN, V("2", "3"), 2);
    add(&s, "c", KP_SEL_EXISTS, NULL, 0);
    kp_reqset_remove(&s, "b");
    assert_int_equal(s.n, 2);
    assert_string_equal(s.v[0].key, "a");
    assert_string_equal(s.v[1].key, "c");
    assert_null(kp_reqset_get(&s, "b"));
    kp_reqset_remove(&s, "zz");
    assert_int_equal(s.n, 2);
    kp_reqset_remove(&s, "c");
    kp_reqset_remove(&s, "a");
    assert_int_equal(s.n, 0);
    kp_reqset_done(&s);
}

static void test_operators(void **state)
{
    struct kp_reqset s = KP_REQSET_INIT;
    const struct kp_req *r;

    (void)state;
    add(&s, "zone", KP_SEL_IN, V("b", "a", "b"), 3);
    add(&s, "arch", KP_SEL_NOT_IN, V("s390x"), 1);
    add(&s, "gpu", KP_SEL_DOES_NOT_EXIST, NULL, 0);
    add(&s, "team", KP_SEL_EXISTS, NULL, 0);
    add(&s, "cpu", KP_SEL_GT, V("3"), 1);
    add(&s, "mem", KP_SEL_LTE, V("64"), 1);
    assert_int_equal(s.n, 6);
    /* Keys sorted, values sorted and unique. */
    assert_string_equal(s.v[0].key, "arch");
    assert_string_equal(fmt(&s, "zone"), "zone In [a b]");
    assert_string_equal(fmt(&s, "arch"), "arch NotIn [s390x]");
    assert_string_equal(fmt(&s, "gpu"), "gpu DoesNotExist");
    assert_string_equal(fmt(&s, "team"), "team Exists");
    assert_string_equal(fmt(&s, "cpu"), "cpu Exists Gte 4");
    assert_string_equal(fmt(&s, "mem"), "mem Exists Lte 64");

    r = kp_reqset_get(&s, "zone");
    assert_true(kp_req_has(r, "a"));
    assert_false(kp_req_has(r, "c"));
    assert_null(kp_req_single(r));
    r = kp_reqset_get(&s, "arch");
    assert_true(kp_req_has(r, "amd64"));
    assert_false(kp_req_has(r, "s390x"));
    r = kp_reqset_get(&s, "cpu");
    assert_true(kp_req_has(r, "4"));
    assert_false(kp_req_has(r, "3"));
    assert_false(kp_req_has(r, "four")); /* bounds need an integer */
    r = kp_reqset_get(&s, "gpu");
    assert_false(kp_req_has(r, ""));
    assert_int_equal(kp_req_operator(r), KP_SEL_DOES_NOT_EXIST);
    assert_null(kp_reqset_get(&s, "absent"));

    /* Integer operators take exactly one integer; s is unchanged on refusal. */
    assert_int_equal(kp_reqset_add(&s, "cpu", KP_SEL_LT, V("x"), 1, 0), -EINVAL);
    assert_int_equal(kp_reqset_add(&s, "cpu", KP_SEL_GT, V("1", "2"), 2, 0), -EINVAL);
    assert_int_equal(kp_reqset_add(&s, "x", KP_SEL_EXISTS, V("1"), 1, 0), -EINVAL);
    assert_string_equal(fmt(&s, "cpu"), "cpu Exists Gte 4");
    /* Gt of the largest integer leaves nothing. */
    add(&s, "huge", KP_SEL_GT, V("9223372036854775807"), 1);
    assert_int_equal(kp_req_operator(kp_reqset_get(&s, "huge")), KP_SEL_DOES_NOT_EXIST);
    kp_reqset_done(&s);
    kp_reqset_done(&s); /* idempotent */
}

static void test_intersections(void **state)
{
    struct kp_reqset s = KP_REQSET_INIT;

    (void)state;
    /* finite ∩ finite */
    add(&s, "zone", KP_SEL_IN, V("a", "b", "c"), 3);
    add(&s, "zone", KP_SEL_IN, V("b", "c", "d"), 3);
    assert_string_equal(fmt(&s, "zone"), "zone In [b c]");
    /* finite ∩ complement */
    add(&s, "zone", KP_SEL_NOT_IN, V("c"), 1);
    assert_string_equal(fmt(&s, "zone"), "zone In [b]");
    assert_string_equal(kp_req_single(kp_reqset_get(&s, "zone")), "b");
    /* complement ∩ complement: the excluded values unite */
    add(&s, "arch", KP_SEL_NOT_IN, V("x"), 1);
    add(&s, "arch", KP_SEL_NOT_IN, V("a", "y"), 2);
    assert_string_equal(fmt(&s, "arch"), "arch NotIn [a x y]");
    add(&s, "arch", KP_SEL_EXISTS, NULL, 0);
    assert_string_equal(fmt(&s, "arch"), "arch NotIn [a x y]");
    /* bounds narrow; a finite set keeps only the values within them */
    add(&s, "cpu", KP_SEL_GTE, V("2"), 1);
    add(&s, "cpu", KP_SEL_LT, V("9"), 1);
    assert_string_equal(fmt(&s, "cpu"), "cpu Exists Gte 2 Lte 8");
    add(&s, "cpu", KP_SEL_IN, V("1", "4", "8", "9", "x"), 5);
    assert_string_equal(fmt(&s, "cpu"), "cpu In [4 8]");
    /* an empty range collapses to DoesNotExist */
    add(&s, "mem", KP_SEL_GT, V("10"), 1);
    add(&s, "mem", KP_SEL_LT, V("11"), 1);
    assert_string_equal(fmt(&s, "mem"), "mem DoesNotExist");
    /* In ∩ DoesNotExist is empty */
    add(&s, "zone", KP_SEL_DOES_NOT_EXIST, NULL, 0);
    assert_string_equal(fmt(&s, "zone"), "zone DoesNotExist");
    kp_reqset_done(&s);

    /* Many values are summarised. */
    add(&s, "k", KP_SEL_IN, V("a", "b", "c", "d", "e", "f", "g"), 7);
    assert_string_equal(fmt(&s, "k"), "k In [a b c d e and 2 more]");
    kp_reqset_done(&s);
}

static void test_intersects_compatible(void **state)
{
    struct kp_reqset np = KP_REQSET_INIT, pod = KP_REQSET_INIT, other = KP_REQSET_INIT;
    char why[KP_REQSET_WHY_SIZE];

    (void)state;
    add(&np, "topology.kubernetes.io/zone", KP_SEL_IN, V("a", "b"), 2);
    add(&np, "team", KP_SEL_IN, V("edge"), 1);

    add(&pod, "topology.kubernetes.io/zone", KP_SEL_IN, V("b", "c"), 2);
    assert_true(kp_reqset_intersects(&np, &pod, why, sizeof(why)));
    add(&pod, "topology.kubernetes.io/zone", KP_SEL_NOT_IN, V("b"), 1);
    assert_false(kp_reqset_intersects(&np, &pod, why, sizeof(why)));
    assert_string_equal(why, "key topology.kubernetes.io/zone: no value satisfies both "
                             "topology.kubernetes.io/zone In [c] and topology.kubernetes.io/zone "
                             "In [a b]");
    kp_reqset_done(&pod);

    /* A key only one side has never fails Intersects... */
    add(&pod, "gpu", KP_SEL_IN, V("a100"), 1);
    assert_true(kp_reqset_intersects(&np, &pod, NULL, 0));
    /* ...but Compatible refuses a required key the NodePool does not define, unless allowed. */
    assert_false(kp_reqset_compatible(&np, &pod, kp_reqset_well_known_labels, why, sizeof(why)));
    assert_string_equal(why, "label gpu is required but has no known values here");
    kp_reqset_done(&pod);
    add(&pod, "kubernetes.io/arch", KP_SEL_IN, V("arm64"), 1);
    add(&pod, "gpu", KP_SEL_DOES_NOT_EXIST, NULL, 0); /* asks for nothing: fine */
    add(&pod, "spot", KP_SEL_NOT_IN, V("true"), 1);
    assert_true(kp_reqset_compatible(&np, &pod, kp_reqset_well_known_labels, why, sizeof(why)));
    assert_false(kp_reqset_compatible(&np, &pod, NULL, NULL, 0));

    /* Two "not this" sets always get along, even when their intersection is empty. */
    add(&other, "gpu", KP_SEL_NOT_IN, V("a100"), 1);
    assert_true(kp_reqset_intersects(&pod, &other, NULL, 0));
    kp_reqset_done(&other);
    add(&other, "gpu", KP_SEL_IN, V("a100"), 1);
    assert_false(kp_reqset_intersects(&pod, &other, NULL, 0));
    kp_reqset_done(&other);
    /* Bounds against bounds. */
    add(&other, "cpu", KP_SEL_GT, V("8"), 1);
    kp_reqset_done(&pod);
    add(&pod, "cpu", KP_SEL_LT, V("9"), 1);
    assert_false(kp_reqset_intersects(&pod, &other, why, sizeof(why)));
    assert_string_equal(why, "key cpu: no value satisfies both cpu Exists Gte 9 and cpu Exists "
                             "Lte 8");
    kp_reqset_done(&pod);
    add(&pod, "cpu", KP_SEL_IN, V("16"), 1);
    assert_true(kp_reqset_intersects(&pod, &other, NULL, 0));

    /* A reason is cut to the caller's buffer. */
    kp_reqset_done(&pod);
    add(&pod, "team", KP_SEL_IN, V("core"), 1);
    assert_false(kp_reqset_intersects(&np, &pod, why, 12));
    assert_string_equal(why, "key team: n");

    kp_reqset_done(&np);
    kp_reqset_done(&pod);
    kp_reqset_done(&other);
}

/* An instance type In [a b] for zone and capacity type, and an offering per (zone, type): the
 * scheduler's question is whether the NodeClaim's set intersects the type's and one available
 * offering's. */
static void test_instance_type_and_offerings(void **state)
{
    struct kp_reqset it = KP_REQSET_INIT, off_a = KP_REQSET_INIT, off_b = KP_REQSET_INIT;
    struct kp_reqset claim = KP_REQSET_INIT, copy;

    (void)state;
    add(&it, "node.kubernetes.io/instance-type", KP_SEL_IN, V("big"), 1);
    add(&it, "topology.kubernetes.io/zone", KP_SEL_IN, V("rack-a", "rack-b"), 2);
    add(&it, "karpenter.sh/capacity-type", KP_SEL_IN, V("on-demand"), 1);
    add(&off_a, "topology.kubernetes.io/zone", KP_SEL_IN, V("rack-a"), 1);
    add(&off_a, "karpenter.sh/capacity-type", KP_SEL_IN, V("on-demand"), 1);
    add(&off_b, "topology.kubernetes.io/zone", KP_SEL_IN, V("rack-b"), 1);
    add(&off_b, "karpenter.sh/capacity-type", KP_SEL_IN, V("on-demand"), 1);

    add(&claim, "topology.kubernetes.io/zone", KP_SEL_IN, V("rack-b"), 1);
    assert_true(kp_reqset_intersects(&claim, &it, NULL, 0));
    assert_false(kp_reqset_intersects(&claim, &off_a, NULL, 0));
    assert_true(kp_reqset_intersects(&claim, &off_b, NULL, 0));

    /* Narrowing the claim by the offering gives what the launch will label. */
    assert_int_equal(kp_reqset_intersect(&claim, &off_b), 0);
    assert_string_equal(kp_req_single(kp_reqset_get(&claim, "karpenter.sh/capacity-type")),
                        "on-demand");
    assert_int_equal(kp_reqset_copy(&claim, &copy), 0);
    assert_true(kp_reqset_equal(&claim, &copy));
    add(&copy, "topology.kubernetes.io/zone", KP_SEL_NOT_IN, V("rack-b"), 1);
    assert_false(kp_reqset_equal(&claim, &copy));
    kp_reqset_done(&copy);
    kp_reqset_done(&it);
    kp_reqset_done(&off_a);
    kp_reqset_done(&off_b);
    kp_reqset_done(&claim);
}

static void test_from_nodepool(void **state)
{
    size_t n;
    char *data = kp_test_read_data("objects/nodepool.json", &n);
    struct kp_entry *e = NULL;
    struct kp_reqset s;

    (void)state;
    assert_int_equal(kp_nodepool_decode(data, n, &e), 0);
    assert_int_equal(kp_reqset_from_nodepool(kp_nodepool_view(e), &s), 0);
    assert_string_equal(fmt(&s, "kubernetes.io/arch"), "kubernetes.io/arch In [amd64 arm64]");
    assert_string_equal(fmt(&s, "node.kubernetes.io/instance-type"),
                        "node.kubernetes.io/instance-type In [large small]");
    assert_int_equal(kp_reqset_get(&s, "node.kubernetes.io/instance-type")->min_values, 1);
    assert_string_equal(fmt(&s, "karpenter.kpssh.dev/cpu"), "karpenter.kpssh.dev/cpu Exists Gte 2");
    assert_string_equal(fmt(&s, "team"), "team In [edge]"); /* a template label */
    assert_string_equal(fmt(&s, "karpenter.sh/nodepool"), "karpenter.sh/nodepool In [ssh-general]");
    kp_reqset_done(&s);
    kp_entry_unref(e);
    kp_free(data);
}

static int torture_sets(void)
{
    struct kp_reqset a = KP_REQSET_INIT, b = KP_REQSET_INIT, c = KP_REQSET_INIT;
    int r;

    if ((r = kp_reqset_add(&a, "zone", KP_SEL_IN, V("a", "b", "c"), 3, 0)) < 0 ||
        (r = kp_reqset_add(&a, "arch", KP_SEL_NOT_IN, V("x"), 1, 0)) < 0 ||
        (r = kp_reqset_add(&b, "arch", KP_SEL_NOT_IN, V("y", "z"), 2, 0)) < 0 ||
        (r = kp_reqset_add(&b, "zone", KP_SEL_NOT_IN, V("a"), 1, 0)) < 0 ||
        (r = kp_reqset_add(&b, "cpu", KP_SEL_GT, V("1"), 1, 0)) < 0)
        goto out;
    if ((r = kp_reqset_copy(&a, &c)) < 0)
        goto out;
    r = kp_reqset_intersect(&c, &b);
    if (r < 0) {
        /* A failed intersection leaves c as it was. */
        if (!kp_reqset_equal(&a, &c))
            r = -EBADMSG;
        goto out;
    }
    if (kp_reqset_get(&c, "zone")->n_values != 2 || kp_reqset_get(&c, "arch")->n_values != 3)
        r = -EBADMSG; /* zone In [b c], arch NotIn [x y z] */
out:
    kp_reqset_done(&a);
    kp_reqset_done(&b);
    kp_reqset_done(&c);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_operators),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_intersections),
        cmocka_unit_test(test_intersects_compatible),
        cmocka_unit_test(test_instance_type_and_offerings),
        cmocka_unit_test(test_from_nodepool),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_sets),
    };

    return kp_test_main("requirements", tests, KP_ARRAY_SIZE(tests), torture,
                        KP_ARRAY_SIZE(torture), argc, argv);
}
