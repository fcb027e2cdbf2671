/* DESIGN: unit tests for the shim's envelope parser (cmd/shim/envelope.c), a pure function:
 * each case builds an envelope in memory and checks the verdict (the exit code the shim would
 * give) and, when it parses, what was decoded. The order of checks follows the reference shim,
 * so the cases that combine faults pin which verdict wins. */
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "cmd/shim/envelope.h"
#include "kp-test.h"

/* Appends "name: base64(p[0..n))\n". */
static void field_b64(struct kp_buf *b, const char *name, const void *p, size_t n)
{
    assert_int_equal(kp_buf_printf(b, "%s: ", name), 0);
    assert_int_equal(kp_base64_encode(p, n, 0, b), 0);
    assert_int_equal(kp_buf_putc(b, '\n'), 0);
}

static enum kp_shim_exit parse(const char *p, size_t n, struct kp_envelope *e)
{
    char *why = NULL;
    enum kp_shim_exit x;

    kp_envelope_init(e);
    x = kp_envelope_parse(p, n, e, &why);
    if (x != KP_SHIM_OK)
        assert_non_null(why);
    else
        assert_null(why);
    kp_free(why);
    return x;
}

static enum kp_shim_exit parse_str(const char *s)
{
    struct kp_envelope e;
    enum kp_shim_exit x = parse(s, strlen(s), &e);

    kp_envelope_done(&e);
    return x;
}

/* A join envelope with the given params text (NULL: no params-b64 line). */
static void join_envelope(struct kp_buf *b, const char *params, size_t params_len)
{
    assert_int_equal(kp_buf_puts(b, "kpssh-envelope: 1\nphase: join\n"), 0);
    if (params)
        field_b64(b, "params-b64", params, params_len);
    field_b64(b, "sig-b64", "-----BEGIN SSH SIGNATURE-----\n", 30);
    field_b64(b, "script-b64", "echo hi\n", 8);
}

static enum kp_shim_exit params_of(const char *text, size_t len, struct kp_shim_params *ret)
{
    struct kp_buf b = KP_BUF_INIT(1u << 22);
    struct kp_envelope e;
    char *why = NULL;
    enum kp_shim_exit x;

    join_envelope(&b, text, len);
    assert_int_equal(parse(b.data, b.len, &e), KP_SHIM_OK);
    kp_shim_params_init(ret);
    x = kp_envelope_params(&e, ret, &why);
    if (x != KP_SHIM_OK)
        assert_non_null(why);
    kp_free(why);
    kp_envelope_done(&e);
    kp_buf_done(&b);
    return x;
}

static enum kp_shim_exit params_verdict(const char *text, size_t len)
{
    struct kp_shim_params p;
    enum kp_shim_exit x = params_of(text, len, &p);

    kp_shim_params_done(&p);
    return x;
}

static void test_probe(void **state)
{
    struct kp_envelope e;
    const char *s = "kpssh-envelope: 1\nphase: probe\n";

    (void)state;
    assert_int_equal(parse(s, strlen(s), &e), KP_SHIM_OK);
    assert_int_equal(e.phase, KP_SHIM_PHASE_PROBE);
    assert_int_equal(e.script.len, 0);
    kp_envelope_done(&e);
    /* No final newline, other order, noise lines, fields a probe does not use. */
    assert_int_equal(parse_str("phase: probe\nkpssh-envelope: 1"), KP_SHIM_OK);
    assert_int_equal(parse_str("\n# hello\nx-future: 7\nkpssh-envelope: 1\n\nphase: probe\n"),
                     KP_SHIM_OK);
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: probe\nscript-b64: !!\n"), KP_SHIM_OK);
}

static void test_header_verdicts(void **state)
{
    (void)state;
    assert_int_equal(parse_str(""), KP_SHIM_MALFORMED);
    assert_int_equal(parse_str("phase: probe\n"), KP_SHIM_MALFORMED);
    assert_int_equal(parse_str("kpssh-envelope: 2\nphase: probe\n"), KP_SHIM_MALFORMED);
    assert_int_equal(parse_str("kpssh-envelope: 1 \nphase: probe\n"), KP_SHIM_MALFORMED);
    assert_int_equal(parse_str("kpssh-envelope: 1\r\nphase: probe\r\n"), KP_SHIM_MALFORMED);
    assert_int_equal(parse_str("kpssh-envelope:1\nphase: probe\n"), KP_SHIM_MALFORMED);
    assert_int_equal(parse_str("kpssh-envelope: \nphase: probe\n"), KP_SHIM_MALFORMED);
    assert_int_equal(parse_str("kpssh-envelope: 1\n"), KP_SHIM_MALFORMED);
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: \n"), KP_SHIM_MALFORMED);
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: reboot\n"), KP_SHIM_UNKNOWN_PHASE);
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: Join\n"), KP_SHIM_UNKNOWN_PHASE);
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: probe \n"), KP_SHIM_UNKNOWN_PHASE);
    /* Version is checked before phase: a bad version with a bad phase is malformed. */
    assert_int_equal(parse_str("kpssh-envelope: 9\nphase: reboot\n"), KP_SHIM_MALFORMED);
    /* Unknown phase wins over missing signature and script. */
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: reboot\nscript-b64: x\n"),
                     KP_SHIM_UNKNOWN_PHASE);
    /* A plain script, as `bash -s` would have been sent to a Raw host. */
    assert_int_equal(parse_str("#!/bin/bash\nset -eu\necho joined\n"), KP_SHIM_MALFORMED);
    /* The last occurrence wins. */
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: reboot\nphase: probe\n"), KP_SHIM_OK);
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: probe\nphase: reboot\n"),
                     KP_SHIM_UNKNOWN_PHASE);
    assert_int_equal(parse_str("kpssh-envelope: 1\nkpssh-envelope: 2\nphase: probe\n"),
                     KP_SHIM_MALFORMED);
    {
        static const char nul[] = "kpssh-envelope: 1\nphase: probe\n# \0\n";

        assert_int_equal(parse_str(nul), KP_SHIM_OK); /* strlen stops at the NUL */
        struct kp_envelope e;

        assert_int_equal(parse(nul, sizeof(nul) - 1, &e), KP_SHIM_MALFORMED);
        kp_envelope_done(&e);
    }
}

static void test_signed_phases(void **state)
{
    static const char *const phases[] = {"install", "join", "leave", "uninstall"};
    struct kp_buf b = KP_BUF_INIT(1u << 22);
    struct kp_envelope e;

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(phases); i++) {
        kp_buf_reset(&b);
        assert_int_equal(kp_buf_printf(&b, "kpssh-envelope: 1\nphase: %s\n", phases[i]), 0);
        field_b64(&b, "script-b64", "true\n", 5);
        field_b64(&b, "sig-b64", "SIG", 3);
        assert_int_equal(parse(b.data, b.len, &e), KP_SHIM_OK);
        assert_string_equal(kp_shim_phase_name(e.phase), phases[i]);
        assert_string_equal(kp_buf_str(&e.script), "true\n");
        assert_string_equal(kp_buf_str(&e.sig), "SIG");
        assert_null(e.params_b64);
        kp_envelope_done(&e);
    }

    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: join\nscript-b64: dHJ1ZQo=\n"),
                     KP_SHIM_MALFORMED); /* no signature */
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: join\nsig-b64: dHJ1ZQo=\n"),
                     KP_SHIM_MALFORMED); /* no script */
    assert_int_equal(parse_str("kpssh-envelope: 1\nphase: join\nsig-b64: dHJ1ZQo=\nscript-b64: \n"),
                     KP_SHIM_MALFORMED);
    /* Base64: standard alphabet, padded, one line. */
    assert_int_equal(
        parse_str("kpssh-envelope: 1\nphase: join\nsig-b64: dHJ1ZQo=\nscript-b64: dHJ1ZQo\n"),
        KP_SHIM_MALFORMED);
    assert_int_equal(
        parse_str("kpssh-envelope: 1\nphase: join\nsig-b64: dHJ1ZQo=\nscript-b64: dHJ1-Qo=\n"),
        KP_SHIM_MALFORMED);
    assert_int_equal(
        parse_str("kpssh-envelope: 1\nphase: join\nsig-b64: dH J1ZQo=\nscript-b64: dHJ1ZQo=\n"),
        KP_SHIM_MALFORMED);
    assert_int_equal(
        parse_str("kpssh-envelope: 1\nphase: join\nsig-b64: dHJ1ZQo=\nscript-b64: dHJ1ZQo=\r\n"),
        KP_SHIM_MALFORMED);
    assert_int_equal(
        parse_str("kpssh-envelope: 1\nphase: join\nsig-b64: dHJ1ZQo=\nscript-b64: dHJ1ZQo=\n"),
        KP_SHIM_OK);
    kp_buf_done(&b);
}

static void test_ceilings(void **state)
{
    struct kp_buf b = KP_BUF_INIT(8u << 20);
    struct kp_envelope e;
    char *big = kp_malloc(KP_SHIM_MAX_SCRIPT + 1);

    (void)state;
    assert_non_null(big);
    memset(big, '#', KP_SHIM_MAX_SCRIPT + 1);
    for (int over = 0; over <= 1; over++) {
        kp_buf_reset(&b);
        assert_int_equal(kp_buf_puts(&b, "kpssh-envelope: 1\nphase: install\n"), 0);
        field_b64(&b, "sig-b64", "S", 1);
        field_b64(&b, "script-b64", big, KP_SHIM_MAX_SCRIPT + (size_t)over);
        assert_int_equal(parse(b.data, b.len, &e), over ? KP_SHIM_MALFORMED : KP_SHIM_OK);
        kp_envelope_done(&e);

        kp_buf_reset(&b);
        assert_int_equal(kp_buf_puts(&b, "kpssh-envelope: 1\nphase: install\n"), 0);
        field_b64(&b, "sig-b64", big, KP_SHIM_MAX_SIG + (size_t)over);
        field_b64(&b, "script-b64", "S", 1);
        assert_int_equal(parse(b.data, b.len, &e), over ? KP_SHIM_MALFORMED : KP_SHIM_OK);
        kp_envelope_done(&e);

        assert_int_equal(params_verdict(big, KP_SHIM_MAX_PARAMS + (size_t)over),
                         over ? KP_SHIM_MALFORMED : KP_SHIM_BAD_PARAM);
    }
    /* The whole envelope: 2 MiB, even of ignored lines. */
    kp_buf_reset(&b);
    assert_int_equal(kp_buf_puts(&b, "kpssh-envelope: 1\nphase: probe\n"), 0);
    while (b.len <= KP_SHIM_MAX_ENVELOPE)
        assert_int_equal(kp_buf_append(&b, big, KP_MIN(KP_SHIM_MAX_SCRIPT, (size_t)100000)), 0);
    assert_int_equal(parse(b.data, KP_SHIM_MAX_ENVELOPE, &e), KP_SHIM_OK);
    kp_envelope_done(&e);
    assert_int_equal(parse(b.data, KP_SHIM_MAX_ENVELOPE + 1, &e), KP_SHIM_MALFORMED);
    kp_envelope_done(&e);
    kp_free(big);
    kp_buf_done(&b);
}

static void test_params(void **state)
{
    static const char good[] = "KPSSH_NODE_NAME=h7\n\nKPSSH_LABELS=a=b,c=d\nKPSSH_x9_=\n"
                               "KPSSH_LAST=no newline";
    struct kp_shim_params p;

    (void)state;
    assert_int_equal(params_of(good, sizeof(good) - 1, &p), KP_SHIM_OK);
    assert_int_equal(p.n, 4);
    assert_string_equal(p.env[0], "KPSSH_NODE_NAME=h7");
    assert_string_equal(p.env[1], "KPSSH_LABELS=a=b,c=d");
    assert_string_equal(p.env[2], "KPSSH_x9_=");
    assert_string_equal(p.env[3], "KPSSH_LAST=no newline");
    assert_null(p.env[4]);
    kp_shim_params_done(&p);

    /* No params-b64 line: no parameters, an empty environment list. */
    assert_int_equal(params_of(NULL, 0, &p), KP_SHIM_OK);
    assert_int_equal(p.n, 0);
    assert_null(p.env[0]);
    kp_shim_params_done(&p);

    assert_int_equal(params_verdict("\n\n", 2), KP_SHIM_OK);
    assert_int_equal(params_verdict("KPSSH_A\n", 8), KP_SHIM_BAD_PARAM);         /* no '=' */
    assert_int_equal(params_verdict("KPSSH_A=1\nfoo\n", 14), KP_SHIM_BAD_PARAM); /* 2nd line */
    assert_int_equal(params_verdict("KPSSH_=x\n", 9), KP_SHIM_BAD_PARAM);        /* bare */
    assert_int_equal(params_verdict("KPSSH=x\n", 8), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict("kpssh_A=x\n", 10), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict("LD_PRELOAD=/x.so\n", 17), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict("BASH_ENV=/x\n", 12), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict("KPSSH_A-B=x\n", 12), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict("KPSSH_A B=x\n", 12), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict(" KPSSH_A=x\n", 11), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict("KPSSH_\xc3\xa9=x\n", 10), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict("KPSSH_A=x\0y\n", 12), KP_SHIM_BAD_PARAM); /* NUL value */
    assert_int_equal(params_verdict("KPSSH_\0=x\n", 10), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict("KPSSH_A=1\nKPSSH_B=2\nKPSSH_A=3\n", 30), KP_SHIM_BAD_PARAM);
    assert_int_equal(params_verdict("KPSSH_A=1\nKPSSH_A0=2\nKPSSH_A_=3\n", 32), KP_SHIM_OK);

    /* Bad base64 in params-b64 is a malformed envelope, found only when params are read. */
    {
        static const char s[] = "kpssh-envelope: 1\nphase: leave\nparams-b64: S1BTU0g=x\n"
                                "sig-b64: dHJ1ZQo=\nscript-b64: dHJ1ZQo=\n";
        struct kp_envelope e;
        char *why = NULL;

        assert_int_equal(parse(s, sizeof(s) - 1, &e), KP_SHIM_OK);
        kp_shim_params_init(&p);
        assert_int_equal(kp_envelope_params(&e, &p, &why), KP_SHIM_MALFORMED);
        assert_non_null(why);
        kp_free(why);
        kp_shim_params_done(&p);
        kp_envelope_done(&e);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe),         cmocka_unit_test(test_header_verdicts),
        cmocka_unit_test(test_signed_phases), cmocka_unit_test(test_ceilings),
        cmocka_unit_test(test_params),
    };

    return kp_test_main("shim-envelope", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
