/* base/sha256.h: SHA-256 (FIPS 180-4) over bytes in memory.
 *
 * The shim logs the digest of every script it is asked to run, so an operator can match a
 * host's log line to a signed profile. The shim links base alone and must link statically
 * (STYLE.md rule 11), which rules out libcrypto; glibc exports no SHA-256. Hence this small
 * hand-written implementation, checked against the FIPS 180-4 example vectors in
 * tests/unit/test-sha256.c. It is not used for anything a signature depends on: the signature
 * check is ssh-keygen's. Pure functions, any thread; a context belongs to one thread. */
#ifndef KP_BASE_SHA256_H
#define KP_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

#define KP_SHA256_LEN 32
/* Lowercase hex of a digest plus its terminator. */
#define KP_SHA256_HEX_SIZE (2 * KP_SHA256_LEN + 1)

struct kp_sha256 {
    uint32_t h[8];
    uint64_t bytes;    /* message length so far */
    uint8_t block[64]; /* a partial block */
    size_t fill;       /* bytes in block */
};

/* Starts a digest in caller memory. */
void kp_sha256_init(struct kp_sha256 *c) KP_NONNULL(1);
/* Adds n bytes (p may be NULL when n is 0). */
void kp_sha256_update(struct kp_sha256 *c, const void *p, size_t n) KP_NONNULL(1);
/* Writes the digest; c must be initialised again before reuse. */
void kp_sha256_final(struct kp_sha256 *c, uint8_t out[KP_SHA256_LEN]) KP_NONNULL(1, 2);
/* The digest of n bytes at p as lowercase hex into hex[KP_SHA256_HEX_SIZE]. */
void kp_sha256_hex(const void *p, size_t n, char hex[KP_SHA256_HEX_SIZE]) KP_NONNULL(3);

#endif
