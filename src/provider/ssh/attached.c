/* provider/ssh/attached.c: the attached-time tally (attached.h). */
#include "provider/ssh/attached.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/obj-node.h"
#include "api/obj.h"
#include "base/alloc.h"
#include "core/provider.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/provider.h"

#define OTHER "other"
/* The NodeClass label of SSHNodeClass Nodes (core/core.h kp_core_nodeclass_label: the group, "/"
 * and the kind in lower case); tests/unit/test-attached.c checks it against that function. */
#define NODECLASS_LABEL KP_KPSSH_GROUP "/sshnodeclass"

struct kp_ssh_attached {
    pthread_mutex_t lock; /* guards everything below */
    struct kp_ssh_attached_row rows[KP_SSH_ATTACHED_MAX_CLASSES];
    size_t n;
    bool running;      /* leading, informers synced: counting */
    int64_t last_usec; /* the last accounting (or the resume) */
};

bool kp_ssh_node_membership(const struct kp_node_view *n, int64_t since_usec, int64_t now_usec,
                            const char **ret_class, double *ret_seconds, double *ret_vcpu_seconds)
{
    static const size_t scheme_len = sizeof(KP_SSH_PROVIDER_ID_SCHEME) - 1;
    const char *cls;
    bool found = false;
    int64_t cpu_milli, from;
    double secs;

    if (n->meta.creation_usec <= 0)
        return false;
    if (!(n->provider_id && strncmp(n->provider_id, KP_SSH_PROVIDER_ID_SCHEME, scheme_len) == 0) &&
        !kp_labels_get(&n->meta.labels, NODECLASS_LABEL))
        return false;
    cls = kp_labels_get(&n->meta.labels, KP_LABEL_INSTANCE_TYPE);
    cpu_milli = kp_resources_get(&n->capacity, "cpu", &found);
    from = since_usec > n->meta.creation_usec ? since_usec : n->meta.creation_usec;
    secs = now_usec > from ? (double)(now_usec - from) / 1e6 : 0;
    *ret_class = cls && *cls ? cls : "default";
    *ret_seconds = secs;
    *ret_vcpu_seconds = found && cpu_milli > 0 ? secs * (double)cpu_milli / 1000.0 : 0;
    return true;
}

void kp_ssh_attached_add(struct kp_ssh_attached_row *rows, size_t *n, size_t cap,
                         const char *class_name, double seconds, double vcpu_seconds)
{
    size_t i, other = *n;

    if (cap == 0)
        return;
    for (i = 0; i < *n; i++) {
        if (strcmp(rows[i].class_name, OTHER) == 0)
            other = i;
        if (strcmp(rows[i].class_name, class_name) == 0)
            break;
    }
    if (i == *n) {
        /* A new class: a row of its own while one stays free for "other" (unless "other"
         * exists already), else the "other" row, made if need be. */
        bool room = *n + (other < *n ? 0 : 1) < cap;

        if (strcmp(class_name, OTHER) != 0 && room) {
            (void)snprintf(rows[i].class_name, sizeof(rows[i].class_name), "%s", class_name);
        } else if (other < *n) {
            i = other;
        } else {
            (void)snprintf(rows[i].class_name, sizeof(rows[i].class_name), OTHER);
        }
        if (i == *n) {
            rows[i].seconds = rows[i].vcpu_seconds = 0;
            (*n)++;
        }
    }
    rows[i].seconds += seconds;
    rows[i].vcpu_seconds += vcpu_seconds;
}

int kp_ssh_attached_new(struct kp_ssh_attached **ret)
{
    struct kp_ssh_attached *a = kp_calloc(1, sizeof(*a));

    if (!a)
        return -ENOMEM;
    pthread_mutex_init(&a->lock, NULL);
    *ret = a;
    return 0;
}

struct kp_ssh_attached *kp_ssh_attached_free(struct kp_ssh_attached *a)
{
    if (a) {
        pthread_mutex_destroy(&a->lock);
        kp_free(a);
    }
    return NULL;
}

void kp_ssh_attached_resume(struct kp_ssh_attached *a, int64_t now_usec)
{
    pthread_mutex_lock(&a->lock);
    a->running = true;
    a->last_usec = now_usec;
    pthread_mutex_unlock(&a->lock);
}

void kp_ssh_attached_pause(struct kp_ssh_attached *a)
{
    pthread_mutex_lock(&a->lock);
    a->running = false;
    pthread_mutex_unlock(&a->lock);
}

void kp_ssh_attached_node_gone(struct kp_ssh_attached *a, const struct kp_node_view *n,
                               int64_t now_usec)
{
    const char *cls;
    double secs, vsecs;

    pthread_mutex_lock(&a->lock);
    if (a->running && kp_ssh_node_membership(n, a->last_usec, now_usec, &cls, &secs, &vsecs))
        kp_ssh_attached_add(a->rows, &a->n, KP_SSH_ATTACHED_MAX_CLASSES, cls, secs, vsecs);
    pthread_mutex_unlock(&a->lock);
}

/* An accounting adds into a copy of the sums, committed only when the walk succeeded. */
struct account_ctx {
    int64_t since, now;
    struct kp_ssh_attached_row rows[KP_SSH_ATTACHED_MAX_CLASSES];
    size_t n;
};

static void account_live(void *vctx, const struct kp_node_view *n)
{
    struct account_ctx *c = vctx;
    const char *cls;
    double secs, vsecs;

    if (kp_ssh_node_membership(n, c->since, c->now, &cls, &secs, &vsecs))
        kp_ssh_attached_add(c->rows, &c->n, KP_SSH_ATTACHED_MAX_CLASSES, cls, secs, vsecs);
}

size_t kp_ssh_attached_account(struct kp_ssh_attached *a, int64_t now_usec,
                               int (*live)(void *ctx, kp_ssh_attached_visit_fn visit, void *vctx),
                               void *ctx, struct kp_ssh_attached_row *rows, size_t cap)
{
    struct account_ctx *c = kp_calloc(1, sizeof(*c));
    size_t n;

    pthread_mutex_lock(&a->lock);
    /* Without memory for the copy nothing is added now; last_usec stays, so the next
     * accounting adds the whole span. */
    if (c && a->running && now_usec > a->last_usec) {
        c->since = a->last_usec;
        c->now = now_usec;
        c->n = a->n;
        memcpy(c->rows, a->rows, a->n * sizeof(*c->rows));
        if (live(ctx, account_live, c) == 0) {
            memcpy(a->rows, c->rows, c->n * sizeof(*a->rows));
            a->n = c->n;
            a->last_usec = now_usec;
        }
    }
    n = a->n < cap ? a->n : cap;
    if (n)
        memcpy(rows, a->rows, n * sizeof(*rows));
    pthread_mutex_unlock(&a->lock);
    kp_free(c);
    return n;
}
