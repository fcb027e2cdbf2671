/* DESIGN: the write fence (fence.h). A single atomic deadline rather than a flag, so the
 * fence closes by itself when time passes without a renewal: the writer's own clock read is
 * the check, and nothing has to run at the deadline for it to hold. Relaxed ordering would do
 * for the value itself; the default sequential consistency costs nothing at this rate and
 * keeps a closed fence visible to a writer that reads after the store. */
#include "k8s/fence.h"

#include "base/err.h"
#include "base/time.h"

void kp_fence_init(struct kp_fence *f, uint64_t until)
{
    atomic_init(&f->until, until);
}

void kp_fence_set(struct kp_fence *f, uint64_t until)
{
    atomic_store(&f->until, until);
}

int kp_fence_check(const struct kp_fence *f)
{
    uint64_t until;

    if (!f)
        return 0;
    until = atomic_load(&f->until);
    if (until == KP_FENCE_OPEN)
        return 0;
    return kp_mono_usec() < until ? 0 : -KP_ENOTLEADER;
}
