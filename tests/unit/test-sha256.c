/* DESIGN: unit tests for base/sha256.c: the FIPS 180-4 example messages (one block, two
 * blocks, a million 'a'), lengths around the padding boundary (55, 56, 63, 64, 65 bytes, values
 * from Python's hashlib), and that feeding the same bytes in pieces of every size gives the
 * one-shot digest. */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/sha256.h"
#include "kp-test.h"

static void hex_of(const void *p, size_t n, char out[KP_SHA256_HEX_SIZE])
{
    kp_sha256_hex(p, n, out);
}

static void test_fips_vectors(void **state)
{
    char hex[KP_SHA256_HEX_SIZE];
    char *million;

    (void)state;
    hex_of("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    million = kp_malloc(1000000);
    assert_non_null(million);
    memset(million, 'a', 1000000);
    hex_of(million, 1000000, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    kp_free(million);
}

static void test_padding_boundaries(void **state)
{
    static const struct {
        size_t n;
        const char *hex;
    } cases[] = {
        {55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
        {56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
        {63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"},
        {64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
        {65, "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9"},
        {119, "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c"},
    };
    char x[128], hex[KP_SHA256_HEX_SIZE];

    (void)state;
    memset(x, 'x', sizeof(x));
    for (size_t i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        hex_of(x, cases[i].n, hex);
        assert_string_equal(hex, cases[i].hex);
    }
}

static void test_pieces(void **state)
{
    uint8_t msg[1000], one[KP_SHA256_LEN], parts[KP_SHA256_LEN];
    struct kp_sha256 c;

    (void)state;
    for (size_t i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)(i * 7 + 3);
    kp_sha256_init(&c);
    kp_sha256_update(&c, msg, sizeof(msg));
    kp_sha256_final(&c, one);
    for (size_t step = 1; step <= 130; step++) {
        kp_sha256_init(&c);
        for (size_t off = 0; off < sizeof(msg); off += step)
            kp_sha256_update(&c, msg + off, KP_MIN(step, sizeof(msg) - off));
        kp_sha256_update(&c, NULL, 0);
        kp_sha256_final(&c, parts);
        assert_memory_equal(one, parts, KP_SHA256_LEN);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_vectors),
        cmocka_unit_test(test_padding_boundaries),
        cmocka_unit_test(test_pieces),
    };

    return kp_test_main("sha256", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
