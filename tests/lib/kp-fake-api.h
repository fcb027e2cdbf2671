/* tests/lib/kp-fake-api.h: a loopback stand-in for the API server, for the unit tests of a
 * controller's executor (its reconcile against stores the test feeds).
 *
 * One thread serves one connection at a time; every answer closes its connection, so requests
 * are recorded in the order the client made them. A request other than GET is recorded as its
 * line ("DELETE /apis/karpenter.sh/v1/nodeclaims/nc", no query) and body, and answered by the
 * latest rule set for that line (kp_fake_api_answer), else 200 "{}". A GET is what an
 * informer's thread sends at its own pace, so it is answered but not recorded: a list gets an
 * empty list at resourceVersion 1, a watch (?watch=1) gets its headers and is then held open,
 * sending nothing, so the informer stays synced with the store the test fills
 * (kp_store_put) until kp_fake_api_drop_watches() or the stop.
 *
 * Threads: the functions below from the test's thread; the server's own thread serves. The
 * strings kp_fake_api_line/body return stay valid until the next reset or the stop. Each
 * function cmocka-fails on a broken promise (a socket that will not open, a request that is not
 * there). */
#ifndef KP_TESTS_KP_FAKE_API_H
#define KP_TESTS_KP_FAKE_API_H

#include <stddef.h>

struct kp_fake_api;

/* Serves on 127.0.0.1 at a port of its own. */
struct kp_fake_api *kp_fake_api_start(void);
/* Stops serving (closing held watches) and frees; accepts and returns NULL. */
struct kp_fake_api *kp_fake_api_stop(struct kp_fake_api *a);
/* "http://127.0.0.1:<port>", for struct kp_transport_opts.server. */
const char *kp_fake_api_url(const struct kp_fake_api *a);

/* Answers every later request whose line is line with status and body (copied; NULL: a Status
 * object with that code and no reason, from which the client maps the code). */
void kp_fake_api_answer(struct kp_fake_api *a, const char *line, int status, const char *body);

/* Requests recorded since the start or the last reset (the first 64 are kept). */
size_t kp_fake_api_count(struct kp_fake_api *a);
/* Request i's line and body. */
const char *kp_fake_api_line(struct kp_fake_api *a, size_t i);
const char *kp_fake_api_body(struct kp_fake_api *a, size_t i);
/* Forgets the recorded requests (the rules stay). */
void kp_fake_api_reset(struct kp_fake_api *a);

/* Closes the watches held open, so informers cancelled first (kp_informer_cancel) end at once
 * instead of within their next progress check. */
void kp_fake_api_drop_watches(struct kp_fake_api *a);

#endif
