/* DESIGN: unit tests for base/path.c (kp_safe_path).
 *
 * Success needs a chain of root-owned directories, so those cases build their files in a 0700
 * directory under the test's working directory (the build tree, root-owned when root builds, as
 * CI does) and are skipped, saying so, when that chain is not safe or we are not root. The
 * failure cases need no privilege: a world-writable directory, a group-writable file, a file of
 * another owner (chown as root; the owner parameter otherwise), the sticky /tmp, a symlink
 * whose target is unsafe, and names that do not resolve. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/path.h"
#include "base/str.h"
#include "kp-test.h"

static void check(const char *path, uid_t owner, int want, const char *msg_part)
{
    char *resolved = NULL, *msg = NULL;
    int r = kp_safe_path(path, owner, &resolved, &msg);

    if (r != want)
        fail_msg("kp_safe_path(%s, %u) = %d (%s), want %d", path, (unsigned)owner, r,
                 msg ? msg : "", want);
    if (want == 0) {
        assert_non_null(resolved);
        assert_null(msg);
    } else {
        assert_null(resolved);
        assert_non_null(msg);
        if (msg_part && !strstr(msg, msg_part))
            fail_msg("message '%s' does not mention '%s'", msg, msg_part);
    }
    kp_free(resolved);
    kp_free(msg);
}

static void test_system_paths(void **state)
{
    char *resolved = NULL;

    (void)state;
    check("/", 0, 0, NULL);
    /* Debian's /bin is a symlink to usr/bin: the resolved name is what callers use. */
    assert_int_equal(kp_safe_path("/bin/sh", 0, &resolved, NULL), 0);
    assert_true(kp_startswith(resolved, "/usr/bin/") || kp_startswith(resolved, "/bin/"));
    kp_free(resolved);
    assert_int_equal(kp_safe_path("/usr/bin/env", 0, NULL, NULL), 0);
    check("/usr", 4242, -EPERM, "owned by uid 0, not 4242");
    check("/tmp", 0, -EPERM, "/tmp is writable by group or others");
    check("/tmp/.", 0, -EPERM, "/tmp");
    check("relative/path", 0, -EINVAL, "not an absolute path");
    check("", 0, -EINVAL, NULL);
    check("/kp-no-such-dir/file", 0, -ENOENT, "/kp-no-such-dir/file");
    check("/etc/passwd/x", 0, -ENOTDIR, NULL);
}

static void test_own_tree(void **state)
{
    char cwd[PATH_MAX], dir[PATH_MAX + 32], file[PATH_MAX + 64], sub[PATH_MAX + 64],
        link[PATH_MAX + 64], expect[PATH_MAX + 128];
    char *resolved = NULL;
    FILE *f;

    (void)state;
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    if (geteuid() != 0 || kp_safe_path(cwd, 0, NULL, NULL) < 0) {
        print_message("skipped: needs root and a root-owned, not group/world-writable %s\n", cwd);
        skip();
    }
    assert_true(snprintf(dir, sizeof(dir), "%s/path-test.XXXXXX", cwd) < (int)sizeof(dir));
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/file", dir);
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    snprintf(link, sizeof(link), "%s/link", dir);
    f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(file, 0644), 0);

    check(dir, 0, 0, NULL);
    check(file, 0, 0, NULL);
    assert_int_equal(kp_safe_path(file, 0, &resolved, NULL), 0);
    assert_string_equal(resolved, file);
    kp_free(resolved);
    check(file, 1234, -EPERM, "owned by uid 0, not 1234");

    assert_int_equal(chmod(file, 0664), 0);
    check(file, 0, -EPERM, "is writable by group or others (mode 0664)");
    assert_int_equal(chmod(file, 0646), 0);
    check(file, 0, -EPERM, "writable by group or others");
    assert_int_equal(chmod(file, 0600), 0);

    /* A component above the file is what makes it unsafe. */
    assert_int_equal(mkdir(sub, 0777), 0);
    assert_int_equal(chmod(sub, 0777), 0);
    snprintf(expect, sizeof(expect), "%s/f", sub);
    f = fopen(expect, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(expect, 0600), 0);
    check(expect, 0, -EPERM, "/sub is writable by group or others (mode 0777)");
    assert_int_equal(chmod(sub, 01777), 0); /* sticky like /tmp: still refused */
    check(expect, 0, -EPERM, "/sub is writable");
    assert_int_equal(chmod(sub, 0755), 0);
    check(expect, 0, 0, NULL);

    /* Another owner, by chown. */
    assert_int_equal(chown(expect, 1, 1), 0);
    check(expect, 0, -EPERM, "owned by uid 1, not 0");
    check(expect, 1, -EPERM, "owned by uid 0, not 1"); /* its directory is root's */

    /* A symlink is followed; the target's chain is what counts. */
    assert_int_equal(symlink(file, link), 0);
    assert_int_equal(kp_safe_path(link, 0, &resolved, NULL), 0);
    assert_string_equal(resolved, file);
    kp_free(resolved);
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink("/tmp", link), 0);
    check(link, 0, -EPERM, "/tmp is writable");

    assert_int_equal(unlink(link), 0);
    assert_int_equal(unlink(expect), 0);
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_system_paths),
        cmocka_unit_test(test_own_tree),
    };

    return kp_test_main("path", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
