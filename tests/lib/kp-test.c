/* DESIGN: shared unit-test runner with an allocation-failure sweep (see kp-test.h). */
#include "kp-test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/log.h"

/* A scenario that still allocates after this many failure points is surely looping. */
#define KP_TORTURE_MAX_STEPS 200000

static int kp_run_case_once(const struct kp_torture_case *c)
{
    int64_t live = kp_alloc_live();
    int r = c->fn();

    if (r != 0) {
        fprintf(stderr, "[  FAILED  ] torture case %s returned %d without injected failure\n",
                c->name, r);
        return 1;
    }
    if (kp_alloc_live() != live) {
        fprintf(stderr, "[  FAILED  ] torture case %s leaked %lld allocations\n", c->name,
                (long long)(kp_alloc_live() - live));
        return 1;
    }
    return 0;
}

static int kp_sweep_case(const struct kp_torture_case *c)
{
    uint64_t n;

    for (n = 1; n <= KP_TORTURE_MAX_STEPS; n++) {
        int64_t live = kp_alloc_live();
        int r, fired;

        kp_alloc_fail_at(n);
        r = c->fn();
        fired = kp_alloc_failed();
        kp_alloc_fail_at(0);
        if (kp_alloc_live() != live) {
            fprintf(stderr, "[  FAILED  ] %s: allocation %llu failing leaked %lld allocations\n",
                    c->name, (unsigned long long)n, (long long)(kp_alloc_live() - live));
            return 1;
        }
        if (!fired) {
            if (r != 0) {
                fprintf(stderr, "[  FAILED  ] %s: returned %d with no failure injected\n", c->name,
                        r);
                return 1;
            }
            printf("[       OK ] %s: %llu failure points survived\n", c->name,
                   (unsigned long long)(n - 1));
            return 0;
        }
        if (r > 0) {
            fprintf(stderr, "[  FAILED  ] %s: allocation %llu failing returned %d\n", c->name,
                    (unsigned long long)n, r);
            return 1;
        }
    }
    fprintf(stderr, "[  FAILED  ] %s: still allocating after %d failure points\n", c->name,
            KP_TORTURE_MAX_STEPS);
    return 1;
}

int kp_test_main(const char *group, const struct CMUnitTest *tests, size_t ntests,
                 const struct kp_torture_case *cases, size_t ncases, int argc, char **argv)
{
    int failed = 0;
    size_t i;

    if (argc > 1 && strcmp(argv[1], "--torture") == 0) {
        printf("[==========] torture sweep of %zu case(s) in %s\n", ncases, group);
        for (i = 0; i < ncases; i++)
            failed += kp_sweep_case(&cases[i]);
        printf("%zu passed, %d failed\n", ncases - (size_t)failed, failed);
        return failed ? 1 : 0;
    }

    if (ntests > 0)
        failed = _cmocka_run_group_tests(group, tests, ntests, NULL, NULL);
    for (i = 0; i < ncases; i++)
        failed += kp_run_case_once(&cases[i]);
    return failed ? 1 : 0;
}

const char *kp_test_data_dir(void)
{
    const char *d = getenv("KP_TEST_DATA_DIR");

    return d ? d : "tests/data";
}

char *kp_test_read_data(const char *relpath, size_t *ret_len)
{
    struct kp_buf path = KP_BUF_INIT(4096);
    struct kp_buf data = KP_BUF_INIT(64u << 20);
    char chunk[4096];
    char *out;
    int fd;

    assert_int_equal(kp_buf_printf(&path, "%s/%s", kp_test_data_dir(), relpath), 0);
    fd = open(kp_buf_str(&path), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("cannot open %s: %s", kp_buf_str(&path), strerror(errno));
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n < 0 && errno == EINTR)
            continue;
        assert_true(n >= 0);
        if (n == 0)
            break;
        assert_int_equal(kp_buf_append(&data, chunk, (size_t)n), 0);
    }
    close(fd);
    kp_buf_done(&path);
    out = kp_buf_steal(&data, ret_len);
    assert_non_null(out);
    return out;
}

int kp_test_log_quiet(void)
{
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

    assert_true(fd >= 0);
    kp_log_set_fd(fd);
    return fd;
}

void kp_test_log_restore(int fd)
{
    kp_log_set_fd(-1);
    if (fd >= 0)
        (void)close(fd);
}

struct kp_entry *kp_test_vdecode(kp_test_decode_fn fn, bool squote, const char *fmt, va_list ap)
{
    char buf[8192];
    struct kp_entry *e = NULL;
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);

    assert_true(n > 0 && (size_t)n < sizeof(buf));
    for (char *q = buf; squote && *q; q++)
        if (*q == '\'')
            *q = '"';
    if (fn(buf, (size_t)n, &e) != 0)
        fail_msg("does not decode: %s", buf);
    return e;
}

struct kp_entry *kp_test_decode(kp_test_decode_fn fn, bool squote, const char *fmt, ...)
{
    struct kp_entry *e;
    va_list ap;

    va_start(ap, fmt);
    e = kp_test_vdecode(fn, squote, fmt, ap);
    va_end(ap);
    return e;
}
