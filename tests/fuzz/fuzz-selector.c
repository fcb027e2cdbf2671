/* Fuzz driver for api/selector.h. Inputs starting with '{' or '[' are decoded as JSON and fed to
 * the LabelSelector / node-requirement / map builders; everything is also parsed as the string
 * form. Properties (abort on violation): the string form's canonical text parses back and is a
 * fixed point; the reparsed selector matches the same label sets (built from the input's own
 * keys and values) as the original; nothing leaks (LeakSanitizer). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "json/json.h"
#include "api/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OUT (1u << 20)

/* Label sets derived from the selector itself: each requirement's key with its first value, with
 * "8", and without the key. Enough to tell two selectors apart when one was mangled. */
static void check_same_matches(const struct kp_selector *a, const struct kp_selector *b)
{
    struct kp_label labels[64];
    size_t n = 0;

    for (size_t i = 0; i < kp_selector_count(a) && n < 64; i++) {
        const struct kp_requirement *r = kp_selector_at(a, i);

        labels[n].key = r->key;
        labels[n].value = r->n_values ? r->values[0] : "8";
        n++;
    }
    for (size_t k = 0; k <= n; k++) {
        /* Prefixes of the label list: drop keys from the end one at a time. */
        if (kp_selector_matches(a, labels, k) != kp_selector_matches(b, labels, k))
            abort();
    }
}

static void check_string_form(const struct kp_selector *s)
{
    struct kp_buf a = KP_BUF_INIT(MAX_OUT), b = KP_BUF_INIT(MAX_OUT);
    struct kp_selector *back = NULL;
    int r = kp_selector_format(s, &a);

    if (r == -EOPNOTSUPP)
        goto out;
    if (r != 0)
        abort();
    if (kp_selector_parse(kp_buf_str(&a), a.len, &back, NULL) != 0)
        abort();
    if (kp_selector_count(back) != kp_selector_count(s))
        abort();
    if (kp_selector_format(back, &b) != 0 || strcmp(kp_buf_str(&a), kp_buf_str(&b)) != 0)
        abort();
    check_same_matches(s, back);
out:
    kp_selector_free(back);
    kp_buf_done(&a);
    kp_buf_done(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    struct kp_selector *s = NULL;
    struct kp_selector_error e = {.pos = 7, .msg = NULL};
    json_t *v = NULL;

    if (kp_selector_parse(p, size, &s, &e) == 0) {
        check_string_form(s);
        s = kp_selector_free(s);
    } else if (!e.msg && size <= KP_SELECTOR_MAX_LEN) {
        /* Every refusal except -ENOMEM explains itself. */
        abort();
    }
    if (size > 0 && (p[0] == '{' || p[0] == '[') &&
        kp_json_parse(p, size, MAX_OUT, 0, &v, NULL) == 0) {
        if (kp_selector_from_json(v, &s, NULL) == 0) {
            check_string_form(s);
            s = kp_selector_free(s);
        }
        if (kp_selector_from_map_json(v, &s, NULL) == 0) {
            check_string_form(s);
            s = kp_selector_free(s);
        }
        if (kp_selector_from_node_requirements(v, &s, NULL) == 0) {
            check_string_form(s);
            s = kp_selector_free(s);
        }
        kp_json_unref(v);
    }
    return 0;
}
