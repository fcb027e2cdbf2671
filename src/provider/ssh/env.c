/* DESIGN: the KPSSH_* environment contract (provider/ssh/env.h).
 *
 * What: one pure function turns the provider's typed facts into the sorted variable list a phase
 * script is given, plus the secret values the runner scrubs from what it keeps.
 *
 * Why this way: profiles are plain bytes, never templates (docs/join-profiles.md), so this list
 * *is* the interface between kpssh and every profile anyone writes; it must be exact, deterministic
 * and boring. Sorting makes the preamble byte-stable (same input, same stream, same signature-free
 * diff when a user compares two joins). Secret values never become plain strings here: they are
 * copied from one struct kp_secret into another, and the env hands them out only as struct
 * kp_secret, so the single audit point (kp_secret_reveal) stays meaningful. Every check that can
 * fail on user data returns -EINVAL with a message that names keys, never values, so it can go into
 * a condition or event as is.
 *
 * Threads: none of its own; pure, any thread. An env is owned by one thread at a time.
 *
 * Invariants: vars[] is sorted by name with no duplicates; exactly one of value/secret is set per
 * variable; redact[] holds distinct values, longest first, none shorter than KP_LOG_REDACT_MIN
 * except the bootstrap token's halves (whose format already fixes their length). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/err.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/str.h"
#include "provider/ssh/env.h"

/* Ceiling of one plain value: the largest is the base64 of a 64 KiB CA bundle (about 87 KiB). */
#define KP_ENV_MAX_VALUE (128u * 1024u)
/* Ceiling of a join Secret value we pass on (Kubernetes caps a whole Secret at 1 MiB). */
#define KP_ENV_MAX_SECRET (1024u * 1024u)

#define KP_ENV_PREFIX_VAR "KPSSH_VAR_"
#define KP_ENV_PREFIX_SECRET "KPSSH_SECRET_"

struct env_var {
    char *name;
    char *value;              /* plain value, or NULL */
    struct kp_secret *secret; /* secret value, or NULL */
};

struct kp_env {
    struct env_var *vars;
    size_t n, cap;
    struct kp_secret **redact;
    size_t nredact, redact_cap;
};

static int env_fail(char **ret_msg, const char *fmt, ...) KP_PRINTF(2, 3);

/* Sets the user-facing message (base/err.h) and returns -EINVAL: the verdict stands even when
 * the text cannot be allocated. */
static int env_fail(char **ret_msg, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    kp_msg_setv(ret_msg, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static bool is_set(const char *s)
{
    return s && s[0] != '\0';
}

/* True when the bytes of s include one of the bytes in set or a control character. */
static bool has_any(const char *s, const char *set)
{
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f || strchr(set, *s))
            return true;
    }
    return false;
}

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* --- the variable list ------------------------------------------------------------------- */

static int env_grow(struct kp_env *e)
{
    struct env_var *v;
    size_t cap;

    if (e->n < e->cap)
        return 0;
    cap = e->cap ? e->cap * 2 : 16;
    v = kp_reallocarray(e->vars, cap, sizeof(*v));
    if (!v)
        return -ENOMEM;
    e->vars = v;
    e->cap = cap;
    return 0;
}

/* Appends a plain variable prefix+suffix=value. Takes nothing; copies everything. */
static int env_put(struct kp_env *e, const char *prefix, const char *suffix, const char *value)
{
    char *name = NULL, *copy = NULL;
    int r;

    if ((r = env_grow(e)) < 0)
        goto out;
    name = kp_strjoin(prefix, suffix, (const char *)NULL);
    copy = kp_strdup(value ? value : "");
    if (!name || !copy) {
        r = -ENOMEM;
        goto out;
    }
    e->vars[e->n++] = (struct env_var){.name = name, .value = copy, .secret = NULL};
    name = copy = NULL;
    r = 0;
out:
    kp_free(name);
    kp_free(copy);
    return r;
}

/* Appends a secret variable; *name is consumed (freed on failure too), sec is copied. */
static int env_put_secret(struct kp_env *e, char *name, const struct kp_secret *sec)
{
    struct kp_secret *copy = NULL;
    int r;

    if ((r = env_grow(e)) < 0)
        goto out;
    if ((r = kp_secret_new(kp_secret_reveal(sec), kp_secret_len(sec), &copy)) < 0)
        goto out;
    e->vars[e->n++] = (struct env_var){.name = name, .value = NULL, .secret = copy};
    name = NULL;
    copy = NULL;
    r = 0;
out:
    kp_free(name);
    (void)kp_secret_free(copy); /* NULL-tolerant; returns NULL */
    return r;
}

/* Adds a copy of n bytes at p to the redaction list. */
static int env_redact(struct kp_env *e, const char *p, size_t n)
{
    struct kp_secret **v;
    struct kp_secret *s = NULL;
    size_t cap;
    int r;

    if (e->nredact == e->redact_cap) {
        cap = e->redact_cap ? e->redact_cap * 2 : 8;
        v = kp_reallocarray(e->redact, cap, sizeof(*v));
        if (!v)
            return -ENOMEM;
        e->redact = v;
        e->redact_cap = cap;
    }
    if ((r = kp_secret_new(p, n, &s)) < 0)
        return r;
    e->redact[e->nredact++] = s;
    return 0;
}

static int cmp_var(const void *a, const void *b)
{
    const struct env_var *x = a, *y = b;

    return strcmp(x->name, y->name);
}

/* Longest first; equal lengths by bytes, so duplicates end up adjacent. */
static int cmp_redact(const void *a, const void *b)
{
    const struct kp_secret *x = *(const struct kp_secret *const *)a;
    const struct kp_secret *y = *(const struct kp_secret *const *)b;
    size_t lx = kp_secret_len(x), ly = kp_secret_len(y);

    if (lx != ly)
        return lx > ly ? -1 : 1;
    return memcmp(kp_secret_reveal(x), kp_secret_reveal(y), lx);
}

/* --- base64 ------------------------------------------------------------------------------ */

/* The base64 of n bytes at p as a new string no longer than an env value may be. */
static int b64_encode(const void *p, size_t n, char **ret)
{
    struct kp_buf b = KP_BUF_INIT(KP_ENV_MAX_VALUE - 1);
    char *out;
    int r;

    r = kp_base64_encode(p, n, 0, &b);
    if (r < 0)
        return r == -KP_ELIMIT ? -E2BIG : r;
    out = kp_buf_steal(&b, NULL);
    if (!out)
        return -ENOMEM;
    *ret = out;
    return 0;
}

/* --- labels ------------------------------------------------------------------------------ */

/* True when the label namespace ns[0..n) is dom or a subdomain of it. */
static bool ns_within(const char *ns, size_t n, const char *dom)
{
    size_t d = strlen(dom);

    if (n == d)
        return memcmp(ns, dom, d) == 0;
    return n > d && ns[n - d - 1] == '.' && memcmp(ns + n - d, dom, d) == 0;
}

bool kp_env_label_kubelet_settable(const char *key)
{
    /* The kubelet's own well-known labels (k8s.io/kubelet/pkg/apis, kubeletLabels). */
    static const char *const own[] = {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    };
    const char *slash = strchr(key, '/');
    size_t n, i;

    if (!slash)
        return true; /* no prefix: a private label anyone may set */
    n = (size_t)(slash - key);
    if (ns_within(key, n, "node-restriction.kubernetes.io"))
        return false;
    if (!ns_within(key, n, "kubernetes.io") && !ns_within(key, n, "k8s.io"))
        return true;
    for (i = 0; i < KP_ARRAY_SIZE(own); i++) {
        if (strcmp(key, own[i]) == 0)
            return true;
    }
    return ns_within(key, n, "kubelet.kubernetes.io") || ns_within(key, n, "node.kubernetes.io");
}

static int cmp_pair_ptr(const void *a, const void *b)
{
    const struct kp_env_pair *x = *(const struct kp_env_pair *const *)a;
    const struct kp_env_pair *y = *(const struct kp_env_pair *const *)b;

    return strcmp(x->key, y->key);
}

/* k=v,... of the settable labels, sorted by key, into *ret. */
static int build_labels(const struct kp_env_input *in, char **ret, char **ret_msg)
{
    struct kp_buf b = KP_BUF_INIT(KP_ENV_MAX_VALUE);
    const struct kp_env_pair **sorted = NULL;
    size_t i, k = 0;
    char *s;
    int r;

    if (in->nlabels > 0) {
        sorted = kp_calloc(in->nlabels, sizeof(*sorted));
        if (!sorted) {
            r = -ENOMEM;
            goto out;
        }
    }
    for (i = 0; i < in->nlabels; i++) {
        const struct kp_env_pair *l = &in->labels[i];

        if (!is_set(l->key) || has_any(l->key, ",= ") || (l->value && has_any(l->value, ",= "))) {
            r = env_fail(ret_msg,
                         "NodeClaim label \"%s\" cannot be passed to kubelet: keys must "
                         "be non-empty, and neither key nor value may hold ',', '=', "
                         "spaces or control characters",
                         l->key ? l->key : "");
            goto out;
        }
        sorted[k++] = l;
    }
    if (k > 0)
        qsort(sorted, k, sizeof(*sorted), cmp_pair_ptr);
    for (i = 0; i < k; i++) {
        if (i > 0 && strcmp(sorted[i - 1]->key, sorted[i]->key) == 0) {
            r = env_fail(ret_msg, "NodeClaim label \"%s\" is given twice", sorted[i]->key);
            goto out;
        }
        if (!kp_env_label_kubelet_settable(sorted[i]->key))
            continue; /* core's registration sync puts it on the Node instead */
        r = kp_buf_printf(&b, "%s%s=%s", b.len ? "," : "", sorted[i]->key,
                          sorted[i]->value ? sorted[i]->value : "");
        if (r < 0)
            goto out;
    }
    s = kp_buf_steal(&b, NULL);
    if (!s) {
        r = -ENOMEM;
        goto out;
    }
    *ret = s;
    r = 0;
out:
    kp_free(sorted);
    kp_buf_done(&b);
    return r;
}

/* --- taints ------------------------------------------------------------------------------ */

static bool taint_effect_ok(const char *e)
{
    return e && (strcmp(e, "NoSchedule") == 0 || strcmp(e, "PreferNoSchedule") == 0 ||
                 strcmp(e, "NoExecute") == 0);
}

/* KP_ENV_TAINT_UNREGISTERED, then each NodeClaim taint in order, into *ret. A NodeClaim that
 * already carries the unregistered taint does not get it twice (kubelet would then refuse to
 * register: taints must be unique by key and effect). */
static int build_taints(const struct kp_env_input *in, char **ret, char **ret_msg)
{
    struct kp_buf b = KP_BUF_INIT(KP_ENV_MAX_VALUE);
    size_t i, j;
    char *s;
    int r;

    if ((r = kp_buf_puts(&b, KP_ENV_TAINT_UNREGISTERED)) < 0)
        goto out;
    for (i = 0; i < in->ntaints; i++) {
        const struct kp_env_taint *t = &in->taints[i];
        bool has_value = is_set(t->value);

        if (!is_set(t->key) || has_any(t->key, ",=: ") ||
            (has_value && has_any(t->value, ",=: "))) {
            r = env_fail(ret_msg,
                         "NodeClaim taint \"%s\" cannot be passed to kubelet: keys must "
                         "be non-empty, and neither key nor value may hold ',', '=', ':', "
                         "spaces or control characters",
                         t->key ? t->key : "");
            goto out;
        }
        if (!taint_effect_ok(t->effect)) {
            r = env_fail(ret_msg,
                         "NodeClaim taint \"%s\" has effect \"%s\"; expected NoSchedule, "
                         "PreferNoSchedule or NoExecute",
                         t->key, t->effect ? t->effect : "");
            goto out;
        }
        if (strcmp(t->key, "karpenter.sh/unregistered") == 0 &&
            strcmp(t->effect, "NoExecute") == 0) {
            if (has_value) {
                r = env_fail(ret_msg, "NodeClaim taint karpenter.sh/unregistered:NoExecute "
                                      "carries a value; kpssh always registers it without one");
                goto out;
            }
            continue; /* already leads the list */
        }
        for (j = 0; j < i; j++) {
            if (strcmp(in->taints[j].key, t->key) == 0 &&
                strcmp(in->taints[j].effect, t->effect) == 0) {
                r = env_fail(ret_msg,
                             "NodeClaim taint \"%s:%s\" is given twice; kubelet needs "
                             "taints unique by key and effect",
                             t->key, t->effect);
                goto out;
            }
        }
        if (has_value)
            r = kp_buf_printf(&b, ",%s=%s:%s", t->key, t->value, t->effect);
        else
            r = kp_buf_printf(&b, ",%s:%s", t->key, t->effect);
        if (r < 0)
            goto out;
    }
    s = kp_buf_steal(&b, NULL);
    if (!s) {
        r = -ENOMEM;
        goto out;
    }
    *ret = s;
    r = 0;
out:
    kp_buf_done(&b);
    return r;
}

/* --- vars and secrets -------------------------------------------------------------------- */

static bool is_identifier(const char *s)
{
    size_t i;

    if (!s || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return false;
    for (i = 1; s[i]; i++) {
        char c = s[i];

        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

int kp_env_secret_name(const char *key, char **ret_name)
{
    size_t n = strlen(key), plen = strlen(KP_ENV_PREFIX_SECRET), i, total;
    char *name;

    if (n == 0 || kp_add_overflow(n, plen + 1, &total))
        return -EINVAL;
    for (i = 0; i < n; i++) {
        char c = key[i];

        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_'))
            return -EINVAL;
    }
    name = kp_malloc(total);
    if (!name)
        return -ENOMEM;
    memcpy(name, KP_ENV_PREFIX_SECRET, plen);
    for (i = 0; i < n; i++) {
        char c = key[i];

        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        else if (c == '-' || c == '.')
            c = '_';
        name[plen + i] = c;
    }
    name[plen + n] = '\0';
    *ret_name = name;
    return 0;
}

static int add_vars(struct kp_env *e, const struct kp_env_input *in, char **ret_msg)
{
    size_t i, j;
    int r;

    for (i = 0; i < in->nvars; i++) {
        const struct kp_env_pair *v = &in->vars[i];

        if (!is_identifier(v->key))
            return env_fail(ret_msg,
                            "SSHNodeClass var \"%s\" is not a valid name: use letters, "
                            "digits and '_', not starting with a digit",
                            v->key ? v->key : "");
        if (v->value && strlen(v->value) >= KP_ENV_MAX_VALUE)
            return env_fail(ret_msg, "SSHNodeClass var \"%s\" is longer than %u bytes", v->key,
                            KP_ENV_MAX_VALUE - 1);
        for (j = 0; j < i; j++) {
            if (strcmp(in->vars[j].key, v->key) == 0)
                return env_fail(ret_msg, "SSHNodeClass var \"%s\" is given twice", v->key);
        }
        if ((r = env_put(e, KP_ENV_PREFIX_VAR, v->key, v->value)) < 0)
            return r;
    }
    return 0;
}

struct secret_slot {
    char *name;
    const struct kp_env_secret_pair *src;
};

static int cmp_slot(const void *a, const void *b)
{
    const struct secret_slot *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    /* Ties by key so the collision message is the same whatever order the Secret came in. */
    return c ? c : strcmp(x->src->key, y->src->key);
}

static int add_secrets(struct kp_env *e, const struct kp_env_input *in, char **ret_msg)
{
    struct secret_slot *slots = NULL;
    size_t i, nslots = 0;
    int r;

    if (in->nsecrets == 0)
        return 0;
    slots = kp_calloc(in->nsecrets, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    for (i = 0; i < in->nsecrets; i++) {
        const struct kp_env_secret_pair *s = &in->secrets[i];

        r = kp_env_secret_name(s->key ? s->key : "", &slots[nslots].name);
        if (r == -EINVAL) {
            r = env_fail(ret_msg,
                         "join Secret key \"%s\" cannot become an environment name: "
                         "use letters, digits, '-', '.' and '_'",
                         s->key ? s->key : "");
            goto out;
        }
        if (r < 0)
            goto out;
        slots[nslots++].src = s;
        if (!s->value) {
            r = env_fail(ret_msg, "join Secret key \"%s\" has no value", s->key);
            goto out;
        }
        if (kp_secret_len(s->value) > KP_ENV_MAX_SECRET) {
            r = env_fail(ret_msg, "join Secret value of \"%s\" is larger than %u bytes", s->key,
                         KP_ENV_MAX_SECRET);
            goto out;
        }
        if (memchr(kp_secret_reveal(s->value), '\0', kp_secret_len(s->value))) {
            r = env_fail(ret_msg,
                         "join Secret value of \"%s\" holds a NUL byte, which an "
                         "environment variable cannot carry",
                         s->key);
            goto out;
        }
    }
    qsort(slots, nslots, sizeof(*slots), cmp_slot);
    for (i = 1; i < nslots; i++) {
        if (strcmp(slots[i - 1].name, slots[i].name) == 0) {
            r = env_fail(ret_msg,
                         "join Secret keys \"%s\" and \"%s\" both map to %s; rename one "
                         "of them",
                         slots[i - 1].src->key, slots[i].src->key, slots[i].name);
            goto out;
        }
    }
    for (i = 0; i < nslots; i++) {
        const struct kp_secret *v = slots[i].src->value;

        r = env_put_secret(e, slots[i].name, v);
        slots[i].name = NULL; /* consumed, even on failure */
        if (r < 0)
            goto out;
        if (kp_secret_len(v) >= KP_LOG_REDACT_MIN &&
            (r = env_redact(e, kp_secret_reveal(v), kp_secret_len(v))) < 0)
            goto out;
    }
    r = 0;
out:
    for (i = 0; i < nslots; i++)
        kp_free(slots[i].name);
    kp_free(slots);
    return r;
}

/* --- the whole environment --------------------------------------------------------------- */

static bool token_ok(const struct kp_secret *t)
{
    const char *p = kp_secret_reveal(t);
    size_t i;

    if (kp_secret_len(t) != 23 || p[6] != '.')
        return false;
    for (i = 0; i < 23; i++) {
        if (i != 6 && !is_lower_alnum(p[i]))
            return false;
    }
    return true;
}

/* Values for the fixed names in install and join. */
static int add_node_fixed(struct kp_env *e, const struct kp_env_input *in, char **ret_msg)
{
    char *ca = NULL, *labels = NULL, *taints = NULL, *pid = NULL, *name = NULL;
    const struct kp_secret *token = NULL;
    int r;

    if (!is_set(in->cluster_endpoint) || !kp_startswith(in->cluster_endpoint, "https://") ||
        in->cluster_endpoint[strlen("https://")] == '\0' || has_any(in->cluster_endpoint, " ")) {
        r = env_fail(ret_msg, "cluster endpoint \"%s\" must be an https:// URL",
                     in->cluster_endpoint ? in->cluster_endpoint : "");
        goto out;
    }
    if (!in->cluster_ca || in->cluster_ca_len == 0) {
        r = env_fail(ret_msg, "no cluster CA: set SSHNodeClass spec.cluster.caBundle or publish "
                              "kube-public/cluster-info");
        goto out;
    }
    if (!is_set(in->node_name) || has_any(in->node_name, ",=:/ ")) {
        r = env_fail(ret_msg, "node name \"%s\" is missing or malformed",
                     in->node_name ? in->node_name : "");
        goto out;
    }
    if (in->phase == KP_ENV_JOIN) {
        token = in->bootstrap_token;
        if (!token || !token_ok(token)) {
            r = env_fail(ret_msg, "join needs a bootstrap token of the form "
                                  "[a-z0-9]{6}.[a-z0-9]{16}");
            goto out;
        }
    }
    if (in->provider_id_source == KP_ENV_PROVIDER_ID_STATIC) {
        if (!is_set(in->pool_namespace) || !is_set(in->host_name) ||
            has_any(in->pool_namespace, "/ ") || has_any(in->host_name, "/ ")) {
            r = env_fail(ret_msg, "a Static provider id needs the SSHHost's namespace and name");
            goto out;
        }
        pid = kp_strjoin("kpssh://", in->pool_namespace, "/", in->host_name, (const char *)NULL);
        if (!pid) {
            r = -ENOMEM;
            goto out;
        }
    }
    r = b64_encode(in->cluster_ca, in->cluster_ca_len, &ca);
    if (r == -E2BIG) {
        r = env_fail(ret_msg, "cluster CA bundle is too large (%zu bytes)", in->cluster_ca_len);
        goto out;
    }
    if (r < 0)
        goto out;
    if ((r = build_labels(in, &labels, ret_msg)) < 0)
        goto out;
    if ((r = build_taints(in, &taints, ret_msg)) < 0)
        goto out;

    if ((r = env_put(e, "KPSSH_CLUSTER_ENDPOINT", "", in->cluster_endpoint)) < 0 ||
        (r = env_put(e, "KPSSH_CLUSTER_CA_B64", "", ca)) < 0 ||
        (r = env_put(e, "KPSSH_NODE_NAME", "", in->node_name)) < 0 ||
        (r = env_put(e, "KPSSH_PROVIDER_ID", "", pid)) < 0 ||
        (r = env_put(e, "KPSSH_NODE_LABELS", "", labels)) < 0 ||
        (r = env_put(e, "KPSSH_TAINTS", "", taints)) < 0)
        goto out;
    if (token) {
        const char *t = kp_secret_reveal(token);

        name = kp_strdup("KPSSH_BOOTSTRAP_TOKEN");
        if (!name) {
            r = -ENOMEM;
            goto out;
        }
        r = env_put_secret(e, name, token);
        name = NULL; /* consumed */
        if (r < 0)
            goto out;
        if ((r = env_redact(e, t, kp_secret_len(token))) < 0 ||
            (r = env_redact(e, t + 7, kp_secret_len(token) - 7)) < 0)
            goto out;
    } else if ((r = env_put(e, "KPSSH_BOOTSTRAP_TOKEN", "", "")) < 0) {
        goto out;
    }
    r = 0;
out:
    kp_free(ca);
    kp_free(labels);
    kp_free(taints);
    kp_free(pid);
    kp_free(name);
    return r;
}

/* The fixed names with no value, for leave and uninstall. */
static int add_empty_fixed(struct kp_env *e)
{
    static const char *const names[] = {
        "KPSSH_BOOTSTRAP_TOKEN", "KPSSH_CLUSTER_CA_B64", "KPSSH_CLUSTER_ENDPOINT",
        "KPSSH_NODE_LABELS",     "KPSSH_NODE_NAME",      "KPSSH_PROVIDER_ID",
        "KPSSH_TAINTS",
    };
    size_t i;
    int r;

    for (i = 0; i < KP_ARRAY_SIZE(names); i++) {
        if ((r = env_put(e, names[i], "", "")) < 0)
            return r;
    }
    return 0;
}

/* Drops redaction entries that equal an earlier (longer-or-equal, sorted) one. */
static void redact_dedupe(struct kp_env *e)
{
    size_t i, k = 0;

    for (i = 0; i < e->nredact; i++) {
        if (k > 0 && cmp_redact(&e->redact[k - 1], &e->redact[i]) == 0) {
            e->redact[i] = kp_secret_free(e->redact[i]);
            continue;
        }
        e->redact[k++] = e->redact[i];
    }
    e->nredact = k;
}

int kp_env_build(const struct kp_env_input *in, struct kp_env **ret_env, char **ret_msg)
{
    struct kp_env *e = NULL;
    const char *node_address;
    size_t i;
    int r;

    if ((unsigned)in->phase > KP_ENV_UNINSTALL)
        return -EINVAL;
    if (!is_set(in->host_address) || has_any(in->host_address, " ")) {
        r = env_fail(ret_msg, "SSHHost address is missing or malformed");
        goto out;
    }
    node_address = is_set(in->node_address) ? in->node_address : in->host_address;
    if (has_any(node_address, " ")) {
        r = env_fail(ret_msg, "SSHHost nodeAddress \"%s\" is malformed", node_address);
        goto out;
    }
    e = kp_calloc(1, sizeof(*e));
    if (!e) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = env_put(e, "KPSSH_HOST_ADDRESS", "", in->host_address)) < 0 ||
        (r = env_put(e, "KPSSH_NODE_ADDRESS", "", node_address)) < 0)
        goto out;
    if (in->phase == KP_ENV_INSTALL || in->phase == KP_ENV_JOIN) {
        if ((r = add_node_fixed(e, in, ret_msg)) < 0 || (r = add_vars(e, in, ret_msg)) < 0 ||
            (r = add_secrets(e, in, ret_msg)) < 0)
            goto out;
    } else if ((r = add_empty_fixed(e)) < 0) {
        goto out;
    }
    qsort(e->vars, e->n, sizeof(*e->vars), cmp_var);
    for (i = 1; i < e->n; i++) {
        /* Prefixes keep the three families apart and each family checked its own keys, so
         * this cannot trigger; kept so the sorted-and-unique invariant is checked, not hoped. */
        if (strcmp(e->vars[i - 1].name, e->vars[i].name) == 0) {
            r = env_fail(ret_msg, "environment variable %s would be set twice", e->vars[i].name);
            goto out;
        }
    }
    if (e->nredact > 1)
        qsort(e->redact, e->nredact, sizeof(*e->redact), cmp_redact);
    redact_dedupe(e);

    *ret_env = e;
    e = NULL; /* the caller owns it now */
    r = 0;
out:
    (void)kp_env_free(e); /* NULL on success; returns NULL */
    return r;
}

struct kp_env *kp_env_free(struct kp_env *env)
{
    size_t i;

    if (!env)
        return NULL;
    for (i = 0; i < env->n; i++) {
        kp_free(env->vars[i].name);
        kp_free(env->vars[i].value);
        (void)kp_secret_free(env->vars[i].secret); /* wipes */
    }
    for (i = 0; i < env->nredact; i++)
        (void)kp_secret_free(env->redact[i]);
    kp_free(env->vars);
    kp_free(env->redact);
    kp_free(env);
    return NULL;
}

size_t kp_env_size(const struct kp_env *env)
{
    return env->n;
}

const char *kp_env_name(const struct kp_env *env, size_t i)
{
    return i < env->n ? env->vars[i].name : NULL;
}

bool kp_env_is_secret(const struct kp_env *env, size_t i)
{
    return i < env->n && env->vars[i].secret != NULL;
}

const char *kp_env_value(const struct kp_env *env, size_t i)
{
    return i < env->n ? env->vars[i].value : NULL;
}

const struct kp_secret *kp_env_secret(const struct kp_env *env, size_t i)
{
    return i < env->n ? env->vars[i].secret : NULL;
}

int kp_env_find(const struct kp_env *env, const char *name)
{
    size_t lo = 0, hi = env->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(env->vars[mid].name, name);

        if (c == 0)
            return (int)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -ENOENT;
}

size_t kp_env_redact_size(const struct kp_env *env)
{
    return env->nredact;
}

const struct kp_secret *kp_env_redact_at(const struct kp_env *env, size_t i)
{
    return i < env->nredact ? env->redact[i] : NULL;
}

const struct kp_secret *const *kp_env_redact_array(const struct kp_env *env)
{
    return env->nredact ? (const struct kp_secret *const *)env->redact : NULL;
}
