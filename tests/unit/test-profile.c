/* DESIGN: unit tests for provider/ssh/profile.c, against the contract in provider/ssh/profile.h.
 *
 * A valid profile is the starting point of every case; each case breaks one thing and checks the
 * verdict (-EINVAL) and that the message names the field, the position where there is one, and
 * the remedy. The shipped profiles are validated too, from the scripts in profiles/, so a change
 * to them that breaks the leave contract fails here before it fails on a host. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "kp-test.h"
#include "provider/ssh/profile.h"

#define TXT(s) ((struct kp_profile_text){(s), sizeof(s) - 1})

static struct kp_profile_spec valid(void)
{
    struct kp_profile_spec p = {
        .name = "tls-bootstrap",
        .version = "1",
    };

    p.scripts[KP_PROFILE_INSTALL] = TXT("#!/bin/bash\nset -euo pipefail\napt-get install -y x\n");
    p.scripts[KP_PROFILE_JOIN] = TXT("set -euo pipefail\necho \"$KPSSH_VAR_k8sMinor\"\n");
    p.scripts[KP_PROFILE_LEAVE] = TXT("set -euo pipefail\nsystemctl disable --now kubelet\n");
    return p;
}

static void expect_invalid(const struct kp_profile_spec *p, const char *needle1,
                           const char *needle2)
{
    char *err = NULL;

    assert_int_equal(kp_profile_validate(p, &err), -EINVAL);
    assert_non_null(err);
    if (!strstr(err, needle1) || (needle2 && !strstr(err, needle2)))
        fail_msg("message \"%s\" lacks \"%s\"/\"%s\"", err, needle1, needle2 ? needle2 : "");
    kp_free(err);
    assert_int_equal(kp_profile_validate(p, NULL), -EINVAL);
}

static void test_valid(void **state)
{
    struct kp_profile_spec p = valid();
    char *err = NULL;

    (void)state;
    assert_int_equal(kp_profile_validate(&p, &err), 0);
    assert_null(err);
    p.version = NULL; /* defaults to "1" */
    assert_int_equal(kp_profile_validate(&p, NULL), 0);
    p.version = "2024.06-rc_1";
    p.scripts[KP_PROFILE_UNINSTALL] = TXT("exit 0\n");
    p.timeouts[KP_PROFILE_INSTALL] = TXT("1h30m");
    p.timeouts[KP_PROFILE_JOIN] = TXT("90s");
    p.timeouts[KP_PROFILE_LEAVE] = TXT("0s");
    p.signatures[KP_PROFILE_JOIN] = TXT("-----BEGIN SSH SIGNATURE-----\n...\n");
    assert_int_equal(kp_profile_validate(&p, NULL), 0);
    /* A kubectl go-template is not one of the reference's template fields. */
    p.scripts[KP_PROFILE_JOIN] = TXT("kubectl get node -o go-template='{{.metadata.name}}'\n");
    assert_int_equal(kp_profile_validate(&p, NULL), 0);
    /* Leave may read the addresses and the fixed names (they are exported, empty). */
    p.scripts[KP_PROFILE_LEAVE] = TXT("echo \"$KPSSH_NODE_ADDRESS ${KPSSH_NODE_NAME:-}\"\n");
    assert_int_equal(kp_profile_validate(&p, NULL), 0);
}

static void test_required_scripts(void **state)
{
    static const char *const names[] = {"install", "join", "leave"};
    struct kp_profile_spec p;
    size_t i;

    (void)state;
    for (i = 0; i < 3; i++) {
        char field[32];

        (void)snprintf(field, sizeof(field), "spec.scripts.%s is missing", names[i]);
        p = valid();
        p.scripts[i] = (struct kp_profile_text){NULL, 0};
        expect_invalid(&p, field, "`exit 0`");
        (void)snprintf(field, sizeof(field), "spec.scripts.%s is empty", names[i]);
        p = valid();
        p.scripts[i] = TXT("");
        expect_invalid(&p, field, NULL);
    }
    p = valid();
    p.scripts[KP_PROFILE_UNINSTALL] = TXT("");
    expect_invalid(&p, "spec.scripts.uninstall is empty", NULL);
}

static void test_size_limit(void **state)
{
    struct kp_profile_spec p = valid();
    char *big = kp_malloc(KP_MAX_PROFILE_SCRIPT + 1);

    (void)state;
    assert_non_null(big);
    memset(big, '#', KP_MAX_PROFILE_SCRIPT + 1);
    p.scripts[KP_PROFILE_JOIN] = (struct kp_profile_text){big, KP_MAX_PROFILE_SCRIPT};
    assert_int_equal(kp_profile_validate(&p, NULL), 0); /* exactly 256 KiB is fine */
    p.scripts[KP_PROFILE_JOIN].len++;
    expect_invalid(&p, "spec.scripts.join is 262145 bytes", "256 KiB");
    kp_free(big);
}

static void test_nul(void **state)
{
    struct kp_profile_spec p = valid();

    (void)state;
    p.scripts[KP_PROFILE_INSTALL] = TXT("ok\nab\0c\n");
    expect_invalid(&p, "spec.scripts.install:2:3", "NUL");
}

static void test_templates(void **state)
{
    struct kp_profile_spec p = valid();

    (void)state;
    p.scripts[KP_PROFILE_JOIN] = TXT("set -e\n  echo {{ .NodeName }}\n");
    expect_invalid(&p, "spec.scripts.join:2:8: {{ .NodeName }}", "\"$KPSSH_NODE_NAME\"");
    p.scripts[KP_PROFILE_JOIN] = TXT("x={{-.Vars.k8sMinor}}");
    expect_invalid(&p, "spec.scripts.join:1:3", "KPSSH_VAR_<key>");
    p.scripts[KP_PROFILE_JOIN] = TXT("{{.RegisterWithTaints}}");
    expect_invalid(&p, "KPSSH_TAINTS", NULL);
    p.scripts[KP_PROFILE_JOIN] = TXT("{{ .ClusterCACert | b64 }}");
    expect_invalid(&p, "KPSSH_CLUSTER_CA_B64", NULL);
    /* A longer identifier that only starts like a field is not a template field. */
    p.scripts[KP_PROFILE_JOIN] = TXT("{{ .NodeNames }} {{ .Varsity }} {{");
    assert_int_equal(kp_profile_validate(&p, NULL), 0);
    p.scripts[KP_PROFILE_JOIN] = TXT("{{ {{ .Secrets.x }}");
    expect_invalid(&p, "1:4", "KPSSH_SECRET_<KEY>");
    p = valid();
    p.scripts[KP_PROFILE_UNINSTALL] = TXT("{{.HostAddress}}");
    expect_invalid(&p, "spec.scripts.uninstall:1:1", "KPSSH_HOST_ADDRESS");
}

static void test_leave_contract(void **state)
{
    struct kp_profile_spec p = valid();

    (void)state;
    p.scripts[KP_PROFILE_LEAVE] = TXT("set -eu\nsystemctl stop x\nrm -f \"/etc/$KPSSH_VAR_dir\"\n");
    expect_invalid(&p, "spec.scripts.leave:3:14: leave mentions KPSSH_VAR_dir", "node class");
    p.scripts[KP_PROFILE_LEAVE] = TXT("curl -u \"${KPSSH_SECRET_TOKEN}\" x");
    expect_invalid(&p, "leave:1:12: leave mentions KPSSH_SECRET_TOKEN", "self-contained");
    /* The earliest mention is reported, whichever family. */
    p.scripts[KP_PROFILE_LEAVE] = TXT("# KPSSH_SECRET_A\n# KPSSH_VAR_B\n");
    expect_invalid(&p, "leave:1:3: leave mentions KPSSH_SECRET_A", NULL);
    p.scripts[KP_PROFILE_LEAVE] = TXT("# KPSSH_VAR_\n");
    expect_invalid(&p, "leave mentions KPSSH_VAR_,", NULL);
    /* Only leave is bound by it. */
    p = valid();
    p.scripts[KP_PROFILE_INSTALL] = TXT("echo $KPSSH_SECRET_X $KPSSH_VAR_Y");
    p.scripts[KP_PROFILE_UNINSTALL] = TXT("echo $KPSSH_VAR_Y");
    assert_int_equal(kp_profile_validate(&p, NULL), 0);
    /* A long identifier is quoted only in part. */
    p.scripts[KP_PROFILE_LEAVE] =
        TXT("KPSSH_VAR_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    expect_invalid(&p, "KPSSH_VAR_aaaa", NULL);
}

static void test_version(void **state)
{
    static const char *const bad[] = {
        "v 1", "1/2", "a@b", "1234567890123456789012345678901234567890123456789012345678901234"};
    struct kp_profile_spec p = valid();
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        p.version = bad[i];
        expect_invalid(&p, "spec.version", "1 to 63");
    }
    p.version = "123456789012345678901234567890123456789012345678901234567890123";
    assert_int_equal(kp_profile_validate(&p, NULL), 0);
}

static void test_durations(void **state)
{
    static const struct {
        const char *s;
        int r;
        uint32_t secs;
    } cases[] = {
        {"90s", 0, 90},
        {"10m", 0, 600},
        {"1h30m", 0, 5400},
        {"1h1h", 0, 7200},
        {"0s", 0, 0},
        {"007s", 0, 7},
        {"1h30m15s", 0, 5415},
        {"1193046h", 0, 4294965600u},
        {"4294967295s", 0, UINT32_MAX},
        {"4294967296s", -ERANGE, 0},
        {"1193047h", -ERANGE, 0},
        {"99999999999999999999999s", -ERANGE, 0},
        {"", -EINVAL, 0},
        {"1.5h", -EINVAL, 0},
        {"500ms", -EINVAL, 0},
        {"10", -EINVAL, 0},
        {"s", -EINVAL, 0},
        {"1d", -EINVAL, 0},
        {" 1s", -EINVAL, 0},
        {"1s ", -EINVAL, 0},
        {"-1s", -EINVAL, 0},
        {"1H", -EINVAL, 0},
    };
    uint32_t secs;
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        secs = 12345;
        int r = kp_profile_parse_duration(cases[i].s, strlen(cases[i].s), &secs);

        if (r != cases[i].r)
            fail_msg("%s: got %d, want %d", cases[i].s, r, cases[i].r);
        assert_int_equal(secs, r == 0 ? cases[i].secs : 12345);
    }
}

static void test_timeouts(void **state)
{
    struct kp_profile_spec p = valid();
    uint32_t secs = 0;

    (void)state;
    assert_int_equal(kp_profile_timeout(&p, KP_PROFILE_INSTALL, &secs), 0);
    assert_int_equal(secs, 600);
    assert_int_equal(kp_profile_timeout(&p, KP_PROFILE_JOIN, &secs), 0);
    assert_int_equal(secs, 300);
    assert_int_equal(kp_profile_timeout(&p, KP_PROFILE_LEAVE, &secs), 0);
    assert_int_equal(secs, 180);
    assert_int_equal(kp_profile_timeout(&p, KP_PROFILE_UNINSTALL, &secs), 0);
    assert_int_equal(secs, 180);
    p.timeouts[KP_PROFILE_JOIN] = TXT("2m30s");
    assert_int_equal(kp_profile_timeout(&p, KP_PROFILE_JOIN, &secs), 0);
    assert_int_equal(secs, 150);
    p.timeouts[KP_PROFILE_JOIN] = TXT("0m");
    assert_int_equal(kp_profile_timeout(&p, KP_PROFILE_JOIN, &secs), 0);
    assert_int_equal(secs, 300);
    p.timeouts[KP_PROFILE_LEAVE] = TXT("1.5h");
    secs = 7;
    assert_int_equal(kp_profile_timeout(&p, KP_PROFILE_LEAVE, &secs), -EINVAL);
    assert_int_equal(secs, 7);
    assert_int_equal(kp_profile_timeout(&p, (enum kp_profile_phase)9, &secs), -EINVAL);
    expect_invalid(&p, "spec.timeouts.leave \"1.5h\" is not a duration", "1h30m");
    p.timeouts[KP_PROFILE_LEAVE] = TXT("9999999999h");
    expect_invalid(&p, "spec.timeouts.leave is too long", NULL);
}

static void test_signatures(void **state)
{
    struct kp_profile_spec p = valid();
    char *sig = kp_calloc(1, KP_MAX_PROFILE_SIGNATURE + 1);

    (void)state;
    assert_non_null(sig);
    p.signatures[KP_PROFILE_LEAVE] = (struct kp_profile_text){sig, KP_MAX_PROFILE_SIGNATURE};
    assert_int_equal(kp_profile_validate(&p, NULL), 0);
    p.signatures[KP_PROFILE_LEAVE].len++;
    expect_invalid(&p, "spec.signatures.leave is 16385 bytes", NULL);
    kp_free(sig);
}

static void test_marker_and_names(void **state)
{
    struct kp_profile_spec p = valid();
    static char untouched[] = "x";
    char *m = untouched;

    (void)state;
    assert_int_equal(kp_profile_marker(&p, &m), 0);
    assert_string_equal(m, "tls-bootstrap@1");
    kp_free(m);
    p.version = "";
    assert_int_equal(kp_profile_marker(&p, &m), 0);
    assert_string_equal(m, "tls-bootstrap@1");
    kp_free(m);
    p.version = "7";
    assert_int_equal(kp_profile_marker(&p, &m), 0);
    assert_string_equal(m, "tls-bootstrap@7");
    kp_free(m);
    m = untouched;
    p.name = NULL;
    assert_int_equal(kp_profile_marker(&p, &m), -EINVAL);
    assert_ptr_equal(m, untouched);

    assert_string_equal(kp_profile_phase_name(KP_PROFILE_INSTALL), "install");
    assert_string_equal(kp_profile_phase_name(KP_PROFILE_UNINSTALL), "uninstall");
    assert_null(kp_profile_phase_name(KP_PROFILE_PHASES));
}

/* Reads profiles/<name>/<phase>.sh from the source tree (KP_REPO), NULL when absent. */
static char *read_script(const char *profile, const char *phase, size_t *ret_len)
{
    struct kp_buf b = KP_BUF_INIT(KP_MAX_PROFILE_SCRIPT + 1);
    const char *repo = getenv("KP_REPO");
    char path[4096], chunk[4096];
    size_t n;
    FILE *f;

    if (!repo)
        return NULL;
    (void)snprintf(path, sizeof(path), "%s/profiles/%s/%s.sh", repo, profile, phase);
    f = fopen(path, "re");
    if (!f)
        return NULL;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        assert_int_equal(kp_buf_append(&b, chunk, n), 0);
    fclose(f);
    return kp_buf_steal(&b, ret_len);
}

static void test_shipped_profiles(void **state)
{
    static const char *const names[] = {"tls-bootstrap", "nodeadm-ssm", "sbc"};
    size_t i, ph;

    (void)state;
    if (!getenv("KP_REPO"))
        skip(); /* run outside ctest */
    for (i = 0; i < KP_ARRAY_SIZE(names); i++) {
        struct kp_profile_spec p = {.name = names[i], .version = "1"};
        char *text[KP_PROFILE_PHASES] = {NULL};
        char *err = NULL;

        for (ph = 0; ph < KP_PROFILE_PHASES; ph++) {
            size_t len = 0;

            text[ph] =
                read_script(names[i], kp_profile_phase_name((enum kp_profile_phase)ph), &len);
            if (text[ph])
                p.scripts[ph] = (struct kp_profile_text){text[ph], len};
        }
        if (kp_profile_validate(&p, &err) != 0)
            fail_msg("profiles/%s: %s", names[i], err ? err : "invalid");
        for (ph = 0; ph < KP_PROFILE_PHASES; ph++)
            kp_free(text[ph]);
    }
}

/* --- torture ----------------------------------------------------------------------------- */

static int torture_invalid(void)
{
    struct kp_profile_spec p = valid();
    char *err = NULL;
    int r;

    p.scripts[KP_PROFILE_LEAVE] = TXT("echo $KPSSH_VAR_x");
    r = kp_profile_validate(&p, &err);
    kp_free(err);
    return r == -EINVAL ? 0 : 1;
}

static int torture_marker(void)
{
    struct kp_profile_spec p = valid();
    char *m = NULL;
    int r;

    r = kp_profile_marker(&p, &m);
    kp_free(m);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_required_scripts),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_nul),
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_leave_contract),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_timeouts),
        cmocka_unit_test(test_signatures),
        cmocka_unit_test(test_marker_and_names),
        cmocka_unit_test(test_shipped_profiles),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_invalid),
        KP_TORTURE(torture_marker),
    };

    return kp_test_main("profile", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
