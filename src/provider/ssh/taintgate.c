/* provider/ssh/taintgate.c: the startup taint gate controller (taintgate.h).
 *
 * DESIGN: one reconciler keyed by Node name. The decision reads only the informer caches (Node,
 * its NodeClaim, the SSHNodeClass, the pods bound to the Node by the shared pod index), so the
 * frequent case - a tainted Node whose gates are still closed - costs no API call. Only when a
 * gate has opened does a worker GET the Node and write one merge patch of spec.taints carrying
 * metadata.resourceVersion: the array is rebuilt from the fresh document, not from the
 * projection, so taint fields we do not project (timeAdded) survive, and the resourceVersion
 * makes it a compare-and-swap; a conflict (-KP_ECONFLICT) is the reconciler's short requeue.
 * The GET also guards against a Node recreated under the same name (uid compared).
 *
 * Invariants: a key is removed only when it is in the owning NodeClaim's
 * spec.startupTaints, only for NodeClaims of an SSHNodeClass, and only when that class declares
 * a gate for it that is open now. Nothing else on the Node is touched.
 *
 * Wake-ups: Node add/update of a tainted Node with a NodeClaim owner; a pod added, deleted, or
 * whose binding, Ready or deletion changed -> its Node; a NodeClaim of ours with a Node -> that
 * Node; a class edit -> the Nodes of its NodeClaims. Closed gates also requeue after
 * recheck_usec. Node heartbeats change nothing projected, so they wake nothing.
 *
 * Threads: handlers on informer threads, reconciles on the reconciler's workers; the struct is
 * immutable after new(). */
#include "provider/ssh/taintgate.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "k8s/reconciler.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/nodeclassctl.h"

#define MAX_PATCH (256u * 1024u)
#define SYNC_WAIT_USEC (500 * KP_USEC_PER_MSEC)

/* --- pure decision ------------------------------------------------------------------------------ */

const char *kp_taintgate_owner_claim(const struct kp_node_view *node)
{
    for (size_t i = 0; i < node->meta.owners.n; i++) {
        const struct kp_owner_ref *o = &node->meta.owners.v[i];

        if (kp_streq(o->api_version, "karpenter.sh/v1") && kp_streq(o->kind, "NodeClaim") &&
            o->name && *o->name)
            return o->name;
    }
    return NULL;
}

static bool status_matches(enum kp_cond_status have, const char *want)
{
    switch (have) {
    case KP_COND_TRUE:
        return kp_streq(want, "True");
    case KP_COND_FALSE:
        return kp_streq(want, "False");
    case KP_COND_UNKNOWN:
        return kp_streq(want, "Unknown");
    }
    return false;
}

bool kp_taintgate_open(const struct kp_taint_gate *g, const struct kp_node_view *node,
                       const struct kp_pod_view *const *pods, size_t n_pods)
{
    if (g->kind == KP_GATE_NODE_CONDITION) {
        const struct kp_condition *c;

        if (!g->condition_type || !*g->condition_type)
            return false;
        c = kp_conditions_get(&node->conditions, g->condition_type);
        return c && status_matches(c->status, g->condition_status ? g->condition_status : "True");
    }
    if (g->kind == KP_GATE_PODS_READY) {
        int32_t ready = 0;

        /* The CRD requires a non-empty selector: an empty one would count every pod. */
        if (!g->pods_namespace || g->pods_selector_error || !g->pods_selector.present ||
            g->pods_selector.n == 0 || g->min_ready < 1)
            return false;
        for (size_t i = 0; i < n_pods; i++) {
            const struct kp_pod_view *p = pods[i];

            if (p->meta.deletion_usec != 0 || !(p->flags & KP_POD_READY) ||
                !kp_streq(p->node_name, node->e.name) || !kp_streq(p->e.ns, g->pods_namespace) ||
                !kp_reqs_match(&g->pods_selector, &p->meta.labels))
                continue;
            if (++ready >= g->min_ready)
                return true;
        }
        return false;
    }
    return false; /* KP_GATE_NONE, KP_GATE_BOTH: invalid, never opens */
}

static bool taints_have(const struct kp_taints *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (kp_streq(t->v[i].key, key))
            return true;
    return false;
}

void kp_taintgate_evaluate(const struct kp_node_view *node, const struct kp_nodeclaim_view *claim,
                           const struct kp_sshnodeclass_view *nc,
                           const struct kp_pod_view *const *pods, size_t n_pods,
                           struct kp_taintgate_verdict *ret)
{
    struct kp_taintgate_verdict v = {0, 0};
    size_t n = nc->n_gates < KP_TAINTGATE_MAX_GATES ? nc->n_gates : KP_TAINTGATE_MAX_GATES;

    for (size_t i = 0; i < n; i++) {
        const struct kp_taint_gate *g = &nc->gates[i];

        if (!g->taint_key || !taints_have(&claim->spec.startup_taints, g->taint_key) ||
            !taints_have(&node->taints, g->taint_key))
            continue;
        if (kp_taintgate_open(g, node, pods, n_pods))
            v.open |= 1u << i;
        else
            v.pending |= 1u << i;
    }
    *ret = v;
}

static bool key_listed(const char *key, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (kp_streq(key, keys[i]))
            return true;
    return false;
}

int kp_taintgate_patch(const json_t *taints, const char *rv, const char *const *keys, size_t n_keys,
                       struct kp_buf *out, size_t *ret_removed)
{
    size_t removed = 0, n = kp_json_array_size(taints);
    json_t *p = NULL, *kept = NULL;
    int r;

    if (!*rv)
        return -EINVAL;
    if (taints && kp_json_typeof(taints) != KP_JSON_ARRAY)
        return -KP_EPARSE;
    if ((r = kp_json_array_new(&kept)) < 0)
        return r;
    /* The whole list is replaced (merge patch): the taints that stay are copied as they are. */
    for (size_t i = 0; i < n && r >= 0; i++) {
        json_t *t = kp_json_array_at(taints, i);
        const char *key = NULL;

        if (kp_json_typeof(t) != KP_JSON_OBJECT)
            r = -KP_EPARSE;
        else if (kp_json_get_str(t, "key", &key) == 0 && key_listed(key, keys, n_keys))
            removed++;
        else
            r = kp_json_array_append_steal(kept, kp_json_ref(t));
    }
    if (r >= 0 && (r = kp_json_patch_new(&p)) >= 0 &&
        (r = kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "resourceVersion"), rv)) >= 0) {
        r = kp_json_patch_set_steal(p, KP_JSON_PATH("spec", "taints"), kept);
        kept = NULL;
        if (r >= 0)
            r = kp_json_dump(p, /* flags= */ 0, out);
    }
    kp_json_unref(kept);
    kp_json_unref(p);
    if (r < 0)
        return r;
    if (ret_removed)
        *ret_removed = removed;
    return 0;
}

/* --- the controller ------------------------------------------------------------------------------ */

struct kp_ssh_taintgate {
    struct kp_informer *nodes, *pods, *nodeclaims, *nodeclasses;
    kp_taintgate_opened_fn gate_opened;
    void *gate_opened_ctx;
    uint64_t recheck_usec;
    struct kp_controller *base; /* reconciler, handlers, readiness, recorder */
    struct kp_reconciler *rec;  /* base's, for the handlers' enqueues */
};

static void enqueue(struct kp_ssh_taintgate *tg, const char *node)
{
    int r;

    if (!node || !*node)
        return;
    r = kp_reconciler_enqueue(tg->rec, node);
    if (r < 0 && r != -ESHUTDOWN)
        kp_log_warn_errno(r, "taint gate enqueue failed", KP_LF("node", node));
}

static bool node_interesting(const struct kp_entry *e)
{
    const struct kp_node_view *n = kp_node_view(e);

    return n->taints.n > 0 && kp_taintgate_owner_claim(n) != NULL;
}

static void on_node_add(void *ctx, const struct kp_entry *e)
{
    if (node_interesting(e))
        enqueue(ctx, e->name);
}

static void on_node_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    (void)old_e;
    on_node_add(ctx, new_e);
}

static void on_pod_add(void *ctx, const struct kp_entry *e)
{
    enqueue(ctx, kp_pod_view(e)->node_name);
}

static void on_pod_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    const struct kp_pod_view *a = kp_pod_view(old_e), *b = kp_pod_view(new_e);

    /* Only what a podsReady gate counts: binding, Ready, deletion, labels. */
    if (kp_streq(a->node_name, b->node_name) &&
        (a->flags & KP_POD_READY) == (b->flags & KP_POD_READY) &&
        (a->meta.deletion_usec == 0) == (b->meta.deletion_usec == 0) &&
        !kp_nodeclass_host_labels_changed(&a->meta.labels, &b->meta.labels))
        return;
    if (!kp_streq(a->node_name, b->node_name))
        enqueue(ctx, a->node_name);
    enqueue(ctx, b->node_name);
}

static void on_claim_add(void *ctx, const struct kp_entry *e)
{
    const struct kp_nodeclaim_view *c = kp_nodeclaim_view(e);

    if (kp_nodeclaim_is_ours(c))
        enqueue(ctx, c->node_name);
}

static void on_claim_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    (void)old_e;
    on_claim_add(ctx, new_e);
}

/* A fan-out walk's failures, counted under the store's read lock and logged after it. */
struct fanout {
    struct kp_ssh_taintgate *tg;
    unsigned failed;
    int err;
};

/* Walk visitor: enqueue the Node of one NodeClaim. Under the NodeClaim store's read lock: no
 * I/O, so no log line here. */
static int enqueue_claim_node(void *ctx, struct kp_entry *e)
{
    struct fanout *f = ctx;
    const char *node = kp_nodeclaim_view(e)->node_name;
    int r;

    if (!node || !*node)
        return 0;
    r = kp_reconciler_enqueue(f->tg->rec, node);
    if (r < 0 && r != -ESHUTDOWN) {
        f->failed++;
        f->err = r;
    }
    return 0;
}

static void on_class_add(void *ctx, const struct kp_entry *e)
{
    struct kp_ssh_taintgate *tg = ctx;
    struct fanout f = {.tg = tg};
    int r;

    if (kp_sshnodeclass_view(e)->n_gates == 0)
        return;
    r = kp_store_walk_index(kp_informer_store(tg->nodeclaims), KP_SSH_INDEX_NODECLAIM_CLASS,
                            e->name, enqueue_claim_node, &f);
    if (r < 0)
        kp_log_warn_errno(r, "taint gate fan-out failed", KP_LF("nodeclass", e->name));
    else if (f.failed > 0)
        kp_log_warn_errno(f.err, "taint gate enqueue failed", KP_LF("nodeclass", e->name),
                          KP_LF("failed", f.failed));
}

static void on_class_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    (void)old_e;
    on_class_add(ctx, new_e);
}

static int reconcile_fn(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                        uint64_t *ret_requeue)
{
    (void)cx; /* a reconcile here is API calls only, each bounded by the client's timeout */
    return kp_ssh_taintgate_reconcile(ctx, c, key, ret_requeue);
}

int kp_ssh_taintgate_new(const struct kp_ssh_taintgate_opts *o, struct kp_ssh_taintgate **ret)
{
    struct kp_controller_opts co = {0};
    struct kp_ssh_taintgate *tg = NULL;
    int r;

    if (!o || !o->client || !o->nodes || !o->pods || !o->nodeclaims || !o->nodeclasses)
        return -EINVAL;
    tg = kp_calloc(1, sizeof(*tg));
    if (!tg)
        return -ENOMEM;
    tg->nodes = o->nodes;
    tg->pods = o->pods;
    tg->nodeclaims = o->nodeclaims;
    tg->nodeclasses = o->nodeclasses;
    tg->gate_opened = o->gate_opened;
    tg->gate_opened_ctx = o->gate_opened_ctx;
    tg->recheck_usec = o->recheck_usec ? o->recheck_usec : KP_TAINTGATE_RECHECK_USEC;
    co.name = "startuptaintgate";
    co.group = ""; /* core: the keys are Nodes */
    co.kind = "Node";
    co.client = o->client;
    co.reconcile = reconcile_fn;
    co.ctx = tg;
    co.workers = o->workers;
    co.events = o->events;
    co.events_component = KP_TAINTGATE_COMPONENT;
    if ((r = kp_controller_new(&co, &tg->base)) < 0)
        goto out;
    tg->rec = kp_controller_reconciler(tg->base);
    if ((r = kp_controller_add_index(tg->base, tg->pods, KP_INDEX_POD_NODE, kp_index_pod_node)) <
            0 ||
        (r = kp_controller_add_index(tg->base, tg->nodeclaims, KP_SSH_INDEX_NODECLAIM_CLASS,
                                     kp_ssh_index_nodeclaim_class)) < 0)
        goto out;
    if ((r = kp_controller_watch(tg->base, tg->nodes,
                                 &(struct kp_informer_handler){.on_add = on_node_add,
                                                               .on_update = on_node_update,
                                                               .ctx = tg})) < 0 ||
        (r = kp_controller_watch(tg->base, tg->pods,
                                 &(struct kp_informer_handler){.on_add = on_pod_add,
                                                               .on_update = on_pod_update,
                                                               .on_delete = on_pod_add,
                                                               .ctx = tg})) < 0 ||
        (r = kp_controller_watch(tg->base, tg->nodeclaims,
                                 &(struct kp_informer_handler){.on_add = on_claim_add,
                                                               .on_update = on_claim_update,
                                                               .ctx = tg})) < 0 ||
        (r = kp_controller_watch(tg->base, tg->nodeclasses,
                                 &(struct kp_informer_handler){.on_add = on_class_add,
                                                               .on_update = on_class_update,
                                                               .ctx = tg})) < 0)
        goto out;
    *ret = tg;
    tg = NULL;
    r = 0;
out:
    kp_ssh_taintgate_free(tg); /* the skeleton takes back the handlers it added */
    return r;
}

int kp_ssh_taintgate_start(struct kp_ssh_taintgate *tg)
{
    return kp_controller_start(tg->base);
}

void kp_ssh_taintgate_stop(struct kp_ssh_taintgate *tg)
{
    if (tg)
        kp_controller_stop(tg->base);
}

bool kp_ssh_taintgate_ready(struct kp_ssh_taintgate *tg)
{
    return tg && kp_controller_ready(tg->base);
}

struct kp_ssh_taintgate *kp_ssh_taintgate_free(struct kp_ssh_taintgate *tg)
{
    if (!tg)
        return NULL;
    tg->base = kp_controller_free(tg->base);
    kp_free(tg);
    return NULL;
}

/* --- reconcile ------------------------------------------------------------------------------------ */

static void report_removed(struct kp_ssh_taintgate *tg, const struct kp_node_view *node,
                           const struct kp_taint_gate *g)
{
    struct kp_event_ref ref = {
        .kind = "Node", .api_version = "v1", .name = node->e.name, .uid = node->e.uid};
    char note[KP_EVENTS_NOTE_MAX];
    uint64_t now = kp_real_usec();
    uint64_t usec = node->meta.creation_usec > 0 && (uint64_t)node->meta.creation_usec < now
                        ? now - (uint64_t)node->meta.creation_usec
                        : 0;

    if (g->kind == KP_GATE_PODS_READY)
        (void)snprintf(note, sizeof(note),
                       "startup taint %s removed: %d pod(s) in namespace %s Ready on the node",
                       g->taint_key, g->min_ready, g->pods_namespace);
    else
        (void)snprintf(note, sizeof(note), "startup taint %s removed: node condition %s is %s",
                       g->taint_key, g->condition_type, g->condition_status);
    /* Dropped events are counted by the recorder. */
    /* The skeleton's recorder, made by its start before the workers. */
    (void)kp_events_emit(kp_controller_events(tg->base), &ref, KP_EVENT_NORMAL,
                         KP_TAINTGATE_EVENT_REASON, KP_TAINTGATE_EVENT_ACTION, note);
    kp_log_info("startup taint removed", KP_LF("node", node->e.name), KP_LF("taint", g->taint_key),
                KP_LF("seconds", (double)usec / 1e6));
    if (tg->gate_opened)
        tg->gate_opened(tg->gate_opened_ctx, g->taint_key, usec);
}

/* GETs the Node and removes keys with one CAS patch. 0 (also when the Node or the taints are
 * gone), -KP_ECONFLICT (changed or recreated meanwhile: try again), other errors. */
static int remove_taints(struct kp_client *c, const struct kp_node_view *node,
                         const char *const *keys, size_t n_keys, size_t *ret_removed)
{
    struct kp_buf body = KP_BUF_INIT(MAX_PATCH);
    struct kp_error err = KP_ERROR_INIT;
    json_t *obj = NULL, *taints = NULL;
    const char *rv = NULL, *uid = NULL;
    size_t removed = 0;
    int r;

    r = kp_client_get(c, &KP_RES_NODE, NULL, node->e.name, &obj, &err);
    if (r < 0)
        goto out;
    if (kp_json_path_str(obj, "metadata.uid", &uid) < 0 || !kp_streq(uid, node->e.uid)) {
        r = -KP_ECONFLICT; /* recreated under the same name: decide again from the cache */
        goto out;
    }
    if ((r = kp_json_path_str(obj, "metadata.resourceVersion", &rv)) < 0) {
        r = -KP_EPARSE;
        goto out;
    }
    r = kp_json_path_array(obj, "spec.taints", &taints);
    if (r == -ENOENT) {
        r = 0;
        goto out;
    }
    if (r < 0 || (r = kp_taintgate_patch(taints, rv, keys, n_keys, &body, &removed)) < 0)
        goto out;
    if (removed == 0)
        goto out;
    r = kp_client_patch_bytes(c, &KP_RES_NODE, NULL, node->e.name, NULL, KP_PATCH_MERGE,
                              kp_buf_str(&body), body.len, NULL, &err);
out:
    if (r == -ENOENT) {
        r = 0;
        removed = 0;
    }
    if (r < 0 && err.message)
        kp_log_debug("startup taint patch refused", KP_LF("node", node->e.name),
                     KP_LF("detail", err.message));
    if (r == 0)
        *ret_removed = removed;
    kp_error_done(&err);
    kp_buf_done(&body);
    kp_json_unref(obj);
    return r;
}

int kp_ssh_taintgate_reconcile(struct kp_ssh_taintgate *tg, struct kp_client *c, const char *name,
                               uint64_t *ret_requeue_usec)
{
    struct kp_entry *ne = NULL, *ce = NULL, *cls = NULL;
    struct kp_store_list pods = {0};
    const struct kp_pod_view **pv = NULL;
    const struct kp_node_view *node;
    const struct kp_sshnodeclass_view *nc;
    const struct kp_nodeclaim_view *claim;
    const char *keys[KP_TAINTGATE_MAX_GATES];
    struct kp_taintgate_verdict v;
    const char *claim_name;
    size_t n_keys = 0, removed = 0;
    int r;

    /* A pod cache that has not synced would only keep gates closed, but say nothing rather
     * than something half-informed: come back shortly. */
    if (!kp_informer_synced(tg->pods) || !kp_informer_synced(tg->nodeclaims) ||
        !kp_informer_synced(tg->nodeclasses)) {
        *ret_requeue_usec = SYNC_WAIT_USEC;
        r = 0;
        goto out;
    }
    r = kp_store_get(kp_informer_store(tg->nodes), name, &ne);
    if (r < 0) {
        r = r == -ENOENT ? 0 : r;
        goto out;
    }
    node = kp_node_view(ne);
    claim_name = kp_taintgate_owner_claim(node);
    if (node->taints.n == 0 || !claim_name)
        goto out;
    r = kp_store_get(kp_informer_store(tg->nodeclaims), claim_name, &ce);
    if (r < 0) {
        r = r == -ENOENT ? 0 : r; /* its add event brings the Node back */
        goto out;
    }
    claim = kp_nodeclaim_view(ce);
    if (!kp_nodeclaim_is_ours(claim) || claim->spec.startup_taints.n == 0 ||
        !claim->spec.node_class_ref.name)
        goto out;
    r = kp_store_get(kp_informer_store(tg->nodeclasses), claim->spec.node_class_ref.name, &cls);
    if (r < 0) {
        r = r == -ENOENT ? 0 : r;
        goto out;
    }
    nc = kp_sshnodeclass_view(cls);
    if (nc->n_gates == 0)
        goto out;
    if ((r = kp_store_by_index(kp_informer_store(tg->pods), KP_SSH_INDEX_POD_NODE, name, &pods)) <
        0)
        goto out;
    if (pods.n > 0) {
        pv = kp_calloc(pods.n, sizeof(*pv));
        if (!pv) {
            r = -ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < pods.n; i++)
            pv[i] = kp_pod_view(pods.v[i]);
    }
    kp_taintgate_evaluate(node, claim, nc, pv, pods.n, &v);
    for (size_t i = 0; i < KP_TAINTGATE_MAX_GATES && i < nc->n_gates; i++)
        if (v.open & (1u << i))
            keys[n_keys++] = nc->gates[i].taint_key;
    if (n_keys > 0) {
        if ((r = remove_taints(c, node, keys, n_keys, &removed)) < 0)
            goto out;
        if (removed > 0)
            for (size_t i = 0; i < KP_TAINTGATE_MAX_GATES && i < nc->n_gates; i++)
                if (v.open & (1u << i))
                    report_removed(tg, node, &nc->gates[i]);
    }
    if (v.pending) {
        kp_log_debug("startup taint gate closed", KP_LF("node", name),
                     KP_LF("nodeclass", nc->e.name), KP_LF("pending", v.pending));
        *ret_requeue_usec = tg->recheck_usec;
    }
out:
    kp_free(pv);
    kp_store_list_free(&pods);
    kp_entry_unref(cls);
    kp_entry_unref(ce);
    kp_entry_unref(ne);
    return r;
}
