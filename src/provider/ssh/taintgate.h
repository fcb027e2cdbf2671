/* provider/ssh/taintgate.h: the startup taint gate controller (docs/api.md
 * spec.startupTaintGates; docs/operations.md "startup taint gates"): removes a NodeClaim's
 * startup taint from its Node once the gate the SSHNodeClass declares for that key opens.
 *
 * A Node is considered when it has taints and a controller-or-not owner reference to a
 * karpenter.sh/v1 NodeClaim whose nodeClassRef is an SSHNodeClass with startupTaintGates. For
 * each gate whose taintKey is both in the NodeClaim's spec.startupTaints and on the Node:
 *
 *   podsReady      open when at least minReady pods of namespace matching selector are bound to
 *                  the Node (spec.nodeName), not being deleted, and Ready=True
 *   nodeCondition  open when the Node has condition type with that status (missing: closed)
 *
 * Only keys listed in the NodeClaim's startupTaints are ever removed (every effect of that key),
 * all open keys in one optimistic-lock patch of the Node; a conflict requeues. While a gate is
 * closed the Node is looked at again after KP_TAINTGATE_RECHECK_USEC (and on every relevant
 * event). There is no timeout: a gate that never opens leaves the NodeClaim Initialized=Unknown
 * (StartupTaintsExist), which is where users look. Each removal is a Normal event
 * StartupTaintRemoved (action GateOpened) on the Node, and a gate_opened callback with the
 * time since the Node's creation (for kpssh_node_startup_taint_gate_seconds).
 *
 * The decision is the pure kp_taintgate_evaluate(); struct kp_ssh_taintgate wires it to
 * informers and a reconciler keyed by Node name. */
#ifndef KP_PROVIDER_SSH_TAINTGATE_H
#define KP_PROVIDER_SSH_TAINTGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

typedef struct json_t json_t;
struct kp_buf;
struct kp_client;
struct kp_events;
struct kp_informer;
struct kp_node_view;
struct kp_nodeclaim_view;
struct kp_pod_view;
struct kp_sshnodeclass_view;
struct kp_taint_gate;

#define KP_TAINTGATE_COMPONENT "kpssh-startup-taint-gate"
#define KP_TAINTGATE_EVENT_REASON "StartupTaintRemoved"
#define KP_TAINTGATE_EVENT_ACTION "GateOpened"
#define KP_TAINTGATE_RECHECK_USEC (30ULL * 1000000ULL)
/* The CRD's maxItems for startupTaintGates: the masks below have a bit per gate. */
#define KP_TAINTGATE_MAX_GATES 16

/* --- pure decision (any thread, no I/O, no allocation) ---------------------------------------- */

/* The NodeClaim name of a Node's karpenter.sh/v1 NodeClaim owner reference, or NULL. */
const char *kp_taintgate_owner_claim(const struct kp_node_view *node) KP_NONNULL(1);

/* True when gate g is open on node, given the pods bound to it (any pods; those of other nodes
 * or namespaces are ignored). An invalid gate (kind neither or both, a selector that did not
 * build or is empty) never opens. */
bool kp_taintgate_open(const struct kp_taint_gate *g, const struct kp_node_view *node,
                       const struct kp_pod_view *const *pods, size_t n_pods) KP_NONNULL(1, 2);

struct kp_taintgate_verdict {
    uint32_t open;    /* bit i: gate i applies and is open (remove its key) */
    uint32_t pending; /* bit i: gate i applies and is closed */
};

/* Decides for one Node: a gate applies when the class has it, its key is in the NodeClaim's
 * spec.startupTaints and the Node carries a taint with that key. Gates past
 * KP_TAINTGATE_MAX_GATES are ignored. */
void kp_taintgate_evaluate(const struct kp_node_view *node, const struct kp_nodeclaim_view *claim,
                           const struct kp_sshnodeclass_view *nc,
                           const struct kp_pod_view *const *pods, size_t n_pods,
                           struct kp_taintgate_verdict *ret) KP_NONNULL(1, 2, 3, 6);

/* The Node merge patch that removes every taint whose key is in keys (n_keys of them), built
 * from the Node's own spec.taints JSON array (so fields we do not project, such as timeAdded,
 * survive) and carrying metadata.resourceVersion = rv. Appends JSON text to out; *ret_removed
 * (optional) receives how many taints were dropped (0: nothing to write). 0, -EINVAL (empty rv),
 * -KP_EPARSE (taints not an array of objects), -ENOMEM, -KP_ELIMIT. */
int kp_taintgate_patch(const json_t *taints, const char *rv, const char *const *keys, size_t n_keys,
                       struct kp_buf *out, size_t *ret_removed) KP_NONNULL(2, 5) KP_WUR;

/* --- the controller --------------------------------------------------------------------------- */

/* A taint was removed: usec from the Node's creation to the removal. Runs on a worker thread;
 * must be thread-safe and must not block. */
typedef void (*kp_taintgate_opened_fn)(void *ctx, const char *taint_key, uint64_t usec);

struct kp_ssh_taintgate_opts {
    struct kp_client *client; /* cloned per worker; must outlive start() */
    struct kp_informer *nodes, *pods, *nodeclaims, *nodeclasses; /* not yet started */
    struct kp_events *events;           /* optional: a recorder with reportingController
                               * KP_TAINTGATE_COMPONENT; NULL: the controller makes its own */
    kp_taintgate_opened_fn gate_opened; /* optional */
    void *gate_opened_ctx;
    unsigned workers;      /* 0: 1 */
    uint64_t recheck_usec; /* 0: KP_TAINTGATE_RECHECK_USEC */
};

struct kp_ssh_taintgate;

/* A stopped controller (on the skeleton of k8s/controller.h). Adds handlers to the four
 * informers and the indexes it reads (api/indexes.h pods by node, provider/ssh/indexes.h
 * NodeClaims by node class); the informers must not have started and must outlive the
 * controller. On an error nothing stays registered. Main thread. 0, -EINVAL, -EBUSY (an
 * informer started), -ENOMEM. */
int kp_ssh_taintgate_new(const struct kp_ssh_taintgate_opts *o,
                         struct kp_ssh_taintgate **ret) KP_WUR;
int kp_ssh_taintgate_start(struct kp_ssh_taintgate *tg) KP_WUR;
void kp_ssh_taintgate_stop(struct kp_ssh_taintgate *tg);
/* True once started and its four informers have synced. Any thread. */
bool kp_ssh_taintgate_ready(struct kp_ssh_taintgate *tg);
/* Stops, takes its handlers back out of the informers and frees; accepts and returns NULL.
 * Free only after the informers have stopped (and before they are freed). */
struct kp_ssh_taintgate *kp_ssh_taintgate_free(struct kp_ssh_taintgate *tg);

/* The reconcile step for one Node (the reconciler calls it; tests may too). */
int kp_ssh_taintgate_reconcile(struct kp_ssh_taintgate *tg, struct kp_client *c, const char *node,
                               uint64_t *ret_requeue_usec) KP_WUR;

#endif
