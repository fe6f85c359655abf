/* bench_util.h -- the timing code of the benchmark programs (header only; plain C, no library):
 *
 *     double t0 = bench_now();                       // seconds, CLOCK_MONOTONIC
 *     ... v[rep] = bench_now() - t0; ...
 *     double m = bench_median(v, reps);              // sorts v[0..reps) in place
 *     double c0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);  // any clock
 *
 * clock_gettime needs POSIX: the including file defines _POSIX_C_SOURCE 200809L before its
 * first #include. The benchmarks are built, never run by ctest (docs/benchmarks.md). */
#ifndef TG_BENCH_UTIL_H
#define TG_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Seconds on clock clk (CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID ...). */
static inline double bench_clock(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds on the monotonic clock. */
static inline double bench_now(void) { return bench_clock(CLOCK_MONOTONIC); }

/* qsort's comparison of doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) ascending. */
static inline void bench_sort(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
}

/* The median of v[0..n) (n >= 1; the mean of the middle two when n is even); sorts v. */
static inline double bench_median(double *v, int n) {
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
