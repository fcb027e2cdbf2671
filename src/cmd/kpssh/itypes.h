/* cmd/kpssh/itypes.h: `kpssh simulate --instance-types FILE`, instance types given directly.
 *
 * The file is one YAML or JSON document (docs/cli.md, "kpssh simulate"):
 *
 *   apiVersion: kpssh.dev/v1alpha1      required, exactly this
 *   kind: InstanceTypes
 *   items:                              each shaped like Karpenter's cloudprovider.InstanceType
 *   - name: big                         a label value; unique
 *     requirements: [{key, operator, values}]     optional NodeSelectorRequirements
 *     capacity: {cpu: "4", memory: 8Gi}           cpu and memory required; pods 110 if absent
 *     overhead: {kubeReserved: {}, systemReserved: {}, evictionThreshold: {}}     optional
 *     offerings:                        one or more, each zone and capacity type unique
 *     - requirements: [zone In [one], capacity-type In [one: on-demand or spot]]
 *       price: 0.08                     US dollars per hour, a number
 *       available: true                 optional, true when absent
 *
 * Each item becomes a struct kp_instance_type as the SSH provider builds one
 * (provider/ssh/inventory.h): its requirement set is the item's requirements, plus
 * kubernetes.io/arch In [amd64] and kubernetes.io/os In [linux] when they do not name those keys,
 * intersected with node.kubernetes.io/instance-type In [name] and zone and capacity type In [the
 * values of its offerings] (a requirement that leaves out the name or an offering's value is
 * refused); its labels are the keys of that set with one value (In [v]); overhead is
 * kubeReserved + systemReserved + evictionThreshold per resource (Karpenter's
 * InstanceTypeOverhead.Total), so allocatable is capacity minus that; an offering's price is
 * micro-USD per hour, rounded to the nearest. Unknown fields are refused, so a misspelt one is
 * not silently ignored.
 *
 * The types are then every NodePool's instance types: kp_itypes_provider wraps the SSH provider
 * and answers get_instance_types with them for every NodePool, forwarding every other call.
 *
 * Pure but for the provider (no I/O, no globals); main thread (the CLI's). */
#ifndef KP_CMD_KPSSH_ITYPES_H
#define KP_CMD_KPSSH_ITYPES_H

#include <stddef.h>

#include "base/macro.h"
#include "core/provider.h"

#define KP_ITYPES_API_VERSION "kpssh.dev/v1alpha1"
#define KP_ITYPES_KIND "InstanceTypes"

/* Ceilings: the file (4 MiB; whose one document is further bounded by api/obj.h's
 * KP_MAX_OBJECT_BYTES), items, offerings per item, requirements per list (an item's or an
 * offering's), resources per ResourceList, and the price of one offering in US dollars per
 * hour. */
#define KP_ITYPES_MAX_FILE (4u << 20)
#define KP_ITYPES_MAX_ITEMS 1024u
#define KP_ITYPES_MAX_OFFERINGS 256u
#define KP_ITYPES_MAX_REQUIREMENTS 64u
#define KP_ITYPES_MAX_RESOURCES 64u
#define KP_ITYPES_MAX_PRICE_USD 1000000

/* Pods per instance type when capacity has no "pods" (the SSH provider's default). */
#define KP_ITYPES_PODS_DEFAULT 110

/* Parses the len bytes at p (named file in messages) as an InstanceTypes document. On success
 * *ret (caller's; kp_instance_types_done) holds the types sorted by name. 0; -KP_EPARSE for
 * input that is not such a document and -KP_ELIMIT past a ceiling above, each with *ret_msg
 * (optional, base/err.h) naming the file and the item and field ("t.yaml:1: items[1] \"big\":
 * capacity.cpu: ..."); -ENOMEM. Pure; any thread. */
int kp_itypes_parse(const char *p, size_t len, const char *file, struct kp_instance_types *ret,
                    char **ret_msg) KP_NONNULL(3, 4) KP_WUR;

/* A provider that is inner with its instance types replaced by types (taken over: *types is
 * emptied, also on failure): get_instance_types answers one catalog of them for every NodePool
 * it is asked about, every other call goes to inner. *inner is copied; the provider it names
 * must outlive the new one. 0 or -ENOMEM. */
struct kp_itypes_provider;
int kp_itypes_provider_new(const struct kp_provider *inner, struct kp_instance_types *types,
                           struct kp_itypes_provider **ret) KP_NONNULL(1, 2, 3) KP_WUR;
/* Accepts and returns NULL. */
struct kp_itypes_provider *kp_itypes_provider_free(struct kp_itypes_provider *p);
/* The vtable and state for struct kp_core_env; valid while p lives. */
struct kp_provider kp_itypes_provider_as_provider(struct kp_itypes_provider *p) KP_NONNULL(1);

#endif
