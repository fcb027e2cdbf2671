/* json/json.h: jansson glue — bounded decode, typed getters, bounded encode, merge patches.
 *
 * Only json/ includes <jansson.h> (STYLE.md rule 1); layers above see json_t as an opaque type
 * and reach values through the functions here. Every function that allocates first routes
 * jansson's allocator to kp_malloc/kp_free, so the allocation-failure sweep covers jansson too.
 *
 * Getter conventions (all getters): a missing key, a JSON null value, or a NULL container is
 * -ENOENT; a container or value of the wrong type is -KP_EPARSE; nothing is written to ret_* on
 * error. Returned strings and values are borrowed: they live as long as the tree that holds
 * them and must not be freed. Integers are JSON integers only (1.0 is -KP_EPARSE).
 *
 * Thread rules: a tree may be read by several threads at once as long as nobody changes it and
 * its reference count is not touched concurrently (jansson's refcount is not atomic); STYLE.md
 * rule 9 keeps trees inside one thread anyway. No function here does I/O or logs. */
#ifndef KP_JSON_JSON_H
#define KP_JSON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

/* jansson's own type, declared without its header (a repeated identical typedef is valid C11). */
typedef struct json_t json_t;

struct kp_buf;

/* Nesting accepted when the caller passes max_depth 0. */
#define KP_JSON_DEPTH_DEFAULT 64
/* jansson's compiled-in parser limit; deeper input is refused whatever max_depth says. */
#define KP_JSON_DEPTH_HARD_MAX 2048

/* Where and why decoding failed. line/column are 1-based (0 when unknown), position is the byte
 * offset; text is a NUL-terminated message that may quote input bytes. */
struct kp_json_error {
    int line;
    int column;
    size_t position;
    char text[160];
};

enum kp_json_type {
    KP_JSON_OBJECT,
    KP_JSON_ARRAY,
    KP_JSON_STRING,
    KP_JSON_INTEGER,
    KP_JSON_REAL,
    KP_JSON_TRUE,
    KP_JSON_FALSE,
    KP_JSON_NULL,
};

enum kp_json_dump_flags {
    KP_JSON_SORT_KEYS = 1 << 0, /* object keys in byte order (stable output, golden tests) */
    KP_JSON_PRETTY = 1 << 1,    /* two-space indentation instead of the compact form */
};

/* Decodes the n bytes at p as one JSON value (any type at top level). Refuses n > max_bytes and
 * nesting deeper than max_depth (0: KP_JSON_DEPTH_DEFAULT) with -KP_ELIMIT before parsing;
 * malformed input, trailing bytes, duplicate object keys, NUL in strings (\u0000) and integers
 * outside int64 give -KP_EPARSE. -ENOMEM on allocation failure. On success *ret holds a new
 * reference (release with kp_json_unref). reterr (optional) is filled on -KP_EPARSE and
 * -KP_ELIMIT. Pure: no I/O, no globals besides the one-time allocator setup. Any thread. */
int kp_json_parse(const char *p, size_t n, size_t max_bytes, size_t max_depth, json_t **ret,
                  struct kp_json_error *reterr) KP_WUR;

/* Reference counting; both accept NULL. kp_json_unref returns NULL (q = kp_json_unref(q)). */
json_t *kp_json_ref(json_t *v);
json_t *kp_json_unref(json_t *v);

/* The type of v; v must not be NULL. */
enum kp_json_type kp_json_typeof(const json_t *v) KP_NONNULL(1);

/* Typed views of a value itself (not by key), e.g. for array elements. */
int kp_json_as_str(const json_t *v, const char **ret) KP_WUR;
int kp_json_as_int(const json_t *v, int64_t *ret) KP_WUR;
int kp_json_as_bool(const json_t *v, bool *ret) KP_WUR;
/* Any JSON number, integer or real, as a double (an integer beyond 2^53 loses precision): for
 * inputs whose format says "a number", such as a price. */
int kp_json_as_number(const json_t *v, double *ret) KP_WUR;

/* Typed getters by key in an object. See the conventions at the top. */
int kp_json_get_str(const json_t *obj, const char *key, const char **ret) KP_WUR;
int kp_json_get_int(const json_t *obj, const char *key, int64_t *ret) KP_WUR;
int kp_json_get_bool(const json_t *obj, const char *key, bool *ret) KP_WUR;
int kp_json_get_object(const json_t *obj, const char *key, json_t **ret) KP_WUR;
int kp_json_get_array(const json_t *obj, const char *key, json_t **ret) KP_WUR;

/* Typed getters by dotted path ("metadata.name", "spec.template.spec"): each segment is an
 * object key. Keys that contain '.' (label keys such as "karpenter.sh/nodepool") cannot be
 * spelled here; use kp_json_pathv_* with a segment vector. An empty path or an empty segment is
 * -EINVAL. An intermediate that is not an object is -KP_EPARSE. */
int kp_json_path_str(const json_t *obj, const char *path, const char **ret) KP_WUR;
int kp_json_path_int(const json_t *obj, const char *path, int64_t *ret) KP_WUR;
int kp_json_path_bool(const json_t *obj, const char *path, bool *ret) KP_WUR;
int kp_json_path_object(const json_t *obj, const char *path, json_t **ret) KP_WUR;
int kp_json_path_array(const json_t *obj, const char *path, json_t **ret) KP_WUR;

/* A NULL-terminated vector of path segments, e.g.
 * KP_JSON_PATH("metadata", "labels", "karpenter.sh/nodepool"). */
#define KP_JSON_PATH(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The value at a segment-vector path, whatever its type (borrowed). -ENOENT, -KP_EPARSE as
 * above; an empty vector returns obj itself. */
int kp_json_pathv(const json_t *obj, const char *const *path, json_t **ret) KP_WUR;
int kp_json_pathv_str(const json_t *obj, const char *const *path, const char **ret) KP_WUR;

/* Arrays: the element count (0 for a non-array or NULL) and the i-th element (borrowed; NULL when
 * out of range or not an array). */
size_t kp_json_array_size(const json_t *arr);
json_t *kp_json_array_at(const json_t *arr, size_t i);

/* Object iteration: struct kp_json_iter it = KP_JSON_ITER_INIT;
 * while (kp_json_object_next(obj, &it, &key, &value)) { ... }
 * Keys and values are borrowed; the object must not change during iteration. False at the end
 * or when obj is not an object. */
struct kp_json_iter {
    void *it;
    bool started;
};
#define KP_JSON_ITER_INIT                                                                          \
    {                                                                                              \
        .it = NULL, .started = false                                                               \
    }
bool kp_json_object_next(const json_t *obj, struct kp_json_iter *it, const char **ret_key,
                         json_t **ret_value);

/* Encodes v and appends it to out (compact unless KP_JSON_PRETTY). Any top-level type. 0,
 * -ENOMEM, or -KP_ELIMIT when out's ceiling is crossed (out is then released, per kp_buf). On
 * -ENOMEM out may hold a partial prefix. Any thread. */
int kp_json_dump(const json_t *v, enum kp_json_dump_flags flags, struct kp_buf *out) KP_WUR;

/* --- JSON merge patches (RFC 7386) ---------------------------------------------------------
 * A patch is a JSON object built by setting leaves at segment-vector paths; intermediate objects
 * are created as needed. Setting a leaf to null deletes that field on the server. A patch that
 * sets ("metadata", "resourceVersion") is a compare-and-swap (STYLE.md section 3). */

/* A new empty object: 0 or -ENOMEM. Release with kp_json_unref. */
int kp_json_patch_new(json_t **ret) KP_WUR;
/* Set the leaf at path (at least one segment). 0, -ENOMEM, -EINVAL (empty path or NULL string),
 * or -KP_EPARSE when an intermediate already holds a non-object. On error the patch is either
 * unchanged or holds extra empty intermediate objects, which is harmless in a merge patch.
 * A string that is not valid UTF-8 is stored with U+FFFD for each bad byte (kp_utf8_scrub). */
int kp_json_patch_set_str(json_t *patch, const char *const *path, const char *value) KP_WUR;
int kp_json_patch_set_int(json_t *patch, const char *const *path, int64_t value) KP_WUR;
int kp_json_patch_set_bool(json_t *patch, const char *const *path, bool value) KP_WUR;
int kp_json_patch_set_null(json_t *patch, const char *const *path) KP_WUR;
/* Sets the leaf to value and takes over the caller's reference to it, even on failure. */
int kp_json_patch_set_steal(json_t *patch, const char *const *path, json_t *value) KP_WUR;

/* A new JSON string holding a copy of s; text that is not valid UTF-8 is stored with U+FFFD for
 * each bad byte (kp_utf8_scrub). 0, -ENOMEM or -EINVAL (s NULL). */
int kp_json_string_new(const char *s, json_t **ret) KP_WUR;
/* A new empty array: 0 or -ENOMEM. Release with kp_json_unref. */
int kp_json_array_new(json_t **ret) KP_WUR;
/* Appends value to arr and takes over the caller's reference to it, even on failure. 0, -ENOMEM,
 * or -EINVAL (arr not an array, value NULL). */
int kp_json_array_append_steal(json_t *arr, json_t *value) KP_WUR;

/* Builds the merge patch that turns old into new (both objects; NULL counts as {}): changed or
 * added members carry their new value, removed members become null, nested objects recurse, and
 * arrays or scalars that differ are replaced whole. An empty object means "no change".
 * 0, -ENOMEM, -EINVAL (old or new not an object). *ret holds a new reference. */
int kp_json_merge_patch_diff(const json_t *old_doc, const json_t *new_doc, json_t **ret) KP_WUR;

/* True when a and b are equal JSON values (deep; object key order ignored). */
bool kp_json_equal(const json_t *a, const json_t *b);

#endif
