/* DESIGN: the pool view of `kpssh get pool` (contract in cmd/kpssh/poolview.h).
 *
 * What: kp_poolview_build() joins each SSHHost with its NodeClaim, Node, SSHNodeClass and bound
 * pods into one row and sums the totals; kp_poolview_render() writes rows as text. Both are pure,
 * like provider/ssh/hostctl.c's planning over a projection: the verb (get-pool.c) owns the
 * informers, the clock and the terminal, and the unit test drives these two with decoded
 * objects alone.
 *
 * Why this way: the one-shot listing and every redraw of -w go through the same two calls over
 * a snapshot of the informers' stores, so what a user sees once is what the watch shows. JSON
 * is built as a tree through json/ and YAML is emitted from that same tree, so the two documents
 * cannot drift apart. Pod counts come from one sorted array of node names (n log n), not a scan
 * of every pod per host.
 *
 * Invariants: rows borrow strings from the caller's views; every text from the API passes
 * put_cell() (control bytes become '?') before it reaches a table; numbers are integers
 * (milli-CPUs, micro-USD) and are formatted once, here. */
#include "cmd/kpssh/poolview.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "api/obj-karpenter.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj.h"
#include "json/json.h"
#include "k8s/rfc3339.h"
#include "provider/ssh/obj-kpssh.h"

#define ANSI_RESET "\033[0m"

const char *kp_poolview_colour_name(enum kp_poolview_colour c)
{
    switch (c) {
    case KP_POOLVIEW_GREEN:
        return "green";
    case KP_POOLVIEW_AMBER:
        return "amber";
    case KP_POOLVIEW_BLUE:
        return "blue";
    case KP_POOLVIEW_RED:
        return "red";
    case KP_POOLVIEW_PLAIN:
    default:
        return "plain";
    }
}

/* Amber is the 256-colour orange; terminals without 256 colours fall back to their nearest. */
static const char *colour_ansi(enum kp_poolview_colour c)
{
    switch (c) {
    case KP_POOLVIEW_GREEN:
        return "\033[32m";
    case KP_POOLVIEW_AMBER:
        return "\033[38;5;214m";
    case KP_POOLVIEW_BLUE:
        return "\033[34m";
    case KP_POOLVIEW_RED:
        return "\033[31m";
    case KP_POOLVIEW_PLAIN:
    default:
        return NULL;
    }
}

static enum kp_poolview_colour state_colour(enum kp_host_state s)
{
    switch (s) {
    case KP_HOST_AVAILABLE:
        return KP_POOLVIEW_GREEN;
    case KP_HOST_IN_USE:
        return KP_POOLVIEW_AMBER;
    case KP_HOST_PENDING:
    case KP_HOST_CLAIMED:
    case KP_HOST_LEAVING:
        return KP_POOLVIEW_BLUE;
    case KP_HOST_UNHEALTHY:
        return KP_POOLVIEW_RED;
    case KP_HOST_MAINTENANCE:
    case KP_HOST_STATE_UNKNOWN:
    default:
        return KP_POOLVIEW_PLAIN;
    }
}

/* --- building ------------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_row(const void *a, const void *b)
{
    return strcmp(((const struct kp_poolview_row *)a)->name,
                  ((const struct kp_poolview_row *)b)->name);
}

/* How many entries of the sorted array v[n] equal s. */
static uint32_t count_sorted(const char *const *v, size_t n, const char *s)
{
    size_t lo = 0, hi = n, first;

    while (lo < hi) { /* first index with v[i] >= s */
        size_t mid = lo + (hi - lo) / 2;

        if (strcmp(v[mid], s) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    first = lo;
    hi = n;
    while (lo < hi) { /* first index with v[i] > s */
        size_t mid = lo + (hi - lo) / 2;

        if (strcmp(v[mid], s) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (uint32_t)KP_MIN(lo - first, (size_t)UINT32_MAX);
}

/* A pod that occupies its Node: bound, not finished, not being deleted. */
static bool pod_counts(const struct kp_pod_view *p)
{
    return p->node_name && *p->node_name && p->phase != KP_POD_SUCCEEDED &&
           p->phase != KP_POD_FAILED && p->meta.deletion_usec == 0;
}

static const struct kp_nodeclaim_view *find_claim(const struct kp_poolview_in *in, const char *name)
{
    size_t i;

    for (i = 0; name && i < in->n_claims; i++)
        if (strcmp(in->claims[i]->e.name, name) == 0)
            return in->claims[i];
    return NULL;
}

static const struct kp_node_view *find_node_by_pid(const struct kp_poolview_in *in, const char *pid)
{
    size_t i;

    for (i = 0; pid && *pid && i < in->n_nodes; i++)
        if (kp_streq(in->nodes[i]->provider_id, pid))
            return in->nodes[i];
    return NULL;
}

static const struct kp_node_view *find_node(const struct kp_poolview_in *in,
                                            const struct kp_sshhost_view *h,
                                            const struct kp_nodeclaim_view *nc)
{
    const struct kp_node_view *n = find_node_by_pid(in, h->provider_id);
    size_t i;

    if (!n && nc)
        n = find_node_by_pid(in, nc->provider_id);
    for (i = 0; !n && nc && nc->node_name && i < in->n_nodes; i++)
        if (strcmp(in->nodes[i]->e.name, nc->node_name) == 0)
            n = in->nodes[i];
    return n;
}

/* The class the host is billed under: the NodeClaim's SSHNodeClass, else the only class that
 * selects the host; NULL when there is none or more than one. */
static const struct kp_sshnodeclass_view *find_class(const struct kp_poolview_in *in,
                                                     const struct kp_sshhost_view *h,
                                                     const struct kp_nodeclaim_view *nc)
{
    const struct kp_sshnodeclass_view *found = NULL;
    size_t i;

    if (nc &&
        kp_nodeclass_ref_is(&nc->spec.node_class_ref, KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND)) {
        for (i = 0; nc->spec.node_class_ref.name && i < in->n_classes; i++)
            if (strcmp(in->classes[i]->e.name, nc->spec.node_class_ref.name) == 0)
                return in->classes[i];
        return NULL;
    }
    for (i = 0; i < in->n_classes; i++) {
        if (!kp_sshnodeclass_selects(in->classes[i], &h->meta.labels))
            continue;
        if (found)
            return NULL; /* two classes select it: which one bills is not ours to guess */
        found = in->classes[i];
    }
    return found;
}

static int64_t host_cpu_milli(const struct kp_sshhost_view *h)
{
    bool found = false;
    int64_t cpu = kp_resources_get(&h->observed_capacity, "cpu", &found);

    if (!found)
        cpu = kp_resources_get(&h->capacity, "cpu", NULL);
    return cpu > 0 ? cpu : 0;
}

static void fill_row(const struct kp_poolview_in *in, const struct kp_sshhost_view *h,
                     const char *const *busy, size_t n_busy, struct kp_poolview_row *row)
{
    const struct kp_nodeclaim_view *nc = find_claim(in, h->claim_name);
    const struct kp_node_view *node = find_node(in, h, nc);
    const struct kp_sshnodeclass_view *cls = find_class(in, h, nc);

    memset(row, 0, sizeof(*row));
    row->name = h->e.name;
    row->host_class = kp_sshhost_class(h);
    row->state = kp_host_state_name(h->state);
    row->address = h->address ? h->address : "";
    row->colour = state_colour(h->state);
    row->nodeclaim = h->claim_name;
    row->nodepool = nc ? nc->nodepool : NULL;
    row->nodeclass = cls ? cls->e.name : NULL;
    row->created_usec = h->meta.creation_usec;
    row->rate_micro = 0;
    if (!node)
        return;
    row->node = node->e.name;
    row->taints = &node->taints;
    row->pods = count_sorted(busy, n_busy, node->e.name);
    row->vcpu_milli = host_cpu_milli(h);
    if (!cls || cls->price_micro_usd < 0 ||
        kp_mul_overflow(cls->price_micro_usd, row->vcpu_milli, &row->rate_micro))
        row->rate_micro = -1;
    else
        row->rate_micro /= 1000;
}

int kp_poolview_build(const struct kp_poolview_in *in, struct kp_poolview *ret)
{
    struct kp_poolview_row *rows = NULL;
    const char **busy = NULL;
    struct kp_poolview_totals t = {0};
    size_t i, n_busy = 0;
    int r = -ENOMEM;

    memset(ret, 0, sizeof(*ret));
    if (in->n_hosts && !(rows = kp_calloc(in->n_hosts, sizeof(*rows))))
        goto out;
    if (in->n_pods && !(busy = kp_calloc(in->n_pods, sizeof(*busy))))
        goto out;
    for (i = 0; i < in->n_pods; i++)
        if (pod_counts(in->pods[i]))
            busy[n_busy++] = in->pods[i]->node_name;
    if (n_busy)
        qsort(busy, n_busy, sizeof(*busy), cmp_str);

    for (i = 0; i < in->n_hosts; i++) {
        struct kp_poolview_row *row = &rows[i];

        fill_row(in, in->hosts[i], busy, n_busy, row);
        t.hosts++;
        t.warm += row->colour == KP_POOLVIEW_GREEN;
        t.working += row->colour == KP_POOLVIEW_BLUE;
        t.failed += row->colour == KP_POOLVIEW_RED;
        if (!row->node)
            continue;
        t.joined++;
        if (kp_add_overflow(t.vcpu_milli, row->vcpu_milli, &t.vcpu_milli))
            t.vcpu_milli = INT64_MAX;
        if (row->rate_micro < 0 || kp_add_overflow(t.rate_micro, row->rate_micro, &t.rate_micro))
            t.rate_unknown = true;
    }
    if (in->n_hosts)
        qsort(rows, in->n_hosts, sizeof(*rows), cmp_row);
    ret->rows = rows;
    ret->n_rows = in->n_hosts;
    ret->totals = t;
    rows = NULL; /* the caller owns them now */
    r = 0;
out:
    kp_free(busy);
    kp_free(rows);
    return r;
}

void kp_poolview_done(struct kp_poolview *v)
{
    kp_free(v->rows);
    memset(v, 0, sizeof(*v));
}

int kp_poolview_parse_format(const char *s, enum kp_poolview_format *ret)
{
    static const char *const names[] = {"", "wide", "json", "yaml"};
    size_t i;

    for (i = 0; i < KP_ARRAY_SIZE(names); i++)
        if (strcmp(s, names[i]) == 0) {
            *ret = (enum kp_poolview_format)i;
            return 0;
        }
    return -EINVAL;
}

/* --- numbers as text ------------------------------------------------------------------------ */

/* v / 10^digits as a decimal with at least min_frac fraction digits and no trailing zeros
 * beyond them: (1500, 3, 0) is "1.5", (40000, 6, 2) is "0.04". v >= 0. */
static int put_fixed(struct kp_buf *out, int64_t v, unsigned digits, unsigned min_frac)
{
    int64_t scale = 1;
    char frac[24];
    unsigned i, keep;
    int r;

    for (i = 0; i < digits; i++)
        scale *= 10;
    if ((r = kp_buf_printf(out, "%" PRId64, v / scale)) < 0)
        return r;
    (void)snprintf(frac, sizeof(frac), "%0*" PRId64, (int)digits, v % scale);
    for (keep = digits; keep > min_frac && frac[keep - 1] == '0'; keep--)
        ;
    if (keep == 0)
        return 0;
    if ((r = kp_buf_putc(out, '.')) < 0)
        return r;
    return kp_buf_append(out, frac, keep);
}

static int put_vcpu(struct kp_buf *out, int64_t milli)
{
    return put_fixed(out, milli, 3, 0);
}

static int put_usd(struct kp_buf *out, int64_t micro)
{
    return put_fixed(out, micro, 6, 2);
}

/* kubectl's short age: 45s, 12m, 5h, 3d. */
static int put_age(struct kp_buf *out, int64_t created_usec, int64_t now_usec)
{
    int64_t s;

    if (created_usec <= 0 || now_usec < created_usec)
        return kp_buf_puts(out, "<unknown>");
    s = (now_usec - created_usec) / 1000000;
    if (s < 120)
        return kp_buf_printf(out, "%" PRId64 "s", s);
    if (s < 120 * 60)
        return kp_buf_printf(out, "%" PRId64 "m", s / 60);
    if (s < 48 * 3600)
        return kp_buf_printf(out, "%" PRId64 "h", s / 3600);
    return kp_buf_printf(out, "%" PRId64 "d", s / 86400);
}

/* --- tables --------------------------------------------------------------------------------- */

enum col {
    COL_NAME,
    COL_CLASS,
    COL_STATE,
    COL_NODECLAIM,
    COL_NODE,
    COL_PODS,
    COL_VCPU,
    COL_RATE,
    COL_AGE,
    COL_ADDRESS, /* wide from here on */
    COL_NODEPOOL,
    COL_NODECLASS,
    COL_TAINTS,
    COL_N,
};
#define COL_N_NARROW COL_ADDRESS
static const char *const col_titles[COL_N] = {
    "NAME", "CLASS", "STATE",   "NODECLAIM", "NODE",      "PODS",   "VCPU",
    "RATE", "AGE",   "ADDRESS", "NODEPOOL",  "NODECLASS", "TAINTS",
};

/* Appends s with control bytes as '?': API text never drives the terminal. */
static int put_cell(struct kp_buf *out, const char *s)
{
    int r = 0;

    for (; *s && r == 0; s++) {
        unsigned char c = (unsigned char)*s;

        r = kp_buf_putc(out, c < 0x20 || c == 0x7f ? '?' : (char)c);
    }
    return r;
}

static int put_taints(struct kp_buf *out, const struct kp_taints *t)
{
    size_t i;
    int r = 0;

    if (!t || t->n == 0)
        return kp_buf_puts(out, "<none>");
    for (i = 0; i < t->n && r == 0; i++) {
        if (i && (r = kp_buf_putc(out, ',')) < 0)
            break;
        if ((r = put_cell(out, t->v[i].key)) < 0)
            break;
        if (t->v[i].value && *t->v[i].value &&
            ((r = kp_buf_putc(out, '=')) < 0 || (r = put_cell(out, t->v[i].value)) < 0))
            break;
        r = kp_buf_printf(out, ":%s", kp_taint_effect_name(t->v[i].effect));
    }
    return r;
}

/* The text of one cell, into cell (reset first). */
static int cell_text(const struct kp_poolview_row *row, enum col c, int64_t now_usec,
                     struct kp_buf *cell)
{
    kp_buf_reset(cell);
    switch (c) {
    case COL_NAME:
        return put_cell(cell, row->name);
    case COL_CLASS:
        return put_cell(cell, row->host_class);
    case COL_STATE:
        return put_cell(cell, row->state);
    case COL_NODECLAIM:
        return put_cell(cell, row->nodeclaim ? row->nodeclaim : "-");
    case COL_NODE:
        return put_cell(cell, row->node ? row->node : "-");
    case COL_PODS:
        return row->node ? kp_buf_printf(cell, "%" PRIu32, row->pods) : kp_buf_puts(cell, "-");
    case COL_VCPU:
        return put_vcpu(cell, row->vcpu_milli);
    case COL_RATE: {
        int r;

        if (!row->node)
            return kp_buf_puts(cell, "-");
        if (row->rate_micro < 0)
            return kp_buf_puts(cell, "?");
        if ((r = kp_buf_putc(cell, '$')) < 0 || (r = put_usd(cell, row->rate_micro)) < 0)
            return r;
        return kp_buf_puts(cell, "/h");
    }
    case COL_AGE:
        return put_age(cell, row->created_usec, now_usec);
    case COL_ADDRESS:
        return put_cell(cell, row->address);
    case COL_NODEPOOL:
        return put_cell(cell, row->nodepool ? row->nodepool : "-");
    case COL_NODECLASS:
        return put_cell(cell, row->nodeclass ? row->nodeclass : "-");
    case COL_TAINTS:
        return row->node ? put_taints(cell, row->taints) : kp_buf_puts(cell, "-");
    case COL_N:
    default:
        return -EINVAL;
    }
}

static int put_padded(struct kp_buf *out, const char *s, size_t len, size_t width, bool last)
{
    int r = kp_buf_append(out, s, len);

    for (; r == 0 && !last && len < width + 3; len++)
        r = kp_buf_putc(out, ' ');
    return r;
}

static int put_totals(struct kp_buf *out, const struct kp_poolview_totals *t)
{
    int r;

    r = kp_buf_printf(out, "%zu host%s: %zu warm, %zu joined, %zu at work, %zu failed; ", t->hosts,
                      t->hosts == 1 ? "" : "s", t->warm, t->joined, t->working, t->failed);
    if (r == 0)
        r = put_vcpu(out, t->vcpu_milli);
    if (r == 0)
        r = kp_buf_puts(out, " vCPU attached, $");
    if (r == 0)
        r = put_usd(out, t->rate_micro);
    if (r == 0)
        r = kp_buf_puts(out, t->rate_unknown ? "/h or more (some rates unknown)\n" : "/h\n");
    return r;
}

static int render_table(const struct kp_poolview *v, bool wide, bool colour, int64_t now_usec,
                        struct kp_buf *out)
{
    struct kp_buf cell = KP_BUF_INIT(KP_POOLVIEW_MAX_OUTPUT);
    size_t width[COL_N] = {0};
    size_t n_cols = wide ? COL_N : COL_N_NARROW;
    size_t i, c;
    int r = 0;

    for (c = 0; c < n_cols; c++)
        width[c] = strlen(col_titles[c]);
    for (i = 0; i < v->n_rows; i++)
        for (c = 0; c < n_cols; c++) {
            if ((r = cell_text(&v->rows[i], (enum col)c, now_usec, &cell)) < 0)
                goto out;
            width[c] = KP_MAX(width[c], cell.len);
        }
    for (c = 0; c < n_cols && r == 0; c++)
        r = put_padded(out, col_titles[c], strlen(col_titles[c]), width[c], c + 1 == n_cols);
    if (r < 0 || (r = kp_buf_putc(out, '\n')) < 0)
        goto out;
    for (i = 0; i < v->n_rows; i++) {
        const char *ansi = colour ? colour_ansi(v->rows[i].colour) : NULL;

        if (ansi && (r = kp_buf_puts(out, ansi)) < 0)
            goto out;
        for (c = 0; c < n_cols; c++) {
            if ((r = cell_text(&v->rows[i], (enum col)c, now_usec, &cell)) < 0 ||
                (r = put_padded(out, cell.data ? cell.data : "", cell.len, width[c],
                                c + 1 == n_cols)) < 0)
                goto out;
        }
        if (ansi && (r = kp_buf_puts(out, ANSI_RESET)) < 0)
            goto out;
        if ((r = kp_buf_putc(out, '\n')) < 0)
            goto out;
    }
    r = put_totals(out, &v->totals);
out:
    kp_buf_done(&cell);
    return r;
}

/* --- documents ------------------------------------------------------------------------------ */

static int set_str(json_t *o, const char *key, const char *value)
{
    const char *path[] = {key, NULL};

    return value ? kp_json_patch_set_str(o, path, value) : kp_json_patch_set_null(o, path);
}

static int set_int(json_t *o, const char *key, int64_t value)
{
    const char *path[] = {key, NULL};

    return kp_json_patch_set_int(o, path, value);
}

static int set_steal(json_t *o, const char *key, json_t *value)
{
    const char *path[] = {key, NULL};

    return kp_json_patch_set_steal(o, path, value);
}

/* Sets key to the text put() makes of value. */
static int set_fmt(json_t *o, const char *key, int (*put)(struct kp_buf *, int64_t), int64_t value)
{
    struct kp_buf b = KP_BUF_INIT(64);
    int r;

    if ((r = put(&b, value)) == 0)
        r = set_str(o, key, kp_buf_str(&b));
    kp_buf_done(&b);
    return r;
}

static int host_doc(const struct kp_poolview_row *row, json_t **ret)
{
    json_t *o = NULL, *taints = NULL, *s = NULL;
    char ts[40];
    size_t i;
    int r;

    if ((r = kp_json_patch_new(&o)) < 0)
        goto out;
    if ((r = set_str(o, "name", row->name)) < 0 || (r = set_str(o, "class", row->host_class)) < 0 ||
        (r = set_str(o, "state", row->state)) < 0 ||
        (r = set_str(o, "color", kp_poolview_colour_name(row->colour))) < 0 ||
        (r = set_str(o, "nodeClaim", row->nodeclaim)) < 0 ||
        (r = set_str(o, "node", row->node)) < 0 || (r = set_int(o, "pods", row->pods)) < 0 ||
        (r = set_fmt(o, "vcpu", put_vcpu, row->vcpu_milli)) < 0)
        goto out;
    if (row->rate_micro < 0)
        r = set_str(o, "ratePerHour", NULL);
    else
        r = set_fmt(o, "ratePerHour", put_usd, row->rate_micro);
    if (r < 0 || (r = set_str(o, "address", row->address)) < 0 ||
        (r = set_str(o, "nodePool", row->nodepool)) < 0 ||
        (r = set_str(o, "nodeClass", row->nodeclass)) < 0)
        goto out;
    if ((r = kp_json_array_new(&taints)) < 0)
        goto out;
    for (i = 0; row->taints && i < row->taints->n; i++) {
        const struct kp_taint *t = &row->taints->v[i];
        struct kp_buf b = KP_BUF_INIT(1024);

        r = kp_buf_puts(&b, t->key);
        if (r == 0 && t->value && *t->value)
            r = kp_buf_printf(&b, "=%s", t->value);
        if (r == 0)
            r = kp_buf_printf(&b, ":%s", kp_taint_effect_name(t->effect));
        if (r == 0)
            r = kp_json_string_new(kp_buf_str(&b), &s);
        kp_buf_done(&b);
        if (r < 0)
            goto out;
        r = kp_json_array_append_steal(taints, s);
        s = NULL;
        if (r < 0)
            goto out;
    }
    r = set_steal(o, "taints", taints);
    taints = NULL;
    if (r < 0)
        goto out;
    if (row->created_usec > 0 &&
        kp_rfc3339_format(row->created_usec, KP_RFC3339_SECONDS, ts, sizeof(ts)) == 0)
        r = set_str(o, "creationTimestamp", ts);
    else
        r = set_str(o, "creationTimestamp", NULL);
    if (r < 0)
        goto out;
    *ret = o;
    o = NULL; /* the caller owns it now */
out:
    kp_json_unref(taints);
    kp_json_unref(o);
    return r;
}

static int view_doc(const struct kp_poolview *v, const char *ns, json_t **ret)
{
    const struct kp_poolview_totals *t = &v->totals;
    json_t *doc = NULL, *hosts = NULL, *h = NULL, *tot = NULL;
    size_t i;
    int r;

    if ((r = kp_json_patch_new(&doc)) < 0 || (r = set_str(doc, "kind", "PoolView")) < 0 ||
        (r = set_str(doc, "namespace", ns)) < 0 || (r = kp_json_array_new(&hosts)) < 0)
        goto out;
    for (i = 0; i < v->n_rows; i++) {
        if ((r = host_doc(&v->rows[i], &h)) < 0)
            goto out;
        r = kp_json_array_append_steal(hosts, h);
        h = NULL;
        if (r < 0)
            goto out;
    }
    r = set_steal(doc, "hosts", hosts);
    hosts = NULL;
    if (r < 0 || (r = kp_json_patch_new(&tot)) < 0)
        goto out;
    if ((r = set_int(tot, "hosts", (int64_t)t->hosts)) < 0 ||
        (r = set_int(tot, "warm", (int64_t)t->warm)) < 0 ||
        (r = set_int(tot, "joined", (int64_t)t->joined)) < 0 ||
        (r = set_int(tot, "working", (int64_t)t->working)) < 0 ||
        (r = set_int(tot, "failed", (int64_t)t->failed)) < 0 ||
        (r = set_fmt(tot, "vcpu", put_vcpu, t->vcpu_milli)) < 0 ||
        (r = set_fmt(tot, "ratePerHour", put_usd, t->rate_micro)) < 0 ||
        (r = kp_json_patch_set_bool(tot, (const char *[]){"rateUnknown", NULL}, t->rate_unknown)) <
            0)
        goto out;
    r = set_steal(doc, "totals", tot);
    tot = NULL;
    if (r < 0)
        goto out;
    *ret = doc;
    doc = NULL; /* the caller owns it now */
out:
    kp_json_unref(tot);
    kp_json_unref(hosts);
    kp_json_unref(doc);
    return r;
}

/* A YAML double-quoted scalar: YAML's escapes are a superset of the ones used here, and a
 * quoted scalar is never read as a number, boolean or null. */
static int yaml_quoted(struct kp_buf *out, const char *s)
{
    int r = kp_buf_putc(out, '"');

    for (; r == 0 && *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            r = kp_buf_printf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            r = kp_buf_printf(out, "\\x%02x", c);
        else
            r = kp_buf_putc(out, (char)c);
    }
    return r ? r : kp_buf_putc(out, '"');
}

static int yaml_indent(struct kp_buf *out, unsigned level)
{
    int r = 0;
    unsigned i;

    for (i = 0; i < level * 2 && r == 0; i++)
        r = kp_buf_putc(out, ' ');
    return r;
}

/* A scalar value, or "[]"/"{}" for an empty container; 1 when v is a non-empty container the
 * caller must write as a block. */
static int yaml_inline(struct kp_buf *out, const json_t *v)
{
    const char *s;
    int64_t n;

    switch (kp_json_typeof(v)) {
    case KP_JSON_STRING:
        return kp_json_as_str(v, &s) < 0 ? -EINVAL : yaml_quoted(out, s);
    case KP_JSON_INTEGER:
        return kp_json_as_int(v, &n) < 0 ? -EINVAL : kp_buf_printf(out, "%" PRId64, n);
    case KP_JSON_TRUE:
        return kp_buf_puts(out, "true");
    case KP_JSON_FALSE:
        return kp_buf_puts(out, "false");
    case KP_JSON_NULL:
        return kp_buf_puts(out, "null");
    case KP_JSON_ARRAY:
        return kp_json_array_size(v) ? 1 : kp_buf_puts(out, "[]");
    case KP_JSON_OBJECT: {
        struct kp_json_iter it = KP_JSON_ITER_INIT;
        const char *k;
        json_t *x;

        return kp_json_object_next(v, &it, &k, &x) ? 1 : kp_buf_puts(out, "{}");
    }
    case KP_JSON_REAL:
    default:
        return -EINVAL; /* the view holds no reals */
    }
}

static int yaml_block(struct kp_buf *out, const json_t *v, unsigned level, bool on_dash_line);

/* Writes v after "key:" or "-": inline, or a newline and a block one level deeper. In a
 * sequence item a mapping starts on the dash's line. */
static int yaml_value(struct kp_buf *out, const json_t *v, unsigned level, bool item)
{
    int r = kp_buf_putc(out, ' ');

    if (r < 0)
        return r;
    r = yaml_inline(out, v);
    if (r <= 0)
        return r ? r : kp_buf_putc(out, '\n');
    kp_buf_truncate(out, out->len - 1); /* the space before a block */
    if (item && kp_json_typeof(v) == KP_JSON_OBJECT) {
        if ((r = kp_buf_putc(out, ' ')) < 0)
            return r;
        return yaml_block(out, v, level + 1, true);
    }
    if ((r = kp_buf_putc(out, '\n')) < 0)
        return r;
    return yaml_block(out, v, level + 1, false);
}

/* A non-empty container at level. on_dash_line: a mapping that is a sequence item, whose first
 * key goes on the dash's line (see yaml_value). */
static int yaml_block(struct kp_buf *out, const json_t *v, unsigned level, bool on_dash_line)
{
    int r = 0;

    if (kp_json_typeof(v) == KP_JSON_ARRAY) {
        size_t i;

        for (i = 0; i < kp_json_array_size(v) && r == 0; i++) {
            if ((r = yaml_indent(out, level)) < 0 || (r = kp_buf_putc(out, '-')) < 0)
                break;
            r = yaml_value(out, kp_json_array_at(v, i), level, true);
        }
    } else {
        struct kp_json_iter it = KP_JSON_ITER_INIT;
        const char *k;
        json_t *x;
        bool first = true;

        while (r == 0 && kp_json_object_next(v, &it, &k, &x)) {
            if (!(first && on_dash_line))
                r = yaml_indent(out, level);
            first = false;
            if (r == 0)
                r = kp_buf_printf(out, "%s:", k); /* keys are this file's own identifiers */
            if (r == 0)
                r = yaml_value(out, x, level, false);
        }
    }
    return r;
}

int kp_poolview_yaml(const json_t *doc, struct kp_buf *out)
{
    return yaml_block(out, doc, 0, false);
}

int kp_poolview_render(const struct kp_poolview *v, const char *ns, enum kp_poolview_format format,
                       unsigned flags, int64_t now_usec, struct kp_buf *out)
{
    json_t *doc = NULL;
    int r;

    if (format == KP_POOLVIEW_TABLE || format == KP_POOLVIEW_WIDE)
        return render_table(v, format == KP_POOLVIEW_WIDE, flags & KP_POOLVIEW_COLOUR, now_usec,
                            out);
    if ((r = view_doc(v, ns, &doc)) < 0)
        goto out;
    if (format == KP_POOLVIEW_JSON) {
        if ((r = kp_json_dump(doc, KP_JSON_PRETTY, out)) == 0)
            r = kp_buf_putc(out, '\n');
    } else {
        r = yaml_block(out, doc, 0, false);
    }
out:
    kp_json_unref(doc);
    return r;
}
