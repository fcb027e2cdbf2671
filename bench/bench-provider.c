/* bench-provider: where a Create's wall time goes, measured against the test lab: a real
 * kube-apiserver, lab host 1 running sshd, and a hollow kubelet that TLS-bootstraps with the
 * token the provider mints (`make bench-provider` brings the lab up and down around it; by hand:
 * tests/lab/up.sh, then KPSSH_LAB_DIR=<repo>/_out/lab<ID> build/<preset>/bench/bench-provider
 * from the repository root).
 *
 * The SSH provider (provider/ssh/provider.h) is driven directly, as the core will drive it:
 * CYCLES times Create a NodeClaim on the one host, then Delete it, delete its Node (the core's
 * part) and wait for the host to be claimable again. The first Create is cold (install runs),
 * the rest are warm. The profile is the shipped tls-bootstrap join and leave verbatim with a
 * lab-safe install (the shipped one apt-installs into directories the lab shares with this
 * machine; tests/integration/test-profiles.sh runs it against stand-ins).
 *
 * Reports, for the cold Create and as p50 / p90 / max over the warm ones: claim, install, token,
 * join, registration and total (the split of kp_ssh_create_report), then Delete (leave, token
 * deletion, release). Create returns at launch (join exit), so registration is 0 for this
 * Static node class; the bench waits for the Node itself before Delete, as the core would, and
 * reports that wait as "node" (Create's return to the Node's appearance). Everything created is deleted at the end and host 1 is left as the lab
 * made it. Options: -n cycles (default 10). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kp-lab.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/str.h"
#include "base/time.h"
#include "core/provider.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "api/obj-node.h"
#include "k8s/store.h"
#include "provider/ssh/indexes.h"
#include "provider/ssh/provider.h"

#define POOL_NS "kpssh-system"
#define NAME "bench-prov"
#define LAB_HOST 1
#define MAX_CYCLES 1000

enum { F_CLAIM, F_INSTALL, F_TOKEN, F_JOIN, F_REG, F_TOTAL, F_NODE, F_DELETE, F_N };
static const char *const field_names[F_N] = {"claim",        "install", "token", "join",
                                             "registration", "total",   "node",  "delete"};

static struct kp_lab lab;
static struct kp_client *c;

static const char lab_install[] =
    "# lab-safe install: the lab host already has kubelet and systemctl stand-ins.\n"
    "mkdir -p /var/lib/kpssh\n"
    "systemctl disable --now kubelet >/dev/null 2>&1 || true\n";

static char *repo_file(const char *rel)
{
    const char *repo = getenv("KP_REPO") ? getenv("KP_REPO") : ".";
    char *path = kp_strjoin(repo, "/", rel, (const char *)NULL), *s;

    if (!path)
        abort();
    s = kp_lab_read_file(path, NULL);
    kp_free(path);
    return s;
}

static void objects_create(void)
{
    char *join = repo_file("profiles/tls-bootstrap/join.sh");
    char *leave = repo_file("profiles/tls-bootstrap/leave.sh");
    char *ca = kp_lab_base64(lab.ca, lab.ca_len), *ip = kp_lab_host_ip(&lab, LAB_HOST);
    json_t *o, *p = NULL;
    struct kp_error e = KP_ERROR_INIT;

    kp_lab_apply_crds(&lab);
    kp_lab_ensure_namespace(c, POOL_NS);
    kp_lab_key_secret(&lab, c, POOL_NS, NAME "-key");

    o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHJoinProfile", NULL, NAME);
    kp_lab_set(o, KP_JSON_PATH("spec", "version"), "1");
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "install"), lab_install);
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "join"), join);
    kp_lab_set(o, KP_JSON_PATH("spec", "scripts", "leave"), leave);
    kp_lab_create_or_replace(c, &KP_RES_SSHJOINPROFILE, NULL, o);

    o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHNodeClass", NULL, NAME);
    kp_lab_set(o, KP_JSON_PATH("spec", "hostSelector", "matchLabels", KP_KPSSH_LABEL_HOST_CLASS),
               NAME);
    kp_lab_set(o, KP_JSON_PATH("spec", "joinProfileRef", "name"), NAME);
    kp_lab_set(o, KP_JSON_PATH("spec", "cluster", "endpoint"), lab.api_url);
    kp_lab_set(o, KP_JSON_PATH("spec", "cluster", "caBundle"), ca);
    kp_lab_set(o, KP_JSON_PATH("spec", "vars", "clusterDNS"), "10.0.0.10");
    kp_lab_create_or_replace(c, &KP_RES_SSHNODECLASS, NULL, o);

    /* The host, Available as a successful probe would leave it. */
    o = kp_lab_obj_new(KP_KPSSH_GROUP "/" KP_KPSSH_VERSION, "SSHHost", POOL_NS, NAME "-1");
    kp_lab_set(o, KP_JSON_PATH("metadata", "labels", KP_KPSSH_LABEL_HOST_CLASS), NAME);
    kp_lab_set(o, KP_JSON_PATH("spec", "address"), ip);
    kp_lab_set(o, KP_JSON_PATH("spec", "sshKeySecretRef", "name"), NAME "-key");
    kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "cpu"), "2");
    kp_lab_set(o, KP_JSON_PATH("spec", "capacity", "memory"), "4Gi");
    kp_lab_create_or_replace(c, &KP_RES_SSHHOST, POOL_NS, o);
    if (kp_json_patch_new(&p) < 0)
        abort();
    kp_lab_set(p, KP_JSON_PATH("status", "state"), "Available");
    kp_lab_set(p, KP_JSON_PATH("status", "observedArch"), "amd64");
    kp_lab_check(kp_client_patch(c, &KP_RES_SSHHOST, POOL_NS, NAME "-1", "status", KP_PATCH_MERGE,
                                 p, NULL, &e),
                 &e, "host status");
    kp_json_unref(p);
    kp_error_done(&e);
    kp_free(ip);
    kp_free(ca);
    kp_free(join);
    kp_free(leave);
}

static void objects_delete(void)
{
    (void)!kp_client_delete(c, &KP_RES_SSHHOST, POOL_NS, NAME "-1", NULL, NULL);
    (void)!kp_client_delete(c, &KP_RES_SSHNODECLASS, NULL, NAME, NULL, NULL);
    (void)!kp_client_delete(c, &KP_RES_SSHJOINPROFILE, NULL, NAME, NULL, NULL);
    (void)!kp_client_delete(c, &KP_RES_SECRET, POOL_NS, NAME "-key", NULL, NULL);
    (void)kp_lab_host_exec(&lab, LAB_HOST,
                           "systemctl disable --now kubelet containerd >/dev/null 2>&1; rm -rf "
                           "/var/lib/kpssh/* /etc/kubernetes/* /var/lib/kubelet/* "
                           "/etc/systemd/system/kubelet.service.d");
}

/* A NodeClaim as the core hands it over (not stored: the provider only reads the view). */
static struct kp_entry *nodeclaim(const char *name, const char *uid, const char *provider_id)
{
    struct kp_entry *e = NULL;
    json_t *o = kp_lab_obj_new("karpenter.sh/v1", "NodeClaim", NULL, name);

    kp_lab_set(o, KP_JSON_PATH("metadata", "uid"), uid);
    kp_lab_set(o, KP_JSON_PATH("metadata", "resourceVersion"), "1");
    kp_lab_set(o, KP_JSON_PATH("metadata", "labels", "karpenter.sh/nodepool"), NAME);
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "group"), KP_KPSSH_GROUP);
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "kind"), "SSHNodeClass");
    kp_lab_set(o, KP_JSON_PATH("spec", "nodeClassRef", "name"), NAME);
    kp_lab_set(o, KP_JSON_PATH("spec", "resources", "requests", "cpu"), "100m");
    if (provider_id)
        kp_lab_set(o, KP_JSON_PATH("status", "providerID"), provider_id);
    if (kp_nodeclaim_project(o, &e) < 0)
        abort();
    kp_json_unref(o);
    return e;
}

/* Waits until the provider's host cache shows the host claimable again. */
static void wait_claimable(struct kp_informer *hosts)
{
    for (int i = 0; i < 600; i++) {
        struct kp_entry *e = NULL;
        bool ok = false;

        if (kp_store_get(kp_informer_store(hosts), POOL_NS "/" NAME "-1", &e) == 0)
            ok = kp_sshhost_view(e)->state == KP_HOST_AVAILABLE && !kp_sshhost_view(e)->claim_name;
        kp_entry_unref(e);
        if (ok)
            return;
        kp_sleep_usec(50 * KP_USEC_PER_MSEC);
    }
    fprintf(stderr, "bench-provider: host never came back Available in the cache\n");
    exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The q-quantile (nearest rank) of v[0..n), sorted in place. */
static double quantile_ms(uint64_t *v, size_t n, double q)
{
    size_t k;

    qsort(v, n, sizeof(*v), cmp_u64);
    k = (size_t)(q * (double)n + 0.999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return (double)v[k - 1] / 1e3;
}

int main(int argc, char **argv)
{
    static uint64_t m[F_N][MAX_CYCLES];
    struct kp_informer *inf_hosts, *inf_classes, *inf_profiles, *inf_nodes;
    struct kp_ssh_provider_opts po = {0};
    struct kp_ssh_provider *sp = NULL;
    struct kp_provider prov;
    unsigned cycles = 10;
    int opt;

    while ((opt = getopt(argc, argv, "n:")) != -1) {
        if (opt == 'n' && (cycles = (unsigned)strtoul(optarg, NULL, 10)) >= 2 &&
            cycles <= MAX_CYCLES)
            continue;
        fprintf(stderr, "usage: %s [-n cycles (2..%d, default 10)]\n", argv[0], MAX_CYCLES);
        return 2;
    }
    kp_lab_load(&lab);
    c = kp_lab_admin_client(&lab);
    objects_delete();
    objects_create();
    inf_hosts = kp_lab_informer(c, &KP_RES_SSHHOST, POOL_NS, kp_sshhost_project);
    inf_classes = kp_lab_informer(c, &KP_RES_SSHNODECLASS, NULL, kp_sshnodeclass_project);
    inf_profiles = kp_lab_informer(c, &KP_RES_SSHJOINPROFILE, NULL, kp_sshjoinprofile_project);
    kp_lab_wait_cached(inf_classes, NAME);
    kp_lab_wait_cached(inf_profiles, NAME);
    wait_claimable(inf_hosts);
    inf_nodes = kp_lab_informer_new(c, &KP_RES_NODE, NULL, kp_node_project);
    if (kp_ssh_index_nodes(inf_nodes) < 0 || kp_informer_start(inf_nodes) < 0 ||
        kp_informer_wait_synced(inf_nodes, 60 * KP_USEC_PER_SEC) < 0) {
        fprintf(stderr, "bench-provider: the Node informer did not sync\n");
        return 1;
    }
    po.pool_namespace = POOL_NS;
    po.hosts = kp_informer_store(inf_hosts);
    po.nodeclasses = kp_informer_store(inf_classes);
    po.profiles = kp_informer_store(inf_profiles);
    po.nodes = kp_informer_store(inf_nodes);
    po.registration_timeout_usec = 180 * KP_USEC_PER_SEC;
    if (kp_ssh_provider_new(&po, &sp) < 0)
        abort();
    prov = kp_ssh_provider_as_provider(sp);

    printf("bench-provider: %u create/delete cycles on lab host %d (first cold, then warm)\n",
           cycles, LAB_HOST);
    for (unsigned i = 0; i < cycles; i++) {
        struct kp_provider_instance inst = {0};
        struct kp_provider_err err = KP_PROVIDER_ERR_INIT;
        struct kp_ssh_create_report rep;
        struct kp_entry *nc, *nc_del;
        char name[64], uid[96];
        uint64_t t0;
        int r;

        (void)snprintf(name, sizeof(name), NAME "-%u", i);
        (void)snprintf(uid, sizeof(uid), "bench-%d-%u-%llu", (int)getpid(), i,
                       (unsigned long long)kp_mono_usec());
        nc = nodeclaim(name, uid, NULL);
        r = kp_ssh_provider_create(sp, NULL, c, kp_nodeclaim_view(nc), &inst, &rep, &err);
        if (r < 0) {
            fprintf(stderr, "bench-provider: Create %s: %s [%s] %s\n", name, kp_strerror(r),
                    kp_provider_err_kind_name(err.kind), err.message ? err.message : "");
            return 1;
        }
        if ((i == 0) != rep.installed) {
            fprintf(stderr, "bench-provider: cycle %u %s install\n", i,
                    rep.installed ? "ran" : "skipped");
            return 1;
        }
        m[F_CLAIM][i] = rep.claim_usec;
        m[F_INSTALL][i] = rep.install_usec;
        m[F_TOKEN][i] = rep.token_usec;
        m[F_JOIN][i] = rep.join_usec;
        m[F_REG][i] = rep.registration_usec;
        m[F_TOTAL][i] = rep.claim_usec + rep.install_usec + rep.token_usec + rep.join_usec +
                        rep.registration_usec;
        /* The core's part: wait for the Node (Create returned at launch). */
        t0 = kp_mono_usec();
        for (;;) {
            json_t *o = NULL;

            if (kp_client_get(c, &KP_RES_NODE, NULL, name, &o, NULL) == 0) {
                kp_json_unref(o);
                break;
            }
            if (kp_mono_usec() - t0 > 120 * KP_USEC_PER_SEC) {
                fprintf(stderr, "bench-provider: Node %s never registered\n", name);
                return 1;
            }
            kp_sleep_usec(20 * 1000);
        }
        m[F_NODE][i] = kp_mono_usec() - t0;
        nc_del = nodeclaim(name, uid, inst.provider_id);
        t0 = kp_mono_usec();
        r = prov.ops->delete (prov.self, NULL, c, kp_nodeclaim_view(nc_del), &err);
        m[F_DELETE][i] = kp_mono_usec() - t0;
        if (r < 0) {
            fprintf(stderr, "bench-provider: Delete %s: %s %s\n", name, kp_strerror(r),
                    err.message ? err.message : "");
            return 1;
        }
        if (kp_ssh_provider_delete_node(c, name) < 0) {
            fprintf(stderr, "bench-provider: deleting Node %s failed\n", name);
            return 1;
        }
        wait_claimable(inf_hosts);
        kp_provider_instance_done(&inst);
        kp_provider_err_done(&err);
        kp_entry_unref(nc);
        kp_entry_unref(nc_del);
    }

    printf("%-13s %10s %10s %10s %10s   (ms; warm: %u creates)\n", "", "cold", "warm p50",
           "warm p90", "warm max", cycles - 1);
    for (int f = 0; f < F_N; f++) {
        uint64_t cold = m[f][0];

        printf("%-13s %10.0f %10.0f %10.0f %10.0f\n", field_names[f], cold / 1e3,
               quantile_ms(&m[f][1], cycles - 1, 0.5), quantile_ms(&m[f][1], cycles - 1, 0.9),
               quantile_ms(&m[f][1], cycles - 1, 1.0));
    }

    sp = kp_ssh_provider_free(sp);
    kp_informer_free(inf_nodes);
    kp_informer_free(inf_hosts);
    kp_informer_free(inf_classes);
    kp_informer_free(inf_profiles);
    objects_delete();
    c = kp_client_free(c);
    kp_lab_done(&lab);
    return 0;
}
