/* threads.c -- a fixed pool of worker threads for the data-parallel loops inside ops.
 *
 * ag_parallel_for(n, grain, fn, ctx) cuts [0, n) into one contiguous range per thread (the
 * caller runs the first) and returns when all are done. Ops use it only over independent
 * outputs (rows of C, batches, rows of a softmax), so results do not depend on the number of
 * threads: same inputs, same bits. A region started while another runs (another application
 * thread, or a nested call from a worker) runs serially in its caller.
 *
 * Regions are short (tens of microseconds) and frequent, so both sides first spin on atomics
 * for a few microseconds and only then sleep on a condition variable: a wake-up through the
 * kernel costs about as much as the work being split.
 */
#include "autograd/ag_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define SPINS 20000 /* about 10-40 us of polling before sleeping */

typedef void (*range_fn)(void *ctx, ptrdiff_t begin, ptrdiff_t end);

static struct {
    pthread_mutex_t mu; /* for sleeping and waking only */
    pthread_cond_t start, done;
    pthread_mutex_t region; /* held by the caller of a parallel region, and by set_threads */
    pthread_t *workers;
    int nthreads;         /* workers + the caller */
    _Atomic uint64_t gen; /* bumped per region: workers run when it changes */
    _Atomic int pending;  /* workers still running the current region */
    _Atomic bool quit;
    range_fn fn; /* the current region, published before gen changes */
    void *ctx;
    ptrdiff_t n;
} pool = {PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          PTHREAD_MUTEX_INITIALIZER,
          NULL,
          1,
          0,
          0,
          false,
          NULL,
          NULL,
          0};

typedef struct worker_arg {
    int id;        /* 1 .. nthreads-1 */
    uint64_t seen; /* the generation when the worker was created */
} worker_arg;

static _Thread_local bool in_worker;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void run_share(range_fn fn, void *ctx, ptrdiff_t n, int share, int shares) {
    ptrdiff_t b = n * share / shares, e = n * (share + 1) / shares;
    if (b < e) fn(ctx, b, e);
}

static void *worker_main(void *p) {
    worker_arg arg = *(worker_arg *)p;
    free(p);
    in_worker = true;
    uint64_t seen = arg.seen;
    for (;;) {
        for (int i = 0; i < SPINS && atomic_load(&pool.gen) == seen && !atomic_load(&pool.quit);
             i++)
            cpu_relax();
        if (atomic_load(&pool.gen) == seen && !atomic_load(&pool.quit)) {
            pthread_mutex_lock(&pool.mu);
            while (atomic_load(&pool.gen) == seen && !atomic_load(&pool.quit))
                pthread_cond_wait(&pool.start, &pool.mu);
            pthread_mutex_unlock(&pool.mu);
        }
        if (atomic_load(&pool.quit)) break;
        seen = atomic_load(&pool.gen); /* acquire: the region's fields are visible */
        run_share(pool.fn, pool.ctx, pool.n, arg.id, pool.nthreads);
        if (atomic_fetch_sub(&pool.pending, 1) == 1) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    ag__scratch_free();
    return NULL;
}

/* Joins every worker; the caller holds pool.region. */
static void stop_workers(void) {
    pthread_mutex_lock(&pool.mu);
    atomic_store(&pool.quit, true);
    pthread_cond_broadcast(&pool.start);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.nthreads - 1; i++) pthread_join(pool.workers[i], NULL);
    free(pool.workers);
    pool.workers = NULL;
    pool.nthreads = 1;
    atomic_store(&pool.quit, false);
}

int ag_set_threads(int n) {
    if (n < 1 || n > 256) {
        ag_report(NULL, "set_threads: %d threads (expected 1 to 256)", n);
        return -1;
    }
    pthread_mutex_lock(&pool.region);
    int rc = 0;
    if (n != pool.nthreads) {
        stop_workers();
        pool.workers = n > 1 ? calloc((size_t)n - 1, sizeof *pool.workers) : NULL;
        int started = 0;
        while (pool.workers && started < n - 1) {
            worker_arg *arg = malloc(sizeof *arg);
            if (!arg) break;
            *arg = (worker_arg){started + 1, atomic_load(&pool.gen)};
            if (pthread_create(&pool.workers[started], NULL, worker_main, arg)) {
                free(arg);
                break;
            }
            started++;
        }
        pool.nthreads = started + 1;
        if (started < n - 1) {
            ag_report(NULL, "set_threads: could only start %d of %d threads", started + 1, n);
            rc = -1;
        }
    }
    pthread_mutex_unlock(&pool.region);
    return rc;
}

int ag_threads(void) { return pool.nthreads; }

void ag_parallel_for(ptrdiff_t n, ptrdiff_t min_per_thread, range_fn fn, void *ctx) {
    int shares = pool.nthreads;
    if (min_per_thread < 1) min_per_thread = 1;
    if (shares < 2 || n / min_per_thread < 2 || in_worker || pthread_mutex_trylock(&pool.region)) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    shares = pool.nthreads;
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    atomic_store(&pool.pending, shares - 1);
    atomic_fetch_add(&pool.gen, 1); /* release: publishes the fields above */
    pthread_mutex_lock(&pool.mu);
    pthread_cond_broadcast(&pool.start); /* for the workers that went to sleep */
    pthread_mutex_unlock(&pool.mu);
    run_share(fn, ctx, n, 0, shares);
    for (int i = 0; i < SPINS && atomic_load(&pool.pending) > 0; i++) cpu_relax();
    if (atomic_load(&pool.pending) > 0) {
        pthread_mutex_lock(&pool.mu);
        while (atomic_load(&pool.pending) > 0) pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
    pthread_mutex_unlock(&pool.region);
}
