/* DESIGN: unit tests for the pure half of provider/ssh/runner.c: variable names, the preamble
 * and its quoting (checked by feeding it to a real bash), phase validation and redaction. */
#include "kp-test.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/spawn.h"
#include "base/str.h"
#include "provider/ssh/runner.h"

#define TOKEN "abcdef.0123456789abcdef"
#define TOKEN_HALF "0123456789abcdef"
#define JOIN_SECRET "activation-code-0000-1111"

static void test_env_names(void **state)
{
    static const char *const good[] = {
        "KPSSH_A", "KPSSH_NODE_NAME", "KPSSH_VAR_k8sMinor", "KPSSH_SECRET_ACTIVATIONID",
        "KPSSH_0", "KPSSH__"};
    static const char *const bad[] = {"BASH_ENV", "LD_PRELOAD", "PATH",       "IFS",
                                      "KPSSH_",   "kpssh_x",    "KPSSH_X;rm", "KPSSH_X Y",
                                      "KPSSH-X",  "KPSSH_X=1",  " KPSSH_X",   "KPSSH_X\n",
                                      "KPSSH_Ä",  "",           "XKPSSH_A",   "KPSSH_$(id)"};

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(good); i++)
        assert_true(kp_ssh_env_name_ok(good[i]));
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++)
        assert_false(kp_ssh_env_name_ok(bad[i]));
    assert_false(kp_ssh_env_name_ok(NULL));
}

static void test_preamble_sorted_and_quoted(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64 * 1024);
    const struct kp_ssh_var vars[] = {
        {"KPSSH_B", "it's", NULL},
        {"KPSSH_A", "", NULL},
        {"KPSSH_C", "'$(touch /tmp/pwned)'\n`x` \"$HOME\" \\", NULL},
    };
    const char *s, *a, *bb, *c;

    (void)state;
    assert_int_equal(kp_ssh_preamble(vars, KP_ARRAY_SIZE(vars), &b), 0);
    s = kp_buf_str(&b);
    assert_true(strncmp(s, "set -euo pipefail\n", 18) == 0);
    a = strstr(s, "export KPSSH_A=''\n");
    bb = strstr(s, "export KPSSH_B='it'\\''s'\n");
    c = strstr(s, "export KPSSH_C=''\\''$(touch /tmp/pwned)'\\''\n`x` \"$HOME\" \\'\n");
    assert_non_null(a);
    assert_non_null(bb);
    assert_non_null(c);
    assert_true(a < bb && bb < c);
    kp_buf_done(&b);
}

/* The decisive check of the quoting: bash itself reads the preamble back. */
static void test_preamble_roundtrip_in_bash(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64 * 1024), script = KP_BUF_INIT(128 * 1024);
    const char *weird = "a'b\"c$(id)`id`\\n\n\t${X}*?[ ]'''";
    const struct kp_ssh_var vars[] = {
        {"KPSSH_W", weird, NULL},
        {"KPSSH_E", "", NULL},
    };
    const char *argv[] = {"bash", "-c", NULL, NULL};
    struct kp_spawn_opts o = {.argv = argv,
                              .timeout_usec = 30 * KP_USEC_PER_SEC,
                              .max_stdout = 64 * 1024,
                              .stderr_tail = 4096};
    struct kp_spawn_result res;

    (void)state;
    assert_int_equal(kp_ssh_preamble(vars, KP_ARRAY_SIZE(vars), &b), 0);
    /* The watchdog needs an sshd above it; here it finds none and exits at once. */
    assert_int_equal(kp_buf_puts(&script, kp_buf_str(&b)), 0);
    assert_int_equal(kp_buf_puts(&script, "printf '%s|%s|' \"$KPSSH_W\" \"${KPSSH_E-unset}\"; "
                                          "false; echo not-reached\n"),
                     0);
    argv[2] = kp_buf_str(&script);
    assert_int_equal(kp_spawn_run(&o, &res), 0);
    assert_int_equal(res.end, KP_SPAWN_EXITED);
    assert_int_equal(res.status, 1); /* set -e stopped at `false` */
    assert_int_equal(res.out.len, strlen(weird) + 2);
    assert_memory_equal(kp_buf_str(&res.out), weird, strlen(weird));
    assert_string_equal(kp_buf_str(&res.out) + strlen(weird), "||");
    kp_spawn_result_done(&res);
    kp_buf_done(&b);
    kp_buf_done(&script);
}

static void test_preamble_refuses(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64 * 1024);
    struct kp_secret *nul = NULL;
    const struct kp_ssh_var bash_env[] = {{"BASH_ENV", "/tmp/x", NULL}};
    const struct kp_ssh_var dup[] = {{"KPSSH_A", "1", NULL}, {"KPSSH_A", "2", NULL}};
    const struct kp_ssh_var none[] = {{"KPSSH_A", NULL, NULL}};

    (void)state;
    assert_int_equal(kp_secret_new("abc\0def", 7, &nul), 0);
    {
        const struct kp_ssh_var both[] = {{"KPSSH_A", "1", nul}};
        const struct kp_ssh_var withnul[] = {{"KPSSH_A", NULL, nul}};

        assert_int_equal(kp_ssh_preamble(both, 1, &b), -EINVAL);
        assert_int_equal(kp_ssh_preamble(withnul, 1, &b), -EINVAL);
    }
    assert_int_equal(kp_ssh_preamble(bash_env, 1, &b), -EINVAL);
    assert_int_equal(kp_ssh_preamble(dup, 2, &b), -EINVAL);
    assert_int_equal(kp_ssh_preamble(none, 1, &b), -EINVAL);
    assert_int_equal(b.len, 0);
    kp_secret_free(nul);
    kp_buf_done(&b);
}

static void test_preamble_ceiling(void **state)
{
    struct kp_buf b = KP_BUF_INIT(256);
    char big[300];
    const struct kp_ssh_var vars[] = {{"KPSSH_BIG", big, NULL}};

    (void)state;
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(kp_ssh_preamble(vars, 1, &b), -KP_ELIMIT);
    kp_buf_done(&b);
}

static void test_validate(void **state)
{
    const struct kp_ssh_var bad[] = {{"KPSSH_X;rm", "1", NULL}};
    struct kp_ssh_phase ph = {.name = "join", .script = "true\n", .script_len = 5};
    char *err = NULL;

    (void)state;
    assert_int_equal(kp_ssh_phase_validate(&ph, &err), 0);
    assert_null(err);
    ph.vars = bad;
    ph.nvars = 1;
    assert_int_equal(kp_ssh_phase_validate(&ph, &err), -EINVAL);
    assert_non_null(strstr(err, "join phase: "));
    assert_non_null(strstr(err, "KPSSH_X;rm"));
    assert_non_null(strstr(err, "^KPSSH_[A-Za-z0-9_]+$"));
    kp_free(err);
    err = NULL;
    ph.nvars = 0;
    ph.script_len = 0;
    assert_int_equal(kp_ssh_phase_validate(&ph, &err), -EINVAL);
    kp_free(err);
    err = NULL;
    ph.script_len = KP_MAX_PHASE_SCRIPT + 1;
    assert_int_equal(kp_ssh_phase_validate(&ph, &err), -KP_ELIMIT);
    kp_free(err);
    err = NULL;
    ph.script = "a\0b";
    ph.script_len = 3;
    assert_int_equal(kp_ssh_phase_validate(&ph, &err), -EINVAL);
    kp_free(err);
}

static void test_command(void **state)
{
    (void)state;
    assert_string_equal(kp_ssh_phase_command(NULL), "bash -s");
    assert_string_equal(kp_ssh_phase_command(""), "bash -s");
    assert_string_equal(kp_ssh_phase_command("root"), "bash -s");
    assert_string_equal(kp_ssh_phase_command("lab"), "sudo -n bash -s");
}

struct secrets {
    struct kp_secret *token, *join, *shorty;
};

static void secrets_make(struct secrets *s)
{
    assert_int_equal(kp_secret_new(TOKEN, strlen(TOKEN), &s->token), 0);
    assert_int_equal(kp_secret_new(JOIN_SECRET, strlen(JOIN_SECRET), &s->join), 0);
    assert_int_equal(kp_secret_new("short", 5, &s->shorty), 0);
}

static void secrets_free(struct secrets *s)
{
    kp_secret_free(s->token);
    kp_secret_free(s->join);
    kp_secret_free(s->shorty);
}

static void test_redact(void **state)
{
    struct secrets s;
    struct kp_buf out = KP_BUF_INIT(4096);
    const char *text = "token " TOKEN " half " TOKEN_HALF " join " JOIN_SECRET " short short";

    (void)state;
    secrets_make(&s);
    {
        const struct kp_ssh_var vars[] = {{"KPSSH_BOOTSTRAP_TOKEN", NULL, s.token}};
        const struct kp_secret *const extra[] = {s.join, s.shorty};
        const struct kp_ssh_phase ph = {
            .name = "join", .vars = vars, .nvars = 1, .secrets = extra, .nsecrets = 2};

        assert_int_equal(kp_ssh_redact(text, strlen(text), false, &ph, &out), 0);
        assert_string_equal(kp_buf_str(&out), "token [REDACTED] half [REDACTED] join [REDACTED] "
                                              "short short");
        /* A tail that starts inside a secret loses the partial secret. */
        kp_buf_reset(&out);
        {
            const char *tail = "n-0000-1111 and then the rest of the line";

            assert_int_equal(kp_ssh_redact(tail, strlen(tail), true, &ph, &out), 0);
            assert_null(strstr(kp_buf_str(&out), "1111"));
            /* The longest secret has 25 bytes: 24 leading bytes go. */
            assert_string_equal(kp_buf_str(&out), tail + 24);
        }
    }
    secrets_free(&s);
    kp_buf_done(&out);
}

static void test_redact_longest_first(void **state)
{
    struct kp_secret *a = NULL, *b = NULL;
    struct kp_buf out = KP_BUF_INIT(4096);

    (void)state;
    /* b contains a: redacting a first would leave "xx" + "[REDACTED]" + "yy" of b visible. */
    assert_int_equal(kp_secret_new("password", 8, &a), 0);
    assert_int_equal(kp_secret_new("xxpasswordyy", 12, &b), 0);
    {
        const struct kp_secret *const list[] = {a, b};
        const struct kp_ssh_phase ph = {.name = "join", .secrets = list, .nsecrets = 2};

        assert_int_equal(kp_ssh_redact("1 xxpasswordyy 2 password", 25, false, &ph, &out), 0);
        assert_string_equal(kp_buf_str(&out), "1 [REDACTED] 2 [REDACTED]");
    }
    kp_secret_free(a);
    kp_secret_free(b);
    kp_buf_done(&out);
}

static int torture_preamble_and_redact(void)
{
    struct kp_secret *tok = NULL;
    struct kp_buf b = KP_BUF_INIT(64 * 1024), out = KP_BUF_INIT(64 * 1024);
    int r;

    r = kp_secret_new(TOKEN, strlen(TOKEN), &tok);
    if (r < 0)
        goto out;
    {
        const struct kp_ssh_var vars[] = {{"KPSSH_B", "it's", NULL},
                                          {"KPSSH_BOOTSTRAP_TOKEN", NULL, tok},
                                          {"KPSSH_A", "x", NULL}};
        const struct kp_ssh_phase ph = {.name = "join", .vars = vars, .nvars = 3};

        r = kp_ssh_preamble(vars, 3, &b);
        if (r < 0)
            goto out;
        r = kp_ssh_redact(kp_buf_str(&b), b.len, true, &ph, &out);
    }
out:
    kp_buf_wipe(&b);
    kp_buf_wipe(&out);
    kp_secret_free(tok);
    return r;
}

/* The value of header field f in the envelope text env, base64-decoded into out. */
static void envelope_field(const char *env, const char *f, struct kp_buf *out)
{
    char key[32];
    const char *at, *end;

    snprintf(key, sizeof(key), "\n%s: ", f);
    at = strstr(env, key);
    assert_non_null(at);
    at += strlen(key);
    end = strchr(at, '\n');
    assert_non_null(end);
    assert_int_equal(kp_base64_decode(at, (size_t)(end - at), 0, out), 0);
}

static void test_envelope(void **state)
{
    struct kp_buf b = KP_BUF_INIT(64 * 1024), d = KP_BUF_INIT(64 * 1024);
    struct kp_secret *tok = NULL;
    struct kp_ssh_var vars[] = {
        {.name = "KPSSH_NODE_NAME", .value = "n1"},
        {.name = "KPSSH_BOOTSTRAP_TOKEN"},
        {.name = "KPSSH_VAR_x", .value = "a b='c' $(d)"},
    };
    static const char script[] = "#!/bin/bash\necho hi\n";
    static const char sig[] = "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n";
    const struct kp_ssh_var nl[] = {{.name = "KPSSH_X", .value = "two\nlines"}};
    char *msg = NULL;

    (void)state;
    assert_int_equal(kp_secret_new(TOKEN, strlen(TOKEN), &tok), 0);
    vars[1].secret = tok;
    /* The probe: exactly the two header lines. */
    assert_int_equal(kp_ssh_envelope("probe", NULL, 0, NULL, 0, NULL, 0, &b, &msg), 0);
    assert_string_equal(kp_buf_str(&b), "kpssh-envelope: 1\nphase: probe\n");
    kp_buf_wipe(&b);

    /* A phase: variables sorted by name as NAME=VALUE lines; script and signature exact. */
    assert_int_equal(kp_ssh_envelope("join", vars, KP_ARRAY_SIZE(vars), script, sizeof(script) - 1,
                                     sig, sizeof(sig) - 1, &b, &msg),
                     0);
    assert_true(kp_startswith(kp_buf_str(&b), "kpssh-envelope: 1\nphase: join\n") != NULL);
    envelope_field(kp_buf_str(&b), "params-b64", &d);
    assert_string_equal(kp_buf_str(&d), "KPSSH_BOOTSTRAP_TOKEN=" TOKEN
                                        "\nKPSSH_NODE_NAME=n1\nKPSSH_VAR_x=a b='c' $(d)\n");
    kp_buf_wipe(&d);
    envelope_field(kp_buf_str(&b), "script-b64", &d);
    assert_string_equal(kp_buf_str(&d), script);
    kp_buf_wipe(&d);
    envelope_field(kp_buf_str(&b), "sig-b64", &d);
    assert_string_equal(kp_buf_str(&d), sig);
    kp_buf_wipe(&d);
    kp_buf_wipe(&b);

    /* Refused before anything is sent. */
    assert_int_equal(
        kp_ssh_envelope("join", nl, 1, script, sizeof(script) - 1, sig, sizeof(sig) - 1, &b, &msg),
        -EINVAL);
    assert_non_null(strstr(msg, "KPSSH_X holds a newline"));
    kp_free(msg), msg = NULL;
    assert_int_equal(kp_ssh_envelope("reboot", NULL, 0, script, sizeof(script) - 1, sig,
                                     sizeof(sig) - 1, &b, &msg),
                     -EINVAL);
    assert_non_null(strstr(msg, "unknown phase"));
    kp_free(msg), msg = NULL;
    assert_int_equal(
        kp_ssh_envelope("install", NULL, 0, script, sizeof(script) - 1, NULL, 0, &b, &msg),
        -EINVAL);
    kp_free(msg), msg = NULL;
    assert_int_equal(kp_ssh_envelope("probe", vars, 1, NULL, 0, NULL, 0, &b, &msg), -EINVAL);
    kp_free(msg), msg = NULL;
    assert_int_equal(kp_ssh_envelope("leave",
                                     (const struct kp_ssh_var[]){{.name = "PATH", .value = "/tmp"}},
                                     1, script, sizeof(script) - 1, sig, sizeof(sig) - 1, &b, &msg),
                     -EINVAL);
    assert_non_null(strstr(msg, "not allowed"));
    kp_free(msg), msg = NULL;
    /* More parameter text than the shim takes: refused here, not by the host. */
    {
        char *big = kp_malloc(KP_ENVELOPE_MAX_PARAMS);
        const struct kp_ssh_var one[] = {{.name = "KPSSH_BIG", .value = big}};

        assert_non_null(big);
        memset(big, 'x', KP_ENVELOPE_MAX_PARAMS - 1);
        big[KP_ENVELOPE_MAX_PARAMS - 1] = '\0';
        assert_int_equal(kp_ssh_envelope("join", one, 1, script, sizeof(script) - 1, sig,
                                         sizeof(sig) - 1, &b, &msg),
                         -EINVAL);
        assert_non_null(strstr(msg, "more than the 65536 bytes"));
        kp_free(msg);
        kp_free(big);
    }
    kp_buf_wipe(&b);
    kp_secret_free(tok);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_names),
        cmocka_unit_test(test_envelope),
        cmocka_unit_test(test_preamble_sorted_and_quoted),
        cmocka_unit_test(test_preamble_roundtrip_in_bash),
        cmocka_unit_test(test_preamble_refuses),
        cmocka_unit_test(test_preamble_ceiling),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_command),
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_redact_longest_first),
    };
    static const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_preamble_and_redact),
    };

    return kp_test_main("runner-script", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases),
                        argc, argv);
}
