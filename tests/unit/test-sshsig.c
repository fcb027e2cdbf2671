/* DESIGN: unit tests for provider/ssh/sshsig.c.
 *
 * The fixtures in tests/data/sshsig/ were made once by OpenSSH's ssh-keygen (make.sh there), so
 * these tests check our verifier against OpenSSH's signer, not against itself. The one
 * exception, rsa.sha256.sig, is re-signed with openssl because ssh-keygen only makes
 * rsa-sha2-512; make.sh has ssh-keygen -Y verify accept it before it is kept. One more test
 * makes a fresh key and signature with the ssh-keygen on this machine, so a change in OpenSSH's
 * output would show up here. */
#include "kp-test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/spawn.h"
#include "base/time.h"
#include "provider/ssh/sshsig.h"

static const char *const algs[] = {"ed25519", "ecdsa256", "ecdsa384", "ecdsa521", "rsa"};

struct fx {
    char *msg, *sig, *pub;
    size_t msg_len, sig_len;
};

static void fx_load(struct fx *f, const char *alg, const char *sigsuffix)
{
    char path[256];

    memset(f, 0, sizeof(*f));
    f->msg = kp_test_read_data("sshsig/msg.txt", &f->msg_len);
    assert_true((size_t)snprintf(path, sizeof(path), "sshsig/%s%s", alg, sigsuffix) < sizeof(path));
    f->sig = kp_test_read_data(path, &f->sig_len);
    assert_true((size_t)snprintf(path, sizeof(path), "sshsig/%s.pub", alg) < sizeof(path));
    f->pub = kp_test_read_data(path, NULL);
}

static void fx_done(struct fx *f)
{
    kp_free(f->msg);
    kp_free(f->sig);
    kp_free(f->pub);
}

static int verify(const struct fx *f, const char *msg, size_t msg_len, const char *ns,
                  const char *trusted, char **ret_msg)
{
    const char *const t[] = {trusted};

    return kp_sshsig_verify(f->sig, f->sig_len, msg, msg_len, ns, t, 1, ret_msg);
}

static void test_valid(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(algs); i++) {
        struct fx f;
        char *m = NULL;

        fx_load(&f, algs[i], ".sig");
        assert_int_equal(verify(&f, f.msg, f.msg_len, "kpssh", f.pub, &m), 0);
        assert_null(m);
        fx_done(&f);
    }
}

static void test_rsa_sha256_format(void **state)
{
    struct fx f;
    char *m = NULL;

    (void)state;
    fx_load(&f, "rsa", ".sha256.sig");
    assert_int_equal(verify(&f, f.msg, f.msg_len, "kpssh", f.pub, &m), 0);
    assert_null(m);
    fx_done(&f);
}

static void test_rsa_sha1_refused(void **state)
{
    struct fx f;
    char *m = NULL;

    (void)state;
    fx_load(&f, "rsa", ".sha1.sig");
    assert_int_equal(verify(&f, f.msg, f.msg_len, "kpssh", f.pub, &m), -ENOTSUP);
    assert_non_null(m);
    assert_non_null(strstr(m, "SHA-1"));
    kp_free(m);
    fx_done(&f);
}

static void test_message_changed(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(algs); i++) {
        struct fx f;
        char *m = NULL;

        fx_load(&f, algs[i], ".sig");
        f.msg[3] ^= 0x01;
        assert_int_equal(verify(&f, f.msg, f.msg_len, "kpssh", f.pub, &m), -KP_EAUTH);
        assert_non_null(m);
        assert_non_null(strstr(m, "does not verify"));
        kp_free(m);
        m = NULL;
        /* One byte more or fewer is a different message too. */
        assert_int_equal(verify(&f, f.msg, f.msg_len - 1, "kpssh", f.pub, &m), -KP_EAUTH);
        kp_free(m);
        fx_done(&f);
    }
}

static void test_wrong_namespace(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(algs); i++) {
        struct fx f;
        char *m = NULL;

        fx_load(&f, algs[i], ".file.sig");
        assert_int_equal(verify(&f, f.msg, f.msg_len, "kpssh", f.pub, &m), -KP_EAUTH);
        assert_non_null(m);
        assert_non_null(strstr(m, "signature namespace is \"file\", want \"kpssh\""));
        kp_free(m);
        m = NULL;
        /* ...and a "kpssh" signature is no good for another namespace either. */
        fx_done(&f);
        fx_load(&f, algs[i], ".sig");
        assert_int_equal(verify(&f, f.msg, f.msg_len, "file", f.pub, &m), -KP_EAUTH);
        kp_free(m);
        fx_done(&f);
    }
}

static void test_untrusted_signer(void **state)
{
    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(algs); i++) {
        const char *other = algs[(i + 1) % KP_ARRAY_SIZE(algs)];
        char path[64], *pub, *m = NULL, want[128];
        struct kp_sshsig_signer sg;
        struct fx f;

        fx_load(&f, algs[i], ".sig");
        assert_int_equal(kp_sshsig_signer_parse(f.pub, strlen(f.pub), &sg, NULL), 0);
        assert_true((size_t)snprintf(path, sizeof(path), "sshsig/%s.pub", other) < sizeof(path));
        pub = kp_test_read_data(path, NULL);
        assert_int_equal(verify(&f, f.msg, f.msg_len, "kpssh", pub, &m), -KP_EAUTH);
        assert_non_null(m);
        assert_true((size_t)snprintf(want, sizeof(want),
                                     "key %s, which is not among trustedSigners",
                                     sg.fp) < sizeof(want));
        assert_non_null(strstr(m, want));
        assert_non_null(strstr(m, strncmp(algs[i], "ed", 2) == 0   ? "by ED25519 key"
                                  : strncmp(algs[i], "ec", 2) == 0 ? "by ECDSA key"
                                                                   : "by RSA key"));
        kp_free(m);
        kp_free(pub);
        kp_sshsig_signer_done(&sg);
        fx_done(&f);
    }
}

static void test_malformed_armour(void **state)
{
    struct fx f;
    struct kp_sshsig s;
    char *copy, *m = NULL;
    const char *body;

    (void)state;
    fx_load(&f, "ed25519", ".sig");
    /* Every truncation fails to parse, and so does not verify. */
    for (size_t n = 0; n + 1 < f.sig_len; n++) { /* all but the trailing newline */
        assert_int_equal(kp_sshsig_verify(f.sig, n, f.msg, f.msg_len, "kpssh",
                                          (const char *const[]){f.pub}, 1, &m),
                         -KP_EPARSE);
        assert_non_null(m);
        kp_free(m);
        m = NULL;
    }
    /* Garbled: a character outside base64, a changed marker, a base64 blob that is no SSHSIG. */
    copy = kp_strdup(f.sig);
    body = strchr(copy, '\n') + 1;
    copy[body - copy + 5] = '*';
    assert_int_equal(kp_sshsig_parse(copy, strlen(copy), &s, &m), -KP_EPARSE);
    assert_non_null(strstr(m, "base64"));
    kp_free(m);
    m = NULL;
    kp_free(copy);
    copy = kp_strdup(f.sig);
    copy[11] = 'X'; /* -----BEGIN SSH -> -----BEGIN XSH */
    assert_int_equal(kp_sshsig_parse(copy, strlen(copy), &s, &m), -KP_EPARSE);
    kp_free(m);
    m = NULL;
    kp_free(copy);
    copy =
        kp_strdup("-----BEGIN SSH SIGNATURE-----\nU1NIU0lHAAAAAg==\n-----END SSH SIGNATURE-----\n");
    assert_int_equal(kp_sshsig_parse(copy, strlen(copy), &s, &m), -KP_EPARSE);
    assert_non_null(strstr(m, "version"));
    kp_free(m);
    m = NULL;
    kp_free(copy);
    /* Whitespace around the armour and CRLF line ends, as YAML may leave them, are fine. */
    {
        struct kp_buf b = KP_BUF_INIT(64 * 1024);

        assert_int_equal(kp_buf_puts(&b, "\n  "), 0);
        for (const char *p = f.sig; *p; p++) {
            if (*p == '\n')
                assert_int_equal(kp_buf_puts(&b, "\r\n"), 0);
            else
                assert_int_equal(kp_buf_putc(&b, *p), 0);
        }
        assert_int_equal(kp_sshsig_parse(b.data, b.len, &s, NULL), 0);
        assert_int_equal(s.version, 1);
        assert_int_equal(s.ns.len, 5);
        assert_memory_equal(s.ns.data, "kpssh", 5);
        assert_int_equal(s.hash_alg.len, 6);
        assert_memory_equal(s.sig_format.data, "ssh-ed25519", 11);
        assert_int_equal(s.sig_blob.len, 64);
        kp_sshsig_done(&s);
        /* Text after the end marker is not. */
        assert_int_equal(kp_buf_puts(&b, "x"), 0);
        assert_int_equal(kp_sshsig_parse(b.data, b.len, &s, NULL), -KP_EPARSE);
        kp_buf_done(&b);
    }
    /* Past the ceiling. */
    {
        size_t n = KP_MAX_SSHSIG_ARMOUR + 1;
        char *big = kp_malloc(n);

        assert_non_null(big);
        memset(big, 'A', n);
        assert_int_equal(kp_sshsig_parse(big, n, &s, NULL), -KP_ELIMIT);
        assert_int_equal(
            kp_sshsig_verify(big, n, "", 0, "kpssh", (const char *const[]){f.pub}, 1, NULL),
            -KP_EPARSE);
        kp_free(big);
    }
    fx_done(&f);
}

static void test_signer_lines(void **state)
{
    struct kp_sshsig_signer sg;
    struct kp_buf line = KP_BUF_INIT(64 * 1024);
    char *pub, *m = NULL, *sp, *ref_fp;
    const char *b64;

    (void)state;
    pub = kp_test_read_data("sshsig/ed25519.pub", NULL);
    assert_int_equal(kp_sshsig_signer_parse(pub, strlen(pub), &sg, NULL), 0);
    assert_string_equal(sg.keytype, "ssh-ed25519");
    assert_int_equal(strncmp(sg.fp, "SHA256:", 7), 0);
    ref_fp = kp_strdup(sg.fp);
    kp_sshsig_signer_done(&sg);
    sp = strchr(pub, ' ');
    b64 = sp + 1;

    /* Options, quoted ones with blanks and key types inside, and an allowed_signers principal. */
    static const char *const prefixes[] = {
        "restrict ",
        "no-pty,command=\"echo ssh-rsa AAAA x\" ",
        "  \tfrom=\"10.0.0.0/8\",environment=\"A=b c\" ",
        "kpssh namespaces=\"kpssh\" ",
        "\"kpssh,ops@example\" valid-after=\"20240101\" ",
    };
    for (size_t i = 0; i < KP_ARRAY_SIZE(prefixes); i++) {
        kp_buf_reset(&line);
        assert_int_equal(kp_buf_printf(&line, "%s%s", prefixes[i], pub), 0);
        assert_int_equal(kp_sshsig_signer_parse(line.data, line.len, &sg, &m), 0);
        assert_null(m);
        assert_string_equal(sg.fp, ref_fp);
        kp_sshsig_signer_done(&sg);
    }
    /* No comment, CRLF. */
    kp_buf_reset(&line);
    assert_int_equal(kp_buf_printf(&line, "ssh-ed25519 %.*s\r\n", (int)strcspn(b64, " \n"), b64),
                     0);
    assert_int_equal(kp_sshsig_signer_parse(line.data, line.len, &sg, NULL), 0);
    kp_sshsig_signer_done(&sg);

    /* Blank lines and comments say nothing. */
    assert_int_equal(kp_sshsig_signer_parse("", 0, &sg, &m), -ENOENT);
    assert_int_equal(kp_sshsig_signer_parse("   \t\r\n", 6, &sg, &m), -ENOENT);
    assert_int_equal(kp_sshsig_signer_parse("# ssh-ed25519 AAAA", 18, &sg, &m), -ENOENT);
    assert_null(m);

    /* Malformed: no key, wrong type on the line, truncated blob, unknown type. */
    static const char *const bad[] = {
        "hello world",
        "ssh-ed25519",
        "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIPuQA/GN9uN5XnCQ4SzFv8JBHoxNQIHo/IaQETAk/1zQ",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPuQA/GN9uN5XnCQ4SzFv8JBHoxNQIHo",
        "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
        "ssh-ed25519 !!!!",
    };
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        assert_int_equal(kp_sshsig_signer_parse(bad[i], strlen(bad[i]), &sg, &m), -KP_EPARSE);
        assert_non_null(m);
        kp_free(m);
        m = NULL;
    }

    /* Verify skips lines that do not parse, but needs at least one that does. */
    {
        struct fx f;
        const char *const none[] = {"# only a comment\n\n", "garbage", NULL};

        fx_load(&f, "ed25519", ".sig");
        kp_buf_reset(&line);
        assert_int_equal(kp_buf_printf(&line, "# ops keys\n\ngarbage line\nrestrict %s", f.pub), 0);
        assert_int_equal(verify(&f, f.msg, f.msg_len, "kpssh", line.data, &m), 0);
        assert_int_equal(kp_sshsig_verify(f.sig, f.sig_len, f.msg, f.msg_len, "kpssh", none, 3, &m),
                         -EINVAL);
        assert_non_null(m);
        kp_free(m);
        m = NULL;
        assert_int_equal(kp_sshsig_verify(f.sig, f.sig_len, f.msg, f.msg_len, "kpssh", none, 0, &m),
                         -EINVAL);
        kp_free(m);
        fx_done(&f);
    }
    kp_buf_done(&line);
    kp_free(ref_fp);
    kp_free(pub);
}

/* Runs argv and cmocka-fails unless it exits 0. */
static void run_ok(const char *const *argv)
{
    struct kp_spawn_opts o = {.argv = argv,
                              .timeout_usec = 60 * KP_USEC_PER_SEC,
                              .max_stdout = 64 * 1024,
                              .stderr_tail = 4096};
    struct kp_spawn_result res;

    assert_int_equal(kp_spawn_run(&o, &res), 0);
    if (res.end != KP_SPAWN_EXITED || res.status != 0)
        fail_msg("%s failed: %s", argv[0], kp_buf_str(&res.err));
    kp_spawn_result_done(&res);
}

static char *read_file(const char *path, size_t *ret_len)
{
    FILE *fp = fopen(path, "rbe");
    struct kp_buf b = KP_BUF_INIT(1024 * 1024);
    char chunk[4096];
    size_t n;

    assert_non_null(fp);
    while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
        assert_int_equal(kp_buf_append(&b, chunk, n), 0);
    fclose(fp);
    return kp_buf_steal(&b, ret_len);
}

/* A key and signature made now by this machine's ssh-keygen. */
static void test_fresh_ssh_keygen(void **state)
{
    char dir[] = "/tmp/kp-sshsig-XXXXXX", key[64], pubp[64], msgp[64], sigp[64];
    char *pub, *sig, *m = NULL;
    size_t sig_len;
    const char *msg = "#!/bin/bash\necho fresh\n";
    FILE *fp;

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_true((size_t)snprintf(key, sizeof(key), "%s/k", dir) < sizeof(key));
    assert_true((size_t)snprintf(pubp, sizeof(pubp), "%s/k.pub", dir) < sizeof(pubp));
    assert_true((size_t)snprintf(msgp, sizeof(msgp), "%s/m", dir) < sizeof(msgp));
    assert_true((size_t)snprintf(sigp, sizeof(sigp), "%s/m.sig", dir) < sizeof(sigp));
    run_ok((const char *const[]){"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key, NULL});
    fp = fopen(msgp, "we");
    assert_non_null(fp);
    assert_int_equal(fputs(msg, fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
    run_ok((const char *const[]){"ssh-keygen", "-q", "-Y", "sign", "-f", key, "-n", "kpssh", msgp,
                                 NULL});
    pub = read_file(pubp, NULL);
    sig = read_file(sigp, &sig_len);
    assert_int_equal(kp_sshsig_verify(sig, sig_len, msg, strlen(msg), "kpssh",
                                      (const char *const[]){pub}, 1, &m),
                     0);
    assert_int_equal(
        kp_sshsig_verify(sig, sig_len, "x", 1, "kpssh", (const char *const[]){pub}, 1, &m),
        -KP_EAUTH);
    kp_free(m);
    kp_free(pub);
    kp_free(sig);
    assert_int_equal(unlink(sigp), 0);
    assert_int_equal(unlink(msgp), 0);
    assert_int_equal(unlink(pubp), 0);
    assert_int_equal(unlink(key), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* Allocation failures anywhere in parse and verify end in an error, never a crash or leak. */
static int torture_verify(void)
{
    static char *sig, *pub, *msg;
    static size_t sig_len, msg_len;
    const char *const t[] = {"# c", NULL};
    int r;

    if (!sig) {
        /* Read outside the sweep's allocation counting: kept for the process's life. */
        const char *dir = kp_test_data_dir();
        char path[512];
        FILE *fp;
        static char bufs[3][8192];
        const char *names[3] = {"ed25519.sig", "ed25519.pub", "msg.txt"};
        size_t lens[3];

        for (int i = 0; i < 3; i++) {
            if ((size_t)snprintf(path, sizeof(path), "%s/sshsig/%s", dir, names[i]) >= sizeof(path))
                return -EINVAL;
            fp = fopen(path, "rbe");
            if (!fp)
                return -errno;
            lens[i] = fread(bufs[i], 1, sizeof(bufs[i]) - 1, fp);
            fclose(fp);
        }
        sig = bufs[0];
        sig_len = lens[0];
        pub = bufs[1];
        msg = bufs[2];
        msg_len = lens[2];
    }
    {
        const char *const t2[] = {t[0], pub};

        r = kp_sshsig_verify(sig, sig_len, msg, msg_len, "kpssh", t2, 2, NULL);
    }
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_rsa_sha256_format),
        cmocka_unit_test(test_rsa_sha1_refused),
        cmocka_unit_test(test_message_changed),
        cmocka_unit_test(test_wrong_namespace),
        cmocka_unit_test(test_untrusted_signer),
        cmocka_unit_test(test_malformed_armour),
        cmocka_unit_test(test_signer_lines),
        cmocka_unit_test(test_fresh_ssh_keygen),
    };
    static const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_verify),
    };

    return kp_test_main("sshsig", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
