/* k8s/registry.h: the process's informers, one per resource and namespace, shared by every
 * controller that reads the kind.
 *
 * A controller asks the registry for the informers it reads (kp_registry_informer) while the
 * process sets up; the first ask makes the informer, later asks of the same resource and
 * namespace get the same one, so the SSH provider's controllers and the core's list and watch
 * Nodes, Pods and NodeClaims once between them. Each adds its handlers and indexes to the
 * shared informer before the registry starts (k8s/informer.h: there is no fixed limit on
 * either). The registry then starts every informer once, waits for them to sync, and stops
 * them all; a stopped registry may start again (a replica that lost its Lease and leads again):
 * the informers list afresh and are unsynced until they have.
 *
 * Lookups are typed: each informer is registered with the kind tag of its projection
 * (api/obj.h kp_kind_*, the same string as the resource's kind). Asking for an informer with
 * a tag or projection other than the one it was made with (the Pod informer asked for as
 * Nodes) is refused with -EPROTOTYPE, and the informer itself aborts on an entry of the wrong
 * kind, so a store is never read as another kind's view. api/informers.h has the typed
 * accessors for the built-in kinds.
 *
 * Informers with label or field selectors are not shared (they hold a subset of the kind); a
 * controller that needs one makes it with kp_informer_new() and owns it.
 *
 * Threads: new, informer, start, wait_synced, stop and free on the main thread; synced, count
 * and at from any thread once set-up is done (the informer array does not change after
 * start). */
#ifndef KP_K8S_REGISTRY_H
#define KP_K8S_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "k8s/informer.h"

struct kp_ctx;
struct kp_client;
struct kp_informer;
struct kp_informer_opts;
struct kp_registry;

/* An empty, stopped registry whose informers list and watch through clones of c (c must
 * outlive each kp_registry_informer call only). 0 or -ENOMEM. */
int kp_registry_new(struct kp_client *c, struct kp_registry **ret) KP_WUR;
/* Stops and frees every informer; accepts and returns NULL. The order at shutdown is
 * kp_registry_stop(), then free the controllers (their handlers come out of the stopped
 * informers: kp_controller_free() aborts on a running one), then kp_registry_free(). */
struct kp_registry *kp_registry_free(struct kp_registry *reg);

/* The informer of opts->res in opts->ns (NULL: all namespaces, or a cluster-scoped kind): the
 * one an earlier call made, or a new one made with opts (copied). *ret is borrowed: the
 * registry owns it until kp_registry_free(). opts->view_kind is required and must name the
 * resource's kind.
 *   0
 *   -EINVAL       no resource, projection or view kind, or a label or field selector
 *   -EPROTOTYPE   view_kind is not the resource's kind, or the informer of this resource and
 *                 namespace exists with another view kind or projection
 *   -EBUSY        no informer exists yet and the registry has been started, even if stopped
 *                 since (every informer is made during set-up, so none starts late and
 *                 unsynced, and count/at see a fixed array)
 *   -ENOMEM, errors of kp_informer_new() */
int kp_registry_informer(struct kp_registry *reg, const struct kp_informer_opts *opts,
                         struct kp_informer **ret) KP_WUR;
/* kp_registry_informer() with the options of a typed accessor (api/informers.h): resource,
 * projection, the kind tag it stamps, namespace (NULL: all, or cluster-scoped). */
int kp_registry_typed(struct kp_registry *reg, const struct kp_resource *res, kp_project_fn project,
                      const char *view_kind, const char *ns, struct kp_informer **ret) KP_WUR;

/* Starts every informer (in the order they were made), then waits until each has synced, at
 * most timeout_usec for all of them together and only while ctx (NULL: none) goes on: a term
 * whose Lease is lost meanwhile ends the wait within KP_REGISTRY_WAIT_SLICE_USEC. On an error
 * the informers are stopped again and *ret_kind (optional) names the kind that was not synced
 * ("Pod"). 0, -EALREADY (started), -ETIMEDOUT, ctx's error (-ECANCELED) or -errno. */
#define KP_REGISTRY_WAIT_SLICE_USEC (100 * 1000ULL)
int kp_registry_start(struct kp_registry *reg, uint64_t timeout_usec, const struct kp_ctx *ctx,
                      const char **ret_kind) KP_WUR;
/* Stops every informer, in reverse order. Idempotent; startable again afterwards. */
void kp_registry_stop(struct kp_registry *reg);
/* True between a successful start and stop. Any thread. */
bool kp_registry_started(struct kp_registry *reg);
/* True while started and every informer is synced. Any thread. */
bool kp_registry_synced(struct kp_registry *reg);

/* How many informers, and the i-th (in the order made), for metrics. Any thread after the
 * first start (the array is fixed from then on). */
size_t kp_registry_count(const struct kp_registry *reg);
struct kp_informer *kp_registry_at(const struct kp_registry *reg, size_t i);

#endif
