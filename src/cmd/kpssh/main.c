/* DESIGN: kpssh's main: the verb table (STYLE.md rule 12, git's command table).
 *
 * What: finds the verb in argv[1] and runs it (verbs.h); prints the top-level help, the
 * version, or a usage error (exit 2) for anything else.
 *
 * Why this way: each verb is one row and one file, so a new verb cannot forget its help line.
 * kubectl runs plugins by the name kubectl-<plugin>, so the same binary is installed (linked) as
 * kubectl-kpssh; when argv[0] ends in that name, messages say "kubectl kpssh".
 *
 * The CLI prints short human messages (STYLE.md rule 8): the library's own log lines, which only
 * informers write here, go to stderr as text from warnings up. */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cmd/kpssh/verbs.h"

static int cmd_version(int argc, char **argv, const char *prog);
static int cmd_help(int argc, char **argv, const char *prog);

struct verb {
    const char *name;
    int (*run)(int argc, char **argv, const char *prog);
    const char *help;
};

static const struct verb verbs[] = {
    {"get", kp_cli_get, "get pool [-w] [-o wide|json|yaml]: the SSH host pool"},
    {"simulate", kp_cli_simulate,
     "simulate [-f FILE]... [-o json|yaml]: what the provisioner would do"},
    {"profile", kp_cli_profile,
     "profile lint|sign|verify -f FILE: check, sign or verify an SSHJoinProfile's scripts"},
    {"version", cmd_version, "print the version"},
    {"help", cmd_help, "this text"},
};

static void usage(FILE *f, const char *prog)
{
    size_t i;

    fprintf(f, "Usage: %s <command> [options]\n\nCommands:\n", prog);
    for (i = 0; i < KP_ARRAY_SIZE(verbs); i++)
        fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].help);
    fprintf(f, "\nRun '%s <command> --help' for a command's options.\n", prog);
}

static int cmd_version(int argc, char **argv, const char *prog)
{
    (void)argc;
    (void)argv;
    printf("%s %s\n", prog, KP_VERSION);
    return fflush(stdout) == 0 ? KP_CLI_OK : KP_CLI_FAILURE;
}

static int cmd_help(int argc, char **argv, const char *prog)
{
    (void)argc;
    (void)argv;
    usage(stdout, prog);
    return fflush(stdout) == 0 ? KP_CLI_OK : KP_CLI_FAILURE;
}

int main(int argc, char **argv)
{
    const char *prog = "kpssh";
    size_t i;

    if (argc > 0 && argv[0] && kp_endswith(argv[0], "kubectl-kpssh"))
        prog = "kubectl kpssh";
    kp_log_set_format(KP_LOG_FORMAT_TEXT);
    kp_log_set_level(KP_LOG_WARN);
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout, prog);
        if (argc < 2)
            return KP_CLI_USAGE;
        return fflush(stdout) == 0 ? KP_CLI_OK : KP_CLI_FAILURE;
    }
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(argc - 1, argv + 1, prog);
    for (i = 0; i < KP_ARRAY_SIZE(verbs); i++)
        if (strcmp(argv[1], verbs[i].name) == 0)
            return verbs[i].run(argc - 1, argv + 1, prog);
    fprintf(stderr,
            "%s: unknown command \"%s\" (commands: get, simulate, profile, version, help)\n", prog,
            argv[1]);
    return KP_CLI_USAGE;
}
