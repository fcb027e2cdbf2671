/* DESIGN: exec credential plugins.
 *
 * What: runs the kubeconfig's exec plugin, parses its ExecCredential and caches the result.
 *
 * Why this way: the plugin's JSON is parsed with our yaml/ layer, not json/. JSON is a subset
 * of YAML that libyaml reads as a flow-style document (escapes included), and the yaml/ tree
 * gives positions for the error message and the same bounded, fuzzed parser as kubeconfig.
 * Duplicate keys are rejected, which strict JSON decoders also do. The timestamp goes through
 * k8s/rfc3339.
 *
 * The plugin gets the parent's environment plus its env entries plus KUBERNETES_EXEC_INFO
 * (built once, at creation), stdin from /dev/null unless a terminal is available and the
 * plugin may use it, a deadline and a ceiling on stdout. Its stderr tail goes into error
 * messages after kp_log_redact_dup() removed every registered secret (our earlier tokens are
 * registered, being kp_secrets) and control characters are flattened.
 *
 * Threads: kp_exec_credential_get holds the source's mutex while the plugin runs. That departs
 * from "no lock across I/O" (STYLE.md rule 9) on purpose: every worker needing a token at the
 * same moment must wait for one plugin run rather than start one each, and the wait is
 * bounded by the plugin's deadline. */
#include "k8s/exec-credential.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/spawn.h"
#include "base/str.h"
#include "k8s/kubeconfig.h"
#include "k8s/rfc3339.h"
#include "yaml/yaml.h"

#define EXEC_OUTPUT_NAME "exec plugin output"
/* How much of the plugin's stderr goes into a message (the message itself is bounded). */
#define EXEC_STDERR_IN_MESSAGE 200

struct kp_exec_credential {
    pthread_mutex_t lock;
    struct kp_exec_config *cfg;
    char *exec_info_env; /* "KUBERNETES_EXEC_INFO={...}" */
    uint64_t timeout_usec;
    char *path;
    bool interactive;
    struct kp_exec_status *cached; /* guarded by lock */
    uint64_t runs;                 /* guarded by lock */
};

struct kp_exec_status *kp_exec_status_free(struct kp_exec_status *s)
{
    if (!s)
        return NULL;
    kp_secret_free(s->token);
    kp_free(s->cert_pem);
    kp_secret_free(s->key_pem);
    kp_free(s);
    return NULL;
}

static int status_str(const struct kp_yaml_node *status, const char *key, const char **ret,
                      size_t *ret_len, struct kp_yaml_error *err)
{
    const struct kp_yaml_node *n = kp_yaml_map_get(status, key);
    const char *s = NULL;
    size_t len = 0;

    if (n && !kp_yaml_is_null(n)) {
        if (kp_yaml_type(n) != KP_YAML_SCALAR || kp_yaml_get_cstr(n, &s) < 0) {
            kp_yaml_errorf(err, n, NULL, "status.%s: expected a string, got %s", key,
                           kp_yaml_describe(n));
            return -KP_EPARSE;
        }
        len = strlen(s);
    }
    *ret = len ? s : NULL;
    *ret_len = len;
    return 0;
}

int kp_exec_credential_parse(const char *p, size_t len, const char *api_version,
                             struct kp_exec_status **ret, struct kp_yaml_error *reterr)
{
    struct kp_yaml_doc *doc = NULL;
    struct kp_exec_status *st = NULL;
    const struct kp_yaml_node *root, *n, *status;
    const char *s = NULL, *token, *cert, *key, *exp;
    size_t token_len, cert_len, key_len, exp_len;
    int r;

    r = kp_yaml_parse(p, len, EXEC_OUTPUT_NAME, KP_MAX_EXEC_OUTPUT, 0, &doc, reterr);
    if (r < 0)
        goto out;
    root = kp_yaml_doc_root(doc, 0);
    if (!root || kp_yaml_type(root) != KP_YAML_MAPPING) {
        kp_yaml_errorf(reterr, root, EXEC_OUTPUT_NAME, "expected an ExecCredential object");
        r = -KP_EPARSE;
        goto out;
    }
    n = kp_yaml_map_get(root, "kind");
    if (!n || kp_yaml_get_cstr(n, &s) < 0 || strcmp(s, "ExecCredential") != 0) {
        kp_yaml_errorf(reterr, n ? n : root, NULL, "kind must be ExecCredential");
        r = -KP_EPARSE;
        goto out;
    }
    n = kp_yaml_map_get(root, "apiVersion");
    if (!n || kp_yaml_get_cstr(n, &s) < 0 || !api_version || strcmp(s, api_version) != 0) {
        kp_yaml_errorf(reterr, n ? n : root, NULL,
                       "apiVersion must be %s, the version the kubeconfig asked for",
                       api_version ? api_version : "(unset)");
        r = -KP_EPARSE;
        goto out;
    }
    status = kp_yaml_map_get(root, "status");
    if (!status || kp_yaml_type(status) != KP_YAML_MAPPING) {
        kp_yaml_errorf(reterr, status ? status : root, NULL, "status: expected a mapping");
        r = -KP_EPARSE;
        goto out;
    }
    if ((r = status_str(status, "token", &token, &token_len, reterr)) < 0 ||
        (r = status_str(status, "clientCertificateData", &cert, &cert_len, reterr)) < 0 ||
        (r = status_str(status, "clientKeyData", &key, &key_len, reterr)) < 0 ||
        (r = status_str(status, "expirationTimestamp", &exp, &exp_len, reterr)) < 0)
        goto out;
    if (!cert != !key) {
        kp_yaml_errorf(reterr, status, NULL,
                       "status: clientCertificateData and clientKeyData come together");
        r = -KP_EPARSE;
        goto out;
    }
    if (!token && !cert) {
        kp_yaml_errorf(reterr, status, NULL,
                       "status: neither a token nor a client certificate and key");
        r = -KP_EPARSE;
        goto out;
    }
    st = kp_calloc(1, sizeof(*st));
    if (!st) {
        r = -ENOMEM;
        goto out;
    }
    if (exp) {
        r = kp_rfc3339_parse(exp, exp_len, &st->expires_usec);
        if (r < 0) {
            kp_yaml_errorf(reterr, kp_yaml_map_get(status, "expirationTimestamp"), NULL,
                           "status.expirationTimestamp: not an RFC 3339 time");
            r = -KP_EPARSE;
            goto out;
        }
        if (st->expires_usec == 0)
            st->expires_usec = 1; /* 0 means "no expiry" */
    }
    if (token && (r = kp_secret_new(token, token_len, &st->token)) < 0)
        goto out;
    if (cert) {
        st->cert_pem = kp_memdup(cert, cert_len + 1);
        if (!st->cert_pem) {
            r = -ENOMEM;
            goto out;
        }
        st->cert_pem_len = cert_len;
        r = kp_secret_new(key, key_len, &st->key_pem);
        if (r < 0)
            goto out;
    }
    *ret = st;
    st = NULL;
    r = 0;
out:
    if (r == -ENOMEM)
        kp_yaml_errorf(reterr, NULL, EXEC_OUTPUT_NAME, "out of memory");
    kp_exec_status_free(st);
    kp_yaml_doc_free(doc);
    return r;
}

/* --- KUBERNETES_EXEC_INFO ----------------------------------------------------------------- */

static int json_str(struct kp_buf *b, const char *s, size_t n)
{
    int r = kp_buf_putc(b, '"');

    for (size_t i = 0; r >= 0 && i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '"' || c == '\\')
            r = kp_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            r = kp_buf_printf(b, "\\u%04x", c);
        else
            r = kp_buf_putc(b, (char)c);
    }
    return r < 0 ? r : kp_buf_putc(b, '"');
}

static int build_exec_info(const struct kp_kubeconfig_rest *rest, bool interactive, char **ret)
{
    struct kp_buf b = KP_BUF_INIT(4 * KP_MAX_PEM_FILE);
    const struct kp_exec_config *cfg = rest->exec;
    char *s;
    int r;

    if ((r = kp_buf_puts(&b, "KUBERNETES_EXEC_INFO={\"apiVersion\":")) < 0 ||
        (r = json_str(&b, cfg->api_version, strlen(cfg->api_version))) < 0 ||
        (r = kp_buf_printf(&b, ",\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":%s",
                           interactive ? "true" : "false")) < 0)
        goto out;
    if (cfg->provide_cluster_info) {
        if ((r = kp_buf_puts(&b, ",\"cluster\":{\"server\":")) < 0 ||
            (r = json_str(&b, rest->server, strlen(rest->server))) < 0)
            goto out;
        if (rest->tls_server_name &&
            ((r = kp_buf_puts(&b, ",\"tls-server-name\":")) < 0 ||
             (r = json_str(&b, rest->tls_server_name, strlen(rest->tls_server_name))) < 0))
            goto out;
        if (rest->insecure_skip_tls_verify &&
            (r = kp_buf_puts(&b, ",\"insecure-skip-tls-verify\":true")) < 0)
            goto out;
        if (rest->ca_pem && ((r = kp_buf_puts(&b, ",\"certificate-authority-data\":\"")) < 0 ||
                             (r = kp_base64_encode(rest->ca_pem, rest->ca_pem_len, 0, &b)) < 0 ||
                             (r = kp_buf_putc(&b, '"')) < 0))
            goto out;
        if (rest->proxy_url && ((r = kp_buf_puts(&b, ",\"proxy-url\":")) < 0 ||
                                (r = json_str(&b, rest->proxy_url, strlen(rest->proxy_url))) < 0))
            goto out;
        if ((r = kp_buf_putc(&b, '}')) < 0)
            goto out;
    }
    if ((r = kp_buf_puts(&b, "}}")) < 0)
        goto out;
    s = kp_buf_steal(&b, NULL);
    if (!s) {
        r = -ENOMEM;
        goto out;
    }
    *ret = s;
out:
    kp_buf_done(&b);
    return r;
}

int kp_exec_credential_new(const struct kp_kubeconfig_rest *rest,
                           const struct kp_exec_credential_opts *opts,
                           struct kp_exec_credential **ret)
{
    struct kp_exec_credential *c;
    int r;

    if (!rest->exec)
        return -EINVAL;
    c = kp_calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    r = pthread_mutex_init(&c->lock, NULL);
    if (r) {
        kp_free(c);
        return -r;
    }
    c->timeout_usec = opts && opts->timeout_usec ? opts->timeout_usec : KP_EXEC_TIMEOUT_USEC;
    c->interactive =
        opts && opts->interactive && rest->exec->interactive != KP_EXEC_INTERACTIVE_NEVER;
    if ((r = kp_exec_config_dup(rest->exec, &c->cfg)) < 0 ||
        (r = kp_strset(&c->path, opts ? opts->path : NULL)) < 0 ||
        (r = build_exec_info(rest, c->interactive, &c->exec_info_env)) < 0) {
        kp_exec_credential_free(c);
        return r;
    }
    *ret = c;
    return 0;
}

struct kp_exec_credential *kp_exec_credential_free(struct kp_exec_credential *c)
{
    if (!c)
        return NULL;
    kp_exec_status_free(c->cached);
    kp_exec_config_free(c->cfg);
    kp_free(c->exec_info_env);
    kp_free(c->path);
    pthread_mutex_destroy(&c->lock);
    kp_free(c);
    return NULL;
}

/* "; <stderr tail>" and "; <install hint>" for a message, redacted and on one line. */
static void describe_failure(const struct kp_exec_credential *c, const struct kp_buf *errtail,
                             struct kp_yaml_error *err, const char *fmt, const char *arg)
{
    char *red = NULL;
    const char *tail = "";
    size_t len;

    if (errtail->len > 0) {
        red = kp_log_redact_dup(kp_buf_str(errtail));
        if (red) {
            len = strlen(red);
            while (len > 0 && (red[len - 1] == '\n' || red[len - 1] == ' '))
                red[--len] = '\0';
            tail = len > EXEC_STDERR_IN_MESSAGE ? red + len - EXEC_STDERR_IN_MESSAGE : red;
        } else {
            tail = "(stderr withheld: out of memory while redacting it)";
        }
    }
    /* kp_yaml_errorf flattens control characters, so a multi-line stderr stays on one line. */
    kp_yaml_errorf(err, NULL, "exec plugin", "\"%s\" %s%s%s%s%s%s", c->cfg->command, fmt,
                   arg ? arg : "", *tail ? ": " : "", tail, c->cfg->install_hint ? "; " : "",
                   c->cfg->install_hint ? c->cfg->install_hint : "");
    kp_free(red);
}

static int run_plugin(struct kp_exec_credential *c, struct kp_exec_status **ret,
                      struct kp_yaml_error *err)
{
    const char **argv = NULL, **env = NULL;
    struct kp_spawn_result res = {0};
    struct kp_spawn_opts o = {0};
    bool have_res = false;
    char num[32];
    size_t i;
    int r;

    if (c->cfg->interactive == KP_EXEC_INTERACTIVE_ALWAYS && !c->interactive) {
        kp_yaml_errorf(err, NULL, "exec plugin",
                       "\"%s\" needs a terminal (interactiveMode: Always), and there is none",
                       c->cfg->command);
        return -EPERM;
    }
    argv = kp_calloc(c->cfg->args.n + 2, sizeof(*argv));
    env = kp_calloc(c->cfg->env.n + 2, sizeof(*env));
    if (!argv || !env) {
        r = -ENOMEM;
        goto out;
    }
    argv[0] = c->cfg->command;
    for (i = 0; i < c->cfg->args.n; i++)
        argv[i + 1] = c->cfg->args.v[i];
    for (i = 0; i < c->cfg->env.n; i++)
        env[i] = c->cfg->env.v[i];
    env[i] = c->exec_info_env;
    o.argv = argv;
    o.env = env;
    o.path = c->path;
    o.flags = c->interactive ? KP_SPAWN_INHERIT_STDIN : 0;
    o.timeout_usec = c->timeout_usec;
    o.max_stdout = KP_MAX_EXEC_OUTPUT;
    o.stderr_tail = KP_EXEC_STDERR_TAIL;
    c->runs++;
    r = kp_spawn_run(&o, &res);
    if (r < 0) {
        struct kp_buf none = KP_BUF_INIT(0);

        describe_failure(c, &none, err, r == -ENOENT ? "was not found" : "could not run: ",
                         r == -ENOENT ? NULL : kp_strerror(r));
        goto out;
    }
    have_res = true;
    switch (res.end) {
    case KP_SPAWN_TIMED_OUT:
        describe_failure(c, &res.err, err, "did not finish in time", NULL);
        r = -ETIMEDOUT;
        goto out;
    case KP_SPAWN_OUTPUT_LIMIT:
        describe_failure(c, &res.err, err, "wrote more than the output limit", NULL);
        r = -KP_ELIMIT;
        goto out;
    case KP_SPAWN_SIGNALED:
        (void)snprintf(num, sizeof(num), "%d", res.status);
        describe_failure(c, &res.err, err, "was killed by signal ", num);
        r = -EIO;
        goto out;
    case KP_SPAWN_EXITED:
        if (res.status != 0) {
            (void)snprintf(num, sizeof(num), "%d", res.status);
            describe_failure(c, &res.err, err, "failed with exit status ", num);
            r = -EIO;
            goto out;
        }
        break;
    }
    r = kp_exec_credential_parse(res.out.data ? res.out.data : "", res.out.len, c->cfg->api_version,
                                 ret, err);
out:
    if (have_res)
        kp_spawn_result_done(&res);
    kp_free(argv);
    kp_free(env);
    return r;
}

static int status_dup(const struct kp_exec_status *s, struct kp_exec_status **ret)
{
    struct kp_exec_status *d;
    int r = -ENOMEM;

    d = kp_calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->expires_usec = s->expires_usec;
    if (s->token &&
        (r = kp_secret_new(kp_secret_reveal(s->token), kp_secret_len(s->token), &d->token)) < 0)
        goto fail;
    if (s->cert_pem) {
        d->cert_pem = kp_memdup(s->cert_pem, s->cert_pem_len + 1);
        if (!d->cert_pem)
            goto fail;
        d->cert_pem_len = s->cert_pem_len;
        r = kp_secret_new(kp_secret_reveal(s->key_pem), kp_secret_len(s->key_pem), &d->key_pem);
        if (r < 0)
            goto fail;
    }
    *ret = d;
    return 0;
fail:
    kp_exec_status_free(d);
    return -ENOMEM;
}

static bool still_valid(const struct kp_exec_status *s)
{
    uint64_t now = kp_real_usec();

    if (s->expires_usec == 0)
        return true;
    return s->expires_usec > 0 && (uint64_t)s->expires_usec > now + KP_EXEC_EXPIRY_SKEW_USEC;
}

int kp_exec_credential_get(struct kp_exec_credential *c, bool refresh, struct kp_exec_status **ret,
                           struct kp_yaml_error *reterr)
{
    struct kp_exec_status *fresh = NULL;
    int r;

    pthread_mutex_lock(&c->lock);
    if (refresh || !c->cached || !still_valid(c->cached)) {
        c->cached = kp_exec_status_free(c->cached);
        r = run_plugin(c, &fresh, reterr);
        if (r < 0)
            goto out;
        c->cached = fresh;
    }
    r = status_dup(c->cached, ret);
    if (r < 0)
        kp_yaml_errorf(reterr, NULL, "exec plugin", "out of memory");
out:
    pthread_mutex_unlock(&c->lock);
    return r;
}

int kp_exec_credential_token_fn(void *userdata, bool refresh, struct kp_secret **ret_token)
{
    struct kp_exec_status *st = NULL;
    int r;

    r = kp_exec_credential_get(userdata, refresh, &st, NULL);
    if (r < 0)
        return r;
    *ret_token = st->token;
    st->token = NULL;
    kp_exec_status_free(st);
    return 0;
}

uint64_t kp_exec_credential_runs(struct kp_exec_credential *c)
{
    uint64_t n;

    pthread_mutex_lock(&c->lock);
    n = c->runs;
    pthread_mutex_unlock(&c->lock);
    return n;
}
