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
#include "base/buf.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/status.h"

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

static char *kp_lab_need(const struct kp_lab *lab, const char *name)
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
    lab->api_url = kp_lab_need(lab, "KPSSH_LAB_API_URL");
    lab->etcd_url = kp_lab_need(lab, "KPSSH_LAB_ETCD_URL");
    lab->kubectl = kp_lab_need(lab, "KPSSH_LAB_KUBECTL");
    lab->bin = kp_lab_need(lab, "KPSSH_LAB_BIN");
    path = kp_lab_need(lab, "KPSSH_LAB_CA");
    lab->ca = kp_lab_read_file(path, &lab->ca_len);
    kp_free(path);
    path = kp_lab_need(lab, "KPSSH_LAB_ADMIN_CERT");
    lab->cert = kp_lab_read_file(path, &lab->cert_len);
    kp_free(path);
    path = kp_lab_need(lab, "KPSSH_LAB_ADMIN_KEY");
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
