/* tests/unit/test-probe.c: the probe command and its output parser (provider/ssh/probe.h): the
 * reference's field rules (three fields at least, a fourth "active" means kubelet runs), the
 * bounds (too long, too many fields, overlong field, implausible numbers, NUL), and the arch
 * normalisation. The command itself runs for real in tests/integration/test-hostctl.c. */
#include "kp-test.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "provider/ssh/probe.h"

static int parse(const char *s, struct kp_probe_result *res, char **why)
{
    return kp_probe_parse(s, strlen(s), res, why);
}

static void test_parse_ok(void **state)
{
    struct kp_probe_result r;
    char *why = NULL;

    (void)state;
    assert_int_equal(parse("2\n4194304\nx86_64\ninactive\n", &r, &why), 0);
    assert_int_equal(r.cpus, 2);
    assert_int_equal(r.mem_bytes, 4194304ULL * 1024);
    assert_string_equal(r.machine, "x86_64");
    assert_false(r.kubelet_active);

    assert_int_equal(parse("64 263856512 aarch64 active", &r, NULL), 0);
    assert_int_equal(r.cpus, 64);
    assert_string_equal(r.machine, "aarch64");
    assert_true(r.kubelet_active);

    /* No systemctl: three fields, kubelet not active. CRLF and tabs are whitespace. */
    assert_int_equal(parse("\r\n1\t1024\r\narmv7l\r\n", &r, NULL), 0);
    assert_int_equal(r.cpus, 1);
    assert_int_equal(r.mem_bytes, 1024ULL * 1024);
    assert_false(r.kubelet_active);

    /* Anything but exactly "active" is not active. */
    assert_int_equal(parse("1 1024 x86_64 activating", &r, NULL), 0);
    assert_false(r.kubelet_active);
    assert_int_equal(parse("1 1024 x86_64 Active", &r, NULL), 0);
    assert_false(r.kubelet_active);
}

static void test_parse_refused(void **state)
{
    static const char *const bad[] = {
        "",
        "2",
        "2 4096",
        "0 4096 x86_64",                 /* no CPUs */
        "2 0 x86_64",                    /* no memory */
        "-1 4096 x86_64",                /* sign */
        "2.5 4096 x86_64",               /* not a count */
        "65537 4096 x86_64",             /* implausible */
        "2 99999999999999999999 x86_64", /* overflows */
        "2 1099511627777 x86_64",        /* above 1 PiB */
        "2 4096 x86$64",                 /* machine charset */
        "2 4096 x86_64 active extra",    /* five fields */
        "Welcome! 2 4096 x86_64",        /* a banner on stdout */
        "2 4096kB x86_64",
    };
    struct kp_probe_result r;

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        char *why = NULL;

        memset(&r, 0x5a, sizeof(r));
        assert_int_equal(parse(bad[i], &r, &why), -KP_EPARSE);
        assert_non_null(why);                 /* an owned message (base/err.h) */
        assert_int_equal(r.cpus, 0x5a5a5a5a); /* untouched on failure */
        kp_free(why);
    }
}

static void test_parse_bounds(void **state)
{
    char big[KP_MAX_PROBE_OUTPUT + 1];
    char field[KP_PROBE_FIELD_MAX + 16];
    char nul[] = "2 4096 x86\0_64";
    struct kp_probe_result r;
    char *why = NULL;

    (void)state;
    memset(big, ' ', sizeof(big));
    memcpy(big, "2 4096 x86_64", 13);
    assert_int_equal(kp_probe_parse(big, sizeof(big), &r, &why), -KP_ELIMIT);
    assert_string_equal(why, "probe output is too long");
    assert_int_equal(kp_probe_parse(big, sizeof(big) - 1, &r, &why), 0); /* at the ceiling */

    memset(field, 'a', sizeof(field));
    memcpy(field, "2 4096 ", 7);
    assert_int_equal(kp_probe_parse(field, 7 + KP_PROBE_FIELD_MAX - 1, &r, NULL), 0);
    assert_int_equal(kp_probe_parse(field, 7 + KP_PROBE_FIELD_MAX, &r, NULL), -KP_EPARSE);

    assert_int_equal(kp_probe_parse(nul, sizeof(nul) - 1, &r, &why), -KP_EPARSE);
    assert_string_equal(why, "probe output holds a NUL byte"); /* replaced the first message */
    /* Not NUL-terminated: only n bytes are read. */
    assert_int_equal(kp_probe_parse("2 4096 x86_64 activeXXXX", 20, &r, NULL), 0);
    assert_true(r.kubelet_active);
    assert_int_equal(kp_probe_parse(NULL, 0, &r, &why), -KP_EPARSE);
    kp_free(why);
}

static void test_arch_and_command(void **state)
{
    const char *cmd = kp_probe_command();

    (void)state;
    assert_string_equal(kp_probe_arch("x86_64"), "amd64");
    assert_string_equal(kp_probe_arch("amd64"), "amd64");
    assert_string_equal(kp_probe_arch("aarch64"), "arm64");
    assert_string_equal(kp_probe_arch("arm64"), "arm64");
    assert_string_equal(kp_probe_arch("riscv64"), "riscv64");
    assert_non_null(strstr(cmd, "nproc"));
    assert_non_null(strstr(cmd, "/proc/meminfo"));
    assert_non_null(strstr(cmd, "uname -m"));
    assert_non_null(strstr(cmd, "systemctl is-active kubelet"));
    assert_true(strlen(cmd) < 4096); /* KP_MAX_PROBE_COMMAND */
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_parse_refused),
        cmocka_unit_test(test_parse_bounds),
        cmocka_unit_test(test_arch_and_command),
    };

    return kp_test_main("probe", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
