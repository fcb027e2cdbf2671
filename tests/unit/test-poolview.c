/* Unit tests of cmd/kpssh/poolview.c: the rows and totals kp_poolview_build() decides from
 * decoded objects, and what kp_poolview_render() writes for each format. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp-test.h"
#include "base/buf.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "cmd/kpssh/poolview.h"
#include "json/json.h"
#include "k8s/store.h"
#include "provider/ssh/obj-kpssh.h"
#include "yaml/yaml.h"

#define NOW_USEC (1767225600LL * 1000000) /* 2026-01-01T00:00:00Z */
#define MAX_OBJ 16

/* A world of decoded objects and the views into it. */
struct world {
    struct kp_entry *e[5][MAX_OBJ];
    const void *v[5][MAX_OBJ];
    size_t n[5];
};
enum { W_HOST, W_CLASS, W_CLAIM, W_NODE, W_POD };

static void add(struct world *w, int kind, struct kp_entry *e)
{
    assert_true(w->n[kind] < MAX_OBJ);
    w->e[kind][w->n[kind]] = e;
    switch (kind) {
    case W_HOST:
        w->v[kind][w->n[kind]] = kp_sshhost_view(e);
        break;
    case W_CLASS:
        w->v[kind][w->n[kind]] = kp_sshnodeclass_view(e);
        break;
    case W_CLAIM:
        w->v[kind][w->n[kind]] = kp_nodeclaim_view(e);
        break;
    case W_NODE:
        w->v[kind][w->n[kind]] = kp_node_view(e);
        break;
    default:
        w->v[kind][w->n[kind]] = kp_pod_view(e);
        break;
    }
    w->n[kind]++;
}

static void world_free(struct world *w)
{
    size_t k, i;

    for (k = 0; k < 5; k++)
        for (i = 0; i < w->n[k]; i++)
            kp_entry_unref(w->e[k][i]);
}

static struct kp_poolview_in world_in(const struct world *w)
{
    struct kp_poolview_in in = {
        .hosts = (const struct kp_sshhost_view *const *)w->v[W_HOST],
        .n_hosts = w->n[W_HOST],
        .classes = (const struct kp_sshnodeclass_view *const *)w->v[W_CLASS],
        .n_classes = w->n[W_CLASS],
        .claims = (const struct kp_nodeclaim_view *const *)w->v[W_CLAIM],
        .n_claims = w->n[W_CLAIM],
        .nodes = (const struct kp_node_view *const *)w->v[W_NODE],
        .n_nodes = w->n[W_NODE],
        .pods = (const struct kp_pod_view *const *)w->v[W_POD],
        .n_pods = w->n[W_POD],
    };
    return in;
}

/* host <name> <class> <status JSON members, or ""> [observed cpu] */
static void host(struct world *w, const char *name, const char *cls, const char *status,
                 const char *address)
{
    add(w, W_HOST,
        kp_test_decode(kp_sshhost_decode, true,
                       "{'metadata':{'name':'%s','namespace':'pool','uid':'u-%s',"
                       "'creationTimestamp':'2025-12-31T23:00:00Z',"
                       "'labels':{'karpenter.kpssh.dev/host-class':'%s'}},"
                       "'spec':{'address':'%s','sshKeySecretRef':{'name':'k'},"
                       "'capacity':{'cpu':'2','memory':'4Gi'}},'status':{%s}}",
                       name, name, cls, address, status));
}

static void nodeclass(struct world *w, const char *name, const char *cls, const char *price)
{
    add(w, W_CLASS,
        kp_test_decode(kp_sshnodeclass_decode, true,
                       "{'metadata':{'name':'%s','uid':'u-%s'},'spec':{"
                       "'hostSelector':{'matchLabels':{'karpenter.kpssh.dev/host-class':'%s'}},"
                       "'joinProfileRef':{'name':'p'},'pricePerCPUHour':'%s'}}",
                       name, name, cls, price));
}

static void claim(struct world *w, const char *name, const char *cls, const char *pid,
                  const char *node)
{
    add(w, W_CLAIM,
        kp_test_decode(kp_nodeclaim_decode, true,
                       "{'metadata':{'name':'%s','uid':'u-%s',"
                       "'labels':{'karpenter.sh/nodepool':'np'}},"
                       "'spec':{'nodeClassRef':{'group':'karpenter.kpssh.dev',"
                       "'kind':'SSHNodeClass','name':'%s'},'requirements':[]},"
                       "'status':{'providerID':'%s','nodeName':'%s'}}",
                       name, name, cls, pid, node));
}

static void node(struct world *w, const char *name, const char *pid)
{
    add(w, W_NODE,
        kp_test_decode(kp_node_decode, true,
                       "{'metadata':{'name':'%s','uid':'u-%s'},'spec':{'providerID':'%s',"
                       "'taints':[{'key':'team','value':'a','effect':'NoSchedule'}]},"
                       "'status':{'capacity':{'cpu':'2'}}}",
                       name, name, pid));
}

/* pod <name> <node or ""> <phase> <deleting> */
static void pod(struct world *w, const char *name, const char *on, const char *phase, bool deleting)
{
    add(w, W_POD,
        kp_test_decode(kp_pod_decode, true,
                       "{'metadata':{'name':'%s','namespace':'apps','uid':'u-%s'%s},"
                       "'spec':{%s%s%s'containers':[{'name':'c'}]},'status':{'phase':'%s'}}",
                       name, name, deleting ? ",'deletionTimestamp':'2025-12-31T23:59:00Z'" : "",
                       *on ? "'nodeName':'" : "", on, *on ? "'," : "", phase));
}

/* Eight hosts, one per state and two joined (one billed through its NodeClaim's class, found by
 * nodeName only), and pods in every phase on the first Node. */
static void world_fill(struct world *w)
{
    memset(w, 0, sizeof(*w));
    nodeclass(w, "lab", "lab", "0.02");
    nodeclass(w, "gold", "gold", "0.5");
    host(w, "h-avail", "lab", "'state':'Available'", "10.0.0.1");
    host(w, "h-inuse", "lab",
         "'state':'InUse','claimRef':{'name':'nc-1','uid':'c1'},"
         "'providerID':'kpssh://pool/h-inuse','observedCapacity':{'cpu':'4'}",
         "10.0.0.2");
    host(w, "h-gold", "gold", "'state':'InUse','claimRef':{'name':'nc-3','uid':'c3'}", "10.0.0.3");
    host(w, "h-claimed", "lab", "'state':'Claimed','claimRef':{'name':'nc-2','uid':'c2'}",
         "10.0.0.4");
    host(w, "h-leaving", "lab", "'state':'Leaving'", "10.0.0.5");
    host(w, "h-pending", "lab", "", "10.0.0.6");
    host(w, "h-sick", "lab", "'state':'Unhealthy'", "10.0.0.7");
    host(w, "h-parked", "lab", "'state':'Maintenance'", "10.0.0.8");
    claim(w, "nc-1", "lab", "kpssh://pool/h-inuse", "n-1");
    claim(w, "nc-2", "lab", "", "");
    claim(w, "nc-3", "gold", "eks-hybrid:///x", "n-3");
    node(w, "n-1", "kpssh://pool/h-inuse");
    node(w, "n-3", "other://n-3");
    pod(w, "p-run", "n-1", "Running", false);
    pod(w, "p-pending", "n-1", "Pending", false);
    pod(w, "p-done", "n-1", "Succeeded", false);
    pod(w, "p-failed", "n-1", "Failed", false);
    pod(w, "p-going", "n-1", "Running", true);
    pod(w, "p-unbound", "", "Pending", false);
    pod(w, "p-gold", "n-3", "Running", false);
}

static const struct kp_poolview_row *row_of(const struct kp_poolview *v, const char *name)
{
    size_t i;

    for (i = 0; i < v->n_rows; i++)
        if (strcmp(v->rows[i].name, name) == 0)
            return &v->rows[i];
    fail_msg("no row %s", name);
    return NULL;
}

static void test_build(void **state)
{
    struct world w;
    struct kp_poolview_in in;
    struct kp_poolview v;
    const struct kp_poolview_row *r;
    size_t i;

    (void)state;
    world_fill(&w);
    in = world_in(&w);
    assert_int_equal(kp_poolview_build(&in, &v), 0);
    assert_int_equal(v.n_rows, 8);
    for (i = 1; i < v.n_rows; i++) /* sorted by name */
        assert_true(strcmp(v.rows[i - 1].name, v.rows[i].name) < 0);

    r = row_of(&v, "h-avail");
    assert_string_equal(r->state, "Available");
    assert_int_equal(r->colour, KP_POOLVIEW_GREEN);
    assert_null(r->node);
    assert_int_equal(r->vcpu_milli, 0);
    assert_string_equal(r->nodeclass, "lab"); /* the only class selecting it */

    r = row_of(&v, "h-inuse");
    assert_int_equal(r->colour, KP_POOLVIEW_AMBER);
    assert_string_equal(r->nodeclaim, "nc-1");
    assert_string_equal(r->nodepool, "np");
    assert_string_equal(r->node, "n-1");
    assert_int_equal(r->pods, 2); /* Running and Pending; not Succeeded, Failed, deleting */
    assert_int_equal(r->vcpu_milli, 4000);  /* observed capacity wins over spec */
    assert_int_equal(r->rate_micro, 80000); /* 4 x $0.02 */

    r = row_of(&v, "h-gold");
    assert_int_equal(r->colour, KP_POOLVIEW_AMBER);
    assert_string_equal(r->node, "n-3"); /* by the NodeClaim's nodeName */
    assert_int_equal(r->pods, 1);
    assert_int_equal(r->vcpu_milli, 2000);
    assert_string_equal(r->nodeclass, "gold");
    assert_int_equal(r->rate_micro, 1000000); /* 2 x $0.5 */

    assert_int_equal(row_of(&v, "h-claimed")->colour, KP_POOLVIEW_BLUE);
    assert_string_equal(row_of(&v, "h-claimed")->nodeclaim, "nc-2");
    assert_null(row_of(&v, "h-claimed")->node);
    assert_int_equal(row_of(&v, "h-leaving")->colour, KP_POOLVIEW_BLUE);
    assert_int_equal(row_of(&v, "h-pending")->colour, KP_POOLVIEW_BLUE);
    assert_string_equal(row_of(&v, "h-pending")->state, "Pending");
    assert_int_equal(row_of(&v, "h-sick")->colour, KP_POOLVIEW_RED);
    assert_int_equal(row_of(&v, "h-parked")->colour, KP_POOLVIEW_PLAIN);

    assert_int_equal(v.totals.hosts, 8);
    assert_int_equal(v.totals.warm, 1);
    assert_int_equal(v.totals.joined, 2);
    assert_int_equal(v.totals.working, 3);
    assert_int_equal(v.totals.failed, 1);
    assert_int_equal(v.totals.vcpu_milli, 6000);
    assert_int_equal(v.totals.rate_micro, 1080000);
    assert_false(v.totals.rate_unknown);
    kp_poolview_done(&v);
    world_free(&w);
}

/* A joined host without a NodeClaim that two classes select: its rate is unknown, not guessed. */
static void test_rate_unknown(void **state)
{
    struct world w;
    struct kp_poolview_in in;
    struct kp_poolview v;
    struct kp_buf out = KP_BUF_INIT(1 << 20);

    (void)state;
    memset(&w, 0, sizeof(w));
    nodeclass(&w, "a", "lab", "0.02");
    nodeclass(&w, "b", "lab", "0.03");
    host(&w, "h", "lab", "'state':'InUse','providerID':'kpssh://pool/h'", "10.0.0.1");
    node(&w, "n", "kpssh://pool/h");
    in = world_in(&w);
    assert_int_equal(kp_poolview_build(&in, &v), 0);
    assert_int_equal(v.rows[0].rate_micro, -1);
    assert_null(v.rows[0].nodeclass);
    assert_true(v.totals.rate_unknown);
    assert_int_equal(v.totals.vcpu_milli, 2000);
    assert_int_equal(kp_poolview_render(&v, "pool", KP_POOLVIEW_TABLE, 0, NOW_USEC, &out), 0);
    assert_non_null(strstr(kp_buf_str(&out), " ? "));
    assert_non_null(strstr(kp_buf_str(&out), "some rates unknown"));
    kp_buf_done(&out);
    kp_poolview_done(&v);
    world_free(&w);
}

static const char *line_of(const char *text, const char *name, char *buf, size_t size)
{
    const char *p = strstr(text, name), *start, *end;

    assert_non_null(p);
    for (start = p; start > text && start[-1] != '\n'; start--)
        ;
    end = strchr(p, '\n');
    assert_non_null(end);
    assert_true((size_t)(end - start) < size);
    memcpy(buf, start, (size_t)(end - start));
    buf[end - start] = '\0';
    return buf;
}

static void assert_row_colour(const char *text, const char *name, const char *ansi)
{
    char line[512];

    line_of(text, name, line, sizeof(line));
    if (!ansi) {
        assert_null(strchr(line, '\033'));
        return;
    }
    assert_memory_equal(line, ansi, strlen(ansi));
    assert_non_null(strstr(line, "\033[0m"));
}

static void test_table_colours(void **state)
{
    struct world w;
    struct kp_poolview_in in;
    struct kp_poolview v;
    struct kp_buf out = KP_BUF_INIT(1 << 20);
    const char *t;

    (void)state;
    world_fill(&w);
    in = world_in(&w);
    assert_int_equal(kp_poolview_build(&in, &v), 0);
    assert_int_equal(
        kp_poolview_render(&v, "pool", KP_POOLVIEW_TABLE, KP_POOLVIEW_COLOUR, NOW_USEC, &out), 0);
    t = kp_buf_str(&out);
    assert_true(strncmp(t, "NAME ", 5) == 0);
    assert_non_null(strstr(t, "NODECLAIM"));
    assert_row_colour(t, "h-avail", "\033[32m");
    assert_row_colour(t, "h-inuse", "\033[38;5;214m");
    assert_row_colour(t, "h-gold", "\033[38;5;214m");
    assert_row_colour(t, "h-claimed", "\033[34m");
    assert_row_colour(t, "h-leaving", "\033[34m");
    assert_row_colour(t, "h-pending", "\033[34m");
    assert_row_colour(t, "h-sick", "\033[31m");
    assert_row_colour(t, "h-parked", NULL);
    assert_non_null(strstr(t, "$0.08/h"));
    assert_non_null(strstr(t, "60m\033[0m\n")); /* AGE: created an hour before NOW */
    assert_non_null(
        strstr(t, "8 hosts: 1 warm, 2 joined, 3 at work, 1 failed; 6 vCPU attached, $1.08/h\n"));
    kp_buf_done(&out);
    kp_poolview_done(&v);
    world_free(&w);
}

/* Without the colour flag no escape byte is written, not even from a hostile address. */
static void test_no_colour(void **state)
{
    struct world w;
    struct kp_poolview_in in;
    struct kp_poolview v;
    struct kp_buf out = KP_BUF_INIT(1 << 20);
    char line[512];

    (void)state;
    world_fill(&w);
    host(&w, "h-evil", "lab", "'state':'Available'", "10.0.0.9\\u001b[2J");
    in = world_in(&w);
    assert_int_equal(kp_poolview_build(&in, &v), 0);
    assert_int_equal(kp_poolview_render(&v, "pool", KP_POOLVIEW_TABLE, 0, NOW_USEC, &out), 0);
    assert_null(memchr(out.data, '\033', out.len));
    kp_buf_reset(&out);
    assert_int_equal(kp_poolview_render(&v, "pool", KP_POOLVIEW_WIDE, 0, NOW_USEC, &out), 0);
    assert_null(memchr(out.data, '\033', out.len));
    assert_non_null(strstr(kp_buf_str(&out), "ADDRESS"));
    assert_non_null(strstr(kp_buf_str(&out), "TAINTS"));
    assert_non_null(
        strstr(line_of(kp_buf_str(&out), "h-evil", line, sizeof(line)), "10.0.0.9?[2J"));
    assert_non_null(
        strstr(line_of(kp_buf_str(&out), "h-inuse", line, sizeof(line)), "team=a:NoSchedule"));
    kp_buf_done(&out);
    kp_poolview_done(&v);
    world_free(&w);
}

static void test_json(void **state)
{
    struct world w;
    struct kp_poolview_in in;
    struct kp_poolview v;
    struct kp_buf out = KP_BUF_INIT(1 << 20);
    json_t *doc = NULL, *hosts = NULL, *h;
    const char *s;
    int64_t n;
    size_t i;
    bool found = false;

    (void)state;
    world_fill(&w);
    in = world_in(&w);
    assert_int_equal(kp_poolview_build(&in, &v), 0);
    /* The colour flag does not reach documents. */
    assert_int_equal(
        kp_poolview_render(&v, "pool", KP_POOLVIEW_JSON, KP_POOLVIEW_COLOUR, NOW_USEC, &out), 0);
    assert_null(memchr(out.data, '\033', out.len));
    assert_int_equal(kp_json_parse(out.data, out.len, out.len, 0, &doc, NULL), 0);
    assert_int_equal(kp_json_get_str(doc, "kind", &s), 0);
    assert_string_equal(s, "PoolView");
    assert_int_equal(kp_json_get_str(doc, "namespace", &s), 0);
    assert_string_equal(s, "pool");
    assert_int_equal(kp_json_get_array(doc, "hosts", &hosts), 0);
    assert_int_equal(kp_json_array_size(hosts), 8);
    for (i = 0; i < kp_json_array_size(hosts); i++) {
        h = kp_json_array_at(hosts, i);
        assert_int_equal(kp_json_get_str(h, "name", &s), 0);
        if (strcmp(s, "h-inuse") != 0)
            continue;
        found = true;
        assert_int_equal(kp_json_get_str(h, "state", &s), 0);
        assert_string_equal(s, "InUse");
        assert_int_equal(kp_json_get_str(h, "color", &s), 0);
        assert_string_equal(s, "amber");
        assert_int_equal(kp_json_get_str(h, "node", &s), 0);
        assert_string_equal(s, "n-1");
        assert_int_equal(kp_json_get_int(h, "pods", &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(kp_json_get_str(h, "vcpu", &s), 0);
        assert_string_equal(s, "4");
        assert_int_equal(kp_json_get_str(h, "ratePerHour", &s), 0);
        assert_string_equal(s, "0.08");
        assert_int_equal(kp_json_get_str(h, "creationTimestamp", &s), 0);
        assert_string_equal(s, "2025-12-31T23:00:00Z");
    }
    assert_true(found);
    /* A free host: null NodeClaim and Node, no rate. */
    h = kp_json_array_at(hosts, 0);
    assert_int_equal(kp_json_get_str(h, "name", &s), 0);
    assert_string_equal(s, "h-avail");
    assert_int_equal(kp_json_typeof(kp_json_array_at(hosts, 0)), KP_JSON_OBJECT);
    assert_int_equal(kp_json_path_int(doc, "totals.joined", &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(kp_json_path_int(doc, "totals.warm", &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(kp_json_path_str(doc, "totals.vcpu", &s), 0);
    assert_string_equal(s, "6");
    assert_int_equal(kp_json_path_str(doc, "totals.ratePerHour", &s), 0);
    assert_string_equal(s, "1.08");
    kp_json_unref(doc);
    kp_buf_done(&out);
    kp_poolview_done(&v);
    world_free(&w);
}

/* The YAML document parses and carries what the JSON one does. */
static void test_yaml(void **state)
{
    struct world w;
    struct kp_poolview_in in;
    struct kp_poolview v;
    struct kp_buf out = KP_BUF_INIT(1 << 20);
    struct kp_yaml_doc *doc = NULL;
    struct kp_yaml_error err = {0};
    const struct kp_yaml_node *root, *hosts, *h, *totals;
    const char *s;
    int64_t n;
    size_t i;

    (void)state;
    world_fill(&w);
    host(&w, "h-quote", "lab", "'state':'Available'", "a\\\"b\\\\c: #d\\u0007");
    in = world_in(&w);
    assert_int_equal(kp_poolview_build(&in, &v), 0);
    assert_int_equal(kp_poolview_render(&v, "pool", KP_POOLVIEW_YAML, 0, NOW_USEC, &out), 0);
    if (kp_yaml_parse(out.data, out.len, "view.yaml", out.len, 0, &doc, &err) < 0)
        fail_msg("%s:%u:%u: %s\n%s", "view.yaml", err.line, err.col, err.text, out.data);
    root = kp_yaml_doc_root(doc, 0);
    assert_int_equal(kp_yaml_get_cstr(kp_yaml_map_get(root, "kind"), &s), 0);
    assert_string_equal(s, "PoolView");
    hosts = kp_yaml_map_get(root, "hosts");
    assert_non_null(hosts);
    assert_int_equal(kp_yaml_len(hosts), 9);
    for (i = 0; i < kp_yaml_len(hosts); i++) {
        h = kp_yaml_seq_at(hosts, i);
        assert_int_equal(kp_yaml_get_cstr(kp_yaml_map_get(h, "name"), &s), 0);
        assert_string_equal(s, v.rows[i].name);
        assert_int_equal(kp_yaml_get_cstr(kp_yaml_map_get(h, "state"), &s), 0);
        assert_string_equal(s, v.rows[i].state);
        if (strcmp(v.rows[i].name, "h-quote") == 0) {
            assert_int_equal(kp_yaml_get_cstr(kp_yaml_map_get(h, "address"), &s), 0);
            assert_string_equal(s, "a\"b\\c: #d\a");
        }
        if (strcmp(v.rows[i].name, "h-inuse") == 0) {
            assert_int_equal(kp_yaml_get_int(kp_yaml_map_get(h, "pods"), &n), 0);
            assert_int_equal(n, 2);
            assert_int_equal(kp_yaml_len(kp_yaml_map_get(h, "taints")), 1);
        }
        if (strcmp(v.rows[i].name, "h-avail") == 0)
            assert_true(kp_yaml_is_null(kp_yaml_map_get(h, "node")));
    }
    totals = kp_yaml_map_get(root, "totals");
    assert_int_equal(kp_yaml_get_int(kp_yaml_map_get(totals, "hosts"), &n), 0);
    assert_int_equal(n, 9);
    assert_int_equal(kp_yaml_get_cstr(kp_yaml_map_get(totals, "ratePerHour"), &s), 0);
    assert_string_equal(s, "1.08");
    kp_yaml_doc_free(doc);
    kp_buf_done(&out);
    kp_poolview_done(&v);
    world_free(&w);
}

static void test_empty_and_formats(void **state)
{
    struct kp_poolview_in in = {0};
    struct kp_poolview v;
    struct kp_buf out = KP_BUF_INIT(1 << 20);
    enum kp_poolview_format f;

    (void)state;
    assert_int_equal(kp_poolview_build(&in, &v), 0);
    assert_int_equal(v.n_rows, 0);
    assert_int_equal(kp_poolview_render(&v, "pool", KP_POOLVIEW_TABLE, 0, NOW_USEC, &out), 0);
    assert_non_null(strstr(kp_buf_str(&out), "0 hosts: 0 warm"));
    kp_buf_reset(&out);
    assert_int_equal(kp_poolview_render(&v, "pool", KP_POOLVIEW_YAML, 0, NOW_USEC, &out), 0);
    assert_non_null(strstr(kp_buf_str(&out), "hosts: []\n"));
    assert_int_equal(kp_poolview_parse_format("", &f), 0);
    assert_int_equal(f, KP_POOLVIEW_TABLE);
    assert_int_equal(kp_poolview_parse_format("json", &f), 0);
    assert_int_equal(f, KP_POOLVIEW_JSON);
    assert_int_equal(kp_poolview_parse_format("xml", &f), -EINVAL);
    kp_buf_done(&out);
    kp_poolview_done(&v);
}

/* Allocation failures anywhere in build and render end in an error, never a crash or leak. */
static int torture_render(void)
{
    static const enum kp_poolview_format formats[] = {KP_POOLVIEW_WIDE, KP_POOLVIEW_JSON,
                                                      KP_POOLVIEW_YAML};
    struct kp_entry *h = NULL, *n = NULL;
    const void *hv[1], *nv[1];
    struct kp_poolview_in in = {0};
    struct kp_poolview v = {0};
    struct kp_buf out = KP_BUF_INIT(1 << 20);
    static const char host_json[] =
        "{\"metadata\":{\"name\":\"h\",\"namespace\":\"p\",\"uid\":\"u\"},\"spec\":{\"address\":"
        "\"a\",\"capacity\":{\"cpu\":\"2\"}},\"status\":{\"state\":\"InUse\",\"providerID\":"
        "\"x://h\"}}";
    static const char node_json[] = "{\"metadata\":{\"name\":\"n\",\"uid\":\"u\"},\"spec\":{"
                                    "\"providerID\":\"x://h\",\"taints\":[{\"key\":\"k\","
                                    "\"effect\":\"NoSchedule\"}]}}";
    size_t i;
    int r;

    if ((r = kp_sshhost_decode(host_json, strlen(host_json), &h)) < 0 ||
        (r = kp_node_decode(node_json, strlen(node_json), &n)) < 0)
        goto out;
    hv[0] = kp_sshhost_view(h);
    nv[0] = kp_node_view(n);
    in.hosts = (const struct kp_sshhost_view *const *)hv;
    in.n_hosts = 1;
    in.nodes = (const struct kp_node_view *const *)nv;
    in.n_nodes = 1;
    if ((r = kp_poolview_build(&in, &v)) < 0)
        goto out;
    for (i = 0; i < KP_ARRAY_SIZE(formats) && r == 0; i++) {
        kp_buf_reset(&out);
        r = kp_poolview_render(&v, "p", formats[i], KP_POOLVIEW_COLOUR, NOW_USEC, &out);
    }
out:
    kp_buf_done(&out);
    kp_poolview_done(&v);
    kp_entry_unref(n);
    kp_entry_unref(h);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build),
        cmocka_unit_test(test_rate_unknown),
        cmocka_unit_test(test_table_colours),
        cmocka_unit_test(test_no_colour),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_yaml),
        cmocka_unit_test(test_empty_and_formats),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_render),
    };

    return kp_test_main("poolview", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture),
                        argc, argv);
}
