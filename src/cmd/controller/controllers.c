/* DESIGN: the set of controllers run while leading (contract in controllers.h).
 *
 * The set is built and driven by the main thread; the HTTP thread only calls
 * kp_controller_set_ready(), which reads the atomic `started` and the controllers' own ready
 * functions. States are freed only by kp_controller_set_free(), after the HTTP server has
 * stopped, so a readiness check racing a stop never touches freed memory. */
#include "cmd/controller/controllers.h"

#include <errno.h>
#include <stdatomic.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/macro.h"
#include "cmd/controller/ssh.h"

/* Controllers of this binary, each a def whose functions adapt its layer's API. The SSH
 * provider's come first: the core's controllers, when they join, use its provider
 * (kp_controller_ssh_provider()). */
const struct kp_controller_def *const kp_controller_defs[] = {
    &kp_controller_ssh,
};
const size_t kp_controller_defs_count = KP_ARRAY_SIZE(kp_controller_defs);

struct kp_controller_set {
    const struct kp_controller_def *const *defs;
    size_t n;
    void **states;
    size_t started_n; /* how many started, in order (main thread) */
    atomic_bool started;
};

int kp_controller_set_new(const struct kp_controller_def *const *defs, size_t n,
                          const struct kp_controller_env *env, struct kp_controller_set **ret)
{
    struct kp_controller_set *s = NULL;
    size_t i;
    int r = -ENOMEM;

    s = kp_calloc(1, sizeof(*s));
    if (!s)
        goto out;
    atomic_init(&s->started, false);
    s->defs = defs;
    if (n && !(s->states = kp_calloc(n, sizeof(*s->states))))
        goto out;
    for (i = 0; i < n; i++) {
        /* Count it first, so a failure frees the states of the ones set up before it. */
        s->n = i + 1;
        if (defs[i]->setup && (r = defs[i]->setup(env, &s->states[i])) < 0) {
            s->n = i;
            kp_log_error_errno(r, "controller setup failed", KP_LF("controller", defs[i]->name));
            goto out;
        }
    }
    *ret = s;
    s = NULL;
    r = 0;
out:
    kp_controller_set_free(s);
    return r;
}

struct kp_controller_set *kp_controller_set_free(struct kp_controller_set *s)
{
    size_t i;

    if (!s)
        return NULL;
    for (i = s->n; i-- > 0;)
        if (s->defs[i]->free)
            s->defs[i]->free(s->states[i]);
    kp_free(s->states);
    kp_free(s);
    return NULL;
}

static void stop_started(struct kp_controller_set *s)
{
    while (s->started_n > 0) {
        size_t i = --s->started_n;

        kp_log_info("stopping controller", KP_LF("controller", s->defs[i]->name));
        if (s->defs[i]->stop)
            s->defs[i]->stop(s->states[i]);
    }
}

int kp_controller_set_start(struct kp_controller_set *s)
{
    size_t i;
    int r;

    for (i = 0; i < s->n; i++) {
        if ((r = s->defs[i]->start(s->states[i])) < 0) {
            kp_log_error_errno(r, "controller start failed", KP_LF("controller", s->defs[i]->name));
            stop_started(s);
            return r;
        }
        s->started_n = i + 1;
        kp_log_info("controller started", KP_LF("controller", s->defs[i]->name));
    }
    atomic_store(&s->started, true);
    return 0;
}

void kp_controller_set_stop(struct kp_controller_set *s)
{
    /* Readiness stops asking the controllers first; a check already running may still call
     * ready() on a stopping state, which stays allocated until kp_controller_set_free(). */
    atomic_store(&s->started, false);
    stop_started(s);
}

bool kp_controller_set_ready(void *set)
{
    struct kp_controller_set *s = set;
    size_t i;

    if (!atomic_load(&s->started))
        return true;
    for (i = 0; i < s->n; i++)
        if (s->defs[i]->ready && !s->defs[i]->ready(s->states[i]))
            return false;
    return true;
}

bool kp_controller_set_started(const struct kp_controller_set *s)
{
    return atomic_load(&s->started);
}
