/* DESIGN: the probe verb, the shim's answer to the controller's Raw probe command.
 *
 * The controller parses both answers with kp_probe_parse() (provider/ssh/probe.c), so the shim
 * prints the same four lines: `nproc`, MemTotal in kB from /proc/meminfo, `uname -m`, and
 * `systemctl is-active kubelet` (any exit status is an answer; "unknown" when the host has no
 * systemctl, where the Raw command prints nothing). The programs really run, with fixed argv,
 * the fixed path and LC_ALL=C, rather than sysconf() or uname(2): hosts (and the test lab)
 * may replace them, and the answer must match what the Raw probe would see. /proc/meminfo is
 * read directly. The probe is unsigned because every byte of it is the shim's own. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/spawn.h"
#include "base/time.h"
#include "cmd/shim/shim.h"

#define KP_SHIM_PROBE_TIMEOUT_SEC 10
#define KP_SHIM_PROBE_FIELD 256         /* one answer line */
#define KP_SHIM_MEMINFO_MAX (64u << 10) /* /proc/meminfo is a few KiB */

/* Keeps the first line of b, without trailing blanks. */
static void first_line(struct kp_buf *b)
{
    const char *s = kp_buf_str(b);
    size_t n = strcspn(s, "\n");

    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    kp_buf_truncate(b, n);
}

/* Runs the checked program name with up to two arguments (NULL ends them) and keeps the first
 * line of its output in *out. any_status: a non-zero exit is still an answer. 0; -ENOENT when
 * the program is not there (the caller decides what that means); -EIO for anything else,
 * logged here. */
static int run_tool(const char *name, const char *arg1, const char *arg2, int any_status,
                    struct kp_buf *out)
{
    struct kp_spawn_result res = {0};
    char *path = NULL, *msg = NULL;
    int r;

    r = kp_shim_find_program(name, &path, &msg);
    if (r == -ENOENT)
        goto out;
    if (r < 0) {
        kp_shim_log("probe: %s", msg ? msg : kp_strerror(r));
        r = -EIO;
        goto out;
    }
    {
        const char *argv[] = {path, arg1, arg1 ? arg2 : NULL, NULL};
        struct kp_spawn_opts o = {
            .argv = argv,
            .env = kp_shim_tool_env,
            .path = KP_SHIM_PATH,
            .flags = KP_SPAWN_CLEAR_ENV,
            .timeout_usec = KP_SHIM_PROBE_TIMEOUT_SEC * KP_USEC_PER_SEC,
            .max_stdout = KP_SHIM_PROBE_FIELD,
            .stderr_tail = KP_SHIM_PROBE_FIELD,
        };

        r = kp_spawn_run(&o, &res);
    }
    if (r < 0) {
        kp_shim_log("probe: cannot run %s: %s", path, kp_strerror(r));
        r = -EIO;
        goto out;
    }
    if (res.end != KP_SPAWN_EXITED || (!any_status && res.status != 0)) {
        kp_shim_log("probe: %s %s", name,
                    res.end == KP_SPAWN_EXITED      ? "failed"
                    : res.end == KP_SPAWN_TIMED_OUT ? "timed out"
                    : res.end == KP_SPAWN_SIGNALED  ? "was killed"
                                                    : "wrote too much");
        r = -EIO;
        goto out;
    }
    first_line(&res.out);
    kp_buf_reset(out);
    r = kp_buf_append(out, kp_buf_str(&res.out), res.out.len);
    if (r < 0) {
        kp_shim_log("probe: %s", kp_strerror(r));
        r = -EIO;
    }
out:
    kp_spawn_result_done(&res);
    kp_free(path);
    kp_free(msg);
    return r;
}

/* MemTotal's number of kB from /proc/meminfo into out. 0 or -EIO (logged). */
static int mem_total(struct kp_buf *out)
{
    struct kp_buf info = KP_BUF_INIT(KP_SHIM_MEMINFO_MAX);
    const char *s, *line;
    size_t digits;
    int fd, r = -EIO;
    char chunk[4096];
    ssize_t n;

    fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        kp_shim_log("probe: /proc/meminfo: %s", kp_strerror(-errno));
        return -EIO;
    }
    while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || kp_buf_append(&info, chunk, (size_t)n) < 0) {
            kp_shim_log("probe: cannot read /proc/meminfo");
            goto out;
        }
    }
    s = kp_buf_str(&info);
    line = strncmp(s, "MemTotal:", 9) == 0 ? s : strstr(s, "\nMemTotal:");
    if (!line) {
        kp_shim_log("probe: no MemTotal in /proc/meminfo");
        goto out;
    }
    line += line == s ? 9 : 10;
    line += strspn(line, " \t");
    digits = strspn(line, "0123456789");
    if (digits == 0 || kp_buf_append(out, line, digits) < 0) {
        kp_shim_log("probe: MemTotal in /proc/meminfo is not a number");
        goto out;
    }
    r = 0;
out:
    (void)close(fd);
    kp_buf_done(&info);
    return r;
}

enum kp_shim_exit kp_shim_probe(void)
{
    struct kp_buf cpus = KP_BUF_INIT(KP_SHIM_PROBE_FIELD), mem = KP_BUF_INIT(KP_SHIM_PROBE_FIELD),
                  machine = KP_BUF_INIT(KP_SHIM_PROBE_FIELD),
                  kubelet = KP_BUF_INIT(KP_SHIM_PROBE_FIELD),
                  answer = KP_BUF_INIT(4 * KP_SHIM_PROBE_FIELD + 8);
    enum kp_shim_exit x = KP_SHIM_INTERNAL;
    const char *p;
    size_t left;
    int r;

    r = run_tool("nproc", NULL, NULL, 0, &cpus);
    if (r == -ENOENT)
        kp_shim_log("probe: nproc: not found on %s", KP_SHIM_PATH);
    if (r < 0)
        goto out;
    if (mem_total(&mem) < 0)
        goto out;
    r = run_tool("uname", "-m", NULL, 0, &machine);
    if (r == -ENOENT)
        kp_shim_log("probe: uname: not found on %s", KP_SHIM_PATH);
    if (r < 0)
        goto out;
    r = run_tool("systemctl", "is-active", "kubelet", 1, &kubelet);
    if (r < 0 && r != -ENOENT)
        goto out;
    if (r == -ENOENT || kubelet.len == 0) {
        kp_buf_reset(&kubelet);
        if (kp_buf_puts(&kubelet, "unknown") < 0)
            goto out;
    }
    if (kp_buf_printf(&answer, "%s\n%s\n%s\n%s\n", kp_buf_str(&cpus), kp_buf_str(&mem),
                      kp_buf_str(&machine), kp_buf_str(&kubelet)) < 0) {
        kp_shim_log("probe: out of memory");
        goto out;
    }
    for (p = answer.data, left = answer.len; left > 0;) {
        ssize_t w = write(STDOUT_FILENO, p, left);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            kp_shim_log("probe: cannot write the answer: %s", kp_strerror(-errno));
            goto out;
        }
        p += w;
        left -= (size_t)w;
    }
    x = KP_SHIM_OK;
out:
    kp_buf_done(&cpus);
    kp_buf_done(&mem);
    kp_buf_done(&machine);
    kp_buf_done(&kubelet);
    kp_buf_done(&answer);
    return x;
}
