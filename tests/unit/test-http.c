/* Tests for http/server.h and http/health.h: a real libmicrohttpd server on 127.0.0.1 with a
 * port the kernel picks, fetched with a raw socket (one request per connection, read to EOF).
 * Covers /metrics (status, content type, body), /healthz, /readyz (503 naming what is not
 * ready, 200 once it is, ?verbose), 404 and 405, endpoint selection, bad addresses and a port
 * already in use. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/str.h"
#include "http/health.h"
#include "http/metrics.h"
#include "http/server.h"

struct reply {
    int status;
    char *head; /* status line and headers */
    char *body;
};

static void reply_done(struct reply *r)
{
    kp_free(r->head);
    kp_free(r->body);
}

/* One request over a fresh connection; the whole answer is read until the server closes. */
static struct reply fetch(uint16_t port, const char *method, const char *path)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct kp_buf req = KP_BUF_INIT(1024), resp = KP_BUF_INIT(1u << 20);
    struct reply rep = {0};
    char chunk[4096];
    const char *sep;
    ssize_t n;
    int fd;

    assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr), 1);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(kp_buf_printf(&req,
                                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                                   method, path),
                     0);
    assert_int_equal(send(fd, req.data, req.len, MSG_NOSIGNAL), (ssize_t)req.len);
    while ((n = read(fd, chunk, sizeof(chunk))) > 0)
        assert_int_equal(kp_buf_append(&resp, chunk, (size_t)n), 0);
    assert_int_equal(n, 0);
    close(fd);
    kp_buf_done(&req);

    sep = strstr(kp_buf_str(&resp), "\r\n\r\n");
    assert_non_null(sep);
    rep.head = kp_strndup(resp.data, (size_t)(sep - resp.data));
    rep.body = kp_strdup(sep + 4);
    assert_non_null(rep.head);
    assert_non_null(rep.body);
    assert_true(strncmp(rep.head, "HTTP/1.1 ", 9) == 0);
    assert_int_equal(kp_parse_u32(rep.head + 9, 3, (uint32_t *)&rep.status), 0);
    kp_buf_done(&resp);
    return rep;
}

struct fixture {
    struct kp_metrics *metrics;
    struct kp_health *health;
    struct kp_http_server *server;
    atomic_bool informers, controllers;
};

static struct fixture *fixture_new(unsigned endpoints)
{
    struct fixture *f = kp_calloc(1, sizeof(*f));
    struct kp_metric *c = NULL;

    assert_non_null(f);
    atomic_init(&f->informers, true);
    atomic_init(&f->controllers, false);
    assert_int_equal(kp_metrics_new(&f->metrics), 0);
    assert_int_equal(kp_metrics_register(f->metrics,
                                         &(struct kp_metric_opts){.name = "kpssh_test_total",
                                                                  .help = "A test counter.",
                                                                  .type = KP_METRIC_COUNTER},
                                         &c),
                     0);
    kp_counter_add(kp_metric_series(c), 7);
    assert_int_equal(kp_health_new(&f->health), 0);
    assert_int_equal(
        kp_health_add_check(f->health, "informers", kp_health_check_flag, &f->informers), 0);
    assert_int_equal(
        kp_health_add_check(f->health, "controllers", kp_health_check_flag, &f->controllers), 0);
    assert_int_equal(kp_http_server_start(&(struct kp_http_server_opts){.address = "127.0.0.1",
                                                                        .endpoints = endpoints,
                                                                        .metrics = f->metrics,
                                                                        .health = f->health},
                                          &f->server),
                     0);
    assert_true(kp_http_server_port(f->server) != 0);
    return f;
}

static void fixture_free(struct fixture *f)
{
    kp_http_server_free(f->server);
    kp_health_free(f->health);
    kp_metrics_free(f->metrics);
    kp_free(f);
}

static void test_endpoints(void **state)
{
    struct fixture *f = fixture_new(KP_HTTP_METRICS | KP_HTTP_PROBES);
    uint16_t port = kp_http_server_port(f->server);
    struct reply r;

    (void)state;
    r = fetch(port, "GET", "/healthz");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    reply_done(&r);

    r = fetch(port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    assert_non_null(strcasestr(r.head, "\r\nContent-Type: text/plain; version=0.0.4"));
    assert_string_equal(r.body, "# HELP kpssh_test_total A test counter.\n"
                                "# TYPE kpssh_test_total counter\n"
                                "kpssh_test_total 7\n");
    reply_done(&r);

    r = fetch(port, "HEAD", "/metrics");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "");
    reply_done(&r);

    r = fetch(port, "GET", "/nope");
    assert_int_equal(r.status, 404);
    reply_done(&r);
    r = fetch(port, "GET", "/metrics/x");
    assert_int_equal(r.status, 404);
    reply_done(&r);
    r = fetch(port, "POST", "/metrics");
    assert_int_equal(r.status, 405);
    reply_done(&r);
    fixture_free(f);
}

static void test_readyz(void **state)
{
    struct fixture *f = fixture_new(KP_HTTP_PROBES);
    uint16_t port = kp_http_server_port(f->server);
    struct reply r;

    (void)state;
    r = fetch(port, "GET", "/readyz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "[+]informers ok\n[-]controllers not ready\nreadyz check failed\n");
    reply_done(&r);

    atomic_store(&f->controllers, true);
    r = fetch(port, "GET", "/readyz");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    reply_done(&r);
    r = fetch(port, "GET", "/readyz?verbose");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "[+]informers ok\n[+]controllers ok\nreadyz check passed\n");
    reply_done(&r);

    atomic_store(&f->informers, false);
    r = fetch(port, "GET", "/readyz");
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "[-]informers not ready\n"));
    reply_done(&r);

    /* A probes-only server has no /metrics. */
    r = fetch(port, "GET", "/metrics");
    assert_int_equal(r.status, 404);
    reply_done(&r);
    fixture_free(f);
}

static void test_metrics_only(void **state)
{
    struct fixture *f = fixture_new(KP_HTTP_METRICS);
    struct reply r;

    (void)state;
    r = fetch(kp_http_server_port(f->server), "GET", "/healthz");
    assert_int_equal(r.status, 404);
    reply_done(&r);
    fixture_free(f);
}

static void test_health_rules(void **state)
{
    struct kp_health *h = NULL;
    atomic_bool yes = true;
    struct kp_buf b = KP_BUF_INIT(1024);
    bool ready = false;

    (void)state;
    assert_int_equal(kp_health_new(&h), 0);
    assert_int_equal(kp_health_report(h, false, &b, &ready), 0);
    assert_true(ready);
    assert_string_equal(kp_buf_str(&b), "ok\n");
    assert_int_equal(kp_health_add_check(h, "a", kp_health_check_flag, &yes), 0);
    assert_int_equal(kp_health_add_check(h, "a", kp_health_check_flag, &yes), -EINVAL);
    assert_int_equal(kp_health_add_check(h, "Bad Name", kp_health_check_flag, &yes), -EINVAL);
    assert_int_equal(kp_health_add_check(h, "", kp_health_check_flag, &yes), -EINVAL);
    kp_buf_done(&b);
    kp_health_free(h);
}

static void test_bad_address_and_port_in_use(void **state)
{
    struct fixture *f = fixture_new(KP_HTTP_PROBES);
    struct kp_http_server *s = NULL;

    (void)state;
    assert_int_equal(
        kp_http_server_start(
            &(struct kp_http_server_opts){.address = "not-an-ip", .endpoints = KP_HTTP_PROBES}, &s),
        -EINVAL);
    assert_int_equal(
        kp_http_server_start(
            &(struct kp_http_server_opts){.address = "127.0.0.1", .endpoints = KP_HTTP_METRICS},
            &s),
        -EINVAL); /* metrics without a registry */
    assert_int_equal(
        kp_http_server_start(&(struct kp_http_server_opts){.address = "127.0.0.1",
                                                           .port = kp_http_server_port(f->server),
                                                           .endpoints = KP_HTTP_PROBES},
                             &s),
        -EADDRINUSE);
    assert_null(s);
    /* IPv6 loopback works when the host has it; "::1" must at least parse. */
    if (kp_http_server_start(
            &(struct kp_http_server_opts){.address = "::1", .endpoints = KP_HTTP_PROBES}, &s) == 0)
        s = kp_http_server_free(s);
    fixture_free(f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_readyz),
        cmocka_unit_test(test_metrics_only),
        cmocka_unit_test(test_health_rules),
        cmocka_unit_test(test_bad_address_and_port_in_use),
    };

    return kp_test_main("http", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
