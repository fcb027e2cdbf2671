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

/* The address of a host is its identity: two SSHHosts with the same spec.address (compared
 * without regard to case) and port are one machine. Of such a group only the oldest
 * (creationTimestamp, then name) is used; every younger one is refused (hostctl.h
 * DuplicateAddress) and never claimed.
 *
 * The key of h's address, "<address lower-cased>:<port>", into buf (truncated to size, which
 * KP_INVENTORY_ADDRESS_KEY_MAX always fits). Empty when h has no address. */
#define KP_INVENTORY_ADDRESS_KEY_MAX 264
void kp_inventory_address_key(const struct kp_sshhost_view *h, char *buf, size_t size)
    KP_NONNULL(1, 2);
/* True when a and b are two SSHHosts (by namespace and name) with the same address key. */
bool kp_inventory_same_address(const struct kp_sshhost_view *a, const struct kp_sshhost_view *b)
    KP_NONNULL(1, 2);
/* The host among hosts[0..n) that h's address belongs to when that is not h: the oldest other
 * host with the same address that is older than h (creationTimestamp, then name). NULL when h
 * is the oldest of its address (or alone). */
const struct kp_sshhost_view *kp_inventory_duplicate_of(const struct kp_sshhost_view *h,
                                                        const struct kp_sshhost_view *const *hosts,
                                                        size_t n) KP_NONNULL(1);

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

/* True when it can back the NodeClaim: the NodeClaim's requirement set intersects the instance
 * type's and an available offering's (api/requirements.h; keys the type does not define, such as
 * karpenter.sh/nodepool, are the core's and are left alone), and every resource request fits its
 * allocatable. */
bool kp_inventory_fits(const struct kp_instance_type *it, const struct kp_nodeclaim_view *nc)
    KP_NONNULL(1, 2);

#endif
