/* DESIGN: fuzz driver for k8s/kubeconfig.c.
 *
 * The input is split at the first "\n#---#\n" into two kubeconfig documents that are merged in
 * order (so the merge path is fuzzed too), then every defined context and the current one are
 * resolved with file reading refused. No file I/O happens for the documents themselves. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "k8s/kubeconfig.h"
#include "yaml/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void resolve(const struct kp_kubeconfig *kc, const char *ctx)
{
    struct kp_kubeconfig_rest *rest = NULL;
    struct kp_exec_config *copy = NULL;
    struct kp_yaml_error err;

    if (kp_kubeconfig_resolve(kc, ctx, KP_KUBECONFIG_NO_FILES, &rest, &err) == 0 && rest->exec &&
        kp_exec_config_dup(rest->exec, &copy) == 0)
        kp_exec_config_free(copy);
    kp_kubeconfig_rest_free(rest);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sep[] = "\n#---#\n";
    const char *p = (const char *)data, *second = NULL;
    size_t first_len = size, second_len = 0;
    struct kp_kubeconfig *kc = NULL;
    struct kp_yaml_error err;

    second = memmem(p, size, sep, sizeof(sep) - 1);
    if (second) {
        first_len = (size_t)(second - p);
        second += sizeof(sep) - 1;
        second_len = size - first_len - (sizeof(sep) - 1);
    }
    if (kp_kubeconfig_new(&kc) < 0)
        return 0;
    (void)!kp_kubeconfig_add(kc, p, first_len, "/fuzz/a", &err);
    if (second)
        (void)!kp_kubeconfig_add(kc, second, second_len, "/fuzz/b", &err);
    resolve(kc, NULL);
    resolve(kc, "dev");
    resolve(kc, "prod");
    resolve(kc, "c");
    kp_kubeconfig_free(kc);
    return 0;
}
