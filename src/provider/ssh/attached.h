/* provider/ssh/attached.h: how long kpssh's hosts have been cluster members, the way EKS Hybrid
 * Nodes bills them (docs/operations.md "attached time").
 *
 * A host is attached while a Node object for it exists: from the Node's creationTimestamp until
 * the Node is gone from the API (its delete seen by the Node informer). What the cluster bills is
 * the Node object, not the kubelet, which is why kpssh deletes the Node as soon as leave has
 * stopped kubelet. A Node is kpssh's when its providerID has the kpssh:// scheme or it carries
 * kpssh's NodeClass label (karpenter.kpssh.dev/sshnodeclass, stamped at launch: also the Nodes
 * of adopting joins such as nodeadm's); its class is its node.kubernetes.io/instance-type label
 * ("default" without one), its vCPUs its capacity.
 *
 * The counters kpssh_host_attached_seconds_total{class} and
 * kpssh_host_attached_vcpu_seconds_total{class} integrate the time this process has watched
 * while leading: each accounting (a scrape) adds, for every live Node, the time since the last
 * accounting (or its creation, if later), and a Node's delete adds the rest of its life since the
 * last accounting. Nothing is counted while the controller stands by or before it first leads,
 * and a Node deleted while it was not watching adds nothing when the relist finds it gone (the
 * leader of that time counted it). So the counters never count a second twice across restarts
 * and leader changes: sum(increase()) over every replica is the pool's attached time, short only
 * of the moments no replica led.
 *
 * kp_ssh_node_membership() and kp_ssh_attached_add() are the pure parts; struct kp_ssh_attached
 * keeps the running sums by class, for the Node informer's delete handler and the collector. */
#ifndef KP_PROVIDER_SSH_ATTACHED_H
#define KP_PROVIDER_SSH_ATTACHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_node_view;

/* Rows of the class table, one of them kept for "other" (kp_ssh_attached_add). */
#define KP_SSH_ATTACHED_MAX_CLASSES 64

/* One Node's membership from since_usec (or its creation, if later) to now_usec: its class
 * (borrowed from n), those seconds (0 when the span is empty) and the seconds times its vCPUs
 * (capacity cpu). false, and the outputs untouched, when the Node is not kpssh's or has no
 * creationTimestamp. Pure. */
bool kp_ssh_node_membership(const struct kp_node_view *n, int64_t since_usec, int64_t now_usec,
                            const char **ret_class, double *ret_seconds, double *ret_vcpu_seconds)
    KP_NONNULL(1, 4, 5, 6);

struct kp_ssh_attached_row {
    char class_name[64];
    double seconds;
    double vcpu_seconds;
};

struct kp_ssh_attached;

/* An empty tally, not counting until kp_ssh_attached_resume(). 0 or -ENOMEM. */
int kp_ssh_attached_new(struct kp_ssh_attached **ret) KP_WUR KP_NONNULL(1);
/* Accepts and returns NULL. */
struct kp_ssh_attached *kp_ssh_attached_free(struct kp_ssh_attached *a);

/* Counting starts at now_usec (the controllers start: informers synced, leading). Any thread. */
void kp_ssh_attached_resume(struct kp_ssh_attached *a, int64_t now_usec) KP_NONNULL(1);
/* Counting stops (the controllers stop: standing by, or shutting down). Any thread. */
void kp_ssh_attached_pause(struct kp_ssh_attached *a) KP_NONNULL(1);

/* A deleted Node's time since the last accounting; nothing while paused or for a Node that is
 * not kpssh's. Any thread. */
void kp_ssh_attached_node_gone(struct kp_ssh_attached *a, const struct kp_node_view *n,
                               int64_t now_usec) KP_NONNULL(1, 2);

/* An accounting at now_usec: live(ctx, visit, vctx) must call visit(vctx, n) for every live
 * Node (the Node informer's store walk); each adds its time since the last accounting. Then the
 * running sums are copied into rows (at most cap). The number of rows. Nothing is added while
 * paused or when live fails (rows still copied). Any thread; live runs under the tally's lock. */
typedef void (*kp_ssh_attached_visit_fn)(void *vctx, const struct kp_node_view *n);
size_t kp_ssh_attached_account(struct kp_ssh_attached *a, int64_t now_usec,
                               int (*live)(void *ctx, kp_ssh_attached_visit_fn visit, void *vctx),
                               void *ctx, struct kp_ssh_attached_row *rows, size_t cap)
    KP_NONNULL(1, 3);

/* Adds seconds and vcpu_seconds to the row of class in rows[0..*n) (cap entries), appending a
 * row for a new class while that leaves room for one row "other"; the classes that find no room,
 * and a class named "other", share that row. A class keeps its row. Pure. */
void kp_ssh_attached_add(struct kp_ssh_attached_row *rows, size_t *n, size_t cap,
                         const char *class_name, double seconds, double vcpu_seconds)
    KP_NONNULL(1, 2, 4);

#endif
