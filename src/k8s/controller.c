/* DESIGN: the controller skeleton (see controller.h for the contract).
 *
 * What: the set-up and tear-down every controller repeated (reconciler, handlers on several
 * informers with a roll-back on failure, readiness over the informers read, the event recorder
 * made at the first start), in one place, so a controller's own file holds its decisions and
 * its fan-out handlers only.
 *
 * Registrations are recorded as (informer, handler ctx) pairs; free removes each pair's
 * handlers, which is also the roll-back of a set-up that failed half-way. Readiness informers
 * are kept once each, in registration order.
 *
 * Threads: everything but ready() on the main thread. ready() reads `started` (atomic), the
 * reconciler's running flag and the informers' synced flags, all safe from any thread; the
 * arrays it scans do not change once the informers have started. */
#include "k8s/controller.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "k8s/events.h"
#include "k8s/store.h"

struct kp_ctl_reg {
    struct kp_informer *inf;
    const void *ctx; /* the handler's ctx, which kp_informer_remove_handlers matches */
};

struct kp_controller {
    struct kp_controller_opts o;
    struct kp_reconciler *rec;
    struct kp_events *own_events;
    struct kp_ctl_reg *regs; /* handlers added, for the roll-back */
    size_t nregs, regs_cap;
    struct kp_informer **ready; /* informers readiness waits for, each once */
    size_t nready, ready_cap;
    atomic_bool started;
};

int kp_controller_new(const struct kp_controller_opts *o, struct kp_controller **ret)
{
    struct kp_reconciler_opts ro = {0};
    struct kp_controller *ctl;
    int r;

    if (!o || !o->name || !o->client || !o->reconcile)
        return -EINVAL;
    ctl = kp_calloc(1, sizeof(*ctl));
    if (!ctl)
        return -ENOMEM;
    ctl->o = *o;
    atomic_init(&ctl->started, false);
    ro.name = o->name;
    ro.group = o->group;
    ro.kind = o->kind;
    ro.parent = o->parent;
    ro.workers = o->workers ? o->workers : 1;
    ro.reconcile = o->reconcile;
    ro.ctx = o->ctx;
    ro.client = o->client;
    ro.timeout_usec = o->timeout_usec;
    ro.queue = o->queue;
    if ((r = kp_reconciler_new(&ro, &ctl->rec)) < 0) {
        kp_free(ctl);
        return r;
    }
    *ret = ctl;
    return 0;
}

struct kp_controller *kp_controller_free(struct kp_controller *ctl)
{
    if (!ctl)
        return NULL;
    kp_controller_stop(ctl);
    /* Handlers out first: they point at the controller that embeds this skeleton. An informer
     * still running refuses (-EBUSY), and its handlers would then outlive what they point at
     * (a use after free on its next event): freeing before kp_registry_stop() is a programmer
     * error, so stop here rather than later somewhere else. */
    for (size_t i = ctl->nregs; i-- > 0;)
        if (kp_informer_remove_handlers(ctl->regs[i].inf, ctl->regs[i].ctx) < 0) {
            kp_log_error("controller freed while its informers run",
                         KP_LF("controller", ctl->o.name));
            abort();
        }
    ctl->rec = kp_reconciler_free(ctl->rec);
    ctl->own_events = kp_events_free(ctl->own_events);
    kp_free(ctl->regs);
    kp_free(ctl->ready);
    kp_free(ctl);
    return NULL;
}

int kp_controller_read(struct kp_controller *ctl, struct kp_informer *inf)
{
    struct kp_informer **v;

    if (!inf)
        return -EINVAL;
    for (size_t i = 0; i < ctl->nready; i++)
        if (ctl->ready[i] == inf)
            return 0;
    v = kp_grow_array(ctl->ready, &ctl->ready_cap, ctl->nready, sizeof(*v), 4);
    if (!v)
        return -ENOMEM;
    ctl->ready = v;
    ctl->ready[ctl->nready++] = inf;
    return 0;
}

int kp_controller_watch(struct kp_controller *ctl, struct kp_informer *inf,
                        const struct kp_informer_handler *h)
{
    struct kp_ctl_reg *v;
    int r;

    if (!inf || !h)
        return -EINVAL;
    /* Room for the record first: a handler added must always be one free can take back. */
    v = kp_grow_array(ctl->regs, &ctl->regs_cap, ctl->nregs, sizeof(*v), 4);
    if (!v)
        return -ENOMEM;
    ctl->regs = v;
    if ((r = kp_controller_read(ctl, inf)) < 0)
        return r;
    if ((r = kp_informer_add_handler(inf, h)) < 0)
        return r;
    ctl->regs[ctl->nregs++] = (struct kp_ctl_reg){.inf = inf, .ctx = h->ctx};
    return 0;
}

int kp_controller_watch_keys(struct kp_controller *ctl, struct kp_informer *inf)
{
    struct kp_informer_handler h = kp_reconciler_handler(ctl->rec);

    return kp_controller_watch(ctl, inf, &h);
}

int kp_controller_add_index(struct kp_controller *ctl, struct kp_informer *inf, const char *name,
                            kp_index_fn fn)
{
    kp_index_fn have;
    int r;

    if (!inf || !name || !fn)
        return -EINVAL;
    r = kp_informer_add_index(inf, name, fn);
    if (r == -EEXIST) {
        have = kp_store_index_fn(kp_informer_store(inf), name);
        r = have == fn ? 0 : -EEXIST;
    }
    return r < 0 ? r : kp_controller_read(ctl, inf);
}

int kp_controller_start(struct kp_controller *ctl)
{
    int r;

    if (atomic_load(&ctl->started))
        return 0;
    if (!ctl->o.events && ctl->o.events_component && !ctl->own_events) {
        /* reportingInstance: the pod name, which is the hostname in a pod. */
        char host[256] = "kpssh-controller";
        struct kp_events_opts eo = {.controller = ctl->o.events_component, .instance = host};

        if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
            memcpy(host, "kpssh-controller", sizeof("kpssh-controller"));
        host[sizeof(host) - 1] = '\0';
        if ((r = kp_events_new(ctl->o.client, &eo, &ctl->own_events)) < 0)
            return r;
    }
    if ((r = kp_reconciler_start(ctl->rec)) < 0)
        return r;
    atomic_store(&ctl->started, true);
    return 0;
}

void kp_controller_stop(struct kp_controller *ctl)
{
    if (!ctl)
        return;
    kp_reconciler_stop(ctl->rec);
    atomic_store(&ctl->started, false); /* startable again (a replica that leads again) */
}

bool kp_controller_ready(struct kp_controller *ctl)
{
    if (!ctl || !atomic_load(&ctl->started) || !kp_reconciler_running(ctl->rec))
        return false;
    for (size_t i = 0; i < ctl->nready; i++)
        if (!kp_informer_synced(ctl->ready[i]))
            return false;
    return true;
}

struct kp_reconciler *kp_controller_reconciler(struct kp_controller *ctl)
{
    return ctl->rec;
}

struct kp_events *kp_controller_events(struct kp_controller *ctl)
{
    return ctl->o.events ? ctl->o.events : ctl->own_events;
}
