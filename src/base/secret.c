/* DESIGN: secret values that cannot be printed by accident.
 *
 * What: struct kp_secret is an opaque holder for bytes that must never reach a log, an event, a
 * condition or a metric (STYLE.md rule 8). The only way to the bytes is kp_secret_reveal(), so
 * an audit greps for one name.
 *
 * Why this way: the log redactor is the safety net for the day someone logs a revealed value
 * anyway, so a secret registers itself for the whole of its life: kp_secret_new() registers it
 * before handing it out and kp_secret_free() unregisters it before wiping. Values shorter than
 * KP_LOG_REDACT_MIN are not registered (they would match innocent text); kp_log_redact_add()
 * applies that rule itself, and it registers the value as a C string, so a secret with an
 * embedded NUL is registered up to that NUL (no stored secret holds one today: tokens and PEM
 * keys are text). The redactor counts registrations, so two secrets with equal values do not
 * unregister each other. The bytes live in the same allocation as the header (one allocation,
 * one wipe).
 *
 * Threads: a secret is immutable after creation and may be read from any thread; it is freed
 * by its owner once. Registration goes through the log module's lock. */
#include "base/secret.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

struct kp_secret {
    size_t len;
    bool registered; /* registered with the log redactor, so unregister on free */
    char data[];     /* len bytes and a NUL */
};

int kp_secret_new(const void *p, size_t n, struct kp_secret **ret)
{
    struct kp_secret *s = NULL;
    size_t size;
    int r;

    if (kp_add_overflow(sizeof(*s), n, &size) || kp_add_overflow(size, (size_t)1, &size))
        return -ENOMEM;
    s = kp_malloc(size);
    if (!s)
        return -ENOMEM;
    s->len = n;
    s->registered = false;
    if (n > 0)
        memcpy(s->data, p, n);
    s->data[n] = '\0';
    if (n >= KP_LOG_REDACT_MIN) {
        r = kp_log_redact_add(s->data);
        if (r < 0)
            goto out;
        s->registered = true;
    }
    *ret = s;
    s = NULL; /* the caller owns it now */
    r = 0;
out:
    s = kp_secret_free(s);
    return r;
}

struct kp_secret *kp_secret_free(struct kp_secret *s)
{
    if (!s)
        return NULL;
    if (s->registered)
        kp_log_redact_remove(s->data);
    kp_wipe(s->data, s->len);
    kp_wipe(s, sizeof(*s));
    kp_free(s);
    return NULL;
}

const char *kp_secret_reveal(const struct kp_secret *s)
{
    return s->data;
}

size_t kp_secret_len(const struct kp_secret *s)
{
    return s->len;
}
