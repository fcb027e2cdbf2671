/* tests/unit/test-token.c: bootstrap tokens (provider/ssh/token.h) without a server: the
 * generated id and value, the group rule the API server's bootstrap authenticator applies, and
 * the Secret object a join's token becomes, including the configured group. The real server's
 * side is tests/integration/test-hostctl.c (mint and collect). */
#include "kp-test.h"

#include <errno.h>
#include <string.h>

#include "base/secret.h"
#include "json/json.h"
#include "provider/ssh/token.h"

#define NOW_USEC (1700000000ULL * 1000000ULL) /* 2023-11-14T22:13:20Z */

static const char *string_data(json_t *o, const char *key)
{
    json_t *sd = NULL;
    const char *v = NULL;

    assert_int_equal(kp_json_get_object(o, "stringData", &sd), 0);
    assert_int_equal(kp_json_get_str(sd, key, &v), 0);
    return v;
}

static void test_generate(void **state)
{
    char id[KP_TOKEN_ID_SIZE];
    struct kp_secret *tok = NULL;
    const char *v;

    (void)state;
    assert_int_equal(kp_token_generate(id, &tok), 0);
    assert_true(kp_token_id_valid(id));
    v = kp_secret_reveal(tok);
    assert_int_equal(kp_secret_len(tok), KP_TOKEN_ID_LEN + 1 + KP_TOKEN_SECRET_LEN);
    assert_memory_equal(v, id, KP_TOKEN_ID_LEN);
    assert_int_equal(v[KP_TOKEN_ID_LEN], '.');
    kp_secret_free(tok);
    assert_false(kp_token_id_valid("abc12"));
    assert_false(kp_token_id_valid("ABC123"));
    assert_false(kp_token_id_valid(NULL));
}

static void test_group_rule(void **state)
{
    static const char *const good[] = {
        KP_TOKEN_GROUP,
        "system:bootstrappers:kubeadm:default-node-token",
        "system:bootstrappers:team-a",
        "system:bootstrappers:0",
    };
    static const char *const bad[] = {
        "system:bootstrappers:",       "system:bootstrappers:kpssh:",
        "system:bootstrappers:kpssh-", "system:bootstrappers:Team",
        "system:bootstrappers:a b",    "system:nodes",
        "system:bootstrapperskpssh",   "",
    };
    char longest[sizeof("system:bootstrappers:") + 257];

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(good); i++)
        assert_true(kp_token_group_valid(good[i]));
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++)
        assert_false(kp_token_group_valid(bad[i]));
    assert_false(kp_token_group_valid(NULL));
    memcpy(longest, "system:bootstrappers:", sizeof("system:bootstrappers:") - 1);
    memset(longest + sizeof("system:bootstrappers:") - 1, 'a', 256);
    longest[sizeof("system:bootstrappers:") - 1 + 256] = '\0';
    assert_true(kp_token_group_valid(longest));
    longest[sizeof("system:bootstrappers:") - 1 + 256] = 'a';
    longest[sizeof("system:bootstrappers:") - 1 + 257] = '\0';
    assert_false(kp_token_group_valid(longest));
}

static void test_secret_object_carries_group(void **state)
{
    struct kp_secret *tok = NULL;
    json_t *o = NULL, *meta = NULL;
    const char *name = NULL;

    (void)state;
    assert_int_equal(kp_secret_new("abc123.0123456789abcdef", 23, &tok), 0);
    assert_int_equal(
        kp_token_secret_object(tok, "system:bootstrappers:team-a", "nc-1", NOW_USEC, &o), 0);
    assert_int_equal(kp_json_get_object(o, "metadata", &meta), 0);
    assert_int_equal(kp_json_get_str(meta, "name", &name), 0);
    assert_string_equal(name, "bootstrap-token-abc123");
    assert_string_equal(string_data(o, "auth-extra-groups"), "system:bootstrappers:team-a");
    assert_string_equal(string_data(o, "token-id"), "abc123");
    assert_string_equal(string_data(o, "token-secret"), "0123456789abcdef");
    assert_string_equal(string_data(o, "expiration"), "2023-11-14T23:13:20.000000Z");
    assert_string_equal(string_data(o, "description"), "kpssh nodeclaim nc-1");
    kp_json_unref(o);
    o = NULL;

    assert_int_equal(kp_token_secret_object(tok, KP_TOKEN_GROUP, "nc-1", NOW_USEC, &o), 0);
    assert_string_equal(string_data(o, "auth-extra-groups"), "system:bootstrappers:kpssh");
    kp_json_unref(o);
    o = NULL;

    /* A group the authenticator would refuse never becomes a Secret. */
    assert_int_equal(kp_token_secret_object(tok, "system:nodes", "nc-1", NOW_USEC, &o), -EINVAL);
    assert_int_equal(kp_token_secret_object(tok, NULL, "nc-1", NOW_USEC, &o), -EINVAL);
    assert_null(o);
    kp_secret_free(tok);
}

static int torture_secret_object(void)
{
    struct kp_secret *tok = NULL;
    json_t *o = NULL;
    int r;

    if ((r = kp_secret_new("abc123.0123456789abcdef", 23, &tok)) < 0)
        return r;
    r = kp_token_secret_object(tok, KP_TOKEN_GROUP, "nc-1", NOW_USEC, &o);
    kp_json_unref(o);
    kp_secret_free(tok);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate),
        cmocka_unit_test(test_group_rule),
        cmocka_unit_test(test_secret_object_carries_group),
    };
    const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_secret_object),
    };

    return kp_test_main("token", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture), argc,
                        argv);
}
