/* core/provisioning/provisioner.c: Karpenter's provisioner (provisioner.h).
 *
 * DESIGN
 *
 * What: one singleton key. Pod events trigger the batcher (a pod that is provisionable by
 * pods.h's first check, keyed by its uid so a pod that keeps changing counts once per window)
 * and enqueue the key; a reconcile asks the batcher whether the window has closed: not open
 * (nothing triggered) ends it, open and not due requeues it for the deadline, due takes the
 * batch and runs a round. Triggers that arrive during a round arm the next window, and their
 * enqueue brings the key back once the round is done (the queue merges it while processing).
 *
 * A round, from caches only (no list of the API server):
 *   1. waits for the cluster state to be synced and for every NodeClaim earlier rounds
 *      created to be in the state's snapshot (else this round would not see them in flight
 *      and would provision their pods again; the snapshot, not the cache, is what counts);
 *   2. selects the pods (kp_podsel_select): the unbound pods of the Pod cache, then the pods
 *      bound to state nodes marked for deletion; refused pods get FailedScheduling;
 *   3. builds the scheduler's input from one cluster-state snapshot: state nodes with a Node
 *      (not marked for deletion) with their bound pods, NodeClaims without a Node as in-flight
 *      nodes, the Ready NodePools of this provider with their catalogs;
 *   4. solves, nominates the existing nodes that took pods, creates the NodeClaims (each from
 *      its NodePool's template, kp_provisioner_nodeclaim), and tells every pod where it goes or
 *      why it cannot go anywhere.
 * A round that left pods pending (or could not run) triggers itself again after
 * KP_PROVISIONER_RETRY_USEC, so a pod that no event touches is looked at again.
 *
 * Events are Karpenter's: Nominated "Pod should schedule on: nodeclaim/<name>" (or node/<name>)
 * and FailedScheduling "Failed to schedule pod, <why>"; the recorder's own rate limit applies.
 *
 * Threads: handlers (informer threads) take mu for the batcher only; the round runs on the one
 * worker and owns everything it builds. */
#include "core/provisioning/provisioner.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/controller.h"
#include "k8s/events.h"
#include "k8s/informer.h"
#include "k8s/reconciler.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/informers.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"
#include "api/quantity.h"
#include "api/requirements.h"
#include "core/conds.h"
#include "core/core.h"
#include "core/nodepool/hash.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/provisioning/batcher.h"
#include "core/provisioning/pods.h"
#include "core/provisioning/scheduler.h"
#include "core/provisioning/simulation.h"
#include "core/state/cluster.h"

#define SYNC_WAIT_USEC (1000000ULL)
/* How long a created NodeClaim may be missing from the cache before rounds go on anyway. */
#define CREATED_WAIT_USEC (10 * 1000000ULL)
#define NOTE_MAX 1024

/* --- the NodeClaim of a planned claim (pure) --------------------------------------------------- */

static bool binary_resource(const char *name)
{
    return kp_streq(name, "memory") || kp_streq(name, "ephemeral-storage") ||
           kp_startswith(name, "hugepages-") != NULL;
}

static int quantity_text(const char *name, int64_t milli, char buf[KP_QUANTITY_STRMAX])
{
    struct kp_quantity q = {.milli = milli,
                            .format = binary_resource(name) && milli % 1000 == 0
                                          ? KP_QUANTITY_BINARY_SI
                                          : KP_QUANTITY_DECIMAL_SI};

    return kp_quantity_format(&q, buf, KP_QUANTITY_STRMAX);
}

static bool well_known(const char *key)
{
    for (size_t i = 0; kp_reqset_well_known_labels[i]; i++)
        if (kp_streq(kp_reqset_well_known_labels[i], key))
            return true;
    return false;
}

/* Keys only the simulation uses (Karpenter's schedulingSimulationKeys). */
static bool simulation_key(const char *key)
{
    return kp_streq(key, KP_CORE_LABEL_REGISTERED) || kp_streq(key, KP_CORE_LABEL_INITIALIZED);
}

/* One requirement entry {key, operator, values?, minValues?} appended to arr. */
static int req_entry(json_t *arr, const char *key, const char *op, const char *const *values,
                     size_t n, const char *single, uint32_t min_values)
{
    json_t *o = NULL, *vals = NULL;
    int r;

    if ((r = kp_json_patch_new(&o)) < 0)
        return r;
    if ((r = kp_json_patch_set_str(o, KP_JSON_PATH("key"), key)) < 0 ||
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("operator"), op)) < 0)
        goto out;
    if (values || single) {
        if ((r = kp_json_array_new(&vals)) < 0)
            goto out;
        for (size_t i = 0; i < n && r >= 0; i++) {
            json_t *s = NULL;

            if ((r = kp_json_string_new(values[i], &s)) >= 0)
                r = kp_json_array_append_steal(vals, s);
        }
        if (r >= 0 && single) {
            json_t *s = NULL;

            if ((r = kp_json_string_new(single, &s)) >= 0)
                r = kp_json_array_append_steal(vals, s);
        }
        if (r < 0)
            goto out;
        r = kp_json_patch_set_steal(o, KP_JSON_PATH("values"), vals);
        vals = NULL;
        if (r < 0)
            goto out;
    }
    if (min_values && (r = kp_json_patch_set_int(o, KP_JSON_PATH("minValues"), min_values)) < 0)
        goto out;
    r = kp_json_array_append_steal(arr, o);
    o = NULL;
out:
    kp_json_unref(vals);
    kp_json_unref(o);
    return r;
}

/* The requirement set as NodeSelectorRequirements: a finite set is In (DoesNotExist when
 * empty); a complement is NotIn its exclusions (Exists without any) plus Gt/Lt for its bounds.
 * minValues rides on the key's first entry. */
static int requirements_json(const struct kp_reqset *s, json_t **ret)
{
    json_t *arr = NULL;
    int r;

    if ((r = kp_json_array_new(&arr)) < 0)
        return r;
    for (size_t i = 0; i < s->n && r >= 0; i++) {
        const struct kp_req *q = &s->v[i];
        const char *const *vals = (const char *const *)q->values;
        char bound[24];

        if (simulation_key(q->key))
            continue;
        if (!q->complement) {
            r = req_entry(arr, q->key, q->n_values ? "In" : "DoesNotExist",
                          q->n_values ? vals : NULL, q->n_values, NULL, q->min_values);
            continue;
        }
        if (q->n_values || (!q->has_min && !q->has_max))
            r = req_entry(arr, q->key, q->n_values ? "NotIn" : "Exists", q->n_values ? vals : NULL,
                          q->n_values, NULL, q->min_values);
        /* The set keeps inclusive bounds; Gte/Lte say them as they are (Gt min-1 would
         * write -1 for Gte 0, which the CRD refuses, and max+1 could overflow). */
        if (r >= 0 && q->has_min) {
            (void)snprintf(bound, sizeof(bound), "%lld", (long long)q->min);
            r = req_entry(arr, q->key, "Gte", NULL, 0, bound, q->n_values ? 0 : q->min_values);
        }
        if (r >= 0 && q->has_max) {
            (void)snprintf(bound, sizeof(bound), "%lld", (long long)q->max);
            r = req_entry(arr, q->key, "Lte", NULL, 0, bound,
                          q->n_values || q->has_min ? 0 : q->min_values);
        }
    }
    if (r < 0) {
        kp_json_unref(arr);
        return r;
    }
    *ret = arr;
    return 0;
}

static int taints_json(json_t *o, const char *field, const struct kp_taints *t)
{
    json_t *arr = NULL;
    int r;

    if (t->n == 0)
        return 0;
    if ((r = kp_json_array_new(&arr)) < 0)
        return r;
    for (size_t i = 0; i < t->n && r >= 0; i++) {
        json_t *e = NULL;

        if ((r = kp_json_patch_new(&e)) < 0)
            break;
        if ((r = kp_json_patch_set_str(e, KP_JSON_PATH("key"), t->v[i].key)) >= 0 &&
            (!t->v[i].value ||
             (r = kp_json_patch_set_str(e, KP_JSON_PATH("value"), t->v[i].value)) >= 0))
            r = kp_json_patch_set_str(e, KP_JSON_PATH("effect"),
                                      kp_taint_effect_name(t->v[i].effect));
        if (r >= 0)
            r = kp_json_array_append_steal(arr, e);
        else
            kp_json_unref(e);
    }
    if (r < 0) {
        kp_json_unref(arr);
        return r;
    }
    return kp_json_patch_set_steal(o, KP_JSON_PATH("spec", field), arr);
}

int kp_provisioner_nodeclaim(const struct kp_nodepool_view *np, const struct kp_sched_claim *c,
                             json_t **ret)
{
    const struct kp_nodeclass_ref *ref = &np->tmpl.node_class_ref;
    char hash[KP_NODEPOOL_HASH_MAX], key[320], gen[300];
    json_t *o = NULL, *v = NULL, *owners = NULL, *owner = NULL;
    int r;

    if (!np->e.uid || !*np->e.uid)
        return -EINVAL; /* an ownerReference needs the NodePool's uid */
    if ((r = kp_json_patch_new(&o)) < 0)
        return r;
    (void)snprintf(gen, sizeof(gen), "%s-", np->e.name);
    if ((r = kp_json_patch_set_str(o, KP_JSON_PATH("apiVersion"), "karpenter.sh/v1")) < 0 ||
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("kind"), "NodeClaim")) < 0 ||
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("metadata", "generateName"), gen)) < 0)
        goto out;
    /* Labels: requirement-pinned custom labels, then the template's, then ours (later wins). */
    for (size_t i = 0; i < c->reqs.n && r >= 0; i++) {
        const struct kp_req *q = &c->reqs.v[i];

        /* Karpenter stamps any value of the set; the first of the sorted values is ours, so the
         * same plan gives the same NodeClaim. A complement (NotIn, Exists, bounds) pins none. */
        if (!q->complement && q->n_values >= 1 && !well_known(q->key) && !simulation_key(q->key) &&
            !kp_streq(q->key, KP_LABEL_HOSTNAME) && !kp_startswith(q->key, "karpenter.sh/"))
            r = kp_json_patch_set_str(o, KP_JSON_PATH("metadata", "labels", q->key), q->values[0]);
    }
    for (size_t i = 0; i < np->tmpl_labels.n && r >= 0; i++)
        r = kp_json_patch_set_str(o, KP_JSON_PATH("metadata", "labels", np->tmpl_labels.v[i].key),
                                  np->tmpl_labels.v[i].value);
    if (r < 0 ||
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("metadata", "labels", KP_CORE_LABEL_NODEPOOL),
                                   np->e.name)) < 0)
        goto out;
    if (kp_core_nodeclass_label(ref->group, ref->kind, key, sizeof(key)) && ref->name &&
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("metadata", "labels", key), ref->name)) < 0)
        goto out;
    for (size_t i = 0; i < np->tmpl_annotations.n && r >= 0; i++)
        r = kp_json_patch_set_str(
            o, KP_JSON_PATH("metadata", "annotations", np->tmpl_annotations.v[i].key),
            np->tmpl_annotations.v[i].value);
    kp_nodepool_hash(np, hash);
    if (r < 0 ||
        (r = kp_json_patch_set_str(
             o, KP_JSON_PATH("metadata", "annotations", KP_CORE_ANN_NODEPOOL_HASH), hash)) < 0 ||
        (r = kp_json_patch_set_str(
             o, KP_JSON_PATH("metadata", "annotations", KP_CORE_ANN_NODEPOOL_HASH_VERSION),
             KP_NODEPOOL_HASH_VERSION)) < 0 ||
        (c->min_values_relaxed &&
         (r = kp_json_patch_set_str(
              o, KP_JSON_PATH("metadata", "annotations", KP_PROVISIONER_ANN_MIN_VALUES_RELAXED),
              "true")) < 0))
        goto out;
    /* The owner: the NodePool, as Karpenter's (blockOwnerDeletion; not a controller ref). */
    if ((r = kp_json_array_new(&owners)) < 0 || (r = kp_json_patch_new(&owner)) < 0)
        goto out;
    if ((r = kp_json_patch_set_str(owner, KP_JSON_PATH("apiVersion"), "karpenter.sh/v1")) < 0 ||
        (r = kp_json_patch_set_str(owner, KP_JSON_PATH("kind"), "NodePool")) < 0 ||
        (r = kp_json_patch_set_str(owner, KP_JSON_PATH("name"), np->e.name)) < 0 ||
        (r = kp_json_patch_set_str(owner, KP_JSON_PATH("uid"), np->e.uid)) < 0 ||
        (r = kp_json_patch_set_bool(owner, KP_JSON_PATH("blockOwnerDeletion"), true)) < 0 ||
        (r = kp_json_array_append_steal(owners, owner)) < 0)
        goto out;
    owner = NULL;
    r = kp_json_patch_set_steal(o, KP_JSON_PATH("metadata", "ownerReferences"), owners);
    owners = NULL;
    if (r < 0)
        goto out;
    /* spec */
    if ((r = requirements_json(&c->reqs, &v)) < 0)
        goto out;
    r = kp_json_patch_set_steal(o, KP_JSON_PATH("spec", "requirements"), v);
    v = NULL;
    for (size_t i = 0; i < c->n_requests && r >= 0; i++) {
        char q[KP_QUANTITY_STRMAX];

        if ((r = quantity_text(c->requests[i].name, c->requests[i].milli, q)) >= 0)
            r = kp_json_patch_set_str(
                o, KP_JSON_PATH("spec", "resources", "requests", c->requests[i].name), q);
    }
    if (r < 0 || (r = taints_json(o, "taints", &np->tmpl.taints)) < 0 ||
        (r = taints_json(o, "startupTaints", &np->tmpl.startup_taints)) < 0)
        goto out;
    if ((ref->group && (r = kp_json_patch_set_str(o, KP_JSON_PATH("spec", "nodeClassRef", "group"),
                                                  ref->group)) < 0) ||
        (ref->kind && (r = kp_json_patch_set_str(o, KP_JSON_PATH("spec", "nodeClassRef", "kind"),
                                                 ref->kind)) < 0) ||
        (ref->name && (r = kp_json_patch_set_str(o, KP_JSON_PATH("spec", "nodeClassRef", "name"),
                                                 ref->name)) < 0))
        goto out;
    if (np->tmpl.expire_after.text &&
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("spec", "expireAfter"),
                                   np->tmpl.expire_after.text)) < 0)
        goto out;
    if (np->tmpl.termination_grace_period.text &&
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("spec", "terminationGracePeriod"),
                                   np->tmpl.termination_grace_period.text)) < 0)
        goto out;
    *ret = o;
    o = NULL;
    r = 0;
out:
    kp_json_unref(owner);
    kp_json_unref(owners);
    kp_json_unref(v);
    kp_json_unref(o);
    return r;
}

/* --- the controller ------------------------------------------------------------------------------ */

struct kp_provisioner_controller {
    const struct kp_core_env *env;
    struct kp_cluster_state *cluster;
    struct kp_informer *pods, *nodes, *nodeclaims, *nodepools, *pvcs, *pdbs, *daemonsets;
    struct kp_controller *base;
    pthread_mutex_t mu; /* guards b */
    struct kp_batcher b;
    /* The worker's own: NodeClaims the last round created, until the cache has them. */
    char **created;
    size_t n_created;
    uint64_t created_at;
    struct kp_sim_sources sources; /* what a round's simulation reads */
    uint64_t retry_at; /* under mu: a round left pods pending; trigger again then (mono) */
};

static struct kp_events *events(struct kp_provisioner_controller *ctl)
{
    return ctl->env->events ? ctl->env->events : kp_controller_events(ctl->base);
}

static void pod_event(struct kp_provisioner_controller *ctl, const struct kp_pod_view *p,
                      enum kp_event_type type, const char *reason, const char *note)
{
    struct kp_events *ev = events(ctl);
    const struct kp_event_ref ref = {
        .kind = "Pod", .api_version = "v1", .ns = p->e.ns, .name = p->e.name, .uid = p->e.uid};

    if (ev) /* a dropped event is counted by the recorder */
        (void)kp_events_emit(ev, &ref, type, reason, /* action= */ "Provisioning", note);
}

static void trigger(struct kp_provisioner_controller *ctl, const char *key)
{
    pthread_mutex_lock(&ctl->mu);
    (void)kp_batcher_trigger(&ctl->b, key, kp_mono_usec());
    pthread_mutex_unlock(&ctl->mu);
    (void)kp_reconciler_enqueue(kp_controller_reconciler(ctl->base), KP_PROVISIONER_KEY);
}

static void on_pod(struct kp_provisioner_controller *ctl, const struct kp_entry *e)
{
    const struct kp_pod_view *p = kp_pod_view(e);

    if (kp_podsel_provisionable(p) == KP_PODSEL_PROVISIONABLE)
        trigger(ctl, p->e.uid);
}

static void on_pod_add(void *ctx, const struct kp_entry *e)
{
    on_pod(ctx, e);
}

static void on_pod_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    (void)old_e;
    on_pod(ctx, new_e);
}

/* A Node that starts being deleted brings its pods to the next round (Karpenter's trigger on
 * deleting nodes). */
static void on_node_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    if (!kp_node_view(old_e)->meta.deletion_usec && kp_node_view(new_e)->meta.deletion_usec)
        trigger(ctx, NULL);
}

/* --- one round ------------------------------------------------------------------------------- */

/* What a round builds and frees; everything the scheduler borrows lives here. */
struct round {
    struct kp_state_snapshot *snap;
    struct kp_sim sim;
    struct kp_sim_run run;
};

static void round_done(struct round *rd)
{
    kp_sim_run_done(&rd->run);
    kp_sim_done(&rd->sim);
    kp_state_snapshot_free(rd->snap);
    memset(rd, 0, sizeof(*rd));
}

static bool created_known(struct kp_provisioner_controller *ctl,
                          const struct kp_state_snapshot *snap);

/* Steps 2 and 3: the round's pods and the scheduler's input (simulation.h). -EAGAIN: a
 * NodeClaim an earlier round created is not in the snapshot yet (the round must wait for it). */
static int round_build(struct kp_provisioner_controller *ctl, struct kp_client *c,
                       const struct kp_ctx *cx, struct round *rd, struct kp_sched_input *in)
{
    int r;

    if ((r = kp_cluster_state_snapshot(ctl->cluster, &rd->snap)) < 0)
        return r;
    if (!created_known(ctl, rd->snap))
        return -EAGAIN; /* the round waits for them */
    if ((r = kp_sim_build(&ctl->sources, rd->snap, c, cx, &rd->sim)) < 0)
        return r;
    return kp_sim_prepare(&rd->sim, NULL, 0, (int64_t)kp_core_now(ctl->env), &rd->run, in);
}

static void remember_created(struct kp_provisioner_controller *ctl, const char *name)
{
    char **v = kp_reallocarray(ctl->created, ctl->n_created + 1, sizeof(*v));
    char *copy = kp_strdup(name);

    if (!v || !copy) { /* forgetting only makes the next round less careful, never wrong */
        kp_free(copy);
        if (v)
            ctl->created = v;
        return;
    }
    ctl->created = v;
    ctl->created[ctl->n_created++] = copy;
    ctl->created_at = kp_mono_usec();
}

static void created_forget(struct kp_provisioner_controller *ctl, size_t i)
{
    kp_free(ctl->created[i]);
    ctl->created[i] = ctl->created[--ctl->n_created];
}

/* Whether every NodeClaim earlier rounds created is in the cluster state snapshot snap, so this
 * round counts it in flight; forgets the ones that are. One the cache does not hold is waited
 * for CREATED_WAIT_USEC after its creation (the watch may trail the create), then forgotten
 * (deleted since). One without a providerID is still launching: the state does not hold it
 * yet (Karpenter's Synced() waits for it too). Checking the snapshot itself, not the cache,
 * closes the gap between an informer's store update and the state's handler. */
static bool created_known(struct kp_provisioner_controller *ctl,
                          const struct kp_state_snapshot *snap)
{
    for (size_t i = 0; i < ctl->n_created;) {
        struct kp_entry *e = NULL;
        bool in_snap = false;
        int r = kp_store_get(kp_informer_store(ctl->nodeclaims), ctl->created[i], &e);

        if (r == -ENOENT) {
            if (kp_mono_usec() - ctl->created_at < CREATED_WAIT_USEC)
                return false;
            created_forget(ctl, i);
            continue;
        }
        if (r < 0)
            return false;
        if (!kp_nodeclaim_view(e)->provider_id) {
            kp_entry_unref(e);
            return false;
        }
        kp_entry_unref(e);
        for (size_t j = 0; j < snap->n && !in_snap; j++)
            in_snap =
                snap->v[j].nodeclaim_name && kp_streq(snap->v[j].nodeclaim_name, ctl->created[i]);
        if (!in_snap)
            return false;
        created_forget(ctl, i);
    }
    return true;
}

int kp_provisioner_create(struct kp_client *c, const struct kp_nodepool_view *np,
                          const struct kp_sched_claim *sc, const char *reason,
                          const struct kp_core_observer *observer, char **ret_name)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *obj = NULL, *got = NULL;
    const char *name = NULL;
    int r;

    if ((r = kp_provisioner_nodeclaim(np, sc, &obj)) < 0)
        return r;
    r = kp_client_create(c, &KP_RES_NODECLAIM, NULL, obj, &got, &e);
    if (r < 0) {
        kp_log_error_errno(r, "could not launch nodeclaim", KP_LF("nodepool", np->e.name),
                           KP_LF("reason", reason), KP_LF("detail", e.message ? e.message : ""));
        goto out;
    }
    if (kp_json_path_str(got, "metadata.name", &name) < 0 || !name ||
        !(*ret_name = kp_strdup(name))) {
        r = -ENOMEM; /* created, but nameless to us: the caller's next look finds it */
        goto out;
    }
    kp_log_info("created nodeclaim", KP_LF("NodePool", np->e.name), KP_LF("NodeClaim", name),
                KP_LF("reason", reason), KP_LF("pods", (int64_t)sc->n_pods),
                KP_LF("instance-types", (int64_t)sc->n_types),
                KP_LF("cheapest", sc->n_types ? sc->types[0]->name : ""));
    kp_core_count(observer, KP_CM_NODECLAIMS_CREATED,
                  KP_CM_LABELS(reason, np->e.name, sc->min_values_relaxed ? "true" : "false"));
out:
    kp_error_done(&e);
    kp_json_unref(got);
    kp_json_unref(obj);
    return r;
}

/* Step 4: acts on the plan. Returns how many pods are left pending (refused, failed, or on a
 * NodeClaim that could not be created). */
static size_t round_act(struct kp_provisioner_controller *ctl, struct kp_client *c,
                        const struct kp_ctx *cx, struct round *rd, const struct kp_sched_input *in)
{
    const struct kp_sched_plan *plan = &rd->run.plan;
    char **names = kp_calloc(plan->n_claims + 1, sizeof(*names));
    int64_t now = (int64_t)kp_core_now(ctl->env);
    size_t left = 0;
    char note[NOTE_MAX];

    for (size_t i = 0; i < rd->run.sel.n_refused; i++) {
        const struct kp_podsel_refused *f = &rd->run.sel.refused[i];

        left++;
        if (kp_podsel_verdict_has_event(f->verdict)) {
            (void)snprintf(note, sizeof(note), KP_PODSEL_EVENT_PREFIX "%s",
                           f->message ? f->message : "the pod is not valid");
            pod_event(ctl, f->pod, KP_EVENT_WARNING, KP_PROVISIONER_EVENT_FAILED, note);
        }
    }
    for (size_t k = 0; k < plan->n_claims; k++) {
        int r;

        /* A replica that lost its Lease, or is stopping, writes nothing more: the next leader
         * plans again from what exists. */
        if (kp_ctx_err(cx) < 0)
            break;
        r = names ? kp_provisioner_create(c, in->pools[plan->claims[k].pool].np, &plan->claims[k],
                                          "provisioned", ctl->env->observer, &names[k])
                  : -ENOMEM;

        if (r == 0)
            remember_created(ctl, names[k]);
    }
    for (size_t i = 0; i < plan->n_pods && i < in->n_pods; i++) {
        const struct kp_sched_result *res = &plan->pods[i];
        const struct kp_pod_view *pv = in->pods[i];

        switch (res->where) {
        case KP_SCHED_FAILED:
            left++;
            (void)snprintf(note, sizeof(note), KP_PODSEL_EVENT_PREFIX "%s",
                           res->error ? res->error : "no placement");
            pod_event(ctl, pv, KP_EVENT_WARNING, KP_PROVISIONER_EVENT_FAILED, note);
            kp_log_debug("could not schedule pod", KP_LF("Pod", pv->e.name),
                         KP_LF("error", res->error ? res->error : ""));
            break;
        case KP_SCHED_NODE: {
            if (res->index >= in->n_nodes + in->n_inflight) {
                left++;
                break;
            }
            bool existing = res->index < in->n_nodes;
            const struct kp_sched_node *n =
                existing ? &in->nodes[res->index] : &in->inflight[res->index - in->n_nodes];
            const char *pid = rd->snap->v[rd->run.snap_of[res->index]].provider_id;

            if (pid && kp_cluster_state_nominate(ctl->cluster, pid,
                                                 now + KP_PROVISIONER_NOMINATION_USEC) < 0)
                kp_log_debug("nominated node is gone from cluster state", KP_LF("node", n->name));
            (void)snprintf(note, sizeof(note), "Pod should schedule on: %s/%s",
                           existing ? "node" : "nodeclaim", n->name);
            pod_event(ctl, pv, KP_EVENT_NORMAL, KP_PROVISIONER_EVENT_NOMINATED, note);
            if (!existing)
                left++; /* still pending until its NodeClaim's Node is there */
            break;
        }
        case KP_SCHED_CLAIM:
            left++;
            if (!names || res->index >= plan->n_claims || !names[res->index])
                break; /* its NodeClaim was not created: the next round tries again */
            (void)snprintf(note, sizeof(note), "Pod should schedule on: nodeclaim/%s",
                           names[res->index]);
            pod_event(ctl, pv, KP_EVENT_NORMAL, KP_PROVISIONER_EVENT_NOMINATED, note);
            break;
        }
    }
    for (size_t k = 0; names && k < plan->n_claims; k++)
        kp_free(names[k]);
    kp_free(names);
    return left;
}

static int run_round(struct kp_provisioner_controller *ctl, struct kp_client *c,
                     const struct kp_ctx *cx, size_t *ret_left)
{
    struct round rd = {0};
    struct kp_sched_input in = {0};
    uint64_t t0 = kp_mono_usec();
    int r;

    *ret_left = 0;
    if ((r = round_build(ctl, c, cx, &rd, &in)) < 0)
        goto out;
    if (in.n_pods == 0 && rd.run.sel.n_refused == 0)
        goto out;
    if ((r = kp_sched_solve(&in, &rd.run.plan)) < 0) {
        kp_log_error_errno(r, "scheduling simulation failed", KP_LF("pods", (int64_t)in.n_pods));
        goto out;
    }
    *ret_left = round_act(ctl, c, cx, &rd, &in);
    if (rd.run.plan.n_claims > 0) /* Karpenter's line; a round that only waits says nothing */
        kp_log_info("computed new nodeclaim(s) to fit pod(s)",
                    KP_LF("nodeclaims", (int64_t)rd.run.plan.n_claims),
                    KP_LF("pods", (int64_t)in.n_pods),
                    KP_LF("duration_ms", (int64_t)((kp_mono_usec() - t0) / 1000)));
out:
    round_done(&rd);
    return r;
}

static int reconcile(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                     uint64_t *ret_requeue)
{
    struct kp_provisioner_controller *ctl = ctx;
    uint64_t now = kp_mono_usec();
    enum kp_batch_state st;
    size_t left = 0;
    int r;

    (void)key;
    pthread_mutex_lock(&ctl->mu);
    if (ctl->retry_at && now >= ctl->retry_at) {
        ctl->retry_at = 0;
        (void)kp_batcher_trigger(&ctl->b, NULL, now);
    }
    st = kp_batcher_wait_begin(&ctl->b, now);
    if (st != KP_BATCH_OPEN) {
        /* Nothing triggered: the next trigger enqueues the key; a retry due later brings it
         * back then (whatever else brought it back sooner). */
        if (ctl->retry_at > now)
            *ret_requeue = ctl->retry_at - now;
        pthread_mutex_unlock(&ctl->mu);
        return 0;
    }
    if (!kp_batcher_due(&ctl->b, now)) {
        uint64_t d = kp_batcher_deadline(&ctl->b);

        pthread_mutex_unlock(&ctl->mu);
        *ret_requeue = d > now ? d - now : 1;
        return 0;
    }
    (void)kp_batcher_close(&ctl->b);
    pthread_mutex_unlock(&ctl->mu);

    if (!kp_cluster_state_synced(ctl->cluster) || (r = run_round(ctl, c, cx, &left)) == -EAGAIN) {
        trigger(ctl, NULL); /* the batch is not lost: it opens again */
        *ret_requeue = SYNC_WAIT_USEC;
        return 0;
    }
    if (r < 0) /* logged; tried again with the pending pods, not with the key's backoff */
        kp_log_error_errno(r, "provisioning round failed");
    if (r < 0 || left > 0) {
        /* Pods still pending are looked at again even when no event comes. */
        pthread_mutex_lock(&ctl->mu);
        ctl->retry_at = kp_mono_usec() + KP_PROVISIONER_RETRY_USEC;
        pthread_mutex_unlock(&ctl->mu);
        *ret_requeue = KP_PROVISIONER_RETRY_USEC;
    }
    return 0;
}

int kp_provisioner_controller_new(const struct kp_core_env *env,
                                  struct kp_provisioner_controller **ret)
{
    struct kp_provisioner_controller *ctl = NULL;
    struct kp_controller_opts co = {0};
    int r;

    if (!env || !env->client || !env->informers || !env->provider || !env->cluster || !ret)
        return -EINVAL;
    if (!(ctl = kp_calloc(1, sizeof(*ctl))))
        return -ENOMEM;
    if ((r = pthread_mutex_init(&ctl->mu, NULL)) != 0) {
        kp_free(ctl);
        return -r;
    }
    kp_batcher_init(&ctl->b, 0, 0);
    ctl->env = env;
    ctl->cluster = env->cluster;
    if ((r = kp_informers_pods(env->informers, &ctl->pods)) < 0 ||
        (r = kp_informers_nodes(env->informers, &ctl->nodes)) < 0 ||
        (r = kp_informers_nodeclaims(env->informers, &ctl->nodeclaims)) < 0 ||
        (r = kp_informers_nodepools(env->informers, &ctl->nodepools)) < 0 ||
        (r = kp_informers_pvcs(env->informers, &ctl->pvcs)) < 0 ||
        (r = kp_informers_pdbs(env->informers, &ctl->pdbs)) < 0 ||
        (r = kp_informers_daemonsets(env->informers, &ctl->daemonsets)) < 0)
        goto out;
    ctl->sources = (struct kp_sim_sources){.env = env,
                                           .pods = kp_informer_store(ctl->pods),
                                           .nodepools = kp_informer_store(ctl->nodepools),
                                           .pvcs = kp_informer_store(ctl->pvcs),
                                           .pdbs = kp_informer_store(ctl->pdbs),
                                           .daemonsets = kp_informer_store(ctl->daemonsets)};
    co.name = "provisioner";
    co.group = "";
    co.kind = "Pod";
    co.client = env->client;
    co.reconcile = reconcile;
    co.ctx = ctl;
    co.workers = 1; /* one key */
    co.parent = env->parent;
    co.events = env->events;
    if ((r = kp_controller_new(&co, &ctl->base)) < 0 ||
        (r = kp_controller_add_index(ctl->base, ctl->pods, KP_INDEX_POD_NODE, kp_index_pod_node)) <
            0 ||
        (r = kp_controller_watch(ctl->base, ctl->pods,
                                 &(struct kp_informer_handler){.on_add = on_pod_add,
                                                               .on_update = on_pod_update,
                                                               .ctx = ctl})) < 0 ||
        (r = kp_controller_watch(
             ctl->base, ctl->nodes,
             &(struct kp_informer_handler){.on_update = on_node_update, .ctx = ctl})) < 0 ||
        (r = kp_controller_read(ctl->base, ctl->nodeclaims)) < 0 ||
        (r = kp_controller_read(ctl->base, ctl->nodepools)) < 0 ||
        (r = kp_controller_read(ctl->base, ctl->pvcs)) < 0 ||
        (r = kp_controller_read(ctl->base, ctl->pdbs)) < 0 ||
        (r = kp_controller_read(ctl->base, ctl->daemonsets)) < 0)
        goto out;
    *ret = ctl;
    ctl = NULL;
out:
    kp_provisioner_controller_free(ctl);
    return r;
}

int kp_provisioner_controller_start(struct kp_provisioner_controller *ctl)
{
    int r = kp_controller_start(ctl->base);

    if (r < 0)
        return r;
    /* Pods pending before this start were seen by the informer's first list (their add
     * events triggered); a round with nothing to do ends at once. */
    trigger(ctl, NULL);
    return 0;
}

void kp_provisioner_controller_stop(struct kp_provisioner_controller *ctl)
{
    if (ctl)
        kp_controller_stop(ctl->base);
}

bool kp_provisioner_controller_ready(struct kp_provisioner_controller *ctl)
{
    return ctl && kp_controller_ready(ctl->base);
}

struct kp_provisioner_controller *
kp_provisioner_controller_free(struct kp_provisioner_controller *ctl)
{
    if (!ctl)
        return NULL;
    kp_controller_free(ctl->base);
    for (size_t i = 0; i < ctl->n_created; i++)
        kp_free(ctl->created[i]);
    kp_free(ctl->created);
    kp_batcher_done(&ctl->b);
    pthread_mutex_destroy(&ctl->mu);
    kp_free(ctl);
    return NULL;
}
