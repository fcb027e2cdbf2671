/* provider/ssh/profile.h: SSHJoinProfile validation and the facts derived from a profile.
 *
 * An SSHJoinProfile carries plain bash scripts (not templates: every per-node value arrives as
 * KPSSH_* environment, so a script is signable and testable by hand) for the
 * phases install, join and leave (required) and uninstall (optional, never run by the
 * controller), a version that names the install cache entry, per-phase timeouts and optional
 * SSHSIG signatures for Verified hosts. The CRD's OpenAPI schema already refuses most malformed
 * objects at write time; this module re-checks everything the controller relies on (an object
 * may predate a schema change, and tests build profiles by hand) and adds the checks a schema
 * cannot express, chiefly the leave contract: leave runs without a node class in hand, so a leave
 * script that mentions KPSSH_VAR_ or KPSSH_SECRET_ makes the profile invalid, and every
 * SSHNodeClass using it Ready=False with reason KP_PROFILE_REASON_INVALID.
 *
 * Everything here is pure: no I/O, no globals, any thread. */
#ifndef KP_PROVIDER_SSH_PROFILE_H
#define KP_PROVIDER_SSH_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

/* Condition reason for an SSHNodeClass whose profile fails kp_profile_validate(). */
#define KP_PROFILE_REASON_INVALID "ProfileInvalid"

/* Per-script ceiling (the CRD's maxLength), and per-signature ceiling. */
#define KP_MAX_PROFILE_SCRIPT (256u * 1024u)
#define KP_MAX_PROFILE_SIGNATURE (16u * 1024u)
/* version: ^[A-Za-z0-9._-]{1,63}$ */
#define KP_MAX_PROFILE_VERSION 63u

/* Default phase timeouts, in seconds. */
#define KP_PROFILE_TIMEOUT_INSTALL_DEFAULT (10u * 60u)
#define KP_PROFILE_TIMEOUT_JOIN_DEFAULT (5u * 60u)
#define KP_PROFILE_TIMEOUT_LEAVE_DEFAULT (3u * 60u)

enum kp_profile_phase {
    KP_PROFILE_INSTALL = 0,
    KP_PROFILE_JOIN,
    KP_PROFILE_LEAVE,
    KP_PROFILE_UNINSTALL,
    KP_PROFILE_PHASES,
};

/* A byte string from the object; data NULL means the field is absent. Scripts are bytes (they
 * may hold anything a JSON string can, NUL included), hence the explicit length. */
struct kp_profile_text {
    const char *data;
    size_t len;
};

/* The decoded spec of one SSHJoinProfile, borrowed from the caller (the CRD projection, or a
 * test). Timeouts exist for install, join and leave only. */
struct kp_profile_spec {
    const char *name;                                      /* metadata.name */
    const char *version;                                   /* NULL or "" means "1" */
    struct kp_profile_text scripts[KP_PROFILE_PHASES];     /* spec.scripts.<phase> */
    struct kp_profile_text timeouts[KP_PROFILE_UNINSTALL]; /* spec.timeouts.<phase> */
    struct kp_profile_text signatures[KP_PROFILE_PHASES];  /* spec.signatures.<phase> */
};

/* "install", "join", "leave", "uninstall"; NULL for anything else. */
const char *kp_profile_phase_name(enum kp_profile_phase phase);

/* Checks the whole spec. 0, -ENOMEM, or -EINVAL when the profile is invalid; then *ret_msg
 * (optional) receives a message for the ProfileInvalid condition, owned by the caller (kp_free),
 * naming the field, and for script problems the line and column, and saying what to do. Checks:
 * install, join and leave present and non-empty; every script at most KP_MAX_PROFILE_SCRIPT
 * bytes and free of NUL bytes; no script written as a Go template of the reference
 * ({{ .Vars... }}, {{ .NodeName }}, ...); the leave script mentions neither KPSSH_VAR_ nor
 * KPSSH_SECRET_; version matches ^[A-Za-z0-9._-]{1,63}$; each timeout matches
 * ^([0-9]+(s|m|h))+$ without overflow; each signature at most KP_MAX_PROFILE_SIGNATURE bytes.
 * The first problem found is reported. */
int kp_profile_validate(const struct kp_profile_spec *p, char **ret_msg) KP_NONNULL(1) KP_WUR;

/* Parses a duration of the profile timeout grammar ^([0-9]+(s|m|h))+$ from (s, n), e.g. "90s",
 * "10m", "1h30m". 0 with *ret_seconds set, -EINVAL for text outside the grammar, -ERANGE when the
 * sum does not fit in 32 bits of seconds. Pure over (ptr, len); fuzzed (fuzz-profile). */
int kp_profile_parse_duration(const char *s, size_t n, uint32_t *ret_seconds) KP_NONNULL(3) KP_WUR;

/* The timeout of phase (install, join or leave) in seconds: the profile's when set and non-zero,
 * else the default. Uninstall uses leave's. 0 or -EINVAL (unparsable; validate first). */
int kp_profile_timeout(const struct kp_profile_spec *p, enum kp_profile_phase phase,
                       uint32_t *ret_seconds) KP_NONNULL(1, 3) KP_WUR;

/* --- the cached SSHJoinProfile (provider/ssh/obj-kpssh.h) --------------------------------------------
 * The profile checks live here, not in k8s/, because this module owns the contract and k8s/ may
 * not include provider/ (STYLE.md section 2); the projection is adapted at this boundary. */
struct kp_sshjoinprofile_view;
struct kp_buf;

/* Fills *ret with pointers borrowed from v (valid while the caller holds its entry reference).
 * No allocation; cannot fail. */
void kp_profile_spec_from_view(const struct kp_sshjoinprofile_view *v, struct kp_profile_spec *ret)
    KP_NONNULL(1, 2);

/* kp_profile_validate() over a projection plus the CRD's remaining syntax rules (signatures are
 * SSHSIG armour, no uninstall signature without an uninstall script, timeouts of at most 32
 * characters), reported like the CRD validators of api/obj-karpenter.h: appends one line
 * "<field>: <problem>" per problem to msg (NULL: only count; kp_profile_validate contributes its
 * first problem only) and returns the number of problems, -ENOMEM, or -KP_ELIMIT when msg's
 * ceiling is crossed. */
int kp_profile_validate_view(const struct kp_sshjoinprofile_view *v, struct kp_buf *msg)
    KP_NONNULL(1) KP_WUR;

/* The install-cache marker "<name>@<version>" (version "1" when unset), newly allocated.
 * 0, -ENOMEM, or -EINVAL when name is unset. */
int kp_profile_marker(const struct kp_profile_spec *p, char **ret_marker) KP_NONNULL(1, 2) KP_WUR;

#endif
