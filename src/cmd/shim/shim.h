/* cmd/shim/shim.h: kpssh-shim's protocol constants and the pieces main.c ties together.
 *
 * The exit codes are protocol: the controller reads them to tell "the host refused" from "the
 * signed script failed", so they never change meaning. Functions here return one of them
 * (enum kp_shim_exit) instead of a negative error: each decision in the shim *is* a verdict
 * for the controller, and mapping errors to verdicts once, where they arise, keeps every path
 * to a verdict visible (STYLE.md rule 4 bends here, on purpose). Everything is single-threaded
 * (STYLE.md section 4). */
#ifndef KP_CMD_SHIM_SHIM_H
#define KP_CMD_SHIM_SHIM_H

#include <signal.h>
#include <stdarg.h>
#include <stddef.h>

#include "base/macro.h"

enum kp_shim_exit {
    KP_SHIM_OK = 0,             /* done: probe printed, or the signed script exited 0 */
    KP_SHIM_INTERNAL = 1,       /* the shim could not do its job (bad option, unsafe path, ...) */
    KP_SHIM_SIG_REJECTED = 2,   /* ssh-keygen -Y verify refused the signature */
    KP_SHIM_BAD_PARAM = 3,      /* a parameter line is not KPSSH_[A-Za-z0-9_]+=value */
    KP_SHIM_MALFORMED = 4,      /* not a version 1 envelope, a field missing, bad base64, too big */
    KP_SHIM_UNKNOWN_PHASE = 5,  /* phase is not probe, install, join, leave or uninstall */
    KP_SHIM_SCRIPT_FAILED = 10, /* the signed script ran and failed; its own code is only logged */
};

/* The text of --help lists the same table. */
#define KP_SHIM_EXIT_TABLE                                                                         \
    "  0  ok (probe printed, or the signed script exited 0)\n"                                     \
    "  1  internal error (bad option, unsafe path, cannot run a program, interrupted)\n"           \
    "  2  signature rejected (or allowed-signers file missing or unreadable)\n"                    \
    "  3  bad parameter (name not KPSSH_[A-Za-z0-9_]+, line without '=', NUL in a value)\n"        \
    "  4  malformed envelope (not 'kpssh-envelope: 1', missing field, bad base64, too large)\n"    \
    "  5  unknown phase\n"                                                                         \
    " 10  the signed script failed (its own exit status is logged, not returned)\n"

/* Ceilings (STYLE.md rule 6). A line is bounded only by the whole envelope. */
#define KP_SHIM_MAX_ENVELOPE (2u << 20) /* all of stdin */
#define KP_SHIM_MAX_SCRIPT (256u << 10) /* decoded script */
#define KP_SHIM_MAX_SIG (16u << 10)     /* decoded armoured SSHSIG */
#define KP_SHIM_MAX_PARAMS (64u << 10)  /* decoded parameter text */

/* Fixed, never configurable: who signs and for what (principal and SSHSIG namespace `kpssh`,
 * docs/verified-execution.md). */
#define KP_SHIM_NAMESPACE "kpssh"
#define KP_SHIM_PRINCIPAL "kpssh"
#define KP_SHIM_DEFAULT_ALLOWED_SIGNERS "/etc/kpssh/allowed_signers"
/* The only search path for programs and the only PATH the script sees. */
#define KP_SHIM_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* --- log.c: "kpssh-shim: " lines on stderr, and the same to syslog or the --log file ----- */

/* Opens the log: file NULL means syslog (LOG_AUTHPRIV); else lines are appended to file, with
 * a timestamp. 0, or -errno when the file cannot be opened (*ret_msg says so). */
int kp_shim_log_open(const char *file, char **ret_msg) KP_WUR;
void kp_shim_log_close(void);
/* One line. Control characters in the text become '?' (ssh-keygen's stderr is relayed), and the
 * line is cut at KP_SHIM_LOG_MAX bytes. */
#define KP_SHIM_LOG_MAX 1024
void kp_shim_log(const char *fmt, ...) KP_PRINTF(1, 2);

/* --- exec.c: programs the shim runs --------------------------------------------------------- */

struct kp_shim_params;

/* Finds name on KP_SHIM_PATH and checks it with kp_safe_path() (owner root). 0 and the resolved
 * path in *ret_path (kp_free), or -ENOENT (not found), -EPERM (unsafe) or another -errno, with
 * *ret_msg saying why. */
int kp_shim_find_program(const char *name, char **ret_path, char **ret_msg) KP_WUR KP_NONNULL(1, 2);

/* The environment programs other than the script get: PATH, LC_ALL=C, HOME. */
extern const char *const kp_shim_tool_env[];

/* Set by the SIGHUP/SIGTERM/SIGINT handler main installs: the signal number, or 0. */
extern volatile sig_atomic_t kp_shim_stop_signal;
/* Installs the handler that sets kp_shim_stop_signal (no SA_RESTART). 0 or -errno. */
int kp_shim_catch_stop_signals(void) KP_WUR;

/* Runs `bash <script_path>` with only PATH, HOME and the checked parameters in its environment,
 * stdin /dev/null, stdout and stderr ours, in its own process group. If a stop signal arrives or
 * the controller goes away (our stdout or stderr hangs up), the signal (SIGHUP for a hang-up)
 * goes to the script's whole group, then SIGKILL after a grace period. Logs the outcome.
 * KP_SHIM_OK, KP_SHIM_SCRIPT_FAILED or KP_SHIM_INTERNAL (could not run, or interrupted). */
enum kp_shim_exit kp_shim_run_script(const char *script_path,
                                     const struct kp_shim_params *params) KP_WUR KP_NONNULL(1, 2);

/* --- verify.c ----------------------------------------------------------------------------- */

/* Checks sig_path over the bytes of script_path with `ssh-keygen -Y verify -f <allowed_signers>
 * -I kpssh -n kpssh -s <sig_path>` (the script on its stdin). Logs why when it refuses.
 * KP_SHIM_OK; KP_SHIM_SIG_REJECTED (a bad signature, or allowed_signers missing or unreadable);
 * KP_SHIM_INTERNAL (allowed_signers or ssh-keygen fails kp_safe_path, ssh-keygen cannot run). */
enum kp_shim_exit kp_shim_verify(const char *allowed_signers, const char *script_path,
                                 const char *sig_path) KP_WUR KP_NONNULL(1, 2, 3);

/* --- probe.c ------------------------------------------------------------------------------ */

/* Prints the 4-line probe answer on stdout: nproc, MemTotal in kB, uname -m, and `systemctl
 * is-active kubelet` ("unknown" when there is no systemctl). KP_SHIM_OK or KP_SHIM_INTERNAL
 * (logged). */
enum kp_shim_exit kp_shim_probe(void) KP_WUR;

#endif
