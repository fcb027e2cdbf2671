/* yaml/yaml.h: YAML documents as small node trees that remember where each node came from.
 *
 * The only interface to libyaml (STYLE.md rule 12). A parse turns (ptr, len) into a tree of
 * scalars, sequences and mappings; every node carries the 1-based line and column of its first
 * byte and the file name given to the parse, so configuration errors read
 * "kubeconfig:14:7: expected a mapping". Anchors and aliases are resolved (an alias shares the
 * anchored node), with the total expanded size bounded so a "billion laughs" document fails
 * with -KP_ELIMIT instead of costing time in every consumer that walks the tree.
 *
 * Limits: input at most max_bytes (the caller's ceiling), nesting at most KP_YAML_MAX_DEPTH,
 * at most KP_YAML_MAX_NODES nodes counting every alias as the size of what it expands to.
 * Mapping keys must be scalars and unique within their mapping (a duplicate is an error, not a
 * silent override). The YAML 1.1 merge key "<<" is an ordinary key here.
 *
 * Threads: a document is immutable once parsed; any number of threads may read it. Nodes live
 * as long as their document. No function here logs or does I/O. */
#ifndef KP_YAML_YAML_H
#define KP_YAML_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

#define KP_YAML_MAX_DEPTH 64
#define KP_YAML_MAX_NODES (1u << 20)
/* Room for "file:line:col: message"; longer texts are cut (they are ours, never data). */
#define KP_YAML_ERROR_MAX 512

struct kp_yaml_doc;
struct kp_yaml_node;

enum kp_yaml_type {
    KP_YAML_SCALAR = 1,
    KP_YAML_SEQUENCE,
    KP_YAML_MAPPING,
};

/* How a scalar was written. Only KP_YAML_PLAIN scalars can be null, booleans or numbers; a
 * quoted, block or !!str-tagged scalar is always a string ("123" stays the string 123). */
enum kp_yaml_style {
    KP_YAML_PLAIN = 0,
    KP_YAML_QUOTED, /* single or double quoted, or tagged !!str */
    KP_YAML_BLOCK,  /* literal | or folded > */
};

enum kp_yaml_flags {
    /* Keep every document of a multi-document stream; by default only the first is kept and the
     * rest is still checked for syntax errors. */
    KP_YAML_ALL_DOCUMENTS = 1 << 0,
};

/* Where an error happened and what it was. text is "file:line:col: message" (or "file:
 * message" when there is no position), always NUL-terminated. line and col are 0 when unknown. */
struct kp_yaml_error {
    unsigned line, col;
    char text[KP_YAML_ERROR_MAX];
};

/* Parses len bytes at p. filename is used in messages only (copied). Returns 0 and a new
 * document in *ret_doc, or -KP_EPARSE (syntax error, duplicate key, non-scalar key, unknown
 * alias), -KP_ELIMIT (len > max_bytes, too deep, too many nodes after alias expansion) or
 * -ENOMEM; reterr (optional) then says where and why. An empty stream is a document with no
 * roots. Pure: no I/O, no globals. Any thread. */
int kp_yaml_parse(const char *p, size_t len, const char *filename, size_t max_bytes,
                  enum kp_yaml_flags flags, struct kp_yaml_doc **ret_doc,
                  struct kp_yaml_error *reterr) KP_WUR;

/* Frees the document and all its nodes; accepts and returns NULL. */
struct kp_yaml_doc *kp_yaml_doc_free(struct kp_yaml_doc *doc);

/* Number of documents kept (0 for an empty stream) and the root of document i (NULL past the
 * end). */
size_t kp_yaml_doc_count(const struct kp_yaml_doc *doc);
const struct kp_yaml_node *kp_yaml_doc_root(const struct kp_yaml_doc *doc, size_t i);
/* The file name given to kp_yaml_parse. */
const char *kp_yaml_doc_file(const struct kp_yaml_doc *doc);

/* Node properties. Positions are 1-based. */
enum kp_yaml_type kp_yaml_type(const struct kp_yaml_node *n);
enum kp_yaml_style kp_yaml_style(const struct kp_yaml_node *n);
unsigned kp_yaml_line(const struct kp_yaml_node *n);
unsigned kp_yaml_col(const struct kp_yaml_node *n);
const char *kp_yaml_file(const struct kp_yaml_node *n);
/* A short name of the node's kind for messages: "a string", "a sequence", "a mapping", "null". */
const char *kp_yaml_describe(const struct kp_yaml_node *n);

/* Items of a sequence or pairs of a mapping; 0 for a scalar. */
size_t kp_yaml_len(const struct kp_yaml_node *n);
/* Item i of a sequence, or NULL (not a sequence, or i out of range). */
const struct kp_yaml_node *kp_yaml_seq_at(const struct kp_yaml_node *n, size_t i);
/* Key and value of pair i of a mapping, or NULL. */
const struct kp_yaml_node *kp_yaml_map_key_at(const struct kp_yaml_node *n, size_t i);
const struct kp_yaml_node *kp_yaml_map_value_at(const struct kp_yaml_node *n, size_t i);
/* The value stored under the scalar key equal to key, or NULL (absent, or n is no mapping). */
const struct kp_yaml_node *kp_yaml_map_get(const struct kp_yaml_node *n, const char *key)
    KP_NONNULL(2);

/* True for a plain scalar "", "~", "null", "Null" or "NULL" (a key with no value is one). */
bool kp_yaml_is_null(const struct kp_yaml_node *n);

/* The text of any scalar (plain ones included: 123 gives "123"), valid while the document
 * lives. *ret_len (optional) gets its length; the text is NUL-terminated but may hold NULs
 * written as "\0", which callers that need C strings must reject (kp_yaml_get_cstr does).
 * 0, or -KP_EPARSE when n is not a scalar or is null. */
int kp_yaml_get_str(const struct kp_yaml_node *n, const char **ret, size_t *ret_len) KP_WUR;
/* Like kp_yaml_get_str, and -KP_EPARSE when the text holds a NUL byte. */
int kp_yaml_get_cstr(const struct kp_yaml_node *n, const char **ret) KP_WUR;
/* Plain true/false in YAML 1.2 spellings (true, True, TRUE, ...) plus the YAML 1.1 forms
 * yes/no/on/off that kubectl accepts. A quoted "true" is a string: -KP_EPARSE. */
int kp_yaml_get_bool(const struct kp_yaml_node *n, bool *ret) KP_WUR;
/* Plain decimal integer with optional sign, or 0x hexadecimal. -KP_EPARSE or -ERANGE. */
int kp_yaml_get_int(const struct kp_yaml_node *n, int64_t *ret) KP_WUR;

/* Formats "file:line:col: message" about node n into err (err may be NULL: then nothing).
 * n may be NULL for a message without a position; file is then used as given (may be NULL). */
void kp_yaml_errorf(struct kp_yaml_error *err, const struct kp_yaml_node *n, const char *file,
                    const char *fmt, ...) KP_PRINTF(4, 5);

#endif
