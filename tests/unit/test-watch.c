/* DESIGN: unit tests for the pure parts of k8s/watch.c: the line framer and the event decoder.
 *
 * The framer is checked against the simplest possible reference (split the whole input at
 * '\n', drop empty lines and a trailing '\r') for every way of cutting a stream into two and
 * three chunks and for one-byte chunks, so a bug at a chunk edge cannot hide. Ceiling tests check
 * that a line longer than the frame limit fails with -KP_ELIMIT whether it arrives whole or in
 * pieces, and that a line of exactly the limit passes. The decoder is checked on each event type
 * and on the malformed shapes it must refuse. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "json/json.h"
#include "k8s/watch.h"
#include "kp-test.h"

#define EV_ADDED                                                                                   \
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","         \
    "\"resourceVersion\":\"101\"}}}"
#define EV_MODIFIED                                                                                \
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","      \
    "\"resourceVersion\":\"102\"},\"data\":{\"k\":\"line\\nbreak\"}}}"
#define EV_BOOKMARK                                                                                \
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{"                     \
    "\"resourceVersion\":\"150\"}}}"
#define EV_ERROR                                                                                   \
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"   \
    "\"status\":\"Failure\",\"message\":\"too old resource version: 1 (200)\","                    \
    "\"reason\":\"Expired\",\"code\":410}}"

struct collect {
    struct kp_buf out; /* lines joined by '|' */
    unsigned lines;
    int fail_at; /* return -EIO on this line (1-based), 0: never */
};

static int collect_line(const char *p, size_t n, void *userdata)
{
    struct collect *c = userdata;
    int r;

    c->lines++;
    if (c->fail_at && (int)c->lines == c->fail_at)
        return -EIO;
    if ((r = kp_buf_append(&c->out, p, n)) < 0)
        return r;
    return kp_buf_putc(&c->out, '|');
}

/* The reference framing of the whole input. */
static void reference(const char *in, struct kp_buf *out)
{
    const char *p = in;

    for (;;) {
        const char *nl = strchr(p, '\n');
        size_t n;

        if (!nl)
            break;
        n = (size_t)(nl - p);
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n > 0) {
            assert_int_equal(kp_buf_append(out, p, n), 0);
            assert_int_equal(kp_buf_putc(out, '|'), 0);
        }
        p = nl + 1;
    }
}

static void frame_splits(const char *in, const size_t *cuts, size_t ncuts, struct collect *c)
{
    struct kp_watch_framer f;
    size_t prev = 0, len = strlen(in);

    kp_watch_framer_init(&f, 0);
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;

        assert_int_equal(kp_watch_framer_feed(&f, in + prev, end - prev, collect_line, c), 0);
        prev = end;
    }
    kp_watch_framer_done(&f);
}

static void test_framer_splits(void **state)
{
    static const char *const inputs[] = {
        EV_ADDED "\n" EV_MODIFIED "\n",
        "a\nbb\r\n\nccc\n\r\n" EV_BOOKMARK "\n",
        "\n\n\nx\n",
        "no newline at all",
        "one\ntrailing partial",
    };

    (void)state;
    for (size_t k = 0; k < KP_ARRAY_SIZE(inputs); k++) {
        const char *in = inputs[k];
        size_t len = strlen(in);
        struct kp_buf want = KP_BUF_INIT(1 << 20);

        reference(in, &want);
        for (size_t i = 0; i <= len; i++) {
            for (size_t j = i; j <= len; j++) {
                struct collect c = {.out = KP_BUF_INIT(1 << 20)};
                size_t cuts[2] = {i, j};

                frame_splits(in, cuts, 2, &c);
                assert_string_equal(kp_buf_str(&c.out), kp_buf_str(&want));
                kp_buf_done(&c.out);
            }
        }
        {
            /* One byte at a time. */
            struct collect c = {.out = KP_BUF_INIT(1 << 20)};
            struct kp_watch_framer f;

            kp_watch_framer_init(&f, 0);
            for (size_t i = 0; i < len; i++)
                assert_int_equal(kp_watch_framer_feed(&f, in + i, 1, collect_line, &c), 0);
            assert_string_equal(kp_buf_str(&c.out), kp_buf_str(&want));
            /* Input without a final newline leaves a partial line pending. */
            assert_int_equal(kp_watch_framer_pending(&f), len > 0 && in[len - 1] != '\n');
            kp_watch_framer_done(&f);
            kp_buf_done(&c.out);
        }
        kp_buf_done(&want);
    }
}

static void test_framer_ceiling(void **state)
{
    struct collect c = {.out = KP_BUF_INIT(1 << 20)};
    struct kp_watch_framer f;

    (void)state;
    /* Exactly the ceiling passes, whole or split. */
    kp_watch_framer_init(&f, 8);
    assert_int_equal(kp_watch_framer_feed(&f, "12345678\n", 9, collect_line, &c), 0);
    assert_int_equal(kp_watch_framer_feed(&f, "1234", 4, collect_line, &c), 0);
    assert_int_equal(kp_watch_framer_feed(&f, "5678\nab", 7, collect_line, &c), 0);
    assert_string_equal(kp_buf_str(&c.out), "12345678|12345678|");
    kp_watch_framer_done(&f);

    /* One more byte fails, whole in a chunk... */
    kp_watch_framer_init(&f, 8);
    assert_int_equal(kp_watch_framer_feed(&f, "123456789\n", 10, collect_line, &c), -KP_ELIMIT);
    kp_watch_framer_done(&f);
    /* ...across chunks, even before the newline arrives... */
    kp_watch_framer_init(&f, 8);
    assert_int_equal(kp_watch_framer_feed(&f, "12345", 5, collect_line, &c), 0);
    assert_int_equal(kp_watch_framer_feed(&f, "6789", 4, collect_line, &c), -KP_ELIMIT);
    assert_false(kp_watch_framer_pending(&f));
    kp_watch_framer_done(&f);
    /* ...and as a stream that never sends a newline. */
    kp_watch_framer_init(&f, 8);
    assert_int_equal(kp_watch_framer_feed(&f, "123456789", 9, collect_line, &c), -KP_ELIMIT);
    kp_watch_framer_done(&f);
    kp_buf_done(&c.out);
}

static void test_framer_callback_error(void **state)
{
    struct collect c = {.out = KP_BUF_INIT(1 << 20), .fail_at = 2};
    struct kp_watch_framer f;

    (void)state;
    kp_watch_framer_init(&f, 0);
    assert_int_equal(kp_watch_framer_feed(&f, "a\nb\nc\n", 6, collect_line, &c), -EIO);
    assert_string_equal(kp_buf_str(&c.out), "a|");
    kp_watch_framer_done(&f);
    kp_buf_done(&c.out);
}

static void test_event_decode(void **state)
{
    struct kp_watch_event ev;
    const char *s;

    (void)state;
    assert_int_equal(kp_watch_event_decode(EV_ADDED, strlen(EV_ADDED), &ev), 0);
    assert_int_equal(ev.type, KP_WATCH_ADDED);
    assert_string_equal(ev.resource_version, "101");
    assert_int_equal(kp_json_path_str(ev.object, "metadata.name", &s), 0);
    assert_string_equal(s, "a");
    kp_watch_event_done(&ev);
    assert_null(ev.object);

    assert_int_equal(kp_watch_event_decode(EV_MODIFIED, strlen(EV_MODIFIED), &ev), 0);
    assert_int_equal(ev.type, KP_WATCH_MODIFIED);
    assert_string_equal(ev.resource_version, "102");
    kp_watch_event_done(&ev);

    assert_int_equal(kp_watch_event_decode(EV_BOOKMARK, strlen(EV_BOOKMARK), &ev), 0);
    assert_int_equal(ev.type, KP_WATCH_BOOKMARK);
    assert_string_equal(ev.resource_version, "150");
    kp_watch_event_done(&ev);

    assert_int_equal(kp_watch_event_decode(EV_ERROR, strlen(EV_ERROR), &ev), 0);
    assert_int_equal(ev.type, KP_WATCH_ERROR);
    assert_null(ev.resource_version);
    kp_watch_event_done(&ev);
    assert_string_equal(kp_watch_event_type_name(KP_WATCH_DELETED), "DELETED");
}

static void test_event_malformed(void **state)
{
    static const char *const bad[] = {
        "",
        "{",
        "[]",
        "{\"type\":\"ADDED\"}",
        "{\"type\":\"ADDED\",\"object\":[]}",
        "{\"type\":\"ADDED\",\"object\":{}}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"\"}}}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":5}}}",
        "{\"type\":\"SYNC\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"}}}",
        "{\"type\":7,\"object\":{\"metadata\":{\"resourceVersion\":\"1\"}}}",
        "{\"type\":\"ADDED\",\"type\":\"DELETED\",\"object\":{}}",
    };
    struct kp_watch_event ev = {.object = NULL};

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        int r = kp_watch_event_decode(bad[i], strlen(bad[i]), &ev);

        if (r != -KP_EPARSE)
            fail_msg("input %zu: %d", i, r);
        assert_null(ev.object);
    }
}

static int decode_line(const char *p, size_t n, void *userdata)
{
    struct kp_watch_event ev;
    unsigned *count = userdata;
    int r;

    if ((r = kp_watch_event_decode(p, n, &ev)) < 0)
        return r;
    (*count)++;
    kp_watch_event_done(&ev);
    return 0;
}

/* Frames a stream cut in the middle of events and decodes every line. */
static int torture_frame_decode(void)
{
    static const char in[] = EV_ADDED "\n" EV_MODIFIED "\n" EV_BOOKMARK "\n" EV_ERROR "\n";
    struct kp_watch_framer f;
    unsigned count = 0;
    size_t half = sizeof(in) / 2;
    int r;

    kp_watch_framer_init(&f, 0);
    if ((r = kp_watch_framer_feed(&f, in, 10, decode_line, &count)) == 0 &&
        (r = kp_watch_framer_feed(&f, in + 10, half - 10, decode_line, &count)) == 0)
        r = kp_watch_framer_feed(&f, in + half, sizeof(in) - 1 - half, decode_line, &count);
    kp_watch_framer_done(&f);
    if (r == 0 && count != 4)
        return 1;
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framer_splits),         cmocka_unit_test(test_framer_ceiling),
        cmocka_unit_test(test_framer_callback_error), cmocka_unit_test(test_event_decode),
        cmocka_unit_test(test_event_malformed),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_frame_decode),
    };

    return kp_test_main("watch", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
