/* Must compile: the control for uses-strcpy.c, with the same flags and no banned call. */
#include <stdio.h>
#include <string.h>

void copy(char *dst, size_t size, const char *src);

void copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src);
}
