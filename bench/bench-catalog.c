/* bench-catalog: what the scheduler pays to ask the SSH provider for a NodePool's instance types
 * (core/provider.h get_instance_types), with no lab: in-memory stores holding one SSHNodeClass
 * and H SSHHosts in C classes (default 400 hosts, 8 classes), and a NodePool that references the
 * class. Reports the cost per call over N calls (default 20000) with the stores unchanged, and
 * per call when a host changes before every call (the republish path).
 * Options: -n calls, -H hosts, -C classes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/str.h"
#include "base/time.h"
#include "core/provider.h"
#include "k8s/store.h"
#include "api/obj-karpenter.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/provider.h"

#define NS "kpssh-system"

static struct kp_entry *decode(int (*fn)(const char *, size_t, struct kp_entry **),
                               const struct kp_buf *b)
{
    struct kp_entry *e = NULL;

    if (fn(b->data, b->len, &e) < 0) {
        fprintf(stderr, "decode failed: %s\n", b->data);
        exit(1);
    }
    return e;
}

static struct kp_entry *host(unsigned i, unsigned classes, unsigned rv)
{
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    struct kp_entry *e;

    if (kp_buf_printf(&b,
                      "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":\"SSHHost\","
                      "\"metadata\":{\"name\":\"h%u\",\"namespace\":\"" NS "\",\"uid\":\"u%u\","
                      "\"resourceVersion\":\"%u\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
                      "\"labels\":{\"" KP_KPSSH_LABEL_HOST_CLASS "\":\"c%u\"}},"
                      "\"spec\":{\"address\":\"10.0.%u.%u\",\"sshKeySecretRef\":{\"name\":\"k\"},"
                      "\"capacity\":{\"cpu\":\"%u\",\"memory\":\"%uGi\"}},"
                      "\"status\":{\"state\":\"Available\",\"observedArch\":\"amd64\"}}",
                      i, i, rv, i % classes, i / 250, i % 250, 2 + i % classes,
                      4 * (1 + i % classes)) < 0)
        exit(1);
    e = decode(kp_sshhost_decode, &b);
    kp_buf_done(&b);
    return e;
}

static void put(struct kp_store *s, struct kp_entry *e)
{
    if (kp_store_put(s, e, NULL) < 0) /* takes over the reference */
        exit(1);
}

int main(int argc, char **argv)
{
    uint32_t calls = 20000, hosts = 400, classes = 8;
    struct kp_store *sh = NULL, *sc = NULL, *sp = NULL;
    struct kp_ssh_provider *p = NULL;
    struct kp_provider prov;
    struct kp_entry *np;
    struct kp_buf b = KP_BUF_INIT(1 << 16);
    uint64_t t0;
    size_t ntypes = 0;
    int opt;

    while ((opt = getopt(argc, argv, "n:H:C:")) != -1) {
        uint32_t *to = opt == 'n' ? &calls : opt == 'H' ? &hosts : opt == 'C' ? &classes : NULL;

        if (!to || kp_safe_atou32(optarg, to) < 0)
            return 2;
    }
    if (!calls || !hosts || !classes || kp_store_new(&sh) < 0 || kp_store_new(&sc) < 0 ||
        kp_store_new(&sp) < 0)
        return 1;
    for (unsigned i = 0; i < hosts; i++)
        put(sh, host(i, classes, 1));
    if (kp_buf_printf(&b, "{\"apiVersion\":\"karpenter.kpssh.dev/v1beta1\",\"kind\":"
                          "\"SSHNodeClass\",\"metadata\":{\"name\":\"snc\",\"uid\":\"u\","
                          "\"resourceVersion\":\"1\"},\"spec\":{\"joinProfileRef\":{\"name\":"
                          "\"p\"}}}") < 0)
        return 1;
    put(sc, decode(kp_sshnodeclass_decode, &b));
    kp_buf_reset(&b);
    if (kp_buf_printf(&b, "{\"apiVersion\":\"karpenter.sh/v1\",\"kind\":\"NodePool\",\"metadata\":"
                          "{\"name\":\"np\",\"uid\":\"u\",\"resourceVersion\":\"1\"},\"spec\":{"
                          "\"template\":{\"spec\":{\"nodeClassRef\":{\"group\":"
                          "\"karpenter.kpssh.dev\",\"kind\":\"SSHNodeClass\",\"name\":\"snc\"},"
                          "\"requirements\":[]}}}}") < 0)
        return 1;
    np = decode(kp_nodepool_decode, &b);
    kp_buf_done(&b);
    {
        struct kp_ssh_provider_opts po = {
            .pool_namespace = NS, .hosts = sh, .nodeclasses = sc, .profiles = sp};

        if (kp_ssh_provider_new(&po, &p) < 0)
            return 1;
    }
    prov = kp_ssh_provider_as_provider(p);

    for (int pass = 0; pass < 2; pass++) {
        t0 = kp_mono_usec();
        for (unsigned i = 0; i < calls; i++) {
            struct kp_instance_catalog *cat = NULL;

            if (pass == 1)
                put(sh, host(i % hosts, classes, 2 + i));
            if (prov.ops->get_instance_types(prov.self, NULL, NULL, kp_nodepool_view(np), &cat,
                                             NULL) < 0)
                return 1;
            ntypes = cat->n;
            kp_instance_catalog_unref(cat);
        }
        printf("%-28s %8.2f us/call (%zu types, %u hosts, %u calls)\n",
               pass ? "get, a host changed each call" : "get, stores unchanged",
               (double)(kp_mono_usec() - t0) / calls, ntypes, hosts, calls);
    }
    kp_ssh_provider_free(p);
    kp_entry_unref(np);
    kp_store_free(sh);
    kp_store_free(sc);
    kp_store_free(sp);
    return 0;
}
