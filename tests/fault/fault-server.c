/* DESIGN: scripted loopback HTTP server for the fault tier (see fault-server.h).
 *
 * Test code, not product code: it reads its script once, serves one connection at a time on
 * its own thread, and never calls cmocka (the driver asserts on what it reports). Requests are
 * read up to the end of their headers and any Content-Length body. */
#include "fault-server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/str.h"
#include "base/time.h"

enum kp_step_kind { KP_STEP_SEND, KP_STEP_SPLIT, KP_STEP_FILL, KP_STEP_SLEEP, KP_STEP_HOLD };

struct kp_step {
    enum kp_step_kind kind;
    char *text;
    unsigned n; /* split size or sleep ms */
};

struct kp_exchange {
    char *method;
    struct kp_strv want, reject;
    int status;
    bool stream;
    struct kp_strv headers;
    char *body;
    struct kp_step *steps;
    size_t nsteps;
    unsigned after_ms; /* the request may not come sooner after the previous exchange */
};

struct kp_fault_server {
    int lfd;
    uint16_t port;
    pthread_t thread;
    atomic_bool stop;
    struct kp_exchange *ex;
    size_t nex;
    atomic_size_t started; /* connections that took an exchange (or ran past the script) */
    atomic_size_t served;  /* of those, finished */
    pthread_mutex_t lock;
    char error[1024];
    uint64_t last_end; /* monotonic time the previous exchange ended */
};

char *kp_fault_expand(const char *text)
{
    struct kp_buf b = KP_BUF_INIT(16u << 20);

    for (const char *p = text; *p;) {
        char a[3][128];
        int used = 0;

        if (sscanf(p, "@pod(%127[^,],%127[^)])%n", a[0], a[1], &used) == 2 && used > 0) {
            if (kp_buf_printf(&b,
                              "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":"
                              "\"u-%s\",\"resourceVersion\":\"%s\"},\"spec\":{\"containers\":"
                              "[{\"name\":\"c\"}]}}",
                              a[0], a[0], a[1]) < 0)
                return NULL;
            p += used;
            continue;
        }
        used = 0;
        if (sscanf(p, "@ev(%127[^,],%127[^,],%127[^)])%n", a[0], a[1], a[2], &used) == 3 &&
            used > 0) {
            if (kp_buf_printf(&b,
                              "{\"type\":\"%s\",\"object\":{\"metadata\":{\"name\":\"%s\","
                              "\"namespace\":\"ns\",\"uid\":\"u-%s\",\"resourceVersion\":\"%s\"},"
                              "\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}\n",
                              a[0], a[1], a[1], a[2]) < 0)
                return NULL;
            p += used;
            continue;
        }
        if (p[0] == '\\' && p[1] == 'n') {
            if (kp_buf_putc(&b, '\n') < 0)
                return NULL;
            p += 2;
            continue;
        }
        if (kp_buf_putc(&b, *p++) < 0)
            return NULL;
    }
    return kp_buf_steal(&b, NULL);
}

static void kp_ex_done(struct kp_exchange *e)
{
    kp_free(e->method);
    kp_strv_done(&e->want);
    kp_strv_done(&e->reject);
    kp_strv_done(&e->headers);
    kp_free(e->body);
    for (size_t i = 0; i < e->nsteps; i++)
        kp_free(e->steps[i].text);
    kp_free(e->steps);
}

static int kp_ex_step(struct kp_exchange *e, enum kp_step_kind kind, const char *text, unsigned n)
{
    struct kp_step *v = kp_reallocarray(e->steps, e->nsteps + 1, sizeof(*v));

    if (!v)
        return -1;
    e->steps = v;
    v[e->nsteps].kind = kind;
    v[e->nsteps].n = n;
    v[e->nsteps].text = text ? kp_fault_expand(text) : NULL;
    if (text && !v[e->nsteps].text)
        return -1;
    e->nsteps++;
    return 0;
}

/* The rest of l after prefix, or NULL (a mutable kp_startswith). */
static char *kp_after(char *l, const char *prefix)
{
    size_t n = strlen(prefix);

    return strncmp(l, prefix, n) == 0 ? l + n : NULL;
}

static int kp_parse_script(struct kp_fault_server *s, const char *script)
{
    const char *line = script;
    struct kp_exchange *e = NULL;

    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *l = kp_strndup(line, len), *arg;
        unsigned n = 0;
        int r = 0;

        line = end ? end + 1 : NULL;
        if (!l)
            return -1;
        if ((arg = kp_after(l, "request "))) {
            struct kp_exchange *v = kp_reallocarray(s->ex, s->nex + 1, sizeof(*v));
            char *tok, *save = NULL;

            if (!v) {
                kp_free(l);
                return -1;
            }
            s->ex = v;
            e = &s->ex[s->nex++];
            memset(e, 0, sizeof(*e));
            e->status = 200;
            /* Tokens are split on spaces by hand (strtok is banned). */
            for (tok = arg; tok && *tok; tok = save) {
                save = strchr(tok, ' ');
                if (save)
                    *save++ = '\0';
                if (!*tok)
                    continue;
                if (!e->method)
                    e->method = kp_strdup(tok);
                else if (tok[0] == '!')
                    r = kp_strv_push(&e->reject, tok + 1);
                else
                    r = kp_strv_push(&e->want, tok);
            }
        } else if (e && (arg = kp_after(l, "status "))) {
            e->status = (int)strtol(arg, NULL, 10);
            e->stream = strstr(arg, "stream") != NULL;
        } else if (e && (arg = kp_after(l, "after-ms "))) {
            e->after_ms = (unsigned)strtoul(arg, NULL, 10);
        } else if (e && (arg = kp_after(l, "header "))) {
            r = kp_strv_push(&e->headers, arg);
        } else if (e && (arg = kp_after(l, "body "))) {
            e->body = kp_fault_expand(arg);
            r = e->body ? 0 : -1;
        } else if (e && (arg = kp_after(l, "send-split "))) {
            int used = 0;

            if (sscanf(arg, "%u %n", &n, &used) < 1 || n == 0)
                r = -1;
            else
                r = kp_ex_step(e, KP_STEP_SPLIT, arg + used, n);
        } else if (e && (arg = kp_after(l, "send-fill "))) {
            int used = 0;

            if (sscanf(arg, "%u %n", &n, &used) < 1 || n == 0 || !arg[used])
                r = -1;
            else
                r = kp_ex_step(e, KP_STEP_FILL, arg + used, n);
        } else if (e && (arg = kp_after(l, "send "))) {
            r = kp_ex_step(e, KP_STEP_SEND, arg, 0);
        } else if (e && (arg = kp_after(l, "sleep "))) {
            r = kp_ex_step(e, KP_STEP_SLEEP, NULL, (unsigned)strtoul(arg, NULL, 10));
        } else if (e && strcmp(l, "hold") == 0) {
            r = kp_ex_step(e, KP_STEP_HOLD, NULL, 0);
        }
        kp_free(l);
        if (r < 0)
            return -1;
    }
    return 0;
}

static void kp_write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

static void kp_fault_fail(struct kp_fault_server *s, size_t exchange, const char *what,
                          const char *line)
{
    pthread_mutex_lock(&s->lock);
    if (!s->error[0])
        snprintf(s->error, sizeof(s->error), "exchange %zu: %s: %s", exchange + 1, what, line);
    pthread_mutex_unlock(&s->lock);
}

/* Reads the request; returns its first line in line[size]. */
static bool kp_read_request(int fd, char *line, size_t size)
{
    char buf[16384];
    size_t len = 0;
    char *eoh;

    while (len < sizeof(buf) - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t k;

        if (poll(&p, 1, 5000) <= 0)
            return false;
        k = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (k <= 0)
            return false;
        len += (size_t)k;
        buf[len] = '\0';
        eoh = strstr(buf, "\r\n\r\n");
        if (eoh) {
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            size_t body = cl && cl < eoh ? (size_t)strtoul(cl + 17, NULL, 10) : 0;

            if (len >= (size_t)(eoh + 4 - buf) + body)
                break;
        }
    }
    snprintf(line, size, "%.*s", (int)strcspn(buf, "\r\n"), buf);
    return true;
}

static void kp_hold(struct kp_fault_server *s, int fd)
{
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char c;

        /* The client closing its end (a cancelled watch) ends the hold too. */
        if (poll(&p, 1, 50) > 0 && read(fd, &c, 1) <= 0)
            return;
    }
}

static void kp_serve(struct kp_fault_server *s, int fd, const struct kp_exchange *e)
{
    struct kp_buf head = KP_BUF_INIT(1 << 20);

    if (kp_buf_printf(&head, "HTTP/1.1 %d Scripted\r\nConnection: close\r\n", e->status) < 0)
        return;
    for (size_t i = 0; i < e->headers.n; i++)
        if (kp_buf_printf(&head, "%s\r\n", e->headers.v[i]) < 0)
            goto out;
    if (!e->stream) {
        const char *body = e->body ? e->body : "";

        if (kp_buf_printf(&head, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                          strlen(body), body) < 0)
            goto out;
        kp_write_all(fd, head.data, head.len);
        goto out;
    }
    if (kp_buf_puts(&head, "Content-Type: application/json\r\n\r\n") < 0)
        goto out;
    kp_write_all(fd, head.data, head.len);
    for (size_t i = 0; i < e->nsteps && !atomic_load(&s->stop); i++) {
        const struct kp_step *st = &e->steps[i];

        switch (st->kind) {
        case KP_STEP_SEND:
            kp_write_all(fd, st->text, strlen(st->text));
            break;
        case KP_STEP_SPLIT:
            for (size_t off = 0, len = strlen(st->text); off < len; off += st->n) {
                kp_write_all(fd, st->text + off, KP_MIN((size_t)st->n, len - off));
                kp_sleep_usec(2000);
            }
            break;
        case KP_STEP_FILL: {
            char block[4096];

            memset(block, st->text[0], sizeof(block));
            for (size_t left = st->n; left > 0 && !atomic_load(&s->stop);) {
                size_t k = KP_MIN(left, sizeof(block));

                kp_write_all(fd, block, k);
                left -= k;
            }
            break;
        }
        case KP_STEP_SLEEP:
            kp_sleep_usec((uint64_t)st->n * KP_USEC_PER_MSEC);
            break;
        case KP_STEP_HOLD:
            kp_hold(s, fd);
            break;
        }
    }
out:
    kp_buf_done(&head);
}

static bool kp_matches(const struct kp_exchange *e, const char *line)
{
    if (strncmp(line, e->method, strlen(e->method)) != 0 || line[strlen(e->method)] != ' ')
        return false;
    for (size_t i = 0; i < e->want.n; i++)
        if (!strstr(line, e->want.v[i]))
            return false;
    for (size_t i = 0; i < e->reject.n; i++)
        if (strstr(line, e->reject.v[i]))
            return false;
    return true;
}

static void *kp_fault_main(void *arg)
{
    struct kp_fault_server *s = arg;

    while (!atomic_load(&s->stop)) {
        struct pollfd p = {.fd = s->lfd, .events = POLLIN};
        char line[4096];
        size_t i;
        int fd;

        if (poll(&p, 1, 50) <= 0)
            continue;
        fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (!kp_read_request(fd, line, sizeof(line))) {
            close(fd);
            continue;
        }
        i = atomic_fetch_add(&s->started, 1);
        if (i >= s->nex) {
            kp_fault_fail(s, i, "request past the end of the script", line);
            kp_hold(s, fd);
        } else if (!kp_matches(&s->ex[i], line)) {
            kp_fault_fail(s, i, "unexpected request", line);
        } else if (s->ex[i].after_ms &&
                   kp_mono_usec() - s->last_end < s->ex[i].after_ms * KP_USEC_PER_MSEC) {
            kp_fault_fail(s, i, "request came too soon (a Retry-After or backoff ignored)", line);
        } else {
            kp_serve(s, fd, &s->ex[i]);
        }
        atomic_fetch_add(&s->served, 1);
        close(fd);
        s->last_end = kp_mono_usec();
    }
    return NULL;
}

struct kp_fault_server *kp_fault_server_start(const char *script)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    struct kp_fault_server *s = kp_calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    pthread_mutex_init(&s->lock, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (kp_parse_script(s, script) < 0 || s->lfd < 0 ||
        bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 16) < 0 ||
        getsockname(s->lfd, (struct sockaddr *)&a, &alen) < 0) {
        fprintf(stderr, "fault server: cannot start: %s\n", strerror(errno));
        goto fail;
    }
    s->port = ntohs(a.sin_port);
    if (pthread_create(&s->thread, NULL, kp_fault_main, s) != 0)
        goto fail;
    return s;
fail:
    if (s->lfd >= 0)
        close(s->lfd);
    for (size_t i = 0; i < s->nex; i++)
        kp_ex_done(&s->ex[i]);
    kp_free(s->ex);
    pthread_mutex_destroy(&s->lock);
    kp_free(s);
    return NULL;
}

uint16_t kp_fault_server_port(const struct kp_fault_server *s)
{
    return s->port;
}

size_t kp_fault_server_served(struct kp_fault_server *s)
{
    return atomic_load(&s->served);
}

size_t kp_fault_server_started(struct kp_fault_server *s)
{
    return atomic_load(&s->started);
}

size_t kp_fault_server_exchanges(const struct kp_fault_server *s)
{
    return s->nex;
}

const char *kp_fault_server_error(struct kp_fault_server *s)
{
    const char *e;

    pthread_mutex_lock(&s->lock);
    e = s->error[0] ? s->error : NULL;
    pthread_mutex_unlock(&s->lock);
    return e;
}

void kp_fault_server_stop(struct kp_fault_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    close(s->lfd);
    for (size_t i = 0; i < s->nex; i++)
        kp_ex_done(&s->ex[i]);
    kp_free(s->ex);
    pthread_mutex_destroy(&s->lock);
    kp_free(s);
}
