/* provider/ssh/indexes.c: the SSH provider's store indexes and informers (indexes.h). Index
 * functions are pure: they run under the store's lock. */
#include "provider/ssh/indexes.h"

#include <errno.h>

#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "k8s/store.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/inventory.h"

void kp_ssh_index_nodeclaim_class(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const struct kp_nodeclaim_view *v = kp_nodeclaim_view(e);

    if (kp_nodeclaim_is_ours(v))
        kp_index_emit_if(v->spec.node_class_ref.name, emit, ctx);
}

void kp_ssh_index_host_claim(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    kp_index_emit_if(kp_sshhost_view(e)->claim_name, emit, ctx);
}

void kp_ssh_index_host_address(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    char key[KP_INVENTORY_ADDRESS_KEY_MAX];

    kp_inventory_address_key(kp_sshhost_view(e), key, sizeof(key));
    kp_index_emit_if(key, emit, ctx);
}

/* Idempotent for the same function only: another index under the name would answer lookups
 * with other keys (the rule of kp_controller_add_index). */
static int add(struct kp_informer *inf, const char *name, kp_index_fn fn)
{
    int r = kp_informer_add_index(inf, name, fn);

    if (r == -EEXIST && kp_store_index_fn(kp_informer_store(inf), name) == fn)
        return 0;
    return r;
}

int kp_ssh_index_nodes(struct kp_informer *nodes)
{
    int r = add(nodes, KP_INDEX_NODE_IP, kp_index_node_ip);

    return r < 0 ? r : add(nodes, KP_INDEX_NODE_PROVIDER_ID, kp_index_node_provider_id);
}

int kp_ssh_informer_hosts(struct kp_registry *reg, const char *pool_ns, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_SSHHOST, kp_sshhost_project, kp_kind_sshhost, pool_ns,
                             ret);
}

int kp_ssh_informer_nodeclasses(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_SSHNODECLASS, kp_sshnodeclass_project,
                             kp_kind_sshnodeclass, NULL, ret);
}

int kp_ssh_informer_profiles(struct kp_registry *reg, struct kp_informer **ret)
{
    return kp_registry_typed(reg, &KP_RES_SSHJOINPROFILE, kp_sshjoinprofile_project,
                             kp_kind_sshjoinprofile, NULL, ret);
}
