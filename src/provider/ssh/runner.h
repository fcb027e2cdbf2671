/* provider/ssh/runner.h: run a join-profile phase, or a probe command, on a host.
 *
 * A phase runs as `sudo -n bash -s` (`bash -s` when the login user is root). Everything
 * travels on stdin, nothing sensitive in argv: the preamble (`set -euo pipefail`, a hang-up
 * watchdog, then one `export NAME='value'` line per variable, sorted by name) followed by the
 * script bytes. Variable names must match ^KPSSH_[A-Za-z0-9_]+$ and values must hold no NUL;
 * both are checked before anything is dialed, so no phase can set BASH_ENV, LD_PRELOAD, PATH
 * or IFS. The watchdog ends the phase's process group when the SSH connection goes away, which
 * is what a deadline does: sshd gives a command without a pty no signal of its own when the
 * client disconnects.
 *
 * Secrets: every variable given as a kp_secret, every extra secret in the phase, and the
 * secret half of any bootstrap token among them (`<6>.<16>`) are replaced by "[REDACTED]"
 * (longest first, values under KP_LOG_REDACT_MIN bytes skipped) in the captured stdout and
 * stderr and in every error text before they leave this module.
 *
 * Threads: each call runs on the caller's thread with its own session; the pure helpers may be
 * called from any thread. No logging here: results go back to the caller (rule 8). */
#ifndef KP_PROVIDER_SSH_RUNNER_H
#define KP_PROVIDER_SSH_RUNNER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"
#include "base/time.h"
#include "provider/ssh/session.h"

struct kp_buf;
struct kp_secret;

/* A phase script's ceiling (the profile validator enforces the same). */
#define KP_MAX_PHASE_SCRIPT (256 * 1024)
/* Characters of redacted stderr quoted in a phase error text. */
#define KP_PHASE_ERROR_TAIL 800
/* Longest variable name accepted. */
#define KP_SSH_ENV_NAME_MAX 128
/* Longest probe command (kp_ssh_exec_capture): probes are fixed one-liners. */
#define KP_MAX_PROBE_COMMAND 4096

/* One exported variable: exactly one of value and secret is set. */
struct kp_ssh_var {
    const char *name;
    const char *value;              /* plain value, or NULL */
    const struct kp_secret *secret; /* secret value (token, join secret), or NULL */
};

/* A phase to run. Pointers are borrowed for the call only. */
struct kp_ssh_phase {
    /* Verified execution: non-NULL sends the phase to the host's kpssh-shim as an envelope
     * (kp_ssh_envelope) with this command line instead of `sudo -n bash -s`; the signature
     * travels with it. The caller has checked the signature first (kp_hostio_verified). */
    const char *shim;
    const char *signature; /* armored SSHSIG over the script bytes */
    size_t signature_len;
    const char *name; /* "install", "join", "leave", ...: prefixes error texts */
    const char *script;
    size_t script_len; /* at most KP_MAX_PHASE_SCRIPT */
    const struct kp_ssh_var *vars;
    size_t nvars;
    const struct kp_secret *const *secrets; /* more values to redact, or NULL */
    size_t nsecrets;
    struct kp_deadline deadline; /* covers dial, handshake and the whole script */
};

/* True when name matches ^KPSSH_[A-Za-z0-9_]+$ (and is at most KP_SSH_ENV_NAME_MAX long). */
bool kp_ssh_env_name_ok(const char *name);

/* Checks a phase without I/O: name and script present, script within its ceiling, variable
 * names valid and unique, exactly one of value/secret per variable, no NUL in a value.
 * 0, -EINVAL or -KP_ELIMIT; ret_msg (optional) receives a new message on failure. */
int kp_ssh_phase_validate(const struct kp_ssh_phase *ph, char **ret_msg) KP_WUR;

/* Appends the preamble for vars (validated as above) to out. Pure. The output holds secret
 * values: release it with kp_buf_wipe(). 0, -EINVAL, -ENOMEM or -KP_ELIMIT. */
int kp_ssh_preamble(const struct kp_ssh_var *vars, size_t nvars, struct kp_buf *out) KP_WUR;

/* The most parameter text (NAME=VALUE lines) kpssh-shim takes (its KP_SHIM_MAX_PARAMS). */
#define KP_ENVELOPE_MAX_PARAMS (64u * 1024u)

/* The envelope (version 1) that carries a phase to kpssh-shim on a Verified host, appended to
 * out. Header lines `field: value`, one per line:
 *   kpssh-envelope: 1
 *   phase: <phase>              probe, install, join, leave or uninstall
 *   params-b64: <base64>        the variables as NAME=VALUE lines sorted by name (none: absent)
 *   sig-b64: <base64>           the armored signature (absent for probe)
 *   script-b64: <base64>        the script's exact bytes (absent for probe)
 * A probe takes no vars, script or signature; every other phase needs script and signature.
 * Names must match ^KPSSH_[A-Za-z0-9_]+$ and values may hold no newline or NUL (the shim reads
 * one variable per line), and all of them at most KP_ENVELOPE_MAX_PARAMS bytes as lines. Pure.
 * out is grown once, so no copy of a secret is left behind; it holds secret values: release it
 * with kp_buf_wipe().
 * 0, -EINVAL (ret_msg, optional, says why), -ENOMEM or -KP_ELIMIT. */
int kp_ssh_envelope(const char *phase, const struct kp_ssh_var *vars, size_t nvars,
                    const char *script, size_t script_len, const char *sig, size_t sig_len,
                    struct kp_buf *out, char **ret_msg) KP_WUR;

/* The command line a phase runs under for this login user (NULL or "" means root). */
const char *kp_ssh_phase_command(const char *user);

/* Appends p[n] to out with every secret of ph replaced by "[REDACTED]", longest first. With
 * cut_front (the text is the tail of a longer stream), first drops as many leading bytes as
 * the longest secret has minus one, so a secret cut by the truncation cannot survive in part.
 * Pure. 0, -ENOMEM or -KP_ELIMIT (out's ceiling). */
int kp_ssh_redact(const char *p, size_t n, bool cut_front, const struct kp_ssh_phase *ph,
                  struct kp_buf *out) KP_WUR;

/* Runs ph on the host of t: validates (before dialing), connects with t's pins, streams the
 * preamble and the script, and captures into cap (initialised by the caller; its outputs are
 * redacted on return, and cap->fp / cap->pin tell the host key seen and the pin it matched).
 * Returns 0 when the script exited 0, or:
 *   -KP_ESCRIPT   it exited non-zero or died of a signal (cap->exit_status, cap->exit_signal)
 *   -ETIMEDOUT    the deadline passed: the connection was closed and the watchdog ends the
 *                 remote processes
 *   -ECANCELED    t->ctx was cancelled; -KP_ENOTLEADER  t->fence closed (the fence is also
 *                 checked before dialing): a connection already made is closed as on -ETIMEDOUT
 *   -EINVAL, -KP_ELIMIT   refused before dialing
 *   kp_ssh_connect's errors (-KP_EHOSTKEY, -KP_EAUTH, -KP_EPARSE, -EIO, ...)
 * ret_msg (optional) receives on failure "<phase> phase: <what>", quoting the last
 * KP_PHASE_ERROR_TAIL characters of stderr when there are any, redacted. */
int kp_ssh_run_phase(const struct kp_ssh_target *t, const struct kp_ssh_phase *ph,
                     struct kp_ssh_capture *cap, char **ret_msg) KP_WUR;

/* Runs one short command (a probe) with no input and captures its output into cap (same
 * ceilings). 0 when it exited 0, -KP_ESCRIPT otherwise, -EINVAL for an empty command or one
 * longer than KP_MAX_PROBE_COMMAND, or kp_ssh_connect's and kp_ssh_exec's errors (among them
 * -ETIMEDOUT, -ECANCELED and -KP_ENOTLEADER from t->ctx and t->fence). The command
 * goes into argv: never put a secret in it. ret_msg as above, prefixed "probe phase: ". */
int kp_ssh_exec_capture(const struct kp_ssh_target *t, const char *command,
                        struct kp_deadline deadline, struct kp_ssh_capture *cap,
                        char **ret_msg) KP_WUR;

/* The probe of a Verified host: the probe envelope to shim (the host's kpssh-shim command
 * line), which answers with the same four lines as kp_probe_command(). Results as above. */
int kp_ssh_probe_shim(const struct kp_ssh_target *t, const char *shim, struct kp_deadline deadline,
                      struct kp_ssh_capture *cap, char **ret_msg) KP_WUR;

#endif
