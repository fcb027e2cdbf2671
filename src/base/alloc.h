/* base/alloc.h: the one allocation wrapper.
 *
 * All memory of ours (and, once the json/ and k8s/ layers hand these functions to jansson and
 * libcurl, theirs) is allocated here, so tests can make the n-th allocation fail and count what
 * is still live. Outside tests the wrappers cost one relaxed atomic increment per call.
 * Every function here may be called from any thread. */
#ifndef KP_BASE_ALLOC_H
#define KP_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

/* Like malloc/calloc/realloc/free; NULL on failure (errno ENOMEM). kp_malloc(0) returns a
 * unique pointer. kp_calloc checks nmemb * size for overflow. kp_free(NULL) is a no-op. */
void *kp_malloc(size_t size) KP_MALLOC KP_WUR;
void *kp_calloc(size_t nmemb, size_t size) KP_MALLOC KP_WUR;
void *kp_realloc(void *ptr, size_t size) KP_WUR;
/* kp_reallocarray: realloc with an overflow check on nmemb * size. */
void *kp_reallocarray(void *ptr, size_t nmemb, size_t size) KP_WUR;
/* kp_grow_array: room for one more element in the array v of *cap elements of size bytes, n of
 * them in use. While n < *cap, returns v. Otherwise doubles the array (to first elements when
 * *cap is 0) and returns the new one, which the caller stores at once (v is gone), and updates
 * *cap. NULL on allocation failure or overflow: v and *cap unchanged. */
void *kp_grow_array(void *v, size_t *cap, size_t n, size_t size, size_t first) KP_WUR;
void kp_free(void *ptr);

/* NUL-terminated copies; NULL on allocation failure. kp_strndup copies at most n bytes. */
char *kp_strdup(const char *s) KP_MALLOC KP_WUR KP_NONNULL(1);
char *kp_strndup(const char *s, size_t n) KP_MALLOC KP_WUR KP_NONNULL(1);
/* A copy of n bytes of p (NULL only on allocation failure). */
void *kp_memdup(const void *p, size_t n) KP_MALLOC KP_WUR;

/* Overwrites n bytes at p with zeros in a way the compiler cannot remove (for secrets). */
void kp_wipe(void *p, size_t n);

/* Test hooks. kp_alloc_fail_at(n) makes the n-th allocation from now fail (n = 1 is the next
 * one) and every later one succeed again; 0 disarms. Returns nothing; any thread, but tests set
 * it from the thread under test. */
void kp_alloc_fail_at(uint64_t n);
/* True when the armed failure has fired since the last kp_alloc_fail_at(). */
int kp_alloc_failed(void);
/* Allocations made since start-up (counting failed ones) and allocations currently live. */
uint64_t kp_alloc_calls(void);
int64_t kp_alloc_live(void);

#endif
