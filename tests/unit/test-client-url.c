/* DESIGN: unit tests for URL building in k8s/client.c (kp_client_path, kp_query_add,
 * kp_url_escape) and for the client-side token bucket of k8s/transport.c.
 *
 * Paths are compared with the exact strings kube-apiserver routes (core group under /api,
 * named groups under /apis, namespaces, subresources). Escaping must leave no byte that could
 * change a path's meaning (/, ?, #, %, space, non-ASCII) and must refuse "." and "..", which no
 * escaping can neutralise. The token bucket is driven with an explicit clock. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "k8s/client.h"
#include "k8s/transport.h"
#include "kp-test.h"

static const char *path_of(struct kp_buf *b, const struct kp_resource *res, const char *ns,
                           const char *name, const char *sub)
{
    kp_buf_reset(b);
    assert_int_equal(kp_client_path(res, ns, name, sub, b), 0);
    return kp_buf_str(b);
}

static void test_paths(void **state)
{
    struct kp_buf b = KP_BUF_INIT(4096);
    const struct kp_resource widgets =
        KP_RESOURCE("test.kpssh.dev", "v1", "widgets", true, "Widget");

    (void)state;
    assert_string_equal(path_of(&b, &KP_RES_POD, NULL, NULL, NULL), "/api/v1/pods");
    assert_string_equal(path_of(&b, &KP_RES_POD, "kube-system", NULL, NULL),
                        "/api/v1/namespaces/kube-system/pods");
    assert_string_equal(path_of(&b, &KP_RES_POD, "ns", "p-1", "eviction"),
                        "/api/v1/namespaces/ns/pods/p-1/eviction");
    assert_string_equal(path_of(&b, &KP_RES_NODE, NULL, "n1", "status"), "/api/v1/nodes/n1/status");
    assert_string_equal(path_of(&b, &KP_RES_LEASE, "kpssh", "leader", NULL),
                        "/apis/coordination.k8s.io/v1/namespaces/kpssh/leases/leader");
    assert_string_equal(path_of(&b, &KP_RES_NODECLAIM, NULL, "c1", NULL),
                        "/apis/karpenter.sh/v1/nodeclaims/c1");
    assert_string_equal(path_of(&b, &KP_RES_SSHHOST, NULL, NULL, NULL),
                        "/apis/karpenter.kpssh.dev/v1beta1/sshhosts");
    assert_string_equal(path_of(&b, &KP_RES_EVENT, "d", NULL, NULL),
                        "/apis/events.k8s.io/v1/namespaces/d/events");
    assert_string_equal(path_of(&b, &KP_RES_PDB, "d", "p", NULL),
                        "/apis/policy/v1/namespaces/d/poddisruptionbudgets/p");
    assert_string_equal(path_of(&b, &KP_RES_CSR, NULL, "csr-1", "approval"),
                        "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1/approval");
    assert_string_equal(path_of(&b, &widgets, "t", "w", NULL),
                        "/apis/test.kpssh.dev/v1/namespaces/t/widgets/w");
    /* Names are escaped as one segment. */
    assert_string_equal(path_of(&b, &KP_RES_CONFIGMAP, "ns", "a/b?c#d e%f", NULL),
                        "/api/v1/namespaces/ns/configmaps/a%2Fb%3Fc%23d%20e%25f");
    assert_string_equal(path_of(&b, &KP_RES_CONFIGMAP, "ns", "..x", NULL),
                        "/api/v1/namespaces/ns/configmaps/..x");
    kp_buf_done(&b);
}

static void test_path_errors(void **state)
{
    struct kp_buf b = KP_BUF_INIT(4096);

    (void)state;
    assert_int_equal(kp_client_path(&KP_RES_NODE, "ns", "n", NULL, &b), -EINVAL);
    kp_buf_reset(&b);
    assert_int_equal(kp_client_path(&KP_RES_POD, "ns", NULL, "status", &b), -EINVAL);
    kp_buf_reset(&b);
    assert_int_equal(kp_client_path(&KP_RES_POD, "ns", "", NULL, &b), -EINVAL);
    kp_buf_reset(&b);
    assert_int_equal(kp_client_path(&KP_RES_POD, "ns", ".", NULL, &b), -EINVAL);
    kp_buf_reset(&b);
    assert_int_equal(kp_client_path(&KP_RES_POD, "..", "x", NULL, &b), -EINVAL);
    kp_buf_reset(&b);
    assert_int_equal(kp_client_path(&KP_RES_POD, "", NULL, NULL, &b), -EINVAL);
    kp_buf_done(&b);

    /* The ceiling of the path buffer holds. */
    {
        struct kp_buf small = KP_BUF_INIT(16);

        assert_int_equal(kp_client_path(&KP_RES_POD, "a-long-namespace", NULL, NULL, &small),
                         -KP_ELIMIT);
        kp_buf_done(&small);
    }
}

static void test_query(void **state)
{
    struct kp_buf b = KP_BUF_INIT(4096);

    (void)state;
    assert_int_equal(kp_client_path(&KP_RES_POD, NULL, NULL, NULL, &b), 0);
    assert_int_equal(kp_query_add(&b, "labelSelector", "app in (a,b),!x,tier=web"), 0);
    assert_int_equal(kp_query_add(&b, "fieldSelector", NULL), 0);
    assert_int_equal(kp_query_add(&b, "fieldSelector", "spec.nodeName=n1"), 0);
    assert_int_equal(kp_query_add(&b, "continue", "eyJ2Ijoi+/=="), 0);
    assert_string_equal(kp_buf_str(&b),
                        "/api/v1/pods?labelSelector=app%20in%20%28a%2Cb%29%2C%21x%2Ctier%3Dweb"
                        "&fieldSelector=spec.nodeName%3Dn1&continue=eyJ2Ijoi%2B%2F%3D%3D");
    kp_buf_done(&b);
}

static void test_escape_bytes(void **state)
{
    struct kp_buf b = KP_BUF_INIT(4096);
    char all[256];

    (void)state;
    for (int i = 1; i < 256; i++)
        all[i - 1] = (char)i;
    all[255] = '\0';
    assert_int_equal(kp_url_escape(&b, all), 0);
    /* Only unreserved characters stay literal. */
    for (size_t i = 0; i < b.len; i++) {
        char ch = b.data[i];

        assert_true((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                    (ch >= '0' && ch <= '9') || strchr("-._~%", ch));
    }
    assert_non_null(strstr(kp_buf_str(&b), "%FF"));
    assert_non_null(strstr(kp_buf_str(&b), "%2F"));
    kp_buf_done(&b);
}

static void test_ratelimit(void **state)
{
    struct kp_ratelimit rl;
    uint64_t t = 1000000;

    (void)state;
    kp_ratelimit_init(&rl, 5.0, 2, t);
    /* The burst is free. */
    assert_int_equal(kp_ratelimit_reserve(&rl, t), 0);
    assert_int_equal(kp_ratelimit_reserve(&rl, t), 0);
    /* Then each caller queues 200 ms behind the previous one. */
    {
        uint64_t w1 = kp_ratelimit_reserve(&rl, t), w2 = kp_ratelimit_reserve(&rl, t);

        assert_in_range(w1, 199000, 201000);
        assert_in_range(w2, 399000, 401000);
    }
    /* After a long pause the bucket is full again, never fuller than the burst. */
    t += 10 * 1000000;
    assert_int_equal(kp_ratelimit_reserve(&rl, t), 0);
    assert_int_equal(kp_ratelimit_reserve(&rl, t), 0);
    assert_true(kp_ratelimit_reserve(&rl, t) > 0);
    /* qps 0 is no limit. */
    kp_ratelimit_init(&rl, 0, 0, t);
    for (int i = 0; i < 100; i++)
        assert_int_equal(kp_ratelimit_reserve(&rl, t), 0);
}

static void test_transport_refuses_insecure(void **state)
{
    struct kp_transport_opts o = {.server = "https://127.0.0.1:6443"};
    struct kp_transport *t = NULL;

    (void)state;
    o.insecure_skip_tls_verify = true;
    assert_int_equal(kp_transport_new(&o, &t), -EPERM);
    assert_null(t);
    o.insecure_skip_tls_verify = false;
    o.server = "http://127.0.0.1:8080";
    assert_int_equal(kp_transport_new(&o, &t), -EPERM);
    o.server = "ftp://127.0.0.1";
    assert_int_equal(kp_transport_new(&o, &t), -EINVAL);
    o.server = "https://127.0.0.1:6443/?x=1";
    assert_int_equal(kp_transport_new(&o, &t), -EINVAL);
    o.server = "https://127.0.0.1:6443/";
    assert_int_equal(kp_transport_new(&o, &t), 0);
    assert_string_equal(kp_transport_server(t), "https://127.0.0.1:6443");
    t = kp_transport_free(t);
    kp_transport_global_cleanup();
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),     cmocka_unit_test(test_path_errors),
        cmocka_unit_test(test_query),     cmocka_unit_test(test_escape_bytes),
        cmocka_unit_test(test_ratelimit), cmocka_unit_test(test_transport_refuses_insecure),
    };

    return kp_test_main("client-url", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
