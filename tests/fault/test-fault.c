/* tests/fault/test-fault.c: runs one fault case (tests/fault/data/NNNN-*.case) against an
 * informer on pods.
 *
 * The case's script (fault-server.h) plays the API server; the informer lists and watches it
 * through the real transport, client, watch and store. The case passes when the server saw
 * exactly the requests the script expects, in order, all exchanges were begun, and the store
 * ends up holding exactly the expected keys at the expected resourceVersions. Driver
 * directives in the case file:
 *   expect-store ns/a@2 ns/b@7    the final store (empty when nothing follows)
 *   expect-bad N                  objects skipped as undecodable
 *   idle-ms N                     the watch's client idle deadline (default 2000)
 *   page N                        list page size (default 500)
 *   max-body N                    the transport's response body ceiling (default 32 MiB)
 *   expect-page N                 the informer's page size at the end (stats.page_size)
 *   expect-desyncs N              times the informer fell out of sync (stats.desyncs)
 * Each case fails with its own description and the server's first mismatch. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault-server.h"
#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "api/obj-pod.h"

#define KP_FAULT_CASE_TIMEOUT_USEC (40 * KP_USEC_PER_SEC)

static const char *case_path;

static const char *directive(const char *text, const char *name)
{
    size_t n = strlen(name);

    for (const char *l = text; l && *l;) {
        if (strncmp(l, name, n) == 0 && (l[n] == ' ' || l[n] == '\n' || l[n] == '\0'))
            return l + n;
        l = strchr(l, '\n');
        if (l)
            l++;
    }
    return NULL;
}

static unsigned long directive_num(const char *text, const char *name, unsigned long dflt)
{
    const char *v = directive(text, name);

    return v ? strtoul(v, NULL, 10) : dflt;
}

/* True when the store holds exactly the "key@rv" words of want (up to end of line). */
static bool store_is(struct kp_store *store, const char *want, char *why, size_t size)
{
    struct kp_store_list all = {0};
    size_t expected = 0;
    bool ok = true;

    assert_int_equal(kp_store_list(store, &all), 0);
    for (const char *p = want; p && *p && *p != '\n';) {
        char key[256], rv[64];
        struct kp_entry *e = NULL;
        int used = 0;

        while (*p == ' ')
            p++;
        if (!*p || *p == '\n')
            break;
        if (sscanf(p, "%255[^@ \n]@%63[^ \n]%n", key, rv, &used) != 2)
            fail_msg("%s: bad expect-store word at \"%.20s\"", case_path, p);
        p += used;
        expected++;
        if (kp_store_get(store, key, &e) < 0) {
            snprintf(why, size, "%s missing", key);
            ok = false;
        } else if (strcmp(e->rv, rv) != 0) {
            snprintf(why, size, "%s at rv %s, want %s", key, e->rv, rv);
            ok = false;
        }
        kp_entry_unref(e);
    }
    if (ok && all.n != expected) {
        snprintf(why, size, "store holds %zu objects, want %zu", all.n, expected);
        ok = false;
    }
    kp_store_list_free(&all);
    return ok;
}

static char *read_case(const char *path)
{
    struct kp_buf b = KP_BUF_INIT(1u << 20);
    char chunk[4096];
    size_t n;
    FILE *f = fopen(path, "re");
    char *s;

    if (!f)
        fail_msg("cannot open %s", path);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        assert_int_equal(kp_buf_append(&b, chunk, n), 0);
    fclose(f);
    s = kp_buf_steal(&b, NULL);
    assert_non_null(s);
    return s;
}

static void test_case(void **state)
{
    char *text = read_case(case_path);
    const char *want = directive(text, "expect-store");
    struct kp_fault_server *srv;
    struct kp_transport_opts to = {.allow_plain_http = true,
                                   .timeout_usec = 5 * KP_USEC_PER_SEC,
                                   .max_body = directive_num(text, "max-body", 0)};
    struct kp_informer_opts io = {
        .res = &KP_RES_POD,
        .project = kp_pod_project,
        .page_size = (uint32_t)directive_num(text, "page", 500),
        .watch_timeout_seconds = 30,
        .watch_idle_usec = directive_num(text, "idle-ms", 2000) * KP_USEC_PER_MSEC,
    };
    struct kp_client *c = NULL;
    struct kp_informer *inf = NULL;
    struct kp_informer_stats st;
    struct kp_deadline d = kp_deadline_in(KP_FAULT_CASE_TIMEOUT_USEC);
    char url[64], why[256] = "not checked";
    bool ok = false;

    (void)state;
    if (!want)
        fail_msg("%s: no expect-store line", case_path);
    srv = kp_fault_server_start(text);
    assert_non_null(srv);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)kp_fault_server_port(srv));
    to.server = url;
    assert_int_equal(kp_client_new(&to, &c), 0);
    assert_int_equal(kp_informer_new(c, &io, &inf), 0);
    assert_int_equal(kp_informer_start(inf), 0);
    while (!kp_deadline_expired(d)) {
        if (kp_fault_server_error(srv))
            break;
        if (kp_fault_server_started(srv) >= kp_fault_server_exchanges(srv) &&
            store_is(kp_informer_store(inf), want, why, sizeof(why))) {
            ok = true;
            break;
        }
        kp_sleep_usec(20 * KP_USEC_PER_MSEC);
    }
    kp_informer_get_stats(inf, &st);
    kp_informer_stop(inf);
    if (!ok || kp_fault_server_error(srv))
        fail_msg("%s failed: server: %s; store: %s; %zu of %zu exchanges begun\n%s", case_path,
                 kp_fault_server_error(srv) ? kp_fault_server_error(srv) : "ok", why,
                 kp_fault_server_started(srv), kp_fault_server_exchanges(srv), text);
    assert_int_equal(st.bad_objects, directive_num(text, "expect-bad", 0));
    if (directive(text, "expect-page"))
        assert_int_equal(st.page_size, directive_num(text, "expect-page", 0));
    if (directive(text, "expect-desyncs"))
        assert_int_equal(st.desyncs, directive_num(text, "expect-desyncs", 0));
    printf("# %s: %llu lists, %llu events, %llu bad, %llu desyncs, page size %u\n", case_path,
           (unsigned long long)st.lists, (unsigned long long)st.events,
           (unsigned long long)st.bad_objects, (unsigned long long)st.desyncs,
           (unsigned)st.page_size);
    kp_informer_free(inf);
    kp_client_free(c);
    kp_fault_server_stop(srv);
    kp_free(text);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case),
    };

    if (argc != 2) {
        fprintf(stderr, "usage: %s fault/data/NNNN-name.case\n", argv[0]);
        return 2;
    }
    case_path = argv[1];
    /* Warnings about skipped objects are expected in some cases; keep them off the output. */
    kp_log_set_level(KP_LOG_ERROR);
    return _cmocka_run_group_tests(case_path, tests, 1, NULL, NULL) ? 1 : 0;
}
