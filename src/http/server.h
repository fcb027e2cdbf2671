/* http/server.h: the controller's HTTP endpoints over libmicrohttpd.
 *
 *   GET /metrics   the registry in Prometheus text format 0.0.4 (http/metrics.h)
 *   GET /healthz   200 "ok": the process is alive and its HTTP thread answers
 *   GET /readyz    200 when every readiness check passes (http/health.h), else 503 with the
 *                  list of checks and which are not ready; "?verbose" lists them on 200 too
 *   anything else  404; a method other than GET or HEAD 405
 *
 * Bounded: at most max_connections connections (and 16 from one address), each idle at most
 * timeout_sec, each with 32 KiB for its request head; bodies are never read; a /metrics body
 * stops at KP_MAX_METRICS_BODY (500 then, and an error logged).
 *
 * Threads: one libmicrohttpd polling thread per server (STYLE.md section 4). It reads the
 * registry and runs the checks; it owns nothing else. Start and free belong to the main thread.
 * libmicrohttpd allocates with malloc, not kp_malloc: its memory is outside the torture sweep. */
#ifndef KP_HTTP_SERVER_H
#define KP_HTTP_SERVER_H

#include <stdint.h>

#include "base/macro.h"

struct kp_health;
struct kp_metrics;
struct kp_http_server;

enum kp_http_endpoints {
    KP_HTTP_METRICS = 1 << 0, /* /metrics */
    KP_HTTP_PROBES = 1 << 1,  /* /healthz and /readyz */
};

struct kp_http_server_opts {
    const char *address;        /* numeric IPv4 or IPv6 address; NULL, "" or "0.0.0.0": every
                                 * IPv4 address; "::": every IPv4 and IPv6 address */
    uint16_t port;              /* 0: a free port (kp_http_server_port() says which) */
    unsigned endpoints;         /* enum kp_http_endpoints */
    struct kp_metrics *metrics; /* required with KP_HTTP_METRICS; borrowed */
    struct kp_health *health;   /* NULL: /readyz always ready; borrowed */
    unsigned max_connections;   /* 0: 64 */
    unsigned timeout_sec;       /* 0: 10 */
};

/* Binds and starts serving on a thread of its own. The registry and the checks must outlive
 * the server. 0, -EINVAL (bad address or options), -EADDRINUSE, -EACCES or -EIO (the daemon
 * did not start; libmicrohttpd's reason is logged), -ENOMEM. Main thread. */
int kp_http_server_start(const struct kp_http_server_opts *opts, struct kp_http_server **ret) KP_WUR
    KP_NONNULL(1, 2);

/* The port bound (the one picked when opts->port was 0). */
uint16_t kp_http_server_port(const struct kp_http_server *s) KP_NONNULL(1);

/* Stops serving (closing the listening socket and every connection, joining the thread) and
 * frees. Accepts and returns NULL. Main thread. */
struct kp_http_server *kp_http_server_free(struct kp_http_server *s);

#endif
