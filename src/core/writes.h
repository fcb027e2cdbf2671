/* core/writes.h: the writes the core's controllers share, each a compare-and-swap.
 *
 * Every write carries a precondition: merge patches carry the cached metadata.resourceVersion
 * (the API server answers Conflict, -KP_ECONFLICT, when the object changed since), deletes carry
 * the cached uid. A lost race is never an error to log: the caller requeues and decides again
 * from the newer cache. Nothing here logs (STYLE rule 8); callers do.
 *
 * Threads: any worker, with its own client. */
#ifndef KP_CORE_WRITES_H
#define KP_CORE_WRITES_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"

typedef struct json_t json_t;
struct kp_client;
struct kp_condset;
struct kp_node_view;
struct kp_resource;

/* Whether list (n strings) holds s. */
bool kp_strs_has(const char *const *list, size_t n, const char *s);

/* Builds into patch (a merge patch object) metadata.finalizers as list with name added (add) or
 * removed, every other finalizer kept in order. 0 or -ENOMEM. */
int kp_patch_finalizers(json_t *patch, const char *const *list, size_t n, const char *name,
                        bool add) KP_NONNULL(1, 4) KP_WUR;

/* A merge patch of name (cluster-scoped when ns is NULL) with body and metadata.resourceVersion
 * set to rv (body is changed: rv is added; subresource "status" or NULL). 0, -KP_ECONFLICT (lost
 * the race), -ENOENT, or the client's errors; *ret_msg (optional) the server's message. */
int kp_patch_cas(struct kp_client *c, const struct kp_resource *res, const char *ns,
                 const char *name, const char *subresource, const char *rv, json_t *body,
                 char **ret_msg) KP_NONNULL(1, 2, 4, 6, 7) KP_WUR;
/* kp_patch_cas, and on success *ret_rv (optional) the resourceVersion the server gave the patched
 * object (owned; NULL when its answer has none or the copy found no memory): the precondition of
 * a write that must follow this one before the cache has caught up with it (an undo). */
int kp_patch_cas_rv(struct kp_client *c, const struct kp_resource *res, const char *ns,
                    const char *name, const char *subresource, const char *rv, json_t *body,
                    char **ret_rv, char **ret_msg) KP_NONNULL(1, 2, 4, 6, 7) KP_WUR;

/* Writes cs as status.conditions of name with the precondition rv (a status merge patch). 0 when
 * cs has no change (nothing sent), else as kp_patch_cas. */
int kp_write_conditions(struct kp_client *c, const struct kp_resource *res, const char *ns,
                        const char *name, const char *rv, const struct kp_condset *cs,
                        char **ret_msg) KP_NONNULL(1, 2, 4, 5, 6) KP_WUR;

/* spec.taints of node as a new JSON array (*ret) with the karpenter.sh/disrupted:NoSchedule taint
 * (add: a same-key taint of another effect replaced; remove: every taint of that key dropped),
 * every other taint kept in order. For a merge patch under the Node's resourceVersion (the whole
 * list is replaced). 0 or -ENOMEM. */
int kp_taints_disrupted(const struct kp_node_view *node, bool add, json_t **ret)
    KP_NONNULL(1, 3) KP_WUR;

/* Deletes name only if its uid is still uid. 0, -ENOENT (already gone: deleted by someone else
 * since the cache saw it; a caller that logs and counts only the deletions it made skips both,
 * as Karpenter ignores NotFound before its metrics), -KP_ECONFLICT (another incarnation), or
 * the client's errors. */
int kp_delete_uid(struct kp_client *c, const struct kp_resource *res, const char *ns,
                  const char *name, const char *uid, char **ret_msg) KP_NONNULL(1, 2, 4, 5) KP_WUR;

#endif
