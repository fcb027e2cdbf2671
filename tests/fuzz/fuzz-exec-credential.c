/* DESIGN: fuzz driver for kp_exec_credential_parse (a plugin's stdout). */
#include <stddef.h>
#include <stdint.h>

#include "k8s/exec-credential.h"
#include "yaml/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kp_exec_status *st = NULL;
    struct kp_yaml_error err;

    if (kp_exec_credential_parse((const char *)data, size, "client.authentication.k8s.io/v1", &st,
                                 &err) == 0)
        kp_exec_status_free(st);
    return 0;
}
