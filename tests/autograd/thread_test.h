/* thread_test.h -- what the tests of the thread pool share (header only): test_threads.c
 * (ag_parallel_for) and test_tasks.c (ag_run_tasks).
 *
 * No test depends on the scheduler's timing: starvation is injected through ag_set_starve_hook,
 *
 *     hook_on(true);        // a fake clock; every worker (thread number >= 1) counted starved
 *     advance_ms(250);      // the fake clock moves on
 *     hook_on(false);       // workers counted fed
 *     hook_off();           // no hook, one thread
 *
 * and waits are bounded by a real clock: while (!done && now_s() - t0 < 10) {}. */
#ifndef TG_THREAD_TEST_H
#define TG_THREAD_TEST_H

#include "autograd/ag.h"
#include "tests/tg_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* The monotonic clock, in seconds. */
static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The hook: a fake clock, and every worker counted as starved or not. */
static _Atomic int64_t fake_ns = 1; /* the hook's time */
static _Atomic bool worker_starved;

static inline int64_t fake_now(void *user) {
    (void)user;
    return atomic_load(&fake_ns);
}
static inline bool fake_starved(int worker, void *user) {
    (void)user;
    return worker >= 1 && atomic_load(&worker_starved);
}
/* Installs the hook (asserts it was taken), workers counted starved or not. */
static inline void hook_on(bool starved) {
    atomic_store(&worker_starved, starved);
    ag_starve_hook h = {fake_now, fake_starved, NULL};
    CU_ASSERT_EQUAL_FATAL(ag_set_starve_hook(&h), 0);
}
/* Removes the hook and goes back to one thread (asserts both were taken). */
static inline void hook_off(void) {
    CU_ASSERT_EQUAL(ag_set_starve_hook(NULL), 0);
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
}
/* Moves the hook's clock on by ms milliseconds. */
static inline void advance_ms(int ms) { atomic_fetch_add(&fake_ns, (int64_t)ms * 1000000); }

/* A region nested in a range or a task must be one serial call in its thread: nested_fn (an
 * ag_parallel_for body, ctx a nested_seen) counts its calls and those that were not. */
typedef struct nested_seen {
    pthread_t thread;
    int calls, bad;
} nested_seen;

static inline void nested_fn(void *ctx, ptrdiff_t b, ptrdiff_t e) {
    nested_seen *ns = ctx;
    ns->calls++;
    if (!pthread_equal(pthread_self(), ns->thread) || b != 0 || e <= 0) ns->bad++;
}

#endif
