/* tests/lib/kp-ssh-fx.c: the SSH controllers' set-up fixture (kp-ssh-fx.h). */
#include "kp-ssh-fx.h"

#include <string.h>

#include "kp-test.h"

#include "api/informers.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/registry.h"
#include "provider/ssh/indexes.h"

void kp_ssh_fx_init(struct kp_ssh_fx *f)
{
    struct kp_transport_opts to = {.server = "http://127.0.0.1:9", .allow_plain_http = true};

    memset(f, 0, sizeof(*f));
    f->log_fd = kp_test_log_quiet(); /* the started informer's list failures */
    assert_int_equal(kp_client_new(&to, &f->c), 0);
    assert_int_equal(kp_registry_new(f->c, &f->reg), 0);
    assert_int_equal(kp_ssh_informer_hosts(f->reg, "pool", &f->hosts), 0);
    assert_int_equal(kp_ssh_informer_nodeclasses(f->reg, &f->classes), 0);
    assert_int_equal(kp_ssh_informer_profiles(f->reg, &f->profiles), 0);
    assert_int_equal(kp_informers_nodes(f->reg, &f->nodes), 0);
    assert_int_equal(kp_informers_nodeclaims(f->reg, &f->claims), 0);
    assert_int_equal(kp_informers_pods(f->reg, &f->pods), 0);
}

size_t kp_ssh_fx_handlers(const struct kp_ssh_fx *f)
{
    return kp_informer_handler_count(f->hosts) + kp_informer_handler_count(f->classes) +
           kp_informer_handler_count(f->profiles) + kp_informer_handler_count(f->nodes) +
           kp_informer_handler_count(f->claims) + kp_informer_handler_count(f->pods);
}

void kp_ssh_fx_done(struct kp_ssh_fx *f)
{
    f->reg = kp_registry_free(f->reg);
    f->c = kp_client_free(f->c);
    kp_test_log_restore(f->log_fd);
}
