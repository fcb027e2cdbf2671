/* DESIGN: leader election (see lease.h for the rules).
 *
 * State kept between attempts: the last Lease record we saw (holder, resourceVersion, renew
 * time as written) and the monotonic time at which we saw it change. "Expired" means: the
 * record has not changed for leaseDurationSeconds by our clock. Our own renewals write
 * renewTime with our wall clock, as every Lease client does; nobody compares it across hosts.
 *
 * Writes: create when absent (AlreadyExists: someone else created it first, not leader);
 * otherwise PUT the record we read with our changes, carrying its resourceVersion, so a
 * concurrent writer makes the PUT fail with Conflict. */
#include "k8s/lease.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/ctx.h"
#include "base/err.h"
#include "base/log.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/fence.h"
#include "k8s/rfc3339.h"
#include "k8s/status.h"

struct kp_leader {
    struct kp_client *client;
    char *ns, *name, *identity;
    uint64_t lease_usec, renew_deadline_usec, retry_usec;
    char *observed_holder;
    char *observed_rv;
    uint64_t observed_at; /* monotonic time the record last changed (or was first seen) */
    int64_t observed_duration_sec;
    bool leader;
    uint64_t last_renew; /* monotonic time the last successful attempt as leader began */
    struct kp_backoff jitter;
    /* The keeper thread (kp_leader_keep_start). While it runs it owns everything above; other
     * threads touch only the atomics below. */
    struct kp_fence *fence;  /* borrowed; NULL: none */
    int notify_fd;           /* written once on loss; -1: none */
    struct kp_ctx *loss_ctx; /* cancelled on loss (borrowed); NULL: none */
    pthread_t keeper;
    bool keeper_running; /* main thread only */
    atomic_bool keep_cancel;
    atomic_bool lost;       /* the keeper gave the Lease up (taken, or renew deadline passed) */
    atomic_int keep_status; /* result of the keeper's last attempt: 0 or a negative error */
};

int kp_leader_new(struct kp_client *c, const struct kp_leader_opts *opts, struct kp_leader **ret)
{
    struct kp_leader *l;
    int r;

    if (!opts || !opts->ns || !opts->name || !opts->identity || !*opts->identity)
        return -EINVAL;
    l = kp_calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->lease_usec = opts->lease_usec ? opts->lease_usec : KP_LEASE_DURATION_USEC;
    l->renew_deadline_usec =
        opts->renew_deadline_usec ? opts->renew_deadline_usec : KP_LEASE_RENEW_DEADLINE_USEC;
    l->retry_usec = opts->retry_usec ? opts->retry_usec : KP_LEASE_RETRY_USEC;
    if (l->renew_deadline_usec >= l->lease_usec || l->retry_usec >= l->renew_deadline_usec ||
        l->lease_usec < KP_USEC_PER_SEC) {
        kp_free(l);
        return -EINVAL;
    }
    l->ns = kp_strdup(opts->ns);
    l->name = kp_strdup(opts->name);
    l->identity = kp_strdup(opts->identity);
    r = (l->ns && l->name && l->identity) ? kp_client_clone(c, &l->client) : -ENOMEM;
    if (r < 0) {
        kp_leader_free(l);
        return r;
    }
    kp_backoff_init(&l->jitter, l->retry_usec, l->retry_usec * 2);
    l->notify_fd = -1;
    atomic_init(&l->keep_cancel, false);
    atomic_init(&l->lost, false);
    atomic_init(&l->keep_status, 0);
    *ret = l;
    return 0;
}

struct kp_leader *kp_leader_free(struct kp_leader *l)
{
    if (!l)
        return NULL;
    (void)kp_leader_keep_stop(l); /* joins a keeper still running; its verdict is moot here */
    kp_client_free(l->client);
    kp_free(l->ns);
    kp_free(l->name);
    kp_free(l->identity);
    kp_free(l->observed_holder);
    kp_free(l->observed_rv);
    kp_free(l);
    return NULL;
}

bool kp_leader_is_leader(const struct kp_leader *l)
{
    return l->leader;
}

const char *kp_leader_observed_holder(const struct kp_leader *l)
{
    return l->observed_holder;
}

static int kp_lease_now(char buf[KP_RFC3339_STRMAX])
{
    return kp_rfc3339_format((int64_t)kp_real_usec(), KP_RFC3339_MICRO, buf, KP_RFC3339_STRMAX);
}

/* Records what we saw; the observation time moves only when the record changed. */
static int kp_leader_observe(struct kp_leader *l, const char *holder, const char *rv,
                             int64_t duration_sec)
{
    bool changed = !kp_streq(rv, l->observed_rv);
    int r;

    if (!changed)
        return 0;
    if ((r = kp_strset(&l->observed_holder, holder && *holder ? holder : NULL)) < 0 ||
        (r = kp_strset(&l->observed_rv, rv)) < 0)
        return r;
    l->observed_at = kp_mono_usec();
    l->observed_duration_sec = duration_sec;
    return 0;
}

/* Sets the spec of a Lease document for us as holder. */
static int kp_lease_fill(json_t *doc, const struct kp_leader *l, bool new_holder,
                         int64_t transitions, bool release)
{
    char now[KP_RFC3339_STRMAX];
    int64_t dur = release ? 1 : (int64_t)(l->lease_usec / KP_USEC_PER_SEC);
    int r;

    if ((r = kp_lease_now(now)) < 0)
        return r;
    if ((r = kp_json_patch_set_str(doc, KP_JSON_PATH("spec", "holderIdentity"),
                                   release ? "" : l->identity)) < 0 ||
        (r = kp_json_patch_set_int(doc, KP_JSON_PATH("spec", "leaseDurationSeconds"), dur)) < 0 ||
        (r = kp_json_patch_set_str(doc, KP_JSON_PATH("spec", "renewTime"), now)) < 0)
        return r;
    if (new_holder) {
        if ((r = kp_json_patch_set_str(doc, KP_JSON_PATH("spec", "acquireTime"), now)) < 0 ||
            (r = kp_json_patch_set_int(doc, KP_JSON_PATH("spec", "leaseTransitions"),
                                       transitions)) < 0)
            return r;
    }
    return 0;
}

static int kp_leader_create(struct kp_leader *l, bool *ret_leader, struct kp_error *reterr)
{
    json_t *doc = NULL, *created = NULL;
    const char *rv = NULL;
    int r;

    r = kp_json_patch_new(&doc);
    if (r < 0)
        return r;
    if ((r = kp_json_patch_set_str(doc, KP_JSON_PATH("apiVersion"), "coordination.k8s.io/v1")) <
            0 ||
        (r = kp_json_patch_set_str(doc, KP_JSON_PATH("kind"), "Lease")) < 0 ||
        (r = kp_json_patch_set_str(doc, KP_JSON_PATH("metadata", "name"), l->name)) < 0 ||
        (r = kp_json_patch_set_str(doc, KP_JSON_PATH("metadata", "namespace"), l->ns)) < 0 ||
        (r = kp_lease_fill(doc, l, true, 0, false)) < 0)
        goto out;
    r = kp_client_create(l->client, &KP_RES_LEASE, l->ns, doc, &created, reterr);
    if (r == -EEXIST) {
        *ret_leader = false; /* another candidate created it first */
        r = 0;
        goto out;
    }
    if (r < 0)
        goto out;
    if (kp_json_path_str(created, "metadata.resourceVersion", &rv) < 0)
        rv = NULL;
    r = kp_leader_observe(l, l->identity, rv, (int64_t)(l->lease_usec / KP_USEC_PER_SEC));
    *ret_leader = r == 0;
out:
    kp_json_unref(doc);
    kp_json_unref(created);
    return r;
}

int kp_leader_try(struct kp_leader *l, bool *ret_leader, struct kp_error *reterr)
{
    json_t *doc = NULL, *updated = NULL;
    const char *holder = NULL, *rv = NULL;
    int64_t dur = 0, transitions = 0;
    bool ours, expired, leader = false;
    /* A successful write proves we held the Lease no later than when this attempt began; the
     * renew deadline (and the fence) count from here, never from when the answer came. */
    uint64_t began = kp_mono_usec();
    int r;

    r = kp_client_get(l->client, &KP_RES_LEASE, l->ns, l->name, &doc, reterr);
    if (r == -ENOENT) {
        r = kp_leader_create(l, &leader, reterr);
        goto done;
    }
    if (r < 0)
        goto out;
    if (kp_json_path_str(doc, "metadata.resourceVersion", &rv) < 0) {
        r = -KP_EPARSE;
        goto out;
    }
    r = kp_json_path_str(doc, "spec.holderIdentity", &holder);
    if (r < 0 && r != -ENOENT)
        goto out;
    r = kp_json_path_int(doc, "spec.leaseDurationSeconds", &dur);
    if (r < 0 && r != -ENOENT)
        goto out;
    r = kp_json_path_int(doc, "spec.leaseTransitions", &transitions);
    if (r < 0 && r != -ENOENT)
        goto out;
    r = kp_leader_observe(l, holder, rv, dur);
    if (r < 0)
        goto out;
    ours = holder && strcmp(holder, l->identity) == 0;
    expired = !holder || !*holder ||
              kp_mono_usec() - l->observed_at > (uint64_t)(dur > 0 ? dur : 0) * KP_USEC_PER_SEC;
    if (!ours && !expired) {
        leader = false;
        r = 0;
        goto done;
    }
    r = kp_lease_fill(doc, l, !ours, ours ? transitions : transitions + 1, false);
    if (r < 0)
        goto out;
    r = kp_client_update(l->client, &KP_RES_LEASE, l->ns, l->name, doc, &updated, reterr);
    if (r == -KP_ECONFLICT) {
        leader = false; /* someone wrote first; we will see their record next time */
        r = 0;
        goto done;
    }
    if (r < 0)
        goto out;
    if (kp_json_path_str(updated, "metadata.resourceVersion", &rv) < 0)
        rv = NULL;
    r = kp_leader_observe(l, l->identity, rv, (int64_t)(l->lease_usec / KP_USEC_PER_SEC));
    if (r < 0)
        goto out;
    leader = true;
done:
    if (r == 0) {
        if (leader)
            l->last_renew = began;
        l->leader = leader;
        *ret_leader = leader;
    }
out:
    kp_json_unref(doc);
    kp_json_unref(updated);
    return r;
}

/* Sleeps about one retry period (jittered), waking early on cancel. */
static void kp_leader_wait(struct kp_leader *l, const atomic_bool *cancel, uint64_t usec)
{
    struct kp_deadline d = kp_deadline_in(usec);

    while (!(cancel && atomic_load(cancel)) && !kp_deadline_expired(d))
        kp_sleep_usec(KP_MIN(kp_deadline_left_usec(d), 50 * KP_USEC_PER_MSEC));
    (void)l;
}

int kp_leader_acquire(struct kp_leader *l, const atomic_bool *cancel)
{
    for (;;) {
        struct kp_error err = KP_ERROR_INIT;
        bool leader = false;
        int r;

        if (cancel && atomic_load(cancel))
            return -ECANCELED;
        r = kp_leader_try(l, &leader, &err);
        if (r < 0)
            kp_log_warn_rl("lease-acquire", "cannot read or write the leader lease",
                           KP_LF("lease", l->name),
                           KP_LF("error", err.message ? err.message : kp_strerror(r)));
        kp_error_done(&err);
        if (r == 0 && leader) {
            kp_log_info("became leader", KP_LF("lease", l->name), KP_LF("identity", l->identity));
            return 0;
        }
        /* client-go jitters the retry period by up to 1.2x. */
        kp_leader_wait(l, cancel, l->retry_usec + kp_rand_below(&l->jitter.rng, l->retry_usec / 5));
    }
}

/* The instant our writes must stop: the renew deadline after the last successful attempt began. */
static uint64_t kp_leader_deadline(const struct kp_leader *l)
{
    return l->last_renew + l->renew_deadline_usec;
}

/* Gives leadership up locally: the fence first (nothing may write past this), then the state,
 * then the wake-up of whoever waits for the news. The Lease itself is not touched. */
static void kp_leader_lose(struct kp_leader *l)
{
    static const uint64_t one = 1;

    if (l->fence)
        kp_fence_set(l->fence, KP_FENCE_CLOSED);
    l->leader = false;
    atomic_store(&l->lost, true);
    if (l->loss_ctx)
        kp_ctx_cancel(l->loss_ctx);
    if (l->notify_fd >= 0 && write(l->notify_fd, &one, sizeof(one)) < 0) {
        /* An eventfd only fails when its counter would overflow: a wake-up is pending anyway. */
    }
}

/* The renew loop shared by kp_leader_keep() and the keeper thread: client-go's renew cycle.
 * Each round waits one retry period, checks the renew deadline *before* trying (a renewal that
 * only starts after the deadline would reopen a fence other replicas already count as closed),
 * and tries once; a success moves the fence to the new deadline. */
static int kp_leader_renew_loop(struct kp_leader *l, const atomic_bool *cancel)
{
    if (l->fence)
        kp_fence_set(l->fence, kp_leader_deadline(l));
    while (!(cancel && atomic_load(cancel))) {
        struct kp_error err = KP_ERROR_INIT;
        bool leader = false;
        int r;

        kp_leader_wait(l, cancel,
                       KP_MIN(l->retry_usec, kp_deadline_left_usec((struct kp_deadline){
                                                 .at = kp_leader_deadline(l)})));
        if (cancel && atomic_load(cancel))
            break;
        if (kp_mono_usec() >= kp_leader_deadline(l)) {
            kp_log_error("leader lease lost: no renewal within the renew deadline",
                         KP_LF("lease", l->name));
            kp_leader_lose(l);
            return -KP_ENOTREADY;
        }
        r = kp_leader_try(l, &leader, &err);
        atomic_store(&l->keep_status, r);
        if (r == 0 && !leader) {
            kp_error_done(&err);
            kp_log_error("leader lease taken by another holder", KP_LF("lease", l->name),
                         KP_LF("holder", l->observed_holder ? l->observed_holder : ""));
            kp_leader_lose(l);
            return -KP_ENOTREADY;
        }
        if (r < 0)
            kp_log_warn_rl("lease-renew", "leader lease renewal failed", KP_LF("lease", l->name),
                           KP_LF("error", err.message ? err.message : kp_strerror(r)));
        else if (l->fence)
            kp_fence_set(l->fence, kp_leader_deadline(l));
        kp_error_done(&err);
    }
    return 0;
}

int kp_leader_keep(struct kp_leader *l, const atomic_bool *cancel)
{
    return kp_leader_renew_loop(l, cancel);
}

static void *kp_leader_keeper_main(void *arg)
{
    struct kp_leader *l = arg;

    (void)kp_leader_renew_loop(l, &l->keep_cancel); /* the verdict is in l->lost */
    return NULL;
}

int kp_leader_keep_start(struct kp_leader *l, struct kp_fence *fence, struct kp_ctx *loss_ctx,
                         int notify_fd)
{
    int r;

    if (l->keeper_running)
        return -EALREADY;
    if (!l->leader)
        return -EINVAL;
    l->fence = fence;
    l->loss_ctx = loss_ctx;
    l->notify_fd = notify_fd;
    atomic_store(&l->keep_cancel, false);
    atomic_store(&l->lost, false);
    atomic_store(&l->keep_status, 0);
    /* Open the fence before the thread exists, so the caller may write as soon as this
     * returns; the keeper moves it on from here. */
    if (fence)
        kp_fence_set(fence, kp_leader_deadline(l));
    r = -pthread_create(&l->keeper, NULL, kp_leader_keeper_main, l);
    if (r < 0) {
        if (fence)
            kp_fence_set(fence, KP_FENCE_CLOSED);
        l->fence = NULL;
        l->loss_ctx = NULL;
        l->notify_fd = -1;
        return r;
    }
    (void)pthread_setname_np(l->keeper, "lease-keeper");
    l->keeper_running = true;
    return 0;
}

bool kp_leader_keep_stop(struct kp_leader *l)
{
    if (!l->keeper_running)
        return l->leader;
    atomic_store(&l->keep_cancel, true);
    pthread_join(l->keeper, NULL);
    l->keeper_running = false;
    /* The fence stays as the keeper left it: open until the deadline while we still lead (a
     * release or a new keeper follows), closed after a loss. */
    l->fence = NULL;
    l->loss_ctx = NULL;
    l->notify_fd = -1;
    return l->leader;
}

bool kp_leader_keep_lost(struct kp_leader *l)
{
    return atomic_load(&l->lost);
}

int kp_leader_keep_status(struct kp_leader *l)
{
    return atomic_load(&l->keep_status);
}

int kp_leader_release(struct kp_leader *l, enum kp_leader_release *ret_result)
{
    struct kp_error err = KP_ERROR_INIT;
    enum kp_leader_release result = KP_LEADER_NOT_LEADING;
    json_t *doc = NULL;
    int r = 0;

    /* A Conflict means the Lease changed between our read and our write: read it again to see
     * whether it is still ours. A few rounds; a Lease that keeps changing is not ours for long. */
    for (unsigned attempt = 0; l->leader && attempt < 3; attempt++) {
        const char *holder = NULL, *rv = NULL;

        doc = kp_json_unref(doc);
        kp_error_done(&err);
        r = kp_client_get(l->client, &KP_RES_LEASE, l->ns, l->name, &doc, &err);
        if (r == -ENOENT) { /* deleted: nobody holds it, least of all us */
            result = KP_LEADER_GONE;
            r = 0;
            break;
        }
        if (r < 0)
            break;
        if (kp_json_path_str(doc, "spec.holderIdentity", &holder) < 0)
            holder = NULL;
        if (!holder || strcmp(holder, l->identity) != 0) {
            /* Not ours any more: nothing to release, and the holder is recorded so the caller
             * can say who has it. */
            int64_t dur = 0;

            if (kp_json_path_str(doc, "metadata.resourceVersion", &rv) < 0)
                rv = NULL;
            if (kp_json_path_int(doc, "spec.leaseDurationSeconds", &dur) < 0)
                dur = 0;
            if ((r = kp_leader_observe(l, holder, rv, dur)) < 0)
                break;
            result = KP_LEADER_TAKEN;
            break;
        }
        r = kp_lease_fill(doc, l, false, 0, true);
        if (r == 0)
            r = kp_client_update(l->client, &KP_RES_LEASE, l->ns, l->name, doc, NULL, &err);
        if (r == 0)
            result = KP_LEADER_RELEASED;
        if (r != -KP_ECONFLICT)
            break;
    }
    if (r == 0) {
        l->leader = false;
        if (ret_result)
            *ret_result = result;
    }
    kp_error_done(&err);
    kp_json_unref(doc);
    return r;
}
