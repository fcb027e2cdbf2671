/* provider/ssh/probe.c: the probe command and its output parser (probe.h).
 *
 * DESIGN
 *
 * What: one fixed shell line and a strict reader of its four lines of output.
 *
 * Why this way: the command is a constant, so nothing a host or a user supplies ever reaches
 * argv. The reader walks the bytes once, splitting on ASCII whitespace into at most five fields
 * of at most KP_PROBE_FIELD_MAX bytes each, in a fixed array on the stack (the fields are bounded
 * by construction, so no allocation and no kp_buf is needed); numbers go through kp_safe_atou*
 * and are bounded to plausible values. A host that prints more than the four expected fields (a
 * login banner on stdout, say) is refused rather than guessed at: a probe that reads the wrong
 * field would advertise capacity a host does not have.
 *
 * Threads: any; no state. */
#include "provider/ssh/probe.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "base/str.h"

#define PROBE_FIELDS 4

const char *kp_probe_command(void)
{
    /* `|| true`: is-active exits 3 for an inactive unit and 4 for a missing one; both are
     * answers, not failures. LC_ALL=C keeps every tool's output in the format parsed here. */
    return "LC_ALL=C; export LC_ALL; nproc; "
           "sed -n 's/^MemTotal:[[:space:]]*\\([0-9][0-9]*\\).*/\\1/p' /proc/meminfo; "
           "uname -m; systemctl is-active kubelet 2>/dev/null || true";
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool machine_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        char c = *s;

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

static int fail(char **ret_msg, const char *why)
{
    kp_msg_set(ret_msg, "%s", why);
    return -KP_EPARSE;
}

int kp_probe_parse(const char *p, size_t n, struct kp_probe_result *ret, char **ret_msg)
{
    char f[PROBE_FIELDS][KP_PROBE_FIELD_MAX];
    struct kp_probe_result res;
    size_t nf = 0, i = 0;
    uint32_t cpus;
    uint64_t kb;

    if (n > KP_MAX_PROBE_OUTPUT) {
        kp_msg_set(ret_msg, "probe output is too long");
        return -KP_ELIMIT;
    }
    if (n && !p)
        return fail(ret_msg, "probe output missing");
    while (i < n) {
        size_t start, len;

        while (i < n && is_space(p[i]))
            i++;
        if (i == n)
            break;
        start = i;
        while (i < n && !is_space(p[i]))
            i++;
        len = i - start;
        if (nf == PROBE_FIELDS)
            return fail(ret_msg, "probe printed more than four fields");
        if (len >= KP_PROBE_FIELD_MAX)
            return fail(ret_msg, "probe printed an overlong field");
        if (memchr(p + start, '\0', len))
            return fail(ret_msg, "probe output holds a NUL byte");
        memcpy(f[nf], p + start, len);
        f[nf][len] = '\0';
        nf++;
    }
    if (nf < 3)
        return fail(ret_msg, "probe printed fewer than three fields (nproc, MemTotal, uname -m)");
    if (kp_safe_atou32(f[0], &cpus) < 0 || cpus == 0 || cpus > KP_PROBE_MAX_CPUS)
        return fail(ret_msg, "nproc did not print a CPU count");
    if (kp_safe_atou64(f[1], &kb) < 0 || kb == 0 || kb > KP_PROBE_MAX_MEM_KB)
        return fail(ret_msg, "MemTotal is not a size in kB");
    if (!machine_ok(f[2]))
        return fail(ret_msg, "uname -m printed an unexpected machine name");
    memset(&res, 0, sizeof(res));
    res.cpus = cpus;
    res.mem_bytes = kb * 1024;
    memcpy(res.machine, f[2], strlen(f[2]) + 1);
    res.kubelet_active = nf == 4 && strcmp(f[3], "active") == 0;
    *ret = res;
    return 0;
}

const char *kp_probe_arch(const char *machine)
{
    if (!strcmp(machine, "x86_64") || !strcmp(machine, "amd64"))
        return "amd64";
    if (!strcmp(machine, "aarch64") || !strcmp(machine, "arm64"))
        return "arm64";
    return machine;
}
