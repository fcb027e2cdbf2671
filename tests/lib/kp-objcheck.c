/* DESIGN: kp-objcheck, a test tool that runs kpssh's karpenter.sh projections on one object.
 *
 * The CRD compatibility test (tests/integration/test-crd-compat.sh) installs upstream
 * Karpenter's CRDs of several releases, writes NodePools and NodeClaims, and must show that
 * kpssh reads what the API server then serves (defaults of that release filled in, or left out
 * where that release has none). This tool decodes the object exactly as the informers do
 * (kp_nodepool_decode / kp_nodeclaim_decode, the projection every controller reads) and runs the
 * validator that gives a NodePool its ValidationSucceeded condition, so the test checks the real
 * projection rather than a copy of it in jq.
 *
 *   kp-objcheck nodepool|nodeclaim FILE      (FILE: one object as `kubectl get -o json` prints it;
 *                                              "-" reads standard input)
 *
 * Prints what the projection holds as "key=value" lines (every key put_nodepool or put_nodeclaim
 * prints, always all of them; the shell test greps them), then one "report=<line>" per validator
 * problem and "valid=true|false". Exit status: 0 decoded and valid, 1 decoded but the validator
 * reported problems, 2 the projection refused the object (or could not read it), 64 usage. Single-threaded; test tooling, never shipped. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "k8s/store.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"

#define OBJCHECK_MAX_FILE (4u * 1024u * 1024u)

static int read_all(const char *path, struct kp_buf *b)
{
    char chunk[4096];
    size_t n;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
    int r = 0;

    if (!f)
        return -errno;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if ((r = kp_buf_append(b, chunk, n)) < 0)
            break;
    }
    if (r == 0 && ferror(f))
        r = -EIO;
    if (f != stdin)
        fclose(f);
    return r;
}

static const char *policy_name(enum kp_consolidation_policy p)
{
    switch (p) {
    case KP_CONSOLIDATE_WHEN_EMPTY_OR_UNDERUTILIZED:
        return "WhenEmptyOrUnderutilized";
    case KP_CONSOLIDATE_WHEN_EMPTY:
        return "WhenEmpty";
    case KP_CONSOLIDATE_BALANCED:
        return "Balanced";
    case KP_CONSOLIDATE_UNKNOWN:
        break;
    }
    return "unknown";
}

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

/* A duration as the projection holds it: its text, or "absent". */
static const char *dur_text(const struct kp_obj_duration *d)
{
    return d->text ? d->text : "absent";
}

/* reasons bits as upstream's names joined by ',' ("all" for none: the budget applies to every
 * reason), in the CRD's enum order; "unknown" marks a reason the projection does not know. */
static void put_reasons(uint32_t bits)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {
        {KP_DISRUPT_UNDERUTILIZED, "Underutilized"},
        {KP_DISRUPT_EMPTY, "Empty"},
        {KP_DISRUPT_DRIFTED, "Drifted"},
        {KP_DISRUPT_UNHEALTHY, "Unhealthy"},
        {KP_DISRUPT_UNKNOWN, "unknown"},
    };
    const char *sep = "";

    if (bits == 0) {
        fputs("all", stdout);
        return;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (bits & names[i].bit) {
            printf("%s%s", sep, names[i].name);
            sep = ",";
        }
    }
}

static void put_spec(const char *prefix, const struct kp_nodeclaim_spec *s)
{
    printf("%s.nodeClassRef=%s/%s/%s\n", prefix,
           s->node_class_ref.group ? s->node_class_ref.group : "",
           s->node_class_ref.kind ? s->node_class_ref.kind : "",
           s->node_class_ref.name ? s->node_class_ref.name : "");
    printf("%s.requirements=%zu\n", prefix, s->requirements.n);
    printf("%s.expireAfter=%s\n", prefix, dur_text(&s->expire_after));
    printf("%s.terminationGracePeriod=%s\n", prefix, dur_text(&s->termination_grace_period));
}

static void put_condition(const struct kp_conditions *c, const char *type)
{
    const struct kp_condition *x = kp_conditions_get(c, type);

    printf("condition.%s=%s\n", type, x ? kp_cond_status_name(x->status) : "absent");
}

static void put_nodepool(const struct kp_nodepool_view *v)
{
    printf("kind=NodePool\nname=%s\n", v->e.name);
    printf("ours=%s\n", kp_nodepool_is_ours(v) ? "true" : "false");
    printf("deleting=%s\n", v->meta.deletion_usec ? "true" : "false");
    printf("hash=%s\n", str_or_empty(kp_labels_get(&v->annotations, "karpenter.sh/nodepool-hash")));
    put_spec("template", &v->tmpl);
    printf("consolidationPolicy=%s\n", policy_name(v->consolidation_policy));
    printf("consolidateAfter=%s\n", dur_text(&v->consolidate_after));
    printf("budgets=%zu\n", v->n_budgets);
    for (size_t i = 0; i < v->n_budgets; i++) {
        printf("budget.%zu=%s ", i, v->budgets[i].nodes ? v->budgets[i].nodes : "");
        put_reasons(v->budgets[i].reasons);
        putchar('\n');
    }
    printf("limits.cpu=%" PRId64 "\n", kp_resources_get(&v->limits, "cpu", NULL));
    printf("status.nodes=%" PRId64 "\n", v->nodes);
    printf("status.resources.cpu=%" PRId64 "\n", kp_resources_get(&v->resources, "cpu", NULL));
    put_condition(&v->conditions, "Ready");
}

static void put_nodeclaim(const struct kp_nodeclaim_view *v)
{
    printf("kind=NodeClaim\nname=%s\n", v->e.name);
    printf("ours=%s\n", kp_nodeclaim_is_ours(v) ? "true" : "false");
    printf("deleting=%s\n", v->meta.deletion_usec ? "true" : "false");
    printf("hash=%s\n", str_or_empty(kp_labels_get(&v->annotations, "karpenter.sh/nodepool-hash")));
    printf("nodepool=%s\n", v->nodepool ? v->nodepool : "");
    put_spec("spec", &v->spec);
    printf("requests.cpu=%" PRId64 "\n", kp_resources_get(&v->requests, "cpu", NULL));
    printf("finalizers=%zu\n", v->n_finalizers);
    printf("providerID=%s\n", v->provider_id ? v->provider_id : "");
    printf("nodeName=%s\n", v->node_name ? v->node_name : "");
    printf("capacity.cpu=%" PRId64 "\n", kp_resources_get(&v->capacity, "cpu", NULL));
    printf("allocatable.cpu=%" PRId64 "\n", kp_resources_get(&v->allocatable, "cpu", NULL));
    put_condition(&v->conditions, "Launched");
    put_condition(&v->conditions, "Registered");
    put_condition(&v->conditions, "Initialized");
    put_condition(&v->conditions, "Ready");
}

/* One "report=" line per validator line. */
static void put_report(const char *s)
{
    const char *nl;

    while (*s) {
        nl = strchr(s, '\n');
        if (!nl) {
            printf("report=%s\n", s);
            return;
        }
        printf("report=%.*s\n", (int)(nl - s), s);
        s = nl + 1;
    }
}

int main(int argc, char **argv)
{
    struct kp_buf in = KP_BUF_INIT(OBJCHECK_MAX_FILE);
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    struct kp_entry *e = NULL;
    bool pool;
    int r, status = 2;

    if (argc != 3 || (strcmp(argv[1], "nodepool") != 0 && strcmp(argv[1], "nodeclaim") != 0)) {
        fputs("usage: kp-objcheck nodepool|nodeclaim FILE|-\n", stderr);
        return 64;
    }
    pool = strcmp(argv[1], "nodepool") == 0;
    if ((r = read_all(argv[2], &in)) < 0) {
        fprintf(stderr, "kp-objcheck: %s: %s\n", argv[2], kp_strerror(r));
        goto out;
    }
    r = pool ? kp_nodepool_decode(in.data ? in.data : "", in.len, &e)
             : kp_nodeclaim_decode(in.data ? in.data : "", in.len, &e);
    if (r < 0) {
        fprintf(stderr, "kp-objcheck: the %s projection refused the object: %s\n", argv[1],
                kp_strerror(r));
        goto out;
    }
    if (pool) {
        put_nodepool(kp_nodepool_view(e));
        r = kp_nodepool_validate(kp_nodepool_view(e), &msg);
    } else {
        put_nodeclaim(kp_nodeclaim_view(e));
        r = kp_nodeclaim_validate(kp_nodeclaim_view(e), &msg);
    }
    if (r < 0) {
        fprintf(stderr, "kp-objcheck: validation failed: %s\n", kp_strerror(r));
        goto out;
    }
    put_report(kp_buf_str(&msg));
    printf("valid=%s\n", r == 0 ? "true" : "false");
    status = r == 0 ? 0 : 1;
out:
    if (fflush(stdout) != 0)
        status = 2;
    kp_entry_unref(e);
    kp_buf_done(&msg);
    kp_buf_done(&in);
    return status;
}
