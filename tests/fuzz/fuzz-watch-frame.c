/* DESIGN: fuzz driver for the watch framer and event decoder of k8s/watch.c.
 *
 * The input is a watch body. The first two bytes choose chunk sizes (1..256) and a small frame
 * ceiling is used for some inputs, so chunk edges and the ceiling land everywhere. The framer's
 * output is compared with a reference framing of the whole input (split at '\n', drop a trailing
 * '\r', skip empty lines): the same lines in the same order, and -KP_ELIMIT exactly when some
 * line (or the unfinished tail) is longer than the ceiling. Each line is then fed to the event
 * decoder, whose result must be 0 or -KP_EPARSE/-KP_ELIMIT and, on success, a known type with a
 * resourceVersion for every type but ERROR. Any disagreement calls abort(). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "k8s/watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct ref {
    const char *p;
    size_t n;
    size_t pos; /* where the next expected line starts */
    unsigned lines;
};

/* The next non-empty line of the reference framing, or false at the end. */
static bool ref_next(struct ref *r, const char **ret_p, size_t *ret_n)
{
    while (r->pos < r->n) {
        const char *start = r->p + r->pos;
        const char *nl = memchr(start, '\n', r->n - r->pos);
        size_t k;

        if (!nl)
            return false;
        k = (size_t)(nl - start);
        r->pos += k + 1;
        if (k > 0 && start[k - 1] == '\r')
            k--;
        if (k > 0) {
            *ret_p = start;
            *ret_n = k;
            return true;
        }
    }
    return false;
}

static int on_line(const char *p, size_t n, void *userdata)
{
    struct ref *r = userdata;
    struct kp_watch_event ev;
    const char *want;
    size_t want_n;
    int k;

    if (!ref_next(r, &want, &want_n) || want_n != n || memcmp(want, p, n) != 0)
        abort();
    r->lines++;
    k = kp_watch_event_decode(p, n, &ev);
    if (k == 0) {
        if ((ev.type != KP_WATCH_ERROR && (!ev.resource_version || !ev.resource_version[0])) ||
            !ev.object)
            abort();
        kp_watch_event_done(&ev);
    } else if (k != -KP_EPARSE && k != -KP_ELIMIT) {
        abort();
    }
    return 0;
}

/* The longest run of bytes between newlines (a trailing '\r' and an unfinished tail count:
 * the ceiling applies to the raw bytes the framer must hold). */
static size_t longest(const char *p, size_t n)
{
    size_t best = 0, start = 0;

    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == '\n') {
            size_t k = i - start;

            if (k > best)
                best = k;
            start = i + 1;
        }
    }
    return best;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kp_watch_framer f;
    struct ref ref;
    size_t c1, c2, max, pos = 0;
    const char *p;
    int r = 0;
    bool over;

    if (size < 2)
        return 0;
    c1 = (size_t)data[0] + 1;
    c2 = (size_t)data[1] + 1;
    max = (data[0] & 1) ? 64 : KP_MAX_WATCH_FRAME;
    p = (const char *)data + 2;
    size -= 2;
    ref = (struct ref){.p = p, .n = size};
    over = longest(p, size) > max;

    kp_watch_framer_init(&f, max);
    for (unsigned i = 0; pos < size; i++) {
        size_t k = i & 1 ? c2 : c1;

        if (k > size - pos)
            k = size - pos;
        r = kp_watch_framer_feed(&f, p + pos, k, on_line, &ref);
        if (r < 0)
            break;
        pos += k;
    }
    kp_watch_framer_done(&f);
    /* -KP_ELIMIT exactly when some run between newlines is longer than the ceiling. */
    if (r < 0 && r != -KP_ELIMIT)
        abort();
    if ((r == -KP_ELIMIT) != over)
        abort();
    if (r == 0) {
        const char *dummy;
        size_t dn;

        /* Every complete line was delivered. */
        if (ref_next(&ref, &dummy, &dn))
            abort();
    }
    return 0;
}
