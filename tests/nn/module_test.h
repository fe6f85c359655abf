/* module_test.h -- what the module tests share (test_module.c, test_module_run.c,
 * tests/optim/test_train_step.c): inputs from a seed, and a bit-for-bit comparison. */
#ifndef TG_TEST_MODULE_TEST_H
#define TG_TEST_MODULE_TEST_H

#include <stdbool.h>
#include <string.h>

#include "autograd/ag.h"

/* x[0..n) = N(0, 1) draws from a stream seeded with seed */
static inline void fill(ag_real *x, size_t n, uint64_t seed) {
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (ag_real)ag_rng_normal(&r);
}

static inline bool same_bits(const ag_real *a, const ag_real *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

#endif
