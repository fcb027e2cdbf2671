/* provider/ssh/session.h: one SSH connection to one host, and commands run over it.
 *
 * The only module that includes libssh (STYLE.md rule 1). A session is dialed with a deadline
 * that bounds TCP connect, banner, key exchange and authentication together, so a tarpit that
 * accepts and never speaks cannot hold a worker. The host key is always fingerprinted
 * ("SHA256:<base64>") and checked, in order, against the pre-pin (knownHost from the key
 * Secret, knownhosts.h forms) else the TOFU pin (SSHHost status.hostKeyFingerprint); with
 * neither, the key is accepted and the caller persists kp_ssh_session_fingerprint().
 *
 * Threads: a session is owned by one job on one thread for its whole life and is never shared;
 * different sessions may be used on different threads at the same time. These functions do
 * not log (rule 8); they return codes and an optional error text. */
#ifndef KP_PROVIDER_SSH_SESSION_H
#define KP_PROVIDER_SSH_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/macro.h"
#include "base/time.h"
#include "provider/ssh/knownhosts.h"

struct kp_ctx;
struct kp_fence;
struct kp_secret;
struct kp_ssh_session;

/* Dial and handshake (TCP, banner, key exchange, authentication) get at most this long, and
 * never longer than the caller's deadline. */
/* How often a wait looks at the context and the fence of its target: a cancelled call ends
 * within about this long. */
#define KP_SSH_POLL_SLICE_MS 50
#define KP_SSH_DIAL_TIMEOUT_USEC (15 * KP_USEC_PER_SEC)
/* Captured stdout and stderr each keep at most this many bytes: the tail. */
#define KP_MAX_PHASE_OUTPUT (64 * 1024)
/* Bytes a command may be fed on stdin (a phase's preamble plus its 256 KiB script). */
#define KP_MAX_PHASE_INPUT (1024 * 1024)
/* After the exit status arrives, how long to wait for the streams to end (a daemon the
 * script started may keep them open forever). */
#define KP_SSH_EXIT_DRAIN_USEC (2 * KP_USEC_PER_SEC)

/* Where to connect and how to trust it. Pointers are borrowed for the call only, except ctx
 * and fence: a session kp_ssh_connect returns keeps both, so they must outlive it (free the
 * session before the context or fence goes). */
struct kp_ssh_target {
    const char *host;                    /* address or name (SSHHost spec.address) */
    uint16_t port;                       /* 0 means 22 */
    const char *user;                    /* NULL or "" means root */
    const struct kp_secret *private_key; /* PEM: OpenSSH, PKCS#1 or PKCS#8; unencrypted */
    const char *known_host;              /* pre-pin from the key Secret, or NULL */
    const char *tofu_fingerprint;        /* recorded "SHA256:..." or NULL */
    uint64_t dial_timeout_usec;          /* 0 means KP_SSH_DIAL_TIMEOUT_USEC */
    const struct kp_fence *fence;        /* leader fence a phase checks first (runner.h); NULL;
                                            kept by the session like ctx */
    /* The caller's context (NULL: none), borrowed for the session's whole life: its deadline
     * bounds every wait like the call's own, and once it is cancelled, or the fence above
     * closes, the session's next wait (at most KP_SSH_POLL_SLICE_MS away) closes the
     * connection and the call returns -ECANCELED (-KP_ENOTLEADER for the fence). */
    const struct kp_ctx *ctx;
};

/* Which pin the host key matched. */
enum kp_ssh_pin {
    KP_SSH_PIN_NONE = 0, /* no pin existed: accepted on first use, caller should persist */
    KP_SSH_PIN_PREPIN,   /* matched the knownHost pre-pin */
    KP_SSH_PIN_TOFU,     /* matched the recorded TOFU fingerprint */
};

/* What a command left behind. Initialise with kp_ssh_capture_init(); release with _done().
 * Owned by the caller; kp_ssh_exec() fills it as the command runs, so after a timeout it holds
 * the output seen until then. */
struct kp_ssh_capture {
    struct kp_buf out;       /* stdout tail; out.truncated when older bytes were dropped */
    struct kp_buf err;       /* stderr tail; err.truncated likewise */
    int exit_status;         /* 0..255, or -1 when none arrived (signal, timeout) */
    char *exit_signal;       /* "TERM", "KILL", ... when the command died of a signal, or NULL */
    char fp[KP_SSH_FP_SIZE]; /* host key fingerprint (filled by the one-shot runner calls) */
    enum kp_ssh_pin pin;     /* which pin matched (likewise) */
};

void kp_ssh_capture_init(struct kp_ssh_capture *c);
/* Releases the buffers (wiped: output may quote secrets) and the signal name. */
void kp_ssh_capture_done(struct kp_ssh_capture *c);

/* Dials t, verifies the host key and authenticates, all before min(deadline, now + dial
 * timeout). The pre-pin and the private key are parsed before anything is dialed.
 * Returns 0 and a new session in *ret_session, or:
 *   -EINVAL        bad target (empty host, '@' or space in host or user, no key)
 *   -KP_EPARSE     the private key, the pre-pin or the TOFU pin is malformed
 *   -KP_EHOSTKEY   the host key does not match the pin ("possible man-in-the-middle"), or the
 *                  pre-pin names no key for this host
 *   -KP_EAUTH      the server refused the key
 *   -ETIMEDOUT     the dial deadline (or t->ctx's) passed
 *   -ECANCELED     t->ctx was cancelled; -KP_ENOTLEADER  t->fence closed
 *   -EIO           connection failed (refused, reset, protocol error)
 *   -ENOMEM
 * ret_msg (optional) receives, on failure only, a new human-readable message naming the host
 * (kp_free it); it never contains key material. Any thread; the session then belongs to it. */
int kp_ssh_connect(const struct kp_ssh_target *t, struct kp_deadline deadline,
                   struct kp_ssh_session **ret_session, char **ret_msg) KP_WUR;

/* Disconnects and frees; accepts and returns NULL. */
struct kp_ssh_session *kp_ssh_session_free(struct kp_ssh_session *s);

/* The presented host key's fingerprint and which pin it matched. Valid while s lives. */
const char *kp_ssh_session_fingerprint(const struct kp_ssh_session *s);
enum kp_ssh_pin kp_ssh_session_pin(const struct kp_ssh_session *s);

/* Runs command over a new exec channel: streams input (in_len bytes, may be 0) on stdin and
 * then EOF, captures stdout and stderr into cap (tails of KP_MAX_PHASE_OUTPUT each) and the
 * exit status. No pty is requested, so stderr stays separate and stdin is not echoed.
 * Returns 0 when the command ended (whatever its exit status: see cap->exit_status), or:
 *   -ETIMEDOUT  deadline passed: the connection was closed, which ends the remote command
 *               (see runner.h for how the phase preamble makes sure of that); the session is
 *               dead afterwards
 *   -ECANCELED, -KP_ENOTLEADER  the target's ctx was cancelled or its fence closed: likewise
 *               the connection was closed and the session is dead
 *   -EIO        the connection failed (session dead), -ENOTCONN on a dead session
 *   -KP_ELIMIT  in_len > KP_MAX_PHASE_INPUT (nothing sent)
 *   -ENOMEM
 * ret_msg as for kp_ssh_connect. The owning thread only. */
int kp_ssh_exec(struct kp_ssh_session *s, const char *command, const void *input, size_t in_len,
                struct kp_deadline deadline, struct kp_ssh_capture *cap, char **ret_msg) KP_WUR;

#endif
