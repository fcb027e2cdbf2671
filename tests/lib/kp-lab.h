/* tests/lib/kp-lab.h: what integration tests share to talk to the test lab (tests/lab).
 *
 * kp_lab_load() reads "$KPSSH_LAB_DIR/env.sh" (written by tests/lab/up.sh) and the admin
 * credentials it names; every failure is a cmocka failure with a message saying what is
 * missing, never a skip. */
#ifndef KP_TESTS_KP_LAB_H
#define KP_TESTS_KP_LAB_H

#include <stddef.h>

#include "base/macro.h"

typedef struct json_t json_t;
struct kp_client;
struct kp_error;
struct kp_secret;

struct kp_lab {
    char *dir;      /* KPSSH_LAB_DIR */
    char *api_url;  /* KPSSH_LAB_API_URL */
    char *etcd_url; /* KPSSH_LAB_ETCD_URL */
    char *kubectl;  /* KPSSH_LAB_KUBECTL */
    char *bin;      /* KPSSH_LAB_BIN */
    char *ca, *cert;
    size_t ca_len, cert_len;
    struct kp_secret *key;
};

/* Loads the lab description; fails the test when the lab is not up. */
void kp_lab_load(struct kp_lab *lab);
void kp_lab_done(struct kp_lab *lab);

/* The value of `export NAME=value` in env.sh (a new string), or NULL. */
char *kp_lab_env(const struct kp_lab *lab, const char *name);

/* A client with the admin identity (cmocka-fails on error). */
struct kp_client *kp_lab_admin_client(const struct kp_lab *lab);

/* Parses printf-formatted JSON (cmocka-fails on bad JSON). Caller unrefs. */
json_t *kp_lab_json(const char *fmt, ...) KP_PRINTF(1, 2);

/* Fails the test with the server's account when r < 0. */
void kp_lab_check(int r, const struct kp_error *e, const char *what);

/* Creates a namespace "<prefix>-<pid>" and waits for its default ServiceAccount; the name goes
 * to out[size]. */
void kp_lab_namespace(struct kp_client *c, const char *prefix, char *out, size_t size);

/* Group set-up and tear-down for tests that work in a namespace of their own: load the lab and
 * create "<prefix>-<pid>" (name to ns[size]); delete it (in the background) and unload. */
void kp_lab_setup_namespace(struct kp_lab *lab, const char *prefix, char *ns, size_t size);
void kp_lab_teardown_namespace(struct kp_lab *lab, const char *ns);

/* Reads a whole file (cmocka-fails on error); caller kp_free()s it. */
char *kp_lab_read_file(const char *path, size_t *ret_len);

#endif
