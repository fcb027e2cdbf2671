/* provider/ssh/hostio.c: reaching a host (hostio.h).
 *
 * DESIGN: these are the pieces of a phase that both the provider (install, join, leave of
 * Create and Delete) and the host controller (the zombie guard's leave, the probe's dial) need.
 * They were the provider's own static functions; they moved here unchanged in behaviour so the
 * two callers cannot drift apart: the same Secret reading rules (what is the user's
 * configuration error and what is transient), the same environment, the same timeouts, and one
 * place that times a phase and reports it to the observer (kpssh_instance_phase_duration_seconds).
 *
 * Secrets: the key, the pre-pin, the CA and the join Secret's values are held in struct
 * kp_secret from decoding on; decoded scratch bytes are wiped before they are freed.
 * Threads: the caller's, with its own client. No logging. */
#include "provider/ssh/hostio.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "core/provider.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/events.h"
#include "k8s/kubeconfig.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "provider/ssh/observe.h"
#include "provider/ssh/provider.h"
#include "provider/ssh/runner.h"
#include "provider/ssh/sshsig.h"
#include "yaml/yaml.h"

/* Base64 (standard alphabet, padded) to bytes, as a secret. 0, -KP_EPARSE, -KP_ELIMIT, -ENOMEM. */
int kp_hostio_b64_secret(const char *s, struct kp_secret **ret)
{
    size_t n = strlen(s), pad = 0;
    unsigned char *out;
    int len, r;

    if (n > KP_MAX_SECRET_VALUE * 4 / 3 + 4)
        return -KP_ELIMIT;
    if (n % 4 != 0)
        return -KP_EPARSE;
    out = kp_malloc(n / 4 * 3 + 1);
    if (!out)
        return -ENOMEM;
    len = n ? EVP_DecodeBlock(out, (const unsigned char *)s, (int)n) : 0;
    if (len < 0) {
        kp_free(out);
        return -KP_EPARSE;
    }
    if (n >= 1 && s[n - 1] == '=')
        pad++;
    if (n >= 2 && s[n - 2] == '=')
        pad++;
    r = kp_secret_new(out, (size_t)len - pad, ret);
    kp_wipe(out, n / 4 * 3 + 1);
    kp_free(out);
    return r;
}

/* GETs Secret ns/name; *ret_obj holds it. */
static int get_secret(struct kp_client *c, const char *ns, const char *name, json_t **ret_obj,
                      struct kp_error *err)
{
    return kp_client_get(c, &KP_RES_SECRET, ns, name, ret_obj, err);
}

/* The data key of a Secret object, decoded; -ENOENT when absent. */
static int secret_value(const json_t *obj, const char *key, struct kp_secret **ret)
{
    const char *b64 = NULL;
    int r = kp_json_pathv_str(obj, KP_JSON_PATH("data", key), &b64);

    if (r < 0)
        return r;
    return kp_hostio_b64_secret(b64, ret);
}

/* Whether data.<key> is there at all, even as null (the API server may write a key whose value
 * is empty either way). */
static bool secret_has(const json_t *obj, const char *key)
{
    json_t *v = NULL;

    return kp_json_pathv(obj, KP_JSON_PATH("data", key), &v) == 0;
}

/* Nothing but spaces, tabs and line ends (what an unset template variable leaves). */
static bool blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r' && p[i] != '\v' &&
            p[i] != '\f')
            return false;
    return true;
}

/* "<what> <ns>/<name><tail>" as a new string (NULL: no memory). */
/* The message for a failed GET of Secret ns/name, which the field ref names: -EINVAL with
 * *ret_msg for what the user can fix (the Secret does not exist, or the controller may not read
 * it), r itself for anything else (a transient API error: no verdict, no message). */
static int secret_get_error(int r, const char *what, const char *ns, const char *name,
                            const char *ref, char **ret_msg)
{
    const char *tail;

    if (r == -ENOENT)
        tail = " not found: create it, or name another Secret in ";
    else if (r == -KP_EFORBIDDEN)
        tail = " cannot be read (forbidden): let the controller get Secrets here, or fix ";
    else
        return r;
    kp_msg_set(ret_msg, "%s %s/%s%s%s", what, ns, name, tail, ref);
    return -EINVAL;
}

/* --- the pieces a phase needs ----------------------------------------------------------------- */

void kp_hostio_creds_done(struct kp_hostio_creds *cr)
{
    cr->key = kp_secret_free(cr->key);
    cr->known_host = kp_secret_free(cr->known_host);
}

int kp_hostio_creds_from_secret(const json_t *secret, const char *ns, const char *name,
                                struct kp_hostio_creds *cr, char **ret_msg)
{
    struct kp_hostio_creds got = {0};
    const char *tail = NULL;
    int r;

    r = secret_value(secret, "privateKey", &got.key);
    if (r == -ENOMEM)
        goto out;
    if (r < 0) {
        tail = ": data.privateKey is missing or not base64";
        goto out;
    }
    r = secret_value(secret, "knownHost", &got.known_host);
    if (r == -ENOENT && secret_has(secret, "knownHost"))
        r = 0; /* present as null: as empty as "", refused below */
    else if (r == -ENOENT) {
        r = 0; /* absent: trust on first use */
        goto done;
    }
    if (r == -ENOMEM)
        goto out;
    if (r < 0) {
        tail = ": data.knownHost is not base64";
        goto out;
    }
    /* A pre-pin that is there but says nothing (often a templated Secret whose variable was
     * empty) is a mistake, never a request for trust on first use: docs/api.md promises that
     * with knownHost set kpssh never pins on first use. The session reads the pre-pin as a C
     * string, so a NUL byte would cut it short, maybe to nothing: refused as well. */
    if (!got.known_host || blank(kp_secret_reveal(got.known_host), kp_secret_len(got.known_host))) {
        tail = ": data.knownHost is present but empty; remove it to trust on first use, or set "
               "the host's key";
        r = -EINVAL;
        goto out;
    }
    if (memchr(kp_secret_reveal(got.known_host), '\0', kp_secret_len(got.known_host))) {
        tail = ": data.knownHost holds a NUL byte; write the host's key as text";
        r = -EINVAL;
        goto out;
    }
done:
    *cr = got;
    got = (struct kp_hostio_creds){0}; /* the caller owns them now */
out:
    if (tail) {
        kp_msg_set(ret_msg, "SSH key Secret %s/%s%s", ns, name, tail);
        r = -EINVAL;
    }
    kp_hostio_creds_done(&got);
    return r;
}

/* -EINVAL with *ret_msg for configuration errors (the user can fix them), others transient. */
int kp_hostio_load_creds(struct kp_client *c, const struct kp_sshhost_view *h,
                         struct kp_hostio_creds *cr, char **ret_msg)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *obj = NULL;
    int r;

    if (!h->key_secret || !*h->key_secret) {
        kp_msg_set(ret_msg, "SSHHost %s has no spec.sshKeySecretRef", h->e.name);
        return -EINVAL;
    }
    r = get_secret(c, h->e.ns, h->key_secret, &obj, &e);
    if (r < 0)
        r = secret_get_error(r, "SSH key Secret", h->e.ns, h->key_secret, "spec.sshKeySecretRef",
                             ret_msg);
    else
        r = kp_hostio_creds_from_secret(obj, h->e.ns, h->key_secret, cr, ret_msg);
    /* A phase run with these credentials acts for this client's replica: its fence applies. */
    if (r == 0)
        cr->fence = kp_client_fence(c);
    kp_error_done(&e);
    kp_json_unref(obj);
    return r;
}

void kp_hostio_join_secret_done(struct kp_hostio_join_secret *js)
{
    for (size_t i = 0; i < js->n; i++)
        js->vals[i] = kp_secret_free(js->vals[i]);
    js->n = 0;
    js->obj = kp_json_unref(js->obj);
}

int kp_hostio_load_join_secret(struct kp_client *c, const char *ns,
                               const struct kp_sshnodeclass_view *ncl,
                               struct kp_hostio_join_secret *js, char **ret_msg)
{
    struct kp_error e = KP_ERROR_INIT;
    struct kp_json_iter it = KP_JSON_ITER_INIT;
    json_t *data = NULL, *v;
    const char *k;
    int r;

    if (!ncl->join_secret_set)
        return 0;
    r = get_secret(c, ns, ncl->join_secret ? ncl->join_secret : "", &js->obj, &e);
    kp_error_done(&e);
    if (r == -ENOENT || r == -KP_EFORBIDDEN)
        return secret_get_error(r, "join Secret", ns, ncl->join_secret ? ncl->join_secret : "",
                                "spec.joinSecretRef", ret_msg);
    if (r == -EINVAL) {
        kp_msg_set(ret_msg, "join Secret %s/%s (spec.joinSecretRef): %s", ns,
                   ncl->join_secret ? ncl->join_secret : "", kp_strerror(r));
        return -EINVAL;
    }
    if (r < 0)
        return r;
    if (kp_json_pathv(js->obj, KP_JSON_PATH("data"), &data) < 0)
        return 0;
    while (kp_json_object_next(data, &it, &k, &v)) {
        const char *b64;

        if (js->n == KP_MAX_JOIN_SECRETS) {
            kp_msg_set(ret_msg, "join Secret has more than %d keys", KP_MAX_JOIN_SECRETS);
            return -EINVAL;
        }
        if (kp_json_as_str(v, &b64) < 0 || kp_hostio_b64_secret(b64, &js->vals[js->n]) < 0) {
            kp_msg_set(ret_msg, "join Secret key %s is not base64", k);
            return -EINVAL;
        }
        js->pairs[js->n].key = k;
        js->pairs[js->n].value = js->vals[js->n];
        js->n++;
    }
    return 0;
}

char *kp_hostio_static_provider_id(const char *ns, const char *host)
{
    return kp_strjoin(KP_SSH_PROVIDER_ID_SCHEME, ns, "/", host, (const char *)NULL);
}

void kp_hostio_event(struct kp_events *ev, const struct kp_sshhost_view *h, bool warning,
                     const char *reason, const char *action, const char *note)
{
    struct kp_event_ref ref = {
        .kind = "SSHHost",
        .api_version = KP_KPSSH_GROUP "/" KP_KPSSH_VERSION,
        .ns = h->e.ns,
        .name = h->e.name,
        .uid = h->e.uid,
    };

    if (ev)
        (void)kp_events_emit(ev, &ref, warning ? KP_EVENT_WARNING : KP_EVENT_NORMAL, reason, action,
                             note);
}

/* kube-public/cluster-info: the kubeconfig kubeadm (and most installers) publish for bootstrap,
 * clusters only. The first cluster by name gives the server and CA. -EINVAL with a message when
 * it is missing or unusable (a configuration error: the node class should say spec.cluster). */
static int cluster_info(struct kp_client *c, char **ret_server, char **ret_ca, size_t *ret_ca_len,
                        char **ret_msg)
{
    struct kp_error e = KP_ERROR_INIT;
    struct kp_yaml_error ye = {0};
    struct kp_kubeconfig *kc = NULL;
    struct kp_kubeconfig_rest *rest = NULL;
    const char *doc = NULL;
    json_t *cm = NULL;
    int r;

    r = kp_client_get(c, &KP_RES_CONFIGMAP, KP_HOSTIO_CLUSTER_INFO_NS, KP_HOSTIO_CLUSTER_INFO, &cm,
                      &e);
    if (r == -ENOENT || r == -KP_EFORBIDDEN) {
        kp_msg_set(ret_msg,
                   "SSHNodeClass spec.cluster is not set and the ConfigMap "
                   "kube-public/cluster-info cannot be read (%s): set spec.cluster",
                   r == -ENOENT ? "not found" : "forbidden");
        r = -EINVAL;
        goto out;
    }
    if (r < 0)
        goto out; /* transient: the caller retries */
    if (kp_json_pathv_str(cm, KP_JSON_PATH("data", "kubeconfig"), &doc) < 0 || !doc) {
        kp_msg_set(ret_msg, "%s",
                   "kube-public/cluster-info has no data.kubeconfig: set "
                   "SSHNodeClass spec.cluster");
        r = -EINVAL;
        goto out;
    }
    if ((r = kp_kubeconfig_new(&kc)) < 0)
        goto out;
    r = kp_kubeconfig_add(kc, doc, strlen(doc), "cluster-info", &ye);
    if (r >= 0)
        r = kp_kubeconfig_resolve_cluster(kc, NULL, KP_KUBECONFIG_NO_FILES, &rest, &ye);
    if (r == -ENOMEM)
        goto out;
    if (r < 0 || !rest->ca_pem || !kp_startswith(rest->server, "https://")) {
        kp_msg_set(ret_msg,
                   "kube-public/cluster-info is not usable (%s): set SSHNodeClass spec.cluster",
                   r < 0           ? ye.text
                   : !rest->ca_pem ? "no certificate-authority-data"
                                   : "server is not https://");
        r = -EINVAL;
        goto out;
    }
    *ret_server = rest->server;
    rest->server = NULL;
    *ret_ca = rest->ca_pem;
    *ret_ca_len = rest->ca_pem_len;
    rest->ca_pem = NULL;
out:
    kp_kubeconfig_rest_free(rest);
    kp_kubeconfig_free(kc);
    kp_json_unref(cm);
    kp_error_done(&e);
    return r;
}

int kp_hostio_load_cluster(struct kp_client *c, const struct kp_sshnodeclass_view *ncl,
                           struct kp_secret **ret_ca, char **ret_endpoint, char **ret_msg)
{
    bool have_ep = ncl->cluster_endpoint && *ncl->cluster_endpoint;
    bool have_ca = ncl->cluster_ca_bundle && *ncl->cluster_ca_bundle;
    char *server = NULL, *ca = NULL;
    size_t ca_len = 0;
    int r;

    if (have_ca && kp_hostio_b64_secret(ncl->cluster_ca_bundle, ret_ca) < 0) {
        kp_msg_set(ret_msg, "%s", "SSHNodeClass spec.cluster.caBundle is not base64");
        return -EINVAL;
    }
    if (have_ep && have_ca)
        return (*ret_endpoint = kp_strdup(ncl->cluster_endpoint)) ? 0 : -ENOMEM;
    /* What the node class leaves out comes from cluster-info. */
    if ((r = cluster_info(c, &server, &ca, &ca_len, ret_msg)) < 0)
        goto out;
    if (!have_ca && (r = kp_secret_new(ca, ca_len, ret_ca)) < 0)
        goto out;
    *ret_endpoint = have_ep ? kp_strdup(ncl->cluster_endpoint) : server;
    if (have_ep)
        kp_free(server);
    server = NULL;
    r = *ret_endpoint ? 0 : -ENOMEM;
out:
    if (r < 0 && !have_ca)
        *ret_ca = kp_secret_free(*ret_ca);
    kp_free(server);
    kp_free(ca);
    return r;
}

int kp_hostio_build_env(const struct kp_sshhost_view *h, enum kp_env_phase phase,
                        const struct kp_hostio_join_ctx *jc, struct kp_env **ret, char **ret_msg)
{
    struct kp_env_input in = {
        .phase = phase,
        .host_address = h->address,
        .node_address = h->node_address,
        .host_name = h->e.name,
        .pool_namespace = h->e.ns,
    };
    struct kp_env_pair *labels = NULL, *vars = NULL;
    struct kp_env_taint *taints = NULL;
    size_t nl = 0, nt = 0;
    int r = -ENOMEM;

    if (jc) {
        const struct kp_nodeclaim_view *nc = jc->nc;
        size_t cap_l = nc->meta.labels.n + (jc->it ? jc->it->n_labels : 0);
        size_t cap_t = nc->spec.taints.n + nc->spec.startup_taints.n;

        in.cluster_endpoint = jc->endpoint;
        in.cluster_ca = kp_secret_reveal(jc->ca);
        in.cluster_ca_len = kp_secret_len(jc->ca);
        in.bootstrap_token = phase == KP_ENV_JOIN ? jc->token : NULL;
        in.node_name = nc->e.name;
        in.provider_id_source = jc->ncl->provider_id_source == KP_PROVIDER_ID_ADOPT
                                    ? KP_ENV_PROVIDER_ID_ADOPT
                                    : KP_ENV_PROVIDER_ID_STATIC;
        labels = kp_calloc(cap_l ? cap_l : 1, sizeof(*labels));
        taints = kp_calloc(cap_t ? cap_t : 1, sizeof(*taints));
        vars = kp_calloc(jc->ncl->vars.n ? jc->ncl->vars.n : 1, sizeof(*vars));
        if (!labels || !taints || !vars)
            goto out;
        for (size_t i = 0; i < nc->meta.labels.n; i++) {
            labels[nl].key = nc->meta.labels.v[i].key;
            labels[nl++].value = nc->meta.labels.v[i].value;
        }
        for (size_t i = 0; jc->it && i < jc->it->n_labels; i++) {
            if (kp_labels_get(&nc->meta.labels, jc->it->labels[i].key))
                continue;
            labels[nl].key = jc->it->labels[i].key;
            labels[nl++].value = jc->it->labels[i].value;
        }
        for (size_t i = 0; i < nc->spec.taints.n; i++) {
            taints[nt].key = nc->spec.taints.v[i].key;
            taints[nt].value = nc->spec.taints.v[i].value;
            taints[nt++].effect = kp_taint_effect_name(nc->spec.taints.v[i].effect);
        }
        for (size_t i = 0; i < nc->spec.startup_taints.n; i++) {
            taints[nt].key = nc->spec.startup_taints.v[i].key;
            taints[nt].value = nc->spec.startup_taints.v[i].value;
            taints[nt++].effect = kp_taint_effect_name(nc->spec.startup_taints.v[i].effect);
        }
        for (size_t i = 0; i < jc->ncl->vars.n; i++) {
            vars[i].key = jc->ncl->vars.v[i].key;
            vars[i].value = jc->ncl->vars.v[i].value;
        }
        in.labels = labels;
        in.nlabels = nl;
        in.taints = taints;
        in.ntaints = nt;
        in.vars = vars;
        in.nvars = jc->ncl->vars.n;
        in.secrets = jc->js->pairs;
        in.nsecrets = jc->js->n;
    }
    r = kp_env_build(&in, ret, ret_msg);
out:
    kp_free(labels);
    kp_free(taints);
    kp_free(vars);
    return r;
}

void kp_hostio_target(const struct kp_sshhost_view *h, const struct kp_hostio_creds *cr,
                      struct kp_ssh_target *ret)
{
    *ret = (struct kp_ssh_target){
        .host = h->address,
        .port = (uint16_t)(h->port > 0 && h->port <= 65535 ? h->port : 22),
        .user = h->user,
        .private_key = cr->key,
        .known_host = cr->known_host ? kp_secret_reveal(cr->known_host) : NULL,
        .tofu_fingerprint = h->host_key_fingerprint,
        .fence = cr->fence,
        .ctx = cr->ctx,
    };
}

/* SSHSIG namespace and shim principal of verified execution (SPEC: namespace and principal
 * `kpssh`). */
#define KP_VERIFIED_NAMESPACE "kpssh"

int kp_hostio_verified_check(const struct kp_sshhost_view *h,
                             const struct kp_sshjoinprofile_view *pr, enum kp_profile_phase phase,
                             char **ret_msg)
{
    static const char tmpl[] = "{{";
    struct kp_profile_spec spec;
    const struct kp_profile_text *script, *sig;
    const char *name = kp_profile_phase_name(phase);
    char *why = NULL;
    int r;

    if (h->exec_mode != KP_EXEC_VERIFIED)
        return 0;
    kp_profile_spec_from_view(pr, &spec);
    script = &spec.scripts[phase];
    sig = &spec.signatures[phase];
    if (!name || !script->data || script->len == 0) {
        kp_msg_set(ret_msg, "profile %s has no %s script", spec.name, name ? name : "unknown");
        return -EINVAL;
    }
    if (memmem(script->data, script->len, tmpl, sizeof(tmpl) - 1)) {
        kp_msg_set(ret_msg,
                   "verified exec requires template-free scripts; profile %s %s script "
                   "contains \"{{\" (take values from KPSSH_* variables instead)",
                   spec.name, name);
        return -EINVAL;
    }
    if (!sig->data || sig->len == 0) {
        kp_msg_set(ret_msg, "verified host %s: profile %s has no signature for phase %s", h->e.name,
                   spec.name, name);
        return -EINVAL;
    }
    r = kp_sshsig_verify(sig->data, sig->len, script->data, script->len, KP_VERIFIED_NAMESPACE,
                         h->trusted_signers, h->n_trusted_signers, &why);
    if (r == -ENOMEM) {
        kp_free(why);
        return r;
    }
    if (r < 0) {
        kp_msg_set(ret_msg, "controller-side signature check for profile %s %s: %s", spec.name,
                   name, why ? why : kp_strerror(r));
        kp_free(why);
        return -EINVAL;
    }
    return 0;
}

int kp_hostio_run_phase(const struct kp_ctx *ctx, const struct kp_sshhost_view *h,
                        const struct kp_hostio_creds *cr, const struct kp_sshjoinprofile_view *pr,
                        enum kp_profile_phase phase, const struct kp_env *env,
                        const struct kp_ssh_observer *obs, char **ret_msg, char *ret_fp)
{
    struct kp_profile_spec spec;
    struct kp_ssh_capture cap;
    struct kp_ssh_target t;
    const char *obs_phase = phase == KP_PROFILE_INSTALL ? KP_SSH_PHASE_INSTALL
                            : phase == KP_PROFILE_JOIN  ? KP_SSH_PHASE_JOIN
                            : phase == KP_PROFILE_LEAVE ? KP_SSH_PHASE_LEAVE
                                                        : NULL;
    uint64_t t0;
    struct kp_ssh_var *vars = NULL;
    struct kp_ssh_phase ph = {0};
    struct kp_buf sig = KP_BUF_INIT(2 * KP_MAX_SSHSIG_ARMOUR);
    size_t n = kp_env_size(env);
    uint32_t secs = 0;
    int r;

    kp_profile_spec_from_view(pr, &spec);
    if ((r = kp_profile_timeout(&spec, phase, &secs)) < 0) {
        kp_msg_set(ret_msg, "%s", "profile timeout does not parse");
        return r;
    }
    vars = kp_calloc(n ? n : 1, sizeof(*vars));
    if (!vars)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        vars[i].name = kp_env_name(env, i);
        vars[i].value = kp_env_value(env, i);
        vars[i].secret = kp_env_secret(env, i);
    }
    /* Checked again at the last moment: whatever the caller checked, nothing unsigned is ever
     * sent to a Verified host. */
    if ((r = kp_hostio_verified_check(h, pr, phase, ret_msg)) < 0) {
        kp_free(vars);
        return r;
    }
    if (h->exec_mode == KP_EXEC_VERIFIED) {
        struct kp_sshsig parsed;

        /* The host gets the signature in ssh-keygen's own armour, whatever whitespace the
         * manifest left around it (the check above parsed the same bytes). */
        if ((r = kp_sshsig_parse(spec.signatures[phase].data, spec.signatures[phase].len, &parsed,
                                 NULL)) < 0) {
            kp_msg_set(ret_msg, "%s phase: signature does not parse", kp_profile_phase_name(phase));
            kp_free(vars);
            return r == -ENOMEM ? r : -EINVAL;
        }
        r = kp_sshsig_armor(&parsed, &sig);
        kp_sshsig_done(&parsed);
        if (r < 0) {
            kp_free(vars);
            kp_buf_done(&sig);
            return r == -ENOMEM ? r : -EINVAL;
        }
        ph.shim = h->shim_command ? h->shim_command : KP_SSHHOST_SHIM_DEFAULT;
        ph.signature = sig.data;
        ph.signature_len = sig.len;
    }
    ph.name = kp_profile_phase_name(phase);
    ph.script = spec.scripts[phase].data;
    ph.script_len = spec.scripts[phase].len;
    ph.vars = vars;
    ph.nvars = n;
    ph.secrets = kp_env_redact_array(env);
    ph.nsecrets = kp_env_redact_size(env);
    /* The profile's timeout, or the caller's deadline when that comes first. */
    ph.deadline = kp_deadline_min(kp_deadline_in((uint64_t)secs * KP_USEC_PER_SEC),
                                  kp_ctx_deadline(ctx ? ctx : cr->ctx));
    kp_hostio_target(h, cr, &t); /* t.ctx = cr->ctx, which ctx replaces when given */
    if (ctx)
        t.ctx = ctx;
    kp_ssh_capture_init(&cap);
    t0 = kp_mono_usec();
    r = kp_ssh_run_phase(&t, &ph, &cap, ret_msg);
    if (obs_phase)
        kp_ssh_observe_phase(obs, obs_phase, r == 0, kp_mono_usec() - t0);
    if (ret_fp && cap.pin == KP_SSH_PIN_NONE && cap.fp[0] && !h->host_key_fingerprint)
        memcpy(ret_fp, cap.fp, KP_SSH_FP_SIZE);
    kp_ssh_capture_done(&cap);
    kp_buf_done(&sig);
    kp_free(vars);
    return r;
}

int kp_hostio_leave_prepare(struct kp_store *profiles, struct kp_client *c,
                            const struct kp_sshhost_view *h, struct kp_hostio_leave *lv,
                            char **ret_msg)
{
    const char *marker = h->installed_profile, *at;
    struct kp_hostio_leave got = {0};
    char *name = NULL;
    int r;

    at = marker ? strrchr(marker, '@') : NULL;
    name = at ? kp_strndup(marker, (size_t)(at - marker)) : NULL;
    if (!name) {
        kp_msg_set(ret_msg, "%s", "no install marker: nothing to leave with");
        return -ENOENT;
    }
    if ((r = kp_store_get(profiles, name, &got.profile)) < 0) {
        kp_msg_set(ret_msg, "SSHJoinProfile %s not found", name);
        goto out;
    }
    if ((r = kp_hostio_load_creds(c, h, &got.cr, ret_msg)) < 0 ||
        (r = kp_hostio_build_env(h, KP_ENV_LEAVE, NULL, &got.env, ret_msg)) < 0)
        goto out;
    *lv = got;
    memset(&got, 0, sizeof(got)); /* the caller's now */
out:
    kp_hostio_leave_done(&got);
    kp_free(name);
    return r;
}

int kp_hostio_leave_run(struct kp_hostio_leave *lv, const struct kp_sshhost_view *h,
                        const struct kp_ctx *ctx, const struct kp_ssh_observer *obs, char **ret_msg)
{
    return kp_hostio_run_phase(ctx, h, &lv->cr, kp_sshjoinprofile_view(lv->profile),
                               KP_PROFILE_LEAVE, lv->env, obs, ret_msg, NULL);
}

void kp_hostio_leave_done(struct kp_hostio_leave *lv)
{
    lv->env = kp_env_free(lv->env);
    kp_hostio_creds_done(&lv->cr);
    lv->profile = kp_entry_unref(lv->profile);
}

int kp_hostio_leave(const struct kp_ctx *ctx, struct kp_store *profiles, struct kp_client *c,
                    const struct kp_sshhost_view *h, const struct kp_ssh_observer *obs,
                    char **ret_msg)
{
    struct kp_hostio_leave lv = {0};
    int r;

    if ((r = kp_hostio_leave_prepare(profiles, c, h, &lv, ret_msg)) == 0)
        r = kp_hostio_leave_run(&lv, h, ctx, obs, ret_msg);
    kp_hostio_leave_done(&lv);
    return r;
}
