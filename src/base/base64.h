/* base/base64.h: RFC 4648 base64 with the standard alphabet.
 *
 * Kubernetes carries PEM data base64-encoded (certificate-authority-data, Secret data), OpenSSH
 * prints key fingerprints as unpadded base64, and join profiles receive the cluster CA as
 * base64. One strict implementation serves all of them; the decoder is fuzzed
 * (tests/fuzz/fuzz-base64.c). Pure functions, any thread. */
#ifndef KP_BASE_BASE64_H
#define KP_BASE_BASE64_H

#include <stddef.h>

#include "base/macro.h"

struct kp_buf;

enum kp_base64_flags {
    KP_BASE64_NOPAD = 1 << 0,         /* encode: no '=' padding (OpenSSH fingerprints) */
    KP_BASE64_SKIP_NEWLINES = 1 << 1, /* decode: ignore CR and LF anywhere, as Go's decoder */
};

/* Bytes kp_base64_encode appends for n input bytes (SIZE_MAX on overflow). */
size_t kp_base64_encoded_len(size_t n, enum kp_base64_flags flags);

/* Writes the encoding of n bytes at p and a terminator into out[size], allocating nothing.
 * 0 or -E2BIG (size < kp_base64_encoded_len() + 1; out untouched). */
int kp_base64_encode_to(const void *p, size_t n, enum kp_base64_flags flags, char *out,
                        size_t size) KP_WUR;

/* Appends the encoding of n bytes at p to out. 0, -ENOMEM or -KP_ELIMIT (out released). */
int kp_base64_encode(const void *p, size_t n, enum kp_base64_flags flags,
                     struct kp_buf *out) KP_WUR;

/* Appends the decoded bytes of the n characters at p to out. Strict: only the standard
 * alphabet; '=' padding may be absent, but when present it must complete the last group and
 * nothing may follow it; the unused low bits of a partial group must be zero (so every input
 * has exactly one decoding). 0, -KP_EPARSE, -ENOMEM or -KP_ELIMIT. On error out may hold a
 * partial prefix of the decoding; callers decoding secrets wipe it (kp_buf_wipe). */
int kp_base64_decode(const char *p, size_t n, enum kp_base64_flags flags,
                     struct kp_buf *out) KP_WUR;

#endif
