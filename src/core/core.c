/* core/core.c: the defaults of the core's timing and its clock (core/core.h). */
#include "core/core.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "base/time.h"
#include "api/indexes.h"
#include "api/obj-pod.h"
#include "k8s/store.h"

#define SEC 1000000ULL

void kp_core_timing_defaults(struct kp_core_timing *t)
{
    if (!t->launch_timeout_usec)
        t->launch_timeout_usec = 5 * 60 * SEC;
    if (!t->registration_ttl_usec)
        t->registration_ttl_usec = 15 * 60 * SEC;
    if (!t->gc_interval_usec)
        t->gc_interval_usec = 2 * 60 * SEC;
    if (!t->orphan_node_grace_usec)
        t->orphan_node_grace_usec = 60 * SEC;
    if (!t->delete_retry_usec)
        t->delete_retry_usec = 5 * SEC;
    if (!t->drain_retry_usec)
        t->drain_retry_usec = 1 * SEC;
    if (!t->min_drain_usec)
        t->min_drain_usec = 5 * SEC;
    if (!t->nodepool_counter_usec)
        t->nodepool_counter_usec = 5 * SEC;
}

uint64_t kp_core_now(const struct kp_core_env *env)
{
    return env && env->now_usec ? env->now_usec() : kp_real_usec();
}

bool kp_core_nodeclass_label(const char *group, const char *kind, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/%s", group ? group : "", kind ? kind : "");
    char *slash;

    if (n < 0 || (size_t)n >= size)
        return false;
    slash = strchr(buf, '/');
    for (char *q = slash ? slash + 1 : buf; *q; q++)
        *q = (char)tolower((unsigned char)*q);
    return true;
}

static int count_reschedulable(void *ctx, struct kp_entry *e)
{
    *(uint32_t *)ctx += kp_pod_reschedulable(kp_pod_view(e));
    return 0;
}

uint32_t kp_core_reschedulable_on(struct kp_store *pods, const char *node)
{
    uint32_t n = 0;

    if (!pods || !node || !*node ||
        kp_store_walk_index(pods, KP_INDEX_POD_NODE, node, count_reschedulable, &n) < 0)
        return 0;
    return n;
}
