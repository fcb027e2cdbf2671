/* DESIGN: unit tests for k8s/status.c against the contract in k8s/status.h.
 *
 * Bodies are shaped like the ones kube-apiserver sends (the integration tests capture real ones
 * into tests/fuzz/corpus/status/); each test checks the decoded fields and the mapped error of
 * STYLE.md rule 4. Non-Status bodies, wrong types and oversize inputs must decode to a usable
 * error, never fail. The torture case decodes every kind of body with each allocation failing in
 * turn. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "k8s/status.h"
#include "kp-test.h"

#define NOT_FOUND                                                                                  \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"configmaps \\\"x\\\" not found\",\"reason\":\"NotFound\","                      \
    "\"details\":{\"name\":\"x\",\"kind\":\"configmaps\"},\"code\":404}"
#define CONFLICT                                                                                   \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"Operation cannot be fulfilled on configmaps \\\"x\\\": the object has been "    \
    "modified; please apply your changes to the latest version and try again\","                   \
    "\"reason\":\"Conflict\",\"details\":{\"name\":\"x\",\"kind\":\"configmaps\"},\"code\":409}"
#define ALREADY                                                                                    \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"exists\","    \
    "\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"x\",\"kind\":\"configmaps\"},"           \
    "\"code\":409}"
#define INVALID                                                                                    \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"ConfigMap \\\"Bad\\\" is invalid\",\"reason\":\"Invalid\",\"details\":{"        \
    "\"name\":\"Bad\",\"kind\":\"ConfigMap\",\"causes\":[{\"reason\":\"FieldValueInvalid\","       \
    "\"message\":\"Invalid value: \\\"Bad\\\"\",\"field\":\"metadata.name\"},"                     \
    "{\"reason\":\"FieldValueRequired\",\"field\":\"data\"}]},\"code\":422}"
#define PDB                                                                                        \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"Cannot evict pod as it would violate the pod's disruption budget.\","           \
    "\"reason\":\"TooManyRequests\",\"details\":{\"causes\":[{\"reason\":\"DisruptionBudget\","    \
    "\"message\":\"The disruption budget pdb needs 1 healthy pods and has 1 currently\"}]},"       \
    "\"code\":429}"
#define THROTTLED                                                                                  \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"slow down\"," \
    "\"reason\":\"TooManyRequests\",\"details\":{\"retryAfterSeconds\":7},\"code\":429}"
#define EXPIRED                                                                                    \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"The provided continue parameter is too old\",\"reason\":\"Expired\","           \
    "\"code\":410}"

static void decode(const char *body, int status, uint64_t retry, struct kp_error *e)
{
    assert_int_equal(kp_status_decode(body, strlen(body), status, retry, e), 0);
}

static void test_not_found(void **state)
{
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    decode(NOT_FOUND, 404, 0, &e);
    assert_int_equal(e.errnum, -ENOENT);
    assert_int_equal(e.code, 404);
    assert_true(e.is_status);
    assert_string_equal(e.reason, "NotFound");
    assert_string_equal(e.message, "configmaps \"x\" not found");
    assert_string_equal(e.details_name, "x");
    assert_string_equal(e.details_kind, "configmaps");
    assert_null(e.details_group);
    assert_int_equal(e.n_causes, 0);
    kp_error_done(&e);
    assert_null(e.reason);
}

static void test_conflict_vs_already_exists(void **state)
{
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    decode(CONFLICT, 409, 0, &e);
    assert_int_equal(e.errnum, -KP_ECONFLICT);
    assert_true(kp_error_has_reason(&e, "Conflict"));
    /* Decoding again into a used error replaces it. */
    decode(ALREADY, 409, 0, &e);
    assert_int_equal(e.errnum, -EEXIST);
    assert_string_equal(e.reason, "AlreadyExists");
    kp_error_done(&e);
}

static void test_invalid_causes(void **state)
{
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    decode(INVALID, 422, 0, &e);
    assert_int_equal(e.errnum, -KP_EINVALID);
    assert_int_equal(e.n_causes, 2);
    assert_string_equal(e.causes[0].type, "FieldValueInvalid");
    assert_string_equal(e.causes[0].field, "metadata.name");
    assert_string_equal(e.causes[0].message, "Invalid value: \"Bad\"");
    assert_string_equal(e.causes[1].type, "FieldValueRequired");
    assert_null(e.causes[1].message);
    kp_error_done(&e);
}

static void test_pdb_and_throttle(void **state)
{
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    decode(PDB, 429, 0, &e);
    assert_int_equal(e.errnum, -EAGAIN);
    assert_true(kp_error_is_disruption_budget(&e));
    decode(THROTTLED, 429, 0, &e);
    assert_int_equal(e.errnum, -EAGAIN);
    assert_false(kp_error_is_disruption_budget(&e));
    assert_int_equal(e.retry_after_sec, 7);
    /* The header wins over details.retryAfterSeconds. */
    decode(THROTTLED, 429, 3, &e);
    assert_int_equal(e.retry_after_sec, 3);
    kp_error_done(&e);
}

static void test_expired(void **state)
{
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    decode(EXPIRED, 410, 0, &e);
    assert_int_equal(e.errnum, -KP_EEXPIRED);
    kp_error_done(&e);
}

static void test_code_table(void **state)
{
    static const struct {
        int code;
        int errnum;
    } t[] = {
        {400, -EINVAL},     {401, -KP_EUNAUTHORIZED}, {403, -KP_EFORBIDDEN}, {404, -ENOENT},
        {405, -EOPNOTSUPP}, {409, -KP_ECONFLICT},     {410, -KP_EEXPIRED},   {413, -E2BIG},
        {415, -EPROTO},     {422, -KP_EINVALID},      {429, -EAGAIN},        {500, -KP_ESERVER},
        {502, -KP_ESERVER}, {503, -EAGAIN},           {504, -ETIMEDOUT},     {418, -KP_ESERVER},
    };
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(t); i++) {
        /* Plain text from a proxy: no Status, the code decides. */
        decode("<html>Bad\tGateway</html>\n", t[i].code, 0, &e);
        assert_int_equal(e.errnum, t[i].errnum);
        assert_false(e.is_status);
        assert_string_equal(e.message, "<html>Bad Gateway</html>");
    }
    /* An unknown reason falls back to the code; 503 with a strange reason still retries. */
    decode("{\"kind\":\"Status\",\"reason\":\"Weird\",\"code\":503}", 503, 0, &e);
    assert_int_equal(e.errnum, -EAGAIN);
    decode("{\"kind\":\"Status\",\"reason\":\"ServerTimeout\",\"code\":500}", 500, 0, &e);
    assert_int_equal(e.errnum, -EAGAIN);
    kp_error_done(&e);
}

static void test_malformed(void **state)
{
    static const char *const bodies[] = {
        "",
        "{",
        "null",
        "[]",
        "{\"kind\":\"Status\"}",
        "{\"kind\":5,\"code\":\"x\"}",
        "{\"kind\":\"Status\",\"reason\":7,\"message\":[],\"details\":\"x\",\"code\":1e9}",
        "{\"kind\":\"Status\",\"details\":{\"causes\":[1,null,{\"reason\":4}]}}",
        "{\"kind\":\"Status\",\"details\":{\"retryAfterSeconds\":-5}}",
        "{\"kind\":\"Status\",\"reason\":\"\"}",
    };
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bodies); i++) {
        decode(bodies[i], 404, 0, &e);
        assert_int_equal(e.code, 404);
        assert_int_equal(e.errnum, -ENOENT);
        assert_string_equal(e.reason, "NotFound");
        assert_int_equal(e.retry_after_sec, 0);
    }
    decode("{\"kind\":\"Status\",\"details\":{\"causes\":[1,null,{\"reason\":4}]}}", 422, 0, &e);
    assert_int_equal(e.n_causes, 1);
    assert_int_equal(e.causes_dropped, 2);
    assert_null(e.causes[0].type);
    kp_error_done(&e);
}

static void test_long_excerpt(void **state)
{
    struct kp_error e = KP_ERROR_INIT;
    char body[1000];

    (void)state;
    memset(body, 'a', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    decode(body, 502, 0, &e);
    assert_int_equal(strlen(e.message), KP_STATUS_EXCERPT + 3);
    kp_error_done(&e);
}

static void test_client_error(void **state)
{
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    decode(NOT_FOUND, 404, 0, &e);
    assert_int_equal(kp_error_set_client(&e, -ETIMEDOUT, "Operation timed out"), 0);
    assert_int_equal(e.errnum, -ETIMEDOUT);
    assert_int_equal(e.code, 0);
    assert_null(e.reason);
    assert_string_equal(e.message, "Operation timed out");
    kp_error_done(&e);
    kp_error_done(NULL);
}

static int torture_decode(void)
{
    static const char *const bodies[] = {NOT_FOUND, CONFLICT, INVALID, PDB, THROTTLED, "oops"};
    struct kp_error e = KP_ERROR_INIT;
    int r = 0;

    for (size_t i = 0; i < KP_ARRAY_SIZE(bodies) && r == 0; i++)
        r = kp_status_decode(bodies[i], strlen(bodies[i]), 409, 0, &e);
    kp_error_done(&e);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_found),      cmocka_unit_test(test_conflict_vs_already_exists),
        cmocka_unit_test(test_invalid_causes), cmocka_unit_test(test_pdb_and_throttle),
        cmocka_unit_test(test_expired),        cmocka_unit_test(test_code_table),
        cmocka_unit_test(test_malformed),      cmocka_unit_test(test_long_excerpt),
        cmocka_unit_test(test_client_error),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_decode),
    };

    return kp_test_main("status", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
