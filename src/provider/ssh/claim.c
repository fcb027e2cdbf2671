/* provider/ssh/claim.c: the SSHHost claim lock (claim.h).
 *
 * DESIGN: every write to an SSHHost's status by the provider goes through kp_claim_patch(), a
 * JSON merge patch that carries metadata.resourceVersion, sent to the status subresource. That
 * makes each write a compare-and-swap without caching whole documents (STYLE.md section 3):
 * fields we do not model (conditions, observed capacity written by the probe) are never dropped,
 * and a write based on an old read is refused instead of silently undoing someone else's.
 *
 *   claim       Available, no claimRef --CAS--> Claimed + claimRef{name, uid}
 *               Conflict: lost the race; go to the next candidate, never back to this host.
 *   holder      Claimed/InUse/Leaving, claimRef ours --CAS--> same claim, more facts
 *               Conflict: re-read; retry only while claimRef is still ours (name + uid).
 *   release     claimRef ours --CAS--> Available|Unhealthy, claimRef/providerID/token id null
 *
 * The API-backed reader and writer are small functions behind struct kp_claim_io so that the
 * candidate loop and the retry rules are unit-tested without a server (tests/unit/test-claim.c)
 * and exercised against the real one in tests/integration/test-provider.c.
 * Threads: the caller's; the io's client must be the caller's own. */
#include "provider/ssh/claim.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "provider/ssh/obj-kpssh.h"
#include "k8s/status.h"
#include "provider/ssh/inventory.h"

bool kp_claim_held_by(const struct kp_sshhost_view *h, const char *name, const char *uid)
{
    if (!h->claim_name || !kp_streq(h->claim_name, name))
        return false;
    if (h->claim_uid && *h->claim_uid && uid && *uid && !kp_streq(h->claim_uid, uid))
        return false;
    return true;
}

static int cand_cmp(const void *a, const void *b)
{
    const struct kp_sshhost_view *x = *(const struct kp_sshhost_view *const *)a;
    const struct kp_sshhost_view *y = *(const struct kp_sshhost_view *const *)b;

    if (x->meta.creation_usec != y->meta.creation_usec)
        return x->meta.creation_usec < y->meta.creation_usec ? -1 : 1;
    return strcmp(x->e.name, y->e.name);
}

int kp_claim_candidates(const struct kp_sshnodeclass_view *nc, const char *pool_ns, const char *cls,
                        const struct kp_sshhost_view *const *hosts, size_t n_hosts,
                        const struct kp_sshhost_view ***ret_v, size_t *ret_n)
{
    const struct kp_sshhost_view **v = NULL;
    size_t n = 0;

    if (n_hosts) {
        v = kp_calloc(n_hosts, sizeof(*v));
        if (!v)
            return -ENOMEM;
    }
    for (size_t i = 0; i < n_hosts; i++) {
        const struct kp_sshhost_view *h = hosts[i];

        /* A younger SSHHost of an address already in the pool is never claimed, even before the
         * host controller has marked it DuplicateAddress: one machine, one join. */
        if (kp_inventory_member(nc, pool_ns, h) && kp_inventory_claimable(h) &&
            kp_streq(kp_sshhost_class(h), cls) && !kp_inventory_duplicate_of(h, hosts, n_hosts))
            v[n++] = h;
    }
    if (n == 0) {
        kp_free(v);
        v = NULL;
    } else
        qsort(v, n, sizeof(*v), cand_cmp);
    *ret_v = v;
    *ret_n = n;
    return 0;
}

#define ST(...) KP_JSON_PATH("status", __VA_ARGS__)

/* The Ready condition of st into the object cond. */
/* The host controller's fields of st into p. */
static int patch_probe_facts(json_t *p, const struct kp_claim_status *st)
{
    char buf[64];
    int r;

    if (st->set_observed) {
        (void)snprintf(buf, sizeof(buf), "%" PRIu32, st->observed_cpus);
        if ((r = kp_json_patch_set_str(p, ST("observedCapacity", "cpu"), buf)) < 0)
            return r;
        if (st->observed_mem_bytes % 1024 == 0)
            (void)snprintf(buf, sizeof(buf), "%" PRIu64 "Ki", st->observed_mem_bytes / 1024);
        else
            (void)snprintf(buf, sizeof(buf), "%" PRIu64, st->observed_mem_bytes);
        if ((r = kp_json_patch_set_str(p, ST("observedCapacity", "memory"), buf)) < 0)
            return r;
        if (st->observed_arch &&
            (r = kp_json_patch_set_str(p, ST("observedArch"), st->observed_arch)) < 0)
            return r;
    }
    if (st->last_probe_usec > 0) {
        if ((r = kp_time_format_rfc3339((uint64_t)st->last_probe_usec, buf, sizeof(buf))) < 0 ||
            (r = kp_json_patch_set_str(p, ST("lastProbeTime"), buf)) < 0)
            return r;
    }
    if (st->set_observed_generation &&
        (r = kp_json_patch_set_int(p, ST("observedGeneration"), st->observed_generation)) < 0)
        return r;
    if (st->set_ready) {
        json_t *arr = NULL;
        char ts[64];

        if ((r = kp_time_format_rfc3339(
                 (uint64_t)(st->ready_transition_usec > 0 ? st->ready_transition_usec : 0), ts,
                 sizeof(ts))) < 0 ||
            (r = kp_conditions_patch_one("Ready", st->ready_status, st->ready_reason,
                                         st->ready_message, st->observed_generation, ts, &arr)) <
                0 ||
            (r = kp_json_patch_set_steal(p, ST("conditions"), arr)) < 0)
            return r;
    }
    return 0;
}

int kp_claim_patch(const char *rv, const struct kp_claim_status *st, json_t **ret)
{
    json_t *p = NULL;
    int r;

    if (!rv || !*rv)
        return -EINVAL;
    if ((r = kp_json_patch_new(&p)) < 0)
        return r;
    if ((r = kp_json_patch_set_str(p, KP_JSON_PATH("metadata", "resourceVersion"), rv)) < 0)
        goto out;
    if (st->set_state &&
        (r = kp_json_patch_set_str(p, ST("state"), kp_host_state_name(st->state))) < 0)
        goto out;
    if (st->claim_name) {
        if ((r = kp_json_patch_set_str(p, ST("claimRef", "name"), st->claim_name)) < 0)
            goto out;
        if (st->claim_uid && *st->claim_uid &&
            (r = kp_json_patch_set_str(p, ST("claimRef", "uid"), st->claim_uid)) < 0)
            goto out;
    }
    if (st->clear_claim) {
        if ((r = kp_json_patch_set_null(p, ST("claimRef"))) < 0 ||
            (r = kp_json_patch_set_null(p, ST("providerID"))) < 0)
            goto out;
    }
    if ((st->clear_claim || st->clear_bootstrap_token_id) &&
        (r = kp_json_patch_set_null(p, ST("bootstrapTokenID"))) < 0)
        goto out;
    if (st->installed_profile &&
        (r = kp_json_patch_set_str(p, ST("installedProfile"), st->installed_profile)) < 0)
        goto out;
    if (st->bootstrap_token_id &&
        (r = kp_json_patch_set_str(p, ST("bootstrapTokenID"), st->bootstrap_token_id)) < 0)
        goto out;
    if (st->provider_id && (r = kp_json_patch_set_str(p, ST("providerID"), st->provider_id)) < 0)
        goto out;
    if (st->adopted_provider_id &&
        (r = kp_json_patch_set_str(p, ST("adoptedProviderID"), st->adopted_provider_id)) < 0)
        goto out;
    if (st->host_key_fingerprint &&
        (r = kp_json_patch_set_str(p, ST("hostKeyFingerprint"), st->host_key_fingerprint)) < 0)
        goto out;
    if ((r = patch_probe_facts(p, st)) < 0)
        goto out;
    if (st->last_probe_error) {
        if (*st->last_probe_error)
            r = kp_json_patch_set_str(p, ST("lastProbeError"), st->last_probe_error);
        else
            r = kp_json_patch_set_null(p, ST("lastProbeError"));
        if (r < 0)
            goto out;
    }
    *ret = p;
    p = NULL;
    r = 0;
out:
    kp_json_unref(p);
    return r;
}

int kp_claim_write_api(void *ctx, const struct kp_sshhost_view *h, const json_t *patch,
                       struct kp_entry **ret_host, struct kp_error *reterr)
{
    struct kp_client *c = ctx;
    json_t *obj = NULL;
    int r;

    r = kp_client_patch(c, &KP_RES_SSHHOST, h->e.ns, h->e.name, "status", KP_PATCH_MERGE, patch,
                        &obj, reterr);
    if (r < 0)
        return r;
    r = kp_sshhost_project(obj, ret_host);
    kp_json_unref(obj);
    return r;
}

int kp_claim_read_api(void *ctx, const char *ns, const char *name, struct kp_entry **ret_host,
                      struct kp_error *reterr)
{
    struct kp_client *c = ctx;
    json_t *obj = NULL;
    int r;

    r = kp_client_get(c, &KP_RES_SSHHOST, ns, name, &obj, reterr);
    if (r < 0)
        return r;
    r = kp_sshhost_project(obj, ret_host);
    kp_json_unref(obj);
    return r;
}

struct kp_claim_io kp_claim_io_api(struct kp_client *c)
{
    return (struct kp_claim_io){.write = kp_claim_write_api, .read = kp_claim_read_api, .ctx = c};
}

/* Where a claimer that lost the race for the first candidate goes on: a spot in 1..n-1 picked by
 * its NodeClaim uid (FNV-1a), so a burst of claimers spreads over the pool instead of walking it
 * in step, each losing to every one before it. */
static size_t spread_start(const char *uid, size_t n)
{
    uint64_t h = 1469598103934665603ULL;

    for (const char *p = uid ? uid : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return 1 + (size_t)(h % (n - 1));
}

int kp_claim_first(const struct kp_claim_io *io, const struct kp_sshhost_view *const *cands,
                   size_t n, const char *name, const char *uid, struct kp_entry **ret_host,
                   size_t *ret_lost, struct kp_error *reterr)
{
    struct kp_claim_status st = {
        .state = KP_HOST_CLAIMED,
        .set_state = true,
        .claim_name = name,
        .claim_uid = uid,
        .last_probe_error = "",
    };
    size_t lost = 0, start = n > 1 ? spread_start(uid, n) : 0;
    int r = -ENOSPC;

    /* Try 0 (the preferred, oldest host) first; after a lost race, go on from start and wrap
     * around, skipping 0: every candidate is tried once. */
    for (size_t k = 0; k < n; k++) {
        size_t i = k == 0 ? 0 : 1 + (start - 1 + k - 1) % (n - 1);
        json_t *patch = NULL;
        struct kp_entry *got = NULL;

        if ((r = kp_claim_patch(cands[i]->e.rv, &st, &patch)) < 0)
            break;
        r = io->write(io->ctx, cands[i], patch, &got, reterr);
        kp_json_unref(patch);
        if (r == -KP_ECONFLICT || r == -ENOENT) {
            /* Lost the race (or the host went away): someone else changed this host since
             * our snapshot. Move on; never retry the same host. */
            lost++;
            r = -ENOSPC;
            continue;
        }
        if (r < 0)
            break;
        *ret_host = got;
        break;
    }
    if (ret_lost)
        *ret_lost = lost;
    return r;
}

int kp_claim_update(const struct kp_claim_io *io, const struct kp_sshhost_view *host,
                    const char *name, const char *uid, const struct kp_claim_status *st,
                    struct kp_entry **ret_host, struct kp_error *reterr)
{
    struct kp_entry *fresh = NULL;
    const struct kp_sshhost_view *h = host;
    int r = -KP_ECONFLICT;

    for (unsigned try = 0; try < KP_CLAIM_WRITE_TRIES; try++) {
        json_t *patch = NULL;
        struct kp_entry *got = NULL;

        if (!kp_claim_held_by(h, name, uid)) {
            r = -ESTALE;
            break;
        }
        if ((r = kp_claim_patch(h->e.rv, st, &patch)) < 0)
            break;
        r = io->write(io->ctx, h, patch, &got, reterr);
        kp_json_unref(patch);
        if (r == 0) {
            if (ret_host)
                *ret_host = got;
            else
                kp_entry_unref(got);
            break;
        }
        if (r != -KP_ECONFLICT)
            break;
        /* Someone wrote the host since our read (the probe, the token collector): read it again
         * and re-check that the claim is still ours before trying once more. */
        fresh = kp_entry_unref(fresh);
        if ((r = io->read(io->ctx, host->e.ns, host->e.name, &fresh, reterr)) < 0)
            break;
        h = kp_sshhost_view(fresh);
        r = -KP_ECONFLICT;
    }
    kp_entry_unref(fresh);
    return r;
}

int kp_claim_cas(const struct kp_claim_io *io, const struct kp_sshhost_view *host,
                 const struct kp_claim_status *st, struct kp_entry **ret_host,
                 struct kp_error *reterr)
{
    struct kp_entry *got = NULL;
    json_t *patch = NULL;
    int r;

    if ((r = kp_claim_patch(host->e.rv, st, &patch)) < 0)
        return r;
    r = io->write(io->ctx, host, patch, &got, reterr);
    kp_json_unref(patch);
    if (r < 0)
        return r;
    if (ret_host)
        *ret_host = got;
    else
        kp_entry_unref(got);
    return 0;
}

int kp_claim_release(const struct kp_claim_io *io, const struct kp_sshhost_view *host,
                     const char *name, const char *uid, bool healthy, const char *reason,
                     struct kp_entry **ret_host, struct kp_error *reterr)
{
    struct kp_claim_status st = {
        .state = healthy ? KP_HOST_AVAILABLE : KP_HOST_UNHEALTHY,
        .set_state = true,
        .clear_claim = true,
        .last_probe_error = healthy ? "" : (reason && *reason ? reason : "released unhealthy"),
    };

    return kp_claim_update(io, host, name, uid, &st, ret_host, reterr);
}
