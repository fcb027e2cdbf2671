/* DESIGN: fuzz driver for cmd/kpssh/manifest.c (what `kpssh simulate -f` reads).
 *
 * Walks the input as a manifest stream and checks that every object handed out is JSON the
 * decoder takes back (the converter's whole promise), then projects it as a Pod, the kind with
 * the most fields, so the text the converter writes also reaches a projection. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/err.h"
#include "json/json.h"
#include "k8s/store.h"
#include "api/obj-pod.h"
#include "api/obj.h"
#include "cmd/kpssh/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_object(const struct kp_manifest_obj *o, void *ctx, char **ret_msg)
{
    struct kp_entry *e = NULL;
    json_t *v = NULL;
    int r;

    (void)ctx;
    (void)ret_msg;
    r = kp_json_parse(o->json, o->len, KP_MAX_OBJECT_BYTES, 0, &v, NULL);
    if (r == -KP_EPARSE) /* the converter wrote text that is not JSON */
        abort();
    kp_json_unref(v);
    if (kp_pod_decode(o->json, o->len, &e) == 0)
        kp_entry_unref(e);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *msg = NULL;
    int r;

    if (size > (1u << 20))
        return 0;
    /* Refusing the input is a fine outcome; only what the sanitizers see counts. */
    r = kp_manifest_each((const char *)data, size, "fuzz", on_object, NULL, &msg);
    (void)r;
    kp_free(msg);
    return 0;
}
