/* Must FAIL under the dev preset: it leaks one allocation and LeakSanitizer reports it. */
#include "base/alloc.h"

int main(void)
{
    char *p = kp_strdup("this allocation is never freed");

    return p ? 0 : 1;
}
