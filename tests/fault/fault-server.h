/* tests/fault/fault-server.h: a loopback HTTP server that plays a script.
 *
 * The fault tier tests what a real API server cannot produce on demand: streams split at odd
 * offsets, stalls, truncated or oversized frames, 410/429/5xx sequences. A script is a list of
 * exchanges; each accepted connection takes the next one, checks the request line against the
 * exchange's expectations, and sends the scripted answer byte by byte as told. Every answer
 * carries "Connection: close", so each request is a new connection and the order is exact.
 *
 * Script syntax (one directive per line; '#' starts a comment line):
 *   request METHOD [token ...]   a new exchange; the request line must contain every token,
 *                                and none of the tokens written !token
 *   after-ms N                   the request must not come sooner than N ms after the
 *                                previous exchange ended (Retry-After, backoff)
 *   status N [stream]            status line; stream: no Content-Length, body until close
 *   header NAME: VALUE
 *   body TEXT                    the whole body (Content-Length set)
 *   send TEXT                    (stream) bytes, '\n' written as \n
 *   send-split N TEXT            (stream) bytes in N-byte writes with a pause between them
 *   send-fill N C                (stream) N bytes of the character C, written at once
 *   sleep MS                     pause
 *   hold                         keep the connection open until the server stops
 * Macros in TEXT: @pod(name,rv) expands to a minimal pod in namespace "ns";
 * @ev(TYPE,name,rv) to a watch event line for that pod, newline included.
 * Directives other than these are ignored by the server (the test driver reads them). */
#ifndef KP_TESTS_FAULT_SERVER_H
#define KP_TESTS_FAULT_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kp_fault_server;

/* Parses script and starts serving on 127.0.0.1 (any port). NULL on error (message on
 * stderr). */
struct kp_fault_server *kp_fault_server_start(const char *script);
/* The port. */
uint16_t kp_fault_server_port(const struct kp_fault_server *s);
/* Exchanges begun and finished so far, and how many the script has. */
size_t kp_fault_server_started(struct kp_fault_server *s);
size_t kp_fault_server_served(struct kp_fault_server *s);
size_t kp_fault_server_exchanges(const struct kp_fault_server *s);
/* The first mismatch (request that did not match its exchange, or a request past the end of
 * the script), or NULL. Valid until the server is stopped. */
const char *kp_fault_server_error(struct kp_fault_server *s);
/* Stops serving and frees. */
void kp_fault_server_stop(struct kp_fault_server *s);

/* Expands the @pod/@ev macros of text into a new string (kp_free it). */
char *kp_fault_expand(const char *text);

#endif
