/* Tests for the projections of our own kinds (provider/ssh/obj-kpssh.c) and the SSHJoinProfile checks
 * over the projection (provider/ssh/profile.c): every kept field of realistic SSHHost,
 * SSHNodeClass and SSHJoinProfile objects, defaults, fingerprints that ignore the
 * resourceVersion and probe-time churn, exact validation reports of objects the CRD would refuse,
 * and allocation failures. Prints the cache bytes of a typical SSHHost. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp-test.h"

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "provider/ssh/obj-kpssh.h"
#include "provider/ssh/profile.h"

#define GI (1024LL * 1024 * 1024 * 1000) /* one GiB in milli-bytes */

static struct kp_entry *decode_file(const char *name,
                                    int (*decode)(const char *, size_t, struct kp_entry **))
{
    struct kp_entry *e = NULL;
    size_t n;
    char *data = kp_test_read_data(name, &n);

    assert_int_equal(decode(data, n, &e), 0);
    kp_free(data);
    return e;
}

static void patch(char *s, const char *from, const char *to)
{
    char *at;

    assert_int_equal(strlen(from), strlen(to));
    assert_non_null(strstr(s, from));
    while ((at = strstr(s, from)))
        memcpy(at, to, strlen(to));
}

static void expect_report(const struct kp_buf *msg, int r, const char *expected)
{
    int lines = 0;

    for (const char *p = expected; *p; p++)
        lines += *p == '\n';
    if (r != lines || strcmp(kp_buf_str(msg), expected) != 0) {
        print_error("got %d problems:\n%s", r, kp_buf_str(msg));
        fail_msg("expected %d problems:\n%s", lines, expected);
    }
}

static void test_sshhost(void **state)
{
    struct kp_entry *e = decode_file("objects/sshhost.json", kp_sshhost_decode);
    const struct kp_sshhost_view *h = kp_sshhost_view(e);

    (void)state;
    assert_string_equal(e->key, "kpssh-system/edge-03");
    assert_int_equal(h->generation, 2);
    assert_false(h->maintenance);
    assert_string_equal(kp_sshhost_class(h), "small");
    assert_string_equal(h->address, "edge-03.lab.example");
    assert_int_equal(h->port, 2222);
    assert_string_equal(h->user, "kpssh");
    assert_string_equal(h->key_secret, "edge-key");
    assert_string_equal(kp_sshhost_node_ip(h), "10.213.0.13");
    assert_int_equal(kp_resources_get(&h->capacity, "cpu", NULL), 2000);
    assert_int_equal(kp_resources_get(&h->capacity, "memory", NULL), 4 * GI);
    assert_int_equal(h->exec_mode, KP_EXEC_VERIFIED);
    assert_int_equal(h->n_trusted_signers, 1);
    assert_true(kp_startswith(h->trusted_signers[0], "ssh-ed25519 AAAAC3"));
    assert_string_equal(h->shim_command, "/opt/kpssh/kpssh-shim");
    assert_int_equal(h->state, KP_HOST_IN_USE);
    assert_string_equal(kp_host_state_name(h->state), "InUse");
    assert_string_equal(h->claim_name, "ssh-general-x7k2p");
    assert_string_equal(h->claim_uid, "c3d1e2f4-5a6b-4c7d-8e9f-a0b1c2d3e4f5");
    assert_string_equal(h->installed_profile, "tls-bootstrap@1");
    assert_string_equal(h->bootstrap_token_id, "k3x9qa");
    assert_string_equal(h->provider_id, "kpssh://kpssh-system/edge-03");
    assert_string_equal(h->host_key_fingerprint,
                        "SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8");
    assert_int_equal(kp_resources_get(&h->observed_capacity, "memory", NULL),
                     4025532LL * 1024 * 1000);
    assert_string_equal(h->observed_arch, "amd64");
    assert_int_equal(h->observed_generation, 2);
    assert_true(h->last_probe_usec > 0);
    assert_null(h->last_probe_error);
    assert_int_equal(kp_conditions_get(&h->conditions, "Ready")->status, KP_COND_TRUE);
    assert_int_equal(kp_sshhost_validate(h, NULL), 0);
    print_message("cache bytes per SSHHost (typical, tests/data/objects/sshhost.json): %zu\n",
                  e->bytes);
    assert_true(e->bytes < 2048);
    kp_entry_unref(e);
}

/* A fresh host: defaults for port, user, execMode, state; class "default". */
static void test_sshhost_defaults(void **state)
{
    const char *obj = "{\"metadata\":{\"name\":\"h1\",\"namespace\":\"kpssh-system\"},\"spec\":{"
                      "\"address\":\"10.0.0.21\",\"capacity\":{\"cpu\":4,\"memory\":\"8Gi\"},"
                      "\"sshKeySecretRef\":{\"name\":\"k\"}}}";
    struct kp_entry *e = NULL;
    const struct kp_sshhost_view *h;

    (void)state;
    assert_int_equal(kp_sshhost_decode(obj, strlen(obj), &e), 0);
    h = kp_sshhost_view(e);
    assert_int_equal(h->port, 22);
    assert_string_equal(h->user, "root");
    assert_int_equal(h->exec_mode, KP_EXEC_RAW);
    assert_int_equal(h->state, KP_HOST_PENDING);
    assert_null(h->claim_name);
    assert_null(h->node_address);
    assert_null(h->shim_command);
    assert_string_equal(kp_sshhost_node_ip(h), "10.0.0.21");
    assert_string_equal(kp_sshhost_class(h), KP_KPSSH_HOST_CLASS_DEFAULT);
    assert_int_equal(kp_resources_get(&h->capacity, "cpu", NULL), 4000);
    assert_int_equal(kp_sshhost_validate(h, NULL), 0);
    kp_entry_unref(e);
}

/* An rv-only update keeps the fingerprint; a state the build does not know changes it and reads
 * as KP_HOST_STATE_UNKNOWN, never as a state the claim lock would act on. */
static void test_sshhost_fingerprint(void **state)
{
    size_t n;
    char *data = kp_test_read_data("objects/sshhost.json", &n);
    struct kp_entry *a = NULL, *b = NULL, *c = NULL;

    (void)state;
    assert_int_equal(kp_sshhost_decode(data, n, &a), 0);
    patch(data, "\"918390\"", "\"918391\"");
    assert_int_equal(kp_sshhost_decode(data, n, &b), 0);
    assert_true(a->hash == b->hash);
    patch(data, "\"state\":\"InUse\"", "\"state\":\"InUsx\"");
    assert_int_equal(kp_sshhost_decode(data, n, &c), 0);
    assert_true(a->hash != c->hash);
    assert_int_equal(kp_sshhost_view(c)->state, KP_HOST_STATE_UNKNOWN);
    kp_entry_unref(a);
    kp_entry_unref(b);
    kp_entry_unref(c);
    kp_free(data);
}

static void test_sshhost_invalid(void **state)
{
    struct kp_entry *e = decode_file("objects/sshhost-invalid.json", kp_sshhost_decode);
    const struct kp_sshhost_view *h = kp_sshhost_view(e);
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);

    (void)state;
    assert_true(h->maintenance); /* presence alone, empty value */
    expect_report(
        &msg, kp_sshhost_validate(h, &msg),
        "spec.address: \"root@10.0.0.9:22\": address must be a bare IP address or DNS name, "
        "without scheme, user, port or path (put the port in spec.port and the login in "
        "spec.user)\n"
        "spec.port: 0 must be between 1 and 65535 (omit it for 22)\n"
        "spec.sshKeySecretRef.name: sshKeySecretRef.name must name a Secret in this namespace "
        "that holds the SSH private key under data key privateKey\n"
        "spec.nodeAddress: \"node-9.lab\": nodeAddress must be an IP address literal such as "
        "10.0.0.21 or fd00::21 (kubelet --node-ip does not accept DNS names); leave it unset to "
        "use address\n"
        "spec.capacity: capacity must include memory, the memory the host offers (e.g. memory: "
        "4Gi)\n"
        "spec.trustedSigners[0]: each trustedSigners entry must be an OpenSSH public key line "
        "such as 'ssh-ed25519 AAAAC3Nza... signer@example' (the contents of a .pub file)\n"
        "spec.shimCommand: shimCommand must start with an absolute path, e.g. "
        "/opt/kpssh/kpssh-shim\n"
        "status.state: must be one of Pending, Available, Claimed, InUse, Unhealthy, Leaving, "
        "Maintenance\n"
        "status.bootstrapTokenID: must be at most 6 characters\n");
    kp_buf_done(&msg);
    kp_entry_unref(e);
}

/* execMode Verified without signers; an unknown execMode. */
static void test_sshhost_verified_rule(void **state)
{
    const char *a = "{\"metadata\":{\"name\":\"h\",\"namespace\":\"p\"},\"spec\":{\"address\":"
                    "\"fd00::21\",\"capacity\":{\"cpu\":1,\"memory\":\"1Gi\"},\"sshKeySecretRef\":"
                    "{\"name\":\"k\"},\"execMode\":\"Verified\"}}";
    const char *b =
        "{\"metadata\":{\"name\":\"h\",\"namespace\":\"p\"},\"spec\":{\"address\":"
        "\"h.example.\",\"capacity\":{\"cpu\":1,\"memory\":\"1Gi\"},\"sshKeySecretRef\":"
        "{\"name\":\"k\"},\"execMode\":\"Signed\"}}";
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    struct kp_entry *e = NULL;

    (void)state;
    assert_int_equal(kp_sshhost_decode(a, strlen(a), &e), 0);
    expect_report(&msg, kp_sshhost_validate(kp_sshhost_view(e), &msg),
                  "spec.trustedSigners: execMode Verified requires at least one trustedSigners "
                  "entry\n");
    e = kp_entry_unref(e);
    kp_buf_reset(&msg);
    assert_int_equal(kp_sshhost_decode(b, strlen(b), &e), 0);
    expect_report(&msg, kp_sshhost_validate(kp_sshhost_view(e), &msg),
                  "spec.execMode: must be Raw or Verified\n");
    kp_entry_unref(e);
    kp_buf_done(&msg);
}

static void test_sshnodeclass(void **state)
{
    struct kp_entry *e = decode_file("objects/sshnodeclass.json", kp_sshnodeclass_decode);
    const struct kp_sshnodeclass_view *c = kp_sshnodeclass_view(e);
    struct kp_labels small = {
        .v = (const struct kp_label[]){{"karpenter.kpssh.dev/host-class", "small"}, {"rack", "r4"}},
        .n = 2};
    struct kp_labels large = {
        .v = (const struct kp_label[]){{"karpenter.kpssh.dev/host-class", "large"}, {"rack", "r4"}},
        .n = 2};

    (void)state;
    assert_string_equal(e->key, "default");
    assert_int_equal(c->n_finalizers, 1);
    assert_string_equal(c->finalizers[0], "karpenter.kpssh.dev/termination");
    assert_null(c->host_selector_error);
    assert_true(kp_sshnodeclass_selects(c, &small));
    assert_false(kp_sshnodeclass_selects(c, &large));
    assert_string_equal(c->join_profile, "tls-bootstrap");
    assert_string_equal(kp_labels_get(&c->vars, "k8sMinor"), "1.31");
    assert_string_equal(c->join_secret, "join-extra");
    assert_int_equal(c->provider_id_source, KP_PROVIDER_ID_STATIC);
    assert_string_equal(c->price_per_cpu_hour, "0.025");
    assert_int_equal(c->price_micro_usd, 25000);
    assert_int_equal(kp_resources_get(&c->kube_reserved, "cpu", NULL), 100);
    assert_int_equal(c->max_pods, 58);
    assert_true(c->cluster_set);
    assert_string_equal(c->cluster_endpoint, "https://10.213.0.1:6443");
    assert_true(kp_startswith(c->cluster_ca_bundle, "LS0tLS1CRUdJTi"));
    assert_int_equal(c->n_gates, 2);
    assert_string_equal(c->gates[0].taint_key, "node.cilium.io/agent-not-ready");
    assert_int_equal(c->gates[0].kind, KP_GATE_PODS_READY);
    assert_string_equal(c->gates[0].pods_namespace, "kube-system");
    assert_int_equal(c->gates[0].min_ready, 1);
    assert_int_equal(c->gates[0].pods_selector.n, 1);
    assert_int_equal(c->gates[1].kind, KP_GATE_NODE_CONDITION);
    assert_string_equal(c->gates[1].condition_type, "example.com/GPUReady");
    assert_string_equal(c->gates[1].condition_status, "True");
    assert_int_equal(kp_conditions_get(&c->conditions, "Ready")->status, KP_COND_TRUE);
    assert_string_equal(c->ready_message, "");
    assert_int_equal(c->ready_observed_generation, 1);
    assert_int_equal(kp_sshnodeclass_validate(c, NULL), 0);
    kp_entry_unref(e);
}

/* No hostSelector: every host; defaults for price, providerIDSource, maxPods. */
static void test_sshnodeclass_defaults(void **state)
{
    const char *obj =
        "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"joinProfileRef\":{\"name\":\"p\"}}}";
    struct kp_labels any = {.v = (const struct kp_label[]){{"x", "y"}}, .n = 1};
    struct kp_entry *e = NULL;
    const struct kp_sshnodeclass_view *c;

    (void)state;
    assert_int_equal(kp_sshnodeclass_decode(obj, strlen(obj), &e), 0);
    c = kp_sshnodeclass_view(e);
    assert_false(c->host_selector.present);
    assert_true(kp_sshnodeclass_selects(c, &any));
    assert_string_equal(c->price_per_cpu_hour, KP_SSHNODECLASS_PRICE_DEFAULT);
    assert_int_equal(c->price_micro_usd, 20000);
    assert_int_equal(c->max_pods, 0);
    assert_false(c->join_secret_set);
    assert_false(c->cluster_set);
    assert_int_equal(c->n_gates, 0);
    assert_null(c->ready_message);
    assert_int_equal(c->ready_observed_generation, -1);
    assert_int_equal(kp_sshnodeclass_validate(c, NULL), 0);
    kp_entry_unref(e);
}

static void test_sshnodeclass_invalid(void **state)
{
    struct kp_entry *e = decode_file("objects/sshnodeclass-invalid.json", kp_sshnodeclass_decode);
    const struct kp_sshnodeclass_view *c = kp_sshnodeclass_view(e);
    struct kp_labels any = {.v = (const struct kp_label[]){{"rack", "r3"}}, .n = 1};
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);

    (void)state;
    assert_false(kp_sshnodeclass_selects(c, &any)); /* an invalid selector selects nothing */
    expect_report(
        &msg, kp_sshnodeclass_validate(c, &msg),
        "spec.hostSelector: term 0: unknown operator\n"
        "spec.joinProfileRef.name: joinProfileRef.name must name an SSHJoinProfile (e.g. "
        "tls-bootstrap)\n"
        "spec.vars: vars key \"1st\" cannot be an environment variable name: use letters, "
        "digits and _ only, not starting with a digit (e.g. k8sMinor)\n"
        "spec.joinSecretRef.name: joinSecretRef.name must name a Secret in the pool namespace; "
        "remove joinSecretRef when the profile needs none\n"
        "spec.providerIDSource: must be Static or Adopt\n"
        "spec.pricePerCPUHour: \"$0.02\": pricePerCPUHour must be a plain decimal number such as "
        "\"0.02\" (no sign, unit or exponent)\n"
        "spec.kubeReserved: kubeReserved may only list cpu, memory and ephemeral-storage, not "
        "\"pods\"\n"
        "spec.cluster.endpoint: cluster.endpoint must be an https:// URL of the API server, "
        "e.g. https://10.0.0.1:6443\n"
        "spec.cluster.caBundle: must be base64 (of the PEM CA certificates)\n"
        "spec.startupTaintGates[0].taintKey: \"karpenter.sh/disrupted\": taintKey may not be a "
        "karpenter.sh taint: Karpenter removes those itself\n"
        "spec.startupTaintGates[0].removeWhen: removeWhen must set exactly one of podsReady or "
        "nodeCondition\n"
        "spec.startupTaintGates[1].removeWhen: removeWhen must set exactly one of podsReady or "
        "nodeCondition\n"
        "spec.startupTaintGates[1].removeWhen.podsReady.selector: podsReady.selector must not be "
        "empty (it would match every pod in the namespace): set matchLabels or "
        "matchExpressions\n"
        "spec.startupTaintGates[1].removeWhen.nodeCondition.status: must be True, False or "
        "Unknown\n"
        "spec.startupTaintGates[2].taintKey: \"a/b\": each startupTaintGates taintKey may appear "
        "only once (also in entry 1)\n");
    kp_buf_done(&msg);
    kp_entry_unref(e);
}

static void test_sshjoinprofile(void **state)
{
    struct kp_entry *e = decode_file("objects/sshjoinprofile.json", kp_sshjoinprofile_decode);
    const struct kp_sshjoinprofile_view *v = kp_sshjoinprofile_view(e);
    struct kp_profile_spec spec;
    size_t n;
    char *join = kp_test_read_data("../../profiles/tls-bootstrap/join.sh", &n);
    uint32_t secs = 0;
    char *marker = NULL;

    (void)state;
    assert_string_equal(e->key, "tls-bootstrap");
    assert_int_equal(v->generation, 4);
    assert_string_equal(v->version, "1");
    /* The bytes the runner sends are the manifest's bytes, exactly. */
    assert_int_equal(v->scripts[KP_SJP_JOIN].len, n);
    assert_memory_equal(v->scripts[KP_SJP_JOIN].data, join, n);
    assert_null(v->scripts[KP_SJP_UNINSTALL].data);
    assert_string_equal(v->timeouts[KP_SJP_INSTALL].data, "15m");
    assert_non_null(v->signatures[KP_SJP_JOIN].data);
    assert_null(v->signatures[KP_SJP_LEAVE].data);
    assert_int_equal(kp_profile_validate_view(v, NULL), 0);
    kp_profile_spec_from_view(v, &spec);
    assert_int_equal(kp_profile_timeout(&spec, KP_PROFILE_INSTALL, &secs), 0);
    assert_int_equal(secs, 900);
    assert_int_equal(kp_profile_marker(&spec, &marker), 0);
    assert_string_equal(marker, "tls-bootstrap@1");
    print_message("cache bytes per SSHJoinProfile (tls-bootstrap, %zu script bytes): %zu\n",
                  v->scripts[0].len + v->scripts[1].len + v->scripts[2].len, e->bytes);
    kp_free(marker);
    kp_free(join);
    kp_entry_unref(e);
}

static void test_sshjoinprofile_invalid(void **state)
{
    struct kp_entry *e =
        decode_file("objects/sshjoinprofile-invalid.json", kp_sshjoinprofile_decode);
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);

    (void)state;
    expect_report(
        &msg, kp_profile_validate_view(kp_sshjoinprofile_view(e), &msg),
        "spec.scripts.leave:1:7: leave mentions KPSSH_VAR_x, but leave runs without a node "
        "class (on release and from the zombie guard), so no KPSSH_VAR_* or KPSSH_SECRET_* is "
        "ever set there; only KPSSH_HOST_ADDRESS and KPSSH_NODE_ADDRESS have values. Make leave "
        "self-contained, or have join record what leave needs on the host\n"
        "spec.signatures.join: signatures must be armored SSHSIG text from ssh-keygen -Y sign -n "
        "kpssh, from -----BEGIN SSH SIGNATURE----- to -----END SSH SIGNATURE-----\n"
        "spec.signatures.uninstall: signatures.uninstall is set but scripts.uninstall is not; "
        "remove the signature or add the script\n");
    kp_buf_done(&msg);
    kp_entry_unref(e);
}

static void test_rejects(void **state)
{
    static const struct {
        int (*decode)(const char *, size_t, struct kp_entry **);
        const char *json;
    } bad[] = {
        {kp_sshhost_decode, "{\"metadata\":{\"name\":\"h\"},\"spec\":{}}"}, /* no namespace */
        {kp_sshhost_decode, "{\"metadata\":{\"name\":\"h\",\"namespace\":\"p\"}}"},
        {kp_sshhost_decode, "{\"metadata\":{\"name\":\"h\",\"namespace\":\"p\"},\"spec\":{"
                            "\"port\":\"22\"}}"},
        {kp_sshhost_decode, "{\"metadata\":{\"name\":\"h\",\"namespace\":\"p\"},\"spec\":{"
                            "\"capacity\":{\"cpu\":\"many\"}}}"},
        {kp_sshhost_decode, "{\"metadata\":{\"name\":\"h\",\"namespace\":\"p\"},\"spec\":{},"
                            "\"status\":{\"claimRef\":\"x\"}}"},
        {kp_sshhost_decode, "{\"metadata\":{\"name\":\"h\",\"namespace\":\"p\"},\"spec\":{},"
                            "\"status\":{\"lastProbeTime\":\"soon\"}}"},
        {kp_sshnodeclass_decode, "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"vars\":{\"a\":1}}}"},
        {kp_sshnodeclass_decode, "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"startupTaintGates\":"
                                 "[1]}}"},
        {kp_sshnodeclass_decode, "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"hostSelector\":{"
                                 "\"matchLabels\":[]}}}"},
        {kp_sshjoinprofile_decode, "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"scripts\":{"
                                   "\"join\":[]}}}"},
        {kp_sshjoinprofile_decode, "{\"metadata\":{\"name\":\"p\"}}"},
    };

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        struct kp_entry *e = NULL;
        int r = bad[i].decode(bad[i].json, strlen(bad[i].json), &e);

        if (r != -KP_EPARSE)
            fail_msg("case %zu: expected -KP_EPARSE, got %d", i, r);
        assert_null(e);
    }
}

/* Torture cases read their fixture once with the C library's allocator, outside the
 * allocation-failure window: kp_alloc_fail_at(0) inside a case would disarm the sweep, and
 * kp_test_read_data's own allocations would be failed instead of the code under test. The copies
 * stay reachable until exit. */
static const char *fixture(const char *name, size_t *ret_len)
{
    static struct {
        const char *name;
        char *data;
        size_t len;
    } cache[8];
    char path[512];
    FILE *f;
    size_t i;

    for (i = 0; i < KP_ARRAY_SIZE(cache) && cache[i].name; i++)
        if (strcmp(cache[i].name, name) == 0)
            break;
    assert_true(i < KP_ARRAY_SIZE(cache));
    if (!cache[i].name) {
        long n;

        assert_true(snprintf(path, sizeof(path), "%s/%s", kp_test_data_dir(), name) <
                    (int)sizeof(path));
        f = fopen(path, "rbe");
        assert_non_null(f);
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        assert_true(n > 0);
        rewind(f);
        cache[i].data = malloc((size_t)n + 1);
        assert_non_null(cache[i].data);
        assert_int_equal(fread(cache[i].data, 1, (size_t)n, f), (size_t)n);
        cache[i].data[n] = '\0';
        cache[i].len = (size_t)n;
        cache[i].name = name;
        (void)fclose(f);
    }
    *ret_len = cache[i].len;
    return cache[i].data;
}

static int torture_one(const char *name, int (*decode)(const char *, size_t, struct kp_entry **),
                       int (*validate)(const struct kp_entry *, struct kp_buf *))
{
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    struct kp_entry *e = NULL;
    size_t n;
    const char *data = fixture(name, &n);
    int r;

    r = decode(data, n, &e);
    if (r == 0) {
        r = validate(e, &msg);
        r = r < 0 ? r : 0;
    }
    kp_buf_done(&msg);
    kp_entry_unref(e);
    return r;
}

static int validate_host(const struct kp_entry *e, struct kp_buf *msg)
{
    return kp_sshhost_validate(kp_sshhost_view(e), msg);
}

static int validate_class(const struct kp_entry *e, struct kp_buf *msg)
{
    return kp_sshnodeclass_validate(kp_sshnodeclass_view(e), msg);
}

static int torture_sshhost(void)
{
    return torture_one("objects/sshhost-invalid.json", kp_sshhost_decode, validate_host);
}

static int torture_sshnodeclass(void)
{
    int r = torture_one("objects/sshnodeclass.json", kp_sshnodeclass_decode, validate_class);

    if (r < 0)
        return r;
    return torture_one("objects/sshnodeclass-invalid.json", kp_sshnodeclass_decode, validate_class);
}

/* No escapes in this profile's strings: jansson 2.14 asserts (aborts) when an allocation fails
 * while it lexes a string holding an escape such as \n, so the sweep over the fixture files, whose
 * scripts are multi-line, would stop in jansson instead of testing our code. XXX: reported to the
 * json/ owner; a real out-of-memory there aborts the controller. */
static int torture_sshjoinprofile(void)
{
    static const char obj[] =
        "{\"metadata\":{\"name\":\"old\",\"resourceVersion\":\"2\"},\"spec\":{\"version\":"
        "\"1\",\"scripts\":{\"install\":\"exit 0\",\"join\":\"kubeadm join\",\"leave\":\"echo "
        "$KPSSH_VAR_x\"},\"timeouts\":{\"join\":\"5m\"},\"signatures\":{\"join\":\"x\","
        "\"uninstall\":\"y\"}}}";
    struct kp_buf msg = KP_BUF_INIT(KP_MAX_VALID_REPORT);
    struct kp_entry *e = NULL;
    int r;

    r = kp_sshjoinprofile_decode(obj, sizeof(obj) - 1, &e);
    if (r == 0) {
        r = kp_profile_validate_view(kp_sshjoinprofile_view(e), &msg);
        r = r < 0 ? r : 0;
    }
    kp_buf_done(&msg);
    kp_entry_unref(e);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sshhost),
        cmocka_unit_test(test_sshhost_defaults),
        cmocka_unit_test(test_sshhost_fingerprint),
        cmocka_unit_test(test_sshhost_invalid),
        cmocka_unit_test(test_sshhost_verified_rule),
        cmocka_unit_test(test_sshnodeclass),
        cmocka_unit_test(test_sshnodeclass_defaults),
        cmocka_unit_test(test_sshnodeclass_invalid),
        cmocka_unit_test(test_sshjoinprofile),
        cmocka_unit_test(test_sshjoinprofile_invalid),
        cmocka_unit_test(test_rejects),
    };
    static const struct kp_torture_case torture[] = {
        KP_TORTURE(torture_sshhost),
        KP_TORTURE(torture_sshnodeclass),
        KP_TORTURE(torture_sshjoinprofile),
    };

    return kp_test_main("obj-kpssh", tests, KP_ARRAY_SIZE(tests), torture, KP_ARRAY_SIZE(torture),
                        argc, argv);
}
