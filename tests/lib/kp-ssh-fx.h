/* tests/lib/kp-ssh-fx.h: the set-up fixture the SSH provider's controller tests share.
 *
 * A client pointed at a port nothing listens on (an informer started there fails its lists
 * and retries, which is what a set-up test needs), a registry, and the six informers the
 * controllers read, made the way cmd/controller/ssh.c makes them. The informers' log lines go
 * to /dev/null (kp_test_log_quiet). cmocka-fails on any error. */
#ifndef KP_TESTS_KP_SSH_FX_H
#define KP_TESTS_KP_SSH_FX_H

#include <stddef.h>

struct kp_client;
struct kp_informer;
struct kp_registry;

struct kp_ssh_fx {
    struct kp_client *c;
    struct kp_registry *reg;
    struct kp_informer *hosts, *classes, *profiles, *nodes, *claims, *pods;
    int log_fd;
};

void kp_ssh_fx_init(struct kp_ssh_fx *f);
/* The handlers of all six informers together. */
size_t kp_ssh_fx_handlers(const struct kp_ssh_fx *f);
/* Frees the registry (stopping its informers) and the client; the log back to its own fd. */
void kp_ssh_fx_done(struct kp_ssh_fx *f);

#endif
