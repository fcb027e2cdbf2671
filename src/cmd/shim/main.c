/* DESIGN: kpssh-shim, the host side of verified execution (docs/internals/shim.md).
 *
 * What: sshd runs this program for the dedicated kpssh user (ForceCommand) and the controller
 * streams an envelope (envelope.h) on stdin. The shim probes, or verifies a signed script with
 * the host's ssh-keygen and runs it as root, and answers with an exit code from shim.h.
 *
 * Why this shape: this is the host's privilege boundary, so (STYLE.md rule 11) its settings come
 * only from its command line, which is the host's sshd configuration (never the environment,
 * never the client: SSH_ORIGINAL_COMMAND is ignored); it re-executes itself through `sudo -n`
 * before it reads a byte, so the sudoers rule names one exact command line; it reads one bounded
 * envelope, verifies before it decodes parameters, and writes the script where only root can
 * change it before ssh-keygen and bash read it. Every exit after the private directory exists
 * goes through one cleanup. Single-threaded, no network, links base/ only.
 *
 * Flow: options -> (sudo) -> log -> read stdin -> parse -> probe | (private dir -> verify ->
 * parameters -> run) -> one outcome line -> exit code. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/path.h"
#include "base/sha256.h"
#include "base/str.h"
#include "base/time.h"
#include "cmd/shim/envelope.h"
#include "cmd/shim/shim.h"

/* How long the controller may take to send the whole envelope and close stdin. */
#define KP_SHIM_READ_TIMEOUT_SEC 120
#define KP_SHIM_TMP_TEMPLATE "/tmp/kpssh-shim.XXXXXX"

struct shim_opts {
    const char *allowed_signers;
    const char *log_file; /* NULL: syslog */
    bool no_sudo;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kpssh-shim [--allowed-signers FILE] [--log FILE] [--no-sudo]\n"
            "       kpssh-shim --help | --version\n"
            "\n"
            "The host side of kpssh verified execution. sshd runs it for the kpssh user\n"
            "(ForceCommand /opt/kpssh/kpssh-shim); it reads one envelope on stdin, answers a\n"
            "probe, or runs a script only after `ssh-keygen -Y verify` accepts its signature\n"
            "(principal and namespace \"kpssh\"). Settings come from these options only.\n"
            "\n"
            "  --allowed-signers FILE  trust root (default " KP_SHIM_DEFAULT_ALLOWED_SIGNERS ")\n"
            "  --log FILE              append log lines to FILE (default: syslog, authpriv)\n"
            "  --no-sudo               do not re-execute through `sudo -n` when not root (tests)\n"
            "  --help, --version\n"
            "\n"
            "When not root it re-executes itself as `sudo -n <its own path> <same options>`\n"
            "before reading input; the sudoers rule must name exactly that command line, e.g.\n"
            "  kpssh ALL=(root) NOPASSWD: /opt/kpssh/kpssh-shim \"\"\n"
            "(\"\" allows no arguments, so nobody can pass their own --allowed-signers).\n"
            "\n"
            "Exit codes:\n" KP_SHIM_EXIT_TABLE);
}

/* "--name VALUE" or "--name=VALUE" at argv[*i]: the value, advancing *i; NULL otherwise. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *ret_missing)
{
    const char *a = argv[*i], *rest;

    *ret_missing = false;
    if (!a)
        return NULL; /* argv[argc] */
    rest = kp_startswith(a, name);
    if (!rest)
        return NULL;
    if (*rest == '=')
        return rest + 1;
    if (*rest != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *ret_missing = true;
        return NULL;
    }
    return argv[++*i];
}

/* 0 to go on, or 1 + an exit code (help, version, or a usage error already reported). */
static int parse_opts(int argc, char **argv, struct shim_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        bool missing;

        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1 + (int)KP_SHIM_OK;
        }
        if (strcmp(a, "--version") == 0) {
            printf("kpssh-shim " KP_VERSION " (envelope version 1)\n");
            return 1 + (int)KP_SHIM_OK;
        }
        if (strcmp(a, "--no-sudo") == 0) {
            o->no_sudo = true;
            continue;
        }
        if ((v = opt_value(argc, argv, &i, "--allowed-signers", &missing))) {
            if (v[0] != '/') {
                fprintf(stderr, "kpssh-shim: --allowed-signers needs an absolute path\n");
                return 1 + (int)KP_SHIM_INTERNAL;
            }
            o->allowed_signers = v;
            continue;
        }
        if (!missing && (v = opt_value(argc, argv, &i, "--log", &missing))) {
            if (v[0] != '/') {
                /* Opened as root before chdir("/"): a relative name would land in the login
                 * user's directory, where that user could plant a FIFO or a link. */
                fprintf(stderr, "kpssh-shim: --log needs an absolute path\n");
                return 1 + (int)KP_SHIM_INTERNAL;
            }
            o->log_file = v;
            continue;
        }
        if (missing)
            fprintf(stderr, "kpssh-shim: %s needs a value\n", a);
        else
            fprintf(stderr, "kpssh-shim: unknown option or argument '%s' (see --help)\n", a);
        return 1 + (int)KP_SHIM_INTERNAL;
    }
    return 0;
}

/* Our own binary must be as safe as what we run: sudoers runs it as root by its path, so
 * whoever can replace it (a group-writable /opt/kpssh, say) is root. 0 or a negative code with
 * *ret_msg saying which component is unsafe. */
static int check_self(char **ret_msg)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (n <= 0) {
        int r = n < 0 ? -errno : -ENOENT;

        kp_msg_set(ret_msg, "cannot find our own path: %s", kp_strerror(r));
        return r;
    }
    self[n] = '\0';
    return kp_safe_path(self, 0, NULL, ret_msg);
}

/* Replaces the process with `sudo -n <our canonical path> <argv[1..]>`. Returns only on
 * failure, having said why on stderr (the log is not open yet: the root shim opens it). */
static void reexec_sudo(int argc, char **argv)
{
    char self[PATH_MAX], *sudo = NULL, *msg = NULL;
    const char **nargv = NULL;
    static const char *const env[] = {"PATH=" KP_SHIM_PATH, NULL};
    ssize_t n;
    int r;

    /* sudo without root as the result would bring us back here; only an environment that
     * claims we already came through sudo is believed, and it can only make us refuse. */
    if (getenv("SUDO_UID")) {
        fprintf(stderr, "kpssh-shim: started by sudo but not as root; refusing\n");
        return;
    }
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "kpssh-shim: cannot find our own path: %s\n", kp_strerror(-errno));
        return;
    }
    self[n] = '\0';
    r = kp_shim_find_program("sudo", &sudo, &msg);
    if (r < 0) {
        fprintf(stderr, "kpssh-shim: cannot re-execute as root: %s\n", msg ? msg : kp_strerror(r));
        goto out;
    }
    nargv = kp_calloc((size_t)argc + 3, sizeof(*nargv));
    if (!nargv) {
        fprintf(stderr, "kpssh-shim: out of memory\n");
        goto out;
    }
    nargv[0] = "sudo";
    nargv[1] = "-n";
    nargv[2] = self;
    for (int i = 1; i < argc; i++)
        nargv[i + 2] = argv[i];
    (void)fflush(NULL);
    execve(sudo, (char *const *)(uintptr_t)nargv, (char *const *)(uintptr_t)env);
    fprintf(stderr, "kpssh-shim: cannot run %s: %s\n", sudo, kp_strerror(-errno));
out:
    kp_free(nargv);
    kp_free(sudo);
    kp_free(msg);
}

/* Reads stdin to EOF into b (ceiling KP_SHIM_MAX_ENVELOPE). KP_SHIM_OK, KP_SHIM_MALFORMED (too
 * large, or no EOF in time) or KP_SHIM_INTERNAL; logs when not OK. */
static enum kp_shim_exit read_envelope(struct kp_buf *b)
{
    struct kp_deadline dl = kp_deadline_in(KP_SHIM_READ_TIMEOUT_SEC * KP_USEC_PER_SEC);
    char chunk[16384];

    for (;;) {
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        ssize_t n;
        int pr, r;

        pr = poll(&pfd, 1, kp_deadline_left_ms(dl));
        if (pr < 0 && errno == EINTR) {
            if (kp_shim_stop_signal) {
                kp_shim_log("refused: stopped by signal %d while reading",
                            (int)kp_shim_stop_signal);
                return KP_SHIM_INTERNAL;
            }
            continue;
        }
        if (pr < 0) {
            kp_shim_log("refused: reading stdin: %s", kp_strerror(-errno));
            return KP_SHIM_INTERNAL;
        }
        if (pr == 0) {
            kp_shim_log("refused: malformed envelope: input did not end within %d s",
                        KP_SHIM_READ_TIMEOUT_SEC);
            return KP_SHIM_MALFORMED;
        }
        n = read(STDIN_FILENO, chunk, sizeof(chunk));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0) {
            kp_shim_log("refused: reading stdin: %s", kp_strerror(-errno));
            return KP_SHIM_INTERNAL;
        }
        if (n == 0)
            return KP_SHIM_OK;
        r = kp_buf_append(b, chunk, (size_t)n);
        if (r == -KP_ELIMIT) {
            kp_shim_log("refused: malformed envelope: larger than %u bytes", KP_SHIM_MAX_ENVELOPE);
            return KP_SHIM_MALFORMED;
        }
        if (r < 0) {
            kp_shim_log("refused: %s", kp_strerror(r));
            return KP_SHIM_INTERNAL;
        }
    }
}

/* Writes n bytes to a new 0600 file dir/name. 0 or -errno. */
static int write_file(const char *path, const void *p, size_t n)
{
    const char *s = p;
    int fd, r = 0;

    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    while (n > 0) {
        ssize_t w = write(fd, s, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            r = -errno;
            break;
        }
        s += w;
        n -= (size_t)w;
    }
    if (close(fd) < 0 && r == 0)
        r = -errno;
    return r;
}

/* The signed phases: private directory, verify, parameters, run. Logs the outcome. */
static enum kp_shim_exit run_signed(const struct shim_opts *o, const struct kp_envelope *env)
{
    const char *phase = kp_shim_phase_name(env->phase);
    char *why = NULL;
    char dir[] = KP_SHIM_TMP_TEMPLATE, script[sizeof(dir) + 8], sig[sizeof(dir) + 8];
    struct kp_shim_params params;
    enum kp_shim_exit x = KP_SHIM_INTERNAL;
    bool made = false;
    int r;

    kp_shim_params_init(&params);
    script[0] = sig[0] = '\0';
    if (!mkdtemp(dir)) { /* mode 0700 */
        kp_shim_log("%s: cannot make a private directory under /tmp: %s", phase,
                    kp_strerror(-errno));
        goto out;
    }
    made = true;
    (void)snprintf(script, sizeof(script), "%s/script", dir);
    (void)snprintf(sig, sizeof(sig), "%s/sig", dir);
    if ((r = write_file(script, env->script.data, env->script.len)) < 0 ||
        (r = write_file(sig, env->sig.data, env->sig.len)) < 0) {
        kp_shim_log("%s: cannot write to %s: %s", phase, dir, kp_strerror(r));
        goto out;
    }
    x = kp_shim_verify(o->allowed_signers, script, sig);
    if (x != KP_SHIM_OK) {
        if (x == KP_SHIM_SIG_REJECTED)
            kp_shim_log("%s: signature rejected", phase);
        else
            kp_shim_log("%s: refused: internal error", phase);
        goto out;
    }
    if (kp_shim_stop_signal) {
        kp_shim_log("%s: stopped by signal %d before the script ran", phase,
                    (int)kp_shim_stop_signal);
        x = KP_SHIM_INTERNAL;
        goto out;
    }
    x = kp_envelope_params(env, &params, &why);
    if (x != KP_SHIM_OK) {
        kp_shim_log("%s: %s: %s", phase,
                    x == KP_SHIM_BAD_PARAM   ? "bad param"
                    : x == KP_SHIM_MALFORMED ? "malformed envelope"
                                             : "internal error",
                    why ? why : "?");
        goto out;
    }
    x = kp_shim_run_script(script, &params);
    kp_shim_log("%s: %s", phase,
                x == KP_SHIM_OK              ? "ok"
                : x == KP_SHIM_SCRIPT_FAILED ? "script failed"
                                             : "internal error");
out:
    kp_free(why);
    kp_shim_params_done(&params);
    if (script[0])
        (void)unlink(script);
    if (sig[0])
        (void)unlink(sig);
    if (made && rmdir(dir) < 0)
        kp_shim_log("cannot remove %s: %s", dir, kp_strerror(-errno));
    return x;
}

int main(int argc, char **argv)
{
    struct shim_opts o = {.allowed_signers = KP_SHIM_DEFAULT_ALLOWED_SIGNERS};
    struct kp_buf in = KP_BUF_INIT(KP_SHIM_MAX_ENVELOPE);
    struct kp_envelope env;
    enum kp_shim_exit x;
    char hex[KP_SHA256_HEX_SIZE], *msg = NULL, *why = NULL;
    struct sigaction ign;
    int r;

    kp_envelope_init(&env);
    r = parse_opts(argc, argv, &o);
    if (r > 0)
        return r - 1;
    if ((r = check_self(&msg)) < 0) {
        fprintf(stderr, "kpssh-shim: refusing to run from an unsafe path: %s\n",
                msg ? msg : kp_strerror(r));
        kp_free(msg);
        return KP_SHIM_INTERNAL;
    }
    if (!o.no_sudo && geteuid() != 0) {
        reexec_sudo(argc, argv);
        return KP_SHIM_INTERNAL;
    }
    /* A vanished controller must not kill us mid-cleanup through a write to its pipe. */
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    (void)sigaction(SIGPIPE, &ign, NULL);
    if (kp_shim_log_open(o.log_file, &msg) < 0) {
        fprintf(stderr, "kpssh-shim: %s\n", msg ? msg : "cannot open the log");
        kp_free(msg);
        return KP_SHIM_INTERNAL;
    }
    /* The private directory and its files get explicit modes (0700, 0600); everything else,
     * the signed script above all, sees the umask Raw mode's sudo gives: files a script
     * creates for others to read (an apt keyring read by _apt) must stay readable. */
    umask(022);
    x = KP_SHIM_INTERNAL;
    if ((r = kp_shim_catch_stop_signals()) < 0 || chdir("/") < 0) {
        kp_shim_log("refused: cannot set up: %s", kp_strerror(r < 0 ? r : -errno));
        goto out;
    }
    x = read_envelope(&in);
    if (x != KP_SHIM_OK)
        goto out;
    x = kp_envelope_parse(in.data, in.len, &env, &why);
    if (x != KP_SHIM_OK) {
        kp_shim_log("refused: %s: %s",
                    x == KP_SHIM_UNKNOWN_PHASE ? "unknown phase"
                    : x == KP_SHIM_MALFORMED   ? "malformed envelope"
                                               : "internal error",
                    why ? why : "?");
        goto out;
    }
    if (env.phase == KP_SHIM_PHASE_PROBE) {
        kp_shim_log("probe: start");
        x = kp_shim_probe();
        kp_shim_log("probe: %s", x == KP_SHIM_OK ? "ok" : "internal error");
        goto out;
    }
    kp_sha256_hex(env.script.data, env.script.len, hex);
    kp_shim_log("%s: start, script sha256:%s (%zu bytes), allowed signers %s",
                kp_shim_phase_name(env.phase), hex, env.script.len, o.allowed_signers);
    x = run_signed(&o, &env);
out:
    kp_free(why);
    kp_envelope_done(&env);
    kp_buf_wipe(&in); /* params-b64 may carry join secrets */
    kp_shim_log_close();
    return (int)x;
}
