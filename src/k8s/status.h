/* k8s/status.h: Kubernetes Status bodies as typed errors.
 *
 * The API server explains every failed request (and every watch ERROR event) with a metav1
 * Status object: code, reason, message, and details holding the object's name/kind, causes
 * (field errors of an Invalid answer, the DisruptionBudget refusal of an eviction) and
 * retryAfterSeconds. kp_status_decode() turns such a body into a struct kp_error, and
 * kp_status_errno() maps it to the one error code callers switch on (STYLE.md rule 4):
 *
 *   NotFound -> -ENOENT          AlreadyExists -> -EEXIST     Conflict -> -KP_ECONFLICT
 *   Gone, Expired (410) -> -KP_EEXPIRED                       Invalid (422) -> -KP_EINVALID
 *   Forbidden -> -KP_EFORBIDDEN  Unauthorized -> -KP_EUNAUTHORIZED
 *   TooManyRequests (429), ServiceUnavailable (503), ServerTimeout -> -EAGAIN + retry_after_sec
 *   BadRequest -> -EINVAL  MethodNotAllowed -> -EOPNOTSUPP  RequestEntityTooLarge -> -E2BIG
 *   UnsupportedMediaType, NotAcceptable -> -EPROTO  Timeout (504) -> -ETIMEDOUT
 *   anything else >= 400 -> -KP_ESERVER
 *
 * The reason decides when present (a 409 is AlreadyExists or Conflict by reason); the HTTP code
 * decides otherwise. Bodies that are not a Status (a proxy's HTML page, plain text) still give a
 * kp_error with the HTTP code, the reason that code implies and a printable excerpt as message.
 *
 * Everything here is pure (no I/O, no globals) and fuzzed (tests/fuzz/fuzz-status.c). A struct
 * kp_error is owned by one thread. */
#ifndef KP_K8S_STATUS_H
#define KP_K8S_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

typedef struct json_t json_t;

/* A Status body larger than this is not decoded (only its excerpt is kept). */
#define KP_MAX_STATUS_BODY (1u << 20)
/* At most this many causes are kept; the rest are counted in causes_dropped. */
#define KP_MAX_STATUS_CAUSES 64
/* Length of the excerpt kept from a body that is not a Status, and the cap of every string. */
#define KP_STATUS_EXCERPT 256
#define KP_MAX_STATUS_STRING ((size_t)16 * 1024)

struct kp_error_cause {
    char *type;    /* "FieldValueInvalid", "DisruptionBudget", ...; NULL when absent */
    char *field;   /* "spec.replicas", ...; NULL when absent */
    char *message; /* NULL when absent */
};

/* The server's account of a failure (or, for failures that never reached the server, the
 * client's: code 0 and a message). All strings are owned; NULL when absent. */
struct kp_error {
    int errnum;          /* the mapped negative error, 0 when unset */
    int code;            /* HTTP status code or Status.code; 0 for client-side errors */
    char *reason;        /* Status.reason, e.g. "Conflict" */
    char *message;       /* Status.message, or an excerpt, or the client's text */
    char *details_name;  /* details.name */
    char *details_group; /* details.group */
    char *details_kind;  /* details.kind */
    char *details_uid;   /* details.uid */
    struct kp_error_cause *causes;
    size_t n_causes;
    size_t causes_dropped;    /* causes past KP_MAX_STATUS_CAUSES */
    uint64_t retry_after_sec; /* Retry-After header or details.retryAfterSeconds; 0: none */
    bool is_status;           /* the body was a Status object */
};

#define KP_ERROR_INIT                                                                              \
    {                                                                                              \
        .errnum = 0, .causes = NULL                                                                \
    }

void kp_error_init(struct kp_error *e);
/* Releases the contents and leaves e empty (reusable). NULL-safe. */
void kp_error_done(struct kp_error *e);

/* Replaces e's contents with a client-side error: errnum (negative), code 0, message copied
 * (NULL allowed). 0 or -ENOMEM (e then holds errnum and no message). */
int kp_error_set_client(struct kp_error *e, int errnum, const char *message) KP_WUR;

/* Decodes the response of a failed request: http_status as received, the body bytes, and the
 * Retry-After header in seconds (0: none; it wins over details.retryAfterSeconds). On success *e
 * (emptied first) holds the decoded error, e->errnum set by kp_status_errno(). 0 or -ENOMEM
 * (e then empty); malformed bodies are not an error (see the header comment). */
int kp_status_decode(const char *p, size_t n, int http_status, uint64_t retry_after_header,
                     struct kp_error *e) KP_WUR;

/* The same from a decoded Status object (a watch ERROR event's object). http_status 0: take
 * the code from the object. 0 or -ENOMEM. */
int kp_status_from_json(const json_t *status, int http_status, struct kp_error *e) KP_WUR;

/* The negative error e maps to (table above); -KP_ESERVER for an empty e. */
int kp_status_errno(const struct kp_error *e);

/* The reason a bare HTTP status implies ("NotFound" for 404, ...), or NULL. */
const char *kp_status_reason_for_code(int code);

/* True when e is an eviction refused by a PodDisruptionBudget (429 with a DisruptionBudget
 * cause): the pod may be evicted later, the caller waits rather than treating it as overload. */
bool kp_error_is_disruption_budget(const struct kp_error *e);

/* True when e carries reason r (case-sensitive, as the server spells reasons). */
bool kp_error_has_reason(const struct kp_error *e, const char *r);

#endif
