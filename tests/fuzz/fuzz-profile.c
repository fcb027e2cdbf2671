/* DESIGN: fuzz driver for provider/ssh/profile.c.
 *
 * The input is split at the first '\n': the head is parsed as a timeout duration, and the whole
 * input is validated as each of the profile's scripts in turn (the others held valid), and its
 * head as the version and as each timeout. Checks: a duration either parses to a value whose
 * text the grammar accepts or fails without touching the output; validation answers 0 or
 * -EINVAL, and -EINVAL always comes with a message; a leave script the validator accepts never
 * holds KPSSH_VAR_ or KPSSH_SECRET_. Any broken promise calls abort(). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "provider/ssh/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_validate(const struct kp_profile_spec *p)
{
    char *err = NULL;
    int r = kp_profile_validate(p, &err);

    if (r != 0 && r != -EINVAL)
        abort();
    if ((r == 0) != (err == NULL))
        abort();
    kp_free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char ok[] = "exit 0\n";
    const char *s = (const char *)data;
    const char *nl = memchr(s, '\n', size);
    size_t head = nl ? (size_t)(nl - s) : size;
    struct kp_profile_spec p;
    uint32_t secs = 0xdeadbeef;
    char *version;
    size_t i;
    int r;

    r = kp_profile_parse_duration(s, head, &secs);
    if (r == 0) {
        /* Accepted text is digits and units only, ending in a unit. */
        for (i = 0; i < head; i++) {
            if (!((s[i] >= '0' && s[i] <= '9') || s[i] == 's' || s[i] == 'm' || s[i] == 'h'))
                abort();
        }
        if (head == 0 || s[head - 1] < 'h')
            abort();
    } else if ((r != -EINVAL && r != -ERANGE) || secs != 0xdeadbeef) {
        abort();
    }

    for (i = 0; i < KP_PROFILE_PHASES; i++) {
        memset(&p, 0, sizeof(p));
        p.name = "fuzz";
        p.scripts[KP_PROFILE_INSTALL] = (struct kp_profile_text){ok, sizeof(ok) - 1};
        p.scripts[KP_PROFILE_JOIN] = (struct kp_profile_text){ok, sizeof(ok) - 1};
        p.scripts[KP_PROFILE_LEAVE] = (struct kp_profile_text){ok, sizeof(ok) - 1};
        p.scripts[i] = (struct kp_profile_text){s, size};
        check_validate(&p);
        if (i == KP_PROFILE_LEAVE && kp_profile_validate(&p, NULL) == 0 &&
            (memmem(s, size, "KPSSH_VAR_", 10) || memmem(s, size, "KPSSH_SECRET_", 13)))
            abort();
    }

    memset(&p, 0, sizeof(p));
    p.name = "fuzz";
    for (i = 0; i < 3; i++)
        p.scripts[i] = (struct kp_profile_text){ok, sizeof(ok) - 1};
    for (i = 0; i < KP_PROFILE_UNINSTALL; i++) {
        p.timeouts[i] = (struct kp_profile_text){s, head};
        check_validate(&p);
        p.timeouts[i] = (struct kp_profile_text){NULL, 0};
    }
    version = kp_malloc(head + 1);
    if (!version)
        return 0;
    memcpy(version, s, head);
    version[head] = '\0';
    p.version = version;
    check_validate(&p);
    kp_free(version);
    return 0;
}
