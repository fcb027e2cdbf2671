/* DESIGN: kubeconfig loading, merging and resolution.
 *
 * What: files become yaml/ trees that stay alive inside struct kp_kubeconfig; the merge keeps
 * three name -> node maps (clusters, users, contexts) pointing into those trees, so every later
 * error can still cite the file, line and column of the node it is about (STYLE.md rule 12).
 *
 * Merge rules (kubectl's, from the Kubernetes documentation on organizing cluster access):
 * files are taken in order; the first file to define a cluster, user or context name wins and
 * later definitions of that name are ignored whole (entries are never merged field by field);
 * current-context comes from the first file that sets a non-empty one; missing files in
 * KUBECONFIG are skipped, a file that exists but does not parse is an error; an empty
 * KUBECONFIG means ~/.kube/config. One departure: a name defined twice within one file is an
 * error here, because the two readers of such a file (kubectl and us) might pick different
 * entries, and for a cluster that means sending credentials to another server.
 *
 * Structure (sections are sequences of mappings with a name) is checked when a file is added;
 * fields are checked when a context is resolved, and only for the context, cluster and user
 * that it uses, like kubectl, so one stale entry does not break every other context. Unknown
 * fields are ignored (kubectl decodes leniently). What kpssh does not support and would change
 * who we talk to or as whom (auth-provider, basic auth, impersonation) is an error, never
 * silently dropped.
 *
 * Threads: a kp_kubeconfig is built by one thread and then read-only. */
#include "k8s/kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/map.h"
#include "base/secret.h"
#include "yaml/yaml.h"

/* At most this many files merged (KUBECONFIG lists longer than this are a mistake). */
#define KP_KUBECONFIG_MAX_FILES 64

struct kp_kubeconfig {
    struct kp_yaml_doc *docs[KP_KUBECONFIG_MAX_FILES];
    size_t ndocs;
    struct kp_map *clusters, *users, *contexts; /* name -> entry mapping node (with "name") */
    const struct kp_yaml_node *current;         /* current-context value node, or NULL */
};

static const struct {
    const char *section; /* top-level key */
    const char *inner;   /* the key of each entry's body */
    size_t map_offset;
} sections[] = {
    {"clusters", "cluster", offsetof(struct kp_kubeconfig, clusters)},
    {"users", "user", offsetof(struct kp_kubeconfig, users)},
    {"contexts", "context", offsetof(struct kp_kubeconfig, contexts)},
};

static struct kp_map **section_map(struct kp_kubeconfig *kc, size_t i)
{
    return (struct kp_map **)(void *)((char *)kc + sections[i].map_offset);
}

int kp_kubeconfig_new(struct kp_kubeconfig **ret)
{
    struct kp_kubeconfig *kc;
    int r;

    kc = kp_calloc(1, sizeof(*kc));
    if (!kc)
        return -ENOMEM;
    if ((r = kp_map_new(&kc->clusters)) < 0 || (r = kp_map_new(&kc->users)) < 0 ||
        (r = kp_map_new(&kc->contexts)) < 0) {
        kp_kubeconfig_free(kc);
        return r;
    }
    *ret = kc;
    return 0;
}

struct kp_kubeconfig *kp_kubeconfig_free(struct kp_kubeconfig *kc)
{
    if (!kc)
        return NULL;
    kp_map_free(kc->clusters);
    kp_map_free(kc->users);
    kp_map_free(kc->contexts);
    for (size_t i = 0; i < kc->ndocs; i++)
        kp_yaml_doc_free(kc->docs[i]);
    kp_free(kc);
    return NULL;
}

const char *kp_kubeconfig_current_context(const struct kp_kubeconfig *kc)
{
    const char *s;

    if (!kc->current || kp_yaml_get_cstr(kc->current, &s) < 0)
        return NULL;
    return s;
}

/* An optional string field: absent or null gives *ret = NULL. */
static int opt_str(const struct kp_yaml_node *map, const char *key, const char **ret,
                   const struct kp_yaml_node **ret_node, struct kp_yaml_error *err)
{
    const struct kp_yaml_node *n = kp_yaml_map_get(map, key);
    const char *s = NULL;

    if (n && !kp_yaml_is_null(n) && kp_yaml_get_cstr(n, &s) < 0) {
        kp_yaml_errorf(err, n, NULL, "%s: expected a string, got %s", key, kp_yaml_describe(n));
        return -KP_EPARSE;
    }
    *ret = s;
    if (ret_node)
        *ret_node = n;
    return 0;
}

static int opt_bool(const struct kp_yaml_node *map, const char *key, bool *ret,
                    struct kp_yaml_error *err)
{
    const struct kp_yaml_node *n = kp_yaml_map_get(map, key);
    bool b = false;

    if (n && !kp_yaml_is_null(n) && kp_yaml_get_bool(n, &b) < 0) {
        kp_yaml_errorf(err, n, NULL, "%s: expected true or false", key);
        return -KP_EPARSE;
    }
    *ret = b;
    return 0;
}

/* Checks one section of a new document and records its entries in the per-file map. */
static int check_section(const struct kp_yaml_node *root, size_t si, struct kp_map *local,
                         struct kp_yaml_error *err)
{
    const struct kp_yaml_node *seq = kp_yaml_map_get(root, sections[si].section);
    size_t i;
    int r;

    if (!seq || kp_yaml_is_null(seq))
        return 0;
    if (kp_yaml_type(seq) != KP_YAML_SEQUENCE) {
        kp_yaml_errorf(err, seq, NULL, "%s: expected a sequence, got %s", sections[si].section,
                       kp_yaml_describe(seq));
        return -KP_EPARSE;
    }
    for (i = 0; i < kp_yaml_len(seq); i++) {
        const struct kp_yaml_node *item = kp_yaml_seq_at(seq, i), *name_node = NULL, *body;
        const struct kp_yaml_node *prev;
        const char *name = NULL;

        if (kp_yaml_type(item) != KP_YAML_MAPPING) {
            kp_yaml_errorf(err, item, NULL, "%s[%zu]: expected a mapping, got %s",
                           sections[si].section, i, kp_yaml_describe(item));
            return -KP_EPARSE;
        }
        r = opt_str(item, "name", &name, &name_node, err);
        if (r < 0)
            return r;
        /* An explicit empty name is a cluster's name in kube-public/cluster-info, which
         * kubeadm writes with one cluster named "" (kp_kubeconfig_resolve_cluster reads it). */
        if (!name || (!*name && strcmp(sections[si].section, "clusters") != 0)) {
            kp_yaml_errorf(err, item, NULL, "%s[%zu]: missing name", sections[si].section, i);
            return -KP_EPARSE;
        }
        body = kp_yaml_map_get(item, sections[si].inner);
        if (body && !kp_yaml_is_null(body) && kp_yaml_type(body) != KP_YAML_MAPPING) {
            kp_yaml_errorf(err, body, NULL, "%s \"%s\": %s: expected a mapping, got %s",
                           sections[si].inner, name, sections[si].inner, kp_yaml_describe(body));
            return -KP_EPARSE;
        }
        prev = kp_map_get(local, name);
        if (prev) {
            kp_yaml_errorf(err, name_node, NULL, "%s \"%s\" is defined twice (first at %u:%u)",
                           sections[si].inner, name, kp_yaml_line(prev), kp_yaml_col(prev));
            return -KP_EPARSE;
        }
        r = kp_map_put(local, name, (void *)(uintptr_t)item, NULL);
        if (r < 0)
            return r;
    }
    return 0;
}

int kp_kubeconfig_add(struct kp_kubeconfig *kc, const char *p, size_t len, const char *filename,
                      struct kp_yaml_error *reterr)
{
    struct kp_map *local[KP_ARRAY_SIZE(sections)] = {NULL};
    struct kp_yaml_doc *doc = NULL;
    const struct kp_yaml_node *root, *cur = NULL;
    const char *cur_name = NULL;
    size_t added[KP_ARRAY_SIZE(sections)] = {0};
    size_t si;
    int r;

    if (kc->ndocs >= KP_KUBECONFIG_MAX_FILES) {
        kp_yaml_errorf(reterr, NULL, filename, "more than %d kubeconfig files",
                       KP_KUBECONFIG_MAX_FILES);
        r = -KP_ELIMIT;
        goto out;
    }
    r = kp_yaml_parse(p, len, filename, KP_MAX_KUBECONFIG, 0, &doc, reterr);
    if (r < 0)
        goto out;
    root = kp_yaml_doc_root(doc, 0);
    if (root && !kp_yaml_is_null(root) && kp_yaml_type(root) != KP_YAML_MAPPING) {
        kp_yaml_errorf(reterr, root, NULL, "expected a mapping, got %s", kp_yaml_describe(root));
        r = -KP_EPARSE;
        goto out;
    }
    for (si = 0; si < KP_ARRAY_SIZE(sections); si++) {
        r = kp_map_new(&local[si]);
        if (r < 0)
            goto out;
        r = check_section(root, si, local[si], reterr);
        if (r < 0)
            goto out;
    }
    r = opt_str(root, "current-context", &cur_name, &cur, reterr);
    if (r < 0)
        goto out;
    /* preferences, kind, apiVersion and extensions are not used. */

    /* Merge: first definition of a name wins. Undo on failure so kc stays unchanged. */
    for (si = 0; si < KP_ARRAY_SIZE(sections); si++) {
        struct kp_map *global = *section_map(kc, si);
        const char *name;
        void *item;
        size_t it = 0;

        while (kp_map_next(local[si], &it, &name, &item)) {
            if (kp_map_contains(global, name))
                continue;
            r = kp_map_put(global, name, item, NULL);
            if (r < 0)
                goto undo;
            added[si]++;
        }
    }
    if (!kc->current && cur_name && *cur_name)
        kc->current = cur;
    kc->docs[kc->ndocs++] = doc;
    doc = NULL;
    r = 0;
    goto out;
undo:
    for (si = 0; si < KP_ARRAY_SIZE(sections); si++) {
        struct kp_map *global = *section_map(kc, si);
        const char *name;
        void *item;
        size_t it = 0;

        /* Entries of this document are recognised by pointer: they were just added. */
        while (added[si] > 0 && kp_map_next(local[si], &it, &name, &item)) {
            if (kp_map_get(global, name) == item) {
                (void)kp_map_remove(global, name);
                added[si]--;
            }
        }
    }
    kp_yaml_errorf(reterr, NULL, filename, "out of memory");
out:
    for (si = 0; si < KP_ARRAY_SIZE(sections); si++)
        kp_map_free(local[si]);
    kp_yaml_doc_free(doc);
    return r;
}

int kp_read_file_bounded(const char *path, size_t max, char **ret, size_t *ret_len)
{
    struct kp_buf b = KP_BUF_INIT(max);
    char chunk[4096];
    struct stat st;
    char *s;
    int fd, r;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        goto out;
    }
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            goto out;
        }
        if (n == 0)
            break;
        r = kp_buf_append(&b, chunk, (size_t)n);
        if (r < 0)
            goto out;
    }
    s = kp_buf_steal(&b, ret_len);
    if (!s) {
        r = -ENOMEM;
        goto out;
    }
    *ret = s;
    r = 0;
out:
    kp_wipe(chunk, sizeof(chunk)); /* the file may hold a key */
    close(fd);
    kp_buf_wipe(&b);
    return r;
}

int kp_kubeconfig_add_file(struct kp_kubeconfig *kc, const char *path, struct kp_yaml_error *reterr)
{
    char *data = NULL;
    size_t len = 0;
    int r;

    r = kp_read_file_bounded(path, KP_MAX_KUBECONFIG, &data, &len);
    if (r < 0) {
        kp_yaml_errorf(reterr, NULL, path, "cannot read: %s", kp_strerror(r));
        return r;
    }
    r = kp_kubeconfig_add(kc, data, len, path, reterr);
    kp_free(data);
    return r;
}

int kp_kubeconfig_load(const char *explicit_path, const char *kubeconfig_env, const char *home,
                       struct kp_kubeconfig **ret, struct kp_yaml_error *reterr)
{
    struct kp_kubeconfig *kc = NULL;
    struct kp_strv seen = KP_STRV_INIT;
    char *path = NULL;
    size_t read_ok = 0;
    const char *p, *end;
    int r;

    r = kp_kubeconfig_new(&kc);
    if (r < 0)
        goto out;
    if (explicit_path) {
        r = kp_kubeconfig_add_file(kc, explicit_path, reterr);
        if (r < 0)
            goto out;
        read_ok++;
    } else if (kubeconfig_env && *kubeconfig_env) {
        for (p = kubeconfig_env; *p; p = *end ? end + 1 : end) {
            end = strchrnul(p, ':');
            if (end == p)
                continue;
            path = kp_strndup(p, (size_t)(end - p));
            if (!path) {
                r = -ENOMEM;
                goto out;
            }
            if (kp_strv_contains(&seen, path)) {
                path = (kp_free(path), NULL);
                continue;
            }
            r = kp_kubeconfig_add_file(kc, path, reterr);
            if (r < 0 && r != -ENOENT)
                goto out;
            if (r == 0)
                read_ok++;
            r = kp_strv_consume(&seen, path);
            path = NULL;
            if (r < 0)
                goto out;
        }
        if (read_ok == 0)
            kp_yaml_errorf(reterr, NULL, "KUBECONFIG", "none of the files exists");
    } else if (home) {
        path = kp_strjoin(home, "/.kube/config", (char *)NULL);
        if (!path) {
            r = -ENOMEM;
            goto out;
        }
        r = kp_kubeconfig_add_file(kc, path, reterr);
        if (r < 0)
            goto out;
        read_ok++;
    } else {
        kp_yaml_errorf(reterr, NULL, "kubeconfig", "no path, no KUBECONFIG and no home directory");
    }
    if (read_ok == 0) {
        r = -ENOENT;
        goto out;
    }
    *ret = kc;
    kc = NULL;
    r = 0;
out:
    kp_free(path);
    kp_strv_done(&seen);
    kp_kubeconfig_free(kc);
    return r;
}

/* --- resolution --------------------------------------------------------------------------- */

/* Standard base64 with optional padding; CR and LF are skipped as Go's decoder does. The
 * data may be a private key: a failed decode wipes what it produced. */
static int b64_decode(const char *s, size_t n, char **ret, size_t *ret_len)
{
    struct kp_buf b = KP_BUF_INIT(n / 4 * 3 + 3);
    char *out;
    int r;

    r = kp_base64_decode(s, n, KP_BASE64_SKIP_NEWLINES, &b);
    if (r < 0) {
        kp_buf_wipe(&b);
        return r == -KP_ELIMIT ? -KP_EPARSE : r;
    }
    out = kp_buf_steal(&b, ret_len);
    if (!out)
        return -ENOMEM;
    *ret = out;
    return 0;
}

/* The directory of the kubeconfig that holds node n, joined with path (if path is relative). */
static int resolve_path(const struct kp_yaml_node *n, const char *path, char **ret)
{
    const char *file = kp_yaml_file(n);
    const char *slash = strrchr(file, '/');
    char *dir, *s;

    if (path[0] == '/' || !slash) {
        s = kp_strdup(path);
    } else {
        dir = kp_strndup(file, (size_t)(slash - file));
        if (!dir)
            return -ENOMEM;
        s = kp_strjoin(dir, "/", path, (char *)NULL);
        kp_free(dir);
    }
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

/* Bytes from key-data (base64) or key (a file named relative to the kubeconfig). Neither set
 * gives *ret = NULL. */
static int load_bytes(const struct kp_yaml_node *map, const char *data_key, const char *file_key,
                      size_t max, enum kp_kubeconfig_flags flags, char **ret, size_t *ret_len,
                      struct kp_yaml_error *err)
{
    const struct kp_yaml_node *dn = NULL, *fn = NULL;
    const char *data = NULL, *file = NULL;
    char *path = NULL, *bytes = NULL;
    size_t len = 0;
    int r;

    if ((r = opt_str(map, data_key, &data, &dn, err)) < 0 ||
        (r = opt_str(map, file_key, &file, &fn, err)) < 0)
        return r;
    /* As in client-go, *-data wins over the file when both are set. */
    if (data && *data) {
        r = b64_decode(data, strlen(data), &bytes, &len);
        if (r == -KP_EPARSE)
            kp_yaml_errorf(err, dn, NULL, "%s: not valid base64", data_key);
        if (r < 0)
            goto out;
        if (len > max) {
            kp_yaml_errorf(err, dn, NULL, "%s: more than %zu bytes", data_key, max);
            r = -KP_ELIMIT;
            goto out;
        }
    } else if (file && *file) {
        if (flags & KP_KUBECONFIG_NO_FILES) {
            kp_yaml_errorf(err, fn, NULL, "%s: files may not be read here", file_key);
            r = -EPERM;
            goto out;
        }
        r = resolve_path(fn, file, &path);
        if (r < 0)
            goto out;
        r = kp_read_file_bounded(path, max, &bytes, &len);
        if (r < 0) {
            kp_yaml_errorf(err, fn, NULL, "%s: cannot read %s: %s", file_key, path, kp_strerror(r));
            goto out;
        }
    }
    *ret = bytes;
    *ret_len = len;
    bytes = NULL;
    r = 0;
out:
    if (bytes)
        kp_wipe(bytes, len);
    kp_free(bytes);
    kp_free(path);
    return r;
}

struct kp_exec_config *kp_exec_config_free(struct kp_exec_config *c)
{
    if (!c)
        return NULL;
    kp_free(c->api_version);
    kp_free(c->command);
    kp_free(c->install_hint);
    kp_strv_done(&c->args);
    kp_strv_done(&c->env);
    kp_free(c);
    return NULL;
}

int kp_exec_config_dup(const struct kp_exec_config *src, struct kp_exec_config **ret)
{
    struct kp_exec_config *c;
    int r = -ENOMEM;

    c = kp_calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->provide_cluster_info = src->provide_cluster_info;
    c->interactive = src->interactive;
    if (kp_strset(&c->api_version, src->api_version) < 0 ||
        kp_strset(&c->command, src->command) < 0 ||
        kp_strset(&c->install_hint, src->install_hint) < 0)
        goto fail;
    for (size_t i = 0; i < src->args.n; i++)
        if ((r = kp_strv_push(&c->args, src->args.v[i])) < 0)
            goto fail;
    for (size_t i = 0; i < src->env.n; i++)
        if ((r = kp_strv_push(&c->env, src->env.v[i])) < 0)
            goto fail;
    *ret = c;
    return 0;
fail:
    kp_exec_config_free(c);
    return -ENOMEM;
}

static int parse_exec(const struct kp_yaml_node *en, struct kp_exec_config **ret,
                      struct kp_yaml_error *err)
{
    struct kp_exec_config *c = NULL;
    const struct kp_yaml_node *n, *cmd_node = NULL, *mode_node = NULL;
    const char *api = NULL, *cmd = NULL, *hint = NULL, *mode = NULL;
    bool v1;
    size_t i;
    int r;

    if (kp_yaml_type(en) != KP_YAML_MAPPING) {
        kp_yaml_errorf(err, en, NULL, "exec: expected a mapping, got %s", kp_yaml_describe(en));
        return -KP_EPARSE;
    }
    c = kp_calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    if ((r = opt_str(en, "apiVersion", &api, &n, err)) < 0 ||
        (r = opt_str(en, "command", &cmd, &cmd_node, err)) < 0 ||
        (r = opt_str(en, "installHint", &hint, NULL, err)) < 0 ||
        (r = opt_str(en, "interactiveMode", &mode, &mode_node, err)) < 0 ||
        (r = opt_bool(en, "provideClusterInfo", &c->provide_cluster_info, err)) < 0)
        goto out;
    if (!api || (strcmp(api, "client.authentication.k8s.io/v1") != 0 &&
                 strcmp(api, "client.authentication.k8s.io/v1beta1") != 0)) {
        kp_yaml_errorf(err, n ? n : en, NULL,
                       "exec: apiVersion must be client.authentication.k8s.io/v1 or /v1beta1");
        r = -KP_EPARSE;
        goto out;
    }
    v1 = strcmp(api, "client.authentication.k8s.io/v1") == 0;
    if (!cmd || !*cmd) {
        kp_yaml_errorf(err, en, NULL, "exec: command is required");
        r = -KP_EPARSE;
        goto out;
    }
    if (!mode) {
        if (v1) {
            kp_yaml_errorf(err, en, NULL, "exec: interactiveMode is required for %s", api);
            r = -KP_EPARSE;
            goto out;
        }
        c->interactive = KP_EXEC_INTERACTIVE_IF_AVAILABLE;
    } else if (strcmp(mode, "Never") == 0) {
        c->interactive = KP_EXEC_INTERACTIVE_NEVER;
    } else if (strcmp(mode, "IfAvailable") == 0) {
        c->interactive = KP_EXEC_INTERACTIVE_IF_AVAILABLE;
    } else if (strcmp(mode, "Always") == 0) {
        c->interactive = KP_EXEC_INTERACTIVE_ALWAYS;
    } else {
        kp_yaml_errorf(err, mode_node, NULL,
                       "exec: interactiveMode must be Never, IfAvailable or Always");
        r = -KP_EPARSE;
        goto out;
    }
    r = -ENOMEM;
    if (kp_strset(&c->api_version, api) < 0 || kp_strset(&c->install_hint, hint) < 0)
        goto out;
    /* A relative command with a '/' is relative to the kubeconfig (as in client-go); a bare
     * name is looked up in PATH when it runs. */
    if (strchr(cmd, '/'))
        r = resolve_path(cmd_node, cmd, &c->command);
    else
        r = kp_strset(&c->command, cmd);
    if (r < 0)
        goto out;

    n = kp_yaml_map_get(en, "args");
    if (n && !kp_yaml_is_null(n) && kp_yaml_type(n) != KP_YAML_SEQUENCE) {
        kp_yaml_errorf(err, n, NULL, "exec: args: expected a sequence, got %s",
                       kp_yaml_describe(n));
        r = -KP_EPARSE;
        goto out;
    }
    for (i = 0; i < kp_yaml_len(n); i++) {
        const struct kp_yaml_node *a = kp_yaml_seq_at(n, i);
        const char *s;

        if (kp_yaml_get_cstr(a, &s) < 0) {
            kp_yaml_errorf(err, a, NULL, "exec: args[%zu]: expected a string, got %s", i,
                           kp_yaml_describe(a));
            r = -KP_EPARSE;
            goto out;
        }
        r = kp_strv_push(&c->args, s);
        if (r < 0)
            goto out;
    }
    n = kp_yaml_map_get(en, "env");
    if (n && !kp_yaml_is_null(n) && kp_yaml_type(n) != KP_YAML_SEQUENCE) {
        kp_yaml_errorf(err, n, NULL, "exec: env: expected a sequence, got %s", kp_yaml_describe(n));
        r = -KP_EPARSE;
        goto out;
    }
    for (i = 0; i < kp_yaml_len(n); i++) {
        const struct kp_yaml_node *e = kp_yaml_seq_at(n, i);
        const char *name = NULL, *value = NULL;
        char *entry;

        if (kp_yaml_type(e) != KP_YAML_MAPPING) {
            kp_yaml_errorf(err, e, NULL, "exec: env[%zu]: expected a mapping, got %s", i,
                           kp_yaml_describe(e));
            r = -KP_EPARSE;
            goto out;
        }
        if ((r = opt_str(e, "name", &name, NULL, err)) < 0 ||
            (r = opt_str(e, "value", &value, NULL, err)) < 0)
            goto out;
        if (!name || !*name || strchr(name, '=')) {
            kp_yaml_errorf(err, e, NULL, "exec: env[%zu]: name must be set and hold no '='", i);
            r = -KP_EPARSE;
            goto out;
        }
        entry = kp_strjoin(name, "=", value ? value : "", (char *)NULL);
        if (!entry) {
            r = -ENOMEM;
            goto out;
        }
        r = kp_strv_consume(&c->env, entry);
        if (r < 0)
            goto out;
    }
    *ret = c;
    c = NULL;
    r = 0;
out:
    if (r == -ENOMEM)
        kp_yaml_errorf(err, en, NULL, "out of memory");
    kp_exec_config_free(c);
    return r;
}

struct kp_kubeconfig_rest *kp_kubeconfig_rest_free(struct kp_kubeconfig_rest *rest)
{
    if (!rest)
        return NULL;
    kp_free(rest->context);
    kp_free(rest->cluster);
    kp_free(rest->user);
    kp_free(rest->server);
    kp_free(rest->tls_server_name);
    kp_free(rest->proxy_url);
    kp_free(rest->namespace);
    kp_free(rest->ca_pem);
    kp_free(rest->cert_pem);
    kp_secret_free(rest->key_pem);
    kp_secret_free(rest->token);
    kp_free(rest->token_file);
    kp_exec_config_free(rest->exec);
    kp_free(rest);
    return NULL;
}

static int resolve_cluster(const struct kp_yaml_node *entry, const char *name,
                           enum kp_kubeconfig_flags flags, struct kp_kubeconfig_rest *rest,
                           struct kp_yaml_error *err)
{
    const struct kp_yaml_node *c = kp_yaml_map_get(entry, "cluster");
    const char *server = NULL, *sni = NULL, *proxy = NULL;
    int r;

    if ((r = opt_str(c, "server", &server, NULL, err)) < 0 ||
        (r = opt_str(c, "tls-server-name", &sni, NULL, err)) < 0 ||
        (r = opt_str(c, "proxy-url", &proxy, NULL, err)) < 0 ||
        (r = opt_bool(c, "insecure-skip-tls-verify", &rest->insecure_skip_tls_verify, err)) < 0)
        return r;
    if (!server || !*server) {
        kp_yaml_errorf(err, c ? c : entry, NULL, "cluster \"%s\" has no server", name);
        return -KP_EPARSE;
    }
    if (kp_strset(&rest->server, server) < 0 || kp_strset(&rest->tls_server_name, sni) < 0 ||
        kp_strset(&rest->proxy_url, proxy) < 0)
        return -ENOMEM;
    return load_bytes(c, "certificate-authority-data", "certificate-authority", KP_MAX_PEM_FILE,
                      flags, &rest->ca_pem, &rest->ca_pem_len, err);
}

static int resolve_user(const struct kp_yaml_node *entry, const char *name,
                        enum kp_kubeconfig_flags flags, struct kp_kubeconfig_rest *rest,
                        struct kp_yaml_error *err)
{
    static const char *const unsupported[][2] = {
        {"auth-provider", "auth-provider plugins are not supported; use an exec plugin"},
        {"username", "basic authentication is not supported"},
        {"password", "basic authentication is not supported"},
        {"as", "impersonation is not supported"},
        {"as-uid", "impersonation is not supported"},
        {"as-groups", "impersonation is not supported"},
        {"as-user-extra", "impersonation is not supported"},
    };
    const struct kp_yaml_node *u = kp_yaml_map_get(entry, "user"), *n, *tf_node = NULL;
    const char *token = NULL, *token_file = NULL;
    char *key = NULL;
    size_t key_len = 0, i;
    int r;

    for (i = 0; i < KP_ARRAY_SIZE(unsupported); i++) {
        n = kp_yaml_map_get(u, unsupported[i][0]);
        if (n && !kp_yaml_is_null(n)) {
            kp_yaml_errorf(err, n, NULL, "user \"%s\": %s: %s", name, unsupported[i][0],
                           unsupported[i][1]);
            return -KP_EPARSE;
        }
    }
    if ((r = opt_str(u, "token", &token, NULL, err)) < 0 ||
        (r = opt_str(u, "tokenFile", &token_file, &tf_node, err)) < 0)
        return r;
    if (token && *token && (r = kp_secret_new(token, strlen(token), &rest->token)) < 0)
        return r;
    if (token_file && *token_file && (r = resolve_path(tf_node, token_file, &rest->token_file)) < 0)
        return r;
    r = load_bytes(u, "client-certificate-data", "client-certificate", KP_MAX_PEM_FILE, flags,
                   &rest->cert_pem, &rest->cert_pem_len, err);
    if (r < 0)
        return r;
    r = load_bytes(u, "client-key-data", "client-key", KP_MAX_PEM_FILE, flags, &key, &key_len, err);
    if (r < 0)
        return r;
    if (!rest->cert_pem != !key) {
        kp_yaml_errorf(err, u, NULL, "user \"%s\": %s without %s", name,
                       key ? "client-key" : "client-certificate",
                       key ? "client-certificate" : "client-key");
        r = -KP_EPARSE;
        goto out;
    }
    if (key) {
        r = kp_secret_new(key, key_len, &rest->key_pem);
        if (r < 0)
            goto out;
    }
    n = kp_yaml_map_get(u, "exec");
    if (n && !kp_yaml_is_null(n))
        r = parse_exec(n, &rest->exec, err);
out:
    if (key)
        kp_wipe(key, key_len);
    kp_free(key);
    return r;
}

int kp_kubeconfig_resolve_cluster(const struct kp_kubeconfig *kc, const char *cluster,
                                  enum kp_kubeconfig_flags flags, struct kp_kubeconfig_rest **ret,
                                  struct kp_yaml_error *reterr)
{
    const char *first_file = kc->ndocs ? kp_yaml_doc_file(kc->docs[0]) : "kubeconfig";
    const struct kp_yaml_node *entry = NULL;
    struct kp_kubeconfig_rest *rest;
    int r;

    if (!cluster) {
        /* The first cluster by name: a map has no order, a sort does. */
        const char *name;
        void *value;
        size_t it = 0;

        while (kp_map_next(kc->clusters, &it, &name, &value))
            if (!cluster || strcmp(name, cluster) < 0) {
                cluster = name;
                entry = value;
            }
        if (!cluster) {
            kp_yaml_errorf(reterr, NULL, first_file, "no cluster is defined");
            return -ENOENT;
        }
    } else if (!(entry = kp_map_get(kc->clusters, cluster))) {
        kp_yaml_errorf(reterr, NULL, first_file, "cluster \"%s\" is not defined", cluster);
        return -ENOENT;
    }
    rest = kp_calloc(1, sizeof(*rest));
    if (!rest)
        return -ENOMEM;
    if (kp_strset(&rest->cluster, cluster) < 0 || kp_strset(&rest->namespace, "default") < 0) {
        kp_kubeconfig_rest_free(rest);
        return -ENOMEM;
    }
    if ((r = resolve_cluster(entry, cluster, flags, rest, reterr)) < 0) {
        kp_kubeconfig_rest_free(rest);
        return r;
    }
    *ret = rest;
    return 0;
}

int kp_kubeconfig_resolve(const struct kp_kubeconfig *kc, const char *context,
                          enum kp_kubeconfig_flags flags, struct kp_kubeconfig_rest **ret,
                          struct kp_yaml_error *reterr)
{
    struct kp_kubeconfig_rest *rest = NULL;
    const struct kp_yaml_node *ctx_entry, *ctx, *cl_entry, *us_entry = NULL, *cl_node = NULL;
    const struct kp_yaml_node *us_node = NULL;
    const char *cluster = NULL, *user = NULL, *ns = NULL;
    const char *first_file = kc->ndocs ? kp_yaml_doc_file(kc->docs[0]) : "kubeconfig";
    int r;

    if (!context) {
        context = kp_kubeconfig_current_context(kc);
        if (!context) {
            kp_yaml_errorf(reterr, NULL, first_file,
                           "no context given and current-context is not set");
            r = -ENOENT;
            goto out;
        }
    }
    ctx_entry = kp_map_get(kc->contexts, context);
    if (!ctx_entry) {
        if (context == kp_kubeconfig_current_context(kc))
            kp_yaml_errorf(reterr, kc->current, NULL,
                           "current-context names context \"%s\", which is not defined", context);
        else
            kp_yaml_errorf(reterr, NULL, first_file, "context \"%s\" is not defined", context);
        r = -ENOENT;
        goto out;
    }
    ctx = kp_yaml_map_get(ctx_entry, "context");
    if ((r = opt_str(ctx, "cluster", &cluster, &cl_node, reterr)) < 0 ||
        (r = opt_str(ctx, "user", &user, &us_node, reterr)) < 0 ||
        (r = opt_str(ctx, "namespace", &ns, NULL, reterr)) < 0)
        goto out;
    if (!cluster || !*cluster) {
        kp_yaml_errorf(reterr, ctx ? ctx : ctx_entry, NULL, "context \"%s\" names no cluster",
                       context);
        r = -KP_EPARSE;
        goto out;
    }
    cl_entry = kp_map_get(kc->clusters, cluster);
    if (!cl_entry) {
        kp_yaml_errorf(reterr, cl_node, NULL,
                       "context \"%s\" names cluster \"%s\", which is not defined", context,
                       cluster);
        r = -ENOENT;
        goto out;
    }
    if (user && *user) {
        us_entry = kp_map_get(kc->users, user);
        if (!us_entry) {
            kp_yaml_errorf(reterr, us_node, NULL,
                           "context \"%s\" names user \"%s\", which is not defined", context, user);
            r = -ENOENT;
            goto out;
        }
    }
    rest = kp_calloc(1, sizeof(*rest));
    if (!rest) {
        r = -ENOMEM;
        goto out;
    }
    if (kp_strset(&rest->context, context) < 0 || kp_strset(&rest->cluster, cluster) < 0 ||
        kp_strset(&rest->user, us_entry ? user : NULL) < 0 ||
        kp_strset(&rest->namespace, ns && *ns ? ns : "default") < 0) {
        r = -ENOMEM;
        goto out;
    }
    r = resolve_cluster(cl_entry, cluster, flags, rest, reterr);
    if (r < 0)
        goto out;
    if (us_entry) {
        r = resolve_user(us_entry, user, flags, rest, reterr);
        if (r < 0)
            goto out;
    }
    *ret = rest;
    rest = NULL;
    r = 0;
out:
    if (r == -ENOMEM)
        kp_yaml_errorf(reterr, NULL, first_file, "out of memory");
    kp_kubeconfig_rest_free(rest);
    return r;
}
