/* base/spawn.h: run a program and capture its output, the one way kpssh starts processes.
 *
 * STYLE.md rule 10: fork only to exec. The child resets every signal disposition and the
 * signal mask, reads stdin from /dev/null (unless KP_SPAWN_INHERIT_STDIN), writes stdout and
 * stderr into pipes, has every fd from 3 up closed at exec, and leaves with _exit if exec
 * fails. Program lookup through PATH happens in the parent, so the child only calls execve
 * with an absolute (or explicitly relative) path. Every fd made here is close-on-exec in the
 * parent, so a thread spawning concurrently never leaks one into another child.
 *
 * Any thread may call kp_spawn_run (it blocks that thread until the child ends or the deadline
 * passes). The caller must not reap children with waitpid(-1, ...) elsewhere. */
#ifndef KP_BASE_SPAWN_H
#define KP_BASE_SPAWN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/macro.h"

enum kp_spawn_flags {
    KP_SPAWN_INHERIT_STDIN = 1 << 0,  /* the child reads our stdin (interactive plugins) */
    KP_SPAWN_CLEAR_ENV = 1 << 1,      /* start from an empty environment, not ours */
    KP_SPAWN_STDIN_FD = 1 << 2,       /* the child reads stdin_fd (a file: ssh-keygen's message) */
    KP_SPAWN_NEW_PGROUP = 1 << 3,     /* the child leads a new process group (pgid = its pid), so
                                      * kill(-pid, sig) reaches everything it starts */
    KP_SPAWN_INHERIT_OUTPUT = 1 << 4, /* the child writes to our stdout and stderr; nothing is
                                       * captured. kp_spawn_start() only. */
};

/* How the child ended. */
enum kp_spawn_end {
    KP_SPAWN_EXITED = 0,   /* status is the exit code */
    KP_SPAWN_SIGNALED,     /* status is the signal number */
    KP_SPAWN_TIMED_OUT,    /* killed with SIGKILL at the deadline; status is 0 */
    KP_SPAWN_OUTPUT_LIMIT, /* killed with SIGKILL when stdout passed max_stdout; status 0 */
};

struct kp_spawn_opts {
    /* argv[0] is a path containing '/' (used as given) or a name looked up in path. */
    const char *const *argv;
    /* "NAME=value" entries added to the environment, replacing inherited ones of the same name;
     * NULL-terminated; NULL for none. */
    const char *const *env;
    /* The search path for argv[0]; NULL uses $PATH, or "/usr/local/bin:/usr/bin:/bin" when
     * unset. Empty and relative entries are skipped (never run a program from the cwd). */
    const char *path;
    enum kp_spawn_flags flags;
    /* With KP_SPAWN_STDIN_FD: the fd the child gets as stdin (the caller keeps it; the child
     * reads a duplicate, so its file offset is shared). Ignored otherwise, so a zeroed opts
     * never hands our own stdin over by accident. */
    int stdin_fd;
    uint64_t timeout_usec; /* from the start; KP_USEC_INFINITY for none */
    size_t max_stdout;     /* ceiling for captured stdout */
    size_t stderr_tail;    /* the last this many bytes of stderr are kept */
};

struct kp_spawn_result {
    enum kp_spawn_end end;
    int status;
    struct kp_buf out; /* stdout; empty when end is KP_SPAWN_OUTPUT_LIMIT */
    struct kp_buf err; /* tail of stderr; err.truncated tells whether older bytes were dropped */
};

/* Runs the program and waits for it. Not with KP_SPAWN_INHERIT_OUTPUT (-EINVAL). Returns 0 when the child ran (whatever its exit status
 * or end: see ret->end) and fills *ret, which the caller releases with
 * kp_spawn_result_done(). Returns -ENOENT (not found in path), -EACCES, -ENOEXEC or another
 * -errno from execve (the child is reaped), -EINVAL (empty argv), -ENOMEM, or -errno from
 * pipe/fork; *ret is untouched then. */
int kp_spawn_run(const struct kp_spawn_opts *o, struct kp_spawn_result *ret) KP_WUR
    KP_NONNULL(1, 2);

/* Starts the program and returns without waiting, for a child whose output streams straight
 * through (o->flags must include KP_SPAWN_INHERIT_OUTPUT, else -EINVAL; timeout_usec,
 * max_stdout and stderr_tail are not used). Returns once the child has exec'd: 0 and its pid in
 * *ret_pid, and the caller reaps it with waitpid(); or -errno from lookup, fork or execve (the
 * child is reaped). Single-threaded callers with their own signal handling (the shim) use it. */
int kp_spawn_start(const struct kp_spawn_opts *o, pid_t *ret_pid) KP_WUR KP_NONNULL(1, 2);

/* Releases the captured output (stdout is wiped: it may hold credentials). */
void kp_spawn_result_done(struct kp_spawn_result *r);

/* Looks name up as kp_spawn_run does: a name with '/' is returned as is, else the first
 * regular executable file path/name. 0 and a new string in *ret, -ENOENT or -ENOMEM. */
int kp_spawn_find_program(const char *name, const char *path, char **ret) KP_WUR KP_NONNULL(1, 3);

#endif
