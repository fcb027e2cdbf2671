/* cmd/controller/controllers.h: the controllers kpssh-controller runs while it leads.
 *
 * A controller (the SSH provider's host and node-class controllers, later the core's
 * provisioner and lifecycle controllers) plugs in with one struct kp_controller_def in the
 * table of controllers.c. Its code lives in its own layer and knows nothing of this file: the
 * def's functions are thin adapters over the layer's own API.
 *
 * Lifecycle, all on the main thread except ready():
 *   setup   at start-up on every replica, leader or not, before the HTTP server starts:
 *           register metric families, build (not start) informers and queues. Optional.
 *   start   once this replica leads: start informers, workers and runners. 0 or an error,
 *           which makes the process release the Lease and exit 1. Called again after stop
 *           when the replica lost the Lease and leads again: it must start afresh (informers
 *           list again before anything acts).
 *   stop    on SIGTERM or a lost Lease: stop accepting work, finish or abandon what runs,
 *           join every thread. Must return; kpssh-controller bounds the whole shutdown with
 *           --shutdown-timeout. Called only after a successful start. After a lost Lease the
 *           write fence (k8s/fence.h) is already closed, so what still runs cannot write.
 *   ready   readiness while started (informers synced, workers running); any thread (the HTTP
 *           thread), must not block, may run concurrently with stop. NULL: ready once started.
 *   free    releases the state after the HTTP server has stopped. Optional.
 * Replicas that do not lead are ready (standby) as far as this set is concerned. */
#ifndef KP_CMD_CONTROLLER_CONTROLLERS_H
#define KP_CMD_CONTROLLER_CONTROLLERS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"

struct kp_client;
struct kp_controller_options;
struct kp_controller_set;
struct kp_metrics;

/* What every controller is given. Borrowed; lives until after free. */
struct kp_controller_env {
    struct kp_client *client; /* the main thread's client: kp_client_clone() one per thread */
    struct kp_metrics *metrics;
    const struct kp_controller_options *opts;
    const char *identity; /* this replica's leader-election identity (event source, logs) */
};

struct kp_controller_def {
    const char *name; /* [a-z0-9-]+, used in logs */
    int (*setup)(const struct kp_controller_env *env, void **ret_state);
    int (*start)(void *state);
    void (*stop)(void *state);
    bool (*ready)(void *state);
    void (*free)(void *state);
};

/* The table of controllers this binary runs, in start order (stopped in reverse). */
extern const struct kp_controller_def *const kp_controller_defs[];
extern const size_t kp_controller_defs_count;

/* Runs every setup. 0 or the first error (already-set-up controllers are freed), logged with
 * the controller's name. */
int kp_controller_set_new(const struct kp_controller_def *const *defs, size_t n,
                          const struct kp_controller_env *env,
                          struct kp_controller_set **ret) KP_WUR KP_NONNULL(3, 4);
/* Frees every state (after stop and after the HTTP server stopped). Accepts and returns NULL. */
struct kp_controller_set *kp_controller_set_free(struct kp_controller_set *s);

/* Starts every controller in order; on an error stops the ones started and returns it. */
int kp_controller_set_start(struct kp_controller_set *s) KP_WUR KP_NONNULL(1);
/* Stops the started controllers in reverse order. No-op when not started. */
void kp_controller_set_stop(struct kp_controller_set *s) KP_NONNULL(1);
/* True when not started, or started and every controller is ready. Any thread; ctx is the set
 * (a kp_health_check_fn). */
bool kp_controller_set_ready(void *set);
/* True between a successful start and stop. Any thread. */
bool kp_controller_set_started(const struct kp_controller_set *s) KP_NONNULL(1);

#endif
