/* base/banned.h: unsafe libc functions become compile errors (STYLE.md rule 7).
 *
 * The build force-includes this file into every translation unit of ours (-include), so it first
 * pulls in the system headers that declare the banned names: their declarations are parsed
 * before the macros exist, and later includes of the same headers are no-ops. A call such as
 * strcpy(a, b) then expands to an undeclared identifier and the compiler stops with a message
 * that names the function. The replacements: kp_buf, checked snprintf, kp_safe_atou32/64,
 * gmtime_r, mkostemp, kp_spawn. */
#ifndef KP_BASE_BANNED_H
#define KP_BASE_BANNED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KP_BANNED(func) sorry_##func##_is_banned_in_kpssh

#undef strcpy
#define strcpy(...) KP_BANNED(strcpy)
#undef strcat
#define strcat(...) KP_BANNED(strcat)
#undef strncpy
#define strncpy(...) KP_BANNED(strncpy)
#undef strncat
#define strncat(...) KP_BANNED(strncat)
#undef strtok
#define strtok(...) KP_BANNED(strtok)
#undef strtok_r
#define strtok_r(...) KP_BANNED(strtok_r)
#undef sprintf
#define sprintf(...) KP_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) KP_BANNED(vsprintf)
#undef atoi
#define atoi(...) KP_BANNED(atoi)
#undef atol
#define atol(...) KP_BANNED(atol)
#undef atoll
#define atoll(...) KP_BANNED(atoll)
#undef gmtime
#define gmtime(...) KP_BANNED(gmtime)
#undef localtime
#define localtime(...) KP_BANNED(localtime)
#undef ctime
#define ctime(...) KP_BANNED(ctime)
#undef asctime
#define asctime(...) KP_BANNED(asctime)
#undef mktemp
#define mktemp(...) KP_BANNED(mktemp)
#undef system
#define system(...) KP_BANNED(system)
#undef popen
#define popen(...) KP_BANNED(popen)

#endif
