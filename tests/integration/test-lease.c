/* Integration: leader election between two processes against the real kube-apiserver.
 *
 * Two candidate processes contend for one Lease (4 s duration, 3 s renew deadline, 1 s retry).
 * Exactly one leads. When the leader is killed with SIGKILL (no release), the other takes over
 * once the lease has expired as it observes it: within the lease duration plus one retry
 * period of jitter. When a leader shuts down cleanly it releases, and the other takes over at
 * its next retry. A candidate whose lease is taken over while it still runs (its renewals
 * blocked) reports the loss. Each child reports "LEADER <name>" on a pipe. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kp-lab.h"
#include "kp-test.h"

#include "base/err.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/lease.h"
#include "k8s/status.h"

#define LEASE_USEC (4 * KP_USEC_PER_SEC)
#define RENEW_USEC (3 * KP_USEC_PER_SEC)
#define RETRY_USEC (1 * KP_USEC_PER_SEC)

static struct kp_lab lab;
static char ns[64];
static atomic_bool child_cancel;

static void on_term(int sig)
{
    (void)sig;
    atomic_store(&child_cancel, true);
}

/* Child: contend, announce leadership, keep it until SIGTERM (then release) or loss. */
static void candidate(const char *name, const char *lease, int out)
{
    struct kp_leader_opts o = {.ns = ns,
                               .name = lease,
                               .identity = name,
                               .lease_usec = LEASE_USEC,
                               .renew_deadline_usec = RENEW_USEC,
                               .retry_usec = RETRY_USEC};
    struct kp_client *c = kp_lab_admin_client(&lab);
    struct kp_leader *l = NULL;
    char msg[128];
    int r, code = 0;

    signal(SIGTERM, on_term);
    if (kp_leader_new(c, &o, &l) < 0)
        _exit(10);
    if (kp_leader_acquire(l, &child_cancel) < 0)
        _exit(0);
    snprintf(msg, sizeof(msg), "LEADER %s\n", name);
    if (write(out, msg, strlen(msg)) < 0)
        _exit(11);
    r = kp_leader_keep(l, &child_cancel);
    if (r == -KP_ENOTREADY) {
        snprintf(msg, sizeof(msg), "LOST %s\n", name);
        if (write(out, msg, strlen(msg)) < 0)
            _exit(11);
        code = 3;
    } else if (kp_leader_release(l, NULL) < 0) {
        code = 12;
    }
    kp_leader_free(l);
    kp_client_free(c);
    _exit(code);
}

static pid_t spawn(const char *name, const char *lease, int out)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0)
        candidate(name, lease, out);
    return pid;
}

/* Reads one line from fd within timeout; returns it in buf or fails the test. */
static void read_line(int fd, char *buf, size_t size, uint64_t timeout_usec)
{
    struct kp_deadline d = kp_deadline_in(timeout_usec);
    size_t n = 0;

    while (n + 1 < size) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char ch;

        if (poll(&p, 1, kp_deadline_left_ms(d)) <= 0)
            fail_msg("no message from a candidate within %llu ms (got \"%.*s\")",
                     (unsigned long long)(timeout_usec / 1000), (int)n, buf);
        if (read(fd, &ch, 1) != 1)
            fail_msg("candidate pipe closed");
        if (ch == '\n')
            break;
        buf[n++] = ch;
    }
    buf[n] = '\0';
}

static void reap(pid_t pid)
{
    int st;

    (void)waitpid(pid, &st, 0);
}

static void test_failover_on_kill(void **state)
{
    int fds[2];
    pid_t a, b, leader, other;
    char line[128];
    uint64_t t0, took;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    a = spawn("cand-a", "kill-test", fds[1]);
    b = spawn("cand-b", "kill-test", fds[1]);
    read_line(fds[0], line, sizeof(line), 30 * KP_USEC_PER_SEC);
    leader = strcmp(line, "LEADER cand-a") == 0 ? a : b;
    other = leader == a ? b : a;
    /* Only one leads: the other stays quiet for a full lease duration. */
    {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};

        assert_int_equal(poll(&p, 1, (int)(LEASE_USEC / 1000) + 1000), 0);
    }
    t0 = kp_mono_usec();
    kill(leader, SIGKILL);
    reap(leader);
    read_line(fds[0], line, sizeof(line), 4 * LEASE_USEC);
    took = kp_mono_usec() - t0;
    printf("# failover after SIGKILL of the leader: %llu ms (lease %llu ms, retry %llu ms)\n",
           (unsigned long long)(took / 1000), (unsigned long long)(LEASE_USEC / 1000),
           (unsigned long long)(RETRY_USEC / 1000));
    assert_string_equal(line, other == a ? "LEADER cand-a" : "LEADER cand-b");
    /* Lease duration plus one jittered retry period (1.2x) and request time. */
    assert_true(took <= LEASE_USEC + 2 * RETRY_USEC);
    kill(other, SIGTERM);
    reap(other);
    close(fds[0]);
    close(fds[1]);
}

static void test_release_on_shutdown(void **state)
{
    int fds[2];
    pid_t a, b, leader, other;
    char line[128];
    uint64_t t0, took;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    a = spawn("rel-a", "release-test", fds[1]);
    read_line(fds[0], line, sizeof(line), 30 * KP_USEC_PER_SEC);
    assert_string_equal(line, "LEADER rel-a");
    b = spawn("rel-b", "release-test", fds[1]);
    leader = a;
    other = b;
    kp_sleep_usec(RETRY_USEC * 2); /* b is now waiting on a held lease */
    t0 = kp_mono_usec();
    kill(leader, SIGTERM); /* clean shutdown: releases */
    reap(leader);
    read_line(fds[0], line, sizeof(line), 4 * LEASE_USEC);
    took = kp_mono_usec() - t0;
    printf("# takeover after a clean release: %llu ms\n", (unsigned long long)(took / 1000));
    assert_string_equal(line, "LEADER rel-b");
    /* Released: no need to wait for expiry, only for the next retry. */
    assert_true(took < LEASE_USEC);
    kill(other, SIGTERM);
    reap(other);
    close(fds[0]);
    close(fds[1]);
}

static void test_lost_when_taken(void **state)
{
    struct kp_client *c = kp_lab_admin_client(&lab);
    struct kp_error e = KP_ERROR_INIT;
    json_t *doc = NULL;
    int fds[2], st;
    pid_t a;
    char line[128];

    (void)state;
    assert_int_equal(pipe(fds), 0);
    a = spawn("lost-a", "lost-test", fds[1]);
    read_line(fds[0], line, sizeof(line), 30 * KP_USEC_PER_SEC);
    assert_string_equal(line, "LEADER lost-a");
    /* Someone else writes the lease (as an operator or a split-brain peer would). */
    kp_lab_check(kp_client_get(c, &KP_RES_LEASE, ns, "lost-test", &doc, &e), &e, "get lease");
    assert_int_equal(kp_json_patch_set_str(doc, KP_JSON_PATH("spec", "holderIdentity"), "intruder"),
                     0);
    kp_lab_check(kp_client_update(c, &KP_RES_LEASE, ns, "lost-test", doc, NULL, &e), &e,
                 "take lease");
    kp_json_unref(doc);
    read_line(fds[0], line, sizeof(line), 4 * LEASE_USEC);
    assert_string_equal(line, "LOST lost-a");
    assert_int_equal(waitpid(a, &st, 0), a);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    kp_error_done(&e);
    kp_client_free(c);
    close(fds[0]);
    close(fds[1]);
}

/* A leader whose Lease another identity took over, in this process: release reports
 * KP_LEADER_TAKEN, names the holder and writes nothing (the usurper still holds it, at the same
 * resourceVersion). A Lease deleted under the leader: KP_LEADER_GONE, not an error. */
static struct kp_leader *lead(struct kp_client *c, const char *identity, const char *lease)
{
    struct kp_leader_opts o = {.ns = ns,
                               .name = lease,
                               .identity = identity,
                               .lease_usec = LEASE_USEC,
                               .renew_deadline_usec = RENEW_USEC,
                               .retry_usec = RETRY_USEC};
    struct kp_error e = KP_ERROR_INIT;
    struct kp_leader *l = NULL;
    bool leader = false;

    assert_int_equal(kp_leader_new(c, &o, &l), 0);
    kp_lab_check(kp_leader_try(l, &leader, &e), &e, "take the lease");
    assert_true(leader);
    kp_error_done(&e);
    return l;
}

static void test_release_when_taken(void **state)
{
    struct kp_client *c = kp_lab_admin_client(&lab);
    struct kp_error e = KP_ERROR_INIT;
    enum kp_leader_release rel = KP_LEADER_RELEASED;
    struct kp_leader *l = lead(c, "taken-a", "taken-test");
    json_t *doc = NULL, *updated = NULL, *after = NULL;
    const char *holder = NULL, *rv = NULL, *rv_after = NULL;

    (void)state;
    /* Another replica takes the Lease over (written directly, as its own renewal would). */
    kp_lab_check(kp_client_get(c, &KP_RES_LEASE, ns, "taken-test", &doc, &e), &e, "get lease");
    assert_int_equal(kp_json_patch_set_str(doc, KP_JSON_PATH("spec", "holderIdentity"), "taken-b"),
                     0);
    kp_lab_check(kp_client_update(c, &KP_RES_LEASE, ns, "taken-test", doc, &updated, &e), &e,
                 "take over");
    assert_int_equal(kp_json_path_str(updated, "metadata.resourceVersion", &rv), 0);

    assert_int_equal(kp_leader_release(l, &rel), 0);
    assert_int_equal(rel, KP_LEADER_TAKEN);
    assert_non_null(kp_leader_observed_holder(l));
    assert_string_equal(kp_leader_observed_holder(l), "taken-b");
    assert_false(kp_leader_is_leader(l));
    /* Untouched: still the other holder's, not written since. */
    kp_lab_check(kp_client_get(c, &KP_RES_LEASE, ns, "taken-test", &after, &e), &e, "get lease");
    assert_int_equal(kp_json_path_str(after, "spec.holderIdentity", &holder), 0);
    assert_string_equal(holder, "taken-b");
    assert_int_equal(kp_json_path_str(after, "metadata.resourceVersion", &rv_after), 0);
    assert_string_equal(rv_after, rv);
    /* Released once more: we no longer lead, so nothing is read or written. */
    assert_int_equal(kp_leader_release(l, &rel), 0);
    assert_int_equal(rel, KP_LEADER_NOT_LEADING);
    kp_json_unref(doc);
    kp_json_unref(updated);
    kp_json_unref(after);
    kp_error_done(&e);
    kp_leader_free(l);
    kp_client_free(c);
}

static void test_release_when_gone(void **state)
{
    struct kp_client *c = kp_lab_admin_client(&lab);
    struct kp_error e = KP_ERROR_INIT;
    enum kp_leader_release rel = KP_LEADER_RELEASED;
    struct kp_leader *l = lead(c, "gone-a", "gone-test");

    (void)state;
    kp_lab_check(kp_client_delete(c, &KP_RES_LEASE, ns, "gone-test", NULL, &e), &e, "delete lease");
    assert_int_equal(kp_leader_release(l, &rel), 0);
    assert_int_equal(rel, KP_LEADER_GONE);
    assert_false(kp_leader_is_leader(l));
    kp_error_done(&e);
    kp_leader_free(l);
    kp_client_free(c);
}

/* The plain case, in process: our own Lease is released (holder cleared). */
static void test_release_ours(void **state)
{
    struct kp_client *c = kp_lab_admin_client(&lab);
    struct kp_error e = KP_ERROR_INIT;
    enum kp_leader_release rel = KP_LEADER_NOT_LEADING;
    struct kp_leader *l = lead(c, "ours-a", "ours-test");
    json_t *doc = NULL;
    const char *holder = NULL;

    (void)state;
    assert_int_equal(kp_leader_release(l, &rel), 0);
    assert_int_equal(rel, KP_LEADER_RELEASED);
    kp_lab_check(kp_client_get(c, &KP_RES_LEASE, ns, "ours-test", &doc, &e), &e, "get lease");
    assert_true(kp_json_path_str(doc, "spec.holderIdentity", &holder) < 0 || !*holder);
    kp_json_unref(doc);
    kp_error_done(&e);
    kp_leader_free(l);
    kp_client_free(c);
}

static int setup(void **state)
{
    (void)state;
    kp_lab_setup_namespace(&lab, "kp-lease", ns, sizeof(ns));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kp_lab_teardown_namespace(&lab, ns);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failover_on_kill),  cmocka_unit_test(test_release_on_shutdown),
        cmocka_unit_test(test_lost_when_taken),   cmocka_unit_test(test_release_when_taken),
        cmocka_unit_test(test_release_when_gone), cmocka_unit_test(test_release_ours),
    };

    signal(SIGPIPE, SIG_IGN);
    return _cmocka_run_group_tests("integration-lease", tests, KP_ARRAY_SIZE(tests), setup,
                                   teardown)
               ? 1
               : 0;
}
