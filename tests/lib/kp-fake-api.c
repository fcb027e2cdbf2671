/* DESIGN: see kp-fake-api.h. A poll()ed listening socket (so the stop needs no wake-up
 * connection), one request read whole per connection (headers and a Content-Length body), and
 * a mutex over the rules, the record and the held watches. */
#include "kp-fake-api.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"

#define MAX_RULES 16
#define MAX_REQS 64
#define MAX_HELD 8

struct kp_fake_api {
    int fd;
    char url[40];
    pthread_t th;
    atomic_bool stop;
    pthread_mutex_t mu;
    struct {
        char *line, *body;
        int status;
    } rules[MAX_RULES];
    size_t n_rules;
    struct {
        char *line, *body;
    } reqs[MAX_REQS];
    size_t n_reqs;
    int held[MAX_HELD];
    size_t n_held;
};

static void say(int fd, const char *s)
{
    size_t n = strlen(s);

    while (n > 0) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);

        if (k <= 0)
            return; /* the client went away: its error shows in the test */
        s += k;
        n -= (size_t)k;
    }
}

/* One request (headers and a Content-Length body) from fd as a new string, or NULL. */
static char *read_request(int fd)
{
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    char chunk[4096], *out = NULL;
    size_t need = 0;
    bool headers = false;

    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        const char *end, *cl;

        if (n <= 0 || kp_buf_append(&b, chunk, (size_t)n) < 0)
            break;
        if (!headers && (end = strstr(kp_buf_str(&b), "\r\n\r\n"))) {
            headers = true;
            cl = strcasestr(kp_buf_str(&b), "\r\nContent-Length:");
            need = (size_t)(end - kp_buf_str(&b)) + 4;
            if (cl && cl < end)
                need += (size_t)strtoul(cl + 17, NULL, 10);
        }
        if (headers && b.len >= need)
            break;
    }
    if (headers)
        out = kp_strdup(kp_buf_str(&b));
    kp_buf_done(&b);
    return out;
}

static void respond(int fd, int status, const char *body)
{
    char head[256];

    (void)snprintf(head, sizeof(head),
                   "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n",
                   status, strlen(body));
    say(fd, head);
    say(fd, body);
}

/* Answers a GET: an empty list, or a watch held open (closed when there is no room to hold it:
 * the informer then watches again). Returns whether fd is kept. */
static bool serve_get(struct kp_fake_api *a, int fd, const char *raw)
{
    const char *eol = strstr(raw, "\r\n"), *watch = strstr(raw, "watch=1");

    if (!watch || (eol && watch > eol)) {
        respond(fd, 200,
                "{\"kind\":\"List\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1\"},"
                "\"items\":[]}");
        return false;
    }
    say(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n");
    pthread_mutex_lock(&a->mu);
    if (a->n_held < MAX_HELD)
        a->held[a->n_held++] = fd;
    else
        fd = -1;
    pthread_mutex_unlock(&a->mu);
    return fd >= 0;
}

/* Records a write and answers it by its rule. */
static void serve_write(struct kp_fake_api *a, int fd, const char *raw)
{
    const char *sp = strchr(raw, ' '), *end = sp ? strpbrk(sp + 1, " ?") : NULL;
    const char *body = strstr(raw, "\r\n\r\n");
    char *line = end ? kp_strndup(raw, (size_t)(end - raw)) : kp_strdup("?");
    char fallback[128];
    const char *answer = "{}";
    int status = 200;

    pthread_mutex_lock(&a->mu);
    for (size_t i = a->n_rules; line && i-- > 0;)
        if (strcmp(a->rules[i].line, line) == 0) {
            status = a->rules[i].status;
            answer = a->rules[i].body;
            break;
        }
    if (!answer) {
        (void)snprintf(fallback, sizeof(fallback),
                       "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                       "\"code\":%d}",
                       status);
        answer = fallback;
    }
    if (a->n_reqs < MAX_REQS && line) {
        a->reqs[a->n_reqs].line = line;
        a->reqs[a->n_reqs++].body = kp_strdup(body ? body + 4 : "");
        line = NULL;
    }
    pthread_mutex_unlock(&a->mu);
    respond(fd, status, answer); /* rules live until the stop */
    kp_free(line);
}

static void *serve(void *arg)
{
    struct kp_fake_api *a = arg;

    while (!atomic_load(&a->stop)) {
        struct pollfd pfd = {.fd = a->fd, .events = POLLIN};
        char *raw;
        int c;
        bool keep = false;

        if (poll(&pfd, 1, 50) <= 0)
            continue;
        if ((c = accept4(a->fd, NULL, NULL, SOCK_CLOEXEC)) < 0)
            continue;
        if ((raw = read_request(c))) {
            if (strncmp(raw, "GET ", 4) == 0)
                keep = serve_get(a, c, raw);
            else
                serve_write(a, c, raw);
        }
        kp_free(raw);
        if (!keep)
            close(c);
    }
    return NULL;
}

struct kp_fake_api *kp_fake_api_start(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    struct kp_fake_api *a = kp_calloc(1, sizeof(*a));

    assert_non_null(a);
    pthread_mutex_init(&a->mu, NULL);
    a->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(a->fd >= 0);
    assert_int_equal(bind(a->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(a->fd, 16), 0);
    assert_int_equal(getsockname(a->fd, (struct sockaddr *)&sin, &len), 0);
    (void)snprintf(a->url, sizeof(a->url), "http://127.0.0.1:%u", (unsigned)ntohs(sin.sin_port));
    assert_int_equal(pthread_create(&a->th, NULL, serve, a), 0);
    return a;
}

struct kp_fake_api *kp_fake_api_stop(struct kp_fake_api *a)
{
    if (!a)
        return NULL;
    atomic_store(&a->stop, true);
    pthread_join(a->th, NULL);
    close(a->fd);
    kp_fake_api_drop_watches(a);
    kp_fake_api_reset(a);
    for (size_t i = 0; i < a->n_rules; i++) {
        kp_free(a->rules[i].line);
        kp_free(a->rules[i].body);
    }
    pthread_mutex_destroy(&a->mu);
    kp_free(a);
    return NULL;
}

const char *kp_fake_api_url(const struct kp_fake_api *a)
{
    return a->url;
}

void kp_fake_api_answer(struct kp_fake_api *a, const char *line, int status, const char *body)
{
    pthread_mutex_lock(&a->mu);
    assert_true(a->n_rules < MAX_RULES);
    a->rules[a->n_rules].line = kp_strdup(line);
    a->rules[a->n_rules].body = body ? kp_strdup(body) : NULL;
    a->rules[a->n_rules++].status = status;
    pthread_mutex_unlock(&a->mu);
}

size_t kp_fake_api_count(struct kp_fake_api *a)
{
    size_t n;

    pthread_mutex_lock(&a->mu);
    n = a->n_reqs;
    pthread_mutex_unlock(&a->mu);
    return n;
}

/* Request i's line (body false) or body. */
static const char *request(struct kp_fake_api *a, size_t i, bool body)
{
    const char *s;

    pthread_mutex_lock(&a->mu);
    s = i >= a->n_reqs ? NULL : body ? a->reqs[i].body : a->reqs[i].line;
    pthread_mutex_unlock(&a->mu);
    if (!s)
        fail_msg("no request %zu (of %zu)", i, kp_fake_api_count(a));
    return s;
}

const char *kp_fake_api_line(struct kp_fake_api *a, size_t i)
{
    return request(a, i, false);
}

const char *kp_fake_api_body(struct kp_fake_api *a, size_t i)
{
    return request(a, i, true);
}

void kp_fake_api_reset(struct kp_fake_api *a)
{
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->n_reqs; i++) {
        kp_free(a->reqs[i].line);
        kp_free(a->reqs[i].body);
    }
    a->n_reqs = 0;
    pthread_mutex_unlock(&a->mu);
}

void kp_fake_api_drop_watches(struct kp_fake_api *a)
{
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->n_held; i++)
        close(a->held[i]);
    a->n_held = 0;
    pthread_mutex_unlock(&a->mu);
}
