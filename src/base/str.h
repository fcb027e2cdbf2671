/* base/str.h: string helpers and strict number parsers.
 *
 * The parsers are pure functions over (ptr, len) with no locale, no whitespace skipping and no
 * partial results: they are the ones every other parser in the tree builds on, and they are
 * fuzzed (tests/fuzz/fuzz-number.c). Outputs are written only on success. Any thread. */
#ifndef KP_BASE_STR_H
#define KP_BASE_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

/* NULL-tolerant equality: two NULLs are equal. */
bool kp_streq(const char *a, const char *b);
/* s without the prefix when s starts with it, else NULL. */
const char *kp_startswith(const char *s, const char *prefix) KP_NONNULL(1, 2);
/* True when s ends with suffix. */
bool kp_endswith(const char *s, const char *suffix) KP_NONNULL(1, 2);
/* True when the n bytes at p equal the NUL-terminated s. */
bool kp_memeq_str(const char *p, size_t n, const char *s) KP_NONNULL(3);

/* Copies src into dst[size] with a terminator. 0, or -E2BIG when src did not fit (dst then
 * holds the truncated prefix, still terminated). size must be > 0. */
int kp_strscpy(char *dst, size_t size, const char *src) KP_NONNULL(1, 3) KP_WUR;

/* Concatenates a list of strings ended by (char *)NULL into a new string; NULL on -ENOMEM. */
char *kp_strjoin(const char *first, ...) KP_MALLOC KP_WUR KP_SENTINEL;

/* Replaces *dst with a copy of src (NULL allowed): 0 or -ENOMEM (then *dst is unchanged). */
int kp_strset(char **dst, const char *src) KP_WUR;

/* The length of the valid UTF-8 sequence at s (1 to 4; n > 0 bytes left), or 0 when s[0] does
 * not start one: overlong forms, surrogates and code points past U+10FFFF are invalid (RFC 3629).
 * NUL is a valid one-byte sequence. */
size_t kp_utf8_len(const unsigned char *s, size_t n) KP_NONNULL(1);
/* A copy of s in which every byte that does not start a valid UTF-8 sequence is replaced by
 * U+FFFD; valid text is copied unchanged. NULL on -ENOMEM. Release with kp_free. */
char *kp_utf8_scrub(const char *s) KP_NONNULL(1) KP_MALLOC KP_WUR;

/* Strict unsigned decimal: one or more digits, nothing else. -EINVAL for anything else (empty,
 * sign, space, trailing bytes), -ERANGE past the type's maximum. Leading zeros are accepted. */
int kp_parse_u64(const char *p, size_t n, uint64_t *ret) KP_NONNULL(3) KP_WUR;
int kp_parse_u32(const char *p, size_t n, uint32_t *ret) KP_NONNULL(3) KP_WUR;
/* Signed decimal with an optional leading '-' or '+'. -EINVAL or -ERANGE as above. */
int kp_parse_i64(const char *p, size_t n, int64_t *ret) KP_NONNULL(3) KP_WUR;
/* Unsigned hexadecimal digits (either case, no 0x prefix). */
int kp_parse_x64(const char *p, size_t n, uint64_t *ret) KP_NONNULL(3) KP_WUR;

/* The same over NUL-terminated strings (the names STYLE.md rule 7 points to instead of atoi). */
int kp_safe_atou32(const char *s, uint32_t *ret) KP_NONNULL(1, 2) KP_WUR;
int kp_safe_atou64(const char *s, uint64_t *ret) KP_NONNULL(1, 2) KP_WUR;
int kp_safe_atoi64(const char *s, int64_t *ret) KP_NONNULL(1, 2) KP_WUR;

/* A NULL-terminated vector of owned strings ("strv"). */
struct kp_strv {
    char **v; /* NULL-terminated; NULL when empty and never grown */
    size_t n; /* entries, excluding the terminator */
    size_t cap;
};
#define KP_STRV_INIT                                                                               \
    {                                                                                              \
        .v = NULL, .n = 0, .cap = 0                                                                \
    }
/* Appends a copy of s. 0 or -ENOMEM. */
int kp_strv_push(struct kp_strv *sv, const char *s) KP_NONNULL(1, 2) KP_WUR;
/* Appends s and takes ownership of it (freed even on failure). 0 or -ENOMEM. */
int kp_strv_consume(struct kp_strv *sv, char *s) KP_NONNULL(1, 2) KP_WUR;
/* Sorts bytewise (strcmp). */
void kp_strv_sort(struct kp_strv *sv);
/* True when an entry equals s. */
bool kp_strv_contains(const struct kp_strv *sv, const char *s);
/* Frees every entry and the vector; the strv is empty afterwards. */
void kp_strv_done(struct kp_strv *sv);

/* Binary search in base[0..n), elements of size bytes sorted by strcmp on the const char *
 * member at byte offset key_off (offsetof): true with its index in *ret_pos when key is there,
 * else false with the index it would be inserted at. */
bool kp_sorted_find(const void *base, size_t n, size_t size, size_t key_off, const char *key,
                    size_t *ret_pos) KP_NONNULL(5, 6);

#endif
