/* provider/ssh/token.c: bootstrap tokens (token.h).
 *
 * DESIGN: the token's two halves come from getrandom() mapped onto [a-z0-9] by rejection
 * sampling (no modulo bias). The Secret is built as a JSON tree with stringData so the API
 * server does the base64; the tree holds the secret only for the create call. Deletion treats
 * NotFound as success, because collection is idempotent: Create, Delete and the probe may all try.
 * Threads: the caller's. */
#include "provider/ssh/token.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "base/alloc.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/status.h"

static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";

bool kp_token_id_valid(const char *id)
{
    if (!id || strlen(id) != KP_TOKEN_ID_LEN)
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
            return false;
    return true;
}

static int fill_random(char *out, size_t n)
{
    size_t got = 0;

    while (got < n) {
        unsigned char b[32];
        ssize_t k = getrandom(b, sizeof(b), 0);

        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        for (ssize_t i = 0; i < k && got < n; i++)
            if (b[i] < 252) /* 252 = 7 x 36: keeps the mapping uniform */
                out[got++] = alphabet[b[i] % 36];
        kp_wipe(b, sizeof(b));
    }
    return 0;
}

int kp_token_generate(char ret_id[KP_TOKEN_ID_SIZE], struct kp_secret **ret_token)
{
    char tok[KP_TOKEN_ID_LEN + 1 + KP_TOKEN_SECRET_LEN];
    int r;

    if ((r = fill_random(tok, KP_TOKEN_ID_LEN)) < 0 ||
        (r = fill_random(tok + KP_TOKEN_ID_LEN + 1, KP_TOKEN_SECRET_LEN)) < 0)
        goto out;
    tok[KP_TOKEN_ID_LEN] = '.';
    if ((r = kp_secret_new(tok, sizeof(tok), ret_token)) < 0)
        goto out;
    memcpy(ret_id, tok, KP_TOKEN_ID_LEN);
    ret_id[KP_TOKEN_ID_LEN] = '\0';
out:
    kp_wipe(tok, sizeof(tok));
    return r;
}

#define SD(k) KP_JSON_PATH("stringData", k)

bool kp_token_group_valid(const char *group)
{
    static const char prefix[] = "system:bootstrappers:";
    size_t i, n;

    if (!group || strncmp(group, prefix, sizeof(prefix) - 1) != 0)
        return false;
    group += sizeof(prefix) - 1;
    n = strlen(group);
    if (n == 0 || n > 256)
        return false;
    for (i = 0; i < n; i++) {
        char c = group[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

        if (!alnum && (i == n - 1 || (c != ':' && c != '-')))
            return false;
    }
    return true;
}

int kp_token_secret_object(const struct kp_secret *token, const char *group, const char *nodeclaim,
                           uint64_t now_usec, json_t **ret)
{
    const char *v = kp_secret_reveal(token);
    char id[KP_TOKEN_ID_SIZE], name[sizeof("bootstrap-token-") + KP_TOKEN_ID_LEN];
    char exp[KP_RFC3339_MAX];
    char *desc = NULL;
    json_t *o = NULL;
    int r;

    if (!v || kp_secret_len(token) != KP_TOKEN_ID_LEN + 1 + KP_TOKEN_SECRET_LEN ||
        v[KP_TOKEN_ID_LEN] != '.' || !kp_token_group_valid(group))
        return -EINVAL;
    memcpy(id, v, KP_TOKEN_ID_LEN);
    id[KP_TOKEN_ID_LEN] = '\0';
    if (!kp_token_id_valid(id))
        return -EINVAL;
    memcpy(name, "bootstrap-token-", sizeof("bootstrap-token-"));
    memcpy(name + sizeof("bootstrap-token-") - 1, id, KP_TOKEN_ID_SIZE);
    if ((r = kp_time_format_rfc3339(now_usec + KP_TOKEN_TTL_USEC, exp, sizeof(exp))) < 0)
        return r;
    desc = kp_strjoin("kpssh nodeclaim ", nodeclaim ? nodeclaim : "", (const char *)NULL);
    if (!desc)
        return -ENOMEM;
    if ((r = kp_json_patch_new(&o)) < 0)
        goto out;
    if ((r = kp_json_patch_set_str(o, KP_JSON_PATH("apiVersion"), "v1")) < 0 ||
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("kind"), "Secret")) < 0 ||
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("metadata", "name"), name)) < 0 ||
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("metadata", "namespace"), KP_TOKEN_NAMESPACE)) <
            0 ||
        (r = kp_json_patch_set_str(
             o, KP_JSON_PATH("metadata", "labels", "app.kubernetes.io/managed-by"), "kpssh")) < 0 ||
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("type"), "bootstrap.kubernetes.io/token")) < 0 ||
        (r = kp_json_patch_set_str(o, SD("token-id"), id)) < 0 ||
        (r = kp_json_patch_set_str(o, SD("token-secret"), v + KP_TOKEN_ID_LEN + 1)) < 0 ||
        (r = kp_json_patch_set_str(o, SD("usage-bootstrap-authentication"), "true")) < 0 ||
        (r = kp_json_patch_set_str(o, SD("usage-bootstrap-signing"), "true")) < 0 ||
        (r = kp_json_patch_set_str(o, SD("auth-extra-groups"), group)) < 0 ||
        (r = kp_json_patch_set_str(o, SD("expiration"), exp)) < 0 ||
        (r = kp_json_patch_set_str(o, SD("description"), desc)) < 0)
        goto out;
    *ret = o;
    o = NULL;
out:
    kp_json_unref(o);
    kp_free(desc);
    return r;
}

int kp_token_create(struct kp_client *c, const struct kp_secret *token, const char *group,
                    const char *nodeclaim, struct kp_error *reterr)
{
    json_t *o = NULL;
    int r = kp_token_secret_object(token, group, nodeclaim, kp_real_usec(), &o);

    if (r == 0)
        r = kp_client_create(c, &KP_RES_SECRET, KP_TOKEN_NAMESPACE, o, NULL, reterr);
    kp_json_unref(o);
    return r;
}

int kp_token_mint(struct kp_client *c, const char *group, const char *nodeclaim,
                  char ret_id[KP_TOKEN_ID_SIZE], struct kp_secret **ret_token,
                  struct kp_error *reterr)
{
    int r = -EEXIST;

    for (int attempt = 0; attempt < 3 && r == -EEXIST; attempt++) {
        struct kp_secret *tok = NULL;
        char id[KP_TOKEN_ID_SIZE];

        if ((r = kp_token_generate(id, &tok)) < 0)
            return r;
        r = kp_token_create(c, tok, group, nodeclaim, reterr);
        if (r == 0) {
            memcpy(ret_id, id, KP_TOKEN_ID_SIZE);
            *ret_token = tok;
            return 0;
        }
        kp_secret_free(tok);
    }
    return r;
}

int kp_token_delete(struct kp_client *c, const char *id, struct kp_error *reterr)
{
    char name[sizeof("bootstrap-token-") + KP_TOKEN_ID_LEN];
    int r;

    if (!kp_token_id_valid(id))
        return -EINVAL;
    memcpy(name, "bootstrap-token-", sizeof("bootstrap-token-"));
    memcpy(name + sizeof("bootstrap-token-") - 1, id, KP_TOKEN_ID_SIZE);
    r = kp_client_delete(c, &KP_RES_SECRET, KP_TOKEN_NAMESPACE, name, NULL, reterr);
    return r == -ENOENT ? 0 : r;
}
