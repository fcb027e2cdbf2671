/* http/health.h: the readiness checks behind /readyz.
 *
 * A check is a named callback that answers "ready?" from state it can read on any thread (an
 * atomic flag, kp_informer_synced()). Checks are added at start-up, before the HTTP server
 * starts, and run on the HTTP thread for every /readyz request, in the order they were added.
 * The report is the one the Kubernetes API server writes for its own /readyz?verbose:
 *   [+]apiserver ok
 *   [-]controllers not ready
 *   readyz check failed
 * which names what is not ready without saying more about it than its name. */
#ifndef KP_HTTP_HEALTH_H
#define KP_HTTP_HEALTH_H

#include <stdatomic.h>
#include <stdbool.h>

#include "base/macro.h"

struct kp_buf;
struct kp_health;

#define KP_HEALTH_MAX_CHECKS 32

/* True when ready. Runs on the HTTP thread: must be thread-safe and must not block. */
typedef bool (*kp_health_check_fn)(void *ctx);

/* An empty set of checks (ready). 0 or -ENOMEM. */
int kp_health_new(struct kp_health **ret) KP_WUR;
/* Accepts and returns NULL. After the HTTP server using it has stopped. */
struct kp_health *kp_health_free(struct kp_health *h);

/* Adds a check. name ([a-z0-9-]+, copied) must be unique; ctx must outlive the HTTP server.
 * 0, -EINVAL (bad or duplicate name), -KP_ELIMIT (more than KP_HEALTH_MAX_CHECKS) or -ENOMEM.
 * Start-up only (main thread, before the server starts). */
int kp_health_add_check(struct kp_health *h, const char *name, kp_health_check_fn fn,
                        void *ctx) KP_WUR KP_NONNULL(1, 2, 3);

/* A ready check reading an atomic_bool (ctx is the atomic_bool *). */
bool kp_health_check_flag(void *ctx);

/* Runs every check and appends the report above to out ("ok\n" alone when every check passes
 * and verbose is false). *ret_ready tells whether all passed. 0, -ENOMEM or -KP_ELIMIT. Any
 * thread. */
int kp_health_report(struct kp_health *h, bool verbose, struct kp_buf *out, bool *ret_ready) KP_WUR
    KP_NONNULL(1, 3, 4);

#endif
