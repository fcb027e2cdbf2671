/* DESIGN: hermetic tests of provider/ssh/session.c and runner.c against loopback sockets.
 *
 * A listening socket we never accept on is a perfect tarpit: the kernel completes the TCP
 * handshake from its backlog, and nothing ever speaks. The same socket counts dials: accept4
 * with SOCK_NONBLOCK after the call tells whether anything connected. Real sshd hosts are the
 * integration tier's business (tests/integration/test-ssh.c). */
#include "kp-test.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/secret.h"
#include "k8s/fence.h"
#include "provider/ssh/runner.h"

/* An unencrypted ed25519 key made for these tests only. */
static const char test_key[] =
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACABWy7hxsZimn95T0REg8UbqOqKWWkIRzegkgOMBoAB/AAAAJCgtWWgoLVl\n"
    "oAAAAAtzc2gtZWQyNTUxOQAAACABWy7hxsZimn95T0REg8UbqOqKWWkIRzegkgOMBoAB/A\n"
    "AAAECt403n2xgrj3zX8KbRygSuJOC55MMF3IrkZ060xBJ7awFbLuHGxmKaf3lPRESDxRuo\n"
    "6opZaQhHN6CSA4wGgAH8AAAACmtwc3NoLXRlc3QBAgM=\n"
    "-----END OPENSSH PRIVATE KEY-----\n";

struct tarpit {
    int fd;
    uint16_t port;
};

static void tarpit_open(struct tarpit *t)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);

    t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(t->fd >= 0);
    assert_int_equal(bind(t->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(t->fd, 16), 0);
    assert_int_equal(getsockname(t->fd, (struct sockaddr *)&a, &len), 0);
    t->port = ntohs(a.sin_port);
}

/* Connections that reached the socket since the last call (accepted and closed here). */
static unsigned tarpit_dials(struct tarpit *t)
{
    unsigned n = 0;
    int c;

    while ((c = accept4(t->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        close(c);
        n++;
    }
    return n;
}

static struct kp_secret *key_new(void)
{
    struct kp_secret *k = NULL;

    assert_int_equal(kp_secret_new(test_key, strlen(test_key), &k), 0);
    return k;
}

static void test_tarpit_dial_deadline(void **state)
{
    struct tarpit tp;
    struct kp_secret *key = key_new();
    struct kp_ssh_session *s = NULL;
    struct kp_ssh_target t = {
        .host = "127.0.0.1", .private_key = key, .dial_timeout_usec = 300 * KP_USEC_PER_MSEC};
    char *err = NULL;

    (void)state;
    tarpit_open(&tp);
    t.port = tp.port;
    /* The caller's deadline is far away: the dial timeout must end it. */
    assert_int_equal(kp_ssh_connect(&t, kp_deadline_in(600 * KP_USEC_PER_SEC), &s, &err),
                     -ETIMEDOUT);
    assert_null(s);
    assert_non_null(strstr(err, "timed out"));
    assert_int_equal(tarpit_dials(&tp), 1);
    kp_free(err);
    err = NULL;
    /* And the caller's deadline ends it when that is the earlier one. */
    t.dial_timeout_usec = 0;
    assert_int_equal(kp_ssh_connect(&t, kp_deadline_in(200 * KP_USEC_PER_MSEC), &s, &err),
                     -ETIMEDOUT);
    kp_free(err);
    close(tp.fd);
    kp_secret_free(key);
}

/* Cancels a context (or closes a fence) from another thread after a delay, as SIGTERM or a
 * lost Lease does while a session waits on a host that never answers. */
struct canceller {
    pthread_t th;
    struct kp_ctx *ctx;
    struct kp_fence *fence;
    uint64_t after_usec;
};

static void *canceller_main(void *arg)
{
    struct canceller *c = arg;

    kp_sleep_usec(c->after_usec);
    if (c->ctx)
        kp_ctx_cancel(c->ctx);
    if (c->fence)
        kp_fence_set(c->fence, KP_FENCE_CLOSED);
    return NULL;
}

static void test_tarpit_dial_cancelled(void **state)
{
    struct tarpit tp;
    struct kp_secret *key = key_new();
    struct kp_ssh_session *s = NULL;
    struct kp_ctx root, job;
    struct kp_fence fence;
    struct canceller cn = {.after_usec = 200 * KP_USEC_PER_MSEC};
    struct kp_ssh_target t = {.host = "127.0.0.1", .private_key = key};
    char *err = NULL;
    uint64_t t0;

    (void)state;
    tarpit_open(&tp);
    t.port = tp.port;
    t.dial_timeout_usec = 600 * KP_USEC_PER_SEC;
    /* The process's context is cancelled while the job's dial waits: it ends within a slice
     * (before: it waited out its dial timeout, here 10 minutes). */
    kp_ctx_init(&root, NULL, kp_deadline_never());
    kp_ctx_init(&job, &root, kp_deadline_never());
    t.ctx = &job;
    cn.ctx = &root;
    assert_int_equal(pthread_create(&cn.th, NULL, canceller_main, &cn), 0);
    t0 = kp_mono_usec();
    assert_int_equal(kp_ssh_connect(&t, kp_deadline_in(600 * KP_USEC_PER_SEC), &s, &err),
                     -ECANCELED);
    assert_true(kp_mono_usec() - t0 < 5 * KP_USEC_PER_SEC);
    assert_int_equal(pthread_join(cn.th, NULL), 0);
    assert_null(s);
    assert_non_null(strstr(err, "cancelled"));
    kp_free(err);
    err = NULL;
    /* A context that is done already: nothing waits. */
    assert_int_equal(kp_ssh_connect(&t, kp_deadline_in(600 * KP_USEC_PER_SEC), &s, &err),
                     -ECANCELED);
    kp_free(err);
    err = NULL;
    /* The context's deadline bounds the dial like the caller's own. */
    kp_ctx_init(&job, NULL, kp_deadline_in(200 * KP_USEC_PER_MSEC));
    t0 = kp_mono_usec();
    assert_int_equal(kp_ssh_connect(&t, kp_deadline_in(600 * KP_USEC_PER_SEC), &s, &err),
                     -ETIMEDOUT);
    assert_true(kp_mono_usec() - t0 < 5 * KP_USEC_PER_SEC);
    kp_free(err);
    err = NULL;
    /* The write fence closing mid-dial (the Lease deadline passed) ends it too. */
    kp_ctx_init(&job, NULL, kp_deadline_never());
    kp_fence_init(&fence, KP_FENCE_OPEN);
    t.fence = &fence;
    cn.ctx = NULL;
    cn.fence = &fence;
    assert_int_equal(pthread_create(&cn.th, NULL, canceller_main, &cn), 0);
    t0 = kp_mono_usec();
    assert_int_equal(kp_ssh_connect(&t, kp_deadline_in(600 * KP_USEC_PER_SEC), &s, &err),
                     -KP_ENOTLEADER);
    assert_true(kp_mono_usec() - t0 < 5 * KP_USEC_PER_SEC);
    assert_int_equal(pthread_join(cn.th, NULL), 0);
    kp_free(err);
    close(tp.fd);
    kp_secret_free(key);
}

static void test_refused_before_dial(void **state)
{
    static const char *const bad_names[] = {"BASH_ENV", "KPSSH_X;rm", "LD_PRELOAD",
                                            "PATH",     "IFS",        "KPSSH_"};
    struct tarpit tp;
    struct kp_secret *key = key_new(), *nul = NULL;
    struct kp_ssh_target t = {
        .host = "127.0.0.1", .private_key = key, .dial_timeout_usec = 200 * KP_USEC_PER_MSEC};
    struct kp_ssh_capture cap;
    char *err = NULL;

    (void)state;
    tarpit_open(&tp);
    t.port = tp.port;
    assert_int_equal(kp_secret_new("a\0b", 3, &nul), 0);
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad_names); i++) {
        const struct kp_ssh_var vars[] = {{"KPSSH_OK", "1", NULL}, {bad_names[i], "x", NULL}};
        const struct kp_ssh_phase ph = {.name = "join",
                                        .script = "true\n",
                                        .script_len = 5,
                                        .vars = vars,
                                        .nvars = 2,
                                        .deadline = kp_deadline_in(5 * KP_USEC_PER_SEC)};

        kp_ssh_capture_init(&cap);
        assert_int_equal(kp_ssh_run_phase(&t, &ph, &cap, &err), -EINVAL);
        assert_non_null(strstr(err, "is not allowed"));
        kp_free(err);
        err = NULL;
        kp_ssh_capture_done(&cap);
    }
    {
        const struct kp_ssh_var vars[] = {{"KPSSH_NUL", NULL, nul}};
        const struct kp_ssh_phase ph = {.name = "join",
                                        .script = "true\n",
                                        .script_len = 5,
                                        .vars = vars,
                                        .nvars = 1,
                                        .deadline = kp_deadline_in(5 * KP_USEC_PER_SEC)};

        kp_ssh_capture_init(&cap);
        assert_int_equal(kp_ssh_run_phase(&t, &ph, &cap, &err), -EINVAL);
        assert_non_null(strstr(err, "NUL"));
        kp_free(err);
        err = NULL;
        kp_ssh_capture_done(&cap);
    }
    /* A malformed pre-pin or private key is refused before dialing as well. */
    {
        struct kp_ssh_session *s = NULL;
        struct kp_ssh_target t2 = t;
        struct kp_secret *junk = NULL;

        t2.known_host = "@cert-authority * ssh-ed25519 AAAA";
        assert_int_equal(kp_ssh_connect(&t2, kp_deadline_in(KP_USEC_PER_SEC), &s, &err),
                         -KP_EPARSE);
        assert_non_null(strstr(err, "@cert-authority"));
        kp_free(err);
        err = NULL;
        /* A blank pre-pin is refused too, never taken for trust on first use. */
        t2.known_host = " \t\r\n";
        assert_int_equal(kp_ssh_connect(&t2, kp_deadline_in(KP_USEC_PER_SEC), &s, &err), -EINVAL);
        assert_non_null(strstr(err, "pre-pin is empty"));
        kp_free(err);
        err = NULL;
        t2.known_host = NULL;
        t2.tofu_fingerprint = "SHA256:nope";
        assert_int_equal(kp_ssh_connect(&t2, kp_deadline_in(KP_USEC_PER_SEC), &s, &err),
                         -KP_EPARSE);
        kp_free(err);
        err = NULL;
        t2.tofu_fingerprint = NULL;
        assert_int_equal(kp_secret_new("not a key", 9, &junk), 0);
        t2.private_key = junk;
        assert_int_equal(kp_ssh_connect(&t2, kp_deadline_in(KP_USEC_PER_SEC), &s, &err),
                         -KP_EPARSE);
        assert_null(strstr(err, "not a key"));
        kp_free(err);
        err = NULL;
        kp_secret_free(junk);
    }
    assert_int_equal(tarpit_dials(&tp), 0);

    /* The control: a valid phase does dial the same address. */
    {
        const struct kp_ssh_var vars[] = {{"KPSSH_OK", "1", NULL}};
        const struct kp_ssh_phase ph = {.name = "join",
                                        .script = "true\n",
                                        .script_len = 5,
                                        .vars = vars,
                                        .nvars = 1,
                                        .deadline = kp_deadline_in(5 * KP_USEC_PER_SEC)};

        kp_ssh_capture_init(&cap);
        assert_int_equal(kp_ssh_run_phase(&t, &ph, &cap, &err), -ETIMEDOUT);
        assert_non_null(strstr(err, "join phase: "));
        kp_free(err);
        kp_ssh_capture_done(&cap);
    }
    assert_int_equal(tarpit_dials(&tp), 1);
    close(tp.fd);
    kp_secret_free(nul);
    kp_secret_free(key);
}

static void test_bad_targets(void **state)
{
    struct kp_secret *key = key_new();
    struct kp_ssh_session *s = NULL;
    struct kp_ssh_target t = {.host = "root@127.0.0.1", .port = 1, .private_key = key};
    char *err = NULL;

    (void)state;
    assert_int_equal(kp_ssh_connect(&t, kp_deadline_in(KP_USEC_PER_SEC), &s, &err), -EINVAL);
    kp_free(err);
    err = NULL;
    t.host = "127.0.0.1";
    t.user = "a b";
    assert_int_equal(kp_ssh_connect(&t, kp_deadline_in(KP_USEC_PER_SEC), &s, &err), -EINVAL);
    kp_free(err);
    err = NULL;
    /* Nothing listens on port 1 of loopback: refused at once. */
    t.user = NULL;
    assert_int_equal(kp_ssh_connect(&t, kp_deadline_in(5 * KP_USEC_PER_SEC), &s, &err), -EIO);
    assert_non_null(strstr(err, "127.0.0.1:1"));
    kp_free(err);
    kp_secret_free(key);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tarpit_dial_deadline),
        cmocka_unit_test(test_tarpit_dial_cancelled),
        cmocka_unit_test(test_refused_before_dial),
        cmocka_unit_test(test_bad_targets),
    };

    return kp_test_main("session", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
