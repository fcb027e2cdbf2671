/* DESIGN: SSH transport benchmark (STYLE.md rule 14: speed is measured here, never asserted).
 *
 * Measures, against lab or real sshd hosts:
 *   1. latency of one full phase round trip, sequentially on the first host: dial, key
 *      exchange, host-key pin check, public-key authentication ("connect"), then exec channel,
 *      preamble + trivial script, exit status ("exec"), disconnect; p50 / p99 / max of each;
 *   2. CONCURRENT simultaneous sessions (one thread and one session each, as the host
 *      controller's probe workers dial), spread round-robin over the hosts given. All threads
 *      are created first and released together by a barrier, so thread creation is not part of
 *      the figure. Reports
 *      wall time from release to the last session's end, phases per second, and per-session
 *      connect / exec / total percentiles, so a stall shows up as "exec" (the remote side:
 *      sshd, the login shell, the script) or "connect" (accept backlog, MaxStartups, kex).
 *
 * The phase is what kp_ssh_run_phase() sends (kp_ssh_preamble + script under
 * kp_ssh_phase_command), driven through kp_ssh_connect() and kp_ssh_exec() directly so the two
 * stages can be timed apart; redaction, the only step left out, costs microseconds.
 *
 * Environment: KPSSH_BENCH_KEY (path of an unencrypted private key, required),
 * KPSSH_BENCH_HOST (an address or a comma-separated list; default 127.0.0.1),
 * KPSSH_BENCH_PORT (22), KPSSH_BENCH_USER (root), KPSSH_BENCH_DEADLINE (seconds per phase,
 * default 60), KPSSH_BENCH_LOG (path: write the debug log there, libssh's protocol log
 * included). Arguments: [runs] [concurrent], default 200 and 100; runs 0 skips part 1.
 * Prints the figures and the load average before and after each part; exit 1 on any failed
 * phase. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "provider/ssh/runner.h"

#define BENCH_MAX_KEY (64 * 1024)
#define BENCH_MAX_HOSTS 64
#define BENCH_MAX_ERRORS_SHOWN 5

static struct kp_ssh_target bench_targets[BENCH_MAX_HOSTS];
static size_t bench_nhosts;
static struct kp_secret *bench_key;
static uint64_t bench_deadline_usec = 60 * KP_USEC_PER_SEC;
static pthread_barrier_t bench_start;

static int read_key(const char *path, struct kp_secret **ret)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = fopen(path, "re");
    int r;

    if (!f)
        return -errno;
    buf = kp_malloc(BENCH_MAX_KEY);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    n = fread(buf, 1, BENCH_MAX_KEY - 1, f);
    r = kp_secret_new(buf, n, ret);
out:
    if (buf)
        kp_wipe(buf, BENCH_MAX_KEY);
    kp_free(buf);
    fclose(f);
    return r;
}

static void print_loadavg(const char *when)
{
    char line[128] = "";
    FILE *f = fopen("/proc/loadavg", "re");

    if (f) {
        if (!fgets(line, sizeof(line), f))
            line[0] = '\0';
        fclose(f);
    }
    line[strcspn(line, "\n")] = '\0';
    printf("bench-ssh: load average %s: %s\n", when, line);
}

/* One phase's outcome and stage timings. */
struct sample {
    uint64_t connect_usec, exec_usec, total_usec;
    int r;
    char *err;
};

/* Runs the bench phase on t: what kp_ssh_run_phase() does, with the stages timed. */
static void one_phase(const struct kp_ssh_target *t, struct sample *out)
{
    static const char script[] = "true\n";
    const struct kp_ssh_var vars[] = {{"KPSSH_BENCH", "1", NULL}};
    struct kp_deadline dl = kp_deadline_in(bench_deadline_usec);
    struct kp_buf stream = KP_BUF_INIT(KP_MAX_PHASE_INPUT);
    struct kp_ssh_session *s = NULL;
    struct kp_ssh_capture cap;
    uint64_t t0 = kp_mono_usec(), t1;
    int r;

    kp_ssh_capture_init(&cap);
    memset(out, 0, sizeof(*out));
    if ((r = kp_ssh_preamble(vars, 1, &stream)) < 0 ||
        (r = kp_buf_append(&stream, script, sizeof(script) - 1)) < 0)
        goto out;
    r = kp_ssh_connect(t, dl, &s, &out->err);
    t1 = kp_mono_usec();
    out->connect_usec = t1 - t0;
    if (r < 0)
        goto out;
    r = kp_ssh_exec(s, kp_ssh_phase_command(t->user), stream.data, stream.len, dl, &cap, &out->err);
    out->exec_usec = kp_mono_usec() - t1;
    if (r == 0 && cap.exit_status != 0)
        r = -KP_ESCRIPT;
out:
    s = kp_ssh_session_free(s);
    out->total_usec = kp_mono_usec() - t0;
    out->r = r;
    kp_buf_wipe(&stream);
    kp_ssh_capture_done(&cap);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Sorts v[n] and returns the p-th percentile (nearest rank, p in 0..100) in ms. */
static double pct_ms(uint64_t *v, size_t n, double p)
{
    size_t k = (size_t)((double)(n - 1) * p / 100.0 + 0.5);

    qsort(v, n, sizeof(*v), cmp_u64);
    return (double)v[k] / 1000.0;
}

/* Prints p50 / p90 / p99 / max of one stage over n samples; scratch holds n values. */
static void print_stage(const char *name, const struct sample *smp, size_t n, size_t field,
                        uint64_t *scratch)
{
    for (size_t i = 0; i < n; i++)
        scratch[i] = *(const uint64_t *)((const char *)&smp[i] + field);
    printf("  %-8s p50 %9.2f ms  p90 %9.2f ms  p99 %9.2f ms  max %9.2f ms\n", name,
           pct_ms(scratch, n, 50), pct_ms(scratch, n, 90), pct_ms(scratch, n, 99),
           pct_ms(scratch, n, 100));
}

/* Prints the stage table and the first errors; returns the number of failures. */
static int report(const struct sample *smp, size_t n, uint64_t *scratch)
{
    int failed = 0;

    print_stage("connect", smp, n, offsetof(struct sample, connect_usec), scratch);
    print_stage("exec", smp, n, offsetof(struct sample, exec_usec), scratch);
    print_stage("total", smp, n, offsetof(struct sample, total_usec), scratch);
    for (size_t i = 0; i < n; i++) {
        if (smp[i].r == 0)
            continue;
        if (failed++ < BENCH_MAX_ERRORS_SHOWN)
            fprintf(stderr, "bench-ssh: session %zu: %s\n", i,
                    smp[i].err ? smp[i].err : kp_strerror(smp[i].r));
    }
    return failed;
}

struct worker {
    pthread_t thread;
    const struct kp_ssh_target *target;
    struct sample smp;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    (void)pthread_barrier_wait(&bench_start); /* every session starts at once */
    one_phase(w->target, &w->smp);
    return NULL;
}

/* Splits the comma-separated host list (modified in place) into bench_targets. */
static int parse_hosts(char *list, uint16_t port, const char *user)
{
    for (char *p = list; p && *p;) {
        char *comma = strchr(p, ',');

        if (comma)
            *comma = '\0';
        if (*p) {
            if (bench_nhosts == BENCH_MAX_HOSTS)
                return -KP_ELIMIT;
            bench_targets[bench_nhosts++] =
                (struct kp_ssh_target){.host = p, .port = port, .user = user};
        }
        p = comma ? comma + 1 : NULL;
    }
    return bench_nhosts ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
    const char *keypath = getenv("KPSSH_BENCH_KEY"), *logpath = getenv("KPSSH_BENCH_LOG");
    const char *user = getenv("KPSSH_BENCH_USER");
    char *hosts = kp_strdup(getenv("KPSSH_BENCH_HOST") ? getenv("KPSSH_BENCH_HOST") : "127.0.0.1");
    uint32_t runs = 200, conc = 100, port = 22, deadline_s = 60;
    struct sample *seq = NULL;
    uint64_t *scratch = NULL, t0, wall;
    struct worker *w = NULL;
    int failed = 0, logfd = -1, r;

    if ((argc > 1 && kp_safe_atou32(argv[1], &runs) < 0) ||
        (argc > 2 && kp_safe_atou32(argv[2], &conc) < 0) || (runs == 0 && conc == 0) ||
        (getenv("KPSSH_BENCH_PORT") &&
         (kp_safe_atou32(getenv("KPSSH_BENCH_PORT"), &port) < 0 || port == 0 || port > 65535)) ||
        (getenv("KPSSH_BENCH_DEADLINE") &&
         (kp_safe_atou32(getenv("KPSSH_BENCH_DEADLINE"), &deadline_s) < 0 || deadline_s == 0)) ||
        !keypath || !hosts || parse_hosts(hosts, (uint16_t)port, user) < 0) {
        fprintf(stderr, "usage: KPSSH_BENCH_KEY=path [KPSSH_BENCH_HOST=ip[,ip...]] "
                        "[KPSSH_BENCH_PORT=n] [KPSSH_BENCH_USER=name] [KPSSH_BENCH_DEADLINE=s] "
                        "[KPSSH_BENCH_LOG=path] bench-ssh [runs] [concurrent]\n");
        kp_free(hosts);
        return 2;
    }
    bench_deadline_usec = (uint64_t)deadline_s * KP_USEC_PER_SEC;
    if (logpath) {
        /* Before the first session: libssh's log level is taken per thread at its first call. */
        logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (logfd < 0) {
            fprintf(stderr, "bench-ssh: %s: %s\n", logpath, strerror(errno));
            return 1;
        }
        kp_log_set_fd(logfd);
        kp_log_set_level(KP_LOG_DEBUG);
    }
    if ((r = read_key(keypath, &bench_key)) < 0) {
        fprintf(stderr, "bench-ssh: %s: %s\n", keypath, kp_strerror(r));
        return 1;
    }
    for (size_t i = 0; i < bench_nhosts; i++)
        bench_targets[i].private_key = bench_key;
    seq = kp_calloc(runs ? runs : 1, sizeof(*seq));
    w = kp_calloc(conc ? conc : 1, sizeof(*w));
    scratch = kp_calloc(KP_MAX(runs, conc) ? KP_MAX(runs, conc) : 1, sizeof(*scratch));
    if (!seq || !w || !scratch)
        return 1;

    if (runs > 0) {
        struct sample warm;

        print_loadavg("before sequential runs");
        /* One warm-up run fills caches (libssh init, page cache); it is not counted. */
        one_phase(&bench_targets[0], &warm);
        kp_free(warm.err);
        for (uint32_t i = 0; i < runs; i++)
            one_phase(&bench_targets[0], &seq[i]);
        printf("bench-ssh: %s@%s:%u sequential phase round trips (connect = dial+kex+pin+auth, "
               "exec = channel+exec+exit), %u runs:\n",
               user ? user : "root", bench_targets[0].host, (unsigned)port, runs);
        failed += report(seq, runs, scratch);
        print_loadavg("after sequential runs");
    }

    if (conc > 0) {
        if (pthread_barrier_init(&bench_start, NULL, conc + 1) != 0)
            return 1;
        for (uint32_t i = 0; i < conc; i++) {
            w[i].target = &bench_targets[i % bench_nhosts];
            if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0)
                return 1;
        }
        print_loadavg("before concurrent sessions");
        /* Main is the last to arrive, so the sessions start now (it may run again later). */
        t0 = kp_mono_usec();
        (void)pthread_barrier_wait(&bench_start);
        for (uint32_t i = 0; i < conc; i++)
            (void)pthread_join(w[i].thread, NULL); /* cannot fail for a joinable thread of ours */
        wall = kp_mono_usec() - t0;
        (void)pthread_barrier_destroy(&bench_start);
        {
            struct sample *cs = kp_calloc(conc, sizeof(*cs));
            int cfailed;

            if (!cs)
                return 1;
            for (uint32_t i = 0; i < conc; i++)
                cs[i] = w[i].smp;
            printf("bench-ssh: %u concurrent sessions over %zu host(s), %zu per host: wall "
                   "%.1f ms, %.1f phases/s\n",
                   conc, bench_nhosts, (conc + bench_nhosts - 1) / bench_nhosts, wall / 1000.0,
                   conc * 1e6 / (double)wall);
            cfailed = report(cs, conc, scratch);
            printf("bench-ssh: %d of %u concurrent sessions failed\n", cfailed, conc);
            failed += cfailed;
            kp_free(cs);
        }
        print_loadavg("after concurrent sessions");
    }

    for (uint32_t i = 0; i < runs; i++)
        kp_free(seq[i].err);
    for (uint32_t i = 0; i < conc; i++)
        kp_free(w[i].smp.err);
    kp_free(seq);
    kp_free(w);
    kp_free(scratch);
    kp_free(hosts);
    kp_secret_free(bench_key);
    if (logfd >= 0) {
        kp_log_set_fd(2);
        close(logfd);
    }
    return failed ? 1 : 0;
}
