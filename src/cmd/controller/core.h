/* cmd/controller/core.h: Karpenter's core as an entry of kpssh-controller's controller table
 * (controllers.h): the core's controllers (core/), on the SSH entry's provider, with Karpenter's
 * metric families and events. It must come after the SSH entry in the table. */
#ifndef KP_CMD_CONTROLLER_CORE_H
#define KP_CMD_CONTROLLER_CORE_H

struct kp_controller_def;

extern const struct kp_controller_def kp_controller_core;

#endif
