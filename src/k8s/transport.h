/* k8s/transport.h: HTTPS to the Kubernetes API server over libcurl.
 *
 * This is the only module that sees libcurl (STYLE.md rule 1). It knows nothing of Kubernetes
 * objects: it moves bytes to and from one server with TLS always verified, a bearer token from a
 * callback, a per-request deadline, a ceiling on every response body and a client-side QPS/burst
 * limit. A status code, whatever it is, is a completed exchange; the caller (k8s/client.c) turns
 * non-2xx answers into errors through k8s/status.h.
 *
 * Threads: a struct kp_transport (one curl easy handle, reused so connections are kept alive) is
 * owned by one thread at a time. kp_transport_clone() makes another one for another thread that
 * shares the immutable configuration (server, CA, client certificate and key, token source) and
 * the rate limiter; those shared parts are reference-counted and safe from any thread.
 *
 * Paths go into the HTTP request line verbatim (CURLOPT_REQUEST_TARGET), so they must be escaped
 * by the caller (k8s/client.h does); bytes <= 0x20 and 0x7f are refused. libcurl runs with
 * CURLOPT_NOSIGNAL; the process should ignore SIGPIPE as base/log.h already asks. */
#ifndef KP_K8S_TRANSPORT_H
#define KP_K8S_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/macro.h"
#include "base/time.h"

struct kp_secret;
struct kp_transport;

/* Ceiling of a buffered response body: a LIST page of 500 large objects fits with room. */
#define KP_MAX_HTTP_BODY (32u << 20)
/* Ceiling of a request body we send (the server's own limit is 3 MiB). */
#define KP_MAX_HTTP_REQUEST (4u << 20)
/* Default deadline of one request and of connection set-up (TCP + TLS). */
#define KP_TRANSPORT_TIMEOUT_USEC (30 * KP_USEC_PER_SEC)
#define KP_TRANSPORT_CONNECT_TIMEOUT_USEC (10 * KP_USEC_PER_SEC)
/* client-go's defaults. */
#define KP_TRANSPORT_QPS 5.0
#define KP_TRANSPORT_BURST 10

/* Supplies the bearer token for a request. Called before every request (so an exec credential or
 * a rotated service-account token is picked up) from whichever thread issues it, so it must be
 * thread-safe and should cache. refresh is true after the server answered 401 Unauthorized with
 * the previous token: drop any cached token and fetch a new one. On success *ret_token holds a
 * new secret the transport frees; a NULL *ret_token means "send no Authorization header".
 * Returns 0 or a negative error, which fails the request with that error. */
typedef int (*kp_transport_token_fn)(void *userdata, bool refresh, struct kp_secret **ret_token);

/* What a transport needs; plain data owned by the caller and copied by kp_transport_new().
 * Every PEM is bytes (not a path): configuration has already read the files. */
struct kp_transport_opts {
    const char *server; /* "https://host:port" (an http:// URL is accepted for loopback
                             * test servers only when allow_plain_http is set) */
    const char *ca_pem; /* CA bundle; NULL: the system trust store */
    size_t ca_pem_len;
    const char *cert_pem; /* client certificate; NULL: none */
    size_t cert_pem_len;
    const struct kp_secret *key_pem; /* client key, required with cert_pem */
    const char *tls_server_name;     /* verify the server's certificate for this name (and send
                                      * it as SNI and Host) while connecting to server's host;
                                      * NULL: server's host */
    bool insecure_skip_tls_verify;   /* refused: kp_transport_new() fails with -EPERM */
    bool allow_plain_http;           /* tests against a loopback HTTP server */
    kp_transport_token_fn token;     /* NULL: no bearer token */
    void *token_userdata;            /* must outlive every transport sharing it */
    const char *user_agent;          /* NULL: "kpssh/<version>" */
    uint64_t timeout_usec;           /* 0: KP_TRANSPORT_TIMEOUT_USEC */
    uint64_t connect_timeout_usec;   /* 0: KP_TRANSPORT_CONNECT_TIMEOUT_USEC */
    size_t max_body;                 /* 0: KP_MAX_HTTP_BODY */
    double qps;                      /* <= 0: no client-side limit */
    unsigned burst;                  /* 0 with qps > 0: 1 */
};

/* One request. path starts with '/' and carries its query, already escaped (k8s/client.c builds
 * it). The body, when present, is sent with content_type (NULL: application/json). */
struct kp_http_request {
    const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE" */
    const char *path;
    const char *content_type;  /* for the body; NULL: application/json */
    const char *accept;        /* NULL: application/json */
    const void *body;          /* NULL: no body */
    size_t body_len;           /* <= KP_MAX_HTTP_REQUEST */
    uint64_t timeout_usec;     /* 0: the transport's default; for streams it bounds only the
                               * rate-limit wait (idle_usec covers the rest) */
    size_t max_body;           /* 0: the transport's default */
    const atomic_bool *cancel; /* optional; when it becomes true the request ends with
                                * -ECANCELED within about a second */
};

/* A completed exchange. Filled by the transport; release with kp_http_response_done(). */
struct kp_http_response {
    long status;              /* HTTP status code */
    struct kp_buf body;       /* the body (for streams: only a non-2xx body) */
    uint64_t retry_after_sec; /* Retry-After in seconds (0 when absent or not a number) */
    char *content_type;       /* Content-Type, or NULL */
};

void kp_http_response_init(struct kp_http_response *resp);
void kp_http_response_done(struct kp_http_response *resp);

/* Creates a transport for the calling thread. 0, -EPERM (insecure-skip-tls-verify or plain http
 * not allowed), -EINVAL (bad options), -ENOMEM. Thread-safe (global libcurl set-up happens once,
 * with libcurl's allocations routed to kp_malloc). */
int kp_transport_new(const struct kp_transport_opts *opts, struct kp_transport **ret) KP_WUR;
/* A new transport for another thread sharing t's configuration and rate limiter. 0 or -ENOMEM.
 * May be called by t's owner only. */
int kp_transport_clone(struct kp_transport *t, struct kp_transport **ret) KP_WUR;
/* Frees the handle and drops the shared configuration; accepts and returns NULL. */
struct kp_transport *kp_transport_free(struct kp_transport *t);

/* Performs one buffered request: waits for a rate-limit token (failing with -ETIMEDOUT if the
 * wait would pass the request's deadline), sends, and reads the whole body under the ceiling.
 * 0 when the exchange completed (any status; *ret_resp then filled and owned by the caller), or
 * -ETIMEDOUT, -ECONNREFUSED, -ECONNRESET, -EHOSTUNREACH, -KP_EAUTH (TLS verification failed),
 * -KP_ELIMIT (body past the ceiling), -ECANCELED, -ENOMEM, -EIO (other transport failures;
 * kp_transport_last_error() names them). On 401 the token callback is asked once for a fresh
 * token and the request is repeated. Owner thread only. */
int kp_transport_request(struct kp_transport *t, const struct kp_http_request *req,
                         struct kp_http_response *ret_resp) KP_WUR;

/* Receives each chunk of a 2xx streaming body in arrival order. Returns 0 to go on or a
 * negative error, which ends the stream and is returned by kp_transport_stream(). */
typedef int (*kp_transport_chunk_fn)(const char *p, size_t n, void *userdata);

/* A streaming request (watch). A 2xx body goes chunk by chunk to fn; any other status is
 * buffered into ret_resp->body (under the ceiling) for Status decoding. The stream ends when the
 * server ends it (0), when fn fails (its error), when no byte arrived for idle_usec
 * (-ETIMEDOUT: a silently dead connection), on cancel (-ECANCELED) or on the errors of
 * kp_transport_request(). *ret_resp is filled whenever response headers arrived, even when the
 * return is negative (status 0 otherwise); the caller always calls kp_http_response_done().
 * Owner thread only; fn runs on it. */
int kp_transport_stream(struct kp_transport *t, const struct kp_http_request *req,
                        uint64_t idle_usec, kp_transport_chunk_fn fn, void *userdata,
                        struct kp_http_response *ret_resp) KP_WUR;

/* libcurl's description of the last transport failure on t ("" when none). Valid until the next
 * request on t. Never contains a token. */
const char *kp_transport_last_error(const struct kp_transport *t);

/* New connections t has opened so far (TCP + TLS handshakes); a kept-alive connection reused
 * by a request does not count. For tests and metrics. Owner thread. */
uint64_t kp_transport_connections(const struct kp_transport *t);

/* The server URL the transport talks to (no trailing slash), as configured. */
const char *kp_transport_server(const struct kp_transport *t);

/* The ceiling of a buffered response body (opts.max_body or KP_MAX_HTTP_BODY). Any thread. */
size_t kp_transport_max_body(const struct kp_transport *t);

/* Releases libcurl's global state. Tests only, after every transport is freed, so leak counts
 * balance; the daemon never calls it. Main thread. */
void kp_transport_global_cleanup(void);

/* Token bucket, exposed for tests: qps tokens per second up to burst. kp_ratelimit_reserve()
 * takes one token and returns how many microseconds the caller must wait before using it
 * (0 when one was available), as of now_usec (monotonic). */
struct kp_ratelimit {
    double qps;
    double burst;
    double tokens;
    uint64_t last_usec;
};
void kp_ratelimit_init(struct kp_ratelimit *rl, double qps, unsigned burst, uint64_t now_usec);
uint64_t kp_ratelimit_reserve(struct kp_ratelimit *rl, uint64_t now_usec);

#endif
