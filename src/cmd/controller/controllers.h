/* cmd/controller/controllers.h: the controllers kpssh-controller runs while it leads.
 *
 * A controller (the SSH provider's host and node-class controllers, later the core's
 * provisioner and lifecycle controllers) plugs in with one struct kp_controller_def in the
 * table of controllers.c. Its code lives in its own layer and knows nothing of this file: the
 * def's functions are thin adapters over the layer's own API.
 *
 * Informers are the process's, not a controller's: main.c makes one registry
 * (k8s/registry.h) and hands it to every setup in the env; a controller asks it for the
 * informers it reads (api/informers.h) and registers its handlers and indexes on them. The set
 * starts the registry and waits until every informer has synced before it starts the first
 * controller, and stops it after the last controller has stopped, so a controller never sees
 * an informer starting late or stopping under it.
 *
 * Lifecycle, all on the main thread except ready():
 *   setup   at start-up on every replica, leader or not, before the HTTP server starts:
 *           register metric families, get informers from env->informers and register on
 *           them, build (not start) queues. Optional.
 *   start   once this replica leads, after the informers synced: start workers and runners.
 *           0 or an error, which makes the process release the Lease and exit 1. Called
 *           again after stop when the replica lost the Lease and leads again: it must start
 *           afresh (the informers have listed again by then).
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
struct kp_ctx;
struct kp_controller_set;
struct kp_metrics;
struct kp_registry;

/* Longest the set waits for the informers to sync before it gives up starting. */
#define KP_CONTROLLER_SYNC_TIMEOUT_USEC (120 * 1000000ULL)

/* What every controller is given. Borrowed; lives until after free. */
struct kp_controller_env {
    struct kp_client *client; /* the main thread's client: kp_client_clone() one per thread */
    struct kp_metrics *metrics;
    struct kp_registry *informers; /* the process's informers (k8s/registry.h); set-up only
                                    * adds to it, the set starts and stops it */
    const struct kp_controller_options *opts;
    const char *identity; /* this replica's leader-election identity (event source, logs) */
    /* The context of the current leadership term (base/ctx.h; NULL: none): cancelled by
     * SIGTERM and by a lost Lease before stop is called, so everything started under it (SSH
     * jobs, reconciles) ends at once; set up afresh before each start. */
    const struct kp_ctx *ctx;
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

/* Runs every setup, then registers the informer metrics (kpssh_informer_synced{kind},
 * kpssh_informer_list_page_size{kind}) over env->informers. 0 or the first error
 * (already-set-up controllers are freed), logged with the controller's name. */
int kp_controller_set_new(const struct kp_controller_def *const *defs, size_t n,
                          const struct kp_controller_env *env,
                          struct kp_controller_set **ret) KP_WUR KP_NONNULL(3, 4);
/* Frees every state (after stop and after the HTTP server stopped). Accepts and returns NULL. */
struct kp_controller_set *kp_controller_set_free(struct kp_controller_set *s);

/* Starts the informers and waits until they synced (at most KP_CONTROLLER_SYNC_TIMEOUT_USEC),
 * then every controller in order; on an error stops what it started and returns it. */
int kp_controller_set_start(struct kp_controller_set *s) KP_WUR KP_NONNULL(1);
/* Stops the started controllers in reverse order, then the informers. No-op when not
 * started. */
void kp_controller_set_stop(struct kp_controller_set *s) KP_NONNULL(1);
/* True when not started, or started, every informer synced and every controller ready. Any
 * thread; ctx is the set (a kp_health_check_fn). */
bool kp_controller_set_ready(void *set);
/* True between a successful start and stop. Any thread. */
bool kp_controller_set_started(const struct kp_controller_set *s) KP_NONNULL(1);

#endif
