/* DESIGN: kp-envdump, a test tool that prints the raw-mode phase preamble for given inputs.
 *
 * The profile integration test (tests/integration/test-profiles.sh) runs shipped scripts over
 * plain ssh the way the phase runner does: `set -euo pipefail`, then sorted, single-quoted
 * `export KPSSH_...='...'` lines, then the script bytes, all on stdin. This tool produces the
 * first two parts with kp_env_build() itself, so the test exercises the real environment
 * contract rather than a copy of it in shell. Secrets (token, join-Secret values) are read from
 * files, never from argv. On a refused input it prints the contract's message to stderr and
 * exits 2; usage errors exit 64.
 *
 *   kp-envdump --phase install|join|leave|uninstall --host-address A [--node-address A]
 *              [--endpoint URL] [--ca-file PEM] [--node-name N] [--token-file F]
 *              [--pool-ns NS --host-name H | --adopt] [--label k=v]... [--taint k[=v]:Effect]...
 *              [--var k=v]... [--secret-file key=PATH]... [--redact]
 *
 * --redact prints the redaction list (one value per line) instead of the preamble, for the
 * test's leak checks. Single-threaded; test tooling, never shipped. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/secret.h"
#include "provider/ssh/env.h"

#define ENVDUMP_MAX_FILE (1024u * 1024u)
#define ENVDUMP_MAX_ITEMS 128

static int read_file(const char *path, struct kp_buf *b)
{
    char chunk[4096];
    size_t n;
    FILE *f = fopen(path, "re");
    int r = 0;

    if (!f)
        return -errno;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if ((r = kp_buf_append(b, chunk, n)) < 0)
            break;
    }
    fclose(f);
    return r;
}

/* Prints s single-quoted for bash: ' becomes '\''. */
static void put_quoted(const char *s, size_t n)
{
    size_t i;

    putchar('\'');
    for (i = 0; i < n; i++) {
        if (s[i] == '\'')
            fputs("'\\''", stdout);
        else
            putchar(s[i]);
    }
    putchar('\'');
}

static int usage(void)
{
    fputs("usage: kp-envdump --phase P --host-address A [options] (see tests/lib/kp-envdump.c)\n",
          stderr);
    return 64;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"phase", required_argument, NULL, 'p'},
        {"host-address", required_argument, NULL, 'a'},
        {"node-address", required_argument, NULL, 'A'},
        {"endpoint", required_argument, NULL, 'e'},
        {"ca-file", required_argument, NULL, 'c'},
        {"node-name", required_argument, NULL, 'n'},
        {"token-file", required_argument, NULL, 't'},
        {"pool-ns", required_argument, NULL, 'N'},
        {"host-name", required_argument, NULL, 'H'},
        {"adopt", no_argument, NULL, 'D'},
        {"label", required_argument, NULL, 'l'},
        {"taint", required_argument, NULL, 'T'},
        {"var", required_argument, NULL, 'v'},
        {"secret-file", required_argument, NULL, 's'},
        {"redact", no_argument, NULL, 'R'},
        {NULL, 0, NULL, 0},
    };
    struct kp_env_pair labels[ENVDUMP_MAX_ITEMS], vars[ENVDUMP_MAX_ITEMS];
    struct kp_env_taint taints[ENVDUMP_MAX_ITEMS];
    struct kp_env_secret_pair secrets[ENVDUMP_MAX_ITEMS];
    struct kp_secret *owned[ENVDUMP_MAX_ITEMS + 1] = {NULL};
    struct kp_buf ca = KP_BUF_INIT(ENVDUMP_MAX_FILE);
    struct kp_env_input in = {.phase = KP_ENV_JOIN};
    struct kp_env *env = NULL;
    size_t nowned = 0, i;
    char *err = NULL, *eq, *colon;
    int c, rc = 1, r, redact = 0;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (strcmp(optarg, "install") == 0)
                in.phase = KP_ENV_INSTALL;
            else if (strcmp(optarg, "join") == 0)
                in.phase = KP_ENV_JOIN;
            else if (strcmp(optarg, "leave") == 0)
                in.phase = KP_ENV_LEAVE;
            else if (strcmp(optarg, "uninstall") == 0)
                in.phase = KP_ENV_UNINSTALL;
            else
                return usage();
            break;
        case 'a':
            in.host_address = optarg;
            break;
        case 'A':
            in.node_address = optarg;
            break;
        case 'e':
            in.cluster_endpoint = optarg;
            break;
        case 'c':
            if ((r = read_file(optarg, &ca)) < 0) {
                fprintf(stderr, "kp-envdump: %s: %s\n", optarg, strerror(-r));
                goto out;
            }
            break;
        case 'n':
            in.node_name = optarg;
            break;
        case 'N':
            in.pool_namespace = optarg;
            break;
        case 'H':
            in.host_name = optarg;
            break;
        case 'D':
            in.provider_id_source = KP_ENV_PROVIDER_ID_ADOPT;
            break;
        case 'R':
            redact = 1;
            break;
        case 'l':
        case 'v':
            eq = strchr(optarg, '=');
            if (!eq || in.nlabels >= ENVDUMP_MAX_ITEMS || in.nvars >= ENVDUMP_MAX_ITEMS)
                return usage();
            *eq = '\0';
            if (c == 'l')
                labels[in.nlabels++] = (struct kp_env_pair){optarg, eq + 1};
            else
                vars[in.nvars++] = (struct kp_env_pair){optarg, eq + 1};
            break;
        case 'T':
            colon = strrchr(optarg, ':');
            if (!colon || in.ntaints >= ENVDUMP_MAX_ITEMS)
                return usage();
            *colon = '\0';
            eq = strchr(optarg, '=');
            if (eq)
                *eq = '\0';
            taints[in.ntaints++] = (struct kp_env_taint){optarg, eq ? eq + 1 : NULL, colon + 1};
            break;
        case 't':
        case 's': {
            struct kp_buf b = KP_BUF_INIT(ENVDUMP_MAX_FILE);
            const char *path = optarg;

            if (c == 's') {
                eq = strchr(optarg, '=');
                if (!eq || in.nsecrets >= ENVDUMP_MAX_ITEMS)
                    return usage();
                *eq = '\0';
                path = eq + 1;
            }
            if ((r = read_file(path, &b)) < 0 ||
                (r = kp_secret_new(kp_buf_str(&b), b.len, &owned[nowned])) < 0) {
                fprintf(stderr, "kp-envdump: %s: %s\n", path, strerror(-r));
                kp_buf_wipe(&b);
                goto out;
            }
            kp_buf_wipe(&b);
            if (c == 't')
                in.bootstrap_token = owned[nowned];
            else
                secrets[in.nsecrets++] = (struct kp_env_secret_pair){optarg, owned[nowned]};
            nowned++;
            break;
        }
        default:
            return usage();
        }
    }
    if (optind != argc)
        return usage();
    in.cluster_ca = ca.len ? kp_buf_str(&ca) : NULL;
    in.cluster_ca_len = ca.len;
    in.labels = labels;
    in.vars = vars;
    in.taints = taints;
    in.secrets = secrets;

    r = kp_env_build(&in, &env, &err);
    if (r < 0) {
        fprintf(stderr, "kp-envdump: %s\n", err ? err : strerror(-r));
        rc = r == -EINVAL ? 2 : 1;
        goto out;
    }
    if (redact) {
        for (i = 0; i < kp_env_redact_size(env); i++)
            printf("%s\n", kp_secret_reveal(kp_env_redact_at(env, i)));
    } else {
        puts("set -euo pipefail");
        for (i = 0; i < kp_env_size(env); i++) {
            const struct kp_secret *s = kp_env_secret(env, i);

            printf("export %s=", kp_env_name(env, i));
            if (s)
                put_quoted(kp_secret_reveal(s), kp_secret_len(s));
            else
                put_quoted(kp_env_value(env, i), strlen(kp_env_value(env, i)));
            putchar('\n');
        }
    }
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    kp_env_free(env);
    kp_free(err);
    kp_buf_done(&ca);
    for (i = 0; i < nowned; i++)
        kp_secret_free(owned[i]);
    return rc;
}
