/* tests/lib/kp-test.h: what every cmocka unit test binary shares.
 *
 * A test file lists its cmocka tests and, optionally, torture cases, and hands both to
 * kp_test_main(). A torture case is a whole scenario that returns 0 on success and a negative
 * error when an allocation failed; it must release everything it allocated in either case and
 * must not use cmocka assertions (they would jump out and leak). Run normally, each case runs
 * once and must return 0 with no allocation left live. Run with --torture, each case is repeated
 * with the 1st, 2nd, 3rd ... allocation failing until a run makes no more allocations than the
 * failure point: every run must end in 0 or a negative error, never crash, and leave the live
 * allocation count where it found it. */
#ifndef KP_TESTS_KP_TEST_H
#define KP_TESTS_KP_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/macro.h"

struct kp_torture_case {
    const char *name;
    int (*fn)(void);
};
#define KP_TORTURE(f)                                                                              \
    {                                                                                              \
#f, f                                                                                      \
    }

/* Runs the tests (or, with --torture, the torture sweep). Returns the process exit code. */
int kp_test_main(const char *group, const struct CMUnitTest *tests, size_t ntests,
                 const struct kp_torture_case *cases, size_t ncases, int argc, char **argv);

struct kp_entry;
/* A projection's decoder (kp_node_decode, kp_pod_decode, ...). */
typedef int (*kp_test_decode_fn)(const char *p, size_t n, struct kp_entry **ret);

/* Formats a JSON object (at most 8 KiB) and decodes it with fn into a new entry (the caller
 * unrefs it); with squote, every ' in the formatted text stands for " (test JSON reads better
 * that way). cmocka-fails, printing the text, when it does not decode. */
struct kp_entry *kp_test_decode(kp_test_decode_fn fn, bool squote, const char *fmt, ...)
    KP_PRINTF(3, 4);
struct kp_entry *kp_test_vdecode(kp_test_decode_fn fn, bool squote, const char *fmt, va_list ap)
    KP_PRINTF(3, 0);

/* The directory of checked-in test data (tests/data), from KP_TEST_DATA_DIR set by CMake. */
const char *kp_test_data_dir(void);

/* Reads a whole file under KP_TEST_DATA_DIR into a new NUL-terminated buffer (cmocka-fails on
 * error). The caller frees it with kp_free(). */
char *kp_test_read_data(const char *relpath, size_t *ret_len);

/* Sends the log to /dev/null (lines a test expects but does not read: a pipe nobody reads
 * would block its writers once full) and returns the fd for kp_test_log_restore(), which puts
 * the log back on its format's own fd and closes it. cmocka-fails when /dev/null won't open. */
int kp_test_log_quiet(void);
void kp_test_log_restore(int fd);

#endif
