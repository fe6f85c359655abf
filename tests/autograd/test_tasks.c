/* test_tasks.c -- ag_run_tasks: every task once, taken in order of index, thread numbers in
 * range and unique among running tasks (0: the caller), the first failing task's error (by
 * index) whatever the thread count, results per task, errors recorded in a worker reaching the
 * caller, nested calls run in order in their thread, a starved worker taking no more tasks; and
 * ag_parallel_blocks: blocks of a task shared with the threads whose tasks have ended.
 *
 * No test depends on the scheduler's timing: starvation is injected (ag_set_starve_hook: a fake
 * clock and a worker counted as starved), and where a worker must run tasks, the caller's first
 * task waits until it has (a wait bounded at 10 s, far beyond any wake-up).
 *
 * CUnit is not thread-safe: tasks record what they saw, and only the main thread asserts. */
#include "autograd/ag.h"
#include "tests/autograd/thread_test.h"
#include "tests/tg_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MAX_TASKS 600

/* What one ag_run_tasks call saw. */
typedef struct task_seen {
    int n;
    pthread_t caller;
    _Atomic int runs[MAX_TASKS];
    int thread[MAX_TASKS];
    _Atomic int busy[256]; /* tasks running on each thread number */
    _Atomic int last[256]; /* the last task each thread number took (-1: none) */
    _Atomic int bad;       /* thread numbers out of range, shared or not the caller's at 0;
                              tasks taken by one thread out of order */
    _Atomic int by_others; /* tasks started by threads other than 0 */
    int wait_others;       /* > 0: the caller's first task waits (at most 10 s) until this
                              many have */
    _Atomic bool waited;
    int fail_a, fail_b; /* tasks that fail (-1: none) */
    bool fail_others;   /* tasks on threads other than 0 fail */
} task_seen;

static task_seen TS; /* big: static */

static void task_reset(task_seen *ts, int n) {
    memset(ts, 0, sizeof *ts);
    ts->n = n;
    ts->caller = pthread_self();
    for (int t = 0; t < 256; t++) atomic_store(&ts->last[t], -1);
    ts->fail_a = ts->fail_b = -1;
}

static int task_fn(void *ctx, int i, int thread) {
    task_seen *ts = ctx;
    if (thread < 0 || thread >= ag_threads() || i < 0 || i >= ts->n) {
        atomic_fetch_add(&ts->bad, 1);
        return 0;
    }
    if (atomic_fetch_add(&ts->busy[thread], 1) != 0) atomic_fetch_add(&ts->bad, 1);
    if (atomic_exchange(&ts->last[thread], i) >= i) atomic_fetch_add(&ts->bad, 1);
    if ((thread == 0) != (pthread_equal(pthread_self(), ts->caller) != 0))
        atomic_fetch_add(&ts->bad, 1);
    ts->thread[i] = thread;
    atomic_fetch_add(&ts->runs[i], 1);
    if (thread != 0) atomic_fetch_add(&ts->by_others, 1);
    if (thread == 0 && ts->wait_others && !atomic_exchange(&ts->waited, true)) {
        double t0 = now_s();
        while (atomic_load(&ts->by_others) < ts->wait_others && now_s() - t0 < 10) {}
    }
    volatile double x = 0; /* a little work, so that tasks overlap */
    for (int k = 0; k < 2000; k++) x += k * 0.5;
    int rc = i == ts->fail_a || i == ts->fail_b ? ag_error("task %d failed", i) : 0;
    if (ts->fail_others && thread != 0) rc = ag_error("task %d failed in thread %d", i, thread);
    atomic_fetch_sub(&ts->busy[thread], 1);
    return rc;
}

static ag_task_result RES[MAX_TASKS];

/* Many counts of tasks on 1 to 7 threads, and 64 threads, with and without results. */
static void test_tasks_every_one_once(void) {
    static const int ns[] = {0, 1, 2, 3, 5, 64, 257, MAX_TASKS};
    static const int threads[] = {1, 2, 3, 4, 7, 64};
    int bad = 0;
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(threads[t]), 0);
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            for (int with = 0; with < 2; with++) {
                int n = ns[k];
                task_reset(&TS, n);
                bad += ag_run_tasks(n, task_fn, &TS, with ? RES : NULL) != 0;
                bad += atomic_load(&TS.bad);
                for (int i = 0; i < n; i++) {
                    bad += atomic_load(&TS.runs[i]) != 1;
                    if (with) bad += RES[i].status != AG_TASK_DONE || RES[i].error[0];
                }
            }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ag_run_tasks(-1, task_fn, &TS, NULL), -1);
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
}

/* Tasks 3 and 7 of 50 fail: the caller's error is task 3's on any thread count, tasks 0-2 are
 * done, tasks after 3 done, failed (7) or skipped, as their results say; one thread skips every
 * task after 3. */
static void test_tasks_first_failure(void) {
    for (int threads = 1; threads <= 4; threads++) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(threads), 0);
        for (int rep = 0; rep < 20; rep++) {
            task_reset(&TS, 50);
            TS.fail_a = 3, TS.fail_b = 7;
            bool with = rep % 2;
            ag_error("stale");
            CU_ASSERT_EQUAL(ag_run_tasks(50, task_fn, &TS, with ? RES : NULL), -1);
            CU_ASSERT_STRING_EQUAL(ag_last_error(), "task 3 failed");
            CU_ASSERT_EQUAL(atomic_load(&TS.bad), 0);
            for (int i = 0; i <= 3; i++) CU_ASSERT_EQUAL(atomic_load(&TS.runs[i]), 1);
            for (int i = 0; with && i < 50; i++) {
                int st = RES[i].status, ran = atomic_load(&TS.runs[i]);
                if (i < 3) CU_ASSERT_EQUAL(st, AG_TASK_DONE);
                if (i == 3 || (i == 7 && ran)) CU_ASSERT_EQUAL(st, AG_TASK_FAILED);
                if (st == AG_TASK_FAILED)
                    CU_ASSERT_EQUAL(
                        strcmp(RES[i].error, i == 3 ? "task 3 failed" : "task 7 failed"), 0);
                CU_ASSERT_EQUAL(ran, st != AG_TASK_SKIPPED);
                if (threads == 1 && i > 3) CU_ASSERT_EQUAL(st, AG_TASK_SKIPPED);
            }
        }
    }
    task_reset(&TS, 1); /* one task: run in the caller */
    TS.fail_a = 0;
    CU_ASSERT_EQUAL(ag_run_tasks(1, task_fn, &TS, RES), -1);
    CU_ASSERT_STRING_EQUAL(ag_last_error(), "task 0 failed");
    CU_ASSERT_EQUAL(RES[0].status, AG_TASK_FAILED);
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
}

/* A task failing in a worker (the caller's task waits until the worker has started one): its
 * message, recorded in the worker's error store, becomes the caller's. */
static void test_tasks_worker_error(void) {
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
    for (int rep = 0; rep < 10; rep++) {
        task_reset(&TS, 2);
        TS.wait_others = 1;
        TS.fail_others = true;
        ag_error("stale");
        CU_ASSERT_EQUAL(ag_run_tasks(2, task_fn, &TS, RES), -1);
        /* the worker's task; the other ran in the caller, or was skipped when the worker took
         * task 0 and failed before the caller took task 1 */
        int w = atomic_load(&TS.runs[0]) && TS.thread[0] == 1 ? 0 : 1;
        bool other_ran = atomic_load(&TS.runs[!w]);
        char want[64];
        snprintf(want, sizeof want, "task %d failed in thread 1", w);
        CU_ASSERT_EQUAL(TS.thread[w], 1);
        CU_ASSERT(w == 0 || other_ran); /* task 0 is taken before task 1 */
        if (other_ran) CU_ASSERT_EQUAL(TS.thread[!w], 0);
        CU_ASSERT_STRING_EQUAL(ag_last_error(), want);
        CU_ASSERT_EQUAL(RES[!w].status, other_ran ? AG_TASK_DONE : AG_TASK_SKIPPED);
        CU_ASSERT_EQUAL(RES[w].status, AG_TASK_FAILED);
        CU_ASSERT_STRING_EQUAL(RES[w].error, want);
        CU_ASSERT_EQUAL(atomic_load(&TS.bad), 0);
    }
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
}

/* Inside a task, tasks run in order in its thread, as thread 0, and a region runs serially. */
typedef struct outer_seen {
    _Atomic int bad, runs;
} outer_seen;

static int inner_fn(void *ctx, int i, int thread) {
    int *next = ctx; /* the task expected */
    if (thread != 0 || i != *next) return ag_error("inner task %d on thread %d", i, thread);
    (*next)++;
    return 0;
}

static int outer_fn(void *ctx, int i, int thread) {
    outer_seen *os = ctx;
    (void)i, (void)thread;
    int next = 0;
    if (ag_run_tasks(5, inner_fn, &next, NULL) || next != 5) atomic_fetch_add(&os->bad, 1);
    nested_seen ns = {pthread_self(), 0, 0};
    ag_parallel_for(100, 1, nested_fn, &ns);
    if (ns.calls != 1 || ns.bad) atomic_fetch_add(&os->bad, 1);
    atomic_fetch_add(&os->runs, 1);
    return 0;
}

static void test_tasks_nested(void) {
    for (int t = 1; t <= 4; t++) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(t), 0);
        for (int rep = 0; rep < 20; rep++) {
            outer_seen os = {0, 0};
            CU_ASSERT_EQUAL(ag_run_tasks(9, outer_fn, &os, NULL), 0);
            CU_ASSERT_EQUAL(atomic_load(&os.bad), 0);
            CU_ASSERT_EQUAL(atomic_load(&os.runs), 9);
        }
    }
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
}

/* Counts the tasks of TS run on thread numbers other than 0. */
static int tasks_by_others(void) {
    int k = 0;
    for (int i = 0; i < TS.n; i++) k += TS.thread[i] != 0;
    return k;
}

/* A starved worker judges itself before each task: it runs two tasks (the caller's first task
 * waits for them), is found starved twice, and takes no more; the next call runs every task in
 * the caller, until the hook's clock has advanced 250 ms (then 500 ms). A worker given its CPU
 * time keeps taking tasks. */
static void test_tasks_starved_worker(void) {
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
    hook_on(true);
    for (int round = 0; round < 2; round++) {
        task_reset(&TS, 10);
        TS.wait_others = 2;
        CU_ASSERT_EQUAL(ag_run_tasks(10, task_fn, &TS, NULL), 0);
        CU_ASSERT_EQUAL(tasks_by_others(), 2);
        for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(atomic_load(&TS.runs[i]), 1);
        CU_ASSERT_EQUAL(atomic_load(&TS.bad), 0);
        task_reset(&TS, 10);
        CU_ASSERT_EQUAL(ag_run_tasks(10, task_fn, &TS, NULL), 0);
        CU_ASSERT_EQUAL(tasks_by_others(), 0);
        CU_ASSERT_EQUAL(atomic_load(&TS.bad), 0);
        advance_ms(round == 0 ? 250 : 500);
    }
    hook_on(false);
    task_reset(&TS, 10);
    TS.wait_others = 5;
    CU_ASSERT_EQUAL(ag_run_tasks(10, task_fn, &TS, NULL), 0);
    CU_ASSERT(tasks_by_others() >= 5);
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(atomic_load(&TS.runs[i]), 1);
    hook_off();
}

/* ag_parallel_blocks: what one call saw. */
typedef struct blocks_seen {
    ptrdiff_t n, block;
    pthread_t owner; /* the thread that made the call */
    _Atomic int runs[256];
    _Atomic int calls;       /* of fn */
    _Atomic int helped;      /* blocks run by another thread */
    _Atomic int bad;         /* inside a task: a call other than one block, or blocks
                                started inside a block that did not run as one call */
    _Atomic int started;     /* tasks that have begun (the rendezvous) */
    bool in_task, wait_help; /* the owner waits (at most 10 s) for a helped block */
} blocks_seen;

static blocks_seen BS;

static void block_fn(void *ctx, ptrdiff_t b, ptrdiff_t e) {
    blocks_seen *bs = ctx;
    atomic_fetch_add(&bs->calls, 1);
    if (bs->in_task && (b % bs->block || (e - b != bs->block && e != bs->n)))
        atomic_fetch_add(&bs->bad, 1);
    for (ptrdiff_t i = b; i < e; i++) atomic_fetch_add(&bs->runs[i], 1);
    if (bs->in_task) { /* blocks inside a block: one serial call */
        nested_seen ns = {pthread_self(), 0, 0};
        ag_parallel_blocks(100, 1, nested_fn, &ns);
        if (ns.calls != 1 || ns.bad) atomic_fetch_add(&bs->bad, 1);
    }
    if (!pthread_equal(pthread_self(), bs->owner)) {
        atomic_fetch_add(&bs->helped, (int)(e - b));
    } else if (bs->wait_help) {
        double t0 = now_s();
        while (atomic_load(&bs->helped) == 0 && now_s() - t0 < 10) {}
    }
}

/* Task 0 returns at once (after both tasks have begun, at most 10 s); task 1 runs the blocks. */
static int blocks_task(void *ctx, int i, int thread) {
    blocks_seen *bs = ctx;
    (void)thread;
    atomic_fetch_add(&bs->started, 1);
    double t0 = now_s();
    while (ag_threads() > 1 && atomic_load(&bs->started) < 2 && now_s() - t0 < 10) {}
    if (i == 1) {
        bs->owner = pthread_self();
        ag_parallel_blocks(bs->n, bs->block, block_fn, bs);
    }
    return 0;
}

static void blocks_reset(blocks_seen *bs, ptrdiff_t n, ptrdiff_t block, bool in_task,
                         bool wait_help) {
    memset(bs, 0, sizeof *bs);
    bs->n = n;
    bs->block = block;
    bs->owner = pthread_self();
    bs->in_task = in_task;
    bs->wait_help = wait_help;
}

static int blocks_run_once(const blocks_seen *bs) {
    int bad = 0;
    for (ptrdiff_t i = 0; i < bs->n; i++) bad += atomic_load(&bs->runs[i]) != 1;
    return bad;
}

/* Inside a task on two threads, the blocks (of 1 and of 7 indices, the last 4) run one at a
 * time, each index once, and the thread whose task has ended takes some (the owner's first
 * block waits for it, at most 10 s); blocks started inside a block run as one call. Outside a
 * task, or with one thread, it is ag_parallel_for: one range per thread. */
static void test_blocks_shared_with_idle_threads(void) {
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
    hook_on(false); /* the worker counted fed, whatever else the machine runs */
    for (int rep = 0; rep < 20; rep++) {
        int block = rep % 2 ? 7 : 1;
        blocks_reset(&BS, 200, block, true, rep < 10);
        CU_ASSERT_EQUAL(ag_run_tasks(2, blocks_task, &BS, NULL), 0);
        CU_ASSERT_EQUAL(blocks_run_once(&BS), 0);
        CU_ASSERT_EQUAL(atomic_load(&BS.calls), (200 + block - 1) / block);
        CU_ASSERT_EQUAL(atomic_load(&BS.bad), 0);
        if (rep < 10) CU_ASSERT(atomic_load(&BS.helped) > 0);
    }
    blocks_reset(&BS, 100, 1, false, false); /* outside a task */
    ag_parallel_blocks(100, 1, block_fn, &BS);
    CU_ASSERT_EQUAL(blocks_run_once(&BS), 0);
    CU_ASSERT_EQUAL(atomic_load(&BS.calls), 2);
    hook_off();                             /* and one thread */
    blocks_reset(&BS, 50, 1, false, false); /* one thread: the tasks in turn, ag_parallel_for */
    CU_ASSERT_EQUAL(ag_run_tasks(2, blocks_task, &BS, NULL), 0);
    CU_ASSERT_EQUAL(blocks_run_once(&BS), 0);
    CU_ASSERT_EQUAL(atomic_load(&BS.calls), 1);
    CU_ASSERT_EQUAL(atomic_load(&BS.helped), 0);
    blocks_reset(&BS, 3, 2, false, false); /* fewer than two blocks: one call */
    ag_parallel_blocks(3, 2, block_fn, &BS);
    CU_ASSERT_EQUAL(blocks_run_once(&BS), 0);
    CU_ASSERT_EQUAL(atomic_load(&BS.calls), 1);
}

static CU_TestInfo tests[] = {
    {"every task once, in order, unique thread numbers", test_tasks_every_one_once},
    {"the first failure by index, whatever the threads", test_tasks_first_failure},
    {"a worker's error reaches the caller", test_tasks_worker_error},
    {"nested calls run in order in their thread", test_tasks_nested},
    {"a starved worker takes no more tasks (injected)", test_tasks_starved_worker},
    {"blocks inside a task are shared with idle threads", test_blocks_shared_with_idle_threads},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("tasks", tests); }
