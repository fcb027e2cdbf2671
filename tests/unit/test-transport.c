/* DESIGN: unit tests for k8s/transport.c and the watch loop of k8s/watch.c against a loopback
 * HTTP server in a thread of this process.
 *
 * The server accepts one connection at a time on 127.0.0.1, reads a request (headers and a
 * Content-Length body), keeps its text for the test to inspect and answers with whatever the
 * test's responder writes, then closes the connection. The transport talks plain HTTP to it
 * (allow_plain_http: the one switch that exists for such tests); TLS is covered by the
 * integration tier against the real API server. What is checked: headers sent (Accept,
 * Content-Type, User-Agent, Authorization), the body ceiling, Retry-After, the 401 token
 * refresh, streaming delivery, the idle deadline on a stalled stream, cancellation, and the
 * watch's resourceVersion tracking, ERROR-event mapping and reconnect. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/status.h"
#include "k8s/transport.h"
#include "k8s/watch.h"
#include "kp-test.h"

struct server;
typedef void (*responder_fn)(struct server *s, int fd, unsigned nth);

struct server {
    int lfd;
    uint16_t port;
    pthread_t thread;
    atomic_bool stop;
    responder_fn respond;
    pthread_mutex_t lock; /* protects last and count */
    char last[8192];      /* the last request's text */
    unsigned count;       /* requests served */
};

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        /* MSG_NOSIGNAL: a client that gave up must not kill the test with SIGPIPE. */
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

static void say(int fd, const char *s)
{
    write_all(fd, s, strlen(s));
}

/* Reads one request into buf (headers plus Content-Length body). */
static size_t read_request(int fd, char *buf, size_t size)
{
    size_t len = 0, want = 0;
    char *end;

    while (len < size - 1) {
        ssize_t k = read(fd, buf + len, size - 1 - len);

        if (k <= 0)
            break;
        len += (size_t)k;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
        if (end) {
            const char *cl = strcasestr(buf, "Content-Length:");
            uint64_t n = 0;

            if (cl && cl < end) {
                cl += 15;
                while (*cl == ' ')
                    cl++;
                for (n = 0; *cl >= '0' && *cl <= '9'; cl++)
                    n = n * 10 + (uint64_t)(*cl - '0');
            }
            want = (size_t)(end + 4 - buf) + (size_t)n;
            if (len >= want)
                break;
        }
    }
    buf[len] = '\0';
    return len;
}

static void *server_main(void *arg)
{
    struct server *s = arg;

    while (!atomic_load(&s->stop)) {
        char req[8192];
        unsigned nth;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);

        if (fd < 0)
            continue;
        if (atomic_load(&s->stop)) {
            close(fd);
            break;
        }
        read_request(fd, req, sizeof(req));
        pthread_mutex_lock(&s->lock);
        memcpy(s->last, req, sizeof(req));
        nth = s->count++;
        pthread_mutex_unlock(&s->lock);
        s->respond(s, fd, nth);
        close(fd);
    }
    return NULL;
}

/* 0 or -1; no cmocka assertions, so torture cases can use it. */
static int server_start_quiet(struct server *s, responder_fn respond)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);

    memset(s, 0, sizeof(*s));
    s->respond = respond;
    pthread_mutex_init(&s->lock, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 8) < 0 ||
        getsockname(s->lfd, (struct sockaddr *)&a, &alen) < 0)
        return -1;
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->thread, NULL, server_main, s) == 0 ? 0 : -1;
}

static void server_start(struct server *s, responder_fn respond)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);

    memset(s, 0, sizeof(*s));
    s->respond = respond;
    pthread_mutex_init(&s->lock, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->lfd, 8), 0);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
}

static void server_stop(struct server *s)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(s->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd;

    atomic_store(&s->stop, true);
    /* Wake accept() with one last connection. */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        (void)connect(fd, (struct sockaddr *)&a, sizeof(a));
        close(fd);
    }
    pthread_join(s->thread, NULL);
    close(s->lfd);
    pthread_mutex_destroy(&s->lock);
}

static void server_stop_quiet(struct server *s)
{
    server_stop(s);
}

static const char *server_last(struct server *s)
{
    return s->last; /* read after the request returned: the server is idle by then */
}

static void opts_for(struct server *s, char *url, size_t n, struct kp_transport_opts *o)
{
    snprintf(url, n, "http://127.0.0.1:%u", (unsigned)s->port);
    *o = (struct kp_transport_opts){
        .server = url, .allow_plain_http = true, .timeout_usec = 5 * KP_USEC_PER_SEC};
}

/* --- token source --------------------------------------------------------------------------- */

struct tokens {
    unsigned calls, refreshes;
};

static int token_fn(void *userdata, bool refresh, struct kp_secret **ret)
{
    struct tokens *t = userdata;
    const char *tok = refresh ? "fresh-token-0123" : "stale-token-0123";

    t->calls++;
    if (refresh)
        t->refreshes++;
    return kp_secret_new(tok, strlen(tok), ret);
}

/* --- responders ----------------------------------------------------------------------------- */

static void respond_ok(struct server *s, int fd, unsigned nth)
{
    (void)s;
    (void)nth;
    say(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n"
            "Connection: close\r\n\r\n{\"a\":\"ok\"}\n");
}

static void respond_big(struct server *s, int fd, unsigned nth)
{
    char chunk[4096];

    (void)s;
    (void)nth;
    memset(chunk, 'x', sizeof(chunk));
    say(fd, "HTTP/1.1 200 OK\r\nContent-Length: 65536\r\nConnection: close\r\n\r\n");
    for (int i = 0; i < 16; i++)
        write_all(fd, chunk, sizeof(chunk));
}

static void respond_429(struct server *s, int fd, unsigned nth)
{
    static const char body[] = "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}";
    char head[256];

    (void)s;
    (void)nth;
    snprintf(head, sizeof(head),
             "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n",
             sizeof(body) - 1);
    say(fd, head);
    say(fd, body);
}

static void respond_401_then_ok(struct server *s, int fd, unsigned nth)
{
    if (nth == 0 || !strstr(server_last(s), "Bearer fresh-token-0123")) {
        say(fd, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    respond_ok(s, fd, nth);
}

static void chunk(int fd, const char *s)
{
    char head[32];

    snprintf(head, sizeof(head), "%zx\r\n", strlen(s));
    say(fd, head);
    say(fd, s);
    say(fd, "\r\n");
}

#define WEV(type, rv)                                                                              \
    "{\"type\":\"" type "\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","      \
    "\"resourceVersion\":\"" rv "\"}}}\n"

/* First connection: two events, split mid-line, then the server ends the stream. Second: one
 * more event and an ERROR 410. */
static void respond_watch(struct server *s, int fd, unsigned nth)
{
    static const char two[] = WEV("ADDED", "11") WEV("MODIFIED", "12");

    (void)s;
    say(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n");
    if (nth == 0) {
        char a[64];

        memcpy(a, two, 40);
        a[40] = '\0';
        chunk(fd, a);
        chunk(fd, two + 40);
    } else {
        chunk(fd, WEV("DELETED", "13"));
        chunk(fd, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"reason\":\"Expired\","
                  "\"message\":\"too old resource version: 13 (40)\",\"code\":410}}\n");
    }
    say(fd, "0\r\n\r\n");
}

/* Sends headers and one event, then stalls until the client gives up. */
static void respond_stall(struct server *s, int fd, unsigned nth)
{
    char b[16];

    (void)nth;
    say(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    chunk(fd, WEV("ADDED", "5"));
    /* Wait for the client to close (read returns 0) or the test to stop. */
    while (!atomic_load(&s->stop) && read(fd, b, sizeof(b)) > 0)
        ;
}

/* --- tests ---------------------------------------------------------------------------------- */

static void test_request_headers(void **state)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_transport *t = NULL;
    struct kp_http_response resp;
    struct tokens tk = {0};
    char url[64];
    struct kp_http_request req = {
        .method = "PUT", .path = "/api/v1/x?y=1", .body = "{}", .body_len = 2};

    (void)state;
    server_start(&s, respond_ok);
    opts_for(&s, url, sizeof(url), &o);
    o.token = token_fn;
    o.token_userdata = &tk;
    assert_int_equal(kp_transport_new(&o, &t), 0);
    assert_int_equal(kp_transport_request(t, &req, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_string_equal(kp_buf_str(&resp.body), "{\"a\":\"ok\"}\n");
    assert_string_equal(resp.content_type, "application/json");
    kp_http_response_done(&resp);
    assert_non_null(strstr(server_last(&s), "PUT /api/v1/x?y=1 HTTP/1.1\r\n"));
    assert_non_null(strstr(server_last(&s), "Accept: application/json\r\n"));
    assert_non_null(strstr(server_last(&s), "Content-Type: application/json\r\n"));
    assert_non_null(strstr(server_last(&s), "User-Agent: kpssh/"));
    assert_non_null(strstr(server_last(&s), "Authorization: Bearer stale-token-0123\r\n"));
    assert_non_null(strstr(server_last(&s), "\r\n\r\n{}"));
    assert_int_equal(tk.calls, 1);
    t = kp_transport_free(t);

    /* tls-server-name: the request names that host while the connection goes to the server's. */
    o.tls_server_name = "apiserver.example";
    assert_int_equal(kp_transport_new(&o, &t), 0);
    req = (struct kp_http_request){.method = "GET", .path = "/version"};
    assert_int_equal(kp_transport_request(t, &req, &resp), 0);
    kp_http_response_done(&resp);
    assert_non_null(strstr(server_last(&s), "Host: apiserver.example:"));
    assert_string_equal(kp_transport_server(t), url);
    t = kp_transport_free(t);
    o.tls_server_name = "bad:name";
    assert_int_equal(kp_transport_new(&o, &t), -EINVAL);
    server_stop(&s);
}

static void test_body_ceiling(void **state)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_transport *t = NULL;
    struct kp_http_response resp;
    char url[64];
    struct kp_http_request req = {.method = "GET", .path = "/big", .max_body = 1000};

    (void)state;
    server_start(&s, respond_big);
    opts_for(&s, url, sizeof(url), &o);
    assert_int_equal(kp_transport_new(&o, &t), 0);
    assert_int_equal(kp_transport_request(t, &req, &resp), -KP_ELIMIT);
    req.max_body = 65536;
    assert_int_equal(kp_transport_request(t, &req, &resp), 0);
    assert_int_equal(resp.body.len, 65536);
    kp_http_response_done(&resp);
    t = kp_transport_free(t);
    server_stop(&s);
}

static void test_retry_after_and_status(void **state)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_client *c = NULL;
    struct kp_error e = KP_ERROR_INIT;
    json_t *obj = NULL;
    char url[64];

    (void)state;
    server_start(&s, respond_429);
    opts_for(&s, url, sizeof(url), &o);
    assert_int_equal(kp_client_new(&o, &c), 0);
    assert_int_equal(kp_client_get(c, &KP_RES_CONFIGMAP, "ns", "x", &obj, &e), -EAGAIN);
    assert_null(obj);
    assert_int_equal(e.code, 429);
    assert_int_equal(e.retry_after_sec, 3);
    assert_string_equal(e.reason, "TooManyRequests");
    assert_non_null(strstr(server_last(&s), "GET /api/v1/namespaces/ns/configmaps/x "));
    kp_error_done(&e);
    c = kp_client_free(c);
    server_stop(&s);
}

static void test_token_refresh_on_401(void **state)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_client *c = NULL;
    struct tokens tk = {0};
    json_t *obj = NULL;
    char url[64];

    (void)state;
    server_start(&s, respond_401_then_ok);
    opts_for(&s, url, sizeof(url), &o);
    o.token = token_fn;
    o.token_userdata = &tk;
    assert_int_equal(kp_client_new(&o, &c), 0);
    assert_int_equal(kp_client_get(c, &KP_RES_NODE, NULL, "n", &obj, NULL), 0);
    obj = kp_json_unref(obj);
    assert_int_equal(tk.calls, 2);
    assert_int_equal(tk.refreshes, 1);
    c = kp_client_free(c);
    server_stop(&s);
}

static void test_connection_refused(void **state)
{
    struct kp_transport_opts o = {.server = "http://127.0.0.1:1", .allow_plain_http = true};
    struct kp_client *c = NULL;
    struct kp_error e = KP_ERROR_INIT;

    (void)state;
    assert_int_equal(kp_client_new(&o, &c), 0);
    assert_int_equal(kp_client_delete(c, &KP_RES_NODE, NULL, "n", NULL, &e), -ECONNREFUSED);
    assert_int_equal(e.errnum, -ECONNREFUSED);
    assert_int_equal(e.code, 0);
    assert_non_null(e.message);
    kp_error_done(&e);
    c = kp_client_free(c);
}

struct seen {
    struct kp_buf log;
};

static int on_event(const struct kp_watch_event *ev, void *userdata)
{
    struct seen *s = userdata;

    return kp_buf_printf(&s->log, "%s:%s ", kp_watch_event_type_name(ev->type),
                         ev->resource_version);
}

static void test_watch_resume_and_expire(void **state)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_client *c = NULL;
    struct kp_watch *w = NULL;
    struct kp_error e = KP_ERROR_INIT;
    struct seen seen = {.log = KP_BUF_INIT(4096)};
    struct kp_watch_opts wo = {.resource_version = "10", .timeout_seconds = 30};
    char url[64];

    (void)state;
    server_start(&s, respond_watch);
    opts_for(&s, url, sizeof(url), &o);
    assert_int_equal(kp_client_new(&o, &c), 0);
    assert_int_equal(kp_watch_new(c, &KP_RES_CONFIGMAP, "t", &wo, &w), 0);
    /* The stream ends normally, the watch reconnects from 12, then the server says 410. */
    assert_int_equal(kp_watch_run(w, on_event, &seen, &e), -KP_EEXPIRED);
    assert_string_equal(kp_buf_str(&seen.log), "ADDED:11 MODIFIED:12 DELETED:13 ");
    assert_string_equal(kp_watch_resource_version(w), "13");
    assert_string_equal(e.reason, "Expired");
    assert_int_equal(e.code, 410);
    assert_non_null(strstr(server_last(&s), "resourceVersion=12"));
    assert_non_null(strstr(server_last(&s), "watch=1"));
    assert_non_null(strstr(server_last(&s), "allowWatchBookmarks=true"));
    assert_non_null(strstr(server_last(&s), "timeoutSeconds=30"));
    kp_error_done(&e);
    kp_buf_done(&seen.log);
    w = kp_watch_free(w);
    c = kp_client_free(c);
    server_stop(&s);
}

static void test_watch_idle_deadline(void **state)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_client *c = NULL;
    struct kp_watch *w = NULL;
    struct kp_error e = KP_ERROR_INIT;
    struct seen seen = {.log = KP_BUF_INIT(4096)};
    struct kp_watch_opts wo = {.timeout_seconds = 30, .idle_usec = 1500 * 1000};
    size_t n = 0;
    char url[64];

    (void)state;
    server_start(&s, respond_stall);
    opts_for(&s, url, sizeof(url), &o);
    assert_int_equal(kp_client_new(&o, &c), 0);
    assert_int_equal(kp_watch_new(c, &KP_RES_POD, NULL, &wo, &w), 0);
    assert_int_equal(kp_watch_once(w, on_event, &seen, &n, &e), -ETIMEDOUT);
    assert_non_null(strstr(e.message, "idle deadline"));
    assert_int_equal(n, 1);
    assert_string_equal(kp_watch_resource_version(w), "5");
    kp_error_done(&e);
    kp_buf_done(&seen.log);
    w = kp_watch_free(w);
    c = kp_client_free(c);
    server_stop(&s);
}

static void test_watch_cancel(void **state)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_client *c = NULL;
    struct kp_watch *w = NULL;
    struct seen seen = {.log = KP_BUF_INIT(4096)};
    atomic_bool cancel;
    struct kp_watch_opts wo = {.timeout_seconds = 30, .cancel = &cancel};
    char url[64];

    (void)state;
    atomic_init(&cancel, true);
    server_start(&s, respond_stall);
    opts_for(&s, url, sizeof(url), &o);
    assert_int_equal(kp_client_new(&o, &c), 0);
    assert_int_equal(kp_watch_new(c, &KP_RES_POD, NULL, &wo, &w), 0);
    assert_int_equal(kp_watch_run(w, on_event, &seen, NULL), -ECANCELED);
    kp_buf_done(&seen.log);
    w = kp_watch_free(w);
    c = kp_client_free(c);
    server_stop(&s);
}

/* Answers a list in two pages, then objects, then a Status. */
static void respond_mixed(struct server *s, int fd, unsigned nth)
{
    static const char page1[] = "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":"
                                "\"7\",\"continue\":\"abc\"},\"items\":[{\"metadata\":{"
                                "\"name\":\"a\"}}]}";
    static const char page2[] = "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":"
                                "\"7\"},\"items\":[{\"metadata\":{\"name\":\"b\"}}]}";
    static const char status[] = "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"code\":409,"
                                 "\"details\":{\"causes\":[{\"reason\":\"x\"}]}}";
    const char *body, *code;
    char head[256];

    if (strstr(s->last, "continue=abc")) {
        body = page2;
        code = "200 OK";
    } else if (strstr(s->last, "GET /api/v1/namespaces/t/configmaps?")) {
        body = page1;
        code = "200 OK";
    } else if (strstr(s->last, "PUT ")) {
        body = status;
        code = "409 Conflict";
    } else {
        body = page2;
        code = "200 OK";
    }
    (void)nth;
    snprintf(head, sizeof(head), "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
             code, strlen(body));
    say(fd, head);
    say(fd, body);
}

static int count_items(const struct kp_list_page *pg, void *userdata)
{
    size_t *n = userdata;

    *n += kp_json_array_size(pg->items);
    return 0;
}

/* A list of two pages, a get and a refused update, with each allocation failing in turn: every
 * path must end in 0 or a negative error and leave nothing allocated. */
static int torture_client(void)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_client *c = NULL;
    struct kp_error e = KP_ERROR_INIT;
    json_t *obj = NULL;
    char url[64], *rv = NULL;
    size_t n = 0;
    int r;

    if (server_start_quiet(&s, respond_mixed) < 0)
        return 1;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)s.port);
    o = (struct kp_transport_opts){
        .server = url, .allow_plain_http = true, .timeout_usec = 5 * KP_USEC_PER_SEC};
    if ((r = kp_client_new(&o, &c)) < 0)
        goto out;
    if ((r = kp_client_list(c, &KP_RES_CONFIGMAP, "t", NULL, count_items, &n, &rv, &e)) < 0)
        goto out;
    if (n != 2 || strcmp(rv, "7") != 0) {
        r = 1;
        goto out;
    }
    if ((r = kp_client_get(c, &KP_RES_CONFIGMAP, "t", "a", &obj, &e)) < 0)
        goto out;
    r = kp_client_update(c, &KP_RES_CONFIGMAP, "t", "a", obj, NULL, &e);
    /* Without memory to decode the Status the error code still arrives, without the reason. */
    if (r == -KP_ECONFLICT)
        r = kp_error_has_reason(&e, "Conflict") || kp_alloc_failed() ? 0 : 1;
    else if (r == 0)
        r = 1;
out:
    kp_json_unref(obj);
    kp_free(rv);
    kp_error_done(&e);
    kp_client_free(c);
    server_stop_quiet(&s);
    /* libcurl's global state is allocated by the first transport; release it so the live count
     * balances. */
    kp_transport_global_cleanup();
    return r;
}

struct hammer {
    struct kp_transport *t;
    int ok;
};

static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    struct kp_http_request req = {.method = "GET", .path = "/x"};

    for (int i = 0; i < 10; i++) {
        struct kp_http_response resp;

        if (kp_transport_request(h->t, &req, &resp) == 0 && resp.status == 200)
            h->ok++;
        kp_http_response_done(&resp);
    }
    /* The last reference to the shared configuration may be dropped on any thread. */
    h->t = kp_transport_free(h->t);
    return NULL;
}

/* Clones on four threads share one configuration and one token bucket (run under TSan by the
 * tsan preset): every request succeeds and the originating transport may go first. */
static void test_clones_share_limiter(void **state)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_transport *t = NULL;
    struct hammer h[4];
    pthread_t th[4];
    char url[64];

    (void)state;
    server_start(&s, respond_ok);
    opts_for(&s, url, sizeof(url), &o);
    o.qps = 1000;
    o.burst = 5;
    assert_int_equal(kp_transport_new(&o, &t), 0);
    for (int i = 0; i < 4; i++) {
        h[i] = (struct hammer){.ok = 0};
        assert_int_equal(kp_transport_clone(t, &h[i].t), 0);
    }
    t = kp_transport_free(t);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_main, &h[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(h[i].ok, 10);
    }
    server_stop(&s);
}

static atomic_bool empty_cancel;

/* An empty watch stream, ended at once; the third one also cancels the watch. */
static void respond_empty(struct server *s, int fd, unsigned nth)
{
    (void)s;
    say(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    if (nth == 2)
        atomic_store(&empty_cancel, true);
}

/* A server that ends every stream at once without an event must not be hammered: the watch
 * backs off between such streams (each wait is at least half the 800 ms base). */
static void test_watch_empty_streams_back_off(void **state)
{
    struct server s;
    struct kp_transport_opts o;
    struct kp_client *c = NULL;
    struct kp_watch *w = NULL;
    struct seen seen = {.log = KP_BUF_INIT(4096)};
    struct kp_watch_opts wo = {.timeout_seconds = 30, .cancel = &empty_cancel};
    uint64_t t0;
    char url[64];

    (void)state;
    atomic_init(&empty_cancel, false);
    server_start(&s, respond_empty);
    opts_for(&s, url, sizeof(url), &o);
    assert_int_equal(kp_client_new(&o, &c), 0);
    assert_int_equal(kp_watch_new(c, &KP_RES_POD, NULL, &wo, &w), 0);
    t0 = kp_mono_usec();
    assert_int_equal(kp_watch_run(w, on_event, &seen, NULL), -ECANCELED);
    assert_int_equal(s.count, 3);
    assert_true(kp_mono_usec() - t0 >= 2 * KP_WATCH_BACKOFF_BASE_USEC / 2);
    kp_buf_done(&seen.log);
    w = kp_watch_free(w);
    c = kp_client_free(c);
    server_stop(&s);
}

static int teardown_all(void **state)
{
    (void)state;
    kp_transport_global_cleanup();
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_headers),
        cmocka_unit_test(test_body_ceiling),
        cmocka_unit_test(test_retry_after_and_status),
        cmocka_unit_test(test_token_refresh_on_401),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_watch_resume_and_expire),
        cmocka_unit_test(test_watch_idle_deadline),
        cmocka_unit_test(test_watch_cancel),
        cmocka_unit_test(test_clones_share_limiter),
        cmocka_unit_test_teardown(test_watch_empty_streams_back_off, teardown_all),
    };

    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_client),
    };

    return kp_test_main("transport", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
