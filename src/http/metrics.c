/* DESIGN: the metrics registry (contract in metrics.h).
 *
 * What: counters, gauges and histograms with labels, rendered as Prometheus text 0.0.4.
 *
 * Why this way: instrumented code runs on workers, the informer thread and SSH jobs, and must
 * never wait for a scrape or fail because of one. So the value of a series is a set of C11
 * atomics updated lock-free; only the *set* of series (which label values exist) is guarded, by
 * one mutex per family, taken when a series is looked up or made and while the family is
 * formatted (no I/O and no callback under it). Series are never freed before the registry, so
 * pointers to them need no reference count; hiding replaces removal.
 *
 * Gauges hold a double as its bit pattern in an atomic uint64_t; adds are compare-and-swap
 * loops. Histograms keep one non-cumulative atomic count per bucket plus +Inf, and an atomic
 * double sum. A render adds the bucket counts up as it writes them and prints _count as the
 * total, so the output is self-consistent (+Inf bucket == _count) even while observations land
 * in the middle of a scrape; _sum may then be one observation ahead, as in every client library.
 *
 * Threads: registration and collectors are added on the main thread at start-up; lookups and
 * updates on any thread; renders on the HTTP thread (serialised by render_lock so collectors
 * never run twice at once). Lock order: render_lock, then families_lock, then a family's lock. */
#include "http/metrics.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"

const double KP_METRICS_DURATION_BUCKETS[11] = {0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};

struct kp_series {
    enum kp_metric_type type;
    atomic_bool hidden;
    _Atomic uint64_t value;   /* counter: the count; gauge: the double's bits */
    _Atomic uint64_t sum;     /* histogram: the double's bits */
    _Atomic uint64_t *counts; /* histogram: nbuckets + 1 non-cumulative counts, +Inf last */
    const struct kp_metric *family;
    char **values; /* family->nlabels label values */
};

struct kp_metric {
    char *name, *help;
    enum kp_metric_type type;
    char **labels;
    size_t nlabels;
    double *bounds;
    size_t nbuckets;
    pthread_mutex_t lock;      /* guards series, nseries, cap */
    struct kp_series **series; /* sorted by label values */
    size_t nseries, cap;
    struct kp_metrics *registry;
    bool counter_type_line; /* a float counter kept as a gauge: TYPE says counter */
};

struct kp_collector {
    kp_metrics_collect_fn fn;
    void *ctx;
    void (*free_ctx)(void *ctx); /* collectors of our own that own their context */
};

struct kp_metrics {
    pthread_mutex_t render_lock;
    pthread_mutex_t families_lock; /* guards families and collectors */
    struct kp_metric **families;
    size_t nfamilies;
    struct kp_collector *collectors;
    size_t ncollectors;
    _Atomic uint64_t dropped;
};

static uint64_t dbits(double d)
{
    uint64_t u;

    memcpy(&u, &d, sizeof(u));
    return u;
}

static double bitsd(uint64_t u)
{
    double d;

    memcpy(&d, &u, sizeof(d));
    return d;
}

static void atomic_add_double(_Atomic uint64_t *a, double delta)
{
    uint64_t old = atomic_load_explicit(a, memory_order_relaxed);

    while (!atomic_compare_exchange_weak_explicit(a, &old, dbits(bitsd(old) + delta),
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

bool kp_metrics_valid_name(const char *s, bool label)
{
    size_t i;

    if (!s || !*s)
        return false;
    if (label && s[0] == '_' && s[1] == '_')
        return false;
    for (i = 0; s[i]; i++) {
        char c = s[i];
        bool alpha =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');

        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

static struct kp_series *series_free(struct kp_series *s, size_t nlabels)
{
    size_t i;

    if (!s)
        return NULL;
    if (s->values)
        for (i = 0; i < nlabels; i++)
            kp_free(s->values[i]);
    kp_free(s->values);
    kp_free(s->counts);
    kp_free(s);
    return NULL;
}

static struct kp_metric *family_free(struct kp_metric *f)
{
    size_t i;

    if (!f)
        return NULL;
    for (i = 0; i < f->nseries; i++)
        series_free(f->series[i], f->nlabels);
    kp_free(f->series);
    if (f->labels)
        for (i = 0; i < f->nlabels; i++)
            kp_free(f->labels[i]);
    kp_free(f->labels);
    kp_free(f->bounds);
    kp_free(f->name);
    kp_free(f->help);
    pthread_mutex_destroy(&f->lock);
    kp_free(f);
    return NULL;
}

int kp_metrics_new(struct kp_metrics **ret)
{
    struct kp_metrics *m = kp_calloc(1, sizeof(*m));

    if (!m)
        return -ENOMEM;
    pthread_mutex_init(&m->render_lock, NULL);
    pthread_mutex_init(&m->families_lock, NULL);
    *ret = m;
    return 0;
}

struct kp_metrics *kp_metrics_free(struct kp_metrics *m)
{
    size_t i;

    if (!m)
        return NULL;
    for (i = 0; i < m->nfamilies; i++)
        family_free(m->families[i]);
    kp_free(m->families);
    for (i = 0; i < m->ncollectors; i++)
        if (m->collectors[i].free_ctx)
            m->collectors[i].free_ctx(m->collectors[i].ctx);
    kp_free(m->collectors);
    pthread_mutex_destroy(&m->render_lock);
    pthread_mutex_destroy(&m->families_lock);
    kp_free(m);
    return NULL;
}

static int check_opts(const struct kp_metric_opts *o, size_t *ret_nlabels)
{
    size_t n = 0, i, j;

    if (!kp_metrics_valid_name(o->name, false) || !o->help)
        return -EINVAL;
    if (o->type != KP_METRIC_COUNTER && o->type != KP_METRIC_GAUGE &&
        o->type != KP_METRIC_HISTOGRAM)
        return -EINVAL;
    for (n = 0; o->labels && o->labels[n]; n++) {
        if (n >= KP_METRICS_MAX_LABELS || !kp_metrics_valid_name(o->labels[n], true))
            return -EINVAL;
        if (o->type == KP_METRIC_HISTOGRAM && strcmp(o->labels[n], "le") == 0)
            return -EINVAL;
        for (j = 0; j < n; j++)
            if (strcmp(o->labels[j], o->labels[n]) == 0)
                return -EINVAL;
    }
    if (o->type == KP_METRIC_HISTOGRAM) {
        if (!o->buckets || o->nbuckets == 0 || o->nbuckets > KP_METRICS_MAX_BUCKETS)
            return -EINVAL;
        for (i = 0; i < o->nbuckets; i++) {
            if (!isfinite(o->buckets[i]))
                return -EINVAL;
            if (i > 0 && !(o->buckets[i] > o->buckets[i - 1]))
                return -EINVAL;
        }
    } else if (o->buckets || o->nbuckets) {
        return -EINVAL;
    }
    *ret_nlabels = n;
    return 0;
}

static int series_new(struct kp_metric *f, const char *const *values, struct kp_series **ret)
{
    struct kp_series *s = NULL;
    size_t i;
    int r = -ENOMEM;

    s = kp_calloc(1, sizeof(*s));
    if (!s)
        goto out;
    s->type = f->type;
    s->family = f;
    atomic_init(&s->hidden, false);
    atomic_init(&s->value, f->type == KP_METRIC_GAUGE ? dbits(0.0) : 0);
    atomic_init(&s->sum, dbits(0.0));
    if (f->nlabels) {
        s->values = kp_calloc(f->nlabels, sizeof(*s->values));
        if (!s->values)
            goto out;
        for (i = 0; i < f->nlabels; i++)
            if (!(s->values[i] = kp_strdup(values[i])))
                goto out;
    }
    if (f->type == KP_METRIC_HISTOGRAM) {
        s->counts = kp_calloc(f->nbuckets + 1, sizeof(*s->counts));
        if (!s->counts)
            goto out;
        for (i = 0; i <= f->nbuckets; i++)
            atomic_init(&s->counts[i], 0);
    }
    *ret = s;
    s = NULL;
    r = 0;
out:
    series_free(s, f->nlabels);
    return r;
}

int kp_metrics_register(struct kp_metrics *m, const struct kp_metric_opts *o,
                        struct kp_metric **ret_family)
{
    struct kp_metric *f = NULL, **nf;
    size_t nlabels = 0, i;
    int r;

    if ((r = check_opts(o, &nlabels)) < 0)
        return r;
    r = -ENOMEM;
    f = kp_calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    pthread_mutex_init(&f->lock, NULL);
    f->type = o->type;
    f->registry = m;
    f->nlabels = nlabels;
    if (!(f->name = kp_strdup(o->name)) || !(f->help = kp_strdup(o->help)))
        goto out;
    if (nlabels) {
        if (!(f->labels = kp_calloc(nlabels, sizeof(*f->labels))))
            goto out;
        for (i = 0; i < nlabels; i++)
            if (!(f->labels[i] = kp_strdup(o->labels[i])))
                goto out;
    }
    if (o->type == KP_METRIC_HISTOGRAM) {
        if (!(f->bounds = kp_memdup(o->buckets, o->nbuckets * sizeof(double))))
            goto out;
        f->nbuckets = o->nbuckets;
    }
    if (nlabels == 0) {
        /* The one series of an unlabelled family exists from the start, so it renders as 0
         * before its first update, as Prometheus expects of a counter. */
        if (!(f->series = kp_calloc(1, sizeof(*f->series))))
            goto out;
        f->cap = 1;
        if ((r = series_new(f, NULL, &f->series[0])) < 0)
            goto out;
        f->nseries = 1;
    }

    pthread_mutex_lock(&m->families_lock);
    for (i = 0; i < m->nfamilies; i++)
        if (strcmp(m->families[i]->name, f->name) == 0) {
            pthread_mutex_unlock(&m->families_lock);
            r = -EEXIST;
            goto out;
        }
    nf = kp_reallocarray(m->families, m->nfamilies + 1, sizeof(*nf));
    if (!nf) {
        pthread_mutex_unlock(&m->families_lock);
        r = -ENOMEM;
        goto out;
    }
    m->families = nf;
    m->families[m->nfamilies++] = f;
    pthread_mutex_unlock(&m->families_lock);
    if (ret_family)
        *ret_family = f;
    f = NULL; /* the registry owns it now */
    r = 0;
out:
    family_free(f);
    return r;
}

static int compare_values(const struct kp_metric *f, char *const *a, const char *const *b)
{
    size_t i;

    for (i = 0; i < f->nlabels; i++) {
        int c = strcmp(a[i], b[i]);

        if (c)
            return c;
    }
    return 0;
}

struct kp_series *kp_metric_labelv(struct kp_metric *f, const char *const *values)
{
    struct kp_series *s = NULL, **ns;
    size_t lo, hi, i;

    if (!f)
        return NULL;
    if (f->nlabels == 0)
        return f->series[0];
    for (i = 0; i < f->nlabels; i++)
        if (!values || !values[i])
            goto drop;

    pthread_mutex_lock(&f->lock);
    lo = 0;
    hi = f->nseries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = compare_values(f, f->series[mid]->values, values);

        if (c == 0) {
            s = f->series[mid];
            pthread_mutex_unlock(&f->lock);
            return s;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (f->nseries >= KP_METRICS_MAX_SERIES)
        goto unlock_drop;
    if (f->nseries == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;

        ns = kp_reallocarray(f->series, cap, sizeof(*ns));
        if (!ns)
            goto unlock_drop;
        f->series = ns;
        f->cap = cap;
    }
    if (series_new(f, values, &s) < 0)
        goto unlock_drop;
    memmove(&f->series[lo + 1], &f->series[lo], (f->nseries - lo) * sizeof(*f->series));
    f->series[lo] = s;
    f->nseries++;
    pthread_mutex_unlock(&f->lock);
    return s;

unlock_drop:
    pthread_mutex_unlock(&f->lock);
drop:
    atomic_fetch_add_explicit(&f->registry->dropped, 1, memory_order_relaxed);
    return NULL;
}

struct kp_series *kp_metric_labels(struct kp_metric *f, ...)
{
    const char *values[KP_METRICS_MAX_LABELS + 1] = {NULL};
    const char *v;
    size_t n = 0;
    va_list ap;

    if (!f)
        return NULL;
    va_start(ap, f);
    while ((v = va_arg(ap, const char *)) != NULL) {
        if (n > KP_METRICS_MAX_LABELS) {
            n++;
            continue;
        }
        values[n++] = v;
    }
    va_end(ap);
    if (n != f->nlabels) {
        atomic_fetch_add_explicit(&f->registry->dropped, 1, memory_order_relaxed);
        return NULL;
    }
    return kp_metric_labelv(f, values);
}

struct kp_series *kp_metric_series(struct kp_metric *f)
{
    if (!f || f->nlabels != 0)
        return NULL;
    return f->series[0];
}

void kp_counter_add(struct kp_series *s, uint64_t n)
{
    if (!s)
        return;
    assert(s->type == KP_METRIC_COUNTER);
    atomic_fetch_add_explicit(&s->value, n, memory_order_relaxed);
    atomic_store_explicit(&s->hidden, false, memory_order_relaxed);
}

void kp_counter_inc(struct kp_series *s)
{
    kp_counter_add(s, 1);
}

void kp_gauge_set(struct kp_series *s, double v)
{
    if (!s)
        return;
    assert(s->type == KP_METRIC_GAUGE);
    atomic_store_explicit(&s->value, dbits(v), memory_order_relaxed);
    atomic_store_explicit(&s->hidden, false, memory_order_relaxed);
}

void kp_gauge_add(struct kp_series *s, double delta)
{
    if (!s)
        return;
    assert(s->type == KP_METRIC_GAUGE);
    atomic_add_double(&s->value, delta);
    atomic_store_explicit(&s->hidden, false, memory_order_relaxed);
}

void kp_histogram_observe(struct kp_series *s, double v)
{
    const struct kp_metric *f;
    size_t i;

    if (!s)
        return;
    assert(s->type == KP_METRIC_HISTOGRAM);
    f = s->family;
    for (i = 0; i < f->nbuckets; i++)
        if (v <= f->bounds[i])
            break;
    atomic_add_double(&s->sum, v);
    atomic_fetch_add_explicit(&s->counts[i], 1, memory_order_relaxed);
    atomic_store_explicit(&s->hidden, false, memory_order_relaxed);
}

void kp_series_hide(struct kp_series *s)
{
    if (s)
        atomic_store_explicit(&s->hidden, true, memory_order_relaxed);
}

uint64_t kp_counter_get(const struct kp_series *s)
{
    return s && s->type == KP_METRIC_COUNTER ? atomic_load(&s->value) : 0;
}

double kp_gauge_get(const struct kp_series *s)
{
    return s && s->type == KP_METRIC_GAUGE ? bitsd(atomic_load(&s->value)) : 0.0;
}

uint64_t kp_histogram_count(const struct kp_series *s)
{
    uint64_t n = 0;
    size_t i;

    if (!s || s->type != KP_METRIC_HISTOGRAM)
        return 0;
    for (i = 0; i <= s->family->nbuckets; i++)
        n += atomic_load(&s->counts[i]);
    return n;
}

double kp_histogram_sum(const struct kp_series *s)
{
    return s && s->type == KP_METRIC_HISTOGRAM ? bitsd(atomic_load(&s->sum)) : 0.0;
}

static int add_collector(struct kp_metrics *m, kp_metrics_collect_fn fn, void *ctx,
                         void (*free_ctx)(void *ctx))
{
    struct kp_collector *nc;

    pthread_mutex_lock(&m->families_lock);
    nc = kp_reallocarray(m->collectors, m->ncollectors + 1, sizeof(*nc));
    if (!nc) {
        pthread_mutex_unlock(&m->families_lock);
        return -ENOMEM;
    }
    m->collectors = nc;
    m->collectors[m->ncollectors++] =
        (struct kp_collector){.fn = fn, .ctx = ctx, .free_ctx = free_ctx};
    pthread_mutex_unlock(&m->families_lock);
    return 0;
}

int kp_metrics_add_collector(struct kp_metrics *m, kp_metrics_collect_fn fn, void *ctx)
{
    return add_collector(m, fn, ctx, /* free_ctx= */ NULL);
}

uint64_t kp_metrics_dropped(const struct kp_metrics *m)
{
    return atomic_load(&m->dropped);
}

/* --- the exposition format -------------------------------------------------------------- */

int kp_metrics_format_value(struct kp_buf *out, double v)
{
    char tmp[40];

    if (isnan(v))
        return kp_buf_puts(out, "NaN");
    if (isinf(v))
        return kp_buf_puts(out, v > 0 ? "+Inf" : "-Inf");
    /* The shortest of two precisions that reads back as the same double: 0.1 stays "0.1"
     * instead of %.17g's "0.10000000000000001", and no value loses precision. */
    (void)snprintf(tmp, sizeof(tmp), "%.15g", v); /* a double always fits in 40 bytes */
    if (strtod(tmp, NULL) != v)
        (void)snprintf(tmp, sizeof(tmp), "%.17g", v);
    return kp_buf_puts(out, tmp);
}

static int escape(struct kp_buf *out, const char *s, bool quote)
{
    const char *run = s;
    int r;

    for (; *s; s++) {
        const char *rep = NULL;

        if (*s == '\\')
            rep = "\\\\";
        else if (*s == '\n')
            rep = "\\n";
        else if (quote && *s == '"')
            rep = "\\\"";
        if (!rep)
            continue;
        if ((r = kp_buf_append(out, run, (size_t)(s - run))) < 0 || (r = kp_buf_puts(out, rep)) < 0)
            return r;
        run = s + 1;
    }
    return kp_buf_append(out, run, (size_t)(s - run));
}

int kp_metrics_escape_label(struct kp_buf *out, const char *s)
{
    return escape(out, s, true);
}

int kp_metrics_escape_help(struct kp_buf *out, const char *s)
{
    return escape(out, s, false);
}

/* Appends {a="x",b="y"} (plus le="..." when le is non-NULL); nothing when there are no labels. */
static int format_labels(struct kp_buf *out, const struct kp_metric *f, const struct kp_series *s,
                         const char *le)
{
    size_t i;
    int r;

    if (f->nlabels == 0 && !le)
        return 0;
    if ((r = kp_buf_putc(out, '{')) < 0)
        return r;
    for (i = 0; i < f->nlabels; i++) {
        if ((r = kp_buf_printf(out, "%s%s=\"", i ? "," : "", f->labels[i])) < 0 ||
            (r = kp_metrics_escape_label(out, s->values[i])) < 0 || (r = kp_buf_putc(out, '"')) < 0)
            return r;
    }
    if (le && (r = kp_buf_printf(out, "%sle=\"%s\"", f->nlabels ? "," : "", le)) < 0)
        return r;
    return kp_buf_putc(out, '}');
}

static int format_sample(struct kp_buf *out, const struct kp_metric *f, const struct kp_series *s,
                         const char *suffix, const char *le, double v)
{
    int r;

    if ((r = kp_buf_puts(out, f->name)) < 0 || (r = kp_buf_puts(out, suffix)) < 0 ||
        (r = format_labels(out, f, s, le)) < 0 || (r = kp_buf_putc(out, ' ')) < 0 ||
        (r = kp_metrics_format_value(out, v)) < 0)
        return r;
    return kp_buf_putc(out, '\n');
}

static int format_histogram(struct kp_buf *out, const struct kp_metric *f,
                            const struct kp_series *s)
{
    struct kp_buf le = KP_BUF_INIT(64);
    uint64_t cum = 0;
    size_t i;
    int r = 0;

    for (i = 0; i <= f->nbuckets; i++) {
        cum += atomic_load_explicit(&s->counts[i], memory_order_relaxed);
        kp_buf_reset(&le);
        if (i < f->nbuckets)
            r = kp_metrics_format_value(&le, f->bounds[i]);
        else
            r = kp_buf_puts(&le, "+Inf");
        if (r < 0 || (r = format_sample(out, f, s, "_bucket", kp_buf_str(&le), (double)cum)) < 0)
            goto out;
    }
    if ((r = format_sample(out, f, s, "_sum", NULL, bitsd(atomic_load(&s->sum)))) < 0)
        goto out;
    r = format_sample(out, f, s, "_count", NULL, (double)cum);
out:
    kp_buf_done(&le);
    return r;
}

static const char *type_name(enum kp_metric_type t)
{
    switch (t) {
    case KP_METRIC_COUNTER:
        return "counter";
    case KP_METRIC_GAUGE:
        return "gauge";
    case KP_METRIC_HISTOGRAM:
        return "histogram";
    }
    return "untyped";
}

static int format_family(struct kp_buf *out, struct kp_metric *f)
{
    size_t i;
    int r;

    if ((r = kp_buf_printf(out, "# HELP %s ", f->name)) < 0 ||
        (r = kp_metrics_escape_help(out, f->help)) < 0 ||
        (r = kp_buf_printf(out, "\n# TYPE %s %s\n", f->name,
                           type_name(f->counter_type_line ? KP_METRIC_COUNTER : f->type))) < 0)
        return r;
    pthread_mutex_lock(&f->lock);
    for (i = 0; i < f->nseries && r >= 0; i++) {
        const struct kp_series *s = f->series[i];

        if (atomic_load_explicit(&s->hidden, memory_order_relaxed))
            continue;
        switch (f->type) {
        case KP_METRIC_COUNTER:
            r = format_sample(out, f, s, "", NULL, (double)atomic_load(&s->value));
            break;
        case KP_METRIC_GAUGE:
            r = format_sample(out, f, s, "", NULL, bitsd(atomic_load(&s->value)));
            break;
        case KP_METRIC_HISTOGRAM:
            r = format_histogram(out, f, s);
            break;
        }
    }
    pthread_mutex_unlock(&f->lock);
    return r;
}

int kp_metrics_render(struct kp_metrics *m, struct kp_buf *out)
{
    size_t i;
    int r = 0;

    pthread_mutex_lock(&m->render_lock);
    /* Collectors and families are only appended at start-up; copying the counts under the lock
     * and then working without it would also do, but the lock is never contended. */
    pthread_mutex_lock(&m->families_lock);
    for (i = 0; i < m->ncollectors; i++)
        m->collectors[i].fn(m, m->collectors[i].ctx);
    for (i = 0; i < m->nfamilies && r >= 0; i++)
        r = format_family(out, m->families[i]);
    pthread_mutex_unlock(&m->families_lock);
    pthread_mutex_unlock(&m->render_lock);
    return r;
}

/* --- process metrics ------------------------------------------------------------------ */

struct kp_process_metrics {
    struct kp_series *cpu, *rss, *vsize, *start, *open_fds, *max_fds;
    long clk_tck, page_size;
};

/* The whole of a /proc file (at most out->max bytes) into out. 0 or -errno, -KP_ELIMIT. */
static int read_proc(const char *path, struct kp_buf *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int r = 0;

    if (fd < 0)
        return -errno;
    for (;;) {
        char chunk[4096];
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            r = -errno;
        else if (n > 0)
            r = kp_buf_append(out, chunk, (size_t)n);
        if (n <= 0 || r < 0)
            break;
    }
    close(fd);
    return r;
}

/* Field k (1-based as in proc(5)) of /proc/self/stat, from after the command's ')'. */
static bool stat_field(const char *after_comm, unsigned k, uint64_t *ret)
{
    const char *p = after_comm;
    unsigned field = 2; /* the ')' ends field 2 */

    while (*p) {
        const char *start;

        while (*p == ' ')
            p++;
        start = p;
        while (*p && *p != ' ')
            p++;
        if (++field == k)
            return kp_parse_u64(start, (size_t)(p - start), ret) == 0;
    }
    return false;
}

static void collect_process(struct kp_metrics *m, void *ctx)
{
    struct kp_process_metrics *pm = ctx;
    struct kp_buf b = KP_BUF_INIT(64u << 10);
    struct rlimit rl;
    const char *p;
    uint64_t ut, st, vsize, rss;
    DIR *d;

    (void)m;
    if (read_proc("/proc/self/stat", &b) == 0 && (p = strrchr(kp_buf_str(&b), ')'))) {
        p++;
        if (stat_field(p, 14, &ut) && stat_field(p, 15, &st))
            kp_gauge_set(pm->cpu, (double)(ut + st) / (double)pm->clk_tck);
        if (stat_field(p, 23, &vsize))
            kp_gauge_set(pm->vsize, (double)vsize);
        if (stat_field(p, 24, &rss))
            kp_gauge_set(pm->rss, (double)rss * (double)pm->page_size);
    }
    kp_buf_done(&b);
    d = opendir("/proc/self/fd");
    if (d) {
        uint64_t n = 0;
        const struct dirent *de;

        while ((de = readdir(d)))
            if (de->d_name[0] != '.')
                n++;
        closedir(d);
        kp_gauge_set(pm->open_fds, (double)(n ? n - 1 : 0)); /* less the directory's own fd */
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        kp_gauge_set(pm->max_fds, rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
}

/* The process's start time as Unix seconds: boot time plus field 22 of /proc/self/stat. */
static double process_start_time(long clk_tck)
{
    struct kp_buf b = KP_BUF_INIT(1u << 20);
    uint64_t btime = 0, start = 0;
    const char *p;
    double t = 0;

    if (read_proc("/proc/stat", &b) == 0 && (p = strstr(kp_buf_str(&b), "\nbtime "))) {
        const char *e;

        p += strlen("\nbtime ");
        e = strchr(p, '\n');
        if (!e || kp_parse_u64(p, (size_t)(e - p), &btime) < 0)
            btime = 0;
    }
    kp_buf_reset(&b);
    if (btime && read_proc("/proc/self/stat", &b) == 0 && (p = strrchr(kp_buf_str(&b), ')')) &&
        stat_field(p + 1, 22, &start))
        t = (double)btime + (double)start / (double)clk_tck;
    kp_buf_done(&b);
    return t;
}

static void process_metrics_free(void *ctx)
{
    kp_free(ctx);
}

int kp_metrics_add_process(struct kp_metrics *m)
{
    static const struct {
        const char *name, *help;
        size_t offset;
    } defs[] = {
        {"process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
         offsetof(struct kp_process_metrics, cpu)},
        {"process_resident_memory_bytes", "Resident memory size in bytes.",
         offsetof(struct kp_process_metrics, rss)},
        {"process_virtual_memory_bytes", "Virtual memory size in bytes.",
         offsetof(struct kp_process_metrics, vsize)},
        {"process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
         offsetof(struct kp_process_metrics, start)},
        {"process_open_fds", "Number of open file descriptors.",
         offsetof(struct kp_process_metrics, open_fds)},
        {"process_max_fds", "Maximum number of open file descriptors.",
         offsetof(struct kp_process_metrics, max_fds)},
    };
    struct kp_process_metrics *pm = NULL;
    size_t i;
    int r;

    pm = kp_calloc(1, sizeof(*pm));
    if (!pm)
        return -ENOMEM;
    pm->clk_tck = sysconf(_SC_CLK_TCK);
    pm->page_size = sysconf(_SC_PAGESIZE);
    if (pm->clk_tck <= 0)
        pm->clk_tck = 100;
    if (pm->page_size <= 0)
        pm->page_size = 4096;
    for (i = 0; i < KP_ARRAY_SIZE(defs); i++) {
        struct kp_metric *f = NULL;
        struct kp_metric_opts o = {
            .name = defs[i].name, .help = defs[i].help, .type = KP_METRIC_GAUGE};

        if ((r = kp_metrics_register(m, &o, &f)) < 0)
            goto out;
        /* CPU seconds only grow but are fractional: a double kept like a gauge (which the
         * collector sets from the kernel's total) and announced as the counter it is. */
        f->counter_type_line = kp_endswith(defs[i].name, "_total");
        *(struct kp_series **)(void *)((char *)pm + defs[i].offset) = kp_metric_series(f);
    }
    kp_gauge_set(pm->start, process_start_time(pm->clk_tck));
    if ((r = add_collector(m, collect_process, pm, process_metrics_free)) < 0)
        goto out;
    pm = NULL; /* the registry owns it now and frees it with the collector */
    r = 0;
out:
    kp_free(pm);
    return r;
}
