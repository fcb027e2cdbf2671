/* DESIGN: jansson glue.
 *
 * What: the only translation unit that includes <jansson.h>. It decodes bounded input, offers
 * typed getters that never crash on the wrong type, encodes into a ceilinged kp_buf and builds
 * JSON merge patches.
 *
 * Why this way: every byte we decode comes from an API server or a file we do not control, so
 * decode checks the byte ceiling and the nesting depth before jansson sees the input (jansson's
 * parser recurses, and its compiled-in depth limit of 2048 is far above what any Kubernetes
 * object needs). Duplicate keys are refused because two decoders reading the same document
 * differently is how smuggling bugs start; NUL inside strings is refused so every string we
 * hand out is a plain C string.
 *
 * XXX: jansson 2.14 (Debian 12) reaches assert(0) in its string lexer when an allocation fails
 * while it unescapes a string (load.c, lex_scan_string), so an out-of-memory at that exact point
 * aborts the process instead of returning -ENOMEM. Torture cases avoid escaped strings for this
 * reason; a fix belongs upstream.
 *
 * Allocator: jansson's allocator is process-global. The first call of any function here that may
 * allocate installs kp_malloc/kp_free through pthread_once, so allocation-failure sweeps cover
 * jansson's allocations and the live-allocation count sees its leaks. The same once-routine
 * seeds jansson's hash function (it reads /dev/urandom), so that one-time read happens at a
 * known point and not inside an arbitrary later decode.
 *
 * Threads: any thread may call anything here; trees follow STYLE.md rule 9 (one owner). */
#include "json/json.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"

static pthread_once_t kp_json_once = PTHREAD_ONCE_INIT;

static void kp_json_init_once(void)
{
    json_set_alloc_funcs(kp_malloc, kp_free);
    json_object_seed(0);
}

static void kp_json_setup(void)
{
    int r = pthread_once(&kp_json_once, kp_json_init_once);

    /* pthread_once only fails for an invalid once control, which would be a programmer error. */
    (void)r;
}

static void kp_json_error_set(struct kp_json_error *e, int line, int column, size_t position,
                              const char *text)
{
    if (!e)
        return;
    e->line = line;
    e->column = column;
    e->position = position;
    /* A message longer than the field is cut (-E2BIG); the position says where to look. gcc does
     * not accept a (void) cast on a warn_unused_result call, hence the empty branch. */
    if (kp_strscpy(e->text, sizeof(e->text), text) < 0) {
    }
}

/* Depth of the deepest array or object in the n bytes at p, or SIZE_MAX once it passes limit.
 * Strings are skipped so brackets inside them do not count; malformed input is jansson's to
 * reject, this only bounds how deep jansson could recurse. */
static size_t kp_json_depth(const char *p, size_t n, size_t limit, size_t *ret_pos)
{
    size_t depth = 0, deepest = 0;
    bool in_string = false, escaped = false;

    for (size_t i = 0; i < n; i++) {
        char c = p[i];

        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            depth++;
            if (depth > deepest)
                deepest = depth;
            if (depth > limit) {
                *ret_pos = i;
                return SIZE_MAX;
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return deepest;
}

int kp_json_parse(const char *p, size_t n, size_t max_bytes, size_t max_depth, json_t **ret,
                  struct kp_json_error *reterr)
{
    json_error_t jerr;
    json_t *v = NULL;
    size_t pos = 0;
    int r;

    kp_json_setup();
    if (max_depth == 0)
        max_depth = KP_JSON_DEPTH_DEFAULT;
    if (n > max_bytes) {
        kp_json_error_set(reterr, 0, 0, max_bytes, "document larger than its ceiling");
        r = -KP_ELIMIT;
        goto out;
    }
    if (!p && n > 0) {
        r = -EINVAL;
        goto out;
    }
    if (kp_json_depth(p, n, KP_MIN(max_depth, (size_t)KP_JSON_DEPTH_HARD_MAX), &pos) == SIZE_MAX) {
        kp_json_error_set(reterr, 0, 0, pos, "document nested deeper than its ceiling");
        r = -KP_ELIMIT;
        goto out;
    }
    v = json_loadb(p ? p : "", n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        if (json_error_code(&jerr) == json_error_out_of_memory) {
            r = -ENOMEM;
            goto out;
        }
        kp_json_error_set(reterr, jerr.line, jerr.column, (size_t)KP_MAX(jerr.position, 0),
                          jerr.text);
        r = -KP_EPARSE;
        goto out;
    }
    *ret = v;
    v = NULL;
    r = 0;
out:
    json_decref(v);
    return r;
}

json_t *kp_json_ref(json_t *v)
{
    return json_incref(v);
}

json_t *kp_json_unref(json_t *v)
{
    json_decref(v);
    return NULL;
}

enum kp_json_type kp_json_typeof(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return KP_JSON_OBJECT;
    case JSON_ARRAY:
        return KP_JSON_ARRAY;
    case JSON_STRING:
        return KP_JSON_STRING;
    case JSON_INTEGER:
        return KP_JSON_INTEGER;
    case JSON_REAL:
        return KP_JSON_REAL;
    case JSON_TRUE:
        return KP_JSON_TRUE;
    case JSON_FALSE:
        return KP_JSON_FALSE;
    case JSON_NULL:
    default:
        return KP_JSON_NULL;
    }
}

int kp_json_as_str(const json_t *v, const char **ret)
{
    if (!v || json_is_null(v))
        return -ENOENT;
    if (!json_is_string(v))
        return -KP_EPARSE;
    *ret = json_string_value(v);
    return 0;
}

int kp_json_as_int(const json_t *v, int64_t *ret)
{
    if (!v || json_is_null(v))
        return -ENOENT;
    if (!json_is_integer(v))
        return -KP_EPARSE;
    *ret = (int64_t)json_integer_value(v);
    return 0;
}

int kp_json_as_number(const json_t *v, double *ret)
{
    if (!v || json_is_null(v))
        return -ENOENT;
    if (!json_is_number(v))
        return -KP_EPARSE;
    *ret = json_number_value(v);
    return 0;
}

int kp_json_as_bool(const json_t *v, bool *ret)
{
    if (!v || json_is_null(v))
        return -ENOENT;
    if (!json_is_boolean(v))
        return -KP_EPARSE;
    *ret = json_is_true(v);
    return 0;
}

static int kp_json_as_object(const json_t *v, json_t **ret)
{
    if (!v || json_is_null(v))
        return -ENOENT;
    if (!json_is_object(v))
        return -KP_EPARSE;
    /* jansson's getters hand out non-const pointers into a const tree; so do we (borrowed). */
    *ret = (json_t *)(uintptr_t)v;
    return 0;
}

static int kp_json_as_array(const json_t *v, json_t **ret)
{
    if (!v || json_is_null(v))
        return -ENOENT;
    if (!json_is_array(v))
        return -KP_EPARSE;
    *ret = (json_t *)(uintptr_t)v;
    return 0;
}

/* The member named by the len bytes at key, or the usual getter errors for the container. */
static int kp_json_member(const json_t *obj, const char *key, size_t len, json_t **ret)
{
    json_t *v;

    if (!obj || json_is_null(obj))
        return -ENOENT;
    if (!json_is_object(obj))
        return -KP_EPARSE;
    v = json_object_getn(obj, key, len);
    if (!v)
        return -ENOENT;
    *ret = v;
    return 0;
}

static int kp_json_key(const json_t *obj, const char *key, json_t **ret)
{
    if (!key)
        return -EINVAL;
    return kp_json_member(obj, key, strlen(key), ret);
}

int kp_json_get_str(const json_t *obj, const char *key, const char **ret)
{
    json_t *v = NULL;
    int r = kp_json_key(obj, key, &v);

    return r < 0 ? r : kp_json_as_str(v, ret);
}

int kp_json_get_int(const json_t *obj, const char *key, int64_t *ret)
{
    json_t *v = NULL;
    int r = kp_json_key(obj, key, &v);

    return r < 0 ? r : kp_json_as_int(v, ret);
}

int kp_json_get_bool(const json_t *obj, const char *key, bool *ret)
{
    json_t *v = NULL;
    int r = kp_json_key(obj, key, &v);

    return r < 0 ? r : kp_json_as_bool(v, ret);
}

int kp_json_get_object(const json_t *obj, const char *key, json_t **ret)
{
    json_t *v = NULL;
    int r = kp_json_key(obj, key, &v);

    return r < 0 ? r : kp_json_as_object(v, ret);
}

int kp_json_get_array(const json_t *obj, const char *key, json_t **ret)
{
    json_t *v = NULL;
    int r = kp_json_key(obj, key, &v);

    return r < 0 ? r : kp_json_as_array(v, ret);
}

/* Walks a dotted path without copying it: each segment is looked up by (ptr, len). */
static int kp_json_dotted(const json_t *obj, const char *path, json_t **ret)
{
    const json_t *cur = obj;
    json_t *v = NULL;
    const char *seg;
    int r;

    if (!path || !*path)
        return -EINVAL;
    seg = path;
    for (;;) {
        const char *dot = strchr(seg, '.');
        size_t len = dot ? (size_t)(dot - seg) : strlen(seg);

        if (len == 0)
            return -EINVAL;
        r = kp_json_member(cur, seg, len, &v);
        if (r < 0)
            return r;
        if (!dot)
            break;
        cur = v;
        seg = dot + 1;
    }
    *ret = v;
    return 0;
}

int kp_json_path_str(const json_t *obj, const char *path, const char **ret)
{
    json_t *v = NULL;
    int r = kp_json_dotted(obj, path, &v);

    return r < 0 ? r : kp_json_as_str(v, ret);
}

int kp_json_path_int(const json_t *obj, const char *path, int64_t *ret)
{
    json_t *v = NULL;
    int r = kp_json_dotted(obj, path, &v);

    return r < 0 ? r : kp_json_as_int(v, ret);
}

int kp_json_path_bool(const json_t *obj, const char *path, bool *ret)
{
    json_t *v = NULL;
    int r = kp_json_dotted(obj, path, &v);

    return r < 0 ? r : kp_json_as_bool(v, ret);
}

int kp_json_path_object(const json_t *obj, const char *path, json_t **ret)
{
    json_t *v = NULL;
    int r = kp_json_dotted(obj, path, &v);

    return r < 0 ? r : kp_json_as_object(v, ret);
}

int kp_json_path_array(const json_t *obj, const char *path, json_t **ret)
{
    json_t *v = NULL;
    int r = kp_json_dotted(obj, path, &v);

    return r < 0 ? r : kp_json_as_array(v, ret);
}

int kp_json_pathv(const json_t *obj, const char *const *path, json_t **ret)
{
    const json_t *cur = obj;
    json_t *v = NULL;
    int r;

    if (!path)
        return -EINVAL;
    if (!obj || json_is_null(obj))
        return -ENOENT;
    for (size_t i = 0; path[i]; i++) {
        r = kp_json_key(cur, path[i], &v);
        if (r < 0)
            return r;
        cur = v;
    }
    *ret = (json_t *)(uintptr_t)cur;
    return 0;
}

int kp_json_pathv_str(const json_t *obj, const char *const *path, const char **ret)
{
    json_t *v = NULL;
    int r = kp_json_pathv(obj, path, &v);

    return r < 0 ? r : kp_json_as_str(v, ret);
}

size_t kp_json_array_size(const json_t *arr)
{
    return arr && json_is_array(arr) ? json_array_size(arr) : 0;
}

json_t *kp_json_array_at(const json_t *arr, size_t i)
{
    return arr && json_is_array(arr) ? json_array_get(arr, i) : NULL;
}

bool kp_json_object_next(const json_t *obj, struct kp_json_iter *it, const char **ret_key,
                         json_t **ret_value)
{
    /* jansson's iterator functions take a non-const object although they do not change it. */
    json_t *o = (json_t *)(uintptr_t)obj;

    if (!o || !json_is_object(o))
        return false;
    if (!it->started) {
        it->it = json_object_iter(o);
        it->started = true;
    } else if (it->it) {
        it->it = json_object_iter_next(o, it->it);
    }
    if (!it->it)
        return false;
    *ret_key = json_object_iter_key(it->it);
    *ret_value = json_object_iter_value(it->it);
    return true;
}

struct kp_json_dump_ctx {
    struct kp_buf *out;
    int r;
};

static int kp_json_dump_cb(const char *buffer, size_t size, void *data)
{
    struct kp_json_dump_ctx *ctx = data;
    int r = kp_buf_append(ctx->out, buffer, size);

    if (r < 0) {
        ctx->r = r;
        return -1;
    }
    return 0;
}

int kp_json_dump(const json_t *v, enum kp_json_dump_flags flags, struct kp_buf *out)
{
    struct kp_json_dump_ctx ctx = {.out = out, .r = 0};
    size_t jflags = JSON_ENCODE_ANY;

    kp_json_setup();
    if (!v || !out)
        return -EINVAL;
    jflags |= (flags & KP_JSON_PRETTY) ? JSON_INDENT(2) : JSON_COMPACT;
    if (flags & KP_JSON_SORT_KEYS)
        jflags |= JSON_SORT_KEYS;
    if (json_dump_callback(v, kp_json_dump_cb, &ctx, jflags) < 0)
        return ctx.r < 0 ? ctx.r : -ENOMEM;
    return 0;
}

int kp_json_patch_new(json_t **ret)
{
    json_t *o;

    kp_json_setup();
    o = json_object();
    if (!o)
        return -ENOMEM;
    *ret = o;
    return 0;
}

/* Sets path to value, creating intermediate objects; always consumes value. */
static int kp_json_patch_set(json_t *patch, const char *const *path, json_t *value)
{
    json_t *cur = patch;
    json_t *child = NULL;
    size_t i;
    int r;

    kp_json_setup();
    if (!value) {
        r = -ENOMEM;
        goto out;
    }
    if (!patch || !json_is_object(patch) || !path || !path[0]) {
        r = -EINVAL;
        goto out;
    }
    for (i = 0; path[i + 1]; i++) {
        child = json_object_get(cur, path[i]);
        if (!child) {
            child = json_object();
            /* json_object_set_new consumes child even when it fails. */
            if (!child || json_object_set_new(cur, path[i], child) < 0) {
                r = -ENOMEM;
                goto out;
            }
        } else if (!json_is_object(child)) {
            r = -KP_EPARSE;
            goto out;
        }
        cur = child;
    }
    r = json_object_set_new(cur, path[i], value) ? -ENOMEM : 0;
    value = NULL; /* consumed by json_object_set_new, success or not */
out:
    json_decref(value);
    return r;
}

int kp_json_array_new(json_t **ret)
{
    json_t *a;

    kp_json_setup();
    a = json_array();
    if (!a)
        return -ENOMEM;
    *ret = a;
    return 0;
}

int kp_json_array_append_steal(json_t *arr, json_t *value)
{
    kp_json_setup();
    if (!arr || !json_is_array(arr) || !value) {
        json_decref(value);
        return -EINVAL;
    }
    /* json_array_append_new consumes value even when it fails. */
    return json_array_append_new(arr, value) < 0 ? -ENOMEM : 0;
}

int kp_json_string_new(const char *s, json_t **ret)
{
    json_t *v;

    kp_json_setup();
    if (!s)
        return -EINVAL;
    v = json_string(s);
    if (!v) {
        /* jansson refuses text that is not UTF-8. Text from hosts (stderr, banners) can be
         * anything; a status write or an event must not fail on it, so bad bytes become U+FFFD. */
        char *clean = kp_utf8_scrub(s);

        if (!clean)
            return -ENOMEM;
        v = json_string(clean);
        kp_free(clean);
        if (!v)
            return -ENOMEM;
    }
    *ret = v;
    return 0;
}

int kp_json_patch_set_str(json_t *patch, const char *const *path, const char *value)
{
    json_t *v = NULL;
    int r;

    if ((r = kp_json_string_new(value, &v)) < 0)
        return r;
    return kp_json_patch_set(patch, path, v);
}

int kp_json_patch_set_int(json_t *patch, const char *const *path, int64_t value)
{
    kp_json_setup();
    return kp_json_patch_set(patch, path, json_integer((json_int_t)value));
}

int kp_json_patch_set_bool(json_t *patch, const char *const *path, bool value)
{
    kp_json_setup();
    return kp_json_patch_set(patch, path, json_boolean(value));
}

int kp_json_patch_set_null(json_t *patch, const char *const *path)
{
    kp_json_setup();
    return kp_json_patch_set(patch, path, json_null());
}

int kp_json_patch_set_steal(json_t *patch, const char *const *path, json_t *value)
{
    if (!value)
        return -EINVAL;
    return kp_json_patch_set(patch, path, value);
}

/* Adds to patch the members that turn old_doc into new_doc (both objects). */
static int kp_json_diff_into(const json_t *old_doc, const json_t *new_doc, json_t *patch)
{
    const char *key;
    json_t *ov, *nv;
    json_t *sub = NULL;
    void *it;
    int r;

    /* Removed members become null. */
    for (it = json_object_iter((json_t *)(uintptr_t)old_doc); it;
         it = json_object_iter_next((json_t *)(uintptr_t)old_doc, it)) {
        key = json_object_iter_key(it);
        if (json_object_get(new_doc, key))
            continue;
        if (json_object_set_new(patch, key, json_null()) < 0) {
            r = -ENOMEM;
            goto out;
        }
    }
    for (it = json_object_iter((json_t *)(uintptr_t)new_doc); it;
         it = json_object_iter_next((json_t *)(uintptr_t)new_doc, it)) {
        key = json_object_iter_key(it);
        nv = json_object_iter_value(it);
        ov = json_object_get(old_doc, key);
        if (ov && json_is_object(ov) && json_is_object(nv)) {
            sub = json_object();
            if (!sub) {
                r = -ENOMEM;
                goto out;
            }
            r = kp_json_diff_into(ov, nv, sub);
            if (r < 0)
                goto out;
            if (json_object_size(sub) > 0) {
                r = json_object_set_new(patch, key, sub) < 0 ? -ENOMEM : 0;
                sub = NULL; /* consumed either way */
                if (r < 0)
                    goto out;
            }
            sub = kp_json_unref(sub);
            continue;
        }
        if (ov && json_equal(ov, nv))
            continue;
        /* A null in a merge patch means "delete", so a new null member cannot be expressed; the
         * closest meaning (absent) is what the server would store anyway. */
        if (json_is_null(nv)) {
            if (!ov)
                continue;
        }
        if (json_object_set_new(patch, key, json_deep_copy(nv)) < 0) {
            r = -ENOMEM;
            goto out;
        }
    }
    r = 0;
out:
    json_decref(sub);
    return r;
}

int kp_json_merge_patch_diff(const json_t *old_doc, const json_t *new_doc, json_t **ret)
{
    json_t *empty = NULL, *patch = NULL;
    int r;

    kp_json_setup();
    if ((old_doc && !json_is_object(old_doc)) || (new_doc && !json_is_object(new_doc))) {
        r = -EINVAL;
        goto out;
    }
    empty = json_object();
    patch = json_object();
    if (!empty || !patch) {
        r = -ENOMEM;
        goto out;
    }
    r = kp_json_diff_into(old_doc ? old_doc : empty, new_doc ? new_doc : empty, patch);
    if (r < 0)
        goto out;
    *ret = patch;
    patch = NULL;
out:
    json_decref(empty);
    json_decref(patch);
    return r;
}

bool kp_json_equal(const json_t *a, const json_t *b)
{
    return a && b && json_equal(a, b);
}
