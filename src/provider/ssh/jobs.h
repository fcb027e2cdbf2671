/* provider/ssh/jobs.h: the bounded SSH job pool (STYLE.md section 4: "SSH runner pool").
 *
 * Probes, installs, joins and leaves are slow and their hosts may never answer, so they do not
 * run on a controller's reconcile workers: a reconcile submits a job under its object's key and
 * returns; one of the pool's threads runs it (with its own libssh session, under a context of
 * its own); when it ends, its result is kept under the key and the key is handed to the owner's
 * done callback, which enqueues it on the owner's reconciler. The next reconcile of that key
 * takes the result and decides on it, so decisions stay pure functions of (object, result).
 *
 * Two pools use this: the host controller's (probes, zombie-guard leaves; keyed by host) and
 * the SSH provider's launch pool (a NodeClaim's install, join and leave; keyed
 * "<nodeclaim>/<uid>", provider.c), whose done callback tells the core's lifecycle controller.
 *
 *   submit   at most one job per key exists at a time (queued, running or finished and not yet
 *            taken): a second submit for the key is refused with -EEXIST. At most queue_max jobs
 *            wait for a thread; past that the submit is refused with -EAGAIN (the caller comes
 *            back later), never queued without bound.
 *   lanes    a job flagged KP_SSH_JOB_SLOW (a probe of a host that did not answer last time: it
 *            may cost its whole timeout) runs only while fewer than slow_max slow jobs run, so
 *            however many hosts are dead the other threads keep serving the ones that answer.
 *            A waiting slow job never holds back a normal one queued after it.
 *   contexts a job runs under its own context: its timeout, under the pool's parent (the
 *            process's, cancelled by SIGTERM or by losing the Lease). Not under the reconcile
 *            that submitted it: that one has returned long before the job ends.
 *   stop     refuses new jobs, cancels the running ones (a session notices within one poll
 *            slice, session.h), drops the queued ones and every unread result, joins the
 *            threads. A stopped pool may start again (a replica that leads again).
 *
 * Threads: new, start, stop and free on one thread (the owner's start/stop thread); submit,
 * take, forget and stats from any thread (one mutex, never held across a job or a callback).
 * Job functions and the done callback run on pool threads. */
#ifndef KP_PROVIDER_SSH_JOBS_H
#define KP_PROVIDER_SSH_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "base/time.h"

struct kp_ctx;
struct kp_ssh_jobs;
struct kp_ssh_observer;

#define KP_SSH_JOBS_THREADS 8
#define KP_SSH_JOBS_QUEUE_MAX 1024
#define KP_SSH_JOBS_MAX_THREADS 64

enum kp_ssh_job_kind {
    KP_SSH_JOB_PROBE,
    KP_SSH_JOB_INSTALL,
    KP_SSH_JOB_JOIN,
    KP_SSH_JOB_LEAVE,
    KP_SSH_JOB_KIND_N,
};
/* "probe", "install", "join", "leave": the kind label of the job metrics. */
const char *kp_ssh_job_kind_name(enum kp_ssh_job_kind kind);

/* Results of the job metrics: what a job's return code means. */
#define KP_SSH_JOB_RESULT_SUCCESS "success"     /* 0 */
#define KP_SSH_JOB_RESULT_ERROR "error"         /* any other error */
#define KP_SSH_JOB_RESULT_TIMEOUT "timeout"     /* -ETIMEDOUT */
#define KP_SSH_JOB_RESULT_CANCELLED "cancelled" /* -ECANCELED, -KP_ENOTLEADER */
const char *kp_ssh_job_result_name(int result);

/* A job's work, on a pool thread: ctx is the job's (cancelled or past its timeout: give up).
 * Outputs go into arg; the return value is the job's result, handed back by take. */
typedef int (*kp_ssh_job_fn)(void *arg, const struct kp_ctx *ctx);
/* Frees a job's arg (a job dropped by stop or forget, or refused: see submit). */
typedef void (*kp_ssh_job_free_fn)(void *arg);
/* A job ended: its result is ready for take. On the pool thread; must not block (enqueue). */
typedef void (*kp_ssh_job_done_fn)(void *owner, const char *key);

enum kp_ssh_job_flags {
    KP_SSH_JOB_SLOW = 1 << 0, /* runs in the lane of at most slow_max at once */
};

struct kp_ssh_job_spec {
    const char *key; /* copied */
    enum kp_ssh_job_kind kind;
    unsigned flags;        /* enum kp_ssh_job_flags */
    uint64_t timeout_usec; /* the job's context deadline from when it starts running; 0: none */
    /* An absolute bound as well, which time in the queue counts against (a launch's deadline);
     * .at 0: none. The job's context ends at the earlier of the two. */
    struct kp_deadline deadline;
    kp_ssh_job_fn fn;
    kp_ssh_job_free_fn free_arg; /* NULL: arg needs no freeing */
    void *arg;
};

struct kp_ssh_jobs_opts {
    const char *name;   /* thread names and logs: "sshhost" */
    unsigned threads;   /* 0: KP_SSH_JOBS_THREADS; at most KP_SSH_JOBS_MAX_THREADS */
    unsigned queue_max; /* jobs waiting for a thread; 0: KP_SSH_JOBS_QUEUE_MAX */
    unsigned slow_max;  /* slow jobs running at once; 0: half the threads (at least 1) */
    kp_ssh_job_done_fn done;
    void *owner;
    const struct kp_ssh_observer *observer; /* optional: job counts (observe.h) */
};

/* A stopped pool. opts is copied (observer and owner borrowed). 0, -EINVAL (no done callback,
 * too many threads) or -ENOMEM. */
int kp_ssh_jobs_new(const struct kp_ssh_jobs_opts *o, struct kp_ssh_jobs **ret) KP_WUR;
/* Stops and frees; accepts and returns NULL. */
struct kp_ssh_jobs *kp_ssh_jobs_free(struct kp_ssh_jobs *p);

/* Starts the threads; jobs run under parent (borrowed until stop returns; NULL: none).
 * 0, -EALREADY or -errno (then nothing runs). */
int kp_ssh_jobs_start(struct kp_ssh_jobs *p, const struct kp_ctx *parent) KP_WUR;
/* Refuses new jobs, cancels the running ones and waits for them, drops the queued ones and the
 * unread results (their args freed, no done callback), joins the threads. Idempotent. */
void kp_ssh_jobs_stop(struct kp_ssh_jobs *p);

/* Queues a job. 0: the pool owns spec->arg from now on. Refusals leave arg with the caller:
 *   -EEXIST      a job for this key is queued, running, or finished and not yet taken
 *   -EAGAIN      queue_max jobs wait already: submit again later
 *   -ESHUTDOWN   the pool is not running
 *   -EINVAL      no key or fn; -ENOMEM */
int kp_ssh_jobs_submit(struct kp_ssh_jobs *p, const struct kp_ssh_job_spec *spec) KP_WUR;

/* The finished job of key, removed from the pool: 0 with its kind, arg (now the caller's) and
 * result; -EINPROGRESS while it is queued or running (its end enqueues the key); -ENOENT when
 * there is none. Any output may be NULL (arg NULL: the pool frees it). */
int kp_ssh_jobs_take(struct kp_ssh_jobs *p, const char *key, enum kp_ssh_job_kind *ret_kind,
                     void **ret_arg, int *ret_result) KP_WUR;

/* take, for an owner whose keys carry jobs of several kinds: only a job of kind is taken.
 * 0, -EINPROGRESS and -ENOENT as take; -EBUSY when key's job is of another kind, which is then
 * left alone and described in *ret_other (optional) and *ret_other_finished (optional). */
int kp_ssh_jobs_take_kind(struct kp_ssh_jobs *p, const char *key, enum kp_ssh_job_kind kind,
                          void **ret_arg, int *ret_result, enum kp_ssh_job_kind *ret_other,
                          bool *ret_other_finished) KP_WUR;

/* What key's job is, without taking it: 0 with its kind and whether it has finished (outputs
 * optional), or -ENOENT when there is none. */
int kp_ssh_jobs_peek(struct kp_ssh_jobs *p, const char *key, enum kp_ssh_job_kind *ret_kind,
                     bool *ret_finished) KP_WUR;

/* Drops key's job: a queued one is freed, a running one is cancelled (its result dropped when
 * it ends, without a done callback), a finished one is freed. For an object that is gone. */
void kp_ssh_jobs_forget(struct kp_ssh_jobs *p, const char *key);
/* Cancels key's running job but keeps it: it ends early (-ECANCELED, within a poll slice) as a
 * finished job whose end calls done as usual, and until then the key stays taken (submit:
 * -EEXIST), so nothing new can start on its host while its session closes. A queued job is
 * dropped (it never ran); a finished one is left for take. For an object whose work must stop
 * before other work starts. */
void kp_ssh_jobs_cancel(struct kp_ssh_jobs *p, const char *key);

struct kp_ssh_jobs_stats {
    size_t queued, running, running_slow, finished; /* finished: results not yet taken */
    uint64_t submitted, refused_full, completed;
};
void kp_ssh_jobs_get_stats(struct kp_ssh_jobs *p, struct kp_ssh_jobs_stats *ret);

#endif
