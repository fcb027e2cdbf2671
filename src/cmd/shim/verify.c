/* DESIGN: the signature check, done by the host's own OpenSSH.
 *
 * Why ssh-keygen and not our own SSHSIG code: the host's trust root is an allowed_signers file
 * whose meaning OpenSSH defines (namespaces=, valid-after=, valid-before=, cert-authority with
 * signer certificates). Running `ssh-keygen -Y verify` gives exactly that meaning, kept current
 * by the host's security updates, and keeps libcrypto out of a static root-run binary
 * (a project decision: docs/verified-execution.md). The controller checks the same signature itself before it dials.
 *
 * Order: the allowed-signers file passes kp_safe_path() first (unsafe: exit 1, the host is
 * misconfigured and nothing should run), then must open for reading as a regular file (missing
 * or unreadable: exit 2, "signature rejected" with the reason, as the reference does), then
 * ssh-keygen is found and checked and run with the script on stdin. Its exit status decides;
 * its output is only logged, one line, control characters made harmless by the logger. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/path.h"
#include "base/spawn.h"
#include "base/time.h"
#include "cmd/shim/shim.h"

#define KP_SHIM_VERIFY_TIMEOUT_SEC 60
#define KP_SHIM_VERIFY_OUTPUT 4096

/* The lines of b joined into one ("; " between them, empty lines dropped) in out[size]. */
static const char *one_line(const struct kp_buf *b, char *out, size_t size)
{
    const char *s = kp_buf_str(b);
    size_t w = 0;
    bool sep = false;

    for (; *s && w + 3 < size; s++) {
        if (*s == '\n' || *s == '\r') {
            sep = w > 0;
            continue;
        }
        if (sep) {
            out[w++] = ';';
            out[w++] = ' ';
            sep = false;
        }
        out[w++] = *s;
    }
    out[w] = '\0';
    return w ? out : "(no output)";
}

enum kp_shim_exit kp_shim_verify(const char *allowed_signers, const char *script_path,
                                 const char *sig_path)
{
    enum kp_shim_exit x = KP_SHIM_INTERNAL;
    struct kp_spawn_result res = {0};
    char *signers = NULL, *keygen = NULL, *msg = NULL, line[KP_SHIM_LOG_MAX];
    bool have_res = false;
    struct stat st;
    int fd = -1, r;

    r = kp_safe_path(allowed_signers, 0, &signers, &msg);
    if (r == -ENOENT || r == -EACCES || r == -ENOTDIR) {
        kp_shim_log("allowed signers: %s", msg ? msg : kp_strerror(r));
        x = KP_SHIM_SIG_REJECTED;
        goto out;
    }
    if (r < 0) {
        kp_shim_log("allowed signers refused: %s", msg ? msg : kp_strerror(r));
        goto out;
    }
    fd = open(signers, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        kp_shim_log("allowed signers: %s: %s", signers,
                    fd < 0 ? kp_strerror(-errno) : "not a regular file");
        x = KP_SHIM_SIG_REJECTED;
        goto out;
    }
    (void)close(fd);
    fd = -1;
    r = kp_shim_find_program("ssh-keygen", &keygen, &msg);
    if (r < 0) {
        kp_shim_log("cannot verify: %s", msg ? msg : kp_strerror(r));
        goto out;
    }
    fd = open(script_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        kp_shim_log("cannot verify: %s: %s", script_path, kp_strerror(-errno));
        goto out;
    }
    {
        const char *argv[] = {keygen,
                              "-Y",
                              "verify",
                              "-f",
                              signers,
                              "-I",
                              KP_SHIM_PRINCIPAL,
                              "-n",
                              KP_SHIM_NAMESPACE,
                              "-s",
                              sig_path,
                              NULL};
        struct kp_spawn_opts o = {
            .argv = argv,
            .env = kp_shim_tool_env,
            .path = KP_SHIM_PATH,
            .flags = KP_SPAWN_CLEAR_ENV | KP_SPAWN_STDIN_FD,
            .stdin_fd = fd,
            .timeout_usec = KP_SHIM_VERIFY_TIMEOUT_SEC * KP_USEC_PER_SEC,
            .max_stdout = KP_SHIM_VERIFY_OUTPUT,
            .stderr_tail = KP_SHIM_VERIFY_OUTPUT,
        };

        r = kp_spawn_run(&o, &res);
    }
    if (r < 0) {
        kp_shim_log("cannot verify: %s: %s", keygen, kp_strerror(r));
        goto out;
    }
    have_res = true;
    if (res.end == KP_SPAWN_EXITED && res.status == 0) {
        kp_shim_log("verify: %s", one_line(&res.out, line, sizeof(line)));
        x = KP_SHIM_OK;
    } else if (res.end == KP_SPAWN_EXITED) {
        kp_shim_log("verify: %s", one_line(&res.err, line, sizeof(line)));
        x = KP_SHIM_SIG_REJECTED;
    } else {
        kp_shim_log("verify: ssh-keygen %s", res.end == KP_SPAWN_TIMED_OUT  ? "timed out"
                                             : res.end == KP_SPAWN_SIGNALED ? "was killed"
                                                                            : "wrote too much");
    }
out:
    if (fd >= 0)
        (void)close(fd);
    if (have_res)
        kp_spawn_result_done(&res);
    kp_free(signers);
    kp_free(keygen);
    kp_free(msg);
    return x;
}
