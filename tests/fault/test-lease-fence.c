/* tests/fault/test-lease-fence.c: the Lease keeper and the write fence against a scripted API
 * server (fault-server.h) that stops answering.
 *
 * What a real API server cannot be made to do on cue is hang one renewal for longer than the
 * renew deadline, or fail every renewal for exactly as long as we like; the scripted server
 * can. Both cases check the safety property of leader election: the fence is closed no later
 * than the renew deadline after the last successful renewal began, whatever the keeper thread
 * is doing, and a fenced client sends nothing (the script would report any extra request as a
 * mismatch). The first case then shows the way back: the keeper notifies, the candidate stands
 * by while another holds the Lease, takes it again once it is free, and releases it.
 *
 * The assertions that involve time only ever check a deadline that must already have passed
 * ("closed by now"), so a slow machine can delay them but not make them fail. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fault-server.h"
#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/fence.h"
#include "k8s/lease.h"

#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
#define LEASES_PATH "/apis/coordination.k8s.io/v1/namespaces/ns/leases "
#define LEASE_BODY(holder, rv)                                                                     \
    "body {\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"   \
    "\"l\",\"namespace\":\"ns\",\"resourceVersion\":\"" rv                                         \
    "\"},\"spec\":{\"holderIdentity\":\"" holder                                                   \
    "\",\"leaseDurationSeconds\":2,\"leaseTransitions\":0,\"renewTime\":"                          \
    "\"2026-01-01T00:00:00.000000Z\"}}\n"
#define NOT_FOUND                                                                                  \
    "status 404\nbody {\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","          \
    "\"reason\":\"NotFound\",\"code\":404}\n"

#define RENEW_DEADLINE_USEC (1000 * KP_USEC_PER_MSEC)

/* The script's opening: the Lease does not exist and our create wins it. */
#define ACQUIRE                                                                                    \
    "request GET " LEASE_PATH "\n" NOT_FOUND "request POST " LEASES_PATH                           \
    "\nstatus 201\n" LEASE_BODY("me", "1")

struct rig {
    struct kp_fault_server *srv;
    struct kp_client *c;     /* fenced like the controllers' clients */
    struct kp_client *lease; /* the leader's own client: never fenced */
    struct kp_leader *l;
    struct kp_fence fence;
    struct kp_ctx term; /* what the keeper cancels on loss */
    int efd;
};

static void rig_start(struct rig *g, const char *script)
{
    struct kp_transport_opts to = {.allow_plain_http = true, .timeout_usec = 5 * KP_USEC_PER_SEC};
    struct kp_leader_opts lo = {
        .ns = "ns",
        .name = "l",
        .identity = "me",
        .lease_usec = 2 * KP_USEC_PER_SEC,
        .renew_deadline_usec = RENEW_DEADLINE_USEC,
        .retry_usec = 300 * KP_USEC_PER_MSEC,
    };
    char url[64];

    memset(g, 0, sizeof(*g));
    g->srv = kp_fault_server_start(script);
    assert_non_null(g->srv);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)kp_fault_server_port(g->srv));
    to.server = url;
    assert_int_equal(kp_client_new(&to, &g->lease), 0);
    assert_int_equal(kp_client_new(&to, &g->c), 0);
    kp_fence_init(&g->fence, KP_FENCE_CLOSED);
    kp_client_set_fence(g->c, &g->fence);
    assert_int_equal(kp_leader_new(g->lease, &lo, &g->l), 0);
    g->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    assert_true(g->efd >= 0);
}

static void rig_stop(struct rig *g)
{
    const char *err = kp_fault_server_error(g->srv);

    if (err)
        fail_msg("server: %s", err);
    g->l = kp_leader_free(g->l);
    g->c = kp_client_free(g->c);
    g->lease = kp_client_free(g->lease);
    kp_fault_server_stop(g->srv);
    close(g->efd);
}

/* A write through the fenced client: a Lease create, which any open fence would let through to
 * the server (and so into a script mismatch). */
static int fenced_write(struct rig *g)
{
    struct kp_error err = KP_ERROR_INIT;
    json_t *doc = NULL;
    int r;

    assert_int_equal(kp_json_patch_new(&doc), 0);
    r = kp_client_create(g->c, &KP_RES_LEASE, "ns", doc, NULL, &err);
    kp_error_done(&err);
    kp_json_unref(doc);
    return r;
}

static void wait_served(struct kp_fault_server *srv, size_t n)
{
    struct kp_deadline d = kp_deadline_in(20 * KP_USEC_PER_SEC);

    while (kp_fault_server_served(srv) < n && !kp_deadline_expired(d) &&
           !kp_fault_server_error(srv))
        kp_sleep_usec(KP_USEC_PER_MSEC);
    assert_null(kp_fault_server_error(srv));
    assert_true(kp_fault_server_served(srv) >= n);
}

static void sleep_until(uint64_t at)
{
    uint64_t now = kp_mono_usec();

    if (now < at)
        kp_sleep_usec(at - now);
}

/* True when efd was written within 20 s (the keeper's loss notice). */
static bool notified(int efd)
{
    struct pollfd p = {.fd = efd, .events = POLLIN};
    uint64_t n = 0;

    return poll(&p, 1, 20000) == 1 && read(efd, &n, sizeof(n)) == (ssize_t)sizeof(n) && n >= 1;
}

static void acquire(struct rig *g, uint64_t *ret_after)
{
    struct kp_error err = KP_ERROR_INIT;
    bool leader = false;

    assert_int_equal(kp_leader_try(g->l, &leader, &err), 0);
    *ret_after = kp_mono_usec(); /* the attempt began before this */
    kp_error_done(&err);
    assert_true(leader);
    assert_int_equal(kp_fence_check(&g->fence), -KP_ENOTLEADER); /* not open before the keeper */
    kp_ctx_init(&g->term, NULL, kp_deadline_never()); /* a term per win, as main makes it */
    assert_int_equal(kp_leader_keep_start(g->l, &g->fence, &g->term, g->efd), 0);
    assert_int_equal(kp_leader_keep_start(g->l, &g->fence, &g->term, g->efd), -EALREADY);
}

/* One renewal succeeds, the next hangs for 2.5 s (longer than the 1 s renew deadline). */
static void test_hung_renewal(void **state)
{
    /* One exchange a line reads better than clang-format's packing. */
    /* clang-format off */
    static const char script[] =
        ACQUIRE
        /* the keeper's first renewal */
        "request GET " LEASE_PATH "\nstatus 200\n" LEASE_BODY("me", "1")
        "request PUT " LEASE_PATH "\nstatus 200\n" LEASE_BODY("me", "2")
        /* the second one hangs: headers, then nothing until the connection closes */
        "request GET " LEASE_PATH "\nstatus 503 stream\nsleep 2500\n"
        /* standing by: another replica took the Lease meanwhile */
        "request GET " LEASE_PATH "\nstatus 200\n" LEASE_BODY("other", "3")
        /* ... and released it: ours again */
        "request GET " LEASE_PATH "\nstatus 200\n" LEASE_BODY("", "4")
        "request PUT " LEASE_PATH "\nstatus 200\n" LEASE_BODY("me", "5")
        /* SIGTERM: release */
        "request GET " LEASE_PATH "\nstatus 200\n" LEASE_BODY("me", "5")
        "request PUT " LEASE_PATH "\nstatus 200\n" LEASE_BODY("", "6");
    /* clang-format on */
    struct kp_error err = KP_ERROR_INIT;
    enum kp_leader_release rel = KP_LEADER_NOT_LEADING;
    struct rig g;
    uint64_t t, renewed;
    bool leader = true;

    (void)state;
    rig_start(&g, script);
    acquire(&g, &t);
    assert_int_equal(kp_fence_check(&g.fence), 0); /* open: about 1 s left */

    /* The renewal is served (4 exchanges): it began before this instant, so its deadline is
     * before renewed + the renew deadline, and the hung request cannot move it. */
    wait_served(g.srv, 4);
    renewed = kp_mono_usec();
    sleep_until(renewed + RENEW_DEADLINE_USEC + KP_USEC_PER_MSEC);
    assert_int_equal(kp_fence_check(&g.fence), -KP_ENOTLEADER);
    assert_int_equal(fenced_write(&g), -KP_ENOTLEADER);
    printf("# fence closed %llu ms after the renewal was served; keeper %s\n",
           (unsigned long long)((kp_mono_usec() - renewed) / 1000),
           kp_leader_keep_lost(g.l) ? "done" : "still in its hung request");

    /* The hung request ends; the keeper sees the deadline passed, tries no more, notifies. */
    assert_true(notified(g.efd));
    assert_true(kp_leader_keep_lost(g.l));
    assert_int_equal(kp_ctx_err(&g.term), -ECANCELED); /* the term's work stops by itself */
    assert_false(kp_leader_keep_stop(g.l));
    assert_int_equal(fenced_write(&g), -KP_ENOTLEADER);
    assert_int_equal((int)kp_fault_server_started(g.srv), 5); /* no attempt past the deadline */

    /* Standby: another holder. */
    assert_int_equal(kp_leader_try(g.l, &leader, &err), 0);
    assert_false(leader);
    assert_string_equal(kp_leader_observed_holder(g.l), "other");
    assert_int_equal(kp_leader_keep_start(g.l, &g.fence, &g.term, g.efd), -EINVAL);
    /* Leads again once the Lease is free; the fence opens with the keeper. */
    assert_int_equal(kp_leader_try(g.l, &leader, &err), 0);
    assert_true(leader);
    kp_ctx_init(&g.term, NULL, kp_deadline_never());
    assert_int_equal(kp_leader_keep_start(g.l, &g.fence, &g.term, g.efd), 0);
    assert_int_equal(kp_fence_check(&g.fence), 0);
    assert_true(kp_leader_keep_stop(g.l)); /* still leading: release next */
    kp_fence_set(&g.fence, KP_FENCE_CLOSED);
    assert_int_equal(kp_leader_release(g.l, &rel), 0);
    assert_int_equal(rel, KP_LEADER_RELEASED);
    assert_int_equal(kp_fault_server_started(g.srv), kp_fault_server_exchanges(g.srv));
    kp_error_done(&err);
    rig_stop(&g);
}

/* Every renewal after the acquire fails fast (503) for longer than the renew deadline. */
static void test_failing_renewals(void **state)
{
    struct kp_buf script = KP_BUF_INIT(1 << 16);
    struct rig g;
    uint64_t acquired;
    size_t attempts;

    (void)state;
    assert_int_equal(kp_buf_puts(&script, ACQUIRE), 0);
    for (int i = 0; i < 20; i++)
        assert_int_equal(kp_buf_puts(&script, "request GET " LEASE_PATH "\nstatus 503\nbody {}\n"),
                         0);
    rig_start(&g, kp_buf_str(&script));
    acquire(&g, &acquired);
    sleep_until(acquired + RENEW_DEADLINE_USEC + KP_USEC_PER_MSEC);
    assert_int_equal(kp_fence_check(&g.fence), -KP_ENOTLEADER);
    assert_int_equal(fenced_write(&g), -KP_ENOTLEADER);
    assert_true(notified(g.efd));
    assert_false(kp_leader_keep_stop(g.l));
    assert_int_equal(kp_leader_keep_status(g.l), -EAGAIN);
    /* Retries every 300 ms inside a 1 s deadline: at most three, none after the deadline. */
    attempts = kp_fault_server_started(g.srv) - 2;
    printf("# %zu renewal attempts before giving up\n", attempts);
    assert_true(attempts >= 1 && attempts <= 3);
    kp_buf_done(&script);
    rig_stop(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hung_renewal),
        cmocka_unit_test(test_failing_renewals),
    };

    kp_log_set_level(KP_LOG_OFF);
    return cmocka_run_group_tests_name("lease-fence", tests, NULL, NULL);
}
