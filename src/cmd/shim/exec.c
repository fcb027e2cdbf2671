/* DESIGN: running what the shim runs (STYLE.md rules 10 and 11).
 *
 * Programs: every program (ssh-keygen, bash, nproc, uname, systemctl, sudo) is looked up on the
 * fixed KP_SHIM_PATH, never $PATH, then checked with kp_safe_path() and run by its resolved
 * path, so what runs is what was checked. Nothing is run through a shell string.
 *
 * The script: `bash <file>` through kp_spawn_start(), with an environment built from nothing:
 * PATH, HOME and the checked KPSSH_* parameters. So BASH_ENV, ENV, SHELLOPTS, BASHOPTS, PS4,
 * IFS, GLOBIGNORE, LD_PRELOAD, LD_LIBRARY_PATH and whatever else sudo or sshd left behind never
 * reach it. It gets stdin from /dev/null and our stdout and stderr, which are the SSH channel:
 * the controller reads them live.
 *
 * Ending it when the controller gives up: the script leads its own process group. sshd does
 * not signal a command without a tty when the client goes away; it closes its end of the
 * channel. So while waiting, the shim polls its stdout and stderr for POLLHUP/POLLERR (asking
 * for no events, so only a hang-up wakes it) as well as taking SIGHUP, SIGTERM and SIGINT. On
 * either it sends the signal (SIGHUP for a hang-up) to the whole group, and SIGKILL after
 * KP_SHIM_KILL_GRACE_MS if the script is still there; after the script is reaped one more
 * SIGKILL to the group ends anything it left in the background. Signals are blocked except
 * inside ppoll(), and SIGCHLD has a no-op handler so the child's exit interrupts the wait: no
 * window where a signal arrives between a check and the sleep. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/path.h"
#include "base/spawn.h"
#include "base/time.h"
#include "cmd/shim/envelope.h"
#include "cmd/shim/shim.h"

/* How long a stopped script gets between the forwarded signal and SIGKILL. */
#define KP_SHIM_KILL_GRACE_MS 5000

volatile sig_atomic_t kp_shim_stop_signal;

const char *const kp_shim_tool_env[] = {"PATH=" KP_SHIM_PATH, "LC_ALL=C", "HOME=/", NULL};

static void on_stop_signal(int sig)
{
    kp_shim_stop_signal = sig;
}

static void on_child(int sig)
{
    (void)sig; /* only here so SIGCHLD interrupts ppoll */
}

int kp_shim_catch_stop_signals(void)
{
    static const int sigs[] = {SIGHUP, SIGTERM, SIGINT};
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < KP_ARRAY_SIZE(sigs); i++)
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return -errno;
    return 0;
}

int kp_shim_find_program(const char *name, char **ret_path, char **ret_msg)
{
    char *found = NULL;
    int r;

    r = kp_spawn_find_program(name, KP_SHIM_PATH, &found);
    if (r < 0) {
        kp_msg_set(ret_msg, "%s: %s on %s", name, r == -ENOENT ? "not found" : kp_strerror(r),
                   KP_SHIM_PATH);
        return r;
    }
    r = kp_safe_path(found, 0, ret_path, ret_msg);
    kp_free(found);
    return r;
}

/* The script's environment: PATH, HOME, then the parameters. Pointers only; *ret is kp_free'd. */
static int script_env(const struct kp_shim_params *params, const char ***ret)
{
    const char **env;
    size_t n = 0, total;

    if (kp_add_overflow(params->n, (size_t)3, &total))
        return -ENOMEM;
    env = kp_calloc(total, sizeof(*env));
    if (!env)
        return -ENOMEM;
    env[n++] = "PATH=" KP_SHIM_PATH;
    /* HOME: root's, as the scripts run as root; the --no-sudo test mode gets "/". */
    env[n++] = geteuid() == 0 ? "HOME=/root" : "HOME=/";
    for (size_t i = 0; i < params->n; i++)
        env[n++] = params->env[i];
    env[n] = NULL;
    *ret = env;
    return 0;
}

/* Waits for pid, ending its process group when told to stop. *ret_wstatus: how it ended;
 * *ret_stopped: the signal we stopped it with, or 0. 0 or -errno. */
static int wait_script(pid_t pid, const sigset_t *waitmask, int *ret_wstatus, int *ret_stopped)
{
    struct pollfd pfd[2] = {{.fd = STDOUT_FILENO, .events = 0}, {.fd = STDERR_FILENO, .events = 0}};
    uint64_t kill_at = KP_USEC_INFINITY;
    int stopped = 0, wstatus = 0;

    for (;;) {
        struct timespec ts, *tmo = NULL;
        pid_t w = waitpid(pid, &wstatus, WNOHANG);
        int sig = 0;

        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -errno;
        if (kp_shim_stop_signal)
            sig = kp_shim_stop_signal;
        for (size_t i = 0; i < KP_ARRAY_SIZE(pfd); i++)
            if (pfd[i].fd >= 0 && (pfd[i].revents & (POLLHUP | POLLERR)))
                sig = sig ? sig : SIGHUP;
        if (sig && !stopped) {
            stopped = sig;
            kp_shim_log("stopping the script (%s): signalling its process group",
                        sig == SIGHUP ? "hang-up: the controller went away" : "signal");
            (void)kill(-pid, sig);
            kill_at = kp_mono_usec() + KP_SHIM_KILL_GRACE_MS * KP_USEC_PER_MSEC;
        }
        if (stopped) {
            uint64_t now = kp_mono_usec();

            if (now >= kill_at) {
                (void)kill(-pid, SIGKILL);
                kill_at = now + KP_SHIM_KILL_GRACE_MS * KP_USEC_PER_MSEC;
            }
            ts.tv_sec = (time_t)((kill_at - now) / KP_USEC_PER_SEC);
            ts.tv_nsec = (long)((kill_at - now) % KP_USEC_PER_SEC * 1000);
            tmo = &ts;
        }
        /* A fd that hung up (or is closed: POLLNVAL) is not watched again, or ppoll would
         * return at once forever. */
        for (size_t i = 0; i < KP_ARRAY_SIZE(pfd); i++) {
            if (pfd[i].revents & (POLLHUP | POLLERR | POLLNVAL))
                pfd[i].fd = -1;
            pfd[i].revents = 0;
        }
        if (ppoll(pfd, KP_ARRAY_SIZE(pfd), tmo, waitmask) < 0 && errno != EINTR)
            return -errno;
    }
    if (stopped)
        (void)kill(-pid, SIGKILL); /* whatever the script left running in its group */
    *ret_wstatus = wstatus;
    *ret_stopped = stopped;
    return 0;
}

/* Whether the controller hung up already (during the verification, say): its end of stdout or
 * stderr is gone. Polled without waiting; then no script starts at all. */
static bool hung_up(void)
{
    struct pollfd pfd[2] = {{.fd = STDOUT_FILENO}, {.fd = STDERR_FILENO}};

    if (poll(pfd, 2, 0) <= 0)
        return false;
    return ((pfd[0].revents | pfd[1].revents) & (POLLHUP | POLLERR)) != 0;
}

enum kp_shim_exit kp_shim_run_script(const char *script_path, const struct kp_shim_params *params)
{
    static const int blocked[] = {SIGHUP, SIGTERM, SIGINT, SIGCHLD};
    enum kp_shim_exit x = KP_SHIM_INTERNAL;
    struct sigaction sa, old_chld;
    sigset_t block, orig, waitmask;
    const char **env = NULL;
    char *bash = NULL, *msg = NULL;
    bool masked = false, chld = false;
    int r, wstatus = 0, stopped = 0;
    pid_t pid = -1;

    r = kp_shim_find_program("bash", &bash, &msg);
    if (r < 0) {
        kp_shim_log("cannot run the script: %s", msg ? msg : kp_strerror(r));
        goto out;
    }
    r = script_env(params, &env);
    if (r < 0) {
        kp_shim_log("cannot run the script: %s", kp_strerror(r));
        goto out;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_child;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NOCLDSTOP;
    if (sigaction(SIGCHLD, &sa, &old_chld) < 0) {
        kp_shim_log("cannot run the script: sigaction: %s", kp_strerror(-errno));
        goto out;
    }
    chld = true;
    sigemptyset(&block);
    for (size_t i = 0; i < KP_ARRAY_SIZE(blocked); i++)
        sigaddset(&block, blocked[i]);
    (void)sigprocmask(SIG_BLOCK, &block, &orig);
    masked = true;
    waitmask = orig;
    for (size_t i = 0; i < KP_ARRAY_SIZE(blocked); i++)
        sigdelset(&waitmask, blocked[i]);
    if (kp_shim_stop_signal) {
        kp_shim_log("stopped by signal %d before the script started", (int)kp_shim_stop_signal);
        goto out;
    }
    if (hung_up()) {
        kp_shim_log("hang-up before the script started: the controller went away");
        goto out;
    }
    {
        const char *argv[] = {bash, script_path, NULL};
        struct kp_spawn_opts o = {
            .argv = argv,
            .env = env,
            .path = KP_SHIM_PATH,
            .flags = KP_SPAWN_CLEAR_ENV | KP_SPAWN_INHERIT_OUTPUT | KP_SPAWN_NEW_PGROUP,
        };

        r = kp_spawn_start(&o, &pid);
    }
    if (r < 0) {
        kp_shim_log("cannot run the script: %s: %s", bash, kp_strerror(r));
        goto out;
    }
    r = wait_script(pid, &waitmask, &wstatus, &stopped);
    if (r < 0) {
        kp_shim_log("waiting for the script: %s", kp_strerror(r));
        (void)kill(-pid, SIGKILL);
        while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
            ;
        goto out;
    }
    if (stopped) {
        kp_shim_log("script stopped (signal %d), its process group ended", stopped);
        goto out;
    }
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
        x = KP_SHIM_OK;
    } else {
        if (WIFEXITED(wstatus))
            kp_shim_log("script exited %d", WEXITSTATUS(wstatus));
        else
            kp_shim_log("script killed by signal %d", WTERMSIG(wstatus));
        x = KP_SHIM_SCRIPT_FAILED;
    }
out:
    if (masked)
        (void)sigprocmask(SIG_SETMASK, &orig, NULL);
    if (chld)
        (void)sigaction(SIGCHLD, &old_chld, NULL);
    kp_free(env);
    kp_free(bash);
    kp_free(msg);
    return x;
}
