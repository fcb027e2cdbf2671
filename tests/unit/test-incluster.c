/* DESIGN: unit tests for k8s/incluster.c.
 *
 * A fake root directory (under $TMPDIR, made with mkdtemp) holds the service-account files;
 * tests rewrite the token to check that kp_token_file notices rotation. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "k8s/incluster.h"
#include "kp-test.h"
#include "yaml/yaml.h"

static char root[256];

static void write_file(const char *rel, const char *content)
{
    char p[512];
    FILE *f;

    assert_true(snprintf(p, sizeof(p), "%s%s/%s", root, KP_INCLUSTER_SA_DIR, rel) < (int)sizeof(p));
    f = fopen(p, "we");
    assert_non_null(f);
    assert_int_equal(fputs(content, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void remove_file(const char *rel)
{
    char p[512];

    assert_true(snprintf(p, sizeof(p), "%s%s/%s", root, KP_INCLUSTER_SA_DIR, rel) < (int)sizeof(p));
    (void)unlink(p);
}

static int setup(void **state)
{
    char p[512];
    const char *tmp = getenv("TMPDIR");

    (void)state;
    assert_true(snprintf(root, sizeof(root), "%s/kp-incluster-XXXXXX", tmp ? tmp : "/tmp") <
                (int)sizeof(root));
    assert_non_null(mkdtemp(root));
    /* mkdir -p root/var/run/secrets/kubernetes.io/serviceaccount */
    {
        const char *parts[] = {"/var", "/var/run", "/var/run/secrets",
                               "/var/run/secrets/kubernetes.io", KP_INCLUSTER_SA_DIR};
        for (size_t i = 0; i < KP_ARRAY_SIZE(parts); i++) {
            assert_true(snprintf(p, sizeof(p), "%s%s", root, parts[i]) < (int)sizeof(p));
            assert_int_equal(mkdir(p, 0700), 0);
        }
    }
    write_file("token", "tok-0123456789abcdef\n");
    write_file("ca.crt", "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n");
    write_file("namespace", "kpssh-system\n");
    return 0;
}

static int teardown(void **state)
{
    const char *parts[] = {KP_INCLUSTER_SA_DIR,
                           "/var/run/secrets/kubernetes.io",
                           "/var/run/secrets",
                           "/var/run",
                           "/var",
                           ""};
    char p[512];

    (void)state;
    remove_file("token");
    remove_file("ca.crt");
    remove_file("namespace");
    for (size_t i = 0; i < KP_ARRAY_SIZE(parts); i++) {
        if (snprintf(p, sizeof(p), "%s%s", root, parts[i]) < (int)sizeof(p))
            (void)rmdir(p);
    }
    return 0;
}

static void test_load(void **state)
{
    struct kp_incluster_config *c = NULL;
    struct kp_yaml_error err = {0};

    (void)state;
    assert_int_equal(kp_incluster_load(root, "10.96.0.1", "443", &c, &err), 0);
    assert_string_equal(c->server, "https://10.96.0.1:443");
    assert_string_equal(c->namespace, "kpssh-system");
    assert_non_null(strstr(c->ca_pem, "BEGIN CERTIFICATE"));
    assert_true(kp_endswith(c->token_file, "/serviceaccount/token"));
    kp_incluster_config_free(c);

    c = NULL;
    assert_int_equal(kp_incluster_load(root, "fd00::1", "6443", &c, &err), 0);
    assert_string_equal(c->server, "https://[fd00::1]:6443");
    kp_incluster_config_free(c);

    c = NULL;
    assert_int_equal(kp_incluster_load(root, NULL, "443", &c, &err), -ENOENT);
    assert_string_equal(
        err.text, "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
    assert_int_equal(kp_incluster_load(root, "h", "0", &c, &err), -KP_EPARSE);
    assert_int_equal(kp_incluster_load(root, "h", "65536", &c, &err), -KP_EPARSE);
    assert_int_equal(kp_incluster_load(root, "h", "44x", &c, &err), -KP_EPARSE);
    assert_int_equal(kp_incluster_load(root, "h/x", "443", &c, &err), -KP_EPARSE);
    assert_null(c);

    remove_file("namespace");
    assert_int_equal(kp_incluster_load(root, "h", "443", &c, &err), 0);
    assert_string_equal(c->namespace, "default");
    kp_incluster_config_free(c);
    c = NULL;
    write_file("namespace", "kpssh-system\n");

    remove_file("ca.crt");
    assert_int_equal(kp_incluster_load(root, "h", "443", &c, &err), -ENOENT);
    assert_non_null(strstr(err.text, "ca.crt: cannot read the cluster CA"));
    write_file("ca.crt", "x\n");
    write_file("token", "  \n");
    assert_int_equal(kp_incluster_load(root, "h", "443", &c, &err), -KP_EPARSE);
    assert_null(c);
    write_file("token", "tok-0123456789abcdef\n");
}

static void test_token_rotation(void **state)
{
    struct kp_token_file *tf = NULL;
    struct kp_secret *s = NULL;
    char p[512];

    (void)state;
    assert_true(snprintf(p, sizeof(p), "%s%s/token", root, KP_INCLUSTER_SA_DIR) < (int)sizeof(p));
    assert_int_equal(kp_token_file_new(p, &tf), 0);
    assert_int_equal(kp_token_file_token_fn(tf, false, &s), 0);
    assert_string_equal(kp_secret_reveal(s), "tok-0123456789abcdef");
    s = kp_secret_free(s);

    /* A rotated token (different size) is seen on the next get. */
    write_file("token", "rotated-token-0123456789\n");
    assert_int_equal(kp_token_file_get(tf, false, &s), 0);
    assert_string_equal(kp_secret_reveal(s), "rotated-token-0123456789");
    s = kp_secret_free(s);

    /* Mid-rotation (file gone): the last good token is served, unless refresh is asked. */
    remove_file("token");
    assert_int_equal(kp_token_file_get(tf, false, &s), 0);
    assert_string_equal(kp_secret_reveal(s), "rotated-token-0123456789");
    s = kp_secret_free(s);
    assert_int_equal(kp_token_file_get(tf, true, &s), -ENOENT);
    assert_null(s);
    write_file("token", "tok-0123456789abcdef\n");
    kp_token_file_free(tf);

    assert_int_equal(kp_token_file_new("/nonexistent/token", &tf), -ENOENT);
}

static int torture_incluster(void)
{
    struct kp_incluster_config *c = NULL;
    struct kp_token_file *tf = NULL;
    struct kp_secret *s = NULL;
    int r;

    r = kp_incluster_load(root, "fd00::1", "443", &c, NULL);
    if (r < 0)
        goto out;
    r = kp_token_file_new(c->token_file, &tf);
    if (r < 0)
        goto out;
    r = kp_token_file_get(tf, true, &s);
out:
    kp_secret_free(s);
    kp_token_file_free(tf);
    kp_incluster_config_free(c);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_token_rotation),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_incluster),
    };
    int r;

    /* The torture sweep runs outside cmocka, so the fixture is set up here for both paths. */
    setup(NULL);
    r = kp_test_main("incluster", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                     argv);
    teardown(NULL);
    return r;
}
