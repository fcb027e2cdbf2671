/* provider/ssh/probe.h: the host probe: the command a probe runs over SSH and the parser of what
 * it prints.
 *
 * The probe asks a host four things, one per line: its CPU count (`nproc`), MemTotal in kB from
 * /proc/meminfo, its machine (`uname -m`) and whether kubelet is active (`systemctl is-active
 * kubelet`, whose failure is ignored: a host without systemd or without a kubelet unit simply has
 * no active kubelet). The output is read as whitespace-separated fields, as the reference does:
 * at least three fields (cpus, memory kB, machine), and a fourth equal to "active" means kubelet
 * runs. Nothing in here knows Kubernetes, so the CLI's preflight reuses it.
 *
 * Everything here is pure: no I/O, no globals, any thread; the parser is bounded and fuzzed
 * (tests/fuzz/fuzz-probe.c). */
#ifndef KP_PROVIDER_SSH_PROBE_H
#define KP_PROVIDER_SSH_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

/* Output longer than this is refused (-KP_ELIMIT): four short lines never come close. */
#define KP_MAX_PROBE_OUTPUT 4096
/* Longest field kept (the machine name, "x86_64"); a longer one is refused (-KP_EPARSE). */
#define KP_PROBE_FIELD_MAX 64
/* Bounds of plausible values; outside them the output is refused (-KP_EPARSE). */
#define KP_PROBE_MAX_CPUS 65536u
#define KP_PROBE_MAX_MEM_KB (UINT64_C(1) << 40) /* 1 PiB */

/* The command, for kp_ssh_exec_capture(): POSIX shell, no secrets, exits 0 whatever kubelet's
 * state. */
const char *kp_probe_command(void);

/* What a probe saw. */
struct kp_probe_result {
    uint32_t cpus;                    /* >= 1 */
    uint64_t mem_bytes;               /* MemTotal kB x 1024, >= 1 KiB */
    char machine[KP_PROBE_FIELD_MAX]; /* `uname -m` as printed: [A-Za-z0-9_.-]+ */
    bool kubelet_active;              /* the fourth field is exactly "active" */
};

/* Parses probe output p[n] (need not be NUL-terminated). 0 with *ret filled, or -KP_EPARSE, or
 * -KP_ELIMIT when n > KP_MAX_PROBE_OUTPUT, each with *ret_msg (optional; base/err.h) saying
 * what is wrong. *ret is written only on success. */
int kp_probe_parse(const char *p, size_t n, struct kp_probe_result *ret, char **ret_msg)
    KP_NONNULL(3) KP_WUR;

/* The Kubernetes-style architecture of a machine name: x86_64/amd64 -> "amd64", aarch64/arm64 ->
 * "arm64", anything else is returned as given (the reference passes unknown values through). */
const char *kp_probe_arch(const char *machine) KP_NONNULL(1);

#endif
