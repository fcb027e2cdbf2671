/* DESIGN: unit tests for provider/ssh/knownhosts.c.
 *
 * The vectors were made once with OpenSSH's ssh-keygen (-t ed25519/ecdsa/rsa, -lf for the
 * fingerprints, -H for the hashed known_hosts lines), so these tests check our encoding against
 * OpenSSH's, not against itself. */
#include "kp-test.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "provider/ssh/knownhosts.h"

#define ED_B64 "AAAAC3NzaC1lZDI1NTE5AAAAIGnXmUAPiQEs3EiwCykA/9R7NrobHb72yQuXU5CRclit"
#define ED_FP "SHA256:MiazcAqsXIJDE0hYNUSp8veLWoBsenRK7PueAI23pT8"
#define EC_B64                                                                                     \
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBCig9uiMNCMProkxBgZiSwR6v1o3jl0mcAWiuIb"  \
    "THVzhL8KVpgq83sGMwT0INSJNP4GlE/oNMQc1pwxDIQGua1Q="
#define EC_FP "SHA256:J1Ybbv6gCl0XOW10LUt1bt1Xh70LhL+Jb1bkW71Tr+g"
#define EC384_B64                                                                                  \
    "AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBFTYZDKaAKVxZpTVtBE8a7rE47L9UOMWlwYp6Gl"  \
    "qM4ycXJ181c2KlQ/z6KbsEkRq1BY+5wzuhFlbQ3vzkjbShRwSiNZ1jwLVLe/cIx73lSlE+K4kUYxKlBFj9hOOyEtsP"   \
    "A=="
#define EC384_FP "SHA256:wzu9RHlWkoohoJCg96bR/63Shs7YWv8bnx/5hZXwPgY"
#define RSA_B64                                                                                    \
    "AAAAB3NzaC1yc2EAAAADAQABAAABgQC8zbOPtFMXDay6R8PO8TgdHiLPgkbdzsAPVtIWjFwtUEeJiIoYyk++OH1ZVHZ"  \
    "gwk4YPE/fZHdHt2kqkH0oMKXldWwOoJTrKy2Yrj2eqzwEhD6+Ldh5noc0+2y7M6dtf9PHKG9BpEZpeHdX+o2lxIYok3"  \
    "f8B5B5+frs3BYFNL5eaa/3K1Dar8Ujr9PNEW6u7dw708dAeFf1r66XEmWAf5zyEBxBd2aSe89NenPBk7Ar6gj9ommqs"  \
    "jKiKz2Ssn3ITLEDeuoSWjAKoVbps30Oq63Y3pfi+Z/LjuexOD0HC1jANOYVAAtYqUM8s8Cqid5RF+OQAeIohaecq7oG"  \
    "08gy4LqmWFjr1X+bMpIwz+XYyQ8Of/mTxC7c+yWS0brkb0oc1PUyleV+JfnUw2eV5qRVP5fNsrfXvxvYGnGq86YHMaE"  \
    "DeP+yHV/Nz9s1DYcWpV8UZJqSEjBPJeVz2zHKg+Pa58IkxNuccHH+0vu5YnveH3TRyp735qe3cMP0aQMgoYhy6NU="
#define RSA_FP "SHA256:8WCAR4PboqDVCJzWXCVPIgCRLg7qj6gyTcWpvGS9Cqc"
/* ssh-keygen -H of "h1.example <ed25519>" and "[10.0.0.7]:2222 <ecdsa>". */
#define HASHED_H1 "|1|oxAjFz13YSYFvJzIl2ccZTTARsE=|sneBHUOJ95xh9yg0wY/Ccsp2qBU="
#define HASHED_IP "|1|Ri0cB1fxwbk51qRbMkut6jJMqaY=|N/W0DQwbYUBj+3fMq5+OjeyH8hk="

static int parse(const char *text, const char *host, uint16_t port, struct kp_knownhosts *kh,
                 struct kp_knownhosts_error *err)
{
    return kp_knownhosts_parse(text, strlen(text), host, port, kh, err);
}

static void test_key_fingerprints(void **state)
{
    char fp[KP_SSH_FP_SIZE];
    const char *kt = NULL;

    (void)state;
    assert_int_equal(kp_ssh_key_fingerprint(ED_B64, strlen(ED_B64), fp, &kt), 0);
    assert_string_equal(fp, ED_FP);
    assert_string_equal(kt, "ssh-ed25519");
    assert_int_equal(kp_ssh_key_fingerprint(EC_B64, strlen(EC_B64), fp, &kt), 0);
    assert_string_equal(fp, EC_FP);
    assert_string_equal(kt, "ecdsa-sha2-nistp256");
    assert_int_equal(kp_ssh_key_fingerprint(EC384_B64, strlen(EC384_B64), fp, &kt), 0);
    assert_string_equal(fp, EC384_FP);
    assert_int_equal(kp_ssh_key_fingerprint(RSA_B64, strlen(RSA_B64), fp, &kt), 0);
    assert_string_equal(fp, RSA_FP);
    assert_string_equal(kt, "ssh-rsa");
    assert_int_equal(strlen(fp), KP_SSH_FP_LEN);
}

static void test_key_fingerprint_bad(void **state)
{
    char fp[KP_SSH_FP_SIZE] = "untouched";
    const char *kt = NULL;
    /* "ssh-dss" blob header, a truncated blob, a non-canonical tail, whitespace. */
    static const char *const bad[] = {
        "AAAAB3NzaC1kc3MAAACBAP",
        "AAAAC3NzaC1lZDI1NTE5",
        "AAAAC3NzaC1lZDI1NTE5AAAAIGnXmUAPiQEs3EiwCykA/9R7NrobHb72yQuXU5CRclj",
        "AAAAC3NzaC1lZDI1NTE5 AAAAIGnXmUAPiQEs3EiwCykA/9R7NrobHb72yQuXU5CRclit",
        "",
        "=",
        "A",
        "AAAA",
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++)
        assert_int_equal(kp_ssh_key_fingerprint(bad[i], strlen(bad[i]), fp, &kt), -KP_EPARSE);
    assert_string_equal(fp, "untouched");
}

static void test_fingerprint_parse(void **state)
{
    char fp[KP_SSH_FP_SIZE];

    (void)state;
    assert_int_equal(kp_ssh_fingerprint_parse(ED_FP, strlen(ED_FP), fp), 0);
    assert_string_equal(fp, ED_FP);
    /* The padded form is accepted and canonicalised. */
    assert_int_equal(kp_ssh_fingerprint_parse(ED_FP "=", strlen(ED_FP) + 1, fp), 0);
    assert_string_equal(fp, ED_FP);
    assert_int_equal(kp_ssh_fingerprint_parse("SHA256:abc", 10, fp), -KP_EPARSE);
    assert_int_equal(
        kp_ssh_fingerprint_parse("sha256:MiazcAqsXIJDE0hYNUSp8veLWoBsenRK7PueAI23pT8", 50, fp),
        -KP_EPARSE);
    /* Last character with non-zero unused bits. */
    assert_int_equal(
        kp_ssh_fingerprint_parse("SHA256:MiazcAqsXIJDE0hYNUSp8veLWoBsenRK7PueAI23pT9", 50, fp),
        -KP_EPARSE);
    assert_int_equal(kp_ssh_fingerprint_parse(ED_FP "==", strlen(ED_FP) + 2, fp), -KP_EPARSE);
}

static void test_fingerprint_of_blob(void **state)
{
    char fp[KP_SSH_FP_SIZE];

    (void)state;
    /* SHA-256 of "abc", base64 without padding. */
    assert_int_equal(kp_ssh_fingerprint("abc", 3, fp), 0);
    assert_string_equal(fp, "SHA256:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0");
    assert_int_equal(kp_ssh_fingerprint("", 0, fp), -EINVAL);
}

static void test_forms(void **state)
{
    struct kp_knownhosts kh;
    struct kp_knownhosts_error err;

    (void)state;
    /* A fingerprint, also as ssh-keygen -lf prints it. */
    assert_int_equal(parse(ED_FP, "10.0.0.1", 22, &kh, &err), 0);
    assert_int_equal(kh.nkeys, 1);
    assert_string_equal(kh.keys[0].fp, ED_FP);
    assert_null(kh.keys[0].keytype);
    assert_int_equal(parse("256 " ED_FP " root@vm (ED25519)\n", "x", 22, &kh, &err), 0);
    assert_string_equal(kh.keys[0].fp, ED_FP);
    /* A public-key line applies to any host. */
    assert_int_equal(parse("ssh-ed25519 " ED_B64 " some comment", "10.9.9.9", 2222, &kh, &err), 0);
    assert_string_equal(kh.keys[0].fp, ED_FP);
    assert_string_equal(kh.keys[0].keytype, "ssh-ed25519");
    /* A known_hosts line with the host among several names, CRLF and indentation. */
    assert_int_equal(
        parse("  other,H1.example ssh-ed25519 " ED_B64 "\r\n", "h1.example", 22, &kh, &err), 0);
    assert_string_equal(kh.keys[0].fp, ED_FP);
}

static void test_host_matching(void **state)
{
    struct kp_knownhosts kh;
    struct kp_knownhosts_error err;
    const char *text = "# rack 7\n"
                       "h1.example ssh-ed25519 " ED_B64 "\n"
                       "[10.0.0.7]:2222 ecdsa-sha2-nistp256 " EC_B64 " ecdsa\n"
                       "10.0.0.7 ssh-rsa " RSA_B64 "\n"
                       "\n";

    (void)state;
    assert_int_equal(parse(text, "h1.example", 22, &kh, &err), 0);
    assert_int_equal(kh.nkeys, 1);
    assert_string_equal(kh.keys[0].fp, ED_FP);
    /* Port 22 matches the plain form only; another port the bracketed one only. */
    assert_int_equal(parse(text, "10.0.0.7", 0, &kh, &err), 0);
    assert_int_equal(kh.nkeys, 1);
    assert_string_equal(kh.keys[0].fp, RSA_FP);
    assert_int_equal(parse(text, "10.0.0.7", 2222, &kh, &err), 0);
    assert_int_equal(kh.nkeys, 1);
    assert_string_equal(kh.keys[0].fp, EC_FP);
    assert_int_equal(parse(text, "10.0.0.8", 22, &kh, &err), -ENOENT);
    assert_int_equal(parse(text, "h1.example", 2200, &kh, &err), -ENOENT);
}

static void test_wildcards_and_negation(void **state)
{
    struct kp_knownhosts kh;
    struct kp_knownhosts_error err;
    const char *text = "*.rack7.example,!bad.rack7.example ssh-ed25519 " ED_B64 "\n"
                       "10.0.0.? ssh-rsa " RSA_B64 "\n";

    (void)state;
    assert_int_equal(parse(text, "n1.rack7.example", 22, &kh, &err), 0);
    assert_string_equal(kh.keys[0].fp, ED_FP);
    assert_int_equal(parse(text, "bad.rack7.example", 22, &kh, &err), -ENOENT);
    assert_int_equal(parse(text, "10.0.0.5", 22, &kh, &err), 0);
    assert_string_equal(kh.keys[0].fp, RSA_FP);
    assert_int_equal(parse(text, "10.0.0.55", 22, &kh, &err), -ENOENT);
}

static void test_hashed(void **state)
{
    struct kp_knownhosts kh;
    struct kp_knownhosts_error err;
    const char *text =
        HASHED_H1 " ssh-ed25519 " ED_B64 "\n" HASHED_IP " ecdsa-sha2-nistp256 " EC_B64 "\n";

    (void)state;
    assert_int_equal(parse(text, "h1.example", 22, &kh, &err), 0);
    assert_int_equal(kh.nkeys, 1);
    assert_string_equal(kh.keys[0].fp, ED_FP);
    assert_int_equal(parse(text, "10.0.0.7", 2222, &kh, &err), 0);
    assert_int_equal(kh.nkeys, 1);
    assert_string_equal(kh.keys[0].fp, EC_FP);
    assert_int_equal(parse(text, "10.0.0.7", 22, &kh, &err), -ENOENT);
    assert_int_equal(parse("|1|abc ssh-ed25519 " ED_B64, "h", 22, &kh, &err), -KP_EPARSE);
    assert_non_null(strstr(err.reason, "hashed"));
}

static void test_markers(void **state)
{
    struct kp_knownhosts kh;
    struct kp_knownhosts_error err = {0, NULL};
    char text[2048];

    (void)state;
    assert_int_equal(parse("h1 ssh-rsa " RSA_B64 "\n@cert-authority *.example ssh-ed25519 " ED_B64,
                           "h1", 22, &kh, &err),
                     -KP_EPARSE);
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.reason, "@cert-authority"));
    assert_int_equal(parse("@bogus h1 ssh-ed25519 " ED_B64, "h1", 22, &kh, &err), -KP_EPARSE);
    /* @revoked forbids its key for the host it names. */
    (void)snprintf(text, sizeof(text), "h1 ssh-ed25519 %s\nh1 ssh-rsa %s\n@revoked h1 ssh-rsa %s\n",
                   ED_B64, RSA_B64, RSA_B64);
    assert_int_equal(parse(text, "h1", 22, &kh, &err), 0);
    assert_int_equal(kh.nkeys, 2);
    assert_int_equal(kh.nrevoked, 1);
    assert_int_equal(kp_knownhosts_check(&kh, ED_FP), 0);
    assert_int_equal(kp_knownhosts_check(&kh, RSA_FP), -KP_EHOSTKEY);
    /* A host whose only key is revoked has no pin. */
    (void)snprintf(text, sizeof(text), "@revoked * ssh-rsa %s\n", RSA_B64);
    assert_int_equal(parse(text, "h1", 22, &kh, &err), -ENOENT);
}

static void test_errors(void **state)
{
    struct kp_knownhosts kh;
    struct kp_knownhosts_error err = {0, NULL};

    (void)state;
    assert_int_equal(
        parse("MD5:16:27:ac:a5:76:28:2d:36:63:1b:56:4d:eb:df:a6:48", "h", 22, &kh, &err),
        -KP_EPARSE);
    assert_non_null(strstr(err.reason, "MD5"));
    assert_int_equal(parse("SHA256:short", "h", 22, &kh, &err), -KP_EPARSE);
    assert_int_equal(parse("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "h", 22, &kh, &err), -KP_EPARSE);
    assert_non_null(strstr(err.reason, "unsupported"));
    /* The key type field must match the type inside the blob. */
    assert_int_equal(parse("h ssh-rsa " ED_B64, "h", 22, &kh, &err), -KP_EPARSE);
    assert_int_equal(parse("ssh-rsa " ED_B64, "h", 22, &kh, &err), -KP_EPARSE);
    assert_int_equal(parse("justonetoken", "h", 22, &kh, &err), -KP_EPARSE);
    assert_int_equal(err.line, 1);
    assert_int_equal(parse("h1,,h2 ssh-ed25519 " ED_B64, "h1", 22, &kh, &err), -KP_EPARSE);
    assert_int_equal(parse("", "h", 22, &kh, &err), -ENOENT);
    assert_int_equal(parse("# only a comment\n\n", "h", 22, &kh, &err), -ENOENT);
    assert_int_equal(kp_knownhosts_parse("h ssh-ed25519 \0x", 16, "h", 22, &kh, &err), -KP_EPARSE);
    assert_int_equal(parse(ED_FP, "", 22, &kh, &err), -EINVAL);
}

static void test_limits(void **state)
{
    struct kp_knownhosts kh;
    struct kp_knownhosts_error err;
    struct kp_buf b = KP_BUF_INIT(KP_MAX_KNOWNHOSTS * 2);
    char fp[KP_SSH_FP_SIZE];

    (void)state;
    /* Many distinct fingerprints: one more than the ceiling. */
    for (unsigned i = 0; i <= KP_KNOWNHOSTS_MAX_KEYS; i++) {
        assert_int_equal(kp_ssh_fingerprint(&i, sizeof(i), fp), 0);
        assert_int_equal(kp_buf_printf(&b, "%s\n", fp), 0);
    }
    assert_int_equal(kp_knownhosts_parse(b.data, b.len, "h", 22, &kh, &err), -KP_ELIMIT);
    kp_buf_reset(&b);
    /* The same key twice counts once. */
    for (unsigned i = 0; i < 40; i++)
        assert_int_equal(kp_buf_puts(&b, ED_FP "\n"), 0);
    assert_int_equal(kp_knownhosts_parse(b.data, b.len, "h", 22, &kh, &err), 0);
    assert_int_equal(kh.nkeys, 1);
    kp_buf_reset(&b);
    while (b.len <= KP_MAX_KNOWNHOSTS)
        assert_int_equal(kp_buf_puts(&b, "# padding padding padding padding\n"), 0);
    assert_int_equal(kp_knownhosts_parse(b.data, b.len, "h", 22, &kh, &err), -KP_ELIMIT);
    kp_buf_done(&b);
}

static void test_check_and_algorithms(void **state)
{
    struct kp_knownhosts kh;
    struct kp_knownhosts_error err;
    struct kp_buf b = KP_BUF_INIT(1024);

    (void)state;
    assert_int_equal(
        parse("h ssh-rsa " RSA_B64 "\nh ecdsa-sha2-nistp256 " EC_B64 "\n", "h", 22, &kh, &err), 0);
    assert_int_equal(kp_knownhosts_check(&kh, EC_FP), 0);
    assert_int_equal(kp_knownhosts_check(&kh, RSA_FP), 0);
    assert_int_equal(kp_knownhosts_check(&kh, ED_FP), -KP_EHOSTKEY);
    assert_int_equal(kp_knownhosts_algorithms(&kh, &b), 0);
    assert_string_equal(kp_buf_str(&b), "rsa-sha2-512,rsa-sha2-256,ecdsa-sha2-nistp256");
    kp_buf_reset(&b);
    /* A bare fingerprint leaves the algorithm choice to the server. */
    assert_int_equal(parse(ED_FP "\nssh-rsa " RSA_B64, "h", 22, &kh, &err), 0);
    assert_int_equal(kp_knownhosts_algorithms(&kh, &b), 0);
    assert_int_equal(b.len, 0);
    kp_buf_done(&b);
}

static int torture_parse(void)
{
    struct kp_knownhosts kh;
    int r;

    r = kp_knownhosts_parse(
        HASHED_H1 " ssh-ed25519 " ED_B64 "\nh1.example ssh-rsa " RSA_B64,
        strlen(HASHED_H1 " ssh-ed25519 " ED_B64 "\nh1.example ssh-rsa " RSA_B64), "h1.example", 22,
        &kh, NULL);
    return r < 0 ? r : 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_fingerprints),
        cmocka_unit_test(test_key_fingerprint_bad),
        cmocka_unit_test(test_fingerprint_parse),
        cmocka_unit_test(test_fingerprint_of_blob),
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_host_matching),
        cmocka_unit_test(test_wildcards_and_negation),
        cmocka_unit_test(test_hashed),
        cmocka_unit_test(test_markers),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_check_and_algorithms),
    };
    static const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_parse),
    };

    return kp_test_main("knownhosts", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases),
                        argc, argv);
}
