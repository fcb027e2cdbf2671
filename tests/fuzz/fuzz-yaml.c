/* DESIGN: fuzz driver for yaml/yaml.c.
 *
 * Parses the input as a multi-document stream under a 1 MiB ceiling, then walks every kept
 * tree through the public accessors (typed getters included), so a node the builder got wrong
 * shows up as a sanitizer report. The walk is bounded by the parser's own node limit, which
 * counts aliases at their expanded size. */
#include <stddef.h>
#include <stdint.h>

#include "yaml/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const struct kp_yaml_node *n, unsigned depth)
{
    const char *s;
    size_t len, i;
    bool b;
    int64_t v;

    if (!n || depth > KP_YAML_MAX_DEPTH + 1)
        return;
    (void)kp_yaml_line(n);
    (void)kp_yaml_describe(n);
    switch (kp_yaml_type(n)) {
    case KP_YAML_SCALAR:
        if (kp_yaml_get_str(n, &s, &len) == 0 && len > 0)
            (void)s[len - 1];
        if (kp_yaml_get_cstr(n, &s) == 0)
            (void)s[0];
        if (kp_yaml_get_bool(n, &b) == 0)
            (void)b;
        if (kp_yaml_get_int(n, &v) == 0)
            (void)v;
        (void)kp_yaml_is_null(n);
        break;
    case KP_YAML_SEQUENCE:
        for (i = 0; i < kp_yaml_len(n); i++)
            walk(kp_yaml_seq_at(n, i), depth + 1);
        break;
    case KP_YAML_MAPPING:
        for (i = 0; i < kp_yaml_len(n); i++) {
            walk(kp_yaml_map_key_at(n, i), depth + 1);
            walk(kp_yaml_map_value_at(n, i), depth + 1);
        }
        (void)kp_yaml_map_get(n, "apiVersion");
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kp_yaml_doc *doc = NULL;
    struct kp_yaml_error err;

    if (kp_yaml_parse((const char *)data, size, "fuzz", 1u << 20, KP_YAML_ALL_DOCUMENTS, &doc,
                      &err) == 0) {
        for (size_t i = 0; i < kp_yaml_doc_count(doc); i++)
            walk(kp_yaml_doc_root(doc, i), 0);
    }
    kp_yaml_doc_free(doc);
    return 0;
}
