/* provider/ssh/provider.c: the SSH provider (provider.h).
 *
 * DESIGN
 *
 * What: the machine half of a NodeClaim's life on an SSH pool. The core calls Create when it
 * launches a NodeClaim and Delete when it terminates one; everything else in the vtable reads.
 *
 * Host state machine as this file drives it (the probe and the zombie guard add their own edges,
 * hostctl.c); every arrow is one CAS on the SSHHost's status
 * (claim.h) carrying the resourceVersion we last saw, so a lost race never overwrites:
 *
 *   Available --claim--> Claimed{claimRef=name,uid}                          (Create)
 *   Claimed   --install ok--> Claimed{installedProfile=<p>@<v>}              (cold host only)
 *   Claimed   --token minted--> Claimed{bootstrapTokenID}                    (before join)
 *   Claimed   --join exit 0--> Claimed{providerID}       (Static: Create returns, Launched)
 *   Claimed   --Node registered--> InUse{providerID}     (host controller; then token collected)
 *   Claimed   --adopting Node registered--> InUse{providerID, adoptedProviderID}  (Adopt: Create)
 *   Claimed   --config error--> Available (claim cleared; NodeClaim gets ConfigurationError)
 *   Claimed   --script/registration failure--> Unhealthy{lastProbeError}     (claim cleared)
 *   InUse|Claimed --Delete, fence ok--> Leaving{claimRef kept}                (Delete)
 *   Leaving   --leave ok--> Available (warm)   --leave failed--> Unhealthy
 *
 * While claimRef is set the host is its holder's, whatever its state: the probe leaves it alone
 * (it only checks that the NodeClaim still exists) and only the holder writes it.
 *
 * Why this way: the claim is the lock, so Create is resumable — after a crash the next Create
 * for the same NodeClaim finds its host by claimRef (name + uid) and re-runs install-if-needed
 * and join, whose scripts are idempotent by contract. Delete is fenced: it re-reads the host and
 * proceeds only while the claim is this NodeClaim's (name and uid), moving to Leaving by CAS so
 * the check and the state change are one atomic step; a late Delete for a dead NodeClaim answers
 * NotFound and touches nothing, not even a successor's node. The token id is recorded before
 * join so a crash never loses track of a live token; it is deleted once the Node exists (by the
 * host controller, hostctl.c, for Static).
 *
 * Create ends at launch, as Karpenter's CloudProvider.Create does: a Static join's providerID is
 * ours (kpssh://<ns>/<host>), so it is written when the join script exits 0 and Create returns;
 * registration is the core's to wait for, and the host controller marks the host InUse when the
 * Node appears. A Node that never comes is Karpenter's registration timeout: the core deletes
 * the NodeClaim and Delete runs leave. Only Adopt, whose providerID is the registering Node's
 * own, waits inside Create (bounded by the registration timeout and the caller's ctx).
 *
 * Cancellation: every op checks its ctx between steps, and the install and join phases run
 * under it (hostio.c hands it to the SSH session, which looks at it every poll slice). A phase
 * ended by the ctx leaves the claim in place and answers RETRYABLE: the next Create resumes.
 *
 * Catalog: instance types are built per SSHNodeClass from the SSHHost store (inventory.c) and
 * published as a refcounted, immutable kp_instance_catalog. A get whose stores have not changed
 * since the last build (their generations) hands out another reference to the same catalog; a
 * changed store rebuilds, and the result is republished under a new version only when it
 * differs, so a status write that moves nothing (a probe's timestamp) costs one build and no
 * version bump. Create, Get and List use the same catalog.
 *
 * Reads come from the informer stores (possibly stale: a stale read only costs a Conflict);
 * the Delete fence and every retry after a Conflict read the host fresh from the API server.
 * Adopt's registration wait is a read of the Node informer's store through the shared indexes
 * (indexes.h: InternalIP), so waiting costs no API request; without a Node store it falls back
 * to asking the API server.
 *
 * Reaching a host (Secrets, the KPSSH_* environment, running and timing a phase, leave by
 * marker) lives in hostio.c, shared with the host controller (hostctl.c), whose zombie guard
 * must leave exactly as Delete does. Every phase's wall time goes to the observer (observe.h).
 *
 * Where the SSH runs: with a job pool (the controller's launch pool, job_threads), a Create
 * submits its install or join to the pool and answers IN_PROGRESS, and a Delete submits its
 * leave and answers "releasing"; the job's end tells the progress watchers (the core enqueues
 * the NodeClaim), and the next call takes the result under its key "<nodeclaim>/<uid>" and
 * decides on it against the host as the API has it then. So every decision and write stays on
 * a worker with its client, a pool thread only ever holds an SSH session, and a Create is a few
 * short calls: claim+submit install, record marker+mint token+submit join, write providerID.
 * Without a pool (tools, tests) the same steps run in one call with the phases inline.
 *
 * Threads: each op runs on the calling worker's thread with that worker's client; SSH sessions
 * are per phase and run on that thread or a pool thread. The published catalogs, the progress
 * watchers and the set of NodeClaims a Delete is deciding for are the mutable state, under a
 * mutex held for lookups and swaps, never for a build or I/O (the watchers run under it: they
 * only enqueue).
 * Logging: this file is the decision point for host transitions and logs them once. */
#include "provider/ssh/provider.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/map.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/events.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "api/obj-node.h"
#include "k8s/status.h"
#include "k8s/informer.h"
#include "k8s/store.h"
#include "provider/ssh/claim.h"
#include "provider/ssh/env.h"
#include "provider/ssh/hostctl.h"
#include "provider/ssh/hostio.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/inventory.h"
#include "provider/ssh/jobs.h"
#include "provider/ssh/profile.h"
#include "provider/ssh/runner.h"
#include "provider/ssh/session.h"
#include "provider/ssh/token.h"

/* How often an Adopt registration wait looks at its context (a cancel ends it this fast). */
#define KP_SSH_REGISTRATION_CTX_RECHECK_USEC (200 * 1000ULL)

/* One node class's published catalog and the store generations it was built from. */
struct published {
    char *nodeclass;
    uint64_t hosts_gen, classes_gen;
    struct kp_instance_catalog *cat;
};

/* One watch_progress registration. */
struct progress_watch {
    void (*fn)(void *ctx, const char *nodeclaim);
    void *ctx;
};

struct kp_ssh_provider {
    char *pool_ns;
    char *bootstrap_group; /* auth-extra-groups of the tokens it mints */
    struct kp_store *hosts, *nodeclasses, *profiles;
    struct kp_store *nodes; /* optional: Adopt's registration reads it instead of the API */
    struct kp_events *events;
    const struct kp_ssh_observer *observer;
    uint64_t reg_timeout, reg_poll;
    /* The catalogs, the only mutable state: under mu, held briefly (never across a build). */
    pthread_mutex_t mu;
    struct published *pub;
    size_t n_pub;
    uint64_t version; /* the last version published */
    /* watch_drift's registrations (main thread only: set-up and free) */
    struct kp_informer *class_inf, *profile_inf;
    struct drift_watch **watches;
    size_t n_watches;
    /* The SSH job pool (optional: kp_ssh_provider_opts.job_threads): a Create's install and
     * join and a Delete's leave run on its threads, keyed "<nodeclaim>/<uid>". */
    struct kp_ssh_jobs *jobs;
    /* Under mu: watch_progress's registrations, and the keys a Delete is deciding for now. */
    struct progress_watch *progress;
    size_t n_progress;
    struct kp_map *deleting;
    /* Under mu: the host each NodeClaim's claim took ("<name>/<uid>" -> owned host name), so
     * the next call finds its host even before the informer's store has seen the claim (with a
     * pool the next Create comes milliseconds later). A hint: the API server's answer decides. */
    struct kp_map *held;
};

static void jobs_done(void *owner, const char *key);

int kp_ssh_provider_new(const struct kp_ssh_provider_opts *opts, struct kp_ssh_provider **ret)
{
    struct kp_ssh_provider *p;

    if (!opts->pool_namespace || !*opts->pool_namespace || !opts->hosts || !opts->nodeclasses ||
        !opts->profiles || (opts->bootstrap_group && !kp_token_group_valid(opts->bootstrap_group)))
        return -EINVAL;
    p = kp_calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    pthread_mutex_init(&p->mu, NULL);
    p->pool_ns = kp_strdup(opts->pool_namespace);
    p->bootstrap_group = kp_strdup(opts->bootstrap_group ? opts->bootstrap_group : KP_TOKEN_GROUP);
    if (!p->pool_ns || !p->bootstrap_group) {
        kp_ssh_provider_free(p);
        return -ENOMEM;
    }
    p->hosts = opts->hosts;
    p->nodeclasses = opts->nodeclasses;
    p->profiles = opts->profiles;
    p->nodes = opts->nodes;
    p->events = opts->events;
    p->observer = opts->observer;
    p->class_inf = opts->nodeclass_informer;
    p->profile_inf = opts->profile_informer;
    p->reg_timeout = opts->registration_timeout_usec ? opts->registration_timeout_usec
                                                     : KP_SSH_REGISTRATION_TIMEOUT_USEC;
    p->reg_poll =
        opts->registration_poll_usec ? opts->registration_poll_usec : KP_SSH_REGISTRATION_POLL_USEC;
    if (kp_map_new(&p->held) < 0) {
        kp_ssh_provider_free(p);
        return -ENOMEM;
    }
    if (opts->job_threads) {
        struct kp_ssh_jobs_opts jo = {.name = "launch",
                                      .threads = opts->job_threads,
                                      .done = jobs_done,
                                      .owner = p,
                                      .observer = opts->observer};
        int r;

        if ((r = kp_map_new(&p->deleting)) < 0 || (r = kp_ssh_jobs_new(&jo, &p->jobs)) < 0) {
            kp_ssh_provider_free(p);
            return r;
        }
    }
    *ret = p;
    return 0;
}

/* One watch_drift registration: the core's callback, behind handlers on the SSHNodeClass and
 * SSHJoinProfile informers (whose ctx is this struct). */
struct drift_watch {
    void (*fn)(void *ctx, const char *node_class);
    void *ctx;
};

static void drift_watch_free(struct kp_ssh_provider *p, struct drift_watch *w)
{
    if (p->class_inf)
        (void)kp_informer_remove_handlers(p->class_inf, w);
    if (p->profile_inf)
        (void)kp_informer_remove_handlers(p->profile_inf, w);
    kp_free(w);
}

/* A node class's spec changed (its generation moved), or it came or went: is_drifted compares
 * its join settings' hash. Status writes (readiness) move no generation and wake nothing. */
static void class_added(void *ctx, const struct kp_entry *e)
{
    struct drift_watch *w = ctx;

    w->fn(w->ctx, e->name);
}

static void class_updated(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    if (kp_sshnodeclass_view(old_e)->generation != kp_sshnodeclass_view(new_e)->generation)
        class_added(ctx, new_e);
}

/* A join profile's spec changed: is_drifted compares the installed profile's marker; any class
 * may name it. */
static void profile_updated(void *ctx, const struct kp_entry *old_e, const struct kp_entry *new_e)
{
    struct drift_watch *w = ctx;

    if (kp_sshjoinprofile_view(old_e)->generation != kp_sshjoinprofile_view(new_e)->generation)
        w->fn(w->ctx, NULL);
}

static int op_watch_drift(void *self, void (*fn)(void *ctx, const char *node_class), void *ctx)
{
    struct kp_ssh_provider *p = self;
    struct drift_watch *w, **v;
    int r;

    if (!p->class_inf || !p->profile_inf)
        return 0; /* no informers: the core's poll finds drift */
    if (!(w = kp_calloc(1, sizeof(*w))))
        return -ENOMEM;
    w->fn = fn;
    w->ctx = ctx;
    if (!(v = kp_reallocarray(p->watches, p->n_watches + 1, sizeof(*v)))) {
        kp_free(w);
        return -ENOMEM;
    }
    p->watches = v;
    if ((r = kp_informer_add_handler(p->class_inf,
                                     &(struct kp_informer_handler){.on_add = class_added,
                                                                   .on_update = class_updated,
                                                                   .on_delete = class_added,
                                                                   .ctx = w})) < 0 ||
        (r = kp_informer_add_handler(
             p->profile_inf,
             &(struct kp_informer_handler){.on_update = profile_updated, .ctx = w})) < 0) {
        drift_watch_free(p, w);
        return r;
    }
    p->watches[p->n_watches++] = w;
    return 0;
}

static void op_unwatch_drift(void *self, void *ctx)
{
    struct kp_ssh_provider *p = self;

    for (size_t i = 0; i < p->n_watches;) {
        if (p->watches[i]->ctx != ctx) {
            i++;
            continue;
        }
        drift_watch_free(p, p->watches[i]);
        p->watches[i] = p->watches[--p->n_watches];
    }
}

struct kp_ssh_provider *kp_ssh_provider_free(struct kp_ssh_provider *p)
{
    if (!p)
        return NULL;
    p->jobs = kp_ssh_jobs_free(p->jobs); /* stops it: no done callback runs after this */
    p->deleting = kp_map_free(p->deleting);
    {
        size_t it = 0;
        const char *k;
        void *v;

        while (p->held && kp_map_next(p->held, &it, &k, &v))
            kp_free(v);
        p->held = kp_map_free(p->held);
    }
    kp_free(p->progress);
    for (size_t i = 0; i < p->n_pub; i++) {
        kp_free(p->pub[i].nodeclass);
        kp_instance_catalog_unref(p->pub[i].cat);
    }
    kp_free(p->pub);
    for (size_t i = 0; i < p->n_watches; i++)
        drift_watch_free(p, p->watches[i]);
    kp_free(p->watches);
    pthread_mutex_destroy(&p->mu);
    kp_free(p->pool_ns);
    kp_free(p->bootstrap_group);
    kp_free(p);
    return NULL;
}

/* --- small helpers ---------------------------------------------------------------------------- */

static void host_event(struct kp_ssh_provider *p, const struct kp_sshhost_view *h, bool warning,
                       const char *reason, const char *action, const char *note)
{
    kp_hostio_event(p->events, h, warning, reason, action, note);
}

/* --- node class, profile and instance types --------------------------------------------------- */

int kp_ssh_nodeclass_hash(const struct kp_sshnodeclass_view *nc, char ret[17])
{
    static const char hex[] = "0123456789abcdef";
    struct kp_buf b = KP_BUF_INIT(1u << 20);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    json_t *o = NULL;
    int r;

    if ((r = kp_json_patch_new(&o)) < 0)
        return r;
    for (size_t i = 0; i < nc->vars.n; i++)
        if ((r = kp_json_patch_set_str(o, KP_JSON_PATH("vars", nc->vars.v[i].key),
                                       nc->vars.v[i].value)) < 0)
            goto out;
    if (nc->join_secret_set &&
        (r = kp_json_patch_set_str(o, KP_JSON_PATH("joinSecretRef", "name"),
                                   nc->join_secret ? nc->join_secret : "")) < 0)
        goto out;
    if ((r = kp_json_patch_set_str(o, KP_JSON_PATH("providerIDSource"),
                                   nc->provider_id_source == KP_PROVIDER_ID_ADOPT ? "Adopt"
                                                                                  : "Static")) < 0)
        goto out;
    if (nc->cluster_endpoint && (r = kp_json_patch_set_str(o, KP_JSON_PATH("cluster", "endpoint"),
                                                           nc->cluster_endpoint)) < 0)
        goto out;
    if (nc->cluster_ca_bundle && (r = kp_json_patch_set_str(o, KP_JSON_PATH("cluster", "caBundle"),
                                                            nc->cluster_ca_bundle)) < 0)
        goto out;
    if ((r = kp_json_dump(o, KP_JSON_SORT_KEYS, &b)) < 0)
        goto out;
    if (!EVP_Digest(b.data, b.len, md, &mdlen, EVP_sha256(), NULL) || mdlen < 8) {
        r = -EIO;
        goto out;
    }
    for (size_t i = 0; i < 8; i++) {
        ret[2 * i] = hex[md[i] >> 4];
        ret[2 * i + 1] = hex[md[i] & 15];
    }
    ret[16] = '\0';
    r = 0;
out:
    kp_buf_done(&b);
    kp_json_unref(o);
    return r;
}

/* A snapshot of the pool's hosts as an array of views (references kept in *ret_list). */
static int hosts_snapshot(struct kp_ssh_provider *p, struct kp_store_list *ret_list,
                          const struct kp_sshhost_view ***ret_v)
{
    const struct kp_sshhost_view **v;
    int r;

    if ((r = kp_store_list(p->hosts, ret_list)) < 0)
        return r;
    v = kp_calloc(ret_list->n ? ret_list->n : 1, sizeof(*v));
    if (!v) {
        kp_store_list_free(ret_list);
        return -ENOMEM;
    }
    for (size_t i = 0; i < ret_list->n; i++)
        v[i] = kp_sshhost_view(ret_list->v[i]);
    *ret_v = v;
    return 0;
}

static int types_for(struct kp_ssh_provider *p, const struct kp_sshnodeclass_view *ncl,
                     struct kp_instance_types *ret)
{
    struct kp_store_list l = {0};
    const struct kp_sshhost_view **v = NULL;
    struct kp_strv skipped = KP_STRV_INIT;
    int r;

    if ((r = hosts_snapshot(p, &l, &v)) < 0)
        return r;
    r = kp_inventory_instance_types(ncl, p->pool_ns, v, l.n, ret, &skipped);
    for (size_t i = 0; r == 0 && i < skipped.n; i++)
        kp_log_debug("host class not advertised", KP_LF("nodeclass", ncl->e.name),
                     KP_LF("detail", skipped.v[i]));
    kp_strv_done(&skipped);
    kp_free(v);
    kp_store_list_free(&l);
    return r;
}

/* The published entry of the node class called name, or NULL. Under p->mu. */
static struct published *published_find(struct kp_ssh_provider *p, const char *name)
{
    for (size_t i = 0; i < p->n_pub; i++)
        if (kp_streq(p->pub[i].nodeclass, name))
            return &p->pub[i];
    return NULL;
}

/* The published entry of the node class called name in *ret, added empty (no catalog) when there
 * is none. Under p->mu. */
static int published_get(struct kp_ssh_provider *p, const char *name, struct published **ret)
{
    struct published *nv;
    char *dup;

    if ((*ret = published_find(p, name)))
        return 0;
    if (!(nv = kp_reallocarray(p->pub, p->n_pub + 1, sizeof(*nv))))
        return -ENOMEM;
    p->pub = nv;
    if (!(dup = kp_strdup(name)))
        return -ENOMEM;
    *ret = &p->pub[p->n_pub++];
    **ret = (struct published){.nodeclass = dup};
    return 0;
}

/* The published catalog of the node class called name (a new reference in *ret): the one
 * published last when neither store changed since it was built; otherwise built afresh from the
 * stores and republished under a new version, unless it came out equal to the published one,
 * which then stays (with its version) and is marked current. A missing node class is the empty
 * catalog, version 0, and its published entry is dropped (a class created again publishes under
 * a new version, never the one served before the 0). Builds run outside the lock: two callers
 * that both see a change may both build; the second to publish finds the first's equal catalog
 * and keeps it, and a build from generations older than the published one's is not published
 * (the caller gets the newer one). */
static int catalog_for(struct kp_ssh_provider *p, const char *name,
                       struct kp_instance_catalog **ret)
{
    uint64_t hg = kp_store_generation(p->hosts), cg = kp_store_generation(p->nodeclasses);
    struct kp_instance_types types = {0};
    struct kp_entry *e = NULL;
    struct published *pb = NULL;
    int r;

    pthread_mutex_lock(&p->mu);
    pb = published_find(p, name);
    if (pb && pb->hosts_gen == hg && pb->classes_gen == cg) {
        *ret = kp_instance_catalog_ref(pb->cat);
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    pthread_mutex_unlock(&p->mu);

    r = kp_store_get(p->nodeclasses, name, &e);
    if (r == -ENOENT) {
        pthread_mutex_lock(&p->mu);
        if ((pb = published_find(p, name))) {
            kp_free(pb->nodeclass);
            kp_instance_catalog_unref(pb->cat);
            *pb = p->pub[--p->n_pub];
        }
        pthread_mutex_unlock(&p->mu);
        return kp_instance_catalog_new(&types, 0, ret);
    }
    if (r < 0)
        return r;
    r = types_for(p, kp_sshnodeclass_view(e), &types);
    kp_entry_unref(e);
    if (r < 0)
        return r;

    pthread_mutex_lock(&p->mu);
    if ((r = published_get(p, name, &pb)) < 0)
        goto out;
    if (pb->cat && (pb->hosts_gen > hg || pb->classes_gen > cg)) {
        /* Another caller published a build from newer snapshots while we built: keep it. */
        *ret = kp_instance_catalog_ref(pb->cat);
        r = 0;
        goto out;
    }
    if (!pb->cat || !kp_instance_types_equal(&pb->cat->own_, &types)) {
        struct kp_instance_catalog *cat = NULL;

        if ((r = kp_instance_catalog_new(&types, p->version + 1, &cat)) < 0)
            goto out;
        p->version++;
        /* Readers still holding the old catalog keep it alive until they let go. */
        kp_instance_catalog_unref(pb->cat);
        pb->cat = cat;
        kp_log_debug("instance types published", KP_LF("nodeclass", name),
                     KP_LF("version", p->version), KP_LF("types", (uint64_t)cat->n));
    }
    /* Only the generations read before the build: a change during it rebuilds next time. */
    pb->hosts_gen = hg;
    pb->classes_gen = cg;
    *ret = kp_instance_catalog_ref(pb->cat);
    r = 0;
out:
    pthread_mutex_unlock(&p->mu);
    kp_instance_types_done(&types);
    return r;
}

/* Fills ret from the host and its instance type (it may be NULL: the host's own capacity). */
static int instance_fill(const struct kp_sshhost_view *h, const char *nodeclaim,
                         const char *provider_id, const struct kp_instance_type *it,
                         const char *hash, struct kp_provider_instance *ret)
{
    struct kp_provider_instance in = {0};
    int r = -ENOMEM;

    in.nodeclaim = kp_strdup(nodeclaim);
    in.provider_id = kp_strdup(provider_id ? provider_id : "");
    in.instance_type = kp_strdup(it ? it->name : kp_sshhost_class(h));
    in.backing = kp_strjoin(h->e.ns, "/", h->e.name, (const char *)NULL);
    in.creation_usec = h->meta.creation_usec;
    if (!in.nodeclaim || !in.provider_id || !in.instance_type || !in.backing)
        goto out;
    if (it) {
        for (size_t i = 0; i < it->n_labels; i++)
            if ((r = kp_provider_kv_add(&in.labels, &in.n_labels, it->labels[i].key,
                                        it->labels[i].value)) < 0)
                goto out;
        for (size_t i = 0; i < it->n_capacity; i++)
            if ((r = kp_provider_res_add(&in.capacity, &in.n_capacity, it->capacity[i].name,
                                         it->capacity[i].milli)) < 0 ||
                (r = kp_provider_res_add(&in.allocatable, &in.n_allocatable, it->capacity[i].name,
                                         kp_instance_type_allocatable(it, it->capacity[i].name))) <
                    0)
                goto out;
    } else {
        if ((r = kp_provider_kv_add(&in.labels, &in.n_labels, KP_LABEL_INSTANCE_TYPE,
                                    kp_sshhost_class(h))) < 0)
            goto out;
        for (size_t i = 0; i < h->capacity.n; i++)
            if ((r = kp_provider_res_add(&in.capacity, &in.n_capacity, h->capacity.v[i].name,
                                         h->capacity.v[i].milli)) < 0)
                goto out;
    }
    if (hash && ((r = kp_provider_kv_add(&in.annotations, &in.n_annotations,
                                         KP_SSH_ANNOTATION_NODECLASS_HASH, hash)) < 0 ||
                 (r = kp_provider_kv_add(&in.annotations, &in.n_annotations,
                                         KP_SSH_ANNOTATION_NODECLASS_HASH_VERSION,
                                         KP_SSH_NODECLASS_HASH_VERSION)) < 0))
        goto out;
    *ret = in;
    memset(&in, 0, sizeof(in));
    r = 0;
out:
    kp_provider_instance_done(&in);
    return r;
}

/* A NodeClaim requesting an amount kpssh cannot hold fits no host (kp_inventory_fits): that is
 * the user's to fix, said with the validator's text, not a lack of capacity. */
static int requests_check(const struct kp_nodeclaim_view *nc, struct kp_provider_err *err)
{
    struct kp_buf lines = KP_BUF_INIT(KP_MSG_MAX);
    int r;

    if (nc->requests.n_bad == 0)
        return 0;
    r = kp_nodeclaim_validate(nc, &lines);
    if (r == -ENOMEM)
        r = kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
    else
        r = kp_provider_err_set(err, -EINVAL, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_CONFIG,
                                "NodeClaim %s: %s", nc->e.name, kp_buf_str(&lines));
    /* One line per problem in the report; a condition message reads better on one line. */
    for (char *q = err ? err->message : NULL; q && *q; q++)
        if (*q == '\n')
            *q = q[1] ? ';' : '\0';
    kp_buf_done(&lines);
    return r;
}

/* The node class of nc from the store, with the readiness rules of the reference:
 * NotFound -> insufficient capacity; Ready=False -> not ready; Ready=Unknown (set by the node
 * class controller) -> NodeClassReadinessUnknown; no condition yet -> checked here. */
static int nodeclass_for(struct kp_ssh_provider *p, const struct kp_nodeclaim_view *nc,
                         struct kp_entry **ret, struct kp_provider_err *err)
{
    const char *name = nc->spec.node_class_ref.name;
    const struct kp_condition *ready;
    struct kp_entry *e = NULL;
    int r;

    if (!kp_nodeclaim_is_ours(nc))
        return kp_provider_err_set(err, -EINVAL, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_CONFIG,
                                   "NodeClaim %s does not reference an SSHNodeClass", nc->e.name);
    r = kp_store_get(p->nodeclasses, name ? name : "", &e);
    if (r == -ENOENT)
        return kp_provider_err_set(err, -ENOSPC, KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY, NULL,
                                   "SSHNodeClass %s not found", name ? name : "");
    if (r < 0)
        return kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "node class lookup");
    ready = kp_conditions_get(&kp_sshnodeclass_view(e)->conditions, "Ready");
    if (ready && ready->status == KP_COND_FALSE) {
        r = kp_provider_err_set(err, -KP_ENOTREADY, KP_PROVIDER_ERR_NODECLASS_NOT_READY,
                                ready->reason ? ready->reason : KP_PROVIDER_REASON_NOT_READY,
                                "SSHNodeClass %s is not ready: %s", name,
                                kp_sshnodeclass_view(e)->ready_message
                                    ? kp_sshnodeclass_view(e)->ready_message
                                    : "(no message)");
        kp_entry_unref(e);
        return r;
    }
    if (ready && ready->status == KP_COND_UNKNOWN) {
        r = kp_provider_err_set(err, -KP_ENOTREADY, KP_PROVIDER_ERR_CREATE,
                                KP_PROVIDER_REASON_READINESS_UNKNOWN,
                                "SSHNodeClass %s readiness is unknown", name);
        kp_entry_unref(e);
        return r;
    }
    *ret = e;
    return 0;
}

/* The node class's profile, validated, and its install marker. */
static int profile_for(struct kp_ssh_provider *p, const struct kp_sshnodeclass_view *ncl,
                       struct kp_entry **ret, char **ret_marker, struct kp_provider_err *err)
{
    struct kp_profile_spec spec;
    struct kp_entry *e = NULL;
    char *msg = NULL;
    int r;

    r = kp_store_get(p->profiles, ncl->join_profile ? ncl->join_profile : "", &e);
    if (r == -ENOENT)
        return kp_provider_err_set(err, -EINVAL, KP_PROVIDER_ERR_CREATE, "ProfileNotFound",
                                   "SSHJoinProfile \"%s\" not found",
                                   ncl->join_profile ? ncl->join_profile : "");
    if (r < 0)
        return kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "profile lookup");
    kp_profile_spec_from_view(kp_sshjoinprofile_view(e), &spec);
    if ((r = kp_profile_validate(&spec, &msg)) < 0) {
        r = kp_provider_err_set(err, r, KP_PROVIDER_ERR_CREATE, KP_PROFILE_REASON_INVALID,
                                "SSHJoinProfile %s: %s", e->name, msg ? msg : kp_strerror(r));
        goto out;
    }
    if ((r = kp_profile_marker(&spec, ret_marker)) < 0) {
        r = kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "profile marker");
        goto out;
    }
    *ret = e;
    e = NULL;
out:
    kp_free(msg);
    kp_entry_unref(e);
    return r;
}

/* The key of a NodeClaim's launch state, its hint and its pool jobs: "<name>/<uid>" (a name
 * holds no '/'), so a NodeClaim recreated under the same name never reads its predecessor's.
 * NULL when out of memory. */
static char *claim_key(const char *name, const char *uid)
{
    return kp_strjoin(name, "/", uid ? uid : "", (const char *)NULL);
}

/* The held hint of the NodeClaim (name, uid): records host (NULL: forgets it). Out of memory
 * only loses the hint. */
static void held_set(struct kp_ssh_provider *p, const char *name, const char *uid, const char *host)
{
    char *key = claim_key(name, uid);
    char *v = host ? kp_strdup(host) : NULL;
    void *old = NULL;

    if (!key) {
        kp_free(v);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (v) {
        if (kp_map_put(p->held, key, v, &old) < 0)
            old = v; /* not recorded: the store finds it later */
    } else {
        old = kp_map_remove(p->held, key);
    }
    pthread_mutex_unlock(&p->mu);
    kp_free(old);
    kp_free(key);
}

/* Forgets the held hint of (name, uid) if it still names host (a newer hint stays). */
static void held_forget_if(struct kp_ssh_provider *p, const char *name, const char *uid,
                           const char *host)
{
    char *key = claim_key(name, uid);
    void *old = NULL;

    if (!key)
        return;
    pthread_mutex_lock(&p->mu);
    if (kp_streq(kp_map_get(p->held, key), host))
        old = kp_map_remove(p->held, key);
    pthread_mutex_unlock(&p->mu);
    kp_free(old);
    kp_free(key);
}

/* The host the held hint names for (name, uid), read fresh, when it is still held by it. */
static int find_hinted(struct kp_ssh_provider *p, struct kp_client *c, const char *name,
                       const char *uid, struct kp_entry **ret)
{
    char *key = claim_key(name, uid), *host = NULL;
    struct kp_error e = KP_ERROR_INIT;
    struct kp_entry *fresh = NULL;
    int r;

    if (!key)
        return -ENOMEM;
    pthread_mutex_lock(&p->mu);
    host = kp_map_get(p->held, key) ? kp_strdup(kp_map_get(p->held, key)) : NULL;
    pthread_mutex_unlock(&p->mu);
    kp_free(key);
    if (!host)
        return -ENOENT;
    r = kp_claim_read_api(c, p->pool_ns, host, &fresh, &e);
    kp_error_done(&e);
    if (r == 0 && !kp_claim_held_by(kp_sshhost_view(fresh), name, uid)) {
        fresh = kp_entry_unref(fresh);
        r = -ENOENT;
    }
    if (r == -ENOENT)
        held_forget_if(p, name, uid, host); /* no longer its */
    else if (r == 0)
        *ret = fresh;
    kp_free(host);
    return r;
}

/* The host nc holds (resume), read fresh: the one its hint names, else the one the store says
 * it holds. -ENOENT: none. */
static int find_held(struct kp_ssh_provider *p, struct kp_client *c, const char *name,
                     const char *uid, struct kp_entry **ret)
{
    struct kp_store_list l = {0};
    struct kp_error e = KP_ERROR_INIT;
    int r;

    if ((r = find_hinted(p, c, name, uid, ret)) != -ENOENT)
        return r;
    if ((r = kp_store_list(p->hosts, &l)) < 0)
        return r;
    r = -ENOENT;
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_sshhost_view *h = kp_sshhost_view(l.v[i]);
        struct kp_entry *fresh = NULL;

        if (!kp_streq(h->e.ns, p->pool_ns) || !kp_claim_held_by(h, name, uid))
            continue;
        r = kp_claim_read_api(c, h->e.ns, h->e.name, &fresh, &e);
        if (r == 0 && !kp_claim_held_by(kp_sshhost_view(fresh), name, uid)) {
            fresh = kp_entry_unref(fresh);
            r = -ENOENT;
        }
        if (r != -ENOENT) {
            if (r == 0)
                *ret = fresh;
            break;
        }
    }
    kp_error_done(&e);
    kp_store_list_free(&l);
    return r;
}

static int64_t type_price(const struct kp_instance_type *it)
{
    int64_t pr = kp_instance_type_price(it);

    return pr < 0 ? INT64_MAX : pr;
}

static int type_cmp(const void *a, const void *b)
{
    const struct kp_instance_type *x = *(const struct kp_instance_type *const *)a;
    const struct kp_instance_type *y = *(const struct kp_instance_type *const *)b;
    int64_t px = type_price(x), py = type_price(y);

    if (px != py)
        return px < py ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Claims a host of the cheapest fitting class. -ENOSPC when none. *ret_type: index in types. */
static int claim_new(struct kp_ssh_provider *p, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, const struct kp_sshnodeclass_view *ncl,
                     const struct kp_instance_catalog *types, struct kp_entry **ret_host,
                     size_t *ret_lost, struct kp_error *e)
{
    const struct kp_instance_type **fit = NULL;
    const struct kp_sshhost_view **v = NULL;
    struct kp_store_list l = {0};
    struct kp_claim_io io = kp_claim_io_api(c);
    size_t nfit = 0, lost_total = 0;
    int r;

    fit = kp_calloc(types->n ? types->n : 1, sizeof(*fit));
    if (!fit)
        return -ENOMEM;
    for (size_t i = 0; i < types->n; i++)
        if (kp_inventory_fits(&types->v[i], nc) && kp_instance_type_price(&types->v[i]) >= 0)
            fit[nfit++] = &types->v[i];
    /* Cheapest first; types are already sorted by name, so ties stay stable. */
    qsort(fit, nfit, sizeof(*fit), type_cmp);
    if ((r = hosts_snapshot(p, &l, &v)) < 0)
        goto out;
    r = -ENOSPC;
    for (size_t i = 0; i < nfit && r == -ENOSPC; i++) {
        const struct kp_sshhost_view **cands = NULL;
        size_t ncands = 0, lost = 0;

        if ((r = kp_claim_candidates(ncl, p->pool_ns, fit[i]->name, v, l.n, &cands, &ncands)) < 0)
            break;
        r = kp_claim_first(&io, cands, ncands, nc->e.name, nc->e.uid, ret_host, &lost, e);
        lost_total += lost;
        kp_free(cands);
    }
out:
    *ret_lost = lost_total;
    kp_free(v);
    kp_store_list_free(&l);
    kp_free(fit);
    return r;
}

/* The Node an Adopt join registered, from the Node informer's store (indexes.h): one whose
 * InternalIP (or any address) is the host's node address and that has a providerID, which we
 * adopt. *ret_pid: that providerID. 0, -ENOENT (not yet), -ENOMEM. A store without the indexes
 * is scanned whole. */
static bool node_adoptable(const struct kp_node_view *nv, const char *ip)
{
    if (!nv->provider_id || !*nv->provider_id)
        return false;
    for (size_t j = 0; j < nv->n_addresses; j++)
        if (kp_streq(nv->addresses[j], ip))
            return true;
    return kp_streq(nv->internal_ip, ip);
}

static int adopted_in_store(struct kp_store *nodes, const char *ip, char **ret_pid)
{
    struct kp_store_list l = {0};
    int r;

    r = kp_store_by_index(nodes, KP_SSH_INDEX_NODE_IP, ip, &l);
    if (r == -ENOENT) /* no such index: a store set up without indexes.h */
        r = kp_store_list(nodes, &l);
    if (r < 0)
        return r;
    r = -ENOENT;
    for (size_t i = 0; i < l.n && r == -ENOENT; i++) {
        const struct kp_node_view *nv = kp_node_view(l.v[i]);

        if (node_adoptable(nv, ip)) {
            *ret_pid = kp_strdup(nv->provider_id);
            r = *ret_pid ? 0 : -ENOMEM;
        }
    }
    kp_store_list_free(&l);
    return r;
}

/* The same over the API, for a provider built without a Node store (tools, older tests). */
struct adopt_scan {
    const char *ip;
    char *pid;
};

static int adopt_page(const struct kp_list_page *page, void *userdata)
{
    struct adopt_scan *s = userdata;

    for (size_t i = 0; i < kp_json_array_size(page->items) && !s->pid; i++) {
        struct kp_entry *e = NULL;

        if (kp_node_project(kp_json_array_at(page->items, i), &e) < 0)
            continue;
        if (node_adoptable(kp_node_view(e), s->ip)) {
            s->pid = kp_strdup(kp_node_view(e)->provider_id);
            if (!s->pid) {
                kp_entry_unref(e);
                return -ENOMEM;
            }
        }
        kp_entry_unref(e);
    }
    return 0;
}

static int adopted_in_api(struct kp_client *c, const char *ip, char **ret_pid)
{
    struct kp_error e = KP_ERROR_INIT;
    struct adopt_scan s = {.ip = ip};
    int r;

    r = kp_client_list(c, &KP_RES_NODE, NULL, NULL, adopt_page, &s, NULL, &e);
    if (r == 0 && !s.pid)
        r = -ENOENT;
    if (r == 0)
        *ret_pid = s.pid;
    else
        kp_free(s.pid);
    kp_error_done(&e);
    return r;
}

/* Waits for the Node an Adopt join registers, until the registration timeout or ctx ends it.
 * With a Node store this reads memory the Node informer keeps current and sleeps until the
 * store changes (waking every KP_SSH_REGISTRATION_CTX_RECHECK_USEC to look at ctx), so a check
 * costs no API request; without one it asks the API server every reg_poll. -ETIMEDOUT, or ctx's
 * error. */
static int wait_adopted(struct kp_ssh_provider *p, const struct kp_ctx *ctx, struct kp_client *c,
                        const struct kp_sshhost_view *h, char **ret_pid)
{
    struct kp_deadline dl = kp_deadline_min(kp_deadline_in(p->reg_timeout), kp_ctx_deadline(ctx));
    const char *ip = kp_sshhost_node_ip(h);
    uint64_t next_ask = 0;

    for (;;) {
        /* Read before the check: a change between the check and the wait ends the wait. */
        uint64_t gen = p->nodes ? kp_store_generation(p->nodes) : 0;
        int r = -ENOENT;

        if (p->nodes)
            r = adopted_in_store(p->nodes, ip, ret_pid);
        else if (kp_mono_usec() >= next_ask) {
            r = adopted_in_api(c, ip, ret_pid);
            next_ask = kp_mono_usec() + p->reg_poll;
        }
        if (r == 0 || r == -ENOMEM)
            return r;
        /* Other errors are not a verdict: the API server may be restarting. */
        if ((r = kp_ctx_err(ctx)) < 0)
            return r;
        if (kp_deadline_expired(dl))
            return -ETIMEDOUT;
        if (p->nodes)
            (void)kp_store_wait(
                p->nodes, gen,
                kp_deadline_min(dl, kp_deadline_in(KP_SSH_REGISTRATION_CTX_RECHECK_USEC)), NULL);
        else
            kp_sleep_usec(KP_MIN(p->reg_poll, KP_SSH_REGISTRATION_CTX_RECHECK_USEC));
    }
}

/* --- SSH jobs: a launch's install and join, a Delete's leave ------------------------------------ */

/* What a phase said, run here or on the pool: its result, its text (owned, redacted), the
 * fingerprint install learned when none was pinned, whether its context ended it (cancelled,
 * its deadline), and its wall time. */
struct phase_out {
    int r;
    int ctx_err;
    char *msg;
    char fp[KP_SSH_FP_SIZE];
    uint64_t usec;
};

/* One phase on a pool thread: what the reconcile prepared (the profile, the key, the
 * environment: the API half), and what the phase said. */
struct phase_job {
    struct kp_entry *host; /* the host as it was when the job was submitted */
    enum kp_profile_phase phase;
    char *marker;               /* install: the <profile>@<version> it installs */
    struct kp_hostio_leave run; /* profile, creds and environment, whatever the phase */
    const struct kp_ssh_observer *obs;
    struct phase_out out; /* written by the job */
};

/* Runs phase on host with run under ctx and says how it went in *out. Any thread. */
static void phase_run(const struct kp_ctx *ctx, struct kp_entry *host, enum kp_profile_phase phase,
                      struct kp_hostio_leave *run, const struct kp_ssh_observer *obs,
                      struct phase_out *out)
{
    uint64_t t0 = kp_mono_usec();

    out->r = kp_hostio_run_phase(ctx, kp_sshhost_view(host), &run->cr,
                                 kp_sshjoinprofile_view(run->profile), phase, run->env, obs,
                                 &out->msg, phase == KP_PROFILE_INSTALL ? out->fp : NULL);
    out->ctx_err = out->r < 0 ? kp_ctx_err(ctx) : 0;
    out->usec = kp_mono_usec() - t0;
}

static void phase_job_free(void *arg)
{
    struct phase_job *j = arg;

    if (!j)
        return;
    kp_hostio_leave_done(&j->run);
    kp_entry_unref(j->host);
    kp_free(j->marker);
    kp_free(j->out.msg);
    kp_free(j);
}

static int phase_job_run(void *arg, const struct kp_ctx *ctx)
{
    struct phase_job *j = arg;

    phase_run(ctx, j->host, j->phase, &j->run, j->obs, &j->out);
    kp_hostio_leave_done(&j->run); /* the key and the token go now, not when it is read */
    return j->out.r;
}

static enum kp_ssh_job_kind phase_kind(enum kp_profile_phase phase)
{
    switch (phase) {
    case KP_PROFILE_INSTALL:
        return KP_SSH_JOB_INSTALL;
    case KP_PROFILE_JOIN:
        return KP_SSH_JOB_JOIN;
    default:
        return KP_SSH_JOB_LEAVE;
    }
}

enum job_found { JOB_NONE, JOB_RUNNING, JOB_DONE, JOB_LEAVING };

/* key's job on the pool, for phase on host (marker: the install's <profile>@<version>, else
 * NULL): JOB_RUNNING while one for phase, or an earlier launch phase, is queued or runs;
 * JOB_DONE when one has ended, its answer moved into *out; JOB_LEAVING when a leave is the
 * key's job (a launch phase then never starts); JOB_NONE when there is none. A finished result
 * for another launch phase, host or marker answers an earlier step than this one and is
 * dropped. */
static enum job_found job_take(struct kp_ssh_provider *p, const char *key,
                               enum kp_profile_phase phase, const char *host, const char *marker,
                               struct phase_out *out)
{
    enum kp_ssh_job_kind other = KP_SSH_JOB_KIND_N;
    struct phase_job *j;
    bool other_finished = false;
    void *arg = NULL;
    int r;

    r = kp_ssh_jobs_take_kind(p->jobs, key, phase_kind(phase), &arg, NULL, &other, &other_finished);
    if (r == -EBUSY) {
        if (other == KP_SSH_JOB_LEAVE)
            return JOB_LEAVING;
        if (!other_finished)
            return JOB_RUNNING;
        kp_log_info("SSH job result dropped: it answers an earlier step", KP_LF("key", key),
                    KP_LF("job", kp_ssh_job_kind_name(other)), KP_LF("host", host));
        kp_ssh_jobs_forget(p->jobs, key);
        return JOB_NONE;
    }
    if (r == -EINPROGRESS)
        return JOB_RUNNING;
    if (r < 0)
        return JOB_NONE;
    j = arg;
    if (!j || !kp_streq(kp_sshhost_view(j->host)->e.name, host) ||
        (marker && !kp_streq(j->marker, marker))) {
        kp_log_info("SSH job result dropped: it answers an earlier step", KP_LF("key", key),
                    KP_LF("job", kp_profile_phase_name(phase)), KP_LF("host", host));
        phase_job_free(j);
        return JOB_NONE;
    }
    *out = j->out;
    j->out.msg = NULL;
    phase_job_free(j);
    return JOB_DONE;
}

/* Starts phase on host with what run holds (marker: the install's <profile>@<version>, else
 * NULL). Without a pool the phase runs here under ctx (run stays the caller's) and 0 comes back
 * with *out filled. With one, run moves to the job once it is allocated, and the job is
 * submitted under key, bounded by ctx's deadline (the launch's; none for a leave, which its
 * profile's timeout bounds), and -EINPROGRESS comes back (err: IN_PROGRESS). A full queue
 * answers IN_PROGRESS too, without a job (the caller asks again after its poll); another job
 * under the key, or a stopped pool, is a RETRYABLE error. */
static int phase_start(struct kp_ssh_provider *p, const struct kp_ctx *ctx, const char *key,
                       struct kp_entry *host, enum kp_profile_phase phase, const char *marker,
                       struct kp_hostio_leave *run, struct phase_out *out,
                       struct kp_provider_err *err)
{
    struct phase_job *j;
    struct kp_ssh_job_spec spec = {
        .key = key, .kind = phase_kind(phase), .fn = phase_job_run, .free_arg = phase_job_free};
    struct kp_deadline d = kp_ctx_deadline(ctx);
    const char *name = kp_sshhost_view(host)->e.name;
    int r;

    if (!p->jobs) {
        phase_run(ctx, host, phase, run, p->observer, out);
        return 0;
    }
    if (!(j = kp_calloc(1, sizeof(*j))) || (marker && !(j->marker = kp_strdup(marker)))) {
        kp_free(j);
        return kp_provider_err_set(err, -ENOMEM, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
    }
    j->host = kp_entry_ref(host);
    j->phase = phase;
    j->run = *run;
    memset(run, 0, sizeof(*run));
    j->obs = p->observer;
    if (phase != KP_PROFILE_LEAVE && d.at != KP_USEC_INFINITY)
        spec.deadline = d;
    spec.arg = j;
    r = kp_ssh_jobs_submit(p->jobs, &spec);
    if (r == 0) {
        kp_log_info("SSH phase queued", KP_LF("host", name), KP_LF("key", key),
                    KP_LF("phase", kp_profile_phase_name(phase)));
        return kp_provider_err_set(err, -EINPROGRESS, KP_PROVIDER_ERR_IN_PROGRESS, NULL,
                                   "%s on SSHHost %s runs on the SSH job pool",
                                   kp_profile_phase_name(phase), name);
    }
    phase_job_free(j);
    switch (r) {
    case -EAGAIN:
        kp_log_warn_rl("launch-jobs-full", "SSH job queue full; the phase waits for a later call",
                       KP_LF("host", name), KP_LF("phase", kp_profile_phase_name(phase)));
        return kp_provider_err_set(err, -EINPROGRESS, KP_PROVIDER_ERR_IN_PROGRESS, NULL,
                                   "the SSH job queue is full; %s on SSHHost %s waits",
                                   kp_profile_phase_name(phase), name);
    case -EEXIST:
        return kp_provider_err_set(err, -EAGAIN, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                   "another SSH job of this NodeClaim is still on the pool");
    case -ESHUTDOWN:
        return kp_provider_err_set(err, -ECANCELED, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                   "the SSH job pool is stopped (not leading, or stopping)");
    default:
        return kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "SSH job: %s",
                                   kp_strerror(r));
    }
}

/* A job ended (a pool thread): tell the watchers which NodeClaim it was for. */
static void jobs_done(void *owner, const char *key)
{
    struct kp_ssh_provider *p = owner;
    const char *slash = strchr(key, '/');
    char *name = slash ? kp_strndup(key, (size_t)(slash - key)) : NULL;

    if (!name)
        return; /* out of memory: the core's poll comes back for it */
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_progress; i++)
        p->progress[i].fn(p->progress[i].ctx, name);
    pthread_mutex_unlock(&p->mu);
    kp_free(name);
}

static int op_watch_progress(void *self, void (*fn)(void *ctx, const char *nodeclaim), void *ctx)
{
    struct kp_ssh_provider *p = self;
    struct progress_watch *v;

    if (!fn)
        return -EINVAL;
    pthread_mutex_lock(&p->mu);
    v = kp_reallocarray(p->progress, p->n_progress + 1, sizeof(*v));
    if (v) {
        p->progress = v;
        v[p->n_progress++] = (struct progress_watch){.fn = fn, .ctx = ctx};
    }
    pthread_mutex_unlock(&p->mu);
    return v ? 0 : -ENOMEM;
}

static void op_unwatch_progress(void *self, void *ctx)
{
    struct kp_ssh_provider *p = self;
    size_t n = 0;

    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_progress; i++)
        if (p->progress[i].ctx != ctx)
            p->progress[n++] = p->progress[i];
    p->n_progress = n;
    pthread_mutex_unlock(&p->mu);
}

int kp_ssh_provider_start(struct kp_ssh_provider *p, const struct kp_ctx *parent)
{
    return p->jobs ? kp_ssh_jobs_start(p->jobs, parent) : 0;
}

void kp_ssh_provider_stop(struct kp_ssh_provider *p)
{
    if (p && p->jobs)
        kp_ssh_jobs_stop(p->jobs);
}

/* --- Create ------------------------------------------------------------------------------------ */

/* Releases the claim after a failure and logs the decision once. */
static void release_after(struct kp_ssh_provider *p, struct kp_client *c,
                          const struct kp_nodeclaim_view *nc, struct kp_entry *host, bool healthy,
                          const char *why)
{
    struct kp_claim_io io = kp_claim_io_api(c);
    struct kp_error e = KP_ERROR_INIT;
    const struct kp_sshhost_view *h = kp_sshhost_view(host);
    int r;

    if (h->bootstrap_token_id && kp_token_delete(c, h->bootstrap_token_id, &e) < 0)
        kp_log_warn("bootstrap token not deleted; the probe collects it", KP_LF("host", h->e.name),
                    KP_LF("token_id", h->bootstrap_token_id));
    kp_error_done(&e);
    r = kp_claim_release(&io, h, nc->e.name, nc->e.uid, healthy, why, NULL, &e);
    if (r == 0)
        held_set(p, nc->e.name, nc->e.uid, NULL);
    if (r < 0)
        kp_log_warn_errno(r, "host release failed; stale-claim release will recover it",
                          KP_LF("host", h->e.name), KP_LF("nodeclaim", nc->e.name));
    else
        kp_log_info("host released", KP_LF("host", h->e.name), KP_LF("nodeclaim", nc->e.name),
                    KP_LF("state", healthy ? "Available" : "Unhealthy"), KP_LF("reason", why));
    host_event(p, h, !healthy, healthy ? "Released" : "JoinFailed", "Release", why);
    kp_error_done(&e);
}

/* A phase the runner refused before dialing (-EINVAL: a variable a Verified host's envelope
 * cannot carry, an invalid SSH target, a signature that stopped verifying since the gate):
 * the user's configuration, not the host, so the host goes back Available (the reference's
 * configError). */
static void config_refused(struct kp_ssh_provider *p, struct kp_client *c,
                           const struct kp_nodeclaim_view *nc, struct kp_entry *host,
                           const char *msg, struct kp_provider_err *err)
{
    kp_provider_err_set(err, -EINVAL, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_CONFIG, "%s",
                        msg ? msg : "configuration error");
    release_after(p, c, nc, host, true, msg ? msg : "configuration error");
}

/* Replaces *host by the result of a holder write (claim.h); maps the errors for Create. */
static int holder_write(struct kp_client *c, const struct kp_nodeclaim_view *nc,
                        struct kp_entry **host, const struct kp_claim_status *st,
                        struct kp_provider_err *err)
{
    struct kp_claim_io io = kp_claim_io_api(c);
    struct kp_error e = KP_ERROR_INIT;
    struct kp_entry *got = NULL;
    int r;

    r = kp_claim_update(&io, kp_sshhost_view(*host), nc->e.name, nc->e.uid, st, &got, &e);
    if (r == 0) {
        kp_entry_unref(*host);
        *host = got;
    } else if (r == -ESTALE || r == -ENOENT)
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL,
                            "host %s: claim changed while writing status",
                            kp_sshhost_view(*host)->e.name);
    else
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "host %s status write: %s",
                            kp_sshhost_view(*host)->e.name, e.message ? e.message : kp_strerror(r));
    kp_error_done(&e);
    return r;
}

/* Create met a Delete: the host is leaving (or its leave is on the pool). */
static int leaving(struct kp_provider_err *err, const char *host, const char *nodeclaim)
{
    return kp_provider_err_set(err, -EAGAIN, KP_PROVIDER_ERR_RETRYABLE, NULL,
                               "SSHHost %s is leaving: NodeClaim %s is being deleted", host,
                               nodeclaim);
}

/* What Create answers when job_take found the host leaving or the phase what (its name) still
 * on the pool; 0 to go on. */
static int job_pending(enum job_found found, const char *what, const char *host,
                       const char *nodeclaim, struct kp_provider_err *err)
{
    if (found == JOB_LEAVING)
        return leaving(err, host, nodeclaim);
    if (found == JOB_RUNNING)
        return kp_provider_err_set(err, -EINPROGRESS, KP_PROVIDER_ERR_IN_PROGRESS, NULL,
                                   "%s on SSHHost %s runs on the SSH job pool", what, host);
    return 0;
}

/* A phase that its context ended (ctx_err: the caller's, or the job's) is not the host's fault:
 * the claim stays (the next Create resumes it), and the error is RETRYABLE. */
static int phase_failed(int ctx_err, int r, const char *msg, struct kp_provider_err *err)
{
    if (ctx_err == 0)
        return 0;
    return kp_provider_err_set(err, ctx_err, KP_PROVIDER_ERR_RETRYABLE, NULL, "%s: %s",
                               ctx_err == -ECANCELED ? "cancelled" : "deadline passed",
                               msg ? msg : kp_strerror(r));
}

/* Mints the join's bootstrap token for the claim on *host: collects an earlier attempt's, then
 * records the new id on the host BEFORE its Secret exists. A crash between the two leaves an id
 * that names nothing (deleting it later is a no-op), never a live token that no host points at.
 * An id collision (-EEXIST on create) takes a fresh id. */
static int mint_token(struct kp_ssh_provider *p, struct kp_client *c,
                      const struct kp_nodeclaim_view *nc, struct kp_entry **host,
                      char tok_id[KP_TOKEN_ID_SIZE], struct kp_secret **ret_token,
                      struct kp_provider_err *err)
{
    struct kp_error e = KP_ERROR_INIT;
    struct kp_secret *token = NULL;
    int r = -EEXIST;

    if (kp_sshhost_view(*host)->bootstrap_token_id &&
        kp_token_delete(c, kp_sshhost_view(*host)->bootstrap_token_id, &e) < 0)
        kp_log_warn("old bootstrap token not deleted", KP_LF("host", (*host)->name));
    kp_error_done(&e);
    for (int attempt = 0; attempt < 3 && r == -EEXIST; attempt++) {
        struct kp_claim_status st = {0};

        token = kp_secret_free(token);
        if ((r = kp_token_generate(tok_id, &token)) < 0) {
            kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                "generating bootstrap token: %s", kp_strerror(r));
            goto out;
        }
        st.bootstrap_token_id = tok_id;
        if ((r = holder_write(c, nc, host, &st, err)) < 0)
            goto out;
        kp_error_done(&e);
        r = kp_token_create(c, token, p->bootstrap_group, nc->e.name, &e);
    }
    if (r < 0) {
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "creating bootstrap token: %s",
                            e.message ? e.message : kp_strerror(r));
        goto out;
    }
    *ret_token = token;
    token = NULL;
out:
    kp_secret_free(token);
    kp_error_done(&e);
    return r;
}

/* What a phase that ended with out means for the launch: 0 when it succeeded; else the error,
 * with err set and, when the host is at fault or the configuration is, the claim released. */
static int phase_verdict(struct kp_ssh_provider *p, struct kp_client *c,
                         const struct kp_nodeclaim_view *nc, struct kp_entry *host,
                         enum kp_profile_phase phase, const struct phase_out *out,
                         struct kp_provider_err *err)
{
    if (out->r >= 0)
        return 0;
    /* A session the write fence closed (this replica stopped leading) is ended as by its
     * context: the claim stays for the next leader. */
    if (phase_failed(out->r == -KP_ENOTLEADER && !out->ctx_err ? -ECANCELED : out->ctx_err, out->r,
                     out->msg, err) < 0) {
        if (phase == KP_PROFILE_JOIN)
            kp_log_info("join cancelled; the claim stays for the next Create",
                        KP_LF("host", host->name), KP_LF("nodeclaim", nc->e.name));
        return out->ctx_err ? out->ctx_err : -ECANCELED;
    }
    if (out->r == -EINVAL) { /* refused before dialing: the host never saw it */
        config_refused(p, c, nc, host, out->msg, err);
        return out->r;
    }
    kp_provider_err_set(err, out->r, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_JOIN_FAILED, "%s",
                        out->msg ? out->msg : kp_strerror(out->r));
    if (phase == KP_PROFILE_JOIN)
        kp_log_warn_errno(out->r, "join failed", KP_LF("host", host->name),
                          KP_LF("nodeclaim", nc->e.name));
    release_after(p, c, nc, host, false,
                  err && err->message        ? err->message
                  : phase == KP_PROFILE_JOIN ? "join phase failed"
                                             : "install phase failed");
    return out->r;
}

int kp_ssh_provider_create(struct kp_ssh_provider *p, const struct kp_ctx *ctx, struct kp_client *c,
                           const struct kp_nodeclaim_view *nc, struct kp_provider_instance *ret,
                           struct kp_ssh_create_report *report, struct kp_provider_err *err)
{
    struct kp_ssh_create_report rep = {0};
    struct kp_entry *ncl_e = NULL, *pr_e = NULL, *host = NULL;
    struct kp_instance_catalog *types = NULL;
    const struct kp_instance_type *it = NULL;
    const struct kp_sshnodeclass_view *ncl;
    struct kp_hostio_creds cr = {0};
    struct kp_hostio_join_secret js = {0};
    struct kp_hostio_leave run = {0};
    struct phase_out out = {0};
    struct kp_secret *ca = NULL, *token = NULL;
    char *endpoint = NULL;
    struct kp_error e = KP_ERROR_INIT;
    char *marker = NULL, *msg = NULL, *static_pid = NULL, *pid = NULL, *key = NULL;
    char hash[17];
    char tok_id[KP_TOKEN_ID_SIZE] = "";
    enum job_found found = JOB_NONE;
    uint64_t t0 = kp_mono_usec(), t;
    bool adopt, join_unread = false;
    int r;

    if ((r = kp_provider_ctx_check(ctx, err, "claiming a host")) < 0)
        goto out;
    if ((r = requests_check(nc, err)) < 0)
        goto out;
    if (!(key = claim_key(nc->e.name, nc->e.uid))) {
        r = kp_provider_err_set(err, -ENOMEM, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
        goto out;
    }
    r = nodeclass_for(p, nc, &ncl_e, err);
    if (r >= 0 && !ncl_e)
        r = -EINVAL; /* every success sets it; said here for the analyzer */
    if (r < 0)
        goto out;
    ncl = kp_sshnodeclass_view(ncl_e);
    adopt = ncl->provider_id_source == KP_PROVIDER_ID_ADOPT;
    if ((r = profile_for(p, ncl, &pr_e, &marker, err)) < 0)
        goto out;
    if ((r = kp_ssh_nodeclass_hash(ncl, hash)) < 0 ||
        (r = catalog_for(p, ncl->e.name, &types)) < 0) {
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "instance types");
        goto out;
    }

    /* Resume or claim. */
    r = find_held(p, c, nc->e.name, nc->e.uid, &host);
    if (r == 0)
        rep.resumed = true;
    else if (r == -ENOENT) {
        r = claim_new(p, c, nc, ncl, types, &host, &rep.races_lost, &e);
        if (r == 0)
            held_set(p, nc->e.name, nc->e.uid, host->name);
        if (r == -ENOSPC) {
            kp_provider_err_set(err, r, KP_PROVIDER_ERR_INSUFFICIENT_CAPACITY, NULL,
                                "no Available SSHHost for NodeClaim %s", nc->e.name);
            goto out;
        }
    }
    if (r < 0) {
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "claim: %s",
                            e.message ? e.message : kp_strerror(r));
        goto out;
    }
    {
        const struct kp_sshhost_view *h = kp_sshhost_view(host);

        if (kp_strscpy(rep.host, sizeof(rep.host), h->e.name) < 0) /* names are <= 253 */
            rep.host[0] = '\0';
        it = kp_instance_catalog_find(types, kp_sshhost_class(h));
        if (!rep.resumed) {
            kp_log_info("host claimed", KP_LF("host", h->e.name), KP_LF("nodeclaim", nc->e.name),
                        KP_LF("class", kp_sshhost_class(h)),
                        KP_LF("races_lost", (uint64_t)rep.races_lost));
            host_event(p, h, false, "Claimed", "Claim", nc->e.name);
        }
        static_pid = kp_hostio_static_provider_id(h->e.ns, h->e.name);
        if (!static_pid) {
            r = kp_provider_err_set(err, -ENOMEM, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
            goto out;
        }
        /* A phase still on the pool: nothing to read or decide yet (no Secret is fetched). Its
         * Node may have registered already (the host controller then wrote the providerID):
         * launched still means the join script has exited, and a finished join's result is
         * read below, in order. */
        if (rep.resumed && p->jobs) {
            enum kp_ssh_job_kind kind;
            bool finished = true;

            if (kp_ssh_jobs_peek(p->jobs, key, &kind, &finished) == 0) {
                if (!finished && kind != KP_SSH_JOB_LEAVE) {
                    r = job_pending(JOB_RUNNING, kp_ssh_job_kind_name(kind), h->e.name, nc->e.name,
                                    err);
                    goto out;
                }
                join_unread = finished && kind == KP_SSH_JOB_JOIN;
            }
        }
        /* A resumed Create whose join already finished (the providerID is written at join exit,
         * or by registration for Adopt) is done, whether or not its Node registered since. */
        if (rep.resumed && !join_unread &&
            (h->state == KP_HOST_IN_USE || h->state == KP_HOST_CLAIMED) && h->provider_id &&
            *h->provider_id) {
            rep.claim_usec = kp_mono_usec() - t0;
            r = instance_fill(h, nc->e.name, h->provider_id, it, hash, ret);
            if (r < 0)
                kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
            goto out;
        }
        /* A Delete has begun (a termination ahead of this worker's cache): no phase may start
         * on a host that is leaving. */
        if (rep.resumed && h->state == KP_HOST_LEAVING) {
            r = leaving(err, h->e.name, nc->e.name);
            goto out;
        }
    }
    rep.claim_usec = kp_mono_usec() - t0;
    if ((r = kp_provider_ctx_check(ctx, err, "reading the host's Secrets")) < 0)
        goto out;

    /* Configuration: errors here are the user's to fix and release the host Available. A
     * Verified host's phases pass the controller's signature gate here, before any dial, so a
     * profile that cannot run there never reaches the host. */
    if ((!kp_streq(kp_sshhost_view(host)->installed_profile, marker) &&
         (r = kp_hostio_verified_check(kp_sshhost_view(host), kp_sshjoinprofile_view(pr_e),
                                       KP_PROFILE_INSTALL, &msg)) < 0) ||
        (r = kp_hostio_verified_check(kp_sshhost_view(host), kp_sshjoinprofile_view(pr_e),
                                      KP_PROFILE_JOIN, &msg)) < 0 ||
        (r = kp_hostio_load_creds(c, kp_sshhost_view(host), &cr, &msg)) < 0 ||
        (r = kp_hostio_load_cluster(c, ncl, &ca, &endpoint, &msg)) < 0 ||
        (r = kp_hostio_load_join_secret(c, kp_sshhost_view(host)->e.ns, ncl, &js, &msg)) < 0) {
        if (r == -EINVAL) {
            kp_provider_err_set(err, r, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_CONFIG, "%s",
                                msg ? msg : "configuration error");
            release_after(p, c, nc, host, true, msg ? msg : "configuration error");
        } else
            kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                "reading Secrets and cluster-info: %s", kp_strerror(r));
        goto out;
    }

    /* Install once per <profile>@<version>: run here, or on the pool (a finished install job
     * of this claim on this host answers; one still running answers IN_PROGRESS). */
    t = kp_mono_usec();
    if (!kp_streq(kp_sshhost_view(host)->installed_profile, marker)) {
        struct kp_hostio_join_ctx jc = {
            .nc = nc, .ncl = ncl, .it = it, .ca = ca, .endpoint = endpoint, .js = &js};
        struct kp_claim_status st = {.installed_profile = marker};

        if (p->jobs)
            found = job_take(p, key, KP_PROFILE_INSTALL, rep.host, marker, &out);
        if ((r = job_pending(found, "install", rep.host, nc->e.name, err)) < 0)
            goto out;
        if (found == JOB_NONE) {
            if ((r = kp_hostio_build_env(kp_sshhost_view(host), KP_ENV_INSTALL, &jc, &run.env,
                                         &msg)) < 0) {
                kp_provider_err_set(err, r, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_CONFIG, "%s",
                                    msg ? msg : kp_strerror(r));
                release_after(p, c, nc, host, true, msg ? msg : kp_strerror(r));
                goto out;
            }
            run.profile = kp_entry_ref(pr_e);
            /* Inline, the creds are lent (the join needs them next); to the pool they go, since
             * this call then ends. */
            run.cr = cr;
            if (p->jobs)
                memset(&cr, 0, sizeof(cr));
            r = phase_start(p, ctx, key, host, KP_PROFILE_INSTALL, marker, &run, &out, err);
            if (!p->jobs)
                memset(&run.cr, 0, sizeof(run.cr));
            kp_hostio_leave_done(&run);
            if (r < 0)
                goto out;
        }
        if ((r = phase_verdict(p, c, nc, host, KP_PROFILE_INSTALL, &out, err)) < 0)
            goto out;
        if (out.fp[0])
            st.host_key_fingerprint = out.fp;
        if ((r = holder_write(c, nc, &host, &st, err)) < 0)
            goto out;
        rep.installed = true;
        rep.install_usec = out.usec;
        kp_free(out.msg);
        out.msg = NULL;
    }

    /* Join: a finished join job of this claim on this host answers (its token was minted when
     * it was submitted); one still running answers IN_PROGRESS; else mint, then run or submit. */
    t = kp_mono_usec();
    found = p->jobs ? job_take(p, key, KP_PROFILE_JOIN, rep.host, NULL, &out) : JOB_NONE;
    if ((r = job_pending(found, "join", rep.host, nc->e.name, err)) < 0)
        goto out;
    if (found == JOB_DONE) {
        const char *id = kp_sshhost_view(host)->bootstrap_token_id;

        if (id && kp_strscpy(tok_id, sizeof(tok_id), id) < 0)
            tok_id[0] = '\0';
    } else {
        struct kp_hostio_join_ctx jc = {
            .nc = nc, .ncl = ncl, .it = it, .ca = ca, .endpoint = endpoint, .js = &js};

        if ((r = kp_provider_ctx_check(ctx, err, "minting the bootstrap token")) < 0)
            goto out;
        if ((r = mint_token(p, c, nc, &host, tok_id, &token, err)) < 0)
            goto out;
        /* A Delete that began meanwhile (its Leaving is what the token write answered) wins:
         * no join starts on a host that is leaving. */
        if (kp_sshhost_view(host)->state == KP_HOST_LEAVING) {
            r = leaving(err, rep.host, nc->e.name);
            goto out;
        }
        rep.token_usec = kp_mono_usec() - t;
        jc.token = token;
        if ((r = kp_hostio_build_env(kp_sshhost_view(host), KP_ENV_JOIN, &jc, &run.env, &msg)) <
            0) {
            kp_provider_err_set(err, r, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_CONFIG, "%s",
                                msg ? msg : kp_strerror(r));
            release_after(p, c, nc, host, true, msg ? msg : kp_strerror(r));
            goto out;
        }
        run.profile = kp_entry_ref(pr_e);
        run.cr = cr; /* the last phase of this call: the creds go with it */
        memset(&cr, 0, sizeof(cr));
        if ((r = phase_start(p, ctx, key, host, KP_PROFILE_JOIN, NULL, &run, &out, err)) < 0)
            goto out;
    }
    if ((r = phase_verdict(p, c, nc, host, KP_PROFILE_JOIN, &out, err)) < 0)
        goto out;
    rep.join_usec = out.usec;

    /* Launched. Static: the providerID is ours to say, so it is written now and Create returns;
     * the host stays Claimed until its Node registers, when the host controller marks it InUse
     * and collects the token (hostctl.c), and waiting for the Node is the core's (Karpenter's
     * registration timeout deletes a NodeClaim whose Node never comes, and Delete then runs
     * leave). Adopt: the providerID is the registering Node's own, so Create must wait for it. */
    if (!adopt) {
        struct kp_claim_status st = {.provider_id = static_pid};

        if ((r = holder_write(c, nc, &host, &st, err)) < 0)
            goto out;
        pid = kp_strdup(static_pid);
        if (!pid) {
            r = kp_provider_err_set(err, -ENOMEM, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
            goto out;
        }
    } else {
        t = kp_mono_usec();
        r = wait_adopted(p, ctx, c, kp_sshhost_view(host), &pid);
        if (r == -ECANCELED || (r == -ETIMEDOUT && kp_ctx_err(ctx) < 0)) {
            kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                "%s while waiting for the adopting Node to register",
                                r == -ECANCELED ? "cancelled" : "deadline passed");
            goto out;
        }
        if (r < 0) {
            kp_provider_err_set(err, r, KP_PROVIDER_ERR_CREATE, KP_PROVIDER_REASON_ADOPT_FAILED,
                                "providerID adoption failed: no Node registered within %llus",
                                (unsigned long long)(p->reg_timeout / KP_USEC_PER_SEC));
            release_after(p, c, nc, host, false, err ? err->message : "adoption failed");
            goto out;
        }
        /* The Node exists, so the token has done its work. */
        if (tok_id[0] && kp_token_delete(c, tok_id, &e) < 0)
            kp_log_warn("bootstrap token not deleted; the probe collects it",
                        KP_LF("host", rep.host));
        kp_error_done(&e);
        {
            struct kp_claim_status st = {.state = KP_HOST_IN_USE,
                                         .set_state = true,
                                         .provider_id = pid,
                                         .adopted_provider_id = pid,
                                         .clear_bootstrap_token_id = true};

            if ((r = holder_write(c, nc, &host, &st, err)) < 0)
                goto out;
        }
        rep.registration_usec = kp_mono_usec() - t;
    }
    kp_log_info("host joined", KP_LF("host", rep.host), KP_LF("nodeclaim", nc->e.name),
                KP_LF("provider_id", pid), KP_LF("install_ms", rep.install_usec / 1000),
                KP_LF("join_ms", rep.join_usec / 1000),
                KP_LF("registration_ms", rep.registration_usec / 1000));
    host_event(p, kp_sshhost_view(host), false, "Joined", "Join", nc->e.name);
    if ((r = instance_fill(kp_sshhost_view(host), nc->e.name, pid, it, hash, ret)) < 0)
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "out of memory");
out:
    if (report) {
        *report = rep;
        if (!rep.host[0] && host &&
            kp_strscpy(report->host, sizeof(report->host), kp_sshhost_view(host)->e.name) < 0)
            report->host[0] = '\0';
    }
    kp_hostio_leave_done(&run);
    kp_free(out.msg);
    kp_secret_free(token);
    kp_free(endpoint);
    kp_secret_free(ca);
    kp_hostio_join_secret_done(&js);
    kp_hostio_creds_done(&cr);
    kp_error_done(&e);
    kp_free(key);
    kp_free(marker);
    kp_free(msg);
    kp_free(static_pid);
    kp_free(pid);
    kp_instance_catalog_unref(types);
    kp_entry_unref(host);
    kp_entry_unref(pr_e);
    kp_entry_unref(ncl_e);
    return r;
}

/* --- Delete, Get, List ------------------------------------------------------------------------- */

/* The host behind a providerID (fresh from the API server), or behind a claim when the
 * NodeClaim never got one. -ENOENT when none. */
static int resolve_host(struct kp_ssh_provider *p, struct kp_client *c, const char *provider_id,
                        const char *claim_name, const char *claim_uid, struct kp_entry **ret)
{
    struct kp_error e = KP_ERROR_INIT;
    struct kp_store_list l = {0};
    int r;

    if (provider_id && *provider_id) {
        const char *rest = kp_startswith(provider_id, KP_SSH_PROVIDER_ID_SCHEME);

        if (rest) {
            const char *slash = strchr(rest, '/');
            char *ns;

            if (!slash || slash == rest || !slash[1] || strchr(slash + 1, '/'))
                return -ENOENT;
            ns = kp_strndup(rest, (size_t)(slash - rest));
            if (!ns)
                return -ENOMEM;
            r = kp_claim_read_api(c, ns, slash + 1, ret, &e);
            kp_free(ns);
            kp_error_done(&e);
            return r;
        }
    } else if (!claim_name)
        return -ENOENT;
    if (claim_name && (r = find_hinted(p, c, claim_name, claim_uid, ret)) != -ENOENT)
        return r;
    if ((r = kp_store_list(p->hosts, &l)) < 0)
        return r;
    r = -ENOENT;
    for (size_t i = 0; i < l.n && r == -ENOENT; i++) {
        const struct kp_sshhost_view *h = kp_sshhost_view(l.v[i]);

        if (!kp_streq(h->e.ns, p->pool_ns))
            continue;
        /* By the providerID, or by the claim: the claim is written first, so a cache that has
         * not seen the providerID yet (a Delete right after an Adopt-mode Create) still finds
         * the host. What the API holds decides; the Delete's CAS fences by the claim. */
        if ((provider_id && *provider_id && kp_streq(h->provider_id, provider_id)) ||
            (claim_name && kp_claim_held_by(h, claim_name, claim_uid)))
            r = kp_claim_read_api(c, h->e.ns, h->e.name, ret, &e);
    }
    kp_error_done(&e);
    kp_store_list_free(&l);
    return r;
}

/* What follows a leave that ended with leave_r (msg: its text) on host, written Leaving and
 * still claimed by nc: the host's Nodes and token go, and the host is released, Available when
 * the leave succeeded and Unhealthy when not. 0 once released (or released by someone else
 * meanwhile), else the error with err set. */
static int leave_finish(struct kp_ssh_provider *p, struct kp_client *c,
                        const struct kp_nodeclaim_view *nc, struct kp_entry *host, int leave_r,
                        const char *msg, struct kp_provider_err *err)
{
    struct kp_claim_io io = kp_claim_io_api(c);
    struct kp_error e = KP_ERROR_INIT;
    const char *token_id = kp_sshhost_view(host)->bootstrap_token_id; /* host is held: stable */
    bool healthy = leave_r == 0;
    int r;

    if (!healthy) {
        kp_log_warn_errno(leave_r, "leave failed; releasing host Unhealthy",
                          KP_LF("host", host->name), KP_LF("detail", msg ? msg : ""));
        host_event(p, kp_sshhost_view(host), true, "LeaveFailed", "Leave",
                   msg ? msg : kp_strerror(leave_r));
    }
    /* kubelet is stopped by a leave that ran, so the host's Nodes cannot come back: they go
     * while the claim still fences the host (no new join can have made a Node since). A Node
     * the core registered is deleted by the core first; this takes the ones it never synced (a
     * NodeClaim deleted before it registered), which would otherwise stay NotReady forever and
     * read as the next claim's Node (the same providerID). */
    if (healthy && p->nodes) {
        unsigned deleted = 0;
        char *why = NULL;

        r = kp_hostctl_delete_our_nodes(p->nodes, c, kp_sshhost_view(host),
                                        (int64_t)kp_real_usec() + (int64_t)KP_USEC_PER_SEC, "host",
                                        &deleted, &why);
        if (r == 0 && why)
            r = kp_provider_err_set(err, -EAGAIN, KP_PROVIDER_ERR_RETRYABLE, NULL, "%s", why);
        else if (r < 0)
            kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "deleting the Node: %s",
                                kp_strerror(r));
        kp_free(why);
        if (r < 0)
            goto out;
    }
    if (token_id && (r = kp_token_delete(c, token_id, &e)) < 0) {
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "deleting bootstrap token");
        goto out;
    }
    {
        char *why = healthy ? NULL
                            : kp_strjoin("leave phase did not complete cleanly: ", msg ? msg : "",
                                         (const char *)NULL);

        r = kp_claim_release(&io, kp_sshhost_view(host), nc->e.name, nc->e.uid, healthy,
                             why ? why : "leave phase did not complete cleanly", NULL, &e);
        kp_free(why);
    }
    if (r == -ESTALE || r == -ENOENT)
        r = 0; /* someone else released it meanwhile: it is gone from this NodeClaim */
    if (r < 0) {
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "releasing host %s: %s",
                            host->name, kp_strerror(r));
        goto out;
    }
    held_set(p, nc->e.name, nc->e.uid, NULL);
    kp_log_info("host left", KP_LF("host", host->name), KP_LF("nodeclaim", nc->e.name),
                KP_LF("state", healthy ? "Available" : "Unhealthy"));
    if (healthy)
        host_event(p, kp_sshhost_view(host), false, "Left", "Leave", nc->e.name);
out:
    kp_error_done(&e);
    return r;
}

/* The fence: the claim must still be nc's, and Leaving is entered by CAS on the version just
 * read, so nobody can take the host between check and leave. *host becomes the host as
 * written. A host no longer nc's answers NOT_FOUND. */
static int enter_leaving(struct kp_client *c, const struct kp_nodeclaim_view *nc,
                         struct kp_entry **host, struct kp_provider_err *err)
{
    struct kp_claim_io io = kp_claim_io_api(c);
    struct kp_claim_status st = {.state = KP_HOST_LEAVING, .set_state = true};
    struct kp_error e = KP_ERROR_INIT;
    struct kp_entry *got = NULL;
    int r;

    r = kp_claim_update(&io, kp_sshhost_view(*host), nc->e.name, nc->e.uid, &st, &got, &e);
    kp_error_done(&e);
    if (r == -ESTALE || r == -ENOENT) {
        kp_log_info("stale delete fenced off", KP_LF("host", (*host)->name),
                    KP_LF("nodeclaim", nc->e.name));
        r = kp_provider_err_set(err, -ENOENT, KP_PROVIDER_ERR_NOT_FOUND, NULL,
                                "SSHHost %s is not claimed by NodeClaim %s", (*host)->name,
                                nc->e.name);
    } else if (r < 0) {
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "host %s: %s", (*host)->name,
                            kp_strerror(r));
    } else if (!got) { /* the update's answer is the host; a client without one is broken */
        r = kp_provider_err_set(err, -EIO, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                "claim update returned no SSHHost");
    } else {
        kp_entry_unref(*host);
        *host = got;
        got = NULL;
    }
    kp_entry_unref(got);
    return r;
}

/* The answer of a Delete whose leave_finish returned r: a host released is gone from nc, and
 * saying so now (NOT_FOUND) spares the caller a poll before it may delete the Node, whose
 * kubelet the leave has stopped. */
static int released(const struct kp_nodeclaim_view *nc, const struct kp_entry *host, int r,
                    struct kp_provider_err *err)
{
    if (r < 0)
        return r;
    return kp_provider_err_set(err, -ENOENT, KP_PROVIDER_ERR_NOT_FOUND, NULL,
                               "SSHHost %s was released by NodeClaim %s", host->name, nc->e.name);
}

/* Delete with the job pool: every call decides from the host as the API server has it and the
 * pool's answer for key, and never waits for a host. A launch phase still running for the claim
 * is cancelled first and kept on the pool until its session has closed (its end brings the
 * NodeClaim back); then the host enters Leaving and its leave is submitted; a later call finds
 * the leave's result and finishes as the inline Delete does, answering NOT_FOUND once the host
 * is released. 0 means releasing, as the contract says. */
static int delete_async(struct kp_ssh_provider *p, const struct kp_ctx *ctx, struct kp_client *c,
                        const struct kp_nodeclaim_view *nc, const char *key, struct kp_entry **host,
                        struct kp_provider_err *err)
{
    struct kp_hostio_leave run = {0};
    struct phase_out out = {0};
    const struct kp_sshhost_view *h = kp_sshhost_view(*host);
    enum kp_ssh_job_kind other = KP_SSH_JOB_KIND_N;
    bool other_finished = false;
    struct phase_job *j = NULL;
    void *arg = NULL;
    char *msg = NULL;
    int r;

    if (h->state != KP_HOST_LEAVING || !kp_claim_held_by(h, nc->e.name, nc->e.uid)) {
        r = kp_ssh_jobs_take(p->jobs, key, NULL, &arg, NULL);
        if (r == -EINPROGRESS) {
            kp_ssh_jobs_cancel(p->jobs, key);
            kp_log_info("launch cancelled: its NodeClaim is being deleted; leave follows",
                        KP_LF("host", (*host)->name), KP_LF("nodeclaim", nc->e.name));
            /* A running one ends within a poll slice and brings the NodeClaim back; a queued one
             * is gone already, so the leave can start on this call. */
            if (kp_ssh_jobs_peek(p->jobs, key, NULL, NULL) == 0) {
                r = 0;
                goto out;
            }
        }
        phase_job_free(arg); /* a launch phase that ended unread: moot now */
        arg = NULL;
        if ((r = enter_leaving(c, nc, host, err)) < 0)
            goto out;
    } else {
        r = kp_ssh_jobs_take_kind(p->jobs, key, KP_SSH_JOB_LEAVE, &arg, NULL, &other,
                                  &other_finished);
        if (r == -EBUSY && !other_finished) { /* a launch phase: it stops first */
            kp_ssh_jobs_cancel(p->jobs, key);
            r = 0;
            goto out;
        }
        if (r == -EBUSY)
            kp_ssh_jobs_forget(p->jobs, key); /* a launch phase that ended unread */
        if (r == -EINPROGRESS) {
            r = 0;
            goto out;
        }
        j = arg;
        if (r == 0 && j && kp_streq(kp_sshhost_view(j->host)->e.name, (*host)->name)) {
            if (j->out.r >= 0 || (j->out.ctx_err == 0 && j->out.r != -KP_ENOTLEADER)) {
                r = released(nc, *host, leave_finish(p, c, nc, *host, j->out.r, j->out.msg, err),
                             err);
                goto out;
            }
            kp_log_info("leave interrupted; it runs again", KP_LF("host", (*host)->name),
                        KP_LF("nodeclaim", nc->e.name));
        }
        /* none (a restart, a new leader), or one that did not finish: the leave runs (again;
         * it is idempotent) */
    }
    if ((r = kp_provider_ctx_check(ctx, err, "starting the leave")) < 0)
        goto out;
    r = kp_hostio_leave_prepare(p->profiles, c, kp_sshhost_view(*host), &run, &msg);
    if (r < 0 && kp_ctx_err(ctx) < 0) {
        r = kp_provider_ctx_check(ctx, err, "reading what the leave needs");
        goto out;
    }
    if (r < 0) { /* nothing to leave with (or its Secret): decided without a dial */
        r = released(nc, *host, leave_finish(p, c, nc, *host, r, msg, err), err);
        goto out;
    }
    r = phase_start(p, ctx, key, *host, KP_PROFILE_LEAVE, NULL, &run, &out, err);
    if (r == -EINPROGRESS) {
        kp_provider_err_done(err); /* releasing: no error */
        r = 0;
    }
out:
    phase_job_free(j);
    kp_hostio_leave_done(&run);
    kp_free(out.msg);
    kp_free(msg);
    return r;
}

static int op_delete(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, struct kp_provider_err *err)
{
    struct kp_ssh_provider *p = self;
    struct kp_entry *host = NULL;
    char *msg = NULL, *key = NULL;
    bool busy = false;
    int r;

    if ((r = kp_provider_ctx_check(ctx, err, "resolving the host")) < 0)
        return r;
    /* One decision per NodeClaim at a time (the core's lifecycle and termination both call):
     * a second caller meanwhile is told "releasing" and comes back. */
    if (p->jobs) {
        if (!(key = claim_key(nc->e.name, nc->e.uid)))
            return kp_provider_err_set(err, -ENOMEM, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                       "out of memory");
        pthread_mutex_lock(&p->mu);
        busy = kp_map_contains(p->deleting, key);
        r = busy ? 0 : kp_map_put(p->deleting, key, p, NULL);
        pthread_mutex_unlock(&p->mu);
        if (busy || r < 0) {
            kp_free(key);
            return r < 0 ? kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                               "out of memory")
                         : 0;
        }
    }
    r = resolve_host(p, c, nc->provider_id, nc->e.name, nc->e.uid, &host);
    if (r == -ENOENT) {
        r = kp_provider_err_set(err, r, KP_PROVIDER_ERR_NOT_FOUND, NULL,
                                "no SSHHost backs NodeClaim %s", nc->e.name);
        goto out;
    }
    if (r < 0) {
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "resolving host: %s",
                            kp_strerror(r));
        goto out;
    }
    if (p->jobs) {
        r = delete_async(p, ctx, c, nc, key, &host, err);
        goto out;
    }
    if ((r = enter_leaving(c, nc, &host, err)) < 0)
        goto out;
    /* Leaving is entered: from here a cancel still ends the leave phase promptly. A leave ended
     * by our context is not a failed one: the host stays Leaving and claimed, and the next Delete
     * resumes it (RETRYABLE, as the contract says); any other failure releases it Unhealthy. */
    r = kp_hostio_leave(ctx, p->profiles, c, kp_sshhost_view(host), p->observer, &msg);
    if (r < 0 && kp_ctx_err(ctx) < 0) {
        r = kp_provider_ctx_check(ctx, err, "the leave phase finished");
        kp_log_info("leave interrupted; the next Delete resumes it", KP_LF("host", host->name),
                    KP_LF("nodeclaim", nc->e.name));
        goto out;
    }
    r = leave_finish(p, c, nc, host, r, msg, err);
out:
    /* Gone from this NodeClaim: nothing of it stays behind (its hint, an unread result). */
    if (r == -ENOENT || (err && err->kind == KP_PROVIDER_ERR_NOT_FOUND)) {
        held_set(p, nc->e.name, nc->e.uid, NULL);
        if (p->jobs && key)
            kp_ssh_jobs_forget(p->jobs, key);
    }
    if (key) {
        pthread_mutex_lock(&p->mu);
        (void)kp_map_remove(p->deleting, key);
        pthread_mutex_unlock(&p->mu);
    }
    kp_free(key);
    kp_free(msg);
    kp_entry_unref(host);
    return r;
}

/* The instance type of h's class under its node class now (NULL when not advertised). */
static int instance_of(struct kp_ssh_provider *p, const struct kp_sshhost_view *h,
                       struct kp_provider_instance *ret)
{
    struct kp_store_list l = {0};
    int r;

    if ((r = kp_store_list(p->nodeclasses, &l)) < 0)
        return r;
    r = -ENOENT;
    for (size_t i = 0; i < l.n && r == -ENOENT; i++) {
        const struct kp_sshnodeclass_view *ncl = kp_sshnodeclass_view(l.v[i]);
        struct kp_instance_catalog *cat = NULL;

        if (!kp_inventory_member(ncl, p->pool_ns, h))
            continue;
        if ((r = catalog_for(p, ncl->e.name, &cat)) < 0)
            break;
        r = instance_fill(h, h->claim_name, h->provider_id,
                          kp_instance_catalog_find(cat, kp_sshhost_class(h)), NULL, ret);
        kp_instance_catalog_unref(cat);
    }
    if (r == -ENOENT)
        r = instance_fill(h, h->claim_name, h->provider_id, NULL, NULL, ret);
    kp_store_list_free(&l);
    return r;
}

static int op_get(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                  const char *provider_id, struct kp_provider_instance *ret,
                  struct kp_provider_err *err)
{
    struct kp_ssh_provider *p = self;
    struct kp_entry *host = NULL;
    int r;

    if ((r = kp_provider_ctx_check(ctx, err, "reading the host")) < 0)
        return r;
    if (!provider_id || !*provider_id)
        return kp_provider_err_set(err, -EINVAL, KP_PROVIDER_ERR_RETRYABLE, NULL,
                                   "empty providerID");
    r = resolve_host(p, c, provider_id, NULL, NULL, &host);
    if (r == 0 && (!host || !kp_sshhost_view(host)->claim_name))
        r = -ENOENT;
    if (r == -ENOENT)
        r = kp_provider_err_set(err, r, KP_PROVIDER_ERR_NOT_FOUND, NULL,
                                "no claimed SSHHost for %s", provider_id);
    else if (r < 0 || (r = instance_of(p, kp_sshhost_view(host), ret)) < 0)
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "%s", kp_strerror(r));
    kp_entry_unref(host);
    return r;
}

static int op_list(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                   struct kp_provider_instances *ret, struct kp_provider_err *err)
{
    struct kp_ssh_provider *p = self;
    struct kp_provider_instances out = {0};
    struct kp_store_list l = {0};
    int r;

    (void)c;
    if ((r = kp_provider_ctx_check(ctx, err, "listing hosts")) < 0)
        return r;
    if ((r = kp_store_list(p->hosts, &l)) < 0)
        return kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "listing hosts");
    out.v = kp_calloc(l.n ? l.n : 1, sizeof(*out.v));
    if (!out.v) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < l.n; i++) {
        const struct kp_sshhost_view *h = kp_sshhost_view(l.v[i]);

        if (!kp_streq(h->e.ns, p->pool_ns) || !h->claim_name)
            continue;
        if ((r = instance_of(p, h, &out.v[out.n])) < 0)
            goto out;
        out.n++;
    }
    *ret = out;
    out = (struct kp_provider_instances){0};
    r = 0;
out:
    if (r < 0)
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "%s", kp_strerror(r));
    kp_provider_instances_done(&out);
    kp_store_list_free(&l);
    return r;
}

static int op_get_instance_types(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                                 const struct kp_nodepool_view *np,
                                 struct kp_instance_catalog **ret, struct kp_provider_err *err)
{
    struct kp_ssh_provider *p = self;
    struct kp_instance_types none = {0};
    int r;

    (void)c;
    if ((r = kp_provider_ctx_check(ctx, err, "reading instance types")) < 0)
        return r;
    if (!kp_nodepool_is_ours(np))
        r = kp_instance_catalog_new(&none, 0, ret);
    else
        r = catalog_for(p, np->tmpl.node_class_ref.name ? np->tmpl.node_class_ref.name : "", ret);
    if (r < 0)
        kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "instance types: %s",
                            kp_strerror(r));
    return r;
}

static int op_is_drifted(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                         const struct kp_nodeclaim_view *nc, const char **ret_reason,
                         struct kp_provider_err *err)
{
    struct kp_ssh_provider *p = self;
    struct kp_entry *host = NULL, *ncl_e = NULL, *pr_e = NULL;
    const char *stamped, *version;
    char *marker = NULL, hash[17];
    struct kp_profile_spec spec;
    int r;

    *ret_reason = NULL;
    if ((r = kp_provider_ctx_check(ctx, err, "reading the host")) < 0)
        return r;
    if (!nc->provider_id || !*nc->provider_id)
        return 0;
    r = resolve_host(p, c, nc->provider_id, NULL, NULL, &host);
    if (r == -ENOENT) /* the core keeps what it knew: no host, no answer */
        return kp_provider_err_set(err, r, KP_PROVIDER_ERR_NOT_FOUND, NULL,
                                   "no SSHHost backs NodeClaim %s", nc->e.name);
    if (r < 0)
        return kp_provider_err_set(err, r, KP_PROVIDER_ERR_RETRYABLE, NULL, "%s", kp_strerror(r));
    r = kp_store_get(p->nodeclasses,
                     nc->spec.node_class_ref.name ? nc->spec.node_class_ref.name : "", &ncl_e);
    if (r < 0) {
        r = 0; /* no node class: nothing to compare with */
        goto out;
    }
    if (kp_store_get(p->profiles,
                     kp_sshnodeclass_view(ncl_e)->join_profile
                         ? kp_sshnodeclass_view(ncl_e)->join_profile
                         : "",
                     &pr_e) == 0) {
        kp_profile_spec_from_view(kp_sshjoinprofile_view(pr_e), &spec);
        if (kp_profile_marker(&spec, &marker) == 0 && kp_sshhost_view(host)->installed_profile &&
            *kp_sshhost_view(host)->installed_profile &&
            !kp_streq(kp_sshhost_view(host)->installed_profile, marker)) {
            *ret_reason = KP_PROVIDER_DRIFT_PROFILE;
            goto out;
        }
    }
    stamped = kp_labels_get(&nc->annotations, KP_SSH_ANNOTATION_NODECLASS_HASH);
    version = kp_labels_get(&nc->annotations, KP_SSH_ANNOTATION_NODECLASS_HASH_VERSION);
    /* A missing stamp or another algorithm version abstains: never roll a fleet because the
     * hash changed its definition. */
    if (stamped && kp_streq(version, KP_SSH_NODECLASS_HASH_VERSION) &&
        kp_ssh_nodeclass_hash(kp_sshnodeclass_view(ncl_e), hash) == 0 && !kp_streq(stamped, hash))
        *ret_reason = KP_PROVIDER_DRIFT_NODECLASS;
out:
    kp_free(marker);
    kp_entry_unref(pr_e);
    kp_entry_unref(ncl_e);
    kp_entry_unref(host);
    return r;
}

static const char *op_name(void *self)
{
    (void)self;
    return KP_SSH_PROVIDER_NAME;
}

/* kpssh://<pool namespace>/<host>: a providerID of a Static join into this pool. An Adopt join's
 * providerID is the one the Node came with (EKS Hybrid Nodes: not ours by form). */
static bool op_owns_provider_id(void *self, const char *provider_id)
{
    struct kp_ssh_provider *p = self;
    size_t n = strlen(KP_SSH_PROVIDER_ID_SCHEME), m = strlen(p->pool_ns);

    return strncmp(provider_id, KP_SSH_PROVIDER_ID_SCHEME, n) == 0 &&
           strncmp(provider_id + n, p->pool_ns, m) == 0 && provider_id[n + m] == '/' &&
           provider_id[n + m + 1] != '\0' && !strchr(provider_id + n + m + 1, '/');
}

static size_t op_supported_node_classes(void *self, const struct kp_node_class_kind **ret)
{
    static const struct kp_node_class_kind kinds[] = {{KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND}};

    (void)self;
    *ret = kinds;
    return KP_ARRAY_SIZE(kinds);
}

/* What node repair may act on for SSH hosts: the Node's Ready condition False or Unknown for
 * KP_SSH_REPAIR_TOLERATION_USEC, the toleration Karpenter's own providers use. Replacing means
 * Delete (leave, the host back to the pool, or Unhealthy when leave fails) and a new launch on
 * whichever host fits; a machine that keeps failing is parked Unhealthy by the host
 * controller's probe instead of being rejoined in a loop. */
static size_t op_repair_policies(void *self, const struct kp_repair_policy **ret)
{
    static const struct kp_repair_policy policies[] = {
        {"Ready", "False", KP_SSH_REPAIR_TOLERATION_USEC},
        {"Ready", "Unknown", KP_SSH_REPAIR_TOLERATION_USEC},
    };

    (void)self;
    *ret = policies;
    return KP_ARRAY_SIZE(policies);
}

static int op_create(void *self, const struct kp_ctx *ctx, struct kp_client *c,
                     const struct kp_nodeclaim_view *nc, struct kp_provider_instance *ret,
                     struct kp_provider_err *err)
{
    return kp_ssh_provider_create(self, ctx, c, nc, ret, NULL, err);
}

/* The SSHNodeClass's Ready condition from the store, for the core's NodePool conditions (the
 * class's own controller, nodeclassctl.c, decides it). Only SSHNodeClass refs are found. */
static int op_node_class_status(void *self, const struct kp_nodeclass_ref *ref,
                                struct kp_node_class_status *ret)
{
    struct kp_ssh_provider *p = self;
    const struct kp_sshnodeclass_view *ncl;
    const struct kp_condition *ready;
    struct kp_entry *e = NULL;
    int r;

    *ret = (struct kp_node_class_status){0};
    if (!kp_nodeclass_ref_is(ref, KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND) || !ref->name)
        return 0;
    r = kp_store_get(p->nodeclasses, ref->name, &e);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    ncl = kp_sshnodeclass_view(e);
    ready = kp_conditions_get(&ncl->conditions, "Ready");
    ret->found = true;
    ret->deleting = ncl->meta.deletion_usec != 0;
    ret->generation = ncl->generation;
    ret->ready = ready ? ready->status : KP_COND_UNKNOWN;
    if (ready && ready->reason && !(ret->reason = kp_strdup(ready->reason)))
        r = -ENOMEM;
    if (ready && ncl->ready_message && !(ret->message = kp_strdup(ncl->ready_message)))
        r = -ENOMEM;
    if (r < 0)
        kp_node_class_status_done(ret);
    kp_entry_unref(e);
    return r;
}

static const struct kp_provider_ops ssh_ops = {
    .name = op_name,
    .supported_node_classes = op_supported_node_classes,
    .repair_policies = op_repair_policies,
    .create = op_create,
    .delete = op_delete,
    .get = op_get,
    .list = op_list,
    .get_instance_types = op_get_instance_types,
    .is_drifted = op_is_drifted,
    .node_class_status = op_node_class_status,
    .owns_provider_id = op_owns_provider_id,
    .watch_drift = op_watch_drift,
    .unwatch_drift = op_unwatch_drift,
    .watch_progress = op_watch_progress,
    .unwatch_progress = op_unwatch_progress,
};

struct kp_provider kp_ssh_provider_as_provider(struct kp_ssh_provider *p)
{
    return (struct kp_provider){.ops = &ssh_ops, .self = p};
}

int kp_ssh_provider_delete_node(struct kp_client *c, const char *name)
{
    int r = kp_client_delete(c, &KP_RES_NODE, NULL, name, NULL, NULL);

    return r == -ENOENT ? 0 : r;
}
