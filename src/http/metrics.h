/* http/metrics.h: a small metrics registry rendered in the Prometheus text format 0.0.4.
 *
 * A registry holds metric families (counter, gauge, histogram), each with a fixed list of label
 * names. A family holds series, one per combination of label values; an unlabelled family has
 * exactly one series, made when it is registered. Families are registered at start-up (main
 * thread, before the HTTP server starts and before any worker runs); series of labelled
 * families are made on first use from any thread.
 *
 *   struct kp_metric *zombie;     registered once at start-up
 *   kp_metrics_register(m, &(struct kp_metric_opts){
 *       .name = "kpssh_host_zombie_actions_total", .help = "Zombie guard actions.",
 *       .type = KP_METRIC_COUNTER, .labels = (const char *const[]){"action", NULL}}, &zombie);
 *   kp_counter_inc(kp_metric_labels(zombie, "left", (const char *)NULL));   hot path
 *
 * Hot path: updating a series is one or a few C11 atomic operations, no lock and no
 * allocation; finding a series by its label values takes the family's lock (hold on to the
 * struct kp_series pointer when the labels are fixed). Series live as long as the registry:
 * they are never freed while it lives, so a pointer handed out stays valid and threads need no
 * reference counting. A series that should disappear from the output (a host class that no
 * longer exists) is hidden; the next update shows it again.
 *
 * Failures never reach the instrumented code: a series that cannot be made (no memory, label
 * count wrong, family full) comes back as NULL, and every update function accepts NULL and
 * does nothing; kp_metrics_dropped() counts those lookups.
 *
 * Collectors are callbacks run by kp_metrics_render() before it formats (on the thread that
 * renders, the HTTP thread), for values computed on scrape: process figures, gauges counted
 * from an informer cache. A collector only reads thread-safe state (atomics, store entries) and
 * sets series; it never blocks on I/O beyond reading /proc.
 *
 * Secrets never go into label values or help texts (STYLE.md rule 8). */
#ifndef KP_HTTP_METRICS_H
#define KP_HTTP_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct kp_buf;
struct kp_metrics;
struct kp_metric;
struct kp_series;

/* Ceilings: label names per family, series per family (a label value from outside data must
 * not grow memory without bound), buckets per histogram, bytes of one /metrics body. */
#define KP_METRICS_MAX_LABELS 8
#define KP_METRICS_MAX_SERIES 4096
#define KP_METRICS_MAX_BUCKETS 64 /* Karpenter's DurationBuckets has 45 */
#define KP_MAX_METRICS_BODY (8u << 20)

enum kp_metric_type {
    KP_METRIC_COUNTER = 0,
    KP_METRIC_GAUGE,
    KP_METRIC_HISTOGRAM,
};

struct kp_metric_opts {
    const char *name; /* [a-zA-Z_:][a-zA-Z0-9_:]*; unique in the registry */
    const char *help; /* one line or more; escaped on output */
    enum kp_metric_type type;
    /* Label names, NULL-terminated ([a-zA-Z_][a-zA-Z0-9_]*, not "__"-prefixed, not "le" for a
     * histogram, no duplicates); NULL or an empty list: unlabelled. */
    const char *const *labels;
    /* Histograms: upper bounds, finite and strictly increasing (+Inf is implicit). */
    const double *buckets;
    size_t nbuckets;
};

/* Bucket bounds of the reference's duration histograms (seconds). */
extern const double KP_METRICS_DURATION_BUCKETS[11];

/* An empty registry. 0 or -ENOMEM. */
int kp_metrics_new(struct kp_metrics **ret) KP_WUR;
/* Frees the registry, its families and every series; accepts and returns NULL. Only once no
 * other thread can touch it (the HTTP server is stopped, workers joined). */
struct kp_metrics *kp_metrics_free(struct kp_metrics *m);

/* Registers a family. 0 and the family in *ret_family (owned by the registry; optional), or
 * -EINVAL (bad name, labels or buckets), -EEXIST (name taken) or -ENOMEM. opts and the strings
 * it points to are copied. Start-up only (main thread); safe against a concurrent render. */
int kp_metrics_register(struct kp_metrics *m, const struct kp_metric_opts *opts,
                        struct kp_metric **ret_family) KP_WUR KP_NONNULL(1, 2);

/* The series of family f for the given label values (as many as f has labels, then a NULL
 * sentinel written (const char *)NULL: a bare NULL may be an int in a variadic call), made on
 * first use. NULL when f is NULL, the count is wrong, the family already has
 * KP_METRICS_MAX_SERIES series, or memory ran out. Any thread. */
struct kp_series *kp_metric_labels(struct kp_metric *f, ...) KP_SENTINEL;
/* The same with an array of f's label count. */
struct kp_series *kp_metric_labelv(struct kp_metric *f, const char *const *values);
/* The series of an unlabelled family (NULL for a labelled one or NULL f). Any thread. */
struct kp_series *kp_metric_series(struct kp_metric *f);

/* Updates; each accepts NULL and does nothing. The series' type must match (an assert: a
 * programmer error). Any thread, lock-free. */
void kp_counter_inc(struct kp_series *s);
void kp_counter_add(struct kp_series *s, uint64_t n);
void kp_gauge_set(struct kp_series *s, double v);
void kp_gauge_add(struct kp_series *s, double delta);
void kp_histogram_observe(struct kp_series *s, double v);
/* Leaves the series out of the output until its next update. Any thread. */
void kp_series_hide(struct kp_series *s);

/* Reads, for tests and collectors. Any thread. */
uint64_t kp_counter_get(const struct kp_series *s);
double kp_gauge_get(const struct kp_series *s);
uint64_t kp_histogram_count(const struct kp_series *s);
double kp_histogram_sum(const struct kp_series *s);

/* A collector run at each render, in registration order, before any family is formatted. */
typedef void (*kp_metrics_collect_fn)(struct kp_metrics *m, void *ctx);
/* 0 or -ENOMEM. Start-up only (main thread); ctx must outlive the registry's renders. */
int kp_metrics_add_collector(struct kp_metrics *m, kp_metrics_collect_fn fn, void *ctx) KP_WUR
    KP_NONNULL(1, 2);

/* Registers the process_* families (process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_start_time_seconds, process_open_fds,
 * process_max_fds) and the collector that fills them from /proc/self on each render.
 * 0 or the errors of kp_metrics_register(). Start-up only. */
int kp_metrics_add_process(struct kp_metrics *m) KP_WUR KP_NONNULL(1);

/* Runs the collectors, then appends every family in registration order in the text format
 * 0.0.4: "# HELP", "# TYPE", then one line per visible series, series ordered by label values
 * (bytewise), histograms as cumulative _bucket{le="..."} lines ending with le="+Inf", then _sum
 * and _count (_count equals the +Inf bucket). A family without visible series still gets its
 * HELP and TYPE lines. 0, -ENOMEM or -KP_ELIMIT (out's ceiling; out released). Any thread;
 * concurrent renders are serialised. */
int kp_metrics_render(struct kp_metrics *m, struct kp_buf *out) KP_WUR KP_NONNULL(1, 2);

/* Series lookups that returned NULL since the registry was made. Any thread. */
uint64_t kp_metrics_dropped(const struct kp_metrics *m);

/* Formatting helpers of the exposition format, exposed for tests. Pure; any thread.
 * kp_metrics_format_value appends a sample value: integers without a fraction ("3"), others in
 * the shortest of %.15g/%.17g that reads back exactly, "+Inf", "-Inf", "NaN".
 * kp_metrics_escape_label appends a label value with '\\', '"' and newline escaped;
 * kp_metrics_escape_help a help text with '\\' and newline escaped. 0, -ENOMEM, -KP_ELIMIT. */
int kp_metrics_format_value(struct kp_buf *out, double v) KP_WUR;
int kp_metrics_escape_label(struct kp_buf *out, const char *s) KP_WUR;
int kp_metrics_escape_help(struct kp_buf *out, const char *s) KP_WUR;
/* True when s is a valid metric name (labels false) or label name (labels true). */
bool kp_metrics_valid_name(const char *s, bool label);

#endif
