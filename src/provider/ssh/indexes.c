/* provider/ssh/indexes.c: the shared store indexes (indexes.h). Index functions are pure: they
 * run under the store's lock. */
#include "provider/ssh/indexes.h"

#include <errno.h>

#include "k8s/informer.h"
#include "k8s/obj-karpenter.h"
#include "k8s/obj-kpssh.h"
#include "k8s/obj-node.h"
#include "k8s/obj-pod.h"
#include "provider/ssh/inventory.h"

static void emit_if(const char *v, kp_index_emit_fn emit, void *ctx)
{
    if (v && *v)
        emit(v, ctx);
}

static void index_node_ip(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    emit_if(kp_node_view(e)->internal_ip, emit, ctx);
}

static void index_node_provider_id(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    emit_if(kp_node_view(e)->provider_id, emit, ctx);
}

static void index_nodeclaim_class(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const struct kp_nodeclaim_view *v = kp_nodeclaim_view(e);

    if (kp_nodeclaim_is_ours(v))
        emit_if(v->spec.node_class_ref.name, emit, ctx);
}

static void index_pod_node(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    emit_if(kp_pod_view(e)->node_name, emit, ctx);
}

static void index_host_claim(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    emit_if(kp_sshhost_view(e)->claim_name, emit, ctx);
}

static void index_host_address(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    char key[KP_INVENTORY_ADDRESS_KEY_MAX];

    kp_inventory_address_key(kp_sshhost_view(e), key, sizeof(key));
    emit_if(key, emit, ctx);
}

static int add(struct kp_informer *inf, const char *name, kp_index_fn fn)
{
    int r = kp_informer_add_index(inf, name, fn);

    return r == -EEXIST ? 0 : r;
}

int kp_ssh_index_nodes(struct kp_informer *nodes)
{
    int r = add(nodes, KP_SSH_INDEX_NODE_IP, index_node_ip);

    return r < 0 ? r : add(nodes, KP_SSH_INDEX_NODE_PROVIDER_ID, index_node_provider_id);
}

int kp_ssh_index_nodeclaims(struct kp_informer *nodeclaims)
{
    return add(nodeclaims, KP_SSH_INDEX_NODECLAIM_CLASS, index_nodeclaim_class);
}

int kp_ssh_index_pods(struct kp_informer *pods)
{
    return add(pods, KP_SSH_INDEX_POD_NODE, index_pod_node);
}

int kp_ssh_index_hosts(struct kp_informer *hosts)
{
    int r = add(hosts, KP_SSH_INDEX_HOST_CLAIM, index_host_claim);

    return r < 0 ? r : add(hosts, KP_SSH_INDEX_HOST_ADDRESS, index_host_address);
}
