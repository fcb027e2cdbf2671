/* DESIGN: SSH transport benchmark (STYLE.md rule 14: speed is measured here, never asserted).
 *
 * Measures, against one sshd host:
 *   1. latency of one full phase round trip: dial, key exchange, host-key pin check,
 *      public-key authentication, exec channel, preamble + trivial script, exit status,
 *      disconnect; sequential runs, p50 / p99 / max;
 *   2. throughput of CONCURRENT simultaneous sessions (one thread and one session each, the
 *      runner pool's shape), as wall time and phases per second.
 *
 * Target from the environment: KPSSH_BENCH_HOST (default 127.0.0.1), KPSSH_BENCH_PORT (22),
 * KPSSH_BENCH_USER (root), KPSSH_BENCH_KEY (path of an unencrypted private key, required).
 * Arguments: [runs] [concurrent], default 200 and 100. Prints the figures; exit 1 on any
 * failed run. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "provider/ssh/runner.h"

#define BENCH_MAX_KEY (64 * 1024)

static struct kp_ssh_target bench_target;
static struct kp_secret *bench_key;

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

static int one_phase(uint64_t *ret_usec)
{
    static const char script[] = "true\n";
    const struct kp_ssh_var vars[] = {{"KPSSH_BENCH", "1", NULL}};
    const struct kp_ssh_phase ph = {.name = "bench",
                                    .script = script,
                                    .script_len = sizeof(script) - 1,
                                    .vars = vars,
                                    .nvars = 1,
                                    .deadline = kp_deadline_in(60 * KP_USEC_PER_SEC)};
    struct kp_ssh_capture cap;
    char *err = NULL;
    uint64_t t0 = kp_mono_usec();
    int r;

    kp_ssh_capture_init(&cap);
    r = kp_ssh_run_phase(&bench_target, &ph, &cap, &err);
    *ret_usec = kp_mono_usec() - t0;
    if (r < 0)
        fprintf(stderr, "bench-ssh: %s\n", err ? err : kp_strerror(r));
    kp_ssh_capture_done(&cap);
    kp_free(err);
    return r;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

struct worker {
    pthread_t thread;
    uint64_t usec;
    int r;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    w->r = one_phase(&w->usec);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *keypath = getenv("KPSSH_BENCH_KEY");
    uint32_t runs = 200, conc = 100, port = 22;
    uint64_t *lat = NULL, t0, wall;
    struct worker *w = NULL;
    int failed = 0, r;

    if ((argc > 1 && kp_safe_atou32(argv[1], &runs) < 0) ||
        (argc > 2 && kp_safe_atou32(argv[2], &conc) < 0) || runs == 0 || conc == 0 ||
        (getenv("KPSSH_BENCH_PORT") &&
         (kp_safe_atou32(getenv("KPSSH_BENCH_PORT"), &port) < 0 || port == 0 || port > 65535)) ||
        !keypath) {
        fprintf(stderr, "usage: KPSSH_BENCH_KEY=path [KPSSH_BENCH_HOST=ip] [KPSSH_BENCH_PORT=n] "
                        "[KPSSH_BENCH_USER=name] bench-ssh [runs] [concurrent]\n");
        return 2;
    }
    bench_target.host = getenv("KPSSH_BENCH_HOST") ? getenv("KPSSH_BENCH_HOST") : "127.0.0.1";
    bench_target.port = (uint16_t)port;
    bench_target.user = getenv("KPSSH_BENCH_USER");
    if ((r = read_key(keypath, &bench_key)) < 0) {
        fprintf(stderr, "bench-ssh: %s: %s\n", keypath, kp_strerror(r));
        return 1;
    }
    bench_target.private_key = bench_key;
    lat = kp_calloc(runs, sizeof(*lat));
    w = kp_calloc(conc, sizeof(*w));
    if (!lat || !w)
        return 1;

    /* One warm-up run pins nothing but fills caches (DNS, libssh init, page cache). */
    (void)one_phase(&lat[0]);
    for (uint32_t i = 0; i < runs; i++)
        failed += one_phase(&lat[i]) < 0;
    qsort(lat, runs, sizeof(*lat), cmp_u64);
    printf("bench-ssh: %s@%s:%u phase round trip (dial+kex+pin+auth+exec+exit), %u runs: "
           "p50 %.2f ms  p99 %.2f ms  max %.2f ms\n",
           bench_target.user ? bench_target.user : "root", bench_target.host, (unsigned)port, runs,
           lat[runs / 2] / 1000.0, lat[(size_t)((runs - 1) * 0.99)] / 1000.0,
           lat[runs - 1] / 1000.0);

    t0 = kp_mono_usec();
    for (uint32_t i = 0; i < conc; i++)
        if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0)
            return 1;
    for (uint32_t i = 0; i < conc; i++)
        (void)pthread_join(w[i].thread, NULL); /* cannot fail for a joinable thread of ours */
    wall = kp_mono_usec() - t0;
    for (uint32_t i = 0; i < conc; i++) {
        failed += w[i].r < 0;
        lat[i % runs] = w[i].usec;
    }
    printf("bench-ssh: %u concurrent sessions: wall %.1f ms, %.1f phases/s, %d failed\n", conc,
           wall / 1000.0, conc * 1e6 / (double)wall, failed);
    kp_free(lat);
    kp_free(w);
    kp_secret_free(bench_key);
    return failed ? 1 : 0;
}
