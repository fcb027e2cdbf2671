/* Tests for core/conds.c: a condition set copied from a cached NodeClaim keeps every condition it
 * does not touch (message and generation included), moves lastTransitionTime only on a status
 * change, reports no change when a reconcile re-sets what is there, and derives Ready from
 * Launched, Registered and Initialized as Karpenter's condition sets do. */
#include "kp-test.h"

#include <string.h>

#include "base/buf.h"
#include "core/conds.h"
#include "json/json.h"
#include "api/obj-karpenter.h"

#define T0 1767225600000000LL /* 2026-01-01T00:00:00Z */

static struct kp_entry *nodeclaim(void)
{
    static const char doc[] =
        "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodeClaim\",\"metadata\":{\"name\":\"nc\","
        "\"uid\":\"u1\",\"resourceVersion\":\"7\",\"generation\":3,"
        "\"creationTimestamp\":\"2026-01-01T00:00:00Z\"},\"spec\":{\"nodeClassRef\":{\"group\":"
        "\"karpenter.kpssh.dev\",\"kind\":\"SSHNodeClass\",\"name\":\"c\"},\"requirements\":[]},"
        "\"status\":{\"conditions\":[{\"type\":\"Launched\",\"status\":\"True\",\"reason\":"
        "\"Launched\",\"message\":\"\",\"observedGeneration\":3,\"lastTransitionTime\":"
        "\"2026-01-01T00:00:00Z\"},{\"type\":\"Drifted\",\"status\":\"True\",\"reason\":"
        "\"NodePoolDrifted\",\"message\":\"hash changed\",\"observedGeneration\":2,"
        "\"lastTransitionTime\":\"2026-01-01T00:00:05Z\"}]}}";
    struct kp_entry *e = NULL;

    assert_int_equal(kp_nodeclaim_decode(doc, strlen(doc), &e), 0);
    return e;
}

static void test_copy_keeps_untouched(void **state)
{
    struct kp_entry *e = nodeclaim();
    const struct kp_nodeclaim_view *v = kp_nodeclaim_view(e);
    struct kp_condset cs;
    const struct kp_condset_item *d;

    (void)state;
    assert_int_equal(kp_condset_init(&cs, &v->conditions, v->generation, T0 + 60000000), 0);
    kp_entry_unref(e); /* the set keeps copies */
    assert_int_equal(cs.n, 2);
    d = kp_condset_get(&cs, "Drifted");
    assert_non_null(d);
    assert_string_equal(d->message, "hash changed");
    assert_int_equal(d->observed_generation, 2);
    assert_int_equal(d->last_transition_usec, T0 + 5000000);
    /* Re-setting Launched as it is changes nothing: no write. */
    assert_int_equal(kp_condset_set(&cs, "Launched", KP_COND_TRUE, NULL, NULL), 0);
    assert_false(kp_condset_changed(&cs));
    kp_condset_done(&cs);
}

static void test_transition_time_moves_on_status_only(void **state)
{
    struct kp_entry *e = nodeclaim();
    const struct kp_nodeclaim_view *v = kp_nodeclaim_view(e);
    struct kp_condset cs;

    (void)state;
    assert_int_equal(kp_condset_init(&cs, &v->conditions, v->generation, T0 + 60500000), 0);
    assert_int_equal(kp_condset_set(&cs, "Registered", KP_COND_UNKNOWN, "NodeNotFound",
                                    "Node not registered with cluster"),
                     0);
    assert_true(kp_condset_changed(&cs));
    /* second precision, as the server keeps it */
    assert_int_equal(kp_condset_get(&cs, "Registered")->last_transition_usec, T0 + 60000000);
    cs.now_usec = T0 + 90000000;
    assert_int_equal(
        kp_condset_set(&cs, "Registered", KP_COND_UNKNOWN, "NodeNotFound", "still not there"), 0);
    assert_int_equal(kp_condset_get(&cs, "Registered")->last_transition_usec, T0 + 60000000);
    assert_int_equal(kp_condset_set(&cs, "Registered", KP_COND_TRUE, NULL, NULL), 0);
    assert_int_equal(kp_condset_get(&cs, "Registered")->last_transition_usec, T0 + 90000000);
    assert_string_equal(kp_condset_get(&cs, "Registered")->reason, "Registered");
    /* An empty reason on a non-True condition would fail the CRD's pattern. */
    assert_int_equal(kp_condset_set(&cs, "Initialized", KP_COND_UNKNOWN, "", NULL), 0);
    assert_string_equal(kp_condset_get(&cs, "Initialized")->reason, "AwaitingReconciliation");
    kp_condset_clear(&cs, "Drifted");
    assert_null(kp_condset_get(&cs, "Drifted"));
    kp_condset_done(&cs);
    kp_entry_unref(e);
}

static void test_root(void **state)
{
    struct kp_condset cs;
    const struct kp_condset_item *ready;

    (void)state;
    assert_int_equal(kp_condset_init(&cs, NULL, 1, T0), 0);
    assert_int_equal(kp_condset_root(&cs, "Ready", kp_nodeclaim_ready_deps, 3), 0);
    assert_int_equal(kp_condset_get(&cs, "Ready")->status, KP_COND_UNKNOWN);
    assert_int_equal(kp_condset_set(&cs, "Launched", KP_COND_TRUE, NULL, NULL), 0);
    assert_int_equal(kp_condset_set(&cs, "Registered", KP_COND_FALSE, "MultipleNodesFound", "2"),
                     0);
    assert_int_equal(kp_condset_set(&cs, "Initialized", KP_COND_UNKNOWN, "NodeNotFound", NULL), 0);
    assert_int_equal(kp_condset_root(&cs, "Ready", kp_nodeclaim_ready_deps, 3), 0);
    ready = kp_condset_get(&cs, "Ready");
    assert_int_equal(ready->status, KP_COND_FALSE);
    assert_string_equal(ready->reason, "MultipleNodesFound");
    assert_int_equal(kp_condset_set(&cs, "Registered", KP_COND_TRUE, NULL, NULL), 0);
    assert_int_equal(kp_condset_set(&cs, "Initialized", KP_COND_TRUE, NULL, NULL), 0);
    assert_int_equal(kp_condset_root(&cs, "Ready", kp_nodeclaim_ready_deps, 3), 0);
    assert_int_equal(kp_condset_get(&cs, "Ready")->status, KP_COND_TRUE);
    kp_condset_done(&cs);
}

static void test_json(void **state)
{
    struct kp_condset cs;
    struct kp_buf out = KP_BUF_INIT(4096);
    json_t *arr = NULL;

    (void)state;
    assert_int_equal(kp_condset_init(&cs, NULL, 4, T0), 0);
    assert_int_equal(kp_condset_set(&cs, "Launched", KP_COND_TRUE, NULL, NULL), 0);
    assert_int_equal(kp_condset_json(&cs, &arr), 0);
    assert_int_equal(kp_json_dump(arr, 0, &out), 0);
    assert_non_null(strstr(kp_buf_str(&out), "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\""));
    assert_non_null(strstr(kp_buf_str(&out), "\"observedGeneration\":4"));
    kp_json_unref(arr);
    kp_buf_done(&out);
    kp_condset_done(&cs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_keeps_untouched),
        cmocka_unit_test(test_transition_time_moves_on_status_only),
        cmocka_unit_test(test_root),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
