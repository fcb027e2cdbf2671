/* Must NOT compile: base/banned.h turns strcpy into an undeclared identifier. */
#include <string.h>

void copy(char *dst, const char *src);

void copy(char *dst, const char *src)
{
    strcpy(dst, src);
}
