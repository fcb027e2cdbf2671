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
#include "provider/ssh/provider.h"

struct kp_ssh_attached {
    pthread_mutex_t lock; /* guards rows and n */
    struct kp_ssh_attached_row rows[KP_SSH_ATTACHED_MAX_CLASSES];
    size_t n;
};

bool kp_ssh_node_membership(const struct kp_node_view *n, int64_t now_usec, const char **ret_class,
                            double *ret_seconds, double *ret_vcpu_seconds)
{
    static const size_t scheme_len = sizeof(KP_SSH_PROVIDER_ID_SCHEME) - 1;
    const char *cls;
    bool found = false;
    int64_t cpu_milli;
    double secs;

    if (!n->provider_id || strncmp(n->provider_id, KP_SSH_PROVIDER_ID_SCHEME, scheme_len) != 0 ||
        n->meta.creation_usec <= 0)
        return false;
    cls = kp_labels_get(&n->meta.labels, KP_LABEL_INSTANCE_TYPE);
    cpu_milli = kp_resources_get(&n->capacity, "cpu", &found);
    secs = now_usec > n->meta.creation_usec ? (double)(now_usec - n->meta.creation_usec) / 1e6 : 0;
    *ret_class = cls && *cls ? cls : "default";
    *ret_seconds = secs;
    *ret_vcpu_seconds = found && cpu_milli > 0 ? secs * (double)cpu_milli / 1000.0 : 0;
    return true;
}

void kp_ssh_attached_add(struct kp_ssh_attached_row *rows, size_t *n, size_t cap,
                         const char *class_name, double seconds, double vcpu_seconds)
{
    size_t i;

    if (cap == 0)
        return;
    for (i = 0; i < *n && strcmp(rows[i].class_name, class_name) != 0; i++)
        ;
    if (i == *n) {
        if (*n + 1 < cap || (*n + 1 == cap && strcmp(class_name, "other") == 0)) {
            (void)snprintf(rows[i].class_name, sizeof(rows[i].class_name), "%s", class_name);
            rows[i].seconds = rows[i].vcpu_seconds = 0;
            (*n)++;
        } else {
            /* The last row is "other" once the table is full: found or made here. */
            i = cap - 1;
            if (*n < cap) {
                rows[i].seconds = rows[i].vcpu_seconds = 0;
                *n = cap;
            }
            (void)snprintf(rows[i].class_name, sizeof(rows[i].class_name), "other");
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

void kp_ssh_attached_node_gone(struct kp_ssh_attached *a, const struct kp_node_view *n,
                               int64_t now_usec)
{
    const char *cls;
    double secs, vsecs;

    if (!kp_ssh_node_membership(n, now_usec, &cls, &secs, &vsecs))
        return;
    pthread_mutex_lock(&a->lock);
    kp_ssh_attached_add(a->rows, &a->n, KP_SSH_ATTACHED_MAX_CLASSES, cls, secs, vsecs);
    pthread_mutex_unlock(&a->lock);
}

size_t kp_ssh_attached_finished(struct kp_ssh_attached *a, struct kp_ssh_attached_row *rows,
                                size_t cap)
{
    size_t n;

    pthread_mutex_lock(&a->lock);
    n = a->n < cap ? a->n : cap;
    if (n)
        memcpy(rows, a->rows, n * sizeof(*rows));
    pthread_mutex_unlock(&a->lock);
    return n;
}
