/* provider/ssh/observe.h: what the SSH provider and its controllers report for metrics.
 *
 * The provider layer does not depend on http/ (scripts/check-layers.sh); it reports through
 * this small set of callbacks instead, and kpssh-controller adapts them to its metric
 * families (kpssh_host_probe_duration_seconds, kpssh_instance_phase_duration_seconds,
 * kpssh_host_zombie_actions_total, kpssh_ssh_jobs_total, kpssh_ssh_jobs_in_flight). Tests pass
 * their own or none.
 *
 * Callbacks run on the reporting worker's thread, several at once: they must be thread-safe
 * and must not block. Every callback may be NULL, and so may the observer itself. */
#ifndef KP_PROVIDER_SSH_OBSERVE_H
#define KP_PROVIDER_SSH_OBSERVE_H

#include <stdbool.h>
#include <stdint.h>

/* Phases of kp_ssh_observer.phase. */
#define KP_SSH_PHASE_INSTALL "install"
#define KP_SSH_PHASE_JOIN "join"
#define KP_SSH_PHASE_LEAVE "leave"
/* Actions of kp_ssh_observer.zombie. */
#define KP_SSH_ZOMBIE_LEFT "left"
#define KP_SSH_ZOMBIE_PARKED_FOREIGN "parked_foreign"
#define KP_SSH_ZOMBIE_LEAVE_FAILED "leave_failed"

struct kp_ssh_observer {
    /* One host probe ended (dial + probe command). */
    void (*probe)(void *ctx, bool success, uint64_t usec);
    /* One install, join or leave script ran (leaves of the zombie guard included). */
    void (*phase)(void *ctx, const char *phase, bool success, uint64_t usec);
    /* The zombie guard acted. */
    void (*zombie)(void *ctx, const char *action);
    /* An SSH job of the pool (jobs.h) ended: kind "probe", "install", "join" or "leave";
     * result "success", "error", "timeout" or "cancelled"; usec it ran. */
    void (*job)(void *ctx, const char *kind, const char *result, uint64_t usec);
    /* An SSH job started (+1) or ended (-1) running on a pool thread. */
    void (*jobs_running)(void *ctx, int delta);
    void *ctx;
};

/* Null-safe reporting helpers. */
static inline void kp_ssh_observe_probe(const struct kp_ssh_observer *o, bool success,
                                        uint64_t usec)
{
    if (o && o->probe)
        o->probe(o->ctx, success, usec);
}
static inline void kp_ssh_observe_phase(const struct kp_ssh_observer *o, const char *phase,
                                        bool success, uint64_t usec)
{
    if (o && o->phase)
        o->phase(o->ctx, phase, success, usec);
}
static inline void kp_ssh_observe_zombie(const struct kp_ssh_observer *o, const char *action)
{
    if (o && o->zombie)
        o->zombie(o->ctx, action);
}

#endif
