/* base/path.h: deciding whether a path may be trusted to run or to read a trust root from.
 *
 * STYLE.md rule 11: the shim runs programs as root and reads the allowed-signers file that
 * decides what runs. Either is only as trustworthy as the least protected directory on its way
 * from "/": whoever can write any of them can swap the file. So every component of the resolved
 * path, the file included, must belong to the expected owner (root in production) and must not
 * be writable by group or others. No exception for sticky directories such as /tmp: a sticky bit
 * stops others from replacing *our* entries but lets them create names we might resolve, so it
 * is refused, as OpenSSH's safe_path() does. Any thread; reads the file system, logs nothing. */
#ifndef KP_BASE_PATH_H
#define KP_BASE_PATH_H

#include <sys/types.h>

#include "base/macro.h"

/* Resolves path (an absolute path; symlinks and ".." followed) and checks the result and each
 * of its parent directories up to "/": owned by owner, not group- or world-writable. A symlink
 * seen at check time (a race with a change after resolving) counts as unsafe.
 *
 * Returns 0 and, when ret_path is not NULL, the resolved path as a new string (kp_free): callers
 * use *that* path from then on, so the file they open or run is the one that was checked.
 * Returns -EINVAL (not absolute), -ENOENT, -EACCES, -ENOTDIR, -ELOOP, -ENAMETOOLONG (from
 * resolving), -EPERM (a component is unsafe) or -ENOMEM. On failure *ret_msg (base/err.h)
 * says which component and why. */
int kp_safe_path(const char *path, uid_t owner, char **ret_path, char **ret_msg) KP_WUR
    KP_NONNULL(1);

#endif
