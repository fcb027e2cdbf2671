/* cmd/controller/options.h: the controller's options, as one table (STYLE.md rule 12).
 *
 * Each option has a name, a type, a default, bounds, flags and a help line. The table drives
 * everything users see: the flag --<name>, the environment variable KPSSH_<NAME> (upper case,
 * '-' as '_'), --help,
 * and the effective configuration logged at start-up, in which SENSITIVE values read
 * "[REDACTED]". A flag wins over the environment, which wins over the default.
 *
 * Parsing is pure apart from the secret registration of kp_secret_new(): argv and the
 * environment are passed in, errors come back as text, nothing is printed or logged here.
 * Main thread, start-up only. */
#ifndef KP_CMD_CONTROLLER_OPTIONS_H
#define KP_CMD_CONTROLLER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_buf;
struct kp_secret;

/* Everything the controller is configured with. Filled by kp_options_parse(); owned strings
 * are released by kp_options_done(). Durations are microseconds. */
struct kp_controller_options {
    /* Kubernetes client */
    char *kubeconfig;        /* "": $KUBECONFIG, in-cluster, then ~/.kube/config */
    char *context;           /* "": the kubeconfig's current-context */
    struct kp_secret *token; /* bearer token overriding the configured credential, or NULL */
    double kube_client_qps;
    uint64_t kube_client_burst;
    /* leader election */
    bool disable_leader_election;
    char *leader_election_name;
    char *leader_election_namespace; /* "": pool_namespace */
    char *pod_name;                  /* "": the host name */
    char *leader_election_identity;  /* "": pod_name or the host name, plus a random suffix */
    uint64_t leader_election_lease_duration;
    uint64_t leader_election_renew_deadline;
    uint64_t leader_election_retry_period;
    /* endpoints and logs */
    char *bind_address;
    uint64_t metrics_port;
    uint64_t health_probe_port;
    char *log_level;  /* debug, info, warn, error */
    char *log_format; /* json, text */
    /* what the controllers read */
    char *pool_namespace;
    uint64_t workers; /* node class and taint gate controllers */
    uint64_t probe_interval;
    uint64_t probe_timeout;
    uint64_t probe_concurrency; /* the host controller's workers */
    char *bootstrap_group;      /* auth-extra-groups of minted bootstrap tokens */
    uint64_t shutdown_timeout;
    /* Karpenter's core (core/core.h struct kp_core_timing) */
    uint64_t core_workers;       /* NodeClaim lifecycle and Node termination workers */
    uint64_t launch_concurrency; /* the SSH provider's launch pool threads */
    uint64_t launch_timeout;
    uint64_t registration_ttl;
    uint64_t gc_interval;
    uint64_t orphan_node_grace;
};

enum kp_option_type {
    KP_OPT_STRING = 0,
    KP_OPT_SECRET, /* a struct kp_secret *; always SENSITIVE */
    KP_OPT_BOOL,
    KP_OPT_UINT,
    KP_OPT_DOUBLE,
    KP_OPT_DURATION, /* Go duration text ("30s", "2m"), stored as uint64_t microseconds */
    KP_OPT_ENUM,     /* a string from choices */
};

enum kp_option_flags {
    KP_OPT_SENSITIVE = 1 << 0, /* never shown: "[REDACTED]" in the effective configuration */
};

/* One row of the table. */
struct kp_option {
    const char *name; /* flag name without "--" */
    enum kp_option_type type;
    const char *def;            /* default as text, parsed like a user's value */
    uint64_t min, max;          /* KP_OPT_UINT; KP_OPT_DURATION in microseconds */
    double dmin, dmax;          /* KP_OPT_DOUBLE */
    const char *const *choices; /* KP_OPT_ENUM, NULL-terminated */
    unsigned flags;             /* enum kp_option_flags */
    size_t offset;              /* of the field in struct kp_controller_options */
    const char *help;
};

/* The table, in --help order. */
const struct kp_option *kp_options_table(size_t *ret_n) KP_NONNULL(1);

/* The environment variable of an option: KPSSH_ plus the name in upper case with '_' for '-'.
 * 0, -ENOMEM or -KP_ELIMIT. */
int kp_option_env_name(const struct kp_option *opt, struct kp_buf *out) KP_WUR KP_NONNULL(1, 2);

enum kp_options_action {
    KP_OPTIONS_RUN = 0,
    KP_OPTIONS_HELP,    /* --help or -h: print kp_options_help() and exit 0 */
    KP_OPTIONS_VERSION, /* --version: print the version and exit 0 */
};

/* Zeroes o (nothing to release yet). */
void kp_options_init(struct kp_controller_options *o) KP_NONNULL(1);
/* Releases every owned value (secrets wiped); o is zeroed afterwards. */
void kp_options_done(struct kp_controller_options *o);

/* Fills o from defaults, then envp ("NAME=value" strings, NULL-terminated; NULL: none), then
 * argv[1..argc-1]: --name=value, --name value, and for booleans --name alone (true) or
 * --name=true|false. Checks every value against the option's type and bounds, and the options
 * against each other (renew deadline shorter than the lease, retry period shorter than the renew
 * deadline, probe timeout shorter than the probe interval) and the bootstrap group against the
 * API server's rule (kp_token_group_valid). 0 and *ret_action, or -EINVAL
 * (usage error: unknown option, bad value, missing value, positional argument) or -ENOMEM, with
 * one line saying which option and why appended to err (a SENSITIVE value is never repeated).
 * o must be freshly initialised; on failure it holds partial values for kp_options_done(). */
int kp_options_parse(struct kp_controller_options *o, int argc, const char *const *argv,
                     const char *const *envp, enum kp_options_action *ret_action,
                     struct kp_buf *err) KP_WUR KP_NONNULL(1, 5, 6);

/* Appends the --help text: usage, then every option with its type, default, bounds, choices,
 * environment variable and help. 0, -ENOMEM or -KP_ELIMIT. */
int kp_options_help(const char *prog, struct kp_buf *out) KP_WUR KP_NONNULL(1, 2);

/* Appends opt's current value in o as text, the way a user would write it: durations as Go
 * durations, booleans as true/false; a SENSITIVE value as "[REDACTED]" when set, "" when not.
 * 0, -ENOMEM or -KP_ELIMIT. */
int kp_option_format(const struct kp_controller_options *o, const struct kp_option *opt,
                     struct kp_buf *out) KP_WUR KP_NONNULL(1, 2, 3);

/* Logs the effective configuration as one info line, msg "effective configuration", one field
 * per option (the name in snake_case), sensitive values redacted. 0 or -ENOMEM. */
int kp_options_log(const struct kp_controller_options *o) KP_WUR KP_NONNULL(1);

#endif
