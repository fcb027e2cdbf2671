/* core/provisioning/simulation.c: the scheduler's input from the cluster state (simulation.h).
 *
 * DESIGN
 *
 * Why a build and a prepare: the expensive part of an input is walking the snapshot, the pod
 * index per node and the NodePools' catalogs; the part that changes between consolidation's
 * trials is only which nodes are taken away and whose pods move. The build does the first once;
 * a prepare copies the node array without the moving nodes (O(nodes), no allocation per pod)
 * and runs pod selection over pending + moving pods, which is proportional to those pods, not
 * to the cluster. Everything a prepared input points at is owned by the build or the prepare,
 * so the input stays valid until both are released.
 *
 * The scheduler's set-up of every destination node (requirements from labels, free resources
 * after bound pods, host ports, order) costs more than a trial's placements, and does not
 * change between trials: the build makes it once (kp_sched_prepare_nodes) over its nodes and
 * in-flight claims, and a prepare hands the solve the map from its nodes to those (prep_of). */
#include "core/provisioning/simulation.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/obj-karpenter.h"
#include "api/obj-misc.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"
#include "api/requirements.h"
#include "core/core.h"
#include "core/provider.h"
#include "core/state/cluster.h"

static bool node_active(const struct kp_state_node *n)
{
    return !(n->flags & KP_STATE_NODE_MARKED_FOR_DELETION);
}

static const struct kp_pvc_view *pvc_get(void *ctx, const char *ns, const char *name)
{
    struct kp_sim *sim = ctx;
    struct kp_entry *e = NULL, **v;
    char key[512];

    if ((size_t)snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name ? name : "") >= sizeof(key))
        return NULL;
    if (!sim->src->pvcs || kp_store_get(sim->src->pvcs, key, &e) < 0)
        return NULL;
    /* The build keeps the reference until it ends: the view must outlive the informer's. */
    if (!(v = kp_reallocarray(sim->pvc_refs, sim->n_pvc_refs + 1, sizeof(*v)))) {
        kp_entry_unref(e);
        return NULL; /* read as a missing claim: the pod waits for the next round */
    }
    sim->pvc_refs = v;
    sim->pvc_refs[sim->n_pvc_refs++] = e;
    return kp_pvc_view(e);
}

/* The bound, resource-holding pods of store list l as views (terminal ones left out). */
static int pod_views(const struct kp_store_list *l, const struct kp_pod_view ***ret, size_t *ret_n)
{
    const struct kp_pod_view **v = kp_calloc(l->n ? l->n : 1, sizeof(*v));
    size_t n = 0;

    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++)
        if (!kp_pod_terminal(kp_pod_view(l->v[i])))
            v[n++] = kp_pod_view(l->v[i]);
    *ret = v;
    *ret_n = n;
    return 0;
}

/* Labels of an in-flight NodeClaim: its own labels plus the single values of its requirements
 * (Karpenter's in-flight node: NodeClaim labels and requirements). */
static int inflight_labels(const struct kp_nodeclaim_view *nc, struct kp_labels *ret,
                           struct kp_label **ret_own)
{
    struct kp_reqset rs = KP_REQSET_INIT;
    struct kp_label *v;
    size_t n = 0;
    int r;

    if ((r = kp_reqset_from_nodeclaim(nc, &rs)) < 0)
        return r;
    v = kp_calloc(nc->meta.labels.n + rs.n + 1, sizeof(*v));
    if (!v) {
        kp_reqset_done(&rs);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nc->meta.labels.n; i++)
        v[n++] = nc->meta.labels.v[i];
    for (size_t i = 0; i < rs.n; i++) {
        const char *one = kp_req_single(&rs.v[i]);

        if (!one || kp_labels_get(&nc->meta.labels, rs.v[i].key))
            continue;
        /* Borrow the key and value from the NodeClaim's own requirement entries, which outlive
         * the build (the snapshot holds the entry); the set is freed below. */
        for (size_t j = 0; j < nc->spec.requirements.n; j++) {
            const struct kp_requirement *q = &nc->spec.requirements.v[j];

            if (kp_streq(q->key, rs.v[i].key) && q->n_values == 1 && kp_streq(q->values[0], one)) {
                v[n].key = q->key;
                v[n].value = q->values[0];
                n++;
                break;
            }
        }
    }
    kp_reqset_done(&rs);
    ret->v = v;
    ret->n = n;
    *ret_own = v;
    return 0;
}

static bool pool_ready(const struct kp_nodepool_view *np)
{
    const struct kp_condition *c = kp_conditions_get(&np->conditions, "Ready");

    return c && c->status == KP_COND_TRUE;
}

void kp_sim_done(struct kp_sim *sim)
{
    size_t n_snap = sim->snap ? sim->snap->n : 0;

    for (size_t i = 0; sim->cats && i < sim->n_pools; i++)
        kp_instance_catalog_unref(sim->cats[i]);
    kp_free(sim->cats);
    kp_free(sim->pools);
    kp_store_list_free(&sim->pools_l);
    for (size_t i = 0; sim->node_pods && i < sim->n_nodes; i++)
        kp_free(sim->node_pods[i]);
    kp_free(sim->node_pods);
    if (sim->bound)
        for (size_t i = 0; i < n_snap; i++)
            kp_store_list_free(&sim->bound[i]);
    kp_free(sim->bound);
    for (size_t i = 0; sim->lab_own && i < sim->n_inflight; i++)
        kp_free(sim->lab_own[i]);
    kp_free(sim->lab_own);
    kp_free(sim->nodes);
    kp_free(sim->inflight);
    kp_free(sim->node_snap);
    kp_free(sim->inflight_snap);
    kp_free(sim->pending);
    kp_store_list_free(&sim->pods_all);
    for (size_t i = 0; i < sim->n_pvc_refs; i++)
        kp_entry_unref(sim->pvc_refs[i]);
    kp_free(sim->pvc_refs);
    kp_free(sim->pdbs);
    kp_store_list_free(&sim->pdbs_l);
    sim->prep = kp_sched_prepared_free(sim->prep); /* borrows daemons: freed before them */
    kp_free(sim->daemons);
    kp_store_list_free(&sim->daemonsets_l);
    memset(sim, 0, sizeof(*sim));
}

/* In-flight NodeClaims: state nodes without a Node, not marked for deletion. */
static int build_inflight(struct kp_sim *sim)
{
    const struct kp_state_snapshot *snap = sim->snap;
    int r;

    for (size_t i = 0; i < snap->n; i++) {
        const struct kp_state_node *sn = &snap->v[i];
        const struct kp_nodeclaim_view *nc =
            sn->nodeclaim ? kp_nodeclaim_view(sn->nodeclaim) : NULL;
        size_t k = sim->n_inflight;

        if (!node_active(sn) || sn->node_name || !nc)
            continue;
        sim->inflight[k] = (struct kp_sched_node){
            .name = nc->e.name,
            .nodepool = sn->nodepool,
            .initialized = false,
            .taints = nc->spec.taints,
            .startup_taints = nc->spec.startup_taints,
            .allocatable = sn->allocatable,
            .capacity = sn->capacity,
        };
        sim->inflight_snap[k] = i;
        r = inflight_labels(nc, &sim->inflight[k].labels, &sim->lab_own[k]);
        sim->n_inflight++; /* counted either way: kp_sim_done frees lab_own[0 .. n_inflight) */
        if (r < 0)
            return r;
    }
    return 0;
}

/* Existing nodes: state nodes with a Node, not marked for deletion, with their pods. */
static int build_nodes(struct kp_sim *sim)
{
    const struct kp_state_snapshot *snap = sim->snap;
    int r;

    for (size_t i = 0; i < snap->n; i++) {
        const struct kp_state_node *sn = &snap->v[i];
        const struct kp_node_view *nv = sn->node ? kp_node_view(sn->node) : NULL;
        const struct kp_nodeclaim_view *nc =
            sn->nodeclaim ? kp_nodeclaim_view(sn->nodeclaim) : NULL;
        size_t k = sim->n_nodes, n_pods = 0;

        if (!node_active(sn) || !nv)
            continue;
        if ((r = pod_views(&sim->bound[i], &sim->node_pods[k], &n_pods)) < 0)
            return r;
        sim->nodes[k] = (struct kp_sched_node){
            .name = nv->e.name,
            .nodepool = sn->nodepool,
            .initialized = (sn->flags & KP_STATE_NODE_INITIALIZED) != 0,
            .labels = nv->meta.labels,
            .taints = nv->taints,
            .allocatable = sn->allocatable,
            .capacity = sn->capacity,
            .pods = sim->node_pods[k],
            .n_pods = n_pods,
        };
        if (nc)
            sim->nodes[k].startup_taints = nc->spec.startup_taints;
        sim->node_snap[k] = i;
        sim->n_nodes++;
    }
    return 0;
}

/* NodePools: Ready, not being deleted, not static, of this provider, with their catalogs. */
static int build_pools(struct kp_sim *sim, struct kp_client *c, const struct kp_ctx *cx)
{
    const struct kp_provider *p = sim->src->env->provider;
    int r;

    if ((r = kp_store_list(sim->src->nodepools, &sim->pools_l)) < 0)
        return r;
    if (!(sim->pools = kp_calloc(sim->pools_l.n + 1, sizeof(*sim->pools))) ||
        !(sim->cats = kp_calloc(sim->pools_l.n + 1, sizeof(*sim->cats))))
        return -ENOMEM;
    for (size_t i = 0; i < sim->pools_l.n; i++) {
        const struct kp_nodepool_view *np = kp_nodepool_view(sim->pools_l.v[i]);
        struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
        struct kp_instance_catalog *cat = NULL;

        if (np->meta.deletion_usec || np->replicas >= 0 || !pool_ready(np) ||
            !kp_provider_supports(p, &np->tmpl.node_class_ref))
            continue;
        r = p->ops->get_instance_types(p->self, cx, c, np, &cat, &err);
        if (r < 0) {
            kp_log_warn_errno(r, "no instance types for nodepool", KP_LF("nodepool", np->e.name),
                              KP_LF("detail", err.message ? err.message : ""));
            kp_provider_err_done(&err);
            continue; /* the other pools still schedule */
        }
        kp_provider_err_done(&err);
        sim->cats[sim->n_pools] = cat;
        sim->pools[sim->n_pools] = (struct kp_sched_pool){
            .np = np, .types = cat ? cat->v : NULL, .n_types = cat ? cat->n : 0};
        sim->n_pools++;
    }
    return 0;
}

/* The PDBs, once per build (no store: none), sorted for pod selection's lookups. */
static int build_pdbs(struct kp_sim *sim)
{
    int r;

    if (!sim->src->pdbs)
        return 0;
    if ((r = kp_store_list(sim->src->pdbs, &sim->pdbs_l)) < 0)
        return r;
    if (!(sim->pdbs = kp_calloc(sim->pdbs_l.n + 1, sizeof(*sim->pdbs))))
        return -ENOMEM;
    for (size_t i = 0; i < sim->pdbs_l.n; i++)
        sim->pdbs[i] = kp_pdb_view(sim->pdbs_l.v[i]);
    sim->n_pdbs = sim->pdbs_l.n;
    kp_pdbs_sort(sim->pdbs, sim->n_pdbs);
    return 0;
}

static int cmp_daemon(const void *a, const void *b)
{
    return strcmp(((const struct kp_sched_daemon *)a)->name,
                  ((const struct kp_sched_daemon *)b)->name);
}

/* Whether the controller reference of pod p, which names DaemonSet ds in its namespace
 * (owner_kind, owner_name), is this incarnation of ds: by uid when both carry one. */
static bool ds_incarnation(const struct kp_daemonset_view *ds, const struct kp_pod_view *p)
{
    const struct kp_owner_ref *o = kp_owner_refs_controller(&p->meta.owners);

    return o && (!o->uid || !ds->e.uid || kp_streq(o->uid, ds->e.uid));
}

/* newest[i] := the newest pod DaemonSet i controls (creationTimestamp; equal ones: the least
 * name, the first of the API server's list, as upstream keeps the first), or NULL. One pass over
 * the pods; the DaemonSets are found by "namespace/name". */
static int newest_daemon_pods(struct kp_sim *sim, const struct kp_pod_view **newest)
{
    struct kp_map *by_key = NULL;
    char key[512];
    int r;

    if ((r = kp_map_new(&by_key)) < 0)
        return r;
    for (size_t i = 0; i < sim->daemonsets_l.n; i++)
        if ((r = kp_map_put(by_key, sim->daemonsets_l.v[i]->key, &sim->daemonsets_l.v[i], NULL)) <
            0)
            goto out;
    for (size_t i = 0; i < sim->pods_all.n; i++) {
        const struct kp_pod_view *p = kp_pod_view(sim->pods_all.v[i]), *cur;
        struct kp_entry **slot;
        size_t di;

        if (!kp_streq(p->owner_kind, "DaemonSet") || !p->e.ns ||
            snprintf(key, sizeof(key), "%s/%s", p->e.ns, p->owner_name) >= (int)sizeof(key) ||
            !(slot = kp_map_get(by_key, key)))
            continue;
        di = (size_t)(slot - sim->daemonsets_l.v);
        if (!ds_incarnation(kp_daemonset_view(*slot), p))
            continue;
        cur = newest[di];
        if (!cur || p->meta.creation_usec > cur->meta.creation_usec ||
            (p->meta.creation_usec == cur->meta.creation_usec &&
             strcmp(p->e.name, cur->e.name) < 0))
            newest[di] = p;
    }
    r = 0;
out:
    kp_map_free(by_key);
    return r;
}

/* The DaemonSets, once per build (no store: none), as the scheduler's daemons. As Karpenter's
 * provisioner does, a DaemonSet with a pod is sized from its newest pod (requests, nodeSelector,
 * tolerations and host ports as admission and the DaemonSet controller left them: a webhook or
 * VPA may have changed the requests, the controller adds tolerations) and keeps its template's
 * required node affinity (the controller pins each pod to its node); one without a pod yet is
 * sized from its template. Which NodePools and instance types, and which existing nodes, a
 * daemon counts on is the scheduler's to decide (taints, requirements), the same for every
 * caller. */
static int build_daemons(struct kp_sim *sim)
{
    const struct kp_pod_view **newest = NULL;
    int r;

    if (!sim->src->daemonsets)
        return 0;
    if ((r = kp_store_list(sim->src->daemonsets, &sim->daemonsets_l)) < 0)
        return r;
    if (!(sim->daemons = kp_calloc(sim->daemonsets_l.n + 1, sizeof(*sim->daemons))) ||
        !(newest = kp_calloc(sim->daemonsets_l.n + 1, sizeof(*newest))))
        return -ENOMEM;
    if ((r = newest_daemon_pods(sim, newest)) < 0) {
        kp_free(newest);
        return r;
    }
    for (size_t i = 0; i < sim->daemonsets_l.n; i++) {
        const struct kp_daemonset_view *ds = kp_daemonset_view(sim->daemonsets_l.v[i]);
        const struct kp_pod_view *p = newest[i];

        if (ds->dra)
            continue;
        sim->daemons[sim->n_daemons++] = (struct kp_sched_daemon){
            .name = ds->e.key,
            .requests = p ? p->requests : ds->requests,
            .node_selector = p ? p->node_selector : ds->node_selector,
            .tolerations = p ? p->tolerations : ds->tolerations,
            .required = ds->required,
            .n_required = ds->n_required,
            .host_ports = p ? p->host_ports : ds->host_ports,
            .n_host_ports = p ? p->n_host_ports : ds->n_host_ports,
        };
    }
    kp_free(newest);
    /* The store's order is a hash's; the scheduler's inputs are totally ordered. */
    qsort(sim->daemons, sim->n_daemons, sizeof(*sim->daemons), cmp_daemon);
    return 0;
}

int kp_sim_build(const struct kp_sim_sources *src, const struct kp_state_snapshot *snap,
                 struct kp_client *c, const struct kp_ctx *cx, struct kp_sim *sim)
{
    size_t n = snap->n;
    int r;

    memset(sim, 0, sizeof(*sim));
    sim->src = src;
    sim->snap = snap;
    if ((r = kp_store_list(src->pods, &sim->pods_all)) < 0)
        return r;
    if (!(sim->pending = kp_calloc(sim->pods_all.n + 1, sizeof(*sim->pending))) ||
        !(sim->bound = kp_calloc(n + 1, sizeof(*sim->bound))) ||
        !(sim->nodes = kp_calloc(n + 1, sizeof(*sim->nodes))) ||
        !(sim->inflight = kp_calloc(n + 1, sizeof(*sim->inflight))) ||
        !(sim->node_snap = kp_calloc(n + 1, sizeof(*sim->node_snap))) ||
        !(sim->inflight_snap = kp_calloc(n + 1, sizeof(*sim->inflight_snap))) ||
        !(sim->node_pods = kp_calloc(n + 1, sizeof(*sim->node_pods))) ||
        !(sim->lab_own = kp_calloc(n + 1, sizeof(*sim->lab_own))))
        return -ENOMEM;
    for (size_t i = 0; i < sim->pods_all.n; i++) {
        const struct kp_pod_view *pv = kp_pod_view(sim->pods_all.v[i]);

        if (!pv->node_name)
            sim->pending[sim->n_pending++] = pv;
    }
    /* Bound pods per state node, from the pod index (never a scan per node). */
    for (size_t i = 0; i < n; i++) {
        const struct kp_state_node *sn = &snap->v[i];

        if (sn->node_name && (r = kp_store_by_index(src->pods, KP_INDEX_POD_NODE, sn->node_name,
                                                    &sim->bound[i])) < 0)
            return r;
    }
    if ((r = build_pdbs(sim)) < 0 || (r = build_daemons(sim)) < 0 ||
        (r = build_inflight(sim)) < 0 || (r = build_nodes(sim)) < 0)
        return r;
    /* The node and daemon arrays are final now (never grown again): the prepared state may
     * borrow them, and every prepare's input passes the same daemons. */
    r = kp_sched_prepare_nodes(sim->nodes, sim->n_nodes, sim->inflight, sim->n_inflight,
                               sim->daemons, sim->n_daemons, &sim->prep);
    if (r == -EINVAL)
        r = 0; /* each solve sets the nodes up itself and fails only when it uses that node */
    if (r < 0)
        return r;
    return build_pools(sim, c, cx);
}

void kp_sim_run_done(struct kp_sim_run *run)
{
    kp_sched_plan_done(&run->plan);
    kp_podsel_round_done(&run->sel);
    kp_free(run->moved);
    kp_free(run->nodes);
    kp_free(run->snap_of);
    kp_free(run->prep_of);
    memset(run, 0, sizeof(*run));
}

static bool is_moving(const size_t *moving, size_t n_moving, size_t snap_index)
{
    for (size_t i = 0; i < n_moving; i++)
        if (moving[i] == snap_index)
            return true;
    return false;
}

int kp_sim_prepare(struct kp_sim *sim, const size_t *moving, size_t n_moving, int64_t now_usec,
                   struct kp_sim_run *run, struct kp_sched_input *in)
{
    const struct kp_state_snapshot *snap = sim->snap;
    struct kp_podsel_pvcs pvcs = {.get = pvc_get, .ctx = sim};
    struct kp_podsel_input si = {0};
    size_t total = 0;
    int r;

    memset(run, 0, sizeof(*run));
    /* Pods that move: those of nodes marked for deletion, then those of the moving nodes. */
    for (size_t i = 0; i < snap->n; i++)
        if (!node_active(&snap->v[i]) || is_moving(moving, n_moving, i))
            total += sim->bound[i].n;
    if (!(run->moved = kp_calloc(total + 1, sizeof(*run->moved))) ||
        !(run->nodes = kp_calloc(sim->n_nodes + 1, sizeof(*run->nodes))) ||
        !(run->snap_of = kp_calloc(sim->n_nodes + sim->n_inflight + 1, sizeof(*run->snap_of))) ||
        !(run->prep_of = kp_calloc(sim->n_nodes + sim->n_inflight + 1, sizeof(*run->prep_of))))
        return -ENOMEM;
    for (size_t i = 0; i < snap->n; i++)
        if (!node_active(&snap->v[i]))
            for (size_t j = 0; j < sim->bound[i].n; j++)
                run->moved[run->n_moved++] = kp_pod_view(sim->bound[i].v[j]);
    for (size_t k = 0; k < n_moving; k++)
        if (moving[k] < snap->n && node_active(&snap->v[moving[k]]))
            for (size_t j = 0; j < sim->bound[moving[k]].n; j++)
                run->moved[run->n_moved++] = kp_pod_view(sim->bound[moving[k]].v[j]);
    si.pending = sim->pending;
    si.n_pending = sim->n_pending;
    si.deleting = run->moved;
    si.n_deleting = run->n_moved;
    si.pdbs = sim->pdbs;
    si.n_pdbs = sim->n_pdbs;
    si.now_usec = now_usec;
    si.pvcs = &pvcs;
    if ((r = kp_podsel_select(&si, &run->sel)) < 0)
        return r;
    for (size_t k = 0; k < sim->n_nodes; k++) {
        if (n_moving && is_moving(moving, n_moving, sim->node_snap[k]))
            continue;
        run->snap_of[run->n_nodes] = sim->node_snap[k];
        run->prep_of[run->n_nodes] = k;
        run->nodes[run->n_nodes++] = sim->nodes[k];
    }
    for (size_t k = 0; k < sim->n_inflight; k++) {
        run->snap_of[run->n_nodes + k] = sim->inflight_snap[k];
        run->prep_of[run->n_nodes + k] = sim->n_nodes + k;
    }
    *in = (struct kp_sched_input){
        .pods = (const struct kp_pod_view *const *)run->sel.pods,
        .n_pods = run->sel.n_pods,
        .nodes = run->nodes,
        .n_nodes = run->n_nodes,
        .inflight = sim->inflight,
        .n_inflight = sim->n_inflight,
        .pools = sim->pools,
        .n_pools = sim->n_pools,
        .daemons = sim->daemons,
        .n_daemons = sim->n_daemons,
        .prepared = sim->prep,
        .prepared_of = sim->prep ? run->prep_of : NULL,
    };
    return 0;
}
