/* base/list.h: intrusive circular doubly linked list.
 *
 * Embed a struct kp_list in each element and one as the head; an empty list's head points at
 * itself. O(1) insert and delete, no allocation. Not thread-safe; the owner is named where the
 * list is embedded. */
#ifndef KP_BASE_LIST_H
#define KP_BASE_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"

struct kp_list {
    struct kp_list *prev, *next;
};

#define KP_LIST_HEAD_INIT(name)                                                                    \
    {                                                                                              \
        &(name), &(name)                                                                           \
    }

static inline void kp_list_init(struct kp_list *l)
{
    l->prev = l;
    l->next = l;
}

static inline bool kp_list_empty(const struct kp_list *head)
{
    return head->next == head;
}

static inline void kp_list_insert_between(struct kp_list *n, struct kp_list *prev,
                                          struct kp_list *next)
{
    n->prev = prev;
    n->next = next;
    prev->next = n;
    next->prev = n;
}

static inline void kp_list_add_head(struct kp_list *head, struct kp_list *n)
{
    kp_list_insert_between(n, head, head->next);
}

static inline void kp_list_add_tail(struct kp_list *head, struct kp_list *n)
{
    kp_list_insert_between(n, head->prev, head);
}

/* Unlinks n and leaves it as an empty list, so a second delete is harmless. */
static inline void kp_list_del(struct kp_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    kp_list_init(n);
}

/* The first element or NULL. */
static inline struct kp_list *kp_list_first(const struct kp_list *head)
{
    return kp_list_empty(head) ? NULL : head->next;
}

static inline size_t kp_list_count(const struct kp_list *head)
{
    size_t n = 0;

    for (const struct kp_list *p = head->next; p != head; p = p->next)
        n++;
    return n;
}

#define KP_LIST_ENTRY(ptr, type, member) KP_CONTAINER_OF(ptr, type, member)

/* Iterates pos over the list; safe against deleting pos (tmp holds the next node). */
#define KP_LIST_FOREACH_SAFE(pos, tmp, head)                                                       \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);                               \
         (pos) = (tmp), (tmp) = (pos)->next)
#define KP_LIST_FOREACH(pos, head) for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

#endif
