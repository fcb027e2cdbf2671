/* DESIGN: unit tests for the write fence (k8s/fence.c) and the two doors it guards: the API
 * client's writes (k8s/client.c) and the start of an SSH phase (provider/ssh/runner.c).
 *
 * The client and the target point at 127.0.0.1:9 (discard; nothing listens in the test
 * environment), so a request that is sent fails with a connection error, and one the fence
 * refuses fails with -KP_ENOTLEADER: the error code alone tells whether anything left the
 * process. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/fence.h"
#include "k8s/transport.h"
#include "kp-test.h"
#include "provider/ssh/runner.h"
#include "provider/ssh/session.h"

static struct kp_client *new_client(void)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9",
                                   .allow_plain_http = true,
                                   .timeout_usec = 2 * KP_USEC_PER_SEC};
    struct kp_client *c = NULL;

    assert_int_equal(kp_client_new(&to, &c), 0);
    return c;
}

static void test_deadline(void **state)
{
    struct kp_fence f;

    (void)state;
    assert_int_equal(kp_fence_check(NULL), 0);
    kp_fence_init(&f, KP_FENCE_CLOSED);
    assert_int_equal(kp_fence_check(&f), -KP_ENOTLEADER);
    kp_fence_set(&f, KP_FENCE_OPEN);
    assert_int_equal(kp_fence_check(&f), 0);
    kp_fence_set(&f, kp_mono_usec() + 3600 * KP_USEC_PER_SEC);
    assert_int_equal(kp_fence_check(&f), 0);
    /* A deadline in the past closes the fence with nobody storing anything. */
    kp_fence_set(&f, kp_mono_usec() - 1);
    assert_int_equal(kp_fence_check(&f), -KP_ENOTLEADER);
}

static void test_client_writes(void **state)
{
    struct kp_error err = KP_ERROR_INIT;
    struct kp_client *c = new_client(), *clone = NULL;
    struct kp_fence f;
    json_t *doc = NULL, *got = NULL;

    (void)state;
    kp_fence_init(&f, KP_FENCE_CLOSED);
    kp_client_set_fence(c, &f);
    assert_ptr_equal(kp_client_fence(c), &f);
    assert_int_equal(kp_client_clone(c, &clone), 0);
    assert_ptr_equal(kp_client_fence(clone), &f);
    assert_int_equal(kp_json_patch_new(&doc), 0);

    /* Every write is refused before it is sent, with the reason in reterr. */
    assert_int_equal(kp_client_create(clone, &KP_RES_LEASE, "ns", doc, NULL, &err), -KP_ENOTLEADER);
    assert_non_null(err.message);
    assert_int_equal(kp_client_update(c, &KP_RES_LEASE, "ns", "l", doc, NULL, NULL),
                     -KP_ENOTLEADER);
    assert_int_equal(
        kp_client_patch(c, &KP_RES_NODE, NULL, "n", NULL, KP_PATCH_MERGE, doc, NULL, NULL),
        -KP_ENOTLEADER);
    assert_int_equal(kp_client_delete(c, &KP_RES_POD, "ns", "p", NULL, NULL), -KP_ENOTLEADER);
    /* Reads are not writes: they are sent (and fail to connect). */
    assert_int_not_equal(kp_client_get(c, &KP_RES_LEASE, "ns", "l", &got, NULL), -KP_ENOTLEADER);
    /* An open fence lets the write through to the (absent) server. */
    kp_fence_set(&f, KP_FENCE_OPEN);
    assert_int_not_equal(kp_client_create(clone, &KP_RES_LEASE, "ns", doc, NULL, NULL),
                         -KP_ENOTLEADER);
    kp_error_done(&err);
    kp_json_unref(doc);
    kp_client_free(clone);
    kp_client_free(c);
}

static void test_ssh_phase(void **state)
{
    static const char script[] = "true\n";
    struct kp_fence f;
    struct kp_ssh_target t = {.host = "127.0.0.1", .port = 9, .dial_timeout_usec = 1000000};
    struct kp_ssh_phase ph = {.name = "join", .script = script, .script_len = sizeof(script) - 1};
    struct kp_ssh_capture cap;
    char *msg = NULL;

    (void)state;
    kp_fence_init(&f, KP_FENCE_CLOSED);
    t.fence = &f;
    ph.deadline = kp_deadline_in(2 * KP_USEC_PER_SEC);
    kp_ssh_capture_init(&cap);
    assert_int_equal(kp_ssh_run_phase(&t, &ph, &cap, &msg), -KP_ENOTLEADER);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "not the leader"));
    kp_free(msg);
    kp_ssh_capture_done(&cap);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_client_writes),
        cmocka_unit_test(test_ssh_phase),
    };

    return kp_test_main("fence", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
