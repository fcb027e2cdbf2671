/* DESIGN: shared integration-test helpers (see kp-lab.h). */
#include "kp-lab.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/spawn.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "provider/ssh/obj-kpssh.h"
#include "k8s/status.h"
#include "k8s/store.h"

char *kp_lab_read_file(const char *path, size_t *ret_len)
{
    struct kp_buf b = KP_BUF_INIT(64u << 20);
    char chunk[8192];
    char *out;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    for (;;) {
        ssize_t k = read(fd, chunk, sizeof(chunk));

        if (k < 0 && errno == EINTR)
            continue;
        assert_true(k >= 0);
        if (k == 0)
            break;
        assert_int_equal(kp_buf_append(&b, chunk, (size_t)k), 0);
    }
    close(fd);
    out = kp_buf_steal(&b, ret_len);
    assert_non_null(out);
    return out;
}

static char *kp_lab_env_in(const char *env, const char *name)
{
    size_t n = strlen(name);

    for (const char *line = env; line && *line;) {
        const char *end = strchr(line, '\n');
        const char *v = kp_startswith(line, "export ");

        if (v && strncmp(v, name, n) == 0 && v[n] == '=') {
            const char *val = v + n + 1, *stop = end ? end : val + strlen(val);
            char *s;

            /* up.sh may single-quote values. */
            if (stop > val + 1 && *val == '\'' && stop[-1] == '\'') {
                val++;
                stop--;
            }
            s = kp_strndup(val, (size_t)(stop - val));
            assert_non_null(s);
            return s;
        }
        line = end ? end + 1 : NULL;
    }
    return NULL;
}

char *kp_lab_env(const struct kp_lab *lab, const char *name)
{
    char path[4096], *env, *v;

    snprintf(path, sizeof(path), "%s/env.sh", lab->dir);
    env = kp_lab_read_file(path, NULL);
    v = kp_lab_env_in(env, name);
    kp_free(env);
    return v;
}

char *kp_lab_env_need(const struct kp_lab *lab, const char *name)
{
    char *v = kp_lab_env(lab, name);

    if (!v)
        fail_msg("%s/env.sh does not set %s: is the lab up (tests/lab/up.sh)?", lab->dir, name);
    return v;
}

void kp_lab_load(struct kp_lab *lab)
{
    const char *dir = getenv("KPSSH_LAB_DIR");
    char *path, *key;
    size_t key_len;

    memset(lab, 0, sizeof(*lab));
    if (!dir)
        fail_msg("KPSSH_LAB_DIR is not set: run lab tests through ctest -L integration");
    lab->dir = kp_strdup(dir);
    assert_non_null(lab->dir);
    lab->api_url = kp_lab_env_need(lab, "KPSSH_LAB_API_URL");
    lab->etcd_url = kp_lab_env_need(lab, "KPSSH_LAB_ETCD_URL");
    lab->kubectl = kp_lab_env_need(lab, "KPSSH_LAB_KUBECTL");
    lab->bin = kp_lab_env_need(lab, "KPSSH_LAB_BIN");
    lab->host_sh = kp_lab_env_need(lab, "KPSSH_LAB_HOST_SH");
    lab->gateway = kp_lab_env_need(lab, "KPSSH_LAB_GATEWAY");
    lab->host_timeout_usec = 300 * KP_USEC_PER_SEC;
    path = kp_lab_env_need(lab, "KPSSH_LAB_CA");
    lab->ca = kp_lab_read_file(path, &lab->ca_len);
    kp_free(path);
    path = kp_lab_env_need(lab, "KPSSH_LAB_ADMIN_CERT");
    lab->cert = kp_lab_read_file(path, &lab->cert_len);
    kp_free(path);
    path = kp_lab_env_need(lab, "KPSSH_LAB_ADMIN_KEY");
    key = kp_lab_read_file(path, &key_len);
    assert_int_equal(kp_secret_new(key, key_len, &lab->key), 0);
    kp_wipe(key, key_len);
    kp_free(key);
    kp_free(path);
}

void kp_lab_done(struct kp_lab *lab)
{
    kp_free(lab->dir);
    kp_free(lab->api_url);
    kp_free(lab->etcd_url);
    kp_free(lab->kubectl);
    kp_free(lab->bin);
    kp_free(lab->host_sh);
    kp_free(lab->gateway);
    kp_free(lab->ca);
    kp_free(lab->cert);
    kp_secret_free(lab->key);
    memset(lab, 0, sizeof(*lab));
}

struct kp_client *kp_lab_admin_client(const struct kp_lab *lab)
{
    struct kp_transport_opts o = {
        .server = lab->api_url,
        .ca_pem = lab->ca,
        .ca_pem_len = lab->ca_len,
        .cert_pem = lab->cert,
        .cert_pem_len = lab->cert_len,
        .key_pem = lab->key,
    };
    struct kp_client *c = NULL;

    assert_int_equal(kp_client_new(&o, &c), 0);
    return c;
}

json_t *kp_lab_json(const char *fmt, ...)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    struct kp_json_error err;
    json_t *v = NULL;
    va_list ap;

    va_start(ap, fmt);
    assert_int_equal(kp_buf_vprintf(&b, fmt, ap), 0);
    va_end(ap);
    if (kp_json_parse(kp_buf_str(&b), b.len, b.max, 0, &v, &err) < 0)
        fail_msg("bad test JSON (%s): %s", err.text, kp_buf_str(&b));
    kp_buf_done(&b);
    return v;
}

void kp_lab_check(int r, const struct kp_error *e, const char *what)
{
    if (r < 0)
        fail_msg("%s: %s (%d) code=%d reason=%s message=%s", what, kp_strerror(r), r,
                 e ? e->code : 0, e && e->reason ? e->reason : "-",
                 e && e->message ? e->message : "-");
}

void kp_lab_namespace(struct kp_client *c, const char *prefix, char *out, size_t size)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *ns;
    int r;

    snprintf(out, size, "%s-%ld", prefix, (long)getpid());
    ns = kp_lab_json(
        "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", out);
    r = kp_client_create(c, &KP_RES_NAMESPACE, NULL, ns, NULL, &e);
    kp_json_unref(ns);
    if (r != -EEXIST)
        kp_lab_check(r, &e, "create namespace");
    for (int i = 0; i < 300; i++) {
        json_t *sa = NULL;

        kp_error_done(&e);
        r = kp_client_get(c, &KP_RES_SERVICEACCOUNT, out, "default", &sa, &e);
        kp_json_unref(sa);
        if (r != -ENOENT)
            break;
        kp_sleep_usec(100 * 1000);
    }
    kp_lab_check(r, &e, "default serviceaccount");
    kp_error_done(&e);
}

void kp_lab_setup_namespace(struct kp_lab *lab, const char *prefix, char *ns, size_t size)
{
    struct kp_client *c;

    kp_lab_load(lab);
    c = kp_lab_admin_client(lab);
    kp_lab_namespace(c, prefix, ns, size);
    kp_client_free(c);
}

void kp_lab_teardown_namespace(struct kp_lab *lab, const char *ns)
{
    struct kp_client *c = kp_lab_admin_client(lab);
    struct kp_delete_opts d = {.propagation_policy = "Background"};

    if (kp_client_delete(c, &KP_RES_NAMESPACE, NULL, ns, &d, NULL) < 0)
        fprintf(stderr, "# could not delete namespace %s (the lab is torn down anyway)\n", ns);
    kp_client_free(c);
    kp_lab_done(lab);
}

char *kp_lab_base64(const void *p, size_t n)
{
    struct kp_buf b = KP_BUF_INIT(64u << 20);
    char *s;

    assert_int_equal(kp_base64_encode(p, n, 0, &b), 0);
    s = kp_buf_steal(&b, NULL);
    assert_non_null(s);
    return s;
}

void kp_lab_set(json_t *o, const char *const *path, const char *v)
{
    assert_int_equal(kp_json_patch_set_str(o, path, v), 0);
}

json_t *kp_lab_obj_new(const char *api_version, const char *kind, const char *ns, const char *name)
{
    json_t *o = NULL;

    assert_int_equal(kp_json_patch_new(&o), 0);
    kp_lab_set(o, KP_JSON_PATH("apiVersion"), api_version);
    kp_lab_set(o, KP_JSON_PATH("kind"), kind);
    kp_lab_set(o, KP_JSON_PATH("metadata", "name"), name);
    if (ns)
        kp_lab_set(o, KP_JSON_PATH("metadata", "namespace"), ns);
    return o;
}

void kp_lab_create_or_replace(struct kp_client *c, const struct kp_resource *res, const char *ns,
                              json_t *obj)
{
    struct kp_error e = KP_ERROR_INIT;
    const char *name = NULL;
    int r;

    assert_int_equal(kp_json_pathv_str(obj, KP_JSON_PATH("metadata", "name"), &name), 0);
    r = kp_client_delete(c, res, ns, name, NULL, &e);
    if (r != -ENOENT)
        kp_lab_check(r, &e, "delete old object");
    for (int i = 0; i < 100; i++) { /* until the old one is gone */
        kp_error_done(&e);
        r = kp_client_create(c, res, ns, obj, NULL, &e);
        if (r != -EEXIST && r != -KP_ECONFLICT)
            break;
        if (i == 20) {
            json_t *p = kp_lab_json("{\"metadata\":{\"finalizers\":null}}");

            if (kp_client_patch(c, res, ns, name, NULL, KP_PATCH_MERGE, p, NULL, NULL) < 0)
                print_message("# cannot let go of %s's finalizers\n", name);
            kp_json_unref(p);
        }
        kp_sleep_usec(100 * KP_USEC_PER_MSEC);
    }
    kp_lab_check(r, &e, name);
    kp_error_done(&e);
    kp_json_unref(obj);
}

struct kp_informer *kp_lab_informer_new(struct kp_client *c, const struct kp_resource *res,
                                        const char *ns, kp_project_fn project)
{
    struct kp_informer_opts o = {.res = res, .project = project, .ns = ns};
    struct kp_informer *inf = NULL;

    assert_int_equal(kp_informer_new(c, &o, &inf), 0);
    return inf;
}

struct kp_informer *kp_lab_informer(struct kp_client *c, const struct kp_resource *res,
                                    const char *ns, kp_project_fn project)
{
    struct kp_informer *inf = kp_lab_informer_new(c, res, ns, project);

    assert_int_equal(kp_informer_start(inf), 0);
    assert_int_equal(kp_informer_wait_synced(inf, 60 * KP_USEC_PER_SEC), 0);
    return inf;
}

bool kp_lab_cached(struct kp_informer *inf, const char *key, const char *rv, uint64_t timeout_usec)
{
    struct kp_deadline dl = kp_deadline_in(timeout_usec);

    for (;;) {
        struct kp_entry *e = NULL;
        bool found =
            kp_store_get(kp_informer_store(inf), key, &e) == 0 && (!rv || kp_streq(e->rv, rv));

        kp_entry_unref(e);
        if (found)
            return true;
        if (kp_deadline_expired(dl))
            return false;
        kp_sleep_usec(25 * KP_USEC_PER_MSEC);
    }
}

void kp_lab_wait_cached(struct kp_informer *inf, const char *key)
{
    if (!kp_lab_cached(inf, key, NULL, 15 * KP_USEC_PER_SEC))
        fail_msg("%s never reached the cache", key);
}

int kp_lab_run(const char *const *argv, uint64_t timeout_usec, enum kp_lab_run_flags flags,
               char **ret_out)
{
    struct kp_spawn_opts o = {
        .argv = argv, .timeout_usec = timeout_usec, .max_stdout = 1 << 20, .stderr_tail = 8192};
    struct kp_spawn_result res;
    int st;

    assert_int_equal(kp_spawn_run(&o, &res), 0);
    st = res.end == KP_SPAWN_EXITED ? res.status : -1;
    if (st != 0 && (flags & KP_LAB_RUN_MUST))
        fail_msg("%s %s failed (end %d status %d): %s", argv[0], argv[1] ? argv[1] : "",
                 (int)res.end, res.status, kp_buf_str(&res.err));
    if (st != 0 && !(flags & KP_LAB_RUN_QUIET))
        print_message("# %s %s: status %d: %s\n", argv[0], argv[1] ? argv[1] : "", st,
                      kp_buf_str(&res.err));
    if (ret_out) {
        *ret_out = kp_strdup(kp_buf_str(&res.out));
        assert_non_null(*ret_out);
    }
    kp_spawn_result_done(&res);
    return st;
}

int kp_lab_host_sh(const struct kp_lab *lab, const char *verb, unsigned i)
{
    char idx[16];
    const char *argv[] = {lab->host_sh, verb, idx, NULL};

    (void)snprintf(idx, sizeof(idx), "%u", i);
    return kp_lab_run(argv, lab->host_timeout_usec, 0, NULL);
}

int kp_lab_host_exec(const struct kp_lab *lab, unsigned i, const char *cmd)
{
    char idx[16];
    const char *argv[] = {lab->host_sh, "exec", idx, "sh", "-c", cmd, NULL};

    (void)snprintf(idx, sizeof(idx), "%u", i);
    return kp_lab_run(argv, lab->host_timeout_usec, KP_LAB_RUN_QUIET, NULL);
}

char *kp_lab_host_ip(const struct kp_lab *lab, unsigned i)
{
    const char *dot = strrchr(lab->gateway, '.');
    char buf[64];
    char *s;

    assert_non_null(dot);
    assert_true(
        snprintf(buf, sizeof(buf), "%.*s.%u", (int)(dot - lab->gateway), lab->gateway, 10 + i) > 0);
    s = kp_strdup(buf);
    assert_non_null(s);
    return s;
}

void kp_lab_apply_crds(const struct kp_lab *lab)
{
    const char *repo = getenv("KP_REPO") ? getenv("KP_REPO") : ".";
    char *script = kp_strjoin(repo, "/tests/lab/crds.sh", (const char *)NULL);
    const char *apply[] = {script, "apply", NULL};

    (void)lab; /* the script reads the lab from KPSSH_LAB_DIR, as this process does */
    assert_non_null(script);
    kp_lab_run(apply, 300 * KP_USEC_PER_SEC, KP_LAB_RUN_MUST, NULL);
    kp_free(script);
}

char *kp_lab_admin_token(const struct kp_lab *lab)
{
    char *path = kp_lab_env_need(lab, "KPSSH_LAB_ADMIN_TOKEN_FILE");
    char *token = kp_lab_read_file(path, NULL);

    token[strcspn(token, "\r\n")] = '\0';
    kp_free(path);
    return token;
}

void kp_lab_ensure_namespace(struct kp_client *c, const char *ns)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *o = kp_lab_json(
        "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", ns);
    int r = kp_client_create(c, &KP_RES_NAMESPACE, NULL, o, NULL, &e);

    if (r != -EEXIST)
        kp_lab_check(r, &e, "namespace");
    kp_error_done(&e);
    kp_json_unref(o);
}

void kp_lab_key_secret(const struct kp_lab *lab, struct kp_client *c, const char *ns,
                       const char *name)
{
    char *path = kp_lab_env_need(lab, "KPSSH_LAB_SSH_KEY");
    char *pem = kp_lab_read_file(path, NULL);
    json_t *o = kp_lab_obj_new("v1", "Secret", ns, name);

    kp_lab_set(o, KP_JSON_PATH("stringData", "privateKey"), pem);
    kp_wipe(pem, strlen(pem));
    kp_free(pem);
    kp_free(path);
    kp_lab_create_or_replace(c, &KP_RES_SECRET, ns, o);
}

struct kp_entry *kp_lab_sshhost_get(struct kp_client *c, const char *ns, const char *name)
{
    struct kp_error e = KP_ERROR_INIT;
    struct kp_entry *h = NULL;
    json_t *o = NULL;

    kp_lab_check(kp_client_get(c, &KP_RES_SSHHOST, ns, name, &o, &e), &e, "get host");
    assert_int_equal(kp_sshhost_project(o, &h), 0);
    kp_json_unref(o);
    kp_error_done(&e);
    return h;
}

/* --- events -------------------------------------------------------------------------------- */

struct ev_count {
    const char *name, *reason;
    unsigned n;
};

static int ev_page(const struct kp_list_page *page, void *ud)
{
    struct ev_count *ec = ud;

    for (size_t i = 0; i < kp_json_array_size(page->items); i++) {
        json_t *it = kp_json_array_at(page->items, i);
        const char *name = NULL, *reason = NULL;

        if (kp_json_pathv_str(it, KP_JSON_PATH("regarding", "name"), &name) == 0 &&
            kp_json_pathv_str(it, KP_JSON_PATH("reason"), &reason) == 0 &&
            kp_streq(name, ec->name) && kp_streq(reason, ec->reason))
            ec->n++;
    }
    return 0;
}

unsigned kp_lab_events_count(struct kp_client *c, const char *ns, const char *name,
                             const char *reason)
{
    struct ev_count ec = {.name = name, .reason = reason};
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_check(kp_client_list(c, &KP_RES_EVENT, ns, NULL, ev_page, &ec, NULL, &e), &e,
                 "list events");
    kp_error_done(&e);
    return ec.n;
}
