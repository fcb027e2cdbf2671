/* DESIGN: process spawning with captured, bounded output and a deadline.
 *
 * What: kp_spawn_run() forks, and the child only rearranges fds and signal state and execs.
 * Everything that may allocate or take a lock (PATH lookup, building argv and envp, opening
 * /dev/null) is done in the parent before fork: after fork in a threaded process only
 * async-signal-safe calls are allowed in the child, and malloc is not one.
 *
 * Why this way: exec credential plugins (and, later, the shim's scripts) are outside programs.
 * A plugin that hangs must not hang a worker, so there is a deadline after which the child is
 * SIGKILLed and reaped; one that writes without end must not grow our memory, so stdout has a
 * ceiling and stderr keeps only its tail (what is useful in an error message). An exec failure
 * in the child is reported through a close-on-exec pipe: if execve succeeds the pipe closes
 * unread, otherwise the child writes its errno there and the parent returns it.
 *
 * fds 0-2 of the child come from dup2 (which clears close-on-exec on the copy); every other fd
 * is marked close-on-exec with close_range(CLOSE_RANGE_CLOEXEC), falling back to a loop of
 * fcntl calls on kernels without it, so the error pipe stays open until the exec itself.
 *
 * kp_spawn_start() is the same birth without the capture: for the shim's script, whose output
 * must stream through live and whose end the shim waits for itself, with its own signal
 * handling. It returns only after the exec report, so "program not found" stays a return
 * value rather than an exit status 127 the caller would have to guess about. With
 * KP_SPAWN_NEW_PGROUP both parent and child call setpgid (the usual way to close the window in
 * which a signal to the group would miss a child that has not yet moved).
 *
 * Threads: no shared state; any thread may spawn. */
#include "base/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/str.h"
#include "base/time.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define KP_SPAWN_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
#define KP_SPAWN_CHUNK 4096
/* How often the parent checks for exit once the child closed its output. */
#define KP_SPAWN_REAP_POLL_MS 5

static bool is_executable_file(const char *p)
{
    struct stat st;

    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int kp_spawn_find_program(const char *name, const char *path, char **ret)
{
    const char *p, *end;
    char *cand = NULL, *dir = NULL;
    int r = -ENOENT;

    if (!*name)
        return -ENOENT;
    if (strchr(name, '/')) {
        cand = kp_strdup(name);
        if (!cand)
            return -ENOMEM;
        *ret = cand;
        return 0;
    }
    if (!path)
        path = getenv("PATH");
    if (!path)
        path = KP_SPAWN_DEFAULT_PATH;
    for (p = path; *p; p = *end ? end + 1 : end) {
        end = strchrnul(p, ':');
        /* Empty and relative entries would mean "the current directory": skipped. */
        if (end == p || *p != '/')
            continue;
        dir = kp_strndup(p, (size_t)(end - p));
        if (!dir) {
            r = -ENOMEM;
            goto out;
        }
        cand = kp_strjoin(dir, "/", name, (char *)NULL);
        dir = (kp_free(dir), NULL);
        if (!cand) {
            r = -ENOMEM;
            goto out;
        }
        if (is_executable_file(cand)) {
            *ret = cand;
            cand = NULL;
            r = 0;
            goto out;
        }
        cand = (kp_free(cand), NULL);
    }
out:
    kp_free(cand);
    kp_free(dir);
    return r;
}

/* True when entry ("NAME=value") sets a name that one of extra sets. */
static bool overridden(const char *entry, const char *const *extra)
{
    const char *eq = strchr(entry, '=');
    size_t n = eq ? (size_t)(eq - entry) : strlen(entry);

    for (; extra && *extra; extra++)
        if (strncmp(*extra, entry, n) == 0 && (*extra)[n] == '=')
            return true;
    return false;
}

/* The child's environment: pointers into environ and o->env, no copies. */
static int build_env(const struct kp_spawn_opts *o, char ***ret)
{
    size_t n = 0, i = 0, total;
    char **envp;
    char **e;

    if (!(o->flags & KP_SPAWN_CLEAR_ENV))
        for (e = environ; e && *e; e++)
            n++;
    for (const char *const *x = o->env; x && *x; x++)
        n++;
    if (kp_add_overflow(n, (size_t)1, &total))
        return -ENOMEM;
    envp = kp_reallocarray(NULL, total, sizeof(*envp));
    if (!envp)
        return -ENOMEM;
    if (!(o->flags & KP_SPAWN_CLEAR_ENV))
        for (e = environ; e && *e; e++)
            if (!overridden(*e, o->env))
                envp[i++] = *e;
    for (const char *const *x = o->env; x && *x; x++)
        envp[i++] = (char *)(uintptr_t)*x; /* execve's prototype lacks const */
    envp[i] = NULL;
    *ret = envp;
    return 0;
}

/* Moves fd above 2 so dup2 onto 0-2 in the child never collides with it. */
static int fd_above_stdio(int fd)
{
    int nfd;

    if (fd > 2)
        return fd;
    nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    return nfd < 0 ? -1 : nfd;
}

static int make_pipe(int p[2])
{
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    p[0] = fd_above_stdio(p[0]);
    p[1] = fd_above_stdio(p[1]);
    if (p[0] < 0 || p[1] < 0)
        return -EMFILE;
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* The child: async-signal-safe calls only. out_fd and err_fd -1 keep ours. Never returns. */
static KP_NORETURN void child_exec(const char *prog, char *const *argv, char *const *envp,
                                   int in_fd, int out_fd, int err_fd, int report_fd, int max_fd,
                                   bool new_pgroup)
{
    struct sigaction sa;
    sigset_t none;
    int e;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        (void)sigaction(s, &sa, NULL); /* fails harmlessly for SIGKILL, SIGSTOP */
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    if (new_pgroup && setpgid(0, 0) < 0)
        goto fail;
    if ((in_fd >= 0 && dup2(in_fd, 0) < 0) || (out_fd >= 0 && dup2(out_fd, 1) < 0) ||
        (err_fd >= 0 && dup2(err_fd, 2) < 0))
        goto fail;
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        for (int fd = 3; fd < max_fd; fd++)
            (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    execve(prog, argv, envp);
fail:
    e = errno;
    (void)!write(report_fd, &e, sizeof(e));
    _exit(127);
}

static void reap(pid_t pid, int *ret_wstatus)
{
    int st = 0;

    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    *ret_wstatus = st;
}

/* Reads what is available on *fd into b (tail mode keeps the last bytes). Closes *fd at EOF.
 * 0, or -KP_ELIMIT / -ENOMEM from the buffer. */
static int drain(int *fd, struct kp_buf *b, bool tail)
{
    char chunk[KP_SPAWN_CHUNK];
    ssize_t n;

    n = read(*fd, chunk, sizeof(chunk));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : -errno;
    if (n == 0) {
        close_fd(fd);
        return 0;
    }
    if (tail)
        return kp_buf_append_tail(b, chunk, (size_t)n);
    return kp_buf_append(b, chunk, (size_t)n);
}

/* What both entry points need before fork: the program's path, the environment and the
 * child's stdin (-1: ours). 0 or -errno; the outputs are the caller's to release either way. */
static int prepare(const struct kp_spawn_opts *o, char **ret_prog, char ***ret_envp, int *ret_in_fd)
{
    int fd, r;

    r = kp_spawn_find_program(o->argv[0], o->path, ret_prog);
    if (r < 0)
        return r;
    r = build_env(o, ret_envp);
    if (r < 0)
        return r;
    if (o->flags & KP_SPAWN_STDIN_FD) {
        /* A copy above 2, so the caller's fd is never closed or moved here. */
        fd = fcntl(o->stdin_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            return -errno;
        *ret_in_fd = fd;
    } else if (!(o->flags & KP_SPAWN_INHERIT_STDIN)) {
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        fd = fd_above_stdio(fd);
        if (fd < 0)
            return -EMFILE;
        *ret_in_fd = fd;
    }
    return 0;
}

static int max_fd_guess(void)
{
    long open_max = sysconf(_SC_OPEN_MAX);

    return open_max > 0 && open_max < 65536 ? (int)open_max : 65536;
}

/* Reads the exec report of a child that was just started: 0 once exec succeeded (the pipe
 * closed unwritten), or the child's -errno. */
static int read_exec_report(int fd)
{
    int exec_errno = 0;
    ssize_t n;

    do
        n = read(fd, &exec_errno, sizeof(exec_errno));
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(exec_errno) && exec_errno > 0 ? -exec_errno : 0;
}

int kp_spawn_run(const struct kp_spawn_opts *o, struct kp_spawn_result *ret)
{
    struct kp_spawn_result res = {.end = KP_SPAWN_EXITED};
    int out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, rep_p[2] = {-1, -1};
    int null_fd = -1, wstatus = 0, r, max_fd;
    char *prog = NULL;
    char **envp = NULL;
    pid_t pid = -1;
    uint64_t deadline;

    kp_buf_init(&res.out, o->max_stdout);
    kp_buf_init(&res.err, o->stderr_tail);
    if (!o->argv || !o->argv[0]) {
        r = -EINVAL;
        goto out;
    }
    if (o->flags & KP_SPAWN_INHERIT_OUTPUT) {
        r = -EINVAL;
        goto out;
    }
    r = prepare(o, &prog, &envp, &null_fd);
    if (r < 0)
        goto out;
    if ((r = make_pipe(out_p)) < 0 || (r = make_pipe(err_p)) < 0 || (r = make_pipe(rep_p)) < 0)
        goto out;
    max_fd = max_fd_guess();
    deadline =
        o->timeout_usec == KP_USEC_INFINITY ? KP_USEC_INFINITY : kp_mono_usec() + o->timeout_usec;

    pid = fork();
    if (pid < 0) {
        r = -errno;
        goto out;
    }
    if (pid == 0)
        child_exec(prog, (char *const *)(uintptr_t)o->argv, envp, null_fd, out_p[1], err_p[1],
                   rep_p[1], max_fd, (o->flags & KP_SPAWN_NEW_PGROUP) != 0);
    if (o->flags & KP_SPAWN_NEW_PGROUP)
        (void)setpgid(pid, pid); /* also in the parent: no window where kill(-pid) misses */
    close_fd(&out_p[1]);
    close_fd(&err_p[1]);
    close_fd(&rep_p[1]);

    while (out_p[0] >= 0 || err_p[0] >= 0) {
        struct pollfd pfd[2];
        nfds_t nfd = 0;
        uint64_t now = kp_mono_usec();
        int timeout_ms = -1, pr;

        if (deadline != KP_USEC_INFINITY) {
            if (now >= deadline) {
                res.end = KP_SPAWN_TIMED_OUT;
                break;
            }
            timeout_ms = (int)KP_MIN((deadline - now + 999) / 1000, (uint64_t)INT32_MAX);
        }
        if (out_p[0] >= 0)
            pfd[nfd++] = (struct pollfd){.fd = out_p[0], .events = POLLIN};
        if (err_p[0] >= 0)
            pfd[nfd++] = (struct pollfd){.fd = err_p[0], .events = POLLIN};
        pr = poll(pfd, nfd, timeout_ms);
        if (pr < 0 && errno != EINTR) {
            r = -errno;
            goto out;
        }
        for (nfds_t i = 0; pr > 0 && i < nfd; i++) {
            if (!pfd[i].revents)
                continue;
            if (pfd[i].fd == out_p[0]) {
                r = drain(&out_p[0], &res.out, false);
                if (r == -KP_ELIMIT) {
                    res.end = KP_SPAWN_OUTPUT_LIMIT;
                    break;
                }
            } else {
                r = drain(&err_p[0], &res.err, true);
            }
            if (r < 0)
                goto out;
        }
        if (res.end != KP_SPAWN_EXITED)
            break;
    }
    if (res.end == KP_SPAWN_EXITED) {
        /* Output closed; the child may still linger. Poll for its exit up to the deadline. */
        for (;;) {
            pid_t w = waitpid(pid, &wstatus, WNOHANG);

            if (w == pid) {
                pid = -1;
                break;
            }
            if (w < 0 && errno != EINTR) {
                r = -errno;
                goto out;
            }
            if (deadline != KP_USEC_INFINITY && kp_mono_usec() >= deadline) {
                res.end = KP_SPAWN_TIMED_OUT;
                break;
            }
            (void)poll(NULL, 0, KP_SPAWN_REAP_POLL_MS);
        }
    }
    if (pid > 0) {
        (void)kill(pid, SIGKILL);
        reap(pid, &wstatus);
        pid = -1;
    }
    r = read_exec_report(rep_p[0]);
    if (r < 0)
        goto out;
    if (res.end == KP_SPAWN_EXITED) {
        if (WIFEXITED(wstatus)) {
            res.status = WEXITSTATUS(wstatus);
        } else {
            res.end = KP_SPAWN_SIGNALED;
            res.status = WTERMSIG(wstatus);
        }
    }
    if (res.end == KP_SPAWN_OUTPUT_LIMIT)
        kp_buf_wipe(&res.out);
    *ret = res;
    res = (struct kp_spawn_result){.end = KP_SPAWN_EXITED}; /* the caller owns the buffers now */
    r = 0;
out:
    if (pid > 0) {
        (void)kill(pid, SIGKILL);
        reap(pid, &wstatus);
    }
    close_fd(&null_fd);
    close_fd(&out_p[0]);
    close_fd(&out_p[1]);
    close_fd(&err_p[0]);
    close_fd(&err_p[1]);
    close_fd(&rep_p[0]);
    close_fd(&rep_p[1]);
    kp_buf_wipe(&res.out);
    kp_buf_done(&res.err);
    kp_free(envp);
    kp_free(prog);
    return r;
}

int kp_spawn_start(const struct kp_spawn_opts *o, pid_t *ret_pid)
{
    int in_fd = -1, rep_p[2] = {-1, -1}, wstatus = 0, r;
    char *prog = NULL;
    char **envp = NULL;
    pid_t pid = -1;

    if (!o->argv || !o->argv[0] || !(o->flags & KP_SPAWN_INHERIT_OUTPUT)) {
        r = -EINVAL;
        goto out;
    }
    r = prepare(o, &prog, &envp, &in_fd);
    if (r < 0)
        goto out;
    if ((r = make_pipe(rep_p)) < 0)
        goto out;
    pid = fork();
    if (pid < 0) {
        r = -errno;
        goto out;
    }
    if (pid == 0)
        child_exec(prog, (char *const *)(uintptr_t)o->argv, envp, in_fd, -1, -1, rep_p[1],
                   max_fd_guess(), (o->flags & KP_SPAWN_NEW_PGROUP) != 0);
    if (o->flags & KP_SPAWN_NEW_PGROUP)
        (void)setpgid(pid, pid);
    close_fd(&rep_p[1]);
    r = read_exec_report(rep_p[0]);
    if (r < 0)
        goto out; /* the child has _exit'ed or will: reaped below */
    *ret_pid = pid;
    pid = -1; /* the caller reaps it now */
out:
    if (pid > 0)
        reap(pid, &wstatus);
    close_fd(&in_fd);
    close_fd(&rep_p[0]);
    close_fd(&rep_p[1]);
    kp_free(envp);
    kp_free(prog);
    return r;
}

void kp_spawn_result_done(struct kp_spawn_result *r)
{
    if (!r)
        return;
    kp_buf_wipe(&r->out);
    kp_buf_wipe(&r->err);
}
