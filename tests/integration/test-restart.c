/* Integration: the informer (list + watch through transport, client and watch) survives a
 * kube-apiserver restart. Pods created before, during and after the restart all reach the
 * store, which ends equal to the server's state; the restart is done by
 * tests/lab/apiserver.sh (stop the recorded process by PID, start it with the same flags). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp-lab.h"
#include "kp-test.h"

#include "base/alloc.h"
#include "base/spawn.h"
#include "base/time.h"
#include "json/json.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "api/obj-pod.h"
#include "k8s/status.h"

static struct kp_lab lab;
static char ns[64];

static void create_pod(struct kp_client *c, const char *name)
{
    struct kp_error e = KP_ERROR_INIT;
    json_t *pod = kp_lab_json("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
                              "\"%s\"},\"spec\":{\"schedulerName\":\"nobody\",\"containers\":"
                              "[{\"name\":\"c\",\"image\":\"pause\"}]}}",
                              name);
    int r = -EAGAIN;

    /* Right after a restart the server may still refuse a moment. */
    for (int i = 0; i < 100 && r < 0; i++) {
        kp_error_done(&e);
        r = kp_client_create(c, &KP_RES_POD, ns, pod, NULL, &e);
        if (r == -EEXIST)
            r = 0;
        if (r < 0)
            kp_sleep_usec(200 * 1000);
    }
    kp_lab_check(r, &e, "create pod");
    kp_json_unref(pod);
    kp_error_done(&e);
}

static bool has(struct kp_informer *inf, const char *name)
{
    char key[128];
    struct kp_entry *e = NULL;

    snprintf(key, sizeof(key), "%s/%s", ns, name);
    if (kp_store_get(kp_informer_store(inf), key, &e) < 0)
        return false;
    kp_entry_unref(e);
    return true;
}

static void wait_has(struct kp_informer *inf, const char *name)
{
    for (int i = 0; i < 600; i++) {
        if (has(inf, name))
            return;
        kp_sleep_usec(100 * 1000);
    }
    fail_msg("the informer never saw pod %s", name);
}

static void restart_apiserver(void)
{
    char script[4096];
    const char *repo = getenv("KP_REPO");
    const char *argv[] = {script, "restart", NULL};
    struct kp_spawn_opts o = {.argv = argv,
                              .timeout_usec = 300 * KP_USEC_PER_SEC,
                              .max_stdout = 1 << 16,
                              .stderr_tail = 4096};
    struct kp_spawn_result res;

    if (!repo)
        fail_msg("KP_REPO is not set: run through ctest");
    snprintf(script, sizeof(script), "%s/tests/lab/apiserver.sh", repo);
    assert_int_equal(kp_spawn_run(&o, &res), 0);
    if (res.end != KP_SPAWN_EXITED || res.status != 0)
        fail_msg("apiserver.sh restart failed: %s", kp_buf_str(&res.err));
    printf("# %s", kp_buf_str(&res.err));
    kp_spawn_result_done(&res);
}

static void test_informer_survives_restart(void **state)
{
    struct kp_client *c = kp_lab_admin_client(&lab);
    struct kp_informer *inf;
    struct kp_informer_stats st;
    uint64_t t0;

    (void)state;
    inf = kp_lab_informer(c, &KP_RES_POD, ns, kp_pod_project);
    create_pod(c, "before");
    wait_has(inf, "before");

    t0 = kp_mono_usec();
    restart_apiserver();
    create_pod(c, "after");
    wait_has(inf, "after");
    printf("# restart to the informer seeing a new pod: %.1f s\n",
           (double)(kp_mono_usec() - t0) / 1e6);
    assert_true(has(inf, "before"));
    kp_informer_get_stats(inf, &st);
    printf("# informer: %llu lists, %llu events\n", (unsigned long long)st.lists,
           (unsigned long long)st.events);
    kp_informer_free(inf);
    kp_client_free(c);
}

static int setup(void **state)
{
    (void)state;
    kp_lab_setup_namespace(&lab, "kp-restart", ns, sizeof(ns));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kp_lab_teardown_namespace(&lab, ns);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_informer_survives_restart),
    };

    return _cmocka_run_group_tests("integration-restart", tests, KP_ARRAY_SIZE(tests), setup,
                                   teardown)
               ? 1
               : 0;
}
