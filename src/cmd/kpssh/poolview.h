/* cmd/kpssh/poolview.h: `kpssh get pool` as two pure functions: a builder that decides one row
 * per SSHHost (who holds it, what it costs) from the projections of the kinds it reads, and a
 * renderer that writes the rows as a table, a wide table, JSON or YAML into a buffer.
 *
 * The row of a host, from the host's own status and the objects it points to:
 *   CLASS      the host-class label (provider/ssh/obj-kpssh.h: "default" when missing).
 *   STATE      status.state as the API spells it (Pending, Available, Claimed, InUse, Unhealthy,
 *              Leaving, Maintenance; "Unknown" for a value this build does not know).
 *   colour     SPEC section 1: green Available (warm, costs nothing), amber InUse (joined, on the
 *              invoice), blue Pending, Claimed and Leaving (kpssh at work), red Unhealthy
 *              (failed); Maintenance and unknown states are plain (an operator parked them).
 *   NODECLAIM  status.claimRef.name (the claim lock).
 *   NODE       the Node whose spec.providerID is the host's status.providerID, else the
 *              NodeClaim's providerID, else the Node the NodeClaim names in status.nodeName.
 *   PODS       pods bound to that Node that are neither Succeeded, Failed nor being deleted.
 *   VCPU       attached vCPUs: with a Node, the host's cpu (status.observedCapacity, else
 *              spec.capacity); without one, 0. A Node that exists is billed (SPEC section 1).
 *   RATE       VCPU x pricePerCPUHour of the SSHNodeClass: the NodeClaim's nodeClassRef, else the
 *              only SSHNodeClass whose hostSelector selects the host; unknown (never guessed)
 *              when neither names exactly one class or its price is invalid.
 *
 * Strings in rows point into the caller's views, which must outlive the view built from them.
 * Pure: no I/O, no clock (the caller passes now), no globals. Any thread. */
#ifndef KP_CMD_KPSSH_POOLVIEW_H
#define KP_CMD_KPSSH_POOLVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "json/json.h"

struct kp_buf;
struct kp_node_view;
struct kp_nodeclaim_view;
struct kp_pod_view;
struct kp_sshhost_view;
struct kp_sshnodeclass_view;
struct kp_taints;

/* Largest rendering of one view (a pool of thousands of hosts fits many times over). */
#define KP_POOLVIEW_MAX_OUTPUT (16u << 20)

/* The projection the builder reads: borrowed arrays of views, in any order. */
struct kp_poolview_in {
    const struct kp_sshhost_view *const *hosts;
    size_t n_hosts;
    const struct kp_sshnodeclass_view *const *classes;
    size_t n_classes;
    const struct kp_nodeclaim_view *const *claims;
    size_t n_claims;
    const struct kp_node_view *const *nodes;
    size_t n_nodes;
    const struct kp_pod_view *const *pods;
    size_t n_pods;
};

enum kp_poolview_colour {
    KP_POOLVIEW_PLAIN = 0,
    KP_POOLVIEW_GREEN, /* warm: in the pool, costs nothing */
    KP_POOLVIEW_AMBER, /* joined: on the invoice */
    KP_POOLVIEW_BLUE,  /* kpssh at work */
    KP_POOLVIEW_RED,   /* failed */
};
/* "plain", "green", "amber", "blue", "red". */
const char *kp_poolview_colour_name(enum kp_poolview_colour c);

struct kp_poolview_row {
    const char *name;
    const char *host_class;
    const char *state;
    const char *address;
    enum kp_poolview_colour colour;
    const char *nodeclaim; /* NULL when none, as for the three below */
    const char *nodepool;  /* the NodeClaim's karpenter.sh/nodepool label */
    const char *nodeclass; /* the class the rate comes from */
    const char *node;
    const struct kp_taints *taints; /* the Node's; NULL without a Node */
    uint32_t pods;
    int64_t vcpu_milli; /* attached vCPUs in milli-CPUs; 0 without a Node */
    int64_t rate_micro; /* micro-USD per hour; -1 when unknown */
    int64_t created_usec;
};

struct kp_poolview_totals {
    size_t hosts, warm, joined, working, failed; /* joined: hosts with a Node */
    int64_t vcpu_milli;
    int64_t rate_micro; /* the known rates' sum */
    bool rate_unknown;  /* some attached host's rate is unknown: rate_micro is a lower bound */
};

/* Rows sorted by host name, and totals. Release with kp_poolview_done. */
struct kp_poolview {
    struct kp_poolview_row *rows;
    size_t n_rows;
    struct kp_poolview_totals totals;
};

/* Builds the view of in into *ret (overwritten). 0 or -ENOMEM. */
int kp_poolview_build(const struct kp_poolview_in *in, struct kp_poolview *ret)
    KP_NONNULL(1, 2) KP_WUR;
/* Releases the rows; v is zeroed. */
void kp_poolview_done(struct kp_poolview *v) KP_NONNULL(1);

enum kp_poolview_format {
    KP_POOLVIEW_TABLE = 0,
    KP_POOLVIEW_WIDE, /* adds ADDRESS, NODEPOOL, NODECLASS, TAINTS */
    KP_POOLVIEW_JSON,
    KP_POOLVIEW_YAML,
};
/* "", "wide", "json", "yaml" to a format: 0 or -EINVAL. */
int kp_poolview_parse_format(const char *s, enum kp_poolview_format *ret) KP_NONNULL(1, 2) KP_WUR;

enum kp_poolview_flags {
    KP_POOLVIEW_COLOUR = 1 << 0, /* tables: each row in its state's ANSI colour */
};

/* Appends v in format to out (ns: the pool namespace, named in JSON and YAML; now_usec: for
 * AGE). Tables end with a totals line; JSON and YAML are one document
 * {kind: PoolView, namespace, hosts: [...], totals: {...}} with stable keys. Control bytes in
 * API strings are shown as '?' in tables, so a hostile value cannot drive the terminal; without
 * KP_POOLVIEW_COLOUR the output holds no escape byte. 0, -ENOMEM or -KP_ELIMIT (out's ceiling). */
int kp_poolview_render(const struct kp_poolview *v, const char *ns, enum kp_poolview_format format,
                       unsigned flags, int64_t now_usec, struct kp_buf *out)
    KP_NONNULL(1, 2, 6) KP_WUR;

/* Appends doc (a JSON tree of objects, arrays, strings, integers, booleans and nulls) to out as
 * the block YAML -o yaml prints: object keys in the tree's order, strings double-quoted. Other
 * verbs' -o yaml use it too (simulate.c), so every document the CLI prints reads the same.
 * 0, -ENOMEM or -KP_ELIMIT (out's ceiling). */
int kp_poolview_yaml(const json_t *doc, struct kp_buf *out) KP_NONNULL(1, 2) KP_WUR;

#endif
