/* DESIGN: unit tests for base/spawn.c.
 *
 * Each test runs /bin/sh with a small script and checks what the child saw (environment,
 * stdin, signal mask and dispositions from /proc/self/status, leaked fds) and how it ended
 * (exit code, signal, deadline, output ceiling). Deadlines are generous upper bounds, never
 * timing assertions. The torture case fails each of our allocations around one spawn. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/spawn.h"
#include "base/str.h"
#include "base/time.h"
#include "kp-test.h"

#define SEC KP_USEC_PER_SEC

static struct kp_spawn_result run_sh(const char *script, const char *const *env,
                                     enum kp_spawn_flags flags, uint64_t timeout, size_t max_out)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct kp_spawn_opts o = {
        .argv = argv,
        .env = env,
        .path = "/usr/bin:/bin",
        .flags = flags,
        .timeout_usec = timeout,
        .max_stdout = max_out,
        .stderr_tail = 256,
    };
    struct kp_spawn_result res;

    assert_int_equal(kp_spawn_run(&o, &res), 0);
    return res;
}

static void test_output_and_status(void **state)
{
    struct kp_spawn_result res;

    (void)state;
    res = run_sh("echo out; echo err >&2; exit 3", NULL, 0, 10 * SEC, 1024);
    assert_int_equal(res.end, KP_SPAWN_EXITED);
    assert_int_equal(res.status, 3);
    assert_string_equal(kp_buf_str(&res.out), "out\n");
    assert_string_equal(kp_buf_str(&res.err), "err\n");
    kp_spawn_result_done(&res);

    res = run_sh("kill -9 $$", NULL, 0, 10 * SEC, 1024);
    assert_int_equal(res.end, KP_SPAWN_SIGNALED);
    assert_int_equal(res.status, SIGKILL);
    kp_spawn_result_done(&res);
}

static void test_environment(void **state)
{
    const char *env[] = {"KP_SPAWN_A=new", "KP_SPAWN_B=b", NULL};
    struct kp_spawn_result res;

    (void)state;
    assert_int_equal(setenv("KP_SPAWN_A", "old", 1), 0);
    assert_int_equal(setenv("KP_SPAWN_C", "inherited", 1), 0);
    res = run_sh("echo \"$KP_SPAWN_A $KP_SPAWN_B $KP_SPAWN_C\"", env, 0, 10 * SEC, 1024);
    assert_string_equal(kp_buf_str(&res.out), "new b inherited\n");
    kp_spawn_result_done(&res);
    res = run_sh("echo \"$KP_SPAWN_A-$KP_SPAWN_C\"", env, KP_SPAWN_CLEAR_ENV, 10 * SEC, 1024);
    assert_string_equal(kp_buf_str(&res.out), "new-\n");
    kp_spawn_result_done(&res);
    unsetenv("KP_SPAWN_A");
    unsetenv("KP_SPAWN_C");
}

static void test_clean_child(void **state)
{
    struct kp_spawn_result res;
    struct sigaction sa = {.sa_handler = SIG_IGN}, old_sa;
    sigset_t block, old_mask;
    int leak;

    (void)state;
    /* An fd without close-on-exec, an ignored signal and a blocked one: none may reach the
     * child. */
    leak = dup2(2, 57);
    assert_int_equal(leak, 57);
    assert_int_equal(sigaction(SIGTERM, &sa, &old_sa), 0);
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    assert_int_equal(sigprocmask(SIG_BLOCK, &block, &old_mask), 0);

    res = run_sh("test -e /proc/self/fd/57 && echo leaked; "
                 "grep -E '^Sig(Blk|Ign)' /proc/self/status; cat",
                 NULL, 0, 10 * SEC, 4096);
    assert_int_equal(res.status, 0);
    {
        unsigned long long blk = ~0ULL, ign = ~0ULL;

        assert_int_equal(sscanf(kp_buf_str(&res.out), "SigBlk:\t%llx\nSigIgn:\t%llx", &blk, &ign),
                         2);
        assert_true(blk == 0);
        /* Signals 32 and 33 are glibc's own (thread cancellation, setxid): sigaction refuses
         * them, so whatever the test runner inherited for them cannot be reset, and no program
         * can use them anyway. Every other signal must be at its default. */
        assert_true((ign & ~((1ULL << 31) | (1ULL << 32))) == 0);
    }
    kp_spawn_result_done(&res);

    assert_int_equal(sigprocmask(SIG_SETMASK, &old_mask, NULL), 0);
    assert_int_equal(sigaction(SIGTERM, &old_sa, NULL), 0);
    close(leak);
}

static void test_deadline_and_limits(void **state)
{
    struct kp_spawn_result res;

    (void)state;
    res = run_sh("exec sleep 30", NULL, 0, SEC / 5, 1024);
    assert_int_equal(res.end, KP_SPAWN_TIMED_OUT);
    kp_spawn_result_done(&res);
    /* The child closes its output but keeps running. */
    res = run_sh("exec >/dev/null 2>&1; sleep 30", NULL, 0, SEC / 5, 1024);
    assert_int_equal(res.end, KP_SPAWN_TIMED_OUT);
    kp_spawn_result_done(&res);

    res = run_sh("while :; do echo yyyyyyyyyyyyyyyyyyyy; done", NULL, 0, 30 * SEC, 1000);
    assert_int_equal(res.end, KP_SPAWN_OUTPUT_LIMIT);
    assert_int_equal(res.out.len, 0);
    kp_spawn_result_done(&res);

    res = run_sh("i=0; while [ $i -lt 100 ]; do echo line$i >&2; i=$((i+1)); done; echo end >&2",
                 NULL, 0, 30 * SEC, 1000);
    assert_int_equal(res.end, KP_SPAWN_EXITED);
    assert_int_equal(res.err.len, 256);
    assert_true(res.err.truncated);
    assert_true(kp_endswith(kp_buf_str(&res.err), "line99\nend\n"));
    kp_spawn_result_done(&res);
}

static void test_lookup_and_exec_errors(void **state)
{
    const char *argv[] = {"kp-no-such-program", NULL};
    struct kp_spawn_opts o = {.argv = argv, .path = "/usr/bin:/bin", .timeout_usec = SEC};
    struct kp_spawn_result res = {.status = 77};
    char *p = NULL;
    char path[512];

    (void)state;
    assert_int_equal(kp_spawn_run(&o, &res), -ENOENT);
    assert_int_equal(res.status, 77);
    assert_int_equal(kp_spawn_find_program("sh", "relative:/bin", &p), 0);
    assert_string_equal(p, "/bin/sh");
    kp_free(p);
    assert_int_equal(kp_spawn_find_program("sh", ":.:bin", &p), -ENOENT);
    assert_int_equal(kp_spawn_find_program("", "/bin", &p), -ENOENT);
    assert_int_equal(kp_spawn_find_program("./x/y", "/bin", &p), 0);
    assert_string_equal(p, "./x/y");
    kp_free(p);

    /* A file that is not executable: execve fails in the child, the parent reports it. */
    assert_true(snprintf(path, sizeof(path), "%s/exec/not-executable.txt", kp_test_data_dir()) <
                (int)sizeof(path));
    argv[0] = path;
    assert_int_equal(kp_spawn_run(&o, &res), -EACCES);
    argv[0] = NULL;
    assert_int_equal(kp_spawn_run(&o, &res), -EINVAL);
}

static void test_stdin_fd_and_pgroup(void **state)
{
    const char *argv[] = {"sh", "-c",
                          "cat; read a b c d pgrp rest </proc/$$/stat; "
                          "[ \"$pgrp\" = $$ ] && echo leader",
                          NULL};
    struct kp_spawn_opts o = {
        .argv = argv,
        .path = "/usr/bin:/bin",
        .flags = KP_SPAWN_STDIN_FD | KP_SPAWN_NEW_PGROUP,
        .timeout_usec = 10 * SEC,
        .max_stdout = 1024,
        .stderr_tail = 256,
    };
    struct kp_spawn_result res;
    char tmpl[] = "/tmp/kp-spawn-stdin.XXXXXX";
    int fd;

    (void)state;
    fd = mkostemp(tmpl, O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(unlink(tmpl), 0);
    assert_int_equal(write(fd, "from file\n", 10), 10);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    o.stdin_fd = fd;
    assert_int_equal(kp_spawn_run(&o, &res), 0);
    assert_int_equal(res.end, KP_SPAWN_EXITED);
    assert_string_equal(kp_buf_str(&res.out), "from file\nleader\n");
    kp_spawn_result_done(&res);
    /* The caller's fd stays open and usable. */
    assert_true(fcntl(fd, F_GETFD) >= 0);
    close(fd);

    /* Without the flag stdin_fd is ignored: a zeroed field never hands over our fd 0. */
    o.flags = 0;
    o.stdin_fd = 0;
    argv[2] = "cat; echo end";
    assert_int_equal(kp_spawn_run(&o, &res), 0);
    assert_string_equal(kp_buf_str(&res.out), "end\n");
    kp_spawn_result_done(&res);
}

static void test_start(void **state)
{
    const char *argv[] = {"sh", "-c", "exit 7", NULL};
    struct kp_spawn_opts o = {
        .argv = argv,
        .path = "/usr/bin:/bin",
        .flags = KP_SPAWN_INHERIT_OUTPUT | KP_SPAWN_NEW_PGROUP | KP_SPAWN_CLEAR_ENV,
    };
    struct kp_spawn_result res;
    pid_t pid = -1;
    int st = 0;

    (void)state;
    assert_int_equal(kp_spawn_start(&o, &pid), 0);
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 7);

    /* The group can be signalled as a whole. */
    argv[2] = "sleep 30 & wait";
    assert_int_equal(kp_spawn_start(&o, &pid), 0);
    assert_int_equal(kill(-pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));

    argv[0] = "kp-no-such-program";
    assert_int_equal(kp_spawn_start(&o, &pid), -ENOENT);
    argv[0] = "sh";
    /* Each entry point refuses the other's mode. */
    o.flags = 0;
    assert_int_equal(kp_spawn_start(&o, &pid), -EINVAL);
    o.flags = KP_SPAWN_INHERIT_OUTPUT;
    assert_int_equal(kp_spawn_run(&o, &res), -EINVAL);
}

static int torture_spawn(void)
{
    const char *argv[] = {"echo", "hi", NULL};
    const char *env[] = {"X=1", NULL};
    struct kp_spawn_opts o = {
        .argv = argv,
        .env = env,
        .path = "/usr/bin:/bin",
        .timeout_usec = 10 * SEC,
        .max_stdout = 100,
        .stderr_tail = 100,
    };
    struct kp_spawn_result res;
    int r;

    r = kp_spawn_run(&o, &res);
    if (r < 0)
        return r;
    r = res.end == KP_SPAWN_EXITED && strcmp(kp_buf_str(&res.out), "hi\n") == 0 ? 0 : -EIO;
    kp_spawn_result_done(&res);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_and_status),
        cmocka_unit_test(test_environment),
        cmocka_unit_test(test_clean_child),
        cmocka_unit_test(test_deadline_and_limits),
        cmocka_unit_test(test_lookup_and_exec_errors),
        cmocka_unit_test(test_stdin_fd_and_pgroup),
        cmocka_unit_test(test_start),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_spawn),
    };

    return kp_test_main("spawn", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
