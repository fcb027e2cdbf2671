/* DESIGN: in-cluster configuration and rotating token files.
 *
 * What: kp_incluster_load() turns the two service environment variables and the mounted
 * service-account files into a server URL, CA bytes, namespace and token path; kp_token_file
 * keeps a token file's current contents.
 *
 * Why re-read: bound service-account tokens expire, and the kubelet swaps the projected file
 * (an atomic symlink flip, so the inode changes) long before they do. client-go re-reads such
 * files periodically; we stat on every get, which costs one syscall per request and notices a
 * new token at once, and also re-read every KP_TOKEN_FILE_RECHECK_USEC in case a rewrite kept
 * size and mtime. A failed re-read keeps serving the last good token, since the file may be
 * caught mid-swap, unless the server already refused that token (refresh).
 *
 * The root directory is a parameter so tests build a fake service-account directory.
 *
 * Threads: kp_incluster_load is reentrant. A kp_token_file is shared by every transport of a
 * process; its mutex guards the cached secret and file identity, and no I/O other than the
 * small bounded file read happens under it. */
#include "k8s/incluster.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "k8s/kubeconfig.h"
#include "yaml/yaml.h"

struct kp_token_file {
    pthread_mutex_t lock;
    char *path;
    struct kp_secret *token; /* guarded by lock */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    uint64_t read_at; /* monotonic usec of the last successful read */
};

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Reads and trims a token file into a new secret; st receives the file's identity. */
static int read_token(const char *path, struct stat *st, struct kp_secret **ret)
{
    char *data = NULL;
    size_t len = 0, start = 0;
    int r;

    if (stat(path, st) < 0)
        return -errno;
    r = kp_read_file_bounded(path, KP_MAX_TOKEN_FILE, &data, &len);
    if (r < 0)
        return r;
    while (start < len && is_space(data[start]))
        start++;
    while (len > start && is_space(data[len - 1]))
        len--;
    if (len == start || memchr(data + start, '\0', len - start))
        r = -KP_EPARSE;
    else
        r = kp_secret_new(data + start, len - start, ret);
    kp_wipe(data, len);
    kp_free(data);
    return r;
}

int kp_token_file_new(const char *path, struct kp_token_file **ret)
{
    struct kp_token_file *tf;
    struct stat st;
    int r;

    tf = kp_calloc(1, sizeof(*tf));
    if (!tf)
        return -ENOMEM;
    r = pthread_mutex_init(&tf->lock, NULL);
    if (r) {
        kp_free(tf);
        return -r;
    }
    tf->path = kp_strdup(path);
    if (!tf->path) {
        kp_token_file_free(tf);
        return -ENOMEM;
    }
    r = read_token(path, &st, &tf->token);
    if (r < 0) {
        kp_token_file_free(tf);
        return r;
    }
    tf->dev = st.st_dev;
    tf->ino = st.st_ino;
    tf->size = st.st_size;
    tf->mtime = st.st_mtim;
    tf->read_at = kp_mono_usec();
    *ret = tf;
    return 0;
}

struct kp_token_file *kp_token_file_free(struct kp_token_file *tf)
{
    if (!tf)
        return NULL;
    kp_secret_free(tf->token);
    kp_free(tf->path);
    pthread_mutex_destroy(&tf->lock);
    kp_free(tf);
    return NULL;
}

static bool changed(const struct kp_token_file *tf, const struct stat *st)
{
    return st->st_dev != tf->dev || st->st_ino != tf->ino || st->st_size != tf->size ||
           st->st_mtim.tv_sec != tf->mtime.tv_sec || st->st_mtim.tv_nsec != tf->mtime.tv_nsec;
}

int kp_token_file_get(struct kp_token_file *tf, bool refresh, struct kp_secret **ret_token)
{
    struct kp_secret *fresh = NULL, *copy = NULL;
    struct stat st;
    uint64_t now = kp_mono_usec();
    bool reread;
    int r;

    pthread_mutex_lock(&tf->lock);
    reread = refresh || !tf->token || now - tf->read_at >= KP_TOKEN_FILE_RECHECK_USEC ||
             stat(tf->path, &st) < 0 || changed(tf, &st);
    if (reread) {
        r = read_token(tf->path, &st, &fresh);
        if (r < 0 && (refresh || !tf->token))
            goto out;
        if (r >= 0) {
            kp_secret_free(tf->token);
            tf->token = fresh;
            fresh = NULL;
            tf->dev = st.st_dev;
            tf->ino = st.st_ino;
            tf->size = st.st_size;
            tf->mtime = st.st_mtim;
            tf->read_at = now;
        }
    }
    r = kp_secret_new(kp_secret_reveal(tf->token), kp_secret_len(tf->token), &copy);
    if (r < 0)
        goto out;
    *ret_token = copy;
    r = 0;
out:
    pthread_mutex_unlock(&tf->lock);
    kp_secret_free(fresh);
    return r;
}

int kp_token_file_token_fn(void *userdata, bool refresh, struct kp_secret **ret_token)
{
    return kp_token_file_get(userdata, refresh, ret_token);
}

struct kp_incluster_config *kp_incluster_config_free(struct kp_incluster_config *c)
{
    if (!c)
        return NULL;
    kp_free(c->server);
    kp_free(c->ca_pem);
    kp_free(c->namespace);
    kp_free(c->token_file);
    kp_free(c);
    return NULL;
}

static bool host_ok(const char *h)
{
    if (!*h)
        return false;
    for (; *h; h++)
        if ((unsigned char)*h <= ' ' || strchr("/?#@[]", *h))
            return false;
    return true;
}

int kp_incluster_load(const char *root, const char *host, const char *port,
                      struct kp_incluster_config **ret, struct kp_yaml_error *reterr)
{
    struct kp_incluster_config *c = NULL;
    struct kp_secret *token = NULL;
    char *dir = NULL, *path = NULL, *ns = NULL;
    size_t ns_len = 0;
    struct stat st;
    uint32_t portnum;
    int r;

    if (!host || !*host || !port || !*port) {
        kp_yaml_errorf(reterr, NULL, "in-cluster",
                       "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
        r = -ENOENT;
        goto out;
    }
    if (kp_safe_atou32(port, &portnum) < 0 || portnum == 0 || portnum > 65535) {
        kp_yaml_errorf(reterr, NULL, "in-cluster", "KUBERNETES_SERVICE_PORT is not a port: %s",
                       port);
        r = -KP_EPARSE;
        goto out;
    }
    if (!host_ok(host)) {
        kp_yaml_errorf(reterr, NULL, "in-cluster",
                       "KUBERNETES_SERVICE_HOST is not a host name or address: %s", host);
        r = -KP_EPARSE;
        goto out;
    }
    r = -ENOMEM;
    c = kp_calloc(1, sizeof(*c));
    if (!c)
        goto out;
    /* An IPv6 literal holds ':' and must be bracketed in a URL. */
    c->server = strchr(host, ':') ? kp_strjoin("https://[", host, "]:", port, (char *)NULL)
                                  : kp_strjoin("https://", host, ":", port, (char *)NULL);
    dir = kp_strjoin(root ? root : "", KP_INCLUSTER_SA_DIR, (char *)NULL);
    if (!c->server || !dir)
        goto out;

    c->token_file = kp_strjoin(dir, "/token", (char *)NULL);
    if (!c->token_file)
        goto out;
    /* Read once to fail early with a clear message; kp_token_file does the real work. */
    r = read_token(c->token_file, &st, &token);
    if (r < 0) {
        kp_yaml_errorf(reterr, NULL, c->token_file, "cannot read the service-account token: %s",
                       kp_strerror(r));
        goto out;
    }

    path = kp_strjoin(dir, "/ca.crt", (char *)NULL);
    if (!path) {
        r = -ENOMEM;
        goto out;
    }
    r = kp_read_file_bounded(path, KP_MAX_PEM_FILE, &c->ca_pem, &c->ca_pem_len);
    if (r < 0) {
        kp_yaml_errorf(reterr, NULL, path, "cannot read the cluster CA: %s", kp_strerror(r));
        goto out;
    }
    kp_free(path);
    path = kp_strjoin(dir, "/namespace", (char *)NULL);
    if (!path) {
        r = -ENOMEM;
        goto out;
    }
    r = kp_read_file_bounded(path, 4096, &ns, &ns_len);
    if (r == -ENOENT) {
        r = kp_strset(&c->namespace, "default");
    } else if (r >= 0) {
        while (ns_len > 0 && is_space(ns[ns_len - 1]))
            ns[--ns_len] = '\0';
        if (ns_len == 0 || memchr(ns, '\0', ns_len)) {
            kp_yaml_errorf(reterr, NULL, path, "the namespace file is empty or not text");
            r = -KP_EPARSE;
            goto out;
        }
        c->namespace = ns;
        ns = NULL;
    } else {
        kp_yaml_errorf(reterr, NULL, path, "cannot read: %s", kp_strerror(r));
    }
    if (r < 0)
        goto out;
    *ret = c;
    c = NULL;
    r = 0;
out:
    if (r == -ENOMEM)
        kp_yaml_errorf(reterr, NULL, "in-cluster", "out of memory");
    kp_secret_free(token);
    kp_free(ns);
    kp_free(path);
    kp_free(dir);
    kp_incluster_config_free(c);
    return r;
}

int kp_incluster_load_env(const char *root, struct kp_incluster_config **ret,
                          struct kp_yaml_error *reterr)
{
    return kp_incluster_load(root, getenv("KUBERNETES_SERVICE_HOST"),
                             getenv("KUBERNETES_SERVICE_PORT"), ret, reterr);
}
