/* Fuzz driver for base/base64.h: whatever decodes must re-encode to the same characters (the
 * decoder is strict, so an input has one decoding), padded or not as the input was; and every
 * byte string must survive encode then decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base64.h"
#include "base/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kp_buf dec = KP_BUF_INIT(1u << 20), enc = KP_BUF_INIT(2u << 20);
    bool padded = size > 0 && data[size - 1] == '=';

    if (kp_base64_decode((const char *)data, size, 0, &dec) == 0) {
        if (kp_base64_encode(dec.data ? dec.data : "", dec.len,
                             padded || size % 4 == 0 ? 0 : KP_BASE64_NOPAD, &enc) != 0 ||
            enc.len != size || (size && memcmp(enc.data, data, size) != 0))
            abort();
    }
    kp_buf_done(&dec);
    kp_buf_done(&enc);
    if (kp_base64_encode(data, size, 0, &enc) != 0 ||
        kp_base64_decode(enc.data ? enc.data : "", enc.len, 0, &dec) != 0 || dec.len != size ||
        (size && memcmp(dec.data, data, size) != 0))
        abort();
    kp_buf_done(&dec);
    kp_buf_done(&enc);
    return 0;
}
