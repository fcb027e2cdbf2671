/* cmd/kpssh/opts.c: the option matching every verb's parser shares (verbs.h). */
#include <stdio.h>
#include <string.h>

#include "cmd/kpssh/verbs.h"

const char *kp_cli_opt_value(int argc, char **argv, int *i, const char *name, size_t len,
                             const char *prog, const char *verb)
{
    const char *a = argv[*i];

    if (a[len] == '=')
        return a + len + 1;
    if (a[len] != '\0' && a[1] != '-') /* -ojson */
        return a + len;
    if (*i + 1 < argc)
        return argv[++*i];
    fprintf(stderr, "%s: %soption %s needs a value\n", prog, verb, name);
    return NULL;
}

size_t kp_cli_opt_is(const char *a, const char *s, const char *l)
{
    size_t n = strlen(l);

    if (s && strncmp(a, s, 2) == 0)
        return 2;
    if (strncmp(a, l, n) == 0 && (a[n] == '\0' || a[n] == '='))
        return n;
    return 0;
}
