/* Tests for base/base64.h: RFC 4648 vectors, padding rules, strictness, newline skipping. */
#include <errno.h>
#include <string.h>

#include "kp-test.h"

#include "base/base64.h"
#include "base/buf.h"
#include "base/err.h"

static void check_encode(const char *in, const char *want, enum kp_base64_flags f)
{
    struct kp_buf b = KP_BUF_INIT(1024);

    assert_int_equal(kp_base64_encode(in, strlen(in), f, &b), 0);
    assert_string_equal(kp_buf_str(&b), want);
    assert_int_equal(b.len, kp_base64_encoded_len(strlen(in), f));
    kp_buf_done(&b);
}

static int decode(const char *in, enum kp_base64_flags f, char *out, size_t size)
{
    struct kp_buf b = KP_BUF_INIT(1024);
    int r = kp_base64_decode(in, strlen(in), f, &b);

    if (r == 0)
        snprintf(out, size, "%s", kp_buf_str(&b));
    kp_buf_done(&b);
    return r;
}

static void test_rfc4648_vectors(void **state)
{
    static const char *const v[][3] = {
        {"", "", ""},
        {"f", "Zg==", "Zg"},
        {"fo", "Zm8=", "Zm8"},
        {"foo", "Zm9v", "Zm9v"},
        {"foob", "Zm9vYg==", "Zm9vYg"},
        {"fooba", "Zm9vYmE=", "Zm9vYmE"},
        {"foobar", "Zm9vYmFy", "Zm9vYmFy"},
    };
    char out[64];

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(v); i++) {
        check_encode(v[i][0], v[i][1], 0);
        check_encode(v[i][0], v[i][2], KP_BASE64_NOPAD);
        assert_int_equal(decode(v[i][1], 0, out, sizeof(out)), 0);
        assert_string_equal(out, v[i][0]);
        assert_int_equal(decode(v[i][2], 0, out, sizeof(out)), 0);
        assert_string_equal(out, v[i][0]);
    }
}

static void test_strict(void **state)
{
    static const char *const bad[] = {
        "Z",        /* a lone character holds no byte */
        "Zg=",      /* incomplete padding */
        "Zg===",    /* too much padding */
        "Zh==",     /* non-zero leftover bits */
        "Zm9v=",    /* padding after a whole group */
        "Zg==Zg==", /* data after padding */
        "Zm9v YmFy", "Zm9v\nYmFy", "Zm-9", "Zm_9", "Zm9v\x80",
    };
    char out[64];

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++)
        if (decode(bad[i], 0, out, sizeof(out)) != -KP_EPARSE)
            fail_msg("accepted \"%s\"", bad[i]);
    assert_int_equal(decode("Zm9v\r\nYmFy\n", KP_BASE64_SKIP_NEWLINES, out, sizeof(out)), 0);
    assert_string_equal(out, "foobar");
}

static void test_binary_and_ceiling(void **state)
{
    unsigned char bin[256];
    struct kp_buf enc = KP_BUF_INIT(1024), dec = KP_BUF_INIT(256), small = KP_BUF_INIT(8);

    (void)state;
    for (int i = 0; i < 256; i++)
        bin[i] = (unsigned char)i;
    assert_int_equal(kp_base64_encode(bin, sizeof(bin), 0, &enc), 0);
    assert_int_equal(kp_base64_decode(enc.data, enc.len, 0, &dec), 0);
    assert_int_equal(dec.len, sizeof(bin));
    assert_memory_equal(dec.data, bin, sizeof(bin));
    assert_int_equal(kp_base64_encode(bin, sizeof(bin), 0, &small), -KP_ELIMIT);
    kp_buf_done(&enc);
    kp_buf_done(&dec);
    kp_buf_done(&small);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_vectors),
        cmocka_unit_test(test_strict),
        cmocka_unit_test(test_binary_and_ceiling),
    };

    return kp_test_main("base64", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
