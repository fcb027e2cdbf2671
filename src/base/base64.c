/* DESIGN: base64 (see base64.h). Table-driven in both directions; the decoder accumulates six
 * bits per character and emits a byte whenever eight are available, then checks that whatever
 * is left over is a legal partial group. */
#include "base/base64.h"

#include <errno.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

static const char kp_b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t kp_base64_encoded_len(size_t n, enum kp_base64_flags flags)
{
    size_t groups = n / 3 + (n % 3 != 0), len;

    if (kp_mul_overflow(groups, (size_t)4, &len))
        return SIZE_MAX;
    if ((flags & KP_BASE64_NOPAD) && n % 3 != 0)
        len -= 3 - n % 3;
    return len;
}

int kp_base64_encode_to(const void *p, size_t n, enum kp_base64_flags flags, char *out, size_t size)
{
    const unsigned char *s = p;
    size_t len = kp_base64_encoded_len(n, flags), o = 0;

    if (len == SIZE_MAX || len >= size)
        return -E2BIG;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        size_t left = n - i;

        if (left > 1)
            v |= (uint32_t)s[i + 1] << 8;
        if (left > 2)
            v |= s[i + 2];
        out[o++] = kp_b64_alphabet[(v >> 18) & 63];
        out[o++] = kp_b64_alphabet[(v >> 12) & 63];
        if (left > 1)
            out[o++] = kp_b64_alphabet[(v >> 6) & 63];
        else if (!(flags & KP_BASE64_NOPAD))
            out[o++] = '=';
        if (left > 2)
            out[o++] = kp_b64_alphabet[v & 63];
        else if (!(flags & KP_BASE64_NOPAD))
            out[o++] = '=';
    }
    out[o] = '\0';
    return 0;
}

int kp_base64_encode(const void *p, size_t n, enum kp_base64_flags flags, struct kp_buf *out)
{
    size_t len = kp_base64_encoded_len(n, flags);
    int r;

    if (len == SIZE_MAX) {
        kp_buf_done(out);
        return -KP_ELIMIT;
    }
    /* The buffer keeps room for a terminator beyond len, which encode_to writes. */
    r = kp_buf_reserve(out, len);
    if (r < 0)
        return r;
    r = kp_base64_encode_to(p, n, flags, out->data + out->len, out->cap - out->len);
    if (r < 0)
        return r;
    out->len += len;
    return 0;
}

static int kp_b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int kp_base64_decode(const char *p, size_t n, enum kp_base64_flags flags, struct kp_buf *out)
{
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t chars = 0, pad = 0;
    int r;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        int v;

        if ((flags & KP_BASE64_SKIP_NEWLINES) && (c == '\r' || c == '\n'))
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        v = kp_b64_value(c);
        if (v < 0 || pad > 0)
            return -KP_EPARSE;
        chars++;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            char byte;

            bits -= 8;
            byte = (char)((acc >> bits) & 0xff);
            r = kp_buf_putc(out, byte);
            if (r < 0)
                return r;
        }
        acc &= (1u << bits) - 1;
    }
    /* A lone character (6 bits) cannot encode a byte; leftover bits must be zero; padding,
     * when present, must make the input a whole number of 4-character groups. */
    if (chars % 4 == 1 || acc != 0)
        return -KP_EPARSE;
    if (pad > 0 && ((chars + pad) % 4 != 0 || pad > 2))
        return -KP_EPARSE;
    return 0;
}
