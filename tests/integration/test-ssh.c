/* DESIGN: the SSH transport and phase runner against real lab sshd hosts (tests/lab).
 *
 * Runs inside the lab fixture: $KPSSH_LAB_DIR/env.sh (read through tests/lib/kp-lab.h) names
 * the lab key, host.sh and the hosts directory; each host's host.env names its address, its
 * non-root user and its host key, and is read by letting bash source it (so it follows whatever
 * the lab writes there). Hosts are driven with host.sh (exec, rekey, add, del). Hosts 1..3 come
 * with the fixture; hosts 4 and 5 are added here when absent and removed again at the end. Host
 * 4 is the one that gets re-keyed, so the fixture's own hosts keep their keys for other tests.
 *
 * Checks: TOFU accept and pin, pre-pin (fingerprint, public-key line, known_hosts line, hashed
 * line) beats the TOFU pin, a re-keyed host is refused with both fingerprints named, a deadline
 * ends the remote process (it is gone from the host afterwards, root and sudo paths), output
 * past the ceiling keeps its tail, secrets never reach the phase error, the captured streams or
 * a log line, the sudo path runs as root for the non-root user, 50 concurrent phase runs over 5
 * hosts all succeed with one session per job, and 100 concurrent phase runs on ONE host all
 * complete (the reported stall) while every worker thread's libssh protocol log reaches our log.
 * No timed assertions: waits for the remote process to vanish poll with a generous limit. */
#include "kp-lab.h"
#include "kp-test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#include "provider/ssh/runner.h"

#define NHOSTS 5
#define CONCURRENT_JOBS 50
#define ONE_HOST_JOBS 100
#define TOKEN "k8stst.0123456789abcdef"
#define TOKEN_HALF "0123456789abcdef"
#define JOIN_SECRET "s3cr3t-activation-code-value"

struct lab_host {
    char *ip, *user, *keypub, *fp;
    bool added; /* added by this test: delete at the end */
};

static struct {
    struct kp_lab env; /* env.sh */
    char *key_path, *hosts_dir;
    struct kp_secret *key;
    struct lab_host hosts[NHOSTS + 1]; /* 1-based */
    char log_path[64];
    int log_fd;
} lab;

/* Runs argv, returns stdout (new string); cmocka-fails unless it exits 0. */
static char *run(const char *const *argv)
{
    char *out = NULL;

    kp_lab_run(argv, 300 * KP_USEC_PER_SEC, KP_LAB_RUN_MUST, &out);
    return out;
}

/* The whole log file so far (new string). Read in-process: with libssh's protocol log in it,
 * it outgrows what run() captures from a child's stdout. */
static char *read_log(void)
{
    struct kp_buf b = KP_BUF_INIT(256u << 20);
    char chunk[65536];
    ssize_t n;
    off_t at = 0;
    char *text;

    while ((n = pread(lab.log_fd, chunk, sizeof(chunk), at)) > 0) {
        assert_int_equal(kp_buf_append(&b, chunk, (size_t)n), 0);
        at += n;
    }
    assert_int_equal(n, 0);
    text = kp_buf_steal(&b, NULL);
    assert_non_null(text);
    kp_buf_done(&b);
    return text;
}

/* Splits "a\nb\nc\n" into n strings (each new). */
static void split_lines(char *s, char **out, size_t n)
{
    char *p = s;

    for (size_t i = 0; i < n; i++) {
        char *nl = strchr(p, '\n');

        assert_non_null(nl);
        *nl = '\0';
        out[i] = kp_strdup(p);
        assert_non_null(out[i]);
        p = nl + 1;
    }
}

static void host_load(unsigned i)
{
    struct lab_host *h = &lab.hosts[i];
    char env[512], *out, *fields[3];
    char *pub = NULL;
    const char *argv[] = {"bash",
                          "-c",
                          ". \"$1\" && printf '%s\\n%s\\n%s\\n' \"$HOST_IP\" \"$HOST_USER\" "
                          "\"$HOST_KEY_PUB\"",
                          "_",
                          env,
                          NULL};
    const char *kt = NULL;
    char fp[KP_SSH_FP_SIZE];
    size_t len = 0;

    (void)snprintf(env, sizeof(env), "%s/h%u/host.env", lab.hosts_dir, i);
    out = run(argv);
    split_lines(out, fields, 3);
    kp_free(out);
    kp_free(h->ip);
    kp_free(h->user);
    kp_free(h->keypub);
    kp_free(h->fp);
    h->ip = fields[0];
    h->user = fields[1];
    h->keypub = fields[2];
    /* The fingerprint the host should present, from its public key file. */
    {
        const char *cat[] = {"cat", h->keypub, NULL};
        char *sp;

        pub = run(cat);
        sp = strchr(pub, ' ');
        assert_non_null(sp);
        len = strcspn(sp + 1, " \n");
        assert_int_equal(kp_ssh_key_fingerprint(sp + 1, len, fp, &kt), 0);
    }
    h->fp = kp_strdup(fp);
    kp_free(pub);
}

static int lab_setup(void **state)
{
    char *pem;

    (void)state;
    kp_lab_load(&lab.env);
    lab.env.host_timeout_usec = 60 * KP_USEC_PER_SEC;
    lab.key_path = kp_lab_env_need(&lab.env, "KPSSH_LAB_SSH_KEY");
    lab.hosts_dir = kp_lab_env_need(&lab.env, "KPSSH_LAB_HOSTS_DIR");
    {
        const char *cat[] = {"cat", lab.key_path, NULL};

        pem = run(cat);
        assert_int_equal(kp_secret_new(pem, strlen(pem), &lab.key), 0);
        kp_wipe(pem, strlen(pem));
        kp_free(pem);
    }
    for (unsigned i = 1; i <= NHOSTS; i++) {
        char env[512];

        (void)snprintf(env, sizeof(env), "%s/h%u/host.env", lab.hosts_dir, i);
        if (access(env, F_OK) != 0) {
            assert_int_equal(kp_lab_host_sh(&lab.env, "add", i), 0);
            lab.hosts[i].added = true;
        }
        host_load(i);
    }
    /* Every log line of this process goes to a file the secret test reads back. */
    (void)snprintf(lab.log_path, sizeof(lab.log_path), "/tmp/kpssh-itest-ssh-%d.log",
                   (int)getpid());
    lab.log_fd = open(lab.log_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(lab.log_fd >= 0);
    kp_log_set_fd(lab.log_fd);
    return 0;
}

static int lab_teardown(void **state)
{
    (void)state;
    for (unsigned i = 1; i <= NHOSTS; i++) {
        struct lab_host *h = &lab.hosts[i];

        if (h->added)
            (void)kp_lab_host_sh(&lab.env, "del", i);
        kp_free(h->ip);
        kp_free(h->user);
        kp_free(h->keypub);
        kp_free(h->fp);
    }
    kp_log_set_fd(2);
    if (lab.log_fd >= 0)
        close(lab.log_fd);
    (void)unlink(lab.log_path);
    kp_secret_free(lab.key);
    kp_free(lab.key_path);
    kp_free(lab.hosts_dir);
    kp_lab_done(&lab.env);
    return 0;
}

static struct kp_ssh_target target(unsigned i, bool as_root)
{
    return (struct kp_ssh_target){.host = lab.hosts[i].ip,
                                  .user = as_root ? "root" : lab.hosts[i].user,
                                  .private_key = lab.key};
}

static int probe(const struct kp_ssh_target *t, const char *cmd, struct kp_ssh_capture *cap,
                 char **err)
{
    kp_ssh_capture_init(cap);
    return kp_ssh_exec_capture(t, cmd, kp_deadline_in(30 * KP_USEC_PER_SEC), cap, err);
}

static void test_tofu_and_prepin(void **state)
{
    struct kp_ssh_target t = target(1, true);
    struct kp_ssh_capture cap;
    char *err = NULL, line[4096], *pub;
    const char *wrong = "SHA256:MiazcAqsXIJDE0hYNUSp8veLWoBsenRK7PueAI23pT8";
    const char *cat[] = {"cat", lab.hosts[1].keypub, NULL};

    (void)state;
    /* No pin: accepted, and the fingerprint comes back to be recorded. */
    assert_int_equal(probe(&t, "true", &cap, &err), 0);
    assert_int_equal(cap.pin, KP_SSH_PIN_NONE);
    assert_string_equal(cap.fp, lab.hosts[1].fp);
    kp_ssh_capture_done(&cap);
    /* The recorded pin is then checked. */
    t.tofu_fingerprint = lab.hosts[1].fp;
    assert_int_equal(probe(&t, "true", &cap, &err), 0);
    assert_int_equal(cap.pin, KP_SSH_PIN_TOFU);
    kp_ssh_capture_done(&cap);
    t.tofu_fingerprint = wrong;
    assert_int_equal(probe(&t, "true", &cap, &err), -KP_EHOSTKEY);
    kp_ssh_capture_done(&cap);
    kp_free(err);
    err = NULL;

    /* A correct pre-pin beats a wrong TOFU pin, in each form. */
    pub = run(cat);
    {
        char known[4096], hashed[4096];
        const char *forms[4];
        const char *hash_argv[] = {"bash",
                                   "-c",
                                   "f=$(mktemp) && printf '%s\\n' \"$1\" > \"$f\" && "
                                   "ssh-keygen -q -H -f \"$f\" >/dev/null 2>&1 && cat \"$f\" && "
                                   "rm -f \"$f\" \"$f.old\"",
                                   "_",
                                   known,
                                   NULL};
        char *h;

        *strchr(pub, '\n') = '\0';
        (void)snprintf(known, sizeof(known), "other-host,%s %.*s", lab.hosts[1].ip,
                       (int)(strrchr(pub, ' ') - pub), pub);
        h = run(hash_argv);
        (void)snprintf(hashed, sizeof(hashed), "%s", h);
        kp_free(h);
        forms[0] = lab.hosts[1].fp;
        forms[1] = pub;
        forms[2] = known;
        forms[3] = hashed;
        for (size_t i = 0; i < 4; i++) {
            t.known_host = forms[i];
            t.tofu_fingerprint = wrong;
            assert_int_equal(probe(&t, "true", &cap, &err), 0);
            assert_int_equal(cap.pin, KP_SSH_PIN_PREPIN);
            kp_ssh_capture_done(&cap);
        }
    }
    /* A wrong pre-pin loses even to a correct TOFU pin: the pre-pin is authoritative. */
    t.known_host = wrong;
    t.tofu_fingerprint = lab.hosts[1].fp;
    assert_int_equal(probe(&t, "true", &cap, &err), -KP_EHOSTKEY);
    assert_non_null(strstr(err, "possible man-in-the-middle"));
    kp_ssh_capture_done(&cap);
    kp_free(err);
    err = NULL;
    /* A pre-pin for other hosts only is no pin at all: refused, not TOFU. */
    (void)snprintf(line, sizeof(line), "10.255.255.1 %s", pub);
    t.known_host = line;
    assert_int_equal(probe(&t, "true", &cap, &err), -KP_EHOSTKEY);
    assert_non_null(strstr(err, "names no key"));
    kp_ssh_capture_done(&cap);
    kp_free(err);
    kp_free(pub);
}

static void test_rekey_refused(void **state)
{
    struct kp_ssh_target t = target(4, true);
    struct kp_ssh_capture cap;
    char *err = NULL, *old = kp_strdup(lab.hosts[4].fp);

    (void)state;
    assert_non_null(old);
    t.tofu_fingerprint = old;
    assert_int_equal(probe(&t, "true", &cap, &err), 0);
    kp_ssh_capture_done(&cap);
    assert_int_equal(kp_lab_host_sh(&lab.env, "rekey", 4), 0);
    host_load(4);
    assert_string_not_equal(lab.hosts[4].fp, old);
    t = target(4, true); /* host_load replaced the strings t pointed to */
    t.tofu_fingerprint = old;

    assert_int_equal(probe(&t, "true", &cap, &err), -KP_EHOSTKEY);
    assert_non_null(strstr(err, old));
    assert_non_null(strstr(err, lab.hosts[4].fp));
    assert_non_null(strstr(err, "possible man-in-the-middle"));
    kp_ssh_capture_done(&cap);
    kp_free(err);
    err = NULL;
    /* The same through a pre-pin of the old key, and through a whole phase. */
    t.tofu_fingerprint = NULL;
    t.known_host = old;
    {
        const struct kp_ssh_phase ph = {.name = "join",
                                        .script = "touch /tmp/must-not-run\n",
                                        .script_len = 24,
                                        .deadline = kp_deadline_in(30 * KP_USEC_PER_SEC)};

        kp_ssh_capture_init(&cap);
        assert_int_equal(kp_ssh_run_phase(&t, &ph, &cap, &err), -KP_EHOSTKEY);
        assert_non_null(strstr(err, "join phase: host key mismatch"));
        kp_ssh_capture_done(&cap);
        kp_free(err);
        err = NULL;
    }
    assert_int_not_equal(kp_lab_host_exec(&lab.env, 4, "test -e /tmp/must-not-run"), 0);
    /* The new key is accepted once the pin is updated. */
    t.known_host = lab.hosts[4].fp;
    assert_int_equal(probe(&t, "true", &cap, &err), 0);
    kp_ssh_capture_done(&cap);
    kp_free(old);
}

/* Runs a phase that outlives its deadline and checks the remote process is gone afterwards. */
static void deadline_kills(unsigned i, bool as_root, const char *marker)
{
    struct kp_ssh_target t = target(i, as_root);
    struct kp_ssh_capture cap;
    char script[256], check[256], *err = NULL;
    int gone = 0;

    (void)snprintf(script, sizeof(script), "echo started >&2\nsleep %s\necho not-reached\n",
                   marker);
    (void)snprintf(check, sizeof(check), "! pgrep -f '^sleep %s$' >/dev/null", marker);
    {
        const struct kp_ssh_phase ph = {.name = "join",
                                        .script = script,
                                        .script_len = strlen(script),
                                        .deadline = kp_deadline_in(3 * KP_USEC_PER_SEC)};

        kp_ssh_capture_init(&cap);
        assert_int_equal(kp_ssh_run_phase(&t, &ph, &cap, &err), -ETIMEDOUT);
    }
    assert_non_null(strstr(err, "join phase: script timed out"));
    assert_non_null(strstr(err, "started")); /* the script really was running */
    kp_ssh_capture_done(&cap);
    kp_free(err);
    /* The watchdog polls once a second; allow it plenty. */
    for (int k = 0; k < 60 && !gone; k++) {
        gone = kp_lab_host_exec(&lab.env, i, check) == 0;
        if (!gone)
            kp_sleep_usec(500 * KP_USEC_PER_MSEC);
    }
    assert_true(gone);
}

static void test_deadline_kills_remote(void **state)
{
    (void)state;
    deadline_kills(2, true, "4711");
    deadline_kills(2, false, "4712"); /* through sudo */
}

static void test_output_ceiling(void **state)
{
    struct kp_ssh_target t = target(3, false);
    struct kp_ssh_capture cap;
    char *err = NULL;
    const char *script = "head -c 8000000 /dev/zero | tr '\\0' a\necho END-OF-STDOUT\n"
                         "seq 1 200000 >&2\n";
    const struct kp_ssh_phase ph = {.name = "install",
                                    .script = script,
                                    .script_len = strlen(script),
                                    .deadline = kp_deadline_in(120 * KP_USEC_PER_SEC)};
    int64_t live = kp_alloc_live();

    (void)state;
    kp_ssh_capture_init(&cap);
    assert_int_equal(kp_ssh_run_phase(&t, &ph, &cap, &err), 0);
    assert_true(cap.out.truncated);
    assert_true(cap.out.len <= KP_MAX_PHASE_OUTPUT);
    assert_true(kp_endswith(kp_buf_str(&cap.out), "aaaa\nEND-OF-STDOUT\n") ||
                kp_endswith(kp_buf_str(&cap.out), "END-OF-STDOUT\n"));
    assert_true(cap.err.truncated);
    assert_true(cap.err.len <= KP_MAX_PHASE_OUTPUT);
    assert_true(kp_endswith(kp_buf_str(&cap.err), "\n199999\n200000\n"));
    /* Nothing of ours grew past the two tails: the 8 MB went through, not into memory. */
    assert_true(kp_alloc_live() - live <= 4);
    kp_ssh_capture_done(&cap);
}

static bool leaks(const char *s, size_t n)
{
    return memmem(s, n, JOIN_SECRET, strlen(JOIN_SECRET)) || memmem(s, n, TOKEN, strlen(TOKEN)) ||
           memmem(s, n, TOKEN_HALF, strlen(TOKEN_HALF)) ||
           memmem(s, n, "code-value", 10); /* a tail of the join secret */
}

/* Runs script as a join phase with a token and a join secret; returns the error text. */
static char *secret_phase(const char *script, struct kp_ssh_capture *cap)
{
    struct kp_ssh_target t = target(1, false);
    struct kp_secret *tok = NULL, *join = NULL;
    char *err = NULL;

    assert_int_equal(kp_secret_new(TOKEN, strlen(TOKEN), &tok), 0);
    assert_int_equal(kp_secret_new(JOIN_SECRET, strlen(JOIN_SECRET), &join), 0);
    {
        const struct kp_ssh_var vars[] = {{"KPSSH_BOOTSTRAP_TOKEN", NULL, tok},
                                          {"KPSSH_SECRET_ACTIVATIONCODE", NULL, join},
                                          {"KPSSH_NODE_NAME", "node-a", NULL}};
        const struct kp_ssh_phase ph = {.name = "join",
                                        .script = script,
                                        .script_len = strlen(script),
                                        .vars = vars,
                                        .nvars = 3,
                                        .deadline = kp_deadline_in(60 * KP_USEC_PER_SEC)};

        kp_ssh_capture_init(cap);
        assert_int_equal(kp_ssh_run_phase(&t, &ph, cap, &err), -KP_ESCRIPT);
    }
    assert_int_equal(cap->exit_status, 7);
    assert_non_null(err);
    assert_non_null(strstr(err, "join phase: script exited with status 7"));
    assert_false(leaks(err, strlen(err)));
    assert_false(leaks(cap->out.data, cap->out.len));
    assert_false(leaks(cap->err.data, cap->err.len));
    kp_secret_free(tok);
    kp_secret_free(join);
    return err;
}

static void test_secrets_never_leak(void **state)
{
    struct kp_ssh_capture cap;
    char *err, *logtext;
    /* Every secret echoed to both streams and xtraced. */
    const char *loud = "echo \"token=$KPSSH_BOOTSTRAP_TOKEN\"\n"
                       "echo \"half=${KPSSH_BOOTSTRAP_TOKEN#*.}\" >&2\n"
                       "set -x\n"
                       ": \"$KPSSH_SECRET_ACTIVATIONCODE\" \"$KPSSH_BOOTSTRAP_TOKEN\"\n"
                       "echo \"join=$KPSSH_SECRET_ACTIVATIONCODE\" >&2\n"
                       "exit 7\n";
    /* The join secret placed so that the 64 KiB tail of stderr starts 10 bytes before its end:
     * truncation cuts it in two, and the part left ("code-value") must not survive. */
    const char *cut = "printf '%s' \"$KPSSH_SECRET_ACTIVATIONCODE\" >&2\n"
                      "head -c 65526 /dev/zero | tr '\\0' y >&2\n"
                      "exit 7\n";

    (void)state;
    err = secret_phase(loud, &cap);
    assert_non_null(strstr(err, "[REDACTED]"));
    assert_non_null(strstr(kp_buf_str(&cap.out), "token=[REDACTED]"));
    assert_non_null(strstr(kp_buf_str(&cap.err), "half=[REDACTED]"));
    assert_non_null(strstr(kp_buf_str(&cap.err), "join=[REDACTED]"));
    /* What a caller does with it: log the error and relay stderr. Then read the log back. */
    kp_log_error("join failed", KP_LF("error", err), KP_LF("stderr", kp_buf_str(&cap.err)));
    kp_ssh_capture_done(&cap);
    kp_free(err);

    err = secret_phase(cut, &cap);
    assert_true(cap.err.truncated);
    kp_log_error("join failed", KP_LF("error", err), KP_LF("stderr", kp_buf_str(&cap.err)));
    kp_ssh_capture_done(&cap);
    kp_free(err);
    logtext = read_log();
    assert_non_null(strstr(logtext, "join failed"));
    assert_false(leaks(logtext, strlen(logtext)));
    kp_free(logtext);
}

static void test_sudo_path(void **state)
{
    struct kp_ssh_target t = target(2, false);
    struct kp_ssh_capture cap;
    char *err = NULL;
    const char *script = "printf '%s %s %s' \"$(id -u)\" \"${SUDO_USER:-none}\" \"$KPSSH_X\"\n";
    const struct kp_ssh_var vars[] = {{"KPSSH_X", "it's here", NULL}};
    const struct kp_ssh_phase ph = {.name = "install",
                                    .script = script,
                                    .script_len = strlen(script),
                                    .vars = vars,
                                    .nvars = 1,
                                    .deadline = kp_deadline_in(60 * KP_USEC_PER_SEC)};
    char want[128];

    (void)state;
    assert_string_not_equal(lab.hosts[2].user, "root");
    kp_ssh_capture_init(&cap);
    assert_int_equal(kp_ssh_run_phase(&t, &ph, &cap, &err), 0);
    (void)snprintf(want, sizeof(want), "0 %s it's here", lab.hosts[2].user);
    assert_string_equal(kp_buf_str(&cap.out), want);
    kp_ssh_capture_done(&cap);
    /* A probe runs as the login user itself. */
    assert_int_equal(probe(&t, "id -un", &cap, &err), 0);
    (void)snprintf(want, sizeof(want), "%s\n", lab.hosts[2].user);
    assert_string_equal(kp_buf_str(&cap.out), want);
    kp_ssh_capture_done(&cap);
    /* A failing probe names its status. */
    assert_int_equal(probe(&t, "echo nope >&2; exit 3", &cap, &err), -KP_ESCRIPT);
    assert_int_equal(cap.exit_status, 3);
    assert_non_null(strstr(err, "status 3: nope"));
    kp_ssh_capture_done(&cap);
    kp_free(err);
}

struct job {
    pthread_t thread;
    unsigned index, host;
    bool as_root;
    int r;
    char *err;
    bool output_ok;
};

static void *job_main(void *arg)
{
    struct job *j = arg;
    struct kp_ssh_target t = target(j->host, j->as_root);
    struct kp_ssh_capture cap;
    char idx[16], want[64];
    const char *script = "printf 'job %s on %s\\n' \"$KPSSH_JOB\" \"$(id -u)\"\n";
    const struct kp_ssh_var vars[] = {{"KPSSH_JOB", idx, NULL}};
    const struct kp_ssh_phase ph = {.name = "join",
                                    .script = script,
                                    .script_len = strlen(script),
                                    .vars = vars,
                                    .nvars = 1,
                                    .deadline = kp_deadline_in(120 * KP_USEC_PER_SEC)};

    (void)snprintf(idx, sizeof(idx), "%u", j->index);
    (void)snprintf(want, sizeof(want), "job %u on 0\n", j->index);
    t.tofu_fingerprint = lab.hosts[j->host].fp;
    kp_ssh_capture_init(&cap);
    j->r = kp_ssh_run_phase(&t, &ph, &cap, &j->err);
    j->output_ok = strcmp(kp_buf_str(&cap.out), want) == 0 && cap.pin == KP_SSH_PIN_TOFU;
    kp_ssh_capture_done(&cap);
    return NULL;
}

static void test_concurrent_phases(void **state)
{
    struct job jobs[CONCURRENT_JOBS];

    (void)state;
    memset(jobs, 0, sizeof(jobs));
    for (unsigned k = 0; k < CONCURRENT_JOBS; k++) {
        jobs[k].index = k;
        jobs[k].host = 1 + k % NHOSTS;
        jobs[k].as_root = k % 2 == 0;
        assert_int_equal(pthread_create(&jobs[k].thread, NULL, job_main, &jobs[k]), 0);
    }
    for (unsigned k = 0; k < CONCURRENT_JOBS; k++)
        assert_int_equal(pthread_join(jobs[k].thread, NULL), 0);
    for (unsigned k = 0; k < CONCURRENT_JOBS; k++) {
        if (jobs[k].r != 0 || !jobs[k].output_ok)
            fail_msg("job %u on host %u: %d %s", k, jobs[k].host, jobs[k].r,
                     jobs[k].err ? jobs[k].err : "(wrong output)");
        kp_free(jobs[k].err);
    }
}

/* Lines of our log written by libssh's log callback so far. */
static size_t libssh_log_lines(void)
{
    char *text = read_log();
    size_t n = 0;

    for (const char *p = text; (p = strstr(p, "\"message\":\"libssh\"")); p++)
        n++;
    kp_free(text);
    return n;
}

/* The reported stall: 100 concurrent sessions on one host, some of which never finished.
 * They run as the non-root user: root's login shell on lab hosts sources the build machine's
 * own /root/.bashrc (the lab does not make /root private), and whatever that does at login is
 * not what this test is about (see docs/internals/ssh.md). All must complete, with the right
 * output. The main thread runs no session meanwhile, so every libssh line logged during the
 * test came from a worker thread: libssh keeps its log settings per thread, and a fix that sets
 * them once per process would leave this count unchanged. */
static void test_many_sessions_one_host(void **state)
{
    struct job *jobs;
    size_t before, after;
    unsigned failed = 0;

    (void)state;
    before = libssh_log_lines();
    jobs = kp_calloc(ONE_HOST_JOBS, sizeof(*jobs));
    assert_non_null(jobs);
    for (unsigned k = 0; k < ONE_HOST_JOBS; k++) {
        jobs[k].index = k;
        jobs[k].host = 1;
        jobs[k].as_root = false;
        assert_int_equal(pthread_create(&jobs[k].thread, NULL, job_main, &jobs[k]), 0);
    }
    for (unsigned k = 0; k < ONE_HOST_JOBS; k++)
        assert_int_equal(pthread_join(jobs[k].thread, NULL), 0);
    for (unsigned k = 0; k < ONE_HOST_JOBS; k++) {
        if (jobs[k].r != 0 || !jobs[k].output_ok) {
            print_error("job %u: %d %s\n", k, jobs[k].r,
                        jobs[k].err ? jobs[k].err : "(wrong output)");
            failed++;
        }
        kp_free(jobs[k].err);
    }
    kp_free(jobs);
    assert_int_equal(failed, 0);
    after = libssh_log_lines();
    assert_true(after > before);
}

/* A link that slows to a crawl while input is being sent: the deadline still holds. libssh puts
 * the socket back into blocking mode after the TCP connect, and one send() of its output buffer
 * then waits for the peer however long that takes (207 s for this 8 s deadline before session.c
 * kept the socket non-blocking). The link is shaped without drops (a deep queue), so TCP keeps
 * draining and libssh sees POLLOUT, which is when it sends. */
static void test_slow_link_deadline(void **state)
{
    struct kp_ssh_target t = target(1, false);
    struct kp_ssh_session *s = NULL;
    struct kp_ssh_capture cap;
    const size_t in_len = KP_MAX_PHASE_INPUT;
    char *input, *err = NULL;
    uint64_t t0, took;
    int r;

    (void)state;
    input = kp_malloc(in_len);
    assert_non_null(input);
    memset(input, 'x', in_len);
    r = kp_ssh_connect(&t, kp_deadline_in(30 * KP_USEC_PER_SEC), &s, &err);
    if (r < 0)
        fail_msg("connect: %s", err ? err : kp_strerror(r));
    assert_int_equal(kp_lab_host_sh(&lab.env, "slow", 1), 0);
    kp_ssh_capture_init(&cap);
    t0 = kp_mono_usec();
    r = kp_ssh_exec(s, "cat >/dev/null", input, in_len, kp_deadline_in(8 * KP_USEC_PER_SEC), &cap,
                    &err);
    took = kp_mono_usec() - t0;
    assert_int_equal(kp_lab_host_sh(&lab.env, "fast", 1), 0);
    print_message("# 1 MiB of input over 32 kbit/s with an 8 s deadline: %s after %.0f ms (%s)\n",
                  kp_strerror(r), took / 1e3, err ? err : "-");
    assert_int_equal(r, -ETIMEDOUT);
    /* The deadline plus a poll slice and the teardown of the connection, with room for a busy
     * machine; a blocking send takes what is left of the 1 MiB at 4 kB/s, minutes. */
    assert_true(took < 12 * KP_USEC_PER_SEC);
    kp_ssh_capture_done(&cap);
    kp_ssh_session_free(s);
    kp_free(err);
    kp_free(input);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tofu_and_prepin),       cmocka_unit_test(test_rekey_refused),
        cmocka_unit_test(test_deadline_kills_remote), cmocka_unit_test(test_output_ceiling),
        cmocka_unit_test(test_secrets_never_leak),    cmocka_unit_test(test_sudo_path),
        cmocka_unit_test(test_concurrent_phases),     cmocka_unit_test(test_many_sessions_one_host),
        cmocka_unit_test(test_slow_link_deadline),
    };
    int r;

    /* Debug level from the start, so libssh's own log (routed into ours) is checked too. */
    kp_log_set_level(KP_LOG_DEBUG);
    lab.log_fd = -1;
    if (lab_setup(NULL) != 0)
        return 1;
    r = kp_test_main("ssh", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
    (void)lab_teardown(NULL);
    return r;
}
