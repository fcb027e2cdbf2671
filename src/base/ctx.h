/* base/ctx.h: a call context: a deadline and a cancel flag, handed down a call chain so that
 * any long call (an SSH phase, a provider call, an API request made for one reconcile) can stop
 * when its caller no longer wants the answer.
 *
 * A context may have a parent; it is done when it or any ancestor is cancelled or past its
 * deadline. Typical chain: the process (cancelled by SIGTERM or by losing the Lease) <- one
 * reconcile (its deadline) <- one SSH job (its phase timeout). A parent must outlive its
 * children; contexts are plain structs, usually on the stack or inside the job they bound.
 *
 * Threads: kp_ctx_cancel and every reader from any thread (the flag is atomic, the rest is
 * immutable after kp_ctx_init). */
#ifndef KP_BASE_CTX_H
#define KP_BASE_CTX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"
#include "base/time.h"

struct kp_ctx {
    const struct kp_ctx *parent; /* NULL at the root */
    struct kp_deadline deadline; /* this level's own deadline; never for none */
    atomic_bool cancelled;
};

/* A context under parent (NULL: a root) with a deadline (kp_deadline_never() for none). */
void kp_ctx_init(struct kp_ctx *ctx, const struct kp_ctx *parent, struct kp_deadline deadline)
    KP_NONNULL(1);
/* Cancels ctx and so every context under it. Idempotent. */
void kp_ctx_cancel(struct kp_ctx *ctx) KP_NONNULL(1);
/* 0 while ctx may go on; -ECANCELED once it or an ancestor was cancelled (checked first), else
 * -ETIMEDOUT once it or an ancestor is past its deadline. NULL is a context that never ends. */
int kp_ctx_err(const struct kp_ctx *ctx) KP_WUR;
static inline bool kp_ctx_done(const struct kp_ctx *ctx)
{
    return kp_ctx_err(ctx) != 0;
}
/* The earliest deadline along the chain (never for NULL), to bound a wait or a timeout. */
struct kp_deadline kp_ctx_deadline(const struct kp_ctx *ctx);

#endif
