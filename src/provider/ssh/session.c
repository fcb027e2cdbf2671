/* DESIGN: SSH sessions on libssh (session.h).
 *
 * What: dial one host with a deadline, pin its host key, authenticate with a private key from a
 * kp_secret, and run commands over exec channels with bounded capture.
 *
 * Why this way:
 * - Every libssh call runs in non-blocking mode and every wait is our own poll(2) on the
 *   session's socket, bounded by a kp_deadline. libssh's blocking calls use one per-session
 *   timeout per call, so a peer that trickles bytes (a tarpit that sends a banner line every few
 *   seconds, or a channel that never closes) could hold a worker far past any deadline; here
 *   the dial deadline covers TCP connect, banner, key exchange and authentication together,
 *   and the command deadline covers the whole exec. Name resolution happens inside libssh's
 *   first ssh_connect() call and is not bounded by the deadline. XXX: resolve names ourselves
 *   if pools ever use names that may be slow to resolve; hosts are given as addresses today.
 * - The wait asks libssh which events it wants (ssh_get_poll_flags: POLLOUT while connecting
 *   or while its output buffer is not flushed), and wakes at least every KP_SSH_POLL_SLICE_MS
 *   as a safety net against any state libssh keeps that the socket does not show.
 * - The host key is fingerprinted from its public blob with our own code (knownhosts.c), the
 *   same function that fingerprints pins, so the two cannot disagree about encoding. The pin
 *   is checked before authentication: a man in the middle never sees a signature from our key.
 *   When the pre-pin names key types, libssh is asked for exactly those host-key algorithms,
 *   so a host with several keys presents the pinned one.
 * - libssh reads no config file, no known_hosts file and no ~/.ssh: everything comes from the
 *   target (a controller pod has no home, and a developer's ~/.ssh/config must not change what
 *   the tests see). Its log goes to kp_log at debug level, never to stdout.
 * - Output is captured with kp_buf_append_tail, so a chatty script costs KP_MAX_PHASE_OUTPUT per
 *   stream however much it prints; libssh itself buffers at most one channel window.
 *
 * - libssh 0.10 keeps its log level and log callback in thread-local variables (log.c), not
 *   per process: set once under pthread_once they covered only the thread that dialed first,
 *   and every other runner thread's protocol log was silently dropped. So each thread sets them
 *   on its first call (kp_ssh_thread_init). At debug level libssh logs at SSH_LOG_PROTOCOL:
 *   key exchange, authentication, channel open, exec accepted, keepalives, about 25 lines per
 *   session; SSH_LOG_PACKET would add lines per data packet (thousands for a chatty script).
 * - A timed-out exec says how far it got (channel opened, command accepted, input and EOF sent,
 *   output bytes, exit status): "accepted, no exit status" means the remote side was still busy,
 *   which includes the login shell's startup files (sshd runs every command through the user's
 *   shell, and Debian's bash then sources ~/.bashrc even though it is not interactive; see
 *   docs/internals/ssh.md for the 100-session stall that turned out to be exactly that).
 * - After the TCP connect libssh puts the socket back into blocking mode (socket.c,
 *   ssh_socket_pollcallback), and a send() to a peer that has stopped reading, or reads slowly,
 *   then blocks until TCP gives up. We set it non-blocking again as the connect goes on
 *   (kp_ssh_keep_nonblocking), so the deadline holds on a crawling link too.
 * - Cancellation rides on the same waits: each one first looks at the target's context
 *   (base/ctx.h: the SSH job's, under the reconcile's and the process's) and its write fence,
 *   so a SIGTERM, a lost Lease or a closed fence ends a session stuck on a host that never
 *   answers within one poll slice, and the connection is closed as after a deadline (which is
 *   what makes the remote watchdog end the script).
 *
 * Threads: a session and its channels belong to one thread (the job's). libssh's global
 * initialisation runs once under pthread_once; its per-thread log settings on each thread's
 * first call; after that, sessions are independent.
 * Invariant: once a deadline or a transport error has closed the connection, s->dead is set and
 * nothing else is sent on it. */
#include "provider/ssh/session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/secret.h"
#include "k8s/fence.h"

#define KP_SSH_READ_CHUNK (16 * 1024)
#define KP_SSH_WRITE_CHUNK (32 * 1024)
#define KP_SSH_SIGNAL_NAME_MAX 32

struct kp_ssh_session {
    ssh_session ssh;
    char *host;
    uint16_t port;
    char fp[KP_SSH_FP_SIZE];
    enum kp_ssh_pin pin;
    bool dead;
    const struct kp_ctx *ctx;     /* the target's, borrowed (may be NULL) */
    const struct kp_fence *fence; /* likewise */
};

static pthread_once_t kp_ssh_once = PTHREAD_ONCE_INIT;
static int kp_ssh_init_result;

/* libssh's log, at whatever level start-up chose, goes to our debug log (redacted there). */
static void kp_ssh_log_cb(int priority, const char *function, const char *buffer, void *userdata)
{
    (void)userdata;
    /* A session lives on one thread, so the thread id tells concurrent sessions' lines apart. */
    kp_log_debug("libssh", KP_LF("libssh_priority", priority), KP_LF("libssh_func", function),
                 KP_LF("thread", (long)gettid()), KP_LF("detail", buffer));
}

static void kp_ssh_global_init(void)
{
    if (ssh_init() != SSH_OK)
        kp_ssh_init_result = -EIO;
}

/* libssh's log level and callback are thread-local (see DESIGN): set them on this thread. */
static _Thread_local bool kp_ssh_thread_ready;

static void kp_ssh_thread_init(void)
{
    if (kp_ssh_thread_ready)
        return;
    (void)ssh_set_log_callback(kp_ssh_log_cb); /* cannot fail for a non-NULL callback */
    /* Protocol chatter only when debug logs were asked for before this thread's first call. */
    (void)ssh_set_log_level(kp_log_enabled(KP_LOG_DEBUG) ? SSH_LOG_PROTOCOL : SSH_LOG_NOLOG);
    kp_ssh_thread_ready = true;
}

void kp_ssh_capture_init(struct kp_ssh_capture *c)
{
    memset(c, 0, sizeof(*c));
    kp_buf_init(&c->out, KP_MAX_PHASE_OUTPUT);
    kp_buf_init(&c->err, KP_MAX_PHASE_OUTPUT);
    c->exit_status = -1;
}

void kp_ssh_capture_done(struct kp_ssh_capture *c)
{
    kp_buf_wipe(&c->out);
    kp_buf_wipe(&c->err);
    kp_free(c->exit_signal);
    c->exit_signal = NULL;
    c->exit_status = -1;
}

/* libssh switches the socket to blocking mode when the TCP connect completes (socket.c,
 * ssh_socket_pollcallback), and then writes its whole output buffer with one send() whenever
 * poll reports POLLOUT. On a blocking socket that send waits until the peer has taken all of it,
 * which on a link that slows to a crawl is minutes past any deadline (integration/ssh
 * slow_link_deadline measured 207 s for an 8 s one). Non-blocking, the send takes what fits and
 * libssh keeps the rest for the next POLLOUT. libssh writes only after a POLLOUT, so EAGAIN needs
 * the space it saw to vanish in between (socket memory pressure); it then fails the session,
 * which ends the call early with an error instead of late. libssh turns the socket blocking only
 * there, so this runs only in kp_ssh_connect: after every ssh_connect() step and once it is done.
 * The socket is blocking at most for the rest of the ssh_connect() call in which TCP connected
 * (the client banner and KEXINIT, a few hundred bytes into an empty buffer). */
static void kp_ssh_keep_nonblocking(ssh_session ssh)
{
    int fd = ssh_get_fd(ssh), fl;

    if (fd < 0)
        return;
    fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK))
        (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Waits until the socket is ready for what libssh wants, or a slice passes. 0, -ETIMEDOUT (dl
 * or the context's deadline passed), -ECANCELED (the context was cancelled) or -KP_ENOTLEADER
 * (the fence closed): a caller that gets an error gives up the call. */
static int kp_ssh_wait(struct kp_ssh_session *s, struct kp_deadline dl)
{
    struct pollfd pfd;
    int ms, flags, r;

    if ((r = kp_ctx_err(s->ctx)) < 0 || (r = kp_fence_check(s->fence)) < 0)
        return r;
    ms = kp_deadline_left_ms(kp_deadline_min(dl, kp_ctx_deadline(s->ctx)));
    if (ms == 0)
        return -ETIMEDOUT;
    if (ms < 0 || ms > KP_SSH_POLL_SLICE_MS)
        ms = KP_SSH_POLL_SLICE_MS;
    pfd.fd = ssh_get_fd(s->ssh);
    if (pfd.fd < 0) {
        kp_sleep_usec((uint64_t)ms * KP_USEC_PER_MSEC);
        return 0;
    }
    flags = ssh_get_poll_flags(s->ssh);
    pfd.events = POLLIN | ((flags & SSH_WRITE_PENDING) ? POLLOUT : 0);
    pfd.revents = 0;
    /* EINTR and every outcome are handled the same way: the caller asks libssh again. */
    (void)poll(&pfd, 1, ms);
    return 0;
}

/* What a wait that gave up says, for the error texts. */
static const char *kp_ssh_wait_why(int r)
{
    return r == -ECANCELED       ? "cancelled"
           : r == -KP_ENOTLEADER ? "stopped: this replica no longer leads"
                                 : "timed out";
}

static bool kp_ssh_name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 253)
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == '@' || *p == 0x7f)
            return false;
    return true;
}

static bool kp_ssh_blank(const char *s)
{
    for (; s && *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
            return false;
    return true;
}

static const char *kp_ssh_pin_name(enum kp_ssh_pin pin)
{
    return pin == KP_SSH_PIN_PREPIN ? "knownHost pre-pin" : "recorded TOFU fingerprint";
}

static int kp_ssh_set_options(struct kp_ssh_session *s, const struct kp_ssh_target *t,
                              const char *user, const char *algorithms, uint64_t dial_usec)
{
    int port = t->port ? t->port : 22;
    int yes = 1, no = 0;
    long timeout_sec = (long)(dial_usec / KP_USEC_PER_SEC) + 1;
    ssh_session ssh = s->ssh;

    if (ssh_options_set(ssh, SSH_OPTIONS_PROCESS_CONFIG, &no) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_HOST, t->host) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_PORT, &port) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_USER, user) < 0 ||
        /* No file of the local user takes part: see DESIGN. */
        ssh_options_set(ssh, SSH_OPTIONS_SSH_DIR, "/nonexistent") < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_KNOWNHOSTS, "/dev/null") < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_PASSWORD_AUTH, &no) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_KBDINT_AUTH, &no) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_GSSAPI_AUTH, &no) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_PUBKEY_AUTH, &yes) < 0 ||
        /* Phases are request/response: Nagle would add a round trip to every exchange. */
        ssh_options_set(ssh, SSH_OPTIONS_NODELAY, &yes) < 0 ||
        /* A backstop only: every call below is non-blocking and bounded by our deadline. */
        ssh_options_set(ssh, SSH_OPTIONS_TIMEOUT, &timeout_sec) < 0)
        return -EINVAL;
    if (algorithms && *algorithms && ssh_options_set(ssh, SSH_OPTIONS_HOSTKEYS, algorithms) < 0)
        return -EINVAL;
    return 0;
}

/* Fingerprints the server's host key into s->fp. */
static int kp_ssh_server_fingerprint(struct kp_ssh_session *s, char **ret_msg)
{
    ssh_key key = NULL;
    char *b64 = NULL;
    const char *kt = NULL;
    int r;

    if (ssh_get_server_publickey(s->ssh, &key) != SSH_OK ||
        ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK) {
        kp_msg_set(ret_msg, "%s:%u: cannot read the host key: %s", s->host, s->port,
                   ssh_get_error(s->ssh));
        r = -EIO;
        goto out;
    }
    r = kp_ssh_key_fingerprint(b64, strlen(b64), s->fp, &kt);
    if (r < 0) {
        kp_msg_set(ret_msg, "%s:%u: host key of an unsupported type cannot be pinned", s->host,
                   s->port);
        r = r == -KP_EPARSE ? -KP_EHOSTKEY : r;
        goto out;
    }
    r = 0;
out:
    ssh_string_free_char(b64);
    ssh_key_free(key);
    return r;
}

int kp_ssh_connect(const struct kp_ssh_target *t, struct kp_deadline deadline,
                   struct kp_ssh_session **ret_session, char **ret_msg)
{
    struct kp_ssh_session *s = NULL;
    struct kp_knownhosts kh;
    struct kp_knownhosts_error kherr = {0, NULL};
    struct kp_buf algos = KP_BUF_INIT(1024);
    char tofu[KP_SSH_FP_SIZE];
    ssh_key pkey = NULL;
    const char *user = (t->user && *t->user) ? t->user : "root";
    bool have_prepin = false, have_tofu = false;
    uint64_t dial_usec = t->dial_timeout_usec ? t->dial_timeout_usec : KP_SSH_DIAL_TIMEOUT_USEC;
    struct kp_deadline dl = kp_deadline_min(deadline, kp_deadline_in(dial_usec));
    unsigned port = t->port ? t->port : 22;
    int r, rc;

    if (!kp_ssh_name_ok(t->host) || !kp_ssh_name_ok(user) || !t->private_key) {
        kp_msg_set(ret_msg, "invalid SSH target (host, user and private key are required; "
                            "no spaces or '@')");
        r = -EINVAL;
        goto out;
    }
    if ((r = pthread_once(&kp_ssh_once, kp_ssh_global_init)) != 0 || (r = kp_ssh_init_result) < 0) {
        kp_msg_set(ret_msg, "libssh failed to initialise");
        r = r > 0 ? -r : -EIO;
        goto out;
    }
    kp_ssh_thread_init();

    /* Everything that can be refused without the network is refused before dialing. A pre-pin
     * that is there but blank is a mistake (hostio.c refuses it first, with the Secret's name),
     * never a request for trust on first use. */
    if (t->known_host && kp_ssh_blank(t->known_host)) {
        kp_msg_set(ret_msg,
                   "%s:%u: the knownHost pre-pin is empty; refusing to trust the host's key "
                   "on first use",
                   t->host, port);
        r = -EINVAL;
        goto out;
    }
    if (t->known_host) {
        r = kp_knownhosts_parse(t->known_host, strlen(t->known_host), t->host, (uint16_t)port, &kh,
                                &kherr);
        if (r == -ENOENT) {
            kp_msg_set(ret_msg,
                       "%s:%u: the knownHost pre-pin names no key for this host; refusing "
                       "to connect unpinned",
                       t->host, port);
            r = -KP_EHOSTKEY;
            goto out;
        }
        if (r < 0) {
            kp_msg_set(ret_msg, "knownHost pre-pin for %s:%u, line %u: %s", t->host, port,
                       kherr.line, kherr.reason);
            r = r == -KP_ELIMIT ? -KP_EPARSE : r;
            goto out;
        }
        have_prepin = true;
        if ((r = kp_knownhosts_algorithms(&kh, &algos)) < 0)
            goto out;
    } else if (t->tofu_fingerprint && *t->tofu_fingerprint) {
        r = kp_ssh_fingerprint_parse(t->tofu_fingerprint, strlen(t->tofu_fingerprint), tofu);
        if (r < 0) {
            kp_msg_set(ret_msg, "%s:%u: recorded host key fingerprint is malformed", t->host, port);
            goto out;
        }
        have_tofu = true;
    }
    if (ssh_pki_import_privkey_base64(kp_secret_reveal(t->private_key), /* passphrase= */ NULL,
                                      NULL, NULL, &pkey) != SSH_OK) {
        kp_msg_set(ret_msg,
                   "private key for %s:%u cannot be read (expected an unencrypted "
                   "PEM ed25519, ECDSA or RSA key)",
                   t->host, port);
        r = -KP_EPARSE;
        goto out;
    }

    s = kp_calloc(1, sizeof(*s));
    if (!s || !(s->host = kp_strdup(t->host))) {
        r = -ENOMEM;
        goto out;
    }
    s->port = (uint16_t)port;
    s->ctx = t->ctx;
    s->fence = t->fence;
    s->ssh = ssh_new();
    if (!s->ssh) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = kp_ssh_set_options(s, t, user, kp_buf_str(&algos), dial_usec)) < 0) {
        kp_msg_set(ret_msg, "%s:%u: libssh refused an option: %s", t->host, port,
                   ssh_get_error(s->ssh));
        goto out;
    }
    ssh_set_blocking(s->ssh, 0);

    while ((rc = ssh_connect(s->ssh)) == SSH_AGAIN) {
        kp_ssh_keep_nonblocking(s->ssh); /* the TCP connect may have just completed */
        if ((r = kp_ssh_wait(s, dl)) < 0) {
            kp_msg_set(ret_msg, "%s:%u: connect and handshake %s", t->host, port,
                       kp_ssh_wait_why(r));
            goto out;
        }
    }
    if (rc != SSH_OK) {
        kp_msg_set(ret_msg, "%s:%u: connect failed: %s", t->host, port, ssh_get_error(s->ssh));
        r = -EIO;
        goto out;
    }
    kp_ssh_keep_nonblocking(s->ssh);

    if ((r = kp_ssh_server_fingerprint(s, ret_msg)) < 0)
        goto out;
    if (have_prepin) {
        if (kp_knownhosts_check(&kh, s->fp) < 0) {
            kp_msg_set(ret_msg,
                       "host key mismatch for %s:%u: pinned %s%s (%s), got %s: possible "
                       "man-in-the-middle; if the host was re-keyed on purpose, update the "
                       "pin",
                       t->host, port, kh.keys[0].fp, kh.nkeys > 1 ? " and others" : "",
                       kp_ssh_pin_name(KP_SSH_PIN_PREPIN), s->fp);
            r = -KP_EHOSTKEY;
            goto out;
        }
        s->pin = KP_SSH_PIN_PREPIN;
    } else if (have_tofu) {
        if (strcmp(tofu, s->fp) != 0) {
            kp_msg_set(ret_msg,
                       "host key mismatch for %s:%u: pinned %s (%s), got %s: possible "
                       "man-in-the-middle; if the host was re-keyed on purpose, clear "
                       "status.hostKeyFingerprint to pin again",
                       t->host, port, tofu, kp_ssh_pin_name(KP_SSH_PIN_TOFU), s->fp);
            r = -KP_EHOSTKEY;
            goto out;
        }
        s->pin = KP_SSH_PIN_TOFU;
    } else {
        s->pin = KP_SSH_PIN_NONE;
    }

    while ((rc = ssh_userauth_publickey(s->ssh, /* username= */ NULL, pkey)) == SSH_AUTH_AGAIN) {
        if ((r = kp_ssh_wait(s, dl)) < 0) {
            kp_msg_set(ret_msg, "%s:%u: authentication %s", t->host, port, kp_ssh_wait_why(r));
            goto out;
        }
    }
    if (rc != SSH_AUTH_SUCCESS) {
        kp_msg_set(ret_msg, "%s:%u: public-key authentication as %s failed%s%s", t->host, port,
                   user, rc == SSH_AUTH_ERROR ? ": " : " (key not accepted)",
                   rc == SSH_AUTH_ERROR ? ssh_get_error(s->ssh) : "");
        r = rc == SSH_AUTH_ERROR ? -EIO : -KP_EAUTH;
        goto out;
    }

    *ret_session = s;
    s = NULL; /* the caller owns it now */
    r = 0;
out:
    ssh_key_free(pkey);
    kp_buf_done(&algos);
    kp_ssh_session_free(s);
    return r;
}

struct kp_ssh_session *kp_ssh_session_free(struct kp_ssh_session *s)
{
    if (!s)
        return NULL;
    if (s->ssh) {
        if (!s->dead && ssh_is_connected(s->ssh))
            ssh_disconnect(s->ssh);
        ssh_free(s->ssh);
    }
    kp_free(s->host);
    kp_free(s);
    return NULL;
}

const char *kp_ssh_session_fingerprint(const struct kp_ssh_session *s)
{
    return s->fp;
}

enum kp_ssh_pin kp_ssh_session_pin(const struct kp_ssh_session *s)
{
    return s->pin;
}

/* The channel's exit report, filled by libssh callbacks while we pump the session. */
struct kp_ssh_exit {
    bool have_status;
    int status;
    char *signal;
};

static void kp_ssh_on_exit_status(ssh_session session, ssh_channel channel, int exit_status,
                                  void *userdata)
{
    struct kp_ssh_exit *e = userdata;

    (void)session;
    (void)channel;
    e->have_status = true;
    e->status = exit_status;
}

static void kp_ssh_on_exit_signal(ssh_session session, ssh_channel channel, const char *signal,
                                  int core, const char *errmsg, const char *lang, void *userdata)
{
    struct kp_ssh_exit *e = userdata;

    (void)session;
    (void)channel;
    (void)core;
    (void)errmsg;
    (void)lang;
    if (signal && !e->signal) /* NULL on -ENOMEM: the command still counts as signalled */
        e->signal = kp_strndup(signal, KP_SSH_SIGNAL_NAME_MAX);
    e->have_status = true;
    e->status = -1;
}

/* How far one exec got: named in the error text when its deadline passes. */
struct kp_ssh_progress {
    uint64_t t0;         /* kp_mono_usec() when kp_ssh_exec started */
    uint64_t opened_at;  /* ... when the channel was open, or 0 */
    uint64_t started_at; /* ... when the server accepted the exec request, or 0 */
    size_t in_sent, in_len;
    bool eof_sent;
    uint64_t out_bytes; /* stdout and stderr bytes received, including those dropped */
};

/* Moves whatever libssh holds for one stream into the capture. 1 when bytes moved, 0 when
 * none, or a negative error. */
static int kp_ssh_drain(ssh_channel ch, int is_stderr, struct kp_buf *b, char *chunk,
                        struct kp_ssh_progress *pg)
{
    int moved = 0;

    for (;;) {
        int n = ssh_channel_read_nonblocking(ch, chunk, KP_SSH_READ_CHUNK, is_stderr);
        int r;

        if (n == SSH_EOF || n == 0)
            return moved;
        if (n < 0)
            return -EIO;
        if ((r = kp_buf_append_tail(b, chunk, (size_t)n)) < 0)
            return r;
        pg->out_bytes += (uint64_t)n;
        moved = 1;
    }
}

/* Kills the connection: after a deadline or a transport error nothing more is said on it. */
static void kp_ssh_kill(struct kp_ssh_session *s)
{
    if (!s->dead && ssh_is_connected(s->ssh))
        ssh_disconnect(s->ssh);
    s->dead = true;
}

static double kp_ssh_secs(uint64_t from, uint64_t to)
{
    return (double)(to - from) / (double)KP_USEC_PER_SEC;
}

/* The deadline passed (why: -ETIMEDOUT), or the call was cancelled or fenced (why: that code):
 * says at which step, so that "the server never answered" and "the command (or the login shell
 * around it) was still running" read differently. Returns why. */
static int kp_ssh_exec_timeout(struct kp_ssh_session *s, const struct kp_ssh_progress *pg, int why,
                               char **ret_msg)
{
    uint64_t now = kp_mono_usec();
    const char *what = why == -ETIMEDOUT ? "" : why == -ECANCELED ? "cancelled: " : "fenced: ";

    if (!pg->opened_at)
        kp_msg_set(ret_msg, "%s:%u: %sno channel after %.1f s; connection closed", s->host, s->port,
                   what, kp_ssh_secs(pg->t0, now));
    else if (!pg->started_at)
        kp_msg_set(ret_msg,
                   "%s:%u: %scommand not accepted after %.1f s (channel open after %.1f s); "
                   "connection closed",
                   s->host, s->port, what, kp_ssh_secs(pg->t0, now),
                   kp_ssh_secs(pg->t0, pg->opened_at));
    else
        kp_msg_set(ret_msg,
                   "%s:%u: %sno exit status after %.1f s (command accepted after %.1f s; "
                   "%zu of %zu input bytes%s sent; %llu output bytes received); "
                   "connection closed",
                   s->host, s->port, what, kp_ssh_secs(pg->t0, now),
                   kp_ssh_secs(pg->t0, pg->started_at), pg->in_sent, pg->in_len,
                   pg->eof_sent ? " and EOF" : "", (unsigned long long)pg->out_bytes);
    return why;
}

static int kp_ssh_exec_ioerr(struct kp_ssh_session *s, char **ret_msg)
{
    kp_msg_set(ret_msg, "%s:%u: command failed: %s", s->host, s->port, ssh_get_error(s->ssh));
    return -EIO;
}

int kp_ssh_exec(struct kp_ssh_session *s, const char *command, const void *input, size_t in_len,
                struct kp_deadline deadline, struct kp_ssh_capture *cap, char **ret_msg)
{
    struct ssh_channel_callbacks_struct cb;
    struct kp_ssh_exit ex = {false, -1, NULL};
    struct kp_ssh_progress pg = {.t0 = kp_mono_usec(), .in_len = in_len};
    ssh_channel ch = NULL;
    bool cb_set = false, eof_sent = false;
    uint64_t exit_seen_at = 0;
    size_t off = 0;
    char *chunk = NULL;
    int r, rc = SSH_ERROR;

    kp_ssh_thread_init();
    if (s->dead) {
        kp_msg_set(ret_msg, "%s:%u: connection already closed", s->host, s->port);
        r = -ENOTCONN;
        goto out;
    }
    if (in_len > KP_MAX_PHASE_INPUT) {
        kp_msg_set(ret_msg, "%s:%u: command input of %zu bytes exceeds %u", s->host, s->port,
                   in_len, (unsigned)KP_MAX_PHASE_INPUT);
        r = -KP_ELIMIT;
        goto out;
    }
    /* The read chunk is heap memory: it holds remote bytes only on their way into the capped
     * capture buffers. */
    chunk = kp_malloc(KP_SSH_READ_CHUNK);
    ch = ssh_channel_new(s->ssh);
    if (!chunk || !ch) {
        r = -ENOMEM;
        goto out;
    }
    /* Room for both tails up front: output may quote secrets, and growing by realloc would
     * leave unwiped copies behind. */
    if ((r = kp_buf_reserve(&cap->out, cap->out.max - cap->out.len)) < 0 ||
        (r = kp_buf_reserve(&cap->err, cap->err.max - cap->err.len)) < 0)
        goto out;
    while (r == 0 && (rc = ssh_channel_open_session(ch)) == SSH_AGAIN)
        r = kp_ssh_wait(s, deadline);
    if (r < 0 || rc != SSH_OK) {
        r = r < 0 ? kp_ssh_exec_timeout(s, &pg, r, ret_msg) : kp_ssh_exec_ioerr(s, ret_msg);
        goto out;
    }
    pg.opened_at = kp_mono_usec();

    memset(&cb, 0, sizeof(cb));
    cb.userdata = &ex;
    cb.channel_exit_status_function = kp_ssh_on_exit_status;
    cb.channel_exit_signal_function = kp_ssh_on_exit_signal;
    ssh_callbacks_init(&cb);
    if (ssh_set_channel_callbacks(ch, &cb) != SSH_OK) {
        r = -ENOMEM;
        goto out;
    }
    cb_set = true;

    while (r == 0 && (rc = ssh_channel_request_exec(ch, command)) == SSH_AGAIN)
        r = kp_ssh_wait(s, deadline);
    if (r < 0 || rc != SSH_OK) {
        r = r < 0 ? kp_ssh_exec_timeout(s, &pg, r, ret_msg) : kp_ssh_exec_ioerr(s, ret_msg);
        goto out;
    }
    pg.started_at = kp_mono_usec();

    for (;;) {
        bool progress = false;
        int n;

        if (!eof_sent && off < in_len) {
            n = ssh_channel_write(ch, (const char *)input + off,
                                  (uint32_t)KP_MIN(in_len - off, (size_t)KP_SSH_WRITE_CHUNK));
            if (n == SSH_ERROR && !ssh_is_connected(s->ssh)) {
                r = kp_ssh_exec_ioerr(s, ret_msg);
                goto out;
            }
            if (n == SSH_ERROR) {
                /* The command stopped reading (it exited or closed stdin): stop feeding it. */
                eof_sent = true;
            } else if (n > 0) {
                off += (size_t)n;
                pg.in_sent = off;
                progress = true;
            }
        }
        if (!eof_sent && off == in_len) {
            /* Fails only when the channel is already closing, which ends the loop anyway. */
            (void)ssh_channel_send_eof(ch);
            eof_sent = true;
            pg.eof_sent = true;
        }
        for (int is_stderr = 0; is_stderr <= 1; is_stderr++) {
            r = kp_ssh_drain(ch, is_stderr, is_stderr ? &cap->err : &cap->out, chunk, &pg);
            if (r == -EIO)
                r = kp_ssh_exec_ioerr(s, ret_msg);
            if (r < 0)
                goto out;
            progress = progress || r > 0;
        }
        /* Pumps the session once while no exit report has arrived. */
        (void)ssh_channel_get_exit_status(ch);
        if (!ssh_is_connected(s->ssh)) {
            r = kp_ssh_exec_ioerr(s, ret_msg);
            goto out;
        }

        if (ssh_channel_is_eof(ch) && (ex.have_status || ssh_channel_is_closed(ch)))
            break;
        if (ssh_channel_is_closed(ch) && ssh_channel_poll(ch, 0) <= 0 &&
            ssh_channel_poll(ch, 1) <= 0)
            break;
        if (ex.have_status) {
            if (exit_seen_at == 0)
                exit_seen_at = kp_mono_usec();
            else if (kp_mono_usec() - exit_seen_at > KP_SSH_EXIT_DRAIN_USEC)
                break; /* something the command left behind holds its streams open */
        }
        if (progress)
            continue;
        if ((r = kp_ssh_wait(s, deadline)) < 0) {
            r = kp_ssh_exec_timeout(s, &pg, r, ret_msg);
            goto out;
        }
    }
    cap->exit_status = ex.have_status ? ex.status : -1;
    kp_free(cap->exit_signal);
    cap->exit_signal = ex.signal;
    ex.signal = NULL;
    /* A polite close; the session stays usable for the next command. */
    (void)ssh_channel_close(ch);
    r = 0;
out:
    /* The channel goes first: ssh_disconnect() frees every channel of the session. */
    if (ch) {
        if (cb_set)
            (void)ssh_remove_channel_callbacks(ch, &cb);
        ssh_channel_free(ch);
    }
    if (r == -ETIMEDOUT || r == -EIO || r == -ECANCELED || r == -KP_ENOTLEADER)
        kp_ssh_kill(s); /* closing the connection is what stops the remote command */
    kp_free(ex.signal);
    kp_free(chunk);
    return r;
}
