/* cmd/controller/ssh.h: the SSH provider's entry in kpssh-controller's controller table
 * (controllers.h): shared informers, the provider, the host controller, the node-class
 * controller and the startup taint gates, with their metric families. */
#ifndef KP_CMD_CONTROLLER_SSH_H
#define KP_CMD_CONTROLLER_SSH_H

#include "core/provider.h"

struct kp_controller_def;

extern const struct kp_controller_def kp_controller_ssh;

/* The SSH provider once the entry is set up ({NULL, NULL} before set-up and after free), for
 * the core's controllers that join the table after it. Any thread. */
struct kp_provider kp_controller_ssh_provider(void);

#endif
