/* core/lifecycle/plan.c: the NodeClaim lifecycle's decisions (lifecycle.h), pure.
 *
 * DESIGN
 *
 * What: from a NodeClaim's projection, the Nodes with its providerID, what this reconcile has
 * already done, the time and the timing, the one next action. Karpenter's controller runs its
 * sub-reconcilers (launch, registration, initialization, liveness) one after the other on an
 * in-memory copy of the NodeClaim and patches once at the end; we get the same order and the
 * same single status write by planning again after each I/O with its outcome added to the input
 * (in->launched, in->create_err, in->node_synced, in->node_labeled, in->instance):
 *
 *   deleting, our finalizer    TGP set, annotation absent  -> ANNOTATE_TGP
 *                              Registered=True, Nodes not deleting -> DELETE_NODES
 *                              Registered=True, Nodes remain       -> WAIT_NODES
 *                              Delete not asked yet        -> DELETE_INSTANCE (launched or not:
 *                                 an un-launched claim may still have an instance, below)
 *                              Delete returned 0           -> InstanceTerminating=True, again later
 *                              Delete said NotFound        -> REMOVE_FINALIZER
 *   no finalizer               -> ADD_FINALIZER (before anything is launched: nothing leaks)
 *   Launched not known         launch timeout passed -> DELETE launch_timeout; else
 *                              no result yet -> LAUNCH; InsufficientCapacity -> DELETE
 *                              insufficient_capacity; NodeClassNotReady -> DELETE
 *                              nodeclass_not_ready; other failure -> Launched=Unknown (the
 *                              provider's reason, else LaunchFailed; message cut at 300)
 *   Registered not known       one Node, not synced -> SYNC_NODE; synced -> Registered=True;
 *                              none -> Unknown NodeNotFound; several -> False MultipleNodesFound
 *   Initialized not known      after Registered=True: Node Ready, no startup taint, no known
 *                              ephemeral taint, every requested resource allocatable; then
 *                              LABEL_INITIALIZED once, then Initialized=True
 *   not Registered             launch timeout (Launched not True) / registration TTL ->
 *                              DELETE launch_timeout / registration_timeout, else requeue at
 *                              the earliest deadline
 *   Ready                      root of Launched, Registered, Initialized
 *   anything changed           -> WRITE_STATUS, else NONE
 *
 * A condition that is known (True or False) is kept and only re-stamped with the generation, as
 * Karpenter does. Conditions still absent start Unknown (operatorpkg initialises them so), which
 * also fixes the instant the registration TTL counts from.
 *
 * The un-launched race: a NodeClaim deleted while its Create was in flight, or after a Create
 * whose status write was lost, has no providerID but may have an instance (Karpenter releases it
 * at once and leaves the machine to garbage collection). We ask the provider to Delete it anyway:
 * Delete is fenced by the NodeClaim's name and uid, so for a claim that never got an instance it
 * answers NotFound at once, and for one that did, the machine goes back before the finalizer.
 *
 * Deviation kept small on purpose: once Delete says NotFound we remove the finalizer without
 * first writing InstanceTerminating=True (Karpenter writes it, then the object vanishes with the
 * finalizer). The instance termination duration is measured from InstanceTerminating's
 * transition when it was written, else by the caller from its first Delete call.
 *
 * Threads: pure functions, any thread. */
#include "core/core.h"
#include "core/lifecycle/lifecycle.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/quantity.h"
#include "core/observe.h"
#include "core/provider.h"
#include "core/writes.h"
#include "json/json.h"

#define MSG_NODE_NOT_FOUND "Node not registered with cluster"
#define MSG_AWAITING "object is awaiting reconciliation"

const char *kp_lc_verb_name(enum kp_lc_verb v)
{
    switch (v) {
    case KP_LC_NONE:
        return "None";
    case KP_LC_ADD_FINALIZER:
        return "AddFinalizer";
    case KP_LC_LAUNCH:
        return "Launch";
    case KP_LC_DELETE:
        return "Delete";
    case KP_LC_SYNC_NODE:
        return "SyncNode";
    case KP_LC_LABEL_INITIALIZED:
        return "LabelInitialized";
    case KP_LC_WRITE_STATUS:
        return "WriteStatus";
    case KP_LC_ANNOTATE_TGP:
        return "AnnotateTGP";
    case KP_LC_DELETE_NODES:
        return "DeleteNodes";
    case KP_LC_WAIT_NODES:
        return "WaitNodes";
    case KP_LC_DELETE_INSTANCE:
        return "DeleteInstance";
    case KP_LC_REMOVE_FINALIZER:
        return "RemoveFinalizer";
    }
    return "?";
}

void kp_lifecycle_action_done(struct kp_lifecycle_action *a)
{
    if (a)
        kp_condset_done(&a->cs);
}

const char *kp_lifecycle_provider_id(const struct kp_nodeclaim_view *nc,
                                     const struct kp_provider_instance *launched)
{
    if (nc->provider_id && *nc->provider_id)
        return nc->provider_id;
    if (launched && launched->provider_id && *launched->provider_id)
        return launched->provider_id;
    return NULL;
}

/* Karpenter's MatchTaint: taints are unique by key and effect; the value plays no part. */
static bool taint_matches(const struct kp_taint *a, const struct kp_taint *b)
{
    return kp_streq(a->key, b->key) && a->effect == b->effect;
}

bool kp_lifecycle_ephemeral_taint(const struct kp_taint *t)
{
    static const struct kp_taint known[] = {
        {.key = "node.kubernetes.io/not-ready", .effect = KP_TAINT_NO_SCHEDULE},
        {.key = "node.kubernetes.io/not-ready", .effect = KP_TAINT_NO_EXECUTE},
        {.key = "node.kubernetes.io/unreachable", .effect = KP_TAINT_NO_SCHEDULE},
        {.key = "node.cloudprovider.kubernetes.io/uninitialized",
         .value = "true",
         .effect = KP_TAINT_NO_SCHEDULE},
        {.key = KP_CORE_TAINT_UNREGISTERED, .effect = KP_TAINT_NO_EXECUTE},
    };

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (taint_matches(&known[i], t))
            return true;
    return t->key && kp_startswith(t->key, "readiness.k8s.io/") != NULL;
}

char *kp_lifecycle_truncate(const char *msg)
{
    size_t n;
    char *out;

    if (!msg)
        msg = "";
    n = strlen(msg);
    if (n <= KP_LIFECYCLE_MESSAGE_MAX)
        return kp_strdup(msg);
    n = KP_LIFECYCLE_MESSAGE_MAX;
    /* Back up to a character boundary: a cut inside a UTF-8 sequence would be scrubbed to
     * U+FFFD on the way out. */
    while (n > 0 && ((unsigned char)msg[n] & 0xC0) == 0x80)
        n--;
    out = kp_malloc(n + 4);
    if (!out)
        return NULL;
    memcpy(out, msg, n);
    memcpy(out + n, "...", 4);
    return out;
}

/* "key=value:Effect" or "key:Effect", as Karpenter formats a taint in its messages. */
static void format_taint(const struct kp_taint *t, char *buf, size_t size)
{
    if (t->value && *t->value)
        (void)snprintf(buf, size, "%.253s=%.63s:%s", t->key, t->value,
                       kp_taint_effect_name(t->effect));
    else
        (void)snprintf(buf, size, "%.253s:%s", t->key, kp_taint_effect_name(t->effect));
}

static bool has_finalizer(const struct kp_nodeclaim_view *nc)
{
    return kp_strs_has(nc->finalizers, nc->n_finalizers, KP_CORE_FINALIZER);
}

/* Re-stamps a known condition with the generation, keeping everything else. */
static int restamp(struct kp_condset *cs, const char *type)
{
    const struct kp_condset_item *it = kp_condset_get(cs, type);
    char *reason, *message;
    int r;

    if (!it)
        return 0;
    reason = kp_strdup(it->reason);
    message = kp_strdup(it->message);
    r = reason && message ? kp_condset_set(cs, type, it->status, reason, message) : -ENOMEM;
    kp_free(reason);
    kp_free(message);
    return r;
}

static bool known(const struct kp_condset *cs, const char *type)
{
    const struct kp_condset_item *it = kp_condset_get(cs, type);

    return it && it->status != KP_COND_UNKNOWN;
}

/* Time left until since + span, 0 when passed. since 0 (never written) counts as now. */
static uint64_t left(int64_t since, uint64_t span, int64_t now)
{
    int64_t end;

    if (since <= 0)
        since = now;
    end = since + (int64_t)span;
    return end > now ? (uint64_t)(end - now) : 0;
}

static void requeue_min(struct kp_lifecycle_action *a, uint64_t usec)
{
    if (usec > 0 && (a->requeue_usec == 0 || usec < a->requeue_usec))
        a->requeue_usec = usec;
}

/* --- deletion -------------------------------------------------------------------------------- */

static const char *annotation(const struct kp_nodeclaim_view *nc, const char *key)
{
    return kp_labels_get(&nc->annotations, key);
}

static int plan_finalize(const struct kp_lifecycle_in *in, struct kp_lifecycle_action *a)
{
    const struct kp_nodeclaim_view *nc = in->nc;
    const struct kp_obj_duration *tgp = &nc->spec.termination_grace_period;
    bool any_live = false;

    if (!has_finalizer(nc))
        return 0;
    if (tgp->text && tgp->valid && !annotation(nc, KP_CORE_ANN_TERMINATION_TIMESTAMP)) {
        a->verb = KP_LC_ANNOTATE_TGP;
        a->tgp_deadline_usec = nc->meta.deletion_usec + tgp->ns / 1000;
        return 0;
    }
    /* Nodes go first, and only those of a registered claim (Karpenter: a Node we never synced
     * has no finalizer of ours, and the instance's release takes it with it). */
    if (kp_condset_is_true(&a->cs, KP_NC_COND_REGISTERED) && in->n_nodes > 0) {
        for (size_t i = 0; i < in->n_nodes; i++)
            if (in->nodes[i]->meta.deletion_usec == 0)
                any_live = true;
        a->verb = any_live ? KP_LC_DELETE_NODES : KP_LC_WAIT_NODES;
        a->requeue_usec = in->timing->delete_retry_usec;
        return 0;
    }
    switch (in->instance) {
    case KP_LC_INSTANCE_UNASKED:
        a->verb = KP_LC_DELETE_INSTANCE;
        return 0;
    case KP_LC_INSTANCE_TERMINATING: {
        int r = kp_condset_set(&a->cs, KP_NC_COND_INSTANCE_TERMINATING, KP_COND_TRUE, NULL, NULL);

        if (r < 0)
            return r;
        a->verb = kp_condset_changed(&a->cs) ? KP_LC_WRITE_STATUS : KP_LC_NONE;
        a->requeue_usec = in->timing->delete_retry_usec;
        return 0;
    }
    case KP_LC_INSTANCE_GONE:
        a->verb = KP_LC_REMOVE_FINALIZER;
        return 0;
    }
    return 0;
}

/* --- launch, registration, initialization, liveness -------------------------------------------- */

/* Launch. Returns 1 when the action is decided (a->verb set), 0 to go on, or -ENOMEM. */
static int plan_launch(const struct kp_lifecycle_in *in, struct kp_lifecycle_action *a)
{
    const struct kp_condset_item *launched = kp_condset_get(&a->cs, KP_NC_COND_LAUNCHED);
    const struct kp_provider_err *e = in->create_err;
    const char *reason;
    char *msg;
    int r;

    if (known(&a->cs, KP_NC_COND_LAUNCHED))
        return restamp(&a->cs, KP_NC_COND_LAUNCHED);
    if (in->launched) {
        a->write_launch = true;
        return kp_condset_set(&a->cs, KP_NC_COND_LAUNCHED, KP_COND_TRUE, NULL, NULL);
    }
    if (!e) {
        /* Checked before a Create, not only after it as Karpenter does: a claim already past its
         * launch timeout is not worth another (possibly minutes long) launch. */
        a->launch_budget_usec = left(launched ? launched->last_transition_usec : 0,
                                     in->timing->launch_timeout_usec, in->now_usec);
        if (a->launch_budget_usec == 0) {
            a->verb = KP_LC_DELETE;
            a->reason = KP_CM_REASON_LAUNCH_TIMEOUT;
            return 1;
        }
        a->verb = KP_LC_LAUNCH;
        return 1;
    }
    switch (e->kind) {
    case KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY:
        a->verb = KP_LC_DELETE;
        a->reason = KP_CM_REASON_INSUFFICIENT_CAPACITY;
        return 1;
    case KP_PROVIDER_ERR_NODECLASS_NOT_READY:
        a->verb = KP_LC_DELETE;
        a->reason = KP_CM_REASON_NODECLASS_NOT_READY;
        return 1;
    default:
        break;
    }
    /* A provider's CreateError names its reason; anything else is Karpenter's LaunchFailed. */
    reason = e->kind == KP_PROVIDER_ERR_CREATE && e->reason[0] ? e->reason : "LaunchFailed";
    if (!(msg = kp_lifecycle_truncate(e->message ? e->message : "launch failed")))
        return -ENOMEM;
    r = kp_condset_set(&a->cs, KP_NC_COND_LAUNCHED, KP_COND_UNKNOWN, reason, msg);
    kp_free(msg);
    a->launch_failed = true;
    return r;
}

/* Registration; as plan_launch. */
static int plan_register(const struct kp_lifecycle_in *in, struct kp_lifecycle_action *a)
{
    const struct kp_node_view *node;

    if (known(&a->cs, KP_NC_COND_REGISTERED))
        return restamp(&a->cs, KP_NC_COND_REGISTERED);
    if (!kp_condset_is_true(&a->cs, KP_NC_COND_LAUNCHED) ||
        !kp_lifecycle_provider_id(in->nc, in->launched) || in->n_nodes == 0)
        return kp_condset_set(&a->cs, KP_NC_COND_REGISTERED, KP_COND_UNKNOWN, "NodeNotFound",
                              MSG_NODE_NOT_FOUND);
    if (in->n_nodes > 1)
        return kp_condset_set(&a->cs, KP_NC_COND_REGISTERED, KP_COND_FALSE, "MultipleNodesFound",
                              "Invariant violated, matched multiple nodes");
    node = in->nodes[0];
    if (!in->node_synced) {
        bool has_taint = false;
        const struct kp_taint unreg = {.key = KP_CORE_TAINT_UNREGISTERED,
                                       .effect = KP_TAINT_NO_EXECUTE};

        for (size_t i = 0; i < node->taints.n; i++)
            if (taint_matches(&node->taints.v[i], &unreg))
                has_taint = true;
        a->verb = KP_LC_SYNC_NODE;
        a->node = node;
        a->taint_missing =
            !has_taint && !kp_labels_get(&node->meta.labels, KP_CORE_LABEL_REGISTERED);
        return 1;
    }
    a->registered_now = true;
    a->node_name = node->e.name;
    return kp_condset_set(&a->cs, KP_NC_COND_REGISTERED, KP_COND_TRUE, NULL, NULL);
}

/* Why node is not initialized for nc, into reason/msg; NULL reason when it is. */
static const char *not_initialized(const struct kp_nodeclaim_view *nc,
                                   const struct kp_node_view *node, char *msg, size_t size)
{
    char t[400];

    if (node->ready != KP_COND_TRUE) {
        (void)snprintf(msg, size, "Node status is NotReady");
        return "NodeNotReady";
    }
    for (size_t i = 0; i < nc->spec.startup_taints.n; i++)
        for (size_t j = 0; j < node->taints.n; j++)
            if (taint_matches(&nc->spec.startup_taints.v[i], &node->taints.v[j])) {
                format_taint(&node->taints.v[j], t, sizeof(t));
                (void)snprintf(msg, size, "StartupTaint \"%s\" still exists", t);
                return "StartupTaintsExist";
            }
    for (size_t j = 0; j < node->taints.n; j++)
        if (kp_lifecycle_ephemeral_taint(&node->taints.v[j])) {
            format_taint(&node->taints.v[j], t, sizeof(t));
            (void)snprintf(msg, size, "KnownEphemeralTaint \"%s\" still exists", t);
            return "KnownEphemeralTaintsExist";
        }
    /* kubelet zeroes an extended resource until its device plugin registers it. */
    for (size_t i = 0; i < nc->requests.n; i++)
        if (nc->requests.v[i].milli != 0 &&
            kp_resources_get(&node->allocatable, nc->requests.v[i].name, NULL) == 0) {
            (void)snprintf(msg, size, "Resource \"%.253s\" was requested but not registered",
                           nc->requests.v[i].name);
            return "ResourceNotRegistered";
        }
    return NULL;
}

static int plan_initialize(const struct kp_lifecycle_in *in, struct kp_lifecycle_action *a)
{
    const struct kp_node_view *node;
    const char *reason, *label;
    char msg[512];

    if (known(&a->cs, KP_NC_COND_INITIALIZED))
        return restamp(&a->cs, KP_NC_COND_INITIALIZED);
    if (!kp_condset_is_true(&a->cs, KP_NC_COND_REGISTERED)) {
        if (kp_condset_get(&a->cs, KP_NC_COND_INITIALIZED))
            return 0;
        return kp_condset_set(&a->cs, KP_NC_COND_INITIALIZED, KP_COND_UNKNOWN, NULL, MSG_AWAITING);
    }
    if (in->n_nodes != 1)
        return kp_condset_set(&a->cs, KP_NC_COND_INITIALIZED, KP_COND_UNKNOWN, "NodeNotFound",
                              MSG_NODE_NOT_FOUND);
    node = in->nodes[0];
    if ((reason = not_initialized(in->nc, node, msg, sizeof(msg))))
        return kp_condset_set(&a->cs, KP_NC_COND_INITIALIZED, KP_COND_UNKNOWN, reason, msg);
    label = kp_labels_get(&node->meta.labels, KP_CORE_LABEL_INITIALIZED);
    if (!in->node_labeled && !kp_streq(label, "true")) {
        a->verb = KP_LC_LABEL_INITIALIZED;
        a->node = node;
        return 1;
    }
    a->initialized_now = true;
    return kp_condset_set(&a->cs, KP_NC_COND_INITIALIZED, KP_COND_TRUE, NULL, NULL);
}

static int plan_liveness(const struct kp_lifecycle_in *in, struct kp_lifecycle_action *a)
{
    const struct kp_condset_item *l = kp_condset_get(&a->cs, KP_NC_COND_LAUNCHED);
    const struct kp_condset_item *g = kp_condset_get(&a->cs, KP_NC_COND_REGISTERED);
    uint64_t t;

    if (kp_condset_is_true(&a->cs, KP_NC_COND_REGISTERED))
        return 0;
    if (l && l->status != KP_COND_TRUE) {
        if ((t = left(l->last_transition_usec, in->timing->launch_timeout_usec, in->now_usec)) ==
            0) {
            a->verb = KP_LC_DELETE;
            a->reason = KP_CM_REASON_LAUNCH_TIMEOUT;
            return 1;
        }
        requeue_min(a, t);
    }
    if (g) {
        if ((t = left(g->last_transition_usec, in->timing->registration_ttl_usec, in->now_usec)) ==
            0) {
            a->verb = KP_LC_DELETE;
            a->reason = KP_CM_REASON_REGISTRATION_TIMEOUT;
            return 1;
        }
        requeue_min(a, t);
    }
    return 0;
}

int kp_lifecycle_plan(const struct kp_lifecycle_in *in, struct kp_lifecycle_action *ret)
{
    const struct kp_nodeclaim_view *nc = in->nc;
    struct kp_lifecycle_action *a = ret;
    int r;

    memset(a, 0, sizeof(*a));
    if ((r = kp_condset_init(&a->cs, &nc->conditions, nc->generation, in->now_usec)) < 0)
        return r;
    a->verb = KP_LC_NONE;
    if (nc->meta.deletion_usec != 0)
        return plan_finalize(in, a);
    if (!has_finalizer(nc)) {
        a->verb = KP_LC_ADD_FINALIZER;
        return 0;
    }
    if ((r = plan_launch(in, a)) != 0 || (r = plan_register(in, a)) != 0 ||
        (r = plan_initialize(in, a)) != 0 || (r = plan_liveness(in, a)) != 0)
        return r < 0 ? r : 0;
    if ((r = kp_condset_root(&a->cs, KP_NC_COND_READY, kp_nodeclaim_ready_deps,
                             sizeof(kp_nodeclaim_ready_deps) /
                                 sizeof(kp_nodeclaim_ready_deps[0]))) < 0)
        return r;
    if (kp_condset_changed(&a->cs) || a->write_launch || a->registered_now || a->launch_failed)
        a->verb = KP_LC_WRITE_STATUS;
    return 0;
}

/* --- the writes' bodies ------------------------------------------------------------------------ */

static int obj_set_str(json_t *obj, const char *key, const char *value)
{
    return kp_json_patch_set_str(obj, KP_JSON_PATH(key), value);
}

static int taint_json(const struct kp_taint *t, json_t **ret)
{
    json_t *o = NULL;
    int r;

    if ((r = kp_json_patch_new(&o)) < 0)
        return r;
    if ((r = obj_set_str(o, "key", t->key)) < 0 ||
        (t->value && *t->value && (r = obj_set_str(o, "value", t->value)) < 0) ||
        (r = obj_set_str(o, "effect", kp_taint_effect_name(t->effect))) < 0) {
        kp_json_unref(o);
        return r;
    }
    *ret = o;
    return 0;
}

static int append_taint(json_t *arr, const struct kp_taint *t)
{
    json_t *o = NULL;
    int r = taint_json(t, &o);

    return r < 0 ? r : kp_json_array_append_steal(arr, o);
}

static bool taints_have(const struct kp_taints *l, const struct kp_taint *t)
{
    for (size_t i = 0; i < l->n; i++)
        if (taint_matches(&l->v[i], t))
            return true;
    return false;
}

/* The Node's taints after registration: its own (karpenter.sh/unregistered removed), then the
 * claim's taints and startupTaints it lacks (by key and effect), unless sync is off.
 * XXX: a taint the Node already had is sent back without its timeAdded (not projected); only
 * NoExecute taints carry one, set by the node lifecycle controller for not-ready/unreachable. */
static int node_taints(const struct kp_nodeclaim_view *nc, const struct kp_node_view *node,
                       json_t **ret)
{
    const struct kp_taint unreg = {.key = KP_CORE_TAINT_UNREGISTERED,
                                   .effect = KP_TAINT_NO_EXECUTE};
    const struct kp_taints *add[2] = {&nc->spec.taints, &nc->spec.startup_taints};
    bool sync =
        !kp_streq(kp_labels_get(&node->meta.labels, KP_CORE_ANN_DO_NOT_SYNC_TAINTS), "true") &&
        !kp_streq(kp_labels_get(&node->annotations, KP_CORE_ANN_DO_NOT_SYNC_TAINTS), "true");
    json_t *arr = NULL;
    int r;

    if ((r = kp_json_array_new(&arr)) < 0)
        return r;
    for (size_t i = 0; i < node->taints.n && r >= 0; i++)
        if (!taint_matches(&node->taints.v[i], &unreg))
            r = append_taint(arr, &node->taints.v[i]);
    for (size_t k = 0; sync && k < 2 && r >= 0; k++)
        for (size_t i = 0; i < add[k]->n && r >= 0; i++) {
            const struct kp_taint *t = &add[k]->v[i];
            bool dup = taints_have(&node->taints, t);

            /* taints and startupTaints never share a key and effect (validation), but a
             * repeat within them must not be sent twice either. */
            for (size_t k2 = 0; k2 <= k && !dup; k2++)
                for (size_t j = 0; j < (k2 < k ? add[k2]->n : i) && !dup; j++)
                    dup = taint_matches(&add[k2]->v[j], t);
            if (!dup && !taint_matches(t, &unreg))
                r = append_taint(arr, t);
        }
    if (r < 0) {
        kp_json_unref(arr);
        return r;
    }
    *ret = arr;
    return 0;
}

static int owner_json(const char *api_version, const char *kind, const char *name, const char *uid,
                      bool controller, bool block, json_t **ret)
{
    json_t *o = NULL;
    int r;

    if ((r = kp_json_patch_new(&o)) < 0)
        return r;
    if ((r = obj_set_str(o, "apiVersion", api_version ? api_version : "")) < 0 ||
        (r = obj_set_str(o, "kind", kind ? kind : "")) < 0 ||
        (r = obj_set_str(o, "name", name ? name : "")) < 0 ||
        (r = obj_set_str(o, "uid", uid ? uid : "")) < 0 ||
        (controller && (r = kp_json_patch_set_bool(o, KP_JSON_PATH("controller"), true)) < 0) ||
        (block && (r = kp_json_patch_set_bool(o, KP_JSON_PATH("blockOwnerDeletion"), true)) < 0)) {
        kp_json_unref(o);
        return r;
    }
    *ret = o;
    return 0;
}

/* The Node's ownerReferences with one to nc added (a merge patch replaces the list).
 * XXX: the Node's other references go back without blockOwnerDeletion (not projected); Nodes
 * rarely have owners, and that flag only matters to foreground deletion of the owner. */
static int node_owners(const struct kp_nodeclaim_view *nc, const struct kp_node_view *node,
                       json_t **ret)
{
    json_t *arr = NULL, *o = NULL;
    bool have = false;
    int r;

    if ((r = kp_json_array_new(&arr)) < 0)
        return r;
    for (size_t i = 0; i < node->meta.owners.n && r >= 0; i++) {
        const struct kp_owner_ref *w = &node->meta.owners.v[i];
        bool ours = kp_streq(w->uid, nc->e.uid);

        have = have || ours;
        if ((r = owner_json(w->api_version, w->kind, w->name, w->uid, w->controller, ours, &o)) >=
            0)
            r = kp_json_array_append_steal(arr, o);
    }
    if (r >= 0 && !have &&
        (r = owner_json("karpenter.sh/v1", "NodeClaim", nc->e.name, nc->e.uid, false, true, &o)) >=
            0)
        r = kp_json_array_append_steal(arr, o);
    if (r < 0) {
        kp_json_unref(arr);
        return r;
    }
    *ret = arr;
    return 0;
}

static int set_map(json_t *patch, const char *field, const struct kp_labels *l)
{
    int r = 0;

    for (size_t i = 0; i < l->n && r >= 0; i++)
        r = kp_json_patch_set_str(patch, KP_JSON_PATH("metadata", field, l->v[i].key),
                                  l->v[i].value ? l->v[i].value : "");
    return r;
}

/* Sets into patch p the labels and annotations a launch adds to the NodeClaim (see
 * kp_lifecycle_launch_patch): the provider's labels the claim does not set itself, the NodeClass
 * label, the provider's annotations that differ. *any tells whether anything was set. */
static int launch_meta(json_t *p, const struct kp_nodeclaim_view *nc,
                       const struct kp_provider_instance *in, bool *any)
{
    int r = 0;

    for (size_t i = 0; i < in->n_labels && r >= 0; i++) {
        const struct kp_provider_kv *kv = &in->labels[i];

        if (!kv->key || kp_labels_get(&nc->meta.labels, kv->key))
            continue; /* the claim's own label wins */
        *any = true;
        r = kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "labels", kv->key),
                                  kv->value ? kv->value : "");
    }
    {
        /* The NodeClass label, as Karpenter's provisioning (and its hydration controller, for
         * NodeClaims made without it) stamps it: it reaches the Node at registration and tells
         * this provider's Nodes from another Karpenter's (termination, garbage collection). */
        const struct kp_nodeclass_ref *ref = &nc->spec.node_class_ref;
        char key[320];

        if (r >= 0 && ref->name &&
            kp_core_nodeclass_label(ref->group, ref->kind, key, sizeof(key)) &&
            !kp_labels_get(&nc->meta.labels, key)) {
            *any = true;
            r = kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "labels", key), ref->name);
        }
    }
    for (size_t i = 0; i < in->n_annotations && r >= 0; i++) {
        const struct kp_provider_kv *kv = &in->annotations[i];

        if (!kv->key || kp_streq(kp_labels_get(&nc->annotations, kv->key), kv->value))
            continue;
        *any = true;
        r = kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "annotations", kv->key),
                                  kv->value ? kv->value : "");
    }
    return r;
}

int kp_lifecycle_node_patch(const struct kp_nodeclaim_view *nc,
                            const struct kp_provider_instance *launched,
                            const struct kp_node_view *node, json_t **ret)
{
    json_t *p = NULL, *x = NULL;
    bool any = false;
    int r;

    if ((r = kp_json_patch_new(&p)) < 0)
        return r;
    if ((r = kp_patch_finalizers(p, node->finalizers, node->n_finalizers, KP_CORE_FINALIZER,
                                 true)) < 0)
        goto out;
    if ((r = node_owners(nc, node, &x)) < 0 ||
        (r = kp_json_patch_set_steal(p, KP_JSON_PATH("metadata", "ownerReferences"), x)) < 0)
        goto out;
    if ((r = node_taints(nc, node, &x)) < 0 ||
        (r = kp_json_patch_set_steal(p, KP_JSON_PATH("spec", "taints"), x)) < 0)
        goto out;
    /* A launch and a registration in one reconcile: the launch's labels and annotations are
     * written to the NodeClaim only at the end of it, so they are synced from the launch
     * itself, or the Node would register without its instance-type, zone, capacity-type and
     * NodeClass labels and never get them. */
    if ((r = set_map(p, "labels", &nc->meta.labels)) < 0 ||
        (r = set_map(p, "annotations", &nc->annotations)) < 0 ||
        (launched && (r = launch_meta(p, nc, launched, &any)) < 0) ||
        (r = kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "labels", KP_CORE_LABEL_REGISTERED),
                                   "true")) < 0)
        goto out;
    *ret = p;
    p = NULL;
out:
    kp_json_unref(p);
    return r;
}

int kp_lifecycle_launch_patch(const struct kp_nodeclaim_view *nc,
                              const struct kp_provider_instance *in, json_t **ret)
{
    json_t *p = NULL;
    bool any = false;
    int r;

    *ret = NULL;
    if ((r = kp_json_patch_new(&p)) < 0)
        return r;
    r = launch_meta(p, nc, in, &any);
    if (r >= 0 && any) {
        *ret = p;
        p = NULL;
    }
    kp_json_unref(p);
    return r;
}

/* A ResourceList of (v, n): memory-like amounts in BinarySI, the rest DecimalSI. */
static int resources_json(json_t *patch, const char *field, const struct kp_provider_res *v,
                          size_t n)
{
    int r = 0;

    /* None reported: leave the field out (an empty object in a merge patch changes nothing). */
    for (size_t i = 0; i < n && r >= 0; i++) {
        const char *name = v[i].name;
        bool binary = kp_streq(name, "memory") || kp_streq(name, "ephemeral-storage") ||
                      kp_startswith(name, "hugepages-") != NULL;
        struct kp_quantity q = {.milli = v[i].milli,
                                .format = binary && v[i].milli % 1000 == 0
                                              ? KP_QUANTITY_BINARY_SI
                                              : KP_QUANTITY_DECIMAL_SI};
        char buf[KP_QUANTITY_STRMAX];

        if ((r = kp_quantity_format(&q, buf, sizeof(buf))) < 0)
            return r;
        r = kp_json_patch_set_str(patch, KP_JSON_PATH("status", field, name), buf);
    }
    return r;
}

int kp_lifecycle_status_patch(const struct kp_lifecycle_action *a,
                              const struct kp_provider_instance *launched, json_t **ret)
{
    json_t *p = NULL, *conds = NULL;
    int r;

    if ((r = kp_json_patch_new(&p)) < 0)
        return r;
    if ((r = kp_condset_json(&a->cs, &conds)) < 0 ||
        (r = kp_json_patch_set_steal(p, KP_JSON_PATH("status", "conditions"), conds)) < 0)
        goto out;
    if (a->write_launch && launched) {
        if ((r = kp_json_patch_set_str(p, KP_JSON_PATH("status", "providerID"),
                                       launched->provider_id ? launched->provider_id : "")) < 0 ||
            (r = resources_json(p, "capacity", launched->capacity, launched->n_capacity)) < 0 ||
            (r = resources_json(p, "allocatable", launched->allocatable, launched->n_allocatable)) <
                0)
            goto out;
    }
    if (a->registered_now && a->node_name &&
        (r = kp_json_patch_set_str(p, KP_JSON_PATH("status", "nodeName"), a->node_name)) < 0)
        goto out;
    *ret = p;
    p = NULL;
out:
    kp_json_unref(p);
    return r;
}
