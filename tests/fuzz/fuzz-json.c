/* Fuzz driver for json/json.h. Properties (abort on violation): decode never crashes and writes
 * nothing on failure; a decoded value encodes (sorted, compact), the encoding decodes to an equal
 * value and re-encodes to the same bytes; typed getters on arbitrary paths never crash; a merge
 * patch from the value to itself is empty, and from {} to the value reproduces it. The input as
 * text always makes a JSON string (kp_json_string_new): verbatim when kp_utf8_scrub finds it valid
 * UTF-8, else scrubbed, and the string encodes and decodes back to the same value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/str.h"
#include "json/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_IN (1u << 20)
#define MAX_OUT (4u << 20)

static void poke_getters(const json_t *v)
{
    static const char *const paths[] = {"metadata.name", "a", "a.b", "spec.x.y", "0", "status"};
    const char *s;
    int64_t i;
    bool b;
    json_t *o;

    for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++) {
        (void)!kp_json_path_str(v, paths[k], &s);
        (void)!kp_json_path_int(v, paths[k], &i);
        (void)!kp_json_path_bool(v, paths[k], &b);
        (void)!kp_json_path_object(v, paths[k], &o);
        (void)!kp_json_path_array(v, paths[k], &o);
    }
    for (size_t k = 0; k < kp_json_array_size(v) && k < 8; k++)
        (void)!kp_json_as_str(kp_json_array_at(v, k), &s);
}

static void check_text(const uint8_t *data, size_t size)
{
    struct kp_buf a = KP_BUF_INIT(MAX_OUT);
    char *text, *clean;
    const char *got;
    json_t *v = NULL, *w = NULL;
    struct kp_json_error e;

    if (size > 4096)
        size = 4096;
    text = kp_strndup((const char *)data, size);
    if (!text)
        abort();
    clean = kp_utf8_scrub(text);
    if (!clean || kp_json_string_new(text, &v) != 0 || kp_json_as_str(v, &got) != 0 ||
        strcmp(got, clean) != 0)
        abort();
    if (kp_json_dump(v, 0, &a) != 0 ||
        kp_json_parse(a.data, a.len, MAX_OUT, KP_JSON_DEPTH_HARD_MAX, &w, &e) != 0 ||
        !kp_json_equal(v, w))
        abort();
    kp_json_unref(w);
    kp_json_unref(v);
    kp_buf_done(&a);
    kp_free(clean);
    kp_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kp_buf a = KP_BUF_INIT(MAX_OUT), b = KP_BUF_INIT(MAX_OUT);
    json_t *v = (json_t *)(uintptr_t)1, *w = NULL, *d = NULL;
    struct kp_json_error e;

    check_text(data, size);
    if (kp_json_parse((const char *)data, size, MAX_IN, 0, &v, &e) != 0) {
        if (v != (json_t *)(uintptr_t)1)
            abort();
        return 0;
    }
    poke_getters(v);
    if (kp_json_dump(v, KP_JSON_SORT_KEYS, &a) != 0)
        abort();
    if (kp_json_parse(a.data, a.len, MAX_OUT, KP_JSON_DEPTH_HARD_MAX, &w, &e) != 0)
        abort();
    if (!kp_json_equal(v, w))
        abort();
    if (kp_json_dump(w, KP_JSON_SORT_KEYS, &b) != 0 || a.len != b.len ||
        memcmp(a.data, b.data, a.len) != 0)
        abort();
    if (kp_json_typeof(v) == KP_JSON_OBJECT) {
        if (kp_json_merge_patch_diff(v, w, &d) != 0 || kp_json_typeof(d) != KP_JSON_OBJECT)
            abort();
        kp_buf_reset(&b);
        if (kp_json_dump(d, 0, &b) != 0 || strcmp(kp_buf_str(&b), "{}") != 0)
            abort();
        d = kp_json_unref(d);
    }
    kp_json_unref(v);
    kp_json_unref(w);
    kp_buf_done(&a);
    kp_buf_done(&b);
    return 0;
}
