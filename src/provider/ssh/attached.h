/* provider/ssh/attached.h: how long kpssh's hosts have been cluster members, the way EKS Hybrid
 * Nodes bills them (docs/operations.md "attached time").
 *
 * A host is attached while a Node object for it exists: from the Node's creationTimestamp until
 * the Node is gone from the API (its delete seen by the Node informer). What the cluster bills is
 * the Node object, not the kubelet, which is why kpssh deletes the Node as soon as leave has
 * stopped kubelet. A Node is kpssh's when its providerID has the kpssh:// scheme; its class is
 * its node.kubernetes.io/instance-type label ("default" without one), its vCPUs its capacity.
 *
 * The counters kpssh_host_attached_seconds_total{class} and
 * kpssh_host_attached_vcpu_seconds_total{class} are, at each scrape, the finished lifetimes of
 * the Nodes deleted since the controller started plus the age of every live Node. Both only
 * grow: a Node's age at one scrape is at most its lifetime when it goes. A restart starts them
 * again from the live Nodes' ages (a counter reset to Prometheus); Nodes deleted while no
 * controller ran are not counted.
 *
 * kp_ssh_node_membership() is the pure part; struct kp_ssh_attached keeps the finished
 * lifetimes by class, for the Node informer's delete handler and the metrics collector. */
#ifndef KP_PROVIDER_SSH_ATTACHED_H
#define KP_PROVIDER_SSH_ATTACHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_node_view;

/* Classes kept apart in the tally; later classes share the last row's name "other". */
#define KP_SSH_ATTACHED_MAX_CLASSES 64

/* One Node's membership at now_usec: its class (borrowed from n), seconds since its creation
 * (0 when created after now) and those seconds times its vCPUs (capacity cpu). false, and the
 * outputs untouched, when the Node is not kpssh's or has no creationTimestamp. Pure. */
bool kp_ssh_node_membership(const struct kp_node_view *n, int64_t now_usec, const char **ret_class,
                            double *ret_seconds, double *ret_vcpu_seconds) KP_NONNULL(1, 3, 4, 5);

struct kp_ssh_attached_row {
    char class_name[64];
    double seconds;
    double vcpu_seconds;
};

struct kp_ssh_attached;

/* An empty tally. 0 or -ENOMEM. */
int kp_ssh_attached_new(struct kp_ssh_attached **ret) KP_WUR KP_NONNULL(1);
/* Accepts and returns NULL. */
struct kp_ssh_attached *kp_ssh_attached_free(struct kp_ssh_attached *a);

/* Adds a deleted Node's whole lifetime (kp_ssh_node_membership at now_usec); nothing for a Node
 * that is not kpssh's. Any thread. */
void kp_ssh_attached_node_gone(struct kp_ssh_attached *a, const struct kp_node_view *n,
                               int64_t now_usec) KP_NONNULL(1, 2);

/* Copies the finished lifetimes by class into rows (at most cap; the classes in the order first
 * seen). The number of rows. Any thread. */
size_t kp_ssh_attached_finished(struct kp_ssh_attached *a, struct kp_ssh_attached_row *rows,
                                size_t cap) KP_NONNULL(1);

/* Adds seconds and vcpu_seconds to the row of class in rows[0..*n) (cap entries), appending a row
 * for a new class while there is room and folding the rest into a last row "other". Pure. */
void kp_ssh_attached_add(struct kp_ssh_attached_row *rows, size_t *n, size_t cap,
                         const char *class_name, double seconds, double vcpu_seconds)
    KP_NONNULL(1, 2, 4);

#endif
