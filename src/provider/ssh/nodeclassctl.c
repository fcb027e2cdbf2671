/* provider/ssh/nodeclassctl.c: the SSHNodeClass controller (nodeclassctl.h).
 *
 * DESIGN: one reconciler keyed by class name. A reconcile reads the class, its profile and the
 * pool's hosts from the informer caches, and writes at most two patches, each a compare-and-swap
 * on the resourceVersion it read (STYLE.md section 3):
 *
 *   deleting, finalizer ours   NodeClaims referencing it (index KP_SSH_INDEX_NODECLAIM_CLASS)?
 *                              yes: wait (a NodeClaim delete requeues it; a slow requeue covers
 *                              a missed event); no: remove the finalizer, done
 *   no finalizer               add it (the patch answers with the new resourceVersion, so the
 *                              status write that follows does not lose a race against ourselves)
 *   Ready differs from cache   merge patch of status.conditions on the status subresource
 *
 * Nothing is decided until the profile, host and NodeClaim caches have synced (the key comes
 * back shortly): an empty cache would read as "no NodeClaims" or "no hosts".
 *
 * A lost race answers -KP_ECONFLICT, which the reconciler turns into a short requeue; the next
 * reconcile reads the newer object. The status write is skipped when the cached condition
 * already says the same thing for the same generation, so a status write (which the class
 * informer sees as an update) settles instead of looping.
 *
 * We own status.conditions: the patch writes the whole array (a merge patch replaces arrays),
 * holding the Ready condition only, which is the only type the CRD documents.
 *
 * Fan-out: the informer handlers run on informer threads and only enqueue class names:
 * a class event -> that class; a profile event -> the classes naming it (a node-class index
 * by joinProfileRef); an SSHHost add, delete or label change in the pool namespace -> every
 * class (selectors are arbitrary, and classes are few); a NodeClaim delete or nodeClassRef change
 * -> its class (finalizer release).
 *
 * Threads: handlers on the informer threads, reconciles on the reconciler's workers; the
 * controller's own fields are immutable after new(). */
#include "provider/ssh/nodeclassctl.h"

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
#include "k8s/rfc3339.h"
#include "k8s/reconciler.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/inventory.h"
#include "provider/ssh/profile.h"

/* Node-class index by spec.joinProfileRef.name (this controller's own). */
#define INDEX_NODECLASS_PROFILE "kpssh-joinprofile"
/* While a deleting class waits for its NodeClaims: a safety net for a missed NodeClaim event. */
#define FINALIZER_RECHECK_USEC (60 * KP_USEC_PER_SEC)
#define MAX_PATCH (64u * 1024u)
/* How soon a reconcile that found a cache not yet synced looks again. */
#define SYNC_WAIT_USEC (500 * KP_USEC_PER_MSEC)

/* --- pure decisions ---------------------------------------------------------------------------- */

void kp_nodeclass_ready_done(struct kp_nodeclass_ready *r)
{
    if (!r)
        return;
    kp_free(r->message);
    r->message = NULL;
}

static int set_ready(struct kp_nodeclass_ready *ret, enum kp_cond_status st, const char *reason,
                     struct kp_buf *msg)
{
    char *m;

    /* Validation reports end each line with '\n'; the condition reads better without the last. */
    while (msg->len > 0 && kp_buf_str(msg)[msg->len - 1] == '\n')
        kp_buf_truncate(msg, msg->len - 1);
    m = kp_buf_steal(msg, /* ret_len= */ NULL);
    if (!m)
        return -ENOMEM;
    ret->status = st;
    ret->reason = reason;
    ret->message = m;
    return 0;
}

int kp_nodeclass_ready_compute(const struct kp_sshnodeclass_view *nc,
                               const struct kp_sshjoinprofile_view *profile, size_t n_hosts,
                               const char *pool_ns, struct kp_nodeclass_ready *ret)
{
    struct kp_buf msg = KP_BUF_INIT(KP_NODECLASS_MAX_MESSAGE);
    int r, problems;

    /* The class's own CRD rules first: a class written before a CRD upgrade may break them. A
     * selector that does not build is reported alone as SelectorError, in the reference's order
     * (after the profile checks). */
    problems = kp_sshnodeclass_validate(nc, &msg);
    if (problems < 0 && problems != -KP_ELIMIT) {
        r = problems;
        goto out;
    }
    if (problems == -KP_ELIMIT || (problems > 0 && !(problems == 1 && nc->host_selector_error))) {
        r = set_ready(ret, KP_COND_FALSE, KP_NODECLASS_REASON_INVALID, &msg);
        goto out;
    }
    kp_buf_reset(&msg);

    if (!profile) {
        if ((r = kp_buf_printf(&msg, "SSHJoinProfile \"%s\" not found",
                               nc->join_profile ? nc->join_profile : "")) < 0)
            goto out;
        r = set_ready(ret, KP_COND_FALSE, KP_NODECLASS_REASON_PROFILE_NOT_FOUND, &msg);
        goto out;
    }
    problems = kp_profile_validate_view(profile, &msg);
    if (problems < 0 && problems != -KP_ELIMIT) {
        r = problems;
        goto out;
    }
    if (problems != 0) {
        r = set_ready(ret, KP_COND_FALSE, KP_NODECLASS_REASON_PROFILE_INVALID, &msg);
        goto out;
    }
    kp_buf_reset(&msg);

    if (nc->host_selector_error) {
        if ((r = kp_buf_printf(&msg, "spec.hostSelector: %s", nc->host_selector_error)) < 0)
            goto out;
        r = set_ready(ret, KP_COND_FALSE, KP_NODECLASS_REASON_SELECTOR_ERROR, &msg);
        goto out;
    }
    if (n_hosts == 0) {
        if ((r = kp_buf_printf(&msg, "no SSHHosts in namespace %s match the selector", pool_ns)) <
            0)
            goto out;
        r = set_ready(ret, KP_COND_FALSE, KP_NODECLASS_REASON_NO_HOSTS, &msg);
        goto out;
    }
    r = set_ready(ret, KP_COND_TRUE, KP_NODECLASS_REASON_READY, &msg);
out:
    kp_buf_done(&msg);
    return r;
}

static const struct kp_condition *cached_ready(const struct kp_sshnodeclass_view *nc)
{
    return kp_conditions_get(&nc->conditions, KP_SSH_NODECLASS_CONDITION_READY);
}

bool kp_nodeclass_ready_differs(const struct kp_sshnodeclass_view *nc,
                                const struct kp_nodeclass_ready *want)
{
    const struct kp_condition *c = cached_ready(nc);

    if (!c)
        return true;
    return c->status != want->status || !kp_streq(c->reason, want->reason) ||
           !kp_streq(nc->ready_message ? nc->ready_message : "", want->message) ||
           nc->ready_observed_generation != nc->generation || c->last_transition_usec == 0;
}

/* Dumps patch p into out and drops p. */
static int dump_patch(json_t *p, int r, struct kp_buf *out)
{
    if (r >= 0)
        r = kp_json_dump(p, /* flags= */ 0, out);
    kp_json_unref(p);
    return r;
}

int kp_nodeclass_status_patch(const struct kp_sshnodeclass_view *nc, const char *rv,
                              const struct kp_nodeclass_ready *want, uint64_t now_usec,
                              struct kp_buf *out)
{
    const struct kp_condition *c = cached_ready(nc);
    char ts[KP_RFC3339_STRMAX];
    uint64_t when = now_usec;
    json_t *p = NULL, *conds = NULL;
    int r;

    if (!*rv)
        return -EINVAL;
    /* lastTransitionTime moves only when the status does. metav1.Time has second precision. */
    if (c && c->status == want->status && c->last_transition_usec > 0)
        when = (uint64_t)c->last_transition_usec;
    if ((r = kp_rfc3339_format((int64_t)when, KP_RFC3339_SECONDS, ts, sizeof(ts))) < 0)
        return r;
    if ((r = kp_json_patch_new(&p)) < 0)
        return r;
    if ((r = kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "resourceVersion"), rv)) >= 0 &&
        (r = kp_conditions_patch_one(KP_SSH_NODECLASS_CONDITION_READY, want->status, want->reason,
                                     want->message, nc->generation, ts, &conds)) >= 0)
        r = kp_json_patch_set_steal(p, KP_JSON_PATH("status", "conditions"), conds);
    return dump_patch(p, r, out);
}

bool kp_nodeclass_has_finalizer(const struct kp_sshnodeclass_view *nc)
{
    for (size_t i = 0; i < nc->n_finalizers; i++)
        if (kp_streq(nc->finalizers[i], KP_SSH_NODECLASS_FINALIZER))
            return true;
    return false;
}

/* Appends a copy of s to the array list. */
static int append_str(json_t *list, const char *s)
{
    json_t *one = NULL;
    int r = kp_json_string_new(s, &one);

    return r < 0 ? r : kp_json_array_append_steal(list, one);
}

int kp_nodeclass_finalizer_patch(const struct kp_sshnodeclass_view *nc, bool add,
                                 struct kp_buf *out)
{
    json_t *p = NULL, *list = NULL;
    int r;

    if (!nc->e.rv || !*nc->e.rv)
        return -EINVAL;
    if ((r = kp_json_patch_new(&p)) < 0)
        return r;
    if ((r = kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "resourceVersion"), nc->e.rv)) < 0 ||
        (r = kp_json_array_new(&list)) < 0)
        return dump_patch(p, r, out);
    /* The whole list is replaced (merge patch): every other finalizer is kept as it is. */
    for (size_t i = 0; i < nc->n_finalizers && r >= 0; i++)
        if (!kp_streq(nc->finalizers[i], KP_SSH_NODECLASS_FINALIZER))
            r = append_str(list, nc->finalizers[i]);
    if (r >= 0 && add)
        r = append_str(list, KP_SSH_NODECLASS_FINALIZER);
    if (r >= 0)
        r = kp_json_patch_set_steal(p, KP_JSON_PATH("metadata", "finalizers"), list);
    else
        kp_json_unref(list);
    return dump_patch(p, r, out);
}

bool kp_nodeclass_host_labels_changed(const struct kp_labels *a, const struct kp_labels *b)
{
    if (a->n != b->n)
        return true;
    for (size_t i = 0; i < a->n; i++)
        if (!kp_streq(kp_labels_get(b, a->v[i].key), a->v[i].value))
            return true;
    return false;
}

/* --- the controller ------------------------------------------------------------------------------ */

struct kp_ssh_nodeclassctl {
    char *pool_ns;
    struct kp_informer *nodeclasses, *profiles, *hosts, *nodeclaims;
    struct kp_controller *base; /* reconciler, handlers, readiness, recorder */
    struct kp_reconciler *rec;  /* base's, for the handlers' enqueues */
};

static void enqueue(struct kp_ssh_nodeclassctl *ctl, const char *name)
{
    int r = kp_reconciler_enqueue(ctl->rec, name);

    if (r < 0 && r != -ESHUTDOWN)
        kp_log_warn_errno(r, "nodeclass enqueue failed", KP_LF("nodeclass", name));
}

/* A fan-out walk's failures, counted under the store's read lock and logged after it. */
struct fanout {
    struct kp_ssh_nodeclassctl *ctl;
    unsigned failed;
    int err;
};

/* Walk visitor: enqueue one class. Runs under the class store's read lock (store.h): no I/O,
 * so no log line here. */
static int enqueue_visit(void *ctx, struct kp_entry *e)
{
    struct fanout *f = ctx;
    int r = kp_reconciler_enqueue(f->ctl->rec, e->name);

    if (r < 0 && r != -ESHUTDOWN) {
        f->failed++;
        f->err = r;
    }
    return 0;
}

static void fanout_done(const struct fanout *f, int walk, const char *key, const char *value)
{
    if (walk < 0)
        kp_log_warn_errno(walk, "nodeclass fan-out failed", KP_LF(key, value));
    else if (f->failed > 0)
        kp_log_warn_errno(f->err, "nodeclass enqueue failed", KP_LF(key, value),
                          KP_LF("failed", f->failed));
}

static void enqueue_all(struct kp_ssh_nodeclassctl *ctl, const char *host)
{
    struct fanout f = {.ctl = ctl};
    int r = kp_store_walk(kp_informer_store(ctl->nodeclasses), enqueue_visit, &f);

    fanout_done(&f, r, "sshhost", host);
}

static void profile_event(struct kp_ssh_nodeclassctl *ctl, const struct kp_entry *e)
{
    struct fanout f = {.ctl = ctl};
    int r = kp_store_walk_index(kp_informer_store(ctl->nodeclasses), INDEX_NODECLASS_PROFILE,
                                e->name, enqueue_visit, &f);

    fanout_done(&f, r, "profile", e->name);
}

static void on_profile_add(void *ctx, const struct kp_entry *e)
{
    profile_event(ctx, e);
}

static void on_profile_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    (void)old_e;
    profile_event(ctx, new_e);
}

static void on_host_add(void *ctx, const struct kp_entry *e)
{
    struct kp_ssh_nodeclassctl *ctl = ctx;

    if (kp_streq(e->ns, ctl->pool_ns))
        enqueue_all(ctl, e->name);
}

static void on_host_update(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    struct kp_ssh_nodeclassctl *ctl = ctx;

    /* Status writes (the probe's, every two minutes per host) change nothing a class checks. */
    if (kp_streq(new_e->ns, ctl->pool_ns) &&
        kp_nodeclass_host_labels_changed(&kp_sshhost_view(old_e)->meta.labels,
                                         &kp_sshhost_view(new_e)->meta.labels))
        enqueue_all(ctl, new_e->name);
}

static const char *claim_class(const struct kp_entry *e)
{
    const struct kp_nodeclaim_view *v = kp_nodeclaim_view(e);

    return kp_nodeclaim_is_ours(v) ? v->spec.node_class_ref.name : NULL;
}

static void on_nodeclaim_update(void *ctx, const struct kp_entry *old_e,
                                const struct kp_entry *new_e)
{
    const char *a = claim_class(old_e), *b = claim_class(new_e);

    if (kp_streq(a, b))
        return;
    if (a && *a)
        enqueue(ctx, a);
    if (b && *b)
        enqueue(ctx, b);
}

static void on_nodeclaim_delete(void *ctx, const struct kp_entry *old_e)
{
    const char *a = claim_class(old_e);

    if (a && *a)
        enqueue(ctx, a);
}

static void index_profile(const struct kp_entry *e, kp_index_emit_fn emit, void *ctx)
{
    const char *p = kp_sshnodeclass_view(e)->join_profile;

    if (p && *p)
        emit(p, ctx);
}

static int reconcile_fn(void *ctx, struct kp_client *c, const struct kp_ctx *cx, const char *key,
                        uint64_t *ret_requeue)
{
    (void)cx; /* a reconcile here is API calls only, each bounded by the client's timeout */
    return kp_ssh_nodeclassctl_reconcile(ctx, c, key, ret_requeue);
}

int kp_ssh_nodeclassctl_new(const struct kp_ssh_nodeclassctl_opts *o,
                            struct kp_ssh_nodeclassctl **ret)
{
    struct kp_ssh_nodeclassctl *ctl = NULL;
    struct kp_controller_opts co = {0};
    int r;

    if (!o || !o->pool_namespace || !*o->pool_namespace || !o->client || !o->nodeclasses ||
        !o->profiles || !o->hosts || !o->nodeclaims)
        return -EINVAL;
    ctl = kp_calloc(1, sizeof(*ctl));
    if (!ctl)
        return -ENOMEM;
    ctl->nodeclasses = o->nodeclasses;
    ctl->profiles = o->profiles;
    ctl->hosts = o->hosts;
    ctl->nodeclaims = o->nodeclaims;
    ctl->pool_ns = kp_strdup(o->pool_namespace);
    if (!ctl->pool_ns) {
        r = -ENOMEM;
        goto out;
    }
    co.name = "sshnodeclass";
    co.group = "karpenter.kpssh.dev";
    co.kind = "SSHNodeClass";
    co.client = o->client;
    co.reconcile = reconcile_fn;
    co.ctx = ctl;
    co.workers = o->workers;
    co.events = o->events;
    co.events_component = KP_SSH_NODECLASSCTL_COMPONENT;
    if ((r = kp_controller_new(&co, &ctl->base)) < 0)
        goto out;
    ctl->rec = kp_controller_reconciler(ctl->base);
    if ((r = kp_controller_add_index(ctl->base, ctl->nodeclasses, INDEX_NODECLASS_PROFILE,
                                     index_profile)) < 0 ||
        (r = kp_controller_add_index(ctl->base, ctl->nodeclaims, KP_SSH_INDEX_NODECLAIM_CLASS,
                                     kp_ssh_index_nodeclaim_class)) < 0)
        goto out;
    if ((r = kp_controller_watch_keys(ctl->base, ctl->nodeclasses)) < 0 ||
        (r = kp_controller_watch(ctl->base, ctl->profiles,
                                 &(struct kp_informer_handler){.on_add = on_profile_add,
                                                               .on_update = on_profile_update,
                                                               .on_delete = on_profile_add,
                                                               .ctx = ctl})) < 0 ||
        (r = kp_controller_watch(ctl->base, ctl->hosts,
                                 &(struct kp_informer_handler){.on_add = on_host_add,
                                                               .on_update = on_host_update,
                                                               .on_delete = on_host_add,
                                                               .ctx = ctl})) < 0 ||
        (r = kp_controller_watch(ctl->base, ctl->nodeclaims,
                                 &(struct kp_informer_handler){.on_update = on_nodeclaim_update,
                                                               .on_delete = on_nodeclaim_delete,
                                                               .ctx = ctl})) < 0)
        goto out;
    *ret = ctl;
    ctl = NULL;
    r = 0;
out:
    kp_ssh_nodeclassctl_free(ctl); /* the skeleton takes back the handlers it added */
    return r;
}

int kp_ssh_nodeclassctl_start(struct kp_ssh_nodeclassctl *ctl)
{
    return kp_controller_start(ctl->base);
}

void kp_ssh_nodeclassctl_stop(struct kp_ssh_nodeclassctl *ctl)
{
    if (ctl)
        kp_controller_stop(ctl->base);
}

bool kp_ssh_nodeclassctl_ready(struct kp_ssh_nodeclassctl *ctl)
{
    return ctl && kp_controller_ready(ctl->base);
}

struct kp_ssh_nodeclassctl *kp_ssh_nodeclassctl_free(struct kp_ssh_nodeclassctl *ctl)
{
    if (!ctl)
        return NULL;
    ctl->base = kp_controller_free(ctl->base);
    kp_free(ctl->pool_ns);
    kp_free(ctl);
    return NULL;
}

/* --- reconcile ------------------------------------------------------------------------------------ */

static void emit_transition(struct kp_ssh_nodeclassctl *ctl, const struct kp_sshnodeclass_view *nc,
                            const struct kp_nodeclass_ready *want)
{
    struct kp_event_ref ref = {.kind = KP_KPSSH_NODECLASS_KIND,
                               .api_version = KP_KPSSH_GROUP "/" KP_KPSSH_VERSION,
                               .name = nc->e.name,
                               .uid = nc->e.uid};
    struct kp_buf note = KP_BUF_INIT(KP_EVENTS_NOTE_MAX);
    /* Made by the skeleton's start before the workers: never NULL on a worker. */
    struct kp_events *events = kp_controller_events(ctl->base);

    if (!events)
        return;
    /* The message is cut well below the note limit; the condition holds all of it. */
    if (kp_buf_printf(&note, "Ready=%s (%s)%s%.768s", kp_cond_status_name(want->status),
                      want->reason, *want->message ? ": " : "", want->message) < 0) {
        kp_buf_done(&note);
        return;
    }
    /* Dropped events are counted by the recorder; the condition is the record that matters. */
    (void)kp_events_emit(events, &ref,
                         want->status == KP_COND_TRUE ? KP_EVENT_NORMAL : KP_EVENT_WARNING,
                         want->reason, "StatusChange", kp_buf_str(&note));
    kp_buf_done(&note);
}

/* How many hosts of the pool namespace nc selects (stops counting at the first: only 0
 * matters). */
static int count_hosts(struct kp_ssh_nodeclassctl *ctl, const struct kp_sshnodeclass_view *nc,
                       size_t *ret)
{
    struct kp_store_list l = {0};
    size_t n = 0;
    int r;

    if ((r = kp_store_list(kp_informer_store(ctl->hosts), &l)) < 0)
        return r;
    for (size_t i = 0; i < l.n && n == 0; i++)
        if (kp_inventory_member(nc, ctl->pool_ns, kp_sshhost_view(l.v[i])))
            n++;
    kp_store_list_free(&l);
    *ret = n;
    return 0;
}

static int patch(struct kp_client *c, const char *name, const char *sub, const struct kp_buf *b,
                 json_t **ret_obj, struct kp_error *err)
{
    return kp_client_patch_bytes(c, &KP_RES_SSHNODECLASS, NULL, name, sub, KP_PATCH_MERGE,
                                 kp_buf_str(b), b->len, ret_obj, err);
}

int kp_ssh_nodeclassctl_reconcile(struct kp_ssh_nodeclassctl *ctl, struct kp_client *c,
                                  const char *name, uint64_t *ret_requeue_usec)
{
    struct kp_entry *e = NULL, *pe = NULL, *updated = NULL;
    struct kp_nodeclass_ready want = {0};
    struct kp_buf body = KP_BUF_INIT(MAX_PATCH);
    struct kp_error err = KP_ERROR_INIT;
    struct kp_store_list claims = {0};
    const struct kp_sshnodeclass_view *nc;
    json_t *obj = NULL;
    const char *rv;
    size_t n_hosts = 0;
    int r;

    /* Decide only on a full picture: before the NodeClaim cache is synced an empty index would
     * release the finalizer of a class still in use, and before the host cache is synced every
     * class would flap to NoHosts. */
    if (!kp_informer_synced(ctl->profiles) || !kp_informer_synced(ctl->hosts) ||
        !kp_informer_synced(ctl->nodeclaims)) {
        *ret_requeue_usec = SYNC_WAIT_USEC;
        r = 0;
        goto out;
    }
    r = kp_store_get(kp_informer_store(ctl->nodeclasses), name, &e);
    if (r == -ENOENT) {
        r = 0; /* deleted: nothing left to do */
        goto out;
    }
    if (r < 0)
        goto out;
    nc = kp_sshnodeclass_view(e);

    if (nc->meta.deletion_usec != 0) {
        if (!kp_nodeclass_has_finalizer(nc))
            goto out;
        if ((r = kp_store_by_index(kp_informer_store(ctl->nodeclaims), KP_SSH_INDEX_NODECLAIM_CLASS,
                                   name, &claims)) < 0)
            goto out;
        if (claims.n > 0) {
            kp_log_debug("nodeclass deletion waits for its NodeClaims", KP_LF("nodeclass", name),
                         KP_LF("nodeclaims", claims.n), KP_LF("first", claims.v[0]->name));
            *ret_requeue_usec = FINALIZER_RECHECK_USEC;
            goto out;
        }
        if ((r = kp_nodeclass_finalizer_patch(nc, false, &body)) < 0)
            goto out;
        r = patch(c, name, NULL, &body, NULL, &err);
        if (r == -ENOENT)
            r = 0;
        else if (r == 0)
            kp_log_info("nodeclass finalizer removed", KP_LF("nodeclass", name));
        goto out;
    }

    rv = nc->e.rv;
    if (!kp_nodeclass_has_finalizer(nc)) {
        if ((r = kp_nodeclass_finalizer_patch(nc, true, &body)) < 0)
            goto out;
        if ((r = patch(c, name, NULL, &body, &obj, &err)) < 0)
            goto out;
        /* Continue from the server's answer: its resourceVersion is what the status write
         * must carry, and the cache may not have seen it yet. */
        if ((r = kp_sshnodeclass_project(obj, &updated)) < 0)
            goto out;
        nc = kp_sshnodeclass_view(updated);
        rv = nc->e.rv;
        kp_buf_reset(&body);
    }

    if (nc->join_profile && *nc->join_profile) {
        r = kp_store_get(kp_informer_store(ctl->profiles), nc->join_profile, &pe);
        if (r < 0 && r != -ENOENT)
            goto out;
    }
    if ((r = count_hosts(ctl, nc, &n_hosts)) < 0)
        goto out;
    if ((r = kp_nodeclass_ready_compute(nc, pe ? kp_sshjoinprofile_view(pe) : NULL, n_hosts,
                                        ctl->pool_ns, &want)) < 0)
        goto out;
    if (!kp_nodeclass_ready_differs(nc, &want))
        goto out;
    if ((r = kp_nodeclass_status_patch(nc, rv, &want, kp_real_usec(), &body)) < 0)
        goto out;
    r = patch(c, name, "status", &body, NULL, &err);
    if (r == -ENOENT) {
        r = 0;
        goto out;
    }
    if (r < 0)
        goto out;
    {
        const struct kp_condition *old = cached_ready(nc);

        if (!old || old->status != want.status || !kp_streq(old->reason, want.reason)) {
            kp_log_info("nodeclass readiness changed", KP_LF("nodeclass", name),
                        KP_LF("ready", kp_cond_status_name(want.status)),
                        KP_LF("reason", want.reason), KP_LF("message", want.message));
            emit_transition(ctl, nc, &want);
        }
    }
out:
    /* The reconciler logs the failure once; the server's account is a detail for debugging. */
    if (r < 0 && err.message)
        kp_log_debug("nodeclass write refused", KP_LF("nodeclass", name),
                     KP_LF("detail", err.message));
    kp_error_done(&err);
    kp_store_list_free(&claims);
    kp_nodeclass_ready_done(&want);
    kp_buf_done(&body);
    kp_json_unref(obj);
    kp_entry_unref(updated);
    kp_entry_unref(pe);
    kp_entry_unref(e);
    return r;
}
