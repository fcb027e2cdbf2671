/* base/map.h: hash map from strings to pointers.
 *
 * Open addressing with linear probing and a per-map random SipHash key, so names chosen by
 * whoever writes Kubernetes objects cannot force collisions. Keys are copied; values are not
 * owned (the map never frees them). Not thread-safe: the owner (a thread or a lock) is named
 * where a map is embedded. Iteration order is unspecified and changes on insertion. */
#ifndef KP_BASE_MAP_H
#define KP_BASE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_map;

/* 0 or -ENOMEM. */
int kp_map_new(struct kp_map **ret) KP_WUR;
/* Frees the map and its key copies (not the values); accepts and returns NULL. */
struct kp_map *kp_map_free(struct kp_map *m);

/* Inserts or replaces. When key existed, *ret_old (optional) receives the old value, else NULL.
 * 0, or -ENOMEM (map unchanged). */
int kp_map_put(struct kp_map *m, const char *key, void *value, void **ret_old) KP_WUR;
/* The value, or NULL when absent (store non-NULL values to tell the two apart). */
void *kp_map_get(const struct kp_map *m, const char *key);
bool kp_map_contains(const struct kp_map *m, const char *key);
/* Removes key; returns its value or NULL when absent. */
void *kp_map_remove(struct kp_map *m, const char *key);
size_t kp_map_size(const struct kp_map *m);

/* Iteration: size_t it = 0; while (kp_map_next(m, &it, &key, &value)) { ... }
 * The map must not change during iteration (removal shifts entries, so collect keys first). */
bool kp_map_next(const struct kp_map *m, size_t *it, const char **ret_key, void **ret_value);

/* SipHash-2-4 of n bytes under a 16-byte key, exported for indexers that need a stable hash. */
uint64_t kp_siphash24(const void *p, size_t n, const uint8_t key[16]);

#endif
