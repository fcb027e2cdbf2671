/* DESIGN: `kpssh simulate`, the provisioner's plan for the pending pods, without acting on it.
 *
 * What: gathers NodePools, SSHNodeClasses, SSHHosts, Nodes, NodeClaims, Pods,
 * PersistentVolumeClaims, PodDisruptionBudgets and DaemonSets either from manifest files (-f,
 * manifest.h)
 * or from one LIST of each kind in the cluster, projects each object with the kp_<kind>_project
 * function the controller's informers use, and runs one provisioning round's simulation over
 * them: the SSH provider's catalog (provider/ssh/provider.h, over in-memory stores), the core's
 * cluster state fed with the Nodes, NodeClaims and Pods (core/state/cluster.h, detached from any
 * informer), kp_sim_build and kp_sim_prepare (core/provisioning/simulation.h, exactly the calls
 * of the provisioner's round_build) and kp_sched_solve. It prints the plan; it writes nothing.
 *
 * Why the core and the provider themselves: the point of the verb is to answer "what would the
 * controller do", so any second implementation of catalog, pod selection or scheduling would
 * answer a different question. That is why cmd/kpssh may link core/ (docs/ARCHITECTURE.md).
 *
 * File mode fills in what a live cluster has but a hand-written manifest lacks (only when the
 * field is absent; docs/cli.md): metadata.uid, the namespace (default, or the pool namespace for
 * SSHHosts), an unbound Pod's PodScheduled=False/Unschedulable (kube-scheduler's mark that makes
 * a pod Karpenter's), a NodePool's Ready condition (the NodePool controller's), and an SSHHost's
 * status as after a first good probe (Available, amd64).
 *
 * Threads: the main thread only; no informer runs. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/apiconfig.h"
#include "k8s/client.h"
#include "k8s/status.h"
#include "k8s/store.h"
#include "api/indexes.h"
#include "api/obj-karpenter.h"
#include "api/obj-misc.h"
#include "api/obj-node.h"
#include "api/obj-pod.h"
#include "api/obj-storage.h"
#include "api/quantity.h"
#include "api/requirements.h"
#include "core/core.h"
#include "core/provider.h"
#include "core/provisioning/provisioner.h"
#include "core/provisioning/simulation.h"
#include "core/state/cluster.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/provider.h"
#include "cmd/kpssh/itypes.h"
#include "cmd/kpssh/manifest.h"
#include "cmd/kpssh/poolview.h"
#include "cmd/kpssh/verbs.h"

#define SIM_NS_DEFAULT "kpssh-system" /* as get pool and kpssh-controller's --pool-namespace */
#define SIM_NS_ENV "KPSSH_POOL_NAMESPACE"
#define SIM_MAX_FILES 64
#define SIM_MAX_OUTPUT (64u << 20)

enum sim_format { SIM_TABLE = 0, SIM_JSON, SIM_YAML };

struct sim_opts {
    const char *files[SIM_MAX_FILES];
    size_t n_files;
    const char *ns;
    const char *kubeconfig;
    const char *context;
    const char *itypes; /* --instance-types FILE, or NULL: the SSH provider's catalog */
    enum sim_format format;
};

enum store_ix {
    S_PODS,
    S_NODES,
    S_NODECLAIMS,
    S_NODEPOOLS,
    S_HOSTS,
    S_CLASSES,
    S_PVCS,
    S_PDBS,
    S_DAEMONSETS,
    S_N
};

enum scope { CLUSTER, NAMESPACED, POOL_NS };

struct kind_def {
    const char *group; /* "" for the core group */
    const char *kind;
    const struct kp_resource *res;
    int (*project)(const json_t *obj, struct kp_entry **ret);
    enum store_ix store;
    enum scope scope;
};

static const struct kind_def *kind_defs(size_t *ret_n)
{
    static struct kind_def defs[S_N];

    /* Filled at run time: the resources are extern objects, not constant expressions. */
    defs[S_PODS] = (struct kind_def){"", "Pod", &KP_RES_POD, kp_pod_project, S_PODS, NAMESPACED};
    defs[S_NODES] = (struct kind_def){"", "Node", &KP_RES_NODE, kp_node_project, S_NODES, CLUSTER};
    defs[S_NODECLAIMS] = (struct kind_def){"karpenter.sh",       "NodeClaim",  &KP_RES_NODECLAIM,
                                           kp_nodeclaim_project, S_NODECLAIMS, CLUSTER};
    defs[S_NODEPOOLS] = (struct kind_def){"karpenter.sh",      "NodePool",  &KP_RES_NODEPOOL,
                                          kp_nodepool_project, S_NODEPOOLS, CLUSTER};
    defs[S_HOSTS] = (struct kind_def){"karpenter.kpssh.dev", "SSHHost", &KP_RES_SSHHOST,
                                      kp_sshhost_project,    S_HOSTS,   POOL_NS};
    defs[S_CLASSES] =
        (struct kind_def){"karpenter.kpssh.dev",   "SSHNodeClass", &KP_RES_SSHNODECLASS,
                          kp_sshnodeclass_project, S_CLASSES,      CLUSTER};
    defs[S_PVCS] = (struct kind_def){
        "", "PersistentVolumeClaim", &KP_RES_PVC, kp_pvc_project, S_PVCS, NAMESPACED};
    defs[S_PDBS] = (struct kind_def){
        "policy", "PodDisruptionBudget", &KP_RES_PDB, kp_pdb_project, S_PDBS, NAMESPACED};
    defs[S_DAEMONSETS] = (struct kind_def){
        "apps", "DaemonSet", &KP_RES_DAEMONSET, kp_daemonset_project, S_DAEMONSETS, NAMESPACED};
    *ret_n = S_N;
    return defs;
}

struct sim_stores {
    struct kp_store *s[S_N];
    struct kp_store *profiles; /* empty: the catalog does not read join profiles */
};

static void stores_done(struct sim_stores *st)
{
    for (size_t k = 0; k < S_N; k++)
        st->s[k] = kp_store_free(st->s[k]);
    st->profiles = kp_store_free(st->profiles);
}

static int stores_init(struct sim_stores *st)
{
    int r;

    memset(st, 0, sizeof(*st));
    for (size_t k = 0; k < S_N; k++)
        if ((r = kp_store_new(&st->s[k])) < 0)
            return r;
    if ((r = kp_store_new(&st->profiles)) < 0)
        return r;
    /* The index the simulation reads bound pods by, as the provisioner adds it. */
    return kp_store_add_index(st->s[S_PODS], KP_INDEX_POD_NODE, kp_index_pod_node);
}

/* --- options ------------------------------------------------------------------------------------ */

static void usage(FILE *f, const char *prog)
{
    fprintf(
        f,
        "Usage: %s simulate [-f FILE]... [options]\n"
        "\n"
        "What the provisioner would do with the pending pods: the NodeClaims it would\n"
        "create (NodePool, instance types cheapest first, pods), the pods it would place on\n"
        "existing nodes, and why each other pod cannot be placed. Nothing is changed.\n"
        "Without -f the objects are listed from the cluster once.\n"
        "\n"
        "Options:\n"
        "  -f, --filename FILE  YAML or JSON manifests (- for stdin); repeatable. Kinds:\n"
        "                       NodePool, SSHNodeClass, SSHHost, Pod, Node, NodeClaim,\n"
        "                       PersistentVolumeClaim, PodDisruptionBudget, DaemonSet\n"
        "                       (or a List)\n"
        "  -n, --namespace NS   pool namespace (default: $%s, else %s)\n"
        "  -o, --output FMT     table (a summary, the default), json or yaml\n"
        "      --instance-types FILE\n"
        "                       every NodePool's instance types, from an InstanceTypes\n"
        "                       document (apiVersion " KP_ITYPES_API_VERSION "), instead of\n"
        "                       SSHNodeClasses and SSHHosts; NodePools are taken as Ready\n"
        "      --kubeconfig F   kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)\n"
        "      --context NAME   kubeconfig context (default: its current-context)\n"
        "  -h, --help           this text\n",
        prog, SIM_NS_ENV, SIM_NS_DEFAULT);
}

static int parse_opts(int argc, char **argv, const char *prog, struct sim_opts *o, bool *ret_help)
{
    const char *env_ns = getenv(SIM_NS_ENV);
    const char *v;
    size_t n;

    memset(o, 0, sizeof(*o));
    *ret_help = false;
    o->ns = env_ns && *env_ns ? env_ns : SIM_NS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            *ret_help = true;
            return 0;
        } else if ((n = kp_cli_opt_is(a, "-f", "--filename")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--filename", n, prog, "simulate: ")))
                return -EINVAL;
            if (!*v || o->n_files == SIM_MAX_FILES) {
                fprintf(stderr, "%s: simulate: %s\n", prog,
                        *v ? "too many -f files (at most 64)" : "-f needs a file name");
                return -EINVAL;
            }
            o->files[o->n_files++] = v;
        } else if ((n = kp_cli_opt_is(a, "-n", "--namespace")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--namespace", n, prog, "simulate: ")))
                return -EINVAL;
            if (!*v) {
                fprintf(stderr, "%s: simulate: --namespace must not be empty\n", prog);
                return -EINVAL;
            }
            o->ns = v;
        } else if ((n = kp_cli_opt_is(a, "-o", "--output")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--output", n, prog, "simulate: ")))
                return -EINVAL;
            if (strcmp(v, "json") == 0)
                o->format = SIM_JSON;
            else if (strcmp(v, "yaml") == 0)
                o->format = SIM_YAML;
            else if (strcmp(v, "table") == 0)
                o->format = SIM_TABLE;
            else {
                fprintf(stderr, "%s: simulate: --output must be table, json or yaml, not \"%s\"\n",
                        prog, v);
                return -EINVAL;
            }
        } else if ((n = kp_cli_opt_is(a, NULL, "--instance-types")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--instance-types", n, prog, "simulate: ")))
                return -EINVAL;
            if (!*v) {
                fprintf(stderr, "%s: simulate: --instance-types needs a file name\n", prog);
                return -EINVAL;
            }
            o->itypes = v;
        } else if ((n = kp_cli_opt_is(a, NULL, "--kubeconfig")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--kubeconfig", n, prog, "simulate: ")))
                return -EINVAL;
            o->kubeconfig = v;
        } else if ((n = kp_cli_opt_is(a, NULL, "--context")) > 0) {
            if (!(v = kp_cli_opt_value(argc, argv, &i, "--context", n, prog, "simulate: ")))
                return -EINVAL;
            o->context = v;
        } else {
            fprintf(stderr, "%s: simulate: unknown %s \"%s\" (see --help)\n", prog,
                    a[0] == '-' ? "option" : "argument", a);
            return -EINVAL;
        }
    }
    for (size_t k = 0; o->itypes && strcmp(o->itypes, "-") == 0 && k < o->n_files; k++)
        if (strcmp(o->files[k], "-") == 0) {
            fprintf(stderr, "%s: simulate: stdin can be read once: -f - or --instance-types -\n",
                    prog);
            return -EINVAL;
        }
    return 0;
}

/* --- file mode ---------------------------------------------------------------------------------- */

static bool field_absent(const json_t *obj, const char *const *path)
{
    json_t *v = NULL;

    return kp_json_pathv(obj, path, &v) < 0 || !v;
}

/* One condition {type, status, reason?} appended to a new array stored at status.conditions. */
static int set_condition(json_t *obj, const char *type, const char *status, const char *reason)
{
    json_t *arr = NULL, *c = NULL;
    int r;

    if ((r = kp_json_array_new(&arr)) < 0 || (r = kp_json_patch_new(&c)) < 0)
        goto out;
    if ((r = kp_json_patch_set_str(c, KP_JSON_PATH("type"), type)) < 0 ||
        (r = kp_json_patch_set_str(c, KP_JSON_PATH("status"), status)) < 0 ||
        (reason && (r = kp_json_patch_set_str(c, KP_JSON_PATH("reason"), reason)) < 0) ||
        (r = kp_json_patch_set_str(c, KP_JSON_PATH("lastTransitionTime"), "2026-01-01T00:00:00Z")) <
            0)
        goto out;
    r = kp_json_array_append_steal(arr, c);
    c = NULL;
    if (r < 0)
        goto out;
    r = kp_json_patch_set_steal(obj, KP_JSON_PATH("status", "conditions"), arr);
    arr = NULL;
out:
    kp_json_unref(c);
    kp_json_unref(arr);
    return r;
}

/* What a hand-written manifest lacks and a live object has (see DESIGN); only absent fields. */
static int file_defaults(const struct kind_def *d, json_t *obj, const char *pool_ns)
{
    const char *ns = NULL, *name = NULL;
    char uid[600];
    int r = 0;

    if (d->scope != CLUSTER && field_absent(obj, KP_JSON_PATH("metadata", "namespace")) &&
        (r = kp_json_patch_set_str(obj, KP_JSON_PATH("metadata", "namespace"),
                                   d->scope == POOL_NS ? pool_ns : "default")) < 0)
        return r;
    if (field_absent(obj, KP_JSON_PATH("metadata", "uid"))) {
        if (kp_json_path_str(obj, "metadata.namespace", &ns) < 0)
            ns = NULL;
        if (kp_json_path_str(obj, "metadata.name", &name) < 0)
            name = NULL;
        (void)snprintf(uid, sizeof(uid), "file-%s-%s-%s", d->kind, ns ? ns : "", name ? name : "");
        if ((r = kp_json_patch_set_str(obj, KP_JSON_PATH("metadata", "uid"), uid)) < 0)
            return r;
    }
    switch (d->store) {
    case S_PODS:
        if (field_absent(obj, KP_JSON_PATH("spec", "nodeName")) &&
            field_absent(obj, KP_JSON_PATH("status", "conditions")) &&
            ((r = kp_json_patch_set_str(obj, KP_JSON_PATH("status", "phase"), "Pending")) < 0 ||
             (r = set_condition(obj, "PodScheduled", "False", "Unschedulable")) < 0))
            return r;
        break;
    case S_NODEPOOLS:
        if (field_absent(obj, KP_JSON_PATH("status", "conditions")))
            r = set_condition(obj, "Ready", "True", "Ready");
        break;
    case S_HOSTS:
        if (field_absent(obj, KP_JSON_PATH("status")) &&
            ((r = kp_json_patch_set_str(obj, KP_JSON_PATH("status", "state"), "Available")) < 0 ||
             (r = kp_json_patch_set_str(obj, KP_JSON_PATH("status", "observedArch"), "amd64")) < 0))
            return r;
        break;
    default:
        break;
    }
    return r;
}

/* With --instance-types a NodePool is taken as Ready, whatever its status says: in the cluster
 * its Ready follows its node class's readiness, which is not consulted then (docs/cli.md). Its
 * status.conditions become that one condition. 0 or -ENOMEM: an object whose status cannot take
 * it (status not a map) is left as it is, for its projection to judge. */
static int pools_ready(json_t *nodepool)
{
    int r = set_condition(nodepool, "Ready", "True", "Ready");

    return r == -ENOMEM ? r : 0;
}

static const struct kind_def *find_kind(const char *api_version, const char *kind)
{
    const struct kind_def *defs;
    const char *slash = api_version ? strchr(api_version, '/') : NULL;
    size_t n, glen = slash ? (size_t)(slash - api_version) : 0;

    defs = kind_defs(&n);
    for (size_t k = 0; k < n && kind && api_version; k++)
        if (strcmp(defs[k].kind, kind) == 0 && strlen(defs[k].group) == glen &&
            strncmp(defs[k].group, api_version, glen) == 0)
            return &defs[k];
    return NULL;
}

/* Stores e; a second object of the same kind and key is refused (a manifest set with two
 * versions of one object is a mistake the plan would hide). */
static int store_put(struct kp_store *s, struct kp_entry *e)
{
    struct kp_entry *old = NULL;
    int r = kp_store_put(s, e, &old);

    if (r < 0) {
        kp_entry_unref(e);
        return r;
    }
    if (old) {
        kp_entry_unref(old);
        return -EEXIST;
    }
    return 0;
}

struct file_ctx {
    struct sim_stores *st;
    const char *pool_ns;
    bool pools_ready; /* --instance-types: NodePools are taken as Ready (pools_ready) */
};

static int on_object(const struct kp_manifest_obj *o, void *ctx, char **ret_msg)
{
    struct file_ctx *fc = ctx;
    const struct kind_def *d;
    struct kp_entry *e = NULL;
    struct kp_json_error jerr;
    const char *av = NULL, *kind = NULL, *name = NULL;
    json_t *obj = NULL;
    char where[64];
    int r;

    if (o->item)
        (void)snprintf(where, sizeof(where), "document %zu item %zu", o->doc, o->item);
    else
        (void)snprintf(where, sizeof(where), "document %zu", o->doc);
    memset(&jerr, 0, sizeof(jerr));
    if ((r = kp_json_parse(o->json, o->len, KP_MAX_OBJECT_BYTES, 0, &obj, &jerr)) < 0) {
        kp_msg_set(ret_msg, "%s:%u: %s: cannot read the object: %s", o->file, o->line, where,
                   kp_strerror(r));
        return r == -ENOMEM ? r : -KP_EPARSE;
    }
    if (kp_json_get_str(obj, "apiVersion", &av) < 0)
        av = NULL;
    if (kp_json_get_str(obj, "kind", &kind) < 0)
        kind = NULL;
    if (kp_json_path_str(obj, "metadata.name", &name) < 0)
        name = NULL;
    if (!(d = find_kind(av, kind))) {
        kp_msg_set(ret_msg,
                   "%s:%u: %s: kind \"%s\" of apiVersion \"%s\" is not read by simulate (kinds: "
                   "NodePool, SSHNodeClass, SSHHost, Pod, Node, NodeClaim, "
                   "PersistentVolumeClaim, PodDisruptionBudget, DaemonSet)",
                   o->file, o->line, where, kind ? kind : "", av ? av : "");
        r = -KP_EPARSE;
        goto out;
    }
    if ((r = file_defaults(d, obj, fc->pool_ns)) < 0 ||
        (fc->pools_ready && d->store == S_NODEPOOLS && (r = pools_ready(obj)) < 0))
        goto out;
    if ((r = d->project(obj, &e)) < 0) {
        if (r != -ENOMEM)
            kp_msg_set(ret_msg, "%s:%u: %s: %s \"%s\" is not a valid %s: %s", o->file, o->line,
                       where, d->kind, name ? name : "", d->kind, kp_strerror(r));
        r = r == -ENOMEM ? r : -KP_EPARSE;
        goto out;
    }
    if ((r = store_put(fc->st->s[d->store], e)) == -EEXIST) {
        kp_msg_set(ret_msg, "%s:%u: %s: %s \"%s\" is given twice", o->file, o->line, where, d->kind,
                   name ? name : "");
        r = -KP_EPARSE;
    }
out:
    kp_json_unref(obj);
    return r;
}

/* 0, or KP_CLI_USAGE/KP_CLI_FAILURE after printing why. */
static int load_files(const struct sim_opts *o, struct sim_stores *st, const char *prog)
{
    struct file_ctx fc = {.st = st, .pool_ns = o->ns, .pools_ready = o->itypes != NULL};
    int code = 0;

    for (size_t i = 0; i < o->n_files && code == 0; i++) {
        struct kp_buf data = KP_BUF_INIT(KP_MANIFEST_MAX_FILE);
        const char *name = strcmp(o->files[i], "-") == 0 ? "<stdin>" : o->files[i];
        char *msg = NULL;
        int r;

        if ((r = kp_manifest_read_file(o->files[i], &data)) < 0) {
            fprintf(stderr, "%s: simulate: cannot read %s: %s\n", prog, name,
                    r == -KP_ELIMIT ? "larger than 32 MiB" : kp_strerror(r));
            code = r == -ENOMEM ? KP_CLI_FAILURE : KP_CLI_USAGE;
        } else if ((r = kp_manifest_each(data.data, data.len, name, on_object, &fc, &msg)) < 0) {
            fprintf(stderr, "%s: simulate: %s\n", prog, msg ? msg : kp_strerror(r));
            code = r == -ENOMEM ? KP_CLI_FAILURE : KP_CLI_USAGE;
        }
        kp_free(msg);
        kp_buf_done(&data);
    }
    return code;
}

/* --- live mode ---------------------------------------------------------------------------------- */

struct list_ctx {
    const struct kind_def *d;
    struct kp_store *s;
    bool pools_ready; /* as file_ctx's */
};

static int on_page(const struct kp_list_page *page, void *userdata)
{
    struct list_ctx *lc = userdata;
    int r;

    for (size_t i = 0; i < kp_json_array_size(page->items); i++) {
        struct kp_entry *e = NULL;

        /* The page's tree is this call's to read and drop, so it may be changed first. */
        if (lc->pools_ready && lc->d->store == S_NODEPOOLS &&
            (r = pools_ready(kp_json_array_at(page->items, i))) < 0)
            return r;
        /* An object the controller's informer could not project either is left out, as there. */
        if ((r = lc->d->project(kp_json_array_at(page->items, i), &e)) == -KP_EPARSE)
            continue;
        if (r < 0)
            return r;
        if ((r = store_put(lc->s, e)) < 0 && r != -EEXIST)
            return r;
    }
    return 0;
}

static int load_cluster(const struct sim_opts *o, struct sim_stores *st, const char *prog)
{
    struct kp_api_config api = {0};
    struct kp_client *client = NULL;
    const struct kind_def *defs;
    char *msg = NULL;
    size_t n;
    int r, code = KP_CLI_FAILURE;

    if ((r = kp_api_config_load(o->kubeconfig, o->context, getenv("KUBECONFIG"), getenv("HOME"),
                                &api, &msg)) < 0) {
        fprintf(stderr, "%s: %s\n", prog, msg ? msg : kp_strerror(r));
        goto out;
    }
    if ((r = kp_client_new(&api.topts, &client)) < 0) {
        fprintf(stderr, "%s: cannot create the API client for %s: %s\n", prog,
                api.topts.server ? api.topts.server : "?", kp_strerror(r));
        goto out;
    }
    defs = kind_defs(&n);
    for (size_t k = 0; k < n; k++) {
        struct list_ctx lc = {
            .d = &defs[k], .s = st->s[defs[k].store], .pools_ready = o->itypes != NULL};
        struct kp_list_opts lo = {0};
        struct kp_error err;

        /* Given instance types replace the catalog, the one reader of these two kinds. */
        if (o->itypes && (defs[k].store == S_HOSTS || defs[k].store == S_CLASSES))
            continue;
        kp_error_init(&err);
        r = kp_client_list(client, defs[k].res, defs[k].scope == POOL_NS ? o->ns : NULL, &lo,
                           on_page, &lc, /* ret_resource_version= */ NULL, &err);
        if (r < 0)
            fprintf(stderr, "%s: cannot list %s.%s%s%s: %s%s\n", prog, defs[k].res->resource,
                    *defs[k].res->group ? defs[k].res->group : "core",
                    defs[k].scope == POOL_NS ? " in namespace " : "",
                    defs[k].scope == POOL_NS ? o->ns : "",
                    err.message ? err.message : kp_strerror(r),
                    r == -ENOENT ? " (are kpssh's and Karpenter's CRDs installed?)" : "");
        kp_error_done(&err);
        if (r < 0)
            goto out;
    }
    code = 0;
out:
    client = kp_client_free(client);
    kp_api_config_done(&api);
    kp_free(msg);
    return code;
}

/* --- the simulation ----------------------------------------------------------------------------- */

/* Feeds every entry of s to the cluster state's handler fn (as its informer would on add). */
static int feed(struct kp_cluster_state *cs, struct kp_store *s,
                void (*fn)(struct kp_cluster_state *, const struct kp_entry *,
                           const struct kp_entry *))
{
    struct kp_store_list l = {0};
    int r;

    if ((r = kp_store_list(s, &l)) < 0)
        return r;
    for (size_t i = 0; i < l.n; i++)
        fn(cs, NULL, l.v[i]);
    kp_store_list_free(&l);
    return 0;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int set_str(json_t *o, const char *key, const char *value)
{
    return value ? kp_json_patch_set_str(o, KP_JSON_PATH(key), value)
                 : kp_json_patch_set_null(o, KP_JSON_PATH(key));
}

/* names[0..n) sorted, as a JSON array set at key. */
static int set_names(json_t *o, const char *key, const char **names, size_t n)
{
    json_t *arr = NULL;
    int r;

    qsort(names, n, sizeof(*names), cmp_cstr);
    if ((r = kp_json_array_new(&arr)) < 0)
        return r;
    for (size_t i = 0; i < n && r == 0; i++) {
        json_t *s = NULL;

        if ((r = kp_json_string_new(names[i], &s)) == 0)
            r = kp_json_array_append_steal(arr, s);
    }
    if (r < 0) {
        kp_json_unref(arr);
        return r;
    }
    return kp_json_patch_set_steal(o, KP_JSON_PATH(key), arr);
}

/* US dollars per hour from micro-dollars: at least two decimals, no trailing zeros past them. */
static void usd(int64_t micro, char *buf, size_t size)
{
    size_t len, dot;

    (void)snprintf(buf, size, "%lld.%06lld", (long long)(micro / 1000000),
                   (long long)(micro % 1000000));
    len = strlen(buf);
    dot = (size_t)(strchr(buf, '.') - buf);
    while (len > dot + 3 && buf[len - 1] == '0')
        buf[--len] = '\0';
}

static int quantity_text(const char *name, int64_t milli, char buf[KP_QUANTITY_STRMAX])
{
    bool binary = (strcmp(name, "memory") == 0 || strcmp(name, "ephemeral-storage") == 0 ||
                   strncmp(name, "hugepages-", 10) == 0) &&
                  milli % 1000 == 0;
    struct kp_quantity q = {.milli = milli,
                            .format = binary ? KP_QUANTITY_BINARY_SI : KP_QUANTITY_DECIMAL_SI};

    return kp_quantity_format(&q, buf, KP_QUANTITY_STRMAX);
}

static int claim_doc(const struct kp_sched_input *in, const struct kp_sched_claim *sc, json_t **ret)
{
    const struct kp_nodepool_view *np = in->pools[sc->pool].np;
    json_t *o = NULL, *types = NULL, *req = NULL, *nc = NULL, *reqs = NULL;
    const char **names = NULL;
    char buf[KP_QUANTITY_STRMAX]; /* quantities and prices (at most 27 bytes) */
    int r;

    if ((r = kp_json_patch_new(&o)) < 0 || (r = kp_json_array_new(&types)) < 0 ||
        (r = kp_json_patch_new(&req)) < 0)
        goto out;
    if ((r = set_str(o, "nodePool", np->e.name)) < 0 ||
        (r = set_str(o, "nodeClass", np->tmpl.node_class_ref.name)) < 0)
        goto out;
    /* The requirements exactly as the provisioner would write them into the NodeClaim. */
    if ((r = kp_provisioner_nodeclaim(np, sc, &nc)) < 0 ||
        (r = kp_json_path_array(nc, "spec.requirements", &reqs)) < 0 ||
        (r = kp_json_patch_set_steal(o, KP_JSON_PATH("requirements"), kp_json_ref(reqs))) < 0)
        goto out;
    for (size_t t = 0; t < sc->n_types && r == 0; t++) {
        json_t *it = NULL;
        /* The price the scheduler ordered the options by: an instance type with several offerings
         * (spot and on-demand, from --instance-types) may have a cheaper one the NodeClaim
         * cannot have. */
        int64_t price = kp_instance_type_price_for(sc->types[t], &sc->reqs);

        if ((r = kp_json_patch_new(&it)) < 0)
            break;
        if (price >= 0)
            usd(price, buf, sizeof(buf));
        if ((r = set_str(it, "name", sc->types[t]->name)) < 0 ||
            (r = set_str(it, "pricePerHour", price >= 0 ? buf : NULL)) < 0) {
            kp_json_unref(it);
            break;
        }
        r = kp_json_array_append_steal(types, it);
    }
    if (r < 0)
        goto out;
    r = kp_json_patch_set_steal(o, KP_JSON_PATH("instanceTypes"), types);
    types = NULL;
    if (r < 0)
        goto out;
    for (size_t q = 0; q < sc->n_requests && r == 0; q++) {
        if ((r = quantity_text(sc->requests[q].name, sc->requests[q].milli, buf)) < 0)
            break;
        r = set_str(req, sc->requests[q].name, buf);
    }
    if (r < 0)
        goto out;
    r = kp_json_patch_set_steal(o, KP_JSON_PATH("requests"), req);
    req = NULL;
    if (r < 0)
        goto out;
    if (!(names = kp_calloc(sc->n_pods + 1, sizeof(*names)))) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < sc->n_pods; i++)
        names[i] = in->pods[sc->pods[i]]->e.key;
    if ((r = set_names(o, "pods", names, sc->n_pods)) < 0)
        goto out;
    *ret = o;
    o = NULL;
out:
    kp_free(names);
    kp_json_unref(nc);
    kp_json_unref(req);
    kp_json_unref(types);
    kp_json_unref(o);
    return r;
}

struct unplaced {
    const char *pod;
    const char *reason;
};

static int cmp_unplaced(const void *a, const void *b)
{
    return strcmp(((const struct unplaced *)a)->pod, ((const struct unplaced *)b)->pod);
}

struct placed {
    const char *node;
    bool claim; /* an in-flight NodeClaim */
    const char **pods;
    size_t n;
};

static int cmp_placed(const void *a, const void *b)
{
    return strcmp(((const struct placed *)a)->node, ((const struct placed *)b)->node);
}

/* The plan as the SimulationPlan document (docs/cli.md). */
static int plan_doc(const struct kp_sim_run *run, const struct kp_sched_input *in, json_t **ret)
{
    const struct kp_sched_plan *plan = &run->plan;
    size_t n_dest = in->n_nodes + in->n_inflight, n_un = 0;
    struct placed *pl = kp_calloc(n_dest + 1, sizeof(*pl));
    struct unplaced *un = kp_calloc(plan->n_pods + run->sel.n_refused + 1, sizeof(*un));
    json_t *doc = NULL, *claims = NULL, *places = NULL, *unarr = NULL, *counts = NULL;
    int r;

    if (!pl || !un) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = kp_json_patch_new(&doc)) < 0 || (r = kp_json_array_new(&claims)) < 0 ||
        (r = kp_json_array_new(&places)) < 0 || (r = kp_json_array_new(&unarr)) < 0 ||
        (r = kp_json_patch_new(&counts)) < 0)
        goto out;
    for (size_t i = 0; i < n_dest; i++) {
        pl[i].node = i < in->n_nodes ? in->nodes[i].name : in->inflight[i - in->n_nodes].name;
        pl[i].claim = i >= in->n_nodes;
        if (!(pl[i].pods = kp_calloc(plan->n_pods + 1, sizeof(*pl[i].pods)))) {
            r = -ENOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i < plan->n_pods && i < in->n_pods; i++) {
        const struct kp_sched_result *res = &plan->pods[i];

        if (res->where == KP_SCHED_NODE && res->index < n_dest)
            pl[res->index].pods[pl[res->index].n++] = in->pods[i]->e.key;
        else if (res->where == KP_SCHED_FAILED)
            un[n_un++] =
                (struct unplaced){in->pods[i]->e.key, res->error ? res->error : "no placement"};
    }
    for (size_t i = 0; i < run->sel.n_refused; i++)
        un[n_un++] = (struct unplaced){run->sel.refused[i].pod->e.key,
                                       run->sel.refused[i].message ? run->sel.refused[i].message
                                                                   : "the pod is not valid"};
    for (size_t k = 0; k < plan->n_claims; k++) {
        json_t *c = NULL;

        if ((r = claim_doc(in, &plan->claims[k], &c)) < 0 ||
            (r = kp_json_array_append_steal(claims, c)) < 0)
            goto out;
    }
    qsort(pl, n_dest, sizeof(*pl), cmp_placed);
    for (size_t i = 0; i < n_dest; i++) {
        json_t *p = NULL;

        if (!pl[i].n)
            continue;
        if ((r = kp_json_patch_new(&p)) < 0)
            goto out;
        if ((r = set_str(p, "node", pl[i].node)) < 0 ||
            (r = set_str(p, "kind", pl[i].claim ? "NodeClaim" : "Node")) < 0 ||
            (r = set_names(p, "pods", pl[i].pods, pl[i].n)) < 0) {
            kp_json_unref(p);
            goto out;
        }
        if ((r = kp_json_array_append_steal(places, p)) < 0)
            goto out;
    }
    qsort(un, n_un, sizeof(*un), cmp_unplaced);
    for (size_t i = 0; i < n_un; i++) {
        json_t *u = NULL;

        if ((r = kp_json_patch_new(&u)) < 0)
            goto out;
        if ((r = set_str(u, "pod", un[i].pod)) < 0 ||
            (r = set_str(u, "reason", un[i].reason)) < 0) {
            kp_json_unref(u);
            goto out;
        }
        if ((r = kp_json_array_append_steal(unarr, u)) < 0)
            goto out;
    }
    if ((r = kp_json_patch_set_int(counts, KP_JSON_PATH("scheduled"), (int64_t)in->n_pods)) < 0 ||
        (r = kp_json_patch_set_int(counts, KP_JSON_PATH("refused"), (int64_t)run->sel.n_refused)) <
            0 ||
        (r = kp_json_patch_set_int(counts, KP_JSON_PATH("notProvisionable"),
                                   (int64_t)run->sel.skipped)) < 0)
        goto out;
    if ((r = set_str(doc, "kind", "SimulationPlan")) < 0)
        goto out;
    r = kp_json_patch_set_steal(doc, KP_JSON_PATH("nodeClaims"), claims);
    claims = NULL;
    if (r == 0)
        r = kp_json_patch_set_steal(doc, KP_JSON_PATH("placements"), places);
    places = NULL;
    if (r == 0)
        r = kp_json_patch_set_steal(doc, KP_JSON_PATH("unplaced"), unarr);
    unarr = NULL;
    if (r == 0)
        r = kp_json_patch_set_steal(doc, KP_JSON_PATH("pods"), counts);
    counts = NULL;
    if (r < 0)
        goto out;
    *ret = doc;
    doc = NULL;
out:
    for (size_t i = 0; pl && i < n_dest; i++)
        kp_free(pl[i].pods);
    kp_free(pl);
    kp_free(un);
    kp_json_unref(counts);
    kp_json_unref(unarr);
    kp_json_unref(places);
    kp_json_unref(claims);
    kp_json_unref(doc);
    return r;
}

/* The summary printed by default, from the same document as -o json. */

/* Appends " a, b, c": the strings of arr ("?" for one that is not a string). */
static int put_names(struct kp_buf *out, const json_t *arr)
{
    const char *s;
    int r = 0;

    for (size_t i = 0; r == 0 && i < kp_json_array_size(arr); i++)
        r = kp_buf_printf(out, "%s %s", i ? "," : "",
                          kp_json_as_str(kp_json_array_at(arr, i), &s) == 0 ? s : "?");
    return r;
}

static int render_table(const json_t *doc, struct kp_buf *out)
{
    json_t *claims = NULL, *places = NULL, *unarr = NULL;
    int r = 0;

    if (kp_json_get_array(doc, "nodeClaims", &claims) < 0 ||
        kp_json_get_array(doc, "placements", &places) < 0 ||
        kp_json_get_array(doc, "unplaced", &unarr) < 0)
        return -EINVAL;
    r = kp_buf_printf(out, "NodeClaims to create: %zu\n", kp_json_array_size(claims));
    for (size_t k = 0; r == 0 && k < kp_json_array_size(claims); k++) {
        const json_t *c = kp_json_array_at(claims, k);
        json_t *types = NULL, *pods = NULL, *req = NULL;
        struct kp_json_iter it = KP_JSON_ITER_INIT;
        const char *pool = NULL, *key, *s;
        json_t *v;

        if (kp_json_get_str(c, "nodePool", &pool) < 0 ||
            kp_json_get_array(c, "instanceTypes", &types) < 0 ||
            kp_json_get_array(c, "pods", &pods) < 0 || kp_json_get_object(c, "requests", &req) < 0)
            return -EINVAL;
        r = kp_buf_printf(out, "  %zu. nodepool %s, %zu pod(s)\n     instance types:", k + 1, pool,
                          kp_json_array_size(pods));
        for (size_t t = 0; r == 0 && t < kp_json_array_size(types); t++) {
            const json_t *ty = kp_json_array_at(types, t);
            const char *name = NULL, *price = NULL;

            if (kp_json_get_str(ty, "name", &name) < 0)
                return -EINVAL;
            if (kp_json_get_str(ty, "pricePerHour", &price) < 0)
                price = NULL;
            r = kp_buf_printf(out, "%s %s ($%s/h)", t ? "," : "", name, price ? price : "?");
        }
        if (r == 0)
            r = kp_buf_puts(out, "\n     requests:");
        while (r == 0 && kp_json_object_next(req, &it, &key, &v))
            r = kp_buf_printf(out, " %s=%s", key, kp_json_as_str(v, &s) == 0 ? s : "?");
        if (r == 0)
            r = kp_buf_puts(out, "\n     pods:");
        if (r == 0)
            r = put_names(out, pods);
        if (r == 0)
            r = kp_buf_putc(out, '\n');
    }
    if (r == 0)
        r = kp_buf_printf(out, "Placements on existing nodes: %zu\n", kp_json_array_size(places));
    for (size_t k = 0; r == 0 && k < kp_json_array_size(places); k++) {
        const json_t *p = kp_json_array_at(places, k);
        const char *node = NULL, *kind = NULL;
        json_t *pods = NULL;

        if (kp_json_get_str(p, "node", &node) < 0 || kp_json_get_str(p, "kind", &kind) < 0 ||
            kp_json_get_array(p, "pods", &pods) < 0)
            return -EINVAL;
        r = kp_buf_printf(out, "  %s %s:", strcmp(kind, "Node") == 0 ? "node" : "nodeclaim", node);
        if (r == 0)
            r = put_names(out, pods);
        if (r == 0)
            r = kp_buf_putc(out, '\n');
    }
    if (r == 0)
        r = kp_buf_printf(out, "Unplaced pods: %zu\n", kp_json_array_size(unarr));
    for (size_t k = 0; r == 0 && k < kp_json_array_size(unarr); k++) {
        const json_t *u = kp_json_array_at(unarr, k);
        const char *pod = NULL, *reason = NULL;

        if (kp_json_get_str(u, "pod", &pod) < 0 || kp_json_get_str(u, "reason", &reason) < 0)
            return -EINVAL;
        r = kp_buf_printf(out, "  %s: %s\n", pod, reason);
    }
    return r;
}

static uint64_t now_fn(void)
{
    return kp_real_usec();
}

/* One round's simulation over the stores, printed in o->format: with the SSH provider's
 * catalog, or, when itypes is not NULL, with those instance types (taken over) for every
 * NodePool. 0 or KP_CLI_FAILURE. */
static int simulate(const struct sim_opts *o, struct sim_stores *st,
                    struct kp_instance_types *itypes, const char *prog)
{
    struct kp_ssh_provider_opts po = {0};
    struct kp_ssh_provider *sp = NULL;
    struct kp_itypes_provider *ip = NULL;
    struct kp_provider prov;
    struct kp_core_env env = {0};
    struct kp_cluster_state *cs = NULL;
    struct kp_state_snapshot *snap = NULL;
    struct kp_sim_sources src;
    struct kp_sim sim;
    struct kp_sim_run run;
    struct kp_sched_input in;
    struct kp_buf out = KP_BUF_INIT(SIM_MAX_OUTPUT);
    json_t *doc = NULL;
    const char *step = "the SSH provider";
    int r;

    memset(&sim, 0, sizeof(sim));
    memset(&run, 0, sizeof(run));
    po.pool_namespace = o->ns;
    po.hosts = st->s[S_HOSTS];
    po.nodeclasses = st->s[S_CLASSES];
    po.profiles = st->profiles;
    po.nodes = st->s[S_NODES];
    if ((r = kp_ssh_provider_new(&po, &sp)) < 0)
        goto out;
    prov = kp_ssh_provider_as_provider(sp);
    if (itypes) {
        step = "the instance types";
        if ((r = kp_itypes_provider_new(&prov, itypes, &ip)) < 0)
            goto out;
        prov = kp_itypes_provider_as_provider(ip);
    }
    env.provider = &prov;
    env.now_usec = now_fn;
    step = "the cluster state";
    if ((r = kp_cluster_state_new_detached(&env, &cs)) < 0 ||
        (r = feed(cs, st->s[S_NODES], kp_cluster_state_node_event)) < 0 ||
        (r = feed(cs, st->s[S_NODECLAIMS], kp_cluster_state_nodeclaim_event)) < 0 ||
        (r = feed(cs, st->s[S_PODS], kp_cluster_state_pod_event)) < 0 ||
        (r = kp_cluster_state_snapshot(cs, &snap)) < 0)
        goto out;
    /* The provisioner's round_build, step for step (core/provisioning/provisioner.c). */
    src = (struct kp_sim_sources){.env = &env,
                                  .pods = st->s[S_PODS],
                                  .nodepools = st->s[S_NODEPOOLS],
                                  .pvcs = st->s[S_PVCS],
                                  .pdbs = st->s[S_PDBS],
                                  .daemonsets = st->s[S_DAEMONSETS]};
    step = "the scheduler's input";
    if ((r = kp_sim_build(&src, snap, /* c= */ NULL, /* cx= */ NULL, &sim)) < 0 ||
        (r = kp_sim_prepare(&sim, NULL, 0, (int64_t)kp_core_now(&env), &run, &in)) < 0)
        goto out;
    step = "the scheduling simulation";
    if ((r = kp_sched_solve(&in, &run.plan)) < 0)
        goto out;
    step = "the plan";
    if ((r = plan_doc(&run, &in, &doc)) < 0)
        goto out;
    if (o->format == SIM_JSON) {
        if ((r = kp_json_dump(doc, KP_JSON_PRETTY | KP_JSON_SORT_KEYS, &out)) == 0)
            r = kp_buf_putc(&out, '\n');
    } else if (o->format == SIM_YAML) {
        r = kp_poolview_yaml(doc, &out);
    } else {
        r = render_table(doc, &out);
    }
    if (r < 0)
        goto out;
    step = "the output";
    if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len)
        r = -EIO;
    if (fflush(stdout) != 0)
        r = -EIO;
out:
    if (r < 0)
        fprintf(stderr, "%s: simulate: %s failed: %s\n", prog, step, kp_strerror(r));
    kp_json_unref(doc);
    kp_buf_done(&out);
    kp_sim_run_done(&run);
    kp_sim_done(&sim);
    kp_state_snapshot_free(snap);
    kp_cluster_state_free(cs);
    kp_itypes_provider_free(ip);
    kp_ssh_provider_free(sp);
    return r < 0 ? KP_CLI_FAILURE : KP_CLI_OK;
}

/* Reads --instance-types into *ret. 0, or KP_CLI_USAGE/KP_CLI_FAILURE after printing why. */
static int load_itypes(const struct sim_opts *o, struct kp_instance_types *ret, const char *prog)
{
    struct kp_buf data = KP_BUF_INIT(KP_ITYPES_MAX_FILE);
    const char *name = strcmp(o->itypes, "-") == 0 ? "<stdin>" : o->itypes;
    char *msg = NULL;
    int r, code = 0;

    if ((r = kp_manifest_read_file(o->itypes, &data)) < 0)
        fprintf(stderr, "%s: simulate: cannot read %s: %s\n", prog, name,
                r == -KP_ELIMIT ? "larger than 4 MiB" : kp_strerror(r));
    else if ((r = kp_itypes_parse(data.data, data.len, name, ret, &msg)) < 0)
        fprintf(stderr, "%s: simulate: %s\n", prog, msg ? msg : kp_strerror(r));
    if (r < 0)
        code = r == -ENOMEM ? KP_CLI_FAILURE : KP_CLI_USAGE;
    kp_free(msg);
    kp_buf_done(&data);
    return code;
}

int kp_cli_simulate(int argc, char **argv, const char *prog)
{
    struct kp_instance_types itypes = {0};
    struct sim_opts o;
    struct sim_stores st;
    bool help;
    int code;

    if (parse_opts(argc, argv, prog, &o, &help) < 0)
        return KP_CLI_USAGE;
    if (help) {
        usage(stdout, prog);
        return fflush(stdout) == 0 ? KP_CLI_OK : KP_CLI_FAILURE;
    }
    if (o.itypes && (code = load_itypes(&o, &itypes, prog)) != 0)
        return code;
    if (stores_init(&st) < 0) {
        fprintf(stderr, "%s: simulate: out of memory\n", prog);
        stores_done(&st);
        kp_instance_types_done(&itypes);
        return KP_CLI_FAILURE;
    }
    code = o.n_files ? load_files(&o, &st, prog) : load_cluster(&o, &st, prog);
    if (code == 0)
        code = simulate(&o, &st, o.itypes ? &itypes : NULL, prog);
    stores_done(&st);
    kp_instance_types_done(&itypes);
    return code;
}
