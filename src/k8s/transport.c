/* DESIGN: HTTPS transport to the API server (see transport.h).
 *
 * What: one libcurl easy handle per struct kp_transport, reset and configured in full before each
 * request. curl_easy_reset() keeps the handle's connection cache, TLS session IDs and DNS cache,
 * so consecutive requests of a worker reuse one kept-alive TLS connection; resetting means no
 * option of a previous request (a body, a custom method) can leak into the next one.
 *
 * Why this way: the daemon's workers each own a transport (STYLE.md rule 9), so no locking is
 * needed on the hot path. The configuration that several transports share (server, CA, client
 * certificate and key, token source, rate limiter) lives in one reference-counted block that is
 * immutable after creation except for the rate limiter, which has its own mutex held only for the
 * arithmetic of a reservation, never across the wait or any I/O.
 *
 * TLS is always verified (peer and host name); insecure-skip-tls-verify is refused at creation.
 * Certificates and the key are handed to libcurl as blobs without copying (CURL_BLOB_NOCOPY), so
 * the key exists once, in a struct kp_secret that is wiped when the last transport goes. The
 * bearer token is fetched from the callback for every request, put into one header line and
 * wiped from our memory and from the header list after the transfer. XXX: libcurl copies header
 * lines into its own send buffer and frees it without wiping; that copy is outside our reach.
 *
 * Bodies: buffered bodies grow in a kp_buf with a ceiling; crossing it aborts the transfer with
 * -KP_ELIMIT. Streams hand 2xx chunks to a callback and notice a silent peer through the progress
 * callback, which libcurl calls about once a second even when nothing arrives and which compares
 * the time of the last received byte with the idle deadline. TCP keep-alive is on as well.
 *
 * Allocation: libcurl's allocator is routed to kp_malloc and friends by curl_global_init_mem(),
 * once per process under a mutex (a failed initialisation is retried by the next caller).
 * OpenSSL's own allocations are not routed. */
#include "k8s/transport.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"

#ifndef KP_VERSION
#define KP_VERSION "0.1.0"
#endif
#define KP_USER_AGENT "kpssh/" KP_VERSION

/* Shared by every transport cloned from one kp_transport_new(); immutable except rl. */
struct kp_transport_shared {
    atomic_uint refs;
    char *server;     /* as configured, for kp_transport_server() */
    char *url_base;   /* what requests go to: server, or server with tls_server_name as host */
    char *connect_to; /* "name:port:host:port" when tls_server_name is set, else NULL */
    char *ca_pem;
    size_t ca_pem_len;
    char *cert_pem;
    size_t cert_pem_len;
    struct kp_secret *key_pem;
    bool plain_http;
    bool loopback;
    kp_transport_token_fn token;
    void *token_userdata;
    char *user_agent;
    uint64_t timeout_usec;
    uint64_t connect_timeout_usec;
    size_t max_body;
    bool rl_on;
    pthread_mutex_t rl_lock; /* protects rl */
    struct kp_ratelimit rl;
};

struct kp_transport {
    struct kp_transport_shared *sh;
    CURL *easy;
    uint64_t connections; /* CURLINFO_NUM_CONNECTS summed over transfers */
    /* libcurl writes its failure text here (its API takes a fixed CURL_ERROR_SIZE array). */
    char errbuf[CURL_ERROR_SIZE];
};

/* State of one transfer, reached from libcurl's callbacks. */
struct xfer {
    struct kp_http_response *resp;
    CURL *easy;
    kp_transport_chunk_fn fn; /* streaming when non-NULL */
    void *userdata;
    const atomic_bool *cancel;
    uint64_t idle_usec;      /* 0: no idle deadline */
    uint64_t last_byte_usec; /* monotonic time of the last byte received */
    int err;                 /* the first error a callback met; it wins over libcurl's code */
};

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;
static bool global_ready; /* protected by global_lock */

static void *curl_strdup_cb(const char *s)
{
    return kp_strdup(s);
}

static int global_init(void)
{
    int r = 0;

    pthread_mutex_lock(&global_lock);
    if (!global_ready) {
        CURLcode c = curl_global_init_mem(CURL_GLOBAL_DEFAULT, kp_malloc, kp_free, kp_realloc,
                                          (curl_strdup_callback)curl_strdup_cb, kp_calloc);

        if (c == CURLE_OK)
            global_ready = true;
        else
            r = c == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;
    }
    pthread_mutex_unlock(&global_lock);
    return r;
}

void kp_transport_global_cleanup(void)
{
    pthread_mutex_lock(&global_lock);
    if (global_ready) {
        curl_global_cleanup();
        global_ready = false;
    }
    pthread_mutex_unlock(&global_lock);
}

void kp_ratelimit_init(struct kp_ratelimit *rl, double qps, unsigned burst, uint64_t now_usec)
{
    rl->qps = qps;
    rl->burst = burst > 0 ? (double)burst : 1.0;
    rl->tokens = rl->burst;
    rl->last_usec = now_usec;
}

uint64_t kp_ratelimit_reserve(struct kp_ratelimit *rl, uint64_t now_usec)
{
    double wait;

    if (rl->qps <= 0)
        return 0;
    if (now_usec > rl->last_usec) {
        rl->tokens += (double)(now_usec - rl->last_usec) * rl->qps / (double)KP_USEC_PER_SEC;
        if (rl->tokens > rl->burst)
            rl->tokens = rl->burst;
        rl->last_usec = now_usec;
    }
    /* The token is taken now even when it is not there yet: a negative balance is the queue of
     * callers already waiting, so each new caller waits behind them. */
    rl->tokens -= 1.0;
    if (rl->tokens >= 0)
        return 0;
    wait = -rl->tokens / rl->qps * (double)KP_USEC_PER_SEC;
    return wait >= (double)UINT64_MAX ? UINT64_MAX : (uint64_t)wait + 1;
}

void kp_http_response_init(struct kp_http_response *resp)
{
    resp->status = 0;
    kp_buf_init(&resp->body, KP_MAX_HTTP_BODY);
    resp->retry_after_sec = 0;
    resp->content_type = NULL;
}

void kp_http_response_done(struct kp_http_response *resp)
{
    kp_buf_done(&resp->body);
    kp_free(resp->content_type);
    resp->content_type = NULL;
    resp->status = 0;
    resp->retry_after_sec = 0;
}

static struct kp_transport_shared *shared_unref(struct kp_transport_shared *sh)
{
    if (!sh || atomic_fetch_sub(&sh->refs, 1) != 1)
        return NULL;
    kp_free(sh->server);
    kp_free(sh->url_base);
    kp_free(sh->connect_to);
    kp_free(sh->ca_pem);
    kp_free(sh->cert_pem);
    kp_secret_free(sh->key_pem);
    kp_free(sh->user_agent);
    if (sh->rl_on)
        pthread_mutex_destroy(&sh->rl_lock);
    kp_free(sh);
    return NULL;
}

/* Checks the server URL: scheme https (or http when allowed), a host, no query or fragment.
 * Sets *ret_loopback when the host is a loopback name or address. With tls_server_name, the
 * requests go to a URL naming that host while libcurl connects to the real one (CONNECT_TO), so
 * the certificate is verified for tls_server_name: *ret_url_base and *ret_connect_to say how. */
static int check_server(const char *server, const char *tls_server_name, bool allow_http,
                        bool *ret_plain, bool *ret_loopback, char **ret_url_base,
                        char **ret_connect_to)
{
    CURLU *u = NULL;
    char *scheme = NULL, *host = NULL, *query = NULL, *frag = NULL, *port = NULL;
    char *base = NULL, *connect_to = NULL;
    bool plain;
    int r;

    u = curl_url();
    if (!u) {
        r = -ENOMEM;
        goto out;
    }
    if (curl_url_set(u, CURLUPART_URL, server, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
        r = -EINVAL;
        goto out;
    }
    if (curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) {
        r = -EINVAL;
        goto out;
    }
    plain = strcasecmp(scheme, "http") == 0;
    if (!plain && strcasecmp(scheme, "https") != 0) {
        r = -EINVAL;
        goto out;
    }
    if (plain && !allow_http) {
        r = -EPERM;
        goto out;
    }
    if (tls_server_name && tls_server_name[0]) {
        char *b = NULL;
        size_t n;

        /* A name with ':' (or anything curl refuses as a host) cannot be a TLS server name. */
        if (strchr(tls_server_name, ':') ||
            curl_url_set(u, CURLUPART_HOST, tls_server_name, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_URL, &b, 0) != CURLUE_OK) {
            curl_free(b);
            r = -EINVAL;
            goto out;
        }
        n = strlen(b);
        while (n > 0 && b[n - 1] == '/')
            n--;
        base = kp_strndup(b, n);
        connect_to = kp_strjoin(tls_server_name, ":", port, ":", host, ":", port, (char *)NULL);
        curl_free(b);
    } else {
        size_t n = strlen(server);

        while (n > 0 && server[n - 1] == '/')
            n--;
        base = kp_strndup(server, n);
    }
    if (!base || (tls_server_name && tls_server_name[0] && !connect_to)) {
        r = -ENOMEM;
        goto out;
    }
    *ret_plain = plain;
    *ret_loopback = strcasecmp(host, "localhost") == 0 || kp_startswith(host, "127.") != NULL ||
                    strcmp(host, "[::1]") == 0;
    *ret_url_base = base;
    *ret_connect_to = connect_to;
    base = connect_to = NULL;
    r = 0;
out:
    kp_free(base);
    kp_free(connect_to);
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(query);
    curl_free(frag);
    curl_url_cleanup(u);
    return r;
}

static int dup_bytes(const char *p, size_t n, char **ret)
{
    char *c;

    if (!p) {
        *ret = NULL;
        return 0;
    }
    c = kp_malloc(n + 1);
    if (!c)
        return -ENOMEM;
    memcpy(c, p, n);
    c[n] = '\0';
    *ret = c;
    return 0;
}

static int transport_new_shared(struct kp_transport_shared *sh, struct kp_transport **ret)
{
    struct kp_transport *t = NULL;
    int r;

    if ((r = global_init()) < 0)
        return r;
    t = kp_calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->easy = curl_easy_init();
    if (!t->easy) {
        kp_free(t);
        return -ENOMEM;
    }
    atomic_fetch_add(&sh->refs, 1);
    t->sh = sh;
    *ret = t;
    return 0;
}

int kp_transport_new(const struct kp_transport_opts *opts, struct kp_transport **ret)
{
    struct kp_transport_shared *sh = NULL;
    struct kp_transport *t = NULL;
    size_t n;
    int r;

    if (opts->insecure_skip_tls_verify) {
        r = -EPERM;
        goto out;
    }
    if (!opts->server || (opts->cert_pem && !opts->key_pem) || (!opts->cert_pem && opts->key_pem)) {
        r = -EINVAL;
        goto out;
    }
    if ((r = global_init()) < 0)
        goto out;
    sh = kp_calloc(1, sizeof(*sh));
    if (!sh) {
        r = -ENOMEM;
        goto out;
    }
    atomic_init(&sh->refs, 1);
    if ((r = check_server(opts->server, opts->tls_server_name, opts->allow_plain_http,
                          &sh->plain_http, &sh->loopback, &sh->url_base, &sh->connect_to)) < 0)
        goto out;
    n = strlen(opts->server);
    while (n > 0 && opts->server[n - 1] == '/')
        n--;
    sh->server = kp_strndup(opts->server, n);
    sh->user_agent = kp_strdup(opts->user_agent ? opts->user_agent : KP_USER_AGENT);
    if (!sh->server || !sh->user_agent) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = dup_bytes(opts->ca_pem, opts->ca_pem_len, &sh->ca_pem)) < 0 ||
        (r = dup_bytes(opts->cert_pem, opts->cert_pem_len, &sh->cert_pem)) < 0)
        goto out;
    sh->ca_pem_len = opts->ca_pem_len;
    sh->cert_pem_len = opts->cert_pem_len;
    if (opts->key_pem && (r = kp_secret_new(kp_secret_reveal(opts->key_pem),
                                            kp_secret_len(opts->key_pem), &sh->key_pem)) < 0)
        goto out;
    sh->token = opts->token;
    sh->token_userdata = opts->token_userdata;
    sh->timeout_usec = opts->timeout_usec ? opts->timeout_usec : KP_TRANSPORT_TIMEOUT_USEC;
    sh->connect_timeout_usec =
        opts->connect_timeout_usec ? opts->connect_timeout_usec : KP_TRANSPORT_CONNECT_TIMEOUT_USEC;
    sh->max_body = opts->max_body ? opts->max_body : KP_MAX_HTTP_BODY;
    if (opts->qps > 0) {
        if (pthread_mutex_init(&sh->rl_lock, NULL) != 0) {
            r = -ENOMEM;
            goto out;
        }
        sh->rl_on = true;
        kp_ratelimit_init(&sh->rl, opts->qps, opts->burst, kp_mono_usec());
    }
    if ((r = transport_new_shared(sh, &t)) < 0)
        goto out;
    *ret = t;
    t = NULL;
    r = 0;
out:
    shared_unref(sh); /* t, when made, holds its own reference */
    return r;
}

int kp_transport_clone(struct kp_transport *t, struct kp_transport **ret)
{
    return transport_new_shared(t->sh, ret);
}

struct kp_transport *kp_transport_free(struct kp_transport *t)
{
    if (!t)
        return NULL;
    curl_easy_cleanup(t->easy);
    shared_unref(t->sh);
    kp_free(t);
    return NULL;
}

const char *kp_transport_last_error(const struct kp_transport *t)
{
    return t->errbuf;
}

uint64_t kp_transport_connections(const struct kp_transport *t)
{
    return t->connections;
}

const char *kp_transport_server(const struct kp_transport *t)
{
    return t->sh->server;
}

size_t kp_transport_max_body(const struct kp_transport *t)
{
    return t->sh->max_body;
}

/* Waits for a rate-limit token, unless the wait would end after timeout_usec. */
static int ratelimit_wait(struct kp_transport_shared *sh, uint64_t timeout_usec)
{
    uint64_t wait;

    if (!sh->rl_on)
        return 0;
    pthread_mutex_lock(&sh->rl_lock);
    wait = kp_ratelimit_reserve(&sh->rl, kp_mono_usec());
    if (wait > timeout_usec)
        sh->rl.tokens += 1.0; /* give the reservation back: we will not use it */
    pthread_mutex_unlock(&sh->rl_lock);
    if (wait > timeout_usec)
        return -ETIMEDOUT;
    if (wait > 0)
        kp_sleep_usec(wait);
    return 0;
}

static size_t header_cb(char *p, size_t size, size_t n, void *userdata)
{
    struct xfer *x = userdata;
    size_t len = size * n, vlen;
    const char *v;

    x->last_byte_usec = kp_mono_usec();
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        /* A new response (after 100 Continue, or the 401 retry): forget the previous headers. */
        kp_free(x->resp->content_type);
        x->resp->content_type = NULL;
        x->resp->retry_after_sec = 0;
        return len;
    }
    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r'))
        len--;
    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        uint64_t sec;

        v = p + 12;
        vlen = len - 12;
        while (vlen > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vlen--;
        }
        /* Only the delta-seconds form: the API server never sends an HTTP date here. */
        if (kp_parse_u64(v, vlen, &sec) == 0)
            x->resp->retry_after_sec = sec;
    } else if (len > 13 && strncasecmp(p, "Content-Type:", 13) == 0) {
        v = p + 13;
        vlen = len - 13;
        while (vlen > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vlen--;
        }
        kp_free(x->resp->content_type);
        x->resp->content_type = kp_strndup(v, vlen);
        if (!x->resp->content_type) {
            x->err = -ENOMEM;
            return 0;
        }
    }
    return size * n;
}

static size_t write_cb(char *p, size_t size, size_t n, void *userdata)
{
    struct xfer *x = userdata;
    size_t len = size * n;
    long status = 0;
    int r;

    x->last_byte_usec = kp_mono_usec();
    if (x->fn) {
        (void)curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) {
            if ((r = x->fn(p, len, x->userdata)) < 0) {
                x->err = r;
                return 0;
            }
            return len;
        }
    }
    if ((r = kp_buf_append(&x->resp->body, p, len)) < 0) {
        x->err = r;
        return 0;
    }
    return len;
}

static int xferinfo_cb(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    struct xfer *x = userdata;

    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    if (x->cancel && atomic_load(x->cancel)) {
        x->err = -ECANCELED;
        return 1;
    }
    if (x->idle_usec > 0 && kp_mono_usec() - x->last_byte_usec > x->idle_usec) {
        x->err = -ETIMEDOUT;
        return 1;
    }
    return 0;
}

static int curl_error(CURLcode c)
{
    switch (c) {
    case CURLE_OK:
        return 0;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return -EHOSTUNREACH;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return -ECONNRESET;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_CLIENTCERT:
        return -KP_EAUTH;
    case CURLE_URL_MALFORMAT:
        return -EINVAL;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    default:
        return -EIO;
    }
}

/* Wipes and frees a header list that may hold the Authorization line. */
static void headers_free(struct curl_slist *h)
{
    for (struct curl_slist *p = h; p; p = p->next)
        kp_wipe(p->data, strlen(p->data));
    curl_slist_free_all(h);
}

static int headers_add(struct curl_slist **h, const char *line)
{
    struct curl_slist *n = curl_slist_append(*h, line);

    if (!n)
        return -ENOMEM;
    *h = n;
    return 0;
}

static int build_headers(struct kp_transport *t, const struct kp_http_request *req, bool refresh,
                         struct curl_slist **ret)
{
    struct curl_slist *h = NULL;
    struct kp_secret *tok = NULL;
    struct kp_buf line = KP_BUF_INIT((size_t)64 * 1024);
    int r;

    if ((r = kp_buf_printf(&line, "Accept: %s", req->accept ? req->accept : "application/json")) <
            0 ||
        (r = headers_add(&h, kp_buf_str(&line))) < 0)
        goto out;
    kp_buf_reset(&line);
    if (req->body) {
        if ((r = kp_buf_printf(&line, "Content-Type: %s",
                               req->content_type ? req->content_type : "application/json")) < 0 ||
            (r = headers_add(&h, kp_buf_str(&line))) < 0)
            goto out;
        kp_buf_reset(&line);
    }
    /* No "Expect: 100-continue" round trip before bodies. */
    if ((r = headers_add(&h, "Expect:")) < 0)
        goto out;
    if (t->sh->token) {
        if ((r = t->sh->token(t->sh->token_userdata, refresh, &tok)) < 0)
            goto out;
        if (tok) {
            if ((r = kp_buf_puts(&line, "Authorization: Bearer ")) < 0 ||
                (r = kp_buf_append(&line, kp_secret_reveal(tok), kp_secret_len(tok))) < 0)
                goto out;
            /* A token with a line break would inject headers. */
            if (memchr(kp_buf_str(&line), '\n', line.len) ||
                memchr(kp_buf_str(&line), '\r', line.len) || strlen(line.data) != line.len) {
                r = -EINVAL;
                goto out;
            }
            if ((r = headers_add(&h, kp_buf_str(&line))) < 0)
                goto out;
        }
    }
    *ret = h;
    h = NULL;
    r = 0;
out:
    kp_buf_wipe(&line);
    kp_secret_free(tok);
    headers_free(h);
    return r;
}

#define SETOPT(opt, val)                                                                           \
    do {                                                                                           \
        if ((c = curl_easy_setopt(e, (opt), (val))) != CURLE_OK)                                   \
            goto curl_fail;                                                                        \
    } while (0)

/* Configures the handle for one request. The blobs point into t->sh (NOCOPY). */
static int configure(struct kp_transport *t, const struct kp_http_request *req,
                     struct curl_slist *headers, const char *url, struct xfer *x, bool stream,
                     struct curl_slist **ret_connect_to)
{
    struct kp_transport_shared *sh = t->sh;
    struct curl_slist *connect_to;
    CURL *e = t->easy;
    struct curl_blob blob;
    uint64_t timeout = req->timeout_usec ? req->timeout_usec : sh->timeout_usec;
    CURLcode c;

    curl_easy_reset(e);
    t->errbuf[0] = '\0';
    SETOPT(CURLOPT_ERRORBUFFER, t->errbuf);
    SETOPT(CURLOPT_NOSIGNAL, 1L);
    SETOPT(CURLOPT_URL, url);
    /* The request line's target is set verbatim rather than left to libcurl's URL parser: with a
     * failed allocation inside it, libcurl 7.88 was seen (by the torture sweep in
     * tests/unit/test-transport.c) to send the request without its query string, which would
     * turn a DELETE of a label-selected collection into a DELETE of the whole collection. */
    SETOPT(CURLOPT_REQUEST_TARGET, req->path);
    SETOPT(CURLOPT_PROTOCOLS_STR, sh->plain_http ? "http" : "https");
    SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, "https");
    SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
    /* One request at a time per handle: HTTP/2 would multiplex nothing here, and HTTP/1.1
     * chunked framing is the simplest watch stream to reason about. */
    SETOPT(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    SETOPT(CURLOPT_USERAGENT, sh->user_agent);
    SETOPT(CURLOPT_HTTPHEADER, headers);
    SETOPT(CURLOPT_ACCEPT_ENCODING, NULL);
    SETOPT(CURLOPT_SSL_VERIFYPEER, 1L);
    SETOPT(CURLOPT_SSL_VERIFYHOST, 2L);
    if (sh->ca_pem) {
        blob = (struct curl_blob){
            .data = sh->ca_pem, .len = sh->ca_pem_len, .flags = CURL_BLOB_NOCOPY};
        SETOPT(CURLOPT_CAINFO_BLOB, &blob);
    }
    if (sh->cert_pem) {
        blob = (struct curl_blob){
            .data = sh->cert_pem, .len = sh->cert_pem_len, .flags = CURL_BLOB_NOCOPY};
        SETOPT(CURLOPT_SSLCERT_BLOB, &blob);
        SETOPT(CURLOPT_SSLCERTTYPE, "PEM");
        /* The blob API takes a non-const pointer; libcurl only reads it. */
        blob = (struct curl_blob){.data = (void *)(uintptr_t)kp_secret_reveal(sh->key_pem),
                                  .len = kp_secret_len(sh->key_pem),
                                  .flags = CURL_BLOB_NOCOPY};
        SETOPT(CURLOPT_SSLKEY_BLOB, &blob);
        SETOPT(CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (sh->connect_to) {
        connect_to = curl_slist_append(NULL, sh->connect_to);
        if (!connect_to)
            return -ENOMEM;
        *ret_connect_to = connect_to;
        SETOPT(CURLOPT_CONNECT_TO, connect_to);
    }
    /* Like Go's ProxyFromEnvironment, never send loopback traffic through a proxy. */
    if (sh->loopback)
        SETOPT(CURLOPT_PROXY, "");
    SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
    SETOPT(CURLOPT_TCP_KEEPIDLE, 30L);
    SETOPT(CURLOPT_TCP_KEEPINTVL, 10L);
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS,
           (long)KP_MIN(sh->connect_timeout_usec / 1000, (uint64_t)LONG_MAX));
    if (!stream)
        SETOPT(CURLOPT_TIMEOUT_MS, (long)KP_MIN(KP_MAX(timeout / 1000, 1), (uint64_t)LONG_MAX));
    SETOPT(CURLOPT_HEADERFUNCTION, header_cb);
    SETOPT(CURLOPT_HEADERDATA, x);
    SETOPT(CURLOPT_WRITEFUNCTION, write_cb);
    SETOPT(CURLOPT_WRITEDATA, x);
    SETOPT(CURLOPT_NOPROGRESS, 0L);
    SETOPT(CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
    SETOPT(CURLOPT_XFERINFODATA, x);

    if (strcmp(req->method, "GET") == 0 && !req->body) {
        SETOPT(CURLOPT_HTTPGET, 1L);
    } else if (strcmp(req->method, "DELETE") == 0 && !req->body) {
        SETOPT(CURLOPT_CUSTOMREQUEST, "DELETE");
    } else {
        SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        SETOPT(CURLOPT_POSTFIELDS, req->body ? req->body : "");
        if (strcmp(req->method, "POST") != 0)
            SETOPT(CURLOPT_CUSTOMREQUEST, req->method);
    }
    return 0;
curl_fail:
    return c == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
}

static void describe_abort(struct kp_transport *t, int r, uint64_t idle_usec, size_t max_body)
{
    switch (r) {
    case -ETIMEDOUT:
        (void)snprintf(t->errbuf, sizeof(t->errbuf), "no data for %llu ms (idle deadline)",
                       (unsigned long long)(idle_usec / 1000));
        break;
    case -KP_ELIMIT:
        (void)snprintf(t->errbuf, sizeof(t->errbuf), "response body over %zu bytes", max_body);
        break;
    case -ECANCELED:
        (void)snprintf(t->errbuf, sizeof(t->errbuf), "request cancelled");
        break;
    default:
        (void)snprintf(t->errbuf, sizeof(t->errbuf), "%s", kp_strerror(r));
        break;
    }
}

static int perform(struct kp_transport *t, const struct kp_http_request *req, uint64_t idle_usec,
                   kp_transport_chunk_fn fn, void *userdata, struct kp_http_response *resp)
{
    struct curl_slist *headers = NULL, *connect_to = NULL;
    struct kp_buf url = KP_BUF_INIT((size_t)64 * 1024);
    struct xfer x;
    bool refresh = false;
    uint64_t timeout = req->timeout_usec ? req->timeout_usec : t->sh->timeout_usec;
    CURLcode c;
    int r;

    t->errbuf[0] = '\0';
    if (!req->method || !req->path || req->path[0] != '/' || req->body_len > KP_MAX_HTTP_REQUEST ||
        (!req->body && req->body_len > 0)) {
        r = -EINVAL;
        goto out;
    }
    /* The path goes into the request line as it is: no spaces or control bytes (escaping is
     * the caller's job, see kp_url_escape()). */
    for (const unsigned char *p = (const unsigned char *)req->path; *p; p++)
        if (*p <= 0x20 || *p == 0x7f) {
            r = -EINVAL;
            goto out;
        }
    if ((r = kp_buf_puts(&url, t->sh->url_base)) < 0 || (r = kp_buf_puts(&url, req->path)) < 0)
        goto out;
    if ((r = ratelimit_wait(t->sh, timeout)) < 0)
        goto out;
    for (int attempt = 0; attempt < 2; attempt++) {
        headers_free(headers);
        headers = NULL;
        kp_http_response_done(resp);
        kp_buf_init(&resp->body, req->max_body ? req->max_body : t->sh->max_body);
        if ((r = build_headers(t, req, refresh, &headers)) < 0)
            goto out;
        x = (struct xfer){.resp = resp,
                          .easy = t->easy,
                          .fn = fn,
                          .userdata = userdata,
                          .cancel = req->cancel,
                          .idle_usec = idle_usec,
                          .last_byte_usec = kp_mono_usec()};
        curl_slist_free_all(connect_to);
        connect_to = NULL;
        (void)curl_easy_setopt(t->easy, CURLOPT_CONNECT_TO, NULL);
        if ((r = configure(t, req, headers, kp_buf_str(&url), &x, fn != NULL, &connect_to)) < 0)
            goto out;
        c = curl_easy_perform(t->easy);
        (void)curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &resp->status);
        {
            long n = 0;

            if (curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &n) == CURLE_OK && n > 0)
                t->connections += (uint64_t)n;
        }
        if (x.err < 0) {
            /* Our callback stopped the transfer: libcurl's text would only say so. */
            r = x.err;
            describe_abort(t, r, idle_usec, resp->body.max);
            goto out;
        }
        if ((r = curl_error(c)) < 0)
            goto out;
        /* A 401 may mean the cached token expired: ask for a fresh one once. */
        if (resp->status != 401 || !t->sh->token || refresh)
            break;
        refresh = true;
    }
    r = 0;
out:
    /* The handle keeps pointers to the header list; drop them before freeing it. */
    (void)curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, NULL);
    (void)curl_easy_setopt(t->easy, CURLOPT_CONNECT_TO, NULL);
    headers_free(headers);
    curl_slist_free_all(connect_to);
    kp_buf_done(&url);
    return r;
}

int kp_transport_request(struct kp_transport *t, const struct kp_http_request *req,
                         struct kp_http_response *ret_resp)
{
    struct kp_http_response resp;
    int r;

    kp_http_response_init(&resp);
    r = perform(t, req, 0, NULL, NULL, &resp);
    if (r < 0) {
        kp_http_response_done(&resp);
        return r;
    }
    *ret_resp = resp;
    return 0;
}

int kp_transport_stream(struct kp_transport *t, const struct kp_http_request *req,
                        uint64_t idle_usec, kp_transport_chunk_fn fn, void *userdata,
                        struct kp_http_response *ret_resp)
{
    /* Documented exception to "ret_ only on success": a failed stream still reports the status
     * and body it got, because the caller decodes a Status from them. */
    kp_http_response_init(ret_resp);
    return perform(t, req, idle_usec, fn, userdata, ret_resp);
}
