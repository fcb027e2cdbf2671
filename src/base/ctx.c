/* DESIGN: call contexts (ctx.h).
 *
 * A chain of structs rather than a registry of children: cancelling a parent does not visit its
 * children, each reader walks up instead. Chains are short (three or four levels), readers are
 * the long calls themselves between two steps, so the walk costs less than the locking a child
 * list would need, and a child needs no unregistering when it ends. */
#include "base/ctx.h"

#include <errno.h>
#include <stddef.h>

void kp_ctx_init(struct kp_ctx *ctx, const struct kp_ctx *parent, struct kp_deadline deadline)
{
    ctx->parent = parent;
    ctx->deadline = deadline;
    atomic_init(&ctx->cancelled, false);
}

void kp_ctx_cancel(struct kp_ctx *ctx)
{
    atomic_store(&ctx->cancelled, true);
}

int kp_ctx_err(const struct kp_ctx *ctx)
{
    int r = 0;

    for (const struct kp_ctx *c = ctx; c; c = c->parent) {
        if (atomic_load(&c->cancelled))
            return -ECANCELED;
        if (r == 0 && kp_deadline_expired(c->deadline))
            r = -ETIMEDOUT;
    }
    return r;
}

struct kp_deadline kp_ctx_deadline(const struct kp_ctx *ctx)
{
    struct kp_deadline d = kp_deadline_never();

    for (const struct kp_ctx *c = ctx; c; c = c->parent)
        d = kp_deadline_min(d, c->deadline);
    return d;
}
