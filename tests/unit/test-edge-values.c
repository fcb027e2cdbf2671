/* Tests that no value the API server accepts leaves an object silent: for every row of
 * tests/data/edge-values.tsv (the table tests/integration/test-crds.sh also feeds to the real
 * kube-apiserver), the kind's base object (tests/data/edge-values/<kind>.json) with the row's
 * field set to its value is projected and validated, and the outcome is the row's:
 *
 *   ok      projects; the validator reports nothing
 *   report  projects; the validator's report (a condition's message) holds ctl_message
 *   refuse  does not project, which a row may only say where the API server rejects the value
 *
 * The table also keeps our CRDs and the validators agreeing: a value a kpssh CRD rejects for
 * its range must be reported by the validator, not just refused, so an object written before
 * the bound existed says why it is not used. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/str.h"
#include "json/json.h"
#include "api/obj-karpenter.h"
#include "k8s/store.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/profile.h"

#define MAX_SEGMENTS 8

struct row {
    int line;
    char *kind, *path, *value, *api, *api_message, *ctl, *ctl_message;
};

/* Splits a tab-separated line in place into 7 fields; false when it has another count. */
static bool split_row(char *s, struct row *r)
{
    char **f[] = {&r->kind,        &r->path, &r->value,      &r->api,
                  &r->api_message, &r->ctl,  &r->ctl_message};
    size_t i = 0;

    for (char *p = s; i < KP_ARRAY_SIZE(f); i++) {
        char *tab = strchr(p, '\t');

        *f[i] = p;
        if (!tab) {
            i++;
            break;
        }
        *tab = '\0';
        p = tab + 1;
    }
    return i == KP_ARRAY_SIZE(f) && !strchr(r->ctl_message, '\t');
}

/* The row's object as JSON text (caller frees). */
static char *build(const struct row *r)
{
    char rel[128], pathbuf[256], *base_text, *out;
    const char *segs[MAX_SEGMENTS + 1] = {0};
    struct kp_buf b = KP_BUF_INIT(1 << 20);
    json_t *obj = NULL, *val = NULL;
    size_t n = 0, len;

    (void)snprintf(rel, sizeof(rel), "edge-values/%s.json", r->kind);
    base_text = kp_test_read_data(rel, &len);
    if (!base_text)
        fail_msg("line %d: no base object %s", r->line, rel);
    assert_int_equal(kp_json_parse(base_text, len, 1 << 20, 0, &obj, NULL), 0);
    if (kp_json_parse(r->value, strlen(r->value), 1 << 20, 0, &val, NULL) < 0)
        fail_msg("line %d: value %s is not JSON", r->line, r->value);
    (void)snprintf(pathbuf, sizeof(pathbuf), "%s", r->path);
    for (char *p = pathbuf, *dot; p && n < MAX_SEGMENTS; p = dot ? dot + 1 : NULL) {
        dot = strchr(p, '.');
        if (dot)
            *dot = '\0';
        segs[n++] = p;
    }
    assert_int_equal(kp_json_patch_set_steal(obj, segs, val), 0);
    assert_int_equal(kp_json_dump(obj, 0, &b), 0);
    out = kp_strdup(kp_buf_str(&b));
    kp_buf_done(&b);
    kp_json_unref(obj);
    kp_free(base_text);
    return out;
}

/* Decodes and validates text as kind; the decode's result, the report in msg. */
static int project_validate(const char *kind, const char *text, struct kp_buf *msg)
{
    struct kp_entry *e = NULL;
    size_t n = strlen(text);
    int r = -EINVAL, v = 0;

    if (strcmp(kind, "SSHHost") == 0) {
        if ((r = kp_sshhost_decode(text, n, &e)) == 0)
            v = kp_sshhost_validate(kp_sshhost_view(e), msg);
    } else if (strcmp(kind, "SSHNodeClass") == 0) {
        if ((r = kp_sshnodeclass_decode(text, n, &e)) == 0)
            v = kp_sshnodeclass_validate(kp_sshnodeclass_view(e), msg);
    } else if (strcmp(kind, "SSHJoinProfile") == 0) {
        if ((r = kp_sshjoinprofile_decode(text, n, &e)) == 0)
            v = kp_profile_validate_view(kp_sshjoinprofile_view(e), msg);
    } else if (strcmp(kind, "NodePool") == 0) {
        if ((r = kp_nodepool_decode(text, n, &e)) == 0)
            v = kp_nodepool_validate(kp_nodepool_view(e), msg);
    } else if (strcmp(kind, "NodeClaim") == 0) {
        if ((r = kp_nodeclaim_decode(text, n, &e)) == 0)
            v = kp_nodeclaim_validate(kp_nodeclaim_view(e), msg);
    } else {
        fail_msg("unknown kind %s", kind);
    }
    kp_entry_unref(e);
    assert_true(v >= 0); /* a count of problems, or an allocation failure */
    assert_true((v > 0) == (msg->len > 0));
    return r;
}

static unsigned check_row(const struct row *r)
{
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    char *text = build(r);
    unsigned bad = 0;
    int pr;

    pr = project_validate(r->kind, text, &msg);
    if (strcmp(r->ctl, "refuse") == 0) {
        if (strcmp(r->api, "reject") != 0) {
            print_error("line %d: refuse is only allowed where the API server rejects\n", r->line);
            bad++;
        }
        if (pr == 0) {
            print_error("line %d: %s %s=%s projected, expected a refusal\n", r->line, r->kind,
                        r->path, r->value);
            bad++;
        }
    } else if (pr < 0) {
        print_error("line %d: %s %s=%s does not project (%d): the object would be silent\n",
                    r->line, r->kind, r->path, r->value, pr);
        bad++;
    } else if (strcmp(r->ctl, "ok") == 0) {
        if (msg.len) {
            print_error("line %d: %s %s=%s: unexpected report: %s", r->line, r->kind, r->path,
                        r->value, kp_buf_str(&msg));
            bad++;
        }
    } else if (strcmp(r->ctl, "report") == 0) {
        if (!strstr(kp_buf_str(&msg), r->ctl_message)) {
            print_error("line %d: %s %s=%s: report lacks \"%s\": %s\n", r->line, r->kind, r->path,
                        r->value, r->ctl_message, kp_buf_str(&msg));
            bad++;
        }
    } else {
        print_error("line %d: bad ctl column \"%s\"\n", r->line, r->ctl);
        bad++;
    }
    /* A range our CRD refuses with a message must also be reported (never only refused), and
     * the two must name the same limit. */
    if (strcmp(r->api, "reject") == 0 && strncmp(r->kind, "SSH", 3) == 0 &&
        strstr(r->api_message, "at most 8Pi") && !strstr(r->ctl_message, "at most 8Pi") &&
        !strstr(r->ctl_message, "more than kpssh can hold")) {
        print_error("line %d: the CRD's bound and the validator disagree\n", r->line);
        bad++;
    }
    kp_buf_done(&msg);
    kp_free(text);
    return bad;
}

static void test_edge_values(void **state)
{
    size_t len;
    char *data = kp_test_read_data("edge-values.tsv", &len), *line, *nl;
    unsigned rows = 0, bad = 0, kinds_seen = 0;
    static const char *const kinds[] = {"SSHHost", "SSHNodeClass", "SSHJoinProfile", "NodePool",
                                        "NodeClaim"};
    int lineno = 0;

    (void)state;
    assert_non_null(data);
    for (line = data; *line; line = nl + 1) {
        struct row r = {0};

        nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        lineno++;
        if (line[0] == '#' || line[0] == '\0')
            continue;
        r.line = lineno;
        if (!split_row(line, &r))
            fail_msg("edge-values.tsv line %d: expected 7 tab-separated fields", lineno);
        for (size_t i = 0; i < KP_ARRAY_SIZE(kinds); i++)
            if (strcmp(r.kind, kinds[i]) == 0)
                kinds_seen |= 1u << i;
        rows++;
        bad += check_row(&r);
    }
    printf("# %u edge values checked, %u wrong\n", rows, bad);
    kp_free(data);
    assert_int_equal(kinds_seen, (1u << KP_ARRAY_SIZE(kinds)) - 1); /* every kind has rows */
    assert_true(rows >= 30);
    assert_int_equal(bad, 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edge_values),
    };

    return kp_test_main("edge-values", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
