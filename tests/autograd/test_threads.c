/* test_threads.c -- ag_parallel_for: every index runs exactly once, the ranges are the fixed cut
 * [n s / T, n (s + 1) / T) whatever thread runs them, the caller runs range 0, regions nested in
 * a range or started beside a running one run serially, two application threads starting regions
 * at once, thread counts changed between regions, workers woken from sleep, and many tiny
 * regions in a row (a worker waking late must not run a range of a later region), and a worker
 * starved of CPU left out (ag_run_tasks: test_tasks.c).
 *
 * No test depends on the scheduler's timing: starvation is injected (ag_set_starve_hook: a fake
 * clock and a worker counted as starved), workers are seen asleep (ag_threads_asleep) instead of
 * slept for, and where a worker must run something, the caller's range waits until one has (a
 * wait bounded at 10 s, far beyond any wake-up, so a lost wake-up fails instead of hanging).
 *
 * CUnit is not thread-safe: ranges record what they saw, and only the main thread asserts. */
#include "autograd/ag.h"
#include "tests/autograd/thread_test.h"
#include "tests/tg_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>

#define MAX_N 5000
#define MAX_CALLS 600

/* What one region saw: per-index run counts and the ranges fn was called with. */
typedef struct seen {
    _Atomic int count[MAX_N];
    _Atomic int calls;
    ptrdiff_t begin[MAX_CALLS], end[MAX_CALLS];
    bool by_caller[MAX_CALLS];
    pthread_t caller;
    int nested_n;             /* > 0: every range also starts a region of this size */
    _Atomic int nested_bad;   /* nested regions not run as one serial call in their thread */
    _Atomic int wait_workers; /* > 0: range 0 waits (at most 10 s) until a worker ran a range */
    _Atomic int worker_ranges;
} seen;

static void reset(seen *s, pthread_t caller) {
    memset(s, 0, sizeof *s);
    s->caller = caller;
}

static void record(void *ctx, ptrdiff_t b, ptrdiff_t e) {
    seen *s = ctx;
    bool by_caller = pthread_equal(pthread_self(), s->caller);
    if (!by_caller) atomic_fetch_add(&s->worker_ranges, 1);
    if (b == 0 && atomic_load(&s->wait_workers)) {
        double t0 = now_s();
        while (!atomic_load(&s->worker_ranges) && now_s() - t0 < 10) {}
    }
    int k = atomic_fetch_add(&s->calls, 1);
    if (k < MAX_CALLS) {
        s->begin[k] = b;
        s->end[k] = e;
        s->by_caller[k] = by_caller;
    }
    for (ptrdiff_t i = b; i < e && i < MAX_N; i++) atomic_fetch_add(&s->count[i], 1);
    if (s->nested_n > 0) {
        nested_seen ns = {pthread_self(), 0, 0};
        ag_parallel_for(s->nested_n, 1, nested_fn, &ns);
        if (ns.calls != 1 || ns.bad) atomic_fetch_add(&s->nested_bad, 1);
    }
}

static int cmp_begin(const void *a, const void *b) {
    ptrdiff_t x = *(const ptrdiff_t *)a, y = *(const ptrdiff_t *)b;
    return (x > y) - (x < y);
}

/* Checks a region of n indices with the given grain on `threads` threads: returns the number of
 * problems found (0: every index once; the expected cut; range 0 run by the caller). */
static int check_region(seen *s, ptrdiff_t n, ptrdiff_t grain, int threads) {
    int bad = 0, calls = atomic_load(&s->calls);
    for (ptrdiff_t i = 0; i < n; i++) bad += atomic_load(&s->count[i]) != 1;
    if (calls > MAX_CALLS) return bad + 1;
    ptrdiff_t g = grain < 1 ? 1 : grain;
    bool parallel = threads > 1 && n / g >= 2;
    /* the cut: one range per thread, empty ones not called */
    ptrdiff_t want[256 + 1];
    int nwant = 0;
    if (!parallel) {
        if (n > 0) want[nwant++] = 0;
    } else {
        for (int r = 0; r < threads; r++)
            if (n * r / threads < n * (r + 1) / threads) want[nwant++] = n * r / threads;
    }
    if (calls != nwant) return bad + 1;
    for (int k = 0; k < calls; k++) {
        ptrdiff_t b = s->begin[k], e = s->end[k];
        if (b == 0 && e == n / (parallel ? threads : 1) && !s->by_caller[k])
            bad++; /* the caller runs range 0 (when not empty) */
        if (!parallel && (b != 0 || e != n || !s->by_caller[k])) bad++;
        if (parallel) {
            int r = 0; /* the range [b, e) is (empty ones aside, unique) */
            while (r < threads && (n * r / threads != b || n * (r + 1) / threads != e)) r++;
            if (r == threads) bad++;
        }
    }
    ptrdiff_t got[MAX_CALLS];
    for (int k = 0; k < calls; k++) got[k] = s->begin[k];
    qsort(got, (size_t)calls, sizeof *got, cmp_begin);
    for (int k = 0; k < calls; k++) bad += got[k] != want[k];
    return bad;
}

static seen S; /* big: static */

/* Many sizes and grains on 1 to 7 threads, and 64 threads (more than the cores). */
static void test_every_index_once(void) {
    static const ptrdiff_t ns[] = {0, 1, 2, 3, 5, 7, 8, 63, 64, 65, 100, 257, 1000, 4097, MAX_N};
    static const ptrdiff_t grains[] = {-1, 0, 1, 2, 3, 7, 64, 1000};
    static const int threads[] = {1, 2, 3, 4, 7, 64};
    int bad = 0, regions = 0;
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(threads[t]), 0);
        CU_ASSERT_EQUAL(ag_threads(), threads[t]);
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
            for (size_t g = 0; g < sizeof grains / sizeof *grains + 2; g++) {
                ptrdiff_t n = ns[i];
                /* and the grains at the edge: n / 2 (parallel) and n / 2 + 1 (serial) */
                ptrdiff_t grain = g < sizeof grains / sizeof *grains    ? grains[g]
                                  : g == sizeof grains / sizeof *grains ? n / 2
                                                                        : n / 2 + 1;
                reset(&S, pthread_self());
                ag_parallel_for(n, grain, record, &S);
                int b = check_region(&S, n, grain, threads[t]);
                if (b)
                    printf("\n  n %td grain %td threads %d: %d problems", n, grain, threads[t], b);
                bad += b;
                regions++;
            }
    }
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(regions, 6 * 15 * 10);
}

/* A region started inside a range runs serially, in the thread running the range. */
static void test_nested_serial(void) {
    for (int t = 2; t <= 4; t++) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(t), 0);
        for (int rep = 0; rep < 50; rep++) {
            reset(&S, pthread_self());
            S.nested_n = 100;
            ag_parallel_for(1000, 1, record, &S);
            CU_ASSERT_EQUAL(check_region(&S, 1000, 1, t), 0);
            CU_ASSERT_EQUAL(atomic_load(&S.nested_bad), 0);
        }
    }
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
}

/* Waits until the pool's n workers are asleep (bounded at 10 s); returns whether they are. */
static bool workers_asleep(int n) {
    double t0 = now_s();
    while (ag_threads_asleep() != n && now_s() - t0 < 10) sched_yield();
    return ag_threads_asleep() == n;
}

/* Workers asleep (after idling past their polling) are woken and run ranges: range 0 waits until
 * a worker has run one. */
static void test_workers_wake_and_run(void) {
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(3), 0);
    for (int rep = 0; rep < 5; rep++) {
        CU_ASSERT(workers_asleep(2));
        reset(&S, pthread_self());
        atomic_store(&S.wait_workers, 1);
        ag_parallel_for(3000, 1, record, &S);
        CU_ASSERT_EQUAL(check_region(&S, 3000, 1, 3), 0);
        CU_ASSERT(atomic_load(&S.worker_ranges) >= 1);
    }
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
}

/* Tiny regions back to back, each on its own buffer: a worker that wakes late (its region
 * already over) must claim nothing of it, nor run a range of a later region with a stale cut. */
static void test_many_tiny_regions(void) {
    static seen two[2];
    int bad = 0;
    for (int t = 2; t <= 4; t += 2) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(t), 0);
        for (int r = 0; r < 20000; r++) {
            seen *s = &two[r & 1];
            ptrdiff_t n = 2 + r % 13;
            reset(s, pthread_self());
            ag_parallel_for(n, 1, record, s);
            bad += check_region(s, n, 1, t) != 0;
            /* the other buffer, of the previous region, must not have changed since */
            seen *o = &two[!(r & 1)];
            if (r > 0) bad += check_region(o, 2 + (r - 1) % 13, 1, t) != 0;
        }
    }
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
    CU_ASSERT_EQUAL(bad, 0);
}

/* Two application threads starting regions at once: one gets the pool, the other runs its
 * region serially; both see every index once. */
typedef struct app_thread {
    seen *s;
    int threads, bad;
} app_thread;

static void *app_main(void *p) {
    app_thread *a = p;
    for (int r = 0; r < 3000; r++) {
        ptrdiff_t n = 1 + (r * 37) % MAX_N;
        reset(a->s, pthread_self());
        ag_parallel_for(n, 1, record, a->s);
        /* serial or parallel, depending on who got the pool: accept either cut */
        if (check_region(a->s, n, 1, a->threads) && check_region(a->s, n, 1, 1)) a->bad++;
    }
    return NULL;
}

static void test_concurrent_callers(void) {
    static seen s[2];
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
    app_thread a[2] = {{&s[0], 2, 0}, {&s[1], 2, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, app_main, &a[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CU_ASSERT_EQUAL(a[0].bad, 0);
    CU_ASSERT_EQUAL(a[1].bad, 0);
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
}

/* The thread count changed between regions, up and down and to the same count; errors. */
static void test_set_threads_changes(void) {
    static const int seq[] = {2, 5, 1, 3, 3, 8, 2, 1, 4};
    int bad = 0;
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(seq[i]), 0);
        CU_ASSERT_EQUAL(ag_threads(), seq[i]);
        for (int r = 0; r < 200; r++) {
            ptrdiff_t n = 1 + (r * 101) % MAX_N;
            reset(&S, pthread_self());
            ag_parallel_for(n, 3, record, &S);
            bad += check_region(&S, n, 3, seq[i]) != 0;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ag_set_threads(0), -1);
    CU_ASSERT_EQUAL(ag_set_threads(257), -1);
    CU_ASSERT_EQUAL(ag_threads(), 4); /* unchanged by a refused count */
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
    CU_ASSERT_EQUAL(ag_threads(), 1);
}

/* Products give the same bits with 1 and 2 threads (the cut of ag_gemm depends on the rows
 * alone): heights around its block size, the shapes of the whole-corpus Transformer (rows of a
 * 4,096-token batch, d_model 256, the FFN's 1,024), and 40 random shapes of 128-527 rows and
 * 16-315 columns, where a cut per thread used to change bits (BLIS's small-size kernels). */
static void test_matmul_bits_do_not_depend_on_threads(void) {
    static const int dims[][3] = {
        {1023, 256, 256}, {1024, 256, 1024}, {1500, 300, 310}, {2048, 1024, 256}, {4096, 256, 256},
        {1537, 231, 257}, {293, 93, 218},    {461, 40, 53},    {402, 64, 203},    {426, 45, 275},
        {237, 35, 60},    {350, 230, 51},    {251, 62, 298},   {345, 46, 305},    {191, 130, 314},
        {159, 311, 315},  {331, 41, 129},    {151, 301, 84},   {276, 230, 89},    {404, 76, 308},
        {285, 302, 108},  {180, 313, 308},   {455, 112, 206},  {177, 296, 48},    {416, 46, 121},
        {382, 288, 234},  {525, 176, 254},   {427, 248, 201},  {281, 143, 108},   {485, 140, 57},
        {422, 169, 284},  {381, 191, 245},   {275, 53, 76},    {390, 230, 100},   {515, 191, 93},
        {378, 231, 36},   {470, 55, 301},    {421, 176, 190},  {483, 195, 270},   {424, 249, 51},
        {175, 154, 258},  {484, 49, 47},     {502, 174, 311},  {476, 244, 161},   {494, 213, 193},
        {139, 252, 197}};
    for (size_t d = 0; d < sizeof dims / sizeof *dims; d++) {
        int m = dims[d][0], k = dims[d][1], n = dims[d][2];
        ag_tensor *a = ag_leaf_new(AG_SHAPE(m, k), false), *b = ag_leaf_new(AG_SHAPE(k, n), false);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        uint64_t x = 88172645463325252ULL;
        for (ptrdiff_t i = 0; i < a->numel; i++)
            x ^= x << 13, x ^= x >> 7, x ^= x << 17,
                a->data[i] = (ag_real)((double)(x >> 11) / 9007199254740992.0 - 0.5);
        for (ptrdiff_t i = 0; i < b->numel; i++)
            x ^= x << 13, x ^= x >> 7, x ^= x << 17,
                b->data[i] = (ag_real)((double)(x >> 11) / 9007199254740992.0 - 0.5);
        ag_real *y[2] = {NULL, NULL};
        for (int t = 0; t < 2; t++) {
            CU_ASSERT_EQUAL_FATAL(ag_set_threads(t + 1), 0);
            ag_tape *tape = ag_tape_new();
            ag_tensor *c = ag_matmul(tape, a, b);
            CU_ASSERT_PTR_NOT_NULL_FATAL(c);
            y[t] = malloc(sizeof *y[t] * (size_t)c->numel);
            memcpy(y[t], c->data, sizeof *y[t] * (size_t)c->numel);
            ag_tape_free(tape);
        }
        if (memcmp(y[0], y[1], sizeof *y[0] * (size_t)m * n)) {
            CU_FAIL("1 and 2 threads give other bits");
            fprintf(stderr, "\n  %d x %d x %d\n", m, k, n);
        }
        free(y[0]);
        free(y[1]);
        ag_leaf_free(a);
        ag_leaf_free(b);
    }
    ag_set_threads(1);
}

/* ---- starvation, injected (thread_test.h): a fake clock, worker 1 counted starved or not ---- */

/* One region of 100 indices on 2 threads; returns the number of problems. worker: the worker
 * must run range 1 (range 0 waits until it has); else the caller must run both ranges (the
 * workers are left out), with the same cut. */
static int region_2(bool worker) {
    reset(&S, pthread_self());
    atomic_store(&S.wait_workers, worker);
    ag_parallel_for(100, 1, record, &S);
    return check_region(&S, 100, 1, 2) + (atomic_load(&S.worker_ranges) != (worker ? 1 : 0));
}

/* Each range of a starved worker is one window below the ratio: two of them, judged as the
 * next regions start, leave the worker out for 250 ms of the hook's clock, then 500 ms if it
 * is still starved when tried again; a window with its CPU time resets the doubling; a new
 * thread count (here the same) starts a new judgment. */
static void test_starved_worker_left_out(void) {
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
    hook_on(true);
    CU_ASSERT_EQUAL(region_2(true), 0);
    CU_ASSERT_EQUAL(region_2(true), 0);                              /* one starved window judged */
    for (int r = 0; r < 5; r++) CU_ASSERT_EQUAL(region_2(false), 0); /* two: left out */
    advance_ms(249);
    CU_ASSERT_EQUAL(region_2(false), 0);
    advance_ms(1);
    CU_ASSERT_EQUAL(region_2(true), 0); /* tried again, still starved */
    CU_ASSERT_EQUAL(region_2(true), 0);
    CU_ASSERT_EQUAL(region_2(false), 0); /* left out for 500 ms */
    advance_ms(250);
    CU_ASSERT_EQUAL(region_2(false), 0);
    advance_ms(250);
    CU_ASSERT_EQUAL(region_2(true), 0);
    atomic_store(&worker_starved, false);
    CU_ASSERT_EQUAL(region_2(true), 0); /* a window with its CPU time in it */
    atomic_store(&worker_starved, true);
    CU_ASSERT_EQUAL(region_2(true), 0); /* judged: back to 250 ms */
    CU_ASSERT_EQUAL(region_2(true), 0);
    CU_ASSERT_EQUAL(region_2(false), 0);
    advance_ms(250);
    CU_ASSERT_EQUAL(region_2(true), 0);
    CU_ASSERT_EQUAL(region_2(true), 0);
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0); /* afresh: two more windows needed */
    CU_ASSERT_EQUAL(region_2(true), 0);
    CU_ASSERT_EQUAL(region_2(true), 0);
    CU_ASSERT_EQUAL(region_2(false), 0);
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0); /* afresh while left out: back at once */
    CU_ASSERT_EQUAL(region_2(true), 0);
    CU_ASSERT_EQUAL(ag_set_starve_hook(&(ag_starve_hook){NULL, fake_starved, NULL}), -1);
    hook_off();
}

/* A worker given as much CPU time as wall time is never left out. */
static void test_fed_worker_stays(void) {
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
    hook_on(false);
    int bad = 0;
    for (int r = 0; r < 40; r++) bad += region_2(true);
    CU_ASSERT_EQUAL(bad, 0);
    hook_off();
}

static CU_TestInfo tests[] = {
    {"matmul: the same bits with 1 and 2 threads", test_matmul_bits_do_not_depend_on_threads},
    {"every index once, the fixed cut, range 0 in the caller", test_every_index_once},
    {"a region inside a range runs serially in its thread", test_nested_serial},
    {"sleeping workers wake and run ranges", test_workers_wake_and_run},
    {"tiny regions back to back: no range runs twice or late", test_many_tiny_regions},
    {"two application threads start regions at once", test_concurrent_callers},
    {"thread counts changed between regions", test_set_threads_changes},
    {"a starved worker is left out for a while (injected)", test_starved_worker_left_out},
    {"a worker given its CPU time stays in (injected)", test_fed_worker_stays},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("threads", tests); }
