/* cmd/shim/envelope.h: the envelope the controller streams to kpssh-shim, format version 1.
 *
 *   kpssh-envelope: 1
 *   phase: <probe|install|join|leave|uninstall>
 *   params-b64: <standard base64 of "NAME=VALUE\n" lines>      (optional)
 *   sig-b64: <standard base64 of the armoured SSHSIG>           (not for probe)
 *   script-b64: <standard base64 of the exact script bytes>     (not for probe)
 *
 * One "field: value" per line, in any order, up to end of input; the last occurrence of a field
 * wins; blank and unknown lines are ignored (all as the reference shim does). Bytes are taken as
 * they are: a CR before the LF is part of the value, so a CRLF envelope is malformed. A NUL
 * anywhere makes the envelope malformed. Base64 values are standard, padded, on one line.
 *
 * Both functions are pure (no I/O, no globals) and allocate only bounded buffers, so
 * tests/fuzz/fuzz-envelope.c drives them; they return enum kp_shim_exit verdicts (shim.h).
 * Single-threaded like the shim, but nothing prevents any thread calling them on its own data. */
#ifndef KP_CMD_SHIM_ENVELOPE_H
#define KP_CMD_SHIM_ENVELOPE_H

#include <stddef.h>

#include "base/buf.h"
#include "base/macro.h"
#include "cmd/shim/shim.h"

enum kp_shim_phase {
    KP_SHIM_PHASE_PROBE,
    KP_SHIM_PHASE_INSTALL,
    KP_SHIM_PHASE_JOIN,
    KP_SHIM_PHASE_LEAVE,
    KP_SHIM_PHASE_UNINSTALL,
};

struct kp_envelope {
    enum kp_shim_phase phase;
    struct kp_buf script;   /* decoded; empty for probe; ceiling KP_SHIM_MAX_SCRIPT */
    struct kp_buf sig;      /* decoded; empty for probe; ceiling KP_SHIM_MAX_SIG */
    const char *params_b64; /* into the parsed input (which must outlive this); NULL: none */
    size_t params_b64_len;
};

/* Parameters decoded and checked: env[0..n) are "KPSSH_NAME=value" strings pointing into text,
 * env[n] is NULL. Values may be join secrets: kp_shim_params_done() wipes them. */
struct kp_shim_params {
    struct kp_buf text;
    const char **env;
    size_t n;
};

/* The name of a phase as it appears on the wire. */
const char *kp_shim_phase_name(enum kp_shim_phase phase);

void kp_envelope_init(struct kp_envelope *e) KP_NONNULL(1);
void kp_envelope_done(struct kp_envelope *e);

/* Parses the n bytes at p (p may be NULL when n is 0) into *e (initialised by the caller) and
 * decodes script and signature. Checks, in the reference shim's order: size; version line
 * present and exactly "1"; phase present (4 when not); phase probe: KP_SHIM_OK with nothing
 * decoded; phase one of install, join, leave, uninstall (else 5); sig-b64 and script-b64
 * present and decodable within their ceilings (else 4). Parameters are not looked at here: the
 * shim checks them after the signature (kp_envelope_params). KP_SHIM_INTERNAL on -ENOMEM.
 * Not KP_SHIM_OK: the reason in *ret_msg (base/err.h); *e must still be released. */
enum kp_shim_exit kp_envelope_parse(const char *p, size_t n, struct kp_envelope *e,
                                    char **ret_msg) KP_WUR KP_NONNULL(3);

/* Decodes e->params_b64 into *ret (initialised by the caller with kp_shim_params_init) and
 * checks each non-empty line: it holds '=' (else 3), its name matches ^KPSSH_[A-Za-z0-9_]+$
 * (else 3), its value holds no NUL (else 3), and no name appears twice (else 3: the controller
 * writes each name once, sorted, and which copy would win is not worth guessing). Bad base64
 * or more than KP_SHIM_MAX_PARAMS decoded bytes: 4. No params-b64 line: KP_SHIM_OK with n 0.
 * Not KP_SHIM_OK: *ret_msg as above; no parameter value is ever quoted in it. */
enum kp_shim_exit kp_envelope_params(const struct kp_envelope *e, struct kp_shim_params *ret,
                                     char **ret_msg) KP_WUR KP_NONNULL(1, 2);

void kp_shim_params_init(struct kp_shim_params *p) KP_NONNULL(1);
void kp_shim_params_done(struct kp_shim_params *p);

#endif
