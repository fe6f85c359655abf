/* threads.c -- a fixed pool of worker threads for the data-parallel loops inside ops.
 *
 * ag_parallel_for(n, grain, fn, ctx) cuts [0, n) into one contiguous range per thread: with T
 * threads, range s is [n s / T, n (s + 1) / T). The cut depends on n and T only, never on
 * timing, and it is the cut the pool made when ranges were bound to threads: some callers' bits
 * depend on it (a BLIS product of rows [b, e) of C does not always give the bits of the same
 * rows inside a larger product), so a cut into more, smaller ranges would change results.
 *
 * Ranges are not bound to threads. The caller runs range 0; then the caller and the workers
 * claim the others, one at a time, from one atomic word that holds the region's generation,
 * its number of ranges and the next range to claim. So a worker that another process keeps off
 * its core, or that has not woken yet, costs nothing: the caller runs the range it has not
 * claimed. The caller waits only for ranges that workers have claimed and not yet finished. A
 * worker that wakes late finds the generation changed or no range left, and claims nothing (the
 * generation is in the same word as the counter, so it can never claim a range of a later
 * region). Ops use ranges only over independent outputs (rows of C, batches, rows of a
 * softmax), so which thread runs a range changes no bit. A range may hold whole forward and
 * backward passes too (each on its own tape): a range that no worker has claimed by the time
 * the caller has run its own runs in the caller.
 *
 * A region started while another runs (another application thread, or a nested call from
 * inside fn) runs serially in its caller, as fn(ctx, 0, n).
 *
 * ag_run_tasks(n, fn, ctx, results) is a region of one range per thread (at most n) in which
 * each range takes whole tasks, in order of index, from one atomic counter until none is left:
 * which thread runs a task changes nothing, so its results never depend on the thread count.
 * The first task to fail (by index) stops the taking of tasks; its error becomes the caller's.
 *
 * Waiting: regions are short (tens of microseconds) and frequent, so a thread waiting for a
 * region or for its end first polls for SPIN_NS and only then sleeps on a condition variable: a
 * wake-up through the kernel costs about as much as the work being split. The poll is short
 * because on a shared machine the thread being waited for may have lost its core to another
 * process, and a poller then only takes CPU time from it (and from the other process).
 */
#include "autograd/ag_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SPIN_NS 50000    /* polling before sleeping: at most 50 us */
#define SPIN_MIN_NS 2000 /* and at least 2 us */

/* The polling budget (ns) of each kind of wait, adapted to how waits end: halved (down to
 * SPIN_MIN_NS) when a poll runs out, doubled (up to SPIN_NS) when the awaited event comes while
 * polling. Alone on a machine the threads find each other while polling and the budget stays
 * high; when another process takes the cores, the thread being waited for is often off its
 * core, the polls run out, and the waiting thread soon sleeps at once instead of taking CPU
 * time from it. Timing only: which thread runs a range never changes a bit. */
enum { WAIT_REGION, WAIT_END };
static _Atomic int32_t spin_budget[2] = {SPIN_NS, SPIN_NS};

/* Starved workers. A worker's range should take about as much CPU time as wall time; when
 * another process holds the machine and the scheduler gives this process about one core's
 * worth of time (as it does to a session beside another, with Linux's autogroups), the threads
 * take turns on it and every region waits for the one off its core: one thread alone is then
 * faster. So workers add up the wall and CPU time of the ranges and tasks they run (laps), and
 * each STARVED_WINDOW_NS of their wall time is judged (starved(), by the caller as a region
 * starts and by a worker before it takes a task): below STARVED_RATIO of CPU time in two windows
 * in a row, the regions of the next serial_ns run every range in the caller (the same cut: the
 * same bits) and workers take no more tasks, then the workers are tried again. serial_ns doubles
 * (up to SERIAL_MAX_NS) each time the starving goes on and falls back to SERIAL_MIN_NS when a
 * window is not starved, so a passing hiccup costs little and a lasting competitor is probed
 * rarely. Beside a competitor that leaves each thread more than the ratio (three threads on two
 * cores: two thirds each), the threads stay parallel. This is the only starvation rule of the
 * engine: ag_parallel_for, ag_run_tasks and everything built on them follow it. */
#define STARVED_RATIO 0.6
#define STARVED_WINDOW_NS 10000000 /* 10 ms */
#define SERIAL_MIN_NS 250000000    /* 250 ms */
#define SERIAL_MAX_NS 4000000000   /* 4 s */
static _Atomic int64_t worker_wall_ns, worker_cpu_ns;
static pthread_mutex_t judge_mu = PTHREAD_MUTEX_INITIALIZER; /* guards the two below */
static int64_t serial_ns = SERIAL_MIN_NS;
static int starved_windows;            /* in a row */
static _Atomic int64_t serial_until;   /* regions before this time run in the caller */
static ag_starve_hook hook;            /* tests: a clock and starved workers (ag_set_starve_hook) */
static _Thread_local int worker_index; /* 1 to nthreads - 1 in a pool worker, 0 elsewhere */

static int64_t now_ns(void);
static int64_t thread_cpu_ns(void);

/* The time of the rule: the clock's, or the hook's. */
static int64_t rule_now(void) { return hook.now ? hook.now(hook.user) : now_ns(); }

typedef struct lap {
    int64_t wall, cpu;
} lap;

static lap lap_begin(void) { return hook.now ? (lap){0, 0} : (lap){now_ns(), thread_cpu_ns()}; }

/* Adds the wall and CPU time since l to the workers' (under the hook: one window, with no CPU
 * time when the hook says this worker is starved). */
static void lap_end(lap l) {
    int64_t wall, cpu;
    if (hook.now) {
        wall = STARVED_WINDOW_NS;
        cpu = hook.starved && hook.starved(worker_index, hook.user) ? 0 : wall;
    } else {
        wall = now_ns() - l.wall;
        cpu = thread_cpu_ns() - l.cpu;
    }
    atomic_fetch_add(&worker_wall_ns, wall);
    atomic_fetch_add(&worker_cpu_ns, cpu);
}

/* Judges the workers' last window, once it is long enough, and returns whether they are left
 * out now. */
static bool starved(void) {
    if (atomic_load(&worker_wall_ns) >= STARVED_WINDOW_NS) {
        pthread_mutex_lock(&judge_mu);
        int64_t wall = atomic_exchange(&worker_wall_ns, 0);
        int64_t cpu = atomic_exchange(&worker_cpu_ns, 0);
        if (wall < STARVED_WINDOW_NS) { /* another thread judged this window meanwhile */
            atomic_fetch_add(&worker_wall_ns, wall);
            atomic_fetch_add(&worker_cpu_ns, cpu);
        } else if ((double)cpu >= STARVED_RATIO * (double)wall) {
            starved_windows = 0;
            serial_ns = SERIAL_MIN_NS;
        } else if (++starved_windows >= 2) {
            starved_windows = 0;
            atomic_store(&serial_until, rule_now() + serial_ns);
            serial_ns = 2 * serial_ns < SERIAL_MAX_NS ? 2 * serial_ns : SERIAL_MAX_NS;
        }
        pthread_mutex_unlock(&judge_mu);
    }
    int64_t until = atomic_load(&serial_until);
    return until && rule_now() < until;
}

/* A new judgment of the workers (a new thread count, a new hook); no region runs. */
static void judge_afresh(void) {
    pthread_mutex_lock(&judge_mu);
    atomic_store(&serial_until, 0);
    serial_ns = SERIAL_MIN_NS;
    starved_windows = 0;
    atomic_store(&worker_wall_ns, 0);
    atomic_store(&worker_cpu_ns, 0);
    pthread_mutex_unlock(&judge_mu);
}

/* The region word: generation (40 bits, wrapping) | ranges (12 bits) | next range (12 bits);
 * ranges <= 256 threads. */
#define GEN_MASK ((UINT64_C(1) << 40) - 1)
#define WORD(gen, ranges, next) (((gen) << 24) | ((uint64_t)(ranges) << 12) | (uint64_t)(next))
#define GEN_OF(w) ((w) >> 24)
#define RANGES_OF(w) ((int)(((w) >> 12) & 0xfff))
#define NEXT_OF(w) ((int)((w)&0xfff))

typedef void (*range_fn)(void *ctx, ptrdiff_t begin, ptrdiff_t end);

static struct {
    pthread_mutex_t mu; /* for sleeping and waking only */
    pthread_cond_t start, done;
    pthread_mutex_t region; /* held by the caller of a parallel region, and by set_threads */
    pthread_t *workers;
    int nthreads;               /* workers + the caller */
    uint64_t gen;               /* the last region's generation; written under region */
    _Atomic uint64_t word;      /* the current region (see WORD); workers run when GEN_OF changes */
    _Atomic int finished;       /* ranges of the current region run to their end */
    _Atomic int sleepers;       /* workers asleep on start */
    _Atomic bool caller_sleeps; /* the caller is asleep on done */
    _Atomic bool quit;
    range_fn fn; /* the current region, published before word changes */
    void *ctx;
    ptrdiff_t n;
    bool lap_ranges; /* workers time each range (a task region times each task instead) */
} pool = {PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          PTHREAD_MUTEX_INITIALIZER,
          NULL,
          1,
          0,
          0,
          0,
          0,
          false,
          false,
          NULL,
          NULL,
          0,
          true};

typedef struct worker_arg {
    uint64_t seen; /* the generation when the worker was created */
    int index;     /* 1 to nthreads - 1 */
} worker_arg;

/* In a pool worker, or in the caller of a running region: a region started here runs
 * serially. */
static _Thread_local bool in_region;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Polls done(arg) for about the budget of this kind of wait, and adapts the budget; returns
 * whether done became true. The clock is read once every 32 polls (a poll is a pause, 10 to 150
 * cycles depending on the CPU). */
static bool spin(int kind, bool (*done)(const void *), const void *arg) {
    int32_t budget = atomic_load_explicit(&spin_budget[kind], memory_order_relaxed);
    int64_t until = 0;
    for (int i = 0;; i++) {
        if (done(arg)) {
            if (budget < SPIN_NS)
                atomic_store_explicit(&spin_budget[kind],
                                      budget * 2 < SPIN_NS ? budget * 2 : SPIN_NS,
                                      memory_order_relaxed);
            return true;
        }
        if ((i & 31) == 31) {
            int64_t t = now_ns();
            if (!until) {
                until = t + budget;
            } else if (t >= until) {
                if (budget > SPIN_MIN_NS)
                    atomic_store_explicit(&spin_budget[kind],
                                          budget / 2 > SPIN_MIN_NS ? budget / 2 : SPIN_MIN_NS,
                                          memory_order_relaxed);
                return false;
            }
        }
        cpu_relax();
    }
}

/* A region other than generation *seen has started, or the pool quits. */
static bool region_changed(const void *seen) {
    return GEN_OF(atomic_load(&pool.word)) != *(const uint64_t *)seen || atomic_load(&pool.quit);
}

/* Every range of the current region has finished (*ranges of them). */
static bool all_finished(const void *ranges) {
    return atomic_load(&pool.finished) == *(const int *)ranges;
}

/* Claims the next unclaimed range of generation gen: its index (and the region's number of
 * ranges in *ranges), or -1 if the region has no range left or is no longer the current one. */
static int claim(uint64_t gen, int *ranges) {
    uint64_t w = atomic_load(&pool.word);
    while (GEN_OF(w) == gen && NEXT_OF(w) < RANGES_OF(w))
        if (atomic_compare_exchange_weak(&pool.word, &w, w + 1)) {
            *ranges = RANGES_OF(w);
            return NEXT_OF(w);
        }
    return -1;
}

static int64_t thread_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Runs range s of the current region (of `ranges`) and counts it finished. A claimed range
 * keeps its region running, so pool.fn, ctx and n are still the region's. In a worker, the
 * range is timed (a lap) unless the region times its tasks itself; the lap is added up before
 * the range counts as finished, so the caller of the next region sees it. */
static void run_range(int s, int ranges, bool worker) {
    bool timed = worker && pool.lap_ranges;
    lap l = timed ? lap_begin() : (lap){0, 0};
    ptrdiff_t n = pool.n, b = n * s / ranges, e = n * (s + 1) / ranges;
    if (b < e) pool.fn(pool.ctx, b, e);
    if (timed) lap_end(l);
    if (atomic_fetch_add(&pool.finished, 1) + 1 == ranges && atomic_load(&pool.caller_sleeps)) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_signal(&pool.done);
        pthread_mutex_unlock(&pool.mu);
    }
}

static void *worker_main(void *p) {
    uint64_t seen = ((worker_arg *)p)->seen;
    worker_index = ((worker_arg *)p)->index;
    free(p);
    in_region = true;
    for (;;) {
        if (!spin(WAIT_REGION, region_changed, &seen)) {
            pthread_mutex_lock(&pool.mu);
            atomic_fetch_add(&pool.sleepers, 1);
            while (!region_changed(&seen)) pthread_cond_wait(&pool.start, &pool.mu);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.mu);
        }
        if (atomic_load(&pool.quit)) break;
        seen = GEN_OF(atomic_load(&pool.word));
        int ranges, s;
        while ((s = claim(seen, &ranges)) >= 0) run_range(s, ranges, true);
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
    judge_afresh();
    if (n != pool.nthreads) {
        stop_workers();
        pool.workers = n > 1 ? calloc((size_t)n - 1, sizeof *pool.workers) : NULL;
        int started = 0;
        while (pool.workers && started < n - 1) {
            worker_arg *arg = malloc(sizeof *arg);
            if (!arg) break;
            *arg = (worker_arg){pool.gen, started + 1};
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

int ag_set_starve_hook(const ag_starve_hook *h) {
    if (h && !h->now) return ag_error("set_starve_hook: the hook has no clock (now is NULL)");
    pthread_mutex_lock(&pool.region);
    hook = h ? *h : (ag_starve_hook){NULL, NULL, NULL};
    judge_afresh();
    pthread_mutex_unlock(&pool.region);
    return 0;
}

int ag_threads_asleep(void) { return atomic_load(&pool.sleepers); }

/* Takes the pool for a region started by this thread: false (the region then runs serially)
 * with one thread, inside another region, or while another thread holds the pool. */
static bool region_begin(void) {
    if (pool.nthreads < 2 || in_region || pthread_mutex_trylock(&pool.region)) return false;
    in_region = true;
    return true;
}

static void region_end(void) {
    in_region = false;
    pthread_mutex_unlock(&pool.region);
}

/* Runs fn over [0, n) cut into `ranges` ranges on the pool (taken by region_begin): the caller
 * runs range 0, then claims ranges with the workers, then waits for the ranges they claimed. */
static void region_run(range_fn fn, void *ctx, ptrdiff_t n, int ranges, bool lap_ranges) {
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.lap_ranges = lap_ranges;
    atomic_store(&pool.finished, 0);
    pool.gen = (pool.gen + 1) & GEN_MASK;
    atomic_store(&pool.word, WORD(pool.gen, ranges, 1)); /* publishes the fields above */
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.start);
        pthread_mutex_unlock(&pool.mu);
    }
    run_range(0, ranges, false);
    int s, r;
    while ((s = claim(pool.gen, &r)) >= 0) run_range(s, r, false);
    if (!spin(WAIT_END, all_finished, &ranges)) {
        pthread_mutex_lock(&pool.mu);
        atomic_store(&pool.caller_sleeps, true);
        while (!all_finished(&ranges)) pthread_cond_wait(&pool.done, &pool.mu);
        atomic_store(&pool.caller_sleeps, false);
        pthread_mutex_unlock(&pool.mu);
    }
}

void ag_parallel_for(ptrdiff_t n, ptrdiff_t min_per_thread, range_fn fn, void *ctx) {
    if (min_per_thread < 1) min_per_thread = 1;
    if (n / min_per_thread < 2 || !region_begin()) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    int ranges = pool.nthreads;
    if (starved()) { /* every range here, with the same cut */
        for (int s = 0; s < ranges; s++) {
            ptrdiff_t b = n * s / ranges, e = n * (s + 1) / ranges;
            if (b < e) fn(ctx, b, e);
        }
    } else {
        region_run(fn, ctx, n, ranges, true);
    }
    region_end();
}

/* ---- blocks: regions whose cut changes nothing, shared with idle task threads ---- */

/* A region of blocks started inside a task: its owner (the task's thread) and the call's
 * threads that have run out of tasks claim its blocks one at a time. The slot's word holds the
 * region: generation (24 bits, wrapping) | blocks (20 bits) | next block (20 bits); the other
 * fields are stored before the word publishes them and change only once every block of the
 * generation has finished. So a thread that read them between loading the word and a
 * successful claim (a compare-exchange of that same word; within a generation next only grows,
 * so the word does not come back) read the region it claimed from. */
#define HGEN_OF(w) ((w) >> 40)
#define HBLOCKS_OF(w) ((ptrdiff_t)(((w) >> 20) & 0xfffff))
#define HNEXT_OF(w) ((ptrdiff_t)((w)&0xfffff))
#define HMAX_BLOCKS 0xfffff

typedef struct help_slot {
    _Alignas(64) _Atomic uint64_t word;
    _Atomic ptrdiff_t finished; /* blocks */
    _Atomic ptrdiff_t n, block;
    _Atomic(range_fn) fn;
    _Atomic(void *) ctx;
} help_slot;

static help_slot help[256];              /* one per thread of a task region */
static _Thread_local help_slot *my_help; /* the slot of the task this thread runs, or NULL */

/* Claims and runs one block of slot h's region: false if none was left to claim. */
static bool help_one(help_slot *h) {
    uint64_t w = atomic_load(&h->word);
    if (HNEXT_OF(w) >= HBLOCKS_OF(w)) return false;
    range_fn fn = atomic_load(&h->fn);
    void *ctx = atomic_load(&h->ctx);
    ptrdiff_t n = atomic_load(&h->n), block = atomic_load(&h->block);
    if (!atomic_compare_exchange_strong(&h->word, &w, w + 1)) return true; /* look again */
    ptrdiff_t b = HNEXT_OF(w) * block, e = b + block < n ? b + block : n;
    fn(ctx, b, e);
    atomic_fetch_add(&h->finished, 1);
    return true;
}

void ag_parallel_blocks(ptrdiff_t n, ptrdiff_t block, range_fn fn, void *ctx) {
    if (block < 1) block = 1;
    help_slot *h = my_help;
    ptrdiff_t blocks = n > 0 ? (n - 1) / block + 1 : 0;
    if (!h || blocks < 2 || blocks > HMAX_BLOCKS) {
        ag_parallel_for(n, block, fn, ctx);
        return;
    }
    uint64_t gen = (HGEN_OF(atomic_load(&h->word)) + 1) & 0xffffff;
    atomic_store(&h->fn, fn);
    atomic_store(&h->ctx, ctx);
    atomic_store(&h->n, n);
    atomic_store(&h->block, block);
    atomic_store(&h->finished, 0);
    atomic_store(&h->word, gen << 40 | (uint64_t)blocks << 20); /* publishes the fields above */
    my_help = NULL; /* a region inside fn runs serially */
    while (help_one(h)) {}
    my_help = h;
    while (atomic_load(&h->finished) < blocks) cpu_relax(); /* the blocks helpers claimed */
}

/* ---- tasks ---- */

typedef struct task_job {
    int n;
    ag_task_fn fn;
    void *ctx;
    ag_task_result *results; /* (n), or NULL */
    _Atomic int next;        /* the next task to take */
    _Atomic int active;      /* tasks being taken or run */
    int threads;             /* of the region: their help slots */
    _Atomic bool stop;       /* a task failed: take no more */
    pthread_mutex_t mu;      /* guards the two below */
    int failed;              /* the lowest task that failed, or n */
    char err[AG_TASK_ERROR_MAX];
} task_job;

/* Runs task i in thread `thread` of the call and records how it ended. */
static void run_task(task_job *j, int i, int thread) {
    int rc = j->fn(j->ctx, i, thread);
    if (!rc) {
        if (j->results) j->results[i].status = AG_TASK_DONE;
        return;
    }
    const char *msg = ag_last_error()[0] ? ag_last_error() : "(no message)";
    if (j->results) {
        j->results[i].status = AG_TASK_FAILED;
        snprintf(j->results[i].error, sizeof j->results[i].error, "%s", msg);
    }
    atomic_store(&j->stop, true);
    pthread_mutex_lock(&j->mu);
    if (i < j->failed) {
        j->failed = i;
        snprintf(j->err, sizeof j->err, "%s", msg);
    }
    pthread_mutex_unlock(&j->mu);
}

/* Range `thread` of a task region: tasks taken one at a time, in order of index, until none is
 * left or one failed; then, while other threads still run tasks, the blocks of their
 * ag_parallel_blocks regions. A worker times each task (a lap) and takes none while the workers
 * are starved; the caller goes on until the tasks run out. No thread polls for blocks then. */
static void task_range(void *ctx, ptrdiff_t thread, ptrdiff_t end) {
    task_job *j = ctx;
    (void)end;
    bool worker = worker_index > 0;
    while (!atomic_load(&j->stop) && !(worker && starved())) {
        if (atomic_load(&j->next) >= j->n) break;
        atomic_fetch_add(&j->active, 1);
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n) {
            atomic_fetch_sub(&j->active, 1);
            break;
        }
        lap l = worker ? lap_begin() : (lap){0, 0};
        my_help = &help[thread];
        run_task(j, i, (int)thread);
        my_help = NULL;
        if (worker) lap_end(l);
        atomic_fetch_sub(&j->active, 1);
    }
    for (int idle = 0; atomic_load(&j->active) > 0;) {
        bool helped = false;
        for (int t = 0; t < j->threads; t++)
            if (t != thread) helped |= help_one(&help[t]);
        if (helped) continue;
        if (++idle % 64 == 0 && starved()) break; /* then no core to spare for polling */
        cpu_relax();
    }
}

/* Every task in the caller, in order, as thread 0. */
static void tasks_in_caller(task_job *j) {
    for (int i; !atomic_load(&j->stop) && (i = atomic_load(&j->next)) < j->n;) {
        atomic_store(&j->next, i + 1);
        run_task(j, i, 0);
    }
}

int ag_run_tasks(int n, ag_task_fn fn, void *ctx, ag_task_result *results) {
    if (n < 0) return ag_error("run_tasks: %d tasks (expected 0 or more)", n);
    task_job j = {.n = n, .fn = fn, .ctx = ctx, .results = results, .failed = n};
    atomic_init(&j.next, 0);
    atomic_init(&j.active, 0);
    atomic_init(&j.stop, false);
    pthread_mutex_init(&j.mu, NULL);
    for (int i = 0; results && i < n; i++) {
        results[i].status = AG_TASK_SKIPPED;
        results[i].error[0] = '\0';
    }
    if (n >= 2 && region_begin()) {
        int ranges = n < pool.nthreads ? n : pool.nthreads;
        j.threads = ranges;
        if (starved()) tasks_in_caller(&j);
        else region_run(task_range, &j, ranges, ranges, false);
        region_end();
    } else {
        tasks_in_caller(&j); /* ops inside may use the pool, when free */
    }
    pthread_mutex_destroy(&j.mu);
    return j.failed < n ? ag_error("%s", j.err) : 0;
}
