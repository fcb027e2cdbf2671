/* DESIGN: unit tests for provider/ssh/env.c, written against the table in provider/ssh/env.h.
 *
 * Each phase is built from one realistic input (a NodeClaim with labels and taints, a node class
 * with vars, a join Secret, a bootstrap token) and the whole variable list is compared, names,
 * order, values and secret flags, so an accidental extra or missing variable fails loudly. The
 * refusal cases check that the message names the offending keys and never a secret value. The
 * torture cases build full environments (and a refused one) with each allocation failing in turn.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/secret.h"
#include "kp-test.h"
#include "provider/ssh/env.h"

#define TOKEN "abcdef.0123456789abcdef"
#define CA_PEM "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="

/* The secrets one input uses; created per test so the torture sweep can count them. */
struct fixture {
    struct kp_secret *token;
    struct kp_secret *code; /* activationCode: long, redacted */
    struct kp_secret *id;   /* activation-id: long, redacted */
    struct kp_secret *pin;  /* short: exported, not redacted */
    struct kp_env_secret_pair secrets[3];
    struct kp_env_input in;
};

static const struct kp_env_pair labels[] = {
    {"node-role.kubernetes.io/worker", ""},       /* kubelet may not set: dropped */
    {"team", "storage"},                          /* no prefix: kept */
    {"karpenter.sh/nodepool", "edge"},            /* other domain: kept */
    {"node.kubernetes.io/instance-type", "rpi4"}, /* allowed namespace */
    {"node-restriction.kubernetes.io/x", "y"},    /* forbidden */
    {"kubernetes.io/arch", "arm64"},              /* kubelet's own label */
    {"example.k8s.io/foo", "bar"},                /* k8s.io namespace: dropped */
};

static const struct kp_env_taint taints[] = {
    {"karpenter.kpssh.dev/pool", NULL, "NoSchedule"},
    {"dedicated", "gpu", "NoExecute"},
};

static const struct kp_env_pair vars[] = {
    {"k8sMinor", "1.36"},
    {"clusterDNS", "10.96.0.10"},
};

static void fixture_done(struct fixture *f)
{
    f->token = kp_secret_free(f->token);
    f->code = kp_secret_free(f->code);
    f->id = kp_secret_free(f->id);
    f->pin = kp_secret_free(f->pin);
}

static int fixture_init(struct fixture *f, enum kp_env_phase phase)
{
    int r;

    memset(f, 0, sizeof(*f));
    if ((r = kp_secret_new(TOKEN, strlen(TOKEN), &f->token)) < 0 ||
        (r = kp_secret_new("code-ZZZZ-1234567890", 20, &f->code)) < 0 ||
        (r = kp_secret_new("mi-activation-id", 16, &f->id)) < 0 ||
        (r = kp_secret_new("1234", 4, &f->pin)) < 0) {
        fixture_done(f);
        return r;
    }
    f->secrets[0] = (struct kp_env_secret_pair){"activationCode", f->code};
    f->secrets[1] = (struct kp_env_secret_pair){"activation-id", f->id};
    f->secrets[2] = (struct kp_env_secret_pair){"pin.v1", f->pin};
    f->in = (struct kp_env_input){
        .phase = phase,
        .cluster_endpoint = "https://10.213.0.1:6443",
        .cluster_ca = CA_PEM,
        .cluster_ca_len = strlen(CA_PEM),
        .bootstrap_token = f->token,
        .node_name = "default-abc12",
        .provider_id_source = KP_ENV_PROVIDER_ID_STATIC,
        .pool_namespace = "kpssh-system",
        .host_name = "h1",
        .host_address = "h1.lab.example",
        .node_address = "10.213.0.11",
        .labels = labels,
        .nlabels = KP_ARRAY_SIZE(labels),
        .taints = taints,
        .ntaints = KP_ARRAY_SIZE(taints),
        .vars = vars,
        .nvars = KP_ARRAY_SIZE(vars),
        .secrets = f->secrets,
        .nsecrets = 3,
    };
    return 0;
}

struct expect {
    const char *name;
    const char *value; /* plain value, or the secret's bytes */
    bool secret;
};

static void check_env(const struct kp_env *env, const struct expect *want, size_t n)
{
    size_t i;

    assert_int_equal(kp_env_size(env), n);
    for (i = 0; i < n; i++) {
        assert_string_equal(kp_env_name(env, i), want[i].name);
        assert_int_equal(kp_env_is_secret(env, i), want[i].secret);
        if (want[i].secret) {
            assert_null(kp_env_value(env, i));
            assert_non_null(kp_env_secret(env, i));
            assert_string_equal(kp_secret_reveal(kp_env_secret(env, i)), want[i].value);
        } else {
            assert_null(kp_env_secret(env, i));
            assert_string_equal(kp_env_value(env, i), want[i].value);
        }
        assert_int_equal(kp_env_find(env, want[i].name), (int)i);
    }
}

static void test_join_full(void **state)
{
    static const struct expect want[] = {
        {"KPSSH_BOOTSTRAP_TOKEN", TOKEN, true},
        {"KPSSH_CLUSTER_CA_B64", CA_B64, false},
        {"KPSSH_CLUSTER_ENDPOINT", "https://10.213.0.1:6443", false},
        {"KPSSH_HOST_ADDRESS", "h1.lab.example", false},
        {"KPSSH_NODE_ADDRESS", "10.213.0.11", false},
        {"KPSSH_NODE_LABELS",
         "karpenter.sh/nodepool=edge,kubernetes.io/arch=arm64,"
         "node.kubernetes.io/instance-type=rpi4,team=storage",
         false},
        {"KPSSH_NODE_NAME", "default-abc12", false},
        {"KPSSH_PROVIDER_ID", "kpssh://kpssh-system/h1", false},
        {"KPSSH_SECRET_ACTIVATIONCODE", "code-ZZZZ-1234567890", true},
        {"KPSSH_SECRET_ACTIVATION_ID", "mi-activation-id", true},
        {"KPSSH_SECRET_PIN_V1", "1234", true},
        {"KPSSH_TAINTS",
         "karpenter.sh/unregistered:NoExecute,karpenter.kpssh.dev/pool:NoSchedule,"
         "dedicated=gpu:NoExecute",
         false},
        {"KPSSH_VAR_clusterDNS", "10.96.0.10", false},
        {"KPSSH_VAR_k8sMinor", "1.36", false},
    };
    struct fixture f;
    struct kp_env *env = NULL;
    char *err = NULL;

    (void)state;
    assert_int_equal(fixture_init(&f, KP_ENV_JOIN), 0);
    assert_int_equal(kp_env_build(&f.in, &env, &err), 0);
    assert_null(err);
    check_env(env, want, KP_ARRAY_SIZE(want));
    assert_int_equal(kp_env_find(env, "KPSSH_NOPE"), -ENOENT);

    /* Longest first: the token, code, the token's secret half and the id (same length: by
     * bytes); the 4-byte pin is too short to redact. */
    assert_int_equal(kp_env_redact_size(env), 4);
    assert_string_equal(kp_secret_reveal(kp_env_redact_at(env, 0)), TOKEN);
    assert_string_equal(kp_secret_reveal(kp_env_redact_at(env, 1)), "code-ZZZZ-1234567890");
    assert_string_equal(kp_secret_reveal(kp_env_redact_at(env, 2)), "0123456789abcdef");
    assert_string_equal(kp_secret_reveal(kp_env_redact_at(env, 3)), "mi-activation-id");
    assert_null(kp_env_redact_at(env, 4));
    assert_ptr_equal(kp_env_redact_array(env)[3], kp_env_redact_at(env, 3));
    assert_null(kp_env_name(env, 99));
    assert_null(kp_env_value(env, 99));

    env = kp_env_free(env);
    assert_null(env);
    fixture_done(&f);
}

static void test_install_has_no_token(void **state)
{
    struct fixture f;
    struct kp_env *env = NULL;
    int i;

    (void)state;
    assert_int_equal(fixture_init(&f, KP_ENV_INSTALL), 0);
    assert_int_equal(kp_env_build(&f.in, &env, NULL), 0);
    i = kp_env_find(env, "KPSSH_BOOTSTRAP_TOKEN");
    assert_true(i >= 0);
    assert_false(kp_env_is_secret(env, (size_t)i));
    assert_string_equal(kp_env_value(env, (size_t)i), "");
    assert_true(kp_env_find(env, "KPSSH_SECRET_ACTIVATIONCODE") >= 0);
    assert_true(kp_env_find(env, "KPSSH_VAR_k8sMinor") >= 0);
    assert_int_equal(kp_env_size(env), 14);
    /* The join Secret is redacted, the token (not minted yet) is not there to redact. */
    assert_int_equal(kp_env_redact_size(env), 2);
    kp_env_free(env);

    /* Install ignores a malformed token: it is minted after install. */
    f.in.bootstrap_token = NULL;
    assert_int_equal(kp_env_build(&f.in, &env, NULL), 0);
    kp_env_free(env);
    fixture_done(&f);
}

static void test_leave_addresses_only(void **state)
{
    static const struct expect want[] = {
        {"KPSSH_BOOTSTRAP_TOKEN", "", false},
        {"KPSSH_CLUSTER_CA_B64", "", false},
        {"KPSSH_CLUSTER_ENDPOINT", "", false},
        {"KPSSH_HOST_ADDRESS", "10.213.0.12", false},
        {"KPSSH_NODE_ADDRESS", "10.213.0.12", false},
        {"KPSSH_NODE_LABELS", "", false},
        {"KPSSH_NODE_NAME", "", false},
        {"KPSSH_PROVIDER_ID", "", false},
        {"KPSSH_TAINTS", "", false},
    };
    struct kp_env_input in = {.phase = KP_ENV_LEAVE, .host_address = "10.213.0.12"};
    struct fixture f;
    struct kp_env *env = NULL;

    (void)state;
    assert_int_equal(kp_env_build(&in, &env, NULL), 0);
    check_env(env, want, KP_ARRAY_SIZE(want));
    assert_int_equal(kp_env_redact_size(env), 0);
    assert_null(kp_env_redact_array(env));
    kp_env_free(env);

    /* A full input changes nothing for leave and uninstall: no var, no secret, no token. */
    assert_int_equal(fixture_init(&f, KP_ENV_LEAVE), 0);
    f.in.host_address = "10.213.0.12";
    f.in.node_address = NULL;
    assert_int_equal(kp_env_build(&f.in, &env, NULL), 0);
    check_env(env, want, KP_ARRAY_SIZE(want));
    assert_int_equal(kp_env_redact_size(env), 0);
    kp_env_free(env);
    f.in.phase = KP_ENV_UNINSTALL;
    assert_int_equal(kp_env_build(&f.in, &env, NULL), 0);
    check_env(env, want, KP_ARRAY_SIZE(want));
    kp_env_free(env);
    fixture_done(&f);
}

static void test_adopt_and_defaults(void **state)
{
    struct fixture f;
    struct kp_env *env = NULL;

    (void)state;
    assert_int_equal(fixture_init(&f, KP_ENV_JOIN), 0);
    f.in.provider_id_source = KP_ENV_PROVIDER_ID_ADOPT;
    f.in.pool_namespace = NULL;
    f.in.host_name = NULL;
    f.in.node_address = "";
    f.in.nlabels = 0;
    f.in.ntaints = 0;
    f.in.nvars = 0;
    f.in.nsecrets = 0;
    assert_int_equal(kp_env_build(&f.in, &env, NULL), 0);
    assert_string_equal(kp_env_value(env, (size_t)kp_env_find(env, "KPSSH_PROVIDER_ID")), "");
    assert_string_equal(kp_env_value(env, (size_t)kp_env_find(env, "KPSSH_NODE_ADDRESS")),
                        "h1.lab.example");
    assert_string_equal(kp_env_value(env, (size_t)kp_env_find(env, "KPSSH_NODE_LABELS")), "");
    assert_string_equal(kp_env_value(env, (size_t)kp_env_find(env, "KPSSH_TAINTS")),
                        KP_ENV_TAINT_UNREGISTERED);
    assert_int_equal(kp_env_size(env), 9);
    assert_int_equal(kp_env_redact_size(env), 2); /* token and its half */
    kp_env_free(env);
    fixture_done(&f);
}

static void test_label_filter(void **state)
{
    static const struct {
        const char *key;
        bool ok;
    } cases[] = {
        {"team", true},
        {"example.com/team", true},
        {"karpenter.sh/capacity-type", true},
        {"karpenter.kpssh.dev/host-class", true},
        {"kubernetes.io/hostname", true},
        {"kubernetes.io/arch", true},
        {"kubernetes.io/os", true},
        {"beta.kubernetes.io/arch", true},
        {"beta.kubernetes.io/os", true},
        {"beta.kubernetes.io/instance-type", true},
        {"topology.kubernetes.io/zone", true},
        {"topology.kubernetes.io/region", true},
        {"failure-domain.beta.kubernetes.io/zone", true},
        {"failure-domain.beta.kubernetes.io/region", true},
        {"node.kubernetes.io/instance-type", true},
        {"node.kubernetes.io/anything", true},
        {"sub.node.kubernetes.io/anything", true},
        {"kubelet.kubernetes.io/x", true},
        {"a.b.kubelet.kubernetes.io/x", true},
        {"kubernetes.io/role", false},
        {"kubernetes.io/other", false},
        {"node-role.kubernetes.io/worker", false},
        {"topology.kubernetes.io/rack", false},
        {"k8s.io/x", false},
        {"foo.k8s.io/x", false},
        {"node-restriction.kubernetes.io/x", false},
        {"a.node-restriction.kubernetes.io/x", false},
        {"xnode.kubernetes.io/x", false}, /* not a subdomain of node.kubernetes.io */
        {"mykubernetes.io/x", true},      /* not a subdomain of kubernetes.io */
        {"notk8s.io/x", true},
        {"kubernetes.io.example.com/x", true}, /* kubernetes.io is a prefix here, not a suffix */
        {"/x", true},                          /* empty prefix: outside every namespace */
    };
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        if (kp_env_label_kubelet_settable(cases[i].key) != cases[i].ok)
            fail_msg("label %s: expected %s", cases[i].key, cases[i].ok ? "kept" : "dropped");
    }
}

/* Builds f->in and expects -EINVAL with a message containing each of the needles; also checks
 * that no secret value of the fixture leaks into the message. */
static void expect_refusal(struct fixture *f, const char *needle1, const char *needle2)
{
    struct kp_env *env = NULL;
    char *err = NULL;

    assert_int_equal(kp_env_build(&f->in, &env, &err), -EINVAL);
    assert_null(env);
    assert_non_null(err);
    if (!strstr(err, needle1) || (needle2 && !strstr(err, needle2)))
        fail_msg("message \"%s\" lacks \"%s\"/\"%s\"", err, needle1, needle2 ? needle2 : "");
    assert_null(strstr(err, "0123456789abcdef"));
    assert_null(strstr(err, "code-ZZZZ"));
    assert_null(strstr(err, "mi-activation-id"));
    kp_free(err);
    /* Without reterr the verdict is the same. */
    assert_int_equal(kp_env_build(&f->in, &env, NULL), -EINVAL);
    assert_null(env);
}

static void test_secret_collision(void **state)
{
    struct kp_env_secret_pair pairs[2];
    struct fixture f;
    char *err1 = NULL, *err2 = NULL;
    struct kp_env *env = NULL;

    (void)state;
    assert_int_equal(fixture_init(&f, KP_ENV_JOIN), 0);
    pairs[0] = (struct kp_env_secret_pair){"activation-code", f.code};
    pairs[1] = (struct kp_env_secret_pair){"Activation.Code", f.id};
    f.in.secrets = pairs;
    f.in.nsecrets = 2;
    expect_refusal(&f, "\"Activation.Code\" and \"activation-code\"",
                   "KPSSH_SECRET_ACTIVATION_CODE");

    /* The same message whichever order the Secret's keys come in. */
    assert_int_equal(kp_env_build(&f.in, &env, &err1), -EINVAL);
    pairs[0] = (struct kp_env_secret_pair){"Activation.Code", f.id};
    pairs[1] = (struct kp_env_secret_pair){"activation-code", f.code};
    assert_int_equal(kp_env_build(&f.in, &env, &err2), -EINVAL);
    assert_string_equal(err1, err2);
    kp_free(err1);
    kp_free(err2);

    /* The same key twice collides with itself. */
    pairs[1] = (struct kp_env_secret_pair){"Activation.Code", f.code};
    expect_refusal(&f, "\"Activation.Code\" and \"Activation.Code\"", NULL);

    /* Installs see the same error: the secrets are exported there too. */
    f.in.phase = KP_ENV_INSTALL;
    expect_refusal(&f, "KPSSH_SECRET_ACTIVATION_CODE", NULL);
    fixture_done(&f);
}

static void test_secret_bad(void **state)
{
    struct kp_env_secret_pair pair;
    struct kp_secret *nul = NULL;
    struct fixture f;

    (void)state;
    assert_int_equal(fixture_init(&f, KP_ENV_JOIN), 0);
    f.in.secrets = &pair;
    f.in.nsecrets = 1;
    pair = (struct kp_env_secret_pair){"bad/key", f.code};
    expect_refusal(&f, "\"bad/key\"", NULL);
    pair = (struct kp_env_secret_pair){"", f.code};
    expect_refusal(&f, "join Secret key \"\"", NULL);
    pair = (struct kp_env_secret_pair){"x", NULL};
    expect_refusal(&f, "\"x\" has no value", NULL);
    assert_int_equal(kp_secret_new("ab\0cdefghij", 11, &nul), 0);
    pair = (struct kp_env_secret_pair){"blob", nul};
    expect_refusal(&f, "\"blob\" holds a NUL", NULL);
    nul = kp_secret_free(nul);
    fixture_done(&f);
}

static void test_secret_name(void **state)
{
    static const struct {
        const char *key, *name;
    } ok[] = {
        {"activationCode", "KPSSH_SECRET_ACTIVATIONCODE"},
        {"a-b.c_d", "KPSSH_SECRET_A_B_C_D"},
        {"9lives", "KPSSH_SECRET_9LIVES"},
        {"...", "KPSSH_SECRET____"},
    };
    static const char *const bad[] = {"", "a b", "a/b", "ä", "a=b", "a\nb", "$x"};
    static char untouched[] = "untouched";
    char *name = untouched;
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(ok); i++) {
        assert_int_equal(kp_env_secret_name(ok[i].key, &name), 0);
        assert_string_equal(name, ok[i].name);
        kp_free(name);
    }
    name = untouched;
    for (i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        assert_int_equal(kp_env_secret_name(bad[i], &name), -EINVAL);
        assert_string_equal(name, "untouched");
    }
}

static void test_var_bad(void **state)
{
    static const char *const bad[] = {"1x", "a-b", "a.b", "", "x y", "KPSSH_VAR_x$"};
    struct kp_env_pair v[2];
    struct fixture f;
    size_t i;

    (void)state;
    assert_int_equal(fixture_init(&f, KP_ENV_JOIN), 0);
    f.in.vars = v;
    f.in.nvars = 1;
    for (i = 0; i < KP_ARRAY_SIZE(bad); i++) {
        v[0] = (struct kp_env_pair){bad[i], "v"};
        expect_refusal(&f, "SSHNodeClass var", bad[i]);
    }
    v[0] = (struct kp_env_pair){NULL, "v"};
    expect_refusal(&f, "SSHNodeClass var \"\"", NULL);
    v[0] = (struct kp_env_pair){"same", "1"};
    v[1] = (struct kp_env_pair){"same", "2"};
    f.in.nvars = 2;
    expect_refusal(&f, "var \"same\" is given twice", NULL);
    /* Case matters for vars: these are two variables. */
    v[1] = (struct kp_env_pair){"SAME", "2"};
    {
        struct kp_env *env = NULL;

        assert_int_equal(kp_env_build(&f.in, &env, NULL), 0);
        assert_true(kp_env_find(env, "KPSSH_VAR_SAME") >= 0);
        assert_true(kp_env_find(env, "KPSSH_VAR_same") >= 0);
        kp_env_free(env);
    }
    fixture_done(&f);
}

static void test_taints(void **state)
{
    struct kp_env_taint t[3];
    struct kp_env *env = NULL;
    struct fixture f;

    (void)state;
    assert_int_equal(fixture_init(&f, KP_ENV_JOIN), 0);
    f.in.taints = t;

    /* The unregistered taint in the NodeClaim is not repeated. */
    t[0] = (struct kp_env_taint){"a", "1", "NoSchedule"};
    t[1] = (struct kp_env_taint){"karpenter.sh/unregistered", "", "NoExecute"};
    t[2] = (struct kp_env_taint){"b", NULL, "PreferNoSchedule"};
    f.in.ntaints = 3;
    assert_int_equal(kp_env_build(&f.in, &env, NULL), 0);
    assert_string_equal(kp_env_value(env, (size_t)kp_env_find(env, "KPSSH_TAINTS")),
                        "karpenter.sh/unregistered:NoExecute,a=1:NoSchedule,b:PreferNoSchedule");
    env = kp_env_free(env);

    /* Same key with another effect is a different taint. */
    t[1] = (struct kp_env_taint){"karpenter.sh/unregistered", NULL, "NoSchedule"};
    f.in.ntaints = 2;
    assert_int_equal(kp_env_build(&f.in, &env, NULL), 0);
    assert_string_equal(kp_env_value(env, (size_t)kp_env_find(env, "KPSSH_TAINTS")),
                        "karpenter.sh/unregistered:NoExecute,a=1:NoSchedule,"
                        "karpenter.sh/unregistered:NoSchedule");
    env = kp_env_free(env);

    t[1] = (struct kp_env_taint){"karpenter.sh/unregistered", "x", "NoExecute"};
    expect_refusal(&f, "carries a value", NULL);
    t[1] = (struct kp_env_taint){"a", "2", "NoSchedule"};
    expect_refusal(&f, "\"a:NoSchedule\" is given twice", NULL);
    t[1] = (struct kp_env_taint){"c", NULL, "NoStart"};
    expect_refusal(&f, "\"c\" has effect \"NoStart\"", NULL);
    t[1] = (struct kp_env_taint){"c", NULL, NULL};
    expect_refusal(&f, "\"c\" has effect \"\"", NULL);
    t[1] = (struct kp_env_taint){"c,d", NULL, "NoSchedule"};
    expect_refusal(&f, "taint \"c,d\"", NULL);
    t[1] = (struct kp_env_taint){"c", "x:y", "NoSchedule"};
    expect_refusal(&f, "taint \"c\"", NULL);
    t[1] = (struct kp_env_taint){"", NULL, "NoSchedule"};
    expect_refusal(&f, "taint \"\"", NULL);
    fixture_done(&f);
}

static void test_labels_bad(void **state)
{
    struct kp_env_pair l[2];
    struct fixture f;

    (void)state;
    assert_int_equal(fixture_init(&f, KP_ENV_JOIN), 0);
    f.in.labels = l;
    f.in.nlabels = 2;
    l[0] = (struct kp_env_pair){"a", "1"};
    l[1] = (struct kp_env_pair){"a", "2"};
    expect_refusal(&f, "label \"a\" is given twice", NULL);
    l[1] = (struct kp_env_pair){"b", "x,y"};
    expect_refusal(&f, "label \"b\"", NULL);
    l[1] = (struct kp_env_pair){"b=c", "x"};
    expect_refusal(&f, "label \"b=c\"", NULL);
    l[1] = (struct kp_env_pair){"b", "new\nline"};
    expect_refusal(&f, "label \"b\"", NULL);
    fixture_done(&f);
}

static void test_required(void **state)
{
    struct kp_secret *bad = NULL;
    struct fixture f;

    (void)state;
    assert_int_equal(fixture_init(&f, KP_ENV_JOIN), 0);
    f.in.host_address = NULL;
    expect_refusal(&f, "SSHHost address", NULL);
    f.in.host_address = "h1";
    f.in.node_address = "10.0.0.1 x";
    expect_refusal(&f, "nodeAddress", NULL);
    f.in.node_address = NULL;
    f.in.cluster_endpoint = "http://10.213.0.1:6443";
    expect_refusal(&f, "\"http://10.213.0.1:6443\" must be an https:// URL", NULL);
    f.in.cluster_endpoint = "https://";
    expect_refusal(&f, "https:// URL", NULL);
    f.in.cluster_endpoint = NULL;
    expect_refusal(&f, "https:// URL", NULL);
    f.in.cluster_endpoint = "https://api";
    f.in.cluster_ca_len = 0;
    expect_refusal(&f, "no cluster CA", NULL);
    f.in.cluster_ca_len = strlen(CA_PEM);
    f.in.node_name = "";
    expect_refusal(&f, "node name", NULL);
    f.in.node_name = "n1";
    f.in.host_name = "";
    expect_refusal(&f, "Static provider id", NULL);
    f.in.host_name = "h1";
    f.in.pool_namespace = "a/b";
    expect_refusal(&f, "Static provider id", NULL);
    f.in.pool_namespace = "ns";

    f.in.bootstrap_token = NULL;
    expect_refusal(&f, "bootstrap token", NULL);
    assert_int_equal(kp_secret_new("ABCDEF.0123456789abcdef", 23, &bad), 0);
    f.in.bootstrap_token = bad;
    expect_refusal(&f, "bootstrap token", NULL);
    bad = kp_secret_free(bad);
    assert_int_equal(kp_secret_new("abcdef-0123456789abcdef", 23, &bad), 0);
    f.in.bootstrap_token = bad;
    expect_refusal(&f, "bootstrap token", NULL);
    bad = kp_secret_free(bad);
    assert_int_equal(kp_secret_new("abcdef.0123456789abcde", 22, &bad), 0);
    f.in.bootstrap_token = bad;
    expect_refusal(&f, "bootstrap token", NULL);
    bad = kp_secret_free(bad);

    f.in.bootstrap_token = f.token;
    f.in.phase = (enum kp_env_phase)42;
    {
        struct kp_env *env = NULL;

        assert_int_equal(kp_env_build(&f.in, &env, NULL), -EINVAL);
        assert_null(env);
    }
    fixture_done(&f);
}

static void test_base64(void **state)
{
    static const struct {
        const char *in, *out;
    } v[] = {
        {"f", "Zg=="},
        {"fo", "Zm8="},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="},
        {"foobar", "Zm9vYmFy"},
        {"\xff\xfe\xfd", "//79"},
    };
    struct kp_env_input in = {
        .phase = KP_ENV_INSTALL,
        .cluster_endpoint = "https://api",
        .node_name = "n",
        .provider_id_source = KP_ENV_PROVIDER_ID_ADOPT,
        .host_address = "h",
    };
    struct kp_env *env = NULL;
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(v); i++) {
        in.cluster_ca = v[i].in;
        in.cluster_ca_len = strlen(v[i].in);
        assert_int_equal(kp_env_build(&in, &env, NULL), 0);
        assert_string_equal(kp_env_value(env, (size_t)kp_env_find(env, "KPSSH_CLUSTER_CA_B64")),
                            v[i].out);
        env = kp_env_free(env);
    }
}

static void test_large_ca(void **state)
{
    struct kp_env_input in = {
        .phase = KP_ENV_INSTALL,
        .cluster_endpoint = "https://api",
        .node_name = "n",
        .provider_id_source = KP_ENV_PROVIDER_ID_ADOPT,
        .host_address = "h",
    };
    struct kp_env *env = NULL;
    char *ca, *err = NULL;

    (void)state;
    /* 64 KiB, the CRD's maximum, fits; far beyond it is refused. */
    ca = kp_calloc(1, 200000);
    assert_non_null(ca);
    in.cluster_ca = ca;
    in.cluster_ca_len = 65536;
    assert_int_equal(kp_env_build(&in, &env, NULL), 0);
    assert_int_equal(strlen(kp_env_value(env, (size_t)kp_env_find(env, "KPSSH_CLUSTER_CA_B64"))),
                     87384);
    env = kp_env_free(env);
    in.cluster_ca_len = 200000;
    assert_int_equal(kp_env_build(&in, &env, &err), -EINVAL);
    assert_non_null(strstr(err, "too large"));
    kp_free(err);
    kp_free(ca);
}

/* --- torture ----------------------------------------------------------------------------- */

static int torture_build(enum kp_env_phase phase)
{
    struct fixture f;
    struct kp_env *env = NULL;
    char *err = NULL;
    int r;

    if ((r = fixture_init(&f, phase)) < 0)
        return r;
    r = kp_env_build(&f.in, &env, &err);
    if (r == 0 && (kp_env_size(env) < 9 || err))
        r = 1; /* a broken promise, not an allocation failure */
    kp_env_free(env);
    kp_free(err);
    fixture_done(&f);
    return r;
}

static int torture_join(void)
{
    return torture_build(KP_ENV_JOIN);
}

static int torture_install(void)
{
    return torture_build(KP_ENV_INSTALL);
}

static int torture_leave(void)
{
    return torture_build(KP_ENV_LEAVE);
}

/* A refused input must stay refused (or fail for memory), never succeed, never leak. */
static int torture_collision(void)
{
    struct kp_env_secret_pair pairs[2];
    struct fixture f;
    struct kp_env *env = NULL;
    char *err = NULL;
    int r;

    if ((r = fixture_init(&f, KP_ENV_JOIN)) < 0)
        return r;
    pairs[0] = (struct kp_env_secret_pair){"a-b", f.code};
    pairs[1] = (struct kp_env_secret_pair){"A.B", f.id};
    f.in.secrets = pairs;
    f.in.nsecrets = 2;
    r = kp_env_build(&f.in, &env, &err);
    if (r == 0 || env)
        r = 1;
    else if (r == -EINVAL)
        r = 0;
    kp_env_free(env);
    kp_free(err);
    fixture_done(&f);
    return r;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join_full),
        cmocka_unit_test(test_install_has_no_token),
        cmocka_unit_test(test_leave_addresses_only),
        cmocka_unit_test(test_adopt_and_defaults),
        cmocka_unit_test(test_label_filter),
        cmocka_unit_test(test_secret_collision),
        cmocka_unit_test(test_secret_bad),
        cmocka_unit_test(test_secret_name),
        cmocka_unit_test(test_var_bad),
        cmocka_unit_test(test_taints),
        cmocka_unit_test(test_labels_bad),
        cmocka_unit_test(test_required),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_large_ca),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_join),
        KP_TORTURE(torture_install),
        KP_TORTURE(torture_leave),
        KP_TORTURE(torture_collision),
    };

    return kp_test_main("env", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
