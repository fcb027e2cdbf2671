/* DESIGN: kpssh-shim end to end, as a subprocess, for every exit code of the protocol.
 *
 * Each case writes an envelope to a file, runs the built shim on it (KP_SHIM_BIN) with
 * --no-sudo --allowed-signers <file> --log <file>, and checks the exit code, what the script
 * printed and what the shim logged. Signatures are real: the group set-up makes ed25519 keys
 * and a certificate authority with the host's ssh-keygen and signs with `ssh-keygen -Y sign`,
 * so valid-before, namespaces= and cert-authority mean exactly what OpenSSH makes of them.
 *
 * Where the files live: the shim refuses an allowed-signers file (and would refuse programs)
 * unless every directory above it is root-owned and not group/world-writable (kp_safe_path),
 * and /tmp is world-writable. So the private directory is made under the build tree
 * (KP_SHIM_TEST_DIR), which is root's when root builds, as CI does; failing that under /run
 * (root's, 0755). When neither is safe, or we are not root, the cases are skipped, saying so.
 * With KP_SHIM_VALGRIND=1 in the environment every shim run goes through valgrind's memcheck
 * (a plain build: ASan and valgrind do not mix), and a memcheck error fails the case. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/path.h"
#include "base/sha256.h"
#include "base/spawn.h"
#include "base/str.h"
#include "base/time.h"
#include "kp-test.h"

#ifndef KP_SHIM_BIN
#error "KP_SHIM_BIN must name the built kpssh-shim (tests/CMakeLists.txt)"
#endif

#define SEC KP_USEC_PER_SEC
#define VALGRIND_ERROR 99

static char dir[PATH_MAX];
static bool ready;

static char shim_bin[PATH_MAX]; /* the copy of the shim in dir */

static char *path_in(const char *name)
{
    char *p = kp_strjoin(dir, "/", name, (char *)NULL);

    assert_non_null(p);
    return p;
}

static void write_text(const char *name, const void *p, size_t n)
{
    char *path = path_in(name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    close(fd);
    assert_int_equal(chmod(path, 0644), 0);
    kp_free(path);
}

static char *read_text(const char *name)
{
    struct kp_buf b = KP_BUF_INIT(1u << 20);
    char *path = path_in(name), chunk[4096], *s;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    assert_true(fd >= 0);
    while ((n = read(fd, chunk, sizeof(chunk))) > 0)
        assert_int_equal(kp_buf_append(&b, chunk, (size_t)n), 0);
    close(fd);
    kp_free(path);
    s = kp_buf_steal(&b, NULL);
    assert_non_null(s);
    return s;
}

/* Runs argv (a program on the default path) in dir; fails the test unless it exits 0. */
static void run_ok(const char *const *argv)
{
    struct kp_spawn_opts o = {.argv = argv,
                              .path = "/usr/bin:/bin",
                              .timeout_usec = 60 * SEC,
                              .max_stdout = 1u << 16,
                              .stderr_tail = 4096};
    struct kp_spawn_result res;

    assert_int_equal(kp_spawn_run(&o, &res), 0);
    if (res.end != KP_SPAWN_EXITED || res.status != 0)
        fail_msg("%s failed (%d/%d): %s", argv[0], res.end, res.status, kp_buf_str(&res.err));
    kp_spawn_result_done(&res);
}

/* Signs script with key (a name in dir; a -cert.pub name signs with the certificate) for
 * namespace ns; returns the armoured signature. */
static char *sign(const char *key, const char *ns, const char *script)
{
    char *msg_path, *key_path, *sig;

    write_text("msg", script, strlen(script));
    msg_path = path_in("msg");
    key_path = path_in(key);
    {
        char *old = kp_strjoin(msg_path, ".sig", (char *)NULL);

        (void)unlink(old);
        kp_free(old);
    }
    {
        const char *argv[] = {"ssh-keygen", "-q", "-Y", "sign",   "-f",
                              key_path,     "-n", ns,   msg_path, NULL};

        run_ok(argv);
    }
    sig = read_text("msg.sig");
    kp_free(msg_path);
    kp_free(key_path);
    return sig;
}

static void keygen(const char *name)
{
    char *p = path_in(name);
    const char *argv[] = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", p, NULL};

    run_ok(argv);
    kp_free(p);
}

/* An allowed_signers file named name: "kpssh <options> <public key of key>". */
static void signers_file(const char *name, const char *options, const char *key)
{
    char *pub_name = kp_strjoin(key, ".pub", (char *)NULL), *pub = read_text(pub_name);
    struct kp_buf b = KP_BUF_INIT(8192);

    assert_int_equal(kp_buf_printf(&b, "kpssh %s %s", options, pub), 0);
    write_text(name, b.data, b.len);
    kp_buf_done(&b);
    kp_free(pub);
    kp_free(pub_name);
}

static int setup(void **state)
{
    static const char *const candidates[] = {KP_SHIM_TEST_DIR, "/run"};

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(candidates) && !ready; i++) {
        if (geteuid() != 0 || kp_safe_path(candidates[i], 0, NULL, NULL) < 0)
            continue;
        if (snprintf(dir, sizeof(dir), "%s/shim-test.XXXXXX", candidates[i]) >= (int)sizeof(dir))
            continue;
        if (!mkdtemp(dir))
            continue;
        ready = true;
    }
    if (!ready) {
        print_message("shim tests skipped: need root and a root-owned, not group/world-writable "
                      "directory (%s or /run)\n",
                      KP_SHIM_TEST_DIR);
        return 0;
    }
    /* The shim refuses to run from a path it could be replaced at (a checkout under /tmp): run
     * a copy from the safe directory, as a host runs it from /opt/kpssh. */
    {
        char *bin = path_in("kpssh-shim");
        const char *argv[] = {"install", "-m", "0755", KP_SHIM_BIN, bin, NULL};

        run_ok(argv);
        snprintf(shim_bin, sizeof(shim_bin), "%s", bin);
        kp_free(bin);
    }
    keygen("key");
    keygen("ca");
    keygen("ckey");
    {
        char *ca = path_in("ca"), *ckey_pub = path_in("ckey.pub");
        const char *argv[] = {"ssh-keygen",        "-q", "-s",    ca,       "-I",
                              "kpssh-test-signer", "-n", "kpssh", ckey_pub, NULL};

        run_ok(argv);
        kp_free(ca);
        kp_free(ckey_pub);
    }
    signers_file("signers", "namespaces=\"kpssh\"", "key");
    signers_file("signers-expired", "namespaces=\"kpssh\",valid-before=\"20200101\"", "key");
    signers_file("signers-other-ns", "namespaces=\"other\"", "key");
    signers_file("signers-ca", "cert-authority,namespaces=\"kpssh\"", "ca");
    signers_file("signers-open", "namespaces=\"kpssh\"", "key");
    {
        char *p = path_in("signers-open");

        assert_int_equal(chmod(p, 0666), 0);
        kp_free(p);
    }
    write_text("evil-bash-env", "echo PWNED-BY-BASH-ENV\n", 23);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (ready) {
        const char *argv[] = {"rm", "-rf", dir, NULL};

        run_ok(argv);
    }
    return 0;
}

struct shim_run {
    int code;
    struct kp_buf out, err;
    char *log;
};

static void shim_run_done(struct shim_run *r)
{
    kp_buf_done(&r->out);
    kp_buf_done(&r->err);
    kp_free(r->log);
}

/* Runs the shim on envelope e[0..n) with allowed-signers file signers (a name in dir) and the
 * extra environment env; returns how it went. */
static struct shim_run run_shim_with(const char *e, size_t n, const char *signers,
                                     const char *const *env, const char *extra_arg)
{
    char *signers_path = path_in(signers), *log_path = path_in("log"), *in_path = path_in("in");
    const char *argv[16];
    size_t a = 0;
    struct kp_spawn_opts o = {.argv = argv,
                              .env = env,
                              .path = "/usr/bin:/bin",
                              .flags = KP_SPAWN_STDIN_FD,
                              .timeout_usec = 120 * SEC,
                              .max_stdout = 1u << 20,
                              .stderr_tail = 1u << 20};
    struct kp_spawn_result res;
    struct shim_run r = {0};
    int fd;

    if (!ready)
        skip();
    write_text("in", e, n);
    (void)unlink(log_path);
    if (getenv("KP_SHIM_VALGRIND")) {
        argv[a++] = "valgrind";
        argv[a++] = "--quiet";
        argv[a++] = "--leak-check=full";
        argv[a++] = "--errors-for-leak-kinds=definite,indirect";
        argv[a++] = "--error-exitcode=" KP_STRINGIFY(VALGRIND_ERROR);
    }
    argv[a++] = shim_bin;
    argv[a++] = "--no-sudo";
    argv[a++] = "--allowed-signers";
    argv[a++] = signers_path;
    argv[a++] = "--log";
    argv[a++] = log_path;
    if (extra_arg)
        argv[a++] = extra_arg;
    argv[a] = NULL;
    fd = open(in_path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    o.stdin_fd = fd;
    assert_int_equal(kp_spawn_run(&o, &res), 0);
    close(fd);
    assert_int_equal(res.end, KP_SPAWN_EXITED);
    if (res.status == VALGRIND_ERROR)
        fail_msg("valgrind found errors in the shim:\n%s", kp_buf_str(&res.err));
    r.code = res.status;
    r.out = res.out;
    r.err = res.err;
    kp_buf_init(&res.out, 0);
    kp_buf_init(&res.err, 0);
    r.log = access(log_path, F_OK) == 0 ? read_text("log") : kp_strdup("");
    kp_free(signers_path);
    kp_free(log_path);
    kp_free(in_path);
    return r;
}

static struct shim_run run_shim(const char *e, const char *signers)
{
    return run_shim_with(e, strlen(e), signers, NULL, NULL);
}

/* A signed envelope: phase, then params text (NULL: none), signature text and script. */
static char *envelope(const char *phase, const char *params, const char *sig, const char *script)
{
    struct kp_buf b = KP_BUF_INIT(1u << 21);
    char *s;

    assert_int_equal(kp_buf_printf(&b, "kpssh-envelope: 1\nphase: %s\n", phase), 0);
    if (params) {
        assert_int_equal(kp_buf_puts(&b, "params-b64: "), 0);
        assert_int_equal(kp_base64_encode(params, strlen(params), 0, &b), 0);
        assert_int_equal(kp_buf_putc(&b, '\n'), 0);
    }
    assert_int_equal(kp_buf_puts(&b, "sig-b64: "), 0);
    assert_int_equal(kp_base64_encode(sig, strlen(sig), 0, &b), 0);
    assert_int_equal(kp_buf_puts(&b, "\nscript-b64: "), 0);
    assert_int_equal(kp_base64_encode(script, strlen(script), 0, &b), 0);
    assert_int_equal(kp_buf_putc(&b, '\n'), 0);
    s = kp_buf_steal(&b, NULL);
    assert_non_null(s);
    return s;
}

/* Signs script with key for ns and runs it as phase with params against signers. */
static struct shim_run run_signed(const char *phase, const char *params, const char *key,
                                  const char *ns, const char *script, const char *signers)
{
    char *sig, *e;
    struct shim_run r;

    if (!ready)
        skip();
    sig = sign(key, ns, script);
    e = envelope(phase, params, sig, script);
    r = run_shim(e, signers);
    kp_free(e);
    kp_free(sig);
    return r;
}

static void expect(const struct shim_run *r, int code, const char *log_part)
{
    if (r->code != code)
        fail_msg("shim exited %d, want %d\nstdout:\n%s\nstderr:\n%s", r->code, code,
                 kp_buf_str(&r->out), kp_buf_str(&r->err));
    if (log_part && !strstr(r->log, log_part))
        fail_msg("log lacks '%s':\n%s", log_part, r->log);
    /* Every log line is also on stderr, prefixed. */
    if (log_part && !strstr(kp_buf_str(&r->err), "kpssh-shim: "))
        fail_msg("stderr lacks the kpssh-shim: prefix:\n%s", kp_buf_str(&r->err));
}

static void test_probe(void **state)
{
    struct shim_run r;
    const char *s;
    int lines = 0;

    (void)state;
    r = run_shim("kpssh-envelope: 1\nphase: probe\n", "signers");
    expect(&r, 0, "probe: ok");
    s = kp_buf_str(&r.out);
    for (const char *c = s; *c; c++)
        lines += *c == '\n';
    assert_int_equal(lines, 4);
    assert_true(s[0] >= '1' && s[0] <= '9'); /* nproc */
    shim_run_done(&r);
    /* Unsigned: works even when the trust root is missing. */
    r = run_shim("kpssh-envelope: 1\nphase: probe\n", "no-such-signers");
    expect(&r, 0, NULL);
    shim_run_done(&r);
}

static void test_signed_script_runs(void **state)
{
    static const char script[] = "echo \"out:$KPSSH_NODE_NAME:$KPSSH_LABELS\"; echo err >&2\n";
    char hex[KP_SHA256_HEX_SIZE], want[128];
    struct shim_run r;

    (void)state;
    r = run_signed("join", "KPSSH_LABELS=a=b\nKPSSH_NODE_NAME=h7\n", "key", "kpssh", script,
                   "signers");
    expect(&r, 0, "join: ok");
    assert_string_equal(kp_buf_str(&r.out), "out:h7:a=b\n");
    assert_non_null(strstr(kp_buf_str(&r.err), "err\n"));
    kp_sha256_hex(script, strlen(script), hex);
    snprintf(want, sizeof(want), "join: start, script sha256:%s", hex);
    assert_non_null(strstr(r.log, want));
    assert_non_null(strstr(r.log, "verify: Good \"kpssh\" signature"));
    shim_run_done(&r);
}

static void test_script_failure_is_10(void **state)
{
    struct shim_run r;

    (void)state;
    r = run_signed("install", NULL, "key", "kpssh", "echo partial; exit 3\n", "signers");
    expect(&r, 10, "script exited 3");
    assert_string_equal(kp_buf_str(&r.out), "partial\n");
    shim_run_done(&r);
    r = run_signed("leave", NULL, "key", "kpssh", "kill -TERM $$\n", "signers");
    expect(&r, 10, "script killed by signal 15");
    shim_run_done(&r);
    /* A script's own 2 must not look like "signature rejected". */
    r = run_signed("uninstall", NULL, "key", "kpssh", "exit 2\n", "signers");
    expect(&r, 10, "script exited 2");
    shim_run_done(&r);
}

static void test_signature_rejections(void **state)
{
    static const char script[] = "echo should-not-run\n";
    struct shim_run r;
    char *sig, *e;

    (void)state;
    if (!ready)
        skip();
    /* One byte changed after signing. */
    sig = sign("key", "kpssh", script);
    e = envelope("join", NULL, sig, "echo should-not-rum\n");
    r = run_shim(e, "signers");
    expect(&r, 2, "join: signature rejected");
    assert_non_null(strstr(r.log, "verify: "));
    assert_null(strstr(kp_buf_str(&r.out), "should-not"));
    shim_run_done(&r);
    kp_free(e);
    kp_free(sig);

    /* Signed for another namespace; a signer allowed only for another namespace. */
    r = run_signed("join", NULL, "key", "other", script, "signers");
    expect(&r, 2, "signature rejected");
    shim_run_done(&r);
    r = run_signed("join", NULL, "key", "kpssh", script, "signers-other-ns");
    expect(&r, 2, "signature rejected");
    shim_run_done(&r);
    /* A signer whose valid-before is in the past. */
    r = run_signed("join", NULL, "key", "kpssh", script, "signers-expired");
    expect(&r, 2, "signature rejected");
    shim_run_done(&r);
    /* A key the file does not list (the CA's own key signing directly). */
    r = run_signed("join", NULL, "ckey", "kpssh", script, "signers");
    expect(&r, 2, "signature rejected");
    shim_run_done(&r);
    /* A missing trust root is a rejection too, with the reason logged. */
    r = run_signed("join", NULL, "key", "kpssh", script, "no-such-signers");
    expect(&r, 2, "allowed signers: ");
    assert_non_null(strstr(r.log, "No such file or directory"));
    shim_run_done(&r);
    /* Garbage instead of an SSHSIG. */
    e = envelope("join", NULL, "not a signature", script);
    r = run_shim(e, "signers");
    expect(&r, 2, "signature rejected");
    shim_run_done(&r);
    kp_free(e);
}

static void test_cert_authority(void **state)
{
    struct shim_run r;

    (void)state;
    /* OpenSSH 9.2 signs with the certificate when -f names the -cert.pub file (plain -f key
     * signs with the bare key, which a cert-authority line does not accept). */
    r = run_signed("join", NULL, "ckey-cert.pub", "kpssh", "echo by-cert\n", "signers-ca");
    expect(&r, 0, "join: ok");
    assert_string_equal(kp_buf_str(&r.out), "by-cert\n");
    shim_run_done(&r);
    r = run_signed("join", NULL, "ckey", "kpssh", "echo bare\n", "signers-ca");
    expect(&r, 2, "signature rejected");
    shim_run_done(&r);
}

static void test_unsafe_trust_root_is_1(void **state)
{
    struct shim_run r;

    (void)state;
    r = run_signed("join", NULL, "key", "kpssh", "echo no\n", "signers-open");
    expect(&r, 1, "is writable by group or others");
    assert_string_equal(kp_buf_str(&r.out), "");
    shim_run_done(&r);
}

static void test_environment_is_scrubbed(void **state)
{
    static const char script[] = "env; echo SHELLOPTS=$SHELLOPTS\n";
    const char *env[] = {NULL,
                         "ENV=/nonexistent-env",
                         "SHELLOPTS=xtrace",
                         "BASHOPTS=extglob",
                         "PS4=+TRACED ",
                         "IFS=x",
                         "GLOBIGNORE=*",
                         "KPSSH_FROM_ENV=leak",
                         "SSH_ORIGINAL_COMMAND=rm -rf /",
                         NULL};
    struct shim_run r;
    char *bash_env, *sig, *e;
    const char *out;

    (void)state;
    if (!ready)
        skip();
    bash_env = kp_strjoin("BASH_ENV=", dir, "/evil-bash-env", (char *)NULL);
    env[0] = bash_env;
    sig = sign("key", "kpssh", script);
    e = envelope("join", "KPSSH_NODE_NAME=h7\n", sig, script);
    r = run_shim_with(e, strlen(e), "signers", env, NULL);
    expect(&r, 0, "join: ok");
    out = kp_buf_str(&r.out);
    assert_null(strstr(out, "PWNED"));
    assert_null(strstr(kp_buf_str(&r.err), "TRACED"));
    assert_null(strstr(kp_buf_str(&r.err), "+ env"));
    /* Exactly what the shim sets, plus what bash adds itself. */
    for (const char *line = out; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        static const char *const allowed[] = {
            "PATH=", "HOME=", "KPSSH_NODE_NAME=h7", "PWD=", "SHLVL=", "_=", "SHELLOPTS=\0"};
        bool ok = false;

        for (size_t i = 0; i < KP_ARRAY_SIZE(allowed); i++)
            ok = ok ||
                 (n >= strlen(allowed[i]) && memcmp(line, allowed[i], strlen(allowed[i])) == 0);
        /* SHELLOPTS is bash's own variable; it must not hold xtrace. */
        if (ok && kp_startswith(line, "SHELLOPTS=") && memmem(line, n, "xtrace", 6))
            ok = false;
        if (!ok)
            fail_msg("unexpected environment line in the script: %.*s", (int)n, line);
        line += n + (nl ? 1 : 0);
    }
    assert_non_null(strstr(out, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:"
                                "/bin\n"));
    shim_run_done(&r);
    kp_free(e);
    kp_free(sig);
    kp_free(bash_env);
}

static void test_bad_params_are_3(void **state)
{
    struct shim_run r;

    (void)state;
    r = run_signed("join", "KPSSH_=x\n", "key", "kpssh", "echo no\n", "signers");
    expect(&r, 3, "bad param");
    assert_string_equal(kp_buf_str(&r.out), "");
    shim_run_done(&r);
    r = run_signed("join", "KPSSH_A=1\nKPSSH_B\n", "key", "kpssh", "echo no\n", "signers");
    expect(&r, 3, "has no '='");
    shim_run_done(&r);
    r = run_signed("join", "LD_PRELOAD=/tmp/x.so\n", "key", "kpssh", "echo no\n", "signers");
    expect(&r, 3, "bad param");
    shim_run_done(&r);
    /* The signature is checked first: a tampered envelope with bad params is a rejection. */
    r = run_signed("join", "KPSSH_=x\n", "key", "other", "echo no\n", "signers");
    expect(&r, 2, "signature rejected");
    shim_run_done(&r);
}

/* The script gets the umask Raw mode's sudo gives (022), not the shim's private one: files it
 * writes for others to read (an apt keyring) stay readable. */
static void test_script_umask(void **state)
{
    static const char script[] = "umask\n";
    struct shim_run r;
    char *sig, *e;

    (void)state;
    if (!ready)
        skip();
    sig = sign("key", "kpssh", script);
    e = envelope("join", NULL, sig, script);
    r = run_shim_with(e, strlen(e), "signers", NULL, NULL);
    expect(&r, 0, "join: ok");
    assert_string_equal(kp_buf_str(&r.out), "0022\n");
    shim_run_done(&r);
    kp_free(e);
    kp_free(sig);
}

/* A shim that could be replaced where it lies refuses to run at all (exit 1). */
static void test_unsafe_self(void **state)
{
    char *open_dir = path_in("open"), *copy = path_in("open/kpssh-shim");
    const char *mk[] = {"mkdir", "-m", "0777", "-p", open_dir, NULL};
    const char *cp[] = {"install", "-m", "0755", shim_bin, copy, NULL};
    const char *argv[] = {copy, "--no-sudo", NULL};
    struct kp_spawn_opts o = {.argv = argv,
                              .path = "/usr/bin:/bin",
                              .timeout_usec = 30 * SEC,
                              .max_stdout = 1u << 16,
                              .stderr_tail = 1u << 16};
    struct kp_spawn_result res;

    (void)state;
    if (!ready)
        skip();
    run_ok(mk);
    assert_int_equal(chmod(open_dir, 0777), 0); /* past the umask */
    run_ok(cp);
    assert_int_equal(kp_spawn_run(&o, &res), 0);
    assert_int_equal(res.end, KP_SPAWN_EXITED);
    assert_int_equal(res.status, 1);
    assert_non_null(strstr(kp_buf_str(&res.err), "refusing to run from an unsafe path"));
    kp_spawn_result_done(&res);
    kp_free(open_dir);
    kp_free(copy);
}

static void test_envelope_verdicts(void **state)
{
    static const char plain[] = "#!/bin/bash\necho I am a Raw-mode script\n";
    struct shim_run r;

    (void)state;
    r = run_shim("kpssh-envelope: 1\nphase: reboot\n", "signers");
    expect(&r, 5, "unknown phase");
    shim_run_done(&r);
    r = run_shim("phase: probe\n", "signers");
    expect(&r, 4, "malformed envelope");
    shim_run_done(&r);
    r = run_shim("kpssh-envelope: 2\nphase: probe\n", "signers");
    expect(&r, 4, "version is not 1");
    shim_run_done(&r);
    r = run_shim(plain, "signers");
    expect(&r, 4, "not an envelope");
    assert_string_equal(kp_buf_str(&r.out), "");
    shim_run_done(&r);
    r = run_shim("kpssh-envelope: 1\nphase: join\nscript-b64: ZWNobwo=\n", "signers");
    expect(&r, 4, "no sig-b64");
    shim_run_done(&r);
    r = run_shim("kpssh-envelope: 1\nphase: join\nsig-b64: ZWNobwo=\nscript-b64: ZWNob\n",
                 "signers");
    expect(&r, 4, "script-b64 is not base64");
    shim_run_done(&r);
    r = run_shim("", "signers");
    expect(&r, 4, "malformed envelope");
    shim_run_done(&r);
}

static void test_options(void **state)
{
    struct shim_run r;

    (void)state;
    r = run_shim_with("", 0, "signers", NULL, "--bogus");
    expect(&r, 1, NULL);
    assert_non_null(strstr(kp_buf_str(&r.err), "unknown option or argument '--bogus'"));
    shim_run_done(&r);
    r = run_shim_with("", 0, "signers", NULL, "positional");
    expect(&r, 1, NULL);
    shim_run_done(&r);
    r = run_shim_with("", 0, "signers", NULL, "--help");
    expect(&r, 0, NULL);
    assert_non_null(strstr(kp_buf_str(&r.out), " 10  the signed script failed"));
    shim_run_done(&r);
}

/* The controller goes away mid-script: the shim sees its stdout hang up and ends the script's
 * whole process group, background children included. */
static void test_hangup_ends_the_script(void **state)
{
    static const char script[] = "sleep 60 & echo $! >\"$KPSSH_PIDFILE\"; echo started; wait\n";
    char *sig, *e, *pidfile, *params, *signers, *log, *pidtext;
    int out_p[2], in_fd, st = 0;
    char buf[64];
    pid_t pid, bg;
    uint64_t until;
    ssize_t n;

    (void)state;
    if (!ready)
        skip();
    pidfile = path_in("bg.pid");
    (void)unlink(pidfile);
    params = kp_strjoin("KPSSH_PIDFILE=", pidfile, "\n", (char *)NULL);
    sig = sign("key", "kpssh", script);
    e = envelope("join", params, sig, script);
    write_text("in", e, strlen(e));
    signers = path_in("signers");
    log = path_in("log");
    e = (kp_free(e), path_in("in"));
    in_fd = open(e, O_RDONLY | O_CLOEXEC);
    assert_true(in_fd >= 0);
    assert_int_equal(pipe2(out_p, O_CLOEXEC), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);

        if (dup2(in_fd, 0) < 0 || dup2(out_p[1], 1) < 0 || devnull < 0 || dup2(devnull, 2) < 0)
            _exit(127);
        execl(shim_bin, shim_bin, "--no-sudo", "--allowed-signers", signers, "--log", log,
              (char *)NULL);
        _exit(127);
    }
    close(out_p[1]);
    close(in_fd);
    n = read(out_p[0], buf, sizeof(buf) - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "started"));
    close(out_p[0]); /* the controller hangs up */
    until = kp_mono_usec() + 30 * SEC;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (kp_mono_usec() > until) {
            kill(pid, SIGKILL);
            fail_msg("the shim did not end after its stdout hung up");
        }
        (void)poll(NULL, 0, 20);
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    pidtext = read_text("bg.pid");
    {
        uint32_t v = 0;

        pidtext[strcspn(pidtext, "\n")] = '\0';
        assert_int_equal(kp_safe_atou32(pidtext, &v), 0);
        bg = (pid_t)v;
    }
    /* The background sleep got the group's SIGHUP (then SIGKILL): it is gone. */
    until = kp_mono_usec() + 10 * SEC;
    while (kill(bg, 0) == 0 && kp_mono_usec() < until)
        (void)poll(NULL, 0, 20);
    assert_int_equal(kill(bg, 0), -1);
    kp_free(pidtext);
    pidtext = read_text("log");
    assert_non_null(strstr(pidtext, "hang-up"));
    kp_free(pidtext);
    kp_free(e);
    kp_free(log);
    kp_free(signers);
    kp_free(sig);
    kp_free(params);
    kp_free(pidfile);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_signed_script_runs),
        cmocka_unit_test(test_script_failure_is_10),
        cmocka_unit_test(test_signature_rejections),
        cmocka_unit_test(test_cert_authority),
        cmocka_unit_test(test_unsafe_trust_root_is_1),
        cmocka_unit_test(test_environment_is_scrubbed),
        cmocka_unit_test(test_script_umask),
        cmocka_unit_test(test_unsafe_self),
        cmocka_unit_test(test_bad_params_are_3),
        cmocka_unit_test(test_envelope_verdicts),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_hangup_ends_the_script),
    };
    int rc;

    /* One set-up for all cases: key generation is the slow part. */
    if (setup(NULL) != 0)
        return 1;
    rc = kp_test_main("shim-exec", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
    (void)teardown(NULL);
    return rc;
}
