/* DESIGN: unit tests for provider/ssh/hostio.c: reading an SSHHost's key Secret.
 *
 * kp_hostio_creds_from_secret() decides what a key Secret means: which fields are required,
 * when the host is trusted on first use and when a pre-pin is a mistake. The Secrets here are
 * written as the API server returns them (stringData is merged into base64 data on write), so
 * a templated `stringData: {knownHost: "   "}` arrives as `data: {knownHost: "ICAg"}`. */
#include "kp-test.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "json/json.h"
#include "provider/ssh/hostio.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/profile.h"

/* base64 of "-----BEGIN KEY-----\n" (the parser only decodes; the session reads the key). */
#define KEY_B64 "LS0tLS1CRUdJTiBLRVktLS0tLQo="
/* base64 of "SHA256:MiazcAqsXIJDE0hYNUSp8veLWoBsenRK7PueAI23pT8\n" */
#define PIN_B64 "U0hBMjU2Ok1pYXpjQXFzWElKREUwaFlOVVNwOHZlTFdvQnNlblJLN1B1ZUFJMjNwVDgK"

static json_t *secret(const char *data)
{
    char doc[512];
    json_t *o = NULL;
    int n = snprintf(doc, sizeof(doc),
                     "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"namespace\":"
                     "\"pool\",\"name\":\"k\"},\"data\":{%s}}",
                     data);

    assert_true(n > 0 && (size_t)n < sizeof(doc));
    assert_int_equal(kp_json_parse(doc, (size_t)n, sizeof(doc), 0, &o, NULL), 0);
    return o;
}

/* Reads data as key Secret pool/k: the result, with *ret_msg (or NULL) and cr filled. */
static int read_creds(const char *data, struct kp_hostio_creds *cr, char **ret_msg)
{
    json_t *o = secret(data);
    int r;

    *ret_msg = NULL;
    r = kp_hostio_creds_from_secret(o, "pool", "k", cr, ret_msg);
    kp_json_unref(o);
    return r;
}

/* Refused as a configuration error whose message contains want; cr stays empty. */
static void refused(const char *data, const char *want)
{
    struct kp_hostio_creds cr = {0};
    char *msg = NULL;

    assert_int_equal(read_creds(data, &cr, &msg), -EINVAL);
    assert_non_null(msg);
    if (!strstr(msg, want))
        fail_msg("data {%s}: message \"%s\" lacks \"%s\"", data, msg, want);
    assert_non_null(strstr(msg, "SSH key Secret pool/k"));
    assert_null(cr.key);
    assert_null(cr.known_host);
    kp_free(msg);
}

/* The text goes through kp_msg_set: an earlier message is replaced (freed: ASan would see a
 * leak), and a caller that asks for no text gets the same verdict without it. */
static void test_msg_replaced_or_not_asked(void **state)
{
    struct kp_hostio_creds cr = {0};
    json_t *o = secret("\"privateKey\":\"!!\"");
    char *msg = NULL;

    (void)state;
    kp_msg_set(&msg, "%s", "an earlier message");
    assert_int_equal(kp_hostio_creds_from_secret(o, "pool", "k", &cr, &msg), -EINVAL);
    assert_non_null(strstr(msg, "SSH key Secret pool/k"));
    assert_int_equal(kp_hostio_creds_from_secret(o, "pool", "k", &cr, NULL), -EINVAL);
    assert_null(cr.key);
    kp_free(msg);
    kp_json_unref(o);
}

static void test_tofu_without_knownhost(void **state)
{
    struct kp_hostio_creds cr = {0};
    char *msg = NULL;

    (void)state;
    assert_int_equal(read_creds("\"privateKey\":\"" KEY_B64 "\"", &cr, &msg), 0);
    assert_null(msg);
    assert_non_null(cr.key);
    assert_string_equal(kp_secret_reveal(cr.key), "-----BEGIN KEY-----\n");
    assert_null(cr.known_host); /* no pre-pin: the probe pins on first use */
    kp_hostio_creds_done(&cr);
}

static void test_prepin(void **state)
{
    struct kp_hostio_creds cr = {0};
    char *msg = NULL;

    (void)state;
    assert_int_equal(
        read_creds("\"privateKey\":\"" KEY_B64 "\",\"knownHost\":\"" PIN_B64 "\"", &cr, &msg), 0);
    assert_null(msg);
    assert_non_null(cr.known_host);
    assert_string_equal(kp_secret_reveal(cr.known_host),
                        "SHA256:MiazcAqsXIJDE0hYNUSp8veLWoBsenRK7PueAI23pT8\n");
    kp_hostio_creds_done(&cr);
}

/* The case: a knownHost that is there but says nothing never means trust on first
 * use. */
static void test_blank_knownhost_refused(void **state)
{
    static const char *const blanks[] = {
        "\"\"",         /* stringData knownHost: "" */
        "\"ICAg\"",     /* "   " */
        "\"IAkNCg==\"", /* " \t\r\n" */
        "\"Cg==\"",     /* "\n" (a YAML block scalar of an empty variable) */
        "null",
    };
    char data[256];

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(blanks); i++) {
        (void)snprintf(data, sizeof(data), "\"privateKey\":\"%s\",\"knownHost\":%s", KEY_B64,
                       blanks[i]);
        refused(data, "data.knownHost is present but empty; remove it to trust on first use, or "
                      "set the host's key");
    }
}

static void test_knownhost_nul_refused(void **state)
{
    (void)state;
    /* "\0ssh-ed25519 AAAA": read as a C string it would be blank. */
    refused("\"privateKey\":\"" KEY_B64 "\",\"knownHost\":\"AHNzaC1lZDI1NTE5IEFBQUE=\"",
            "NUL byte");
}

static void test_bad_fields(void **state)
{
    (void)state;
    refused("\"knownHost\":\"" PIN_B64 "\"", "data.privateKey is missing or not base64");
    refused("\"privateKey\":\"not base64!\"", "data.privateKey is missing or not base64");
    refused("\"privateKey\":\"" KEY_B64 "\",\"knownHost\":\"not base64!\"",
            "data.knownHost is not base64");
}

static int torture_creds(void)
{
    struct kp_hostio_creds cr = {0};
    static const char doc[] = "{\"data\":{\"privateKey\":\"" KEY_B64 "\",\"knownHost\":\"ICAg\"}}";
    json_t *o = NULL;
    char *msg = NULL;
    int r;

    if ((r = kp_json_parse(doc, sizeof(doc) - 1, sizeof(doc), 0, &o, NULL)) < 0)
        return r;
    r = kp_hostio_creds_from_secret(o, "pool", "k", &cr, &msg);
    kp_json_unref(o);
    kp_hostio_creds_done(&cr);
    kp_free(msg);
    /* -EINVAL is the verdict (blank pre-pin); only -ENOMEM may replace it. */
    return r == -EINVAL ? 0 : r;
}

/* The controller's gate for Verified hosts, with the SSHSIG fixtures (tests/data/sshsig). */
static void test_verified_gate(void **state)
{
    size_t msg_len = 0, sig_len = 0, file_len = 0, pub_len = 0, other_len = 0;
    char *msg = kp_test_read_data("sshsig/msg.txt", &msg_len);
    char *sig = kp_test_read_data("sshsig/ed25519.sig", &sig_len);
    char *file_sig = kp_test_read_data("sshsig/ed25519.file.sig", &file_len);
    char *pub = kp_test_read_data("sshsig/ed25519.pub", &pub_len);
    char *other = kp_test_read_data("sshsig/ecdsa256.pub", &other_len);
    const char *trusted[] = {pub}, *untrusted[] = {other};
    struct kp_sshhost_view h = {.e.name = "h1",
                                .exec_mode = KP_EXEC_VERIFIED,
                                .trusted_signers = trusted,
                                .n_trusted_signers = 1};
    struct kp_sshjoinprofile_view pr = {.e.name = "p1"};
    char *why = NULL, *changed;

    (void)state;
    pr.scripts[KP_PROFILE_JOIN] = (struct kp_sjp_text){msg, msg_len};
    pr.signatures[KP_PROFILE_JOIN] = (struct kp_sjp_text){sig, sig_len};
    assert_int_equal(kp_hostio_verified_check(&h, &pr, KP_PROFILE_JOIN, &why), 0);
    assert_null(why);

    /* Raw hosts are not checked at all. */
    h.exec_mode = KP_EXEC_RAW;
    assert_int_equal(kp_hostio_verified_check(&h, &pr, KP_PROFILE_INSTALL, &why), 0);
    h.exec_mode = KP_EXEC_VERIFIED;

    /* The reference's wording, each before anything is dialed. */
    assert_int_equal(kp_hostio_verified_check(&h, &pr, KP_PROFILE_INSTALL, &why), -EINVAL);
    assert_string_equal(why, "profile p1 has no install script");
    kp_free(why), why = NULL;
    pr.signatures[KP_PROFILE_JOIN] = (struct kp_sjp_text){NULL, 0};
    assert_int_equal(kp_hostio_verified_check(&h, &pr, KP_PROFILE_JOIN, &why), -EINVAL);
    assert_string_equal(why, "verified host h1: profile p1 has no signature for phase join");
    kp_free(why), why = NULL;
    pr.signatures[KP_PROFILE_JOIN] = (struct kp_sjp_text){file_sig, file_len};
    assert_int_equal(kp_hostio_verified_check(&h, &pr, KP_PROFILE_JOIN, &why), -EINVAL);
    assert_true(kp_startswith(why, "controller-side signature check for profile p1 join: "));
    assert_non_null(strstr(why, "namespace"));
    kp_free(why), why = NULL;
    pr.signatures[KP_PROFILE_JOIN] = (struct kp_sjp_text){sig, sig_len};
    h.trusted_signers = untrusted;
    assert_int_equal(kp_hostio_verified_check(&h, &pr, KP_PROFILE_JOIN, &why), -EINVAL);
    assert_non_null(strstr(why, "not among trustedSigners"));
    kp_free(why), why = NULL;
    h.trusted_signers = trusted;

    /* One byte changed after signing. */
    changed = kp_memdup(msg, msg_len + 1);
    assert_non_null(changed);
    changed[0] ^= 1;
    pr.scripts[KP_PROFILE_JOIN] = (struct kp_sjp_text){changed, msg_len};
    assert_int_equal(kp_hostio_verified_check(&h, &pr, KP_PROFILE_JOIN, &why), -EINVAL);
    assert_true(kp_startswith(why, "controller-side signature check for profile p1 join: "));
    kp_free(why), why = NULL;

    /* Templates are refused before the signature is looked at. */
    memcpy(changed, "{{", 2);
    assert_int_equal(kp_hostio_verified_check(&h, &pr, KP_PROFILE_JOIN, &why), -EINVAL);
    assert_true(kp_startswith(why, "verified exec requires template-free scripts; "));
    kp_free(why);
    kp_free(changed);
    kp_free(msg);
    kp_free(sig);
    kp_free(file_sig);
    kp_free(pub);
    kp_free(other);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_msg_replaced_or_not_asked),
        cmocka_unit_test(test_tofu_without_knownhost),
        cmocka_unit_test(test_prepin),
        cmocka_unit_test(test_blank_knownhost_refused),
        cmocka_unit_test(test_knownhost_nul_refused),
        cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_verified_gate),
    };
    static const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_creds),
    };

    return kp_test_main("hostio", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
