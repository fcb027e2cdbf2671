/* DESIGN: the HTTP endpoints (contract in server.h).
 *
 * What: libmicrohttpd with its internal polling thread (MHD_USE_INTERNAL_POLLING_THREAD and
 * poll(2)), answering a fixed set of GET paths. This file is the only one that includes
 * <microhttpd.h> (STYLE.md rule 1).
 *
 * Why this way: the endpoints are scraped every few seconds by the kubelet and Prometheus;
 * they must answer even when every worker is busy, so they run on a thread of their own that
 * only reads atomics and published state. A request is answered on the first call of the
 * access handler, before any body is read; since nothing we serve takes a body, none is ever
 * buffered, and the per-connection memory limit bounds the request head.
 *
 * Invariants: the server holds borrowed pointers to the registry and the checks, which the
 * caller keeps alive until kp_http_server_free() returned (it joins the thread). Every socket
 * libmicrohttpd makes is close-on-exec (it uses SOCK_CLOEXEC and accept4 on Linux), and it
 * sends with MSG_NOSIGNAL; the controller ignores SIGPIPE as well. */
#include "http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/str.h"
#include "http/health.h"
#include "http/metrics.h"

#define KP_HTTP_DEFAULT_CONNECTIONS 64
#define KP_HTTP_PER_IP_CONNECTIONS 16
#define KP_HTTP_DEFAULT_TIMEOUT_SEC 10
#define KP_HTTP_CONNECTION_MEMORY (32u << 10)
#define KP_HTTP_MAX_SMALL_BODY (16u << 10)
#define KP_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define KP_TEXT_CONTENT_TYPE "text/plain; charset=utf-8"

struct kp_http_server {
    struct MHD_Daemon *daemon;
    unsigned endpoints;
    struct kp_metrics *metrics;
    struct kp_health *health;
    uint16_t port;
};

/* Sends body (taking it over: it is freed when libmicrohttpd is done with it) with status. */
static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status,
                               const char *content_type, struct kp_buf *body)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;
    size_t len = 0;
    char *data = kp_buf_steal(body, &len);

    if (!data)
        return MHD_NO; /* out of memory: libmicrohttpd closes the connection */
    resp = MHD_create_response_from_buffer_with_free_callback(len, data, kp_free);
    if (!resp) {
        kp_free(data);
        return MHD_NO;
    }
    if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES ||
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES) {
        MHD_destroy_response(resp);
        return MHD_NO;
    }
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp); /* the connection keeps its own reference */
    return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned status, const char *s)
{
    struct kp_buf b = KP_BUF_INIT(KP_HTTP_MAX_SMALL_BODY);

    if (kp_buf_puts(&b, s) < 0)
        return MHD_NO;
    return respond(conn, status, KP_TEXT_CONTENT_TYPE, &b);
}

static enum MHD_Result serve_metrics(struct kp_http_server *s, struct MHD_Connection *conn)
{
    struct kp_buf b = KP_BUF_INIT(KP_MAX_METRICS_BODY);
    int r = kp_metrics_render(s->metrics, &b);

    if (r < 0) {
        kp_buf_done(&b);
        kp_log_error_errno_rl("metrics-render", r, "cannot render metrics");
        return respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot render metrics\n");
    }
    return respond(conn, MHD_HTTP_OK, KP_METRICS_CONTENT_TYPE, &b);
}

static enum MHD_Result serve_readyz(struct kp_http_server *s, struct MHD_Connection *conn)
{
    struct kp_buf b = KP_BUF_INIT(KP_HTTP_MAX_SMALL_BODY);
    bool ready = true;
    /* "?verbose" carries no value, so ask whether the key is present, not for its value. */
    bool verbose = MHD_lookup_connection_value_n(conn, MHD_GET_ARGUMENT_KIND, "verbose",
                                                 strlen("verbose"), NULL, NULL) == MHD_YES;
    int r = 0;

    if (s->health)
        r = kp_health_report(s->health, verbose, &b, &ready);
    else
        r = kp_buf_puts(&b, "ok\n");
    if (r < 0) {
        kp_buf_done(&b);
        return respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot run checks\n");
    }
    return respond(conn, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, KP_TEXT_CONTENT_TYPE,
                   &b);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    struct kp_http_server *s = cls;

    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)req_cls;
    /* Answered on the first call for every request: nothing here reads a body. */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return respond_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    if ((s->endpoints & KP_HTTP_METRICS) && strcmp(url, "/metrics") == 0)
        return serve_metrics(s, conn);
    if ((s->endpoints & KP_HTTP_PROBES) && strcmp(url, "/healthz") == 0)
        return respond_text(conn, MHD_HTTP_OK, "ok\n");
    if ((s->endpoints & KP_HTTP_PROBES) && strcmp(url, "/readyz") == 0)
        return serve_readyz(s, conn);
    return respond_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* libmicrohttpd's own error messages (bind failures, out of memory) as log lines. */
static void KP_PRINTF(2, 0) mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct kp_buf b = KP_BUF_INIT(1024);

    (void)cls;
    if (kp_buf_vprintf(&b, fmt, ap) == 0) {
        while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r'))
            kp_buf_truncate(&b, b.len - 1);
        kp_log_warn_rl("mhd", "http server", KP_LF("detail", kp_buf_str(&b)));
    }
    kp_buf_done(&b);
}

int kp_http_server_start(const struct kp_http_server_opts *o, struct kp_http_server **ret)
{
    struct kp_http_server *s = NULL;
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
    const struct sockaddr *sa;
    const union MHD_DaemonInfo *info;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    const char *addr = o->address && *o->address ? o->address : "0.0.0.0";
    int r = -EINVAL;

    if ((o->endpoints & KP_HTTP_METRICS) && !o->metrics)
        return -EINVAL;
    memset(&sin, 0, sizeof(sin));
    memset(&sin6, 0, sizeof(sin6));
    if (inet_pton(AF_INET, addr, &sin.sin_addr) == 1) {
        sin.sin_family = AF_INET;
        sin.sin_port = htons(o->port);
        sa = (const struct sockaddr *)&sin;
    } else if (inet_pton(AF_INET6, addr, &sin6.sin6_addr) == 1) {
        sin6.sin6_family = AF_INET6;
        sin6.sin6_port = htons(o->port);
        sa = (const struct sockaddr *)&sin6;
        flags |= strcmp(addr, "::") == 0 ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
    } else {
        return -EINVAL;
    }

    s = kp_calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->endpoints = o->endpoints;
    s->metrics = o->metrics;
    s->health = o->health;
    errno = 0;
    s->daemon = MHD_start_daemon(
        flags, o->port, /* apc= */ NULL, NULL, handle, s,
        /* The logger comes first so that every later message goes through it. */
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR, sa,
        MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(o->max_connections ? o->max_connections : KP_HTTP_DEFAULT_CONNECTIONS),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)KP_HTTP_PER_IP_CONNECTIONS,
        MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(o->timeout_sec ? o->timeout_sec : KP_HTTP_DEFAULT_TIMEOUT_SEC),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)KP_HTTP_CONNECTION_MEMORY, MHD_OPTION_END);
    if (!s->daemon) {
        /* libmicrohttpd keeps errno from the failing bind or listen in most cases. */
        r = errno == EADDRINUSE || errno == EACCES || errno == EADDRNOTAVAIL ? -errno : -EIO;
        goto out;
    }
    info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info && info->port ? info->port : o->port;
    *ret = s;
    s = NULL;
    r = 0;
out:
    kp_http_server_free(s);
    return r;
}

uint16_t kp_http_server_port(const struct kp_http_server *s)
{
    return s->port;
}

struct kp_http_server *kp_http_server_free(struct kp_http_server *s)
{
    if (!s)
        return NULL;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    kp_free(s);
    return NULL;
}
