/* DESIGN: kp_safe_path(), the check before the shim trusts a file (base/path.h says why).
 *
 * realpath() resolves the name once; the walk then looks at the resolved name from the file up
 * to "/", cutting one component at a time, with lstat() so that a component which became a
 * symlink after resolving is seen as one (its mode, 0777, fails the writable test). The caller
 * uses the resolved name, so there is no second resolution an attacker could race. The walk
 * costs one lstat per component and allocates only the returned copy.
 * Threads: no shared state. */
#include "base/path.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/err.h"

int kp_safe_path(const char *path, uid_t owner, char **ret_path, char **ret_msg)
{
    char real[PATH_MAX], cur[PATH_MAX];
    struct stat st;
    char *slash, *copy = NULL;
    size_t len;

    if (path[0] != '/') {
        kp_msg_set(ret_msg, "%s: not an absolute path", path);
        return -EINVAL;
    }
    if (!realpath(path, real)) {
        int r = -errno;

        kp_msg_set(ret_msg, "%s: %s", path, kp_strerror(r));
        return r;
    }
    len = strlen(real);
    memcpy(cur, real, len + 1);
    for (;;) {
        if (lstat(cur, &st) < 0) {
            int r = -errno;

            kp_msg_set(ret_msg, "%s: %s", cur, kp_strerror(r));
            return r;
        }
        if (S_ISLNK(st.st_mode)) {
            kp_msg_set(ret_msg, "%s became a symlink while it was checked", cur);
            return -EPERM;
        }
        if (st.st_uid != owner) {
            kp_msg_set(ret_msg, "%s is owned by uid %u, not %u", cur, (unsigned)st.st_uid,
                       (unsigned)owner);
            return -EPERM;
        }
        if (st.st_mode & (S_IWGRP | S_IWOTH)) {
            kp_msg_set(ret_msg, "%s is writable by group or others (mode %04o)", cur,
                       (unsigned)(st.st_mode & 07777));
            return -EPERM;
        }
        if (strcmp(cur, "/") == 0)
            break;
        slash = strrchr(cur, '/');
        if (slash == cur)
            slash[1] = '\0'; /* the parent of "/usr" is "/" */
        else
            *slash = '\0';
    }
    if (ret_path) {
        copy = kp_strdup(real);
        if (!copy) {
            kp_msg_set(ret_msg, "out of memory");
            return -ENOMEM;
        }
        *ret_path = copy;
    }
    return 0;
}
