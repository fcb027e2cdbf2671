/* k8s/apiconfig.h: where a program's API credentials come from, decided one way for every
 * program (kpssh-controller and the kpssh CLI alike).
 *
 * Order: an explicit kubeconfig (the path given, else $KUBECONFIG) or an explicit context means
 * a kubeconfig; otherwise the in-cluster service account when the process runs in a pod (its
 * token file re-read as the kubelet rotates it), else ~/.kube/config as kubectl would. From a
 * kubeconfig the credential is a token file, an exec credential plugin (non-interactive) or a
 * static token, as the kubeconfig says (k8s/kubeconfig.h, k8s/exec-credential.h).
 *
 * Nothing here logs (STYLE.md rule 8): a failure comes back as an error and a message for the
 * caller, which decides how to tell the user. Main thread, start-up only. */
#ifndef KP_K8S_APICONFIG_H
#define KP_K8S_APICONFIG_H

#include "base/macro.h"
#include "k8s/transport.h"

struct kp_exec_credential;
struct kp_incluster_config;
struct kp_kubeconfig;
struct kp_kubeconfig_rest;
struct kp_token_file;

/* The resolved configuration and everything its transport options point into: it must outlive
 * every client made from topts. Zero it (or let kp_api_config_load do so) before use. */
struct kp_api_config {
    const char *source; /* "kubeconfig" or "in-cluster" (static text) */
    struct kp_kubeconfig *kc;
    struct kp_kubeconfig_rest *rest;
    struct kp_incluster_config *ic;
    struct kp_token_file *token_file;
    struct kp_exec_credential *exec;
    struct kp_transport_opts topts; /* for kp_client_new(); the caller may set qps and burst */
};

/* Fills c (zeroed first). kubeconfig and context: "" or NULL when not given; env_kubeconfig and
 * home: the values of $KUBECONFIG and $HOME (NULL when unset). 0, or a negative error with
 * *ret_msg (optional) set to one line saying what failed and why; c then holds partial state
 * for kp_api_config_done(). */
int kp_api_config_load(const char *kubeconfig, const char *context, const char *env_kubeconfig,
                       const char *home, struct kp_api_config *c, char **ret_msg)
    KP_NONNULL(5) KP_WUR;
/* Releases what c holds; c is zeroed. NULL-tolerant members. */
void kp_api_config_done(struct kp_api_config *c) KP_NONNULL(1);

#endif
