/* DESIGN: the shim's few log lines.
 *
 * Each line goes to stderr as "kpssh-shim: <text>" (stderr is shared with the script, which the
 * controller relays, so the prefix tells the two apart), and the same text goes to syslog
 * (LOG_AUTHPRIV, as sudo and sshd log there: it is an access decision) or, with --log FILE, is
 * appended to that file with an RFC 3339 UTC timestamp. The file is opened once, O_APPEND (and
 * O_NOFOLLOW: root must not be steered into appending through a planted symlink), so
 * lines of concurrent shims do not overwrite each other, and each line is one write(2).
 * Text is made one line (control characters become '?') because part of it comes from
 * ssh-keygen's stderr. State is the one file descriptor below: the shim is single-threaded. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "base/err.h"
#include "base/time.h"
#include "cmd/shim/shim.h"

static int kp_log_fd = -1;
static bool kp_log_syslog;

int kp_shim_log_open(const char *file, char **ret_msg)
{
    if (!file) {
        openlog("kpssh-shim", LOG_PID, LOG_AUTHPRIV);
        kp_log_syslog = true;
        return 0;
    }
    kp_log_fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
    if (kp_log_fd < 0) {
        int r = -errno;

        kp_msg_set(ret_msg, "cannot open log file %s: %s", file, kp_strerror(r));
        return r;
    }
    return 0;
}

void kp_shim_log_close(void)
{
    if (kp_log_fd >= 0)
        (void)close(kp_log_fd);
    kp_log_fd = -1;
    if (kp_log_syslog)
        closelog();
    kp_log_syslog = false;
}

/* Writes all n bytes, retrying short writes; errors are dropped (there is nowhere to report a
 * failing log), and SIGPIPE is ignored by main. */
static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

void kp_shim_log(const char *fmt, ...)
{
    char text[KP_SHIM_LOG_MAX], line[KP_SHIM_LOG_MAX + 64], ts[KP_RFC3339_MAX];
    int saved = errno, n;
    va_list ap;

    va_start(ap, fmt);
    n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0)
        text[0] = '\0';
    for (char *c = text; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    n = snprintf(line, sizeof(line), "kpssh-shim: %s\n", text);
    if (n > 0)
        write_all(STDERR_FILENO, line, KP_MIN((size_t)n, sizeof(line) - 1));
    if (kp_log_syslog)
        syslog(LOG_NOTICE, "%s", text);
    if (kp_log_fd >= 0) {
        if (kp_time_format_rfc3339(kp_real_usec(), ts, sizeof(ts)) < 0)
            ts[0] = '\0';
        n = snprintf(line, sizeof(line), "%s kpssh-shim[%ld]: %s\n", ts, (long)getpid(), text);
        if (n > 0)
            write_all(kp_log_fd, line, KP_MIN((size_t)n, sizeof(line) - 1));
    }
    errno = saved;
}
