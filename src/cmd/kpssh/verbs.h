/* cmd/kpssh/verbs.h: the kpssh CLI's verbs, one file each, dispatched by main.c's verb table.
 *
 * Each verb takes the arguments after its own name (argv[0] is the verb) and the program name
 * for messages ("kpssh" or "kubectl kpssh"), prints what it has to say, and returns the exit
 * status: 0, 1 (failure) or 2 (usage). Main thread; the CLI is single-threaded apart from the
 * informer threads a watch runs. */
#ifndef KP_CMD_KPSSH_VERBS_H
#define KP_CMD_KPSSH_VERBS_H

enum {
    KP_CLI_OK = 0,
    KP_CLI_FAILURE = 1,
    KP_CLI_USAGE = 2,
};

/* `get <resource>`: today `get pool` (get-pool.c). */
int kp_cli_get(int argc, char **argv, const char *prog);

/* `simulate [-f FILE]...`: the provisioner's plan for the pending pods (simulate.c). */
int kp_cli_simulate(int argc, char **argv, const char *prog);

#endif
