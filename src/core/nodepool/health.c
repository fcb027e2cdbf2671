/* core/nodepool/health.c: NodeRegistrationHealthy's buffer and rules (health.h).
 *
 * DESIGN: the tracker is a fixed ring of booleans, a plain value, so the controller can copy
 * it, apply a batch of outcomes to the copy ("dry run", as Karpenter's DryRun does per outcome)
 * and keep the copy only once the status write that reports it succeeded. Pure; any thread. */
#include "core/nodepool/health.h"

#include "base/str.h"
#include "api/obj-karpenter.h"
#include "core/conds.h"
#include "core/core.h"

void kp_np_health_insert(struct kp_np_health_tracker *t, bool success)
{
    t->v[t->next] = success;
    t->next = (t->next + 1) % KP_NP_HEALTH_BUFFER;
    if (t->n < KP_NP_HEALTH_BUFFER)
        t->n++;
}

enum kp_np_health kp_np_health_status(const struct kp_np_health_tracker *t)
{
    size_t failures = 0;

    if (t->n == 0)
        return KP_NP_HEALTH_UNKNOWN;
    /* The slots held are the n before next; which ones does not matter for a count. */
    for (size_t i = 0; i < t->n; i++)
        if (!t->v[(t->next + KP_NP_HEALTH_BUFFER - 1 - i) % KP_NP_HEALTH_BUFFER])
            failures++;
    /* Karpenter divides by the buffer's size, not by what it holds: failures / 4 >= 0.5. */
    return 2 * failures >= KP_NP_HEALTH_BUFFER ? KP_NP_HEALTH_UNHEALTHY : KP_NP_HEALTH_HEALTHY;
}

void kp_np_health_seed(struct kp_np_health_tracker *t, enum kp_np_health s)
{
    *t = (struct kp_np_health_tracker){0};
    if (s == KP_NP_HEALTH_HEALTHY)
        kp_np_health_insert(t, true);
    else if (s == KP_NP_HEALTH_UNHEALTHY)
        for (size_t i = 0; i < KP_NP_HEALTH_BUFFER / 2; i++)
            kp_np_health_insert(t, false);
}

static bool is_true(const struct kp_condition *c)
{
    return c && c->status == KP_COND_TRUE;
}

/* Whether now - since >= limit (microseconds), with since 0 (unknown) never timed out. */
static bool elapsed(int64_t now, int64_t since, uint64_t limit)
{
    return since > 0 && now >= since && (uint64_t)(now - since) >= limit;
}

enum kp_np_outcome kp_nodeclaim_registration_outcome(const struct kp_nodeclaim_view *old_nc,
                                                     const struct kp_nodeclaim_view *new_nc,
                                                     const struct kp_core_timing *timing,
                                                     const char **ret_reason,
                                                     const char **ret_message)
{
    const struct kp_condition *reg = kp_conditions_get(&new_nc->conditions, KP_NC_COND_REGISTERED);
    const struct kp_condition *launched =
        kp_conditions_get(&new_nc->conditions, KP_NC_COND_LAUNCHED);
    int64_t at = new_nc->meta.deletion_usec;

    if (!old_nc)
        return KP_NP_OUTCOME_NONE; /* first sight: no moment of decision was observed */
    if (is_true(reg))
        return is_true(kp_conditions_get(&old_nc->conditions, KP_NC_COND_REGISTERED))
                   ? KP_NP_OUTCOME_NONE
                   : KP_NP_OUTCOME_SUCCESS;
    if (old_nc->meta.deletion_usec != 0 || at == 0 || !launched)
        return KP_NP_OUTCOME_NONE;
    if (!is_true(launched)) {
        if (!elapsed(at, launched->last_transition_usec, timing->launch_timeout_usec))
            return KP_NP_OUTCOME_NONE;
        *ret_reason = launched->reason && *launched->reason ? launched->reason : "LaunchFailed";
        *ret_message = launched->message ? launched->message : "";
        return KP_NP_OUTCOME_FAILURE;
    }
    if (!reg || !elapsed(at, reg->last_transition_usec, timing->registration_ttl_usec))
        return KP_NP_OUTCOME_NONE;
    *ret_reason = KP_NP_REASON_REGISTRATION_FAILED;
    *ret_message = "Failed to register node";
    return KP_NP_OUTCOME_FAILURE;
}

int kp_np_health_sync(struct kp_np_health_tracker *t, struct kp_condset *cs,
                      const struct kp_nodepool_view *np, int64_t class_generation)
{
    const struct kp_condset_item *c = kp_condset_get(cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY);

    if (kp_np_health_status(t) == KP_NP_HEALTH_UNKNOWN && c) {
        if (c->status == KP_COND_TRUE)
            kp_np_health_seed(t, KP_NP_HEALTH_HEALTHY);
        else if (c->status == KP_COND_FALSE)
            kp_np_health_seed(t, KP_NP_HEALTH_UNHEALTHY);
    }
    if (c && np->node_class_observed_generation == class_generation &&
        c->observed_generation == np->generation)
        return 0;
    kp_np_health_seed(t, KP_NP_HEALTH_UNKNOWN);
    return kp_condset_set(cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_UNKNOWN, NULL,
                          "object is awaiting reconciliation");
}

int kp_np_health_apply(struct kp_np_health_tracker *t, struct kp_condset *cs, bool success,
                       const char *reason, const char *message)
{
    const struct kp_condset_item *c = kp_condset_get(cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY);
    struct kp_np_health_tracker dry = *t;
    int r = 0;

    kp_np_health_insert(&dry, success);
    if (success && kp_np_health_status(&dry) == KP_NP_HEALTH_HEALTHY &&
        !(c && c->status == KP_COND_TRUE))
        r = kp_condset_set(cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_TRUE, NULL, NULL);
    else if (!success && kp_np_health_status(&dry) == KP_NP_HEALTH_UNHEALTHY &&
             !(c && c->status == KP_COND_FALSE))
        r = kp_condset_set(cs, KP_NP_COND_NODE_REGISTRATION_HEALTHY, KP_COND_FALSE, reason,
                           message);
    if (r == 0)
        *t = dry;
    return r;
}
