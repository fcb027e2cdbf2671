/* provider/ssh/inventory.h: instance types from host classes, and the host facts the claim path
 * and the offerings agree on.
 *
 * One SSHNodeClass selects hosts of the pool namespace (spec.hostSelector); its hosts fall into
 * classes by the host-class label ("default" when missing); one class is one instance type:
 *
 *   capacity     per resource, the minimum over the class's hosts (spec.capacity); a resource
 *                missing on some host is dropped; hosts without a positive cpu and memory are
 *                left out; pods = spec.maxPods, else a "pods" entry, else 110
 *   overhead     spec.kubeReserved (cpu 80m, memory 300Mi when empty)
 *   arch         status.observedArch of the probed hosts (x86_64 -> amd64, aarch64 -> arm64);
 *                a class with no probed host, mixed arches or an arch other than amd64/arm64
 *                is not advertised (it is named in *ret_skipped, for a log line)
 *   price        class cpu x spec.pricePerCPUHour (micro-USD per hour)
 *   offering     one: zone "pool", capacity type "on-demand", available iff some host of the
 *                class is claimable (kp_inventory_claimable)
 *
 * Everything here is pure: no I/O, no globals, any thread. Views are borrowed. */
#ifndef KP_PROVIDER_SSH_INVENTORY_H
#define KP_PROVIDER_SSH_INVENTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_instance_type;
struct kp_instance_types;
struct kp_nodeclaim_view;
struct kp_sshhost_view;
struct kp_sshnodeclass_view;
struct kp_strv;

#define KP_INVENTORY_ZONE "pool"
#define KP_INVENTORY_OS "linux"
#define KP_INVENTORY_KUBE_RESERVED_CPU_MILLI 80
#define KP_INVENTORY_KUBE_RESERVED_MEM_MILLI (300LL * 1024 * 1024 * 1000)

/* True when h belongs to the node class: it lives in pool_ns and the class's selector selects
 * its labels. */
bool kp_inventory_member(const struct kp_sshnodeclass_view *nc, const char *pool_ns,
                         const struct kp_sshhost_view *h) KP_NONNULL(1, 2, 3);

/* True when h may be claimed: state Available, no claimRef, no maintenance annotation. The
 * offerings and the claim path both use this, so an offering is never advertised for a host
 * the claim path would skip. */
bool kp_inventory_claimable(const struct kp_sshhost_view *h) KP_NONNULL(1);

/* "amd64" or "arm64" for an observed arch (x86_64 and aarch64 normalised), NULL otherwise. */
const char *kp_inventory_arch(const char *observed);

/* The instance types of nc over a snapshot of hosts (any namespace; members are picked here),
 * sorted by name. *ret_skipped (optional) receives one line per class not advertised,
 * "<class>: <why>". 0 or -ENOMEM (outputs untouched then). A node class whose price is invalid
 * yields -EINVAL. */
int kp_inventory_instance_types(const struct kp_sshnodeclass_view *nc, const char *pool_ns,
                                const struct kp_sshhost_view *const *hosts, size_t n_hosts,
                                struct kp_instance_types *ret, struct kp_strv *ret_skipped)
    KP_NONNULL(1, 2, 5) KP_WUR;

/* True when it can back the NodeClaim: every NodeClaim requirement on a label the instance type
 * defines holds for its value (requirements on labels it does not define are the core's, such
 * as karpenter.sh/nodepool, and are left alone), and every resource request fits its
 * allocatable. */
bool kp_inventory_fits(const struct kp_instance_type *it, const struct kp_nodeclaim_view *nc)
    KP_NONNULL(1, 2);

#endif
