/* DESIGN: one way to find API credentials (contract in k8s/apiconfig.h).
 *
 * What: the start-up decision kpssh-controller made in its main until the CLI needed the same
 * one: kubeconfig (explicit, $KUBECONFIG, or home) versus the in-cluster service account, then
 * the credential the kubeconfig names.
 *
 * Why here: both programs must resolve credentials identically (a user who can run kubectl with
 * a kubeconfig can run kpssh and the controller with it), and cmd/ directories may not include
 * each other. It returns messages instead of logging: the controller logs them as JSON, the CLI
 * prints them as one human line.
 *
 * Invariants: every pointer in c->topts points into c's own members, so c outlives the clients. */
#include "k8s/apiconfig.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "base/secret.h"
#include "k8s/client.h"
#include "k8s/exec-credential.h"
#include "k8s/incluster.h"
#include "k8s/kubeconfig.h"
#include "yaml/yaml.h"

static int static_token_fn(void *userdata, bool refresh, struct kp_secret **ret_token)
{
    const struct kp_secret *s = userdata;

    (void)refresh; /* a fixed token cannot be refreshed; the 401 stands */
    return kp_secret_new(kp_secret_reveal(s), kp_secret_len(s), ret_token);
}

void kp_api_config_done(struct kp_api_config *c)
{
    c->exec = kp_exec_credential_free(c->exec);
    c->token_file = kp_token_file_free(c->token_file);
    c->ic = kp_incluster_config_free(c->ic);
    c->rest = kp_kubeconfig_rest_free(c->rest);
    c->kc = kp_kubeconfig_free(c->kc);
    memset(c, 0, sizeof(*c));
}

int kp_api_config_load(const char *kubeconfig, const char *context, const char *env_kubeconfig,
                       const char *home, struct kp_api_config *c, char **ret_msg)
{
    struct kp_yaml_error yerr = {0};
    bool has_path = kubeconfig && *kubeconfig;
    bool has_context = context && *context;
    bool explicit = has_path || (env_kubeconfig && *env_kubeconfig) || has_context;
    int r;

    memset(c, 0, sizeof(*c));
    if (!explicit) {
        r = kp_incluster_load_env(/* root= */ NULL, &c->ic, &yerr);
        if (r == 0) {
            c->source = "in-cluster";
            c->topts.server = c->ic->server;
            c->topts.ca_pem = c->ic->ca_pem;
            c->topts.ca_pem_len = c->ic->ca_pem_len;
            r = kp_token_file_new(c->ic->token_file, &c->token_file);
            if (r < 0) {
                kp_msg_set(ret_msg, "cannot read the service account token %s: %s",
                           c->ic->token_file, kp_strerror(r));
                return r;
            }
            c->topts.token = kp_token_file_token_fn;
            c->topts.token_userdata = c->token_file;
            return 0;
        }
        if (r != -ENOENT) {
            kp_msg_set(ret_msg, "in-cluster configuration is broken: %s", yerr.text);
            return r;
        }
        /* Not in a cluster: fall through to ~/.kube/config, as kubectl would. */
    }
    c->source = "kubeconfig";
    r = kp_kubeconfig_load(has_path ? kubeconfig : NULL, env_kubeconfig, home, &c->kc, &yerr);
    if (r < 0) {
        kp_msg_set(ret_msg, "cannot load a kubeconfig (and not running in a cluster): %s",
                   yerr.text);
        return r;
    }
    r = kp_kubeconfig_resolve(c->kc, has_context ? context : NULL, 0, &c->rest, &yerr);
    if (r < 0) {
        kp_msg_set(ret_msg, "cannot use the kubeconfig: %s", yerr.text);
        return r;
    }
    kp_transport_opts_from_kubeconfig(c->rest, &c->topts);
    if (c->rest->token_file) {
        if ((r = kp_token_file_new(c->rest->token_file, &c->token_file)) < 0) {
            kp_msg_set(ret_msg, "cannot read the kubeconfig's token file %s: %s",
                       c->rest->token_file, kp_strerror(r));
            return r;
        }
        c->topts.token = kp_token_file_token_fn;
        c->topts.token_userdata = c->token_file;
    } else if (c->rest->exec) {
        struct kp_exec_credential_opts eo = {.interactive = false};

        if ((r = kp_exec_credential_new(c->rest, &eo, &c->exec)) < 0) {
            kp_msg_set(ret_msg, "cannot set up the exec credential plugin: %s", kp_strerror(r));
            return r;
        }
        c->topts.token = kp_exec_credential_token_fn;
        c->topts.token_userdata = c->exec;
    } else if (c->rest->token) {
        c->topts.token = static_token_fn;
        c->topts.token_userdata = c->rest->token;
    }
    return 0;
}
