/* cmd/kpssh/manifest.h: Kubernetes manifests (YAML streams, JSON objects, kind: List) as one
 * JSON text per object, for verbs that read objects from files (`kpssh simulate -f`).
 *
 * A file is parsed by yaml/ (JSON is YAML, so one parser reads both) with every document kept;
 * each document is either one object or a List whose items are objects. Each object is handed to
 * the caller as compact JSON text, which the caller decodes and projects with the same
 * kp_<kind>_project() functions the informers use, so no second parser of any kind exists.
 *
 * Scalars map as sigs.k8s.io/yaml maps them for the cases manifests use: a quoted or block
 * scalar is a string; a plain one is null (~, null, empty), a JSON number when it is spelled as
 * one that JSON can hold (an int64 or a finite real), a boolean (true/false and the YAML 1.1
 * yes/no/on/off), else a string. Unlike sigs.k8s.io/yaml, YAML 1.1 octal and hex integers (012,
 * 0x10) and out-of-range numbers stay strings.
 *
 * Pure: no I/O, no globals. Any thread. */
#ifndef KP_CMD_KPSSH_MANIFEST_H
#define KP_CMD_KPSSH_MANIFEST_H

#include <stddef.h>

#include "base/macro.h"

struct kp_buf;

/* The most bytes one manifest file may hold. */
#define KP_MANIFEST_MAX_FILE (32u << 20)

/* One object of a stream. */
struct kp_manifest_obj {
    const char *file; /* as given to kp_manifest_each */
    size_t doc;       /* 1-based document index in the stream */
    size_t item;      /* 1-based index in a List document; 0 for a document that is the object */
    unsigned line;    /* where the object starts */
    const char *json; /* compact JSON text, NUL-terminated, valid for the call */
    size_t len;
};

/* Receives one object; 0 to go on, or a negative error that ends the walk (with *ret_msg). */
typedef int (*kp_manifest_fn)(const struct kp_manifest_obj *o, void *ctx, char **ret_msg);

/* Calls fn for every object of the len bytes at p, in stream order; empty documents are
 * skipped. file names the input in messages. 0, fn's error, -KP_EPARSE (not YAML, or a document
 * or List item that is not a mapping, or a string holding a NUL byte), -KP_ELIMIT (over
 * KP_MANIFEST_MAX_FILE, too deep, an object over its JSON ceiling) or -ENOMEM; on failure
 * *ret_msg (optional, base/err.h) says where and why ("file:line:col: ..."). */
int kp_manifest_each(const char *p, size_t len, const char *file, kp_manifest_fn fn, void *ctx,
                     char **ret_msg) KP_NONNULL(3, 4) KP_WUR;

/* Reads path ("-": stdin) into out, at most out's ceiling (the caller's KP_BUF_INIT). 0, -errno,
 * -KP_ELIMIT or -ENOMEM. */
int kp_manifest_read_file(const char *path, struct kp_buf *out) KP_WUR;

#endif
