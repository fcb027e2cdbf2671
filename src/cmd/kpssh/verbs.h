/* cmd/kpssh/verbs.h: the kpssh CLI's verbs, one file each, dispatched by main.c's verb table.
 *
 * Each verb takes the arguments after its own name (argv[0] is the verb) and the program name
 * for messages ("kpssh" or "kubectl kpssh"), prints what it has to say, and returns the exit
 * status: 0, 1 (failure) or 2 (usage). Main thread; the CLI is single-threaded apart from the
 * informer threads a watch runs. */
#ifndef KP_CMD_KPSSH_VERBS_H
#define KP_CMD_KPSSH_VERBS_H

#include <stddef.h>

enum {
    KP_CLI_OK = 0,
    KP_CLI_FAILURE = 1,
    KP_CLI_USAGE = 2,
};

/* `get <resource>`: today `get pool` (get-pool.c). */
int kp_cli_get(int argc, char **argv, const char *prog);

/* `simulate [-f FILE]...`: the provisioner's plan for the pending pods (simulate.c). */
int kp_cli_simulate(int argc, char **argv, const char *prog);

/* `profile lint|sign|verify -f FILE ...`: an SSHJoinProfile's script contract and signatures
 * (profile.c). */
int kp_cli_profile(int argc, char **argv, const char *prog);

/* Option matching for the verbs' parsers (opts.c). kp_cli_opt_is: the length of the prefix of a
 * that is the option with short form s (may be NULL) or long form l, 0 when it is another one.
 * kp_cli_opt_value: the value of the option at argv[*i] matched as its first len bytes
 * ("--name=v", "-xv", or the next argument, then *i moves past it); NULL, with
 * "<prog>: <verb>option <name> needs a value" on stderr, when it is missing. */
size_t kp_cli_opt_is(const char *a, const char *s, const char *l);
const char *kp_cli_opt_value(int argc, char **argv, int *i, const char *name, size_t len,
                             const char *prog, const char *verb);

#endif
